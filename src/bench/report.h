/* The report of `nibble bench serve` and `nibble bench compare`.
 *
 * results.json (stable keys, read by `nibble gate --bench-base/--bench-cand`):
 *   {"tool": "nibble bench serve", "version", "parameters": {...},
 *    "levels": [{"concurrency": C | "request_rate": R (a number, or "inf"),
 *                "requests_ok", "requests_failed", "error_rate",
 *                "errors": {reason: count}, "duration_s",
 *                "req_per_s", "output_tok_per_s", "total_tok_per_s",
 *                "output_tokens", "prompt_tokens", "input_words_mean", "prompt_tokens_mean",
 *                "ttft_s", "tpot_s", "itl_s", "e2e_s": {"mean","p50","p90","p95","p99","max"},
 *                "server": {"available", "flavor", "running_peak", "waiting_peak",
 *                           "kv_usage_peak", "preemptions", "prompt_tokens",
 *                           "generation_tokens", "requests", "samples"},
 *                "client": {"cpu_s", "chunks", "chunks_per_cpu_s"}, "interrupted"}],
 *    "knee": {"concurrency" | "request_rate", "ttft_p99_s", "tpot_p99_s", "output_tok_per_s"} | null,
 *    "interrupted": bool}
 * Latencies are in seconds over the successful requests (null when none);
 * percentiles are stats.h's (linear interpolation). Server values are
 * deltas of counters or peaks of gauges; null where the server does not
 * expose them. Tokens: output from usage.completion_tokens (or content
 * chunks), prompt from usage.prompt_tokens (or the requested words). */
#ifndef NB_BENCH_REPORT_H
#define NB_BENCH_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/status.h"
#include "bench/client.h"

/* The JSON object of one finished level. */
json_t *nb_bench_level_json(const nb_bench_level *lv);
/* Whether a level's JSON meets the SLOs (a bound <= 0 is not applied). */
bool nb_bench_level_meets(const json_t *level, double slo_ttft_p99, double slo_tpot_p99);
/* The knee over the levels' JSON (the highest x meeting both SLOs), or null (json_null()). */
json_t *nb_bench_knee(const json_t *levels, double slo_ttft_p99, double slo_tpot_p99);

/* Tables: one block per level (when with_levels), a summary line per level, and the knee. */
void nb_bench_print_report(FILE *f, const json_t *results, bool with_levels);
/* One level's block (used as levels finish). */
void nb_bench_print_level(FILE *f, const json_t *level);

/* requests.csv: one row per measured request of every level. */
nb_status nb_bench_write_csv(const char *path, const nb_bench_level *levels, size_t n_levels);
/* levels.dat + plots.gp in dir, then gnuplot: throughput, TTFT and TPOT vs
 * concurrency (or request rate), PNG and SVG. Returns false (with a line on
 * stderr) when gnuplot is not installed or fails; the caller goes on. */
bool nb_bench_plot(const char *dir, const json_t *results);

/* `nibble bench compare`: both runs' levels matched by concurrency / request
 * rate; per metric A, B and B/A. Returns the comparison as JSON. */
nb_status nb_bench_compare(const json_t *a, const json_t *b, const char *name_a, const char *name_b, json_t **out);
void nb_bench_print_compare(FILE *f, const json_t *cmp);
bool nb_bench_plot_compare(const char *dir, const json_t *cmp);

#endif
