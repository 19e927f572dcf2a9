/* Tests of the sliding-window perplexity (eval/ppl.h) on aidreams260K, each
 * against an independent computation through nb_session_eval:
 *  - stride = ctx equals plain non-overlapping windows (each window from an
 *    empty cache, its first token context only), NLLs summed by hand;
 *  - stride < ctx: every token k >= 1 scored once, from the window
 *    [b, k] with b the start of the first window ending after k, recomputed
 *    one token at a time (a separate forward pass per token);
 *  - the standard error against a two-pass hand computation of
 *    PPL * sqrt(var / (N - 1)) over the same NLLs;
 *  - refused inputs: stride 0, stride > ctx, a window over the session's
 *    context, fewer than 2 tokens, out-of-vocabulary ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/file.h"
#include "engine/sampler.h"
#include "eval/ppl.h"

static nb_session *open_model(int32_t ctx) {
    const char *p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) return NULL;
    char model[4096];
    snprintf(model, sizeof model, "%s", p);
    nb_session_params sp = {.model_path = model, .n_threads = 2, .n_ctx = ctx, .n_batch = ctx};
    nb_session *s;
    assert_int_equal(nb_session_open(&sp, &s), NB_OK);
    return s;
}

static int32_t *sample_ids(nb_session *s, size_t max_bytes, size_t *n) {
    const char *tp = nb_test_shared("reference/aidreams-sample.txt");
    if (!tp) return NULL;
    char *text;
    size_t len;
    assert_int_equal(nb_read_file(tp, 1 << 20, &text, &len), NB_OK);
    if (len > max_bytes) len = max_bytes;
    int32_t *ids;
    assert_int_equal(nb_tokenize(s->tok, text, len, true, false, &ids, n), NB_OK);
    free(text);
    return ids;
}

/* hand statistics over a list of NLLs: two-pass variance */
static void hand_stats(const double *nll, int64_t n, double *ppl, double *err) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++) m += nll[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) v += (nll[i] - m) * (nll[i] - m);
    v /= (double)n;
    *ppl = exp(m);
    *err = *ppl * sqrt(v / (double)(n - 1));
}

static void test_stride_equals_ctx(void **state) {
    (void)state;
    const int32_t C = 32;
    nb_session *s = open_model(C);
    if (!s) { skip(); return; }
    size_t n;
    int32_t *ids = sample_ids(s, 600, &n);
    assert_true(n > 3 * (size_t)C);
    nb_ppl r;
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, (int64_t)n, C, C, &r, NULL, NULL), NB_OK);
    /* plain windows [w*C, min((w+1)*C, n)), positions 1.. of each scored */
    double *nll = malloc(n * sizeof *nll);
    float *lg = malloc((size_t)C * (size_t)s->n_vocab * sizeof *lg);
    int64_t m = 0, windows = 0;
    for (size_t b = 0; b < n; b += (size_t)C) {
        size_t e = b + (size_t)C < n ? b + (size_t)C : n;
        nb_session_reset(s);
        assert_int_equal(nb_session_eval(s, ids + b, (int32_t)(e - b), true, lg), NB_OK);
        for (size_t k = b + 1; k < e; k++) {
            const float *l = lg + (k - 1 - b) * (size_t)s->n_vocab;
            nll[m++] = nb_logsumexp(l, s->n_vocab) - l[ids[k]];
        }
        windows++;
    }
    double ppl, err;
    hand_stats(nll, m, &ppl, &err);
    fprintf(stderr, "  stride = ctx = %d: %lld tokens, %lld windows, %lld scored, ppl %.6f +/- %.6f (hand %.6f +/- %.6f)\n",
            C, (long long)n, (long long)windows, (long long)m, r.ppl, r.uncertainty, ppl, err);
    assert_int_equal(r.n_scored, m);
    assert_int_equal(r.n_chunks, windows);
    assert_int_equal(r.n_scored, (int64_t)n - windows);
    assert_true(fabs(r.ppl / ppl - 1) < 1e-9);
    assert_true(fabs(r.uncertainty / err - 1) < 1e-6);
    free(nll);
    free(lg);
    free(ids);
    nb_session_free(s);
}

