#!/usr/bin/env python3
"""A history that shows the step: a demo branch of ten commits, one of which slows one kernel by about 3%, benchmarked
commit by commit with asv on a GPU box, published with `sgemm publish`, and checked: asv's Regressions page must list
that kernel at that commit and nothing else.

Two steps, because the GPU box has no browser and the browser box has no GPU:

  scripts/history-demo.py run OUT [--percent 3] [--size 4096]                                  (on a GPU box)
      In a scratch clone of HEAD, ten commits on a branch `main`: the sixth makes every block of fp32/warptile spin
      for a number of SM cycles proportional to K before it starts (about 3% longer; it still computes what it did,
      and its file holds no other kernel); the other nine change documentation only. Then, for each commit in
      turn, `git checkout` and `asv run --python=same --set-commit-hash` over fp32/cublas, fp32/float4 and
      fp32/warptile at 4096 (track_time and track_sm_clock, every NVBench sample recorded): the checkout's package
      is what runs. Writes OUT/history-demo.tar.gz (the asv results, the demo branch as a git bundle, and what was
      run) and OUT/asv.log; prints each case's time per commit, then the check below on a plain `asv publish`.
      Expect about 3 minutes on an H100. Needs asv and cuda-bench importable, as for `asv run --python=same`.
  scripts/history-demo.py publish ARCHIVE [--docs docs/history] [--npm-cache DIR]          (anywhere, no GPU)
      `sgemm publish` of the archive's results against its demo branch, the check, then headless-Chromium
      screenshots of the Regressions page and of the slowed kernel's history graph, and a README with the figures,
      into --docs. When the check fails, they go to a scratch folder instead and docs/ is left alone.
  scripts/history-demo.py synthetic OUT                                                         (no GPU)
      The archive `run` would write, from made-up figures (a 3% step at the sixth commit), to try `publish` with.

The check: regressions.json lists exactly one regression, the slowed kernel's track_time, at the slowing commit alone
(not a range of commits). asv lists a step only when it exceeds `regressions_thresholds` (default 5%), so the demo
publishes with 2% for every time (--threshold) and with regression detection off for the tracks that follow the GPU's
state (a higher SM clock is no regression): both set in the scratch clone's asv.conf.json, never in this repository's.

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
SLOWED = "fp32/warptile"  # its source file holds this kernel alone, so the edit slows nothing else
SLOWED_SOURCE = "kernels/fp32_warptile.cu"
CONTROLS = ("fp32/cublas", "fp32/float4")  # unchanged on the branch: their histories must stay flat
METHODS = (asvsuite.TIME, asvsuite.SM_CLOCK)
ARCHIVE = "history-demo.tar.gz"
BUNDLE, METADATA, RESULTS = "demo.bundle", "demo.json", "results"
# Regression settings of the published demo: a 3% step is below asv's default threshold of 5%. Steps of the rate
# and GPU-state tracks are not regressions of the code (asv counts every rise as one: a faster clock would be listed).
NOT_JUDGED = rf".*\.({'|'.join(t for t in asvsuite.TRACKS if t not in (asvsuite.TIME, asvsuite.ROUND_TIME))})\("
COMMITTER = {"GIT_AUTHOR_NAME": "history demo", "GIT_AUTHOR_EMAIL": "history-demo@localhost",
             "GIT_COMMITTER_NAME": "history demo", "GIT_COMMITTER_EMAIL": "history-demo@localhost"}
SCREEN = {"width": 1280, "height": 800, "wait_ms": 15000}


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

    @property
    def slow_commit(self) -> Commit:
        return self.commits[SLOW_AT - 1]

    @property
    def cases(self) -> tuple[str, ...]:
        return (*CONTROLS, SLOWED)

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


# SM cycles of spin per unit of K, per 1% of slowdown: a block's main loop runs K / BK steps, so a spin proportional
# to K costs the same share of its time at every size. Measured on an H100 at 4096 (scripts/gate-selftest.py): 18
# cycles per unit of K made fp32/warptile 3.0-3.1% slower, alike in the gate and side by side in one process.
SPIN_PER_K_PER_PERCENT = 6


def slow_down(source: Path, percent: float) -> None:
    """Make every block of the kernel in `source` spin on the SM's cycle counter before it starts, for a number of
    cycles proportional to K: about `percent`% slower at every size, and what it computes is unchanged."""
    first = "    constexpr int WARP = 32;\n"  # the kernel's first statement
    text = source.read_text()
    if text.count(first) != 1:
        raise DemoError(f"{source} is not the kernel this demo edits: it expects one `{first.strip()}`")
    spin = round(percent * SPIN_PER_K_PER_PERCENT)
    wait = (f"    // History demo: spin {spin} SM cycles per unit of K before the block starts, about {percent:g}% of "
            "its time.\n"
            f"    for (const long long until = clock64() + {spin}LL * K; clock64() < until;) {{\n    }}\n")
    source.write_text(text.replace(first, wait + first))


def build_branch(clone: Path, percent: float) -> list[Commit]:
    """Clone HEAD into `clone` and commit the demo's ten changes on a branch `main` there (asv.conf.json's branch).
    Author, committer and dates are fixed (a minute apart after HEAD's), so the same HEAD gives the same hashes."""
    git(ROOT, "clone", "-q", "--no-hardlinks", str(ROOT), str(clone))
    git(clone, "checkout", "-q", "-B", "main")
    base_time = int(git(clone, "log", "-1", "--format=%ct"))
    commits = []
    for number in range(1, COMMITS + 1):
        if number == SLOW_AT:
            slow_down(clone / SLOWED_SOURCE, percent)
            subject = f"{SLOWED}: every block spins about {percent:g}% of its time before it starts"
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


def bench_regex(cases: tuple[str, ...], size: int) -> str:
    return "|".join(case(name, size).pattern(METHODS) for name in cases)


def read_figures(results_dir: Path, demo: Demo) -> dict[tuple[str, str, str], float | None]:
    """(commit, method, kernel) -> asv's value (a median, from the samples); None where asv recorded none."""
    figures: dict[tuple[str, str, str], float | None] = {}
    for commit in demo.commits:
        found = asvsuite.runs(results_dir, demo.machine, commit.hash)
        for method, name in itertools.product(METHODS, demo.cases):
            value = found[-1].value(case(name, demo.size), method) if found else None
            figures[commit.hash, method, name] = None if value is None or math.isnan(value) else value
    return figures


def history_table(results_dir: Path, demo: Demo) -> list[str]:
    """Markdown: each commit's median time per case and the slowed kernel's SM clock, then each case's ratio of the
    median of its times after the slowing commit to the median before it."""
    figures = read_figures(results_dir, demo)

    def cell(value: float | None, scale: float, digits: int) -> str:
        return "none" if value is None else f"{value * scale:.{digits}f}"

    lines = ["| # | commit | change | " + " | ".join(f"{name} (ms)" for name in demo.cases)
             + f" | {SLOWED} SM clock (MHz) |", "|---" * (len(demo.cases) + 4) + "|"]
    for number, commit in enumerate(demo.commits, 1):
        times = [cell(figures[commit.hash, asvsuite.TIME, name], 1e3, 4) for name in demo.cases]
        clock = cell(figures[commit.hash, asvsuite.SM_CLOCK, SLOWED], 1, 0)
        marker = " **←**" if commit == demo.slow_commit else ""
        lines.append(f"| {number} | `{commit.hash[:8]}` | {commit.subject}{marker} | {' | '.join(times)} | {clock} |")
    ratios = []
    for name in demo.cases:
        times = [figures[commit.hash, asvsuite.TIME, name] for commit in demo.commits]
        before, after = times[:SLOW_AT - 1], times[SLOW_AT - 1:]
        if None in times:
            ratios.append(f"{name} n/a")
        else:
            ratios.append(f"{name} {statistics.median(after) / statistics.median(before):.4f}")
    return lines + ["", "Median time from the slowing commit on / median time before it: " + ", ".join(ratios) + "."]


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


def check(html_dir: Path, demo: Demo) -> bool:
    """Print what the published regressions.json lists; True when it is the slowed kernel at the slowing commit
    alone, and nothing else."""
    expected = case(SLOWED, demo.size).entry(asvsuite.TIME)
    subjects = {commit.hash: commit.subject for commit in demo.commits}
    listed = listed_regressions(html_dir)
    print(f"Regressions page ({html_dir / 'regressions.json'}): {len(listed)} listed; expected {expected} at "
          f"{demo.slow_commit.hash[:8]} ({demo.slow_commit.subject}) alone")
    for item in listed:
        where = (f"{item.commit[:8]}" if item.range_start is None
                 else f"somewhere in {item.range_start[:8]}..{item.commit[:8]}")
        print(f"    {item.name} at {where} ({subjects.get(item.commit, 'not a demo commit')}): "
              f"{item.before:.6g} -> {item.after:.6g} ({item.after / item.before - 1:+.2%})")
    passed = [(item.name, item.commit, item.range_start) for item in listed] == [
        (expected, demo.slow_commit.hash, None)]
    print(f"check: {'PASS' if passed else 'FAIL'}")
    return passed


def set_regression_settings(config: Path, threshold: float) -> None:
    """The demo's regression settings in the scratch clone's asv.conf.json (rewritten without its comments)."""
    from asv.util import load_json

    conf = load_json(str(config), js_comments=True)
    conf["regressions_thresholds"] = {".*": threshold}
    conf["regressions_first_commits"] = {NOT_JUDGED: None}
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
    commits = build_branch(clone, args.percent)
    base = git(clone, "rev-parse", "--short", f"main~{COMMITS}")
    print(f"Demo branch `main` in {clone}, {COMMITS} commits on {base}:")
    for number, commit in enumerate(commits, 1):
        print(f"  {number:2} {commit.hash[:8]} {commit.subject}")

    # asv's benchmark processes see ASV_PYTHONPATH: the checkout's package first, so that each commit's code runs.
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               ASV_PYTHONPATH=os.pathsep.join(filter(None, [str(clone), os.environ.get("ASV_PYTHONPATH")])))
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
    demo = Demo(commits, args.size, args.percent, machine, gpu, started, [], [], driver=driver)
    regex = bench_regex(demo.cases, args.size)
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


