// Thread-tiled SGEMM: a block stages a BM x BK slice of A and a BK x BN slice of B in shared memory, and each thread
// accumulates a TM x TN tile of C in registers, so one shared-memory load feeds several FMAs.
// CACHE_FRAGMENTS: per k step, load the thread's TM values of A and TN values of B into registers once and form
// their outer product; without it every FMA names its shared-memory operands and reuse is left to the compiler.
//   <64, 64, 8, 8, 1, true>     1-D thread tile: 512 threads, each a column of 8 (seed 000 kernel_3)
//   <128, 128, 8, 8, 8, false>  2-D thread tile: 256 threads, each 8x8 (kernel_4)
//   <128, 128, 8, 8, 8, true>   2-D thread tile with register caching (kernel_5)
// Shapes: any M, N, K >= 1 (edge slices are zero-filled on load, stores are masked).
// Ladder: builds on fp32/smem_tile.
#include "common.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool CACHE_FRAGMENTS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_thread_tile(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                  "every thread must load the same number of A and B elements per slice");
    constexpr int A_LOADS = BM * BK / THREADS;
    constexpr int B_LOADS = BK * BN / THREADS;

    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int thread_row = threadIdx.x / (BN / TN) * TM;  // this thread's first C row inside the block tile
    const int thread_col = threadIdx.x % (BN / TN) * TN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / BK, c = i % BK;
            As[r][c] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * N + block_col + c] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if constexpr (CACHE_FRAGMENTS) {
                float a_frag[TM], b_frag[TN];
#pragma unroll
                for (int m = 0; m < TM; ++m) a_frag[m] = As[thread_row + m][k];
#pragma unroll
                for (int n = 0; n < TN; ++n) b_frag[n] = Bs[k][thread_col + n];
#pragma unroll
                for (int m = 0; m < TM; ++m)
#pragma unroll
                    for (int n = 0; n < TN; ++n) acc[m][n] += a_frag[m] * b_frag[n];
            } else {
#pragma unroll
                for (int m = 0; m < TM; ++m)
#pragma unroll
                    for (int n = 0; n < TN; ++n) acc[m][n] += As[thread_row + m][k] * Bs[k][thread_col + n];
            }
        }
        __syncthreads();  // the next slice overwrites what slower threads may still be reading
    }

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int row = block_row + thread_row + m;
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const int col = block_col + thread_col + n;
            if (row < M && col < N) store_epilogue(&C[row * N + col], acc[m][n], alpha, beta);
        }
    }
}
