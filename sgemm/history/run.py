"""A box's history brought up to date: which commits and which benchmarks `asv run` measures here, then the run.

asv does the measuring (each commit built in a virtualenv of its own, its results filed under this machine); this
module chooses what it runs, says beforehand how long that should take, and leaves the site to `sgemm publish`.

- Commits: a machine with no results yet measures the newest `first` commits of the branch (default 1, its head
  alone, on a GPU box; 3 on a box without one), so that a fresh box does not start on the whole history, each commit
  of which takes minutes (lab/2026-11-27-history-pairing, lab/2026-11-27-cpu-box), and a history of one commit is a
  point that asv's graphs draw no line through; every later run measures what came since: the branch's commits that
  descend from none already measured here.
- Cases: the working tree's suite crosses kernels with sizes and precisions, and most combinations are no case; the
  run names the cases to asv, so that it starts no process for the others. `-k` and `--size` narrow them (`select`):
  the kernels the gate's -k names (sgemm.catalogue.select), at the sizes asked for; only those cases are measured and
  only their benchmarks run, the resource suite of those kernels alone.
- Benchmarks: every suite on a GPU box. Without a usable GPU, the resource suite alone (registers, shared memory
  and spills per architecture, compiled by NVRTC with no GPU), and the run says what it left out.
- GPUs: one, or each commit's cases spread over the box's identical GPUs, one `asv run` per GPU at once, the shards
  joined into the result one GPU would have written (sgemm.history.shards).
- The CUDA stack: asv's environments link the site-packages of the interpreter running this (asv.conf.json's
  SGEMM_CUDA_SITE), unless the variable already names one: the stack must match the box's driver, so it is not
  installed per commit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import catalogue
from ..atomic import write_atomically
from ..git import GitError, git
from ..measuring.cards import CardsError, choose, visible_cards
from ..measuring.energy import COUNTER_PERIOD_S, ENERGY_SIZES_VARIABLE, cost_per_commit_s, energy_sizes
from ..measuring.record import (CASES_VARIABLE, HISTORY_ENERGY_SETTINGS, MEASURING_PROGRESS_VARIABLE,
    REFERENCE_COMMIT_FILE, REFERENCE_VARIABLE)
from ..measuring.resources import PROGRESS_VARIABLE
from ..results import asvsuite, resultstree
from ..results.asvconf import run_environment, write_asv_config
from ..words import counted
from ..writable import folder_problem
from . import recorded
from .estimate import RunClock
from .progress import Tail, describe_parts, end_group, follow_asv, minutes
from .shards import Shard, assign, non_case_seconds, recorded_costs, write_joined

DEFAULT_FIRST = 1
DEFAULT_FIRST_WITHOUT_GPU = 3
BRANCH = "main"  # asv.conf.json's branch
# What a box without a GPU records, and what it leaves out, in words for the run's first lines.
RESOURCE_SUITE = ("bench_resources alone (registers, shared memory, stack and spills of every kernel per "
                  "architecture, compiled by NVRTC with no GPU)")
GPU_SUITES = ("bench_gemm (time, TFLOP/s, clocks and power per kernel, size and precision)",
              "bench_gpu (the GPU's SM count and maximum clock)")


class HistoryError(RuntimeError):
    """The history cannot be brought up to date here; the message says why."""


@dataclass(frozen=True)
class HistoryPlan:
    """One `asv run` of this box: the commits, the benchmarks, and what to say about them first."""

    machine: str
    commits: tuple[str, ...]  # exactly what will be measured, newest first
    bench: tuple[str, ...]  # asv's --bench expressions: what it runs
    left_out: tuple[str, ...]  # suites this box cannot run, in words
    seconds_per_commit: float | None  # from this machine's newest run, when there is one
    notes: tuple[str, ...] = ()  # what of the request was left aside, and why
    others: tuple[str, ...] = ()  # of `bench`, those that are no case: a sharded run gives them to its first GPU
    cases: tuple[asvsuite.SuiteCase, ...] = ()  # what a GPU box measures: the suite's, or the selection's
    selected: str = ""  # -k and --size as asked, in words; empty: the whole suite

    @property
    def gpu(self) -> bool:
        return not self.left_out

    def describe(self, gpus: int = 1) -> list[str]:
        lines = [f"machine {self.machine}: {len(self.commits)} commit{'s' if len(self.commits) != 1 else ''} to "
                 f"measure" + (f" ({', '.join(c[:8] for c in self.commits[:5])}"
                               f"{', ...' if len(self.commits) > 5 else ''})" if self.commits else "")]
        if self.seconds_per_commit and self.commits:
            expected_s = self.seconds_per_commit * len(self.commits) / gpus
            lines.append(f"expected: about {minutes(expected_s)} ({minutes(self.seconds_per_commit)} a commit in "
                         "this machine's last run" + (f", spread over {gpus} GPUs)" if gpus > 1 else ")"))
        elif self.commits:
            lines.append("expected: no run of this machine to go by (what a commit took on other boxes: "
                         + ("lab/2026-11-27-cpu-box" if self.left_out else "lab/2026-11-27-history-pairing") + ")")
        if self.selected:
            lines.append(f"selected ({self.selected}): " + (f"{counted(len(self.cases), 'case')}, "
                         f"{counted(len(self.bench), 'benchmark pattern')} for asv" if self.gpu else
                         "the resource suite of those kernels alone"))
        if self.left_out:
            lines.append(f"recorded here: {RESOURCE_SUITE}")
        lines += [f"left out, no GPU here: {suite}" for suite in self.left_out]
        return lines + list(self.notes)


def _git(repo: Path, *args: str) -> str:
    try:
        return git(repo, *args).strip()
    except GitError as exc:
        raise HistoryError(str(exc)) from exc


def _known_commits(repo: Path, hashes: list[str]) -> list[str]:
    """Those of `hashes` that are commits of the repository (a results tree may hold runs of commits it lacks)."""
    if not hashes:
        return []
    answer = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check=%(objecttype)"], capture_output=True,
                            text=True, input="".join(f"{commit}^{{commit}}\n" for commit in hashes))
    return [commit for commit, kind in zip(hashes, answer.stdout.splitlines()) if kind == "commit"]


def check_places(repo: Path, results_dir: Path, work_dir: Path) -> None:
    """HistoryError when the results or the work folder cannot serve as such: found before anything is measured."""
    places = (("--results", results_dir), ("--work", work_dir))
    for option, path in places:
        if path.exists() and not path.is_dir():
            raise HistoryError(f"{option} {path}: not a directory")
        if problem := folder_problem(path):
            raise HistoryError(f"{option} {path}: {problem}")
        if path.is_relative_to(repo / ".git"):
            raise HistoryError(f"{option} {path} lies inside the repository's .git: put it elsewhere")
    if results_dir == work_dir or results_dir.is_relative_to(work_dir) or work_dir.is_relative_to(results_dir):
        raise HistoryError(f"--work {work_dir} and --results {results_dir} overlap: asv's environments (hundreds of "
                           "megabytes) would be filed among the results, or the results among them; give each a "
                           "folder of its own")


def check_results(results_dir: Path) -> None:
    """HistoryError naming a run file of the results tree that asv cannot read (cut short, not UTF-8): the run would
    leave it out and measure its commit again, and the publish after it refuses the tree."""
    for machine in resultstree.machines(results_dir) if results_dir.is_dir() else []:
        try:
            asvsuite.runs(results_dir, machine, strict=True)
        except ValueError as exc:
            raise HistoryError(f"{exc}; move it aside or restore it, nothing was measured") from exc


def check_catalogue(repo: Path) -> None:
    """HistoryError when the working tree's catalogue cannot be read (the suite's cases come from it): found before
    the GPU is asked, let alone anything measured."""
    try:
        catalogue.load_catalogue(repo / "sgemm" / "catalogue.toml", repo / "kernels")
    except catalogue.CatalogueError as exc:
        raise HistoryError(f"the catalogue cannot be read: {exc}") from exc


def charged_sizes() -> tuple[int, ...]:
    """The sizes whose cases this run charges energy for: those SGEMM_ENERGY_SIZES names (none where it is unset),
    HistoryError for a value that names none, found before anything is measured."""
    try:
        return energy_sizes(os.environ.get(ENERGY_SIZES_VARIABLE))
    except ValueError as exc:
        raise HistoryError(str(exc)) from exc


def energy_cost_s(cases: list[asvsuite.SuiteCase], sizes: tuple[int, ...]) -> float:
    """What charging energy adds to a commit of these cases at most, for the estimate of the time left: every case
    at one of the charged `sizes`, at the history's settings (docs/history.md, "Joules per GEMM")."""
    return cost_per_commit_s(sum(case.charged(sizes) for case in cases), HISTORY_ENERGY_SETTINGS, COUNTER_PERIOD_S)


