// Shared-memory SGEMM: the block loads a TILE_M x TILE_K slice of A and a TILE_K x TILE_N slice of B into shared
// memory, then every thread reads its rows and columns from there, so each global element is loaded once per block
// instead of once per thread.
// Tile: (TILE_N / COLS) x (TILE_M / ROWS) threads compute a TILE_M x TILE_N tile of C, stepping K by TILE_K. Each
// thread computes ROWS x COLS elements spaced a thread-block apart (rows ty + i * TILE_M / ROWS, columns
// tx + j * TILE_N / COLS): one shared-memory read of B feeds ROWS FMAs and one of A feeds COLS, while a warp's
// reads stay conflict-free. PAD adds columns to each shared row, which moves a row's start to another bank.
//   <32, 32, 32, 1, 1, 0>   one element per thread (seed 000 kernel_2, seed 001 Tiled, seed 003 block size 32)
//   <16, 16, 16, 1, 1, 0>   (seed 002 gemmSmem, seed 003 block size 16); <8, 8, 8, 1, 1, 0> (seed 003 block size 8)
//   <16, 16, 16, 1, 1, 1>   padded shared rows (seed 002 gemmSmemPad)
//   <16, 32, 16, 1, 2, 0>, <16, 64, 16, 1, 4, 0>   two or four columns per thread (seed 002 gemmSmemUnroll2/4)
//   <32, 32, 32, R, 1, 0>   R = 2, 4, 8, 16, 32 rows per thread: instruction-level parallelism (seed 003 ILP kernels)
// Shapes: any M, N, K >= 1 (edge slices are zero-filled on load, stores are masked).
// Ladder: builds on fp32/naive.
#include "common.cuh"

template <int TILE_M, int TILE_N, int TILE_K, int ROWS, int COLS, int PAD>
__device__ constexpr LaunchGeometry gemm_shared_tile_geometry = {
    {TILE_N / COLS, TILE_M / ROWS}, {TILE_M, TILE_N}, {1, 1, 1}};

template <int TILE_M, int TILE_N, int TILE_K, int ROWS, int COLS, int PAD>
__global__ void __launch_bounds__((TILE_M / ROWS) * (TILE_N / COLS))
gemm_shared_tile(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    static_assert(TILE_M % ROWS == 0 && TILE_N % COLS == 0, "a thread's elements must divide the tile");
    constexpr int THREADS_X = TILE_N / COLS, THREADS_Y = TILE_M / ROWS, THREADS = THREADS_X * THREADS_Y;
    static_assert((TILE_M * TILE_K) % THREADS == 0 && (TILE_K * TILE_N) % THREADS == 0,
                  "every thread must load the same number of A and B elements per slice");
    constexpr LaunchGeometry kStated = gemm_shared_tile_geometry<TILE_M, TILE_N, TILE_K, ROWS, COLS, PAD>;
    static_assert(is_pair(kStated.block_threads, THREADS_X, THREADS_Y),
                  "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, TILE_M, TILE_N), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    __shared__ float As[TILE_M][TILE_K + PAD];
    __shared__ float Bs[TILE_K][TILE_N + PAD];

    const int tid = threadIdx.y * THREADS_X + threadIdx.x;
    const int block_row = blockIdx.y * TILE_M, block_col = blockIdx.x * TILE_N;

    float acc[ROWS][COLS] = {};
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        // Consecutive threads copy consecutive addresses: coalesced reads of both A rows and B rows.
#pragma unroll
        for (int l = 0; l < TILE_M * TILE_K / THREADS; ++l) {
            const int i = tid + l * THREADS, r = i / TILE_K, c = i % TILE_K;
            As[r][c] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * lda + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < TILE_K * TILE_N / THREADS; ++l) {
            const int i = tid + l * THREADS, r = i / TILE_N, c = i % TILE_N;
            Bs[r][c] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * ldb + block_col + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_K; ++k)
#pragma unroll
            for (int i = 0; i < ROWS; ++i)
#pragma unroll
                for (int j = 0; j < COLS; ++j)
                    acc[i][j] += As[threadIdx.y + i * THREADS_Y][k] * Bs[k][threadIdx.x + j * THREADS_X];
        __syncthreads();  // the next slice overwrites what slower threads may still be reading
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int row = block_row + threadIdx.y + i * THREADS_Y;
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
            const int col = block_col + threadIdx.x + j * THREADS_X;
            if (row < M && col < N) store_epilogue(&C[row * ldc + col], acc[i][j], alpha, beta);
        }
    }
}
