/* The quantized-format registry: one entry per block format we can store and
 * compute on, so every tool lists and reports formats the same way.
 *
 * Each entry gives the name, block size, bytes per block, bits per weight,
 * the reference dequantize/quantize functions (the definitions; SIMD kernels
 * are tested against them) and the activation format its dot product wants
 * (src/kernels/qdot.h).
 *
 * GGUF types keep ggml's ids and llama.cpp's reference quantizers
 * (quantize_row_*_ref: round-to-nearest, and the make_qkx2_quants /
 * make_qx_quants scale search for k-quants), so our files are byte-identical
 * to llama-quantize's without an imatrix. nibble's own formats take ids from
 * NB_DTYPE_EXT_BASE up (base/dtype.h, whose constant table also gives their
 * name, block and bytes per block).
 *
 * Row lengths: a tensor row of ne0 weights can use a format only when
 * nb_qtype_supports_row(t, ne0) is true (ne0 a multiple of the block). When it
 * is false the quantizer must fall back to a higher-precision type for that
 * tensor (nb_qtype_fallback()), never pad or read past the row.
 *
 * Per-row ("per-channel" / "per-token") formats (flag per_row): from_float
 * treats the n values as ONE row and gives all its blocks the same scale, so
 * callers quantize such tensors row by row. Dequantize and the dot products
 * read the scale of every block, so any row length that is a multiple of the
 * block works.
 *
 * Thread safety: the table is constant. */
#ifndef NB_QUANT_QTYPES_H
#define NB_QUANT_QTYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"

typedef void (*nb_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*nb_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct nb_qtype {
    nb_dtype type;            /* ggml id or nibble's (base/dtype.h) */
    const char *name;         /* "Q4_0", "W4G128", "NF4", "FP8_E4M3", ... */
    uint32_t block, block_bytes;
    double bits_per_weight;   /* 8 * block_bytes / block */
    nb_to_float_fn to_float;  /* reference dequantize, n % block == 0 */
    nb_from_float_fn from_float; /* reference quantize, n % block == 0 */
    nb_dtype act_type;        /* activations the dot wants: NB_Q8_0, NB_Q8_K, NB_Q8_T or NB_F32 */
    bool per_row;             /* from_float gives a whole row one scale (see above) */
    bool act_only;            /* an activation format (Q8_K, Q8_T): no weight kernels */
    uint32_t group;           /* W4: group size; 0 otherwise */
    const char *desc;         /* one line for `nibble quantize --list` */
} nb_qtype;

/* NULL if `t` is not a quantized type we support. */
const nb_qtype *nb_qtype_get(nb_dtype t);
/* Case-insensitive name lookup; NULL when unknown. */
const nb_qtype *nb_qtype_by_name(const char *name);
/* All entries, in a stable order (for listings); *n receives the count. */
const nb_qtype *nb_qtype_list(int *n);

/* ne0 % block == 0 (and ne0 > 0). */
bool nb_qtype_supports_row(nb_dtype t, int64_t ne0);
/* The type to use instead when a row of ne0 does not fit `t`: the same
 * family with a smaller block when one fits (k-quants -> Q4_0/Q5_0/Q8_0 ...,
 * W4G128 -> W4G64 -> W4G32), else F16. Returns `t` itself when it fits. */
nb_dtype nb_qtype_fallback(nb_dtype t, int64_t ne0);

/* Bytes of n weights of a quantized (or plain) type; false on a non-multiple
 * or overflow. Same as nb_dtype_row_bytes. */
bool nb_qtype_row_bytes(nb_dtype t, int64_t n, uint64_t *bytes);

/* Index of the first NaN or Inf in x[0..n), or -1 when every value is
 * finite (the quantizers refuse non-finite weights: rtn.h, awq.h, gptq.h). */
int64_t nb_first_nonfinite(const float *x, int64_t n);

/* ---- reference functions, exported for tests and the kernels ---------- */
/* FP8 scalar conversions (OCP 8-bit floating point spec v1.0).
 * E4M3 ("fn"): bias 7, max 448, no infinities, NaN = S.1111.111.
 * E5M2: bias 15, max 57344, infinities and NaNs as in IEEE.
 * Encoding rounds to nearest even and saturates: |x| beyond the max finite
 * value (infinities included) becomes +-max; NaN becomes a NaN. */
uint8_t nb_fp32_to_e4m3(float x);
float nb_e4m3_to_fp32(uint8_t b);
uint8_t nb_fp32_to_e5m2(float x);
float nb_e5m2_to_fp32(uint8_t b);

/* The 16 NF4 levels of bitsandbytes (ascending, -1 .. 1). */
extern const float nb_nf4_levels[16];

/* FP8 with a caller-chosen scale (per-tensor scaling): n % 32 == 0,
 * every block gets d = scale; values are x / scale, saturated. */
void nb_quantize_fp8_scaled(nb_dtype t, const float *src, void *dst, int64_t n, float scale);

/* Activation quantizers (also reachable through nb_qtype_get(...)->from_float). */
void nb_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n);
void nb_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n);
void nb_quantize_row_q8_T_ref(const float *x, void *dst, int64_t n);

#endif