def plan(repo: Path, results_dir: Path, machine: str, gpu: bool, first: int | None = None,
         kernels: tuple[str, ...] = (), sizes: tuple[int, ...] = ()) -> HistoryPlan:
    """What this box measures now. The commits are listed here and handed to asv as they are, so that what was
    announced is what runs (asv's NEW would also skip commits that other machines of a merged tree measured).
    `first` (default DEFAULT_FIRST, or DEFAULT_FIRST_WITHOUT_GPU) counts the commits of a machine's first run only.
    `kernels` and `sizes` (-k, --size) narrow the cases (`select`); a commit measured so counts as measured: a later
    run does not go back to it for the cases it left out."""
    if first is not None and first < 1:
        raise HistoryError(f"--first must be at least 1, got {first}")
    check_catalogue(repo)
    cases = select(repo, kernels, sizes)
    try:  # every run, or the one left out would be measured again as if it were missing
        found = asvsuite.runs(results_dir, machine, strict=True) if (results_dir / machine).is_dir() else []
    except ValueError as exc:
        raise HistoryError(f"{exc}; move it aside or restore it, nothing was measured") from exc
    done = _known_commits(repo, [run.commit for run in found])
    notes = ()
    if done:  # everything on the branch that descends from none of them
        commits = _git(repo, "rev-list", BRANCH, *(f"^{commit}" for commit in done)).split()
        seconds = sum(value for value in found[-1].run.duration.values() if value) or None
        if first is not None:
            notes = (f"--first {first} left aside: machine {machine} has runs in {results_dir} already, so every "
                     "commit since its newest is measured",)
    else:
        count = first or (DEFAULT_FIRST if gpu else DEFAULT_FIRST_WITHOUT_GPU)
        if first is None and not gpu:
            notes = (f"a first run without a GPU measures the newest {count} commits: asv draws a history of one "
                     "commit as a point with no line (--first N for another count)",)
        commits = _git(repo, "rev-list", "--first-parent", f"--max-count={count}", BRANCH).split()
        seconds = None
    chosen_kernels = {case.kernel for case in cases} if kernels or sizes else None
    others = tuple(other_patterns(repo, chosen_kernels) if gpu else resource_patterns(repo, chosen_kernels))
    bench = tuple(case_patterns(cases, charged_sizes())) + others if gpu else others
    return HistoryPlan(machine, tuple(commits), bench, () if gpu else GPU_SUITES, seconds, notes, others,
                       tuple(cases) if gpu else (), asked(kernels, sizes))


