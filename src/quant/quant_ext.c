/* Reference quantize/dequantize of nibble's own formats (layouts in
 * blocks.h and docs/quant.md): W8 / Q8_T (int8, one f32 scale per row
 * repeated in each 32-block), W4G32/64/128 (4-bit groups, fp16 scale + u8
 * zero point; the S variants store z = 8), NF4 (bitsandbytes levels, f32
 * absmax per 64) and FP8 E4M3 / E5M2 (OCP formats, f32 scale per 32).
 * All rounding is round-to-nearest-even unless stated. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "quant/qtypes.h"
#include "quant/quant_ref.h"

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ---- FP8 scalar conversions --------------------------------------------- */

/* Encodes |a| (finite, <= the format's max) as an unsigned code with `mb`
 * mantissa bits and exponent bias `bias`, round to nearest even. */
static uint8_t fp8_encode_abs(float a, int mb, int bias) {
    if (a == 0.0f) return 0;
    int e;
    (void)frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): exponent of a is e-1 */
    int ex = e - 1;
    if (ex < 1 - bias) ex = 1 - bias; /* subnormal range: fixed quantum */
    /* mantissa with its implicit bit, in units of 2^(ex - mb) */
    float m = rintf(ldexpf(a, mb - ex));
    int mi = (int)m;
    if (mi >= (2 << mb)) { /* rounded up to the next binade */
        mi >>= 1;
        ex++;
    }
    if (mi < (1 << mb)) return (uint8_t)mi; /* subnormal (exponent field 0) */
    return (uint8_t)(((ex + bias) << mb) | (mi - (1 << mb)));
}

uint8_t nb_fp32_to_e4m3(float x) {
    uint8_t s = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return s | 0x7f;
    float a = fabsf(x);
    if (a >= 448.0f) return s | 0x7e; /* saturate (infinities too) */
    return s | fp8_encode_abs(a, 3, 7);
}

float nb_e4m3_to_fp32(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v;
    if (e == 15 && m == 7) v = NAN;
    else if (e == 0) v = ldexpf((float)m, -9);
    else v = ldexpf((float)(8 + m), e - 10);
    return (b & 0x80) ? -v : v;
}

uint8_t nb_fp32_to_e5m2(float x) {
    uint8_t s = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return s | 0x7f;
    float a = fabsf(x);
    if (a >= 57344.0f) return s | 0x7b; /* saturate (infinities too) */
    return s | fp8_encode_abs(a, 2, 15);
}

float nb_e5m2_to_fp32(uint8_t b) {
    /* E5M2 is the top byte of an IEEE fp16 */
    return nb_fp16_to_fp32((uint16_t)(b << 8));
}

/* ---- W8 / Q8_T: one scale per row ---------------------------------------- */

static void quant_int8_row(const float *x, nb_block_w8 *y, int64_t n) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++) {
        y[i].d = d;
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)nb_nearest_int(x[32 * i + j] * id);
    }
}

static void dequant_int8(const nb_block_w8 *x, float *y, int64_t n) {
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        for (int j = 0; j < 32; j++) y[j] = x[i].d * x[i].qs[j];
    }
}

void nb_quant_w8(const float *src, void *dst, int64_t n) { quant_int8_row(src, dst, n); }
void nb_dequant_w8(const void *src, float *dst, int64_t n) { dequant_int8(src, dst, n); }
void nb_quant_q8_T(const float *src, void *dst, int64_t n) { quant_int8_row(src, dst, n); }
void nb_dequant_q8_T(const void *src, float *dst, int64_t n) { dequant_int8(src, dst, n); }

/* ---- W4 groups ------------------------------------------------------------ */

void nb_quant_w4(const float *x, void *dst, int64_t n, int group, int symmetric) {
    uint8_t *out = dst;
    const size_t bb = NB_W4_BLOCK_BYTES(group);
    NB_QBLOCKS(n, group);
    for (int64_t i = 0; i < n / group; i++, x += group, out += bb) {
        float d;
        int z;
        if (symmetric) {
            /* like Q4_0: the largest-magnitude value maps exactly to level -8 */
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < group; j++) {
                if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
            }
            d = max / -8;
            z = 8;
        } else {
            /* min/max range widened to include 0 (GPTQ/AWQ RTN convention) */
            float min = 0.0f, max = 0.0f;
            for (int j = 0; j < group; j++) {
                min = fminf(min, x[j]);
                max = fmaxf(max, x[j]);
            }
            d = (max - min) / 15;
            float dq = nb_fp16_to_fp32(nb_fp32_to_fp16(d));
            z = dq > 0 ? imax(0, imin(15, nb_nearest_int(-min / dq))) : 0;
        }
        nb_half dh = nb_fp32_to_fp16(d);
        float dr = nb_fp16_to_fp32(dh);
        float id = dr ? 1.0f / dr : 0.0f;
        memcpy(out, &dh, 2);
        out[2] = (uint8_t)z;
        out[3] = 0;
        uint8_t *qs = out + 4;
        for (int c = 0; c < group / 32; c++) {
            for (int j = 0; j < 16; j++) {
                int a = imax(0, imin(15, nb_nearest_int(x[32 * c + j] * id) + z));
                int b = imax(0, imin(15, nb_nearest_int(x[32 * c + j + 16] * id) + z));
                qs[16 * c + j] = (uint8_t)(a | (b << 4));
            }
        }
    }
}

