/* Chunked perplexity (see ppl.h for the exact procedure). */
#include "eval/ppl.h"

#include <math.h>
#include <stdlib.h>

#include "engine/sampler.h"

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
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    nb_status st = NB_OK;
    for (int64_t c = 0; c < n_chunks && st == NB_OK; c++) {
        int32_t *chunk = ids + c * n_ctx;
        int32_t first = chunk[0];
        if (add_bos) chunk[0] = bos;
        nb_session_reset(s);
        st = nb_session_eval(s, chunk, n_ctx, true, logits);
        chunk[0] = first;
        if (st != NB_OK) break;
        for (int32_t j = n_ctx / 2; j < n_ctx - 1; j++) {
            const float *l = logits + (size_t)j * s->n_vocab;
            double nll = nb_logsumexp(l, s->n_vocab) - l[chunk[j + 1]];
            sum += nll;
            sum2 += nll * nll;
            count++;
        }
        out->n_chunks = c + 1;
        out->n_scored = count;
        out->mean_nll = sum / (double)count;
        out->ppl = exp(out->mean_nll);
        double var = sum2 / (double)count - out->mean_nll * out->mean_nll;
        out->uncertainty = count > 1 && var > 0 ? out->ppl * sqrt(var / (double)(count - 1)) : 0;
        if (cb) cb(ud, out);
    }
    free(logits);
    free(ids);
    return st;
}
