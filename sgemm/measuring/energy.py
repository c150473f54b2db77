"""Joules per GEMM: one kernel run back to back on one stream, launches queued ahead so the GPU never waits, for a
window whose two ends are edges of the board's energy counter (NVML's nvmlDeviceGetTotalEnergyConsumption, in mJ).

The counter moves in steps, tens of milliseconds apart, and one reading costs milliseconds under load; NVML's power
reading is a one-second average that misreads bursts. So energy is charged only between two moments the counter
moved: poll it until it changes, note when (halfway between the start of the reading before, which still saw the
old value, and the end of the one that saw the new), run on for the window, and poll for the next change. The power
is the energy between the two edges over the time between them; a GEMM's joules are that power times the time a
launch takes back to back (CUDA events over the blocks that ran across the window, gaps between blocks included).
A lag of the counter behind the card falls on both ends alike while the load is steady, which the warm-up before the
first edge makes it.

What a reading can be trusted for: its relative error from the ends' timing is at most (the two ends' half spans) /
the window, `EnergyReading.error_bound`. A reading whose implied power exceeds the board's enforced power limit by
more than POWER_TOLERANCE, whose GPU idled between blocks, or whose ends are too uncertain, is flagged with the
reason and not recorded. Where NVML has no counter, or cannot be matched to the CUDA device asked for, there is no
reading and the reason says why. The method, its error and its cost per commit: docs/history.md ("Joules per GEMM").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from .paired import measure_launch_seconds
from .telemetry import (TelemetryUnavailable, collect_energy_mj, collect_power_limit_w, counter_support, gpu_name,
                        nvml_handle)

# The sizes the measuring process charges, as the history names them ("4096,8192"); unset or empty: none.
ENERGY_SIZES_VARIABLE = "SGEMM_ENERGY_SIZES"

# A board's average over a window of a second or more stays at or below its enforced power limit, which its power
# controller holds; NVML's power figures are good to about 5%. More than this above the limit is a misreading.
POWER_TOLERANCE = 0.05
MAX_IDLE_SHARE = 0.01  # of the window the GPU may have waited for the host: beyond it, not back to back
MAX_ERROR_BOUND = 0.02  # a reading whose ends are this uncertain over its window is not one
BLOCK_S = 0.02  # launches between two events: short next to the window, long next to a launch
AHEAD_S = 0.1  # of work kept queued, where the queue allows: many NVML readings' worth, so polling never idles the GPU
# The launches queued at once, at most: a quarter of the driver's queue of pending work (about a thousand entries),
# leaving room for a library that launches more than one kernel a call. A launch beyond the queue waits in the launch
# call until the GPU frees an entry, so a feed that waits for more queued work than fits never returns (a 0.2 ms GEMM
# asked for 0.1 s ahead: 500 launches; lab/2026-11-28-energy-track).
MAX_QUEUED_LAUNCHES = 256
MIN_AHEAD_BLOCKS = 2
MAX_BLOCK_LAUNCHES = MAX_QUEUED_LAUNCHES // (MIN_AHEAD_BLOCKS + 1)  # the running block and those ahead of it fit
POLL_S = 0.002  # the host's pause between top-ups while it waits out the warm-up and the window
COUNTER_PERIOD_S = 0.1  # NVML's energy counter moves about this often: what each end of a window may wait


@dataclass(frozen=True)
class EnergySettings:
    """How long the kernel runs before the first edge (warmup_s), the window between the edges (window_s, at least:
    it ends at the first edge after it), and how long an edge may take to come before the counter is taken to be
    stuck (max_edge_wait_s)."""

    warmup_s: float = 1.0
    window_s: float = 2.0
    max_edge_wait_s: float = 1.0

    def case_seconds(self, update_period_s: float) -> float:
        """A case's longest time on the GPU: warm-up, window, and up to one counter update period waited for at each
        end (the runs of queued work after the last edge add AHEAD_S)."""
        return self.warmup_s + self.window_s + 2 * update_period_s + AHEAD_S


def cost_per_commit_s(cases: int, settings: EnergySettings, update_period_s: float) -> float:
    """The GPU time energy adds to a commit, at most: cases x (warm-up + window + 2 x update period + AHEAD_S)."""
    return cases * settings.case_seconds(update_period_s)


class EnergyUnavailable(RuntimeError):
    """No energy reading can be made here (no counter, a counter that does not move, another card): the message
    says why."""


class BoardEnergy(Protocol):
    """The board's energy counter and its enforced power limit (NVML), or a test's stand-in."""

    power_limit_w: float

    def energy_mj(self) -> float: ...


class LaunchFeed(Protocol):
    """Blocks of back-to-back launches on one stream, each between two events (CudaLaunchFeed), or a test's."""

    def top_up(self) -> None: ...  # queue blocks until AHEAD_S of work waits behind the one running
    def running(self) -> int: ...  # the index of the block the GPU runs now (the first not finished)
    def finish(self) -> None: ...  # wait for every queued block
    def launches(self, first: int, last: int) -> int: ...  # in blocks first..last, both included
    def span_s(self, first: int, last: int) -> float: ...  # from block first's start to block last's end
    def idle_s(self, first: int, last: int) -> float: ...  # the gaps between those blocks


