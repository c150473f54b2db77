"""Where does the paired timer's idle GPU time go? One A/A round of a kernel (the gate's round settings unless
changed by the options), its blocks' events and the host's own clock kept for every block: each gap between two
counted blocks, how late the host released the later block, and Python's garbage collections.

    python lab/2026-11-28-paired-timer-idle/probe.py KERNEL SIZE [--warm] [--ahead N] [--block-s S] [--no-gc]
                                             [--trees TREE_A TREE_B] [--flush-with timer|fill|memset|kernel|read]

--trees times the kernel built from two source trees (an A/B round) instead of one build twice; --flush-with
replaces the timer's own L2 flush (timer) by CuPy's fill, cudaMemsetAsync, a kernel of 16-byte stores (kernel) or
one of 16-byte loads (read).

Prints one line of JSON: the gaps' percentiles, their sum over the counted span, how many gaps followed a block that
was released late (after the block before it had started) and the collections that ran while blocks were queued.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sgemm.catalogue import load_catalogue  # noqa: E402
from sgemm.measuring import paired  # noqa: E402
from sgemm.measuring.ab import Build, _problems  # noqa: E402
from sgemm.measuring.telemetry import CardReadings  # noqa: E402
from sgemm.rounds.session import ROUND_SETTINGS  # noqa: E402


# A flush by a kernel of our own, compiled before the round: 16-byte stores over the whole buffer, grid-stride.
FLUSH_SOURCE = r"""
extern "C" __global__ void write_words(uint4* buffer, unsigned long long words, unsigned int value) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += (unsigned long long)gridDim.x * blockDim.x)
        buffer[i] = make_uint4(value, value ^ 1u, value ^ 2u, value ^ 3u);
}

