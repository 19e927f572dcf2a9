/* Importance matrices (quant/imatrix.h):
 *  - both file formats: written and read back; a legacy .dat built here
 *    byte by byte from the documented layout reads as value / ncall;
 *    truncated, oversized and NaN files are refused with a message;
 *  - an imatrix for another model (names or sizes) is refused;
 *  - the weighted quantizers: Q4_K against a second, independent
 *    implementation of llama.cpp's published rules written in this test
 *    (make_qkx3_quants, make_qp_quants, quantize_row_q4_K_impl), byte for
 *    byte; Q6_K with importance x^2 equals the reference (rmse_type 1)
 *    quantizer byte for byte; every weighted type lowers the importance-
 *    weighted error against round-to-nearest on rows where a few columns
 *    matter most. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "base/half.h"
#include "formats/source.h"
#include "quant/imatrix.h"
#include "quant/qtypes.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void test_roundtrip(void **state) {
    (void)state;
    nb_imatrix m = {0};
    nb_imatrix_entry *e = nb_imatrix_add(&m, "blk.0.attn_q.weight", 8);
    assert_non_null(e);
    float x[3 * 8];
    for (int i = 0; i < 24; i++) x[i] = (float)(i % 7) - 3.f;
    nb_imatrix_accumulate(e, x, 3, 8);
    assert_true(e->count == 3);
    assert_true(fabs(e->sum2[1] - (4.0 + 1.0 + 0.0)) < 1e-12); /* x[1]=-2, x[9]=-1, x[17]=0 */
    m.chunks = 5;
    m.chunk_size = 3;
    snprintf(m.dataset, sizeof m.dataset, "t.txt");
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/im.gguf", nb_test_tmpdir());
    snprintf(p2, sizeof p2, "%s/im.dat", nb_test_tmpdir());
    assert_int_equal(nb_imatrix_save_gguf(&m, p1), NB_OK);
    assert_int_equal(nb_imatrix_save_dat(&m, p2), NB_OK);
    for (int k = 0; k < 2; k++) {
        nb_imatrix r;
        assert_int_equal(nb_imatrix_load(k ? p2 : p1, &r), NB_OK);
        assert_int_equal(r.n, 1);
        assert_int_equal(r.chunks, 5);
        assert_string_equal(r.dataset, "t.txt");
        float a[8], b[8];
        nb_imatrix_values(&m.e[0], a);
        nb_imatrix_values(&r.e[0], b);
        for (int j = 0; j < 8; j++) assert_true(fabsf(a[j] - b[j]) <= 1e-6f * fabsf(a[j]));
        nb_imatrix_free(&r);
    }
    nb_imatrix_free(&m);
}

static void put32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }

static void test_legacy_layout(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/hand.dat", nb_test_tmpdir());
    FILE *f = fopen(p, "wb");
    put32(f, 2);
    const char *names[2] = {"blk.0.ffn_down.weight", "blk.1.attn_k.weight"};
    for (int i = 0; i < 2; i++) {
        put32(f, (int32_t)strlen(names[i]));
        fwrite(names[i], 1, strlen(names[i]), f);
        put32(f, 4);      /* ncall */
        put32(f, 3);      /* nval */
        float v[3] = {4.f * (i + 1), 8.f, 2.f};
        fwrite(v, 4, 3, f);
    }
    put32(f, 4);
    put32(f, 5);
    fwrite("wiki!", 1, 5, f);
    fclose(f);
    nb_imatrix m;
    assert_int_equal(nb_imatrix_load(p, &m), NB_OK);
    assert_true(m.legacy);
    assert_int_equal(m.n, 2);
    assert_int_equal(m.chunks, 4);
    assert_string_equal(m.dataset, "wiki!");
    const nb_imatrix_entry *e = nb_imatrix_find(&m, "blk.1.attn_k.weight");
    assert_non_null(e);
    float v[3];
    nb_imatrix_values(e, v);
    assert_true(v[0] == 2.f && v[1] == 2.f && v[2] == 0.5f);
    nb_imatrix_free(&m);

    /* truncated: cut the file inside the second entry's values */
    f = fopen(p, "r+b");
    assert_int_equal(ftruncate(fileno(f), 4 + 4 + 21 + 8 + 12 + 4 + 19 + 8 + 6), 0);
    fclose(f);
    assert_int_not_equal(nb_imatrix_load(p, &m), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "past the end"));
    /* NaN value */
    f = fopen(p, "wb");
    put32(f, 1);
    put32(f, 1);
    fwrite("a", 1, 1, f);
    put32(f, 1);
    put32(f, 1);
    float nan = NAN;
    fwrite(&nan, 4, 1, f);
    fclose(f);
    assert_int_not_equal(nb_imatrix_load(p, &m), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "finite"));
    /* huge count */
    f = fopen(p, "wb");
    put32(f, 0x7fffffff);
    fclose(f);
    assert_int_not_equal(nb_imatrix_load(p, &m), NB_OK);
}

