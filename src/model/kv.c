/* KV pool allocation. */
#include "model/kv.h"

#include <stdlib.h>
#include <string.h>

uint64_t nb_kv_bytes_per_token(const nb_hparams *hp) {
    return 2ull * (uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * sizeof(float);
}

nb_status nb_kv_pool_init(nb_kv_pool *kv, const nb_hparams *hp, int32_t block_size, int64_t n_blocks) {
    memset(kv, 0, sizeof *kv);
    if (block_size < 1 || block_size > 1024)
        return nb_fail(NB_ERR_RANGE, "block size %d outside 1..1024", block_size);
    if (n_blocks < 1) return nb_fail(NB_ERR_RANGE, "KV pool needs at least one block (got %lld)", (long long)n_blocks);
    kv->n_layer = hp->n_layer;
    kv->kv_dim = hp->n_head_kv * hp->head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    uint64_t n;
    if (!nb_mul_ok((uint64_t)n_blocks * (uint64_t)block_size, (uint64_t)kv->kv_dim * (uint64_t)hp->n_layer, &n) ||
        !nb_mul_ok(n, sizeof(float), &n))
        return nb_fail(NB_ERR_RANGE, "KV pool size overflows");
    kv->k = malloc(n);
    kv->v = malloc(n);
    if (!kv->k || !kv->v) {
        nb_kv_pool_free(kv);
        return nb_fail(NB_ERR_NOMEM, "out of memory for a KV pool of 2 x %llu bytes", (unsigned long long)n);
    }
    return NB_OK;
}

void nb_kv_pool_free(nb_kv_pool *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}
