/* Chunked and sliding-window perplexity (see ppl.h for the exact procedures). */
#include "eval/ppl.h"

#include <math.h>
#include <stdlib.h>

#include "engine/sampler.h"

typedef struct nll_sum {
    double sum, sum2;
    int64_t count;
} nll_sum;

static void nll_add(nll_sum *a, const float *l, int32_t n_vocab, int32_t target) {
    double nll = nb_logsumexp(l, n_vocab) - l[target];
    a->sum += nll;
    a->sum2 += nll * nll;
    a->count++;
}

static void nll_result(const nll_sum *a, nb_ppl *out) {
    out->n_scored = a->count;
    if (a->count == 0) return;
    out->mean_nll = a->sum / (double)a->count;
    out->ppl = exp(out->mean_nll);
    double var = a->sum2 / (double)a->count - out->mean_nll * out->mean_nll;
    out->uncertainty = a->count > 1 && var > 0 ? out->ppl * sqrt(var / (double)(a->count - 1)) : 0;
}

nb_status nb_perplexity(nb_session *s, const char *text, size_t len, int32_t n_ctx, nb_ppl *out, nb_ppl_progress cb,
                        void *ud) {
    *out = (nb_ppl){0};
    if (n_ctx < 4 || n_ctx > s->n_ctx)
        return nb_fail(NB_ERR_RANGE, "perplexity context %d outside 4..%d (the session's context)", n_ctx, s->n_ctx);
    int32_t *ids;
    size_t n;
    NB_TRY(nb_tokenize(s->tok, text, len, true, false, &ids, &n));
    out->n_tokens = (int64_t)n;
    int64_t n_chunks = (int64_t)n / n_ctx;
    if (n_chunks == 0) {
        free(ids);
        return nb_fail(NB_ERR_RANGE, "the text has %zu tokens, fewer than one chunk of %d (lower -c)", n, n_ctx);
    }
    float *logits = malloc((size_t)n_ctx * (size_t)s->n_vocab * sizeof(float));
    if (!logits) { free(ids); return nb_fail(NB_ERR_NOMEM, "out of memory for %d x %d logits", n_ctx, s->n_vocab); }
    int32_t bos = nb_tokenizer_bos(s->tok);
    bool add_bos = nb_tokenizer_add_bos(s->tok) && bos >= 0;
    nll_sum acc = {0};
    nb_status st = NB_OK;
    for (int64_t c = 0; c < n_chunks && st == NB_OK; c++) {
        int32_t *chunk = ids + c * n_ctx;
        int32_t first = chunk[0];
        if (add_bos) chunk[0] = bos;
        nb_session_reset(s);
        st = nb_session_eval(s, chunk, n_ctx, true, logits);
        chunk[0] = first;
        if (st != NB_OK) break;
        for (int32_t j = n_ctx / 2; j < n_ctx - 1; j++)
            nll_add(&acc, logits + (size_t)j * s->n_vocab, s->n_vocab, chunk[j + 1]);
        out->n_chunks = c + 1;
        nll_result(&acc, out);
        if (cb) cb(ud, out);
    }
    free(logits);
    free(ids);
    return st;
}

nb_status nb_perplexity_sliding_ids(nb_session *s, const int32_t *ids, int64_t n, int32_t n_ctx, int32_t stride,
                                    nb_ppl *out, nb_ppl_progress cb, void *ud) {
    *out = (nb_ppl){0};
    out->n_tokens = n;
    if (n_ctx < 2 || n_ctx > s->n_ctx)
        return nb_fail(NB_ERR_RANGE, "perplexity window %d outside 2..%d (the session's context)", n_ctx, s->n_ctx);
    if (stride < 1 || stride > n_ctx)
        return nb_fail(NB_ERR_RANGE, "stride %d outside 1..%d (the window; a larger stride would skip tokens)", stride,
                       n_ctx);
    if (n < 2) return nb_fail(NB_ERR_RANGE, "the text has %lld tokens; at least 2 are needed", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return nb_fail(NB_ERR_RANGE, "token %lld: id %d outside 0..%d", (long long)i, ids[i], s->n_vocab - 1);
    float *logits = malloc((size_t)n_ctx * (size_t)s->n_vocab * sizeof(float));
    if (!logits) return nb_fail(NB_ERR_NOMEM, "out of memory for %d x %d logits", n_ctx, s->n_vocab);
    nll_sum acc = {0};
    nb_status st = NB_OK;
    int64_t prev_end = 0;
    for (int64_t b = 0; prev_end < n; b += stride) {
        int64_t e = b + n_ctx < n ? b + n_ctx : n;
        nb_session_reset(s);
        st = nb_session_eval(s, ids + b, (int32_t)(e - b), true, logits);
        if (st != NB_OK) break;
        for (int64_t k = prev_end > b + 1 ? prev_end : b + 1; k < e; k++)
            nll_add(&acc, logits + (size_t)(k - 1 - b) * s->n_vocab, s->n_vocab, ids[k]);
        prev_end = e;
        out->n_chunks++;
        nll_result(&acc, out);
        if (cb) cb(ud, out);
    }
    free(logits);
    return st;
}

nb_status nb_perplexity_sliding(nb_session *s, const char *text, size_t len, int32_t n_ctx, int32_t stride,
                                nb_ppl *out, nb_ppl_progress cb, void *ud) {
    *out = (nb_ppl){0};
    int32_t *ids;
    size_t n;
    NB_TRY(nb_tokenize(s->tok, text, len, true, false, &ids, &n));
    nb_status st = nb_perplexity_sliding_ids(s, ids, (int64_t)n, n_ctx, stride, out, cb, ud);
    free(ids);
    return st;
}
