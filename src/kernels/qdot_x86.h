/* x86 SIMD dot-product kernels, written once and compiled twice:
 * kernels/x86/qdot_avx2.c (AVX2 + FMA + F16C: maddubs/madd for u8 x s8) and
 * kernels/x86/qdot_avx512.c (same 256-bit code, but u8 x s8 sums with
 * AVX512-VNNI vpdpbusd, and NF4 with a 16-entry vpermps LUT). Include only
 * from those files, after defining:
 *   NB_QDOT_VNNI   0 or 1
 *   NB_QDOT_ISA    "avx2" / "avx512"
 *   NB_QDOT_TABLE  the name of the lookup function to define
 *
 * Integer formats: per 32-weight block the exact int32 sums sum(q*a) and,
 * where an offset or min needs it, sum(a), as 8 lanes; scaled by the block's
 * float scale into 8 float accumulators (fma) and reduced at the end. So the
 * integer parts equal the reference exactly and only the float summation
 * order differs. Weights q are kept unsigned (0..63) so u8 x s8 products
 * never saturate int16 (63*127*2 < 32767); offsets (Q4_0's 8, Q5_0's 16,
 * W4's zero point, Q6_K's 32) are applied through sum(a). Signed x signed
 * (Q8_0, W8) uses |x| and sign(a, x). */
#include <immintrin.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/qdot.h"
#include "base/blocks.h"
#include "quant/qtypes.h"
#include "quant/quant_ref.h"

/* F16C conversion (exact, same result as nb_fp16_to_fp32) */
#define H2F(h) _cvtsh_ss(h)

/* sum over groups of 4 bytes of u8*s8, as 8 int32 lanes */
static inline __m256i dot_us(__m256i u, __m256i s) {
#if NB_QDOT_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* signed x signed: |x| * sign(a, x) */
static inline __m256i dot_ss(__m256i x, __m256i a) {
    return dot_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(a, x));
}

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (weights 0..15), then high (16..31) */
static inline __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(15));
}

/* bit i of x -> byte i = 0x10 (set) or 0 */
static inline __m256i bits32_x16(uint32_t x) {
    __m256i v = _mm256_set1_epi32((int)x);
    const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    v = _mm256_shuffle_epi8(v, shuf);
    const __m256i bm = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Software prefetch of the weights nb_prefetch_bytes (kernels.h) ahead of
 * block p (`bytes` long): decode streams every weight once and these loops
 * are too short per byte for the hardware prefetcher to keep up
 * (measurements in docs/performance.md and docs/speed.md). */
static inline void prefetch_ahead(const void *p, int bytes) {
    for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + nb_prefetch_bytes + o, _MM_HINT_T0);
}

static const __m256i *ones_u8(void) {
    static const uint8_t o[32] __attribute__((aligned(32))) = {
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    return (const __m256i *)o;
}

/* acc += d * (sum(q*a) - off*sum(a)) [+ dm * sum(a)], q unsigned 0..31 */
static inline __m256 blk_u(__m256 acc, __m256i q, __m256i a, int off, float d, float dm) {
    __m256i s = dot_us(q, a);
    if (off) s = _mm256_sub_epi32(s, dot_us(_mm256_set1_epi8((char)off), a)); /* off*sum(a) */
    if (dm != 0.0f) {
        __m256i sa = dot_us(_mm256_load_si256(ones_u8()), a);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sa), _mm256_set1_ps(dm), acc);
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d), acc);
}

static void k_q4_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q4_0 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        if ((i & 3) == 0) prefetch_ahead(&x[i], 64);
        acc = blk_u(acc, nibbles32(x[i].qs), load32(y[i].qs), 8, H2F(x[i].d) * H2F(y[i].d), 0.0f);
    }
    *out = hsum_ps(acc);
}

