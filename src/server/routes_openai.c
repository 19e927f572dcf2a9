/* The OpenAI routes; see routes_openai.h. */
#include "server/routes_openai.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/prompt.h"
#include "server/request.h"
#include "server/respond.h"
#include "server/sse.h"

void nb_route_generate(nb_server *s, const nb_http_req *req, nb_http_resp *rs, nb_oai_kind kind,
                       int32_t *n_prompt, int32_t *n_gen, bool *logged) {
    atomic_store(&s->last_arrival_us, (int64_t)(nb_srv_now() * 1e6));
    int state = atomic_load(&s->state);
    if (state != ST_READY && state != ST_DRAINING) { /* a draining server still serves what reaches it */
        nb_resp_error(rs, 503, "service_unavailable", NULL, state == ST_LOADING ? "model_loading" : "shutting_down",
                   state == ST_LOADING ? "the model is still loading" : "the server is shutting down");
        nb_resp_header(rs, "Retry-After", state == ST_LOADING ? "1" : "5");
        return;
    }
    nb_oai_request q;
    nb_oai_error e;
    if (!nb_oai_parse(kind, req->body, req->body_len, &q, &e)) {
        nb_resp_set_error(rs, &e);
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
        nb_resp_set_error(rs, &e);
        goto out;
    }
    if ((kind == NB_OAI_CHAT && !nb_tool_prepare(&q, s->tool_format, &e)) || !nb_prompt_build(s, &q, &ids, &n_ids, &e)) {
        nb_resp_set_error(rs, &e);
        goto out;
    }
    if (q.echo) {
        if (!nb_prompt_echo(s, &q, ids, n_ids, &echo_text, &echo_len, &echo_lp, &e)) {
            nb_resp_set_error(rs, &e);
            goto out;
        }
        if (q.max_tokens == 0) { /* the prompt only */
            srv_req t = {.srv = s, .n_prompt = (int32_t)n_ids, .created = (int64_t)time(NULL)};
            snprintf(t.id, sizeof t.id, "cmpl-%08llx%016llx", (unsigned long long)(s->created & 0xffffffff),
                     (unsigned long long)(atomic_fetch_add(&s->id_seq, 1) * 0x9E3779B97F4A7C15ull));
            json_t *o = nb_resp_envelope(&t, "text_completion"), *c = json_object(), *arr = json_array();
            json_object_set_new(c, "index", json_integer(0));
            json_object_set_new(c, "text", nb_resp_jstr(echo_text, echo_len));
            json_object_set_new(c, "logprobs", echo_lp ? json_incref(echo_lp) : json_null());
            json_object_set_new(c, "finish_reason", json_string("length"));
            json_array_append_new(arr, c);
            json_object_set_new(o, "choices", arr);
            json_object_set_new(o, "usage", nb_resp_usage(&t));
            nb_resp_set_json(rs, 200, o);
            goto out;
        }
    }
    int64_t mml = s->be.max_model_len;
    int64_t max_tokens = q.max_tokens;
    bool given = max_tokens > 0;
    if (!given) max_tokens = kind == NB_OAI_COMPLETIONS ? NB_LIMIT_COMPLETIONS_DEFAULT_MAX_TOKENS : mml - (int64_t)n_ids;
    if (max_tokens < 1) max_tokens = 1;
    if ((int64_t)n_ids + max_tokens > mml) {
        const char *what = kind == NB_OAI_CHAT ? "messages" : "prompt";
        nb_oai_error_set(&e, 400, "invalid_request_error", what, "context_length_exceeded",
                         "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                         "(%zu in the %s, %lld in the completion). Please reduce the length of the %s or "
                         "max_tokens.",
                         (long long)mml, (long long)((int64_t)n_ids + max_tokens), n_ids, what,
                         (long long)max_tokens, what);
        nb_resp_set_error(rs, &e);
        goto out;
    }
    if (q.min_tokens > max_tokens) {
        nb_oai_error_set(&e, 400, "invalid_request_error", "min_tokens", "invalid_value",
                         "'min_tokens' (%d) must be at most max_tokens (%lld)", q.min_tokens, (long long)max_tokens);
        nb_resp_set_error(rs, &e);
        goto out;
    }

    r = nb_req_new(s);
    if (!r) {
        nb_resp_error(rs, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
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
    r->t_submit = nb_srv_now();
    r->method = "POST";
    r->path = kind == NB_OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    r->t_start = req->t_start;
    if (r->chat && nb_tool_stream_create(&q.tools, s->tool_format, &r->tools) != NB_OK) {
        nb_resp_error(rs, 500, "server_error", NULL, NULL, "out of memory");
        nb_req_release(r);
        r = NULL;
        goto out;
    }

    nb_request_params p = {0};
    p.prompt = ids;
    p.n_prompt = n_ids;
    p.sampling = q.sampling;
    p.max_tokens = (int32_t)max_tokens;
    p.min_tokens = q.min_tokens;
    p.ignore_eos = q.ignore_eos;
    p.stop = q.stop;
    p.n_stop = q.n_stop;
    if (r->chat && s->eot_id >= 0) { /* the template's end-of-turn token ends a chat answer too */
        int32_t *u = realloc(q.stop_token_ids, (q.n_stop_token_ids + 1) * sizeof *u);
        if (!u) {
            nb_resp_error(rs, 500, "server_error", NULL, NULL, "out of memory");
            nb_req_release(r);
            r = NULL;
            goto out;
        }
        u[q.n_stop_token_ids++] = s->eot_id;
        q.stop_token_ids = u;
    }
    p.stop_ids = q.stop_token_ids;
    p.n_stop_ids = q.n_stop_token_ids;
    p.logprobs = q.logprobs;
    p.logit_bias_ids = q.logit_bias_ids;
    p.logit_bias = q.logit_bias;
    p.n_logit_bias = q.n_logit_bias;
    p.grammar = q.grammar;
    p.render_special = r->tools && s->tool_special; /* the tool-call markers are control tokens (toolcall.h) */

    nb_status st = nb_req_submit(r, &p);
    if (st == NB_OK) q.grammar = NULL; /* the engine owns it now */
    if (st != NB_OK) {
        if (st == NB_ERR_OVERLOADED) {
            nb_resp_error(rs, 429, "rate_limit_error", NULL, "queue_full", nb_errmsg());
            nb_resp_header(rs, "Retry-After", "1");
        }
        else if (st == NB_ERR_INVALID || st == NB_ERR_RANGE)
            nb_resp_error(rs, 400, "invalid_request_error", NULL, "invalid_value", nb_errmsg());
        else
            nb_resp_error(rs, 500, "server_error", NULL, NULL, nb_errmsg());
        nb_req_http_done(r);
        goto out;
    }
    if (q.stream) {
        rs->status = 200;
        rs->content_type = "text/event-stream";
        rs->stream = nb_srv_sse_read;
        rs->stream_free = nb_srv_sse_free;
        rs->stream_ud = r;
        *logged = true; /* stream_free logs it */
    } else {
        nb_resp_finish_blocking(r, rs);
        pthread_mutex_lock(&r->mu); /* the engine may still be writing: the client went away first */
        *n_prompt = r->n_prompt;
        *n_gen = r->n_generated;
        pthread_mutex_unlock(&r->mu);
        nb_req_http_done(r);
    }
out:
    free(echo_text);
    if (echo_lp) json_decref(echo_lp);
    free(ids);
    nb_oai_request_free(&q);
}

void nb_route_models(nb_server *s, nb_http_resp *rs) {
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
    nb_resp_set_json(rs, 200, o);
}