def finish(out: Path, clone: Path, demo: Demo, threshold: float, env: dict) -> int:
    """Pack the archive, print the figures, and make the same check as `publish` on a plain `asv publish` of the
    clone: a verdict before the results leave the box."""
    archive = pack(out, clone, demo)
    print(f"{archive} ({archive.stat().st_size // 1024} KiB)\n")
    print("\n".join(history_table(clone / RESULTS, demo)) + "\n")
    set_regression_settings(clone / "asv.conf.json", threshold)  # after packing: the bundle holds commits only
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
# Made-up medians (seconds) near what an H100 measures at 4096, and the noise: 0.1% within a run and between runs
# (an H100 moved a median by 0.05% between two runs of one commit in half its cases, by 0.5% at most in 95%).
SYNTHETIC_TIMES = {"fp32/cublas": 2.66e-3, "fp32/float4": 3.91e-3, "fp32/warptile": 5.05e-3}
SYNTHETIC_SAMPLES = 200


def cmd_synthetic(args) -> int:
    """The clone and branch as `run` makes them; asv discovers the real suite there (one `asv run`, whose benchmarks
    fail for want of a GPU), then asv's own Results API writes every commit's made-up samples."""
    from asv.results import Results, iter_results_for_machine_and_hash
    from asv.runner import BenchmarkResult

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-synthetic-"))
    clone, home = scratch / "clone", scratch / "home"
    home.mkdir()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    commits = build_branch(clone, args.percent)
    machine = SYNTHETIC_MACHINE["machine"]
    # A HOME of its own: the made-up GPU's machine entry stays out of this user's ~/.asv-machine.json.
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: SYNTHETIC_MACHINE}))
    env = dict(os.environ, HOME=str(home), ASV_PYTHONPATH=str(clone))
    demo = Demo(commits, args.size, args.percent, machine, SYNTHETIC_MACHINE["gpu"], started, [], [], synthetic=True)
    subprocess.run(asv_run(commits[0], machine, bench_regex(demo.cases, args.size)), cwd=clone, env=env,
                   capture_output=True)
    results_dir = clone / RESULTS
    if not (results_dir / "benchmarks.json").is_file():
        raise DemoError(f"asv did not discover the suite in {clone}")
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    template = next(iter_results_for_machine_and_hash(str(results_dir), machine, commits[0].hash))
    rng = random.Random(SLOW_AT)
    for number, commit in enumerate(commits, 1):
        date = int(git(clone, "log", "-1", "--format=%at", commit.hash)) * 1000  # as asv dates a commit
        run = Results(template.params, {}, commit.hash, date, template.params["python"], template.env_name,
                      template.env_vars)
        for method in METHODS:
            benchmark = benchmarks[case(SLOWED, args.size).name(method)]
            combos = list(itertools.product(*benchmark["params"]))
            values, samples, numbers = [math.nan] * len(combos), [None] * len(combos), [None] * len(combos)
            for name in demo.cases:
                if method == asvsuite.TIME:
                    step = 1 + args.percent / 100 if name == SLOWED and number >= SLOW_AT else 1
                    level, spread = SYNTHETIC_TIMES[name] * step * rng.gauss(1, 0.001), 0.001
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
    print(f"Made-up figures for {COMMITS} commits, a {args.percent:g}% step in {SLOWED} at commit {SLOW_AT} "
          f"({demo.slow_commit.hash[:8]})")
    return finish(out, clone, demo, args.threshold, env)


