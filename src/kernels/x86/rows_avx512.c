/* Q4_0R weight rows x a few tokens with the rows in the vector lanes: the
 * vec_dot_rows form of kernels/qdot.h, for decode and small batches
 * (AVX-512 VNNI).
 *
 * The per-row kernels (repack_avx512.c) hold one row's products in the
 * lanes: every 32-weight block ends in a float multiply-add per row and
 * token, every row in a horizontal sum, and a small batch (2-16 tokens)
 * puts the tokens in the lanes of 256-bit vectors, so each 4-byte weight
 * word is broadcast once per row (sbatch_avx512.c). Here 16 rows share a
 * 512-bit vector: a panel of 16 rows is transposed once (16 x 16 words per
 * 4-block group, in registers) into vectors whose lane i holds row i's
 * word, and each token's activation word is broadcast by vpdpbusd itself
 * (a 32-bit embedded broadcast): one vpdpbusd per 16 rows x 4 weights x
 * one token, the block's scales applied to 16 rows at once, no horizontal
 * sums, 16 contiguous results per token. The transposed panel (a segment
 * of up to SEG groups on the stack) is reused by every group of 8 tokens.
 *
 * Per lane the integer sums are exact; the float order differs from the
 * per-row kernels (the tests compare against the scalar reference). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize") /* the scalar tails stay scalar (see repack_avx512.c) */
#endif
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/repack.h"

#define AI static inline __attribute__((always_inline))
enum { RL = 16, TT = 8, SEG = 16 }; /* rows per panel, tokens per pass, groups per segment */

/* out[s] lane i = in[i] word s (16 x 16 32-bit words): unpack 32 and 64
 * bits within 128-bit lanes, then a 4 x 4 transpose of the 128-bit lanes. */
AI void transpose16(const __m512i in[16], __m512i out[16]) {
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

/* One transposed 4-block group: 16 word vectors, then the 16 rows' scales
 * of its 4 blocks as floats. */
typedef struct {
    __m512i v[16];
    __m512 d[4];
} tgroup;

/* Group g of the panel's rows (rows >= nr read as zeros) into *o. The
 * rows are at q + i * stride; the scales at dw + i * stride. The scales
 * come in by two 64-bit gathers: 16 8-byte stores to the stack read back
 * as vectors stalled on store forwarding twice a group. */
AI void load_group(const uint8_t *q, const uint8_t *dw, size_t stride, int nr, int64_t g, tgroup *o) {
    __m512i r[16];
    const uint8_t *p = q + 64 * g;
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = i < nr ? _mm512_loadu_si512((const void *)(p + (size_t)i * stride)) : _mm512_setzero_si512();
    transpose16(r, o->v);
    const __m512i ix = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64((long long)stride));
    const __mmask8 m0 = (__mmask8)(nr >= 8 ? 0xff : (1u << nr) - 1), m1 = (__mmask8)(nr >= 16 ? 0xff : nr > 8 ? (1u << (nr - 8)) - 1 : 0);
    const uint8_t *sp = dw + 8 * g;
    __m512i a = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m0, ix, (const void *)sp, 1);
    __m512i b = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m1, ix, (const void *)(sp + 8 * stride), 1);
    /* element 4i + j of a (rows 0-7) and of b (rows 8-15, index 32 + ...) */
    const __m512i idx0 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0x003c0038, 0x00340030, 0x002c0028, 0x00240020,
                                          0x001c0018, 0x00140010, 0x000c0008, 0x00040000);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m512i idx = _mm512_add_epi16(idx0, _mm512_set1_epi16((short)j));
        o->d[j] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(a, idx, b)));
    }
}

static inline int32_t word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One group against T tokens (x[t]: the token's Q8_0P int8 weights of this
 * group, da / ds: its block scales and scale * sums from block b0): f[t]
 * gains the 16 rows' products. Low nibbles of words 0-7 are block 0 and of
 * 8-15 block 1, high nibbles blocks 2 and 3 (the Q4_0R group layout). */
AI void group_tokens(const tgroup *G, const int8_t *const *x, const float *const *da, const float *const *ds,
                     int64_t b0, __m512 *f, const int T) {
    const __m512i m4 = _mm512_set1_epi8(15);
    #pragma GCC unroll 16
    for (int h = 0; h < 2; h++) {
        __m512i lo[TT], hi[TT];
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm512_setzero_si512();
        #pragma GCC unroll 16
        for (int s = 8 * h; s < 8 * h + 8; s++) {
            __m512i v = _mm512_load_si512((const void *)&G->v[s]);
            __m512i wl = _mm512_and_si512(v, m4), wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            #pragma GCC unroll 16
            for (int t = 0; t < T; t++) {
                lo[t] = _mm512_dpbusd_epi32(lo[t], wl, _mm512_set1_epi32(word(x[t] + 4 * s)));
                hi[t] = _mm512_dpbusd_epi32(hi[t], wh, _mm512_set1_epi32(word(x[t] + 64 + 4 * s)));
            }
        }
        /* blocks h (low) and 2 + h (high): d_w * d_a * sum(q * a) - 8 * d_w * d_a * sum(a) */
        const __m512 dl = G->d[h], dh = G->d[2 + h];
        const __m512 nl = _mm512_mul_ps(dl, _mm512_set1_ps(-8.0f)), nh = _mm512_mul_ps(dh, _mm512_set1_ps(-8.0f));
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            const int64_t bl = b0 + h, bh = b0 + 2 + h;
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), _mm512_mul_ps(dl, _mm512_set1_ps(da[t][bl])), f[t]);
            f[t] = _mm512_fmadd_ps(nl, _mm512_set1_ps(ds[t][bl]), f[t]);
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), _mm512_mul_ps(dh, _mm512_set1_ps(da[t][bh])), f[t]);
            f[t] = _mm512_fmadd_ps(nh, _mm512_set1_ps(ds[t][bh]), f[t]);
        }
    }
}

