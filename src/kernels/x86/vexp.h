/* e^x per lane for the x86 kernels (Cephes' expf polynomial, |rel err|
 * about 2 ulp against libm): lanes below -87.3 (and -inf, the attention's
 * masked scores) give exactly 0, lanes above 88 give e^88. nb_exp16 needs
 * AVX-512F, nb_exp8 AVX2 + FMA; each is defined where its ISA is enabled.
 * One copy for the attention kernels and the float kernels' SwiGLU. */
#ifndef NB_KERNELS_X86_VEXP_H
#define NB_KERNELS_X86_VEXP_H

#include <immintrin.h>

#define NB_EXP_POLY(T, FMA, MUL, ADD, SET1, r)                                \
    ({                                                                        \
        T p_ = SET1(1.9875691500e-4f);                                        \
        p_ = FMA(p_, r, SET1(1.3981999507e-3f));                              \
        p_ = FMA(p_, r, SET1(8.3334519073e-3f));                              \
        p_ = FMA(p_, r, SET1(4.1665795894e-2f));                              \
        p_ = FMA(p_, r, SET1(1.6666665459e-1f));                              \
        p_ = FMA(p_, r, SET1(5.0000001201e-1f));                              \
        FMA(MUL(p_, r), r, ADD(r, SET1(1.0f)));                               \
    })

#ifdef __AVX512F__
static inline __m512 nb_exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    const __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    const __m512 p = NB_EXP_POLY(__m512, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_add_ps, _mm512_set1_ps, r);
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 nb_exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 live = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    const __m256 p = NB_EXP_POLY(__m256, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_add_ps, _mm256_set1_ps, r);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), live);
}
#endif

#endif
