/* Small-batch int8 GEMMs over units of the activation pack
 * (kernels/sbatch.h), AVX-512 VNNI.
 *
 * One tile function per weight family (q0_tile: Q4_0R / Q8_0R; k_tile:
 * Q4_KR / Q6_KR), written once for both unit widths: Z = 0 works on 8-token
 * units (a pack group's low or high half) in 256-bit registers, Z = 1 on
 * whole 16-token groups in 512-bit registers. The values are held as
 * __m512i / __m512 either way; for Z = 0 the v* helpers below apply the
 * 256-bit instruction to the low half (the casts cost nothing), so after
 * inlining with a constant Z each tile is plain ymm or plain zmm code.
 *
 * Per tile of up to 4 rows x 2 units, block by block: each row's 32 weights
 * are unpacked once (Q4_0R: four blocks from one 64-byte load; the K types:
 * a super-block into 256 bytes in lane order) into a small buffer, then
 * every 4 weight bytes are broadcast (a load) and meet each unit's tokens
 * with one vpdpbusd. The offset, scale and float accumulation per lane are
 * those of the 16-token GEMMs (kernels/x86/repack_avx512.c and
 * repack_k_avx512.c), so the results are bit-identical to theirs. In the
 * 512-bit Q4_0R / Q8_0R tiles the integer offset (-8 or -128 times the
 * token's sum) starts the first partial sum instead of being subtracted at
 * the end (integer sums: exact in any order), and in every
 * tile of 4 rows the results are transposed in registers and stored as 4
 * consecutive floats per token instead of 4 x 16 scalar stores.
 *
 * Vectorisation is off as in those files (GCC 12 miscompiles an
 * auto-vectorised u8 x s8 sum into vpdpbusd); the hot loops are intrinsics. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/sbatch.h"


#define AI static inline __attribute__((always_inline))

/* How far ahead of its reads a tile prefetches each row's weights: a fixed
 * 4 KiB, not the decode dots' nb_prefetch_bytes (1-2 KiB, tuned for one
 * row streamed at memory speed). A tile reads its rows in lockstep and
 * they lie back to back: in a 2048-wide Q4_0R row (1152 bytes) 2 KiB ahead
 * of row i is row i+1 or i+2, mostly already being read, where 4 KiB
 * reaches the next tile's rows. bench_sbatch
 * against the kernels with nb_prefetch_bytes (2048 here), one process,
 * Zen 5: Q4_0 32-128 tokens 1.06-1.12x (1 thread), 1.04-1.09x (2), Q8_0,
 * Q4_K, Q6_K 1.03-1.09x at most sizes; 8 KiB was 2-5% slower than 4
 * (docs/speed.md, session 51). */
#ifndef SB_PF
#define SB_PF 4096
#endif

