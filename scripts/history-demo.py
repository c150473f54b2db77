#!/usr/bin/env python3
"""A history that shows the step: a demo branch of ten commits, one of which slows one kernel by a little, benchmarked
commit by commit with asv on a GPU box, published with `sgemm publish`, and checked: asv's Regressions page must list
that kernel (and its precision twin, where they share the code) at that commit and nothing else.

Two scenarios (--scenario):
  warptile  the sixth commit makes every block of fp32/warptile spin for SM cycles proportional to K before it starts
            (about --percent 3% longer); judged on its time (track_time) at 4096, beside fp32/cublas and fp32/float4.
  hopper    the sixth commit makes the TMA-store epilogue of kernels/wgmma_specialized.cu spin for SM cycles each
            tile (about --percent 1% longer at 8192), which fp16/ and bf16/wgmma_grouped_tma_store share; judged on
            their time over the reference build (track_time_over_reference: the kernel as the branch's base has it
            and as the commit has it, timed paired in one process), since at 8192 the card runs at its power cap and
            its clock moves the raw time by several percent between processes. Beside them fp16/wgmma_cluster (the
            same file, an unchanged program) and fp16/cublas. The first commit names the branch's base as the
            catalogue's [suite] reference.
In either, the other nine commits change documentation only, and what the kernel computes is unchanged.

Two steps, because the GPU box has no browser and the browser box has no GPU:

  scripts/history-demo.py run OUT [--scenario warptile|hopper] [--percent P] [--size N]          (on a GPU box)
      In a scratch clone of HEAD, the ten commits on a branch `main`. Then, for each commit in turn, `git checkout`
      and `asv run --python=same --set-commit-hash` over the scenario's cases (its tracks, every sample recorded):
      the checkout's package is what runs, every case of a commit measured in one process (SGEMM_RUN_CASES) and,
      for hopper, against the base's tree (SGEMM_REFERENCE_TREE). Writes OUT/history-demo.tar.gz (the asv
      results, the demo branch as a git bundle, and what was run) and OUT/asv.log; prints each case's figure per
      commit, then the check below on a plain `asv publish`. Needs asv and cuda-bench importable, as for
      `asv run --python=same`.
  scripts/history-demo.py publish ARCHIVE [--docs docs/history] [--npm-cache DIR]          (anywhere, no GPU)
      `sgemm publish` of the archive's results against its demo branch, the check, then headless-Chromium
      screenshots of the Regressions page and of the slowed kernel's history graph, and a README with the figures,
      into --docs. When the check fails, they go to a scratch folder instead and docs/ is left alone.
  scripts/history-demo.py synthetic OUT                                                         (no GPU)
      The archive `run` would write, from made-up figures (a 3% step at the sixth commit), to try `publish` with.

The check: regressions.json lists exactly the slowed kernels' judged track, at the slowing commit alone (not a range
of commits). asv lists a step only when it exceeds `regressions_thresholds` (default 5%), so the demo publishes with
--threshold (2% for warptile's time, 0.5% for hopper's paired ratio) on the judged track and with regression
detection off for every other track (a higher SM clock, or a clock-driven time at the power cap, is no regression of
the code): both set in the scratch clone's asv.conf.json, never in this repository's.

Exit status: 0 the check passed; 1 it failed, or a benchmark or the site failed; 2 the demo could not start (no GPU,
no asv, a kernel file this script does not know how to edit, a malformed archive).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sgemm import asvsuite  # noqa: E402

COMMITS = 10
SLOW_AT = 6  # the slowing commit's place on the branch, counted from 1: five commits before it, four after
ARCHIVE = "history-demo.tar.gz"
BUNDLE, METADATA, RESULTS = "demo.bundle", "demo.json", "results"
COMMITTER = {"GIT_AUTHOR_NAME": "history demo", "GIT_AUTHOR_EMAIL": "history-demo@localhost",
             "GIT_COMMITTER_NAME": "history demo", "GIT_COMMITTER_EMAIL": "history-demo@localhost"}
SCREEN = {"width": 1280, "height": 800, "wait_ms": 15000}


@dataclass(frozen=True)
class Scenario:
    """What the sixth commit slows, how, and on which track the Regressions page must show it."""

    name: str
    slowed: tuple[str, ...]  # the kernels the edit changes: one, or precision twins sharing the code
    source: str  # the file it edits
    controls: tuple[str, ...]  # unchanged on the branch: their judged figure must stay flat
    judged: str  # the track the check reads
    size: int  # default square size
    percent: float  # default slowdown
    threshold: float  # default regressions_thresholds of the judged track
    paired: bool  # the first commit names the branch's base as [suite] reference, and the runs time against it
    # Made-up levels for `synthetic`: the judged figure of each case, and its noise from one commit to the next
    synthetic_levels: tuple[tuple[str, float], ...]
    synthetic_noise: float

    @property
    def cases(self) -> tuple[str, ...]:
        return (*self.controls, *self.slowed)

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.judged, asvsuite.TIME, asvsuite.SM_CLOCK)))

    @property
    def not_judged(self) -> str:
        """regressions_first_commits' key that turns detection off for every other track: a faster clock is no
        regression, and at the power cap neither is a time the clock moved."""
        return rf".*\.({'|'.join(t for t in asvsuite.TRACKS if t != self.judged)})\("


SCENARIOS = {
    "warptile": Scenario("warptile", ("fp32/warptile",), "kernels/fp32_warptile.cu", ("fp32/cublas", "fp32/float4"),
                         asvsuite.TIME, 4096, 3.0, 0.02, False,
                         (("fp32/cublas", 2.66e-3), ("fp32/float4", 3.91e-3), ("fp32/warptile", 5.05e-3)), 0.001),
    "hopper": Scenario("hopper", ("fp16/wgmma_grouped_tma_store", "bf16/wgmma_grouped_tma_store"),
                       "kernels/wgmma_specialized.cu", ("fp16/cublas", "fp16/wgmma_cluster"),
                       asvsuite.OVER_REFERENCE, 8192, 1.0, 0.005, True,
                       (("fp16/cublas", 1.0), ("fp16/wgmma_cluster", 1.0), ("fp16/wgmma_grouped_tma_store", 1.0),
                        ("bf16/wgmma_grouped_tma_store", 1.0)), 0.0005),
}


class DemoError(RuntimeError):
    """The demo cannot start or go on; the message says why."""


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str


@dataclass
class Demo:
    """What `run` (or `synthetic`) did, as the archive's demo.json keeps it for `publish`."""

    commits: list[Commit]
    size: int
    percent: float
    machine: str
    gpu: str
    started: str
    asv_seconds: list[float]
    asv_exit: list[int]
    driver: str = ""
    synthetic: bool = False
    scenario_name: str = "warptile"

    @property
    def scenario(self) -> Scenario:
        return SCENARIOS[self.scenario_name]

    @property
    def slow_commit(self) -> Commit:
        return self.commits[SLOW_AT - 1]

    @property
    def cases(self) -> tuple[str, ...]:
        return self.scenario.cases

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Demo:
        data = json.loads(path.read_text())
        data["commits"] = [Commit(**commit) for commit in data["commits"]]
        return cls(**data)


