/* Read-bandwidth probe (see membw.h): every pattern of the set, interleaved
 * pass by pass (pass 1 of every pattern, then pass 2, ...) so that a noisy
 * host slows all patterns alike, the best pass of each kept. */
#include "kernels/membw.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hugemem.h"

/* The portable loop: 16-byte vectors (SSE2 on x86-64, NEON on arm64). */
typedef uint64_t v2u64 __attribute__((vector_size(16)));
static inline v2u64 load16(const char *q) {
    v2u64 v;
    memcpy(&v, q, sizeof v);
    return v;
}
static inline uint64_t reduce16(v2u64 v) { return v[0] + v[1]; }
#define MB_V v2u64
#define MB_VB 16
#define MB_LOAD(q) load16(q)
#define MB_ADD(a, b) ((a) + (b))
#define MB_ZERO() ((v2u64){0, 0})
#define MB_REDUCE(v) reduce16(v)
#define MB_NAME nb_membw_sum_ref
#include "kernels/dispatch.h"
#include "kernels/membw_loop.h"

typedef uint64_t (*sum_fn)(const void *const *p, int streams, size_t bytes, int prefetch, int turn);

#define MAX_THREADS 512
typedef struct {
    const char *buf;
    size_t units; /* 256-byte units in the buffer */
    int streams, prefetch, turn;
    sum_fn sum;
    uint64_t sums[MAX_THREADS];
    uint64_t bytes[MAX_THREADS];
} bw_job;

static void bw_worker(void *arg, int ith, int nth) {
    bw_job *j = arg;
    int64_t lo, hi;
    nb_split((int64_t)j->units, ith, nth, &lo, &hi);
    size_t per = (size_t)(hi - lo) / (size_t)j->streams; /* units per stream */
    const void *p[64];
    for (int s = 0; s < j->streams; s++) p[s] = j->buf + ((size_t)lo + (size_t)s * per) * 256;
    j->sums[ith % MAX_THREADS] += j->sum(p, j->streams, per * 256, j->prefetch, j->turn);
    j->bytes[ith % MAX_THREADS] = per * 256 * (size_t)j->streams;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* kB of AnonHugePages in the mapping that starts at p (/proc/self/smaps), -1 if unknown. */
static long huge_kb(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = lo == (unsigned long)(uintptr_t)p;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

NB_MEMBW_NO_TSAN static char *map_buffer(size_t bytes, bool huge) { /* membw_loop.h: not under TSan */
    char *a = nb_map_anon(bytes, huge);
    if (!a) return NULL;
    uint64_t *w = (uint64_t *)a;
    for (size_t i = 0; i < bytes / 8; i++) w[i] = i; /* touch every page */
    return a;
}

void nb_membw_pattern_name(const nb_membw_pattern *p, char *buf, size_t size) {
    char pf[32] = "no prefetch";
    if (p->prefetch) snprintf(pf, sizeof pf, "prefetch %d", p->prefetch);
    char loads[48] = "";
    if (p->load_bytes) snprintf(loads, sizeof loads, ", %d-byte loads", p->load_bytes);
    if (p->turn) snprintf(loads + strlen(loads), sizeof loads - strlen(loads), ", %d-byte turns", p->turn);
    snprintf(buf, size, "%d stream%s/thread, %s, %s pages%s", p->streams, p->streams > 1 ? "s" : "", pf,
             p->huge_pages ? "2M" : "4K", loads);
}

static void set_best(nb_membw_result *r) {
    r->best = 0;
    for (int i = 0; i < r->n; i++)
        if (r->p[i].gbps > r->p[r->best].gbps) r->best = i;
    r->gbps = r->n ? r->p[r->best].gbps : 0;
}

void nb_membw_merge(nb_membw_result *into, const nb_membw_result *other) {
    if (into->n != other->n) return;
    for (int i = 0; i < into->n; i++)
        if (other->p[i].gbps > into->p[i].gbps) into->p[i].gbps = other->p[i].gbps;
    into->huge_granted = into->huge_granted || other->huge_granted;
    set_best(into);
}

nb_status nb_membw_measure_patterns(nb_pool *pool, size_t bytes, int passes, nb_isa max_isa,
                                    const nb_membw_pattern *pats, int n, nb_membw_result *out) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > NB_MEMBW_MAX_PATTERNS)
        return nb_fail(NB_ERR_INVALID, "bandwidth probe: %d patterns, allowed 1..%d", n, NB_MEMBW_MAX_PATTERNS);
    for (int i = 0; i < n; i++)
        if (pats[i].streams < 1 || pats[i].streams > 64 || pats[i].prefetch < 0 || pats[i].prefetch > (1 << 20) ||
            (pats[i].load_bytes != 0 && pats[i].load_bytes != 32) || (pats[i].turn != 0 && pats[i].turn != 64))
            return nb_fail(NB_ERR_INVALID,
                           "bandwidth probe: pattern %d has %d streams, prefetch %d, load_bytes %d, turn %d (allowed "
                           "1..64, 0..1 MiB, 0 or 32, 0 or 64)",
                           i, pats[i].streams, pats[i].prefetch, pats[i].load_bytes, pats[i].turn);
    if (passes < 1) passes = 1;
    bytes = bytes >> 20 << 20;
    if (bytes < ((size_t)64 << 20)) bytes = (size_t)64 << 20;
    nb_isa isa = nb_cpu_isa();
    if (isa > max_isa) isa = max_isa;
    sum_fn sum = nb_membw_sum_ref, sum32 = NULL; /* the widest loads; 32-byte ones */
    out->isa = "vec16";
#if defined(__x86_64__)
    if (isa >= NB_ISA_AVX2) { sum = sum32 = nb_membw_sum_avx2; out->isa = "avx2"; }
    if (isa >= NB_ISA_AVX512) { sum = nb_membw_sum_avx512; out->isa = "avx512"; }
#endif
    for (int i = 0; i < n; i++)
        if (pats[i].load_bytes == 32 && !sum32)
            return nb_fail(NB_ERR_UNSUPPORTED, "bandwidth probe: pattern %d asks for 32-byte loads, which need AVX2", i);
    bool need[2] = {false, false};
    for (int i = 0; i < n; i++) need[pats[i].huge_pages] = true;
    char *buf[2] = {NULL, NULL};
    for (int h = 0; h < 2; h++)
        if (need[h] && !(buf[h] = map_buffer(bytes, h))) {
            nb_unmap_anon(buf[0], bytes);
            return nb_fail(NB_ERR_NOMEM, "bandwidth probe: cannot map %zu bytes", bytes);
        }
    if (buf[1]) out->huge_granted = huge_kb(buf[1]) > 0;
    static bw_job j; /* large (per-thread sums); the probe runs one at a time */
    memset(&j, 0, sizeof j);
    out->n = n;
    for (int pass = 0; pass < passes; pass++)
        for (int i = 0; i < n; i++) {
            j.buf = buf[pats[i].huge_pages];
            j.units = bytes / 256;
            j.streams = pats[i].streams;
            j.prefetch = pats[i].prefetch;
            j.turn = pats[i].turn;
            j.sum = pats[i].load_bytes == 32 ? sum32 : sum;
            double t0 = now_s();
            nb_pool_run(pool, bw_worker, &j);
            double t = now_s() - t0;
            uint64_t got = 0;
            for (int k = 0; k < nb_pool_size(pool) && k < MAX_THREADS; k++) got += j.bytes[k];
            if (pass == 0) {
                out->p[i] = pats[i];
                out->p[i].gbps = 0; /* a result field: a caller's earlier measurement is not a floor */
            }
            double g = t > 0 ? (double)got / t / 1e9 : 0;
            if (g > out->p[i].gbps) out->p[i].gbps = g; /* the best pass */
        }
    set_best(out);
    volatile uint64_t sink = j.sums[0];
    (void)sink;
    for (int h = 0; h < 2; h++)
        nb_unmap_anon(buf[h], bytes);
    return NB_OK;
}

