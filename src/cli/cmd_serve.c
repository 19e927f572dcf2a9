/* nibble serve: the OpenAI-compatible HTTP server over the engine.
 *
 * Startup order: parse flags -> listen (so /health answers 503 while the
 * model loads) -> create the engine (logs the memory account) -> ready.
 * SIGTERM / SIGINT / POST /admin/drain: drain (/health 503 at once, what
 * still arrives is served) until nothing is in flight or --shutdown-timeout
 * passed, then stop accepting, abort the rest, free, exit 0. A second
 * signal aborts at once (docs/operations.md). Signals are blocked in every thread and taken with sigtimedwait
 * in the main thread. */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/limits.h"
#include "base/log.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/engine.h"
#include "eval/golden_score.h"
#include "server/admin.h"
#include "server/server.h"
#include "tokenizer/chat_template.h"

#define CMD "serve"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble serve [MODEL] [options]\n"
            "\n"
            "Serves MODEL (GGUF file, HF directory, llama2.c .bin; default: the built-in model) over an\n"
            "OpenAI-compatible HTTP API: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics.\n"
            "\n"
            "      --chat-template FILE|NAME    chat template instead of the model's: a Jinja file or a built-in\n"
            "                                   (chatml, llama2, llama3, mistral, zephyr, gemma, generic)\n"
            "      --host ADDR                  address to bind (default 127.0.0.1)\n"
            "      --port N                     port (default 8080; 0 = any free port, printed at startup)\n"
            "      --served-model-name NAME     the model id clients send (default: the file name)\n"
            "      --api-key KEY                require 'Authorization: Bearer KEY' on /v1 (prefer the\n"
            "                                   NIBBLE_API_KEY environment variable: command lines end up\n"
            "                                   in shell history and ps)\n"
            "      --protect-metrics            /health and /metrics need the key too\n"
            "      --max-request-bytes SIZE     largest request body (default 8MiB; 413 above)\n"
            "      --max-connections N          concurrent connections (default 1024)\n"
            "      --shutdown-timeout S         seconds in-flight requests get after SIGTERM or POST /admin/drain\n"
            "                                   (default 30; /health answers 503 at once, docs/operations.md)\n"
            "      --drain-quiet S              the drain ends once nothing is in flight and no request came\n"
            "                                   for S seconds (default 1; >= the balancer's detection time)\n"
            "      --warmup N                   run N decode steps before reporting ready (default 0)\n"
            "      --log-stats-interval S       log running/waiting/KV/throughput every S seconds (default 0: off)\n"
            "      --request-timeout S          seconds a client gets to send request line, headers and body\n"
            "                                   (default 30; the connection is closed after that)\n"
            "      --allowed-origins LIST       CORS: '*' or comma-separated origins (default: none)\n"
            "      --access-log PATH            one line per request (method, path, status, tokens,\n"
            "                                   latency; never prompt text) appended to PATH; '-' = stderr\n"
            "environment: NIBBLE_API_KEY (see --api-key); MALLOC_ARENA_MAX=N (glibc malloc arenas;\n"
            "                                   default 2 here, keeping RSS flat under many connections)\n"
            "engine options (MODEL may also be given with -m):\n");
    nb_engine_opts_usage(f, NB_EOPT_ALL);
}

/* ---- engine glue ---------------------------------------------------------- */

static nb_status be_submit(void *ctx, const nb_request_params *p, uint64_t *id) { return nb_engine_submit(ctx, p, id); }

/* Test-only (docs/serve.md): NIBBLE_TEST_TOKEN_DELAY_MS slows the engine
 * thread by that much per token event, so tests can hold requests in
 * flight (shutdown timeout, slow streams) with the tiny models. Read once. */
