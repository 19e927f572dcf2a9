/* The load client's curl multi loop (client.h). */
#include "bench/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/sse.h"
#include "bench/stats.h"

#define ERRBODY_MAX 1024
#define METRICS_MAX ((size_t)8 << 20)

double nb_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec * 1e-6;
}

static void curl_init_once(void) {
    static bool done;
    if (!done) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        done = true;
    }
}

typedef struct run run;

typedef struct xfer {
    run *R;
    CURL *h;
    struct curl_slist *hdrs;
    char *body;
    nb_sse sse;
    long ri; /* index in lv->reqs; -1 for warm-up and metrics */
    bool is_metrics, status_checked, error_status, sse_bad, done, finished, stalled;
    double t_send, t_first, t_last_chunk, t_last_byte, t_now;
    double *itl;
    size_t n_itl, cap_itl;
    int64_t content_chunks, usage_out, usage_prompt, events;
    char *stream_err;
    char *buf;
    size_t blen, bcap;
    char errbuf[CURL_ERROR_SIZE];
} xfer;

struct run {
    const nb_bench_config *cfg;
    nb_bench_level *lv;
    CURLM *m;
    xfer **live;
    size_t n_live, cap_live;
    size_t cap_reqs;
    double t0;
    int64_t chunks;
    uint64_t *next_idx;
    xfer *mx; /* the metrics sample in flight */
};

/* ---- buffers ----------------------------------------------------------------- */

static void buf_add(xfer *x, const char *p, size_t n, size_t max) {
    if (x->blen + n > max) n = max > x->blen ? max - x->blen : 0;
    if (!n) return;
    if (x->blen + n + 1 > x->bcap) {
        size_t c = x->bcap ? x->bcap : 1024;
        while (c < x->blen + n + 1) c *= 2;
        char *b = realloc(x->buf, c);
        if (!b) return;
        x->buf = b;
        x->bcap = c;
    }
    memcpy(x->buf + x->blen, p, n);
    x->blen += n;
    x->buf[x->blen] = '\0';
}

/* ---- one streamed response ------------------------------------------------------- */

static void on_event(void *ud, const char *d, size_t n) {
    xfer *x = ud;
    x->R->chunks++;
    x->events++;
    if (n == 6 && !memcmp(d, "[DONE]", 6)) {
        x->done = true;
        return;
    }
    json_t *o = json_loadb(d, n, 0, NULL);
    if (!o) {
        if (!x->stream_err) x->stream_err = nb_strndup(d, n < 200 ? n : 200);
        return;
    }
    json_t *err = json_object_get(o, "error");
    if (err && !json_is_null(err) && !x->stream_err) {
        json_t *msg = json_is_object(err) ? json_object_get(err, "message") : err;
        x->stream_err = json_is_string(msg) ? nb_strdup(json_string_value(msg)) : json_dumps(err, JSON_COMPACT);
    }
    json_t *ch = json_object_get(o, "choices");
    if (json_is_array(ch) && json_array_size(ch) > 0) {
        json_t *c0 = json_array_get(ch, 0), *t = json_object_get(c0, "text");
        if (!json_is_string(t)) {
            json_t *dl = json_object_get(c0, "delta");
            t = json_is_object(dl) ? json_object_get(dl, "content") : NULL;
            if (!json_is_string(t) || json_string_length(t) == 0)
                t = json_is_object(dl) ? json_object_get(dl, "reasoning_content") : NULL;
        }
        if (json_is_string(t) && json_string_length(t) > 0) {
            double now = x->t_now;
            if (x->content_chunks == 0) x->t_first = now;
            else {
                if (x->n_itl == x->cap_itl) {
                    size_t c = x->cap_itl ? x->cap_itl * 2 : 64;
                    double *ni = realloc(x->itl, c * sizeof *ni);
                    if (ni) { x->itl = ni; x->cap_itl = c; }
                }
                if (x->n_itl < x->cap_itl) x->itl[x->n_itl++] = now - x->t_last_chunk;
            }
            x->t_last_chunk = now;
            x->content_chunks++;
        }
        json_t *fr = json_object_get(c0, "finish_reason");
        if (json_is_string(fr)) x->finished = true;
    }
    json_t *u = json_object_get(o, "usage");
    if (json_is_object(u)) {
        json_t *c = json_object_get(u, "completion_tokens"), *p = json_object_get(u, "prompt_tokens");
        if (json_is_integer(c)) x->usage_out = json_integer_value(c);
        if (json_is_integer(p)) x->usage_prompt = json_integer_value(p);
    }
    json_decref(o);
}

