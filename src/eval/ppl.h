/* Perplexity the way llama.cpp's llama-perplexity computes it, so numbers
 * are comparable: the text is tokenized once (BOS first when the model adds
 * one); chunk i = tokens[c*i, c*(i+1)) with its first token replaced by BOS;
 * each chunk is evaluated from an empty cache, and only its second half is
 * scored: positions j = c/2 .. c-2 predict token j+1. Tokens after the last
 * full chunk are ignored.
 * PPL = exp(mean NLL); uncertainty = PPL * sqrt(var(NLL) / (N - 1)). */
#ifndef NB_EVAL_PPL_H
#define NB_EVAL_PPL_H

#include "engine/session.h"

typedef struct nb_ppl {
    double ppl, uncertainty;
    double mean_nll;
    int64_t n_scored, n_chunks, n_tokens;
} nb_ppl;

/* Called after each chunk with the running result (may be NULL). */
typedef void (*nb_ppl_progress)(void *ud, const nb_ppl *running);

/* n_ctx must be >= 4 and <= the session's context. */
nb_status nb_perplexity(nb_session *s, const char *text, size_t len, int32_t n_ctx, nb_ppl *out,
                        nb_ppl_progress cb, void *ud) __attribute__((warn_unused_result));

#endif
