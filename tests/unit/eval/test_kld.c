/* Tests of eval kld's parts (eval/kld.h, kldbase.h, tokclass.h):
 *  - token classes: the built-ins on hand-picked texts (overlaps, "other"),
 *    --class specs refused with a message (no '=', bad name, duplicate, a
 *    regex that does not compile);
 *  - top-K: selection order (ties to the lower id), a top-K position with
 *    K = n_vocab equals the full computation, with K < n_vocab it equals the
 *    lumped closed form and stays under the full KLD (chain rule);
 *  - the baseline file: written and read back, a truncated file, a wrong
 *    magic and an abort leave nothing behind / are refused;
 *  - whole runs on aidreams260K: the model against itself has KLD exactly 0
 *    and 100% top-1 (and no worst class); against itself with an int8 KV
 *    cache (a real, small divergence) the per-class means of a partition
 *    (--class has / lacks a vowel) weighted by n give the overall mean; the
 *    built-ins cover every position; a saved full baseline reproduces the
 *    direct run exactly, a top-K one keeps top-1 and PPLs exact and the KLD
 *    below; a baseline file refuses another text, another -c and another
 *    vocabulary; two models of 512 tokens with different texts are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#include "base/file.h"
#include "eval/kld.h"
#include "model/synth.h"

/* ---- classes --------------------------------------------------------------- */

static uint32_t cls(nb_tokclass_set *s, const char *t) { return nb_tokclass_match(s, t, strlen(t)); }

static void test_classes(void **state) {
    (void)state;
    nb_tokclass_set s;
    assert_int_equal(nb_tokclass_init(&s), NB_OK);
    assert_int_equal(s.n, 5);
    enum { D = 1, P = 2, S = 4, W = 8, O = 16 };
    assert_int_equal(cls(&s, "2024"), D);
    assert_int_equal(cls(&s, " 3rd"), D | W);
    assert_int_equal(cls(&s, "\":"), P);
    assert_int_equal(cls(&s, "{\"a"), P | W);
    assert_int_equal(cls(&s, "\n\n"), S);
    assert_int_equal(cls(&s, "  "), S);
    assert_int_equal(cls(&s, " the"), W);
    assert_int_equal(cls(&s, "\xc3\xa9t\xc3\xa9"), W); /* "été" */
    assert_int_equal(cls(&s, ""), O);                  /* control tokens */
    assert_int_equal(cls(&s, "\xe2\x82"), O);          /* a UTF-8 fragment */
    assert_int_equal(cls(&s, "\xe2\x82\xac"), O);      /* the euro sign */
    assert_int_equal(nb_tokclass_add(&s, "money=[$\xe2\x82\xac]"), NB_OK);
    assert_int_equal(cls(&s, "\xe2\x82\xac"), O | 32);
    assert_int_equal(nb_tokclass_add(&s, "novalue"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "NAME=REGEX"));
    assert_int_equal(nb_tokclass_add(&s, "digit=x"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "already exists"));
    assert_int_equal(nb_tokclass_add(&s, "a b=x"), NB_ERR_INVALID);
    assert_int_equal(nb_tokclass_add(&s, "=x"), NB_ERR_INVALID);
    assert_int_equal(nb_tokclass_add(&s, "x="), NB_ERR_INVALID);
    assert_int_equal(nb_tokclass_add(&s, "bad=a(b"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "offset 3"));
    for (int i = s.n; i < NB_TOKCLASS_MAX; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "c%d=x", i);
        assert_int_equal(nb_tokclass_add(&s, spec), NB_OK);
    }
    assert_int_equal(nb_tokclass_add(&s, "onemore=x"), NB_ERR_RANGE);
    nb_tokclass_free(&s);
}

/* ---- top-K --------------------------------------------------------------- */