static size_t on_write(char *p, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    double t = nb_bench_now();
    x->t_last_byte = t;
    if (x->is_metrics) {
        buf_add(x, p, n, METRICS_MAX);
        return n;
    }
    if (!x->status_checked) {
        long code = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        x->status_checked = true;
        x->error_status = code != 200;
    }
    if (x->error_status) {
        buf_add(x, p, n, ERRBODY_MAX);
        return n;
    }
    x->t_now = t;
    if (nb_sse_feed(&x->sse, p, n) != NB_OK) {
        x->sse_bad = true;
        return 0; /* aborts the transfer */
    }
    return n;
}

static void xfer_free(xfer *x) {
    if (!x) return;
    if (x->h) curl_easy_cleanup(x->h);
    curl_slist_free_all(x->hdrs);
    free(x->body);
    nb_sse_free(&x->sse);
    free(x->itl);
    free(x->stream_err);
    free(x->buf);
    free(x);
}

static struct curl_slist *auth_headers(struct curl_slist *h, const char *key) {
    if (key && *key) {
        size_t n = strlen(key) + 32;
        char *a = malloc(n);
        if (a) {
            snprintf(a, n, "Authorization: Bearer %s", key);
            h = curl_slist_append(h, a);
            free(a);
        }
    }
    return h;
}

static bool live_add(run *R, xfer *x) {
    if (R->n_live == R->cap_live) {
        size_t c = R->cap_live ? R->cap_live * 2 : 64;
        xfer **nl = realloc(R->live, c * sizeof *nl);
        if (!nl) return false;
        R->live = nl;
        R->cap_live = c;
    }
    R->live[R->n_live++] = x;
    return true;
}

static void live_remove(run *R, xfer *x) {
    for (size_t i = 0; i < R->n_live; i++)
        if (R->live[i] == x) {
            R->live[i] = R->live[--R->n_live];
            return;
        }
}

static nb_status start_request(run *R, bool warm) {
    const nb_bench_config *cfg = R->cfg;
    xfer *x = calloc(1, sizeof *x);
    if (!x) return nb_fail(NB_ERR_NOMEM, "bench: out of memory");
    x->R = R;
    x->ri = -1;
    x->usage_out = x->usage_prompt = -1;
    x->t_first = NAN;
    nb_sse_init(&x->sse, on_event, x);
    uint64_t idx = (*R->next_idx)++;
    int64_t in_words = 0, max_tokens = 0;
    x->body = nb_bench_workload_body(cfg->wl, idx, &in_words, &max_tokens);
    x->h = curl_easy_init();
    if (!x->body || !x->h) {
        xfer_free(x);
        return nb_fail(NB_ERR_NOMEM, "bench: out of memory (request body or curl handle)");
    }
    char url[2048];
    snprintf(url, sizeof url, "%s%s", cfg->base_url, cfg->wl->chat ? "/chat/completions" : "/completions");
    x->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Accept: text/event-stream");
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    x->hdrs = auth_headers(x->hdrs, cfg->api_key);
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(x->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->request_timeout * 1000));
    if (!warm) {
        nb_bench_level *lv = R->lv;
        if (lv->n_reqs == R->cap_reqs) {
            size_t c = R->cap_reqs ? R->cap_reqs * 2 : 64;
            nb_bench_req *nr = realloc(lv->reqs, c * sizeof *nr);
            if (!nr) {
                xfer_free(x);
                return nb_fail(NB_ERR_NOMEM, "bench: out of memory");
            }
            lv->reqs = nr;
            R->cap_reqs = c;
        }
        x->ri = (long)lv->n_reqs++;
        nb_bench_req *r = &lv->reqs[x->ri];
        memset(r, 0, sizeof *r);
        r->idx = idx;
        r->in_words = in_words;
        r->max_tokens = max_tokens;
        r->ttft = r->tpot = r->e2e = NAN;
        r->prompt_tokens = -1;
        r->http_status = -1; /* still running: dropped if the run is interrupted */
    }
    x->t_send = nb_bench_now();
    if (x->ri >= 0) R->lv->reqs[x->ri].t_send = x->t_send - R->t0;
    if (!live_add(R, x) || curl_multi_add_handle(R->m, x->h) != CURLM_OK) {
        live_remove(R, x);
        if (x->ri >= 0) R->lv->n_reqs--;
        xfer_free(x);
        return nb_fail(NB_ERR_INTERNAL, "bench: curl_multi_add_handle failed");
    }
    return NB_OK;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    char b[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return nb_strdup(b);
}

