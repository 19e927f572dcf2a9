/* Dot products of quantized weight rows with activation rows: the inner
 * kernel of every quantized matmul.
 *
 * The matmul Y[t][r] = sum_k X[t][k] * W[r][k] goes:
 *   1. quantize each activation row X[t] once: qd->quantize_act(X[t], Xq[t], K)
 *      (qd->act_type blocks: Q8_0 for the 32-block integer formats, Q8_K for
 *      k-quants, Q8_T (one int8 scale per token) for W8A8, or F32: a plain
 *      copy, for the float formats NF4 / FP8);
 *   2. qd->vec_dot(K, W_row_r, Xq[t], &Y[t][r]) for every row and token,
 *      split across threads as the caller likes (kernels are reentrant).
 * K must be a multiple of the weight block (nb_qtype_supports_row).
 * Activation buffers: K / act_block * act_block_bytes bytes (nb_dtype_row_bytes
 * of act_type; F32: 4*K).
 *
 * Optional vec_dot_mxn (NULL when absent): computes an m x n tile at once so
 * each weight block is loaded once for n tokens:
 *   out[i*ldo + j] = dot(W row i, act row j), i < m (<= 4), j < n (<= 4),
 *   W rows at w + i*w_stride bytes, act rows at act + j*a_stride bytes.
 * It equals m*n calls of vec_dot (same accumulation order).
 *
 * Optional vec_dot_rows (NULL when absent): nr rows x nt tokens at once,
 *   y[t*ldy + r] = dot(W row r, act row t), r < nr, t < nt (any counts),
 * W rows at w + r*w_stride, act rows at act + t*a_stride: the rows held in
 * the vector lanes, for a few tokens (small batches: dispatch.h rows_min ..
 * rows_max); the float summation order differs from vec_dot's.
 *
 * Implementations: a scalar reference (kernels/ref/qdot_ref.c, the
 * definition), AVX2 (+FMA, F16C) and AVX-512 (VL/BW + VNNI vpdpbusd on 256-bit
 * lanes). nb_qdot_get picks the best one at or below max_isa that this CPU
 * runs (base/cpu.h; NIBBLE_ISA caps it), once; the tables are static.
 * Results of SIMD kernels differ from the reference only by float summation
 * order (integer parts are exact): |simd - ref| <= 1e-5 * sum|w_i * a_i|. */
#ifndef NB_KERNELS_QDOT_H
#define NB_KERNELS_QDOT_H

#include <stdint.h>

#include "base/cpu.h"
#include "base/dtype.h"

typedef void (*nb_quantize_act_fn)(const float *x, void *dst, int64_t n);
typedef void (*nb_vec_dot_fn)(int64_t n, const void *w_row, const void *act_row, float *out);
typedef void (*nb_vec_dot_mxn_fn)(int64_t n, int m, int nn, const void *w, size_t w_stride,
                                  const void *act, size_t a_stride, float *out, size_t ldo);
typedef void (*nb_vec_dot_rows_fn)(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt,
                                   const void *act, size_t a_stride, float *y, int64_t ldy);

typedef struct nb_qdot {
    nb_dtype act_type;
    nb_quantize_act_fn quantize_act;
    nb_vec_dot_fn vec_dot;
    nb_vec_dot_mxn_fn vec_dot_mxn; /* optional, may be NULL */
    const char *isa;               /* "scalar", "avx2", "avx512" */
    nb_vec_dot_rows_fn vec_dot_rows; /* optional, may be NULL */
} nb_qdot;

/* Best implementation for `weight_type` at or below max_isa; NULL if the type
 * has no dot kernel (not quantized, or an activation-only format). */
const nb_qdot *nb_qdot_get(nb_dtype weight_type, nb_isa max_isa);

/* Exactly the given ISA (for tests); NULL when not built or not runnable here. */
const nb_qdot *nb_qdot_get_exact(nb_dtype weight_type, nb_isa isa);

/* Per-ISA tables (kernels/ref, kernels/x86); NULL when the type is not covered. */
const nb_qdot *nb_qdot_ref(nb_dtype t);
const nb_qdot *nb_qdot_avx2(nb_dtype t);
const nb_qdot *nb_qdot_avx512(nb_dtype t);

#endif
