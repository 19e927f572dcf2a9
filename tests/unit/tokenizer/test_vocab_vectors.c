/* Tokenizer test vectors from llama.cpp (shared/vocab/ggml-vocab-*.gguf with
 * their .inp / .out pairs): every case must tokenize (no BOS, no special
 * parsing) to exactly the expected ids (the original HF tokenizer's output),
 * and decoding must give back the input where the tokenizer is lossless.
 *
 * Round trip: SPM decoding drops the one leading space the tokenizer added
 * (the input's own spaces are kept) and byte-level BPE keeps every byte, so
 * all 46 cases of the three files decode back exactly (all are valid UTF-8;
 * none contains text that would turn into <unk>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

#define TERM "\n__ggml_vocab_test__\n"

typedef struct {
    char *inp, *out;
    size_t inp_len, out_len;
    const char *cases[64];
    size_t case_len[64];
    int n;
    char *lines[64];
    int n_lines;
} vectors;

static void load_vectors(const char *gguf, vectors *vv) {
    char p[4200];
    memset(vv, 0, sizeof *vv);
    snprintf(p, sizeof p, "%s.inp", gguf);
    assert_int_equal(nb_read_file(p, 1 << 20, &vv->inp, &vv->inp_len), NB_OK);
    snprintf(p, sizeof p, "%s.out", gguf);
    assert_int_equal(nb_read_file(p, 1 << 20, &vv->out, &vv->out_len), NB_OK);
    const char *s = vv->inp, *end = vv->inp + vv->inp_len;
    size_t tl = strlen(TERM);
    while (s < end) {
        const char *m = memmem(s, (size_t)(end - s), TERM, tl);
        if (!m) break;
        assert_true(vv->n < 64);
        vv->cases[vv->n] = s;
        vv->case_len[vv->n] = (size_t)(m - s);
        vv->n++;
        s = m + tl;
    }
    /* split .out into lines, keeping empty ones */
    char *q = vv->out;
    while (q < vv->out + vv->out_len) {
        char *nl = strchr(q, '\n');
        if (nl) *nl = 0;
        assert_true(vv->n_lines < 64);
        vv->lines[vv->n_lines++] = q;
        if (!nl) break;
        q = nl + 1;
    }
}

static void parse_ids(const char *line, int32_t *ids, size_t *n) {
    *n = 0;
    const char *p = line;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *e;
        long v = strtol(p, &e, 10);
        assert_true(e != p);
        ids[(*n)++] = (int32_t)v;
        p = e;
    }
}

static void check_file(const char *rel, int *n_cases) {
    const char *path = nb_test_shared(rel);
    if (!path) {
        skip();
        return;
    }
    char gguf[4096];
    snprintf(gguf, sizeof gguf, "%s", path);
    nb_tokenizer *t;
    nb_status st = nb_tokenizer_load(gguf, NULL, &t);
    if (st != NB_OK) fprintf(stderr, "%s: %s\n", gguf, nb_errmsg());
    assert_int_equal(st, NB_OK);
    vectors vv;
    load_vectors(gguf, &vv);
    assert_int_equal(vv.n, 46);
    assert_true(vv.n_lines >= vv.n);
    int bad = 0;
    static int32_t want[4096];
    for (int i = 0; i < vv.n; i++) {
        size_t nw;
        parse_ids(vv.lines[i], want, &nw);
        int32_t *ids;
        size_t n;
        assert_int_equal(nb_tokenize(t, vv.cases[i], vv.case_len[i], false, false, &ids, &n), NB_OK);
        bool same = n == nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
        if (!same) {
            bad++;
            fprintf(stderr, "%s case %d '%.*s':\n  want:", rel, i, (int)vv.case_len[i], vv.cases[i]);
            for (size_t k = 0; k < nw; k++) fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n  got: ");
            for (size_t k = 0; k < n; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n");
        }
        /* round trip */
        char *text;
        size_t tl;
        assert_int_equal(nb_detokenize(t, ids, n, false, &text, &tl), NB_OK);
        if (tl != vv.case_len[i] || memcmp(text, vv.cases[i], tl)) {
            bad++;
            fprintf(stderr, "%s case %d: decode gives '%.*s', want '%.*s'\n", rel, i, (int)tl, text,
                    (int)vv.case_len[i], vv.cases[i]);
        }
        free(text);
        free(ids);
    }
    *n_cases = vv.n;
    free(vv.inp);
    free(vv.out);
    nb_tokenizer_free(t);
    assert_int_equal(bad, 0);
}

static void test_llama_spm(void **state) {
    (void)state;
    int n = 0;
    check_file("vocab/ggml-vocab-llama-spm.gguf", &n);
}

static void test_gpt2(void **state) {
    (void)state;
    int n = 0;
    check_file("vocab/ggml-vocab-gpt-2.gguf", &n);
}

static void test_deepseek_llm(void **state) {
    (void)state;
    int n = 0;
    check_file("vocab/ggml-vocab-deepseek-llm.gguf", &n);
}

/* Not a timed assertion: prints how long 100 KB takes with the 100k vocab
 * (the docs' performance note), and checks the result decodes back. */
static void test_large_input(void **state) {
    (void)state;
    const char *path = nb_test_shared("vocab/ggml-vocab-deepseek-llm.gguf");
    if (!path) {
        skip();
        return;
    }
    nb_tokenizer *t;
    assert_int_equal(nb_tokenizer_load(path, NULL, &t), NB_OK);
    const char *unit = "The quick brown fox jumps over the lazy dog 1234567. \xe4\xbd\xa0\xe5\xa5\xbd, world!\n\t  ";
    size_t ul = strlen(unit), total = 100 * 1024;
    char *big = malloc(total + ul);
    size_t o = 0;
    while (o < total) {
        memcpy(big + o, unit, ul);
        o += ul;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int32_t *ids;
    size_t n;
    assert_int_equal(nb_tokenize(t, big, o, false, false, &ids, &n), NB_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "100 KB with the %d-token vocab: %zu tokens in %.3f s\n", nb_tokenizer_n_vocab(t), n,
            (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    char *text;
    size_t tl;
    assert_int_equal(nb_detokenize(t, ids, n, false, &text, &tl), NB_OK);
    assert_int_equal(tl, o);
    assert_memory_equal(text, big, o);
    free(text);
    free(ids);
    free(big);
    nb_tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_deepseek_llm),
        cmocka_unit_test(test_large_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
