// Naive SGEMM: each thread computes COLS elements of one row of C from a row of A and columns of B read straight
// from global memory. Nothing is reused on chip beyond what the L1/L2 caches keep.
// Tile: a BLOCK_X x BLOCK_Y thread block covers BLOCK_Y rows x BLOCK_X * COLS columns of C. threadIdx.x walks
// columns, so a warp's loads of B and stores of C are coalesced and its loads of A are one broadcast; a thread's
// COLS columns are BLOCK_X apart so that every one of its loads stays coalesced across the warp.
//   <32, 32, 1>  one element per thread (seed 000 kernel_1, seed 001 Naive, seed 003 global-memory kernel)
//   <16, 16, 1>  the same with 16x16 blocks (seed 002 gemmnative, seed 003 block size 16); <8, 8, 1> (seed 003)
//   <16, 16, 2>, <16, 16, 4>  two or four columns per thread: one load of A feeds COLS FMAs (seed 002 gemmUnroll2/4)
// Shapes: any M, N, K >= 1.
// Ladder: the starting point.
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y, int COLS>
__device__ constexpr LaunchGeometry gemm_naive_geometry = {{BLOCK_X, BLOCK_Y}, {BLOCK_Y, BLOCK_X * COLS}, {1, 1, 1}};

template <int BLOCK_X, int BLOCK_Y, int COLS>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B,
           int ldb, float beta, float* __restrict__ C, int ldc) {
    constexpr LaunchGeometry kStated = gemm_naive_geometry<BLOCK_X, BLOCK_Y, COLS>;
    static_assert(is_pair(kStated.block_threads, BLOCK_X, BLOCK_Y), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BLOCK_Y, BLOCK_X * COLS),
                  "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int first_col = blockIdx.x * BLOCK_X * COLS + threadIdx.x;
    if (row >= M || first_col >= N) return;

    // Columns past N read column N - 1 instead (and are never stored), which keeps the K loop free of branches.
    int cols[COLS];
#pragma unroll
    for (int j = 0; j < COLS; ++j) cols[j] = min(first_col + j * BLOCK_X, N - 1);
    float acc[COLS] = {};
    for (int k = 0; k < K; ++k) {
        const float a = A[row * lda + k];
#pragma unroll
        for (int j = 0; j < COLS; ++j) acc[j] += a * B[k * ldb + cols[j]];
    }
#pragma unroll
    for (int j = 0; j < COLS; ++j) {
        const int col = first_col + j * BLOCK_X;
        if (col < N) store_epilogue(&C[row * ldc + col], acc[j], alpha, beta);
    }
}
