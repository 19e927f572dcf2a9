/* Repacking of Q4_0 / Q8_0 / Q4_K / Q6_K / W8 / W4G* rows, their scalar reference
 * kernels and dequantization, and the activation pack of the int8 GEMMs
 * (layouts in repack.h). */
#include "kernels/repack.h"

#include "kernels/dispatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/status.h"
#include "base/blocks.h"

_Static_assert(sizeof(nb_block_q8_K) == 292, "Q8_KP has Q8_K's size (base/dtype.c)");

nb_dtype nb_repack_target(nb_dtype t) {
    int s = nb_dispatch_slot(t);
    return s < 0 ? t : nb_dispatch_default()->repack_to[s];
}

nb_dtype nb_repack_layout(nb_dtype t) {
    if (t == NB_Q4_0) return NB_Q4_0R;
    if (t == NB_Q8_0) return NB_Q8_0R;
    if (t == NB_Q4_K) return NB_Q4_KR;
    if (t == NB_Q6_K) return NB_Q6_KR;
    if (t == NB_W8) return NB_W8R;
    if (t == NB_W4G32 || t == NB_W4G32S) return NB_W4G32R;
    if (t == NB_W4G64 || t == NB_W4G64S) return NB_W4G64R;
    if (t == NB_W4G128 || t == NB_W4G128S) return NB_W4G128R;
    return t;
}

nb_dtype nb_repack_lanes(nb_dtype t) {
    switch (t) {
    case NB_Q4_0R: return NB_Q4_0L;
    case NB_W4G32R: return NB_W4G32L;
    case NB_W4G64R: return NB_W4G64L;
    case NB_W4G128R: return NB_W4G128L;
    case NB_Q8_0R: return NB_Q8_0L;
    case NB_W8R: return NB_W8L;
    default: return t;
    }
}

/* The group of a W4G* type or its repacked forms; 0 for any other type. */
static int w4_group(nb_dtype t) {
    switch (t) {
    case NB_W4G32: case NB_W4G32S: case NB_W4G32R: case NB_W4G32L: return 32;
    case NB_W4G64: case NB_W4G64S: case NB_W4G64R: case NB_W4G64L: return 64;
    case NB_W4G128: case NB_W4G128S: case NB_W4G128R: case NB_W4G128L: return 128;
    default: return 0;
    }
}

/* Lane order (repack.h) of weight x = 32k + e of a 4-block group (block k):
 * its slot 32j + p, j the vector, p the byte in it. */
static int lane_slot(int x) {
    const int k = x / 32, e = x % 32;
    return 32 * (e % 16 / 4) + 16 * (e / 16) + 4 * k + e % 4;
}

/* Where byte e of block i sits in the 8-bit quants of a row of nb blocks:
 * in order, or in lane order (Q8_0L, W8L weights; Q8_0PL activations)
 * except the last nb % 4 blocks. */
static int64_t quant_index(int64_t nb, int64_t i, int e, bool lanes) {
    if (!lanes || i >= nb / 4 * 4) return i * 32 + e;
    return (i / 4) * 128 + lane_slot((int)(i % 4) * 32 + e);
}

/* Block i's 16 bytes of nibbles (Q4_0's order) in a row of Q4_0 blocks
 * (group 0) or of W4G groups of `group` weights (4-byte header each). */
static const uint8_t *q4_block_qs(const uint8_t *row, int64_t i, int group) {
    if (!group) return row + i * 18 + 2;
    return row + i * 32 / group * NB_W4_BLOCK_BYTES(group) + 4 + i % (group / 32) * 16;
}

/* The nibbles of nb blocks into Q4_0R's order at q (repack.h): per 4
 * blocks (128 weights, w[] in Q4_0L's lane order) 64 bytes, byte j = w[j] |
 * w[64+j] << 4; the last nb % 4 blocks as they are. */
static void planar_nibbles(const uint8_t *row, int64_t nb, int group, bool lanes, uint8_t *q) {
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        uint8_t w[128];
        for (int k = 0; k < 4; k++) {
            const uint8_t *b = q4_block_qs(row, i + k, group);
            for (int j = 0; j < 16; j++) {
                const int x = 32 * k + j;
                w[lanes ? lane_slot(x) : x] = b[j] & 15;
                w[lanes ? lane_slot(x + 16) : x + 16] = b[j] >> 4;
            }
        }
        for (int j = 0; j < 64; j++) q[i * 16 + j] = (uint8_t)(w[j] | w[64 + j] << 4);
    }
    for (; i < nb; i++) memcpy(q + i * 16, q4_block_qs(row, i, group), 16);
}

/* Q4_K's 6-bit scale and min of sub-block j (packed as in ggml) */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Lane order of a K super-block (repack.h): position 64k + 4l + c holds
 * weight 16l + 4k + c, so lane l of every 64-byte vector k covers the
 * 16-weight group l. */
static int lane_pos(int e) { return 64 * ((e / 4) % 4) + 4 * (e / 16) + e % 4; }

static void repack_q4_k(const nb_block_q4_K *b, nb_block_q4_kr *o) {
    o->d = b->d;
    o->dmin = b->dmin;
    for (int j = 0; j < 8; j++) k4_scale_min(j, b->scales, &o->sc[j], &o->m[j]);
    uint8_t v[256]; /* the weights (0..15) in lane order */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            v[lane_pos(64 * c + l)] = b->qs[32 * c + l] & 15;
            v[lane_pos(64 * c + 32 + l)] = b->qs[32 * c + l] >> 4;
        }
    for (int p = 0; p < 2; p++) /* vectors 2p (low nibbles) and 2p+1 (high) */
        for (int i = 0; i < 64; i++) o->qs[64 * p + i] = (uint8_t)(v[128 * p + i] | v[128 * p + 64 + i] << 4);
}

