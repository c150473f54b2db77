"""A history that shows the step: a demo branch on which a commit slows one kernel by a little (two such commits in
the `watch` scenario), benchmarked commit by commit with asv on a GPU box, published with `sgemm publish`, and
checked: asv's Regressions page and the history's notices (`notices.json`, the site's "Regressions first" page) must
name the slowed kernels (with their precision twins, where they share the code) at the slowing commits and nothing
else.

Three scenarios (--scenario):
  warptile  20 commits (the watch reads a series from its twentieth figure); the eleventh makes every block of
            fp32/warptile spin for SM cycles proportional to K before it starts (about 3% longer); judged on its time
            (track_time) at 4096, beside fp32/cublas and fp32/float4.
  hopper    20 commits; the eleventh makes the TMA-store epilogue of kernels/wgmma_specialized.cu spin for SM cycles
            each tile (about 1% longer at 8192), which fp16/ and bf16/wgmma_grouped_tma_store share; judged on their
            time over the reference build, L2 flushed (track_time_over_reference_flushed: the kernel as the branch's
            base has it and as the commit has it, timed paired in one process), since at 8192 the card runs at its
            power cap and its clock moves the raw time by several percent between processes. Beside them
            fp16/wgmma_cluster (the same file, an unchanged program) and fp16/cublas.
  watch     22 commits and both edits: the eighth slows the Hopper pair by about 1% at 8192, the fifteenth
            fp32/warptile by about 2% at 4096; every case judged on its time over the reference build, beside
            fp16/cublas, fp16/wgmma_cluster (8192) and fp32/float4 (4096).
In a paired scenario the first commit names the branch's base as the catalogue's [suite] reference. Every other
commit changes documentation only, and what the kernels compute is unchanged.
The scenarios and the branch built from one are tools/acceptance/scenarios.py, the slowing edit
tools/acceptance/inject.py, and the checks tools/acceptance/history_checks.py.

Three steps, because the GPU box has no browser and the browser box has no GPU (each from the repository root):

  python -m tools.acceptance.history_demo run OUT [--scenario warptile|hopper|watch] [--percent P] [--size N]
                                                  [--confirm] [--resume]                      (on a GPU box)
      In a scratch clone of HEAD, the scenario's commits on a branch `main`. Then, for each commit in turn, `git
      checkout` and `asv run --python=same --set-commit-hash` over the scenario's cases (its tracks, every sample
      recorded): the checkout's package is what runs, every case of a commit measured in one process
      (SGEMM_RUN_CASES) and, for a paired scenario, against the base's tree (SGEMM_REFERENCE_TREE). Writes
      OUT/history-demo.tar.gz (the asv results, the demo branch as a git bundle, and what was run) and OUT/asv.log;
      prints each case's figure per commit, then the checks below, on a plain `asv publish` and on the history's
      notices. With --confirm, the `confirm` step follows in the same run. The archive is written after every
      commit: --resume goes on from it where a run was cut off.
      Needs asv and cuda-bench importable, as for `asv run --python=same`.
  python -m tools.acceptance.history_demo confirm ARCHIVE [--budget-s S]                       (on a GPU box)
      `sgemm confirm` of every candidate notice of the archive's history (each step's two sides timed paired in one
      process, round by round); the records it files go into the archive, written again in place.
  python -m tools.acceptance.history_demo publish ARCHIVE [--docs DIR] [--npm-cache DIR]      (anywhere, no GPU)
      `sgemm publish` of the archive's results against its demo branch, the checks, then headless-Chromium
      screenshots of asv's Regressions page, of the site's "Regressions first" page and of each slowed kernel's
      history graph, and a README with the figures, into --docs (default lab/YYYY-MM-DD-history-demo-SCENARIO, a
      dated entry of the record). When a check fails, they go to a scratch folder instead and lab/ is left alone.
  python -m tools.acceptance.history_demo synthetic OUT [--scenario ...]                             (no GPU)
      The archive `run` would write, from made-up figures with the scenario's steps, to try `publish` with.

The checks: asv's regressions.json lists exactly the slowed kernels' judged track, each at its slowing commit alone
(not a range of commits); and the history's notices are exactly one per slowing commit, naming the kernels it
slowed, first bad at that commit. asv lists a step only when it exceeds `regressions_thresholds` (default 5%), so
the demo publishes with --threshold (2% for warptile's time, 0.5% for a paired ratio) on the judged track and with
regression detection off for every other track (a higher SM clock, or a clock-driven time at the power cap, is no
regression of the code): both set in the scratch clone's asv.conf.json, never in this repository's. The notices
need no setting: the detector scales its threshold from each series' own noise (sgemm/watch/steps.py).

Exit status: 0 the checks passed; 1 one failed, or a benchmark, a confirmation or the site failed; 2 the demo could
not start (no GPU, no asv, a kernel file this script does not know how to edit, a malformed archive).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
from pathlib import Path

from sgemm.results import asvsuite
from tools import site_screenshot
from tools.parser import ToolParser
from tools.acceptance.history_checks import (AsvListing, bench_regex, case, check, check_notices, expected_entries,
                                             history_table, set_regression_settings)
from tools.acceptance.scenarios import ROOT, SCENARIOS, Commit, Demo, DemoError, Scenario, Slowdown, build_branch, git

ARCHIVE = "history-demo.tar.gz"
BUNDLE, METADATA, RESULTS, NOTICES = "demo.bundle", "demo.json", "results", "notices.json"
SCREEN = {"width": 1280, "height": 800, "wait_ms": 15000}


# --- The archive ---------------------------------------------------------------------------------------------------


def pack(out: Path, clone: Path, results_dir: Path, demo: Demo) -> Path:
    """OUT/history-demo.tar.gz: the asv results, the demo branch as a git bundle and demo.json (written whole)."""
    with tempfile.TemporaryDirectory(prefix="history-demo-pack-") as staging:
        git(clone, "bundle", "create", str(Path(staging) / BUNDLE), "main")
        demo.save(Path(staging) / METADATA)
        archive = out / ARCHIVE
        partial = Path(staging) / ARCHIVE
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(results_dir, RESULTS)
            tar.add(Path(staging) / BUNDLE, BUNDLE)
            tar.add(Path(staging) / METADATA, METADATA)
        shutil.move(partial, archive)
    return archive


def unpack(archive: Path, into: Path) -> tuple[Path, Demo, Path]:
    """The archive's demo branch cloned into INTO/clone, its metadata, and its results folder."""
    if archive.is_dir():
        archive = archive / ARCHIVE
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        demo = Demo.load(into / METADATA)
    except (OSError, tarfile.TarError, ValueError, KeyError, TypeError) as exc:
        raise DemoError(f"{archive}: not an archive of `history_demo run` ({exc})") from exc
    clone = into / "clone"
    git(into, "clone", "-q", "-b", "main", str(into / BUNDLE), str(clone))
    if git(clone, "rev-parse", "HEAD") != demo.commits[-1].hash:
        raise DemoError(f"the archive's branch does not end at its last demo commit {demo.commits[-1].hash}")
    return clone, demo, into / RESULTS


