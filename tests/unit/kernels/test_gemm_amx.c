/* The AMX int8 GEMMs (kernels/x86/gemm_amx.c) for Q4_0R, Q8_0R, Q4_KR, Q6_KR, W8R and W4G*R: for
 * batches of 1..16 tokens and larger ones (17, 33, 64, and 300: more token
 * groups than one pass over a chunk takes), row counts of whole 16-row
 * tiles, tiles plus the rows the AVX-512 kernel takes, and those rows
 * alone, block counts with and without Q4_0R's 4-block tail and across the
 * 64-block chunks (1, 3, 7, 64, 65, 131; K types: 1, 2, 8, 9, 17 super-blocks;
 * W4G64/128: whole groups),
 * and extreme codes (every weight
 * at the type's maximum, activations that quantize to +-127), they are
 *   - bit-identical to the AVX-512 VNNI GEMM on the same pack (the same
 *     integer sums, the same float operations in the same order), and
 *   - equal to the scalar reference dot within 1e-5 of sum |w*a|;
 * nothing past the batch or the rows is written; and the dispatch table
 * takes them wherever the CPU grants AMX-INT8, unless NIBBLE_ISA is below
 * amx. Skipped (counted as such) on CPUs without usable AMX. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/sbatch.h"
#include "testutil.h"
#include "kernel_inputs.h"

static void check(nb_dtype gguf, nb_dtype planar) {
    const nb_rgemm *amx = nb_repack_gemm_amx(planar);
    if (!amx) NB_TEST_SKIP("%s: no usable AMX-INT8 on this CPU", nb_dtype_name(planar));
    const nb_rgemm *vnni = nb_repack_gemm_variant(planar, 3);
    assert_non_null(vnni);
    assert_int_equal(amx->act, vnni->act);
    assert_int_equal(amx->tile_rows, 16);
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref = nb_repack_qdot(planar, NB_ISA_SCALAR);
    /* blocks per row: with and without the 4-block tail, across chunks (W4G64/128: whole groups) */
    static const int64_t kb0[] = {1, 3, 7, 64, 65, 131}, kbk[] = {8, 16, 64, 72, 136};
    static const int64_t kb64[] = {2, 6, 64, 66, 130, 0}, kb128[] = {4, 8, 64, 68, 132, 0};
    const bool k = qt->block == 256;
    const int64_t *kbs = k ? kbk : qt->block == 128 ? kb128 : qt->block == 64 ? kb64 : kb0;
    const size_t nkb = qt->block == 32 ? 6 : 5;
    static const int64_t toks[] = {1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 33, 64, 300};
    static const int64_t rows[] = {16, 32, 17, 35, 5};
    const int64_t R = 48, nmax = 300;
    int64_t cases = 0;
    for (size_t ki = 0; ki < nkb; ki++)
        for (int pattern = 0; pattern < 3; pattern++) {
            const int64_t K = kbs[ki] * 32;
            uint64_t grb, prb;
            assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
            assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
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
                if (n > 64 && pattern) continue; /* the long batch once per K */
                nb_actpack ap;
                nb_actpack_init(&ap, mem, n, K, amx->act);
                for (int64_t gi = 0; gi < ap.ng; gi++) nb_actpack_group(&ap, x, gi, row);
                for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                    const int64_t nr = rows[ri];
                    memset(y0, 0xff, (size_t)(nmax * R) * 4); /* NaN: a missed store shows */
                    memset(y1, 0xff, (size_t)(nmax * R) * 4);
                    const uint8_t *wr = p + (ri == 4 ? 3 * prb : 0); /* the last: rows from an offset */
                    vnni->run(wr, prb, nr, &ap, y0, R);
                    amx->run(wr, prb, nr, &ap, y1, R);
                    for (int64_t t = 0; t < n; t++)
                        for (int64_t r = 0; r < nr; r++)
                            if (memcmp(&y0[t * R + r], &y1[t * R + r], 4) != 0)
                                fail_msg("%s K=%lld n=%lld rows=%lld pattern %d (t %lld, r %lld): amx %.9g, vnni %.9g",
                                         nb_dtype_name(planar), (long long)K, (long long)n, (long long)nr, pattern,
                                         (long long)t, (long long)r, (double)y1[t * R + r], (double)y0[t * R + r]);
                    for (int64_t t = 0; t < nmax; t++)
                        for (int64_t r = t < n ? nr : 0; r < R; r++) assert_true(isnan(y1[t * R + r]));
                    cases++;
                }
                /* the whole R rows against the scalar reference, a few tokens */
                amx->run(p, prb, R, &ap, y1, R);
                expect_near_ref(ref, p, prb, w, x, K, R, n, 7, y1, nb_dtype_name(planar));
            }
            free(w); free(x); free(y0); free(y1); free(g); free(p); free(mem); free(row);
        }
    fprintf(stderr, "  %s AMX GEMM == AVX-512 VNNI GEMM bit for bit, ~ scalar reference (%lld cases)\n",
            nb_dtype_name(planar), (long long)cases);
}

