/* Q4_0R / W4G*R / Q4_KR / Q6_KR weight rows x a few tokens with the rows in the
 * vector lanes: the vec_dot_rows form of kernels/qdot.h, for decode and
 * small batches (AVX-512 VNNI).
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
 * Q4_KR (Q4_K_M's main type) goes the same way by super-block: its two
 * 64-byte quant vectors transposed, the 16 rows' sub-block scales and mins
 * by gathers, and per 32-weight sub-block one scale and one min applied to
 * 16 rows. Q6_KR (the output layer, and Q4_K_M's Q6_K layers) too: its
 * low-bit and high-bit vectors transposed, each 16-weight group's integer
 * sum scaled in integers, one float step per super-block.
 *
 * The Q4_0 offset (q - 8) comes off in integers, from the activations'
 * block sums (Q8_0P carries them), and Q6_K's (q - 32) from Q8_K's bsums.
 * W4G*R (Q4_0R's nibbles with a scale and zero point per group) goes
 * Q4_0R's way with the 16 rows' zero points in the lanes: each block's sum
 * starts at -z times the token's block sum, one vpmaddwd.
 *
 * Per lane the integer sums are exact; the float order differs from the
 * per-row kernels (the tests compare against the scalar reference). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize") /* the scalar tails stay scalar (see repack_avx512.c) */
#endif
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels.h"
#include "base/blocks.h"
#include "kernels/repack.h"
#include "kernels/x86/dpbusd_bcast.h"
#include "kernels/x86/planar_kind.h"
#include "kernels/x86/transpose16.h"

#define AI static inline __attribute__((always_inline))
/* rows per panel, tokens per pass, units (Q4_0R groups, Q4_KR super-blocks)
 * per segment. Short segments let the core overlap one segment's loads and
 * transposes with the previous one's multiplies: with 16 groups (a whole
 * 2048-wide row) per segment, half the kernel's samples at 8 tokens sat in
 * the load phase; 4 gave decode of 8 / 16 / 24 sequences 14% / 8% / 4% more
 * tok/s on TinyLlama Q4_0 (docs/speed.md, session 10). */
enum { RL = 16, TT = 8, SEG = 4 };

/* One transposed 4-block group: 16 word vectors, then the 16 rows' scales
 * of its 4 blocks as floats (W4G*R: and their zero points). */
typedef struct {
    __m512i v[16];
    __m512 d[4];
    __m512i z[4];
} tgroup;

/* Per lane (row) the fp16 scale (or zero point) of each of a 4-block
 * group's blocks, from per-group fp16 streams at s + i * stride (W4G*R,
 * group 64 or 128): two or one values a row, one 32-bit gather (the 2
 * bytes past a value are still in the row). */
AI void gather_groups(const uint8_t *s, size_t stride, __mmask16 m, int64_t g, int group, __m512 out[4]) {
    const __m512i ix = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)stride));
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, ix, (const void *)(s + 2 * g * (128 / group)), 1);
    const __m512 lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
    const __m512 hi = group == 64 ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))) : lo;
    out[0] = out[1] = lo;
    out[2] = out[3] = hi;
}

/* Per lane (row) the fp16 values of a 4-block group's blocks from
 * per-block fp16 streams at s + i * stride (Q4_0R's scales, W4G32R's
 * scales and zero points) as floats: two 64-bit gathers (16 8-byte stores
 * to the stack read back as vectors stalled on store forwarding twice a
 * group). */
AI void gather_blocks(const uint8_t *s, size_t stride, int nr, int64_t g, __m512 out[4]) {
    const __m512i ix = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64((long long)stride));
    const __mmask8 m0 = (__mmask8)(nr >= 8 ? 0xff : (1u << nr) - 1), m1 = (__mmask8)(nr >= 16 ? 0xff : nr > 8 ? (1u << (nr - 8)) - 1 : 0);
    const uint8_t *sp = s + 8 * g;
    __m512i a = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m0, ix, (const void *)sp, 1);
    __m512i b = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m1, ix, (const void *)(sp + 8 * stride), 1);
    /* element 4i + j of a (rows 0-7) and of b (rows 8-15, index 32 + ...) */
    const __m512i idx0 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0x003c0038, 0x00340030, 0x002c0028, 0x00240020,
                                          0x001c0018, 0x00140010, 0x000c0008, 0x00040000);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m512i idx = _mm512_add_epi16(idx0, _mm512_set1_epi16((short)j));
        out[j] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(a, idx, b)));
    }
}

