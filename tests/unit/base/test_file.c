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

/* The directory form: OUT_DIR not a directory (always refused), the input
 * directory itself (unless force), and the rule for each named file in it. */
static void test_out_dir_check(void **state) {
    (void)state;
    char d[] = "/tmp/nb_test_outdir_XXXXXX";
    assert_non_null(mkdtemp(d));
    char in[128], out[128], fifo[128], file[128], lnk[128];
    snprintf(in, sizeof in, "%s/in", d);
    snprintf(out, sizeof out, "%s/out", d);
    snprintf(fifo, sizeof fifo, "%s/out/results.json", d);
    snprintf(file, sizeof file, "%s/set.jsonl", d);
    snprintf(lnk, sizeof lnk, "%s/out/items.jsonl", d);
    assert_int_equal(mkdir(in, 0700), 0);
    assert_int_equal(nb_write_file(file, "{}", 2), NB_OK);
    const char *ins[] = {in, file};
    const char *names[] = {"results.json", "items.jsonl"};
    assert_int_equal(nb_out_dir_check(out, names, 2, ins, 2, false, "--out"), NB_OK); /* absent */
    assert_int_equal(nb_out_dir_check(in, names, 2, ins, 2, false, "OUT_DIR"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "OUT_DIR"));
    assert_non_null(strstr(nb_errmsg(), "same directory as the input"));
    assert_int_equal(nb_out_dir_check(in, names, 2, ins, 2, true, "OUT_DIR"), NB_OK);
    assert_int_equal(nb_out_dir_check("/dev/null", names, 2, ins, 2, true, "--out"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "--out '/dev/null' is a character device, not a directory"));
    assert_int_equal(nb_out_dir_check(file, names, 2, NULL, 0, false, "--out"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "not a directory"));
    assert_int_equal(mkdir(out, 0700), 0);
    assert_int_equal(nb_out_dir_check(out, names, 2, ins, 2, false, "--out"), NB_OK); /* empty directory */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(nb_out_dir_check(out, names, 2, ins, 2, false, "--out"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "results.json' is a FIFO"));
    assert_int_equal(unlink(fifo), 0);
    assert_int_equal(symlink(file, lnk), 0); /* a file in OUT_DIR that is the input */
    assert_int_equal(nb_out_dir_check(out, names, 2, ins, 2, false, "--out"), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "same file as the input"));
    unlink(lnk); unlink(file); rmdir(out); rmdir(in); rmdir(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_out_check), cmocka_unit_test(test_out_dir_check)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
