/* nibble bench serve: the load generator for any OpenAI-compatible server
 * (nibble serve, vLLM, llama-server): a concurrency ladder or Poisson request
 * rates over HTTP, TTFT / TPOT / ITL / E2E percentiles, errors by reason, the
 * server's own view from /metrics, the SLO knee, results.json, requests.csv
 * and gnuplot plots. nibble bench compare: two results.json side by side.
 * The client is src/bench (HTTP only: it never links the engine). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "bench/client.h"
#include "bench/report.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h" /* NIBBLE_VERSION */

#define CMD "bench serve"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble bench serve [--endpoint URL] [--model NAME] [--chat] [workload] [mode] [report]\n"
            "  --endpoint URL          base URL of an OpenAI-compatible server (default http://127.0.0.1:8080; /v1 added)\n"
            "  --api-key-env NAME      environment variable holding the API key (default OPENAI_API_KEY, then NIBBLE_API_KEY)\n"
            "  --model NAME            model to ask for (default: the first of GET /v1/models)\n"
            "  --chat                  /v1/chat/completions (default /v1/completions)\n"
            "workload:\n"
            "  --prompts FILE.jsonl    {\"prompt\": ...} or {\"messages\": [...]} per line, optional \"max_tokens\"\n"
            "  --input-len N[:M]       synthetic prompts of N words (uniform N..M) (default 128)\n"
            "  --output-len N[:M]      max_tokens (uniform N..M) (default 128)\n"
            "  --ignore-eos            send ignore_eos: every request generates max_tokens\n"
            "  --extra-body JSON|@FILE fields merged into every request body (e.g. '{\"logit_bias\": {...}}')\n"
            "  --temperature T         sampling temperature sent (default 0; -1 = not sent)\n"
            "  --seed N                prompts and arrivals (default 0): the same seed replays the same load\n"
            "mode (one of):\n"
            "  --concurrency 1,2,4     ladder: that many requests in flight per level (default 1,2,4,8,16,32)\n"
            "  --request-rate R[,R2]   Poisson arrivals per second per level; inf = all at once\n"
            "  --duration S            each level runs S seconds (requests started in time are waited for)\n"
            "  --num-prompts N         or N requests per level (default max(16, 4 x concurrency); 64 in rate mode)\n"
            "  --warmup N              uncounted requests before each level (default: the level's concurrency; 0 in rate mode)\n"
            "  --request-timeout S     a stream with no data for S seconds fails as stalled (default 300)\n"
            "  --slo-ttft-p99 S        SLO on p99 TTFT (seconds); --slo-tpot-p99 S the same for TPOT\n"
            "  --stop-at-slo           end the ladder at the first level past the SLOs\n"
            "  --max-error-rate F      exit 1 when a level's failed/all exceeds F (default 0)\n"
            "report:\n"
            "  --json                  print results.json to stdout (the tables go to stderr)\n"
            "  --out DIR               write results.json, requests.csv, plots (PNG, SVG; needs gnuplot) in DIR\n"
            "  --no-metrics            do not read the server's /metrics; --metrics-url URL to read another\n"
            "  --metrics-interval S    /metrics sampling period during a level (default 0.5)\n"
            "Exit: 0 ok, 1 an error rate above --max-error-rate or interrupted (Ctrl-C: partial report written),\n"
            "2 bad arguments.\n"
            "\n"
            "usage: nibble bench compare A.json B.json [--json] [--out DIR]\n"
            "  both runs' levels side by side: A, B and B/A per metric; --out DIR writes compare.json and a plot.\n");
}

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

/* "N" or "N:M" with lo <= N <= M <= hi. */
static bool parse_range(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *a, int64_t *b) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *c = strchr(buf, ':');
    if (c) *c = '\0';
    if (!nb_arg_int(CMD, flag, buf, lo, hi, a)) return false;
    *b = *a;
    if (c && !nb_arg_int(CMD, flag, c + 1, lo, hi, b)) return false;
    if (*b < *a) {
        fprintf(stderr, "nibble %s: %s: '%s': the range N:M needs N <= M\n", CMD, flag, v);
        return false;
    }
    return true;
}