# --- The demo branch ---------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise DemoError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.strip()


# SM cycles of spin per unit of K, per 1% of slowdown of fp32/warptile: a block's main loop runs K / BK steps, so a
# spin proportional to K costs the same share of its time at every size. Measured on an H100 at 4096
# (scripts/gate-selftest.py): 18 cycles per unit of K made it 3.0-3.1% slower, alike in the gate and side by side.
SPIN_PER_K_PER_PERCENT = 6
# SM cycles of spin per tile in the TMA-store epilogue, per 1% of slowdown of wgmma_grouped_tma_store at 8192: 800 made
# it 0.57% (FP16) and 0.60% (BF16) slower on an H100, paired in one process (docs/gate/).
SPIN_PER_TILE_PER_PERCENT = 1400


def _edit(source: Path, anchor: str, addition: str) -> None:
    text = source.read_text()
    if text.count(anchor) != 1:
        raise DemoError(f"{source} is not the kernel this demo edits: it expects one `{anchor.strip()}`")
    source.write_text(text.replace(anchor, addition + anchor))


def slow_down(scenario: Scenario, source: Path, percent: float) -> None:
    """Make the scenario's kernels spin on the SM's cycle counter: about `percent`% slower, what they compute
    unchanged."""
    if scenario.name == "warptile":
        spin = round(percent * SPIN_PER_K_PER_PERCENT)
        _edit(source, "    constexpr int WARP = 32;\n",  # the kernel's first statement
              f"    // History demo: spin {spin} SM cycles per unit of K before the block starts, about {percent:g}% "
              "of its time.\n"
              f"    for (const long long until = clock64() + {spin}LL * K; clock64() < until;) {{\n    }}\n")
    else:
        spin = round(percent * SPIN_PER_TILE_PER_PERCENT)
        _edit(source, "                float* buffers = reinterpret_cast<float*>(shared + STAGES * L::kStageBytes) +",
              f"                // History demo: spin {spin} SM cycles a tile before its TMA stores.\n"
              f"                for (const long long until = clock64() + {spin}; clock64() < until;) {{\n"
              "                }\n")


