/* The AVX2 kernels of the repacked types (kernels/x86/repack_avx2_impl.h),
 * both variants - vpmaddubsw (AVX2) and 256-bit vpdpbusd (AVX-VNNI), each
 * where this CPU runs it - against the scalar references of repack.c:
 *  - decode dots (and the AVX-512 ones) equal nb_repack_qdot_variant(t, 0) within 1e-5 of
 *    sum |w*a|, for block counts with and without the 4-block tail, on
 *    random codes (every byte value, so Q8_0's -128 and Q4's 0/15 occur),
 *    all-extreme codes, and activations at +-127 (a one-hot max) or all
 *    at the max (the Q4_KR dot's int16 sums at their bound);
 *  - int8 GEMMs (and the AVX-512 VNNI ones) equal the scalar dot per (row, token) on the same
 *    quantized activations, for odd rows, partial token groups and K
 *    spanning 1..several blocks;
 *  - the AVX2 activation pack is byte-identical to the scalar pack. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "base/blocks.h"
#include "kernel_inputs.h"
#include "testutil.h"

static void fill_act(float *x, int64_t n, int mode) {
    for (int64_t i = 0; i < n; i++) x[i] = frand() * 3;
    if (mode == 1)
        for (int64_t i = 0; i < n; i += 32) x[i] = (i / 32) % 2 ? 100.0f : -100.0f; /* one-hot max: +-127 */
    if (mode == 2) /* all at the max (Q8_K -128, Q8_0 -127): with all-15 weights every lane's sum at its int16 bound */
        for (int64_t i = 0; i < n; i++) x[i] = -1.0f;
}

static const char *vname(int v) { return v == 1 ? "avx2" : v == 2 ? "avx-vnni" : v == 3 ? "avx512" : "?"; }

static void check_dots(nb_dtype gguf, nb_dtype planar) {
    const nb_qtype *qt = nb_qtype_get(gguf);
    const bool lanes = planar == NB_Q4_0L || planar == NB_W4G32L || planar == NB_W4G64L || planar == NB_W4G128L;
    const nb_qdot *ref = nb_repack_qdot_variant(planar, 0);
    assert_non_null(qt);
    assert_non_null(ref);
    int ran = 0;
    for (int v = 1; v <= 3; v++) { /* and the AVX-512 dot on the same extreme codes */
        const nb_qdot *k = nb_repack_qdot_variant(planar, v);
        if (!k) {
            fprintf(stderr, "  %s dot %s: not on this CPU, skipped\n", nb_dtype_name(planar), vname(v));
            continue;
        }
        ran++;
        static const int64_t nblocks[] = {1, 2, 3, 4, 5, 7, 8, 13, 64};
        for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++)
            for (int wm = 0; wm < 3; wm++)
                for (int am = 0; am < 3; am++) {
                    /* all-max activations are for the K dots' and the lane-order
                     * dots' int16 bounds; in the
                     * 8-bit rows' offset form (q+128, minus 128*sum) they cost
                     * float cancellation just past the 1e-5 tolerance */
                    if (am == 2 && gguf != NB_Q4_K && gguf != NB_Q6_K && !lanes) continue;
                    int64_t K = nblocks[bi] * qt->block, rows = 3;
                    uint64_t grb, prb, arb;
                    assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
                    assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
                    assert_true(nb_dtype_row_bytes(ref->act_type, (uint64_t)K, &arb));
                    uint8_t *g = malloc(grb * rows), *p = malloc(prb * rows), *a = malloc(arb);
                    float *x = malloc((size_t)K * 4), *dq = malloc((size_t)K * 4);
                    fill_rows(gguf, g, grb * rows, wm);
                    fill_act(x, K, am);
                    nb_repack_rows_to(gguf, planar, g, p, rows, K);
                    assert_ptr_equal(k->act_type, ref->act_type);
                    ref->quantize_act(x, a, K);
                    for (int64_t r = 0; r < rows; r++) {
                        qt->to_float(g + r * grb, dq, K);
                        double mag = 0;
                        for (int64_t i = 0; i < K; i++) mag += fabs((double)dq[i] * x[i]);
                        float want, got;
                        ref->vec_dot(K, p + r * prb, a, &want);
                        k->vec_dot(K, p + r * prb, a, &got);
                        if (!(fabs(got - want) <= 1e-5 * mag + 1e-5))
                            fail_msg("%s %s K=%lld codes %d act %d row %lld: %g vs scalar %g", nb_dtype_name(planar),
                                     vname(v), (long long)K, wm, am, (long long)r, (double)got, (double)want);
                        /* with a second, L2 prefetch distance: the same result */
                        float again;
                        nb_prefetch_l2_bytes = 4096;
                        k->vec_dot(K, p + r * prb, a, &again);
                        nb_prefetch_l2_bytes = NB_PREFETCH_L2_DEFAULT;
                        assert_true(again == got);
                    }
                    free(g); free(p); free(a); free(x); free(dq);
                }
        fprintf(stderr, "  %s dot %s == scalar\n", nb_dtype_name(planar), vname(v));
    }
    if (!ran) NB_TEST_SKIP("no AVX2 here");
}

