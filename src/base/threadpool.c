/* Persistent thread pool: one job at a time; workers and the caller spin
 * for a bounded time, then sleep on a futex (see threadpool.h). */
#include "base/threadpool.h"

#include "base/cpu.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
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

/* One thread's share of a chunked job: items [base + front, base + back)
 * are left, front in the high and back in the low 32 bits of span. The
 * owner takes chunks from the front, other threads from the back (nb_pool_chunk).
 * A cache line each so owners do not contend. */
typedef struct {
    _Alignas(64) _Atomic uint64_t span;
    int64_t base;
} share;
#define SHARE_MAX 0xffffffffLL /* items a share may hold */
#define STEAL_CHUNKS 8         /* chunks a thread takes from another share at once, at most */

/* The job word: the job's number (one more per job; 54 bits do not wrap)
 * above the number of threads it uses; workers ith >= that many sit it out. */
#define JOB_THREAD_BITS 10 /* n <= 512 */
#define JOB_THREADS(w) ((int)((w) & ((1u << JOB_THREAD_BITS) - 1)))
#define JOB_GEN(w) ((w) >> JOB_THREAD_BITS)

/* Benching. A worker that keeps the caller waiting more than LATE_NS after
 * the caller's own part of a chunked job (and longer than that part took)
 * was descheduled, not slow: its core is shared with other load, and the
 * caller, having taken every chunk it could, waits out the neighbour's time
 * slice (3-4 ms here) with the worker's chunk in hand. With one busy
 * neighbour on one of two cores that halved decode (docs/speed.md, session
 * 14). LATE_JOBS such jobs within LATE_WINDOW_NS bench the last active
 * worker: chunked jobs run without it for BENCH_MIN_NS, then try it again; a
 * try that is late again within its period doubles the next, up to
 * BENCH_MAX_NS, so a neighbour that stays costs a few late jobs per
 * BENCH_MAX_NS and one that leaves is noticed within that. Why three: a
 * neighbour that stays makes a job late once per time slice it takes (every
 * 8 ms here, about six in a window), while a kernel thread's short burst
 * (on the AMD guest of session 23, kdamond: 2 ms of CPU twice a second,
 * /proc/<pid>/schedstat, matching the late jobs' 512 ms period) makes one
 * or two; with
 * two, such bursts benched a worker about once per 3-second run on a quiet
 * machine (docs/speed.md, session 23). Jobs of nb_pool_run always use every
 * thread (their callers split work by thread count). */
#define LATE_NS 1000000L
#define LATE_JOBS 3
#define LATE_WINDOW_NS 50000000L
#define BENCH_MIN_NS 50000000L
#define BENCH_MAX_NS 1600000000L
/* Benching only helps when the remaining threads then get a core each:
 * when every core is shared anyway (a neighbour on each), two half cores
 * beat one. So BENCH_CHECK_NS into a benching the caller looks at its own
 * share of a core since it began (its CPU time over wall time); under
 * OWN_CORE_SHARE there was no free core to gain, and the pool goes back
 * to every thread and benches no one for HOLD_NS. Measured here (2 vCPUs):
 * 0.93-1.0 with a neighbour on one core, 0.5-0.6 with one on each. A
 * caller that idles between jobs (a server waiting for requests) looks
 * the same, and then every thread is what it should get anyway. */
#define BENCH_CHECK_NS 20000000L
#define OWN_CORE_SHARE 0.8
#define HOLD_NS 400000000L

