/* Tests of the format registry and the reference quantizers:
 *  - registry facts (block sizes, bits per weight from ANCHORS.md / ggml),
 *    ext dtypes registered, row fallback rule;
 *  - FP8 conversions against the OCP spec's values;
 *  - quantize -> dequantize error bounds per format (from the format math);
 *  - Q2_K / Q3_K: hand-built blocks dequantized against values computed from
 *    the format definition, and inputs on the format's grid round-tripping
 *    (no llama.cpp Q2_K / Q3_K files exist in shared/ to compare bytes with);
 *  - byte equality with llama-quantize: the F16 tensors of synth-llama-F16
 *    quantized here must equal the tensors in the llama.cpp-quantized files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/half.h"
#include "formats/gguf.h"
#include "base/blocks.h"
#include "quant/qtypes.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void test_registry(void **state) {
    (void)state;
    struct { nb_dtype t; uint32_t block, bytes; double bpw; } want[] = {
        {NB_Q4_0, 32, 18, 4.5}, {NB_Q4_1, 32, 20, 5.0}, {NB_Q5_0, 32, 22, 5.5},
        {NB_Q5_1, 32, 24, 6.0}, {NB_Q8_0, 32, 34, 8.5}, {NB_Q2_K, 256, 84, 2.625},
        {NB_Q3_K, 256, 110, 3.4375}, {NB_Q4_K, 256, 144, 4.5},
        {NB_Q5_K, 256, 176, 5.5}, {NB_Q6_K, 256, 210, 6.5625}, {NB_Q8_K, 256, 292, 9.125},
        {NB_W4G128, 128, 68, 4.25}, {NB_NF4, 64, 36, 4.5},
        {NB_FP8_E4M3, 32, 36, 9.0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const nb_qtype *q = nb_qtype_get(want[i].t);
        assert_non_null(q);
        assert_int_equal(q->block, want[i].block);
        assert_int_equal(q->block_bytes, want[i].bytes);
        assert_true(fabs(q->bits_per_weight - want[i].bpw) < 1e-12);
        /* the dtype table agrees (ggml sizes live in base/dtype.c) */
        const nb_dtype_info *di = nb_dtype_get(want[i].t);
        assert_non_null(di);
        assert_int_equal(di->block, want[i].block);
        assert_int_equal(di->block_bytes, want[i].bytes);
        assert_ptr_equal(nb_qtype_by_name(q->name), q);
    }
    nb_dtype t;
    assert_true(nb_dtype_from_name("w4g64s", &t));
    assert_int_equal(t, NB_W4G64S);
    assert_null(nb_qtype_get(NB_F32));
    assert_null(nb_qtype_get((nb_dtype)5000));
    /* every entry is self-consistent */
    int n;
    const nb_qtype *all = nb_qtype_list(&n);
    assert_true(n >= 20);
    for (int i = 0; i < n; i++) {
        assert_non_null(all[i].to_float);
        assert_non_null(all[i].from_float);
        assert_ptr_equal(nb_qtype_get(all[i].type), &all[i]);
    }
    /* row support and fallbacks: aidreams' 172-wide FFN, qwen2's 704 */
    assert_false(nb_qtype_supports_row(NB_Q4_K, 704));
    assert_int_equal(nb_qtype_fallback(NB_Q4_K, 704), NB_Q5_0);
    assert_int_equal(nb_qtype_fallback(NB_Q6_K, 704), NB_Q8_0);
    assert_int_equal(nb_qtype_fallback(NB_Q4_K, 172), NB_F16);
    /* llama.cpp takes IQ4_NL here, which nibble lacks: Q4_0, same size */
    assert_int_equal(nb_qtype_fallback(NB_Q2_K, 704), NB_Q4_0);
    assert_int_equal(nb_qtype_fallback(NB_Q3_K, 704), NB_Q4_0);
    assert_int_equal(nb_qtype_fallback(NB_Q3_K, 172), NB_F16);
    assert_int_equal(nb_qtype_fallback(NB_W4G128, 192), NB_W4G64);
    assert_int_equal(nb_qtype_fallback(NB_W4G128, 96), NB_W4G32);
    assert_int_equal(nb_qtype_fallback(NB_NF4, 172), NB_F16);
    assert_int_equal(nb_qtype_fallback(NB_Q4_0, 256), NB_Q4_0);
    assert_false(nb_qtype_supports_row(NB_Q4_0, 0));
    uint64_t bytes;
    assert_true(nb_qtype_row_bytes(NB_W4G64, 256, &bytes));
    assert_int_equal(bytes, 4 * 36);
    assert_false(nb_qtype_row_bytes(NB_W4G64, 96, &bytes));
}

