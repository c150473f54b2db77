// Warp-specialised wgmma GEMM: one warpgroup loads, two compute, through a ring of shared-memory stages guarded by
// mbarriers. The later steps of the Hopper ladder.
// Warpgroup 0 gives most of its registers away (setmaxnreg) and one of its threads runs the TMA: for each K step it
// waits until a stage is empty, arms the stage's "full" barrier with the step's bytes and copies a 128 x 64 tile of A
// and a 64 x 256 tile of B into it. Warpgroups 1 and 2 take the registers (each holds a 64 x 256 FP32 accumulator:
// 128 per thread), wait until a stage is full, issue four m64n256k16 wgmmas on their half of the A tile and all of B,
// and keep those in flight while they hand the previous stage back on its "empty" barrier. Waits are mbarrier parity
// waits: a thread tracks the phase of each slot it passes, with no arrival tokens to keep.
// The block walks tiles work = blockIdx / CLUSTER_M, + gridDim / CLUSTER_M, ...: one tile with the grid one block
// per tile, several with a persistent grid (as many blocks as the GPU holds at once), where the loader starts on
// the next tile while the compute warpgroups write this one out.
// STAGES      slots in the ring (48 KB each).
// CLUSTER_M   blocks per cluster, on tiles stacked in M that share their tile of B: each block copies 1 / CLUSTER_M
//             of it and the TMA multicasts it into every block of the cluster; a slot is empty once the compute
//             warpgroups of every block have released it.
// FEATURES
//   kGroupedOrder  tiles are walked down a group of 8 cluster rows before moving right, so the blocks running at
//                  once share rows of A and columns of B in L2, instead of sweeping whole rows of C.
//   kTmaStore      the epilogue writes C through shared memory, 64 x 32 FP32 (one swizzled 128-byte row per row of
//                  C) at a time in two alternating buffers per warpgroup, each sent by one TMA store.
// Catalogue (BM x BN x BK = 128 x 256 x 64; 384 threads):
//   <T, 2, 1, 0>                          two slots                                  wgmma_specialized
//   <T, 4, 1, 0>                          four slots                                 wgmma_pipelined
//   <T, 4, 1, 0>, persistent grid                                                    wgmma_persistent
//   <T, 4, 2, 0>, persistent grid         2-block clusters, B multicast              wgmma_cluster
//   <T, 4, 2, kGroupedOrder | kTmaStore>, persistent grid                             wgmma_grouped_tma_store
// Every instantiation takes the descriptor of C; only kTmaStore reads it. The launch takes threads, tile, cluster,
// shared memory and TMA boxes from gemm_wgmma_specialized_geometry.
// Shapes: M a multiple of 128 * CLUSTER_M, N of 256, K of 64; row strides multiples of 8 elements (the TMA's 16-byte
// stride rule). Needs sm_90a (compute capability 9.0 exactly).
// Ladder: builds on wgmma_tma_wide.
#include "common.cuh"
#include "hopper.cuh"

constexpr unsigned kGroupedOrder = 1, kTmaStore = 2;

template <typename T, int STAGES, unsigned FEATURES>
struct RingLayout {
    static constexpr int kBM = 128, kBN = 256, kBK = 64;
    static constexpr int kConsumers = 2;
    static constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;
    static constexpr int kChunkCols = 64;  // B's tile is copied in chunks of 64 columns: one 128-byte swizzle row
    static constexpr int kChunks = kBN / kChunkCols;
    static constexpr int kABytes = kBM * kBK * static_cast<int>(sizeof(T));
    static constexpr int kChunkElements = kBK * kChunkCols;
    static constexpr int kChunkBytes = kChunkElements * static_cast<int>(sizeof(T));
    static constexpr int kStageBytes = kABytes + kChunks * kChunkBytes;
    static constexpr int kStoreCols = kSwizzleBytes / 4;  // FP32 columns per TMA store: one swizzled row
    static constexpr int kStoreRows = 64;  // a compute warpgroup's rows of C
    static constexpr int kStoreElements = kStoreRows * kStoreCols;
    static constexpr int kStoreBytes = (FEATURES & kTmaStore) ? kConsumers * 2 * kStoreElements * 4 : 0;
    static constexpr int kBarrierOffset = STAGES * kStageBytes + kStoreBytes;
    static constexpr int kSharedBytes = kBarrierOffset + 2 * STAGES * 8;  // + a full and an empty barrier a slot
    // Registers per thread after setmaxnreg: the loader's 128 threads keep few, the 256 compute threads the rest of
    // the 64K register file (128 x 40 + 256 x 232 = 64,512).
    static constexpr int kLoaderRegisters = 40, kComputeRegisters = 232;
    static_assert(sizeof(T) == 2, "wgmma here takes FP16 or BF16 inputs: 64 of them fill a 128-byte swizzle row");
    static_assert(kStageBytes % kSwizzleAtomBytes == 0 && kABytes % kSwizzleAtomBytes == 0,
                  "every tile starts on a 1024-byte swizzle atom");
    static_assert(kSharedBytes <= 227 * 1024, "an sm_90 block has at most 227 KB of shared memory");
    static_assert(kLoaderRegisters * kWarpgroupThreads + kComputeRegisters * kConsumers * kWarpgroupThreads <= 65536,
                  "the register file holds 64K registers");
};

