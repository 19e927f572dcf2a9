/* src/bench: percentiles (linear interpolation, numpy's default), the seeded
 * generator and its Poisson gaps under a Kolmogorov-Smirnov test, the
 * incremental SSE parser at every split, /metrics parsing for nibble, vLLM
 * and llama-server names, request bodies, the JSONL loader's errors, and a
 * level's JSON (errors by reason, percentiles, the knee). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/client.h"
#include "bench/prom.h"
#include "bench/report.h"
#include "bench/sse.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "testutil.h"

static void test_percentiles(void **st) {
    (void)st;
    /* hand-derived: h = q (n - 1); x[i] + (h - i)(x[i+1] - x[i]) */
    double x[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    nb_bench_summary s;
    nb_bench_summarize(x, 10, &s);
    assert_int_equal(s.n, 10);
    assert_true(fabs(s.mean - 5.5) < 1e-12);
    assert_true(fabs(s.p50 - 5.5) < 1e-12);  /* h = 4.5 */
    assert_true(fabs(s.p90 - 9.1) < 1e-12);  /* h = 8.1 */
    assert_true(fabs(s.p95 - 9.55) < 1e-12); /* h = 8.55 */
    assert_true(fabs(s.p99 - 9.91) < 1e-12); /* h = 8.91 */
    assert_true(s.max == 10);
    double y[4] = {4, NAN, 1, 2};
    nb_bench_summarize(y, 4, &s);
    assert_int_equal(s.n, 3); /* NaN dropped */
    assert_true(fabs(s.p50 - 2) < 1e-12);
    assert_true(fabs(s.p90 - 3.6) < 1e-12); /* h = 1.8: 2 + 0.8 * 2 */
    double one = 0.25;
    nb_bench_summarize(&one, 1, &s);
    assert_true(s.p50 == 0.25 && s.p99 == 0.25 && s.max == 0.25);
    nb_bench_summarize(NULL, 0, &s);
    assert_true(isnan(s.mean) && isnan(s.p99) && s.n == 0);
    double z[2] = {1, 3};
    assert_true(nb_bench_quantile_sorted(z, 2, 0) == 1);
    assert_true(nb_bench_quantile_sorted(z, 2, 1) == 3);
    assert_true(fabs(nb_bench_quantile_sorted(z, 2, 0.25) - 1.5) < 1e-12);
}

static void test_rng_poisson_ks(void **st) {
    (void)st;
    nb_bench_rng a, b;
    nb_bench_rng_seed(&a, 42);
    nb_bench_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) assert_true(nb_bench_rng_next(&a) == nb_bench_rng_next(&b));
    nb_bench_rng_seed(&b, 43);
    assert_true(nb_bench_rng_next(&a) != nb_bench_rng_next(&b));
    for (int i = 0; i < 1000; i++) {
        int64_t v = nb_bench_rng_range(&a, 3, 7);
        assert_true(v >= 3 && v <= 7);
        double u = nb_bench_rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
    }
    enum { N = 5000 };
    double *g = malloc(N * sizeof *g), mean = 0;
    const double rate = 7.5;
    nb_bench_rng_seed(&a, 1234);
    for (int i = 0; i < N; i++) mean += (g[i] = nb_bench_rng_exp(&a, rate));
    mean /= N;
    assert_true(fabs(mean - 1 / rate) < 0.05 / rate); /* sd of the mean: 1.4% */
    double d = nb_bench_ks_exp(g, N, rate), crit = 1.628 / sqrt(N);
    print_message("KS D = %.4f (1%% critical %.4f)\n", d, crit);
    assert_true(d < crit);
    /* the test can fail: evenly spaced arrivals with the same mean are not Poisson */
    for (int i = 0; i < N; i++) g[i] = 1 / rate;
    assert_true(nb_bench_ks_exp(g, N, rate) > crit);
    /* nor are exponential gaps at twice the rate */
    for (int i = 0; i < N; i++) g[i] = nb_bench_rng_exp(&a, 2 * rate);
    assert_true(nb_bench_ks_exp(g, N, rate) > crit);
    free(g);
    assert_true(nb_bench_rng_exp(&a, INFINITY) == 0);
}

typedef struct ev {
    char d[8][128];
    int n;
} ev;

static void on_ev(void *ud, const char *d, size_t n) {
    ev *e = ud;
    assert_true(e->n < 8);
    assert_true(n < 128 && strlen(d) == n);
    memcpy(e->d[e->n++], d, n + 1);
}