static void test_q4_0r(void **state) { (void)state; check(NB_Q4_0, NB_Q4_0R); }
static void test_q8_0r(void **state) { (void)state; check(NB_Q8_0, NB_Q8_0R); }
static void test_q4_kr(void **state) { (void)state; check(NB_Q4_K, NB_Q4_KR); }
static void test_q6_kr(void **state) { (void)state; check(NB_Q6_K, NB_Q6_KR); }
static void test_own_types(void **state) {
    (void)state;
    for (size_t i = 0; i < NB_TEST_OWN_TYPES; i++) check(nb_test_own_types[i][0], nb_test_own_types[i][1]);
}

/* The table takes the AMX GEMMs at isa amx only (for the four repacked
 * types, no others), and not with amx_gemm off. */
static void test_dispatch(void **state) {
    (void)state;
    if (!nb_repack_gemm_amx(NB_Q4_0R)) NB_TEST_SKIP("no usable AMX-INT8 on this CPU");
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    nb_dispatch d;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q4_0R), nb_repack_gemm_amx(NB_Q4_0R));
    assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q8_0R), nb_repack_gemm_amx(NB_Q8_0R));
    assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q4_KR), nb_repack_gemm_amx(NB_Q4_KR));
    assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q6_KR), nb_repack_gemm_amx(NB_Q6_KR));
    assert_null(nb_repack_gemm_amx(NB_Q4_0));
    assert_non_null(strstr(d.desc, "amx"));
    for (int off = 0; off < 2; off++) {
        nb_kernel_opts_defaults(&o);
        if (off) o.amx_gemm = false;
        else o.max_isa = NB_ISA_AVX512;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q4_0R), nb_repack_gemm_variant(NB_Q4_0R, 3));
        assert_ptr_equal(nb_dispatch_rgemm(&d, NB_Q4_KR), nb_repack_gemm_variant(NB_Q4_KR, 3));
        assert_ptr_equal(nb_dispatch_sgemm(&d, NB_Q4_0R, 8), nb_q4_0r_sgemm_avx512);
        assert_null(strstr(d.desc, "int8 GEMM on (amx"));
    }
    setenv("NIBBLE_AMX_GEMM", "maybe", 1);
    nb_kernel_opts_defaults(&o);
    assert_int_not_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "NIBBLE_AMX_GEMM"));
    setenv("NIBBLE_AMX_GEMM", "0", 1);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_false(o.amx_gemm);
    unsetenv("NIBBLE_AMX_GEMM");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_0r), cmocka_unit_test(test_q8_0r),
                                       cmocka_unit_test(test_q4_kr), cmocka_unit_test(test_q6_kr),
                                       cmocka_unit_test(test_own_types),
                                       cmocka_unit_test(test_dispatch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