# --- run and confirm: on the GPU box -----------------------------------------------------------------------------


def asv_run(commit: Commit, machine: str, regex: str) -> list[str]:
    """One commit's asv run on this interpreter: the suite and the package are the clone's checkout (ASV_PYTHONPATH),
    and asv files the results under the commit's hash."""
    return [sys.executable, "-m", "asv", "run", "--python=same", "--set-commit-hash", commit.hash, "--machine",
            machine, "--record-samples", "--show-stderr", "--bench", regex]


def in_clone(clone: Path, *command: str, env: dict | None = None) -> subprocess.CompletedProcess:
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

# The history's notices of a results tree, as `sgemm publish` writes them beside the site, with the clone's package
# and catalogue (the branch's newest): the publish's own detection, without the site.
DETECT = """import json, sys
from pathlib import Path
from sgemm.catalogue import load_catalogue
from sgemm.watch.notices import notices_document, watch
print(json.dumps(notices_document(watch(Path(sys.argv[1]), Path("."), load_catalogue()))))
"""


def detect_notices(clone: Path, results_dir: Path) -> dict:
    done = in_clone(clone, "-c", DETECT, str(results_dir))
    if done.returncode != 0:
        raise DemoError(f"the history's detection failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout)


def cmd_run(args) -> int:
    try:
        import asv  # noqa: F401  (the runs below need it; say so before anything is built)
    except ImportError:
        raise DemoError("asv is not importable by this interpreter: install asv and cuda-bench, or put them on "
                        "PYTHONPATH and ASV_PYTHONPATH") from None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    scenario = args.scenario
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-"))
    earlier = None
    if args.resume and (out / ARCHIVE).is_file():
        clone, earlier, results_dir = unpack(out / ARCHIVE, scratch)
        if earlier.scenario != scenario or earlier.synthetic:
            raise DemoError(f"{out / ARCHIVE} is the archive of another demo ({earlier.scenario.name}"
                            f"{', made up' if earlier.synthetic else ''}): give another OUT")
        shutil.move(results_dir, clone / RESULTS)  # where asv.conf.json files the runs
        commits = earlier.commits
        print(f"Resuming {out / ARCHIVE}: {len(earlier.asv_seconds)} of {scenario.commits} commits measured")
        earlier.notes.append(f"The run was cut off after {len(earlier.asv_seconds)} of the {scenario.commits} "
                             "commits and resumed (`run --resume`) on a GPU of the same model.")
    else:
        clone = scratch / "clone"
        commits = build_branch(clone, scenario)
    base = git(clone, "rev-parse", "--short", f"main~{scenario.commits}")
    print(f"Demo branch `main` in {clone}, {scenario.commits} commits on {base}:")
    for number, commit in enumerate(commits, 1):
        print(f"  {number:2} {commit.hash[:8]} {commit.subject}")

    # asv's benchmark processes see ASV_PYTHONPATH: the checkout's package first, so that each commit's code runs.
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               ASV_PYTHONPATH=os.pathsep.join(filter(None, [str(clone), os.environ.get("ASV_PYTHONPATH")])),
               **measuring_environment(clone, scenario))
    probe = in_clone(clone, "-c", PROBE, env=env)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DemoError(f"the asv runs need a CUDA GPU, and there is none usable here: {reason}")
    gpu, driver = (probe.stdout.splitlines() + [""])[:2]
    made = in_clone(clone, "-m", "sgemm", "machine", env=env)
    if made.returncode != 0:
        raise DemoError(f"sgemm machine exited {made.returncode}: {made.stderr.strip()}")
    machine = in_clone(clone, "-c", "from sgemm.results.machine import detect_identity, machine_name; "
                       "print(machine_name(detect_identity()))", env=env).stdout.strip()
    if earlier and (earlier.machine, earlier.gpu) != (machine, gpu):
        raise DemoError(f"{out / ARCHIVE} was measured on {earlier.gpu} ({earlier.machine}), and this is {gpu} "
                        f"({machine}): one history, one GPU model")
    demo = earlier or Demo(scenario, commits, machine, gpu, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), [],
                           [], driver=driver)
    regex = bench_regex(scenario)
    print(f"asv run on {gpu} (machine {machine}), each commit in turn: --bench \"{regex}\"")
    with open(out / "asv.log", "a" if earlier else "w") as log:
        for number, commit in enumerate(commits[len(demo.asv_seconds):], len(demo.asv_seconds) + 1):
            git(clone, "checkout", "-q", commit.hash)
            begun = time.monotonic()
            log.write(f"\n===== {number} {commit.hash} {commit.subject}\n")
            log.flush()
            status = subprocess.run(asv_run(commit, machine, regex), cwd=clone, env=env, stdout=log,
                                    stderr=subprocess.STDOUT).returncode
            demo.asv_seconds.append(round(time.monotonic() - begun, 1))
            demo.asv_exit.append(status)
            pack(out, clone, clone / RESULTS, demo)  # a run cut off resumes from here (--resume)
            print(f"  {number:2} {commit.hash[:8]}: asv exit {status}, {demo.asv_seconds[-1]:.0f} s", flush=True)
    git(clone, "checkout", "-q", "main")
    print(f"asv's output: {out / 'asv.log'}")
    passed = finish(out, clone, clone / RESULTS, demo, args.threshold, env)
    if args.confirm:
        passed = confirm_and_pack(out, clone, clone / RESULTS, demo, args.budget_s) and passed
    return 0 if passed else 1