static void check_gemm(nb_dtype gguf, nb_dtype planar) {
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref = nb_repack_qdot_variant(planar, 0);
    for (int v = 1; v <= 3; v++) { /* and the AVX-512 VNNI GEMM on the same extreme codes */
        const nb_rgemm *gemm = nb_repack_gemm_variant(planar, v);
        if (!gemm) {
            fprintf(stderr, "  %s GEMM %s: not on this CPU, skipped\n", nb_dtype_name(planar), vname(v));
            continue;
        }
        /* K, rows, tokens */
        static const int64_t shapes[][3] = {{32, 3, 1},  {64, 5, 21},  {96, 4, 16}, {160, 1, 17},
                                            {256, 7, 37}, {512, 2, 15}, {768, 2, 33}};
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int wm = 0; wm < 3; wm++) {
                int64_t K = shapes[si][0], R = shapes[si][1], n = shapes[si][2];
                if (K % (int64_t)qt->block) continue;
                uint64_t grb, prb, arb;
                assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
                assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
                assert_true(nb_dtype_row_bytes(ref->act_type, (uint64_t)K, &arb));
                float *x = malloc((size_t)(K * n) * 4), *y = malloc((size_t)(n * R) * 4), *dq = malloc((size_t)K * 4);
                uint8_t *g = malloc(grb * R), *p = malloc(prb * R), *a = malloc(arb);
                fill_rows(gguf, g, grb * R, wm);
                for (int64_t t = 0; t < n; t++) fill_act(x + t * K, K, (int)(t % 2));
                nb_repack_rows_to(gguf, planar, g, p, R, K);
                void *mem = aligned_alloc(64, (nb_actpack_bytes(K, n) + 63) & ~(size_t)63);
                void *row = malloc(nb_actpack_scratch_bytes(K));
                nb_actpack ap;
                nb_actpack_init(&ap, mem, n, K, gemm->act);
                for (int64_t gi = 0; gi < ap.ng; gi++) nb_actpack_group_ref(&ap, x, gi, row);
                for (int64_t i = 0; i < n * R; i++) y[i] = NAN;
                gemm->run(p, prb, R, &ap, y, R);
                for (int64_t t = 0; t < n; t++) {
                    ref->quantize_act(x + t * K, a, K);
                    for (int64_t r = 0; r < R; r++) {
                        float want;
                        ref->vec_dot(K, p + r * prb, a, &want);
                        qt->to_float(g + r * grb, dq, K);
                        double mag = 0;
                        for (int64_t i = 0; i < K; i++) mag += fabs((double)dq[i] * x[t * K + i]);
                        if (!(fabs(y[t * R + r] - want) <= 1e-5 * mag + 1e-5))
                            fail_msg("%s GEMM %s K=%lld R=%lld n=%lld codes %d: t=%lld r=%lld %g vs scalar %g",
                                     nb_dtype_name(planar), vname(v), (long long)K, (long long)R, (long long)n, wm,
                                     (long long)t, (long long)r, (double)y[t * R + r], (double)want);
                    }
                }
                free(x); free(y); free(dq); free(g); free(p); free(a); free(mem); free(row);
            }
        fprintf(stderr, "  %s GEMM %s == scalar dots\n", nb_dtype_name(planar), vname(v));
    }
}