@dataclass(frozen=True)
class CounterEdge:
    """A moment the counter moved: when (the middle of the span it moved in), that span's half, and its new value."""

    time_s: float
    half_span_s: float
    energy_mj: float
    block: int  # the block running as it was seen


@dataclass
class EnergyReading:
    """One window's figures. `flag` is empty for a reading that may be recorded, else why it may not."""

    joules_per_launch: float
    power_w: float  # the energy between the edges over the time between them
    window_s: float  # between the edges
    error_bound: float  # relative, of joules_per_launch and power_w, from the edges' timing
    seconds_per_launch: float  # back to back, gaps included, over the blocks across the window
    launches: float  # the window's length in launches
    idle_share: float  # of the blocks' span the GPU waited between them
    power_limit_w: float
    flag: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _wait_for_edge(board: BoardEnergy, feed: LaunchFeed, max_wait_s: float, now: Callable[[], float]) -> CounterEdge:
    """Poll the counter, keeping the GPU fed, until it moves; the edge lies between the start of the last reading of
    the old value and the end of the first of the new."""
    began = before = now()
    value = board.energy_mj()
    while True:
        feed.top_up()
        start = now()
        reading = board.energy_mj()
        end = now()
        if reading < value:
            raise EnergyUnavailable(f"the energy counter went back from {value:.0f} to {reading:.0f} mJ (the driver "
                                    "was reloaded?)")
        if reading != value:
            return CounterEdge((before + end) / 2, (end - before) / 2, reading, feed.running())
        if end - began > max_wait_s:
            raise EnergyUnavailable(f"the energy counter did not move in {end - began:.1f} s of load")
        before = start


def _run_for(feed: LaunchFeed, seconds: float, since: float, now: Callable[[], float],
             sleep: Callable[[float], None]) -> None:
    while now() - since < seconds:
        feed.top_up()
        sleep(POLL_S)


def flags(reading: EnergyReading) -> list[str]:
    """Why a reading may not be recorded: each check it fails, in words."""
    found = []
    ceiling = reading.power_limit_w * (1 + POWER_TOLERANCE)
    if not reading.power_w <= ceiling:
        found.append(f"implied power {reading.power_w:.0f} W over {reading.window_s:.2f} s is above the board's "
                     f"enforced limit {reading.power_limit_w:.0f} W (+{POWER_TOLERANCE:.0%}): the counter misread "
                     "the window")
    if reading.idle_share > MAX_IDLE_SHARE:
        found.append(f"the GPU waited {reading.idle_share:.1%} of the window between blocks: not back to back")
    if reading.error_bound > MAX_ERROR_BOUND:
        found.append(f"the window's ends are uncertain by {reading.error_bound:.1%} of it")
    return found


