/* nb_matmul_many (several weights, one input) gives exactly what separate
 * nb_matmul calls give - the shared job only changes who computes which row,
 * not the arithmetic - for repacked types on the dot path (1 token) and the
 * int8 GEMM (9 and 37 tokens), mixed Q4_K + Q6_K (same Q8_K activations, one
 * job), F16 (one job for one token, the float GEMM per weight otherwise), and mixes that cannot share a job (Q4_0 + Q8_K types, F16) and take
 * the fallback. Also checks the 1-token result against a float64 dot of the
 * dequantized weights, so both cannot be wrong the same way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/cpu.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "quant/qtypes.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
}

/* A weight of R rows x K in `type`, repacked for this CPU like the model loader does. */
static nb_tensor make_weight(nb_dtype type, int64_t K, int64_t R, void **mem) {
    float *w = malloc((size_t)(K * R) * sizeof *w);
    for (int64_t i = 0; i < K * R; i++) w[i] = frand();
    nb_tensor t = {.name = nb_dtype_name(type), .type = type, .n_dims = 2, .ne = {K, R, 1, 1}};
    uint64_t rb;
    if (type == NB_F16) {
        uint16_t *h = malloc((size_t)(K * R) * 2);
        for (int64_t i = 0; i < K * R; i++) h[i] = nb_fp32_to_fp16(w[i]);
        *mem = h;
    } else {
        const nb_qtype *qt = nb_qtype_get(type);
        assert_true(nb_dtype_row_bytes(type, (uint64_t)K, &rb));
        uint8_t *q = malloc(rb * (uint64_t)R);
        for (int64_t r = 0; r < R; r++) qt->from_float(w + r * K, q + (uint64_t)r * rb, K);
        nb_dtype to = nb_repack_target(type);
        if (to != type) {
            uint64_t prb;
            assert_true(nb_dtype_row_bytes(to, (uint64_t)K, &prb));
            uint8_t *p = malloc(prb * (uint64_t)R);
            nb_repack_rows(type, q, p, R, K);
            free(q);
            q = p;
            t.type = to;
        }
        *mem = q;
    }
    t.data = *mem;
    free(w);
    return t;
}

static void check(const nb_dtype *types, int count, int64_t n) {
    const int64_t K = 512, R[4] = {64, 30, 30, 96};
    nb_kctx k;
    assert_int_equal(nb_kctx_init(&k, 2), NB_OK);
    nb_tensor W[4];
    void *mem[4];
    const nb_tensor *wp[4];
    float *Y[4], *Ysep[4];
    for (int i = 0; i < count; i++) {
        W[i] = make_weight(types[i], K, R[i], &mem[i]);
        wp[i] = &W[i];
        Y[i] = calloc((size_t)(n * R[i]), sizeof(float));
        Ysep[i] = calloc((size_t)(n * R[i]), sizeof(float));
    }
    float *X = malloc((size_t)(n * K) * sizeof *X);
    for (int64_t i = 0; i < n * K; i++) X[i] = frand();
    assert_int_equal(nb_matmul_many(&k, count, wp, X, n, Y), NB_OK);
    for (int i = 0; i < count; i++) {
        assert_int_equal(nb_matmul(&k, &W[i], X, n, Ysep[i]), NB_OK);
        assert_memory_equal(Y[i], Ysep[i], (size_t)(n * R[i]) * sizeof(float));
        if (n == 1) { /* against float64 on the dequantized weights, within the activation rounding */
            float *row = malloc((size_t)K * sizeof *row);
            for (int64_t r = 0; r < R[i]; r++) {
                assert_int_equal(nb_get_row(&W[i], r, row), NB_OK);
                double want = 0, mag = 0;
                for (int64_t c = 0; c < K; c++) {
                    want += (double)row[c] * X[c];
                    mag += fabs((double)row[c] * X[c]);
                }
                assert_true(fabs(Y[i][r] - want) <= 0.02 * mag + 1e-4);
            }
            free(row);
        }
        free(Y[i]); free(Ysep[i]); free(mem[i]);
    }
    free(X);
    nb_kctx_free(&k);
}

