/* Every compiled ISA's float kernels against the scalar reference or a
 * float64 sum on random data, odd lengths included: dot products of
 * f32/f16/bf16 rows, the conversions (exact), SwiGLU, rmsnorm, add,
 * and the GEMM micro-kernel.
 * Bound: float sums in a different order differ by at most a few ulps of
 * sum |w_i x_i|; we allow 1e-5 relative to it. Also nb_matmul itself (every
 * ISA, 1-3 threads, the n = 1 dot path and the blocked GEMM with partial
 * panels, K steps and token blocks) against a float64 product on the
 * converted weights, and the dequantize + GEMM path of quantized weights
 * against their one-token integer dots. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "quant/qtypes.h"
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

static float dot1(nb_dot_fn f, int64_t n, const void *w, const float *x) {
    float y;
    f(n, 1, w, 0, x, &y);
    return y;
}

/* A run of rows in one call: each row's result is that of a call for the
 * row alone, bit for bit (same operations in the same order), rows a
 * padded stride apart, the row after the run untouched. */
static void test_dot_rows(void **state) {
    (void)state;
    enum { ROWS = 5 };
    static const int64_t lens[] = {1, 17, 64, 65, 2048, 2051};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        size_t stride = (size_t)n * 4 + 36; /* not a multiple of any vector */
        uint8_t *w = malloc(stride * ROWS);
        float *x = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) x[i] = frand();
        for (size_t i = 0; i < stride * ROWS / 2; i++) ((uint16_t *)w)[i] = nb_fp32_to_fp16(frand());
        for (int k = 0; k < n_isas; k++) {
            const nb_dot_fn fs[3] = {isas[k]->dot_f32, isas[k]->dot_f16, isas[k]->dot_bf16};
            for (int f = 0; f < 3; f++) {
                float y[ROWS + 1];
                y[ROWS - 1] = -7.0f;
                fs[f](n, ROWS - 1, w, stride, x, y);
                assert_true(y[ROWS - 1] == -7.0f);
                for (int r = 0; r < ROWS - 1; r++) assert_true(y[r] == dot1(fs[f], n, w + (size_t)r * stride, x));
            }
        }
        free(w);
        free(x);
    }
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
        float e32 = dot1(r->dot_f32, n, w, x), e16 = dot1(r->dot_f16, n, h, x), eb = dot1(r->dot_bf16, n, b, x);
        for (int k = 1; k < n_isas; k++) {
            assert_true(fabs(dot1(isas[k]->dot_f32, n, w, x) - e32) <= 1e-5 * mag + 1e-7);
            assert_true(fabs(dot1(isas[k]->dot_f16, n, h, x) - e16) <= 1e-5 * mag + 1e-7);
            assert_true(fabs(dot1(isas[k]->dot_bf16, n, b, x) - eb) <= 1e-5 * mag + 1e-7);
            /* every prefetch distance (L1, and L2 beside it) computes the same
             * sums in the same order */
            static const int pfs[] = {0, 64, 1024, 8192, NB_PREFETCH_MAX};
            const float e32k = dot1(isas[k]->dot_f32, n, w, x), e16k = dot1(isas[k]->dot_f16, n, h, x),
                        ebk = dot1(isas[k]->dot_bf16, n, b, x);
            for (size_t v = 0; v < sizeof pfs / sizeof *pfs; v++)
                for (size_t v2 = 0; v2 < sizeof pfs / sizeof *pfs; v2++) {
                    nb_prefetch_bytes = pfs[v];
                    nb_prefetch_l2_bytes = pfs[v2];
                    assert_true(dot1(isas[k]->dot_f32, n, w, x) == e32k);
                    assert_true(dot1(isas[k]->dot_f16, n, h, x) == e16k);
                    assert_true(dot1(isas[k]->dot_bf16, n, b, x) == ebk);
                }
            nb_prefetch_bytes = NB_PREFETCH_DEFAULT;
            nb_prefetch_l2_bytes = NB_PREFETCH_L2_DEFAULT;
            isas[k]->f16_to_f32(n, h, c);
            for (int64_t i = 0; i < n; i++) assert_true(c[i] == nb_fp16_to_fp32(h[i]));
            isas[k]->bf16_to_f32(n, b, c);
            for (int64_t i = 0; i < n; i++) assert_true(c[i] == nb_bf16_to_fp32(b[i]));
        }
        free(w); free(x); free(c); free(h); free(b);
    }
}