def cuda_site() -> str:
    """SGEMM_CUDA_SITE for asv's environments: as set, or this interpreter's site-packages."""
    return os.environ.get("SGEMM_CUDA_SITE") or sysconfig.get_paths()["purelib"]


def library_path(site_dirs: str) -> str:
    """LD_LIBRARY_PATH with the CUDA libraries of the NVIDIA wheels in `site_dirs` (':'-joined) in front.

    The resource suite compiles with the NVRTC that the linked stack carries as a wheel (nvidia/cu13/lib), and
    cuda-pathfinder looks for it in an environment's own site-packages only, never in a linked one: without a
    toolkit on the box, only the loader's search path finds it there.
    """
    found = [str(lib) for site in site_dirs.split(os.pathsep) if site
             for lib in sorted(Path(site).glob("nvidia/*/lib")) if any(lib.glob("libnvrtc.so*"))]
    return os.pathsep.join(found + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])


def _asv_environment(cases: list[asvsuite.SuiteCase] = (), reference: Path | None = None,
                     compile_progress: Path | None = None, measuring_progress: Path | None = None) -> dict[str, str]:
    """The environment of an `asv run`: the CUDA stack linked in, the run's cases (measured in one process a round),
    the reference tree every case is also timed against, and the files the resource compile and the measuring
    report to."""
    site_dirs = cuda_site()
    env = dict(run_environment(), SGEMM_CUDA_SITE=site_dirs, LD_LIBRARY_PATH=library_path(site_dirs))
    env[CASES_VARIABLE] = json.dumps([[case.kernel, *case.shape] for case in cases])
    # The energy reading is opt-in for its cost (docs/history.md, "Joules per GEMM"): the caller's
    # SGEMM_ENERGY_SIZES passes through.
    if os.environ.get(ENERGY_SIZES_VARIABLE):
        env[ENERGY_SIZES_VARIABLE] = os.environ[ENERGY_SIZES_VARIABLE]
    if reference:
        env[REFERENCE_VARIABLE] = str(reference)
    if compile_progress:
        env[PROGRESS_VARIABLE] = str(compile_progress)
    if measuring_progress:
        env[MEASURING_PROGRESS_VARIABLE] = str(measuring_progress)
    return env


