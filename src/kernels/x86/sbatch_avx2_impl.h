/* Small-batch int8 GEMMs over 8-token units of the activation pack
 * (kernels/sbatch.h) for AVX2 CPUs: the counterpart of sbatch_avx512.c for
 * the 256-bit GEMMs of kernels/x86/repack_avx2_impl.h. Included twice: by
 * sbatch_avx2.c with SB_VNNI 0 (u8 x s8 sums by vpmaddubsw + vpmaddwd, any
 * AVX2 CPU) and by sbatch_vnni_avx2.c with SB_VNNI 1 (AVX-VNNI's 256-bit
 * vpdpbusd). Each is bit-identical to the 16-token GEMM of its own variant
 * (nb_*_gemm_avx2 / _avxvnni), never to the other one's.
 *
 * The 16-token GEMM computes 2 rows x one 16-token group at a time, so a
 * batch of 8 fills half of every vector. Here a group's lone live half - a
 * batch of up to 8 tokens, or the last 1-8 tokens of a larger one - is one
 * 8-token unit: per tile of up to 8 rows, block by block, each row's
 * weights are unpacked once into a small buffer, then every 4 weight bytes
 * are broadcast and meet the unit's 8 tokens with one vpdpbusd (8
 * independent accumulator chains). Full and 9-16-token groups go to the
 * 16-token GEMM itself: tiles of 4 rows x 2 units were 0.75-0.9x its speed
 * (CPU time, n = 12..32, docs/speed.md "AVX2"). Per lane, the integer sums
 * are exact (any order) and the offset, scale and float accumulation are
 * those of the 16-token GEMM in the same order, so every result equals it
 * bit for bit (tests/unit/kernels/test_sbatch_avx2.c).
 *
 * Without VNNI the integer sums follow repack_avx2_impl.h: 4-bit weights
 * add eight vpmaddubsw steps in int16 (at most 8 x 2 x 15 x 128 = 30720)
 * before one vpmaddwd; Q6_KR's 6-bit weights widen every step; Q8_0R's
 * unsigned q+128 are turned back into |q| and q's sign. */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/sbatch.h"
#include "kernels/x86/planar_kind.h"


#define SB_CAT_(a, b, c) a##b##c
#define SB_CAT(a, b, c) SB_CAT_(a, b, c)
#if SB_VNNI
#define SB_FN(name) SB_CAT(nb_, name, _sgemm_avxvnni)
#define SB_GEMM(name) SB_CAT(nb_, name, _gemm_avxvnni)
#else
#define SB_FN(name) SB_CAT(nb_, name, _sgemm_avx2)
#define SB_GEMM(name) SB_CAT(nb_, name, _gemm_avx2)
#endif

enum { SB_Q4 = 0, SB_Q8 = 1, SB_Q6 = 2 };

#define AI static inline __attribute__((always_inline))

/* Index of unit u's first lane in the pack's per-token arrays of block b
 * (sum, fsum, d: [ng][nb][16]) and its activations ([ng][nb][8][64]). */
AI int64_t lane0(const nb_actpack *ap, int64_t u, int64_t b) { return ((u >> 1) * ap->nb + b) * 16 + 8 * (u & 1); }
AI const int8_t *unit_q(const nb_actpack *ap, int64_t u, int64_t b) {
    return ap->q + ((u >> 1) * ap->nb + b) * 512 + 32 * (u & 1);
}

AI __m256i bcast4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32((int)v);
}
AI __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Unit u's live tokens of f into y[t*ldy + r]. */
static inline void store_unit(float *y, int64_t ldy, int64_t r, int64_t u, int64_t n, __m256 f) {
    float t[8];
    _mm256_storeu_ps(t, f);
    int64_t t0 = u * NB_SBATCH_UNIT, nt = n - t0 < NB_SBATCH_UNIT ? n - t0 : NB_SBATCH_UNIT;
    for (int64_t i = 0; i < nt; i++) y[(t0 + i) * ldy + r] = t[i];
}

