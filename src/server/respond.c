/* Response bodies of the OpenAI routes; see respond.h. */
#include "server/respond.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An allocation failure while a response is built (jansson's allocator,
 * a sanitized string copy) fails the response (500, or a stream that ends
 * with an error event) instead of dropping a member silently: json_oom is
 * set by the allocator nb_resp_json_install puts in, cleared when a request
 * starts (nb_resp_json_begin) and checked by nb_resp_dump, which every
 * answer and event goes through. Per thread: a connection's responses are
 * built on its own thread. NIBBLE_TEST_FAIL_JSON_ALLOC=K (tests only) fails
 * every K-th jansson allocation of a thread. */
static _Thread_local bool json_oom;
static _Thread_local unsigned json_alloc_n;
static unsigned json_fail_every;

static void *json_alloc_checked(size_t n) {
    void *p = json_fail_every && ++json_alloc_n % json_fail_every == 0 ? NULL : malloc(n);
    if (!p) json_oom = true;
    return p;
}

static void json_alloc_install(void) {
    const char *e = getenv("NIBBLE_TEST_FAIL_JSON_ALLOC");
    if (e && atoi(e) > 0) json_fail_every = (unsigned)atoi(e);
    json_set_alloc_funcs(json_alloc_checked, free);
}

void nb_resp_json_install(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, json_alloc_install);
}

void nb_resp_json_begin(void) { json_oom = false; }

void nb_resp_json_lost(void) { json_oom = true; }

typedef struct dump_ctx {
    nb_dynbuf *b;
    nb_status st;
} dump_ctx;

static int dump_cb(const char *s, size_t n, void *ud) {
    dump_ctx *d = ud;
    if (d->st == NB_OK) d->st = nb_dynbuf_add(d->b, s, n);
    return d->st == NB_OK ? 0 : -1;
}

nb_status nb_resp_dump(nb_dynbuf *b, const json_t *j) {
    if (json_oom) { /* a member may be missing: never send it as if whole */
        json_oom = false;
        nb_dynbuf_free(b);
        return nb_fail(NB_ERR_NOMEM, "out of memory building the JSON answer");
    }
    dump_ctx d = {b, NB_OK};
    if (json_dump_callback(j, dump_cb, &d, JSON_COMPACT) != 0 && d.st == NB_OK) {
        nb_dynbuf_free(b);
        d.st = nb_fail(NB_ERR_NOMEM, "out of memory encoding the JSON answer");
    }
    return d.st;
}

void nb_resp_set_json_cap(nb_http_resp *rs, int status, json_t *j, size_t cap) {
    nb_dynbuf b;
    nb_dynbuf_init(&b, cap);
    nb_status st = nb_resp_dump(&b, j);
    json_decref(j);
    if (st != NB_OK) {
        char m[300];
        snprintf(m, sizeof m, "the answer could not be encoded: %s", nb_errmsg());
        nb_resp_error(rs, 500, "server_error", NULL, NULL, m);
        return;
    }
    rs->status = status;
    rs->body = nb_dynbuf_take(&b, &rs->body_len);
    if (!rs->body) nb_resp_error(rs, 500, "server_error", NULL, NULL, "out of memory");
}

void nb_resp_set_json(nb_http_resp *rs, int status, json_t *j) {
    nb_resp_set_json_cap(rs, status, j, NB_LIMIT_RESPONSE_BYTES);
}

char *nb_resp_error_json(const nb_oai_error *e, bool *fixed) {
    json_oom = false;
    char *s = nb_oai_error_json(e);
    *fixed = !s || json_oom;
    if (*fixed) { /* no memory for the error's JSON: a fixed one, so the client still sees an error object */
        free(s);
        json_oom = false;
        s = strdup("{\"error\":{\"message\":\"out of memory building the response\",\"type\":"
                   "\"server_error\",\"param\":null,\"code\":null}}");
    }
    return s;
}

void nb_resp_set_error(nb_http_resp *rs, const nb_oai_error *e) {
    bool fixed = false;
    rs->body = nb_resp_error_json(e, &fixed);
    rs->status = fixed ? 500 : e->status;
    rs->body_len = rs->body ? strlen(rs->body) : 0;
}

void nb_resp_error(nb_http_resp *rs, int status, const char *type, const char *param, const char *code,
                   const char *msg) {
    nb_oai_error e;
    nb_oai_error_set(&e, status, type, param, code, "%s", msg);
    nb_resp_set_error(rs, &e);
}

bool nb_resp_header(nb_http_resp *rs, const char *name, const char *value) {
    if (nb_http_resp_header(rs, name, value)) return true;
    if (rs->stream && rs->stream_free) rs->stream_free(rs->stream_ud);
    rs->stream = NULL;
    rs->stream_free = NULL;
    rs->stream_ud = NULL;
    free(rs->body);
    rs->body = NULL;
    rs->body_len = 0;
    rs->n_extra = 0;
    rs->header_name = rs->header_value = NULL;
    rs->content_type = NULL;
    char m[200];
    snprintf(m, sizeof m, "internal error: the response needs more than %d extra headers (could not add %.64s)",
             NB_LIMIT_EXTRA_HEADERS, name ? name : "(null)");
    nb_resp_error(rs, 500, "server_error", NULL, "too_many_headers", m);
    return false;
}

