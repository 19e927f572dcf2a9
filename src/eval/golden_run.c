/* Running a golden set in-process or against an endpoint; see golden_run.h. */
#include "eval/golden_run.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/sha256.h"
#include "engine/engine.h"
#include "eval/golden_score.h"
#include "formats/source.h"
#include "model/synth.h"
#include "tokenizer/chat_template.h"

#define DEFAULT_PARALLEL 8
#define LOCAL_CTX_CAP 4096

void nb_golden_outs_free(nb_golden_out *outs, size_t n) {
    if (!outs) return;
    for (size_t i = 0; i < n; i++) {
        free(outs[i].text);
        free(outs[i].loglik);
        free(outs[i].n_tokens);
    }
    free(outs);
}

static void set_text(nb_golden_out *o, const char *s, size_t n) {
    free(o->text);
    o->text = malloc(n + 1);
    if (!o->text) { o->len = 0; return; }
    memcpy(o->text, s, n);
    o->text[n] = '\0';
    o->len = n;
}

static nb_status alloc_choice(const nb_golden_item *it, nb_golden_out *o) {
    o->loglik = calloc(it->check.n_options, sizeof *o->loglik);
    o->n_tokens = calloc(it->check.n_options, sizeof *o->n_tokens);
    if (!o->loglik || !o->n_tokens) return nb_fail(NB_ERR_NOMEM, "out of memory");
    return NB_OK;
}

static void pick_choice(const nb_golden_item *it, nb_golden_out *o) {
    size_t best = 0;
    for (size_t k = 1; k < it->check.n_options; k++)
        if (o->loglik[k] > o->loglik[best]) best = k;
    set_text(o, it->check.options[best], strlen(it->check.options[best]));
}

/* =========================================================================
 * In-process
 * ========================================================================= */

typedef struct local_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} local_run;

typedef struct local_item {
    local_run *run;
    nb_golden_out *out;
    char *buf;
    size_t len, cap;
    bool oom;
} local_item;

static void local_sink(void *ud, const nb_token_event *ev) {
    local_item *li = ud;
    if (ev->text_len) {
        if (li->len + ev->text_len + 1 > li->cap) {
            size_t cap = li->cap ? li->cap : 256;
            while (cap < li->len + ev->text_len + 1) cap *= 2;
            char *b = realloc(li->buf, cap);
            if (!b) li->oom = true;
            else { li->buf = b; li->cap = cap; }
        }
        if (!li->oom) {
            memcpy(li->buf + li->len, ev->text, ev->text_len);
            li->len += ev->text_len;
            li->buf[li->len] = '\0';
        }
    }
    if (ev->finish == NB_FINISH_NONE) return;
    if (ev->finish == NB_FINISH_ERROR || ev->finish == NB_FINISH_ABORT) {
        li->out->failed = true;
        snprintf(li->out->error, sizeof li->out->error, "%s",
                 ev->error ? ev->error : ev->finish == NB_FINISH_ABORT ? "aborted" : "engine error");
    }
    pthread_mutex_lock(&li->run->mu);
    li->run->pending--;
    pthread_cond_broadcast(&li->run->cv);
    pthread_mutex_unlock(&li->run->mu);
}

/* The prompt tokens exactly as nibble serve builds them (server.c build_prompt). */
typedef struct chat_ctx {
    nb_chat_template *tmpl; /* the model's, or the generic one (as nibble serve falls back) */
    char bos_text[64], eos_text[64];
    int32_t eot_id;
} chat_ctx;

static void chat_ctx_init(const nb_tokenizer *tok, chat_ctx *c) {
    if (nb_chat_template_create(nb_tokenizer_chat_template(tok), "the model's", &c->tmpl) != NB_OK &&
        nb_chat_template_create(NULL, NULL, &c->tmpl) != NB_OK)
        c->tmpl = NULL;
    int32_t bos = nb_tokenizer_bos(tok), eos = nb_tokenizer_eos(tok);
    c->bos_text[0] = c->eos_text[0] = '\0';
    if (bos >= 0) {
        size_t n = nb_token_piece(tok, bos, true, c->bos_text, sizeof c->bos_text - 1);
        c->bos_text[NB_MIN(n, sizeof c->bos_text - 1)] = '\0';
    }
    if (eos >= 0) {
        size_t n = nb_token_piece(tok, eos, true, c->eos_text, sizeof c->eos_text - 1);
        c->eos_text[NB_MIN(n, sizeof c->eos_text - 1)] = '\0';
    }
    const char *eot = c->tmpl ? nb_chat_end_of_turn(c->tmpl) : NULL;
    c->eot_id = eot ? nb_tokenizer_find(tok, eot, strlen(eot)) : -1;
}

