/* The per-step cost of constrained decoding's vocabulary mask
 * (engine/grammar.h) on a real vocabulary: random token walks under a JSON
 * Schema, json_object, a regex and a tool call (nb_grammar_tagged), timing
 * every nb_grammar_mask call. Given a model too, it times decode steps of
 * that model at batch 1 (one token per nb_fwd_run, positions 16..80) in the
 * same run and prints each mask's median and p90 (wall clock, and this
 * thread's CPU time, which a busy machine does not inflate) as a share of
 * the decode median (the
 * issue's goal: <= 5% on the TinyLlama-1.1B-shaped model; bench/grammar.sh
 * synthesizes it). Not built by default:
 *   cc -O2 -Iinclude -Isrc -Ibuild bench/bench_grammar.c build/libnb_*.a build/libnb_*.a \
 *      -ljansson -lpcre2-8 -lm -lpthread -o bench_grammar
 *   ./bench_grammar VOCAB_OR_MODEL.gguf [walks] [MODEL.gguf [threads]] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/grammar.h"
#include "model/forward.h"
#include "model/kv.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "bench_util.h"

/* this thread's CPU time: on a shared machine the mask's own cost, without
 * the time slices other processes took in between */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static unsigned long long rs = 88172645463325252ull;
static unsigned rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (unsigned)rs;
}

typedef struct stats {
    double med, p90, cpu_med, cpu_p90;
} stats;

