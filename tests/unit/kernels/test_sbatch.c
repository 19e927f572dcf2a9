/* The small-batch int8 GEMMs (kernels/sbatch.h) for Q4_0R, Q8_0R, Q4_KR and
 * Q6_KR: for every batch of 1..16 tokens and some larger ones (17, 23, 33,
 * 48, 64: the 512-bit tiles over 2, 3 and 4 full or partial groups), row
 * counts that leave every tile shape (1..4 rows x 1..2 units),
 * block counts with and without Q4_0R's 4-block tail, and extreme codes
 * (every weight at the type's maximum, activations with a one-hot max that
 * quantizes to +-127), they are
 *   - bit-identical to the 16-token int8 GEMM on the same pack (the same
 *     per-lane operations in the same order), and
 *   - equal to the scalar reference dot (nb_*_dot_ref on each token's own
 *     quantization) within 1e-5 of sum |w*a|;
 * and the dispatch table picks them up to sgemm_max tokens only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/sbatch.h"
#include "testutil.h"
#include "kernel_inputs.h"


/* wide: the _wide entry point (512-bit tiles from 9 tokens, sbatch.h) */
static void check(nb_dtype gguf, nb_dtype planar, bool wide) {
    const nb_rgemm *big = nb_repack_gemm(planar, NB_ISA_AVX512);
    nb_repack_gemm_fn small = nb_sbatch_gemm(planar, NB_ISA_AVX512);
    if (!big || big != nb_repack_gemm_variant(planar, 3)) {
        /* below AVX-512 VNNI (the CPU, or NIBBLE_ISA) the small-batch GEMM
         * is the one that matches the lower 16-token GEMM, never this one */
        assert_true(!small || small != nb_sbatch_gemm_variant(planar, 3));
        NB_TEST_SKIP("%s: no AVX-512 VNNI here (or NIBBLE_ISA below it), the 512-bit GEMMs are not used",
                     nb_dtype_name(planar));
    }
    assert_non_null(small);
    assert_true(nb_sbatch_gemm(planar, NB_ISA_AVX2) != small); /* AVX2's own (test_sbatch_avx2.c) */
    if (wide) {
        small = nb_sbatch_gemm_wide(small);
        assert_non_null(small);
    }
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref = nb_repack_qdot(planar, NB_ISA_SCALAR);
    const bool k = qt->block == 256;
    /* K in blocks: Q4_0R/Q8_0R 1, 3, 4, 7 (grouped + tail), 64; K types 1, 2, 3 super-blocks */
    static const int64_t kb0[] = {1, 3, 4, 7, 64}, kbk[] = {1, 2, 3};
    const int64_t *kbs = k ? kbk : kb0;
    const int nkb = k ? 3 : 5;
    static const int64_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 33, 48, 64};
    int64_t cases = 0;
    for (int kbi = 0; kbi < nkb; kbi++)
        for (int pattern = 0; pattern < 3; pattern++) {
            const int64_t K = kbs[kbi] * (int64_t)qt->block, R = 11; /* 4 + 4 + 3 rows */
            uint64_t grb, prb;
            assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
            assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
            const int64_t nmax = 64;
            float *w = malloc((size_t)(K * R) * 4), *x = malloc((size_t)(K * nmax) * 4);
            float *y0 = malloc((size_t)(nmax * R) * 4), *y1 = malloc((size_t)(nmax * R) * 4);
            uint8_t *g = malloc(grb * R), *p = malloc(prb * R);
            fill_patterns(w, K * R, x, K * nmax, pattern);
            for (int64_t r = 0; r < R; r++) qt->from_float(w + r * K, g + r * grb, K);
            nb_repack_rows_to(gguf, planar, g, p, R, K);
            void *mem = aligned_alloc(64, (nb_actpack_bytes(K, nmax) + 63) & ~(size_t)63);
            void *row = malloc(nb_actpack_scratch_bytes(K));
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                const int64_t n = toks[ti];
                nb_actpack ap;
                nb_actpack_init(&ap, mem, n, K, big->act);
                for (int64_t gi = 0; gi < ap.ng; gi++) nb_actpack_group(&ap, x, gi, row);
                /* row counts 1..8 and R from row 0, and R rows from an offset */
                for (int64_t nr = 1; nr <= R; nr += (nr < 8 ? 1 : 3)) {
                    memset(y0, 0xff, (size_t)(nmax * R) * 4); /* NaN: a missed store shows */
                    memset(y1, 0xff, (size_t)(nmax * R) * 4);
                    big->run(p, prb, nr, &ap, y0, R);
                    small(p, prb, nr, &ap, y1, R);
                    for (int64_t t = 0; t < n; t++)
                        for (int64_t r = 0; r < nr; r++)
                            if (memcmp(&y0[t * R + r], &y1[t * R + r], 4) != 0)
                                fail_msg("%s K=%lld n=%lld rows=%lld pattern %d (t %lld, r %lld): small %.9g, 16-token GEMM %.9g",
                                         nb_dtype_name(planar), (long long)K, (long long)n, (long long)nr, pattern,
                                         (long long)t, (long long)r, (double)y1[t * R + r], (double)y0[t * R + r]);
                    /* nothing past the batch or its rows is written (4-row tiles store 4 floats at once) */
                    for (int64_t t = 0; t < nmax; t++)
                        for (int64_t r = t < n ? nr : 0; r < R; r++) assert_true(isnan(y1[t * R + r]));
                    cases++;
                }
                small(p + 3 * prb, prb, R - 3, &ap, y1, R); /* rows from an offset: the same values */
                for (int64_t t = 0; t < n; t++)
                    for (int64_t r = 0; r < R - 3; r++) assert_memory_equal(&y1[t * R + r], &y0[t * R + r + 3], 4);
                expect_near_ref(ref, p, prb, w, x, K, R, n, 1, y0, nb_dtype_name(planar));
            }
            free(w); free(x); free(y0); free(y1); free(g); free(p); free(mem); free(row);
        }
    fprintf(stderr, "  %s small-batch GEMM%s == 16-token GEMM bit for bit, ~ scalar reference (%lld cases)\n",
            nb_dtype_name(planar), wide ? " (512-bit from 9 tokens)" : "", (long long)cases);
}

