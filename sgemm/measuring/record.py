"""Run cases end to end (build -> verify -> measure, with telemetry) and keep what each one measured.

The asv suite calls in through `asv_case`: asv runs every benchmark method of a case in a process of its own, once
per round, so a measurement is filed by round in the run's scratch directory (asv's setup_cache) and every method
reads the measurement of its own round: the n-th call of a method on a case reads round n. The first method of a
round to ask measures every case of the run (SGEMM_RUN_CASES) in its one process, and, when SGEMM_REFERENCE_TREE
names a reference tree, times each against its reference build paired (sgemm.measuring.ab). A GPU that another
process is using is not measured (the cases are skipped with the reason), and why a case failed or was skipped is
appended to the file named by SGEMM_CASE_EVENTS, when set, for the gate's report. When SGEMM_ENERGY_SIZES names
sizes, each square case at one of them is then run back to back and charged the board's energy
(sgemm.measuring.energy).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..atomic import write_atomically
from ..catalogue import Kernel, UnknownKernelError, get_kernel
from ..gpu import Gpu
from .build import BuildError
from .energy import (ENERGY_SIZES_VARIABLE, EnergySettings, EnergyUnavailable, board_energy, charge_launch,
                     energy_sizes)
from .launch import shape_problem
from .measure import Timing, time_cases
from .paired import PairedSettings
from .problem import library_version, make_problem
from .resources import GeometryError
from .telemetry import CaseMonitor, TelemetryUnavailable, card_id, driver_present, nvml_handle, other_processes
from .verify import VerificationError, verify

EVENTS_VARIABLE = "SGEMM_CASE_EVENTS"
# Every case of this asv run, as JSON [[kernel, m, n, k], ...]: the first benchmark process of a round measures them
# all in its one process (one CUDA context, one NVBench run, compiles in parallel) rather than each in a process of
# its own, whose start-up would be paid again for every case.
CASES_VARIABLE = "SGEMM_RUN_CASES"
# A folder holding the reference commit's kernels and catalogue (sgemm.sourcetree), and that commit in a file: every
# measured case is also timed paired against its build from there (CaseResult.reference).
REFERENCE_VARIABLE = "SGEMM_REFERENCE_TREE"
REFERENCE_COMMIT_FILE = "COMMIT"
# A file the measuring process appends its progress to, a JSON line a case (sgemm.history reads it for its estimate
# of the time left: asv counts benchmark processes, and this one process holds most of a commit's time):
# {"phase": "timing" | "pairing" | "done", "done": cases, "total": cases, "seconds": since the process began}.
MEASURING_PROGRESS_VARIABLE = "SGEMM_MEASURING_PROGRESS"
# NVBench's options for the cases an asv run measures, in place of ASV_NVBENCH_ARGS.
NVBENCH_ARGS_VARIABLE = "SGEMM_NVBENCH_ARGS"
# NVBench's stopping rule there: 0.05 s of GPU time, or on until the noise is under 5%, 5 s at most. A history's steps
# are judged on the ratio paired against the reference build (the library cases, which have none, on the round's
# median), so NVBench's median needs only to sit well inside what moves it between processes, and NVBench's default
# spent most of a commit chasing a noise target at the power cap (lab/2026-11-27-history-pairing). A gate's unpaired
# rounds set their own (unpaired_rounds.NVBENCH_ARGS).
ASV_NVBENCH_ARGS = ("--min-time", "0.05", "--max-noise", "5", "--timeout", "5")


# The history's paired timing against the reference, one more point of a series a commit: a warm-up until the block
# times are steady (1.5 s at most: a case after one of another power regime starts at that one's clock), then six
# pairs of 10 ms blocks at least (the fewest whose median has a 95% interval), on to 0.6 s while the interval is
# wider than 0.1%. Blocks of 10 ms, not 5, because shorter blocks measured the card away from the clock of its load
# and read a step smaller; six pairs, not eight, because a case tight enough to stop there reads its step within its
# spread between processes either way (lab/2026-11-27-history-pairing). L2 flushed before every launch, as the gate's
# rounds: a change that acts through L2 shows only so; the figure goes to a track of its own
# (track_time_over_reference_flushed), the warm one ending where this began.
REFERENCE_SETTINGS = PairedSettings(warmup_s=0.1, max_warmup_s=1.5, min_pairs=6, min_s=0.1, max_s=0.6,
                                    target_half_width=0.001, flush_l2=True)


# The history's energy reading of each case at the sizes SGEMM_ENERGY_SIZES names: a second of warm-up, so that the
# card is at its load's power (a case after one of another power regime starts at that one's), then a window of two
# seconds between two edges of the counter, whose ends' uncertainty is then a small share of it (docs/history.md,
# "Joules per GEMM").
HISTORY_ENERGY_SETTINGS = EnergySettings(warmup_s=1.0, window_s=2.0)


class NoGpuError(RuntimeError):
    """No usable CUDA GPU: the message says why."""


@dataclass(frozen=True)
class MeasuredCase:
    kernel: Kernel
    m: int
    n: int
    k: int

    @property
    def id(self) -> str:
        return f"{self.kernel.name}/{self.m}x{self.n}x{self.k}"


@dataclass
class CaseResult(Timing):
    """A case's NVBench timing, with what was measured and where, and the GPU's state meanwhile."""

    kernel: str
    m: int
    n: int
    k: int
    gpu: str
    relative_error: float
    telemetry: dict = field(default_factory=dict)
    card: str = ""  # which physical card measured it (sgemm.measuring.telemetry.card_id); empty without NVML
    library_version: str = ""  # cuBLAS's, for a library kernel
    # Against the reference build, paired in one process: {"commit", "ratio", "interval", "pair_ratios", "method", "l2",
    # "joules_per_launch"}, or {"commit", "missing": why}; empty when no reference was asked for.
    reference: dict = field(default_factory=dict)
    # The board's energy over a window of back-to-back launches (sgemm.measuring.energy.EnergyReading's fields, its
    # "flag" empty where it may be recorded), or {"missing": why}; empty where the case's size is not charged.
    energy: dict = field(default_factory=dict)

    @property
    def tflops(self) -> float:
        return 2 * self.m * self.n * self.k / self.median_s / 1e12

    def save(self, path: Path) -> None:
        write_atomically(path, json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> CaseResult:
        return cls(**json.loads(path.read_text()))


def _no_gpu_reason(exc: Exception) -> str:
    """Why CUDA cannot be used, in words. CuPy says "CUDA driver version is insufficient" both where the driver is
    too old and where there is none at all; only the second is common (a CPU box), and only the driver's library
    tells them apart."""
    if not driver_present():
        return "no usable CUDA GPU: no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)"
    text = f"{type(exc).__name__}: {exc}".strip()
    if "InsufficientDriver" in text or "driver version is insufficient" in text:
        return ("no usable CUDA GPU: the NVIDIA driver is older than the CUDA runtime CuPy was built for "
                "(on a CUDA 12 driver install the cuda12 extra)")
    return f"no usable CUDA GPU: {text}"


def device_info(device: int = 0) -> Gpu:
    """What CUDA says the GPU is (name, compute capability, SM count), or NoGpuError saying why CUDA cannot be
    used."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        if device >= count:
            raise NoGpuError(f"CUDA device {device} does not exist ({count} visible)")
        props = cupy.cuda.runtime.getDeviceProperties(device)
    except NoGpuError:
        raise
    except Exception as exc:  # ImportError, or CUDARuntimeError without a driver
        raise NoGpuError(_no_gpu_reason(exc)) from exc
    return Gpu(props["name"].decode(), props["major"] * 10 + props["minor"], props["multiProcessorCount"])