/* acc[i][j] = the integer sums over 4-byte steps kk = k0 .. k0+nk-1 of row
 * i < RR (weight bytes at wp[i] + nb_pl_step_offset(kk, kq)) with unit j < UU (activations at
 * a[j] + 64*kk), plus init (minus the unsigned weights' offset: the
 * same integer as subtracting it after, one op per unit instead of per
 * row). Without VNNI, SB_Q8 takes |q| from wp and q from sp. */
AI void sdot(const uint8_t *const *wp0, const uint8_t *const *sp0, const int8_t *const *a, const int k0, const int nk,
             const int mode, const int kq, const int RR, const int UU, const __m256i init, __m256i acc[8][2]) {
    const __m256i z = (SB_VNNI || mode != SB_Q4) ? init : _mm256_setzero_si256();
    __m256i s[8][2];
    /* The weight pointers (and below the activations) through an empty asm:
     * without it GCC hoisted a block's broadcasts into 32 stack slots,
     * spilled accumulators and reloaded the activations for each vpdpbusd. */
    const uint8_t *wp[8], *sp[8];
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) {
        s[i][0] = s[i][1] = z;
        wp[i] = wp0[i];
        sp[i] = NULL;
        __asm__ volatile("" : "+r"(wp[i]));
        if (!SB_VNNI && mode == SB_Q8) {
            sp[i] = sp0[i];
            __asm__ volatile("" : "+r"(sp[i]));
        }
    }
#if SB_VNNI
    (void)sp;
    (void)mode;
#pragma GCC unroll 8
    for (int kk = k0; kk < k0 + nk; kk++) {
        const int o = nb_pl_step_offset(kk, kq);
        __m256i av[2];
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) {
            av[j] = _mm256_load_si256((const __m256i *)(a[j] + kk * 64));
            __asm__("" : "+x"(av[j])); /* in a register: else each vpdpbusd reloads it (loads bound this loop) */
        }
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++) {
            __m256i wv = bcast4(wp[i] + o);
#pragma GCC unroll 2
            for (int j = 0; j < UU; j++) s[i][j] = _mm256_dpbusd_avx_epi32(s[i][j], wv, av[j]);
        }
    }
#else
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int kk = k0; kk < k0 + nk; kk++) {
        const int o = nb_pl_step_offset(kk, kq);
        __m256i av[2];
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) {
            av[j] = _mm256_load_si256((const __m256i *)(a[j] + kk * 64));
            __asm__("" : "+x"(av[j])); /* in a register: else each vpdpbusd reloads it (loads bound this loop) */
        }
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++) {
            __m256i wv = bcast4(wp[i] + o);
            if (mode == SB_Q4) { /* int16 sums, widened after the last step */
#pragma GCC unroll 2
                for (int j = 0; j < UU; j++) s[i][j] = _mm256_add_epi16(s[i][j], _mm256_maddubs_epi16(wv, av[j]));
            } else if (mode == SB_Q8) {
                __m256i g = bcast4(sp[i] + o);
#pragma GCC unroll 2
                for (int j = 0; j < UU; j++)
                    s[i][j] = _mm256_add_epi32(
                        s[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, _mm256_sign_epi8(av[j], g)), ones));
            } else {
#pragma GCC unroll 2
                for (int j = 0; j < UU; j++)
                    s[i][j] = _mm256_add_epi32(s[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, av[j]), ones));
            }
            /* each step's adds in order: without it GCC computed a block's
             * multiplies first and spilled them (as tile in
             * repack_avx2_impl.h) */
#pragma GCC unroll 2
            for (int j = 0; j < UU; j++) __asm__("" : "+x"(s[i][j]));
        }
    }
    if (mode == SB_Q4) {
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++)
#pragma GCC unroll 2
            for (int j = 0; j < UU; j++) s[i][j] = _mm256_add_epi32(_mm256_madd_epi16(s[i][j], ones), init);
    }
#endif
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++)
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) acc[i][j] = s[i][j];
}

/* ---- Q4_0R / Q8_0R ------------------------------------------------------ */

/* Block b's 32 weights of RR rows into wb[i] (and Q8 without VNNI: q's
 * signs into sb[i]): Q4_0R (four = 1) and Q4_0L (four = 2, lane order)
 * unpacked four grouped blocks at a time (buf[i] keeps them), Q8_0R (four =
 * 0) in place. */
