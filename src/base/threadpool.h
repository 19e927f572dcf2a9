/* A persistent thread pool for data-parallel loops.
 *
 * nb_pool_run(p, fn, arg) calls fn(arg, ith, nth) once for every ith in
 * [0, nth) - ith 0 on the calling thread, the others on the pool's workers -
 * and returns when all have returned. Workers spin for at most ~100 us
 * after each job (the forward pass issues hundreds of jobs per token, a few
 * microseconds apart), then sleep on a futex, so a pool idle between engine
 * steps costs no CPU; the caller likewise spins at most ~100 us for late
 * workers (one descheduled by a busy neighbour) and then sleeps until the
 * last one finishes, instead of burning the core that worker needs.
 * NIBBLE_PIN=1 (read when a pool is created) pins worker i to the i-th CPU
 * the process may use; where the OS refuses, workers run unpinned. The
 * caller's thread is never pinned.
 *
 * Not reentrant: one thread at a time may call nb_pool_run on a pool (the
 * engine loop owns its pool). */
#ifndef NB_BASE_THREADPOOL_H
#define NB_BASE_THREADPOOL_H

#include <stdint.h>

#include "base/status.h"

typedef struct nb_pool nb_pool;
typedef void (*nb_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0 means one per CPU the process may run on (its affinity
 * mask, else the online CPUs), at most its cgroup CPU quota (nb_cpu_quota). */
nb_status nb_pool_create(int n_threads, nb_pool **out) __attribute__((warn_unused_result));
void nb_pool_free(nb_pool *p);
int nb_pool_size(const nb_pool *p);
void nb_pool_run(nb_pool *p, nb_pool_fn fn, void *arg);

/* nb_pool_run for a job over [0, n) in chunks of `chunk` items that fn
 * takes with nb_pool_chunk: each thread first works through its own
 * contiguous share (so its memory stream stays sequential), then takes
 * work other threads have not started yet, from the back of their shares:
 * with chunk > 1 up to half of what is left there (at most 8 chunks) as
 * one range, with chunk 1 one item. A thread slowed down by other load on
 * the machine then no longer holds up the whole job. fn may be
 * called on fewer threads than the pool has (nth < nb_pool_size, so fn
 * must not rely on every ith running): a worker that keeps the caller
 * waiting (> 1 ms, twice within 50 ms: a neighbour shares that worker's
 * core) sits out chunked jobs for 50 ms, then is tried again; each failed
 * try doubles the wait, up to 1.6 s. When the caller, alone, then gets
 * less than 0.8 of a core (no core was free), every thread is back after
 * 20 ms and no one is benched for 0.4 s (threadpool.c, "Benching"). */
void nb_pool_run_chunks(nb_pool *p, nb_pool_fn fn, void *arg, int64_t n, int64_t chunk);
/* How many times a late worker was benched so far (read by the caller). */
int64_t nb_pool_benchings(const nb_pool *p);
/* The next range [*lo, *hi) for thread ith of the current
 * nb_pool_run_chunks job (a chunk of its own share, or up to 8 chunks taken
 * from another's); false when none is left. */
bool nb_pool_chunk(nb_pool *p, int ith, int64_t *lo, int64_t *hi);

/* Split [0, n) into nth nearly equal contiguous parts; part ith is [*lo, *hi). */
static inline void nb_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

#endif
