/* AVX2 kernels over the repacked layouts of kernels/repack.h (Q4_0R, Q8_0R,
 * Q4_KR, Q6_KR): decode dots and the batched int8 GEMM, on 256-bit vectors.
 * Included twice: by repack_avx2.c with RP_VNNI 0 (u8 x s8 sums by
 * vpmaddubsw + vpmaddwd, any AVX2 CPU) and by repack_vnni_avx2.c with
 * RP_VNNI 1 (AVX-VNNI's 256-bit vpdpbusd, detected at run time: base/cpu.h
 * avxvnni). RP_FN(name) names the functions nb_<name>_avx2 / _avxvnni.
 *
 * The layouts are the AVX-512 kernels' (a 64-byte vector of those is two
 * 32-byte halves here): weights unsigned (Q4 0..15, Q8 q+128, Q6 0..63),
 * activations signed. vpmaddubsw adds two u8*s8 products into a saturating
 * int16, exact while both weights are <= 127 - 15 and 63 are; Q8_0R's
 * unsigned q+128 are not, so without VNNI its weights are turned back into
 * signed q and multiplied as |q| times the activation with q's sign (the
 * activations are Q8_0P, within +-127). With 4-bit weights a pair is at
 * most 2*15*128 = 3840, so eight 4-byte steps (one 32-weight block) add up
 * in int16 (30720) before one vpmaddwd widens them. Integer sums are exact
 * in both variants, equal to the scalar references'; only the float
 * summation order differs.
 *
 * GEMM tile: two weight rows x one group of 16 packed tokens (two 8-lane
 * halves): every activation load feeds two dots and every weight broadcast
 * two - and two groups (32 tokens) at once where there are two, so that
 * each broadcast feeds four (tile_pair). Blocks are unpacked once (for both
 * groups) into 32 (Q4_0R) or 256 (K types) bytes on the stack and
 * broadcast from there. */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "kernels/x86/prefetch_here.h"
#include "kernels/x86/planar_kind.h"
#include "base/blocks.h"


#define RP_CAT_(a, b, c) a##b##c
#define RP_CAT(a, b, c) RP_CAT_(a, b, c)
#if RP_VNNI
#define RP_FN(name) RP_CAT(nb_, name, _avxvnni)
#else
#define RP_FN(name) RP_CAT(nb_, name, _avx2)
#endif

/* acc + per 32-bit lane the sum of four u8 x s8 products (weights <= 127
 * without VNNI, see above). */
static inline __m256i dp(__m256i acc, __m256i w, __m256i a) {
#if RP_VNNI
    return _mm256_dpbusd_avx_epi32(acc, w, a);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
#endif
}

/* Q8_0R: acc + the sums of (w - Q8OFF) * a: with VNNI the unsigned weights
 * as they are (the offset comes off later, Q8OFF = 128), else through |q|
 * and the sign (no offset left). */
#if RP_VNNI
#define Q8OFF 128
static inline __m256i dp8(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_avx_epi32(acc, w, a); }
#else
#define Q8OFF 0
static inline __m256i dp8(__m256i acc, __m256i w, __m256i a) {
    __m256i s = _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
    return dp(acc, _mm256_abs_epi8(s), _mm256_sign_epi8(a, s));
}
#endif

static inline __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline __m256i bcast4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32((int)v);
}
static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float hsum128(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* ---- decode: Q4_0R / Q8_0R x Q8_0P ------------------------------------- */


/* The lane sums of four blocks' vectors as [b0 b1 b2 b3 | b0 b1 b2 b3]
 * (two partial sums per block) by unpacks and adds: Zen 5 issues vphaddd
 * once per two cycles, unpacks and adds four a cycle (Q8_0R's decode dot
 * from L2 68-69 -> 76-80 GB/s with AVX-VNNI; Q4_0R, bound by its vector
 * operations in all, unchanged). */
static inline __m256i fold4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    const __m256i s01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
    const __m256i s23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
}

#if !RP_VNNI
/* fold4 on vpmaddubsw's int16 pair sums, widened by one vpmaddwd at the
 * end instead of one per vector: each int16 it widens sums 8 products of
 * 4-bit weights, |.| <= 8*15*128 < 2^15, so the lanes are fold4's exactly.
 * 3 of the 4-bit dots' 27 vector operations per 128 weights fewer: plain
 * AVX2 Q4_0R on Zen 3 is bound by them (one thread from L2 18 GB/s, two
 * threads' memory about 33). */
