/* results.json, the terminal tables, requests.csv, gnuplot plots and the A/B comparison (report.h). */
#include "bench/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/stats.h"

/* ---- building the JSON ---------------------------------------------------------- */

static json_t *num(double v) { return isnan(v) || isinf(v) ? json_null() : json_real(v); }

static json_t *summary_json(double *x, size_t n) {
    nb_bench_summary s;
    nb_bench_summarize(x, n, &s);
    json_t *o = json_object();
    json_object_set_new(o, "mean", num(s.mean));
    json_object_set_new(o, "p50", num(s.p50));
    json_object_set_new(o, "p90", num(s.p90));
    json_object_set_new(o, "p95", num(s.p95));
    json_object_set_new(o, "p99", num(s.p99));
    json_object_set_new(o, "max", num(s.max));
    return o;
}

static json_t *level_x(const nb_bench_level *lv) {
    if (lv->concurrency > 0) return json_integer(lv->concurrency);
    return isinf(lv->request_rate) ? json_string("inf") : json_real(lv->request_rate);
}

json_t *nb_bench_level_json(const nb_bench_level *lv) {
    json_t *o = json_object();
    json_object_set_new(o, lv->concurrency > 0 ? "concurrency" : "request_rate", level_x(lv));
    size_t n = lv->n_reqs, ok = 0, n_itl = 0;
    int64_t out_tok = 0, prompt_tok = 0, words = 0, usage_prompt = 0, n_usage = 0;
    json_t *errors = json_object();
    for (size_t i = 0; i < n; i++) {
        const nb_bench_req *r = &lv->reqs[i];
        if (!r->ok) {
            const char *k = r->reason ? r->reason : "unknown";
            json_t *c = json_object_get(errors, k);
            json_object_set_new(errors, k, json_integer(c ? json_integer_value(c) + 1 : 1));
            continue;
        }
        ok++;
        n_itl += r->n_itl;
        out_tok += r->output_tokens;
        words += r->in_words;
        if (r->prompt_tokens >= 0) {
            usage_prompt += r->prompt_tokens;
            n_usage++;
            prompt_tok += r->prompt_tokens;
        } else prompt_tok += r->in_words;
    }
    double *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b), *c = malloc((n + 1) * sizeof *c),
           *d = malloc((n_itl + 1) * sizeof *d);
    size_t k = 0, m = 0;
    for (size_t i = 0; a && b && c && d && i < n; i++) {
        const nb_bench_req *r = &lv->reqs[i];
        if (!r->ok) continue;
        a[k] = r->ttft;
        b[k] = r->tpot;
        c[k] = r->e2e;
        k++;
        for (size_t j = 0; j < r->n_itl; j++) d[m++] = r->itl[j];
    }
    double w = lv->wall_s > 0 ? lv->wall_s : NAN;
    json_object_set_new(o, "requests_ok", json_integer((json_int_t)ok));
    json_object_set_new(o, "requests_failed", json_integer((json_int_t)(n - ok)));
    json_object_set_new(o, "error_rate", json_real(n ? (double)(n - ok) / (double)n : 0));
    json_object_set_new(o, "errors", errors);
    json_object_set_new(o, "duration_s", json_real(lv->wall_s));
    json_object_set_new(o, "req_per_s", num((double)ok / w));
    json_object_set_new(o, "output_tok_per_s", num((double)out_tok / w));
    json_object_set_new(o, "total_tok_per_s", num((double)(out_tok + prompt_tok) / w));
    json_object_set_new(o, "output_tokens", json_integer(out_tok));
    json_object_set_new(o, "prompt_tokens", json_integer(prompt_tok));
    json_object_set_new(o, "input_words_mean", num(ok ? (double)words / (double)ok : NAN));
    json_object_set_new(o, "prompt_tokens_mean", num(n_usage ? (double)usage_prompt / (double)n_usage : NAN));
    json_object_set_new(o, "ttft_s", summary_json(a, k));
    json_object_set_new(o, "tpot_s", summary_json(b, k));
    json_object_set_new(o, "itl_s", summary_json(d, m));
    json_object_set_new(o, "e2e_s", summary_json(c, k));
    free(a); free(b); free(c); free(d);
    const nb_bench_server_view *sv = &lv->server;
    json_t *s = json_object();
    json_object_set_new(s, "available", json_boolean(sv->available));
    json_object_set_new(s, "flavor", sv->flavor ? json_string(sv->flavor) : json_null());
    static const struct { const char *key; nb_prom_field f; bool peak; } F[] = {
        {"running_peak", NB_PROM_RUNNING, true},          {"waiting_peak", NB_PROM_WAITING, true},
        {"kv_usage_peak", NB_PROM_KV_USAGE, true},        {"preemptions", NB_PROM_PREEMPTIONS, false},
        {"prompt_tokens", NB_PROM_PROMPT_TOKENS, false},  {"generation_tokens", NB_PROM_GENERATION_TOKENS, false},
        {"requests", NB_PROM_REQUESTS, false}};
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        bool have = sv->available && sv->before.has[F[i].f] && sv->after.has[F[i].f];
        double v = !have ? NAN : F[i].peak ? sv->peak[F[i].f] : sv->after.v[F[i].f] - sv->before.v[F[i].f];
        json_object_set_new(s, F[i].key, num(v));
    }
    json_object_set_new(s, "samples", json_integer(sv->n_samples));
    json_object_set_new(o, "server", s);
    json_object_set_new(o, "client", json_pack("{s:f, s:I, s:o}", "cpu_s", lv->client_cpu_s, "chunks",
                                               (json_int_t)lv->chunks, "chunks_per_cpu_s",
                                               num(lv->client_cpu_s > 0 ? (double)lv->chunks / lv->client_cpu_s : NAN)));
    json_object_set_new(o, "interrupted", json_boolean(lv->interrupted));
    return o;
}

