/* The request lifecycle of `nibble serve`: reference counting, the
 * engine's sink, waiting for news; see request.h. */
#include "server/request.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/http.h"

double nb_srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

srv_req *nb_req_new(nb_server *s) {
    srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->srv = s;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    nb_dynbuf_init(&r->text, s->cfg.max_response_bytes);
    nb_dynbuf_init(&r->out, s->cfg.max_response_bytes);
    return r;
}

nb_status nb_req_submit(srv_req *r, nb_request_params *p) {
    nb_server *s = r->srv;
    p->sink = nb_req_sink;
    p->ud = r;
    pthread_mutex_lock(&s->mu);
    r->next = s->reqs;
    if (s->reqs) s->reqs->prev = r;
    s->reqs = r;
    s->in_flight++;
    r->refs = 2; /* HTTP side + engine side */
    pthread_mutex_unlock(&s->mu);
    uint64_t eid = 0;
    nb_status st = s->be.submit(s->be.ctx, p, &eid);
    pthread_mutex_lock(&s->mu);
    r->eid = eid;
    r->submitted = st == NB_OK;
    /* nb_server_abort_all ran while the engine was taking it */
    bool abort_now = r->submitted && r->abort_pending && !r->abort_sent;
    if (abort_now) r->abort_sent = true;
    pthread_mutex_unlock(&s->mu);
    if (abort_now) s->be.abort(s->be.ctx, eid);
    if (st != NB_OK) r->refs = 1; /* the engine never saw it */
    return st;
}

void nb_req_release(srv_req *r) {
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
    nb_dynbuf_free(&r->text);
    nb_dynbuf_free(&r->out);
    free(r->lps);
    free(r->marks);
    free(r->echo_text);
    if (r->echo_lp) json_decref(r->echo_lp);
    nb_tool_stream_free(r->tools);
    free(r);
}

/* The HTTP side is done with the request (response sent or dropped). */
void nb_req_http_done(srv_req *r) {
    nb_server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    pthread_mutex_unlock(&s->mu);
    nb_req_release(r);
}

void nb_req_sink(void *ud, const nb_token_event *ev) {
    srv_req *r = ud;
    nb_server *s = r->srv;
    double t = nb_srv_now();
    pthread_mutex_lock(&r->mu);
    size_t text_before = r->text.len, lps_before = r->n_lps;
    if (ev->text_len && ev->text && !r->oom && nb_dynbuf_add(&r->text, ev->text, ev->text_len) != NB_OK) {
        r->oom = true; /* the text so far is dropped with it: the answer is an error, never a cut text */
        snprintf(r->store_err, sizeof r->store_err, "%s", nb_errmsg());
    }
    if (ev->token >= 0) {
        if (r->logprobs >= 0) {
            if (r->n_lps == r->cap_lps) {
                size_t cap = r->cap_lps ? r->cap_lps * 2 : 16;
                lp_entry *q = realloc(r->lps, cap * sizeof *q);
                if (q) { r->lps = q; r->cap_lps = cap; }
                else if (!r->oom) {
                    r->oom = true;
                    snprintf(r->store_err, sizeof r->store_err, "out of memory storing %zu logprob entries", cap);
                }
            }
            if (r->n_lps < r->cap_lps) {
                lp_entry *e = &r->lps[r->n_lps++];
                e->token = ev->token;
                e->logprob = ev->logprob;
                e->n_top = NB_MAX(0, NB_MIN(ev->n_top, NB_LIMIT_TOP_LOGPROBS));
                memcpy(e->top_ids, ev->top_ids, sizeof e->top_ids);
                memcpy(e->top_lps, ev->top_logprobs, sizeof e->top_lps);
            }
        }
        if (!r->got_first) {
            r->got_first = true;
            r->t_first = t;
            nb_metrics_observe(&s->metrics, NB_HIST_TTFT, ev->ttft_s > 0 ? ev->ttft_s : t - r->t_submit);
            nb_metrics_observe(&s->metrics, NB_HIST_QUEUE, ev->queue_s);
        } else {
            nb_metrics_observe(&s->metrics, NB_HIST_ITL, t - r->t_last);
        }
        r->t_last = t;
    }
    if (r->stream && (r->text.len > text_before || r->n_lps > lps_before)) {
        if (r->n_marks == r->cap_marks) {
            size_t cap = r->cap_marks ? r->cap_marks * 2 : 16;
            tok_mark *q = realloc(r->marks, cap * sizeof *q);
            if (q) { r->marks = q; r->cap_marks = cap; }
        }
        /* without room the token's output joins the next chunk: late, never lost */
        if (r->n_marks < r->cap_marks) r->marks[r->n_marks++] = (tok_mark){r->text.len, r->n_lps};
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
        if (r->got_first && r->n_generated >= 2)
            nb_metrics_observe(&s->metrics, NB_HIST_TPOT, (r->t_last - r->t_first) / (r->n_generated - 1));
        if (ev->finish == NB_FINISH_ABORT)
            nb_metrics_abort(&s->metrics, r->oom_aborted ? NB_ABORT_SERVER : r->client_gone ? NB_ABORT_CLIENT
                                          : atomic_load(&s->state) == ST_SHUTTING ? NB_ABORT_SHUTDOWN : NB_ABORT_OTHER);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (fin) nb_req_release(r);
}

/* Waits (mu held) until there is news or the request is done; false when
 * the client went away (the engine request is then aborted). */
bool nb_req_wait_news(srv_req *r, bool any_news) {
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
