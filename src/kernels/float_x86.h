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
 *   DV            a double vector of VW / 2 lanes: DZERO(), DHSUM(v),
 *   DSQ(p, acc)   acc + (double)p[j]^2 for the VW / 2 floats at p
 * Four accumulators; weights prefetched ahead (decode
 * streams every weight once): 2 KiB took F16 decode on the TinyLlama shape
 * from 12.0 to 14.4 tok/s, 83% -> 97% of the read-bandwidth roofline (1 and
 * 4 KiB: 13.3-13.8); docs/performance.md. */
#include "base/half.h"
#include "kernels/x86/prefetch_here.h"

/* Each step of 4*VW elements prefetches its lines nb_prefetch_bytes ahead
 * (and nb_prefetch_l2_bytes into L2; kernels.h: choices per CPU), as
 * measured in docs/performance.md (at 8 lanes of 2-byte weights one of them repeats the
 * previous step's second: kept as measured), half of them before the
 * step's first loads and half before its last: F16 decode 14.29-14.87 ->
 * 14.49-15.04 tok/s over 7 interleaved pairs with all of them first (the
 * probe's loop read up to 18% less with a burst of prefetches; docs/
 * speed.md, session 26). Until session 29 GCC's scheduler put them all
 * first again in the AVX-512 build; kernels/x86/prefetch_here.h keeps
 * them where they are written. */
#define DOT_ROWS(NAME, ETYPE, LOAD, SCALAR, ES)                                                          \
    /* M rows (w_stride bytes apart) read in lockstep, 4*VW elements of each   \
     * in turn (decode's several streams per thread, matmul.c); each row's     \
     * operations and their order do not depend on M */                        \
    static inline __attribute__((always_inline)) void NAME##_lockstep(int64_t n, const void *w, size_t w_stride, \
                                                                    const float *x, float *y, size_t ldy,    \
                                                                    const int M) {                           \
        const int pf = nb_prefetch_bytes, pf2 = nb_prefetch_l2_bytes;                                         \
        const ETYPE *a[4];                                                                                    \
        VF a0[4], a1[4], a2[4], a3[4];                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) {                                                 \
            a[r] = (const ETYPE *)((const uint8_t *)w + (size_t)r * w_stride);                                \
            a0[r] = a1[r] = a2[r] = a3[r] = VZERO();                                                          \
        }                                                                                                     \
        int64_t i = 0;                                                                                        \
        for (; i + 4 * VW <= n; i += 4 * VW) {                                                                \
            _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) {                                             \
                nb_prefetch_ahead((const char *)(a[r] + i), pf, pf2);                                         \
                if (4 * VW * ES > 128) nb_prefetch_ahead((const char *)(a[r] + i) + 64, pf, pf2);             \
                a0[r] = VFMA(LOAD(a[r] + i), VLOAD(x + i), a0[r]);                                            \
                a1[r] = VFMA(LOAD(a[r] + i + VW), VLOAD(x + i + VW), a1[r]);                                  \
                nb_prefetch_ahead((const char *)(a[r] + i) + (4 * VW * ES > 128 ? 128 : 64), pf, pf2);        \
                if (4 * VW * ES > 128) nb_prefetch_ahead((const char *)(a[r] + i) + 192, pf, pf2);            \
                a2[r] = VFMA(LOAD(a[r] + i + 2 * VW), VLOAD(x + i + 2 * VW), a2[r]);                          \
                a3[r] = VFMA(LOAD(a[r] + i + 3 * VW), VLOAD(x + i + 3 * VW), a3[r]);                          \
            }                                                                                                 \
        }                                                                                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) {                                                 \
            int64_t j = i;                                                                                    \
            for (; j + VW <= n; j += VW) a0[r] = VFMA(LOAD(a[r] + j), VLOAD(x + j), a0[r]);                   \
            float s = VHSUM(VADD(VADD(a0[r], a1[r]), VADD(a2[r], a3[r])));                                    \
            for (; j < n; j++) s += SCALAR(a[r][j]) * x[j];                                                   \
            y[(size_t)r * ldy] = s;                                                                           \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME(int64_t n, int64_t rows, const void *w, size_t row_bytes, const float *x, float *y) {    \
        for (int64_t r = 0; r < rows; r++)                                                                    \
            NAME##_lockstep(n, (const uint8_t *)w + (size_t)r * row_bytes, 0, x, y + r, 0, 1);                \
    }                                                                                                         \
    /* One row against two tokens (x, x + ldx): each weight vector converted  \
     * once for both, each token's operations and their order those of the   \
     * one-row dot above, so y[0] and y[ldy] are its results bit for bit */   \
    static void NAME##_2(int64_t n, const void *w, const float *x, size_t ldx, float *y, size_t ldy) {        \
        const int pf = nb_prefetch_bytes, pf2 = nb_prefetch_l2_bytes;                                         \
        const ETYPE *a = w;                                                                                   \
        const float *x1 = x + ldx;                                                                            \
        VF p0 = VZERO(), p1 = VZERO(), p2 = VZERO(), p3 = VZERO();                                            \
        VF q0 = VZERO(), q1 = VZERO(), q2 = VZERO(), q3 = VZERO();                                            \
        int64_t i = 0;                                                                                        \
        for (; i + 4 * VW <= n; i += 4 * VW) {                                                                \
            nb_prefetch_ahead((const char *)(a + i), pf, pf2);                                                \
            if (4 * VW * ES > 128) nb_prefetch_ahead((const char *)(a + i) + 64, pf, pf2);                    \
            const VF w0 = LOAD(a + i), w1 = LOAD(a + i + VW);                                                 \
            p0 = VFMA(w0, VLOAD(x + i), p0);                                                                  \
            q0 = VFMA(w0, VLOAD(x1 + i), q0);                                                                 \
            p1 = VFMA(w1, VLOAD(x + i + VW), p1);                                                             \
            q1 = VFMA(w1, VLOAD(x1 + i + VW), q1);                                                            \
            nb_prefetch_ahead((const char *)(a + i) + (4 * VW * ES > 128 ? 128 : 64), pf, pf2);               \
            if (4 * VW * ES > 128) nb_prefetch_ahead((const char *)(a + i) + 192, pf, pf2);                   \
            const VF w2 = LOAD(a + i + 2 * VW), w3 = LOAD(a + i + 3 * VW);                                    \
            p2 = VFMA(w2, VLOAD(x + i + 2 * VW), p2);                                                         \
            q2 = VFMA(w2, VLOAD(x1 + i + 2 * VW), q2);                                                        \
            p3 = VFMA(w3, VLOAD(x + i + 3 * VW), p3);                                                         \
            q3 = VFMA(w3, VLOAD(x1 + i + 3 * VW), q3);                                                        \
        }                                                                                                     \
        for (; i + VW <= n; i += VW) {                                                                        \
            const VF w0 = LOAD(a + i);                                                                        \
            p0 = VFMA(w0, VLOAD(x + i), p0);                                                                  \
            q0 = VFMA(w0, VLOAD(x1 + i), q0);                                                                 \
        }                                                                                                     \
        float s = VHSUM(VADD(VADD(p0, p1), VADD(p2, p3))), t = VHSUM(VADD(VADD(q0, q1), VADD(q2, q3)));       \
        for (; i < n; i++) {                                                                                  \
            s += SCALAR(a[i]) * x[i];                                                                         \
            t += SCALAR(a[i]) * x1[i];                                                                        \
        }                                                                                                     \
        y[0] = s;                                                                                             \
        y[ldy] = t;                                                                                           \
    }                                                                                                         \
    static void NAME##_m(int64_t n, int m, const void *w, size_t w_stride, const float *x, float *y, size_t ldy) { \
        switch (m) {                                                                                          \
        case 1: NAME##_lockstep(n, w, w_stride, x, y, ldy, 1); break;                                         \
        case 2: NAME##_lockstep(n, w, w_stride, x, y, ldy, 2); break;                                         \
        case 3: NAME##_lockstep(n, w, w_stride, x, y, ldy, 3); break;                                         \
        default: NAME##_lockstep(n, w, w_stride, x, y, ldy, 4); break;                                        \
        }                                                                                                     \
    }