/* Group g of the panel's rows (rows >= nr read as zeros) into *o. The
 * rows are at q + i * stride; the scales at dw + i * stride (W4G*R, group
 * `group`: per-group scales there and zero points at zw + i * stride). */
AI void load_group(const uint8_t *q, const uint8_t *dw, size_t stride, int nr, int64_t g, tgroup *o,
                   const uint8_t *zw, const int group) {
    __m512i r[16];
    const uint8_t *p = q + 64 * g;
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = i < nr ? _mm512_loadu_si512((const void *)(p + (size_t)i * stride)) : _mm512_setzero_si512();
    nb_transpose16(r, o->v);
    __m512 z[4];
    if (group == 64 || group == 128) {
        const __mmask16 m = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
        gather_groups(dw, stride, m, g, group, o->d);
        gather_groups(zw, stride, m, g, group, z);
    } else {
        gather_blocks(dw, stride, nr, g, o->d);
        if (group == 32) gather_blocks(zw, stride, nr, g, z);
    }
    if (group)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) o->z[j] = _mm512_cvttps_epi32(z[j]);
}

/* The next panel's weights, prefetched a share per step of the current
 * one's arithmetic: lines [i * lines / n, (i + 1) * lines / n) of pf at
 * step i of n (pf NULL: none). Issued in one burst per unit before the
 * arithmetic, they filled the core's miss buffers and stalled it: a fifth
 * of the Q4_0R kernel's samples sat on them at 8 tokens. Spread, 8 tokens
 * x 256 MiB of 5632 x 2048 weights went from 34.0 to 28.1 ms on one thread
 * (Q4_0R; 16.1 to 13.4 ms on two), Q6_KR 5-14% faster, Q4_KR unchanged
 * (docs/speed.md, session 33). */
AI void prefetch_share(const char *pf, int lines, int i, int n) {
    if (pf)
        for (int l = i * lines / n; l < (i + 1) * lines / n; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
}

static inline int32_t word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One group against T tokens (x[t]: the token's Q8_0P int8 weights of this
 * group, da / is: its block scales and integer sums from block b0): f[t]
 * gains the 16 rows' products; pf: this group's share of the next panel
 * (`lines` cache lines, prefetch_share). The unsigned weights' offset comes off in
 * integers: each block's sum starts at -8 * the activations' sum (a float
 * multiply-add per block and token less, on the pipes vpdpbusd needs). Low
 * nibbles of words 0-7 are block 0 and of 8-15 block 1, high nibbles blocks
 * 2 and 3 (the Q4_0R group layout). */
AI void group_tokens(const tgroup *G, const int8_t *const *x, const float *const *da, const int32_t *const *is,
                     int64_t b0, __m512 *f, const int T, const int group, const char *pf, int lines) {
    const __m512i m4 = _mm512_set1_epi8(15);
    #pragma GCC unroll 16
    for (int h = 0; h < 2; h++) {
        const int64_t bl = b0 + h, bh = b0 + 2 + h;
        __m512i lo[TT], hi[TT];
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            if (group) { /* -z * sum: a block sum of 32 int8 and z <= 255 fit in 16 bits */
                lo[t] = _mm512_madd_epi16(_mm512_set1_epi32(-is[t][bl]), G->z[h]);
                hi[t] = _mm512_madd_epi16(_mm512_set1_epi32(-is[t][bh]), G->z[2 + h]);
            } else {
                lo[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_set1_epi32(is[t][bl]), 3));
                hi[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_set1_epi32(is[t][bh]), 3));
            }
        }
        #pragma GCC unroll 16
        for (int s = 8 * h; s < 8 * h + 8; s++) {
            prefetch_share(pf, lines, s, 16);
            __m512i v = _mm512_load_si512((const void *)&G->v[s]);
            __m512i wl = _mm512_and_si512(v, m4), wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            #pragma GCC unroll 16
            for (int t = 0; t < T; t++) {
                dpbusd_bcast(&lo[t], wl, x[t] + 4 * s);
                dpbusd_bcast(&hi[t], wh, x[t] + 64 + 4 * s);
            }
        }
        /* blocks h (low) and 2 + h (high): d_w * d_a * sum((q - z) * a) */
        const __m512 dl = G->d[h], dh = G->d[2 + h];
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), _mm512_mul_ps(dl, _mm512_set1_ps(da[t][bl])), f[t]);
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), _mm512_mul_ps(dh, _mm512_set1_ps(da[t][bh])), f[t]);
        }
    }
}