def measuring_environment(clone: Path, scenario: Scenario) -> dict[str, str]:
    """Every case of a commit measured in one process; for a paired scenario, against the base's build."""
    from sgemm.history.run import reference_tree
    from sgemm.measuring.record import CASES_VARIABLE, REFERENCE_VARIABLE

    env = {CASES_VARIABLE: json.dumps([[name, size, size, size] for name, size in scenario.cases])}
    if scenario.paired:
        tree = reference_tree(clone, clone.parent / "reference-trees")  # the branch's [suite] reference: its base
        env[REFERENCE_VARIABLE] = str(tree)
    return env


def finish(out: Path, clone: Path, results_dir: Path, demo: Demo, threshold: float, env: dict) -> bool:
    """Pack the archive, print the figures, and make the checks of `publish` on a plain `asv publish` of the clone
    and on the history's notices: a verdict before the results leave the box."""
    archive = pack(out, clone, results_dir, demo)
    print(f"{archive} ({archive.stat().st_size // 1024} KiB)\n")
    print("\n".join(history_table(results_dir, demo)) + "\n")
    set_regression_settings(clone / "asv.conf.json", demo.scenario, threshold)  # after packing: commits only
    published = in_clone(clone, "-m", "asv", "publish", env=env)
    if published.returncode != 0:
        print(f"asv publish exited {published.returncode}:\n{(published.stdout + published.stderr)[-2000:]}")
        return False
    passed = not check(clone / "html", demo).extra
    passed = check_notices(detect_notices(clone, results_dir), demo) and passed
    if any(demo.asv_exit):
        print(f"asv exited non-zero for some commits ({demo.asv_exit}): a benchmark failed, see asv.log")
    return passed and not any(demo.asv_exit)