nb_status nb_membw_measure(nb_pool *pool, size_t bytes, int passes, nb_isa max_isa, nb_membw_result *out) {
    /* prefetch: none, 2 KiB, and the distance the kernels take on this CPU */
    int pfs[3] = {0, 2048, nb_prefetch_for_cpu(nb_cpu_get())}, npf = pfs[2] != 0 && pfs[2] != 2048 ? 3 : 2;
    nb_membw_pattern pats[NB_MEMBW_MAX_PATTERNS];
    int n = 0;
    for (int h = 1; h >= 0; h--) {
        for (int s = 1; s <= 8; s += 7)
            for (int k = 0; k < npf; k++) pats[n++] = (nb_membw_pattern){s, pfs[k], h == 1, 0, 0, 0};
        pats[n++] = (nb_membw_pattern){4, 2048, h == 1, 0, 0, 64}; /* the decode dots' streams (membw.h) */
    }
    nb_isa isa = nb_cpu_isa() < max_isa ? nb_cpu_isa() : max_isa;
    if (isa >= NB_ISA_AVX512) /* narrower loads on 2 MiB pages (membw.h) */
        for (int s = 1; s <= 8; s += 7)
            for (int k = 0; k < npf; k++) pats[n++] = (nb_membw_pattern){s, pfs[k], true, 0, 32, 0};
    return nb_membw_measure_patterns(pool, bytes, passes, max_isa, pats, n, out);
}

nb_status nb_measure_read_bandwidth(nb_pool *pool, size_t bytes, int passes, double *gbps) {
    nb_membw_result r;
    NB_TRY(nb_membw_measure(pool, bytes, passes, NB_ISA_AMX, &r));
    *gbps = r.gbps;
    return NB_OK;
}
