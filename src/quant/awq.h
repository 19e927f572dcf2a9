/* AWQ (Lin et al., 2023) and SmoothQuant (Xiao et al., 2022): per input
 * channel scales s that move quantization difficulty between activations
 * and weights. A linear y = W x becomes y = (W diag(s)) (x / s); the 1/s is
 * folded into what produces x (the RMSNorm weight, or the rows of the
 * previous linear), so the float model is unchanged.
 *
 * AWQ: s = m^a / sqrt(max(m^a) min(m^a)) with m = mean |x| per channel, a on
 * a grid of NB_AWQ_GRID points 0, 1/20, ..., 19/20; the a minimising the
 * quantized module's output error is kept: for o and down the output error
 * sum_rows sum_tokens ((Q(W s) / s - W) x)^2 of the linear itself
 * (nb_awq_search), for (q,k,v) and (gate,up) the error at the output of the
 * attention block / MLP they feed (nb_awq_search_module). The clipping
 * search then shrinks each group's largest |w| by 1 - i/20 (i < 10) where
 * that lowers the output error of the group's weights.
 * SmoothQuant: s_j = max|x_j|^a / max_rows |w_j|^(1-a) (a = --alpha, 0.5).
 *
 * Q: the format's reference quantizer (RTN) for one row of `cols`. Rows are
 * split across `pool` (may be NULL). */
#ifndef NB_QUANT_AWQ_H
#define NB_QUANT_AWQ_H

#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "base/threadpool.h"

#define NB_AWQ_GRID 20

/* Output error of quantizing rows x cols W with scales s (NULL: none) under
 * X (nx x cols). */
double nb_awq_error(const float *X, int64_t nx, const float *W, int64_t rows, int64_t cols, const float *s,
                    nb_dtype type, nb_pool *pool);
/* The AWQ scales for mean_abs[cols] and the given linears (nw of them,
 * rows[i] x cols, types[i]); writes s_out[cols] and the chosen alpha.
 * NB_ERR_INVALID for NaN/Inf in W (the message names the linear, row and
 * column; so does nb_awq_search_module). */
nb_status nb_awq_search(const float *X, int64_t nx, const double *mean_abs, const float *const *W, const int64_t *rows,
                        const nb_dtype *types, int nw, int64_t cols, float *s_out, double *alpha_out, nb_pool *pool)
    __attribute__((warn_unused_result));
/* The scales of one alpha (the search's candidates). */
void nb_awq_scales(const double *mean_abs, int64_t cols, double alpha, float *s);
/* ---- module-output search ("module2inspect") ---------------------------
 * The (q,k,v) and (gate,up) groups are searched on the output of the module
 * they feed, as the paper and AutoAWQ do: the attention block (attention
 * over the calibration positions, then o) and the MLP (down(silu(gate) up)).
 * The caller runs the module (the serving forward pass, with the group's
 * linears replaced by their fake-quantized weights) and returns its
 * activations before the module's last linear, act [n][dim]; the error is
 *   sum_t || P (act_t - ref_t) ||^2
 * with P (proj_rows x dim) that last linear in float (NULL: the identity)
 * and ref the float module's activations. */
typedef nb_status (*nb_awq_module_fn)(void *ud, const float *const *deq, float *act);
typedef struct nb_awq_module {
    nb_awq_module_fn run;  /* deq[i]: the group's linear i as Q(W s)/s, rows[i] x cols */
    void *ud;
    int64_t n, dim;        /* act is n x dim */
    const float *ref;      /* [n][dim] */
    const float *proj;     /* [proj_rows][dim] or NULL */
    int64_t proj_rows;
} nb_awq_module;

/* out = Q(W diag(s)) diag(s)^-1 (s NULL: none), rows x cols, rows on the pool.
 * NB_ERR_INVALID when the type cannot hold rows of cols. */
nb_status nb_awq_fake_quant(const float *W, int64_t rows, int64_t cols, const float *s, nb_dtype type, float *out,
                            nb_pool *pool) __attribute__((warn_unused_result));
/* sum_t ||P (act_t - ref_t)||^2 of the module (rows split across the pool) */
double nb_awq_module_error(const nb_awq_module *mod, const float *act, nb_pool *pool);
/* The alpha search of nb_awq_search with the module's output error as the
 * objective; writes s_out[cols], the alpha and its error (err_out may be
 * NULL). Errors of mod->run are returned. */
nb_status nb_awq_search_module(const double *mean_abs, const float *const *W, const int64_t *rows,
                               const nb_dtype *types, int nw, int64_t cols, const nb_awq_module *mod, float *s_out,
                               double *alpha_out, double *err_out, nb_pool *pool) __attribute__((warn_unused_result));

/* Clipping search on rows x cols W in place (group G = the type's block). */
void nb_awq_clip(const float *X, int64_t nx, float *W, int64_t rows, int64_t cols, nb_dtype type, nb_pool *pool);

/* SmoothQuant scales from max|x| per channel and the weights of the group
 * (nw linears, rows[i] x cols). Channels with no signal keep s = 1.
 * NB_ERR_INVALID for NaN/Inf in W (naming the linear, row and column) or
 * in max_abs_x. */
nb_status nb_smoothquant_scales(const float *max_abs_x, const float *const *W, const int64_t *rows, int nw,
                                int64_t cols, double alpha, float *s) __attribute__((warn_unused_result));

#endif
