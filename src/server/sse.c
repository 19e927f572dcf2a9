/* Server-sent events of a streamed answer; see sse.h. */
#include "server/sse.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/http.h"
#include "server/respond.h"

/* Room the closing error event always gets, whatever the output cap. */
#define SSE_ERROR_ROOM 8192

/* Appends "data: <j>\n\n"; j is consumed. */
static nb_status sse_add(nb_dynbuf *b, json_t *j) {
    if (!j) return nb_fail(NB_ERR_NOMEM, "out of memory building an event");
    nb_status st = nb_dynbuf_add(b, "data: ", 6);
    if (st == NB_OK) st = nb_resp_dump(b, j);
    if (st == NB_OK) st = nb_dynbuf_add(b, "\n\n", 2);
    json_decref(j);
    return st;
}

/* Appends the error event ("data: {"error": ...}\n\n"). */
static nb_status sse_error(nb_dynbuf *b, const nb_oai_error *e) {
    bool fixed;
    char *s = nb_resp_error_json(e, &fixed);
    if (!s) return nb_fail(NB_ERR_NOMEM, "out of memory building the error event");
    nb_status st = nb_dynbuf_addf(b, "data: %s\n\n", s);
    free(s);
    return st;
}

/* An event could not be framed (the output cap or memory; nb_errmsg says
 * which): the stream ends with an error event and [DONE] instead of going
 * on with a piece missing; nb_srv_sse_free then aborts the engine request
 * if it still runs. false: not even that could be framed (drop the
 * connection). */
static bool sse_fail(srv_req *r) {
    nb_oai_error e;
    nb_oai_error_set(&e, 500, "server_error", NULL, NULL, "the output could not be sent: %s", nb_errmsg());
    size_t cap = NB_MAX(r->out.cap, (size_t)SSE_ERROR_ROOM);
    nb_dynbuf_free(&r->out);
    nb_dynbuf_init(&r->out, cap);
    r->out_off = 0;
    r->stage = 2;
    return sse_error(&r->out, &e) == NB_OK && nb_dynbuf_add(&r->out, "data: [DONE]\n\n", 14) == NB_OK;
}

