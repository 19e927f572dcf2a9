/* vpdpbusd (and vdpbf16ps) with the 32-bit memory broadcast, for the
 * AVX-512 VNNI (BF16) files.
 *
 * *acc += the u8 x s8 products of u (bytes, unsigned side) and the four
 * bytes at p, broadcast to every lane by the instruction itself. In asm
 * because GCC 12 turns _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(x))
 * into a separate vpbroadcastd per vpdpbusd and does not tie the
 * accumulator to its output (register copies and spills): a third of
 * attention's int8 multiply-add loops (docs/speed.md, session 15), 5-10%
 * of the Q4_0R rows kernel at 8-16 tokens (session 17). Only where the
 * broadcast operand is a word in memory; the K-quant rows kernels, whose
 * chains are four vpdpbusd on one accumulator, measured no gain. */
#ifndef NB_KERNELS_X86_DPBUSD_BCAST_H
#define NB_KERNELS_X86_DPBUSD_BCAST_H
#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) void dpbusd_bcast(__m512i *acc, __m512i u, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(*acc) : "v"(u), "m"(*(const int32_t *)p));
}

/* The same for vdpbf16ps (AVX512_BF16): acc + the products of the bf16
 * pairs of b and the pair at p, broadcast by the instruction (GCC 12 emits
 * a vpbroadcastd per product for _mm512_dpbf16_ps(acc, b, set1(pair))). */
static inline __attribute__((always_inline)) __m512 dpbf16_bcast(__m512 acc, __m512bh b, const void *p) {
    __asm__("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(b), "m"(*(const int32_t *)p));
    return acc;
}

#endif