/* ---- one vector type for both widths (Z = 0: the low 256 bits) -------- */
#define LO(x) _mm512_castsi512_si256(x)
#define LOF(x) _mm512_castps512_ps256(x)
#define UP(x) _mm512_castsi256_si512(x)
#define UPF(x) _mm512_castps256_ps512(x)
AI __m512i vzero(void) { return _mm512_setzero_si512(); }
AI __m512 vzerof(void) { return _mm512_setzero_ps(); }
AI __m512i vload(const void *p, const int Z) { return Z ? _mm512_load_si512(p) : UP(_mm256_load_si256((const __m256i *)p)); }
AI __m512 vloadf(const float *p, const int Z) { return Z ? _mm512_load_ps(p) : UPF(_mm256_load_ps(p)); }
AI __m512i vbcast4(const uint8_t *p, const int Z) {
    uint32_t v;
    memcpy(&v, p, 4);
    return Z ? _mm512_set1_epi32((int)v) : UP(_mm256_set1_epi32((int)v));
}
AI __m512i vdp(__m512i c, __m512i w, __m512i a, const int Z) {
    return Z ? _mm512_dpbusd_epi32(c, w, a) : UP(_mm256_dpbusd_epi32(LO(c), LO(w), LO(a)));
}
AI __m512i vadd(__m512i a, __m512i b, const int Z) { return Z ? _mm512_add_epi32(a, b) : UP(_mm256_add_epi32(LO(a), LO(b))); }
/* -(x << s): the offset that starts a partial sum */
AI __m512i vnegshl(__m512i x, const int s, const int Z) {
    return Z ? _mm512_sub_epi32(vzero(), _mm512_slli_epi32(x, (unsigned)s))
             : UP(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(LO(x), s)));
}
AI __m512 vcvt(__m512i a, const int Z) { return Z ? _mm512_cvtepi32_ps(a) : UPF(_mm256_cvtepi32_ps(LO(a))); }
AI __m512 vset1(float s, const int Z) { return Z ? _mm512_set1_ps(s) : UPF(_mm256_set1_ps(s)); }
AI __m512 vmul(__m512 a, __m512 b, const int Z) { return Z ? _mm512_mul_ps(a, b) : UPF(_mm256_mul_ps(LOF(a), LOF(b))); }
AI __m512 vfmadd(__m512 a, __m512 b, __m512 c, const int Z) {
    return Z ? _mm512_fmadd_ps(a, b, c) : UPF(_mm256_fmadd_ps(LOF(a), LOF(b), LOF(c)));
}
AI __m512 vfnmadd(__m512 a, __m512 b, __m512 c, const int Z) {
    return Z ? _mm512_fnmadd_ps(a, b, c) : UPF(_mm256_fnmadd_ps(LOF(a), LOF(b), LOF(c)));
}

/* Unit u of block b: Z = 1 group u (16 tokens), Z = 0 half u & 1 of group
 * u >> 1 (8 tokens). Its first lane in the per-token arrays (sum, fsum, d:
 * [ng][nb][16]), in sum16 ([ng][nb][2][16], half h), and its activations
 * ([ng][nb][8][64]: word kk of the unit's tokens at kk * 64). */
AI int64_t ulane(const nb_actpack *ap, int64_t u, int64_t b, const int Z) {
    return Z ? (u * ap->nb + b) * 16 : ((u >> 1) * ap->nb + b) * 16 + 8 * (u & 1);
}
AI int64_t ulane16(const nb_actpack *ap, int64_t u, int64_t b, int h, const int Z) {
    return Z ? (u * ap->nb + b) * 32 + 16 * h : ((u >> 1) * ap->nb + b) * 32 + 16 * h + 8 * (u & 1);
}
AI const int8_t *uq(const nb_actpack *ap, int64_t u, int64_t b, const int Z) {
    return Z ? ap->q + (u * ap->nb + b) * 512 : ap->q + ((u >> 1) * ap->nb + b) * 512 + 32 * (u & 1);
}
/* the 8-token unit of q0_pairs */
static inline int64_t lane0(const nb_actpack *ap, int64_t u, int64_t b) { return ulane(ap, u, b, 0); }
static inline const int8_t *unit_q(const nb_actpack *ap, int64_t u, int64_t b) { return uq(ap, u, b, 0); }

/* Unit u's live tokens of rows r .. r+RR-1 (f[i][j], column j) into y[t*ldy + r + i].
 * Four rows: transposed in registers (4 x 4 per 128-bit lane), one 16-byte
 * store per token; fewer: one scalar store per (row, token). */