struct nb_pool {
    int n;
    share *shares; /* n, for nb_pool_run_chunks */
    int64_t chunk;
    int chunk_threads; /* threads of the current chunked job (its shares) */
    pthread_t *threads;
    nb_pool_fn fn;
    void *arg;
    _Alignas(64) _Atomic uint64_t job; /* JOB_GEN | JOB_THREADS */
    atomic_uint doorbell;              /* rung once per job; workers sleep on it between jobs */
    atomic_int sleeping;               /* workers asleep (or about to be) on doorbell */
    atomic_uint roster;            /* bumped when jobs use more threads; benched workers sleep on it */
    atomic_int benched_sleeping;   /* workers asleep (or about to be) on roster */
    _Alignas(64) atomic_uint pending; /* workers still running the current job; the caller sleeps on it */
    atomic_bool caller_sleeping;
    atomic_bool quit;
    bool pin;
    /* the caller's own state (one caller at a time) */
    int last_threads;     /* threads of the last job posted */
    int active;           /* threads chunked jobs use now, 1..n */
    int64_t retry_at;     /* when a benched worker is tried again */
    int64_t bench_ns;     /* how long the last benching lasted */
    int64_t trial_end;    /* a worker late before this was just tried again */
    int64_t late_since;   /* the first late job of the current window */
    int late_n;           /* late jobs since late_since */
    int64_t check_at;     /* when to look at the caller's share of its core (0: not benched) */
    int64_t bench_wall, bench_cpu; /* the caller's clocks when benching began */
    int64_t hold_until;   /* no benching before this: it did not help */
    int64_t benchings;    /* in all, for nb_pool_benchings */
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
#define SPIN_WHILE_EQ(a, v)                                                 \
    do {                                                                    \
        int64_t t0_ = 0;                                                    \
        for (unsigned i_ = 1;; i_++) {                                      \
            if (atomic_load_explicit(a, memory_order_acquire) != (v)) return true; \
            cpu_relax();                                                    \
            if (i_ % CLOCK_EVERY == 0) {                                    \
                int64_t t_ = now_ns();                                      \
                if (!t0_) t0_ = t_;                                         \
                else if (t_ - t0_ > SPIN_NS) return false;                  \
            }                                                               \
        }                                                                   \
    } while (0)
/* The hand-off code (these waits, worker, run_on, nb_pool_chunk) starts on
 * a cache line of its own: decode runs it a hundred times a token, and where
 * the linker happened to put it cost TinyLlama Q4_0 decode 5-7% on the
 * Intel guest of session 31 (80 KB more code before it: 45.1-45.9 -> 41.9-43.5
 * tok/s; the same 80 KB of data instead: 44.5-44.7; aligned: 44.6-45.5). */
#define NB_HOT_ALIGN __attribute__((aligned(64)))
NB_HOT_ALIGN static bool spin_while_eq(atomic_uint *a, unsigned v) { SPIN_WHILE_EQ(a, v); }
NB_HOT_ALIGN static bool spin_while_eq64(_Atomic uint64_t *a, uint64_t v) { SPIN_WHILE_EQ(a, v); }

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

/* A worker that jobs leave out sleeps until jobs use more threads. */
static void sit_out(nb_pool *p, int ith) {
    unsigned r = atomic_load(&p->roster);
    atomic_fetch_add(&p->benched_sleeping, 1);
    if (JOB_THREADS(atomic_load(&p->job)) <= ith && !atomic_load(&p->quit)) fwait(&p->roster, r);
    atomic_fetch_sub(&p->benched_sleeping, 1);
}

NB_HOT_ALIGN static void *worker(void *v) {
    worker_arg wa = *(worker_arg *)v;
    free(v);
    nb_pool *p = wa.p;
    if (p->pin) pin_self(wa.ith);
    uint64_t seen = 0;
    for (;;) {
        uint64_t w;
        for (;;) { /* the bell before the job: a job posted after this read rings it after */
            unsigned bell = atomic_load(&p->doorbell);
            w = atomic_load(&p->job);
            if (JOB_GEN(w) != seen || atomic_load(&p->quit)) break;
            if (spin_while_eq64(&p->job, w)) continue;
            atomic_fetch_add(&p->sleeping, 1);
            if (!atomic_load(&p->quit)) fwait(&p->doorbell, bell);
            atomic_fetch_sub(&p->sleeping, 1);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = JOB_GEN(w);
        /* A job this worker is part of cannot end without it, so fn and arg
         * stay that job's while it runs; one it sits out may be followed by
         * others before it looks again. */
        if (wa.ith >= JOB_THREADS(w)) { sit_out(p, wa.ith); continue; }
        p->fn(p->arg, wa.ith, JOB_THREADS(w));
        if (atomic_fetch_sub(&p->pending, 1u) == 1u && atomic_load(&p->caller_sleeping)) fwake(&p->pending, 1);
    }
}

/* The CPUs this process may run on (its affinity mask: taskset, cgroup
 * cpusets; else the online ones), no more than its cgroup's CPU quota
 * allows (nb_cpu_quota). */
static int usable_cpus(void) {
    int n = 0;
#if defined(__linux__)
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) n = CPU_COUNT(&allowed);
#endif
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    int q = nb_cpu_quota();
    return q > 0 && q < n ? q : n;
}

nb_status nb_pool_create(int n_threads, nb_pool **out) {
    if (n_threads <= 0) n_threads = NB_MIN(usable_cpus(), 512);
    if (n_threads > 512) return nb_fail(NB_ERR_RANGE, "threads: %d is too many (allowed 1..512)", n_threads);
    nb_pool *p = nb_calloc(1, sizeof *p);
    if (!p) return NB_ERR_NOMEM;
    p->n = n_threads;
    p->active = p->last_threads = n_threads;
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
    atomic_fetch_add(&p->doorbell, 1);
    atomic_fetch_add(&p->roster, 1);
    fwake(&p->doorbell, INT_MAX);
    fwake(&p->roster, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->shares);
    free(p);
}

int nb_pool_size(const nb_pool *p) { return p->n; }
int64_t nb_pool_benchings(const nb_pool *p) { return p->benchings; }

/* Runs fn on threads 0..nth-1 (the caller is 0) and returns when all are
 * done: the time then; *own_ns and *wait_ns: how long the caller's part
 * took and how long it then waited for the workers. */
NB_HOT_ALIGN static int64_t run_on(nb_pool *p, nb_pool_fn fn, void *arg, int nth, int64_t *own_ns, int64_t *wait_ns) {
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, (unsigned)(nth - 1));
    atomic_store(&p->job, (JOB_GEN(atomic_load(&p->job)) + 1) << JOB_THREAD_BITS | (uint64_t)nth);
    atomic_fetch_add(&p->doorbell, 1);
    if (nth > p->last_threads) {
        atomic_fetch_add(&p->roster, 1);
        if (atomic_load(&p->benched_sleeping) > 0) fwake(&p->roster, INT_MAX);
    }
    p->last_threads = nth;
    if (atomic_load(&p->sleeping) > 0) fwake(&p->doorbell, INT_MAX);
    int64_t t0 = now_ns();
    fn(arg, 0, nth);
    int64_t t1 = now_ns();
    *own_ns = t1 - t0;
    unsigned v;
    while ((v = atomic_load(&p->pending)) > 0)
        if (!spin_while_eq(&p->pending, v)) break;
    if (v > 0) { /* a worker is late (descheduled by other load?): sleep until the last one ends */
        atomic_store(&p->caller_sleeping, true);
        while ((v = atomic_load(&p->pending)) > 0) fwait(&p->pending, v);
        atomic_store(&p->caller_sleeping, false);
    }
    int64_t t2 = now_ns();
    *wait_ns = t2 - t1;
    return t2;
}