static void test_fp8(void **state) {
    (void)state;
    /* OCP FP8 v1.0 table values */
    assert_true(nb_e4m3_to_fp32(0x7e) == 448.0f);
    assert_true(isnan(nb_e4m3_to_fp32(0x7f)) && isnan(nb_e4m3_to_fp32(0xff)));
    assert_true(nb_e4m3_to_fp32(0x01) == ldexpf(1, -9));  /* min subnormal */
    assert_true(nb_e4m3_to_fp32(0x08) == ldexpf(1, -6));  /* min normal */
    assert_true(nb_e4m3_to_fp32(0x38) == 1.0f);
    assert_true(nb_e4m3_to_fp32(0xb8) == -1.0f);
    assert_true(nb_e5m2_to_fp32(0x7b) == 57344.0f);
    assert_true(isinf(nb_e5m2_to_fp32(0x7c)));
    assert_true(isnan(nb_e5m2_to_fp32(0x7d)));
    assert_true(nb_e5m2_to_fp32(0x01) == ldexpf(1, -16));
    assert_true(nb_e5m2_to_fp32(0x3c) == 1.0f);
    /* saturation, NaN, signed zero */
    assert_int_equal(nb_fp32_to_e4m3(1000.0f), 0x7e);
    assert_int_equal(nb_fp32_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(nb_fp32_to_e4m3(464.0f), 0x7e);
    assert_true(isnan(nb_e4m3_to_fp32(nb_fp32_to_e4m3(NAN))));
    assert_int_equal(nb_fp32_to_e4m3(-0.0f), 0x80);
    assert_int_equal(nb_fp32_to_e5m2(1e9f), 0x7b);
    assert_int_equal(nb_fp32_to_e5m2(INFINITY), 0x7b);
    assert_true(isnan(nb_e5m2_to_fp32(nb_fp32_to_e5m2(NAN))));
    /* round to nearest even at midpoints: 1.0625 between 1.0 (m=0) and 1.125 (m=1) */
    assert_int_equal(nb_fp32_to_e4m3(1.0625f), 0x38);
    assert_int_equal(nb_fp32_to_e4m3(1.1875f), 0x3a);
    assert_int_equal(nb_fp32_to_e4m3(ldexpf(1, -10)), 0x00); /* half the min subnormal: tie to 0 */
    assert_int_equal(nb_fp32_to_e4m3(ldexpf(3, -10)), 0x02); /* 1.5 min subnormals: tie to even 2 */
    assert_int_equal(nb_fp32_to_e5m2(1.125f), 0x3c);
    assert_int_equal(nb_fp32_to_e5m2(1.375f), 0x3e);
    /* every finite code round-trips; encoding is monotone between codes */
    for (int b = 0; b < 256; b++) {
        float v = nb_e4m3_to_fp32((uint8_t)b);
        if (!isnan(v)) assert_int_equal(nb_fp32_to_e4m3(v), b);
        float w = nb_e5m2_to_fp32((uint8_t)b);
        if (isfinite(w)) assert_int_equal(nb_fp32_to_e5m2(w), b);
    }
}

/* Quantize -> dequantize of gaussian rows (with a few outliers), checking the
 * relative RMS error against what the format's step size allows. */
static void test_roundtrip(void **state) {
    (void)state;
    /* Bounds: about 1.2x the uniform-quantizer error step/sqrt(12) relative to
     * the row's RMS, where an 8-sigma outlier sets the step of its group (so
     * per-row and large-group formats pay for it everywhere). A wrong nibble
     * order or scale gives errors of order 1. */
    struct { nb_dtype t; double max_rel_rmse; } cases[] = {
        {NB_Q8_0, 0.008}, {NB_Q4_0, 0.12}, {NB_Q4_1, 0.10}, {NB_Q5_0, 0.06}, {NB_Q5_1, 0.05},
        /* Q2_K: 4 levels from min to max of 16 (range ~3.5 sigma, step ~1.2
         * sigma, rms 0.34, 0.35 with the outlier's group); Q3_K: levels -4..3
         * times amax/4 of 16 (~2 sigma: step 0.5 sigma, rms 0.14, 0.165 with
         * the outlier's group, whose step is 2 sigma) */
        {NB_Q2_K, 0.42}, {NB_Q3_K, 0.20},
        {NB_Q4_K, 0.10}, {NB_Q5_K, 0.05}, {NB_Q6_K, 0.025}, {NB_Q8_K, 0.015},
        {NB_W8, 0.022}, {NB_Q8_T, 0.022},
        {NB_W4G32, 0.11}, {NB_W4G64, 0.12}, {NB_W4G128, 0.145},
        {NB_W4G32S, 0.12}, {NB_W4G64S, 0.14}, {NB_W4G128S, 0.165},
        {NB_NF4, 0.125}, {NB_FP8_E4M3, 0.035}, {NB_FP8_E5M2, 0.07},
    };
    const int64_t n = 1024;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *q = malloc(n * 2);
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const nb_qtype *qt = nb_qtype_get(cases[c].t);
        assert_non_null(qt);
        double worst = 0;
        for (int rep = 0; rep < 4; rep++) {
            for (int64_t i = 0; i < n; i++) x[i] = gauss() * 0.05f;
            x[rep * 37] = 0.4f; /* an outlier */
            if (rep == 3) memset(x + 256, 0, 256 * sizeof *x); /* all-zero blocks */
            qt->from_float(x, q, n);
            qt->to_float(q, y, n);
            double se = 0, sx = 0;
            for (int64_t i = 0; i < n; i++) {
                se += (double)(x[i] - y[i]) * (x[i] - y[i]);
                sx += (double)x[i] * x[i];
                if (rep == 3 && i >= 256 && i < 512 && !qt->per_row && cases[c].t != NB_Q4_1 &&
                    cases[c].t != NB_Q5_1 && cases[c].t != NB_Q4_K && cases[c].t != NB_Q5_K) {
                    assert_true(y[i] == 0.0f); /* zero blocks stay exactly zero */
                }
            }
            double rel = sqrt(se / sx);
            if (rel > worst) worst = rel;
        }
        printf("  %-9s relative rmse %.4f (bound %.4f)\n", qt->name, worst, cases[c].max_rel_rmse);
        if (worst > cases[c].max_rel_rmse) bad++;
    }
    if (bad) {
        free(x); free(y); free(q);
        fail_msg("%d formats above their error bound", bad);
    }
    /* per-element bounds where the format math gives one */
    for (int64_t i = 0; i < n; i++) x[i] = gauss();
    nb_qtype_get(NB_Q8_0)->from_float(x, q, n);
    nb_qtype_get(NB_Q8_0)->to_float(q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        for (int j = 0; j < 32; j++) {
            /* half a step, plus 127 steps' worth of the fp16 rounding of d */
            assert_true(fabsf(x[32 * b + j] - y[32 * b + j]) <= amax / 127 * (0.5f + 127.0f / 2048));
        }
    }
    nb_qtype_get(NB_FP8_E4M3)->from_float(x, q, n);
    nb_qtype_get(NB_FP8_E4M3)->to_float(q, y, n);
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    for (int64_t i = 0; i < n; i++) {
        /* 3 mantissa bits: half an ulp = 2^-4 relative; subnormal quantum 2^-9 of the scale */
        float tol = fabsf(x[i]) * 0.0625f * 1.0001f + amax / 448 * ldexpf(1, -10);
        assert_true(fabsf(x[i] - y[i]) <= tol);
    }
    nb_qtype_get(NB_NF4)->from_float(x, q, n);
    nb_qtype_get(NB_NF4)->to_float(q, y, n);
    for (int64_t b = 0; b < n / 64; b++) {
        float am = 0;
        for (int j = 0; j < 64; j++) am = fmaxf(am, fabsf(x[64 * b + j]));
        for (int j = 0; j < 64; j++) {
            /* widest gap between NF4 levels: -1 .. -0.6961928 */
            assert_true(fabsf(x[64 * b + j] - y[64 * b + j]) <= am * (1 - 0.6961928f) / 2 * 1.0001f);
        }
    }
    free(x);
    free(y);
    free(q);
}

