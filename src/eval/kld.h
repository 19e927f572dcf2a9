/* `nibble eval kld`: a candidate model against its baseline on the same
 * tokens - KL(base || cand) statistics, top-1 agreement, both perplexities,
 * per token class (eval/tokclass.h) - from two sessions, or from a baseline
 * file written earlier (eval/kldbase.h).
 *
 * Positions: llama-perplexity's chunking (eval/compare.h): chunks of ctx
 * tokens, first replaced by BOS when the model adds one, each from an empty
 * cache, positions j = ctx/2 .. ctx-2 scored against the actual token j+1.
 * A position belongs to the classes of that next token (the token being
 * predicted), so "digit" is "positions where the text continues with a token
 * holding a digit".
 *
 * Vocabulary: two models are comparable when they have the same number of
 * logits and their vocabularies agree on every id: for each id the same
 * kind (control token or not) and the same text (nb_token_piece with special
 * rendering: decoded bytes, U+2581 back to a space). The fingerprint
 * (nb_kld_vocab_sha256) is the SHA-256 of, per id 0..n_vocab-1, one byte
 * (0 text, 1 control, 2 no tokenizer entry), the text length (u32 LE) and
 * the text. Scores, merges and the pre-tokenizer are not compared: the
 * baseline's tokenizer makes the ids, and both models read the same ids.
 *
 * Top-K baseline files (mode 1): the KLD of a position is computed with
 * the baseline's tail (the tokens outside its top K) lumped into one outcome:
 *   KLD_K = sum_{i in topK} p_i (log p_i - log q_i) + P (log P - log Q),
 *   P = the stored tail mass, Q = the candidate's mass outside those K ids.
 * By the chain rule of KL, KLD = KLD_K + P * KL(p_tail/P || q_tail/Q), so
 * KLD_K is a lower bound, exact when P = 0; the report gives the mean P.
 * Top-1 agreement and both perplexities stay exact (the baseline's argmax is
 * the first stored id, its NLL is stored from the full distribution).
 * Full-logit files (mode 0, the default) give the direct run's numbers
 * exactly. */
#ifndef NB_EVAL_KLD_H
#define NB_EVAL_KLD_H

#include "eval/compare.h"
#include "eval/kldbase.h"
#include "eval/model_id.h"
#include "eval/tokclass.h"

typedef struct nb_kld_opts {
    int32_t n_ctx;            /* 0 with base_logits: the file's */
    int64_t max_chunks;       /* <= 0: every full chunk */
    const char *save_base;    /* write the baseline file here (needs a base session) */
    int32_t save_topk;        /* 0: full logits (exact); else K entries per position */
    const char *base_logits;  /* read the baseline from this file instead of a session */
    nb_tokclass_set *classes; /* required */
    const uint8_t *text_sha;  /* SHA-256 of the text (computed when NULL) */
} nb_kld_opts;

typedef struct nb_kld_class_stat {
    int64_t n, same;
    double kld_sum;
    double kld_mean, top1; /* filled at the end */
} nb_kld_class_stat;

typedef struct nb_kld_report {
    nb_cmp_result all;       /* ppl_test etc. meaningless when !has_cand */
    bool has_cand;
    int n_classes;
    char cls_names[NB_TOKCLASS_MAX][NB_TOKCLASS_NAME_MAX];
    nb_kld_class_stat cls[NB_TOKCLASS_MAX];
    int worst;               /* class index or -1 */
    nb_model_id base, cand;
    int32_t n_ctx;
    int64_t n_tokens, n_chunks;
    int32_t base_topk;       /* 0: exact baseline (session or full file); else K */
    double base_tail_mean;   /* top-K file: mean baseline mass outside the top K */
} nb_kld_report;

typedef void (*nb_kld_progress)(void *ud, int64_t chunk, int64_t n_chunks, const nb_cmp_result *running);

/* base: the baseline session (NULL with opts->base_logits); cand: the
 * candidate (NULL: only write --save-base). Vocabulary mismatches are
 * NB_ERR_INVALID with a message naming the first differing id. */
nb_status nb_kld_run(nb_session *base, nb_session *cand, const char *text, size_t len, const nb_kld_opts *opts,
                     nb_kld_report *out, nb_kld_progress cb, void *ud) __attribute__((warn_unused_result));

/* The vocabulary fingerprint described above. */
nb_status nb_kld_vocab_sha256(const nb_session *s, uint8_t out[32]) __attribute__((warn_unused_result));
/* NB_OK when comparable, else NB_ERR_INVALID naming the first difference. */
nb_status nb_kld_vocab_check(const nb_session *base, const nb_session *cand) __attribute__((warn_unused_result));

/* One position from a top-K baseline record against the candidate's full logits. */
nb_status nb_kld_position_topk(const nb_kldbase_pos *b, int32_t k, const float *cand, int32_t n_vocab, int32_t next,
                               nb_cmp_pos *out) __attribute__((warn_unused_result));

/* Minimum class size for worst_class (smaller classes are named only when none is this large). */
#define NB_KLD_WORST_MIN_N 20

#endif
