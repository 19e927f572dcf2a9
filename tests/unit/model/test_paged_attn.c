/* The flash attention kernels (kernels/attn.h) and the KV element types:
 * the scalar kernel against attention computed here in double over the
 * same K/V (read back through a shuffled block table; causal tiles, GQA
 * groups), every SIMD kernel against the scalar one for every KV type over
 * tiles that cross block and key-chunk boundaries (odd lengths, one token,
 * odd head sizes), the batch driver (model/attn.h) against the kernel run
 * token by token, fp8 e4m3 codes against values worked out by hand from the
 * format (bias 7, 3 mantissa bits, max 448), the 8-bit stores'
 * rounding error bounds, and the pool's commit (every page of K, V and the
 * scales resident after it, by mincore). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

#include "base/cpu.h"
#include "base/threadpool.h"
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
    /* the kernels' table decodes every code as the store's inverse does */
    const float *lut = nb_attn_fp8_table();
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) { assert_true(isnan(lut[c])); continue; }
        if (lut[c] != nb_fp8_e4m3_to_fp32((uint8_t)c)) fail_msg("fp8 table 0x%02x: %g vs %g", c, lut[c], nb_fp8_e4m3_to_fp32((uint8_t)c));
    }
}

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65535.0f) * 2.0f - 1.0f;
}

#define NPOS 70
#define NBLK 40

typedef struct fixture {
    nb_arch_desc hp;
    nb_kv_pool kv;
    nb_attn_kv view;
    int32_t blocks[NBLK];
    float *K, *V; /* [pos][kv_dim] what was stored */
    int32_t n_pos, bs;
} fixture;

/* 70 positions of layer 1 of a 2-layer, 2-KV-head pool, through a shuffled
 * block table of block_size bs. */
static void fill_bs(fixture *f, nb_kv_type t, int32_t hd, unsigned seed, int32_t bs) {
    memset(f, 0, sizeof *f);
    f->hp.n_layer = 2;
    f->hp.n_head_kv = 2;
    f->hp.head_dim = hd;
    f->bs = bs;
    assert_int_equal(nb_kv_pool_init_type(&f->kv, &f->hp, bs, NBLK, t), NB_OK);
    for (int i = 0; i < NBLK; i++) f->blocks[i] = (i * 7 + 3) % NBLK;
    f->n_pos = NPOS;
    int32_t kvd = 2 * hd;
    f->K = malloc((size_t)f->n_pos * kvd * sizeof(float));
    f->V = malloc((size_t)f->n_pos * kvd * sizeof(float));
    for (int32_t p = 0; p < f->n_pos; p++) {
        for (int32_t i = 0; i < kvd; i++) {
            f->K[p * kvd + i] = 2.0f * frand(&seed);
            f->V[p * kvd + i] = frand(&seed);
        }
        nb_kv_store(&f->kv, 1, f->blocks[p / bs], p % bs, f->K + p * kvd, f->V + p * kvd);
    }
    nb_kv_layer_view(&f->kv, 1, &f->view);
}

static void fill(fixture *f, nb_kv_type t, int32_t hd, unsigned seed) { fill_bs(f, t, hd, seed, 4); }

static void unfill(fixture *f) {
    nb_kv_pool_free(&f->kv);
    free(f->K);
    free(f->V);
}

/* A tile of nt tokens at pos0.. x nq heads; q and out [nt][nq][hd]. */
static void run_tile(nb_attn_fn fn, fixture *f, const float *q, float *out, int kvh, int nq, int nt, int32_t pos0) {
    int hd = f->hp.head_dim;
    float *scratch = aligned_alloc(64, (nb_attn_scratch_floats(hd, nq, nt) * sizeof(float) + 63) & ~(size_t)63);
    assert_non_null(scratch);
    nb_attn_tile t = {&f->view, f->blocks, kvh, nq, nt, pos0, q, (int64_t)nq * hd, out, (int64_t)nq * hd, 0.25f, scratch, NULL};
    fn(&t);
    free(scratch);
}

/* One query at position n - 1. */
static void run(nb_attn_fn fn, fixture *f, const float *q, int kvh, int32_t n_pos, float *out) {
    run_tile(fn, f, q, out, kvh, 1, 1, n_pos - 1);
}