static inline __m256i fold4_16(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    const __m256i s01 = _mm256_add_epi16(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
    const __m256i s23 = _mm256_add_epi16(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
    const __m256i s = _mm256_add_epi16(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}
#endif

/* Four blocks' lane sums, folded (fold4). With VNNI (int32 sums) Q4_0R's
 * high nibbles multiply in place, as 16 q: no shift, and their blocks'
 * scales carry the 1/16 (exact: 16 x a block's sum stays below 2^24, and
 * the power of two only moves the exponent). vpmaddubsw's int16 pairs would
 * saturate on 16 q, so plain AVX2 shifts. In lane order (`lanes`: Q4_0L,
 * W4G*L) every vector holds all four blocks, so the high nibbles are
 * shifted there too. */
#define RP_HI16 RP_VNNI
/* The weights of a group of 4-bit blocks as four byte vectors: low nibbles
 * of the two 32-byte loads (blocks i, i+1), then their high nibbles (i+2,
 * i+3; with VNNI in place, as 16 q) - in lane order vectors 0 .. 3. */
static inline __attribute__((always_inline)) void nib4(const uint8_t *qi, __m256i u[4], const int lanes) {
    const __m256i m4 = _mm256_set1_epi8(15), v0 = loadu(qi), v1 = loadu(qi + 32);
    u[0] = _mm256_and_si256(v0, m4);
    u[1] = _mm256_and_si256(v1, m4);
    if (RP_HI16 && !lanes) {
        u[2] = _mm256_andnot_si256(m4, v0);
        u[3] = _mm256_andnot_si256(m4, v1);
    } else {
        u[2] = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
        u[3] = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
    }
}

/* nib4's blocks against one token's activations xi: lanes [b0 b1 b2 b3 | b0
 * b1 b2 b3], two partial sums per block. Lane order needs no fold: the
 * products of all four vectors add in place - without VNNI in int16 (8
 * per lane, |.| <= 8*15*127), left there (RP_LANES16: int16 pairs, widened
 * by widen4 or join8). */
#define RP_LANES16(kind) (!RP_VNNI && ((kind) & NB_PL_LANES) && NB_PL_NIBBLES(kind))
static inline __attribute__((always_inline)) __m256i sums4(const __m256i u[4], const int8_t *xi, const int lanes) {
    const __m256i z = _mm256_setzero_si256();
    if (lanes) {
#if RP_VNNI
        return dp(dp(dp(dp(z, u[0], loadu(xi)), u[1], loadu(xi + 32)), u[2], loadu(xi + 64)), u[3], loadu(xi + 96));
#else
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(u[0], loadu(xi)), _mm256_maddubs_epi16(u[1], loadu(xi + 32)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(u[2], loadu(xi + 64)), _mm256_maddubs_epi16(u[3], loadu(xi + 96)));
        return _mm256_add_epi16(s01, s23);
#endif
    }
#if RP_HI16
    return fold4(dp(z, u[0], loadu(xi)), dp(z, u[1], loadu(xi + 32)), dp(z, u[2], loadu(xi + 64)),
                 dp(z, u[3], loadu(xi + 96)));
#else
    (void)z;
    return fold4_16(_mm256_maddubs_epi16(u[0], loadu(xi)), _mm256_maddubs_epi16(u[1], loadu(xi + 32)),
                    _mm256_maddubs_epi16(u[2], loadu(xi + 64)), _mm256_maddubs_epi16(u[3], loadu(xi + 96)));
#endif
}

/* A group's sums (group4, sums4) as int32 lanes. */
static inline __attribute__((always_inline)) __m256i widen4(__m256i h, const int kind) {
    return RP_LANES16(kind) ? _mm256_madd_epi16(h, _mm256_set1_epi16(1)) : h;
}
/* Two groups' sums (blocks i..i+3, i+4..i+7) as [b0 .. b7] in int32; int16
 * pairs add before one vpmaddwd (16 products, |.| <= 16*15*127 < 2^15). */
static inline __attribute__((always_inline)) __m256i join8(__m256i h0, __m256i h1, const int kind) {
    const __m256i lo = _mm256_permute2x128_si256(h0, h1, 0x20), hi = _mm256_permute2x128_si256(h0, h1, 0x31);
    if (RP_LANES16(kind)) return _mm256_madd_epi16(_mm256_add_epi16(lo, hi), _mm256_set1_epi16(1));
    return _mm256_add_epi32(lo, hi);
}

static inline __attribute__((always_inline)) __m256i group4(const uint8_t *qi, const int8_t *xi, const int kind) {
    const __m256i z = _mm256_setzero_si256();
    if (NB_PL_NIBBLES(kind)) {
        __m256i u[4];
        nib4(qi, u, kind & NB_PL_LANES);
        return sums4(u, xi, kind & NB_PL_LANES);
    }
    if (kind & NB_PL_LANES) /* Q8_0L, W8L: the four vectors' sums add in place */
        return dp8(dp8(dp8(dp8(z, loadu(qi), loadu(xi)), loadu(qi + 32), loadu(xi + 32)), loadu(qi + 64), loadu(xi + 64)),
                   loadu(qi + 96), loadu(xi + 96));
    return fold4(dp8(z, loadu(qi), loadu(xi)), dp8(z, loadu(qi + 32), loadu(xi + 32)),
                 dp8(z, loadu(qi + 64), loadu(xi + 64)), dp8(z, loadu(qi + 96), loadu(xi + 96)));
}

/* Eight blocks per step: two groups' folded sums added into [b0 .. b7],
 * converted and scaled by one vector (four blocks once at the end when nb
 * % 8 >= 4). The unsigned offset (8, Q8OFF, or W4G*R's per-group z) comes
 * off through the activations' d*sum (repack.h), in the same accumulator:
 * with a second one per row the M = 4 loop spilled to the stack. `kind`: the
 * planar row (planar_kind.h). M rows (w_stride bytes apart) are read in
 * lockstep, a step of each in turn (decode's several streams per thread,
 * matmul.c); each row's operations and their order do not depend on M, so
 * M = 1 is the decode dot and the results are identical to M of them. */
static inline __attribute__((always_inline)) void planar_dot_rows_pf(int64_t n, const void *w, size_t w_stride,
                                                                     const void *a, float *out, size_t ldo,
                                                                     const int kind, const int M, const int PF2) {
    const int four = NB_PL_NIBBLES(kind);
    const int64_t nb = n / 32, qs = four ? 16 : 32;
    const int8_t *x = a;
    const float *ad = (const float *)((const uint8_t *)a + nb * 32), *ads = ad + nb;
    const float hf = four && RP_HI16 && !(kind & NB_PL_LANES) ? 1.0f / 16 : 1.0f;
    const __m256 hs = _mm256_setr_ps(1, 1, hf, hf, 1, 1, hf, hf);
    /* the 8-bit rows' offset is Q8OFF here (0: their quants were made signed) */
    const float offset = four ? NB_PL_OFFSET(kind) : (float)Q8OFF;
    const uint8_t *wr[4], *q[4];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) {
        wr[r] = (const uint8_t *)w + (size_t)r * w_stride;
        q[r] = wr[r] + nb_pl_head(n, kind);
        acc[r] = _mm256_setzero_ps();
    }
    const int pf = nb_prefetch_bytes, pf2 = PF2 ? nb_prefetch_l2_bytes : 0;
    int64_t i = 0;
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) nb_pl_row_start(wr[r], n, kind, pf, pf2);
    for (; i + 8 <= nb; i += 8) {
        /* the activations' scales and offset terms, once for all M rows */
        const __m256 adh = _mm256_mul_ps(_mm256_loadu_ps(ad + i), hs);
        const __m256 ado = _mm256_mul_ps(_mm256_loadu_ps(ads + i), _mm256_set1_ps(offset));
#pragma GCC unroll 4
        for (int r = 0; r < M; r++) {
            const uint8_t *qi = q[r] + i * qs;
            /* each line's prefetch beside its loads (prefetch_here.h) */
            nb_prefetch_ahead(qi, pf, pf2);
            if (!four) nb_prefetch_ahead(qi + 64, pf, pf2);
            const __m256i h0 = group4(qi, x + i * 32, kind);
            nb_prefetch_ahead(qi + 4 * qs, pf, pf2);
            if (!four) nb_prefetch_ahead(qi + 4 * qs + 64, pf, pf2);
            const __m256i h1 = group4(qi + 4 * qs, x + i * 32 + 128, kind);
            const __m256i h = join8(h0, h1, kind);
            __m256 dw, dz;
            nb_pl_scales8(wr[r], n, i, kind, &dw, &dz);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(dw, adh), acc[r]);
            if (offset != 0) acc[r] = _mm256_fnmadd_ps(dz, ado, acc[r]);
        }
    }
    const int64_t i8 = i;
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) {
        i = i8;
        if (i + 4 <= nb) {
            const __m256i h = widen4(group4(q[r] + i * qs, x + i * 32, kind), kind);
            __m128 dw, dz;
            nb_pl_scales4(wr[r], n, i, kind, &dw, &dz);
            const __m128 sc = _mm_mul_ps(_mm_mul_ps(dw, _mm_loadu_ps(ad + i)), _mm256_castps256_ps128(hs));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_set_m128(sc, sc), acc[r]);
            if (offset != 0) {
                const __m128 ado4 = _mm_mul_ps(_mm_loadu_ps(ads + i), _mm_set1_ps(offset));
                acc[r] = _mm256_sub_ps(acc[r], _mm256_zextps128_ps256(_mm_mul_ps(dz, ado4)));
            }
            i += 4;
        }
        float sum = hsum256(acc[r]);
        for (; i < nb; i++)
            sum += nb_pl_scale(wr[r], n, i, kind) * ad[i] *
                   (float)(four ? nb_q4_0r_tail_isum(q[r], x, i, nb_pl_zero(wr[r], n, i, kind))
                                : nb_q8_0r_tail_isum(q[r], x, i));
        out[(size_t)r * ldo] = sum;
    }
}

/* The 4-bit rows without the L2 prefetch's test in their loop (PF2 = 0)
 * where no L2 distance is set. They are bound by their vector operations
 * (AVX-VNNI Q4_0R from L2, one thread: 35 GB/s against the AVX-512 dot's
 * 56 on the Zen 5 guest); with the test in the loop, and a second
 * accumulator per row, GCC spilled the M = 4 loop to the stack, and the
 * loop without both reads 9-13% more from L2 and up to 16% more in decode
 * (docs/speed.md, session 40). The 8-bit rows read at the memory's rate
 * either way and keep the one loop. */
static inline __attribute__((always_inline)) void planar_dot_rows(int64_t n, const void *w, size_t w_stride,
                                                                  const void *a, float *out, size_t ldo,
                                                                  const int kind, const int M) {
    if (nb_prefetch_l2_bytes || !NB_PL_NIBBLES(kind)) planar_dot_rows_pf(n, w, w_stride, a, out, ldo, kind, M, 1);
    else planar_dot_rows_pf(n, w, w_stride, a, out, ldo, kind, M, 0);
}

/* One 4-bit planar row against T <= RP_TOK tokens (activations a_stride
 * bytes apart, results to out[0..T-1]): each step's weights are loaded and
 * unpacked once (nib4) for all T - without VNNI each token's dot alone
 * spends a third of its vector operations on that. Per token the
 * operations and their order are planar_dot_rows' (M = 1), so every result
 * equals the one-token dot's bit for bit. */