static long test_token_delay_ms;
typedef struct slow_sink {
    nb_sink_fn sink;
    void *ud;
} slow_sink;
static void slow_sink_fn(void *ud, const nb_token_event *ev) {
    slow_sink *w = ud;
    if (ev->token >= 0) {
        struct timespec d = {test_token_delay_ms / 1000, (test_token_delay_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    nb_sink_fn f = w->sink;
    void *u = w->ud;
    if (ev->finish != NB_FINISH_NONE) free(w);
    f(u, ev);
}
static nb_status be_submit_slow(void *ctx, const nb_request_params *p, uint64_t *id) {
    slow_sink *w = malloc(sizeof *w);
    if (!w) return nb_fail(NB_ERR_NOMEM, "out of memory");
    *w = (slow_sink){p->sink, p->ud};
    nb_request_params q = *p;
    q.sink = slow_sink_fn;
    q.ud = w;
    nb_status st = nb_engine_submit(ctx, &q, id);
    if (st != NB_OK) free(w);
    return st;
}

static long env_ms(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long ms = strtol(v, &end, 10);
    if (*end || ms < 0 || ms > 600000) {
        fprintf(stderr, "nibble serve: %s='%s' ignored (allowed 0..600000 ms)\n", name, v);
        return 0;
    }
    return ms;
}
static void be_abort(void *ctx, uint64_t id) { nb_engine_abort(ctx, id); }
static void be_stats(void *ctx, struct nb_engine_stats *out) { nb_engine_get_stats(ctx, out); }

/* glibc gives each thread that contends for malloc a new arena, up to 8 per
 * core; with one libmicrohttpd thread per connection every arena grows to
 * its own high-water mark, so RSS under steady load creeps up for many
 * minutes (docs/security.md "Soak"). Two arenas keep it flat. An operator's
 * MALLOC_ARENA_MAX (or GLIBC_TUNABLES glibc.malloc.arena_max) wins. Called
 * before any thread exists. */
#define SERVE_ARENA_MAX 2
static void cap_malloc_arenas(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    const char *tun = getenv("GLIBC_TUNABLES");
    if (getenv("MALLOC_ARENA_MAX") || (tun && strstr(tun, "glibc.malloc.arena_max"))) return;
    if (mallopt(M_ARENA_MAX, SERVE_ARENA_MAX) != 1) NB_WARN("serve: mallopt(M_ARENA_MAX) failed; malloc arenas not capped");
#endif
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *base_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/') s--;
    size_t len = n - s;
    if (len > 5 && !strncmp(path + n - 5, ".gguf", 5)) len -= 5;
    else if (len > 4 && !strncmp(path + n - 4, ".bin", 4)) len -= 4;
    if (len >= cap) len = cap - 1;
    memcpy(buf, path + s, len);
    buf[len] = '\0';
    return buf;
}

/* The command line, parsed. */
typedef struct serve_args {
    nb_engine_opts eo;
    nb_server_config sc;
    const char *name;          /* --served-model-name; NULL: from the model's file name */
    const char *chat_template; /* --chat-template FILE|NAME; NULL: the model's */
    int64_t shutdown_timeout, warmup, log_stats_interval;
    double drain_quiet;
    char name_buf[256];        /* the served model name when derived from the path */
} serve_args;

/* false: exit with *rc (--help printed, or a bad argument reported). */
static bool parse_args(int argc, char **argv, serve_args *sa, int *rc) {
    memset(sa, 0, sizeof *sa);
    nb_engine_opts_init(&sa->eo);
    sa->sc = (nb_server_config){.host = "127.0.0.1", .port = 8080};
    sa->shutdown_timeout = 30;
    sa->drain_quiet = 1.0;
    nb_server_config *sc = &sa->sc;
    int64_t v;
    uint64_t bytes;
    *rc = NB_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VAL() do { if (!(val = nb_arg_value(CMD, argc, argv, &i))) return false; } while (0)
#define INT(lo, hi) do { VAL(); if (!nb_arg_int(CMD, a, val, lo, hi, &v)) return false; } while (0)
        int eor = nb_engine_opts_parse(&sa->eo, NB_EOPT_ALL, CMD, argc, argv, &i);
        if (eor < 0) return false;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); *rc = NB_EXIT_OK; return false; }
        else if (!strcmp(a, "--chat-template")) { VAL(); sa->chat_template = val; }
        else if (!strcmp(a, "--host")) { VAL(); sc->host = val; }
        else if (!strcmp(a, "--port")) { INT(0, 65535); sc->port = (int)v; }
        else if (!strcmp(a, "--served-model-name")) { VAL(); sa->name = val; }
        else if (!strcmp(a, "--api-key")) { VAL(); sc->api_key = val; }
        else if (!strcmp(a, "--protect-metrics")) sc->protect_metrics = true;
        else if (!strcmp(a, "--max-request-bytes")) {
            VAL();
            if (!nb_arg_bytes(CMD, a, val, &bytes)) return false;
            if (bytes < NB_LIMIT_REQUEST_BYTES_MIN || bytes > NB_LIMIT_REQUEST_BYTES_MAX) {
                fprintf(stderr, "nibble %s: --max-request-bytes: '%s' is out of range (allowed 1KiB..1GiB)\n", CMD,
                        val);
                return false;
            }
            sc->max_request_bytes = (size_t)bytes;
        }
        else if (!strcmp(a, "--max-connections")) { INT(1, NB_LIMIT_CONNECTIONS_MAX); sc->max_connections = (unsigned)v; }
        else if (!strcmp(a, "--shutdown-timeout")) { INT(0, 86400); sa->shutdown_timeout = v; }
        else if (!strcmp(a, "--warmup")) { INT(0, 1 << 20); sa->warmup = v; }
        else if (!strcmp(a, "--drain-quiet")) {
            VAL();
            if (!nb_arg_float(CMD, a, val, 0, 3600, &sa->drain_quiet)) return false;
        }
        else if (!strcmp(a, "--log-stats-interval")) { INT(0, 86400); sa->log_stats_interval = v; }
        else if (!strcmp(a, "--request-timeout")) { INT(1, 86400); sc->request_timeout_s = (unsigned)v; }
        else if (!strcmp(a, "--allowed-origins")) { VAL(); sc->allowed_origins = val; }
        else if (!strcmp(a, "--access-log")) { VAL(); sc->access_log = val; }
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s' (see nibble serve --help)\n", CMD, a);
            return false;
        }
        else if (!sa->eo.model) sa->eo.model = a;
        else {
            fprintf(stderr, "nibble %s: unexpected argument '%s' (the model is already '%s')\n", CMD, a,
                    sa->eo.model);
            return false;
        }
#undef VAL
#undef INT
    }
    /* the API key from the environment unless given; the served name from the model's file name */
    if (!sc->api_key) {
        const char *env = getenv("NIBBLE_API_KEY");
        if (env && *env) sc->api_key = env;
    }
    sc->served_model_name = sa->name ? sa->name
                            : sa->eo.model ? base_name(sa->eo.model, sa->name_buf, sizeof sa->name_buf)
                                           : "nibble-default";
    return true;
}