static nb_status build_ids(const nb_tokenizer *tok, const chat_ctx *cc, const nb_golden_item *it, int32_t **ids,
                           size_t *n) {
    *ids = NULL;
    *n = 0;
    if (it->prompt) {
        NB_TRY(nb_tokenize(tok, it->prompt, strlen(it->prompt), true, false, ids, n));
    } else {
        nb_chat_msg *m = calloc(it->n_messages, sizeof *m);
        if (!m) return nb_fail(NB_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < it->n_messages; i++) {
            nb_chat_role_parse(it->messages[i].role, &m[i].role);
            m[i].content = it->messages[i].content;
        }
        if (!cc->tmpl) {
            free(m);
            return nb_fail(NB_ERR_NOMEM, "out of memory for the chat template");
        }
        bool generic = nb_chat_template_is_generic(cc->tmpl);
        char *text = NULL;
        nb_status st = nb_chat_render(cc->tmpl, m, it->n_messages, true, generic ? "" : cc->bos_text, cc->eos_text,
                                      &text);
        free(m);
        if (st != NB_OK) return st;
        st = nb_tokenize(tok, text, strlen(text), false, true, ids, n);
        free(text);
        if (st != NB_OK) return st;
        int32_t bos = nb_tokenizer_bos(tok);
        if (generic && nb_tokenizer_add_bos(tok) && bos >= 0) {
            int32_t *u = realloc(*ids, (*n + 1) * sizeof *u);
            if (!u) return nb_fail(NB_ERR_NOMEM, "out of memory");
            memmove(u + 1, u, *n * sizeof *u);
            u[0] = bos;
            *ids = u;
            (*n)++;
        }
    }
    if (*n == 0) {
        int32_t bos = nb_tokenizer_bos(tok);
        if (bos < 0) return nb_fail(NB_ERR_INVALID, "the prompt is empty and the model has no BOS token to start from");
        free(*ids);
        *ids = malloc(sizeof **ids);
        if (!*ids) return nb_fail(NB_ERR_NOMEM, "out of memory");
        (*ids)[0] = bos;
        *n = 1;
    }
    return NB_OK;
}

/* Scores option k of a choice item: the continuation's log-likelihood. */
static nb_status score_option(nb_gscore *sc, const nb_tokenizer *tok, const nb_golden_item *it, size_t k,
                              double *ll, int *nt) {
    size_t pl = strlen(it->prompt), ol = strlen(it->check.options[k]);
    char *text = malloc(pl + ol + 1);
    if (!text) return nb_fail(NB_ERR_NOMEM, "out of memory");
    memcpy(text, it->prompt, pl);
    memcpy(text + pl, it->check.options[k], ol + 1);
    int32_t *ids = NULL;
    size_t n = 0;
    nb_status st = nb_tokenize(tok, text, pl + ol, true, false, &ids, &n);
    free(text);
    if (st != NB_OK) return st;
    float *lp = malloc((n ? n : 1) * sizeof *lp);
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!lp || !off) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    if (st == NB_OK && n == 0) st = nb_fail(NB_ERR_INVALID, "prompt + option tokenize to nothing");
    if (st == NB_OK) st = nb_gscore_run(sc, ids, n, 0, lp, NULL, NULL);
    if (st == NB_OK) st = nb_gscore_offsets(tok, ids, n, off);
    if (st == NB_OK) *ll = nb_gscore_continuation(lp, off, n, pl, nt);
    free(lp);
    free(off);
    free(ids);
    return st;
}