AI void store_tile(float *y, int64_t ldy, int64_t r, int64_t u, int64_t n, __m512 f[4][2], const int j, const int RR,
                   const int Z) {
    const int64_t un = Z ? 16 : 8, t0 = u * un, nt = n - t0 < un ? n - t0 : un;
    if (RR == 4) {
        __m512 a = _mm512_unpacklo_ps(f[0][j], f[1][j]), b = _mm512_unpackhi_ps(f[0][j], f[1][j]);
        __m512 c = _mm512_unpacklo_ps(f[2][j], f[3][j]), d = _mm512_unpackhi_ps(f[2][j], f[3][j]);
        __m512 v[4];
        v[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(c))); /* token 4l */
        v[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(c))); /* 4l + 1 */
        v[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b), _mm512_castps_pd(d))); /* 4l + 2 */
        v[3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b), _mm512_castps_pd(d))); /* 4l + 3 */
        float *yt = y + t0 * ldy + r;
        if (nt == un) {
#define ST4(l)                                                                                               \
    _mm_storeu_ps(yt + (4 * l + 0) * ldy, _mm512_extractf32x4_ps(v[0], l));                                  \
    _mm_storeu_ps(yt + (4 * l + 1) * ldy, _mm512_extractf32x4_ps(v[1], l));                                  \
    _mm_storeu_ps(yt + (4 * l + 2) * ldy, _mm512_extractf32x4_ps(v[2], l));                                  \
    _mm_storeu_ps(yt + (4 * l + 3) * ldy, _mm512_extractf32x4_ps(v[3], l));
            ST4(0)
            ST4(1)
            if (Z) {
                ST4(2)
                ST4(3)
            }
#undef ST4
        } else {
            _Alignas(64) float t[4][16];
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) _mm512_store_ps(t[m], v[m]);
            for (int64_t i = 0; i < nt; i++) _mm_storeu_ps(yt + i * ldy, _mm_load_ps(&t[i & 3][4 * (i >> 2)]));
        }
        return;
    }
#pragma GCC unroll 4
    for (int i = 0; i < RR; i++) {
        _Alignas(64) float t[16];
        _mm512_store_ps(t, f[i][j]);
        for (int64_t m = 0; m < nt; m++) y[(t0 + m) * ldy + r + i] = t[m];
    }
}

/* acc[i][j] = INI[j] + the integer sums of words kk = K0 .. K0+NK-1 of rows
 * i < RR (weight word at WPTR, an expression of i and kk) with units j < UU
 * (activations at a[j] + kk*64). vpdpbusd's latency is several cycles, so
 * one chain per (row, unit) would leave the units idle: the words go to NP
 * independent partial sums (16 chains or fewer), added at the end - integer
 * sums, exact in any order, so the result is the 16-token GEMM's. */
#ifndef SB_NP8
#define SB_NP8 2 /* partial sums per (row, unit) in tiles of 8 (row, unit) pairs */
#endif
/* Q4_0R / Q8_0R: the offset starts the first partial sum in the 512-bit
 * tiles; the 256-bit tiles add it after the sums, as before (with the
 * offset first the 8- and 16-token batches ran about 10% slower, CPU time,
 * interleaved with the previous kernels; docs/speed.md). */
#ifndef SB_NEGINIT
#define SB_NEGINIT(Z) (Z)
#endif
#define DOT_KK(WPTR, K0, NK, INI)                                                                            \
    {                                                                                                        \
        const int NP = RR * UU >= 8 ? SB_NP8 : 4;                                                            \
        __m512i part[4][4][2];                                                                               \
        _Pragma("GCC unroll 4") for (int p = 0; p < NP; p++)                                                 \
            _Pragma("GCC unroll 4") for (int i = 0; i < RR; i++)                                             \
                _Pragma("GCC unroll 2") for (int j = 0; j < UU; j++) part[p][i][j] = p ? vzero() : (INI)[j]; \
        _Pragma("GCC unroll 8") for (int kk = (K0); kk < (K0) + (NK); kk++) {                                \
            __m512i av[2];                                                                                   \
            _Pragma("GCC unroll 2") for (int j = 0; j < UU; j++) av[j] = vload(a[j] + kk * 64, Z);           \
            _Pragma("GCC unroll 4") for (int i = 0; i < RR; i++) {                                           \
                __m512i wv = vbcast4(WPTR, Z);                                                               \
                _Pragma("GCC unroll 2") for (int j = 0; j < UU; j++) part[kk % NP][i][j] =                   \
                    vdp(part[kk % NP][i][j], wv, av[j], Z);                                                  \
            }                                                                                                \
        }                                                                                                    \
        _Pragma("GCC unroll 4") for (int i = 0; i < RR; i++) _Pragma("GCC unroll 2") for (int j = 0; j < UU; j++) { \
            __m512i t = part[0][i][j];                                                                       \
            _Pragma("GCC unroll 4") for (int p = 1; p < NP; p++) t = vadd(t, part[p][i][j], Z);              \
            acc[i][j] = t;                                                                                   \
        }                                                                                                    \
    }