static void repack_q6_k(const nb_block_q6_K *b, nb_block_q6_kr *o) {
    o->d = b->d;
    memcpy(o->sc, b->scales, 16);
    uint8_t v[256]; /* unsigned 0..63 (w = d*sc*(q-32)) in lane order */
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            v[lane_pos(128 * h + l)] = (uint8_t)((ql[l] & 15) | ((qh[l] & 3) << 4));
            v[lane_pos(128 * h + l + 32)] = (uint8_t)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
            v[lane_pos(128 * h + l + 64)] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            v[lane_pos(128 * h + l + 96)] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 64; i++) o->ql[64 * p + i] = (uint8_t)((v[128 * p + i] & 15) | (v[128 * p + 64 + i] & 15) << 4);
    for (int i = 0; i < 64; i++)
        o->qh[i] = (uint8_t)((v[i] >> 4) | (v[64 + i] >> 4) << 2 | (v[128 + i] >> 4) << 4 | (v[192 + i] >> 4) << 6);
}

/* Weight e (0..255) of a repacked K block, unsigned: Q4_KR 0..15, Q6_KR 0..63. */
static int q4_kr_q(const nb_block_q4_kr *b, int e) {
    int pos = lane_pos(e), k = pos / 64;
    uint8_t byte = b->qs[64 * (k / 2) + pos % 64];
    return k % 2 ? byte >> 4 : byte & 15;
}

static int q6_kr_q(const nb_block_q6_kr *b, int e) {
    int pos = lane_pos(e), k = pos / 64;
    uint8_t lo = b->ql[64 * (k / 2) + pos % 64];
    return (k % 2 ? lo >> 4 : lo & 15) | ((b->qh[pos % 64] >> (2 * k)) & 3) << 4;
}

/* Q8_K with each super-block's qs in lane order: the activations of the
 * Q4_KR / Q6_KR decode kernels (d and the per-16 bsums as in Q8_K). */
void nb_q8_kp_quantize_ref(const float *x, void *dst, int64_t n) {
    nb_quantize_row_q8_K_ref(x, dst, n);
    for (int64_t i = 0; i < n / 256; i++) {
        nb_block_q8_K *y = (nb_block_q8_K *)dst + i;
        int8_t t[256];
        for (int e = 0; e < 256; e++) t[lane_pos(e)] = y->qs[e];
        memcpy(y->qs, t, 256);
    }
}

static void q8_kp_to_float(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++) {
        const nb_block_q8_K *y = (const nb_block_q8_K *)src + i;
        for (int e = 0; e < 256; e++) dst[256 * i + e] = y->d * (float)y->qs[lane_pos(e)];
    }
}

static bool lane_type(nb_dtype t) {
    return t == NB_Q4_0L || t == NB_W4G32L || t == NB_W4G64L || t == NB_W4G128L || t == NB_Q8_0L || t == NB_W8L;
}

void nb_repack_rows(nb_dtype from, const void *src, void *dst, int64_t rows, int64_t K) {
    nb_repack_rows_to(from, nb_repack_target(from), src, dst, rows, K);
}

void nb_repack_rows_to(nb_dtype from, nb_dtype to, const void *src, void *dst, int64_t rows, int64_t K) {
    if (from == NB_Q4_K || from == NB_Q6_K) {
        int64_t n = rows * (K / 256);
        for (int64_t i = 0; i < n; i++) {
            if (from == NB_Q4_K) repack_q4_k((const nb_block_q4_K *)src + i, (nb_block_q4_kr *)dst + i);
            else repack_q6_k((const nb_block_q6_K *)src + i, (nb_block_q6_kr *)dst + i);
        }
        return;
    }
    int64_t nb = K / 32;
    const int group = w4_group(from);
    const bool lanes = lane_type(to);
    for (int64_t r = 0; r < rows; r++) {
        if (group) { /* d, then z as fp16, then the nibbles */
            const int64_t ng = K / group, bb = NB_W4_BLOCK_BYTES(group);
            const uint8_t *row = (const uint8_t *)src + r * ng * bb;
            uint8_t *d = (uint8_t *)dst + r * ng * bb;
            for (int64_t g = 0; g < ng; g++) {
                uint16_t z = nb_fp32_to_fp16((float)row[g * bb + 2]);
                memcpy(d + g * 2, row + g * bb, 2);
                memcpy(d + ng * 2 + g * 2, &z, 2);
            }
            planar_nibbles(row, nb, group, lanes, d + ng * 4);
        } else if (from == NB_Q4_0) {
            const nb_block_q4_0 *b = (const nb_block_q4_0 *)src + r * nb;
            uint8_t *d = (uint8_t *)dst + r * nb * 18;
            for (int64_t i = 0; i < nb; i++) memcpy(d + i * 2, &b[i].d, 2);
            planar_nibbles((const uint8_t *)b, nb, 0, lanes, d + nb * 2);
        } else if (from == NB_Q8_0 || from == NB_W8) { /* the scales (fp16 / f32), then q + 128 */
            const int sb = from == NB_W8 ? 4 : 2;
            const uint8_t *b = (const uint8_t *)src + r * nb * (sb + 32);
            uint8_t *d = (uint8_t *)dst + r * nb * (sb + 32), *q = d + nb * sb;
            for (int64_t i = 0; i < nb; i++) {
                const uint8_t *blk = b + i * (sb + 32);
                for (int j = 0; j < 32; j++) q[quant_index(nb, i, j, lanes)] = (uint8_t)((int8_t)blk[sb + j] + 128);
                memcpy(d + i * sb, blk, (size_t)sb);
            }
        }
    }
}

