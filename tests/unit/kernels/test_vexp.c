/* The vector exponentials of kernels/x86/vexp.h against libm in double:
 * nb_exp2_16 (the AMX attention's base-2 softmax) within 1.2e-7 relative
 * over every float step of [-126, 20) near the ends and a dense grid in
 * between, exactly 0 below -126 and for -inf and NaN; nb_exp16 (the
 * AVX-512 softmaxes and SwiGLU) within 2.5e-7 over [-87, 88], 0 below
 * -87.34. The functions are compiled here for AVX-512 (a target pragma,
 * as the kernels' files are built with -mavx512*) and run only where the
 * CPU has AVX512F and AVX512DQ; elsewhere the test counts as skipped. */
#include <math.h>
#include <stdio.h>

#include "base/cpu.h"
#include "testutil.h"

#if defined(__GNUC__) && !defined(__clang__) /* GCC defines the ISA macros the header tests after this pragma */
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq")
#endif
#include "kernels/x86/vexp.h"
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define HAVE_VEXP16 1

/* The largest relative error of f over n points x0, x0 + dx, ... against
 * base^x in double; fails on a non-finite result. */
static double worst_rel(__m512 (*f)(__m512), double base, float x0, float dx, int n) {
    double worst = 0;
    float xs[16], ys[16];
    for (int i = 0; i < n; i += 16) {
        for (int l = 0; l < 16; l++) xs[l] = x0 + dx * (float)(i + l);
        _mm512_storeu_ps(ys, f(_mm512_loadu_ps(xs)));
        for (int l = 0; l < 16; l++) {
            const double want = pow(base, (double)xs[l]);
            if (!isfinite(ys[l])) fail_msg("%g^%.9g: got %g", base, xs[l], ys[l]);
            const double e = fabs((double)ys[l] - want) / want;
            if (e > worst) worst = e;
        }
    }
    return worst;
}

/* Every lane of f(x) exactly 0 for the given inputs. */
static void expect_zero(__m512 (*f)(__m512), const float *xs, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        float ys[16];
        _mm512_storeu_ps(ys, f(_mm512_set1_ps(xs[i])));
        for (int l = 0; l < 16; l++)
            if (ys[l] != 0.0f || signbit(ys[l])) fail_msg("%s(%g) = %g, want 0", name, xs[i], ys[l]);
    }
}

static __m512 exp2_16(__m512 x) { return nb_exp2_16(x); }
static __m512 exp_16(__m512 x) { return nb_exp16(x); }
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static void need_avx512(void) {
#ifndef HAVE_VEXP16
    NB_TEST_SKIP("this compiler did not build the AVX-512 functions (no GCC target pragma)");
#endif
    const nb_cpu *c = nb_cpu_get();
    if (!c->avx512f || !c->avx512dq) NB_TEST_SKIP("no AVX512F + AVX512DQ on this CPU");
}

static void test_exp2_16(void **state) {
    (void)state;
    need_avx512();
#ifdef HAVE_VEXP16
    double w = worst_rel(exp2_16, 2.0, -126.0f, 1.0f / 4096, 146 * 4096); /* [-126, 20) */
    /* the reduction's ends, finely: each side of some integers */
    for (int k = -125; k <= 19; k += 8) {
        const double e = worst_rel(exp2_16, 2.0, (float)k - 0x1p-9f, 0x1p-20f, 2048);
        if (e > w) w = e;
    }
    fprintf(stderr, "  nb_exp2_16: largest relative error %.3g\n", w);
    if (w > 1.2e-7) fail_msg("nb_exp2_16: relative error %.3g, want <= 1.2e-7", w);
    const float zero[] = {-126.5f, -127.0f, -150.0f, -1e30f, -INFINITY, NAN};
    expect_zero(exp2_16, zero, (int)(sizeof zero / sizeof *zero), "nb_exp2_16");
#endif
}

static void test_exp16(void **state) {
    (void)state;
    need_avx512();
#ifdef HAVE_VEXP16
    const double w = worst_rel(exp_16, M_E, -87.0f, 1.0f / 1024, 175 * 1024); /* [-87, 88) */
    fprintf(stderr, "  nb_exp16: largest relative error %.3g\n", w);
    if (w > 2.5e-7) fail_msg("nb_exp16: relative error %.3g, want <= 2.5e-7", w);
    const float zero[] = {-87.5f, -100.0f, -INFINITY};
    expect_zero(exp_16, zero, (int)(sizeof zero / sizeof *zero), "nb_exp16");
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp2_16),
        cmocka_unit_test(test_exp16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
