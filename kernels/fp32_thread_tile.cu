// Thread-tiled SGEMM: a block stages a BM x BK slice of A and a BK x BN slice of B in shared memory, and each thread
// accumulates a TM x TN tile of C in registers, so one shared-memory load feeds several FMAs. All threads share the
// staging evenly, consecutive threads copying consecutive addresses.
// FEATURES (bits):
//   kCacheFragments  per k step, load the thread's TM values of A and TN values of B into registers once and form
//                    their outer product; without it every FMA names its shared operands and reuse is the compiler's.
//   kTransposedB     B is stored transposed in shared memory (Bs[n][k]); a seed experiment that costs bank conflicts.
//   kDoubleBuffer    two shared stages: the next slice is read from global memory into registers before this
//                    slice's FMAs and stored to the other stage after them, so one barrier per slice suffices.
//   <64, 64, 8, 8, 1, kCacheFragments>     1-D thread tile, a column of 8 (seed 000 kernel_3, seed 001 1D Coarsened)
//   <128, 128, 8, 8, 8, 0>                 2-D 8x8 thread tile (seed 000 kernel_4)
//   <128, 128, 8, 8, 8, kCacheFragments>   with register caching (seed 000 kernel_5, seed 001 2D Coarsened,
//                                          seed 004 kernel1)
//   <32, 32, 16, 2, 2, kCacheFragments>, <32, 64, 16, 2, 4, ...>, <64, 64, 16, 4, 4, ...>, <64, 64, 32, 4, 4, ...>
//                                          register tiles 2x2, 2x4, 4x4, 4x4 with K tile 32 (seed 002)
//   <64, 64, 32, 4, 4, kCacheFragments | kTransposedB>   (seed 002 _Btrans)
//   <32, 128, 32, 4, 4, kCacheFragments>                 32x8 threads, a 32x128 block tile (seed 002 _Block32x8)
//   <64, 64, 32, 4, 4, kCacheFragments | kDoubleBuffer>  (seed 002 _DB)
// Shapes: any M, N, K >= 1 (edge slices are zero-filled on load, stores are masked).
// Ladder: builds on fp32/smem_tile.
#include "common.cuh"

constexpr unsigned kCacheFragments = 1, kTransposedB = 2, kDoubleBuffer = 4;

template <int BM, int BN, int BK, int TM, int TN, unsigned FEATURES>
__device__ constexpr LaunchGeometry gemm_thread_tile_geometry = {{(BM / TM) * (BN / TN), 1}, {BM, BN}, {1, 1, 1}};

template <int BM, int BN, int BK, int TM, int TN, unsigned FEATURES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_thread_tile(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    constexpr bool CACHE_FRAGMENTS = FEATURES & kCacheFragments;
    constexpr bool TRANSPOSED_B = FEATURES & kTransposedB;
    constexpr bool DOUBLE_BUFFER = FEATURES & kDoubleBuffer;
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                  "every thread must load the same number of A and B elements per slice");
    constexpr int A_LOADS = BM * BK / THREADS;
    constexpr int B_LOADS = BK * BN / THREADS;
    constexpr int STAGES = DOUBLE_BUFFER ? 2 : 1;

    constexpr LaunchGeometry kStated = gemm_thread_tile_geometry<BM, BN, BK, TM, TN, FEATURES>;
    static_assert(is_pair(kStated.block_threads, THREADS, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    __shared__ float As[STAGES][BM][BK];
    __shared__ float Bs[STAGES][TRANSPOSED_B ? BN : BK][TRANSPOSED_B ? BK : BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int thread_row = threadIdx.x / (BN / TN) * TM;  // this thread's first C row inside the block tile
    const int thread_col = threadIdx.x % (BN / TN) * TN;

    // Where element l of this thread's share of a slice comes from, and where it goes.
    auto a_from = [&](int l, int k0) -> float {
        const int i = threadIdx.x + l * THREADS, r = i / BK, c = i % BK;
        return (block_row + r < M && k0 + c < K) ? A[(block_row + r) * lda + k0 + c] : 0.0f;
    };
    auto b_from = [&](int l, int k0) -> float {
        const int i = threadIdx.x + l * THREADS, r = i / BN, c = i % BN;
        return (k0 + r < K && block_col + c < N) ? B[(k0 + r) * ldb + block_col + c] : 0.0f;
    };
    auto a_to = [&](int l, int stage) -> float& {
        const int i = threadIdx.x + l * THREADS;
        return As[stage][i / BK][i % BK];
    };
    auto b_to = [&](int l, int stage) -> float& {
        const int i = threadIdx.x + l * THREADS, r = i / BN, c = i % BN;
        return TRANSPOSED_B ? Bs[stage][c][r] : Bs[stage][r][c];
    };
    // Single stage: straight from global to shared memory. Double buffer: the slice waits in registers meanwhile.
    auto copy_slice = [&](int k0, int stage) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) a_to(l, stage) = a_from(l, k0);
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) b_to(l, stage) = b_from(l, k0);
    };
    float a_next[A_LOADS], b_next[B_LOADS];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) a_next[l] = a_from(l, k0);
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) b_next[l] = b_from(l, k0);
    };
    auto stash = [&](int stage) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) a_to(l, stage) = a_next[l];
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) b_to(l, stage) = b_next[l];
    };
    auto b_at = [&](int stage, int k, int n) -> float { return TRANSPOSED_B ? Bs[stage][n][k] : Bs[stage][k][n]; };

    float acc[TM][TN] = {};
    int stage = 0;
    copy_slice(0, 0);
    __syncthreads();
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool has_next = k0 + BK < K;
        if constexpr (DOUBLE_BUFFER) {
            if (has_next) fetch(k0 + BK);
        }

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if constexpr (CACHE_FRAGMENTS) {
                float a_frag[TM], b_frag[TN];
#pragma unroll
                for (int m = 0; m < TM; ++m) a_frag[m] = As[stage][thread_row + m][k];
#pragma unroll
                for (int n = 0; n < TN; ++n) b_frag[n] = b_at(stage, k, thread_col + n);
#pragma unroll
                for (int m = 0; m < TM; ++m)
#pragma unroll
                    for (int n = 0; n < TN; ++n) acc[m][n] += a_frag[m] * b_frag[n];
            } else {
#pragma unroll
                for (int m = 0; m < TM; ++m)
#pragma unroll
                    for (int n = 0; n < TN; ++n)
                        acc[m][n] += As[stage][thread_row + m][k] * b_at(stage, k, thread_col + n);
            }
        }

        if (has_next) {
            if constexpr (DOUBLE_BUFFER) {
                // The other stage was last read before the previous barrier, so it is free to overwrite.
                stage ^= 1;
                stash(stage);
            } else {
                __syncthreads();  // everyone is done reading the only stage
                copy_slice(k0 + BK, 0);
            }
            __syncthreads();
        }
    }

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int row = block_row + thread_row + m;
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const int col = block_col + thread_col + n;
            if (row < M && col < N) store_epilogue(&C[row * ldc + col], acc[m][n], alpha, beta);
        }
    }
}
