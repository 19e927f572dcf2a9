/* The engine loop (see engine.h): glue between the request queue, the
 * scheduler (sched.h) over the block manager (kvcache.h), the batched
 * forward pass (model/forward.h), the sampler, the streaming detokenizer and
 * stop strings (stop.h).
 *
 * Threads: callers only touch `incoming`, `aborts`, the counters and the
 * stats snapshot, under `mu`; everything else belongs to the loop thread.
 * The loop sleeps on `cv` while it has nothing to do. */
#include "engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/log.h"
#include "engine/budget.h"
#include "engine/grammar.h"
#include "engine/sched.h"
#include "engine/stop.h"
#include "model/forward.h"
#include "plan/plan.h"

typedef struct req {
    nb_seq seq;
    uint64_t id;
    nb_sampling sampling;
    int32_t max_tokens, min_tokens, logprobs;
    bool ignore_eos, banned;
    int32_t *stop_ids;
    size_t n_stop_ids;
    nb_sink_fn sink;
    void *ud;
    nb_sampler *sampler;
    nb_grammar *grammar;        /* output constraint, owned */
    nb_gmatch *gm;              /* its matcher */
    nb_detok dt;
    bool render_special;        /* control tokens' text is output (and fed to the constraint) */
    nb_stop stop;
    int32_t n_gen;
    bool added, counted_waiting;
    double t_submit, t_sched, t_first;
    struct req *next;           /* incoming list, then the live list */
    struct req *live_prev, *live_next;
} req;

struct nb_engine {
    nb_model *model;
    nb_tokenizer *tok;
    nb_kv_pool kv;
    nb_fwd *fwd;
    nb_kvcache *kvc;
    nb_sched *sched;
    nb_engine_config cfg;       /* resolved */
    int32_t n_vocab;
    uint64_t kv_bytes_per_token, kv_pool_bytes;
    char account[2048];

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    req *in_head, *in_tail;     /* submitted, not yet seen by the loop */
    uint64_t *aborts;
    size_t n_aborts, cap_aborts;
    bool stopping;
    uint64_t next_id;
    int32_t n_waiting;          /* submitted and not yet scheduled (for max_waiting) */
    nb_engine_stats stats;      /* snapshot, published after each step */

