"""Paired timing: several launches of one GEMM (builds of a kernel from two source trees, or a kernel and its
baseline) timed in alternating blocks in one process, so that whatever the card does meanwhile falls on every build
alike. Each block waits behind a blocking kernel, two more queued behind the one running; pairs of cycles run A B B A
and B A A B in turn; a pair's ratio is the geometric mean of its two cycles, and the result the median (or trimmed
mean) of the pairs' ratios with its 95% interval; a warm-up runs until the block times are steady, and the pairs stop
once every interval is tight enough or time is up; L2 is warm unless `flush_l2`; the SM clock is read per block and
the board's energy over whole windows; the GPU's idle time between counted blocks is read from their events.

The method, with what each field of PairedSettings does, is written once in docs/gate.md ("Paired rounds"); the runs
behind it are in lab/ (2026-11-25-power-cap, 2026-11-25-paired-timer).
"""

from __future__ import annotations

import ctypes
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

Launch = Callable[[], None]

CONFIDENCE = 0.95
MAX_BLOCK_LAUNCHES = 200  # with two more blocks queued, still inside the driver's queue of a few thousand launches
# Blocks released behind the one running: the host's reads and stopping checks must fit in the time they take, or the
# GPU would idle before the next block.
AHEAD = 2
IDLE_GAP_S = 50e-6  # a gap between blocks longer than a few kernel launches' worth: the GPU waited for the host
HOLD_TIMEOUT_NS = 10_000_000_000  # a block's blocker gives up after 10 s: a host that died never holds the GPU
# Warm-up ends once the median of the first build's last STEADY_WINDOW blocks is within STEADY_TOLERANCE of the
# STEADY_WINDOW before: a card that starts cold or idle reaches the clock of its load over the first second or so.
# Four: the first build takes four places in every period of the order (two pairs of cycles), and each place can cost
# its block time of its own (small kernels' blocks on an H200 read 1-2% apart by place, lab/2026-11-29-pairing-warmup);
# windows of a whole period compare like with like, where windows of three never read steady and ran to the cap.
STEADY_WINDOW = 4
STEADY_TOLERANCE = 0.003
# A 95% interval of a median from order statistics needs six values; a slow kernel may run past max_s to get them,
# up to HARD_LIMIT times it.
MIN_PAIRS_FOR_INTERVAL = 6
HARD_LIMIT = 4
# What a round's figure is of its pairs' ratios: their median, or the mean of their logarithms with this share cut
# from each end, which spreads less from round to round than the median under normal jitter while the cut keeps a
# few wild pairs (a clock step, a stalled launch) from moving it.
MEDIAN, TRIMMED_MEAN = "median", "trimmed mean"
TRIM = 0.2


@dataclass(frozen=True)
class PairedSettings:
    """How long a block lasts, how long the warm-up and the pairs go on, and whether L2 is flushed (the module's
    docstring says what each does)."""

    block_s: float = 0.01
    warmup_s: float = 0.3  # at least; then until the clock is steady, up to max_warmup_s
    max_warmup_s: float = 3.0
    min_pairs: int = 8
    min_s: float = 0.3
    max_s: float = 2.0
    target_half_width: float = 0.001  # of the ratio: 0.1%
    flush_l2: bool = False
    solo_s: float = 0.0  # after the pairs, each build alone this long, for its own joules per GEMM (0: none)
    estimator: str = MEDIAN  # MEDIAN or TRIMMED_MEAN (of the logarithms of the pair ratios)

    def __post_init__(self):
        if self.estimator not in (MEDIAN, TRIMMED_MEAN):
            raise ValueError(f"a paired round's estimator is {MEDIAN!r} or {TRIMMED_MEAN!r}, not {self.estimator!r}")

    @property
    def method(self) -> str:
        """What a ratio measured so is, in words: say it beside every figure."""
        return "paired in one process, L2 " + ("flushed before each launch" if self.flush_l2 else "warm")


