"""One GEMM problem launched by several builds, each checked against FP64, then timed paired in this process
(sgemm.measuring.paired): a kernel as two commits have it (the gate's base and head, the history's reference and the
commit under test), or a kernel and its baseline (`sgemm bench`).

Each build is its catalogue entry read from its own tree (sgemm.sourcetree), compiled from that tree's sources and
launched through this package's one launch path. The builds share A, B and C where their element types and row
strides agree, so both read the same bytes from the same addresses; otherwise each gets its own copy of the same
values. A build that does not compile, or computes a wrong product, fails the case naming that build: no figure of a
wrong kernel is ever recorded.

`python -m sgemm.measuring.ab PLAN OUT` measures one round of the gate: every case of PLAN (JSON), one line of JSON
each appended to OUT as soon as it is measured, so that a round cut short keeps what it did.
"""

from __future__ import annotations

import json
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from ..catalogue import Kernel
from .build import BuildError, compiled, for_this_gpu
from .paired import PairedSettings, PairedTiming, StreamBlocks, measure_launch_seconds, time_paired
from .problem import UnsupportedShape, library_version, make_problem, rebind, shares_storage
from .resources import GeometryError, launch_geometry
from .verify import VerificationError, verify

CALIBRATION_LAUNCHES = 3


@dataclass(frozen=True)
class Build:
    label: str  # what the reports call it: "base", "head", "reference", "cuBLAS"
    kernel: Kernel  # its catalogue entry, in its own tree (kernel.kernel_dir)


class BuildFailed(RuntimeError):
    """One build could not be measured: it does not compile, refuses the shape, or is wrong."""

    def __init__(self, label: str, kind: str, reason: str):
        super().__init__(f"{label}: {kind}: {reason}")
        self.label, self.kind, self.reason = label, kind, reason


@dataclass
class ABResult:
    labels: list[str]
    timing: PairedTiming
    relative_errors: list[float]
    library_versions: list[str]  # cuBLAS's version for a library build, '' for a compiled one

    def ratio(self, build: int = 1) -> float:
        return self.timing.ratio(build)

    def interval(self, build: int = 1) -> tuple[float, float]:
        return self.timing.interval(build)


def _failure(label: str, exc: Exception) -> BuildFailed:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, BuildError):
        return BuildFailed(label, "compile error", " / ".join(line.strip() for line in text.splitlines()[:4]))
    if isinstance(exc, VerificationError):
        return BuildFailed(label, "wrong result", text.splitlines()[0])
    if isinstance(exc, UnsupportedShape):
        return BuildFailed(label, "shape refused", text)
    return BuildFailed(label, "failed", f"{type(exc).__name__}: {text.splitlines()[0]}")


def _problems(builds: list[Build], m: int, n: int, k: int) -> list:
    problems = []
    for build in builds:
        try:
            shared = next((p for p in problems if shares_storage(p, build.kernel)), None)
            problems.append(rebind(shared, build.kernel) if shared else make_problem(build.kernel, m, n, k))
        except Exception as exc:  # noqa: BLE001 - named for the build it belongs to
            raise _failure(build.label, exc) from exc
    return problems


def measure(builds: list[Build], m: int, n: int, k: int, settings: PairedSettings = PairedSettings(),
            readings=None, checked: frozenset[str] = frozenset()) -> ABResult:
    """Check every build against FP64 on the same inputs, then time them paired (ratios over the first build) on
    the current device. BuildFailed names the build that could not be measured. A build labelled in `checked` was
    checked against FP64 in this process already, on inputs of its own and at this shape (the history's commit build,
    just timed by NVBench): it is not checked again, and its relative error reads NaN."""
    import cupy

    problems = _problems(builds, m, n, k)
    errors = []
    for build, problem in zip(builds, problems):
        if build.label in checked:
            errors.append(math.nan)
            continue
        try:
            errors.append(verify(problem))
        except Exception as exc:  # noqa: BLE001
            raise _failure(build.label, exc) from exc
    slowest = max(measure_launch_seconds(problem.launch, CALIBRATION_LAUNCHES) for problem in problems)
    stream = cupy.cuda.Stream(non_blocking=True)
    timing = time_paired([problem.launch for problem in problems], StreamBlocks(stream), readings, settings,
                         slowest)
    return ABResult([build.label for build in builds], timing, errors,
                    [library_version(build.kernel) for build in builds])