static void test_topk(void **state) {
    (void)state;
    float l[8] = {1, 3, 3, -2, NAN, 0.5f, 3, -INFINITY};
    int32_t ids[8];
    assert_int_equal(nb_kldbase_topk(l, 8, 4, ids), 4);
    int32_t want[4] = {1, 2, 6, 0};
    for (int i = 0; i < 4; i++) assert_int_equal(ids[i], want[i]);
    assert_int_equal(nb_kldbase_topk(l, 8, 8, ids), 7); /* NaN skipped */
    assert_int_equal(ids[6], 7);

    /* K = n: the same numbers as the full computation */
    float b[5] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f}, t[5] = {0.2f, -0.5f, 1.0f, 0.3f, 2.0f};
    nb_cmp_pos full, top;
    assert_int_equal(nb_cmp_position(b, t, 5, 3, &full), NB_OK);
    double lse = log(exp(0.5) + exp(-1.0) + exp(2.0) + exp(0.0) + exp(1.5));
    int32_t bid[5];
    float blp[5];
    assert_int_equal(nb_kldbase_topk(b, 5, 5, bid), 5);
    for (int i = 0; i < 5; i++) blp[i] = (float)(b[bid[i]] - lse);
    nb_kldbase_pos bp = {.nll = lse - 0.0, .tail = 0, .ids = bid, .lp = blp};
    assert_int_equal(nb_kld_position_topk(&bp, 5, t, 5, 3, &top), NB_OK);
    assert_true(fabs(top.kld - full.kld) < 1e-6);
    assert_true(top.same_top == full.same_top && !full.same_top); /* 2 vs 4 */
    assert_true(fabs(top.nll_base - full.nll_base) < 1e-6 && fabs(top.nll_test - full.nll_test) < 1e-9);

    /* K = 2: the lumped closed form, below the full KLD */
    double lt = log(exp(0.2) + exp(-0.5) + exp(1.0) + exp(0.3) + exp(2.0));
    double P = (exp(0.5) + exp(-1.0) + exp(0.0)) / exp(lse), Q = (exp(0.2) + exp(-0.5) + exp(0.3)) / exp(lt);
    double want_k = exp(2.0 - lse) * ((2.0 - lse) - (1.0 - lt)) + exp(1.5 - lse) * ((1.5 - lse) - (2.0 - lt)) +
                    P * log(P / Q);
    bp.tail = P;
    assert_int_equal(nb_kld_position_topk(&bp, 2, t, 5, 3, &top), NB_OK);
    assert_true(fabs(top.kld - want_k) < 1e-6);
    assert_true(top.kld <= full.kld + 1e-12);
    assert_false(top.same_top);
    /* a repeated id in a record is refused */
    int32_t rep[2] = {2, 2};
    bp.ids = rep;
    assert_int_equal(nb_kld_position_topk(&bp, 2, t, 5, 3, &top), NB_ERR_FORMAT);
}

/* ---- the file -------------------------------------------------------------- */