extern "C" __global__ void read_words(const uint4* buffer, unsigned long long words, unsigned int* sink) {
    unsigned int sum = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const uint4 v = buffer[i];
        sum ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (sum == 0xdeadbeefu) *sink = sum;  // never true for a zeroed buffer; keeps the loads
}
"""


class WatchedBlocks(paired.StreamBlocks):
    """StreamBlocks that note, on the host's clock, when each block was queued, released and seen started."""

    def __init__(self, stream):
        super().__init__(stream)
        self.queued_at, self.released_at, self.seen_at, self.queue_s = {}, {}, {}, {}

    def queue(self, launch, count, flush_l2):
        began = time.perf_counter()
        block = super().queue(launch, count, flush_l2)
        self.queued_at[block.hold] = time.perf_counter()
        self.queue_s[block.hold] = self.queued_at[block.hold] - began
        return block

    def release(self, block):
        super().release(block)
        self.released_at.setdefault(block.hold, time.perf_counter())

    def started(self, block):
        done = super().started(block)
        if done:
            self.seen_at.setdefault(block.hold, time.perf_counter())
        return done


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel")
    parser.add_argument("size", type=int)
    parser.add_argument("--warm", action="store_true", help="L2 warm instead of flushed")
    parser.add_argument("--ahead", type=int, default=paired.AHEAD)
    parser.add_argument("--block-s", type=float, default=ROUND_SETTINGS.block_s)
    parser.add_argument("--no-gc", action="store_true", help="garbage collection off during the round")
    parser.add_argument("--trees", nargs=2, type=Path)
    parser.add_argument("--flush-with", choices=("timer", "fill", "memset", "kernel", "read"), default="timer")
    args = parser.parse_args()
    import cupy

    paired.AHEAD = args.ahead
    settings = replace(ROUND_SETTINGS, flush_l2=not args.warm, block_s=args.block_s)
    if args.trees:
        from sgemm import sourcetree

        kernels = [sourcetree.kernels(tree)[args.kernel] for tree in args.trees]
    else:
        kernels = [load_catalogue()[args.kernel]] * 2
    problems = _problems([Build("base", kernels[0]), Build("head", kernels[1])], args.size, args.size, args.size)
    if args.flush_with == "fill":
        def fill_flush(self):
            if self._flush_buffer is None:
                self._flush_buffer = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
            self._flush_buffer.fill(self._queued % 251)

        paired.StreamBlocks._flush = fill_flush
    if args.flush_with == "memset":
        def memset_flush(self):
            if self._flush_buffer is None:
                self._flush_buffer = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
            cupy.cuda.runtime.memsetAsync(self._flush_buffer.data.ptr, self._queued % 251, self._flush_buffer.nbytes,
                                          self.stream.ptr)

        paired.StreamBlocks._flush = memset_flush
    if args.flush_with == "read":
        reader = cupy.RawKernel(FLUSH_SOURCE, "read_words")

        def read_flush(self):
            if self._flush_buffer is None:
                self._flush_buffer = cupy.zeros(2 * cupy.cuda.Device().attributes["L2CacheSize"] // 16,
                                                dtype=cupy.uint32).reshape(-1, 4)
                self._flush_sink = cupy.zeros(1, dtype=cupy.uint32)
            reader((264,), (512,), (self._flush_buffer, cupy.uint64(self._flush_buffer.shape[0]), self._flush_sink))

        paired.StreamBlocks._flush = read_flush
    if args.flush_with == "kernel":
        writer = cupy.RawKernel(FLUSH_SOURCE, "write_words")

        def kernel_flush(self):
            if self._flush_buffer is None:
                self._flush_buffer = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"] // 16,
                                                dtype=cupy.uint32).reshape(-1, 4)
            words = self._flush_buffer.shape[0]
            writer((264,), (512,), (self._flush_buffer, cupy.uint64(words), cupy.uint32(self._queued)))

        paired.StreamBlocks._flush = kernel_flush
    slowest = max(paired.measure_launch_seconds(problem.launch) for problem in problems)
    collections = []
    started = {}

    def on_gc(phase, info):
        if phase == "start":
            started["t"] = time.perf_counter()
        else:
            collections.append((info["generation"], time.perf_counter() - started["t"]))

    gc.callbacks.append(on_gc)
    if args.no_gc:
        gc.disable()
    blocks = WatchedBlocks(cupy.cuda.Stream(non_blocking=True))
    captured = {}
    original_idle = paired._Run.idle_s

    def idle_s(run, first, end):
        captured["run"], captured["first"], captured["end"] = run, first, end
        return original_idle(run, first, end)

    paired._Run.idle_s = idle_s
    timing = paired.time_paired([p.launch for p in problems], blocks, CardReadings.of(0), settings, slowest)
    gc.enable()
    run, first, end = captured["run"], captured["first"], captured["end"]
    held = [block for _, block in run.queued[first:end]]
    gaps = [cupy.cuda.get_elapsed_time(a.end, b.start) / 1e3 for a, b in zip(held, held[1:])]
    block_s = [cupy.cuda.get_elapsed_time(b.start, b.end) / 1e3 for b in held]
    # A block released late: the host released it after the block before it had been seen started (it then had
    # less than one block's time to spare), or after the block before it ended by the GPU's clock (not comparable
    # directly: noted as release after seen start of the one before).
    late = []
    for a, b in zip(held, held[1:]):
        released, seen_before = blocks.released_at.get(b.hold), blocks.seen_at.get(a.hold)
        late.append(released is not None and seen_before is not None and released > seen_before)
    ordered = sorted(gaps)

    def pct(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan

    span = sum(block_s) + sum(gaps)
    long_gaps = [i for i, g in enumerate(gaps) if g > paired.IDLE_GAP_S]
    print(json.dumps({
        "case": f"{args.kernel}:{args.size}", "trees": [str(tree) for tree in args.trees or ()],
        "l2": "warm" if args.warm else f"flushed ({args.flush_with})", "ahead": paired.AHEAD,
        "block_s_setting": args.block_s, "gc": not args.no_gc, "launches_per_block": timing.launches_per_block,
        "blocks": len(held), "ratio": timing.ratio(), "pairs": timing.pairs,
        "idle_share": sum(gaps) / span if span else math.nan, "timer_idle_share": timing.idle_share,
        "gap_us": {"p10": pct(0.1) * 1e6, "p50": pct(0.5) * 1e6, "p90": pct(0.9) * 1e6, "p99": pct(0.99) * 1e6,
                   "max": (ordered[-1] if ordered else math.nan) * 1e6},
        "block_ms_median": sorted(block_s)[len(block_s) // 2] * 1e3 if block_s else math.nan,
        "base_us": timing.builds[0].median_s * 1e6,
        # what a launch's flush (and its events) add to a block: the block's span less its launches' own time
        "flush_us_a_launch": (sorted(block_s)[len(block_s) // 2] / timing.launches_per_block
                              - timing.builds[0].median_s) * 1e6 if block_s else math.nan,
        "long_gaps": len(long_gaps), "long_gaps_after_late_release": sum(late[i] for i in long_gaps),
        "late_releases": sum(late),
        "long_gap_positions_mod_4builds": sorted({(i + 1) % 8 for i in long_gaps}),
        "first_long_gaps": [[i, round(gaps[i] * 1e6)] for i in long_gaps[:12]],
        "queue_ms_median": sorted(blocks.queue_s.values())[len(blocks.queue_s) // 2] * 1e3,
        "queue_ms_max": max(blocks.queue_s.values()) * 1e3,
        "collections": len(collections), "collection_ms_max": max((d for _, d in collections), default=0) * 1e3,
        "gen2_collections": sum(1 for g, _ in collections if g == 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