/* ---- Q4_0R / Q8_0R ------------------------------------------------------ */

/* RR rows from r, UU units from u0 (width Z). `four`: Q4_0R (else Q8_0R). */
AI void q0_tile(const uint8_t *w, uint64_t row_bytes, int64_t r, const nb_actpack *ap, int64_t u0, float *y,
                int64_t ldy, const int four, const int RR, const int UU, const int Z) {
    const int64_t nb = ap->nb, nb4 = four ? nb / 4 * 4 : 0;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m128i m4x = _mm_set1_epi8(15);
    _Alignas(64) uint8_t buf[4][128];
    const uint16_t *dw[4];
    const uint8_t *q[4];
    __m512 f[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < RR; i++) {
        dw[i] = (const uint16_t *)(w + (uint64_t)(r + i) * row_bytes);
        q[i] = (const uint8_t *)dw[i] + nb * 2;
        f[i][0] = f[i][1] = vzerof();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb[4];
#pragma GCC unroll 4
        for (int i = 0; i < RR; i++) {
            if (four) {
                if (b < nb4) { /* block b%4: low nibbles of bytes 0-31 / 32-63, then the high ones */
                    if ((b & 3) == 0) {
                        const uint8_t *s = q[i] + (b / 4) * 64;
                        _mm_prefetch((const char *)s + SB_PF, _MM_HINT_T0);
                        __m512i v = _mm512_loadu_si512((const void *)s);
                        _mm512_store_si512((void *)buf[i], _mm512_and_si512(v, m4));
                        _mm512_store_si512((void *)(buf[i] + 64), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                    }
                    wb[i] = buf[i] + 32 * (b & 3);
                } else { /* tail block in Q4_0 order: word kk < 4 low nibbles, kk >= 4 high */
                    __m128i v = _mm_loadu_si128((const __m128i *)(q[i] + b * 16));
                    _mm_store_si128((__m128i *)buf[i], _mm_and_si128(v, m4x));
                    _mm_store_si128((__m128i *)(buf[i] + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4x));
                    wb[i] = buf[i];
                }
            } else {
                wb[i] = q[i] + b * 32;
                if ((b & 1) == 0) _mm_prefetch((const char *)wb[i] + SB_PF, _MM_HINT_T0);
            }
        }
        const int8_t *a[2];
        __m512i acc[4][2], no[2];
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) {
            a[j] = uq(ap, u0 + j, b, Z);
            no[j] = SB_NEGINIT(Z) ? vnegshl(vload(ap->sum + ulane(ap, u0 + j, b, Z), Z), four ? 3 : 7, Z) : vzero();
        }
        DOT_KK(wb[i] + 4 * kk, 0, 8, no)
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) {
            __m512 da = vloadf(ap->d + ulane(ap, u0 + j, b, Z), Z);
            if (!SB_NEGINIT(Z)) {
                __m512i o = vnegshl(vload(ap->sum + ulane(ap, u0 + j, b, Z), Z), four ? 3 : 7, Z);
#pragma GCC unroll 4
                for (int i = 0; i < RR; i++) acc[i][j] = vadd(acc[i][j], o, Z);
            }
#pragma GCC unroll 4
            for (int i = 0; i < RR; i++)
                f[i][j] = vfmadd(vcvt(acc[i][j], Z), vmul(da, vset1(_cvtsh_ss(dw[i][b]), Z), Z), f[i][j], Z);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < UU; j++) store_tile(y, ldy, r, u0 + j, ap->n, f, j, RR, Z);
}

