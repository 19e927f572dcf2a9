/* llama2.c checkpoints: hyper-parameters from the shared models' README,
 * every tensor equal bit for bit to llama.cpp's conversion of the same model
 * (aidreams260K.gguf), offsets checked against the file bytes, version-1
 * files, and malformed headers / sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "formats/gguf.h"
#include "formats/source.h"

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 64);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static const char *write_tmp(const char *name, const void *b, size_t n) {
    static char p[8][512];
    static int k;
    char *path = p[k++ & 7];
    snprintf(path, 512, "%s/%s", nb_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    return path;
}

static void test_aidreams_hparams(void **state) {
    (void)state;
    const char *path = nb_test_shared("models/aidreams260K.bin");
    if (!path) skip();
    nb_source s;
    assert_int_equal(nb_source_open_llama2c(path, &s), NB_OK);
    /* README: dim=64, hidden_dim=172, n_layers=4, n_heads=4, n_kv_heads=4,
     * vocab_size=512 (shared), seq_len=128, head_dim 16, eps 1e-5, theta 1e4 */
    assert_string_equal(s.format, "llama2c");
    assert_int_equal(s.hp.arch, NB_ARCH_LLAMA);
    assert_int_equal(s.hp.n_embd, 64);
    assert_int_equal(s.hp.n_ff, 172);
    assert_int_equal(s.hp.n_layer, 4);
    assert_int_equal(s.hp.n_head, 4);
    assert_int_equal(s.hp.n_head_kv, 4);
    assert_int_equal(s.hp.n_vocab, 512);
    assert_int_equal(s.hp.n_ctx_train, 128);
    assert_int_equal(s.hp.head_dim, 16);
    assert_int_equal(s.hp.rope_dim, 16);
    assert_true(s.hp.norm_eps == 1e-5f);
    assert_true(s.hp.rope_theta == 10000.0f);
    assert_int_equal(s.hp.rope_style, NB_ROPE_NORM);
    assert_true(s.hp.tied_embeddings);
    assert_false(s.hp.qkv_bias);
    assert_int_equal(s.n_tensors, 2 + 9 * 4);
    assert_null(nb_source_find(&s, "output.weight"));
    nb_source_close(&s);
    /* through format detection as well */
    assert_int_equal(nb_source_open(path, &s), NB_OK);
    assert_string_equal(s.format, "llama2c");
    nb_source_close(&s);
}