#define RP_TOK 4
static inline __attribute__((always_inline)) void planar_dot_tokens(int64_t n, const void *w, const void *act,
                                                                    size_t a_stride, float *out, const int kind,
                                                                    const int T) {
    const int64_t nb = n / 32, qs = 16;
    const int lanes = kind & NB_PL_LANES;
    const float hf = RP_HI16 && !lanes ? 1.0f / 16 : 1.0f;
    const __m256 hs = _mm256_setr_ps(1, 1, hf, hf, 1, 1, hf, hf);
    const float offset = NB_PL_OFFSET(kind);
    const uint8_t *wr = w, *q = wr + nb_pl_head(n, kind);
    const int8_t *x[RP_TOK];
    const float *ad[RP_TOK], *ads[RP_TOK];
    __m256 acc[RP_TOK];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        x[t] = (const int8_t *)((const uint8_t *)act + (size_t)t * a_stride);
        ad[t] = (const float *)((const uint8_t *)x[t] + nb * 32);
        ads[t] = ad[t] + nb;
        acc[t] = _mm256_setzero_ps();
    }
    const int pf = nb_prefetch_bytes, pf2 = nb_prefetch_l2_bytes;
    nb_pl_row_start(wr, n, kind, pf, pf2);
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        const uint8_t *qi = q + i * qs;
        __m256i u[4], h0[RP_TOK];
        nb_prefetch_ahead(qi, pf, pf2);
        nib4(qi, u, lanes);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) h0[t] = sums4(u, x[t] + i * 32, lanes);
        nb_prefetch_ahead(qi + 4 * qs, pf, pf2);
        nib4(qi + 4 * qs, u, lanes);
        __m256 dw, dz;
        nb_pl_scales8(wr, n, i, kind, &dw, &dz);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256i h1 = sums4(u, x[t] + i * 32 + 128, lanes);
            const __m256i h = join8(h0[t], h1, kind);
            const __m256 adh = _mm256_mul_ps(_mm256_loadu_ps(ad[t] + i), hs);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(dw, adh), acc[t]);
            if (offset != 0)
                acc[t] = _mm256_fnmadd_ps(dz, _mm256_mul_ps(_mm256_loadu_ps(ads[t] + i), _mm256_set1_ps(offset)), acc[t]);
        }
    }
    const int64_t i8 = i;
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        i = i8;
        if (i + 4 <= nb) {
            const __m256i h = widen4(group4(q + i * qs, x[t] + i * 32, kind), kind);
            __m128 dw, dz;
            nb_pl_scales4(wr, n, i, kind, &dw, &dz);
            const __m128 sc = _mm_mul_ps(_mm_mul_ps(dw, _mm_loadu_ps(ad[t] + i)), _mm256_castps256_ps128(hs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_set_m128(sc, sc), acc[t]);
            if (offset != 0) {
                const __m128 ado4 = _mm_mul_ps(_mm_loadu_ps(ads[t] + i), _mm_set1_ps(offset));
                acc[t] = _mm256_sub_ps(acc[t], _mm256_zextps128_ps256(_mm_mul_ps(dz, ado4)));
            }
            i += 4;
        }
        float sum = hsum256(acc[t]);
        for (; i < nb; i++)
            sum += nb_pl_scale(wr, n, i, kind) * ad[t][i] * (float)nb_q4_0r_tail_isum(q, x[t], i, nb_pl_zero(wr, n, i, kind));
        out[t] = sum;
    }
}

/* vec_dot_mxn with several tokens over a tokens kernel TOK(n, w, act,
 * a_stride, out, arg, T) (T <= RP_TOK) and its rows kernel ROWS (one
 * token): each of the m rows against RP_TOK tokens at a time. */
#define RP_TOKENS_MXN(TOK, ROWS, arg)                                                                         \
    do {                                                                                                      \
        for (int r_ = 0; r_ < m; r_++)                                                                        \
            for (int t_ = 0; t_ < nn; t_ += RP_TOK) {                                                         \
                const uint8_t *wr_ = (const uint8_t *)w + (size_t)r_ * w_stride;                              \
                const uint8_t *a_ = (const uint8_t *)act + (size_t)t_ * a_stride;                             \
                float *o_ = out + (size_t)r_ * ldo + t_;                                                      \
                switch (nn - t_) {                                                                            \
                case 1: ROWS(n, wr_, 0, a_, o_, 0, arg, 1); break;                                            \
                case 2: TOK(n, wr_, a_, a_stride, o_, arg, 2); break;                                         \
                case 3: TOK(n, wr_, a_, a_stride, o_, arg, 3); break;                                         \
                default: TOK(n, wr_, a_, a_stride, o_, arg, 4); break;                                        \
                }                                                                                             \
            }                                                                                                 \
    } while (0)

/* The vec_dot_mxn contract of kernels/qdot.h (one token's rows in
 * lockstep, more tokens a dot at a time) over a rows kernel
 * ROWS(n, w, w_stride, a, out, ldo, M). */
#define RP_MXN(ROWS, ...)                                                                                     \
    do {                                                                                                      \
        if (nn == 1) {                                                                                        \
            switch (m) {                                                                                      \
            case 1: ROWS(n, w, w_stride, act, out, ldo, __VA_ARGS__, 1); return;                              \
            case 2: ROWS(n, w, w_stride, act, out, ldo, __VA_ARGS__, 2); return;                              \
            case 3: ROWS(n, w, w_stride, act, out, ldo, __VA_ARGS__, 3); return;                              \
            default: ROWS(n, w, w_stride, act, out, ldo, __VA_ARGS__, 4); return;                             \
            }                                                                                                 \
        }                                                                                                     \
        for (int r_ = 0; r_ < m; r_++)                                                                        \
            for (int t_ = 0; t_ < nn; t_++)                                                                   \
                ROWS(n, (const uint8_t *)w + (size_t)r_ * w_stride, 0, (const uint8_t *)act + (size_t)t_ * a_stride, \
                     out + (size_t)r_ * ldo + t_, 0, __VA_ARGS__, 1);                                         \
    } while (0)

#define RP_PLANAR(name, kind)                                                                                 \
    void RP_FN(name##_dot)(int64_t n, const void *w, const void *a, float *out) {                             \
        planar_dot_rows(n, w, 0, a, out, 0, kind, 1);                                                         \
    }                                                                                                         \
    void RP_FN(name##_dot_mxn)(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,     \
                               size_t a_stride, float *out, size_t ldo) {                                     \
        if (nn > 1 && NB_PL_NIBBLES(kind)) {                                                                  \
            RP_TOKENS_MXN(planar_dot_tokens, planar_dot_rows, kind);                                          \
            return;                                                                                           \
        }                                                                                                     \
        RP_MXN(planar_dot_rows, kind);                                                                        \
    }
/* Every planar row type and its kind: the decode dots here, the GEMMs below. */
#define RP_PLANAR_TYPES(X)                                                                                    \
    X(q4_0r, NB_PL_Q4_0R)                                                                                     \
    X(q8_0r, NB_PL_Q8_0R)                                                                                     \
    X(w8r, NB_PL_W8R)                                                                                         \
    X(w4g32r, NB_PL_W4G32R)                                                                                   \
    X(w4g64r, NB_PL_W4G64R)                                                                                   \
    X(w4g128r, NB_PL_W4G128R)                                                                                 \
    X(q4_0l, NB_PL_Q4_0R | NB_PL_LANES)                                                                       \
    X(w4g32l, NB_PL_W4G32R | NB_PL_LANES)                                                                     \
    X(w4g64l, NB_PL_W4G64R | NB_PL_LANES)                                                                     \
    X(w4g128l, NB_PL_W4G128R | NB_PL_LANES)                                                                   \
    X(q8_0l, NB_PL_Q8_0R | NB_PL_LANES)                                                                       \
    X(w8l, NB_PL_W8R | NB_PL_LANES)
RP_PLANAR_TYPES(RP_PLANAR)
#undef RP_PLANAR

/* ---- decode: Q4_KR / Q6_KR x Q8_KP --------------------------------------- */

/* Lines l0 .. l1-1 of the super-block at p, nb_prefetch_bytes ahead (and
 * nb_prefetch_l2_bytes into L2): a
 * block's lines are prefetched a few at a time beside the loads of its
 * halves (prefetch_here.h) */
static inline void prefetch_lines(const void *p, int l0, int l1) {
    for (int l = l0; l < l1; l++) nb_prefetch_ahead((const char *)p + 64 * l, nb_prefetch_bytes, nb_prefetch_l2_bytes);
}

/* Half h (bytes 32h..32h+31 of each 64-byte vector: 16-weight groups
 * 8h..8h+7, one per lane) of a Q4_KR super-block, as four weight vectors. */
static inline void q4_kr_half(const nb_block_q4_kr *b, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i v0 = loadu(b->qs + 32 * h), v1 = loadu(b->qs + 64 + 32 * h);
    q[0] = _mm256_and_si256(v0, m4);
    q[1] = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
    q[2] = _mm256_and_si256(v1, m4);
    q[3] = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
}

/* A Q4_KR super-block's d and dmin as floats [d, dmin, 0, 0], converted
 * together (one at a time, each took a scalar load, conversion and
 * broadcast: the decode dot ran 3-5% slower, session 43) */
