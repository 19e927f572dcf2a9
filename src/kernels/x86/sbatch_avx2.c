/* Small-batch int8 GEMMs (kernels/sbatch.h) for any AVX2 CPU: u8 x s8 sums
 * by vpmaddubsw + vpmaddwd, bit-identical to the 16-token GEMMs of
 * kernels/x86/repack_avx2.c. The kernels are in
 * kernels/x86/sbatch_avx2_impl.h, shared with the AVX-VNNI build
 * (sbatch_vnni_avx2.c). Called only through nb_sbatch_gemm (sbatch.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize") /* as repack_avx2.c: the scalar loops stay scalar */
#endif
#define SB_VNNI 0
#include "kernels/x86/sbatch_avx2_impl.h"
