"""GPU identity and per-case telemetry from NVML (pynvml): which GPU a case ran on, the state it ran in, and whether
anything else is using it.

Each reading is one small collect_* function of an NVML handle. NVML ignores CUDA_VISIBLE_DEVICES, so a CUDA device
is mapped to its NVML handle through its PCI bus id.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from ..gpu import Gpu

# nvmlDeviceGetCurrentClocksEventReasons bits that slow a kernel down (GpuIdle, 0x1, is left out: it is not a cause).
THROTTLE_REASONS = {
    0x2: "clocks set by an application",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
}
POLL_INTERVAL_S = 0.02  # one NVML reading costs ~6 us; 50 per second is plenty for a case that runs 0.5 s or more

# Busy check. NVML's utilisation is the share of its last sample period (1/6 s to 1 s, by product) in which any kernel
# ran, our own included; polling once a second reads a fresh period each time, and after a few in a row the work
# cannot be our own last kernels, because we are not launching any while we wait.
IDLE_POLL_S = 1.0
UTILISATION_BUSY_PERCENT = 10  # an idle GPU reads 0; a monitoring agent's occasional query stays far below this
UTILISATION_BUSY_POLLS = 3

CARD_ID_HEX_DIGITS = 12  # 48 bits: no two cards of one fleet collide, and it stays short enough to read in a table


class TelemetryUnavailable(RuntimeError):
    """NVML could not be loaded or initialised (no driver, or no NVIDIA GPU)."""


class GpuBusyError(RuntimeError):
    """Another process (or, where processes are hidden, sustained utilisation) kept the GPU busy past the timeout."""

    def __init__(self, message: str, processes: tuple[GpuProcess, ...] = (), utilisation_percent: int | None = None,
                 waited_s: float = 0.0):
        super().__init__(message)
        self.processes = processes
        self.utilisation_percent = utilisation_percent
        self.waited_s = waited_s


@functools.cache
def _nvml():
    """pynvml, initialised once per process."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or ImportError when absent
        raise TelemetryUnavailable(f"NVML is not available: {exc}") from exc
    return pynvml


def box_gpus() -> list[tuple[str, str]]:
    """(model, UUID) of every GPU NVML sees, in its order. CUDA_VISIBLE_DEVICES takes the UUID, which names one card
    whatever order CUDA would number them in."""
    pynvml = _nvml()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    return [(_text(pynvml.nvmlDeviceGetName(h)), _text(pynvml.nvmlDeviceGetUUID(h))) for h in handles]


def device_minor(uuid: str) -> int:
    """The number of the card's device node (/dev/nvidiaN), which a sandbox binds; CUDA's numbering of the cards may
    differ from it (CUDA_VISIBLE_DEVICES)."""
    pynvml = _nvml()
    try:
        return int(pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByUUID(uuid)))
    except pynvml.NVMLError as exc:
        raise TelemetryUnavailable(f"NVML cannot say the device node of {uuid}: {exc}") from exc


def nvml_handle(cuda_device: int | None = 0):
    """The NVML handle of a CUDA device (by PCI bus id). Where CUDA cannot name the device (no CuPy, no driver), NVML's
    only device on a box of one; on a box of several a guess could read another card's clock and tenants, so
    TelemetryUnavailable says so."""
    pynvml = _nvml()
    why = "no CUDA device was named"
    if cuda_device is not None:
        try:
            import cupy

            bus_id = cupy.cuda.Device(cuda_device).pci_bus_id
            return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except Exception as exc:  # no CuPy, no CUDA driver, or a bus id NVML does not know
            why = f"CUDA device {cuda_device} could not be found by its PCI bus id ({exc})"
    if pynvml.nvmlDeviceGetCount() == 1:
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    raise TelemetryUnavailable(f"{why}, and NVML sees {pynvml.nvmlDeviceGetCount()} GPUs")


def collect_power_w(handle) -> float:
    return _nvml().nvmlDeviceGetPowerUsage(handle) / 1000.0


def collect_temperature_c(handle) -> float:
    pynvml = _nvml()
    return float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))