static inline __m128 q4_kr_dm(const nb_block_q4_kr *b) {
    int32_t v;
    memcpy(&v, &b->d, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}

/* acc + isc * (d * yd) - imn * (dmin * yd), dm from q4_kr_dm */
static inline __m256 q4_kr_scale(__m256 acc, __m256i isc, __m256i imn, __m128 dm, float yd) {
    const __m128 s = _mm_mul_ps(dm, _mm_set1_ps(yd));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isc), _mm256_broadcastss_ps(s), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(imn), _mm256_broadcastss_ps(_mm_movehdup_ps(s)), acc);
}

static inline void q6_kr_half(const nb_block_q6_kr *b, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256i a = loadu(b->ql + 32 * h), c = loadu(b->ql + 64 + 32 * h), hb = loadu(b->qh + 32 * h);
    /* 16-bit shifts move bits across bytes only into positions the masks clear */
    q[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(hb, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
}

/* lane l of half h = the integer sum of 16-weight group 8h + l */
static inline __m256i half_sums(const __m256i q[4], const int8_t *a8, int h, const int six) {
#if !RP_VNNI
    /* vpmaddubsw's int16 pair sums added before one vpmaddwd widens them
     * (fold4_16): four of Q4 (|.| <= 4*2*15*128), two of Q6 (2*2*63*128 <
     * 2^15; Q8_K's activations are -128..127); the same integer lanes */
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i p0 = _mm256_maddubs_epi16(q[0], loadu(a8 + 32 * h)),
                  p1 = _mm256_maddubs_epi16(q[1], loadu(a8 + 64 + 32 * h)),
                  p2 = _mm256_maddubs_epi16(q[2], loadu(a8 + 128 + 32 * h)),
                  p3 = _mm256_maddubs_epi16(q[3], loadu(a8 + 192 + 32 * h));
    if (!six) return _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3)), one);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p0, p1), one),
                            _mm256_madd_epi16(_mm256_add_epi16(p2, p3), one));
#else
    (void)six;
    __m256i s = dp(_mm256_setzero_si256(), q[0], loadu(a8 + 32 * h));
    s = dp(s, q[1], loadu(a8 + 64 + 32 * h));
    s = dp(s, q[2], loadu(a8 + 128 + 32 * h));
    return dp(s, q[3], loadu(a8 + 192 + 32 * h));
#endif
}

/* Q4_KR / Q6_KR x Q8_KP for M rows (w_stride bytes apart) in lockstep, a
 * super-block of each in turn; M = 1 is the decode dot (as planar_dot_rows). */
static inline __attribute__((always_inline)) void kr_dot_rows(int64_t n, const void *w, size_t w_stride,
                                                              const void *a, float *out, size_t ldo, const int six,
                                                              const int M) {
    const nb_block_q8_K *y = a;
    /* bytes of (sc[0..7], m[0..7]): the scales of the int16 lanes of
     * packs(half 0's sums, half 1's), whose 128-bit halves are groups 0-3,
     * 8-11 and 4-7, 12-15 (sub-block = group / 2); the mins of groups 0..15
     * as int16: m[g/2] */
    const __m128i sidx = _mm_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 2, 2, 3, 3, 6, 6, 7, 7);
    const __m128i midx = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const uint8_t *base[4];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) {
        base[r] = (const uint8_t *)w + (size_t)r * w_stride;
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / 256; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < M; r++) {
            if (six) {
                const nb_block_q6_kr *x = (const nb_block_q6_kr *)base[r] + i;
                __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m256i q[4];
                    prefetch_lines(x, 2 * h, 2 * h + 2);
                    q6_kr_half(x, h, q);
                    __m256i s = half_sums(q, y[i].qs, h, 1);
                    /* q - 32: minus 32 * the group's activation sum, then times its scale */
                    __m256i bs = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(y[i].bsums + 8 * h)));
                    s = _mm256_sub_epi32(s, _mm256_slli_epi32(bs, 5));
                    s = _mm256_mullo_epi32(s, _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x->sc + 8 * h))));
                    isum = _mm256_add_epi32(isum, s);
                }
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(x->d) * y[i].d), acc[r]);
                continue;
            }
            const nb_block_q4_kr *x = (const nb_block_q4_kr *)base[r] + i;
            prefetch_lines(x, 0, 2);
            __m128i scm = _mm_loadu_si128((const __m128i *)x->sc);
            __m256i q[4];
            q4_kr_half(x, 0, q);
            const __m256i s0 = half_sums(q, y[i].qs, 0, 0);
            prefetch_lines(x, 2, 3);
            q4_kr_half(x, 1, q);
            const __m256i s1 = half_sums(q, y[i].qs, 1, 0);
            /* |lane| <= 16*15*128 < 2^15, so the pack to int16 is exact, and
             * vpmaddwd by the groups' scales adds each sub-block's two groups */
            const __m256i isc = _mm256_madd_epi16(_mm256_packs_epi32(s0, s1), _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, sidx)));
            __m256i imn = _mm256_madd_epi16(loadu(y[i].bsums), _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, midx)));
            acc[r] = q4_kr_scale(acc[r], isc, imn, q4_kr_dm(x), y[i].d);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) out[(size_t)r * ldo] = hsum256(acc[r]);
}

/* Q4_KR / Q6_KR against T <= RP_TOK tokens (Q8_KP activations a_stride
 * bytes apart, results to out[0..T-1]): each super-block half is loaded and
 * unpacked once for all T; per token the operations and their order are
 * kr_dot_rows' (M = 1), so every result equals the one-token dot's. */
static inline __attribute__((always_inline)) void kr_dot_tokens(int64_t n, const void *w, const void *act,
                                                                size_t a_stride, float *out, const int six,
                                                                const int T) {
    const __m128i sidx = _mm_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 2, 2, 3, 3, 6, 6, 7, 7);
    const __m128i midx = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const nb_block_q8_K *y[RP_TOK];
    __m256 acc[RP_TOK];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        y[t] = (const nb_block_q8_K *)((const uint8_t *)act + (size_t)t * a_stride);
        acc[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i q[4];
        if (six) {
            const nb_block_q6_kr *x = (const nb_block_q6_kr *)w + i;
            __m256i isum[RP_TOK];
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                prefetch_lines(x, 2 * h, 2 * h + 2);
                q6_kr_half(x, h, q);
                const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x->sc + 8 * h)));
#pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    __m256i s = half_sums(q, y[t][i].qs, h, 1);
                    __m256i bs = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(y[t][i].bsums + 8 * h)));
                    s = _mm256_sub_epi32(s, _mm256_slli_epi32(bs, 5));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(h2f(x->d) * y[t][i].d), acc[t]);
            continue;
        }
        const nb_block_q4_kr *x = (const nb_block_q4_kr *)w + i;
        __m256i s0[RP_TOK];
        prefetch_lines(x, 0, 2);
        q4_kr_half(x, 0, q);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s0[t] = half_sums(q, y[t][i].qs, 0, 0);
        prefetch_lines(x, 2, 3);
        q4_kr_half(x, 1, q);
        const __m128i scm = _mm_loadu_si128((const __m128i *)x->sc);
        const __m256i scs = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, sidx));
        const __m256i mns = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, midx));
        const __m128 dm = q4_kr_dm(x);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256i s1 = half_sums(q, y[t][i].qs, 1, 0);
            const __m256i isc = _mm256_madd_epi16(_mm256_packs_epi32(s0[t], s1), scs);
            const __m256i imn = _mm256_madd_epi16(loadu(y[t][i].bsums), mns);
            acc[t] = q4_kr_scale(acc[t], isc, imn, dm, y[t][i].d);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) out[t] = hsum256(acc[t]);
}

void RP_FN(q4_kr_dot)(int64_t n, const void *w, const void *a, float *out) { kr_dot_rows(n, w, 0, a, out, 0, 0, 1); }
void RP_FN(q6_kr_dot)(int64_t n, const void *w, const void *a, float *out) { kr_dot_rows(n, w, 0, a, out, 0, 1, 1); }
void RP_FN(q4_kr_dot_mxn)(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, size_t a_stride,
                          float *out, size_t ldo) {
    if (nn > 1) RP_TOKENS_MXN(kr_dot_tokens, kr_dot_rows, 0);
    else RP_MXN(kr_dot_rows, 0);
}
void RP_FN(q6_kr_dot_mxn)(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, size_t a_stride,
                          float *out, size_t ldo) {
    if (nn > 1) RP_TOKENS_MXN(kr_dot_tokens, kr_dot_rows, 1);
    else RP_MXN(kr_dot_rows, 1);
}

