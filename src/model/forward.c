/* The llama / qwen2 forward pass over a batch (see forward.h):
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x) * attn_norm
 *              q,k,v = h Wq (+bq), h Wk (+bk), h Wv (+bv); rope(q, k)
 *              store k,v in the pool; a = softmax(q k^T / sqrt(hd)) v  (causal, GQA)
 *              x += a Wo
 *              h = rmsnorm(x) * ffn_norm;  x += (silu(h Wgate) * h Wup) Wdown
 *   logits = rmsnorm(x) * output_norm  Woutput   (wanted rows only) */
#include "model/forward.h"

#include "model/attn.h"

#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nb_fwd {
    const nb_model *m;
    nb_kv_pool *kv;
    nb_kctx k;
    nb_attn_batch attn;
    int32_t max_tokens;
    float *x, *xn, *q, *kk, *vv, *att, *g, *u, *rope; /* [max_tokens][...] */
    int32_t *out_rows;
    nb_fwd_capture_fn cap;  /* calibration hook (NULL: none) */
    void *cap_ud;
    nb_prefetch_tune tune;  /* the decode prefetch distance measured at creation (n 0: not measured) */
};

/* The decode prefetch distance measured on the weights a token streams, in
 * the order it streams them, where the dispatch table asks for it. */
static nb_status tune_prefetch(nb_fwd *f) {
    const nb_model *m = f->m;
    if (!m->resident) { /* a file mapping (--mmap): pages still on disk would time the disk, not memory */
        snprintf(f->tune.why, sizeof f->tune.why, "not measured: the weights are computed from the file mapping (--mmap)");
        f->tune.table = f->tune.chosen = f->k.prefetch;
        f->tune.table_l2 = f->tune.chosen_l2 = f->k.prefetch_l2;
        f->tune.table_streams = f->tune.chosen_streams = f->k.streams;
        return NB_OK;
    }
    enum { PER_LAYER = 7 };
    const nb_tensor **W = nb_malloc((size_t)(m->hp.n_layer * PER_LAYER + 1) * sizeof *W);
    if (!W) return NB_ERR_NOMEM;
    int n = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const nb_layer *L = &m->layers[l];
        const nb_tensor *ws[PER_LAYER] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int i = 0; i < PER_LAYER; i++)
            if (ws[i]) W[n++] = ws[i];
    }
    if (m->output) W[n++] = m->output;
    unsigned what = (f->k.d->decode_prefetch_tune ? NB_TUNE_PREFETCH : 0) | (f->k.d->decode_streams_tune ? NB_TUNE_STREAMS : 0);
    nb_status st = nb_kctx_tune_prefetch(&f->k, W, n, NB_TUNE_MIN_BYTES, what, &f->tune);
    free(W);
    if (st == NB_ERR_NOMEM) return st;
    if (st != NB_OK) { /* a measurement is not worth a failed load: the CPU's distance stays */
        NB_WARN("decode prefetch: not measured (%s); keeping %d bytes", nb_errmsg(), f->k.prefetch);
        snprintf(f->tune.why, sizeof f->tune.why, "not measured: %s", nb_errmsg());
        return NB_OK;
    }
    NB_INFO("decode prefetch %d bytes, L2 %d, %d stream(s) per thread: %s", f->k.prefetch, f->k.prefetch_l2,
            f->k.streams, f->tune.why);
    return NB_OK;
}

static float *alloc_f(int64_t n) { return aligned_alloc(64, (size_t)((n * 4 + 63) & ~63)); }

nb_status nb_fwd_create(const nb_model *m, nb_kv_pool *kv, int n_threads, int32_t max_tokens, nb_fwd **out) {
    return nb_fwd_create_with(m, kv, n_threads, max_tokens, nb_dispatch_default(), out);
}

