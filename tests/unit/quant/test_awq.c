/* AWQ searches (quant/awq.h) on small matrices:
 *  - the alpha search returns the minimiser of the output error over the 20
 *    grid points, found here by brute force in double with this test's own
 *    scales, quantize/dequantize round trip and output error;
 *  - the module-output search (nb_awq_search_module) returns the minimiser
 *    of the error at the output of the module the linears feed, found by
 *    brute force in double: an MLP down(silu(gate x) up x) for (gate, up)
 *    and a causal attention with RoPE over the positions, then o, for
 *    (q, k, v);
 *  - with activation outliers the chosen scales beat no scaling;
 *  - the clipping search never raises the output error;
 *  - all-zero inputs: finite constant scales, weights not clipped;
 *  - NaN / Inf weights refused by both searches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "quant/awq.h"
#include "quant/qtypes.h"

enum { ROWS = 48, COLS = 128, NX = 64 };

static uint64_t rs = 0xA5A5A5A5DEADBEEFull;
static double urand(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static double gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static float X[NX * COLS], W[ROWS * COLS];
static double mean_abs[COLS];

static void make(double outlier) {
    for (int k = 0; k < COLS; k++) mean_abs[k] = 0;
    for (int t = 0; t < NX; t++)
        for (int k = 0; k < COLS; k++) {
            double v = gauss() * (k % 19 == 3 ? outlier : 1.0);
            X[t * COLS + k] = (float)v;
            mean_abs[k] += fabs(v) / NX;
        }
    for (int i = 0; i < ROWS * COLS; i++) W[i] = (float)(0.02 * gauss());
}

/* brute force: sum over rows and tokens of ((Q(W s)/s - W) x)^2, in double */
static double brute(double alpha, nb_dtype t) {
    double s[COLS], mx = 0, mn = INFINITY;
    for (int k = 0; k < COLS; k++) {
        s[k] = pow(mean_abs[k] > 1e-4 ? mean_abs[k] : 1e-4, alpha);
        mx = fmax(mx, s[k]);
        mn = fmin(mn, s[k]);
    }
    for (int k = 0; k < COLS; k++) s[k] = (float)(s[k] / (float)sqrt(mx * mn));
    const nb_qtype *q = nb_qtype_get(t);
    uint8_t buf[COLS * 2];
    float row[COLS], back[COLS];
    double err = 0;
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < COLS; k++) row[k] = W[r * COLS + k] * (float)s[k];
        q->from_float(row, buf, COLS);
        q->to_float(buf, back, COLS);
        for (int tt = 0; tt < NX; tt++) {
            double y = 0;
            for (int k = 0; k < COLS; k++) y += ((double)(back[k] / (float)s[k]) - W[r * COLS + k]) * X[tt * COLS + k];
            err += y * y;
        }
    }
    return err;
}

static void test_search_is_argmin(void **state) {
    (void)state;
    const nb_dtype types[] = {(nb_dtype)NB_W4G32, (nb_dtype)NB_W4G128, NB_Q4_0};
    for (int o = 0; o < 2; o++)
        for (size_t ti = 0; ti < 3; ti++) {
            make(o ? 12.0 : 1.0);
            float s[COLS];
            double alpha = -1;
            const float *ws[1] = {W};
            int64_t rows[1] = {ROWS};
            assert_int_equal(nb_awq_search(X, NX, mean_abs, ws, rows, &types[ti], 1, COLS, s, &alpha, NULL), NB_OK);
            double best = INFINITY, arg = -1;
            for (int g = 0; g < NB_AWQ_GRID; g++) {
                double e = brute((double)g / NB_AWQ_GRID, types[ti]);
                if (e < best) {
                    best = e;
                    arg = (double)g / NB_AWQ_GRID;
                }
            }
            double e_none = brute(0.0, types[ti]);
            printf("%s outliers %d: search alpha %.2f, brute force alpha %.2f (err %.4g, no scaling %.4g)\n",
                   nb_dtype_name(types[ti]), o, alpha, arg, best, e_none);
            assert_true(fabs(alpha - arg) < 1e-9);
            if (o) assert_true(best < e_none);
        }
}