void nb_dequant_w4(const void *src, float *y, int64_t n, int group) {
    const uint8_t *in = src;
    const size_t bb = NB_W4_BLOCK_BYTES(group);
    NB_QBLOCKS(n, group);
    for (int64_t i = 0; i < n / group; i++, in += bb) {
        nb_half dh;
        memcpy(&dh, in, 2);
        const float d = nb_fp16_to_fp32(dh);
        const int z = in[2];
        const uint8_t *qs = in + 4;
        for (int c = 0; c < group / 32; c++, y += 32) {
            for (int j = 0; j < 16; j++) {
                y[j] = d * ((qs[16 * c + j] & 15) - z);
                y[j + 16] = d * ((qs[16 * c + j] >> 4) - z);
            }
        }
    }
}

#define W4_PAIR(G)                                                                               \
    void nb_quant_w4g##G(const float *s, void *d, int64_t n) { nb_quant_w4(s, d, n, G, 0); }     \
    void nb_quant_w4g##G##s(const float *s, void *d, int64_t n) { nb_quant_w4(s, d, n, G, 1); }  \
    void nb_dequant_w4g##G(const void *s, float *d, int64_t n) { nb_dequant_w4(s, d, n, G); }    \
    void nb_dequant_w4g##G##s(const void *s, float *d, int64_t n) { nb_dequant_w4(s, d, n, G); }
W4_PAIR(32)
W4_PAIR(64)
W4_PAIR(128)

/* ---- NF4 ------------------------------------------------------------------ */

/* bitsandbytes' NF4 code book (QLoRA paper, appendix E). */
const float nb_nf4_levels[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

/* Nearest level; a value exactly between two levels takes the upper one
 * (bitsandbytes compares x > midpoint). */
static int nf4_index(float v) {
    int idx = 0;
    for (int k = 1; k < 16; k++) {
        if (v > 0.5f * (nb_nf4_levels[k - 1] + nb_nf4_levels[k])) idx = k;
    }
    return idx;
}

void nb_quant_nf4(const float *x, void *dst, int64_t n) {
    nb_block_nf4 *y = dst;
    NB_QBLOCKS(n, 64);
    for (int64_t i = 0; i < n / 64; i++, x += 64) {
        float amax = 0.0f;
        for (int j = 0; j < 64; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax ? 1.0f / amax : 0.0f;
        y[i].absmax = amax;
        for (int j = 0; j < 32; j++) {
            y[i].qs[j] = (uint8_t)(nf4_index(x[j] * id) | (nf4_index(x[j + 32] * id) << 4));
        }
    }
}

void nb_dequant_nf4(const void *src, float *y, int64_t n) {
    const nb_block_nf4 *x = src;
    NB_QBLOCKS(n, 64);
    for (int64_t i = 0; i < n / 64; i++, y += 64) {
        for (int j = 0; j < 32; j++) {
            y[j] = x[i].absmax * nb_nf4_levels[x[i].qs[j] & 15];
            y[j + 32] = x[i].absmax * nb_nf4_levels[x[i].qs[j] >> 4];
        }
    }
}

/* ---- FP8 blocks ------------------------------------------------------------ */

static void fp8_blocks(bool e4m3, const float *x, nb_block_fp8 *y, int64_t n, float d) {
    const float id = d ? 1.0f / d : 0.0f;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        y[i].d = d;
        for (int j = 0; j < 32; j++) {
            float v = x[j] * id;
            y[i].f8[j] = e4m3 ? nb_fp32_to_e4m3(v) : nb_fp32_to_e5m2(v);
        }
    }
}

static float row_amax(const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return isfinite(amax) ? amax : 0.0f;
}

void nb_quant_fp8_e4m3(const float *x, void *dst, int64_t n) {
    fp8_blocks(true, x, dst, n, row_amax(x, n) / 448.0f);
}

void nb_quant_fp8_e5m2(const float *x, void *dst, int64_t n) {
    fp8_blocks(false, x, dst, n, row_amax(x, n) / 57344.0f);
}

void nb_quantize_fp8_scaled(nb_dtype t, const float *src, void *dst, int64_t n, float scale) {
    fp8_blocks(t == NB_FP8_E4M3, src, dst, n, scale);
}

void nb_dequant_fp8_e4m3(const void *src, float *y, int64_t n) {
    const nb_block_fp8 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        for (int j = 0; j < 32; j++) y[j] = x[i].d * nb_e4m3_to_fp32(x[i].f8[j]);
    }
}

void nb_dequant_fp8_e5m2(const void *src, float *y, int64_t n) {
    const nb_block_fp8 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        for (int j = 0; j < 32; j++) y[j] = x[i].d * nb_e5m2_to_fp32(x[i].f8[j]);
    }
}
