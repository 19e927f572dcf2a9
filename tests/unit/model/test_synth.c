/* Synthetic models: determinism, the keys and tensor shapes llama.cpp
 * expects, weight statistics against the documented recipe, the built-in
 * vocabulary's BPE invariants, --vocab-from copying, the default model. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/half.h"
#include "model/synth.h"

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 512, "%s/%s", nb_test_tmpdir(), name);
    return p;
}

static void small(nb_synth_params *p, nb_arch arch) {
    nb_synth_defaults(p, arch);
    p->n_embd = 64;
    p->n_layer = 2;
    p->n_head = 4;
    p->n_head_kv = 2;
    p->n_ff = 96;
}

static bool same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (nb_read_file(a, 1 << 28, &x, &nx) != NB_OK) return false;
    if (nb_read_file(b, 1 << 28, &y, &ny) != NB_OK) { free(x); return false; }
    bool same = nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

static void test_deterministic(void **state) {
    (void)state;
    nb_synth_params p;
    small(&p, NB_ARCH_LLAMA);
    const char *a = tmp_path("det-a.gguf"), *b = tmp_path("det-b.gguf"), *c = tmp_path("det-c.gguf");
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    assert_int_equal(nb_synth_write(&p, b), NB_OK);
    assert_true(same_file(a, b));
    p.seed = 99;
    assert_int_equal(nb_synth_write(&p, c), NB_OK);
    assert_false(same_file(a, c));
}

static double tensor_value(const nb_tensor *t, int64_t i) {
    const uint8_t *d = t->data;
    if (t->type == NB_F32) { float f; memcpy(&f, d + 4 * i, 4); return f; }
    uint16_t h;
    memcpy(&h, d + 2 * i, 2);
    return t->type == NB_F16 ? nb_fp16_to_fp32(h) : nb_bf16_to_fp32(h);
}

static void stats(const nb_tensor *t, double *mean, double *sd) {
    int64_t n = nb_tensor_nelem(t);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = tensor_value(t, i);
        s += v;
        s2 += v * v;
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void expect_u32(const nb_gguf *g, const char *key, uint32_t want) {
    uint32_t v = 0;
    if (nb_gguf_get_u32(g, key, &v) != NB_OK) fail_msg("%s: %s", key, nb_errmsg());
    assert_int_equal(v, want);
}

static void expect_shape(const nb_gguf *g, const char *name, nb_dtype type, int nd, int64_t ne0, int64_t ne1) {
    const nb_tensor *t = nb_gguf_find_tensor(g, name);
    if (!t) fail_msg("tensor %s missing", name);
    assert_int_equal(t->type, type);
    assert_int_equal(t->n_dims, nd);
    assert_int_equal(t->ne[0], ne0);
    assert_int_equal(t->ne[1], ne1);
}

static void check_model(const char *path, const nb_synth_params *p, int32_t n_vocab) {
    nb_gguf *g;
    if (nb_gguf_open(path, &g) != NB_OK) fail_msg("%s", nb_errmsg());
    const char *arch = p->arch == NB_ARCH_QWEN2 ? "qwen2" : "llama", *s;
    char key[128];
    assert_int_equal(nb_gguf_get_str(g, "general.architecture", &s), NB_OK);
    assert_string_equal(s, arch);
    assert_int_equal(nb_gguf_get_str(g, "general.name", &s), NB_OK);
    assert_string_equal(s, p->name);
#define K(x) (snprintf(key, sizeof key, "%s.%s", arch, x), key)
    expect_u32(g, K("context_length"), (uint32_t)p->n_ctx);
    expect_u32(g, K("embedding_length"), (uint32_t)p->n_embd);
    expect_u32(g, K("block_count"), (uint32_t)p->n_layer);
    expect_u32(g, K("feed_forward_length"), (uint32_t)p->n_ff);
    expect_u32(g, K("attention.head_count"), (uint32_t)p->n_head);
    expect_u32(g, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    expect_u32(g, K("rope.dimension_count"), (uint32_t)(p->n_embd / p->n_head));
    expect_u32(g, K("vocab_size"), (uint32_t)n_vocab);
    double f;
    assert_int_equal(nb_gguf_get_float(g, K("rope.freq_base"), &f), NB_OK);
    assert_true(f == (double)p->rope_theta);
    assert_int_equal(nb_gguf_get_float(g, K("attention.layer_norm_rms_epsilon"), &f), NB_OK);
    assert_true(f == (double)p->norm_eps);
#undef K
    expect_u32(g, "general.file_type", p->wtype == NB_F32 ? 0 : p->wtype == NB_F16 ? 1 : 32);
    assert_non_null(nb_gguf_find(g, "tokenizer.ggml.model"));
    const nb_gguf_value *tok = nb_gguf_find(g, "tokenizer.ggml.tokens");
    assert_non_null(tok);
    assert_int_equal(tok->n, (uint64_t)n_vocab);

    int64_t E = p->n_embd, hd = p->n_embd / p->n_head, KV = hd * p->n_head_kv;
    expect_shape(g, "token_embd.weight", p->wtype, 2, E, n_vocab);
    expect_shape(g, "output_norm.weight", NB_F32, 1, E, 1);
    if (p->tied) assert_null(nb_gguf_find_tensor(g, "output.weight"));
    else expect_shape(g, "output.weight", p->wtype, 2, E, n_vocab);
    int per_block = p->arch == NB_ARCH_QWEN2 ? 12 : 9;
    assert_int_equal(nb_gguf_n_tensors(g), 2 + (p->tied ? 0 : 1) + per_block * p->n_layer);
    for (int l = 0; l < p->n_layer; l++) {
        char n[64];
#define T(x) (snprintf(n, sizeof n, "blk.%d.%s", l, x), n)
        expect_shape(g, T("attn_norm.weight"), NB_F32, 1, E, 1);
        expect_shape(g, T("attn_q.weight"), p->wtype, 2, E, E);
        expect_shape(g, T("attn_k.weight"), p->wtype, 2, E, KV);
        expect_shape(g, T("attn_v.weight"), p->wtype, 2, E, KV);
        expect_shape(g, T("attn_output.weight"), p->wtype, 2, E, E);
        expect_shape(g, T("ffn_norm.weight"), NB_F32, 1, E, 1);
        expect_shape(g, T("ffn_gate.weight"), p->wtype, 2, E, p->n_ff);
        expect_shape(g, T("ffn_up.weight"), p->wtype, 2, E, p->n_ff);
        expect_shape(g, T("ffn_down.weight"), p->wtype, 2, p->n_ff, E);
        if (p->arch == NB_ARCH_QWEN2) {
            expect_shape(g, T("attn_q.bias"), NB_F32, 1, E, 1);
            expect_shape(g, T("attn_k.bias"), NB_F32, 1, KV, 1);
            expect_shape(g, T("attn_v.bias"), NB_F32, 1, KV, 1);
        } else {
            assert_null(nb_gguf_find_tensor(g, T("attn_q.bias")));
        }
        /* norms are exactly 1.0 */
        const nb_tensor *nt = nb_gguf_find_tensor(g, T("ffn_norm.weight"));
        for (int64_t i = 0; i < E; i++) assert_true(tensor_value(nt, i) == 1.0);