@dataclass
class BuildTiming:
    """One build's recorded blocks."""

    seconds_per_launch: list[float] = field(default_factory=list)  # of each block
    sm_clock_mhz: list[float] = field(default_factory=list)  # NVML's reading during each block
    launches: int = 0  # in its counted blocks
    energy_j: float = math.nan  # over its window alone (PairedSettings.solo_s), when it had one
    solo_launches: int = 0

    @property
    def median_s(self) -> float:
        return median(self.seconds_per_launch)

    @property
    def median_sm_clock_mhz(self) -> float:
        return median(self.sm_clock_mhz) if self.sm_clock_mhz else math.nan

    @property
    def joules_per_launch(self) -> float:
        return self.energy_j / self.solo_launches if self.solo_launches else math.nan


@dataclass
class PairedTiming:
    """What a paired run measured: each build's blocks, and each later build's pair ratios over the first."""

    builds: list[BuildTiming]
    launches_per_block: int
    pair_ratios: list[list[float]]  # [j - 1]: build j over build 0, one ratio a pair
    warmup_s: float
    elapsed_s: float
    method: str
    joules_per_launch: float = math.nan  # the counted window's energy over its launches, every build together
    estimator: str = MEDIAN
    idle_s: float = 0.0  # the GPU's idle time between the counted blocks, read from their events
    counted_s: float = 0.0  # how long the counted blocks took, from the first one's start to the last one's end
    gaps: int = 0  # gaps between counted blocks longer than IDLE_GAP_S, and the longest of all
    longest_gap_s: float = 0.0

    @property
    def idle_share(self) -> float:
        """The share of the counted window the GPU spent waiting between blocks."""
        return self.idle_s / self.counted_s if self.counted_s > 0 else 0.0

    @property
    def pairs(self) -> int:
        return len(self.pair_ratios[0]) if self.pair_ratios else 0

    def ratio(self, build: int = 1) -> float:
        return estimate(self.pair_ratios[build - 1], self.estimator)

    def interval(self, build: int = 1) -> tuple[float, float]:
        return estimate_interval(self.pair_ratios[build - 1], self.estimator)


def estimate(ratios: Sequence[float], estimator: str = MEDIAN) -> float:
    """The ratio the pairs' ratios say, by `estimator`."""
    if estimator == MEDIAN:
        return median(ratios)
    kept = _trimmed(sorted(math.log(r) for r in ratios))
    return math.exp(sum(kept) / len(kept))


def estimate_interval(ratios: Sequence[float], estimator: str = MEDIAN,
                      confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The estimate's interval: the median's from order statistics, or the trimmed mean's from the winsorized
    spread (Tukey and McLaughlin). Fewer than six pairs give none: (-inf, inf)."""
    if estimator == MEDIAN:
        return median_interval(ratios, confidence)
    n = len(ratios)
    if n < MIN_PAIRS_FOR_INTERVAL:
        return -math.inf, math.inf
    from scipy import special

    logs = sorted(math.log(r) for r in ratios)
    cut = math.floor(TRIM * n)
    kept = logs[cut:n - cut]
    centre = sum(kept) / len(kept)
    winsorized = [logs[cut]] * cut + kept + [logs[n - cut - 1]] * cut
    mean = sum(winsorized) / n
    spread = math.sqrt(sum((x - mean) ** 2 for x in winsorized) / (n - 1))
    half = float(special.stdtrit(len(kept) - 1, 0.5 + confidence / 2)) * spread / ((1 - 2 * TRIM) * math.sqrt(n))
    return math.exp(centre - half), math.exp(centre + half)


def _trimmed(ordered: list[float]) -> list[float]:
    cut = math.floor(TRIM * len(ordered))
    return ordered[cut:len(ordered) - cut]


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics x(k) and x(n + 1 - k) for the largest k with
    P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. Fewer than six values cannot give 95%: (-inf, inf)."""
    ordered = sorted(values)
    n = len(ordered)
    k = _order_statistic(n, confidence)
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]


@functools.lru_cache(maxsize=None)
def _order_statistic(n: int, confidence: float) -> int:
    """The k of median_interval for n values, worked out once: the stopping check asks after every pair."""
    from scipy import special

    tail = (1 - confidence) / 2
    k = 0
    while k + 1 <= n // 2 and special.bdtr(k, n, 0.5) <= tail:
        k += 1
    return k


