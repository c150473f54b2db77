// Tensor-core GEMM in inline PTX past seed 001's last step: mma.sync (FP16 inputs, FP32 accumulate) fed by ldmatrix
// from a ring of STAGES shared-memory slices that cp.async fills STAGES - 1 K slices ahead of the mmas.
// A block computes a BM x BN tile of C with (BM / WM) x (BN / WN) warps of WM x WN. Each K slice of BK is a BM x BK
// tile of A and a BK x BN tile of B, row-major in dynamic shared memory with the 16-byte chunks of each row XOR-
// swizzled (conflict-free ldmatrix, as fp16/mma_swizzled). cp.async copies global to shared memory without passing
// through registers, zero-filling the chunks past an edge; a thread waits only for the slice the warps need next, so
// STAGES - 1 slices are in flight while the tensor cores work.
// Fragments are loaded per k16 step: A by one ldmatrix x4 per 16-row mma tile, B by one x4 .trans per two 8-column
// mma tiles (k rows 0-15 of each).
// FEATURES adds steps one bit at a time:
//   kK16                    one mma.sync m16n8k16 per k16 step of a 16x8 tile instead of two m16n8k8: on Hopper the
//                           k16 shape runs at about twice the FLOP rate of the k8 one.
//   kFragmentDoubleBuffer   the fragments of the next k16 step (the next slice's first, at a slice's last step) are
//                           loaded while the mmas of this one run, in a second set of registers, instead of all of a
//                           slice's fragments before its mmas.
//   kLeanCopies             a thread keeps one source pointer, one shared offset and a mask of edge tests per operand
//                           instead of all four per chunk it copies: its chunks of a slice lie a fixed number of rows
//                           apart, a multiple of the swizzle's period, so each is the first moved by a constant. With
//                           fragments double-buffered the registers sit at the 255 cap (128 accumulators, 64 fragment
//                           registers); this frees the room that deeper K slices (BK = 64, twice the chunks) need.
// GROUP (1: none) is the tile order: with GROUP > 1 consecutive blocks walk down GROUP tile rows before moving one
// tile column right, so the blocks running at once share the A rows and B columns they read in L2.
// Catalogue (template <BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>):
//   <128, 128, 32, 64, 32, 3, 1, 0>         fp16/mma_unrolled's tiles and k8 mmas, 3-stage cp.async      mma_async
//   + kK16                                                                                            mma_async_k16
//   <128, 256, 32, 64, 64, 3, 1, kK16>      8 warps of 64x64: twice the mmas per fragment loaded         mma_wide
//   + kFragmentDoubleBuffer                                                                    mma_fragment_buffered
//   GROUP = 8                                                                                        mma_grouped
// Shapes: any M; N and K multiples of 8 (and lda, ldb), so that every 16-byte chunk of a row is aligned and wholly
// inside or wholly outside the matrix. Chunks past an edge are zero-filled, adding nothing to the sums; stores of C
// are masked by row and column.
// Shared memory: STAGES * (BM * BK + BK * BN) halves, dynamic (above 48 KB the launch raises the block's limit), at
// most what a block may have on the architecture compiled for: 99 KB on sm_86 and sm_89, 163 KB on sm_80 and sm_87,
// 227 KB on sm_90. The catalogue's entries keep to 99 KB so that every tracked architecture runs them; a larger
// instantiation is for sm_80 or sm_90 alone (an sm_90a target, or a tuned entry).
// Ladder: builds on fp16/mma_unrolled.
#include <cuda_fp16.h>

#include "common.cuh"
#include "mma_sync.cuh"

constexpr unsigned kK16 = 1, kFragmentDoubleBuffer = 2, kLeanCopies = 4;

// The most shared memory a block may have on the architecture being compiled for, so that an instantiation too large
// for it fails the compile there rather than the launch.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kMaxBlockSharedBytes = 227 * 1024;
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870)
constexpr int kMaxBlockSharedBytes = 163 * 1024;
#else
constexpr int kMaxBlockSharedBytes = 99 * 1024;
#endif