#undef T
    }
    /* weight statistics follow the recipe (std within 5%, mean near 0) */
    double mean, sd;
    stats(nb_gguf_find_tensor(g, "token_embd.weight"), &mean, &sd);
    assert_true(fabs(sd / p->std_embd - 1) < 0.05);
    assert_true(fabs(mean) < 0.05 * p->std_embd);
    stats(nb_gguf_find_tensor(g, "blk.0.ffn_up.weight"), &mean, &sd);
    assert_true(fabs(sd / p->std_block - 1) < 0.05);
    if (p->arch == NB_ARCH_QWEN2) {
        stats(nb_gguf_find_tensor(g, "blk.1.attn_q.bias"), &mean, &sd);
        assert_true(fabs(sd / p->std_bias - 1) < 0.25); /* only E samples */
    }
    /* independent streams: two same-shaped tensors differ */
    assert_memory_not_equal(nb_gguf_find_tensor(g, "blk.0.ffn_gate.weight")->data,
                            nb_gguf_find_tensor(g, "blk.0.ffn_up.weight")->data, 64);
    nb_gguf_close(g);
}

static void test_llama_layout(void **state) {
    (void)state;
    nb_synth_params p;
    small(&p, NB_ARCH_LLAMA);
    p.n_ff = 4096; /* enough samples for the statistics */
    p.wtype = NB_F32;
    const char *a = tmp_path("llama.gguf");
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    check_model(a, &p, NB_SYNTH_BUILTIN_VOCAB);
}

