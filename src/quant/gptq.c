/* GPTQ for one linear layer (see gptq.h). Written from the paper's
 * algorithm (Frantar et al., 2022, Algorithm 1) and its published
 * conventions (damp_percent, act order, static groups). */
#include "quant/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "quant/quant_ref.h"
#include "quant/qtypes.h"

#define ROW_CHUNK 16

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
} gjob;

static void fit_block(gjob *j, int64_t r, int64_t c0, const float *w) {
    uint8_t *blk = j->dst + (uint64_t)r * j->rb + (uint64_t)(c0 / j->f.qblock) * j->f.q->block_bytes;
    j->f.q->from_float(w, blk, j->f.fit);
    int nch = j->f.fit / 32;
    block_params(j->f.t, blk, nch, j->A + r * (j->cols / 32) + c0 / 32, j->B + r * (j->cols / 32) + c0 / 32);
}

static void gptq_rows(gjob *j, int64_t r0, int64_t r1, double *loss) {
    const int64_t cols = j->cols, nc32 = cols / 32;
    float E[ROW_CHUNK][128];
    const int bs = j->bs;
    for (int64_t i1 = 0; i1 < cols; i1 += bs) {
        int64_t i2 = NB_MIN(i1 + bs, cols);
        for (int64_t k = i1; k < i2; k++) {
            const int64_t c = j->perm ? j->perm[k] : k;
            if (!j->stat && c % j->f.fit == 0)
                for (int64_t r = r0; r < r1; r++) fit_block(j, r, c, j->W + r * cols + c);
            const float *urow = j->U + k * cols;
            const float d = urow[k];
            for (int64_t r = r0; r < r1; r++) {
                float *w = j->W + r * cols;
                const float a = j->A[r * nc32 + c / 32], b = j->B[r * nc32 + c / 32];
                int q = 0;
                if (a != 0) {
                    q = nb_nearest_int((w[k] - b) / a);
                    q = q < 0 ? 0 : q > 15 ? 15 : q;
                }
                const float v = a * q + b;
                int byte, shift;
                nib_pos(j->f.t, (int)(c % j->f.qblock), &byte, &shift);
                uint8_t *p = j->dst + (uint64_t)r * j->rb + (uint64_t)(c / j->f.qblock) * j->f.q->block_bytes + byte;
                *p = (uint8_t)((*p & ~(0xF << shift)) | (q << shift));
                const float e = (w[k] - v) / d;
                E[r - r0][k - i1] = e;
                *loss += (double)e * e / 2;
                for (int64_t m = k + 1; m < i2; m++) w[m] -= e * urow[m];
            }
        }
        if (i2 >= cols) continue;
        for (int64_t k = i1; k < i2; k++) {
            const float *urow = j->U + k * cols;
            for (int64_t r = r0; r < r1; r++) {
                const float e = E[r - r0][k - i1];
                if (e == 0) continue;
                float *w = j->W + r * cols;
                for (int64_t m = i2; m < cols; m++) w[m] -= e * urow[m];
            }
        }
    }
}

static void gjob_worker(void *arg, int ith, int nth) {
    gjob *j = arg;
    int64_t lo, hi;
    nb_split(j->rows, ith, nth, &lo, &hi);
    double loss = 0;
    for (int64_t r = lo; r < hi; r += ROW_CHUNK) gptq_rows(j, r, NB_MIN(r + ROW_CHUNK, hi), &loss);
    j->loss[ith] = loss;
}

/* ---- factorisation ---------------------------------------------------------- */

typedef struct cjob {
    double *A;
    int64_t n, j;
    double *Ut;   /* triangular inverse, transposed */
} cjob;

/* Right-looking "upper-lower" Cholesky step j: rows i < j of the leading
 * block get A[i][k] -= V[i][j] V[k][j] for i <= k < j. */
static void chol_update(void *arg, int ith, int nth) {
    cjob *c = arg;
    const int64_t n = c->n, j = c->j;
    int64_t lo, hi;
    nb_split(j, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const double vij = c->A[i * n + j];
        if (vij == 0) continue;
        double *ai = c->A + i * n;
        for (int64_t k = i; k < j; k++) ai[k] -= vij * c->A[k * n + j];
    }
}

/* Column jj of U = V^-1 (upper), stored as row jj of Ut: back substitution. */
static void inv_worker(void *arg, int ith, int nth) {
    cjob *c = arg;
    const int64_t n = c->n;
    int64_t jj;
    for (jj = ith; jj < n; jj += nth) {
        double *u = c->Ut + jj * n;
        memset(u, 0, (size_t)n * sizeof(double));
        u[jj] = 1 / c->A[jj * n + jj];
        for (int64_t i = jj - 1; i >= 0; i--) {
            const double *vi = c->A + i * n;
            double s = 0;
            for (int64_t k = i + 1; k <= jj; k++) s += vi[k] * u[k];
            u[i] = -s / vi[i];
        }
    }
}

static void run(nb_pool *pool, nb_pool_fn fn, void *arg) {
    if (pool && nb_pool_size(pool) > 1) nb_pool_run(pool, fn, arg);
    else fn(arg, 0, 1);
}

