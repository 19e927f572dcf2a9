/* Tests of the model-vs-baseline statistics (eval/compare.h):
 *  - the per-position math on hand-made logits against closed forms:
 *    identical and shifted logits (KLD 0, 100% same top), a two-token
 *    distribution, a three-token one with a different top token, -inf
 *    logits, medians over several positions, refused inputs;
 *  - nb_compare of aidreams260K against itself: KLD 0, 100% same top, and
 *    the baseline perplexity equal to llama-perplexity's (reference JSON:
 *    10.105 over 23 chunks of 128; 7.2215 after 3 chunks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/file.h"
#include "eval/compare.h"

static void test_identical(void **state) {
    (void)state;
    float l[5] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f}, s[5];
    for (int i = 0; i < 5; i++) s[i] = l[i] + 5.0f; /* softmax is shift invariant */
    nb_cmp_acc a;
    nb_cmp_acc_init(&a);
    assert_int_equal(nb_cmp_acc_add(&a, l, l, 5, 2), NB_OK);
    assert_int_equal(nb_cmp_acc_add(&a, l, s, 5, 4), NB_OK);
    nb_cmp_result r;
    nb_cmp_acc_result(&a, &r);
    assert_int_equal(r.n, 2);
    assert_true(r.kld_mean < 1e-12 && r.kld_max < 1e-12);
    assert_true(r.same_top == 1.0);
    assert_true(fabs(r.ppl_ratio - 1) < 1e-6);
    assert_true(fabs(r.ppl_delta) < 1e-6);
    assert_true(r.rms_dp < 1e-6);
    /* PPL of the base: exp(mean NLL) with NLL = lse - logit, by hand */
    double lse = log(exp(0.5) + exp(-1.0) + exp(2.0) + exp(0.0) + exp(1.5));
    double want = exp(((lse - 2.0) + (lse - 1.5)) / 2);
    assert_true(fabs(r.ppl_base - want) < 1e-5 * want);
    nb_cmp_acc_free(&a);
}

static void test_two_tokens(void **state) {
    (void)state;
    /* p = (1/2, 1/2), q = (3/4, 1/4): KL(p||q) = 1/2 ln(4/3); next token 1:
     * NLL_p = ln 2, NLL_q = ln 4, PPL 2 and 4, delta p = -1/4 */
    float b[2] = {0, 0}, t[2] = {(float)log(3.0), 0};
    nb_cmp_acc a;
    nb_cmp_acc_init(&a);
    assert_int_equal(nb_cmp_acc_add(&a, b, t, 2, 1), NB_OK);
    nb_cmp_result r;
    nb_cmp_acc_result(&a, &r);
    assert_true(fabs(r.kld_mean - 0.5 * log(4.0 / 3.0)) < 1e-7);
    assert_true(r.same_top == 1.0); /* a tie takes the lowest id: 0 and 0 */
    assert_true(fabs(r.ppl_base - 2) < 1e-6);
    assert_true(fabs(r.ppl_test - 4) < 1e-6);
    assert_true(fabs(r.ppl_ratio - 2) < 1e-6);
    assert_true(fabs(r.ln_ppl_ratio - log(2.0)) < 1e-7);
    assert_true(fabs(r.rms_dp - 0.25) < 1e-7);
    nb_cmp_acc_free(&a);
}

