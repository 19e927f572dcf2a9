/* AVX-512 VNNI decode kernels over planar rows (layouts in kernels/repack.h).
 * Per step (eight blocks of 4-bit rows, four of 8-bit): two 64-byte loads
 * of weights, four or two of activations, a vpdpbusd per 64 bytes of
 * weights, their sums folded into one vector by unpacks and integer adds
 * (fold8), one conversion and one multiply-add with the blocks' scales
 * (converted and multiplied as one 256-bit vector, spread to the lanes by
 * one permute); the unsigned weights' offset (8 or 128, W4G*R's z) comes
 * off once per row through the activations' precomputed d*sum. Integer
 * sums are exact; only the float summation order differs from the
 * reference.
 *
 * The scalar tail loops must not be auto-vectorised: GCC 12 turns
 * `sum += (u8 - 128) * s8` into vpdpbusd with the wrong signedness under
 * -mavx512vnni (a miscompile: -19616 for -2976 on a 32-element test), so
 * vectorisation is off for this file; the hot loops are intrinsics anyway. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#include <immintrin.h>
#include <string.h>

#include "base/status.h"
#include "base/blocks.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "kernels/x86/prefetch_here.h"
#include "kernels/x86/planar_kind.h"


/* The weights are prefetched nb_prefetch_bytes ahead, and into L2 also
 * nb_prefetch_l2_bytes ahead where the table says so (kernels.h: decode
 * streams each weight once and the loop is too short per byte for the
 * hardware prefetcher to stay ahead). Past the row's end it runs into the
 * next row, which is what this thread reads next. */

static inline float hsum128(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

static inline float hsum256(__m256 v) { return hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }

/* The weight vector(s) of line k (64 bytes) of a row's eight blocks from
 * block i, the line prefetched beside its load (prefetch_here.h; pf < 0:
 * not here, the caller did it for the turn's lines first): 4-bit
 * rows have two lines (blocks i..i+3, i+4..i+7), each the low nibbles of
 * two blocks (w[2k]) and the high ones of two more in place (w[2k+1]: 16 q,
 * so their sums are 16 times the blocks', taken out by lane_scale); 8-bit
 * rows have four, each two blocks (w[k]). Weight vector j pairs with the
 * activations' bytes 64 j .. 64 j + 63 of the eight blocks. */
static inline __attribute__((always_inline)) void planar_line(const uint8_t *q, int64_t i, int k, const int four,
                                                              int pf, int pf2, __m512i w[4]) {
    const uint8_t *qi = q + i * (four ? 16 : 32) + 64 * k;
    if (pf >= 0) nb_prefetch_ahead(qi, pf, pf2);
    const __m512i v = _mm512_loadu_si512((const void *)qi);
    if (four) {
        const __m512i m4 = _mm512_set1_epi8(15);
        w[2 * k] = _mm512_and_si512(v, m4);
        w[2 * k + 1] = _mm512_andnot_si512(m4, v);
    } else {
        w[k] = v;
    }
}

/* Weight vectors j0 .. j1-1 of the eight blocks (planar_line) against the
 * token's activations xi (x + 32 i): p[j] = their vpdpbusd. */
static inline __attribute__((always_inline)) void planar_dps(const __m512i w[4], const int8_t *xi, int j0, int j1,
                                                             __m512i p[4]) {
#pragma GCC unroll 4
    for (int j = j0; j < j1; j++)
        p[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], _mm512_loadu_si512((const void *)(xi + 64 * j)));
}

/* Eight blocks' integer sums in one vector. p0..p3 are vpdpbusd results
 * of two blocks each (blocks 2k and 2k+1 of the eight in lanes 0-7 and
 * 8-15 of p_k, in the order blocks i, i+1 | i+2, i+3 | i+4, i+5 | i+6,
 * i+7); within each 128-bit lane, unpacks and adds leave element k of
 * 128-bit lane j = the sum of p_k's lanes 4j..4j+3: a quarter of a block.
 * Block b's two quarters sit at lane_block[] == b. On Zen 5 unpacks and
 * integer adds issue four a cycle, conversions, multiply-adds, shifts and
 * permutes two; converting and scaling each pair of blocks took 24 of the
 * latter per eight 4-bit blocks, this takes 10. From L2, four rows in
 * lockstep: 1.08-1.27x the bytes per second; decode from DRAM is unchanged
 * (it is not bound by these), four tokens per step 1.05-1.07x
 * (docs/speed.md, session 34). */
