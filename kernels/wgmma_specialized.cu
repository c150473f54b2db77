// Warp-specialised wgmma GEMM: one warpgroup loads, two compute, through a ring of shared-memory stages guarded by
// mbarriers. The later steps of the Hopper ladder.
// Warpgroup 0 gives most of its registers away (setmaxnreg) and one of its threads runs the TMA: for each K step it
// waits until a stage is empty, arms the stage's "full" barrier with the step's bytes and copies a BM x 64 tile of A
// and a 64 x 256 tile of B into it. Warpgroups 1 and 2 take the registers (each holds a 64 x 256 FP32 accumulator:
// 128 per thread), wait until a stage is full, issue four m64n256k16 wgmmas on 64 rows of the A tile and all of B,
// and keep those in flight while they hand the previous stage back on its "empty" barrier. Waits are mbarrier parity
// waits: a thread tracks the phase of each slot it passes, with no arrival tokens to keep.
// The cluster walks tiles work = its index in the grid, + the grid's clusters, ...: one tile with the grid one block
// per tile, several with a persistent grid (as many blocks as the GPU holds at once), where the loader starts on
// the next tile while the compute warpgroups write this one out.
// STAGES      slots in the ring (48 KB each; 40 KB with kPingPong).
// CLUSTER_M   blocks of a cluster on tiles stacked in M, which share their tile of B: each block copies 1 / CLUSTER_M
//             of it and the TMA multicasts it into the others.
// CLUSTER_N   blocks of a cluster on tiles side by side in N, which share their tile of A likewise (each copies
//             BM / CLUSTER_N of its rows). A cluster of CLUSTER_M x CLUSTER_N blocks reads A and B from L2 once for
//             its CLUSTER_M x CLUSTER_N tiles. A slot is empty once the compute warpgroups of every block that
//             writes into it (the block itself and those in its cluster row and column) have released it there.
// FEATURES
//   kGroupedOrder  tiles are walked down a group of GROUP_ROWS cluster rows (8 unless given, after CLUSTER_N)
//                  before moving right, so the blocks running at once share rows of A and columns of B in L2,
//                  instead of sweeping whole rows of C.
//   kTmaStore      the epilogue writes C through shared memory, 64 x 32 FP32 (one swizzled 128-byte row per row of
//                  C) at a time in two alternating buffers per warpgroup, each sent by one TMA store.
//   kPingPong      the compute warpgroups stop sharing a 128 x 256 tile (BM = 64): each takes every other 64 x 256
//                  tile of the block whole, and they take turns, ordered by mbarriers: one issues its tile's
//                  wgmmas while the other drains and writes its previous one, so the tensor cores do not wait out
//                  an epilogue. Their epilogues take turns too and share one pair of store buffers (16 KB), which
//                  makes room for a fifth 40 KB stage. The price: a K step now brings 40 KB per 64 x 256 tile
//                  instead of 48 KB per 128 x 256, 1.67 times the bytes of A and B per FLOP into shared memory
//                  (1.5 times from L2 with B multicast over 2 blocks); whether the hidden epilogue outweighs that is
//                  for a measurement to tell.
//   kStreamK       where the tiles do not fill whole rounds of the grid's clusters, the last full round and the
//                  tiles left over are shared out as one equal run of K steps a cluster (PieceSchedule), so that no
//                  cluster idles through a last round most others skip. A tile split between two runs is joined in
//                  C: its second part (with beta's share) is stored and a flag raised; its first part, ending the
//                  run of the cluster above, waits for the flag and adds itself by TMA add-reductions. Needs
//                  kTmaStore; not with kPingPong. The price: a split tile is written twice.
//   kDescriptorOffsets  the compute warpgroups build the wgmma descriptors of stage 0's tiles once, before the K
//                  loop, and add a stage's and a K slice's offset to their start address, instead of building each
//                  from its pointer: 64 instructions a K step a warp against 87 (nvcc 13, sm_90a), the same
//                  wgmmas.
// Catalogue (BN x BK = 256 x 64; 384 threads):
//   <T, 2, 1, 0>                          BM 128, two slots                          wgmma_specialized
//   <T, 4, 1, 0>                          BM 128, four slots                         wgmma_pipelined
//   <T, 4, 1, 0>, persistent grid                                                    wgmma_persistent
//   <T, 4, 2, 0>, persistent grid         2-block clusters, B multicast              wgmma_cluster
//   <T, 4, 2, kGroupedOrder | kTmaStore>, persistent grid                             wgmma_grouped_tma_store
//   <T, 5, 2, kGroupedOrder | kTmaStore | kPingPong>, persistent grid; BM 64         wgmma_pingpong
//   <T, 4, 2, kGroupedOrder | kTmaStore | kDescriptorOffsets>, persistent grid        wgmma_lean_loop
// Tried in lab/, not in the catalogue (their records say why):
//   <T, 4, 2, kGroupedOrder | kTmaStore, 2>, persistent grid; 2 x 2 clusters         wgmma_cluster_2x2
//   <T, 4, 2, kGroupedOrder | kTmaStore | kStreamK>, persistent grid                  wgmma_stream_k
// (CLUSTER_N comes last, 1 unless given, so that the entries written before it still name their kernels.)
// Every instantiation takes the descriptor of C; only kTmaStore reads it. The launch takes threads, tile, cluster
// (CLUSTER_M, CLUSTER_N, 1), shared memory and TMA boxes from gemm_wgmma_specialized_geometry; a persistent grid is
// CLUSTER_N blocks high, so that a cluster's blocks differ in blockIdx.y by its column alone.
// Shapes: M a multiple of BM * CLUSTER_M (128 * CLUSTER_M; 64 * CLUSTER_M with kPingPong), N of 256 * CLUSTER_N, K of
// 64; row strides multiples of 8 elements (the TMA's 16-byte stride rule). Needs sm_90a (compute capability 9.0
// exactly).
// Ladder: builds on wgmma_tma_wide; wgmma_pingpong, wgmma_cluster_2x2, wgmma_stream_k and wgmma_lean_loop on
// wgmma_grouped_tma_store.
#include "common.cuh"
#include "hopper.cuh"

