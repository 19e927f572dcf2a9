/* nb_matmul: Y[n][R] = X[n][K] * W^T over the thread pool, and the
 * kernel-context plumbing (dispatch chosen once, scratch reused).
 *
 * Work split: rows of W are divided into contiguous ranges, one per thread,
 * so each weight byte is read by exactly one thread once per call. With
 * n > 1 tokens a float or dequantized weight goes through a blocked GEMM
 * (float_worker): each piece is converted to f32 once and multiplied with
 * every token while it sits in L1. */
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/qdot.h"
#include "kernels/repack.h"
#include "quant/qtypes.h"

/* Float GEMM blocking (float_worker): rows per block (its C block of
 * GEMM_MC x tokens stays in L2; X is read once per block, so larger is
 * better until the block's weights and C crowd the L2: 192 measured best of
 * 48-480 on the TinyLlama shapes, 96 was 8% slower), fewer when whole rows
 * are dequantized first (GEMM_MC_DEQ x K floats), and tokens per chunk (the
 * X slab of one K step, NB_GEMM_KC x GEMM_NC floats, stays in L2). */
#define GEMM_MC 192
#define GEMM_MC_DEQ 48
#define GEMM_NC 512
/* Small float batches (PATH_FLOAT_DOTS): up to FLOAT_DOTS_MAX tokens, each
 * row block of FLOAT_DOTS_BLOCK bytes against every token while it sits in
 * L1, two tokens at a time (nb_dot2_fn). F16, 5632 x 2048 matrices, 2
 * threads, Zen 3 (session 42): the GEMM took 4.72 / 2.45 / 1.25x the dots'
 * time at 2 / 4 / 8 tokens, 1.02x at 12. */
#define FLOAT_DOTS_MAX 8
#define FLOAT_DOTS_BLOCK 16384

/* The widest float kernels at or below max_isa that this CPU runs. */
const nb_float_kernels *nb_float_kernels_get(nb_isa max_isa) {
    nb_isa isa = nb_cpu_isa();
    if (isa > max_isa) isa = max_isa;
    if (isa >= NB_ISA_AVX512 && nb_float_kernels_avx512()) return nb_float_kernels_avx512();
    if (isa >= NB_ISA_AVX2 && nb_float_kernels_avx2()) return nb_float_kernels_avx2();
    return nb_float_kernels_ref();
}

nb_status nb_kctx_init(nb_kctx *k, int n_threads) { return nb_kctx_init_with(k, n_threads, nb_dispatch_default()); }

nb_status nb_kctx_init_with(nb_kctx *k, int n_threads, const nb_dispatch *d) {
    memset(k, 0, sizeof *k);
    NB_TRY(nb_pool_create(n_threads, &k->pool));
    k->d = d;
    k->isa = d->isa;
    k->fk = d->fk;
    k->prefetch = d->decode_prefetch;
    k->prefetch_l2 = d->decode_prefetch_l2;
    k->streams = d->decode_streams;
    return NB_OK;
}

void nb_kctx_free(nb_kctx *k) {
    nb_pool_free(k->pool);
    free(k->scratch);
    free(k->act);
    memset(k, 0, sizeof *k);
}

static nb_status grow(uint8_t **buf, size_t *size, size_t bytes) {
    if (bytes <= *size) return NB_OK;
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return nb_fail(NB_ERR_NOMEM, "out of memory for %zu bytes of kernel scratch", bytes);
    free(*buf);
    *buf = p;
    *size = bytes;
    return NB_OK;
}

nb_status nb_kctx_scratch(nb_kctx *k, size_t bytes) { return grow(&k->scratch, &k->scratch_size, bytes); }
nb_status nb_kctx_act(nb_kctx *k, size_t bytes) { return grow(&k->act, &k->act_size, bytes); }

/* The dot kernels for a quantized weight type (the dispatch table's). */
static const nb_qdot *qdot_for(const nb_kctx *k, nb_dtype t) { return nb_dispatch_qdot(k->d, t); }

/* Dequantization of a weight or activation type (registry or repacked). */
static nb_to_float_fn to_float_for(const nb_kctx *k, nb_dtype t) { return nb_dispatch_to_float(k->d, t); }

static bool row_bytes_for(nb_dtype t, int64_t K, uint64_t *rb) {
    return nb_qtype_get(t) ? nb_qtype_row_bytes(t, K, rb) : nb_dtype_row_bytes(t, (uint64_t)K, rb);
}

bool nb_matmul_supports(nb_dtype t) {
    return t == NB_F32 || t == NB_F16 || t == NB_BF16 || nb_repack_qdot(t, NB_ISA_SCALAR) || nb_qdot_get(t, NB_ISA_SCALAR);
}

typedef struct {
    const nb_float_kernels *fk;
    const nb_tensor *W;
    const float *X;
    float *Y;
    int64_t n, K, R;
    uint64_t row_bytes;
    nb_to_f32_fn to_f32; /* F16 / BF16 (2 bytes an element); NULL for f32 weights */
    nb_to_float_fn dequant; /* quantized weights on the GEMM path (see matmul_quant) */
    float *work;         /* per thread work_floats: packed panel, C block, dequantized rows */
    size_t work_floats;
    int64_t mc, ldc;     /* rows per block, C block row stride (tokens per chunk) */
    float *xp;           /* X in blocks of NB_GEMM_NT tokens: [nblk][K][NB_GEMM_NT], zero-padded */
    int64_t nblk;
} float_job;

