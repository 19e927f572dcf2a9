/* The load client: streamed OpenAI requests over libcurl's multi interface on
 * one thread (hundreds of concurrent streams), SSE parsed as bytes arrive.
 *
 * Per request it records: the send time, TTFT (time to the first chunk with
 * content: a non-empty choices[0].text or delta.content/reasoning_content),
 * every gap between content chunks (ITL), E2E (send to the last byte),
 * output tokens (usage.completion_tokens when the server sends usage, else
 * the number of content chunks), TPOT = (E2E - TTFT) / (output tokens - 1),
 * usage.prompt_tokens, the HTTP status and, on failure, a reason (the key
 * counted in the report) and the error text. A request fails on a transport
 * error (refused connection...), a status other than 200, an "error" object
 * in the stream, a stream that ends before "data: [DONE]" or a finish_reason
 * (cut), or no data for --request-timeout seconds (stalled).
 *
 * A level is either `concurrency` C (C requests in flight; a new one starts
 * when one ends) or `request_rate` R (Poisson arrivals, infinite = all at
 * once), for `duration` seconds (requests started before the end are
 * waited for) or `num_prompts` requests, after `warmup` requests that are
 * not counted. When a metrics URL is set, /metrics is read before and after
 * the measured part and every metrics_interval seconds during it (in the
 * same loop), for the peaks of running / waiting / KV usage. */
#ifndef NB_BENCH_CLIENT_H
#define NB_BENCH_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "bench/prom.h"
#include "bench/workload.h"

typedef struct nb_bench_req {
    uint64_t idx;          /* request number (selects the prompt) */
    double t_send;         /* seconds since the level's measured start */
    double ttft, e2e, tpot; /* seconds; NaN when not defined */
    double *itl;            /* gaps between content chunks */
    size_t n_itl;
    int64_t output_tokens, prompt_tokens; /* prompt_tokens: -1 when the server gave no usage */
    int64_t in_words, max_tokens;         /* what was asked */
    int http_status;
    bool ok;
    char *reason; /* failure class, e.g. "HTTP 500", "stream cut before [DONE]" */
    char *error;  /* detail (body or transport message), truncated */
} nb_bench_req;

typedef struct nb_bench_server_view {
    bool available; /* /metrics answered with known names before and after */
    const char *flavor;
    nb_prom before, after;
    double peak[NB_PROM_COUNT]; /* running, waiting, kv_usage: max over before, samples, after */
    int n_samples;
} nb_bench_server_view;

typedef struct nb_bench_config {
    const char *base_url;    /* ends in /v1 */
    const char *metrics_url; /* NULL: no server view */
    const char *api_key;     /* NULL: no Authorization header */
    const nb_bench_workload *wl;
    double duration;        /* > 0: run this long */
    int64_t num_prompts;    /* used when duration == 0 */
    int64_t warmup;         /* uncounted requests before each level */
    double request_timeout; /* seconds without data before a request is failed as stalled */
    double metrics_interval;
    volatile sig_atomic_t *stop; /* set (by SIGINT) to end now: in-flight requests are dropped */
} nb_bench_config;

typedef struct nb_bench_level {
    int concurrency;     /* > 0 in concurrency mode */
    double request_rate; /* > 0 (may be INFINITY) in rate mode */
    nb_bench_req *reqs;  /* the measured requests, in start order */
    size_t n_reqs;
    double wall_s;       /* first send to last completion */
    double client_cpu_s; /* CPU time of this process (user + sys) during the measured part */
    int64_t chunks;      /* SSE events parsed */
    bool interrupted;
    nb_bench_server_view server;
} nb_bench_level;

/* Runs one level (concurrency or request_rate set in *lv by the caller);
 * `first_idx` is the request number of its first request (warm-up included)
 * and is advanced past the ones used. Failed requests are results, not errors:
 * the return is not NB_OK only for setup failures (out of memory, curl). */
nb_status nb_bench_run_level(const nb_bench_config *cfg, nb_bench_level *lv, uint64_t *first_idx);
void nb_bench_level_free(nb_bench_level *lv);

/* Reads url once (5 s timeout) into *out; false when unreachable or not 200 or no known name. */
bool nb_bench_scrape(const char *url, const char *api_key, nb_prom *out);
/* GETs url (5 s timeout) and returns the body (malloc'd) when the status is 200, else NULL. */
char *nb_bench_http_get(const char *url, const char *api_key);

/* Seconds on a monotonic clock. */
double nb_bench_now(void);

#endif
