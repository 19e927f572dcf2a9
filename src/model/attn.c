/* Attention over a batch: tiles, jobs, scratch (see attn.h). */
#include "model/attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

nb_status nb_attn_batch_init(nb_attn_batch *a, const nb_arch_desc *hp, const nb_dispatch *d, int n_threads,
                             int32_t block_size) {
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
    a->tile_tokens = NB_MAX(1, (d->attn_bf16_amx ? NB_ATTN_TILE_ROWS_AMX : NB_ATTN_TILE_ROWS) / a->group);
    a->tile_tokens_min = NB_MAX(1, NB_ATTN_TILE_ROWS_MIN / a->group);
    a->n_threads = n_threads < 1 ? 1 : n_threads;
    a->split_keys = block_size < 1 ? 0 : (NB_ATTN_SPLIT_KEYS + block_size - 1) / block_size * block_size;
    a->scratch_floats = (nb_attn_scratch_floats(a->head_dim, a->group, a->tile_tokens) + 15) & ~(size_t)15;
    a->scratch = aligned_alloc(64, a->scratch_floats * sizeof(float) * (size_t)a->n_threads);
    if (!a->scratch) return nb_fail(NB_ERR_NOMEM, "out of memory for attention scratch");
    return NB_OK;
}

void nb_attn_batch_free(nb_attn_batch *a) {
    free(a->spans);
    free(a->merges);
    free(a->part_out);
    free(a->part_lse);
    free(a->scratch);
    memset(a, 0, sizeof *a);
}

/* Room for one more element in the array *p of *cap (n held); doubles. */
static nb_status reserve_one(void **p, int32_t *cap, int32_t n, size_t elem, const char *what) {
    if (n < *cap) return NB_OK;
    const int32_t c = NB_MAX(16, 2 * *cap);
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return nb_fail(NB_ERR_NOMEM, "out of memory for %s", what);
    *p = q;
    *cap = c;
    return NB_OK;
}

static nb_status add_span(nb_attn_batch *a, nb_attn_span sp) {
    NB_TRY(reserve_one((void **)&a->spans, &a->spans_cap, a->n_spans, sizeof sp, "attention tiles"));
    a->spans[a->n_spans++] = sp;
    return NB_OK;
}

/* Batch token t0 at position pos, cut into pieces of split_keys keys. */
static nb_status add_split(nb_attn_batch *a, int32_t seq, int32_t t0, int32_t pos) {
    const int32_t n = (pos + a->split_keys) / a->split_keys; /* pieces over keys 0..pos */
    NB_TRY(reserve_one((void **)&a->merges, &a->merges_cap, a->n_merges, sizeof *a->merges,
                       "split attention"));
    a->merges[a->n_merges++] = (nb_attn_merge){t0, a->n_parts, n};
    for (int32_t i = 0; i < n; i++) {
        const int32_t key0 = i * a->split_keys, last = NB_MIN(pos, key0 + a->split_keys - 1);
        NB_TRY(add_span(a, (nb_attn_span){seq, t0, 1, last - key0, key0, a->n_parts++}));
    }
    return NB_OK;
}

nb_status nb_attn_batch_plan(nb_attn_batch *a, const nb_batch *b) {
    a->n_spans = a->n_merges = a->n_parts = 0;
    /* the largest tiles that still give about 4 jobs (tile x KV head) per thread */
    const int64_t want = ((int64_t)b->n * a->n_head_kv + 4 * a->n_threads - 1) / (4 * a->n_threads);
    const int32_t tt = (int32_t)NB_MAX(a->tile_tokens_min, NB_MIN(a->tile_tokens, want));
    for (int32_t t = 0; t < b->n;) {
        int32_t n = 1;
        while (t + n < b->n && n < tt && b->seq[t + n] == b->seq[t] && b->pos[t + n] == b->pos[t] + n) n++;
        if (n == 1 && a->split_keys && b->pos[t] >= a->split_keys) NB_TRY(add_split(a, b->seq[t], t, b->pos[t]));
        else NB_TRY(add_span(a, (nb_attn_span){b->seq[t], t, n, b->pos[t], 0, -1}));
        t += n;
    }
    if (a->n_parts > a->parts_cap) {
        const int32_t cap = NB_MAX(a->n_parts, 2 * a->parts_cap);
        const size_t rows = (size_t)cap * a->n_head_kv * a->group;
        free(a->part_out);
        free(a->part_lse);
        a->part_out = malloc(rows * a->head_dim * sizeof *a->part_out);
        a->part_lse = malloc(rows * sizeof *a->part_lse);
        a->parts_cap = a->part_out && a->part_lse ? cap : 0;
        if (!a->parts_cap) return nb_fail(NB_ERR_NOMEM, "out of memory for split attention (%d pieces)", a->n_parts);
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
            t.blocks = j->b->seqs[s->seq].blocks + s->key0 / j->kv.block_size;
            t.kvh = kvh;
            t.nt = s->nt;
            t.pos0 = s->pos0;
            t.q = j->q + (int64_t)s->t0 * stride + kvh * goff;
            if (s->part < 0) {
                t.out = j->out + (int64_t)s->t0 * stride + kvh * goff;
                t.lse = NULL;
            } else { /* one token: its rows are the group's heads */
                const int64_t slot = (int64_t)s->part * a->n_head_kv + kvh;
                t.out = a->part_out + slot * goff;
                t.lse = a->part_lse + slot * a->group;
            }
            fn(&t);
        }
}

/* Jobs are (merge, KV head): the group's rows of a split token from its pieces. */
static void merge_worker(void *arg, int ith, int nth) {
    (void)nth;
    run_job *j = arg;
    const nb_attn_batch *a = j->a;
    const int hd = a->head_dim, G = a->group, nkv = a->n_head_kv;
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi))
        for (int64_t job = lo; job < hi; job++) {
            const nb_attn_merge *m = &a->merges[job / nkv];
            const int kvh = (int)(job % nkv);
            float *out = j->out + ((int64_t)m->t0 * a->n_head + (int64_t)kvh * G) * hd;
            for (int h = 0; h < G; h++) {
                float mx = -INFINITY, wsum = 0;
                for (int p = 0; p < m->n_parts; p++)
                    mx = fmaxf(mx, a->part_lse[((int64_t)(m->part0 + p) * nkv + kvh) * G + h]);
                float *o = out + (int64_t)h * hd;
                for (int e = 0; e < hd; e++) o[e] = 0;
                for (int p = 0; p < m->n_parts; p++) {
                    const int64_t row = ((int64_t)(m->part0 + p) * nkv + kvh) * G + h;
                    const float w = expf(a->part_lse[row] - mx), *po = a->part_out + row * hd;
                    wsum += w;
                    for (int e = 0; e < hd; e++) o[e] += w * po[e];
                }
                const float inv = 1.0f / wsum;
                for (int e = 0; e < hd; e++) o[e] *= inv;
            }
        }
}

void nb_attn_batch_run(nb_attn_batch *a, nb_pool *pool, const nb_kv_pool *kv, const nb_batch *b, int layer,
                       const float *q, float *out) {
    run_job j = {a, pool, b, {0}, q, out};
    nb_kv_layer_view(kv, layer, &j.kv);
    nb_pool_run_chunks(pool, run_worker, &j, (int64_t)a->n_spans * a->n_head_kv, 1);
    if (a->n_merges) nb_pool_run_chunks(pool, merge_worker, &j, (int64_t)a->n_merges * a->n_head_kv, 1);
}