static void k_q4_1(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q4_1 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const float da = H2F(y[i].d), m = H2F(x[i].m);
        acc = blk_u(acc, nibbles32(x[i].qs), load32(y[i].qs), 0, H2F(x[i].d) * da, m * da);
    }
    *out = hsum_ps(acc);
}

static void k_q5_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q5_0 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        __m256i q = _mm256_or_si256(nibbles32(x[i].qs), bits32_x16(qh));
        acc = blk_u(acc, q, load32(y[i].qs), 16, H2F(x[i].d) * H2F(y[i].d), 0.0f);
    }
    *out = hsum_ps(acc);
}

static void k_q5_1(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q5_1 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        const float da = H2F(y[i].d), m = H2F(x[i].m);
        __m256i q = _mm256_or_si256(nibbles32(x[i].qs), bits32_x16(qh));
        acc = blk_u(acc, q, load32(y[i].qs), 0, H2F(x[i].d) * da, m * da);
    }
    *out = hsum_ps(acc);
}

static void k_q8_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q8_0 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        if ((i & 1) == 0) prefetch_ahead(&x[i], 64);
        __m256i s = dot_ss(load32(x[i].qs), load32(y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(H2F(x[i].d) * H2F(y[i].d)), acc);
    }
    *out = hsum_ps(acc);
}

/* Q4_0 / Q8_0 for up to 4 rows x 4 tokens (vec_dot_mxn, kernels/qdot.h):
 * each weight block is loaded and unpacked once for all the tokens (small-
 * batch decode). Per token the operations and their order are k_q4_0's /
 * k_q8_0's, so the results are identical to one-token calls. */
static inline __attribute__((always_inline)) void q_0_tokens(int64_t n, const void *w, const uint8_t *a,
                                                             size_t a_stride, float *out, const int eight,
                                                             const int T) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q;
        float dw;
        if (eight) {
            const nb_block_q8_0 *x = (const nb_block_q8_0 *)w + i;
            if ((i & 1) == 0) prefetch_ahead(x, 64);
            q = load32(x->qs);
            dw = H2F(x->d);
        } else {
            const nb_block_q4_0 *x = (const nb_block_q4_0 *)w + i;
            if ((i & 3) == 0) prefetch_ahead(x, 64);
            q = nibbles32(x->qs);
            dw = H2F(x->d);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0 *y = (const nb_block_q8_0 *)(a + (size_t)t * a_stride) + i;
            if (eight) {
                __m256i s = dot_ss(q, load32(y->qs));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * H2F(y->d)), acc[t]);
            } else {
                acc[t] = blk_u(acc[t], q, load32(y->qs), 8, dw * H2F(y->d), 0.0f);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = hsum_ps(acc[t]);
}

static inline __attribute__((always_inline)) void q_0_mxn(int64_t n, int m, int nn, const void *w, size_t w_stride,
                                                          const void *act, size_t a_stride, float *out, size_t ldo,
                                                          const int eight) {
    for (int r = 0; r < m; r++) {
        const void *wr = (const uint8_t *)w + (size_t)r * w_stride;
        float *o = out + (size_t)r * ldo;
        switch (nn) {
        case 1: q_0_tokens(n, wr, act, a_stride, o, eight, 1); break;
        case 2: q_0_tokens(n, wr, act, a_stride, o, eight, 2); break;
        case 3: q_0_tokens(n, wr, act, a_stride, o, eight, 3); break;
        default: q_0_tokens(n, wr, act, a_stride, o, eight, 4); break;
        }
    }
}

static void k_q4_0_mxn(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, size_t a_stride,
                       float *out, size_t ldo) {
    q_0_mxn(n, m, nn, w, w_stride, act, a_stride, out, ldo, 0);
}

static void k_q8_0_mxn(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, size_t a_stride,
                       float *out, size_t ldo) {
    q_0_mxn(n, m, nn, w, w_stride, act, a_stride, out, ldo, 1);
}