/* xp[(b*K + k)*NT + t] = X[(b*NT + t)*K + k] (NT = NB_GEMM_NT); tokens n..
 * of the last block are zero. Split over k in runs of 64; within a run, 8
 * tokens at a time: X's rows are often a power-of-two size apart, so more
 * rows than the L1's associativity read at once would evict each other. */
static void transpose_worker(void *arg, int ith, int nth) {
    static const float zero[64];
    float_job *j = arg;
    int64_t k0, k1;
    nb_split((j->K + 63) / 64, ith, nth, &k0, &k1);
    k0 *= 64;
    k1 = NB_MIN(k1 * 64, j->K);
    const int64_t K = j->K, n = j->n, nblk = j->nblk;
    for (int64_t kb = k0; kb < k1; kb += 64) {
        int64_t kn = NB_MIN(kb + 64, k1) - kb;
        for (int64_t b = 0; b < nblk; b++)
            for (int t0 = 0; t0 < NB_GEMM_NT; t0 += 8) {
                const float *s[8];
                for (int t = 0; t < 8; t++) {
                    int64_t tok = b * NB_GEMM_NT + t0 + t;
                    s[t] = tok < n ? j->X + tok * K + kb : zero;
                }
                float *restrict d = j->xp + (b * K + kb) * NB_GEMM_NT + t0;
                for (int64_t k = 0; k < kn; k++, d += NB_GEMM_NT)
#pragma GCC unroll 8
                    for (int t = 0; t < 8; t++) d[t] = s[t][k];
            }
    }
}

/* Weight rows [r0, r0 + NB_GEMM_MR), elements [kb, kb + kc), as f32 into the
 * panel wp (row i at wp + i*NB_GEMM_KC); rows at or past r1 are zero. deq
 * holds rows from deq_r0 on already dequantized (quantized weights). */
static void pack_panel(const float_job *j, const float *deq, int64_t deq_r0, int64_t r0, int64_t r1, int64_t kb,
                       int64_t kc, float *wp) {
    const uint8_t *w = j->W->data;
    for (int64_t i = 0; i < NB_GEMM_MR; i++) {
        int64_t r = r0 + i;
        float *d = wp + i * NB_GEMM_KC;
        if (r >= r1) memset(d, 0, (size_t)kc * sizeof(float));
        else if (deq) memcpy(d, deq + (r - deq_r0) * j->K + kb, (size_t)kc * sizeof(float));
        else if (j->to_f32) j->to_f32(kc, w + (uint64_t)r * j->row_bytes + (uint64_t)kb * 2, d);
        else memcpy(d, (const float *)(w + (uint64_t)r * j->row_bytes) + kb, (size_t)kc * sizeof(float));
    }
}

/* Software prefetch (into L2) of the weights pack_panel reads next - the
 * following K step of the row block, or the next block's first - spread
 * evenly over the kernel calls of the current step: each row's piece is a
 * few cache lines in its own page, too short for the hardware prefetcher,
 * the weights come from DRAM, and asking for them all at once would stall
 * on the line fill buffers. A stream is `rows` pieces of `bytes` bytes,
 * `stride` apart; each step asks for the next `per` lines. */
typedef struct {
    const uint8_t *base;
    uint64_t stride, bytes, off, per;
    int64_t rows, i;
} pf_stream;

static void pf_set(pf_stream *s, const uint8_t *base, uint64_t stride, uint64_t bytes, int64_t rows, uint64_t calls) {
    *s = (pf_stream){.base = base, .stride = stride, .bytes = bytes, .rows = rows};
    s->per = ((bytes + 63) / 64 * (uint64_t)rows + calls - 1) / calls;
}

static void pf_step(pf_stream *s) {
    for (uint64_t n = 0; n < s->per && s->i < s->rows; n++) {
        __builtin_prefetch(s->base + (uint64_t)s->i * s->stride + s->off, 0, 2);
        s->off += 64;
        if (s->off >= s->bytes) {
            s->off = 0;
            s->i++;
        }
    }
}

/* y[t*ldy + i] = c[i*ldc + t] for i < nr, t < nt: a block's finished sums
 * (token-contiguous) into Y (row-contiguous), 8 tokens at a time so the 8
 * rows of Y being filled stay in L1 (they are often a power of two apart,
 * all in one L1 set) and are written as whole lines. */
static void write_block(const float *restrict c, int64_t ldc, int64_t nr, int64_t nt, float *restrict y,
                        int64_t ldy) {
    for (int64_t t0 = 0; t0 < nt; t0 += 8) {
        int64_t tn = NB_MIN(8, nt - t0);
        for (int64_t i = 0; i < nr; i++)
            for (int64_t t = 0; t < tn; t++) y[(t0 + t) * ldy + i] = c[i * ldc + t0 + t];
    }
}

/* n > 1 (one token goes through matmul_quant's row job): GotoBLAS-style blocking. The
 * thread's rows (whole panels of NB_GEMM_MR) go in blocks of mc rows; for
 * each chunk of tokens (ldc of them) and each step of NB_GEMM_KC along K,
 * every panel of the block is converted to f32 once (packing is the
 * conversion) and, while it sits in L1, meets every token block of the
 * chunk, whose K-step slab (KC x ldc floats) stays in L2 across the block's
 * panels. Sums accumulate over the K steps in the C block (mc x ldc floats,
 * token-contiguous so the kernel loads and stores it as vectors), which is
 * written out transposed into Y once complete. */