/* ---- reading it back -------------------------------------------------------------- */

static double getd(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double get2(const json_t *o, const char *k1, const char *k2) { return getd(json_object_get(o, k1), k2); }

/* The level's x: its concurrency or request rate (inf for "inf"); label for tables. */
static double level_xv(const json_t *lv, char *label, size_t n) {
    json_t *c = json_object_get(lv, "concurrency"), *r = json_object_get(lv, "request_rate");
    if (json_is_number(c)) {
        if (label) snprintf(label, n, "c=%g", json_number_value(c));
        return json_number_value(c);
    }
    if (json_is_number(r)) {
        if (label) snprintf(label, n, "rate=%g/s", json_number_value(r));
        return json_number_value(r);
    }
    if (label) snprintf(label, n, "rate=inf");
    return INFINITY;
}

bool nb_bench_level_meets(const json_t *level, double slo_ttft, double slo_tpot) {
    if (getd(level, "requests_ok") < 1) return false;
    double t = get2(level, "ttft_s", "p99"), p = get2(level, "tpot_s", "p99");
    if (slo_ttft > 0 && !(t <= slo_ttft)) return false;
    if (slo_tpot > 0 && !(p <= slo_tpot)) return false; /* NaN (one-token outputs) does not meet */
    return true;
}

json_t *nb_bench_knee(const json_t *levels, double slo_ttft, double slo_tpot) {
    if (slo_ttft <= 0 && slo_tpot <= 0) return json_null();
    const json_t *best = NULL;
    double bx = -INFINITY;
    size_t i;
    json_t *lv;
    json_array_foreach(levels, i, lv) {
        double x = level_xv(lv, NULL, 0);
        if (nb_bench_level_meets(lv, slo_ttft, slo_tpot) && x > bx) { bx = x; best = lv; }
    }
    if (!best) return json_null();
    json_t *k = json_object();
    json_t *c = json_object_get(best, "concurrency");
    if (c) json_object_set(k, "concurrency", c);
    else json_object_set(k, "request_rate", json_object_get(best, "request_rate"));
    json_object_set_new(k, "ttft_p99_s", num(get2(best, "ttft_s", "p99")));
    json_object_set_new(k, "tpot_p99_s", num(get2(best, "tpot_s", "p99")));
    json_object_set_new(k, "output_tok_per_s", num(getd(best, "output_tok_per_s")));
    return k;
}

/* ---- terminal ------------------------------------------------------------------------- */

static void ms(FILE *f, double v) {
    if (isnan(v)) fprintf(f, " %9s |", "-");
    else fprintf(f, " %9.1f |", v * 1e3);
}

void nb_bench_print_level(FILE *f, const json_t *lv) {
    char lab[64];
    level_xv(lv, lab, sizeof lab);
    fprintf(f, "== %s: %g ok, %g failed in %.2f s: %.2f req/s, %.1f output tok/s, %.1f total tok/s%s\n", lab,
            getd(lv, "requests_ok"), getd(lv, "requests_failed"), getd(lv, "duration_s"), getd(lv, "req_per_s"),
            getd(lv, "output_tok_per_s"), getd(lv, "total_tok_per_s"),
            json_is_true(json_object_get(lv, "interrupted")) ? " (interrupted)" : "");
    json_t *errs = json_object_get(lv, "errors");
    const char *key;
    json_t *v;
    json_object_foreach(errs, key, v) fprintf(f, "   failed: %lld x %s\n", (long long)json_integer_value(v), key);
    double pw = getd(lv, "prompt_tokens_mean"), iw = getd(lv, "input_words_mean");
    if (!isnan(pw) && iw > 0)
        fprintf(f, "   prompt: %.1f words asked, %.1f tokens by the server's usage\n", iw, pw);
    json_t *s = json_object_get(lv, "server");
    if (json_is_true(json_object_get(s, "available"))) {
        fprintf(f, "   server (%s /metrics): running peak %g, waiting peak %g, preemptions %g, KV usage peak %.1f%%",
                json_string_value(json_object_get(s, "flavor")), getd(s, "running_peak"), getd(s, "waiting_peak"),
                getd(s, "preemptions"), 100 * getd(s, "kv_usage_peak"));
        fprintf(f, "; %g requests, %g prompt + %g generated tokens\n", getd(s, "requests"), getd(s, "prompt_tokens"),
                getd(s, "generation_tokens"));
    } else {
        fprintf(f, "   server: no /metrics with known names\n");
    }
    fprintf(f, "   | ms   |      mean |       p50 |       p95 |       p99 |       max |\n");
    fprintf(f, "   |------|-----------|-----------|-----------|-----------|-----------|\n");
    static const char *const M[] = {"ttft_s", "tpot_s", "itl_s", "e2e_s"}, *const N[] = {"TTFT", "TPOT", "ITL ", "E2E "};
    for (int i = 0; i < 4; i++) {
        json_t *o = json_object_get(lv, M[i]);
        fprintf(f, "   | %s |", N[i]);
        ms(f, getd(o, "mean"));
        ms(f, getd(o, "p50"));
        ms(f, getd(o, "p95"));
        ms(f, getd(o, "p99"));
        ms(f, getd(o, "max"));
        fputc('\n', f);
    }
}

/* v with `decimals` places and an optional unit ("ms") */
static void cell(FILE *f, double v, int decimals, const char *unit) {
    if (isnan(v)) fprintf(f, " - |");
    else fprintf(f, " %.*f%s%s |", decimals, v, unit[0] ? " " : "", unit);
}

void nb_bench_print_report(FILE *f, const json_t *res, bool with_levels) {
    json_t *levels = json_object_get(res, "levels");
    size_t i;
    json_t *lv;
    if (with_levels)
        json_array_foreach(levels, i, lv) {
            nb_bench_print_level(f, lv);
            fputc('\n', f);
        }
    fprintf(f, "| level | ok | failed | req/s | out tok/s | total tok/s | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 |"
               " ITL p99 | E2E p99 | run peak | wait peak | preempt | KV peak |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    json_array_foreach(levels, i, lv) {
        char lab[64];
        level_xv(lv, lab, sizeof lab);
        json_t *s = json_object_get(lv, "server");
        fprintf(f, "| %s | %g | %g |", lab, getd(lv, "requests_ok"), getd(lv, "requests_failed"));
        cell(f, getd(lv, "req_per_s"), 2, "");
        cell(f, getd(lv, "output_tok_per_s"), 1, "");
        cell(f, getd(lv, "total_tok_per_s"), 1, "");
        static const char *const L[][2] = {{"ttft_s", "p50"}, {"ttft_s", "p99"}, {"tpot_s", "p50"},
                                           {"tpot_s", "p99"}, {"itl_s", "p99"},  {"e2e_s", "p99"}};
        for (int k = 0; k < 6; k++) cell(f, 1e3 * get2(lv, L[k][0], L[k][1]), 1, "ms");
        if (json_is_true(json_object_get(s, "available")))
            fprintf(f, " %g | %g | %g | %.1f%% |\n", getd(s, "running_peak"), getd(s, "waiting_peak"),
                    getd(s, "preemptions"), 100 * getd(s, "kv_usage_peak"));
        else
            fprintf(f, " - | - | - | - |\n");
    }
    json_t *p = json_object_get(res, "parameters"), *k = json_object_get(res, "knee");
    double st = getd(p, "slo_ttft_p99_s"), sp = getd(p, "slo_tpot_p99_s");
    if (st > 0 || sp > 0) {
        char slo[128] = "";
        if (st > 0) snprintf(slo, sizeof slo, "TTFT p99 <= %g ms", st * 1e3);
        if (sp > 0) snprintf(slo + strlen(slo), sizeof slo - strlen(slo), "%sTPOT p99 <= %g ms", st > 0 ? ", " : "", sp * 1e3);
        if (json_is_object(k)) {
            char lab[64];
            level_xv(k, lab, sizeof lab);
            fprintf(f, "\nknee (%s): %s, %.1f output tok/s (TTFT p99 %.1f ms, TPOT p99 %.1f ms)\n", slo, lab,
                    getd(k, "output_tok_per_s"), 1e3 * getd(k, "ttft_p99_s"), 1e3 * getd(k, "tpot_p99_s"));
        } else {
            fprintf(f, "\nknee (%s): no level meets the SLOs\n", slo);
        }
    }
    if (json_is_true(json_object_get(res, "interrupted"))) fprintf(f, "\n(interrupted: partial results)\n");
}

/* ---- files --------------------------------------------------------------------------- */

static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double v) {
    if (isnan(v)) fputs(",", f);
    else fprintf(f, ",%.6f", v);
}