/* ---- batched int8 GEMM ------------------------------------------------- */

enum { W_Q4 = 0, W_Q8 = 1, W_Q6 = 2 };

/* Activation vectors loaded once into registers for all the multiplies
 * that use them: without the empty asm GCC 12 folded each load into every
 * vpmaddubsw as a memory operand, so a vector that feeds two rows was read
 * twice - 64 instead of 32 32-byte loads per block of tile_pair. Plain
 * AVX2 Q4_0L GEMM, one thread, on a Zen 5 (NIBBLE_AVXVNNI=0): 32 tokens
 * 128-132 -> 139-140 G MAC/s, 16 tokens (tile) 97-115 -> 120-127 (session
 * 50, bench/bench_repack.c on the lane layout). */
#define RP_IN_REGS2(x, y) __asm__("" : "+x"(x), "+x"(y))
#define RP_IN_REGS4(x, y, z, w) __asm__("" : "+x"(x), "+x"(y), "+x"(z), "+x"(w))

/* The integer sums over 4-byte steps kk = k0 .. k0+nk-1 of one 32-weight
 * block, rows 0/1 x tokens 0-7/8-15 of the group: i[row][half]. The
 * weights of step kk are at u + nb_pl_step_offset(kk, kq). Without VNNI,
 * Q8 takes |q| from u and q from s. */
static inline __attribute__((always_inline)) void tile(const uint8_t *u0, const uint8_t *u1, const uint8_t *s0,
                                                       const uint8_t *s1, const int8_t *a, const int k0, const int nk,
                                                       const int mode, const int kq, __m256i i[2][2]) {
    (void)s0;
    (void)s1;
    const __m256i z = _mm256_setzero_si256();
#if RP_VNNI
    (void)mode;
    __m256i i00 = z, i01 = z, i10 = z, i11 = z;
#pragma GCC unroll 8
    for (int kk = k0; kk < k0 + nk; kk++) {
        const int o = nb_pl_step_offset(kk, kq);
        __m256i alo = _mm256_load_si256((const __m256i *)(a + kk * 64)), ahi = _mm256_load_si256((const __m256i *)(a + kk * 64 + 32));
        __m256i w0 = bcast4(u0 + o), w1 = bcast4(u1 + o);
        i00 = _mm256_dpbusd_avx_epi32(i00, w0, alo);
        i01 = _mm256_dpbusd_avx_epi32(i01, w0, ahi);
        i10 = _mm256_dpbusd_avx_epi32(i10, w1, alo);
        i11 = _mm256_dpbusd_avx_epi32(i11, w1, ahi);
    }
#else
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i i00 = z, i01 = z, i10 = z, i11 = z;
    /* The empty asm keeps each step's adds in order: without it GCC 12
     * reassociated the unrolled add chains into trees, computed all the
     * vpmaddubsw of a block first and spilled them (Q4_KR prefill ran at
     * 0.9x llama.cpp's AVX2 build). */
#define RP_PIN4() __asm__("" : "+x"(i00), "+x"(i01), "+x"(i10), "+x"(i11))
    if (mode == W_Q4) { /* int16 sums: at most 8 steps x 3840 */
#pragma GCC unroll 8
        for (int kk = k0; kk < k0 + nk; kk++) {
            const int o = nb_pl_step_offset(kk, kq);
            __m256i alo = _mm256_load_si256((const __m256i *)(a + kk * 64)), ahi = _mm256_load_si256((const __m256i *)(a + kk * 64 + 32));
            __m256i w0 = bcast4(u0 + o), w1 = bcast4(u1 + o);
            RP_IN_REGS2(alo, ahi);
            i00 = _mm256_add_epi16(i00, _mm256_maddubs_epi16(w0, alo));
            i01 = _mm256_add_epi16(i01, _mm256_maddubs_epi16(w0, ahi));
            i10 = _mm256_add_epi16(i10, _mm256_maddubs_epi16(w1, alo));
            i11 = _mm256_add_epi16(i11, _mm256_maddubs_epi16(w1, ahi));
            RP_PIN4();
        }
        i00 = _mm256_madd_epi16(i00, ones);
        i01 = _mm256_madd_epi16(i01, ones);
        i10 = _mm256_madd_epi16(i10, ones);
        i11 = _mm256_madd_epi16(i11, ones);
    } else {
#pragma GCC unroll 8
        for (int kk = k0; kk < k0 + nk; kk++) {
            const int o = nb_pl_step_offset(kk, kq);
            __m256i alo = _mm256_load_si256((const __m256i *)(a + kk * 64)), ahi = _mm256_load_si256((const __m256i *)(a + kk * 64 + 32));
            __m256i w0 = bcast4(u0 + o), w1 = bcast4(u1 + o);
            if (mode == W_Q8) {
                __m256i g0 = bcast4(s0 + o), g1 = bcast4(s1 + o);
                i00 = _mm256_add_epi32(i00, _mm256_madd_epi16(_mm256_maddubs_epi16(w0, _mm256_sign_epi8(alo, g0)), ones));
                i01 = _mm256_add_epi32(i01, _mm256_madd_epi16(_mm256_maddubs_epi16(w0, _mm256_sign_epi8(ahi, g0)), ones));
                i10 = _mm256_add_epi32(i10, _mm256_madd_epi16(_mm256_maddubs_epi16(w1, _mm256_sign_epi8(alo, g1)), ones));
                i11 = _mm256_add_epi32(i11, _mm256_madd_epi16(_mm256_maddubs_epi16(w1, _mm256_sign_epi8(ahi, g1)), ones));
            } else {
                i00 = dp(i00, w0, alo);
                i01 = dp(i01, w0, ahi);
                i10 = dp(i10, w1, alo);
                i11 = dp(i11, w1, ahi);
            }
            RP_PIN4();
        }
    }
#undef RP_PIN4
#endif
    i[0][0] = i00;
    i[0][1] = i01;
    i[1][0] = i10;
    i[1][1] = i11;
}

/* tile's steps for two token groups at once: rows 0/1 x the 16 tokens at
 * a (i) and the 16 at b (j). Each weight broadcast meets four activation
 * vectors instead of two, and the caller unpacks each row's block once for
 * both groups. */
static inline __attribute__((always_inline)) void tile_pair(const uint8_t *u0, const uint8_t *u1, const uint8_t *s0,
                                                            const uint8_t *s1, const int8_t *a, const int8_t *b,
                                                            const int mode, const int kq, __m256i i[2][2],
                                                            __m256i j[2][2]) {
    const __m256i z = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1);
    __m256i i00 = z, i01 = z, i10 = z, i11 = z, j00 = z, j01 = z, j10 = z, j11 = z;
#if RP_VNNI
    (void)ones;
#define RP_P(acc, w, g, x) acc = _mm256_dpbusd_avx_epi32(acc, w, x)
#else
    /* W_Q4: int16 sums (as tile); W_Q8: |q| times the activations with q's sign, widened per step */
#define RP_P(acc, w, g, x)                                                                                     \
    acc = mode == W_Q4 ? _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x))                                     \
                       : _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, _mm256_sign_epi8(x, g)), ones))
#endif
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; kk++) {
        const int o = nb_pl_step_offset(kk, kq);
        const __m256i w0 = bcast4(u0 + o), w1 = bcast4(u1 + o);
        const __m256i g0 = !RP_VNNI && mode == W_Q8 ? bcast4(s0 + o) : z, g1 = !RP_VNNI && mode == W_Q8 ? bcast4(s1 + o) : z;
        (void)g0, (void)g1; /* VNNI: unused */
        __m256i alo = _mm256_load_si256((const __m256i *)(a + kk * 64)), ahi = _mm256_load_si256((const __m256i *)(a + kk * 64 + 32));
        __m256i blo = _mm256_load_si256((const __m256i *)(b + kk * 64)), bhi = _mm256_load_si256((const __m256i *)(b + kk * 64 + 32));
        RP_IN_REGS4(alo, ahi, blo, bhi);
        RP_P(i00, w0, g0, alo);
        RP_P(i01, w0, g0, ahi);
        RP_P(i10, w1, g1, alo);
        RP_P(i11, w1, g1, ahi);
        __asm__("" : "+x"(i00), "+x"(i01), "+x"(i10), "+x"(i11));
        RP_P(j00, w0, g0, blo);
        RP_P(j01, w0, g0, bhi);
        RP_P(j10, w1, g1, blo);
        RP_P(j11, w1, g1, bhi);
        __asm__("" : "+x"(j00), "+x"(j01), "+x"(j10), "+x"(j11));
    }
