/* Test inputs and checks for the repacked-kernel tests (test_repack,
 * test_repack_avx2, test_sbatch, test_sbatch_avx2, test_gemm_amx): a
 * xorshift generator, GGUF rows with extreme codes, float inputs with
 * extreme patterns, and the check of an int8 GEMM's output against the
 * scalar reference dot. Header-only: one include per test binary. */
#ifndef NB_TEST_KERNEL_INPUTS_H
#define NB_TEST_KERNEL_INPUTS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/blocks.h"
#include "base/dtype.h"
#include "base/half.h"
#include "kernels/qdot.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static inline uint64_t next(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
/* uniform in [-1, 1) */
static inline float frand(void) { return (float)((next() >> 11) * (1.0 / 9007199254740992.0) * 2 - 1); }

/* Rows of GGUF blocks of `gguf` with codes from `mode` (0 random bytes, 1 all
 * bytes 0xff, 2 all 0x00 / the minimum: Q8_0 -128, Q6_K scales -128; W4G's
 * zero points 255 or 0) and sane scales. */
static inline void fill_rows(nb_dtype gguf, uint8_t *g, uint64_t bytes, int mode) {
    for (uint64_t i = 0; i < bytes; i++) g[i] = mode == 0 ? (uint8_t)next() : mode == 1 ? 0xff : 0x00;
    const nb_half d = nb_fp32_to_fp16(0.02f), dm = nb_fp32_to_fp16(0.01f);
    if (gguf == NB_Q4_0)
        for (nb_block_q4_0 *b = (nb_block_q4_0 *)g; (uint8_t *)(b + 1) <= g + bytes; b++) b->d = d;
    if (gguf == NB_Q8_0)
        for (nb_block_q8_0 *b = (nb_block_q8_0 *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            if (mode == 2) memset(b->qs, 0x80, 32); /* -128 */
        }
    if (gguf == NB_Q4_K)
        for (nb_block_q4_K *b = (nb_block_q4_K *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            b->dmin = dm;
        }
    if (gguf == NB_W8)
        for (nb_block_w8 *b = (nb_block_w8 *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = 0.02f;
            if (mode == 2) memset(b->qs, 0x80, 32); /* -128 */
        }
    if (gguf >= NB_W4G32 && gguf <= NB_W4G128S) { /* header: d, z (any byte: 0..255), pad */
        const int group = 32 << ((gguf - NB_W4G32) % 3);
        for (uint64_t o = 0; o + NB_W4_BLOCK_BYTES(group) <= bytes; o += NB_W4_BLOCK_BYTES(group)) memcpy(g + o, &d, 2);
    }
    if (gguf == NB_Q6_K)
        for (nb_block_q6_K *b = (nb_block_q6_K *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            if (mode == 2) memset(b->scales, 0x80, 16); /* -128 */
        }
}

/* nibble's own types and the planar layouts they load as (repack.h). */
static const nb_dtype nb_test_own_types[][2] = {
    {NB_W8, NB_W8R}, {NB_W4G32, NB_W4G32R}, {NB_W4G64, NB_W4G64R}, {NB_W4G128, NB_W4G128R}};
#define NB_TEST_OWN_TYPES (sizeof nb_test_own_types / sizeof *nb_test_own_types)
/* The lane-order forms the AVX2 file's kernels load (kernels/repack.h Q4_0L). */
static const nb_dtype nb_test_lane_types[][2] = {
    {NB_Q4_0, NB_Q4_0L}, {NB_W4G32, NB_W4G32L}, {NB_W4G64, NB_W4G64L}, {NB_W4G128, NB_W4G128L}, {NB_W4G128S, NB_W4G128L},
    {NB_Q8_0, NB_Q8_0L}, {NB_W8, NB_W8L}};
#define NB_TEST_LANE_TYPES (sizeof nb_test_lane_types / sizeof *nb_test_lane_types)

/* pattern 0: random; 1: every weight the max, activations one-hot large;
 * 2: weights alternating +-max, activations +-large in every block. */
static inline void fill_patterns(float *w, int64_t nw, float *x, int64_t nx, int pattern) {
    for (int64_t i = 0; i < nw; i++) w[i] = pattern == 1 ? 1.0f : pattern == 2 ? (i & 1 ? -1.0f : 1.0f) : frand();
    for (int64_t i = 0; i < nx; i++) {
        if (pattern == 0) x[i] = frand() * 2;
        else if (pattern == 1) x[i] = (i % 37 == 0) ? 100.0f : frand();
        else x[i] = (i % 32 == 5) ? -50.0f : (i % 32 == 9 ? 50.0f : frand() * 0.01f);
    }
}

/* y[t*R + r] (tokens t = 0, tstep, ... < n; rows r < R of the repacked
 * weights p, row_bytes prb, quantized from w) within 1e-5 of sum |w*x| of
 * the scalar reference dot on each token's own quantization (x: n rows of
 * K floats). `what` names the kernel in a failure. */
static inline void expect_near_ref(const nb_qdot *ref, const uint8_t *p, uint64_t prb, const float *w, const float *x,
                                   int64_t K, int64_t R, int64_t n, int64_t tstep, const float *y, const char *what) {
    uint64_t arb;
    assert_true(nb_dtype_row_bytes(ref->act_type, (uint64_t)K, &arb));
    uint8_t *a = malloc(arb);
    for (int64_t t = 0; t < n; t += tstep) {
        ref->quantize_act(x + t * K, a, K);
        for (int64_t r = 0; r < R; r++) {
            float want;
            ref->vec_dot(K, p + r * prb, a, &want);
            double mag = 0;
            for (int64_t i = 0; i < K; i++) mag += fabs((double)w[r * K + i] * x[t * K + i]);
            if (!(fabs(y[t * R + r] - want) <= 1e-5 * mag + 1e-5))
                fail_msg("%s K=%lld n=%lld t=%lld r=%lld: %g, scalar reference %g", what, (long long)K, (long long)n,
                         (long long)t, (long long)r, (double)y[t * R + r], (double)want);
        }
    }
    free(a);
}

#endif
