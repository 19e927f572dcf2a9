/* Scalar reference kernels for float weights: the definitions the SIMD
 * versions are tested against. Accumulation is in float, in index order
 * split over 8 partial sums (so the compiler may vectorise it and the
 * rounding is close to the SIMD versions'). */
#include <math.h>
#include "base/half.h"
#include "kernels/kernels.h"

static float dot1_f32(int64_t n, const void *w, const float *x) {
    const float *a = w;
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * x[i + j];
    float t = 0;
    for (; i < n; i++) t += a[i] * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

static float dot1_f16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += nb_fp16_to_fp32(a[i + j]) * x[i + j];
    float t = 0;
    for (; i < n; i++) t += nb_fp16_to_fp32(a[i]) * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

static float dot1_bf16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += nb_bf16_to_fp32(a[i + j]) * x[i + j];
    float t = 0;
    for (; i < n; i++) t += nb_bf16_to_fp32(a[i]) * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

#define ROWS_OF(NAME, ONE)                                                                                     \
    static void NAME(int64_t n, int64_t rows, const void *w, size_t row_bytes, const float *x, float *y) {     \
        for (int64_t r = 0; r < rows; r++) y[r] = ONE(n, (const uint8_t *)w + (size_t)r * row_bytes, x);      \
    }
ROWS_OF(dot_f32, dot1_f32)
ROWS_OF(dot_f16, dot1_f16)
ROWS_OF(dot_bf16, dot1_bf16)

static void f16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    for (int64_t i = 0; i < n; i++) dst[i] = nb_fp16_to_fp32(a[i]);
}

static void bf16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    for (int64_t i = 0; i < n; i++) dst[i] = nb_bf16_to_fp32(a[i]);
}

/* The micro-kernel contract of kernels.h, one (row, token) sum at a time. */
static void gemm_f32(int64_t kc, const float *wp, const float *xp, int64_t nt, float *c, int64_t ldc, bool add) {
    for (int64_t r = 0; r < NB_GEMM_MR; r++)
        for (int64_t t = 0; t < nt; t++) {
            float s = 0;
            for (int64_t k = 0; k < kc; k++) s += wp[r * NB_GEMM_KC + k] * xp[k * NB_GEMM_NT + t];
            c[r * ldc + t] = add ? c[r * ldc + t] + s : s;
        }
}

static void swiglu(int64_t n, float *g, const float *u) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void rmsnorm(int64_t n, float *out, const float *x, const float *w, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

static void add(int64_t n, float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

static const nb_float_kernels ref = {"scalar", dot_f32, dot_f16, dot_bf16, f16_to_f32, bf16_to_f32, gemm_f32,
                                     swiglu, rmsnorm, add, NULL, NULL, NULL, NULL, NULL, NULL};

const nb_float_kernels *nb_float_kernels_ref(void) { return &ref; }