def confirm_and_pack(out: Path, clone: Path, results_dir: Path, demo: Demo, budget_s: float | None) -> bool:
    """`sgemm confirm` of the history's candidate notices (its records filed under the results), the notices read
    again, and the archive written again."""
    notices = out / NOTICES
    notices.write_text(json.dumps(detect_notices(clone, results_dir)) + "\n")
    command = ["-m", "sgemm", "confirm", "--notices", str(notices), "--results", str(results_dir), "--repo", "."]
    command += ["--budget-s", f"{budget_s:g}"] if budget_s else []
    print("$ sgemm " + " ".join(command[2:]), flush=True)
    begun = time.monotonic()
    with open(out / "confirm.log", "w") as log:
        done = subprocess.run([sys.executable, *command], cwd=clone, stdout=subprocess.PIPE, stderr=log, text=True)
    demo.confirm_seconds, demo.confirm_exit = round(time.monotonic() - begun, 1), done.returncode
    print(done.stdout.strip())
    print(f"sgemm confirm: exit {done.returncode}, {demo.confirm_seconds:.0f} s (its log: {out / 'confirm.log'})")
    pack(out, clone, results_dir, demo)
    passed = check_notices(detect_notices(clone, results_dir), demo)
    return passed and done.returncode == 0


def cmd_confirm(args) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-confirm-"))
    archive = args.archive.resolve()
    clone, demo, results_dir = unpack(archive, scratch)
    out = archive if archive.is_dir() else archive.parent
    return 0 if confirm_and_pack(out, clone, results_dir, demo, args.budget_s) else 1


# --- synthetic: the archive `run` would write, from made-up figures ----------------------------------------------