def reference_tree(repo: Path, work_dir: Path) -> Path | None:
    """The reference commit's kernels and catalogue ([suite] reference), exported once under `work_dir`; None when
    the catalogue names no reference. HistoryError when the commit cannot be exported."""
    from .. import sourcetree

    path = repo / "sgemm" / "catalogue.toml"
    commit = catalogue.reference(path) if path.is_file() else None
    if not commit:
        return None
    tree = work_dir.resolve() / "reference" / commit  # the benchmark processes run in folders of asv's own
    if not (tree / REFERENCE_COMMIT_FILE).is_file():
        shutil.rmtree(tree, ignore_errors=True)
        try:
            sourcetree.export(repo, commit, tree)
        except sourcetree.TreeError as exc:
            raise HistoryError(f"[suite] reference: {exc}") from exc
        (tree / REFERENCE_COMMIT_FILE).write_text(commit + "\n")
    return tree


def _asv_run(chosen: HistoryPlan, hashes: Path) -> list[str]:
    """asv run of exactly the plan's commits (HASHFILE: asv's own way to be given them), every sample kept."""
    return [sys.executable, "-m", "asv", "run", f"HASHFILE:{hashes}", "--machine", chosen.machine, "--show-stderr",
            "--record-samples"]


def summary(results_dir: Path, chosen: HistoryPlan) -> list[str]:
    """What the run recorded of each commit of the plan, one table read back from `results_dir`."""
    found = asvsuite.runs(results_dir, chosen.machine) if (results_dir / chosen.machine).is_dir() else []
    return recorded.summary(found, chosen.commits)


def run(repo: Path, chosen: HistoryPlan, results_dir: Path, work_dir: Path, began: float | None = None,
        after_s: float = 0.0) -> int:
    """`asv run` of the plan into `results_dir` (asv's environments under `work_dir`): asv's output into a log under
    `work_dir`/logs, its progress in a few lines (sgemm.history.progress), each with the time since `began` (on
    time.monotonic's clock) and the estimate of the time left, `after_s` added for what follows the run; returns
    asv's exit status."""
    if not chosen.commits:
        return 0
    work_dir.mkdir(parents=True, exist_ok=True)
    config = write_asv_config(repo, work_dir / "asv.conf.json", results_dir=results_dir, env_dir=work_dir / "env",
                              html_dir=work_dir / "html")
    with tempfile.TemporaryDirectory(prefix="sgemm-history-") as scratch:
        hashes = Path(scratch) / "commits"
        hashes.write_text("\n".join(chosen.commits) + "\n")
        command = _asv_run(chosen, hashes) + ["--config", str(config), "--skip-existing-commits"]
        for pattern in chosen.bench:
            command += ["--bench", pattern]
        cases = list(chosen.cases)
        reference = reference_tree(repo, work_dir) if chosen.gpu else None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        compile_progress = work_dir / "logs" / f"compile-{stamp}.jsonl"
        measuring_progress = work_dir / "logs" / f"measuring-{stamp}.jsonl"
        clock = RunClock(len(cases), pairing=reference is not None, energy_s=energy_cost_s(cases, charged_sizes()))
        status, _ = follow_asv(command, work_dir / "logs" / f"asv-run-{stamp}.log", cwd=repo,
                               env=_asv_environment(cases, reference, compile_progress, measuring_progress),
                               compile_progress=compile_progress, measuring_progress=measuring_progress,
                               clock=clock, began=began, after_s=after_s)
        return status


# --- Several identical GPUs ----------------------------------------------------------------------------------------

# The suites that are not cases of kernels (the GPU's facts, the resource compile) run with the first shard.
GPU_FACTS = r"^bench_gpu\."
PROGRESS_EVERY_S = 30
# How often the shards are looked at: a run that sleeps the whole minute between looks ends up to a minute
# after its last shard did.
POLL_EVERY_S = 0.5


