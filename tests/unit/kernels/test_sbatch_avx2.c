/* The AVX2 small-batch int8 GEMMs (kernels/x86/sbatch_avx2_impl.h), both
 * variants - vpmaddubsw (AVX2) and 256-bit vpdpbusd (AVX-VNNI), each where
 * this CPU runs it (a skip otherwise) - for Q4_0R, Q8_0R, Q4_KR and Q6_KR:
 * for batches of 1..17, 23 and 33 tokens (one unit, unit pairs, an odd
 * unit, a second pass over the weights), row counts that leave every tile
 * shape (8, 4, 2, 1 rows), block counts with and without Q4_0R's 4-block
 * tail, on random codes, all codes 0xff (every weight at its maximum),
 * all codes at the minimum (Q8_0 -128, Q6_K scales -128) and activations
 * at +-127 everywhere, they are
 *   - bit-identical to the 16-token int8 GEMM of the same variant on the
 *     same pack, never writing past the batch or the rows, and
 *   - equal to the scalar reference dot (nb_*_dot_ref on each token's own
 *     quantization) within 1e-5 of sum |w*a|;
 * and nb_sbatch_gemm / the dispatch table pick the small-batch GEMM of the
 * variant whose 16-token GEMM runs (AVX-512 VNNI, AVX-VNNI or AVX2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blocks.h"
#include "base/half.h"
#include "kernels/dispatch.h"
#include "kernels/sbatch.h"
#include "kernel_inputs.h"
#include "testutil.h"

/* 0: random; 1: +-1 everywhere (every activation quantizes to +-127);
 * 2: a one-hot large value per block (+-127 there, small elsewhere). */
static void fill_act(float *x, int64_t n, int mode) {
    for (int64_t i = 0; i < n; i++) {
        if (mode == 0) x[i] = frand() * 3;
        else if (mode == 1) x[i] = next() & 1 ? 1.0f : -1.0f;
        else x[i] = i % 32 == 7 ? ((i / 32) % 2 ? 100.0f : -100.0f) : frand();
    }
}

static const char *vname(int v) { return v == 1 ? "avx2" : "avx-vnni"; }

/* (weight codes, activations) combinations */
static const int combos[][2] = {{0, 0}, {1, 1}, {2, 1}, {1, 2}, {0, 1}, {2, 2}};

/* Returns the number of cases checked (0: the variant does not run here). */
static int64_t check_variant(nb_dtype gguf, nb_dtype planar, int v) {
    const nb_rgemm *big = nb_repack_gemm_variant(planar, v);
    nb_repack_gemm_fn small = nb_sbatch_gemm_variant(planar, v);
    if (!big) {
        assert_null(small);
        fprintf(stderr, "  %s %s: not on this CPU\n", nb_dtype_name(planar), vname(v));
        return 0;
    }
    assert_non_null(small);
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref = nb_repack_qdot_variant(planar, 0);
    nb_to_float_fn deq = nb_repack_to_float(planar);
    assert_non_null(ref);
    assert_non_null(deq);
    const bool k = qt->block == 256;
    static const int64_t kb0[] = {1, 3, 4, 7, 64}, kbk[] = {1, 2, 3};
    const int64_t *kbs = k ? kbk : kb0;
    const int nkb = k ? 3 : 5;
    static const int64_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 33};
    static const int64_t rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 19};
    const int64_t R = 19, nmax = 33; /* 19 rows: 8 + 8 + 2 + 1 or 4 x 4 + 2 + 1 */
    int64_t cases = 0;
    for (int kbi = 0; kbi < nkb; kbi++)
        for (size_t ci = 0; ci < sizeof combos / sizeof combos[0]; ci++) {
            const int wmode = combos[ci][0], xmode = combos[ci][1];
            const int64_t K = kbs[kbi] * (int64_t)qt->block;
            uint64_t grb, prb;
            assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
            assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
            float *x = malloc((size_t)(K * nmax) * 4), *wf = malloc((size_t)(K * R) * 4);
            float *y0 = malloc((size_t)(nmax * R) * 4), *y1 = malloc((size_t)(nmax * R) * 4);
            uint8_t *g = malloc(grb * R), *p = malloc(prb * R);
            fill_rows(gguf, g, grb * R, wmode);
            nb_repack_rows_to(gguf, planar, g, p, R, K);
            for (int64_t r = 0; r < R; r++) deq(p + r * prb, wf + r * K, K);
            fill_act(x, K * nmax, xmode);
            void *mem = aligned_alloc(64, (nb_actpack_bytes(K, nmax) + 63) & ~(size_t)63);
            void *row = malloc(nb_actpack_scratch_bytes(K));
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                const int64_t n = toks[ti];
                nb_actpack ap;
                nb_actpack_init(&ap, mem, n, K, big->act);
                for (int64_t gi = 0; gi < ap.ng; gi++) nb_actpack_group_ref(&ap, x, gi, row);
                for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                    const int64_t nr = rows[ri];
                    memset(y0, 0xff, (size_t)(nmax * R) * 4); /* NaN: a missed store shows */
                    memset(y1, 0xff, (size_t)(nmax * R) * 4);
                    big->run(p, prb, nr, &ap, y0, R);
                    small(p, prb, nr, &ap, y1, R);
                    for (int64_t t = 0; t < nmax; t++)
                        for (int64_t r = 0; r < R; r++) {
                            if (t >= n || r >= nr) { /* nothing past the batch or the rows is written */
                                if (!isnan(y1[t * R + r]))
                                    fail_msg("%s %s K=%lld n=%lld rows=%lld: wrote y[%lld][%lld]", nb_dtype_name(planar),
                                             vname(v), (long long)K, (long long)n, (long long)nr, (long long)t,
                                             (long long)r);
                                continue;
                            }
                            if (memcmp(&y0[t * R + r], &y1[t * R + r], 4) != 0)
                                fail_msg("%s %s K=%lld n=%lld rows=%lld codes %d act %d (t %lld, r %lld): small %.9g, "
                                         "16-token GEMM %.9g",
                                         nb_dtype_name(planar), vname(v), (long long)K, (long long)n, (long long)nr,
                                         wmode, xmode, (long long)t, (long long)r, (double)y1[t * R + r],
                                         (double)y0[t * R + r]);
                        }
                    cases++;
                }
                /* rows from an odd offset: the same values */
                small(p + 3 * prb, prb, R - 3, &ap, y1, R);
                for (int64_t t = 0; t < n; t++)
                    for (int64_t r = 0; r < R - 3; r++) assert_memory_equal(&y1[t * R + r], &y0[t * R + r + 3], 4);
                /* every row against the scalar reference on each token's own quantization */
                char what[96];
                snprintf(what, sizeof what, "%s %s codes %d act %d", nb_dtype_name(planar), vname(v), wmode, xmode);
                expect_near_ref(ref, p, prb, wf, x, K, R, n, 1, y0, what);
            }
            free(x); free(wf); free(y0); free(y1); free(g); free(p); free(mem); free(row);
        }
    fprintf(stderr, "  %s %s: small-batch GEMM == 16-token GEMM bit for bit, ~ scalar reference (%lld cases)\n",
            nb_dtype_name(planar), vname(v), (long long)cases);
    return cases;
}