json_t *nb_resp_jstr(const char *s, size_t n) {
    size_t l;
    char *c = nb_utf8_sanitize(s, n, &l);
    if (!c) {
        json_oom = true;
        return json_null();
    }
    json_t *j = json_stringn(c, l);
    free(c);
    return j ? j : json_null();
}

json_t *nb_resp_usage(const srv_req *r) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(r->n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(r->n_generated));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)r->n_prompt + r->n_generated));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(r->n_cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

const char *nb_resp_finish_str(nb_finish_reason f) {
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
    json_object_set_new(o, "token", nb_resp_jstr(p, n));
    if (with_bytes) {
        json_t *b = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(b, json_integer((unsigned char)p[i]));
        json_object_set_new(o, "bytes", b);
    }
    return o;
}

/* Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}]} */
json_t *nb_resp_chat_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n) {
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
json_t *nb_resp_completion_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n, size_t *offset) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = nb_token_piece_ref(tok, e[i].token, true, &len);
        if (!p) { p = ""; len = 0; }
        json_array_append_new(toks, nb_resp_jstr(p, len));
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
            else json_oom = true;
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

json_t *nb_resp_envelope(const srv_req *r, const char *object) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(r->created));
    json_object_set_new(o, "model", json_string(r->srv->model_name));
    return o;
}

void nb_resp_finish_blocking(srv_req *r, nb_http_resp *rs) {
    pthread_mutex_lock(&r->mu);
    bool ok = nb_req_wait_news(r, false);
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        nb_resp_error(rs, 499, "invalid_request_error", NULL, "client_closed", "client closed the connection");
        return;
    }
    if (r->oom) {
        char m[300];
        snprintf(m, sizeof m, "the output could not be stored: %s", r->store_err);
        nb_resp_error(rs, 500, "server_error", NULL, NULL, m);
        return;
    }
    if (r->finish == NB_FINISH_ERROR) {
        nb_resp_error(rs, 500, "server_error", NULL, NULL, r->error[0] ? r->error : "engine error");
        return;
    }
    if (r->finish == NB_FINISH_ABORT) {
        nb_resp_error(rs, 503, "service_unavailable", NULL, "aborted", "the request was aborted (server shutting down)");
        return;
    }
    const nb_tokenizer *tok = r->srv->be.tok;
    bool tool_calls = false;
    json_t *o = nb_resp_envelope(r, r->chat ? "chat.completion" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (r->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", nb_resp_jstr(nb_dynbuf_ptr(&r->text), nb_dynbuf_len(&r->text)));
        tool_calls = r->tools && nb_tool_message(r->tools, nb_dynbuf_ptr(&r->text), nb_dynbuf_len(&r->text), m);
        json_object_set_new(c, "message", m);
        json_object_set_new(c, "logprobs", r->logprobs >= 0 ? nb_resp_chat_logprobs(tok, r->lps, r->n_lps) : json_null());
    } else {
        if (r->echo_text) { /* echo: prompt first */
            nb_dynbuf all;
            nb_dynbuf_init(&all, r->srv->cfg.max_response_bytes);
            if (nb_dynbuf_add(&all, r->echo_text, r->echo_len) != NB_OK ||
                nb_dynbuf_add(&all, nb_dynbuf_ptr(&r->text), nb_dynbuf_len(&r->text)) != NB_OK) {
                char m[300];
                snprintf(m, sizeof m, "the output could not be stored: %s", nb_errmsg());
                nb_resp_error(rs, 500, "server_error", NULL, NULL, m);
                json_decref(c);
                json_decref(o);
                return;
            }
            json_object_set_new(c, "text", nb_resp_jstr(nb_dynbuf_ptr(&all), nb_dynbuf_len(&all)));
            nb_dynbuf_free(&all);
        } else {
            json_object_set_new(c, "text", nb_resp_jstr(nb_dynbuf_ptr(&r->text), nb_dynbuf_len(&r->text)));
        }
        json_t *lp = r->logprobs >= 0 ? nb_resp_completion_logprobs(tok, r->lps, r->n_lps, &r->text_offset) : json_null();
        if (r->echo_lp && json_is_object(lp)) {
            const char *k;
            json_t *v;
            json_object_foreach(lp, k, v) json_array_extend(json_object_get(r->echo_lp, k), v);
            json_decref(lp);
            lp = json_incref(r->echo_lp);
        }
        json_object_set_new(c, "logprobs", lp);
    }
    json_object_set_new(c, "finish_reason", json_string(tool_calls ? "tool_calls" : nb_resp_finish_str(r->finish)));
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    json_object_set_new(o, "usage", nb_resp_usage(r));
    nb_resp_set_json_cap(rs, 200, o, r->srv->cfg.max_response_bytes);
}