static void k_w8(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_w8 *x = w;
    const nb_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        if ((i & 1) == 0) prefetch_ahead(&x[i], 64);
        __m256i s = dot_ss(load32(x[i].qs), load32(y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * H2F(y[i].d)), acc);
    }
    *out = hsum_ps(acc);
}

static void k_w8a8(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_w8 *x = w;
    const nb_block_w8 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        if ((i & 1) == 0) prefetch_ahead(&x[i], 64);
        __m256i s = dot_ss(load32(x[i].qs), load32(y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * y[i].d), acc);
    }
    *out = hsum_ps(acc);
}

static inline void k_w4(int64_t n, const void *w, const void *a, float *out, int group) {
    const uint8_t *x = w, *line = w;
    const nb_block_q8_0 *y = a;
    const size_t bb = NB_W4_BLOCK_BYTES(group);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < n / group; g++, x += bb) {
        /* each 64 bytes the groups reach, prefetched once (the groups are 20,
         * 36 or 68 bytes): without it W4G128 decode ran at 22% of the
         * roofline (docs/speed.md, session 30) */
        for (; line < x + bb; line += 64) prefetch_ahead(line, 64);
        nb_half dh;
        memcpy(&dh, x, 2);
        const float d = H2F(dh);
        const int z = x[2];
        for (int c = 0; c < group / 32; c++, y++) {
            acc = blk_u(acc, nibbles32(x + 4 + 16 * c), load32(y->qs), z, d * H2F(y->d), 0.0f);
        }
    }
    *out = hsum_ps(acc);
}
static void k_w4g32(int64_t n, const void *w, const void *a, float *o) { k_w4(n, w, a, o, 32); }
static void k_w4g64(int64_t n, const void *w, const void *a, float *o) { k_w4(n, w, a, o, 64); }
static void k_w4g128(int64_t n, const void *w, const void *a, float *o) { k_w4(n, w, a, o, 128); }

/* ---- Q2_K / Q3_K x Q8_K -------------------------------------------------------
 * Weight w = 128h + 32k + l: 2-bit level at bit 2k of qs[32h + l], group w/16
 * (16 groups of 16 weights, one scale each); Q3_K's third bit is hmask[l] bit
 * 4h + k. A 32-byte chunk (h, k) thus holds groups 8h + 2k (low 128-bit lane)
 * and 8h + 2k + 1 (high lane). Levels stay unsigned (Q2_K 0..3, Q3_K 0..7,
 * so maddubs pairs stay far below the int16 limit); Q3_K's -4 offset and
 * Q2_K's mins go through the Q8_K block sums. */

/* acc + sum over int16 pairs of maddubs(u, s) * sc16: the u8 x s8 sums of
 * each group times its scale (u <= 7: no int16 saturation). The scale has to
 * multiply 16-weight sums, so vpdpbusd (dot_us) would need a vpmulld after
 * it, which costs more than vpmaddubsw + vpmaddwd. With VNNI, `fused` does
 * the multiply-add by the scales with one vpdpwssd: Q2_K gains ~10% from it,
 * Q3_K (more shuffles and shifts per chunk) loses ~30%, so only Q2_K uses it
 * (bench/bench_qdot.c, measured side by side). */
static inline __m256i dot_us_sc(__m256i acc, __m256i u, __m256i s, __m256i sc16, int fused) {
    __m256i p = _mm256_maddubs_epi16(u, s);
#if NB_QDOT_VNNI
    if (fused) return _mm256_dpwssd_epi32(acc, p, sc16);
#else
    (void)fused;
#endif
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc16));
}

/* pshufb controls: from 8 int16 group scales (both lanes), take scale 2k into
 * every int16 of the low lane and scale 2k + 1 into the high lane */
static inline void k23_scale_ctrl(__m256i ctrl[4]) {
    for (int k = 0; k < 4; k++) {
        const short lo = (short)((4 * k) | ((4 * k + 1) << 8)), hi = (short)((4 * k + 2) | ((4 * k + 3) << 8));
        ctrl[k] = _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi));
    }
}