#undef RP_P
    if (!RP_VNNI && mode == W_Q4) {
        i00 = _mm256_madd_epi16(i00, ones), i01 = _mm256_madd_epi16(i01, ones);
        i10 = _mm256_madd_epi16(i10, ones), i11 = _mm256_madd_epi16(i11, ones);
        j00 = _mm256_madd_epi16(j00, ones), j01 = _mm256_madd_epi16(j01, ones);
        j10 = _mm256_madd_epi16(j10, ones), j11 = _mm256_madd_epi16(j11, ones);
    }
    i[0][0] = i00, i[0][1] = i01, i[1][0] = i10, i[1][1] = i11;
    j[0][0] = j00, j[0][1] = j01, j[1][0] = j10, j[1][1] = j11;
}

/* The K types' tile: RT (2 or 4) rows x 16 tokens, in K's lane order (kq
 * above), mode W_Q4 or W_Q6. Four rows share each step's two activation
 * loads: with two rows, the weight broadcasts and activation loads (one
 * load per multiply) bounded the Q4_KR loop on Zen 5, not the multiplies.
 * Plain AVX2's W_Q6 steps need more registers and take RT = 2 (with 4 they
 * spilled: Q6_KR prefill at half speed). */
static inline __attribute__((always_inline)) void tile4(const uint8_t *const u[4], const int8_t *a, const int k0,
                                                        int nk, const int mode, __m256i i[4][2], const int RT) {
    const __m256i z = _mm256_setzero_si256();
    __m256i i00 = z, i01 = z, i10 = z, i11 = z, i20 = z, i21 = z, i30 = z, i31 = z;
#if RP_VNNI
    (void)mode;
#define RP_ACC(acc, w, x) acc = _mm256_dpbusd_avx_epi32(acc, w, x)
#else
    const __m256i ones = _mm256_set1_epi16(1);
    /* W_Q4: int16 sums (at most 8 steps x 3840), widened after the loop;
     * W_Q6 (6-bit weights): two steps at a time, below */
#define RP_ACC(acc, w, x)                                                                                    \
    acc = mode == W_Q4 ? _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x))                                   \
                       : _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones))
#endif
#if !RP_VNNI
    if (mode == W_Q6) {
        /* two steps summed at 16 bits (2 x 2 x 63 x 127 < 2^15), then
         * widened: one vpmaddwd per two multiplies instead of per one */
#define RP_ACC2(acc, k, h)                                                                                    \
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(                                           \
                                    _mm256_maddubs_epi16(bcast4(u[k] + o0), _mm256_load_si256((const __m256i *)(a0 + 32 * h))), \
                                    _mm256_maddubs_epi16(bcast4(u[k] + o1), _mm256_load_si256((const __m256i *)(a1 + 32 * h)))), \
                                ones))
#pragma GCC unroll 4
        for (int kk = k0; kk < k0 + nk; kk += 2) {
            const int o0 = 64 * (kk & 3) + 4 * (kk >> 2), o1 = 64 * ((kk + 1) & 3) + 4 * ((kk + 1) >> 2);
            const int8_t *a0 = a + kk * 64, *a1 = a + (kk + 1) * 64;
            RP_ACC2(i00, 0, 0);
            RP_ACC2(i01, 0, 1);
            RP_ACC2(i10, 1, 0);
            RP_ACC2(i11, 1, 1);
            __asm__("" : "+x"(i00), "+x"(i01), "+x"(i10), "+x"(i11));
            if (RT == 4) {
                RP_ACC2(i20, 2, 0);
                RP_ACC2(i21, 2, 1);
                RP_ACC2(i30, 3, 0);
                RP_ACC2(i31, 3, 1);
                __asm__("" : "+x"(i20), "+x"(i21), "+x"(i30), "+x"(i31));
            }
        }
#undef RP_ACC2
        nk = 0; /* done */
    }
#endif
#pragma GCC unroll 8
    for (int kk = k0; kk < k0 + nk; kk++) {
        const int o = 64 * (kk & 3) + 4 * (kk >> 2);
        __m256i alo = _mm256_load_si256((const __m256i *)(a + kk * 64)), ahi = _mm256_load_si256((const __m256i *)(a + kk * 64 + 32));
        /* rows ka and kb of the step; the empty asm keeps each step's adds
         * in order (see tile) */
#define RP_ROWS2(ka, kb, ia0, ia1, ib0, ib1)                                                                    \
    do {                                                                                                       \
        __m256i wa = bcast4(u[ka] + o), wb = bcast4(u[kb] + o);                                                 \
        RP_ACC(ia0, wa, alo);                                                                                  \
        RP_ACC(ia1, wa, ahi);                                                                                  \
        RP_ACC(ib0, wb, alo);                                                                                  \
        RP_ACC(ib1, wb, ahi);                                                                                  \
        __asm__("" : "+x"(ia0), "+x"(ia1), "+x"(ib0), "+x"(ib1));                                              \
    } while (0)
        RP_ROWS2(0, 1, i00, i01, i10, i11);
        if (RT == 4) RP_ROWS2(2, 3, i20, i21, i30, i31);
#undef RP_ROWS2
    }
#undef RP_ACC
#if !RP_VNNI
    if (mode == W_Q4) {
        i00 = _mm256_madd_epi16(i00, ones), i01 = _mm256_madd_epi16(i01, ones);
        i10 = _mm256_madd_epi16(i10, ones), i11 = _mm256_madd_epi16(i11, ones);
        i20 = _mm256_madd_epi16(i20, ones), i21 = _mm256_madd_epi16(i21, ones);
        i30 = _mm256_madd_epi16(i30, ones), i31 = _mm256_madd_epi16(i31, ones);
    }
#endif
    i[0][0] = i00, i[0][1] = i01, i[1][0] = i10, i[1][1] = i11;
    i[2][0] = i20, i[2][1] = i21, i[3][0] = i30, i[3][1] = i31;
}

/* The 16 tokens' results of rows r .. r + nrows - 1 (nrows <= 4; f[i]: row
 * r + i, tokens 0-7 and 8-15) for token group g into y[t*ldy + r]. */
static inline void store_tile(float *y, int64_t ldy, int64_t r, int nrows, int64_t g, int64_t n, __m256 (*f)[2]) {
    _Alignas(32) float t[4][16];
    for (int i = 0; i < nrows; i++) {
        _mm256_store_ps(t[i], f[i][0]);
        _mm256_store_ps(t[i] + 8, f[i][1]);
    }
    const int64_t nt = n - g * 16 < 16 ? n - g * 16 : 16;
    float *o = y + g * 16 * ldy + r;
    for (int64_t k = 0; k < nt; k++)
        for (int i = 0; i < nrows; i++) o[k * ldy + i] = t[i][k];
}

/* Block b of a Q4_0R row's quants (nb blocks) as 32 bytes 0..15 at u. */
static inline void unpack_q4_0r(const uint8_t *q, int64_t nb, int64_t b, uint8_t *u) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i v;
    if (b < nb / 4 * 4) { /* grouped: low (blocks 0, 1) or high (2, 3) nibbles of 32 bytes */
        v = loadu(q + (b / 4) * 64 + 32 * (b & 1));
        if (b & 2) v = _mm256_srli_epi16(v, 4);
    } else { /* the tail keeps Q4_0's order: low nibbles 0..15, high 16..31 */
        __m128i s = _mm_loadu_si128((const __m128i *)(q + b * 16));
        v = _mm256_set_m128i(_mm_srli_epi16(s, 4), s);
    }
    _mm256_store_si256((__m256i *)u, _mm256_and_si256(v, m4));
}

/* A Q4_0L group's 64 bytes as its four lane-order vectors, 0..15 a byte,
 * at u (the GEMM's layout kq = 2: nb_pl_step_offset). */
static inline void unpack_q4_0l_group(const uint8_t *g, uint8_t *u) {
    __m256i v[4];
    nib4(g, v, 1);
    for (int k = 0; k < 4; k++) _mm256_store_si256((__m256i *)(u + 32 * k), v[k]);
}

