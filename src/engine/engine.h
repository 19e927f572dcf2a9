/* The serving engine: many requests share one model; the KV cache is the
 * resource the scheduler spends (vLLM's design, in C).
 *
 * Threads: nb_engine_create starts one engine loop thread that owns the
 * model's forward pass, the KV pool, the block manager and the scheduler.
 * nb_engine_submit / nb_engine_abort / nb_engine_stats may be called from
 * any thread at any time (they take the engine's queue lock briefly).
 * Sinks are called on the engine thread: they must return quickly (copy the
 * event, signal a condition, write to a pipe) and must not call back into
 * the engine except nb_engine_abort.
 *
 * Each loop step: the scheduler picks this step's work under
 * max_num_seqs and max_num_batched_tokens - running decodes first, then
 * (chunked) prefill of waiting prompts, FCFS - allocating KV blocks and
 * preempting the most recently started sequence (recompute) when blocks run
 * out; one nb_fwd_run over all scheduled tokens; sampling; detokenization
 * and stop-string matching; sink events; finished/aborted sequences return
 * their blocks (full blocks stay in the prefix cache until evicted). */
#ifndef NB_ENGINE_ENGINE_H
#define NB_ENGINE_ENGINE_H

#include "base/limits.h"
#include "base/status.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* nb_kv_dtype and nb_finish_reason are part of the public API
 * (include/nibble_status.h, reached through base/status.h). */

typedef struct nb_engine_config {
    const char *tokenizer_path;      /* NULL: found from the model */
    int n_threads;                   /* <= 0: one per CPU the process may use */
    bool use_mmap;                   /* see nb_model_params */
    int32_t max_model_len;           /* <= 0: the model's context length */
    int32_t max_num_seqs;            /* <= 0: 64 */
    int32_t max_num_batched_tokens;  /* <= 0: max(256, max_num_seqs), or max_num_seqs + max_prefill_tokens
                                      * when that is set (nb_plan_nibble_step_tokens) */
    int32_t max_prefill_tokens;      /* prompt tokens per step (sched.h); <= 0: no separate share (prompt
                                      * chunks take what the decodes leave of the budget) */
    int32_t block_size;              /* <= 0: 16 */
    double memory_utilization;       /* <= 0: 0.90 (of host RAM) */
    uint64_t kv_cache_bytes;         /* > 0: this many bytes of KV pool, overriding the account */
    nb_kv_dtype kv_cache_dtype;
    bool enable_prefix_caching;      /* vLLM's default: on (set by nb_engine_config_defaults) */
    int32_t max_waiting;             /* <= 0: 1024; beyond it submit returns NB_ERR_OVERLOADED */
} nb_engine_config;

void nb_engine_config_defaults(nb_engine_config *c);

#define NB_MAX_TOP_LOGPROBS NB_LIMIT_TOP_LOGPROBS /* old name (base/limits.h) */

/* One event per generated token, and a final one with finish != NONE (which
 * may also carry the last token). `text` is the new UTF-8-complete text
 * (never a split character; stop strings are cut out and text that could
 * still become a stop string is held back until it cannot). */
typedef struct nb_token_event {
    uint64_t request_id;
    int32_t token;             /* -1 when the event carries no token */
    const char *text;
    size_t text_len;
    float logprob;             /* of `token` under the raw model distribution (requests with logprobs >= 0) */
    int32_t n_top;             /* top logprobs (request's `logprobs` value) */
    int32_t top_ids[NB_LIMIT_TOP_LOGPROBS];
    float top_logprobs[NB_LIMIT_TOP_LOGPROBS];
    nb_finish_reason finish;
    const char *error;         /* NB_FINISH_ERROR only */
    int32_t n_prompt_tokens;
    int32_t n_generated;       /* tokens generated so far, this one included */
    int32_t n_cached_tokens;   /* prompt tokens served from the prefix cache */
    double queue_s;            /* submit -> first scheduled */
    double ttft_s;             /* submit -> first token (set from the first token on) */
} nb_token_event;

typedef void (*nb_sink_fn)(void *ud, const nb_token_event *ev);

/* old names (base/limits.h), kept for code written before it */
#define NB_MAX_STOP_STRINGS NB_LIMIT_STOP_STRINGS
#define NB_MAX_STOP_LEN NB_LIMIT_STOP_LEN

