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
 * sums, 16 contiguous results per token. Q4_0R and W4G*R transpose half a
 * group (8 words of 16 rows) in registers and take every token through it
 * in turn, each token's activations from one pointer; the K-quants'
 * transposed super-blocks (a segment of up to SEG of them on the stack)
 * are reused by every group of 8 tokens.
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
/* rows per panel; the K-quants' tokens per pass and super-blocks per
 * segment. Short segments let the core overlap one segment's loads and
 * transposes with the previous one's multiplies: with 16 groups (a whole
 * 2048-wide row) per segment, half the kernel's samples at 8 tokens sat in
 * the load phase; 4 gave decode of 8 / 16 / 24 sequences 14% / 8% / 4% more
 * tok/s on TinyLlama Q4_0 (docs/speed.md, session 10). */
enum { RL = 16, TT = 8, SEG = 4 };

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

/* ---- Q4_0R and W4G*R ------------------------------------------------------ */

/* The 16 rows' scales of group g's 4 blocks as floats (W4G*R, group
 * `group`: per-group scales at dw and zero points at zw, *z as int32),
 * rows >= nr zero. */
AI void group_scales(const uint8_t *dw, const uint8_t *zw, size_t stride, int nr, int64_t g, const int group,
                     __m512 d[4], __m512i z[4]) {
    __m512 zf[4];
    if (group == 64 || group == 128) {
        const __mmask16 m = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
        gather_groups(dw, stride, m, g, group, d);
        gather_groups(zw, stride, m, g, group, zf);
    } else {
        gather_blocks(dw, stride, nr, g, d);
        if (group == 32) gather_blocks(zw, stride, nr, g, zf);
    }
    if (group)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) z[j] = _mm512_cvttps_epi32(zf[j]);
}

/* Words 8h .. 8h+7 of the group line at p (row i at p + i * stride; rows
 * >= nr read as zeros) as 8 vectors whose lane i is row i's word: rows i
 * and i + 8 share a vector (32 bytes each), an 8 x 8 transpose runs in
 * each 256-bit half and one two-source permute per word joins the halves -
 * a quarter of nb_transpose16's lane-crossing shuffles per word. */
AI void half_words(const uint8_t *p, size_t stride, int nr, int h, __m512i out[8]) {
    __m512i r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        const __m256i a = i < nr ? _mm256_loadu_si256((const __m256i *)(const void *)(p + (size_t)i * stride + 32 * h))
                                 : _mm256_setzero_si256();
        r[i] = i + 8 < nr ? _mm512_mask_broadcast_i64x4(
                                _mm512_castsi256_si512(a), 0xf0,
                                _mm256_loadu_si256((const __m256i *)(const void *)(p + (size_t)(i + 8) * stride + 32 * h)))
                          : _mm512_zextsi256_si512(a);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) { /* u[4q + c], 128-bit lane L: rows 4q..4q+3 (+8 in lanes 2, 3) of word 4(L & 1) + c */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        out[c] = _mm512_permutex2var_epi64(u[c], lo, u[4 + c]);
        out[4 + c] = _mm512_permutex2var_epi64(u[c], hi, u[4 + c]);
    }
}

/* One panel (row i's scales at dw + i * stride, its nibbles at q + i *
 * stride, i < nr; W4G*R's zero points at zw + ...) against T tokens of
 * Q8_0P activations (token t at act + t * a_stride): f[16 t + i] = row i's
 * dot. Half a group at a time: its 8 word vectors, unpacked into low and
 * high nibbles, stay in registers while each token in turn meets them all
 * through one pointer. With the tokens in the inner loop instead (16
 * accumulators, 8 token pointers), GCC kept the pointers on the stack, a
 * load beside every vpdpbusd; with a transposed segment on the stack
 * (nb_transpose16), its stores and reloads cost as much as the multiplies
 * (docs/speed.md, session 52). Block sums start at -8 (Q4_0R) or -z
 * (W4G*R) times the token's block sum, as in the per-row kernels. The next
 * panel (nq, nh: its nibbles and its head of scales) is prefetched: a
 * row's line of the same group per word step, and the 16 rows' heads a line
 * per group from the first (where the next panel starts; spread over the
 * groups with two divisions each, streaming was 2-10% slower). */