static inline __m512i fold8(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* Block (of the eight) whose quarter sum lane l of fold8's result holds. */
static const int32_t lane_block[16] __attribute__((aligned(64))) = {0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7};

/* Per lane of the accumulators: 1, or 1/16 for the in-place high nibbles
 * (blocks 2, 3, 6, 7 of each eight: lanes 1 and 3 of every 128-bit lane),
 * applied once per row - a power of two, so exactly as if per block. */
static inline __m512 lane_scale(const int four) {
    const float h = four ? 1.0f / 16 : 1.0f;
    return _mm512_setr_ps(1, h, 1, h, 1, h, 1, h, 1, h, 1, h, 1, h, 1, h);
}

/* lanes 0-7 <- s[a], lanes 8-15 <- s[a+1] */
static inline __m512 pair_lanes(__m128 s, int a) {
    const __m512i idx = _mm512_set_epi32(a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a, a, a, a, a, a, a, a);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}

/* One step's products p (planar_dps) of one row and token into its
 * accumulators: acc gains the blocks' integer sums times their d_w * d_a
 * (dw, ad8), off the blocks' offset terms (dz * the activations' d*sum
 * ads8). 4-bit rows: eight blocks (p[2], p[3] zero when only four are
 * left), folded (fold8) into acc[0]. 8-bit rows: four blocks, each pair
 * converted and scaled on its own into acc[0] and acc[1] - folded like the
 * 4-bit rows they read 5-10% less from DRAM in decode, whether eight
 * blocks a step or four (docs/speed.md, session 34). The same operations
 * whatever the caller (decode dot, rows in lockstep, several tokens), so
 * their results are identical. */
static inline __attribute__((always_inline)) void planar_acc(const __m512i p[4], __m256 ad8, __m256 ads8, __m256 dw,
                                                             __m256 dz, __m512 acc[2], __m256 *off, const int four) {
    if (four) {
        const __m512 sc = _mm512_permutexvar_ps(_mm512_load_si512((const void *)lane_block),
                                                _mm512_castps256_ps512(_mm256_mul_ps(dw, ad8)));
        acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold8(p[0], p[1], p[2], p[3])), sc, acc[0]);
    } else {
        const __m128 sc = _mm_mul_ps(_mm256_castps256_ps128(dw), _mm256_castps256_ps128(ad8));
        acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[0]), pair_lanes(sc, 0), acc[0]);
        acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[1]), pair_lanes(sc, 2), acc[1]);
    }
    *off = _mm256_fmadd_ps(dz, ads8, *off);
}

/* Row wr's scales (dw, dz) of blocks i .. i+7 (NB4: i .. i+3, the rest 0). */
static inline __attribute__((always_inline)) void planar_scales8(const void *wr, int64_t n, int64_t i, const int kind,
                                                                 const int NB4, __m256 *dw, __m256 *dz) {
    if (NB4) {
        __m128 d4, z4;
        nb_pl_scales4(wr, n, i, kind, &d4, &z4);
        *dw = _mm256_zextps128_ps256(d4);
        *dz = _mm256_zextps128_ps256(z4);
    } else {
        nb_pl_scales8(wr, n, i, kind, dw, dz);
    }
}

/* The activations' block scales and d*sums from block i (NB4: four). */
static inline __attribute__((always_inline)) void act_scales8(const float *ad, const float *ads, int64_t i, const int NB4,
                                                              __m256 *ad8, __m256 *ads8) {
    if (NB4) {
        *ad8 = _mm256_zextps128_ps256(_mm_loadu_ps(ad + i));
        *ads8 = _mm256_zextps128_ps256(_mm_loadu_ps(ads + i));
    } else {
        *ad8 = _mm256_loadu_ps(ad + i);
        *ads8 = _mm256_loadu_ps(ads + i);
    }
}

/* A row's dot from its accumulators and the blocks past the last four. */
static inline __attribute__((always_inline)) float planar_finish(const void *wr, const uint8_t *q, int64_t n, int64_t i,
                                                                 const int8_t *x, const float *ad, const __m512 acc[2],
                                                                 __m256 off, const int kind) {
    const int four = NB_PL_NIBBLES(kind);
    const int64_t nb = n / 32;
    float sum = _mm512_reduce_add_ps(four ? _mm512_mul_ps(acc[0], lane_scale(four)) : _mm512_add_ps(acc[0], acc[1])) -
                NB_PL_OFFSET(kind) * hsum256(off);
    for (int64_t j = i; j < nb; j++)
        sum += nb_pl_scale(wr, n, j, kind) * ad[j] *
               (float)(four ? nb_q4_0r_tail_isum(q, x, j, nb_pl_zero(wr, n, j, kind)) : nb_q8_0r_tail_isum(q, x, j));
    return sum;
}

