/* Small-batch int8 GEMMs (kernels/sbatch.h) with AVX-VNNI's 256-bit
 * vpdpbusd (VEX-encoded: Alder Lake and later, Zen 4 and later),
 * bit-identical to the 16-token GEMMs of kernels/x86/repack_vnni_avx2.c.
 * The kernels are in kernels/x86/sbatch_avx2_impl.h; CMake adds -mavxvnni
 * for the _vnni_avx2.c suffix. Called only where base/cpu.h reports avxvnni
 * (sbatch.c). Auto-vectorisation is off: GCC 12 miscompiles scalar u8 x s8
 * sums into vpdpbusd (kernels/x86/repack_avx512.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif
#define SB_VNNI 1
#include "kernels/x86/sbatch_avx2_impl.h"