static void test_sse(void **st) {
    (void)st;
    const char *s = ": comment\r\n"
                    "data: {\"a\":1}\r\n\r\n"
                    "event: x\nid: 3\ndata:no-space\ndata:  two\n\n"
                    "data: [DONE]\r\r"
                    "retry: 5\n\n";
    size_t n = strlen(s);
    /* every split point gives the same events */
    for (size_t cut = 0; cut <= n; cut++) {
        ev e = {.n = 0};
        nb_sse p;
        nb_sse_init(&p, on_ev, &e);
        assert_int_equal(nb_sse_feed(&p, s, cut), NB_OK);
        assert_int_equal(nb_sse_feed(&p, s + cut, n - cut), NB_OK);
        nb_sse_free(&p);
        assert_int_equal(e.n, 3);
        assert_string_equal(e.d[0], "{\"a\":1}");
        assert_string_equal(e.d[1], "no-space\n two");
        assert_string_equal(e.d[2], "[DONE]");
    }
    /* byte by byte */
    ev e = {.n = 0};
    nb_sse p;
    nb_sse_init(&p, on_ev, &e);
    for (size_t i = 0; i < n; i++) assert_int_equal(nb_sse_feed(&p, s + i, 1), NB_OK);
    nb_sse_free(&p);
    assert_int_equal(e.n, 3);
    /* an event over the limit is an error, not a crash */
    nb_sse_init(&p, on_ev, &e);
    p.max_event = 16;
    char big[64];
    memset(big, 'x', sizeof big);
    memcpy(big, "data: ", 6);
    assert_int_equal(nb_sse_feed(&p, big, sizeof big), NB_ERR_RANGE);
    nb_sse_free(&p);
    /* an unterminated event is not delivered */
    e.n = 0;
    nb_sse_init(&p, on_ev, &e);
    assert_int_equal(nb_sse_feed(&p, "data: half", 10), NB_OK);
    nb_sse_free(&p);
    assert_int_equal(e.n, 0);
}

static void test_prom(void **st) {
    (void)st;
    const char *nib = "# HELP nibble:num_requests_running Requests.\n# TYPE nibble:num_requests_running gauge\n"
                      "nibble:num_requests_running{model_name=\"a}b\\\"c\"} 3\n"
                      "nibble:num_requests_waiting{model_name=\"m\"} 2\n"
                      "nibble:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"
                      "nibble:num_preemptions_total{model_name=\"m\"} 7\n"
                      "nibble:prompt_tokens_total{model_name=\"m\"} 1e3\n"
                      "nibble:generation_tokens_total{model_name=\"m\"} 500\n"
                      "nibble:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 4\n"
                      "nibble:request_success_total{model_name=\"m\",finished_reason=\"length\"} 6\n"
                      "nibble:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 99\n"
                      "nibble:num_requests_running_x 100\n"
                      "garbage line\n";
    nb_prom p;
    nb_prom_parse(nib, strlen(nib), &p);
    assert_string_equal(p.flavor, "nibble");
    assert_true(p.has[NB_PROM_RUNNING] && p.v[NB_PROM_RUNNING] == 3);
    assert_true(p.v[NB_PROM_WAITING] == 2 && p.v[NB_PROM_KV_USAGE] == 0.25 && p.v[NB_PROM_PREEMPTIONS] == 7);
    assert_true(p.v[NB_PROM_PROMPT_TOKENS] == 1000 && p.v[NB_PROM_GENERATION_TOKENS] == 500);
    assert_true(p.v[NB_PROM_REQUESTS] == 10); /* summed over finish reasons */
    const char *vl = "vllm:num_requests_running{engine=\"0\"} 2\r\nvllm:num_requests_running{engine=\"1\"} 3\r\n"
                     "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n"
                     "vllm:generation_tokens_total 12";
    nb_prom_parse(vl, strlen(vl), &p);
    assert_string_equal(p.flavor, "vllm");
    assert_true(p.v[NB_PROM_RUNNING] == 5 && p.v[NB_PROM_KV_USAGE] == 0.75); /* KV: the max */
    assert_true(p.v[NB_PROM_GENERATION_TOKENS] == 12 && !p.has[NB_PROM_PREEMPTIONS]);
    const char *ll = "llamacpp:requests_processing 1\nllamacpp:requests_deferred 4\nllamacpp:kv_cache_usage_ratio 0.1\n"
                     "llamacpp:tokens_predicted_total 77\nllamacpp:prompt_tokens_total 88\n";
    nb_prom_parse(ll, strlen(ll), &p);
    assert_string_equal(p.flavor, "llamacpp");
    assert_true(p.v[NB_PROM_RUNNING] == 1 && p.v[NB_PROM_WAITING] == 4 && p.v[NB_PROM_GENERATION_TOKENS] == 77);
    assert_true(p.v[NB_PROM_PROMPT_TOKENS] == 88 && !p.has[NB_PROM_REQUESTS]);
    nb_prom_parse("foo 1\n", 6, &p);
    assert_null(p.flavor);
    nb_prom_parse("nibble:num_requests_running{x=\"unterminated 5\n", 45, &p);
    assert_false(p.has[NB_PROM_RUNNING]);
}

