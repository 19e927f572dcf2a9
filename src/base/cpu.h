/* CPU feature detection (cpuid + xgetbv, once). NIBBLE_ISA=scalar|avx2|avx512
 * caps what kernels may use, so tests and users can force each path. */
#ifndef NB_BASE_CPU_H
#define NB_BASE_CPU_H

#include <stdbool.h>

typedef struct nb_cpu {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx512fp16;
    bool avxvnni;
    bool amx_tile, amx_int8, amx_bf16; /* usable: OS granted the tile state */
    int n_cores;                        /* online logical CPUs */
} nb_cpu;

typedef enum nb_isa { NB_ISA_SCALAR = 0, NB_ISA_AVX2 = 1, NB_ISA_AVX512 = 2, NB_ISA_AMX = 3 } nb_isa;

const nb_cpu *nb_cpu_get(void);
/* Best ISA level available, capped by NIBBLE_ISA. */
nb_isa nb_cpu_isa(void);
const char *nb_isa_name(nb_isa isa);
/* One line listing the features, for logs and `nibble bench`. */
const char *nb_cpu_describe(void);

#endif
