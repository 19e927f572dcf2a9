/* AWQ scale and clip searches, SmoothQuant scales (see awq.h). Written from
 * the papers' descriptions and AutoAWQ's published search grid. */
#include "quant/awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qla.h"
#include "quant/qtypes.h"

#define CLIP_GRID 20
#define CLIP_STEPS 10

/* dot of n floats with 8 partial sums (vectorizes without -ffast-math) */
static inline float dot8(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int u = 0; u < 8; u++) acc[u] += a[k + u] * b[k + u];
    float s = 0;
    for (; k < n; k++) s += a[k] * b[k];
    for (int u = 0; u < 8; u++) s += acc[u];
    return s;
}

/* Row w of `cols` weights as AWQ sees it with scales s (NULL: none):
 * (w * s) quantized to qt and back, divided by s again, into out; qb and
 * row are the caller's scratch (a quantized row, cols floats). */
static void fake_quant_row(const nb_qtype *qt, const float *w, const float *s, int64_t cols, uint8_t *qb, float *row,
                           float *out) {
    for (int64_t k = 0; k < cols; k++) row[k] = s ? w[k] * s[k] : w[k];
    qt->from_float(row, qb, cols);
    qt->to_float(qb, out, cols);
    if (s)
        for (int64_t k = 0; k < cols; k++) out[k] /= s[k];
}

typedef struct ejob {
    const float *X, *W, *s;
    int64_t nx, rows, cols;
    nb_dtype type;
    double err[64];
    bool bad;
} ejob;

static void err_worker(void *arg, int ith, int nth) {
    ejob *j = arg;
    const nb_qtype *qt = nb_qtype_get(j->type);
    uint64_t rb;
    nb_dtype_row_bytes(j->type, (uint64_t)j->cols, &rb);
    int64_t lo, hi, cols = j->cols;
    nb_split(j->rows, ith, nth, &lo, &hi);
    uint8_t *qb = malloc(rb);
    float *row = malloc((size_t)cols * sizeof(float)), *tmp = malloc((size_t)cols * sizeof(float));
    double err = 0;
    if (!qb || !row || !tmp) j->bad = true;
    for (int64_t r = lo; r < hi && qb && row && tmp; r++) {
        const float *w = j->W + r * cols;
        fake_quant_row(qt, w, j->s, cols, qb, row, tmp);
        for (int64_t k = 0; k < cols; k++) tmp[k] -= w[k];
        for (int64_t t = 0; t < j->nx; t++) {
            double y = dot8(tmp, j->X + t * cols, cols);
            err += y * y;
        }
    }
    if (ith < 64) j->err[ith] = err;
    free(qb);
    free(row);
    free(tmp);
}

double nb_awq_error(const float *X, int64_t nx, const float *W, int64_t rows, int64_t cols, const float *s,
                    nb_dtype type, nb_pool *pool) {
    const nb_qtype *qt = nb_qtype_get(type);
    uint64_t rb;
    if (!qt || !nb_dtype_row_bytes(type, (uint64_t)cols, &rb)) return INFINITY;
    ejob j = {.X = X, .W = W, .s = s, .nx = nx, .rows = rows, .cols = cols, .type = type};
    int nth = pool ? nb_pool_size(pool) : 1;
    if (pool && nth > 1 && nth <= 64) nb_pool_run(pool, err_worker, &j);
    else {
        nth = 1;
        err_worker(&j, 0, 1);
    }
    double e = 0;
    for (int i = 0; i < nth; i++) e += j.err[i];
    return j.bad ? INFINITY : e;
}

/* NB_ERR_INVALID naming the first NaN / Inf in the group's weights
 * (nw linears, rows[i] x cols). */
static nb_status check_weights(const char *who, const float *const *W, const int64_t *rows, int nw, int64_t cols) {
    for (int i = 0; i < nw; i++) {
        int64_t at = nb_first_nonfinite(W[i], rows[i] * cols);
        if (at >= 0)
            return nb_fail(NB_ERR_INVALID, "%s: linear %d of the group has NaN or Inf at row %lld, column %lld "
                           "(weights must be finite)", who, i, (long long)(at / cols), (long long)(at % cols));
    }
    return NB_OK;
}

void nb_awq_scales(const double *mean_abs, int64_t cols, double alpha, float *s) {
    double mx = 0, mn = INFINITY;
    for (int64_t k = 0; k < cols; k++) {
        s[k] = (float)pow(fmax(mean_abs[k], 1e-4), alpha);
        mx = fmax(mx, s[k]);
        mn = fmin(mn, s[k]);
    }
    float norm = (float)sqrt(mx * mn);
    for (int64_t k = 0; k < cols; k++) s[k] /= norm;
}

