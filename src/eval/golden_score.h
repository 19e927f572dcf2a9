/* Log-likelihood of a token sequence under a model, teacher-forced: the
 * scoring half of golden sets (choice items, the lm-eval way) and of
 * `nibble serve`'s /v1/completions with echo + logprobs.
 *
 * A scorer is a private forward context plus a small KV pool over a model
 * that is already loaded (e.g. the serving engine's, nb_engine_model):
 * weights are read-only, so it runs beside the engine loop without a second
 * copy of the model. One sequence at a time; not thread-safe per scorer.
 *
 * Text offsets follow OpenAI's legacy completions shape: off[i] is the
 * byte offset in the detokenized text where token i begins, i.e. the length
 * of nb_detokenize(ids[0..i)) (a leading BOS is empty; SPM's added space
 * prefix is not counted). A continuation after a prompt of L bytes is the
 * run of tokens that end after byte L (token i ends at off[i+1], the last
 * at the text's length). nibble's in-process scoring and a client reading
 * an endpoint's echo use this one rule, so both pick the same tokens. */
#ifndef NB_EVAL_GOLDEN_SCORE_H
#define NB_EVAL_GOLDEN_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct nb_gscore nb_gscore;

/* n_ctx: the longest sequence to score (>= 2). n_threads <= 0: one per CPU the process may use. */
nb_status nb_gscore_create(const nb_model *m, int32_t n_ctx, int n_threads, nb_gscore **out)
    __attribute__((warn_unused_result));
void nb_gscore_free(nb_gscore *s);

/* lp[i] = log p(ids[i] | ids[0..i)) for 1 <= i < n, lp[0] = NAN. With
 * n_top > 0 (at most 20), top_ids / top_lps [n][n_top] receive the most
 * likely next tokens at each position i (predicting token i; row 0 unset).
 * NB_ERR_RANGE when n exceeds the scorer's n_ctx. */
nb_status nb_gscore_run(nb_gscore *s, const int32_t *ids, size_t n, int32_t n_top, float *lp, int32_t *top_ids,
                        float *top_lps) __attribute__((warn_unused_result));

/* off[0..n] (n + 1 entries; off[n] = the whole text's length). */
nb_status nb_gscore_offsets(const nb_tokenizer *tok, const int32_t *ids, size_t n, size_t *off)
    __attribute__((warn_unused_result));

/* Sum of lp[i] over the tokens that end after byte prompt_len (see above);
 * tokens with a non-finite lp (the first) are skipped. *n_tokens: how many
 * were summed (0 when the continuation is empty). */
double nb_gscore_continuation(const float *lp, const size_t *off, size_t n, size_t prompt_len, int *n_tokens);

/* For nibble serve (echo + logprobs): one process-wide scorer over the
 * serving engine's weights (engine: an nb_engine *), created on first use
 * with the engine's max_model_len and thread count, one request at a time
 * (a mutex). Same contract as nb_gscore_run. Release frees it (call after
 * the server stopped, before nb_engine_free). */
nb_status nb_gscore_engine_run(void *engine, const int32_t *ids, size_t n, int32_t n_top, float *lp, int32_t *top_ids,
                               float *top_lps) __attribute__((warn_unused_result));
void nb_gscore_engine_release(void);

#endif
