/* Tests of the string-index hash set (base/nameset.h), shared by the GGUF
 * reader's duplicate-key / tensor-name checks and the golden-set id check:
 *  - an unattached set finds nothing and stores nothing;
 *  - probe-with-insert finds an earlier equal string (its index) and adds
 *    a new one, including strings whose hashes share a slot (a full table
 *    of 2n slots wraps around);
 *  - insert_all reports the first later duplicate and the earlier index;
 *  - the empty string is a name like any other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/nameset.h"

static const char *str_at(const void *arr, int64_t i) { return ((const char *const *)arr)[i]; }

static void test_unattached(void **state) {
    (void)state;
    nb_nameset s;
    nb_nameset_attach(&s, NULL, 0);
    const char *a[] = {"x"};
    assert_int_equal(nb_nameset_probe(&s, "x", str_at, a, 0), -1);
    assert_int_equal(nb_nameset_probe(&s, "x", str_at, a, -1), -1);
}

static void test_probe_insert(void **state) {
    (void)state;
    enum { N = 5000 };
    char **names = calloc(N, sizeof *names);
    assert_non_null(names);
    for (int i = 0; i < N; i++) {
        names[i] = malloc(16);
        if (i == N - 1) names[i][0] = 0; /* the empty name */
        else snprintf(names[i], 16, "k%d", i);
    }
    size_t cap = nb_nameset_cap(N);
    assert_true(cap >= 2 * N && (cap & (cap - 1)) == 0);
    uint64_t *slot = calloc(cap, sizeof *slot);
    nb_nameset s;
    nb_nameset_attach(&s, slot, cap);
    for (int i = 0; i < N; i++) assert_int_equal(nb_nameset_probe(&s, names[i], str_at, names, i), -1);
    for (int i = 0; i < N; i++) assert_int_equal(nb_nameset_probe(&s, names[i], str_at, names, -1), i);
    assert_int_equal(nb_nameset_probe(&s, "k5000", str_at, names, -1), -1);
    assert_int_equal(nb_nameset_probe(&s, "k12", str_at, names, -1), 12);
    free(slot);

    /* insert_all: names[N-2] made equal to names[3]; names[N-1] ("") is unique */
    snprintf(names[N - 2], 16, "k3");
    uint64_t *hv = malloc(N * sizeof *hv);
    for (int i = 0; i < N; i++) hv[i] = nb_nameset_hash(names[i]);
    slot = calloc(cap, sizeof *slot);
    nb_nameset_attach(&s, slot, cap);
    int64_t first = -1;
    assert_int_equal(nb_nameset_insert_all(&s, hv, N, str_at, names, &first), N - 2);
    assert_int_equal(first, 3);
    free(slot);
    free(hv);
    for (int i = 0; i < N; i++) free(names[i]);
    free(names);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unattached),
        cmocka_unit_test(test_probe_insert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