def _shape_problem(kernel: Kernel, m: int, n: int, k: int) -> str | None:
    """Why the kernel cannot take this shape, by its entry and its launch geometry. A kernel whose geometry cannot be
    read (it does not compile, or states a wrong one) is not skipped: building its case reports that, as a failure."""
    try:
        return shape_problem(kernel, m, n, k)
    except (BuildError, GeometryError):
        return kernel.shape_problem(m, n, k)


def skip_reason(kernel: Kernel, m: int, n: int, k: int, info: Gpu) -> str | None:
    """Why this case is not run on this GPU (a skip, not a failure), or None."""
    if reason := _shape_problem(kernel, m, n, k):
        return reason
    if reason := kernel.gpu_problem(info.compute_capability):
        return f"{reason} ({info.name})"
    return None


def select_cases(kernels: list[Kernel], shapes, info: Gpu) -> tuple[list[MeasuredCase], list[tuple[MeasuredCase, str]]]:
    """The selected cases this GPU can run, and those it skips with the reason; with no shapes given, each kernel at
    the square sizes the suite times it at."""
    runnable, skipped = [], []
    for kernel in kernels:
        for m, n, k in shapes or [(size, size, size) for size in kernel.sizes]:
            case = MeasuredCase(kernel, m, n, k)
            if reason := skip_reason(kernel, m, n, k, info):
                skipped.append((case, reason))
            else:
                runnable.append(case)
    return runnable, skipped