/* Small batches (2..8 tokens, below the int8 GEMM; F16: per-token dots up
 * to 8, matmul.c float_dots_max): below the rows-in-lanes
 * kernel's start (the table's rows_min) the per-row path, with the kernels' small-batch vec_dot_mxn where
 * they have one, gives exactly the one-token results for each token; from
 * it, where a type has a rows kernel (AVX-512 VNNI), the same integer sums
 * in another float order. */
static void test_small_batch(void **state) {
    (void)state;
    static const nb_dtype types[] = {NB_Q4_0, NB_Q8_0, NB_Q4_K, NB_Q6_K, NB_W4G32, NB_W4G128, NB_F16};
    const int64_t K = 512, R = 37;
    nb_kctx k;
    assert_int_equal(nb_kctx_init(&k, 2), NB_OK);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        void *mem;
        nb_tensor W = make_weight(types[ti], K, R, &mem);
        const nb_qdot *qd = nb_dispatch_qdot(k.d, W.type);
        const int64_t rows_start = qd && qd->vec_dot_rows ? k.d->rows_min : 8;
        for (int64_t n = 2; n <= 8; n++) {
            float *X = malloc((size_t)(n * K) * sizeof *X), *Y = malloc((size_t)(n * R) * sizeof *Y);
            float *y1 = malloc((size_t)R * sizeof *y1), *row = malloc((size_t)K * sizeof *row);
            for (int64_t i = 0; i < n * K; i++) X[i] = frand();
            assert_int_equal(nb_matmul(&k, &W, X, n, Y), NB_OK);
            for (int64_t t = 0; t < n; t++) {
                assert_int_equal(nb_matmul(&k, &W, X + t * K, 1, y1), NB_OK);
                if (n < rows_start) {
                    assert_memory_equal(Y + t * R, y1, (size_t)R * sizeof(float));
                    continue;
                }
                for (int64_t r = 0; r < R; r++) {
                    assert_int_equal(nb_get_row(&W, r, row), NB_OK);
                    double mag = 0;
                    for (int64_t c = 0; c < K; c++) mag += fabs((double)row[c] * X[t * K + c]);
                    assert_true(fabs(Y[t * R + r] - y1[r]) <= 1e-5 * mag + 1e-6);
                }
            }
            free(X); free(Y); free(y1); free(row);
        }
        free(mem);
    }
    nb_kctx_free(&k);
}

static void test_shared_jobs(void **state) {
    (void)state;
    static const nb_dtype qkv_k[] = {NB_Q4_K, NB_Q4_K, NB_Q6_K}, qkv_0[] = {NB_Q4_0, NB_Q4_0, NB_Q4_0},
                          q8[] = {NB_Q8_0, NB_Q8_0}, mixed[] = {NB_Q4_0, NB_Q6_K, NB_F16}, f16[] = {NB_F16, NB_F16, NB_F16}, four[] = {NB_Q5_K, NB_Q4_K, NB_Q6_K, NB_Q4_K};
    static const int64_t ns[] = {1, 9, 37};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check(qkv_k, 3, ns[i]);
        check(qkv_0, 3, ns[i]);
        check(q8, 2, ns[i]);
        check(mixed, 3, ns[i]);
        check(f16, 3, ns[i]);
        check(four, 4, ns[i]);
    }
    fprintf(stderr, "  nb_matmul_many == nb_matmul for shared and fallback jobs at 1, 9, 37 tokens\n");
}

/* A prompt long enough that the int8 GEMM takes its packed activations in
 * several L2-sized slabs (kernels/matmul.c): every token's outputs still
 * equal the one-token dot path's (same integer products; float order). */