/* ---- Q2_K / Q3_K hand-built blocks ----------------------------------------
 * There are no llama.cpp-quantized Q2_K / Q3_K files in shared/, so these
 * two formats are checked against the format definition (ggml-common.h's
 * block_q2_K / block_q3_K and dequantize_row_q2_K / _q3_K as documented):
 * the expected values below are computed here from that description, with
 * scales that are powers of two so every expected float is exact. */

/* 256 weights in 2 halves of 128; in a half, byte qs[32h + l] holds 4 weights
 * 32 apart: bits 2k..2k+1 are weight 128h + 32k + l. */
static int ref_q2_level(const uint8_t qs[64], int w) {
    int h = w / 128, k = (w % 128) / 32, l = w % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

static void test_q2_K_block(void **state) {
    (void)state;
    nb_block_q2_K b;
    b.d = nb_fp32_to_fp16(0.5f);
    b.dmin = nb_fp32_to_fp16(0.25f);
    for (int g = 0; g < 16; g++) b.scales[g] = (uint8_t)((g * 7 % 16) | ((15 - g) << 4));
    for (int j = 0; j < 64; j++) b.qs[j] = (uint8_t)(j * 37 + 11);
    float y[256];
    nb_qtype_get(NB_Q2_K)->to_float(&b, y, 256);
    for (int w = 0; w < 256; w++) {
        int g = w / 16, sc = (g * 7) % 16, m = 15 - g;
        float want = 0.5f * sc * ref_q2_level(b.qs, w) - 0.25f * m;
        if (y[w] != want) fail_msg("Q2_K weight %d: %g, want %g", w, y[w], want);
    }
    /* two blocks: the second one is read at byte 84 */
    nb_block_q2_K two[2];
    memset(two, 0, sizeof two);
    two[1] = b;
    float y2[512];
    nb_qtype_get(NB_Q2_K)->to_float(two, y2, 512);
    for (int w = 0; w < 256; w++) assert_true(y2[w] == 0.0f && y2[256 + w] == y[w]);

    /* values d*q exactly on the grid (each group spanning 0..3) come back
     * within the fp16 rounding of d = max_scale/15 */
    float x[256], z[256];
    for (int w = 0; w < 256; w++) x[w] = 0.125f * ((w % 4 + w / 16) % 4);
    nb_block_q2_K q;
    nb_qtype_get(NB_Q2_K)->from_float(x, &q, 256);
    nb_qtype_get(NB_Q2_K)->to_float(&q, z, 256);
    for (int w = 0; w < 256; w++) assert_true(fabsf(z[w] - x[w]) <= 3 * 0.125f / 1024);
    for (int g = 0; g < 16; g++) assert_int_equal(q.scales[g], 15); /* scale 15, min 0 */
    assert_true(nb_fp16_to_fp32(q.dmin) == 0.0f);
}

/* Q3_K: 16 signed 6-bit scales packed into 12 bytes: scale j's low 4 bits
 * are the low nibble of byte j (j < 8) or the high nibble of byte j - 8,
 * its high 2 bits are bits 2*(j/4).. of byte 8 + j%4; stored value s+32. */
static void pack_q3_scales(const int s[16], uint8_t out[12]) {
    memset(out, 0, 12);
    for (int j = 0; j < 16; j++) {
        int v = s[j] + 32;
        if (j < 8) out[j] |= (uint8_t)(v & 15);
        else out[j - 8] |= (uint8_t)((v & 15) << 4);
        out[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
    }
}

static void test_q3_K_block(void **state) {
    (void)state;
    nb_block_q3_K b;
    int s[16];
    for (int j = 0; j < 16; j++) s[j] = j * 5 % 64 - 32; /* -32 .. 31, both ends hit */
    s[3] = 31;
    pack_q3_scales(s, b.scales);
    b.d = nb_fp32_to_fp16(0.25f);
    for (int j = 0; j < 64; j++) b.qs[j] = (uint8_t)(j * 53 + 5);
    for (int j = 0; j < 32; j++) b.hmask[j] = (uint8_t)(j * 29 + 3);
    float y[256];
    nb_qtype_get(NB_Q3_K)->to_float(&b, y, 256);
    for (int w = 0; w < 256; w++) {
        /* the high bit of weight w is bit w/32 of hmask[w%32]; set = no -4 */
        int hbit = (b.hmask[w % 32] >> (w / 32)) & 1;
        int q = ref_q2_level(b.qs, w) - (hbit ? 0 : 4);
        float want = 0.25f * s[w / 16] * q;
        if (y[w] != want) fail_msg("Q3_K weight %d: %g, want %g", w, y[w], want);
    }
    /* a block already on a 3-bit grid with equal group scales round-trips
     * exactly: d = -max_scale/32 is a power of two, every stored scale -32 */
    float x[256], z[256];
    for (int w = 0; w < 256; w++) x[w] = 0.0625f * ((w * 3 + w / 16) % 8 - 4);
    nb_block_q3_K q;
    nb_qtype_get(NB_Q3_K)->from_float(x, &q, 256);
    nb_qtype_get(NB_Q3_K)->to_float(&q, z, 256);
    for (int w = 0; w < 256; w++)
        if (z[w] != x[w]) fail_msg("Q3_K grid weight %d: %g, want %g", w, z[w], x[w]);
    uint8_t want_sc[12];
    int all[16];
    for (int j = 0; j < 16; j++) all[j] = -32;
    pack_q3_scales(all, want_sc);
    assert_memory_equal(q.scales, want_sc, 12);
    assert_true(nb_fp16_to_fp32(q.d) == -0.0625f / 32); /* 1/iscale, iscale = -32/max_scale */
}

/* ---- byte equality with llama-quantize ------------------------------------ */

static float *f16_tensor(const nb_tensor *t, int64_t *n) {
    *n = nb_tensor_nelem(t);
    float *f = malloc((size_t)*n * sizeof *f);
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < *n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        f[i] = nb_fp16_to_fp32(h);
    }
    return f;
}

/* Quantizes `name` from the F16 file with our reference quantizer and compares
 * with the same tensor in `qfile` (which must have type `want`). Returns the
 * number of differing blocks (0 = byte-identical), or -1 if skipped. */
static long compare_with_file(nb_gguf *f16, const char *qpath, const char *name, nb_dtype want,
                              int64_t max_rows) {
    nb_gguf *qg = NULL;
    if (nb_gguf_open(qpath, &qg) != NB_OK) {
        fprintf(stderr, "open %s: %s\n", qpath, nb_errmsg());
        fail();
    }
    const nb_tensor *src = nb_gguf_find_tensor(f16, name);
    const nb_tensor *ref = nb_gguf_find_tensor(qg, name);
    assert_non_null(src);
    assert_non_null(ref);
    assert_int_equal(src->type, NB_F16);
    assert_int_equal(ref->type, want);
    const nb_qtype *qt = nb_qtype_get(want);
    int64_t n;
    float *x = f16_tensor(src, &n);
    int64_t ne0 = src->ne[0], rows = n / ne0;
    if (rows > max_rows) rows = max_rows;
    size_t row_bytes = (size_t)(ne0 / qt->block) * qt->block_bytes;
    uint8_t *q = malloc(row_bytes * (size_t)rows);
    qt->from_float(x, q, ne0 * rows);
    long diff = 0;
    int64_t nblk = ne0 * rows / qt->block;
    for (int64_t b = 0; b < nblk; b++) {
        if (memcmp(q + b * qt->block_bytes, (const uint8_t *)ref->data + b * qt->block_bytes, qt->block_bytes)) {
            diff++;
        }
    }
    /* and the file's blocks dequantize close to the F16 originals */
    float *y = malloc((size_t)(ne0 * rows) * sizeof *y);
    qt->to_float(ref->data, y, ne0 * rows);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < ne0 * rows; i++) {
        se += (double)(x[i] - y[i]) * (x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    printf("  %-24s %-5s %lld blocks, %ld differ; file dequant rel rmse %.4f\n", name, qt->name,
           (long long)nblk, diff, sqrt(se / sx));
    assert_true(sqrt(se / sx) < 0.15);
    free(y);
    free(q);
    free(x);
    nb_gguf_close(qg);
    return diff;
}

static void test_llama_files(void **state) {
    (void)state;
    const char *f16p = nb_test_shared("models/synth-llama-F16.gguf");
    if (!f16p) skip();
    const char *q8 = nb_test_shared("models/synth-llama-Q8_0.gguf");
    const char *q4 = nb_test_shared("models/synth-llama-Q4_0.gguf");
    const char *qk = nb_test_shared("models/synth-llama-Q4_K_M.gguf");
    if (!q8 || !q4 || !qk) skip();
    char q8b[4096], q4b[4096], qkb[4096];
    snprintf(q8b, sizeof q8b, "%s", q8);
    snprintf(q4b, sizeof q4b, "%s", q4);
    snprintf(qkb, sizeof qkb, "%s", qk);
    nb_gguf *f16 = NULL;
    if (nb_gguf_open(f16p, &f16) != NB_OK) {
        fprintf(stderr, "%s\n", nb_errmsg());
        fail();
    }
    assert_int_equal(compare_with_file(f16, q8b, "blk.0.attn_q.weight", NB_Q8_0, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, q8b, "blk.3.ffn_down.weight", NB_Q8_0, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, q4b, "blk.0.attn_q.weight", NB_Q4_0, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, q4b, "blk.1.ffn_up.weight", NB_Q4_0, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, qkb, "blk.0.attn_q.weight", NB_Q4_K, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, qkb, "blk.0.ffn_gate.weight", NB_Q4_K, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, qkb, "blk.2.attn_v.weight", NB_Q6_K, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, qkb, "blk.3.ffn_down.weight", NB_Q6_K, 1 << 30), 0);
    assert_int_equal(compare_with_file(f16, qkb, "output.weight", NB_Q6_K, 2048), 0);
    nb_gguf_close(f16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_fp8),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_q2_K_block),
        cmocka_unit_test(test_q3_K_block),
        cmocka_unit_test(test_llama_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
