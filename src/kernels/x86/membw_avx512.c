/* AVX-512 inner loop of the read-bandwidth probe (kernels/membw.h): 64-byte
 * loads (plain 16-byte loads under-report what the AVX-512 decode kernels
 * reach by ~15% on Sapphire Rapids). */
#include <immintrin.h>

#include "kernels/membw.h"

/* unsigned: the sums wrap by design (the intrinsic reduce adds as signed) */
static inline uint64_t reduce512(__m512i v) {
    uint64_t l[8], s = 0;
    _mm512_storeu_si512((void *)l, v);
    for (int i = 0; i < 8; i++) s += l[i];
    return s;
}

#define MB_V __m512i
#define MB_VB 64
#define MB_LOAD(q) _mm512_load_si512((const void *)(q))
#define MB_ADD(a, b) _mm512_add_epi64(a, b)
#define MB_ZERO() _mm512_setzero_si512()
#define MB_REDUCE(v) reduce512(v)
#define MB_NAME nb_membw_sum_avx512
#include "kernels/membw_loop.h"
