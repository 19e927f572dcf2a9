/* What the cgroups allow (base/cgroup.c): the CPU quota's parsers, a
 * process in a cgroup with a one-CPU quota sizing its default pool by it,
 * and /proc/meminfo's fields. The memory limit's effect on the engine is
 * tests/integration/serve_memlimit.sh. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cpu.h"
#include "base/threadpool.h"

static void test_parse(void **state) {
    (void)state;
    assert_int_equal(nb_cpu_quota_v2("max 100000\n"), 0);
    assert_int_equal(nb_cpu_quota_v2("100000 100000\n"), 1);
    assert_int_equal(nb_cpu_quota_v2("150000 100000"), 2);  /* 1.5 CPUs: two threads, rounded up */
    assert_int_equal(nb_cpu_quota_v2("50000 100000"), 1);
    assert_int_equal(nb_cpu_quota_v2("800000 100000"), 8);
    assert_int_equal(nb_cpu_quota_v2(""), 0);
    assert_int_equal(nb_cpu_quota_v2("garbage"), 0);
    assert_int_equal(nb_cpu_quota_v2("100000 0"), 0);
    assert_int_equal(nb_cpu_quota_v2(NULL), 0);
    assert_int_equal(nb_cpu_quota_v1(-1, 100000), 0);
    assert_int_equal(nb_cpu_quota_v1(200000, 100000), 2);
    assert_int_equal(nb_cpu_quota_v1(250000, 100000), 3);
    assert_int_equal(nb_cpu_quota_v1(100000, 0), 0);
}

static bool put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* A child process in a cgroup of its own with a quota of one CPU: the quota
 * reads 1 and the pool's default size is 1 however many CPUs the affinity
 * mask has. Needs a writable cgroup v1 cpu hierarchy or a v2 tree with the
 * cpu controller (root, as in CI); skipped otherwise. */
static void test_in_cgroup(void **state) {
    (void)state;
    char dir[256], path[320];
    bool v2 = false;
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/cpu/nb_quota_test_%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/nb_quota_test_%d", (int)getpid());
        if (!put("/sys/fs/cgroup/cgroup.subtree_control", "+cpu") || mkdir(dir, 0755) != 0) {
            NB_TEST_SKIP("cannot create a cgroup with a CPU quota here (needs root and a writable cgroupfs)");
            return;
        }
        v2 = true;
    }
    bool set;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        set = put(path, "100000 100000");
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        set = put(path, "100000");
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        set = set && put(path, "100000");
    }
    if (!set) {
        rmdir(dir);
        NB_TEST_SKIP("cannot set a CPU quota on %s", dir);
        return;
    }
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char me[32];
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        snprintf(me, sizeof me, "%d", (int)getpid());
        if (!put(path, me)) _exit(100);
        nb_pool *p;
        if (nb_pool_create(0, &p) != NB_OK) _exit(101);
        int size = nb_pool_size(p), q = nb_cpu_quota();
        nb_pool_free(p);
        _exit(q == 1 && size == 1 ? 0 : 10 + 10 * NB_MIN(q, 9) + NB_MIN(size, 9));
    }
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    rmdir(dir);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 100) { /* could not join the cgroup */
        NB_TEST_SKIP("cannot move a process into %s", dir);
        return;
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* nb_meminfo_bytes: kB to bytes, the field's whole name only, 0 when absent. */
static void test_meminfo(void **state) {
    (void)state;
    const char *path = nb_test_write_tmp("meminfo", "MemTotal:       16303428 kB\nMemFree:         1234 kB\n"
                                                    "MemAvailableX:  1 kB\nMemAvailable:    8151714 kB\nBroken:\n");
    assert_int_equal(nb_meminfo_bytes(path, "MemTotal"), 16303428ull * 1024);
    assert_int_equal(nb_meminfo_bytes(path, "MemAvailable"), 8151714ull * 1024);
    assert_int_equal(nb_meminfo_bytes(path, "MemFre"), 0);
    assert_int_equal(nb_meminfo_bytes(path, "Broken"), 0);
    assert_int_equal(nb_meminfo_bytes(path, "SwapTotal"), 0);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none", path);
    assert_int_equal(nb_meminfo_bytes(missing, "MemTotal"), 0);
    /* this host: MemAvailable is there, and what may be committed is at most it */
    uint64_t avail = nb_meminfo_bytes(NULL, "MemAvailable");
    assert_true(avail > 0);
    assert_true(nb_mem_available() > 0 && nb_mem_available() <= avail + (64u << 20));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parse), cmocka_unit_test(test_in_cgroup),
                                        cmocka_unit_test(test_meminfo)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
