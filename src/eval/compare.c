/* KL divergence, top-1 agreement and perplexity of a model against its
 * baseline (see compare.h for the definitions). */
#include "eval/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nb_cmp_acc_init(nb_cmp_acc *a) { memset(a, 0, sizeof *a); }

void nb_cmp_acc_free(nb_cmp_acc *a) {
    free(a->klds);
    memset(a, 0, sizeof *a);
}

/* max, argmax (lowest id on ties) and log-sum-exp in double. False when no
 * logit is a finite number or +inf. */
bool nb_cmp_logit_stats(const float *l, int32_t n, int32_t *arg, double *lse) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(l[i]) && (best < 0 || l[i] > l[best])) best = i;
    if (best < 0 || !isfinite(l[best])) return false;
    double m = l[best], s = 0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(l[i])) s += exp((double)l[i] - m);
    *arg = best;
    *lse = m + log(s);
    return true;
}

nb_status nb_cmp_position(const float *base, const float *test, int32_t n_vocab, int32_t next, nb_cmp_pos *out) {
    memset(out, 0, sizeof *out);
    if (n_vocab <= 0) return nb_fail(NB_ERR_INVALID, "n_vocab %d must be positive", n_vocab);
    if (next >= n_vocab) return nb_fail(NB_ERR_RANGE, "next token %d outside 0..%d", next, n_vocab - 1);
    int32_t ab, at;
    double lb, lt;
    if (!nb_cmp_logit_stats(base, n_vocab, &ab, &lb))
        return nb_fail(NB_ERR_INVALID, "the baseline logits have no finite maximum");
    if (!nb_cmp_logit_stats(test, n_vocab, &at, &lt)) return nb_fail(NB_ERR_INVALID, "the test logits have no finite maximum");
    double kld = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (isnan(base[i])) continue;
        double lp = (double)base[i] - lb;
        double p = exp(lp);
        if (p == 0) continue;
        double lq = isnan(test[i]) ? -INFINITY : (double)test[i] - lt;
        kld += p * (lp - lq);
    }
    if (kld < 0) kld = 0; /* rounding on identical distributions */
    out->kld = kld;
    out->same_top = ab == at;
    if (next >= 0) {
        out->nll_base = lb - (double)base[next];
        out->nll_test = lt - (double)test[next];
    }
    return NB_OK;
}

nb_status nb_cmp_acc_push(nb_cmp_acc *a, const nb_cmp_pos *p, bool has_next) {
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 1024;
        double *k = nb_realloc(a->klds, (size_t)cap * sizeof *k);
        if (!k) return NB_ERR_NOMEM;
        a->klds = k;
        a->cap = cap;
    }
    double kld = p->kld;
    a->klds[a->n++] = kld;
    a->kld += kld;
    a->kld2 += kld * kld;
    if (kld > a->kld_max) a->kld_max = kld;
    a->same += p->same_top;
    if (has_next) {
        double nb = p->nll_base, nt = p->nll_test;
        a->nll_b += nb;
        a->nll_b2 += nb * nb;
        a->nll_t += nt;
        a->nll_t2 += nt * nt;
        double dp = exp(-nt) - exp(-nb);
        a->dp2 += dp * dp;
    }
    return NB_OK;
}