static void check(nb_dtype gguf, nb_dtype planar) {
    int64_t cases = check_variant(gguf, planar, 1) + check_variant(gguf, planar, 2);
    if (!cases) NB_TEST_SKIP("%s: no AVX2 here, the AVX2 small-batch GEMMs cannot run", nb_dtype_name(planar));
}

static void test_q4_0r(void **state) { (void)state; check(NB_Q4_0, NB_Q4_0R); }
static void test_q4_0l(void **state) { (void)state; check(NB_Q4_0, NB_Q4_0L); }
static void test_q8_0r(void **state) { (void)state; check(NB_Q8_0, NB_Q8_0R); }
static void test_q4_kr(void **state) { (void)state; check(NB_Q4_K, NB_Q4_KR); }
static void test_q6_kr(void **state) { (void)state; check(NB_Q6_K, NB_Q6_KR); }

/* The variant of the 16-token GEMM that t runs at max_isa (0: none). */
static int gemm_variant(nb_dtype t, nb_isa max_isa) {
    const nb_rgemm *g = nb_repack_gemm(t, max_isa);
    for (int v = 1; v <= 3; v++)
        if (g && g == nb_repack_gemm_variant(t, v)) return v;
    return 0;
}

/* The small-batch GEMM is always the one of the 16-token GEMM's variant (a
 * past bug took the AVX-512 one wherever any int8 GEMM ran): per ISA cap,
 * through nb_sbatch_gemm and through the dispatch table. */
static void test_matching_variant(void **state) {
    (void)state;
    const nb_dtype ts[] = {NB_Q4_0R, NB_Q8_0R, NB_Q4_KR, NB_Q6_KR, NB_Q4_0L};
    const nb_isa isas[] = {NB_ISA_SCALAR, NB_ISA_AVX2, NB_ISA_AVX512, NB_ISA_AMX};
    int seen = 0;
    for (int ii = 0; ii < 4; ii++) {
        nb_kernel_opts o;
        nb_kernel_opts_defaults(&o);
        o.max_isa = isas[ii];
        nb_dispatch d;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        for (int i = 0; i < 5; i++) {
            int v = gemm_variant(ts[i], isas[ii]);
            nb_repack_gemm_fn want = v ? nb_sbatch_gemm_variant(ts[i], v) : NULL;
            assert_true(nb_sbatch_gemm(ts[i], isas[ii]) == want);
            if (v) assert_non_null(want);
            if (isas[ii] <= NB_ISA_AVX2) assert_true(v != 3); /* never the AVX-512 kernels at an AVX2 cap */
            /* the table's ISA is the CPU's capped at max_isa: its GEMM decides */
            int dv = 0;
            const nb_rgemm *g = nb_dispatch_rgemm(&d, ts[i]);
            for (int k = 1; k <= 3; k++)
                if (g && g == nb_repack_gemm_variant(ts[i], k)) dv = k;
            nb_repack_gemm_fn dwant = dv ? nb_sbatch_gemm_variant(ts[i], dv) : NULL;
            if (dv == 3 && nb_sbatch_wide_for_cpu(nb_cpu_get())) dwant = nb_sbatch_gemm_wide(dwant); /* sbatch.h */
            assert_true(nb_dispatch_sgemm(&d, ts[i], 8) == dwant);
            assert_true(nb_dispatch_sgemm(&d, ts[i], 512) == nb_dispatch_sgemm(&d, ts[i], 8)); /* default: all sizes */
            seen |= 1 << dv;
        }
    }
    assert_null(nb_sbatch_gemm_variant(NB_Q4_0, 1)); /* GGUF layout: none */
    assert_null(nb_sbatch_gemm_variant(NB_Q4_0R, 0));
    assert_null(nb_sbatch_gemm_variant(NB_Q4_0R, 4));
    fprintf(stderr, "  variants seen across ISA caps: avx2 %d, avx-vnni %d, avx512 %d\n", !!(seen & 2), !!(seen & 4),
            !!(seen & 8));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_0r), cmocka_unit_test(test_q4_0l), cmocka_unit_test(test_q8_0r),
                                       cmocka_unit_test(test_q4_kr), cmocka_unit_test(test_q6_kr),
                                       cmocka_unit_test(test_matching_variant)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