def check_cases(cases: list[MeasuredCase], device: int = 0, alpha: float = 1.0, beta: float = 0.0,
                progress: Callable[[int, MeasuredCase], None] | None = None) -> list[float | BaseException]:
    """Check each case against an FP64 reference on one device: its relative error, or the exception of a wrong or
    broken kernel (the check goes on), in the order of `cases`."""
    import cupy

    checked: list[float | BaseException] = []
    for index, case in enumerate(cases):
        if progress:
            progress(index, case)
        try:
            with cupy.cuda.Device(device):
                checked.append(verify(make_problem(case.kernel, case.m, case.n, case.k, alpha=alpha, beta=beta)))
        except Exception as exc:  # a wrong or broken kernel is reported and the check goes on
            checked.append(exc)
    return checked


def run_cases(cases: list[MeasuredCase], device: int = 0, progress: Callable[[int, MeasuredCase], None] | None = None,
              nvbench_args: tuple[str, ...] = ()) -> dict[str, CaseResult | BaseException]:
    """Build, verify and time each case on one device (NVBench's stopping rule its own, or `nvbench_args`). A failing
    case maps to its exception; the rest still run."""
    import cupy

    info = device_info(device)
    try:
        handle = nvml_handle(device)
    except TelemetryUnavailable as exc:
        warnings.warn(f"{exc}; cases are recorded without power, temperature and throttle readings")
        handle = None
    card = card_id(handle) if handle else ""
    errors: dict[str, float] = {}
    libraries: dict[str, str] = {}
    monitors: dict[str, CaseMonitor] = {}
    telemetry: dict[str, dict] = {}

    def close_monitors() -> None:
        for case_id, monitor in monitors.items():
            telemetry[case_id] = monitor.finish().as_dict()
        monitors.clear()

    def prepare_for(index: int, case: MeasuredCase):
        def prepare():
            close_monitors()  # NVBench has finished the previous case
            if progress:
                progress(index, case)
            with cupy.cuda.Device(device):
                problem = make_problem(case.kernel, case.m, case.n, case.k)
                errors[case.id] = verify(problem)
                libraries[case.id] = library_version(case.kernel)
            monitor = CaseMonitor(handle) if handle else None

            def launch() -> None:
                problem.launch()
                if monitor:
                    monitor.poll()  # NVBench's blocking kernel holds the GPU meanwhile: not in the timed region

            if monitor:
                monitor.start()
                monitors[case.id] = monitor
            return launch

        return prepare

    with cupy.cuda.Device(device):
        timings = time_cases({case.id: prepare_for(i, case) for i, case in enumerate(cases)}, device, nvbench_args)
    close_monitors()
    results: dict[str, CaseResult | BaseException] = {}
    for case in cases:
        timing = timings[case.id]
        if isinstance(timing, BaseException):
            results[case.id] = timing
        else:
            results[case.id] = CaseResult(timing.samples_s, timing.sm_clock_mhz, case.kernel.name, case.m, case.n,
                                          case.k, info.name, errors[case.id], telemetry.get(case.id, {}), card,
                                          libraries.get(case.id, ""))
    return results