nb_status nb_cmp_acc_add(nb_cmp_acc *a, const float *base, const float *test, int32_t n_vocab, int32_t next) {
    nb_cmp_pos p;
    nb_status st = nb_cmp_position(base, test, n_vocab, next, &p);
    if (st != NB_OK) return nb_fail_wrap(st, "compare: position %lld: ", (long long)a->n);
    return nb_cmp_acc_push(a, &p, next >= 0);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* mean and its standard error from sums */
static void mean_err(double s, double s2, int64_t n, double *mean, double *err) {
    *mean = s / (double)n;
    double var = s2 / (double)n - *mean * *mean;
    *err = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0;
}

void nb_cmp_acc_result(const nb_cmp_acc *a, nb_cmp_result *out) {
    memset(out, 0, sizeof *out);
    out->n = a->n;
    if (a->n == 0) return;
    int64_t n = a->n;
    mean_err(a->kld, a->kld2, n, &out->kld_mean, &out->kld_err);
    out->kld_max = a->kld_max;
    double *s = malloc((size_t)n * sizeof *s);
    if (s) {
        memcpy(s, a->klds, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_double);
        out->kld_median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
        int64_t k = (int64_t)ceil(0.99 * (double)n) - 1;
        out->kld_p99 = s[k < 0 ? 0 : k];
        k = (int64_t)ceil(0.90 * (double)n) - 1;
        out->kld_p90 = s[k < 0 ? 0 : k];
        free(s);
    }
    out->same_top = (double)a->same / (double)n;
    out->same_top_err = n > 1 ? sqrt(out->same_top * (1 - out->same_top) / (double)(n - 1)) : 0;
    double mb, eb, mt, et;
    mean_err(a->nll_b, a->nll_b2, n, &mb, &eb);
    mean_err(a->nll_t, a->nll_t2, n, &mt, &et);
    out->ppl_base = exp(mb);
    out->ppl_base_err = out->ppl_base * eb;
    out->ppl_test = exp(mt);
    out->ppl_test_err = out->ppl_test * et;
    out->ln_ppl_ratio = mt - mb;
    out->ppl_ratio = exp(mt - mb);
    out->ppl_delta = out->ppl_test - out->ppl_base;
    out->rms_dp = sqrt(a->dp2 / (double)n);
}

nb_status nb_compare(nb_session *base, nb_session *test, const char *text, size_t len, int32_t n_ctx,
                     int64_t max_chunks, nb_cmp_result *out, nb_cmp_progress cb, void *ud) {
    memset(out, 0, sizeof *out);
    int32_t cap = NB_MIN(base->n_ctx, test->n_ctx);
    if (n_ctx < 4 || n_ctx > cap)
        return nb_fail(NB_ERR_RANGE, "compare: context %d outside 4..%d (the sessions' context)", n_ctx, cap);
    if (base->n_vocab != test->n_vocab)
        return nb_fail(NB_ERR_INVALID, "compare: the baseline has %d tokens in its vocabulary, the test model %d",
                       base->n_vocab, test->n_vocab);
    int32_t nv = base->n_vocab;
    int32_t *ids;
    size_t n;
    NB_TRY(nb_tokenize(base->tok, text, len, true, false, &ids, &n));
    int64_t n_chunks = (int64_t)n / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    if (n_chunks == 0) {
        free(ids);
        return nb_fail(NB_ERR_RANGE, "compare: the text has %zu tokens, fewer than one chunk of %d (lower -c)", n,
                       n_ctx);
    }
    size_t cells = (size_t)n_ctx * (size_t)nv;
    float *lb = malloc(cells * sizeof(float)), *lt = malloc(cells * sizeof(float));
    if (!lb || !lt) {
        free(lb);
        free(lt);
        free(ids);
        return nb_fail(NB_ERR_NOMEM, "compare: out of memory for 2 x %d x %d logits", n_ctx, nv);
    }
    int32_t bos = nb_tokenizer_bos(base->tok);
    bool add_bos = nb_tokenizer_add_bos(base->tok) && bos >= 0;
    nb_cmp_acc acc;
    nb_cmp_acc_init(&acc);
    nb_status st = NB_OK;
    for (int64_t c = 0; c < n_chunks && st == NB_OK; c++) {
        int32_t *chunk = ids + c * n_ctx;
        int32_t first = chunk[0];
        if (add_bos) chunk[0] = bos;
        nb_session_reset(base);
        nb_session_reset(test);
        st = nb_session_eval(base, chunk, n_ctx, true, lb);
        if (st == NB_OK) st = nb_session_eval(test, chunk, n_ctx, true, lt);
        for (int32_t j = n_ctx / 2; st == NB_OK && j < n_ctx - 1; j++)
            st = nb_cmp_acc_add(&acc, lb + (size_t)j * nv, lt + (size_t)j * nv, nv, chunk[j + 1]);
        chunk[0] = first;
        if (st != NB_OK) break;
        nb_cmp_acc_result(&acc, out);
        out->n_chunks = c + 1;
        out->n_tokens = (int64_t)n;
        if (cb) cb(ud, out);
    }
    nb_cmp_acc_free(&acc);
    free(lb);
    free(lt);
    free(ids);
    return st;
}
