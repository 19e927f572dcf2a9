/* Dispatch of the quantized dot products (qdot.h): the best table at or
 * below the requested ISA that this CPU can run. AVX-512 needs VNNI on top
 * of nb_cpu_isa()'s AVX512 level; AMX (large-batch tiles) has no qdot kernels
 * yet and uses the AVX-512 ones. */
#include "kernels/qdot.h"

const nb_qdot *nb_qdot_get_exact(nb_dtype t, nb_isa isa) {
    nb_isa have = nb_cpu_isa();
    if (isa > have) return NULL;
    switch (isa) {
    case NB_ISA_SCALAR: return nb_qdot_ref(t);
#if defined(__x86_64__)
    case NB_ISA_AVX2: return nb_qdot_avx2(t);
    case NB_ISA_AVX512: return nb_cpu_get()->avx512vnni ? nb_qdot_avx512(t) : NULL;
#endif
    default: return NULL;
    }
}

const nb_qdot *nb_qdot_get(nb_dtype t, nb_isa max_isa) {
    for (int isa = (int)max_isa; isa >= NB_ISA_SCALAR; isa--) {
        const nb_qdot *q = nb_qdot_get_exact(t, (nb_isa)isa);
        if (q) return q;
    }
    return NULL;
}
