/* Attention of one layer over a batch (model/forward.h), through the
 * flash-style kernels (kernels/attn.h).
 *
 * nb_attn_batch_plan cuts the batch into tiles once per forward pass: runs
 * of consecutive tokens of one sequence at consecutive positions (a prompt
 * chunk; a decode step is a run of one), split into pieces of up to
 * tile_tokens tokens, so that a tile holds up to NB_ATTN_TILE_ROWS query
 * rows (tokens x the query heads of a GQA group). Each tile streams its
 * sequence's K/V once, so the larger the tile the less a long prompt reads
 * (at 8192 tokens a head's K/V is megabytes, out of L2); tiles shrink
 * towards NB_ATTN_TILE_ROWS_MIN rows only when the batch would otherwise
 * give fewer than about 4 jobs per thread. nb_attn_batch_run then runs one job per
 * (tile, KV head) on the thread pool, in chunks with stealing (later tiles
 * of a prompt attend to more keys), each with its own scratch. A tile reads
 * each K/V row of its sequence once, whatever its number of tokens.
 *
 * Split decode: a lone token (a decode step) over more than split_keys keys
 * is cut into pieces of split_keys keys (whole KV blocks: the piece's part
 * of the block table, its last key at pos0 - first key), each a job per KV
 * head that writes its output and log-sum-exp to a partial slot; a second
 * pass merges a token's pieces per row, out = sum_p w_p o_p / sum_p w_p,
 * w_p = e^(lse_p - max lse). Why: a pool slot holds every KV head's row, so
 * one head's pass over a long context uses an eighth of each line pair the
 * hardware prefetcher brings (TinyLlama: 4 heads x 128 B of 512 B); with
 * the heads of one piece run back to back by one thread (a thread's share
 * of jobs is contiguous, pieces major, heads minor) those lines are still
 * in L2 for the next head (docs/speed.md, session 20). It also gives one
 * long sequence more jobs than it has KV heads. */
#ifndef NB_MODEL_ATTN_H
#define NB_MODEL_ATTN_H

#include "base/threadpool.h"
#include "kernels/attn.h"
#include "kernels/dispatch.h"
#include "model/forward.h"
#include "model/kv.h"

#define NB_ATTN_TILE_ROWS 512
/* Where the AMX kernels run (dispatch attn_bf16_amx): they convert each key
 * chunk once per tile, so larger tiles amortize that (pp8192, f32 pool, on
 * the Intel guest of session 24: 512 rows 212.0 / 206.7 tok/s, 1024 rows
 * 218.6 / 219.6, 2048 rows 220.4 / 218.2) */
#define NB_ATTN_TILE_ROWS_AMX 1024
#define NB_ATTN_TILE_ROWS_MIN 128
#define NB_ATTN_SPLIT_KEYS 512 /* keys per piece of a split decode token (rounded up to whole blocks) */

typedef struct nb_attn_span {
    int32_t seq, t0, nt, pos0; /* batch tokens t0..t0+nt-1 of seqs[seq], at pos0.. */
    int32_t key0, part;        /* a piece: keys key0..key0+pos0 into partial slot part; whole: 0, -1 */
} nb_attn_span;

typedef struct nb_attn_merge {
    int32_t t0, part0, n_parts; /* batch token t0's pieces, partial slots part0.. */
} nb_attn_merge;

typedef struct nb_attn_batch {
    nb_attn_fn fn[NB_KV_TYPES]; /* per KV pool type (the dispatch table's attn_kv) */
    const char *isa;
    int n_head, n_head_kv, head_dim, group, tile_tokens, tile_tokens_min, n_threads;
    int32_t split_keys;    /* keys per piece of a split decode token, whole blocks; 0: never split */
    nb_attn_span *spans;
    int32_t n_spans, spans_cap;
    nb_attn_merge *merges;
    int32_t n_merges, merges_cap;
    int32_t n_parts, parts_cap;
    float *part_out;       /* [part][n_head_kv][group][head_dim] */
    float *part_lse;       /* [part][n_head_kv][group] */
    float *scratch;        /* [n_threads][scratch_floats] */
    size_t scratch_floats;
} nb_attn_batch;

/* Takes the dispatch table's attention kernel and sizes the per-thread
 * scratch; block_size: the KV pool's (split pieces are whole blocks). */
nb_status nb_attn_batch_init(nb_attn_batch *a, const nb_arch_desc *hp, const nb_dispatch *d, int n_threads,
                             int32_t block_size) __attribute__((warn_unused_result));
void nb_attn_batch_free(nb_attn_batch *a);
/* The tiles of a checked batch (positions inside the block tables). */
nb_status nb_attn_batch_plan(nb_attn_batch *a, const nb_batch *b) __attribute__((warn_unused_result));
/* out[t][n_head][head_dim] = attention of q[t][n_head][head_dim] over layer
 * `layer` of kv (which already holds this batch's K/V). */
void nb_attn_batch_run(nb_attn_batch *a, nb_pool *pool, const nb_kv_pool *kv, const nb_batch *b, int layer,
                       const float *q, float *out);

#endif
