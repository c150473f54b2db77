"""The energy reading's method on a simulated card with a known power: windows whose ends are the counter's steps,
the error bound that holds, a lagging counter that cancels, the checks that flag a reading (power above the limit,
a GPU that idled, uncertain ends), a counter that is missing, stuck or goes back, and the cost formula."""

import math
import types
from dataclasses import replace

import pytest

from sgemm.measuring import energy
from sgemm.measuring.energy import (EnergySettings, EnergyUnavailable, board_energy, charge_window, cost_per_commit_s,
                                    energy_sizes)
from sgemm.measuring.record import HISTORY_ENERGY_SETTINGS
from sgemm.measuring.telemetry import TelemetryUnavailable


class SimulatedCard:
    """A card on a simulated clock that draws `watts` while it runs blocks back to back (each `block_s` long, then
    `gap_s` idle), with a counter that moves every `period_s` (from `phase_s`) to the energy drawn up to `lag_s`
    before that step, times `misread` (1: right). A reading costs `read_s` of the host's time, sampled halfway."""

    def __init__(self, watts=700.0, limit_w=700.0, period_s=0.1, phase_s=0.037, lag_s=0.0, read_s=0.005,
                 block_s=0.02, launches=100, gap_s=0.0, misread=1.0, moves=True):
        self.watts, self.power_limit_w, self.period_s, self.phase_s = watts, limit_w, period_s, phase_s
        self.lag_s, self.read_s, self.block_s, self.gap_s = lag_s, read_s, block_s, gap_s
        self.block_launches = launches
        self.misread, self.moves = misread, moves
        self.clock = 0.0
        self.queued = 0
        self.finished = False
        self.reads = 0

    # the host's clock
    def now(self):
        return self.clock

    def sleep(self, seconds):
        self.clock += seconds

    # BoardEnergy
    def energy_mj(self):
        self.reads += 1
        self.clock += self.read_s / 2
        step = math.floor((self.clock - self.phase_s) / self.period_s) * self.period_s + self.phase_s
        drawn = self.watts * (self.busy_s(step - self.lag_s) if self.moves else 0.0)
        self.clock += self.read_s / 2
        return math.floor(1e3 * drawn * self.misread)

    def busy_s(self, until):
        """How long the card ran launches from 0 to `until`."""
        if until <= 0:
            return 0.0
        cycle = self.block_s + self.gap_s
        whole, rest = divmod(until, cycle)
        return whole * self.block_s + min(rest, self.block_s)

    # LaunchFeed (through Feed)
    def top_up(self):
        while self.queued - self.running() <= 5:
            self.queued += 1

    def running(self):
        return min(int(self.clock // (self.block_s + self.gap_s)), self.queued - 1)

    def finish(self):
        self.finished = True

    def launches_in(self, first, last):
        return (last - first + 1) * self.block_launches

    def span_s(self, first, last):
        return (last - first + 1) * self.block_s + (last - first) * self.gap_s

    def idle_s(self, first, last):
        return (last - first) * self.gap_s


class Feed:
    """The card's LaunchFeed side (its `launches` is a count per block, the protocol's a method)."""

    def __init__(self, card):
        self.card = card

    def top_up(self):
        self.card.top_up()

    def running(self):
        return self.card.running()

    def finish(self):
        self.card.finish()

    def launches(self, first, last):
        return self.card.launches_in(first, last)

    def span_s(self, first, last):
        return self.card.span_s(first, last)

    def idle_s(self, first, last):
        return self.card.idle_s(first, last)


def charged(card, **settings):
    return charge_window(card, Feed(card), EnergySettings(**settings), now=card.now, sleep=card.sleep)


def test_a_steady_card_reads_its_power_within_the_bound_the_edges_give():
    card = SimulatedCard(watts=650.0)
    reading = charged(card)
    assert card.finished
    assert reading.flag == ""
    assert reading.power_w == pytest.approx(650.0, rel=reading.error_bound)
    seconds_per_launch = card.block_s / card.block_launches
    assert reading.seconds_per_launch == pytest.approx(seconds_per_launch)
    assert reading.joules_per_launch == pytest.approx(650.0 * seconds_per_launch, rel=reading.error_bound)
    assert reading.launches == pytest.approx(reading.window_s / seconds_per_launch)
    # Each end lies within two readings of a step: the bound is the two half spans over the window, and small.
    assert 0 < reading.error_bound <= 2 * card.read_s / reading.window_s + 1e-9
    assert reading.idle_share == 0 and reading.power_limit_w == 700.0


def test_the_window_begins_after_the_warm_up_and_its_ends_are_steps_of_the_counter():
    card = SimulatedCard(period_s=0.1, phase_s=0.037)
    reading = charged(card, warmup_s=1.0, window_s=2.0)
    assert reading.window_s >= 2.0 - reading.error_bound * reading.window_s
    # The window is a whole number of the counter's periods: it runs from one step to another.
    periods = reading.window_s / card.period_s
    assert periods == pytest.approx(round(periods), abs=2 * card.read_s / card.period_s)
    assert card.clock >= 3.0


@pytest.mark.parametrize("period_s", [0.02, 0.05, 0.1])
@pytest.mark.parametrize("phase_s", [0.0, 0.013, 0.061])
def test_a_stepped_counter_of_any_period_and_phase_gives_the_power_within_the_bound(period_s, phase_s):
    card = SimulatedCard(watts=512.0, period_s=period_s, phase_s=phase_s)
    reading = charged(card, warmup_s=0.5, window_s=1.0)
    assert abs(reading.power_w / 512.0 - 1) <= reading.error_bound


def test_a_counter_that_lags_the_card_reads_the_same_power_under_steady_load():
    on_time, late = SimulatedCard(watts=600.0), SimulatedCard(watts=600.0, lag_s=0.07)
    assert charged(late).power_w == pytest.approx(charged(on_time).power_w, rel=1e-6)


def test_a_reading_above_the_power_limit_is_flagged_not_recorded():
    # The misreading of short bursts: a 700 W board read at about 910 W.
    reading = charged(SimulatedCard(watts=700.0, misread=1.3))
    assert reading.power_w == pytest.approx(910.0, rel=0.01)
    assert "above the board's enforced limit 700 W (+5%)" in reading.flag
    assert "misread" in reading.flag


def test_a_reading_just_under_the_tolerance_is_kept():
    assert charged(SimulatedCard(watts=700.0, misread=1.04)).flag == ""


def test_a_gpu_that_waited_between_blocks_is_flagged():
    reading = charged(SimulatedCard(gap_s=0.002))
    assert reading.idle_share == pytest.approx(0.002 / 0.022, rel=0.05)
    assert "not back to back" in reading.flag


def test_ends_too_uncertain_for_the_window_are_flagged():
    # A counter read as slowly as 40 ms a reading, over a window of a fifth of a second.
    reading = charged(SimulatedCard(read_s=0.04, period_s=0.1), warmup_s=0.2, window_s=0.2)
    assert reading.error_bound > energy.MAX_ERROR_BOUND
    assert "uncertain" in reading.flag


def test_a_counter_that_never_moves_is_no_reading_and_the_feed_is_finished():
    card = SimulatedCard(moves=False)
    with pytest.raises(EnergyUnavailable, match="did not move in 1.0 s"):
        charged(card, warmup_s=0.1)
    assert card.finished


def test_a_counter_that_goes_back_is_no_reading():
    class Reset(SimulatedCard):
        def energy_mj(self):
            value = super().energy_mj()
            return value if self.reads < 3 else value - 10**6

    with pytest.raises(EnergyUnavailable, match="went back"):
        charged(Reset(), warmup_s=0.1)


def test_the_cost_per_commit_is_cases_times_warm_up_window_two_updates_and_the_work_ahead():
    settings = EnergySettings(warmup_s=1.0, window_s=2.0)
    assert settings.case_seconds(0.1) == pytest.approx(1.0 + 2.0 + 0.2 + energy.AHEAD_S)
    assert cost_per_commit_s(74, settings, 0.1) == pytest.approx(74 * (3.2 + energy.AHEAD_S))
    assert cost_per_commit_s(0, settings, 0.1) == 0


@pytest.mark.parametrize("seconds_per_launch", [2e-5, 2e-4, 1.7e-3, 0.05])
def test_the_feed_never_queues_more_launches_than_the_driver_takes(seconds_per_launch):
    """A launch beyond the driver's queue blocks until the GPU frees an entry, so a feed asking for more queued work
    than fits never returns (a 0.2 ms cuBLAS GEMM asked for 500 launches and hung, lab/2026-11-28-energy-track).
    Here the GPU finishes nothing while the host tops up: the host's worst case."""
    feed = energy.CudaLaunchFeed(lambda: None, seconds_per_launch)

    def queue_on_a_stalled_gpu():
        feed.blocks.append(types.SimpleNamespace(count=feed.count, end=types.SimpleNamespace(done=False)))

    feed._queue = queue_on_a_stalled_gpu
    feed.top_up()
    queued = sum(block.count for block in feed.blocks)
    assert queued <= energy.MAX_QUEUED_LAUNCHES
    assert len(feed.blocks) > energy.MIN_AHEAD_BLOCKS  # the running block and at least two ahead of it


def test_the_sizes_to_charge_are_read_from_a_list():
    assert energy_sizes("4096,8192") == (4096, 8192)
    assert energy_sizes("") == energy_sizes(None) == energy_sizes(" ") == ()
    with pytest.raises(ValueError, match="SGEMM_ENERGY_SIZES='big': not a comma-separated list of sizes"):
        energy_sizes("big")


# ---- which counter: none on this GPU, a card that is not CUDA's, no NVML ----

@pytest.fixture
def nvml(monkeypatch):
    """The telemetry readers board_energy calls, stood in for: an H100 with a counter and a 700 W limit."""
    state = {"name": "NVIDIA H100 80GB HBM3", "support": None, "limit": 700.0, "handle": "handle"}

    def handle(device):
        if isinstance(state["handle"], Exception):
            raise state["handle"]
        return state["handle"]

    def limit(h):
        if isinstance(state["limit"], Exception):
            raise state["limit"]
        return state["limit"]

    monkeypatch.setattr(energy, "nvml_handle", handle)
    monkeypatch.setattr(energy, "gpu_name", lambda h: state["name"])
    monkeypatch.setattr(energy, "counter_support", lambda h: state["support"])
    monkeypatch.setattr(energy, "collect_power_limit_w", limit)
    monkeypatch.setattr(energy, "collect_energy_mj", lambda h: 1234.0)
    return state


def test_a_card_with_a_counter_gives_its_counter_and_limit(nvml):
    board = board_energy(0, "NVIDIA H100 80GB HBM3")
    assert board.power_limit_w == 700.0 and board.energy_mj() == 1234.0


def test_a_gpu_without_an_energy_counter_says_so(nvml):
    nvml["support"] = "NVML has no energy counter on this GPU (NVML_ERROR_NOT_SUPPORTED)"
    with pytest.raises(EnergyUnavailable, match="no energy counter on the NVIDIA H100 80GB HBM3: NVML has no energy "
                                                "counter on this GPU \\(NVML_ERROR_NOT_SUPPORTED\\)"):
        board_energy(0)


def test_a_card_that_is_not_the_one_asked_for_is_not_charged(nvml):
    nvml["name"] = "NVIDIA L40S"
    with pytest.raises(EnergyUnavailable, match="NVML's card is NVIDIA L40S, not the NVIDIA H100 80GB HBM3 asked for"):
        board_energy(0, "NVIDIA H100 80GB HBM3")


def test_no_nvml_or_no_power_limit_is_no_counter(nvml):
    nvml["limit"] = TelemetryUnavailable("NVML cannot read the enforced power limit: Not Supported")
    with pytest.raises(EnergyUnavailable, match="power limit cannot be read"):
        board_energy(0)
    nvml["handle"] = TelemetryUnavailable("NVML is not available: no driver")
    with pytest.raises(EnergyUnavailable, match="no energy counter: NVML is not available: no driver"):
        board_energy(0)


# ---- on a GPU ----

@pytest.mark.gpu
@pytest.mark.requires("cupy")
def test_cublas_is_charged_over_a_window_between_counter_edges_on_this_gpu():
    import cupy

    from sgemm.catalogue import get_kernel
    from sgemm.measuring.problem import make_problem
    from sgemm.measuring.record import device_info
    from sgemm.measuring.verify import verify

    try:
        board = board_energy(0, device_info(0).name)
    except EnergyUnavailable as exc:
        pytest.skip(str(exc))
    with cupy.cuda.Device(0):
        problem = make_problem(get_kernel("fp16/cublas"), 4096, 4096, 4096)
        verify(problem)
        settings = replace(HISTORY_ENERGY_SETTINGS, warmup_s=0.5)  # the window the history charges over
        reading = energy.charge_launch(problem.launch, board, settings)
    assert reading.window_s >= settings.window_s * (1 - reading.error_bound)
    assert reading.error_bound <= energy.MAX_ERROR_BOUND
    assert reading.idle_share <= energy.MAX_IDLE_SHARE
    assert 0 < reading.power_w and reading.power_limit_w > 0
    assert reading.flag == "" or "above the board's enforced limit" in reading.flag
    assert reading.joules_per_launch == pytest.approx(reading.power_w * reading.seconds_per_launch)
