/* The KV block manager: refcounts, free / cached (LRU) lists, prefix-cache
 * lookups that compare tokens, copy-on-write. Expected values are counted by
 * the test's own model of who holds which block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine/kvcache.h"

static nb_kvcache *make(int64_t n, int32_t bs, bool prefix) {
    nb_kvcache *c = NULL;
    assert_int_equal(nb_kvcache_create(n, bs, prefix, &c), NB_OK);
    return c;
}

static void check(const nb_kvcache *c) {
    nb_status st = nb_kvcache_check(c);
    if (st != NB_OK) fail_msg("%s", nb_errmsg());
}

static void test_alloc_release(void **state) {
    (void)state;
    nb_kvcache *c = make(4, 16, false);
    int32_t b[4];
    for (int i = 0; i < 4; i++) b[i] = nb_kvcache_alloc(c, i ? b[i - 1] : -1);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[3], 3);
    assert_int_equal(nb_kvcache_alloc(c, -1), -1);
    assert_int_equal(nb_kvcache_n_used(c), 4);
    nb_kvcache_ref(c, b[1]);
    assert_int_equal(nb_kvcache_refcount(c, b[1]), 2);
    nb_kvcache_release(c, b[1]);
    assert_int_equal(nb_kvcache_n_available(c), 0);
    nb_kvcache_release(c, b[1]);
    assert_int_equal(nb_kvcache_n_available(c), 1);
    assert_int_equal(nb_kvcache_alloc(c, b[0]), b[1]);
    check(c);
    for (int i = 0; i < 4; i++) nb_kvcache_release(c, b[i]);
    assert_int_equal(nb_kvcache_n_used(c), 0);
    check(c);
    nb_kvcache_free(c);
}

/* A sequence's next block is the one after its last when free; a first
 * block, or one whose successor is taken, goes to the middle of the longest
 * free run (the run's start when it starts the pool). So a sequence alone
 * gets 0, 1, 2, ... however earlier ones were freed, and sequences growing
 * side by side each get consecutive blocks (one run per KV head in the
 * pool, model/kv.h) instead of every other one. */
static void test_alloc_runs(void **state) {
    (void)state;
    nb_kvcache *c = make(64, 16, false);
    int32_t b[64];
    for (int i = 0; i < 64; i++) b[i] = nb_kvcache_alloc(c, i ? b[i - 1] : -1);
    for (int i = 0; i < 64; i++) assert_int_equal(b[i], i);
    for (int i = 0; i < 64; i++) nb_kvcache_release(c, (int32_t)((i * 37 + 5) % 64)); /* scattered */
    check(c);
    /* two sequences growing side by side: A from 0, B from the middle of 1..63 */
    int32_t a = nb_kvcache_alloc(c, -1), bb = nb_kvcache_alloc(c, -1);
    assert_int_equal(a, 0);
    assert_int_equal(bb, 32);
    for (int i = 1; i < 16; i++) {
        a = nb_kvcache_alloc(c, a);
        bb = nb_kvcache_alloc(c, bb);
        assert_int_equal(a, i);
        assert_int_equal(bb, 32 + i);
    }
    check(c);
    /* a third: the middle of the first of the two longest runs (16..31, 48..63) */
    int32_t x = nb_kvcache_alloc(c, -1);
    assert_int_equal(x, 24);
    for (int i = 16; i < 24; i++) assert_int_equal(a = nb_kvcache_alloc(c, a), i);
    /* A runs into the third: the middle of the longest run left (48..63) */
    assert_int_equal(nb_kvcache_alloc(c, a), 56);
    check(c);
    nb_kvcache_free(c);
}

static void test_prefix_lru(void **state) {
    (void)state;
    nb_kvcache *c = make(3, 2, true);
    int32_t t1[2] = {5, 6}, t2[2] = {7, 8}, t3[2] = {9, 9};
    uint64_t h1 = nb_kvcache_hash(0, t1, 2), h2 = nb_kvcache_hash(h1, t2, 2);
    assert_true(h1 != h2 && h1 != 0);
    int32_t a = nb_kvcache_alloc(c, -1), b = nb_kvcache_alloc(c, a), x = nb_kvcache_alloc(c, b);
    nb_kvcache_commit(c, a, h1, 0, t1);
    nb_kvcache_commit(c, b, h2, h1, t2);
    /* the same tokens under the same hash but another parent, or other tokens: no hit */
    assert_int_equal(nb_kvcache_lookup(c, h2, 0, t2), -1);
    assert_int_equal(nb_kvcache_lookup(c, h1, 0, t3), -1);
    /* shared while in use */
    assert_int_equal(nb_kvcache_lookup(c, h1, 0, t1), a);
    assert_int_equal(nb_kvcache_refcount(c, a), 2);
    nb_kvcache_release(c, a);
    nb_kvcache_release(c, a); /* a cached first (LRU head), then b */
    nb_kvcache_release(c, b);
    nb_kvcache_release(c, x); /* x: plain free */
    assert_int_equal(nb_kvcache_n_cached(c), 2);
    assert_int_equal(nb_kvcache_n_available(c), 3);
    check(c);
    /* free blocks go first; then the least recently used cached block is evicted */
    assert_int_equal(nb_kvcache_alloc(c, -1), x);
    assert_int_equal(nb_kvcache_evictions(c), 0);
    assert_int_equal(nb_kvcache_alloc(c, -1), a);
    assert_int_equal(nb_kvcache_evictions(c), 1);
    assert_int_equal(nb_kvcache_lookup(c, h1, 0, t1), -1); /* evicted: gone from the table */
    assert_int_equal(nb_kvcache_lookup(c, h2, h1, t2), b); /* revived from the cached list */
    assert_int_equal(nb_kvcache_n_cached(c), 0);
    check(c);
    nb_kvcache_free(c);
}

