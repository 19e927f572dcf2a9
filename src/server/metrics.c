/* Prometheus metrics: histograms observed by the server, counters read from
 * the engine at scrape time. See metrics.h. */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vLLM's bucket boundaries (vllm/v1/metrics/loggers.py). */
static const double TTFT_LE[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                 1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double ITL_LE[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double LAT_LE[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

void nb_metrics_init(nb_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->h[NB_HIST_TTFT] = (nb_histogram){.name = "nibble:time_to_first_token_seconds",
                                        .help = "Time from request arrival to its first generated token.",
                                        .le = TTFT_LE, .n_le = N_OF(TTFT_LE)};
    m->h[NB_HIST_ITL] = (nb_histogram){.name = "nibble:inter_token_latency_seconds",
                                       .help = "Time between consecutive generated tokens of a request.",
                                       .le = ITL_LE, .n_le = N_OF(ITL_LE)};
    m->h[NB_HIST_E2E] = (nb_histogram){.name = "nibble:e2e_request_latency_seconds",
                                       .help = "Time from request arrival to its last event (finished or aborted).",
                                       .le = LAT_LE, .n_le = N_OF(LAT_LE)};
    m->h[NB_HIST_QUEUE] = (nb_histogram){.name = "nibble:request_queue_time_seconds",
                                         .help = "Time a request waited before it was first scheduled.",
                                         .le = LAT_LE, .n_le = N_OF(LAT_LE)};
    m->h[NB_HIST_TPOT] = (nb_histogram){.name = "nibble:request_time_per_output_token_seconds",
                                        .help = "Per request: (last token - first token) / (generated tokens - 1).",
                                        .le = ITL_LE, .n_le = N_OF(ITL_LE)};
}

void nb_metrics_http_response(nb_metrics *m, int status) {
    int c = status / 100;
    if (c != 2 && c != 4 && c != 5) return;
    pthread_mutex_lock(&m->mu);
    m->http_by_class[c]++;
    pthread_mutex_unlock(&m->mu);
}

void nb_metrics_abort(nb_metrics *m, nb_abort_reason r) {
    if (r < 0 || r >= NB_ABORT_COUNT) r = NB_ABORT_OTHER;
    pthread_mutex_lock(&m->mu);
    m->aborts[r]++;
    pthread_mutex_unlock(&m->mu);
}

void nb_metrics_set_startup(nb_metrics *m, const double *seconds) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < NB_PHASE_COUNT; i++) m->startup[i] = seconds[i] > 0 ? seconds[i] : 0;
    m->startup_set = true;
    pthread_mutex_unlock(&m->mu);
}

const char *const nb_abort_reason_names[NB_ABORT_COUNT] = {"client_disconnect", "shutdown", "server_error", "other"};
const char *const nb_startup_phase_names[NB_PHASE_COUNT] = {"read", "repack", "kv_alloc", "warmup", "total"};

void nb_metrics_destroy(nb_metrics *m) { pthread_mutex_destroy(&m->mu); }

void nb_metrics_observe(nb_metrics *m, nb_hist_id id, double s) {
    if (id < 0 || id >= NB_HIST_COUNT || !(s >= 0)) return; /* also drops NaN */
    pthread_mutex_lock(&m->mu);
    nb_histogram *h = &m->h[id];
    int b = 0;
    while (b < h->n_le && s > h->le[b]) b++;
    h->counts[b]++;
    h->sum += s;
    h->count++;
    pthread_mutex_unlock(&m->mu);
}

/* The page being built: the first failed append sticks (the dynbuf has
 * dropped what it held), so a page is whole or not at all. */
typedef struct page {
    nb_dynbuf *b;
    nb_status st;
} page;

static void addf(page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(page *p, const char *fmt, ...) {
    if (p->st != NB_OK) return;
    va_list ap;
    va_start(ap, fmt);
    p->st = nb_dynbuf_vaddf(p->b, fmt, ap);
    va_end(ap);
}

/* Prometheus float formatting: integers without exponent, others %.17g. */
static void fmt_num(char *o, size_t cap, double v) {
    if (v == (double)(int64_t)v && v < 1e15 && v > -1e15) snprintf(o, cap, "%lld", (long long)v);
    else snprintf(o, cap, "%.17g", v);
}

static void histogram(page *p, const nb_histogram *h, const char *labels) {
    const char *sep = labels && *labels ? "," : "";
    if (!labels) labels = "";
    addf(p, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    char le[48];
    for (int b = 0; b < h->n_le; b++) {
        cum += h->counts[b];
        snprintf(le, sizeof le, "%.15g", h->le[b]); /* shortest form of the bound: 0.1, not 0.10000000000000001 */
        if (!strchr(le, '.') && !strchr(le, 'e')) strncat(le, ".0", sizeof le - strlen(le) - 1);
        addf(p, "%s_bucket{%s%sle=\"%s\"} %llu\n", h->name, labels, sep, le, (unsigned long long)cum);
    }
    cum += h->counts[h->n_le];
    addf(p, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", h->name, labels, sep, (unsigned long long)cum);
    char s[48];
    fmt_num(s, sizeof s, h->sum);
    addf(p, "%s_sum{%s} %s\n%s_count{%s} %llu\n", h->name, labels, s, h->name, labels,
         (unsigned long long)h->count);
}

nb_status nb_histogram_format(const nb_histogram *h, const char *labels, nb_dynbuf *b) {
    page p = {b, NB_OK};
    histogram(&p, h, labels);
    return p.st;
}

static void metric(page *p, const char *type, const char *name, const char *help, const char *labels, double v) {
    char s[48];
    fmt_num(s, sizeof s, v);
    addf(p, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %s\n", name, help, name, type, name, labels, s);
}

nb_status nb_metrics_format_into(nb_metrics *m, const struct nb_engine_stats *st, const char *model_name,
                                 nb_dynbuf *out) {
    char labels[512];
    /* Label values escape backslash, quote and newline. */
    size_t o = 0;
    o += (size_t)snprintf(labels, sizeof labels, "model_name=\"");
    for (const char *p = model_name ? model_name : ""; *p && o + 4 < sizeof labels; p++) {
        if (*p == '\\' || *p == '"') { labels[o++] = '\\'; labels[o++] = *p; }
        else if (*p == '\n') { labels[o++] = '\\'; labels[o++] = 'n'; }
        else labels[o++] = *p;
    }
    labels[o++] = '"';
    labels[o] = '\0';

    struct nb_engine_stats z;
    if (!st) {
        memset(&z, 0, sizeof z);
        st = &z;
    }
    page pg = {out, NB_OK}, *b = &pg;
    metric(b, "gauge", "nibble:num_requests_running", "Requests in the running batch.", labels, st->running);
    metric(b, "gauge", "nibble:num_requests_waiting", "Requests waiting to be scheduled.", labels,
           st->waiting);
    metric(b, "gauge", "nibble:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0..1).", labels,
           st->kv_usage);
    metric(b, "gauge", "nibble:kv_cache_blocks_used", "KV-cache blocks referenced by live sequences.",
           labels, (double)st->kv_blocks_used);
    metric(b, "gauge", "nibble:kv_cache_blocks_total", "KV-cache blocks in the pool.", labels,
           (double)st->kv_blocks_total);
    metric(b, "counter", "nibble:num_preemptions_total", "Cumulative number of preemptions.", labels,
           (double)st->preemptions_total);
    double hit = st->prefix_queries_tokens ? (double)st->prefix_hit_tokens / (double)st->prefix_queries_tokens : 0;
    metric(b, "gauge", "nibble:prefix_cache_hit_rate", "Prefix-cache hits / queries, in tokens (0..1).",
           labels, hit);
    metric(b, "counter", "nibble:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
           labels, (double)st->prefix_queries_tokens);
    metric(b, "counter", "nibble:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
           labels, (double)st->prefix_hit_tokens);
    metric(b, "counter", "nibble:prompt_tokens_total", "Prefill tokens processed.", labels,
           (double)st->prompt_tokens_total);
    metric(b, "counter", "nibble:generation_tokens_total", "Generation tokens produced.", labels,
           (double)st->generation_tokens_total);
    metric(b, "counter", "nibble:thread_pool_benchings_total",
           "Times a thread-pool worker was benched for keeping the others waiting (another process shares its core).",
           labels, (double)st->pool_benchings_total);
    addf(b, "# HELP nibble:request_success_total Finished requests by finish reason.\n"
                     "# TYPE nibble:request_success_total counter\n");
    static const nb_finish_reason reasons[] = {NB_FINISH_STOP, NB_FINISH_LENGTH, NB_FINISH_ABORT, NB_FINISH_ERROR};
    static const char *const names[] = {"stop", "length", "abort", "error"}; /* nb_finish_reason_str's */
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        addf(b, "nibble:request_success_total{%s,finished_reason=\"%s\"} %llu\n", labels, names[i],
             (unsigned long long)st->requests_finished[reasons[i]]);
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < NB_HIST_COUNT; i++) histogram(b, &m->h[i], labels);
    addf(b, "# HELP nibble:http_responses_total HTTP responses by status class.\n"
                     "# TYPE nibble:http_responses_total counter\n");
    for (int k = 2; k <= 5; k += k == 2 ? 2 : 1)
        addf(b, "nibble:http_responses_total{%s,code=\"%dxx\"} %llu\n", labels, k,
             (unsigned long long)m->http_by_class[k]);
    addf(b, "# HELP nibble:request_aborts_total Aborted requests by reason.\n"
                     "# TYPE nibble:request_aborts_total counter\n");
    for (int k = 0; k < NB_ABORT_COUNT; k++)
        addf(b, "nibble:request_aborts_total{%s,reason=\"%s\"} %llu\n", labels, nb_abort_reason_names[k],
             (unsigned long long)m->aborts[k]);
    if (m->startup_set) {
        addf(b, "# HELP nibble:startup_seconds Cold-start time by phase (total: process start to ready).\n"
                         "# TYPE nibble:startup_seconds gauge\n");
        for (int k = 0; k < NB_PHASE_COUNT; k++) {
            char v[48];
            fmt_num(v, sizeof v, m->startup[k]);
            addf(b, "nibble:startup_seconds{%s,phase=\"%s\"} %s\n", labels, nb_startup_phase_names[k], v);
        }
    }
    pthread_mutex_unlock(&m->mu);
    return pg.st;
}

char *nb_metrics_format(nb_metrics *m, const struct nb_engine_stats *st, const char *model_name) {
    nb_dynbuf b;
    nb_dynbuf_init(&b, NB_LIMIT_RESPONSE_BYTES);
    if (nb_metrics_format_into(m, st, model_name, &b) != NB_OK) {
        nb_dynbuf_free(&b);
        return NULL;
    }
    return nb_dynbuf_take(&b, NULL);
}
