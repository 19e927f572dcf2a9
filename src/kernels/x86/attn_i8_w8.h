/* The 8-lane (AVX2) definitions attn_i8_impl.h takes, shared by its two
 * AVX2 instantiations: AVX-VNNI's vpdpbusd (attn_vnni_avx2.c) and plain
 * AVX2's vpmaddubsw (attn_i8_avx2.c). Each defines W 8 and IX_DPBUSD,
 * then includes this and the impl. */
#ifndef NB_KERNELS_X86_ATTN_I8_W8_H
#define NB_KERNELS_X86_ATTN_I8_W8_H

#include <immintrin.h>
#include <math.h>

/* The causal mask of 8 scores (rows rb*W.., keys k0..k0+7) and their max. */
static inline __attribute__((always_inline)) __m256 mask8(__m256 s[8], const int32_t *PS, int rb, int32_t k0) {
    if (k0 + 7 > PS[rb * W]) { /* the diagonal (or the last, short chunk): key p only for rows at >= p */
        const __m256i pv = _mm256_loadu_si256((const __m256i *)(const void *)(PS + rb * W));
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const __m256i out = _mm256_cmpgt_epi32(_mm256_set1_epi32(k0 + c), pv);
            s[c] = _mm256_blendv_ps(s[c], _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(out));
        }
    }
    __m256 mx = s[0];
#pragma GCC unroll 8
    for (int c = 1; c < 8; c++) mx = _mm256_max_ps(mx, s[c]);
    return mx;
}

#define IX_FV __m256
#define IX_IV __m256i
#define IX_LOADF _mm256_loadu_ps
#define IX_STOREF _mm256_storeu_ps
#define IX_LOADI(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define IX_STOREI(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define IX_SETF _mm256_set1_ps
#define IX_SETI _mm256_set1_epi32
#define IX_ZEROF _mm256_setzero_ps
#define IX_ZEROI _mm256_setzero_si256
#define IX_ADD _mm256_add_ps
#define IX_SUB _mm256_sub_ps
#define IX_MUL _mm256_mul_ps
#define IX_MAX _mm256_max_ps
#define IX_FMADD _mm256_fmadd_ps
#define IX_FMSUB _mm256_fmsub_ps
#define IX_ABS(v) _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define IX_CVTI2F _mm256_cvtepi32_ps
#define IX_CVTF2I _mm256_cvtps_epi32
#define IX_ADDI _mm256_add_epi32
#define IX_ORI _mm256_or_si256
#define IX_SLLI _mm256_slli_epi32
#define IX_ROUND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define IX_SCALE2(p, n) \
    _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))
#define IX_INVQ(mx) \
    _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(IX_QMAX), mx), _mm256_cmp_ps(mx, _mm256_setzero_ps(), _CMP_GT_OQ))
#define IX_OWN_MAX(mx, mn) _mm256_blendv_ps(mx, mn, _mm256_cmp_ps(mx, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ))
#define IX_ANY_GT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)) != 0)
#define IX_KG 8
#define IX_MASK mask8
#define IX_NC 4
#endif
