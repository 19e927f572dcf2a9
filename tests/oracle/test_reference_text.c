/* Whole-pipeline checks against shared/reference through the session API
 * (tokenizer + forward + sampling as `nibble generate` uses them):
 *  - perplexity of aidreams260K.gguf over reference/aidreams-sample.txt at
 *    -c 128 equals llama-perplexity's 10.1050 (+/- 0.66378) within 0.002 and
 *    the float64 recomputation (10.1057) within 0.001, with the same token
 *    count (3039), chunk count (23) and running value after every chunk;
 *  - the llama2.c checkpoint (aidreams260K.bin + its tokenizer.bin) and the
 *    GGUF conversion give llama.cpp's prompt tokens and 48 greedy tokens;
 *  - the same models exported as Hugging Face checkpoints (config.json +
 *    safetensors, Q/K rows in HF's rotate-half order) compute the same
 *    logits through the HF loader (NEOX RoPE) as the GGUF (adjacent-pair
 *    RoPE) - the check that both pairing conventions are handled. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "engine/sampler.h"
#include "eval/ppl.h"
#include "formats/hf_export.h"
#include "testutil.h"

typedef struct { json_t *running; int bad; } ppl_check;

static void on_chunk(void *ud, const nb_ppl *r) {
    ppl_check *c = ud;
    double want = json_number_value(json_array_get(c->running, (size_t)r->n_chunks - 1));
    if (fabs(r->ppl - want) > 0.002) {
        fprintf(stderr, "chunk %lld: running ppl %.4f, llama.cpp %.4f\n", (long long)r->n_chunks, r->ppl, want);
        c->bad++;
    }
}

static void test_perplexity(void **state) {
    (void)state;
    const char *mp = nb_test_shared("models/aidreams260K.gguf");
    const char *tp = nb_test_shared("reference/aidreams-sample.txt");
    const char *rp = nb_test_shared("reference/aidreams260K-perplexity.json");
    if (!mp || !tp || !rp) skip();
    json_t *ref = json_load_file(rp, 0, NULL);
    assert_non_null(ref);
    char *text;
    size_t len;
    assert_int_equal(nb_read_file(tp, 1 << 20, &text, &len), NB_OK);
    if (len && text[len - 1] == '\n') text[--len] = '\0'; /* llama-perplexity strips one */
    nb_session_params sp = {.model_path = mp, .n_threads = 2, .n_ctx = 128, .n_batch = 128};
    nb_session *s;
    assert_int_equal(nb_session_open(&sp, &s), NB_OK);
    ppl_check c = {json_object_get(ref, "running_ppl_after_each_chunk"), 0};
    nb_ppl r;
    assert_int_equal(nb_perplexity(s, text, len, 128, &r, on_chunk, &c), NB_OK);
    fprintf(stderr, "  ppl %.4f +/- %.5f over %lld tokens, %lld chunks (llama.cpp %.4f +/- %.5f, float64 %.4f)\n",
            r.ppl, r.uncertainty, (long long)r.n_tokens, (long long)r.n_chunks,
            json_number_value(json_object_get(ref, "ppl")), json_number_value(json_object_get(ref, "ppl_uncertainty")),
            json_number_value(json_object_get(json_object_get(ref, "float64_check"), "ppl")));
    assert_int_equal(c.bad, 0);
    assert_int_equal(r.n_tokens, json_integer_value(json_object_get(ref, "n_tokens_in_text")));
    assert_int_equal(r.n_chunks, json_integer_value(json_object_get(ref, "n_chunks")));
    assert_true(fabs(r.ppl - json_number_value(json_object_get(ref, "ppl"))) < 0.002);
    assert_true(fabs(r.ppl - json_number_value(json_object_get(json_object_get(ref, "float64_check"), "ppl"))) < 0.001);
    assert_true(fabs(r.uncertainty - json_number_value(json_object_get(ref, "ppl_uncertainty"))) < 0.001);
    nb_session_free(s);
    free(text);
    json_decref(ref);
}