void nb_pool_run(nb_pool *p, nb_pool_fn fn, void *arg) {
    if (p->n == 1) { fn(arg, 0, 1); return; }
    int64_t own, wait;
    (void)run_on(p, fn, arg, p->n, &own, &wait);
}

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* After a chunked job on nth threads: bench the last worker when it was
 * late again, undo a benching that found no free core, or try one more
 * thread when its time has come. */
static void adapt(nb_pool *p, int64_t t, int nth, int64_t own_ns, int64_t wait_ns) {
    if (nth > 1 && wait_ns > LATE_NS && wait_ns > own_ns) {
        if (t < p->hold_until) return;
        if (t - p->late_since > LATE_WINDOW_NS) {
            p->late_since = t;
            p->late_n = 0;
        }
        if (++p->late_n < LATE_JOBS) return;
        p->late_n = 0;
        p->bench_ns = t < p->trial_end ? NB_MIN(2 * p->bench_ns, BENCH_MAX_NS) : BENCH_MIN_NS;
        p->active = nth - 1;
        p->benchings++;
        p->retry_at = t + p->bench_ns;
        p->check_at = t + BENCH_CHECK_NS;
        p->bench_wall = t;
        p->bench_cpu = thread_cpu_ns();
    } else if (p->check_at && t >= p->check_at) {
        p->check_at = 0;
        int64_t cpu = thread_cpu_ns() - p->bench_cpu;
        double core = p->bench_cpu < 0 || cpu < 0 ? 1.0 : (double)cpu / (double)(t - p->bench_wall);
        if (core < OWN_CORE_SHARE) {
            p->active = p->n;
            p->hold_until = t + HOLD_NS;
        }
    } else if (p->active < p->n && t >= p->retry_at) {
        p->active++;
        p->trial_end = t + p->bench_ns;
    }
}

