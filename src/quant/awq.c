/* AWQ scale and clip searches, SmoothQuant scales (see awq.h). Written from
 * the papers' descriptions and AutoAWQ's published search grid. */
#include "quant/awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        for (int64_t k = 0; k < cols; k++) row[k] = j->s ? w[k] * j->s[k] : w[k];
        qt->from_float(row, qb, cols);
        qt->to_float(qb, tmp, cols);
        for (int64_t k = 0; k < cols; k++) tmp[k] = (j->s ? tmp[k] / j->s[k] : tmp[k]) - w[k];
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

void nb_smoothquant_scales(const float *max_abs_x, const float *const *W, const int64_t *rows, int nw, int64_t cols,
                           double alpha, float *s) {
    for (int64_t k = 0; k < cols; k++) {
        float wmax = 0;
        for (int i = 0; i < nw; i++)
            for (int64_t r = 0; r < rows[i]; r++) wmax = fmaxf(wmax, fabsf(W[i][r * cols + k]));
        double xm = max_abs_x[k], sj = 1;
        if (xm > 0 && wmax > 0) sj = pow(xm, alpha) / pow(wmax, 1 - alpha);
        if (!(sj > 1e-5 && sj < 1e5)) sj = 1;
        s[k] = (float)sj;
    }
}