static void float_worker(void *arg, int ith, int nth) {
    float_job *j = arg;
    const uint8_t *w = j->W->data;
    int64_t p0, p1, K = j->K;
    nb_split((j->R + NB_GEMM_MR - 1) / NB_GEMM_MR, ith, nth, &p0, &p1);
    int64_t rend = NB_MIN(p1 * NB_GEMM_MR, j->R), chunk = j->ldc / NB_GEMM_NT;
    float *wp = j->work + (size_t)ith * j->work_floats;
    float *cb = wp + NB_GEMM_MR * NB_GEMM_KC;
    float *deq = j->dequant ? cb + j->mc * j->ldc : NULL;
    for (int64_t rb = p0 * NB_GEMM_MR; rb < rend; rb += j->mc) {
        int64_t re = NB_MIN(rb + j->mc, rend);
        if (deq)
            for (int64_t r = rb; r < re; r++) j->dequant(w + (uint64_t)r * j->row_bytes, deq + (r - rb) * K, K);
        for (int64_t b0 = 0; b0 < j->nblk; b0 += chunk) {
            int64_t b1 = NB_MIN(b0 + chunk, j->nblk), ne = NB_MIN(re + j->mc, rend);
            uint64_t panels = (uint64_t)((re - rb + NB_GEMM_MR - 1) / NB_GEMM_MR), calls = panels * (uint64_t)(b1 - b0);
            pf_stream pf = {0};
            if (deq && b0 == 0) /* the next block's rows are dequantized whole */
                pf_set(&pf, w + (uint64_t)re * j->row_bytes, 0, (uint64_t)(ne - re) * j->row_bytes, 1,
                       calls * (uint64_t)((K + NB_GEMM_KC - 1) / NB_GEMM_KC));
            for (int64_t kb = 0; kb < K; kb += NB_GEMM_KC) {
                int64_t kc = NB_MIN(NB_GEMM_KC, K - kb);
                if (!deq) { /* the next K step of this block, else the first of the next block */
                    uint64_t esz = j->to_f32 ? 2 : 4, rbytes = j->row_bytes;
                    int64_t kn = kb + NB_GEMM_KC;
                    if (kn < K)
                        pf_set(&pf, w + (uint64_t)rb * rbytes + (uint64_t)kn * esz, rbytes,
                               (uint64_t)NB_MIN(NB_GEMM_KC, K - kn) * esz, re - rb, calls);
                    else
                        pf_set(&pf, w + (uint64_t)re * rbytes, rbytes, (uint64_t)NB_MIN(NB_GEMM_KC, K) * esz, ne - re,
                               calls);
                }
                for (int64_t r = rb; r < re; r += NB_GEMM_MR) {
                    pack_panel(j, deq, rb, r, re, kb, kc, wp);
                    for (int64_t b = b0; b < b1; b++) {
                        pf_step(&pf);
                        const float *xb = j->xp + (b * K + kb) * NB_GEMM_NT;
                        float *c = cb + (r - rb) * j->ldc + (b - b0) * NB_GEMM_NT;
                        j->fk->gemm_f32(kc, wp, xb, NB_MIN(NB_GEMM_NT, j->n - b * NB_GEMM_NT), c, j->ldc, kb > 0);
                    }
                }
            }
            write_block(cb, j->ldc, re - rb, NB_MIN(b1 * NB_GEMM_NT, j->n) - b0 * NB_GEMM_NT,
                        j->Y + b0 * NB_GEMM_NT * j->R + rb, j->R);
        }
    }
}

/* The n > 1 float path: scratch for the per-thread work areas and X in
 * token blocks. */
static nb_status run_float_gemm(nb_kctx *k, float_job *j) {
    j->nblk = (j->n + NB_GEMM_NT - 1) / NB_GEMM_NT;
    j->mc = j->dequant ? GEMM_MC_DEQ : GEMM_MC;
    j->ldc = NB_MIN(j->nblk, GEMM_NC / NB_GEMM_NT) * NB_GEMM_NT;
    uint64_t xp, deq = 0, work, all, bytes;
    if (!nb_mul_ok((uint64_t)j->nblk * NB_GEMM_NT, (uint64_t)j->K, &xp) ||
        (j->dequant && !nb_mul_ok((uint64_t)j->mc, (uint64_t)j->K, &deq)) ||
        !nb_add_ok((uint64_t)(NB_GEMM_MR * NB_GEMM_KC + j->mc * j->ldc + 15), deq, &work) ||
        !nb_mul_ok(work & ~(uint64_t)15, (uint64_t)nb_pool_size(k->pool), &all) || !nb_add_ok(all, xp, &all) ||
        !nb_mul_ok(all, sizeof(float), &bytes) || bytes > SIZE_MAX)
        return nb_fail(NB_ERR_NOMEM, "tensor '%s': GEMM scratch for %lld tokens x %lld columns overflows",
                       j->W->name, (long long)j->n, (long long)j->K);
    j->work_floats = (size_t)(work & ~(uint64_t)15); /* 64-byte aligned per thread */
    NB_TRY(nb_kctx_scratch(k, (size_t)bytes));
    j->work = (float *)k->scratch;
    j->xp = j->work + j->work_floats * (size_t)nb_pool_size(k->pool);
    nb_pool_run(k->pool, transpose_worker, j);
    nb_pool_run(k->pool, float_worker, j);
    return NB_OK;
}