AI void q0_unpack(const uint8_t *const *q, int64_t nb4, int64_t b, const int four, const int RR,
                  uint8_t buf[8][128], const uint8_t **wb, const uint8_t **sb) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m128i m4x = _mm_set1_epi8(15);
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) {
        sb[i] = NULL;
        if (four) {
            if (b < nb4) { /* group of 4: blocks 0, 1 the low nibbles of bytes 0-31 / 32-63, 2, 3 the high */
                if ((b & 3) == 0) {
                    const uint8_t *s = q[i] + (b / 4) * 64;
                    _mm_prefetch((const char *)s + nb_prefetch_bytes, _MM_HINT_T0);
                    const __m256i v0 = loadu(s), v1 = loadu(s + 32);
                    __m256i v[4] = {_mm256_and_si256(v0, m4), _mm256_and_si256(v1, m4),
                                    _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                                    _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4)};
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) _mm256_store_si256((__m256i *)(buf[i] + 32 * k), v[k]);
                }
                wb[i] = buf[i] + (four == 2 ? 4 : 32) * (b & 3); /* Q4_0L: kq = 2 (nb_pl_step_offset) */
            } else { /* tail block in Q4_0 order: words 0-3 the low nibbles, 4-7 the high */
                __m128i v = _mm_loadu_si128((const __m128i *)(q[i] + b * 16));
                _mm_store_si128((__m128i *)buf[i], _mm_and_si128(v, m4x));
                _mm_store_si128((__m128i *)(buf[i] + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4x));
                wb[i] = buf[i];
            }
        } else {
            const uint8_t *p = q[i] + b * 32;
            if ((b & 1) == 0) _mm_prefetch((const char *)p + nb_prefetch_bytes, _MM_HINT_T0);
#if SB_VNNI
            wb[i] = p;
#else
            __m256i sv = _mm256_xor_si256(loadu(p), _mm256_set1_epi8((char)0x80));
            _mm256_store_si256((__m256i *)buf[i], _mm256_abs_epi8(sv));
            _mm256_store_si256((__m256i *)(buf[i] + 32), sv);
            wb[i] = buf[i];
            sb[i] = buf[i] + 32;
#endif
        }
    }
}

/* Unit ub of block b into f[i]: as planar_gemm of repack_avx2_impl.h,
 * (sum - offset) * (d_act * d_w) added per block; kq: the weights' layout
 * in wb (nb_pl_step_offset). */
AI void q0_unit(const nb_actpack *ap, int64_t ub, int64_t b, const uint8_t *const *wb, const uint8_t *const *sb,
                const float *sw, const int four, const int kq, const int RR, __m256 f[8]) {
    const int8_t *a[1] = {unit_q(ap, ub, b)};
    /* offset 8 (Q4) or 128 (Q8 with VNNI) = 1 << shift; none for Q8 without VNNI */
    const int shift = four ? 3 : (SB_VNNI ? 7 : -1);
    const int64_t l = lane0(ap, ub, b);
    __m256i o = _mm256_setzero_si256();
    if (shift >= 0) o = _mm256_slli_epi32(_mm256_load_si256((const __m256i *)(ap->sum + l)), shift);
    __m256i acc[8][2];
    sdot(wb, sb, a, 0, 8, four ? SB_Q4 : SB_Q8, kq, RR, 1, _mm256_sub_epi32(_mm256_setzero_si256(), o), acc);
    const __m256 da = _mm256_load_ps(ap->d + l);
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++)
        f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_mul_ps(da, _mm256_set1_ps(sw[i])), f[i]);
}

/* RR rows from r against unit ub. */
AI void q0_tile(const uint8_t *w, uint64_t row_bytes, int64_t r, const nb_actpack *ap, int64_t ub, float *y,
                int64_t ldy, const int four, const int RR) {
    const int64_t nb = ap->nb, nb4 = four ? nb / 4 * 4 : 0;
    _Alignas(32) uint8_t buf[8][128];
    const uint16_t *dw[8];
    const uint8_t *q[8];
    __m256 f[8];
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) {
        dw[i] = (const uint16_t *)(w + (uint64_t)(r + i) * row_bytes);
        q[i] = (const uint8_t *)dw[i] + nb * 2;
        f[i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb[8], *sb[8];
        float sw[8];
        q0_unpack(q, nb4, b, four, RR, buf, wb, sb);
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++) sw[i] = _cvtsh_ss(dw[i][b]);
        if (four == 2 && b < nb4) q0_unit(ap, ub, b, wb, sb, sw, four, 2, RR, f);
        else q0_unit(ap, ub, b, wb, sb, sw, four, 0, RR, f);
    }
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) store_unit(y, ldy, r + i, ub, ap->n, f[i]);
}