#define ID(v) (v)

DOT_ROWS(dot_f32, float, VLOAD, ID, 4)
DOT_ROWS(dot_f16, uint16_t, VLOAD_F16, nb_fp16_to_fp32, 2)
DOT_ROWS(dot_bf16, uint16_t, VLOAD_BF16, nb_bf16_to_fp32, 2)

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

/* The sum of squares in two double accumulators of VW / 2 lanes (a double
 * sum one element at a time was latency-bound: 4 cycles per element on the
 * calling thread while the others waited), the scaling in float as the
 * reference does it: x * r, then * w. */
static void rmsnorm(int64_t n, float *out, const float *x, const float *w, float eps) {
    DV s0 = DZERO(), s1 = DZERO();
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        s0 = DSQ(x + i, s0);
        s1 = DSQ(x + i + VW / 2, s1);
    }
    double ss = DHSUM(s0) + DHSUM(s1);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    const VF rv = VSET1(r);
    for (i = 0; i + VW <= n; i += VW) VSTORE(out + i, VMUL(VMUL(VLOAD(x + i), rv), VLOAD(w + i)));
    for (; i < n; i++) out[i] = x[i] * r * w[i];
}

static void add(int64_t n, float *x, const float *y) {
    int64_t i = 0;
    for (; i + VW <= n; i += VW) VSTORE(x + i, VADD(VLOAD(x + i), VLOAD(y + i)));
    for (; i < n; i++) x[i] += y[i];
}