/* A comma list of numbers (or "inf" when allow_inf). */
static bool parse_list(const char *flag, const char *v, bool integer, bool allow_inf, double **out, int *n) {
    int cap = 1;
    for (const char *p = v; *p; p++) cap += *p == ',';
    double *x = calloc((size_t)cap, sizeof *x);
    char *s = nb_strdup(v), *save = NULL;
    int k = 0;
    bool ok = x && s;
    for (char *t = s ? strtok_r(s, ",", &save) : NULL; ok && t; t = strtok_r(NULL, ",", &save)) {
        if (allow_inf && !strcmp(t, "inf")) { x[k++] = INFINITY; continue; }
        if (integer) {
            int64_t i;
            ok = nb_arg_int(CMD, flag, t, 1, 100000, &i);
            x[k++] = (double)i;
        } else {
            ok = nb_arg_float(CMD, flag, t, 1e-6, 1e9, &x[k++]);
        }
    }
    free(s);
    if (ok && k == 0) {
        fprintf(stderr, "nibble %s: %s: '%s' is empty (a comma list like 1,2,4)\n", CMD, flag, v);
        ok = false;
    }
    if (!ok) { free(x); return false; }
    *out = x;
    *n = k;
    return true;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", a, b);
    return s;
}

static bool mkdir_p(const char *dir) {
    char b[4096];
    snprintf(b, sizeof b, "%s", dir);
    for (char *p = b + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(b, 0777) != 0 && errno != EEXIST) return false;
            *p = '/';
        }
    return mkdir(b, 0777) == 0 || errno == EEXIST;
}

static bool write_json(const char *dir, const char *name, const json_t *o) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (!t || nb_write_file(p, t, strlen(t)) != NB_OK) { /* temporary file, fsync, rename */
        fprintf(stderr, "nibble bench: cannot write %s%s%s\n", p, t ? ": " : "", t ? nb_errmsg() : "");
        free(t);
        return false;
    }
    free(t);
    return true;
}

static char *first_model(const char *base, const char *key) {
    char *url = join(base, "/models");
    char *body = url ? nb_bench_http_get(url, key) : NULL;
    free(url);
    if (!body) return NULL;
    json_t *o = json_loads(body, 0, NULL);
    free(body);
    json_t *id = json_object_get(json_array_get(json_object_get(o, "data"), 0), "id");
    char *m = json_is_string(id) ? nb_strdup(json_string_value(id)) : NULL;
    json_decref(o);
    return m;
}

