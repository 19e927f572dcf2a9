/* Plain-AVX2 int8-dot attention for int8 KV pools, for CPUs without
 * AVX-VNNI (AMD Zen 2 / Zen 3, Intel before Alder Lake): attn_i8_impl.h's
 * scheme with vpdpbusd as vpmaddubsw (u8 x s8 pairs summed in int16) then
 * vpmaddwd by ones. The int16 pairs saturate past 32767, so Q is rounded to
 * 7 bits (codes -63..63, stored +64) and the probabilities to 0..127: no
 * pair passes 2 x 127 x 128. Twice the VNNI kernels' rounding steps on Q
 * and P (kernels/attn.h nb_attn_avx2_int8_madd). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"

#define W 8
#define IX_QMAX 63.0f
#define IX_QOFF 64
#define IX_PMAX 127.0f

/* *acc += the u8 x s8 products of u (bytes <= 127) and the four bytes at p
 * (broadcast), per dword lane. */
static inline __attribute__((always_inline)) void madd8(__m256i *acc, __m256i u, const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    const __m256i pairs = _mm256_maddubs_epi16(u, _mm256_set1_epi32(v));
    *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

#define IX_DPBUSD madd8
#include "kernels/x86/attn_i8_w8.h"
#include "kernels/x86/attn_i8_impl.h"

static void attn_i8_madd(const nb_attn_tile *t) { tile_i8_run(t, nb_attn_avx2()); }

nb_attn_fn nb_attn_avx2_int8_madd(void) { return attn_i8_madd; }
