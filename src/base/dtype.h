/* Element types of tensors: the facts every subsystem needs (name, block
 * size, bytes per block), nothing about how to compute with them (that is
 * src/quant's registry and src/kernels' dispatch table).
 *
 * Values 0..63 are exactly ggml's type ids, as stored in GGUF tensor infos,
 * so a GGUF type id converts with a range check and nb_dtype_known().
 * nibble's own formats (issue: quantized weights) take ids from 1024 up and
 * are written to GGUF under a documented extension. */
#ifndef NB_BASE_DTYPE_H
#define NB_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nb_dtype {
    NB_F32 = 0, NB_F16 = 1, NB_Q4_0 = 2, NB_Q4_1 = 3,
    NB_Q5_0 = 6, NB_Q5_1 = 7, NB_Q8_0 = 8, NB_Q8_1 = 9,
    NB_Q2_K = 10, NB_Q3_K = 11, NB_Q4_K = 12, NB_Q5_K = 13, NB_Q6_K = 14, NB_Q8_K = 15,
    NB_IQ2_XXS = 16, NB_IQ2_XS = 17, NB_IQ3_XXS = 18, NB_IQ1_S = 19, NB_IQ4_NL = 20,
    NB_IQ3_S = 21, NB_IQ2_S = 22, NB_IQ4_XS = 23,
    NB_I8 = 24, NB_I16 = 25, NB_I32 = 26, NB_I64 = 27, NB_F64 = 28, NB_IQ1_M = 29,
    NB_BF16 = 30, NB_TQ1_0 = 34, NB_TQ2_0 = 35, NB_MXFP4 = 39,
    NB_DTYPE_GGML_END = 64,
    /* nibble's own formats (see src/quant) start here */
    NB_DTYPE_EXT_BASE = 1024,
    NB_DTYPE_MAX = 1100,
} nb_dtype;

typedef struct nb_dtype_info {
    const char *name;     /* "F16", "Q4_K", ... as llama.cpp prints them */
    uint32_t block;       /* elements per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
} nb_dtype_info;

/* Registers a type (used by src/quant for nibble's own formats). */
void nb_dtype_register(nb_dtype t, nb_dtype_info info);

/* NULL when the id names no known type. */
const nb_dtype_info *nb_dtype_get(nb_dtype t);
bool nb_dtype_known(uint32_t id);
const char *nb_dtype_name(nb_dtype t); /* "?" when unknown */
/* Looks a type up by name, case-insensitive; false when unknown. */
bool nb_dtype_from_name(const char *name, nb_dtype *out);

/* Bytes of a row of n elements; false when n is not a multiple of the block
 * size or the size overflows. */
bool nb_dtype_row_bytes(nb_dtype t, uint64_t n, uint64_t *bytes);

#endif
