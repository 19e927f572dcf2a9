/* The acceptance gate; see gate.h. */
#include "eval/gate.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nb_gate_thresholds_defaults(nb_gate_thresholds *t) {
    t->ppl_delta = 0.05;
    t->golden_pass = 0.90;
    t->bucket_floor = 0.85;
    t->json_valid = 0.99;
    t->bucket_drop = 0.05;
    t->kld_max = 0.05;
    t->top1_min = 0.90;
    t->max_p99_ttft_regression = NAN;
    t->min_throughput_gain = NAN;
    t->min_bucket_n = 20;
}

void nb_gate_golden_free(nb_gate_golden *g) {
    if (!g) return;
    free(g->buckets);
    g->buckets = NULL;
    g->n_buckets = 0;
}

void nb_gate_result_free(nb_gate_result *r) {
    if (!r) return;
    free(r->checks);
    r->checks = NULL;
    r->n_checks = 0;
}

/* ---- evaluation ---------------------------------------------------------- */

typedef struct gate_acc {
    nb_gate_result *r;
    size_t cap;
    bool oom;
} gate_acc;

static void add(gate_acc *a, const char *name, const char *subject, double value, const char *op, double threshold,
                nb_gate_outcome outcome, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static void add(gate_acc *a, const char *name, const char *subject, double value, const char *op, double threshold,
                nb_gate_outcome outcome, const char *fmt, ...) {
    if (a->oom) return;
    if (a->r->n_checks == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        nb_gate_check *c = realloc(a->r->checks, cap * sizeof *c);
        if (!c) { a->oom = true; return; }
        a->r->checks = c;
        a->cap = cap;
    }
    nb_gate_check *c = &a->r->checks[a->r->n_checks++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->subject, sizeof c->subject, "%s", subject ? subject : "");
    c->value = value;
    c->threshold = threshold;
    snprintf(c->op, sizeof c->op, "%s", op);
    c->outcome = outcome;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

static nb_gate_outcome le(double v, double t) { return v <= t ? NB_GATE_PASS : NB_GATE_FAIL; }
static nb_gate_outcome ge(double v, double t) { return v >= t ? NB_GATE_PASS : NB_GATE_FAIL; }

static const nb_gate_bucket *find_bucket(const nb_gate_golden *g, const char *name) {
    for (size_t i = 0; i < g->n_buckets; i++)
        if (!strcmp(g->buckets[i].name, name)) return &g->buckets[i];
    return NULL;
}

/* Tolerance for comparing rates read back from JSON (0.85 stored as
 * 0.84999999999999998). Rates come from counts, so 1e-9 changes nothing real. */
#define EPS 1e-9

nb_status nb_gate_evaluate(const nb_gate_input *in, const nb_gate_thresholds *t, nb_gate_result *out) {
    memset(out, 0, sizeof *out);
    out->first_fail = -1;
    gate_acc a = {out, 0, false};

    if (in->has_ppl) {
        double d = in->ppl_cand / in->ppl_base - 1;
        add(&a, "ppl_delta", NULL, d, "<=", t->ppl_delta, le(d, t->ppl_delta + EPS),
            "perplexity %.4g -> %.4g (%+.2f%%)", in->ppl_base, in->ppl_cand, 100 * d);
    }
    if (in->has_kld) {
        add(&a, "kld_max", NULL, in->kld_mean, "<=", t->kld_max, le(in->kld_mean, t->kld_max + EPS),
            "mean KL(base||cand) %.5f nats", in->kld_mean);
        add(&a, "top1_min", NULL, in->top1_agreement, ">=", t->top1_min, ge(in->top1_agreement, t->top1_min - EPS),
            "top-1 agreement %.2f%%", 100 * in->top1_agreement);
    }
    /* bucket coverage: union of both sides' names, base order first */
    const nb_gate_golden *sides[2] = {&in->base, &in->cand};
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < sides[s]->n_buckets; i++) {
            const char *name = sides[s]->buckets[i].name;
            if (s == 1 && find_bucket(&in->base, name)) continue; /* already done */
            const nb_gate_bucket *b = find_bucket(&in->base, name), *c = find_bucket(&in->cand, name);
            if (!b || !c)
                add(&a, "bucket_present", name, NAN, "", NAN, NB_GATE_FAIL,
                    "bucket '%s' is in the %s summary only: it cannot be compared", name, b ? "base" : "candidate");
        }
    }
    for (size_t i = 0; i < in->cand.n_buckets; i++) {
        const nb_gate_bucket *c = &in->cand.buckets[i], *b = find_bucket(&in->base, c->name);
        if (!b) continue;
        int64_t n = NB_MIN(b->n, c->n);
        add(&a, "bucket_n", c->name, (double)n, ">=", (double)t->min_bucket_n, n >= t->min_bucket_n ? NB_GATE_PASS : NB_GATE_FAIL,
            "bucket '%s' has %lld base / %lld candidate items%s", c->name, (long long)b->n, (long long)c->n,
            n >= t->min_bucket_n ? "" : ": too few to judge");
    }
    for (size_t i = 0; i < in->cand.n_buckets; i++) {
        const nb_gate_bucket *c = &in->cand.buckets[i];
        add(&a, "bucket_floor", c->name, c->pass_rate, ">=", t->bucket_floor, ge(c->pass_rate, t->bucket_floor - EPS),
            "bucket '%s' passes %.1f%% of %lld items", c->name, 100 * c->pass_rate, (long long)c->n);
    }
    for (size_t i = 0; i < in->cand.n_buckets; i++) {
        const nb_gate_bucket *c = &in->cand.buckets[i], *b = find_bucket(&in->base, c->name);
        if (!b) continue;
        double drop = b->pass_rate - c->pass_rate;
        add(&a, "bucket_drop", c->name, drop, "<=", t->bucket_drop, le(drop, t->bucket_drop + EPS),
            "bucket '%s' %.1f%% -> %.1f%% (%+.1f points)", c->name, 100 * b->pass_rate, 100 * c->pass_rate,
            100 * (c->pass_rate - b->pass_rate));
    }
    bool json_items = in->base.n_json > 0 || in->cand.n_json > 0;
    if (json_items) {
        if (in->cand.n_json > 0) {
            double v = in->cand.json_valid_rate;
            add(&a, "json_valid", NULL, v, ">=", t->json_valid, ge(v, t->json_valid - EPS),
                "structured output valid in %.1f%% of %lld JSON items", 100 * v, (long long)in->cand.n_json);
        } else {
            add(&a, "json_valid", NULL, NAN, ">=", t->json_valid, NB_GATE_FAIL,
                "the candidate summary has no JSON items while the base has %lld", (long long)in->base.n_json);
        }
    }
    add(&a, "golden_pass", NULL, in->cand.pass_rate, ">=", t->golden_pass, ge(in->cand.pass_rate, t->golden_pass - EPS),
        "overall pass rate %.1f%% of %lld items (base %.1f%%)", 100 * in->cand.pass_rate, (long long)in->cand.n,
        100 * in->base.pass_rate);
    if (in->has_bench) {
        double r = in->bench.ttft_regression, g = in->bench.throughput_gain;
        bool ct = !isnan(t->max_p99_ttft_regression), cg = !isnan(t->min_throughput_gain);
        add(&a, "p99_ttft_regression", NULL, r, "<=", t->max_p99_ttft_regression,
            ct ? le(r, t->max_p99_ttft_regression + EPS) : NB_GATE_INFO,
            "worst p99 TTFT change %+.1f%% (at %s, %d matched levels)%s", 100 * r, in->bench.ttft_level,
            in->bench.n_matched, ct ? "" : "; no threshold given");
        add(&a, "throughput_gain", NULL, g, ">=", t->min_throughput_gain,
            cg ? ge(g, t->min_throughput_gain - EPS) : NB_GATE_INFO,
            "best output throughput change %+.1f%%%s", 100 * g, cg ? "" : "; no threshold given");
    }
    if (a.oom) {
        nb_gate_result_free(out);
        return nb_fail(NB_ERR_NOMEM, "out of memory for the gate's checks");
    }
    out->accept = true;
    for (size_t i = 0; i < out->n_checks; i++)
        if (out->checks[i].outcome == NB_GATE_FAIL) {
            out->accept = false;
            out->first_fail = (int)i;
            break;
        }
    return NB_OK;
}

