// Hopper (sm_90a) building blocks in inline PTX, for the wgmma kernels: shared-memory barriers (mbarrier), the tensor
// memory accelerator (TMA: cp.async.bulk.tensor), warpgroup MMA (wgmma) with its shared-memory descriptors,
// register reallocation (setmaxnreg) and thread-block clusters. Nothing here knows a tile size: the kernels do.
//
// Conventions the kernels rely on:
// - Tiles live in shared memory as TMA writes them with 128-byte swizzling: rows of 128 bytes, the 16-byte chunk c
//   of row r stored at chunk c ^ (r % 8), every tile 1024-byte aligned so that the pattern starts at its first row.
// - A (M x K, row-major) is K-major for wgmma: a tile is rows of 64 K elements (128 bytes).
// - B (K x N, row-major) is N-major: a tile is column chunks of 64 N elements (128 bytes), each chunk a run of K
//   rows, so wgmma reads it with the "transposed B" flag set.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// A CUtensorMap as the host's cuTensorMapEncodeTiled writes it: 128 opaque bytes, passed by value as a
// __grid_constant__ parameter so the TMA unit can read it from the kernel's parameter space.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

constexpr int kWarpgroupThreads = 128;
constexpr int kSwizzleBytes = 128;  // the TMA and wgmma swizzle span: one row of a tile
constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;  // 8 rows: the period of the XOR pattern

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// The size of the dynamic shared memory this launch was given: a kernel whose layout needs an exact size checks it.
__device__ __forceinline__ unsigned dynamic_shared_bytes() {
    unsigned bytes;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(bytes));
    return bytes;
}

// --- mbarrier: a phase completes when its expected arrivals have arrived and its expected bytes have landed --------

