/* AVX-512 VNNI decode kernels over planar rows (layouts in kernels/repack.h).
 * Per pair of blocks: one 32-byte load of weights, one 64-byte load of
 * activations, two vpdpbusd (the products, and the offset term 8*sum(a) or
 * 128*sum(a) that turns the unsigned weights back into signed ones), and the
 * two blocks' scales taken from the planar f32 arrays with one permute -
 * about a third of the instructions of the per-block GGUF layout. Integer
 * sums are exact; only the float summation order differs from the reference.
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

#include "kernels/repack.h"

static float tail_scale(const uint8_t *wd, const uint8_t *ad, int64_t i) {
    uint16_t h;
    float b;
    memcpy(&h, wd + i * 2, 2);
    memcpy(&b, ad + i * 4, 4);
    return _cvtsh_ss(h) * b;
}

/* Software prefetch distance in bytes: decode streams each weight once and
 * the loop is too short per byte for the hardware prefetcher to stay ahead
 * (measured: docs/performance.md). Past the row's end it runs into the next
 * row, which is what this thread reads next. */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* lanes 0-7 <- wd[0]*ad[0], lanes 8-15 <- wd[1]*ad[1] (wd: 2 fp16, ad: 2 f32) */
static inline __m512 pair_scales(const uint16_t *wd, const float *ad) {
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    uint32_t h2;
    memcpy(&h2, wd, 4);
    __m128 w = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h2));
    __m128 a = _mm_castpd_ps(_mm_load_sd((const double *)ad));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_mul_ps(w, a)));
}

/* Two blocks of Q4_0R weights as 64 unsigned bytes in activation order:
 * [w0 lo, w0 hi, w1 lo, w1 hi] from the 32 nibble bytes of the pair. */
static inline __m512i pair_q4(const uint8_t *q) {
    __m256i r = _mm256_loadu_si256((const __m256i *)q);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(r), _mm256_srli_epi16(r, 4), 1);
    z = _mm512_and_si512(z, _mm512_set1_epi8(15));           /* [w0 lo, w1 lo, w0 hi, w1 hi] */
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)); /* [w0 lo, w0 hi, w1 lo, w1 hi] */
}

static inline __m512i pair_q8(const uint8_t *q) { return _mm512_loadu_si512((const void *)q); }

/* Scalar (unsigned weight - offset) * activation sum of block i, for the tails. */
static inline int tail_q4(const uint8_t *q, const int8_t *x, int64_t i) {
    int s = 0;
    for (int j = 0; j < 16; j++)
        s += ((q[i * 16 + j] & 15) - 8) * x[i * 32 + j] + ((q[i * 16 + j] >> 4) - 8) * x[i * 32 + j + 16];
    return s;
}

static inline int tail_q8(const uint8_t *q, const int8_t *x, int64_t i) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += (q[i * 32 + j] - 128) * x[i * 32 + j];
    return s;
}

/* The planar dot product; QS = quant bytes per block, PAIR / TAIL the
 * format's loaders, OFF the unsigned offset (8 or 128). Blocks go two per
 * 512-bit vpdpbusd, four per iteration into two accumulators. */
static inline float planar_dot(int64_t n, const void *w, const void *a, int QS, __m512i (*PAIR)(const uint8_t *),
                               int (*TAIL)(const uint8_t *, const int8_t *, int64_t), int OFF) {
    const int64_t nb = n / 32;
    const uint16_t *wd = w;
    const uint8_t *q = (const uint8_t *)w + nb * 2;
    const int8_t *x = a;
    const float *ad = (const float *)((const uint8_t *)a + nb * 32);
    const __m512i off = _mm512_set1_epi8((char)OFF);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        for (int l = 0; l < 4 * QS; l += 64) _mm_prefetch((const char *)(q + i * QS) + PREFETCH_AHEAD + l, _MM_HINT_T0);
        for (int h = 0; h < 2; h++) {
            int64_t b = i + 2 * h;
            __m512i av = _mm512_loadu_si512((const void *)(x + b * 32));
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), PAIR(q + b * QS), av);
            s = _mm512_sub_epi32(s, _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, av));
            __m512 f = _mm512_cvtepi32_ps(s), sc = pair_scales(wd + b, ad + b);
            if (h == 0) acc0 = _mm512_fmadd_ps(f, sc, acc0);
            else acc1 = _mm512_fmadd_ps(f, sc, acc1);
        }
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < nb; i++) sum += tail_scale(w, (const uint8_t *)a + nb * 32, i) * (float)TAIL(q, x, i);
    return sum;
}