def collect_sm_clock_mhz(handle) -> float:
    pynvml = _nvml()
    return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def collect_energy_mj(handle) -> float:
    """The board's energy since the driver loaded, in millijoules. It moves in steps tens of milliseconds apart, and a
    reading costs milliseconds under load: sgemm.measuring.energy charges it between its steps."""
    return float(_nvml().nvmlDeviceGetTotalEnergyConsumption(handle))


def collect_power_limit_w(handle) -> float:
    """The power limit the board enforces now (the lowest of the limits set on it), in watts."""
    pynvml = _nvml()
    try:
        return pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except pynvml.NVMLError as exc:
        raise TelemetryUnavailable(f"NVML cannot read the enforced power limit: {exc}") from exc


def counter_support(handle) -> str | None:
    """Why the board's energy counter cannot be read (NVML_ERROR_NOT_SUPPORTED on boards without one), or None."""
    pynvml = _nvml()
    try:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except pynvml.NVMLError_NotSupported:
        return "NVML has no energy counter on this GPU (NVML_ERROR_NOT_SUPPORTED)"
    except pynvml.NVMLError as exc:
        return f"NVML cannot read the energy counter: {exc}"
    return None


def gpu_name(handle) -> str:
    return _text(_nvml().nvmlDeviceGetName(handle))


def collect_throttle_reasons(handle) -> int:
    return int(_nvml().nvmlDeviceGetCurrentClocksEventReasons(handle))


def collect_throttled_ns(handle) -> dict[str, int]:
    """Cumulative time the driver has held clocks down for power and for temperature."""
    pynvml = _nvml()
    return {
        policy: int(pynvml.nvmlDeviceGetViolationStatus(handle, constant).violationTime)
        for policy, constant in (("power", pynvml.NVML_PERF_POLICY_POWER), ("thermal", pynvml.NVML_PERF_POLICY_THERMAL))
    }


def collect_utilisation_percent(handle) -> int | None:
    """Share of NVML's last sample period with a kernel running, or None where the GPU does not report it (MIG)."""
    pynvml = _nvml()
    try:
        return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except pynvml.NVMLError_NotSupported:
        return None


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


@dataclass
class CaseTelemetry:
    """What the GPU did while one case was timed."""

    readings: int = 0
    power_w_mean: float = 0.0
    power_w_max: float = 0.0
    temperature_c_max: float = 0.0
    nvml_sm_clock_mhz_min: float = 0.0
    throttle_mask: int = 0  # OR of every reading's reasons
    throttle_reasons: list[str] = field(default_factory=list)
    throttled_ms: dict[str, float] = field(default_factory=dict)  # power / thermal, over the case
    window_ms: float = 0.0  # wall time from the monitor's start to its finish: what throttled_ms was counted over

    def as_dict(self) -> dict:
        return asdict(self)


class CaseMonitor:
    """Polls NVML while a case runs: call start(), then poll() as often as convenient (it rate-limits), then
    finish()."""

    def __init__(self, handle, clock: Callable[[], float] = time.monotonic):
        self.handle = handle
        self._now = clock  # injectable so that a test can drive the rate limit without depending on wall time
        self._power: list[float] = []
        self._temperature: list[float] = []
        self._clock: list[float] = []
        self._mask = 0
        self._last = 0.0
        self._throttled_at_start: dict[str, int] = {}
        self._started = math.nan

    def start(self) -> None:
        self._throttled_at_start = collect_throttled_ns(self.handle)
        self._started = self._now()
        self._read()

    def poll(self) -> None:
        if self._now() - self._last >= POLL_INTERVAL_S:
            self._read()

    def _read(self) -> None:
        self._last = self._now()
        self._power.append(collect_power_w(self.handle))
        self._temperature.append(collect_temperature_c(self.handle))
        self._clock.append(collect_sm_clock_mhz(self.handle))
        self._mask |= collect_throttle_reasons(self.handle)

    def finish(self) -> CaseTelemetry:
        self._read()
        throttled = collect_throttled_ns(self.handle)
        return CaseTelemetry(
            readings=len(self._power),
            power_w_mean=sum(self._power) / len(self._power),
            power_w_max=max(self._power),
            temperature_c_max=max(self._temperature),
            nvml_sm_clock_mhz_min=min(self._clock),
            throttle_mask=self._mask,
            throttle_reasons=reason_names(self._mask),
            throttled_ms={k: (throttled[k] - self._throttled_at_start.get(k, 0)) / 1e6 for k in throttled},
            window_ms=1e3 * (self._now() - self._started),
        )


