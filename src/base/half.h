/* Scalar fp16 / bf16 conversions (IEEE binary16, bfloat16), round to nearest
 * even, NaN preserved. These are the definitions; SIMD code converts with
 * F16C / AVX-512 instructions and is tested against them. */
#ifndef NB_BASE_HALF_H
#define NB_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t nb_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float nb_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float nb_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return nb_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return nb_bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return nb_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t nb_fp32_to_fp16(float f) {
    uint32_t x = nb_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (ax < 0x38800000u) { /* subnormal or zero in fp16 */
        /* round(ax_value * 2^24) with ties to even, via float add trick */
        float v = nb_bits_f32(ax) + 0.5f; /* 0.5 = 2^-1: aligns ulp to 2^-24 */
        return (uint16_t)(sign | (nb_f32_bits(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1;
    ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (ax >> 13));
}

static inline float nb_bf16_to_fp32(uint16_t h) { return nb_bits_f32((uint32_t)h << 16); }

static inline uint16_t nb_fp32_to_bf16(float f) {
    uint32_t x = nb_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
