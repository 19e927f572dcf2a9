/* Helpers for the cmocka tests: locating ../shared and skipping visibly. */
#ifndef NB_TESTUTIL_H
#define NB_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* Path of a file under the shared/ folder (env NB_SHARED, set by ctest), in
 * a static buffer; NULL (after printing "SKIP: ...") when it is absent. */
const char *nb_test_shared(const char *rel);
/* Same, but skips the whole test binary (exit 77 = ctest "skipped"). */
const char *nb_test_shared_or_exit(const char *rel);
/* How many nb_test_shared() lookups found nothing so far. */
extern int nb_test_missing;
/* Skips the current test for something this machine lacks (an ISA): printed,
 * listed by cmocka as SKIPPED, and the binary exits 77 (nb_test_exit). */
#define NB_TEST_SKIP(...)                                                                                   \
    do {                                                                                                    \
        fprintf(stderr, "SKIP: " __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                                \
        nb_test_missing++;                                                                                  \
        skip();                                                                                             \
    } while (0)
/* The exit status of a test binary: `failed` (cmocka's count) when a test
 * failed, else 77 (ctest "skipped", SKIP_RETURN_CODE) when a test lacked
 * files of shared/ (such tests call skip(), so cmocka lists them as
 * SKIPPED), else 0. */
int nb_test_exit(int failed);
/* Every test binary's main ends with cmocka_run_group_tests(): route its
 * result through nb_test_exit, so a partial run is never reported as a pass. */
#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown)                                    \
    nb_test_exit(_cmocka_run_group_tests(#group_tests, group_tests, sizeof(group_tests) / sizeof((group_tests)[0]), \
                                         group_setup, group_teardown))
/* Path of the nibble binary (env NB_BIN). */
const char *nb_test_bin(void);
/* A fresh temporary directory (removed by the OS / left for inspection). */
const char *nb_test_tmpdir(void);
/* Writes `text` to the file `name` in nb_test_tmpdir() (replacing it) and
 * returns its path, in a static buffer; fails the test when it cannot. */
const char *nb_test_write_tmp(const char *name, const char *text);

#endif
