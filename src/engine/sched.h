/* The scheduler: which tokens of which sequences run in the next step.
 *
 * A pure module over token counts and a block manager (kvcache.h): it knows
 * nothing of the model, so tests drive it with a fake one. A sequence holds
 * its tokens (prompt + generated), how many of them have K/V in the cache
 * (n_computed) and its block table. Each step needs n_tokens - n_computed
 * tokens of it computed; when a step computes the last known token, its
 * logits are sampled (entry.sample) and the caller appends the new token.
 *
 * nb_sched_step, under max_num_batched_tokens (token budget),
 * max_prefill_tokens (the part of it prompt chunks may take) and max_num_seqs:
 *   1. running sequences that decode (one token), oldest first: decode tokens
 *      always go first, so a step's prefill never delays them by more than
 *      the cost of max_prefill_tokens extra tokens;
 *   2. running sequences in the middle of a prompt (or recomputing one after
 *      a preemption): the next chunk, under what is left of both budgets;
 *   3. waiting sequences, FCFS (preempted ones first, in their order), while
 *      budget, sequence slots and blocks last; the head of the queue is never
 *      skipped (no starvation). A new sequence first takes the longest cached
 *      prefix (full blocks, at most n_tokens - 1 tokens, so the last token is
 *      always computed and never written into a shared block).
 *   Blocks for this step's tokens are allocated as they are scheduled; when
 *   none is left, the most recently started running sequence is preempted
 *   (its blocks released, n_computed = 0: recomputed when it runs again) and
 *   no waiting sequence is admitted in that step.
 * nb_sched_advance then marks the scheduled tokens computed and registers
 * blocks that became full in the prefix cache.
 *
 * Not thread-safe: the engine loop owns it. */
#ifndef NB_ENGINE_SCHED_H
#define NB_ENGINE_SCHED_H

#include "engine/kvcache.h"

typedef enum nb_seq_state { NB_SEQ_NEW = 0, NB_SEQ_WAITING, NB_SEQ_RUNNING, NB_SEQ_FINISHED } nb_seq_state;

typedef struct nb_seq {
    uint64_t id;
    int32_t *tokens;     /* [cap] prompt then generated */
    int32_t n_tokens, cap, n_prompt;
    int32_t n_computed;  /* tokens whose K/V are in the cache */
    int32_t *blocks;     /* [max_blocks] block table */
    int32_t n_blocks, max_blocks;
    uint64_t *hashes;    /* [max_blocks] hash chain of the full token blocks */
    int32_t n_hashed;
    int32_t n_cached;    /* prompt tokens served from the prefix cache at the first admission */
    nb_seq_state state;
    bool started;        /* scheduled at least once */
    bool preempted;      /* waiting again after a preemption */
    uint32_t n_preemptions;
    struct nb_seq *prev, *next;
    void *ud;            /* the owner's per-sequence data */
} nb_seq;

/* cap: the most tokens it will hold (prompt + max_tokens), >= n_prompt >= 1. */
nb_status nb_seq_init(nb_seq *s, uint64_t id, const int32_t *prompt, int32_t n_prompt, int32_t cap,
                      int32_t block_size) __attribute__((warn_unused_result));
/* Frees the arrays (the blocks must have been released: nb_sched_finish). */
void nb_seq_release(nb_seq *s);

typedef struct nb_sched_config {
    int32_t max_num_seqs;          /* >= 1 */
    int32_t max_num_batched_tokens;/* >= 1 */
    /* prompt (prefill) tokens per step, decode tokens not counted; <= 0: no
     * separate cap (prefill takes what the decodes leave of the budget). A
     * prompt longer than this is split over several steps (chunked prefill). */
    int32_t max_prefill_tokens;
} nb_sched_config;

typedef struct nb_sched_entry {
    nb_seq *seq;
    int32_t start, n;   /* tokens [start, start + n) of seq run this step */
    bool sample;        /* start + n == n_tokens: its last logits are wanted */
    bool prefill;       /* a prompt chunk (or a recompute), not a one-token decode */
} nb_sched_entry;

typedef struct nb_sched_out {
    nb_sched_entry *e;  /* [max_num_seqs] owned by the scheduler, valid until the next step */
    int32_t n_entries, n_tokens;
    int32_t n_prefill_tokens; /* of n_tokens, those of prefill entries */
    int32_t n_preempted; /* preemptions in this step */
} nb_sched_out;

typedef struct nb_sched_stats {
    int32_t running, waiting, preempted; /* preempted: waiting sequences that were preempted */
    uint64_t preemptions_total;
    uint64_t prefix_queries_tokens, prefix_hit_tokens;
} nb_sched_stats;

typedef struct nb_sched nb_sched;

nb_status nb_sched_create(const nb_sched_config *c, nb_kvcache *kv, nb_sched **out)
    __attribute__((warn_unused_result));
/* Frees the scheduler (sequences still queued are only unlinked: the caller
 * owns them and should nb_sched_finish each first). */
void nb_sched_free(nb_sched *s);

/* Queues a new sequence at the tail of the waiting queue. NB_ERR_CAPACITY
 * when its cap needs more blocks than the whole pool (it could never run). */
nb_status nb_sched_add(nb_sched *s, nb_seq *q) __attribute__((warn_unused_result));
void nb_sched_step(nb_sched *s, nb_sched_out *out);
/* After the forward pass of `out`: the scheduled tokens are computed. */
void nb_sched_advance(nb_sched *s, const nb_sched_out *out);
/* Appends a sampled token (the caller checks cap). */
void nb_sched_append(nb_seq *q, int32_t token);
/* Removes a sequence from its queue and releases its blocks. */
void nb_sched_finish(nb_sched *s, nb_seq *q);
void nb_sched_stats_get(const nb_sched *s, nb_sched_stats *st);
bool nb_sched_idle(const nb_sched *s);
/* Iteration over the queues (for shutdown): head of running / waiting. */
nb_seq *nb_sched_running(const nb_sched *s);
nb_seq *nb_sched_waiting(const nb_sched *s);

#endif
