/* Health body, drain wait, cold-start breakdown, warm-up and the periodic
 * stats line of `nibble serve`; see admin.h. */
#include "server/admin.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "server/respond.h"

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_body(nb_http_resp *rs, int status, json_t *o) {
    rs->body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    rs->body_len = rs->body ? strlen(rs->body) : 0;
    rs->status = rs->body ? status : 500;
}

void nb_admin_health(nb_http_resp *rs, const char *status, bool http_ok, const char *model,
                     const nb_engine_stats *st) {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "model", json_string(model ? model : ""));
    json_object_set_new(o, "running", json_integer(st ? st->running : 0));
    json_object_set_new(o, "waiting", json_integer(st ? st->waiting : 0));
    json_object_set_new(o, "kv_usage", json_real(st ? st->kv_usage : 0.0));
    set_body(rs, http_ok ? 200 : 503, o);
    if (!http_ok) nb_resp_header(rs, "Retry-After", "1");
}

void nb_admin_drain_resp(nb_http_resp *rs, int in_flight) {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("draining"));
    json_object_set_new(o, "in_flight", json_integer(in_flight));
    set_body(rs, 202, o);
}

/* ---- warm-up --------------------------------------------------------------- */

typedef struct warm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    nb_finish_reason finish;
    char error[256];
} warm;

static void warm_sink(void *ud, const nb_token_event *ev) {
    warm *w = ud;
    if (ev->finish == NB_FINISH_NONE) return;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    w->finish = ev->finish;
    if (ev->error) snprintf(w->error, sizeof w->error, "%s", ev->error);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

nb_status nb_admin_warmup(nb_engine *e, int32_t n_steps) {
    if (n_steps <= 0) return NB_OK;
    nb_engine_stats st;
    nb_engine_get_stats(e, &st);
    if (n_steps > st.max_model_len - 1) n_steps = st.max_model_len - 1;
    if (n_steps <= 0) return NB_OK;
    int32_t bos = nb_tokenizer_bos(nb_engine_tokenizer(e));
    int32_t prompt[1] = {bos >= 0 ? bos : 0};
    warm w = {.finish = NB_FINISH_NONE};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    nb_request_params p = {0};
    nb_sampling_defaults(&p.sampling);
    p.sampling.temperature = 0;
    p.prompt = prompt;
    p.n_prompt = 1;
    p.max_tokens = n_steps;
    p.ignore_eos = true;
    p.logprobs = -1;
    p.sink = warm_sink;
    p.ud = &w;
    uint64_t id;
    nb_status s = nb_engine_submit(e, &p, &id);
    if (s == NB_OK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        if (w.finish == NB_FINISH_ERROR || w.finish == NB_FINISH_ABORT)
            s = nb_fail(NB_ERR_INTERNAL, "--warmup: the warm-up request ended with %s%s%s",
                        w.finish == NB_FINISH_ERROR ? "an error" : "an abort", w.error[0] ? ": " : "", w.error);
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return s;
}

/* ---- cold start -------------------------------------------------------------- */

void nb_admin_startup_phases(const nb_engine_stats *st, double warmup_s, double total_s, double *phases) {
    phases[NB_PHASE_READ] = st->startup_read_s;
    phases[NB_PHASE_REPACK] = st->startup_repack_s;
    phases[NB_PHASE_KV] = st->startup_kv_s;
    phases[NB_PHASE_WARMUP] = warmup_s;
    phases[NB_PHASE_TOTAL] = total_s;
}

void nb_admin_startup_line(const double *phases, char *out, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(out, cap, "startup:");
    for (int i = 0; i < NB_PHASE_COUNT && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s %s %.3f s", i ? "," : "", nb_startup_phase_names[i], phases[i]);
}

/* ---- periodic stats line --------------------------------------------------- */

void nb_admin_stats_line(const nb_engine_stats *prev, const nb_engine_stats *cur, double dt, char *out, size_t cap) {
    if (dt <= 0) dt = 1e-9;
    double dp = (double)(cur->prompt_tokens_total - prev->prompt_tokens_total);
    double dg = (double)(cur->generation_tokens_total - prev->generation_tokens_total);
    uint64_t dq = cur->prefix_queries_tokens - prev->prefix_queries_tokens;
    uint64_t dh = cur->prefix_hit_tokens - prev->prefix_hit_tokens;
    snprintf(out, cap,
             "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
             "Waiting: %d reqs, KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%, Preemptions: %llu (+%llu)",
             dp / dt, dg / dt, cur->running, cur->waiting, cur->kv_usage * 100.0,
             dq ? 100.0 * (double)dh / (double)dq : 0.0, (unsigned long long)cur->preemptions_total,
             (unsigned long long)(cur->preemptions_total - prev->preemptions_total));
}

int nb_admin_wait(nb_server *srv, nb_engine *eng, const sigset_t *sigs, double log_interval_s) {
    nb_engine_stats prev;
    nb_engine_get_stats(eng, &prev);
    double t_prev = mono_s();
    struct timespec tick = {0, 100 * 1000000L};
    for (;;) {
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig > 0) return sig;
        if (sig < 0 && errno != EAGAIN && errno != EINTR) return SIGTERM; /* cannot wait: behave as asked to stop */
        if (nb_server_draining(srv)) return 0;
        if (log_interval_s > 0 && mono_s() - t_prev >= log_interval_s) {
            nb_engine_stats cur;
            nb_engine_get_stats(eng, &cur);
            double t = mono_s();
            char line[512];
            nb_admin_stats_line(&prev, &cur, t - t_prev, line, sizeof line);
            fprintf(stderr, "nibble serve: %s\n", line);
            prev = cur;
            t_prev = t;
        }
    }
}