static json_t *chunk(srv_req *r, const char *text, size_t n, const lp_entry *lps, size_t n_lps, bool role,
                     nb_finish_reason fin) {
    const nb_tokenizer *tok = r->srv->be.tok;
    json_t *o = nb_resp_envelope(r, r->chat ? "chat.completion.chunk" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (r->chat) {
        json_t *d = json_object();
        if (role) json_object_set_new(d, "role", json_string("assistant"));
        if (role || n || n_lps || !fin) json_object_set_new(d, "content", nb_resp_jstr(text, n));
        json_object_set_new(c, "delta", d);
        json_object_set_new(c, "logprobs", n_lps ? nb_resp_chat_logprobs(tok, lps, n_lps) : json_null());
    } else {
        json_object_set_new(c, "text", nb_resp_jstr(text, n));
        json_object_set_new(c, "logprobs", n_lps ? nb_resp_completion_logprobs(tok, lps, n_lps, &r->text_offset) : json_null());
    }
    const char *f = nb_resp_finish_str(fin);
    json_object_set_new(c, "finish_reason", f ? json_string(f) : json_null());
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    if (r->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

/* One token's output as chunks: its text (less what may become a tool
 * call) with its logprobs, then the tool-call deltas it completed. */
static nb_status sse_token(srv_req *r, const char *tp, size_t tl, const lp_entry *lps, size_t n_lps) {
    if (!tl && !n_lps) return NB_OK;
    nb_status st = NB_OK;
    if (r->tools) nb_tool_stream_push(r->tools, &tp, &tl); /* hold back what may become a tool call */
    if (tl || n_lps) st = sse_add(&r->out, chunk(r, tp, tl, lps, n_lps, false, NB_FINISH_NONE));
    json_t *deltas = r->tools ? nb_tool_stream_deltas(r->tools) : NULL; /* the calls' arguments as they come */
    for (size_t i = 0; deltas && i < json_array_size(deltas) && st == NB_OK; i++) {
        json_t *ch = chunk(r, "", 0, NULL, 0, false, NB_FINISH_NONE);
        nb_tool_chunk_set(ch, json_incref(json_array_get(deltas, i)), false);
        st = sse_add(&r->out, ch);
    }
    if (deltas) json_decref(deltas);
    return st;
}

ssize_t nb_srv_sse_read(void *ud, char *out, size_t cap) {
    srv_req *r = ud;
    for (;;) {
        if (r->out_off < nb_dynbuf_len(&r->out)) {
            size_t n = NB_MIN(cap, nb_dynbuf_len(&r->out) - r->out_off);
            memcpy(out, nb_dynbuf_ptr(&r->out) + r->out_off, n);
            r->out_off += n;
            return (ssize_t)n;
        }
        nb_dynbuf_reset(&r->out);
        r->out_off = 0;
        if (r->stage == 2) return NB_HTTP_STREAM_END;
        if (r->stage == 0 && r->chat) {
            r->stage = 1;
            if (sse_add(&r->out, chunk(r, "", 0, NULL, 0, true, NB_FINISH_NONE)) != NB_OK && !sse_fail(r))
                return NB_HTTP_STREAM_ERROR;
            continue;
        }
        r->stage = 1;
        pthread_mutex_lock(&r->mu);
        if (!nb_req_wait_news(r, true)) {
            pthread_mutex_unlock(&r->mu);
            return NB_HTTP_STREAM_ERROR;
        }
        nb_dynbuf text = r->text;
        lp_entry *lps = r->lps;
        size_t n_lps = r->n_lps;
        tok_mark *marks = r->marks;
        size_t n_marks = r->n_marks;
        nb_dynbuf_init(&r->text, text.cap);
        r->lps = NULL;
        r->n_lps = r->cap_lps = 0;
        r->marks = NULL;
        r->n_marks = r->cap_marks = 0;
        bool done = r->done;
        nb_finish_reason fin = r->finish;
        pthread_mutex_unlock(&r->mu);
        nb_status st = NB_OK;
        /* one chunk per token (marks), then whatever no mark covers */
        size_t text_at = 0, lps_at = 0;
        for (size_t m = 0; m <= n_marks && st == NB_OK; m++) {
            size_t text_end = m < n_marks ? NB_MIN(marks[m].text_end, nb_dynbuf_len(&text)) : nb_dynbuf_len(&text);
            size_t lps_end = m < n_marks ? NB_MIN(marks[m].lps_end, n_lps) : n_lps;
            st = sse_token(r, nb_dynbuf_ptr(&text) + text_at, text_end - text_at, lps ? lps + lps_at : NULL,
                           lps_end - lps_at);
            text_at = text_end;
            lps_at = lps_end;
        }
        nb_dynbuf_free(&text);
        free(lps);
        free(marks);
        if (st == NB_OK && done) {
            if (fin == NB_FINISH_ERROR || fin == NB_FINISH_ABORT || r->oom) {
                nb_oai_error e;
                if (r->oom)
                    nb_oai_error_set(&e, 500, "server_error", NULL, NULL, "the output could not be stored: %s",
                                     r->store_err);
                else if (fin == NB_FINISH_ERROR)
                    nb_oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", r->error[0] ? r->error : "engine error");
                else
                    nb_oai_error_set(&e, 503, "service_unavailable", NULL, "aborted",
                                     "the request was aborted (server shutting down)");
                st = sse_error(&r->out, &e);
            } else {
                const char *tp = "";
                size_t tl = 0;
                json_t *calls = r->tools ? nb_tool_stream_end(r->tools, &tp, &tl) : NULL;
                if (r->tools && tl) st = sse_add(&r->out, chunk(r, tp, tl, NULL, 0, false, NB_FINISH_NONE));
                for (size_t i = 0; calls && i < json_array_size(calls) && st == NB_OK; i++) {
                    json_t *ch = chunk(r, "", 0, NULL, 0, false, NB_FINISH_NONE);
                    nb_tool_chunk_set(ch, json_incref(json_array_get(calls, i)), false);
                    st = sse_add(&r->out, ch);
                }
                if (st == NB_OK) {
                    json_t *last = chunk(r, "", 0, NULL, 0, false, fin);
                    if (calls) nb_tool_chunk_set(last, NULL, true);
                    st = sse_add(&r->out, last);
                }
                if (calls) json_decref(calls);
            }
            if (st == NB_OK && r->include_usage) {
                json_t *u = nb_resp_envelope(r, r->chat ? "chat.completion.chunk" : "text_completion");
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", nb_resp_usage(r));
                st = sse_add(&r->out, u);
            }
            if (st == NB_OK) st = nb_dynbuf_add(&r->out, "data: [DONE]\n\n", 14);
            r->stage = 2;
        }
        if (st != NB_OK && !sse_fail(r)) return NB_HTTP_STREAM_ERROR;
    }
}

void nb_srv_sse_free(void *ud) {
    srv_req *r = ud;
    pthread_mutex_lock(&r->mu);
    bool done = r->done;
    if (!done) r->client_gone = true;
    /* Read under the lock: until the engine finishes the request it may still
     * update the counts. */
    int n_prompt = r->n_prompt, n_generated = r->n_generated;
    pthread_mutex_unlock(&r->mu);
    if (!done) r->srv->be.abort(r->srv->be.ctx, r->eid); /* client went away mid-stream */
    nb_server_access_log(r->srv, r->method, r->path, done ? 200 : 499, n_prompt, n_generated, r->t_start);
    nb_req_http_done(r);
}