/* One unit (batches of up to 8 tokens), RP pairs of rows in 512-bit
 * registers: lane 2m is row 2p's product with token m, lane 2m+1 row
 * 2p+1's. The pair's weight words are interleaved once per block (pb: word
 * kk of both rows at 8*kk), so one 64-bit broadcast load feeds both rows,
 * and each token's activation word is duplicated into two lanes once per
 * word for all the pairs: half the vpdpbusd and broadcasts of the 256-bit
 * tile. Per lane the operations are still those of the 16-token GEMM. */
static inline __attribute__((always_inline)) __m256i q0_words(const uint8_t *q, int64_t nb4, int64_t b, const int four) {
    const __m256i m4 = _mm256_set1_epi8(15);
    if (!four) return _mm256_loadu_si256((const __m256i *)(q + b * 32));
    if (b < nb4) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(q + (b / 4) * 64 + 32 * (b & 1)));
        return (b & 2) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
    }
    __m128i v = _mm_loadu_si128((const __m128i *)(q + b * 16));
    const __m128i m4x = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4x), _mm_and_si128(v, m4x));
}

static inline __attribute__((always_inline)) void q0_pairs(const uint8_t *w, uint64_t row_bytes, int64_t r,
                                                           const nb_actpack *ap, int64_t u0, float *y, int64_t ldy,
                                                           const int four, const int RP) {
    const int64_t nb = ap->nb, nb4 = four ? nb / 4 * 4 : 0;
    const int NP = RP >= 3 ? 4 : RP == 2 ? 4 : 8;
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    _Alignas(64) uint8_t pb[4][64];
    const uint16_t *dw[8];
    const uint8_t *q[8];
    __m512 f[4];
#pragma GCC unroll 8
    for (int i = 0; i < 2 * RP; i++) {
        dw[i] = (const uint16_t *)(w + (uint64_t)(r + i) * row_bytes);
        q[i] = (const uint8_t *)dw[i] + nb * 2;
    }
#pragma GCC unroll 4
    for (int p = 0; p < RP; p++) f[p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int p = 0; p < RP; p++) {
            if ((b & (four ? 3 : 1)) == 0) {
                _mm_prefetch((const char *)q[2 * p] + b * (four ? 16 : 32) + SB_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)q[2 * p + 1] + b * (four ? 16 : 32) + SB_PF, _MM_HINT_T0);
            }
            __m256i A = q0_words(q[2 * p], nb4, b, four), B = q0_words(q[2 * p + 1], nb4, b, four);
            __m256i X = _mm256_unpacklo_epi32(A, B), Y = _mm256_unpackhi_epi32(A, B);
            _mm256_store_si256((__m256i *)pb[p], _mm256_permute2x128_si256(X, Y, 0x20));
            _mm256_store_si256((__m256i *)(pb[p] + 32), _mm256_permute2x128_si256(X, Y, 0x31));
        }
        const int8_t *a = unit_q(ap, u0, b);
        __m512i part[8][4];
#pragma GCC unroll 8
        for (int k = 0; k < NP; k++)
#pragma GCC unroll 4
            for (int p = 0; p < RP; p++) part[k][p] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            __m512i av = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(a + kk * 64))));
#pragma GCC unroll 4
            for (int p = 0; p < RP; p++) {
                uint64_t wq;
                memcpy(&wq, pb[p] + 8 * kk, 8);
                part[kk % NP][p] = _mm512_dpbusd_epi32(part[kk % NP][p], _mm512_set1_epi64((long long)wq), av);
            }
        }
        int64_t l = lane0(ap, u0, b);
        __m512i o = _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm256_slli_epi32(
                                                      _mm256_load_si256((const __m256i *)(ap->sum + l)), four ? 3 : 7)));
        __m512 da = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_load_ps(ap->d + l)));
