/* Tests of the acceptance gate (eval/gate.h), from summaries alone:
 *  - the seeds' incident (000_*.txt): base ppl 5.79 / pass 93.4%; the INT4
 *    candidate (ppl 5.82, buckets 96.1% / 74.0% / 68.5%) passes the
 *    perplexity check and is rejected on the bucket floor; the W8A8
 *    candidate (lowest bucket 88.4%, overall 91.8%) is accepted. Bucket
 *    sizes (480 / 360 / 360 of 1,200) are chosen so that the seed's overall
 *    rates (93.4%, 81.2%, 91.8%) follow from its bucket rates; the base's
 *    bucket rates and the JSON validity rates are not in the seed and are
 *    set to values consistent with its overall numbers;
 *  - a bucket on one side only, and too few items, fail (never pass silently);
 *  - KLD / top-1 thresholds, bucket drop, JSON validity;
 *  - bench levels matched by concurrency: worst p99 TTFT regression, best
 *    throughput gain; no common level is bad input;
 *  - malformed summaries are refused with the field named. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "eval/gate.h"

static void golden(const char *js, nb_gate_golden *g) {
    json_error_t je;
    json_t *j = json_loads(js, 0, &je);
    if (!j) fprintf(stderr, "bad test JSON: %s\n", je.text);
    assert_non_null(j);
    assert_int_equal(nb_gate_golden_from_json(j, "test.json", g), NB_OK);
    json_decref(j);
}

#define BASE "{\"overall\": {\"pass_rate\": 0.934, \"n\": 1200}, \"buckets\": {" \
    "\"general_qa\": {\"pass_rate\": 0.970, \"n\": 480}, \"numbers\": {\"pass_rate\": 0.915, \"n\": 360}, " \
    "\"tool_json\": {\"pass_rate\": 0.905, \"n\": 360}}, \"json_valid_rate\": 0.997, \"n_json\": 360}"
#define INT4 "{\"overall\": {\"pass_rate\": 0.812, \"n\": 1200}, \"buckets\": {" \
    "\"general_qa\": {\"pass_rate\": 0.961, \"n\": 480}, \"numbers\": {\"pass_rate\": 0.740, \"n\": 360}, " \
    "\"tool_json\": {\"pass_rate\": 0.685, \"n\": 360}}, \"json_valid_rate\": 0.93, \"n_json\": 360}"
#define W8A8 "{\"overall\": {\"pass_rate\": 0.918, \"n\": 1200}, \"buckets\": {" \
    "\"general_qa\": {\"pass_rate\": 0.950, \"n\": 480}, \"numbers\": {\"pass_rate\": 0.909, \"n\": 360}, " \
    "\"tool_json\": {\"pass_rate\": 0.884, \"n\": 360}}, \"json_valid_rate\": 0.994, \"n_json\": 360}"

static const nb_gate_check *find(const nb_gate_result *r, const char *name, const char *subject) {
    for (size_t i = 0; i < r->n_checks; i++)
        if (!strcmp(r->checks[i].name, name) && (!subject || !strcmp(r->checks[i].subject, subject)))
            return &r->checks[i];
    return NULL;
}

static void test_seed_overall_rates(void **state) {
    (void)state;
    /* the bucket sizes reproduce the seed's overall rates from its bucket rates */
    assert_true(fabs((480 * 0.961 + 360 * 0.740 + 360 * 0.685) / 1200 - 0.812) < 0.0005);
    assert_true(fabs((480 * 0.950 + 360 * 0.909 + 360 * 0.884) / 1200 - 0.918) < 0.0005);
    assert_true(fabs((480 * 0.970 + 360 * 0.915 + 360 * 0.905) / 1200 - 0.934) < 0.0005);
}