/* ---- Q4_KR / Q6_KR ------------------------------------------------------ */

/* Super-block -> 256 weights in lane order (Q4_KR: 0..15, Q6_KR: 0..63) and
 * its scales as floats (Q4_KR: d*sc[0..7], dmin*m[0..7]; Q6_KR: d*sc[0..15]),
 * as kgemm of repack_avx2_impl.h computes them. */
static inline void unpack_k(const uint8_t *blk, uint8_t *u, float *sc, const int six) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m256i q0, q1, q2, q3;
        if (six) {
            const nb_block_q6_kr *b = (const nb_block_q6_kr *)blk;
            __m256i a = loadu(b->ql + 32 * h), c = loadu(b->ql + 64 + 32 * h), hb = loadu(b->qh + 32 * h);
            /* 16-bit shifts move bits across bytes only into positions the masks clear */
            q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
            q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                                 _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
            q2 = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(hb, m30));
            q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
        } else {
            const nb_block_q4_kr *b = (const nb_block_q4_kr *)blk;
            __m256i v0 = loadu(b->qs + 32 * h), v1 = loadu(b->qs + 64 + 32 * h);
            q0 = _mm256_and_si256(v0, m4);
            q1 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
            q2 = _mm256_and_si256(v1, m4);
            q3 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
        }
        _mm256_store_si256((__m256i *)(u + 32 * h), q0);
        _mm256_store_si256((__m256i *)(u + 64 + 32 * h), q1);
        _mm256_store_si256((__m256i *)(u + 128 + 32 * h), q2);
        _mm256_store_si256((__m256i *)(u + 192 + 32 * h), q3);
    }
    if (six) {
        const nb_block_q6_kr *b = (const nb_block_q6_kr *)blk;
        const float d = _cvtsh_ss(b->d);
        for (int j = 0; j < 16; j++) sc[j] = d * (float)b->sc[j];
    } else {
        const nb_block_q4_kr *b = (const nb_block_q4_kr *)blk;
        const float d = _cvtsh_ss(b->d), dm = _cvtsh_ss(b->dmin);
        for (int j = 0; j < 8; j++) {
            sc[j] = d * (float)b->sc[j];
            sc[8 + j] = dm * (float)b->m[j];
        }
    }
}

/* Unit ub of 32-weight block jb of super-block s into f[i]. */
AI void k_unit(const nb_actpack *ap, int64_t ub, int64_t s, int jb, const uint8_t *const *wb, float sc[8][16],
               const int six, const int RR, __m256 f[8]) {
    const int64_t nb = ap->nb, b = s * 8 + jb;
    const int8_t *a[1] = {unit_q(ap, ub, b)};
    __m256i acc[8][2];
    if (six) {
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            /* q - 32 through the tokens' sums of these 16 activations */
            const int64_t l16 = ((ub >> 1) * nb + b) * 32 + 16 * half + 8 * (ub & 1);
            __m256i o = _mm256_slli_epi32(_mm256_load_si256((const __m256i *)(ap->sum16 + l16)), 5);
            sdot(wb, NULL, a, 4 * half, 4, SB_Q6, 1, RR, 1, _mm256_sub_epi32(_mm256_setzero_si256(), o), acc);
#pragma GCC unroll 8
            for (int i = 0; i < RR; i++)
                f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_set1_ps(sc[i][2 * jb + half]), f[i]);
        }
    } else {
        sdot(wb, NULL, a, 0, 8, SB_Q4, 1, RR, 1, _mm256_setzero_si256(), acc);
        /* d*sc*q - dmin*m, the min through the tokens' sums */
        const __m256 fs = _mm256_load_ps(ap->fsum + lane0(ap, ub, b));
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++)
            f[i] = _mm256_fnmadd_ps(fs, _mm256_set1_ps(sc[i][8 + jb]),
                                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_set1_ps(sc[i][jb]), f[i]));
    }
}

