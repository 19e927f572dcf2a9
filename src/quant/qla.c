/* Dense float linear algebra for the calibrated quantizers (see qla.h). */
#include "quant/qla.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"

#define KC 256   /* K per packed B panel (16 x KC floats = 16 KiB) */
#define NB 64    /* factorisation block */

static int use_avx2(void) {
    static int v = -1;
    if (v < 0) v = nb_cpu_isa() >= NB_ISA_AVX2 && nb_cpu_get()->fma;
    return v;
}

static void kernel_6x16_scalar(int64_t K, const float *const a[6], const float *bp, float *C, int64_t ldc, float alpha,
                               int mi, int nj) {
    float acc[6][16];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < K; k++) {
        const float *b = bp + 16 * k;
        for (int r = 0; r < 6; r++) {
            const float x = a[r][k];
            for (int j = 0; j < 16; j++) acc[r][j] += x * b[j];
        }
    }
    for (int r = 0; r < mi; r++)
        for (int j = 0; j < nj; j++) C[r * ldc + j] += alpha * acc[r][j];
}

static void add_f2d(int64_t n, const float *x, double *y) {
    if (use_avx2()) {
        nb_qla_add_f2d_avx2(n, x, y);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void nb_qla_axpy_sub(int64_t n, float a, const float *x, float *y) {
    if (use_avx2()) {
        nb_qla_axpy_sub_avx2(n, a, x, y);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] -= a * x[i];
}

/* Bp: for each panel of 16 columns, K x 16 floats (zero-padded). */
static void pack_b(int64_t K, int64_t n, const float *B, int64_t ldb, bool b_trans, float *Bp) {
    for (int64_t j0 = 0, p = 0; j0 < n && b_trans; j0 += 16, p++) {
        const int64_t nj = n - j0 < 16 ? n - j0 : 16;
        float *bp = Bp + p * K * 16;
        {
            for (int64_t j = 0; j < 16; j++) {
                if (j < nj) {
                    const float *src = B + (j0 + j) * ldb;
                    for (int64_t k = 0; k < K; k++) bp[k * 16 + j] = src[k];
                } else {
                    for (int64_t k = 0; k < K; k++) bp[k * 16 + j] = 0;
                }
            }
        }
    }
    if (b_trans) return;
    for (int64_t k = 0; k < K; k++) { /* row by row: B is read in order */
        const float *src = B + k * ldb;
        for (int64_t j0 = 0, p = 0; j0 < n; j0 += 16, p++) {
            float *d = Bp + p * K * 16 + k * 16;
            if (n - j0 >= 16) {
                memcpy(d, src + j0, 16 * sizeof(float));
            } else {
                int64_t j = 0;
                for (; j < n - j0; j++) d[j] = src[j0 + j];
                for (; j < 16; j++) d[j] = 0;
            }
        }
    }
}

/* C += alpha A B with B packed by pack_b (K rows, >= n columns). */
static void gemm_packed(int64_t m, int64_t n, int64_t K, float alpha, const float *A, int64_t lda, const float *Bp,
                        float *C, int64_t ldc) {
    static const float zeros[KC];
    void (*kern)(int64_t, const float *const *, const float *, float *, int64_t, float, int, int) =
        use_avx2() ? nb_qla_kernel_6x16_avx2 : kernel_6x16_scalar;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t j0 = 0, p = 0; j0 < n; j0 += 16, p++) {
            const int64_t nj = n - j0 < 16 ? n - j0 : 16;
            const float *bp = Bp + p * K * 16 + k0 * 16;
            for (int64_t i0 = 0; i0 < m; i0 += 6) {
                const int64_t mi = m - i0 < 6 ? m - i0 : 6;
                const float *a[6];
                for (int r = 0; r < 6; r++) a[r] = r < mi ? A + (i0 + r) * lda + k0 : zeros;
                kern(kc, a, bp, C + i0 * ldc + j0, ldc, alpha, (int)mi, (int)nj);
            }
        }
    }
}

void nb_qla_gemm(int64_t m, int64_t n, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, bool b_trans, float *C, int64_t ldc) {
    if (m <= 0 || n <= 0 || K <= 0) return;
    float bp[16 * KC] __attribute__((aligned(32)));
    /* B in chunks of KC rows x 16 columns, packed on the fly */
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            const int64_t nj = n - j0 < 16 ? n - j0 : 16;
            pack_b(kc, nj, b_trans ? B + j0 * ldb + k0 : B + k0 * ldb + j0, ldb, b_trans, bp);
            gemm_packed(m, nj, kc, alpha, A + k0, lda, bp, C + j0, ldc);
        }
    }
}

static void run(nb_pool *pool, nb_pool_fn fn, void *arg) {
    if (pool && nb_pool_size(pool) > 1) nb_pool_run(pool, fn, arg);
    else fn(arg, 0, 1);
}

/* ---- H += X^T X --------------------------------------------------------------- */

