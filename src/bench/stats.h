/* Statistics for the load client: exact percentiles over all samples, a
 * seeded random source, Poisson arrivals and the Kolmogorov-Smirnov
 * statistic that checks them.
 *
 * Percentile definition (numpy's default, "linear"): sort the n samples
 * x[0] <= ... <= x[n-1]; the q-quantile (0 <= q <= 1) is at position
 * h = q * (n - 1); with i = floor(h), it is x[i] + (h - i) * (x[i+1] - x[i]).
 * So p50 of {1, 2, 3, 4} is 2.5, p0 is the minimum and p100 the maximum. */
#ifndef NB_BENCH_STATS_H
#define NB_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct nb_bench_summary {
    size_t n; /* samples (NaNs are dropped) */
    double mean, p50, p90, p95, p99, max;
} nb_bench_summary;

/* Quantile q of x[0..n-1], which must be sorted ascending; NaN when n == 0. */
double nb_bench_quantile_sorted(const double *x, size_t n, double q);
/* Drops NaNs, sorts x in place (its order is lost) and fills s; all NaN when no samples. */
void nb_bench_summarize(double *x, size_t n, nb_bench_summary *s);

/* xoshiro256** seeded through splitmix64: the same seed gives the same stream. */
typedef struct nb_bench_rng {
    uint64_t s[4];
} nb_bench_rng;

void nb_bench_rng_seed(nb_bench_rng *r, uint64_t seed);
uint64_t nb_bench_rng_next(nb_bench_rng *r);
/* Uniform in [0, 1) with 53 bits. */
double nb_bench_rng_uniform(nb_bench_rng *r);
/* Uniform integer in [lo, hi] (lo <= hi). */
int64_t nb_bench_rng_range(nb_bench_rng *r, int64_t lo, int64_t hi);
/* An exponential inter-arrival gap of a Poisson process with `rate` per second
 * (inverse CDF: -ln(1 - u) / rate); 0 when rate is infinite. */
double nb_bench_rng_exp(nb_bench_rng *r, double rate);

/* Kolmogorov-Smirnov statistic D = sup |F_n(x) - (1 - exp(-rate x))| of the
 * n gaps in x against the exponential distribution; sorts x in place. A
 * Poisson process passes at the 1% level when D < 1.628 / sqrt(n) (n large). */
double nb_bench_ks_exp(double *x, size_t n, double rate);

#endif
