/* Repacking (kernels/repack.h) of Q4_0, Q8_0, Q4_K, Q6_K, W8 and W4G*: the repacked
 * rows dequantize to exactly the GGUF blocks' values, the scalar repacked
 * dot equals the GGUF kernel's dot on the same activations (same integers;
 * float order only), and the AVX-512 kernels equal the scalar reference
 * within 1e-5 of sum |w*a|, for block counts that exercise the 4-block loop
 * and its tail; and the batched int8 GEMM equals the repacked dot per
 * (row, token). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "testutil.h"
#include "kernel_inputs.h"

static void check_type(nb_dtype gguf, nb_dtype planar) {
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref_gguf = nb_qdot_get(gguf, NB_ISA_SCALAR);
    const nb_qdot *ref_pl = nb_repack_qdot(planar, NB_ISA_SCALAR);
    const nb_qdot *simd = nb_repack_qdot(planar, NB_ISA_AVX512);
    assert_non_null(qt);
    assert_non_null(ref_gguf);
    assert_non_null(ref_pl);
    static const int64_t nblocks[] = {1, 3, 4, 5, 8, 13, 64};
    for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
        int64_t K = nblocks[bi] * qt->block, rows = 3;
        uint64_t grb, prb, arb, parb;
        assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
        assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
        if (gguf == NB_Q4_K) assert_int_equal(prb, grb / 144 * 148); /* unpacked scales: 4 more bytes */
        else assert_int_equal(grb, prb);                             /* same bytes per block */
        assert_true(nb_dtype_row_bytes(ref_gguf->act_type, (uint64_t)K, &arb));
        assert_true(nb_dtype_row_bytes(ref_pl->act_type, (uint64_t)K, &parb));
        float *w = malloc((size_t)(K * rows) * 4), *x = malloc((size_t)K * 4);
        float *d0 = malloc((size_t)K * 4), *d1 = malloc((size_t)K * 4);
        uint8_t *g = malloc(grb * rows), *p = malloc(prb * rows), *ag = malloc(arb), *ap = malloc(parb);
        for (int64_t i = 0; i < K * rows; i++) w[i] = frand();
        for (int64_t i = 0; i < K; i++) x[i] = frand() * 3;
        for (int64_t r = 0; r < rows; r++) qt->from_float(w + r * K, g + r * grb, K);
        nb_repack_rows_to(gguf, planar, g, p, rows, K);
        ref_gguf->quantize_act(x, ag, K);
        ref_pl->quantize_act(x, ap, K);
        for (int64_t r = 0; r < rows; r++) {
            qt->to_float(g + r * grb, d0, K);
            nb_repack_to_float(planar)(p + r * prb, d1, K); /* the SIMD one where available */
            for (int64_t i = 0; i < K; i++) assert_true(d0[i] == d1[i]);
            double mag = 0;
            for (int64_t i = 0; i < K; i++) mag += fabs((double)d0[i] * x[i]);
            float a, b, c = 0;
            ref_gguf->vec_dot(K, g + r * grb, ag, &a);
            ref_pl->vec_dot(K, p + r * prb, ap, &b);
            assert_true(fabs(a - b) <= 1e-5 * mag + 1e-6);
            if (simd) {
                simd->vec_dot(K, p + r * prb, ap, &c);
                assert_true(fabs(c - b) <= 1e-5 * mag + 1e-6);
                /* the prefetch distances (L1, and L2 beside it) change no result */
                static const int pfs[][2] = {{0, 0}, {64, 4096}, {2048, 64}, {8192, NB_PREFETCH_MAX}};
                for (size_t v = 0; v < sizeof pfs / sizeof *pfs; v++) {
                    float e;
                    nb_prefetch_bytes = pfs[v][0];
                    nb_prefetch_l2_bytes = pfs[v][1];
                    simd->vec_dot(K, p + r * prb, ap, &e);
                    assert_true(e == c);
                }
                nb_prefetch_bytes = NB_PREFETCH_DEFAULT;
                nb_prefetch_l2_bytes = NB_PREFETCH_L2_DEFAULT;
            }
        }
        free(w); free(x); free(d0); free(d1); free(g); free(p); free(ag); free(ap);
    }
    fprintf(stderr, "  %s -> %s: dequant exact, dots agree%s\n", nb_dtype_name(gguf), nb_dtype_name(planar),
            simd && simd != ref_pl ? " (scalar and AVX-512)" : " (scalar only: no AVX-512 VNNI here)");
}

