// Tensor-core GEMM in inline PTX: mma.sync m16n8k8 (FP16 inputs, FP32 accumulate) fed from shared memory by ldmatrix.
// A block stages a BM x BK slice of A and a BK x BN slice of B in shared memory, both row-major. Each of its
// (BM / WM) x (BN / WN) warps owns a WM x WN warp tile of (WM / 16) x (WN / 8) mma tiles, and holds the A fragments
// of its mma-tile rows and the B fragments of its columns in registers, so each fragment feeds several mmas.
// ldmatrix .trans turns the row-major [k][n] B tile into the column-major fragment mma wants, so B is never
// transposed in memory.
// FEATURES adds the later steps of the seed one bit at a time:
//   kVectorLoads        global loads and shared stores move 8 halves (128 bits) at once instead of one.
//   kSwizzle            the 16-byte chunks of each shared row are XOR-permuted by row, so that the 8 rows one
//                       ldmatrix phase reads fall in 8 different bank groups instead of 2 (A) or 1 (B); ldmatrix also
//                       takes 32-bit shared-window offsets from one base instead of 64-bit generic pointers.
//   kRegisterBuffer     the next slice is loaded into registers before the mmas of this one and stored to shared
//                       memory after them, so its global latency hides behind the tensor-core work.
//   kUnrolledFragments  a slice's fragments are all loaded up front with x4 ldmatrix (two k steps of an A tile, four
//                       of a B tile per instruction) instead of x2 / x1 per k step: fewer, wider instructions.
// Catalogue (seed 001 labels):
//   <16, 8, 8, 16, 8, 0>          one warp, one mma tile per block        "Naive MMA"
//   <128, 128, 32, 64, 32, 0>     8 warps of 64x32, 16-bit staging        "Hierarchical MMA"
//   + kVectorLoads                                                        "Vectorized MMA"
//   + kSwizzle                                                            "Memory swizzling"
//   + kRegisterBuffer                                                     "Buffered GMEM"
//   + kUnrolledFragments                                                  "Unrolled SMEM"
// The seed retuned tile sizes at "Memory swizzling" and moved to BK = 32 at "Buffered GMEM"; here every step from
// "Hierarchical MMA" on keeps 128x128x32 (8 warps of 64x32, fine on sm_80 and sm_90), so that consecutive steps
// differ by exactly one feature bit and the tile size is not a second variable in the comparison.
// Shapes: without kVectorLoads any M, N, K >= 1. With it any M, but N and K multiples of 8 (and lda, ldb), so
// that every 8-half chunk of a row is 16-byte aligned and wholly inside or wholly outside the matrix. Slices past
// an edge are zero-filled, which adds nothing to the sums, and stores are masked.
// Ladder: builds on fp16/wmma_naive.
#include <cuda_fp16.h>

#include "common.cuh"
#include "mma_sync.cuh"

constexpr unsigned kVectorLoads = 1, kSwizzle = 2, kRegisterBuffer = 4, kUnrolledFragments = 8;

// What one thread moves from global to shared memory per load: a half, or with kVectorLoads eight of them.
template <bool VECTOR>
struct StagingChunk;

template <>
struct StagingChunk<false> {
    using Type = __half;
    static constexpr int kHalves = 1;
    __device__ static Type load(const __half* src) { return *src; }
    __device__ static Type zero() { return __ushort_as_half(0); }
    __device__ static void store(__half* dst, Type value) { *dst = value; }
};

template <>
struct StagingChunk<true> {
    using Type = uint4;
    static constexpr int kHalves = 8;
    __device__ static Type load(const __half* src) { return *reinterpret_cast<const uint4*>(src); }
    __device__ static Type zero() { return make_uint4(0u, 0u, 0u, 0u); }
    // In PTX so that it stays one 128-bit store: left to the compiler, some of these were split into four 32-bit
    // ones. The memory clobber keeps it on its side of the barriers, like an ordinary store.
    __device__ static void store(__half* dst, Type value) {
        const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(value.x), "r"(value.y),
                     "r"(value.z), "r"(value.w)
                     : "memory");
    }
};

template <int BM, int BN, int BK, int WM, int WN, unsigned FEATURES>
__device__ constexpr LaunchGeometry gemm_mma_geometry = {{(BM / WM) * (BN / WN) * 32, 1}, {BM, BN}, {1, 1, 1}};