static void k_q2_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q2_K *x = w;
    const nb_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256i ctrl[4];
    k23_scale_ctrl(ctrl);
    for (int64_t i = 0; i < n / 256; i++) {
        prefetch_ahead(&x[i], (int)sizeof x[i]);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(15)));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
        /* sum_g m_g * bsum_g as 8 int32 lanes */
        const __m256i msum = _mm256_madd_epi16(mn16, load32(y[i].bsums));
        __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = load32(x[i].qs + 32 * h);
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                              : _mm256_castsi256_si128(sc16));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i qk = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2);
                isum = dot_us_sc(isum, qk, load32(y[i].qs + 128 * h + 32 * k), _mm256_shuffle_epi8(sch, ctrl[k]), 1);
            }
        }
        const float da = y[i].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(H2F(x[i].d) * da), acc);
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(H2F(x[i].dmin) * da), acc);
    }
    *out = hsum_ps(acc);
}

/* The 16 signed Q3_K scales (6-bit stored - 32) as int16: low nibbles of
 * bytes 0..7 are scales 0..7, high nibbles scales 8..15; byte 8 + j%4 holds
 * the top two bits of scale j at bit 2*(j/4). */
static inline __m256i q3_scales16(const uint8_t *p) {
    uint32_t a[3], s[4];
    memcpy(a, p, 12);
    s[0] = (a[0] & 0x0f0f0f0fu) | ((a[2] & 0x03030303u) << 4);
    s[1] = (a[1] & 0x0f0f0f0fu) | (((a[2] >> 2) & 0x03030303u) << 4);
    s[2] = ((a[0] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 4) & 0x03030303u) << 4);
    s[3] = ((a[1] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 6) & 0x03030303u) << 4);
    __m128i b;
    memcpy(&b, s, 16);
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), _mm256_set1_epi16(32));
}

static void k_q3_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q3_K *x = w;
    const nb_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m2 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
    __m256i ctrl[4];
    k23_scale_ctrl(ctrl);
    for (int64_t i = 0; i < n / 256; i++) {
        prefetch_ahead(&x[i], (int)sizeof x[i]);
        const __m256i sc16 = q3_scales16(x[i].scales);
        /* levels are stored +4: subtract 4 * sum_g sc_g * bsum_g */
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_slli_epi32(_mm256_madd_epi16(sc16, load32(y[i].bsums)), 2));
        const __m256i hm = load32(x[i].hmask);
        /* unrolled, so every shift count is an immediate */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i q = load32(x[i].qs + 32 * h);
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                              : _mm256_castsi256_si128(sc16));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i qk = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2);
                /* bit j = 4h + k of each hmask byte to bit 2 in one 16-bit shift (each
                 * byte's own bit lands there, the neighbour's are masked off) */
                const int j = 4 * h + k;
                qk = _mm256_or_si256(qk, _mm256_and_si256(j <= 2 ? _mm256_slli_epi16(hm, 2 - j)
                                                                 : _mm256_srli_epi16(hm, j - 2), b2));
                isum = dot_us_sc(isum, qk, load32(y[i].qs + 128 * h + 32 * k), _mm256_shuffle_epi8(sch, ctrl[k]), 0);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(H2F(x[i].d) * y[i].d), acc);
    }
    *out = hsum_ps(acc);
}

