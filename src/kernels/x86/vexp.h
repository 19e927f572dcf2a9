/* e^x per lane for the x86 kernels (Cephes' expf polynomial, |rel err|
 * about 2 ulp against libm): lanes below -87.3 (and -inf, the attention's
 * masked scores) give exactly 0, lanes above 88 give e^88. nb_exp16 needs
 * AVX-512F, nb_exp8 AVX2 + FMA; each is defined where its ISA is enabled.
 * One copy for the attention kernels and the float kernels' SwiGLU. */
#ifndef NB_KERNELS_X86_VEXP_H
#define NB_KERNELS_X86_VEXP_H

#include <immintrin.h>

/* The shared part for W = 512 or 256 bits: x clamped to [-87.34, 88], n =
 * round(x / ln 2), r = x - n ln 2 (in two parts), p = e^r by the polynomial.
 * Declares n and p; ROUND is the width's round-to-nearest. */
#define NB_EXP_CORE(W, ROUND, x, n, p)                                                             \
    x = _mm##W##_max_ps(_mm##W##_min_ps(x, _mm##W##_set1_ps(88.0f)), _mm##W##_set1_ps(-87.33654f)); \
    const __m##W n = ROUND(_mm##W##_mul_ps(x, _mm##W##_set1_ps(1.44269504088896341f)),               \
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);                          \
    __m##W r_ = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(0.693359375f), x);                           \
    r_ = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(-2.12194440e-4f), r_);                              \
    __m##W p = _mm##W##_set1_ps(1.9875691500e-4f);                                                  \
    p = _mm##W##_fmadd_ps(p, r_, _mm##W##_set1_ps(1.3981999507e-3f));                               \
    p = _mm##W##_fmadd_ps(p, r_, _mm##W##_set1_ps(8.3334519073e-3f));                               \
    p = _mm##W##_fmadd_ps(p, r_, _mm##W##_set1_ps(4.1665795894e-2f));                               \
    p = _mm##W##_fmadd_ps(p, r_, _mm##W##_set1_ps(1.6666665459e-1f));                               \
    p = _mm##W##_fmadd_ps(p, r_, _mm##W##_set1_ps(5.0000001201e-1f));                               \
    p = _mm##W##_fmadd_ps(_mm##W##_mul_ps(p, r_), r_, _mm##W##_add_ps(r_, _mm##W##_set1_ps(1.0f)))

#ifdef __AVX512F__
static inline __m512 nb_exp16(__m512 x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_GE_OQ);
    NB_EXP_CORE(512, _mm512_roundscale_ps, x, n, p);
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

/* 2^x per lane for softmaxes kept in base 2 (log2 e folded into the
 * scores' scale): f = x - floor(x) in [0, 1) in one vreduceps, 2^f by a
 * degree-6 near-minimax polynomial (Chebyshev fit; largest relative error
 * 6.3e-8 in float arithmetic, about 1 ulp), times 2^floor(x) by vscalefps
 * (which floors x itself). Lanes below -126 (and -inf, NaN) give exactly
 * 0; +inf gives NaN (callers that can see one test their sums unordered).
 * 9 operations where nb_exp16 takes 16 (AVX512DQ for vreduceps). */
#ifdef __AVX512DQ__
static inline __m512 nb_exp2_16(__m512 x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
    const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(2.1865785e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.2391332e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6841864e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5480629e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4023046e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314694e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(live, p, x);
}
#endif
#endif

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 nb_exp8(__m256 x) {
    const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_GE_OQ);
    NB_EXP_CORE(256, _mm256_round_ps, x, n, p);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), live);
}
#endif

#endif
