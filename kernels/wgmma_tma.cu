// Hopper's tensor cores reached through warpgroup MMA (wgmma) on tiles the TMA copies into shared memory: the first
// steps of the Hopper ladder, one synchronous loop per block.
// Each K step of 64: thread 0 arms the block's barrier with the step's bytes and issues TMA copies of a BM x 64 tile
// of A and a 64 x BN tile of B (BN / 64 column chunks); every thread waits on the barrier; each warpgroup then issues
// 4 x (ROWS / 64) wgmmas of m64 n=BN k16 over its ROWS = BM / WARPGROUPS rows, waits for them, and the block syncs
// before the tiles are overwritten. Loads and tensor-core work take turns: nothing overlaps within a block, only
// across the blocks an SM holds at once. The accumulators stay in registers; the epilogue writes them to C directly.
// Tile parameters: BM x BN per block, BK = 64 (one 128-byte swizzle row of FP16/BF16), WARPGROUPS x 128 threads;
// wgmma n = BN (128 or 256). The launch takes them, the shared memory and the TMA boxes from gemm_wgmma_tma_geometry.
// Catalogue:
//   <T, 128, 128, 1>   one warpgroup, two m64n128 wgmmas per k16                   wgmma_tma
//   <T, 128, 256, 2>   two warpgroups of 64 x 256: larger tile, more warps         wgmma_tma_wide
// Shapes: M a multiple of BM, N of BN, K of 64 (the TMA boxes are whole tiles; row strides lda, ldb, ldc in elements,
// multiples of 8 so that the TMA's 16-byte stride rule holds). Needs sm_90a (compute capability 9.0 exactly).
// Ladder: builds on fp16/mma_buffered (mma.sync, which Hopper runs at a fraction of its wgmma rate).
#include "common.cuh"
#include "hopper.cuh"

template <typename T, int BM, int BN, int WARPGROUPS>
struct TmaTiles {
    static constexpr int kBK = 64;
    static constexpr int kThreads = WARPGROUPS * kWarpgroupThreads;
    static constexpr int kRows = BM / WARPGROUPS;  // rows of C per warpgroup
    static constexpr int kMmasM = kRows / 64;
    static constexpr int kChunkCols = 64;  // B's tile is copied in chunks of 64 columns: one 128-byte swizzle row
    static constexpr int kChunks = BN / kChunkCols;
    static constexpr int kABytes = BM * kBK * static_cast<int>(sizeof(T));
    static constexpr int kChunkBytes = kBK * kChunkCols * static_cast<int>(sizeof(T));
    static constexpr int kStepBytes = kABytes + kChunks * kChunkBytes;
    static constexpr int kSharedBytes = kStepBytes + 8;  // the tiles, then the barrier
    static_assert(sizeof(T) == 2, "wgmma here takes FP16 or BF16 inputs: 64 of them fill a 128-byte swizzle row");
    static_assert(kRows % 64 == 0, "each warpgroup owns whole m64 slabs of the tile");
    static_assert(BN % 64 == 0 && (BN == 128 || BN == 256), "wgmma n: 128 or 256 columns, in 64-column chunks");
    static_assert(kABytes % kSwizzleAtomBytes == 0 && kChunkBytes % kSwizzleAtomBytes == 0,
                  "every tile starts on a 1024-byte swizzle atom");
};

// One stage: A's tile in one box, B's in kChunks boxes of kChunkCols columns.
template <typename T, int BM, int BN, int WARPGROUPS>
__device__ constexpr LaunchGeometry gemm_wgmma_tma_geometry = {
    {TmaTiles<T, BM, BN, WARPGROUPS>::kThreads, 1},
    {BM, BN},
    {1, 1, 1},
    TmaTiles<T, BM, BN, WARPGROUPS>::kSharedBytes,
    1,
    {{BM, TmaTiles<T, BM, BN, WARPGROUPS>::kBK, kSwizzleBytes},
     {TmaTiles<T, BM, BN, WARPGROUPS>::kBK, TmaTiles<T, BM, BN, WARPGROUPS>::kChunkCols, kSwizzleBytes}}};