def case_patterns(cases: list[asvsuite.SuiteCase], charged: tuple[int, ...] = ()) -> list[str]:
    """asv's --bench expressions for exactly these cases, every track of each.

    The suite's classes cross every kernel with every size and precision, and most of those combinations are no
    case (an FP32 kernel has no BF16 form; the FP32 ladder is not timed at 8192). asv starts a process for each
    combination of each track even to skip it, about 5,000 of them a run; naming the cases starts none of those.
    """
    return [case.pattern(case.tracks(charged)) for case in cases]


def resource_patterns(repo: Path, kernels: set[str] | None = None) -> list[str]:
    """asv's --bench expressions for the resource suite's real crosses: each kernel (of `kernels`, when given) at
    the architectures it is built for. The suite crosses every kernel with every architecture, and a kernel built for
    sm_90a alone would start a process for each of the others only to skip it: about 500 processes a commit, some
    10 ms each."""
    path = repo / "sgemm" / "catalogue.toml"
    tracked = tuple(catalogue.architectures(path))
    return [asvsuite.resource_pattern(kernel.name, kernel.architectures(tracked))
            for kernel in catalogue.load_catalogue(path, repo / "kernels").values()
            if not kernel.library and (kernels is None or kernel.name in kernels)]


def other_patterns(repo: Path, kernels: set[str] | None = None) -> list[str]:
    """Every benchmark of a GPU box's run that is not a case: the GPU's facts and the resource suite (of `kernels`
    alone, when given)."""
    return [GPU_FACTS, *resource_patterns(repo, kernels)]


def suite_cases(repo: Path) -> list[asvsuite.SuiteCase]:
    """Every case of the working tree's suite: each kernel at the sizes its entry lists, and the shape sweep."""
    path = repo / "sgemm" / "catalogue.toml"
    kernels = catalogue.load_catalogue(path, repo / "kernels")
    sweep_kernels, sweep_shapes = catalogue.sweep(path)
    return asvsuite.cases_for(list(kernels.values()), None, sweep_kernels, sweep_shapes)


def select(repo: Path, kernels: tuple[str, ...] = (), sizes: tuple[int, ...] = ()) -> list[asvsuite.SuiteCase]:
    """The cases a run measures: every case of the working tree's suite, or, with `kernels` (-k: what the gate's -k
    selects, sgemm.catalogue.select) or `sizes` (--size), those of the kernels named at the square sizes named
    (either left out: every one). A selection by size is of square cases: the shape sweep's cases have no size and
    come only with -k alone. HistoryError, before anything is measured, for a pattern that names no kernel, a size
    the suite does not have, or a size no selected kernel is timed at."""
    if not kernels and not sizes:
        return suite_cases(repo)
    path = repo / "sgemm" / "catalogue.toml"
    catalogued = catalogue.load_catalogue(path, repo / "kernels")
    try:
        chosen = catalogue.select(list(kernels), catalogued)
    except catalogue.UnknownKernelError as exc:
        raise HistoryError(f"-k: {exc.args[0] if exc.args else exc}") from exc
    suite_sizes = catalogue.default_sizes(path)
    if unknown := [size for size in sizes if size not in suite_sizes]:
        raise HistoryError(f"--size {', '.join(map(str, unknown))}: not among the suite's sizes "
                           f"({', '.join(map(str, suite_sizes))}); the history measures only what the suite has")
    if untimed := [size for size in sizes if not any(size in kernel.sizes for kernel in chosen)]:
        named = f"-k {' -k '.join(kernels)}" if kernels else "the suite"
        raise HistoryError(f"--size {', '.join(map(str, untimed))}: no kernel of {named} is timed at that size "
                           "(each kernel is timed at the sizes its catalogue entry lists: `sgemm list`)")
    sweep_kernels, sweep_shapes = catalogue.sweep(path) if not sizes else ([], [])
    return asvsuite.cases_for(chosen, list(sizes) or None, sweep_kernels, sweep_shapes)


def asked(kernels: tuple[str, ...], sizes: tuple[int, ...]) -> str:
    """-k and --size as given, in words for the run's first lines; empty when neither was."""
    return " ".join([*(f"-k {pattern}" for pattern in kernels), *(f"--size {size}" for size in sizes)])