    /* loop-thread state */
    req *live;                  /* every request the loop knows */
    int32_t *b_tokens, *b_pos, *b_seq;
    bool *b_want;
    nb_seq_view *b_views;
    float *logits, *row_copy;
    nb_vtrie *vtrie;            /* the vocabulary as a byte trie, built for the first constrained request */
    nb_vtrie *vtrie_special;    /* the same with control tokens, for the first one with render_special */
    int32_t *eog;               /* end-of-generation ids */
    size_t n_eog;
    uint8_t *allowed;           /* the constraint's mask of this step */
    struct req **to_sample;
    char *text;
    size_t text_cap, piece_cap;
    char *piece;
    uint64_t prompt_tokens_total, generation_tokens_total, steps_total, requests_finished[5];
    double last_step_s;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void nb_engine_config_defaults(nb_engine_config *c) {
    memset(c, 0, sizeof *c);
    c->max_num_seqs = 64;
    /* The step's token budget: running decodes first, then prompt chunks
     * (sched.h). Left 0 here, nb_engine_create resolves it: max(256,
     * max_num_seqs) with no separate prefill share (prompt chunks take what
     * the decodes leave), or max_num_seqs + the share when one is set. A
     * 256-token step keeps TPOT short while prompts arrive and costs a long
     * prompt one extra weight read per 256 tokens; with 32 streams and
     * 80-token prompts on a quiet 2-core machine it gave 6-8% more output
     * tok/s than 128 with lower TTFT and TPOT p99, and 384 / 512 no more
     * throughput with a higher TTFT p50 (docs/speed.md, "Session 10";
     * docs/serve.md, "Chunked prefill"). */
    c->max_num_batched_tokens = 0;
    c->max_prefill_tokens = 0;
    c->block_size = 16;
    c->memory_utilization = 0.90;
    c->kv_cache_dtype = NB_KV_AUTO;
    c->enable_prefix_caching = true;
    c->max_waiting = 1024;
}

const char *nb_finish_reason_str(nb_finish_reason r) {
    switch (r) {
    case NB_FINISH_STOP: return "stop";
    case NB_FINISH_LENGTH: return "length";
    case NB_FINISH_ABORT: return "abort";
    case NB_FINISH_ERROR: return "error";
    default: return "none";
    }
}

const nb_model *nb_engine_model(const nb_engine *e) { return e->model; }
const nb_tokenizer *nb_engine_tokenizer(const nb_engine *e) { return e->tok; }
int nb_engine_threads(const nb_engine *e) { return nb_fwd_threads(e->fwd); }
const char *nb_engine_isa(const nb_engine *e) { return nb_fwd_isa(e->fwd); }
const char *nb_engine_attn_isa(const nb_engine *e) { return nb_fwd_attn_isa(e->fwd); }
const char *nb_engine_account(const nb_engine *e) { return e->account; }

/* ---- requests ------------------------------------------------------------ */

static void req_free(req *r) {
    if (!r) return;
    nb_seq_release(&r->seq);
    nb_sampler_free(r->sampler);
    nb_gmatch_free(r->gm);
    nb_grammar_free(r->grammar);
    nb_stop_free(&r->stop);
    free(r->stop_ids);
    free(r);
}

static void emit(nb_engine *e, req *r, int32_t token, const char *text, size_t n, nb_finish_reason fin,
                 const char *err) {
    nb_token_event ev;
    memset(&ev, 0, sizeof ev);
    ev.request_id = r->id;
    ev.token = token;
    ev.text = text ? text : "";
    ev.text_len = text ? n : 0;
    ev.finish = fin;
    ev.error = err;
    ev.n_prompt_tokens = r->seq.n_prompt;
    ev.n_generated = r->n_gen;
    ev.n_cached_tokens = r->seq.n_cached;
    ev.queue_s = r->t_sched > 0 ? r->t_sched - r->t_submit : 0;
    ev.ttft_s = r->t_first > 0 ? r->t_first - r->t_submit : 0;
    ev.logprob = NAN;
    (void)e;
    r->sink(r->ud, &ev);
}

static void live_remove(nb_engine *e, req *r) {
    if (r->live_prev) r->live_prev->live_next = r->live_next; else e->live = r->live_next;
    if (r->live_next) r->live_next->live_prev = r->live_prev;
    r->live_prev = r->live_next = NULL;
}

static void waiting_done(nb_engine *e, req *r) {
    if (!r->counted_waiting) return;
    r->counted_waiting = false;
    pthread_mutex_lock(&e->mu);
    e->n_waiting--;
    pthread_mutex_unlock(&e->mu);
}

/* Ends a request the loop knows: blocks back, final event for abort/error
 * (stop/length send theirs with the last token), freed. */
static void finish(nb_engine *e, req *r, nb_finish_reason fin, const char *err, bool send) {
    if (r->added) nb_sched_finish(e->sched, &r->seq);
    live_remove(e, r);
    waiting_done(e, r);
    if (send) emit(e, r, -1, NULL, 0, fin, err);
    e->requests_finished[fin]++;
    req_free(r);
}

/* Validates one request and builds its state; nothing is queued. */
static nb_status req_build(nb_engine *e, const nb_request_params *p, req **out) {
    const nb_engine_config *c = &e->cfg;
    *out = NULL;
    if (!p->sink) return nb_fail(NB_ERR_INVALID, "request: no sink to deliver tokens to");
    if (!p->prompt || p->n_prompt == 0) return nb_fail(NB_ERR_INVALID, "prompt: empty (at least 1 token)");
    if (p->max_tokens < 1) return nb_fail(NB_ERR_RANGE, "max_tokens %d: must be >= 1", p->max_tokens);
    if (p->min_tokens < 0 || p->min_tokens > p->max_tokens)
        return nb_fail(NB_ERR_RANGE, "min_tokens %d: allowed 0..max_tokens (%d)", p->min_tokens, p->max_tokens);
    if (p->n_prompt + (uint64_t)p->max_tokens > (uint64_t)c->max_model_len)
        return nb_fail(NB_ERR_RANGE, "prompt (%zu tokens) + max_tokens (%d) = %llu exceeds max_model_len %d",
                       p->n_prompt, p->max_tokens, (unsigned long long)(p->n_prompt + (uint64_t)p->max_tokens),
                       c->max_model_len);
    if (p->logprobs < -1 || p->logprobs > NB_LIMIT_TOP_LOGPROBS)
        return nb_fail(NB_ERR_RANGE, "logprobs %d: allowed 0..%d (or none)", p->logprobs, NB_LIMIT_TOP_LOGPROBS);
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= e->n_vocab)
            return nb_fail(NB_ERR_RANGE, "prompt[%zu]: token id %d outside 0..%d", i, p->prompt[i], e->n_vocab - 1);
    if (p->n_stop_ids > 1024) return nb_fail(NB_ERR_RANGE, "stop_token_ids: %zu ids, at most 1024", p->n_stop_ids);
    if (p->n_stop_ids && !p->stop_ids) return nb_fail(NB_ERR_INVALID, "stop_token_ids: %zu ids announced, none given", p->n_stop_ids);
    for (size_t i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= e->n_vocab)
            return nb_fail(NB_ERR_RANGE, "stop_token_ids[%zu]: %d outside 0..%d", i, p->stop_ids[i], e->n_vocab - 1);
    NB_TRY(nb_sampling_validate(&p->sampling));
    NB_TRY(nb_logit_bias_validate(p->logit_bias_ids, p->logit_bias, p->n_logit_bias, e->n_vocab));