// One stage: A's tile in one box, B's in kChunks boxes of kChunkCols columns; C leaves, with kTmaStore, in
// kStoreRows x kStoreCols boxes (every instantiation takes C's descriptor).
template <typename T, int STAGES, int CLUSTER_M, unsigned FEATURES>
__device__ constexpr LaunchGeometry gemm_wgmma_specialized_geometry = {
    {RingLayout<T, STAGES, FEATURES>::kThreads, 1},
    {RingLayout<T, STAGES, FEATURES>::kBM, RingLayout<T, STAGES, FEATURES>::kBN},
    {CLUSTER_M, 1, 1},
    RingLayout<T, STAGES, FEATURES>::kSharedBytes,
    STAGES,
    {{RingLayout<T, STAGES, FEATURES>::kBM, RingLayout<T, STAGES, FEATURES>::kBK, kSwizzleBytes},
     {RingLayout<T, STAGES, FEATURES>::kBK, RingLayout<T, STAGES, FEATURES>::kChunkCols, kSwizzleBytes},
     {RingLayout<T, STAGES, FEATURES>::kStoreRows, RingLayout<T, STAGES, FEATURES>::kStoreCols, kSwizzleBytes}}};

struct TileOfWork {
    int cluster_row;  // in units of CLUSTER_M tiles of 128 rows
    int col;  // in tiles of 256 columns
};

template <unsigned FEATURES>
__device__ __forceinline__ TileOfWork tile_of(int work, int cluster_rows, int tiles_n) {
    if constexpr ((FEATURES & kGroupedOrder) != 0) {
        constexpr int kGroupRows = 8;
        const int per_group = kGroupRows * tiles_n;
        const int first = work / per_group * kGroupRows;
        const int rows = min(cluster_rows - first, kGroupRows);
        const int in_group = work % per_group;
        return {first + in_group % rows, in_group / rows};
    } else {
        return {work / tiles_n, work % tiles_n};
    }
}

// Element offset of (row, col) in a 64 x 32 FP32 buffer laid out as the TMA's 128-byte swizzle expects it.
__device__ __forceinline__ int swizzled_store_offset(int row, int col) {
    return row * 32 + (((col / 4) ^ (row % 8)) * 4) + col % 4;
}