/* The batched int8 GEMM against the scalar planar dot of each (row, token)
 * on the same quantized activations: odd row and token counts, partial
 * token groups. */
static void check_gemm(nb_dtype gguf, nb_dtype planar) {
    const nb_rgemm *gemm = nb_repack_gemm(planar, NB_ISA_AVX512);
    if (!gemm) {
        NB_TEST_SKIP("no AVX2 here, no int8 GEMM");
    }
    const nb_qtype *qt = nb_qtype_get(gguf);
    const nb_qdot *ref = nb_repack_qdot(planar, NB_ISA_SCALAR);
    static const int64_t shapes[][3] = {{64, 5, 21}, {96, 4, 16}, {32, 3, 1}, {256, 7, 37}, {768, 2, 33}, {160, 6, 35}, {288, 5, 49}}; /* K, rows, tokens; 160 and 288: whole 4-block groups and a tail block */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t K = shapes[si][0], R = shapes[si][1], n = shapes[si][2];
        if (K % (int64_t)qt->block) continue;
        uint64_t grb, prb;
        assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
        assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
        float *w = malloc((size_t)(K * R) * 4), *x = malloc((size_t)(K * n) * 4), *y = malloc((size_t)(n * R) * 4);
        uint8_t *g = malloc(grb * R), *p = malloc(prb * R);
        for (int64_t i = 0; i < K * R; i++) w[i] = frand();
        for (int64_t i = 0; i < K * n; i++) x[i] = frand() * 2;
        for (int64_t r = 0; r < R; r++) qt->from_float(w + r * K, g + r * grb, K);
        nb_repack_rows_to(gguf, planar, g, p, R, K);
        void *mem = aligned_alloc(64, (nb_actpack_bytes(K, n) + 63) & ~(size_t)63);
        void *row = malloc(nb_actpack_scratch_bytes(K));
        nb_actpack ap;
        nb_actpack_init(&ap, mem, n, K, gemm->act);
        for (int64_t gi = 0; gi < ap.ng; gi++) nb_actpack_group(&ap, x, gi, row);
        gemm->run(p, prb, R, &ap, y, R);
        expect_near_ref(ref, p, prb, w, x, K, R, n, 1, y, nb_dtype_name(planar));
        free(w); free(x); free(y); free(g); free(p); free(mem); free(row);
    }
    fprintf(stderr, "  %s int8 GEMM equals the planar dots\n", nb_dtype_name(planar));
}

/* The AVX-512 activation pack is byte-identical to the scalar one, for both
 * quantizations, with partial token groups, an all-zero token and a block
 * whose largest magnitude occurs with both signs (Q8_K takes the first). */
static void test_actpack_simd(void **state) {
    (void)state;
    if (nb_cpu_isa() < NB_ISA_AVX512) {
        NB_TEST_SKIP("no AVX-512 here");
    }
    const int64_t K = 512, n = 21;
    float *x = malloc((size_t)(K * n) * sizeof *x);
    for (int64_t i = 0; i < K * n; i++) x[i] = frand() * 4;
    for (int64_t i = 0; i < K; i++) x[3 * K + i] = 0; /* token 3: zeros */
    x[5 * K + 7] = -9.5f;                            /* token 5: -9.5 first, then +9.5 */
    x[5 * K + 100] = 9.5f;
    x[6 * K + 2] = 9.5f;                             /* token 6: the other way round */
    x[6 * K + 40] = -9.5f;
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
            nb_actpack_group_avx512(&p1, x, g);
        }
        assert_memory_equal(m0, m1, nb_actpack_bytes(K, n));
    }
    fprintf(stderr, "  AVX-512 activation pack == scalar pack (Q8_0P and Q8_K)\n");
    free(x); free(m0); free(m1); free(row);
}

/* The vectorised row quantizers of the decode dots (Q8_0P, Q8_KP) are
 * byte-identical to the scalar ones: random blocks, an all-zero block,
 * products that fall exactly on .5 (ties to even), a block whose largest
 * magnitude occurs with both signs (Q8_K keeps the first), tiny and huge
 * values. */