static void test_qwen2_layout(void **state) {
    (void)state;
    nb_synth_params p;
    small(&p, NB_ARCH_QWEN2);
    p.n_ff = 4096;
    p.wtype = NB_BF16;
    const char *a = tmp_path("qwen2.gguf");
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    check_model(a, &p, NB_SYNTH_BUILTIN_VOCAB);
    p.tied = false;
    p.wtype = NB_F16;
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    check_model(a, &p, NB_SYNTH_BUILTIN_VOCAB);
}

/* GPT-2 byte-level BPE invariants: 256 byte symbols, every merge "A B" joins
 * two existing tokens into the token created by it, all tokens distinct. */
static void test_builtin_vocab(void **state) {
    (void)state;
    nb_synth_params p;
    small(&p, NB_ARCH_LLAMA);
    const char *a = tmp_path("vocab.gguf");
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(a, &g), NB_OK);
    const char *s;
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.model", &s), NB_OK);
    assert_string_equal(s, "gpt2");
    assert_int_equal(nb_gguf_get_str(g, "tokenizer.ggml.pre", &s), NB_OK);
    assert_string_equal(s, "gpt-2");
    const nb_gguf_value *tok, *merges, *types;
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.tokens", NB_GGUF_STRING, &tok), NB_OK);
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.merges", NB_GGUF_STRING, &merges), NB_OK);
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.token_type", NB_GGUF_I32, &types), NB_OK);
    assert_int_equal(tok->n, 512);
    assert_int_equal(merges->n, 255);
    assert_int_equal(types->n, 512);
    /* GPT-2's byte map: 'A' is itself, space is U+0120, byte 0 is U+0100 */
    assert_string_equal(tok->strs['A'], "A");
    assert_string_equal(tok->strs[' '], "\xc4\xa0");
    assert_string_equal(tok->strs[0], "\xc4\x80");
    assert_string_equal(tok->strs[0xff], "\xc3\xbf");
    assert_string_equal(tok->strs[511], "<|endoftext|>");
    assert_int_equal(((const int32_t *)types->arr)[511], 3);
    assert_int_equal(((const int32_t *)types->arr)[300], 1);
    for (uint64_t i = 0; i < tok->n; i++)
        for (uint64_t j = i + 1; j < tok->n; j++) assert_string_not_equal(tok->strs[i], tok->strs[j]);
    for (uint64_t m = 0; m < merges->n; m++) {
        const char *sp = strchr(merges->strs[m], ' ');
        assert_non_null(sp);
        char left[128], joined[256];
        size_t ll = (size_t)(sp - merges->strs[m]);
        memcpy(left, merges->strs[m], ll);
        left[ll] = 0;
        snprintf(joined, sizeof joined, "%s%s", left, sp + 1);
        bool hl = false, hr = false;
        for (uint64_t i = 0; i < 256 + m; i++) {
            hl |= !strcmp(tok->strs[i], left);
            hr |= !strcmp(tok->strs[i], sp + 1);
        }
        assert_true(hl && hr);
        assert_string_equal(tok->strs[256 + m], joined);
    }
    assert_string_equal(merges->strs[0], "\xc4\xa0 t"); /* "Ġ t" */
    expect_u32(g, "tokenizer.ggml.bos_token_id", 511);
    expect_u32(g, "tokenizer.ggml.eos_token_id", 511);
    bool b = true;
    assert_int_equal(nb_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b), NB_OK);
    assert_false(b);
    nb_gguf_close(g);
}