static void test_seed_int4_rejected(void **state) {
    (void)state;
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    golden(BASE, &in.base);
    golden(INT4, &in.cand);
    in.has_ppl = true;
    in.ppl_base = 5.79;
    in.ppl_cand = 5.82;
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    nb_gate_result r;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_false(r.accept);
    /* perplexity alone lets it through: +0.52% < 5% */
    const nb_gate_check *p = find(&r, "ppl_delta", NULL);
    assert_non_null(p);
    assert_int_equal(p->outcome, NB_GATE_PASS);
    assert_true(fabs(p->value - (5.82 / 5.79 - 1)) < 1e-12);
    /* the first failure is the bucket floor, on numbers (74.0% < 85%) */
    assert_true(r.first_fail >= 0);
    assert_string_equal(r.checks[r.first_fail].name, "bucket_floor");
    assert_string_equal(r.checks[r.first_fail].subject, "numbers");
    assert_int_equal(find(&r, "bucket_floor", "tool_json")->outcome, NB_GATE_FAIL);
    assert_int_equal(find(&r, "bucket_floor", "general_qa")->outcome, NB_GATE_PASS);
    /* and the other red lines agree */
    assert_int_equal(find(&r, "bucket_drop", "numbers")->outcome, NB_GATE_FAIL);
    assert_int_equal(find(&r, "json_valid", NULL)->outcome, NB_GATE_FAIL);
    assert_int_equal(find(&r, "golden_pass", NULL)->outcome, NB_GATE_FAIL);
    nb_gate_result_free(&r);

    /* with perplexity as the only evidence the gate would have accepted */
    nb_gate_input ppl_only = in;
    ppl_only.base.n_buckets = ppl_only.cand.n_buckets = 0;
    ppl_only.base.n_json = ppl_only.cand.n_json = 0;
    ppl_only.cand.pass_rate = 1; /* (no golden evidence) */
    assert_int_equal(nb_gate_evaluate(&ppl_only, &t, &r), NB_OK);
    assert_true(r.accept);
    nb_gate_result_free(&r);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
}

static void test_seed_w8a8_accepted(void **state) {
    (void)state;
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    golden(BASE, &in.base);
    golden(W8A8, &in.cand);
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    nb_gate_result r;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_true(r.accept);
    assert_int_equal(r.first_fail, -1);
    const nb_gate_check *f = find(&r, "bucket_floor", "tool_json");
    assert_true(fabs(f->value - 0.884) < 1e-12);
    assert_int_equal(f->outcome, NB_GATE_PASS);
    assert_true(fabs(find(&r, "golden_pass", NULL)->value - 0.918) < 1e-12);
    for (size_t i = 0; i < r.n_checks; i++) assert_int_equal(r.checks[i].outcome, NB_GATE_PASS);
    nb_gate_result_free(&r);
    /* a stricter overall threshold rejects it, on golden_pass */
    t.golden_pass = 0.92;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_false(r.accept);
    assert_string_equal(r.checks[r.first_fail].name, "golden_pass");
    nb_gate_result_free(&r);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
}

static void test_missing_and_small_buckets(void **state) {
    (void)state;
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    golden("{\"overall\": {\"pass_rate\": 1, \"n\": 60}, \"buckets\": {\"a\": {\"pass_rate\": 1, \"n\": 30}, "
           "\"b\": {\"pass_rate\": 1, \"n\": 30}}}", &in.base);
    golden("{\"overall\": {\"pass_rate\": 1, \"n\": 40}, \"buckets\": {\"a\": {\"pass_rate\": 1, \"n\": 30}, "
           "\"c\": {\"pass_rate\": 1, \"n\": 10}}}", &in.cand);
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    nb_gate_result r;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_false(r.accept);
    /* b is in the base only, c in the candidate only: both reported, both fail */
    const nb_gate_check *b = find(&r, "bucket_present", "b"), *c = find(&r, "bucket_present", "c");
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(b->outcome, NB_GATE_FAIL);
    assert_int_equal(c->outcome, NB_GATE_FAIL);
    assert_non_null(strstr(b->reason, "base summary only"));
    assert_string_equal(r.checks[r.first_fail].name, "bucket_present");
    nb_gate_result_free(&r);
    nb_gate_golden_free(&in.cand);
    /* same buckets, one too small: bucket_n fails, and only it */
    golden("{\"overall\": {\"pass_rate\": 1, \"n\": 40}, \"buckets\": {\"a\": {\"pass_rate\": 1, \"n\": 30}, "
           "\"b\": {\"pass_rate\": 1, \"n\": 10}}}", &in.cand);
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_false(r.accept);
    assert_string_equal(r.checks[r.first_fail].name, "bucket_n");
    assert_string_equal(r.checks[r.first_fail].subject, "b");
    assert_true(fabs(r.checks[r.first_fail].value - 10) < 1e-12);
    nb_gate_result_free(&r);
    t.min_bucket_n = 10;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_true(r.accept);
    nb_gate_result_free(&r);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
}