template <int BM, int BN, int BK, int WM, int WN, unsigned FEATURES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
gemm_mma(int M, int N, int K, float alpha, const __half* __restrict__ A, int lda, const __half* __restrict__ B,
         int ldb, float beta, float* __restrict__ C, int ldc) {
    constexpr bool VECTOR = (FEATURES & kVectorLoads) != 0;
    constexpr bool SWIZZLE = (FEATURES & kSwizzle) != 0;
    constexpr bool REGISTER_BUFFER = (FEATURES & kRegisterBuffer) != 0;
    constexpr bool UNROLLED = (FEATURES & kUnrolledFragments) != 0;
    static_assert(FEATURES < 16, "unknown feature bit");

    static_assert(WM % 16 == 0 && WN % 8 == 0, "a warp tile is made of 16x8 mma tiles");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile");
    static_assert(BK % 8 == 0, "a slice is made of k = 8 mma steps");
    static_assert(!UNROLLED || BK % 32 == 0, "x4 ldmatrix takes two k steps of A and four of B at once");
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr LaunchGeometry kStated = gemm_mma_geometry<BM, BN, BK, WM, WN, FEATURES>;
    static_assert(is_pair(kStated.block_threads, THREADS, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_plain(kStated), "cluster, shared_memory, stages, tma: this kernel uses none of them");
    constexpr int MMA_ROWS = WM / 16;  // mma tiles per warp tile, down
    constexpr int MMA_COLS = WN / 8;   // and across
    constexpr int K_STEPS = BK / 8;

    using Chunk = StagingChunk<VECTOR>;
    constexpr int CHUNK = Chunk::kHalves;
    constexpr int A_CHUNKS_PER_ROW = BK / CHUNK;
    constexpr int B_CHUNKS_PER_ROW = BN / CHUNK;
    static_assert(BK % CHUNK == 0 && BN % CHUNK == 0, "tile rows must be whole chunks");
    static_assert((BM * BK / CHUNK) % THREADS == 0 && (BK * BN / CHUNK) % THREADS == 0,
                  "every thread must stage the same number of chunks of A and B per slice");
    constexpr int A_LOADS = BM * BK / CHUNK / THREADS;
    constexpr int B_LOADS = BK * BN / CHUNK / THREADS;

    // 16-byte alignment: ldmatrix rows and 128-bit stores.
    __shared__ __align__(16) __half As[BM * BK];
    __shared__ __align__(16) __half Bs[BK * BN];

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int warp_row = warp / WARPS_N * WM;  // inside the block tile
    const int warp_col = warp % WARPS_N * WN;

    // The slice on its way from global to shared memory. Out-of-range chunks become zeros.
    typename Chunk::Type a_staged[A_LOADS], b_staged[B_LOADS];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int row = block_row + i / A_CHUNKS_PER_ROW, col = k0 + i % A_CHUNKS_PER_ROW * CHUNK;
            a_staged[l] = (row < M && col < K) ? Chunk::load(&A[row * lda + col]) : Chunk::zero();
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            const int row = k0 + i / B_CHUNKS_PER_ROW, col = block_col + i % B_CHUNKS_PER_ROW * CHUNK;
            b_staged[l] = (row < K && col < N) ? Chunk::load(&B[row * ldb + col]) : Chunk::zero();
        }
    };
    auto stash = [&]() {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            Chunk::store(&As[tile_offset<BK, SWIZZLE>(i / A_CHUNKS_PER_ROW, i % A_CHUNKS_PER_ROW * CHUNK)],
                         a_staged[l]);
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int i = threadIdx.x + l * THREADS;
            Chunk::store(&Bs[tile_offset<BN, SWIZZLE>(i / B_CHUNKS_PER_ROW, i % B_CHUNKS_PER_ROW * CHUNK)],
                         b_staged[l]);
        }
    };

    // Where ldmatrix finds the shared element at a given offset: a generic pointer, or with kSwizzle a byte offset
    // in the shared window computed once per tile.
    const unsigned a_window = static_cast<unsigned>(__cvta_generic_to_shared(As));
    const unsigned b_window = static_cast<unsigned>(__cvta_generic_to_shared(Bs));
    auto a_address = [&](int offset) {
        if constexpr (SWIZZLE) return a_window + 2u * offset;
        else return static_cast<const __half*>(&As[offset]);
    };
    auto b_address = [&](int offset) {
        if constexpr (SWIZZLE) return b_window + 2u * offset;
        else return static_cast<const __half*>(&Bs[offset]);
    };

    // With kUnrolledFragments the fragments of every k step of the slice are live at once; otherwise one k step's.
    constexpr int FRAGMENT_STEPS = UNROLLED ? K_STEPS : 1;
    unsigned a_frag[FRAGMENT_STEPS][MMA_ROWS][2];
    unsigned b_frag[FRAGMENT_STEPS][MMA_COLS];
    float acc[MMA_ROWS][MMA_COLS][4] = {};

    auto multiply_slice = [&]() {
        if constexpr (UNROLLED) {
            // A, x4: lanes 0-15 name rows 0-15 of the mma tile at k, lanes 16-31 the same rows at k + 8, so
            // matrices 0, 1 are the fragment of k step 2p and matrices 2, 3 that of step 2p + 1.
#pragma unroll
            for (int pair = 0; pair < K_STEPS / 2; ++pair)
#pragma unroll
                for (int m = 0; m < MMA_ROWS; ++m) {
                    const int row = warp_row + m * 16 + lane % 16, col = pair * 16 + lane / 16 * 8;
                    ldmatrix_x4(a_frag[2 * pair][m][0], a_frag[2 * pair][m][1], a_frag[2 * pair + 1][m][0],
                                a_frag[2 * pair + 1][m][1], a_address(tile_offset<BK, SWIZZLE>(row, col)));
                }
            // B, x4 .trans: lane l names k row 32q + l, so matrix j is the 8x8 block of k step 4q + j.
#pragma unroll
            for (int quad = 0; quad < K_STEPS / 4; ++quad)
#pragma unroll
                for (int n = 0; n < MMA_COLS; ++n) {
                    const int row = quad * 32 + lane, col = warp_col + n * 8;
                    ldmatrix_x4_trans(b_frag[4 * quad][n], b_frag[4 * quad + 1][n], b_frag[4 * quad + 2][n],
                                      b_frag[4 * quad + 3][n], b_address(tile_offset<BN, SWIZZLE>(row, col)));
                }
#pragma unroll
            for (int step = 0; step < K_STEPS; ++step)
#pragma unroll
                for (int m = 0; m < MMA_ROWS; ++m)
#pragma unroll
                    for (int n = 0; n < MMA_COLS; ++n) mma_m16n8k8(acc[m][n], a_frag[step][m], b_frag[step][n]);
        } else {
#pragma unroll
            for (int step = 0; step < K_STEPS; ++step) {
                // A, x2: lanes 0-7 name rows 0-7 (a0, a1), lanes 8-15 rows 8-15 (a2, a3); lanes 16-31 are ignored
                // but given valid rows all the same.
#pragma unroll
                for (int m = 0; m < MMA_ROWS; ++m) {
                    const int row = warp_row + m * 16 + lane % 16;
                    ldmatrix_x2(a_frag[0][m][0], a_frag[0][m][1], a_address(tile_offset<BK, SWIZZLE>(row, step * 8)));
                }
                // B, x1 .trans: lanes 0-7 name k rows 0-7; the transpose hands lane l the k rows 2(l%4), +1 of
                // column l/4, which is the column-major fragment.
#pragma unroll
                for (int n = 0; n < MMA_COLS; ++n) {
                    const int row = step * 8 + lane % 8, col = warp_col + n * 8;
                    ldmatrix_x1_trans(b_frag[0][n], b_address(tile_offset<BN, SWIZZLE>(row, col)));
                }
#pragma unroll
                for (int m = 0; m < MMA_ROWS; ++m)
#pragma unroll
                    for (int n = 0; n < MMA_COLS; ++n) mma_m16n8k8(acc[m][n], a_frag[0][m], b_frag[0][n]);
            }
        }
    };

    if constexpr (REGISTER_BUFFER) {
        fetch(0);
        stash();
        __syncthreads();
        for (int k0 = 0; k0 < K; k0 += BK) {
            const bool has_next = k0 + BK < K;  // the same for the whole block, so the barriers below are safe
            if (has_next) fetch(k0 + BK);
            multiply_slice();
            if (has_next) {
                __syncthreads();  // every warp is done reading the slice about to be overwritten
                stash();
                __syncthreads();
            }
        }
    } else {
        for (int k0 = 0; k0 < K; k0 += BK) {
            fetch(k0);
            stash();
            __syncthreads();
            multiply_slice();
            __syncthreads();  // the next slice overwrites what slower warps may still be reading
        }
    }

    // acc[m][n][2h + j] is C(row g + 8h, column 2t + j) of mma tile (m, n), g = lane/4, t = lane%4.
#pragma unroll
    for (int m = 0; m < MMA_ROWS; ++m)
#pragma unroll
        for (int n = 0; n < MMA_COLS; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = block_row + warp_row + m * 16 + lane / 4 + h * 8;
                const int col = block_col + warp_col + n * 8 + lane % 4 * 2;
                if (row < M) {
                    if (col < N) store_epilogue(&C[row * ldc + col], acc[m][n][2 * h], alpha, beta);
                    if (col + 1 < N) store_epilogue(&C[row * ldc + col + 1], acc[m][n][2 * h + 1], alpha, beta);
                }
            }
}