nb_status nb_bench_write_csv(const char *path, const nb_bench_level *levels, size_t n_levels) {
    FILE *f = fopen(path, "w");
    if (!f) return nb_fail(NB_ERR_IO, "%s: %s", path, strerror(errno));
    fprintf(f, "level,concurrency,request_rate,request,send_s,ok,http_status,ttft_s,tpot_s,itl_mean_s,e2e_s,"
               "output_tokens,prompt_tokens,input_words,max_tokens,reason,error\n");
    for (size_t l = 0; l < n_levels; l++) {
        const nb_bench_level *lv = &levels[l];
        for (size_t i = 0; i < lv->n_reqs; i++) {
            const nb_bench_req *r = &lv->reqs[i];
            double itl = NAN;
            if (r->n_itl) {
                itl = 0;
                for (size_t j = 0; j < r->n_itl; j++) itl += r->itl[j];
                itl /= (double)r->n_itl;
            }
            fprintf(f, "%zu,", l);
            if (lv->concurrency > 0) fprintf(f, "%d,", lv->concurrency);
            else fprintf(f, ",");
            if (lv->concurrency <= 0) fprintf(f, isinf(lv->request_rate) ? "inf" : "%g", lv->request_rate);
            fprintf(f, ",%llu,%.6f,%d,%d", (unsigned long long)r->idx, r->t_send, r->ok ? 1 : 0, r->http_status);
            csv_num(f, r->ttft);
            csv_num(f, r->tpot);
            csv_num(f, itl);
            csv_num(f, r->e2e);
            fprintf(f, ",%lld,%lld,%lld,%lld,", (long long)r->output_tokens, (long long)r->prompt_tokens,
                    (long long)r->in_words, (long long)r->max_tokens);
            csv_str(f, r->reason);
            fputc(',', f);
            csv_str(f, r->error);
            fputc('\n', f);
        }
    }
    if (fclose(f) != 0) return nb_fail(NB_ERR_IO, "%s: %s", path, strerror(errno));
    return NB_OK;
}

