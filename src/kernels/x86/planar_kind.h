/* The planar int8 rows of kernels/repack.h that the Q8_0P decode dots read
 * (Q4_0R, Q8_0R, W8R, W4G32R/64R/128R): one dot loop for all, told apart by
 * a constant `kind` after inlining. A row is its scales (and W4G*R's zero
 * points) and then its quants; per four 32-weight blocks the loop takes
 *   dw: each block's scale,
 *   dz: what the unsigned quants' offset is multiplied by through the
 *       activations' d*sum - the scale again, times nb_pl_offset at the
 *       end of the row (8, 128), or for W4G*R the scale times the block's
 *       group's zero point (offset 1).
 * Needs F16C (the AVX2 and AVX-512 kernels include it). */
#ifndef NB_KERNELS_X86_PLANAR_KIND_H
#define NB_KERNELS_X86_PLANAR_KIND_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/x86/prefetch_here.h"

enum { NB_PL_Q4_0R, NB_PL_Q8_0R, NB_PL_W8R, NB_PL_W4G32R, NB_PL_W4G64R, NB_PL_W4G128R };
/* Or'ed into a 4-bit kind: its nibbles in lane order (Q4_0L, W4G*L:
 * repack.h), read by the AVX2 kernels only. */
#define NB_PL_LANES 16
#define NB_PL_BASE(kind) ((kind) & (NB_PL_LANES - 1))

/* 4-bit quants (Q4_0R's or lane order), else 8-bit (q + 128). */
#define NB_PL_NIBBLES(kind) (NB_PL_BASE(kind) == NB_PL_Q4_0R || NB_PL_BASE(kind) >= NB_PL_W4G32R)
/* W4G*R's group, 0 for the others. */
#define NB_PL_GROUP(kind) (NB_PL_BASE(kind) >= NB_PL_W4G32R ? 32 << (NB_PL_BASE(kind) - NB_PL_W4G32R) : 0)

/* Bytes before the quants of a row of n weights. */
static inline __attribute__((always_inline)) int64_t nb_pl_head(int64_t n, const int kind) {
    if (NB_PL_GROUP(kind)) return n / NB_PL_GROUP(kind) * 4;
    return n / 32 * (NB_PL_BASE(kind) == NB_PL_W8R ? 4 : 2);
}

/* Before a row's steps: its head lines read in address order, and the
 * lines pf (and pf2) bytes past them prefetched. The dots read a row's
 * head a piece per step and prefetch pf bytes past each quant line they
 * load, so without this
 *  - to the hardware prefetcher each row's quant stream jumps over the
 *    head from the previous row's end: on the AMD Zen 5 guest of session
 *    36 a read stream that jumps 7 lines (448 bytes) or more between runs
 *    of 32-88 lines reads at half speed (13-14 against 27-28 GB/s, one
 *    thread, with or without software prefetch), 6 or fewer at full.
 *    Heads reach 448 bytes at K >= 3584 for W8R and W4G32R and K >= 7168
 *    for Q4_0R and Q8_0R (a 7B model's FFN down rows);
 *  - the software prefetch skips the head's length of lines pf bytes into
 *    every row (the previous row's quant lines + pf end before them, the
 *    row's own begin after them).
 * The loads' values are not used (volatile, so that they are made). */
static inline __attribute__((always_inline)) void nb_pl_row_start(const void *wr, int64_t n, const int kind, int pf,
                                                                  int pf2) {
    const uint8_t *h = wr;
    const int64_t hb = nb_pl_head(n, kind);
    for (int64_t o = 0; o < hb; o += 64) {
        (void)*(volatile const uint8_t *)(h + o);
        if (pf) nb_prefetch_ahead(h + o, pf, pf2);
    }
}

/* The end-of-row factor of the offset (see above). */
#define NB_PL_OFFSET(kind) (NB_PL_BASE(kind) == NB_PL_Q4_0R ? 8.0f : NB_PL_GROUP(kind) ? 1.0f : 128.0f)

/* Blocks i .. i+3's values of a W4G*R per-group fp16 stream h. */
static inline __attribute__((always_inline)) __m128 nb_pl_group4(const uint16_t *h, int64_t i, const int group) {
    if (group == 32) return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)(h + i)));
    if (group == 64) { /* groups i/2, i/2 + 1, each for two blocks */
        int32_t two;
        memcpy(&two, h + i / 2, 4);
        const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(two));
        return _mm_unpacklo_ps(v, v);
    }
    return _mm_cvtph_ps(_mm_set1_epi16((short)h[i / 4])); /* vpbroadcastw from memory, one conversion */
}

