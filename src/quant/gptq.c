/* GPTQ for one linear layer (see gptq.h). Written from the paper's
 * algorithm (Frantar et al., 2022, Algorithm 1) and its published
 * conventions (damp_percent, act order, static groups). */
#include "quant/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "quant/qla.h"
#include "quant/quant_ref.h"
#include "quant/qtypes.h"

typedef struct fmt {
    nb_dtype t;
    const nb_qtype *q;
    int qblock;  /* weights per stored block */
    int fit;     /* weights whose parameters are fitted together (= qblock) */
} fmt;

static bool fmt_of(nb_dtype t, fmt *f) {
    switch ((int)t) {
    case NB_W4G32: case NB_W4G64: case NB_W4G128: case NB_W4G32S: case NB_W4G64S: case NB_W4G128S:
    case NB_Q4_0: case NB_Q4_1: case NB_Q4_K:
        break;
    default:
        return false;
    }
    f->t = t;
    f->q = nb_qtype_get(t);
    if (!f->q) return false;
    f->qblock = f->fit = (int)f->q->block;
    return true;
}

bool nb_gptq_supports(nb_dtype type, int64_t cols) {
    fmt f;
    return fmt_of(type, &f) && cols > 0 && cols % f.qblock == 0;
}

/* Byte and nibble shift of weight i (0 <= i < qblock) inside its block. */
static inline void nib_pos(nb_dtype t, int i, int *byte, int *shift) {
    switch ((int)t) {
    case NB_Q4_0: *byte = 2 + i % 16; *shift = i >= 16 ? 4 : 0; return;
    case NB_Q4_1: *byte = 4 + i % 16; *shift = i >= 16 ? 4 : 0; return;
    case NB_Q4_K: *byte = 16 + 32 * (i / 64) + i % 32; *shift = (i % 64) >= 32 ? 4 : 0; return;
    default: /* W4G: chunk c = i / 32 of 16 bytes after the 4-byte header */
        *byte = 4 + 16 * (i / 32) + (i % 32) % 16;
        *shift = (i % 32) >= 16 ? 4 : 0;
        return;
    }
}

/* w = A q + B for each run of 32 weights of a fitted block. */
static void block_params(nb_dtype t, const uint8_t *b, int nchunk, float *A, float *B) {
    if (t == NB_Q4_K) {
        const float d = nb_fp16_to_fp32((uint16_t)(b[0] | b[1] << 8)), dm = nb_fp16_to_fp32((uint16_t)(b[2] | b[3] << 8));
        const uint8_t *q = b + 4;
        for (int j = 0; j < 8; j++) {
            int s = j < 4 ? q[j] & 63 : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
            int m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
            A[j] = d * s;
            B[j] = -dm * m;
        }
        return;
    }
    const float d = nb_fp16_to_fp32((uint16_t)(b[0] | b[1] << 8));
    float a = d, c;
    if (t == NB_Q4_0) c = -8 * d;
    else if (t == NB_Q4_1) c = nb_fp16_to_fp32((uint16_t)(b[2] | b[3] << 8));
    else c = -d * b[2]; /* W4G: z */
    for (int j = 0; j < nchunk; j++) {
        A[j] = a;
        B[j] = c;
    }
}

typedef struct gjob {
    float *W;             /* rows x cols, permuted columns when perm */
    int64_t rows, cols;
    const float *U;       /* cols x cols upper */
    const int64_t *perm;  /* permuted k -> original column (NULL: identity) */
    fmt f;
    uint8_t *dst;
    uint64_t rb;          /* bytes per row */
    float *A, *B;         /* rows x cols/32 */
    bool stat;
    int bs;
    double *loss;         /* per thread */
    bool oom;
} gjob;

static void fit_block(gjob *j, int64_t r, int64_t c0, const float *w) {
    uint8_t *blk = j->dst + (uint64_t)r * j->rb + (uint64_t)(c0 / j->f.qblock) * j->f.q->block_bytes;
    j->f.q->from_float(w, blk, j->f.fit);
    int nch = j->f.fit / 32;
    block_params(j->f.t, blk, nch, j->A + r * (j->cols / 32) + c0 / 32, j->B + r * (j->cols / 32) + c0 / 32);
}