def name_reference(catalogue: Path, commit: str) -> None:
    """Make `commit` the catalogue's [suite] reference (the line is there, naming another)."""
    text = catalogue.read_text()
    lines = [line for line in text.splitlines() if line.startswith("reference = ")]
    if len(lines) != 1:
        raise DemoError(f"{catalogue} has no single `reference = ...` line in its [suite] table")
    catalogue.write_text(text.replace(lines[0], f'reference = "{commit}"'))


def build_branch(clone: Path, scenario: Scenario, percent: float) -> list[Commit]:
    """Clone HEAD into `clone` and commit the demo's ten changes on a branch `main` there (asv.conf.json's branch).
    Author, committer and dates are fixed (a minute apart after HEAD's), so the same HEAD gives the same hashes."""
    git(ROOT, "clone", "-q", "--no-hardlinks", str(ROOT), str(clone))
    git(clone, "checkout", "-q", "-B", "main")
    base_time = int(git(clone, "log", "-1", "--format=%ct"))
    base = git(clone, "rev-parse", "HEAD")
    commits = []
    for number in range(1, COMMITS + 1):
        if number == SLOW_AT:
            slow_down(scenario, clone / scenario.source, percent)
            subject = f"{' and '.join(scenario.slowed)}: a spin of about {percent:g}% of the time"
        elif number == 1 and scenario.paired:
            name_reference(clone / "sgemm" / "catalogue.toml", base)
            subject = f"catalogue: the history's reference is {base[:8]}, the branch's base"
        else:
            with open(clone / "README.md", "a") as readme:
                readme.write(f"\nHistory demo: documentation change {number}.\n")
            subject = f"README: documentation change {number}"
        stamp = f"@{base_time + 60 * number} +0000"
        env = dict(os.environ, **COMMITTER, GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        git(clone, "commit", "-q", "-a", "-m", subject, env=env)
        commits.append(Commit(git(clone, "rev-parse", "HEAD"), subject))
    return commits


# --- asv's names for the cases ---------------------------------------------------------------------------------


def case(name: str, size: int) -> asvsuite.SuiteCase:
    return asvsuite.SuiteCase.square(name, size)


def bench_regex(scenario: Scenario, size: int) -> str:
    return "|".join(case(name, size).pattern(scenario.methods) for name in scenario.cases)


def read_figures(results_dir: Path, demo: Demo) -> dict[tuple[str, str, str], float | None]:
    """(commit, method, kernel) -> asv's value (a median, from the samples); None where asv recorded none."""
    figures: dict[tuple[str, str, str], float | None] = {}
    for commit in demo.commits:
        found = asvsuite.runs(results_dir, demo.machine, commit.hash)
        for method, name in itertools.product(demo.scenario.methods, demo.cases):
            value = found[-1].value(case(name, demo.size), method) if found else None
            figures[commit.hash, method, name] = None if value is None or math.isnan(value) else value
    return figures


def history_table(results_dir: Path, demo: Demo) -> list[str]:
    """Markdown: each commit's judged figure per case (the median time in ms, or the median ratio to the reference
    build) and the slowed kernel's SM clock, then each case's ratio of the median of its figures from the slowing
    commit on to the median before it."""
    figures = read_figures(results_dir, demo)
    judged, slowed = demo.scenario.judged, demo.scenario.slowed[0]
    scale, digits, unit = (1e3, 4, "ms") if judged == asvsuite.TIME else (1, 5, "over the reference")

    def cell(value: float | None, scale: float, digits: int) -> str:
        return "none" if value is None else f"{value * scale:.{digits}f}"

    lines = ["| # | commit | change | " + " | ".join(f"{name} ({unit})" for name in demo.cases)
             + f" | {slowed} SM clock (MHz) |", "|---" * (len(demo.cases) + 4) + "|"]
    for number, commit in enumerate(demo.commits, 1):
        values = [cell(figures[commit.hash, judged, name], scale, digits) for name in demo.cases]
        clock = cell(figures[commit.hash, asvsuite.SM_CLOCK, slowed], 1, 0)
        marker = " **←**" if commit == demo.slow_commit else ""
        lines.append(f"| {number} | `{commit.hash[:8]}` | {commit.subject}{marker} | {' | '.join(values)} | {clock} |")
    ratios = []
    for name in demo.cases:
        times = [figures[commit.hash, judged, name] for commit in demo.commits]
        before, after = times[:SLOW_AT - 1], times[SLOW_AT - 1:]
        if None in times:
            ratios.append(f"{name} n/a")
        else:
            ratios.append(f"{name} {statistics.median(after) / statistics.median(before):.4f}")
    return lines + ["", "Median figure from the slowing commit on / median before it: " + ", ".join(ratios) + "."]


# --- The check ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One regression as asv's Regressions page shows it."""

    name: str
    commit: str  # the first commit with the higher value
    range_start: str | None  # the last commit before it, when asv could not pin the step to one commit
    before: float
    after: float


def listed_regressions(html_dir: Path) -> list[Listed]:
    index = json.loads((html_dir / "index.json").read_text())
    hashes = {int(revision): commit for revision, commit in index["revision_to_hash"].items()}
    listed = []
    for name, _graph, _params, _index, _last, _best, jumps in json.loads(
            (html_dir / "regressions.json").read_text())["regressions"]:
        for start, end, before, after in jumps or []:
            listed.append(Listed(name, hashes[end], None if start is None else hashes[start], before, after))
    return listed


def expected_entries(demo: Demo) -> list[str]:
    return sorted(case(name, demo.size).entry(demo.scenario.judged) for name in demo.scenario.slowed)


def check(html_dir: Path, demo: Demo) -> bool:
    """Print what the published regressions.json lists; True when it is the slowed kernels at the slowing commit
    alone, and nothing else."""
    expected = expected_entries(demo)
    subjects = {commit.hash: commit.subject for commit in demo.commits}
    listed = listed_regressions(html_dir)
    print(f"Regressions page ({html_dir / 'regressions.json'}): {len(listed)} listed; expected {', '.join(expected)}"
          f" at {demo.slow_commit.hash[:8]} ({demo.slow_commit.subject}) alone")
    for item in listed:
        where = (f"{item.commit[:8]}" if item.range_start is None
                 else f"somewhere in {item.range_start[:8]}..{item.commit[:8]}")
        print(f"    {item.name} at {where} ({subjects.get(item.commit, 'not a demo commit')}): "
              f"{item.before:.6g} -> {item.after:.6g} ({item.after / item.before - 1:+.2%})")
    passed = sorted((item.name, item.commit, item.range_start) for item in listed) == [
        (name, demo.slow_commit.hash, None) for name in expected]
    print(f"check: {'PASS' if passed else 'FAIL'}")
    return passed


def set_regression_settings(config: Path, scenario: Scenario, threshold: float) -> None:
    """The demo's regression settings in the scratch clone's asv.conf.json (rewritten without its comments)."""
    from asv.util import load_json

    conf = load_json(str(config), js_comments=True)
    conf["regressions_thresholds"] = {".*": threshold}
    conf["regressions_first_commits"] = {scenario.not_judged: None}
    config.write_text(json.dumps(conf, indent=2) + "\n")


# --- run: on the GPU box -----------------------------------------------------------------------------------------


def pack(out: Path, clone: Path, demo: Demo) -> Path:
    """OUT/history-demo.tar.gz: the asv results, the demo branch as a git bundle and demo.json."""
    with tempfile.TemporaryDirectory(prefix="history-demo-pack-") as staging:
        git(clone, "bundle", "create", str(Path(staging) / BUNDLE), "main")
        demo.save(Path(staging) / METADATA)
        archive = out / ARCHIVE
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(clone / RESULTS, RESULTS)
            tar.add(Path(staging) / BUNDLE, BUNDLE)
            tar.add(Path(staging) / METADATA, METADATA)
    return archive


def asv_run(commit: Commit, machine: str, regex: str) -> list[str]:
    """One commit's asv run on this interpreter: the suite and the package are the clone's checkout (ASV_PYTHONPATH),
    and asv files the results under the commit's hash."""
    return [sys.executable, "-m", "asv", "run", "--python=same", "--set-commit-hash", commit.hash, "--machine",
            machine, "--record-samples", "--show-stderr", "--bench", regex]


def in_clone(clone: Path, *command: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *command], cwd=clone, env=env, capture_output=True, text=True)