def charge_window(board: BoardEnergy, feed: LaunchFeed, settings: EnergySettings = EnergySettings(),
                  now: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> EnergyReading:
    """Run the feed's kernel back to back through a warm-up and a window between two counter edges, as the module
    says; EnergyUnavailable when the counter does not move or goes back."""
    try:
        started = now()
        feed.top_up()
        _run_for(feed, settings.warmup_s, started, now, sleep)
        first = _wait_for_edge(board, feed, settings.max_edge_wait_s, now)
        _run_for(feed, settings.window_s, first.time_s, now, sleep)
        last = _wait_for_edge(board, feed, settings.max_edge_wait_s, now)
    finally:
        feed.finish()
    window_s = last.time_s - first.time_s
    power_w = (last.energy_mj - first.energy_mj) / 1e3 / window_s
    launches = feed.launches(first.block, last.block)
    span_s = feed.span_s(first.block, last.block)
    seconds_per_launch = span_s / launches
    reading = EnergyReading(power_w * seconds_per_launch, power_w, window_s,
                            (first.half_span_s + last.half_span_s) / window_s, seconds_per_launch,
                            window_s / seconds_per_launch, feed.idle_s(first.block, last.block) / span_s,
                            board.power_limit_w)
    reading.flag = "; ".join(flags(reading))
    return reading


class NvmlBoardEnergy:
    """The counter and power limit of the NVML device that is a CUDA device."""

    def __init__(self, handle, power_limit_w: float):
        self.handle = handle
        self.power_limit_w = power_limit_w

    def energy_mj(self) -> float:
        return collect_energy_mj(self.handle)


def board_energy(cuda_device: int = 0, cuda_name: str | None = None) -> NvmlBoardEnergy:
    """The energy counter of a CUDA device, or EnergyUnavailable saying why there is none: no NVML, a card NVML
    cannot match to the device, a card whose name is not `cuda_name` (the one asked for), or no counter."""
    try:
        handle = nvml_handle(cuda_device)
    except TelemetryUnavailable as exc:
        raise EnergyUnavailable(f"no energy counter: {exc}") from exc
    name = gpu_name(handle)
    if cuda_name is not None and name != cuda_name:
        raise EnergyUnavailable(f"NVML's card is {name}, not the {cuda_name} asked for: its counter is not charged")
    if problem := counter_support(handle):
        raise EnergyUnavailable(f"no energy counter on the {name}: {problem}")
    try:
        limit = collect_power_limit_w(handle)
    except TelemetryUnavailable as exc:
        raise EnergyUnavailable(f"the {name}'s power limit cannot be read, so no reading can be checked: {exc}") \
            from exc
    return NvmlBoardEnergy(handle, limit)


@dataclass
class _Block:
    count: int
    start: object
    end: object


class CudaLaunchFeed:
    """A launch queued in blocks of `count` on CuPy's current stream, each between two events, AHEAD_S of work
    ahead of the block running, or as much as MAX_QUEUED_LAUNCHES allows (a short kernel's blocks ahead then last
    less than AHEAD_S; a reading it idles is flagged)."""

    def __init__(self, launch: Callable[[], None], seconds_per_launch: float):
        self.launch = launch
        block_launches = BLOCK_S / seconds_per_launch if seconds_per_launch > 0 else MAX_BLOCK_LAUNCHES
        self.count = max(1, min(MAX_BLOCK_LAUNCHES, round(block_launches)))
        by_time = math.ceil(AHEAD_S / max(self.count * seconds_per_launch, 1e-9))
        self.ahead = max(MIN_AHEAD_BLOCKS, min(by_time, MAX_QUEUED_LAUNCHES // self.count - 1))
        self.blocks: list[_Block] = []
        self._oldest_pending = 0

    def _queue(self) -> None:
        import cupy

        block = _Block(self.count, cupy.cuda.Event(), cupy.cuda.Event())
        block.start.record()
        for _ in range(self.count):
            self.launch()
        block.end.record()
        self.blocks.append(block)

    def running(self) -> int:
        while self._oldest_pending < len(self.blocks) and self.blocks[self._oldest_pending].end.done:
            self._oldest_pending += 1
        return min(self._oldest_pending, len(self.blocks) - 1)

    def top_up(self) -> None:
        while len(self.blocks) - self.running() <= self.ahead:
            self._queue()

    def finish(self) -> None:
        if self.blocks:
            self.blocks[-1].end.synchronize()

    def launches(self, first: int, last: int) -> int:
        return sum(block.count for block in self.blocks[first:last + 1])

    def span_s(self, first: int, last: int) -> float:
        import cupy

        return cupy.cuda.get_elapsed_time(self.blocks[first].start, self.blocks[last].end) / 1e3

    def idle_s(self, first: int, last: int) -> float:
        import cupy

        return sum(cupy.cuda.get_elapsed_time(a.end, b.start)
                   for a, b in zip(self.blocks[first:last], self.blocks[first + 1:last + 1])) / 1e3


CALIBRATION_LAUNCHES = 5


def charge_launch(launch: Callable[[], None], board: BoardEnergy,
                  settings: EnergySettings = EnergySettings()) -> EnergyReading:
    """A launch (of a problem checked against FP64 already) charged over one window on the current device."""
    return charge_window(board, CudaLaunchFeed(launch, measure_launch_seconds(launch, CALIBRATION_LAUNCHES)), settings)


def energy_sizes(text: str | None) -> tuple[int, ...]:
    """The sizes ENERGY_SIZES_VARIABLE names ("4096,8192"); ValueError for text that is not such a list."""
    if not text or not text.strip():
        return ()
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"{ENERGY_SIZES_VARIABLE}={text!r}: not a comma-separated list of sizes") from None
