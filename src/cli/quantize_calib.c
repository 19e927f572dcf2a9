/* Calibrated quantization driver (see quantize_calib.h).
 *
 * Layer by layer: the residual stream of every calibration sample is kept
 * ([tokens][n_embd] floats: one block's worth of activations); for block l
 *   1. the block runs on every sample with the capture hook, which streams
 *      the inputs of its linears into per-slot statistics (nb_calib_stats:
 *      H for GPTQ, mean |x| / max |x| for AWQ / SmoothQuant) and, for AWQ, a
 *      bounded subsample of input rows for the scale and clip searches;
 *   2. the block's weights are transformed (AWQ / SmoothQuant scales folded
 *      into the norm or the previous linear) and quantized (GPTQ, or the
 *      format's own quantizer), the bytes kept for the writer;
 *   3. the model's tensors of block l are replaced by the dequantized
 *      weights and the block runs again on every sample: the inputs of block
 *      l+1 come from the quantized block l. */
#include "cli/quantize_calib.h"
#include "nibble.h" /* NIBBLE_VERSION for the recipe */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/half.h"
#include "base/log.h"
#include "base/sha256.h"
#include "model/forward.h"
#include "model/model.h"
#include "nibble_status.h"
#include "quant/awq.h"
#include "quant/gptq.h"
#include "quant/imatrix.h"
#include "quant/qtypes.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define AWQ_SUB_ROWS 256   /* input rows kept per slot for AWQ's searches */
#define AWQ_MOD_TOKENS 512 /* AWQ module-output search: whole samples up to this many tokens */

typedef struct result {
    char name[NB_RTN_NAME_MAX];
    nb_dtype type;
    void *bytes;           /* quantized tensor, or F32 values of a 1-D tensor */
    uint64_t nbytes;
    double rel_rms;
    const char *method;    /* what rounded it (nb_rtn_tensor.method) */
    char note[NB_RTN_WHY_MAX]; /* why the method could not be applied as planned ("" when it was) */
} result;

struct nb_qcal {
    nb_calib_opts o;
    nb_imatrix im;
    bool have_im;
    char im_path[1024];
    char in_sha[65], calib_sha[65];
    int64_t n_samples, n_tokens;
    int group;                  /* W4 group (0: none) */
    double damp_max;            /* largest damp GPTQ needed */
    result *res;
    int64_t n_res;
};

/* ---- results --------------------------------------------------------------- */

static result *find_result(nb_qcal *q, const char *name) {
    for (int64_t i = 0; i < q->n_res; i++)
        if (!strcmp(q->res[i].name, name)) return &q->res[i];
    return NULL;
}