nb_status nb_fwd_create_with(const nb_model *m, nb_kv_pool *kv, int n_threads, int32_t max_tokens,
                             const struct nb_dispatch *d, nb_fwd **out) {
    *out = NULL;
    if (max_tokens < 1 || max_tokens > 1 << 20)
        return nb_fail(NB_ERR_RANGE, "max tokens per step %d outside 1..1048576", max_tokens);
    nb_fwd *f = nb_calloc(1, sizeof *f);
    if (!f) return NB_ERR_NOMEM;
    f->m = m;
    f->kv = kv;
    f->max_tokens = max_tokens;
    nb_status st = nb_kctx_init_with(&f->k, n_threads, d);
    if (st != NB_OK) { free(f); return st; }
    if ((st = nb_attn_batch_init(&f->attn, &m->hp, f->k.d, nb_pool_size(f->k.pool), kv->block_size)) !=
        NB_OK) {
        nb_fwd_free(f);
        return st;
    }
    if (kv->n_layer != m->hp.n_layer || kv->head_dim != m->hp.head_dim || kv->n_head_kv != m->hp.n_head_kv) {
        nb_fwd_free(f);
        return nb_fail(NB_ERR_INVALID, "KV pool shape (%d layers x %d heads x %d) does not match the model's "
                       "(%d x %d x %d)", kv->n_layer, kv->n_head_kv, kv->head_dim, m->hp.n_layer, m->hp.n_head_kv,
                       m->hp.head_dim);
    }
    const nb_arch_desc *hp = &m->hp;
    int64_t T = max_tokens, E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim,
            KV = (int64_t)hp->n_head_kv * hp->head_dim;
    f->x = alloc_f(T * E);
    f->xn = alloc_f(T * NB_MAX(E, Q));
    f->q = alloc_f(T * Q);
    f->kk = alloc_f(T * KV);
    f->vv = alloc_f(T * KV);
    f->att = alloc_f(T * Q);
    f->g = alloc_f(T * hp->n_ff);
    f->u = alloc_f(T * hp->n_ff);
    f->rope = alloc_f(T * hp->rope_dim);
    f->out_rows = nb_malloc((size_t)T * sizeof(int32_t));
    if (!f->x || !f->xn || !f->q || !f->kk || !f->vv || !f->att || !f->g || !f->u || !f->rope || !f->out_rows) {
        nb_fwd_free(f);
        return nb_fail(NB_ERR_NOMEM, "out of memory for forward buffers of %d tokens", max_tokens);
    }
    if ((f->k.d->decode_prefetch_tune || f->k.d->decode_streams_tune) && (st = tune_prefetch(f)) != NB_OK) {
        nb_fwd_free(f);
        return st;
    }
    *out = f;
    return NB_OK;
}

void nb_fwd_free(nb_fwd *f) {
    if (!f) return;
    nb_kctx_free(&f->k);
    free(f->x); free(f->xn); free(f->q); free(f->kk); free(f->vv);
    free(f->att); free(f->g); free(f->u); free(f->rope); free(f->out_rows);
    nb_attn_batch_free(&f->attn);
    free(f);
}

int nb_fwd_threads(const nb_fwd *f) { return nb_pool_size(f->k.pool); }
void nb_fwd_commit_kv(nb_fwd *f) { nb_kv_pool_commit(f->kv, f->k.pool); }
int64_t nb_fwd_pool_benchings(const nb_fwd *f) { return nb_pool_benchings(f->k.pool); }
const char *nb_fwd_isa(const nb_fwd *f) { return f->k.fk->isa; }
const char *nb_fwd_attn_isa(const nb_fwd *f) { return f->attn.isa; }
int nb_fwd_prefetch(const nb_fwd *f) { return f->k.prefetch; }
int nb_fwd_prefetch_l2(const nb_fwd *f) { return f->k.prefetch_l2; }
int nb_fwd_decode_streams(const nb_fwd *f) { return f->k.streams; }
const nb_prefetch_tune *nb_fwd_prefetch_tune(const nb_fwd *f) { return &f->tune; }


/* cos/sin for every token's position: rope[t][2i] = cos, [2i+1] = sin. */
static void rope_table(const nb_fwd *f, const nb_batch *b) {
    const nb_arch_desc *hp = &f->m->hp;
    int half = hp->rope_dim / 2;
    double pos_scale = hp->rope_scaling == NB_ROPE_SCALING_LINEAR ? 1.0 / hp->rope_factor : 1.0;
    for (int32_t t = 0; t < b->n; t++) {
        float *r = f->rope + (int64_t)t * hp->rope_dim;
        for (int i = 0; i < half; i++) {
            double freq = pow((double)hp->rope_theta, -2.0 * i / hp->rope_dim);
            if (f->m->rope_freq_factors) freq /= f->m->rope_freq_factors[i];
            double th = b->pos[t] * pos_scale * freq;
            r[2 * i] = (float)cos(th);
            r[2 * i + 1] = (float)sin(th);
        }
    }
}

