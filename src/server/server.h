/* The OpenAI-compatible HTTP server of `nibble serve`: routes, auth, the
 * request lifecycle (parse -> template -> tokenize -> submit -> wait or
 * stream) and the shutdown sequence.
 *
 * The server talks to the engine through nb_server_backend (the engine's
 * submit / abort / stats plus its tokenizer), so it can start before the
 * model is loaded (/health answers 503 until nb_server_set_ready) and can be
 * tested against a fake engine.
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions,
 * GET /v1/models, GET /health, GET /metrics, POST /admin/drain
 * (docs/serve.md, docs/operations.md).
 *
 * Threads: HTTP connections run on libmicrohttpd's threads (one per
 * connection); backend sinks run on the engine thread. All functions below
 * are called from the owner's thread (the CLI's main thread). */
#ifndef NB_SERVER_SERVER_H
#define NB_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

#define NB_SERVER_DEFAULT_MAX_REQUEST_BYTES NB_LIMIT_REQUEST_BYTES /* old name (base/limits.h) */

typedef struct nb_server_backend {
    void *ctx;
    nb_status (*submit)(void *ctx, const nb_request_params *p, uint64_t *id);
    void (*abort)(void *ctx, uint64_t id);
    void (*stats)(void *ctx, struct nb_engine_stats *out);
    const nb_tokenizer *tok;
    int32_t max_model_len;
    const char *chat_template; /* NULL: the tokenizer's (GGUF / tokenizer_config.json) */
    /* Prompt log-probabilities for /v1/completions echo (NULL: echo refused):
     * lp[i] = log p(ids[i] | ids[<i]), lp[0] unused; n_top alternatives per
     * position into top_ids / top_lps [n][n_top] (eval/golden_score.h). */
    nb_status (*score)(void *ctx, const int32_t *ids, size_t n, int32_t n_top, float *lp, int32_t *top_ids,
                       float *top_lps);
} nb_server_backend;

typedef struct nb_server_config {
    const char *host;               /* NULL: 127.0.0.1 */
    int port;                       /* 0: a free port (nb_server_port) */
    const char *served_model_name;  /* the only accepted `model` value */
    const char *api_key;            /* NULL or "": no auth */
    bool protect_metrics;           /* /health and /metrics need the key too */
    size_t max_request_bytes;       /* 0: NB_LIMIT_REQUEST_BYTES */
    size_t max_response_bytes;      /* 0: NB_LIMIT_RESPONSE_BYTES; the output one request may hold and its
                                       response body: beyond it the answer is a 500 (or, streamed, an
                                       error event), never a truncated text */
    unsigned max_connections;       /* 0: NB_LIMIT_CONNECTIONS */
    unsigned request_timeout_s;     /* 0: NB_LIMIT_REQUEST_TIMEOUT_S; request line + headers + body must arrive in this time */
    const char *allowed_origins;    /* NULL/"": no CORS; "*" or a comma-separated list of origins */
    const char *access_log;         /* NULL: none; "-": stderr; else a file appended to */
} nb_server_config;

typedef struct nb_server nb_server;

/* Starts listening; the server answers 503 to model requests until ready. */
nb_status nb_server_create(const nb_server_config *c, nb_server **out) __attribute__((warn_unused_result));
int nb_server_port(const nb_server *s);
/* The engine is loaded: detects the chat template (logging the family, and a
 * warning for the generic fallback) and starts serving. b is copied. */
void nb_server_set_ready(nb_server *s, const nb_server_backend *b);
/* Drain (admin.h): /health answers 503 "draining" from now on; requests
 * are still served. Also what POST /admin/drain does. */
void nb_server_drain(nb_server *s);
/* True once a drain or shutdown began (SIGTERM or POST /admin/drain). */
bool nb_server_draining(nb_server *s);
/* Seconds since the last generation request arrived (1e9 if none yet):
 * the drain waits for a quiet period so the balancer has stopped sending. */
double nb_server_idle_s(nb_server *s);
/* The server's metrics (to record the cold-start breakdown). */
struct nb_metrics *nb_server_metrics(nb_server *s);
/* Stops accepting connections; requests arriving on open connections get 503. */
void nb_server_begin_shutdown(nb_server *s);
/* Requests accepted and not yet answered completely. */
int nb_server_in_flight(nb_server *s);
/* Client connections the HTTP layer holds (accepted, not yet closed). */
unsigned nb_server_open_connections(nb_server *s);
/* Aborts every request still running in the engine. */
void nb_server_abort_all(nb_server *s);
/* Closes every connection and frees. Call after the engine delivered its
 * final events (nb_engine_free) so that no sink still refers to a request. */
void nb_server_free(nb_server *s);

#endif
