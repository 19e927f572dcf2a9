/* Private to src/quant (and the kernels' tests): the reference quantize and
 * dequantize functions of every format, registered in qtypes.c. Signatures
 * follow nb_to_float_fn / nb_from_float_fn; n is a multiple of the block. */
#ifndef NB_QUANT_QUANT_REF_H
#define NB_QUANT_QUANT_REF_H

#include <assert.h>
#include <stdint.h>

#include "base/status.h"
#include "base/blocks.h"

/* The precondition of every reference (de)quantizer: whole blocks only.
 * A caller passing a ragged row is a bug (the GGUF reader and nb_rtn check
 * row lengths against the block size); without this the tail would be
 * dropped silently. NB_ASSERT: checked in every build type (one modulo per
 * row), aborting with file:line. */
#define NB_QBLOCKS(n, qk) NB_ASSERT((n) % (qk) == 0 && "row length is not a multiple of the quantization block")

/* Round to nearest, ties to even, for |x| < 2^22 (llama.cpp's nearest_int). */
static inline int nb_nearest_int(float x) {
    float v = x + 12582912.f; /* 1.5 * 2^23: the sum's low mantissa bits hold round(x) */
    union { float f; int32_t i; } u = {v};
    return (u.i & 0x007fffff) - 0x00400000;
}

#define NB_REF_PAIR(name) \
    void nb_dequant_##name(const void *src, float *dst, int64_t n); \
    void nb_quant_##name(const float *src, void *dst, int64_t n);

NB_REF_PAIR(q4_0)
NB_REF_PAIR(q4_1)
NB_REF_PAIR(q5_0)
NB_REF_PAIR(q5_1)
NB_REF_PAIR(q8_0)
/* Q8_0 activations rounded the way llama.cpp's x86 kernels do (quant_ggml.c) */
void nb_quant_q8_0_act(const float *src, void *dst, int64_t n);
NB_REF_PAIR(q2_K)
NB_REF_PAIR(q3_K)
NB_REF_PAIR(q4_K)
NB_REF_PAIR(q5_K)
NB_REF_PAIR(q6_K)
NB_REF_PAIR(q8_K)
NB_REF_PAIR(w8)
NB_REF_PAIR(q8_T)
NB_REF_PAIR(w4g32)
NB_REF_PAIR(w4g64)
NB_REF_PAIR(w4g128)
NB_REF_PAIR(w4g32s)
NB_REF_PAIR(w4g64s)
NB_REF_PAIR(w4g128s)
NB_REF_PAIR(nf4)
NB_REF_PAIR(fp8_e4m3)
NB_REF_PAIR(fp8_e5m2)

/* W4 with any group (32/64/128): shared by the six registered variants. */
void nb_dequant_w4(const void *src, float *dst, int64_t n, int group);
void nb_quant_w4(const float *src, void *dst, int64_t n, int group, int symmetric);

#endif