/* dw and dz (above) of blocks i .. i+3 of the row w of n weights. */
static inline __attribute__((always_inline)) void nb_pl_scales4(const void *w, int64_t n, int64_t i, const int kind,
                                                                __m128 *dw, __m128 *dz) {
    const int group = NB_PL_GROUP(kind);
    if (group) {
        const uint16_t *d = w;
        *dw = nb_pl_group4(d, i, group);
        *dz = _mm_mul_ps(*dw, nb_pl_group4(d + n / group, i, group));
    } else if (NB_PL_BASE(kind) == NB_PL_W8R) {
        *dz = *dw = _mm_loadu_ps((const float *)w + i);
    } else {
        *dz = *dw = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)((const uint16_t *)w + i)));
    }
}

/* The same for blocks i .. i+7 (the AVX2 dot's step). */
static inline __attribute__((always_inline)) void nb_pl_scales8(const void *w, int64_t n, int64_t i, const int kind,
                                                                __m256 *dw, __m256 *dz) {
    const int group = NB_PL_GROUP(kind);
    if (group) { /* the 256/group groups' d and d*z converted together, then spread over their blocks */
        const uint16_t *d = w, *z = d + n / group;
        const int64_t g = i * 32 / group;
        if (group == 32) {
            *dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(d + g)));
            *dz = _mm256_mul_ps(*dw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(z + g))));
            return;
        }
        __m128i hd, hz;
        if (group == 64) {
            hd = _mm_loadl_epi64((const __m128i *)(const void *)(d + g));
            hz = _mm_loadl_epi64((const __m128i *)(const void *)(z + g));
        } else {
            int32_t a, b;
            memcpy(&a, d + g, 4);
            memcpy(&b, z + g, 4);
            hd = _mm_cvtsi32_si128(a);
            hz = _mm_cvtsi32_si128(b);
        }
        const __m128 d4 = _mm_cvtph_ps(hd), dz4 = _mm_mul_ps(d4, _mm_cvtph_ps(hz));
        const __m256i spread = group == 64 ? _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3) : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        *dw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d4), spread);
        *dz = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dz4), spread);
    } else if (NB_PL_BASE(kind) == NB_PL_W8R) {
        *dz = *dw = _mm256_loadu_ps((const float *)w + i);
    } else {
        *dz = *dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    }
}

/* Block i's scale, and the offset its quants take (8, 128 or z) (the
 * scalar tails). */
static inline __attribute__((always_inline)) float nb_pl_scale(const void *w, int64_t n, int64_t i, const int kind) {
    const int group = NB_PL_GROUP(kind);
    if (NB_PL_BASE(kind) == NB_PL_W8R) {
        float f;
        memcpy(&f, (const float *)w + i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint16_t *)w + (group ? i * 32 / group : i), 2);
    return _cvtsh_ss(h);
}
static inline __attribute__((always_inline)) int nb_pl_zero(const void *w, int64_t n, int64_t i, const int kind) {
    const int group = NB_PL_GROUP(kind);
    if (!group) return NB_PL_NIBBLES(kind) ? 8 : 128;
    uint16_t h;
    memcpy(&h, (const uint16_t *)w + n / group + i * 32 / group, 2);
    return (int)_cvtsh_ss(h);
}

/* Where the int8 GEMMs find weights 4kk .. 4kk+3 of a 32-weight block in
 * its unpacked bytes u (one 0..15 or 0..255 value a byte), by layout kq:
 *   0: in order (u at the block), 4kk;
 *   1: the K super-blocks' lane order (repack.h; u at 8j for block j of
 *      the super-block), 64*(kk%4) + 4*(kk/4);
 *   2: a Q4_0L group's four vectors as nib4 leaves them (u at 4b for block
 *      b of the group), 32*(kk%4) + 16*(kk/4).
 * Each kk's 4 bytes stay together in every order, so a GEMM broadcasts them
 * without putting the block back in order. */
static inline __attribute__((always_inline)) int nb_pl_step_offset(int kk, const int kq) {
    return kq == 1 ? 64 * (kk & 3) + 4 * (kk >> 2) : kq == 2 ? 32 * (kk & 3) + 16 * (kk >> 2) : 4 * kk;
}

/* Four 32-byte vectors of a 4-block group between Q4_0's order (vector k:
 * block k, weights 0..31) and lane order (vector j: in each 128-bit half h,
 * 32-bit lane b holds weights 4j + 16h .. +3 of block b): a 4 x 4 transpose
 * of 32-bit lanes in each half, its own inverse. */
static inline __attribute__((always_inline)) void nb_pl_lane_transpose(__m256i v[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    v[0] = _mm256_unpacklo_epi64(t0, t2);
    v[1] = _mm256_unpackhi_epi64(t0, t2);
    v[2] = _mm256_unpacklo_epi64(t1, t3);
    v[3] = _mm256_unpackhi_epi64(t1, t3);
}

#endif