/* Attention in double from the floats that were stored (f32 pools only). */
static double want_elem(const fixture *f, const float *q, int kvh, int32_t n, int i) {
    int hd = f->hp.head_dim, kvd = 2 * hd;
    double sc[NPOS], mx = -1e300, sum = 0, o = 0;
    for (int32_t p = 0; p < n; p++) {
        double d = 0;
        for (int j = 0; j < hd; j++) d += (double)f->K[p * kvd + kvh * hd + j] * q[j];
        sc[p] = d * 0.25;
        mx = fmax(mx, sc[p]);
    }
    for (int32_t p = 0; p < n; p++) sum += (sc[p] = exp(sc[p] - mx));
    for (int32_t p = 0; p < n; p++) o += sc[p] / sum * f->V[p * kvd + kvh * hd + i];
    return o;
}

static void test_ref_vs_double(void **state) {
    (void)state;
    fixture f;
    fill(&f, NB_KVT_F32, 24, 7);
    unsigned s = 99;
    float q[24], out[24];
    for (int i = 0; i < 24; i++) q[i] = frand(&s);
    for (int32_t n = 1; n <= f.n_pos; n += 13)
        for (int kvh = 0; kvh < 2; kvh++) {
            run(nb_attn_ref, &f, q, kvh, n, out);
            for (int i = 0; i < 24; i++) assert_true(fabs(want_elem(&f, q, kvh, n, i) - out[i]) < 1e-5);
        }
    unfill(&f);
}

/* A causal GQA tile in one call: token i of the tile sees positions
 * 0..pos0+i only, each of its heads its own query. */