static void test_workload(void **st) {
    (void)st;
    nb_bench_workload w;
    nb_bench_workload_init(&w);
    w.in_lo = 5;
    w.in_hi = 9;
    w.out_lo = 3;
    w.out_hi = 4;
    w.seed = 11;
    w.ignore_eos = true;
    w.model = "m";
    int64_t words, mt;
    for (uint64_t i = 0; i < 50; i++) {
        char *b = nb_bench_workload_body(&w, i, &words, &mt), *b2 = nb_bench_workload_body(&w, i, &words, &mt);
        assert_string_equal(b, b2); /* same index, same request */
        json_t *o = json_loads(b, 0, NULL);
        assert_non_null(o);
        const char *pr = json_string_value(json_object_get(o, "prompt"));
        int nw = 1;
        for (const char *c = pr; *c; c++) nw += *c == ' ';
        assert_int_equal(nw, words);
        assert_true(words >= 5 && words <= 9 && mt >= 3 && mt <= 4);
        assert_int_equal(json_integer_value(json_object_get(o, "max_tokens")), mt);
        assert_true(json_is_true(json_object_get(o, "ignore_eos")) && json_is_true(json_object_get(o, "stream")));
        assert_true(json_is_true(json_object_get(json_object_get(o, "stream_options"), "include_usage")));
        assert_string_equal(json_string_value(json_object_get(o, "model")), "m");
        json_decref(o);
        free(b);
        free(b2);
    }
    w.chat = true;
    char *b = nb_bench_workload_body(&w, 0, &words, &mt);
    assert_non_null(strstr(b, "\"messages\":[{\"role\":\"user\""));
    free(b);

    const char *dir = nb_test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/p.jsonl", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"prompt\": \"hello\", \"max_tokens\": 5}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    fclose(f);
    assert_int_equal(nb_bench_workload_load(&w, path), NB_OK);
    assert_int_equal(w.n_items, 2);
    b = nb_bench_workload_body(&w, 0, &words, &mt);
    assert_int_equal(mt, 5);
    assert_non_null(strstr(b, "\"content\":\"hello\""));
    free(b);
    w.chat = false;
    b = nb_bench_workload_body(&w, 1, &words, &mt); /* messages flattened for completions; --output-len applies */
    assert_non_null(strstr(b, "\"prompt\":\"hi\""));
    assert_true(mt >= 3 && mt <= 4);
    free(b);
    nb_bench_workload_free(&w);
    f = fopen(path, "w");
    fprintf(f, "{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n");
    fclose(f);
    assert_int_equal(nb_bench_workload_load(&w, path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "line 2"));
    f = fopen(path, "w");
    fprintf(f, "{\"prompt\": \"ok\", \"max_tokens\": 0}\n");
    fclose(f);
    assert_int_equal(nb_bench_workload_load(&w, path), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "max_tokens"));
    f = fopen(path, "w");
    fprintf(f, "not json\n");
    fclose(f);
    assert_int_equal(nb_bench_workload_load(&w, path), NB_ERR_FORMAT);
    assert_int_equal(nb_bench_workload_load(&w, "/nonexistent/x.jsonl"), NB_ERR_IO);
}

static void fake_level(nb_bench_level *lv, int conc, double ttft_scale) {
    memset(lv, 0, sizeof *lv);
    lv->concurrency = conc;
    lv->n_reqs = 10;
    lv->reqs = calloc(10, sizeof *lv->reqs);
    lv->wall_s = 2;
    for (int i = 0; i < 10; i++) {
        nb_bench_req *r = &lv->reqs[i];
        r->idx = (uint64_t)i;
        r->prompt_tokens = 10;
        r->in_words = 8;
        if (i >= 8) { /* two failures, two reasons */
            r->reason = nb_strdup(i == 8 ? "HTTP 500" : "stream cut before [DONE]");
            r->ttft = r->tpot = r->e2e = NAN;
            continue;
        }
        r->ok = true;
        r->ttft = 0.1 * (i + 1) * ttft_scale; /* 0.1 .. 0.8 */
        r->output_tokens = 5;
        r->e2e = r->ttft + 0.4;
        r->tpot = 0.1;
        r->n_itl = 4;
        r->itl = malloc(4 * sizeof *r->itl);
        for (int j = 0; j < 4; j++) r->itl[j] = 0.1;
    }
}

