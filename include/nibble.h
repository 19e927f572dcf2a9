/* nibble: run large language models quantized - the embeddable API.
 *
 * One header, self-contained (it needs include/ and the C standard headers
 * only); link libnibble.a and what `pkg-config --libs nibble` lists.
 * tests/embed/embed_example.c is a complete program.
 *
 * Conventions: every function that can fail returns nb_status; on failure
 * nb_errmsg() gives the reason (thread-local, valid until the next failure
 * on the same thread). Objects are opaque handles that come in
 * create/free pairs; the creator owns what it created. Memory the library
 * hands over (token arrays, text) is released with nb_free(). Numbers of
 * nb_status and of the enums never change meaning.
 *
 * Threads: an engine runs its own loop thread. nb_request_submit,
 * nb_request_next, nb_request_abort and nb_engine_read_stats may be called
 * from any thread; one request is read (nb_request_next) by one thread at a
 * time. Tokenizer functions are thread-safe (the tokenizer is read-only).
 *
 *   nb_engine      a loaded model serving requests (continuous batching,
 *                  paged KV cache, prefix caching)
 *   nb_request     one generation: its events (tokens, text, the end) are
 *                  read with nb_request_next
 *   nb_tokenizer   the engine's tokenizer (owned by the engine)
 *   nb_model_info  a model's description, from a file or an engine */
#ifndef NIBBLE_H
#define NIBBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nibble_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIBBLE_VERSION_MAJOR 0
#define NIBBLE_VERSION_MINOR 1
#define NIBBLE_VERSION_PATCH 0
#define NIBBLE_VERSION "0.1.0"

/* The library's version ("0.1.0"); compare with NIBBLE_VERSION to detect a
 * header/library mismatch. */
const char *nb_version(void);

/* Frees memory the library returned (token arrays, decoded text). */
void nb_free(void *p);

typedef struct nb_engine nb_engine;
typedef struct nb_request nb_request;
typedef struct nb_tokenizer nb_tokenizer;
typedef struct nb_model_info nb_model_info;

/* ---- engine ------------------------------------------------------------ */

typedef struct nb_engine_options {
    const char *tokenizer_path;     /* NULL: found from the model */
    int32_t n_threads;              /* <= 0: one per core */
    bool use_mmap;                  /* compute from the file mapping instead of a private copy */
    int32_t max_model_len;          /* <= 0: the model's context length */
    int32_t max_num_seqs;           /* sequences decoded together */
    int32_t max_num_batched_tokens; /* tokens per step (longer prompts are prefilled in chunks); <= 0 (the
                                     * default): max(128, max_num_seqs) */
    int32_t block_size;             /* KV cache tokens per block */
    double memory_utilization;      /* share of host RAM the weights and the KV cache may use, (0, 1] */
    uint64_t kv_cache_bytes;        /* > 0: this many bytes of KV cache, overriding the account */
    nb_kv_dtype kv_cache_dtype;
    bool enable_prefix_caching;
    int32_t max_waiting;            /* queued requests beyond which submit returns NB_ERR_OVERLOADED */
    int32_t max_prefill_tokens;     /* prompt tokens per step on top of the decodes (> 0: a step with
                                     * prefill costs at most the decodes + this many tokens; with
                                     * max_num_batched_tokens <= 0 the budget becomes max_num_seqs +
                                     * this); <= 0 (the default): no separate share */
} nb_engine_options;

/* The defaults (vLLM's where it has one): 64 sequences, max(128,
 * max_num_seqs) tokens per step with no separate prefill share, blocks of
 * 16, 90% of RAM, prefix caching on, 1024 waiting. */
nb_engine_options nb_engine_options_default(void);

/* Loads the model at `model_path` (GGUF, a Hugging Face directory or a
 * llama2.c checkpoint; required) and its tokenizer, sizes the KV cache and
 * starts the engine thread. NB_ERR_CAPACITY when the cache cannot hold one
 * max_model_len sequence. `opts` NULL: the defaults. */
nb_status nb_engine_load(const char *model_path, const nb_engine_options *opts, nb_engine **out);
/* Aborts every request (their last event is NB_FINISH_ABORT), stops the
 * thread, frees the engine. Requests stay valid until nb_request_free. */
void nb_engine_free(nb_engine *e);

/* The engine's tokenizer (owned by the engine, valid until nb_engine_free). */
const nb_tokenizer *nb_engine_get_tokenizer(const nb_engine *e);

typedef struct nb_stats {
    int32_t running, waiting;                   /* sequences now */
    uint64_t preemptions_total;
    int64_t kv_blocks_total, kv_blocks_used;
    double kv_usage;                            /* used / total */
    uint64_t prefix_queries_tokens, prefix_hit_tokens;
    uint64_t prompt_tokens_total, generation_tokens_total;
    uint64_t requests_finished[5];              /* by nb_finish_reason */
    uint64_t steps_total;
    int32_t max_model_len, max_num_seqs, max_num_batched_tokens, block_size;
    uint64_t kv_bytes_per_token, kv_cache_bytes, weight_bytes;
} nb_stats;

/* A consistent snapshot, published after each engine step. */
void nb_engine_read_stats(nb_engine *e, nb_stats *out);

/* ---- requests ---------------------------------------------------------- */

#define NIBBLE_MAX_TOP_LOGPROBS 20
#define NIBBLE_MAX_STOP_STRINGS 16

