/* The HTTP front of `nibble serve`: dispatch to the routes, auth, CORS,
 * the access log, /health and /metrics, and the server's lifecycle; see
 * server.h. The OpenAI routes are in routes_openai.c, the request lifecycle
 * in request.c, response bodies in respond.c, SSE framing in sse.c, prompt
 * building in prompt.c. */
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
#include "server/admin.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/request.h"
#include "server/respond.h"
#include "server/routes_openai.h"
#include "server/server_int.h"
#include "tokenizer/chat_template.h"

static void handle_metrics(nb_server *s, nb_http_resp *rs) {
    struct nb_engine_stats st;
    bool have = atomic_load(&s->state) != ST_LOADING && s->be.stats;
    if (have) s->be.stats(s->be.ctx, &st);
    char *m = nb_metrics_format(&s->metrics, have ? &st : NULL, s->model_name);
    if (!m) { /* never a cut page: a scraper would read the missing series as absent */
        char msg[200];
        snprintf(msg, sizeof msg, "the /metrics page could not be built: %s", nb_errmsg());
        nb_resp_error(rs, 500, "server_error", NULL, "metrics_unavailable", msg);
        return;
    }
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
    if (asprintf(&all,
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
    if (!all) {
        nb_resp_error(rs, 500, "server_error", NULL, "metrics_unavailable",
                      "the /metrics page could not be built: out of memory");
        return;
    }
    rs->body = all;
    rs->body_len = strlen(all);
    rs->status = 200;
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
enum { R_NONE = 0, R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_METRICS, R_DRAIN };

static int route_of(const char *path) {
    if (!strcmp(path, "/v1/completions")) return R_COMPLETIONS;
    if (!strcmp(path, "/v1/chat/completions")) return R_CHAT;
    if (!strcmp(path, "/v1/models")) return R_MODELS;
    if (!strcmp(path, "/health")) return R_HEALTH;
    if (!strcmp(path, "/metrics")) return R_METRICS;
    if (!strcmp(path, "/admin/drain")) return R_DRAIN;
    return R_NONE;
}

static const char *route_methods(int route) {
    return route == R_COMPLETIONS || route == R_CHAT || route == R_DRAIN ? "POST" : "GET, HEAD";
}

static bool method_ok(int route, const char *method) {
    if (route == R_COMPLETIONS || route == R_CHAT || route == R_DRAIN) return !strcmp(method, "POST");
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

/* false: the headers did not fit and rs is now a 500 (nb_resp_header). */
static bool cors_headers(nb_server *s, const nb_http_req *req, nb_http_resp *rs) {
    const char *o = cors_origin(s, req);
    if (!o) return true;
    return nb_resp_header(rs, "Access-Control-Allow-Origin", o) && (!strcmp(o, "*") || nb_resp_header(rs, "Vary", "Origin"));
}

/* One access-log line: time, method, path (non-printable bytes as %XX,
 * capped), status, tokens, latency. Never the body. */
void nb_server_access_log(nb_server *s, const char *method, const char *path, int status, int32_t n_prompt,
                          int32_t n_gen, double t_start) {
    nb_metrics_http_response(&s->metrics, status); /* every response is logged here exactly once */
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
            n_prompt, n_gen, t_start > 0 ? (nb_srv_now() - t_start) * 1000.0 : 0.0);
}

static void unauthorized(nb_http_resp *rs) {
    nb_resp_error(rs, 401, "authentication_error", NULL, "invalid_api_key",
               "Missing or incorrect API key: send 'Authorization: Bearer <key>'");
    rs->header_name = "WWW-Authenticate";
    rs->header_value = "Bearer";
}

static void no_route(const nb_http_req *req, nb_http_resp *rs) {
    char m[160];
    snprintf(m, sizeof m, "No route for %.16s %.100s%s", req->method, req->path,
             strlen(req->path) > 100 ? "..." : "");
    nb_resp_error(rs, 404, "not_found_error", NULL, "not_found", m);
}

static void bad_method(const nb_http_req *req, int route, nb_http_resp *rs) {
    char m[128];
    const char *allow = route_methods(route);
    snprintf(m, sizeof m, "Method %.16s is not allowed on %.64s (allowed: %s)", req->method, req->path, allow);
    nb_resp_error(rs, 405, "invalid_request_error", NULL, "method_not_allowed", m);
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
            nb_resp_error(rs, 403, "invalid_request_error", NULL, "cors_origin_not_allowed",
                       "Origin not allowed (--allowed-origins)");
            return true;
        }
        rs->status = 204;
        rs->body = NULL;
        rs->body_len = 0;
        (void)(nb_resp_header(rs, "Access-Control-Allow-Methods",
                              route == R_COMPLETIONS || route == R_CHAT || route == R_DRAIN ? "POST, OPTIONS"
                                                                                            : "GET, HEAD, OPTIONS") &&
               nb_resp_header(rs, "Access-Control-Allow-Headers", "Authorization, Content-Type") &&
               nb_resp_header(rs, "Access-Control-Max-Age", "600")); /* false: rs is a 500 */
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
    /* Without a key, anyone who reaches the port could take the replica out
     * of rotation: only a client on this machine may drain it. */
    if (route == R_DRAIN && !s->api_key && !nb_http_peer_loopback(req)) {
        nb_resp_error(rs, 403, "permission_error", NULL, "drain_not_allowed",
                      "POST /admin/drain without an API key is accepted only from loopback (127.0.0.1, ::1); "
                      "set --api-key (or NIBBLE_API_KEY) to drain this server from another machine");
        return true;
    }
    return false;
}

static void early(void *ud, const nb_http_req *req, nb_http_resp *rs) {
    nb_server *s = ud;
    if (!pre_checks(s, req, route_of(req->path), rs)) return; /* go on: read the body */
    (void)cors_headers(s, req, rs); /* false: rs is a 500 now, sent as such */
    nb_server_access_log(s, req->method, req->path, rs->status, 0, 0, req->t_start);
}

static void handle(void *ud, const nb_http_req *req, nb_http_resp *rs) {
    nb_server *s = ud;
    nb_resp_json_begin();
    int route = route_of(req->path);
    int32_t n_prompt = 0, n_gen = 0;
    bool logged = false;
    /* CORS first, while the response has no body or stream: a header that
     * does not fit is then a plain 500 */
    if (!cors_headers(s, req, rs) || pre_checks(s, req, route, rs)) {
    } else if (req->too_large) {
        char m[160];
        snprintf(m, sizeof m, "The request body is larger than %zu bytes (--max-request-bytes)", s->cfg.max_request_bytes);
        nb_resp_error(rs, 413, "invalid_request_error", NULL, "request_too_large", m);
        rs->close = true;
    } else if (route == R_COMPLETIONS || route == R_CHAT) {
        nb_route_generate(s, req, rs, route == R_CHAT ? NB_OAI_CHAT : NB_OAI_COMPLETIONS, &n_prompt, &n_gen, &logged);
    } else if (route == R_MODELS) {
        nb_route_models(s, rs);
    } else if (route == R_HEALTH) {
        int st = atomic_load(&s->state);
        struct nb_engine_stats es;
        bool have = st != ST_LOADING && s->be.stats;
        if (have) s->be.stats(s->be.ctx, &es);
        nb_admin_health(rs, st == ST_READY ? "ok" : st == ST_LOADING ? "loading" : st == ST_DRAINING ? "draining"
                                                                                                   : "shutting_down",
                        st == ST_READY, s->model_name, have ? &es : NULL);
    } else if (route == R_DRAIN) {
        if (atomic_load(&s->state) == ST_LOADING) {
            nb_resp_error(rs, 503, "service_unavailable", NULL, "model_loading", "the model is still loading");
            nb_resp_header(rs, "Retry-After", "1");
        } else {
            nb_server_drain(s);
            nb_admin_drain_resp(rs, nb_server_in_flight(s));
        }
    } else {
        handle_metrics(s, rs);
    }
    if (!logged) nb_server_access_log(s, req->method, req->path, rs->status, n_prompt, n_gen, req->t_start);
}

/* ---- lifecycle ---------------------------------------------------------- */

nb_status nb_server_create(const nb_server_config *c, nb_server **out) {
    *out = NULL;
    if (!c->served_model_name || !*c->served_model_name)
        return nb_fail(NB_ERR_INVALID, "--served-model-name: must not be empty");
    nb_resp_json_install();
    nb_server *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    s->cfg = *c;
    if (!s->cfg.max_request_bytes) s->cfg.max_request_bytes = NB_LIMIT_REQUEST_BYTES;
    if (!s->cfg.max_response_bytes) s->cfg.max_response_bytes = NB_LIMIT_RESPONSE_BYTES;
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
    s->tool_format = nb_tool_format_detect(nb_chat_template_text(s->tmpl));
    NB_INFO("tool calls: %s format (docs/serve.md \"Tools\")", nb_tool_format_name(s->tool_format));
    s->tool_special = nb_tool_markers_special(s->tool_format, b->tok);
    if (s->tool_special) NB_INFO("tool calls: the markers are control tokens; requests with tools output their text");
    atomic_store(&s->state, ST_READY);
}

void nb_server_drain(nb_server *s) {
    int expect = ST_READY;
    atomic_compare_exchange_strong(&s->state, &expect, ST_DRAINING);
}

bool nb_server_draining(nb_server *s) {
    int st = atomic_load(&s->state);
    return st == ST_DRAINING || st == ST_SHUTTING;
}

struct nb_metrics *nb_server_metrics(nb_server *s) { return &s->metrics; }

double nb_server_idle_s(nb_server *s) {
    int64_t t = atomic_load(&s->last_arrival_us);
    return t ? nb_srv_now() - (double)t * 1e-6 : 1e9;
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
            if (!r->submitted) r->abort_pending = true; /* still in submit: nb_req_submit aborts it */
            else if (!r->abort_sent) {
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