void nb_q4_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out) {
    *out = planar_dot(n, w, a, 16, pair_q4, tail_q4, 8);
}

void nb_q8_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out) {
    *out = planar_dot(n, w, a, 32, pair_q8, tail_q8, 128);
}

/* Dequantization of planar rows for the batched (GEMM) path: one block per
 * iteration, nibbles / bytes widened to 16 floats at a time. */
void nb_q4_0r_to_float_avx512(const void *src, float *dst, int64_t n) {
    const int64_t nb = n / 32;
    const uint16_t *d = src;
    const uint8_t *q = (const uint8_t *)src + nb * 2;
    const __m512 eight = _mm512_set1_ps(8.0f);
    for (int64_t i = 0; i < nb; i++) {
        __m512 s = _mm512_set1_ps(_cvtsh_ss(d[i]));
        __m128i b = _mm_loadu_si128((const __m128i *)(q + i * 16));
        __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(15)));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15)));
        _mm512_storeu_ps(dst + i * 32, _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(lo), eight), s));
        _mm512_storeu_ps(dst + i * 32 + 16, _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(hi), eight), s));
    }
}

void nb_q8_0r_to_float_avx512(const void *src, float *dst, int64_t n) {
    const int64_t nb = n / 32;
    const uint16_t *d = src;
    const uint8_t *q = (const uint8_t *)src + nb * 2;
    const __m512 off = _mm512_set1_ps(128.0f);
    for (int64_t i = 0; i < nb; i++) {
        __m512 s = _mm512_set1_ps(_cvtsh_ss(d[i]));
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + i * 32 + h * 16)));
            _mm512_storeu_ps(dst + i * 32 + h * 16, _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(v), off), s));
        }
    }
}

/* Batched int8 GEMM (see repack.h): per row and group of 16 tokens, per
 * block: 8 x (broadcast 4 weight bytes, vpdpbusd with 16 tokens' 4 bytes),
 * minus the offset times the tokens' sums, then scaled into float. Two rows
 * x two token groups at a time: every activation load and every weight
 * broadcast feeds two vpdpbusd. */
static inline uint32_t w4_q4(const uint8_t *qs, int kk) {
    uint32_t v;
    memcpy(&v, qs + (kk & 3) * 4, 4);
    return kk < 4 ? (v & 0x0f0f0f0fu) : ((v >> 4) & 0x0f0f0f0fu);
}

static inline uint32_t w4_q8(const uint8_t *qs, int kk) {
    uint32_t v;
    memcpy(&v, qs + kk * 4, 4);
    return v;
}