static void test_stories_offsets(void **state) {
    (void)state;
    const char *path = nb_test_shared("models/stories260K.bin");
    if (!path) skip();
    size_t n;
    uint8_t *file = slurp(path, &n);
    nb_source s;
    assert_int_equal(nb_source_open_llama2c(path, &s), NB_OK);
    /* README: dim=64, hidden=172, layers=5, heads=8, kv=4, vocab 512 shared, seq 512 */
    assert_int_equal(s.hp.n_layer, 5);
    assert_int_equal(s.hp.n_head, 8);
    assert_int_equal(s.hp.n_head_kv, 4);
    assert_int_equal(s.hp.head_dim, 8);
    assert_int_equal(s.hp.n_ctx_train, 512);
    assert_true(s.hp.tied_embeddings);
    /* Offsets computed here from the v0 layout, compared with the file bytes. */
    const uint64_t D = 64, F = 172, L = 5, V = 512, KVD = 4 * 8;
    struct {
        const char *name;
        uint64_t off_floats, ne0, ne1;
    } want[] = {
        {"token_embd.weight", 0, D, V},
        {"blk.0.attn_norm.weight", V * D, D, 1},
        {"blk.3.attn_q.weight", V * D + L * D + 3 * D * D, D, D},
        {"blk.2.attn_k.weight", V * D + L * D + L * D * D + 2 * KVD * D, D, KVD},
        {"blk.4.attn_v.weight", V * D + L * D + L * D * D + L * KVD * D + 4 * KVD * D, D, KVD},
        {"blk.1.attn_output.weight", V * D + L * D + L * D * D + 2 * L * KVD * D + 1 * D * D, D, D},
        {"blk.4.ffn_norm.weight", V * D + L * D + 2 * L * D * D + 2 * L * KVD * D + 4 * D, D, 1},
        {"blk.1.ffn_gate.weight", V * D + 2 * L * D + 2 * L * D * D + 2 * L * KVD * D + 1 * F * D, D, F},
        {"blk.2.ffn_down.weight", V * D + 2 * L * D + 2 * L * D * D + 2 * L * KVD * D + L * F * D + 2 * F * D, F, D},
        {"blk.0.ffn_up.weight", V * D + 2 * L * D + 2 * L * D * D + 2 * L * KVD * D + 2 * L * F * D, D, F},
        {"output_norm.weight", V * D + 2 * L * D + 2 * L * D * D + 2 * L * KVD * D + 3 * L * F * D, D, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const nb_tensor *t = nb_source_find(&s, want[i].name);
        if (!t) fail_msg("%s missing", want[i].name);
        assert_int_equal(t->type, NB_F32);
        assert_int_equal(t->ne[0], want[i].ne0);
        assert_int_equal(t->ne[1], want[i].ne1);
        assert_int_equal(t->nbytes, want[i].ne0 * want[i].ne1 * 4);
        if (memcmp(t->data, file + 28 + 4 * want[i].off_floats, t->nbytes)) fail_msg("%s: bytes differ", want[i].name);
    }
    /* file ends with freq_cis (2 * seq * hd/2) after output_norm */
    assert_int_equal(n, 28 + 4 * (want[10].off_floats + D + 2 * 512 * 4));
    nb_source_close(&s);
    free(file);
}

/* The finding the lead asked for: llama.cpp's llama2c converter copies
 * Q/K rows as they are (no permutation), so GGUF and .bin agree bit for bit. */
static void test_matches_gguf(void **state) {
    (void)state;
    const char *bin = nb_test_shared("models/aidreams260K.bin");
    const char *gg = nb_test_shared("models/aidreams260K.gguf");
    if (!bin || !gg) skip();
    nb_source s;
    assert_int_equal(nb_source_open_llama2c(bin, &s), NB_OK);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(gg, &g), NB_OK);
    /* GGUF has an explicit output.weight copy of the embedding */
    assert_int_equal(nb_gguf_n_tensors(g), s.n_tensors + 1);
    for (int64_t i = 0; i < s.n_tensors; i++) {
        const nb_tensor *a = &s.tensors[i];
        const nb_tensor *b = nb_gguf_find_tensor(g, a->name);
        if (!b) fail_msg("%s not in the GGUF", a->name);
        assert_int_equal(b->type, NB_F32);
        assert_int_equal(a->n_dims, b->n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(a->ne[d], b->ne[d]);
        assert_int_equal(a->nbytes, b->nbytes);
        if (memcmp(a->data, b->data, a->nbytes)) fail_msg("%s differs from the GGUF", a->name);
    }
    const nb_tensor *out = nb_gguf_find_tensor(g, "output.weight");
    const nb_tensor *emb = nb_source_find(&s, "token_embd.weight");
    assert_non_null(out);
    assert_int_equal(out->nbytes, emb->nbytes);
    assert_memory_equal(out->data, emb->data, emb->nbytes);
    nb_gguf_close(g);
    nb_source_close(&s);
}

/* Rewrites the v0 aidreams file in the version-1 layout and reads it back. */
static void test_version1(void **state) {
    (void)state;
    const char *path = nb_test_shared("models/aidreams260K.bin");
    if (!path) skip();
    size_t n;
    uint8_t *v0 = slurp(path, &n);
    const size_t D = 64, F = 172, L = 4, V = 512, KVD = 64, hs = 16, seq = 128;
    const uint8_t *w = v0 + 28;
    size_t emb = V * D, ra = L * D, wq = L * D * D, wk = L * D * KVD, wv = wk, wo = wq, rf = L * D, w1 = L * F * D;
    size_t o_emb = 0, o_ra = emb, o_wq = o_ra + ra, o_wk = o_wq + wq, o_wv = o_wk + wk, o_wo = o_wv + wv,
           o_rf = o_wo + wo, o_w1 = o_rf + rf, o_w2 = o_w1 + w1, o_w3 = o_w2 + w1, o_fin = o_w3 + w1;
    assert_int_equal(n, 28 + 4 * (o_fin + D + seq * hs));
    size_t total = 256 + 4 * (ra + rf + D + emb + wq + wk + wv + wo + 3 * w1);
    uint8_t *v1 = calloc(1, total + 4 * emb);
    assert_non_null(v1);
    uint32_t magic = 0x616b3432;
    int32_t ver = 1;
    memcpy(v1, &magic, 4);
    memcpy(v1 + 4, &ver, 4);
    memcpy(v1 + 8, v0, 28);
    v1[36] = 1;
    size_t p = 256;
#define PUT(off, cnt) (memcpy(v1 + p, w + 4 * (off), 4 * (cnt)), p += 4 * (cnt))
    PUT(o_ra, ra);
    PUT(o_rf, rf);
    PUT(o_fin, D);
    PUT(o_emb, emb);
    PUT(o_wq, wq);
    PUT(o_wk, wk);
    PUT(o_wv, wv);
    PUT(o_wo, wo);
    PUT(o_w1, w1);
    PUT(o_w2, w1);
    PUT(o_w3, w1);
    assert_int_equal(p, total);
    nb_source a, b;
    assert_int_equal(nb_source_open_llama2c(path, &a), NB_OK);
    assert_int_equal(nb_source_open_llama2c(write_tmp("v1.bin", v1, total), &b), NB_OK);
    assert_int_equal(a.n_tensors, b.n_tensors);
    for (int64_t i = 0; i < a.n_tensors; i++) {
        const nb_tensor *t = nb_source_find(&b, a.tensors[i].name);
        if (!t) fail_msg("v1: %s missing", a.tensors[i].name);
        assert_int_equal(t->nbytes, a.tensors[i].nbytes);
        if (memcmp(t->data, a.tensors[i].data, t->nbytes)) fail_msg("v1: %s differs", t->name);
    }
    nb_source_close(&b);
    /* unshared classifier in v1: flag 0 plus a trailing wcls */
    v1[36] = 0;
    memcpy(v1 + total, w, 4 * emb);
    assert_int_equal(nb_source_open_llama2c(write_tmp("v1u.bin", v1, total + 4 * emb), &b), NB_OK);
    assert_false(b.hp.tied_embeddings);
    const nb_tensor *o = nb_source_find(&b, "output.weight");
    assert_non_null(o);
    assert_memory_equal(o->data, w, 4 * emb);
    nb_source_close(&b);
    /* flag 0 without wcls: size mismatch naming the flag */
    assert_int_equal(nb_source_open_llama2c(write_tmp("v1bad.bin", v1, total), &b), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "shared_classifier"));
    /* version 2 is refused */
    ver = 2;
    memcpy(v1 + 4, &ver, 4);
    assert_int_equal(nb_source_open_llama2c(write_tmp("v2.bin", v1, total), &b), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "version 2"));
    nb_source_close(&a);
    free(v1);
    free(v0);
}