static void test_overlapping(void **state) {
    (void)state;
    const int32_t C = 16, S = 5;
    nb_session *s = open_model(C);
    if (!s) { skip(); return; }
    size_t n;
    int32_t *ids = sample_ids(s, 150, &n);
    assert_true(n > 2 * (size_t)C);
    nb_ppl r;
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, (int64_t)n, C, S, &r, NULL, NULL), NB_OK);
    /* token k: scored in the first window w with w*S + C > k, i.e. from
     * b = S * max(0, ceil((k - C + 1) / S)), seeing t[b..k-1] */
    double *nll = malloc(n * sizeof *nll);
    float *lg = malloc((size_t)C * (size_t)s->n_vocab * sizeof *lg);
    for (size_t k = 1; k < n; k++) {
        int64_t w = (int64_t)k - C + 1 <= 0 ? 0 : ((int64_t)k - C + 1 + S - 1) / S;
        size_t b = (size_t)(w * S);
        assert_true(k - b >= 1 && k - b < (size_t)C);
        if (w > 0) assert_true(k - b >= (size_t)(C - S)); /* at least C - S tokens of context */
        nb_session_reset(s);
        assert_int_equal(nb_session_eval(s, ids + b, (int32_t)(k - b), false, lg), NB_OK);
        nll[k - 1] = nb_logsumexp(lg, s->n_vocab) - lg[ids[k]];
    }
    double ppl, err;
    hand_stats(nll, (int64_t)n - 1, &ppl, &err);
    fprintf(stderr, "  ctx %d stride %d: %lld tokens, %lld windows, ppl %.6f +/- %.6f (token by token %.6f +/- %.6f)\n",
            C, S, (long long)n, (long long)r.n_chunks, r.ppl, r.uncertainty, ppl, err);
    assert_int_equal(r.n_scored, (int64_t)n - 1);
    assert_true(fabs(r.ppl / ppl - 1) < 1e-5);
    assert_true(fabs(r.uncertainty / err - 1) < 1e-4);
    free(nll);
    free(lg);
    free(ids);
    nb_session_free(s);
}

/* three tokens, two NLLs: the standard error by hand from closed forms */
static void test_stderr_small(void **state) {
    (void)state;
    nb_session *s = open_model(8);
    if (!s) { skip(); return; }
    int32_t ids[3] = {1, 300, 301};
    /* the logits from the batch the window evaluates (all three tokens):
     * a token's logits may differ in the last bits with the batch it is in
     * (the attention kernels' tiles of <= 8 rows sum in another order) */
    float *lg = malloc(3 * (size_t)s->n_vocab * sizeof *lg);
    nb_session_reset(s);
    assert_int_equal(nb_session_eval(s, ids, 3, true, lg), NB_OK);
    double a = nb_logsumexp(lg, s->n_vocab) - lg[300];
    double b = nb_logsumexp(lg + s->n_vocab, s->n_vocab) - lg[s->n_vocab + 301];
    /* N = 2: mean (a+b)/2, population variance ((a-b)/2)^2, stderr(mean) = |a-b|/2 */
    double ppl = exp((a + b) / 2), err = ppl * fabs(a - b) / 2;
    nb_ppl r;
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 3, 8, 8, &r, NULL, NULL), NB_OK);
    fprintf(stderr, "  NLLs %.6f %.6f: ppl %.6f +/- %.6f (hand %.6f +/- %.6f)\n", a, b, r.ppl, r.uncertainty, ppl, err);
    assert_int_equal(r.n_scored, 2);
    assert_true(fabs(r.ppl / ppl - 1) < 1e-12);
    assert_true(fabs(r.uncertainty - err) < 1e-9 * ppl);
    /* one scored token (a window of two): no spread, stderr 0 */
    nb_session_reset(s);
    assert_int_equal(nb_session_eval(s, ids, 2, true, lg), NB_OK);
    a = nb_logsumexp(lg, s->n_vocab) - lg[300];
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 2, 8, 8, &r, NULL, NULL), NB_OK);
    assert_int_equal(r.n_scored, 1);
    assert_true(fabs(r.ppl - exp(a)) < 1e-9 * exp(a));
    assert_true(r.uncertainty == 0);
    free(lg);
    nb_session_free(s);
}

static void test_refused(void **state) {
    (void)state;
    nb_session *s = open_model(16);
    if (!s) { skip(); return; }
    int32_t ids[4] = {1, 300, 301, 302}, bad[3] = {1, 300, 512};
    nb_ppl r;
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 4, 16, 0, &r, NULL, NULL), NB_ERR_RANGE);
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 4, 8, 9, &r, NULL, NULL), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "stride 9"));
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 4, 32, 4, &r, NULL, NULL), NB_ERR_RANGE);
    assert_int_equal(nb_perplexity_sliding_ids(s, ids, 1, 16, 4, &r, NULL, NULL), NB_ERR_RANGE);
    assert_int_equal(nb_perplexity_sliding_ids(s, bad, 3, 16, 4, &r, NULL, NULL), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "512"));
    nb_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stride_equals_ctx),
        cmocka_unit_test(test_overlapping),
        cmocka_unit_test(test_stderr_small),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