static void test_kld_drop_json(void **state) {
    (void)state;
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    golden("{\"overall\": {\"pass_rate\": 0.95, \"n\": 40}, \"buckets\": {\"a\": {\"pass_rate\": 0.95, \"n\": 40}}, "
           "\"json_valid_rate\": 1.0, \"n_json\": 40}", &in.base);
    golden("{\"overall\": {\"pass_rate\": 0.90, \"n\": 40}, \"buckets\": {\"a\": {\"pass_rate\": 0.875, \"n\": 40}}, "
           "\"json_valid_rate\": 0.975, \"n_json\": 40}", &in.cand);
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    in.has_kld = true;
    in.kld_mean = 0.08;
    in.top1_agreement = 0.93;
    nb_gate_result r;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_string_equal(r.checks[r.first_fail].name, "kld_max");
    assert_int_equal(find(&r, "top1_min", NULL)->outcome, NB_GATE_PASS);
    assert_int_equal(find(&r, "bucket_drop", "a")->outcome, NB_GATE_FAIL); /* 7.5 points */
    assert_int_equal(find(&r, "json_valid", NULL)->outcome, NB_GATE_FAIL); /* 97.5% < 99% */
    assert_int_equal(find(&r, "golden_pass", NULL)->outcome, NB_GATE_PASS); /* 0.90 >= 0.90 */
    nb_gate_result_free(&r);
    in.kld_mean = 0.01;
    in.top1_agreement = 0.85;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_string_equal(r.checks[r.first_fail].name, "top1_min");
    nb_gate_result_free(&r);
    in.top1_agreement = 0.95;
    t.bucket_drop = 0.10;
    t.json_valid = 0.97;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_true(r.accept);
    nb_gate_result_free(&r);
    /* a candidate without JSON items while the base has them fails json_valid */
    in.cand.n_json = 0;
    in.cand.json_valid_rate = NAN;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_string_equal(r.checks[r.first_fail].name, "json_valid");
    nb_gate_result_free(&r);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
}

static json_t *bench(double c1_p99, double c1_tp, double c8_p99, double c8_tp) {
    char s[1024];
    snprintf(s, sizeof s,
             "{\"levels\": [{\"concurrency\": 1, \"output_tok_per_s\": %g, \"ttft_s\": {\"p99\": %g}},"
             " {\"concurrency\": 8, \"output_tok_per_s\": %g, \"ttft_s\": {\"p99\": %g}}]}",
             c1_tp, c1_p99, c8_tp, c8_p99);
    return json_loads(s, 0, NULL);
}