SYNTHETIC_MACHINE = {"machine": "nvidia-h100-80gb-hbm3", "arch": "x86_64", "cpu": "synthetic", "num_cpu": "16",
                     "os": "Linux", "ram": "134217728000", "gpu": "NVIDIA H100 80GB HBM3", "gpu_memory": "80 GiB",
                     "compute_capability": "9.0"}
# Samples a made-up figure has in one run (the judged figure's level and its noise between commits are the
# scenario's: an H100 moved a median time at 4096 by 0.05% between two runs of one commit in half its cases, and a
# paired ratio to the reference by about 0.05% between processes).
SYNTHETIC_SAMPLES = 200
SYNTHETIC_STATE = {asvsuite.SM_CLOCK: 1980.0, asvsuite.ROUND_SM_CLOCK: 1980.0, asvsuite.POWER: 700.0}


def synthetic_level(scenario: Scenario, name: str, size: int, number: int, rng: random.Random) -> float:
    """The judged figure of one case at commit `number`: its level, stepped by every slowdown of it at or before
    that commit, with the scenario's noise."""
    level = dict(scenario.synthetic_levels).get(name, 1.0)
    for slow in scenario.slowdowns:
        if name in slow.kernels and size == slow.size and number >= slow.at:
            level *= 1 + slow.percent / 100
    return level * rng.gauss(1, scenario.synthetic_noise)


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
    scenario = args.scenario
    commits = build_branch(clone, scenario)
    machine = SYNTHETIC_MACHINE["machine"]
    # A HOME of its own: the made-up GPU's machine entry stays out of this user's ~/.asv-machine.json.
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: SYNTHETIC_MACHINE}))
    env = dict(os.environ, HOME=str(home), ASV_PYTHONPATH=str(clone))
    demo = Demo(scenario, commits, machine, SYNTHETIC_MACHINE["gpu"], started, [], [], synthetic=True)
    subprocess.run(asv_run(commits[0], machine, bench_regex(scenario)), cwd=clone, env=env, capture_output=True)
    results_dir = clone / RESULTS
    if not (results_dir / "benchmarks.json").is_file():
        raise DemoError(f"asv did not discover the suite in {clone}")
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    template = next(iter_results_for_machine_and_hash(str(results_dir), machine, commits[0].hash))
    rng = random.Random(scenario.commits)
    for number, commit in enumerate(commits, 1):
        date = int(git(clone, "log", "-1", "--format=%at", commit.hash)) * 1000  # as asv dates a commit
        run = Results(template.params, {}, commit.hash, date, template.params["python"], template.env_name,
                      template.env_vars)
        for method in scenario.methods:
            benchmark = benchmarks[asvsuite.SuiteCase.square(*scenario.cases[0]).name(method)]
            combos = list(itertools.product(*benchmark["params"]))
            values, samples, numbers = [math.nan] * len(combos), [None] * len(combos), [None] * len(combos)
            for name, size in scenario.cases:
                if method in (asvsuite.OVER_REFERENCE, asvsuite.OVER_REFERENCE_FLUSHED) and get_kernel(name).library:
                    continue  # the same library on both sides: the suite records no such figure
                if method == scenario.judged or (method == asvsuite.ROUND_TIME and scenario.judged == asvsuite.TIME):
                    level, spread = synthetic_level(scenario, name, size, number, rng), scenario.synthetic_noise
                elif method in (asvsuite.TIME, asvsuite.ROUND_TIME):  # at the power cap: percents between processes
                    level, spread = 1.7e-3 * rng.gauss(1, 0.03), 0.01
                else:
                    level, spread = SYNTHETIC_STATE[method], 0.0005
                j = combos.index(case(name, size).asv_params)
                # A round track holds one figure a round: its median
                count = 1 if method in asvsuite.ROUND_TRACKS else SYNTHETIC_SAMPLES
                samples[j] = [level * rng.gauss(1, spread) for _ in range(count)]
                values[j], numbers[j] = statistics.median(samples[j]), 1
            run.add_result(benchmark, BenchmarkResult(result=values, samples=samples, number=numbers, errcode=0,
                                                      stderr="", profile=None), record_samples=True)
        run.save(str(results_dir))
        demo.asv_seconds.append(0.0)
        demo.asv_exit.append(0)
    print(f"Made-up figures for {scenario.commits} commits: "
          + "; ".join(f"a {slow.percent:g}% step in {', '.join(slow.kernels)} at commit {slow.at} "
                      f"({demo.slowing_commit(slow).hash[:8]})" for slow in scenario.slowdowns))
    return 0 if finish(out, clone, results_dir, demo, args.threshold, env) else 1


