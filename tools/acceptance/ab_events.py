"""A second opinion on a paired ratio: one kernel built from two source trees, timed with nothing but CuPy events.

Independent of the paired timer it checks (sgemm.measuring.paired): no blocking kernel, no block sizing, no pair
ratios, no adaptive stop. It measures what that timer's ratios stand for, the time of a launch in a stream of
launches of one build on one set of arrays:
- Both builds run on the very same arrays, as the paired timer's do. With arrays of their own, each launch found
  L2 holding the other build's inputs: a slowed Hopper kernel then read 0.3 points below the gate's warm ratio at
  8192 on an H100.
- A timed run is --run launches of one build back to back between two events, the builds' runs alternating
  A B B A ... Timing each launch alone, the builds alternating every launch, is another workload: the same slowed
  kernel read 1.0009 so at 4096, where the gate read 1.0074.
Each build is checked against FP64, then after WARMUP_S of alternating runs, runs are timed for --seconds; the ratio
is the median of the second tree's runs (per launch) over the first's. Its 95% interval comes from WINDOWS equal
stretches of the timed runs, each giving the same ratio of medians: a t-interval on their logarithms, around the
ratio of the whole. With --flush-l2, a buffer twice the L2 is written before every launch, outside the events (by
cudaMemsetAsync, as the paired timer and NVBench write theirs, or with --flush-with fill by CuPy's fill kernel), and
each launch is a run of its own. The memset is quick, so the launches still follow each other closely and a kernel
that reaches the power cap runs at the capped clock, as in the paired timer's rounds; `fill` is slow enough to leave
each launch of a short GEMM off the cap (lab/2026-11-28-tile-order-flush). --idle-us
adds that long a wait after each flush (one thread spinning on the GPU's timer, the card otherwise idle): a flush as
slow as `fill` without its traffic, to tell a kernel's lower duty cycle (further from the power cap) from what the
flush leaves in L2. The SM clock and board power are read about every 0.1 s while the runs are timed.

Usage, from the repository root (on a GPU box):
    python -m tools.acceptance.ab_events TREE_A TREE_B KERNEL SIZE [--seconds 6] [--run 10] [--flush-l2]
                                             [--flush-with memset|fill] [--idle-us 0]
(a tree is a folder holding kernels/ and sgemm/catalogue.toml, e.g. from `git archive`). Prints one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from statistics import median, stdev

from sgemm.commands.args import finite, integer_at_least
from sgemm.rounds.evidence import Effect
from tools.parser import ToolParser

WARMUP_S = 1.0
QUEUED = 10
WINDOWS = 6
MAX_IDLE_US = 1e6  # a wait past a second is no stand-in for a flush: the card would idle more than it works


def main() -> int:
    parser = ToolParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree_a", type=Path)
    parser.add_argument("tree_b", type=Path)
    parser.add_argument("kernel")
    parser.add_argument("size", type=int)
    parser.add_argument("--seconds", type=finite, default=6.0, help="how long runs are timed, after the warm-up")
    parser.add_argument("--run", type=integer_at_least(1, "--run"), default=10, help="launches a timed run")
    parser.add_argument("--flush-l2", action="store_true")
    parser.add_argument("--flush-with", choices=("memset", "fill"), default="memset",
                        help="how the buffer is written: cudaMemsetAsync, as the paired timer and NVBench write theirs "
                             "(default), or CuPy's fill kernel, slow enough to leave each launch off the power cap")
    parser.add_argument("--idle-us", type=finite, default=0.0,
                        help="with --flush-l2, the GPU left idle this many microseconds after each flush (default 0)")
    args = parser.parse_args()
    if args.seconds <= 0:
        parser.error(f"--seconds takes a duration above 0, got {args.seconds:g}")
    if not 0 <= args.idle_us <= MAX_IDLE_US or (args.idle_us and not args.flush_l2):
        parser.error(f"--idle-us takes a duration of 0 to {MAX_IDLE_US:g} microseconds, with --flush-l2")

    import cupy

    from sgemm import sourcetree
    from sgemm.measuring.problem import make_problem, rebind
    from sgemm.measuring.telemetry import CardReadings, collect_power_w
    from sgemm.measuring.verify import verify

    kernel_a, kernel_b = (sourcetree.kernels(tree)[args.kernel] for tree in (args.tree_a, args.tree_b))
    first = make_problem(kernel_a, args.size, args.size, args.size)
    problems = [first, rebind(first, kernel_b)]
    errors = [verify(problem) for problem in problems]
    flush = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
    launches = 1 if args.flush_l2 else args.run
    # One thread waits on the GPU's nanosecond timer: the stream holds the next launch back without loading the card.
    idle = cupy.RawKernel(r'''
extern "C" __global__ void idle_for(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}''', "idle_for")
    readings = CardReadings.of(cupy.cuda.Device().id)
    if readings is not None:
        import pynvml  # NVML is loaded: CardReadings found the card through it
    clocks_mhz: list[float] = []
    power_w: list[float] = []

    def write_flush(value: int) -> None:
        if args.flush_with == "fill":
            flush.fill(value)
        else:
            cupy.cuda.runtime.memsetAsync(flush.data.ptr, value, flush.nbytes, cupy.cuda.get_current_stream().ptr)
        if args.idle_us:
            idle((1,), (1,), (cupy.uint64(round(args.idle_us * 1e3)),))

    times: list[list[float]] = [[], []]
    windows: list[list[int]] = [[], []]  # which stretch of the timed runs each run falls in
    started = time.monotonic()
    turn = 0
    last_read = 0.0
    while time.monotonic() - started < WARMUP_S + args.seconds:
        # QUEUED turns are queued before the host waits on any, so that the GPU runs them back to back, as under load.
        pending = []
        for _ in range(QUEUED):
            order = (0, 1) if turn % 2 == 0 else (1, 0)
            turn += 1
            for build in order:
                if args.flush_l2:
                    write_flush(turn % 251)
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                for _ in range(launches):
                    problems[build].launch()
                end.record()
                pending.append((build, start, end))
        if readings is not None and time.monotonic() - last_read >= 0.1 and time.monotonic() - started >= WARMUP_S:
            last_read = time.monotonic()
            try:
                clocks_mhz.append(readings.sm_clock_mhz())
                power_w.append(collect_power_w(readings.handle))
            except pynvml.NVMLError:  # a board that reports no clock or power: its times stand without them
                readings = None
        pending[-1][2].synchronize()
        timed_s = time.monotonic() - started - WARMUP_S
        if timed_s >= 0:
            window = min(WINDOWS - 1, int(timed_s / args.seconds * WINDOWS))
            for build, start, end in pending:
                times[build].append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / launches)
                windows[build].append(window)
    a, b = median(times[0]), median(times[1])
    print(json.dumps({"kernel": args.kernel, "size": args.size, "ratio": b / a, "interval": interval(times, windows),
                      "median_s": [a, b],
                      "runs": [len(t) for t in times], "launches_a_run": launches, "relative_errors": errors,
                      "l2": f"flushed ({args.flush_with})" if args.flush_l2 else "warm", "idle_us": args.idle_us,
                      "sm_clock_mhz_median": median(clocks_mhz) if clocks_mhz else None,
                      "power_w_median": median(power_w) if power_w else None}))
    return 0


def interval(times: list[list[float]], windows: list[list[int]]) -> list[float] | None:
    """95% interval of the ratio from the spread of its value in each window (None with fewer than two windows)."""
    logs = []
    for window in range(WINDOWS):
        a, b = ([t for t, w in zip(times[build], windows[build]) if w == window] for build in (0, 1))
        if a and b:
            logs.append(math.log(median(b) / median(a)))
    if len(logs) < 2:
        return None
    whole = math.log(median(times[1]) / median(times[0]))
    return list(Effect(whole, stdev(logs), (len(logs),), len(logs) - 1).interval(0.95))


if __name__ == "__main__":
    sys.exit(main())
