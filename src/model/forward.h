/* The batched forward pass: one call runs any mix of tokens from several
 * sequences (prefill chunks and decode steps alike) through the model.
 *
 * Each token names its sequence (an index into `seqs`), its position, and
 * whether its logits are wanted. Its K/V are written into the KV pool at
 * (seq's block_table[pos / block_size], pos % block_size) and it attends to
 * positions 0..pos of its own sequence (causal), read through the same
 * block table - so the cache must already hold positions < pos that are not
 * in this batch. Linear layers run as one matmul over all tokens (weights
 * read once per call); attention runs per (token, head) over the pool. */
#ifndef NB_MODEL_FORWARD_H
#define NB_MODEL_FORWARD_H

#include "kernels/kernels.h"
#include "model/kv.h"
#include "model/model.h"

typedef struct nb_seq_view {
    const int32_t *blocks; /* block table */
    int32_t n_blocks;
} nb_seq_view;

typedef struct nb_batch {
    int32_t n;              /* tokens */
    const int32_t *tokens;  /* [n] */
    const int32_t *pos;     /* [n] */
    const int32_t *seq;     /* [n] index into seqs */
    const bool *want;       /* [n] logits wanted; NULL = none */
    int32_t n_seqs;
    const nb_seq_view *seqs;
} nb_batch;

typedef struct nb_fwd nb_fwd;

/* max_tokens: the most tokens one call may carry (scratch is sized once). */
nb_status nb_fwd_create(const nb_model *m, nb_kv_pool *kv, int n_threads, int32_t max_tokens, nb_fwd **out)
    __attribute__((warn_unused_result));
void nb_fwd_free(nb_fwd *f);
int nb_fwd_threads(const nb_fwd *f);
const char *nb_fwd_isa(const nb_fwd *f);
/* The paged-attention kernel in use ("avx2", "scalar"). */
const char *nb_fwd_attn_isa(const nb_fwd *f);

/* Runs the batch; logits of the wanted tokens, in batch order, go to
 * `logits` ([n_wanted][n_vocab]). Bad token ids, positions or block tables
 * give NB_ERR_INVALID and leave the cache as it was for other sequences. */
nb_status nb_fwd_run(nb_fwd *f, const nb_batch *b, float *logits) __attribute__((warn_unused_result));

#endif
