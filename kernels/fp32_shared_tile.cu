// Shared-memory SGEMM: the block loads a TILE x TILE slice of A and of B into shared memory, then every thread
// reads its row and column from there, so each global element is loaded once per block instead of once per thread.
// Tile: TILE x TILE threads (1-D block) compute a TILE x TILE tile of C, stepping K by TILE.
// Shapes: any M, N, K >= 1 (edge slices are zero-filled on load, stores are masked).
// Ladder: builds on fp32/naive (seed 000 kernel_2).
#include "common.cuh"

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_shared_tile(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x % TILE;
    const int ty = threadIdx.x / TILE;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // the next slice overwrites what slower threads may still be reading
    }
    if (row < M && col < N) store_epilogue(&C[row * N + col], acc, alpha, beta);
}