/* A row's steps from block i on (STEP(NB4): a step macro of the caller,
 * which has `four`, `i` and `nb`): eight blocks at a time for 4-bit rows,
 * then - and for 8-bit rows throughout - four; i ends at the first block
 * no step took (the scalar tail's). */
#define PLANAR_STEPS(STEP)                                \
    do {                                                  \
        if (four)                                         \
            for (; i + 8 <= nb; i += 8) STEP(0);          \
        for (; i + 4 <= nb; i += 4) STEP(1);              \
    } while (0)

/* The planar rows (planar_kind.h: Q4_0R, Q8_0R, W8R, W4G*R) x Q8_0P for T
 * (1..4) tokens, two 64-byte lines of weights per step (planar_acc): 4-bit
 * rows eight blocks (four once at the end when nb % 8 >= 4; four at a time
 * read 3-7% less from DRAM and 9-15% less from L2), 8-bit rows four.
 * Weight vector j (4-bit: the low or high nibbles of a line; 8-bit: a
 * line) pairs with one 64-byte load
 * of activations; the unsigned offset (8, 128, or W4G*R's
 * per-group z) comes off through the activations' precomputed d*sum
 * (repack.h). Each weight vector is loaded, unpacked and its scales
 * converted once for all T tokens (small-batch decode unpacks each weight
 * once per step); per token the operations and their order are those of
 * T = 1, the decode dot, so the results are identical to T one-token
 * calls. `kind` and T are constants after inlining. */
static inline __attribute__((always_inline)) void planar_dot_t(int64_t n, const void *w, const uint8_t *a,
                                                               size_t a_stride, float *out, const int kind,
                                                               const int T) {
    const int four = NB_PL_NIBBLES(kind), lines = four ? 2 : 4; /* 64-byte lines of eight blocks */
    const int64_t nb = n / 32;
    const uint8_t *q = (const uint8_t *)w + nb_pl_head(n, kind);
    __m512 acc[4][2];
    __m256 off[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        acc[t][0] = acc[t][1] = _mm512_setzero_ps();
        off[t] = _mm256_setzero_ps();
    }
    const int pf = nb_prefetch_bytes, pf2 = nb_prefetch_l2_bytes;
    int64_t i = 0;
    nb_pl_row_start(w, n, kind, pf, pf2);
#define PLANAR_T_STEP(NB4)                                                                          \
    do {                                                                                            \
        __m512i wv[4];                                                                              \
        __m256 dw, dz;                                                                              \
        _Pragma("GCC unroll 4") for (int k = 0; k < lines >> (NB4); k++) planar_line(q, i, k, four, pf, pf2, wv); \
        planar_scales8(w, n, i, kind, NB4, &dw, &dz);                                               \
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                                       \
            const int8_t *x = (const int8_t *)(a + (size_t)t * a_stride);                           \
            const float *ad = (const float *)((const uint8_t *)x + nb * 32);                        \
            __m512i p[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), \
                            _mm512_setzero_si512()};                                                \
            __m256 ad8, ads8;                                                                       \
            act_scales8(ad, ad + nb, i, NB4, &ad8, &ads8);                                          \
            planar_dps(wv, x + i * 32, 0, 4 >> (NB4), p);                                           \
            planar_acc(p, ad8, ads8, dw, dz, acc[t], &off[t], four);                                \
        }                                                                                           \
    } while (0)
    PLANAR_STEPS(PLANAR_T_STEP);
#undef PLANAR_T_STEP
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        const int8_t *x = (const int8_t *)(a + (size_t)t * a_stride);
        out[t] = planar_finish(w, q, n, i, x, (const float *)((const uint8_t *)x + nb * 32), acc[t], off[t], kind);
    }
}

/* M rows (w_stride apart) x one token, the rows read in lockstep, a step
 * (planar_dot_t) of each in turn: decode's several streams per thread
 * (matmul.c).
 * Each row's operations and their order are planar_dot_t's at T = 1, so
 * the results are identical to M one-row dots; the activations' scales
 * are loaded once for all M rows. */