typedef struct sjob {
    double *H;
    int64_t d, n;
    const float *Xt;   /* d x n (X transposed) */
    const float *Xp;   /* X (n x d) packed in panels of 16 columns */
    atomic_llong next;
    bool oom;
} sjob;

#define SROWS 48

static void syrk_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    sjob *j = arg;
    const int64_t d = j->d;
    float *tile = malloc((size_t)(SROWS * d) * sizeof(float));
    if (!tile) {
        j->oom = true;
        return;
    }
    for (;;) {
        const int64_t b = atomic_fetch_add(&j->next, 1), i0 = b * SROWS;
        if (i0 >= d) break;
        const int64_t mi = d - i0 < SROWS ? d - i0 : SROWS, w = d - i0;
        memset(tile, 0, (size_t)(mi * w) * sizeof(float));
        /* rows i0..i0+mi, columns i0..d of X^T X */
        gemm_packed(mi, w, j->n, 1.f, j->Xt + i0 * j->n, j->n, j->Xp + (i0 / 16) * j->n * 16, tile, w);
        for (int64_t r = 0; r < mi; r++) add_f2d(w - r, tile + r * w + r, j->H + (i0 + r) * d + i0 + r);
    }
    free(tile);
}

int64_t nb_qla_syrk_scratch(int64_t d, int64_t n) { return d * n + ((d + 15) / 16) * 16 * n; }

void nb_qla_syrk_acc(double *H, int64_t d, const float *X, int64_t n, float *scratch, nb_pool *pool) {
    if (n <= 0 || d <= 0) return;
    float *Xt = scratch ? scratch : malloc((size_t)(d * n) * sizeof(float));
    float *Xp = scratch ? scratch + d * n : malloc((size_t)(((d + 15) / 16) * 16 * n) * sizeof(float));
    sjob j = {.H = H, .d = d, .n = n, .Xt = Xt, .Xp = Xp};
    atomic_init(&j.next, 0);
    if (Xt && Xp) {
        for (int64_t t0 = 0; t0 < n; t0 += 16) /* transpose by 16 x 16 tiles */
            for (int64_t i0 = 0; i0 < d; i0 += 16)
                for (int64_t i = i0; i < NB_MIN(i0 + 16, d); i++)
                    for (int64_t t = t0; t < NB_MIN(t0 + 16, n); t++) Xt[i * n + t] = X[t * d + i];
        pack_b(n, d, X, d, false, Xp);
        run(pool, syrk_worker, &j);
    }
    if (!Xt || !Xp || j.oom) { /* out of memory: the plain double loop, row by row */
        for (int64_t t = 0; t < n; t++) {
            const float *x = X + t * d;
            for (int64_t i = 0; i < d; i++) {
                const double xi = x[i];
                if (xi == 0) continue;
                double *h = H + i * d;
                for (int64_t k = i; k < d; k++) h[k] += xi * x[k];
            }
        }
    }
    if (!scratch) {
        free(Xt);
        free(Xp);
    }
}

/* ---- Cholesky ------------------------------------------------------------------- */

/* out (m x m, ld m) = the inverse of the lower triangle of L (ld ldl), in
 * double. */
static void tri_inv_small(const float *L, int64_t ldl, int64_t m, float *out) {
    double x[NB * NB];
    for (int64_t c = 0; c < m; c++)
        for (int64_t r = 0; r < m; r++) {
            if (r < c) {
                x[r * NB + c] = 0;
                continue;
            }
            double s = r == c ? 1 : 0;
            for (int64_t k = c; k < r; k++) s -= (double)L[r * ldl + k] * x[k * NB + c];
            x[r * NB + c] = s / L[r * ldl + r];
        }
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < m; c++) out[r * m + c] = (float)x[r * NB + c];
}

typedef struct fjob {
    float *A;
    const float *L;
    float *X;
    const float *D;        /* inverses of diagonal blocks */
    float *Bp;             /* L21^T packed (Cholesky step) */
    int64_t n, k0, k1;
    atomic_llong next;
    bool oom;
} fjob;

#define TROWS 24

/* L21 = A21 L11^-T for rows k1..n, as a GEMM with the inverse in D. */
static void trsm_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    fjob *j = arg;
    const int64_t n = j->n, k0 = j->k0, w = j->k1 - k0;
    float tmp[TROWS * NB];
    for (;;) {
        const int64_t i0 = j->k1 + atomic_fetch_add(&j->next, 1) * TROWS;
        if (i0 >= n) break;
        const int64_t mi = n - i0 < TROWS ? n - i0 : TROWS;
        for (int64_t r = 0; r < mi; r++) {
            memcpy(tmp + r * w, j->A + (i0 + r) * n + k0, (size_t)w * sizeof(float));
            memset(j->A + (i0 + r) * n + k0, 0, (size_t)w * sizeof(float));
        }
        nb_qla_gemm(mi, w, w, 1.f, tmp, w, j->D, w, true, j->A + i0 * n + k0, n);
    }
}