# The GPU's name and driver version, in the clone (its package); fails, saying why, where CUDA cannot be used.
PROBE = """from sgemm.measuring.record import device_info
print(device_info().name)
try:
    import pynvml
    pynvml.nvmlInit()
    print(pynvml.nvmlSystemGetDriverVersion())
except Exception:  # the driver's version only labels the figures
    print("")
"""


def cmd_run(args) -> int:
    try:
        import asv  # noqa: F401  (the runs below need it; say so before anything is built)
    except ImportError:
        raise DemoError("asv is not importable by this interpreter: install asv and cuda-bench, or put them on "
                        "PYTHONPATH and ASV_PYTHONPATH") from None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    clone = Path(tempfile.mkdtemp(prefix="history-demo-")) / "clone"
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    scenario = SCENARIOS[args.scenario]
    commits = build_branch(clone, scenario, args.percent)
    base = git(clone, "rev-parse", "--short", f"main~{COMMITS}")
    print(f"Demo branch `main` in {clone}, {COMMITS} commits on {base}:")
    for number, commit in enumerate(commits, 1):
        print(f"  {number:2} {commit.hash[:8]} {commit.subject}")

    # asv's benchmark processes see ASV_PYTHONPATH: the checkout's package first, so that each commit's code runs.
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               ASV_PYTHONPATH=os.pathsep.join(filter(None, [str(clone), os.environ.get("ASV_PYTHONPATH")])),
               **measuring_environment(clone, scenario, args.size))
    probe = in_clone(clone, "-c", PROBE, env=env)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DemoError(f"the asv runs need a CUDA GPU, and there is none usable here: {reason}")
    gpu, driver = (probe.stdout.splitlines() + [""])[:2]
    made = in_clone(clone, "-m", "sgemm", "machine", env=env)
    if made.returncode != 0:
        raise DemoError(f"sgemm machine exited {made.returncode}: {made.stderr.strip()}")
    machine = in_clone(clone, "-c", "from sgemm.machine import detect_identity, machine_name; "
                       "print(machine_name(detect_identity()))", env=env).stdout.strip()
    demo = Demo(commits, args.size, args.percent, machine, gpu, started, [], [], driver=driver,
                scenario_name=scenario.name)
    regex = bench_regex(scenario, args.size)
    print(f"asv run on {gpu} (machine {machine}), each commit in turn: --bench \"{regex}\"")
    with open(out / "asv.log", "w") as log:
        for number, commit in enumerate(commits, 1):
            git(clone, "checkout", "-q", commit.hash)
            begun = time.monotonic()
            log.write(f"\n===== {number} {commit.hash} {commit.subject}\n")
            log.flush()
            status = subprocess.run(asv_run(commit, machine, regex), cwd=clone, env=env, stdout=log,
                                    stderr=subprocess.STDOUT).returncode
            demo.asv_seconds.append(round(time.monotonic() - begun, 1))
            demo.asv_exit.append(status)
            print(f"  {number:2} {commit.hash[:8]}: asv exit {status}, {demo.asv_seconds[-1]:.0f} s", flush=True)
    git(clone, "checkout", "-q", "main")
    print(f"asv's output: {out / 'asv.log'}")
    return finish(out, clone, demo, args.threshold, env)