static void test_quantize_act_simd(void **state) {
    (void)state;
    const int64_t K = 2048;
    float *x = malloc((size_t)K * sizeof *x);
    for (int64_t i = 0; i < K; i++) x[i] = frand() * 3;
    for (int64_t i = 256; i < 512; i++) x[i] = 0;                      /* a zero super-block (Q8_K: all zeros) */
    for (int64_t i = 512; i < 544; i++) x[i] = (float)(i - 528) * 0.5f; /* amax 8: x*127/8 on .5 steps */
    x[544 + 3] = -7.25f, x[544 + 20] = 7.25f;                          /* both signs, minus first */
    x[800] = 7.25f, x[900] = -7.25f;                                   /* both signs, plus first */
    for (int64_t i = 1024; i < 1056; i++) x[i] = 1e-30f * (float)(i - 1040);
    for (int64_t i = 1056; i < 1088; i++) x[i] = 1e30f * frand();
    typedef void (*qfn)(const float *, void *, int64_t);
    struct { const char *name; nb_dtype t; qfn ref, simd; bool ok; } c[] = {
        {"Q8_0P avx512", NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q8_0p_quantize_avx512, nb_cpu_isa() >= NB_ISA_AVX512},
        {"Q8_KP avx512", NB_Q8_KP, nb_q8_kp_quantize_ref, nb_q8_kp_quantize_avx512, nb_cpu_isa() >= NB_ISA_AVX512},
        {"Q8_0P avx2", NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q8_0p_quantize_avx2, nb_cpu_isa() >= NB_ISA_AVX2},
        {"Q8_KP avx2", NB_Q8_KP, nb_q8_kp_quantize_ref, nb_q8_kp_quantize_avx2, nb_cpu_isa() >= NB_ISA_AVX2},
        {"Q8_0PL avx2", NB_Q8_0PL, nb_q8_0pl_quantize_ref, nb_q8_0pl_quantize_avx2, nb_cpu_isa() >= NB_ISA_AVX2},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        if (!c[i].ok) continue;
        uint64_t rb;
        assert_true(nb_dtype_row_bytes(c[i].t, (uint64_t)K, &rb));
        uint8_t *a = malloc(rb), *b = malloc(rb);
        memset(a, 0x55, rb);
        memset(b, 0xaa, rb);
        c[i].ref(x, a, K);
        c[i].simd(x, b, K);
        assert_memory_equal(a, b, rb);
        fprintf(stderr, "  %s quantizer == scalar\n", c[i].name);
        free(a); free(b);
        ran++;
    }
    free(x);
    if (!ran) NB_TEST_SKIP("no AVX2 here");
}

/* The rows-in-lanes kernels (vec_dot_rows, kernels/x86/rows_avx512.c:
 * Q4_0R, W4G*R, Q4_KR, Q6_KR) against the scalar dot of every (row, token): row counts below, at and
 * past a 16-row panel (12: a panel whose rows 8-15 are part there, part
 * not), token counts across the K-quants' 8-token passes and 64-token
 * tiles and the 4-bit kernels' 32-token chunks, K with no whole 4-block
 * group, with tail blocks and with several segments; nothing written past
 * the rows asked for. */