static float getf(const void *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

static float geth(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return nb_fp16_to_fp32(h);
}

/* Nibble e (0..31) of block i of a Q4_0R (Q4_0L: lanes) row's quants (nb blocks). */
static int q4_0r_q(const uint8_t *q, int64_t nb, int64_t i, int e, bool lanes) {
    if (i >= nb / 4 * 4) return e < 16 ? q[i * 16 + e] & 15 : q[i * 16 + e - 16] >> 4;
    int64_t x = (i % 4) * 32 + e; /* weight within the group of 4 blocks */
    if (lanes) x = lane_slot((int)x);
    const uint8_t *g = q + (i / 4) * 64;
    return x < 64 ? g[x] & 15 : g[x - 64] >> 4;
}

/* Activation e of block i of a Q8_0P (Q8_0PL: lanes) row of nb blocks. */
static int q8_0p_q(const int8_t *x, int64_t nb, int64_t i, int e, bool lanes) { return x[quant_index(nb, i, e, lanes)]; }

/* A Q4_0R (group 0) or W4G*R row: its quants, and block i's scale and
 * the offset its nibbles take (8, or the group's zero point). */
typedef struct {
    const uint8_t *q, *d, *z;
    int64_t nb;
    int group;
    bool lanes;
} q4_row;

static q4_row q4_row_at(const void *w, int64_t n, int group, bool lanes) {
    q4_row r = {.d = w, .nb = n / 32, .group = group, .lanes = lanes};
    int64_t ng = group ? n / group : r.nb;
    r.z = r.d + ng * 2;
    r.q = group ? r.z + ng * 2 : r.z;
    return r;
}
static float q4_row_scale(const q4_row *r, int64_t i) { return geth(r->d + (r->group ? i * 32 / r->group : i) * 2); }
static int q4_row_zero(const q4_row *r, int64_t i) { return r->group ? (int)geth(r->z + i * 32 / r->group * 2) : 8; }

/* Four blocks at a time from their 64 bytes, in loops the compiler
 * vectorises (the AVX2 prefill's dequantizing GEMM runs this). */
static void q4_planar_to_float(const void *src, float *dst, int64_t n, int group) {
    q4_row r = q4_row_at(src, n, group, false);
    int64_t i = 0;
    for (; i + 4 <= r.nb; i += 4) {
        float s[4], z[4];
        for (int k = 0; k < 4; k++) {
            s[k] = q4_row_scale(&r, i + k);
            z[k] = (float)q4_row_zero(&r, i + k);
        }
        const uint8_t *b = r.q + i * 16; /* block k: bytes 32(k%2).., low nibbles for k < 2 */
        float *o = dst + i * 32;
        for (int e = 0; e < 32; e++) {
            o[e] = s[0] * ((float)(b[e] & 15) - z[0]);
            o[32 + e] = s[1] * ((float)(b[32 + e] & 15) - z[1]);
            o[64 + e] = s[2] * ((float)(b[e] >> 4) - z[2]);
            o[96 + e] = s[3] * ((float)(b[32 + e] >> 4) - z[3]);
        }
    }
    for (; i < r.nb; i++) {
        const float s = q4_row_scale(&r, i), z = (float)q4_row_zero(&r, i);
        const uint8_t *b = r.q + i * 16;
        for (int e = 0; e < 16; e++) {
            dst[i * 32 + e] = s * ((float)(b[e] & 15) - z);
            dst[i * 32 + e + 16] = s * ((float)(b[e] >> 4) - z);
        }
    }
}
static void q4_0r_to_float(const void *src, float *dst, int64_t n) { q4_planar_to_float(src, dst, n, 0); }
static void w4g32r_to_float(const void *src, float *dst, int64_t n) { q4_planar_to_float(src, dst, n, 32); }
static void w4g64r_to_float(const void *src, float *dst, int64_t n) { q4_planar_to_float(src, dst, n, 64); }
static void w4g128r_to_float(const void *src, float *dst, int64_t n) { q4_planar_to_float(src, dst, n, 128); }

/* Q4_0L / W4G*L: block by block through the lane order (the dequantizing
 * GEMM's path only with --no-int8-gemm). */
static void q4_lanes_to_float(const void *src, float *dst, int64_t n, int group) {
    q4_row r = q4_row_at(src, n, group, true);
    for (int64_t i = 0; i < r.nb; i++) {
        const float s = q4_row_scale(&r, i), z = (float)q4_row_zero(&r, i);
        for (int e = 0; e < 32; e++) dst[i * 32 + e] = s * ((float)q4_0r_q(r.q, r.nb, i, e, true) - z);
    }
}
static void q4_0l_to_float(const void *src, float *dst, int64_t n) { q4_lanes_to_float(src, dst, n, 0); }
static void w4g32l_to_float(const void *src, float *dst, int64_t n) { q4_lanes_to_float(src, dst, n, 32); }
static void w4g64l_to_float(const void *src, float *dst, int64_t n) { q4_lanes_to_float(src, dst, n, 64); }
static void w4g128l_to_float(const void *src, float *dst, int64_t n) { q4_lanes_to_float(src, dst, n, 128); }

/* Q8_0R (fp16 scales) and W8R (f32): block i's scale. */
static float q8_planar_scale(const uint8_t *d, int64_t i, bool f32) { return f32 ? getf(d + i * 4) : geth(d + i * 2); }

static void q8_planar_to_float(const void *src, float *dst, int64_t n, bool f32, bool lanes) {
    int64_t nb = n / 32;
    const uint8_t *d = src;
    const uint8_t *q = d + nb * (f32 ? 4 : 2);
    for (int64_t i = 0; i < nb; i++) {
        float s = q8_planar_scale(d, i, f32);
        for (int j = 0; j < 32; j++) dst[i * 32 + j] = s * (float)(q[quant_index(nb, i, j, lanes)] - 128);
    }
}
static void q8_0r_to_float(const void *src, float *dst, int64_t n) { q8_planar_to_float(src, dst, n, false, false); }
static void w8r_to_float(const void *src, float *dst, int64_t n) { q8_planar_to_float(src, dst, n, true, false); }
static void q8_0l_to_float(const void *src, float *dst, int64_t n) { q8_planar_to_float(src, dst, n, false, true); }
static void w8l_to_float(const void *src, float *dst, int64_t n) { q8_planar_to_float(src, dst, n, true, true); }

static void q4_kr_to_float(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++) {
        const nb_block_q4_kr *b = (const nb_block_q4_kr *)src + i;
        float d = nb_fp16_to_fp32(b->d), dm = nb_fp16_to_fp32(b->dmin);
        for (int e = 0; e < 256; e++) /* as ggml: (d*sc)*q - dmin*m */
            dst[256 * i + e] = d * (float)b->sc[e / 32] * (float)q4_kr_q(b, e) - dm * (float)b->m[e / 32];
    }
}

static void q6_kr_to_float(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++) {
        const nb_block_q6_kr *b = (const nb_block_q6_kr *)src + i;
        float d = nb_fp16_to_fp32(b->d);
        for (int e = 0; e < 256; e++) dst[256 * i + e] = d * (float)b->sc[e / 16] * (float)(q6_kr_q(b, e) - 32);
    }
}

