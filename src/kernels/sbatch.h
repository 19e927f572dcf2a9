/* Small-batch int8 GEMMs for batched decode (issue 14, "Batched decode").
 *
 * The int8 GEMMs of kernels/repack.h work on groups of 16 tokens in 512-bit
 * registers: a decode step of 8 sequences fills one group half, and every
 * vpdpbusd does twice the work it needs (on AMD Zen 4 a 512-bit op costs
 * two 256-bit ones). These kernels read the same activation pack
 * (nb_actpack, same layout) in units of 8 tokens - each group's low or high
 * half - with 256-bit registers, skip units with no live token, and load
 * each weight block once for up to 4 rows x 2 units (64 products per weight
 * byte pair of rows); every lane does exactly the integer and float
 * operations of the 512-bit GEMM, in the same order, so the results are
 * bit-identical to it (tests/unit/kernels/test_sbatch.c). Larger batches
 * take whole 16-token groups in 512-bit registers: from 17 tokens, or from
 * 9 where 512-bit ops run at full width (the _wide entry points below).
 *
 * Same signature and contract as nb_repack_gemm_fn: y[t*ldy + r] for rows
 * r < nr and the pack's tokens. AVX-512 VNNI + VL. */
#ifndef NB_KERNELS_SBATCH_H
#define NB_KERNELS_SBATCH_H

#include "kernels/repack.h"

/* Tokens per unit (half a pack group). */
#define NB_SBATCH_UNIT 8

/* The small-batch GEMM of a repacked type at or below max_isa, the one of
 * the variant nb_repack_gemm picks there; NULL when none (the type has no
 * int8 GEMM, or this CPU lacks AVX2). */
nb_repack_gemm_fn nb_sbatch_gemm(nb_dtype t, nb_isa max_isa);

NB_RGEMM_DECL(nb_q4_0r_sgemm_avx512);
NB_RGEMM_DECL(nb_q8_0r_sgemm_avx512);
NB_RGEMM_DECL(nb_q4_kr_sgemm_avx512);
NB_RGEMM_DECL(nb_q6_kr_sgemm_avx512);
/* The same with 512-bit tiles from 9 tokens instead of 17 (one 16-token
 * group instead of two 8-token units), for CPUs that run 512-bit ops at
 * full width (nb_sbatch_wide_for_cpu, kernels/dispatch.h); equally
 * bit-identical to the 16-token GEMM. */
NB_RGEMM_DECL(nb_q4_0r_sgemm_avx512_wide);
NB_RGEMM_DECL(nb_q8_0r_sgemm_avx512_wide);
NB_RGEMM_DECL(nb_q4_kr_sgemm_avx512_wide);
NB_RGEMM_DECL(nb_q6_kr_sgemm_avx512_wide);
/* The _wide form of an AVX-512 small-batch GEMM of nb_sbatch_gemm(t, ...);
 * NULL for any other. */
nb_repack_gemm_fn nb_sbatch_gemm_wide(nb_repack_gemm_fn g);

/* The same for AVX2 CPUs (kernels/x86/sbatch_avx2_impl.h): _avx2 with
 * vpmaddubsw + vpmaddwd, _avxvnni with AVX-VNNI's vpdpbusd, each
 * bit-identical to the 16-token GEMM of its own variant. */
NB_RGEMM_DECL(nb_q4_0r_sgemm_avx2);
NB_RGEMM_DECL(nb_q8_0r_sgemm_avx2);
NB_RGEMM_DECL(nb_q4_kr_sgemm_avx2);
NB_RGEMM_DECL(nb_q6_kr_sgemm_avx2);
NB_RGEMM_DECL(nb_q4_0r_sgemm_avxvnni);
NB_RGEMM_DECL(nb_q8_0r_sgemm_avxvnni);
NB_RGEMM_DECL(nb_q4_kr_sgemm_avxvnni);
NB_RGEMM_DECL(nb_q6_kr_sgemm_avxvnni);
NB_RGEMM_DECL(nb_q4_0l_sgemm_avx2); /* lane order: the AVX2 variants only */
NB_RGEMM_DECL(nb_q4_0l_sgemm_avxvnni);
/* The small-batch GEMM matching the 16-token GEMM variant of
 * nb_repack_gemm_variant (1 AVX2, 2 AVX-VNNI, 3 AVX-512 VNNI); NULL when t
 * has none or this CPU cannot run it. */
nb_repack_gemm_fn nb_sbatch_gemm_variant(nb_dtype t, int variant);

#endif