static result *add_result(nb_qcal *q, const char *name, nb_dtype type, uint64_t nbytes) {
    result *r = find_result(q, name);
    if (r) {
        free(r->bytes);
    } else {
        result *p = realloc(q->res, (size_t)(q->n_res + 1) * sizeof *p);
        if (!p) return NULL;
        q->res = p;
        r = &q->res[q->n_res++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", name);
    }
    r->type = type;
    r->nbytes = nbytes;
    r->method = nb_calib_method_name(q->o.method);
    r->note[0] = '\0';
    r->bytes = malloc(nbytes ? nbytes : 1);
    return r->bytes ? r : NULL;
}

static nb_status tensor_fn(void *ud, const nb_tensor *src, nb_rtn_tensor *r, nb_pool *pool, void *dst,
                           uint64_t nbytes, double *rel_rms, bool *handled) {
    nb_qcal *q = ud;
    *handled = false;
    result *res = find_result(q, r->name);
    if (res) {
        if (res->type != r->type || res->nbytes != nbytes)
            return nb_fail(NB_ERR_INVALID, "calibrated tensor '%s' is %s (%llu bytes), the writer wants %s", r->name,
                           nb_dtype_name(res->type), (unsigned long long)res->nbytes, nb_dtype_name(r->type));
        memcpy(dst, res->bytes, nbytes);
        *rel_rms = res->rel_rms;
        *handled = true;
        snprintf(r->method, sizeof r->method, "%s", res->method);
        snprintf(r->method_note, sizeof r->method_note, "%s", res->note);
        return NB_OK;
    }
    if (q->have_im && r->n_dims >= 2) {
        const nb_imatrix_entry *e = nb_imatrix_find(&q->im, r->name);
        if (e) NB_TRY(nb_imatrix_convert(e, src, r->type, pool, dst, nbytes, rel_rms, handled));
        if (*handled) snprintf(r->method, sizeof r->method, "rtn+imatrix");
    }
    return NB_OK;
}

static nb_status meta_fn(void *ud, nb_gguf_writer *w) {
    nb_qcal *q = ud;
    if (q->have_im) {
        /* the keys llama-quantize writes */
        NB_TRY(nb_gguf_set_str(w, "quantize.imatrix.file", q->im_path));
        NB_TRY(nb_gguf_set_str(w, "quantize.imatrix.dataset", q->im.dataset));
        NB_TRY(nb_gguf_set_i32(w, "quantize.imatrix.entries_count", (int32_t)q->im.n));
        NB_TRY(nb_gguf_set_i32(w, "quantize.imatrix.chunks_count", q->im.chunks));
    }
    if (q->o.method != NB_CALIB_RTN) {
        NB_TRY(nb_gguf_set_u32(w, "nibble.quantize.group_size", (uint32_t)q->group));
        NB_TRY(nb_gguf_set_str(w, "nibble.quantize.calib_sha256", q->calib_sha));
        NB_TRY(nb_gguf_set_u32(w, "nibble.quantize.calib_samples", (uint32_t)q->n_samples));
        NB_TRY(nb_gguf_set_u64(w, "nibble.quantize.calib_tokens", (uint64_t)q->n_tokens));
        NB_TRY(nb_gguf_set_u32(w, "nibble.quantize.calib_seq_len", (uint32_t)q->o.seq_len));
        NB_TRY(nb_gguf_set_u64(w, "nibble.quantize.seed", q->o.seed));
        if (q->o.method == NB_CALIB_GPTQ) {
            NB_TRY(nb_gguf_set_f32(w, "nibble.quantize.damp", (float)q->o.damp));
            NB_TRY(nb_gguf_set_f32(w, "nibble.quantize.damp_max_used", (float)q->damp_max));
            NB_TRY(nb_gguf_set_bool(w, "nibble.quantize.desc_act", q->o.desc_act));
            NB_TRY(nb_gguf_set_bool(w, "nibble.quantize.static_groups", q->o.static_groups || q->o.desc_act));
        }
        if (q->o.method == NB_CALIB_AWQ) NB_TRY(nb_gguf_set_u32(w, "nibble.quantize.awq_grid", NB_AWQ_GRID));
        if (q->o.method == NB_CALIB_SMOOTHQUANT) NB_TRY(nb_gguf_set_f32(w, "nibble.quantize.alpha", (float)q->o.alpha));
    }
    NB_TRY(nb_gguf_set_str(w, "nibble.quantize.version", NIBBLE_VERSION));
    NB_TRY(nb_gguf_set_str(w, "nibble.quantize.input_sha256", q->in_sha));
    return NB_OK;
}

void nb_qcal_free(nb_qcal *q) {
    if (!q) return;
    nb_imatrix_free(&q->im);
    for (int64_t i = 0; i < q->n_res; i++) free(q->res[i].bytes);
    free(q->res);
    free(q);
}

/* ---- calibration state -------------------------------------------------------- */

enum { W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_N };
static const int w_slot[W_N] = {NB_FWD_CAP_ATTN_IN, NB_FWD_CAP_ATTN_IN, NB_FWD_CAP_ATTN_IN, NB_FWD_CAP_ATTN_OUT,
                                NB_FWD_CAP_FFN_IN, NB_FWD_CAP_FFN_IN, NB_FWD_CAP_FFN_DOWN};

typedef struct cal {
    nb_qcal *q;
    const nb_calib_opts *o;
    nb_model *m;
    nb_fwd *fwd;
    nb_kv_pool kv;
    nb_pool *pool;
    nb_calib_set set;
    float **x;                      /* [n] residual streams */
    float *scratch;                 /* [seq_len][n_embd] */
    nb_calib_stats st[NB_FWD_CAP_N];
    float *sub[NB_FWD_CAP_N];       /* AWQ: subsampled input rows [AWQ_SUB_ROWS][dim] */
    int64_t n_sub[NB_FWD_CAP_N], sub_stride;
    bool capture_on;
    float *probe;                   /* AWQ module search: rows of probe_slot go here, not to the statistics */
    int probe_slot;
    int64_t probe_n, mod_ns;        /* rows written; samples the module search runs on */
    unsigned cap_mask;              /* slots whose statistics are taken (bit per nb_fwd_cap) */
    int64_t nonfinite;
    nb_gptq_hinv *hinv[NB_FWD_CAP_N]; /* GPTQ: one factorisation per input, shared by its linears */
    double t_fwd, t_stats, t_factor, t_quant; /* seconds per phase (the report) */
    double u_fwd, u_stats, u_factor, u_quant; /* CPU seconds per phase */
    /* dequantized weights of the finished blocks, in the model's place */
    nb_tensor *own;                 /* [n_layer][W_N] */
    float **own_data;
    float *norms;                   /* [n_layer][2][n_embd] modified norms */
    const nb_rtn_report *plan;
    bool quiet, tty;
} cal;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the process (all threads), for the per-phase report on a
 * shared machine where wall time depends on the load */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void capture(void *ud, int layer, nb_fwd_cap where, const float *x, int64_t n, int64_t dim) {
    (void)layer;
    cal *c = ud;
    if (c->probe) {
        if ((int)where == c->probe_slot) {
            memcpy(c->probe + c->probe_n * dim, x, (size_t)(n * dim) * sizeof(float));
            c->probe_n += n;
        }
        return;
    }
    if (!c->capture_on || !(c->cap_mask & (1u << where))) return;
    double t0 = now_s(), u0 = cpu_s();
    int64_t before = c->st[where].n_nonfinite;
    nb_calib_stats_add(&c->st[where], x, n, c->o->method == NB_CALIB_GPTQ ? c->pool : NULL);
    c->nonfinite += c->st[where].n_nonfinite - before;
    if (c->sub[where])
        for (int64_t t = 0; t < n && c->n_sub[where] < AWQ_SUB_ROWS; t += c->sub_stride)
            memcpy(c->sub[where] + c->n_sub[where]++ * dim, x + t * dim, (size_t)dim * sizeof(float));
    c->t_stats += now_s() - t0;
    c->u_stats += cpu_s() - u0;
}

static const nb_tensor **wslot(nb_layer *L, int w) {
    switch (w) {
    case W_Q: return &L->wq;
    case W_K: return &L->wk;
    case W_V: return &L->wv;
    case W_O: return &L->wo;
    case W_GATE: return &L->w_gate;
    case W_UP: return &L->w_up;
    default: return &L->w_down;
    }
}

static const nb_rtn_tensor *planned(const cal *c, const char *name) {
    for (int64_t i = 0; i < c->plan->n_tensors; i++)
        if (!strcmp(c->plan->tensors[i].name, name)) return &c->plan->tensors[i];
    return NULL;
}

/* Runs block l on every sample; capture says whether statistics are taken;
 * update whether the residual streams advance. */
static nb_status run_block_n(cal *c, int l, bool cap, bool update, int64_t ns) {
    const int64_t E = c->m->hp.n_embd;
    int32_t *pos = NULL, *seq = NULL;
    nb_status st = NB_OK;
    int32_t maxlen = 0;
    for (int64_t s = 0; s < c->set.n; s++) maxlen = NB_MAX(maxlen, c->set.len[s]);
    pos = malloc((size_t)maxlen * sizeof(int32_t));
    seq = calloc((size_t)maxlen, sizeof(int32_t));
    if (!pos || !seq) st = NB_ERR_NOMEM;
    int32_t nblk = (int32_t)c->kv.n_blocks;
    int32_t *blocks = malloc((size_t)nblk * sizeof(int32_t));
    if (!blocks) st = NB_ERR_NOMEM;
    for (int32_t i = 0; st == NB_OK && i < nblk; i++) blocks[i] = i;
    for (int32_t i = 0; st == NB_OK && i < maxlen; i++) pos[i] = i;
    nb_seq_view sv = {blocks, nblk};
    c->capture_on = cap;
    const double t0 = now_s(), ts0 = c->t_stats, u0 = cpu_s(), us0 = c->u_stats;
    for (int64_t s = 0; st == NB_OK && s < ns; s++) {
        nb_batch b = {.n = c->set.len[s], .tokens = c->set.ids[s], .pos = pos, .seq = seq, .n_seqs = 1, .seqs = &sv};
        float *x = update ? c->x[s] : c->scratch;
        if (!update) memcpy(x, c->x[s], (size_t)(c->set.len[s] * E) * sizeof(float));
        st = nb_fwd_run_layers(c->fwd, &b, l, l + 1, x);
    }
    c->capture_on = false;
    c->t_fwd += now_s() - t0 - (c->t_stats - ts0);
    c->u_fwd += cpu_s() - u0 - (c->u_stats - us0);
    free(pos);
    free(seq);
    free(blocks);
    return st;
}

static nb_status run_block(cal *c, int l, bool cap, bool update) { return run_block_n(c, l, cap, update, c->set.n); }

/* Runs block l on the module search's samples (residual streams unchanged)
 * and collects the inputs of `slot` into out ([tokens][dim]). */
static nb_status run_probe(cal *c, int l, int slot, float *out) {
    c->probe = out;
    c->probe_slot = slot;
    c->probe_n = 0;
    nb_status st = run_block_n(c, l, false, false, c->mod_ns);
    c->probe = NULL;
    return st;
}

/* AWQ's module: block l with the group's linears replaced by deq[i]; its
 * activations before the module's last linear (attention output before o,
 * or silu(gate) up before down) */
typedef struct awq_mod {
    cal *c;
    int l, first, n, slot;
    int64_t rows[3], cols;
} awq_mod;

static nb_status awq_mod_run(void *ud, const float *const *deq, float *act) {
    awq_mod *am = ud;
    nb_layer *L = &am->c->m->layers[am->l];
    nb_tensor tmp[3];
    const nb_tensor *saved[3];
    for (int i = 0; i < am->n; i++) {
        const nb_tensor **slot = wslot(L, am->first + i);
        saved[i] = *slot;
        tmp[i] = (nb_tensor){.name = saved[i]->name, .type = NB_F32, .n_dims = 2, .ne = {am->cols, am->rows[i], 1, 1},
                             .data = (void *)deq[i], .nbytes = (uint64_t)(am->rows[i] * am->cols) * 4};
        *slot = &tmp[i];
    }
    nb_status st = run_probe(am->c, am->l, am->slot, act);
    for (int i = 0; i < am->n; i++) *wslot(L, am->first + i) = saved[i];
    return st;
}

/* The input file's pages of a finished block's weight are not read again
 * during calibration (the writer reads the file through its own mapping):
 * drop them from the resident set, so that peak RSS does not grow with the
 * depth of the model. Only for tensors that are the read-only file mapping
 * itself (the GGUF source's data, never a converted copy). */
static void drop_pages(const nb_model *m, const nb_tensor *t) {
    const nb_tensor *s = nb_source_find(&m->src, t->name);
    if (!s || s->data != t->data || !t->data) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)t->data, e = a + t->nbytes;
    const uintptr_t a2 = (a + pg - 1) / pg * pg, e2 = e / pg * pg;
    if (e2 > a2) (void)madvise((void *)a2, e2 - a2, MADV_DONTNEED);
}

