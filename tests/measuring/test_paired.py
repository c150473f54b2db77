"""The paired timer's method on a simulated GPU with a known answer: the order of blocks, the pair ratio that
cancels a drifting clock, the interval of the median, when it stops, and what energy each build is charged."""

import math
import random

import pytest

from sgemm.measuring import paired
from sgemm.measuring.paired import PairedSettings, builds_order, median_interval, pair_ratios, time_paired


class SimulatedGpu:
    """Blocks that run back to back on a card whose speed drifts and jitters: a block of build j takes
    count x seconds[j] x (1 + drift x t) x jitter. `started` moves the simulated clock to the block's start."""

    def __init__(self, seconds, drift=0.0, jitter=0.0, watts=(300.0, 300.0, 300.0), seed=0, settle=None):
        self.seconds, self.drift, self.jitter, self.watts = seconds, drift, jitter, watts
        self.settle = settle  # (slowdown, seconds): a card that starts fast and settles into its load
        self.rng = random.Random(seed)
        self.blocks = []  # (build, start, end)
        self.clock = 0.0
        self.finished = False

    def queue(self, launch, count, flush_l2):
        build = launch.build
        start = self.blocks[-1][2] if self.blocks else self.clock
        speed = (1 + self.drift * start) * math.exp(self.rng.gauss(0, self.jitter))
        if self.settle:
            speed *= 1 + self.settle[0] * (1 - math.exp(-start / self.settle[1]))
        block = (build, start, start + count * self.seconds[build] * speed, count)
        self.blocks.append(block)
        return block

    def release(self, block):
        pass

    def started(self, block):
        self.clock = max(self.clock, block[1])
        return True

    def seconds_per_launch(self, block):
        return (block[2] - block[1]) / block[3]

    def finish(self):
        self.finished = True

    def now(self):
        return self.clock

    # Readings
    def sm_clock_mhz(self):
        return 1500.0

    def energy_mj(self):
        joules = sum(self.watts[b] * (min(end, self.clock) - start) for b, start, end, _ in self.blocks
                     if start < self.clock)
        return joules * 1e3


def launches(count):
    made = []
    for build in range(count):
        def launch():
            pass

        launch.build = build
        made.append(launch)
    return made


def test_blocks_run_in_cycles_whose_order_turns_round_every_cycle():
    assert [builds_order(2, i) for i in range(8)] == [0, 1, 1, 0, 0, 1, 1, 0]
    assert [builds_order(3, i) for i in range(6)] == [0, 1, 2, 2, 1, 0]


def test_a_pair_ratio_cancels_a_linear_drift():
    # A 2% slower build, and a card that slows by 1% a block: A B B A with times 1, 1.02*1.01, 1.02*1.02, 1.03.
    first = [1.0, 1.03]
    other = [1.02 * 1.01, 1.02 * 1.02]
    assert pair_ratios(first, other)[0] == pytest.approx(1.02, abs=2e-4)
    assert other[0] / first[0] != pytest.approx(1.02, abs=2e-4)  # one cycle alone would not


@pytest.mark.parametrize("n, k", [(6, 1), (10, 2), (20, 6), (100, 40)])
def test_the_interval_of_a_median_is_the_binomial_order_statistics(n, k):
    from scipy import stats

    values = list(range(1, n + 1))
    low, high = median_interval(values)
    assert (low, high) == (k, n + 1 - k)
    coverage = 1 - 2 * stats.binom.cdf(k - 1, n, 0.5)
    assert coverage >= 0.95
    assert 1 - 2 * stats.binom.cdf(k, n, 0.5) < 0.95  # and no narrower pair of order statistics covers 95%


def test_fewer_than_six_values_give_no_interval():
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)


def run(gpu, builds=2, **settings):
    return time_paired(launches(builds), gpu, gpu, PairedSettings(**settings), seconds_per_launch=max(gpu.seconds),
                       now=gpu.now)


def test_a_known_ratio_comes_back_through_drift_and_jitter():
    gpu = SimulatedGpu([1e-3, 1.005e-3], drift=0.05, jitter=0.002)
    timing = run(gpu, max_s=3.0)
    assert timing.ratio() == pytest.approx(1.005, abs=5e-4)
    low, high = timing.interval()
    assert low <= 1.005 <= high
    assert gpu.finished