/* From k->d->qgemm_min tokens on (default 16), quantized weights without an
 * int8 GEMM are dequantized tile by tile into f32 and multiplied with the
 * float GEMM instead of per-(row, token) integer dot products
 * (docs/performance.md has the measurements behind the threshold). The
 * activations still go through the kernel's activation format (Q8_0 /
 * Q8_K) and back, so both paths compute the same products (llama.cpp's
 * arithmetic) and differ only in float summation order.
 *
 * Repacked Q4_0R / Q8_0R / Q4_KR / Q6_KR batches take the int8 GEMM of
 * kernels/repack.h from nb_dispatch_rgemm_from tokens on (default 8; measured on
 * TinyLlama Q4_0: equal to per-row dots at 8 tokens, 73 vs 53 tok/s at 12,
 * 105 vs 62 at 128), unless the dispatch table has it off. */

/* Quantized weights (and float weights for one token), one job for up to
 * MM_MAX weights that read the same activations (Q, K and V; gate and up):
 * the activations are quantized (or packed for the int8 GEMM) once, then
 * the rows of all the weights, taken as one range, are split over the
 * threads in chunks (nb_pool_run_chunks). */
#define MM_MAX 4
typedef struct {
    const uint8_t *w;
    uint64_t row_bytes;
    int64_t R, row0; /* rows; first row in the concatenated range */
    float *Y;
    nb_vec_dot_fn dot;
    nb_vec_dot_mxn_fn dot_mxn; /* PATH_DOTS with several tokens, where the kernel has one */
    nb_vec_dot_mxn_fn dot_streams; /* PATH_DOTS, one token: the multi-row dot for `streams` runs of rows */
    int streams;
    nb_vec_dot_rows_fn dot_rows; /* PATH_ROWS */
    nb_repack_gemm_fn gemm;
    nb_dot_fn fdot; /* PATH_FLOAT_DOTS */
    nb_dot_m_fn fdot_streams; /* PATH_FLOAT_DOTS: fdot for `streams` runs of rows */
    nb_dot2_fn fdot2; /* PATH_FLOAT_DOTS, several tokens: fdot for two at a time (NULL: none) */
} mm_seg;

/* PATH_FLOAT_DOTS: a few tokens with f32 / f16 / bf16 weights (float_dots_max), a dot per row and token.
 * PATH_ROWS: PATH_DOTS's activations, the kernels' rows-in-lanes form. */
typedef enum { PATH_NONE, PATH_DOTS, PATH_INT8_GEMM, PATH_FLOAT_DOTS, PATH_ROWS } quant_path;

static bool is_float(nb_dtype t) { return t == NB_F32 || t == NB_F16 || t == NB_BF16; }

/* The most tokens float weights take as per-token dots (PATH_FLOAT_DOTS)
 * rather than the float GEMM, whose tiles are 16 tokens wide: below that it
 * multiplies padding, and at 2 tokens a TinyLlama-shaped F16 model decoded
 * at half its one-token rate (5.5 against 12.2 tok/s for both sequences,
 * Zen 3, session 42). One token, or small-batch dots off: 1. */
static int64_t float_dots_max(const nb_kctx *k) { return k->d->opts.small_batch ? FLOAT_DOTS_MAX : 1; }

/* The one-token float dots: the dispatch table's decode choice (width and prefetch per CPU). */
static nb_dot_fn float_dot(const nb_kctx *k, nb_dtype t) {
    return t == NB_F32 ? k->d->dot_f32 : t == NB_F16 ? k->d->dot_f16 : k->d->dot_bf16;
}
static nb_dot_m_fn float_dot_m(const nb_kctx *k, nb_dtype t) {
    return t == NB_F32 ? k->d->dot_f32_m : t == NB_F16 ? k->d->dot_f16_m : k->d->dot_bf16_m;
}
static nb_dot2_fn float_dot_2(const nb_kctx *k, nb_dtype t) {
    return t == NB_F32 ? k->d->dot_f32_2 : t == NB_F16 ? k->d->dot_f16_2 : k->d->dot_bf16_2;
}

typedef struct {
    nb_pool *pool;
    int nseg;
    mm_seg seg[MM_MAX];
    int64_t n, K, rows;
    const float *X;
    /* PATH_DOTS: activations quantized per token */
    const nb_qdot *qd;
    const uint8_t *act;
    uint64_t a_row_bytes;
    /* PATH_INT8_GEMM: activations packed, taken in slabs of slab_groups token
     * groups (the row range repeats once per slab: item s*rows + r) */
    nb_actpack ap;
    nb_actpack_group_fn pack;
    int64_t slab_groups, slabs;
    uint8_t *scratch; /* per thread, nb_actpack_scratch_bytes(K) each */
    int prefetch, prefetch_l2; /* the context's (nb_kctx.prefetch, prefetch_l2) */
} quant_job;

/* Whether a batch of n tokens of weight type t goes through its
 * rows-in-lanes kernel: where it has one, n is in the table's range
 * (rows_min .. nb_dispatch_rows_to), and the int8 GEMM is not the faster one at n
 * (the AMX GEMMs from 13 tokens). */
