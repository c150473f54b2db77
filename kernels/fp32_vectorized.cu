// Vectorised SGEMM: the register-cached thread tile with 128-bit (float4) shared-memory traffic and, unless
// kScalarGlobal, float4 global loads and stores.
// FEATURES (bits):
//   kTransposedA   A is stored transposed in shared memory (As[k][m]), so a thread's TM values of A are contiguous
//                  and read as float4; without it they are TM scalar reads of a column.
//   kSplitB        a thread's TN columns are two float4 groups half a block tile apart instead of one contiguous
//                  run: neighbouring threads then read neighbouring float4 of B, halving bank conflicts.
//   kDoubleBuffer  two shared stages: the next K slice is fetched into registers before the FMAs of this one, so
//                  its latency hides behind them, and one barrier per slice suffices.
//   kScalarGlobal  global loads and stores element by element with bounds checks: any M, N, K, no alignment needs.
//   <128, 128, 8, 8, 8, 0>                     float4 global access (seed 004 kernel2)
//   <..., kTransposedA>                        transposed A (seed 000 kernel_6, seed 001 Transposed, seed 004 kernel3)
//   <..., kTransposedA | kSplitB>              reduced B bank conflicts (seed 004 kernel4)
//   <..., kTransposedA | kDoubleBuffer>        double buffer (seed 000 kernel_7)
//   <..., kTransposedA | kSplitB | kDoubleBuffer>                  (seed 004 kernel5; with pitched rows, kernel7)
//   <..., kTransposedA | kSplitB | kDoubleBuffer | kScalarGlobal>  scalar loads, any shape (seed 004 kernel6)
// Shapes: with float4 global access, lda, ldb and ldc multiples of 4 so that every row starts 16-byte aligned: dense
// rows need N % 4 == 0 and K % 4 == 0; rows padded to a multiple of 4 (pitched) take any M, N, K, since lanes
// beyond K read as zero and lanes beyond N only touch C's padding. With kScalarGlobal, any M, N, K.
// Ladder: builds on fp32/register_cache.
#include "common.cuh"

constexpr unsigned kTransposedA = 1, kSplitB = 2, kDoubleBuffer = 4, kScalarGlobal = 8;

// Four consecutive elements of a row, those at index >= limit read as zero. MASKED: element by element (any
// alignment); otherwise one float4 load, and the caller guarantees index + 4 <= limit.
template <bool MASKED>
__device__ __forceinline__ float4 load4(const float* row, int index, int limit) {
    if constexpr (MASKED) {
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = index + j < limit ? row[index + j] : 0.0f;
        return make_float4(v[0], v[1], v[2], v[3]);
    } else {
        return *reinterpret_cast<const float4*>(row + index);
    }
}

template <int BM, int BN, int BK, int TM, int TN, unsigned FEATURES>
__device__ constexpr LaunchGeometry gemm_vectorized_geometry = {{(BM / TM) * (BN / TN), 1}, {BM, BN}, {1, 1, 1}};