/* The definitions (activations: Q8_KP), with integer sums per super-block
 * as in the GGUF kernels (kernels/ref/qdot_ref.c): same integers, same
 * float expression. */
void nb_q4_kr_dot_ref(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const nb_block_q4_kr *b = (const nb_block_q4_kr *)w + i;
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int s = 0;
            for (int l = 0; l < 32; l++) s += q4_kr_q(b, 32 * j + l) * y[i].qs[lane_pos(32 * j + l)];
            isum += b->sc[j] * s;
            msum += b->m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        acc += nb_fp16_to_fp32(b->d) * y[i].d * (float)isum - nb_fp16_to_fp32(b->dmin) * y[i].d * (float)msum;
    }
    *out = acc;
}

void nb_q6_kr_dot_ref(int64_t n, const void *w, const void *a, float *out) {
    const nb_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const nb_block_q6_kr *b = (const nb_block_q6_kr *)w + i;
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += (q6_kr_q(b, 16 * g + l) - 32) * y[i].qs[lane_pos(16 * g + l)];
            isum += b->sc[g] * s;
        }
        acc += nb_fp16_to_fp32(b->d) * y[i].d * (float)isum;
    }
    *out = acc;
}

static void q8_planar_act_to_float(const void *src, float *dst, int64_t n, bool lanes) {
    int64_t nb = n / 32;
    const int8_t *q = src;
    const uint8_t *d = (const uint8_t *)src + nb * 32;
    for (int64_t i = 0; i < nb; i++) {
        float s = getf(d + i * 4);
        for (int j = 0; j < 32; j++) dst[i * 32 + j] = s * (float)q8_0p_q(q, nb, i, j, lanes);
    }
}
static void q8_0p_to_float(const void *src, float *dst, int64_t n) { q8_planar_act_to_float(src, dst, n, false); }
static void q8_0pl_to_float(const void *src, float *dst, int64_t n) { q8_planar_act_to_float(src, dst, n, true); }

/* As llama.cpp's x86 quantize_row_q8_0: id = 127/amax, ties to even, and the
 * scale rounded through fp16 (what the integer kernels multiply with). */
void nb_q8_0p_quantize_ref(const float *x, void *dst, int64_t n) {
    int64_t nb = n / 32;
    int8_t *q = dst;
    uint8_t *d = (uint8_t *)dst + nb * 32, *ds = d + nb * 4, *is = ds + nb * 4;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        float s = nb_fp16_to_fp32(nb_fp32_to_fp16(amax / 127.f));
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            q[i * 32 + j] = (int8_t)nearbyintf(x[j] * id);
            sum += q[i * 32 + j];
        }
        float fs = s * (float)sum;
        memcpy(d + i * 4, &s, 4);
        memcpy(ds + i * 4, &fs, 4);
        memcpy(is + i * 4, &sum, 4);
    }
}

/* The activations of the Q4_0L / W4G*L dots: Q8_0P with each 4-block
 * group's quants in lane order. */
void nb_q8_0pl_quantize_ref(const float *x, void *dst, int64_t n) {
    nb_q8_0p_quantize_ref(x, dst, n);
    int8_t *q = dst;
    for (int64_t g = 0; g < n / 128; g++) {
        int8_t t[128];
        for (int e = 0; e < 128; e++) t[lane_slot(e)] = q[g * 128 + e];
        memcpy(q + g * 128, t, 128);
    }
}

/* Q4_0R and W4G*R (Q4_0L, W4G*L: lanes): per block the integer sum of (q - offset) * x, scaled. */
static float q4_planar_dot_ref(int64_t n, const void *w, const void *a, int group, bool lanes) {
    q4_row r = q4_row_at(w, n, group, lanes);
    const int8_t *x = a;
    const uint8_t *ad = (const uint8_t *)a + r.nb * 32;
    float s = 0;
    for (int64_t i = 0; i < r.nb; i++) {
        int acc = 0, z = q4_row_zero(&r, i);
        for (int e = 0; e < 32; e++) acc += (q4_0r_q(r.q, r.nb, i, e, lanes) - z) * q8_0p_q(x, r.nb, i, e, lanes);
        s += q4_row_scale(&r, i) * getf(ad + i * 4) * (float)acc;
    }
    return s;
}
void nb_q4_0r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 0, false); }
static void w4g32r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 32, false); }
static void w4g64r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 64, false); }
static void w4g128r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 128, false); }
static void q4_0l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 0, true); }
static void w4g32l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 32, true); }
static void w4g64l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 64, true); }
static void w4g128l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q4_planar_dot_ref(n, w, a, 128, true); }

/* Q8_0R and W8R (Q8_0L, W8L: lanes, with Q8_0PL activations). */
static float q8_planar_dot_ref(int64_t n, const void *w, const void *a, bool f32, bool lanes) {
    int64_t nb = n / 32;
    const uint8_t *wd = w, *q = wd + nb * (f32 ? 4 : 2);
    const int8_t *x = a;
    const uint8_t *ad = (const uint8_t *)a + nb * 32;
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int acc = 0;
        for (int j = 0; j < 32; j++) acc += (q[quant_index(nb, i, j, lanes)] - 128) * x[quant_index(nb, i, j, lanes)];
        s += q8_planar_scale(wd, i, f32) * getf(ad + i * 4) * (float)acc;
    }
    return s;
}
void nb_q8_0r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q8_planar_dot_ref(n, w, a, false, false); }
static void w8r_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q8_planar_dot_ref(n, w, a, true, false); }
static void q8_0l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q8_planar_dot_ref(n, w, a, false, true); }
static void w8l_dot_ref(int64_t n, const void *w, const void *a, float *out) { *out = q8_planar_dot_ref(n, w, a, true, true); }

static const nb_qdot q4r_ref = {NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q4_0r_dot_ref, NULL, "scalar", NULL};
static const nb_qdot q8r_ref = {NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q8_0r_dot_ref, NULL, "scalar", NULL};
static const nb_qdot q4r_512 = {NB_Q8_0P, nb_q8_0p_quantize_avx512, nb_q4_0r_dot_avx512, nb_q4_0r_dot_mxn_avx512,
                                "avx512", nb_q4_0r_rows_avx512};
