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

/* The weights' line at p asked for twice: pf bytes ahead into L1 and, when
 * pf2 > 0, pf2 bytes ahead into L2 only (prefetcht1), at this place. The
 * far request keeps more lines in flight than L1's fill buffers allow:
 * on the Intel guest of session 30 the AVX-512 Q4_0R decode dot read 28.1
 * GB/s with 2 KiB into L1 alone and 29.3-31.1 with 1-2 KiB into L1 plus
 * 4 KiB into L2 (2 threads, 1 GiB of rows; 8 KiB into L2 read 24.6);
 * TinyLlama Q4_0 decode went from 71-74% to 80-81% of the roofline
 * (kernels.h nb_prefetch_l2_bytes, docs/speed.md session 30). */
static inline void nb_prefetch_ahead(const void *p, int pf, int pf2) {
    nb_prefetch_here((const char *)p + pf);
    if (pf2) __asm__ volatile("prefetcht1 %0" : : "m"(*((const char *)p + pf2)));
}

#endif