static nb_status embed_all(cal *c) {
    const int64_t E = c->m->hp.n_embd;
    for (int64_t s = 0; s < c->set.n; s++) {
        c->x[s] = malloc((size_t)(c->set.len[s] * E) * sizeof(float));
        if (!c->x[s]) return nb_fail(NB_ERR_NOMEM, "out of memory for the calibration activations (%lld tokens x %lld)",
                                     (long long)c->set.n_tokens, (long long)E);
        const nb_tensor *emb = c->m->tok_embd;
        for (int32_t t = 0; t < c->set.len[s]; t++) NB_TRY(nb_get_row(emb, c->set.ids[s][t], c->x[s] + t * E));
    }
    return NB_OK;
}

static void tensor_rows(const nb_tensor *t, float *out) {
    for (int64_t r = 0; r < nb_tensor_rows(t); r++) nb_imatrix_row_to_float(t, r, out + r * t->ne[0]);
}

/* Quantizes W (rows x cols floats, may be modified) to `type` with the
 * method; keeps the bytes under `name` and writes the dequantized values
 * into deq. */
static nb_status quantize_weight(cal *c, const char *name, nb_dtype type, float *W, int64_t rows, int64_t cols,
                                 int slot, float *deq, const float *orig) {
    const nb_qtype *qt = nb_qtype_get(type);
    uint64_t rb;
    if (type == NB_F32 || type == NB_F16 || type == NB_BF16) {
        nb_dtype_row_bytes(type, (uint64_t)cols, &rb);
        result *r = add_result(c->q, name, type, rb * (uint64_t)rows);
        if (!r) return NB_ERR_NOMEM;
        for (int64_t i = 0; i < rows * cols; i++) {
            float v = W[i];
            if (type == NB_F16) { ((uint16_t *)r->bytes)[i] = nb_fp32_to_fp16(v); v = nb_fp16_to_fp32(((uint16_t *)r->bytes)[i]); }
            else if (type == NB_BF16) { ((uint16_t *)r->bytes)[i] = nb_fp32_to_bf16(v); v = nb_bf16_to_fp32(((uint16_t *)r->bytes)[i]); }
            else ((float *)r->bytes)[i] = v;
            deq[i] = v;
        }
        r->rel_rms = 0;
        if (c->o->method == NB_CALIB_GPTQ) r->method = "rtn"; /* a plain conversion: GPTQ has nothing to round */
        return NB_OK;
    }
    if (!qt || !nb_dtype_row_bytes(type, (uint64_t)cols, &rb))
        return nb_fail(NB_ERR_INVALID, "tensor '%s': %s cannot hold rows of %lld", name, nb_dtype_name(type),
                       (long long)cols);
    result *r = add_result(c->q, name, type, rb * (uint64_t)rows);
    if (!r) return NB_ERR_NOMEM;
    bool done = false;
    if (c->o->method == NB_CALIB_GPTQ && nb_gptq_supports(type, cols)) {
        nb_calib_stats *s = &c->st[slot];
        nb_gptq_params gp = {.type = type, .damp = c->o->damp, .desc_act = c->o->desc_act,
                             .static_groups = c->o->static_groups};
        nb_gptq_result gr;
        nb_status st = NB_OK;
        double t0 = now_s(), u0 = cpu_s();
        if (!c->hinv[slot])
            st = s->count > 0 ? nb_gptq_hinv_create(s->H, s->count, cols, &gp, c->pool, &c->hinv[slot])
                              : nb_fail(NB_ERR_INVALID, "no calibration tokens reached '%s'", name);
        double t1 = now_s(), u1 = cpu_s();
        c->t_factor += t1 - t0;
        c->u_factor += u1 - u0;
        if (st == NB_OK) st = nb_gptq_quantize_hinv(W, rows, cols, c->hinv[slot], &gp, r->bytes, c->pool, &gr);
        c->t_quant += now_s() - t1;
        c->u_quant += cpu_s() - u1;
        if (st != NB_OK) return nb_fail_wrap(st, "tensor '%s': ", name);
        if (gr.damp_used > c->o->damp * 1.0001)
            NB_WARN("GPTQ: '%s': the Cholesky factorisation needed damp %g (asked %g)", name, gr.damp_used, c->o->damp);
        if (gr.n_dead)
            NB_WARN("GPTQ: '%s': %lld input columns were all zero in the calibration data; their weights are set to 0",
                    name, (long long)gr.n_dead);
        c->q->damp_max = fmax(c->q->damp_max, gr.damp_used);
        done = true;
    } else if (c->o->method == NB_CALIB_GPTQ) {
        r->method = "rtn";
        snprintf(r->note, sizeof r->note, "GPTQ cannot write %s rows of %lld (only W4G*, Q4_0, Q4_1, Q4_K): "
                 "round-to-nearest", nb_dtype_name(type), (long long)cols);
    }
    if (!done)
        for (int64_t i = 0; i < rows; i++) qt->from_float(W + i * cols, (uint8_t *)r->bytes + (uint64_t)i * rb, cols);
    double e2 = 0, r2 = 0;
    for (int64_t i = 0; i < rows; i++) qt->to_float((uint8_t *)r->bytes + (uint64_t)i * rb, deq + i * cols, cols);
    for (int64_t i = 0; i < rows * cols; i++) {
        double d = (double)deq[i] - orig[i];
        e2 += d * d;
        r2 += (double)orig[i] * orig[i];
    }
    r->rel_rms = r2 > 0 ? sqrt(e2 / r2) : 0;
    return NB_OK;
}