    req *r = nb_calloc(1, sizeof *r);
    if (!r) return NB_ERR_NOMEM;
    nb_status st = nb_seq_init(&r->seq, 0, p->prompt, (int32_t)p->n_prompt, (int32_t)p->n_prompt + p->max_tokens,
                               c->block_size);
    if (st == NB_OK) st = nb_stop_init(&r->stop, p->stop, p->n_stop);
    if (st == NB_OK) st = nb_sampler_create(&p->sampling, e->n_vocab, &r->sampler);
    if (st == NB_OK) st = nb_sampler_set_logit_bias(r->sampler, p->logit_bias_ids, p->logit_bias, p->n_logit_bias);
    if (st == NB_OK && p->grammar) st = nb_gmatch_create(p->grammar, &r->gm);
    if (st == NB_OK && p->n_stop_ids) {
        r->stop_ids = nb_malloc(p->n_stop_ids * sizeof *r->stop_ids);
        if (!r->stop_ids) st = NB_ERR_NOMEM;
        else memcpy(r->stop_ids, p->stop_ids, p->n_stop_ids * sizeof *r->stop_ids);
    }
    if (st != NB_OK) {
        req_free(r);
        return st;
    }
    nb_sampler_set_prompt(r->sampler, p->prompt, p->n_prompt);
    nb_detok_init(&r->dt, e->tok);
    r->dt.render_special = r->render_special = p->render_special;
    r->sampling = p->sampling;
    r->max_tokens = p->max_tokens;
    r->min_tokens = p->min_tokens;
    r->logprobs = p->logprobs;
    r->ignore_eos = p->ignore_eos;
    r->n_stop_ids = p->n_stop_ids;
    r->grammar = p->grammar; /* ours from here on (req_free frees it) */
    r->sink = p->sink;
    r->ud = p->ud;
    r->seq.ud = r;
    r->t_submit = now_s();
    *out = r;
    return NB_OK;
}

/* A request that was built but not queued: the caller keeps its grammar. */
static void req_unbuild(req *r) {
    r->grammar = NULL;
    req_free(r);
}

nb_status nb_engine_submit_batch(nb_engine *e, const nb_request_params *ps, size_t n, uint64_t *ids) {
    const nb_engine_config *c = &e->cfg;
    if (ids) memset(ids, 0, n * sizeof *ids);
    req *one = NULL, **rs = n <= 1 ? &one : nb_calloc(n, sizeof *rs); /* one request: no allocation */
    if (!rs) return NB_ERR_NOMEM;
    nb_status st = NB_OK;
    for (size_t i = 0; i < n && st == NB_OK; i++) st = req_build(e, &ps[i], &rs[i]);
    if (st == NB_OK) {
        pthread_mutex_lock(&e->mu);
        if (e->stopping) {
            st = nb_fail(NB_ERR_ABORTED, "the engine is shutting down");
        } else if ((uint64_t)e->n_waiting + n > (uint64_t)c->max_waiting) {
            st = nb_fail(NB_ERR_OVERLOADED, "overloaded: %d requests are waiting (limit %d); retry later",
                         e->n_waiting, c->max_waiting);
        } else {
            for (size_t i = 0; i < n; i++) {
                req *r = rs[i];
                r->id = r->seq.id = ++e->next_id;
                r->counted_waiting = true;
                e->n_waiting++;
                if (e->in_tail) e->in_tail->next = r; else e->in_head = r;
                e->in_tail = r;
                if (ids) ids[i] = r->id;
            }
            pthread_cond_signal(&e->cv);
        }
        pthread_mutex_unlock(&e->mu);
    }
    if (st != NB_OK)
        for (size_t i = 0; i < n; i++)
            if (rs[i]) req_unbuild(rs[i]);
    if (rs != &one) free(rs);
    return st;
}

nb_status nb_engine_submit(nb_engine *e, const nb_request_params *p, uint64_t *id) {
    return nb_engine_submit_batch(e, p, 1, id);
}