static bool rows_for(const nb_kctx *k, nb_dtype t, int64_t n) {
    const nb_qdot *qd = is_float(t) ? NULL : qdot_for(k, t);
    const nb_rgemm *rg = nb_dispatch_rgemm(k->d, t);
    return qd && qd->vec_dot_rows && n >= k->d->rows_min && n <= nb_dispatch_rows_to(k->d, t) &&
           !(rg && rg->beats_rows_from && n >= rg->beats_rows_from);
}

/* The way a set of weights sharing their activations is computed: all must
 * take the same activation format; PATH_NONE when they cannot share a job. */
static quant_path path_for(const nb_kctx *k, int count, const nb_tensor *const *W, int64_t n) {
    bool all_float = true;
    for (int i = 0; i < count; i++) all_float = all_float && is_float(W[i]->type);
    if (all_float) return n <= float_dots_max(k) ? PATH_FLOAT_DOTS : PATH_NONE;
    const nb_qdot *q0 = NULL;
    const nb_rgemm *g0 = NULL;
    bool gemm = true, rows = true;
    for (int i = 0; i < count; i++) {
        const nb_qdot *qd = qdot_for(k, W[i]->type);
        if (!qd || (q0 && (qd->act_type != q0->act_type || qd->quantize_act != q0->quantize_act))) return PATH_NONE;
        q0 = q0 ? q0 : qd;
        rows = rows && rows_for(k, W[i]->type, n);
        gemm = gemm && n >= nb_dispatch_rgemm_from(k->d, W[i]->type);
        const nb_rgemm *rg = nb_dispatch_rgemm(k->d, W[i]->type);
        if (!rg || (g0 && rg->act != g0->act)) gemm = false;
        g0 = g0 ? g0 : rg;
    }
    if (rows) return PATH_ROWS;
    if (gemm) return PATH_INT8_GEMM;
    return n < k->d->qgemm_min ? PATH_DOTS : PATH_NONE;
}

/* The activation passes are chunked jobs too (a token or a 16-token group
 * per chunk), so a worker benched by the pool (threadpool.h) is not woken
 * for them. */
static void quant_act_rows(const quant_job *j, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++)
        j->qd->quantize_act(j->X + t * j->K, (uint8_t *)j->act + t * j->a_row_bytes, j->K);
}

static void quant_act_worker(void *arg, int ith, int nth) {
    (void)nth;
    quant_job *j = arg;
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi)) quant_act_rows(j, lo, hi);
}

static void pack_worker(void *arg, int ith, int nth) {
    (void)nth;
    quant_job *j = arg;
    uint8_t *row = j->scratch + (size_t)ith * nb_actpack_scratch_bytes(j->K);
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi))
        for (int64_t g = lo; g < hi; g++) j->pack(&j->ap, j->X, g, row);
}

/* One token, several runs of rows per thread (nb_kctx.streams = S): item k
 * < S*Q of a weight of R rows (Q = R / S) is row (k % S)*Q + k / S, so the
 * contiguous items a thread takes read S far-apart runs of rows, which the
 * multi-row dot walks in lockstep (on the AMD Zen 5-class guest several
 * streams per thread read faster than one; dispatch.c). The R - S*Q rows
 * past them are items of their own. Each row's result is the one-row
 * dot's. */
static void seg_streams(const quant_job *j, const mm_seg *g, int64_t k, int64_t k1) {
    const int S = g->streams;
    const int64_t Q = g->R / S, full = Q * S;
    const uint64_t rb = g->row_bytes;
    while (k < k1 && k < full) {
        if (k % S == 0 && k + S <= k1) {
            int64_t i = k / S;
            const uint8_t *w = g->w + (uint64_t)i * rb;
            size_t stride = (size_t)((uint64_t)Q * rb);
            if (g->fdot) g->fdot_streams(j->K, S, w, stride, j->X, g->Y + i, (size_t)Q);
            else g->dot_streams(j->K, S, 1, w, stride, j->act, 0, g->Y + i, (size_t)Q);
            k += S;
            continue;
        }
        int64_t r = (k % S) * Q + k / S;
        if (g->fdot) g->fdot(j->K, 1, g->w + (uint64_t)r * rb, rb, j->X, &g->Y[r]);
        else g->dot(j->K, g->w + (uint64_t)r * rb, j->act, &g->Y[r]);
        k++;
    }
    if (k < k1 && g->fdot) g->fdot(j->K, k1 - k, g->w + (uint64_t)k * rb, rb, j->X, &g->Y[k]);
    else for (; k < k1; k++) g->dot(j->K, g->w + (uint64_t)k * rb, j->act, &g->Y[k]);
}

/* Rows [lo, hi) of the concatenated range, weight by weight, against the
 * tokens of `ap` (PATH_INT8_GEMM: one slab, whose first token is t0). */