/* SIGINT and SIGTERM blocked (every thread created from here on inherits
 * that; the main thread takes them with sigtimedwait), SIGPIPE ignored. */
static void block_signals(sigset_t *sigs) {
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Test-only delays (docs/serve.md), read once at startup: the model load
 * waits NIBBLE_TEST_LOAD_DELAY_MS here; NIBBLE_TEST_TOKEN_DELAY_MS slows
 * every token (be_submit_slow). */
static void apply_test_delays(void) {
    long load_delay_ms = env_ms("NIBBLE_TEST_LOAD_DELAY_MS");
    test_token_delay_ms = env_ms("NIBBLE_TEST_TOKEN_DELAY_MS");
    if (load_delay_ms) {
        NB_WARN("NIBBLE_TEST_LOAD_DELAY_MS=%ld: delaying the model load (test-only)", load_delay_ms);
        struct timespec ld = {load_delay_ms / 1000, (load_delay_ms % 1000) * 1000000L};
        nanosleep(&ld, NULL);
    }
    if (test_token_delay_ms) NB_WARN("NIBBLE_TEST_TOKEN_DELAY_MS=%ld: slowing every token (test-only)", test_token_delay_ms);
}

/* The engine over -m's model (or the built-in one); its memory account on stderr. */
static nb_status load_engine(const serve_args *sa, nb_engine **eng) {
    char model[4096];
    nb_status st = nb_engine_opts_model_path(sa->eo.model, model, sizeof model);
    if (st == NB_OK) st = nb_engine_create(model, &sa->eo.ec, eng);
    if (st != NB_OK) return st;
    const char *account = nb_engine_account(*eng);
    if (account && *account) fprintf(stderr, "%s%s", account, account[strlen(account) - 1] == '\n' ? "" : "\n");
    return NB_OK;
}

/* --warmup's steps, the startup phases (log line and metrics), then the
 * server answers with the engine behind it and /health turns 200. */
static nb_status go_ready(const serve_args *sa, nb_server *srv, nb_engine *eng, const nb_chat_template *ct,
                          double t_process) {
    struct nb_engine_stats es;
    nb_engine_get_stats(eng, &es);
    nb_server_backend be = {.ctx = eng, .submit = test_token_delay_ms ? be_submit_slow : be_submit, .abort = be_abort,
                            .stats = be_stats, .tok = nb_engine_tokenizer(eng), .max_model_len = es.max_model_len,
                            .score = nb_gscore_engine_run,
                            .chat_template = ct ? nb_chat_template_text(ct) : NULL};
    double t_warm = mono_s(), phases[NB_PHASE_COUNT];
    nb_status st = nb_admin_warmup(eng, (int32_t)sa->warmup);
    if (st != NB_OK) return st;
    nb_engine_get_stats(eng, &es);
    nb_admin_startup_phases(&es, mono_s() - t_warm, mono_s() - t_process, phases);
    nb_metrics_set_startup(nb_server_metrics(srv), phases);
    char sline[256];
    nb_admin_startup_line(phases, sline, sizeof sline);
    fprintf(stderr, "nibble serve: %s\n", sline);
    nb_server_set_ready(srv, &be);
    const char *host = sa->sc.host;
    fprintf(stderr, "nibble serve: ready: model '%s', max_model_len %d, max_num_seqs %d, on http://%s%s%s:%d\n",
            sa->sc.served_model_name, es.max_model_len, es.max_num_seqs, strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", nb_server_port(srv));
    return NB_OK;
}

/* After `sig` (or POST /admin/drain): drain until nothing is in flight and
 * no request came for --drain-quiet seconds, or --shutdown-timeout passed,
 * or a second signal; then close the listener and abort what is left. */
static void drain_and_stop(const serve_args *sa, nb_server *srv, const sigset_t *sigs, int sig) {
    fprintf(stderr, "nibble serve: %s: draining, then shutting down (%d requests in flight, up to %llds to finish)\n",
            sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "POST /admin/drain", nb_server_in_flight(srv),
            (long long)sa->shutdown_timeout);
    nb_server_drain(srv); /* /health 503 at once; what still arrives is served */
    double deadline = mono_s() + (double)sa->shutdown_timeout;
    bool forced = false;
    struct timespec tick = {0, 50 * 1000000L};
    /* until nothing is in flight and no request arrived for --drain-quiet
     * seconds (the balancer has seen /health 503 and stopped sending) */
    while ((nb_server_in_flight(srv) > 0 || nb_server_idle_s(srv) < sa->drain_quiet) && mono_s() < deadline) {
        if (sigtimedwait(sigs, NULL, &tick) > 0) {
            forced = true;
            break;
        }
    }
    nb_server_begin_shutdown(srv); /* close the listener; later requests on open connections get 503 */
    int left = nb_server_in_flight(srv);
    if (left > 0) {
        fprintf(stderr, "nibble serve: aborting %d requests still in flight%s\n", left,
                forced ? " (second signal)" : " (--shutdown-timeout reached)");
        nb_server_abort_all(srv);
        double d2 = mono_s() + 5;
        while (nb_server_in_flight(srv) > 0 && mono_s() < d2) nanosleep(&tick, NULL);
    }
}

int nb_cmd_serve(int argc, char **argv) {
    cap_malloc_arenas();
    double t_process = mono_s();
    serve_args sa;
    int rc;
    if (!parse_args(argc, argv, &sa, &rc)) return rc;
    nb_chat_template *ct = NULL; /* --chat-template, checked before anything starts */
    if (sa.chat_template && nb_chat_template_open(sa.chat_template, &ct) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    sigset_t sigs;
    block_signals(&sigs);

    nb_server *srv = NULL;
    nb_engine *eng = NULL;
    const nb_server_config *sc = &sa.sc;
    nb_status st = nb_server_create(sc, &srv);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    fprintf(stderr, "nibble serve: listening on http://%s%s%s:%d (model loading; /health answers 503 until ready)\n",
            strchr(sc->host, ':') ? "[" : "", sc->host, strchr(sc->host, ':') ? "]" : "", nb_server_port(srv));
    if (sc->api_key) NB_INFO("API key required on /v1%s", sc->protect_metrics ? ", /health and /metrics" : "");
    apply_test_delays();
    if ((st = load_engine(&sa, &eng)) != NB_OK || (st = go_ready(&sa, srv, eng, ct, t_process)) != NB_OK) {
        nb_cli_error(CMD);
        nb_engine_free(eng);
        nb_server_free(srv);
        nb_chat_template_free(ct);
        return nb_cli_exit_code(st);
    }
    int sig = nb_admin_wait(srv, eng, &sigs, (double)sa.log_stats_interval);
    drain_and_stop(&sa, srv, &sigs, sig);
    nb_gscore_engine_release();
    nb_engine_free(eng);
    nb_server_free(srv);
    nb_chat_template_free(ct);
    fprintf(stderr, "nibble serve: stopped\n");
    return NB_EXIT_OK;
}