// cp.async of one 16-byte chunk, global to shared, through L2 only (.cg: the block reads it once from shared memory).
// With `full` false no byte is read and the chunk is zero-filled; `src` must still be an address in the matrix.
__device__ __forceinline__ void copy_chunk_async(unsigned dst, const __half* src, bool full) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(full ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, unsigned FEATURES>
struct PipelinedTiles {
    static constexpr int kWarpsN = BN / WN;
    static constexpr int kThreads = (BM / WM) * kWarpsN * 32;
    static constexpr int kMmaRows = WM / 16;  // mma tiles per warp tile, down
    static constexpr int kMmaCols = WN / 8;   // and across
    static constexpr int kSteps = BK / 16;    // k16 steps per slice
    static constexpr int kAHalves = BM * BK, kBHalves = BK * BN;  // one stage of each
    static constexpr int kSharedBytes = STAGES * (kAHalves + kBHalves) * static_cast<int>(sizeof(__half));
    static constexpr int kChunk = 8;  // halves per 16-byte copy
    static constexpr int kACopies = kAHalves / kChunk / kThreads;  // per thread per slice
    static constexpr int kBCopies = kBHalves / kChunk / kThreads;
    static_assert(FEATURES < 8, "unknown feature bit");
    static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp tile is 16-row mma tiles by pairs of 8-column ones");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile");
    static_assert(BK % 16 == 0 && BK / 8 <= 8, "a slice is k16 steps, its rows at most one 128-byte swizzle period");
    static_assert(STAGES >= 2, "a pipeline holds the slice being read and at least one being copied");
    static_assert(GROUP >= 1, "GROUP counts tile rows");
    static_assert(kAHalves % (kChunk * kThreads) == 0 && kBHalves % (kChunk * kThreads) == 0,
                  "every thread copies the same number of chunks of A and of B per slice");
    static_assert(kSharedBytes <= kMaxBlockSharedBytes, "more shared memory than this architecture gives a block");
    // With kLeanCopies a thread's chunks of a slice are kThreads / chunks-per-row rows apart: whole swizzle periods
    // (8 rows at most), so that they share one swizzled column, and a row step the same for every chunk.
    static constexpr int kARowStep = kThreads / (BK / kChunk), kBRowStep = kThreads / (BN / kChunk);
    static_assert(!(FEATURES & kLeanCopies) ||
                      (kThreads % (BK / kChunk) == 0 && kThreads % (BN / kChunk) == 0 && kARowStep % 8 == 0 &&
                       kBRowStep % 8 == 0),
                  "kLeanCopies: a thread's chunks must lie whole swizzle periods apart, in one column");
    static_assert(!(FEATURES & kLeanCopies) || kACopies <= 32, "kLeanCopies: the row tests of A fit one 32-bit mask");
    static_assert(!(FEATURES & kFragmentDoubleBuffer) || kSteps % 2 == 0,
                  "two fragment sets alternate by k16 step: an even count keeps their indices static");
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, unsigned FEATURES>
__device__ constexpr LaunchGeometry gemm_mma_pipelined_geometry = {
    {PipelinedTiles<BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>::kThreads, 1},
    {BM, BN},
    {1, 1, 1},
    PipelinedTiles<BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>::kSharedBytes};

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, unsigned FEATURES>
__global__ void __launch_bounds__(PipelinedTiles<BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>::kThreads)
gemm_mma_pipelined(int M, int N, int K, float alpha, const __half* __restrict__ A, int lda,
                   const __half* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    using Tiles = PipelinedTiles<BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>;
    constexpr bool K16 = (FEATURES & kK16) != 0;
    constexpr bool FRAGMENT_DOUBLE_BUFFER = (FEATURES & kFragmentDoubleBuffer) != 0;
    constexpr bool LEAN_COPIES = (FEATURES & kLeanCopies) != 0;
    constexpr LaunchGeometry kStated = gemm_mma_pipelined_geometry<BM, BN, BK, WM, WN, STAGES, GROUP, FEATURES>;
    static_assert(is_pair(kStated.block_threads, Tiles::kThreads, 1), "block_threads: not the block this kernel indexes");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_cluster(kStated, 1, 1, 1), "cluster: this kernel runs in no cluster");
    static_assert(kStated.shared_memory == Tiles::kSharedBytes, "shared_memory: not STAGES slices of A and B");
    static_assert(kStated.stages == 0 && is_box(kStated.tma[0], 0, 0, 0) && is_box(kStated.tma[1], 0, 0, 0) &&
                      is_box(kStated.tma[2], 0, 0, 0),
                  "stages, tma: nothing comes by TMA");
    constexpr int A_CHUNKS_PER_ROW = BK / Tiles::kChunk, B_CHUNKS_PER_ROW = BN / Tiles::kChunk;

    extern __shared__ __align__(128) unsigned char shared[];
    if (threadIdx.x == 0) {
        unsigned given;
        asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(given));
        if (given != Tiles::kSharedBytes) __trap();  // the launch gave another layout: fail, never compute
    }
    // Byte addresses in the shared window: A's stages, then B's.
    const unsigned a_window = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    const unsigned b_window = a_window + STAGES * Tiles::kAHalves * 2u;

    int tile_row = blockIdx.y, tile_col = blockIdx.x;
    if constexpr (GROUP > 1) {
        // Block b of the launch order takes the tiles column by column within bands of GROUP tile rows.
        const int order = blockIdx.y * gridDim.x + blockIdx.x;
        const int per_band = GROUP * gridDim.x;
        const int first_row = order / per_band * GROUP;
        const int band_rows = min(GROUP, static_cast<int>(gridDim.y) - first_row);
        tile_row = first_row + order % per_band % band_rows;
        tile_col = order % per_band / band_rows;
    }
    const int block_row = tile_row * BM, block_col = tile_col * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = warp / Tiles::kWarpsN * WM, warp_col = warp % Tiles::kWarpsN * WN;  // inside the tile

    // What each thread copies per slice, fixed but for the slice's k0: the source row, its column, the swizzled
    // shared offset (in bytes, inside a stage) and whether the row is inside the matrix.
    const __half* a_source[Tiles::kACopies];
    int a_col[Tiles::kACopies];
    unsigned a_offset[Tiles::kACopies];
    bool a_row_inside[Tiles::kACopies];