nb_status nb_awq_search(const float *X, int64_t nx, const double *mean_abs, const float *const *W, const int64_t *rows,
                        const nb_dtype *types, int nw, int64_t cols, float *s_out, double *alpha_out, nb_pool *pool) {
    NB_TRY(check_weights("AWQ", W, rows, nw, cols));
    float *s = malloc((size_t)cols * sizeof(float));
    if (!s) return NB_ERR_NOMEM;
    double best = INFINITY;
    *alpha_out = 0;
    for (int64_t k = 0; k < cols; k++) s_out[k] = 1;
    for (int g = 0; g < NB_AWQ_GRID; g++) {
        double a = (double)g / NB_AWQ_GRID;
        nb_awq_scales(mean_abs, cols, a, s);
        double err = 0;
        for (int i = 0; i < nw; i++) err += nb_awq_error(X, nx, W[i], rows[i], cols, s, types[i], pool);
        if (err < best) {
            best = err;
            *alpha_out = a;
            memcpy(s_out, s, (size_t)cols * sizeof(float));
        }
    }
    free(s);
    return NB_OK;
}

/* ---- module-output search ------------------------------------------------------ */

typedef struct fqjob {
    const float *W, *s;
    float *out;
    int64_t rows, cols;
    nb_dtype type;
    bool bad;
} fqjob;

static void fq_worker(void *arg, int ith, int nth) {
    fqjob *j = arg;
    const nb_qtype *qt = nb_qtype_get(j->type);
    uint64_t rb;
    nb_dtype_row_bytes(j->type, (uint64_t)j->cols, &rb);
    int64_t lo, hi, cols = j->cols;
    nb_split(j->rows, ith, nth, &lo, &hi);
    uint8_t *qb = malloc(rb);
    float *row = malloc((size_t)cols * sizeof(float));
    if (!qb || !row) j->bad = true;
    for (int64_t r = lo; r < hi && qb && row; r++) {
        fake_quant_row(qt, j->W + r * cols, j->s, cols, qb, row, j->out + r * cols);
    }
    free(qb);
    free(row);
}

nb_status nb_awq_fake_quant(const float *W, int64_t rows, int64_t cols, const float *s, nb_dtype type, float *out,
                            nb_pool *pool) {
    const nb_qtype *qt = nb_qtype_get(type);
    uint64_t rb;
    if (!qt || !nb_dtype_row_bytes(type, (uint64_t)cols, &rb))
        return nb_fail(NB_ERR_INVALID, "AWQ: %s cannot hold rows of %lld", nb_dtype_name(type), (long long)cols);
    fqjob j = {.W = W, .s = s, .out = out, .rows = rows, .cols = cols, .type = type};
    if (pool && nb_pool_size(pool) > 1) nb_pool_run(pool, fq_worker, &j);
    else fq_worker(&j, 0, 1);
    return j.bad ? NB_ERR_NOMEM : NB_OK;
}

#define MOD_CHUNK 32 /* rows of act per GEMM against the projection */

typedef struct mejob {
    const nb_awq_module *m;
    const float *act;
    double err[64];
    bool bad;
} mejob;

static void moderr_worker(void *arg, int ith, int nth) {
    mejob *j = arg;
    const nb_awq_module *m = j->m;
    const int64_t dim = m->dim, pr = m->proj ? m->proj_rows : 0;
    int64_t lo, hi;
    nb_split(m->n, ith, nth, &lo, &hi);
    float *d = malloc((size_t)(MOD_CHUNK * dim) * sizeof(float));
    float *y = pr ? malloc((size_t)(MOD_CHUNK * pr) * sizeof(float)) : NULL;
    double err = 0;
    if (!d || (pr && !y)) j->bad = true;
    for (int64_t t0 = lo; t0 < hi && d && (!pr || y); t0 += MOD_CHUNK) {
        const int64_t nt = hi - t0 < MOD_CHUNK ? hi - t0 : MOD_CHUNK;
        for (int64_t i = 0; i < nt * dim; i++) d[i] = j->act[t0 * dim + i] - m->ref[t0 * dim + i];
        if (!pr) {
            for (int64_t i = 0; i < nt * dim; i++) err += (double)d[i] * d[i];
            continue;
        }
        memset(y, 0, (size_t)(nt * pr) * sizeof(float));
        nb_qla_gemm(nt, pr, dim, 1.f, d, dim, m->proj, dim, true, y, pr);
        for (int64_t i = 0; i < nt * pr; i++) err += (double)y[i] * y[i];
    }
    if (ith < 64) j->err[ith] = err;
    free(d);
    free(y);
}

double nb_awq_module_error(const nb_awq_module *mod, const float *act, nb_pool *pool) {
    mejob j = {.m = mod, .act = act};
    int nth = pool ? nb_pool_size(pool) : 1;
    if (pool && nth > 1 && nth <= 64) nb_pool_run(pool, moderr_worker, &j);
    else {
        nth = 1;
        moderr_worker(&j, 0, 1);
    }
    double e = 0;
    for (int i = 0; i < nth; i++) e += j.err[i];
    return j.bad || !isfinite(e) ? INFINITY : e;
}