AI void k_tile(const uint8_t *w, uint64_t row_bytes, int64_t r, const nb_actpack *ap, int64_t ub, float *y,
               int64_t ldy, const int six, const int RR) {
    const int64_t nsb = ap->K / 256;
    const uint64_t bs = six ? sizeof(nb_block_q6_kr) : sizeof(nb_block_q4_kr);
    _Alignas(32) uint8_t u8[8][256];
    float sc[8][16];
    __m256 F[8], f[8];
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) F[i] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++) {
            const uint8_t *blk = w + (uint64_t)(r + i) * row_bytes + (uint64_t)s * bs;
            for (uint64_t l = 0; l < bs; l += 64) _mm_prefetch((const char *)blk + nb_prefetch_bytes + l, _MM_HINT_T0);
            unpack_k(blk, u8[i], sc[i], six);
            f[i] = _mm256_setzero_ps();
        }
        for (int jb = 0; jb < 8; jb++) {
            const uint8_t *wb[8];
#pragma GCC unroll 8
            for (int i = 0; i < RR; i++) wb[i] = u8[i] + 8 * jb;
            k_unit(ap, ub, s, jb, wb, sc, six, RR, f);
        }
        const __m256 d = _mm256_load_ps(ap->d + lane0(ap, ub, s * 8));
#pragma GCC unroll 8
        for (int i = 0; i < RR; i++) F[i] = _mm256_fmadd_ps(f[i], d, F[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < RR; i++) store_unit(y, ldy, r + i, ub, ap->n, F[i]);
}

/* ---- drivers ------------------------------------------------------------ */

/* The groups with more than 8 live tokens through the 16-token GEMM (GEMM),
 * a last group's lone live unit (a batch of up to 8 tokens, or the 1-8
 * after the full groups) through TILE, rows in tiles of 8, 4, 2 and 1. */
#define SB_DRIVE(TILE, FLAG, GEMM)                                                                            \
    if (ap->n <= 0) return;                                                                                  \
    const int lone = ap->n - (ap->ng - 1) * NB_ACTPACK_TOKENS <= NB_SBATCH_UNIT;                             \
    const int64_t gg = ap->ng - lone;                                                                        \
    if (gg > 0) {                                                                                            \
        nb_actpack v = nb_actpack_slice(ap, 0, gg);                                                          \
        GEMM(w, row_bytes, nr, &v, y, ldy);                                                                  \
    }                                                                                                        \
    if (!lone) return;                                                                                       \
    const int64_t ub = 2 * (ap->ng - 1);                                                                     \
    int64_t r = 0;                                                                                           \
    for (; r + 8 <= nr; r += 8) TILE(w, row_bytes, r, ap, ub, y, ldy, FLAG, 8);                              \
    if (r + 4 <= nr) {                                                                                       \
        TILE(w, row_bytes, r, ap, ub, y, ldy, FLAG, 4);                                                      \
        r += 4;                                                                                              \
    }                                                                                                        \
    if (r + 2 <= nr) {                                                                                       \
        TILE(w, row_bytes, r, ap, ub, y, ldy, FLAG, 2);                                                      \
        r += 2;                                                                                              \
    }                                                                                                        \
    if (r < nr) TILE(w, row_bytes, r, ap, ub, y, ldy, FLAG, 1);

void SB_FN(q4_0r)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    SB_DRIVE(q0_tile, 1, SB_GEMM(q4_0r))
}
void SB_FN(q4_0l)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    SB_DRIVE(q0_tile, 2, SB_GEMM(q4_0l))
}
void SB_FN(q8_0r)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    SB_DRIVE(q0_tile, 0, SB_GEMM(q8_0r))
}
void SB_FN(q4_kr)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    SB_DRIVE(k_tile, 0, SB_GEMM(q4_kr))
}
void SB_FN(q6_kr)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {
    SB_DRIVE(k_tile, 1, SB_GEMM(q6_kr))
}