def test_identical_builds_read_one_and_the_interval_covers_it_about_95_times_in_100():
    covered = 0
    for seed in range(60):
        timing = run(SimulatedGpu([2e-3, 2e-3], drift=-0.1, jitter=0.001, seed=seed), max_s=3.0)
        assert timing.ratio() == pytest.approx(1.0, abs=1e-3)
        low, high = timing.interval()
        covered += low <= 1.0 <= high
    assert 52 <= covered <= 60


def test_it_stops_once_the_interval_is_tight_and_runs_to_the_cap_when_it_is_not():
    quiet = run(SimulatedGpu([1e-3, 1e-3], jitter=1e-5), min_pairs=8, max_s=5.0)
    assert quiet.pairs == 8
    noisy = run(SimulatedGpu([1e-3, 1e-3], jitter=0.02), min_pairs=8, max_s=0.5)
    assert noisy.pairs > 8
    assert noisy.elapsed_s - noisy.warmup_s >= 0.5


def test_a_slow_kernel_gets_enough_pairs_for_an_interval_though_it_overruns_its_time():
    timing = run(SimulatedGpu([0.1, 0.1], jitter=0.01), min_pairs=8, max_s=1.0, warmup_s=0.0, max_warmup_s=0.0)
    assert timing.launches_per_block == 1
    assert timing.pairs == paired.MIN_PAIRS_FOR_INTERVAL
    assert all(math.isfinite(x) for x in timing.interval())


def test_warm_up_blocks_are_not_counted_and_counting_starts_on_a_pair():
    gpu = SimulatedGpu([1e-3, 1e-3])
    timing = run(gpu, warmup_s=0.05, max_warmup_s=0.05, max_s=0.2)
    assert timing.warmup_s >= 0.05
    counted = sum(len(b.seconds_per_launch) for b in timing.builds)
    assert counted == 4 * timing.pairs  # whole pairs of whole cycles
    assert len(timing.builds[0].seconds_per_launch) == len(timing.builds[1].seconds_per_launch)


def test_the_case_is_charged_the_energy_of_its_counted_window():
    gpu = SimulatedGpu([1e-3, 1e-3], watts=(300.0, 600.0))
    timing = run(gpu, max_s=0.5)
    assert timing.joules_per_launch == pytest.approx(0.45, rel=0.01)  # half the launches at 300 W, half at 600 W
    assert math.isnan(timing.builds[0].joules_per_launch)  # no window of its own was asked for


def test_each_build_alone_is_charged_its_own_energy():
    gpu = SimulatedGpu([1e-3, 2e-3], watts=(300.0, 600.0))
    timing = run(gpu, max_s=0.5, solo_s=0.5)
    assert timing.builds[0].joules_per_launch == pytest.approx(0.3, rel=0.01)  # 300 W for 1 ms
    assert timing.builds[1].joules_per_launch == pytest.approx(1.2, rel=0.01)  # 600 W for 2 ms
    assert timing.builds[0].solo_launches * 1e-3 >= 0.5


def test_warm_up_waits_for_a_card_that_settles_into_its_load():
    gpu = SimulatedGpu([1e-3, 1.004e-3], settle=(0.3, 0.5))  # 30% slower once settled, half a second to get there
    timing = run(gpu, warmup_s=0.1, max_warmup_s=5.0, max_s=2.0)
    assert timing.warmup_s > 1.0
    assert timing.ratio() == pytest.approx(1.004, abs=5e-4)


def test_three_builds_are_each_judged_against_the_first():
    timing = run(SimulatedGpu([1e-3, 1.01e-3, 0.99e-3], drift=0.02, jitter=0.001), builds=3, max_s=2.0)
    assert timing.ratio(1) == pytest.approx(1.01, abs=5e-4)
    assert timing.ratio(2) == pytest.approx(0.99, abs=5e-4)


def test_one_build_alone_is_refused():
    with pytest.raises(ValueError, match="two builds"):
        run(SimulatedGpu([1e-3]), builds=1)


def test_the_method_is_named():
    assert PairedSettings().method == "paired in one process, L2 warm"
    assert PairedSettings(flush_l2=True).method == "paired in one process, L2 flushed before each launch"
