/* nb_dynbuf: appends grow the buffer up to its cap; the cap and allocation
 * failures are reported as statuses and leave the buffer empty (never a
 * truncated result); take/reset/free keep it reusable. */
#include <stdlib.h>
#include <string.h>

#include "base/dynbuf.h"
#include "testutil.h"

static void test_append_and_take(void **state) {
    (void)state;
    nb_dynbuf b;
    nb_dynbuf_init(&b, 1 << 20);
    assert_string_equal(nb_dynbuf_ptr(&b), "");
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_int_equal(nb_dynbuf_add(&b, "abc", 3), NB_OK);
    assert_int_equal(nb_dynbuf_add(&b, "", 0), NB_OK);
    assert_int_equal(nb_dynbuf_addstr(&b, "def"), NB_OK);
    assert_int_equal(nb_dynbuf_addf(&b, "-%d-%s", 42, "x"), NB_OK);
    assert_string_equal(nb_dynbuf_ptr(&b), "abcdef-42-x");
    assert_int_equal(nb_dynbuf_len(&b), 11);
    /* growth across many doublings keeps every byte */
    char expect[5000];
    for (int i = 0; i < 5000; i++) expect[i] = (char)('a' + i % 26);
    nb_dynbuf_reset(&b);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    for (int i = 0; i < 5000; i += 7) assert_int_equal(nb_dynbuf_add(&b, expect + i, (size_t)NB_MIN(7, 5000 - i)), NB_OK);
    assert_int_equal(nb_dynbuf_len(&b), 5000);
    assert_memory_equal(nb_dynbuf_ptr(&b), expect, 5000);
    assert_int_equal(nb_dynbuf_ptr(&b)[5000], '\0');
    /* a formatted string longer than the internal scratch */
    nb_dynbuf_reset(&b);
    assert_int_equal(nb_dynbuf_addf(&b, "<%.*s>", 1000, expect), NB_OK);
    assert_int_equal(nb_dynbuf_len(&b), 1002);
    assert_memory_equal(nb_dynbuf_ptr(&b) + 1, expect, 1000);
    size_t len = 0;
    char *s = nb_dynbuf_take(&b, &len);
    assert_int_equal(len, 1002);
    assert_int_equal(s[0], '<');
    assert_int_equal(s[1001], '>');
    free(s);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    /* take of an empty buffer: an allocated "" */
    s = nb_dynbuf_take(&b, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    assert_string_equal(s, "");
    free(s);
    nb_dynbuf_free(&b);
}

static void test_cap(void **state) {
    (void)state;
    nb_dynbuf b;
    nb_dynbuf_init(&b, 10);
    assert_int_equal(nb_dynbuf_add(&b, "0123456789", 10), NB_OK); /* exactly the cap */
    assert_int_equal(nb_dynbuf_len(&b), 10);
    assert_int_equal(nb_dynbuf_add(&b, "x", 1), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "cap of 10 bytes"));
    /* never truncated: the failed buffer is empty, and usable again */
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_string_equal(nb_dynbuf_ptr(&b), "");
    assert_int_equal(nb_dynbuf_add(&b, "abc", 3), NB_OK);
    assert_int_equal(nb_dynbuf_addf(&b, "%s", "defghijk"), NB_ERR_RANGE); /* 3 + 8 > 10 */
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_int_equal(nb_dynbuf_addstr(&b, "0123456789A"), NB_ERR_RANGE);
    /* a huge n does not overflow the check */
    assert_int_equal(nb_dynbuf_add(&b, "a", 1), NB_OK);
    assert_int_equal(nb_dynbuf_add(&b, "a", (size_t)-1), NB_ERR_RANGE);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    nb_dynbuf_free(&b);
    /* the cap is what len may reach: a buffer of cap 1 holds one byte */
    nb_dynbuf_init(&b, 1);
    assert_int_equal(nb_dynbuf_add(&b, "z", 1), NB_OK);
    assert_string_equal(nb_dynbuf_ptr(&b), "z");
    assert_int_equal(nb_dynbuf_add(&b, "z", 1), NB_ERR_RANGE);
    nb_dynbuf_free(&b);
}

/* realloc that fails once `budget` calls have succeeded. */
static int budget;
static int calls;
static void *failing_realloc(void *p, size_t n) {
    calls++;
    if (budget-- <= 0) return NULL;
    return realloc(p, n);
}

static void test_alloc_failure(void **state) {
    (void)state;
    nb_dynbuf b;
    nb_dynbuf_init(&b, 1 << 20);
    b.realloc_fn = failing_realloc;
    budget = 0;
    calls = 0;
    assert_int_equal(nb_dynbuf_add(&b, "abc", 3), NB_ERR_NOMEM);
    assert_int_equal(calls, 1);
    assert_non_null(strstr(nb_errmsg(), "out of memory"));
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_null(b.p);
    /* first growth works, a later one fails: the held bytes are dropped, not
     * left as a truncated result */
    budget = 1;
    char big[200];
    memset(big, 'q', sizeof big);
    assert_int_equal(nb_dynbuf_add(&b, "abc", 3), NB_OK);
    assert_int_equal(nb_dynbuf_add(&b, big, sizeof big), NB_ERR_NOMEM);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_string_equal(nb_dynbuf_ptr(&b), "");
    /* formatting goes through the same path */
    budget = 0;
    assert_int_equal(nb_dynbuf_addf(&b, "%d", 7), NB_ERR_NOMEM);
    /* and the buffer recovers once memory is back */
    budget = 100;
    assert_int_equal(nb_dynbuf_addf(&b, "%d", 7), NB_OK);
    assert_string_equal(nb_dynbuf_ptr(&b), "7");
    nb_dynbuf_free(&b);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    assert_int_equal(b.cap, 1 << 20); /* free keeps the cap */
}

/* Growth stops at the cap: a buffer never allocates more than cap + 1. */
static void test_alloc_bounded_by_cap(void **state) {
    (void)state;
    nb_dynbuf b;
    nb_dynbuf_init(&b, 100);
    for (int i = 0; i < 100; i++) assert_int_equal(nb_dynbuf_add(&b, "x", 1), NB_OK);
    assert_true(b.alloc <= 101);
    assert_int_equal(nb_dynbuf_len(&b), 100);
    nb_dynbuf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_take),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_alloc_bounded_by_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
