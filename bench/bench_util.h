/* What the hand-built benchmarks in bench/ share: a monotonic clock, the
 * comparison qsort needs for medians, and a small deterministic random
 * source (a linear congruential step; numbers for data, not statistics). */
#ifndef NB_BENCH_UTIL_H
#define NB_BENCH_UTIL_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort's comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The next value of the sequence *s, in [-1, 1]. */
static inline float bench_frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65535.0f) * 2.0f - 1.0f;
}

#endif