/* Groups [g0, g1) of the segment buffer against tokens [t0, t0 + T)
 * (pf: the next panel's share of group g0, per bytes a group, or NULL). */
AI void segment_tokens(const tgroup *buf, int64_t g0, int64_t g1, const uint8_t *act, size_t a_stride, int64_t nb,
                       int64_t t0, float *yt, const int T, const int group, const char *pf, uint64_t per) {
    const int8_t *x[TT];
    const float *da[TT];
    const int32_t *is[TT];
    __m512 f[TT];
    #pragma GCC unroll 16
    for (int t = 0; t < T; t++) {
        const uint8_t *a = act + (size_t)(t0 + t) * a_stride;
        x[t] = (const int8_t *)a;
        da[t] = (const float *)(a + nb * 32);
        is[t] = (const int32_t *)(const void *)(da[t] + 2 * nb);
        f[t] = _mm512_load_ps(yt + 16 * (t0 + t));
    }
    for (int64_t g = g0; g < g1; g++) {
        const int8_t *xg[TT];
        #pragma GCC unroll 16
        for (int t = 0; t < T; t++) xg[t] = x[t] + 128 * g;
        group_tokens(&buf[g - g0], xg, da, is, 4 * g, f, T, group, pf ? pf + (g - g0) * per : NULL, (int)(per / 64));
    }
    #pragma GCC unroll 16
    for (int t = 0; t < T; t++) _mm512_store_ps(yt + 16 * (t0 + t), f[t]);
}

/* ---- Q4_KR ---------------------------------------------------------------- */

/* One transposed super-block of 16 rows: v[0..15] the words of quant bytes
 * 0-63 (unpacked vectors 0 and 1 in their low and high nibbles), v[16..31]
 * of bytes 64-127 (vectors 2 and 3); word s of each holds 16-weight group s
 * (kernels/repack.h "lane order"), sub-block s / 2. sc[j] = d * sc_j and
 * mn[j] = dmin * m_j of the 16 rows. */
typedef struct {
    __m512i v[32];
    __m512 sc[8], mn[8];
} tsuper;

AI void load_super(const uint8_t *w, size_t stride, int nr, int64_t u, tsuper *o) {
    const uint8_t *b = w + (size_t)u * sizeof(nb_block_q4_kr);
    __m512i r[16];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < nr ? _mm512_loadu_si512((const void *)(b + (size_t)i * stride + offsetof(nb_block_q4_kr, qs) + 64 * h))
                          : _mm512_setzero_si512();
        nb_transpose16(r, o->v + 16 * h);
    }
    const __mmask16 m = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    const __m512i ix = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)stride));
    __m512i dd = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, ix, (const void *)b, 1); /* d | dmin << 16 */
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)), dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* bytes 4c..4c+3 of sc[8] | m[8] */
        __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, ix,
                                                (const void *)(b + offsetof(nb_block_q4_kr, sc) + 4 * c), 1);
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) {
            __m512 v = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(g, 8 * e), _mm512_set1_epi32(255)));
            if (c < 2) o->sc[4 * c + e] = _mm512_mul_ps(v, d);
            else o->mn[4 * (c - 2) + e] = _mm512_mul_ps(v, dmin);
        }
    }
}

/* One super-block against T tokens (y[t]: the token's Q8_KP block): f[t]
 * gains d * sc_j * sum(q * a) - dmin * m_j * sum(a) over the sub-blocks,
 * times the token's scale. */
AI void super_tokens(const tsuper *G, const nb_block_q8_K *const *y, __m512 *f, const int T, const char *pf, int lines) {
    const __m512i m4 = _mm512_set1_epi8(15);
    _Alignas(32) float bsd[TT][8]; /* the sub-blocks' activation sums times the token's scale */
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) {
        __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)y[t]->bsums), _mm256_set1_epi16(1));
        _mm256_store_ps(bsd[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(y[t]->d)));
    }
