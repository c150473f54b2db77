// SGEMM with asynchronous copies (cp.async, sm_80+): global memory goes straight into shared memory without passing
// through registers, into a ring of STAGES shared slices, so that STAGES - 1 slices are in flight while one is
// computed and a block needs one barrier per slice and no registers for the slices in flight.
// The block tile BM x BN is cut into warp tiles WM x WN, one per warp. A lane's TM x TN thread tile is interleaved:
// its rows are TM / 4 runs of 4, (WM / TM) * 4 rows apart, and its columns TN / 4 runs of 4, (WN / TN) * 4 apart, so
// that the lanes of a quarter warp (one 128-bit shared load phase) read neighbouring float4 of a row of B (all 32
// banks once) and one or two float4 of A (broadcast): every fragment read is a conflict-free 128-bit load.
// A is stored transposed in shared memory (As[k][m]) so that its fragments are float4 along M; cp.async copies it
// element by element (4-byte copies) to transpose it on the way, B row by row in 16-byte copies. A's rows are padded
// by 4 floats so that the 32 lanes of a copy (8 k by 4 rows for BK = 8) land in 32 distinct banks.
// Shared memory is dynamic (STAGES slices need more than the 48 KB a static array may have at 4 stages of BK = 16).
//   <128, 128, 8, 16, 128, 8, 8, 2>    double_buffer_split_b's tiles (warps of 2 x 16 lanes), cp.async double buffer
//   <128, 128, 8, 16, 128, 8, 8, 4>    four stages: three slices in flight
//   <128, 128, 8, 32, 64, 8, 8, 4>     warps of 4 x 8 lanes (32x64): a warp's fragment reads touch 64 + 256 bytes
//   <128, 128, 16, 32, 64, 8, 8, 4>    the same with BK = 16: half the barriers (for sm_90: 2 blocks of 66 KB an SM)
//   <128, 128, 8, 32, 128, 16, 8, 4>   16x8 thread tiles: 4 warps of 2 x 16 lanes (32x128), 128 threads, each float4
//                                      read of A or B feeding twice the FMAs of an 8x8 tile (one block an SM)
// FEATURES (last parameter, 0 by default: the entries above) adds steps for sm_90 tuning, each one bit:
//   kBlockSwizzle  blocks are handed out in strips of 16 block rows, column by column inside a strip, so the blocks
//                  resident at once share rows of A and columns of B in L2 (row order shares only rows of A)
//   kRowMajorA     A is kept row-major in shared memory and copied in 16-byte cp.async (a quarter of the copies of
//                  4-byte ones); a lane reads a float4 along K per row and uses it for 4 k: K and lda multiples of 4
//   kOneBlockAnSM  __launch_bounds__ asks for one block an SM, not two: for blocks of 512 threads or more
// Shapes: any M; N a multiple of 4 and ldb, ldc multiples of 4 (16-byte copies of B and stores of C stay inside a row
// and aligned); any K (A is copied 4 bytes at a time), with kRowMajorA K and lda multiples of 4. Elements beyond M, N
// or K are copied as zeros (cp.async's source size 0 zero-fills), which add nothing to the sums; rows of C beyond M are
// not stored.
// Ladder: builds on fp32/double_buffer_split_b (transposed A, split B, two stages); fp32/warptile adds warps.
#include "common.cuh"

constexpr unsigned kBlockSwizzle = 1, kRowMajorA = 2, kOneBlockAnSM = 4;
constexpr unsigned kKnownFeatures = kBlockSwizzle | kRowMajorA | kOneBlockAnSM;

// 4 or 16 bytes from global to shared memory, asynchronously; with `valid` false the destination is zero-filled
// and nothing is read (the source must still be a valid address: the caller passes the matrix's base).
template <int BYTES>
__device__ __forceinline__ void copy_async(unsigned shared_address, const float* global, bool valid) {
    static_assert(BYTES == 4 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes; this kernel uses 4 and 16");
    const int source_bytes = valid ? BYTES : 0;
    if constexpr (BYTES == 16) {
        // .cg: caches in L2 only; the slice is read from shared memory, never again from L1.
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address), "l"(global),
                     "r"(source_bytes)
                     : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address), "l"(global),
                     "r"(source_bytes)
                     : "memory");
    }
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// The kernel's constants, shared by its geometry and its body.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, unsigned FEATURES = 0>
struct AsyncTiling {
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    // Transposed A: 4 floats after each row, distinct banks for the copies. Row-major A: 4 floats after each row of
    // BK, so the two rows a warp's float4 read touches (4 apart) fall in different banks.
    static constexpr int kAPad = 4;
    static constexpr int kAStride = (FEATURES & kRowMajorA) ? BK + kAPad : BM + kAPad;
    static constexpr int kAFloats = (FEATURES & kRowMajorA) ? BM * kAStride : BK * kAStride;
    static constexpr int kStageFloats = kAFloats + BK * BN;
    static constexpr int kSharedBytes = STAGES * kStageFloats * 4;
};

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, unsigned FEATURES = 0>
__device__ constexpr LaunchGeometry gemm_async_geometry = {
    {AsyncTiling<BM, BN, BK, WM, WN, STAGES, FEATURES>::kThreads, 1},
    {BM, BN},
    {1, 1, 1},
    AsyncTiling<BM, BN, BK, WM, WN, STAGES, FEATURES>::kSharedBytes};

