/* The paged-attention kernel and the KV element types: the scalar kernel
 * against attention computed here in double over the same K/V (read back
 * through a shuffled block table), the AVX2 kernel against the scalar one
 * for every KV type, fp8 e4m3 codes against values worked out by hand from
 * the format (bias 7, 3 mantissa bits, max 448), and the 8-bit stores'
 * rounding error bounds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/cpu.h"
#include "model/attn.h"
#include "model/kv.h"

static void test_fp8_codes(void **state) {
    (void)state;
    struct { float f; uint8_t c; } v[] = {
        {1.0f, 0x38}, {-2.0f, 0xc0}, {448.0f, 0x7e}, {1000.0f, 0x7e}, {-1e9f, 0xfe}, {0.015625f, 0x08},
        {0.001953125f, 0x01}, {7 * 0.001953125f, 0x07}, {1.0625f, 0x38} /* tie -> even */, {1.1875f, 0x3a},
        {0.0f, 0x00}, {1.75f, 0x3e}, {240.0f, 0x77}, {0.0009765625f, 0x00} /* half of the smallest: tie -> 0 */,
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (nb_fp32_to_fp8_e4m3(v[i].f) != v[i].c)
            fail_msg("e4m3(%g) = 0x%02x, want 0x%02x", v[i].f, nb_fp32_to_fp8_e4m3(v[i].f), v[i].c);
    }
    assert_int_equal(nb_fp32_to_fp8_e4m3(NAN) & 0x7f, 0x7f);
    assert_true(isnan(nb_fp8_e4m3_to_fp32(0x7f)));
    assert_true(nb_fp8_e4m3_to_fp32(0x7e) == 448.0f);
    assert_true(nb_fp8_e4m3_to_fp32(0x01) == 0.001953125f);
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) continue;
        assert_int_equal(nb_fp32_to_fp8_e4m3(nb_fp8_e4m3_to_fp32((uint8_t)c)), c);
    }
}

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65535.0f) * 2.0f - 1.0f;
}

typedef struct fixture {
    nb_hparams hp;
    nb_kv_pool kv;
    int32_t blocks[16];
    float *K, *V; /* [pos][kv_dim] what was stored */
    int32_t n_pos;
} fixture;

static void fill(fixture *f, nb_kv_type t, int32_t hd, unsigned seed) {
    memset(f, 0, sizeof *f);
    f->hp.n_layer = 2;
    f->hp.n_head_kv = 2;
    f->hp.head_dim = hd;
    assert_int_equal(nb_kv_pool_init_type(&f->kv, &f->hp, 4, 16, t), NB_OK);
    /* a shuffled block table */
    for (int i = 0; i < 16; i++) f->blocks[i] = (i * 7 + 3) % 16;
    f->n_pos = 53;
    int32_t kvd = 2 * hd;
    f->K = malloc((size_t)f->n_pos * kvd * sizeof(float));
    f->V = malloc((size_t)f->n_pos * kvd * sizeof(float));
    for (int32_t p = 0; p < f->n_pos; p++) {
        for (int32_t i = 0; i < kvd; i++) {
            f->K[p * kvd + i] = 2.0f * frand(&seed);
            f->V[p * kvd + i] = frand(&seed);
        }
        nb_kv_store(&f->kv, 1, f->blocks[p / 4], p % 4, f->K + p * kvd, f->V + p * kvd);
    }
}

static void unfill(fixture *f) {
    nb_kv_pool_free(&f->kv);
    free(f->K);
    free(f->V);
}

static void run(nb_attn_fn fn, fixture *f, const float *q, int kvh, int32_t n_pos, float *out) {
    float scores[64];
    nb_attn_head a = {&f->kv, 1, f->blocks, n_pos, kvh, q, 0.25f, scores, out, 1};
    fn(&a);
}

static void test_ref_vs_double(void **state) {
    (void)state;
    fixture f;
    fill(&f, NB_KVT_F32, 24, 7);
    unsigned s = 99;
    float q[24], out[24];
    for (int i = 0; i < 24; i++) q[i] = frand(&s);
    for (int32_t n = 1; n <= f.n_pos; n += 13) {
        for (int kvh = 0; kvh < 2; kvh++) {
            run(nb_attn_ref, &f, q, kvh, n, out);
            double sc[64], mx = -1e300, sum = 0;
            for (int32_t p = 0; p < n; p++) {
                double d = 0;
                for (int i = 0; i < 24; i++) d += (double)f.K[p * 48 + kvh * 24 + i] * q[i];
                sc[p] = d * 0.25;
                mx = fmax(mx, sc[p]);
            }
            for (int32_t p = 0; p < n; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int i = 0; i < 24; i++) {
                double o = 0;
                for (int32_t p = 0; p < n; p++) o += sc[p] / sum * f.V[p * 48 + kvh * 24 + i];
                assert_true(fabs(o - out[i]) < 1e-5);
            }
        }
    }
    unfill(&f);
}