static void test_file(void **state) {
    (void)state;
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/b.nbkl", nb_test_tmpdir());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    nb_kldbase_hdr h = {.mode = NB_KLDBASE_FULL, .n_vocab = 6, .ctx = 4, .n_tokens = 9, .n_chunks = 2};
    memset(h.text_sha, 7, 32);
    snprintf(h.model_type, sizeof h.model_type, "gguf");
    snprintf(h.model_path, sizeof h.model_path, "/m/base.gguf");
    int32_t toks[8] = {1, 2, 3, 4, 1, 5, 0, 2};
    nb_kldbase_writer *w;
    assert_int_equal(nb_kldbase_create(path, &h, toks, &w), NB_OK);
    assert_int_equal(h.n_positions, 2); /* 4 - 1 - 2 = 1 per chunk */
    float l1[6] = {0, 1, 2, 3, 4, 5}, l2[6] = {-1, -2, 7, 0.25f, 0, 1};
    assert_int_equal(nb_kldbase_write(w, l1, 4), NB_OK);
    assert_true(nb_file_exists(tmp) && !nb_file_exists(path));
    assert_int_equal(nb_kldbase_write(w, l2, 2), NB_OK);
    assert_int_equal(nb_kldbase_write(w, l2, 2), NB_ERR_INTERNAL); /* more than announced */
    assert_int_equal(nb_kldbase_finish(w), NB_OK);
    assert_true(nb_file_exists(path) && !nb_file_exists(tmp));

    nb_kldbase_reader *r;
    assert_int_equal(nb_kldbase_open(path, &r), NB_OK);
    const nb_kldbase_hdr *g = nb_kldbase_header(r);
    assert_int_equal(g->n_vocab, 6);
    assert_int_equal(g->ctx, 4);
    assert_int_equal(g->k, 6);
    assert_int_equal(g->n_positions, 2);
    assert_string_equal(g->model_path, "/m/base.gguf");
    assert_string_equal(g->model_type, "gguf");
    assert_memory_equal(nb_kldbase_tokens(r), toks, sizeof toks);
    nb_kldbase_pos p;
    assert_int_equal(nb_kldbase_read(r, &p), NB_OK);
    assert_memory_equal(p.logits, l1, sizeof l1);
    assert_int_equal(nb_kldbase_read(r, &p), NB_OK);
    assert_memory_equal(p.logits, l2, sizeof l2);
    assert_int_equal(nb_kldbase_read(r, &p), NB_ERR_RANGE);
    nb_kldbase_close(r);

    /* truncated by one byte, then a wrong magic */
    char *data;
    size_t len;
    assert_int_equal(nb_read_file(path, 1 << 20, &data, &len), NB_OK);
    assert_int_equal(nb_write_file(path, data, len - 1), NB_OK);
    assert_int_equal(nb_kldbase_open(path, &r), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "header implies"));
    data[0] = 'X';
    assert_int_equal(nb_write_file(path, data, len), NB_OK);
    assert_int_equal(nb_kldbase_open(path, &r), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "NBKLBASE"));
    free(data);

    /* top-K mode: records of 16 + 8K bytes; an abort leaves no file */
    remove(path);
    h.mode = NB_KLDBASE_TOPK;
    h.k = 2;
    assert_int_equal(nb_kldbase_create(path, &h, toks, &w), NB_OK);
    assert_int_equal(nb_kldbase_write(w, l1, 4), NB_OK);
    nb_kldbase_abort(w);
    assert_false(nb_file_exists(tmp) || nb_file_exists(path));
    assert_int_equal(nb_kldbase_create(path, &h, toks, &w), NB_OK);
    assert_int_equal(nb_kldbase_write(w, l1, 4), NB_OK);
    assert_int_equal(nb_kldbase_write(w, l2, 2), NB_OK);
    assert_int_equal(nb_kldbase_finish(w), NB_OK);
    assert_int_equal(nb_kldbase_open(path, &r), NB_OK);
    assert_int_equal(nb_kldbase_read(r, &p), NB_OK);
    double lse = 0;
    for (int i = 0; i < 6; i++) lse += exp(l1[i]);
    lse = log(lse);
    assert_int_equal(p.ids[0], 5);
    assert_int_equal(p.ids[1], 4);
    assert_true(fabs(p.lp[0] - (5 - lse)) < 1e-6 && fabs(p.nll - (lse - 4)) < 1e-12);
    assert_true(fabs(p.tail - (exp(0 - lse) + exp(1 - lse) + exp(2 - lse) + exp(3 - lse))) < 1e-12);
    nb_kldbase_close(r);
}

/* ---- whole runs ------------------------------------------------------------ */

typedef struct fixture {
    char model[4096];
    char *text;
    size_t len;
} fixture;

static bool load(fixture *f) {
    const char *p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) return false;
    snprintf(f->model, sizeof f->model, "%s", p);
    const char *tp = nb_test_shared("reference/aidreams-sample.txt");
    if (!tp) return false;
    assert_int_equal(nb_read_file(tp, 1 << 20, &f->text, &f->len), NB_OK);
    return true;
}

static nb_session *open_s(const char *model, nb_kv_dtype kv) {
    nb_session_params sp = {.model_path = model, .n_threads = 2, .n_ctx = 128, .n_batch = 128, .kv_dtype = kv};
    nb_session *s;
    assert_int_equal(nb_session_open(&sp, &s), NB_OK);
    return s;
}