# --- publish: the site, the checks, the screenshots --------------------------------------------------------------


def history_fragment(index: dict, demo: Demo, slow: Slowdown) -> str:
    """The site's address of a slowed kernel's judged graph, its step marked as the Regressions page links it, with
    the y axis zoomed onto the data (asv starts a time axis at zero, where a step of a few percent is hard to see)."""
    slowed, judged = case(slow.kernels[0], slow.size), demo.scenario.judged
    names = index["benchmarks"][slowed.name(judged)]["param_names"]
    params = [(f"p-{name}", value) for name, value in zip(names, slowed.asv_params)]
    params += [("commits", demo.slowing_commit(slow).hash[:index.get("hash_length", 8)]), ("y-axis-scale", "zoom"),
               ("x-axis-scale", "even")]

    def quote(text: str) -> str:  # as JavaScript's encodeURIComponent, which asv's pages use
        return urllib.parse.quote(text, safe="-_.!~*'()")

    return f"#{slowed.name(judged)}?" + "&".join(f"{quote(key)}={quote(value)}" for key, value in params)


def history_shot(demo: Demo, slow: Slowdown) -> str:
    """history.png where the scenario slows once; else history-<precision>-<family>.png of each slowdown's first
    kernel."""
    if len(demo.scenario.slowdowns) == 1:
        return "history.png"
    return f"history-{slow.kernels[0].replace('/', '-')}.png"


def screenshots(site: Path, demo: Demo, folder: Path) -> tuple[list[Path], str, str]:
    """asv's Regressions page, the site's "Regressions first" page and each slowed kernel's history graph,
    rendered offline; the two pages' DOM."""
    from sgemm.watch.page import PAGE_DIR

    index = json.loads((site / "index.json").read_text())
    shots = [folder / "regressions.png", folder / "notices.png"]
    try:
        with site_screenshot.serve(site) as (base, _requests):
            asv_dom = site_screenshot.render(f"{base}index.html#regressions", shots[0], **SCREEN)
            notices_dom = site_screenshot.render(f"{base}{PAGE_DIR}/index.html", shots[1],
                                                 **{**SCREEN, "height": 400 + 400 * len(demo.scenario.slowdowns)})
            for slow in demo.scenario.slowdowns:
                shots.append(folder / history_shot(demo, slow))
                site_screenshot.render(f"{base}index.html{history_fragment(index, demo, slow)}", shots[-1], **SCREEN)
    except RuntimeError as exc:
        raise DemoError(str(exc)) from exc
    return shots, asv_dom, notices_dom


