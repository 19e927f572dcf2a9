/* The scheduler (see sched.h): two intrusive doubly-linked queues, running
 * (in the order sequences started) and waiting (FCFS; preempted sequences
 * are put back at the front). */
#include "engine/sched.h"

#include <stdlib.h>
#include <string.h>

typedef struct seq_list {
    nb_seq *head, *tail;
    int32_t n;
} seq_list;

struct nb_sched {
    nb_sched_config cfg;
    nb_kvcache *kv;
    int32_t bs;
    seq_list running, waiting;
    nb_sched_entry *entries;
    uint64_t preemptions_total, prefix_queries, prefix_hits;
};

nb_status nb_seq_init(nb_seq *s, uint64_t id, const int32_t *prompt, int32_t n_prompt, int32_t cap,
                      int32_t block_size) {
    memset(s, 0, sizeof *s);
    if (n_prompt < 1 || cap < n_prompt || block_size < 1)
        return nb_fail(NB_ERR_INVALID, "sequence of %d prompt tokens and capacity %d (needs 1 <= prompt <= capacity)",
                       n_prompt, cap);
    s->id = id;
    s->cap = cap;
    s->n_prompt = s->n_tokens = n_prompt;
    s->max_blocks = (int32_t)(((int64_t)cap + block_size - 1) / block_size);
    s->tokens = nb_malloc((size_t)cap * sizeof *s->tokens);
    s->blocks = nb_malloc((size_t)s->max_blocks * sizeof *s->blocks);
    s->hashes = nb_malloc((size_t)s->max_blocks * sizeof *s->hashes);
    if (!s->tokens || !s->blocks || !s->hashes) {
        nb_seq_release(s);
        return NB_ERR_NOMEM;
    }
    memcpy(s->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    return NB_OK;
}

void nb_seq_release(nb_seq *s) {
    free(s->tokens);
    free(s->blocks);
    free(s->hashes);
    s->tokens = s->blocks = NULL;
    s->hashes = NULL;
}

static void list_push_back(seq_list *l, nb_seq *q) {
    q->next = NULL;
    q->prev = l->tail;
    if (l->tail) l->tail->next = q; else l->head = q;
    l->tail = q;
    l->n++;
}

static void list_push_front(seq_list *l, nb_seq *q) {
    q->prev = NULL;
    q->next = l->head;
    if (l->head) l->head->prev = q; else l->tail = q;
    l->head = q;
    l->n++;
}

static void list_remove(seq_list *l, nb_seq *q) {
    if (q->prev) q->prev->next = q->next; else l->head = q->next;
    if (q->next) q->next->prev = q->prev; else l->tail = q->prev;
    q->prev = q->next = NULL;
    l->n--;
}

nb_status nb_sched_create(const nb_sched_config *c, nb_kvcache *kv, nb_sched **out) {
    *out = NULL;
    if (c->max_num_seqs < 1 || c->max_num_batched_tokens < 1)
        return nb_fail(NB_ERR_RANGE, "scheduler: max_num_seqs %d and max_num_batched_tokens %d must be >= 1",
                       c->max_num_seqs, c->max_num_batched_tokens);
    nb_sched *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    s->cfg = *c;
    s->kv = kv;
    s->bs = nb_kvcache_block_size(kv);
    s->entries = nb_malloc((size_t)c->max_num_seqs * sizeof *s->entries);
    if (!s->entries) {
        free(s);
        return NB_ERR_NOMEM;
    }
    *out = s;
    return NB_OK;
}

void nb_sched_free(nb_sched *s) {
    if (!s) return;
    free(s->entries);
    free(s);
}

nb_status nb_sched_add(nb_sched *s, nb_seq *q) {
    if (q->max_blocks > nb_kvcache_n_blocks(s->kv))
        return nb_fail(NB_ERR_CAPACITY, "a sequence of up to %d tokens needs %d KV blocks of %d tokens but the pool "
                       "has only %lld", q->cap, q->max_blocks, s->bs, (long long)nb_kvcache_n_blocks(s->kv));
    q->state = NB_SEQ_WAITING;
    list_push_back(&s->waiting, q);
    return NB_OK;
}

static void release_blocks(nb_sched *s, nb_seq *q) {
    for (int32_t i = q->n_blocks - 1; i >= 0; i--) nb_kvcache_release(s->kv, q->blocks[i]);
    q->n_blocks = 0;
    q->n_computed = 0;
}

/* Hashes of the first n full token blocks of q. */
static void hash_upto(nb_sched *s, nb_seq *q, int32_t n) {
    for (; q->n_hashed < n; q->n_hashed++) {
        int32_t i = q->n_hashed;
        q->hashes[i] = nb_kvcache_hash(i ? q->hashes[i - 1] : 0, q->tokens + (int64_t)i * s->bs, s->bs);
    }
}

/* Blocks (and a private copy of the first block written) for tokens up to
 * `upto`; false when the pool ran out (blocks taken so far are kept). */
static bool ensure_blocks(nb_sched *s, nb_seq *q, int32_t upto) {
    int32_t need = (int32_t)(((int64_t)upto + s->bs - 1) / s->bs);
    NB_ASSERT(need <= q->max_blocks);
    int32_t first = q->n_computed / s->bs;
    if (first < q->n_blocks && nb_kvcache_refcount(s->kv, q->blocks[first]) > 1 &&
        nb_kvcache_cow(s->kv, &q->blocks[first]) != NB_OK)
        return false;
    while (q->n_blocks < need) {
        int32_t b = nb_kvcache_alloc(s->kv, q->n_blocks > 0 ? q->blocks[q->n_blocks - 1] : -1);
        if (b < 0) return false;
        q->blocks[q->n_blocks++] = b;
    }
    return true;
}

static void preempt(nb_sched *s, nb_seq *q, nb_sched_out *out, int32_t *budget) {
    for (int32_t i = 0; i < out->n_entries; i++)
        if (out->e[i].seq == q) {
            *budget += out->e[i].n;
            out->n_tokens -= out->e[i].n;
            if (out->e[i].prefill) out->n_prefill_tokens -= out->e[i].n;
            memmove(&out->e[i], &out->e[i + 1], (size_t)(out->n_entries - i - 1) * sizeof out->e[0]);
            out->n_entries--;
            break;
        }
    list_remove(&s->running, q);
    release_blocks(s, q);
    q->state = NB_SEQ_WAITING;
    q->preempted = true;
    q->n_preemptions++;
    s->preemptions_total++;
    out->n_preempted++;
    list_push_front(&s->waiting, q);
}

static bool scheduled(const nb_sched_out *out, const nb_seq *q) {
    for (int32_t i = 0; i < out->n_entries; i++)
        if (out->e[i].seq == q) return true;
    return false;
}

static void add_entry(nb_sched_out *out, nb_seq *q, int32_t n, bool prefill, int32_t *budget) {
    nb_sched_entry *e = &out->e[out->n_entries++];
    e->seq = q;
    e->start = q->n_computed;
    e->n = n;
    e->sample = q->n_computed + n == q->n_tokens;
    e->prefill = prefill;
    out->n_tokens += n;
    if (prefill) out->n_prefill_tokens += n;
    *budget -= n;
    q->started = true;
}

/* Tokens a prefill entry may take now: what is left of the step's budget and
 * of its prefill share. */
static int32_t prefill_room(const nb_sched *s, const nb_sched_out *out, int32_t budget) {
    if (s->cfg.max_prefill_tokens <= 0) return budget;
    return NB_MIN(budget, s->cfg.max_prefill_tokens - out->n_prefill_tokens);
}

void nb_sched_step(nb_sched *s, nb_sched_out *out) {
    memset(out, 0, sizeof *out);
    out->e = s->entries;
    int32_t budget = s->cfg.max_num_batched_tokens;
    for (int pass = 0; pass < 2; pass++) {
        for (nb_seq *q = s->running.head; q && budget > 0;) {
            int32_t need = q->n_tokens - q->n_computed;
            NB_ASSERT(need >= 1);
            if ((pass == 0) != (need == 1) || scheduled(out, q)) {
                q = q->next;
                continue;
            }
            int32_t room = pass == 0 ? budget : prefill_room(s, out, budget);
            if (room <= 0) break; /* pass 1: the prefill share is spent */
            int32_t n = NB_MIN(need, room);
            bool self = false;
            while (!ensure_blocks(s, q, q->n_computed + n)) {
                nb_seq *victim = s->running.tail;
                preempt(s, victim, out, &budget);
                if (victim == q) {
                    self = true;
                    break;
                }
            }
            if (self) break; /* q was the tail: nothing after it is left */
            add_entry(out, q, n, pass == 1, &budget);
            q = q->next;
        }
    }
    if (out->n_preempted) return;
    while (s->waiting.head && budget > 0 && s->running.n < s->cfg.max_num_seqs) {
        nb_seq *q = s->waiting.head;
        int32_t room = prefill_room(s, out, budget);
        if (room <= 0) break;
        int32_t hit = 0;
        if (q->n_blocks == 0 && nb_kvcache_prefix_caching(s->kv)) {
            int32_t max_hit = (q->n_tokens - 1) / s->bs;
            hash_upto(s, q, max_hit);
            for (int32_t i = 0; i < max_hit; i++) {
                int32_t b = nb_kvcache_lookup(s->kv, q->hashes[i], i ? q->hashes[i - 1] : 0,
                                              q->tokens + (int64_t)i * s->bs);
                if (b < 0) break;
                q->blocks[q->n_blocks++] = b;
            }
            hit = q->n_blocks * s->bs;
            q->n_computed = hit;
        }
        int32_t n = NB_MIN(q->n_tokens - q->n_computed, room);
        if (!ensure_blocks(s, q, q->n_computed + n)) {
            release_blocks(s, q); /* wait for blocks; FCFS: nothing behind it goes first */
            break;
        }
        if (nb_kvcache_prefix_caching(s->kv)) {
            s->prefix_queries += (uint64_t)q->n_tokens;
            s->prefix_hits += (uint64_t)hit;
            if (!q->started) q->n_cached = hit;
        }
        list_remove(&s->waiting, q);
        q->state = NB_SEQ_RUNNING;
        q->preempted = false;
        list_push_back(&s->running, q);
        add_entry(out, q, n, true, &budget);
    }
}

void nb_sched_advance(nb_sched *s, const nb_sched_out *out) {
    for (int32_t i = 0; i < out->n_entries; i++) {
        nb_seq *q = out->e[i].seq;
        int32_t before = q->n_computed / s->bs;
        q->n_computed += out->e[i].n;
        NB_ASSERT(q->n_computed <= q->n_tokens);
        int32_t full = q->n_computed / s->bs;
        if (!nb_kvcache_prefix_caching(s->kv) || full <= before) continue;
        hash_upto(s, q, full);
        for (int32_t b = before; b < full; b++)
            nb_kvcache_commit(s->kv, q->blocks[b], q->hashes[b], b ? q->hashes[b - 1] : 0,
                              q->tokens + (int64_t)b * s->bs);
    }
}

void nb_sched_append(nb_seq *q, int32_t token) {
    NB_ASSERT(q->n_tokens < q->cap);
    q->tokens[q->n_tokens++] = token;
}

void nb_sched_finish(nb_sched *s, nb_seq *q) {
    if (q->state == NB_SEQ_RUNNING) list_remove(&s->running, q);
    else if (q->state == NB_SEQ_WAITING) list_remove(&s->waiting, q);
    release_blocks(s, q);
    q->state = NB_SEQ_FINISHED;
}

void nb_sched_stats_get(const nb_sched *s, nb_sched_stats *st) {
    memset(st, 0, sizeof *st);
    st->running = s->running.n;
    st->waiting = s->waiting.n;
    for (nb_seq *q = s->waiting.head; q; q = q->next) st->preempted += q->preempted;
    st->preemptions_total = s->preemptions_total;
    st->prefix_queries_tokens = s->prefix_queries;
    st->prefix_hit_tokens = s->prefix_hits;
}

bool nb_sched_idle(const nb_sched *s) { return !s->running.head && !s->waiting.head; }
nb_seq *nb_sched_running(const nb_sched *s) { return s->running.head; }
nb_seq *nb_sched_waiting(const nb_sched *s) { return s->waiting.head; }