/* Q4_K / Q5_K x Q8_K */
static inline void k_q45_K(int64_t n, const void *w, const void *a, float *out, int five) {
    const nb_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    float macc = 0;
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    for (int64_t i = 0; i < n / 256; i++) {
        prefetch_ahead((const uint8_t *)w + i * (five ? sizeof(nb_block_q5_K) : sizeof(nb_block_q4_K)),
                       five ? (int)sizeof(nb_block_q5_K) : (int)sizeof(nb_block_q4_K));
        const uint8_t *sc12, *qs, *qh = NULL;
        float dw, dmw;
        if (five) {
            const nb_block_q5_K *x = (const nb_block_q5_K *)w + i;
            sc12 = x->scales; qs = x->qs; qh = x->qh; dw = H2F(x->d); dmw = H2F(x->dmin);
        } else {
            const nb_block_q4_K *x = (const nb_block_q4_K *)w + i;
            sc12 = x->scales; qs = x->qs; dw = H2F(x->d); dmw = H2F(x->dmin);
        }
        /* the eight 6-bit scales and mins (12 bytes: for j < 4 scale j is
         * the low 6 bits of byte j and min j of byte j + 4; for j >= 4 their
         * low 4 bits are byte j + 4's low / high nibble and their top 2 bits
         * the top bits of bytes j - 4 / j) unpacked four at a time in 32-bit
         * words, and the mins' sum against the activations' 16-element sums
         * in one madd: a third of the scalar work of byte-by-byte unpacking,
         * which this loop is bound by (docs/speed.md, session 30) */
        uint32_t u[3];
        memcpy(u, sc12, sizeof u);
        const uint32_t sc_lo = u[0] & 0x3f3f3f3f, mn_lo = u[1] & 0x3f3f3f3f;
        const uint32_t sc_hi = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
        const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
        uint8_t sc[8];
        memcpy(sc, &sc_lo, 4);
        memcpy(sc + 4, &sc_hi, 4);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0));
        /* |a 16-element sum| <= 2048, so a pair fits int16 */
        const __m128i bsum2 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(const void *)y[i].bsums),
                                             _mm_loadu_si128((const __m128i *)(const void *)(y[i].bsums + 8)));
        __m128i m4s = _mm_madd_epi16(mins, bsum2);
        m4s = _mm_add_epi32(m4s, _mm_shuffle_epi32(m4s, 0x4e));
        const int msum = _mm_cvtsi128_si32(_mm_add_epi32(m4s, _mm_shuffle_epi32(m4s, 0xb1)));
        __m256i isum = _mm256_setzero_si256();
        __m256i hb = qh ? load32(qh) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (qh) { /* bits 2c and 2c + 1 of each qh byte to bit 4: one shift (in 16-bit lanes
                       * the bytes' own bits land on bit 4, the neighbour's are masked off) */
                lo = _mm256_or_si256(lo, _mm256_and_si256(c <= 2 ? _mm256_slli_epi16(hb, 4 - 2 * c)
                                                                  : _mm256_srli_epi16(hb, 2 * c - 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(c <= 1 ? _mm256_slli_epi16(hb, 3 - 2 * c)
                                                                  : _mm256_srli_epi16(hb, 2 * c - 3), b4));
            }
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(y[i].qs + 64 * c)),
                                           _mm256_set1_epi16((short)sc[2 * c]));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(y[i].qs + 64 * c + 32)),
                                           _mm256_set1_epi16((short)sc[2 * c + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * y[i].d), acc);
        macc += dmw * y[i].d * (float)msum;
    }
    *out = hsum_ps(acc) - macc;
}
static void k_q4_K(int64_t n, const void *w, const void *a, float *o) { k_q45_K(n, w, a, o, 0); }
static void k_q5_K(int64_t n, const void *w, const void *a, float *o) { k_q45_K(n, w, a, o, 1); }

