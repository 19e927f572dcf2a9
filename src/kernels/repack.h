/* Load-time repacking of GGUF Q4_0 / Q8_0 weights into "planar" rows for
 * the AVX-512 VNNI decode kernels (docs/performance.md has the numbers).
 *
 * GGUF interleaves a 2-byte fp16 scale with each block's quants, so a SIMD
 * kernel spends most of its instructions fetching and converting scalar
 * scales one block at a time. A planar row keeps the quants of all blocks
 * contiguous, then all scales as f32:
 *   Q4_0R row (nb = K/32 blocks): nb x fp16 d, then nb x 16 bytes of
 *         nibbles (Q4_0's order: byte j = w[j] | w[j+16] << 4, unsigned
 *         0..15, value = d*(q-8))              -> 18 bytes per block, as Q4_0
 *   Q8_0R row: nb x fp16 d, then nb x 32 bytes q+128 (unsigned) -> 34, as Q8_0
 * Scales come first so a row is read front to back as one stream (with the
 * scales at the end, every row began with a cache miss the kernel waited on).
 *   Q8_0P (activations): nb x 32 int8, then nb x f32 d   -> 36 per block,
 *         quantized exactly like llama.cpp's x86 quantize_row_q8_0
 * Same bytes per block as GGUF (decode streams no more memory), same values,
 * so the products equal the non-repacked kernels' up to summation order.
 * These types exist only in memory, never in files. */
#ifndef NB_KERNELS_REPACK_H
#define NB_KERNELS_REPACK_H

#include "kernels/qdot.h"
#include "quant/qtypes.h"

enum {
    NB_Q4_0R = NB_DTYPE_EXT_BASE + 64,
    NB_Q8_0R = NB_DTYPE_EXT_BASE + 65,
    NB_Q8_0P = NB_DTYPE_EXT_BASE + 66,
};

/* Registers the dtypes; idempotent. */
void nb_repack_init(void);
/* The repacked type for a GGUF type, or the type itself when there is no
 * repacked form or this CPU lacks the kernels (AVX-512 VNNI); NIBBLE_REPACK=0
 * disables repacking. */
nb_dtype nb_repack_target(nb_dtype t);
/* Repacks `rows` rows of K elements from src (type `from`) into dst (its
 * nb_repack_target); dst holds rows * row_bytes(target, K). */
void nb_repack_rows(nb_dtype from, const void *src, void *dst, int64_t rows, int64_t K);

/* Kernels and dequantization of a repacked type (NULL when not one). */
const nb_qdot *nb_repack_qdot(nb_dtype t, nb_isa max_isa);
nb_to_float_fn nb_repack_to_float(nb_dtype t);

/* Scalar references (the definitions; tests compare the SIMD kernels to them). */
void nb_q8_0p_quantize_ref(const float *x, void *dst, int64_t n);
void nb_q4_0r_dot_ref(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_ref(int64_t n, const void *w, const void *a, float *out);
/* AVX-512 VNNI kernels (kernels/x86/repack_avx512.c) */
void nb_q4_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_q4_0r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_q8_0r_to_float_avx512(const void *src, float *dst, int64_t n);


/* Batched int8 GEMM for planar Q4_0R / Q8_0R weights (prefill and batched
 * decode). Activations are quantized like the decode path (Q8_0P rounding)
 * and packed for vpdpbusd: per group of 16 tokens and per 32-wide block,
 * 8 x 64 bytes = for each 4 consecutive k, the 4 bytes of each of the 16
 * tokens, plus each token's sum of the block (for the unsigned-weight offset)
 * and its scale. A weight's 4 bytes are broadcast and multiplied with 16
 * tokens at once; the products are exactly the integer dots of the decode
 * kernels, so results differ from them only by float summation order. */
#define NB_ACTPACK_TOKENS 16
typedef struct nb_actpack {
    int64_t K, nb, n, ng; /* row length, blocks, tokens, token groups */
    int8_t *q;            /* [ng][nb][8][64] */
    int32_t *sum;         /* [ng][nb][16] */
    float *d;             /* [ng][nb][16] */
} nb_actpack;

/* Bytes for n tokens of row length K, plus one row of scratch per thread
 * (K + K/8 bytes each; callers add it). */
size_t nb_actpack_bytes(int64_t K, int64_t n);
/* Lays the pack out in mem (64-byte aligned); then every token group g is
 * filled by nb_actpack_group (groups are independent: threads may split
 * them), `row` being K + K/8 bytes of the caller's scratch. */
void nb_actpack_init(nb_actpack *ap, void *mem, int64_t n, int64_t K);
void nb_actpack_group(nb_actpack *ap, const float *X, int64_t g, int8_t *row);

typedef void (*nb_repack_gemm_fn)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                                  int64_t ldy);
/* The int8 GEMM for a repacked type, NULL when none (or no AVX-512 VNNI). */
nb_repack_gemm_fn nb_repack_gemm(nb_dtype t, nb_isa max_isa);
/* y[t*ldy + r] for rows r < nr (weights at w + r*row_bytes) and all tokens. */
void nb_q4_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);
void nb_q8_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);

#endif
