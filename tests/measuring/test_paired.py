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

    def __init__(self, seconds, drift=0.0, jitter=0.0, watts=(300.0, 300.0, 300.0), seed=0, settle=None,
                 even_places=1.0):
        self.seconds, self.drift, self.jitter, self.watts = seconds, drift, jitter, watts
        self.settle = settle  # (slowdown, seconds): a card that starts fast and settles into its load
        # Every other block this much slower, whichever build it is: a place in the order that costs its block time
        # (as small kernels' blocks on an H200, lab/2026-11-29-pairing-warmup), the same for every build.
        self.even_places = even_places
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
        if len(self.blocks) % 2 == 0:
            speed *= self.even_places
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

    def gap_s(self, earlier, later):
        return later[1] - earlier[2]

    def span_s(self, first, last):
        return last[2] - first[1]

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


def test_blocks_run_in_pairs_of_cycles_and_the_builds_take_the_outer_places_in_turn():
    assert [builds_order(2, i) for i in range(12)] == [0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0]  # A B B A, B A A B, ...
    assert [builds_order(3, i) for i in range(12)] == [0, 1, 2, 2, 1, 0, 2, 1, 0, 0, 1, 2]


@pytest.mark.parametrize("order", ["ABBA", "BAAB"])
def test_a_pair_ratio_cancels_a_linear_drift_whichever_build_is_outside(order):
    # A 2% slower build B, and a card that slows by 1% a block, over four blocks in this order.
    times = {"A": [], "B": []}
    for place, build in enumerate(order):
        times[build].append((1.02 if build == "B" else 1.0) * (1 + 0.01 * place))
    assert pair_ratios(times["A"], times["B"])[0] == pytest.approx(1.02, abs=2e-4)
    assert times["B"][0] / times["A"][0] != pytest.approx(1.02, abs=2e-4)  # one cycle alone would not


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


def test_warm_up_of_a_steady_card_ends_soon_though_places_in_the_order_cost_their_blocks_time():
    # The first build's blocks read 1% apart by place (A B B A, B A A B: slow, fast, fast, slow), a card with no drift.
    gpu = SimulatedGpu([1e-3, 1e-3], jitter=0.0005, even_places=1.01)
    timing = run(gpu, warmup_s=0.1, max_warmup_s=1.5, max_s=1.0)
    assert timing.warmup_s < 0.5
    assert timing.ratio() == pytest.approx(1.0, abs=1e-3)


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


# --- The round's estimator ------------------------------------------------------------------------------------------


def round_ratios(estimator, seeds=80, jitter=0.004):
    return [run(SimulatedGpu([1e-3, 1e-3], jitter=jitter, seed=seed), max_s=0.6, min_s=0.6,
                target_half_width=0.0, estimator=estimator).ratio() for seed in range(seeds)]


def test_the_trimmed_mean_of_log_pair_ratios_spreads_less_from_round_to_round_than_their_median():
    from statistics import stdev

    assert stdev(round_ratios(paired.TRIMMED_MEAN)) < 0.92 * stdev(round_ratios(paired.MEDIAN))


def test_a_few_wild_pairs_barely_move_the_trimmed_mean():
    calm = [math.exp(0.001 * ((i * 7) % 11 - 5) / 5) for i in range(30)]
    wild = calm[:27] + [1.5, 1.6, 0.5]  # a clock step, two stalled launches
    assert paired.estimate(wild, paired.TRIMMED_MEAN) == pytest.approx(paired.estimate(calm, paired.TRIMMED_MEAN),
                                                                       abs=5e-4)
    assert abs(paired.estimate(wild, paired.TRIMMED_MEAN) - 1) < abs(sum(wild) / len(wild) - 1) / 20


def test_the_trimmed_means_interval_covers_the_ratio_about_95_times_in_100():
    import random as random_module

    rng = random_module.Random(3)
    covered = 0
    for _ in range(400):
        ratios = [1.002 * math.exp(rng.gauss(0, 0.003)) for _ in range(24)]
        low, high = paired.estimate_interval(ratios, paired.TRIMMED_MEAN)
        covered += low <= 1.002 <= high
    assert 366 <= covered <= 396
    assert paired.estimate_interval([1.0] * 5, paired.TRIMMED_MEAN) == (-math.inf, math.inf)