/* Items [o, o + n) as one chunked job (shares of at most SHARE_MAX items). */
static void run_chunks_from(nb_pool *p, nb_pool_fn fn, void *arg, int64_t o, int64_t n, int64_t chunk) {
    int64_t chunks = (n + chunk - 1) / chunk;
    const int nth = p->active;
    p->chunk = chunk;
    p->chunk_threads = nth;
    for (int i = 0; i < nth; i++) {
        int64_t lo, hi;
        nb_split(chunks, i, nth, &lo, &hi);
        p->shares[i].base = o + lo * chunk;
        atomic_store(&p->shares[i].span, (uint64_t)((hi * chunk < n ? hi * chunk : n) - lo * chunk));
    }
    if (nth == 1) {
        fn(arg, 0, 1);
        if (p->n > 1) adapt(p, now_ns(), 1, 0, 0);
        return;
    }
    int64_t own, wait, t = run_on(p, fn, arg, nth, &own, &wait);
    adapt(p, t, nth, own, wait);
}

void nb_pool_run_chunks(nb_pool *p, nb_pool_fn fn, void *arg, int64_t n, int64_t chunk) {
    chunk = NB_MIN(NB_MAX(chunk, 1), SHARE_MAX);
    /* a share holds at most SHARE_MAX items: bigger jobs in parts (a part a
     * multiple of the chunk, so the chunk grid stays the job's) */
    const int64_t part = SHARE_MAX / chunk * chunk;
    for (int64_t o = 0;; o += part) { /* at least once: an empty job still runs fn (with no chunks) */
        run_chunks_from(p, fn, arg, o, NB_MAX(0, NB_MIN(part, n - o)), chunk);
        if (n - o <= part) break;
    }
}

/* A thread takes its own share's chunks from the front, in order, then
 * work from the back of the other shares: the owner's streams go on
 * undisturbed while the thief reads elsewhere. Jobs of several items a
 * chunk (the matmuls: rows streamed from memory) hand the thief up to half
 * of what is left, at most STEAL_CHUNKS chunks, as one range it streams in
 * order; jobs of one item a chunk (attention spans, activation groups:
 * each item a piece of work of its own) one item, so that nothing waits
 * long on a thread slowed by other load. Taking the owner's next chunk
 * instead (until session 33) made the two threads alternate chunks of the
 * same rows for a job's last part: one-token matmuls through the pool read
 * 11-13% less than the same kernel with a static split, and a Q4_0R pass
 * of 5632-row matrices went from 45.4-49.7 to 52.4-53.8 GB/s
 * (docs/speed.md, session 33). */
NB_HOT_ALIGN bool nb_pool_chunk(nb_pool *p, int ith, int64_t *lo, int64_t *hi) {
    const int64_t chunk = p->chunk;
    for (int k = 0; k < p->chunk_threads; k++) {
        share *s = &p->shares[(ith + k) % p->chunk_threads];
        uint64_t v = atomic_load_explicit(&s->span, memory_order_relaxed);
        for (;;) {
            int64_t f = (int64_t)(v >> 32), b = (int64_t)(v & 0xffffffffu), a, z;
            if (f >= b) break;
            if (k == 0) { /* own share: the front chunk */
                a = f;
                z = f + chunk < b ? f + chunk : b;
                if (!atomic_compare_exchange_weak(&s->span, &v, (uint64_t)z << 32 | (uint64_t)b)) continue;
            } else { /* another's: from the back, on the chunk grid */
                int64_t left = (b - f + chunk - 1) / chunk;
                int64_t take = chunk > 1 ? NB_MIN(NB_MAX(left / 2, 1), STEAL_CHUNKS) : 1;
                a = NB_MAX(f, ((b - 1) / chunk - (take - 1)) * chunk);
                z = b;
                if (!atomic_compare_exchange_weak(&s->span, &v, (uint64_t)f << 32 | (uint64_t)a)) continue;
            }
            *lo = s->base + a;
            *hi = s->base + z;
            return true;
        }
    }
    return false;
}