static void test_slabs(void **state) {
    (void)state;
    const int64_t K = 256, R = 6, n = 3800; /* 238 groups of 16 tokens: more than one slab at K=256 */
    nb_kctx k;
    assert_int_equal(nb_kctx_init(&k, 2), NB_OK);
    static const nb_dtype types[] = {NB_Q4_K, NB_Q4_0};
    float *X = malloc((size_t)(n * K) * sizeof *X), *Y = malloc((size_t)(n * R) * sizeof *Y), y1[6];
    for (int64_t i = 0; i < n * K; i++) X[i] = frand();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        void *mem;
        nb_tensor W = make_weight(types[ti], K, R, &mem);
        assert_int_equal(nb_matmul(&k, &W, X, n, Y), NB_OK);
        float *row = malloc((size_t)K * sizeof *row);
        for (int64_t t = 0; t < n; t += (t < n - 40 ? 37 : 1)) {
            assert_int_equal(nb_matmul(&k, &W, X + t * K, 1, y1), NB_OK);
            for (int64_t r = 0; r < R; r++) {
                assert_int_equal(nb_get_row(&W, r, row), NB_OK);
                double mag = 0;
                for (int64_t c = 0; c < K; c++) mag += fabs((double)row[c] * X[t * K + c]);
                if (!(fabs(Y[t * R + r] - y1[r]) <= 1e-5 * mag + 1e-6))
                    fprintf(stderr, "%s token %lld row %lld: batch %g one %g\n", nb_dtype_name(W.type), (long long)t,
                            (long long)r, Y[t * R + r], y1[r]);
                assert_true(fabs(Y[t * R + r] - y1[r]) <= 1e-5 * mag + 1e-6);
            }
        }
        free(row);
        free(mem);
    }
    fprintf(stderr, "  3800-token batches (several activation slabs) == one-token dots\n");
    nb_kctx_free(&k);
    /* The slab size (per CPU, or --gemm-slab-kib) changes only the order the
     * rows and slabs are visited in: each output is computed the same way,
     * so a 64 KiB slab (many) and a 64 MiB one (one slab) agree bit for bit. */
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    nb_dispatch d;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    const bool amx = nb_repack_gemm_amx(NB_Q4_0R) && nb_dispatch_rgemm(&d, NB_Q4_0R) == nb_repack_gemm_amx(NB_Q4_0R);
    assert_int_equal(d.gemm_slab_bytes, nb_gemm_slab_for_cpu(nb_cpu_get(), amx));
    assert_true(d.gemm_slab_bytes >= (size_t)NB_GEMM_SLAB_MIN_KIB << 10);
    float *Y2 = malloc((size_t)(n * R) * sizeof *Y2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        void *mem;
        nb_tensor W = make_weight(types[ti], K, R, &mem);
        const int64_t kib[2] = {NB_GEMM_SLAB_MIN_KIB, NB_GEMM_SLAB_MAX_KIB};
        for (int s = 0; s < 2; s++) {
            o.gemm_slab_kib = kib[s];
            assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
            assert_int_equal(d.gemm_slab_bytes, (size_t)kib[s] << 10);
            assert_int_equal(nb_kctx_init_with(&k, 2, &d), NB_OK);
            assert_int_equal(nb_matmul(&k, &W, X, n, s ? Y2 : Y), NB_OK);
            nb_kctx_free(&k);
        }
        assert_memory_equal(Y, Y2, (size_t)(n * R) * sizeof *Y);
        free(mem);
    }
    o.gemm_slab_kib = NB_GEMM_SLAB_MIN_KIB - 1;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "gemm_slab_kib"));
    setenv("NIBBLE_GEMM_SLAB_KIB", "1000000", 1);
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "NIBBLE_GEMM_SLAB_KIB"));
    setenv("NIBBLE_GEMM_SLAB_KIB", "256", 1);
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_int_equal(o.gemm_slab_kib, 256);
    unsetenv("NIBBLE_GEMM_SLAB_KIB");
    fprintf(stderr, "  slabs of 64 KiB and 64 MiB give identical outputs; bad slab sizes are refused\n");
    free(X); free(Y); free(Y2);
}