def test_an_unknown_estimator_is_refused():
    with pytest.raises(ValueError, match="'median' or 'trimmed mean', not 'mode'"):
        PairedSettings(estimator="mode")


# --- Places and pauses: a GPU behind a host that takes time ----------------------------------------------------------


class HostAndGpu:
    """A GPU that runs each block once the host released it and the block before it ended, behind a host whose
    every event query costs `query_s` of its own time (the stopping check's cost lies in them). A block in the middle
    places of its pair of cycles runs `middle` slower, and one that starts after the GPU idled runs `after_idle`
    slower: effects of a place, which the timer must not turn into a ratio."""

    def __init__(self, seconds, query_s=0.0, middle=0.0, after_idle=0.0, jitter=0.0, seed=0):
        self.seconds, self.query_s, self.middle, self.after_idle, self.jitter = seconds, query_s, middle, after_idle, \
            jitter
        self.rng = random.Random(seed)
        self.host = 0.0
        self.blocks = []
        self.queries = 0

    def queue(self, launch, count, flush_l2):
        block = {"build": launch.build, "count": count, "index": len(self.blocks), "release": None, "start": None}
        self.blocks.append(block)
        return block

    def release(self, block):
        block["release"] = self.host

    def _schedule(self, block):
        if block["start"] is not None:
            return
        before = self.blocks[block["index"] - 1] if block["index"] else None
        if before:
            self._schedule(before)
        ready = before["end"] if before else 0.0
        block["start"] = max(ready, block["release"])
        slower = 1 + (self.middle if block["index"] % 4 in (1, 2) else 0.0)
        slower *= 1 + (self.after_idle if before and block["start"] - ready > 1e-6 else 0.0)
        block["end"] = block["start"] + block["count"] * self.seconds[block["build"]] * slower * math.exp(
            self.rng.gauss(0, self.jitter))

    def started(self, block):
        if block["release"] is None:
            return False
        self._schedule(block)
        self.host = max(self.host, block["start"]) + 2e-5
        return True

    def seconds_per_launch(self, block):
        self.host += self.query_s
        self.queries += 1
        self._schedule(block)
        return (block["end"] - block["start"]) / block["count"]

    def gap_s(self, earlier, later):
        return later["start"] - earlier["end"]

    def span_s(self, first, last):
        return last["end"] - first["start"]

    def finish(self):
        pass

    def now(self):
        return self.host


def timed(gpu, **settings):
    return time_paired(launches(2), gpu, None, PairedSettings(**settings), seconds_per_launch=max(gpu.seconds),
                       now=gpu.now)


def test_a_place_effect_averages_out_of_the_ratio():
    # The blocks in the middle of every pair 0.2% slower: with A B B A every time, B read 0.2% slow; taking the outer
    # places in turn, the builds share it.
    gpu = HostAndGpu([1e-3, 1e-3], middle=0.002)
    timing = timed(gpu, warmup_s=0.05, max_warmup_s=0.05, max_s=2.0, min_s=2.0, target_half_width=0.0,
                   estimator=paired.TRIMMED_MEAN)
    assert timing.pairs % 2 == 0
    assert timing.ratio() == pytest.approx(1.0, abs=2e-5)


def test_a_costly_stopping_check_leaves_the_gpu_busy_and_the_gaps_are_read_from_the_events():
    # Every event query costs the host 30 us: read anew at every check, 300 pairs' blocks took 36 ms, past the 20 ms
    # of queued blocks, and the GPU waited before a block after every check, always before the same build's.
    gpu = HostAndGpu([1e-3, 1e-3], query_s=30e-6, after_idle=0.002, jitter=0.002)
    timing = timed(gpu, warmup_s=0.05, max_warmup_s=0.05, max_s=12.0, min_s=0.2, target_half_width=0.0,
                   estimator=paired.TRIMMED_MEAN)
    assert timing.pairs >= 290
    assert timing.idle_share < 0.01
    assert gpu.queries <= 1.05 * len(gpu.blocks)  # each block's events read once
    assert timing.ratio() == pytest.approx(1.0, abs=6e-4)