def failure_reason(error: BaseException) -> str:
    """Why a case has no figures, in a line or three that a pull-request comment can show."""
    text = str(error).strip() or type(error).__name__
    lines = text.splitlines()
    if isinstance(error, VerificationError):
        return f"wrong result: {lines[0]}"
    if isinstance(error, BuildError):
        return "compile error: " + " / ".join(line.strip() for line in lines[:4] if line.strip())
    if text.startswith("NVBench recorded no samples"):
        return f"no samples: {lines[0]}"
    return f"{type(error).__name__}: {lines[0]}"


def record_event(case_id: str, kind: str, reason: str) -> None:
    """Append why a case failed or was skipped to SGEMM_CASE_EVENTS (one JSON object a line), when it is set.

    asv keeps no benchmark's error output in its results; the gate sets this file to say in its report why a case
    has no figures. ASV_COMMIT tells which side of the comparison the process measured.
    """
    path = os.environ.get(EVENTS_VARIABLE)
    if not path:
        return
    line = json.dumps({"commit": os.environ.get("ASV_COMMIT", ""), "case": case_id, "kind": kind, "reason": reason})
    with open(path, "a") as out:
        out.write(line + "\n")


class SharedGpu(NotImplementedError):
    """Another process is on the GPU: the case is not measured (a skip, with this reason)."""


def refuse_shared_gpu(case_id: str, device: int = 0) -> None:
    """SharedGpu when another process is on the GPU: what it measured would not be this code's figures.

    Called before this process starts CUDA work, so that nothing NVML lists is its own.
    """
    try:
        others = other_processes(nvml_handle(device))
    except TelemetryUnavailable:
        return  # no NVML: nothing to check with, as on a box without telemetry
    if others:
        reason = "the GPU is shared with " + ", ".join(p.describe() for p in others) + ": not measured"
        record_event(case_id, "gpu shared", reason)
        raise SharedGpu(reason)


def _group(case: MeasuredCase) -> list[MeasuredCase]:
    """Every case of this asv run (CASES_VARIABLE) that this commit can name, with `case` among them; `case` alone
    when the run named none."""
    listed = json.loads(os.environ.get(CASES_VARIABLE) or "[]")
    group = {case.id: case}
    for name, m, n, k in listed:
        try:
            kernel = get_kernel(name)
        except UnknownKernelError:
            continue  # a kernel this commit does not have: its own benchmarks skip, saying so
        other = MeasuredCase(kernel, m, n, k)
        group.setdefault(other.id, other)
    return list(group.values())


def _case_dir(run_dir: str | Path, case: MeasuredCase) -> Path:
    return Path(run_dir) / case.id.replace("/", "_")


def _not_measured(run_dir: str | Path, case: MeasuredCase, round_number: int, kind: str, reason: str) -> None:
    write_atomically(_case_dir(run_dir, case) / f"round-{round_number}.not-measured.json",
                     json.dumps({"kind": kind, "reason": reason}))


def _reference_builds(cases: list[MeasuredCase], tree: Path) -> dict[str, Kernel | str]:
    """Each compiled case's kernel in the reference tree (under its name, or a name it had before), or why none."""
    from .. import sourcetree

    try:
        reference = sourcetree.kernels(tree)
    except sourcetree.TreeError as exc:
        return {case.id: f"the reference tree cannot be read: {exc}" for case in cases}
    builds: dict[str, Kernel | str] = {}
    for case in cases:
        if case.kernel.library:
            builds[case.id] = "a library call: the reference would be the same library"
            continue
        names = [case.kernel.name, *case.kernel.renamed_from]
        found = next((reference[name] for name in names if name in reference), None)
        builds[case.id] = found or f"{case.kernel.name} is newer than the reference commit"
    return builds


def prepare_reference_builds(cases: list[MeasuredCase], tree: Path,
                             device: int = 0) -> tuple[str, dict[str, Kernel | str]]:
    """The reference commit (as the tree's COMMIT file names it), and each case's kernel in the tree, or why none;
    every build found compiled ahead, in threads."""
    from .ab import compile_ahead

    commit = (tree / REFERENCE_COMMIT_FILE).read_text().strip() if (tree / REFERENCE_COMMIT_FILE).is_file() else ""
    builds = _reference_builds(cases, tree)
    compile_ahead([build for build in builds.values() if isinstance(build, Kernel)], device)
    return commit, builds