static nb_status run_local(const nb_golden_set *set, const nb_golden_run_params *p, nb_golden_out *outs,
                           nb_golden_ident *ident) {
    char path[4096];
    nb_status st;
    if (p->model_path) snprintf(path, sizeof path, "%s", p->model_path);
    else NB_TRY(nb_default_model_path(path, sizeof path));
    snprintf(ident->model_path, sizeof ident->model_path, "%s", path);
    nb_source src;
    NB_TRY(nb_source_open(path, &src));
    snprintf(ident->type, sizeof ident->type, "%s", src.format ? src.format : "?");
    int64_t model_ctx = src.hp.n_ctx_train;
    if (src.hp.sliding_window > 0 && src.hp.sliding_window < model_ctx) model_ctx = src.hp.sliding_window;
    nb_source_close(&src);
    if (!nb_is_dir(path)) NB_TRY(nb_sha256_file(path, ident->sha256));
    int32_t mml = p->max_model_len > 0 ? p->max_model_len : (int32_t)NB_MIN(model_ctx, LOCAL_CTX_CAP);
    if (mml > model_ctx) mml = (int32_t)model_ctx;

    nb_engine_config ec;
    nb_engine_config_defaults(&ec);
    ec.tokenizer_path = p->tokenizer_path;
    ec.n_threads = p->n_threads;
    ec.max_model_len = mml;
    ec.max_num_seqs = p->parallel > 0 ? p->parallel : DEFAULT_PARALLEL;
    nb_engine *e = NULL;
    NB_TRY(nb_engine_create(path, &ec, &e));
    const nb_tokenizer *tok = nb_engine_tokenizer(e);
    chat_ctx cc;
    chat_ctx_init(tok, &cc);
    local_run run = {.pending = 0};
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    local_item *li = calloc(set->n_items, sizeof *li);
    if (!li) {
        nb_chat_template_free(cc.tmpl);
        nb_engine_free(e);
        return nb_fail(NB_ERR_NOMEM, "out of memory");
    }
    st = NB_OK;
    nb_sampling smp;
    nb_sampling_defaults(&smp);
    smp.temperature = 0;
    smp.seed = p->seed;
    smp.has_seed = true;
    for (size_t i = 0; i < set->n_items && st == NB_OK; i++) {
        const nb_golden_item *it = &set->items[i];
        if (it->check.kind == NB_GCHK_CHOICE) continue;
        int32_t *ids = NULL;
        size_t n = 0;
        li[i].run = &run;
        li[i].out = &outs[i];
        if (build_ids(tok, &cc, it, &ids, &n) != NB_OK) {
            outs[i].failed = true;
            snprintf(outs[i].error, sizeof outs[i].error, "building the prompt: %s", nb_errmsg());
            continue;
        }
        if ((int64_t)n + it->max_tokens > mml) {
            outs[i].failed = true;
            snprintf(outs[i].error, sizeof outs[i].error,
                     "context_length_exceeded: %zu prompt tokens + max_tokens %d > max model length %d", n,
                     it->max_tokens, mml);
            free(ids);
            continue;
        }
        nb_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = ids;
        rp.n_prompt = n;
        rp.sampling = smp;
        rp.max_tokens = it->max_tokens;
        rp.stop = it->stop;
        rp.n_stop = it->n_stop;
        rp.stop_ids = (!it->prompt && cc.eot_id >= 0) ? &cc.eot_id : NULL;
        rp.n_stop_ids = rp.stop_ids ? 1 : 0;
        rp.logprobs = -1;
        rp.sink = local_sink;
        rp.ud = &li[i];
        pthread_mutex_lock(&run.mu);
        run.pending++;
        pthread_mutex_unlock(&run.mu);
        uint64_t id;
        for (;;) {
            st = nb_engine_submit(e, &rp, &id);
            if (st != NB_ERR_OVERLOADED) break;
            /* the waiting queue is full: let some finish */
            pthread_mutex_lock(&run.mu);
            int before = run.pending;
            while (run.pending == before && run.pending > 1) pthread_cond_wait(&run.cv, &run.mu);
            pthread_mutex_unlock(&run.mu);
        }
        free(ids);
        if (st != NB_OK) {
            pthread_mutex_lock(&run.mu);
            run.pending--;
            pthread_mutex_unlock(&run.mu);
            outs[i].failed = true;
            snprintf(outs[i].error, sizeof outs[i].error, "%s", nb_errmsg());
            st = NB_OK;
        }
    }
    /* choice items, teacher-forced on this thread while the engine generates */
    nb_gscore *sc = NULL;
    for (size_t i = 0; i < set->n_items && st == NB_OK; i++) {
        const nb_golden_item *it = &set->items[i];
        if (it->check.kind != NB_GCHK_CHOICE) continue;
        if (!sc && (st = nb_gscore_create(nb_engine_model(e), mml, p->n_threads, &sc)) != NB_OK) break;
        if ((st = alloc_choice(it, &outs[i])) != NB_OK) break;
        for (size_t k = 0; k < it->check.n_options; k++) {
            if (score_option(sc, tok, it, k, &outs[i].loglik[k], &outs[i].n_tokens[k]) != NB_OK) {
                outs[i].failed = true;
                snprintf(outs[i].error, sizeof outs[i].error, "scoring option %zu: %s", k, nb_errmsg());
                break;
            }
        }
        if (!outs[i].failed) pick_choice(it, &outs[i]);
    }
    nb_gscore_free(sc);
    pthread_mutex_lock(&run.mu);
    while (run.pending > 0) pthread_cond_wait(&run.cv, &run.mu);
    pthread_mutex_unlock(&run.mu);
    for (size_t i = 0; i < set->n_items; i++) {
        if (li[i].out && !outs[i].failed) set_text(&outs[i], li[i].buf ? li[i].buf : "", li[i].len);
        if (li[i].oom && st == NB_OK) st = nb_fail(NB_ERR_NOMEM, "out of memory collecting outputs");
        free(li[i].buf);
    }
    free(li);
    nb_chat_template_free(cc.tmpl);
    nb_engine_free(e);
    pthread_mutex_destroy(&run.mu);
    pthread_cond_destroy(&run.cv);
    return st;
}

