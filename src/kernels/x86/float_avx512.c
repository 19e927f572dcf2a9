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

static const nb_float_kernels k = {"avx512", dot_f32, dot_f16, dot_bf16, f16_to_f32, bf16_to_f32};

const nb_float_kernels *nb_float_kernels_avx512(void) { return &k; }
