// Vectorised SGEMM: the register-cached thread tile with 128-bit (float4) global loads and stores. A is stored
// transposed in shared memory (As[k][m]) so that a thread's TM values of A are contiguous and read as float4 too.
// DOUBLE_BUFFER: two shared-memory stages. The next K slice is fetched from global memory into registers before the
// FMAs of the current slice are issued, so its latency hides behind them, and one barrier per slice suffices.
// Without it the fetch waits for the FMAs and a second barrier guards the single stage.
//   <128, 128, 8, 8, 8, false>  float4 access (seed 000 kernel_6)
//   <128, 128, 8, 8, 8, true>   double-buffered prefetch (kernel_7)
// Shapes: N and K multiples of 4, so that every row of A, B and C starts 16-byte aligned; any M. Edge slices are
// zero-filled a float4 at a time and stores are masked.
// Ladder: builds on fp32/register_cache.
#include "common.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool DOUBLE_BUFFER>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_vectorized(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                float beta, float* __restrict__ C) {
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BM % 4 == 0 && BN % 4 == 0,
                  "every tile edge that is read as float4 must be a multiple of 4");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread must load the same number of float4 of A and B per slice");
    constexpr int A_LOADS = BM * BK / 4 / THREADS;
    constexpr int B_LOADS = BK * BN / 4 / THREADS;
    constexpr int STAGES = DOUBLE_BUFFER ? 2 : 1;

    __shared__ __align__(16) float As[STAGES][BK][BM];
    __shared__ __align__(16) float Bs[STAGES][BK][BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int thread_row = threadIdx.x / (BN / TN) * TM;
    const int thread_col = threadIdx.x % (BN / TN) * TN;
    const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    // One slice in flight between global and shared memory. K % 4 == 0 and N % 4 == 0 make each float4 either
    // wholly inside the matrix or wholly outside it.
    float4 a_next[A_LOADS], b_next[B_LOADS];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), c = i % (BK / 4) * 4;
            a_next[l] = (block_row + r < M && k0 + c < K)
                            ? *reinterpret_cast<const float4*>(&A[(block_row + r) * K + k0 + c])
                            : zero4;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BN / 4), c = i % (BN / 4) * 4;
            b_next[l] = (k0 + r < K && block_col + c < N)
                            ? *reinterpret_cast<const float4*>(&B[(k0 + r) * N + block_col + c])
                            : zero4;
        }
    };
    auto stash = [&](int stage) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int r = i / (BK / 4), c = i % (BK / 4) * 4;
            As[stage][c + 0][r] = a_next[l].x;
            As[stage][c + 1][r] = a_next[l].y;
            As[stage][c + 2][r] = a_next[l].z;
            As[stage][c + 3][r] = a_next[l].w;
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
            for (int m = 0; m < TM; m += 4)
                unpack4(&a_frag[m], *reinterpret_cast<const float4*>(&As[stage][k][thread_row + m]));
#pragma unroll
            for (int n = 0; n < TN; n += 4)
                unpack4(&b_frag[n], *reinterpret_cast<const float4*>(&Bs[stage][k][thread_col + n]));
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
        for (int n = 0; n < TN; n += 4) {
            const int col = block_col + thread_col + n;
            if (col < N)
                store_epilogue4(&C[row * N + col], make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]),
                                alpha, beta);
        }
    }
}