def write_readme(folder: Path, demo: Demo, results_dir: Path, threshold: float, passed: bool,
                 listing: AsvListing) -> Path:
    machine = json.loads((results_dir / demo.machine / "machine.json").read_text())
    scenario = demo.scenario
    lines = ["# A history that shows the step" + ("s" if len(scenario.slowdowns) > 1 else ""), ""]
    if demo.synthetic:
        lines += ["**Made-up figures** (`python -m tools.acceptance.history_demo synthetic`): a trial of the publish "
                  "step, not a measurement.", ""]
    listed = [f"`{name}`" for slow in scenario.slowdowns for name in slow.kernels
              if (case(name, slow.size).entry(scenario.judged), demo.slowing_commit(slow).hash) not in listing.missed]
    missed = [f"`{entry}` at `{commit[:8]}`" for entry, commit in listing.missed]
    changes = "; ".join(
        f"commit {slow.at} (`{demo.slowing_commit(slow).hash[:8]}`) makes "
        f"{' and '.join(f'`{name}`' for name in slow.kernels)}"
        f" spin on the SM's cycle counter (`{slow.source}`, about {slow.percent:g}% of the time at {slow.size})"
        for slow in scenario.slowdowns)
    judged = ("its time (`Gemm.track_time`)" if scenario.judged == asvsuite.TIME else
              "its time over the reference build (`Gemm.track_time_over_reference`: the kernel as the branch's base "
              "has it and as the commit has it, timed paired in one process)")
    verdict = ("The history's detector (`sgemm publish`: `notices.json` and the \"Regressions first\" page) files "
               "exactly one notice per slowing commit, naming the kernels it slowed, and no other. "
               f"asv's own Regressions page lists {' and '.join(listed) or 'nothing'}, each at its slowing commit, and "
               "nothing else" + (f"; its step detection missed {', '.join(missed)}." if missed else ".")
               if passed else "**A check failed**: see the output of `publish` for which.")
    lines += [
        f"A demo branch of {scenario.commits} commits, benchmarked commit by commit with asv on one GPU and "
        f"published with `sgemm publish`: {changes}; what the kernels compute is unchanged, and the other commits "
        "change documentation only" + (", the first also naming the branch's base as the catalogue's `[suite] "
                                      "reference`" if scenario.paired else "") + f". Each case is judged on {judged}. "
        + verdict,
        "",
        "- `regressions.png`: asv's Regressions page of the published site.",
        "- `notices.png`: the site's \"Regressions first\" page (`regressions/index.html`), drawn from the history's "
        "notices (`notices.json`).",
        *(f"- `{history_shot(demo, slow)}`: the history of `Gemm.{scenario.judged}` for `{slow.kernels[0]}` at "
          f"{slow.size}³, the slowing commit marked (y axis zoomed onto the data)." for slow in scenario.slowdowns),
        "",
        f"GPU: {machine.get('gpu', demo.gpu)} ({machine.get('gpu_memory', '?')})"
        + (f", driver {demo.driver}" if demo.driver else "") + f", asv machine `{demo.machine}`, "
        f"{demo.started[:10]}" + ("" if demo.synthetic else
                                  f"; asv ran {sum(demo.asv_seconds):.0f} s over the {scenario.commits} commits")
        + (f"; `sgemm confirm` took {demo.confirm_seconds:.0f} s" if demo.confirm_seconds is not None else "")
        + ". Cases: " + ", ".join(f"{name} at {size}³" for name, size in scenario.cases)
        + f" ({', '.join(scenario.methods)}, every sample recorded). Figures are asv's medians of the samples. The "
        "demo branch is not in this repository's history: it lives in the archive `run` wrote (a git bundle beside "
        "the results).",
        "",
        *history_table(results_dir, demo),
        "",
        "How it was made:",
        "",
        f"1. On the GPU box: `python -m tools.acceptance.history_demo run OUT --scenario {scenario.name}"
        + (" --confirm" if demo.confirm_seconds is not None else "") + "` (for each commit of the demo branch in a "
        "scratch clone: `git checkout` and `asv run --python=same --set-commit-hash <commit> --record-samples "
        "--bench ...`" + ("; then `sgemm confirm --notices` of the history's candidates" if
                          demo.confirm_seconds is not None else "") + ").",
        f"2. Anywhere: `python -m tools.acceptance.history_demo publish OUT/{ARCHIVE}` (`sgemm publish` of those "
        "results, then `tools/site_screenshot.py`'s headless Chromium with every host but the loopback cut off).",
        *(["", *demo.notes] if demo.notes else []),
        "",
        f"asv lists only steps larger than `regressions_thresholds` (default 5%); the demo's site used "
        f"`{{\".*\": {threshold:g}}}`, and `regressions_first_commits` `{{\"{scenario.not_judged}\": null}}` so that "
        "no other track is judged (a faster SM clock reads as a rise, and at the power cap the raw time moves with "
        "the clock). The history's detector takes no setting: each series' threshold comes from its own noise.",
    ]
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def cmd_publish(args) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="history-demo-publish-"))
    clone, demo, results_dir = unpack(args.archive.resolve(), scratch)
    site = scratch / "site"
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
    listing = check(site, demo)
    passed = check_notices(json.loads((site / NOTICES).read_text()), demo) and not listing.extra
    name = demo.scenario.name
    docs = args.docs or ROOT / "lab" / f"{time.strftime('%Y-%m-%d')}-history-demo-{name}"
    folder = docs.resolve() if passed else scratch / "history"
    folder.mkdir(parents=True, exist_ok=True)
    if not passed:
        print(f"history-demo: a check failed: the screenshots go to {folder}, not to {docs}")
    shots, asv_dom, notices_dom = screenshots(site, demo, folder)
    families = {name.split("/", 1)[1] for slow in demo.scenario.slowdowns for name in slow.kernels}
    if passed and not all(entry in asv_dom for entry, commit in expected_entries(demo)
                          if (entry, commit) not in listing.missed):
        print(f"check: FAIL: asv's Regressions page, rendered, does not show what it lists (see {shots[0]})")
        passed = False
    if passed and not all(family in notices_dom for family in families):
        print(f"check: FAIL: the \"Regressions first\" page, rendered, does not show them (see {shots[1]})")
        passed = False
    readme = write_readme(folder, demo, results_dir, threshold, passed, listing)
    print(f"site: {site}\nwritten: {', '.join(str(path) for path in (*shots, readme))}")
    return 0 if passed else 1