static void test_other_model(void **state) {
    (void)state;
    const char *path = nb_test_shared("models/synth-llama-F16.gguf");
    if (!path) { skip(); return; }
    nb_source src;
    assert_int_equal(nb_source_open(path, &src), NB_OK);
    const nb_tensor *t = nb_source_find(&src, "blk.0.attn_q.weight");
    assert_non_null(t);
    nb_imatrix m = {0};
    nb_imatrix_add(&m, "blk.0.attn_q.weight", t->ne[0]);
    assert_int_equal(nb_imatrix_check(&m, &src, "x"), NB_OK);
    nb_imatrix_add(&m, "blk.99.attn_q.weight", t->ne[0]);
    assert_int_equal(nb_imatrix_check(&m, &src, "x"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "blk.99.attn_q.weight"));
    nb_imatrix_free(&m);
    nb_imatrix_add(&m, "blk.0.attn_q.weight", t->ne[0] / 2);
    assert_int_equal(nb_imatrix_check(&m, &src, "x"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "another model"));
    nb_imatrix_free(&m);
    nb_source_close(&src);
}

/* ---- an independent rendering of llama.cpp's Q4_K importance rules ------
 * Same published arithmetic (float, the same operation order), written
 * separately from quant_ggml.c so a slip in either shows as a byte
 * difference. */
static int rnd(float v) { return (int)nearbyintf(v); } /* round half even, like nearest_int */

static float t_qkx3(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min) {
    float mn = x[0], mx = x[0], sw = w[0], sx = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        sw += w[i];
        sx += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx <= mn) {
        memset(L, 0, (size_t)n);
        *the_min = -mn;
        return 0;
    }
    float is = nmax / (mx - mn), sc = 1 / is, best = 0;
    for (int i = 0; i < n; i++) {
        int l = rnd(is * (x[i] - mn));
        l = l < 0 ? 0 : l > nmax ? nmax : l;
        L[i] = (uint8_t)l;
        float d = sc * L[i] + mn - x[i];
        best += w[i] * (d * d);
    }
    uint8_t La[32];
    for (int k = 0; k <= 36; k++) {
        is = (-0.9f + 0.05f * k + nmax) / (mx - mn);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = rnd(is * (x[i] - mn));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            La[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        float D = sw * sl2 - sl * sl;
        if (!(D > 0)) continue;
        float ts = (sw * sxl - sx * sl) / D, tm = (sl2 * sx - sl * sxl) / D;
        if (tm > 0) {
            tm = 0;
            ts = sxl / sl2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float d = ts * La[i] + tm - x[i];
            err += w[i] * (d * d);
        }
        if (err < best) {
            memcpy(L, La, (size_t)n);
            best = err;
            sc = ts;
            mn = tm;
        }
    }
    *the_min = -mn;
    return sc;
}

static float t_qp(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float mx = 0;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (mx == 0) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float is = nmax / mx, sc = 1 / is, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)rnd(is * x[i]);
        float d = x[i] - sc * L[i];
        best += w[i] * d * d;
    }
    for (int k = -4; k <= 4; k++) {
        if (!k) continue;
        float ik = (0.1f * k + nmax) / mx, sk = 1 / ik, e = 0;
        for (int i = 0; i < n; i++) {
            int l = rnd(ik * x[i]);
            l = l > nmax ? nmax : l;
            float d = x[i] - sk * l;
            e += w[i] * d * d;
        }
        if (e < best) {
            best = e;
            is = ik;
        }
    }
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        int l = rnd(is * x[i]);
        l = l > nmax ? nmax : l;
        L[i] = (uint8_t)l;
        slx += w[i] * x[i] * l;
        sl2 += w[i] * l * l;
    }
    for (int it = 0; it < 5; it++) {
        int ch = 0;
        for (int i = 0; i < n; i++) {
            float a = slx - w[i] * x[i] * L[i], b = sl2 - w[i] * L[i] * L[i];
            if (a > 0 && b > 0) {
                int nl = rnd(x[i] * b / a);
                nl = nl > nmax ? nmax : nl;
                if (nl != L[i]) {
                    a += w[i] * x[i] * nl;
                    b += w[i] * nl * nl;
                    if (a * a * sl2 > slx * slx * b) {
                        L[i] = (uint8_t)nl;
                        slx = a;
                        sl2 = b;
                        ch++;
                    }
                }
            }
        }
        if (!ch) break;
    }
    return slx / sl2;
}