static void test_ref_tile_causal(void **state) {
    (void)state;
    fixture f;
    fill(&f, NB_KVT_F32, 16, 9);
    enum { NT = 11, NQ = 3, HD = 16 };
    unsigned s = 4;
    float q[NT * NQ * HD], out[NT * NQ * HD];
    for (int i = 0; i < NT * NQ * HD; i++) q[i] = frand(&s);
    for (int32_t pos0 = 0; pos0 + NT <= f.n_pos; pos0 += 29)
        for (int kvh = 0; kvh < 2; kvh++) {
            run_tile(nb_attn_ref, &f, q, out, kvh, NQ, NT, pos0);
            for (int t = 0; t < NT; t++)
                for (int h = 0; h < NQ; h++)
                    for (int i = 0; i < HD; i++) {
                        double w = want_elem(&f, q + (t * NQ + h) * HD, kvh, pos0 + t + 1, i);
                        float g = out[(t * NQ + h) * HD + i];
                        if (fabs(w - g) > 1e-5) fail_msg("pos0 %d token %d head %d elem %d: %g want %g", pos0, t, h, i, g, w);
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

/* Every SIMD kernel the CPU runs against the scalar one on the same tiles:
 * each KV type; head sizes 64 and 128 (compiled as constants) and 8, 20, 36
 * (run-time, with column tails); GQA groups 1, 3, 8 (rows not a multiple of
 * the vector); tiles of 1..33 tokens starting anywhere, so key chunks of
 * NB_ATTN_KC and KV blocks of 4, 5 and 16 are crossed at every offset and
 * the causal diagonal falls inside, at the start of and across chunks. */
static void test_simd_vs_ref(void **state) {
    (void)state;
    nb_attn_fn kernels[2] = {nb_cpu_isa() >= NB_ISA_AVX2 ? nb_attn_avx2() : NULL,
                             nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512() : NULL};
    const char *names[2] = {"avx2", "avx512"};
    if (!kernels[0] && !kernels[1]) skip();
#ifdef __SANITIZE_THREAD__
    /* one thread: nothing for ThreadSanitizer to find (make test-tsan), and
     * its 40 s there; the Release and ASan runs compare the kernels */
    skip();
#endif
    const int32_t hds[] = {64, 128, 8, 22, 36}, bss[] = {4, 5, 16};
    const int nqs[] = {1, 3, 8}, nts[] = {1, 2, 7, 16, 17, 33};
    const int32_t pos0s[] = {0, 1, 15, 16, 30, 53};
    for (int t = 0; t <= NB_KVT_FP8; t++)
        for (int hi = 0; hi < 5; hi++) {
            const int32_t hd = hds[hi];
            fixture f;
            fill_bs(&f, (nb_kv_type)t, hd, 17 + (unsigned)t, bss[(t + hi) % 3]);
            unsigned s = 5;
            float *q = malloc(33 * 8 * 128 * sizeof(float)), *want = malloc(33 * 8 * 128 * sizeof(float)),
                  *got = malloc(33 * 8 * 128 * sizeof(float));
            for (int i = 0; i < 33 * 8 * hd; i++) q[i] = frand(&s);
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 6; b++)
                    for (int c = 0; c < 6; c++) {
                        const int nq = nqs[a], nt = nts[b];
                        const int32_t pos0 = pos0s[c];
                        if (pos0 + nt > f.n_pos) continue;
                        const int kvh = (a + b + c) % 2, n = nt * nq * hd;
                        run_tile(nb_attn_ref, &f, q, want, kvh, nq, nt, pos0);
                        for (int k = 0; k < 2; k++) {
                            if (!kernels[k]) continue;
                            for (int i = 0; i < n; i++) got[i] = NAN;
                            run_tile(kernels[k], &f, q, got, kvh, nq, nt, pos0);
                            for (int i = 0; i < n; i++)
                                if (!(fabsf(want[i] - got[i]) <= 2e-5f * (1 + fabsf(want[i]))))
                                    fail_msg("%s type %d hd %d bs %d nq %d nt %d pos0 %d: row %d elem %d ref %g got %g",
                                             names[k], t, hd, f.bs, nq, nt, pos0, i / hd, i % hd, want[i], got[i]);
                        }
                    }
            free(q);
            free(want);
            free(got);
            unfill(&f);
        }
}

/* The batch driver (model/attn.h): a batch mixing a prompt chunk longer
 * than a tile, a decode token and a second sequence's short chunk, on 1 and
 * 3 threads, equals the kernel run one token at a time. */
static void test_batch_driver(void **state) {
    (void)state;
    enum { HD = 16, NH = 8 }; /* 2 KV heads, groups of 4: tiles of 32 tokens */
    fixture f;
    fill(&f, NB_KVT_F16, HD, 31);
    nb_arch_desc hp = f.hp;
    hp.n_head = NH;
    int32_t tok_seq[] = {0, 0, 0, 0, 1}; /* per run: sequence */
    int32_t run_pos[] = {2, 40, 69, 0, 0}, run_n[] = {37, 1, 1, 0, 9};
    int32_t seqv[64], posv[64], n = 0;
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < run_n[r]; i++) {
            seqv[n] = tok_seq[r];
            posv[n] = run_pos[r] + i;
            n++;
        }
    int32_t blocks2[NBLK];
    for (int i = 0; i < NBLK; i++) blocks2[i] = f.blocks[(i + 5) % 18]; /* written blocks, another order */
    nb_seq_view seqs[2] = {{f.blocks, NBLK}, {blocks2, NBLK}};
    nb_batch b = {.n = n, .pos = posv, .seq = seqv, .n_seqs = 2, .seqs = seqs};
    unsigned s = 12;
    float *q = malloc((size_t)n * NH * HD * sizeof(float)), *got = malloc((size_t)n * NH * HD * sizeof(float)),
          *want = malloc((size_t)n * NH * HD * sizeof(float));
    for (int i = 0; i < n * NH * HD; i++) q[i] = frand(&s);
    nb_attn_fn ref = nb_attn_get(nb_cpu_isa(), NULL);
    for (int t = 0; t < n; t++)
        for (int kvh = 0; kvh < 2; kvh++) {
            float *scratch = aligned_alloc(64, (nb_attn_scratch_floats(HD, 4, 1) * 4 + 63) & ~(size_t)63);
            nb_attn_tile tl = {&f.view, seqs[seqv[t]].blocks, kvh, 4, 1, posv[t], q + ((int64_t)t * NH + kvh * 4) * HD,
                               NH * HD, want + ((int64_t)t * NH + kvh * 4) * HD, NH * HD, 0.25f, scratch, NULL};
            ref(&tl);
            free(scratch);
        }
    /* whole tiles; then the lone tokens (positions 40 and 69) split into
     * pieces of 8 and of 12 keys (whole blocks of 4; the last piece short),
     * merged by their log-sum-exp */
    static const int32_t splits[] = {0, 8, 12}, n_spans[] = {5, 5 - 2 + 6 + 9, 5 - 2 + 4 + 6};
    for (int si = 0; si < 3; si++)
        for (int threads = 1; threads <= 3; threads += 2) {
            nb_pool *pool;
            assert_int_equal(nb_pool_create(threads, &pool), NB_OK);
            nb_attn_batch ab;
            assert_int_equal(nb_attn_batch_init(&ab, &hp, nb_dispatch_default(), threads, 4), NB_OK);
            assert_int_equal(ab.split_keys, NB_ATTN_SPLIT_KEYS);
            ab.split_keys = splits[si];
            assert_int_equal(nb_attn_batch_plan(&ab, &b), NB_OK);
            assert_int_equal(ab.n_spans, n_spans[si]); /* unsplit: 37 tokens = 32 + 5, the two lone tokens, 9 */
            assert_int_equal(ab.n_merges, si ? 2 : 0);
            for (int i = 0; i < n * NH * HD; i++) got[i] = NAN;
            nb_attn_batch_run(&ab, pool, &f.kv, &b, 1, q, got);
            for (int i = 0; i < n * NH * HD; i++)
                if (!(fabsf(want[i] - got[i]) <= 2e-5f * (1 + fabsf(want[i]))))
                    fail_msg("split %d threads %d token %d head %d elem %d: %g want %g", splits[si], threads,
                             i / (NH * HD), i / HD % NH, i % HD, got[i], want[i]);
            nb_attn_batch_free(&ab);
            nb_pool_free(pool);
        }
    free(q);
    free(got);
    free(want);
    unfill(&f);
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
    int32_t used[NBLK] = {0};
    for (int i = 0; i < (NPOS + 3) / 4; i++) used[f.blocks[i]] = 1;
    int32_t spare = -1;
    for (int i = 0; i < NBLK; i++)
        if (!used[i]) spare = i;
    assert_true(spare >= 0);
    nb_kv_copy_block(&f.kv, spare, f.blocks[1]);
    f.blocks[1] = spare;
    run(nb_attn_ref, &f, q, 1, 8, b);
    assert_memory_equal(a, b, sizeof a);
    unfill(&f);
}

/* How many of the pages under [p, p + n) are resident (mincore). */
static size_t resident_pages(const void *p, size_t n, size_t *total) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), e = ((uintptr_t)p + n + pg - 1) & ~(uintptr_t)(pg - 1);
    *total = (e - a) / pg;
    unsigned char *v = malloc(*total);
    assert_non_null(v);
    assert_int_equal(mincore((void *)a, e - a, v), 0);
    size_t r = 0;
    for (size_t i = 0; i < *total; i++) r += v[i] & 1;
    free(v);
    return r;
}