def test_idle_gaps_are_counted_when_the_host_falls_behind():
    gpu = HostAndGpu([1e-3, 1e-3], query_s=30e-3)  # a host far slower than the GPU: every block waits
    timing = timed(gpu, warmup_s=0.0, max_warmup_s=0.0, max_s=0.5, min_s=0.0, min_pairs=2, target_half_width=0.0)
    assert timing.idle_share > 0.5 and timing.idle_s > 0
    # The waits are counted and the longest kept: here a few long stalls, at the stopping checks.
    assert timing.gaps >= 1 and timing.idle_s / timing.gaps <= timing.longest_gap_s <= timing.idle_s


class SlowEnergyReadings:
    """NVML as it behaved on an H100: the SM clock read in microseconds, the board's energy in milliseconds of the
    host's own time; the energy counter here is the GPU's busy time at 300 W."""

    def __init__(self, gpu: HostAndGpu, energy_s: float):
        self.gpu, self.energy_s, self.energy_reads = gpu, energy_s, 0

    def sm_clock_mhz(self) -> float:
        return 1500.0

    def energy_mj(self) -> float:
        self.gpu.host += self.energy_s
        self.energy_reads += 1
        ended = [block for block in self.gpu.blocks if block.get("end") is not None and block["end"] <= self.gpu.host]
        return 300.0 * sum(block["end"] - block["start"] for block in ended) * 1e3


def test_the_energy_is_read_only_where_a_window_ends_so_a_slow_reading_leaves_the_gpu_busy():
    # 7 ms launches make one-launch blocks; an energy reading of 8 ms at every block left the GPU idle a tenth of the
    # round (fp32/warptile at 4096 on an H100). Read only at the counted window's ends, the GPU stays busy and the
    # case is still charged its energy.
    gpu = HostAndGpu([7e-3, 7e-3])
    readings = SlowEnergyReadings(gpu, energy_s=8e-3)
    timing = time_paired(launches(2), gpu, readings, PairedSettings(warmup_s=0.05, max_warmup_s=0.05, max_s=1.0,
                                                                    min_s=1.0, target_half_width=0.0),
                         seconds_per_launch=7e-3, now=gpu.now)
    assert timing.launches_per_block == 1 and timing.pairs >= 30
    assert timing.idle_share < 0.01
    assert readings.energy_reads == 2
    assert timing.joules_per_launch == pytest.approx(300.0 * 7e-3, rel=0.05)


@pytest.mark.parametrize("estimator", [paired.MEDIAN, paired.TRIMMED_MEAN])
def test_the_stopping_check_loads_what_it_needs_before_the_first_block_is_queued(monkeypatch, estimator):
    # On an H100 the first interval's import of SciPy (half a second) came in the middle of the counted blocks, and
    # the GPU sat idle that long behind a host that could not release the next block: 15-48% of a round idle.
    import sys

    import scipy

    # SciPy loads its submodules lazily on attribute access: the attribute goes first, then the module.
    monkeypatch.delattr(scipy, "special", raising=False)
    monkeypatch.delitem(sys.modules, "scipy.special", raising=False)
    monkeypatch.setattr(paired, "_order_statistic", paired._order_statistic.__wrapped__)
    gpu = SimulatedGpu([1e-3, 1e-3])
    loaded_at_first_queue = []
    queue = gpu.queue

    def watched_queue(launch, count, flush_l2):
        if not loaded_at_first_queue:
            loaded_at_first_queue.append("scipy.special" in sys.modules)
        return queue(launch, count, flush_l2)

    gpu.queue = watched_queue
    settings = PairedSettings(warmup_s=0.02, max_warmup_s=0.05, min_pairs=6, min_s=0.05, max_s=0.2,
                              estimator=estimator)
    time_paired(launches(2), gpu, gpu, settings, seconds_per_launch=1e-3, now=gpu.now)
    assert loaded_at_first_queue == [True]
