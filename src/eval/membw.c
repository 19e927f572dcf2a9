/* Read-bandwidth probe (see membw.h). Each thread sums its slice with
 * 16-byte vector adds (GCC vector extensions: SSE2 everywhere on x86-64,
 * NEON on arm64), four independent accumulators per 64-byte line - cheap
 * enough that memory, not the ALU, is the limit - and the sum is kept so
 * the compiler cannot drop the loads. Like the decode kernels it reads huge
 * pages and prefetches 2 KiB ahead. */
#include "eval/membw.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/cpu.h"

typedef struct {
    const uint64_t *buf;
    size_t n;
    bool avx512;
    uint64_t sums[512];
} bw_job;

typedef uint64_t v2u64 __attribute__((vector_size(16)));

static void bw_worker(void *arg, int ith, int nth) {
    bw_job *j = arg;
    int64_t lo, hi;
    nb_split((int64_t)j->n / 32, ith, nth, &lo, &hi); /* 256-byte units */
    if (j->avx512) {
        j->sums[ith & 511] = nb_membw_sum_avx512(j->buf + lo * 32, (size_t)(hi - lo) * 256);
        return;
    }
    lo *= 2;
    hi *= 2;
    const v2u64 *p = (const v2u64 *)j->buf;
    v2u64 s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = lo * 8; i < hi * 8; i += 8) {
        __builtin_prefetch((const char *)(p + i) + 2048, 0, 3);
        __builtin_prefetch((const char *)(p + i) + 2048 + 64, 0, 3);
        s0 += p[i] + p[i + 4];
        s1 += p[i + 1] + p[i + 5];
        s2 += p[i + 2] + p[i + 6];
        s3 += p[i + 3] + p[i + 7];
    }
    v2u64 s = s0 + s1 + s2 + s3;
    j->sums[ith & 511] = s[0] + s[1];
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

nb_status nb_measure_read_bandwidth(nb_pool *pool, size_t bytes, int passes, double *gbps) {
    size_t n = bytes / sizeof(uint64_t);
    /* huge pages where the kernel gives them, as for the weights (model.c) */
    uint64_t *buf = mmap(NULL, n * sizeof *buf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return nb_fail(NB_ERR_NOMEM, "bandwidth probe: cannot allocate %zu bytes", bytes);
    madvise(buf, n * sizeof *buf, MADV_HUGEPAGE);
    for (size_t i = 0; i < n; i++) buf[i] = i; /* touch every page */
    bw_job j = {.buf = buf, .n = n, .avx512 = nb_cpu_isa() >= NB_ISA_AVX512};
    double best = 0;
    for (int p = 0; p < passes; p++) {
        double t0 = now_s();
        nb_pool_run(pool, bw_worker, &j);
        double t = now_s() - t0;
        if (t > 0 && (double)(n * sizeof *buf) / t > best) best = (double)(n * sizeof *buf) / t;
    }
    volatile uint64_t sink = j.sums[0];
    (void)sink;
    munmap(buf, n * sizeof *buf);
    *gbps = best / 1e9;
    return NB_OK;
}
