/* Test helpers: shared/ lookup with visible skips. */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nb_test_missing;

int nb_test_exit(int failed) {
    if (failed) return failed;
    if (nb_test_missing) {
        fprintf(stderr, "SKIP: %d lookup(s) in shared/ found nothing; the tests that ran passed\n", nb_test_missing);
        return 77;
    }
    return 0;
}

const char *nb_test_shared(const char *rel) {
    static char buf[4][4096];
    static int k;
    const char *dir = getenv("NB_SHARED");
    if (!dir) dir = "../shared";
    char *p = buf[k++ & 3];
    snprintf(p, 4096, "%s/%s", dir, rel);
    struct stat st;
    if (stat(p, &st) != 0) {
        fprintf(stderr, "SKIP: %s not found (the shared/ folder with test models is absent)\n", p);
        nb_test_missing++;
        return NULL;
    }
    return p;
}

const char *nb_test_shared_or_exit(const char *rel) {
    const char *p = nb_test_shared(rel);
    if (!p) exit(77);
    return p;
}

const char *nb_test_bin(void) {
    const char *b = getenv("NB_BIN");
    return b ? b : "./nibble";
}

static char tmpdir[256];
static pid_t tmpdir_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

/* Runs at exit of the process that made the folder (a forked child that
 * exits must not take it from its parent). NB_TEST_KEEP=1 keeps it for a
 * post-mortem. */
static void remove_tmpdir(void) {
    if (getpid() != tmpdir_owner || getenv("NB_TEST_KEEP")) return;
    nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *nb_test_tmpdir(void) {
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/nibble-test-XXXXXX");
        if (!mkdtemp(tmpdir)) return "/tmp";
        tmpdir_owner = getpid();
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

const char *nb_test_write_tmp(const char *name, const char *text) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", nb_test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) fail_msg("cannot write %s", path);
    return path;
}