class Blocks(Protocol):
    """How blocks of launches are queued and timed: on a CUDA stream (StreamBlocks), or stood in for by a test."""

    def queue(self, launch: Launch, count: int, flush_l2: bool) -> object: ...
    def release(self, block: object) -> None: ...
    def started(self, block: object) -> bool: ...
    def seconds_per_launch(self, block: object) -> float: ...
    def gap_s(self, earlier: object, later: object) -> float: ...  # from one block's end to the next one's start
    def span_s(self, first: object, last: object) -> float: ...  # from one block's start to a later one's end
    def finish(self) -> None: ...


class Readings(Protocol):
    """The card's state, read while a block runs (NVML), or stood in for by a test."""

    def sm_clock_mhz(self) -> float: ...
    def energy_mj(self) -> float: ...


_HOLD_SOURCE = r"""
extern "C" __global__ void hold_until(const volatile unsigned int* flag, unsigned int value,
                                      unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (*flag < value && now - start < timeout_ns);
}
"""


@dataclass
class _Block:
    count: int  # launches
    hold: int  # the flag value that releases it
    start: object
    end: object
    launch_events: list = field(default_factory=list)  # (start, end) of each launch, with the L2 flushed


class StreamBlocks:
    """Blocks on one CUDA stream, each held by a spinning one-thread kernel until `release`."""

    def __init__(self, stream):
        import cupy

        self.stream = stream
        self._hold = cupy.RawKernel(_HOLD_SOURCE, "hold_until")
        runtime = cupy.cuda.runtime
        self._flag_host = runtime.hostAlloc(4, runtime.hostAllocMapped)
        self._flag = ctypes.c_uint32.from_address(self._flag_host)
        self._flag.value = 0
        self._flag_device = _device_address(self._flag_host)
        self._queued = 0
        self._flush_buffer = None

    def _flush(self) -> None:
        # A memset of twice the L2, as NVBench flushes: no kernel of CuPy's, whose fill loaded a module of its own
        # for new values in the middle of the timed blocks (half a second each, the GPU idle meanwhile, on an H100).
        # Not settled: on an H100 a tile-order change that CuPy's fill showed was nearly hidden after this memset and
        # after a byte-store kernel alike (lab/2026-11-28-tile-order-flush).
        import cupy

        if self._flush_buffer is None:
            self._flush_buffer = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
        cupy.cuda.runtime.memsetAsync(self._flush_buffer.data.ptr, self._queued % 251, self._flush_buffer.nbytes,
                                      self.stream.ptr)

    def queue(self, launch: Launch, count: int, flush_l2: bool) -> _Block:
        import cupy
        import numpy as np

        self._queued += 1
        block = _Block(count, self._queued, cupy.cuda.Event(), cupy.cuda.Event())
        with self.stream:
            self._hold((1,), (1,), (np.uint64(self._flag_device), np.uint32(block.hold), np.uint64(HOLD_TIMEOUT_NS)))
            block.start.record(self.stream)
            for _ in range(count):
                if not flush_l2:
                    launch()
                    continue
                self._flush()
                events = (cupy.cuda.Event(), cupy.cuda.Event())
                events[0].record(self.stream)
                launch()
                events[1].record(self.stream)
                block.launch_events.append(events)
            block.end.record(self.stream)
        return block

    def release(self, block: _Block) -> None:
        self._flag.value = max(self._flag.value, block.hold)

    def started(self, block: _Block) -> bool:
        return block.start.done

    def seconds_per_launch(self, block: _Block) -> float:
        import cupy

        if block.launch_events:
            total_ms = sum(cupy.cuda.get_elapsed_time(start, end) for start, end in block.launch_events)
        else:
            total_ms = cupy.cuda.get_elapsed_time(block.start, block.end)
        return total_ms / 1e3 / block.count

    def gap_s(self, earlier: _Block, later: _Block) -> float:
        import cupy

        return cupy.cuda.get_elapsed_time(earlier.end, later.start) / 1e3

    def span_s(self, first: _Block, last: _Block) -> float:
        import cupy

        return cupy.cuda.get_elapsed_time(first.start, last.end) / 1e3

    def finish(self) -> None:
        import cupy

        self._flag.value = self._queued  # nothing stays held
        self.stream.synchronize()
        cupy.cuda.runtime.freeHost(self._flag_host)


