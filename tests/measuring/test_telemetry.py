import os
import sys
import types
from collections import Counter

import pytest

from sgemm.gpu import Gpu
from sgemm.measuring import telemetry


@pytest.fixture(autouse=True)
def fresh_nvml():
    telemetry._nvml.cache_clear()  # each test brings its own pynvml
    yield
    telemetry._nvml.cache_clear()


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - named as pynvml names it
    pass


class NVMLError_NotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
    pass


NVML_ERRORS = dict(NVMLError=NVMLError, NVMLError_NotSupported=NVMLError_NotSupported,
                   NVMLError_NotFound=NVMLError_NotFound, NVMLError_FunctionNotFound=NVMLError_FunctionNotFound)


def fake_nvml(power_mw, clocks_mhz, reasons, violation_ns, calls=None):
    """A pynvml stand-in whose readings step through the given sequences; calls, when given, counts power readings."""
    readings = {"power": iter(power_mw), "clock": iter(clocks_mhz), "reasons": iter(reasons),
                "violation": iter(violation_ns)}
    calls = Counter() if calls is None else calls

    def power(handle):
        calls["power"] += 1
        return next(readings["power"])

    nvml = types.SimpleNamespace(
        **NVML_ERRORS,
        NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_PERF_POLICY_POWER=0, NVML_PERF_POLICY_THERMAL=1,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: "handle",
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetPowerUsage=power,
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
    assert identity == Gpu("NVIDIA H100 80GB HBM3", 90, None, 1980.0, "580.159.04", 80, card="9de46d38d02a")
    assert identity.compute_capability_text == "9.0"


def test_a_card_cuda_cannot_name_is_guessed_on_a_box_of_one_and_refused_on_a_box_of_several(monkeypatch):
    # No CUDA driver here, so CuPy cannot give the device's PCI bus id: NVML's only card is the card; of four, NVML's
    # first is a guess that read another card's tenants and stopped a gate of four H100s.
    nvml = fake_nvml([], [], [], [])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert telemetry.nvml_handle(2) == "handle"
    nvml.nvmlDeviceGetCount = lambda: 4
    with pytest.raises(telemetry.TelemetryUnavailable, match="CUDA device 2 could not be found.*NVML sees 4 GPUs"):
        telemetry.nvml_handle(2)
    assert telemetry.CardReadings.of(2) is None  # timing goes on without readings rather than with another card's


def test_case_monitor_summarises_the_readings(monkeypatch):
    # start: violation x2 + one reading; finish: one reading + violation x2
    nvml = fake_nvml(power_mw=[400_000, 700_000], clocks_mhz=[1980, 1500], reasons=[0x0, 0x4],
                     violation_ns=[1_000_000, 5_000_000, 3_500_000, 5_000_000])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    clock = iter([10.0, 10.0, 12.5, 12.5])  # start, its reading; finish's reading, its end
    monitor = telemetry.CaseMonitor("handle", clock=lambda: next(clock))
    monitor.start()
    summary = monitor.finish()
    assert summary.readings == 2
    assert summary.window_ms == pytest.approx(2500.0)  # what the violation time was counted over
    assert summary.power_w_mean == pytest.approx(550.0) and summary.power_w_max == pytest.approx(700.0)
    assert summary.nvml_sm_clock_mhz_min == 1500
    assert summary.throttle_reasons == ["SW power cap"]
    assert summary.throttled_ms == {"power": pytest.approx(2.5), "thermal": pytest.approx(0.0)}


class FakeClock:
    """Monotonic time that moves only when the code under test sleeps (or the test advances it)."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        # a wait that never ends fails here instead of hanging the suite
        assert sum(self.sleeps) < 3600, "waited an hour of fake time"


def test_poll_is_rate_limited(monkeypatch):
    # counted NVML readings on a clock the test moves: no dependence on how fast this machine polls
    calls = Counter()
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([1] * 3, [1] * 3, [0] * 3, [0] * 2, calls))
    clock = FakeClock()
    monitor = telemetry.CaseMonitor("handle", clock=clock)
    monitor.start()
    for _ in range(1000):
        monitor.poll()  # same instant as start: within the interval, so no reading
    assert calls["power"] == 1
    clock.now += telemetry.POLL_INTERVAL_S * 0.9
    monitor.poll()
    assert calls["power"] == 1
    clock.now += telemetry.POLL_INTERVAL_S * 0.2
    for _ in range(1000):
        monitor.poll()  # past the interval since the last reading: exactly one more, then quiet again
    assert calls["power"] == 2


def test_missing_nvml_is_reported_as_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(telemetry.TelemetryUnavailable, match="NVML is not available"):
        telemetry.gpu_identity()


def test_reason_names_leave_idle_out():
    assert telemetry.reason_names(0x1 | 0x4 | 0x40) == ["SW power cap", "HW thermal slowdown"]


@pytest.mark.gpu
def test_identity_of_this_gpu():
    identity = telemetry.gpu_identity(0)
    assert identity.name and identity.memory_gib > 0 and identity.max_sm_clock_mhz > 0


# ---- busy GPU: another process, or sustained utilisation where processes are hidden ----

MIB = 2**20
OTHER = 1234  # a pid that is neither this test process nor its parent
H100_LABEL = "GPU 0 (NVIDIA H100 80GB HBM3)"


def busy_nvml(polls, names=None, graphics=None, calls=None):
    """A pynvml stand-in for the busy check. polls[i] = (compute processes as (pid, bytes), utilisation %) for the
    i-th poll, the last one repeating; names maps pid -> NVML's process name (missing: NVML cannot name it);
    graphics, when given, is the graphics process list of every poll, or an exception class it raises."""
    names = names or {}
    calls = Counter() if calls is None else calls
    state = {"poll": -1}

    def compute(handle):
        calls["compute"] += 1
        state["poll"] = min(state["poll"] + 1, len(polls) - 1)
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in polls[state["poll"]][0]]

    def graphics_processes(handle):
        if isinstance(graphics, type):
            raise graphics()
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in graphics or []]

    def utilisation(handle):
        calls["utilisation"] += 1
        percent = polls[state["poll"]][1]
        if percent is None:
            raise NVMLError_NotSupported()
        return types.SimpleNamespace(gpu=percent, memory=0)

    def process_name(pid):
        if pid not in names:
            raise NVMLError_NotFound()
        return names[pid]

    return types.SimpleNamespace(
        **NVML_ERRORS,
        nvmlInit=lambda: None,
        nvmlDeviceGetComputeRunningProcesses=compute,
        nvmlDeviceGetGraphicsRunningProcesses=graphics_processes,
        nvmlDeviceGetUtilizationRates=utilisation,
        nvmlSystemGetProcessName=process_name,
        nvmlDeviceGetIndex=lambda h: 0,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3",
        nvmlDeviceGetUUID=lambda h: {"handle": "GPU-123", "other": "GPU-456"}[h],
    )


def wait(clock, timeout_s=30, **kwargs):
    return telemetry.wait_until_idle("handle", timeout_s, poll_s=1.0, sleep=clock.sleep, clock=clock, **kwargs)


def test_idle_gpu_returns_at_once(monkeypatch):
    calls = Counter()
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([], 0)], calls=calls))
    clock = FakeClock()
    assert wait(clock) == 0
    assert clock.sleeps == [] and calls["compute"] == 1


def test_another_process_is_refused_after_the_timeout_whatever_its_utilisation(monkeypatch):
    # utilisation 0: the other process holds a context but is between launches; it is busy all the same
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([(OTHER, 1532 * MIB)], 0)], {OTHER: b"/usr/bin/python3"}))
    clock = FakeClock()
    with pytest.raises(telemetry.GpuBusyError) as raised:
        wait(clock, timeout_s=30)
    assert str(raised.value) == f"{H100_LABEL} is in use by pid {OTHER} (python3, 1,532 MiB); waited 30 s"
    assert sum(clock.sleeps) == 30  # waited the whole timeout, no more
    assert raised.value.processes == (telemetry.GpuProcess(OTHER, 1532, "python3"),)
    assert raised.value.waited_s == 30 and isinstance(raised.value, RuntimeError)


def test_wait_polls_at_the_deadline_not_an_interval_past_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([(OTHER, MIB)], 0)]))
    clock = FakeClock()
    with pytest.raises(telemetry.GpuBusyError, match=r"waited 2 s$"):
        wait(clock, timeout_s=2.5)
    assert clock.sleeps == [1.0, 1.0, 0.5]


def test_message_names_every_process_even_unnamed_and_without_memory(monkeypatch):
    # NVML's "not available" memory arrives as None from pynvml, or as all bits set from older bindings
    polls = [([(77, None), (OTHER, 2048 * MIB), (78, 2**64 - 1)], 0)]
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml(polls, {OTHER: "cublas_loop"}))
    with pytest.raises(telemetry.GpuBusyError) as raised:
        wait(FakeClock(), timeout_s=0)
    assert str(raised.value) == (f"{H100_LABEL} is in use by pid 77 (unknown name, memory not reported), "
                                 f"pid 78 (unknown name, memory not reported), pid {OTHER} (cublas_loop, 2,048 MiB); "
                                 "waited 0 s")


def test_process_that_leaves_during_the_wait_lets_it_return(monkeypatch):
    busy = ([(OTHER, MIB)], 90)
    told = []
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([busy, busy, ([], 0)], {OTHER: "python3"}))
    clock = FakeClock()
    assert wait(clock, on_busy=told.append) == 2
    assert clock.sleeps == [1.0, 1.0]
    assert told == [f"{H100_LABEL} is in use by pid {OTHER} (python3, 1 MiB); waiting up to 30 s"]  # once, not per poll


def test_own_process_and_parent_are_ignored_by_default(monkeypatch):
    ours = [(os.getpid(), 900 * MIB), (os.getppid(), 10 * MIB)]
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([(ours, 0)]))
    assert telemetry.other_processes("handle") == []
    clock = FakeClock()
    assert wait(clock) == 0 and clock.sleeps == []


def test_gate_ignores_only_itself(monkeypatch):
    # the process that launches asv passes its own pid alone: its parent (a shell, a notebook) counts as another user
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([(os.getpid(), MIB), (os.getppid(), MIB)], 0)]))
    assert [p.pid for p in telemetry.other_processes("handle", own_pids={os.getpid()})] == [os.getppid()]
    with pytest.raises(telemetry.GpuBusyError, match=f"pid {os.getppid()} "):
        wait(FakeClock(), timeout_s=0, own_pids={os.getpid()})


def test_graphics_processes_count_and_a_pid_in_both_lists_is_named_once(monkeypatch):
    nvml = busy_nvml([([(OTHER, MIB)], 0)], graphics=[(OTHER, MIB), (4321, 3 * MIB)])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert [(p.pid, p.used_memory_mib) for p in telemetry.other_processes("handle")] == [(OTHER, 1), (4321, 3)]


def test_graphics_list_unsupported_leaves_the_compute_list(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([(OTHER, MIB)], 0)], graphics=NVMLError_NotSupported))
    assert [p.pid for p in telemetry.other_processes("handle")] == [OTHER]


def test_sustained_utilisation_without_a_listed_process_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([], 97)]))
    clock = FakeClock()
    with pytest.raises(telemetry.GpuBusyError) as raised:
        wait(clock, timeout_s=10)
    assert str(raised.value) == (f"{H100_LABEL} is in use: 97% utilisation for 11 polls in a row with no process "
                                 "listed (another container?); waited 10 s")
    assert raised.value.processes == () and raised.value.utilisation_percent == 97


def test_utilisation_falling_before_the_streak_completes_is_idle(monkeypatch):
    # our own last kernels show in NVML's averaged utilisation for up to a second after we stop launching
    high = telemetry.UTILISATION_BUSY_PERCENT
    streak = [([], high)] * (telemetry.UTILISATION_BUSY_POLLS - 1)
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml(streak + [([], high - 1)]))
    clock = FakeClock()
    assert wait(clock, timeout_s=0) == telemetry.UTILISATION_BUSY_POLLS - 1  # polled on past the deadline


def test_utilisation_streak_is_completed_before_refusing_at_a_short_timeout(monkeypatch):
    # one high reading is not a verdict: the wait takes the full streak, then refuses, and stops there
    calls = Counter()
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([], 100)], calls=calls))
    with pytest.raises(telemetry.GpuBusyError, match=f"for {telemetry.UTILISATION_BUSY_POLLS} polls in a row"):
        wait(FakeClock(), timeout_s=0)
    assert calls["utilisation"] == telemetry.UTILISATION_BUSY_POLLS


def test_utilisation_not_reported_leaves_the_process_list(monkeypatch):
    # MIG instances report no utilisation: idle when no process is listed, busy when one is
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([], None)]))
    assert wait(FakeClock()) == 0
    telemetry._nvml.cache_clear()
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([(OTHER, MIB)], None)]))
    with pytest.raises(telemetry.GpuBusyError):
        wait(FakeClock(), timeout_s=0)


# ---- the physical card ----

def test_card_id_is_a_stable_short_hash_never_the_uuid(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", busy_nvml([([], 0)]))
    card = telemetry.card_id("handle")
    assert card == "9de46d38d02a"  # pinned: changing the hash would split every card's history
    assert card == telemetry.card_id("handle") and "GPU-123" not in card and "123" not in card
    assert telemetry.card_id("other") != card and len(telemetry.card_id("other")) == telemetry.CARD_ID_HEX_DIGITS