/* ---- one block ----------------------------------------------------------------- */

static nb_status norm_result(cal *c, int l, int which, const float *v, int64_t E) {
    char name[64];
    snprintf(name, sizeof name, "blk.%d.%s.weight", l, which ? "ffn_norm" : "attn_norm");
    const nb_rtn_tensor *pt = planned(c, name);
    if (!pt || pt->type != NB_F32)
        return nb_fail(NB_ERR_UNSUPPORTED, "'%s' must be written as F32 for scale folding", name);
    result *r = add_result(c->q, name, NB_F32, (uint64_t)E * 4);
    if (!r) return NB_ERR_NOMEM;
    memcpy(r->bytes, v, (size_t)E * 4);
    return NB_OK;
}

/* The report's note for the quantized linears of an AWQ group that gets
 * no scales (q and k get no clip search either, as in AutoAWQ). */
static void awq_skip_notes(char (*notes)[NB_RTN_WHY_MAX], const nb_dtype *types, int first, int n, const char *why) {
    for (int w = first; w < first + n; w++)
        if (nb_qtype_get(types[w]))
            snprintf(notes[w], NB_RTN_WHY_MAX, "no AWQ scales (%s): %s", why,
                     w == W_Q || w == W_K ? "round-to-nearest" : "clip search + round-to-nearest");
}

/* Transforms and quantizes the linears w0..w1-1 of block l (all of them
 * for RTN, AWQ and SmoothQuant; one input's group per call for GPTQ's true
 * sequential order) and puts their dequantized values in the model. */