def _device_address(host_address: int) -> int:
    """Where the GPU sees mapped host memory (the same address wherever unified addressing holds, as on sm_70+)."""
    from cuda.bindings import driver

    status, address = driver.cuMemHostGetDevicePointer(host_address, 0)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"mapped host memory has no device address: {status}")
    return int(address)


def measure_launch_seconds(launch: Launch, launches: int = 3) -> float:
    """One launch's time, from `launches` back to back after one that may load the module: what sizes the blocks."""
    import cupy

    launch()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(launches):
        launch()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / launches


def launches_per_block(seconds_per_launch: float, block_s: float) -> int:
    if not seconds_per_launch > 0:
        return MAX_BLOCK_LAUNCHES
    return max(1, min(MAX_BLOCK_LAUNCHES, round(block_s / seconds_per_launch)))


def builds_order(builds: int, index: int) -> int:
    """Which build the index-th block of a run times: pairs of two cycles of every build once, the second cycle the
    first reversed (A B B A), and every other pair the other way round (B A A B), so that no build always holds the
    outer places of its pairs: whatever a place does to a block (the first after a pause, the one after a flush of
    the other build's data) falls on each build alike."""
    pair, rest = divmod(index, 2 * builds)
    cycle, position = divmod(rest, builds)
    forward = (cycle == 0) == (pair % 2 == 0)
    return position if forward else builds - 1 - position


