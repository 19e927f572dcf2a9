/* Tokenizer tests against llama.cpp's references and independent facts:
 *   - shared/reference/ JSON files: prompt -> prompt_tokens (BOS per the vocab),
 *     continuation pieces == continuation_text_hex bytes
 *   - llama2.c tokenizer.bin and SentencePiece tokenizer.model give the same
 *     ids as the GGUF vocabularies they came from
 *   - the incremental detokenizer never emits invalid UTF-8
 *   - a tokenizer.json fixture (BPE + Split pre_tokenizer) loads and
 *     tokenizes to ids worked out by hand; unknown pre-tokenizers are refused
 *   - malformed files return errors (the sanitizer build checks for crashes) */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

static nb_tokenizer *load(const char *model, const char *tok) {
    nb_tokenizer *t = NULL;
    nb_status st = nb_tokenizer_load(model, tok, &t);
    if (st != NB_OK) fprintf(stderr, "load %s / %s: %s\n", model ? model : "-", tok ? tok : "-", nb_errmsg());
    assert_int_equal(st, NB_OK);
    return t;
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* ---- reference JSON ----------------------------------------------------------- */

static void test_reference_prompts(void **state) {
    (void)state;
    const char *dir = nb_test_shared("reference");
    if (!dir) { skip(); return; }
    char dpath[4096];
    snprintf(dpath, sizeof dpath, "%s", dir);
    DIR *d = opendir(dpath);
    assert_non_null(d);
    struct dirent *e;
    int n_files = 0, n_cases = 0;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".json")) continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dpath, e->d_name);
        json_error_t err;
        json_t *root = json_load_file(p, 0, &err);
        assert_non_null(root);
        json_t *cases = json_object_get(root, "cases");
        const char *mf = json_string_value(json_object_get(root, "model_file"));
        if (!json_is_array(cases) || !mf) { json_decref(root); continue; } /* e.g. the perplexity file */
        char rel[512];
        snprintf(rel, sizeof rel, "models/%s", mf);
        const char *mp = nb_test_shared(rel);
        assert_non_null(mp);
        nb_tokenizer *t = load(mp, NULL);
        n_files++;
        for (size_t i = 0; i < json_array_size(cases); i++) {
            json_t *c = json_array_get(cases, i);
            const char *prompt = json_string_value(json_object_get(c, "prompt"));
            json_t *want = json_object_get(c, "prompt_tokens");
            int32_t *ids;
            size_t n;
            assert_int_equal(nb_tokenize(t, prompt, strlen(prompt), true, false, &ids, &n), NB_OK);
            if (n != json_array_size(want)) fprintf(stderr, "%s case %zu: %zu tokens, want %zu\n", mf, i, n, json_array_size(want));
            assert_int_equal(n, json_array_size(want));
            for (size_t k = 0; k < n; k++) assert_int_equal(ids[k], json_integer_value(json_array_get(want, k)));
            free(ids);
            /* continuation pieces (control tokens render as nothing) == hex bytes */
            json_t *cont = json_object_get(c, "continuation_tokens");
            const char *hex = json_string_value(json_object_get(c, "continuation_text_hex"));
            size_t hl = strlen(hex);
            char *bytes = malloc(hl / 2 + 1), *got = malloc(json_array_size(cont) * 256 + 1);
            for (size_t k = 0; k < hl / 2; k++) bytes[k] = (char)(hexval(hex[2 * k]) << 4 | hexval(hex[2 * k + 1]));
            size_t o = 0;
            for (size_t k = 0; k < json_array_size(cont); k++)
                o += nb_token_piece(t, (int32_t)json_integer_value(json_array_get(cont, k)), false, got + o, 256);
            assert_int_equal(o, hl / 2);
            assert_memory_equal(got, bytes, o);
            free(bytes);
            free(got);
            n_cases++;
        }
        nb_tokenizer_free(t);
        json_decref(root);
    }
    closedir(d);
    fprintf(stderr, "reference: %d files, %d prompts\n", n_files, n_cases);
    assert_true(n_files >= 7);
}

