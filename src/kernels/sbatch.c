/* The small-batch int8 GEMMs (sbatch.h) by weight type. */
#include "kernels/sbatch.h"

nb_repack_gemm_fn nb_sbatch_gemm_variant(nb_dtype t, int variant) {
    /* nb_repack_gemm_variant is NULL where t has no GEMM or the CPU cannot run the variant */
    if (variant < 1 || variant > 3 || !nb_repack_gemm_variant(t, variant)) return NULL;
    static const nb_repack_gemm_fn tab[3][5] = {
        {nb_q4_0r_sgemm_avx2, nb_q8_0r_sgemm_avx2, nb_q4_kr_sgemm_avx2, nb_q6_kr_sgemm_avx2, nb_q4_0l_sgemm_avx2},
        {nb_q4_0r_sgemm_avxvnni, nb_q8_0r_sgemm_avxvnni, nb_q4_kr_sgemm_avxvnni, nb_q6_kr_sgemm_avxvnni,
         nb_q4_0l_sgemm_avxvnni},
        {nb_q4_0r_sgemm_avx512, nb_q8_0r_sgemm_avx512, nb_q4_kr_sgemm_avx512, nb_q6_kr_sgemm_avx512, NULL}};
    int k = t == NB_Q4_0R ? 0 : t == NB_Q8_0R ? 1 : t == NB_Q4_KR ? 2 : t == NB_Q6_KR ? 3 : t == NB_Q4_0L ? 4 : -1;
    return k < 0 ? NULL : tab[variant - 1][k];
}

nb_repack_gemm_fn nb_sbatch_gemm(nb_dtype t, nb_isa max_isa) {
    /* The variant of the 16-token GEMM that runs at max_isa (AVX-512 VNNI,
     * AVX-VNNI or AVX2): the small-batch GEMM must be bit-identical to it. */
    const nb_rgemm *g = nb_repack_gemm(t, max_isa);
    if (!g) return NULL;
    for (int v = 1; v <= 3; v++)
        if (g == nb_repack_gemm_variant(t, v)) return nb_sbatch_gemm_variant(t, v);
    return NULL;
}

nb_repack_gemm_fn nb_sbatch_gemm_wide(nb_repack_gemm_fn g) {
    return g == nb_q4_0r_sgemm_avx512   ? nb_q4_0r_sgemm_avx512_wide
           : g == nb_q8_0r_sgemm_avx512 ? nb_q8_0r_sgemm_avx512_wide
           : g == nb_q4_kr_sgemm_avx512 ? nb_q4_kr_sgemm_avx512_wide
           : g == nb_q6_kr_sgemm_avx512 ? nb_q6_kr_sgemm_avx512_wide
                                        : NULL;
}