class CardReadings:
    """The readings the paired timer takes while a block runs (sgemm.measuring.paired.Readings), from NVML."""

    def __init__(self, handle):
        self.handle = handle

    @classmethod
    def of(cls, cuda_device: int = 0) -> CardReadings | None:
        """The readings of a CUDA device, or None where NVML cannot give them (timing goes on without them)."""
        try:
            return cls(nvml_handle(cuda_device))
        except TelemetryUnavailable:
            return None

    def sm_clock_mhz(self) -> float:
        return collect_sm_clock_mhz(self.handle)

    def energy_mj(self) -> float:
        return collect_energy_mj(self.handle)


@dataclass(frozen=True)
class GpuProcess:
    """Another process NVML lists on the GPU."""

    pid: int
    used_memory_mib: int | None  # None where NVML does not say (it reports "not available" under some drivers)
    name: str = ""  # executable name; empty when NVML cannot name it (gone meanwhile, or another PID namespace)

    def describe(self) -> str:
        """'pid 1234 (python3, 1,532 MiB)'."""
        memory = "memory not reported" if self.used_memory_mib is None else f"{self.used_memory_mib:,} MiB"
        return f"pid {self.pid} ({self.name or 'unknown name'}, {memory})"


def default_own_pids() -> frozenset[int]:
    """This process and its parent: what a benchmark process asv forked must not count as another user.

    asv runs each benchmark in a process forked from its own server process, which imported the suite and may hold a
    CUDA context of ours; asv runs benchmarks one at a time, so nothing else below it is on the GPU. Read at call
    time, never at import: the pid changes with every fork. A process that launches the benchmarks (the gate, before
    it runs asv) passes {os.getpid()} instead, so that nothing but itself is ignored.
    """
    return frozenset({os.getpid(), os.getppid()})


def other_processes(handle, own_pids: Iterable[int] | None = None) -> list[GpuProcess]:
    """Compute and graphics processes on this GPU other than own_pids (default: default_own_pids()), by pid.

    NVML reports pids of the host's PID namespace; inside a container with its own namespace the list may be empty
    or hold pids we cannot match, which is why wait_until_idle also reads utilisation.
    """
    pynvml = _nvml()
    ignore = default_own_pids() if own_pids is None else frozenset(own_pids)
    listed = list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    # graphics contexts compete for the same SMs; older bindings or some products do not list them
    graphics = getattr(pynvml, "nvmlDeviceGetGraphicsRunningProcesses", None)
    if graphics is not None:
        try:
            listed += graphics(handle)
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound):
            pass
    found: dict[int, GpuProcess] = {}
    for info in listed:
        pid = int(info.pid)
        if pid in ignore or pid in found:  # a process with compute and graphics contexts is listed twice: name it once
            continue
        found[pid] = GpuProcess(pid, _memory_mib(info.usedGpuMemory), _process_name(pid))
    return [found[pid] for pid in sorted(found)]


def _memory_mib(used_bytes) -> int | None:
    # pynvml turns NVML's "not available" (all bits set) into None; older bindings pass the raw value through
    if used_bytes is None or used_bytes >= 2**64 - 1:
        return None
    return round(used_bytes / 2**20)


def _process_name(pid: int) -> str:
    pynvml = _nvml()
    try:
        return os.path.basename(_text(pynvml.nvmlSystemGetProcessName(pid)))
    except pynvml.NVMLError:  # it exited since it was listed, or it belongs to a namespace NVML cannot see into
        return ""


