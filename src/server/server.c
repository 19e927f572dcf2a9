/* The OpenAI routes and the request lifecycle of `nibble serve`; see
 * server.h.
 *
 * One request = one srv_req, reference-counted: the HTTP side holds one
 * reference until its response is released, the engine side one until the
 * final event (finish != NONE) arrived. Events are copied into the srv_req
 * under its mutex by the sink (engine thread); the HTTP thread waits on its
 * condition variable in 50 ms slices, checking in between whether the
 * client closed the connection (then it aborts the engine request, which
 * frees its KV blocks before the next engine step). */
#include "server/server.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "eval/golden_score.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "tokenizer/chat_template.h"

enum { ST_LOADING = 0, ST_READY, ST_SHUTTING };

typedef struct srv_req srv_req;

struct nb_server {
    nb_http *http;
    nb_server_config cfg;
    char *model_name, *api_key;
    _Atomic int state;
    nb_server_backend be;
    nb_chat_template *tmpl; /* the model's (or --chat-template's) Jinja template */
    char bos_text[64], eos_text[64];
    int32_t eot_id;       /* the template's end-of-turn token, -1 if none */
    nb_metrics metrics;
    pthread_mutex_t mu;   /* guards reqs, in_flight */
    srv_req *reqs;        /* live requests (doubly linked) */
    int in_flight;
    _Atomic uint64_t id_seq;
    int64_t created;
    FILE *access_log;     /* --access-log, NULL: none */
    bool own_log;         /* fclose at free */
};

typedef struct lp_entry {
    int32_t token;
    float logprob;
    int32_t n_top;
    int32_t top_ids[NB_MAX_TOP_LOGPROBS];
    float top_lps[NB_MAX_TOP_LOGPROBS];
} lp_entry;

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

struct srv_req {
    nb_server *srv;
    srv_req *prev, *next;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool chat, stream, include_usage, submitted, client_gone;
    int32_t logprobs;
    uint64_t eid;
    int fd;
    char id[48];
    int64_t created;
    int32_t n_prompt;
    /* filled by the sink */
    buf text;              /* new text not yet consumed */
    lp_entry *lps;         /* new logprob entries not yet consumed */
    size_t n_lps, cap_lps;
    bool done, got_first;
    nb_finish_reason finish;
    char error[512];
    int32_t n_generated, n_cached;
    double t_submit, t_last;
    /* streaming */
    int stage;             /* 0 role chunk due (chat), 1 tokens, 2 finished */
    buf out;
    size_t out_off;
    size_t text_offset;    /* completions logprobs text_offset */
    /* echo (completions): the prompt's text and logprobs, put first in the answer */
    char *echo_text;
    size_t echo_len;
    void *echo_lp;         /* json_t * in the legacy shape, NULL without logprobs */
    bool oom, oom_aborted; /* the sink could not store an event: the request fails with 500 */
    bool abort_sent;       /* nb_server_abort_all did it (under srv->mu) */
    const char *method, *path; /* for the access log (string constants) */
    double t_start;        /* headers arrived */
};

static void access_log(nb_server *s, const char *method, const char *path, int status, int32_t n_prompt,
                       int32_t n_gen, double t_start);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool buf_add(buf *b, const char *s, size_t n) {
    if (n == 0) return true;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

/* ---- responses ---------------------------------------------------------- */

static void set_json(nb_http_resp *rs, int status, json_t *j) {
    rs->status = status;
    rs->body = json_dumps(j, JSON_COMPACT);
    rs->body_len = rs->body ? strlen(rs->body) : 0;
    if (!rs->body) rs->status = 500;
    json_decref(j);
}

static void set_error(nb_http_resp *rs, const nb_oai_error *e) {
    rs->status = e->status;
    rs->body = nb_oai_error_json(e);
    rs->body_len = rs->body ? strlen(rs->body) : 0;
}

static void error_resp(nb_http_resp *rs, int status, const char *type, const char *param, const char *code,
                       const char *msg) {
    nb_oai_error e;
    nb_oai_error_set(&e, status, type, param, code, "%s", msg);
    set_error(rs, &e);
}

static json_t *jstr(const char *s, size_t n) {
    size_t l;
    char *c = nb_utf8_sanitize(s, n, &l);
    if (!c) return json_null();
    json_t *j = json_stringn(c, l);
    free(c);
    return j ? j : json_null();
}

static json_t *usage_json(const srv_req *r) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(r->n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(r->n_generated));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)r->n_prompt + r->n_generated));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(r->n_cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

static const char *finish_str(nb_finish_reason f) {
    switch (f) {
    case NB_FINISH_STOP: return "stop";
    case NB_FINISH_LENGTH: return "length";
    case NB_FINISH_ABORT: return "abort";
    case NB_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

static json_t *token_json(const nb_tokenizer *tok, int32_t id, bool with_bytes) {
    size_t n = 0;
    const char *p = nb_token_piece_ref(tok, id, true, &n);
    if (!p) { p = ""; n = 0; }
    json_t *o = json_object();
    json_object_set_new(o, "token", jstr(p, n));
    if (with_bytes) {
        json_t *b = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(b, json_integer((unsigned char)p[i]));
        json_object_set_new(o, "bytes", b);
    }
    return o;
}

/* Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}]} */
static json_t *chat_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n) {
    json_t *content = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = token_json(tok, e[i].token, true);
        json_object_set_new(o, "logprob", json_real(e[i].logprob));
        json_t *tops = json_array();
        for (int32_t k = 0; k < e[i].n_top; k++) {
            json_t *t = token_json(tok, e[i].top_ids[k], true);
            json_object_set_new(t, "logprob", json_real(e[i].top_lps[k]));
            json_array_append_new(tops, t);
        }
        json_object_set_new(o, "top_logprobs", tops);
        json_array_append_new(content, o);
    }
    json_t *lp = json_object();
    json_object_set_new(lp, "content", content);
    return lp;
}

/* Completions logprobs: {tokens, token_logprobs, top_logprobs: [{tok: lp}], text_offset}. */
static json_t *completion_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n, size_t *offset) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = nb_token_piece_ref(tok, e[i].token, true, &len);
        if (!p) { p = ""; len = 0; }
        json_array_append_new(toks, jstr(p, len));
        json_array_append_new(lps, json_real(e[i].logprob));
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        *offset += len;
        json_t *t = json_object();
        for (int32_t k = 0; k < e[i].n_top; k++) {
            size_t l2 = 0;
            const char *q = nb_token_piece_ref(tok, e[i].top_ids[k], true, &l2);
            size_t sl;
            char *key = nb_utf8_sanitize(q ? q : "", q ? l2 : 0, &sl);
            if (key) json_object_set_new(t, key, json_real(e[i].top_lps[k]));
            free(key);
        }
        json_array_append_new(tops, t);
    }
    json_t *lp = json_object();
    json_object_set_new(lp, "tokens", toks);
    json_object_set_new(lp, "token_logprobs", lps);
    json_object_set_new(lp, "top_logprobs", tops);
    json_object_set_new(lp, "text_offset", offs);
    return lp;
}