static void test_clip(void **state) {
    (void)state;
    make(4.0);
    static float Wc[ROWS * COLS];
    memcpy(Wc, W, sizeof W);
    nb_awq_clip(X, NX, Wc, ROWS, COLS, (nb_dtype)NB_W4G32, NULL);
    /* error of quantizing the clipped weights, measured against the original */
    const nb_qtype *q = nb_qtype_get((nb_dtype)NB_W4G32);
    uint8_t buf[COLS];
    float back[COLS];
    double e_clip = 0, e_plain = 0;
    for (int r = 0; r < ROWS; r++)
        for (int pass = 0; pass < 2; pass++) {
            q->from_float((pass ? W : Wc) + r * COLS, buf, COLS);
            q->to_float(buf, back, COLS);
            for (int t = 0; t < NX; t++) {
                double y = 0;
                for (int k = 0; k < COLS; k++) y += ((double)back[k] - W[r * COLS + k]) * X[t * COLS + k];
                *(pass ? &e_plain : &e_clip) += y * y;
            }
        }
    printf("clip: %.5g, no clip %.5g\n", e_clip, e_plain);
    assert_true(e_clip <= e_plain * (1 + 1e-9));
    for (int i = 0; i < ROWS * COLS; i++) assert_true(fabsf(Wc[i]) <= fabsf(W[i]) + 1e-7f);
}

/* a layer whose inputs were all zero: every alpha gives zero error, the
 * scales stay finite and constant, the clip leaves the weights alone */
static void test_all_zero_inputs(void **state) {
    (void)state;
    make(1.0);
    static float Z[NX * COLS], Wc[ROWS * COLS];
    double zero_mean[COLS] = {0};
    float s[COLS];
    double alpha = -1;
    const float *ws[1] = {W};
    int64_t rows[1] = {ROWS};
    nb_dtype t = (nb_dtype)NB_W4G32;
    assert_int_equal(nb_awq_search(Z, NX, zero_mean, ws, rows, &t, 1, COLS, s, &alpha, NULL), NB_OK);
    for (int k = 0; k < COLS; k++) assert_true(isfinite(s[k]) && s[k] == s[0] && s[0] > 0);
    memcpy(Wc, W, sizeof W);
    nb_awq_clip(Z, NX, Wc, ROWS, COLS, t, NULL);
    assert_memory_equal(Wc, W, sizeof W);
}

/* NaN / Inf in a group's weights is refused by both searches, naming the
 * linear, row and column (as GPTQ refuses them) */
static void test_nonfinite_weights(void **state) {
    (void)state;
    make(1.0);
    static float W2[ROWS * COLS];
    memcpy(W2, W, sizeof W);
    W2[5 * COLS + 9] = NAN;
    const float *ws[2] = {W, W2};
    int64_t rows[2] = {ROWS, ROWS};
    nb_dtype t[2] = {(nb_dtype)NB_W4G32, (nb_dtype)NB_W4G32};
    float s[COLS];
    double alpha;
    assert_int_equal(nb_awq_search(X, NX, mean_abs, ws, rows, t, 2, COLS, s, &alpha, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "linear 1 of the group has NaN or Inf at row 5, column 9"));
    W2[5 * COLS + 9] = INFINITY;
    nb_awq_module mod = {.n = 1, .dim = COLS, .ref = X};
    assert_int_equal(nb_awq_search_module(mean_abs, ws, rows, t, 2, COLS, &mod, s, &alpha, NULL, NULL),
                     NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "row 5, column 9"));
}

/* ---- module output -------------------------------------------------------- */