static void rope_apply(const nb_arch_desc *hp, float *v, int n_heads, const float *r) {
    int hd = hp->head_dim, half = hp->rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (int64_t)h * hd;
        for (int i = 0; i < half; i++) {
            int a = hp->rope_style == NB_ROPE_NORM ? 2 * i : i;
            int c = hp->rope_style == NB_ROPE_NORM ? 2 * i + 1 : i + half;
            float x0 = x[a], x1 = x[c], cs = r[2 * i], sn = r[2 * i + 1];
            x[a] = x0 * cs - x1 * sn;
            x[c] = x0 * sn + x1 * cs;
        }
    }
}

static nb_status check_batch(const nb_fwd *f, const nb_batch *b, int32_t *max_pos) {
    const nb_arch_desc *hp = &f->m->hp;
    if (b->n < 1 || b->n > f->max_tokens)
        return nb_fail(NB_ERR_INVALID, "batch of %d tokens outside 1..%d", b->n, f->max_tokens);
    *max_pos = 0;
    for (int32_t t = 0; t < b->n; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= hp->n_vocab)
            return nb_fail(NB_ERR_INVALID, "token id %d outside 0..%d", b->tokens[t], hp->n_vocab - 1);
        if (b->seq[t] < 0 || b->seq[t] >= b->n_seqs)
            return nb_fail(NB_ERR_INVALID, "batch token %d names sequence %d of %d", t, b->seq[t], b->n_seqs);
        const nb_seq_view *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t];
        if (p < 0 || (int64_t)p >= (int64_t)s->n_blocks * f->kv->block_size)
            return nb_fail(NB_ERR_INVALID, "position %d outside the sequence's %d cached blocks", p, s->n_blocks);
        if (p > *max_pos) *max_pos = p;
    }
    for (int32_t i = 0; i < b->n_seqs; i++)
        for (int32_t k = 0; k < b->seqs[i].n_blocks; k++)
            if (b->seqs[i].blocks[k] < 0 || b->seqs[i].blocks[k] >= f->kv->n_blocks)
                return nb_fail(NB_ERR_INVALID, "block %d outside the pool of %lld blocks", b->seqs[i].blocks[k],
                               (long long)f->kv->n_blocks);
    return NB_OK;
}

static void add_bias(float *y, const float *bias, int64_t n, int64_t dim) {
    if (!bias) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += bias[i];
}

