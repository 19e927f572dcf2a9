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
 * Buckets are vLLM's.
 *
 * Thread-safety: observe and format may be called from any thread (one
 * mutex per nb_metrics). */
#ifndef NB_SERVER_METRICS_H
#define NB_SERVER_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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
    NB_HIST_COUNT
} nb_hist_id;

typedef struct nb_metrics {
    pthread_mutex_t mu;
    nb_histogram h[NB_HIST_COUNT];
} nb_metrics;

void nb_metrics_init(nb_metrics *m);
void nb_metrics_destroy(nb_metrics *m);
void nb_metrics_observe(nb_metrics *m, nb_hist_id h, double seconds);
/* Adds one histogram in exposition format to *buf (malloc'd, grown; *len
 * its length). Labels: `labels` is inserted as is (e.g. model_name="x"). */
void nb_histogram_format(const nb_histogram *h, const char *labels, char **buf, size_t *len, size_t *cap);
/* The whole /metrics page. st may be NULL (engine not loaded yet: gauges 0).
 * Returns a malloc'd string. */
char *nb_metrics_format(nb_metrics *m, const struct nb_engine_stats *st, const char *model_name);

#endif