static nb_status do_block(cal *c, int l, int w0, int w1) {
    nb_model *m = c->m;
    nb_layer *L = &m->layers[l];
    const nb_arch_desc *hp = &m->hp;
    const int64_t E = hp->n_embd;
    float *W[W_N] = {0}, *orig[W_N] = {0};
    int64_t rows[W_N], cols[W_N];
    nb_dtype types[W_N];
    const char *names[W_N];
    char notes[W_N][NB_RTN_WHY_MAX] = {{0}}; /* AWQ groups that get no scales */
    nb_status st = NB_OK;
    for (int w = w0; w < w1 && st == NB_OK; w++) {
        const nb_tensor *t = *wslot(L, w);
        names[w] = t->name;
        rows[w] = nb_tensor_rows(t);
        cols[w] = t->ne[0];
        const nb_rtn_tensor *pt = planned(c, t->name);
        if (!pt) { st = nb_fail(NB_ERR_INVALID, "tensor '%s' is not in the plan", t->name); break; }
        types[w] = pt->type;
        W[w] = malloc((size_t)(rows[w] * cols[w]) * sizeof(float));
        orig[w] = malloc((size_t)(rows[w] * cols[w]) * sizeof(float));
        if (!W[w] || !orig[w]) { st = NB_ERR_NOMEM; break; }
        tensor_rows(t, W[w]);
        memcpy(orig[w], W[w], (size_t)(rows[w] * cols[w]) * sizeof(float));
    }
    float *an = c->norms + (int64_t)l * 2 * E, *fn = an + E;
    if (st == NB_OK && w0 == 0) {
        memcpy(an, L->attn_norm, (size_t)E * 4);
        memcpy(fn, L->ffn_norm, (size_t)E * 4);
    }
    if (st == NB_OK && c->o->method == NB_CALIB_AWQ) {
        /* groups: (q,k,v | attn_norm), (o | v rows, plain attention only), (gate,up | ffn_norm), (down | up rows) */
        struct { int slot, first, n; int prev; } grp[4] = {
            {NB_FWD_CAP_ATTN_IN, W_Q, 3, -1}, {NB_FWD_CAP_ATTN_OUT, W_O, 1, W_V},
            {NB_FWD_CAP_FFN_IN, W_GATE, 2, -1}, {NB_FWD_CAP_FFN_DOWN, W_DOWN, 1, W_UP}};
        for (int g = 0; g < 4 && st == NB_OK; g++) {
            if (grp[g].prev == W_V && (hp->n_head != hp->n_head_kv || L->bv)) { /* GQA: no 1:1 fold */
                awq_skip_notes(notes, types, grp[g].first, grp[g].n, "no 1:1 fold into v: GQA or a v bias");
                continue;
            }
            bool quantized = true; /* a group written in F16 (row fallback) has nothing to protect */
            for (int i = 0; i < grp[g].n; i++) quantized &= nb_qtype_get(types[grp[g].first + i]) != NULL;
            if (!quantized) {
                awq_skip_notes(notes, types, grp[g].first, grp[g].n, "a linear of its group is written as float");
                continue;
            }
            int64_t K = cols[grp[g].first];
            float *s = malloc((size_t)K * sizeof(float));
            double alpha = 0;
            if (!s) { st = NB_ERR_NOMEM; break; }
            const nb_calib_stats *cs = &c->st[grp[g].slot];
            double *mean = malloc((size_t)K * sizeof(double));
            if (!mean) { free(s); st = NB_ERR_NOMEM; break; }
            for (int64_t k = 0; k < K; k++) mean[k] = cs->count > 0 ? cs->sum_abs[k] / cs->count : 0;
            if (grp[g].prev < 0) {
                /* (q,k,v) / (gate,up): the error at the output of the attention block / MLP (module2inspect) */
                const int mslot = grp[g].slot == NB_FWD_CAP_ATTN_IN ? NB_FWD_CAP_ATTN_OUT : NB_FWD_CAP_FFN_DOWN;
                const int pw = mslot == NB_FWD_CAP_ATTN_OUT ? W_O : W_DOWN;
                awq_mod am = {.c = c, .l = l, .first = grp[g].first, .n = grp[g].n, .slot = mslot, .cols = K};
                for (int i = 0; i < grp[g].n; i++) am.rows[i] = rows[grp[g].first + i];
                nb_awq_module mod = {.run = awq_mod_run, .ud = &am, .dim = cols[pw], .proj = orig[pw],
                                     .proj_rows = rows[pw]};
                for (int64_t i = 0; i < c->mod_ns; i++) mod.n += c->set.len[i];
                float *ref = malloc((size_t)(mod.n * mod.dim) * sizeof(float));
                if (!ref) st = NB_ERR_NOMEM;
                if (st == NB_OK) st = run_probe(c, l, mslot, ref);
                mod.ref = ref;
                if (st == NB_OK)
                    st = nb_awq_search_module(mean, (const float *const *)(W + grp[g].first), rows + grp[g].first,
                                              types + grp[g].first, grp[g].n, K, &mod, s, &alpha, NULL, c->pool);
                free(ref);
            } else {
                st = nb_awq_search(c->sub[grp[g].slot], c->n_sub[grp[g].slot], mean,
                                   (const float *const *)(W + grp[g].first), rows + grp[g].first,
                                   types + grp[g].first, grp[g].n, K, s, &alpha, c->pool);
            }
            if (st != NB_OK && st != NB_ERR_NOMEM)
                nb_fail_wrap(st, "'%s' and the rest of its group: ", names[grp[g].first]);
            free(mean);
            if (st == NB_OK) {
                for (int i = 0; i < grp[g].n; i++) {
                    int w = grp[g].first + i;
                    for (int64_t r = 0; r < rows[w]; r++)
                        for (int64_t k = 0; k < K; k++) W[w][r * K + k] *= s[k];
                }
                if (grp[g].prev < 0) {
                    float *nv = grp[g].slot == NB_FWD_CAP_ATTN_IN ? an : fn;
                    for (int64_t k = 0; k < K; k++) nv[k] /= s[k];
                } else { /* rows of the previous linear */
                    int pw = grp[g].prev;
                    for (int64_t r = 0; r < rows[pw]; r++)
                        for (int64_t k = 0; k < cols[pw]; k++) W[pw][r * cols[pw] + k] /= s[r];
                }
                /* the captured inputs of this slot are now x / s */
                for (int64_t t = 0; t < c->n_sub[grp[g].slot]; t++)
                    for (int64_t k = 0; k < K; k++) c->sub[grp[g].slot][t * K + k] /= s[k];
                if (c->tty && !c->quiet) fprintf(stderr, "  blk.%d %s: alpha %.2f\n", l, names[grp[g].first], alpha);
            }
            free(s);
        }
        for (int w = 0; w < W_N && st == NB_OK; w++)
            if (w != W_Q && w != W_K) nb_awq_clip(c->sub[w_slot[w]], c->n_sub[w_slot[w]], W[w], rows[w], cols[w], types[w], c->pool);
    }
    if (st == NB_OK && c->o->method == NB_CALIB_SMOOTHQUANT) {
        /* s_j = max|x_j|^a / max|w_j|^(1-a) over the group's weights, for the
         * linears after a norm (q,k,v and gate,up) */
        struct { int slot, first, n; float *nv; } grp[2] = {{NB_FWD_CAP_ATTN_IN, W_Q, 3, an},
                                                             {NB_FWD_CAP_FFN_IN, W_GATE, 2, fn}};
        float *sv = malloc((size_t)E * sizeof(float));
        if (!sv) st = NB_ERR_NOMEM;
        for (int g = 0; g < 2 && st == NB_OK; g++) {
            st = nb_smoothquant_scales(c->st[grp[g].slot].max_abs, (const float *const *)(W + grp[g].first),
                                       rows + grp[g].first, grp[g].n, E, c->o->alpha, sv);
            if (st != NB_OK) {
                nb_fail_wrap(st, "'%s' and the rest of its group: ", names[grp[g].first]);
                break;
            }
            for (int i = 0; i < grp[g].n; i++) {
                int w = grp[g].first + i;
                for (int64_t r = 0; r < rows[w]; r++)
                    for (int64_t k = 0; k < E; k++) W[w][r * E + k] *= sv[k];
            }
            for (int64_t k = 0; k < E; k++) grp[g].nv[k] /= sv[k];
        }
        free(sv);
    }
    if (st == NB_OK && (c->o->method == NB_CALIB_AWQ || c->o->method == NB_CALIB_SMOOTHQUANT)) {
        st = norm_result(c, l, 0, an, E);
        if (st == NB_OK) st = norm_result(c, l, 1, fn, E);
        L->attn_norm = an;
        L->ffn_norm = fn;
    }
    for (int w = w0; w < w1 && st == NB_OK; w++) {
        nb_tensor *t = &c->own[(int64_t)l * W_N + w];
        float *deq = c->own_data[(int64_t)l * W_N + w] = malloc((size_t)(rows[w] * cols[w]) * sizeof(float));
        if (!deq) { st = NB_ERR_NOMEM; break; }
        /* the error is reported against the weights the model computes with (after folding) */
        float *ref = c->o->method == NB_CALIB_RTN ? orig[w] : W[w];
        if (c->o->method == NB_CALIB_AWQ || c->o->method == NB_CALIB_SMOOTHQUANT)
            memcpy(orig[w], W[w], (size_t)(rows[w] * cols[w]) * sizeof(float));
        ref = orig[w];
        st = quantize_weight(c, names[w], types[w], W[w], rows[w], cols[w], w_slot[w], deq, ref);
        result *res = st == NB_OK && notes[w][0] ? find_result(c->q, names[w]) : NULL;
        if (res) {
            snprintf(res->note, sizeof res->note, "%s", notes[w]);
            if (w == W_Q || w == W_K) res->method = "rtn"; /* no scales and no clip search */
        }
        const nb_tensor *src = *wslot(L, w);
        *t = (nb_tensor){.name = src->name, .type = NB_F32, .n_dims = 2, .ne = {cols[w], rows[w], 1, 1},
                         .data = deq, .nbytes = (uint64_t)(rows[w] * cols[w]) * 4};
    }
    for (int w = w0; w < w1 && st == NB_OK; w++) *wslot(L, w) = &c->own[(int64_t)l * W_N + w];
    for (int k = 0; k < NB_FWD_CAP_N; k++) {
        nb_gptq_hinv_free(c->hinv[k]);
        c->hinv[k] = NULL;
    }
    for (int w = 0; w < W_N; w++) {
        free(W[w]);
        free(orig[w]);
    }
    return st;
}

