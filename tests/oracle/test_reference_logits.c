/* Teacher-forced logits and greedy continuations against llama.cpp's
 * reference outputs in shared/reference (format: shared/reference/README.md).
 *
 * Tolerances come from each file's own data:
 *  - aidreams260K (F32, trained): llama.cpp and an independent float64
 *    implementation agree within 1e-5 and llama.cpp's own variants within
 *    0.005, so we allow 0.01 against `top10`.
 *  - F16 synthetic models: llama.cpp multiplies in FP16 here (float64_check
 *    max_abs_diff_top10 about 0.026-0.04), so we compare against the float64
 *    re-implementation (`top10_float64`) with 0.05, the README's figure for
 *    how far legitimate F16 kernels move. Since we accumulate in f32 from
 *    the exact f16 weights, we also hold ourselves to 0.002 against the
 *    float64 logits (measured: about 1e-5), which catches any real bug that
 *    hides inside llama.cpp's own FP16 noise.
 *  - quantized synthetic models: activations are themselves quantized to
 *    8 bits per block before the integer dot products, so the last-bit
 *    differences of any two correct implementations flip roundings and the
 *    random-weight network amplifies them. The tolerance is read from the
 *    file's own `llama_cpp_self_consistency`: the largest logit change
 *    llama.cpp itself shows between its legitimate settings (default F16 KV
 *    cache, other CPU kernels, one-batch recomputation) - 0.33 for Q8_0 up
 *    to 0.61 for qwen2 Q4_0. We quantize activations exactly as llama.cpp's
 *    x86 kernels do, and land well inside (the test prints the figures).
 * Top-1 must equal the reference wherever the reference margin (top1 - top2)
 * exceeds twice the tolerance; greedy generation must match up to the first
 * step whose margin is below the tolerance. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"
#include "testutil.h"

typedef struct {
    const char *ref;   /* reference/<name>.json */
    const char *model; /* models/<file> */
    double tol;
    bool use_f64;      /* compare against top10_float64 */
    double tol_f64;    /* our own bound against the float64 logits */
} ref_case;

static const ref_case cases[] = {
    {"reference/aidreams260K.json", "models/aidreams260K.gguf", 0.01, false, 0},
    {"reference/synth-llama-F16.json", "models/synth-llama-F16.gguf", 0.05, true, 0.002},
    {"reference/synth-qwen2-F16.json", "models/synth-qwen2-F16.gguf", 0.05, true, 0.002},
    {"reference/synth-llama-Q8_0.json", "models/synth-llama-Q8_0.gguf", 0, false, 0},
    {"reference/synth-llama-Q4_0.json", "models/synth-llama-Q4_0.gguf", 0, false, 0},
    {"reference/synth-llama-Q4_K_M.json", "models/synth-llama-Q4_K_M.gguf", 0, false, 0},
    {"reference/synth-qwen2-Q4_0.json", "models/synth-qwen2-Q4_0.gguf", 0, false, 0},
};

typedef struct {
    nb_model *m;
    nb_kv_pool kv;
    nb_fwd *f;
    int32_t *blocks;
    int32_t n_blocks;
} runner;

static void runner_init(runner *r, const char *path, int32_t max_tokens) {
    assert_int_equal(nb_model_load(path, &r->m), NB_OK);
    r->n_blocks = (max_tokens + 15) / 16;
    assert_int_equal(nb_kv_pool_init(&r->kv, &r->m->hp, 16, r->n_blocks), NB_OK);
    r->blocks = malloc((size_t)r->n_blocks * sizeof(int32_t));
    for (int i = 0; i < r->n_blocks; i++) r->blocks[i] = r->n_blocks - 1 - i; /* non-trivial block table */
    assert_int_equal(nb_fwd_create(r->m, &r->kv, 2, max_tokens, &r->f), NB_OK);
}

static void runner_free(runner *r) {
    nb_fwd_free(r->f);
    nb_kv_pool_free(&r->kv);
    nb_model_free(r->m);
    free(r->blocks);
}