#pragma GCC unroll 4
        for (int p = 0; p < RP; p++) {
            __m512i acc = part[0][p];
#pragma GCC unroll 8
            for (int k = 1; k < NP; k++) acc = _mm512_add_epi32(acc, part[k][p]);
            __m512 s = _mm512_mask_blend_ps((__mmask16)0xAAAA, _mm512_set1_ps(_cvtsh_ss(dw[2 * p][b])),
                                            _mm512_set1_ps(_cvtsh_ss(dw[2 * p + 1][b])));
            f[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, o)), _mm512_mul_ps(da, s), f[p]);
        }
    }
    const int64_t t0 = u0 * NB_SBATCH_UNIT, nt = ap->n - t0 < NB_SBATCH_UNIT ? ap->n - t0 : NB_SBATCH_UNIT;
#pragma GCC unroll 4
    for (int p = 0; p < RP; p++) {
        float t[16];
        _mm512_storeu_ps(t, f[p]);
        for (int64_t m = 0; m < nt; m++) {
            y[(t0 + m) * ldy + r + 2 * p] = t[2 * m];
            y[(t0 + m) * ldy + r + 2 * p + 1] = t[2 * m + 1];
        }
    }
}

/* ---- Q4_KR / Q6_KR ------------------------------------------------------ */

/* Super-block -> 256 weights in lane order (Q4_KR: 0..15, Q6_KR: 0..63) and
 * its scales as floats (Q4_KR: d*sc[0..7], dmin*m[0..7]; Q6_KR: d*sc[0..15]),
 * as repack_k_avx512.c computes them. */
static inline void unpack_k(const uint8_t *blk, uint8_t *u, float *sc, const int six) {
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i q0, q1, q2, q3;
    if (six) {
        const nb_block_q6_kr *b = (const nb_block_q6_kr *)blk;
        const __m512i m30 = _mm512_set1_epi8(0x30);
        __m512i a = _mm512_loadu_si512((const void *)b->ql), c = _mm512_loadu_si512((const void *)(b->ql + 64));
        __m512i h = _mm512_loadu_si512((const void *)b->qh);
        q0 = _mm512_or_si512(_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
        q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
        q2 = _mm512_or_si512(_mm512_and_si512(c, m4), _mm512_and_si512(h, m30));
        q3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 4), m4), _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
        __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
        _mm512_storeu_ps(sc, _mm512_mul_ps(v, _mm512_set1_ps(_cvtsh_ss(b->d))));
    } else {
        const nb_block_q4_kr *b = (const nb_block_q4_kr *)blk;
        __m512i v0 = _mm512_loadu_si512((const void *)b->qs), v1 = _mm512_loadu_si512((const void *)(b->qs + 64));
        q0 = _mm512_and_si512(v0, m4);
        q1 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
        q2 = _mm512_and_si512(v1, m4);
        q3 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
        __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
        __m512 dm = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(b->d)), _mm256_set1_ps(_cvtsh_ss(b->dmin)), 1);
        _mm512_storeu_ps(sc, _mm512_mul_ps(v, dm));
    }
    _mm512_store_si512((void *)u, q0);
    _mm512_store_si512((void *)(u + 64), q1);
    _mm512_store_si512((void *)(u + 128), q2);
    _mm512_store_si512((void *)(u + 192), q3);
}

