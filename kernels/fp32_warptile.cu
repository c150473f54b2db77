// Warp-tiled SGEMM: the block tile BM x BN is cut into warp tiles WM x WN, one per warp, and a warp walks its tile in
// WM_ITERS x WN_ITERS sub-tiles whose TM x TN thread tiles lie side by side. Per k step a warp's lanes then read
// neighbouring fragments of one shared-memory row: each quarter warp's float4 reads hit distinct banks or broadcast,
// so the inner loop runs free of bank conflicts. WM_ITERS = WM * WN / (32 * TM * TN * WN_ITERS).
// A is stored transposed in shared memory (As[k][m]) so fragments of A and B are float4 reads; global loads and
// stores are float4; each k step forms the outer product of register-cached fragments.
//   <128, 128, 16, 64, 64, 4, 8, 4, 128>   4 warps of 64x64, sub-tiles 64x16, 8x4 per thread (seed 001 Warptiling)
// Shapes: lda, ldb and ldc multiples of 4 so that every row starts 16-byte aligned: dense rows need N % 4 == 0 and
// K % 4 == 0, any M (the catalogue's fp32/warptile). Rows padded to a multiple of 4 would take any N and K (lanes of
// A beyond K are zeroed, lanes of B beyond N only feed columns that are never stored, C is written lane by lane where
// a float4 straddles N), but no catalogue entry pads them yet, so that path is untested on a GPU.
// Ladder: builds on fp32/float4 (transposed A, float4 access); adds the warp level of the tiling.
#include "common.cuh"

