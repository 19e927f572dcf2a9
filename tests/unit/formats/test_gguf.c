/* GGUF reader: the real files in shared/ parse with the documented hyper-
 * parameters, and every kind of corruption gives an error naming the field
 * and byte offset instead of a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/source.h"
#include "testutil.h"

static void test_synth_llama(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/synth-llama-Q4_K_M.gguf");
    if (!p) skip();
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(p, &g), NB_OK);
    const char *arch;
    assert_int_equal(nb_gguf_get_str(g, "general.architecture", &arch), NB_OK);
    assert_string_equal(arch, "llama");
    int64_t v;
    assert_int_equal(nb_gguf_get_int(g, "llama.embedding_length", &v), NB_OK);
    assert_int_equal(v, 256);
    const nb_gguf_value *toks;
    assert_int_equal(nb_gguf_get_arr(g, "tokenizer.ggml.tokens", NB_GGUF_STRING, &toks), NB_OK);
    assert_int_equal(toks->n, 32000);
    assert_string_equal(toks->strs[1], "<s>");
    /* The README's type table: output Q6_K, attn_q Q4_K, blk.2.ffn_down Q6_K */
    assert_int_equal(nb_gguf_find_tensor(g, "output.weight")->type, NB_Q6_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, NB_Q4_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.2.ffn_down.weight")->type, NB_Q6_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, NB_Q4_K);
    /* parameter count 19,400,960 (README) */
    int64_t params = 0;
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) params += nb_tensor_nelem(nb_gguf_tensor(g, i));
    assert_int_equal(params, 19400960);
    /* wrong-type getter names the key and both types */
    assert_int_equal(nb_gguf_get_str(g, "llama.block_count", &arch), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "llama.block_count"));
    assert_int_equal(nb_gguf_get_int(g, "no.such.key", &v), NB_ERR_NOT_FOUND);
    nb_gguf_close(g);
}

static void test_hparams(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/synth-qwen2-F16.gguf");
    if (!p) skip();
    nb_source s;
    assert_int_equal(nb_source_open(p, &s), NB_OK);
    assert_int_equal(s.hp.arch, NB_ARCH_QWEN2);
    assert_int_equal(s.hp.n_head, 8);
    assert_int_equal(s.hp.n_head_kv, 4);
    assert_int_equal(s.hp.n_ff, 704);
    assert_int_equal(s.hp.n_vocab, 50257);
    assert_true(s.hp.tied_embeddings);
    assert_true(s.hp.qkv_bias);
    assert_int_equal(s.hp.rope_style, NB_ROPE_NEOX);
    assert_float_equal(s.hp.rope_theta, 1e6, 1);
    assert_float_equal(s.hp.norm_eps, 1e-6, 1e-9);
    nb_source_close(&s);
    p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) skip();
    assert_int_equal(nb_source_open(p, &s), NB_OK);
    assert_int_equal(s.hp.n_ctx_train, 128);
    assert_int_equal(s.hp.rope_style, NB_ROPE_NORM);
    assert_float_equal(s.hp.rope_theta, 10000, 1e-3);
    assert_false(s.hp.tied_embeddings); /* the converter wrote an explicit output.weight */
    nb_source_close(&s);
}

/* Builds a tiny valid GGUF in memory: 1 kv (u32), 1 F32 tensor [4]. */
static size_t tiny(uint8_t *b) {
    size_t o = 0;
#define PUT(v, n) do { uint64_t t_ = (v); memcpy(b + o, &t_, n); o += n; } while (0)
    memcpy(b, "GGUF", 4); o = 4;
    PUT(3, 4); PUT(1, 8); PUT(1, 8);
    PUT(5, 8); memcpy(b + o, "a.key", 5); o += 5; PUT(4, 4); PUT(7, 4);       /* kv at 24 */
    PUT(1, 8); memcpy(b + o, "t", 1); o += 1; PUT(1, 4); PUT(4, 8); PUT(0, 4); PUT(0, 8);
    while (o % 32) b[o++] = 0;
    for (int i = 0; i < 4; i++) { float f = (float)i; memcpy(b + o, &f, 4); o += 4; }
#undef PUT
    return o;
}

static void expect_err(const uint8_t *b, size_t n, const char *needle) {
    nb_gguf *g = NULL;
    nb_status st = nb_gguf_open_mem(b, n, "bad.gguf", &g);
    if (st == NB_OK) {
        fprintf(stderr, "expected an error containing '%s'\n", needle);
        nb_gguf_close(g);
        fail();
    }
    if (!strstr(nb_errmsg(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", nb_errmsg(), needle);
        fail();
    }
    assert_null(g);
}

static void test_corruptions(void **state) {
    (void)state;
    uint8_t b[256], c[256];
    size_t n = tiny(b);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open_mem(b, n, "ok.gguf", &g), NB_OK);
    assert_int_equal(nb_gguf_n_tensors(g), 1);
    assert_float_equal(((const float *)nb_gguf_tensor(g, 0)->data)[3], 3.0, 0);
    nb_gguf_close(g);

    memcpy(c, b, n); c[0] = 'X'; expect_err(c, n, "magic");
    memcpy(c, b, n); c[4] = 1; expect_err(c, n, "version");
    memcpy(c, b, n); c[15] = 0x10; expect_err(c, n, "tensor count");
    memcpy(c, b, n); c[23] = 0x10; expect_err(c, n, "kv count");
    memcpy(c, b, n); c[24] = 0xff; expect_err(c, n, "metadata key");          /* key length */
    memcpy(c, b, n); c[37] = 99; expect_err(c, n, "value type");               /* kv type */
    memcpy(c, b, n); c[54] = 7; expect_err(c, n, "n_dims");                    /* n_dims */
    memcpy(c, b, n); c[58] = 5; expect_err(c, n, "past the end");              /* dim 4 -> 5 */
    memcpy(c, b, n); c[66] = 77; expect_err(c, n, "type id 77");               /* ggml type */
    memcpy(c, b, n); c[66] = 2; expect_err(c, n, "block size");                /* Q4_0 row of 4 */
    /* the in-memory-only layouts (Q4_0R = 2048, Q8_KP = 2053) are no file type */
    memcpy(c, b, n); c[66] = 0x00; c[67] = 0x08; expect_err(c, n, "type id 2048");
    memcpy(c, b, n); c[66] = 0x05; c[67] = 0x08; expect_err(c, n, "type id 2053");
    memcpy(c, b, n); c[66] = 0x00; c[67] = 0x04; c[68] = 1; expect_err(c, n, "type id 66560"); /* 1024 + 65536 */
    /* nibble's own file types are accepted: W8 (1024) with a row of 4 is refused for its block of 32 */
    memcpy(c, b, n); c[66] = 0x00; c[67] = 0x04; expect_err(c, n, "block size");
    memcpy(c, b, n); c[70] = 3; expect_err(c, n, "alignment");                 /* offset 3 */
    memcpy(c, b, n); memset(c + 58, 0xff, 8); expect_err(c, n, "overflow");    /* huge dim */
    for (size_t cut = 0; cut < n - 16; cut++) expect_err(b, cut, cut < 4 ? "magic" : "byte offset");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synth_llama),
        cmocka_unit_test(test_hparams),
        cmocka_unit_test(test_corruptions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