void nb_engine_abort(nb_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    if (e->n_aborts == e->cap_aborts) {
        size_t cap = e->cap_aborts ? 2 * e->cap_aborts : 16;
        uint64_t *a = realloc(e->aborts, cap * sizeof *a);
        if (!a) { /* cannot queue it: the request runs to its end */
            pthread_mutex_unlock(&e->mu);
            NB_WARN("engine: out of memory queueing an abort of request %llu", (unsigned long long)id);
            return;
        }
        e->aborts = a;
        e->cap_aborts = cap;
    }
    e->aborts[e->n_aborts++] = id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void nb_engine_get_stats(nb_engine *e, nb_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}

/* ---- the loop ------------------------------------------------------------- */

static bool is_stop_id(const req *r, int32_t t) {
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == t) return true;
    return false;
}

static void set_bans(nb_engine *e, req *r, bool on) {
    if (r->banned == on) return;
    r->banned = on;
    int32_t eos = nb_tokenizer_eos(e->tok);
    if (eos >= 0) nb_sampler_ban(r->sampler, eos, on);
    for (int32_t t = 0; t < e->n_vocab && t < nb_tokenizer_n_vocab(e->tok); t++)
        if (t != eos && nb_tokenizer_is_eog(e->tok, t)) nb_sampler_ban(r->sampler, t, on);
    for (size_t i = 0; i < r->n_stop_ids; i++) nb_sampler_ban(r->sampler, r->stop_ids[i], on);
}

static bool text_reserve(nb_engine *e, size_t n) {
    if (n <= e->text_cap) return true;
    size_t cap = NB_MAX(n, 2 * e->text_cap);
    char *t = realloc(e->text, cap);
    if (!t) return false;
    e->text = t;
    e->text_cap = cap;
    return true;
}

/* Masks r's logits row to the tokens its output constraint allows (grammar.h);
 * false when none is allowed (the request has been finished with an error). */
static bool constrain(nb_engine *e, req *r, float *row) {
    nb_vtrie **vt = r->render_special ? &e->vtrie_special : &e->vtrie;
    if (!*vt && (r->render_special ? nb_vtrie_create_special(e->tok, vt) : nb_vtrie_create(e->tok, vt)) != NB_OK) {
        finish(e, r, NB_FINISH_ERROR, "out of memory building the vocabulary trie for the output constraint", true);
        return false;
    }
    if (!e->allowed) {
        e->eog = nb_malloc((size_t)e->n_vocab * sizeof *e->eog);
        e->allowed = nb_malloc((size_t)e->n_vocab);
        if (!e->eog || !e->allowed) {
            finish(e, r, NB_FINISH_ERROR, "out of memory for the output constraint's mask", true);
            return false;
        }
        for (int32_t t = 0; t < e->n_vocab; t++)
            if (nb_tokenizer_is_eog(e->tok, t)) e->eog[e->n_eog++] = t;
    }
    int32_t left = r->max_tokens - r->n_gen, room = e->cfg.max_model_len - r->seq.n_tokens;
    int32_t budget = left < room ? left : room;
    if (nb_grammar_mask(*vt, r->gm, budget, e->eog, e->n_eog, e->allowed, e->n_vocab) == 0) {
        finish(e, r, NB_FINISH_ERROR, "the output constraint admits no token here (a pattern that cannot be completed?)",
               true);
        return false;
    }
    for (int32_t t = 0; t < e->n_vocab; t++)
        if (!e->allowed[t]) row[t] = -INFINITY;
    return true;
}

/* Samples the next token of r from its logits row, streams it, and ends the
 * request when it is done. */