/* Block b's integer sums i of rows 0/1 against token group g, less the
 * quants' offset, scaled and added into f; sw, zk: the rows' scales and
 * (W4G*R) zero points of the block (as the caller's set1 vectors). */
static inline __attribute__((always_inline)) void block_out(const nb_actpack *ap, int64_t g, int64_t b, const int kind,
                                                            const __m256 sw[2], const __m256i zk[2], __m256i i[2][2],
                                                            __m256 f[2][2]) {
    const int group = NB_PL_GROUP(kind);
    /* the fixed offset 8 or 128 = 1 << shift; -1: none (W4G*R: per row, below) */
    const int shift = group ? -1 : NB_PL_BASE(kind) == NB_PL_Q4_0R ? 3 : (Q8OFF ? 7 : -1);
    const int64_t at = (g * ap->nb + b) * 16;
    __m256 da[2] = {_mm256_load_ps(ap->d + at), _mm256_load_ps(ap->d + at + 8)};
    __m256i sum[2], o[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int hf = 0; hf < 2; hf++) {
        sum[hf] = _mm256_load_si256((const __m256i *)(ap->sum + at + 8 * hf));
        if (shift >= 0) o[hf] = _mm256_slli_epi32(sum[hf], shift);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++)
#pragma GCC unroll 2
        for (int hf = 0; hf < 2; hf++) {
            /* W4G*R: the row's zero point times the sums, in one vpmaddwd (a
             * sum of 32 int8 and z <= 255 fit in 16 bits) */
            const __m256i ok = group ? _mm256_madd_epi16(sum[hf], zk[k]) : o[hf];
            f[k][hf] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(i[k][hf], ok)), _mm256_mul_ps(da[hf], sw[k]),
                                       f[k][hf]);
        }
}

/* Block b of rows row[0..1] (weights at p[k], layout kq: nb_pl_step_offset;
 * Q8 without VNNI: signs at s[k]) against token group g (and g + 1 when
 * NG = 2), added into f[0] (and f[1]). */
static inline __attribute__((always_inline)) void gemm_block(const uint8_t *const row[2], const uint8_t *const p[2],
                                                             const uint8_t *const s[2], const nb_actpack *ap,
                                                             int64_t g, int64_t b, const int kind, const int kq,
                                                             const int NG, __m256 f[2][2][2]) {
    const int8_t *a = ap->q + (g * ap->nb + b) * 512;
    const int64_t K = ap->K;
    const int group = NB_PL_GROUP(kind);
    const __m256 sw[2] = {_mm256_set1_ps(nb_pl_scale(row[0], K, b, kind)), _mm256_set1_ps(nb_pl_scale(row[1], K, b, kind))};
    const __m256i zk[2] = {_mm256_set1_epi32(group ? nb_pl_zero(row[0], K, b, kind) : 0),
                           _mm256_set1_epi32(group ? nb_pl_zero(row[1], K, b, kind) : 0)};
    __m256i i[2][2];
    if (NG == 2) {
        __m256i j[2][2];
        tile_pair(p[0], p[1], s[0], s[1], a, a + ap->nb * 512, NB_PL_NIBBLES(kind) ? W_Q4 : W_Q8, kq, i, j);
        block_out(ap, g, b, kind, sw, zk, i, f[0]);
        block_out(ap, g + 1, b, kind, sw, zk, j, f[1]);
        return;
    }
    tile(p[0], p[1], s[0], s[1], a, 0, 8, NB_PL_NIBBLES(kind) ? W_Q4 : W_Q8, kq, i);
    block_out(ap, g, b, kind, sw, zk, i, f[0]);
}

/* Rows r, r + 1 (row, their quants q; the last row repeated when two is 0)
 * against token groups g .. g + NG - 1, block by block; the lane orders a
 * group of four blocks at a time, read in lane order (kq = 2). pf: the
 * next two rows' prefetch (below). */
static inline __attribute__((always_inline)) void row_pair_groups(const uint8_t *const row[2], const uint8_t *const q[2],
                                                                  const nb_actpack *ap, float *y, int64_t ldy,
                                                                  int64_t r, int two, int64_t g, const int NG,
                                                                  const char **pf, const char *pf_end,
                                                                  int64_t pf_lines, const int kind) {
    const int four = NB_PL_NIBBLES(kind);
    const int64_t nb = ap->nb;
    const int64_t nb4 = kind & NB_PL_LANES ? nb / 4 * 4 : 0;
    _Alignas(32) uint8_t u[2][128], sg[2][128];
    const uint8_t *const s[2] = {sg[0], sg[1]};
    __m256 f[2][2][2];
    for (int gi = 0; gi < 2; gi++)
        for (int k = 0; k < 2; k++) f[gi][k][0] = f[gi][k][1] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b < nb4; b += 4) {
        const uint8_t *pg[2] = {u[0], u[1]}; /* the group's weights, 0..255 a byte */
        for (int64_t l = 0; l < pf_lines && *pf < pf_end; l++, *pf += 64) _mm_prefetch(*pf, _MM_HINT_T0);
        for (int k = 0; k < 2; k++) {
            if (four) {
                unpack_q4_0l_group(q[k] + b * 16, u[k]);
            } else if (Q8OFF) {
                pg[k] = q[k] + b * 32;
            } else { /* |q| and q */
                for (int v = 0; v < 4; v++) {
                    __m256i sv = _mm256_xor_si256(loadu(q[k] + b * 32 + 32 * v), _mm256_set1_epi8((char)0x80));
                    _mm256_store_si256((__m256i *)(u[k] + 32 * v), _mm256_abs_epi8(sv));
                    _mm256_store_si256((__m256i *)(sg[k] + 32 * v), sv);
                }
            }
        }
        for (int j = 0; j < 4; j++) {
            const uint8_t *const p[2] = {pg[0] + 4 * j, pg[1] + 4 * j}, *const sj[2] = {sg[0] + 4 * j, sg[1] + 4 * j};
            gemm_block(row, p, sj, ap, g, b + j, kind, 2, NG, f);
        }
    }
    for (; b < nb; b++) {
        const uint8_t *p[2];
        for (int k = 0; k < 2; k++) {
            if (four) {
                unpack_q4_0r(q[k], nb, b, u[k]);
                p[k] = u[k];
            } else if (Q8OFF) {
                p[k] = q[k] + b * 32;
            } else { /* |q| and q */
                __m256i sv = _mm256_xor_si256(loadu(q[k] + b * 32), _mm256_set1_epi8((char)0x80));
                _mm256_store_si256((__m256i *)u[k], _mm256_abs_epi8(sv));
                _mm256_store_si256((__m256i *)sg[k], sv);
                p[k] = u[k];
            }
        }
        gemm_block(row, p, s, ap, g, b, kind, 0, NG, f);
    }
    for (int gi = 0; gi < NG; gi++) store_tile(y, ldy, r, two ? 2 : 1, g + gi, ap->n, f[gi]);
}

/* Two rows at a time against the token groups, two groups at a time
 * (tile_pair) and a last odd one alone. With AVX-VNNI too: one group at a
 * time (two vpdpbusd per broadcast, two per activation load) left it at
 * 0.75-0.9x the plain-AVX2 GEMM on a Zen 5; in pairs Q4_0L / Q8_0L ran
 * 1.2-1.45x faster (bench/bench_repack.c, 32-128 tokens) and `--isa avx2`
 * pp512 of Q4_0 / Q8_0 / W4G128 1.27-1.36x (docs/speed.md, session 51). */
static inline __attribute__((always_inline)) void planar_gemm(const uint8_t *w, uint64_t row_bytes, int64_t nr,
                                                              const nb_actpack *ap, float *y, int64_t ldy,
                                                              const int kind) {
    const int64_t nb = ap->nb, K = ap->K;
    const int64_t nb4 = kind & NB_PL_LANES ? nb / 4 * 4 : 0;
    for (int64_t r = 0; r < nr; r += 2) {
        const int two = r + 1 < nr;
        const uint8_t *const row[2] = {w + r * row_bytes, w + (two ? r + 1 : r) * row_bytes};
        const uint8_t *const q[2] = {row[0] + nb_pl_head(K, kind), row[1] + nb_pl_head(K, kind)};
        /* The next two rows into L1, a few lines per 4 blocks of the first
         * token group: the unpack's loads of each row pair's first group
         * waited on L3 / DRAM (a quarter of the samples at 16 tokens). Zen 3,
         * 1 thread, in-process A/B: Q4_0L at 16 / 128 tokens 1.22-1.38x /
         * 1.06-1.08x, W4G128L 1.03-1.15x, Q8_0L 1.04-1.08x (session 43). */
        const char *pf = (const char *)(w + (r + 2) * row_bytes), *pf_end = pf + (r + 2 < nr ? 2 * row_bytes : 0);
        const int64_t pf_lines = nb4 ? ((int64_t)(2 * row_bytes) / 64 + nb4 / 4) / (nb4 / 4) : 0;
        int64_t g = 0;
        for (; g + 1 < ap->ng; g += 2) row_pair_groups(row, q, ap, y, ldy, r, two, g, 2, &pf, pf_end, pf_lines, kind);
        for (; g < ap->ng; g++) row_pair_groups(row, q, ap, y, ldy, r, two, g, 1, &pf, pf_end, pf_lines, kind);
    }
}

