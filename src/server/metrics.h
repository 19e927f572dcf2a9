/* Prometheus metrics for `nibble serve` (text exposition format 0.0.4),
 * named after vLLM's (vllm:* -> nibble:*), with a model_name label.
 *
 * Gauges and counters come from the engine's own counters at scrape time
 * (nb_engine_stats); the four latency histograms are observed by the
 * server as token events arrive:
 *   nibble:time_to_first_token_seconds   submit -> first token
 *   nibble:inter_token_latency_seconds   between consecutive tokens
 *   nibble:e2e_request_latency_seconds   submit -> final event
 *   nibble:request_queue_time_seconds    submit -> first scheduled
 *   nibble:request_time_per_output_token_seconds  per request, TPOT
 * Buckets are vLLM's. Beside them: HTTP responses by status class, aborts
 * by reason and the cold-start phases (docs/metrics.md).
 *
 * Thread-safety: observe and format may be called from any thread (one
 * mutex per nb_metrics). */
#ifndef NB_SERVER_METRICS_H
#define NB_SERVER_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dynbuf.h"
#include "base/limits.h"
#include "engine/engine.h"

#define NB_HIST_MAX_BUCKETS 24

typedef struct nb_histogram {
    const char *name, *help;
    const double *le;   /* upper bounds, ascending (+Inf implicit) */
    int n_le;
    uint64_t counts[NB_HIST_MAX_BUCKETS + 1]; /* per bucket, not cumulative; last = above every bound */
    double sum;
    uint64_t count;
} nb_histogram;

typedef enum nb_hist_id {
    NB_HIST_TTFT = 0,
    NB_HIST_ITL,
    NB_HIST_E2E,
    NB_HIST_QUEUE,
    NB_HIST_TPOT,   /* per request: (last token - first token) / (tokens - 1), requests with >= 2 tokens */
    NB_HIST_COUNT
} nb_hist_id;

/* Why a request was aborted (nibble:request_aborts_total{reason}). */
typedef enum nb_abort_reason {
    NB_ABORT_CLIENT = 0, /* client_disconnect: the client closed the connection */
    NB_ABORT_SHUTDOWN,   /* shutdown: still running at the end of the grace period */
    NB_ABORT_SERVER,     /* server_error: the server could not store the output (out of memory) */
    NB_ABORT_OTHER,      /* other: aborted by the engine */
    NB_ABORT_COUNT
} nb_abort_reason;

/* Cold-start phases (nibble:startup_seconds{phase}). */
typedef enum nb_startup_phase {
    NB_PHASE_READ = 0, /* read: open, parse and map the model file, load the tokenizer */
    NB_PHASE_REPACK,   /* repack: copy/repack the weights into resident memory (0 with --mmap) */
    NB_PHASE_KV,       /* kv_alloc: KV pool, scheduler, forward buffers, engine thread */
    NB_PHASE_WARMUP,   /* warmup: --warmup N decode steps */
    NB_PHASE_TOTAL,    /* total: process start -> ready */
    NB_PHASE_COUNT
} nb_startup_phase;

typedef struct nb_metrics {
    pthread_mutex_t mu;
    nb_histogram h[NB_HIST_COUNT];
    uint64_t http_by_class[6];         /* responses by status class: [2] = 2xx ... [5] = 5xx */
    uint64_t aborts[NB_ABORT_COUNT];
    double startup[NB_PHASE_COUNT];
    bool startup_set;
} nb_metrics;

extern const char *const nb_abort_reason_names[NB_ABORT_COUNT];
extern const char *const nb_startup_phase_names[NB_PHASE_COUNT];

void nb_metrics_init(nb_metrics *m);
void nb_metrics_destroy(nb_metrics *m);
void nb_metrics_observe(nb_metrics *m, nb_hist_id h, double seconds);
/* One HTTP response with this status (counted by class 2xx / 4xx / 5xx;
 * others are ignored). */
void nb_metrics_http_response(nb_metrics *m, int status);
void nb_metrics_abort(nb_metrics *m, nb_abort_reason r);
/* The cold-start breakdown (NB_PHASE_COUNT seconds), exported from now on. */
void nb_metrics_set_startup(nb_metrics *m, const double *seconds);
/* Appends one histogram in exposition format to b. Labels: `labels` is
 * inserted as is (e.g. model_name="x"). A failed append (b's cap, no
 * memory) is returned, and b is then empty (base/dynbuf.h). */
nb_status nb_histogram_format(const nb_histogram *h, const char *labels, nb_dynbuf *b)
    __attribute__((warn_unused_result));
/* The whole /metrics page appended to out. st may be NULL (engine not loaded
 * yet: gauges 0). Not NB_OK (out then empty) when out could not grow: the
 * page is whole or absent, never cut. */
nb_status nb_metrics_format_into(nb_metrics *m, const struct nb_engine_stats *st, const char *model_name,
                                 nb_dynbuf *out) __attribute__((warn_unused_result));
/* The same as a malloc'd string (at most NB_LIMIT_RESPONSE_BYTES); NULL
 * when it could not be built whole (nb_errmsg() says why): answer 500. */
char *nb_metrics_format(nb_metrics *m, const struct nb_engine_stats *st, const char *model_name);

#endif