#pragma unroll
    for (int l = 0; l < Tiles::kACopies; ++l) {
        const int i = threadIdx.x + l * Tiles::kThreads;
        const int row = i / A_CHUNKS_PER_ROW, col = i % A_CHUNKS_PER_ROW * Tiles::kChunk;
        a_row_inside[l] = block_row + row < M;
        a_source[l] = A + static_cast<long long>(a_row_inside[l] ? block_row + row : 0) * lda + col;
        a_col[l] = col;
        a_offset[l] = 2u * tile_offset<BK, true>(row, col);
    }
    const __half* b_source[Tiles::kBCopies];
    int b_row[Tiles::kBCopies];
    unsigned b_offset[Tiles::kBCopies];
    bool b_col_inside[Tiles::kBCopies];
#pragma unroll
    for (int l = 0; l < Tiles::kBCopies; ++l) {
        const int i = threadIdx.x + l * Tiles::kThreads;
        const int row = i / B_CHUNKS_PER_ROW, col = i % B_CHUNKS_PER_ROW * Tiles::kChunk;
        b_col_inside[l] = block_col + col < N;
        b_source[l] = B + static_cast<long long>(row) * ldb + (b_col_inside[l] ? block_col + col : 0);
        b_row[l] = row;
        b_offset[l] = 2u * tile_offset<BN, true>(row, col);
    }
    // kLeanCopies: chunk l of A is chunk 0 moved kARowStep * l rows (lda * that in the source, BK * that in shared
    // memory), of B kBRowStep * l rows; one column test serves all of B's chunks, a mask holds A's row tests.
    const int a_first_row = threadIdx.x / A_CHUNKS_PER_ROW, a_first_col = threadIdx.x % A_CHUNKS_PER_ROW * 8;
    const int b_first_row = threadIdx.x / B_CHUNKS_PER_ROW, b_first_col = threadIdx.x % B_CHUNKS_PER_ROW * 8;
    const __half* const a_first = A + static_cast<long long>(block_row + a_first_row) * lda + a_first_col;
    const __half* const b_first = B + static_cast<long long>(b_first_row) * ldb + block_col + b_first_col;
    const unsigned a_first_offset = 2u * tile_offset<BK, true>(a_first_row, a_first_col);
    const unsigned b_first_offset = 2u * tile_offset<BN, true>(b_first_row, b_first_col);
    const bool b_first_col_inside = block_col + b_first_col < N;
    unsigned a_rows_inside = 0;
