/* AWQ (Lin et al., 2023) and SmoothQuant (Xiao et al., 2022): per input
 * channel scales s that move quantization difficulty between activations
 * and weights. A linear y = W x becomes y = (W diag(s)) (x / s); the 1/s is
 * folded into what produces x (the RMSNorm weight, or the rows of the
 * previous linear), so the float model is unchanged.
 *
 * AWQ: s = m^a / sqrt(max(m^a) min(m^a)) with m = mean |x| per channel, a on
 * a grid of NB_AWQ_GRID points 0, 1/20, ..., 19/20; the a minimising the
 * output error sum_rows sum_tokens ((Q(W s) / s - W) x)^2 over the group of
 * linears sharing the input (q/k/v, gate/up, o, down) is kept. The clipping
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
 * rows[i] x cols, types[i]); writes s_out[cols] and the chosen alpha. */
nb_status nb_awq_search(const float *X, int64_t nx, const double *mean_abs, const float *const *W, const int64_t *rows,
                        const nb_dtype *types, int nw, int64_t cols, float *s_out, double *alpha_out, nb_pool *pool)
    __attribute__((warn_unused_result));
/* The scales of one alpha (the search's candidates). */
void nb_awq_scales(const double *mean_abs, int64_t cols, double alpha, float *s);
/* Clipping search on rows x cols W in place (group G = the type's block). */
void nb_awq_clip(const float *X, int64_t nx, float *W, int64_t rows, int64_t cols, nb_dtype type, nb_pool *pool);

/* SmoothQuant scales from max|x| per channel and the weights of the group
 * (nw linears, rows[i] x cols). Channels with no signal keep s = 1. */
void nb_smoothquant_scales(const float *max_abs_x, const float *const *W, const int64_t *rows, int nw, int64_t cols,
                           double alpha, float *s);

#endif