/* =========================================================================
 * Endpoint
 * ========================================================================= */

typedef struct hbuf {
    char *p;
    size_t len, cap;
} hbuf;

static size_t hbuf_write(char *data, size_t size, size_t nmemb, void *ud) {
    hbuf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n + 1 > (64u << 20)) return 0; /* a response over 64 MiB: refuse */
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

typedef struct hjob {
    size_t item;
    int option;        /* -1: generation */
    char *body;
    char url[1200];
    hbuf resp;
    long status;
    char curl_err[CURL_ERROR_SIZE];
    CURLcode cc;
} hjob;

typedef struct hctx {
    char base[1024];   /* .../v1 */
    const char *model; /* NULL: omit */
    const char *api_key;
    double timeout_s;
} hctx;

static CURL *make_easy(const hctx *h, hjob *j, struct curl_slist *hdrs) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hbuf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &j->resp);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, j->curl_err);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(h->timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_PRIVATE, j);
    if (j->body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
    return c;
}

static struct curl_slist *headers(const hctx *h) {
    struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
    if (h->api_key && *h->api_key) {
        char a[1100];
        snprintf(a, sizeof a, "Authorization: Bearer %.1000s", h->api_key);
        l = curl_slist_append(l, a);
    }
    return l;
}

/* Runs jobs with at most `parallel` in flight. */
static nb_status run_jobs(const hctx *h, hjob *jobs, size_t n, int parallel) {
    CURLM *m = curl_multi_init();
    struct curl_slist *hdrs = headers(h);
    if (!m || !hdrs) {
        if (m) curl_multi_cleanup(m);
        curl_slist_free_all(hdrs);
        return nb_fail(NB_ERR_NOMEM, "libcurl: out of memory");
    }
    size_t next = 0, done = 0;
    int running = 0;
    nb_status st = NB_OK;
    while (done < n && st == NB_OK) {
        while (running < parallel && next < n) {
            CURL *c = make_easy(h, &jobs[next], hdrs);
            if (!c || curl_multi_add_handle(m, c) != CURLM_OK) {
                if (c) curl_easy_cleanup(c);
                st = nb_fail(NB_ERR_NOMEM, "libcurl: cannot start a request");
                break;
            }
            next++;
            running++;
        }
        int still = 0;
        curl_multi_perform(m, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *c = msg->easy_handle;
            hjob *j = NULL;
            curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&j);
            j->cc = msg->data.result;
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->status);
            curl_multi_remove_handle(m, c);
            curl_easy_cleanup(c);
            running--;
            done++;
        }
        if (done < n) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    /* on error: drop what is still running */
    while (running > 0) {
        CURLMsg *msg;
        int left;
        int still;
        curl_multi_perform(m, &still);
        CURL **hs = NULL;
        (void)hs;
        msg = curl_multi_info_read(m, &left);
        if (!msg) break;
        curl_multi_remove_handle(m, msg->easy_handle);
        curl_easy_cleanup(msg->easy_handle);
        running--;
    }
    curl_multi_cleanup(m);
    curl_slist_free_all(hdrs);
    return st;
}