static inline __attribute__((always_inline)) void planar_dot_rows(int64_t n, const void *w, size_t w_stride,
                                                                  const uint8_t *a, float *out, size_t ldo,
                                                                  const int kind, const int M) {
    const int four = NB_PL_NIBBLES(kind), lines = four ? 2 : 4; /* 64-byte lines of eight blocks */
    const int turn = four ? 1 : 2;                              /* lines of a row before the next row's */
    const int64_t nb = n / 32;
    const int8_t *x = (const int8_t *)a;
    const float *ad = (const float *)(a + nb * 32), *ads = ad + nb;
    const uint8_t *wr[4], *q[4];
    __m512 acc[4][2];
    __m256 off[4];
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) {
        wr[r] = (const uint8_t *)w + (size_t)r * w_stride;
        q[r] = wr[r] + nb_pl_head(n, kind);
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        off[r] = _mm256_setzero_ps();
    }
    const int pf = nb_prefetch_bytes, pf2 = nb_prefetch_l2_bytes;
    int64_t i = 0;
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) nb_pl_row_start(wr[r], n, kind, pf, pf2);
/* the rows in turn, a line of each (4-bit) or two (8-bit), as the
 * four-block steps before: the 8-bit rows' four lines a step in 64-byte
 * turns (the probe's best, kernels/membw.c) read 2-5% less from DRAM */
#define PLANAR_ROWS_STEP(NB4)                                                                       \
    do {                                                                                            \
        __m256 ad8, ads8;                                                                           \
        act_scales8(ad, ads, i, NB4, &ad8, &ads8);                                                  \
        __m512i p[4][4];                                                                            \
        _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) p[r][2] = p[r][3] = _mm512_setzero_si512(); \
        _Pragma("GCC unroll 4") for (int k0 = 0; k0 < lines >> (NB4); k0 += turn)                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) {                                   \
                _Pragma("GCC unroll 2") for (int k = k0; k < k0 + turn; k++)                        \
                    nb_prefetch_ahead(q[r] + i * (four ? 16 : 32) + 64 * k, pf, pf2);               \
                _Pragma("GCC unroll 2") for (int k = k0; k < k0 + turn; k++) {                      \
                    __m512i wv[4];                                                                  \
                    planar_line(q[r], i, k, four, -1, 0, wv);                                       \
                    planar_dps(wv, x + i * 32, four ? 2 * k : k, four ? 2 * k + 2 : k + 1, p[r]);   \
                }                                                                                   \
            }                                                                                       \
        _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) {                                       \
            __m256 dw, dz;                                                                          \
            planar_scales8(wr[r], n, i, kind, NB4, &dw, &dz);                                       \
            planar_acc(p[r], ad8, ads8, dw, dz, acc[r], &off[r], four);                             \
        }                                                                                           \
    } while (0)
    PLANAR_STEPS(PLANAR_ROWS_STEP);
#undef PLANAR_ROWS_STEP
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) out[(size_t)r * ldo] = planar_finish(wr[r], q[r], n, i, x, ad, acc[r], off[r], kind);
}

/* The vec_dot_mxn contract of kernels/qdot.h (m <= 4 rows, nn <= 4 tokens;
 * out[i*ldo + j]): one token's rows in lockstep, more tokens a row at a
 * time. */
static inline __attribute__((always_inline)) void planar_mxn(int64_t n, int m, int nn, const void *w, size_t w_stride,
                                                             const void *act, size_t a_stride, float *out, size_t ldo,
                                                             const int kind) {
    if (nn == 1 && m > 1) {
        switch (m) {
        case 2: planar_dot_rows(n, w, w_stride, act, out, ldo, kind, 2); return;
        case 3: planar_dot_rows(n, w, w_stride, act, out, ldo, kind, 3); return;
        default: planar_dot_rows(n, w, w_stride, act, out, ldo, kind, 4); return;
        }
    }
    for (int r = 0; r < m; r++) {
        const void *wr = (const uint8_t *)w + (size_t)r * w_stride;
        float *o = out + (size_t)r * ldo;
        switch (nn) {
        case 1: planar_dot_t(n, wr, act, a_stride, o, kind, 1); break;
        case 2: planar_dot_t(n, wr, act, a_stride, o, kind, 2); break;
        case 3: planar_dot_t(n, wr, act, a_stride, o, kind, 3); break;
        default: planar_dot_t(n, wr, act, a_stride, o, kind, 4); break;
        }
    }
}

/* One token (the decode dots) and the small-batch dots, per kind. */
#define PLANAR(name, kind)                                                                                   \
    void nb_##name##_dot_avx512(int64_t n, const void *w, const void *a, float *out) {                       \
        planar_dot_t(n, w, a, 0, out, kind, 1);                                                              \
    }                                                                                                        \
    void nb_##name##_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, \
                                    size_t a_stride, float *out, size_t ldo) {                               \
        planar_mxn(n, m, nn, w, w_stride, act, a_stride, out, ldo, kind);                                    \
    }