static void test_actpack_avx2(void **state) {
    (void)state;
    if (!nb_repack_qdot_variant(NB_Q4_0R, 1)) {
        NB_TEST_SKIP("no AVX2 here");
    }
    const int64_t K = 512, n = 21;
    float *x = malloc((size_t)(K * n) * sizeof *x);
    for (int64_t i = 0; i < K * n; i++) x[i] = frand() * 4;
    for (int64_t i = 0; i < K; i++) x[3 * K + i] = 0; /* token 3: zeros */
    x[5 * K + 7] = -9.5f;                            /* token 5: -9.5 first, then +9.5 */
    x[5 * K + 100] = 9.5f;
    x[6 * K + 2] = 9.5f;                             /* token 6: the other way round */
    x[6 * K + 40] = -9.5f;
    x[7 * K + 33] = 1e30f;                           /* token 7: one huge value */
    size_t bytes = (nb_actpack_bytes(K, n) + 63) & ~(size_t)63;
    void *m0 = aligned_alloc(64, bytes), *m1 = aligned_alloc(64, bytes), *row = malloc(nb_actpack_scratch_bytes(K));
    const nb_dtype acts[] = {NB_Q8_0P, NB_Q8_K};
    for (int a = 0; a < 2; a++) {
        nb_actpack p0, p1;
        memset(m0, 0x55, bytes);
        memset(m1, 0xaa, bytes);
        nb_actpack_init(&p0, m0, n, K, acts[a]);
        nb_actpack_init(&p1, m1, n, K, acts[a]);
        for (int64_t g = 0; g < p0.ng; g++) {
            nb_actpack_group_ref(&p0, x, g, row);
            nb_actpack_group_avx2(&p1, x, g);
        }
        assert_memory_equal(m0, m1, nb_actpack_bytes(K, n));
    }
    fprintf(stderr, "  AVX2 activation pack == scalar pack (Q8_0P and Q8_K)\n");
    free(x); free(m0); free(m1); free(row);
}

static void test_dots(void **state) {
    (void)state;
    check_dots(NB_Q4_0, NB_Q4_0R);
    check_dots(NB_Q8_0, NB_Q8_0R);
    check_dots(NB_Q4_K, NB_Q4_KR);
    check_dots(NB_Q6_K, NB_Q6_KR);
    for (size_t i = 0; i < NB_TEST_OWN_TYPES; i++) check_dots(nb_test_own_types[i][0], nb_test_own_types[i][1]);
    for (size_t i = 0; i < NB_TEST_LANE_TYPES; i++) check_dots(nb_test_lane_types[i][0], nb_test_lane_types[i][1]);
}

static void test_gemm_q4_0(void **state) { (void)state; check_gemm(NB_Q4_0, NB_Q4_0R); }
static void test_gemm_q8_0(void **state) { (void)state; check_gemm(NB_Q8_0, NB_Q8_0R); }
static void test_gemm_q4_k(void **state) { (void)state; check_gemm(NB_Q4_K, NB_Q4_KR); }
static void test_gemm_q6_k(void **state) { (void)state; check_gemm(NB_Q6_K, NB_Q6_KR); }
static void test_gemm_w8_w4g(void **state) {
    (void)state;
    for (size_t i = 0; i < NB_TEST_OWN_TYPES; i++) check_gemm(nb_test_own_types[i][0], nb_test_own_types[i][1]);
    for (size_t i = 0; i < NB_TEST_LANE_TYPES; i++) check_gemm(nb_test_lane_types[i][0], nb_test_lane_types[i][1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dots),       cmocka_unit_test(test_gemm_q4_0),
                                       cmocka_unit_test(test_gemm_q8_0),  cmocka_unit_test(test_gemm_q4_k),
                                       cmocka_unit_test(test_gemm_q6_k),  cmocka_unit_test(test_gemm_w8_w4g),
                                       cmocka_unit_test(test_actpack_avx2)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