static const nb_qdot q8r_512 = {NB_Q8_0P, nb_q8_0p_quantize_avx512, nb_q8_0r_dot_avx512, nb_q8_0r_dot_mxn_avx512, "avx512", NULL};
#define Q8_KP (NB_Q8_KP)
static const nb_qdot q4kr_ref = {Q8_KP, nb_q8_kp_quantize_ref, nb_q4_kr_dot_ref, NULL, "scalar", NULL};
static const nb_qdot q6kr_ref = {Q8_KP, nb_q8_kp_quantize_ref, nb_q6_kr_dot_ref, NULL, "scalar", NULL};
static const nb_qdot q4kr_512 = {Q8_KP, nb_q8_kp_quantize_avx512, nb_q4_kr_dot_avx512, nb_q4_kr_dot_mxn_avx512, "avx512",
                                 nb_q4_kr_rows_avx512};
static const nb_qdot q6kr_512 = {Q8_KP, nb_q8_kp_quantize_avx512, nb_q6_kr_dot_avx512, nb_q6_kr_dot_mxn_avx512, "avx512",
                                 nb_q6_kr_rows_avx512};

/* AVX2 (vpmaddubsw) and AVX-VNNI (256-bit vpdpbusd) decode dots. */
static const nb_qdot q4r_avx2 = {NB_Q8_0P, nb_q8_0p_quantize_avx2, nb_q4_0r_dot_avx2, nb_q4_0r_dot_mxn_avx2, "avx2", NULL};
static const nb_qdot q8r_avx2 = {NB_Q8_0P, nb_q8_0p_quantize_avx2, nb_q8_0r_dot_avx2, nb_q8_0r_dot_mxn_avx2, "avx2", NULL};
static const nb_qdot q4kr_avx2 = {Q8_KP, nb_q8_kp_quantize_avx2, nb_q4_kr_dot_avx2, nb_q4_kr_dot_mxn_avx2, "avx2", NULL};
static const nb_qdot q6kr_avx2 = {Q8_KP, nb_q8_kp_quantize_avx2, nb_q6_kr_dot_avx2, nb_q6_kr_dot_mxn_avx2, "avx2", NULL};
static const nb_qdot q4r_vnni = {NB_Q8_0P, nb_q8_0p_quantize_avx2, nb_q4_0r_dot_avxvnni, nb_q4_0r_dot_mxn_avxvnni, "avxvnni", NULL};
static const nb_qdot q8r_vnni = {NB_Q8_0P, nb_q8_0p_quantize_avx2, nb_q8_0r_dot_avxvnni, nb_q8_0r_dot_mxn_avxvnni, "avxvnni", NULL};
static const nb_qdot q4kr_vnni = {Q8_KP, nb_q8_kp_quantize_avx2, nb_q4_kr_dot_avxvnni, nb_q4_kr_dot_mxn_avxvnni, "avxvnni", NULL};
static const nb_qdot q6kr_vnni = {Q8_KP, nb_q8_kp_quantize_avx2, nb_q6_kr_dot_avxvnni, nb_q6_kr_dot_mxn_avxvnni, "avxvnni", NULL};

/* W8R: Q8_0R's with f32 scales; W4G*R: Q4_0R's with per-group scales and zero points. */
#define PLANAR_QDOT(name, quant, dot, mxn, isa, ...) static const nb_qdot name = {NB_Q8_0P, quant, dot, mxn, isa, __VA_ARGS__};
PLANAR_QDOT(w8r_ref, nb_q8_0p_quantize_ref, w8r_dot_ref, NULL, "scalar", NULL)
PLANAR_QDOT(w8r_avx2, nb_q8_0p_quantize_avx2, nb_w8r_dot_avx2, nb_w8r_dot_mxn_avx2, "avx2", NULL)
PLANAR_QDOT(w8r_vnni, nb_q8_0p_quantize_avx2, nb_w8r_dot_avxvnni, nb_w8r_dot_mxn_avxvnni, "avxvnni", NULL)
PLANAR_QDOT(w8r_512, nb_q8_0p_quantize_avx512, nb_w8r_dot_avx512, nb_w8r_dot_mxn_avx512, "avx512", NULL)
PLANAR_QDOT(w4g32r_ref, nb_q8_0p_quantize_ref, w4g32r_dot_ref, NULL, "scalar", NULL)
PLANAR_QDOT(w4g64r_ref, nb_q8_0p_quantize_ref, w4g64r_dot_ref, NULL, "scalar", NULL)
PLANAR_QDOT(w4g128r_ref, nb_q8_0p_quantize_ref, w4g128r_dot_ref, NULL, "scalar", NULL)
PLANAR_QDOT(w4g32r_avx2, nb_q8_0p_quantize_avx2, nb_w4g32r_dot_avx2, nb_w4g32r_dot_mxn_avx2, "avx2", NULL)
PLANAR_QDOT(w4g64r_avx2, nb_q8_0p_quantize_avx2, nb_w4g64r_dot_avx2, nb_w4g64r_dot_mxn_avx2, "avx2", NULL)
PLANAR_QDOT(w4g128r_avx2, nb_q8_0p_quantize_avx2, nb_w4g128r_dot_avx2, nb_w4g128r_dot_mxn_avx2, "avx2", NULL)
PLANAR_QDOT(w4g32r_vnni, nb_q8_0p_quantize_avx2, nb_w4g32r_dot_avxvnni, nb_w4g32r_dot_mxn_avxvnni, "avxvnni", NULL)
PLANAR_QDOT(w4g64r_vnni, nb_q8_0p_quantize_avx2, nb_w4g64r_dot_avxvnni, nb_w4g64r_dot_mxn_avxvnni, "avxvnni", NULL)
PLANAR_QDOT(w4g128r_vnni, nb_q8_0p_quantize_avx2, nb_w4g128r_dot_avxvnni, nb_w4g128r_dot_mxn_avxvnni, "avxvnni", NULL)
PLANAR_QDOT(w4g32r_512, nb_q8_0p_quantize_avx512, nb_w4g32r_dot_avx512, nb_w4g32r_dot_mxn_avx512, "avx512",
            nb_w4g32r_rows_avx512)
