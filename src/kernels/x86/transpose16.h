/* The 16 x 16 transpose of 32-bit words in AVX-512 registers, shared by
 * the kernels that turn rows-in-lanes into rows-in-registers and back
 * (rows_avx512.c, attn_amx.c, gemm_amx.c). Include from AVX-512 files only. */
#ifndef NB_KERNELS_X86_TRANSPOSE16_H
#define NB_KERNELS_X86_TRANSPOSE16_H
#include <immintrin.h>

/* out[s] lane i = in[i] word s: unpack 32 and 64 bits within 128-bit
 * lanes, then a 4 x 4 transpose of the 128-bit lanes. `in` is read whole
 * before `out` is written, so out may be in. */
static inline __attribute__((always_inline)) void nb_transpose16(const __m512i in[16], __m512i out[16]) {
    __m512i t[16], u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) { /* u[4q + c], 128-bit lane L: rows 4q..4q+3 of word 4L + c */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
        __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
        out[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        out[4 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        out[8 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        out[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
}

#endif