# --- publish: the site, the check, the screenshots ---------------------------------------------------------------


def history_fragment(index: dict, demo: Demo) -> str:
    """The site's address of the slowed kernel's time graph, its step marked as the Regressions page links it, with
    the y axis zoomed onto the data (asv starts a time axis at zero, where a 3% step is hard to see)."""
    slowed = case(SLOWED, demo.size)
    names = index["benchmarks"][slowed.name(asvsuite.TIME)]["param_names"]
    params = [(f"p-{name}", value) for name, value in zip(names, slowed.asv_params)]
    params += [("commits", demo.slow_commit.hash[:index.get("hash_length", 8)]), ("y-axis-scale", "zoom"),
               ("x-axis-scale", "even")]

    def quote(text: str) -> str:  # as JavaScript's encodeURIComponent, which asv's pages use
        return urllib.parse.quote(text, safe="-_.!~*'()")

    return f"#{slowed.name(asvsuite.TIME)}?" + "&".join(f"{quote(key)}={quote(value)}" for key, value in params)


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
    lines += [
        f"A demo branch of {COMMITS} commits, benchmarked commit by commit with asv on one GPU and published with "
        f"`sgemm publish`. Commit {SLOW_AT} (`{slow.hash[:8]}`) makes every block of `{SLOWED}` spin on the SM's "
        f"cycle counter before it starts, for a number of cycles proportional to K (about {demo.percent:g}% of its "
        "time; what it computes is unchanged); the other commits change documentation only. "
        + (f"asv's Regressions page lists `{SLOWED}` at that commit and nothing else." if passed else
           f"**The check failed**: asv's Regressions page does not list `{SLOWED}` at that commit alone."),
        "",
        "- `regressions.png`: the Regressions page of the published site.",
        f"- `history.png`: the history of `Gemm.track_time` for `{SLOWED}` at {demo.size}³, the commit marked "
        "(y axis zoomed onto the data).",
        "",
        f"GPU: {machine.get('gpu', demo.gpu)} ({machine.get('gpu_memory', '?')})"
        + (f", driver {demo.driver}" if demo.driver else "") + f", asv machine `{demo.machine}`, "
        f"{demo.started[:10]}" + ("" if demo.synthetic else
                                  f"; asv ran {sum(demo.asv_seconds):.0f} s over the {COMMITS} commits") + ". Cases: "
        f"{', '.join(demo.cases)} at {demo.size}³ (track_time and track_sm_clock, every NVBench sample recorded). "
        "Times are asv's medians of the samples. The demo branch is not in this repository's history: it lives in "
        "the archive `run` wrote (a git bundle beside the results).",
        "",
        *history_table(results_dir, demo),
        "",
        "How it was made:",
        "",
        f"1. On the GPU box: `scripts/history-demo.py run OUT --percent {demo.percent:g} --size {demo.size}` (for each "
        "commit of the demo branch in a scratch clone: `git checkout` and `asv run --python=same --set-commit-hash "
        "<commit> --record-samples --bench ...`).",
        f"2. Anywhere: `scripts/history-demo.py publish OUT/{ARCHIVE}` (`sgemm publish` of those results, then "
        "`scripts/site_screenshot.py`'s headless Chromium with every host but the loopback cut off).",
        "",
        f"asv lists only steps larger than `regressions_thresholds` (default 5%); the demo's site used "
        f"`{{\".*\": {threshold:g}}}`, and `regressions_first_commits` `{{\"{NOT_JUDGED}\": null}}` so that the "
        "tracks of rate and GPU state (a faster SM clock reads as a rise) are not judged.",
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
    set_regression_settings(clone / "asv.conf.json", args.threshold)
    command = [sys.executable, "-m", "sgemm", "publish", "--results", str(results_dir), "--html", str(site),
               "--repo", str(clone)] + (["--npm-cache", str(args.npm_cache.resolve())] if args.npm_cache else [])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    print(done.stdout.strip())
    if done.returncode != 0:
        print(f"sgemm publish exited {done.returncode}:\n{done.stderr.strip()}", file=sys.stderr)
        return 1
    print("\n".join(history_table(results_dir, demo)) + "\n")
    passed = check(site, demo)
    folder = args.docs.resolve() if passed else scratch / "history"
    folder.mkdir(parents=True, exist_ok=True)
    if not passed:
        print(f"history-demo: the check failed: the screenshots go to {folder}, not to {args.docs}")
    shots, dom = screenshots(site, demo, folder)
    if passed and case(SLOWED, demo.size).entry(asvsuite.TIME) not in dom:
        print(f"check: FAIL: the Regressions page, rendered, does not show it (see {shots[0]})")
        passed = False
    readme = write_readme(folder, demo, results_dir, args.threshold, passed)
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
        each.add_argument("--percent", type=float, default=3.0, help=f"how much slower {SLOWED} gets (default 3)")
        each.add_argument("--size", type=int, default=4096, help="the square size of every case (default 4096)")
    publish = sub.add_parser("publish", help="anywhere: publish an archive, check it, take the screenshots")
    publish.add_argument("archive", type=Path, help=f"{ARCHIVE} from `run` (or the folder holding it)")
    publish.add_argument("--docs", type=Path, default=ROOT / "docs" / "history",
                         help="where the screenshots and README go when the check passes (default docs/history)")
    publish.add_argument("--npm-cache", type=Path, help="the site's npm tarballs, where the registry is out of reach")
    for each in (run, synthetic, publish):
        each.add_argument("--threshold", type=float, default=0.02,
                          help="asv's regressions_thresholds for every time (default 0.02)")
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except DemoError as exc:
        print(f"history-demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
