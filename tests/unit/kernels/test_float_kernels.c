/* Every compiled ISA's float kernels against the scalar reference on random
 * data, odd lengths included: dot products of f32/f16/bf16 rows, the
 * conversions (exact), and the register-blocked GEMM. Bound: float sums in
 * a different order differ by at most a few ulps of sum |w_i x_i|; we allow
 * 1e-5 relative to it (GEMM: against a float64 sum). Also nb_matmul itself (threads, tiles, n = 1 and
 * n > 1 paths) against a float64 computation on the dequantized weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/half.h"
#include "kernels/kernels.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
}

static const nb_float_kernels *isas[3];
static int n_isas;

static int setup(void **state) {
    (void)state;
    isas[n_isas++] = nb_float_kernels_ref();
    if (nb_cpu_isa() >= NB_ISA_AVX2 && nb_float_kernels_avx2()) isas[n_isas++] = nb_float_kernels_avx2();
    if (nb_cpu_isa() >= NB_ISA_AVX512 && nb_float_kernels_avx512()) isas[n_isas++] = nb_float_kernels_avx512();
    fprintf(stderr, "  testing %d ISA(s): scalar%s%s\n", n_isas, n_isas > 1 ? ", avx2" : "", n_isas > 2 ? ", avx512" : "");
    return 0;
}

static void test_dots(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 1000, 4097};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        float *w = malloc((size_t)n * 4), *x = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
        uint16_t *h = malloc((size_t)n * 2), *b = malloc((size_t)n * 2);
        double mag = 0;
        for (int64_t i = 0; i < n; i++) {
            w[i] = frand(); x[i] = frand();
            h[i] = nb_fp32_to_fp16(w[i]); b[i] = nb_fp32_to_bf16(w[i]);
            mag += fabs((double)w[i] * x[i]);
        }
        const nb_float_kernels *r = isas[0];
        float e32 = r->dot_f32(n, w, x), e16 = r->dot_f16(n, h, x), eb = r->dot_bf16(n, b, x);
        for (int k = 1; k < n_isas; k++) {
            assert_true(fabs(isas[k]->dot_f32(n, w, x) - e32) <= 1e-5 * mag + 1e-7);
            assert_true(fabs(isas[k]->dot_f16(n, h, x) - e16) <= 1e-5 * mag + 1e-7);
            assert_true(fabs(isas[k]->dot_bf16(n, b, x) - eb) <= 1e-5 * mag + 1e-7);
            isas[k]->f16_to_f32(n, h, c);
            for (int64_t i = 0; i < n; i++) assert_true(c[i] == nb_fp16_to_fp32(h[i]));
            isas[k]->bf16_to_f32(n, b, c);
            for (int64_t i = 0; i < n; i++) assert_true(c[i] == nb_bf16_to_fp32(b[i]));
        }
        free(w); free(x); free(c); free(h); free(b);
    }
}

static void test_gemm(void **state) {
    (void)state;
    static const int64_t Ks[] = {1, 9, 16, 33, 256, 300};
    static const int64_t nts[] = {1, 5, 16, 17, 32, 45};
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ti++) {
            int64_t K = Ks[ki], nr = 27, nt = nts[ti], ldx = (nt + 31) & ~31, ldy = 29;
            float *w = malloc((size_t)(nr * K) * 4), *xt = calloc((size_t)(K * ldx), 4);
            float *y0 = calloc((size_t)(nt * ldy), 4), *y1 = calloc((size_t)(nt * ldy), 4);
            for (int64_t i = 0; i < nr * K; i++) w[i] = frand();
            for (int64_t k = 0; k < K; k++)
                for (int64_t t = 0; t < nt; t++) xt[k * ldx + t] = frand();
            isas[0]->gemm_f32(K, w, nr, xt, ldx, nt, y0, ldy);
            for (int k = 0; k < n_isas; k++) {
                for (int64_t i = 0; i < nt * ldy; i++) y1[i] = -7.0f; /* canary outside the nr columns */
                isas[k]->gemm_f32(K, w, nr, xt, ldx, nt, y1, ldy);
                for (int64_t t = 0; t < nt; t++)
                    for (int64_t c = 0; c < ldy; c++) {
                        if (c >= nr) { assert_true(y1[t * ldy + c] == -7.0f); continue; }
                        double mag = 0, s = 0;
                        for (int64_t i = 0; i < K; i++) {
                            mag += fabs((double)w[c * K + i] * xt[i * ldx + t]);
                            s += (double)w[c * K + i] * xt[i * ldx + t];
                        }
                        assert_true(fabs(y1[t * ldy + c] - s) <= 1e-5 * mag + 1e-7);
                    }
            }
            free(w); free(xt); free(y0); free(y1);
        }
}

static void test_matmul(void **state) {
    (void)state;
    nb_kctx k;
    assert_int_equal(nb_kctx_init(&k, 2), NB_OK);
    int64_t K = 130, R = 37;
    uint16_t *wh = malloc((size_t)(K * R) * 2);
    float *x = malloc((size_t)(5 * K) * 4), *y = malloc((size_t)(5 * R) * 4);
    for (int64_t i = 0; i < K * R; i++) wh[i] = nb_fp32_to_fp16(frand());
    for (int64_t i = 0; i < 5 * K; i++) x[i] = frand();
    nb_tensor W = {"w", NB_F16, 2, {K, R, 1, 1}, wh, (uint64_t)(K * R * 2)};
    for (int n = 1; n <= 5; n += 4) {
        assert_int_equal(nb_matmul(&k, &W, x, n, y), NB_OK);
        for (int t = 0; t < n; t++)
            for (int64_t r = 0; r < R; r++) {
                double s = 0, mag = 0;
                for (int64_t i = 0; i < K; i++) {
                    s += (double)nb_fp16_to_fp32(wh[r * K + i]) * x[t * K + i];
                    mag += fabs((double)nb_fp16_to_fp32(wh[r * K + i]) * x[t * K + i]);
                }
                assert_true(fabs(y[t * R + r] - s) <= 1e-5 * mag);
            }
    }
    nb_tensor bad = W;
    bad.type = NB_I32;
    assert_int_equal(nb_matmul(&k, &bad, x, 1, y), NB_ERR_UNSUPPORTED);
    nb_kctx_free(&k);
    free(wh); free(x); free(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dots),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_matmul),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