static void test_q4_0r(void **state) { (void)state; check(NB_Q4_0, NB_Q4_0R, false); check(NB_Q4_0, NB_Q4_0R, true); }
static void test_q8_0r(void **state) { (void)state; check(NB_Q8_0, NB_Q8_0R, false); check(NB_Q8_0, NB_Q8_0R, true); }
static void test_q4_kr(void **state) { (void)state; check(NB_Q4_K, NB_Q4_KR, false); check(NB_Q4_K, NB_Q4_KR, true); }
static void test_q6_kr(void **state) { (void)state; check(NB_Q6_K, NB_Q6_KR, false); check(NB_Q6_K, NB_Q6_KR, true); }

/* The table: small-batch GEMMs for the repacked types up to sgemm_max
 * tokens, none past it, none with sgemm_max 0, none without the int8 GEMM
 * or below AVX-512; the environment variable is parsed with a clear error. */
static void test_dispatch(void **state) {
    (void)state;
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    assert_int_equal(o.sgemm_max, (int64_t)1 << 30); /* every batch size */
    nb_dispatch d, d32;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    o.sgemm_max = 32;
    assert_int_equal(nb_dispatch_build(&o, &d32), NB_OK);
    const nb_dtype ts[] = {NB_Q4_0R, NB_Q8_0R, NB_Q4_KR, NB_Q6_KR};
    for (int i = 0; i < 4; i++) {
        const nb_rgemm *g = nb_dispatch_rgemm(&d, ts[i]);
        /* every int8 GEMM variant has small-batch kernels (AVX2: test_sbatch_avx2.c) but the AMX
         * ones, which take every batch size (test_gemm_amx.c) */
        bool have = g != NULL && g != nb_repack_gemm_amx(ts[i]);
        assert_true((nb_dispatch_sgemm(&d, ts[i], 8) != NULL) == have);
        assert_true((nb_dispatch_sgemm(&d, ts[i], 16) != NULL) == have);
        assert_true((nb_dispatch_sgemm(&d, ts[i], 4096) != NULL) == have);
        assert_true((nb_dispatch_sgemm(&d32, ts[i], 32) != NULL) == have);
        assert_null(nb_dispatch_sgemm(&d32, ts[i], 33));
    }
    assert_null(nb_dispatch_sgemm(&d, NB_Q4_0, 8)); /* GGUF layout: no int8 GEMM */
    o.sgemm_max = 0;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_null(nb_dispatch_sgemm(&d, NB_Q4_0R, 8));
    nb_kernel_opts_defaults(&o);
    o.int8_gemm = false;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_null(nb_dispatch_sgemm(&d, NB_Q4_0R, 8));
    nb_kernel_opts_defaults(&o);
    o.max_isa = NB_ISA_AVX2;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_true(nb_dispatch_sgemm(&d, NB_Q4_0R, 8) != nb_q4_0r_sgemm_avx512);
    setenv("NIBBLE_SGEMM_MAX", "12", 1);
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_int_equal(o.sgemm_max, 12);
    setenv("NIBBLE_SGEMM_MAX", "-1", 1);
    assert_int_not_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "NIBBLE_SGEMM_MAX"));
    unsetenv("NIBBLE_SGEMM_MAX");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_0r), cmocka_unit_test(test_q8_0r),
                                       cmocka_unit_test(test_q4_kr), cmocka_unit_test(test_q6_kr),
                                       cmocka_unit_test(test_dispatch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