#define GEMM_BODY(QS_BYTES, W4, OFFSET_SHIFT)                                                                  \
    const int64_t nb = ap->nb;                                                                                 \
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), \
                                           _mm512_set1_epi32((int)ldy));                                      \
    for (int64_t r = 0; r < nr; r += 2) {                                                                      \
        const int two = r + 1 < nr;                                                                            \
        const uint8_t *row0 = w + r * row_bytes, *row1 = two ? row0 + row_bytes : row0;                       \
        const uint16_t *d0 = (const uint16_t *)row0, *d1 = (const uint16_t *)row1;                             \
        const uint8_t *q0 = row0 + nb * 2, *q1 = row1 + nb * 2;                                                \
        for (int64_t g = 0; g < ap->ng; g += 2) {                                                              \
            const int64_t h = g + 1 < ap->ng ? g + 1 : g; /* second group (repeats g at the end; not stored) */ \
            __m512 f00 = _mm512_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;                                 \
            for (int64_t b = 0; b < nb; b++) {                                                                 \
                const int8_t *a0 = ap->q + (g * nb + b) * 512, *a1 = ap->q + (h * nb + b) * 512;               \
                __m512i i00 = _mm512_setzero_si512(), i01 = i00, i10 = i00, i11 = i00;                         \
                if (h != g) {                                                                                  \
                    for (int kk = 0; kk < 8; kk++) {                                                           \
                        __m512i av0 = _mm512_load_si512((const void *)(a0 + kk * 64));                         \
                        __m512i av1 = _mm512_load_si512((const void *)(a1 + kk * 64));                         \
                        __m512i w0 = _mm512_set1_epi32((int)W4(q0 + b * QS_BYTES, kk));                        \
                        __m512i w1 = _mm512_set1_epi32((int)W4(q1 + b * QS_BYTES, kk));                        \
                        i00 = _mm512_dpbusd_epi32(i00, w0, av0);                                               \
                        i01 = _mm512_dpbusd_epi32(i01, w0, av1);                                               \
                        i10 = _mm512_dpbusd_epi32(i10, w1, av0);                                               \
                        i11 = _mm512_dpbusd_epi32(i11, w1, av1);                                               \
                    }                                                                                          \
                } else { /* a last, unpaired group: half the work */                                           \
                    for (int kk = 0; kk < 8; kk++) {                                                           \
                        __m512i av0 = _mm512_load_si512((const void *)(a0 + kk * 64));                         \
                        i00 = _mm512_dpbusd_epi32(i00, _mm512_set1_epi32((int)W4(q0 + b * QS_BYTES, kk)), av0); \
                        i10 = _mm512_dpbusd_epi32(i10, _mm512_set1_epi32((int)W4(q1 + b * QS_BYTES, kk)), av0); \
                    }                                                                                          \
                }                                                                                              \
                __m512i o0 = _mm512_slli_epi32(_mm512_load_si512((const void *)(ap->sum + (g * nb + b) * 16)),  \
                                               OFFSET_SHIFT);                                                  \
                __m512i o1 = _mm512_slli_epi32(_mm512_load_si512((const void *)(ap->sum + (h * nb + b) * 16)),  \
                                               OFFSET_SHIFT);                                                  \
                __m512 da0 = _mm512_load_ps(ap->d + (g * nb + b) * 16), da1 = _mm512_load_ps(ap->d + (h * nb + b) * 16); \
                __m512 s0 = _mm512_set1_ps(_cvtsh_ss(d0[b])), s1 = _mm512_set1_ps(_cvtsh_ss(d1[b]));           \
                f00 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(i00, o0)), _mm512_mul_ps(da0, s0), f00); \
                f01 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(i01, o1)), _mm512_mul_ps(da1, s0), f01); \
                f10 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(i10, o0)), _mm512_mul_ps(da0, s1), f10); \
                f11 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(i11, o1)), _mm512_mul_ps(da1, s1), f11); \
            }                                                                                                  \
            for (int gi = 0; gi < (h != g ? 2 : 1); gi++) {                                                    \
                int64_t gg = gi ? h : g, nt = ap->n - gg * 16;                                                 \
                __mmask16 m = nt >= 16 ? 0xffff : (__mmask16)((1u << nt) - 1);                                 \
                _mm512_mask_i32scatter_ps(y + gg * 16 * ldy + r, m, idx, gi ? f01 : f00, 4);                   \
                if (two) _mm512_mask_i32scatter_ps(y + gg * 16 * ldy + r + 1, m, idx, gi ? f11 : f10, 4);     \
            }                                                                                                  \
        }                                                                                                      \
    }

void nb_q4_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy) {
    GEMM_BODY(16, w4_q4, 3)
}

void nb_q8_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy) {
    GEMM_BODY(32, w4_q8, 7)
}