static json_t *envelope(const srv_req *r, const char *object) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(r->created));
    json_object_set_new(o, "model", json_string(r->srv->model_name));
    return o;
}

/* ---- request lifecycle -------------------------------------------------- */

static void req_release(srv_req *r) {
    nb_server *s = r->srv;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left > 0) return;
    pthread_mutex_lock(&s->mu);
    if (r->prev) r->prev->next = r->next;
    else if (s->reqs == r) s->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->text.p);
    free(r->out.p);
    free(r->lps);
    free(r->echo_text);
    if (r->echo_lp) json_decref(r->echo_lp);
    free(r);
}

/* The HTTP side is done with the request (response sent or dropped). */
static void req_http_done(srv_req *r) {
    nb_server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    pthread_mutex_unlock(&s->mu);
    req_release(r);
}

static void sink(void *ud, const nb_token_event *ev) {
    srv_req *r = ud;
    nb_server *s = r->srv;
    double t = now_s();
    pthread_mutex_lock(&r->mu);
    if (ev->text_len && ev->text && !buf_add(&r->text, ev->text, ev->text_len)) r->oom = true;
    if (ev->token >= 0) {
        if (r->logprobs >= 0) {
            if (r->n_lps == r->cap_lps) {
                size_t cap = r->cap_lps ? r->cap_lps * 2 : 16;
                lp_entry *q = realloc(r->lps, cap * sizeof *q);
                if (q) { r->lps = q; r->cap_lps = cap; }
                else r->oom = true;
            }
            if (r->n_lps < r->cap_lps) {
                lp_entry *e = &r->lps[r->n_lps++];
                e->token = ev->token;
                e->logprob = ev->logprob;
                e->n_top = NB_MAX(0, NB_MIN(ev->n_top, NB_MAX_TOP_LOGPROBS));
                memcpy(e->top_ids, ev->top_ids, sizeof e->top_ids);
                memcpy(e->top_lps, ev->top_logprobs, sizeof e->top_lps);
            }
        }
        if (!r->got_first) {
            r->got_first = true;
            nb_metrics_observe(&s->metrics, NB_HIST_TTFT, ev->ttft_s > 0 ? ev->ttft_s : t - r->t_submit);
            nb_metrics_observe(&s->metrics, NB_HIST_QUEUE, ev->queue_s);
        } else {
            nb_metrics_observe(&s->metrics, NB_HIST_ITL, t - r->t_last);
        }
        r->t_last = t;
    }
    if (ev->n_generated > r->n_generated) r->n_generated = ev->n_generated;
    if (ev->n_prompt_tokens > 0) r->n_prompt = ev->n_prompt_tokens;
    r->n_cached = ev->n_cached_tokens;
    bool fin = ev->finish != NB_FINISH_NONE;
    if (fin) {
        r->done = true;
        r->finish = ev->finish;
        if (ev->error) snprintf(r->error, sizeof r->error, "%s", ev->error);
        nb_metrics_observe(&s->metrics, NB_HIST_E2E, t - r->t_submit);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (fin) req_release(r);
}

/* Waits (mu held) until there is news or the request is done; false when
 * the client went away (the engine request is then aborted). */
static bool wait_news(srv_req *r, bool any_news) {
    while (!r->done && !(any_news && (r->text.len || r->n_lps))) {
        if (r->oom && !r->oom_aborted) { /* stop the engine request; its final event ends the wait */
            r->oom_aborted = true;
            pthread_mutex_unlock(&r->mu);
            r->srv->be.abort(r->srv->be.ctx, r->eid);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (!r->done && !(any_news && (r->text.len || r->n_lps)) && nb_http_peer_closed(r->fd)) {
            r->client_gone = true;
            pthread_mutex_unlock(&r->mu);
            r->srv->be.abort(r->srv->be.ctx, r->eid);
            pthread_mutex_lock(&r->mu);
            return false;
        }
    }
    return true;
}

static bool sse_add(buf *b, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return false;
    bool ok = buf_add(b, "data: ", 6) && buf_add(b, s, strlen(s)) && buf_add(b, "\n\n", 2);
    free(s);
    return ok;
}

static json_t *chunk(srv_req *r, const char *text, size_t n, const lp_entry *lps, size_t n_lps, bool role,
                     nb_finish_reason fin) {
    const nb_tokenizer *tok = r->srv->be.tok;
    json_t *o = envelope(r, r->chat ? "chat.completion.chunk" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (r->chat) {
        json_t *d = json_object();
        if (role) json_object_set_new(d, "role", json_string("assistant"));
        if (role || n || n_lps || !fin) json_object_set_new(d, "content", jstr(text, n));
        json_object_set_new(c, "delta", d);
        json_object_set_new(c, "logprobs", n_lps ? chat_logprobs(tok, lps, n_lps) : json_null());
    } else {
        json_object_set_new(c, "text", jstr(text, n));
        json_object_set_new(c, "logprobs", n_lps ? completion_logprobs(tok, lps, n_lps, &r->text_offset) : json_null());
    }
    const char *f = finish_str(fin);
    json_object_set_new(c, "finish_reason", f ? json_string(f) : json_null());
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    if (r->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

static ssize_t stream_read(void *ud, char *out, size_t cap) {
    srv_req *r = ud;
    for (;;) {
        if (r->out_off < r->out.len) {
            size_t n = NB_MIN(cap, r->out.len - r->out_off);
            memcpy(out, r->out.p + r->out_off, n);
            r->out_off += n;
            return (ssize_t)n;
        }
        r->out.len = 0;
        r->out_off = 0;
        if (r->stage == 2) return NB_HTTP_STREAM_END;
        if (r->stage == 0 && r->chat) {
            r->stage = 1;
            if (!sse_add(&r->out, chunk(r, "", 0, NULL, 0, true, NB_FINISH_NONE))) return NB_HTTP_STREAM_ERROR;
            continue;
        }
        r->stage = 1;
        pthread_mutex_lock(&r->mu);
        if (!wait_news(r, true)) {
            pthread_mutex_unlock(&r->mu);
            return NB_HTTP_STREAM_ERROR;
        }
        buf text = r->text;
        lp_entry *lps = r->lps;
        size_t n_lps = r->n_lps;
        r->text = (buf){0};
        r->lps = NULL;
        r->n_lps = r->cap_lps = 0;
        bool done = r->done;
        nb_finish_reason fin = r->finish;
        pthread_mutex_unlock(&r->mu);
        bool ok = true;
        if (text.len || n_lps) ok = sse_add(&r->out, chunk(r, text.p, text.len, lps, n_lps, false, NB_FINISH_NONE));
        free(text.p);
        free(lps);
        if (done) {
            if (fin == NB_FINISH_ERROR || fin == NB_FINISH_ABORT || r->oom) {
                nb_oai_error e;
                if (r->oom)
                    nb_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory storing the output");
                else if (fin == NB_FINISH_ERROR)
                    nb_oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", r->error[0] ? r->error : "engine error");
                else
                    nb_oai_error_set(&e, 503, "service_unavailable", NULL, "aborted",
                                     "the request was aborted (server shutting down)");
                char *s = nb_oai_error_json(&e);
                ok = ok && s && buf_add(&r->out, "data: ", 6) && buf_add(&r->out, s, strlen(s)) &&
                     buf_add(&r->out, "\n\n", 2);
                free(s);
            } else {
                ok = ok && sse_add(&r->out, chunk(r, "", 0, NULL, 0, false, fin));
            }
            if (r->include_usage) {
                json_t *u = envelope(r, r->chat ? "chat.completion.chunk" : "text_completion");
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", usage_json(r));
                ok = ok && sse_add(&r->out, u);
            }
            ok = ok && buf_add(&r->out, "data: [DONE]\n\n", 14);
            r->stage = 2;
        }
        if (!ok) return NB_HTTP_STREAM_ERROR;
    }
}

static void stream_free(void *ud) {
    srv_req *r = ud;
    pthread_mutex_lock(&r->mu);
    bool done = r->done;
    pthread_mutex_unlock(&r->mu);
    if (!done) r->srv->be.abort(r->srv->be.ctx, r->eid); /* client went away mid-stream */
    access_log(r->srv, r->method, r->path, done ? 200 : 499, r->n_prompt, r->n_generated, r->t_start);
    req_http_done(r);
}

static void finish_blocking(srv_req *r, nb_http_resp *rs) {
    pthread_mutex_lock(&r->mu);
    bool ok = wait_news(r, false);
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        error_resp(rs, 499, "invalid_request_error", NULL, "client_closed", "client closed the connection");
        return;
    }
    if (r->oom) {
        error_resp(rs, 500, "server_error", NULL, NULL, "out of memory storing the output");
        return;
    }
    if (r->finish == NB_FINISH_ERROR) {
        error_resp(rs, 500, "server_error", NULL, NULL, r->error[0] ? r->error : "engine error");
        return;
    }
    if (r->finish == NB_FINISH_ABORT) {
        error_resp(rs, 503, "service_unavailable", NULL, "aborted", "the request was aborted (server shutting down)");
        return;
    }
    const nb_tokenizer *tok = r->srv->be.tok;
    json_t *o = envelope(r, r->chat ? "chat.completion" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (r->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", jstr(r->text.p ? r->text.p : "", r->text.len));
        json_object_set_new(c, "message", m);
        json_object_set_new(c, "logprobs", r->logprobs >= 0 ? chat_logprobs(tok, r->lps, r->n_lps) : json_null());
    } else {
        if (r->echo_text) { /* echo: prompt first */
            buf all = {0};
            if (!buf_add(&all, r->echo_text, r->echo_len) || !buf_add(&all, r->text.p, r->text.len)) {
                free(all.p);
                error_resp(rs, 500, "server_error", NULL, NULL, "out of memory");
                json_decref(c);
                json_decref(o);
                return;
            }
            json_object_set_new(c, "text", jstr(all.p ? all.p : "", all.len));
            free(all.p);
        } else {
            json_object_set_new(c, "text", jstr(r->text.p ? r->text.p : "", r->text.len));
        }
        json_t *lp = r->logprobs >= 0 ? completion_logprobs(tok, r->lps, r->n_lps, &r->text_offset) : json_null();
        if (r->echo_lp && json_is_object(lp)) {
            const char *k;
            json_t *v;
            json_object_foreach(lp, k, v) json_array_extend(json_object_get(r->echo_lp, k), v);
            json_decref(lp);
            lp = json_incref(r->echo_lp);
        }
        json_object_set_new(c, "logprobs", lp);
    }
    json_object_set_new(c, "finish_reason", json_string(finish_str(r->finish)));
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    json_object_set_new(o, "usage", usage_json(r));
    set_json(rs, 200, o);
}

/* A text of more bytes than this cannot fit in max_model_len tokens: no
 * token covers more input bytes than its decoded piece (at least 4 for an
 * unknown UTF-8 character, 64 leaves room for special-token texts). Such
 * prompts are refused before tokenizing, which also caps the tokenizer's
 * work per request. */
static size_t prompt_byte_bound(const nb_server *s) {
    size_t per = NB_MAX(nb_tokenizer_max_piece(s->be.tok), (size_t)64);
    return (size_t)NB_MAX(s->be.max_model_len, 1) * per;
}

static bool too_many_bytes(const nb_server *s, const nb_oai_request *q, size_t bytes, nb_oai_error *e) {
    size_t bound = prompt_byte_bound(s);
    if (bytes <= bound) return false;
    const char *what = q->kind == NB_OAI_CHAT ? "messages" : "prompt";
    nb_oai_error_set(e, 400, "invalid_request_error", what, "context_length_exceeded",
                     "This model's maximum context length is %d tokens. However, the %s is %zu bytes long, more "
                     "than %zu tokens of at most %zu bytes each can hold. Please reduce the length of the %s.",
                     s->be.max_model_len, what, bytes, (size_t)s->be.max_model_len, bound / (size_t)NB_MAX(s->be.max_model_len, 1), what);
    return true;
}

/* Tokenizes the prompt of a parsed request. */
static bool build_prompt(nb_server *s, const nb_oai_request *q, int32_t **ids, size_t *n, nb_oai_error *e) {
    const nb_tokenizer *tok = s->be.tok;
    nb_status st;
    *ids = NULL;
    *n = 0;
    if (q->kind == NB_OAI_CHAT) {
        char *text = NULL;
        bool generic = nb_chat_template_is_generic(s->tmpl);
        json_t *root = q->root;
        nb_chat_input in = {.messages = json_object_get(root, "messages"), .tools = json_object_get(root, "tools"),
                            .kwargs = json_object_get(root, "chat_template_kwargs"), .add_generation_prompt = true,
                            .bos = generic ? "" : s->bos_text, .eos = s->eos_text, .now = -1};
        st = nb_chat_render_json(s->tmpl, &in, &text);
        if (st != NB_OK) {
            nb_oai_error_set(e, st == NB_ERR_NOMEM ? 500 : 400, st == NB_ERR_NOMEM ? "server_error" : "invalid_request_error",
                             "messages", "invalid_value", "%s", nb_errmsg());
            return false;
        }
        int32_t *t = NULL;
        size_t nt = 0;
        if (too_many_bytes(s, q, strlen(text), e)) {
            free(text);
            return false;
        }
        st = nb_tokenize(tok, text, strlen(text), false, true, &t, &nt);
        free(text);
        if (st != NB_OK) goto fail;
        int32_t bos = nb_tokenizer_bos(tok);
        if (generic && nb_tokenizer_add_bos(tok) && bos >= 0) {
            int32_t *u = realloc(t, (nt + 1) * sizeof *u);
            if (!u) { free(t); goto fail; }
            memmove(u + 1, u, nt * sizeof *u);
            u[0] = bos;
            t = u;
            nt++;
        }
        *ids = t;
        *n = nt;
    } else if (q->prompt_ids) {
        int32_t nv = nb_tokenizer_n_vocab(tok);
        for (size_t i = 0; i < q->n_prompt_ids; i++)
            if (q->prompt_ids[i] >= nv) {
                nb_oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value",
                                 "'prompt[%zu]' is token id %d, the vocabulary has ids 0..%d", i, q->prompt_ids[i],
                                 nv - 1);
                return false;
            }
        *ids = malloc((q->n_prompt_ids ? q->n_prompt_ids : 1) * sizeof **ids);
        if (!*ids) goto fail;
        memcpy(*ids, q->prompt_ids, q->n_prompt_ids * sizeof **ids);
        *n = q->n_prompt_ids;
    } else {
        if (too_many_bytes(s, q, strlen(q->prompt), e)) return false;
        st = nb_tokenize(tok, q->prompt, strlen(q->prompt), true, false, ids, n);
        if (st != NB_OK) goto fail;
    }
    if (*n == 0) {
        int32_t bos = nb_tokenizer_bos(tok);
        if (bos < 0) {
            nb_oai_error_set(e, 400, "invalid_request_error", q->kind == NB_OAI_CHAT ? "messages" : "prompt",
                             "invalid_value", "the prompt is empty and the model has no BOS token to start from");
            free(*ids);
            *ids = NULL;
            return false;
        }
        free(*ids);
        *ids = malloc(sizeof **ids);
        if (!*ids) goto fail;
        (*ids)[0] = bos;
        *n = 1;
    }
    return true;
fail:
    free(*ids);
    *ids = NULL;
    nb_oai_error_set(e, 500, "server_error", NULL, NULL, "tokenizing the prompt failed: %s", nb_errmsg());
    return false;
}

/* echo: the prompt's text and, with logprobs, its log-probabilities in the
 * legacy shape (tokens, token_logprobs with null first, top_logprobs,
 * text_offset = byte offsets into the echoed text). */
static bool echo_prompt(nb_server *s, const nb_oai_request *q, const int32_t *ids, size_t n, char **text,
                        size_t *text_len, json_t **lpj, nb_oai_error *e) {
    const nb_tokenizer *tok = s->be.tok;
    *text = NULL;
    *lpj = NULL;
    if (!s->be.score) {
        nb_oai_error_set(e, 400, "invalid_request_error", "echo", "unsupported_parameter",
                         "'echo' is not supported by this server's backend");
        return false;
    }
    if (nb_detokenize(tok, ids, n, false, text, text_len) != NB_OK) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "detokenizing the prompt failed: %s", nb_errmsg());
        return false;
    }
    if (q->logprobs < 0) return true;
    int32_t k = q->logprobs;
    float *lp = malloc(n * sizeof *lp), *tl = k ? malloc(n * (size_t)k * sizeof *tl) : NULL;
    int32_t *ti = k ? malloc(n * (size_t)k * sizeof *ti) : NULL;
    size_t *off = malloc((n + 1) * sizeof *off);
    bool ok = lp && off && (!k || (tl && ti));
    nb_status st = ok ? s->be.score(s->be.ctx, ids, n, k, lp, ti, tl) : NB_ERR_NOMEM;
    if (st == NB_OK) st = nb_gscore_offsets(tok, ids, n, off);
    if (st != NB_OK) {
        if (st == NB_ERR_RANGE || st == NB_ERR_INVALID)
            nb_oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value", "%s", nb_errmsg());
        else nb_oai_error_set(e, 500, "server_error", NULL, NULL, "scoring the prompt failed: %s", nb_errmsg());
        free(lp); free(tl); free(ti); free(off);
        free(*text);
        *text = NULL;
        return false;
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = nb_token_piece_ref(tok, ids[i], true, &len);
        json_array_append_new(toks, jstr(p ? p : "", p ? len : 0));
        json_array_append_new(lps, i ? json_real(lp[i]) : json_null());
        json_array_append_new(offs, json_integer((json_int_t)off[i]));
        if (!i) { json_array_append_new(tops, json_null()); continue; }
        json_t *t = json_object();
        for (int32_t j = 0; j < k; j++) {
            size_t l2 = 0, sl;
            const char *pq = nb_token_piece_ref(tok, ti[i * (size_t)k + j], true, &l2);
            char *key = nb_utf8_sanitize(pq ? pq : "", pq ? l2 : 0, &sl);
            if (key) json_object_set_new(t, key, json_real(tl[i * (size_t)k + j]));
            free(key);
        }
        json_array_append_new(tops, t);
    }
    *lpj = json_object();
    json_object_set_new(*lpj, "tokens", toks);
    json_object_set_new(*lpj, "token_logprobs", lps);
    json_object_set_new(*lpj, "top_logprobs", tops);
    json_object_set_new(*lpj, "text_offset", offs);
    free(lp); free(tl); free(ti); free(off);
    return true;
}

static void handle_generate(nb_server *s, const nb_http_req *req, nb_http_resp *rs, nb_oai_kind kind,
                            int32_t *n_prompt, int32_t *n_gen, bool *logged) {
    int state = atomic_load(&s->state);
    if (state != ST_READY) {
        error_resp(rs, 503, "service_unavailable", NULL, state == ST_LOADING ? "model_loading" : "shutting_down",
                   state == ST_LOADING ? "the model is still loading" : "the server is shutting down");
        nb_http_resp_header(rs, "Retry-After", state == ST_LOADING ? "1" : "5");
        return;
    }
    nb_oai_request q;
    nb_oai_error e;
    if (!nb_oai_parse(kind, req->body, req->body_len, &q, &e)) {
        set_error(rs, &e);
        return;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    srv_req *r = NULL;
    char *echo_text = NULL;
    size_t echo_len = 0;
    json_t *echo_lp = NULL;
    if (q.model && strcmp(q.model, s->model_name) != 0) {
        nb_oai_error_set(&e, 404, "invalid_request_error", "model", "model_not_found",
                         "The model `%.200s` does not exist. This server serves `%.200s` (GET /v1/models).", q.model,
                         s->model_name);
        set_error(rs, &e);
        goto out;
    }
    if (!build_prompt(s, &q, &ids, &n_ids, &e)) {
        set_error(rs, &e);
        goto out;
    }
    if (q.echo) {
        if (!echo_prompt(s, &q, ids, n_ids, &echo_text, &echo_len, &echo_lp, &e)) {
            set_error(rs, &e);
            goto out;
        }
        if (q.max_tokens == 0) { /* the prompt only */
            srv_req t = {.srv = s, .n_prompt = (int32_t)n_ids, .created = (int64_t)time(NULL)};
            snprintf(t.id, sizeof t.id, "cmpl-%08llx%016llx", (unsigned long long)(s->created & 0xffffffff),
                     (unsigned long long)(atomic_fetch_add(&s->id_seq, 1) * 0x9E3779B97F4A7C15ull));
            json_t *o = envelope(&t, "text_completion"), *c = json_object(), *arr = json_array();
            json_object_set_new(c, "index", json_integer(0));
            json_object_set_new(c, "text", jstr(echo_text, echo_len));
            json_object_set_new(c, "logprobs", echo_lp ? json_incref(echo_lp) : json_null());
            json_object_set_new(c, "finish_reason", json_string("length"));
            json_array_append_new(arr, c);
            json_object_set_new(o, "choices", arr);
            json_object_set_new(o, "usage", usage_json(&t));
            set_json(rs, 200, o);
            goto out;
        }
    }
    int64_t mml = s->be.max_model_len;
    int64_t max_tokens = q.max_tokens;
    bool given = max_tokens > 0;
    if (!given) max_tokens = kind == NB_OAI_COMPLETIONS ? NB_OAI_COMPLETIONS_DEFAULT_MAX_TOKENS : mml - (int64_t)n_ids;
    if (max_tokens < 1) max_tokens = 1;
    if ((int64_t)n_ids + max_tokens > mml) {
        const char *what = kind == NB_OAI_CHAT ? "messages" : "prompt";
        nb_oai_error_set(&e, 400, "invalid_request_error", what, "context_length_exceeded",
                         "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                         "(%zu in the %s, %lld in the completion). Please reduce the length of the %s or "
                         "max_tokens.",
                         (long long)mml, (long long)((int64_t)n_ids + max_tokens), n_ids, what,
                         (long long)max_tokens, what);
        set_error(rs, &e);
        goto out;
    }
    if (q.min_tokens > max_tokens) {
        nb_oai_error_set(&e, 400, "invalid_request_error", "min_tokens", "invalid_value",
                         "'min_tokens' (%d) must be at most max_tokens (%lld)", q.min_tokens, (long long)max_tokens);
        set_error(rs, &e);
        goto out;
    }

    r = calloc(1, sizeof *r);
    if (!r) {
        error_resp(rs, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    r->srv = s;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->chat = kind == NB_OAI_CHAT;
    r->stream = q.stream;
    r->include_usage = q.include_usage;
    r->logprobs = q.logprobs;
    r->fd = req->fd;
    r->n_prompt = (int32_t)n_ids;
    r->created = (int64_t)time(NULL);
    r->echo_text = echo_text;
    r->echo_len = echo_len;
    r->echo_lp = echo_lp;
    r->text_offset = echo_len;
    echo_text = NULL;
    echo_lp = NULL;
    uint64_t seq = atomic_fetch_add(&s->id_seq, 1);
    snprintf(r->id, sizeof r->id, "%s-%08llx%016llx", r->chat ? "chatcmpl" : "cmpl",
             (unsigned long long)(s->created & 0xffffffff), (unsigned long long)(seq * 0x9E3779B97F4A7C15ull));
    r->t_submit = now_s();
    r->method = "POST";
    r->path = kind == NB_OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    r->t_start = req->t_start;

    nb_request_params p = {0};
    p.prompt = ids;
    p.n_prompt = n_ids;
    p.sampling = q.sampling;
    p.max_tokens = (int32_t)max_tokens;
    p.min_tokens = q.min_tokens;
    p.ignore_eos = q.ignore_eos;
    p.stop = q.stop;
    p.n_stop = q.n_stop;
    p.stop_ids = (r->chat && s->eot_id >= 0) ? &s->eot_id : NULL;
    p.n_stop_ids = p.stop_ids ? 1 : 0;
    p.logprobs = q.logprobs;
    p.grammar = q.grammar;
    p.sink = sink;
    p.ud = r;

    pthread_mutex_lock(&s->mu);
    r->next = s->reqs;
    if (s->reqs) s->reqs->prev = r;
    s->reqs = r;
    s->in_flight++;
    r->refs = 2; /* HTTP side + engine side */
    pthread_mutex_unlock(&s->mu);
    uint64_t eid = 0;
    nb_status st = s->be.submit(s->be.ctx, &p, &eid);
    pthread_mutex_lock(&s->mu);
    r->eid = eid;
    r->submitted = st == NB_OK;
    if (st == NB_OK) q.grammar = NULL; /* the engine owns it now */
    pthread_mutex_unlock(&s->mu);
    if (st != NB_OK) {
        r->refs = 1; /* the engine never saw it */
        if (st == NB_ERR_OVERLOADED) {
            error_resp(rs, 429, "rate_limit_error", NULL, "queue_full", nb_errmsg());
            nb_http_resp_header(rs, "Retry-After", "1");
        }
        else if (st == NB_ERR_INVALID || st == NB_ERR_RANGE)
            error_resp(rs, 400, "invalid_request_error", NULL, "invalid_value", nb_errmsg());
        else
            error_resp(rs, 500, "server_error", NULL, NULL, nb_errmsg());
        req_http_done(r);
        goto out;
    }
    if (q.stream) {
        rs->status = 200;
        rs->content_type = "text/event-stream";
        rs->stream = stream_read;
        rs->stream_free = stream_free;
        rs->stream_ud = r;
        *logged = true; /* stream_free logs it */
    } else {
        finish_blocking(r, rs);
        *n_prompt = r->n_prompt;
        *n_gen = r->n_generated;
        req_http_done(r);
    }
out:
    free(echo_text);
    if (echo_lp) json_decref(echo_lp);
    free(ids);
    nb_oai_request_free(&q);
}

static void handle_models(nb_server *s, nb_http_resp *rs) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(s->model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->created));
    json_object_set_new(m, "owned_by", json_string("nibble"));
    json_object_set_new(m, "root", json_string(s->model_name));
    if (atomic_load(&s->state) != ST_LOADING) json_object_set_new(m, "max_model_len", json_integer(s->be.max_model_len));
    json_t *arr = json_array();
    json_array_append_new(arr, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", arr);
    set_json(rs, 200, o);
}

static void handle_metrics(nb_server *s, nb_http_resp *rs) {
    struct nb_engine_stats st;
    bool have = atomic_load(&s->state) != ST_LOADING && s->be.stats;
    if (have) s->be.stats(s->be.ctx, &st);
    char *m = nb_metrics_format(&s->metrics, have ? &st : NULL, s->model_name);
    /* The HTTP layer's own counters (connection limit, request deadline, framing). */
    char name[300];
    size_t k = 0;
    for (const char *p = s->model_name; *p && k + 3 < sizeof name; p++) {
        if (*p == '"' || *p == '\\') name[k++] = '\\';
        if (*p == '\n') { name[k++] = '\\'; name[k++] = 'n'; continue; }
        name[k++] = *p;
    }
    name[k] = '\0';
    nb_http_counters hc;
    nb_http_get_counters(s->http, &hc);
    char *all = NULL;
    if (m && asprintf(&all,
                      "%s# HELP nibble:http_connections_open Client connections handed to the HTTP server.\n"
                      "# TYPE nibble:http_connections_open gauge\n"
                      "nibble:http_connections_open{model_name=\"%s\"} %u\n"
                      "# HELP nibble:http_refused_total Connections refused or closed by the HTTP layer.\n"
                      "# TYPE nibble:http_refused_total counter\n"
                      "nibble:http_refused_total{model_name=\"%s\",reason=\"connection_limit\"} %llu\n"
                      "nibble:http_refused_total{model_name=\"%s\",reason=\"request_timeout\"} %llu\n"
                      "nibble:http_refused_total{model_name=\"%s\",reason=\"bad_framing\"} %llu\n",
                      m, name, hc.open_connections, name, (unsigned long long)hc.refused_limit,
                      name, (unsigned long long)hc.deadline_closed, name,
                      (unsigned long long)hc.bad_framing) < 0)
        all = NULL;
    free(m);
    rs->body = all;
    rs->body_len = rs->body ? strlen(rs->body) : 0;
    rs->status = rs->body ? 200 : 500;
    rs->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

unsigned nb_server_open_connections(nb_server *s) {
    nb_http_counters hc;
    nb_http_get_counters(s->http, &hc);
    return hc.open_connections;
}

static bool authorized(nb_server *s, const nb_http_req *req) {
    if (!s->api_key) return true;
    const char *h = nb_http_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    while (*h == ' ') h++;
    return nb_secret_equal(h, s->api_key);
}

/* Routes match the exact path the client sent (http.c does not decode or
 * normalise it); anything else is 404. */
enum { R_NONE = 0, R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_METRICS };

static int route_of(const char *path) {
    if (!strcmp(path, "/v1/completions")) return R_COMPLETIONS;
    if (!strcmp(path, "/v1/chat/completions")) return R_CHAT;
    if (!strcmp(path, "/v1/models")) return R_MODELS;
    if (!strcmp(path, "/health")) return R_HEALTH;
    if (!strcmp(path, "/metrics")) return R_METRICS;
    return R_NONE;
}

static const char *route_methods(int route) {
    return route == R_COMPLETIONS || route == R_CHAT ? "POST" : "GET, HEAD";
}

static bool method_ok(int route, const char *method) {
    if (route == R_COMPLETIONS || route == R_CHAT) return !strcmp(method, "POST");
    return !strcmp(method, "GET") || !strcmp(method, "HEAD");
}

/* The Origin header when --allowed-origins admits it, else NULL. */
static const char *cors_origin(nb_server *s, const nb_http_req *req) {
    const char *list = s->cfg.allowed_origins;
    if (!list || !*list) return NULL;
    const char *o = nb_http_header(req, "Origin");
    if (!o || !*o) return NULL;
    size_t ol = strlen(o);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m > 0 && p[m - 1] == ' ') m--;
        if (m == 1 && p[0] == '*') return "*";
        if (m && m == ol && !memcmp(p, o, m)) return o;
        p += n;
    }
    return NULL;
}

static void cors_headers(nb_server *s, const nb_http_req *req, nb_http_resp *rs) {
    const char *o = cors_origin(s, req);
    if (!o) return;
    nb_http_resp_header(rs, "Access-Control-Allow-Origin", o);
    if (strcmp(o, "*")) nb_http_resp_header(rs, "Vary", "Origin");
}

/* One access-log line: time, method, path (non-printable bytes as %XX,
 * capped), status, tokens, latency. Never the body. */
static void access_log(nb_server *s, const char *method, const char *path, int status, int32_t n_prompt,
                       int32_t n_gen, double t_start) {
    if (!s->access_log) return;
    char p[300];
    size_t k = 0;
    for (const char *c = path ? path : ""; *c && k + 8 < sizeof p; c++) {
        unsigned char u = (unsigned char)*c;
        if (u > 0x20 && u < 0x7f && u != '%' && u != '"') p[k++] = (char)u;
        else k += (size_t)snprintf(p + k, sizeof p - k, "%%%02X", u);
    }
    if (path && strlen(path) > k) { memcpy(p + k, "...", 3); k += 3; }
    p[k] = '\0';
    char m[20];
    size_t mk = 0;
    for (const char *c = method ? method : "-"; *c && mk + 1 < sizeof m; c++)
        m[mk++] = (*c > 0x20 && *c < 0x7f) ? *c : '?';
    m[mk] = '\0';
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(s->access_log, "%s %s %s %d prompt_tokens=%d completion_tokens=%d latency_ms=%.1f\n", ts, m, p, status,
            n_prompt, n_gen, t_start > 0 ? (now_s() - t_start) * 1000.0 : 0.0);
}

static void unauthorized(nb_http_resp *rs) {
    error_resp(rs, 401, "authentication_error", NULL, "invalid_api_key",
               "Missing or incorrect API key: send 'Authorization: Bearer <key>'");
    rs->header_name = "WWW-Authenticate";
    rs->header_value = "Bearer";
}

static void no_route(const nb_http_req *req, nb_http_resp *rs) {
    char m[160];
    snprintf(m, sizeof m, "No route for %.16s %.100s%s", req->method, req->path,
             strlen(req->path) > 100 ? "..." : "");
    error_resp(rs, 404, "not_found_error", NULL, "not_found", m);
}

static void bad_method(const nb_http_req *req, int route, nb_http_resp *rs) {
    char m[128];
    const char *allow = route_methods(route);
    snprintf(m, sizeof m, "Method %.16s is not allowed on %.64s (allowed: %s)", req->method, req->path, allow);
    error_resp(rs, 405, "invalid_request_error", NULL, "method_not_allowed", m);
    rs->header_name = "Allow";
    rs->header_value = allow;
}

/* The checks that need only the request line and headers: CORS preflight,
 * unknown path, authentication, wrong method. Used by the early call (before
 * the body is read) and again for the complete request. true: answered. */
static bool pre_checks(nb_server *s, const nb_http_req *req, int route, nb_http_resp *rs) {
    if (route != R_NONE && !strcmp(req->method, "OPTIONS") && s->cfg.allowed_origins && *s->cfg.allowed_origins &&
        nb_http_header(req, "Origin") && nb_http_header(req, "Access-Control-Request-Method")) {
        /* CORS preflight: browsers send it without credentials. */
        const char *o = cors_origin(s, req);
        if (!o) {
            error_resp(rs, 403, "invalid_request_error", NULL, "cors_origin_not_allowed",
                       "Origin not allowed (--allowed-origins)");
            return true;
        }
        rs->status = 204;
        rs->body = NULL;
        rs->body_len = 0;
        nb_http_resp_header(rs, "Access-Control-Allow-Methods",
                            route == R_COMPLETIONS || route == R_CHAT ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
        nb_http_resp_header(rs, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        nb_http_resp_header(rs, "Access-Control-Max-Age", "600");
        return true;
    }
    if (route == R_NONE) {
        no_route(req, rs);
        return true;
    }
    bool open_route = route == R_HEALTH || route == R_METRICS;
    if ((!open_route || s->cfg.protect_metrics) && !authorized(s, req)) {
        unauthorized(rs);
        return true;
    }
    if (!method_ok(route, req->method)) {
        bad_method(req, route, rs);
        return true;
    }
    return false;
}

static void early(void *ud, const nb_http_req *req, nb_http_resp *rs) {
    nb_server *s = ud;
    if (!pre_checks(s, req, route_of(req->path), rs)) return; /* go on: read the body */
    cors_headers(s, req, rs);
    access_log(s, req->method, req->path, rs->status, 0, 0, req->t_start);
}

static void handle(void *ud, const nb_http_req *req, nb_http_resp *rs) {
    nb_server *s = ud;
    int route = route_of(req->path);
    int32_t n_prompt = 0, n_gen = 0;
    bool logged = false;
    if (pre_checks(s, req, route, rs)) {
    } else if (req->too_large) {
        char m[160];
        snprintf(m, sizeof m, "The request body is larger than %zu bytes (--max-request-bytes)", s->cfg.max_request_bytes);
        error_resp(rs, 413, "invalid_request_error", NULL, "request_too_large", m);
        rs->close = true;
    } else if (route == R_COMPLETIONS || route == R_CHAT) {
        handle_generate(s, req, rs, route == R_CHAT ? NB_OAI_CHAT : NB_OAI_COMPLETIONS, &n_prompt, &n_gen, &logged);
    } else if (route == R_MODELS) {
        handle_models(s, rs);
    } else if (route == R_HEALTH) {
        int st = atomic_load(&s->state);
        json_t *o = json_object();
        json_object_set_new(o, "status",
                            json_string(st == ST_READY ? "ok" : st == ST_LOADING ? "loading" : "shutting_down"));
        set_json(rs, st == ST_READY ? 200 : 503, o);
        if (st != ST_READY) nb_http_resp_header(rs, "Retry-After", "1");
    } else {
        handle_metrics(s, rs);
    }
    cors_headers(s, req, rs);
    if (!logged) access_log(s, req->method, req->path, rs->status, n_prompt, n_gen, req->t_start);
}

/* ---- lifecycle ---------------------------------------------------------- */

nb_status nb_server_create(const nb_server_config *c, nb_server **out) {
    *out = NULL;
    if (!c->served_model_name || !*c->served_model_name)
        return nb_fail(NB_ERR_INVALID, "--served-model-name: must not be empty");
    nb_server *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    s->cfg = *c;
    if (!s->cfg.max_request_bytes) s->cfg.max_request_bytes = NB_SERVER_DEFAULT_MAX_REQUEST_BYTES;
    s->model_name = nb_strdup(c->served_model_name);
    s->api_key = c->api_key && *c->api_key ? nb_strdup(c->api_key) : NULL;
    if (!s->model_name || (c->api_key && *c->api_key && !s->api_key)) { /* never start without the key */
        free(s->model_name);
        free(s->api_key);
        free(s);
        return nb_fail(NB_ERR_NOMEM, "out of memory copying the served model name / API key");
    }
    if (c->access_log && *c->access_log) {
        if (!strcmp(c->access_log, "-")) {
            s->access_log = stderr;
        } else {
            s->access_log = fopen(c->access_log, "ae");
            if (!s->access_log) {
                int err = errno;
                free(s->model_name);
                free(s->api_key);
                free(s);
                return nb_fail(NB_ERR_IO, "--access-log %s: cannot open for appending: %s", c->access_log,
                               strerror(err));
            }
            s->own_log = true;
            setvbuf(s->access_log, NULL, _IOLBF, 0);
        }
    }
    s->cfg.served_model_name = s->model_name;
    s->cfg.api_key = s->api_key;
    s->eot_id = -1;
    s->created = (int64_t)time(NULL);
    atomic_store(&s->id_seq, ((uint64_t)getpid() << 32) ^ (uint64_t)s->created);
    pthread_mutex_init(&s->mu, NULL);
    nb_metrics_init(&s->metrics);
    nb_http_config hc = {.host = c->host, .port = c->port, .max_body = s->cfg.max_request_bytes,
                         .max_connections = c->max_connections, .request_timeout_s = c->request_timeout_s,
                         .early = early};
    nb_status st = nb_http_start(&hc, handle, s, &s->http);
    if (st != NB_OK) {
        if (s->own_log) fclose(s->access_log);
        nb_metrics_destroy(&s->metrics);
        pthread_mutex_destroy(&s->mu);
        free(s->model_name);
        free(s->api_key);
        free(s);
        return st;
    }
    *out = s;
    return NB_OK;
}

int nb_server_port(const nb_server *s) { return nb_http_port(s->http); }

void nb_server_set_ready(nb_server *s, const nb_server_backend *b) {
    s->be = *b;
    const char *t = b->chat_template ? b->chat_template : nb_tokenizer_chat_template(b->tok);
    nb_chat_template_free(s->tmpl);
    s->tmpl = NULL;
    if (nb_chat_template_create(t, b->chat_template ? "--chat-template" : "the model's", &s->tmpl) != NB_OK) {
        NB_WARN("%s; /v1/chat/completions uses the built-in generic template instead", nb_errmsg());
        if (nb_chat_template_create(NULL, NULL, &s->tmpl) != NB_OK) NB_ASSERT(!"the generic template parses");
    }
    if (nb_chat_template_is_generic(s->tmpl))
        NB_WARN("chat template: the model has none; /v1/chat/completions uses the generic format "
                "\"System: ...\\n\\nUser: ...\\n\\nAssistant:\" (docs/template.md)");
    else
        NB_INFO("chat template: %s (Jinja, %zu bytes)", nb_chat_template_origin(s->tmpl),
                strlen(nb_chat_template_text(s->tmpl)));
    int32_t bos = nb_tokenizer_bos(b->tok), eos = nb_tokenizer_eos(b->tok);
    s->bos_text[0] = s->eos_text[0] = '\0';
    if (bos >= 0) {
        size_t n = nb_token_piece(b->tok, bos, true, s->bos_text, sizeof s->bos_text - 1);
        s->bos_text[NB_MIN(n, sizeof s->bos_text - 1)] = '\0';
    }
    if (eos >= 0) {
        size_t n = nb_token_piece(b->tok, eos, true, s->eos_text, sizeof s->eos_text - 1);
        s->eos_text[NB_MIN(n, sizeof s->eos_text - 1)] = '\0';
    }
    const char *eot = nb_chat_end_of_turn(s->tmpl);
    s->eot_id = eot ? nb_tokenizer_find(b->tok, eot, strlen(eot)) : -1;
    atomic_store(&s->state, ST_READY);
}

void nb_server_begin_shutdown(nb_server *s) {
    atomic_store(&s->state, ST_SHUTTING);
    nb_http_quiesce(s->http);
}

int nb_server_in_flight(nb_server *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void nb_server_abort_all(nb_server *s) {
    if (!s->be.abort) return;
    /* In batches from a fixed buffer (no allocation that could fail and
     * leave requests running); each request is aborted once. */
    for (;;) {
        uint64_t ids[64];
        size_t k = 0;
        pthread_mutex_lock(&s->mu);
        for (srv_req *r = s->reqs; r && k < 64; r = r->next)
            if (r->submitted && !r->abort_sent) {
                r->abort_sent = true;
                ids[k++] = r->eid;
            }
        pthread_mutex_unlock(&s->mu);
        if (!k) break;
        for (size_t i = 0; i < k; i++) s->be.abort(s->be.ctx, ids[i]);
    }
}

void nb_server_free(nb_server *s) {
    if (!s) return;
    nb_http_stop(s->http);
    if (s->own_log) fclose(s->access_log);
    nb_metrics_destroy(&s->metrics);
    pthread_mutex_destroy(&s->mu);
    free(s->model_name);
    free(s->api_key);
    nb_chat_template_free(s->tmpl);
    free(s);
}