PLANAR(q4_0r, NB_PL_Q4_0R)
PLANAR(q8_0r, NB_PL_Q8_0R)
PLANAR(w8r, NB_PL_W8R)
PLANAR(w4g32r, NB_PL_W4G32R)
PLANAR(w4g64r, NB_PL_W4G64R)
PLANAR(w4g128r, NB_PL_W4G128R)

/* Dequantization of repacked rows (token embeddings, the float fallback):
 * 16 weights at a time widened to floats. */
static inline void put16(float *dst, __m128i q8, float s, float off) {
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q8));
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_sub_ps(v, _mm512_set1_ps(off)), _mm512_set1_ps(s)));
}

/* Q4_0R, Q8_0R, W8R and W4G*R (planar_kind.h), a block at a time. */
static inline __attribute__((always_inline)) void planar_to_float(const void *src, float *dst, int64_t n,
                                                                   const int kind) {
    const int64_t nb = n / 32;
    const uint8_t *q = (const uint8_t *)src + nb_pl_head(n, kind);
    const __m128i m4 = _mm_set1_epi8(15);
#define SCALE(b) nb_pl_scale(src, n, b, kind)
#define ZERO(b) ((float)nb_pl_zero(src, n, b, kind))
    int64_t i = 0;
    if (NB_PL_NIBBLES(kind))
        for (; i + 4 <= nb; i += 4) /* 64 bytes: low nibbles weights 0..63, high 64..127 of the group */
            for (int c = 0; c < 4; c++) {
                __m128i b = _mm_loadu_si128((const __m128i *)(q + i * 16 + 16 * c));
                int64_t lo = i + c / 2, hi = i + 2 + c / 2; /* chunk c: weights 16c.. (low), 64+16c.. (high) */
                put16(dst + i * 32 + 16 * c, _mm_and_si128(b, m4), SCALE(lo), ZERO(lo));
                put16(dst + i * 32 + 64 + 16 * c, _mm_and_si128(_mm_srli_epi16(b, 4), m4), SCALE(hi), ZERO(hi));
            }
    for (; i < nb; i++) {
        if (NB_PL_NIBBLES(kind)) {
            __m128i b = _mm_loadu_si128((const __m128i *)(q + i * 16));
            put16(dst + i * 32, _mm_and_si128(b, m4), SCALE(i), ZERO(i));
            put16(dst + i * 32 + 16, _mm_and_si128(_mm_srli_epi16(b, 4), m4), SCALE(i), ZERO(i));
        } else {
            for (int h = 0; h < 2; h++)
                put16(dst + i * 32 + h * 16, _mm_loadu_si128((const __m128i *)(q + i * 32 + h * 16)), SCALE(i), 128.0f);
        }
    }
#undef SCALE
#undef ZERO
}

void nb_q4_0r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_Q4_0R); }
void nb_q8_0r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_Q8_0R); }
void nb_w8r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_W8R); }
void nb_w4g32r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_W4G32R); }
void nb_w4g64r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_W4G64R); }
void nb_w4g128r_to_float_avx512(const void *src, float *dst, int64_t n) { planar_to_float(src, dst, n, NB_PL_W4G128R); }

/* Batched int8 GEMM (see repack.h): per row and group of 16 tokens, per
 * block: 8 x (broadcast 4 weight bytes, vpdpbusd with 16 tokens' 4 bytes),
 * minus the offset times the tokens' sums, then scaled into float. */
static inline uint32_t w4_q4(const uint8_t *q, int64_t nb, int64_t b, int kk) {
    uint32_t v;
    if (b < nb / 4 * 4) { /* grouped: block b%4 is the low (0, 1) or high (2, 3) nibbles of 32 bytes */
        memcpy(&v, q + (b / 4) * 64 + 32 * (b & 1) + 4 * kk, 4);
        return (b & 2) ? (v >> 4) & 0x0f0f0f0fu : v & 0x0f0f0f0fu;
    }
    memcpy(&v, q + b * 16 + (kk & 3) * 4, 4);
    return kk < 4 ? (v & 0x0f0f0f0fu) : ((v >> 4) & 0x0f0f0f0fu);
}

static inline uint32_t w4_q8(const uint8_t *q, int64_t nb, int64_t b, int kk) {
    (void)nb;
    uint32_t v;
    memcpy(&v, q + b * 32 + kk * 4, 4);
    return v;
}