static bool have_gnuplot(void) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char *p = nb_strdup(path), *save = NULL;
    bool found = false;
    for (char *d = strtok_r(p, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char b[4096];
        snprintf(b, sizeof b, "%s/gnuplot", d);
        found = access(b, X_OK) == 0;
    }
    free(p);
    return found;
}

/* Runs `gnuplot script` in dir; true on exit status 0. */
static bool run_gnuplot(const char *dir, const char *script) {
    if (!have_gnuplot()) {
        fprintf(stderr, "nibble bench: gnuplot is not installed (Debian: gnuplot-nox): plots skipped; "
                        "%s/%s draws them later\n", dir, script);
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(127);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "nibble bench: gnuplot %s/%s failed; plots skipped\n", dir, script);
        return false;
    }
    return true;
}

static FILE *open_in(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return fopen(p, "w");
}

static void gp_terms(FILE *g, const char *base, const char *body) {
    fprintf(g, "set terminal pngcairo size 800,500 noenhanced\nset output '%s.png'\n%s", base, body);
    fprintf(g, "set terminal svg size 800,500 noenhanced\nset output '%s.svg'\nreplot\nunset output\n", base);
}

bool nb_bench_plot(const char *dir, const json_t *res) {
    json_t *levels = json_object_get(res, "levels");
    FILE *d = open_in(dir, "levels.dat");
    if (!d) return false;
    bool conc = false;
    size_t i, n = 0;
    json_t *lv;
    fprintf(d, "# x req_per_s output_tok_per_s total_tok_per_s ttft_p50_ms ttft_p90_ms ttft_p99_ms tpot_p50_ms tpot_p90_ms tpot_p99_ms\n");
    json_array_foreach(levels, i, lv) {
        double x = level_xv(lv, NULL, 0);
        if (isinf(x)) continue; /* rate=inf has no place on the axis */
        conc = json_object_get(lv, "concurrency") != NULL;
        fprintf(d, "%g %g %g %g %g %g %g %g %g %g\n", x, getd(lv, "req_per_s"), getd(lv, "output_tok_per_s"),
                getd(lv, "total_tok_per_s"), 1e3 * get2(lv, "ttft_s", "p50"), 1e3 * get2(lv, "ttft_s", "p90"),
                1e3 * get2(lv, "ttft_s", "p99"), 1e3 * get2(lv, "tpot_s", "p50"), 1e3 * get2(lv, "tpot_s", "p90"),
                1e3 * get2(lv, "tpot_s", "p99"));
        n++;
    }
    fclose(d);
    if (n == 0) return false;
    FILE *g = open_in(dir, "plots.gp");
    if (!g) return false;
    const char *xl = conc ? "concurrency" : "request rate (req/s)";
    fprintf(g, "# nibble bench serve: gnuplot plots.gp (in this folder) redraws the plots\n"
               "set datafile missing 'nan'\nset grid\nset key top left\nset xlabel '%s'\n%s\n"
               "set style data linespoints\n", xl, conc ? "set logscale x 2" : "");
    gp_terms(g, "throughput",
             "set title 'throughput'\nset ylabel 'tokens/s'\nset y2label 'requests/s'\nset y2tics\nset ytics nomirror\n"
             "plot 'levels.dat' using 1:3 title 'output tok/s' lw 2, '' using 1:4 title 'total tok/s' lw 2, "
             "'' using 1:2 axes x1y2 title 'req/s (right)' lw 2 dt 2\n");
    fprintf(g, "unset y2label\nunset y2tics\nset ytics mirror\n");
    gp_terms(g, "ttft",
             "set title 'time to first token'\nset ylabel 'ms'\n"
             "plot 'levels.dat' using 1:5 title 'p50' lw 2, '' using 1:6 title 'p90' lw 2, '' using 1:7 title 'p99' lw 2\n");
    gp_terms(g, "tpot",
             "set title 'time per output token'\nset ylabel 'ms'\n"
             "plot 'levels.dat' using 1:8 title 'p50' lw 2, '' using 1:9 title 'p90' lw 2, '' using 1:10 title 'p99' lw 2\n");
    fclose(g);
    return run_gnuplot(dir, "plots.gp");
}

