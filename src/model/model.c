/* Binding a source's tensors to the llama/qwen2 layer structure, with shape
 * and type checks that name the tensor, its shape and the expected one. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "base/hugemem.h"
#include "base/log.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "quant/qtypes.h"

static nb_status find2(const nb_model *m, const char *name, int64_t ne0, int64_t ne1, bool need_matmul,
                       const nb_tensor **out) {
    const nb_tensor *t = nb_source_find(&m->src, name);
    if (!t) return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' is missing", m->src.path, name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                       m->src.path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)ne0, (long long)ne1);
    if (need_matmul && !nb_matmul_supports(t->type))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which nibble cannot compute with yet",
                       m->src.path, name, nb_dtype_name(t->type));
    *out = t;
    return NB_OK;
}

/* A 1-D tensor of n values converted to f32 into dst. */
static nb_status vec(const nb_model *m, const char *name, int64_t n, float *dst) {
    const nb_tensor *t = nb_source_find(&m->src, name);
    if (!t) return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' is missing", m->src.path, name);
    if (nb_tensor_nelem(t) != n)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' has %lld elements, expected %lld", m->src.path, name,
                       (long long)nb_tensor_nelem(t), (long long)n);
    const uint16_t *h = t->data;
    for (int64_t i = 0; i < n; i++) {
        switch (t->type) {
        case NB_F32: memcpy(&dst[i], (const float *)t->data + i, 4); break;
        case NB_F16: dst[i] = nb_fp16_to_fp32(h[i]); break;
        case NB_BF16: dst[i] = nb_bf16_to_fp32(h[i]); break;
        default:
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (expected F32, F16 or BF16)", m->src.path,
                           name, nb_dtype_name(t->type));
        }
    }
    return NB_OK;
}

/* llama3 rope scaling as frequency divisors (the form GGUF's rope_freqs.weight stores). */
void nb_rope_llama3_factors(const nb_arch_desc *hp, float *ff) {
    double lo_wl = hp->rope_orig_ctx / hp->rope_low_freq_factor;
    double hi_wl = hp->rope_orig_ctx / hp->rope_high_freq_factor;
    for (int i = 0; i < hp->rope_dim / 2; i++) {
        double freq = pow(hp->rope_theta, -2.0 * i / hp->rope_dim);
        double wl = 2 * M_PI / freq;
        double f;
        if (wl < hi_wl) f = 1;
        else if (wl > lo_wl) f = hp->rope_factor;
        else {
            double smooth = (hp->rope_orig_ctx / wl - hp->rope_low_freq_factor) /
                            (hp->rope_high_freq_factor - hp->rope_low_freq_factor);
            f = 1.0 / ((1 - smooth) / hp->rope_factor + smooth);
        }
        ff[i] = (float)f;
    }
}

static nb_status bind(nb_model *m) {
    const nb_arch_desc *hp = &m->hp;
    int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    m->max_ctx = INT32_MAX;
    if (hp->sliding_window > 0 && hp->sliding_window < hp->n_ctx_train) {
        /* Full attention equals sliding-window attention as long as no
         * sequence is longer than the window, so such models run exactly,
         * capped at the window (Mistral 7B v0.1: 4096 of 32768). */
        NB_WARN("%s: sliding-window attention (window %d) runs as full attention, exact up to the window; contexts are capped at %d tokens "
                "(the model was trained for %d)", m->src.path, hp->sliding_window, hp->sliding_window,
                hp->n_ctx_train);
        m->max_ctx = hp->sliding_window;
        m->hp.n_ctx_train = hp->sliding_window;
    }
    NB_TRY(find2(m, "token_embd.weight", E, hp->n_vocab, false, &m->tok_embd));
    if (hp->tied_embeddings) {
        m->output = m->tok_embd;
        if (!nb_matmul_supports(m->output->type))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: tied embedding has type %s, which nibble cannot compute with yet",
                           m->src.path, nb_dtype_name(m->output->type));
    } else {
        NB_TRY(find2(m, "output.weight", E, hp->n_vocab, true, &m->output));
    }
    size_t per_layer = (size_t)(2 * E + (hp->qkv_bias ? Q + 2 * KV : 0));
    size_t n_own = (size_t)E + per_layer * (size_t)hp->n_layer;
    m->owned = nb_malloc(n_own * sizeof(float));
    m->layers = nb_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->owned || !m->layers) return NB_ERR_NOMEM;
    float *o = m->owned;
    NB_TRY(vec(m, "output_norm.weight", E, o));
    m->output_norm = o;
    o += E;
    char name[96];
    for (int l = 0; l < hp->n_layer; l++) {
        nb_layer *L = &m->layers[l];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, l), name)
        NB_TRY(vec(m, NAME("attn_norm.weight"), E, o)); L->attn_norm = o; o += E;
        NB_TRY(vec(m, NAME("ffn_norm.weight"), E, o)); L->ffn_norm = o; o += E;
        if (hp->qkv_bias) {
            NB_TRY(vec(m, NAME("attn_q.bias"), Q, o)); L->bq = o; o += Q;
            NB_TRY(vec(m, NAME("attn_k.bias"), KV, o)); L->bk = o; o += KV;
            NB_TRY(vec(m, NAME("attn_v.bias"), KV, o)); L->bv = o; o += KV;
        }
        NB_TRY(find2(m, NAME("attn_q.weight"), E, Q, true, &L->wq));
        NB_TRY(find2(m, NAME("attn_k.weight"), E, KV, true, &L->wk));
        NB_TRY(find2(m, NAME("attn_v.weight"), E, KV, true, &L->wv));
        NB_TRY(find2(m, NAME("attn_output.weight"), Q, E, true, &L->wo));
        NB_TRY(find2(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &L->w_gate));
        NB_TRY(find2(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &L->w_up));
        NB_TRY(find2(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &L->w_down));
