/* Persistent thread pool: spin-then-sleep workers, one job at a time. */
#include "base/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ROUNDS 20000 /* ~1 ms of pause instructions before sleeping */

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
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nb_pool_fn fn;
    void *arg;
    atomic_uint generation; /* bumped once per job */
    atomic_int pending;     /* workers still running the current job */
    atomic_int sleeping;
    atomic_bool quit;
};

typedef struct { nb_pool *p; int ith; } worker_arg;

static void *worker(void *v) {
    worker_arg wa = *(worker_arg *)v;
    free(v);
    nb_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit)) {
            if (++spins < SPIN_ROUNDS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleeping, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleeping, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        p->fn(p->arg, wa.ith, p->n);
        atomic_fetch_sub(&p->pending, 1);
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
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
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
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->shares);
    free(p);
}

int nb_pool_size(const nb_pool *p) { return p->n; }

void nb_pool_run(nb_pool *p, nb_pool_fn fn, void *arg) {
    if (p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    while (atomic_load(&p->pending) > 0) cpu_relax();
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