static void k_q6_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q6_K *x = w;
    const nb_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / 256; i++) {
        prefetch_ahead(&x[i], (int)sizeof x[i]);
        int msum = 0;
        for (int g = 0; g < 16; g++) msum += x[i].scales[g] * y[i].bsums[g];
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[i].ql + 64 * half;
            const int8_t *sc = x[i].scales + 8 * half, *ay = y[i].qs + 128 * half;
            __m256i l0 = load32(ql), l1 = load32(ql + 32), h = load32(x[i].qh + 32 * half);
            __m256i lows[4] = {
                _mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int k = 0; k < 4; k++) {
                __m256i hk = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m2);
                __m256i q = _mm256_or_si256(lows[k], _mm256_slli_epi16(hk, 4));
                __m256i p = _mm256_maddubs_epi16(q, load32(ay + 32 * k));
                /* i16 lanes 0..7 are weights 0..15 (scale 2k), 8..15 weights 16..31 (2k+1) */
                __m256i s = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * k]), _mm_set1_epi16(sc[2 * k + 1]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        /* q - 32: subtract 32 * sum_g sc_g * bsum_g */
        isum = _mm256_sub_epi32(isum, _mm256_setr_epi32(32 * msum, 0, 0, 0, 0, 0, 0, 0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(H2F(x[i].d) * y[i].d), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- float formats --------------------------------------------------------- */

static void k_nf4(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_nf4 *x = w;
    const float *y = a;
    __m256 acc = _mm256_setzero_ps();
#if NB_QDOT_VNNI
    const __m512 lut = _mm512_loadu_ps(nb_nf4_levels);
    for (int64_t i = 0; i < n / 64; i++, y += 64) {
        __m256i q = load32(x[i].qs);
        __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
        __m512 s = _mm512_setzero_ps();
        for (int k = 0; k < 2; k++) {
            __m128i lk = k ? _mm256_extracti128_si256(lo, 1) : _mm256_castsi256_si128(lo);
            __m128i hk = k ? _mm256_extracti128_si256(hi, 1) : _mm256_castsi256_si128(hi);
            __m512 wl = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(lk), lut);
            __m512 wh = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(hk), lut);
            s = _mm512_fmadd_ps(wl, _mm512_loadu_ps(y + 16 * k), s);
            s = _mm512_fmadd_ps(wh, _mm512_loadu_ps(y + 32 + 16 * k), s);
        }
        __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
        acc = _mm256_fmadd_ps(s8, _mm256_set1_ps(x[i].absmax), acc);
    }
#else
    const __m256 lut0 = _mm256_loadu_ps(nb_nf4_levels), lut1 = _mm256_loadu_ps(nb_nf4_levels + 8);
    for (int64_t i = 0; i < n / 64; i++, y += 64) {
        __m256 s = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            __m128i b = _mm_loadl_epi64((const __m128i *)(x[i].qs + 8 * k));
            __m256i idx = _mm256_cvtepu8_epi32(b);
            __m256i il = _mm256_and_si256(idx, _mm256_set1_epi32(15));
            __m256i ih = _mm256_srli_epi32(idx, 4);
            __m256 wl = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lut0, il), _mm256_permutevar8x32_ps(lut1, il),
                                         _mm256_castsi256_ps(_mm256_slli_epi32(il, 28)));
            __m256 wh = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lut0, ih), _mm256_permutevar8x32_ps(lut1, ih),
                                         _mm256_castsi256_ps(_mm256_slli_epi32(ih, 28)));
            s = _mm256_fmadd_ps(wl, _mm256_loadu_ps(y + 8 * k), s);
            s = _mm256_fmadd_ps(wh, _mm256_loadu_ps(y + 32 + 8 * k), s);
        }
        acc = _mm256_fmadd_ps(s, _mm256_set1_ps(x[i].absmax), acc);
    }
#endif
    *out = hsum_ps(acc);
}

/* 8 fp8 bytes -> 8 floats via fp16: E5M2 is the top byte of an fp16; E4M3's
 * bits shifted into an fp16 give the value * 2^-8 (exponent bias 15 vs 7),
 * so the block scale takes the factor 256. E4M3's NaN code (S.1111.111) has
 * no fp16 image this way: blocks holding it go through the scalar path. */