/* ---- other file formats give the same ids ------------------------------------- */

static void split_cases(char *inp, size_t len, const char **cases, size_t *lens, int *n) {
    const char *term = "\n__ggml_vocab_test__\n";
    size_t tl = strlen(term);
    *n = 0;
    char *s = inp, *end = inp + len;
    while (s < end) {
        char *m = memmem(s, (size_t)(end - s), term, tl);
        if (!m) break;
        cases[*n] = s;
        lens[*n] = (size_t)(m - s);
        (*n)++;
        s = m + tl;
    }
}

static void same_ids(nb_tokenizer *a, nb_tokenizer *b, const char *text, size_t len, bool add_special) {
    int32_t *x, *y;
    size_t nx, ny;
    assert_int_equal(nb_tokenize(a, text, len, add_special, false, &x, &nx), NB_OK);
    assert_int_equal(nb_tokenize(b, text, len, add_special, false, &y, &ny), NB_OK);
    if (nx != ny || memcmp(x, y, nx * sizeof *x)) fprintf(stderr, "differ on '%.*s'\n", (int)len, text);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx * sizeof *x);
    free(x);
    free(y);
}

static void test_llama2_files_match_gguf(void **state) {
    (void)state;
    const char *g = nb_test_shared("vocab/ggml-vocab-llama-spm.gguf");
    if (!g) { skip(); return; }
    char gp[4096], inp_path[4200];
    snprintf(gp, sizeof gp, "%s", g);
    snprintf(inp_path, sizeof inp_path, "%s.inp", g);
    nb_tokenizer *ref = load(gp, NULL);
    const char *mp = nb_test_shared("models/llama2-tokenizer.model");
    assert_non_null(mp);
    nb_tokenizer *pb = load(NULL, mp);
    const char *bp = nb_test_shared("models/llama2-tokenizer.bin");
    assert_non_null(bp);
    nb_tokenizer *bin = load(NULL, bp);
    assert_int_equal(nb_tokenizer_n_vocab(pb), 32000);
    assert_int_equal(nb_tokenizer_n_vocab(bin), 32000);
    char *inp;
    size_t il;
    assert_int_equal(nb_read_file(inp_path, 1 << 20, &inp, &il), NB_OK);
    const char *cases[64];
    size_t lens[64];
    int n;
    split_cases(inp, il, cases, lens, &n);
    assert_int_equal(n, 46);
    for (int i = 0; i < n; i++) {
        same_ids(ref, pb, cases[i], lens[i], false);
        same_ids(ref, bin, cases[i], lens[i], false);
        same_ids(ref, bin, cases[i], lens[i], true);
    }
    free(inp);
    nb_tokenizer_free(ref);
    nb_tokenizer_free(pb);
    nb_tokenizer_free(bin);
}

static void test_aidreams_bin_matches_gguf(void **state) {
    (void)state;
    const char *g = nb_test_shared("models/aidreams260K.gguf");
    if (!g) { skip(); return; }
    char gp[4096];
    snprintf(gp, sizeof gp, "%s", g);
    nb_tokenizer *ref = load(gp, NULL);
    /* the checkpoint path: the tokenizer is found beside it (aidreams260K.tok512.bin) */
    const char *ck = nb_test_shared("models/aidreams260K.bin");
    assert_non_null(ck);
    nb_tokenizer *bin = load(ck, NULL);
    assert_int_equal(nb_tokenizer_n_vocab(bin), 512);
    const char *texts[] = {
        "Once upon a time", "\"Gradients unfold, threads of", "Echoes of weights and", "", " ", "   leading",
        "tabs\tand\nnewlines\n\n", "caf\xc3\xa9 na\xc3\xafve \xe2\x9c\x85 \xf0\x9f\x98\x80 emoji", "<s> not special </s>",
        "1234567890 !!! ???", "Hello, World. The end."};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        same_ids(ref, bin, texts[i], strlen(texts[i]), true);
        same_ids(ref, bin, texts[i], strlen(texts[i]), false);
    }
    /* pieces agree too, and BOS/EOS render as <s> / </s> */
    for (int32_t id = 0; id < 512; id++) {
        char a[64], b[64];
        size_t na = nb_token_piece(ref, id, true, a, sizeof a), nb = nb_token_piece(bin, id, true, b, sizeof b);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
    }
    char p[16];
    assert_int_equal(nb_token_piece(bin, 1, true, p, sizeof p), 3);
    assert_memory_equal(p, "<s>", 3);
    assert_int_equal(nb_token_piece(bin, 1, false, p, sizeof p), 0);
    nb_tokenizer_free(ref);
    nb_tokenizer_free(bin);
}