constexpr unsigned kGroupedOrder = 1, kTmaStore = 2, kPingPong = 4, kStreamK = 8, kDescriptorOffsets = 16;

template <typename T, int STAGES, unsigned FEATURES>
struct RingLayout {
    static constexpr bool kTakesTurns = (FEATURES & kPingPong) != 0;
    // A compute warpgroup's tile is 64 x 256 either way: side by side in one 128-row block tile, or with kPingPong
    // one 64-row tile each, so that a stage holds the A rows of the one warpgroup that reads it.
    static constexpr int kBM = kTakesTurns ? 64 : 128, kBN = 256, kBK = 64;
    static constexpr int kConsumers = 2;
    static constexpr int kSlotReaders = kTakesTurns ? 1 : kConsumers;  // compute warpgroups of a block per slot
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
    // Two store buffers per compute warpgroup; with kPingPong one pair for both, since their epilogues take turns:
    // the 16 KB saved holds a fifth stage.
    static constexpr int kStoreBuffers = (FEATURES & kTmaStore) ? (kTakesTurns ? 2 : kConsumers * 2) : 0;
    static constexpr int kStoreBytes = kStoreBuffers * kStoreElements * 4;
    static constexpr int kBarrierOffset = STAGES * kStageBytes + kStoreBytes;
    // With kPingPong, each compute warpgroup has a barrier for its turn at the wgmmas and one for its turn at the
    // epilogue.
    static constexpr int kTurnBarriers = kTakesTurns ? 2 * kConsumers : 0;
    static constexpr int kSharedBytes = kBarrierOffset + (2 * STAGES + kTurnBarriers) * 8;  // + full, empty a slot
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

// One stage: A's tile in CLUSTER_N boxes of BM / CLUSTER_N rows (a block copies one), B's in kChunks boxes of
// kChunkCols columns; C leaves, with kTmaStore, in kStoreRows x kStoreCols boxes (every instantiation takes C's
// descriptor).
template <typename T, int STAGES, int CLUSTER_M, unsigned FEATURES, int CLUSTER_N = 1, int GROUP_ROWS = 8>
__device__ constexpr LaunchGeometry gemm_wgmma_specialized_geometry = {
    {RingLayout<T, STAGES, FEATURES>::kThreads, 1},
    {RingLayout<T, STAGES, FEATURES>::kBM, RingLayout<T, STAGES, FEATURES>::kBN},
    {CLUSTER_M, CLUSTER_N, 1},
    RingLayout<T, STAGES, FEATURES>::kSharedBytes,
    STAGES,
    {{RingLayout<T, STAGES, FEATURES>::kBM / CLUSTER_N, RingLayout<T, STAGES, FEATURES>::kBK, kSwizzleBytes},
     {RingLayout<T, STAGES, FEATURES>::kBK, RingLayout<T, STAGES, FEATURES>::kChunkCols, kSwizzleBytes},
     {RingLayout<T, STAGES, FEATURES>::kStoreRows, RingLayout<T, STAGES, FEATURES>::kStoreCols, kSwizzleBytes}}};

struct TileOfWork {
    int cluster_row;  // in units of CLUSTER_M tiles of BM rows
    int cluster_col;  // in units of CLUSTER_N tiles of 256 columns
};

template <unsigned FEATURES, int GROUP_ROWS>
__device__ __forceinline__ TileOfWork tile_of(int work, int cluster_rows, int cluster_cols) {
    if constexpr ((FEATURES & kGroupedOrder) != 0) {
        const int per_group = GROUP_ROWS * cluster_cols;
        const int first = work / per_group * GROUP_ROWS;
        const int rows = min(cluster_rows - first, GROUP_ROWS);
        const int in_group = work % per_group;
        return {first + in_group % rows, in_group / rows};
    } else {
        return {work / cluster_cols, work % cluster_cols};
    }
}

// A cluster's share of the work: a tile whole (K steps 0 to k_steps), or with kStreamK a run of its K steps.
struct PieceOfWork {
    int work;  // the tile, in tile_of's order
    int k_begin, k_end;  // its K steps this piece computes
};

// The pieces a cluster takes, in order: whole tiles work, work + stride, ... below whole_tiles; then, with
// STREAM_K, its equal share of the K steps of the tiles from whole_tiles on, as one run that may start and end
// inside a tile. Each share holds k_steps or more, so a tile is split between two clusters at most: the first
// part ends one cluster's run and the second starts another's. Walked as for (piece = first(work); more(piece);
// advance(piece)), which without STREAM_K is the loop over whole tiles it replaces.
template <bool STREAM_K>
struct PieceSchedule {
    int stride, whole_tiles, k_steps;
    long long at = 0, end = 0;  // STREAM_K: this cluster's run of K steps, counted from whole_tiles' first

