/* A software prefetch that stays where the source puts it.
 *
 * GCC's generic instruction scheduler gathers a loop body's _mm_prefetch
 * calls at its top, ahead of the loads, whatever their order in the source.
 * For the streaming decode kernels the place matters: the AVX2 Q4_0R dot,
 * with its two prefetches per 128 bytes so grouped, read 24.4 GB/s (2
 * threads, 1 GiB of 2048-wide rows, the Intel guest of session 29), and
 * 26.5-26.9 with each line's prefetch next to that line's loads - as the
 * probe found for its loops (docs/speed.md, sessions 26 and 29). A volatile
 * asm is not moved across the loads around it. The address may lie past
 * the end of the weights: a prefetch never faults. */
#ifndef NB_KERNELS_X86_PREFETCH_HERE_H
#define NB_KERNELS_X86_PREFETCH_HERE_H

static inline void nb_prefetch_here(const void *p) { __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p)); }

#endif
