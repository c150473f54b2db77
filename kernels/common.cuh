// Helpers shared by every kernel in this folder. NVRTC has no host headers, so nothing here includes one.
#pragma once

// C = alpha * acc + beta * C. C is read only when beta != 0, as BLAS specifies: with beta == 0 the caller may pass
// an uninitialised (for the correctness check: NaN-poisoned) C and must still get alpha * acc.
__device__ __forceinline__ void store_epilogue(float* c, float acc, float alpha, float beta) {
    *c = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * *c;
}

// dst[0..3] = v: spreads a 128-bit load over four registers of a fragment array.
__device__ __forceinline__ void unpack4(float* dst, float4 v) {
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
}

// The same for four consecutive elements of C; c must be 16-byte aligned.
__device__ __forceinline__ void store_epilogue4(float* c, float4 acc, float alpha, float beta) {
    float4 out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
        const float4 old = *reinterpret_cast<const float4*>(c);
        out.x += beta * old.x;
        out.y += beta * old.y;
        out.z += beta * old.z;
        out.w += beta * old.w;
    }
    *reinterpret_cast<float4*>(c) = out;
}

// The same for two consecutive elements of C; c must be 8-byte aligned.
__device__ __forceinline__ void store_epilogue2(float* c, float x, float y, float alpha, float beta) {
    float2 out = make_float2(alpha * x, alpha * y);
    if (beta != 0.0f) {
        const float2 old = *reinterpret_cast<const float2*>(c);
        out.x += beta * old.x;
        out.y += beta * old.y;
    }
    *reinterpret_cast<float2*>(c) = out;
}

// --- Launch geometry: how a kernel is launched, stated once by the kernel itself ------------------------------------
//
// Every kernel template `gemm_x` has a __device__ variable template `gemm_x_geometry` with the same parameters,
// computed from the same constants the kernel's body uses (nothing is typed in twice). The host never restates these
// figures: it compiles the program with the variable named (an NVRTC name expression) and reads its initialiser out
// of the PTX (sgemm/measuring/resources.py), which needs no GPU, then launches with it. Cluster dimensions are
// {1, 1, 1} for a kernel that runs in no cluster.

// A TMA box: rows x cols elements of a row-major matrix moved by one copy (cols contiguous), written to shared memory
// with a swizzle of `swizzle` bytes (0: none).
struct TmaBox {
    int rows, cols, swizzle;
};

struct LaunchGeometry {
    int block_threads[2];  // blockDim x, y
    int block_tile[2];  // rows, cols of C a block computes (per tile it takes, for a persistent grid)
    int cluster[3];  // blocks per thread-block cluster
    int shared_memory;  // dynamic shared memory a block needs
    int stages;  // K steps of TMA tiles the shared memory holds at once (0 where nothing comes by TMA)
    // The descriptors of A, B and C the kernel takes after its other arguments, in that order; a box left out
    // (all zeros) is an operand the kernel takes no descriptor for.
    TmaBox tma[3];
};

// Each kernel's body asserts that its stated geometry is the one it computes with, field by field, so that a figure
// edited in one place and not the other fails the compile, naming the field.
__host__ __device__ constexpr bool is_pair(const int (&pair)[2], int first, int second) {
    return pair[0] == first && pair[1] == second;
}

__host__ __device__ constexpr bool is_box(const TmaBox& box, int rows, int cols, int swizzle) {
    return box.rows == rows && box.cols == cols && box.swizzle == swizzle;
}

__host__ __device__ constexpr bool is_cluster(const LaunchGeometry& geometry, int x, int y, int z) {
    return geometry.cluster[0] == x && geometry.cluster[1] == y && geometry.cluster[2] == z;
}

// The geometry of a kernel that runs in no cluster, takes no TMA descriptor and no dynamic shared memory.
__host__ __device__ constexpr bool is_plain(const LaunchGeometry& geometry) {
    return is_cluster(geometry, 1, 1, 1) && geometry.shared_memory == 0 && geometry.stages == 0 &&
           is_box(geometry.tma[0], 0, 0, 0) && is_box(geometry.tma[1], 0, 0, 0) && is_box(geometry.tma[2], 0, 0, 0);
}
