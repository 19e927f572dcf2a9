/* Dense float linear algebra for the calibrated quantizers (GPTQ's Hessian,
 * factorisation and lazy block updates). Kept inside src/quant so that the
 * quantizers do not depend on the inference kernels' dispatch table.
 *
 *   nb_qla_gemm     C += alpha A B (A m x K row-major, B K x n row-major or,
 *                   with b_trans, given as its transpose n x K), one thread;
 *                   an AVX2/FMA 6x16 micro-kernel on packed B panels when the
 *                   CPU has it (NIBBLE_ISA=scalar forces the portable one).
 *   nb_qla_syrk_acc H[i][j] += sum_t x_ti x_tj for j >= i (double H, float
 *                   products: each call's sum is formed in float tiles, then
 *                   added to H in double), on the pool.
 *   nb_qla_chol     lower Cholesky in place (A = L L^T), blocked (64): the
 *                   diagonal blocks and their inverses in double, the panel
 *                   solve (A21 L11^-T) and the trailing update as GEMMs on
 *                   the pool; false when A is not positive definite.
 *   nb_qla_trinv    X = L^-1 (lower), blocked: the diagonal blocks inverted
 *                   in double, the rest as GEMMs, column panels on the pool.
 *
 * Results do not depend on the thread count (every element is computed by
 * the same sequence of operations whichever thread runs it); they may differ
 * in the last bits between the AVX2 (fused multiply-add) and the portable
 * path. */
#ifndef NB_QUANT_QLA_H
#define NB_QUANT_QLA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"

void nb_qla_gemm(int64_t m, int64_t n, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, bool b_trans, float *C, int64_t ldc);
/* y -= a x (n floats) */
void nb_qla_axpy_sub(int64_t n, float a, const float *x, float *y);

/* scratch: nb_qla_syrk_scratch(d, n) floats, or NULL (allocated per call:
 * fresh pages cost page faults on every call) */
void nb_qla_syrk_acc(double *H, int64_t d, const float *X, int64_t n, float *scratch, nb_pool *pool);
int64_t nb_qla_syrk_scratch(int64_t d, int64_t n);

bool nb_qla_chol(float *A, int64_t n, nb_pool *pool);
/* L: n x n lower (upper ignored); X: n x n output (its upper part zeroed). */
bool nb_qla_trinv(const float *L, float *X, int64_t n, nb_pool *pool);

/* ---- ISA-specific (qla_avx2.c) ---- */
/* C[r][j] += alpha sum_k a[r][k] bp[k*16 + j] for r < mi, j < nj */
void nb_qla_kernel_6x16_avx2(int64_t K, const float *const a[6], const float *bp, float *C, int64_t ldc, float alpha,
                             int mi, int nj);
/* y += x (float to double) */
void nb_qla_add_f2d_avx2(int64_t n, const float *x, double *y);
void nb_qla_axpy_sub_avx2(int64_t n, float a, const float *x, float *y);

#endif