/* One Q4_K super-block: fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes. */
static void t_q4k_block(const float *x, const float *qw, uint8_t *out) {
    float s2 = 0;
    for (int l = 0; l < 256; l++) s2 += x[l] * x[l];
    const float sigma2 = 2 * s2 / 256;
    float sc[8], mins[8], sw[8], w[32];
    uint8_t L[256], Ls[8], Lm[8];
    for (int j = 0; j < 8; j++) {
        for (int l = 0; l < 32; l++) w[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float s = 0;
        for (int l = 0; l < 32; l++) s += w[l];
        sw[j] = s;
        sc[j] = t_qkx3(32, 15, x + 32 * j, w, L + 32 * j, &mins[j]);
    }
    float db = t_qp(8, 63, sc, Ls, sw), mb = t_qp(8, 63, mins, Lm, sw);
    uint8_t s12[12] = {0};
    for (int j = 0; j < 8; j++) {
        int ls = Ls[j] > 63 ? 63 : Ls[j], lm = Lm[j] > 63 ? 63 : Lm[j];
        if (j < 4) {
            s12[j] = (uint8_t)ls;
            s12[j + 4] = (uint8_t)lm;
        } else {
            s12[j + 4] = (uint8_t)((ls & 15) | ((lm & 15) << 4));
            s12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s12[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    uint16_t dh = nb_fp32_to_fp16(db), mh = nb_fp32_to_fp16(mb);
    for (int j = 0; j < 8; j++) {
        int s = j < 4 ? s12[j] & 63 : (s12[j + 4] & 15) | ((s12[j - 4] >> 6) << 4);
        int m = j < 4 ? s12[j + 4] & 63 : (s12[j + 4] >> 4) | ((s12[j] >> 6) << 4);
        float d = nb_fp16_to_fp32(dh) * s;
        if (d == 0) continue;
        float dm = nb_fp16_to_fp32(mh) * m;
        for (int i = 0; i < 32; i++) {
            int l = rnd((x[32 * j + i] + dm) / d);
            L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l);
        }
    }
    memcpy(out, &dh, 2);
    memcpy(out + 2, &mh, 2);
    memcpy(out + 4, s12, 12);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) out[16 + 32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

static void test_q4k_independent(void **state) {
    (void)state;
    enum { N = 512 };
    float x[N], qw[N];
    uint8_t a[2 * 144], b[2 * 144];
    for (int trial = 0; trial < 200; trial++) {
        float scale = (float)(0.01 + urand());
        for (int i = 0; i < N; i++) {
            x[i] = scale * gauss();
            if (trial % 5 == 0 && i % 37 == 0) x[i] *= 8; /* outliers */
            qw[i] = (float)(urand() * urand() * 4);
            if (trial % 7 == 0 && i % 3) qw[i] = 0; /* zero importance columns */
        }
        assert_true(nb_quant_row_weighted(NB_Q4_K, x, a, N, qw));
        t_q4k_block(x, qw, b);
        t_q4k_block(x + 256, qw + 256, b + 144);
        assert_memory_equal(a, b, sizeof a);
    }
}

static void test_q6k_equals_reference(void **state) {
    (void)state;
    enum { N = 256 };
    float x[N], qw[N];
    uint8_t a[210], b[210];
    const nb_qtype *q = nb_qtype_get(NB_Q6_K);
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < N; i++) {
            x[i] = gauss();
            qw[i] = x[i] * x[i];
        }
        assert_true(nb_quant_row_weighted(NB_Q6_K, x, a, N, qw));
        q->from_float(x, b, N);
        assert_memory_equal(a, b, sizeof a);
    }
}

/* Importance concentrated on a few columns: the weighted quantizer must
 * have a lower importance-weighted squared error than round-to-nearest. */
static void test_weighted_error(void **state) {
    (void)state;
    const nb_dtype types[] = {NB_Q4_0, NB_Q4_1, NB_Q5_0, NB_Q5_1, NB_Q2_K, NB_Q3_K, NB_Q4_K, NB_Q5_K, NB_Q6_K};
    enum { N = 1024, ROWS = 32 };
    static float x[N], qw[N], y[N];
    static uint8_t buf[N * 2];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const nb_qtype *q = nb_qtype_get(types[k]);
        double ew = 0, er = 0;
        for (int i = 0; i < N; i++) qw[i] = (i % 16 == 3) ? 50.f : 0.05f;
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < N; i++) x[i] = gauss();
            assert_true(nb_quant_row_weighted(types[k], x, buf, N, qw));
            q->to_float(buf, y, N);
            for (int i = 0; i < N; i++) ew += qw[i] * (double)(y[i] - x[i]) * (y[i] - x[i]);
            q->from_float(x, buf, N);
            q->to_float(buf, y, N);
            for (int i = 0; i < N; i++) er += qw[i] * (double)(y[i] - x[i]) * (y[i] - x[i]);
        }
        printf("%-5s weighted error: imatrix %.4g, rtn %.4g\n", q->name, ew, er);
        assert_true(ew < er);
    }
    assert_false(nb_quant_row_weighted(NB_Q8_0, x, buf, 32, qw));
    assert_false(nb_quant_row_weighted(NB_Q4_K, x, buf, 100, qw));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),         cmocka_unit_test(test_legacy_layout),
        cmocka_unit_test(test_other_model),       cmocka_unit_test(test_q4k_independent),
        cmocka_unit_test(test_q6k_equals_reference), cmocka_unit_test(test_weighted_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