/* One token with S runs of rows per thread (dispatch.h decode_streams; the
 * kernels' multi-row dots read them in lockstep) gives exactly what one run
 * gives, for every type that has the multi-row dot and for row counts that
 * S does not divide (the rows past S*Q, and groups cut by a chunk's edge,
 * take the one-row dot), in a shared job whose second weight starts
 * mid-group, on 1 and 2 threads, with the widest kernels and with the
 * 256-bit ones. Out-of-range counts are refused. */
static void test_streams(void **state) {
    (void)state;
    static const nb_dtype types[] = {NB_Q4_0, NB_Q8_0, NB_Q4_K, NB_Q6_K, NB_F16, NB_W8, NB_W4G128};
    const int64_t K = 512, R[2] = {203, 130};
    enum { NT = 3 }; /* and a small batch: the streams are one token's (a past bug took them for all) */
    float *X = malloc((size_t)(NT * K) * sizeof *X);
    for (int64_t i = 0; i < NT * K; i++) X[i] = frand();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        nb_tensor W[2];
        void *mem[2];
        const nb_tensor *wp[2];
        float *want[2], *got[2], *want3[2], *got3[2];
        for (int i = 0; i < 2; i++) {
            W[i] = make_weight(types[ti], K, R[i], &mem[i]);
            wp[i] = &W[i];
            want[i] = malloc((size_t)R[i] * sizeof(float));
            got[i] = malloc((size_t)R[i] * sizeof(float));
            want3[i] = malloc((size_t)(NT * R[i]) * sizeof(float));
            got3[i] = malloc((size_t)(NT * R[i]) * sizeof(float));
        }
        for (int avx2 = 0; avx2 < 2; avx2++) /* the widest kernels, then the 256-bit ones */
        for (int threads = 1; threads <= 2; threads++)
            for (int s = 1; s <= NB_DECODE_STREAMS_MAX; s++) {
                nb_kernel_opts o;
                nb_kernel_opts_defaults(&o);
                if (avx2) o.max_isa = NB_ISA_AVX2;
                o.decode_streams = s;
                nb_dispatch d;
                nb_kctx k;
                assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
                assert_int_equal(d.decode_streams, s);
                assert_int_equal(nb_kctx_init_with(&k, threads, &d), NB_OK);
                assert_int_equal(nb_matmul_many(&k, 2, wp, X, 1, s == 1 && threads == 1 ? want : got), NB_OK);
                assert_int_equal(nb_matmul_many(&k, 2, wp, X, NT, s == 1 && threads == 1 ? want3 : got3), NB_OK);
                if (s > 1 || threads > 1)
                    for (int i = 0; i < 2; i++) {
                        assert_memory_equal(got[i], want[i], (size_t)R[i] * sizeof(float));
                        assert_memory_equal(got3[i], want3[i], (size_t)(NT * R[i]) * sizeof(float));
                    }
                nb_kctx_free(&k);
            }
        for (int i = 0; i < 2; i++) {
            free(mem[i]); free(want[i]); free(got[i]); free(want3[i]); free(got3[i]);
        }
    }
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    nb_dispatch d;
    o.decode_streams = NB_DECODE_STREAMS_MAX + 1;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "decode_streams"));
    setenv("NIBBLE_DECODE_STREAMS", "9", 1);
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "NIBBLE_DECODE_STREAMS"));
    unsetenv("NIBBLE_DECODE_STREAMS");
    fprintf(stderr, "  1-4 runs of rows per thread give identical one-token and 3-token outputs\n");
    free(X);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shared_jobs), cmocka_unit_test(test_small_batch),
                                       cmocka_unit_test(test_slabs), cmocka_unit_test(test_streams)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