static void on_logits(nb_engine *e, req *r, float *row) {
    nb_token_event ev;
    memset(&ev, 0, sizeof ev);
    double lse = 0;
    if (r->logprobs >= 0) {
        lse = nb_logsumexp(row, e->n_vocab);
        memcpy(e->row_copy, row, (size_t)e->n_vocab * sizeof *row);
        if (r->logprobs > 0) {
            nb_top_k(row, e->n_vocab, r->logprobs, ev.top_ids, ev.top_logprobs);
            for (int32_t i = 0; i < r->logprobs; i++) ev.top_logprobs[i] = (float)(ev.top_logprobs[i] - lse);
            ev.n_top = r->logprobs;
        }
    }
    set_bans(e, r, r->n_gen < r->min_tokens);
    if (r->gm && !constrain(e, r, row)) return;
    int32_t tok = nb_sampler_sample(r->sampler, row);
    if (tok < 0) {
        finish(e, r, NB_FINISH_ERROR,
               r->gm ? "the output constraint and min_tokens leave no token" : "every token is banned (min_tokens with no other token allowed)",
               true);
        return;
    }
    double t = now_s();
    if (r->n_gen == 0) r->t_first = t;
    r->n_gen++;
    e->generation_tokens_total++;
    nb_sched_append(&r->seq, tok);

    nb_finish_reason fin = NB_FINISH_NONE;
    size_t n_text = 0;
    bool eog = nb_tokenizer_is_eog(e->tok, tok);
    bool closed = false;
    if (r->gm && !eog) {
        size_t len;
        const char *piece = nb_token_piece_ref(e->tok, tok, r->render_special, &len);
        if (piece && len) nb_gmatch_feed(r->gm, piece, len); /* the mask allowed it, so it fits */
        closed = nb_gmatch_closed(r->gm);
    }
    if ((eog && (!r->ignore_eos || r->gm)) || is_stop_id(r, tok)) {
        fin = NB_FINISH_STOP;
    } else {
        size_t k = nb_detok_push(&r->dt, tok, e->piece, e->piece_cap);
        const char *o = e->piece;
        size_t no = k;
        /* stop strings count from min_tokens on (vLLM); before that the text passes unchecked */
        if (r->n_gen >= r->min_tokens && nb_stop_push(&r->stop, e->piece, k, &o, &no)) fin = NB_FINISH_STOP;
        if (closed) fin = NB_FINISH_STOP; /* the document is whole and nothing may follow */
        if (no && text_reserve(e, no)) {
            memcpy(e->text, o, no);
            n_text = no;
        }
    }
    if (fin == NB_FINISH_NONE && (r->n_gen >= r->max_tokens || r->seq.n_tokens >= e->cfg.max_model_len))
        fin = NB_FINISH_LENGTH;
    if (fin != NB_FINISH_NONE && !r->stop.stopped) { /* the held-back rest */
        size_t k = nb_detok_flush(&r->dt, e->piece, e->piece_cap);
        const char *o;
        size_t no;
        if (nb_stop_push(&r->stop, e->piece, k, &o, &no) && fin == NB_FINISH_LENGTH) fin = NB_FINISH_STOP;
        if (no && text_reserve(e, n_text + no)) { memcpy(e->text + n_text, o, no); n_text += no; }
        if (!r->stop.stopped) {
            nb_stop_flush(&r->stop, &o, &no);
            if (no && text_reserve(e, n_text + no)) { memcpy(e->text + n_text, o, no); n_text += no; }
        }
    }
    ev.request_id = r->id;
    ev.token = tok;
    ev.text = n_text ? e->text : "";
    ev.text_len = n_text;
    ev.logprob = r->logprobs >= 0 ? (float)(e->row_copy[tok] - lse) : NAN;
    ev.finish = fin;
    ev.n_prompt_tokens = r->seq.n_prompt;
    ev.n_generated = r->n_gen;
    ev.n_cached_tokens = r->seq.n_cached;
    ev.queue_s = r->t_sched - r->t_submit;
    ev.ttft_s = r->t_first - r->t_submit;
    r->sink(r->ud, &ev);
    if (fin != NB_FINISH_NONE) finish(e, r, fin, NULL, false);
}

static void publish_stats(nb_engine *e) {
    nb_sched_stats ss;
    nb_sched_stats_get(e->sched, &ss);
    pthread_mutex_lock(&e->mu);
    nb_engine_stats *s = &e->stats;
    int32_t incoming = 0;
    for (req *r = e->in_head; r; r = r->next) incoming++;
    s->running = ss.running;
    s->waiting = ss.waiting + incoming;
    s->preempted = ss.preempted;
    s->preemptions_total = ss.preemptions_total;
    s->kv_blocks_total = nb_kvcache_n_blocks(e->kvc);
    s->kv_blocks_used = nb_kvcache_n_used(e->kvc);
    s->kv_blocks_cached = nb_kvcache_n_cached(e->kvc);
    s->kv_usage = (double)s->kv_blocks_used / (double)s->kv_blocks_total;
    s->prefix_queries_tokens = ss.prefix_queries_tokens;
    s->prefix_hit_tokens = ss.prefix_hit_tokens;
    s->prompt_tokens_total = e->prompt_tokens_total;
    s->generation_tokens_total = e->generation_tokens_total;
    memcpy(s->requests_finished, e->requests_finished, sizeof s->requests_finished);
    s->steps_total = e->steps_total;
    s->pool_benchings_total = (uint64_t)nb_fwd_pool_benchings(e->fwd); /* this thread is the pool's caller */
    s->last_step_s = e->last_step_s;
    pthread_mutex_unlock(&e->mu);
}