/* ---- A/B --------------------------------------------------------------------------------- */

static const struct cmp_metric {
    const char *name, *obj, *key;
    double scale;
    bool higher_better;
} CMP[] = {
    {"req/s", NULL, "req_per_s", 1, true},
    {"output tok/s", NULL, "output_tok_per_s", 1, true},
    {"total tok/s", NULL, "total_tok_per_s", 1, true},
    {"TTFT p50 (ms)", "ttft_s", "p50", 1e3, false},
    {"TTFT p99 (ms)", "ttft_s", "p99", 1e3, false},
    {"TPOT p50 (ms)", "tpot_s", "p50", 1e3, false},
    {"TPOT p99 (ms)", "tpot_s", "p99", 1e3, false},
    {"ITL p99 (ms)", "itl_s", "p99", 1e3, false},
    {"E2E p50 (ms)", "e2e_s", "p50", 1e3, false},
    {"E2E p99 (ms)", "e2e_s", "p99", 1e3, false},
    {"error rate", NULL, "error_rate", 1, false},
};

static double metric_of(const json_t *lv, const struct cmp_metric *m) {
    return (m->obj ? get2(lv, m->obj, m->key) : getd(lv, m->key)) * m->scale;
}

static bool same_x(double a, double b) { return (isinf(a) && isinf(b)) || fabs(a - b) <= 1e-9 * fmax(1, fabs(a)); }