/* Rows r0..r1 of this thread through every batch: the batch's columns one
 * by one per row (error feedback inside the batch, a row at a time), then
 * the rest of the row block at once: W[r0:r1, i2:] -= E U[i1:i2, i2:], a
 * GEMM (nb_qla_gemm). */
static void gptq_rows(gjob *j, int64_t r0, int64_t r1, float *E, double *loss) {
    const int64_t cols = j->cols, nc32 = cols / 32;
    const int bs = j->bs;
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
        const int64_t i2 = NB_MIN(i1 + bs, cols);
        for (int64_t r = r0; r < r1; r++) {
            float *w = j->W + r * cols, *er = E + (r - r0) * bs;
            uint8_t *row = j->dst + (uint64_t)r * j->rb;
            for (int64_t k = i1; k < i2; k++) {
                const int64_t c = j->perm ? j->perm[k] : k;
                if (!j->stat && c % j->f.fit == 0) fit_block(j, r, c, w + c);
                const float *urow = j->U + k * cols;
                const float a = j->A[r * nc32 + c / 32], b = j->B[r * nc32 + c / 32];
                int q = 0;
                if (a != 0) {
                    q = nb_nearest_int((w[k] - b) / a);
                    q = q < 0 ? 0 : q > 15 ? 15 : q;
                }
                const float v = a * q + b;
                int byte, shift;
                nib_pos(j->f.t, (int)(c % j->f.qblock), &byte, &shift);
                uint8_t *p = row + (uint64_t)(c / j->f.qblock) * j->f.q->block_bytes + byte;
                *p = (uint8_t)((*p & ~(0xF << shift)) | (q << shift));
                const float e = (w[k] - v) / urow[k];
                er[k - i1] = e;
                *loss += (double)e * e / 2;
                if (k + 1 < i2) nb_qla_axpy_sub(i2 - k - 1, e, urow + k + 1, w + k + 1);
            }
        }
        if (i2 < cols)
            nb_qla_gemm(r1 - r0, cols - i2, i2 - i1, -1.f, E, bs, j->U + i1 * cols + i2, cols, false,
                        j->W + r0 * cols + i2, cols);
    }
}

