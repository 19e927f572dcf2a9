/* Tests of the quantized dot products (kernels/qdot.h):
 *  - the scalar reference equals the float dot of the dequantized weight and
 *    activation rows (to_float of both; independent of the kernels), within
 *    float rounding: |ref - exact| <= 2e-6 * sum|w_i*a_i|;
 *  - every compiled ISA that this CPU runs equals the reference within
 *    1e-5 * sum|w_i*a_i| (only float summation order differs), for odd block
 *    counts and every group size;
 *  - Q2_K / Q3_K at their extreme codes and +-127 activations: every ISA
 *    gives exactly the integer dot of the dequantized rows;
 *  - the small-batch forms (vec_dot_mxn, up to 4 rows x 4 tokens) equal
 *    vec_dot per (row, token) exactly, extreme codes included;
 *  - dispatch: nb_qdot_get never returns an ISA above the cap, act types match
 *    the registry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/cpu.h"
#include "base/half.h"
#include "kernels/qdot.h"
#include "base/blocks.h"
#include "quant/qtypes.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void act_to_float(nb_dtype act, const void *q, const float *x, float *out, int64_t n) {
    if (act == NB_F32) {
        memcpy(out, x, (size_t)n * sizeof *out);
        return;
    }
    nb_qtype_get(act)->to_float(q, out, n);
}

static void test_dispatch(void **state) {
    (void)state;
    int n;
    const nb_qtype *all = nb_qtype_list(&n);
    for (int i = 0; i < n; i++) {
        const nb_qdot *q = nb_qdot_get(all[i].type, NB_ISA_AMX);
        if (all[i].act_only) {
            assert_null(q);
            continue;
        }
        assert_non_null(q);
        assert_int_equal(q->act_type, all[i].act_type);
        const nb_qdot *s = nb_qdot_get(all[i].type, NB_ISA_SCALAR);
        assert_non_null(s);
        assert_string_equal(s->isa, "scalar");
    }
    assert_null(nb_qdot_get(NB_F32, NB_ISA_AVX2));
    assert_null(nb_qdot_get(NB_Q8_K, NB_ISA_AVX2));
    printf("  cpu: %s; best isa for Q4_K: %s\n", nb_cpu_describe(), nb_qdot_get(NB_Q4_K, nb_cpu_isa())->isa);
}

static void run_type(const nb_qtype *qt, int *n_checked) {
    const int nblocks[] = {1, 3, 7, 13};
    for (size_t b = 0; b < sizeof nblocks / sizeof nblocks[0]; b++) {
        int64_t n = (int64_t)qt->block * nblocks[b];
        if (n % 256 && qt->act_type == NB_Q8_K) continue;
        float *w = malloc(n * sizeof *w), *x = malloc(n * sizeof *x);
        float *wd = malloc(n * sizeof *wd), *xd = malloc(n * sizeof *xd);
        uint8_t *wq = malloc(n * 2 + 64), *xq = malloc(n * 4 + 1024);
        for (int rep = 0; rep < 3; rep++) {
            for (int64_t i = 0; i < n; i++) {
                w[i] = gauss() * 0.1f;
                x[i] = gauss() * (rep == 2 ? 10.0f : 1.0f) + (rep == 1 ? 0.5f : 0.0f);
            }
            w[(rep * 7) % n] = 0.9f;
            qt->from_float(w, wq, n);
            qt->to_float(wq, wd, n);
            const nb_qdot *ref = nb_qdot_get_exact(qt->type, NB_ISA_SCALAR);
            assert_non_null(ref);
            ref->quantize_act(x, xq, n);
            act_to_float(ref->act_type, xq, x, xd, n);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)wd[i] * xd[i];
                mag += fabs((double)wd[i] * xd[i]);
            }
            float r;
            ref->vec_dot(n, wq, xq, &r);
            if (!(fabs(r - exact) <= 2e-6 * mag + 1e-30)) {
                fail_msg("%s n=%lld: reference %.9g vs dequantized dot %.9g (mag %.3g)", qt->name,
                         (long long)n, r, exact, mag);
            }
            for (int isa = NB_ISA_AVX2; isa <= NB_ISA_AVX512; isa++) {
                const nb_qdot *k = nb_qdot_get_exact(qt->type, (nb_isa)isa);
                if (!k) continue;
                assert_int_equal(k->act_type, ref->act_type);
                float s;
                k->vec_dot(n, wq, xq, &s);
                if (!(fabs(s - r) <= 1e-5 * mag + 1e-30)) {
                    fail_msg("%s n=%lld isa=%s: %.9g vs reference %.9g (mag %.3g)", qt->name, (long long)n,
                             k->isa, s, r, mag);
                }
                (*n_checked)++;
            }
        }
        free(w); free(x); free(wd); free(xd); free(wq); free(xq);
    }
}

static void test_all_types(void **state) {
    (void)state;
    int n, checked = 0;
    const nb_qtype *all = nb_qtype_list(&n);
    for (int i = 0; i < n; i++) {
        if (!all[i].act_only) run_type(&all[i], &checked);
    }
    printf("  %d SIMD results checked against the reference (isa here: %s)\n", checked,
           nb_isa_name(nb_cpu_isa()));
    if (nb_cpu_isa() >= NB_ISA_AVX2) assert_true(checked > 0);
}

/* Activations of zero, weights of extreme codes, E4M3 NaN codes. */
static void test_edges(void **state) {
    (void)state;
    /* all-zero activations: every dot is exactly 0 */
    int n;
    const nb_qtype *all = nb_qtype_list(&n);
    float zero[512] = {0}, w[512];
    uint8_t wq[1200], xq[2048];
    for (int i = 0; i < 512; i++) w[i] = gauss();
    for (int i = 0; i < n; i++) {
        if (all[i].act_only) continue;
        all[i].from_float(w, wq, 512);
        for (int isa = NB_ISA_SCALAR; isa <= NB_ISA_AVX512; isa++) {
            const nb_qdot *k = nb_qdot_get_exact(all[i].type, (nb_isa)isa);
            if (!k) continue;
            k->quantize_act(zero, xq, 512);
            float s = 1;
            k->vec_dot(512, wq, xq, &s);
            assert_true(s == 0.0f);
        }
    }
    /* an E4M3 NaN weight makes the dot NaN in every implementation */
    nb_block_fp8 blk[2];
    float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    nb_qtype_get(NB_FP8_E4M3)->from_float(ones, blk, 64);
    blk[1].f8[5] = 0x7f;
    for (int isa = NB_ISA_SCALAR; isa <= NB_ISA_AVX512; isa++) {
        const nb_qdot *k = nb_qdot_get_exact(NB_FP8_E4M3, (nb_isa)isa);
        if (!k) continue;
        float s = 0;
        k->vec_dot(64, blk, ones, &s);
        assert_true(isnan(s));
    }
}