#pragma GCC unroll 1
    for (int j = 0; j < 8; j++) {
        prefetch_share(pf, lines, j, 8);
        __m512i acc[TT];
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int s = 2 * j; s < 2 * j + 2; s++) {
            const __m512i v0 = _mm512_load_si512((const void *)&G->v[s]), v1 = _mm512_load_si512((const void *)&G->v[16 + s]);
            const __m512i w0 = _mm512_and_si512(v0, m4), w1 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
            const __m512i w2 = _mm512_and_si512(v1, m4), w3 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
#pragma GCC unroll 16
            for (int t = 0; t < T; t++) {
                const int8_t *q = y[t]->qs + 4 * s;
                acc[t] = _mm512_dpbusd_epi32(acc[t], w0, _mm512_set1_epi32(word(q)));
                acc[t] = _mm512_dpbusd_epi32(acc[t], w1, _mm512_set1_epi32(word(q + 64)));
                acc[t] = _mm512_dpbusd_epi32(acc[t], w2, _mm512_set1_epi32(word(q + 128)));
                acc[t] = _mm512_dpbusd_epi32(acc[t], w3, _mm512_set1_epi32(word(q + 192)));
            }
        }
        const __m512 sc = G->sc[j], mn = G->mn[j];
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_mul_ps(sc, _mm512_set1_ps(y[t]->d)), f[t]);
            f[t] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(bsd[t][j]), f[t]);
        }
    }
}

/* ---- Q6_KR ---------------------------------------------------------------- */

/* One transposed Q6_KR super-block of 16 rows: word s of l0 / l1 / h holds
 * 16-weight group s's low 4 bits (quant vectors 0 and 1 in the low and high
 * nibbles of ql bytes 0-63; 2 and 3 of bytes 64-127) and the high 2 bits of
 * all four (qh, vector k at bits 2k). sc[s]: the rows' int8 scale of group
 * s as int32, d their super-block scale. */
typedef struct {
    __m512i l0[16], l1[16], h[16], sc[16];
    __m512 d;
} tsuper6;

AI void load_super6(const uint8_t *w, size_t stride, int nr, int64_t u, tsuper6 *o) {
    const uint8_t *b = w + (size_t)u * sizeof(nb_block_q6_kr);
    static const size_t part[3] = {offsetof(nb_block_q6_kr, ql), offsetof(nb_block_q6_kr, ql) + 64,
                                   offsetof(nb_block_q6_kr, qh)};
    __m512i r[16];
#pragma GCC unroll 3
    for (int h = 0; h < 3; h++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < nr ? _mm512_loadu_si512((const void *)(b + (size_t)i * stride + part[h])) : _mm512_setzero_si512();
        nb_transpose16(r, h == 0 ? o->l0 : h == 1 ? o->l1 : o->h);
    }
    const __mmask16 m = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    const __m512i ix = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)stride));
    const __m512i dd = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, ix, (const void *)b, 1);
    o->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* sc[4c..4c+3], sign-extended */
        const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, ix,
                                                      (const void *)(b + offsetof(nb_block_q6_kr, sc) + 4 * c), 1);
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) o->sc[4 * c + e] = _mm512_srai_epi32(_mm512_slli_epi32(g, 24 - 8 * e), 24);
    }
}

/* One Q6_KR super-block against T tokens (y[t]: the token's Q8_KP block):
 * per group s the integer sum of (q - 32) * a, started at -32 * the group's
 * activation sum, times the group's scale, summed over the super-block in
 * integers (as the decode dot: at most 16 x 63 x 127 x 128 x 16 < 2^31),
 * then f[t] gains it times d * the token's scale. */
AI void super6_tokens(const tsuper6 *G, const nb_block_q8_K *const *y, __m512 *f, const int T, const char *pf, int lines) {
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(0x30);
    _Alignas(64) int32_t off[TT][16]; /* -32 * the group sums */
#pragma GCC unroll 16
    for (int t = 0; t < T; t++)
        _mm512_store_si512((void *)off[t], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                            _mm512_slli_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256(
                                                                                  (const __m256i *)(const void *)y[t]->bsums)),
                                                                              5)));
    __m512i it[TT];
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) it[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < 16; s++) {
        prefetch_share(pf, lines, s, 16);
        const __m512i l0 = _mm512_load_si512((const void *)&G->l0[s]), l1 = _mm512_load_si512((const void *)&G->l1[s]);
        const __m512i h = _mm512_load_si512((const void *)&G->h[s]);
        const __m512i w0 = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m2));
        const __m512i w1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                                           _mm512_and_si512(_mm512_slli_epi16(h, 2), m2));
        const __m512i w2 = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_and_si512(h, m2));
        const __m512i w3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                           _mm512_and_si512(_mm512_srli_epi16(h, 2), m2));
        const __m512i sc = _mm512_load_si512((const void *)&G->sc[s]);
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            const int8_t *q = y[t]->qs + 4 * s;
            __m512i acc = _mm512_set1_epi32(off[t][s]);
            acc = _mm512_dpbusd_epi32(acc, w0, _mm512_set1_epi32(word(q)));
            acc = _mm512_dpbusd_epi32(acc, w1, _mm512_set1_epi32(word(q + 64)));
            acc = _mm512_dpbusd_epi32(acc, w2, _mm512_set1_epi32(word(q + 128)));
            acc = _mm512_dpbusd_epi32(acc, w3, _mm512_set1_epi32(word(q + 192)));
            it[t] = _mm512_add_epi32(it[t], _mm512_mullo_epi32(acc, sc));
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; t++)
        f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(it[t]), _mm512_mul_ps(G->d, _mm512_set1_ps(y[t]->d)), f[t]);
}

