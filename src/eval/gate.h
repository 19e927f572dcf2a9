/* The acceptance gate: may a candidate (a quantized model, a new engine
 * setting) replace its baseline? Pure functions over the summaries the
 * eval commands write (docs/golden.md "The gate").
 *
 * Inputs (all read from JSON files by the nb_gate_*_from_json helpers):
 *   golden summaries of base and candidate (required; eval golden),
 *   perplexity of both (optional; eval ppl --json: `ppl`),
 *   KL divergence of the candidate against the base (optional; eval kld
 *   --json: `kld_mean`, `top1_agreement`),
 *   load-test results of both (optional; bench serve results.json `levels`).
 *
 * Order of checks (each one printed with value, threshold, pass/fail; the
 * first failing one is the verdict's reason):
 *   1 ppl_delta      cand ppl / base ppl - 1 <= ppl_delta     (coarse filter)
 *   2 kld_max        kld_mean <= kld_max
 *   3 top1_min       top1_agreement >= top1_min
 *   4 bucket_present every bucket is in both summaries         (fails if not)
 *   5 bucket_n       every bucket has >= min_bucket_n items on both sides
 *                    (fails if not: too few items to judge is no evidence)
 *   6 bucket_floor   every candidate bucket pass rate >= bucket_floor
 *   7 bucket_drop    every bucket: base - cand <= bucket_drop
 *   8 json_valid     cand json_valid_rate >= json_valid (when any item's
 *                    check involves JSON on either side)
 *   9 golden_pass    cand overall pass rate >= golden_pass
 *  10 p99_ttft       worst matched level: cand p99 TTFT / base - 1 <= max
 *  11 throughput     best cand output tok/s / best base - 1 >= min
 * Checks 1-3 run only when their inputs are given; 10-11 only when the bench
 * inputs are given (without a threshold they are printed as information). */
#ifndef NB_EVAL_GATE_H
#define NB_EVAL_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define NB_GATE_NAME_MAX 64

typedef struct nb_gate_thresholds {
    double ppl_delta;                /* 0.05 */
    double golden_pass;              /* 0.90 */
    double bucket_floor;             /* 0.85 */
    double json_valid;               /* 0.99 */
    double bucket_drop;              /* 0.05 */
    double kld_max;                  /* 0.05 */
    double top1_min;                 /* 0.90 */
    double max_p99_ttft_regression;  /* NAN: not checked (reported) */
    double min_throughput_gain;      /* NAN: not checked (reported) */
    int64_t min_bucket_n;            /* 20 */
} nb_gate_thresholds;

void nb_gate_thresholds_defaults(nb_gate_thresholds *t);

typedef struct nb_gate_bucket {
    char name[NB_GATE_NAME_MAX];
    double pass_rate;
    int64_t n;
} nb_gate_bucket;

/* A golden summary (summary.json of eval golden). */
typedef struct nb_gate_golden {
    double pass_rate;
    int64_t n;
    double json_valid_rate;  /* NAN when no item's check involves JSON */
    int64_t n_json;
    nb_gate_bucket *buckets; /* owned */
    size_t n_buckets;
} nb_gate_golden;

void nb_gate_golden_free(nb_gate_golden *g);

/* Bench results reduced to what the gate checks. */
typedef struct nb_gate_bench {
    double ttft_regression;  /* worst matched level: cand p99 / base p99 - 1 */
    char ttft_level[48];     /* the level it was found at ("concurrency 8") */
    double throughput_gain;  /* best cand output_tok_per_s / best base - 1 */
    int n_matched;
} nb_gate_bench;

typedef struct nb_gate_input {
    nb_gate_golden base, cand;
    bool has_ppl;
    double ppl_base, ppl_cand;
    bool has_kld;
    double kld_mean, top1_agreement;
    bool has_bench;
    nb_gate_bench bench;
} nb_gate_input;

typedef enum nb_gate_outcome { NB_GATE_PASS = 0, NB_GATE_FAIL, NB_GATE_INFO } nb_gate_outcome;

typedef struct nb_gate_check {
    char name[32];                   /* "bucket_floor" */
    char subject[NB_GATE_NAME_MAX];  /* bucket name, "" for global checks */
    double value, threshold;         /* NAN when not a number (a missing bucket) */
    char op[4];                      /* "<=", ">=" */
    nb_gate_outcome outcome;
    char reason[256];                /* one line for humans */
} nb_gate_check;

typedef struct nb_gate_result {
    nb_gate_check *checks;           /* owned */
    size_t n_checks;
    bool accept;
    int first_fail;                  /* index into checks, -1 when accepted */
} nb_gate_result;

/* Runs every check in the order above. NB_ERR_NOMEM only. */
nb_status nb_gate_evaluate(const nb_gate_input *in, const nb_gate_thresholds *t, nb_gate_result *out)
    __attribute__((warn_unused_result));
void nb_gate_result_free(nb_gate_result *r);

/* Readers for the JSON inputs (a jansson json_t *, passed as void * so that
 * this header does not need jansson). `what` names the file in messages.
 * NB_ERR_FORMAT with the field and the file on a missing / mistyped key. */
nb_status nb_gate_golden_from_json(const void *json, const char *what, nb_gate_golden *out)
    __attribute__((warn_unused_result));
nb_status nb_gate_ppl_from_json(const void *json, const char *what, double *ppl) __attribute__((warn_unused_result));
nb_status nb_gate_kld_from_json(const void *json, const char *what, double *kld_mean, double *top1)
    __attribute__((warn_unused_result));
/* Levels are matched by `concurrency` (or `request_rate`); NB_ERR_FORMAT
 * when no level is in both. */
nb_status nb_gate_bench_from_json(const void *base, const void *cand, const char *what_base, const char *what_cand,
                                  nb_gate_bench *out) __attribute__((warn_unused_result));

#endif