#define PLANAR_GEMM(name, kind)                                                                                    \
    void RP_FN(name##_gemm)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) { \
        planar_gemm(w, row_bytes, nr, ap, y, ldy, kind);                                                           \
    }
RP_PLANAR_TYPES(PLANAR_GEMM)
#undef PLANAR_GEMM
#undef RP_PLANAR_TYPES

/* K types: per four rows and token group, super-block by super-block:
 * the rows' weights unpacked into u (lane order), their scales into sc
 * (Q4_K: d*sc[8], dmin*m[8]; Q6_K: d*sc[16]), then each 32-weight block's
 * integer sums (per 16-weight half for Q6_K) scaled into f, and f times the
 * tokens' Q8_K scale into F at the end of the super-block. A last tile of
 * fewer rows repeats its last row and stores only its own. Each super-block
 * is unpacked once for up to KG token groups (their F in memory), not once
 * per group. The per-block loops over rows and halves are unrolled by
 * pragma: GCC kept them as loops, the int32 sums went through the stack
 * and Q6_K's step offsets were computed at run time (Q4_KR 1.09-1.30x,
 * Q6_KR 1.01-1.25x with them, Zen 3, session 47). */
static inline __attribute__((always_inline)) void kgemm(const uint8_t *w, uint64_t row_bytes, int64_t nr,
                                                        const nb_actpack *ap, float *y, int64_t ldy, const int six) {
    const int64_t nb = ap->nb, nsb = ap->K / 256;
    const uint64_t bsz = six ? sizeof(nb_block_q6_kr) : sizeof(nb_block_q4_kr);
    _Alignas(32) uint8_t u[4][256];
    _Alignas(32) float sc[4][16];
    const uint8_t *const up[4] = {u[0], u[1], u[2], u[3]};
    const int RT = six ? 2 : 4;
    enum { KG = 8 };
    __m256 F[KG][4][2];
    for (int64_t r = 0; r < nr; r += RT) {
        const int nrows = nr - r < RT ? (int)(nr - r) : RT;
        const uint8_t *x[4];
        for (int k = 0; k < RT; k++) x[k] = w + (r + (k < nrows ? k : nrows - 1)) * row_bytes;
        for (int64_t g0 = 0; g0 < ap->ng; g0 += KG) {
            const int ngr = ap->ng - g0 < KG ? (int)(ap->ng - g0) : KG;
            for (int gi = 0; gi < ngr; gi++)
                for (int k = 0; k < 4; k++) F[gi][k][0] = F[gi][k][1] = _mm256_setzero_ps();
            for (int64_t s = 0; s < nsb; s++) {
                for (int k = 0; k < RT; k++) {
                    const uint8_t *blk = x[k] + s * bsz;
                    /* the next tile's super-block s into L1 while this one's is in use
                     * (as planar_gemm: Q4_KR 1.20-1.31x, Q6_KR 1.07-1.15x, session 43) */
                    if (g0 == 0 && r + RT + k < nr)
                        for (uint64_t l = 0; l < bsz; l += 64) _mm_prefetch((const char *)blk + RT * row_bytes + l, _MM_HINT_T0);
                    for (int h = 0; h < 2; h++) {
                        __m256i q[4];
                        if (six) q6_kr_half((const nb_block_q6_kr *)blk, h, q);
                        else q4_kr_half((const nb_block_q4_kr *)blk, h, q);
                        for (int v = 0; v < 4; v++) _mm256_store_si256((__m256i *)(u[k] + 64 * v + 32 * h), q[v]);
                    }
                    /* the 16 scales as floats, 8 at a time (one at a time,
                     * they were a tenth of this loop's instructions) */
                    if (six) {
                        const nb_block_q6_kr *b6 = (const nb_block_q6_kr *)blk;
                        const __m256 d = _mm256_set1_ps(h2f(b6->d));
                        for (int j = 0; j < 16; j += 8)
                            _mm256_store_ps(sc[k] + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                                           _mm_loadl_epi64((const __m128i *)(b6->sc + j))))));
                    } else {
                        const nb_block_q4_kr *b4 = (const nb_block_q4_kr *)blk;
                        _mm256_store_ps(sc[k], _mm256_mul_ps(_mm256_set1_ps(h2f(b4->d)),
                                                             _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                                                 _mm_loadl_epi64((const __m128i *)b4->sc)))));
                        _mm256_store_ps(sc[k] + 8, _mm256_mul_ps(_mm256_set1_ps(h2f(b4->dmin)),
                                                                 _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                                                     _mm_loadl_epi64((const __m128i *)b4->m)))));
                    }
                }
                for (int gi = 0; gi < ngr; gi++) {
                const int64_t g = g0 + gi;
                __m256 f[4][2];
#pragma GCC unroll 4
                for (int k = 0; k < RT; k++) f[k][0] = f[k][1] = _mm256_setzero_ps();
                for (int j = 0; j < 8; j++) {
                    const int64_t b = s * 8 + j, at = (g * nb + b) * 16;
                    const int8_t *a = ap->q + (g * nb + b) * 512;
                    const uint8_t *uj[4] = {up[0] + 8 * j, up[1] + 8 * j, up[2] + 8 * j, up[3] + 8 * j};
                    __m256i i[4][2];
                    if (six) {
#pragma GCC unroll 2
                        for (int half = 0; half < 2; half++) {
                            tile4(uj, a, 4 * half, 4, W_Q6, i, RT);
#pragma GCC unroll 2
                            for (int hf = 0; hf < 2; hf++) { /* q - 32: through the tokens' sums of these 16 */
                                __m256i o = _mm256_slli_epi32(
                                    _mm256_load_si256((const __m256i *)(ap->sum16 + (g * nb + b) * 32 + 16 * half + 8 * hf)), 5);
#pragma GCC unroll 4
                                for (int k = 0; k < RT; k++)
                                    f[k][hf] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(i[k][hf], o)),
                                                               _mm256_set1_ps(sc[k][2 * j + half]), f[k][hf]);
                            }
                        }
                    } else {
                        tile4(uj, a, 0, 8, W_Q4, i, RT);
#pragma GCC unroll 2
                        for (int hf = 0; hf < 2; hf++) { /* d*sc*q - dmin*m: the min through the tokens' sums */
                            __m256 fs = _mm256_load_ps(ap->fsum + at + 8 * hf);
#pragma GCC unroll 4
                            for (int k = 0; k < RT; k++)
                                f[k][hf] = _mm256_fnmadd_ps(fs, _mm256_set1_ps(sc[k][8 + j]),
                                                            _mm256_fmadd_ps(_mm256_cvtepi32_ps(i[k][hf]),
                                                                            _mm256_set1_ps(sc[k][j]), f[k][hf]));
                        }
                    }
                }
#pragma GCC unroll 2
                for (int hf = 0; hf < 2; hf++) {
                    __m256 d = _mm256_load_ps(ap->d + (g * nb + s * 8) * 16 + 8 * hf);
#pragma GCC unroll 4
                    for (int k = 0; k < RT; k++) F[gi][k][hf] = _mm256_fmadd_ps(f[k][hf], d, F[gi][k][hf]);
                }
                }
            }
            for (int gi = 0; gi < ngr; gi++) store_tile(y, ldy, r, nrows, g0 + gi, ap->n, F[gi]);
        }
    }
}

void RP_FN(q4_kr_gemm)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    kgemm(w, row_bytes, nr, ap, y, ldy, 0);
}
void RP_FN(q6_kr_gemm)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    kgemm(w, row_bytes, nr, ap, y, ldy, 1);
}
