/* AVX2 (+FMA, F16C) quantized dot products: the shared x86 kernels of
 * kernels/qdot_x86.h with u8 x s8 sums by vpmaddubsw + vpmaddwd. Called only
 * after run-time detection (kernels/qdot.c). */
#define NB_QDOT_VNNI 0
#define NB_QDOT_ISA "avx2"
#define NB_QDOT_TABLE nb_qdot_avx2
#include "kernels/qdot_x86.h"
