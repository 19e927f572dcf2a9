/* KV cache storage: one pool of fixed-size blocks per layer, addressed
 * through a sequence's block table (the layout vLLM's paged attention uses).
 * This file owns only the bytes; which block belongs to which sequence is the
 * block manager's business (engine/). A single sequence with blocks 0..n-1 is
 * the "simple per-sequence buffer" case.
 *
 * Layout: k[layer][block][slot][kv_dim], kv_dim = n_head_kv * head_dim, f32.
 * Memory per token = 2 * n_layer * kv_dim * 4 bytes. */
#ifndef NB_MODEL_KV_H
#define NB_MODEL_KV_H

#include "formats/source.h"

typedef struct nb_kv_pool {
    int32_t n_layer, kv_dim, block_size;
    int64_t n_blocks;
    float *k, *v;
} nb_kv_pool;

nb_status nb_kv_pool_init(nb_kv_pool *kv, const nb_hparams *hp, int32_t block_size, int64_t n_blocks)
    __attribute__((warn_unused_result));
void nb_kv_pool_free(nb_kv_pool *kv);
uint64_t nb_kv_bytes_per_token(const nb_hparams *hp);

static inline float *nb_kv_k(const nb_kv_pool *kv, int layer, int32_t block, int32_t slot) {
    return kv->k + (((int64_t)layer * kv->n_blocks + block) * kv->block_size + slot) * kv->kv_dim;
}
static inline float *nb_kv_v(const nb_kv_pool *kv, int layer, int32_t block, int32_t slot) {
    return kv->v + (((int64_t)layer * kv->n_blocks + block) * kv->block_size + slot) * kv->kv_dim;
}

#endif