static void expect_bad(const uint8_t *b, size_t n, nb_status st, const char *needle) {
    nb_source s;
    nb_status rc = nb_source_open_llama2c(write_tmp("bad.bin", b, n), &s);
    if (rc != st) fail_msg("status %d, expected %d (%s)", rc, st, nb_errmsg());
    if (!strstr(nb_errmsg(), needle)) fail_msg("message '%s' lacks '%s'", nb_errmsg(), needle);
    assert_null(s.tensors);
}

static void test_malformed(void **state) {
    (void)state;
    const char *path = nb_test_shared("models/aidreams260K.bin");
    if (!path) skip();
    size_t n;
    uint8_t *b = slurp(path, &n);
    uint8_t *m = malloc(n + 64);
    assert_non_null(m);
    int32_t v;
#define SET(idx, val) (memcpy(m, b, n), v = (val), memcpy(m + 4 * (idx), &v, 4))
    memcpy(m, b, n);
    expect_bad(m, n - 4, NB_ERR_FORMAT, "file size");
    memset(m + n, 0, 4);
    expect_bad(m, n + 4, NB_ERR_FORMAT, "file size");
    expect_bad(m, 10, NB_ERR_FORMAT, "28-byte");
    SET(3, 3); /* n_heads 3 does not divide 64 */
    expect_bad(m, n, NB_ERR_FORMAT, "'n_heads'");
    SET(0, -64);
    expect_bad(m, n, NB_ERR_FORMAT, "'dim'");
    SET(4, 8); /* n_kv_heads > n_heads */
    expect_bad(m, n, NB_ERR_FORMAT, "'n_kv_heads'");
    SET(4, 3); /* 3 does not divide 4 (and is in range) */
    expect_bad(m, n, NB_ERR_FORMAT, "'n_kv_heads'");
    SET(5, -512); /* says unshared but there is no wcls */
    expect_bad(m, n, NB_ERR_FORMAT, "vocab_size");
    SET(5, INT32_MIN);
    expect_bad(m, n, NB_ERR_FORMAT, "'vocab_size'");
    SET(6, 0);
    expect_bad(m, n, NB_ERR_FORMAT, "'seq_len'");
    SET(2, 1 << 30);
    expect_bad(m, n, NB_ERR_FORMAT, "'n_layers'");
    SET(1, 1 << 22); /* huge but in range: size mismatch */
    expect_bad(m, n, NB_ERR_FORMAT, "file size");
    SET(0, 65536); /* n_heads 4 divides, size far off */
    expect_bad(m, n, NB_ERR_FORMAT, "file size");
    SET(1, 0x7fffffff);
    expect_bad(m, n, NB_ERR_FORMAT, "'hidden_dim'");
    nb_source s;
    assert_int_equal(nb_source_open_llama2c("/nonexistent/x.bin", &s), NB_ERR_NOT_FOUND);
    free(m);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aidreams_hparams), cmocka_unit_test(test_stories_offsets),
        cmocka_unit_test(test_matches_gguf),     cmocka_unit_test(test_version1),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
