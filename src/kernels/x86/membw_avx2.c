/* AVX2 inner loop of the read-bandwidth probe (kernels/membw.h): 32-byte loads. */
#include <immintrin.h>

#include "kernels/membw.h"

static inline uint64_t reduce256(__m256i v) {
    __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return (uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_extract_epi64(s, 1);
}

#define MB_V __m256i
#define MB_VB 32
#define MB_LOAD(q) _mm256_load_si256((const __m256i *)(q))
#define MB_ADD(a, b) _mm256_add_epi64(a, b)
#define MB_ZERO() _mm256_setzero_si256()
#define MB_REDUCE(v) reduce256(v)
#define MB_NAME nb_membw_sum_avx2
#include "kernels/membw_loop.h"