typedef struct nb_request_params {
    const int32_t *prompt;     /* copied by submit */
    size_t n_prompt;
    nb_sampling sampling;
    int32_t max_tokens;        /* >= 1; prompt + max_tokens must fit max_model_len */
    int32_t min_tokens;        /* EOS/stop tokens banned and stop strings unchecked until this many were generated */
    bool ignore_eos;
    const char *const *stop;   /* stop strings (copied), at most NB_LIMIT_STOP_STRINGS of NB_LIMIT_STOP_LEN bytes */
    size_t n_stop;
    const int32_t *stop_ids;   /* extra stop token ids (copied) */
    size_t n_stop_ids;
    const int32_t *logit_bias_ids; /* OpenAI's logit_bias (copied): bias i added to token ids[i]'s raw logit, */
    const float *logit_bias;       /* each in [-100, 100] (engine/sampler.h); logprobs stay those of the raw logits */
    size_t n_logit_bias;
    int32_t logprobs;          /* -1: none; 0..NB_LIMIT_TOP_LOGPROBS: logprob of the token + that many top ones */
    bool render_special;       /* control tokens' text goes into the output (default false: left out) */
    struct nb_grammar *grammar; /* output constraint (engine/grammar.h) or NULL; the engine takes it over
                                 * when submit succeeds (and frees it), the caller keeps it otherwise */
    nb_sink_fn sink;
    void *ud;
} nb_request_params;

typedef struct nb_engine_stats {
    int32_t running, waiting, preempted;     /* sequences now */
    uint64_t preemptions_total;
    int64_t kv_blocks_total, kv_blocks_used; /* used = referenced by a live sequence */
    int64_t kv_blocks_cached;                /* free but holding a reusable prefix */
    double kv_usage;                         /* used / total */
    uint64_t prefix_queries_tokens, prefix_hit_tokens; /* hit rate = hits / queries */
    uint64_t prompt_tokens_total, generation_tokens_total;
    uint64_t requests_finished[5];           /* by nb_finish_reason */
    uint64_t steps_total;
    uint64_t pool_benchings_total;           /* late workers benched (base/threadpool.h) */
    double last_step_s;                      /* wall time of the last step */
    int32_t max_model_len, max_num_seqs, max_num_batched_tokens, block_size;
    uint64_t kv_bytes_per_token, kv_pool_bytes, weight_bytes;
    /* nb_engine_create's phases, seconds: model + tokenizer open/parse/map,
     * weight copy/repack into resident memory (0 with mmap), KV pool +
     * scheduler + forward buffers + engine thread */
    double startup_read_s, startup_repack_s, startup_kv_s;
} nb_engine_stats;

typedef struct nb_engine nb_engine;

/* Loads the model and tokenizer, sizes the KV pool from the memory account
 * (plan/), and starts the loop thread. Refuses (NB_ERR_CAPACITY, exit code 2
 * in the CLI) when the pool cannot hold one max_model_len sequence, with the
 * planner's message; warns when max_model_len x max_num_seqs exceeds it. */
nb_status nb_engine_create(const char *model_path, const nb_engine_config *cfg, nb_engine **out)
    __attribute__((warn_unused_result));
/* Aborts every request (sinks get NB_FINISH_ABORT), stops the thread, frees. */
void nb_engine_free(nb_engine *e);

/* Queues a request. NB_ERR_INVALID / NB_ERR_RANGE: bad parameters (message
 * names the parameter and the allowed range, e.g. prompt + max_tokens >
 * max_model_len with both numbers); NB_ERR_OVERLOADED: waiting queue full.
 * On success *id identifies it in events and for abort. */
nb_status nb_engine_submit(nb_engine *e, const nb_request_params *p, uint64_t *id)
    __attribute__((warn_unused_result));
/* Queues n requests at once: all of them are in the waiting queue before the
 * engine's next step, or none is (the first error is returned, the batch's
 * size counts against the waiting limit). ids (n slots) may be NULL. For
 * "N requests at the same moment" (bench model --concurrency), where
 * submitting one by one lets the first finish before the last arrives. */
nb_status nb_engine_submit_batch(nb_engine *e, const nb_request_params *ps, size_t n, uint64_t *ids)
    __attribute__((warn_unused_result));
/* Aborts a request wherever it is; its blocks return at once (before the
 * next step). The sink gets a final NB_FINISH_ABORT event. Unknown or
 * finished ids are ignored. */
void nb_engine_abort(nb_engine *e, uint64_t id);
/* (named _get_: nb_engine_stats is the struct's name) */
void nb_engine_get_stats(nb_engine *e, nb_engine_stats *out);

const nb_model *nb_engine_model(const nb_engine *e);
/* Forward-pass threads, the matmul ISA and the paged-attention kernel in use (for logs). */
int nb_engine_threads(const nb_engine *e);
const char *nb_engine_isa(const nb_engine *e);
const char *nb_engine_attn_isa(const nb_engine *e);
const nb_tokenizer *nb_engine_tokenizer(const nb_engine *e);
/* The startup memory account as printed lines (same text as `nibble plan` for this host). */
const char *nb_engine_account(const nb_engine *e);

#endif