/* Q2_K / Q3_K with extreme codes (every level at its ends, scales at their
 * ends, activations +-127): the largest int16 pair sums the kernels form.
 * With d = 1 every product is an integer and the row total stays below
 * 2^24, so every implementation must give exactly the integer dot of the
 * dequantized rows (the registry's to_float, checked in test_qtypes). No
 * llama.cpp reference outputs exist for these types in shared/. */
static void test_k23_extremes(void **state) {
    (void)state;
    enum { NB = 3, N = 256 * NB };
    nb_block_q8_K act[NB];
    float ad[N], wd[N];
    for (int rep = 0; rep < 8; rep++) {
        for (int b = 0; b < NB; b++) {
            act[b].d = 1.0f;
            for (int j = 0; j < 256; j++) {
                int v = rep == 0 ? 127 : rep == 1 ? -127 : (urand() < 0.5 ? 127 : -127);
                act[b].qs[j] = (int8_t)v;
            }
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) sum += act[b].qs[16 * g + j];
                act[b].bsums[g] = (int16_t)sum;
            }
        }
        nb_qtype_get(NB_Q8_K)->to_float(act, ad, N);
        nb_block_q2_K w2[NB];
        nb_block_q3_K w3[NB];
        for (int b = 0; b < NB; b++) {
            w2[b].d = w2[b].dmin = nb_fp32_to_fp16(1.0f);
            w3[b].d = nb_fp32_to_fp16(1.0f);
            for (int j = 0; j < 64; j++) {
                uint8_t q = rep < 2 ? (uint8_t)(rep ? 0xFF : 0x00) : (uint8_t)(urand() < 0.5 ? 0x00 : 0xFF);
                w2[b].qs[j] = w3[b].qs[j] = q;
            }
            for (int j = 0; j < 32; j++) w3[b].hmask[j] = (uint8_t)(rep < 2 ? (rep ? 0xFF : 0) : urand() * 256);
            for (int g = 0; g < 16; g++) {
                int sc = urand() < 0.5 ? 0 : 15, m = urand() < 0.5 ? 0 : 15;
                w2[b].scales[g] = (uint8_t)(sc | (m << 4));
            }
            /* Q3_K scales: stored 0 (-32) or 63 (+31), packed 4 + 4 + 2 bits */
            for (int j = 0; j < 12; j++) w3[b].scales[j] = (uint8_t)(urand() < 0.5 ? 0x00 : 0xFF);
            if (rep == 0) memset(w3[b].scales, 0, 12); /* all -32, levels -4: the largest products */
        }
        const struct { nb_dtype t; const void *w; } cases[] = {{NB_Q2_K, w2}, {NB_Q3_K, w3}};
        for (int c = 0; c < 2; c++) {
            nb_qtype_get(cases[c].t)->to_float(cases[c].w, wd, N);
            double exact = 0;
            for (int i = 0; i < N; i++) exact += (double)wd[i] * ad[i];
            assert_true(fabs(exact) < 16777216.0);
            for (int isa = NB_ISA_SCALAR; isa <= NB_ISA_AVX512; isa++) {
                const nb_qdot *k = nb_qdot_get_exact(cases[c].t, (nb_isa)isa);
                if (!k) continue;
                float s;
                k->vec_dot(N, cases[c].w, act, &s);
                if ((double)s != exact)
                    fail_msg("%s rep %d isa %s: %.1f, want %.1f", nb_dtype_name(cases[c].t), rep, k->isa, s, exact);
            }
        }
    }
}