static void check_rows(nb_dtype gguf, nb_dtype planar, const int64_t *Ks, size_t nK) {
    const nb_qdot *simd = nb_repack_qdot(planar, NB_ISA_AVX512), *ref = nb_repack_qdot(planar, NB_ISA_SCALAR);
    static const int64_t Rs[] = {1, 5, 12, 16, 17, 33}, Ts[] = {1, 3, 8, 9, 17, 64, 70};
    const nb_qtype *qt = nb_qtype_get(gguf);
    for (size_t ki = 0; ki < nK; ki++)
        for (size_t ri = 0; ri < sizeof Rs / sizeof *Rs; ri++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
                const int64_t K = Ks[ki], R = Rs[ri], T = Ts[ti], ldy = R + 3;
                if (K > 4096 && (R > 17 || T > 9)) continue; /* the long rows once per shape class */
                uint64_t grb, rb, arb;
                assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
                assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &rb));
                assert_true(nb_dtype_row_bytes(simd->act_type, (uint64_t)K, &arb));
                float *w = malloc((size_t)(K * R) * 4), *x = malloc((size_t)(K * T) * 4), *y = malloc((size_t)(T * ldy) * 4);
                uint8_t *g = malloc(grb * R), *p = malloc(rb * R), *a = malloc(arb * T);
                for (int64_t i = 0; i < K * R; i++) w[i] = ki == 0 && ri == 1 ? 1.0f : frand(); /* one shape: all-max weights */
                for (int64_t i = 0; i < K * T; i++) x[i] = i % 31 == 0 ? 50.0f : frand() * 2;
                for (int64_t r = 0; r < R; r++) qt->from_float(w + r * K, g + r * grb, K);
                nb_repack_rows_to(gguf, planar, g, p, R, K);
                for (int64_t t = 0; t < T; t++) simd->quantize_act(x + t * K, a + t * arb, K);
                for (int64_t i = 0; i < T * ldy; i++) y[i] = 12345.0f;
                simd->vec_dot_rows(K, R, p, rb, T, a, arb, y, ldy);
                for (int64_t t = 0; t < T; t++) {
                    for (int64_t r = 0; r < R; r++) {
                        float want;
                        ref->vec_dot(K, p + r * rb, a + t * arb, &want);
                        double mag = 0;
                        for (int64_t i = 0; i < K; i++) mag += fabs((double)w[r * K + i] * x[t * K + i]);
                        if (!(fabs(y[t * ldy + r] - want) <= 1e-5 * mag + 1e-5))
                            fail_msg("%s K=%lld R=%lld T=%lld (t %lld, r %lld): %g, scalar %g", nb_dtype_name(planar),
                                     (long long)K, (long long)R, (long long)T, (long long)t, (long long)r,
                                     (double)y[t * ldy + r], (double)want);
                    }
                    for (int64_t r = R; r < ldy; r++) assert_true(y[t * ldy + r] == 12345.0f);
                }
                free(w); free(x); free(y); free(g); free(p); free(a);
            }
    fprintf(stderr, "  %s rows-in-lanes kernel == scalar dots\n", nb_dtype_name(planar));
}

static void test_rows(void **state) {
    (void)state;
    const nb_qdot *simd = nb_repack_qdot(NB_Q4_0R, NB_ISA_AVX512);
    if (!simd || !simd->vec_dot_rows) {
        NB_TEST_SKIP("no AVX-512 VNNI here: no rows-in-lanes kernel");
    }
    static const int64_t k0[] = {128, 32, 96, 160, 2080, 8192 + 64}, kk[] = {256, 512, 2304, 4352};
    check_rows(NB_Q4_0, NB_Q4_0R, k0, sizeof k0 / sizeof *k0);
    check_rows(NB_Q4_K, NB_Q4_KR, kk, sizeof kk / sizeof *kk); /* 4352: one super-block past two segments */
    check_rows(NB_Q6_K, NB_Q6_KR, kk, sizeof kk / sizeof *kk);
    /* W4G*R: whole groups, with and without Q4_0R's tail blocks (W4G32/64), across segments */
    static const int64_t k64[] = {128, 64, 192, 320, 2112, 8256}, k128[] = {128, 256, 384, 2176, 8320};
    check_rows(NB_W4G32, NB_W4G32R, k0, sizeof k0 / sizeof *k0);
    check_rows(NB_W4G64, NB_W4G64R, k64, sizeof k64 / sizeof *k64);
    check_rows(NB_W4G128, NB_W4G128R, k128, sizeof k128 / sizeof *k128);
    check_rows(NB_W4G128S, NB_W4G128R, k128, 2);
}

/* The small-batch and multi-row kernels (vec_dot_mxn: up to 4 rows x 4
 * tokens, each weight unpacked once for all tokens; one token's rows read
 * in lockstep, decode's several streams per thread) equal vec_dot per
 * (row, token) exactly - same operations in the same order - for block
 * counts with and without the kernels' tails, and extreme codes
 * (activations at +-127 from a one-hot max, all-max weights), in every
 * variant this CPU runs (AVX2, AVX-VNNI, AVX-512 VNNI). Returns how many
 * variants ran. */