/* The text of the model's special token `id` ("" when it has none). */
static void token_text(const nb_tokenizer *tok, int32_t id, char *buf, size_t n) {
    buf[0] = '\0';
    if (id < 0) return;
    size_t k = nb_token_piece(tok, id, true, buf, n - 1);
    buf[NB_MIN(k, n - 1)] = '\0';
}

/* Puts `bos` (when >= 0) before the tokens. */
static nb_status prepend_bos(int32_t **ids, size_t *n, int32_t bos) {
    if (bos < 0) return NB_OK;
    int32_t *u = realloc(*ids, (*n + 1) * sizeof *u);
    if (!u) return NB_ERR_NOMEM;
    memmove(u + 1, u, *n * sizeof *u);
    u[0] = bos;
    *ids = u;
    (*n)++;
    return NB_OK;
}

/* A "messages" document as nibble serve tokenizes a chat request (without
 * the generation prompt): the model's template with its own BOS text,
 * control-token text parsed; the generic template gets no BOS text and the
 * BOS token is put before it when the vocabulary wants one. */
static nb_status tokenize_messages(const cal *c, int64_t i, const nb_calib_doc *d, const nb_chat_template *ct,
                                   const nb_tokenizer *tok, int32_t **ids, size_t *n) {
    char bos[128], eos[128];
    const bool generic = nb_chat_template_is_generic(ct);
    token_text(tok, nb_tokenizer_bos(tok), bos, sizeof bos);
    token_text(tok, nb_tokenizer_eos(tok), eos, sizeof eos);
    nb_chat_msg *msgs = calloc((size_t)d->n_msgs, sizeof *msgs);
    char *txt = NULL;
    if (!msgs) return NB_ERR_NOMEM;
    nb_status st = NB_OK;
    for (int k = 0; st == NB_OK && k < d->n_msgs; k++) {
        if (!nb_chat_role_parse(d->roles[k], &msgs[k].role))
            st = nb_fail(NB_ERR_INVALID, "%s: document %lld: unknown role '%s' (allowed: system, developer, user, "
                         "assistant, tool)", c->o->calib, (long long)i + 1, d->roles[k]);
        msgs[k].content = d->contents[k];
    }
    if (st == NB_OK) st = nb_chat_render(ct, msgs, (size_t)d->n_msgs, false, generic ? "" : bos, eos, &txt);
    if (st == NB_OK) st = nb_tokenize(tok, txt, strlen(txt), false, true, ids, n);
    if (st == NB_OK && generic) st = prepend_bos(ids, n, nb_tokenizer_add_bos(tok) ? nb_tokenizer_bos(tok) : -1);
    free(txt);
    free(msgs);
    return st;
}

/* Tokenizes the documents and draws the samples. Plain text is one token
 * stream cut into windows, each given the BOS the vocabulary wants; a JSONL
 * document is one sample that starts as the model would see it served: a
 * "text" as a completion prompt (BOS + text), "messages" as a chat request. */
static nb_status make_samples(cal *c, nb_tokenizer *tok) {
    nb_calib_docs docs;
    NB_TRY(nb_calib_read(c->o->calib, &docs));
    snprintf(c->q->calib_sha, sizeof c->q->calib_sha, "%s", docs.sha256);
    int32_t **ids = calloc((size_t)docs.n, sizeof(int32_t *));
    size_t *lens = calloc((size_t)docs.n, sizeof(size_t));
    nb_status st = ids && lens ? NB_OK : NB_ERR_NOMEM;
    nb_chat_template *ct = NULL; /* the model's (Jinja), or the generic one as nibble serve falls back */
    if (st == NB_OK && nb_chat_template_create(nb_tokenizer_chat_template(tok), "the model's", &ct) != NB_OK &&
        nb_chat_template_create(NULL, NULL, &ct) != NB_OK)
        st = NB_ERR_NOMEM;
    const int32_t bos_id = nb_tokenizer_add_bos(tok) ? nb_tokenizer_bos(tok) : -1;
    for (int64_t i = 0; st == NB_OK && i < docs.n; i++) {
        const nb_calib_doc *d = &docs.d[i];
        if (d->text) {
            st = nb_tokenize(tok, d->text, d->len, false, false, &ids[i], &lens[i]);
            if (st == NB_OK && docs.jsonl) st = prepend_bos(&ids[i], &lens[i], bos_id);
        } else {
            st = tokenize_messages(c, i, d, ct, tok, &ids[i], &lens[i]);
        }
    }
    if (st == NB_OK)
        st = nb_calib_sample(ids, lens, docs.n, !docs.jsonl, docs.jsonl ? -1 : bos_id, c->o->samples, c->o->seq_len,
                             c->o->seed, &c->set);
    if (st != NB_OK && st != NB_ERR_NOMEM) nb_fail_wrap(st, "%s: ", c->o->calib);
    for (int64_t i = 0; ids && i < docs.n; i++) free(ids[i]);
    free(ids);
    free(lens);
    nb_chat_template_free(ct);
    nb_calib_docs_free(&docs);
    return st;
}

/* One warning naming the tensors the method could not handle as planned
 * (the per-tensor report has each one's note). */
static void warn_method_notes(const nb_qcal *q) {
    enum { SHOWN = 6 }; /* the warning's line stays within nb_log's 2048 bytes */
    char list[SHOWN * (NB_RTN_NAME_MAX + NB_RTN_WHY_MAX)];
    size_t used = 0;
    int64_t n = 0;
    list[0] = '\0';
    for (int64_t i = 0; i < q->n_res; i++) {
        const result *r = &q->res[i];
        if (!r->note[0]) continue;
        if (n++ < SHOWN && used < sizeof list) {
            int k = snprintf(list + used, sizeof list - used, "%s%s (%s)", used ? "; " : "", r->name, r->note);
            used += k > 0 ? (size_t)k : 0;
        }
    }
    if (n)
        NB_WARN("%s: %lld tensors were not quantized as planned: %s%s", nb_calib_method_name(q->o.method),
                (long long)n, list, n > SHOWN ? "; ... (the per-tensor report names them all)" : "");
}

