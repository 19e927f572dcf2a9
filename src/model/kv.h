/* KV cache storage: one pool of fixed-size blocks per layer, addressed
 * through a sequence's block table (the layout vLLM's paged attention uses).
 * This file owns only the bytes; which block belongs to which sequence is the
 * block manager's business (engine/kvcache.h). A single sequence with blocks
 * 0..n-1 is the "simple per-sequence buffer" case.
 *
 * Layout: k[layer][group of NB_KV_GROUP_BLOCKS blocks][kv head][block of
 * the group][slot][head_dim] elements of the pool's type (the last group:
 * the blocks left; kernels/attn.h nb_attn_kv_off); v the same. Head-major
 * within a group, so that one head's keys (what one attention job reads)
 * over a sequence's consecutive blocks lie in one run of up to 32 blocks:
 * with slots holding every head, a head's rows were short runs a slot
 * apart, a pattern some CPUs stream at a half or less of a plain read
 * (docs/speed.md, session 37). Groups rather than whole-pool head regions
 * keep the pages a few tokens commit as few as before. The 8-bit types
 * also keep one f32 scale per (layer, block, slot, kv head) for K and for
 * V:
 * ks[layer][block][slot][n_head_kv]; element = scale x code.
 *   F32, F16, BF16: plain values (F16/BF16 rounded to nearest even).
 *   INT8: symmetric, scale = max|x| / 127 over the head's head_dim values,
 *         code = round(x / scale) in -127..127.
 *   FP8:  OCP fp8 e4m3fn codes (bias 7, max 448, no inf), scale =
 *         max|x| / 448 over the head's values, code = e4m3(x / scale) (RNE).
 * Per-token, per-head scales (rather than per block) keep a block's
 * existing codes valid when later tokens are appended to it and cost
 * 8 bytes per token per KV head (3% at head_dim 128).
 * Memory per token = 2 * n_layer * (kv_dim * elem + n_head_kv * scale). */
#ifndef NB_MODEL_KV_H
#define NB_MODEL_KV_H

#include "base/threadpool.h"
#include "formats/source.h"
#include "kernels/attn.h" /* nb_kv_type, nb_attn_kv */

typedef struct nb_kv_pool {
    int32_t n_layer, kv_dim, n_head_kv, head_dim, block_size;
    int64_t n_blocks;
    nb_kv_type type;
    int32_t elem;          /* bytes per element */
    uint8_t *k, *v;        /* [layer][block group][kv head][block][slot][head_dim], bytes each (base/hugemem.h) */
    size_t bytes;
    float *ks, *vs;        /* [layer][block][slot][n_head_kv], INT8 / FP8 only */
} nb_kv_pool;

/* f32 pool (the session's). */
nb_status nb_kv_pool_init(nb_kv_pool *kv, const nb_arch_desc *hp, int32_t block_size, int64_t n_blocks)
    __attribute__((warn_unused_result));
nb_status nb_kv_pool_init_type(nb_kv_pool *kv, const nb_arch_desc *hp, int32_t block_size, int64_t n_blocks,
                               nb_kv_type type) __attribute__((warn_unused_result));
void nb_kv_pool_free(nb_kv_pool *kv);
/* Writes every page of the pool once, on `threads` (NULL: this thread), so
 * that the OS backs all of it now. The pool's pages are otherwise first
 * touched by the step that stores a token there, and the engine spreads
 * new sequences over the pool (engine/kvcache.c): a server's first minutes
 * then zero a 2 MiB page per layer for K and for V each time a sequence
 * lands in memory not yet touched, on the thread all others wait for
 * (docs/speed.md, session 49). The engine commits its pool at creation, as
 * llama.cpp clears its KV buffer, where the memory still to be had holds
 * it (engine.c, docs/engine.md "KV cache"). */
void nb_kv_pool_commit(nb_kv_pool *kv, nb_pool *threads);
uint64_t nb_kv_bytes_per_token(const nb_arch_desc *hp); /* f32 */
uint64_t nb_kv_bytes_per_token_type(const nb_arch_desc *hp, nb_kv_type type);
const char *nb_kv_type_name(nb_kv_type type);

/* Writes one token's K and V (kv_dim floats each) at (layer, block, slot),
 * converting to the pool's type. */
void nb_kv_store(nb_kv_pool *kv, int layer, int32_t block, int32_t slot, const float *k, const float *v);
/* Copies all layers of block src to block dst (copy-on-write). */
void nb_kv_copy_block(nb_kv_pool *kv, int32_t dst, int32_t src);

/* Slot `slot` of block `block` of a layer (the index of its scales / n_head_kv). */
static inline int64_t nb_kv_index(const nb_kv_pool *kv, int layer, int32_t block, int32_t slot) {
    return ((int64_t)layer * kv->n_blocks + block) * kv->block_size + slot;
}
/* Layer `layer` of the pool as the attention kernels read it. */
static inline void nb_kv_layer_view(const nb_kv_pool *kv, int layer, nb_attn_kv *out) {
    const int64_t first = nb_kv_index(kv, layer, 0, 0), base = first * kv->kv_dim * kv->elem;
    out->type = kv->type;
    out->elem = kv->elem;
    out->head_dim = kv->head_dim;
    out->n_head_kv = kv->n_head_kv;
    out->block_size = kv->block_size;
    out->row = (int64_t)kv->head_dim * kv->elem;
    out->n_blocks = kv->n_blocks;
    out->k = kv->k + base;
    out->v = kv->v + base;
    out->ks = kv->ks ? kv->ks + first * kv->n_head_kv : NULL;
    out->vs = kv->vs ? kv->vs + first * kv->n_head_kv : NULL;
}

/* OCP fp8 e4m3fn: round to nearest even, saturating at +-448; NaN -> 0x7f. */
uint8_t nb_fp32_to_fp8_e4m3(float f);
float nb_fp8_e4m3_to_fp32(uint8_t c);

#endif
