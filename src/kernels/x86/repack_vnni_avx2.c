/* AVX-VNNI kernels (256-bit vpdpbusd, VEX-encoded: Alder Lake and later,
 * Zen 4 and later) for the repacked layouts (kernels/repack.h): the kernels
 * of kernels/x86/repack_avx2_impl.h with vpdpbusd. Called only when
 * base/cpu.h reports avxvnni (repack.c); CMake adds -mavxvnni for the
 * _vnni_avx2.c suffix. Auto-vectorisation is off: GCC 12
 * miscompiles scalar u8 x s8 sums into vpdpbusd (kernels/x86/repack_avx512.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#define RP_VNNI 1
#include "kernels/x86/repack_avx2_impl.h"