def time_against_reference(case: MeasuredCase, reference: Kernel, commit: str, readings,
                           settings: PairedSettings = REFERENCE_SETTINGS) -> dict:
    """The case's kernel paired against its reference build on the current device: CaseResult.reference's figures,
    or why there are none. The commit's build is not checked against FP64 again: the caller did, in this process."""
    from .ab import Build, BuildFailed, measure

    started = time.monotonic()
    try:
        ab = measure([Build("reference", reference), Build("commit", case.kernel)], case.m, case.n, case.k,
                     settings, readings, checked=frozenset({"commit"}))
    except BuildFailed as exc:
        return {"commit": commit, "missing": f"the {exc.label} build: {exc.kind}: {exc.reason}"}
    return {"commit": commit, "ratio": ab.ratio(), "interval": list(ab.interval()),
            "pair_ratios": ab.timing.pair_ratios[0], "method": ab.timing.method,
            "l2": "flushed" if settings.flush_l2 else "warm",
            "joules_per_launch": ab.timing.joules_per_launch, "warmup_s": ab.timing.warmup_s,
            "seconds": time.monotonic() - started}


def _pairing_order(case: MeasuredCase) -> bytes:
    """Cases are paired in the order of a digest of their ids: what one costs (0.4 s to several: the warm-up of a
    case at the power cap, a kernel of 30 ms a launch) then has nothing to do with where it comes, so the cases
    paired so far are a fair sample of those left, and the history's estimate extrapolates from them. In the
    suite's order (the FP32 ladder first, the power-capped tensor-core kernels last) the first fifth paired at
    half the rest's pace and the estimate fell 3x short (lab/2026-11-28-history-sharding). Adding a case moves no
    other; a paired ratio does not depend on what ran before it, both builds seeing the same card."""
    return hashlib.sha256(case.id.encode()).digest()


def _time_over_reference(cases: list[MeasuredCase], results: dict, tree: Path, device: int,
                         paired: Callable[[int], None] = lambda done: None) -> None:
    """Each measured case paired in this process against its reference build, on the current device (the suite's
    processes see one GPU, device 0): CaseResult.reference. Each case's own build was checked against FP64 before
    NVBench timed it. `paired(done)` is told once the reference builds are made (0) and after each case."""
    from .telemetry import CardReadings

    commit, builds = prepare_reference_builds(cases, tree, device)
    readings = CardReadings.of(device)
    paired(0)  # the pairing proper begins: its pace is measured from here, the builds' compile left out
    for done, case in enumerate(cases, 1):
        result, reference = results[case.id], builds[case.id]
        if isinstance(result, BaseException):
            pass
        elif isinstance(reference, str):
            result.reference = {"commit": commit, "missing": reference}
        else:
            result.reference = time_against_reference(case, reference, commit, readings)
        paired(done)


