/* AVX2 + FMA + F16C float kernels: the dots and conversions of
 * kernels/float_x86.h at 8 lanes, and the GEMM micro-kernel. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/x86/vexp.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double hsum256d(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline __m256 load_bf16(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

#define VF __m256
#define VW 8
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VZERO() _mm256_setzero_ps()
#define VADD(a, b) _mm256_add_ps(a, b)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VHSUM(v) hsum256(v)
#define VLOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VLOAD_BF16(p) load_bf16(p)
#define VEXP(v) nb_exp8(v)
#define VSET1(f) _mm256_set1_ps(f)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define DV __m256d
#define DZERO() _mm256_setzero_pd()
#define DSQ(p, acc) ({ const __m256d d_ = _mm256_cvtps_pd(_mm_loadu_ps(p)); _mm256_fmadd_pd(d_, d_, acc); })
#define DHSUM(v) hsum256d(v)
#include "kernels/float_x86.h"

/* The GEMM micro-kernel (contract in kernels.h) as 6 rows x 16 tokens at a
 * time: 12 ymm accumulators, 2 token vectors per k, each weight broadcast
 * from the packed panel into two FMAs; the 12 x 32 tile is up to four such
 * passes (the token half past nt is skipped). The accumulators are named
 * variables: held in an array (with a partial-tile path taking its address)
 * GCC 12 stored all twelve to the stack on every k step, and F16 prefill
 * at --isa avx2 ran at about half the FMA rate. A partial tile (nt < 16)
 * goes through a full one on the stack. */
#define ACC6(X) X(0) X(1) X(2) X(3) X(4) X(5)
static inline __attribute__((always_inline)) void tile_6x16(int64_t kc, const float *wp, const float *xp, float *c,
                                                            int64_t ldc, bool add) {
#define DECL(r) __m256 a##r##0 = add ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps(), \
                       a##r##1 = add ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
    ACC6(DECL)
#undef DECL
    for (int64_t k = 0; k < kc; k++) {
        __m256 x0 = _mm256_loadu_ps(xp + k * NB_GEMM_NT), x1 = _mm256_loadu_ps(xp + k * NB_GEMM_NT + 8);
#define STEP(r)                                                                                                  \
    {                                                                                                            \
        __m256 wv = _mm256_broadcast_ss(wp + r * NB_GEMM_KC + k);                                                \
        a##r##0 = _mm256_fmadd_ps(wv, x0, a##r##0);                                                              \
        a##r##1 = _mm256_fmadd_ps(wv, x1, a##r##1);                                                              \
    }
        ACC6(STEP)
#undef STEP
    }
#define STORE(r) _mm256_storeu_ps(c + r * ldc, a##r##0); _mm256_storeu_ps(c + r * ldc + 8, a##r##1);
    ACC6(STORE)
#undef STORE
}

static void panel_6x16(int64_t kc, const float *wp, const float *xp, int64_t nt, float *c, int64_t ldc, bool add) {
    if (nt >= 16) {
        tile_6x16(kc, wp, xp, c, ldc, add);
        return;
    }
    float t[6 * 16] = {0};
    if (add)
        for (int r = 0; r < 6; r++)
            for (int64_t j = 0; j < nt; j++) t[r * 16 + j] = c[r * ldc + j];
    tile_6x16(kc, wp, xp, t, 16, add);
    for (int r = 0; r < 6; r++)
        for (int64_t j = 0; j < nt; j++) c[r * ldc + j] = t[r * 16 + j];
}

static void gemm_f32(int64_t kc, const float *wp, const float *xp, int64_t nt, float *c, int64_t ldc, bool add) {
    for (int64_t t = 0; t < nt; t += 16)
        for (int r = 0; r < NB_GEMM_MR; r += 6)
            panel_6x16(kc, wp + r * NB_GEMM_KC, xp + t, NB_MIN(16, nt - t), c + r * ldc + t, ldc, add);
}

static const nb_float_kernels k = {"avx2", dot_f32, dot_f16, dot_bf16, f16_to_f32, bf16_to_f32, gemm_f32, swiglu, rmsnorm, add,
                                   dot_f32_m, dot_f16_m, dot_bf16_m, dot_f32_2, dot_f16_2, dot_bf16_2};

const nb_float_kernels *nb_float_kernels_avx2(void) { return &k; }
