/* Perplexity of a model over a text, two procedures.
 *
 * Chunked (nb_perplexity): the way llama.cpp's llama-perplexity computes it,
 * so numbers are comparable: the text is tokenized once (BOS first when the
 * model adds one); chunk i = tokens[c*i, c*(i+1)) with its first token
 * replaced by BOS; each chunk is evaluated from an empty cache, and only its
 * second half is scored: positions j = c/2 .. c-2 predict token j+1. Tokens
 * after the last full chunk are ignored.
 *
 * Sliding window (nb_perplexity_sliding): Hugging Face's "perplexity of
 * fixed-length models" procedure. Tokens t_0..t_{N-1} (t_0 = BOS when the
 * model adds one; no other BOS is inserted). Window w covers
 * [b_w, e_w) with b_w = w*S and e_w = min(b_w + C, N); windows stop with the
 * first one that reaches N. Each window is evaluated from an empty cache on
 * exactly those tokens, and scores the targets t_k for
 *     max(e_{w-1}, b_w + 1) <= k < e_w        (e_{-1} = 0)
 * from the logits at position k-1, which saw t[b_w .. k-1]. So every token
 * t_1..t_{N-1} is scored exactly once, and (after the first window) with at
 * least C - S tokens of context in front. S = C gives plain
 * non-overlapping windows (each window's first token is context only). Needs
 * 1 <= S <= C and N >= 2.
 *
 * Both: PPL = exp(mean NLL) in nats; the standard error of the estimate is
 * propagated from that of the mean NLL (delta method, as llama-perplexity
 * prints it): stderr = PPL * sqrt(var(NLL) / (N - 1)), var the population
 * variance of the N scored NLLs (0 when N < 2). */
#ifndef NB_EVAL_PPL_H
#define NB_EVAL_PPL_H

#include "engine/session.h"

typedef struct nb_ppl {
    double ppl, uncertainty; /* uncertainty: the standard error of ppl */
    double mean_nll;
    int64_t n_scored, n_chunks, n_tokens; /* n_chunks: chunks or windows evaluated */
} nb_ppl;

/* Called after each chunk / window with the running result (may be NULL). */
typedef void (*nb_ppl_progress)(void *ud, const nb_ppl *running);

/* n_ctx must be >= 4 and <= the session's context. */
nb_status nb_perplexity(nb_session *s, const char *text, size_t len, int32_t n_ctx, nb_ppl *out,
                        nb_ppl_progress cb, void *ud) __attribute__((warn_unused_result));

/* Sliding window over a text (tokenized as nb_perplexity does); n_ctx 2..the
 * session's context, 1 <= stride <= n_ctx. */
nb_status nb_perplexity_sliding(nb_session *s, const char *text, size_t len, int32_t n_ctx, int32_t stride,
                                nb_ppl *out, nb_ppl_progress cb, void *ud) __attribute__((warn_unused_result));
/* The same over given token ids (n >= 2; ids must be < the model's vocabulary). */
nb_status nb_perplexity_sliding_ids(nb_session *s, const int32_t *ids, int64_t n, int32_t n_ctx, int32_t stride,
                                    nb_ppl *out, nb_ppl_progress cb, void *ud) __attribute__((warn_unused_result));

#endif
