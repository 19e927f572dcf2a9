/* AWQ searches (quant/awq.h) on small matrices:
 *  - the alpha search returns the minimiser of the output error over the 20
 *    grid points, found here by brute force in double with this test's own
 *    scales, quantize/dequantize round trip and output error;
 *  - with activation outliers the chosen scales beat no scaling;
 *  - the clipping search never raises the output error. */
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_search_is_argmin), cmocka_unit_test(test_clip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