PLANAR_QDOT(w4g64r_512, nb_q8_0p_quantize_avx512, nb_w4g64r_dot_avx512, nb_w4g64r_dot_mxn_avx512, "avx512",
            nb_w4g64r_rows_avx512)
PLANAR_QDOT(w4g128r_512, nb_q8_0p_quantize_avx512, nb_w4g128r_dot_avx512, nb_w4g128r_dot_mxn_avx512, "avx512",
            nb_w4g128r_rows_avx512)
/* Q4_0L / W4G*L: the AVX2 file's only (Q8_0PL activations). */
#define LANES_QDOT(name, quant, dot, mxn, isa) static const nb_qdot name = {NB_Q8_0PL, quant, dot, mxn, isa, NULL};
LANES_QDOT(q4l_ref, nb_q8_0pl_quantize_ref, q4_0l_dot_ref, NULL, "scalar")
LANES_QDOT(w4g32l_ref, nb_q8_0pl_quantize_ref, w4g32l_dot_ref, NULL, "scalar")
LANES_QDOT(w4g64l_ref, nb_q8_0pl_quantize_ref, w4g64l_dot_ref, NULL, "scalar")
LANES_QDOT(w4g128l_ref, nb_q8_0pl_quantize_ref, w4g128l_dot_ref, NULL, "scalar")
LANES_QDOT(q4l_avx2, nb_q8_0pl_quantize_avx2, nb_q4_0l_dot_avx2, nb_q4_0l_dot_mxn_avx2, "avx2")
LANES_QDOT(w4g32l_avx2, nb_q8_0pl_quantize_avx2, nb_w4g32l_dot_avx2, nb_w4g32l_dot_mxn_avx2, "avx2")
LANES_QDOT(w4g64l_avx2, nb_q8_0pl_quantize_avx2, nb_w4g64l_dot_avx2, nb_w4g64l_dot_mxn_avx2, "avx2")
LANES_QDOT(w4g128l_avx2, nb_q8_0pl_quantize_avx2, nb_w4g128l_dot_avx2, nb_w4g128l_dot_mxn_avx2, "avx2")
LANES_QDOT(q4l_vnni, nb_q8_0pl_quantize_avx2, nb_q4_0l_dot_avxvnni, nb_q4_0l_dot_mxn_avxvnni, "avxvnni")
LANES_QDOT(w4g32l_vnni, nb_q8_0pl_quantize_avx2, nb_w4g32l_dot_avxvnni, nb_w4g32l_dot_mxn_avxvnni, "avxvnni")
LANES_QDOT(w4g64l_vnni, nb_q8_0pl_quantize_avx2, nb_w4g64l_dot_avxvnni, nb_w4g64l_dot_mxn_avxvnni, "avxvnni")
LANES_QDOT(w4g128l_vnni, nb_q8_0pl_quantize_avx2, nb_w4g128l_dot_avxvnni, nb_w4g128l_dot_mxn_avxvnni, "avxvnni")
LANES_QDOT(q8l_ref, nb_q8_0pl_quantize_ref, q8_0l_dot_ref, NULL, "scalar")
LANES_QDOT(w8l_ref, nb_q8_0pl_quantize_ref, w8l_dot_ref, NULL, "scalar")
LANES_QDOT(q8l_avx2, nb_q8_0pl_quantize_avx2, nb_q8_0l_dot_avx2, nb_q8_0l_dot_mxn_avx2, "avx2")
LANES_QDOT(w8l_avx2, nb_q8_0pl_quantize_avx2, nb_w8l_dot_avx2, nb_w8l_dot_mxn_avx2, "avx2")
LANES_QDOT(q8l_vnni, nb_q8_0pl_quantize_avx2, nb_q8_0l_dot_avxvnni, nb_q8_0l_dot_mxn_avxvnni, "avxvnni")
LANES_QDOT(w8l_vnni, nb_q8_0pl_quantize_avx2, nb_w8l_dot_avxvnni, nb_w8l_dot_mxn_avxvnni, "avxvnni")
#undef LANES_QDOT
#undef PLANAR_QDOT

/* Which repacked-kernel variant (nb_repack_qdot_variant) runs at max_isa on
 * this CPU: AVX-512 VNNI, else AVX-VNNI, else AVX2, else scalar. */
static int repack_variant(nb_isa max_isa) {
    nb_isa isa = nb_cpu_isa();
    if (isa > max_isa) isa = max_isa;
    const nb_cpu *c = nb_cpu_get();
    if (isa >= NB_ISA_AVX512 && c->avx512vnni) return 3;
    if (isa >= NB_ISA_AVX2 && c->avxvnni) return 2;
    if (isa >= NB_ISA_AVX2) return 1;
    return 0;
}

/* The index of a repacked type in the kernel tables below, -1 if none. */
static int repacked_kind(nb_dtype t) {
    switch (t) {
    case NB_Q4_0R: return 0;
    case NB_Q8_0R: return 1;
    case NB_Q4_KR: return 2;
    case NB_Q6_KR: return 3;
    case NB_W4G32R: return 4;
    case NB_W4G64R: return 5;
    case NB_W4G128R: return 6;
    case NB_W8R: return 7;
    case NB_Q4_0L: return 8;
    case NB_W4G32L: return 9;
    case NB_W4G64L: return 10;
    case NB_W4G128L: return 11;
    case NB_Q8_0L: return 12;
    case NB_W8L: return 13;
    default: return -1;
    }
}

static bool variant_ok(int variant) {
    const nb_cpu *c = nb_cpu_get();
    switch (variant) {
    case 0: return true;
    case 1: return c->avx2 && c->fma && c->f16c;
    case 2: return c->avx2 && c->fma && c->f16c && c->avxvnni;
    case 3: return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni;
    default: return false;
    }
}

