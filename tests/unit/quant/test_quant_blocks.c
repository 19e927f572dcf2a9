/* The reference quantizers refuse a row that is not a whole number of
 * blocks (NB_ASSERT: an abort in every build type, Release included):
 * before, the tail was dropped silently. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "quant/qtypes.h"
#include "testutil.h"

static int child_status(void (*fn)(const float *, void *, int64_t), int64_t n) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static float x[1024];
        static unsigned char dst[4096];
        fn(x, dst, n);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void test_ragged_rows_abort(void **state) {
    (void)state;
    int st = child_status(nb_quantize_row_q8_0_ref, 64);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* whole blocks: fine */
    st = child_status(nb_quantize_row_q8_0_ref, 33);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    st = child_status(nb_quantize_row_q8_K_ref, 300);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    st = child_status(nb_quantize_row_q8_T_ref, 40);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ragged_rows_abort)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