static void test_three_tokens(void **state) {
    (void)state;
    /* base (1,0,0), test (0,2,0): different top tokens */
    float b[3] = {1, 0, 0}, t[3] = {0, 2, 0};
    double e = exp(1.0), e2 = exp(2.0);
    double p[3] = {e / (e + 2), 1 / (e + 2), 1 / (e + 2)}, q[3] = {1 / (e2 + 2), e2 / (e2 + 2), 1 / (e2 + 2)};
    double kl = 0;
    for (int i = 0; i < 3; i++) kl += p[i] * log(p[i] / q[i]);
    nb_cmp_acc a;
    nb_cmp_acc_init(&a);
    assert_int_equal(nb_cmp_acc_add(&a, b, t, 3, -1), NB_OK);
    /* a -inf logit in the baseline has p = 0 and contributes nothing */
    float b2[3] = {0, 0, -INFINITY}, t2[3] = {0, 0, 3};
    assert_int_equal(nb_cmp_acc_add(&a, b2, t2, 3, -1), NB_OK);
    double kl2 = log(0.5 / (1 / (2 + exp(3.0))));
    /* a third position with KLD 0 */
    assert_int_equal(nb_cmp_acc_add(&a, b, b, 3, -1), NB_OK);
    nb_cmp_result r;
    nb_cmp_acc_result(&a, &r);
    assert_int_equal(r.n, 3);
    assert_true(fabs(r.kld_mean - (kl + kl2) / 3) < 1e-6);
    assert_true(fabs(r.kld_max - NB_MAX(kl, kl2)) < 1e-6);
    assert_true(fabs(r.kld_median - NB_MIN(kl, kl2)) < 1e-6);
    /* position 1: 0 vs 1; position 2: 0 (tie, lowest id) vs 2; position 3 agrees */
    assert_true(fabs(r.same_top - 1.0 / 3.0) < 1e-12);
    nb_cmp_acc_free(&a);
}

static void test_refused(void **state) {
    (void)state;
    float ok[2] = {0, 1}, bad[2] = {NAN, NAN}, inf[2] = {-INFINITY, -INFINITY};
    nb_cmp_acc a;
    nb_cmp_acc_init(&a);
    assert_int_equal(nb_cmp_acc_add(&a, bad, ok, 2, 0), NB_ERR_INVALID);
    assert_int_equal(nb_cmp_acc_add(&a, ok, inf, 2, 0), NB_ERR_INVALID);
    assert_int_equal(nb_cmp_acc_add(&a, ok, ok, 2, 2), NB_ERR_RANGE);
    assert_int_equal(a.n, 0);
    nb_cmp_result r;
    nb_cmp_acc_result(&a, &r);
    assert_int_equal(r.n, 0);
    nb_cmp_acc_free(&a);
}

static void test_self_compare(void **state) {
    (void)state;
    char model[4096];
    const char *p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) { skip(); return; }
    snprintf(model, sizeof model, "%s", p);
    const char *tp = nb_test_shared("reference/aidreams-sample.txt");
    if (!tp) { skip(); return; }
    char *text;
    size_t len;
    assert_int_equal(nb_read_file(tp, 1 << 20, &text, &len), NB_OK);
    if (len && text[len - 1] == '\n') text[--len] = '\0'; /* as llama-perplexity */
    nb_session_params sp = {.model_path = model, .n_threads = 2, .n_ctx = 128, .n_batch = 128};
    nb_session *a, *b;
    assert_int_equal(nb_session_open(&sp, &a), NB_OK);
    assert_int_equal(nb_session_open(&sp, &b), NB_OK);
    nb_cmp_result r;
    assert_int_equal(nb_compare(a, b, text, len, 128, 3, &r, NULL, NULL), NB_OK);
    assert_int_equal(r.n_chunks, 3);
    assert_int_equal(r.n, 3 * 63);
    /* llama-perplexity's running PPL after 3 chunks */
    assert_true(fabs(r.ppl_base - 7.2215) < 0.002);
    assert_true(r.kld_mean < 1e-9);
    assert_true(r.same_top == 1.0);
    assert_int_equal(nb_compare(a, b, text, len, 128, 0, &r, NULL, NULL), NB_OK);
    assert_int_equal(r.n_chunks, 23);
    assert_int_equal(r.n_tokens, 3039);
    assert_true(fabs(r.ppl_base - 10.105) < 0.002);
    assert_true(fabs(r.ppl_test - r.ppl_base) < 1e-9);
    /* a context the sessions cannot hold is refused */
    assert_int_equal(nb_compare(a, b, text, len, 256, 0, &r, NULL, NULL), NB_ERR_RANGE);
    nb_session_free(a);
    nb_session_free(b);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_two_tokens),
        cmocka_unit_test(test_three_tokens),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_self_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
