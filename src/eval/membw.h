/* A read-bandwidth probe: the physical limit for decode, which streams every
 * weight once per token. Reads a buffer much larger than the caches with
 * every thread of a pool, several times, and reports the best pass. */
#ifndef NB_EVAL_MEMBW_H
#define NB_EVAL_MEMBW_H

#include "base/threadpool.h"

/* GB/s (1e9 bytes per second) reading `bytes` of memory with the pool's threads. */
nb_status nb_measure_read_bandwidth(nb_pool *pool, size_t bytes, int passes, double *gbps)
    __attribute__((warn_unused_result));

/* The AVX-512 inner loop (membw_avx512.c): sum of the 64-bit words of a
 * 64-byte-aligned buffer of `bytes` (a multiple of 256). */
uint64_t nb_membw_sum_avx512(const void *p, size_t bytes);

#endif
