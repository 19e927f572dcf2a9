/* Helpers for the cmocka tests: locating ../shared and skipping visibly. */
#ifndef NB_TESTUTIL_H
#define NB_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* Path of a file under the shared/ folder (env NB_SHARED, set by ctest), in
 * a static buffer; NULL (after printing "SKIP: ...") when it is absent. */
const char *nb_test_shared(const char *rel);
/* Same, but skips the whole test binary (exit 77 = ctest "skipped"). */
const char *nb_test_shared_or_exit(const char *rel);
/* Path of the nibble binary (env NB_BIN). */
const char *nb_test_bin(void);
/* A fresh temporary directory (removed by the OS / left for inspection). */
const char *nb_test_tmpdir(void);

#endif