/* SwiGLU for every ISA against float64 silu(g) * u: odd lengths (the
 * scalar tails), gates from -120 to 120 (e^-g past float's range on both
 * sides), zeros; within 4e-7 of |silu(g) * u| (a few ulps: the vector e^x
 * is about 2 ulp from libm's) plus 1e-30 (below -88 its e^-g stops at e^88, so
 * silu(-120) is 7e-37, not 1e-50). Only g[0..n) is written. */
static void test_swiglu(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 7, 8, 9, 15, 16, 17, 33, 100, 5632};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        float *g0 = malloc((size_t)(n + 1) * 4), *g = malloc((size_t)(n + 1) * 4), *u = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            g0[i] = i % 11 == 0 ? (float)(i % 241) - 120.0f : i % 13 == 0 ? 0.0f : frand() * 12;
            u[i] = frand() * 3;
        }
        for (int k = 0; k < n_isas; k++) {
            memcpy(g, g0, (size_t)n * 4);
            g[n] = 12345.0f;
            isas[k]->swiglu(n, g, u);
            assert_true(g[n] == 12345.0f);
            for (int64_t i = 0; i < n; i++) {
                const double x = g0[i], want = x / (1.0 + exp(-x)) * u[i];
                if (!(fabs(g[i] - want) <= 4e-7 * fabs(want) + 1e-30))
                    fprintf(stderr, "%s n=%lld i=%lld g=%g: %.9g want %.9g\n", isas[k]->isa, (long long)n, (long long)i,
                            x, g[i], want);
                assert_true(fabs(g[i] - want) <= 4e-7 * fabs(want) + 1e-30);
            }
        }
        free(g0); free(g); free(u);
    }
}

/* rmsnorm and add for every ISA against the scalar reference: add exactly;
 * rmsnorm within 2e-7 relative (the double sum of squares in another order
 * may, rarely, round r differently), odd lengths, an all-zero row (eps
 * only), nothing written past n. */
static void test_rmsnorm_add(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 7, 15, 16, 17, 33, 64, 100, 2048, 5633};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        float *x = malloc((size_t)n * 4), *w = malloc((size_t)n * 4), *want = malloc((size_t)(n + 1) * 4),
              *got = malloc((size_t)(n + 1) * 4);
        for (int z = 0; z < 2; z++) {
            for (int64_t i = 0; i < n; i++) {
                x[i] = z ? 0.0f : frand() * 40;
                w[i] = frand() * 2;
            }
            isas[0]->rmsnorm(n, want, x, w, 1e-5f);
            for (int k = 1; k < n_isas; k++) {
                got[n] = 777.0f;
                isas[k]->rmsnorm(n, got, x, w, 1e-5f);
                assert_true(got[n] == 777.0f);
                for (int64_t i = 0; i < n; i++) assert_true(fabs(got[i] - want[i]) <= 2e-7 * fabs(want[i]));
                memcpy(got, x, (size_t)n * 4);
                memcpy(want, x, (size_t)n * 4);
                got[n] = want[n] = 777.0f;
                isas[0]->add(n, want, w);
                isas[k]->add(n, got, w);
                assert_memory_equal(got, want, (size_t)(n + 1) * 4);
                isas[0]->rmsnorm(n, want, x, w, 1e-5f);
            }
        }
        free(x); free(w); free(want); free(got);
    }
}

/* The micro-kernel contract of kernels.h for every ISA against a float64
 * sum: odd kc (1 .. NB_GEMM_KC), every kind of token count (1, < 16, 16,
 * 17 .. 31, 32), overwrite and accumulate. Panel elements past kc and token
 * columns past nt are NaN, so reading the former or storing the latter
 * shows; c has an odd stride and canaries in the columns past nt and in
 * the row after the panel. */