template <typename T, int BM, int BN, int WARPGROUPS>
__global__ void __launch_bounds__(TmaTiles<T, BM, BN, WARPGROUPS>::kThreads)
    gemm_wgmma_tma(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, float* C,
                   int ldc, const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map) {
    using Tiles = TmaTiles<T, BM, BN, WARPGROUPS>;
    constexpr LaunchGeometry kStated = gemm_wgmma_tma_geometry<T, BM, BN, WARPGROUPS>;
    static_assert(is_pair(kStated.block_threads, Tiles::kThreads, 1), "block_threads: not this kernel's warpgroups");
    static_assert(is_pair(kStated.block_tile, BM, BN), "block_tile: not the tile this kernel computes");
    static_assert(is_cluster(kStated, 1, 1, 1), "cluster: this kernel runs in no cluster");
    static_assert(kStated.shared_memory == Tiles::kSharedBytes, "shared_memory: not one stage of tiles and a barrier");
    static_assert(kStated.stages == 1, "stages: this kernel holds one K step at a time");
    static_assert(is_box(kStated.tma[0], BM, Tiles::kBK, kSwizzleBytes) &&
                      is_box(kStated.tma[1], Tiles::kBK, Tiles::kChunkCols, kSwizzleBytes) &&
                      is_box(kStated.tma[2], 0, 0, 0),
                  "tma: not the boxes this kernel copies (A's tile, B's column chunks; C is written directly)");
    extern __shared__ __align__(1024) unsigned char shared[];
    if (threadIdx.x == 0 && (dynamic_shared_bytes() != Tiles::kSharedBytes || shared_address(shared) % 1024)) {
        __trap();  // the launch's shared memory or the alignment the swizzle needs is wrong: fail, never compute
    }
    T* a_tile = reinterpret_cast<T*>(shared);
    T* b_tile = reinterpret_cast<T*>(shared + Tiles::kABytes);
    auto* loaded = reinterpret_cast<unsigned long long*>(shared + Tiles::kStepBytes);

    const int tile_m = blockIdx.y * BM, tile_n = blockIdx.x * BN;
    const int warpgroup = threadIdx.x / kWarpgroupThreads;
    if (threadIdx.x == 0) {
        mbarrier_init(loaded, 1);
        fence_barrier_init();
    }
    __syncthreads();

    float acc[Tiles::kMmasM][BN / 2];
#pragma unroll
    for (int mm = 0; mm < Tiles::kMmasM; ++mm)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[mm][i] = 0.0f;

    unsigned parity = 0;
    for (int k0 = 0; k0 < K; k0 += Tiles::kBK) {
        if (threadIdx.x == 0) {
            mbarrier_arrive_expect_bytes(loaded, Tiles::kStepBytes);
            tma_load(a_tile, &a_map, loaded, k0, tile_m);
#pragma unroll
            for (int c = 0; c < Tiles::kChunks; ++c)
                tma_load(b_tile + c * Tiles::kBK * Tiles::kChunkCols, &b_map, loaded, tile_n + Tiles::kChunkCols * c,
                         k0);
        }
        mbarrier_wait(loaded, parity);
        parity ^= 1;

#pragma unroll
        for (int mm = 0; mm < Tiles::kMmasM; ++mm) hold_registers(acc[mm]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Tiles::kBK / 16; ++kk) {
            // 16 K elements are 32 bytes along A's swizzled rows, and 16 rows (2 atoms) down B's chunks.
            const unsigned long long b = wgmma_descriptor(b_tile + kk * 16 * 64, Tiles::kChunkBytes, kSwizzleAtomBytes);
#pragma unroll
            for (int mm = 0; mm < Tiles::kMmasM; ++mm) {
                const T* a_slab = a_tile + (warpgroup * Tiles::kRows + mm * 64) * Tiles::kBK + kk * 16;
                Wgmma<T, BN>::mma(acc[mm], wgmma_descriptor(a_slab, 16, kSwizzleAtomBytes), b);
            }
        }
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int mm = 0; mm < Tiles::kMmasM; ++mm) hold_registers(acc[mm]);
        __syncthreads();  // every warpgroup has read the tiles before thread 0 asks the TMA to overwrite them
    }

    const FragmentPosition at(threadIdx.x % kWarpgroupThreads);
#pragma unroll
    for (int mm = 0; mm < Tiles::kMmasM; ++mm) {
        const int row = tile_m + warpgroup * Tiles::kRows + mm * 64 + at.row;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int col = tile_n + 8 * j + at.col;
            store_epilogue2(C + row * ldc + col, acc[mm][4 * j], acc[mm][4 * j + 1], alpha, beta);
            store_epilogue2(C + (row + 8) * ldc + col, acc[mm][4 * j + 2], acc[mm][4 * j + 3], alpha, beta);
        }
    }
}