/* A[k1:, k1:] (lower part) -= L21 L21^T, by blocks of TROWS rows. */
static void trail_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    fjob *j = arg;
    const int64_t n = j->n, k0 = j->k0, k1 = j->k1;
    for (;;) {
        const int64_t i0 = k1 + atomic_fetch_add(&j->next, 1) * TROWS;
        if (i0 >= n) break;
        const int64_t mi = n - i0 < TROWS ? n - i0 : TROWS;
        /* columns k1 .. i0+mi (the diagonal block's upper corner is harmless) */
        if (j->Bp)
            gemm_packed(mi, i0 + mi - k1, k1 - k0, -1.f, j->A + i0 * n + k0, n, j->Bp, j->A + i0 * n + k1, n);
        else
            nb_qla_gemm(mi, i0 + mi - k1, k1 - k0, -1.f, j->A + i0 * n + k0, n, j->A + k1 * n + k0, n, true,
                        j->A + i0 * n + k1, n);
    }
}

bool nb_qla_chol(float *A, int64_t n, nb_pool *pool) {
    float D[NB * NB];
    float *Bp = malloc((size_t)(((n + 15) / 16) * 16 * NB) * sizeof(float)); /* NULL: pack per call */
    for (int64_t k0 = 0; k0 < n; k0 += NB) {
        const int64_t k1 = n - k0 < NB ? n : k0 + NB;
        /* diagonal block, unblocked, sums in double */
        for (int64_t c = k0; c < k1; c++) {
            float *ac = A + c * n;
            double s = ac[c];
            for (int64_t m = k0; m < c; m++) s -= (double)ac[m] * ac[m];
            if (!(s > 0) || !isfinite(s)) {
                free(Bp);
                return false;
            }
            const double dcc = sqrt(s);
            ac[c] = (float)dcc;
            for (int64_t i = c + 1; i < k1; i++) {
                float *ai = A + i * n;
                double t = ai[c];
                for (int64_t m = k0; m < c; m++) t -= (double)ai[m] * ac[m];
                ai[c] = (float)(t / dcc);
            }
        }
        if (k1 >= n) break;
        tri_inv_small(A + k0 * n + k0, n, k1 - k0, D);
        fjob j = {.A = A, .D = D, .n = n, .k0 = k0, .k1 = k1};
        atomic_init(&j.next, 0);
        run(pool, trsm_worker, &j);
        atomic_store(&j.next, 0);
        if (Bp) pack_b(k1 - k0, n - k1, A + k1 * n + k0, n, true, Bp);
        j.Bp = Bp;
        run(pool, trail_worker, &j);
    }
    free(Bp);
    return true;
}

/* ---- triangular inverse ------------------------------------------------------------ */

/* Column panel [j0, j1) of X = L^-1: X[j0:j1, j0:j1] = D_j, then for the row
 * blocks below, X[ib] = D_i (- L[ib, j0:i0] X[j0:i0, panel]). */
static void inv_panel(const float *L, const float *D, float *X, int64_t n, int64_t j0, int64_t j1, float *T) {
    const int64_t w = j1 - j0;
    for (int64_t r = 0; r < w; r++) memcpy(X + (j0 + r) * n + j0, D + j0 * NB + r * w, (size_t)w * sizeof(float));
    for (int64_t i0 = j1; i0 < n; i0 += NB) {
        const int64_t i1 = n - i0 < NB ? n : i0 + NB, mi = i1 - i0;
        memset(T, 0, (size_t)(mi * w) * sizeof(float));
        nb_qla_gemm(mi, w, i0 - j0, -1.f, L + i0 * n + j0, n, X + j0 * n + j0, n, false, T, w);
        for (int64_t r = 0; r < mi; r++) memset(X + (i0 + r) * n + j0, 0, (size_t)w * sizeof(float));
        nb_qla_gemm(mi, w, mi, 1.f, D + i0 * NB, mi, T, w, false, X + i0 * n + j0, n);
    }
}

static void inv_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    fjob *j = arg;
    float T[NB * NB];
    for (;;) {
        const int64_t j0 = atomic_fetch_add(&j->next, 1) * NB;
        if (j0 >= j->n) break;
        inv_panel(j->L, j->D, j->X, j->n, j0, j->n - j0 < NB ? j->n : j0 + NB, T);
    }
}

bool nb_qla_trinv(const float *L, float *X, int64_t n, nb_pool *pool) {
    for (int64_t i = 0; i < n; i++) {
        if (!(L[i * n + i] != 0) || !isfinite(L[i * n + i])) return false;
        memset(X + i * n + i + 1, 0, (size_t)(n - i - 1) * sizeof(float));
    }
    /* D: the inverse of diagonal block b at D + b*NB*NB (row-major, its width) */
    float *D = malloc((size_t)(n * NB) * sizeof(float));
    if (!D) return false;
    for (int64_t b0 = 0; b0 < n; b0 += NB) tri_inv_small(L + b0 * n + b0, n, n - b0 < NB ? n - b0 : NB, D + b0 * NB);
    fjob j = {.L = L, .X = X, .D = D, .n = n};
    atomic_init(&j.next, 0);
    run(pool, inv_worker, &j);
    free(D);
    return true;
}
