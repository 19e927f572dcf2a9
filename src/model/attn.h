/* The paged-attention kernel: one query head of one token against
 * positions 0..n_pos-1 of its sequence, read through the block table from
 * a KV pool of any element type (model/kv.h):
 *     s_i = scale * (q . K_i)      (K_i dequantized: code x per-head scale)
 *     p   = softmax(s)
 *     out = sum_i p_i V_i
 * nb_attn_ref is the definition (scalar, in order); the AVX2 version
 * (attn_avx2.c) vectorizes over head_dim and is tested against it. Picked
 * once per forward pass (nb_attn_get). */
#ifndef NB_MODEL_ATTN_H
#define NB_MODEL_ATTN_H

#include "base/cpu.h"
#include "model/kv.h"

typedef struct nb_attn_head {
    const nb_kv_pool *kv;
    int layer;
    const int32_t *blocks;   /* the sequence's block table */
    int32_t n_pos;           /* attends to positions 0..n_pos-1 */
    int kvh;                 /* KV head this query head reads */
    const float *q;          /* [head_dim] */
    float scale;
    float *scores;           /* [n_pos] scratch */
    float *out;              /* [head_dim] */
} nb_attn_head;

typedef void (*nb_attn_fn)(const nb_attn_head *a);

void nb_attn_ref(const nb_attn_head *a);
nb_attn_fn nb_attn_avx2(void); /* NULL when not compiled */
/* Best kernel at or below max_isa, with its name. */
nb_attn_fn nb_attn_get(nb_isa max_isa, const char **name);
/* fp8 e4m3 -> f32 for all 256 codes (filled once, thread-safe). */
const float *nb_attn_fp8_table(void);

#endif
