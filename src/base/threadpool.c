/* Persistent thread pool: one job at a time; workers and the caller spin
 * for a bounded time, then sleep on a futex (see threadpool.h). */
#include "base/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a thread spins before it sleeps: long enough to bridge the gaps
 * between the jobs of one forward pass (a norm or a rope on the caller
 * takes tens of microseconds), short enough that a pool idle between engine
 * steps, or sharing its cores with a busy neighbour, stops burning them. */
#define SPIN_NS 100000L
#define CLOCK_EVERY 64 /* pause instructions between clock reads */

/* One thread's share of a chunked job; a cache line each so owners do not
 * contend. */
typedef struct {
    _Alignas(64) atomic_int_fast64_t next;
    int64_t end;
} share;

struct nb_pool {
    int n;
    share *shares; /* n, for nb_pool_run_chunks */
    int64_t chunk;
    pthread_t *threads;
    nb_pool_fn fn;
    void *arg;
    _Alignas(64) atomic_uint generation; /* bumped once per job; workers sleep on it */
    atomic_int sleeping;                 /* workers asleep (or about to be) on generation */
    _Alignas(64) atomic_uint pending;    /* workers still running the current job; the caller sleeps on it */
    atomic_bool caller_sleeping;
    atomic_bool quit;
    bool pin;
};

typedef struct { nb_pool *p; int ith; } worker_arg;

#if defined(__linux__)
static void fwait(void *addr, unsigned val) {
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void fwake(void *addr, int n) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }
#else
static void fwait(void *addr, unsigned val) { (void)addr; (void)val; sched_yield(); }
static void fwake(void *addr, int n) { (void)addr; (void)n; }
#endif

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *a != v or SPIN_NS pass; true when it changed. */
static bool spin_while_eq(atomic_uint *a, unsigned v) {
    int64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(a, memory_order_acquire) != v) return true;
        cpu_relax();
        if (i % CLOCK_EVERY == 0) {
            int64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > SPIN_NS) return false;
        }
    }
}

/* Pins worker ith to the ith CPU it may run on (NIBBLE_PIN=1). */
static void pin_self(int ith) {
#if defined(__linux__)
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int want = ith % CPU_COUNT(&allowed), k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed) && k++ == want) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* refused: run unpinned */
            return;
        }
#else
    (void)ith;
#endif
}

static void *worker(void *v) {
    worker_arg wa = *(worker_arg *)v;
    free(v);
    nb_pool *p = wa.p;
    if (p->pin) pin_self(wa.ith);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit)) {
            if (spin_while_eq(&p->generation, seen)) continue;
            atomic_fetch_add(&p->sleeping, 1);
            if (atomic_load(&p->generation) == seen && !atomic_load(&p->quit)) fwait(&p->generation, seen);
            atomic_fetch_sub(&p->sleeping, 1);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        p->fn(p->arg, wa.ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1u) == 1u && atomic_load(&p->caller_sleeping)) fwake(&p->pending, 1);
    }
}

nb_status nb_pool_create(int n_threads, nb_pool **out) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 512) return nb_fail(NB_ERR_RANGE, "threads: %d is too many (allowed 1..512)", n_threads);
    nb_pool *p = nb_calloc(1, sizeof *p);
    if (!p) return NB_ERR_NOMEM;
    p->n = n_threads;
    const char *pin = getenv("NIBBLE_PIN"); /* read once per pool, at creation */
    p->pin = pin && !strcmp(pin, "1");
    p->threads = nb_calloc((size_t)n_threads, sizeof *p->threads);
    p->shares = aligned_alloc(64, (size_t)n_threads * sizeof *p->shares);
    if (!p->threads || !p->shares) { free(p->threads); free(p->shares); free(p); return NB_ERR_NOMEM; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n = i; nb_pool_free(p); return nb_fail(NB_ERR_NOMEM, "out of memory starting threads"); }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            p->n = i;
            nb_pool_free(p);
            return nb_fail(NB_ERR_NOMEM, "cannot start thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return NB_OK;
}

void nb_pool_free(nb_pool *p) {
    if (!p) return;
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->generation, 1);
    fwake(&p->generation, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->shares);
    free(p);
}

int nb_pool_size(const nb_pool *p) { return p->n; }

void nb_pool_run(nb_pool *p, nb_pool_fn fn, void *arg) {
    if (p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, (unsigned)(p->n - 1));
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleeping) > 0) fwake(&p->generation, INT_MAX);
    fn(arg, 0, p->n);
    unsigned v;
    while ((v = atomic_load(&p->pending)) > 0)
        if (!spin_while_eq(&p->pending, v)) break;
    if (v == 0) return;
    /* a worker is late (descheduled by other load?): sleep until the last one ends */
    atomic_store(&p->caller_sleeping, true);
    while ((v = atomic_load(&p->pending)) > 0) fwait(&p->pending, v);
    atomic_store(&p->caller_sleeping, false);
}

void nb_pool_run_chunks(nb_pool *p, nb_pool_fn fn, void *arg, int64_t n, int64_t chunk) {
    if (chunk < 1) chunk = 1;
    int64_t chunks = (n + chunk - 1) / chunk;
    p->chunk = chunk;
    for (int i = 0; i < p->n; i++) {
        int64_t lo, hi;
        nb_split(chunks, i, p->n, &lo, &hi);
        atomic_store(&p->shares[i].next, lo * chunk);
        p->shares[i].end = hi * chunk < n ? hi * chunk : n;
    }
    nb_pool_run(p, fn, arg);
}

bool nb_pool_chunk(nb_pool *p, int ith, int64_t *lo, int64_t *hi) {
    for (int k = 0; k < p->n; k++) {
        share *s = &p->shares[(ith + k) % p->n];
        if (atomic_load_explicit(&s->next, memory_order_relaxed) >= s->end) continue;
        int64_t c = atomic_fetch_add(&s->next, p->chunk);
        if (c < s->end) {
            *lo = c;
            *hi = c + p->chunk < s->end ? c + p->chunk : s->end;
            return true;
        }
    }
    return false;
}
