/* AVX-512 (F/BW/VL + VNNI) quantized dot products: the shared x86 kernels of
 * kernels/qdot_x86.h with u8 x s8 sums by vpdpbusd (VNNI on 256-bit lanes)
 * and NF4 decoded with a 16-entry vpermps table. Called only after run-time
 * detection of AVX512F/BW/VL/DQ and AVX512_VNNI (kernels/qdot.c).
 * Auto-vectorisation is off: GCC 12 miscompiles scalar u8 x s8 sums into
 * vpdpbusd under -mavx512vnni (see kernels/x86/repack_avx512.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#define NB_QDOT_VNNI 1
#define NB_QDOT_ISA "avx512"
#define NB_QDOT_TABLE nb_qdot_avx512
#include "kernels/qdot_x86.h"
