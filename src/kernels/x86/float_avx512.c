/* AVX-512F float kernels: the dots and conversions of kernels/float_x86.h
 * at 16 lanes, and the GEMM micro-kernel. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/x86/vexp.h"

static inline __m512 load_bf16(const uint16_t *p) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define VF __m512
#define VW 16
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VZERO() _mm512_setzero_ps()
#define VADD(a, b) _mm512_add_ps(a, b)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VLOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VLOAD_BF16(p) load_bf16(p)
#define VEXP(v) nb_exp16(v)
#define VSET1(f) _mm512_set1_ps(f)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)
#define DV __m512d
#define DZERO() _mm512_setzero_pd()
#define DSQ(p, acc) ({ const __m512d d_ = _mm512_cvtps_pd(_mm256_loadu_ps(p)); _mm512_fmadd_pd(d_, d_, acc); })
#define DHSUM(v) _mm512_reduce_add_pd(v)
#include "kernels/float_x86.h"

/* The GEMM micro-kernel (contract in kernels.h): 12 rows x 32 tokens in 24
 * zmm accumulators acc[r][half]. Per k two token vectors are loaded and each
 * of the 12 weights is broadcast straight from the packed panel (an embedded
 * broadcast operand of the FMA; the panel's row stride is a constant, so one
 * base register serves all 12 rows) into two FMAs: 14 loads per 24 FMAs.
 * With at most 16 tokens only the first half is computed (12 x 16). */
#define KR NB_GEMM_MR

static inline __attribute__((always_inline)) void tile(int halves, int64_t kc, const float *wp, const float *xp,
                                                       int64_t nt, float *c, int64_t ldc, bool add) {
    __m512 acc[KR][2];
    const __mmask16 m0 = nt >= 16 ? 0xffff : (__mmask16)((1u << nt) - 1);
    const __mmask16 m1 = nt >= 32 ? 0xffff : nt > 16 ? (__mmask16)((1u << (nt - 16)) - 1) : 0;
#pragma GCC unroll 12
    for (int r = 0; r < KR; r++) {
        acc[r][0] = add ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
        acc[r][1] = add && halves > 1 ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        const float *x = xp + k * NB_GEMM_NT;
        __m512 x0 = _mm512_loadu_ps(x), x1 = halves > 1 ? _mm512_loadu_ps(x + 16) : x0;
#pragma GCC unroll 12
        for (int r = 0; r < KR; r++) {
            __m512 wv = _mm512_set1_ps(wp[r * NB_GEMM_KC + k]);
            acc[r][0] = _mm512_fmadd_ps(wv, x0, acc[r][0]);
            if (halves > 1) acc[r][1] = _mm512_fmadd_ps(wv, x1, acc[r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < KR; r++) {
        _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
        if (halves > 1) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
    }
}

static void gemm_f32(int64_t kc, const float *wp, const float *xp, int64_t nt, float *c, int64_t ldc, bool add) {
    if (nt > 16) tile(2, kc, wp, xp, nt, c, ldc, add);
    else tile(1, kc, wp, xp, nt, c, ldc, add);
}

static const nb_float_kernels k = {"avx512", dot_f32, dot_f16, dot_bf16, f16_to_f32, bf16_to_f32, gemm_f32, swiglu, rmsnorm, add,
                                   dot_f32_m, dot_f16_m, dot_bf16_m, dot_f32_2, dot_f16_2, dot_bf16_2};

const nb_float_kernels *nb_float_kernels_avx512(void) { return &k; }
