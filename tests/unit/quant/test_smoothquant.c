/* SmoothQuant scales (quant/awq.h):
 *  - s_j = max|x_j|^a / max|w_j|^(1-a), checked channel by channel;
 *  - folding 1/s into the norm weight and s into the weights leaves the
 *    float outputs unchanged to 1e-5 (relative);
 *  - with activation outliers, W8A8 (per-channel int8 weights, per-token
 *    int8 activations, the Q8_T format) has a lower output error after
 *    smoothing than without;
 *  - NaN / Inf in the weights or the activation maxima is refused.
 *    (End to end: tests/integration/quantize_calib.sh
 *    checks the logits of a whole folded model.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "quant/awq.h"
#include "quant/qtypes.h"

enum { ROWS = 64, COLS = 128, NX = 32 };

static uint64_t rs = 0x0123456789ABCDEFull;
static double urand(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static double gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static float X[NX * COLS], W[ROWS * COLS], nrm[COLS], xmax[COLS];

static void make(void) {
    for (int k = 0; k < COLS; k++) {
        nrm[k] = k % 23 == 5 ? 30.f : (float)(0.5 + urand());
        xmax[k] = 0;
    }
    for (int t = 0; t < NX; t++)
        for (int k = 0; k < COLS; k++) {
            X[t * COLS + k] = (float)gauss();
            xmax[k] = fmaxf(xmax[k], fabsf(X[t * COLS + k] * nrm[k]));
        }
    for (int i = 0; i < ROWS * COLS; i++) W[i] = (float)(0.05 * gauss());
}

static void test_scales(void **state) {
    (void)state;
    make();
    float s[COLS];
    const float *ws[1] = {W};
    int64_t rows[1] = {ROWS};
    assert_int_equal(nb_smoothquant_scales(xmax, ws, rows, 1, COLS, 0.5, s), NB_OK);
    for (int k = 0; k < COLS; k++) {
        double wm = 0;
        for (int r = 0; r < ROWS; r++) wm = fmax(wm, fabs(W[r * COLS + k]));
        double want = sqrt(xmax[k]) / sqrt(wm);
        assert_true(fabs(s[k] - want) <= 1e-5 * want);
    }
}

/* y = W (x * n): float outputs, and W8A8 outputs */
static void outputs(const float *Wm, const float *nv, bool w8a8, double *y) {
    const nb_qtype *wq = nb_qtype_get((nb_dtype)NB_W8), *aq = nb_qtype_get((nb_dtype)NB_Q8_T);
    static float Wd[ROWS * COLS];
    uint8_t buf[COLS * 2];
    for (int r = 0; r < ROWS; r++) {
        if (w8a8) {
            wq->from_float(Wm + r * COLS, buf, COLS);
            wq->to_float(buf, Wd + r * COLS, COLS);
        } else {
            memcpy(Wd + r * COLS, Wm + r * COLS, COLS * sizeof(float));
        }
    }
    for (int t = 0; t < NX; t++) {
        float a[COLS];
        for (int k = 0; k < COLS; k++) a[k] = X[t * COLS + k] * nv[k];
        if (w8a8) {
            aq->from_float(a, buf, COLS);
            aq->to_float(buf, a, COLS);
        }
        for (int r = 0; r < ROWS; r++) {
            double v = 0;
            for (int k = 0; k < COLS; k++) v += (double)Wd[r * COLS + k] * a[k];
            y[t * ROWS + r] = v;
        }
    }
}

static void test_folding_and_w8a8(void **state) {
    (void)state;
    make();
    float s[COLS], n2[COLS];
    static float W2[ROWS * COLS];
    const float *ws[1] = {W};
    int64_t rows[1] = {ROWS};
    assert_int_equal(nb_smoothquant_scales(xmax, ws, rows, 1, COLS, 0.5, s), NB_OK);
    for (int k = 0; k < COLS; k++) n2[k] = nrm[k] / s[k];
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < COLS; k++) W2[r * COLS + k] = W[r * COLS + k] * s[k];
    static double y0[NX * ROWS], y1[NX * ROWS], q0[NX * ROWS], q1[NX * ROWS];
    outputs(W, nrm, false, y0);
    outputs(W2, n2, false, y1);
    double worst = 0, scale = 0;
    for (int i = 0; i < NX * ROWS; i++) {
        worst = fmax(worst, fabs(y0[i] - y1[i]));
        scale = fmax(scale, fabs(y0[i]));
    }
    printf("folding: largest output change %.3g of %.3g\n", worst, scale);
    assert_true(worst <= 1e-5 * scale);
    outputs(W, nrm, true, q0);
    outputs(W2, n2, true, q1);
    double e0 = 0, e1 = 0;
    for (int i = 0; i < NX * ROWS; i++) {
        e0 += (q0[i] - y0[i]) * (q0[i] - y0[i]);
        e1 += (q1[i] - y0[i]) * (q1[i] - y0[i]);
    }
    printf("W8A8 output error: plain %.5g, smoothed %.5g\n", e0, e1);
    assert_true(e1 < e0);
}

/* NaN / Inf in the weights or the activation maxima is refused */
static void test_nonfinite(void **state) {
    (void)state;
    make();
    float s[COLS];
    const float *ws[1] = {W};
    int64_t rows[1] = {ROWS};
    W[3 * COLS + 11] = -INFINITY;
    assert_int_equal(nb_smoothquant_scales(xmax, ws, rows, 1, COLS, 0.5, s), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "row 3, column 11"));
    W[3 * COLS + 11] = 0;
    xmax[4] = NAN;
    assert_int_equal(nb_smoothquant_scales(xmax, ws, rows, 1, COLS, 0.5, s), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "input channel 4"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_scales), cmocka_unit_test(test_folding_and_w8a8),
                                       cmocka_unit_test(test_nonfinite)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