/* Runs tokens[start..start+n) at their positions; logits for all of them. */
static void run(runner *r, const int32_t *tokens, int32_t start, int32_t n, float *logits) {
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq = calloc((size_t)n, sizeof *seq);
    bool *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) { pos[i] = start + i; want[i] = true; }
    nb_seq_view sv = {r->blocks, r->n_blocks};
    nb_batch b = {n, tokens + start, pos, seq, want, 1, &sv};
    nb_status st = nb_fwd_run(r->f, &b, logits);
    if (st != NB_OK) fprintf(stderr, "forward: %s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    free(pos); free(seq); free(want);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static void check_case(const ref_case *c, json_t *cs, runner *r, bool one_by_one) {
    json_t *pt = json_object_get(cs, "prompt_tokens"), *ct = json_object_get(cs, "continuation_tokens");
    json_t *positions = json_object_get(cs, "positions");
    int32_t np = (int32_t)json_array_size(pt), nc = (int32_t)json_array_size(ct), n = np + nc;
    int32_t V = r->m->hp.n_vocab;
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    for (int32_t i = 0; i < np; i++) toks[i] = (int32_t)json_integer_value(json_array_get(pt, (size_t)i));
    for (int32_t i = 0; i < nc; i++) toks[np + i] = (int32_t)json_integer_value(json_array_get(ct, (size_t)i));
    float *lg = malloc((size_t)n * (size_t)V * sizeof *lg);
    if (one_by_one) for (int32_t i = 0; i < n; i++) run(r, toks, i, 1, lg + (size_t)i * V);
    else run(r, toks, 0, n, lg);
    double worst = 0;
    int top1_checked = 0;
    for (int32_t i = 0; i < n; i++) {
        json_t *p = json_array_get(positions, (size_t)i);
        json_t *top = json_object_get(p, "top10"), *t64 = json_object_get(p, "top10_float64");
        const float *l = lg + (size_t)i * V;
        for (size_t k = 0; k < json_array_size(top); k++) {
            int32_t id = (int32_t)json_integer_value(json_array_get(json_array_get(top, k), 0));
            double ref = c->use_f64 ? json_number_value(json_array_get(t64, k))
                                    : json_number_value(json_array_get(json_array_get(top, k), 1));
            double d = fabs(l[id] - ref);
            if (d > worst) worst = d;
            if (d > c->tol) {
                fprintf(stderr, "%s pos %d id %d: ours %.5f ref %.5f (diff %.4f > %.3f)\n", c->model, i, id, l[id],
                        ref, d, c->tol);
                fail();
            }
        }
        double r0 = json_number_value(json_array_get(json_array_get(top, 0), 1));
        double r1 = json_number_value(json_array_get(json_array_get(top, 1), 1));
        if (r0 - r1 > 2 * c->tol) {
            int32_t id0 = (int32_t)json_integer_value(json_array_get(json_array_get(top, 0), 0));
            assert_int_equal(argmax(l, V), id0);
            top1_checked++;
        }
    }
    if (c->tol_f64 > 0) assert_true(worst <= c->tol_f64);
    fprintf(stderr, "  %s %s %s: %d positions, max |diff| %.5f (tol %.3f), top-1 checked at %d\n", c->model,
            json_string_value(json_object_get(cs, "id")), one_by_one ? "one token per step" : "one batch", n, worst,
            c->tol, top1_checked);
    free(lg);
    free(toks);
}

/* Greedy generation from the prompt, step by step through the KV cache. */
static void check_greedy(const ref_case *c, json_t *cs, runner *r) {
    json_t *pt = json_object_get(cs, "prompt_tokens"), *ct = json_object_get(cs, "continuation_tokens");
    json_t *margins = json_object_get(cs, "continuation_top1_top2_logit_margins");
    int32_t np = (int32_t)json_array_size(pt), nc = (int32_t)json_array_size(ct), V = r->m->hp.n_vocab;
    int32_t *toks = malloc((size_t)(np + nc) * sizeof *toks);
    for (int32_t i = 0; i < np; i++) toks[i] = (int32_t)json_integer_value(json_array_get(pt, (size_t)i));
    float *lg = malloc((size_t)np * (size_t)V * sizeof *lg);
    run(r, toks, 0, np, lg);
    int32_t next = argmax(lg + (size_t)(np - 1) * V, V);
    int matched = 0;
    for (int32_t s = 0; s < nc; s++) {
        if (json_number_value(json_array_get(margins, (size_t)s)) < c->tol) break;
        int32_t want = (int32_t)json_integer_value(json_array_get(ct, (size_t)s));
        if (next != want) fprintf(stderr, "%s step %d: ours %d ref %d\n", c->model, s, next, want);
        assert_int_equal(next, want);
        matched++;
        toks[np + s] = next;
        run(r, toks, np + s, 1, lg);
        next = argmax(lg, V);
    }
    fprintf(stderr, "  %s %s greedy: %d of %d steps identical before a margin below %.3f\n", c->model,
            json_string_value(json_object_get(cs, "id")), matched, nc, c->tol);
    if (c->tol <= 0.01) assert_int_equal(matched, nc); /* aidreams: all 48 */
    free(lg);
    free(toks);
}

/* The largest max_abs_logit_diff llama.cpp shows between its own settings. */
static double self_consistency(json_t *root) {
    double worst = 0;
    json_t *cs_arr = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cs_arr); i++) {
        json_t *sc = json_object_get(json_array_get(cs_arr, i), "llama_cpp_self_consistency");
        const char *k;
        json_t *v;
        json_object_foreach(sc, k, v) {
            double d = json_number_value(json_object_get(v, "max_abs_logit_diff"));
            if (d > worst) worst = d;
        }
    }
    return worst;
}

static void test_reference(void **state) {
    ref_case cc = *(const ref_case *)*state;
    const ref_case *c = &cc;
    const char *rp = nb_test_shared(c->ref), *mp = nb_test_shared(c->model);
    if (!rp || !mp) skip();
    json_error_t err;
    json_t *root = json_load_file(rp, 0, &err);
    assert_non_null(root);
    json_t *cs_arr = json_object_get(root, "cases");
    if (cc.tol <= 0) {
        cc.tol = self_consistency(root);
        fprintf(stderr, "  %s: tolerance %.3f = llama.cpp's own spread between its settings\n", c->model, cc.tol);
        assert_true(cc.tol > 0 && cc.tol < 1);
    }
    runner r;
    runner_init(&r, mp, 128);
    for (size_t i = 0; i < json_array_size(cs_arr); i++) {
        json_t *cs = json_array_get(cs_arr, i);
        check_case(c, cs, &r, false);
        check_case(c, cs, &r, true);
        check_greedy(c, cs, &r);
    }
    runner_free(&r);
    json_decref(root);
}

int main(void) {
    struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct CMUnitTest t = {cases[i].model, test_reference, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    return nb_test_exit(_cmocka_run_group_tests("reference_logits", tests, sizeof cases / sizeof cases[0], NULL, NULL));
}