// dst[0..LEN) = src[0..LEN) from shared memory: float4 reads when LEN is a multiple of 4 (src is then 16-byte
// aligned), scalar reads otherwise.
template <int LEN>
__device__ __forceinline__ void load_fragment(float* dst, const float* src) {
#pragma unroll
    for (int i = 0; i < LEN; i += 4) {
        if constexpr (LEN % 4 == 0) {
            unpack4(&dst[i], *reinterpret_cast<const float4*>(src + i));
        } else {
#pragma unroll
            for (int j = 0; j < 4 && i + j < LEN; ++j) dst[i + j] = src[i + j];
        }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int WN_ITERS, int TM, int TN, int THREADS>
__device__ constexpr LaunchGeometry gemm_warptile_geometry = {{THREADS, 1}, {BM, BN}, {1, 1, 1}};

template <int BM, int BN, int BK, int WM, int WN, int WN_ITERS, int TM, int TN, int THREADS>
__global__ void __launch_bounds__(THREADS)
gemm_warptile(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
              const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    constexpr int WARP = 32;
    static_assert(THREADS % WARP == 0, "whole warps only");
    static_assert(BM % WM == 0 && BN % WN == 0 && (BM / WM) * (BN / WN) == THREADS / WARP,
                  "the warp tiles must cover the block tile, one per warp");
    static_assert((WM * WN) % (WARP * TM * TN * WN_ITERS) == 0, "a warp's sub-tiles must cover its warp tile");
    constexpr int WM_ITERS = (WM * WN) / (WARP * TM * TN * WN_ITERS);
    static_assert(WM % WM_ITERS == 0 && WN % WN_ITERS == 0, "the sub-tiles must divide the warp tile");
    constexpr int SUB_M = WM / WM_ITERS, SUB_N = WN / WN_ITERS;  // one sub-tile, computed by the 32 lanes at once
    static_assert(SUB_M % TM == 0 && SUB_N % TN == 0 && (SUB_M / TM) * (SUB_N / TN) == WARP,
                  "the lanes' thread tiles must cover a sub-tile exactly");
    static_assert(BK % 4 == 0 && BM % 4 == 0 && BN % 4 == 0, "slices are loaded a float4 at a time");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread must load the same number of float4 of A and B per slice");
    constexpr int A_LOADS = BM * BK / 4 / THREADS;
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    // The transposed store of A puts the four values of a float4 in four rows of As; with rows of exactly BM floats
    // (a multiple of 32) the BK / 4 threads sharing a row of A hit one bank. Four floats of padding halve that
    // conflict for BK = 16 and keep every row 16-byte aligned for the float4 fragment reads.
    constexpr int A_PAD = 4;

    constexpr LaunchGeometry kStated = gemm_warptile_geometry<BM, BN, BK, WM, WN, WN_ITERS, TM, TN, THREADS>;
    static_assert(is_pair(kStated.block_threads, THREADS, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");

    __shared__ __align__(16) float As[BK][BM + A_PAD];
    __shared__ __align__(16) float Bs[BK][BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    // Offsets inside the block tile of this thread's first fragment; sub-tile (i, j) adds i * SUB_M rows, j * SUB_N
    // columns. Lanes run along N first so that neighbouring lanes read neighbouring float4 of Bs.
    const int thread_row = (warp / (BN / WN)) * WM + (lane / (SUB_N / TN)) * TM;
    const int thread_col = (warp % (BN / WN)) * WN + (lane % (SUB_N / TN)) * TN;

    float acc[WM_ITERS][WN_ITERS][TM][TN] = {};
    float4 a_next[A_LOADS], b_next[B_LOADS];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Global loads go out before the barrier, so their latency overlaps the wait for the slowest warp.
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), k = k0 + i % (BK / 4) * 4;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (block_row + r < M && k < K) {
                v = *reinterpret_cast<const float4*>(&A[(block_row + r) * lda + k]);
                // Only a padded row can straddle K; its padding may hold anything (NaN * 0 is NaN), so zero it.
                if (k + 4 > K) {
                    v.w = 0.0f;
                    if (k + 2 >= K) v.z = 0.0f;
                    if (k + 1 >= K) v.y = 0.0f;
                }
            }
            a_next[l] = v;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int k = k0 + i / (BN / 4), col = block_col + i % (BN / 4) * 4;
            // Lanes beyond N of a straddling float4 feed only C columns that are never stored: no mask needed.
            b_next[l] = (k < K && col < N) ? *reinterpret_cast<const float4*>(&B[k * ldb + col])
                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }

        __syncthreads();  // every warp is done reading the previous slice
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), c = i % (BK / 4) * 4;
            As[c + 0][r] = a_next[l].x;
            As[c + 1][r] = a_next[l].y;
            As[c + 2][r] = a_next[l].z;
            As[c + 3][r] = a_next[l].w;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BN / 4), c = i % (BN / 4) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = b_next[l];
        }
        __syncthreads();  // the slice is complete before anyone reads it

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[WM_ITERS][TM], b_frag[WN_ITERS][TN];
#pragma unroll
            for (int wm = 0; wm < WM_ITERS; ++wm) load_fragment<TM>(a_frag[wm], &As[k][thread_row + wm * SUB_M]);
#pragma unroll
            for (int wn = 0; wn < WN_ITERS; ++wn) load_fragment<TN>(b_frag[wn], &Bs[k][thread_col + wn * SUB_N]);
#pragma unroll
            for (int wm = 0; wm < WM_ITERS; ++wm)
#pragma unroll
                for (int wn = 0; wn < WN_ITERS; ++wn)
#pragma unroll
                    for (int m = 0; m < TM; ++m)
#pragma unroll
                        for (int n = 0; n < TN; ++n) acc[wm][wn][m][n] += a_frag[wm][m] * b_frag[wn][n];
        }
    }

#pragma unroll
    for (int wm = 0; wm < WM_ITERS; ++wm) {
#pragma unroll
        for (int m = 0; m < TM; ++m) {
            const int row = block_row + thread_row + wm * SUB_M + m;
            if (row >= M) break;  // later m only go further down
            float* c_row = C + row * ldc;
#pragma unroll
            for (int wn = 0; wn < WN_ITERS; ++wn) {
#pragma unroll
                for (int n = 0; n < TN; n += 4) {
                    const int col = block_col + thread_col + wn * SUB_N + n;
                    const float* a = &acc[wm][wn][m][n];
                    if constexpr (TN % 4 == 0) {
                        if (col + 4 <= N) {
                            store_epilogue4(c_row + col, make_float4(a[0], a[1], a[2], a[3]), alpha, beta);
                            continue;
                        }
                    }
                    // A group straddling N, or any group when TN % 4 != 0: C's padding, if any, is not ours to write.
#pragma unroll
                    for (int j = 0; j < 4 && n + j < TN; ++j)
                        if (col + j < N) store_epilogue(c_row + col + j, a[j], alpha, beta);
                }
            }
        }
    }
}