static bool value_equal(const nb_gguf_value *a, const nb_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case NB_GGUF_STRING: return a->str_len == b->str_len && !memcmp(a->str, b->str, a->str_len);
    case NB_GGUF_ARRAY:
        if (a->arr_type != b->arr_type || a->n != b->n) return false;
        if (a->arr_type == NB_GGUF_STRING) {
            for (uint64_t i = 0; i < a->n; i++)
                if (a->lens[i] != b->lens[i] || memcmp(a->strs[i], b->strs[i], a->lens[i])) return false;
            return true;
        } else {
            size_t es = a->arr_type == NB_GGUF_U8 || a->arr_type == NB_GGUF_I8 || a->arr_type == NB_GGUF_BOOL ? 1
                        : a->arr_type == NB_GGUF_U16 || a->arr_type == NB_GGUF_I16                               ? 2
                        : a->arr_type == NB_GGUF_U64 || a->arr_type == NB_GGUF_I64 || a->arr_type == NB_GGUF_F64 ? 8
                                                                                                                  : 4;
            return !a->n || !memcmp(a->arr, b->arr, (size_t)a->n * es);
        }
    default: return !memcmp(&a->num, &b->num, sizeof a->num);
    }
}

static void test_vocab_from(void **state) {
    (void)state;
    const char *src = nb_test_shared("vocab/ggml-vocab-llama-spm.gguf");
    if (!src) skip();
    nb_synth_params p;
    small(&p, NB_ARCH_LLAMA);
    p.vocab_from = src;
    const char *a = tmp_path("vf.gguf");
    assert_int_equal(nb_synth_write(&p, a), NB_OK);
    check_model(a, &p, 32000);
    nb_gguf *g, *v;
    assert_int_equal(nb_gguf_open(a, &g), NB_OK);
    assert_int_equal(nb_gguf_open(src, &v), NB_OK);
    int copied = 0;
    for (int64_t i = 0; i < nb_gguf_n_kv(v); i++) {
        const char *k = nb_gguf_key(v, i);
        if (strncmp(k, "tokenizer.", 10)) continue;
        const nb_gguf_value *x = nb_gguf_find(g, k);
        if (!x) fail_msg("key %s not copied", k);
        if (!value_equal(x, nb_gguf_kv(v, i))) fail_msg("key %s differs", k);
        copied++;
    }
    assert_true(copied >= 8);
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++) /* and no other tokenizer keys */
        if (!strncmp(nb_gguf_key(g, i), "tokenizer.", 10)) assert_non_null(nb_gguf_find(v, nb_gguf_key(g, i)));
    assert_null(nb_gguf_find(g, "tokenizer.ggml.merges"));
    nb_gguf_close(v);
    nb_gguf_close(g);
    /* a file without a vocabulary is refused, naming it */
    const char *bad = nb_test_shared("models/aidreams260K.bin");
    if (bad) {
        p.vocab_from = bad;
        assert_int_not_equal(nb_synth_write(&p, a), NB_OK);
        assert_non_null(strstr(nb_errmsg(), "aidreams260K.bin"));
    }
}

static void test_validate(void **state) {
    (void)state;
    nb_synth_params p;
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    assert_int_equal(nb_synth_validate(&p), NB_OK);
    p.n_head = 7;
    assert_int_equal(nb_synth_validate(&p), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "heads"));
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    p.n_head_kv = 3;
    assert_int_equal(nb_synth_validate(&p), NB_ERR_INVALID);
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    p.n_layer = 0;
    assert_int_equal(nb_synth_validate(&p), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "n_layer"));
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    p.wtype = NB_Q4_0;
    assert_int_equal(nb_synth_validate(&p), NB_ERR_INVALID);
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    assert_int_not_equal(nb_synth_write(&p, "/nonexistent-dir/x.gguf"), NB_OK);
}