static inline __m256 fp8x8(const uint8_t *p, int e4m3) {
    __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    __m128i h;
    if (e4m3) {
        __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
        h = _mm_or_si128(sign, _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7));
    } else {
        h = _mm_slli_epi16(b, 8);
    }
    return _mm256_cvtph_ps(h);
}

static inline void k_fp8(int64_t n, const void *w, const void *a, float *out, int e4m3) {
    const nb_block_fp8 *x = w;
    const float *y = a;
    __m256 acc = _mm256_setzero_ps();
    float sacc = 0;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        if (e4m3) {
            __m256i b = _mm256_and_si256(load32(x[i].f8), _mm256_set1_epi8(0x7f));
            if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, _mm256_set1_epi8(0x7f)))) {
                float s = 0;
                for (int j = 0; j < 32; j++) s += nb_e4m3_to_fp32(x[i].f8[j]) * y[j];
                sacc += x[i].d * s;
                continue;
            }
        }
        __m256 s = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) s = _mm256_fmadd_ps(fp8x8(x[i].f8 + 8 * k, e4m3), _mm256_loadu_ps(y + 8 * k), s);
        acc = _mm256_fmadd_ps(s, _mm256_set1_ps(e4m3 ? x[i].d * 256.0f : x[i].d), acc);
    }
    *out = hsum_ps(acc) + sacc;
}
static void k_e4m3(int64_t n, const void *w, const void *a, float *o) { k_fp8(n, w, a, o, 1); }
static void k_e5m2(int64_t n, const void *w, const void *a, float *o) { k_fp8(n, w, a, o, 0); }

/* ---- table -------------------------------------------------------------------- */

static void act_f32_copy(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof *x); }

#define XQ8 NB_Q8_0, nb_quant_q8_0_act
#define XQK NB_Q8_K, nb_quant_q8_K
#define XQT NB_Q8_T, nb_quant_q8_T
#define XF32 NB_F32, act_f32_copy

static const struct { nb_dtype type; nb_qdot qd; } x86_tab[] = {
    {NB_Q4_0, {XQ8, k_q4_0, k_q4_0_mxn, NB_QDOT_ISA, NULL}},
    {NB_Q4_1, {XQ8, k_q4_1, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q5_0, {XQ8, k_q5_0, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q5_1, {XQ8, k_q5_1, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q8_0, {XQ8, k_q8_0, k_q8_0_mxn, NB_QDOT_ISA, NULL}},
    {NB_Q2_K, {XQK, k_q2_K, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q3_K, {XQK, k_q3_K, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q4_K, {XQK, k_q4_K, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q5_K, {XQK, k_q5_K, NULL, NB_QDOT_ISA, NULL}},
    {NB_Q6_K, {XQK, k_q6_K, NULL, NB_QDOT_ISA, NULL}},
    {NB_W8, {XQ8, k_w8, NULL, NB_QDOT_ISA, NULL}},
    {NB_W8A8, {XQT, k_w8a8, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G32, {XQ8, k_w4g32, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G64, {XQ8, k_w4g64, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G128, {XQ8, k_w4g128, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G32S, {XQ8, k_w4g32, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G64S, {XQ8, k_w4g64, NULL, NB_QDOT_ISA, NULL}},
    {NB_W4G128S, {XQ8, k_w4g128, NULL, NB_QDOT_ISA, NULL}},
    {NB_NF4, {XF32, k_nf4, NULL, NB_QDOT_ISA, NULL}},
    {NB_FP8_E4M3, {XF32, k_e4m3, NULL, NB_QDOT_ISA, NULL}},
    {NB_FP8_E5M2, {XF32, k_e5m2, NULL, NB_QDOT_ISA, NULL}},
};

const nb_qdot *NB_QDOT_TABLE(nb_dtype t) {
    for (size_t i = 0; i < sizeof x86_tab / sizeof x86_tab[0]; i++) {
        if (x86_tab[i].type == t) return &x86_tab[i].qd;
    }
    return NULL;
}
