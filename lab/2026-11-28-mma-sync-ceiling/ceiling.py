"""How many FLOP a cycle can an SM get from mma.sync m16n8k16 (FP16 in, FP32 accumulate), by warps an SM, with and
without the ldmatrix loads a 64x64 warp tile needs, against cuBLAS on the same card?

Each kernel is one block an SM (a shared-memory request too large for two), W warps a block, and every warp issues
CHAINS independent mma.sync a step (no dependency between them within a step), 20,000 steps. With LDSM the warp also
issues, per step of 32 mmas, the 8 ldmatrix.x4 a 64x64 warp tile's k16 step needs (4 for A, 4 .trans for B) from
swizzled shared memory, into a second set of fragments that the next step's mmas read: the catalogue step's register
double-buffering; with a barrier, one __syncthreads every two steps, as a slice of BK = 32 has; with copies, a slice
streamed through a ring of shared-memory stages as the catalogue's pipeline does it (at the top of each slice: wait
for it, the barrier, then start the copy of the slice 2 ahead, or 4 with 5 stages; or, after the mmas, start the copy,
wait for the next slice and pass the barrier), 24 KB a slice (a 128x256 block's A and B slices, 6 chunks of 16 bytes a
thread) or 8 KB, from a source held in L2, by cp.async in every thread, or as one cp.async.bulk that one thread issues
and every thread waits for on an mbarrier (TMA's traffic without its tensor map); copies are for 256 threads, so 8
warps alone. The SM clock is NVML's, sampled while the kernel runs; FLOP a cycle an SM is FLOPs / (seconds x clock x
SMs). cuBLAS's per-clock rate: CuPy's matmul of FP16 4096 x 4096 matrices (cuBLAS, FP32 compute) timed back to back,
its clock sampled the same way.

    python ceiling.py [--seconds S]   (results as a table on stdout and as JSON into $OUT/ceiling.json)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import threading
from pathlib import Path

import cupy as cp
import pynvml

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parents[1] / "kernels"

SOURCE = r"""
#include "hopper.cuh"
#include "mma_sync.cuh"


