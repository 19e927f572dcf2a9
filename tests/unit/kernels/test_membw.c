/* The read-bandwidth probe (kernels/membw.h): every compiled inner loop sums
 * exactly the 64-bit words of its streams (1, 3, 8 and 11 streams - past
 * the 8 walked in lockstep - with and without prefetch, in 256- and 64-byte
 * turns) against a plain
 * scalar sum, and the whole probe measures every pattern of a small set on
 * a real pool (a positive rate for each, the best one the maximum). No
 * timing is asserted beyond "positive". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/membw.h"
#include "testutil.h"

typedef uint64_t (*sum_fn)(const void *const *p, int streams, size_t bytes, int prefetch, int turn);

static void check_loop(sum_fn f, const char *name) {
    static const int streams[] = {1, 2, 3, 8, 11};
    static const size_t sizes[] = {256, 512, 4096, 256 * 37};
    for (size_t si = 0; si < sizeof streams / sizeof streams[0]; si++)
        for (size_t zi = 0; zi < sizeof sizes / sizeof sizes[0]; zi++) {
            int ns = streams[si];
            size_t bytes = sizes[zi];
            uint64_t *buf = aligned_alloc(64, bytes * (size_t)ns);
            assert_non_null(buf);
            uint64_t want = 0, x = 0x243F6A8885A308D3ull ^ (uint64_t)(ns * 131 + (int)zi);
            for (size_t i = 0; i < bytes * (size_t)ns / 8; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                buf[i] = (i % 97 == 0) ? UINT64_MAX - i : x; /* extreme words too: sums wrap mod 2^64 */
                want += buf[i];
            }
            const void *p[16];
            for (int s = 0; s < ns; s++) p[s] = (const char *)buf + (size_t)s * bytes;
            for (int pf = 0; pf <= 2048; pf += 2048)
                for (int turn = 0; turn <= 64; turn += 64) {
                    uint64_t got = f(p, ns, bytes, pf, turn);
                    if (got != want)
                        fprintf(stderr, "%s: streams %d bytes %zu prefetch %d turn %d: %llu != %llu\n", name, ns,
                                bytes, pf, turn, (unsigned long long)got, (unsigned long long)want);
                    assert_true(got == want);
                }
            free(buf);
        }
}

static void test_loops(void **state) {
    (void)state;
    check_loop(nb_membw_sum_ref, "ref");
#if defined(__x86_64__)
    if (nb_cpu_isa() >= NB_ISA_AVX2) check_loop(nb_membw_sum_avx2, "avx2");
    if (nb_cpu_isa() >= NB_ISA_AVX512) check_loop(nb_membw_sum_avx512, "avx512");
#endif
}

static void test_probe(void **state) {
    (void)state;
    nb_pool *pool;
    assert_int_equal(nb_pool_create(2, &pool), NB_OK);
    nb_membw_result r;
    assert_int_equal(nb_membw_measure(pool, (size_t)64 << 20, 2, nb_cpu_isa(), &r), NB_OK);
    /* prefetch 0, 2048 and the kernels' distance when it is another */
    int cpu_pf = nb_prefetch_for_cpu(nb_cpu_get()), npf = cpu_pf != 0 && cpu_pf != 2048 ? 3 : 2;
    /* and on an AVX-512 CPU the 2 MiB ones again with 32-byte loads */
    int narrow = nb_cpu_isa() >= NB_ISA_AVX512 ? 2 * npf : 0;
    /* and 4 streams in 64-byte turns, prefetch 2048, on both page sizes */
    assert_int_equal(r.n, 4 * npf + 2 + narrow);
    double mx = 0;
    int n_huge = 0, n_multi = 0, n_pf = 0, n_narrow = 0, n_turn = 0;
    for (int i = 0; i < r.n; i++) {
        assert_true(r.p[i].gbps > 0);
        if (r.p[i].gbps > mx) mx = r.p[i].gbps;
        n_huge += r.p[i].huge_pages;
        n_multi += r.p[i].streams > 1;
        n_pf += r.p[i].prefetch > 0;
        n_narrow += r.p[i].load_bytes == 32;
        if (r.p[i].load_bytes) assert_true(r.p[i].huge_pages);
        if (r.p[i].turn) {
            n_turn++;
            assert_true(r.p[i].turn == 64 && r.p[i].streams == 4 && r.p[i].prefetch == 2048 && !r.p[i].load_bytes);
        }
    }
    assert_true(r.gbps == mx && r.p[r.best].gbps == mx);
    assert_int_equal(n_huge, 2 * npf + 1 + narrow);
    assert_int_equal(n_multi, 2 * npf + 2 + narrow / 2);
    assert_int_equal(n_pf, (4 * npf + narrow) / npf * (npf - 1) + 2);
    assert_int_equal(n_narrow, narrow);
    assert_int_equal(n_turn, 2);
    /* without AVX-512 (capped) the set has no narrower loads */
    nb_membw_result capped;
    assert_int_equal(nb_membw_measure(pool, (size_t)64 << 20, 1, NB_ISA_AVX2, &capped), NB_OK);
    assert_int_equal(capped.n, 4 * npf + 2);
    /* merging keeps each pattern's better run and the best of those */
    nb_membw_result a = r, b = r;
    a.p[0].gbps = 1e6;
    b.p[1].gbps = 2e6;
    nb_membw_merge(&a, &b);
    assert_true(a.p[0].gbps == 1e6 && a.p[1].gbps == 2e6 && a.best == 1 && a.gbps == 2e6);
    /* a pattern passed back in (the re-measure after each bench run) is
     * measured afresh: its earlier result is not a floor */
    nb_membw_pattern again = r.p[r.best];
    again.gbps = 1e6;
    nb_membw_result one;
    assert_int_equal(nb_membw_measure_patterns(pool, (size_t)64 << 20, 1, nb_cpu_isa(), &again, 1, &one), NB_OK);
    assert_true(one.n == 1 && one.gbps > 0 && one.gbps < 1e5 && one.p[0].streams == again.streams);
    /* a bad pattern is refused with a message */
    nb_membw_pattern bad = {0, 0, false, 0, 0, 0};
    assert_int_not_equal(nb_membw_measure_patterns(pool, (size_t)64 << 20, 1, nb_cpu_isa(), &bad, 1, &r), NB_OK);
    nb_membw_pattern odd = {1, 0, true, 0, 48, 0}; /* loads of 48 bytes: no such loop */
    assert_int_not_equal(nb_membw_measure_patterns(pool, (size_t)64 << 20, 1, nb_cpu_isa(), &odd, 1, &r), NB_OK);
    nb_membw_pattern turn32 = {4, 2048, true, 0, 0, 32}; /* 32-byte turns: no such loop */
    assert_int_not_equal(nb_membw_measure_patterns(pool, (size_t)64 << 20, 1, nb_cpu_isa(), &turn32, 1, &r), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "turn 32"));
    nb_membw_pattern narrow32 = {1, 2048, true, 0, 32, 0}; /* 32-byte loads need AVX2: refused under the scalar cap */
    assert_int_not_equal(nb_membw_measure_patterns(pool, (size_t)64 << 20, 1, NB_ISA_SCALAR, &narrow32, 1, &r), NB_OK);
    nb_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_loops), cmocka_unit_test(test_probe)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
