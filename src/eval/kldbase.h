/* The baseline file of `nibble eval kld --save-base / --base-logits`: what
 * later runs need from the baseline model, so one baseline pass serves many
 * candidates. Little-endian throughout (as written on x86-64 / aarch64).
 *
 * Header (172 bytes + the path):
 *   off size
 *     0   8  magic "NBKLBASE"
 *     8   4  u32 version = 1
 *    12   4  u32 mode: 0 = full logits (exact), 1 = top-K (approximate, below)
 *    16   4  i32 n_vocab        the baseline's logit count
 *    20   4  i32 ctx            chunk length (eval/compare.h chunking)
 *    24   4  i32 k              entries per position (= n_vocab in mode 0)
 *    28   4  u32 reserved (0)
 *    32   8  i64 n_tokens       tokens in the whole text
 *    40   8  i64 n_chunks
 *    48   8  i64 n_positions    = n_chunks * (ctx - 1 - ctx/2)
 *    56  32  SHA-256 of the text bytes as scored (after the trailing-newline strip)
 *    88  32  vocabulary fingerprint (eval/kld.h nb_kld_vocab_sha256)
 *   120  32  SHA-256 of the baseline model (eval/model_id.h)
 *   152  16  baseline type, NUL-padded ("gguf", "safetensors", "llama2c")
 *   168   4  u32 path_len (< 4096), then path_len bytes: the baseline's path
 * Then n_chunks * ctx i32 token ids: every chunk as it was evaluated (its
 * first token already replaced by BOS when the model adds one).
 * Then n_positions records, chunk by chunk, positions j = ctx/2 .. ctx-2:
 *   mode 0: n_vocab f32, the baseline's raw logits at that position (a run
 *           from the file computes exactly what a direct run computes);
 *   mode 1: f64 nll     -log p(actual next token), from the full distribution
 *           f64 tail    probability mass of the baseline outside its top K
 *           k  i32      the top-K token ids, most probable first (ties: lower id first)
 *           k  f32      their log-probabilities log p_i (full log-sum-exp)
 * The file size must equal what the header implies; anything else is refused.
 * Writers create FILE.tmp and rename it over FILE when complete. */
#ifndef NB_EVAL_KLDBASE_H
#define NB_EVAL_KLDBASE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

#define NB_KLDBASE_VERSION 1
#define NB_KLDBASE_FULL 0
#define NB_KLDBASE_TOPK 1

typedef struct nb_kldbase_hdr {
    uint32_t mode;
    int32_t n_vocab, ctx, k;
    int64_t n_tokens, n_chunks, n_positions;
    uint8_t text_sha[32], vocab_sha[32], model_sha[32];
    char model_type[17];
    char model_path[4096];
} nb_kldbase_hdr;

/* One stored position as read back. Full mode: logits (n_vocab). Top-K:
 * nll, tail, ids, lp (k each). Pointers are valid until the next read. */
typedef struct nb_kldbase_pos {
    const float *logits;
    double nll, tail;
    const int32_t *ids;
    const float *lp;
} nb_kldbase_pos;

typedef struct nb_kldbase_writer nb_kldbase_writer;
typedef struct nb_kldbase_reader nb_kldbase_reader;

/* Scored positions per chunk of ctx tokens. */
int64_t nb_kldbase_per_chunk(int32_t ctx);

/* h->n_positions is computed here; tokens holds n_chunks * ctx ids. */
nb_status nb_kldbase_create(const char *path, nb_kldbase_hdr *h, const int32_t *tokens, nb_kldbase_writer **out)
    __attribute__((warn_unused_result));
/* One position: the baseline's logits (n_vocab) and the actual next token. */
nb_status nb_kldbase_write(nb_kldbase_writer *w, const float *logits, int32_t next) __attribute__((warn_unused_result));
/* Checks every position was written, closes and renames into place; the
 * writer is freed either way (and the partial file removed on failure). */
nb_status nb_kldbase_finish(nb_kldbase_writer *w) __attribute__((warn_unused_result));
/* Removes the partial file and frees (NULL is fine). */
void nb_kldbase_abort(nb_kldbase_writer *w);

/* Opens and validates the header, the token ids and the file size. */
nb_status nb_kldbase_open(const char *path, nb_kldbase_reader **out) __attribute__((warn_unused_result));
const nb_kldbase_hdr *nb_kldbase_header(const nb_kldbase_reader *r);
const int32_t *nb_kldbase_tokens(const nb_kldbase_reader *r);
nb_status nb_kldbase_read(nb_kldbase_reader *r, nb_kldbase_pos *p) __attribute__((warn_unused_result));
void nb_kldbase_close(nb_kldbase_reader *r);

/* The top K of n logits (NaN skipped), most probable first, ties to the
 * lower id; returns how many were found (<= k). */
int32_t nb_kldbase_topk(const float *logits, int32_t n, int32_t k, int32_t *ids);

#endif