static nb_status calibrate(nb_qcal *q, const nb_calib_opts *o, const char *in, const nb_rtn_params *p, bool quiet) {
    cal c = {.q = q, .o = o, .quiet = quiet, .tty = isatty(2)};
    nb_rtn_report plan;
    nb_source src;
    NB_TRY(nb_source_open(in, &src));
    nb_status st = nb_rtn_plan(&src, p, &plan);
    nb_source_close(&src);
    if (st != NB_OK) return st;
    c.plan = &plan;
    nb_model_params mp = {.use_mmap = true};
    nb_tokenizer *tok = NULL;
    st = nb_model_load_ex(in, &mp, &c.m);
    if (st == NB_OK) st = nb_tokenizer_load(in, NULL, &tok);
    if (st == NB_OK) st = make_samples(&c, tok);
    nb_tokenizer_free(tok);
    if (st == NB_OK) {
        q->n_samples = c.set.n;
        q->n_tokens = c.set.n_tokens;
        nb_calib_set_report(&c.set, o->seq_len, o->report, stderr);
    }
    const nb_arch_desc *hp = c.m ? &c.m->hp : NULL;
    int32_t maxlen = 0;
    for (int64_t s = 0; s < c.set.n; s++) maxlen = NB_MAX(maxlen, c.set.len[s]);
    const int32_t bsz = 16;
    if (st == NB_OK) st = nb_kv_pool_init(&c.kv, hp, bsz, (maxlen + bsz - 1) / bsz);
    if (st == NB_OK) st = nb_fwd_create(c.m, &c.kv, p->n_threads, maxlen, &c.fwd);
    if (st == NB_OK) st = nb_pool_create(p->n_threads, &c.pool);
    int64_t dims[NB_FWD_CAP_N];
    if (st == NB_OK) {
        dims[0] = hp->n_embd;
        dims[1] = (int64_t)hp->n_head * hp->head_dim;
        dims[2] = hp->n_embd;
        dims[3] = hp->n_ff;
        for (int k = 0; k < NB_FWD_CAP_N && st == NB_OK; k++) {
            st = nb_calib_stats_init(&c.st[k], dims[k], o->method == NB_CALIB_GPTQ);
            if (st == NB_OK && o->method == NB_CALIB_AWQ) {
                c.sub[k] = malloc((size_t)(AWQ_SUB_ROWS * dims[k]) * sizeof(float));
                if (!c.sub[k]) st = NB_ERR_NOMEM;
            }
        }
        c.sub_stride = NB_MAX(1, c.set.n_tokens / AWQ_SUB_ROWS);
        /* the module search runs whole samples (attention needs every earlier position): the first ones of the
         * seeded draw, up to AWQ_MOD_TOKENS tokens, at least one */
        int64_t mt = 0;
        while (c.mod_ns < c.set.n && (c.mod_ns == 0 || mt + c.set.len[c.mod_ns] <= AWQ_MOD_TOKENS))
            mt += c.set.len[c.mod_ns++];
        c.x = calloc((size_t)c.set.n, sizeof(float *));
        c.scratch = malloc((size_t)maxlen * (size_t)hp->n_embd * sizeof(float));
        c.own = calloc((size_t)hp->n_layer * W_N, sizeof(nb_tensor));
        c.own_data = calloc((size_t)hp->n_layer * W_N, sizeof(float *));
        c.norms = malloc((size_t)hp->n_layer * 2 * (size_t)hp->n_embd * sizeof(float));
        if (st == NB_OK && (!c.x || !c.scratch || !c.own || !c.own_data || !c.norms)) st = NB_ERR_NOMEM;
    }
    if (st == NB_OK) st = embed_all(&c);
    if (st == NB_OK) nb_fwd_set_capture(c.fwd, capture, &c);
    const nb_tensor **orig_w = hp ? calloc((size_t)hp->n_layer * W_N, sizeof *orig_w) : NULL;
    if (st == NB_OK && !orig_w) st = NB_ERR_NOMEM;
    for (int l = 0; st == NB_OK && l < hp->n_layer; l++)
        for (int w = 0; w < W_N; w++) orig_w[(int64_t)l * W_N + w] = *wslot(&c.m->layers[l], w);
    double t0 = now_s(), u0 = cpu_s();
    for (int l = 0; st == NB_OK && hp && l < hp->n_layer; l++) {
        /* GPTQ, "true sequential": each input's statistics are taken after
         * the linears before it in the block were quantized - (q,k,v), then
         * o, then (gate,up), then down, one block run each. The others take
         * every input in one run of the float block. */
        static const int stage_w[][2] = {{W_Q, W_O}, {W_O, W_GATE}, {W_GATE, W_DOWN}, {W_DOWN, W_N}};
        const bool seq = o->method == NB_CALIB_GPTQ;
        for (int sg = 0; sg < (seq ? 4 : 1) && st == NB_OK; sg++) {
            for (int k = 0; k < NB_FWD_CAP_N; k++) {
                nb_calib_stats_reset(&c.st[k]);
                c.n_sub[k] = 0;
            }
            c.cap_mask = seq ? 1u << w_slot[stage_w[sg][0]] : (1u << NB_FWD_CAP_N) - 1;
            st = run_block(&c, l, true, false);
            double tf = now_s(), uf = cpu_s();
            for (int k = 0; k < NB_FWD_CAP_N; k++) nb_calib_stats_flush(&c.st[k], c.pool);
            c.t_stats += now_s() - tf;
            c.u_stats += cpu_s() - uf;
            if (st == NB_OK && c.nonfinite)
                st = nb_fail(NB_ERR_INVALID, "%s: NaN or Inf in the inputs of block %d's linears (%lld tokens): the "
                             "model or the calibration data is broken", in, l, (long long)c.nonfinite);
            if (st == NB_OK) st = seq ? do_block(&c, l, stage_w[sg][0], stage_w[sg][1]) : do_block(&c, l, 0, W_N);
        }
        if (st == NB_OK && l + 1 < hp->n_layer) st = run_block(&c, l, false, true);
        /* block l is not run again: its dequantized copies can go (memory
         * stays near one block of float weights), and the model's own
         * tensors come back in their place */
        for (int w = 0; w < W_N && c.own_data; w++) {
            nb_tensor *t = &c.own[(int64_t)l * W_N + w];
            if (t->data && *wslot(&c.m->layers[l], w) == t) *wslot(&c.m->layers[l], w) = orig_w[(int64_t)l * W_N + w];
            free(c.own_data[(int64_t)l * W_N + w]);
            c.own_data[(int64_t)l * W_N + w] = NULL;
            t->data = NULL;
            drop_pages(c.m, orig_w[(int64_t)l * W_N + w]);
        }
        if (st == NB_OK && !quiet) {
            double el = now_s() - t0, eta = el / (l + 1) * (hp->n_layer - l - 1);
            if (c.tty)
                fprintf(stderr, "\r%s: block %d/%d done, %.1f s, ETA %.0f s   ", nb_calib_method_name(o->method), l + 1,
                        hp->n_layer, el, eta);
            else
                fprintf(stderr, "%s: block %d/%d done, %.1f s (CPU %.1f s)\n", nb_calib_method_name(o->method), l + 1,
                        hp->n_layer, el, cpu_s() - u0);
        }
    }
    if (!quiet && c.tty) fputc('\n', stderr);
    if (st == NB_OK) warn_method_notes(q);
    if (st == NB_OK && !quiet) {
        const double tw = now_s() - t0, tu = cpu_s() - u0;
        fprintf(stderr, "%s: wall %.1f s: forward %.1f, statistics %.1f, factorisation %.1f, quantization %.1f, rest %.1f\n",
                nb_calib_method_name(o->method), tw, c.t_fwd, c.t_stats, c.t_factor, c.t_quant,
                tw - c.t_fwd - c.t_stats - c.t_factor - c.t_quant);
        fprintf(stderr, "%s: CPU %.1f s: forward %.1f, statistics %.1f, factorisation %.1f, quantization %.1f, rest %.1f\n",
                nb_calib_method_name(o->method), tu, c.u_fwd, c.u_stats, c.u_factor, c.u_quant,
                tu - c.u_fwd - c.u_stats - c.u_factor - c.u_quant);
    }
    free(orig_w);
    for (int k = 0; k < NB_FWD_CAP_N; k++) {
        nb_calib_stats_free(&c.st[k]);
        free(c.sub[k]);
    }
    for (int64_t s = 0; c.x && s < c.set.n; s++) free(c.x[s]);
    free(c.x);
    free(c.scratch);
    if (c.own_data)
        for (int64_t i = 0; hp && i < (int64_t)hp->n_layer * W_N; i++) free(c.own_data[i]);
    free(c.own_data);
    free(c.own);
    free(c.norms);
    nb_fwd_free(c.fwd);
    if (c.kv.n_layer) nb_kv_pool_free(&c.kv);
    nb_pool_free(c.pool);
    nb_model_free(c.m);
    nb_calib_set_free(&c.set);
    nb_rtn_report_free(&plan);
    return st;
}