AI void panel_nibbles(const uint8_t *q, const uint8_t *dw, const uint8_t *zw, size_t stride, int nr, int64_t nu,
                      size_t head, const uint8_t *act, size_t a_stride, int64_t nb, float *f, int T, const int group,
                      const uint8_t *nq, const uint8_t *nh) {
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int t = 0; t < T; t++) _mm512_store_ps(f + 16 * t, _mm512_setzero_ps());
    for (int64_t g = 0; g < nu; g++) {
        __m512 d[4];
        __m512i z[4];
        group_scales(dw, zw, stride, nr, g, group, d, z);
        if ((size_t)g * 64 < head) /* the head's lines, one per group from the first (a head holds at most 16 bytes a group) */
            for (int i = 0; i < 16; i++) _mm_prefetch((const char *)nh + (size_t)i * stride + 64 * g, _MM_HINT_T0);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i w[8], wl[8], wh[8];
            half_words(q + 64 * g, stride, nr, h, w);
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++) {
                _mm_prefetch((const char *)nq + (size_t)(8 * h + s) * stride + 64 * g, _MM_HINT_T0);
                wl[s] = _mm512_and_si512(w[s], m4);
                wh[s] = _mm512_and_si512(_mm512_srli_epi16(w[s], 4), m4);
            }
            const int64_t bl = 4 * g + h, bh = 4 * g + 2 + h; /* low nibbles: block h, high: block 2 + h */
            const uint8_t *a = act;
#pragma GCC unroll 2
            for (int t = 0; t < T; t++, a += a_stride) {
                const int8_t *x = (const int8_t *)a + 128 * g + 32 * h;
                const float *da = (const float *)(const void *)(a + nb * 32);
                const int32_t *is = (const int32_t *)(const void *)(da + 2 * nb);
                __m512i lo, hi;
                if (group) { /* -z * sum: a block sum of 32 int8 and z <= 255 fit in 16 bits */
                    lo = _mm512_madd_epi16(_mm512_set1_epi32(-is[bl]), z[h]);
                    hi = _mm512_madd_epi16(_mm512_set1_epi32(-is[bh]), z[2 + h]);
                } else {
                    /* -8 * sum in a general register, one broadcast: a vector shift and subtract less per block */
                    lo = _mm512_set1_epi32((int32_t)(0u - 8u * (uint32_t)is[bl]));
                    hi = _mm512_set1_epi32((int32_t)(0u - 8u * (uint32_t)is[bh]));
                }
#pragma GCC unroll 8
                for (int s = 0; s < 8; s++) {
                    dpbusd_bcast(&lo, wl[s], x + 4 * s);
                    dpbusd_bcast(&hi, wh[s], x + 64 + 4 * s);
                }
                __m512 ft = _mm512_load_ps(f + 16 * t); /* d_w * d_a * sum((q - z) * a) */
                ft = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(d[h], _mm512_set1_ps(da[bl])), ft);
                ft = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(d[2 + h], _mm512_set1_ps(da[bh])), ft);
                _mm512_store_ps(f + 16 * t, ft);
            }
        }
    }
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

/* The vec_dot_rows form for Q4_0R (group 0) and W4G*R: 16-row panels,
 * tokens in chunks of NT_CHUNK. The next panel is prefetched even past
 * the last: that is where this thread's next chunk of rows starts. */
enum { NT_CHUNK = 32 };
AI void nibble_rows(const int group, int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt,
                    const void *act, size_t a_stride, float *y, int64_t ldy) {
    const int pl = group ? NB_PL_W4G32R + (group == 64) + 2 * (group == 128) : NB_PL_Q4_0R;
    const int64_t nb = n / 32, nu = nb / 4;
    const size_t head = (size_t)nb_pl_head(n, pl);
    _Alignas(64) float f[NT_CHUNK * 16];
    for (int64_t r0 = 0; r0 < nr; r0 += RL) {
        const int rows = (int)(nr - r0 < RL ? nr - r0 : RL);
        const uint8_t *dw = (const uint8_t *)w + (size_t)r0 * w_stride, *q = dw + head;
        const uint8_t *zw = group ? dw + n / group * 2 : NULL;
        const uint8_t *nh = dw + (size_t)RL * w_stride, *nq = nh + head;
        for (int64_t t0 = 0; t0 < nt; t0 += NT_CHUNK) {
            const int T = (int)(nt - t0 < NT_CHUNK ? nt - t0 : NT_CHUNK);
            const uint8_t *a = (const uint8_t *)act + (size_t)t0 * a_stride;
            if (rows == RL) panel_nibbles(q, dw, zw, w_stride, RL, nu, head, a, a_stride, nb, f, T, group, nq, nh);
            else panel_nibbles(q, dw, zw, w_stride, rows, nu, head, a, a_stride, nb, f, T, group, nq, nh);
            const __mmask16 m = (__mmask16)((1u << rows) - 1);
            for (int t = 0; t < T; t++) {
                if (nu * 4 < nb)
                    for (int i = 0; i < rows; i++)
                        f[16 * t + i] += tail_blocks(dw + (size_t)i * w_stride, a + (size_t)t * a_stride, nb, pl);
                _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy + r0, m, _mm512_load_ps(f + 16 * t));
            }
        }
    }
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

