/* The server's side of a benchmark, read from its Prometheus /metrics text.
 * Three families of names are known (ANCHORS.md):
 *   nibble serve: nibble:num_requests_running, nibble:num_requests_waiting,
 *     nibble:kv_cache_usage_perc (0..1), nibble:num_preemptions_total,
 *     nibble:prompt_tokens_total, nibble:generation_tokens_total,
 *     nibble:request_success_total{finished_reason}
 *   vLLM: the same suffixes under vllm: (and the older vllm:gpu_cache_usage_perc)
 *   llama-server: llamacpp:requests_processing, llamacpp:requests_deferred,
 *     llamacpp:kv_cache_usage_ratio, llamacpp:prompt_tokens_total,
 *     llamacpp:tokens_predicted_total (no preemption or request counter)
 * Values of one name over several label sets are summed (requests by finish
 * reason, engines), except KV usage, whose maximum is kept. */
#ifndef NB_BENCH_PROM_H
#define NB_BENCH_PROM_H

#include <stdbool.h>
#include <stddef.h>

typedef enum nb_prom_field {
    NB_PROM_RUNNING,
    NB_PROM_WAITING,
    NB_PROM_KV_USAGE,
    NB_PROM_PREEMPTIONS,
    NB_PROM_PROMPT_TOKENS,
    NB_PROM_GENERATION_TOKENS,
    NB_PROM_REQUESTS,
    NB_PROM_COUNT
} nb_prom_field;

typedef struct nb_prom {
    const char *flavor; /* "nibble", "vllm", "llamacpp" or NULL when no known name was seen */
    double v[NB_PROM_COUNT];
    bool has[NB_PROM_COUNT];
} nb_prom;

/* Parses n bytes of exposition text (need not be NUL-terminated). Lines that
 * do not parse are skipped; never fails. */
void nb_prom_parse(const char *text, size_t n, nb_prom *out);
const char *nb_prom_field_name(nb_prom_field f);

#endif