# The kernel over its baseline, for `sgemm bench --versus-baseline`: longer than a gate's round, since this one figure
# is the answer, and each build then alone for a second, for its own joules per GEMM.
VERSUS_BASELINE = PairedSettings(warmup_s=0.5, max_warmup_s=3.0, min_pairs=10, min_s=0.5, max_s=2.0,
                                 target_half_width=0.001, solo_s=1.0)


@dataclass(frozen=True)
class VersusBaseline:
    """A kernel and its precision's baseline timed paired, L2 warm and flushed: % of the baseline with a 95%
    interval by each method, each build's joules per GEMM, the baseline library's version."""

    percent: dict[str, tuple[float, float, float]]  # method -> (% of baseline, low, high)
    joules: tuple[float, float]  # per GEMM: kernel, baseline (L2 warm, each alone for a second)
    sm_clock_mhz: tuple[float, float]  # median during the warm pairs: kernel, baseline
    library_version: str


def versus_baseline(kernel: Kernel, baseline: Kernel, m: int, n: int, k: int, readings=None) -> VersusBaseline:
    """% of the baseline, paired: the kernel's throughput over the baseline's is the baseline's time over the
    kernel's, each pair's ratio inverted (so the interval is too)."""
    percent, joules, clocks, version = {}, (math.nan, math.nan), (math.nan, math.nan), ""
    for flush in (False, True):
        settings = replace(VERSUS_BASELINE, flush_l2=flush, solo_s=0.0 if flush else VERSUS_BASELINE.solo_s)
        result = measure([Build("baseline", baseline), Build("kernel", kernel)], m, n, k, settings, readings)
        low, high = result.interval()
        percent[settings.method] = (100 / result.ratio(), 100 / high, 100 / low)
        if not flush:
            base, own = result.timing.builds
            joules, clocks = (own.joules_per_launch, base.joules_per_launch), \
                (own.median_sm_clock_mhz, base.median_sm_clock_mhz)
            version = result.library_versions[0]
    return VersusBaseline(percent, joules, clocks, version)


def versus_baselines(cases: list[tuple[str, Kernel, int, int, int]], device: int = 0,
                     progress=None) -> dict[str, VersusBaseline]:
    """Each compiled kernel of (case id, kernel, M, N, K) paired with its precision's baseline in this process, by
    case id; a build that cannot be measured is left out, said through `progress`."""
    import cupy

    from ..catalogue import baseline
    from .telemetry import CardReadings

    readings = CardReadings.of(device)
    found = {}
    for index, (case_id, kernel, m, n, k) in enumerate(cases, 1):
        if kernel.library:
            continue
        if progress:
            progress(f"[{index}/{len(cases)}] {case_id} paired with its baseline")
        try:
            with cupy.cuda.Device(device):
                found[case_id] = versus_baseline(kernel, baseline(kernel.precision), m, n, k, readings)
        except BuildFailed as exc:
            if progress:
                progress(f"{case_id}: {exc}")
    return found


def compile_ahead(kernels: list[Kernel], device: int = 0) -> None:
    """Build every kernel in threads before any is timed: NVRTC compiles separate programs at once and lets go of
    Python meanwhile. A kernel that fails here fails again, with its log, when its case asks for it."""
    import cupy

    def one(kernel: Kernel) -> None:
        with cupy.cuda.Device(device):
            build_ahead(kernel)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(one, [kernel for kernel in dict.fromkeys(kernels) if not kernel.library]))