nb_status nb_bench_compare(const json_t *a, const json_t *b, const char *name_a, const char *name_b, json_t **out) {
    json_t *la = json_object_get(a, "levels"), *lb = json_object_get(b, "levels");
    if (!json_is_array(la)) return nb_fail(NB_ERR_FORMAT, "%s: no \"levels\" array (not a nibble bench serve results.json)", name_a);
    if (!json_is_array(lb)) return nb_fail(NB_ERR_FORMAT, "%s: no \"levels\" array (not a nibble bench serve results.json)", name_b);
    json_t *o = json_object(), *levels = json_array();
    json_object_set_new(o, "a", json_string(name_a));
    json_object_set_new(o, "b", json_string(name_b));
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(la, i, x) {
        double xa = level_xv(x, NULL, 0);
        json_array_foreach(lb, j, y) {
            if (!same_x(xa, level_xv(y, NULL, 0))) continue;
            if ((json_object_get(x, "concurrency") != NULL) != (json_object_get(y, "concurrency") != NULL)) continue;
            json_t *e = json_object(), *ms_ = json_object();
            json_t *c = json_object_get(x, "concurrency");
            json_object_set(e, c ? "concurrency" : "request_rate", c ? c : json_object_get(x, "request_rate"));
            for (size_t k = 0; k < sizeof CMP / sizeof CMP[0]; k++) {
                double va = metric_of(x, &CMP[k]), vb = metric_of(y, &CMP[k]);
                json_object_set_new(ms_, CMP[k].name,
                                    json_pack("{s:o, s:o, s:o}", "a", num(va), "b", num(vb), "ratio",
                                              num(va != 0 ? vb / va : NAN)));
            }
            json_object_set_new(e, "metrics", ms_);
            json_array_append_new(levels, e);
            break;
        }
    }
    if (json_array_size(levels) == 0) {
        json_decref(levels);
        json_decref(o);
        return nb_fail(NB_ERR_INVALID, "%s and %s have no level in common (same --concurrency or --request-rate values needed)",
                       name_a, name_b);
    }
    json_object_set_new(o, "levels", levels);
    json_object_set(o, "knee_a", json_object_get(a, "knee") ? json_object_get(a, "knee") : json_null());
    json_object_set(o, "knee_b", json_object_get(b, "knee") ? json_object_get(b, "knee") : json_null());
    *out = o;
    return NB_OK;
}