COMMANDS = {"run": cmd_run, "confirm": cmd_confirm, "publish": cmd_publish, "synthetic": cmd_synthetic}


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="on a GPU box: build the demo branch, run asv over it, pack the results")
    run.add_argument("out", type=Path, help=f"where {ARCHIVE} and asv.log go")
    run.add_argument("--confirm", action="store_true", help="then confirm the history's candidate notices")
    run.add_argument("--resume", action="store_true", help=f"go on from OUT/{ARCHIVE}, where an earlier run of the "
                     "same scenario was cut off: the commits it measured are not measured again")
    synthetic = sub.add_parser("synthetic", help="no GPU: the same archive, from made-up figures")
    synthetic.add_argument("out", type=Path, help=f"where {ARCHIVE} goes")
    for each in (run, synthetic):
        each.add_argument("--scenario", choices=sorted(SCENARIOS), default="warptile",
                          help="what the branch slows (default warptile)")
        each.add_argument("--percent", type=float, help="how much slower each slowing commit makes its kernels "
                          "(default: the scenario's, 3 warptile, 1 hopper, 1 and 2 watch)")
        each.add_argument("--size", type=int, help="the square size of every case (default: the scenario's, 4096 "
                          "for FP32, 8192 for Hopper)")
    confirm = sub.add_parser("confirm", help="on a GPU box: confirm the archive's candidate notices, in place")
    confirm.add_argument("archive", type=Path, help=f"{ARCHIVE} from `run` (or the folder holding it)")
    for each in (run, confirm):
        each.add_argument("--budget-s", type=float, help="the confirmation's wall time at most, in seconds")
    publish = sub.add_parser("publish", help="anywhere: publish an archive, check it, take the screenshots")
    publish.add_argument("archive", type=Path, help=f"{ARCHIVE} from `run` (or the folder holding it)")
    publish.add_argument("--docs", type=Path, help="where the screenshots and README go when the checks pass "
                         "(default lab/YYYY-MM-DD-history-demo-SCENARIO)")
    publish.add_argument("--npm-cache", type=Path, help="the site's npm tarballs, where the registry is out of reach")
    for each in (run, synthetic, publish):
        each.add_argument("--threshold", type=float, help="asv's regressions_thresholds for the judged track "
                          "(default: 0.02 for a time, 0.005 for a paired ratio)")
    args = parser.parse_args(argv)
    if args.command in ("run", "synthetic"):
        args.scenario = SCENARIOS[args.scenario].adjusted(args.percent, args.size)
        args.threshold = args.scenario.threshold if args.threshold is None else args.threshold
    try:
        return COMMANDS[args.command](args)
    except DemoError as exc:
        print(f"history-demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