// CHAINS independent 16x8 accumulators a warp; with LOADS, the 8 ldmatrix of a 64x64 warp tile's k16 step each step,
// into the fragment set the next step reads; with BARRIER, a __syncthreads every two steps (a BK = 32 slice). With
// CHUNKS > 0 the block streams slices through a ring of LEAD + 1 stages (3 stages: LEAD 2, as the catalogue's
// pipeline): at the top of each slice it waits for that slice, passes the barrier, and starts the copy of the slice
// LEAD ahead into the stage read the slice before; with COPY_AFTER, it starts that copy after the slice's mmas instead,
// then waits for the next slice and passes the barrier. A slice is CHUNKS chunks of 16 bytes a thread of 256 (6: a
// 128x256 block's A 128x32 and B 32x256 halves, 24 KB), from an L2-resident source of `chunks` chunks (a power of two),
// copied by every thread with cp.async (waited for with cp.async.wait_group) or, with BULK, as one cp.async.bulk that
// thread 0 issues, its landing counted on an mbarrier a stage that every thread waits on: TMA's traffic into shared
// memory with no copy instruction in any other thread.
template <int CHAINS, bool LOADS, bool BARRIER, int CHUNKS, bool BULK, int LEAD, bool COPY_AFTER>
__global__ void mma_ceiling(float* out, int steps, unsigned seed, const int4* source, unsigned chunks) {
    extern __shared__ __align__(16) __half tile[];
    constexpr int kStages = LEAD + 1;
    constexpr unsigned kSliceBytes = CHUNKS * 256 * 16, kStageBytes = 24576;
    const int lane = threadIdx.x % 32;
    unsigned a[2][4], b[2][2];
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < 4; ++i) a[s][i] = (seed * (lane + 7 * i + 1)) & 0x03ff03ffu;  // small positive halves
        for (int i = 0; i < 2; ++i) b[s][i] = (seed * (lane + 5 * i + 3)) & 0x03ff03ffu;
    }
    for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) tile[i] = __float2half(1e-3f * (i % 7));
    const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(tile)) + (threadIdx.x / 32 % 4) * 2048u;
    const unsigned ring = static_cast<unsigned>(__cvta_generic_to_shared(tile)) + 16384u;  // the stages, past the tiles
    __shared__ unsigned long long landed[kStages];
    const int slices = steps / 2;
    const auto start_copy = [&](unsigned slice) {  // slice `slice` into its stage
        const unsigned stage = slice % kStages;
        if constexpr (BULK) {
            if (threadIdx.x != 0) return;
            const int4* from = source + (blockIdx.x * 7919u + slice) % 600u * (kSliceBytes / 16);
            mbarrier_arrive_expect_bytes(&landed[stage], kSliceBytes);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                         ::"r"(ring + stage * kStageBytes), "l"(from), "r"(kSliceBytes),
                         "r"(shared_address(&landed[stage]))
                         : "memory");
        } else {
            const unsigned first = (blockIdx.x * 7919u + slice) * (CHUNKS * 256u) + threadIdx.x;
#pragma unroll
            for (int j = 0; j < CHUNKS; ++j) {
                const unsigned dst = ring + stage * kStageBytes + (threadIdx.x + j * 256u) * 16u;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                             "l"(source + ((first + j * 256u) & (chunks - 1))) : "memory");
            }
            asm volatile("cp.async.commit_group;\n" ::: "memory");
        }
    };
    const auto wait_for = [&](int slice) {  // every thread, until the slice has landed
        if constexpr (BULK) {
            mbarrier_wait(&landed[slice % kStages], slice / kStages % 2);
        } else {  // the groups after the slice's are the LEAD - 1 started since (cp.async: one a slice, always)
            asm volatile("cp.async.wait_group %0;\n" ::"n"(LEAD - 1) : "memory");
        }
    };
    if constexpr (CHUNKS > 0) {
        if (BULK && threadIdx.x == 0) {
            for (int stage = 0; stage < kStages; ++stage) mbarrier_init(&landed[stage], 1);
            fence_barrier_init();
        }
        __syncthreads();
        for (int slice = 0; slice < LEAD; ++slice) start_copy(slice);
        if (COPY_AFTER) wait_for(0);
    }
    __syncthreads();
    float acc[CHAINS][4] = {};
    for (int step = 0; step < steps; step += 2) {
        const int slice = step / 2;
        // cp.async starts a group every slice, past the last too, so that the wait's count holds.
        const bool start_ahead = CHUNKS > 0 && (!BULK || slice + LEAD < slices);
        if constexpr (CHUNKS > 0 && !COPY_AFTER) wait_for(slice);
        if constexpr (BARRIER && !COPY_AFTER) __syncthreads();  // one a slice of BK = 32, as the catalogue's steps
        if (!COPY_AFTER && start_ahead) start_copy(slice + LEAD);
#pragma unroll
        for (int use = 0; use < 2; ++use) {  // unrolled, so that the fragment sets are registers, not memory
            if constexpr (LOADS) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    // Rows of 128 bytes, the 16-byte chunk XORed with the row (mod 8): the 8 rows of each matrix
                    // on 8 distinct bank groups, as the catalogue's swizzled tiles.
                    const int row_in_tile = lane % 16 + 16 * use, chunk = ((lane / 16) + 2 * i) ^ (row_in_tile % 8);
                    const unsigned row = base + (row_in_tile * 64 + chunk * 8) * 2u;
                    unsigned r[4];
                    ldmatrix_x4(r[0], r[1], r[2], r[3], row);
                    a[use ^ 1][i] ^= r[0] ^ r[1] ^ r[2] ^ r[3];
                    ldmatrix_x4_trans(r[0], r[1], r[2], r[3], row + 4096u);
                    b[use ^ 1][i % 2] ^= r[0] ^ r[1] ^ r[2] ^ r[3];
                }
            }
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) mma_m16n8k16(acc[c], a[LOADS ? use : 0], b[LOADS ? use : 0]);
        }
        if (COPY_AFTER && start_ahead) start_copy(slice + LEAD);
        if constexpr (CHUNKS > 0 && COPY_AFTER) {
            if (slice + 1 < slices) wait_for(slice + 1);
        }
        if constexpr (BARRIER && COPY_AFTER) __syncthreads();
    }
    if constexpr (CHUNKS > 0 && !BULK) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