def pair_ratios(first: list[float], other: list[float]) -> list[float]:
    """Build j over build 0, a ratio a pair of cycles: the geometric mean of its two cycles' ratios."""
    return [math.sqrt(other[2 * p] / first[2 * p] * other[2 * p + 1] / first[2 * p + 1])
            for p in range(min(len(first), len(other)) // 2)]


def _tight(ratios: list[list[float]], half_width: float, estimator: str = MEDIAN) -> bool:
    for values in ratios:
        low, high = estimate_interval(values, estimator)
        if (high - low) / 2 > half_width * estimate(values, estimator):
            return False
    return True


class _Run:
    """Blocks queued AHEAD ahead: `advance` queues the next block held, waits until the block AHEAD before it runs,
    reads the card, and releases the one just queued; every block before the running one has finished. Each block's
    time is read from its events once."""

    def __init__(self, launches: Sequence[Launch], blocks: Blocks, readings: Readings | None, count: int,
                 flush_l2: bool):
        self.launches = launches
        self.blocks = blocks
        self.readings = readings
        self.count = count  # launches a block
        self.flush_l2 = flush_l2
        self.queued: list[tuple[int, object]] = []  # (build, block)
        self.starts: dict[int, tuple[float, float]] = {}  # index -> (SM clock, energy mJ) read as it started
        # The blocks whose start needs the board's energy, the ends of the windows it is charged over: NVML takes
        # milliseconds to read it (4-6 ms on an H100), longer than a short block, so it is not read at every block.
        self.energy_at: set[int] = set()
        self._seconds: dict[int, float] = {}

    def _queue(self, build: int) -> None:
        self.queued.append((build, self.blocks.queue(self.launches[build], self.count, self.flush_l2)))

    def begin(self, builds: list[int]) -> None:
        """Queue and release the first blocks, one of each of `builds`."""
        for build in builds:
            self._queue(build)
            self.blocks.release(self.queued[-1][1])

    def advance(self, build: int) -> int:
        """Queue a block of `build`; return the index of the block now running."""
        self._queue(build)
        running = len(self.queued) - 1 - AHEAD
        while not self.blocks.started(self.queued[running][1]):
            time.sleep(0)
        if self.readings:
            self.starts[running] = (self.readings.sm_clock_mhz(),
                                    self.readings.energy_mj() if running in self.energy_at else math.nan)
        self.blocks.release(self.queued[-1][1])
        return running

    def read_energy(self, index: int) -> None:
        """The board's energy, read now, as at the start of block `index`, which is running: for a window whose end
        was not known before that block ran."""
        if self.readings and index in self.starts:
            self.starts[index] = (self.starts[index][0], self.readings.energy_mj())

    def seconds(self, index: int) -> float:
        if index not in self._seconds:
            self._seconds[index] = self.blocks.seconds_per_launch(self.queued[index][1])
        return self._seconds[index]

    def idle_s(self, first: int, end: int) -> tuple[float, float, int, float]:
        """The GPU's idle time between blocks first..end-1, the time from the first one's start to the last one's
        end, and how many of the gaps were longer than IDLE_GAP_S and the longest: whether the idle time is many
        short waits or a few stalls says where the host lost it."""
        blocks = [block for _, block in self.queued[first:end]]
        if len(blocks) < 2:
            return 0.0, 0.0, 0, 0.0
        gaps = [self.blocks.gap_s(a, b) for a, b in zip(blocks, blocks[1:])]
        return (sum(gaps), self.blocks.span_s(blocks[0], blocks[-1]), sum(gap > IDLE_GAP_S for gap in gaps),
                max(gaps))

    def energy_j(self, first: int, end: int) -> float:
        """The board's energy from block `first`'s start to block `end`'s."""
        if first not in self.starts or end not in self.starts:
            return math.nan
        return (self.starts[end][1] - self.starts[first][1]) / 1e3


class _PairRatios:
    """Each later build's pair ratios over the first build, kept up to date as blocks finish: the stopping check
    reads each block once, and its cost does not grow with the pairs beyond a sort."""

    def __init__(self, run: _Run, builds: int, first: int):
        self.run, self.builds, self.recorded = run, builds, first
        self.times: list[list[float]] = [[] for _ in range(builds)]
        self.ratios: list[list[float]] = [[] for _ in range(builds - 1)]

    def record(self, finished_before: int) -> list[list[float]]:
        for index in range(self.recorded, finished_before):
            self.times[builds_order(self.builds, index)].append(self.run.seconds(index))
        self.recorded = max(self.recorded, finished_before)
        first = self.times[0]
        for j, ratios in enumerate(self.ratios, start=1):
            other = self.times[j]
            for p in range(len(ratios), min(len(first), len(other)) // 2):
                ratios.append(math.sqrt(other[2 * p] / first[2 * p] * other[2 * p + 1] / first[2 * p + 1]))
        return self.ratios


def _steady(times: list[float], window: int, tolerance: float) -> bool:
    """The last `window` block times agree with the `window` before them to `tolerance` (medians)."""
    if len(times) < 2 * window:
        return False
    return abs(median(times[-window:]) / median(times[-2 * window:-window]) - 1) <= tolerance


def time_paired(launches: Sequence[Launch], blocks: Blocks, readings: Readings | None = None,
                settings: PairedSettings = PairedSettings(), seconds_per_launch: float = 0.0,
                now: Callable[[], float] = time.monotonic) -> PairedTiming:
    """Time two or more launches of one problem paired, as the module says. `seconds_per_launch`, the slowest
    launch's time, sizes the blocks; `readings` gives the card's clock and energy (None: not recorded)."""
    if len(launches) < 2:
        raise ValueError("paired timing needs two builds or more")
    builds = len(launches)
    count = launches_per_block(seconds_per_launch, settings.block_s)
    run = _Run(launches, blocks, readings, count, settings.flush_l2)
    # The stopping check's first interval loads SciPy (half a second): done now, or the GPU would sit idle that long
    # in the middle of the counted blocks, the host too busy to release the next one.
    estimate_interval([1.0] * MIN_PAIRS_FOR_INTERVAL, settings.estimator)
    started = now()
    run.begin([builds_order(builds, i) for i in range(AHEAD)])
    index = AHEAD  # of the next block to queue
    try:
        # Warm-up: until warmup_s has passed and the first build's blocks stopped drifting, or max_warmup_s; it ends
        # where a pair of pairs (A B B A, B A A B) would begin, so that counting starts with A B B A.
        first_build_times: list[float] = []
        while True:
            running = run.advance(builds_order(builds, index))
            index += 1
            finished = running - 1
            if finished >= 0 and builds_order(builds, finished) == 0:
                first_build_times.append(run.seconds(finished))
            elapsed = now() - started
            if index % (4 * builds) == 0 and elapsed >= settings.warmup_s and (
                    elapsed >= settings.max_warmup_s
                    or _steady(first_build_times, STEADY_WINDOW, STEADY_TOLERANCE)):
                break
        first_counted = index
        run.energy_at.add(first_counted)
        warmed_up = now()
        pairs_so_far = _PairRatios(run, builds, first_counted)
        # Pairs: until every build's interval is tight, or max_s; always after as many B A A B pairs as A B B A.
        while True:
            running = run.advance(builds_order(builds, index))
            index += 1
            counted = running - first_counted
            if counted <= 0 or counted % (4 * builds):
                continue
            pairs = counted // (2 * builds)
            elapsed = now() - warmed_up
            if elapsed >= settings.max_s and (pairs >= MIN_PAIRS_FOR_INTERVAL
                                              or elapsed >= HARD_LIMIT * settings.max_s):
                break
            if pairs >= settings.min_pairs and elapsed >= settings.min_s and _tight(
                    pairs_so_far.record(running), settings.target_half_width, settings.estimator):
                break
        end_counted = running  # the block now running ends the counted window
        run.read_energy(end_counted)
        solo_windows = _solo(run, builds, index, end_counted, first_counted, settings.solo_s) \
            if settings.solo_s > 0 else {}
    finally:
        blocks.finish()
    timings = [BuildTiming() for _ in range(builds)]
    for i in range(first_counted, end_counted):
        timing = timings[builds_order(builds, i)]
        timing.seconds_per_launch.append(run.seconds(i))
        timing.sm_clock_mhz.append(run.starts[i][0] if i in run.starts else math.nan)
        timing.launches += count
    for build, (first, end, launched) in solo_windows.items():
        timings[build].energy_j, timings[build].solo_launches = run.energy_j(first, end), launched
    ratios = [pair_ratios(timings[0].seconds_per_launch, timings[j].seconds_per_launch) for j in range(1, builds)]
    counted_launches = sum(t.launches for t in timings)
    case_joules = run.energy_j(first_counted, end_counted) / counted_launches if counted_launches else math.nan
    idle_s, counted_s, gaps, longest_gap_s = run.idle_s(first_counted, end_counted)
    return PairedTiming(timings, count, ratios, warmed_up - started, now() - started, settings.method, case_joules,
                        settings.estimator, idle_s, counted_s, gaps, longest_gap_s)


def _solo(run: _Run, builds: int, index: int, running: int, first_counted: int,
          solo_s: float) -> dict[int, tuple[int, int, int]]:
    """Each build alone for about solo_s, back to back: (first block, the block after its last, launches) a build.
    Its energy over the window is its own (the counter's few-millisecond updates blur a window of one block)."""
    per_block = {build: [] for build in range(builds)}
    for i in range(first_counted, running):
        per_block[builds_order(builds, i)].append(run.seconds(i) * run.count)
    windows: dict[int, tuple[int, int, int]] = {}
    next_index = index
    starts = []
    for build in range(builds):
        blocks_needed = max(1, math.ceil(solo_s / median(per_block[build])))
        starts.append((build, next_index, blocks_needed))
        run.energy_at.add(next_index)
        for _ in range(blocks_needed):
            run.advance(build)
            next_index += 1
    sentinel = next_index  # a last block, whose start ends the last window ...
    run.energy_at.add(sentinel)
    for _ in range(AHEAD + 1):
        run.advance(0)  # ... and is seen running
    for position, (build, first, needed) in enumerate(starts):
        end = starts[position + 1][1] if position + 1 < len(starts) else sentinel
        windows[build] = (first, end, needed * run.count)
    return windows