/* Blocks past the last whole group (nb % 4 of them, in Q4_0's order), one
 * row and token at a time (pl: the planar kind, planar_kind.h). */
AI float tail_blocks(const uint8_t *row, const uint8_t *a, int64_t nb, const int pl) {
    const uint8_t *q = row + nb_pl_head(nb * 32, pl);
    const int8_t *x = (const int8_t *)a;
    const float *da = (const float *)(a + nb * 32);
    float s = 0;
    for (int64_t b = nb / 4 * 4; b < nb; b++)
        s += nb_pl_scale(row, nb * 32, b, pl) * da[b] * (float)nb_q4_0r_tail_isum(q, x, b, nb_pl_zero(row, nb * 32, b, pl));
    return s;
}

/* Super-blocks [u0, u1) of the segment buffer (Q4_KR, or Q6_KR when six)
 * against tokens [t0, t0 + T) (pf, per: as segment_tokens). */
AI void segment_supers(const void *buf, const int six, int64_t u0, int64_t u1, const uint8_t *act, size_t a_stride,
                       int64_t t0, float *yt, const int T, const char *pf, uint64_t per) {
    const nb_block_q8_K *x[TT];
    __m512 f[TT];
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) {
        x[t] = (const nb_block_q8_K *)(const void *)(act + (size_t)(t0 + t) * a_stride);
        f[t] = _mm512_load_ps(yt + 16 * (t0 + t));
    }
    for (int64_t u = u0; u < u1; u++) {
        const nb_block_q8_K *xu[TT];
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) xu[t] = x[t] + u;
        const char *pu = pf ? pf + (u - u0) * per : NULL;
        if (six) super6_tokens(&((const tsuper6 *)buf)[u - u0], xu, f, T, pu, (int)(per / 64));
        else super_tokens(&((const tsuper *)buf)[u - u0], xu, f, T, pu, (int)(per / 64));
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) _mm512_store_ps(yt + 16 * (t0 + t), f[t]);
}

enum { K_Q4_0R, K_Q4_KR, K_Q6_KR, K_W4G32R, K_W4G64R, K_W4G128R };
/* Q4_0R and W4G*R: 4-block groups of nibbles; their W4G group (0: Q4_0R). */
#define NIBBLE_GROUPS(kind) ((kind) == K_Q4_0R || (kind) >= K_W4G32R)
#define W4G_GROUP(kind) ((kind) >= K_W4G32R ? 32 << ((kind) - K_W4G32R) : 0)

/* One segment of units against tokens [t0, t0 + T) (kind: the layout;
 * pf, per: as segment_tokens). */
AI void segment_pass(const int kind, const void *buf, int64_t u0, int64_t u1, const uint8_t *act, size_t a_stride,
                     int64_t nb, int64_t t0, float *yt, const int T, const char *pf, uint64_t per) {
    if (NIBBLE_GROUPS(kind)) segment_tokens((const tgroup *)buf, u0, u1, act, a_stride, nb, t0, yt, T, W4G_GROUP(kind), pf, per);
    else segment_supers(buf, kind == K_Q6_KR, u0, u1, act, a_stride, t0, yt, T, pf, per);
}

/* The vec_dot_rows driver: 16-row panels; per panel, tokens in chunks of
 * 64 (the results tile), units (Q4_0R: 4-block groups, Q4_KR: super-blocks)
 * in segments that stay transposed for every pass of up to 8 tokens. */