const nb_qdot *nb_repack_qdot_variant(nb_dtype t, int variant) {
    if (!variant_ok(variant)) return NULL;
    static const nb_qdot *const tab[4][14] = {
        {&q4r_ref, &q8r_ref, &q4kr_ref, &q6kr_ref, &w4g32r_ref, &w4g64r_ref, &w4g128r_ref, &w8r_ref, &q4l_ref,
         &w4g32l_ref, &w4g64l_ref, &w4g128l_ref, &q8l_ref, &w8l_ref},
        {&q4r_avx2, &q8r_avx2, &q4kr_avx2, &q6kr_avx2, &w4g32r_avx2, &w4g64r_avx2, &w4g128r_avx2, &w8r_avx2,
         &q4l_avx2, &w4g32l_avx2, &w4g64l_avx2, &w4g128l_avx2, &q8l_avx2, &w8l_avx2},
        {&q4r_vnni, &q8r_vnni, &q4kr_vnni, &q6kr_vnni, &w4g32r_vnni, &w4g64r_vnni, &w4g128r_vnni, &w8r_vnni,
         &q4l_vnni, &w4g32l_vnni, &w4g64l_vnni, &w4g128l_vnni, &q8l_vnni, &w8l_vnni},
        {&q4r_512, &q8r_512, &q4kr_512, &q6kr_512, &w4g32r_512, &w4g64r_512, &w4g128r_512, &w8r_512}, /* no lanes */
    };
    int k = repacked_kind(t);
    return k < 0 ? NULL : tab[variant][k]; /* NULL: Q4_0L, W4G*L at AVX-512 */
}

const nb_qdot *nb_repack_qdot(nb_dtype t, nb_isa max_isa) { return nb_repack_qdot_variant(t, repack_variant(max_isa)); }

nb_to_float_fn nb_repack_to_float(nb_dtype t) { return nb_repack_to_float_isa(t, nb_cpu_isa()); }

nb_to_float_fn nb_repack_to_float_isa(nb_dtype t, nb_isa max_isa) {
    bool simd = max_isa >= NB_ISA_AVX512 && nb_cpu_isa() >= NB_ISA_AVX512;
    if (t == NB_Q4_0R) return simd ? nb_q4_0r_to_float_avx512 : q4_0r_to_float;
    if (t == NB_Q8_0R) return simd ? nb_q8_0r_to_float_avx512 : q8_0r_to_float;
    if (t == NB_Q8_0P) return q8_0p_to_float;
    if (t == NB_Q4_KR) return q4_kr_to_float;
    if (t == NB_Q6_KR) return q6_kr_to_float;
    if (t == NB_Q8_KP) return q8_kp_to_float;
    if (t == NB_W8R) return simd ? nb_w8r_to_float_avx512 : w8r_to_float;
    if (t == NB_W4G32R) return simd ? nb_w4g32r_to_float_avx512 : w4g32r_to_float;
    if (t == NB_W4G64R) return simd ? nb_w4g64r_to_float_avx512 : w4g64r_to_float;
    if (t == NB_W4G128R) return simd ? nb_w4g128r_to_float_avx512 : w4g128r_to_float;
    if (t == NB_Q4_0L) return q4_0l_to_float;
    if (t == NB_W4G32L) return w4g32l_to_float;
    if (t == NB_W4G64L) return w4g64l_to_float;
    if (t == NB_W4G128L) return w4g128l_to_float;
    if (t == NB_Q8_0PL) return q8_0pl_to_float;
    if (t == NB_Q8_0L) return q8_0l_to_float;
    if (t == NB_W8L) return w8l_to_float;
    return NULL;
}

/* per token group and block: q 512, sum 64, fsum 64, sum16 128, d 64 bytes */
size_t nb_actpack_bytes(int64_t K, int64_t n) {
    int64_t nb = K / 32, ng = (n + NB_ACTPACK_TOKENS - 1) / NB_ACTPACK_TOKENS;
    return (size_t)(ng * nb) * (512 + 64 + 64 + 128 + 64);
}

size_t nb_actpack_scratch_bytes(int64_t K) { return (size_t)(K / 256 + 1) * sizeof(nb_block_q8_K) + (size_t)K * 2; }

void nb_actpack_init(nb_actpack *ap, void *mem, int64_t n, int64_t K, nb_dtype act) {
    int64_t nb = K / 32, ng = (n + NB_ACTPACK_TOKENS - 1) / NB_ACTPACK_TOKENS;
    size_t blocks = (size_t)(ng * nb);
    uint8_t *m = mem;
    ap->K = K; ap->nb = nb; ap->n = n; ap->ng = ng; ap->act = act;
    ap->q = (int8_t *)m;
    m += blocks * 512;
    ap->sum = (int32_t *)m;
    m += blocks * 64;
    ap->fsum = (float *)m;
    m += blocks * 64;
    ap->sum16 = (int32_t *)m;
    m += blocks * 128;
    ap->d = (float *)m;
}

void nb_actpack_clear_group(nb_actpack *ap, int64_t g) {
    const int64_t nb = ap->nb;
    memset(ap->q + g * nb * 512, 0, (size_t)nb * 512);
    memset(ap->sum + g * nb * 16, 0, (size_t)nb * 64);
    memset(ap->fsum + g * nb * 16, 0, (size_t)nb * 64);
    memset(ap->sum16 + g * nb * 32, 0, (size_t)nb * 128);
    memset(ap->d + g * nb * 16, 0, (size_t)nb * 64);
}

void nb_actpack_group_ref(nb_actpack *ap, const float *X, int64_t g, void *row) {
    const int64_t nb = ap->nb, K = ap->K;
    nb_actpack_clear_group(ap, g);
    for (int64_t tt = 0; tt < NB_ACTPACK_TOKENS && g * NB_ACTPACK_TOKENS + tt < ap->n; tt++) {
        const float *x = X + (g * NB_ACTPACK_TOKENS + tt) * K;
        const int8_t *qs;
        if (ap->act == NB_Q8_K) nb_quantize_row_q8_K_ref(x, row, K);
        else nb_q8_0p_quantize_ref(x, row, K);
        for (int64_t b = 0; b < nb; b++) {
            int8_t *dst = ap->q + (g * nb + b) * 512;
            float d;
            if (ap->act == NB_Q8_K) {
                const nb_block_q8_K *y = (const nb_block_q8_K *)row + b / 8;
                qs = y->qs + 32 * (b % 8);
                d = y->d;
            } else {
                qs = (const int8_t *)row + b * 32;
                memcpy(&d, (const uint8_t *)row + K + b * 4, 4);
            }
            int32_t s[2] = {0, 0};
            for (int kk = 0; kk < 8; kk++)
                for (int c = 0; c < 4; c++) {
                    dst[kk * 64 + tt * 4 + c] = qs[kk * 4 + c];
                    s[kk / 4] += qs[kk * 4 + c];
                }
            int64_t at = (g * nb + b) * 16 + tt;
            ap->sum[at] = s[0] + s[1];
            ap->fsum[at] = (float)(s[0] + s[1]);
            ap->sum16[(g * nb + b) * 32 + tt] = s[0];
            ap->sum16[(g * nb + b) * 32 + 16 + tt] = s[1];
            ap->d[at] = d;
        }
    }
}