static void seg_rows(const quant_job *j, const nb_actpack *ap, int64_t t0, int64_t lo, int64_t hi) {
    for (int s = 0; s < j->nseg; s++) {
        const mm_seg *g = &j->seg[s];
        int64_t r0 = NB_MAX(lo, g->row0) - g->row0, r1 = NB_MIN(hi, g->row0 + g->R) - g->row0;
        if (r0 >= r1) continue;
        if (g->gemm) {
            g->gemm(g->w + (uint64_t)r0 * g->row_bytes, g->row_bytes, r1 - r0, ap, g->Y + t0 * g->R + r0, g->R);
            continue;
        }
        if (g->streams > 1) {
            seg_streams(j, g, r0, r1);
            continue;
        }
        if (g->fdot) { /* a block of rows, read from memory once, then from the cache for more tokens */
            const int64_t rb = NB_MAX(1, FLOAT_DOTS_BLOCK / (int64_t)g->row_bytes);
            for (int64_t r = r0; r < r1; r += rb) {
                const int64_t nr = NB_MIN(rb, r1 - r);
                int64_t t = 0;
                for (; g->fdot2 && t + 2 <= j->n; t += 2) /* two tokens per pass over each row */
                    for (int64_t i = r; i < r + nr; i++)
                        g->fdot2(j->K, g->w + (uint64_t)i * g->row_bytes, j->X + t * j->K, (size_t)j->K,
                                 g->Y + t * g->R + i, (size_t)g->R);
                for (; t < j->n; t++)
                    g->fdot(j->K, nr, g->w + (uint64_t)r * g->row_bytes, g->row_bytes, j->X + t * j->K,
                            g->Y + t * g->R + r);
            }
            continue;
        }
        if (g->dot_rows) {
            g->dot_rows(j->K, r1 - r0, g->w + (uint64_t)r0 * g->row_bytes, g->row_bytes, j->n, j->act, j->a_row_bytes,
                        g->Y + r0, g->R);
            continue;
        }
        if (g->dot_mxn && j->n > 1) { /* small batch: each weight unpacked once for up to 4 tokens */
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *w = g->w + (uint64_t)r * g->row_bytes;
                for (int64_t t = 0; t < j->n; t += 4) {
                    int nt = (int)NB_MIN(4, j->n - t);
                    float o[4];
                    g->dot_mxn(j->K, 1, nt, w, g->row_bytes, j->act + t * j->a_row_bytes, j->a_row_bytes, o, 4);
                    for (int u = 0; u < nt; u++) g->Y[(t + u) * g->R + r] = o[u];
                }
            }
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *w = g->w + (uint64_t)r * g->row_bytes;
            for (int64_t t = 0; t < j->n; t++) g->dot(j->K, w, j->act + t * j->a_row_bytes, &g->Y[t * g->R + r]);
        }
    }
}

/* Items [lo, hi) of the job: rows of the concatenated range, repeated once
 * per activation slab (one slab unless PATH_INT8_GEMM has many tokens). */
static void quant_rows(quant_job *j, int64_t lo, int64_t hi) {
    while (lo < hi) {
        int64_t s = lo / j->rows, end = NB_MIN(hi, (s + 1) * j->rows);
        if (j->slabs > 1) {
            int64_t g0 = s * j->slab_groups;
            nb_actpack v = nb_actpack_slice(&j->ap, g0, NB_MIN(j->slab_groups, j->ap.ng - g0));
            seg_rows(j, &v, g0 * NB_ACTPACK_TOKENS, lo - s * j->rows, end - s * j->rows);
        } else {
            seg_rows(j, &j->ap, 0, lo, end);
        }
        lo = end;
    }
}

static void quant_worker(void *arg, int ith, int nth) {
    (void)nth;
    quant_job *j = arg;
    nb_prefetch_bytes = j->prefetch; /* for the kernels (kernels.h) */
    nb_prefetch_l2_bytes = j->prefetch_l2;
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi)) quant_rows(j, lo, hi);
}

/* Rows per chunk of work: about 32 KiB of weights (see nb_pool_run_chunks). */
static int64_t chunk_rows(uint64_t row_bytes) { return NB_MAX(4, (int64_t)((32u << 10) / NB_MAX(row_bytes, 1))); }

static nb_status row_length_error(const nb_tensor *W, nb_dtype t) {
    return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': row length %lld does not fit type %s", W->name,
                   (long long)W->ne[0], nb_dtype_name(t));
}