/* Rows r .. r+3 (w, q: the rows and their quants; a short tile repeats its
 * last row) x token groups g .. g+NG-1 (NG 1 or 2): per step, NG activation
 * loads and four weight broadcasts feed 4 x NG vpdpbusd. Two groups, not
 * four: 4 x 4 tiles need 16 integer and 16 float accumulators, all 32
 * registers, and spilled (Q8_0 pp512 +7-10% at two). The integer sums start
 * at minus the offset times the tokens' sums instead of subtracting it per
 * row (W4G*R: each row's zero point times the sums, one vpmaddwd: a sum of
 * 32 int8 and z <= 255 fit in 16 bits). A four-block group of nibbles is
 * unpacked to bytes on the stack once (two vector ops per row), so every
 * weight word is broadcast straight from memory: extracting the nibbles per
 * word in general registers and moving them to vectors cost Q4_0 pp512
 * 8-10% (docs/speed.md, session 11). `kind`: kernels/x86/planar_kind.h. */
static inline __attribute__((always_inline)) void planar_tile(const uint8_t *const w[4], const uint8_t *const q[4],
                                                              int nrows, int64_t r, int64_t g, const nb_actpack *ap,
                                                              float *y, int64_t ldy, const __m512i idx, const int kind,
                                                              const int NG, const int pf) {
    const int four = NB_PL_NIBBLES(kind);
    const int64_t nb = ap->nb, K = ap->K, grouped_nb = four ? nb / 4 * 4 : 0;
    const int shift = kind == NB_PL_Q4_0R ? 3 : 7; /* the fixed offsets 8 and 128 */
    _Alignas(64) uint8_t wu[4][128]; /* 4-bit: the current group's low nibbles, then its high ones, per row */
    __m512 f[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
#pragma GCC unroll 2
        for (int c = 0; c < NG; c++) f[k][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int grouped = b < grouped_nb;
        if (pf && (b & (four ? 3 : 1)) == 0) /* the first pass over the rows: their line nb_prefetch_bytes ahead */
            for (int k = 0; k < 4; k++) {
                _mm_prefetch((const char *)q[k] + b * (four ? 16 : 32) + nb_prefetch_bytes, _MM_HINT_T0);
                if ((b & 31) == 0) _mm_prefetch((const char *)w[k] + b * 2 + nb_prefetch_bytes, _MM_HINT_T0);
            }
        if (grouped && (b & 3) == 0) {
            const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_loadu_si512((const void *)(q[k] + b * 16));
                _mm512_store_si512((void *)wu[k], _mm512_and_si512(v, m4));
                _mm512_store_si512((void *)(wu[k] + 64), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
        }
        /* block b of a group: the low (b & 3 = 0, 1) or high (2, 3) nibbles of bytes 32 (b & 1) .. */
        const int wo = 64 * ((int)(b & 2) >> 1) + 32 * (int)(b & 1);
        __m512i I[4][2], no[2];
        __m512 da[2];
#pragma GCC unroll 2
        for (int c = 0; c < NG; c++) {
            const __m512i sum = _mm512_load_si512((const void *)(ap->sum + ((g + c) * nb + b) * 16));
            no[c] = _mm512_sub_epi32(_mm512_setzero_si512(), NB_PL_GROUP(kind) ? sum : _mm512_slli_epi32(sum, shift));
            da[c] = _mm512_load_ps(ap->d + ((g + c) * nb + b) * 16);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i zk = _mm512_set1_epi32(NB_PL_GROUP(kind) ? nb_pl_zero(w[k], K, b, kind) : 0);
#pragma GCC unroll 2
            for (int c = 0; c < NG; c++) I[k][c] = NB_PL_GROUP(kind) ? _mm512_madd_epi16(no[c], zk) : no[c];
        }
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            __m512i av[2], wv[4];
#pragma GCC unroll 2
            for (int c = 0; c < NG; c++) av[c] = _mm512_load_si512((const void *)(ap->q + ((g + c) * nb + b) * 512 + kk * 64));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                uint32_t v;
                if (grouped)
                    memcpy(&v, wu[k] + wo + 4 * kk, 4);
                else
                    v = four ? w4_q4(q[k], nb, b, kk) : w4_q8(q[k], nb, b, kk);
                wv[k] = _mm512_set1_epi32((int)v);
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
#pragma GCC unroll 2
                for (int c = 0; c < NG; c++) I[k][c] = _mm512_dpbusd_epi32(I[k][c], wv[k], av[c]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512 sk = _mm512_set1_ps(nb_pl_scale(w[k], K, b, kind));
#pragma GCC unroll 2
            for (int c = 0; c < NG; c++)
                f[k][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[k][c]), _mm512_mul_ps(da[c], sk), f[k][c]);
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < NG; c++) {
        const int64_t nt = ap->n - (g + c) * 16;
        const __mmask16 m = nt >= 16 ? 0xffff : (__mmask16)((1u << nt) - 1);
        for (int k = 0; k < nrows; k++) _mm512_mask_i32scatter_ps(y + (g + c) * 16 * ldy + r + k, m, idx, f[k][c], 4);
    }
}

/* Four rows x up to two token groups per step: every activation load feeds
 * four vpdpbusd and every weight broadcast up to two. */
static inline __attribute__((always_inline)) void planar_gemm(const uint8_t *w, uint64_t row_bytes, int64_t nr,
                                                              const nb_actpack *ap, float *y, int64_t ldy,
                                                              const int kind) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int)ldy));
    for (int64_t r = 0; r < nr; r += 4) {
        const int nrows = nr - r < 4 ? (int)(nr - r) : 4;
        const uint8_t *wr[4], *q[4];
        for (int k = 0; k < 4; k++) {
            wr[k] = w + (r + (k < nrows ? k : nrows - 1)) * row_bytes;
            q[k] = wr[k] + nb_pl_head(ap->K, kind);
        }
        for (int64_t g = 0; g < ap->ng; g += 2) {
            if (ap->ng - g >= 2)
                planar_tile(wr, q, nrows, r, g, ap, y, ldy, idx, kind, 2, g == 0);
            else
                planar_tile(wr, q, nrows, r, g, ap, y, ldy, idx, kind, 1, g == 0);
        }
    }
}