/* Greedy continuation of every reference prompt through a session. */
static void greedy_matches(const char *model, json_t *ref) {
    nb_session_params sp = {.model_path = model, .n_threads = 2, .n_ctx = 128};
    nb_session *s;
    assert_int_equal(nb_session_open(&sp, &s), NB_OK);
    json_t *cases = json_object_get(ref, "cases");
    float *lg = malloc((size_t)s->n_vocab * sizeof *lg);
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c);
        const char *prompt = json_string_value(json_object_get(cs, "prompt"));
        json_t *pt = json_object_get(cs, "prompt_tokens"), *ct = json_object_get(cs, "continuation_tokens");
        int32_t *ids;
        size_t n;
        assert_int_equal(nb_tokenize(s->tok, prompt, strlen(prompt), true, false, &ids, &n), NB_OK);
        assert_int_equal(n, json_array_size(pt));
        for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], json_integer_value(json_array_get(pt, i)));
        nb_session_reset(s);
        assert_int_equal(nb_session_eval(s, ids, (int32_t)n, false, lg), NB_OK);
        for (size_t k = 0; k < json_array_size(ct); k++) {
            int32_t id;
            nb_top_k(lg, s->n_vocab, 1, &id, &(float){0});
            assert_int_equal(id, json_integer_value(json_array_get(ct, k)));
            assert_int_equal(nb_session_eval(s, &id, 1, false, lg), NB_OK);
        }
        fprintf(stderr, "  %s: '%s' -> %zu prompt tokens and %zu greedy tokens identical to llama.cpp\n", model,
                prompt, n, json_array_size(ct));
        free(ids);
    }
    free(lg);
    nb_session_free(s);
}

static void test_llama2c_and_gguf(void **state) {
    (void)state;
    const char *bin = nb_test_shared("models/aidreams260K.bin");
    const char *gguf = nb_test_shared("models/aidreams260K.gguf");
    const char *rp = nb_test_shared("reference/aidreams260K.json");
    if (!bin || !gguf || !rp) skip();
    json_t *ref = json_load_file(rp, 0, NULL);
    assert_non_null(ref);
    greedy_matches(gguf, ref);
    greedy_matches(bin, ref); /* tokenizer found beside it: aidreams260K.tok512.bin */
    json_decref(ref);
}

/* Teacher-forced logits of `tokens` through a session on `model`. */
static float *all_logits(const char *model, const char *tok, const int32_t *ids, int32_t n, int32_t *n_vocab) {
    nb_session_params sp = {.model_path = model, .tokenizer_path = tok, .n_threads = 2, .n_ctx = n};
    nb_session *s;
    nb_status st = nb_session_open(&sp, &s);
    if (st != NB_OK) fprintf(stderr, "%s: %s\n", model, nb_errmsg());
    assert_int_equal(st, NB_OK);
    *n_vocab = s->n_vocab;
    float *lg = malloc((size_t)n * (size_t)s->n_vocab * sizeof *lg);
    assert_int_equal(nb_session_eval(s, ids, n, true, lg), NB_OK);
    nb_session_free(s);
    return lg;
}

static void hf_roundtrip(const char *gguf_rel, const char *ref_rel, const char *dtype, double tol) {
    const char *gguf = nb_test_shared(gguf_rel), *rp = nb_test_shared(ref_rel);
    if (!gguf || !rp) skip();
    json_t *ref = json_load_file(rp, 0, NULL);
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 0);
    json_t *pt = json_object_get(cs, "prompt_tokens"), *ct = json_object_get(cs, "continuation_tokens");
    int32_t n = (int32_t)(json_array_size(pt) + json_array_size(ct)), V, V2;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (size_t i = 0; i < json_array_size(pt); i++) ids[i] = (int32_t)json_integer_value(json_array_get(pt, i));
    for (size_t i = 0; i < json_array_size(ct); i++)
        ids[json_array_size(pt) + i] = (int32_t)json_integer_value(json_array_get(ct, i));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/hf-%s", nb_test_tmpdir(), strrchr(gguf_rel, '/') + 1);
    nb_source src;
    assert_int_equal(nb_source_open(gguf, &src), NB_OK);
    assert_int_equal(nb_hf_export(&src, dir, dtype), NB_OK);
    nb_source_close(&src);
    float *a = all_logits(gguf, NULL, ids, n, &V);
    float *b = all_logits(dir, gguf, ids, n, &V2); /* tokenizer taken from the GGUF */
    assert_int_equal(V, V2);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * (size_t)V; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    fprintf(stderr, "  %s as HF %s: %d positions x %d logits, max |GGUF - HF| = %.2g (tol %.g)\n", gguf_rel, dtype, n,
            V, worst, tol);
    assert_true(worst <= tol);
    free(a); free(b); free(ids);
    json_decref(ref);
}

static void test_hf_export_llama(void **state) {
    (void)state;
    hf_roundtrip("models/aidreams260K.gguf", "reference/aidreams260K.json", "F32", 1e-4);
    hf_roundtrip("models/synth-llama-F16.gguf", "reference/synth-llama-F16.json", "F16", 1e-4);
}

static void test_hf_export_qwen2(void **state) {
    (void)state;
    /* the export writes the F32 q/k/v biases as F16 too, which moves logits by ~2e-3 */
    hf_roundtrip("models/synth-qwen2-F16.gguf", "reference/synth-qwen2-F16.json", "F16", 1e-2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perplexity),
        cmocka_unit_test(test_llama2c_and_gguf),
        cmocka_unit_test(test_hf_export_llama),
        cmocka_unit_test(test_hf_export_qwen2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