bool nb_gptq_chol_inv_upper(double *H, int64_t n, float *U, nb_pool *pool) {
    /* H = V V^T with V upper, from the last column to the first; V is
     * written over the upper triangle of H (row i, column j >= i). */
    cjob c = {H, n, 0, NULL};
    for (int64_t j = n - 1; j >= 0; j--) {
        double djj = H[j * n + j];
        if (!(djj > 0) || !isfinite(djj)) return false;
        djj = sqrt(djj);
        H[j * n + j] = djj;
        for (int64_t i = 0; i < j; i++) H[i * n + j] /= djj;
        c.j = j;
        if (j > 256) run(pool, chol_update, &c);
        else chol_update(&c, 0, 1);
    }
    c.Ut = malloc((size_t)(n * n) * sizeof(double));
    if (!c.Ut) return false;
    run(pool, inv_worker, &c);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < n; k++) U[i * n + k] = k >= i ? (float)c.Ut[k * n + i] : 0.f;
    free(c.Ut);
    return true;
}

/* ---- the layer ---------------------------------------------------------------- */

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const double *d = ctx;
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (d[x] != d[y]) return d[x] > d[y] ? -1 : 1;
    return x < y ? -1 : x > y;
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
    if (!(count > 0)) return nb_fail(NB_ERR_INVALID, "GPTQ: no calibration tokens reached this layer");
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(W[i])) return nb_fail(NB_ERR_INVALID, "GPTQ: NaN or Inf in the weights (row %lld)",
                                            (long long)(i / cols));
    /* symmetric H = 2 X^T X / N */
    const double sc = 2.0 / count;
    for (int64_t i = 0; i < cols; i++)
        for (int64_t k = i; k < cols; k++) {
            double v = H[i * cols + k] * sc;
            if (!isfinite(v)) return nb_fail(NB_ERR_INVALID, "GPTQ: NaN or Inf in the input statistics");
            H[i * cols + k] = H[k * cols + i] = v;
        }
    double *diag = malloc((size_t)cols * sizeof(double));
    int64_t *perm = NULL;
    float *U = malloc((size_t)(cols * cols) * sizeof(float));
    double *Hc = malloc((size_t)(cols * cols) * sizeof(double));
    float *A = malloc((size_t)(rows * (cols / 32)) * sizeof(float)), *B = malloc((size_t)(rows * (cols / 32)) * sizeof(float));
    float *Wp = NULL;
    nb_status st = NB_OK;
    if (!diag || !U || !Hc || !A || !B) {
        st = nb_fail(NB_ERR_NOMEM, "GPTQ: out of memory for a %lld x %lld layer", (long long)rows, (long long)cols);
        goto out;
    }
    for (int64_t i = 0; i < cols; i++) {
        if (H[i * cols + i] == 0) { /* dead input */
            H[i * cols + i] = 1;
            for (int64_t r = 0; r < rows; r++) W[r * cols + i] = 0;
            res->n_dead++;
        }
        diag[i] = H[i * cols + i];
    }
    const bool stat = p->static_groups || p->desc_act;
    gjob j = {.W = W, .rows = rows, .cols = cols, .U = U, .f = f, .dst = dst, .A = A, .B = B, .stat = stat,
              .bs = p->block > 0 && p->block <= 128 ? p->block : 128};
    j.rb = (uint64_t)(cols / f.qblock) * f.q->block_bytes;
    memset(dst, 0, j.rb * (uint64_t)rows);
    if (stat)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += f.fit) fit_block(&j, r, c0, W + r * cols + c0);
    if (p->desc_act) {
        perm = malloc((size_t)cols * sizeof(int64_t));
        Wp = malloc((size_t)(rows * cols) * sizeof(float));
        if (!perm || !Wp) { st = NB_ERR_NOMEM; goto out; }
        for (int64_t i = 0; i < cols; i++) perm[i] = i;
        qsort_r(perm, (size_t)cols, sizeof *perm, cmp_desc, diag);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < cols; k++) Wp[r * cols + k] = W[r * cols + perm[k]];
        for (int64_t i = 0; i < cols; i++) /* Hc = P H P^T */
            for (int64_t k = 0; k < cols; k++) Hc[i * cols + k] = H[perm[i] * cols + perm[k]];
        memcpy(H, Hc, (size_t)(cols * cols) * sizeof(double));
        j.W = Wp;
        j.perm = perm;
    }
    double mean = 0;
    for (int64_t i = 0; i < cols; i++) mean += H[i * cols + i];
    mean /= (double)cols;
    double damp = p->damp > 0 ? p->damp : 0.01;
    bool ok = false;
    for (int tries = 0; tries < 5 && !ok; tries++, damp *= 10) {
        memcpy(Hc, H, (size_t)(cols * cols) * sizeof(double));
        for (int64_t i = 0; i < cols; i++) Hc[i * cols + i] += damp * mean;
        ok = nb_gptq_chol_inv_upper(Hc, cols, U, pool);
        if (ok) res->damp_used = damp;
    }
    if (!ok) {
        st = nb_fail(NB_ERR_INVALID, "GPTQ: the Hessian is not positive definite even with damp %g", damp / 10);
        goto out;
    }
    int nth = pool ? nb_pool_size(pool) : 1;
    double lossv[512] = {0};
    if (nth > 512) nth = 512;
    j.loss = lossv;
    if (pool && nth > 1) nb_pool_run(pool, gjob_worker, &j);
    else gjob_worker(&j, 0, 1);
    for (int i = 0; i < nth; i++) res->loss += lossv[i];
out:
    free(diag);
    free(perm);
    free(U);
    free(Hc);
    free(A);
    free(B);
    free(Wp);
    return st;
}