#pragma unroll
    for (int l = 0; l < Tiles::kACopies; ++l)
        a_rows_inside |= (block_row + a_first_row + l * Tiles::kARowStep < M ? 1u : 0u) << l;

    // Copies the K slice starting at k0 into a stage; chunks past an edge read nothing and become zeros.
    auto copy_slice = [&](int stage, int k0) {
        if constexpr (LEAN_COPIES) {
            const unsigned a_stage = a_window + stage * Tiles::kAHalves * 2u + a_first_offset;
            const unsigned b_stage = b_window + stage * Tiles::kBHalves * 2u + b_first_offset;
            const bool a_col_inside = k0 + a_first_col < K;
#pragma unroll
            for (int l = 0; l < Tiles::kACopies; ++l) {
                const bool inside = a_col_inside && (a_rows_inside >> l & 1u);
                copy_chunk_async(a_stage + l * Tiles::kARowStep * BK * 2u,
                                 inside ? a_first + static_cast<long long>(l * Tiles::kARowStep) * lda + k0 : A,
                                 inside);
            }
#pragma unroll
            for (int l = 0; l < Tiles::kBCopies; ++l) {
                const int row = k0 + b_first_row + l * Tiles::kBRowStep;
                const bool inside = b_first_col_inside && row < K;
                copy_chunk_async(b_stage + l * Tiles::kBRowStep * BN * 2u,
                                 inside ? b_first + static_cast<long long>(row - b_first_row) * ldb : B, inside);
            }
        } else {
#pragma unroll
            for (int l = 0; l < Tiles::kACopies; ++l) {
                const bool inside = a_row_inside[l] && k0 + a_col[l] < K;
                copy_chunk_async(a_window + stage * Tiles::kAHalves * 2u + a_offset[l],
                                 inside ? a_source[l] + k0 : A, inside);
            }
#pragma unroll
            for (int l = 0; l < Tiles::kBCopies; ++l) {
                const bool inside = b_col_inside[l] && k0 + b_row[l] < K;
                copy_chunk_async(b_window + stage * Tiles::kBHalves * 2u + b_offset[l],
                                 inside ? b_source[l] + static_cast<long long>(k0) * ldb : B, inside);
            }
        }
    };

    // The fragments of one k16 step: a[m] of 16-row mma tile m (x4: lanes 0-15 name its rows at k 0-7, lanes 16-31
    // at k 8-15, which is m16n8k16's a0..a3), b[n] of 8-column mma tile n (x4 .trans over two tiles: lanes 0-15 name
    // k rows 0-15 of tile 2p, lanes 16-31 those of tile 2p + 1).
    struct Fragments {
        unsigned a[Tiles::kMmaRows][4];
        unsigned b[Tiles::kMmaCols][2];
    };
    auto load_fragments = [&](Fragments& f, int stage, int step) {
        const unsigned a_stage = a_window + stage * Tiles::kAHalves * 2u;
        const unsigned b_stage = b_window + stage * Tiles::kBHalves * 2u;
#pragma unroll
        for (int m = 0; m < Tiles::kMmaRows; ++m) {
            const int row = warp_row + m * 16 + lane % 16, col = step * 16 + lane / 16 * 8;
            ldmatrix_x4(f.a[m][0], f.a[m][1], f.a[m][2], f.a[m][3], a_stage + 2u * tile_offset<BK, true>(row, col));
        }
#pragma unroll
        for (int pair = 0; pair < Tiles::kMmaCols / 2; ++pair) {
            const int row = step * 16 + lane % 16, col = warp_col + pair * 16 + lane / 16 * 8;
            ldmatrix_x4_trans(f.b[2 * pair][0], f.b[2 * pair][1], f.b[2 * pair + 1][0], f.b[2 * pair + 1][1],
                              b_stage + 2u * tile_offset<BN, true>(row, col));
        }
    };

    float acc[Tiles::kMmaRows][Tiles::kMmaCols][4] = {};
    auto multiply = [&](const Fragments& f) {
#pragma unroll
        for (int m = 0; m < Tiles::kMmaRows; ++m)
#pragma unroll
            for (int n = 0; n < Tiles::kMmaCols; ++n) {
                if constexpr (K16) {
                    mma_m16n8k16(acc[m][n], f.a[m], f.b[n]);
                } else {
                    const unsigned low[2] = {f.a[m][0], f.a[m][1]}, high[2] = {f.a[m][2], f.a[m][3]};
                    mma_m16n8k8(acc[m][n], low, f.b[n][0]);
                    mma_m16n8k8(acc[m][n], high, f.b[n][1]);
                }
            }
    };

    const int slices = (K + BK - 1) / BK;
    // Fill all stages but one; a group is committed for every slice, empty past the last, so that "all but
    // STAGES - 2 groups done" always means "slice s has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) copy_slice(s, s * BK);
        commit_copies();
    }
    // The slice issued at slice s goes into the stage slice s - 1 used: every warp is past reading it, since the
    // barrier before the issue follows the last fragment load of slice s - 1.
    auto issue_ahead = [&](int slice) {
        const int ahead = slice + STAGES - 1;
        if (ahead < slices) copy_slice(ahead % STAGES, ahead * BK);
        commit_copies();
    };

    if constexpr (!FRAGMENT_DOUBLE_BUFFER) {
        for (int slice = 0; slice < slices; ++slice) {
            wait_copies<STAGES - 2>();  // this thread's copies of the slice have landed
            __syncthreads();            // and everyone's; everyone is done with slice - 1's stage
            issue_ahead(slice);
            Fragments f[Tiles::kSteps];
#pragma unroll
            for (int step = 0; step < Tiles::kSteps; ++step) load_fragments(f[step], slice % STAGES, step);
#pragma unroll
            for (int step = 0; step < Tiles::kSteps; ++step) multiply(f[step]);
        }
    } else {
        Fragments f[2];
        wait_copies<STAGES - 2>();
        __syncthreads();
        load_fragments(f[0], 0, 0);
        for (int slice = 0; slice < slices; ++slice) {
#pragma unroll
            for (int step = 0; step < Tiles::kSteps; ++step) {
                if (step == Tiles::kSteps - 1) {
                    // The next slice's first fragments come next: it must have landed, for every thread.
                    wait_copies<STAGES - 2>();
                    __syncthreads();
                }
                if (step + 1 < Tiles::kSteps) load_fragments(f[(step + 1) % 2], slice % STAGES, step + 1);
                else if (slice + 1 < slices) load_fragments(f[(step + 1) % 2], (slice + 1) % STAGES, 0);
                if (step == 0) issue_ahead(slice);  // after the barrier at the end of slice - 1
                multiply(f[step % 2]);
            }
        }
    }
    wait_copies<0>();  // no copy may still be writing shared memory when the block exits

    // acc[m][n][2h + j] is C(row g + 8h, column 2t + j) of mma tile (m, n), g = lane / 4, t = lane % 4. N is even and
    // so is the column, so a pair is inside or outside together and 8-byte aligned.
#pragma unroll
    for (int m = 0; m < Tiles::kMmaRows; ++m)
#pragma unroll
        for (int n = 0; n < Tiles::kMmaCols; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = block_row + warp_row + m * 16 + lane / 4 + h * 8;
                const int col = block_col + warp_col + n * 8 + lane % 4 * 2;
                if (row < M && col < N)
                    store_epilogue2(&C[static_cast<long long>(row) * ldc + col], acc[m][n][2 * h],
                                    acc[m][n][2 * h + 1], alpha, beta);
            }
}
