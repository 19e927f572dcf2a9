/* Percentiles, the seeded random source, exponential gaps and the KS statistic (stats.h). */
#include "bench/stats.h"

#include <math.h>
#include <stdlib.h>

double nb_bench_quantile_sorted(const double *x, size_t n, double q) {
    if (n == 0) return NAN;
    if (q <= 0) return x[0];
    if (q >= 1) return x[n - 1];
    double h = q * (double)(n - 1);
    size_t i = (size_t)floor(h);
    if (i + 1 >= n) return x[n - 1];
    return x[i] + (h - (double)i) * (x[i + 1] - x[i]);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void nb_bench_summarize(double *x, size_t n, nb_bench_summary *s) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) x[m++] = x[i];
    s->n = m;
    if (m == 0) {
        s->mean = s->p50 = s->p90 = s->p95 = s->p99 = s->max = NAN;
        return;
    }
    qsort(x, m, sizeof *x, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < m; i++) sum += x[i];
    s->mean = sum / (double)m;
    s->p50 = nb_bench_quantile_sorted(x, m, 0.50);
    s->p90 = nb_bench_quantile_sorted(x, m, 0.90);
    s->p95 = nb_bench_quantile_sorted(x, m, 0.95);
    s->p99 = nb_bench_quantile_sorted(x, m, 0.99);
    s->max = x[m - 1];
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void nb_bench_rng_seed(nb_bench_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nb_bench_rng_next(nb_bench_rng *r) {
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double nb_bench_rng_uniform(nb_bench_rng *r) { return (double)(nb_bench_rng_next(r) >> 11) * 0x1.0p-53; }

int64_t nb_bench_rng_range(nb_bench_rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(nb_bench_rng_next(r) % span);
}

double nb_bench_rng_exp(nb_bench_rng *r, double rate) {
    if (isinf(rate)) return 0;
    return -log1p(-nb_bench_rng_uniform(r)) / rate;
}

double nb_bench_ks_exp(double *x, size_t n, double rate) {
    if (n == 0) return NAN;
    qsort(x, n, sizeof *x, cmp_double);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double f = x[i] > 0 ? 1 - exp(-rate * x[i]) : 0;
        double lo = f - (double)i / (double)n, hi = (double)(i + 1) / (double)n - f;
        if (lo > d) d = lo;
        if (hi > d) d = hi;
    }
    return d;
}