nb_actpack nb_actpack_slice(const nb_actpack *ap, int64_t g0, int64_t ng) {
    nb_actpack v = *ap;
    const int64_t at = g0 * ap->nb;
    v.q += at * 512;
    v.sum += at * 16;
    v.fsum += at * 16;
    v.sum16 += at * 32;
    v.d += at * 16;
    v.ng = ng;
    v.n = NB_MIN(ap->n - g0 * NB_ACTPACK_TOKENS, ng * NB_ACTPACK_TOKENS);
    return v;
}

void nb_actpack_group(nb_actpack *ap, const float *X, int64_t g, void *row) {
    nb_dispatch_default()->actpack_group(ap, X, g, row);
}

/* By repacked_kind: Q4_0R, Q8_0R, Q4_KR, Q6_KR, W4G32R, W4G64R, W4G128R, W8R
 * (and for AVX2, Q4_0L, W4G32L, W4G64L, W4G128L). */
#define Q0(fn) {fn, NB_Q8_0P, 4, 0}
#define QK(fn) {fn, NB_Q8_K, 4, 0}
static const nb_rgemm gemm_avx2[14] = {Q0(nb_q4_0r_gemm_avx2),   Q0(nb_q8_0r_gemm_avx2),   QK(nb_q4_kr_gemm_avx2),
                                       QK(nb_q6_kr_gemm_avx2),   Q0(nb_w4g32r_gemm_avx2),  Q0(nb_w4g64r_gemm_avx2),
                                       Q0(nb_w4g128r_gemm_avx2), Q0(nb_w8r_gemm_avx2),     Q0(nb_q4_0l_gemm_avx2),
                                       Q0(nb_w4g32l_gemm_avx2),  Q0(nb_w4g64l_gemm_avx2),  Q0(nb_w4g128l_gemm_avx2),
                                       Q0(nb_q8_0l_gemm_avx2),   Q0(nb_w8l_gemm_avx2)};
static const nb_rgemm gemm_vnni[14] = {Q0(nb_q4_0r_gemm_avxvnni),   Q0(nb_q8_0r_gemm_avxvnni),  QK(nb_q4_kr_gemm_avxvnni),
                                       QK(nb_q6_kr_gemm_avxvnni),   Q0(nb_w4g32r_gemm_avxvnni), Q0(nb_w4g64r_gemm_avxvnni),
                                       Q0(nb_w4g128r_gemm_avxvnni), Q0(nb_w8r_gemm_avxvnni),    Q0(nb_q4_0l_gemm_avxvnni),
                                       Q0(nb_w4g32l_gemm_avxvnni),  Q0(nb_w4g64l_gemm_avxvnni), Q0(nb_w4g128l_gemm_avxvnni),
                                       Q0(nb_q8_0l_gemm_avxvnni),   Q0(nb_w8l_gemm_avxvnni)};
static const nb_rgemm gemm_512[8] = {Q0(nb_q4_0r_gemm_avx512),   Q0(nb_q8_0r_gemm_avx512),  QK(nb_q4_kr_gemm_avx512),
                                     QK(nb_q6_kr_gemm_avx512),   Q0(nb_w4g32r_gemm_avx512), Q0(nb_w4g64r_gemm_avx512),
                                     Q0(nb_w4g128r_gemm_avx512), Q0(nb_w8r_gemm_avx512)};
#undef Q0
#undef QK

const nb_rgemm *nb_repack_gemm_variant(nb_dtype t, int variant) {
    if (variant < 1 || !variant_ok(variant)) return NULL;
    int k = repacked_kind(t);
    if (k < 0 || (variant == 3 && k >= 8)) return NULL;
    return variant == 1 ? &gemm_avx2[k] : variant == 2 ? &gemm_vnni[k] : &gemm_512[k];
}

const nb_rgemm *nb_repack_gemm_amx(nb_dtype t) {
    /* Against the rows-in-lanes kernels, one thread, 256 MiB of 5632 x 2048
     * weights, ms per step (docs/speed.md, session 27): Q4_0R 8 tokens 53 vs
     * 62 (AMX), 12: 66 vs 64, 16: 79 vs 66, 24: 104 vs 92; Q4_KR 12: 70 vs
     * 70, 16: 80 vs 71. Q6_KR's AMX GEMM takes batches of 33+ only. */
    static const nb_rgemm amx[8] = {{nb_q4_0r_gemm_amx, NB_Q8_0P, 16, 13},  {nb_q8_0r_gemm_amx, NB_Q8_0P, 16, 13},
                                    {nb_q4_kr_gemm_amx, NB_Q8_K, 16, 13},   {nb_q6_kr_gemm_amx, NB_Q8_K, 16, 33},
                                    {nb_w4g32r_gemm_amx, NB_Q8_0P, 16, 13}, {nb_w4g64r_gemm_amx, NB_Q8_0P, 16, 13},
                                    {nb_w4g128r_gemm_amx, NB_Q8_0P, 16, 13}, {nb_w8r_gemm_amx, NB_Q8_0P, 16, 0}};
    if (nb_cpu_isa() < NB_ISA_AMX || !nb_cpu_get()->amx_int8 || !variant_ok(3)) return NULL;
    int k = repacked_kind(t);
    return k < 0 || k >= 8 ? NULL : &amx[k];
}

/* NULL below AVX2 (the scalar path has no int8 GEMM). */
const nb_rgemm *nb_repack_gemm(nb_dtype t, nb_isa max_isa) {
    const nb_rgemm *g = max_isa >= NB_ISA_AMX ? nb_repack_gemm_amx(t) : NULL;
    return g ? g : nb_repack_gemm_variant(t, repack_variant(max_isa));
}