template <typename T, int STAGES, int CLUSTER_M, unsigned FEATURES>
__global__ void __launch_bounds__(RingLayout<T, STAGES, FEATURES>::kThreads, 1) __cluster_dims__(CLUSTER_M, 1, 1)
    gemm_wgmma_specialized(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta,
                           float* C, int ldc, const __grid_constant__ TensorMap a_map,
                           const __grid_constant__ TensorMap b_map, const __grid_constant__ TensorMap c_map) {
    using L = RingLayout<T, STAGES, FEATURES>;
    static_assert((FEATURES & ~(kGroupedOrder | kTmaStore)) == 0, "unknown feature bit");
    static_assert(L::kChunks % CLUSTER_M == 0, "the blocks of a cluster split B's column chunks evenly");
    constexpr int kBM = L::kBM, kBN = L::kBN, kBK = L::kBK;
    constexpr LaunchGeometry kStated = gemm_wgmma_specialized_geometry<T, STAGES, CLUSTER_M, FEATURES>;
    static_assert(is_pair(kStated.block_threads, L::kThreads, 1), "block_threads: not this kernel's warpgroups");
    static_assert(is_pair(kStated.block_tile, kBM, kBN), "block_tile: not the tile this kernel computes");
    static_assert(is_cluster(kStated, CLUSTER_M, 1, 1), "cluster: not this kernel's __cluster_dims__");
    static_assert(kStated.shared_memory == L::kSharedBytes, "shared_memory: not what this kernel's ring takes");
    static_assert(kStated.stages == STAGES, "stages: not this kernel's slots");
    static_assert(is_box(kStated.tma[0], kBM, kBK, kSwizzleBytes) &&
                      is_box(kStated.tma[1], kBK, L::kChunkCols, kSwizzleBytes) &&
                      is_box(kStated.tma[2], L::kStoreRows, L::kStoreCols, kSwizzleBytes),
                  "tma: not the boxes this kernel copies (A's tile, B's column chunks, C's store boxes)");

    extern __shared__ __align__(1024) unsigned char shared[];
    if (threadIdx.x == 0 && (dynamic_shared_bytes() != L::kSharedBytes || shared_address(shared) % 1024)) {
        __trap();  // the launch's shared memory or the alignment the swizzle needs is wrong: fail, never compute
    }
    auto* full = reinterpret_cast<unsigned long long*>(shared + L::kBarrierOffset);
    auto* empty = full + STAGES;
    const unsigned rank = CLUSTER_M > 1 ? cluster_rank() : 0;
    const int warpgroup = threadIdx.x / kWarpgroupThreads;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&full[s], 1);  // the loader's arrival, plus the stage's bytes
            mbarrier_init(&empty[s], L::kConsumers * CLUSTER_M);  // every compute warpgroup of the cluster
        }
        fence_barrier_init();
    }
    if constexpr (CLUSTER_M > 1) {
        cluster_sync();  // the other blocks' barriers exist before anything multicasts or arrives on them
    } else {
        __syncthreads();
    }

    const int tiles_n = N / kBN, cluster_rows = M / (kBM * CLUSTER_M);
    const int work_count = cluster_rows * tiles_n, k_steps = K / kBK;
    const int block = blockIdx.y * gridDim.x + blockIdx.x;
    const int first_work = block / CLUSTER_M, work_stride = gridDim.x * gridDim.y / CLUSTER_M;

    if (warpgroup == 0) {
        release_registers<L::kLoaderRegisters>();
        if (threadIdx.x == 0) {
            int stage = 0;
            unsigned phase = 0;
            for (int work = first_work; work < work_count; work += work_stride) {
                const TileOfWork tile = tile_of<FEATURES>(work, cluster_rows, tiles_n);
                const int m0 = (tile.cluster_row * CLUSTER_M + rank) * kBM, n0 = tile.col * kBN;
                for (int k = 0; k < k_steps; ++k) {
                    mbarrier_wait(&empty[stage], phase ^ 1);
                    mbarrier_arrive_expect_bytes(&full[stage], L::kStageBytes);  // this block's copies and the others'
                    unsigned char* slot = shared + stage * L::kStageBytes;
                    T* b_tile = reinterpret_cast<T*>(slot + L::kABytes);
                    tma_load(slot, &a_map, &full[stage], k * kBK, m0);
                    if constexpr (CLUSTER_M == 1) {
#pragma unroll
                        for (int c = 0; c < L::kChunks; ++c)
                            tma_load(b_tile + c * L::kChunkElements, &b_map, &full[stage], n0 + 64 * c, k * kBK);
                    } else {
                        constexpr int kOwn = L::kChunks / CLUSTER_M;
#pragma unroll
                        for (int c = rank * kOwn; c < (rank + 1) * kOwn; ++c)
                            tma_load_multicast(b_tile + c * L::kChunkElements, &b_map, &full[stage], n0 + 64 * c,
                                               k * kBK, static_cast<unsigned short>((1u << CLUSTER_M) - 1));
                    }
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        claim_registers<L::kComputeRegisters>();
        const int consumer = warpgroup - 1;
        const int thread = threadIdx.x % kWarpgroupThreads;
        const FragmentPosition at(thread);
        // One thread of the warpgroup hands a slot back, after the warpgroup's wgmmas on it have completed.
        auto release = [&](int slot) {
            if (thread != 0) return;
            if constexpr (CLUSTER_M == 1) {
                mbarrier_arrive(&empty[slot]);
            } else {
#pragma unroll
                for (int r = 0; r < CLUSTER_M; ++r) mbarrier_arrive_cluster(&empty[slot], r);
            }
        };
        int stage = 0, store_buffer = 0;
        unsigned phase = 0;
        float acc[kBN / 2];
        for (int work = first_work; work < work_count; work += work_stride) {
            const TileOfWork tile = tile_of<FEATURES>(work, cluster_rows, tiles_n);
            const int m0 = (tile.cluster_row * CLUSTER_M + rank) * kBM + consumer * 64, n0 = tile.col * kBN;
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
            int previous = -1;
            for (int k = 0; k < k_steps; ++k) {
                mbarrier_wait(&full[stage], phase);
                const unsigned char* slot = shared + stage * L::kStageBytes;
                const T* a_slab = reinterpret_cast<const T*>(slot) + consumer * 64 * kBK;
                const T* b_tile = reinterpret_cast<const T*>(slot + L::kABytes);
                hold_registers(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kBK / 16; ++kk) {
                    // 16 K elements are 32 bytes along A's swizzled rows, and 16 rows (2 atoms) down B's chunks.
                    Wgmma<T, kBN>::mma(acc, wgmma_descriptor(a_slab + kk * 16, 16, kSwizzleAtomBytes),
                                       wgmma_descriptor(b_tile + kk * 16 * 64, L::kChunkBytes, kSwizzleAtomBytes));
                }
                wgmma_commit();
                wgmma_wait<1>();  // this step's wgmmas may still run; the previous step's have completed
                hold_registers(acc);
                if (previous >= 0) release(previous);
                previous = stage;
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            wgmma_wait<0>();
            hold_registers(acc);
            if (previous >= 0) release(previous);

            if constexpr ((FEATURES & kTmaStore) == 0) {
#pragma unroll
                for (int j = 0; j < kBN / 8; ++j) {
                    float* c = C + (m0 + at.row) * ldc + n0 + 8 * j + at.col;
                    store_epilogue2(c, acc[4 * j], acc[4 * j + 1], alpha, beta);
                    store_epilogue2(c + 8 * ldc, acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
                }
            } else {
                float* buffers = reinterpret_cast<float*>(shared + STAGES * L::kStageBytes) +
                                 consumer * 2 * L::kStoreElements;
#pragma unroll
                for (int q = 0; q < kBN / L::kStoreCols; ++q) {
                    float* buffer = buffers + store_buffer * L::kStoreElements;
                    if (thread == 0) tma_store_wait_read<1>();  // the store sent from this buffer last time has read it
                    named_barrier<kWarpgroupThreads>(1 + consumer);
#pragma unroll
                    for (int jj = 0; jj < L::kStoreCols / 8; ++jj) {
                        const int j = q * (L::kStoreCols / 8) + jj, col = 8 * jj + at.col;
                        float2 top = make_float2(alpha * acc[4 * j], alpha * acc[4 * j + 1]);
                        float2 bottom = make_float2(alpha * acc[4 * j + 2], alpha * acc[4 * j + 3]);
                        if (beta != 0.0f) {
                            const float* c = C + (m0 + at.row) * ldc + n0 + q * L::kStoreCols + col;
                            top.x += beta * c[0];
                            top.y += beta * c[1];
                            bottom.x += beta * c[8 * ldc];
                            bottom.y += beta * c[8 * ldc + 1];
                        }
                        *reinterpret_cast<float2*>(buffer + swizzled_store_offset(at.row, col)) = top;
                        *reinterpret_cast<float2*>(buffer + swizzled_store_offset(at.row + 8, col)) = bottom;
                    }
                    fence_shared_for_tma();
                    named_barrier<kWarpgroupThreads>(1 + consumer);
                    if (thread == 0) tma_store(&c_map, buffer, n0 + q * L::kStoreCols, m0);
                    store_buffer ^= 1;
                }
            }
        }
        if constexpr ((FEATURES & kTmaStore) != 0) {
            if (thread == 0) tma_store_wait_all();  // shared memory stays until the stores have read it
        }
    }
    if constexpr (CLUSTER_M > 1) {
        __syncwarp();  // the loader's warp meets its one busy lane again: the cluster barrier is warp-aligned
        cluster_sync();  // no block leaves while another may still arrive on its barriers
    }
}