def wait_until_idle(handle, timeout_s: float, poll_s: float = IDLE_POLL_S, own_pids: Iterable[int] | None = None, *,
                    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                    on_busy: Callable[[str], None] | None = None) -> float:
    """Return the seconds waited once the GPU is idle; raise GpuBusyError when it is still busy after timeout_s.

    Busy means another process is listed (other_processes), whatever its utilisation: a process that holds a context
    can launch work at any moment, and NVBench then discards the throttled samples until a case has none left.
    Where processes are hidden (another container), utilisation at or above UTILISATION_BUSY_PERCENT for
    UTILISATION_BUSY_POLLS polls in a row is busy too. One reading below the threshold with no process listed is idle.
    A high reading short of that streak is undecided and polled again, even past timeout_s, so that neither our own
    last kernels nor a single reading refuses the GPU: the wait ends within timeout_s + (UTILISATION_BUSY_POLLS - 1)
    * poll_s. on_busy, when given, is told once why the wait began (e.g. to print it).
    """
    ignore = default_own_pids() if own_pids is None else frozenset(own_pids)
    started = clock()
    high_polls = 0  # consecutive polls at or above the utilisation threshold
    told = False
    while True:
        others = other_processes(handle, ignore)
        utilisation = collect_utilisation_percent(handle)
        high = utilisation is not None and utilisation >= UTILISATION_BUSY_PERCENT
        high_polls = high_polls + 1 if high else 0
        waited = clock() - started
        if not others and not high:
            return waited
        if others or high_polls >= UTILISATION_BUSY_POLLS:
            if waited >= timeout_s:
                raise GpuBusyError(_busy_message(handle, others, utilisation, high_polls) + f"; waited {waited:.0f} s",
                                   tuple(others), utilisation, waited)
            if on_busy is not None and not told:
                on_busy(_busy_message(handle, others, utilisation, high_polls) + f"; waiting up to {timeout_s:.0f} s")
                told = True
        # poll at the deadline itself rather than one interval past it
        remaining = timeout_s - waited
        sleep(min(poll_s, remaining) if remaining > 0 else poll_s)


def _busy_message(handle, others: list[GpuProcess], utilisation: int | None, high_polls: int) -> str:
    """'GPU 0 (NVIDIA H100 80GB HBM3) is in use by pid 1234 (python3, 1,532 MiB)'; NVML's index, as nvidia-smi shows."""
    pynvml = _nvml()
    gpu = f"GPU {pynvml.nvmlDeviceGetIndex(handle)} ({_text(pynvml.nvmlDeviceGetName(handle))})"
    if others:
        return f"{gpu} is in use by " + ", ".join(process.describe() for process in others)
    return (f"{gpu} is in use: {utilisation}% utilisation for {high_polls} polls in a row with no process listed "
            f"(another container?)")


def driver_present() -> bool:
    """Whether this machine has an NVIDIA driver: its CUDA library loads. CuPy and NVML report a missing driver in
    words that point elsewhere ("CUDA driver version is insufficient", "Shared Library Not Found")."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def card_id(handle) -> str:
    """A short stable name for the physical card: it tells two cards of one model apart without publishing the UUID."""
    return card_id_of_uuid(_text(_nvml().nvmlDeviceGetUUID(handle)))


def card_id_of_uuid(uuid: str) -> str:
    return hashlib.sha256(uuid.encode()).hexdigest()[:CARD_ID_HEX_DIGITS]


def gpu_identity(cuda_device: int | None = 0) -> Gpu:
    """What NVML says the GPU is (all but its SM count, which only CUDA knows: sgemm.measuring.record.device_info)."""
    pynvml = _nvml()
    handle = nvml_handle(cuda_device)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    return Gpu(
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        compute_capability=major * 10 + minor,
        max_sm_clock_mhz=float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        driver=_text(pynvml.nvmlSystemGetDriverVersion()),
        memory_gib=round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30),
        card=card_id_of_uuid(_text(pynvml.nvmlDeviceGetUUID(handle))),
    )


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
