"""Paired timing: several launches of one GEMM (builds of a kernel from two source trees, or a kernel and its
baseline) timed in alternating blocks in one process, so that whatever the card does meanwhile falls on every build
alike. Each block waits behind a blocking kernel; builds alternate A B, B A; a pair's ratio is the geometric mean of
its two cycles, and the result the median of the pairs' ratios with a distribution-free 95% interval; a warm-up runs
until the block times are steady, and the pairs stop once every interval is tight enough or time is up; L2 is warm
unless `flush_l2`; the SM clock is read per block and the board's energy over whole windows.

The method, with what each field of PairedSettings does, is written once in docs/gate.md ("Paired rounds"); the runs
behind it are in lab/ (2026-11-25-power-cap, 2026-11-25-paired-timer).
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

Launch = Callable[[], None]

CONFIDENCE = 0.95
MAX_BLOCK_LAUNCHES = 200  # with the next block queued too, well inside the driver's queue of about a thousand launches
HOLD_TIMEOUT_NS = 10_000_000_000  # a block's blocker gives up after 10 s: a host that died never holds the GPU
# Warm-up ends once the median of the first build's last STEADY_WINDOW blocks is within STEADY_TOLERANCE of the
# STEADY_WINDOW before: a card that starts cold or idle reaches the clock of its load over the first second or so.
STEADY_WINDOW = 3
STEADY_TOLERANCE = 0.003
# A 95% interval of a median from order statistics needs six values; a slow kernel may run past max_s to get them,
# up to HARD_LIMIT times it.
MIN_PAIRS_FOR_INTERVAL = 6
HARD_LIMIT = 4


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

    @property
    def pairs(self) -> int:
        return len(self.pair_ratios[0]) if self.pair_ratios else 0

    def ratio(self, build: int = 1) -> float:
        return median(self.pair_ratios[build - 1])

    def interval(self, build: int = 1) -> tuple[float, float]:
        return median_interval(self.pair_ratios[build - 1])


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics x(k) and x(n + 1 - k) for the largest k with
    P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. Fewer than six values cannot give 95%: (-inf, inf)."""
    from scipy import stats

    ordered = sorted(values)
    n = len(ordered)
    tail = (1 - confidence) / 2
    k = 0
    while k + 1 <= n // 2 and stats.binom.cdf(k, n, 0.5) <= tail:
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]


class Blocks(Protocol):
    """How blocks of launches are queued and timed: on a CUDA stream (StreamBlocks), or stood in for by a test."""

    def queue(self, launch: Launch, count: int, flush_l2: bool) -> object: ...
    def release(self, block: object) -> None: ...
    def started(self, block: object) -> bool: ...
    def seconds_per_launch(self, block: object) -> float: ...
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
        import cupy

        if self._flush_buffer is None:
            self._flush_buffer = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
        self._flush_buffer.fill(self._queued % 251)

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


def launches_per_block(seconds_per_launch: float, block_s: float) -> int:
    if not seconds_per_launch > 0:
        return MAX_BLOCK_LAUNCHES
    return max(1, min(MAX_BLOCK_LAUNCHES, round(block_s / seconds_per_launch)))


def builds_order(builds: int, index: int) -> int:
    """Which build the index-th block of a run times: cycles of every build once, each cycle the last one reversed."""
    cycle, position = divmod(index, builds)
    return position if cycle % 2 == 0 else builds - 1 - position