static nb_status matmul_quant(nb_kctx *k, quant_path path, int count, const nb_tensor *const *W, const float *X,
                              int64_t n, float *const *Y) {
    const int64_t K = W[0]->ne[0];
    quant_job j = {.pool = k->pool, .nseg = count, .n = n, .K = K, .X = X, .prefetch = k->prefetch,
                  .prefetch_l2 = k->prefetch_l2};
    uint64_t max_rb = 0;
    int tile_rows = 4;
    for (int i = 0; i < count; i++) {
        mm_seg *g = &j.seg[i];
        if (W[i]->ne[0] != K)
            return nb_fail(NB_ERR_INVALID, "tensor '%s': %lld columns, the others sharing its input have %lld",
                           W[i]->name, (long long)W[i]->ne[0], (long long)K);
        if (!row_bytes_for(W[i]->type, K, &g->row_bytes)) return row_length_error(W[i], W[i]->type);
        g->w = W[i]->data;
        g->R = nb_tensor_rows(W[i]);
        g->row0 = j.rows;
        g->Y = Y[i];
        j.rows += g->R;
        max_rb = NB_MAX(max_rb, g->row_bytes);
        if (path == PATH_INT8_GEMM) {
            nb_repack_gemm_fn sg = nb_dispatch_sgemm(k->d, W[i]->type, n); /* 8-token units (kernels/sbatch.h) */
            const nb_rgemm *rg = nb_dispatch_rgemm(k->d, W[i]->type);
            g->gemm = sg ? sg : rg->run;
            if (!sg) tile_rows = NB_MAX(tile_rows, rg->tile_rows);
        }
        else if (path == PATH_FLOAT_DOTS) {
            g->fdot = float_dot(k, W[i]->type);
            g->fdot_streams = float_dot_m(k, W[i]->type);
            g->fdot2 = float_dot_2(k, W[i]->type);
            if (n == 1 && k->streams > 1 && g->fdot_streams && g->R >= 16 * k->streams) g->streams = k->streams;
        }
        else if (path == PATH_ROWS) g->dot_rows = qdot_for(k, W[i]->type)->vec_dot_rows;
        else {
            g->dot = qdot_for(k, W[i]->type)->vec_dot;
            g->dot_mxn = k->d->opts.small_batch ? qdot_for(k, W[i]->type)->vec_dot_mxn : NULL;
            g->dot_streams = qdot_for(k, W[i]->type)->vec_dot_mxn;
            /* at least a few rows per run; each run's rows stay in order */
            if (n == 1 && k->streams > 1 && g->dot_streams && g->R >= 16 * k->streams) g->streams = k->streams;
        }
    }
    int64_t chunk = chunk_rows(max_rb);
    if (path == PATH_INT8_GEMM) {
        size_t pack = nb_actpack_bytes(K, n), scratch = (size_t)nb_pool_size(k->pool) * nb_actpack_scratch_bytes(K);
        NB_TRY(nb_kctx_act(k, pack + scratch));
        nb_actpack_init(&j.ap, k->act, n, K, nb_dispatch_rgemm(k->d, W[0]->type)->act);
        j.pack = k->d->actpack_group;
        j.scratch = k->act + pack;
        nb_pool_run_chunks(k->pool, pack_worker, &j, j.ap.ng, 1);
        /* whole 4-row tiles (the AVX-512 GEMMs' and the AVX2 Q4_KR one; a
         * short tile computes four rows and stores its own): the old even
         * chunks of 14 Q4_0R / 6 Q8_0R rows ran a last tile for 2 rows, and
         * 12 / 4 took pp512 from 364-369 to 390-392 tok/s (Q4_0), 335-341 to
         * 418-420 (Q8_0), 358-369 to 389-390 (Q4_K_M); AVX2 unchanged
         * within the noise (docs/speed.md, session 10) */
        chunk = NB_MAX(tile_rows, chunk / 2 / tile_rows * tile_rows); /* the AMX GEMMs: 16-row tiles */
        /* slabs whose packed activations stay in a core's L2 while all the rows
         * pass (nb_gemm_slab_for_cpu); whole 4-group tiles of the AVX-512
         * kernels where a slab holds four groups or more */
        int64_t sg = (int64_t)(k->d->gemm_slab_bytes / (nb_actpack_bytes(K, NB_ACTPACK_TOKENS) + 1));
        j.slab_groups = sg >= 4 ? sg & ~(int64_t)3 : 2;
        j.slabs = (j.ap.ng + j.slab_groups - 1) / j.slab_groups;
    } else if (path == PATH_DOTS || path == PATH_ROWS) {
        if (path == PATH_ROWS) chunk = (chunk + 15) / 16 * 16; /* whole 16-row panels */
        j.qd = qdot_for(k, W[0]->type);
        if (j.qd->act_type == NB_F32) {
            j.a_row_bytes = (uint64_t)K * sizeof(float);
            j.act = (const uint8_t *)X;
        } else {
            if (!nb_dtype_row_bytes(j.qd->act_type, (uint64_t)K, &j.a_row_bytes))
                return row_length_error(W[0], j.qd->act_type);
            NB_TRY(nb_kctx_act(k, (size_t)(j.a_row_bytes * (uint64_t)n)));
            j.act = k->act;
            if (n == 1) quant_act_rows(&j, 0, 1);
            else nb_pool_run_chunks(k->pool, quant_act_worker, &j, n, 1);
        }
    }
    if ((path == PATH_DOTS || path == PATH_FLOAT_DOTS) && n == 1 && k->streams > 1)
        chunk = (chunk + k->streams - 1) / k->streams * k->streams; /* whole groups of rows for the multi-row dots */
    nb_pool_run_chunks(k->pool, quant_worker, &j, j.rows * NB_MAX(j.slabs, 1), chunk);
    return NB_OK;
}

/* Quantized weights without an int8 GEMM, batches of quant_gemm_min() or
 * more tokens: dequantized per tile into the float GEMM. */
static nb_status matmul_dequant(nb_kctx *k, const nb_tensor *W, const float *X, int64_t n, float *Y) {
    int64_t K = W->ne[0];
    const nb_qdot *qd = qdot_for(k, W->type);
    float_job fj = {.fk = k->fk, .W = W, .X = X, .Y = Y, .n = n, .K = K, .R = nb_tensor_rows(W),
                    .dequant = to_float_for(k, W->type)};
    if (!row_bytes_for(W->type, K, &fj.row_bytes)) return row_length_error(W, W->type);
    nb_to_float_fn adeq = qd->act_type == NB_F32 ? NULL : to_float_for(k, qd->act_type);
    uint64_t arb;
    if (adeq && nb_dtype_row_bytes(qd->act_type, (uint64_t)K, &arb)) {
        NB_TRY(nb_kctx_act(k, (size_t)n * ((size_t)arb + (size_t)K * sizeof(float))));
        float *xr = (float *)k->act;
        uint8_t *q = k->act + (size_t)n * (size_t)K * sizeof(float);
        for (int64_t t = 0; t < n; t++) {
            qd->quantize_act(X + t * K, q, K);
            adeq(q, xr + t * K, K);
        }
        fj.X = xr;
    }
    return run_float_gemm(k, &fj);
}