/* One transformer block over the batch, on f->x (the residual stream). */
static nb_status layer_step(nb_fwd *f, const nb_batch *b, int l) {
    const nb_model *m = f->m;
    const nb_arch_desc *hp = &m->hp;
    const nb_layer *L = &m->layers[l];
    int64_t n = b->n, E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim,
            KV = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    for (int64_t t = 0; t < n; t++) f->k.fk->rmsnorm(E, f->xn + t * E, f->x + t * E, L->attn_norm, hp->norm_eps);
    if (f->cap) f->cap(f->cap_ud, l, NB_FWD_CAP_ATTN_IN, f->xn, n, E);
    const nb_tensor *qkv[3] = {L->wq, L->wk, L->wv};
    float *qkv_out[3] = {f->q, f->kk, f->vv};
    NB_TRY(nb_matmul_many(&f->k, 3, qkv, f->xn, n, qkv_out));
    add_bias(f->q, L->bq, n, Q);
    add_bias(f->kk, L->bk, n, KV);
    add_bias(f->vv, L->bv, n, KV);
    for (int64_t t = 0; t < n; t++) {
        const float *r = f->rope + t * hp->rope_dim;
        rope_apply(hp, f->q + t * Q, hp->n_head, r);
        rope_apply(hp, f->kk + t * KV, hp->n_head_kv, r);
        const nb_seq_view *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t];
        int32_t blk = s->blocks[p / f->kv->block_size], slot = p % f->kv->block_size;
        nb_kv_store(f->kv, l, blk, slot, f->kk + t * KV, f->vv + t * KV);
    }
    nb_attn_batch_run(&f->attn, f->k.pool, f->kv, b, l, f->q, f->att);
    if (f->cap) f->cap(f->cap_ud, l, NB_FWD_CAP_ATTN_OUT, f->att, n, Q);
    NB_TRY(nb_matmul(&f->k, L->wo, f->att, n, f->xn));
    f->k.fk->add(n * E, f->x, f->xn);

    for (int64_t t = 0; t < n; t++) f->k.fk->rmsnorm(E, f->xn + t * E, f->x + t * E, L->ffn_norm, hp->norm_eps);
    if (f->cap) f->cap(f->cap_ud, l, NB_FWD_CAP_FFN_IN, f->xn, n, E);
    const nb_tensor *gate_up[2] = {L->w_gate, L->w_up};
    float *gate_up_out[2] = {f->g, f->u};
    NB_TRY(nb_matmul_many(&f->k, 2, gate_up, f->xn, n, gate_up_out));
    f->k.fk->swiglu(n * F, f->g, f->u);
    if (f->cap) f->cap(f->cap_ud, l, NB_FWD_CAP_FFN_DOWN, f->g, n, F);
    NB_TRY(nb_matmul(&f->k, L->w_down, f->g, n, f->xn));
    f->k.fk->add(n * E, f->x, f->xn);
    return NB_OK;
}

/* Checks the batch and cuts it into attention tiles. */
static nb_status prepare(nb_fwd *f, const nb_batch *b) {
    int32_t max_pos = 0;
    NB_TRY(check_batch(f, b, &max_pos));
    NB_TRY(nb_attn_batch_plan(&f->attn, b));
    rope_table(f, b);
    return NB_OK;
}

nb_status nb_fwd_run(nb_fwd *f, const nb_batch *b, float *logits) {
    const nb_model *m = f->m;
    const nb_arch_desc *hp = &m->hp;
    NB_TRY(prepare(f, b));
    int64_t n = b->n, E = hp->n_embd;
    for (int64_t t = 0; t < n; t++) NB_TRY(nb_get_row(m->tok_embd, b->tokens[t], f->x + t * E));
    for (int l = 0; l < hp->n_layer; l++) NB_TRY(layer_step(f, b, l));

    if (!b->want || !logits) return NB_OK;
    int64_t n_out = 0;
    for (int64_t t = 0; t < n; t++)
        if (b->want[t]) {
            f->k.fk->rmsnorm(E, f->xn + n_out * E, f->x + t * E, m->output_norm, hp->norm_eps);
            n_out++;
        }
    if (n_out) NB_TRY(nb_matmul(&f->k, m->output, f->xn, n_out, logits));
    return NB_OK;
}

/* ---- calibration support --------------------------------------------------- */

void nb_fwd_set_capture(nb_fwd *f, nb_fwd_capture_fn fn, void *ud) {
    f->cap = fn;
    f->cap_ud = ud;
}

nb_status nb_fwd_run_layers(nb_fwd *f, const nb_batch *b, int l0, int l1, float *x) {
    const nb_arch_desc *hp = &f->m->hp;
    if (l0 < 0 || l1 > hp->n_layer || l0 > l1)
        return nb_fail(NB_ERR_INVALID, "layer range %d..%d outside 0..%d", l0, l1, hp->n_layer);
    NB_TRY(prepare(f, b));
    int64_t n = b->n, E = hp->n_embd;
    if (l0 == 0 && l1 == 0) { /* embeddings only */
        for (int64_t t = 0; t < n; t++) NB_TRY(nb_get_row(f->m->tok_embd, b->tokens[t], x + t * E));
        return NB_OK;
    }
    memcpy(f->x, x, (size_t)(n * E) * sizeof(float));
    for (int l = l0; l < l1; l++) NB_TRY(layer_step(f, b, l));
    memcpy(x, f->x, (size_t)(n * E) * sizeof(float));
    return NB_OK;
}