def check_gpus(requested: str, cases: list[asvsuite.SuiteCase]) -> None:
    """HistoryError when `--gpus N` asks for more cards than the selection has cases: a card with no case would
    have nothing to measure (and an `asv run` given no case runs the whole suite)."""
    if requested.isdigit() and int(requested) > len(cases):
        raise HistoryError(f"--gpus {requested} with {counted(len(cases), 'case')} selected: each GPU needs a case of "
                           f"its own; ask for {len(cases)} GPU{'s' if len(cases) != 1 else ''} at most, or select "
                           "more with -k and --size")


def shard_plan(repo: Path, results_dir: Path, machine: str, gpus: list[int],
               cases: list[asvsuite.SuiteCase] | None = None) -> list[Shard]:
    """The cases (default: the suite's) over these GPUs, balanced by the costs of the machine's newest run (the
    first GPU's suites that are no case among them); never more GPUs than cases, every shard holding one at least."""
    cases = suite_cases(repo) if cases is None else cases
    found = asvsuite.runs(results_dir, machine) if (results_dir / machine).is_dir() else []
    newest = found[-1] if found else None
    return assign(recorded_costs(newest, cases), gpus[:max(len(cases), 1)], non_case_seconds(newest))


def box_shards(repo: Path, results_dir: Path, machine: str, requested: str,
               cases: list[asvsuite.SuiteCase] | None = None) -> tuple[list[Shard], list[str]]:
    """The shards of `cases` (default: the suite's) for `--gpus` (a number, or 'all': every card this process may
    use, sgemm.measuring.cards, as the gate's --gpus; 'all' takes no more cards than there are cases), each shard's GPU
    its CUDA index here, and every such card's UUID by that index; HistoryError when the cards cannot give them (no
    NVML, mixed models, more asked for than this process may use)."""
    try:
        cards = visible_cards()
        chosen = choose(cards, requested)
    except CardsError as exc:
        raise HistoryError(f"--gpus {requested}: {exc}") from exc
    return (shard_plan(repo, results_dir, machine, [card.cuda_index for card in chosen], cases),
            [card.uuid for card in cards])


def _shard_home(home: Path) -> dict[str, str]:
    """HOME of one shard's asv, holding a copy of this user's asv machine file, with the caches and configuration
    that HOME would also move (CuPy's kernels, pip's cache and configuration) left where they are.

    Every `asv run` rewrites ~/.asv-machine.json in place as it starts, so shards started together with one HOME read
    each other's half-written file ("Error parsing JSON").
    """
    user = Path.home()
    home.mkdir(parents=True, exist_ok=True)
    if (user / ".asv-machine.json").is_file():
        write_atomically(home / ".asv-machine.json", (user / ".asv-machine.json").read_bytes())
    return {"HOME": str(home),
            "CUPY_CACHE_DIR": os.environ.get("CUPY_CACHE_DIR", str(user / ".cupy" / "kernel_cache")),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(user / ".cache")),
            "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(user / ".config"))}


@dataclass
class _ShardRun:
    """One shard's `asv run`, and what the history reads of it as it goes."""

    shard: Shard
    log: Path
    process: subprocess.Popen
    clock: RunClock
    lines: Tail
    measuring: Tail
    ended_at: float | None = None

    def follow(self, now: float) -> None:
        if self.ended_at is None and self.process.poll() is not None:
            self.ended_at = now
        for line in self.lines.lines():
            self.clock.read(line, now)
        for text in self.measuring.lines():
            self.clock.read_measuring(text, now)

    def where(self) -> str:
        clock = self.clock
        if not clock.commit_number:
            return f"GPU {self.shard.gpu} starting"
        stage = f"{clock.phase.name} {clock.phase.done}/{clock.phase.total}" if clock.phase else (
            "reading" if clock.measured_at is not None else "measuring")
        return f"GPU {self.shard.gpu} {clock.percent:.0f}%, commit {clock.commit_number} of {clock.commits}, {stage}"


def _wait_for_shards(running: list[_ShardRun], began: float, after_s: float) -> None:
    """Until every shard's `asv run` has ended, reading each one's output as it comes; a line of where they stand
    every PROGRESS_EVERY_S, with the time since `began` and the estimate: the slowest shard's time left, and
    `after_s` for what follows."""
    said = time.monotonic()
    while any(shard.process.poll() is None for shard in running):
        time.sleep(POLL_EVERY_S)
        now = time.monotonic()
        for shard in running:
            shard.follow(now)
        if now - said < PROGRESS_EVERY_S:
            continue
        said = now
        left = max(shard.clock.left(now) for shard in running if shard.process.poll() is None) \
            if any(shard.process.poll() is None for shard in running) else 0.0
        print(f"sgemm history: {minutes(now - began)} so far, about {minutes(left + after_s)} left · "
              + "; ".join(shard.where() for shard in running), file=sys.stderr, flush=True)
    now = time.monotonic()
    for shard in running:
        shard.follow(now)