def build_ahead(kernel: Kernel) -> None:
    """The kernel's program for the GPU, and its launch geometry. The geometry is read from the program compiled to
    PTX, a compile of its own, which each kernel's first case would otherwise make in its setup, one kernel after
    another, where these threads make them side by side (lab/2026-11-27-history-pairing)."""
    try:
        compiled(kernel)
        launch_geometry(for_this_gpu(kernel))
    except (BuildError, GeometryError):
        pass


# --- One round of the gate --------------------------------------------------------------------------------------


def run_round(plan: dict, out: Path) -> None:
    """Measure every case of the plan, appending a line of JSON a case to `out`.

    The plan: {"trees": {label: folder}, "device": 0 (the judge's number for the card), "cuda_device": 0 (this
    process's, where the judge narrowed what it sees to that card), "settings": {PairedSettings fields},
    "cases": [{"label": ..., "kernels": {label: kernel name in that tree}, "shape": [m, n, k]}],
    "max_s": {label: seconds}} (optional: a case's own time limit in this round, in place of the settings').
    A line: {"label", "ratio", "interval", "pairs", "pair_ratios", "method", "launches_per_block", "seconds",
    "joules_per_launch", "idle_share" (of the counted window, the GPU idle between blocks),
    "sides": {label: {median_s, sm_clock_mhz, joules, relative_error, library}}}, or
    {"label", "failed": {"side", "kind", "reason"}}.
    """
    import cupy

    from .. import sourcetree
    from .telemetry import CardReadings, other_processes

    device = plan.get("cuda_device", plan.get("device", 0))
    settings = PairedSettings(**plan.get("settings", {}))
    trees = {label: sourcetree.kernels(Path(folder)) for label, folder in plan["trees"].items()}
    readings = CardReadings.of(device)
    handle = readings.handle if readings else None
    cupy.cuda.Device(device).use()
    compile_ahead([trees[side][name] for case in plan["cases"] for side, name in case["kernels"].items()
                   if name in trees[side]], device)
    with open(out, "a") as lines:
        for case in plan["cases"]:
            others = other_processes(handle) if handle else []
            if others:
                line = {"label": case["label"], "failed": {"side": None, "kind": "gpu shared", "reason": (
                    "the GPU is shared with " + ", ".join(p.describe() for p in others) + ": not measured")}}
            else:
                capped = replace(settings, max_s=plan["max_s"][case["label"]]) \
                    if case["label"] in plan.get("max_s", {}) else settings
                line = _case_line(case, trees, capped, readings)
            lines.write(json.dumps(line) + "\n")
            lines.flush()


def _case_line(case: dict, trees: dict[str, dict[str, Kernel]], settings: PairedSettings, readings) -> dict:
    builds = []
    for side, name in case["kernels"].items():
        if name not in trees[side]:
            return {"label": case["label"], "failed": {"side": side, "kind": "missing",
                                                       "reason": f"{side} has no kernel {name}"}}
        builds.append(Build(side, trees[side][name]))
    try:
        result = measure(builds, *case["shape"], settings=settings, readings=readings)
    except BuildFailed as exc:
        return {"label": case["label"], "failed": {"side": exc.label, "kind": exc.kind, "reason": exc.reason}}
    timing = result.timing
    return {"label": case["label"], "ratio": result.ratio(), "interval": list(result.interval()),
            "pairs": timing.pairs, "pair_ratios": timing.pair_ratios[0], "method": timing.method,
            "launches_per_block": timing.launches_per_block, "seconds": timing.elapsed_s,
            "joules_per_launch": timing.joules_per_launch, "idle_share": timing.idle_share,
            "sides": {label: {"median_s": build.median_s, "sm_clock_mhz": build.median_sm_clock_mhz,
                              "joules": build.joules_per_launch, "relative_error": error, "library": version}
                      for label, build, error, version in zip(result.labels, timing.builds, result.relative_errors,
                                                              result.library_versions)}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m sgemm.measuring.ab PLAN.json OUT.jsonl", file=sys.stderr)
        return 2
    run_round(json.loads(Path(args[0]).read_text()), Path(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
