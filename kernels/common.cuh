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
