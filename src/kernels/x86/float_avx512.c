/* AVX-512F float kernels (16 lanes, 4 accumulators). */
#include <immintrin.h>

#include "base/half.h"
#include "kernels/kernels.h"

static inline __m512 load_bf16(const uint16_t *p) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define DOT_BODY(LOAD, SCALAR)                                                                   \
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                   \
    int64_t i = 0;                                                                                \
    for (; i + 64 <= n; i += 64) {                                                                \
        a0 = _mm512_fmadd_ps(LOAD(a + i), _mm512_loadu_ps(x + i), a0);                            \
        a1 = _mm512_fmadd_ps(LOAD(a + i + 16), _mm512_loadu_ps(x + i + 16), a1);                  \
        a2 = _mm512_fmadd_ps(LOAD(a + i + 32), _mm512_loadu_ps(x + i + 32), a2);                  \
        a3 = _mm512_fmadd_ps(LOAD(a + i + 48), _mm512_loadu_ps(x + i + 48), a3);                  \
    }                                                                                             \
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(LOAD(a + i), _mm512_loadu_ps(x + i), a0);   \
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));  \
    for (; i < n; i++) s += SCALAR(a[i]) * x[i];                                                  \
    return s;

#define LOAD_F32(p) _mm512_loadu_ps(p)
#define LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define ID(v) (v)

static float dot_f32(int64_t n, const void *w, const float *x) {
    const float *a = w;
    DOT_BODY(LOAD_F32, ID)
}

static float dot_f16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    DOT_BODY(LOAD_F16, nb_fp16_to_fp32)
}

static float dot_bf16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    DOT_BODY(load_bf16, nb_bf16_to_fp32)
}

static void f16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, LOAD_F16(a + i));
    for (; i < n; i++) dst[i] = nb_fp16_to_fp32(a[i]);
}

static void bf16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_bf16(a + i));
    for (; i < n; i++) dst[i] = nb_bf16_to_fp32(a[i]);
}

/* 12 rows x 32 tokens per call: 24 zmm accumulators acc[r][half]; per k
 * two token vectors are loaded and each of the 12 weights is broadcast from
 * its row into two FMAs. */
#define KR 12

static void panel_12x32(int64_t K, const float *w, int64_t nr, const float *xt, int64_t ldx, int64_t nt, float *y,
                        int64_t ldy) {
    __m512 acc[KR][2];
    const float *wr[KR];
#pragma GCC unroll 12
    for (int r = 0; r < KR; r++) {
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        wr[r] = w + (r < nr ? r : 0) * K; /* rows past nr repeat row 0; never stored */
    }
    for (int64_t k = 0; k < K; k++) {
        __m512 x0 = _mm512_loadu_ps(xt + k * ldx), x1 = _mm512_loadu_ps(xt + k * ldx + 16);
#pragma GCC unroll 12
        for (int r = 0; r < KR; r++) {
            __m512 wv = _mm512_set1_ps(wr[r][k]);
            acc[r][0] = _mm512_fmadd_ps(wv, x0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(wv, x1, acc[r][1]);
        }
    }
    /* acc[r][h] holds tokens 16h..16h+15 of row r: scatter into y[t*ldy + r] */
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int)ldy));
    __mmask16 m0 = nt >= 16 ? 0xffff : (__mmask16)((1u << nt) - 1);
    __mmask16 m1 = nt >= 32 ? 0xffff : nt > 16 ? (__mmask16)((1u << (nt - 16)) - 1) : 0;
    for (int r = 0; r < nr; r++) {
        _mm512_mask_i32scatter_ps(y + r, m0, idx, acc[r][0], 4);
        if (m1) _mm512_mask_i32scatter_ps(y + 16 * ldy + r, m1, idx, acc[r][1], 4);
    }
}

static void gemm_f32(int64_t K, const float *w, int64_t nr, const float *xt, int64_t ldx, int64_t nt, float *y,
                     int64_t ldy) {
    for (int64_t t = 0; t < nt; t += 32)
        for (int64_t r = 0; r < nr; r += KR)
            panel_12x32(K, w + r * K, NB_MIN(KR, nr - r), xt + t, ldx, NB_MIN(32, nt - t), y + t * ldy + r, ldy);
}

static const nb_float_kernels k = {"avx512", dot_f32, dot_f16, dot_bf16, f16_to_f32, bf16_to_f32, gemm_f32};

const nb_float_kernels *nb_float_kernels_avx512(void) { return &k; }