static void job_error(const hjob *j, char *dst, size_t cap) {
    if (j->cc != CURLE_OK) {
        snprintf(dst, cap, "request failed: %s", j->curl_err[0] ? j->curl_err : curl_easy_strerror(j->cc));
        return;
    }
    json_t *r = j->resp.p ? json_loads(j->resp.p, 0, NULL) : NULL;
    json_t *e = r ? json_object_get(r, "error") : NULL;
    json_t *m = json_is_object(e) ? json_object_get(e, "message") : json_is_string(e) ? e : NULL;
    if (json_is_string(m)) snprintf(dst, cap, "HTTP %ld: %s", j->status, json_string_value(m));
    else snprintf(dst, cap, "HTTP %ld: %.200s", j->status, j->resp.p ? j->resp.p : "(empty body)");
    json_decref(r);
}

static void add_common(const hctx *h, json_t *o, const nb_golden_run_params *p) {
    if (h->model) json_object_set_new(o, "model", json_string(h->model));
    json_object_set_new(o, "temperature", json_real(0));
    json_object_set_new(o, "seed", json_integer((json_int_t)(p->seed & 0x7fffffffffffffffull)));
}

static nb_status probe(hctx *h, const nb_golden_run_params *p, nb_golden_ident *ident) {
    hjob j;
    memset(&j, 0, sizeof j);
    snprintf(j.url, sizeof j.url, "%s/models", h->base);
    nb_status st = run_jobs(h, &j, 1, 1);
    if (st != NB_OK) return st;
    if (j.cc != CURLE_OK) {
        char why[300];
        job_error(&j, why, sizeof why);
        free(j.resp.p);
        return nb_fail(NB_ERR_INVALID, "endpoint %s is not reachable (GET %s: %s)", p->endpoint, j.url, why);
    }
    json_t *r = j.resp.p ? json_loads(j.resp.p, 0, NULL) : NULL;
    json_t *d = r ? json_object_get(r, "data") : NULL;
    json_t *m0 = json_is_array(d) && json_array_size(d) ? json_object_get(json_array_get(d, 0), "id") : NULL;
    if (p->model_name) snprintf(ident->model_name, sizeof ident->model_name, "%s", p->model_name);
    else if (json_is_string(m0)) snprintf(ident->model_name, sizeof ident->model_name, "%s", json_string_value(m0));
    else if (j.status != 200) {
        char why[300];
        job_error(&j, why, sizeof why);
        json_decref(r);
        free(j.resp.p);
        return nb_fail(NB_ERR_INVALID, "endpoint %s: GET %s failed (%s); give --model NAME", p->endpoint, j.url, why);
    }
    json_decref(r);
    free(j.resp.p);
    h->model = ident->model_name[0] ? ident->model_name : NULL;
    return NB_OK;
}