/* NaN / Inf in a weight is refused before the calibration starts (the
 * forward pass would only report it as broken activations of some block),
 * naming the tensor; nb_rtn_quantize then need not read the input again. */
static nb_status check_finite(const nb_source *src, nb_rtn_params *p) {
    nb_pool *pool = NULL;
    NB_TRY(nb_pool_create(p->n_threads, &pool));
    nb_status st = nb_rtn_check_source_finite(src, pool);
    nb_pool_free(pool);
    if (st == NB_OK) p->finite_checked = true;
    return st;
}

nb_status nb_qcal_prepare(const nb_calib_opts *o, const char *in, const char *imatrix_path, bool quiet,
                          nb_rtn_params *p, nb_qcal **out) {
    *out = NULL;
    nb_qcal *q = nb_calloc(1, sizeof *q);
    if (!q) return NB_ERR_NOMEM;
    q->o = *o;
    nb_source src;
    nb_status st = nb_source_open(in, &src);
    if (st != NB_OK) {
        free(q);
        return st;
    }
    if (strcmp(src.format, "gguf"))
        st = nb_fail(NB_ERR_UNSUPPORTED, "%s: --imatrix and calibrated methods need a GGUF input (convert it first "
                     "with nibble quantize IN out.gguf --type F16)", in);
    if (st == NB_OK) st = check_finite(&src, p);
    if (st == NB_OK && imatrix_path) {
        st = nb_imatrix_load(imatrix_path, &q->im);
        if (st == NB_OK) {
            q->have_im = true;
            snprintf(q->im_path, sizeof q->im_path, "%s", imatrix_path);
            st = nb_imatrix_check(&q->im, &src, imatrix_path);
        }
    }
    nb_source_close(&src);
    const nb_qtype *bt = nb_qtype_get(p->scheme.base);
    q->group = bt && bt->group ? (int)bt->group : (bt ? (int)bt->block : 0);
    if (st == NB_OK && o->method != NB_CALIB_RTN && !o->calib)
        st = nb_fail(NB_ERR_INVALID, "--method %s needs --calib FILE", nb_calib_method_name(o->method));
    if (st == NB_OK && o->method == NB_CALIB_RTN && o->calib)
        st = nb_fail(NB_ERR_INVALID, "--calib is used by --method gptq, awq or smoothquant (not rtn)");
    if (st == NB_OK && o->method != NB_CALIB_RTN && imatrix_path)
        st = nb_fail(NB_ERR_INVALID, "--imatrix applies to round-to-nearest K-quants, not --method %s",
                     nb_calib_method_name(o->method));
    if (st == NB_OK && o->method == NB_CALIB_SMOOTHQUANT && p->scheme.base != NB_W8A8 &&
        p->scheme.base != NB_F32 && p->scheme.base != NB_F16)
        st = nb_fail(NB_ERR_INVALID, "--method smoothquant writes W8A8 (or F32/F16 to check the folding), not %s",
                     p->scheme.name);
    if (st == NB_OK) st = nb_sha256_file(in, q->in_sha);
    if (st == NB_OK && o->method != NB_CALIB_RTN) st = calibrate(q, o, in, p, quiet);
    if (st != NB_OK) {
        nb_qcal_free(q);
        return st;
    }
    p->tensor_fn = tensor_fn;
    p->meta_fn = meta_fn;
    p->ud = q;
    p->method = o->method != NB_CALIB_RTN ? nb_calib_method_name(o->method) : q->have_im ? "rtn+imatrix" : "rtn";
    *out = q;
    return NB_OK;
}
