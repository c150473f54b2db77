// Warp-level tensor-core building blocks shared by the mma.sync kernels (fp16_mma.cu, fp16_mma_pipelined.cu): the
// XOR swizzle of 16-byte chunks in a shared tile, ldmatrix in its widths, and mma.sync in its FP16 shapes. The
// fragment layouts are PTX's (the ISA's "Matrix Fragments for mma.m16n8k8 / m16n8k16"), named in each comment by
// g = lane / 4 and t = lane % 4.
#pragma once

#include <cuda_fp16.h>

// Element offset of (row, col) in a row-major shared tile COLS halves wide. With SWIZZLE the 16-byte chunk index is
// XORed with the row's position in a period of 8 bank-group patterns: rows that share a 128-byte line keep apart
// by their plain chunk index, and the 8 consecutive rows an ldmatrix reads at one logical chunk land on 8 distinct
// physical chunks modulo 8, i.e. 8 distinct groups of 4 banks.
template <int COLS, bool SWIZZLE>
__device__ __forceinline__ int tile_offset(int row, int col) {
    if constexpr (!SWIZZLE) {
        return row * COLS + col;
    } else {
        constexpr int CHUNKS = COLS / 8;
        static_assert(COLS % 8 == 0 && (CHUNKS & (CHUNKS - 1)) == 0,
                      "a swizzled row must be a power-of-two number of 16-byte chunks, so XOR stays inside it");
        constexpr int ROWS_PER_LINE = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
        constexpr int PATTERNS = CHUNKS >= 8 ? 8 : CHUNKS;
        const int chunk = (col / 8) ^ (row / ROWS_PER_LINE % PATTERNS);
        return row * COLS + chunk * 8 + col % 8;
    }
}

// ldmatrix with a generic pointer (no state space: generic addressing into shared memory) or with a 32-bit offset
// into the shared window (.shared). The lanes 8i..8i+7 name the rows of matrix i; register i of each lane receives
// row lane/4, columns 2*(lane%4) and +1 of matrix i (of its transpose with .trans).
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned& r0, const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.b16 {%0}, [%1];\n" : "=r"(r0) : "l"(row));
}
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned& r0, unsigned row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "l"(row));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, unsigned row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                            const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "l"(row));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                  const __half* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "l"(row));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                  unsigned row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(row));
}

// acc += a * b for one 16x8 tile over k = 8. a: rows g and g+8, columns 2t, 2t+1 of A (g = lane/4, t = lane%4);
// b: rows 2t, 2t+1, column g of B; acc: rows g and g+8, columns 2t, 2t+1 of C.
__device__ __forceinline__ void mma_m16n8k8(float (&acc)[4], const unsigned (&a)[2], unsigned b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(b));
}

// acc += a * b for one 16x8 tile over k = 16: twice the k of m16n8k8 in one instruction, which Hopper issues at about
// the rate of the k8 shape, so at about twice its FLOP rate. a: a[0], a[1] as m16n8k8's over k 0-7, a[2], a[3] the same
// rows over k 8-15; b: b[0] rows 2t, 2t+1 and b[1] rows 8 + 2t, 8 + 2t + 1 of column g.
__device__ __forceinline__ void mma_m16n8k16(float (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