/* Super-blocks [u0, u1) of the segment buffer (Q4_KR, or Q6_KR when six)
 * against tokens [t0, t0 + T) (pf: the next panel's share of unit u0, per
 * bytes a unit, or NULL; prefetch_share). */
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

/* The K-quants' vec_dot_rows driver (six: Q6_KR, else Q4_KR): 16-row
 * panels; per panel, tokens in chunks of 64 (the results tile),
 * super-blocks in segments that stay transposed for every pass of up to 8
 * tokens. */
AI void rows_drive(const int six, int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                   size_t a_stride, float *y, int64_t ldy) {
    const int64_t nu = n / 256;
    _Alignas(64) union {
        tsuper k[SEG];
        tsuper6 k6[SEG];
    } buf;
    _Alignas(64) float yt[64 * 16];
    for (int64_t r0 = 0; r0 < nr; r0 += RL) {
        const int rows = (int)(nr - r0 < RL ? nr - r0 : RL);
        const uint8_t *dw = (const uint8_t *)w + (size_t)r0 * w_stride;
        const uint8_t *next = (const uint8_t *)w + (size_t)(r0 + RL) * w_stride;
        const uint64_t pf_step = nu ? ((uint64_t)RL * w_stride / (uint64_t)nu + 63) & ~(uint64_t)63 : 0;
        for (int64_t c0 = 0; c0 < nt; c0 += 64) {
            const int64_t nc = nt - c0 < 64 ? nt - c0 : 64;
            const uint8_t *ac = (const uint8_t *)act + (size_t)c0 * a_stride;
            memset(yt, 0, (size_t)nc * 16 * sizeof(float));
            for (int64_t u0 = 0; u0 < nu; u0 += SEG) {
                const int64_t u1 = u0 + SEG < nu ? u0 + SEG : nu;
                for (int64_t u = u0; u < u1; u++) {
                    if (!six) {
                        if (rows == RL) load_super(dw, w_stride, RL, u, &buf.k[u - u0]);
                        else load_super(dw, w_stride, rows, u, &buf.k[u - u0]);
                    } else {
                        if (rows == RL) load_super6(dw, w_stride, RL, u, &buf.k6[u - u0]);
                        else load_super6(dw, w_stride, rows, u, &buf.k6[u - u0]);
                    }
                }
                for (int64_t t0 = 0; t0 < nc; t0 += TT) {
                    /* the next panel (16 rows further, contiguous), a share per unit in
                     * the first pass: this one is read as 32-48 short streams, too many
                     * for the hardware prefetchers */
                    const char *pf = c0 == 0 && t0 == 0 ? (const char *)next + (uint64_t)u0 * pf_step : NULL;
                    switch (nc - t0 < TT ? nc - t0 : TT) {
                    case 1: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 1, pf, pf_step); break;
                    case 2: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 2, pf, pf_step); break;
                    case 3: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 3, pf, pf_step); break;
                    case 4: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 4, pf, pf_step); break;
                    case 5: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 5, pf, pf_step); break;
                    case 6: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 6, pf, pf_step); break;
                    case 7: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 7, pf, pf_step); break;
                    default: segment_supers(&buf, six, u0, u1, ac, a_stride, t0, yt, 8, pf, pf_step); break;
                    }
                }
            }
            const __mmask16 m = (__mmask16)((1u << rows) - 1);
            for (int64_t t = 0; t < nc; t++)
                _mm512_mask_storeu_ps(y + (size_t)(c0 + t) * (size_t)ldy + r0, m, _mm512_load_ps(yt + 16 * t));
        }
    }
}

void nb_q4_0r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    nibble_rows(0, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

void nb_q4_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    rows_drive(0, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

void nb_q6_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy) {
    rows_drive(1, n, nr, w, w_stride, nt, act, a_stride, y, ldy);
}

#define ROWS_W4G(name, group)                                                                                  \
    void name(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act, size_t a_stride, \
              float *y, int64_t ldy) {                                                                         \
        nibble_rows(group, n, nr, w, w_stride, nt, act, a_stride, y, ldy);                                     \
    }
ROWS_W4G(nb_w4g32r_rows_avx512, 32)
ROWS_W4G(nb_w4g64r_rows_avx512, 64)
ROWS_W4G(nb_w4g128r_rows_avx512, 128)