#define PLANAR_GEMM(name, kind)                                                                              \
    void nb_##name##_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap,     \
                                 float *y, int64_t ldy) {                                                    \
        planar_gemm(w, row_bytes, nr, ap, y, ldy, kind);                                                     \
    }
PLANAR_GEMM(q4_0r, NB_PL_Q4_0R)
PLANAR_GEMM(q8_0r, NB_PL_Q8_0R)
PLANAR_GEMM(w8r, NB_PL_W8R)
PLANAR_GEMM(w4g32r, NB_PL_W4G32R)
PLANAR_GEMM(w4g64r, NB_PL_W4G64R)
PLANAR_GEMM(w4g128r, NB_PL_W4G128R)

/* ---- activation pack for the int8 GEMMs ---------------------------------- */

/* 32 int32 (two vectors) -> 32 int8 at dst, and their sums (whole, halves). */
static inline void put_block(int8_t *dst, __m512i q0, __m512i q1, int32_t *s0, int32_t *s1) {
    _mm_storeu_si128((__m128i *)dst, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm512_cvtepi32_epi8(q1));
    *s0 = _mm512_reduce_add_epi32(q0);
    *s1 = _mm512_reduce_add_epi32(q1);
}

/* Q8_K's scale of 256 floats as nb_quant_q8_K sets it: -127 / the first
 * value of largest magnitude (0 for all zeros); *d = its inverse. */
static float q8k_scale(const float *x, float *d) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < 16; k++) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(x + 16 * k), absmask));
    float amax = _mm512_reduce_max_ps(m);
    *d = 0;
    if (amax == 0) return 0;
    for (int k = 0; k < 16; k++) {
        __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + 16 * k), absmask), _mm512_set1_ps(amax),
                                           _CMP_EQ_OQ);
        if (hit) {
            float s = -127.f / x[16 * k + __builtin_ctz(hit)];
            *d = 1 / s;
            return s;
        }
    }
    return 0;
}

/* One token's activations for the decode dots, byte-identical to
 * nb_q8_0p_quantize_ref (same products, ties-to-even conversion, the scale
 * rounded through fp16 by vcvtps2ph; test_repack compares). The reference is
 * scalar with a libm call per element, and it runs on the caller while the
 * other threads wait: about 4% of a TinyLlama decode step. */
