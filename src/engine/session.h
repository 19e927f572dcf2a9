/* A single-sequence session: model + tokenizer + a private KV pool, for the
 * one-shot tools (generate, logits, perplexity). Tokens are appended to the
 * sequence with nb_session_eval, in chunks of at most n_batch per forward
 * call; nb_session_reset starts the sequence over (the cache is reused).
 *
 * The model path is required (the CLI picks the built-in default model,
 * cli/engine_opts.h). */
#ifndef NB_ENGINE_SESSION_H
#define NB_ENGINE_SESSION_H

#include "engine/engine.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"

typedef struct nb_session_params {
    const char *model_path;     /* required */
    const char *tokenizer_path; /* NULL: found from the model */
    int n_threads;              /* <= 0: one per CPU the process may use */
    int32_t n_ctx;              /* tokens the KV cache holds; <= 0: the model's context (capped at 4096) */
    int32_t n_batch;            /* tokens per forward call; <= 0: 512 */
    bool use_mmap;              /* compute from the file mapping (see nb_model_params) */
    nb_kv_dtype kv_dtype;       /* KV cache element type (engine.h); auto = f32 */
} nb_session_params;

typedef struct nb_session {
    nb_model *model;
    nb_tokenizer *tok;
    nb_kv_pool kv;
    nb_fwd *fwd;
    int32_t *blocks;
    int32_t n_blocks;
    int32_t n_ctx, n_batch, n_past;
    int32_t n_vocab;
    float *logits;              /* [n_batch][n_vocab] scratch */
    char model_path[4096];
} nb_session;

nb_status nb_session_open(const nb_session_params *p, nb_session **out) __attribute__((warn_unused_result));
void nb_session_free(nb_session *s);
void nb_session_reset(nb_session *s);

/* Appends n tokens. If all_logits, out receives n x n_vocab logits (caller's
 * buffer); otherwise only the last token's logits (n_vocab). NB_ERR_RANGE
 * when the sequence would exceed n_ctx (message names both numbers). */
nb_status nb_session_eval(nb_session *s, const int32_t *ids, int32_t n, bool all_logits, float *out)
    __attribute__((warn_unused_result));

#endif