static void step(nb_engine *e) {
    nb_sched_out out;
    nb_sched_step(e->sched, &out);
    if (out.n_entries == 0) {
        /* only possible if the head of the queue can never get its blocks */
        nb_seq *q = nb_sched_waiting(e->sched);
        if (q && !nb_sched_running(e->sched))
            finish(e, q->ud, NB_FINISH_ERROR, "the request does not fit the KV cache even alone", true);
        return;
    }
    double t0 = now_s();
    int32_t n = 0;
    for (int32_t i = 0; i < out.n_entries; i++) {
        nb_sched_entry *en = &out.e[i];
        req *r = en->seq->ud;
        if (r->t_sched == 0) r->t_sched = t0;
        waiting_done(e, r);
        e->b_views[i].blocks = en->seq->blocks;
        e->b_views[i].n_blocks = en->seq->n_blocks;
        for (int32_t j = 0; j < en->n; j++, n++) {
            e->b_tokens[n] = en->seq->tokens[en->start + j];
            e->b_pos[n] = en->start + j;
            e->b_seq[n] = i;
            e->b_want[n] = en->sample && j == en->n - 1;
        }
        if (en->start < en->seq->n_prompt) e->prompt_tokens_total += (uint64_t)NB_MIN(en->n, en->seq->n_prompt - en->start);
    }
    NB_ASSERT(n == out.n_tokens);
    nb_batch b = {n, e->b_tokens, e->b_pos, e->b_seq, e->b_want, out.n_entries, e->b_views};
    nb_status st = nb_fwd_run(e->fwd, &b, e->logits);
    e->steps_total++;
    if (st != NB_OK) {
        char msg[NB_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "forward pass failed: %s", nb_errmsg());
        NB_ERROR("engine: %s", msg);
        for (int32_t i = 0; i < out.n_entries; i++) finish(e, out.e[i].seq->ud, NB_FINISH_ERROR, msg, true);
        return;
    }
    nb_sched_advance(e->sched, &out);
    /* entries may be finished (and freed) while sampling: collect first */
    int32_t k = 0;
    req **to_sample = e->to_sample;
    int32_t nt = 0;
    for (int32_t i = 0; i < out.n_entries; i++)
        if (out.e[i].sample) to_sample[nt++] = out.e[i].seq->ud;
    for (int32_t i = 0; i < nt; i++, k++) on_logits(e, to_sample[i], e->logits + (size_t)k * (size_t)e->n_vocab);
    e->last_step_s = now_s() - t0;
}

static void abort_id(nb_engine *e, uint64_t id) {
    for (req *r = e->live; r; r = r->live_next)
        if (r->id == id) {
            finish(e, r, NB_FINISH_ABORT, NULL, true);
            return;
        }
}

static void *loop(void *arg) {
    nb_engine *e = arg;
    uint64_t *ab = NULL;
    size_t ab_cap = 0;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stopping && !e->in_head && !e->n_aborts && nb_sched_idle(e->sched)) pthread_cond_wait(&e->cv, &e->mu);
        req *in = e->in_head;
        e->in_head = e->in_tail = NULL;
        size_t na = e->n_aborts;
        if (na > ab_cap) {
            uint64_t *a = realloc(ab, na * sizeof *a);
            if (a) { ab = a; ab_cap = na; } else na = ab_cap;
        }
        if (na) memcpy(ab, e->aborts, na * sizeof *ab);
        e->n_aborts -= na;
        if (na && e->n_aborts) memmove(e->aborts, e->aborts + na, e->n_aborts * sizeof *ab);
        bool stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);

        while (in) {
            req *r = in;
            in = in->next;
            r->next = NULL;
            r->live_next = e->live;
            if (e->live) e->live->live_prev = r;
            e->live = r;
            nb_status st = nb_sched_add(e->sched, &r->seq);
            if (st != NB_OK) finish(e, r, NB_FINISH_ERROR, nb_errmsg(), true);
            else r->added = true;
        }
        for (size_t i = 0; i < na; i++) abort_id(e, ab[i]);
        if (stopping) {
            while (e->live) finish(e, e->live, NB_FINISH_ABORT, NULL, true);
            publish_stats(e);
            break;
        }
        if (!nb_sched_idle(e->sched)) step(e);
        publish_stats(e);
        pthread_mutex_lock(&e->mu);
    }
    free(ab);
    return NULL;
}

/* ---- create / free ---------------------------------------------------------- */

static void copy_block(void *ud, int32_t dst, int32_t src) {
    nb_kv_copy_block(ud, dst, src);
}