/* Groups [g0, g1) of the segment buffer against tokens [t0, t0 + T). */
AI void segment_tokens(const tgroup *buf, int64_t g0, int64_t g1, const uint8_t *act, size_t a_stride, int64_t nb,
                       int64_t t0, float *yt, const int T) {
    const int8_t *x[TT];
    const float *da[TT], *ds[TT];
    __m512 f[TT];
    #pragma GCC unroll 16
    for (int t = 0; t < T; t++) {
        const uint8_t *a = act + (size_t)(t0 + t) * a_stride;
        x[t] = (const int8_t *)a;
        da[t] = (const float *)(a + nb * 32);
        ds[t] = da[t] + nb;
        f[t] = _mm512_load_ps(yt + 16 * (t0 + t));
    }
    for (int64_t g = g0; g < g1; g++) {
        const int8_t *xg[TT];
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) xg[t] = x[t] + 128 * g;
        group_tokens(&buf[g - g0], xg, da, ds, 4 * g, f, T);
    }
    #pragma GCC unroll 16
    for (int t = 0; t < T; t++) _mm512_store_ps(yt + 16 * (t0 + t), f[t]);
}

/* Blocks past the last whole group (nb % 4 of them, in Q4_0's order), one
 * row and token at a time. */
static float tail_blocks(const uint8_t *row, const uint8_t *a, int64_t nb) {
    const uint16_t *dw = (const uint16_t *)row;
    const uint8_t *q = row + nb * 2;
    const int8_t *x = (const int8_t *)a;
    const float *da = (const float *)(a + nb * 32);
    float s = 0;
    for (int64_t b = nb / 4 * 4; b < nb; b++) s += _cvtsh_ss(dw[b]) * da[b] * (float)nb_q4_0r_tail_isum(q, x, b);
    return s;
}

void nb_q4_0r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    const int64_t nb = n / 32, ng = nb / 4;
    _Alignas(64) tgroup buf[SEG];
    _Alignas(64) float yt[64 * 16];
    for (int64_t r0 = 0; r0 < nr; r0 += RL) {
        const int rows = (int)(nr - r0 < RL ? nr - r0 : RL);
        const uint8_t *dw = (const uint8_t *)w + (size_t)r0 * w_stride, *q = dw + nb * 2;
        const uint8_t *next = (const uint8_t *)w + (size_t)(r0 + RL) * w_stride;
        const uint64_t pf_step = ng ? ((uint64_t)RL * w_stride / (uint64_t)ng + 63) & ~(uint64_t)63 : 0;
        for (int64_t c0 = 0; c0 < nt; c0 += 64) { /* tokens in chunks of 64 (the results tile) */
            const int64_t nc = nt - c0 < 64 ? nt - c0 : 64;
            const uint8_t *ac = (const uint8_t *)act + (size_t)c0 * a_stride;
            memset(yt, 0, (size_t)nc * 16 * sizeof(float));
            for (int64_t g0 = 0; g0 < ng; g0 += SEG) {
                const int64_t g1 = g0 + SEG < ng ? g0 + SEG : ng;
                for (int64_t g = g0; g < g1; g++) {
                    /* the next panel (16 rows further, contiguous), a share per group:
                     * this one is read as 32 short streams (each row's quants and
                     * scales), too many for the hardware prefetchers */
                    if (c0 == 0)
                        for (uint64_t o = (uint64_t)g * pf_step; o < (uint64_t)(g + 1) * pf_step; o += 64)
                            _mm_prefetch((const char *)next + o, _MM_HINT_T0);
                    if (rows == RL) load_group(q, dw, w_stride, RL, g, &buf[g - g0]);
                    else load_group(q, dw, w_stride, rows, g, &buf[g - g0]);
                }
                for (int64_t t0 = 0; t0 < nc; t0 += TT) {
                    switch (nc - t0 < TT ? nc - t0 : TT) {
                    case 1: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 1); break;
                    case 2: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 2); break;
                    case 3: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 3); break;
                    case 4: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 4); break;
                    case 5: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 5); break;
                    case 6: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 6); break;
                    case 7: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 7); break;
                    default: segment_tokens(buf, g0, g1, ac, a_stride, nb, t0, yt, 8); break;
                    }
                }
            }
            const __mmask16 m = (__mmask16)((1u << rows) - 1);
            for (int64_t t = 0; t < nc; t++) {
                float *o = y + (size_t)(c0 + t) * (size_t)ldy + r0;
                if (ng * 4 < nb)
                    for (int i = 0; i < rows; i++)
                        yt[16 * t + i] += tail_blocks(dw + (size_t)i * w_stride, ac + (size_t)t * a_stride, nb);
                _mm512_mask_storeu_ps(o, m, _mm512_load_ps(yt + 16 * t));
            }
        }
    }
}