def charge_energy(cases: list[MeasuredCase], results: dict, sizes: tuple[int, ...], device: int = 0,
                  settings: EnergySettings = HISTORY_ENERGY_SETTINGS,
                  charged: Callable[[int, int], None] = lambda done, total: None) -> None:
    """Each measured square case at one of `sizes` run back to back on the current device and charged the board's
    energy: CaseResult.energy, a reading or why there is none (no counter, another card than CUDA's, a counter that
    did not move, a failure of the case). The case's build was checked against FP64 in this process before NVBench
    timed it. `charged(done, total)` is told before the first case and after each."""
    chosen = [case for case in cases if isinstance(results.get(case.id), CaseResult)
              and case.m == case.n == case.k and case.m in sizes]
    if not chosen:
        return
    try:
        board = board_energy(device, device_info(device).name)
    except EnergyUnavailable as exc:
        for case in chosen:
            results[case.id].energy = {"missing": str(exc)}
        return
    import cupy

    charged(0, len(chosen))  # the step's first case begins: its pace counts from here
    for done, case in enumerate(chosen, 1):
        try:
            with cupy.cuda.Device(device):
                problem = make_problem(case.kernel, case.m, case.n, case.k)
                reading = charge_launch(problem.launch, board, settings)
                del problem  # its arrays go before the next case's come
            results[case.id].energy = reading.as_dict()
        except EnergyUnavailable as exc:
            results[case.id].energy = {"missing": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a case without a reading leaves the others theirs
            results[case.id].energy = {"missing": failure_reason(exc)}
        charged(done, len(chosen))


def _progress_reporter(began: float) -> Callable[[str, int, int], None]:
    """A function that appends where the measuring stands to the file MEASURING_PROGRESS_VARIABLE names (a line
    written whole, so that a reader never sees half of one); one that does nothing where it names none."""
    path = os.environ.get(MEASURING_PROGRESS_VARIABLE)

    def report(phase: str, done: int, total: int) -> None:
        if path:
            line = json.dumps({"phase": phase, "done": done, "total": total,
                               "seconds": round(time.monotonic() - began, 2)}) + "\n"
            with open(path, "a") as out:
                out.write(line)

    return report


def _spans(starts: dict[str, float], end: float) -> dict[str, float]:
    """How long each case lasted, from when each started (in order) to when the next did, the last until `end`."""
    ordered = sorted(starts.items(), key=lambda item: item[1])
    ends = [when for _, when in ordered[1:]] + [end]
    return {case_id: stop - start for (case_id, start), stop in zip(ordered, ends)}


def measure_group(run_dir: str | Path, cases: list[MeasuredCase], round_number: int, device: int = 0) -> None:
    """Measure every case in this one process (one NVBench run; then, when SGEMM_REFERENCE_TREE names a tree, each
    paired against its reference build) and file each case's figures, or why it has none, under this round."""
    for case in cases:
        _case_dir(run_dir, case).mkdir(parents=True, exist_ok=True)
    try:
        refuse_shared_gpu(cases[0].id, device)
    except SharedGpu as exc:
        for case in cases:
            _not_measured(run_dir, case, round_number, "skip", str(exc))
        return
    info = device_info(device)
    runnable = []
    for case in cases:
        if reason := skip_reason(case.kernel, case.m, case.n, case.k, info):
            _not_measured(run_dir, case, round_number, "skip", reason)
        else:
            runnable.append(case)
    from .ab import compile_ahead

    started = time.monotonic()
    report = _progress_reporter(started)
    report("timing", 0, len(runnable))
    compile_ahead([case.kernel for case in runnable], device)
    compiled = time.monotonic()
    nvbench_started: dict[str, float] = {}
    nvbench_args = os.environ.get(NVBENCH_ARGS_VARIABLE)

    def timing(index: int, case: MeasuredCase) -> None:
        nvbench_started.setdefault(case.id, time.monotonic())
        report("timing", index, len(runnable))  # the cases before this one are timed

    results = run_cases(runnable, device, progress=timing,
                        nvbench_args=tuple(shlex.split(nvbench_args)) if nvbench_args else ASV_NVBENCH_ARGS)
    timed = time.monotonic()
    nvbench_s = _spans(nvbench_started, timed)
    tree = os.environ.get(REFERENCE_VARIABLE)
    if tree:
        report("pairing", 0, len(runnable))
        _time_over_reference(sorted(runnable, key=_pairing_order), results, Path(tree), device,
                             lambda done: report("pairing", done, len(runnable)))
    paired_at = time.monotonic()
    charging = energy_sizes(os.environ.get(ENERGY_SIZES_VARIABLE))
    if charging:
        charge_energy(runnable, results, charging, device, charged=lambda done, total: report("energy", done, total))
    charged_at = time.monotonic()
    report("done", len(runnable), len(runnable))
    # Where a commit's time goes, in asv's log: this process holds the GPU work of the whole run.
    print(f"round {round_number}: {len(runnable)} cases: compiled in {compiled - started:.0f} s, timed with NVBench "
          f"in {timed - compiled:.0f} s" + (f", paired against the reference in {paired_at - timed:.0f} s"
                                            if tree else "")
          + (f", charged energy in {charged_at - paired_at:.0f} s" if charging else ""), file=sys.stderr)
    for case in runnable:
        outcome = results[case.id]
        if isinstance(outcome, BaseException):
            record_event(case.id, "failed", failure_reason(outcome))
            _not_measured(run_dir, case, round_number, "failed", failure_reason(outcome))
            continue
        if outcome.library_version:
            record_event(case.id, "library", f"{case.kernel.library} {outcome.library_version}")
        outcome.save(_case_dir(run_dir, case) / f"round-{round_number}.json")
        reference = outcome.reference
        print(f"{case.id} round {round_number}: median {outcome.median_s * 1e6:.1f} us, {outcome.tflops:.2f} "
              f"TFLOP/s, SM {outcome.median_sm_clock_mhz:.0f} MHz, rel err {outcome.relative_error:.2g}; "
              f"NVBench {nvbench_s.get(case.id, math.nan):.1f} s"
              + (f"; {reference['ratio']:.4f} of the reference ({len(reference['pair_ratios'])} pairs, warm-up "
                 f"{reference['warmup_s']:.1f} s, {reference['seconds']:.1f} s in all)" if "ratio" in reference
                 else "")
              + (f"; {outcome.energy['joules_per_launch']:.3f} J a GEMM at {outcome.energy['power_w']:.0f} W over "
                 f"{outcome.energy['window_s']:.2f} s" + (f" (flagged: {outcome.energy['flag']})"
                                                          if outcome.energy["flag"] else "")
                 if "joules_per_launch" in outcome.energy else ""), file=sys.stderr)


class NotMeasured(RuntimeError):
    """The case was not measured in this round (it failed): the message says why."""


class AsvCase:
    """One kernel x shape of the asv suite: measured once per asv round, read by every benchmark method.

    The first method of a round to ask measures every case of the run (CASES_VARIABLE) in its one process and files
    them under that round; every other method of every case reads them."""

    def __init__(self, run_dir: str, kernel: Kernel, m: int, n: int, k: int):
        self.run_dir = run_dir
        self.case = MeasuredCase(kernel, m, n, k)
        self.dir = _case_dir(run_dir, self.case)

    def _round_of(self, method: str) -> int:
        """How many times this method has asked for the case: the n-th call is round n."""
        calls_path = self.dir / "calls.json"
        calls = json.loads(calls_path.read_text()) if calls_path.exists() else {}
        calls[method] = calls.get(method, 0) + 1
        write_atomically(calls_path, json.dumps(calls))
        return calls[method]

    def result(self, method: str) -> CaseResult:
        round_number = self._round_of(method)
        path = self.dir / f"round-{round_number}.json"
        missing = self.dir / f"round-{round_number}.not-measured.json"
        if not path.exists() and not missing.exists():
            measure_group(self.run_dir, _group(self.case), round_number)
        if path.exists():
            return CaseResult.load(path)
        why = json.loads(missing.read_text())
        if why["kind"] == "skip":
            raise SharedGpu(why["reason"]) if "shared with" in why["reason"] else NotImplementedError(why["reason"])
        raise NotMeasured(why["reason"])


def asv_case(run_dir: str, name: str, m: int, n: int, k: int) -> AsvCase:
    """For an asv benchmark's setup(): NotImplementedError (asv's skip) when the case cannot run here."""
    try:
        kernel = get_kernel(name)
    except UnknownKernelError as exc:
        raise NotImplementedError(f"this commit has no {name} kernel") from exc
    case = AsvCase(run_dir, kernel, m, n, k)
    recorded = list(case.dir.glob("round-*.json"))
    if any(not path.name.endswith(".not-measured.json") for path in recorded):
        # Measured on this GPU earlier in this run, its shape and the GPU checked before it was: the case's other
        # tracks only read it. Asking the compiled program for its launch geometry again (NVRTC loaded to key the
        # cache) cost each of those ~2,950 processes of a history commit about 0.1 s on a CPU box.
        return case
    skips = [json.loads(path.read_text()) for path in recorded]
    if skips and all(s["kind"] == "skip" and "shared with" not in s["reason"] for s in skips):
        raise NotImplementedError(skips[0]["reason"])  # this run found it cannot run here
    if reason := _shape_problem(kernel, m, n, k):
        raise NotImplementedError(reason)
    if not recorded and (reason := skip_reason(kernel, m, n, k, device_info())):
        raise NotImplementedError(reason)
    return case