static void test_gemm_kernel(void **state) {
    (void)state;
    static const int64_t kcs[] = {1, 7, 16, 33, 255, NB_GEMM_KC};
    static const int64_t nts[] = {1, 5, 15, 16, 17, 31, NB_GEMM_NT};
    const int64_t ldc = NB_GEMM_NT + 5, crows = NB_GEMM_MR + 1;
    float *wp = malloc(NB_GEMM_MR * NB_GEMM_KC * 4), *xp = malloc(NB_GEMM_KC * NB_GEMM_NT * 4);
    float *c0 = malloc((size_t)(crows * ldc) * 4), *c = malloc((size_t)(crows * ldc) * 4);
    for (size_t ki = 0; ki < sizeof kcs / sizeof kcs[0]; ki++)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ti++)
            for (int add = 0; add < 2; add++) {
                int64_t kc = kcs[ki], nt = nts[ti];
                for (int64_t r = 0; r < NB_GEMM_MR; r++)
                    for (int64_t i = 0; i < NB_GEMM_KC; i++) wp[r * NB_GEMM_KC + i] = i < kc ? frand() : NAN;
                for (int64_t i = 0; i < NB_GEMM_KC; i++)
                    for (int64_t t = 0; t < NB_GEMM_NT; t++) xp[i * NB_GEMM_NT + t] = t < nt ? frand() : NAN;
                for (int64_t i = 0; i < crows * ldc; i++) c0[i] = frand();
                for (int k = 0; k < n_isas; k++) {
                    memcpy(c, c0, (size_t)(crows * ldc) * 4);
                    isas[k]->gemm_f32(kc, wp, xp, nt, c, ldc, add);
                    for (int64_t r = 0; r < crows; r++)
                        for (int64_t t = 0; t < ldc; t++) {
                            if (r >= NB_GEMM_MR || t >= nt) {
                                assert_true(memcmp(&c[r * ldc + t], &c0[r * ldc + t], 4) == 0);
                                continue;
                            }
                            double s = add ? c0[r * ldc + t] : 0, mag = fabs(s);
                            for (int64_t i = 0; i < kc; i++) {
                                double p = (double)wp[r * NB_GEMM_KC + i] * xp[i * NB_GEMM_NT + t];
                                s += p;
                                mag += fabs(p);
                            }
                            if (!(fabs(c[r * ldc + t] - s) <= 1e-5 * mag + 1e-7))
                                fail_msg("%s kc=%lld nt=%lld add=%d r=%lld t=%lld: %g vs %g", isas[k]->isa,
                                         (long long)kc, (long long)nt, add, (long long)r, (long long)t,
                                         (double)c[r * ldc + t], s);
                        }
                }
            }
    free(wp); free(xp); free(c0); free(c);
}

/* nb_matmul with f32 / f16 / bf16 weights, through every ISA's kernels and
 * 1-3 threads, against a float64 product on the converted weights: K below,
 * at and across NB_GEMM_KC steps (odd tails), rows that leave a partial
 * panel and more rows than one block, token counts from 1 (the dot path)
 * over partial token blocks to more than one token chunk (> 512). */
static void test_matmul(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{130, 37}, {600, 101}, {256, 12}, {9, 230}};
    static const int64_t ns[] = {1, 2, 5, 17, 33, 70, 530};
    static const nb_dtype types[] = {NB_F32, NB_F16, NB_BF16};
    for (int threads = 1; threads <= 3; threads++) {
        nb_kctx k;
        assert_int_equal(nb_kctx_init(&k, threads), NB_OK);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t K = shapes[si][0], R = shapes[si][1], nmax = 530;
            float *wf = malloc((size_t)(K * R) * 4), *x = malloc((size_t)(nmax * K) * 4);
            float *y = malloc((size_t)(nmax * R) * 4);
            void *wraw = malloc((size_t)(K * R) * 4);
            double *want = malloc((size_t)(nmax * R) * sizeof(double));
            double *mag = malloc((size_t)(nmax * R) * sizeof(double));
            for (int64_t i = 0; i < nmax * K; i++) x[i] = frand();
            for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) {
                for (int64_t i = 0; i < K * R; i++) {
                    float v = frand();
                    if (types[ty] == NB_F32) ((float *)wraw)[i] = wf[i] = v;
                    else if (types[ty] == NB_F16) wf[i] = nb_fp16_to_fp32(((uint16_t *)wraw)[i] = nb_fp32_to_fp16(v));
                    else wf[i] = nb_bf16_to_fp32(((uint16_t *)wraw)[i] = nb_fp32_to_bf16(v));
                }
                for (int64_t t = 0; t < nmax; t++)
                    for (int64_t r = 0; r < R; r++) {
                        double s = 0, m = 0;
                        for (int64_t i = 0; i < K; i++) {
                            s += (double)wf[r * K + i] * x[t * K + i];
                            m += fabs((double)wf[r * K + i] * x[t * K + i]);
                        }
                        want[t * R + r] = s;
                        mag[t * R + r] = m;
                    }
                uint64_t es = types[ty] == NB_F32 ? 4 : 2;
                nb_tensor W = {"w", types[ty], 2, {K, R, 1, 1}, wraw, (uint64_t)(K * R) * es, NULL};
                for (int f = 0; f < n_isas; f++) {
                    /* a dispatch table capped at this ISA, its decode dots of the same width
                     * (prefetch distance varied with the shape) */
                    nb_kernel_opts o;
                    nb_kernel_opts_defaults(&o);
                    o.max_isa = (nb_isa)f;
                    o.decode_dot = f == 2 ? NB_DECODE_DOT_AVX512 : NB_DECODE_DOT_AVX2;
                    o.decode_prefetch_set = true;
                    o.decode_prefetch = (int)(si % 4) * 2048; /* 0, 2, 4, 6 KiB */
                    nb_dispatch d;
                    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
                    assert_ptr_equal(d.fk, isas[f]);
                    assert_string_equal(d.decode_dot, isas[f]->isa);
                    k.d = &d;
                    k.fk = d.fk;
                    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                        int64_t n = ns[ni];
                        if (n == nmax && (f != n_isas - 1 || threads != 2)) continue; /* the big one once */
                        for (int64_t i = 0; i < n * R; i++) y[i] = NAN;
                        assert_int_equal(nb_matmul(&k, &W, x, n, y), NB_OK);
                        for (int64_t i = 0; i < n * R; i++)
                            if (!(fabs(y[i] - want[i]) <= 1e-5 * mag[i] + 1e-7))
                                fail_msg("%s %s K=%lld R=%lld n=%lld threads=%d: y[%lld] = %g, want %g",
                                         isas[f]->isa, nb_dtype_name(types[ty]), (long long)K, (long long)R,
                                         (long long)n, threads, (long long)i, (double)y[i], want[i]);
                    }
                }
            }
            free(wf); free(x); free(y); free(wraw); free(want); free(mag);
        }
        k.d = nb_dispatch_default(); /* the per-ISA tables above were local to their loop */
        k.fk = k.d->fk;
        nb_tensor bad = {"w", NB_I32, 2, {4, 4, 1, 1}, NULL, 0, NULL};
        float x1[4] = {0}, y1[4];
        assert_int_equal(nb_matmul(&k, &bad, x1, 1, y1), NB_ERR_UNSUPPORTED);
        nb_kctx_free(&k);
    }
}