AI void rows_drive(const int kind, int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                   size_t a_stride, float *y, int64_t ldy) {
    const int64_t nb = n / 32, nu = NIBBLE_GROUPS(kind) ? nb / 4 : n / 256;
    const int group = W4G_GROUP(kind);
    const int pl = group ? NB_PL_W4G32R + (kind - K_W4G32R) : NB_PL_Q4_0R; /* for the tails */
    _Alignas(64) union {
        tgroup g[SEG];
        tsuper k[SEG];
        tsuper6 k6[SEG];
    } buf;
    _Alignas(64) float yt[64 * 16];
    for (int64_t r0 = 0; r0 < nr; r0 += RL) {
        const int rows = (int)(nr - r0 < RL ? nr - r0 : RL);
        const uint8_t *dw = (const uint8_t *)w + (size_t)r0 * w_stride, *q = dw + nb_pl_head(n, pl);
        const uint8_t *zw = group ? dw + n / group * 2 : NULL; /* W4G*R's zero points */
        const uint8_t *next = (const uint8_t *)w + (size_t)(r0 + RL) * w_stride;
        const uint64_t pf_step = nu ? ((uint64_t)RL * w_stride / (uint64_t)nu + 63) & ~(uint64_t)63 : 0;
        for (int64_t c0 = 0; c0 < nt; c0 += 64) {
            const int64_t nc = nt - c0 < 64 ? nt - c0 : 64;
            const uint8_t *ac = (const uint8_t *)act + (size_t)c0 * a_stride;
            memset(yt, 0, (size_t)nc * 16 * sizeof(float));
            for (int64_t u0 = 0; u0 < nu; u0 += SEG) {
                const int64_t u1 = u0 + SEG < nu ? u0 + SEG : nu;
                for (int64_t u = u0; u < u1; u++) {
                    if (NIBBLE_GROUPS(kind)) {
                        if (rows == RL) load_group(q, dw, w_stride, RL, u, &buf.g[u - u0], zw, group);
                        else load_group(q, dw, w_stride, rows, u, &buf.g[u - u0], zw, group);
                    } else if (kind == K_Q4_KR) {
                        if (rows == RL) load_super(dw, w_stride, RL, u, &buf.k[u - u0]);
                        else load_super(dw, w_stride, rows, u, &buf.k[u - u0]);
                    } else {
                        if (rows == RL) load_super6(dw, w_stride, RL, u, &buf.k6[u - u0]);
                        else load_super6(dw, w_stride, rows, u, &buf.k6[u - u0]);
                    }
                }
                for (int64_t t0 = 0; t0 < nc; t0 += TT) {
                    /* the next panel (16 rows further, contiguous), a share per unit in
                     * the first pass: this one is read as 16-48 short streams, too many
                     * for the hardware prefetchers */
                    const char *pf = c0 == 0 && t0 == 0 ? (const char *)next + (uint64_t)u0 * pf_step : NULL;
                    switch (nc - t0 < TT ? nc - t0 : TT) {
                    case 1: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 1, pf, pf_step); break;
                    case 2: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 2, pf, pf_step); break;
                    case 3: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 3, pf, pf_step); break;
                    case 4: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 4, pf, pf_step); break;
                    case 5: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 5, pf, pf_step); break;
                    case 6: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 6, pf, pf_step); break;
                    case 7: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 7, pf, pf_step); break;
                    default: segment_pass(kind, &buf, u0, u1, ac, a_stride, nb, t0, yt, 8, pf, pf_step); break;
                    }
                }
            }
            const __mmask16 m = (__mmask16)((1u << rows) - 1);
            for (int64_t t = 0; t < nc; t++) {
                float *o = y + (size_t)(c0 + t) * (size_t)ldy + r0;
                if (NIBBLE_GROUPS(kind) && nu * 4 < nb)
                    for (int i = 0; i < rows; i++)
                        yt[16 * t + i] += tail_blocks(dw + (size_t)i * w_stride, ac + (size_t)t * a_stride, nb, pl);
                _mm512_mask_storeu_ps(o, m, _mm512_load_ps(yt + 16 * t));
            }
        }
    }
}

void nb_q4_0r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    rows_drive(K_Q4_0R, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

void nb_q4_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    rows_drive(K_Q4_KR, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

void nb_q6_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    rows_drive(K_Q6_KR, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

#define ROWS_W4G(name, kind)                                                                                   \
    void name(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act, size_t a_stride, \
              float *y, int64_t ldy) {                                                                         \
        rows_drive(kind, n, nr, w, w_stride, nt, act, a_stride, y, ldy);                                       \
    }
ROWS_W4G(nb_w4g32r_rows_avx512, K_W4G32R)
ROWS_W4G(nb_w4g64r_rows_avx512, K_W4G64R)
ROWS_W4G(nb_w4g128r_rows_avx512, K_W4G128R)
