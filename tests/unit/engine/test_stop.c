/* Stop strings over streamed text: what comes out never contains a stop
 * string or the start of one that may still complete; the text before the
 * first stop string to complete comes out whole, however the stream is
 * split. Expected outputs are computed by the test with strstr over the
 * whole text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine/stop.h"

/* Streams `text` in pieces of `step` bytes; returns what came out. */
static char *stream(const char *const *stops, size_t n, const char *text, size_t step, bool *stopped) {
    nb_stop s;
    assert_int_equal(nb_stop_init(&s, stops, n), NB_OK);
    size_t len = strlen(text), o = 0;
    char *out = calloc(len + 1, 1);
    *stopped = false;
    for (size_t i = 0; i < len && !*stopped; i += step) {
        const char *p;
        size_t np;
        *stopped = nb_stop_push(&s, text + i, NB_MIN(step, len - i), &p, &np);
        /* never emit a prefix of a stop string at the end of what is out so far, unless it can no longer complete */
        memcpy(out + o, p, np);
        o += np;
    }
    if (!*stopped) {
        const char *p;
        size_t np;
        nb_stop_flush(&s, &p, &np);
        memcpy(out + o, p, np);
        o += np;
    }
    out[o] = 0;
    nb_stop_free(&s);
    return out;
}

static void expect(const char *const *stops, size_t n, const char *text) {
    /* the stop string whose first occurrence ends first is the one a stream meets first */
    size_t cut = strlen(text), end = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *p = strstr(text, stops[i]);
        if (!p) continue;
        size_t st = (size_t)(p - text), en = st + strlen(stops[i]);
        if (en < end || (en == end && st < cut)) {
            end = en;
            cut = st;
        }
    }
    for (size_t step = 1; step <= strlen(text) + 1; step++) {
        bool stopped;
        char *got = stream(stops, n, text, step, &stopped);
        if (strlen(got) != cut || strncmp(got, text, cut) != 0)
            fail_msg("step %zu: got '%s', want the first %zu bytes of '%s'", step, got, cut, text);
        assert_int_equal(stopped, cut < strlen(text));
        free(got);
    }
}

static void test_cases(void **state) {
    (void)state;
    const char *a[] = {"END"};
    expect(a, 1, "hello END world");
    expect(a, 1, "hello EN world");           /* a prefix that does not complete comes out */
    expect(a, 1, "ENDing at once");
    expect(a, 1, "no stop here, E");          /* held back, then flushed */
    const char *b[] = {"abcab", "bca", "\n\n"};
    expect(b, 3, "xxabcabyy");                /* "bca" completes before "abcab" does */
    expect(b, 3, "abcaxabcab");
    expect(b, 3, "line one\nline two\n\nthree");
    expect(b, 3, "ab ab abc ab");
    const char *c[] = {"\xc3\xa9t\xc3\xa9"}; /* "été" */
    expect(c, 1, "un \xc3\xa9t\xc3\xa9 chaud");
}

/* The emitted text never ends with a proper prefix of a stop string while
 * more may come. */
static void test_hold_back(void **state) {
    (void)state;
    const char *a[] = {"STOP"};
    nb_stop s;
    assert_int_equal(nb_stop_init(&s, a, 1), NB_OK);
    const char *p;
    size_t n;
    assert_false(nb_stop_push(&s, "go ST", 5, &p, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(p, "go ", 3);
    assert_false(nb_stop_push(&s, "O", 1, &p, &n));
    assert_int_equal(n, 0);
    assert_false(nb_stop_push(&s, "x", 1, &p, &n));
    assert_int_equal(n, 4);
    assert_memory_equal(p, "STOx", 4);
    assert_true(nb_stop_push(&s, "STOP and more", 13, &p, &n));
    assert_int_equal(n, 0);
    assert_true(nb_stop_push(&s, "later", 5, &p, &n)); /* stays stopped */
    assert_int_equal(n, 0);
    nb_stop_free(&s);
}

static void test_limits(void **state) {
    (void)state;
    nb_stop s;
    const char *empty[] = {"ok", ""};
    assert_int_equal(nb_stop_init(&s, empty, 2), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "stop[1]"));
    char big[NB_LIMIT_STOP_LEN + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *lng[] = {big};
    assert_int_equal(nb_stop_init(&s, lng, 1), NB_ERR_RANGE);
    const char *many[NB_LIMIT_STOP_STRINGS + 1];
    for (int i = 0; i <= NB_LIMIT_STOP_STRINGS; i++) many[i] = "a";
    assert_int_equal(nb_stop_init(&s, many, NB_LIMIT_STOP_STRINGS + 1), NB_ERR_RANGE);
    /* no stop strings: text passes through */
    assert_int_equal(nb_stop_init(&s, NULL, 0), NB_OK);
    const char *p;
    size_t n;
    assert_false(nb_stop_push(&s, "abc", 3, &p, &n));
    assert_int_equal(n, 3);
    nb_stop_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases), cmocka_unit_test(test_hold_back), cmocka_unit_test(test_limits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
