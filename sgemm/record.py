"""Run cases end to end (build -> verify -> measure, with telemetry) and keep what each one measured.

The asv suite calls in through `asv_case`: asv runs every benchmark method of a case in a process of its own, so the
first method to run measures the case and files the result in the run's scratch directory (asv's setup_cache), and
the others read it. A method that finds its own name already recorded is in a new round and measures afresh.
"""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .catalogue import Kernel, UnknownKernelError, get_kernel
from .measure import Timing, time_cases
from .problem import make_problem
from .telemetry import CaseMonitor, TelemetryUnavailable, nvml_handle
from .verify import verify


class NoGpuError(RuntimeError):
    """No usable CUDA GPU: the message says why."""


@dataclass(frozen=True)
class Case:
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
    used_by: list[str] = field(default_factory=list)

    @property
    def tflops(self) -> float:
        return 2 * self.m * self.n * self.k / self.median_s / 1e12

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> CaseResult:
        return cls(**json.loads(path.read_text()))


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: int  # e.g. 90
    sm_count: int


def device_info(device: int = 0) -> DeviceInfo:
    """The CUDA device's facts, or NoGpuError saying why CUDA cannot be used."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        if device >= count:
            raise NoGpuError(f"CUDA device {device} does not exist ({count} visible)")
        props = cupy.cuda.runtime.getDeviceProperties(device)
    except NoGpuError:
        raise
    except Exception as exc:  # ImportError, or CUDARuntimeError without a driver
        raise NoGpuError(f"no usable CUDA GPU: {type(exc).__name__}: {exc}".strip()) from exc
    return DeviceInfo(props["name"].decode(), props["major"] * 10 + props["minor"], props["multiProcessorCount"])


def skip_reason(kernel: Kernel, m: int, n: int, k: int, info: DeviceInfo) -> str | None:
    """Why this case is not run on this GPU (a skip, not a failure), or None."""
    if reason := kernel.shape_problem(m, n, k):
        return reason
    if info.compute_capability < kernel.min_compute_capability:
        return (f"{kernel.name} needs compute capability {kernel.min_compute_capability / 10:.1f}, "
                f"{info.name} has {info.compute_capability / 10:.1f}")
    return None


def run_cases(cases: list[Case], device: int = 0,
              progress: Callable[[int, Case], None] | None = None) -> dict[str, CaseResult | BaseException]:
    """Build, verify and time each case on one device. A failing case maps to its exception; the rest still run."""
    import cupy

    info = device_info(device)
    try:
        handle = nvml_handle(device)
    except TelemetryUnavailable as exc:
        warnings.warn(f"{exc}; cases are recorded without power, temperature and throttle readings")
        handle = None
    errors: dict[str, float] = {}
    monitors: dict[str, CaseMonitor] = {}
    telemetry: dict[str, dict] = {}

    def close_monitors() -> None:
        for case_id, monitor in monitors.items():
            telemetry[case_id] = monitor.finish().as_dict()
        monitors.clear()

    def prepare_for(index: int, case: Case):
        def prepare():
            close_monitors()  # NVBench has finished the previous case
            if progress:
                progress(index, case)
            with cupy.cuda.Device(device):
                problem = make_problem(case.kernel, case.m, case.n, case.k)
                errors[case.id] = verify(problem)
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
        timings = time_cases({case.id: prepare_for(i, case) for i, case in enumerate(cases)}, device)
    close_monitors()
    results: dict[str, CaseResult | BaseException] = {}
    for case in cases:
        timing = timings[case.id]
        if isinstance(timing, BaseException):
            results[case.id] = timing
        else:
            results[case.id] = CaseResult(timing.samples_s, timing.sm_clock_mhz, case.kernel.name, case.m, case.n,
                                          case.k, info.name, errors[case.id], telemetry.get(case.id, {}))
    return results


class AsvCase:
    """One kernel x size of the asv suite: measured once per asv run and round, read by every benchmark method."""

    def __init__(self, run_dir: str, kernel: Kernel, m: int, n: int, k: int):
        self.case = Case(kernel, m, n, k)
        self.path = Path(run_dir) / (self.case.id.replace("/", "_") + ".json")

    def result(self, method: str) -> CaseResult:
        if self.path.exists():
            recorded = CaseResult.load(self.path)
            if method not in recorded.used_by:
                recorded.used_by.append(method)
                recorded.save(self.path)
                return recorded
        outcome = run_cases([self.case])[self.case.id]
        if isinstance(outcome, BaseException):
            raise outcome
        outcome.used_by = [method]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        outcome.save(self.path)
        print(f"{self.case.id}: median {outcome.median_s * 1e6:.1f} us, {outcome.tflops:.2f} TFLOP/s, "
              f"SM {outcome.mean_sm_clock_mhz:.0f} MHz, rel err {outcome.relative_error:.2g}", file=sys.stderr)
        return outcome


def asv_case(run_dir: str, name: str, m: int, n: int, k: int) -> AsvCase:
    """For an asv benchmark's setup(): NotImplementedError (asv's skip) when the case cannot run here."""
    try:
        kernel = get_kernel(name)
    except UnknownKernelError as exc:
        raise NotImplementedError(f"this commit has no {name} kernel") from exc
    if reason := kernel.shape_problem(m, n, k):
        raise NotImplementedError(reason)
    case = AsvCase(run_dir, kernel, m, n, k)
    if case.path.exists():
        return case  # measured on this GPU earlier in this run: no need to start CUDA just to read the figures
    if reason := skip_reason(kernel, m, n, k, device_info()):
        raise NotImplementedError(reason)
    return case