/* Quantized weights without an int8 GEMM (Q4_K) go, from 16 tokens on,
 * through dequantization + the float GEMM with the activations rounded
 * through Q8_K: the result must match the integer dot products of the
 * one-token path, token by token, up to float summation order. */
static void test_matmul_quant_gemm(void **state) {
    (void)state;
    const nb_qtype *qt = nb_qtype_get(NB_Q4_K);
    assert_non_null(qt);
    int64_t K = 768, R = 29, n = 20;
    uint64_t rb;
    assert_true(nb_dtype_row_bytes(NB_Q4_K, (uint64_t)K, &rb));
    float *wf = malloc((size_t)(K * R) * 4), *x = malloc((size_t)(n * K) * 4), *wd = malloc((size_t)K * 4);
    float *y = malloc((size_t)(n * R) * 4), *y1 = malloc((size_t)R * 4);
    uint8_t *wq = malloc((size_t)rb * (size_t)R);
    for (int64_t i = 0; i < K * R; i++) wf[i] = frand();
    for (int64_t i = 0; i < n * K; i++) x[i] = frand();
    for (int64_t r = 0; r < R; r++) qt->from_float(wf + r * K, wq + (uint64_t)r * rb, K);
    nb_tensor W = {"wq", NB_Q4_K, 2, {K, R, 1, 1}, wq, rb * (uint64_t)R, NULL};
    for (int threads = 1; threads <= 2; threads++) {
        nb_kctx k;
        assert_int_equal(nb_kctx_init(&k, threads), NB_OK);
        assert_int_equal(nb_matmul(&k, &W, x, n, y), NB_OK);
        for (int64_t t = 0; t < n; t++) {
            assert_int_equal(nb_matmul(&k, &W, x + t * K, 1, y1), NB_OK);
            for (int64_t r = 0; r < R; r++) {
                qt->to_float(wq + (uint64_t)r * rb, wd, K);
                double mag = 0;
                for (int64_t i = 0; i < K; i++) mag += fabs((double)wd[i] * x[t * K + i]);
                if (!(fabs(y[t * R + r] - y1[r]) <= 2e-5 * mag))
                    fail_msg("threads=%d t=%lld r=%lld: GEMM %g vs dot %g (mag %g)", threads, (long long)t,
                             (long long)r, (double)y[t * R + r], (double)y1[r], mag);
            }
        }
        nb_kctx_free(&k);
    }
    free(wf); free(x); free(wd); free(y); free(y1); free(wq);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dots),
        cmocka_unit_test(test_dot_rows),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_rmsnorm_add),
        cmocka_unit_test(test_gemm_kernel),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_quant_gemm),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
