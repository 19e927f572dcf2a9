/* The read-bandwidth probe: the physical limit for decode, which streams
 * every weight once per token.
 *
 * No single access pattern is the fastest on every x86 machine: on Intel
 * Sapphire Rapids several interleaved streams per thread read faster, on an
 * AMD Zen 4 guest one contiguous stream per thread read almost twice as fast
 * as 8 interleaved ones (../shared/MEASURED.md). A probe that reports less
 * than a real program reaches makes "% of roofline" flatter the kernels, so
 * the probe tries several patterns and the roofline is the best of them:
 *   streams   1 (each thread reads one contiguous slice) or S interleaved
 *             streams per thread (the slice cut in S parts walked in
 *             lockstep, 256 bytes from each in turn, or 64: on the AMD Zen
 *             5-class guest of session 32, 4 streams in 64-byte turns read
 *             47.9-51.7 GB/s where 8 in 256-byte turns read 39.4-45.0, and
 *             the decode dots read their streams that way, kernels/matmul.c);
 *   prefetch  none, or software prefetch `prefetch` bytes ahead of each stream;
 *   pages     4 KiB (MADV_NOHUGEPAGE) or 2 MiB (MADV_HUGEPAGE, where the
 *             kernel grants transparent huge pages).
 *   loads     the widest this CPU has (64-byte AVX-512, 32-byte AVX2, else
 *             16-byte vector extensions) and, on an AVX-512 CPU, also
 *             32-byte ones on 2 MiB pages: on the Intel guest of
 *             2026-12-03 (480 MiB L3) one stream per thread with prefetch
 *             read 33-35 GB/s with 32-byte loads and 26-28 with 64-byte
 *             ones, so a probe of the widest loads alone reported less than
 *             this program's own AVX2 loop (docs/speed.md, session 18).
 * Every pattern reads the whole buffer `passes` times with all the pool's
 * threads and keeps its best pass, summing into four independent
 * accumulators so that memory, not the ALU, limits. */
#ifndef NB_KERNELS_MEMBW_H
#define NB_KERNELS_MEMBW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cpu.h"
#include "base/threadpool.h"

typedef struct nb_membw_pattern {
    int streams;      /* per thread, >= 1 */
    int prefetch;     /* bytes ahead, 0 = none */
    bool huge_pages;  /* 2 MiB pages asked for */
    double gbps;      /* result: best pass, 1e9 bytes/s; 0 if not measured */
    int load_bytes;   /* 0: the widest loads (the result's isa); 32: AVX2 loads on an AVX-512 CPU */
    int turn;         /* bytes of a stream read before the next stream's: 0 (256) or 64 */
} nb_membw_pattern;

#define NB_MEMBW_MAX_PATTERNS 24

typedef struct nb_membw_result {
    int n;
    nb_membw_pattern p[NB_MEMBW_MAX_PATTERNS];
    int best;          /* index of the fastest pattern */
    double gbps;       /* p[best].gbps */
    bool huge_granted; /* the kernel backed the 2 MiB buffer with huge pages (AnonHugePages seen) */
    const char *isa;   /* load width used: "avx512", "avx2" or "vec16" */
} nb_membw_result;

/* The default pattern set (streams 1 and 8; prefetch 0, 2048 and the
 * kernels' distance on this CPU, nb_prefetch_for_cpu, when it is another;
 * both page sizes: 8 or 12 patterns; and 4 streams in 64-byte turns with
 * prefetch 2048 on both page sizes: 10 or 14; on an AVX-512 CPU not capped below it
 * by max_isa, the 2 MiB 1- and 8-stream ones again with 32-byte loads: 14 or 20), `bytes` per buffer (rounded down to
 * whole MiB, at least 64 MiB), best of `passes`. max_isa caps the load
 * width. */
nb_status nb_membw_measure(nb_pool *pool, size_t bytes, int passes, nb_isa max_isa, nb_membw_result *out)
    __attribute__((warn_unused_result));

/* The given patterns (n <= NB_MEMBW_MAX_PATTERNS) instead of the default set. */
nb_status nb_membw_measure_patterns(nb_pool *pool, size_t bytes, int passes, nb_isa max_isa,
                                    const nb_membw_pattern *pats, int n, nb_membw_result *out)
    __attribute__((warn_unused_result));

/* Keeps, per pattern, the better of two runs of the same set (a probe run
 * before and one after a benchmark: a shared host's bandwidth moves from
 * minute to minute, and a roofline measured in a slow minute is one the
 * benchmark exceeds). */
void nb_membw_merge(nb_membw_result *into, const nb_membw_result *other);

/* "1 stream, prefetch 2048, 2M pages" style name of a pattern. */
void nb_membw_pattern_name(const nb_membw_pattern *p, char *buf, size_t size);

/* The previous single-number API: the best of the default set, in GB/s. */
nb_status nb_measure_read_bandwidth(nb_pool *pool, size_t bytes, int passes, double *gbps)
    __attribute__((warn_unused_result));

/* Inner loops: sum of the 64-bit words of `streams` regions of `bytes` each
 * (a multiple of 256; regions 64-byte aligned), walked in lockstep 256 bytes
 * at a time, prefetching `prefetch` bytes ahead of each (0: none). Also the
 * scalar-vector reference, which tests compare them with. */
uint64_t nb_membw_sum_ref(const void *const *p, int streams, size_t bytes, int prefetch, int turn);
uint64_t nb_membw_sum_avx2(const void *const *p, int streams, size_t bytes, int prefetch, int turn);
uint64_t nb_membw_sum_avx512(const void *const *p, int streams, size_t bytes, int prefetch, int turn);

#endif
