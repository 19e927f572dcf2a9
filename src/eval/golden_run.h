/* Running a golden set: generation (greedy, fixed seed) and choice scoring,
 * either in-process on the serving engine or against an OpenAI-compatible
 * endpoint (docs/golden.md).
 *
 * In-process: one nb_engine (the same engine `nibble serve` runs); every
 * generation item is submitted at once (the engine batches them under its
 * max_num_seqs), prompts are built exactly as nibble serve builds them
 * (completions: tokenizer with BOS; chat: the model's template family,
 * end-of-turn as a stop token), and choice items are scored teacher-forced
 * by an nb_gscore over the engine's weights.
 *
 * Endpoint: libcurl multi with `parallel` requests in flight; generation
 * through /v1/completions (prompt items) or /v1/chat/completions
 * (messages items) with temperature 0 and the seed; choice items through
 * /v1/completions with echo: true, logprobs: 1, max_tokens: 0 (prompt
 * logprobs in OpenAI's legacy shape). A server that refuses it stops the
 * run with its message. */
#ifndef NB_EVAL_GOLDEN_RUN_H
#define NB_EVAL_GOLDEN_RUN_H

#include "eval/golden.h"

typedef struct nb_golden_run_params {
    const char *model_path;     /* in-process; NULL: the built-in default model */
    const char *tokenizer_path; /* in-process; NULL: found from the model */
    const char *endpoint;       /* non-NULL: the server's base URL (http://host:port or .../v1) */
    const char *model_name;     /* endpoint: the `model` value; NULL: the first of GET /v1/models */
    const char *api_key;        /* endpoint: Bearer token (NULL: none) */
    int parallel;               /* requests / sequences in flight; <= 0: 8 */
    uint64_t seed;              /* sampling seed (greedy decoding does not use it; sent for servers that do) */
    int n_threads;              /* in-process: <= 0 one per CPU the process may use */
    int32_t max_model_len;      /* in-process: <= 0: the model's context, at most 4096 */
    double timeout_s;           /* endpoint: per request; <= 0: 300 */
} nb_golden_run_params;

/* What one item produced. */
typedef struct nb_golden_out {
    char *text;                 /* generated text (choice: the picked option) */
    size_t len;
    double *loglik;             /* choice: per option */
    int *n_tokens;              /* choice: tokens scored per option */
    bool failed;                /* the request for this item failed (error holds why) */
    char error[256];
} nb_golden_out;

typedef struct nb_golden_ident {
    char model_path[4096];      /* in-process */
    char sha256[65];            /* "" when not computed (a directory) */
    char type[32];              /* "gguf", "safetensors", "llama2c" */
    char endpoint[1024];
    char model_name[256];       /* endpoint's model id */
} nb_golden_ident;

/* Runs every item; outs[n_items] is allocated. Fatal problems (model does
 * not load, endpoint unreachable, echo unsupported while the set has choice
 * items) return an error status: NB_ERR_INVALID for bad input, NB_ERR_IO
 * for an unreachable endpoint. Per-item failures are recorded in outs. */
nb_status nb_golden_run(const nb_golden_set *set, const nb_golden_run_params *p, nb_golden_out **outs,
                        nb_golden_ident *ident) __attribute__((warn_unused_result));
void nb_golden_outs_free(nb_golden_out *outs, size_t n);

#endif