typedef struct nb_request_options {
    int32_t max_tokens;         /* >= 1; prompt + max_tokens must fit max_model_len */
    int32_t min_tokens;         /* end-of-generation and stop strings ignored until this many */
    bool ignore_eos;
    /* sampling (OpenAI's names and ranges) */
    float temperature;          /* [0, 2]; 0 = greedy */
    int32_t top_k;              /* <= 0: off */
    float top_p;                /* (0, 1]; 1 = off */
    float min_p;                /* [0, 1]; 0 = off */
    float repetition_penalty;   /* (0, 2]; 1 = off */
    float presence_penalty;     /* [-2, 2] */
    float frequency_penalty;    /* [-2, 2] */
    bool has_seed;              /* false: a fresh random seed */
    uint64_t seed;
    const char *const *stop;    /* stop strings (copied), at most NIBBLE_MAX_STOP_STRINGS */
    size_t n_stop;
    const int32_t *stop_ids;    /* extra stop token ids (copied) */
    size_t n_stop_ids;
    int32_t logprobs;           /* -1: none; 0..NIBBLE_MAX_TOP_LOGPROBS: the token's logprob and that many top ones */
    const int32_t *logit_bias_ids; /* OpenAI's logit_bias (copied): logit_bias[i] in [-100, 100] added to */
    const float *logit_bias;       /* token logit_bias_ids[i]'s raw logit before sampling */
    size_t n_logit_bias;
} nb_request_options;

/* 16 tokens, temperature 1, every filter and penalty off, no logprobs. */
nb_request_options nb_request_options_default(void);

/* One step of a request: a generated token with its new text, and at the
 * end an event with finish != NB_FINISH_NONE (which may carry the last
 * token). `text` is UTF-8-complete; stop strings are cut out. */
typedef struct nb_event {
    int32_t token;              /* -1 when the event carries no token */
    const char *text;           /* NUL-terminated too */
    size_t text_len;
    float logprob;              /* of `token` (requests with logprobs >= 0) */
    int32_t n_top;
    int32_t top_ids[NIBBLE_MAX_TOP_LOGPROBS];
    float top_logprobs[NIBBLE_MAX_TOP_LOGPROBS];
    nb_finish_reason finish;
    const char *error;          /* NB_FINISH_ERROR: why; else NULL */
    int32_t n_prompt_tokens;
    int32_t n_generated;        /* tokens generated so far, this one included */
    int32_t n_cached_tokens;    /* prompt tokens served from the prefix cache */
    double queue_s;             /* submit -> first scheduled */
    double ttft_s;              /* submit -> first token */
} nb_event;

/* Queues a generation from `prompt` (token ids, copied). NB_ERR_RANGE /
 * NB_ERR_INVALID name the bad option and its allowed range;
 * NB_ERR_OVERLOADED: the waiting queue is full. `opts` NULL: the defaults. */
nb_status nb_request_submit(nb_engine *e, const int32_t *prompt, size_t n_prompt, const nb_request_options *opts,
                            nb_request **out);
/* Waits for the request's next event and copies it to *ev (its strings stay
 * valid until the next call or nb_request_free). Returns false, without
 * waiting, once the final event was returned. */
bool nb_request_next(nb_request *r, nb_event *ev);
/* Ends the request early: its final event is NB_FINISH_ABORT (unless it
 * had already finished). */
void nb_request_abort(nb_request *r);
/* Aborts the request if it is still running, waits for the engine to let go
 * of it, and frees it. Fine before or after nb_engine_free. */
void nb_request_free(nb_request *r);

/* ---- tokenizer --------------------------------------------------------- */

/* Text -> token ids. add_special: BOS/EOS as the model's vocabulary asks;
 * parse_special: text naming a control token ("<|im_start|>") becomes it.
 * *ids is released with nb_free. */
nb_status nb_tokenizer_encode(const nb_tokenizer *t, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **ids, size_t *n_ids);
/* Token ids -> text (NUL-terminated; released with nb_free). */
nb_status nb_tokenizer_decode(const nb_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                              size_t *len);
int32_t nb_tokenizer_vocab_size(const nb_tokenizer *t);
int32_t nb_tokenizer_bos_id(const nb_tokenizer *t); /* -1 if none */
int32_t nb_tokenizer_eos_id(const nb_tokenizer *t); /* -1 if none */
/* Whether `id` ends a generation (EOS, EOT, ...). */
bool nb_tokenizer_is_end(const nb_tokenizer *t, int32_t id);

/* ---- model description ------------------------------------------------- */

/* Reads a model's description from its file (metadata; no weights are
 * computed on). */
nb_status nb_model_info_load(const char *model_path, nb_model_info **out);
/* The description of an engine's model. */
nb_status nb_engine_model_info(const nb_engine *e, nb_model_info **out);
void nb_model_info_free(nb_model_info *m);

const char *nb_model_info_arch(const nb_model_info *m);   /* "llama", "qwen2", ... */
const char *nb_model_info_format(const nb_model_info *m); /* "gguf", "safetensors", "llama2c" */
int32_t nb_model_info_n_vocab(const nb_model_info *m);
int32_t nb_model_info_n_ctx_train(const nb_model_info *m);
int32_t nb_model_info_n_layer(const nb_model_info *m);
int32_t nb_model_info_n_embd(const nb_model_info *m);
int32_t nb_model_info_n_head(const nb_model_info *m);
int32_t nb_model_info_n_head_kv(const nb_model_info *m);
uint64_t nb_model_info_n_params(const nb_model_info *m);
uint64_t nb_model_info_weight_bytes(const nb_model_info *m);

#ifdef __cplusplus
}
#endif
#endif