    __device__ PieceOfWork first(int work) {
        if (!STREAM_K || work < whole_tiles) return {work, 0, k_steps};
        return next_of_run();
    }
    __device__ bool more(const PieceOfWork& piece) const {
        return STREAM_K ? piece.work >= 0 : piece.work < whole_tiles;
    }
    __device__ void advance(PieceOfWork& piece) {
        if (!STREAM_K || piece.work < whole_tiles) {
            piece.work += stride;
            if (!STREAM_K || piece.work < whole_tiles) return;
        }
        piece = next_of_run();
    }

private:
    __device__ PieceOfWork next_of_run() {
        if (at >= end) return {-1, 0, 0};  // no piece: the walk ends
        const int k_begin = static_cast<int>(at % k_steps);
        const int k_end = static_cast<int>(min(static_cast<long long>(k_steps), k_begin + (end - at)));
        const PieceOfWork piece = {whole_tiles + static_cast<int>(at / k_steps), k_begin, k_end};
        at += k_end - k_begin;
        return piece;
    }
};

// kStreamK: one flag per block and compute warpgroup of a launch (sgemm launches at most one block an SM). They
// belong to the program: two launches of one program at once, on two streams, would share them.
constexpr int kMaxSplitFlags = 4096;
template <typename T, int STAGES, int CLUSTER_M, unsigned FEATURES, int CLUSTER_N, int GROUP_ROWS>
__device__ unsigned split_tile_flags[kMaxSplitFlags];

// Element offset of (row, col) in a 64 x 32 FP32 buffer laid out as the TMA's 128-byte swizzle expects it.
__device__ __forceinline__ int swizzled_store_offset(int row, int col) {
    return row * 32 + (((col / 4) ^ (row % 8)) * 4) + col % 4;
}

template <typename T, int STAGES, int CLUSTER_M, unsigned FEATURES, int CLUSTER_N = 1, int GROUP_ROWS = 8>
__global__ void __launch_bounds__(RingLayout<T, STAGES, FEATURES>::kThreads, 1) __cluster_dims__(CLUSTER_M, CLUSTER_N, 1)
    gemm_wgmma_specialized(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta,
                           float* C, int ldc, const __grid_constant__ TensorMap a_map,
                           const __grid_constant__ TensorMap b_map, const __grid_constant__ TensorMap c_map) {
    using L = RingLayout<T, STAGES, FEATURES>;
    static_assert((FEATURES & ~(kGroupedOrder | kTmaStore | kPingPong | kStreamK | kDescriptorOffsets)) == 0,
                  "unknown feature bit");
    constexpr bool kStreamed = (FEATURES & kStreamK) != 0;
    static_assert(!kStreamed || ((FEATURES & kTmaStore) != 0 && (FEATURES & kPingPong) == 0),
                  "kStreamK adds split tiles' parts by TMA reductions (kTmaStore), and takes tiles whole per cluster, "
                  "not in turns (kPingPong)");
    static_assert(L::kChunks % CLUSTER_M == 0, "the blocks of a cluster column split B's column chunks evenly");
    constexpr int kBM = L::kBM, kBN = L::kBN, kBK = L::kBK;
    // A block copies kOwnARows of the A tile its cluster row shares, into the same place in each of their slots.
    constexpr int kOwnARows = kBM / CLUSTER_N, kOwnABytes = L::kABytes / CLUSTER_N;
    static_assert(kBM % CLUSTER_N == 0 && kOwnABytes % kSwizzleAtomBytes == 0,
                  "the blocks of a cluster row split A's rows into whole 1024-byte swizzle atoms");
    constexpr LaunchGeometry kStated = gemm_wgmma_specialized_geometry<T, STAGES, CLUSTER_M, FEATURES, CLUSTER_N,
                                                                             GROUP_ROWS>;
    static_assert(is_pair(kStated.block_threads, L::kThreads, 1), "block_threads: not this kernel's warpgroups");
    static_assert(is_pair(kStated.block_tile, kBM, kBN), "block_tile: not the tile this kernel computes");
    static_assert(is_cluster(kStated, CLUSTER_M, CLUSTER_N, 1), "cluster: not this kernel's __cluster_dims__");
    static_assert(kStated.shared_memory == L::kSharedBytes, "shared_memory: not what this kernel's ring takes");
    static_assert(kStated.stages == STAGES, "stages: not this kernel's slots");
    static_assert(is_box(kStated.tma[0], kOwnARows, kBK, kSwizzleBytes) &&
                      is_box(kStated.tma[1], kBK, L::kChunkCols, kSwizzleBytes) &&
                      is_box(kStated.tma[2], L::kStoreRows, L::kStoreCols, kSwizzleBytes),
                  "tma: not the boxes this kernel copies (a block's share of A's tile, B's column chunks, C's store "
                  "boxes)");

    extern __shared__ __align__(1024) unsigned char shared[];
    if (threadIdx.x == 0 && (dynamic_shared_bytes() != L::kSharedBytes || shared_address(shared) % 1024)) {
        __trap();  // the launch's shared memory or the alignment the swizzle needs is wrong: fail, never compute
    }
    auto* full = reinterpret_cast<unsigned long long*>(shared + L::kBarrierOffset);
    auto* empty = full + STAGES;
    auto* mma_turn = empty + STAGES;  // kPingPong: completes a phase each time a compute warpgroup may issue wgmmas
    auto* epilogue_turn = mma_turn + L::kConsumers;  // and each time it may write C through the store buffers
    constexpr int kClusterBlocks = CLUSTER_M * CLUSTER_N;
    const unsigned rank = kClusterBlocks > 1 ? cluster_rank() : 0;
    // The block's place in its cluster: the rank counts along M (x) first.
    const unsigned cluster_m = CLUSTER_N == 1 ? rank : rank % CLUSTER_M;
    const unsigned cluster_n = CLUSTER_N == 1 ? 0 : rank / CLUSTER_M;
    const int warpgroup = threadIdx.x / kWarpgroupThreads;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&full[s], 1);  // the loader's arrival, plus the stage's bytes
            // The warpgroups that read it in every block that writes into it: the blocks of this block's cluster
            // column (B) and row (A), itself among them once.
            mbarrier_init(&empty[s], L::kSlotReaders * (CLUSTER_M + CLUSTER_N - 1));
        }
        if constexpr (L::kTakesTurns) {
            for (int c = 0; c < L::kConsumers; ++c) {
                mbarrier_init(&mma_turn[c], 1);  // one arrival: thread 0 of the warpgroup whose turn ends
                mbarrier_init(&epilogue_turn[c], 1);
            }
            // Warpgroup 1 has the first turns: each warpgroup then waits for phase j of its barriers before its
            // j-th tile.
            mbarrier_arrive(&mma_turn[0]);
            mbarrier_arrive(&epilogue_turn[0]);
        }
        fence_barrier_init();
    }
    if constexpr (kClusterBlocks > 1) {
        cluster_sync();  // the other blocks' barriers exist before anything multicasts or arrives on them
    } else {
        __syncthreads();
    }

    const int cluster_cols = N / (kBN * CLUSTER_N), cluster_rows = M / (kBM * CLUSTER_M);
    const int work_count = cluster_rows * cluster_cols, k_steps = K / kBK;
    // Clusters are counted along the grid's rows of clusters; a persistent grid is a single one, CLUSTER_N high.
    // The block's place with the grid's rows of clusters laid end to end along x: a cluster's blocks side by side
    // in N share it, and block / CLUSTER_M is the cluster's number.
    const int block = blockIdx.y / CLUSTER_N * gridDim.x + blockIdx.x;
    const int first_work = block / CLUSTER_M, work_stride = gridDim.x * (gridDim.y / CLUSTER_N) / CLUSTER_M;
    // kStreamK: where the tiles do not divide into whole rounds of the grid's clusters, the last full round and the
    // tiles left over are shared out by K steps, so that no cluster idles through a last round most others skip.
    const int left_over = work_count % work_stride, full_rounds = work_count / work_stride;
    const bool streamed = kStreamed && left_over != 0 && full_rounds >= 1;
    const int whole_tiles = streamed ? (full_rounds - 1) * work_stride : work_count;
    const long long shared_steps = static_cast<long long>(work_count - whole_tiles) * k_steps;
    // The runs go to the clusters in reverse, so that a tile's second part (K steps from the split on) starts a run
    // of the cluster below the one whose run its first part ends: the cluster that waits for the other's part (at
    // its run's end, long after that part was written) is the later one, and blocks start in order, so no wait is
    // on a cluster not yet running.
    auto schedule = [&](int stride) {
        PieceSchedule<kStreamed> pieces{stride, whole_tiles, k_steps};
        if constexpr (kStreamed) {
            const int run = work_stride - 1 - first_work;
            pieces.at = shared_steps * run / work_stride;
            pieces.end = shared_steps * (run + 1) / work_stride;
        }
        return pieces;
    };
    // The flag the warpgroup `consumer` of this block's place in cluster `cluster` raises once the second part of a
    // split tile (that cluster's first piece of its run) is in C; the first part's warpgroup, in the cluster above,
    // waits for it at the end of its run, then adds its part to C.
    auto split_flag = [&](int cluster, int consumer) -> unsigned* {
        if constexpr (kStreamed) {  // the flags exist in the programs that use them alone
            return &split_tile_flags<T, STAGES, CLUSTER_M, FEATURES, CLUSTER_N,
                                      GROUP_ROWS>[(cluster * kClusterBlocks + rank) * L::kConsumers + consumer];
        } else {
            return nullptr;
        }
    };
    if constexpr (kStreamed) {
        if (threadIdx.x == 0 && gridDim.x * gridDim.y * L::kConsumers > kMaxSplitFlags) __trap();
    }

    if (warpgroup == 0) {
        release_registers<L::kLoaderRegisters>();
        if (threadIdx.x == 0) {
            int stage = 0;
            unsigned phase = 0;
            // The blocks that take this block's copies: its cluster row shares A's rows, its column B's columns.
            unsigned short row_blocks = 0;
#pragma unroll
            for (int j = 0; j < CLUSTER_N; ++j) row_blocks |= 1u << (cluster_m + CLUSTER_M * j);
            const auto column_blocks = static_cast<unsigned short>(((1u << CLUSTER_M) - 1) << (CLUSTER_M * cluster_n));
            PieceSchedule<kStreamed> pieces = schedule(work_stride);
            for (PieceOfWork piece = pieces.first(first_work); pieces.more(piece); pieces.advance(piece)) {
                const TileOfWork tile = tile_of<FEATURES, GROUP_ROWS>(piece.work, cluster_rows, cluster_cols);
                const int m0 = (tile.cluster_row * CLUSTER_M + cluster_m) * kBM;
                const int n0 = (tile.cluster_col * CLUSTER_N + cluster_n) * kBN;
                for (int k = kStreamed ? piece.k_begin : 0; k < (kStreamed ? piece.k_end : k_steps); ++k) {
                    mbarrier_wait(&empty[stage], phase ^ 1);
                    mbarrier_arrive_expect_bytes(&full[stage], L::kStageBytes);  // this block's copies and the others'
                    unsigned char* slot = shared + stage * L::kStageBytes;
                    T* b_tile = reinterpret_cast<T*>(slot + L::kABytes);
                    if constexpr (CLUSTER_N == 1) {
                        tma_load(slot, &a_map, &full[stage], k * kBK, m0);
                    } else {
                        tma_load_multicast(slot + cluster_n * kOwnABytes, &a_map, &full[stage], k * kBK,
                                           m0 + cluster_n * kOwnARows, row_blocks);
                    }
                    if constexpr (CLUSTER_M == 1) {
#pragma unroll
                        for (int c = 0; c < L::kChunks; ++c)
                            tma_load(b_tile + c * L::kChunkElements, &b_map, &full[stage], n0 + 64 * c, k * kBK);
                    } else {
                        constexpr int kOwn = L::kChunks / CLUSTER_M;
#pragma unroll
                        for (int c = cluster_m * kOwn; c < (cluster_m + 1) * kOwn; ++c)
                            tma_load_multicast(b_tile + c * L::kChunkElements, &b_map, &full[stage], n0 + 64 * c,
                                               k * kBK, column_blocks);
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
        // One thread of the warpgroup hands a slot back, after the warpgroup's wgmmas on it have completed, to every
        // block that writes into it: those of its cluster column (B) and row (A).
        auto release = [&](int slot) {
            if (thread != 0) return;
            if constexpr (kClusterBlocks == 1) {
                mbarrier_arrive(&empty[slot]);
            } else {
#pragma unroll
                for (int j = 0; j < CLUSTER_N; ++j) {
#pragma unroll
                    for (int i = 0; i < CLUSTER_M; ++i) {
                        if (i == static_cast<int>(cluster_m) || j == static_cast<int>(cluster_n))
                            mbarrier_arrive_cluster(&empty[slot], i + CLUSTER_M * j);
                    }
                }
            }
        };
        int stage = 0, store_buffer = 0;
        unsigned phase = 0;
        float acc[kBN / 2];
        // Without kPingPong both warpgroups take every tile of the block, each its 64 rows: they compute together,
        // then both write C while the tensor cores wait for the next tile's first wgmmas. With kPingPong they take
        // the block's tiles in turn (warpgroup 1 the first, 2 the second, ...), each a whole 64-row tile: while one
        // issues its tile's wgmmas, the other drains and writes its last one, so the tensor cores work on through
        // every epilogue. The loader fills the ring in tile order, so a warpgroup steps its ring position over the
        // other's K steps. A turn passes on an mbarrier: the wgmma turn once the warpgroup has issued its tile (it
        // has then seen every slot it read filled, so the other's parity wait for the next fill of such a slot
        // cannot be met by a fill two phases old), the epilogue turn once its stores have read the shared buffers.
        constexpr bool kTurns = L::kTakesTurns;
        const int a_row = kTurns ? 0 : consumer * 64;  // where the warpgroup's rows start in a stage's A tile
        const int other = 1 - consumer;
        unsigned turn = 0;  // kPingPong: the parity of this warpgroup's next phase of mma_turn and epilogue_turn
        auto skip_tile = [](int& at_stage, unsigned& at_phase, int steps) {  // past the other warpgroup's K steps
            at_stage += steps % STAGES;
            at_phase ^= (steps / STAGES) & 1;
            if (at_stage >= STAGES) {
                at_stage -= STAGES;
                at_phase ^= 1;
            }
        };
        if constexpr (kTurns) {
            if (consumer == 1) skip_tile(stage, phase, k_steps);
        }
        // kDescriptorOffsets: the descriptors of stage 0's tiles, built once; a stage's and a 16-wide K slice's add a
        // fixed offset to the start address, in 16-byte units in the descriptor's low 14 bits (every shared address
        // of the block is below 256 KB, so the sum never carries out of them).
        // The warpgroup's number, shuffled from lane 0 (which tells the compiler it is the same in every lane),
        // leaves 3 fewer instructions in the loop than a_row itself.
        const int uniform_a_row =
            (FEATURES & kDescriptorOffsets) && !kTurns ? __shfl_sync(0xffffffffu, consumer, 0) * 64 : a_row;
        const unsigned long long a_first = wgmma_descriptor(reinterpret_cast<const T*>(shared) + uniform_a_row * kBK,
                                                            16, kSwizzleAtomBytes);
        const unsigned long long b_first = wgmma_descriptor(shared + L::kABytes, L::kChunkBytes, kSwizzleAtomBytes);
        PieceSchedule<kStreamed> pieces = schedule((kTurns ? L::kConsumers : 1) * work_stride);
        for (PieceOfWork piece = pieces.first(first_work + (kTurns ? consumer * work_stride : 0)); pieces.more(piece);
             pieces.advance(piece)) {
            const TileOfWork tile = tile_of<FEATURES, GROUP_ROWS>(piece.work, cluster_rows, cluster_cols);
            const int m0 = (tile.cluster_row * CLUSTER_M + cluster_m) * kBM + a_row;
            const int n0 = (tile.cluster_col * CLUSTER_N + cluster_n) * kBN;
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
            if constexpr (kTurns) mbarrier_wait(&mma_turn[consumer], turn);
            int previous = -1;
            for (int k = kStreamed ? piece.k_begin : 0; k < (kStreamed ? piece.k_end : k_steps); ++k) {
                mbarrier_wait(&full[stage], phase);
                const unsigned char* slot = shared + stage * L::kStageBytes;
                const T* a_slab = reinterpret_cast<const T*>(slot) + a_row * kBK;
                const T* b_tile = reinterpret_cast<const T*>(slot + L::kABytes);
                hold_registers(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kBK / 16; ++kk) {
                    // 16 K elements are 32 bytes along A's swizzled rows, and 16 rows (2 atoms) down B's chunks.
                    if constexpr ((FEATURES & kDescriptorOffsets) != 0) {
                        // 32-bit sums: the high word (stride and swizzle) stays as built.
                        const unsigned at_stage = stage * (L::kStageBytes >> 4);
                        constexpr unsigned kASlice = 16 * sizeof(T) >> 4, kBSlice = 16 * 64 * sizeof(T) >> 4;
                        Wgmma<T, kBN>::mma(acc, with_low_word(a_first, at_stage + kk * kASlice),
                                           with_low_word(b_first, at_stage + kk * kBSlice));
                    } else {
                        Wgmma<T, kBN>::mma(acc, wgmma_descriptor(a_slab + kk * 16, 16, kSwizzleAtomBytes),
                                           wgmma_descriptor(b_tile + kk * 16 * 64, L::kChunkBytes,
                                                            kSwizzleAtomBytes));
                    }
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
            if constexpr (kTurns) {
                if (thread == 0) mbarrier_arrive(&mma_turn[other]);  // its wgmmas queue behind this tile's last ones
            }
            wgmma_wait<0>();
            hold_registers(acc);
            if (previous >= 0) release(previous);
            if constexpr (kTurns) mbarrier_wait(&epilogue_turn[consumer], turn);

            if constexpr ((FEATURES & kTmaStore) == 0) {
#pragma unroll
                for (int j = 0; j < kBN / 8; ++j) {
                    float* c = C + (m0 + at.row) * ldc + n0 + 8 * j + at.col;
                    store_epilogue2(c, acc[4 * j], acc[4 * j + 1], alpha, beta);
                    store_epilogue2(c + 8 * ldc, acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
                }
            } else {
                // Two buffers of each warpgroup's own; with kPingPong one pair that the epilogue turn passes on.
                float* buffers = reinterpret_cast<float*>(shared + STAGES * L::kStageBytes) +
                                 (kTurns ? 0 : consumer * 2 * L::kStoreElements);
                // kStreamK: a split tile's first part is added to C, after its second part (with beta's share) is in.
                const bool first_part = kStreamed && piece.k_end < k_steps;
                const bool second_part = kStreamed && piece.k_begin > 0;
                if (first_part && thread == 0) wait_then_lower(split_flag(first_work - 1, consumer));
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
                        if (beta != 0.0f && !first_part) {
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
                    if (thread == 0) {
                        if (first_part) {
                            tma_reduce_add(&c_map, buffer, n0 + q * L::kStoreCols, m0);
                        } else {
                            tma_store(&c_map, buffer, n0 + q * L::kStoreCols, m0);
                        }
                    }
                    store_buffer ^= 1;
                }
                if (second_part && thread == 0) raise_after_stores(split_flag(first_work, consumer));
            }
            if constexpr (kTurns) {
                if (thread == 0) {
                    if constexpr ((FEATURES & kTmaStore) != 0) tma_store_wait_read<0>();  // the other writes them next
                    mbarrier_arrive(&epilogue_turn[other]);
                }
                turn ^= 1;
                skip_tile(stage, phase, k_steps);
            }
        }
        if constexpr ((FEATURES & kTmaStore) != 0) {
            if (thread == 0) tma_store_wait_all();  // shared memory stays until the stores have read it
        }
    }
    if constexpr (kClusterBlocks > 1) {
        __syncwarp();  // the loader's warp meets its one busy lane again: the cluster barrier is warp-aligned
        cluster_sync();  // no block leaves while another may still arrive on its barriers
    }
}