enum { MC = 64, MFF = 96, MOUT = 48, MT = 24, MH = 2, MHD = 16 }; /* MH * MHD = 32 = q/k/v rows */
static float MX[MT * MC], Wg[MFF * MC], Wu[MFF * MC], Wd[MOUT * MFF];
static float Wq[MH * MHD * MC], Wk[MH * MHD * MC], Wv[MH * MHD * MC], Wo[MOUT * MH * MHD];
static double mmean[MC];

static void make_module(double outlier) {
    for (int k = 0; k < MC; k++) mmean[k] = 0;
    for (int t = 0; t < MT; t++)
        for (int k = 0; k < MC; k++) {
            double v = gauss() * (k % 11 == 5 ? outlier : 1.0);
            MX[t * MC + k] = (float)v;
            mmean[k] += fabs(v) / MT;
        }
    float *ws[] = {Wg, Wu, Wq, Wk, Wv};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < (i < 2 ? MFF : MH * MHD) * MC; j++) ws[i][j] = (float)(0.05 * gauss());
    for (int j = 0; j < MOUT * MFF; j++) Wd[j] = (float)(0.05 * gauss());
    for (int j = 0; j < MOUT * MH * MHD; j++) Wo[j] = (float)(0.05 * gauss());
}

/* this test's fake quantization in double: Q(W s)/s with its own scales */
static void fq_ref(const float *w, int rows, double alpha, nb_dtype t, double *out) {
    double s[MC], mx = 0, mn = INFINITY;
    for (int k = 0; k < MC; k++) {
        s[k] = pow(mmean[k] > 1e-4 ? mmean[k] : 1e-4, alpha);
        mx = fmax(mx, s[k]);
        mn = fmin(mn, s[k]);
    }
    for (int k = 0; k < MC; k++) s[k] = (float)(s[k] / (float)sqrt(mx * mn));
    const nb_qtype *q = nb_qtype_get(t);
    uint8_t buf[MC * 2];
    float row[MC], back[MC];
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < MC; k++) row[k] = w[r * MC + k] * (float)s[k];
        q->from_float(row, buf, MC);
        q->to_float(buf, back, MC);
        for (int k = 0; k < MC; k++) out[r * MC + k] = back[k] / (float)s[k];
    }
}

static void to_d(const float *w, int n, double *out) {
    for (int i = 0; i < n; i++) out[i] = w[i];
}

/* MLP output y[t] = down (silu(g x) * (u x)) in double */
static void mlp_d(const double *g, const double *u, double *y) {
    for (int t = 0; t < MT; t++) {
        double h[MFF];
        for (int f = 0; f < MFF; f++) {
            double a = 0, b = 0;
            for (int k = 0; k < MC; k++) {
                a += g[f * MC + k] * MX[t * MC + k];
                b += u[f * MC + k] * MX[t * MC + k];
            }
            h[f] = a / (1 + exp(-a)) * b;
        }
        for (int o = 0; o < MOUT; o++) {
            double v = 0;
            for (int f = 0; f < MFF; f++) v += (double)Wd[o * MFF + f] * h[f];
            y[t * MOUT + o] = v;
        }
    }
}

/* rotate pairs (2i, 2i+1) of each head by pos * 10000^(-2i/MHD) */
static void rope_d(double *v, int pos) {
    for (int h = 0; h < MH; h++)
        for (int i = 0; i < MHD / 2; i++) {
            double th = pos * pow(10000.0, -2.0 * i / MHD), c = cos(th), sn = sin(th);
            double *p = v + h * MHD + 2 * i, a = p[0], b = p[1];
            p[0] = a * c - b * sn;
            p[1] = a * sn + b * c;
        }
}

