"""GPU identity and per-case telemetry from NVML (pynvml): which GPU a case ran on and the state it ran in.

Each reading is one small collect_* function of an NVML handle. NVML ignores CUDA_VISIBLE_DEVICES, so a CUDA device
is mapped to its NVML handle through its PCI bus id.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field

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


class TelemetryUnavailable(RuntimeError):
    """NVML could not be loaded or initialised (no driver, or no NVIDIA GPU)."""


@functools.cache
def _nvml():
    """pynvml, initialised once per process."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or ImportError when absent
        raise TelemetryUnavailable(f"NVML is not available: {exc}") from exc
    return pynvml


def nvml_handle(cuda_device: int | None = 0):
    """The NVML handle of a CUDA device (by PCI bus id), or of NVML's device 0 when CUDA is not usable here."""
    pynvml = _nvml()
    if cuda_device is not None:
        try:
            import cupy

            bus_id = cupy.cuda.Device(cuda_device).pci_bus_id
            return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except Exception:  # no CuPy or no CUDA driver: NVML's own first device is the best guess
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(0)


def collect_power_w(handle) -> float:
    return _nvml().nvmlDeviceGetPowerUsage(handle) / 1000.0


def collect_temperature_c(handle) -> float:
    pynvml = _nvml()
    return float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))


def collect_sm_clock_mhz(handle) -> float:
    pynvml = _nvml()
    return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def collect_throttle_reasons(handle) -> int:
    return int(_nvml().nvmlDeviceGetCurrentClocksEventReasons(handle))


def collect_throttled_ns(handle) -> dict[str, int]:
    """Cumulative time the driver has held clocks down for power and for temperature."""
    pynvml = _nvml()
    return {
        policy: int(pynvml.nvmlDeviceGetViolationStatus(handle, constant).violationTime)
        for policy, constant in (("power", pynvml.NVML_PERF_POLICY_POWER), ("thermal", pynvml.NVML_PERF_POLICY_THERMAL))
    }


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

    def as_dict(self) -> dict:
        return asdict(self)


class CaseMonitor:
    """Polls NVML while a case runs: call start(), then poll() as often as convenient (it rate-limits), then finish()."""

    def __init__(self, handle):
        self.handle = handle
        self._power: list[float] = []
        self._temperature: list[float] = []
        self._clock: list[float] = []
        self._mask = 0
        self._last = 0.0
        self._throttled_at_start: dict[str, int] = {}

    def start(self) -> None:
        self._throttled_at_start = collect_throttled_ns(self.handle)
        self._read()

    def poll(self) -> None:
        if time.monotonic() - self._last >= POLL_INTERVAL_S:
            self._read()

    def _read(self) -> None:
        self._last = time.monotonic()
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
        )


@dataclass(frozen=True)
class GpuIdentity:
    """What a GPU is (stable facts only: these become asv machine facets and graph identity)."""

    model: str
    memory_gib: int
    compute_capability: str
    # volatile or per-box facts, recorded beside results but never part of the machine identity
    uuid: str = ""
    driver: str = ""
    max_sm_clock_mhz: int = 0


def gpu_identity(cuda_device: int | None = 0) -> GpuIdentity:
    pynvml = _nvml()
    handle = nvml_handle(cuda_device)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    return GpuIdentity(
        model=_text(pynvml.nvmlDeviceGetName(handle)),
        memory_gib=round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30),
        compute_capability=f"{major}.{minor}",
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        driver=_text(pynvml.nvmlSystemGetDriverVersion()),
        max_sm_clock_mhz=int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
    )


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