static int check_mxn(nb_dtype gguf, nb_dtype planar) {
    const nb_qtype *qt = nb_qtype_get(gguf);
    int ran = 0;
    for (int v = 1; v <= 3; v++) {
        const nb_qdot *simd = nb_repack_qdot_variant(planar, v);
        if (!simd || !simd->vec_dot_mxn) continue;
        ran++;
        static const int64_t nblocks[] = {1, 4, 7, 9, 13, 64};
        for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
            int64_t K = nblocks[bi] * (int64_t)qt->block;
            const int rows = 4, toks = 4;
            uint64_t grb, prb, arb;
            assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
            assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
            assert_true(nb_dtype_row_bytes(simd->act_type, (uint64_t)K, &arb));
            float *w = malloc((size_t)(K * rows) * 4), *x = malloc((size_t)(K * toks) * 4);
            uint8_t *g = malloc(grb * rows), *p = malloc(prb * rows), *a = malloc(arb * toks);
            for (int64_t i = 0; i < K * rows; i++) w[i] = bi == 1 ? 1.0f : frand(); /* bi 1: every weight the max */
            for (int64_t i = 0; i < K * toks; i++) x[i] = (i % 29 == 0) ? 100.0f : frand();
            for (int r = 0; r < rows; r++) qt->from_float(w + r * K, g + r * grb, K);
            nb_repack_rows_to(gguf, planar, g, p, rows, K);
            for (int t = 0; t < toks; t++) simd->quantize_act(x + t * K, a + t * arb, K);
            for (int m = 1; m <= rows; m++)
                for (int nn = 1; nn <= toks; nn++) {
                    float out[16];
                    simd->vec_dot_mxn(K, m, nn, p, prb, a, arb, out, 4);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < nn; j++) {
                            float want;
                            simd->vec_dot(K, p + i * prb, a + j * arb, &want);
                            if (out[i * 4 + j] != want)
                                fail_msg("%s %s K=%lld m=%d n=%d (%d,%d): %g vs %g", nb_dtype_name(planar),
                                         simd->isa, (long long)K, m, nn, i, j, (double)out[i * 4 + j], (double)want);
                        }
                }
            free(w); free(x); free(g); free(p); free(a);
        }
    }
    fprintf(stderr, "  %s: vec_dot_mxn == vec_dot in %d variant(s)\n", nb_dtype_name(planar), ran);
    return ran;
}

static void test_mxn(void **state) {
    (void)state;
    if (!nb_repack_qdot_variant(NB_Q4_0R, 1)) NB_TEST_SKIP("no AVX2 here: no multi-row dots"); /* a skip, not a pass */
    int ran = check_mxn(NB_Q4_0, NB_Q4_0R) + check_mxn(NB_Q8_0, NB_Q8_0R) + check_mxn(NB_Q4_K, NB_Q4_KR) +
              check_mxn(NB_Q6_K, NB_Q6_KR);
    for (size_t i = 0; i < NB_TEST_OWN_TYPES; i++) ran += check_mxn(nb_test_own_types[i][0], nb_test_own_types[i][1]);
    assert_true(ran >= 4 + (int)NB_TEST_OWN_TYPES); /* every type in the AVX2 variant at least */
}

static void test_gemm_q4_0(void **state) { (void)state; check_gemm(NB_Q4_0, NB_Q4_0R); }
static void test_gemm_q8_0(void **state) { (void)state; check_gemm(NB_Q8_0, NB_Q8_0R); }

static void test_gemm_q4_k(void **state) { (void)state; check_gemm(NB_Q4_K, NB_Q4_KR); }
static void test_gemm_q6_k(void **state) { (void)state; check_gemm(NB_Q6_K, NB_Q6_KR); }
static void test_gemm_w8_w4g(void **state) {
    (void)state;
    for (size_t i = 0; i < NB_TEST_OWN_TYPES; i++) check_gemm(nb_test_own_types[i][0], nb_test_own_types[i][1]);
}

/* The lane-order forms (Q4_0L, W4G*L): dequantization and dots as the
 * other layouts (check_type, check_mxn; their GEMMs in test_repack_avx2),
 * and each SIMD variant's dot equal to the same variant's over Q4_0R /
 * W4G*R bit for bit where the blocks are whole 8-block steps plus at most 3
 * (the integers are the same; a 4-block step splits each block's sum over
 * two lanes differently in the two orders, so its float sum may differ). */