template <int BM, int BN, int BK, int TM, int TN, unsigned FEATURES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_vectorized(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    constexpr bool TRANSPOSED_A = FEATURES & kTransposedA;
    constexpr bool SPLIT_B = FEATURES & kSplitB;
    constexpr bool DOUBLE_BUFFER = FEATURES & kDoubleBuffer;
    constexpr bool SCALAR_GLOBAL = FEATURES & kScalarGlobal;
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    static_assert(TM % 4 == 0 && TN % (SPLIT_B ? 8 : 4) == 0 && BK % 4 == 0 && BN % 4 == 0,
                  "every tile edge that is read as float4 must be a multiple of 4");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread must load the same number of float4 of A and B per slice");
    constexpr int A_LOADS = BM * BK / 4 / THREADS;
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    constexpr int STAGES = DOUBLE_BUFFER ? 2 : 1;
    // A thread's columns: GROUPS runs of 4, GROUP_STRIDE apart.
    constexpr int GROUPS = TN / 4;
    constexpr int GROUP_STRIDE = SPLIT_B ? BN / 2 : 4;

    constexpr LaunchGeometry kStated = gemm_vectorized_geometry<BM, BN, BK, TM, TN, FEATURES>;
    static_assert(is_pair(kStated.block_threads, THREADS, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    __shared__ __align__(16) float As[STAGES][TRANSPOSED_A ? BK : BM][TRANSPOSED_A ? BM : BK];
    __shared__ __align__(16) float Bs[STAGES][BK][BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int thread_row = threadIdx.x / (BN / TN) * TM;
    const int thread_col = threadIdx.x % (BN / TN) * (SPLIT_B ? TN / 2 : TN);
    const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float4 a_next[A_LOADS], b_next[B_LOADS];  // one slice in flight between global and shared memory
    // A slice wholly inside K (all but at most the last) loads A as float4 with no lane checks; the last one of a
    // pitched matrix with K % 4 != 0 has a float4 straddling K, whose lanes beyond K must read as zero.
    auto fetch = [&](int k0) {
        const bool whole_slice = k0 + BK <= K;
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), c = i % (BK / 4) * 4;
            const float* row = A + (block_row + r) * lda;
            a_next[l] = (block_row + r < M && k0 + c < K)
                            ? (SCALAR_GLOBAL || !whole_slice ? load4<true>(row, k0 + c, K) : load4<false>(row, k0 + c, K))
                            : zero4;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BN / 4), c = i % (BN / 4) * 4;
            // A float4 straddling N only feeds columns that are never stored: its lanes need no mask unless scalar.
            b_next[l] = (k0 + r < K && block_col + c < N)
                            ? load4<SCALAR_GLOBAL>(B + (k0 + r) * ldb, block_col + c, N) : zero4;
        }
    };
    auto stash = [&](int stage) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), c = i % (BK / 4) * 4;
            if constexpr (TRANSPOSED_A) {
                As[stage][c + 0][r] = a_next[l].x;
                As[stage][c + 1][r] = a_next[l].y;
                As[stage][c + 2][r] = a_next[l].z;
                As[stage][c + 3][r] = a_next[l].w;
            } else {
                *reinterpret_cast<float4*>(&As[stage][r][c]) = a_next[l];
            }
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BN / 4), c = i % (BN / 4) * 4;
            *reinterpret_cast<float4*>(&Bs[stage][r][c]) = b_next[l];
        }
    };

    float acc[TM][TN] = {};
    int stage = 0;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool has_next = k0 + BK < K;
        if (DOUBLE_BUFFER && has_next) fetch(k0 + BK);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];
#pragma unroll
            for (int m = 0; m < TM; m += 4) {
                if constexpr (TRANSPOSED_A) {
                    unpack4(&a_frag[m], *reinterpret_cast<const float4*>(&As[stage][k][thread_row + m]));
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) a_frag[m + j] = As[stage][thread_row + m + j][k];
                }
            }
#pragma unroll
            for (int g = 0; g < GROUPS; ++g)
                unpack4(&b_frag[g * 4],
                        *reinterpret_cast<const float4*>(&Bs[stage][k][thread_col + g * GROUP_STRIDE]));
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += a_frag[m] * b_frag[n];
        }

        if (has_next) {
            if constexpr (DOUBLE_BUFFER) {
                // The other stage was last read before the previous barrier, so it is free to overwrite.
                stage ^= 1;
                stash(stage);
            } else {
                __syncthreads();  // everyone is done reading the only stage
                fetch(k0 + BK);
                stash(0);
            }
            __syncthreads();
        }
    }

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int row = block_row + thread_row + m;
        if (row >= M) break;
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            const int col = block_col + thread_col + g * GROUP_STRIDE;
            const float* a = &acc[m][g * 4];
            if (SCALAR_GLOBAL) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) store_epilogue(&C[row * ldc + col + j], a[j], alpha, beta);
            } else if (col < N) {
                store_epilogue4(&C[row * ldc + col], make_float4(a[0], a[1], a[2], a[3]), alpha, beta);
            }
        }
    }
}