void nb_bench_print_compare(FILE *f, const json_t *cmp) {
    fprintf(f, "A: %s\nB: %s\n", json_string_value(json_object_get(cmp, "a")), json_string_value(json_object_get(cmp, "b")));
    size_t i;
    json_t *lv;
    json_array_foreach(json_object_get(cmp, "levels"), i, lv) {
        char lab[64];
        level_xv(lv, lab, sizeof lab);
        fprintf(f, "\n== %s\n| metric | A | B | B/A | |\n|---|---|---|---|---|\n", lab);
        json_t *ms_ = json_object_get(lv, "metrics");
        for (size_t k = 0; k < sizeof CMP / sizeof CMP[0]; k++) {
            json_t *m = json_object_get(ms_, CMP[k].name);
            double a = getd(m, "a"), b = getd(m, "b"), r = getd(m, "ratio");
            const char *verdict = "";
            if (!isnan(r) && fabs(r - 1) > 0.05)
                verdict = (r > 1) == CMP[k].higher_better ? "better" : "worse";
            fprintf(f, "| %s | %.4g | %.4g |", CMP[k].name, a, b);
            if (isnan(r)) fprintf(f, " - | |\n");
            else fprintf(f, " %.3f | %s |\n", r, verdict);
        }
    }
    for (int w = 0; w < 2; w++) {
        json_t *k = json_object_get(cmp, w ? "knee_b" : "knee_a");
        if (json_is_object(k)) {
            char lab[64];
            level_xv(k, lab, sizeof lab);
            fprintf(f, "%sknee %s: %s, %.1f output tok/s\n", w ? "" : "\n", w ? "B" : "A", lab, getd(k, "output_tok_per_s"));
        }
    }
}

bool nb_bench_plot_compare(const char *dir, const json_t *cmp) {
    FILE *d = open_in(dir, "compare.dat");
    if (!d) return false;
    size_t i, n = 0;
    json_t *lv;
    bool conc = false;
    fprintf(d, "# x a_output_tok_per_s b_output_tok_per_s a_ttft_p99_ms b_ttft_p99_ms a_tpot_p99_ms b_tpot_p99_ms\n");
    json_array_foreach(json_object_get(cmp, "levels"), i, lv) {
        double x = level_xv(lv, NULL, 0);
        if (isinf(x)) continue;
        conc = json_object_get(lv, "concurrency") != NULL;
        json_t *m = json_object_get(lv, "metrics");
        fprintf(d, "%g %g %g %g %g %g %g\n", x, get2(m, "output tok/s", "a"), get2(m, "output tok/s", "b"),
                get2(m, "TTFT p99 (ms)", "a"), get2(m, "TTFT p99 (ms)", "b"), get2(m, "TPOT p99 (ms)", "a"),
                get2(m, "TPOT p99 (ms)", "b"));
        n++;
    }
    fclose(d);
    if (n == 0) return false;
    FILE *g = open_in(dir, "compare.gp");
    if (!g) return false;
    fprintf(g, "# nibble bench compare: gnuplot compare.gp redraws the plot\nset datafile missing 'nan'\nset grid\n"
               "set xlabel '%s'\n%s\nset style data linespoints\nset key top left\n",
            conc ? "concurrency" : "request rate (req/s)", conc ? "set logscale x 2" : "");
    char body[4096], na[512], nb[512];
    /* the file names go inside '...' in the gnuplot script: no quotes or control characters */
    const char *src[2] = {json_string_value(json_object_get(cmp, "a")), json_string_value(json_object_get(cmp, "b"))};
    char *dst[2] = {na, nb};
    for (int w = 0; w < 2; w++) {
        size_t o = 0;
        for (const char *c = src[w] ? src[w] : "?"; *c && o + 1 < sizeof na; c++)
            dst[w][o++] = (*c == '\'' || *c == '\\' || (unsigned char)*c < 32) ? '_' : *c;
        dst[w][o] = '\0';
    }
    snprintf(body, sizeof body,
             "set multiplot layout 1,2 title 'A: %s   B: %s'\n"
             "set title 'output tok/s'\nset ylabel 'tok/s'\n"
             "plot 'compare.dat' using 1:2 title 'A' lw 2, '' using 1:3 title 'B' lw 2\n"
             "set title 'p99 latency'\nset ylabel 'ms'\n"
             "plot 'compare.dat' using 1:4 title 'A TTFT p99' lw 2, '' using 1:5 title 'B TTFT p99' lw 2, "
             "'' using 1:6 title 'A TPOT p99' lw 2 dt 2, '' using 1:7 title 'B TPOT p99' lw 2 dt 2\n"
             "unset multiplot\n",
             na, nb);
    /* multiplot cannot replot: draw twice */
    fprintf(g, "set terminal pngcairo size 1000,450 noenhanced\nset output 'compare.png'\n%s", body);
    fprintf(g, "set terminal svg size 1000,450 noenhanced\nset output 'compare.svg'\n%sunset output\n", body);
    fclose(g);
    return run_gnuplot(dir, "compare.gp");
}
