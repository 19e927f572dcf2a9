/* The per-step cost of constrained decoding's vocabulary mask
 * (engine/grammar.h) on a real vocabulary: random token walks under a JSON
 * Schema, json_object and a regex, timing every nb_grammar_mask call.
 * Compare the median with a decode step of the same model
 * (bench/grammar.sh prints the ratio). Not built by default:
 *   cc -O2 -Iinclude -Isrc bench/bench_grammar.c build/libnibble.a -ljansson -lpcre2-8 -lm -lpthread -o bench_grammar
 *   ./bench_grammar ../shared/vocab/ggml-vocab-llama-spm.gguf */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/grammar.h"
#include "tokenizer/tokenizer.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static unsigned long long rs = 88172645463325252ull;
static unsigned rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (unsigned)rs;
}

static void run(const char *what, nb_grammar *g, nb_vtrie *v, nb_tokenizer *tk, int walks, int budget) {
    int32_t nv = nb_tokenizer_n_vocab(tk), eos = nb_tokenizer_eos(tk);
    uint8_t *al = malloc((size_t)nv);
    double *t = malloc(sizeof(double) * (size_t)(walks * budget));
    int n = 0;
    for (int w = 0; w < walks; w++) {
        nb_gmatch *m;
        if (nb_gmatch_create(g, &m) != NB_OK) exit(1);
        for (int left = budget; left > 0 && !nb_gmatch_closed(m); left--) {
            double t0 = now();
            int32_t k = nb_grammar_mask(v, m, left, &eos, 1, al, nv);
            t[n++] = now() - t0;
            if (k <= 0) break;
            int32_t pick = (int32_t)(rnd() % (unsigned)k), id = -1;
            for (int32_t i = 0; i < nv; i++)
                if (al[i] && pick-- == 0) {
                    id = i;
                    break;
                }
            if (id == eos) break;
            size_t l;
            const char *p = nb_token_piece_ref(tk, id, false, &l);
            nb_gmatch_feed(m, p, l);
        }
        nb_gmatch_free(m);
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("%-12s steps %5d  mask median %7.3f ms  p90 %7.3f ms  max %7.3f ms\n", what, n, 1e3 * t[n / 2],
           1e3 * t[n * 9 / 10], 1e3 * t[n - 1]);
    free(t);
    free(al);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_grammar MODEL_OR_VOCAB.gguf [walks]\n");
        return 2;
    }
    int walks = argc > 2 ? atoi(argv[2]) : 20;
    nb_tokenizer *tk;
    if (nb_tokenizer_load(argv[1], NULL, &tk) != NB_OK) {
        fprintf(stderr, "bench_grammar: %s\n", nb_errmsg());
        return 1;
    }
    double t0 = now();
    nb_vtrie *v;
    if (nb_vtrie_create(tk, &v) != NB_OK) return 1;
    printf("vocabulary %d tokens, trie built in %.1f ms (once per engine)\n", nb_tokenizer_n_vocab(tk), 1e3 * (now() - t0));
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},\"email\":{\"type\":\"string\","
                         "\"pattern\":\"^[a-z]{1,12}@[a-z]{1,12}\\\\.com$\"},\"tags\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"string\"},\"maxItems\":4}},\"required\":[\"name\",\"age\",\"email\",\"tags\"],"
                         "\"additionalProperties\":false}";
    nb_grammar *g;
    if (nb_grammar_json_schema(schema, strlen(schema), &g) != NB_OK) return 1;
    run("json_schema", g, v, tk, walks, 200);
    nb_grammar_free(g);
    if (nb_grammar_json_object(&g) != NB_OK) return 1;
    run("json_object", g, v, tk, walks, 200);
    nb_grammar_free(g);
    if (nb_grammar_regex("[0-9]{4}-[0-9]{2}-[0-9]{2}", &g) != NB_OK) return 1;
    run("regex", g, v, tk, walks, 16);
    nb_grammar_free(g);
    nb_vtrie_free(v);
    nb_tokenizer_free(tk);
    return 0;
}