/* attention output before o: per head, softmax over positions <= t of q.k / sqrt(hd), times v */
static void attn_d(const double *q, const double *k, const double *v, double *att) {
    static double Q[MT][MH * MHD], K[MT][MH * MHD], V[MT][MH * MHD];
    const int D = MH * MHD;
    for (int t = 0; t < MT; t++) {
        for (int r = 0; r < D; r++) {
            double a = 0, b = 0, c = 0;
            for (int j = 0; j < MC; j++) {
                a += q[r * MC + j] * MX[t * MC + j];
                b += k[r * MC + j] * MX[t * MC + j];
                c += v[r * MC + j] * MX[t * MC + j];
            }
            Q[t][r] = a;
            K[t][r] = b;
            V[t][r] = c;
        }
        rope_d(Q[t], t);
        rope_d(K[t], t);
    }
    for (int t = 0; t < MT; t++)
        for (int h = 0; h < MH; h++) {
            double sc[MT], mx = -INFINITY, z = 0;
            for (int u = 0; u <= t; u++) {
                double d = 0;
                for (int i = 0; i < MHD; i++) d += Q[t][h * MHD + i] * K[u][h * MHD + i];
                sc[u] = d / sqrt((double)MHD);
                mx = fmax(mx, sc[u]);
            }
            for (int u = 0; u <= t; u++) z += sc[u] = exp(sc[u] - mx);
            for (int i = 0; i < MHD; i++) {
                double a = 0;
                for (int u = 0; u <= t; u++) a += sc[u] / z * V[u][h * MHD + i];
                att[t * D + h * MHD + i] = a;
            }
        }
}

static void attn_block_d(const double *q, const double *k, const double *v, double *y) {
    double att[MT * MH * MHD];
    attn_d(q, k, v, att);
    for (int t = 0; t < MT; t++)
        for (int o = 0; o < MOUT; o++) {
            double a = 0;
            for (int i = 0; i < MH * MHD; i++) a += (double)Wo[o * MH * MHD + i] * att[t * MH * MHD + i];
            y[t * MOUT + o] = a;
        }
}

/* brute force: the module's output error with its linears fake-quantized at alpha */
static double brute_module(int attn, double alpha, nb_dtype t) {
    static double a[MFF * MC], b[MFF * MC], c[MFF * MC];
    static double y[MT * MOUT], yf[MT * MOUT];
    if (attn) {
        fq_ref(Wq, MH * MHD, alpha, t, a);
        fq_ref(Wk, MH * MHD, alpha, t, b);
        fq_ref(Wv, MH * MHD, alpha, t, c);
        attn_block_d(a, b, c, y);
        to_d(Wq, MH * MHD * MC, a);
        to_d(Wk, MH * MHD * MC, b);
        to_d(Wv, MH * MHD * MC, c);
        attn_block_d(a, b, c, yf);
    } else {
        fq_ref(Wg, MFF, alpha, t, a);
        fq_ref(Wu, MFF, alpha, t, b);
        mlp_d(a, b, y);
        to_d(Wg, MFF * MC, a);
        to_d(Wu, MFF * MC, b);
        mlp_d(a, b, yf);
    }
    double e = 0;
    for (int i = 0; i < MT * MOUT; i++) e += (y[i] - yf[i]) * (y[i] - yf[i]);
    return e;
}

/* the modules as a caller runs them (float): activations before the last linear */
static nb_status mlp_run(void *ud, const float *const *deq, float *act) {
    (void)ud;
    for (int t = 0; t < MT; t++)
        for (int f = 0; f < MFF; f++) {
            float a = 0, b = 0;
            for (int k = 0; k < MC; k++) {
                a += deq[0][f * MC + k] * MX[t * MC + k];
                b += deq[1][f * MC + k] * MX[t * MC + k];
            }
            act[t * MFF + f] = a / (1 + expf(-a)) * b;
        }
    return NB_OK;
}

static nb_status attn_run(void *ud, const float *const *deq, float *act) {
    (void)ud;
    static double q[MH * MHD * MC], k[MH * MHD * MC], v[MH * MHD * MC], att[MT * MH * MHD];
    to_d(deq[0], MH * MHD * MC, q);
    to_d(deq[1], MH * MHD * MC, k);
    to_d(deq[2], MH * MHD * MC, v);
    attn_d(q, k, v, att);
    for (int i = 0; i < MT * MH * MHD; i++) act[i] = (float)att[i];
    return NB_OK;
}