/* ---- JSON readers ------------------------------------------------------- */

static nb_status get_number(const json_t *o, const char *key, const char *what, const char *where, double *out) {
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_number(v))
        return nb_fail(NB_ERR_FORMAT, "%s: '%s%s' %s (expected a number)", what, where, key,
                       v ? "is not a number" : "is missing");
    *out = json_number_value(v);
    if (!isfinite(*out)) return nb_fail(NB_ERR_FORMAT, "%s: '%s%s' is not finite", what, where, key);
    return NB_OK;
}

static nb_status get_rate(const json_t *o, const char *key, const char *what, const char *where, double *out) {
    NB_TRY(get_number(o, key, what, where, out));
    if (*out < 0 || *out > 1)
        return nb_fail(NB_ERR_FORMAT, "%s: '%s%s' is %g, a rate must be in 0..1", what, where, key, *out);
    return NB_OK;
}

static nb_status get_count(const json_t *o, const char *key, const char *what, const char *where, int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_integer(v) || json_integer_value(v) < 0)
        return nb_fail(NB_ERR_FORMAT, "%s: '%s%s' %s (expected an integer >= 0)", what, where, key,
                       v ? "is not a count" : "is missing");
    *out = json_integer_value(v);
    return NB_OK;
}

nb_status nb_gate_golden_from_json(const void *json, const char *what, nb_gate_golden *out) {
    const json_t *root = json;
    memset(out, 0, sizeof *out);
    out->json_valid_rate = NAN;
    if (!json_is_object(root)) return nb_fail(NB_ERR_FORMAT, "%s: a golden summary must be a JSON object", what);
    json_t *ov = json_object_get(root, "overall");
    if (!json_is_object(ov))
        return nb_fail(NB_ERR_FORMAT, "%s: 'overall' is missing or not an object (is this a summary.json of "
                       "'nibble eval golden'?)", what);
    NB_TRY(get_rate(ov, "pass_rate", what, "overall.", &out->pass_rate));
    NB_TRY(get_count(ov, "n", what, "overall.", &out->n));
    if (out->n == 0) return nb_fail(NB_ERR_FORMAT, "%s: 'overall.n' is 0: a summary of no items", what);
    json_t *bs = json_object_get(root, "buckets");
    if (!json_is_object(bs)) return nb_fail(NB_ERR_FORMAT, "%s: 'buckets' is missing or not an object", what);
    size_t nb = json_object_size(bs);
    out->buckets = calloc(nb ? nb : 1, sizeof *out->buckets);
    if (!out->buckets) return nb_fail(NB_ERR_NOMEM, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(bs, k, v) {
        char where[NB_GATE_NAME_MAX + 16];
        snprintf(where, sizeof where, "buckets.%.60s.", k);
        nb_gate_bucket *b = &out->buckets[out->n_buckets];
        if (strlen(k) == 0 || strlen(k) >= NB_GATE_NAME_MAX) {
            nb_gate_golden_free(out);
            return nb_fail(NB_ERR_FORMAT, "%s: bucket name '%.60s' must be 1..%d bytes", what, k, NB_GATE_NAME_MAX - 1);
        }
        snprintf(b->name, sizeof b->name, "%s", k);
        nb_status st;
        if (!json_is_object(v)) st = nb_fail(NB_ERR_FORMAT, "%s: 'buckets.%s' is not an object", what, k);
        else if ((st = get_rate(v, "pass_rate", what, where, &b->pass_rate)) == NB_OK)
            st = get_count(v, "n", what, where, &b->n);
        if (st != NB_OK) {
            nb_gate_golden_free(out);
            return st;
        }
        out->n_buckets++;
    }
    json_t *jv = json_object_get(root, "json_valid_rate");
    if (jv && !json_is_null(jv)) {
        nb_status st = get_rate(root, "json_valid_rate", what, "", &out->json_valid_rate);
        if (st == NB_OK) st = get_count(root, "n_json", what, "", &out->n_json);
        if (st == NB_OK && out->n_json == 0)
            st = nb_fail(NB_ERR_FORMAT, "%s: 'json_valid_rate' is given but 'n_json' is 0", what);
        if (st != NB_OK) {
            nb_gate_golden_free(out);
            return st;
        }
    }
    return NB_OK;
}

nb_status nb_gate_ppl_from_json(const void *json, const char *what, double *ppl) {
    if (!json_is_object((const json_t *)json)) return nb_fail(NB_ERR_FORMAT, "%s: must be a JSON object", what);
    NB_TRY(get_number(json, "ppl", what, "", ppl));
    if (*ppl < 1) return nb_fail(NB_ERR_FORMAT, "%s: 'ppl' is %g, a perplexity is >= 1", what, *ppl);
    return NB_OK;
}

nb_status nb_gate_kld_from_json(const void *json, const char *what, double *kld_mean, double *top1) {
    if (!json_is_object((const json_t *)json)) return nb_fail(NB_ERR_FORMAT, "%s: must be a JSON object", what);
    NB_TRY(get_number(json, "kld_mean", what, "", kld_mean));
    if (*kld_mean < 0) return nb_fail(NB_ERR_FORMAT, "%s: 'kld_mean' is %g, a KL divergence is >= 0", what, *kld_mean);
    return get_rate(json, "top1_agreement", what, "", top1);
}

static nb_status level_key(const json_t *lv, const char *what, size_t i, char *key, size_t cap) {
    json_t *c = json_object_get(lv, "concurrency"), *r = json_object_get(lv, "request_rate");
    if (c && json_is_number(c)) snprintf(key, cap, "concurrency %g", json_number_value(c));
    else if (r && json_is_number(r)) snprintf(key, cap, "request_rate %g", json_number_value(r));
    else if (r && json_is_string(r)) snprintf(key, cap, "request_rate %.30s", json_string_value(r));
    else return nb_fail(NB_ERR_FORMAT, "%s: levels[%zu] has neither 'concurrency' nor 'request_rate'", what, i);
    return NB_OK;
}

static nb_status level_p99_ttft(const json_t *lv, const char *what, size_t i, double *out) {
    json_t *t = json_object_get(lv, "ttft_s");
    char where[48];
    snprintf(where, sizeof where, "levels[%zu].ttft_s.", i);
    if (!json_is_object(t)) return nb_fail(NB_ERR_FORMAT, "%s: levels[%zu].ttft_s is missing or not an object", what, i);
    return get_number(t, "p99", what, where, out);
}

nb_status nb_gate_bench_from_json(const void *base, const void *cand, const char *what_base, const char *what_cand,
                                  nb_gate_bench *out) {
    memset(out, 0, sizeof *out);
    const json_t *lb = json_is_object((const json_t *)base) ? json_object_get(base, "levels") : NULL;
    const json_t *lc = json_is_object((const json_t *)cand) ? json_object_get(cand, "levels") : NULL;
    if (!json_is_array(lb) || json_array_size(lb) == 0)
        return nb_fail(NB_ERR_FORMAT, "%s: 'levels' is missing or empty (expected bench serve results.json)", what_base);
    if (!json_is_array(lc) || json_array_size(lc) == 0)
        return nb_fail(NB_ERR_FORMAT, "%s: 'levels' is missing or empty (expected bench serve results.json)", what_cand);
    double best_b = 0, best_c = 0;
    out->ttft_regression = -INFINITY;
    const json_t *arrs[2] = {lb, lc};
    const char *whats[2] = {what_base, what_cand};
    double *bests[2] = {&best_b, &best_c};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < json_array_size(arrs[s]); i++) {
            json_t *lv = json_array_get(arrs[s], i);
            double tp;
            char where[32];
            snprintf(where, sizeof where, "levels[%zu].", i);
            if (!json_is_object(lv)) return nb_fail(NB_ERR_FORMAT, "%s: levels[%zu] is not an object", whats[s], i);
            NB_TRY(get_number(lv, "output_tok_per_s", whats[s], where, &tp));
            if (tp > *bests[s]) *bests[s] = tp;
        }
    for (size_t i = 0; i < json_array_size(lb); i++) {
        char kb[48];
        NB_TRY(level_key(json_array_get(lb, i), what_base, i, kb, sizeof kb));
        for (size_t j = 0; j < json_array_size(lc); j++) {
            char kc[48];
            NB_TRY(level_key(json_array_get(lc, j), what_cand, j, kc, sizeof kc));
            if (strcmp(kb, kc) != 0) continue;
            double pb, pc;
            NB_TRY(level_p99_ttft(json_array_get(lb, i), what_base, i, &pb));
            NB_TRY(level_p99_ttft(json_array_get(lc, j), what_cand, j, &pc));
            if (pb <= 0) return nb_fail(NB_ERR_FORMAT, "%s: levels[%zu].ttft_s.p99 is %g, must be > 0", what_base, i, pb);
            double r = pc / pb - 1;
            if (r > out->ttft_regression) {
                out->ttft_regression = r;
                snprintf(out->ttft_level, sizeof out->ttft_level, "%s", kb);
            }
            out->n_matched++;
            break;
        }
    }
    if (out->n_matched == 0)
        return nb_fail(NB_ERR_FORMAT, "%s and %s have no load level in common (levels are matched by concurrency or "
                       "request_rate)", what_base, what_cand);
    if (best_b <= 0) return nb_fail(NB_ERR_FORMAT, "%s: no level has output_tok_per_s > 0", what_base);
    out->throughput_gain = best_c / best_b - 1;
    return NB_OK;
}