nb_status nb_awq_search_module(const double *mean_abs, const float *const *W, const int64_t *rows,
                               const nb_dtype *types, int nw, int64_t cols, const nb_awq_module *mod, float *s_out,
                               double *alpha_out, double *err_out, nb_pool *pool) {
    if (nw < 1 || nw > 8) return nb_fail(NB_ERR_INVALID, "AWQ: %d linears in a group (1..8)", nw);
    NB_TRY(check_weights("AWQ", W, rows, nw, cols));
    float *s = malloc((size_t)cols * sizeof(float));
    float *act = malloc((size_t)(mod->n * mod->dim) * sizeof(float) + 1);
    float *deq[8] = {0};
    nb_status st = s && act ? NB_OK : NB_ERR_NOMEM;
    for (int i = 0; i < nw && st == NB_OK; i++)
        if (!(deq[i] = malloc((size_t)(rows[i] * cols) * sizeof(float)))) st = NB_ERR_NOMEM;
    double best = INFINITY;
    *alpha_out = 0;
    for (int64_t k = 0; k < cols; k++) s_out[k] = 1;
    for (int g = 0; g < NB_AWQ_GRID && st == NB_OK; g++) {
        double a = (double)g / NB_AWQ_GRID;
        nb_awq_scales(mean_abs, cols, a, s);
        for (int i = 0; i < nw && st == NB_OK; i++) st = nb_awq_fake_quant(W[i], rows[i], cols, s, types[i], deq[i], pool);
        if (st == NB_OK) st = mod->run(mod->ud, (const float *const *)deq, act);
        if (st != NB_OK) break;
        double err = nb_awq_module_error(mod, act, pool);
        if (err < best) {
            best = err;
            *alpha_out = a;
            memcpy(s_out, s, (size_t)cols * sizeof(float));
        }
    }
    if (err_out) *err_out = best;
    for (int i = 0; i < nw; i++) free(deq[i]);
    free(act);
    free(s);
    return st;
}

typedef struct cljob {
    const float *X;
    int64_t nx, rows, cols;
    float *W;
    nb_dtype type;
} cljob;

static void clip_worker(void *arg, int ith, int nth) {
    cljob *j = arg;
    const nb_qtype *qt = nb_qtype_get(j->type);
    const int G = (int)qt->block;
    const int64_t cols = j->cols;
    float w[256], dq[256], dw[256];
    uint8_t qb[512];
    int64_t lo, hi;
    nb_split(j->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        for (int64_t g0 = 0; g0 < cols; g0 += G) {
            float *wr = j->W + r * cols + g0, amax = 0;
            for (int k = 0; k < G; k++) amax = fmaxf(amax, fabsf(wr[k]));
            if (amax == 0) continue;
            double best = INFINITY;
            float best_m = amax;
            for (int i = 0; i < CLIP_STEPS; i++) {
                float mv = amax * (1.f - (float)i / CLIP_GRID);
                for (int k = 0; k < G; k++) w[k] = fminf(fmaxf(wr[k], -mv), mv);
                qt->from_float(w, qb, G);
                qt->to_float(qb, dq, G);
                for (int k = 0; k < G; k++) dw[k] = dq[k] - wr[k];
                double err = 0;
                for (int64_t t = 0; t < j->nx; t++) {
                    double y = dot8(dw, j->X + t * cols + g0, G);
                    err += y * y;
                }
                if (err < best) {
                    best = err;
                    best_m = mv;
                }
            }
            for (int k = 0; k < G; k++) wr[k] = fminf(fmaxf(wr[k], -best_m), best_m);
        }
}

void nb_awq_clip(const float *X, int64_t nx, float *W, int64_t rows, int64_t cols, nb_dtype type, nb_pool *pool) {
    const nb_qtype *qt = nb_qtype_get(type);
    if (!qt || qt->per_row || qt->block > 256 || cols % qt->block) return;
    cljob j = {X, nx, rows, cols, W, type};
    if (pool && nb_pool_size(pool) > 1) nb_pool_run(pool, clip_worker, &j);
    else clip_worker(&j, 0, 1);
}

nb_status nb_smoothquant_scales(const float *max_abs_x, const float *const *W, const int64_t *rows, int nw,
                                int64_t cols, double alpha, float *s) {
    NB_TRY(check_weights("SmoothQuant", W, rows, nw, cols));
    int64_t at = nb_first_nonfinite(max_abs_x, cols);
    if (at >= 0)
        return nb_fail(NB_ERR_INVALID, "SmoothQuant: the activation maximum of input channel %lld is NaN or Inf",
                       (long long)at);
    for (int64_t k = 0; k < cols; k++) {
        float wmax = 0;
        for (int i = 0; i < nw; i++)
            for (int64_t r = 0; r < rows[i]; r++) wmax = fmaxf(wmax, fabsf(W[i][r * cols + k]));
        double xm = max_abs_x[k], sj = 1;
        if (xm > 0 && wmax > 0) sj = pow(xm, alpha) / pow(wmax, 1 - alpha);
        if (!(sj > 1e-5 && sj < 1e5)) sj = 1;
        s[k] = (float)sj;
    }
    return NB_OK;
}