__device__ __forceinline__ void mbarrier_init(unsigned long long* barrier, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA) and, in a cluster, to the other blocks.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` more to land through TMA before the phase may complete.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(unsigned long long* barrier, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)),
                 "r"(bytes)
                 : "memory");
}

// One arrival on the barrier at the same offset in the shared memory of block `rank` of this cluster (this block's
// own when rank is its own). The release is at the default, CTA scope: the arrival publishes no writes (it says that
// this block's wgmmas have finished reading a slot), and a cluster-scope release (.release.cluster) stalled the
// arriving warpgroup so long that 2-block clusters ran at half the speed of single blocks (H100, 8192^3).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long* barrier, unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(shared_address(barrier)),
        "r"(rank)
        : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned long long* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

// Waits until the phase of parity `parity` has completed. A phase counts as complete while the barrier is in the
// other parity, so on a fresh barrier (phase 0 running) a wait for parity 1 returns at once: a producer's first pass
// over empty slots does not block.
__device__ __forceinline__ void mbarrier_wait(unsigned long long* barrier, unsigned parity) {
    const unsigned address = shared_address(barrier);
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            ".reg .pred complete;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
            "selp.u32 %0, 1, 0, complete;\n"
            "}\n"
            : "=r"(done)
            : "r"(address), "r"(parity)
            : "memory");
    }
}

// --- TMA ------------------------------------------------------------------------------------------------------------

// The box at (inner, outer) elements of a 2-D tensor map into `destination`, its bytes counted on `barrier`.
__device__ __forceinline__ void tma_load(void* destination, const TensorMap* map, unsigned long long* barrier,
                                         int inner, int outer) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];\n" ::"r"(shared_address(destination)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(shared_address(barrier))
        : "memory");
}

// The same box written to the same offset in the shared memory of every block of the cluster in `blocks` (a bit
// per rank), each block's barrier at `barrier`'s offset counting the bytes that land there.
__device__ __forceinline__ void tma_load_multicast(void* destination, const TensorMap* map,
                                                   unsigned long long* barrier, int inner, int outer,
                                                   unsigned short blocks) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(shared_address(destination)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(shared_address(barrier)),
        "h"(blocks)
        : "memory");
}

// Shared memory written by ordinary stores, made visible to the TMA unit that reads it next.
__device__ __forceinline__ void fence_shared_for_tma() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The box in `source` written to (inner, outer) of a 2-D tensor map, as one bulk group.
__device__ __forceinline__ void tma_store(const TensorMap* map, const void* source, int inner, int outer) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
        "cp.async.bulk.commit_group;\n" ::"l"(reinterpret_cast<unsigned long long>(map)),
        "r"(inner), "r"(outer), "r"(shared_address(source))
        : "memory");
}

// The box in `source` added to (inner, outer) of a 2-D tensor map element by element (a reduction in L2, FP32 where
// the map's elements are), as one bulk group.
__device__ __forceinline__ void tma_reduce_add(const TensorMap* map, const void* source, int inner, int outer) {
    asm volatile(
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n"
        "cp.async.bulk.commit_group;\n" ::"l"(reinterpret_cast<unsigned long long>(map)),
        "r"(inner), "r"(outer), "r"(shared_address(source))
        : "memory");
}

// Waits until at most PENDING of this thread's bulk store groups still read shared memory.
template <int PENDING>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}

// Waits until every bulk store group of this thread has completed, writes included.
__device__ __forceinline__ void tma_store_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// A flag in global memory, raised by one block once its TMA stores have landed and lowered by the one block that
// waits for it: a handshake between blocks of one launch, left lowered for the next.
__device__ __forceinline__ void raise_after_stores(unsigned* flag) {
    tma_store_wait_all();
    asm volatile(
        "fence.proxy.async.global;\n"
        "st.release.gpu.global.u32 [%0], 1;\n" ::"l"(flag)
        : "memory");
}

__device__ __forceinline__ void wait_then_lower(unsigned* flag) {
    unsigned raised = 0;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(raised) : "l"(flag) : "memory");
    } while (raised == 0);
    asm volatile(
        "st.relaxed.gpu.global.u32 [%0], 0;\n"
        "fence.proxy.async.global;\n" ::"l"(flag)
        : "memory");  // what the flag guarded is read next by the TMA (the async proxy)
}

// --- Warpgroups, clusters, registers ---------------------------------------------------------------------------------

// A barrier among the THREADS threads that use barrier `id` (1-15; 0 is __syncthreads).
template <int THREADS>
__device__ __forceinline__ void named_barrier(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Every thread of every block of the cluster arrives, then waits for all: shared memory and barriers of the other
// blocks may be used after it (and a block must not exit while another can still reach into its shared memory).
__device__ __forceinline__ void cluster_sync() {
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n"
        "barrier.cluster.wait.acquire.aligned;\n" ::
            : "memory");
}

// Hands registers from the warpgroup that loads to those that compute. Takes effect only with a register cap at
// kernel entry (__launch_bounds__(threads, 1)); ptxas warns (C7508) when it cannot.
template <int REGISTERS>
__device__ __forceinline__ void release_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
template <int REGISTERS>
__device__ __forceinline__ void claim_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}

// --- wgmma --------------------------------------------------------------------------------------------------------

// A shared-memory matrix descriptor for a 128-byte swizzled tile. leading_bytes and stride_bytes are the layout's two
// strides (PTX ISA, "Matrix Descriptor"): for a K-major tile the leading one is unused and the stride one steps 8
// rows; for an MN-major tile the leading one steps from one 64-element column chunk to the next and the stride one
// steps 8 K rows.
__device__ __forceinline__ unsigned long long wgmma_descriptor(const void* tile, unsigned leading_bytes,
                                                               unsigned stride_bytes) {
    constexpr unsigned long long kSwizzle128B = 1ull << 62;
    const unsigned long long start = (shared_address(tile) & 0x3FFFF) >> 4;
    return start | (static_cast<unsigned long long>(leading_bytes >> 4) << 16) |
           (static_cast<unsigned long long>(stride_bytes >> 4) << 32) | kSwizzle128B;
}

// A descriptor whose start address is `offset` 16-byte units on. The sum must stay in the address's 14 bits, below
// the leading byte offset's field: it does while the tile lies below 256 KB of shared memory (every tile of a block
// does).
__device__ __forceinline__ unsigned long long with_low_word(unsigned long long descriptor, unsigned offset) {
    return (descriptor & ~0xFFFFFFFFull) | (static_cast<unsigned>(descriptor) + offset);
}

// The accumulators must not be read or written by ordinary code while a wgmma owns them: this empty asm, which
// claims to change each one, keeps the compiler from moving such code across the fences and waits.
template <int COUNT>
__device__ __forceinline__ void hold_registers(float (&d)[COUNT]) {
#pragma unroll
    for (int i = 0; i < COUNT; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most PENDING of the warpgroup's committed wgmma groups are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

#define SGEMM_F8(d, i)                                                                                         \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define SGEMM_F64(d, i)                                                                                         \
    SGEMM_F8(d, i), SGEMM_F8(d, i + 8), SGEMM_F8(d, i + 16), SGEMM_F8(d, i + 24), SGEMM_F8(d, i + 32),          \
        SGEMM_F8(d, i + 40), SGEMM_F8(d, i + 48), SGEMM_F8(d, i + 56)
#define SGEMM_D64                                                                          \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define SGEMM_D128                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                      \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "             \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "             \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "             \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// d (64 x N, FP32) += A (64 x 16, K-major, from shared memory) * B (16 x N, N-major, from shared memory), issued by
// the whole warpgroup. Thread t holds rows 16 * (t / 32) + (t % 32) / 4 and 8 more, columns 8 j + 2 (t % 4) and the
// next one: d[4j], d[4j + 1] in the first row, d[4j + 2], d[4j + 3] in the second.
template <typename T, int N>
struct Wgmma;

// The trailing immediates: scale A and B by 1 (not negated), A not transposed (K-major), B transposed (N-major).
#define SGEMM_WGMMA(TYPE, PTX_TYPE)                                                                                \
    template <>                                                                                                   \
    struct Wgmma<TYPE, 128> {                                                                                     \
        __device__ __forceinline__ static void mma(float (&d)[64], unsigned long long a, unsigned long long b) {  \
            asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_TYPE "." PTX_TYPE " " SGEMM_D64       \
                         ", %64, %65, 1, 1, 1, 0, 1;\n"                                                           \
                         : SGEMM_F64(d, 0)                                                                        \
                         : "l"(a), "l"(b));                                                                       \
        }                                                                                                         \
    };                                                                                                            \
    template <>                                                                                                   \
    struct Wgmma<TYPE, 256> {                                                                                     \
        __device__ __forceinline__ static void mma(float (&d)[128], unsigned long long a, unsigned long long b) { \
            asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX_TYPE "." PTX_TYPE " " SGEMM_D128      \
                         ", %128, %129, 1, 1, 1, 0, 1;\n"                                                         \
                         : SGEMM_F64(d, 0), SGEMM_F64(d, 64)                                                      \
                         : "l"(a), "l"(b));                                                                       \
        }                                                                                                         \
    };

SGEMM_WGMMA(__half, "f16")
SGEMM_WGMMA(__nv_bfloat16, "bf16")

#undef SGEMM_WGMMA
#undef SGEMM_D128
#undef SGEMM_D64
#undef SGEMM_F64
#undef SGEMM_F8

// Where a warpgroup's accumulator fragment lands in its 64 x N tile of C (see Wgmma): the first of the thread's two
// rows, and the first of its two columns of 8-column group 0.
struct FragmentPosition {
    int row;
    int col;
    __device__ __forceinline__ explicit FragmentPosition(int thread_in_warpgroup)
        : row(16 * (thread_in_warpgroup / 32) + (thread_in_warpgroup % 32) / 4),
          col(2 * (thread_in_warpgroup % 4)) {}
};
