/* Scalar reference dot products (the definitions the SIMD kernels are tested
 * against). Each weight block's integer part is summed exactly in int32, then
 * scaled in float and accumulated block by block in row order:
 *   legacy / W4 / W8 (x Q8_0 or Q8_T, 32 weights per activation block):
 *       acc += dw*da * sum(q*a) [+ m*da * sum(a)]   (offsets folded into q)
 *   Q4_K / Q5_K (x Q8_K): acc += dw*da * sum_j sc_j*sum(q*a)_j
 *                              - dminw*da * sum_j m_j*sum(a)_j
 *   Q2_K (x Q8_K): acc += dw*da * sum_g sc_g*sum(q*a)_g - dminw*da * sum_g m_g*bsum_g
 *       (16 groups of 16, 4-bit sc_g / m_g)
 *   Q3_K (x Q8_K): acc += dw*da * sum_g (sc_g-32) * sum((q2+4h-4)*a)_g
 *   Q6_K (x Q8_K): acc += dw*da * sum_g sc_g * sum((q-32)*a)_g
 *   NF4 / FP8 (x F32): acc += scale * sum(level(q) * x) in float. */
#include <string.h>

#include "base/half.h"
#include "kernels/qdot.h"
#include "base/blocks.h"
#include "quant/qtypes.h"
#include "quant/quant_ref.h"

#define H2F nb_fp16_to_fp32

static void dot_q4_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q4_0 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += ((x[i].qs[j] & 15) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        acc += H2F(x[i].d) * H2F(y[i].d) * (float)s;
    }
    *out = acc;
}

static void dot_q4_1(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q4_1 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int s = 0, sa = 0;
        for (int j = 0; j < 16; j++) {
            s += (x[i].qs[j] & 15) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
            sa += y[i].qs[j] + y[i].qs[j + 16];
        }
        const float da = H2F(y[i].d);
        acc += H2F(x[i].d) * da * (float)s + H2F(x[i].m) * da * (float)sa;
    }
    *out = acc;
}

static inline void q5_unpack(const uint8_t qh4[4], const uint8_t qs[16], int q[32]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
    }
}

static void dot_q5_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q5_0 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int q[32], s = 0;
        q5_unpack(x[i].qh, x[i].qs, q);
        for (int j = 0; j < 32; j++) s += (q[j] - 16) * y[i].qs[j];
        acc += H2F(x[i].d) * H2F(y[i].d) * (float)s;
    }
    *out = acc;
}

static void dot_q5_1(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q5_1 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int q[32], s = 0, sa = 0;
        q5_unpack(x[i].qh, x[i].qs, q);
        for (int j = 0; j < 32; j++) {
            s += q[j] * y[i].qs[j];
            sa += y[i].qs[j];
        }
        const float da = H2F(y[i].d);
        acc += H2F(x[i].d) * da * (float)s + H2F(x[i].m) * da * (float)sa;
    }
    *out = acc;
}

static void dot_q8_0(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q8_0 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += x[i].qs[j] * y[i].qs[j];
        acc += H2F(x[i].d) * H2F(y[i].d) * (float)s;
    }
    *out = acc;
}

/* W8 x Q8_0 (W8A16) */
static void dot_w8(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_w8 *x = w;
    const nb_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += x[i].qs[j] * y[i].qs[j];
        acc += x[i].d * H2F(y[i].d) * (float)s;
    }
    *out = acc;
}

/* W8 x Q8_T (W8A8) */
static void dot_w8a8(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_w8 *x = w;
    const nb_block_w8 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += x[i].qs[j] * y[i].qs[j];
        acc += x[i].d * y[i].d * (float)s;
    }
    *out = acc;
}