AI void k_tile(const uint8_t *w, uint64_t row_bytes, int64_t r, const nb_actpack *ap, int64_t u0, float *y,
               int64_t ldy, const int six, const int RR, const int UU, const int Z) {
    const int64_t nsb = ap->K / 256;
    const uint64_t bs = six ? sizeof(nb_block_q6_kr) : sizeof(nb_block_q4_kr);
    _Alignas(64) uint8_t u[4][256];
    float sc[4][16];
    __m512 F[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < RR; i++) F[i][0] = F[i][1] = vzerof();
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 4
        for (int i = 0; i < RR; i++) {
            const uint8_t *blk = w + (uint64_t)(r + i) * row_bytes + (uint64_t)s * bs;
            for (uint64_t l = 0; l < bs; l += 64) _mm_prefetch((const char *)blk + SB_PF + l, _MM_HINT_T0);
            unpack_k(blk, u[i], sc[i], six);
        }
        __m512 f[4][2];
#pragma GCC unroll 4
        for (int i = 0; i < RR; i++) f[i][0] = f[i][1] = vzerof();
        for (int jb = 0; jb < 8; jb++) {
            const int64_t b = s * 8 + jb;
            const int8_t *a[2];
#pragma GCC unroll 2
            for (int j = 0; j < UU; j++) a[j] = uq(ap, u0 + j, b, Z);
            for (int half = 0; half < 2; half++) {
                if (!six && half) break;
                const int k0 = six ? 4 * half : 0, nk = six ? 4 : 8;
                __m512i acc[4][2];
                const __m512i ini[2] = {vzero(), vzero()};
                DOT_KK(u[i] + 64 * (kk & 3) + 8 * jb + 4 * (kk >> 2), k0, nk, ini)
#pragma GCC unroll 2
                for (int j = 0; j < UU; j++) {
                    if (six) { /* q - 32 through the tokens' sums of these 16 activations */
                        __m512i o = vnegshl(vload(ap->sum16 + ulane16(ap, u0 + j, b, half, Z), Z), 5, Z);
#pragma GCC unroll 4
                        for (int i = 0; i < RR; i++) acc[i][j] = vadd(acc[i][j], o, Z);
#pragma GCC unroll 4
                        for (int i = 0; i < RR; i++)
                            f[i][j] = vfmadd(vcvt(acc[i][j], Z), vset1(sc[i][2 * jb + half], Z), f[i][j], Z);
                    } else { /* d*sc*q - dmin*m, the min through the tokens' sums */
                        __m512 fs = vloadf(ap->fsum + ulane(ap, u0 + j, b, Z), Z);
#pragma GCC unroll 4
                        for (int i = 0; i < RR; i++)
                            f[i][j] = vfnmadd(fs, vset1(sc[i][8 + jb], Z),
                                              vfmadd(vcvt(acc[i][j], Z), vset1(sc[i][jb], Z), f[i][j], Z), Z);
                    }
                }
            }
        }
#pragma GCC unroll 2
        for (int j = 0; j < UU; j++) {
            __m512 d = vloadf(ap->d + ulane(ap, u0 + j, s * 8, Z), Z);
#pragma GCC unroll 4
            for (int i = 0; i < RR; i++) F[i][j] = vfmadd(f[i][j], d, F[i][j], Z);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < UU; j++) store_tile(y, ldy, r, u0 + j, ap->n, F, j, RR, Z);
}

/* ---- drivers: tiles of 4 rows x 2 units, the rest as smaller tiles ------ */

/* Up to U x 8 tokens: 8-token units (Z = 0, 256-bit); more: 16-token
 * groups (Z = 1, 512-bit). U = 2 where a 512-bit op costs two 256-bit ones
 * (AMD Zen 4), else 1 (the _wide entry points below). */
#define TILES(TILE, FLAG, U)                                                                                 \
    if (ap->n > (U) * NB_SBATCH_UNIT) {                                                                      \
        TILES_ON(TILE, FLAG, ap->ng, 1)                                                                      \
    } else {                                                                                                 \
        TILES_ON(TILE, FLAG, (ap->n + NB_SBATCH_UNIT - 1) / NB_SBATCH_UNIT, 0)                               \
    }