nb_status nb_engine_create(const char *model_path, const nb_engine_config *cfg, nb_engine **out) {
    *out = NULL;
    if (!model_path || !model_path[0]) return nb_fail(NB_ERR_INVALID, "engine: a model path is required");
    nb_engine_config c;
    if (cfg) c = *cfg; else nb_engine_config_defaults(&c);
    nb_engine_config dflt;
    nb_engine_config_defaults(&dflt);
    if (c.max_num_seqs <= 0) c.max_num_seqs = dflt.max_num_seqs;
    if (c.max_prefill_tokens == 0) c.max_prefill_tokens = -1; /* no share: prefill takes what the decodes leave */
    c.max_num_batched_tokens =
        (int32_t)nb_plan_nibble_step_tokens(c.max_num_batched_tokens, c.max_num_seqs, c.max_prefill_tokens);
    if (c.block_size <= 0) c.block_size = dflt.block_size;
    if (c.memory_utilization <= 0) c.memory_utilization = dflt.memory_utilization;
    if (c.max_waiting <= 0) c.max_waiting = dflt.max_waiting;
    if (c.memory_utilization > 1)
        return nb_fail(NB_ERR_RANGE, "--memory-utilization %g: allowed (0, 1]", c.memory_utilization);
    if (c.block_size > 1024) return nb_fail(NB_ERR_RANGE, "--block-size %d: allowed 1..1024", c.block_size);
    if (c.max_num_seqs > 1 << 16) return nb_fail(NB_ERR_RANGE, "--max-num-seqs %d: allowed 1..65536", c.max_num_seqs);
    if (c.max_num_batched_tokens > 1 << 20)
        return nb_fail(NB_ERR_RANGE, "--max-num-batched-tokens %d: allowed 1..1048576", c.max_num_batched_tokens);
    if (c.max_num_batched_tokens < c.max_num_seqs)
        return nb_fail(NB_ERR_RANGE, "--max-num-batched-tokens (%d) must be >= --max-num-seqs (%d): every running "
                       "sequence needs a token of the step's budget", c.max_num_batched_tokens, c.max_num_seqs);

    nb_engine *e = nb_calloc(1, sizeof *e);
    if (!e) return NB_ERR_NOMEM;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    nb_status st;
    char path[4096];
    snprintf(path, sizeof path, "%s", model_path);
    nb_model_params mp = {.use_mmap = c.use_mmap};
    if ((st = nb_model_load_ex(path, &mp, &e->model)) != NB_OK) goto fail;
    double t_tok = now_s();
    if ((st = nb_tokenizer_load(path, c.tokenizer_path, &e->tok)) != NB_OK) goto fail;
    e->stats.startup_read_s = e->model->load_read_s + (now_s() - t_tok);
    e->stats.startup_repack_s = e->model->load_repack_s;
    c.tokenizer_path = NULL;
    e->n_vocab = e->model->hp.n_vocab;
    if (nb_tokenizer_n_vocab(e->tok) > e->n_vocab) {
        st = nb_fail(NB_ERR_FORMAT, "%s: the tokenizer has %d tokens but the model only %d", path,
                     nb_tokenizer_n_vocab(e->tok), e->n_vocab);
        goto fail;
    }
    int32_t model_len = NB_MIN(e->model->hp.n_ctx_train, e->model->max_ctx);
    if (model_len <= 0) model_len = 2048;
    if (c.max_model_len <= 0) c.max_model_len = model_len;
    if (c.max_model_len > e->model->max_ctx) {
        st = nb_fail(NB_ERR_RANGE, "--max-model-len %d exceeds %d, the sliding-window length up to which this model "
                     "is computed exactly", c.max_model_len, e->model->max_ctx);
        goto fail;
    }
    if (c.max_model_len > model_len)
        NB_WARN("engine: --max-model-len %d is longer than the model's trained context %d", c.max_model_len, model_len);

    nb_kv_type kt;
    if ((st = nb_engine_kv_type(c.kv_cache_dtype, &kt)) != NB_OK) goto fail;
    e->kv_bytes_per_token = nb_kv_bytes_per_token_type(&e->model->hp, kt);
    nb_engine_budget bud;
    if ((st = nb_engine_kv_budget(e->model, &c, e->kv_bytes_per_token, &bud)) != NB_OK) goto fail;
    snprintf(e->account, sizeof e->account, "%s", bud.text);
    if (bud.refused) {
        st = nb_fail(NB_ERR_CAPACITY, "%s", bud.refusal);
        goto fail;
    }
    if (bud.warning[0]) NB_WARN("engine: %s", bud.warning);
    int64_t n_blocks = bud.n_blocks;
    e->kv_pool_bytes = (uint64_t)n_blocks * (uint64_t)c.block_size * e->kv_bytes_per_token;
    e->cfg = c;
    double t_kv = now_s();
    if ((st = nb_kv_pool_init_type(&e->kv, &e->model->hp, c.block_size, n_blocks, kt)) != NB_OK) goto fail;
    if ((st = nb_kvcache_create(n_blocks, c.block_size, c.enable_prefix_caching, &e->kvc)) != NB_OK) goto fail;
    nb_kvcache_set_copy(e->kvc, copy_block, &e->kv);
    nb_sched_config sc = {c.max_num_seqs, c.max_num_batched_tokens, c.max_prefill_tokens};
    if ((st = nb_sched_create(&sc, e->kvc, &e->sched)) != NB_OK) goto fail;
    if ((st = nb_fwd_create(e->model, &e->kv, c.n_threads, c.max_num_batched_tokens, &e->fwd)) != NB_OK) goto fail;
    /* The pool is committed now (model/kv.h) where the host, or its cgroup,
     * can back it with a tenth to spare; else its pages come with the
     * stores, as they did before session 49. */
    uint64_t avail = nb_mem_available();
    if (avail && e->kv_pool_bytes > avail / 10 * 9)
        NB_WARN("engine: the KV pool (%.2f GiB) is more than 90%% of the %.2f GiB this host or its cgroup has "
                "available now: left uncommitted, its pages are backed as tokens are stored (slower steps, and a "
                "full pool may not fit); lower --memory-utilization or --max-model-len, or set --kv-cache-bytes",
                (double)e->kv_pool_bytes / (1024.0 * 1024.0 * 1024.0), (double)avail / (1024.0 * 1024.0 * 1024.0));
    else {
        if (e->kv_pool_bytes >= 1ull << 30) /* seconds on a cold host: say what startup is doing */
            NB_INFO("engine: committing the KV pool's %.2f GiB", (double)e->kv_pool_bytes / (1024.0 * 1024.0 * 1024.0));
        nb_fwd_commit_kv(e->fwd);
    }
    size_t T = (size_t)c.max_num_batched_tokens, S = (size_t)c.max_num_seqs;
    e->b_tokens = nb_malloc(T * sizeof(int32_t));
    e->b_pos = nb_malloc(T * sizeof(int32_t));
    e->b_seq = nb_malloc(T * sizeof(int32_t));
    e->b_want = nb_malloc(T * sizeof(bool));
    e->b_views = nb_malloc(S * sizeof(nb_seq_view));
    e->logits = nb_malloc(S * (size_t)e->n_vocab * sizeof(float));
    e->row_copy = nb_malloc((size_t)e->n_vocab * sizeof(float));
    e->to_sample = nb_malloc(S * sizeof *e->to_sample);
    e->piece_cap = nb_tokenizer_max_piece(e->tok) + NB_DETOK_SLACK;
    e->piece = nb_malloc(e->piece_cap);
    if (!e->b_tokens || !e->b_pos || !e->b_seq || !e->b_want || !e->b_views || !e->logits || !e->row_copy || !e->to_sample ||
        !e->piece || !text_reserve(e, 4096)) {
        st = nb_fail(NB_ERR_NOMEM, "out of memory for the engine's step buffers");
        goto fail;
    }
    e->stats.max_model_len = c.max_model_len;
    e->stats.max_num_seqs = c.max_num_seqs;
    e->stats.max_num_batched_tokens = c.max_num_batched_tokens;
    e->stats.block_size = c.block_size;
    e->stats.kv_bytes_per_token = e->kv_bytes_per_token;
    e->stats.kv_pool_bytes = e->kv_pool_bytes;
    e->stats.weight_bytes = e->model->weight_bytes;
    e->stats.kv_blocks_total = n_blocks;
    if (pthread_create(&e->thread, NULL, loop, e) != 0) {
        st = nb_fail(NB_ERR_INTERNAL, "cannot start the engine thread");
        goto fail;
    }
    e->thread_started = true;
    pthread_mutex_lock(&e->mu);
    e->stats.startup_kv_s = now_s() - t_kv;
    pthread_mutex_unlock(&e->mu);
    *out = e;
    return NB_OK;
fail:
    nb_engine_free(e);
    return st;
}

void nb_engine_free(nb_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    nb_sched_free(e->sched);
    nb_kvcache_free(e->kvc);
    nb_fwd_free(e->fwd);
    nb_kv_pool_free(&e->kv);
    nb_tokenizer_free(e->tok);
    nb_model_free(e->model);
    free(e->aborts);
    free(e->b_tokens); free(e->b_pos); free(e->b_seq); free(e->b_want); free(e->b_views);
    free(e->logits); free(e->row_copy); nb_vtrie_free(e->vtrie); nb_vtrie_free(e->vtrie_special); free(e->eog); free(e->allowed); free(e->to_sample); free(e->text); free(e->piece);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