static double num_at(json_t *o, const char *a, const char *b) {
    json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    assert_true(json_is_number(x));
    return json_number_value(x);
}

static void test_level_json_knee(void **st) {
    (void)st;
    nb_bench_level lv[3];
    fake_level(&lv[0], 1, 1);
    fake_level(&lv[1], 4, 2);
    fake_level(&lv[2], 16, 4);
    json_t *levels = json_array();
    for (int i = 0; i < 3; i++) json_array_append_new(levels, nb_bench_level_json(&lv[i]));
    json_t *l0 = json_array_get(levels, 0);
    static const char *const keys[] = {"concurrency", "requests_ok", "requests_failed", "errors", "req_per_s",
                                       "output_tok_per_s", "total_tok_per_s", "ttft_s", "tpot_s", "itl_s",
                                       "e2e_s", "server"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) assert_non_null(json_object_get(l0, keys[i]));
    assert_int_equal(num_at(l0, "requests_ok", NULL), 8);
    assert_int_equal(num_at(l0, "requests_failed", NULL), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(l0, "errors"), "HTTP 500")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(l0, "errors"), "stream cut before [DONE]")), 1);
    assert_true(fabs(num_at(l0, "req_per_s", NULL) - 4) < 1e-9);         /* 8 ok / 2 s */
    assert_true(fabs(num_at(l0, "output_tok_per_s", NULL) - 20) < 1e-9); /* 40 / 2 */
    assert_true(fabs(num_at(l0, "total_tok_per_s", NULL) - 60) < 1e-9);  /* (40 + 80) / 2 */
    assert_true(fabs(num_at(l0, "ttft_s", "p50") - 0.45) < 1e-9);
    assert_true(fabs(num_at(l0, "ttft_s", "p90") - 0.73) < 1e-9); /* h = 6.3 */
    assert_true(fabs(num_at(l0, "ttft_s", "max") - 0.8) < 1e-9);
    assert_true(fabs(num_at(l0, "itl_s", "p99") - 0.1) < 1e-9);
    assert_true(json_is_false(json_object_get(json_object_get(l0, "server"), "available")));
    json_t *ttft = json_object_get(l0, "ttft_s");
    assert_int_equal(json_object_size(ttft), 6);
    /* p99 TTFT: 0.793, 1.586, 3.172 */
    json_t *k = nb_bench_knee(levels, 1.0, 0);
    assert_int_equal(num_at(k, "concurrency", NULL), 1);
    json_decref(k);
    k = nb_bench_knee(levels, 2.0, 0.2);
    assert_int_equal(num_at(k, "concurrency", NULL), 4);
    json_decref(k);
    k = nb_bench_knee(levels, 2.0, 0.05); /* TPOT 0.1 never meets */
    assert_true(json_is_null(k));
    k = nb_bench_knee(levels, 0, 0); /* no SLO: no knee */
    assert_true(json_is_null(k));
    assert_true(nb_bench_level_meets(json_array_get(levels, 2), 0, 0.2));
    assert_false(nb_bench_level_meets(json_array_get(levels, 2), 3.0, 0));
    /* compare against itself: ratios 1 */
    json_t *res = json_pack("{s:O}", "levels", levels), *cmp = NULL;
    assert_int_equal(nb_bench_compare(res, res, "a.json", "b.json", &cmp), NB_OK);
    json_t *m = json_object_get(json_object_get(json_array_get(json_object_get(cmp, "levels"), 1), "metrics"), "TTFT p99 (ms)");
    assert_true(fabs(num_at(m, "ratio", NULL) - 1) < 1e-12);
    json_decref(cmp);
    json_t *other = json_pack("{s:[{s:i}]}", "levels", "concurrency", 64);
    assert_int_equal(nb_bench_compare(res, other, "a.json", "c.json", &cmp), NB_ERR_INVALID);
    json_decref(other);
    json_decref(res);
    json_decref(levels);
    for (int i = 0; i < 3; i++) nb_bench_level_free(&lv[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles), cmocka_unit_test(test_rng_poisson_ks), cmocka_unit_test(test_sse),
        cmocka_unit_test(test_prom),        cmocka_unit_test(test_workload),       cmocka_unit_test(test_level_json_knee),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