static void test_mxn(void **state) {
    (void)state;
    static const nb_dtype types[] = {NB_Q4_0, NB_Q8_0};
    for (int isa = NB_ISA_SCALAR; isa <= NB_ISA_AVX512; isa++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const nb_qdot *k = nb_qdot_get_exact(types[ti], (nb_isa)isa);
            if (!k || !k->vec_dot_mxn) continue;
            const nb_qtype *qt = nb_qtype_get(types[ti]);
            static const int64_t nbs[] = {1, 3, 4, 9, 64};
            for (size_t bi = 0; bi < sizeof nbs / sizeof nbs[0]; bi++) {
                int64_t K = nbs[bi] * 32;
                uint64_t wrb, arb;
                assert_true(nb_dtype_row_bytes(types[ti], (uint64_t)K, &wrb));
                assert_true(nb_dtype_row_bytes(k->act_type, (uint64_t)K, &arb));
                float *w = malloc((size_t)(4 * K) * 4), *x = malloc((size_t)(4 * K) * 4);
                uint8_t *wq = malloc(4 * wrb), *aq = malloc(4 * arb);
                for (int64_t i = 0; i < 4 * K; i++) {
                    w[i] = bi == 2 ? (i % 2 ? -1.0f : 1.0f) : gauss(); /* bi 2: extreme codes */
                    x[i] = bi == 2 ? (i % 3 ? -1.0f : 1.0f) : gauss();
                }
                for (int r = 0; r < 4; r++) qt->from_float(w + r * K, wq + r * wrb, K);
                for (int t = 0; t < 4; t++) k->quantize_act(x + t * K, aq + t * arb, K);
                for (int m = 1; m <= 4; m++)
                    for (int nn = 1; nn <= 4; nn++) {
                        float out[16], want;
                        k->vec_dot_mxn(K, m, nn, wq, wrb, aq, arb, out, 4);
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < nn; j++) {
                                k->vec_dot(K, wq + i * wrb, aq + j * arb, &want);
                                if (out[i * 4 + j] != want)
                                    fail_msg("%s %s K=%lld m=%d n=%d (%d,%d): %g vs %g", nb_dtype_name(types[ti]),
                                             k->isa, (long long)K, m, nn, i, j, (double)out[i * 4 + j], (double)want);
                            }
                    }
                free(w); free(x); free(wq); free(aq);
            }
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_all_types),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_k23_extremes),
        cmocka_unit_test(test_mxn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
