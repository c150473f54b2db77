// Naive SGEMM: one thread computes one element of C from a row of A and a column of B read straight from
// global memory. Nothing is reused on chip beyond what the L1/L2 caches keep.
// Tile: a BLOCK_X x BLOCK_Y thread block covers BLOCK_Y rows x BLOCK_X columns of C. threadIdx.x walks columns,
// so a warp's loads of B and stores of C are coalesced and its loads of A are one broadcast.
// Shapes: any M, N, K >= 1.
// Ladder: the starting point (seed 000 kernel_1).
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
           float* __restrict__ C) {
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    store_epilogue(&C[row * N + col], acc, alpha, beta);
}
