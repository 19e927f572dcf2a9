/* Element types of tensors: the facts every subsystem needs (name, block
 * size, bytes per block, whether a file may hold it), nothing about how to
 * compute with them (that is src/quant's registry and src/kernels' dispatch
 * table).
 *
 * One constant traits table (dtype.c, like ggml's type_traits) holds every
 * type; nothing registers types at run time, so what a reader accepts never
 * depends on which subsystem was initialised first.
 *
 *   0..63      ggml's type ids, exactly as stored in GGUF tensor infos
 *   1024..     nibble's own file formats (src/quant, docs/quant.md), written
 *              to GGUF under a documented extension; stable numbers
 *   2048..     in-memory-only layouts (the load-time repacks of
 *              src/kernels/repack.h): never read from or written to a file
 *
 * A file's type id becomes an nb_dtype only through nb_dtype_from_file_id(),
 * which refuses unknown ids and the in-memory-only layouts. */
#ifndef NB_BASE_DTYPE_H
#define NB_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nb_dtype {
    /* ggml's ids */
    NB_F32 = 0, NB_F16 = 1, NB_Q4_0 = 2, NB_Q4_1 = 3,
    NB_Q5_0 = 6, NB_Q5_1 = 7, NB_Q8_0 = 8, NB_Q8_1 = 9,
    NB_Q2_K = 10, NB_Q3_K = 11, NB_Q4_K = 12, NB_Q5_K = 13, NB_Q6_K = 14, NB_Q8_K = 15,
    NB_IQ2_XXS = 16, NB_IQ2_XS = 17, NB_IQ3_XXS = 18, NB_IQ1_S = 19, NB_IQ4_NL = 20,
    NB_IQ3_S = 21, NB_IQ2_S = 22, NB_IQ4_XS = 23,
    NB_I8 = 24, NB_I16 = 25, NB_I32 = 26, NB_I64 = 27, NB_F64 = 28, NB_IQ1_M = 29,
    NB_BF16 = 30, NB_TQ1_0 = 34, NB_TQ2_0 = 35, NB_MXFP4 = 39,
    NB_DTYPE_GGML_END = 64,

    /* nibble's own file formats (src/quant/qtypes.h). Stable numbers: they
     * are written to GGUF files. */
    NB_DTYPE_EXT_BASE = 1024,
    NB_W8 = NB_DTYPE_EXT_BASE + 0,        /* int8 per output channel, f32 scale (W8A16) */
    NB_W8A8 = NB_DTYPE_EXT_BASE + 1,      /* W8 weights, int8 per-token activations (Q8_T) */
    NB_Q8_T = NB_DTYPE_EXT_BASE + 2,      /* activation format of W8A8 */
    NB_W4G32 = NB_DTYPE_EXT_BASE + 3,     /* 4-bit, group 32, scale + zero point */
    NB_W4G64 = NB_DTYPE_EXT_BASE + 4,
    NB_W4G128 = NB_DTYPE_EXT_BASE + 5,
    NB_W4G32S = NB_DTYPE_EXT_BASE + 6,    /* symmetric variants: same layout, z = 8 */
    NB_W4G64S = NB_DTYPE_EXT_BASE + 7,
    NB_W4G128S = NB_DTYPE_EXT_BASE + 8,
    NB_NF4 = NB_DTYPE_EXT_BASE + 9,       /* bitsandbytes NF4, block 64, f32 absmax */
    NB_FP8_E4M3 = NB_DTYPE_EXT_BASE + 10, /* OCP E4M3 (fn), f32 scale per 32 */
    NB_FP8_E5M2 = NB_DTYPE_EXT_BASE + 11, /* OCP E5M2, f32 scale per 32 */
    NB_DTYPE_EXT_END = NB_DTYPE_EXT_BASE + 12,

    /* In-memory-only layouts (src/kernels/repack.h): what the loader turns
     * GGUF weights into for the AVX2 and AVX-512 int8 kernels. No file holds them. */
    NB_DTYPE_MEM_BASE = 2048,
    NB_Q4_0R = NB_DTYPE_MEM_BASE + 0,
    NB_Q8_0R = NB_DTYPE_MEM_BASE + 1,
    NB_Q8_0P = NB_DTYPE_MEM_BASE + 2,
    NB_Q4_KR = NB_DTYPE_MEM_BASE + 3,
    NB_Q6_KR = NB_DTYPE_MEM_BASE + 4,
    NB_Q8_KP = NB_DTYPE_MEM_BASE + 5,
    NB_W4G32R = NB_DTYPE_MEM_BASE + 6, /* W4G32 / W4G32S planar */
    NB_W4G64R = NB_DTYPE_MEM_BASE + 7,
    NB_W4G128R = NB_DTYPE_MEM_BASE + 8,
    NB_W8R = NB_DTYPE_MEM_BASE + 9,    /* W8 planar */
    NB_Q4_0L = NB_DTYPE_MEM_BASE + 10, /* Q4_0R / W4G*R with the nibbles in lane order (AVX2) */
    NB_W4G32L = NB_DTYPE_MEM_BASE + 11,
    NB_W4G64L = NB_DTYPE_MEM_BASE + 12,
    NB_W4G128L = NB_DTYPE_MEM_BASE + 13,
    NB_Q8_0PL = NB_DTYPE_MEM_BASE + 14, /* Q8_0P with the quants in the same lane order */
    NB_Q8_0L = NB_DTYPE_MEM_BASE + 15,  /* Q8_0R / W8R in lane order (AVX2) */
    NB_W8L = NB_DTYPE_MEM_BASE + 16,
    NB_DTYPE_MEM_END = NB_DTYPE_MEM_BASE + 17,

    NB_DTYPE_MAX = NB_DTYPE_MEM_END, /* every id is below this */
} nb_dtype;

typedef struct nb_dtype_info {
    const char *name;     /* "F16", "Q4_K", ... as llama.cpp prints them */
    uint32_t block;       /* elements per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
    bool in_memory_only;  /* a repacked layout: never in a file */
} nb_dtype_info;

/* NULL when the id names no known type (any range). */
const nb_dtype_info *nb_dtype_get(nb_dtype t);
/* The type of a tensor stored in a file: false (and *out untouched) when
 * `id` names no known type or an in-memory-only layout. */
bool nb_dtype_from_file_id(uint32_t id, nb_dtype *out);
const char *nb_dtype_name(nb_dtype t); /* "?" when unknown */
/* Looks a type up by name, case-insensitive; false when unknown. */
bool nb_dtype_from_name(const char *name, nb_dtype *out);
/* Iterates the known types in id order: start with NB_F32 (always known);
 * false after the last. */
bool nb_dtype_next(nb_dtype *t);

/* Bytes of a row of n elements; false when n is not a multiple of the block
 * size or the size overflows. */
bool nb_dtype_row_bytes(nb_dtype t, uint64_t n, uint64_t *bytes);

#endif
