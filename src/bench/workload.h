/* What the load client sends: prompts from a JSONL file, or synthetic prompts
 * of N[:M] words from a fixed word list (about one token each for English
 * BPE vocabularies; the server's usage.prompt_tokens is recorded beside the
 * requested length so the difference is visible), and the request bodies.
 * Request number i always gets the same prompt and lengths for a given seed,
 * so a baseline and a candidate see the same load. */
#ifndef NB_BENCH_WORKLOAD_H
#define NB_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct nb_bench_item {
    char *prompt;        /* {"prompt": "..."} */
    char *messages_json; /* {"messages": [...]}: the array, serialized */
    int64_t max_tokens;  /* 0 = not given */
} nb_bench_item;

typedef struct nb_bench_workload {
    nb_bench_item *items; /* from --prompts; n_items == 0: synthetic */
    size_t n_items;
    int64_t in_lo, in_hi;   /* synthetic prompt length in words */
    int64_t out_lo, out_hi; /* max_tokens; 0 = not sent (file items may carry their own) */
    uint64_t seed;
    bool chat, ignore_eos;
    double temperature; /* < 0: not sent */
    const char *model;  /* NULL: not sent */
    void *extra;        /* json_t object merged into every body last (nb_bench_workload_set_extra), or NULL */
} nb_bench_workload;

/* Sets the defaults: synthetic 128 words, 128 tokens, seed 0, completions, temperature 0. */
void nb_bench_workload_init(nb_bench_workload *w);
/* Reads a JSONL file: one object per non-empty line with "prompt" (string)
 * or "messages" (array), optional positive integer "max_tokens". Errors name
 * the file and line. */
nb_status nb_bench_workload_load(nb_bench_workload *w, const char *path);
void nb_bench_workload_free(nb_bench_workload *w);
/* --extra-body: a JSON object (text, or @FILE) whose fields go into every
 * request body, over the generated ones (e.g. a logit_bias, top_k); "stream"
 * is refused (the benchmark needs the stream). Errors name the option and
 * what is wrong. */
nb_status nb_bench_workload_set_extra(nb_bench_workload *w, const char *text_or_file);

/* The JSON body of request `idx` (malloc'd; NULL on out of memory), with the
 * requested prompt length in words (0 for file prompts) and max_tokens (0 = none). */
char *nb_bench_workload_body(const nb_bench_workload *w, uint64_t idx, int64_t *in_words, int64_t *max_tokens);

#endif