def measuring_environment(clone: Path, scenario: Scenario, size: int) -> dict[str, str]:
    """Every case of a commit measured in one process; for a paired scenario, against the base's build."""
    from sgemm.history import reference_tree
    from sgemm.measuring.record import CASES_VARIABLE, REFERENCE_VARIABLE

    env = {CASES_VARIABLE: json.dumps([[name, size, size, size] for name in scenario.cases])}
    if scenario.paired:
        tree = reference_tree(clone, clone.parent / "reference-trees")  # the branch's [suite] reference: its base
        env[REFERENCE_VARIABLE] = str(tree)
    return env


def finish(out: Path, clone: Path, demo: Demo, threshold: float, env: dict) -> int:
    """Pack the archive, print the figures, and make the same check as `publish` on a plain `asv publish` of the
    clone: a verdict before the results leave the box."""
    archive = pack(out, clone, demo)
    print(f"{archive} ({archive.stat().st_size // 1024} KiB)\n")
    print("\n".join(history_table(clone / RESULTS, demo)) + "\n")
    set_regression_settings(clone / "asv.conf.json", demo.scenario, threshold)  # after packing: commits only
    published = in_clone(clone, "-m", "asv", "publish", env=env)
    if published.returncode != 0:
        print(f"asv publish exited {published.returncode}:\n{(published.stdout + published.stderr)[-2000:]}")
        return 1
    passed = check(clone / "html", demo)
    if any(demo.asv_exit):
        print(f"asv exited non-zero for some commits ({demo.asv_exit}): a benchmark failed, see asv.log")
    return 0 if passed and not any(demo.asv_exit) else 1


# --- synthetic: the archive `run` would write, from made-up figures ----------------------------------------------