static void test_self(void **state) {
    (void)state;
    fixture f;
    if (!load(&f)) { skip(); return; }
    nb_session *a = open_s(f.model, NB_KV_AUTO), *b = open_s(f.model, NB_KV_AUTO);
    nb_tokclass_set cs;
    assert_int_equal(nb_tokclass_init(&cs), NB_OK);
    nb_kld_opts o = {.n_ctx = 128, .max_chunks = 4, .classes = &cs};
    nb_kld_report *r = calloc(1, sizeof *r);
    assert_int_equal(nb_kld_run(a, b, f.text, f.len, &o, r, NULL, NULL), NB_OK);
    assert_int_equal(r->all.n, 4 * 63);
    assert_true(r->all.kld_mean == 0 && r->all.kld_max == 0 && r->all.kld_p99 == 0);
    assert_true(r->all.same_top == 1.0);
    assert_true(r->all.ppl_ratio == 1.0);
    assert_int_equal(r->worst, -1);
    for (int c = 0; c < r->n_classes; c++)
        if (r->cls[c].n) assert_true(r->cls[c].kld_mean == 0 && r->cls[c].top1 == 1.0);
    free(r);
    nb_tokclass_free(&cs);
    nb_session_free(a);
    nb_session_free(b);
    free(f.text);
}

static void test_partition_and_file(void **state) {
    (void)state;
    fixture f;
    if (!load(&f)) { skip(); return; }
    nb_session *a = open_s(f.model, NB_KV_AUTO), *b = open_s(f.model, NB_KV_INT8);
    nb_tokclass_set cs;
    assert_int_equal(nb_tokclass_init(&cs), NB_OK);
    assert_int_equal(nb_tokclass_add(&cs, "vowel=[aeiouAEIOU]"), NB_OK);
    assert_int_equal(nb_tokclass_add(&cs, "novowel=^[^aeiouAEIOU]*$"), NB_OK);
    char save[512], save_k[512];
    snprintf(save, sizeof save, "%s/aid.nbkl", nb_test_tmpdir());
    snprintf(save_k, sizeof save_k, "%s/aid16.nbkl", nb_test_tmpdir());
    nb_kld_opts o = {.n_ctx = 128, .max_chunks = 6, .classes = &cs, .save_base = save};
    nb_kld_report *r = calloc(1, sizeof *r), *r2 = calloc(1, sizeof *r2), *r3 = calloc(1, sizeof *r3);
    assert_int_equal(nb_kld_run(a, b, f.text, f.len, &o, r, NULL, NULL), NB_OK);
    fprintf(stderr, "  aidreams vs its int8-KV self: n %lld, KLD mean %.3g, p99 %.3g, top-1 %.4f\n",
            (long long)r->all.n, r->all.kld_mean, r->all.kld_p99, r->all.same_top);
    assert_true(r->all.kld_mean > 0);
    assert_true(r->all.kld_median <= r->all.kld_p90 && r->all.kld_p90 <= r->all.kld_p99 &&
                r->all.kld_p99 <= r->all.kld_max);
    /* the partition (classes 5 and 6) sums back to the overall mean */
    assert_int_equal(r->cls[5].n + r->cls[6].n, r->all.n);
    double sum = r->cls[5].kld_mean * (double)r->cls[5].n + r->cls[6].kld_mean * (double)r->cls[6].n;
    assert_true(fabs(sum / (double)r->all.n - r->all.kld_mean) < 1e-12 * (1 + r->all.kld_mean));
    double same = r->cls[5].top1 * (double)r->cls[5].n + r->cls[6].top1 * (double)r->cls[6].n;
    assert_true(fabs(same / (double)r->all.n - r->all.same_top) < 1e-12);
    /* every position is in at least one built-in class */
    int64_t built = 0;
    for (int c = 0; c < NB_TOKCLASS_BUILTIN; c++) built += r->cls[c].n;
    assert_true(built >= r->all.n);
    assert_true(r->worst >= 0);

    /* the saved full baseline gives the same numbers, exactly */
    nb_kld_opts o2 = {.n_ctx = 0, .classes = &cs, .base_logits = save};
    assert_int_equal(nb_kld_run(NULL, b, f.text, f.len, &o2, r2, NULL, NULL), NB_OK);
    assert_int_equal(r2->all.n, r->all.n);
    assert_true(r2->all.kld_mean == r->all.kld_mean && r2->all.kld_max == r->all.kld_max);
    assert_true(r2->all.kld_median == r->all.kld_median && r2->all.kld_p99 == r->all.kld_p99);
    assert_true(r2->all.same_top == r->all.same_top && r2->all.ppl_base == r->all.ppl_base);
    assert_true(r2->all.ppl_test == r->all.ppl_test);
    assert_string_equal(r2->base.sha256, r->base.sha256);
    for (int c = 0; c < r->n_classes; c++) assert_true(r2->cls[c].kld_mean == r->cls[c].kld_mean);

    /* a top-16 baseline: top-1 and PPLs exact (to float), the KLD a lower bound */
    nb_kld_opts o3 = {.n_ctx = 128, .max_chunks = 6, .classes = &cs, .save_base = save_k, .save_topk = 16};
    assert_int_equal(nb_kld_run(a, NULL, f.text, f.len, &o3, r3, NULL, NULL), NB_OK);
    nb_kld_opts o4 = {.n_ctx = 128, .classes = &cs, .base_logits = save_k};
    assert_int_equal(nb_kld_run(NULL, b, f.text, f.len, &o4, r3, NULL, NULL), NB_OK);
    fprintf(stderr, "  top-16 baseline: KLD %.4g (exact %.4g), tail mass %.4f\n", r3->all.kld_mean, r->all.kld_mean,
            r3->base_tail_mean);
    assert_int_equal(r3->base_topk, 16);
    assert_true(r3->all.same_top == r->all.same_top);
    assert_true(fabs(r3->all.ppl_base / r->all.ppl_base - 1) < 1e-12);
    assert_true(r3->all.ppl_test == r->all.ppl_test);
    assert_true(r3->all.kld_mean <= r->all.kld_mean * (1 + 1e-6));
    assert_true(r3->base_tail_mean > 0 && r3->base_tail_mean < 1);

    /* refusals: another text, another -c */
    assert_int_equal(nb_kld_run(NULL, b, f.text, f.len - 1, &o2, r2, NULL, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "different text"));
    nb_kld_opts o5 = {.n_ctx = 64, .classes = &cs, .base_logits = save};
    assert_int_equal(nb_kld_run(NULL, b, f.text, f.len, &o5, r2, NULL, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "-c 128"));
    free(r);
    free(r2);
    free(r3);
    nb_tokclass_free(&cs);
    nb_session_free(a);
    nb_session_free(b);
    free(f.text);
}