/* ---- incremental detokenizer ------------------------------------------------- */

static void test_detok_utf8(void **state) {
    (void)state;
    const char *g = nb_test_shared("models/aidreams260K.gguf"); /* 512 tokens: most non-ASCII falls back to bytes */
    if (!g) { skip(); return; }
    nb_tokenizer *t = load(g, NULL);
    const char *text = "Emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
                       "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe2\x9c\x85!";
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenize(t, text, strlen(text), true, false, &ids, &n), NB_OK);
    int n_byte_tokens = 0;
    for (size_t i = 0; i < n; i++) n_byte_tokens += ids[i] >= 3 && ids[i] <= 258;
    assert_true(n_byte_tokens >= 8); /* the test exercises split characters */
    char *whole;
    size_t wl;
    assert_int_equal(nb_detokenize(t, ids, n, false, &whole, &wl), NB_OK);
    assert_int_equal(wl, strlen(text));
    assert_memory_equal(whole, text, wl);
    nb_detok d;
    nb_detok_init(&d, t);
    d.strip_space = true;
    char out[256], acc[1024];
    size_t ao = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = nb_detok_push(&d, ids[i], out, sizeof out);
        assert_true(nb_utf8_valid(out, k));
        memcpy(acc + ao, out, k);
        ao += k;
    }
    size_t k = nb_detok_flush(&d, out, sizeof out);
    assert_int_equal(k, 0);
    assert_int_equal(ao, wl);
    assert_memory_equal(acc, whole, wl);
    /* a dangling lead byte comes out as U+FFFD at flush, never raw */
    nb_detok_init(&d, t);
    int32_t lead = nb_tokenizer_find(t, "<0xF0>", 6);
    assert_true(lead >= 0);
    assert_int_equal(nb_detok_push(&d, lead, out, sizeof out), 0);
    k = nb_detok_flush(&d, out, sizeof out);
    assert_int_equal(k, 3);
    assert_memory_equal(out, "\xef\xbf\xbd", 3);
    free(whole);
    free(ids);
    nb_tokenizer_free(t);
}

/* ---- tokenizer.json fixture ---------------------------------------------------- */

/* A tiny byte-level BPE: the byte alphabet characters used, a few merges,
 * and the qwen2 Split regex (\p{N} single digits). Expected ids by hand:
 * "hello world 42" -> words "hello", " world", " ", "4", "2" (digits split
 * one by one; the space before a digit is its own word);
 * Ġ (U+0120) is the space byte. */
static const char *fixture_json =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":20,\"content\":\"<|endoftext|>\",\"special\":true},"
    "{\"id\":21,\"content\":\"<|im_end|>\",\"special\":true}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"h\":0,\"e\":1,\"l\":2,\"o\":3,\"w\":4,\"r\":5,\"d\":6,\"\\u0120\":7,"
    "\"4\":8,\"2\":9,\"he\":10,\"ll\":11,\"hell\":12,\"hello\":13,\"\\u0120w\":14,\"or\":15,\"\\u0120wor\":16,"
    "\"\\u0120world\":17,\"ld\":18},"
    "\"merges\":[\"h e\",\"l l\",[\"he\",\"ll\"],\"hell o\",\"\\u0120 w\",\"o r\",\"\\u0120w or\",\"l d\",\"\\u0120wor ld\"]}}";