SYNTHETIC_MACHINE = {"machine": "nvidia-h100-80gb-hbm3", "arch": "x86_64", "cpu": "synthetic", "num_cpu": "16",
                     "os": "Linux", "ram": "134217728000", "gpu": "NVIDIA H100 80GB HBM3", "gpu_memory": "80 GiB",
                     "compute_capability": "9.0"}
# Samples a made-up figure has in one run (the judged figure's level and its noise between commits are the
# scenario's: an H100 moved a median time at 4096 by 0.05% between two runs of one commit in half its cases, and a
# paired ratio to the reference by about 0.05% between processes).
SYNTHETIC_SAMPLES = 200


def cmd_synthetic(args) -> int:
    """The clone and branch as `run` makes them; asv discovers the real suite there (one `asv run`, whose benchmarks
    fail for want of a GPU), then asv's own Results API writes every commit's made-up samples."""
    from asv.results import Results, iter_results_for_machine_and_hash
    from asv.runner import BenchmarkResult

    from sgemm.catalogue import get_kernel

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-synthetic-"))
    clone, home = scratch / "clone", scratch / "home"
    home.mkdir()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    scenario = SCENARIOS[args.scenario]
    commits = build_branch(clone, scenario, args.percent)
    machine = SYNTHETIC_MACHINE["machine"]
    # A HOME of its own: the made-up GPU's machine entry stays out of this user's ~/.asv-machine.json.
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: SYNTHETIC_MACHINE}))
    env = dict(os.environ, HOME=str(home), ASV_PYTHONPATH=str(clone))
    demo = Demo(commits, args.size, args.percent, machine, SYNTHETIC_MACHINE["gpu"], started, [], [], synthetic=True,
                scenario_name=scenario.name)
    subprocess.run(asv_run(commits[0], machine, bench_regex(scenario, args.size)), cwd=clone, env=env,
                   capture_output=True)
    results_dir = clone / RESULTS
    if not (results_dir / "benchmarks.json").is_file():
        raise DemoError(f"asv did not discover the suite in {clone}")
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    template = next(iter_results_for_machine_and_hash(str(results_dir), machine, commits[0].hash))
    rng = random.Random(SLOW_AT)
    levels = dict(scenario.synthetic_levels)
    for number, commit in enumerate(commits, 1):
        date = int(git(clone, "log", "-1", "--format=%at", commit.hash)) * 1000  # as asv dates a commit
        run = Results(template.params, {}, commit.hash, date, template.params["python"], template.env_name,
                      template.env_vars)
        for method in scenario.methods:
            benchmark = benchmarks[case(scenario.slowed[0], args.size).name(method)]
            combos = list(itertools.product(*benchmark["params"]))
            values, samples, numbers = [math.nan] * len(combos), [None] * len(combos), [None] * len(combos)
            for name in demo.cases:
                if method == asvsuite.OVER_REFERENCE and get_kernel(name).library:
                    continue  # the same library on both sides: the suite records no such figure
                if method == scenario.judged:
                    step = 1 + args.percent / 100 if name in scenario.slowed and number >= SLOW_AT else 1
                    noise = scenario.synthetic_noise
                    level, spread = levels[name] * step * rng.gauss(1, noise), noise
                elif method == asvsuite.TIME:  # at the power cap: several percent between processes
                    level, spread = 1.7e-3 * rng.gauss(1, 0.03), 0.01
                else:
                    level, spread = 1980.0, 0.0005
                j = combos.index(case(name, args.size).asv_params)
                samples[j] = [level * rng.gauss(1, spread) for _ in range(SYNTHETIC_SAMPLES)]
                values[j], numbers[j] = statistics.median(samples[j]), 1
            run.add_result(benchmark, BenchmarkResult(result=values, samples=samples, number=numbers, errcode=0,
                                                      stderr="", profile=None), record_samples=True)
        run.save(str(results_dir))
        demo.asv_seconds.append(0.0)
        demo.asv_exit.append(0)
    print(f"Made-up figures for {COMMITS} commits, a {args.percent:g}% step in {', '.join(scenario.slowed)} at "
          f"commit {SLOW_AT} ({demo.slow_commit.hash[:8]})")
    return finish(out, clone, demo, args.threshold, env)


# --- publish: the site, the check, the screenshots ---------------------------------------------------------------


