/* The engine's memory budget: how many KV blocks the pool gets.
 *
 *   explicit --kv-cache-bytes B:  tokens = B / kv_bytes_per_token
 *   otherwise (the plan/ account, host RAM on the CPU engine):
 *       budget  = memory_utilization x MemTotal
 *       pool    = budget - weights - overhead
 *       overhead = activation reserve (the forward pass's step buffers for
 *                  max_num_batched_tokens tokens, logits for max_num_seqs
 *                  rows) + NB_PLAN_NIBBLE_FIXED_OVERHEAD (runtime, tokenizer,
 *                  thread stacks)
 *   then the pool is capped at max_num_seqs x max_model_len tokens (more can
 *   never be used; memory is committed as blocks are first written).
 * Refuses (vLLM's message, via nb_plan_refusal_message) when the pool holds
 * fewer than max_model_len tokens; warns when max_num_seqs x max_model_len
 * exceeds it, with the real concurrency at max_model_len. */
#ifndef NB_ENGINE_BUDGET_H
#define NB_ENGINE_BUDGET_H

#include "engine/engine.h"
#include "model/kv.h"

typedef struct nb_engine_budget {
    int64_t n_blocks;
    uint64_t kv_tokens;      /* tokens the pool holds before the cap */
    bool refused;
    char refusal[512];
    char warning[512];
    char text[2048];         /* the account as printed lines */
} nb_engine_budget;

nb_status nb_engine_kv_type(nb_kv_dtype d, nb_kv_type *out) __attribute__((warn_unused_result));
/* cfg: resolved (max_model_len, max_num_seqs, block size set). */
nb_status nb_engine_kv_budget(const nb_model *m, const nb_engine_config *cfg, uint64_t kv_bytes_per_token,
                              nb_engine_budget *out) __attribute__((warn_unused_result));
/* "auto|f32|f16|bf16|fp8|int8" -> dtype; NB_ERR_INVALID naming the choices. */
nb_status nb_engine_kv_dtype_parse(const char *s, nb_kv_dtype *out) __attribute__((warn_unused_result));

#endif
