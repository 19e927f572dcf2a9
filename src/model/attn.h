/* The paged-attention kernel: nq query heads of one token that share one
 * KV head (a GQA group; nq = 0 means 1) against positions 0..n_pos-1 of its
 * sequence, read through the block table from a KV pool of any element type
 * (model/kv.h), for each head:
 *     s_i = scale * (q . K_i)      (K_i dequantized: code x per-head scale)
 *     p   = softmax(s)
 *     out = sum_i p_i V_i
 * nb_attn_ref is the definition (scalar, in order, head by head); the AVX2
 * version (attn_avx2.c) vectorizes over head_dim; the AVX-512 one
 * (attn_avx512.c) also reads each K and V row once for all the group's
 * heads. Both are tested against the reference. Picked once per forward
 * pass (nb_attn_get). */
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
    const float *q;          /* [nq][head_dim] */
    float scale;
    float *scores;           /* [nq][n_pos] scratch */
    float *out;              /* [nq][head_dim] */
    int nq;                  /* query heads (0 = 1), at most NB_ATTN_MAX_GROUP */
} nb_attn_head;

#define NB_ATTN_MAX_GROUP 128

typedef void (*nb_attn_fn)(const nb_attn_head *a);

void nb_attn_ref(const nb_attn_head *a);
/* Calls one() for each of a's heads as a one-head nb_attn_head. */
void nb_attn_for_each_head(const nb_attn_head *a, void (*one)(const nb_attn_head *));
nb_attn_fn nb_attn_avx2(void); /* NULL when not compiled */
nb_attn_fn nb_attn_avx512(void);
/* Best kernel at or below max_isa, with its name. */
nb_attn_fn nb_attn_get(nb_isa max_isa, const char **name);
/* fp8 e4m3 -> f32 for all 256 codes (filled once, thread-safe). */
const float *nb_attn_fp8_table(void);

#endif