static void test_bench(void **state) {
    (void)state;
    json_t *b = bench(0.10, 50, 0.40, 200), *c = bench(0.11, 60, 0.60, 300);
    nb_gate_bench g;
    assert_int_equal(nb_gate_bench_from_json(b, c, "b.json", "c.json", &g), NB_OK);
    assert_int_equal(g.n_matched, 2);
    assert_true(fabs(g.ttft_regression - 0.5) < 1e-12); /* concurrency 8: 0.60 / 0.40 - 1 */
    assert_string_equal(g.ttft_level, "concurrency 8");
    assert_true(fabs(g.throughput_gain - 0.5) < 1e-12); /* 300 / 200 - 1 */
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    golden("{\"overall\": {\"pass_rate\": 1, \"n\": 20}, \"buckets\": {\"a\": {\"pass_rate\": 1, \"n\": 20}}}",
           &in.base);
    golden("{\"overall\": {\"pass_rate\": 1, \"n\": 20}, \"buckets\": {\"a\": {\"pass_rate\": 1, \"n\": 20}}}",
           &in.cand);
    in.has_bench = true;
    in.bench = g;
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    nb_gate_result r;
    /* without thresholds: reported, not judged */
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_true(r.accept);
    assert_int_equal(find(&r, "p99_ttft_regression", NULL)->outcome, NB_GATE_INFO);
    nb_gate_result_free(&r);
    t.max_p99_ttft_regression = 0.2;
    t.min_throughput_gain = 0.3;
    assert_int_equal(nb_gate_evaluate(&in, &t, &r), NB_OK);
    assert_false(r.accept);
    assert_string_equal(r.checks[r.first_fail].name, "p99_ttft_regression");
    assert_int_equal(find(&r, "throughput_gain", NULL)->outcome, NB_GATE_PASS);
    nb_gate_result_free(&r);
    json_decref(c);
    /* no level in common: bad input */
    c = json_loads("{\"levels\": [{\"concurrency\": 4, \"output_tok_per_s\": 9, \"ttft_s\": {\"p99\": 1}}]}", 0, NULL);
    assert_int_equal(nb_gate_bench_from_json(b, c, "b.json", "c.json", &g), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "no load level in common"));
    json_decref(b);
    json_decref(c);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
}

static void test_bad_summaries(void **state) {
    (void)state;
    static const struct { const char *js, *needle; } bad[] = {
        {"[1]", "JSON object"},
        {"{\"buckets\": {}}", "'overall'"},
        {"{\"overall\": {\"pass_rate\": 1.5, \"n\": 3}, \"buckets\": {}}", "0..1"},
        {"{\"overall\": {\"pass_rate\": 0.5, \"n\": 0}, \"buckets\": {}}", "no items"},
        {"{\"overall\": {\"pass_rate\": 0.5, \"n\": 2}}", "'buckets'"},
        {"{\"overall\": {\"pass_rate\": 0.5, \"n\": 2}, \"buckets\": {\"x\": {\"n\": 2}}}", "'buckets.x.pass_rate'"},
        {"{\"overall\": {\"pass_rate\": 0.5, \"n\": 2}, \"buckets\": {}, \"json_valid_rate\": 0.5}", "'n_json'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i].js, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        nb_gate_golden g;
        assert_int_equal(nb_gate_golden_from_json(j, "s.json", &g), NB_ERR_FORMAT);
        if (!strstr(nb_errmsg(), bad[i].needle)) fprintf(stderr, "case %zu: %s\n", i, nb_errmsg());
        assert_non_null(strstr(nb_errmsg(), bad[i].needle));
        assert_non_null(strstr(nb_errmsg(), "s.json"));
        json_decref(j);
    }
    json_t *k = json_loads("{\"kld_mean\": 0.01}", 0, NULL);
    double a, b;
    assert_int_equal(nb_gate_kld_from_json(k, "k.json", &a, &b), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "top1_agreement"));
    json_decref(k);
    k = json_loads("{\"ppl\": 0.5}", 0, NULL);
    assert_int_equal(nb_gate_ppl_from_json(k, "p.json", &a), NB_ERR_FORMAT);
    json_decref(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_overall_rates),
        cmocka_unit_test(test_seed_int4_rejected),
        cmocka_unit_test(test_seed_w8a8_accepted),
        cmocka_unit_test(test_missing_and_small_buckets),
        cmocka_unit_test(test_kld_drop_json),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_bad_summaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