static int copies, copy_dst, copy_src;
static void on_copy(void *ud, int32_t dst, int32_t src) {
    (void)ud;
    copies++;
    copy_dst = dst;
    copy_src = src;
}

static void test_cow(void **state) {
    (void)state;
    nb_kvcache *c = make(2, 4, true);
    nb_kvcache_set_copy(c, on_copy, NULL);
    int32_t a = nb_kvcache_alloc(c, -1), mine = a;
    assert_int_equal(nb_kvcache_cow(c, &mine), NB_OK); /* sole owner: no copy */
    assert_int_equal(copies, 0);
    nb_kvcache_ref(c, a);
    assert_int_equal(nb_kvcache_cow(c, &mine), NB_OK);
    assert_int_equal(copies, 1);
    assert_int_equal(copy_src, a);
    assert_int_equal(copy_dst, mine);
    assert_true(mine != a);
    assert_int_equal(nb_kvcache_refcount(c, a), 1);
    assert_int_equal(nb_kvcache_refcount(c, mine), 1);
    nb_kvcache_ref(c, a);
    int32_t other = a;
    assert_int_equal(nb_kvcache_cow(c, &other), NB_ERR_CAPACITY); /* pool exhausted */
    check(c);
    nb_kvcache_free(c);
}

/* Random holders take, share, look up and drop blocks; after each operation
 * every refcount equals the number of references the test holds. */
static void test_random(void **state) {
    (void)state;
    enum { N = 64, H = 16, BS = 4, OPS = 20000 };
    for (int prefix = 0; prefix < 2; prefix++) {
        nb_kvcache *c = make(N, BS, prefix);
        int32_t held[H][N];
        int nh[H] = {0};
        int32_t toks[8][BS];
        uint64_t hs[8];
        for (int i = 0; i < 8; i++) {
            for (int j = 0; j < BS; j++) toks[i][j] = i * 10 + j;
            hs[i] = nb_kvcache_hash(0, toks[i], BS);
        }
        srand(1234 + prefix);
        for (int op = 0; op < OPS; op++) {
            int h = rand() % H, r = rand() % 100;
            if (r < 40) {
                int32_t b = nb_kvcache_alloc(c, nh[h] > 0 ? held[h][nh[h] - 1] : -1);
                if (b >= 0) {
                    held[h][nh[h]++] = b;
                    if (rand() % 2) {
                        int k = rand() % 8;
                        nb_kvcache_commit(c, b, hs[k], 0, toks[k]);
                    }
                } else {
                    assert_int_equal(nb_kvcache_n_available(c), 0);
                }
            } else if (r < 60 && nh[h] < N) {
                int k = rand() % 8;
                int32_t b = nb_kvcache_lookup(c, hs[k], 0, toks[k]);
                if (b >= 0) held[h][nh[h]++] = b;
            } else if (r < 65 && nh[h] > 0) {
                int32_t *b = &held[h][rand() % nh[h]];
                int32_t before = *b;
                if (nb_kvcache_cow(c, b) == NB_OK && *b != before) assert_false(nb_kvcache_is_hashed(c, *b));
            } else if (r < 90 && nh[h] > 0) {
                int i = rand() % nh[h];
                nb_kvcache_release(c, held[h][i]);
                held[h][i] = held[h][--nh[h]];
            } else {
                while (nh[h] > 0) nb_kvcache_release(c, held[h][--nh[h]]);
            }
            int32_t expect[N] = {0};
            int64_t used = 0;
            for (int i = 0; i < H; i++)
                for (int j = 0; j < nh[i]; j++) expect[held[i][j]]++;
            for (int b = 0; b < N; b++) {
                assert_int_equal(nb_kvcache_refcount(c, b), expect[b]);
                used += expect[b] > 0;
            }
            assert_int_equal(nb_kvcache_n_used(c), used);
            if (op % 97 == 0) check(c);
        }
        for (int i = 0; i < H; i++)
            while (nh[i] > 0) nb_kvcache_release(c, held[i][--nh[i]]);
        check(c);
        assert_int_equal(nb_kvcache_n_used(c), 0);
        assert_int_equal(nb_kvcache_n_available(c), N);
        nb_kvcache_free(c);
    }
}

static void test_bad_sizes(void **state) {
    (void)state;
    nb_kvcache *c = NULL;
    assert_int_equal(nb_kvcache_create(0, 16, true, &c), NB_ERR_RANGE);
    assert_int_equal(nb_kvcache_create(8, 0, true, &c), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "--block-size 0"));
    assert_null(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_release),
        cmocka_unit_test(test_alloc_runs), cmocka_unit_test(test_prefix_lru), cmocka_unit_test(test_cow),
        cmocka_unit_test(test_random),        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