static void test_module_search_is_argmin(void **state) {
    (void)state;
    const nb_dtype types[] = {(nb_dtype)NB_W4G32, NB_Q4_0, (nb_dtype)NB_W4G64};
    int differ = 0;
    for (int attn = 0; attn < 2; attn++)
        for (int o = 0; o < 2; o++)
            for (size_t ti = 0; ti < 3; ti++) {
                make_module(o ? 10.0 : 1.0);
                nb_dtype tt[3] = {types[ti], types[ti], types[ti]};
                const int dim = attn ? MH * MHD : MFF;
                static float ref[MT * MFF];
                const float *ident[3] = {Wq, Wk, Wv}, *identm[2] = {Wg, Wu};
                const float *const *ws = attn ? ident : identm;
                assert_int_equal((attn ? attn_run : mlp_run)(NULL, ws, ref), NB_OK);
                nb_awq_module mod = {.run = attn ? attn_run : mlp_run, .n = MT, .dim = dim, .ref = ref,
                                     .proj = attn ? Wo : Wd, .proj_rows = MOUT};
                int64_t rows[3] = {attn ? MH * MHD : MFF, attn ? MH * MHD : MFF, MH * MHD};
                float s[MC];
                double alpha = -1, err = -1;
                assert_int_equal(nb_awq_search_module(mmean, ws, rows, tt, attn ? 3 : 2, MC, &mod, s, &alpha, &err,
                                                      NULL),
                                 NB_OK);
                double best = INFINITY, arg = -1;
                for (int g = 0; g < NB_AWQ_GRID; g++) {
                    double e = brute_module(attn, (double)g / NB_AWQ_GRID, types[ti]);
                    if (e < best) {
                        best = e;
                        arg = (double)g / NB_AWQ_GRID;
                    }
                }
                /* the objective differs from the linears' own output error: count where their minimisers differ */
                double lin_alpha = -1;
                float s2[MC];
                assert_int_equal(nb_awq_search(MX, MT, mmean, ws, rows, tt, attn ? 3 : 2, MC, s2, &lin_alpha, NULL),
                                 NB_OK);
                differ += fabs(lin_alpha - arg) > 1e-9;
                printf("%s %s outliers %d: module search alpha %.2f (err %.5g), brute force alpha %.2f (err %.5g), "
                       "no scaling %.5g; linear-output search alpha %.2f\n",
                       attn ? "attention" : "mlp", nb_dtype_name(types[ti]), o, alpha, err, arg, best,
                       brute_module(attn, 0, types[ti]), lin_alpha);
                assert_true(fabs(alpha - arg) < 1e-9);
                assert_true(fabs(err - best) <= 1e-3 * best + 1e-12);
                if (o) assert_true(best <= brute_module(attn, 0, types[ti]));
            }
    printf("the linear-output search picks another alpha in %d of 12 cases\n", differ);
}

/* the module error with the identity projection is the plain squared difference */
static void test_module_error_identity(void **state) {
    (void)state;
    float a[5 * 7], r[5 * 7];
    double want = 0;
    for (int i = 0; i < 35; i++) {
        a[i] = (float)gauss();
        r[i] = (float)gauss();
        want += ((double)a[i] - r[i]) * ((double)a[i] - r[i]);
    }
    nb_awq_module mod = {.n = 5, .dim = 7, .ref = r};
    assert_true(fabs(nb_awq_module_error(&mod, a, NULL) - want) < 1e-5 * want);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_search_is_argmin), cmocka_unit_test(test_clip),
                                       cmocka_unit_test(test_all_zero_inputs),
                                       cmocka_unit_test(test_nonfinite_weights),
                                       cmocka_unit_test(test_module_search_is_argmin),
                                       cmocka_unit_test(test_module_error_identity)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