static const char *fixture_config =
    "{\"bos_token\":null,\"eos_token\":\"<|im_end|>\",\"add_bos_token\":false,\"chat_template\":\"{{ messages }}\"}";

static void write_fixture(const char *dir, const char *json, const char *cfg) {
    char p[512];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    assert_int_equal(nb_write_file(p, json, strlen(json)), NB_OK);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (cfg) assert_int_equal(nb_write_file(p, cfg, strlen(cfg)), NB_OK);
    else remove(p);
}

static void test_tokenizer_json_fixture(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/hf", nb_test_tmpdir());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    write_fixture(dir, fixture_json, fixture_config);
    nb_tokenizer *t = load(dir, NULL);
    int32_t *ids;
    size_t n;
    const char *text = "hello world 42";
    assert_int_equal(nb_tokenize(t, text, strlen(text), true, false, &ids, &n), NB_OK);
    const int32_t want[] = {13, 17, 7, 8, 9};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    /* special parsing and EOG from the config / names */
    text = "hello<|im_end|>";
    assert_int_equal(nb_tokenize(t, text, strlen(text), false, true, &ids, &n), NB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 13);
    assert_int_equal(ids[1], 21);
    free(ids);
    assert_int_equal(nb_tokenizer_eos(t), 21);
    assert_true(nb_tokenizer_is_eog(t, 21));
    assert_true(nb_tokenizer_is_eog(t, 20));
    assert_false(nb_tokenizer_is_eog(t, 13));
    assert_string_equal(nb_tokenizer_chat_template(t), "{{ messages }}");
    char piece[16];
    assert_int_equal(nb_token_piece(t, 17, false, piece, sizeof piece), 6);
    assert_memory_equal(piece, " world", 6);
    nb_tokenizer_free(t);

    /* an unknown Split regex is refused, naming the problem */
    char *bad = strdup(fixture_json);
    char *p = strstr(bad, "\\\\p{N}|");
    assert_non_null(p);
    memcpy(p, "\\\\d+   ", 7); /* same length, different regex */
    write_fixture(dir, bad, NULL);
    nb_tokenizer *t2 = NULL;
    assert_int_equal(nb_tokenizer_load(dir, NULL, &t2), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "unknown pre-tokenizer"));
    free(bad);
}

static void test_unknown_pre_name(void **state) {
    (void)state;
    nb_vocab *v;
    assert_int_equal(nb_vocab_create(NB_VOCAB_BPE, &v), NB_OK);
    assert_int_equal(nb_vocab_add_token(v, "a", 1, 0, NB_TOKEN_NORMAL), NB_OK);
    assert_int_equal(nb_vocab_add_token(v, "b", 1, 0, NB_TOKEN_NORMAL), NB_OK);
    assert_int_equal(nb_vocab_add_token(v, "ab", 2, 0, NB_TOKEN_NORMAL), NB_OK);
    assert_int_equal(nb_vocab_add_merge(v, "a", 1, "b", 1), NB_OK);
    assert_int_equal(nb_vocab_set_pre(v, "no-such-pretok"), NB_OK);
    assert_int_equal(nb_vocab_finish(v), NB_OK);
    nb_tokenizer *t = NULL;
    assert_int_equal(nb_tokenizer_create(v, &t), NB_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(nb_errmsg(), "'no-such-pretok'"));
    assert_non_null(strstr(nb_errmsg(), "llama-bpe"));
    assert_non_null(strstr(nb_errmsg(), "deepseek-llm"));
}

/* ---- malformed inputs ------------------------------------------------------------ */

