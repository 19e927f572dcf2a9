/* GPTQ (Frantar et al., 2022): one linear layer quantized column by column
 * with second-order error feedback.
 *
 * With X the calibration inputs of the layer (tokens x cols), H = 2 X^T X / N
 * (from nb_calib_stats: sum x x^T and the token count). Then:
 *   1. dead columns (H_ii = 0) get H_ii = 1 and their weights zeroed;
 *   2. H += damp * mean(diag H) * I; when the Cholesky factorisation fails,
 *      damp is multiplied by 10 (up to 4 times) and the damp used reported;
 *   3. U = the upper Cholesky factor of H^-1 (H^-1 = U^T U), computed as the
 *      inverse of H's "upper-lower" factor V (H = V V^T, V upper): reverse
 *      the index order, blocked lower Cholesky, blocked triangular inverse,
 *      reverse back (quant/qla.h); once per input, shared by the linears
 *      that read it (nb_gptq_hinv);
 *   4. columns in order (or, with desc_act, by decreasing H_ii), in lazy
 *      batches of 128: q = Q(w_c), e = (w_c - q) / U_cc, the rest of the
 *      batch's columns w_j -= e U_cj immediately, the columns after the batch
 *      once per batch (W[:, i2:] -= E U[i1:i2, i2:], a float GEMM).
 * Quantization grids: every supported format stores 4-bit levels q in
 * 0..15 with, per run of 32 weights, w = A q + B (W4G*: A = d, B = -d z;
 * Q4_0: A = d, B = -8 d; Q4_1: A = d, B = m; Q4_K: A = d sc_j, B = -dmin m_j).
 * A block's parameters are fitted by the format's own reference quantizer:
 * on the original weights for all blocks up front (static groups; always
 * with desc_act: the groups stay contiguous in nibble's formats, only the
 * order of quantization changes, so no g_idx is needed at load time), or on
 * the current (error-fed) weights when the column loop reaches the block's
 * first column (natural order). The levels are then chosen by GPTQ and
 * written into the fitted blocks.
 *
 * Rows are independent given U: they are split across the pool in chunks.
 * Thread safety: independent calls may run concurrently. */
#ifndef NB_QUANT_GPTQ_H
#define NB_QUANT_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "base/threadpool.h"

typedef struct nb_gptq_params {
    nb_dtype type;        /* NB_W4G32..NB_W4G128S, NB_Q4_0, NB_Q4_1, NB_Q4_K */
    double damp;          /* fraction of the mean diagonal (0.01) */
    bool desc_act;        /* act order (implies static groups) */
    bool static_groups;
    int block;            /* lazy batch size (<= 0: 128) */
} nb_gptq_params;

typedef struct nb_gptq_result {
    double damp_used;     /* the fraction that factorised */
    int64_t n_dead;       /* columns whose inputs were all zero */
    double loss;          /* sum over rows of the GPTQ objective sum_c e_c^2 / 2 (e scaled by 1/U_cc) */
} nb_gptq_result;

/* Whether GPTQ can write `type` with rows of `cols`. */
bool nb_gptq_supports(nb_dtype type, int64_t cols);

/* The factorised inverse Hessian of one input, shared by every linear that
 * reads that input (q/k/v, gate/up): dead columns, damp, act-order
 * permutation and U. H: cols x cols sums of x x^T (the upper triangle j >= i
 * is read), count: tokens summed (> 0). The factorisation is in float
 * (blocked Cholesky and triangular inverse, quant/qla.h), as the reference
 * implementations do it; the statistics stay double. NB_ERR_INVALID for
 * NaN/Inf in H, a zero count, or no damp up to 10^4 x p->damp that
 * factorises. */
typedef struct nb_gptq_hinv nb_gptq_hinv;
nb_status nb_gptq_hinv_create(const double *H, double count, int64_t cols, const nb_gptq_params *p, nb_pool *pool,
                              nb_gptq_hinv **out) __attribute__((warn_unused_result));
void nb_gptq_hinv_free(nb_gptq_hinv *h);

/* W: rows x cols, row-major (row = output channel, as the GGUF rows), read
 * and overwritten (scratch). h from nb_gptq_hinv_create with the same cols
 * and desc_act. dst: rows x row_bytes(type). NB_ERR_INVALID for NaN/Inf in
 * W or an unsupported type / row length. */
nb_status nb_gptq_quantize_hinv(float *W, int64_t rows, int64_t cols, const nb_gptq_hinv *h, const nb_gptq_params *p,
                                void *dst, nb_pool *pool, nb_gptq_result *res) __attribute__((warn_unused_result));

/* Both steps for one layer (H is not modified). */
nb_status nb_gptq_quantize(float *W, int64_t rows, int64_t cols, double *H, double count, const nb_gptq_params *p,
                           void *dst, nb_pool *pool, nb_gptq_result *res) __attribute__((warn_unused_result));

/* The upper factor U with U^T U = H^-1 (H symmetric positive definite,
 * cols x cols; its upper triangle is read). Returns false when H is not
 * positive definite. Exposed for the tests. */
bool nb_gptq_chol_inv_upper(double *H, int64_t n, float *U, nb_pool *pool);

#endif