static nb_status run_endpoint(const nb_golden_set *set, const nb_golden_run_params *p, nb_golden_out *outs,
                              nb_golden_ident *ident) {
    hctx h = {.api_key = p->api_key, .timeout_s = p->timeout_s > 0 ? p->timeout_s : 300};
    size_t el = strlen(p->endpoint);
    while (el && p->endpoint[el - 1] == '/') el--;
    if (el > 900) return nb_fail(NB_ERR_INVALID, "--endpoint: URL longer than 900 bytes");
    if (el >= 3 && !strncmp(p->endpoint + el - 3, "/v1", 3)) snprintf(h.base, sizeof h.base, "%.*s", (int)el, p->endpoint);
    else snprintf(h.base, sizeof h.base, "%.*s/v1", (int)el, p->endpoint);
    if (strncmp(p->endpoint, "http://", 7) && strncmp(p->endpoint, "https://", 8))
        return nb_fail(NB_ERR_INVALID, "--endpoint '%s': expected an http:// or https:// URL", p->endpoint);
    snprintf(ident->endpoint, sizeof ident->endpoint, "%.*s", (int)el, p->endpoint);
    NB_TRY(probe(&h, p, ident));

    size_t nj = 0;
    for (size_t i = 0; i < set->n_items; i++)
        nj += set->items[i].check.kind == NB_GCHK_CHOICE ? set->items[i].check.n_options : 1;
    hjob *jobs = calloc(nj, sizeof *jobs);
    if (!jobs) return nb_fail(NB_ERR_NOMEM, "out of memory");
    nb_status st = NB_OK;
    size_t k = 0;
    for (size_t i = 0; i < set->n_items && st == NB_OK; i++) {
        const nb_golden_item *it = &set->items[i];
        if (it->check.kind == NB_GCHK_CHOICE) {
            if ((st = alloc_choice(it, &outs[i])) != NB_OK) break;
            for (size_t o = 0; o < it->check.n_options; o++, k++) {
                json_t *b = json_object();
                size_t pl = strlen(it->prompt), ol = strlen(it->check.options[o]);
                char *text = malloc(pl + ol + 1);
                if (!text) { json_decref(b); st = nb_fail(NB_ERR_NOMEM, "out of memory"); break; }
                memcpy(text, it->prompt, pl);
                memcpy(text + pl, it->check.options[o], ol + 1);
                json_object_set_new(b, "prompt", json_string(text));
                free(text);
                json_object_set_new(b, "max_tokens", json_integer(0));
                json_object_set_new(b, "echo", json_true());
                json_object_set_new(b, "logprobs", json_integer(1));
                add_common(&h, b, p);
                jobs[k] = (hjob){.item = i, .option = (int)o};
                snprintf(jobs[k].url, sizeof jobs[k].url, "%s/completions", h.base);
                jobs[k].body = json_dumps(b, JSON_COMPACT);
                json_decref(b);
            }
        } else {
            json_t *b = json_object();
            if (it->prompt) json_object_set_new(b, "prompt", json_string(it->prompt));
            else {
                json_t *ms = json_array();
                for (size_t m = 0; m < it->n_messages; m++) {
                    json_t *mo = json_object();
                    json_object_set_new(mo, "role", json_string(it->messages[m].role));
                    json_object_set_new(mo, "content", json_string(it->messages[m].content));
                    json_array_append_new(ms, mo);
                }
                json_object_set_new(b, "messages", ms);
            }
            json_object_set_new(b, "max_tokens", json_integer(it->max_tokens));
            if (it->n_stop) {
                json_t *sa = json_array();
                for (size_t s = 0; s < it->n_stop; s++) json_array_append_new(sa, json_string(it->stop[s]));
                json_object_set_new(b, "stop", sa);
            }
            add_common(&h, b, p);
            jobs[k] = (hjob){.item = i, .option = -1};
            snprintf(jobs[k].url, sizeof jobs[k].url, "%s/%s", h.base, it->prompt ? "completions" : "chat/completions");
            jobs[k].body = json_dumps(b, JSON_COMPACT);
            json_decref(b);
            k++;
        }
        if (st == NB_OK && k && !jobs[k - 1].body) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    }
    if (st == NB_OK) st = run_jobs(&h, jobs, nj, p->parallel > 0 ? p->parallel : DEFAULT_PARALLEL);
    size_t echo_refused = 0;
    char echo_msg[300] = "";
    for (size_t j = 0; j < nj && st == NB_OK; j++) {
        hjob *J = &jobs[j];
        nb_golden_out *o = &outs[J->item];
        const nb_golden_item *it = &set->items[J->item];
        if (J->cc != CURLE_OK) {
            char why[300];
            job_error(J, why, sizeof why);
            if (J->cc == CURLE_COULDNT_CONNECT || J->cc == CURLE_COULDNT_RESOLVE_HOST) {
                st = nb_fail(NB_ERR_INVALID, "endpoint %s became unreachable: %s", p->endpoint, why);
                break;
            }
        }
        if (o->failed) continue;
        json_t *r = J->cc == CURLE_OK && J->status == 200 && J->resp.p ? json_loads(J->resp.p, 0, NULL) : NULL;
        json_t *c0 = r ? json_array_get(json_object_get(r, "choices"), 0) : NULL;
        if (!c0) {
            o->failed = true;
            job_error(J, o->error, sizeof o->error);
            if (J->option >= 0 && J->cc == CURLE_OK) { /* the server answered, without prompt logprobs */
                echo_refused++;
                if (!echo_msg[0]) snprintf(echo_msg, sizeof echo_msg, "%s", o->error);
            }
            json_decref(r);
            continue;
        }
        if (J->option < 0) {
            json_t *t = it->prompt ? json_object_get(c0, "text") : json_object_get(json_object_get(c0, "message"), "content");
            if (json_is_string(t)) set_text(o, json_string_value(t), json_string_length(t));
            else if (json_is_null(t) || !t) set_text(o, "", 0);
        } else {
            json_t *lp = json_object_get(c0, "logprobs");
            json_t *tl = json_object_get(lp, "token_logprobs"), *to = json_object_get(lp, "text_offset");
            json_t *txt = json_object_get(c0, "text");
            size_t n = json_array_size(tl);
            if (!json_is_array(tl) || !json_is_array(to) || json_array_size(to) != n || n == 0 || !json_is_string(txt)) {
                o->failed = true;
                snprintf(o->error, sizeof o->error, "the response has no prompt logprobs (echo + logprobs)");
                echo_refused++;
                if (!echo_msg[0]) snprintf(echo_msg, sizeof echo_msg, "%s", o->error);
            } else {
                float *lps = malloc(n * sizeof *lps);
                size_t *off = malloc((n + 1) * sizeof *off);
                if (!lps || !off) st = nb_fail(NB_ERR_NOMEM, "out of memory");
                for (size_t t = 0; st == NB_OK && t < n; t++) {
                    json_t *x = json_array_get(tl, t), *y = json_array_get(to, t);
                    lps[t] = json_is_number(x) ? (float)json_number_value(x) : NAN;
                    off[t] = json_is_integer(y) && json_integer_value(y) >= 0 ? (size_t)json_integer_value(y) : 0;
                }
                if (st == NB_OK) {
                    off[n] = json_string_length(txt);
                    o->loglik[J->option] =
                        nb_gscore_continuation(lps, off, n, strlen(it->prompt), &o->n_tokens[J->option]);
                }
                free(lps);
                free(off);
            }
        }
        json_decref(r);
    }
    if (st == NB_OK && echo_refused)
        st = nb_fail(NB_ERR_INVALID, "endpoint %s does not return prompt log-probabilities (/v1/completions with echo: "
                     "true, logprobs: 1, max_tokens: 0), which the %zu choice request(s) of this set need: %s",
                     p->endpoint, echo_refused, echo_msg);
    for (size_t i = 0; i < set->n_items && st == NB_OK; i++)
        if (set->items[i].check.kind == NB_GCHK_CHOICE && !outs[i].failed) pick_choice(&set->items[i], &outs[i]);
    for (size_t j = 0; j < nj; j++) {
        free(jobs[j].body);
        free(jobs[j].resp.p);
    }
    free(jobs);
    return st;
}

nb_status nb_golden_run(const nb_golden_set *set, const nb_golden_run_params *p, nb_golden_out **outs,
                        nb_golden_ident *ident) {
    memset(ident, 0, sizeof *ident);
    *outs = calloc(set->n_items, sizeof **outs);
    if (!*outs) return nb_fail(NB_ERR_NOMEM, "out of memory");
    nb_status st = p->endpoint ? run_endpoint(set, p, *outs, ident) : run_local(set, p, *outs, ident);
    if (st != NB_OK) {
        nb_golden_outs_free(*outs, set->n_items);
        *outs = NULL;
    }
    return st;
}
