import sys
import types

import pytest

from sgemm import telemetry


@pytest.fixture(autouse=True)
def fresh_nvml():
    telemetry._nvml.cache_clear()  # each test brings its own pynvml
    yield
    telemetry._nvml.cache_clear()


def fake_nvml(power_mw, clocks_mhz, reasons, violation_ns):
    """A pynvml stand-in whose readings step through the given sequences."""
    readings = {"power": iter(power_mw), "clock": iter(clocks_mhz), "reasons": iter(reasons), "violation": iter(violation_ns)}
    nvml = types.SimpleNamespace(
        NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_PERF_POLICY_POWER=0, NVML_PERF_POLICY_THERMAL=1,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: "handle",
        nvmlDeviceGetPowerUsage=lambda h: next(readings["power"]),
        nvmlDeviceGetTemperature=lambda h, sensor: 50,
        nvmlDeviceGetClockInfo=lambda h, clock: next(readings["clock"]),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: next(readings["reasons"]),
        nvmlDeviceGetViolationStatus=lambda h, policy: types.SimpleNamespace(violationTime=next(readings["violation"])),
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=85_520_809_984),
        nvmlDeviceGetUUID=lambda h: "GPU-123",
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlDeviceGetMaxClockInfo=lambda h, clock: 1980,
    )
    return nvml


def test_identity_from_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], [], [], []))
    identity = telemetry.gpu_identity(cuda_device=None)
    assert identity == telemetry.GpuIdentity("NVIDIA H100 80GB HBM3", 80, "9.0", "GPU-123", "580.159.04", 1980)


def test_case_monitor_summarises_the_readings(monkeypatch):
    # start: violation x2 + one reading; finish: one reading + violation x2
    nvml = fake_nvml(power_mw=[400_000, 700_000], clocks_mhz=[1980, 1500], reasons=[0x0, 0x4],
                     violation_ns=[1_000_000, 5_000_000, 3_500_000, 5_000_000])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monitor = telemetry.CaseMonitor("handle")
    monitor.start()
    summary = monitor.finish()
    assert summary.readings == 2
    assert summary.power_w_mean == pytest.approx(550.0) and summary.power_w_max == pytest.approx(700.0)
    assert summary.nvml_sm_clock_mhz_min == 1500
    assert summary.throttle_reasons == ["SW power cap"]
    assert summary.throttled_ms == {"power": pytest.approx(2.5), "thermal": pytest.approx(0.0)}


def test_poll_is_rate_limited(monkeypatch):
    nvml = fake_nvml([1] * 3, [1] * 3, [0] * 3, [0] * 2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monitor = telemetry.CaseMonitor("handle")
    monitor.start()
    for _ in range(1000):
        monitor.poll()  # immediately after start: within the interval, so no reading
    assert len(monitor._power) == 1


def test_missing_nvml_is_reported_as_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(telemetry.TelemetryUnavailable, match="NVML is not available"):
        telemetry.gpu_identity()


def test_reason_names_leave_idle_out():
    assert telemetry.reason_names(0x1 | 0x4 | 0x40) == ["SW power cap", "HW thermal slowdown"]


@pytest.mark.gpu
def test_identity_of_this_gpu():
    identity = telemetry.gpu_identity(0)
    assert identity.model and identity.memory_gib > 0 and identity.max_sm_clock_mhz > 0