static void test_lanes(void **state) {
    (void)state;
    for (size_t i = 0; i < NB_TEST_LANE_TYPES; i++) check_type(nb_test_lane_types[i][0], nb_test_lane_types[i][1]);
    int ran = 0;
    for (size_t i = 0; i < NB_TEST_LANE_TYPES; i++) {
        const nb_dtype gguf = nb_test_lane_types[i][0], lanes = nb_test_lane_types[i][1];
        const nb_dtype planar = nb_repack_layout(gguf);
        assert_int_equal(nb_repack_lanes(planar), lanes);
        ran += check_mxn(gguf, lanes);
        const nb_qtype *qt = nb_qtype_get(gguf);
        for (int v = 1; v <= 2; v++) {
            const nb_qdot *kr = nb_repack_qdot_variant(planar, v), *kl = nb_repack_qdot_variant(lanes, v);
            if (!kr) continue;
            assert_non_null(kl);
            static const int64_t nblocks[] = {2, 3, 8, 11, 16, 66, 72};
            for (size_t bi = 0; bi < sizeof nblocks / sizeof *nblocks; bi++) {
                const int64_t K = nblocks[bi] * 32, rows = 3;
                if (K % (int64_t)qt->block) continue;
                uint64_t grb, prb, arb;
                assert_true(nb_dtype_row_bytes(gguf, (uint64_t)K, &grb));
                assert_true(nb_dtype_row_bytes(planar, (uint64_t)K, &prb));
                assert_true(nb_dtype_row_bytes(NB_Q8_0P, (uint64_t)K, &arb));
                float *w = malloc((size_t)(K * rows) * 4), *x = malloc((size_t)K * 4);
                uint8_t *g = malloc(grb * rows), *pr = malloc(prb * rows), *pl = malloc(prb * rows);
                uint8_t *ar = malloc(arb), *al = malloc(arb);
                for (int64_t j = 0; j < K * rows; j++) w[j] = bi == 3 ? 1.0f : frand(); /* 11 blocks: all max */
                for (int64_t j = 0; j < K; j++) x[j] = j % 31 == 0 ? 50.0f : frand();
                for (int64_t r = 0; r < rows; r++) qt->from_float(w + r * K, g + r * grb, K);
                nb_repack_rows_to(gguf, planar, g, pr, rows, K);
                nb_repack_rows_to(gguf, lanes, g, pl, rows, K);
                kr->quantize_act(x, ar, K);
                kl->quantize_act(x, al, K);
                for (int64_t r = 0; r < rows; r++) {
                    float a, b;
                    kr->vec_dot(K, pr + r * prb, ar, &a);
                    kl->vec_dot(K, pl + r * prb, al, &b);
                    if (a != b)
                        fail_msg("%s %s K=%lld row %lld: %.9g vs %s %.9g", nb_dtype_name(lanes), kl->isa, (long long)K,
                                 (long long)r, (double)b, nb_dtype_name(planar), (double)a);
                }
                free(w); free(x); free(g); free(pr); free(pl); free(ar); free(al);
            }
            ran++;
        }
    }
    if (!ran) NB_TEST_SKIP("no AVX2 here: the lane-order kernels cannot run");
    fprintf(stderr, "  Q4_0L, W4G*L: the same results as Q4_0R, W4G*R\n");
}

static void test_q4_0(void **state) { (void)state; check_type(NB_Q4_0, NB_Q4_0R); }
static void test_q8_0(void **state) { (void)state; check_type(NB_Q8_0, NB_Q8_0R); }
static void test_w8(void **state) {
    (void)state;
    assert_int_equal(nb_repack_layout(NB_W8), NB_W8R);
    check_type(NB_W8, NB_W8R);
}
static void test_q4_k(void **state) { (void)state; check_type(NB_Q4_K, NB_Q4_KR); }
static void test_q6_k(void **state) { (void)state; check_type(NB_Q6_K, NB_Q6_KR); }
/* W4G* (asymmetric and symmetric) load as W4G*R: nb_repack_layout says so */
static void test_w4g(void **state) {
    (void)state;
    static const nb_dtype from[] = {NB_W4G32, NB_W4G64, NB_W4G128, NB_W4G32S, NB_W4G64S, NB_W4G128S};
    for (size_t i = 0; i < sizeof from / sizeof *from; i++) {
        nb_dtype to = nb_repack_layout(from[i]);
        assert_int_equal(to, NB_W4G32R + (int)(i % 3));
        check_type(from[i], to);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_0),      cmocka_unit_test(test_q8_0),
                                       cmocka_unit_test(test_q4_k),      cmocka_unit_test(test_q6_k),
                                       cmocka_unit_test(test_w8),        cmocka_unit_test(test_w4g),
                                       cmocka_unit_test(test_gemm_q4_0), cmocka_unit_test(test_gemm_q8_0),
                                       cmocka_unit_test(test_gemm_q4_k), cmocka_unit_test(test_gemm_q6_k),
                                       cmocka_unit_test(test_gemm_w8_w4g),
                                       cmocka_unit_test(test_actpack_simd), cmocka_unit_test(test_quantize_act_simd), cmocka_unit_test(test_rows),
                                       cmocka_unit_test(test_mxn), cmocka_unit_test(test_lanes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