/* nb_kv_pool_commit backs every page of K, V and the 8-bit types' scales,
 * on a thread pool and on the caller alone, and a pool stays usable. */
static void test_pool_commit(void **state) {
    (void)state;
    nb_arch_desc hp = {0};
    hp.n_layer = 3;
    hp.n_head_kv = 4;
    hp.head_dim = 64;
    const nb_kv_type types[] = {NB_KVT_F32, NB_KVT_INT8};
    for (int ti = 0; ti < 2; ti++)
        for (int threads = 0; threads <= 2; threads += 2) {
            nb_kv_pool kv;
            /* 3 x 100 blocks x 16 slots x 256 values: 4.7 MiB for K in f32, not a whole number of 2 MiB */
            assert_int_equal(nb_kv_pool_init_type(&kv, &hp, 16, 100, types[ti]), NB_OK);
            size_t total, scales = (size_t)3 * 100 * 16 * 4 * sizeof(float);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* their allocators may touch a new pool */
            if (resident_pages(kv.k, kv.bytes, &total) == total) fail_msg("a new pool's K was resident already");
#endif
            nb_pool *pool = NULL;
            if (threads) assert_int_equal(nb_pool_create(threads, &pool), NB_OK);
            nb_kv_pool_commit(&kv, pool);
            nb_pool_free(pool);
            const struct { const void *p; size_t n; const char *what; } r[] = {
                {kv.k, kv.bytes, "K"}, {kv.v, kv.bytes, "V"}, {kv.ks, scales, "K scales"}, {kv.vs, scales, "V scales"}};
            for (int i = 0; i < (types[ti] == NB_KVT_INT8 ? 4 : 2); i++) {
                size_t got = resident_pages(r[i].p, r[i].n, &total);
                if (got != total)
                    fail_msg("%s pool, %d threads: %zu of %zu pages of %s resident after the commit",
                             nb_kv_type_name(types[ti]), threads, got, total, r[i].what);
            }
            float k[256], v[256], back[256];
            for (int i = 0; i < 256; i++) k[i] = v[i] = (float)i / 256.0f;
            nb_kv_store(&kv, 2, 99, 15, k, v);
            if (types[ti] == NB_KVT_F32) {
                nb_attn_kv view;
                nb_kv_layer_view(&kv, 2, &view);
                for (int h = 0; h < 4; h++)
                    memcpy(back + h * 64, view.k + nb_attn_kv_off(&view, 99, 15, h), 64 * sizeof(float));
                assert_memory_equal(back, k, sizeof k);
            }
            nb_kv_pool_free(&kv);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_codes),   cmocka_unit_test(test_ref_vs_double), cmocka_unit_test(test_ref_tile_causal),
        cmocka_unit_test(test_store_error), cmocka_unit_test(test_simd_vs_ref),   cmocka_unit_test(test_batch_driver),
        cmocka_unit_test(test_copy_block),  cmocka_unit_test(test_pool_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
