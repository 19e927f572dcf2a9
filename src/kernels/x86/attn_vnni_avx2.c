/* AVX-VNNI (256-bit vpdpbusd) int8-dot attention for int8 KV pools: the
 * AVX-512 kernel's scheme (attn_i8_impl.h) at 8 rows per vector, for CPUs
 * with AVX2 and AVX-VNNI but no AVX-512 (Intel Alder Lake and later client
 * cores; kernels/attn.h nb_attn_avx2_int8). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"

#define W 8

/* *acc += the u8 x s8 products of u and the four bytes at p (broadcast);
 * in asm for the same reason as dpbusd_bcast.h's ({vex}: the
 * AVX-VNNI encoding). */
static inline __attribute__((always_inline)) void dpbusd8(__m256i *acc, __m256i u, const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    const __m256i b = _mm256_set1_epi32(v);
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(*acc) : "x"(u), "x"(b));
}

#define IX_DPBUSD dpbusd8
#include "kernels/x86/attn_i8_w8.h"
#include "kernels/x86/attn_i8_impl.h"

static void attn_avx2_i8(const nb_attn_tile *t) { tile_i8_run(t, nb_attn_avx2()); }

nb_attn_fn nb_attn_avx2_int8(void) { return nb_cpu_get()->avxvnni ? attn_avx2_i8 : NULL; }