static void test_malformed(void **state) {
    (void)state;
    nb_vocab *v = NULL;
    /* truncated tokenizer.bin: every prefix of a real file fails or parses, never crashes */
    const char *bp = nb_test_shared("models/aidreams260K.tok512.bin");
    if (bp) {
        char *d;
        size_t n;
        assert_int_equal(nb_read_file(bp, 1 << 20, &d, &n), NB_OK);
        assert_int_equal(nb_vocab_from_llama2c((const uint8_t *)d, n, -1, "tok", &v), NB_OK);
        nb_vocab_free(v);
        for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : 97)) {
            nb_status st = nb_vocab_from_llama2c((const uint8_t *)d, cut, -1, "tok", &v);
            if (st == NB_OK) nb_vocab_free(v);
            else assert_null(v);
        }
        assert_int_equal(nb_vocab_from_llama2c((const uint8_t *)d, n - 3, -1, "tok", &v), NB_ERR_FORMAT);
        assert_non_null(strstr(nb_errmsg(), "byte"));
        int32_t huge = 1 << 30;
        memcpy(d + 4 + 4, &huge, 4); /* first record's length */
        assert_int_equal(nb_vocab_from_llama2c((const uint8_t *)d, n, -1, "tok", &v), NB_ERR_FORMAT);
        free(d);
    }
    /* bad protobuf: truncations and byte flips of a real model */
    const char *mp = nb_test_shared("models/llama2-tokenizer.model");
    if (mp) {
        char *d;
        size_t n;
        assert_int_equal(nb_read_file(mp, 1 << 20, &d, &n), NB_OK);
        for (size_t cut = 1; cut < 4000; cut += 7) {
            nb_status st = nb_vocab_from_spm_model((const uint8_t *)d, cut, "m", &v);
            if (st == NB_OK) nb_vocab_free(v);
        }
        uint32_t seed = 1;
        for (int k = 0; k < 200; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % 2000;
            char old = d[at];
            d[at] = (char)(seed >> 3);
            nb_status st = nb_vocab_from_spm_model((const uint8_t *)d, n, "m", &v);
            if (st == NB_OK) nb_vocab_free(v);
            d[at] = old;
        }
        free(d);
    }
    const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    assert_int_equal(nb_vocab_from_spm_model(junk, sizeof junk, "junk", &v), NB_ERR_FORMAT);
    const uint8_t group[] = {0x0b, 0x0c};
    assert_int_equal(nb_vocab_from_spm_model(group, sizeof group, "group", &v), NB_ERR_FORMAT);
    /* tokenizer.json with wrong types */
    const char *bad_json[] = {
        "[]",
        "{\"model\":[]}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":[1,2]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"}}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[17]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":\"1\"}]}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-5}}}",
        "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Whitespace\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":3}}",
        "{\"model\":",
    };
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        nb_status st = nb_vocab_from_hf_json(bad_json[i], strlen(bad_json[i]), NULL, 0, "bad.json", &v);
        if (st == NB_OK) fprintf(stderr, "accepted: %s\n", bad_json[i]);
        assert_int_not_equal(st, NB_OK);
        assert_null(v);
    }
    /* a llama2.c checkpoint with no tokenizer beside it asks for --tokenizer */
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/ck", nb_test_tmpdir());
    snprintf(p, sizeof p, "mkdir -p '%s'", dir);
    assert_int_equal(system(p), 0);
    int32_t hdr[7] = {64, 172, 4, 4, 4, 512, 128};
    snprintf(p, sizeof p, "%s/model.bin", dir);
    assert_int_equal(nb_write_file(p, hdr, sizeof hdr), NB_OK);
    nb_tokenizer *t = NULL;
    assert_int_equal(nb_tokenizer_load(p, NULL, &t), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_errmsg(), "--tokenizer"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_prompts),
        cmocka_unit_test(test_llama2_files_match_gguf),
        cmocka_unit_test(test_aidreams_bin_matches_gguf),
        cmocka_unit_test(test_detok_utf8),
        cmocka_unit_test(test_tokenizer_json_fixture),
        cmocka_unit_test(test_unknown_pre_name),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
