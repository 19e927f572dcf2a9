/* Reference quantize/dequantize of the ggml block types (layouts in
 * blocks.h). The quantizers follow llama.cpp's quantize_row_*_ref semantics
 * step for step (same scale formulas, same rounding: truncation after +0.5
 * offsets for the legacy types, round-half-even nearest_int for k-quants,
 * same search grids for the k-quant scale fits), so a tensor quantized here
 * is byte-identical to one quantized by llama-quantize without an imatrix.
 * Written from the published algorithm descriptions, not copied. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/half.h"
#include "quant/imatrix.h"
#include "quant/quant_ref.h"

#define H2F nb_fp16_to_fp32
#define F2H nb_fp32_to_fp16

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ---- Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 ----------------------------------- */

void nb_quant_q4_0(const float *x, void *dst, int64_t n) {
    nb_block_q4_0 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f; /* the value with the largest magnitude, signed */
        for (int j = 0; j < 32; j++) {
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 8.5f), b = (int8_t)(x[j + 16] * id + 8.5f);
            y[i].qs[j] = (uint8_t)(imin(15, a) | (imin(15, b) << 4));
        }
    }
}

void nb_dequant_q4_0(const void *src, float *y, int64_t n) {
    const nb_block_q4_0 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = ((x[i].qs[j] & 15) - 8) * d;
            y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* min/max fit with 2^bits - 1 steps, as quantize_row_q4_1_ref / q5_1. */
static void minmax32(const float *x, float *min, float *max) {
    *min = FLT_MAX; *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

void nb_quant_q4_1(const float *x, void *dst, int64_t n) {
    nb_block_q4_1 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float min, max;
        minmax32(x, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)((x[j] - min) * id + 0.5f), b = (int8_t)((x[j + 16] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)(imin(15, a) | (imin(15, b) << 4));
        }
    }
}

void nb_dequant_q4_1(const void *src, float *y, int64_t n) {
    const nb_block_q4_1 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (x[i].qs[j] & 15) * d + m;
            y[j + 16] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void nb_quant_q5_0(const float *x, void *dst, int64_t n) {
    nb_block_q5_0 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = imin(31, (int8_t)(x[j] * id + 16.5f));
            int b = imin(31, (int8_t)(x[j + 16] * id + 16.5f));
            y[i].qs[j] = (uint8_t)((a & 15) | ((b & 15) << 4));
            qh |= (uint32_t)(a >> 4) << j;
            qh |= (uint32_t)(b >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void nb_dequant_q5_0(const void *src, float *y, int64_t n) {
    const nb_block_q5_0 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = H2F(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int a = (x[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int b = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (a - 16) * d;
            y[j + 16] = (b - 16) * d;
        }
    }
}

void nb_quant_q5_1(const float *x, void *dst, int64_t n) {
    nb_block_q5_1 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float min, max;
        minmax32(x, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = (uint8_t)((x[j] - min) * id + 0.5f);
            int b = (uint8_t)((x[j + 16] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((a & 15) | ((b & 15) << 4));
            qh |= (uint32_t)((a >> 4) & 1) << j;
            qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void nb_dequant_q5_1(const void *src, float *y, int64_t n) {
    const nb_block_q5_1 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int a = (x[i].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int b = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = a * d + m;
            y[j + 16] = b * d + m;
        }
    }
}

void nb_quant_q8_0(const float *x, void *dst, int64_t n) {
    nb_block_q8_0 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* Q8_0 for activations, the way llama.cpp's x86 kernels quantize them at
 * run time (ggml-cpu quantize_row_q8_0): id = 127/amax rather than 1/d, and
 * ties rounded to even. Weights use nb_quant_q8_0 (the file format's
 * reference, byte-identical with llama-quantize); activations use this so
 * our dot products see the same integers llama.cpp's do. */
void nb_quant_q8_0_act(const float *x, void *dst, int64_t n) {
    nb_block_q8_0 *y = dst;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = F2H(amax / 127.f);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

void nb_dequant_q8_0(const void *src, float *y, int64_t n) {
    const nb_block_q8_0 *x = src;
    NB_QBLOCKS(n, 32);
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ---- k-quant helpers ------------------------------------------------------ */

/* The first of v[0..n) with the largest magnitude (0 when all are 0): the
 * group scale the K-quants quantize the others against. */
static float largest_magnitude(const float *v, int n) {
    float best = 0, amax = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(v[j]) > amax) {
            amax = fabsf(v[j]);
            best = v[j];
        }
    return best;
}

/* Symmetric fit of n values to levels -nmax..nmax-1 (returned offset by
 * nmax in L), trying 19 scales around nmax/max and keeping the one that
 * maximises (sum w x l)^2 / sum w l^2 with weights w = qw, or x^2 when qw
 * is NULL (rmse_type 1), as llama.cpp's make_qx_quants. Returns the scale. */
static float fit_sym(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    const float max = largest_magnitude(x, n);
    if (fabsf(max) < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nb_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nb_nearest_int(iscale * x[i])));
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nb_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Asymmetric fit x ~ scale*l - min, l in 0..nmax, weighted least squares
 * over a grid of nstep+1 trial scales (rmin + rdelta*is + nmax)/(max - min),
 * as llama.cpp's make_qkx2_quants; candidates are ranked by the weighted
 * squared error, or by the weighted absolute error when use_mad (Q2_K).
 * *the_min receives -min. */
static inline float fit_err(float diff, bool use_mad) { return use_mad ? fabsf(diff) : diff * diff; }

static float fit_asym(int n, int nmax, const float *x, const float *w, uint8_t *L,
                      float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nb_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * fit_err(diff, use_mad);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nb_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * fit_err(diff, use_mad);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ---- Q2_K / Q3_K ------------------------------------------------------------
 * Both pack 256 weights as 16 groups of 16. Weight w = 128h + 32k + l
 * (h < 2, k < 4, l < 32) keeps its low 2 bits in qs[32h + l] at bit 2k;
 * its group (scale index) is w / 16. Q3_K keeps the third bit in hmask[l]
 * bit 4h + k (= hmask[w % 32] bit w / 32), set meaning "no -4 offset". */

/* 6-bit Q3_K scale j (0..63, stored with +32) from the 12-byte packing:
 * low nibble in byte j (j < 8) or the high nibble of byte j - 8, the top two
 * bits in byte 8 + j % 4 at bit 2 * (j / 4). */
static inline int q3_scale6(const uint8_t *sc, int j) {
    int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    return lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* Symmetric 3-bit fit of 16 values to -nmax..nmax-1 with weights x^2:
 * start from round(-nmax/max * x), then up to 5 passes of coordinate
 * descent, each moving one level to round(x * sum(w l^2)/sum(w x l))
 * (both sums without that element) when that raises
 * (sum w x l)^2 / sum w l^2; as llama.cpp's make_q3_quants with do_rmse.
 * L receives l + nmax; returns the scale sum(w x l) / sum(w l^2). */
static float fit_q3(int n, int nmax, const float *x, int8_t *L) {
    const float max = largest_magnitude(x, n);
    if (fabsf(max) < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nb_nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = imax(-nmax, imin(nmax - 1, nb_nearest_int(x[i] * sl2 / slx)));
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* 256 levels of 2 bits (0..3) into qs[64] (layout above). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 256; j += 128) {
        for (int l = 0; l < 32; l++) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

/* Every weight of a Q2_K block re-quantized against its stored (fp16)
 * d / dmin and 4-bit scales / mins, then packed. */
static void q2_K_finish(const float *x, nb_block_q2_K *b, uint8_t *L) {
    for (int j = 0; j < 16; j++) {
        const float d = H2F(b->d) * (b->scales[j] & 0xF);
        if (!d) continue;
        const float dm = H2F(b->dmin) * (b->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++) {
            int l = nb_nearest_int((x[16 * j + ii] + dm) / d);
            L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
        }
    }
    pack_2bit(L, b->qs);
}

/* Q2_K (quantize_row_q2_K_ref): each group of 16 fitted with fit_asym
 * (levels 0..3, weights |x|, absolute error, trial scales (-0.5 + 0.1 is + 3)
 * / range for is = 0..15); scales and mins to 4 bits against the largest
 * of each (d = max_scale/15, dmin = max_min/15), then every weight
 * re-quantized against the stored (fp16-rounded) values. */
void nb_quant_q2_K(const float *x, void *dst, int64_t n) {
    nb_block_q2_K *y = dst;
    uint8_t L[256], Laux[16];
    float weights[16], mins[16], scales[16];
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_asym(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)nb_nearest_int(iscale * scales[j]);
            y[i].d = F2H(max_scale / 15.f);
        } else {
            memset(y[i].scales, 0, 16);
            y[i].d = F2H(0.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++) {
                int l = nb_nearest_int(iscale * mins[j]);
                y[i].scales[j] = (uint8_t)(y[i].scales[j] | (l << 4));
            }
            y[i].dmin = F2H(max_min / 15.f);
        } else {
            y[i].dmin = F2H(0.f);
        }
        q2_K_finish(x, &y[i], L);
    }
}

/* w = d * (scale & 15) * q - dmin * (scale >> 4), q the 2-bit level */
void nb_dequant_q2_K(const void *src, float *y, int64_t n) {
    const nb_block_q2_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, y += 256) {
        const float d = H2F(x[i].d), dmin = H2F(x[i].dmin);
        for (int w = 0; w < 256; w++) {
            const int q = (x[i].qs[32 * (w / 128) + w % 32] >> (2 * ((w / 32) % 4))) & 3;
            const uint8_t sc = x[i].scales[w / 16];
            y[w] = d * (sc & 0xF) * q - dmin * (sc >> 4);
        }
    }
}

/* Every weight of a Q3_K block re-quantized against its stored d and 6-bit
 * scales, clamped to -4..3, stored +4: low 2 bits in qs, bit 2 in hmask. */
static void q3_K_finish(const float *x, nb_block_q3_K *b, int8_t *L) {
    for (int j = 0; j < 16; j++) {
        const float d = H2F(b->d) * (q3_scale6(b->scales, j) - 32);
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++) {
            int l = nb_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
        }
    }
    uint8_t L2[256];
    memset(b->hmask, 0, 32);
    for (int w = 0; w < 256; w++) {
        int l = L[w];
        if (l > 3) {
            b->hmask[w % 32] = (uint8_t)(b->hmask[w % 32] | (1u << (w / 32)));
            l -= 4;
        }
        L2[w] = (uint8_t)l;
    }
    pack_2bit(L2, b->qs);
}

/* Q3_K (quantize_row_q3_K_ref): each group of 16 fitted with fit_q3
 * (levels -4..3); the 16 group scales quantized to 6 bits signed against
 * the one of largest magnitude (d = -max/32, stored scale = round(s/d) + 32
 * clamped to 0..63), then every weight re-quantized against the stored
 * values, clamped to -4..3 and stored +4: low 2 bits in qs, bit 2 in hmask. */
void nb_quant_q3_K(const float *x, void *dst, int64_t n) {
    nb_block_q3_K *y = dst;
    int8_t L[256];
    float scales[16];
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        for (int j = 0; j < 16; j++) scales[j] = fit_q3(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = largest_magnitude(scales, 16);
        memset(y[i].scales, 0, 12);
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = (int8_t)nb_nearest_int(iscale * scales[j]);
                l = imax(-32, imin(31, l)) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] = (uint8_t)(y[i].scales[j - 8] | ((l & 0xF) << 4));
                y[i].scales[8 + j % 4] = (uint8_t)(y[i].scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
            }
            y[i].d = F2H(1 / iscale);
        } else {
            y[i].d = F2H(0.f);
        }
        q3_K_finish(x, &y[i], L);
    }
}

/* w = d * (scale6 - 32) * (q2 + 4*hbit - 4) */
void nb_dequant_q3_K(const void *src, float *y, int64_t n) {
    const nb_block_q3_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, y += 256) {
        const float d = H2F(x[i].d);
        for (int w = 0; w < 256; w++) {
            const int q2 = (x[i].qs[32 * (w / 128) + w % 32] >> (2 * ((w / 32) % 4))) & 3;
            const int hb = (x[i].hmask[w % 32] >> (w / 32)) & 1;
            y[w] = d * (q3_scale6(x[i].scales, w / 16) - 32) * (q2 - (hb ? 0 : 4));
        }
    }
}

/* 6-bit scale j and min j of a Q4_K/Q5_K block (12-byte packing). */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* 6-bit scale ls and min lm of sub-block j (clamped to 63) into the
 * 12-byte packing. */
static void k45_put_scale(int j, uint8_t ls, uint8_t lm, uint8_t *scales) {
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Every weight re-quantized against the stored (fp16) d / dmin and the
 * 6-bit scales / mins, levels 0..nmax. */
static void k45_requant(const float *x, int nmax, nb_half dh, nb_half dminh, const uint8_t *scales, uint8_t *L) {
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        k4_scale_min(j, scales, &s, &m);
        const float d = H2F(dh) * s;
        if (!d) continue;
        const float dm = H2F(dminh) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = nb_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

/* Shared first half of Q4_K / Q5_K quantization: 8 sub-blocks of 32 fitted
 * with fit_asym, scales and mins quantized to 6 bits, then every weight
 * re-quantized against the stored (fp16-rounded) scales. */
static void k45_block(const float *x, int nmax, float rmin, float rdelta, int nstep,
                      nb_half *dh, nb_half *dminh, uint8_t *scales, uint8_t *L) {
    float weights[32], mins[8], sc[8];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        sc[j] = fit_asym(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep,
                         false);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nb_nearest_int(inv_scale * sc[j]);
        uint8_t lm = (uint8_t)nb_nearest_int(inv_min * mins[j]);
        k45_put_scale(j, ls, lm, scales);
    }
    *dh = F2H(max_scale / 63.f);
    *dminh = F2H(max_min / 63.f);
    k45_requant(x, nmax, *dh, *dminh, scales, L);
}

static void q4_K_pack(const uint8_t *L, uint8_t *q) {
    for (int j = 0; j < 256; j += 64, q += 32) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void nb_quant_q4_K(const float *x, void *dst, int64_t n) {
    nb_block_q4_K *y = dst;
    uint8_t L[256];
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        memset(y[i].scales, 0, 12);
        nb_half d, dmin;
        k45_block(x, 15, -1.f, 0.1f, 20, &d, &dmin, y[i].scales, L);
        y[i].d = d;
        y[i].dmin = dmin;
        q4_K_pack(L, y[i].qs);
    }
}

void nb_dequant_q4_K(const void *src, float *y, int64_t n) {
    const nb_block_q4_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = H2F(x[i].d), min = H2F(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
            uint8_t s, m;
            k4_scale_min(is, x[i].scales, &s, &m);
            const float d1 = d * s, m1 = min * m;
            k4_scale_min(is + 1, x[i].scales, &s, &m);
            const float d2 = d * s, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q5_K_pack(const uint8_t *L, uint8_t *qh, uint8_t *ql) {
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int nn = 0; nn < 256; nn += 64, ql += 32) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[nn + j], l2 = L[nn + j + 32];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

void nb_quant_q5_K(const float *x, void *dst, int64_t n) {
    nb_block_q5_K *y = dst;
    uint8_t L[256];
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        memset(y[i].scales, 0, 12);
        nb_half d, dmin;
        k45_block(x, 31, -0.5f, 0.1f, 15, &d, &dmin, y[i].scales, L);
        y[i].d = d;
        y[i].dmin = dmin;
        q5_K_pack(L, y[i].qh, y[i].qs);
    }
}

void nb_dequant_q5_K(const void *src, float *y, int64_t n) {
    const nb_block_q5_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = H2F(x[i].d), min = H2F(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, ql += 32, is += 2) {
            uint8_t s, m;
            k4_scale_min(is, x[i].scales, &s, &m);
            const float d1 = d * s, m1 = min * m;
            k4_scale_min(is + 1, x[i].scales, &s, &m);
            const float d2 = d * s, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

/* Q6_K: quantize_row_q6_K_ref when qw is NULL; with importance weights
 * (one per weight of the row) quantize_row_q6_K_impl, which only changes
 * the weights of the 16-value scale fits to qw. */
static void q6_K_rows(const float *x, void *dst, int64_t n, const float *qw0) {
    nb_block_q6_K *y = dst;
    int8_t L[256];
    float scales[16];
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        const float *qw = qw0 ? qw0 + 256 * i : NULL;
        for (int ib = 0; ib < 16; ib++) scales[ib] = fit_sym(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : NULL);
        const float max_scale = largest_magnitude(scales, 16);
        if (fabsf(max_scale) < 1e-15f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = F2H(1 / iscale);
        for (int ib = 0; ib < 16; ib++) y[i].scales[ib] = (int8_t)imin(127, nb_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < 16; j++) {
            float d = H2F(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nb_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void nb_quant_q6_K(const float *x, void *dst, int64_t n) { q6_K_rows(x, dst, n, NULL); }

void nb_dequant_q6_K(const void *src, float *y, int64_t n) {
    const nb_block_q6_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = H2F(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int nn = 0; nn < 256; nn += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void nb_quant_q8_K(const float *x, void *dst, int64_t n) {
    nb_block_q8_K *y = dst;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max = 0, amax = 0;
        for (int j = 0; j < 256; j++) {
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) y[i].qs[j] = (int8_t)imin(127, nb_nearest_int(iscale * x[j]));
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void nb_dequant_q8_K(const void *src, float *y, int64_t n) {
    const nb_block_q8_K *x = src;
    NB_QBLOCKS(n, 256);
    for (int64_t i = 0; i < n / 256; i++, y += 256) {
        for (int j = 0; j < 256; j++) y[j] = x[i].d * x[i].qs[j];
    }
}

/* ---- importance-weighted quantization (llama-quantize --imatrix) -----------
 * llama.cpp's quantize_row_*_impl paths with quant_weights, one row at a
 * time (qw: one importance value per weight of the row). Written from the
 * published rules:
 *   legacy types: sigma2 = mean x^2 over the ROW, weight = qw * sqrt(sigma2 + x^2);
 *     Q4_0 / Q5_0 make_qx_quants(32, 8 / 16) with those weights (no re-rounding
 *     of the levels against the fp16 scale); Q4_1 / Q5_1 make_qkx3_quants
 *     (32, 15 / 31, rmin -0.9, rdelta 0.05, 36 steps), m = -min;
 *   Q2_K: sigma2 = sum x^2 / 256 per super-block; groups of 16 fitted with
 *     make_qkx3_quants(16, 3, -0.9, 0.05, 36); scales and mins to 4 bits with
 *     make_qp_quants(16, 15, ., sum of each group's weights);
 *   Q3_K: sigma2 = 2 sum x^2 / 256; groups make_qx_quants(16, 4) with the
 *     weights; the 16 scales make_qx_quants(16, 32) weighted by group sums;
 *   Q4_K / Q5_K: sigma2 = 2 sum x^2 / 256; sub-blocks of 32
 *     make_qkx3_quants(32, 15 / 31, -0.9, 0.05, 36); 6-bit scales and mins
 *     make_qp_quants(8, 63, ., sub-block weight sums);
 *   Q6_K: the reference with make_qx_quants weights = qw itself;
 * then each K-quant re-quantizes every weight against the stored scales. */

/* make_qp_quants: positive values x to levels 0..nmax with one scale,
 * minimising sum w (x - s l)^2: 9 trial scales around nmax/max, then up to
 * 5 coordinate-descent passes. Returns the scale. */
static float fit_qp(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (!max) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nb_nearest_int(iscale * x[i]);
    float scale = 1 / iscale, best_mse = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (!is) continue;
        float iscale_is = (0.1f * is + nmax) / max, scale_is = 1 / iscale_is, mse = 0;
        for (int i = 0; i < n; i++) {
            int l = imin(nmax, nb_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imin(nmax, nb_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = imin(nmax, nb_nearest_int(x[i] * sl2 / slx));
                if (nl != L[i]) {
                    slx += w[i] * x[i] * nl;
                    sl2 += w[i] * nl * nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

static float row_sigma2(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
    return s / (float)n;
}

static void w_q4_0(const float *x, void *dst, int64_t n, const float *qw) {
    nb_block_q4_0 *y = dst;
    const float sigma2 = row_sigma2(x, n);
    float w[32];
    int8_t L[32];
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float *xb = x + 32 * ib, *q = qw + 32 * ib;
        for (int j = 0; j < 32; j++) w[j] = q[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        y[ib].d = F2H(fit_sym(32, 8, xb, L, w));
        for (int j = 0; j < 16; j++) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void w_q5_0(const float *x, void *dst, int64_t n, const float *qw) {
    nb_block_q5_0 *y = dst;
    const float sigma2 = row_sigma2(x, n);
    float w[32];
    int8_t L[32];
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float *xb = x + 32 * ib, *q = qw + 32 * ib;
        for (int j = 0; j < 32; j++) w[j] = q[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        y[ib].d = F2H(fit_sym(32, 16, xb, L, w));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t a = (uint8_t)L[j], b = (uint8_t)L[j + 16];
            y[ib].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            qh |= (uint32_t)((a & 0x10u) >> 4) << j;
            qh |= (uint32_t)((b & 0x10u) >> 4) << (j + 16);
        }
        memcpy(y[ib].qh, &qh, 4);
    }
}

/* Q4_1 (nmax 15) and Q5_1 (nmax 31) share the asymmetric fit. */
static void w_q41_51(const float *x, void *dst, int64_t n, const float *qw, int nmax) {
    const float sigma2 = row_sigma2(x, n);
    float w[32], min;
    uint8_t L[32], Laux[32];
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float *xb = x + 32 * ib, *q = qw + 32 * ib;
        for (int j = 0; j < 32; j++) w[j] = q[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = fit_asym(32, nmax, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        if (nmax == 15) {
            nb_block_q4_1 *y = (nb_block_q4_1 *)dst + ib;
            y->d = F2H(d);
            y->m = F2H(-min);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        } else {
            nb_block_q5_1 *y = (nb_block_q5_1 *)dst + ib;
            y->d = F2H(d);
            y->m = F2H(-min);
            uint32_t qh = 0;
            for (int j = 0; j < 16; j++) {
                const uint8_t a = L[j], b = L[j + 16];
                y->qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
                qh |= (uint32_t)((a & 0x10u) >> 4) << j;
                qh |= (uint32_t)((b & 0x10u) >> 4) << (j + 16);
            }
            memcpy(y->qh, &qh, 4);
        }
    }
}

/* llama.cpp's K-quant importance weights for one super-block's sub-block
 * of `len` values starting at x: qw * sqrt(sigma2 + x^2); returns their sum. */
static float kq_weights(const float *x, const float *q, int len, float sigma2, float *w) {
    float sumw = 0;
    for (int l = 0; l < len; l++) {
        w[l] = q[l] * sqrtf(sigma2 + x[l] * x[l]);
        sumw += w[l];
    }
    return sumw;
}

static void w_q2_K(const float *x, void *dst, int64_t n, const float *qw) {
    nb_block_q2_K *y = dst;
    uint8_t L[256], Laux[16], Ls[16], Lm[16];
    float mins[16], scales[16], sw[16], w[16];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float sumx2 = 0;
        for (int j = 0; j < 256; j++) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / 256;
        for (int j = 0; j < 16; j++) {
            sw[j] = kq_weights(x + 16 * j, qw + 256 * i + 16 * j, 16, sigma2, w);
            scales[j] = fit_asym(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        float dm = fit_qp(16, 15, scales, Ls, sw), mm = fit_qp(16, 15, mins, Lm, sw);
        y[i].d = F2H(dm);
        y[i].dmin = F2H(mm);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, &y[i], L);
    }
}

static void w_q3_K(const float *x, void *dst, int64_t n, const float *qw) {
    nb_block_q3_K *y = dst;
    int8_t L[256], Ls[16];
    float scales[16], w[16], sw[16];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float sumx2 = 0;
        for (int j = 0; j < 256; j++) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / 256;
        for (int j = 0; j < 16; j++) {
            sw[j] = kq_weights(x + 16 * j, qw + 256 * i + 16 * j, 16, sigma2, w);
            scales[j] = fit_sym(16, 4, x + 16 * j, L + 16 * j, w);
        }
        memset(y[i].scales, 0, 12);
        float d_block = fit_sym(16, 32, scales, Ls, sw);
        for (int j = 0; j < 16; j++) {
            int l = Ls[j];
            if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
            else y[i].scales[j - 8] = (uint8_t)(y[i].scales[j - 8] | ((l & 0xF) << 4));
            y[i].scales[8 + j % 4] = (uint8_t)(y[i].scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
        }
        y[i].d = F2H(d_block);
        q3_K_finish(x, &y[i], L);
    }
}

/* Q4_K (nmax 15) and Q5_K (nmax 31). */
static void w_q45_K(const float *x, void *dst, int64_t n, const float *qw, int nmax) {
    uint8_t L[256], Laux[32], Ls[8], Lm[8];
    float w[32], sw[8], mins[8], scales[8];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float sum_x2 = 0;
        for (int l = 0; l < 256; l++) sum_x2 += x[l] * x[l];
        const float sigma2 = 2 * sum_x2 / 256;
        for (int j = 0; j < 8; j++) {
            sw[j] = kq_weights(x + 32 * j, qw + 256 * i + 32 * j, 32, sigma2, w);
            scales[j] = fit_asym(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        float d_block = fit_qp(8, 63, scales, Ls, sw), m_block = fit_qp(8, 63, mins, Lm, sw);
        uint8_t sc[12] = {0};
        for (int j = 0; j < 8; j++) k45_put_scale(j, Ls[j], Lm[j], sc);
        nb_half dh = F2H(d_block), dmh = F2H(m_block);
        k45_requant(x, nmax, dh, dmh, sc, L);
        if (nmax == 15) {
            nb_block_q4_K *y = (nb_block_q4_K *)dst + i;
            memcpy(y->scales, sc, 12);
            y->d = dh;
            y->dmin = dmh;
            q4_K_pack(L, y->qs);
        } else {
            nb_block_q5_K *y = (nb_block_q5_K *)dst + i;
            memcpy(y->scales, sc, 12);
            y->d = dh;
            y->dmin = dmh;
            q5_K_pack(L, y->qh, y->qs);
        }
    }
}

bool nb_quant_row_weighted(nb_dtype t, const float *x, void *dst, int64_t n, const float *qw) {
    if (!qw || n <= 0) return false;
    switch ((int)t) {
    case NB_Q4_0: if (n % 32) return false; w_q4_0(x, dst, n, qw); return true;
    case NB_Q5_0: if (n % 32) return false; w_q5_0(x, dst, n, qw); return true;
    case NB_Q4_1: if (n % 32) return false; w_q41_51(x, dst, n, qw, 15); return true;
    case NB_Q5_1: if (n % 32) return false; w_q41_51(x, dst, n, qw, 31); return true;
    case NB_Q2_K: if (n % 256) return false; w_q2_K(x, dst, n, qw); return true;
    case NB_Q3_K: if (n % 256) return false; w_q3_K(x, dst, n, qw); return true;
    case NB_Q4_K: if (n % 256) return false; w_q45_K(x, dst, n, qw, 15); return true;
    case NB_Q5_K: if (n % 256) return false; w_q45_K(x, dst, n, qw, 31); return true;
    case NB_Q6_K: if (n % 256) return false; q6_K_rows(x, dst, n, qw); return true;
    default: return false;
    }
}
