/* Per-block values of a W4G*R row's per-group fp16 streams (kernels/repack.h):
 * the scale d or the zero point z of the group each 32-weight block lies
 * in, for blocks i .. i+3 (i a multiple of 4). The planar int8 dots scale
 * four blocks at a time, so with these W4G32/64/128 rows run the same
 * loop as Q4_0R. `group` (32, 64 or 128) is a constant after inlining.
 * Needs F16C (the AVX2 and AVX-512 kernels include it). */
#ifndef NB_KERNELS_X86_W4R_BLOCKS_H
#define NB_KERNELS_X86_W4R_BLOCKS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline __attribute__((always_inline)) __m128 nb_w4r_blocks4(const uint16_t *h, int64_t i, const int group) {
    if (group == 32) return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)(h + i)));
    if (group == 64) { /* groups i/2, i/2 + 1, each for two blocks */
        int32_t two;
        memcpy(&two, h + i / 2, 4);
        const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(two));
        return _mm_unpacklo_ps(v, v);
    }
    return _mm_set1_ps(_cvtsh_ss(h[i / 4]));
}

/* The zero point of block i's group as an integer (the scalar tails). */
static inline int nb_w4r_zero(const uint16_t *z, int64_t i, int group) { return (int)_cvtsh_ss(z[i * 32 / group]); }

#endif