"""

FLOP_PER_MMA = 2 * 16 * 8 * 16


class ClockSampler:
    """NVML's SM clock, sampled every 20 ms between start() and stop()."""

    def __init__(self, handle):
        self.handle, self.samples, self._stop = handle, [], threading.Event()

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.02):
            self.samples.append(pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_SM))

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()

    @property
    def median(self) -> float:
        return statistics.median(self.samples[len(self.samples) // 4:] or self.samples)


def label(chains: int, loads: bool, barrier: bool, chunks: int, bulk: bool, lead: int, after: bool) -> str:
    copies = (f" + {'bulk' if bulk else 'cp.async'} {chunks * 4} KB, {lead + 1} stages, "
              f"{'after' if after else 'before'} the mmas") if chunks else ""
    return f"mma x{chains}" + (" + ldmatrix" if loads else "") + (" + barrier" if barrier else "") + copies


def fits(kernel, warps: int) -> bool:
    """Whether a block of `warps` warps has the registers it needs (one block an SM)."""
    return kernel.num_regs * 32 * warps <= 65536 and warps * 32 <= kernel.max_threads_per_block


def time_launches(launch, seconds: float, handle) -> tuple[float, float, int]:
    """(seconds a launch, median SM MHz, launches): launches back to back for about `seconds`."""
    launch()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch()
    end.record()
    end.synchronize()
    once = cp.cuda.get_elapsed_time(start, end) / 1e3
    count = max(3, int(seconds / max(once, 1e-6)))
    with ClockSampler(handle) as clock:
        start.record()
        for _ in range(count):
            launch()
        end.record()
        end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / 1e3 / count, clock.median, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds a configuration")
    args = parser.parse_args()
    pynvml.nvmlInit()
    device = cp.cuda.Device()
    handle = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]))
    sms = device.attributes["MultiProcessorCount"]
    name = pynvml.nvmlDeviceGetName(handle)
    rows = []
    # (chains, ldmatrix, barrier, chunks a thread a slice, bulk, slices ahead, copy after the mmas)
    variants = [(8, False, False, 0, False, 2, False), (32, False, False, 0, False, 2, False),
                (32, True, False, 0, False, 2, False), (32, True, True, 0, False, 2, False),
                (32, True, True, 6, False, 2, False), (32, True, True, 6, False, 2, True),
                (32, True, True, 2, False, 2, False), (32, True, True, 2, False, 2, True),
                (32, True, True, 6, False, 4, False), (32, True, True, 6, True, 2, False),
                (32, True, True, 6, True, 2, True), (32, True, True, 6, True, 4, False)]
    names = [f"mma_ceiling<{chains}, {str(loads).lower()}, {str(barrier).lower()}, {chunks}, {str(bulk).lower()}, "
             f"{lead}, {str(after).lower()}>" for chains, loads, barrier, chunks, bulk, lead, after in variants]
    module = cp.RawModule(code=SOURCE, options=("-std=c++17", f"-I{KERNELS}", "--use_fast_math"),
                          name_expressions=names)
    shared = 160 * 1024  # more than half an SM's: one block an SM
    out = cp.zeros(sms * 1024, dtype=cp.float32)
    chunks = 1 << 20  # 16 MB of source: L2-resident, as most of the catalogue step's reads are (81% hits)
    source = cp.random.randint(0, 1 << 10, size=chunks * 4, dtype=cp.int32)
    steps = 20000
    for (chains, loads, barrier, copies, bulk, lead, after), expression in zip(variants, names):
        kernel = module.get_function(expression)
        kernel.max_dynamic_shared_size_bytes = shared
        for warps in (8,) if copies else (4, 8, 12, 16):
            if not fits(kernel, warps):
                rows.append({"kernel": label(chains, loads, barrier, copies, bulk, lead, after), "warps_per_sm": warps,
                             "skipped": "registers"})
                continue
            arguments = (out, cp.int32(steps), cp.uint32(12345), source, cp.uint32(chunks))
            launch = functools.partial(kernel, (sms,), (warps * 32,), arguments, shared_mem=shared)
            seconds, mhz, count = time_launches(launch, args.seconds, handle)
            flops = sms * warps * steps * chains * FLOP_PER_MMA
            rows.append({"kernel": label(chains, loads, barrier, copies, bulk, lead, after), "warps_per_sm": warps,
                         "tflops": flops / seconds / 1e12, "sm_mhz": mhz,
                         "flop_per_sm_cycle": flops / seconds / (mhz * 1e6) / sms, "launches": count})
    n = 4096
    a = cp.random.rand(n, n, dtype=cp.float32).astype(cp.float16)
    b = cp.random.rand(n, n, dtype=cp.float32).astype(cp.float16)
    seconds, mhz, count = time_launches(functools.partial(cp.matmul, a, b), args.seconds, handle)
    rows.append({"kernel": "cuBLAS fp16 4096 (CuPy matmul)", "warps_per_sm": None, "tflops": 2 * n**3 / seconds / 1e12,
                 "sm_mhz": mhz, "flop_per_sm_cycle": 2 * n**3 / seconds / (mhz * 1e6) / sms, "launches": count})
    cublas = rows[-1]["flop_per_sm_cycle"]
    print(f"{name}, {sms} SMs; FLOP a cycle an SM, and as a share of cuBLAS's at its own clock")
    print(f"{'kernel':<72} {'warps/SM':>8} {'TFLOP/s':>8} {'SM MHz':>7} {'FLOP/cyc/SM':>11} {'of cuBLAS':>9}")
    for row in rows:
        if "skipped" in row:
            print(f"{row['kernel']:<72} {row['warps_per_sm']:>8} does not fit: {row['kernel']} needs more registers")
            continue
        print(f"{row['kernel']:<72} {row['warps_per_sm'] or '-':>8} {row['tflops']:8.1f} {row['sm_mhz']:7.0f} "
              f"{row['flop_per_sm_cycle']:11.0f} {100 * row['flop_per_sm_cycle'] / cublas:8.1f}%")
    target = Path(os.environ.get("OUT", ".")) / "ceiling.json"
    target.write_text(json.dumps({"gpu": name, "sms": sms, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