static stats run(const char *what, nb_grammar *g, nb_vtrie *v, nb_tokenizer *tk, int walks, int budget) {
    int32_t nv = nb_tokenizer_n_vocab(tk), eos = nb_tokenizer_eos(tk);
    uint8_t *al = malloc((size_t)nv);
    double *t = malloc(sizeof(double) * (size_t)(walks * budget));
    double *tc = malloc(sizeof(double) * (size_t)(walks * budget));
    int n = 0;
    for (int w = 0; w < walks; w++) {
        nb_gmatch *m;
        if (nb_gmatch_create(g, &m) != NB_OK) exit(1);
        for (int left = budget; left > 0 && !nb_gmatch_closed(m); left--) {
            double t0 = bench_now(), c0 = cpu_now();
            int32_t k = nb_grammar_mask(v, m, left, &eos, 1, al, nv);
            tc[n] = cpu_now() - c0;
            t[n++] = bench_now() - t0;
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
    qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
    qsort(tc, (size_t)n, sizeof *tc, bench_cmp_double);
    printf("%-12s steps %5d  mask median %7.3f ms  p90 %7.3f ms  max %7.3f ms   cpu: median %7.3f ms  p90 %7.3f ms"
           "  max %7.3f ms\n", what, n, 1e3 * t[n / 2], 1e3 * t[n * 9 / 10], 1e3 * t[n - 1], 1e3 * tc[n / 2],
           1e3 * tc[n * 9 / 10], 1e3 * tc[n - 1]);
    stats st = {t[n / 2], t[n * 9 / 10], tc[n / 2], tc[n * 9 / 10]};
    free(t);
    free(tc);
    free(al);
    return st;
}

/* Median wall time of one decode step (batch 1) of the model, -1 on failure. */
static double decode_step(const char *path, int threads) {
    nb_model *m;
    if (nb_model_load(path, &m) != NB_OK) {
        fprintf(stderr, "bench_grammar: %s\n", nb_errmsg());
        return -1;
    }
    enum { BS = 16, WARM = 16, STEPS = 64 };
    int32_t nblk = (WARM + STEPS + BS - 1) / BS + 1, blocks[8];
    for (int32_t i = 0; i < nblk; i++) blocks[i] = i;
    nb_kv_pool kv;
    nb_fwd *f = NULL;
    double med = -1;
    int64_t nv = m->hp.n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    double *t = malloc(STEPS * sizeof *t);
    if (logits && t && nb_kv_pool_init(&kv, &m->hp, BS, nblk) == NB_OK) {
        if (nb_fwd_create(m, &kv, threads, 1, &f) == NB_OK) {
            nb_seq_view sv = {blocks, nblk};
            bool want = true;
            int n = 0;
            for (int32_t p = 0; p < WARM + STEPS; p++) {
                int32_t tok = (int32_t)(rnd() % (unsigned)nv), seq = 0;
                nb_batch b = {.n = 1, .tokens = &tok, .pos = &p, .seq = &seq, .want = &want, .n_seqs = 1, .seqs = &sv};
                double t0 = bench_now();
                if (nb_fwd_run(f, &b, logits) != NB_OK) break;
                if (p >= WARM) t[n++] = bench_now() - t0;
            }
            if (n == STEPS) {
                qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
                med = t[n / 2];
                printf("decode step  (batch 1, %d threads, %s) median %7.2f ms  p90 %7.2f ms  over %d steps\n",
                       nb_fwd_threads(f), nb_fwd_isa(f), 1e3 * med, 1e3 * t[n * 9 / 10], n);
            }
            nb_fwd_free(f);
        }
        nb_kv_pool_free(&kv);
    }
    free(logits);
    free(t);
    nb_model_free(m);
    return med;
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
    double t0 = bench_now();
    nb_vtrie *v;
    if (nb_vtrie_create(tk, &v) != NB_OK) return 1;
    printf("vocabulary %d tokens, trie built in %.1f ms (once per engine)\n", nb_tokenizer_n_vocab(tk), 1e3 * (bench_now() - t0));
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},\"email\":{\"type\":\"string\","
                         "\"pattern\":\"^[a-z]{1,12}@[a-z]{1,12}\\\\.com$\"},\"tags\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"string\"},\"maxItems\":4}},\"required\":[\"name\",\"age\",\"email\",\"tags\"],"
                         "\"additionalProperties\":false}";
    nb_grammar *g;
    stats med[4];
    const char *names[4] = {"json_schema", "json_object", "regex", "tool_call"};
    if (nb_grammar_json_schema(schema, strlen(schema), &g) != NB_OK) return 1;
    med[0] = run(names[0], g, v, tk, walks, 200);
    nb_grammar_free(g);
    if (nb_grammar_json_object(&g) != NB_OK) return 1;
    med[1] = run(names[1], g, v, tk, walks, 200);
    nb_grammar_free(g);
    if (nb_grammar_regex("[0-9]{4}-[0-9]{2}-[0-9]{2}", &g) != NB_OK) return 1;
    med[2] = run(names[2], g, v, tk, walks, 16);
    nb_grammar_free(g);
    /* tool_choice required over two functions, Hermes markup (server/toolcall.c builds the same) */
    const char *pre[] = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
                         "<tool_call>\n{\"name\": \"add\", \"arguments\": "};
    const char *sch[] = {"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":"
                         "[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\",\"unit\"]}",
                         "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
                         "\"integer\"}},\"required\":[\"a\",\"b\"]}"};
    if (nb_grammar_tagged(pre, sch, 2, "}\n</tool_call>", &g) != NB_OK) return 1;
    med[3] = run(names[3], g, v, tk, walks, 200);
    nb_grammar_free(g);
    if (argc > 3) {
        double d = decode_step(argv[3], argc > 4 ? atoi(argv[4]) : 0);
        if (d <= 0) return 1;
        for (int i = 0; i < 4; i++)
            printf("%-12s mask / decode step median: median %5.2f%%  p90 %5.2f%%  (cpu time: median %5.2f%%  p90 "
                   "%5.2f%%; goal <= 5%%)\n", names[i], 100.0 * med[i].med / d, 100.0 * med[i].p90 / d,
                   100.0 * med[i].cpu_med / d, 100.0 * med[i].cpu_p90 / d);
    }
    nb_vtrie_free(v);
    nb_tokenizer_free(tk);
    return 0;
}