void nb_q8_0p_quantize_avx512(const float *x, void *dst, int64_t n) {
    const int64_t nb = n / 32;
    int8_t *q = dst;
    float *d = (float *)(q + nb * 32), *ds = d + nb;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        float s = _cvtsh_ss(_cvtss_sh(amax / 127.f, 0));
        int32_t s0, s1;
        put_block(q + i * 32, _mm512_cvtps_epi32(_mm512_mul_ps(v0, id)), _mm512_cvtps_epi32(_mm512_mul_ps(v1, id)),
                  &s0, &s1);
        const int32_t sum = s0 + s1;
        float fs = s * (float)sum;
        memcpy(d + i, &s, 4);
        memcpy(ds + i, &fs, 4);
        memcpy(ds + nb + i, &sum, 4);
    }
}

/* Q8_KP (Q8_K with its qs in lane order, kernels/repack.h) for the K-quant
 * decode dots, byte-identical to the reference (nb_quant_q8_K, then the
 * lane permutation): group l of 16 values holds positions 64c + 4l + b, i.e.
 * its four 4-byte words go to words 16c + l. */
void nb_q8_kp_quantize_avx512(const float *x, void *dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        nb_block_q8_K *y = (nb_block_q8_K *)dst + i;
        float d;
        const float s = q8k_scale(x, &d);
        if (s == 0) {
            memset(y, 0, sizeof *y);
            continue;
        }
        const __m512 sv = _mm512_set1_ps(s);
        uint32_t *w = (uint32_t *)(void *)y->qs;
        for (int l = 0; l < 16; l++) {
            __m512i v = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * l), sv)),
                                         _mm512_set1_epi32(127));
            y->bsums[l] = (int16_t)_mm512_reduce_add_epi32(v);
            __m128i b = _mm512_cvtepi32_epi8(v);
            for (int c = 0; c < 4; c++) {
                uint32_t word = (uint32_t)_mm_extract_epi32(b, 0);
                memcpy(w + 16 * c + l, &word, 4);
                b = _mm_srli_si128(b, 4);
            }
        }
        y->d = d;
    }
}

/* nb_actpack_group_ref with the quantization vectorised: the same roundings
 * (x * id or x * iscale in float, then to nearest, ties to even - what
 * vcvtps2dq does in the default rounding mode), so the bytes are identical;
 * tests/unit/kernels/test_repack.c compares the two. Block by block, the 16
 * tokens fill one 512-byte slab while it is in L1. */
void nb_actpack_group_avx512(nb_actpack *ap, const float *X, int64_t g) {
    const int64_t nb = ap->nb, K = ap->K;
    const int nt = (int)NB_MIN(NB_ACTPACK_TOKENS, ap->n - g * NB_ACTPACK_TOKENS);
    if (nt < NB_ACTPACK_TOKENS) nb_actpack_clear_group(ap, g); /* missing tokens multiply as zeros */
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const float *x0 = X + g * NB_ACTPACK_TOKENS * K;
    float ks[NB_ACTPACK_TOKENS], kd[NB_ACTPACK_TOKENS]; /* Q8_K: the current super-block's */
    for (int64_t b = 0; b < nb; b++) {
        if (ap->act == NB_Q8_K && b % 8 == 0)
            for (int tt = 0; tt < nt; tt++) ks[tt] = q8k_scale(x0 + tt * K + b * 32, &kd[tt]);
        int8_t *dst = ap->q + (g * nb + b) * 512;
        for (int tt = 0; tt < nt; tt++) {
            const float *xb = x0 + tt * K + b * 32;
            __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
            float scale, d;
            if (ap->act == NB_Q8_K) {
                scale = ks[tt];
                d = kd[tt];
            } else {
                float amax =
                    _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
                scale = amax != 0.0f ? 127.f / amax : 0.0f;
                d = _cvtsh_ss(_cvtss_sh(amax / 127.f, 0));
            }
            const __m512 sv = _mm512_set1_ps(scale);
            __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, sv)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, sv));
            if (ap->act == NB_Q8_K) {
                q0 = _mm512_min_epi32(q0, _mm512_set1_epi32(127));
                q1 = _mm512_min_epi32(q1, _mm512_set1_epi32(127));
            }
            _Alignas(32) int8_t blk[32];
            int32_t s0, s1;
            put_block(blk, q0, q1, &s0, &s1);
            for (int kk = 0; kk < 8; kk++) memcpy(dst + kk * 64 + tt * 4, blk + kk * 4, 4);
            int64_t at = (g * nb + b) * 16 + tt;
            ap->sum[at] = s0 + s1;
            ap->fsum[at] = (float)(s0 + s1);
            ap->sum16[(g * nb + b) * 32 + tt] = s0;
            ap->sum16[(g * nb + b) * 32 + 16 + tt] = s1;
            ap->d[at] = d;
        }
    }
}
