/* AVX2/FMA parts of quant/qla.h (compiled with -mavx2 -mfma; called only
 * after nb_cpu_isa() says so). */
#include <immintrin.h>

#include "quant/qla.h"

void nb_qla_kernel_6x16_avx2(int64_t K, const float *const a[6], const float *bp, float *C, int64_t ldc, float alpha,
                             int mi, int nj) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(bp + 16 * k), b1 = _mm256_loadu_ps(bp + 16 * k + 8);
        __m256 x = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a1 + k);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a2 + k);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a3 + k);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a4 + k);
        c40 = _mm256_fmadd_ps(x, b0, c40);
        c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a5 + k);
        c50 = _mm256_fmadd_ps(x, b0, c50);
        c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    const __m256 acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    const __m256 va = _mm256_set1_ps(alpha);
    if (nj == 16) {
        for (int r = 0; r < mi; r++) {
            float *c = C + r * ldc;
            _mm256_storeu_ps(c, _mm256_fmadd_ps(va, acc[2 * r], _mm256_loadu_ps(c)));
            _mm256_storeu_ps(c + 8, _mm256_fmadd_ps(va, acc[2 * r + 1], _mm256_loadu_ps(c + 8)));
        }
        return;
    }
    float out[96];
    for (int i = 0; i < 12; i++) _mm256_storeu_ps(out + 8 * i, acc[i]);
    for (int r = 0; r < mi; r++)
        for (int j = 0; j < nj; j++) C[r * ldc + j] += alpha * out[16 * r + j];
}

void nb_qla_add_f2d_avx2(int64_t n, const float *x, double *y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, _mm256_add_pd(_mm256_loadu_pd(y + i), _mm256_cvtps_pd(_mm_loadu_ps(x + i))));
    for (; i < n; i++) y[i] += x[i];
}

void nb_qla_axpy_sub_avx2(int64_t n, float a, const float *x, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fnmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] -= a * x[i];
}