/* A batch the rows-in-lanes kernels take, with some of the weights
 * having one (Q4_K_M mixes Q4_K and Q6_K in Q/K/V): those go as one job and
 * the others as another, so each keeps its fastest path. */
static bool split_for_rows(const nb_kctx *k, int count, const nb_tensor *const *W, int64_t n, bool has[MM_MAX]) {
    if (count < 2) return false;
    int c = 0;
    for (int i = 0; i < count; i++) {
        has[i] = rows_for(k, W[i]->type, n);
        c += has[i];
    }
    return c > 0 && c < count;
}

nb_status nb_matmul_many(nb_kctx *k, int count, const nb_tensor *const *W, const float *X, int64_t n,
                         float *const *Y) {
    if (n <= 0 || count <= 0) return NB_OK;
    bool permuted = false;
    for (int i = 0; i < count; i++) permuted |= W[i]->in_perm != NULL;
    bool has[MM_MAX];
    if (count <= MM_MAX && !permuted && split_for_rows(k, count, W, n, has)) {
        const nb_tensor *part[2][MM_MAX];
        float *out[2][MM_MAX];
        int np[2] = {0, 0};
        for (int i = 0; i < count; i++) {
            part[has[i]][np[has[i]]] = W[i];
            out[has[i]][np[has[i]]++] = Y[i];
        }
        NB_TRY(nb_matmul_many(k, np[1], part[1], X, n, out[1]));
        return nb_matmul_many(k, np[0], part[0], X, n, out[0]);
    }
    if (count <= MM_MAX && !permuted) {
        quant_path path = path_for(k, count, W, n);
        if (path != PATH_NONE) return matmul_quant(k, path, count, W, X, n, Y);
    }
    for (int i = 0; i < count; i++) NB_TRY(nb_matmul(k, W[i], X, n, Y[i]));
    return NB_OK;
}

nb_status nb_matmul(nb_kctx *k, const nb_tensor *W, const float *X, int64_t n, float *Y) {
    int64_t K = W->ne[0], R = nb_tensor_rows(W);
    if (n <= 0) return NB_OK;
    if (W->in_perm) {
        /* inputs stored in another order (GPTQ act-order, formats/hf_quant.h):
         * gather the activations the same way */
        float *xp = malloc((size_t)(n * K) * sizeof *xp);
        if (!xp) return NB_ERR_NOMEM;
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < K; j++) xp[t * K + j] = X[t * K + W->in_perm[j]];
        nb_tensor w = *W;
        w.in_perm = NULL;
        nb_status st = nb_matmul(k, &w, xp, n, Y);
        free(xp);
        return st;
    }
    if (is_float(W->type) && n <= float_dots_max(k)) return matmul_quant(k, PATH_FLOAT_DOTS, 1, &W, X, n, &Y);
    if (!is_float(W->type) && qdot_for(k, W->type)) {
        quant_path path = path_for(k, 1, &W, n);
        if (path == PATH_NONE && to_float_for(k, W->type)) return matmul_dequant(k, W, X, n, Y);
        return matmul_quant(k, path == PATH_NONE ? PATH_DOTS : path, 1, &W, X, n, &Y);
    }
    float_job j = {.fk = k->fk, .W = W, .X = X, .Y = Y, .n = n, .K = K, .R = R};
    switch (W->type) {
    case NB_F32: j.row_bytes = (uint64_t)K * 4; break;
    case NB_F16: j.to_f32 = k->fk->f16_to_f32; j.row_bytes = (uint64_t)K * 2; break;
    case NB_BF16: j.to_f32 = k->fk->bf16_to_f32; j.row_bytes = (uint64_t)K * 2; break;
    default:
        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': no matmul kernel for type %s", W->name,
                       nb_dtype_name(W->type));
    }
    return run_float_gemm(k, &j);
}

nb_status nb_get_row(const nb_tensor *W, int64_t row, float *dst) {
    int64_t K = W->ne[0];
    if (row < 0 || row >= nb_tensor_rows(W))
        return nb_fail(NB_ERR_RANGE, "tensor '%s': row %lld outside 0..%lld", W->name, (long long)row,
                       (long long)nb_tensor_rows(W) - 1);
    const nb_float_kernels *fk = nb_float_kernels_ref();
    switch (W->type) {
    case NB_F32: memcpy(dst, (const float *)W->data + row * K, (size_t)K * 4); return NB_OK;
    case NB_F16: fk->f16_to_f32(K, (const uint16_t *)W->data + row * K, dst); return NB_OK;
    case NB_BF16: fk->bf16_to_f32(K, (const uint16_t *)W->data + row * K, dst); return NB_OK;
    default: {
        nb_to_float_fn deq = nb_dispatch_to_float(nb_dispatch_default(), W->type);
        uint64_t rb;
        if (deq && row_bytes_for(W->type, K, &rb)) {
            deq((const uint8_t *)W->data + (uint64_t)row * rb, dst, K);
            return NB_OK;
        }
    }
        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': cannot read rows of type %s", W->name,
                       nb_dtype_name(W->type));
    }
}