#undef NAME
    }
    const nb_tensor *rf = nb_source_find(&m->src, "rope_freqs.weight");
    if (rf || hp->rope_scaling == NB_ROPE_SCALING_LLAMA3) {
        m->rope_freq_factors = nb_malloc((size_t)hp->rope_dim / 2 * sizeof(float));
        if (!m->rope_freq_factors) return NB_ERR_NOMEM;
        if (rf) NB_TRY(vec(m, "rope_freqs.weight", hp->rope_dim / 2, m->rope_freq_factors));
        else nb_rope_llama3_factors(hp, m->rope_freq_factors);
    }
    for (int64_t i = 0; i < m->src.n_tensors; i++) {
        m->weight_bytes += m->src.tensors[i].nbytes;
        m->n_params += (uint64_t)nb_tensor_nelem(&m->src.tensors[i]);
    }
    return NB_OK;
}

/* Bytes of tensor t once repacked for this CPU's kernels (kernels/repack.h). */
static uint64_t resident_bytes(const nb_tensor *t, nb_dtype *to) {
    *to = nb_repack_target(t->type);
    uint64_t rb;
    if (*to == t->type || !nb_dtype_row_bytes(*to, (uint64_t)t->ne[0], &rb)) {
        *to = t->type;
        return t->nbytes;
    }
    return rb * (uint64_t)nb_tensor_rows(t);
}

/* One piece of the resident copy: rows [r0, r1) of a matrix. */
typedef struct {
    const nb_tensor *t; /* as in the file */
    nb_dtype to;        /* t->type, or the layout it is repacked into */
    uint8_t *dst;       /* the whole matrix's place in the resident region */
    int64_t r0, r1;
} copy_piece;

typedef struct {
    nb_pool *pool;
    nb_source *src;
    const copy_piece *pieces;
} copy_job;

static void copy_piece_run(nb_source *src, const copy_piece *c) {
    const nb_tensor *t = c->t;
    int64_t rows = nb_tensor_rows(t);
    bool whole = c->r0 == 0 && c->r1 >= rows; /* piece_rows: maybe not whole rows */
    size_t in_row = rows > 0 ? (size_t)(t->nbytes / (uint64_t)rows) : 0;
    const uint8_t *from = (const uint8_t *)t->data + (size_t)c->r0 * in_row;
    size_t n = whole ? (size_t)t->nbytes : (size_t)(c->r1 - c->r0) * in_row;
    if (c->to != t->type) {
        uint64_t out_row;
        (void)nb_dtype_row_bytes(c->to, (uint64_t)t->ne[0], &out_row); /* resident_bytes checked it */
        nb_repack_rows(t->type, from, c->dst + (size_t)c->r0 * out_row, c->r1 - c->r0, t->ne[0]);
    } else {
        memcpy(c->dst + (whole ? 0 : (size_t)c->r0 * in_row), from, n);
    }
    /* the copy is what runs: the file's pages need not stay in this process
     * (else it holds the model twice until the kernel reclaims them) */
    nb_source_release(src, from, n);
}

static void copy_worker(void *arg, int ith, int nth) {
    (void)nth;
    const copy_job *j = arg;
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi))
        for (int64_t i = lo; i < hi; i++) copy_piece_run(j->src, &j->pieces[i]);
}

/* Pieces of about this many bytes of the file: small enough that the
 * threads stay busy to the end, large enough that a piece is mostly copying. */
#define COPY_PIECE_BYTES ((uint64_t)4 << 20)

/* Rows per piece of t; all of them when its bytes are not whole rows (a
 * layout with data besides its rows is copied in one piece). */
