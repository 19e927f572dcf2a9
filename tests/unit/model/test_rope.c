/* llama3 RoPE frequency scaling with Llama 3.1's published parameters must
 * leave high-frequency pairs alone, divide low-frequency ones by the factor
 * and interpolate in between, as HF's formulation (new frequency, computed
 * here in double) defines it; nibble stores the divisors freq/new_freq, the
 * form of GGUF's rope_freqs.weight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "testutil.h"

static void test_llama3_factors(void **state) {
    (void)state;
    /* Llama 3.1's published rope_scaling (config.json) */
    nb_arch_desc hp = {0};
    hp.rope_theta = 500000.0f;
    hp.rope_dim = 128;
    hp.rope_scaling = NB_ROPE_SCALING_LLAMA3;
    hp.rope_factor = 8;
    hp.rope_low_freq_factor = 1;
    hp.rope_high_freq_factor = 4;
    hp.rope_orig_ctx = 8192;
    float ff[64];
    nb_rope_llama3_factors(&hp, ff);
    int n_one = 0, n_full = 0, n_mid = 0;
    for (int i = 0; i < 64; i++) {
        double freq = pow(500000.0, -2.0 * i / 128), wl = 2 * M_PI / freq;
        if (wl < 8192 / 4.0) { assert_float_equal(ff[i], 1.0, 1e-6); n_one++; }
        else if (wl > 8192 / 1.0) { assert_float_equal(ff[i], 8.0, 1e-6); n_full++; }
        else {
            double smooth = (8192 / wl - 1) / (4 - 1);
            double new_freq = (1 - smooth) * freq / 8 + smooth * freq; /* HF's formulation */
            assert_float_equal(ff[i], freq / new_freq, 1e-4);
            assert_true(ff[i] > 1 && ff[i] < 8);
            n_mid++;
        }
    }
    fprintf(stderr, "  llama3 rope: %d pairs unscaled, %d scaled by 8, %d interpolated\n", n_one, n_full, n_mid);
    assert_true(n_one > 0 && n_full > 0 && n_mid > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama3_factors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