/* W4 groups x Q8_0: each 32-weight chunk of a group meets one Q8_0 block. */
static void dot_w4(int64_t n, const void *w, const void *a, float *out, int group) {
    const uint8_t *x = w;
    const nb_block_q8_0 *y = a;
    const size_t bb = NB_W4_BLOCK_BYTES(group);
    float acc = 0;
    for (int64_t g = 0; g < n / group; g++, x += bb) {
        nb_half dh;
        memcpy(&dh, x, 2);
        const float d = H2F(dh);
        const int z = x[2];
        for (int c = 0; c < group / 32; c++, y++) {
            const uint8_t *qs = x + 4 + 16 * c;
            int s = 0;
            for (int j = 0; j < 16; j++) s += ((qs[j] & 15) - z) * y->qs[j] + ((qs[j] >> 4) - z) * y->qs[j + 16];
            acc += d * H2F(y->d) * (float)s;
        }
    }
    *out = acc;
}
static void dot_w4g32(int64_t n, const void *w, const void *a, float *o) { dot_w4(n, w, a, o, 32); }
static void dot_w4g64(int64_t n, const void *w, const void *a, float *o) { dot_w4(n, w, a, o, 64); }
static void dot_w4g128(int64_t n, const void *w, const void *a, float *o) { dot_w4(n, w, a, o, 128); }

/* Q2_K x Q8_K: weight w = 128h + 32k + l has 2-bit level
 * (qs[32h + l] >> 2k) & 3 and group w / 16 (see quant_ggml.c). */
static inline int q2_level(const uint8_t *qs, int w) { return (qs[32 * (w / 128) + w % 32] >> (2 * ((w / 32) % 4))) & 3; }

static void dot_q2_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q2_K *x = w;
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0, msum = 0;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 16 * g; l < 16 * g + 16; l++) s += q2_level(x[i].qs, l) * y[i].qs[l];
            isum += (x[i].scales[g] & 0xF) * s;
            msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
        }
        acc += H2F(x[i].d) * y[i].d * (float)isum - H2F(x[i].dmin) * y[i].d * (float)msum;
    }
    *out = acc;
}

/* Q3_K x Q8_K: level q2 + 4*hbit - 4 (hbit = hmask[w % 32] bit w / 32),
 * signed 6-bit group scale (stored - 32). */
static void dot_q3_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q3_K *x = w;
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            const uint8_t *sc = x[i].scales;
            int lo = g < 8 ? sc[g] & 0xF : sc[g - 8] >> 4;
            int s6 = (lo | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
            int s = 0;
            for (int l = 16 * g; l < 16 * g + 16; l++) {
                int q = q2_level(x[i].qs, l) + 4 * ((x[i].hmask[l % 32] >> (l / 32)) & 1) - 4;
                s += q * y[i].qs[l];
            }
            isum += s6 * s;
        }
        acc += H2F(x[i].d) * y[i].d * (float)isum;
    }
    *out = acc;
}

static inline void k4_scale_min(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K / Q5_K share everything but the 5th bit. */
static void dot_q45_K(int64_t n, const void *w, const void *a, float *out, int five) {
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *scales, *qs, *qh = NULL;
        float dw, dmw;
        if (five) {
            const nb_block_q5_K *x = (const nb_block_q5_K *)w + i;
            scales = x->scales; qs = x->qs; qh = x->qh;
            dw = H2F(x->d); dmw = H2F(x->dmin);
        } else {
            const nb_block_q4_K *x = (const nb_block_q4_K *)w + i;
            scales = x->scales; qs = x->qs;
            dw = H2F(x->d); dmw = H2F(x->dmin);
        }
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(j, scales, &sc, &m);
            const uint8_t *q = qs + 32 * (j / 2);
            const int8_t *ay = y[i].qs + 32 * j;
            int s = 0;
            for (int l = 0; l < 32; l++) {
                int v = (j & 1) ? (q[l] >> 4) : (q[l] & 15);
                if (qh && (qh[l] >> j) & 1) v += 16;
                s += v * ay[l];
            }
            isum += sc * s;
            msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        acc += dw * y[i].d * (float)isum - dmw * y[i].d * (float)msum;
    }
    *out = acc;
}
static void dot_q4_K(int64_t n, const void *w, const void *a, float *o) { dot_q45_K(n, w, a, o, 0); }
static void dot_q5_K(int64_t n, const void *w, const void *a, float *o) { dot_q45_K(n, w, a, o, 1); }