/* Sanitized copy for the CSV and the terminal: no control characters, at most 300 bytes. */
static char *clean(const char *s) {
    char b[301];
    size_t n = 0;
    for (; s && *s && n < 300; s++) b[n++] = ((unsigned char)*s < 32) ? ' ' : *s;
    b[n] = '\0';
    return nb_strdup(b);
}

static void update_peaks(nb_bench_server_view *sv, const nb_prom *p) {
    static const nb_prom_field g[] = {NB_PROM_RUNNING, NB_PROM_WAITING, NB_PROM_KV_USAGE};
    for (size_t i = 0; i < 3; i++)
        if (p->has[g[i]] && p->v[g[i]] > sv->peak[g[i]]) sv->peak[g[i]] = p->v[g[i]];
}

static void finish_xfer(run *R, xfer *x, CURLcode rc) {
    curl_multi_remove_handle(R->m, x->h);
    live_remove(R, x);
    if (x->is_metrics) {
        long code = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        if (rc == CURLE_OK && code == 200 && x->buf) {
            nb_prom p;
            nb_prom_parse(x->buf, x->blen, &p);
            update_peaks(&R->lv->server, &p);
            R->lv->server.n_samples++;
        }
        R->mx = NULL;
        xfer_free(x);
        return;
    }
    if (x->ri < 0) {
        xfer_free(x);
        return;
    }
    nb_bench_req *r = &R->lv->reqs[x->ri];
    long code = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
    r->http_status = (int)code;
    double end = x->t_last_byte > 0 ? x->t_last_byte : nb_bench_now();
    r->e2e = end - x->t_send;
    r->output_tokens = x->usage_out >= 0 ? x->usage_out : x->content_chunks;
    r->prompt_tokens = x->usage_prompt;
    if (x->stalled) {
        r->reason = fmt("stalled: no data for %g s (--request-timeout)", R->cfg->request_timeout);
        r->error = fmt("no byte received for %g s", R->cfg->request_timeout);
    } else if (x->sse_bad) {
        r->reason = nb_strdup("bad SSE stream");
        r->error = clean(nb_errmsg());
    } else if (rc != CURLE_OK && !(code == 200 && (x->done || x->finished) && rc == CURLE_PARTIAL_FILE)) {
        r->reason = nb_strdup(curl_easy_strerror(rc));
        r->error = clean(x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    } else if (code != 200) {
        r->reason = fmt("HTTP %ld", code);
        r->error = clean(x->buf ? x->buf : "");
    } else if (x->stream_err) {
        r->reason = nb_strdup("error in stream");
        r->error = clean(x->stream_err);
    } else if (x->events == 0) {
        char *ct = NULL;
        curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
        r->reason = nb_strdup("no SSE events (not a streamed response)");
        r->error = fmt("HTTP 200 with Content-Type '%s' and no 'data:' event", ct ? ct : "(none)");
    } else if (!x->done && !x->finished) {
        r->reason = nb_strdup("stream cut before [DONE]");
        r->error = fmt("stream ended after %lld content chunks without a finish_reason or [DONE]",
                       (long long)x->content_chunks);
    } else {
        r->ok = true;
        if (!isnan(x->t_first)) {
            r->ttft = x->t_first - x->t_send;
            if (r->output_tokens > 1) r->tpot = (r->e2e - r->ttft) / (double)(r->output_tokens - 1);
        }
        r->itl = x->itl;
        r->n_itl = x->n_itl;
        x->itl = NULL;
    }
    if (!r->ok) {
        r->ttft = r->tpot = NAN;
    }
    xfer_free(x);
}

static void drain(run *R) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(R->m, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        xfer *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x) finish_xfer(R, x, msg->data.result);
    }
}