static int64_t piece_rows(const nb_tensor *t) {
    int64_t rows = nb_tensor_rows(t);
    if (rows <= 0 || t->nbytes % (uint64_t)rows) return NB_MAX(rows, 1);
    uint64_t row = NB_MAX(t->nbytes / (uint64_t)rows, 1);
    return NB_MAX(1, (int64_t)(COPY_PIECE_BYTES / row));
}

/* Copies every matrix the matmul reads into one huge-page-backed anonymous
 * region - repacking Q4_0 / Q8_0 / Q4_K / Q6_K into the layouts of the AVX-512
 * kernels where this CPU has them - and points the tensors there (see
 * nb_model_params). The copy runs on every CPU the process may use, in
 * pieces of rows: repacking is compute-bound (a Q4_K_M file repacks at about
 * 0.7 GB/s per core here). */
static nb_status make_resident(nb_model *m) {
    size_t total = 0;
    int64_t n_pieces = 0;
    nb_dtype to;
    for (int64_t i = 0; i < m->src.n_tensors; i++) {
        const nb_tensor *t = &m->src.tensors[i];
        if (t->n_dims < 2) continue;
        total += ((size_t)resident_bytes(t, &to) + 63) & ~(size_t)63;
        int64_t rows = nb_tensor_rows(t), per = piece_rows(t);
        n_pieces += (rows + per - 1) / per;
    }
    if (!total) return NB_OK;
    size_t huge = (size_t)2 << 20;
    size_t len = (total + huge - 1) & ~(huge - 1);
    copy_piece *pieces = nb_malloc((size_t)n_pieces * sizeof *pieces);
    if (!pieces) return NB_ERR_NOMEM;
    void *p = nb_map_anon(len, true);
    if (!p) {
        free(pieces);
        return nb_fail(NB_ERR_NOMEM, "%s: cannot allocate %zu bytes for the weights (try --mmap)", m->src.path, len);
    }
    uint8_t *w = p;
    int64_t k = 0;
    for (int64_t i = 0; i < m->src.n_tensors; i++) {
        const nb_tensor *t = &m->src.tensors[i];
        if (t->n_dims < 2) continue;
        uint64_t nbytes = resident_bytes(t, &to);
        int64_t rows = nb_tensor_rows(t), per = piece_rows(t);
        for (int64_t r = 0; r < rows; r += per) pieces[k++] = (copy_piece){t, to, w, r, NB_MIN(r + per, rows)};
        w += ((size_t)nbytes + 63) & ~(size_t)63;
    }
    nb_pool *pool = NULL;
    copy_job j = {NULL, &m->src, pieces};
    if (nb_pool_create(0, &pool) == NB_OK) { /* else (no threads to be had) on this thread alone */
        j.pool = pool;
        nb_pool_run_chunks(pool, copy_worker, &j, n_pieces, 1);
        nb_pool_free(pool);
    } else {
        for (int64_t i = 0; i < n_pieces; i++) copy_piece_run(&m->src, &pieces[i]);
    }
    free(pieces);
    w = p;
    for (int64_t i = 0; i < m->src.n_tensors; i++) {
        nb_tensor *t = &m->src.tensors[i];
        if (t->n_dims < 2) continue;
        uint64_t nbytes = resident_bytes(t, &to);
        t->type = to;
        t->nbytes = nbytes;
        t->data = w;
        w += ((size_t)nbytes + 63) & ~(size_t)63;
    }
    m->resident = p;
    m->resident_bytes = len;
    return NB_OK;
}

nb_status nb_model_load(const char *path, nb_model **out) {
    nb_model_params p = {0};
    return nb_model_load_ex(path, &p, out);
}

static double load_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

nb_status nb_model_load_ex(const char *path, const nb_model_params *p, nb_model **out) {
    *out = NULL;
    nb_model *m = nb_calloc(1, sizeof *m);
    if (!m) return NB_ERR_NOMEM;
    double t0 = load_clock_s();
    nb_status st = nb_source_open(path, &m->src);
    if (st != NB_OK) { free(m); return st; }
    m->hp = m->src.hp;
    double t1 = load_clock_s();
    m->load_read_s = t1 - t0;
    if (!p->use_mmap && (st = make_resident(m)) != NB_OK) { nb_model_free(m); return st; }
    m->load_repack_s = p->use_mmap ? 0 : load_clock_s() - t1;
    st = bind(m);
    if (st != NB_OK) { nb_model_free(m); return st; }
    *out = m;
    return NB_OK;
}

void nb_model_free(nb_model *m) {
    if (!m) return;
    nb_source_close(&m->src);
    nb_unmap_anon(m->resident, m->resident_bytes);
    free(m->layers);
    free(m->owned);
    free(m->rope_freq_factors);
    free(m);
}

uint64_t nb_model_bytes_per_token(const nb_model *m) {
    uint64_t b = m->weight_bytes;
    if (!m->hp.tied_embeddings) b -= m->tok_embd->nbytes;
    return b;
}
