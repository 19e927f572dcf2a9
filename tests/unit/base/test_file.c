/* The output-file rule shared by every writing command (nb_out_check) and
 * the durable replace (nb_file_commit). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "testutil.h"

static char dir[] = "/tmp/nb_test_file_XXXXXX";

static char *in_dir(const char *name) {
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static void test_out_check(void **state) {
    (void)state;
    assert_non_null(mkdtemp(dir));
    char *in = in_dir("in.gguf"), *out = in_dir("out.gguf"), *lnk = in_dir("link.gguf"), *hard = in_dir("hard.gguf"),
         *fifo = in_dir("fifo"), *sub = in_dir("sub");
    assert_int_equal(nb_write_file(in, "abc", 3), NB_OK);
    const char *ins[] = {in};
    assert_int_equal(nb_out_check(out, ins, 1, false, "OUT"), NB_OK); /* absent: fine */
    assert_int_equal(nb_out_check(in, ins, 1, false, "OUT"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "same file as the input"));
    assert_non_null(strstr(nb_errmsg(), "--force"));
    assert_int_equal(nb_out_check(in, ins, 1, true, "OUT"), NB_OK);
    assert_int_equal(symlink(in, lnk), 0);
    assert_int_equal(nb_out_check(lnk, ins, 1, false, "OUT"), NB_ERR_INVALID);
    assert_int_equal(link(in, hard), 0);
    assert_int_equal(nb_out_check(hard, ins, 1, false, "OUT"), NB_ERR_INVALID);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(nb_out_check(fifo, ins, 1, false, "-o"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "a FIFO"));
    assert_int_equal(nb_out_check(fifo, NULL, 0, true, "-o"), NB_OK);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(nb_out_check(sub, NULL, 0, false, "-o"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "a directory"));
    assert_int_equal(nb_out_check("/dev/null", NULL, 0, false, "OUT"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "character device"));
    /* an existing regular file that is not an input may be replaced */
    assert_int_equal(nb_write_file(out, "x", 1), NB_OK);
    assert_int_equal(nb_out_check(out, ins, 1, false, "OUT"), NB_OK);
    /* nb_file_commit moves the temporary file into place */
    char *tmp = in_dir("out.gguf.tmp");
    assert_int_equal(nb_write_file(tmp, "new", 3), NB_OK);
    assert_int_equal(nb_file_commit(tmp, out), NB_OK);
    assert_int_equal(access(tmp, F_OK), -1);
    char *data;
    size_t len;
    assert_int_equal(nb_read_file(out, 16, &data, &len), NB_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(data, "new", 3);
    free(data);
    assert_int_equal(nb_file_commit(tmp, out), NB_ERR_IO); /* tmp is gone: named error */
    assert_non_null(strstr(nb_errmsg(), "out.gguf.tmp"));
    unlink(in); unlink(out); unlink(lnk); unlink(hard); unlink(fifo); rmdir(sub); rmdir(dir);
    free(in); free(out); free(lnk); free(hard); free(fifo); free(sub); free(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_out_check)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