int nb_cmd_bench_serve(int argc, char **argv) {
    const char *endpoint = "http://127.0.0.1:8080", *key_env = NULL, *model = NULL, *prompts = NULL, *conc_s = NULL,
               *rate_s = NULL, *out_dir = NULL, *metrics_url = NULL, *extra = NULL;
    bool json = false, stop_at_slo = false, no_metrics = false;
    double duration = 0, request_timeout = 300, slo_ttft = 0, slo_tpot = 0, max_err = 0, metrics_interval = 0.5;
    int64_t num_prompts = 0, warmup = -1, seed = 0;
    nb_bench_workload wl;
    nb_bench_workload_init(&wl);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!strcmp(a, "--chat")) { wl.chat = true; continue; }
        if (!strcmp(a, "--ignore-eos")) { wl.ignore_eos = true; continue; }
        if (!strcmp(a, "--stop-at-slo")) { stop_at_slo = true; continue; }
        if (!strcmp(a, "--no-metrics")) { no_metrics = true; continue; }
        if (a[0] != '-') { fprintf(stderr, "nibble %s: unexpected argument '%s'\n", CMD, a); return NB_EXIT_USAGE; }
        if (!(v = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        if (!strcmp(a, "--endpoint")) endpoint = v;
        else if (!strcmp(a, "--api-key-env")) key_env = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--prompts")) prompts = v;
        else if (!strcmp(a, "--extra-body")) extra = v;
        else if (!strcmp(a, "--input-len")) { if (!parse_range(a, v, 1, 1 << 20, &wl.in_lo, &wl.in_hi)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--output-len")) { if (!parse_range(a, v, 1, 1 << 20, &wl.out_lo, &wl.out_hi)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--temperature")) { if (!nb_arg_float(CMD, a, v, -1, 100, &wl.temperature)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--seed")) { if (!nb_arg_int(CMD, a, v, 0, INT64_MAX, &seed)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--concurrency")) conc_s = v;
        else if (!strcmp(a, "--request-rate")) rate_s = v;
        else if (!strcmp(a, "--duration")) { if (!nb_arg_float(CMD, a, v, 0.001, 1e7, &duration)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--num-prompts")) { if (!nb_arg_int(CMD, a, v, 1, 100000000, &num_prompts)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--warmup")) { if (!nb_arg_int(CMD, a, v, 0, 1000000, &warmup)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--request-timeout")) { if (!nb_arg_float(CMD, a, v, 0.01, 1e6, &request_timeout)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--slo-ttft-p99")) { if (!nb_arg_float(CMD, a, v, 1e-6, 1e6, &slo_ttft)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--slo-tpot-p99")) { if (!nb_arg_float(CMD, a, v, 1e-6, 1e6, &slo_tpot)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--max-error-rate")) { if (!nb_arg_float(CMD, a, v, 0, 1, &max_err)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--metrics-interval")) { if (!nb_arg_float(CMD, a, v, 0.01, 3600, &metrics_interval)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--metrics-url")) metrics_url = v;
        else if (!strcmp(a, "--out")) out_dir = v;
        else {
            fprintf(stderr, "nibble %s: unknown option '%s' (see --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (conc_s && rate_s) {
        fprintf(stderr, "nibble %s: --concurrency and --request-rate exclude each other (pick one mode)\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (duration > 0 && num_prompts > 0) {
        fprintf(stderr, "nibble %s: --duration and --num-prompts exclude each other\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (stop_at_slo && slo_ttft <= 0 && slo_tpot <= 0) {
        fprintf(stderr, "nibble %s: --stop-at-slo needs --slo-ttft-p99 and/or --slo-tpot-p99\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0) {
        fprintf(stderr, "nibble %s: --endpoint: '%s' is not an http:// or https:// URL\n", CMD, endpoint);
        return NB_EXIT_USAGE;
    }
    double *ladder = NULL;
    int n_levels = 0;
    bool rate_mode = rate_s != NULL;
    if (!parse_list(rate_mode ? "--request-rate" : "--concurrency", rate_mode ? rate_s : conc_s ? conc_s : "1,2,4,8,16,32",
                    !rate_mode, rate_mode, &ladder, &n_levels))
        return NB_EXIT_USAGE;
    if (out_dir) { /* the output rule (base/file.h) before the run */
        static const char *const names[] = {"results.json", "requests.csv", "plots.gp"};
        const char *ins[] = {prompts};
        if (nb_out_dir_check(out_dir, names, 3, ins, 1, false, "--out") != NB_OK) {
            nb_cli_error(CMD);
            free(ladder);
            return NB_EXIT_USAGE;
        }
    }
    wl.seed = (uint64_t)seed;
    if ((prompts && nb_bench_workload_load(&wl, prompts) != NB_OK) ||
        (extra && nb_bench_workload_set_extra(&wl, extra) != NB_OK)) {
        nb_cli_error(CMD);
        nb_bench_workload_free(&wl);
        free(ladder);
        return NB_EXIT_USAGE;
    }

    /* base URL: no trailing '/', ends in /v1 */
    char base[2048], root[2048];
    snprintf(base, sizeof base, "%s", endpoint);
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/') base[--bl] = '\0';
    if (bl < 3 || strcmp(base + bl - 3, "/v1") != 0) snprintf(base + bl, sizeof base - bl, "/v1");
    snprintf(root, sizeof root, "%s", base);
    root[strlen(root) - 3] = '\0';
    char *murl = NULL;
    if (!no_metrics) murl = metrics_url ? nb_strdup(metrics_url) : join(root, "/metrics");

    const char *key = NULL;
    if (key_env) key = getenv(key_env);
    else {
        key = getenv("OPENAI_API_KEY");
        if (!key || !*key) key = getenv("NIBBLE_API_KEY");
    }
    char *model_owned = NULL;
    if (!model) model = model_owned = first_model(base, key);
    wl.model = model;

    nb_bench_config cfg = {.base_url = base, .metrics_url = murl, .api_key = key, .wl = &wl, .duration = duration,
                           .num_prompts = num_prompts, .request_timeout = request_timeout,
                           .metrics_interval = metrics_interval, .stop = &g_stop};
    /* metrics: one probe; a server without /metrics is benchmarked without the server view */
    if (murl) {
        nb_prom p;
        if (!nb_bench_scrape(murl, key, &p)) {
            fprintf(stderr, "nibble bench: %s: no Prometheus metrics with known names (nibble:, vllm:, llamacpp:); "
                            "no server view\n", murl);
            cfg.metrics_url = NULL;
        }
    }

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);

    FILE *tf = json ? stderr : stdout;
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *res = json_object(), *params = json_object(), *levels = json_array(), *lad = json_array();
    for (int i = 0; i < n_levels; i++)
        json_array_append_new(lad, isinf(ladder[i]) ? json_string("inf") : rate_mode ? json_real(ladder[i]) : json_integer((json_int_t)ladder[i]));
    json_object_set_new(res, "tool", json_string("nibble bench serve"));
    json_object_set_new(res, "version", json_string(NIBBLE_VERSION));
    json_object_set_new(params, "endpoint", json_string(base));
    json_object_set_new(params, "model", model ? json_string(model) : json_null());
    json_object_set_new(params, "api", json_string(wl.chat ? "chat" : "completions"));
    json_object_set_new(params, "mode", json_string(rate_mode ? "request_rate" : "concurrency"));
    json_object_set_new(params, rate_mode ? "request_rate" : "concurrency", lad);
    json_object_set_new(params, "duration_s", duration > 0 ? json_real(duration) : json_null());
    json_object_set_new(params, "num_prompts", num_prompts > 0 ? json_integer(num_prompts) : json_null());
    json_object_set_new(params, "warmup", warmup >= 0 ? json_integer(warmup) : rate_mode ? json_integer(0) : json_string("concurrency"));
    json_object_set_new(params, "prompts", prompts ? json_string(prompts) : json_null());
    json_object_set_new(params, "input_len", prompts ? json_null() : json_pack("[I,I]", (json_int_t)wl.in_lo, (json_int_t)wl.in_hi));
    json_object_set_new(params, "output_len", json_pack("[I,I]", (json_int_t)wl.out_lo, (json_int_t)wl.out_hi));
    json_object_set_new(params, "ignore_eos", json_boolean(wl.ignore_eos));
    json_object_set_new(params, "temperature", wl.temperature >= 0 ? json_real(wl.temperature) : json_null());
    json_object_set_new(params, "seed", json_integer(seed));
    json_object_set_new(params, "request_timeout_s", json_real(request_timeout));
    json_object_set_new(params, "slo_ttft_p99_s", slo_ttft > 0 ? json_real(slo_ttft) : json_null());
    json_object_set_new(params, "slo_tpot_p99_s", slo_tpot > 0 ? json_real(slo_tpot) : json_null());
    json_object_set_new(params, "max_error_rate", json_real(max_err));
    json_object_set_new(params, "started_at", json_string(when));
    json_object_set_new(res, "parameters", params);
    json_object_set_new(res, "levels", levels);

    nb_bench_level *lvs = calloc((size_t)n_levels, sizeof *lvs);
    int done = 0, rc = NB_EXIT_OK;
    uint64_t idx = 0;
    bool too_many_errors = false;
    for (int i = 0; i < n_levels && !g_stop && lvs; i++) {
        nb_bench_level *lv = &lvs[i];
        if (rate_mode) lv->request_rate = ladder[i];
        else lv->concurrency = (int)ladder[i];
        cfg.num_prompts = duration > 0 ? 0 : num_prompts > 0 ? num_prompts : rate_mode ? 64 : NB_MAX(16, 4 * (int64_t)ladder[i]);
        cfg.warmup = warmup >= 0 ? warmup : rate_mode ? 0 : (int64_t)ladder[i];
        fprintf(stderr, "nibble bench: level %d/%d: %s %g, %g%s, warm-up %lld...\n", i + 1, n_levels,
                rate_mode ? "request rate" : "concurrency", ladder[i],
                duration > 0 ? duration : (double)cfg.num_prompts, duration > 0 ? " s" : " requests",
                (long long)cfg.warmup);
        nb_status st = nb_bench_run_level(&cfg, lv, &idx);
        done = i + 1;
        if (st != NB_OK) {
            nb_cli_error(CMD);
            rc = NB_EXIT_FAIL;
            break;
        }
        json_t *lj = nb_bench_level_json(lv);
        json_array_append_new(levels, lj);
        nb_bench_print_level(tf, lj);
        fputc('\n', tf);
        fflush(tf);
        if (json_number_value(json_object_get(lj, "error_rate")) > max_err) too_many_errors = true;
        if (stop_at_slo && !nb_bench_level_meets(lj, slo_ttft, slo_tpot)) {
            fprintf(stderr, "nibble bench: level %g is past the SLOs: --stop-at-slo ends the ladder\n", ladder[i]);
            break;
        }
    }
    sigaction(SIGINT, &old, NULL);
    json_object_set_new(res, "knee", nb_bench_knee(levels, slo_ttft, slo_tpot));
    json_object_set_new(res, "interrupted", json_boolean(g_stop != 0));
    fprintf(tf, "\n");
    nb_bench_print_report(tf, res, false);
    if (json) {
        json_dumpf(res, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    }
    if (out_dir) {
        char csv[4096];
        snprintf(csv, sizeof csv, "%s/requests.csv", out_dir);
        if (!mkdir_p(out_dir)) {
            fprintf(stderr, "nibble bench: --out %s: cannot create the folder: %s\n", out_dir, strerror(errno));
            rc = NB_EXIT_FAIL;
        } else {
            if (!write_json(out_dir, "results.json", res)) rc = NB_EXIT_FAIL;
            if (nb_bench_write_csv(csv, lvs, (size_t)done) != NB_OK) { nb_cli_error(CMD); rc = NB_EXIT_FAIL; }
            nb_bench_plot(out_dir, res);
            fprintf(stderr, "nibble bench: wrote %s/results.json, requests.csv and plots\n", out_dir);
        }
    }
    if (g_stop) {
        fprintf(stderr, "nibble bench: interrupted: the report above is partial\n");
        rc = NB_EXIT_FAIL;
    }
    if (too_many_errors) {
        fprintf(stderr, "nibble bench: a level's error rate is above --max-error-rate %g\n", max_err);
        rc = NB_EXIT_FAIL;
    }
    for (int i = 0; i < done; i++) nb_bench_level_free(&lvs[i]);
    free(lvs);
    json_decref(res);
    free(ladder);
    free(murl);
    free(model_owned);
    nb_bench_workload_free(&wl);
    return rc;
}

int nb_cmd_bench_compare(int argc, char **argv) {
    const char *files[2] = {NULL, NULL}, *out_dir = NULL;
    bool json = false;
    int nf = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!strcmp(a, "--out")) {
            if (!(out_dir = nb_arg_value("bench compare", argc, argv, &i))) return NB_EXIT_USAGE;
            continue;
        }
        if (a[0] == '-') { fprintf(stderr, "nibble bench compare: unknown option '%s'\n", a); return NB_EXIT_USAGE; }
        if (nf == 2) { fprintf(stderr, "nibble bench compare: expected two results.json files, got a third: '%s'\n", a); return NB_EXIT_USAGE; }
        files[nf++] = a;
    }
    if (nf != 2) {
        fprintf(stderr, "nibble bench compare: expected two results.json files (A = baseline, B = candidate)\n");
        return NB_EXIT_USAGE;
    }
    static const char *const out_names[] = {"compare.json", "compare.gp"};
    if (out_dir && nb_out_dir_check(out_dir, out_names, 2, files, 2, false, "--out") != NB_OK) {
        nb_cli_error("bench compare");
        return NB_EXIT_USAGE;
    }
    json_t *r[2];
    for (int k = 0; k < 2; k++) {
        json_error_t e;
        r[k] = json_load_file(files[k], 0, &e);
        if (!r[k]) {
            fprintf(stderr, "nibble bench compare: %s: line %d: %s\n", files[k], e.line, e.text);
            if (k) json_decref(r[0]);
            return NB_EXIT_USAGE;
        }
    }
    json_t *cmp = NULL;
    int rc = NB_EXIT_OK;
    if (nb_bench_compare(r[0], r[1], files[0], files[1], &cmp) != NB_OK) {
        nb_cli_error("bench compare");
        rc = NB_EXIT_USAGE;
    } else {
        nb_bench_print_compare(json ? stderr : stdout, cmp);
        if (json) {
            json_dumpf(cmp, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
        }
        if (out_dir) {
            if (!mkdir_p(out_dir) || !write_json(out_dir, "compare.json", cmp)) rc = NB_EXIT_FAIL;
            else nb_bench_plot_compare(out_dir, cmp);
        }
    }
    json_decref(cmp);
    json_decref(r[0]);
    json_decref(r[1]);
    return rc;
}
