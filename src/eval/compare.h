/* Quality of a model against its baseline on the same tokens: mean KL
 * divergence KL(base || test), top-1 agreement ("same top p" in
 * llama-perplexity's words), perplexity of both, their ratio and the
 * change in probability of the actual next token (RMS delta p).
 *
 * Two layers:
 *   nb_cmp_position / nb_cmp_acc   the math, one position at a time, from two
 *                logit vectors (or pushed from elsewhere: eval/kld.h's
 *                top-K baseline files)
 *                (no model needed: unit-tested on hand-made logits, and
 *                reusable for logits that come from files);
 *   nb_compare   runs two sessions over a text with llama-perplexity's
 *                chunking (eval/ppl.h: chunks of n_ctx tokens, BOS first,
 *                each from an empty cache, only the second half scored).
 *
 * Definitions per scored position (p = softmax(base), q = softmax(test),
 * t = the actual next token):
 *   KLD      = sum_i p_i (log p_i - log q_i)      (nats; >= 0)
 *   same top = argmax p == argmax q              (ties -> lowest id)
 *   NLL      = -log p_t  and  -log q_t           (PPL = exp(mean NLL))
 *   delta p  = q_t - p_t
 * Uncertainties as llama-perplexity prints them: KLD mean +- sd/sqrt(N-1),
 * same-top % +- sqrt(f(1-f)/(N-1)), PPL +- PPL*sd(NLL)/sqrt(N-1).
 * Everything is accumulated in double. Not thread-safe per accumulator. */
#ifndef NB_EVAL_COMPARE_H
#define NB_EVAL_COMPARE_H

#include "engine/session.h"

typedef struct nb_cmp_result {
    int64_t n;                    /* scored positions */
    double kld_mean, kld_err, kld_max, kld_median, kld_p90, kld_p99; /* percentiles: nearest rank */
    double same_top, same_top_err; /* fraction 0..1 */
    double ppl_base, ppl_base_err, ppl_test, ppl_test_err;
    double ppl_ratio;             /* ppl_test / ppl_base = exp(mean NLL_test - mean NLL_base) */
    double ppl_delta;             /* ppl_test - ppl_base */
    double ln_ppl_ratio;          /* mean(NLL_test - NLL_base) */
    double rms_dp;                /* sqrt(mean (q_t - p_t)^2), a fraction */
    int64_t n_chunks, n_tokens;   /* filled by nb_compare */
} nb_cmp_result;

typedef struct nb_cmp_acc {
    int64_t n;
    double kld, kld2, kld_max;
    int64_t same;
    double nll_b, nll_b2, nll_t, nll_t2;
    double dp2;
    double *klds;                 /* every KLD value (median / p99) */
    int64_t cap;
} nb_cmp_acc;

/* One scored position, computed from two logit vectors (nb_cmp_position)
 * or from a stored baseline (eval/kld.h). */
typedef struct nb_cmp_pos {
    double kld;                /* KL(base || test), nats, >= 0 */
    bool same_top;             /* argmax agrees */
    double nll_base, nll_test; /* -log p_t, -log q_t (0 when next < 0) */
} nb_cmp_pos;

/* The statistics of one position. `next` as in nb_cmp_acc_add. */
nb_status nb_cmp_position(const float *base, const float *test, int32_t n_vocab, int32_t next, nb_cmp_pos *out)
    __attribute__((warn_unused_result));

/* Argmax (lowest id on ties, NaN skipped) and log-sum-exp in double of n
 * logits; false when none is a finite number or +inf. */
bool nb_cmp_logit_stats(const float *l, int32_t n, int32_t *arg, double *lse);

void nb_cmp_acc_init(nb_cmp_acc *a);
void nb_cmp_acc_free(nb_cmp_acc *a);
/* Adds one position. `next` is the actual next token (0 <= next < n_vocab)
 * or -1 to skip the NLL / delta-p parts (then PPLs are not meaningful).
 * NB_ERR_INVALID when a logit vector has no finite maximum. */
nb_status nb_cmp_acc_add(nb_cmp_acc *a, const float *base, const float *test, int32_t n_vocab, int32_t next)
    __attribute__((warn_unused_result));
/* Adds a position computed elsewhere; has_next false skips the NLL parts. */
nb_status nb_cmp_acc_push(nb_cmp_acc *a, const nb_cmp_pos *p, bool has_next) __attribute__((warn_unused_result));
/* Summary of what was added so far (a->n may be 0: all zeros). */
void nb_cmp_acc_result(const nb_cmp_acc *a, nb_cmp_result *out);

/* Called after each chunk with the running result (may be NULL). */
typedef void (*nb_cmp_progress)(void *ud, const nb_cmp_result *running);

/* Runs `base` and `test` over the text tokenized with base's tokenizer (the
 * same ids go to both); n_ctx 4..min(both sessions' n_ctx); max_chunks <= 0
 * means every full chunk. The two models must have the same vocabulary
 * size. */
nb_status nb_compare(nb_session *base, nb_session *test, const char *text, size_t len, int32_t n_ctx,
                     int64_t max_chunks, nb_cmp_result *out, nb_cmp_progress cb, void *ud)
    __attribute__((warn_unused_result));

#endif
