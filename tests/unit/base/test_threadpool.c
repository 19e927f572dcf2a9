/* nb_pool_run_chunks: every item of [0, n) is handed out exactly once, for
 * chunk sizes that do and do not divide n, more threads than chunks, and a
 * thread that is slow on purpose (the others must take its chunks); a
 * worker late three times in a row is benched from chunked jobs (not from
 * nb_pool_run's) and tried again later; one or two late jobs alone bench no
 * one; the default size is the CPUs of the affinity mask. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/threadpool.h"
#include "testutil.h"

typedef struct {
    nb_pool *pool;
    atomic_int *seen;
    atomic_int by_thread[8];
    int slow; /* thread that sleeps per chunk, or -1 */
    int late; /* thread that sleeps 10 ms on entering the job, or -1 */
    atomic_int nth; /* as the job's fn saw it */
} job;

static void sleep_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000}, NULL); }

static void visit(void *arg, int ith, int nth) {
    (void)nth;
    job *j = arg;
    atomic_store(&j->nth, nth);
    if (ith == j->late) sleep_ms(10);
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi)) {
        assert_true(lo < hi);
        for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&j->seen[i], 1);
        atomic_fetch_add(&j->by_thread[ith], (int)(hi - lo));
        if (ith == j->slow) nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
}

static void run(int threads, int64_t n, int64_t chunk, int slow) {
    job j = {.slow = slow, .late = -1};
    assert_int_equal(nb_pool_create(threads, &j.pool), NB_OK);
    j.seen = calloc((size_t)n + 1, sizeof *j.seen);
    nb_pool_run_chunks(j.pool, visit, &j, n, chunk);
    for (int64_t i = 0; i < n; i++) assert_int_equal(atomic_load(&j.seen[i]), 1);
    if (slow >= 0 && threads > 1) /* the slow thread's share was mostly taken by the others */
        assert_true(atomic_load(&j.by_thread[slow]) < n / threads);
    free(j.seen);
    nb_pool_free(j.pool);
}

static void test_chunks(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{1, 1}, {7, 3}, {100, 7}, {64, 64}, {5, 100}, {1000, 1}, {32000, 27}};
    for (int t = 1; t <= 4; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run(t, shapes[s][0], shapes[s][1], -1);
}

static void test_stealing(void **state) {
    (void)state;
    run(2, 400, 4, 1);
    run(3, 600, 4, 0);
}

/* One chunked job over 64 items; the threads it ran on, and each item once. */
static int chunk_job(job *j, int late) {
    atomic_int seen[64] = {0};
    j->seen = seen;
    j->late = late;
    atomic_store(&j->by_thread[1], 0);
    nb_pool_run_chunks(j->pool, visit, j, 64, 4);
    for (int i = 0; i < 64; i++) assert_int_equal(atomic_load(&seen[i]), 1);
    return atomic_load(&j->nth);
}

static void count_threads(void *arg, int ith, int nth) {
    job *j = arg;
    atomic_fetch_add(&j->by_thread[ith], 1);
    atomic_store(&j->nth, nth);
}

static void spin_ms(long ms, job *j) { /* the caller busy, running chunked jobs */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        chunk_job(j, -1);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* One run of the benching scenario on a fresh pool: false (and why, on
 * stderr) at the first thread count that differs from the rule's. */
#define EXPECT(got, want)                                                                                    \
    do {                                                                                                     \
        const int g_ = (got), w_ = (want);                                                                   \
        if (g_ != w_) {                                                                                      \
            fprintf(stderr, "  benching attempt: line %d: %s gave %d, the rule says %d\n", __LINE__, #got, g_, \
                    w_);                                                                                     \
            nb_pool_free(j.pool);                                                                            \
            return false;                                                                                    \
        }                                                                                                    \
    } while (0)

static bool benching_attempt(void) {
    job j = {.slow = -1, .late = -1};
    assert_int_equal(nb_pool_create(2, &j.pool), NB_OK);
    /* the first job waits for the worker to start (late, on a busy
     * machine): an nb_pool_run job, which lateness does not count in */
    nb_pool_run(j.pool, count_threads, &j);
    EXPECT(chunk_job(&j, -1), 2);
    /* one or two late jobs: a burst, nobody benched. (The first job after
     * a sleep may be late too, waiting for the worker to wake up, so the
     * check right after two late ones comes before any sleep.) */
    EXPECT(chunk_job(&j, 1), 2);
    sleep_ms(60);
    EXPECT(chunk_job(&j, -1), 2);
    sleep_ms(60);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, -1), 2);
    sleep_ms(60);
    EXPECT(chunk_job(&j, -1), 2);
    sleep_ms(60);
    /* late three times in a row: the worker sits out the next chunked jobs ... */
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, -1), 1);
    EXPECT(atomic_load(&j.by_thread[1]), 0);
    /* ... but not nb_pool_run's, whose callers split work by thread */
    atomic_store(&j.by_thread[0], 0);
    nb_pool_run(j.pool, count_threads, &j);
    EXPECT(atomic_load(&j.nth), 2);
    EXPECT(atomic_load(&j.by_thread[0]), 1);
    EXPECT(atomic_load(&j.by_thread[1]), 1);
    EXPECT(chunk_job(&j, -1), 1);
    /* a caller that then gets little CPU (here: it sleeps) gained no core:
     * 20 ms in, every thread is back, and lateness benches no one for a while */
    sleep_ms(30);
    chunk_job(&j, -1);
    EXPECT(chunk_job(&j, -1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, -1), 2);
    /* after the hold, benched again; whether the caller keeps its core or
     * not, 60 busy ms later the worker is back (tried again, or unbenched) */
    sleep_ms(450);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, 1), 2);
    EXPECT(chunk_job(&j, -1), 1);
    spin_ms(60, &j);
    chunk_job(&j, -1);
    EXPECT(chunk_job(&j, -1), 2);
    nb_pool_free(j.pool);
    return true;
}
#undef EXPECT

/* Lateness is a matter of time: on a loaded machine (the sanitizer runs,
 * tests in parallel on 2 cores) a job meant to be on time can be late by
 * accident, which makes one more late job than the scenario planned. So
 * the scenario runs up to 5 times on fresh pools and must hold once: a
 * wrong rule fails every attempt the same way. */
static void test_benching(void **state) {
    (void)state;
    for (int attempt = 1; attempt <= 5; attempt++) {
        if (benching_attempt()) return;
        fprintf(stderr, "  benching attempt %d of 5 did not hold (see above)\n", attempt);
    }
    fail_msg("the benching scenario did not hold in 5 attempts");
}

/* nb_pool_create(0): one thread per CPU this process may run on (taskset,
 * cpusets), not per online CPU. */
static void test_default_size(void **state) {
    (void)state;
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0) {
        NB_TEST_SKIP("sched_getaffinity is not available here");
        return;
    }
    nb_pool *p;
    assert_int_equal(nb_pool_create(0, &p), NB_OK);
    assert_int_equal(nb_pool_size(p), CPU_COUNT(&all));
    nb_pool_free(p);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) { CPU_SET(c, &one); break; }
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        NB_TEST_SKIP("cannot confine this process to one CPU (sched_setaffinity refused)");
        return;
    }
    nb_status st = nb_pool_create(0, &p);
    int size = st == NB_OK ? nb_pool_size(p) : -1;
    if (st == NB_OK) nb_pool_free(p);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(size, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_chunks), cmocka_unit_test(test_stealing),
                                       cmocka_unit_test(test_benching), cmocka_unit_test(test_default_size)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
