/* The element-type traits table: constant, complete, no registration.
 * Block sizes and bytes per block of the ggml types are those of
 * ggml-common.h (the GGUF on-disk sizes); nibble's formats are documented in
 * src/base/blocks.h and the repacked layouts in src/kernels/repack.h (which
 * checks these sizes against its structs at compile time). */
#include "base/dtype.h"

#include <strings.h>

static const nb_dtype_info table[NB_DTYPE_MAX] = {
    [NB_F32] = {"F32", 1, 4, false},         [NB_F16] = {"F16", 1, 2, false},
    [NB_Q4_0] = {"Q4_0", 32, 18, false},     [NB_Q4_1] = {"Q4_1", 32, 20, false},
    [NB_Q5_0] = {"Q5_0", 32, 22, false},     [NB_Q5_1] = {"Q5_1", 32, 24, false},
    [NB_Q8_0] = {"Q8_0", 32, 34, false},     [NB_Q8_1] = {"Q8_1", 32, 36, false},
    [NB_Q2_K] = {"Q2_K", 256, 84, false},    [NB_Q3_K] = {"Q3_K", 256, 110, false},
    [NB_Q4_K] = {"Q4_K", 256, 144, false},   [NB_Q5_K] = {"Q5_K", 256, 176, false},
    [NB_Q6_K] = {"Q6_K", 256, 210, false},   [NB_Q8_K] = {"Q8_K", 256, 292, false},
    [NB_IQ2_XXS] = {"IQ2_XXS", 256, 66, false}, [NB_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [NB_IQ3_XXS] = {"IQ3_XXS", 256, 98, false}, [NB_IQ1_S] = {"IQ1_S", 256, 50, false},
    [NB_IQ4_NL] = {"IQ4_NL", 32, 18, false}, [NB_IQ3_S] = {"IQ3_S", 256, 110, false},
    [NB_IQ2_S] = {"IQ2_S", 256, 82, false},  [NB_IQ4_XS] = {"IQ4_XS", 256, 136, false},
    [NB_I8] = {"I8", 1, 1, false},           [NB_I16] = {"I16", 1, 2, false},
    [NB_I32] = {"I32", 1, 4, false},         [NB_I64] = {"I64", 1, 8, false},
    [NB_F64] = {"F64", 1, 8, false},         [NB_IQ1_M] = {"IQ1_M", 256, 56, false},
    [NB_BF16] = {"BF16", 1, 2, false},       [NB_TQ1_0] = {"TQ1_0", 256, 54, false},
    [NB_TQ2_0] = {"TQ2_0", 256, 66, false},  [NB_MXFP4] = {"MXFP4", 32, 17, false},
    /* nibble's formats (src/base/blocks.h) */
    [NB_W8] = {"W8", 32, 36, false},         [NB_W8A8] = {"W8A8", 32, 36, false},
    [NB_Q8_T] = {"Q8_T", 32, 36, false},
    [NB_W4G32] = {"W4G32", 32, 20, false},   [NB_W4G64] = {"W4G64", 64, 36, false},
    [NB_W4G128] = {"W4G128", 128, 68, false},
    [NB_W4G32S] = {"W4G32S", 32, 20, false}, [NB_W4G64S] = {"W4G64S", 64, 36, false},
    [NB_W4G128S] = {"W4G128S", 128, 68, false},
    [NB_NF4] = {"NF4", 64, 36, false},
    [NB_FP8_E4M3] = {"FP8_E4M3", 32, 36, false}, [NB_FP8_E5M2] = {"FP8_E5M2", 32, 36, false},
    /* in-memory-only repacks (src/kernels/repack.h) */
    [NB_Q4_0R] = {"Q4_0R", 32, 18, true},  [NB_Q8_0R] = {"Q8_0R", 32, 34, true},
    [NB_Q8_0P] = {"Q8_0P", 32, 44, true},  [NB_Q4_KR] = {"Q4_KR", 256, 148, true},
    [NB_Q6_KR] = {"Q6_KR", 256, 210, true}, [NB_Q8_KP] = {"Q8_KP", 256, 292, true},
    [NB_W4G32R] = {"W4G32R", 32, 20, true}, [NB_W4G64R] = {"W4G64R", 64, 36, true},
    [NB_W4G128R] = {"W4G128R", 128, 68, true}, [NB_W8R] = {"W8R", 32, 36, true},
    [NB_Q4_0L] = {"Q4_0L", 32, 18, true},  [NB_W4G32L] = {"W4G32L", 32, 20, true},
    [NB_W4G64L] = {"W4G64L", 64, 36, true}, [NB_W4G128L] = {"W4G128L", 128, 68, true},
    [NB_Q8_0PL] = {"Q8_0PL", 32, 44, true}, [NB_Q8_0L] = {"Q8_0L", 32, 34, true},
    [NB_W8L] = {"W8L", 32, 36, true},
};

const nb_dtype_info *nb_dtype_get(nb_dtype t) {
    if ((unsigned)t >= NB_DTYPE_MAX || !table[t].name) return NULL;
    return &table[t];
}

/* The only conversion from a number to nb_dtype (with nb_dtype_next). */
bool nb_dtype_from_file_id(uint32_t id, nb_dtype *out) {
    if (id >= NB_DTYPE_MAX || !table[id].name || table[id].in_memory_only) return false;
    *out = (nb_dtype)id;
    return true;
}

const char *nb_dtype_name(nb_dtype t) {
    const nb_dtype_info *i = nb_dtype_get(t);
    return i ? i->name : "?";
}

bool nb_dtype_next(nb_dtype *t) {
    for (unsigned u = (unsigned)*t + 1; u < NB_DTYPE_MAX; u++) {
        if (table[u].name) {
            *t = (nb_dtype)u;
            return true;
        }
    }
    return false;
}

bool nb_dtype_from_name(const char *name, nb_dtype *out) {
    nb_dtype t = NB_F32;
    do {
        if (!strcasecmp(table[t].name, name)) {
            *out = t;
            return true;
        }
    } while (nb_dtype_next(&t));
    return false;
}

bool nb_dtype_row_bytes(nb_dtype t, uint64_t n, uint64_t *bytes) {
    const nb_dtype_info *i = nb_dtype_get(t);
    if (!i || n % i->block) return false;
    return !__builtin_mul_overflow(n / i->block, (uint64_t)i->block_bytes, bytes);
}
