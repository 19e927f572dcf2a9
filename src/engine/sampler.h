/* The sampler: turns one sequence's last-token logits into the next token,
 * with the OpenAI / vLLM sampling parameters, plus the log-softmax helpers
 * used by `nibble logits`, perplexity and the server's logprobs.
 *
 * Order of operations (vLLM's; docs/sampling.md has the details):
 *   0. logit_bias added to the raw logits (vLLM's logits processor, before
 *      the penalties; a repeated id adds each of its entries);
 *   1. penalties on the logits: repetition (prompt + generated tokens),
 *      then frequency, then presence (generated tokens only);
 *   2. banned tokens -> -inf;
 *   3. temperature < 1e-5 (incl. 0): greedy argmax, ties -> lowest id; done;
 *   4. temperature: logits / T;
 *   5. min_p (on the full tempered distribution), then top_k, then top_p
 *      (on the distribution renormalised after min_p and top_k);
 *   6. draw one token from what is left, renormalised.
 *
 * Ownership and threads: one nb_sampler per request; the creator owns it.
 * A sampler is not thread-safe, but distinct samplers are independent (each
 * carries its own RNG state). Every buffer is allocated at create time;
 * nb_sampler_sample() never allocates. Memory per sampler (N = n_vocab):
 * N/8 bytes always (bans); + N/8 (prompt bitmap) for repetition_penalty;
 * + N/8 (generated bitmap) for any penalty; + 4N (counts) for presence or
 * frequency; unless greedy, + 12*top_k when 0 < top_k <= 4096, else + 12N
 * when top_k or top_p is on.
 *
 * Logprobs: sampling modifies the logits in place, so callers that report
 * logprobs (of the raw model distribution, vLLM's default "raw_logprobs")
 * compute them with nb_logsumexp / nb_top_k before calling the sampler. */
#ifndef NB_ENGINE_SAMPLER_H
#define NB_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nibble_status.h"

/* Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS). */
#define NB_SAMPLING_GREEDY_EPS 1e-5f
/* Allowed temperature range (OpenAI's; vLLM accepts any T >= 0). */
#define NB_SAMPLING_TEMPERATURE_MAX 2.0f

typedef struct nb_sampling {
    float temperature;        /* 0 = greedy (argmax; ties -> lowest id) */
    int32_t top_k;            /* <= 0 = off; keeps exactly k, ties -> lower id */
    float top_p;              /* 1 = off; smallest prefix with mass >= top_p */
    float min_p;              /* 0 = off; keep tokens with p >= min_p * p_max */
    float repetition_penalty; /* 1 = off; logit>0 ? logit/rp : logit*rp, over prompt+generated tokens */
    float presence_penalty;   /* 0 = off; -= presence if count>0, over generated tokens */
    float frequency_penalty;  /* 0 = off; -= frequency * count over generated tokens */
    uint64_t seed;            /* per-request; same seed + same logits -> same tokens */
    bool has_seed;            /* false: seed drawn from a global entropy source at create */
} nb_sampling;

/* temperature 1, everything else off, no seed (vLLM's defaults). */
void nb_sampling_defaults(nb_sampling *s);

/* Checks ranges (NaN is rejected everywhere). On error returns NB_ERR_RANGE
 * and the message names the parameter as the OpenAI API does and the
 * allowed range: temperature [0, 2], top_p (0, 1], top_k -1, 0 or >= 1,
 * min_p [0, 1], repetition_penalty (0, 2], presence_penalty and
 * frequency_penalty [-2, 2]. Any 64-bit seed is accepted. */
nb_status nb_sampling_validate(const nb_sampling *s);

typedef struct nb_sampler nb_sampler;

/* Validates `s` and allocates every buffer the parameters need.
 * n_vocab: 1 .. INT32_MAX. */
nb_status nb_sampler_create(const nb_sampling *s, int32_t n_vocab, nb_sampler **out);
void nb_sampler_free(nb_sampler *sm);

/* Records the prompt tokens for repetition_penalty (replaces any earlier
 * call's set). Call once before sampling. Ids outside [0, n_vocab) are
 * ignored. */
void nb_sampler_set_prompt(nb_sampler *sm, const int32_t *ids, size_t n);

/* Samples the next token from raw logits (n_vocab floats; modified in
 * place) and records it as generated. NaN logits count as -inf. Degenerate
 * inputs: if some logit is +inf the lowest such id wins; if no token has a
 * finite logit the lowest non-banned id is returned. Returns -1 only if
 * every token is banned. */
int32_t nb_sampler_sample(nb_sampler *sm, float *logits);

/* Records a token chosen elsewhere (forced / speculative) as generated, so
 * that penalties see it. Out-of-range ids are ignored. */
void nb_sampler_accept(nb_sampler *sm, int32_t id);

/* OpenAI's logit_bias: at most NB_LOGIT_BIAS_MAX entries, each a token id
 * in [0, n_vocab) and a bias in [-100, 100] (OpenAI's range: -100 in effect
 * bans the token, +100 in effect forces it). */
#define NB_LOGIT_BIAS_MAX 300000
#define NB_LOGIT_BIAS_LIMIT 100.0f
/* NB_ERR_RANGE naming the first bad entry (token id or value and the
 * allowed range). */
nb_status nb_logit_bias_validate(const int32_t *ids, const float *bias, size_t n, int32_t n_vocab);
/* Validates and copies the bias (replacing any earlier set; n = 0 clears
 * it). Added to the raw logits by every nb_sampler_sample. */
nb_status nb_sampler_set_logit_bias(nb_sampler *sm, const int32_t *ids, const float *bias, size_t n)
    __attribute__((warn_unused_result));

/* Excludes (banned = true) or re-admits a token, e.g. EOS until min_tokens
 * is reached. Out-of-range ids are ignored. */
void nb_sampler_ban(nb_sampler *sm, int32_t id, bool banned);

/* The seed in use (the drawn one when has_seed was false), for logs. */
uint64_t nb_sampler_seed(const nb_sampler *sm);
/* Tokens recorded as generated so far. */
uint64_t nb_sampler_n_generated(const nb_sampler *sm);

/* log(sum_i exp(logits[i])), computed stably in double (max subtracted).
 * n <= 0 or all -inf: -inf. Any +inf: +inf. Any NaN: NaN. */
double nb_logsumexp(const float *logits, int32_t n);

/* out[i] = logits[i] - logsumexp(logits) (out may equal logits). */
void nb_log_softmax(const float *logits, int32_t n, float *out);

/* The k largest (id, logit) pairs, descending, ties -> lower id first;
 * NaN ranks below -inf. 0 <= k <= n (k is clamped to that range).
 * O(n log k), no allocation. */
void nb_top_k(const float *logits, int32_t n, int32_t k, int32_t *ids, float *vals);

#endif