/* 8-bit stores: every element within half a quantization step of its value. */
static void test_store_error(void **state) {
    (void)state;
    nb_kv_type ts[] = {NB_KVT_F16, NB_KVT_BF16, NB_KVT_INT8, NB_KVT_FP8};
    for (int t = 0; t < 4; t++) {
        fixture f;
        fill(&f, ts[t], 32, 11);
        float q[32] = {0}, out[32];
        /* one position: attention returns exactly that V row (dequantized) */
        for (int kvh = 0; kvh < 2; kvh++) {
            run(nb_attn_ref, &f, q, kvh, 1, out);
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(f.V[kvh * 32 + i]));
            for (int i = 0; i < 32; i++) {
                float v = f.V[kvh * 32 + i], err = fabsf(out[i] - v), tol;
                switch (ts[t]) {
                case NB_KVT_F16: tol = fabsf(v) * 0x1p-11f + 1e-7f; break;
                case NB_KVT_BF16: tol = fabsf(v) * 0x1p-8f + 1e-7f; break;
                case NB_KVT_INT8: tol = amax / 127.0f / 2.0f * 1.0001f; break;
                default: tol = fmaxf(fabsf(v) * 0x1p-4f, amax / 448.0f * 0x1p-9f) * 1.0001f; break; /* 3 mantissa bits */
                }
                if (err > tol) fail_msg("type %d elem %d: %g stored as %g (tol %g)", ts[t], i, v, out[i], tol);
            }
        }
        unfill(&f);
    }
}

static void test_simd_vs_ref(void **state) {
    (void)state;
    nb_attn_fn simd = nb_attn_avx2();
    if (!simd || nb_cpu_isa() < NB_ISA_AVX2) {
        printf("SKIP: no AVX2 kernel on this machine\n");
        return;
    }
    int32_t hds[] = {8, 64, 128, 20 /* not a multiple of 8: falls back */};
    for (int t = 0; t <= NB_KVT_FP8; t++)
        for (int h = 0; h < 4; h++) {
            fixture f;
            fill(&f, (nb_kv_type)t, hds[h], 5 + (unsigned)t);
            unsigned s = 3;
            float q[128], a[128], b[128];
            for (int i = 0; i < hds[h]; i++) q[i] = frand(&s);
            for (int32_t n = 1; n <= f.n_pos; n += 4)
                for (int kvh = 0; kvh < 2; kvh++) {
                    run(nb_attn_ref, &f, q, kvh, n, a);
                    run(simd, &f, q, kvh, n, b);
                    for (int i = 0; i < hds[h]; i++)
                        if (fabsf(a[i] - b[i]) > 1e-5f * (1 + fabsf(a[i])))
                            fail_msg("type %d hd %d n %d: ref %g simd %g", t, hds[h], n, a[i], b[i]);
                }
            unfill(&f);
        }
}

/* A GQA group (several query heads on one KV head) in one call: every
 * kernel equals the reference run head by head, for head_dim 64 and 128 (the
 * AVX-512 grouped path), 8 and 20 (its fallbacks), groups of 1..7 heads (the
 * AVX-512 kernel keeps four heads' outputs in registers at a time). */
static void test_groups(void **state) {
    (void)state;
    nb_attn_fn kernels[3] = {nb_attn_ref, nb_cpu_isa() >= NB_ISA_AVX2 ? nb_attn_avx2() : NULL,
                             nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512() : NULL};
    const char *names[3] = {"scalar", "avx2", "avx512"};
    int32_t hds[] = {64, 128, 8, 20};
    for (int t = 0; t <= NB_KVT_FP8; t++)
        for (int hi = 0; hi < 4; hi++) {
            const int32_t hd = hds[hi];
            fixture f;
            fill(&f, (nb_kv_type)t, hd, 17 + (unsigned)t);
            unsigned s = 5;
            float q[7 * 128], want[7 * 128], got[7 * 128], scores[7 * 64];
            for (int i = 0; i < 7 * hd; i++) q[i] = frand(&s);
            for (int nq = 1; nq <= 7; nq += 2)
                for (int32_t n = 1; n <= f.n_pos; n += 5)
                    for (int kvh = 0; kvh < 2; kvh++) {
                        for (int h = 0; h < nq; h++) run(nb_attn_ref, &f, q + h * hd, kvh, n, want + h * hd);
                        for (int k = 0; k < 3; k++) {
                            if (!kernels[k]) continue;
                            nb_attn_head a = {&f.kv, 1, f.blocks, n, kvh, q, 0.25f, scores, got, nq};
                            kernels[k](&a);
                            for (int i = 0; i < nq * hd; i++)
                                if (fabsf(want[i] - got[i]) > 1e-5f * (1 + fabsf(want[i])))
                                    fail_msg("%s type %d hd %d nq %d n %d: head %d elem %d ref %g got %g", names[k], t,
                                             hd, nq, n, i / hd, i % hd, want[i], got[i]);
                        }
                    }
            unfill(&f);
        }
}

static void test_copy_block(void **state) {
    (void)state;
    fixture f;
    fill(&f, NB_KVT_INT8, 16, 21);
    float q[16], a[16], b[16];
    unsigned s = 8;
    for (int i = 0; i < 16; i++) q[i] = frand(&s);
    run(nb_attn_ref, &f, q, 1, 8, a); /* positions 0..7: blocks[0], blocks[1] */
    /* copy blocks[1] into a free block and point the table at the copy */
    int32_t used[16] = {0};
    for (int i = 0; i < 14; i++) used[f.blocks[i]] = 1;
    int32_t spare = -1;
    for (int i = 0; i < 16; i++)
        if (!used[i]) spare = i;
    assert_true(spare >= 0);
    nb_kv_copy_block(&f.kv, spare, f.blocks[1]);
    f.blocks[1] = spare;
    run(nb_attn_ref, &f, q, 1, 8, b);
    assert_memory_equal(a, b, sizeof a);
    unfill(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_codes),   cmocka_unit_test(test_ref_vs_double), cmocka_unit_test(test_store_error),
        cmocka_unit_test(test_simd_vs_ref), cmocka_unit_test(test_groups), cmocka_unit_test(test_copy_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