def pair_ratios(first: list[float], other: list[float]) -> list[float]:
    """Build j over build 0, a ratio a pair of cycles: the geometric mean of its two cycles' ratios."""
    return [math.sqrt(other[2 * p] / first[2 * p] * other[2 * p + 1] / first[2 * p + 1])
            for p in range(min(len(first), len(other)) // 2)]


def _tight(ratios: list[list[float]], half_width: float) -> bool:
    for values in ratios:
        low, high = median_interval(values)
        if (high - low) / 2 > half_width * median(values):
            return False
    return True


class _Run:
    """Blocks queued one ahead: `advance` queues the next block held, waits until the block before it runs, reads
    the card, and releases the one just queued; every block before the running one has finished."""

    def __init__(self, launches: Sequence[Launch], blocks: Blocks, readings: Readings | None, count: int,
                 flush_l2: bool):
        self.launches = launches
        self.blocks = blocks
        self.readings = readings
        self.count = count  # launches a block
        self.flush_l2 = flush_l2
        self.queued: list[tuple[int, object]] = []  # (build, block)
        self.starts: dict[int, tuple[float, float]] = {}  # index -> (SM clock, energy mJ) read as it started

    def _queue(self, build: int) -> None:
        self.queued.append((build, self.blocks.queue(self.launches[build], self.count, self.flush_l2)))

    def begin(self, build: int) -> None:
        self._queue(build)
        self.blocks.release(self.queued[0][1])

    def advance(self, build: int) -> int:
        """Queue a block of `build`; return the index of the block now running."""
        self._queue(build)
        running = len(self.queued) - 2
        while not self.blocks.started(self.queued[running][1]):
            time.sleep(0)
        if self.readings:
            self.starts[running] = (self.readings.sm_clock_mhz(), self.readings.energy_mj())
        self.blocks.release(self.queued[-1][1])
        return running

    def seconds(self, index: int) -> float:
        return self.blocks.seconds_per_launch(self.queued[index][1])

    def energy_j(self, first: int, end: int) -> float:
        """The board's energy from block `first`'s start to block `end`'s."""
        if first not in self.starts or end not in self.starts:
            return math.nan
        return (self.starts[end][1] - self.starts[first][1]) / 1e3


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
    started = now()
    run.begin(0)
    index = 1  # of the next block to queue
    try:
        # Warm-up: until warmup_s has passed and the first build's blocks stopped drifting, or max_warmup_s.
        first_build_times: list[float] = []
        while True:
            running = run.advance(builds_order(builds, index))
            index += 1
            finished = running - 1
            if finished >= 0 and builds_order(builds, finished) == 0:
                first_build_times.append(run.seconds(finished))
            elapsed = now() - started
            if index % (2 * builds) == 0 and elapsed >= settings.warmup_s and (
                    elapsed >= settings.max_warmup_s
                    or _steady(first_build_times, STEADY_WINDOW, STEADY_TOLERANCE)):
                break
        first_counted = index
        warmed_up = now()
        # Pairs: until every build's interval is tight, or max_s.
        while True:
            running = run.advance(builds_order(builds, index))
            index += 1
            counted = running - first_counted
            if counted <= 0 or counted % (2 * builds):
                continue
            pairs = counted // (2 * builds)
            elapsed = now() - warmed_up
            if elapsed >= settings.max_s and (pairs >= MIN_PAIRS_FOR_INTERVAL
                                              or elapsed >= HARD_LIMIT * settings.max_s):
                break
            if pairs >= settings.min_pairs and elapsed >= settings.min_s and _tight(
                    [pair_ratios(*_times(run, first_counted, running, builds, (0, j))) for j in range(1, builds)],
                    settings.target_half_width):
                break
        end_counted = running  # the block now running ends the counted window
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
    return PairedTiming(timings, count, ratios, warmed_up - started, now() - started, settings.method, case_joules)


def _times(run: _Run, first: int, end: int, builds: int, which: tuple[int, int]) -> tuple[list[float], list[float]]:
    per_build: dict[int, list[float]] = {build: [] for build in which}
    for i in range(first, end):
        build = builds_order(builds, i)
        if build in per_build:
            per_build[build].append(run.seconds(i))
    return per_build[which[0]], per_build[which[1]]


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
        for _ in range(blocks_needed):
            run.advance(build)
            next_index += 1
    run.advance(0)  # a last block, whose start ends the last window
    sentinel = next_index
    run.advance(0)  # ... and is seen running
    for position, (build, first, needed) in enumerate(starts):
        end = starts[position + 1][1] if position + 1 < len(starts) else sentinel
        windows[build] = (first, end, needed * run.count)
    return windows
