/* Attention over a batch: tiles, jobs, scratch (see attn.h). */
#include "model/attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

nb_status nb_attn_batch_init(nb_attn_batch *a, const nb_arch_desc *hp, const nb_dispatch *d, int n_threads) {
    memset(a, 0, sizeof *a);
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->n_head / hp->n_head_kv > NB_ATTN_MAX_GROUP)
        return nb_fail(NB_ERR_UNSUPPORTED, "%d query heads over %d KV heads: groups of 1..%d whole heads are supported",
                       hp->n_head, hp->n_head_kv, NB_ATTN_MAX_GROUP);
    memcpy(a->fn, d->attn_kv, sizeof a->fn);
    a->isa = d->attn_name;
    a->n_head = hp->n_head;
    a->n_head_kv = hp->n_head_kv;
    a->head_dim = hp->head_dim;
    a->group = hp->n_head / hp->n_head_kv;
    a->tile_tokens = NB_MAX(1, NB_ATTN_TILE_ROWS / a->group);
    a->tile_tokens_min = NB_MAX(1, NB_ATTN_TILE_ROWS_MIN / a->group);
    a->n_threads = n_threads < 1 ? 1 : n_threads;
    a->scratch_floats = (nb_attn_scratch_floats(a->head_dim, a->group, a->tile_tokens) + 15) & ~(size_t)15;
    a->scratch = aligned_alloc(64, a->scratch_floats * sizeof(float) * (size_t)a->n_threads);
    if (!a->scratch) return nb_fail(NB_ERR_NOMEM, "out of memory for attention scratch");
    return NB_OK;
}

void nb_attn_batch_free(nb_attn_batch *a) {
    free(a->spans);
    free(a->scratch);
    memset(a, 0, sizeof *a);
}

nb_status nb_attn_batch_plan(nb_attn_batch *a, const nb_batch *b) {
    a->n_spans = 0;
    /* the largest tiles that still give about 4 jobs (tile x KV head) per thread */
    const int64_t want = ((int64_t)b->n * a->n_head_kv + 4 * a->n_threads - 1) / (4 * a->n_threads);
    const int32_t tt = (int32_t)NB_MAX(a->tile_tokens_min, NB_MIN(a->tile_tokens, want));
    for (int32_t t = 0; t < b->n;) {
        int32_t n = 1;
        while (t + n < b->n && n < tt && b->seq[t + n] == b->seq[t] && b->pos[t + n] == b->pos[t] + n) n++;
        if (a->n_spans == a->spans_cap) {
            int32_t cap = NB_MAX(64, 2 * a->spans_cap);
            nb_attn_span *p = realloc(a->spans, (size_t)cap * sizeof *p);
            if (!p) return nb_fail(NB_ERR_NOMEM, "out of memory for attention tiles");
            a->spans = p;
            a->spans_cap = cap;
        }
        a->spans[a->n_spans++] = (nb_attn_span){b->seq[t], t, n, b->pos[t]};
        t += n;
    }
    return NB_OK;
}

typedef struct {
    nb_attn_batch *a;
    nb_pool *pool;
    const nb_batch *b;
    nb_attn_kv kv;
    const float *q;
    float *out;
} run_job;

/* Jobs are (span, KV head), span-major. */
static void run_worker(void *arg, int ith, int nth) {
    (void)nth;
    run_job *j = arg;
    nb_attn_batch *a = j->a;
    const int64_t stride = (int64_t)a->n_head * a->head_dim, goff = (int64_t)a->group * a->head_dim;
    nb_attn_tile t = {.kv = &j->kv, .nq = a->group, .q_stride = stride, .out_stride = stride,
                      .scale = 1.0f / sqrtf((float)a->head_dim), .scratch = a->scratch + (size_t)ith * a->scratch_floats};
    const nb_attn_fn fn = a->fn[j->kv.type];
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi))
        for (int64_t job = lo; job < hi; job++) {
            const nb_attn_span *s = &a->spans[job / a->n_head_kv];
            const int kvh = (int)(job % a->n_head_kv);
            t.blocks = j->b->seqs[s->seq].blocks;
            t.kvh = kvh;
            t.nt = s->nt;
            t.pos0 = s->pos0;
            t.q = j->q + (int64_t)s->t0 * stride + kvh * goff;
            t.out = j->out + (int64_t)s->t0 * stride + kvh * goff;
            fn(&t);
        }
}

void nb_attn_batch_run(nb_attn_batch *a, nb_pool *pool, const nb_kv_pool *kv, const nb_batch *b, int layer,
                       const float *q, float *out) {
    run_job j = {a, pool, b, {0}, q, out};
    nb_kv_layer_view(kv, layer, &j.kv);
    nb_pool_run_chunks(pool, run_worker, &j, (int64_t)a->n_spans * a->n_head_kv, 1);
}