static bool stopped(const run *R) { return R->cfg->stop && *R->cfg->stop; }

static void start_metrics(run *R) {
    xfer *x = calloc(1, sizeof *x);
    if (!x) return;
    x->R = R;
    x->ri = -1;
    x->is_metrics = true;
    x->h = curl_easy_init();
    if (!x->h) { free(x); return; }
    x->hdrs = auth_headers(NULL, R->cfg->api_key);
    curl_easy_setopt(x->h, CURLOPT_URL, R->cfg->metrics_url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, 5000L);
    x->t_send = nb_bench_now();
    if (!live_add(R, x)) { xfer_free(x); return; }
    if (curl_multi_add_handle(R->m, x->h) != CURLM_OK) { live_remove(R, x); xfer_free(x); return; }
    R->mx = x;
}

/* One phase: `count` requests (or until `duration` s pass when count == 0),
 * at most `conc` in flight (0 = no limit), Poisson arrivals when rate > 0. */
static nb_status phase(run *R, bool warm, int64_t count, double duration, int conc, double rate, uint64_t seed) {
    nb_bench_rng rng;
    nb_bench_rng_seed(&rng, seed);
    double t0 = nb_bench_now(), next_arrival = t0, next_sample = t0;
    int64_t launched = 0;
    bool launching = true;
    const nb_bench_config *cfg = R->cfg;
    for (;;) {
        double now = nb_bench_now();
        if (stopped(R)) break;
        if (launching) {
            for (;;) {
                bool more = count > 0 ? launched < count : now - t0 < duration;
                if (!more) { launching = false; break; }
                size_t inflight = R->n_live - (R->mx ? 1 : 0);
                if (rate > 0) {
                    if (next_arrival > now) break;
                } else if (conc > 0 && inflight >= (size_t)conc) break;
                NB_TRY(start_request(R, warm));
                launched++;
                if (rate > 0) next_arrival += nb_bench_rng_exp(&rng, rate);
            }
        }
        size_t inflight = R->n_live - (R->mx ? 1 : 0);
        if (!launching && inflight == 0) break;
        if (!warm && cfg->metrics_url && cfg->metrics_interval > 0 && !R->mx && now >= next_sample) {
            start_metrics(R);
            next_sample = now + cfg->metrics_interval;
        }
        int running = 0;
        curl_multi_perform(R->m, &running);
        drain(R);
        /* stalled requests: no byte for request_timeout seconds */
        now = nb_bench_now();
        for (size_t i = 0; i < R->n_live;) {
            xfer *x = R->live[i];
            double last = x->t_last_byte > x->t_send ? x->t_last_byte : x->t_send;
            if (!x->is_metrics && now - last > cfg->request_timeout) {
                x->stalled = true;
                finish_xfer(R, x, CURLE_OPERATION_TIMEDOUT); /* removes live[i] */
                continue;
            }
            i++;
        }
        double wait = 0.02;
        if (launching && rate > 0) wait = fmin(wait, next_arrival - now);
        if (launching && count == 0) wait = fmin(wait, t0 + duration - now);
        if (!warm && cfg->metrics_url && !R->mx) wait = fmin(wait, next_sample - now);
        int ms = wait > 0 ? (int)ceil(wait * 1000) : 0;
        if (ms > 0) curl_multi_poll(R->m, NULL, 0, ms, NULL);
    }
    if (stopped(R)) { /* drop what is in flight */
        while (R->n_live) {
            xfer *x = R->live[R->n_live - 1];
            curl_multi_remove_handle(R->m, x->h);
            R->n_live--;
            if (x == R->mx) R->mx = NULL;
            xfer_free(x);
        }
        R->lv->interrupted = true;
        /* requests still running have http_status -1: remove them */
        size_t k = 0;
        for (size_t i = 0; i < R->lv->n_reqs; i++) {
            if (R->lv->reqs[i].http_status == -1 && !R->lv->reqs[i].reason && !R->lv->reqs[i].ok) continue;
            R->lv->reqs[k++] = R->lv->reqs[i];
        }
        R->lv->n_reqs = k;
    }
    return NB_OK;
}

static size_t get_write(char *p, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    buf_add(x, p, sz * nm, METRICS_MAX);
    return sz * nm;
}