static void gjob_worker(void *arg, int ith, int nth) {
    gjob *j = arg;
    int64_t lo, hi;
    nb_split(j->rows, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    float *E = malloc((size_t)((hi - lo) * j->bs) * sizeof(float));
    if (!E) {
        j->oom = true;
        return;
    }
    double loss = 0;
    gptq_rows(j, lo, hi, E, &loss);
    j->loss[ith] = loss;
    free(E);
}

/* ---- factorisation ---------------------------------------------------------- */

/* U (upper, U^T U = Hp^-1) for the symmetric Hp given by val(a, b) (b >= a):
 * with J the reversal, J Hp J = L L^T (lower Cholesky), so Hp = V V^T with
 * V = J L J upper and U = V^-1 = J L^-1 J: reverse, factorise, invert the
 * triangle, reverse back (reversing both axes = reversing the flat array). */
typedef struct hsrc {
    const double *H;       /* upper triangle of the sums */
    int64_t n;
    double sc, add;        /* scale, value added to the diagonal */
    const int64_t *perm;
    const double *diag;    /* the diagonal to use (dead columns fixed) */
} hsrc;

static bool factor_upper_inv(const hsrc *s, float *U, nb_pool *pool) {
    const int64_t n = s->n;
    float *Hr = malloc((size_t)(n * n) * sizeof(float));
    if (!Hr) return false;
    for (int64_t i = 0; i < n; i++) {
        const int64_t a = n - 1 - i;
        const int64_t pa = s->perm ? s->perm[a] : a;
        float *row = Hr + i * n;
        for (int64_t jj = 0; jj < i; jj++) { /* lower part: b = n-1-jj > a */
            const int64_t pb = s->perm ? s->perm[n - 1 - jj] : n - 1 - jj;
            const int64_t lo = pa < pb ? pa : pb, hi = pa < pb ? pb : pa;
            row[jj] = (float)(s->H[lo * n + hi] * s->sc);
        }
        row[i] = (float)(s->diag[pa] + s->add);
    }
    bool ok = nb_qla_chol(Hr, n, pool) && nb_qla_trinv(Hr, U, n, pool);
    free(Hr);
    if (!ok) return false;
    for (int64_t i = 0, k = n * n - 1; i < k; i++, k--) {
        float t = U[i];
        U[i] = U[k];
        U[k] = t;
    }
    for (int64_t i = 0; i < n * n; i++)
        if (!isfinite(U[i])) return false;
    return true;
}

bool nb_gptq_chol_inv_upper(double *H, int64_t n, float *U, nb_pool *pool) {
    double *diag = malloc((size_t)n * sizeof(double));
    if (!diag) return false;
    for (int64_t i = 0; i < n; i++) diag[i] = H[i * n + i];
    hsrc s = {.H = H, .n = n, .sc = 1, .add = 0, .diag = diag};
    bool ok = factor_upper_inv(&s, U, pool);
    free(diag);
    return ok;
}

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const double *d = ctx;
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (d[x] != d[y]) return d[x] > d[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

struct nb_gptq_hinv {
    int64_t cols;
    float *U;             /* cols x cols upper, in quantization order */
    int64_t *perm;        /* act order (NULL: natural) */
    bool *dead;           /* [cols] original columns whose input was always zero */
    int64_t n_dead;
    double damp_used;
};

void nb_gptq_hinv_free(nb_gptq_hinv *h) {
    if (!h) return;
    free(h->U);
    free(h->perm);
    free(h->dead);
    free(h);
}

nb_status nb_gptq_hinv_create(const double *H, double count, int64_t cols, const nb_gptq_params *p, nb_pool *pool,
                              nb_gptq_hinv **out) {
    *out = NULL;
    if (!(count > 0)) return nb_fail(NB_ERR_INVALID, "GPTQ: no calibration tokens reached this layer");
    const double sc = 2.0 / count; /* H = 2 X^T X / N */
    for (int64_t i = 0; i < cols; i++)
        for (int64_t k = i; k < cols; k++)
            if (!isfinite(H[i * cols + k] * sc)) return nb_fail(NB_ERR_INVALID, "GPTQ: NaN or Inf in the input statistics");
    nb_gptq_hinv *h = calloc(1, sizeof *h);
    double *diag = malloc((size_t)cols * sizeof(double));
    if (h) {
        h->cols = cols;
        h->U = malloc((size_t)(cols * cols) * sizeof(float));
        h->dead = calloc((size_t)cols, sizeof(bool));
    }
    nb_status st = NB_OK;
    if (!h || !diag || !h->U || !h->dead) {
        st = nb_fail(NB_ERR_NOMEM, "GPTQ: out of memory for a %lld-wide Hessian", (long long)cols);
        goto out;
    }
    double mean = 0;
    for (int64_t i = 0; i < cols; i++) {
        diag[i] = H[i * cols + i] * sc;
        if (diag[i] == 0) { /* dead input */
            diag[i] = 1;
            h->dead[i] = true;
            h->n_dead++;
        }
        mean += diag[i];
    }
    mean /= (double)cols;
    if (p->desc_act) {
        h->perm = malloc((size_t)cols * sizeof(int64_t));
        if (!h->perm) { st = NB_ERR_NOMEM; goto out; }
        for (int64_t i = 0; i < cols; i++) h->perm[i] = i;
        qsort_r(h->perm, (size_t)cols, sizeof *h->perm, cmp_desc, diag);
    }
    double damp = p->damp > 0 ? p->damp : 0.01;
    bool ok = false;
    for (int tries = 0; tries < 5 && !ok; tries++, damp *= 10) {
        hsrc s = {.H = H, .n = cols, .sc = sc, .add = damp * mean, .perm = h->perm, .diag = diag};
        ok = factor_upper_inv(&s, h->U, pool);
        if (ok) h->damp_used = damp;
    }
    if (!ok) st = nb_fail(NB_ERR_INVALID, "GPTQ: the Hessian is not positive definite even with damp %g", damp / 10);
out:
    free(diag);
    if (st != NB_OK) nb_gptq_hinv_free(h);
    else *out = h;
    return st;
}

nb_status nb_gptq_quantize_hinv(float *W, int64_t rows, int64_t cols, const nb_gptq_hinv *h, const nb_gptq_params *p,
                                void *dst, nb_pool *pool, nb_gptq_result *res) {
    memset(res, 0, sizeof *res);
    fmt f;
    if (!fmt_of(p->type, &f))
        return nb_fail(NB_ERR_UNSUPPORTED, "GPTQ writes W4G32..W4G128(S), Q4_0, Q4_1 and Q4_K, not %s",
                       nb_dtype_name(p->type));
    if (cols % f.qblock)
        return nb_fail(NB_ERR_INVALID, "GPTQ: a row of %lld is not a multiple of %s's block of %d", (long long)cols,
                       f.q->name, f.qblock);
    if (h->cols != cols)
        return nb_fail(NB_ERR_INVALID, "GPTQ: a %lld-wide Hessian for rows of %lld", (long long)h->cols,
                       (long long)cols);
    if ((p->desc_act != 0) != (h->perm != NULL))
        return nb_fail(NB_ERR_INVALID, "GPTQ: the Hessian was factorised %s act order", h->perm ? "with" : "without");
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(W[i])) return nb_fail(NB_ERR_INVALID, "GPTQ: NaN or Inf in the weights (row %lld)",
                                            (long long)(i / cols));
    res->damp_used = h->damp_used;
    res->n_dead = h->n_dead;
    for (int64_t i = 0; i < cols; i++)
        if (h->dead[i])
            for (int64_t r = 0; r < rows; r++) W[r * cols + i] = 0;
    float *A = malloc((size_t)(rows * (cols / 32)) * sizeof(float)), *B = malloc((size_t)(rows * (cols / 32)) * sizeof(float));
    float *Wp = NULL;
    nb_status st = NB_OK;
    if (!A || !B) {
        st = nb_fail(NB_ERR_NOMEM, "GPTQ: out of memory for a %lld x %lld layer", (long long)rows, (long long)cols);
        goto out;
    }
    const bool stat = p->static_groups || p->desc_act;
    gjob j = {.W = W, .rows = rows, .cols = cols, .U = h->U, .f = f, .dst = dst, .A = A, .B = B, .stat = stat,
              .bs = p->block > 0 && p->block <= 128 ? p->block : 128};
    j.rb = (uint64_t)(cols / f.qblock) * f.q->block_bytes;
    memset(dst, 0, j.rb * (uint64_t)rows);
    if (stat)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += f.fit) fit_block(&j, r, c0, W + r * cols + c0);
    if (h->perm) {
        Wp = malloc((size_t)(rows * cols) * sizeof(float));
        if (!Wp) { st = NB_ERR_NOMEM; goto out; }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < cols; k++) Wp[r * cols + k] = W[r * cols + h->perm[k]];
        j.W = Wp;
        j.perm = h->perm;
    }
    int nth = pool ? nb_pool_size(pool) : 1;
    double lossv[512] = {0};
    if (nth > 512) nth = 512;
    j.loss = lossv;
    if (pool && nth > 1 && nth <= 512) nb_pool_run(pool, gjob_worker, &j);
    else {
        nth = 1;
        gjob_worker(&j, 0, 1);
    }
    if (j.oom) {
        st = nb_fail(NB_ERR_NOMEM, "GPTQ: out of memory for the error block of a %lld x %lld layer", (long long)rows,
                     (long long)cols);
        goto out;
    }
    for (int i = 0; i < nth; i++) res->loss += lossv[i];
out:
    free(A);
    free(B);
    free(Wp);
    return st;
}

nb_status nb_gptq_quantize(float *W, int64_t rows, int64_t cols, double *H, double count, const nb_gptq_params *p,
                           void *dst, nb_pool *pool, nb_gptq_result *res) {
    memset(res, 0, sizeof *res);
    fmt f;
    if (!fmt_of(p->type, &f))
        return nb_fail(NB_ERR_UNSUPPORTED, "GPTQ writes W4G32..W4G128(S), Q4_0, Q4_1 and Q4_K, not %s",
                       nb_dtype_name(p->type));
    if (cols % f.qblock)
        return nb_fail(NB_ERR_INVALID, "GPTQ: a row of %lld is not a multiple of %s's block of %d", (long long)cols,
                       f.q->name, f.qblock);
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(W[i])) return nb_fail(NB_ERR_INVALID, "GPTQ: NaN or Inf in the weights (row %lld)",
                                            (long long)(i / cols));
    nb_gptq_hinv *h;
    NB_TRY(nb_gptq_hinv_create(H, count, cols, p, pool, &h));
    nb_status st = nb_gptq_quantize_hinv(W, rows, cols, h, p, dst, pool, res);
    nb_gptq_hinv_free(h);
    return st;
}
