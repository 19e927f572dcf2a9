/* AVX-512 inner loop of the read-bandwidth probe: 64-byte loads, four
 * independent accumulators (plain 16-byte loads under-report the bandwidth
 * the AVX-512 decode kernels reach by ~15% on Sapphire Rapids), and the
 * same 2 KiB software prefetch the decode kernels use - the probe must
 * measure the best the machine does, or "% of roofline" flatters them. */
#include <immintrin.h>

#include "eval/membw.h"

uint64_t nb_membw_sum_avx512(const void *p, size_t bytes) {
    const __m512i *v = p;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 4 <= bytes / 64; i += 4) {
        _mm_prefetch((const char *)(v + i) + 2048, _MM_HINT_T0);
        _mm_prefetch((const char *)(v + i) + 2048 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)(v + i) + 2048 + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)(v + i) + 2048 + 192, _MM_HINT_T0);
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(v + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(v + i + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(v + i + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(v + i + 3));
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
}
