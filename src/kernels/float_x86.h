/* The float dot products and f16/bf16 -> f32 conversions, written once for
 * kernels/x86/float_avx2.c (8 lanes) and float_avx512.c (16 lanes). Include
 * only from those files, after defining for the vector width:
 *   VF            the float vector type
 *   VW            lanes per vector
 *   VLOAD(p)      load VW floats      VSTORE(p, v)   store them
 *   VZERO()       zero vector         VADD(a, b)     add
 *   VFMA(a, b, c) a*b + c             VHSUM(v)       sum of the lanes
 *   VLOAD_F16(p)  VW fp16 -> floats   VLOAD_BF16(p)  VW bf16 -> floats
 *   VEXP(v)       e^v per lane (kernels/x86/vexp.h)
 *   VSET1(f)      broadcast            VMUL(a, b) / VDIV(a, b)
 * Four accumulators; weights prefetched ahead (decode
 * streams every weight once): 2 KiB took F16 decode on the TinyLlama shape
 * from 12.0 to 14.4 tok/s, 83% -> 97% of the read-bandwidth roofline (1 and
 * 4 KiB: 13.3-13.8); docs/performance.md. */
#include "base/half.h"

/* Each step of 4*VW elements prefetches two lines nb_prefetch_bytes ahead
 * (kernels.h: a dispatch choice per CPU), as measured in
 * docs/performance.md (at 8 lanes of 2-byte weights one of them repeats the
 * previous step's second: kept as measured). */
#define DOT_BODY(LOAD, SCALAR, ES)                                                               \
    const int pf = nb_prefetch_bytes;                                                             \
    VF a0 = VZERO(), a1 = a0, a2 = a0, a3 = a0;                                                   \
    int64_t i = 0;                                                                                \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                                        \
        _mm_prefetch((const char *)(a + i) + pf, _MM_HINT_T0);                                    \
        _mm_prefetch((const char *)(a + i) + pf + 64, _MM_HINT_T0);                               \
        if (4 * VW * ES > 128) {                                                                  \
            _mm_prefetch((const char *)(a + i) + pf + 128, _MM_HINT_T0);                          \
            _mm_prefetch((const char *)(a + i) + pf + 192, _MM_HINT_T0);                          \
        }                                                                                         \
        a0 = VFMA(LOAD(a + i), VLOAD(x + i), a0);                                                 \
        a1 = VFMA(LOAD(a + i + VW), VLOAD(x + i + VW), a1);                                       \
        a2 = VFMA(LOAD(a + i + 2 * VW), VLOAD(x + i + 2 * VW), a2);                               \
        a3 = VFMA(LOAD(a + i + 3 * VW), VLOAD(x + i + 3 * VW), a3);                               \
    }                                                                                             \
    for (; i + VW <= n; i += VW) a0 = VFMA(LOAD(a + i), VLOAD(x + i), a0);                        \
    float s = VHSUM(VADD(VADD(a0, a1), VADD(a2, a3)));                                            \
    for (; i < n; i++) s += SCALAR(a[i]) * x[i];                                                  \
    return s;

#define ID(v) (v)

static float dot_f32(int64_t n, const void *w, const float *x) {
    const float *a = w;
    DOT_BODY(VLOAD, ID, 4)
}
static float dot_f16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    DOT_BODY(VLOAD_F16, nb_fp16_to_fp32, 2)
}
static float dot_bf16(int64_t n, const void *w, const float *x) {
    const uint16_t *a = w;
    DOT_BODY(VLOAD_BF16, nb_bf16_to_fp32, 2)
}

static void f16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    int64_t i = 0;
    for (; i + VW <= n; i += VW) VSTORE(dst + i, VLOAD_F16(a + i));
    for (; i < n; i++) dst[i] = nb_fp16_to_fp32(a[i]);
}

static void bf16_to_f32(int64_t n, const void *src, float *dst) {
    const uint16_t *a = src;
    int64_t i = 0;
    for (; i + VW <= n; i += VW) VSTORE(dst + i, VLOAD_BF16(a + i));
    for (; i < n; i++) dst[i] = nb_bf16_to_fp32(a[i]);
}

/* SwiGLU (kernels.h): was libm's expf per element on the calling thread,
 * 2% of the samples of a TinyLlama prefill while the other threads spun.
 * The tail goes through a padded vector too: every element gets the same
 * operations wherever it sits, so a token's activations do not depend on
 * the batch it came in (test_ppl compares a 2- and a 3-token pass). */
static inline VF swiglu_v(VF x, VF u) {
    return VMUL(VDIV(x, VADD(VSET1(1.0f), VEXP(VSUB(VZERO(), x)))), u);
}
static void swiglu(int64_t n, float *g, const float *u) {
    int64_t i = 0;
    for (; i + VW <= n; i += VW) VSTORE(g + i, swiglu_v(VLOAD(g + i), VLOAD(u + i)));
    if (i < n) {
        float tg[VW] = {0}, tu[VW] = {0};
        memcpy(tg, g + i, (size_t)(n - i) * sizeof *g);
        memcpy(tu, u + i, (size_t)(n - i) * sizeof *u);
        VSTORE(tg, swiglu_v(VLOAD(tg), VLOAD(tu)));
        memcpy(g + i, tg, (size_t)(n - i) * sizeof *g);
    }
}
