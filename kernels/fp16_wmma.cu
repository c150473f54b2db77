// Naive WMMA: the first tensor-core kernel. A block is one warp and computes one TILE_M x TILE_N tile of C with the
// nvcuda::wmma API (FP16 inputs, FP32 accumulator), loading its A and B fragments straight from global memory with
// no shared-memory staging, K stepped by TILE_K.
//   <16, 16, 16>  m16n16k16 fragments, 32 threads, 16x16 block tile (seed 001 "Naive WMMA")
// Shapes: M, N, K multiples of 16 (of TILE_M, TILE_N, TILE_K); there is no edge handling. load_matrix_sync and
// store_matrix_sync need each fragment 256-bit aligned and its stride a multiple of 16 bytes: A, B, C themselves
// 32-byte aligned, lda and ldb multiples of 8, ldc of 4 (the dense strides K, N, N are multiples of 16).
// The epilogue works on fragments element-wise: two accumulator fragments of the same type hold the same C elements
// in the same slots, so C can be loaded into one and combined with the product without knowing the layout.
// Ladder: the first FP16 step (after fp32/warptile in seed 001); fp16/mma_naive does the same with PTX.
#include <cuda_fp16.h>
#include <mma.h>

#include "common.cuh"

constexpr int kWarpThreads = 32;

template <int TILE_M, int TILE_N, int TILE_K>
__device__ constexpr LaunchGeometry gemm_wmma_geometry = {{kWarpThreads, 1}, {TILE_M, TILE_N}, {1, 1, 1}};

template <int TILE_M, int TILE_N, int TILE_K>
__global__ void __launch_bounds__(kWarpThreads)
gemm_wmma(int M, int N, int K, float alpha, const __half* __restrict__ A, int lda, const __half* __restrict__ B,
          int ldb, float beta, float* __restrict__ C, int ldc) {
    using namespace nvcuda;
    // The FP16 fragment shapes whose fragments stay 256-bit aligned when every dimension is a multiple of 16.
    static_assert(TILE_K == 16 && ((TILE_M == 16 && TILE_N == 16) || (TILE_M == 8 && TILE_N == 32)),
                  "unsupported WMMA fragment shape");

    constexpr LaunchGeometry kStated = gemm_wmma_geometry<TILE_M, TILE_N, TILE_K>;
    static_assert(is_pair(kStated.block_threads, kWarpThreads, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, TILE_M, TILE_N), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    const int tile_row = blockIdx.y * TILE_M;
    const int tile_col = blockIdx.x * TILE_N;

    wmma::fragment<wmma::matrix_a, TILE_M, TILE_N, TILE_K, __half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, TILE_M, TILE_N, TILE_K, __half, wmma::row_major> b_frag;
    wmma::fragment<wmma::accumulator, TILE_M, TILE_N, TILE_K, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        wmma::load_matrix_sync(a_frag, A + tile_row * lda + k0, lda);
        wmma::load_matrix_sync(b_frag, B + k0 * ldb + tile_col, ldb);
        wmma::mma_sync(acc, a_frag, b_frag, acc);
    }

    float* c_tile = C + tile_row * ldc + tile_col;
    if (beta != 0.0f) {
        wmma::fragment<wmma::accumulator, TILE_M, TILE_N, TILE_K, float> c_frag;
        wmma::load_matrix_sync(c_frag, c_tile, ldc, wmma::mem_row_major);
#pragma unroll
        for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i] + beta * c_frag.x[i];
    } else {
        // C is not read at all: with beta == 0 it may hold NaN, and 0 * NaN would leak into the result.
#pragma unroll
        for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i];
    }
    wmma::store_matrix_sync(c_tile, acc, ldc, wmma::mem_row_major);
}
