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
/* The same with a kernel dispatch table of the caller's (kernels/dispatch.h;
 * it must outlive the forward): tests and benchmarks that set kernels side
 * by side. nb_fwd_create takes the process's (nb_dispatch_default). */
nb_status nb_fwd_create_with(const nb_model *m, nb_kv_pool *kv, int n_threads, int32_t max_tokens,
                             const struct nb_dispatch *d, nb_fwd **out) __attribute__((warn_unused_result));
void nb_fwd_free(nb_fwd *f);
int nb_fwd_threads(const nb_fwd *f);
/* Commits the KV pool's pages on the forward's threads (model/kv.h nb_kv_pool_commit). */
void nb_fwd_commit_kv(nb_fwd *f);
/* Times the forward pass's thread pool benched a late worker (threadpool.h). */
int64_t nb_fwd_pool_benchings(const nb_fwd *f);
const char *nb_fwd_isa(const nb_fwd *f);
/* The paged-attention kernel in use ("avx2", "scalar"). */
const char *nb_fwd_attn_isa(const nb_fwd *f);
/* The decode kernels' prefetch distances (into L1; into L2, 0: none), and
 * how they were chosen: measured on the model's weights at creation where
 * the dispatch table asks for it (kernels/dispatch.h decode_prefetch_tune;
 * tune->n 0 when not measured). */
int nb_fwd_prefetch(const nb_fwd *f);
int nb_fwd_prefetch_l2(const nb_fwd *f);
int nb_fwd_decode_streams(const nb_fwd *f); /* runs of rows per thread in one-token matmuls (kernels/matmul.c) */
const nb_prefetch_tune *nb_fwd_prefetch_tune(const nb_fwd *f);

/* Runs the batch; logits of the wanted tokens, in batch order, go to
 * `logits` ([n_wanted][n_vocab]). Bad token ids, positions or block tables
 * give NB_ERR_INVALID and leave the cache as it was for other sequences. */
nb_status nb_fwd_run(nb_fwd *f, const nb_batch *b, float *logits) __attribute__((warn_unused_result));

/* ---- calibration hooks (nibble imatrix, calibrated quantize) -------------
 * A capture callback sees the input of every linear layer of every block,
 * as the matmul reads it: x is [n][dim] floats, n the batch's tokens.
 *   ATTN_IN   the normed input of wq/wk/wv (dim n_embd)
 *   ATTN_OUT  the attention output, input of wo (dim n_head*head_dim)
 *   FFN_IN    the normed input of w_gate/w_up (dim n_embd)
 *   FFN_DOWN  silu(gate)*up, input of w_down (dim n_ff)
 * It runs on the calling thread between the kernels; it must not keep x. */
typedef enum nb_fwd_cap {
    NB_FWD_CAP_ATTN_IN = 0,
    NB_FWD_CAP_ATTN_OUT,
    NB_FWD_CAP_FFN_IN,
    NB_FWD_CAP_FFN_DOWN,
    NB_FWD_CAP_N,
} nb_fwd_cap;
typedef void (*nb_fwd_capture_fn)(void *ud, int layer, nb_fwd_cap where, const float *x, int64_t n, int64_t dim);
/* fn NULL removes the hook. */
void nb_fwd_set_capture(nb_fwd *f, nb_fwd_capture_fn fn, void *ud);
/* Runs blocks l0..l1-1 of the batch on the residual stream x ([n][n_embd],
 * read and overwritten), for layer-by-layer calibration; l0 == l1 == 0
 * writes the token embeddings into x instead. K/V go to the pool as in
 * nb_fwd_run. */
nb_status nb_fwd_run_layers(nb_fwd *f, const nb_batch *b, int l0, int l1, float *x)
    __attribute__((warn_unused_result));

#endif