static void dot_q6_K(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q6_K *x = w;
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[i].ql + 64 * half, *qh = x[i].qh + 32 * half;
            const int8_t *sc = x[i].scales + 8 * half, *ay = y[i].qs + 128 * half;
            for (int k = 0; k < 4; k++) {
                for (int h = 0; h < 2; h++) { /* 16 weights per scale */
                    int s = 0;
                    for (int l = 16 * h; l < 16 * h + 16; l++) {
                        int lo = (k & 1) ? ql[l + 32] : ql[l];
                        lo = (k & 2) ? lo >> 4 : lo & 15;
                        int q = lo | (((qh[l] >> (2 * k)) & 3) << 4);
                        s += (q - 32) * ay[32 * k + l];
                    }
                    isum += sc[2 * k + h] * s;
                }
            }
        }
        acc += H2F(x[i].d) * y[i].d * (float)isum;
    }
    *out = acc;
}

static void dot_nf4(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_nf4 *x = w;
    const float *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 64; i++, y += 64) {
        float s = 0;
        for (int j = 0; j < 32; j++) {
            s += nb_nf4_levels[x[i].qs[j] & 15] * y[j] + nb_nf4_levels[x[i].qs[j] >> 4] * y[j + 32];
        }
        acc += x[i].absmax * s;
    }
    *out = acc;
}

static void dot_fp8(int64_t n, const void *w, const void *a, float *out, int e4m3) {
    const nb_block_fp8 *x = w;
    const float *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float s = 0;
        for (int j = 0; j < 32; j++) {
            s += (e4m3 ? nb_e4m3_to_fp32(x[i].f8[j]) : nb_e5m2_to_fp32(x[i].f8[j])) * y[j];
        }
        acc += x[i].d * s;
    }
    *out = acc;
}
static void dot_e4m3(int64_t n, const void *w, const void *a, float *o) { dot_fp8(n, w, a, o, 1); }
static void dot_e5m2(int64_t n, const void *w, const void *a, float *o) { dot_fp8(n, w, a, o, 0); }

static void act_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof *x); }

#define Q8 NB_Q8_0, nb_quant_q8_0_act
#define QK NB_Q8_K, nb_quant_q8_K
#define QT NB_Q8_T, nb_quant_q8_T
#define F32 NB_F32, act_f32

static const struct { nb_dtype type; nb_qdot qd; } tab[] = {
    {NB_Q4_0, {Q8, dot_q4_0, NULL, "scalar", NULL}},
    {NB_Q4_1, {Q8, dot_q4_1, NULL, "scalar", NULL}},
    {NB_Q5_0, {Q8, dot_q5_0, NULL, "scalar", NULL}},
    {NB_Q5_1, {Q8, dot_q5_1, NULL, "scalar", NULL}},
    {NB_Q8_0, {Q8, dot_q8_0, NULL, "scalar", NULL}},
    {NB_Q2_K, {QK, dot_q2_K, NULL, "scalar", NULL}},
    {NB_Q3_K, {QK, dot_q3_K, NULL, "scalar", NULL}},
    {NB_Q4_K, {QK, dot_q4_K, NULL, "scalar", NULL}},
    {NB_Q5_K, {QK, dot_q5_K, NULL, "scalar", NULL}},
    {NB_Q6_K, {QK, dot_q6_K, NULL, "scalar", NULL}},
    {NB_W8, {Q8, dot_w8, NULL, "scalar", NULL}},
    {NB_W8A8, {QT, dot_w8a8, NULL, "scalar", NULL}},
    {NB_W4G32, {Q8, dot_w4g32, NULL, "scalar", NULL}},
    {NB_W4G64, {Q8, dot_w4g64, NULL, "scalar", NULL}},
    {NB_W4G128, {Q8, dot_w4g128, NULL, "scalar", NULL}},
    {NB_W4G32S, {Q8, dot_w4g32, NULL, "scalar", NULL}},
    {NB_W4G64S, {Q8, dot_w4g64, NULL, "scalar", NULL}},
    {NB_W4G128S, {Q8, dot_w4g128, NULL, "scalar", NULL}},
    {NB_NF4, {F32, dot_nf4, NULL, "scalar", NULL}},
    {NB_FP8_E4M3, {F32, dot_e4m3, NULL, "scalar", NULL}},
    {NB_FP8_E5M2, {F32, dot_e5m2, NULL, "scalar", NULL}},
};

const nb_qdot *nb_qdot_ref(nb_dtype t) {
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (tab[i].type == t) return &tab[i].qd;
    }
    return NULL;
}