def run_sharded(repo: Path, chosen: HistoryPlan, results_dir: Path, shards: list[Shard], uuids: list[str],
                work_dir: Path, began: float | None = None, after_s: float = 0.0) -> int:
    """One `asv run` per shard, all at once, each on its GPU alone (CUDA_VISIBLE_DEVICES by UUID) with its own
    environments, results and asv machine file under `work_dir`; then each commit's shard results joined into
    `results_dir`. Returns the worst asv exit status, or 1 when a shard recorded nothing of a commit (its log says
    why)."""
    if not chosen.commits:
        return 0
    work_dir.mkdir(parents=True, exist_ok=True)
    hashes = work_dir / "commits"
    hashes.write_text("\n".join(chosen.commits) + "\n")
    reference = reference_tree(repo, work_dir)
    charged = charged_sizes()
    running = []
    for shard in shards:
        folder = work_dir / f"gpu-{shard.gpu}"
        shutil.rmtree(folder / "results", ignore_errors=True)  # only this run's shards are joined
        folder.mkdir(parents=True, exist_ok=True)
        config = write_asv_config(repo, folder / "asv.conf.json", results_dir=folder / "results",
                                  env_dir=folder / "env", html_dir=folder / "html")
        command = _asv_run(chosen, hashes) + ["--config", str(config)]
        patterns = case_patterns(list(shard.cases), charged)
        for pattern in patterns + (list(chosen.others) if shard is shards[0] else []):
            command += ["--bench", pattern]
        log, measuring = folder / "asv.log", folder / "measuring.jsonl"
        measuring.unlink(missing_ok=True)  # only this run's reports
        env = dict(_asv_environment(list(shard.cases), reference, measuring_progress=measuring),
                   **_shard_home(folder / "home"), CUDA_VISIBLE_DEVICES=uuids[shard.gpu])
        with open(log, "w") as out:  # each in a group of its own, ended on Ctrl-C as follow_asv ends one
            process = subprocess.Popen(command, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       process_group=0)
        running.append(_ShardRun(shard, log, process, RunClock(len(shard.cases), pairing=reference is not None,
                                                                energy_s=energy_cost_s(list(shard.cases), charged)),
                                 Tail(log), Tail(measuring)))
        print(f"sgemm history: GPU {shard.gpu}: {counted(len(shard.cases), 'case')}, about "
              f"{minutes(shard.seconds)} a commit; asv's output in {log}", file=sys.stderr)
    started = time.monotonic()
    try:
        _wait_for_shards(running, started if began is None else began, after_s)
    except KeyboardInterrupt:
        for shard in running:
            end_group(shard.process)
        raise
    ended = time.monotonic()
    for shard in running:
        stop = shard.ended_at or ended
        print(f"sgemm history: GPU {shard.shard.gpu}: asv run exit {shard.process.returncode} after "
              f"{minutes(stop - started)} ({describe_parts(shard.clock.parts(stop))})", file=sys.stderr)
    status = max(shard.process.returncode for shard in running)
    for commit in chosen.commits:
        by_name: dict[str, list[Path]] = {}
        for shard, log in ((each.shard, each.log) for each in running):
            files = sorted((work_dir / f"gpu-{shard.gpu}" / "results" / chosen.machine).glob(f"{commit[:8]}-*.json"))
            if not files:
                print(f"sgemm history: GPU {shard.gpu} recorded nothing of {commit[:8]}: see {log}", file=sys.stderr)
                status = max(status, 1)
            for path in files:
                by_name.setdefault(path.name, []).append(path)
        for name, files in by_name.items():
            write_joined(files, results_dir / chosen.machine / name)
    first = work_dir / f"gpu-{shards[0].gpu}" / "results"
    for name in ("benchmarks.json", f"{chosen.machine}/machine.json"):  # as the run of one GPU would leave them
        if (first / name).is_file():
            write_atomically(results_dir / name, (first / name).read_bytes())
    print(f"sgemm history: the shards' results joined in {minutes(time.monotonic() - ended)}", file=sys.stderr)
    return status