// Thread tiles of up to 64 accumulators leave room for two blocks of 256 threads an SM (128 registers a thread);
// larger ones, or kOneBlockAnSM, get the whole register file.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, unsigned FEATURES = 0>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, (TM * TN <= 64 && !(FEATURES & kOneBlockAnSM) ? 2 : 1))
gemm_async(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B,
           int ldb, float beta, float* __restrict__ C, int ldc) {
    using Tiling = AsyncTiling<BM, BN, BK, WM, WN, STAGES, FEATURES>;
    static_assert((FEATURES & ~kKnownFeatures) == 0, "unknown feature bits");
    constexpr bool ROW_MAJOR_A = FEATURES & kRowMajorA;
    constexpr int WARP = 32;
    constexpr int THREADS = Tiling::kThreads;
    static_assert(THREADS == (BM / WM) * (BN / WN) * WARP, "__launch_bounds__ must name the block's threads");
    constexpr int LANES_M = WM / TM, LANES_N = WN / TN;  // the lanes of a warp as a grid over its warp tile
    static_assert(BM % WM == 0 && BN % WN == 0, "the warp tiles must cover the block tile");
    static_assert(WM % TM == 0 && WN % TN == 0 && LANES_M * LANES_N == WARP,
                  "the lanes' thread tiles must cover a warp tile exactly");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BN % 4 == 0, "fragments and B copies move float4");
    static_assert(LANES_N >= 4, "a quarter warp must span at least 4 float4 of B for conflict-free reads");
    static_assert(STAGES >= 2, "one slice computed while the next is copied");
    static_assert((BM * BK / (ROW_MAJOR_A ? 4 : 1)) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread must copy the same number of elements (float4 with kRowMajorA) of A and float4 of B");
    static_assert(!ROW_MAJOR_A || BK % 4 == 0, "row-major A is copied and read in float4 along K");
    constexpr int A_COPIES = BM * BK / (ROW_MAJOR_A ? 4 : 1) / THREADS;
    constexpr int B_COPIES = BK * BN / 4 / THREADS;
    constexpr int A_STRIDE = Tiling::kAStride;
    constexpr int ROW_STEP = LANES_M * 4, COL_STEP = LANES_N * 4;  // between a lane's runs of 4 rows, of 4 columns

    constexpr LaunchGeometry kStated = gemm_async_geometry<BM, BN, BK, WM, WN, TM, TN, STAGES, FEATURES>;
    static_assert(is_pair(kStated.block_threads, THREADS, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(kStated.shared_memory == STAGES * ((ROW_MAJOR_A ? BM : BK) * A_STRIDE + BK * BN) * 4,
                  "shared_memory: not the stages this kernel addresses");
    static_assert(is_cluster(kStated, 1, 1, 1) && kStated.stages == 0 && is_box(kStated.tma[0], 0, 0, 0) &&
                      is_box(kStated.tma[1], 0, 0, 0) && is_box(kStated.tma[2], 0, 0, 0),
                  "cluster, stages, tma: this kernel uses none of them (its stages are cp.async's, not TMA's)");

    extern __shared__ __align__(16) float shared[];
    // Stage s: As = shared + s * kStageFloats ([BK][A_STRIDE], or [BM][A_STRIDE] row-major), then Bs ([BK][BN]).
    const unsigned shared_base = static_cast<unsigned>(__cvta_generic_to_shared(shared));

    int tile_m = blockIdx.y, tile_n = blockIdx.x;
    if constexpr ((FEATURES & kBlockSwizzle) != 0) {
        // Blocks start in launch order (x fastest): renumber them so that consecutive ones go down a strip of
        // STRIP block rows before moving right. The ~2 x 132 blocks resident on an H100 then cover a near-square
        // patch of C, whose rows of A and columns of B are read from L2 by 16 blocks each rather than 2 and 64.
        constexpr int STRIP = 16;
        const int linear = blockIdx.y * gridDim.x + blockIdx.x;
        const int first_row = linear / (STRIP * gridDim.x) * STRIP;
        const int rows = min(STRIP, static_cast<int>(gridDim.y) - first_row);  // the last strip may be narrower
        const int within = linear - first_row * gridDim.x;
        tile_m = first_row + within % rows;
        tile_n = within / rows;
    }
    const int block_row = tile_m * BM;
    const int block_col = tile_n * BN;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    // Lanes run along N first, so a quarter warp shares its rows of A and reads neighbouring float4 of B.
    const int thread_row = (warp / (BN / WN)) * WM + (lane / LANES_N) * 4;
    const int thread_col = (warp % (BN / WN)) * WN + (lane % LANES_N) * 4;
    const int k_tiles = (K + BK - 1) / BK;

    // This thread's copies of a slice starting at k0 into stage `stage`; whatever is outside the matrices is zeros.
    auto copy_slice = [&](int stage, int k0) {
        const unsigned a_stage = shared_base + stage * Tiling::kStageFloats * 4;
        const unsigned b_stage = a_stage + Tiling::kAFloats * 4;  // row-major A fills BM rows, not BK
        if constexpr (ROW_MAJOR_A) {
#pragma unroll
            for (int l = 0; l < A_COPIES; ++l) {
                // BK / 4 threads copy a row's slice; K % 4 == 0: a float4 is wholly inside K or wholly outside.
                const int i = threadIdx.x + l * THREADS;
                const int r = i / (BK / 4), c = i % (BK / 4) * 4;
                const bool inside = block_row + r < M && k0 + c < K;
                copy_async<16>(a_stage + (r * A_STRIDE + c) * 4, inside ? &A[(block_row + r) * lda + k0 + c] : A,
                               inside);
            }
        } else {
#pragma unroll
            for (int l = 0; l < A_COPIES; ++l) {
                // Consecutive threads take consecutive k of one row: 32-byte runs of A's rows per 8 threads.
                const int i = threadIdx.x + l * THREADS;
                const int r = i / BK, c = i % BK;
                const bool inside = block_row + r < M && k0 + c < K;
                copy_async<4>(a_stage + (c * A_STRIDE + r) * 4, inside ? &A[(block_row + r) * lda + k0 + c] : A,
                              inside);
            }
        }
#pragma unroll
        for (int l = 0; l < B_COPIES; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BN / 4), c = i % (BN / 4) * 4;
            const bool inside = k0 + r < K && block_col + c < N;  // N % 4 == 0: a float4 is wholly in or out
            copy_async<16>(b_stage + (r * BN + c) * 4, inside ? &B[(k0 + r) * ldb + block_col + c] : B, inside);
        }
    };

    // The first STAGES - 1 slices go out before any is computed. Every thread commits a group per slice, empty
    // past K, so that "all but the newest STAGES - 2 groups are done" always means "the slice to compute is here".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) copy_slice(s, s * BK);
        commit_copies();
    }

    float acc[TM][TN] = {};
    for (int t = 0; t < k_tiles; ++t) {
        wait_copies<STAGES - 2>();  // this thread's copies of slice t have landed
        // Everyone's copies of slice t have landed, and everyone is done computing slice t - 1, whose stage the
        // copy below overwrites.
        __syncthreads();
        const int next = t + STAGES - 1;
        if (next < k_tiles) copy_slice(next % STAGES, next * BK);
        commit_copies();

        const float* As = shared + (t % STAGES) * Tiling::kStageFloats;
        const float* Bs = As + Tiling::kAFloats;
        if constexpr (ROW_MAJOR_A) {
#pragma unroll
            for (int k4 = 0; k4 < BK; k4 += 4) {
                // One float4 read per row of the thread tile serves 4 k: as many reads of A as transposed A needs.
                float4 a_rows[TM];
#pragma unroll
                for (int m = 0; m < TM; ++m)
                    a_rows[m] = *reinterpret_cast<const float4*>(
                        &As[(thread_row + m / 4 * ROW_STEP + m % 4) * A_STRIDE + k4]);
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    float a_frag[TM], b_frag[TN];
#pragma unroll
                    for (int m = 0; m < TM; ++m) {
                        const float4& v = a_rows[m];
                        a_frag[m] = kk == 0 ? v.x : kk == 1 ? v.y : kk == 2 ? v.z : v.w;
                    }
#pragma unroll
                    for (int n = 0; n < TN; n += 4)
                        unpack4(&b_frag[n],
                                *reinterpret_cast<const float4*>(&Bs[(k4 + kk) * BN + thread_col + n / 4 * COL_STEP]));
#pragma unroll
                    for (int m = 0; m < TM; ++m)
#pragma unroll
                        for (int n = 0; n < TN; ++n) acc[m][n] += a_frag[m] * b_frag[n];
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                float a_frag[TM], b_frag[TN];
#pragma unroll
                for (int m = 0; m < TM; m += 4)
                    unpack4(&a_frag[m],
                            *reinterpret_cast<const float4*>(&As[k * A_STRIDE + thread_row + m / 4 * ROW_STEP]));
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                    unpack4(&b_frag[n], *reinterpret_cast<const float4*>(&Bs[k * BN + thread_col + n / 4 * COL_STEP]));
#pragma unroll
                for (int m = 0; m < TM; ++m)
#pragma unroll
                    for (int n = 0; n < TN; ++n) acc[m][n] += a_frag[m] * b_frag[n];
            }
        }
    }
    wait_copies<0>();  // no copy is left in flight when the block exits (all are empty groups by now)

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int row = block_row + thread_row + m / 4 * ROW_STEP + m % 4;
        if (row >= M) continue;  // the next run of 4 rows may be further down still: skip, do not stop
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            const int col = block_col + thread_col + n / 4 * COL_STEP;
            if (col < N)
                store_epilogue4(&C[row * ldc + col], make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]),
                                alpha, beta);
        }
    }
}