char *nb_bench_http_get(const char *url, const char *api_key) {
    curl_init_once();
    xfer x;
    memset(&x, 0, sizeof x);
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    struct curl_slist *hd = auth_headers(NULL, api_key);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, get_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    if (rc != CURLE_OK || code != 200) {
        free(x.buf);
        return NULL;
    }
    if (!x.buf) x.buf = nb_strdup("");
    return x.buf;
}

bool nb_bench_scrape(const char *url, const char *api_key, nb_prom *out) {
    memset(out, 0, sizeof *out);
    char *t = nb_bench_http_get(url, api_key);
    if (!t) return false;
    nb_prom_parse(t, strlen(t), out);
    free(t);
    return out->flavor != NULL;
}

nb_status nb_bench_run_level(const nb_bench_config *cfg, nb_bench_level *lv, uint64_t *first_idx) {
    curl_init_once();
    run R;
    memset(&R, 0, sizeof R);
    R.cfg = cfg;
    R.lv = lv;
    R.next_idx = first_idx;
    lv->reqs = NULL;
    lv->n_reqs = 0;
    memset(&lv->server, 0, sizeof lv->server);
    R.m = curl_multi_init();
    if (!R.m) return nb_fail(NB_ERR_INTERNAL, "bench: curl_multi_init failed");
    curl_multi_setopt(R.m, CURLMOPT_MAXCONNECTS, 4096L);
    bool rate_mode = lv->concurrency <= 0;
    uint64_t seed = cfg->wl->seed ^ (0xa5a5a5a5ull + *first_idx);
    nb_status st = NB_OK;
    if (cfg->warmup > 0) {
        int wc = rate_mode ? (int)(cfg->warmup < 64 ? cfg->warmup : 64) : lv->concurrency;
        st = phase(&R, true, cfg->warmup, 0, wc, 0, seed);
    }
    if (st == NB_OK && !stopped(&R)) {
        nb_bench_server_view *sv = &lv->server;
        if (cfg->metrics_url && nb_bench_scrape(cfg->metrics_url, cfg->api_key, &sv->before)) {
            sv->flavor = sv->before.flavor;
            update_peaks(sv, &sv->before);
        }
        double c0 = cpu_s();
        R.chunks = 0; /* the warm-up's do not count */
        R.t0 = nb_bench_now();
        int64_t count = cfg->duration > 0 ? 0 : cfg->num_prompts;
        st = phase(&R, false, count, cfg->duration, rate_mode ? 0 : lv->concurrency,
                   rate_mode ? lv->request_rate : 0, seed + 1);
        double t_end = R.t0;
        for (size_t i = 0; i < lv->n_reqs; i++) {
            double e = R.t0 + lv->reqs[i].t_send + (isnan(lv->reqs[i].e2e) ? 0 : lv->reqs[i].e2e);
            if (e > t_end) t_end = e;
        }
        lv->wall_s = t_end - R.t0;
        lv->client_cpu_s = cpu_s() - c0;
        lv->chunks = R.chunks;
        /* The server may count a request a moment after its last byte: while
         * it still shows requests running, read again (50 ms apart, 1 s at most;
         * a server with other traffic keeps some running). */
        for (int tries = 0; sv->flavor && tries < 20 && !stopped(&R); tries++) {
            if (!nb_bench_scrape(cfg->metrics_url, cfg->api_key, &sv->after)) break;
            sv->available = true;
            update_peaks(sv, &sv->after);
            if (!sv->after.has[NB_PROM_RUNNING] || sv->after.v[NB_PROM_RUNNING] <= 0) break;
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    while (R.n_live) {
        xfer *x = R.live[--R.n_live];
        curl_multi_remove_handle(R.m, x->h);
        xfer_free(x);
    }
    free(R.live);
    curl_multi_cleanup(R.m);
    if (stopped(&R)) lv->interrupted = true;
    return st;
}

void nb_bench_level_free(nb_bench_level *lv) {
    for (size_t i = 0; i < lv->n_reqs; i++) {
        free(lv->reqs[i].itl);
        free(lv->reqs[i].reason);
        free(lv->reqs[i].error);
    }
    free(lv->reqs);
    lv->reqs = NULL;
    lv->n_reqs = 0;
}