def history_fragment(index: dict, demo: Demo) -> str:
    """The site's address of the slowed kernel's judged graph, its step marked as the Regressions page links it, with
    the y axis zoomed onto the data (asv starts a time axis at zero, where a step of a few percent is hard to see)."""
    slowed, judged = case(demo.scenario.slowed[0], demo.size), demo.scenario.judged
    names = index["benchmarks"][slowed.name(judged)]["param_names"]
    params = [(f"p-{name}", value) for name, value in zip(names, slowed.asv_params)]
    params += [("commits", demo.slow_commit.hash[:index.get("hash_length", 8)]), ("y-axis-scale", "zoom"),
               ("x-axis-scale", "even")]

    def quote(text: str) -> str:  # as JavaScript's encodeURIComponent, which asv's pages use
        return urllib.parse.quote(text, safe="-_.!~*'()")

    return f"#{slowed.name(judged)}?" + "&".join(f"{quote(key)}={quote(value)}" for key, value in params)


def screenshots(site: Path, demo: Demo, folder: Path) -> tuple[tuple[Path, Path], str]:
    """regressions.png and history.png of the site, rendered offline, and the Regressions page's DOM."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import site_screenshot

    index = json.loads((site / "index.json").read_text())
    shots = folder / "regressions.png", folder / "history.png"
    try:
        with site_screenshot.serve(site) as (base, _requests):
            dom = site_screenshot.render(f"{base}index.html#regressions", shots[0], **SCREEN)
            site_screenshot.render(f"{base}index.html{history_fragment(index, demo)}", shots[1], **SCREEN)
    except RuntimeError as exc:
        raise DemoError(str(exc)) from exc
    return shots, dom


def write_readme(folder: Path, demo: Demo, results_dir: Path, threshold: float, passed: bool) -> Path:
    machine = json.loads((results_dir / demo.machine / "machine.json").read_text())
    slow = demo.slow_commit
    lines = ["# A history that shows the step", ""]
    if demo.synthetic:
        lines += ["**Made-up figures** (`scripts/history-demo.py synthetic`): a trial of the publish step, not a "
                  "measurement.", ""]
    scenario = demo.scenario
    slowed = " and ".join(f"`{name}`" for name in scenario.slowed)
    judged = ("its time (`Gemm.track_time`)" if scenario.judged == asvsuite.TIME else
              "its time over the reference build (`Gemm.track_time_over_reference`: the kernel as the branch's base "
              "has it and as the commit has it, timed paired in one process)")
    lines += [
        f"A demo branch of {COMMITS} commits, benchmarked commit by commit with asv on one GPU and published with "
        f"`sgemm publish`. Commit {SLOW_AT} (`{slow.hash[:8]}`) makes {slowed} spin on the SM's cycle counter "
        f"(`{scenario.source}`, about {demo.percent:g}% of the time; what it computes is unchanged); the others "
        "change documentation only" + (", the first also naming the branch's base as the catalogue's `[suite] "
                                      "reference`" if scenario.paired else "") + f". Judged on {judged}. "
        + (f"asv's Regressions page lists {slowed} at that commit and nothing else." if passed else
           f"**The check failed**: asv's Regressions page does not list {slowed} at that commit alone."),
        "",
        "- `regressions.png`: the Regressions page of the published site.",
        f"- `history.png`: the history of `Gemm.{scenario.judged}` for `{scenario.slowed[0]}` at {demo.size}³, the "
        "commit marked (y axis zoomed onto the data).",
        "",
        f"GPU: {machine.get('gpu', demo.gpu)} ({machine.get('gpu_memory', '?')})"
        + (f", driver {demo.driver}" if demo.driver else "") + f", asv machine `{demo.machine}`, "
        f"{demo.started[:10]}" + ("" if demo.synthetic else
                                  f"; asv ran {sum(demo.asv_seconds):.0f} s over the {COMMITS} commits") + ". Cases: "
        f"{', '.join(demo.cases)} at {demo.size}³ ({', '.join(scenario.methods)}, every sample recorded). "
        "Figures are asv's medians of the samples. The demo branch is not in this repository's history: it lives in "
        "the archive `run` wrote (a git bundle beside the results).",
        "",
        *history_table(results_dir, demo),
        "",
        "How it was made:",
        "",
        f"1. On the GPU box: `scripts/history-demo.py run OUT --scenario {scenario.name} --percent {demo.percent:g} "
        f"--size {demo.size}` (for each commit of the demo branch in a scratch clone: `git checkout` and `asv run "
        "--python=same --set-commit-hash <commit> --record-samples --bench ...`).",
        f"2. Anywhere: `scripts/history-demo.py publish OUT/{ARCHIVE}` (`sgemm publish` of those results, then "
        "`scripts/site_screenshot.py`'s headless Chromium with every host but the loopback cut off).",
        "",
        f"asv lists only steps larger than `regressions_thresholds` (default 5%); the demo's site used "
        f"`{{\".*\": {threshold:g}}}`, and `regressions_first_commits` `{{\"{scenario.not_judged}\": null}}` so that "
        "no other track is judged (a faster SM clock reads as a rise, and at the power cap the raw time moves with "
        "the clock).",
    ]
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def unpack(archive: Path, into: Path) -> Demo:
    if archive.is_dir():
        archive = archive / ARCHIVE
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        return Demo.load(into / METADATA)
    except (OSError, tarfile.TarError, ValueError, KeyError, TypeError) as exc:
        raise DemoError(f"{archive}: not an archive of `history-demo.py run` ({exc})") from exc


def cmd_publish(args) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-publish-"))
    demo = unpack(args.archive.resolve(), scratch)
    clone, site, results_dir = scratch / "clone", scratch / "site", scratch / RESULTS
    git(scratch, "clone", "-q", "-b", "main", str(scratch / BUNDLE), str(clone))
    if git(clone, "rev-parse", "HEAD") != demo.commits[-1].hash:
        raise DemoError(f"the archive's branch does not end at its last demo commit {demo.commits[-1].hash}")
    threshold = demo.scenario.threshold if args.threshold is None else args.threshold
    set_regression_settings(clone / "asv.conf.json", demo.scenario, threshold)
    command = [sys.executable, "-m", "sgemm", "publish", "--results", str(results_dir), "--html", str(site),
               "--repo", str(clone)] + (["--npm-cache", str(args.npm_cache.resolve())] if args.npm_cache else [])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    print(done.stdout.strip())
    if done.returncode != 0:
        print(f"sgemm publish exited {done.returncode}:\n{done.stderr.strip()}", file=sys.stderr)
        return 1
    print("\n".join(history_table(results_dir, demo)) + "\n")
    passed = check(site, demo)
    docs = args.docs or ROOT / "docs" / "history" / ("" if demo.scenario.name == "warptile" else demo.scenario.name)
    folder = docs.resolve() if passed else scratch / "history"
    folder.mkdir(parents=True, exist_ok=True)
    if not passed:
        print(f"history-demo: the check failed: the screenshots go to {folder}, not to {docs}")
    shots, dom = screenshots(site, demo, folder)
    if passed and not all(entry in dom for entry in expected_entries(demo)):
        print(f"check: FAIL: the Regressions page, rendered, does not show it (see {shots[0]})")
        passed = False
    readme = write_readme(folder, demo, results_dir, threshold, passed)
    print(f"site: {site}\nwritten: {', '.join(str(path) for path in (*shots, readme))}")
    return 0 if passed else 1


COMMANDS = {"run": cmd_run, "publish": cmd_publish, "synthetic": cmd_synthetic}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="on a GPU box: build the demo branch, run asv over it, pack the results")
    run.add_argument("out", type=Path, help=f"where {ARCHIVE} and asv.log go")
    synthetic = sub.add_parser("synthetic", help="no GPU: the same archive, from made-up figures")
    synthetic.add_argument("out", type=Path, help=f"where {ARCHIVE} goes")
    for each in (run, synthetic):
        each.add_argument("--scenario", choices=sorted(SCENARIOS), default="warptile",
                          help="what the sixth commit slows (default warptile)")
        each.add_argument("--percent", type=float, help="how much slower it gets (default: 3 warptile, 1 hopper)")
        each.add_argument("--size", type=int, help="the square size of every case (default: 4096 warptile, "
                          "8192 hopper)")
    publish = sub.add_parser("publish", help="anywhere: publish an archive, check it, take the screenshots")
    publish.add_argument("archive", type=Path, help=f"{ARCHIVE} from `run` (or the folder holding it)")
    publish.add_argument("--docs", type=Path, help="where the screenshots and README go when the check passes "
                         "(default docs/history, or docs/history/hopper for that scenario)")
    publish.add_argument("--npm-cache", type=Path, help="the site's npm tarballs, where the registry is out of reach")
    for each in (run, synthetic, publish):
        each.add_argument("--threshold", type=float, help="asv's regressions_thresholds for the judged track "
                          "(default: 0.02 warptile's time, 0.005 hopper's ratio)")
    args = parser.parse_args(argv)
    if args.command in ("run", "synthetic"):
        scenario = SCENARIOS[args.scenario]
        args.percent = scenario.percent if args.percent is None else args.percent
        args.size = scenario.size if args.size is None else args.size
        args.threshold = scenario.threshold if args.threshold is None else args.threshold
    try:
        return COMMANDS[args.command](args)
    except DemoError as exc:
        print(f"history-demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