static void test_vocab_mismatch(void **state) {
    (void)state;
    fixture f;
    if (!load(&f)) { skip(); return; }
    /* a model with the built-in 512-token BPE vocabulary: same size as aidreams', other texts */
    char other[512];
    snprintf(other, sizeof other, "%s/bpe512.gguf", nb_test_tmpdir());
    nb_synth_params sp;
    nb_synth_defaults(&sp, NB_ARCH_LLAMA);
    sp.n_embd = 64;
    sp.n_layer = 1;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 128;
    sp.n_ctx = 256;
    assert_int_equal(nb_synth_write(&sp, other), NB_OK);
    nb_session *a = open_s(f.model, NB_KV_AUTO), *b = open_s(other, NB_KV_AUTO);
    assert_int_equal(a->n_vocab, b->n_vocab);
    assert_int_equal(nb_kld_vocab_check(a, b), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "vocabulary mismatch: token"));
    nb_tokclass_set cs;
    assert_int_equal(nb_tokclass_init(&cs), NB_OK);
    nb_kld_opts o = {.n_ctx = 128, .classes = &cs};
    nb_kld_report *r = calloc(1, sizeof *r);
    assert_int_equal(nb_kld_run(a, b, f.text, f.len, &o, r, NULL, NULL), NB_ERR_INVALID);
    /* and a baseline file of aidreams refuses the other model */
    char save[512];
    snprintf(save, sizeof save, "%s/aid2.nbkl", nb_test_tmpdir());
    nb_kld_opts o2 = {.n_ctx = 128, .max_chunks = 1, .classes = &cs, .save_base = save};
    assert_int_equal(nb_kld_run(a, NULL, f.text, f.len, &o2, r, NULL, NULL), NB_OK);
    nb_kld_opts o3 = {.classes = &cs, .base_logits = save};
    assert_int_equal(nb_kld_run(NULL, b, f.text, f.len, &o3, r, NULL, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "different token texts"));
    free(r);
    nb_tokclass_free(&cs);
    nb_session_free(a);
    nb_session_free(b);
    free(f.text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_partition_and_file),
        cmocka_unit_test(test_vocab_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