#define TILES_ON(TILE, FLAG, NU, Z)                                                                          \
    const int64_t nu = (NU);                                                                                 \
    for (int64_t r = 0; r < nr; r += 4) {                                                                    \
        const int64_t rr = nr - r < 4 ? nr - r : 4;                                                          \
        for (int64_t u = 0; u < nu; u += 2) {                                                                \
            const int two = u + 1 < nu;                                                                      \
            switch (rr * 2 + two) {                                                                          \
            case 9: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 4, 2, Z); break;                              \
            case 8: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 4, 1, Z); break;                              \
            case 7: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 3, 2, Z); break;                              \
            case 6: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 3, 1, Z); break;                              \
            case 5: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 2, 2, Z); break;                              \
            case 4: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 2, 1, Z); break;                              \
            case 3: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 1, 2, Z); break;                              \
            default: TILE(w, row_bytes, r, ap, u, y, ldy, FLAG, 1, 1, Z); break;                             \
            }                                                                                                \
        }                                                                                                    \
    }

/* Up to 8 tokens (one unit): rows in pairs, 8 rows at a time (q0_pairs), a
 * last odd row through the 256-bit tile. Used for Q8_0R only (see
 * nb_q4_0r_sgemm_avx512); q0_pairs' Q4_0R form is what was measured. */
#define PAIRS(FLAG)                                                                                          \
    if (ap->n <= NB_SBATCH_UNIT) {                                                                           \
        int64_t r = 0;                                                                                       \
        for (; r + 8 <= nr; r += 8) q0_pairs(w, row_bytes, r, ap, 0, y, ldy, FLAG, 4);                        \
        switch ((nr - r) / 2) {                                                                              \
        case 3: q0_pairs(w, row_bytes, r, ap, 0, y, ldy, FLAG, 3); break;                                     \
        case 2: q0_pairs(w, row_bytes, r, ap, 0, y, ldy, FLAG, 2); break;                                     \
        case 1: q0_pairs(w, row_bytes, r, ap, 0, y, ldy, FLAG, 1); break;                                     \
        default: break;                                                                                      \
        }                                                                                                    \
        if ((nr - r) & 1) q0_tile(w, row_bytes, nr - 1, ap, 0, y, ldy, FLAG, 1, 1, 0);                        \
        return;                                                                                              \
    }

/* Q4_0R takes the tiles, not the row pairs, up to 8 tokens too: the pairs'
 * per-row unpack and interleave cost more than they save (8 tokens, one
 * thread, CPU time: 7.4 vs 6.6 ms per 5632x2048x8 rows; Q8_0R 6.7 vs 8.3,
 * docs/speed.md).
 *
 * Each type twice: the plain entry point takes 512-bit tiles from 17
 * tokens, for CPUs whose 512-bit ops cost two 256-bit ones (AMD Zen 4);
 * _wide from 9 tokens, for those that run them at full width (Zen 5,
 * Intel): a 9-16-token batch is one 16-token group, and its 512-bit tile
 * issues half the vpdpbusd of two 8-token units. Zen 5, one thread, Q8_0R
 * and Q4_0R 9-16 tokens: 1.3-2x (docs/speed.md, session 51). Q8_0R's
 * batches of up to 8 take the row pairs either way. Both are bit-identical
 * to the 16-token GEMM (the same lane operations). */
#define SGEMM512(name, TILE, FLAG, FIRST)                                                                    \
    void nb_##name##_sgemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap,   \
                                  float *y, int64_t ldy) {                                                   \
        FIRST TILES(TILE, FLAG, 2)                                                                           \
    }                                                                                                        \
    void nb_##name##_sgemm_avx512_wide(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, \
                                       float *y, int64_t ldy) {                                              \
        FIRST TILES(TILE, FLAG, 1)                                                                           \
    }
SGEMM512(q4_0r, q0_tile, 1, )
SGEMM512(q8_0r, q0_tile, 0, PAIRS(0))
SGEMM512(q4_kr, k_tile, 0, )
SGEMM512(q6_kr, k_tile, 1, )