/* The generator's normals equal Box-Muller computed with libm on the same
 * uniforms (to 1e-12), and have the moments of N(0,1). */
static void test_normals(void **state) {
    (void)state;
    enum { N = 200000 };
    double *z = malloc(N * sizeof *z);
    nb_synth_rng r, r2;
    nb_synth_rng_seed(&r, 42, "x");
    r2 = r;
    nb_synth_normals(&r, z, N);
    double s = 0, s2 = 0, s4 = 0, maxerr = 0;
    for (int i = 0; i < N; i += 2) {
        double u1 = (double)((nb_synth_rng_next(&r2) >> 11) + 1) / 9007199254740992.0;
        double u2 = (double)(nb_synth_rng_next(&r2) >> 11) / 9007199254740992.0;
        double rad = sqrt(-2 * log(u1)), th = 2 * M_PI * u2;
        maxerr = fmax(maxerr, fabs(z[i] - rad * cos(th)));
        maxerr = fmax(maxerr, fabs(z[i + 1] - rad * sin(th)));
    }
    for (int i = 0; i < N; i++) {
        s += z[i];
        s2 += z[i] * z[i];
        s4 += z[i] * z[i] * z[i] * z[i];
    }
    assert_true(maxerr < 1e-12);
    assert_true(fabs(s / N) < 0.01);
    assert_true(fabs(s2 / N - 1) < 0.01);
    assert_true(fabs(s4 / N - 3) < 0.06);
    /* different stream names give different sequences */
    nb_synth_rng_seed(&r, 42, "y");
    double y[2];
    nb_synth_normals(&r, y, 2);
    assert_true(y[0] != z[0]);
    free(z);
}

static void test_default_model(void **state) {
    (void)state;
    char cache[600], path[1024], path2[1024];
    snprintf(cache, sizeof cache, "%s/cache-a/nested", nb_test_tmpdir());
    setenv("XDG_CACHE_HOME", cache, 1);
    assert_int_equal(nb_default_model_path(path, sizeof path), NB_OK);
    assert_true(!strncmp(path, cache, strlen(cache)));
    assert_non_null(strstr(path, "/nibble/default-"));
    assert_true(nb_file_exists(path));
    struct stat st1, st2;
    assert_int_equal(stat(path, &st1), 0);
    assert_int_equal(nb_default_model_path(path2, sizeof path2), NB_OK);
    assert_string_equal(path, path2);
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st1.st_ino, st2.st_ino); /* not rewritten */
    nb_synth_params p;
    nb_default_model_params(&p);
    assert_int_equal(p.n_embd, 256);
    assert_int_equal(p.n_head_kv, 4);
    check_model(path, &p, NB_SYNTH_BUILTIN_VOCAB);
    assert_true(st1.st_size < 16 << 20);
    char small_buf[16];
    assert_int_equal(nb_default_model_path(small_buf, sizeof small_buf), NB_ERR_RANGE);
    /* HOME fallback */
    unsetenv("XDG_CACHE_HOME");
    char home[600];
    snprintf(home, sizeof home, "%s/home-b", nb_test_tmpdir());
    setenv("HOME", home, 1);
    assert_int_equal(nb_default_model_path(path, sizeof path), NB_OK);
    assert_true(!strncmp(path, home, strlen(home)));
    assert_non_null(strstr(path, "/.cache/nibble/"));
    assert_true(same_file(path, path2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_llama_layout),
        cmocka_unit_test(test_qwen2_layout),  cmocka_unit_test(test_builtin_vocab),
        cmocka_unit_test(test_vocab_from),    cmocka_unit_test(test_validate),
        cmocka_unit_test(test_normals),       cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
