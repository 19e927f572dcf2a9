/* Load-time repacking of GGUF Q4_0 / Q8_0 / Q4_K / Q6_K weights (and of
 * nibble's W8 and W4G32/64/128 and their S forms) into
 * layouts made for the AVX-512 VNNI kernels, also run by the AVX2 / AVX-VNNI
 * ones (docs/speed.md "AVX2"; docs/performance.md has the
 * numbers).
 *
 * GGUF interleaves a 2-byte fp16 scale with each block's quants, so a SIMD
 * kernel spends most of its instructions fetching and converting scalar
 * scales one block at a time. A planar row keeps the quants of all blocks
 * contiguous, after all scales:
 *   Q4_0R row (nb = K/32 blocks): nb x fp16 d, then the nibbles (unsigned
 *         0..15, value = d*(q-8)), 16 bytes per block: every group of 4
 *         blocks (128 weights) as 64 bytes, byte i = q[i] | q[64+i] << 4, so
 *         one 64-byte load gives 64 consecutive weights twice; the last
 *         nb % 4 blocks in Q4_0's order (byte j = q[j] | q[j+16] << 4)
 *                                              -> 18 bytes per block, as Q4_0
 *   Q8_0R row: nb x fp16 d, then nb x 32 bytes q+128 (unsigned) -> 34, as Q8_0
 *   W8R row: the same with W8's f32 d                           -> 36, as W8
 * Scales come first so a row is read front to back as one stream (with the
 * scales at the end, every row began with a cache miss the kernel waited on).
 *   W4G32R / W4G64R / W4G128R row (ng = K/G groups of G weights): ng x fp16
 *         d, then ng x fp16 z (the zero point, an integer 0..255, exact in
 *         fp16), then the nibbles in Q4_0R's order (value = d*(q-z))
 *                                            -> 4 + G/2 bytes per group, as W4G
 *         (W4G*S, z = 8, are the same layout). The dots are Q4_0R's with a
 *         per-group scale and offset: d*z comes off through the activations'
 *         d*sum like Q4_0R's 8. Before, W4G128 decode ran at 22-51% of the
 *         roofline in the per-group layout (docs/speed.md, session 31).
 *   Q4_0L, W4G32L / W4G64L / W4G128L: Q4_0R's and W4G*R's rows with each
 *         4-block group's 64 bytes in lane order, what the AVX2 kernels
 *         load instead (nb_repack_lanes): byte p = vector 0's byte p |
 *         vector 2's << 4, byte 32+p = vector 1's | vector 3's << 4, and
 *         in vector j, 128-bit half h, 32-bit lane b holds weights 4j + 16h
 *         .. +3 of block b. vpmaddubsw's products of a group then add up in
 *         each block's own two lanes: Q4_0R's order has each vector hold one
 *         block, and its sums had to be folded across lanes (about a third
 *         of the plain-AVX2 dot's vector operations)
 *   Q8_0L, W8L: Q8_0R's and W8R's rows with each 4-block group's 128 bytes
 *         in the same lane order (byte 32j + p = vector j's byte p): the 8-bit
 *         sums of a group add in its blocks' own lanes too
 *   Q8_0PL (their activations): Q8_0P with each 4-block group's 128 quants
 *         in the same lane order
 *   Q8_0P (activations): nb x 32 int8, then nb x f32 d, then nb x f32 d*sum(q)
 *         (for the unsigned weights' offset, computed once per token instead
 *         of once per weight row), then nb x i32 sum(q) (the same offset in
 *         integers, for kernels that start their integer sums at it) -> 44
 *         per block; quantized exactly like llama.cpp's x86 quantize_row_q8_0
 * Same bytes per block as GGUF (decode streams no more memory), same values,
 * so the products equal the non-repacked kernels' up to summation order.
 * K-quants keep their 256-weight super-blocks, with the weights in "lane
 * order": position 64k + 4l + c holds weight 16l + 4k + c, so in each of
 * the four 64-byte vectors k of a super-block, 32-bit lane l covers the
 * 16-weight group l - four chained vpdpbusd leave each group's sum in its
 * own lane, ready to be scaled. The activations are Q8_K with their qs in
 * the same order (Q8_KP; d and the per-16 bsums unchanged), so the integer
 * products are exactly the GGUF kernels':
 *   Q4_KR (148 B): fp16 d, dmin | u8 sc[8] | u8 m[8] (the 6-bit scales and
 *         mins unpacked) | qs[128]: byte 64p+i = vector 2p's byte i | vector
 *         2p+1's byte i << 4 (w = d*sc[e/32]*q - dmin*m[e/32]) - 4 bytes
 *         more than Q4_K
 *   Q6_KR (210 B, as Q6_K): fp16 d | i8 sc[16] | ql[128]: byte 64p+i = low 4
 *         bits of vector 2p's byte i | of vector 2p+1's << 4 | qh[64]: byte i
 *         = the high 2 bits of vector k's byte i at bits 2k (w = d*sc[e/16]*(q-32))
 * These types exist only in memory, never in files: their ids are the
 * in-memory-only range of base/dtype.h, which no file reader accepts. */
#ifndef NB_KERNELS_REPACK_H
#define NB_KERNELS_REPACK_H

#include "kernels/qdot.h"
#include "quant/qtypes.h"

/* The repacked K super-blocks (layouts above). */
typedef struct __attribute__((packed)) {
    uint16_t d, dmin;
    uint8_t sc[8], m[8], qs[128];
} nb_block_q4_kr;
typedef struct __attribute__((packed)) {
    uint16_t d;
    int8_t sc[16];
    uint8_t ql[128], qh[64];
} nb_block_q6_kr;
_Static_assert(sizeof(nb_block_q4_kr) == 148, "q4_kr (base/dtype.c has the size)");
_Static_assert(sizeof(nb_block_q6_kr) == 210, "q6_kr");

/* The repacked type the process's dispatch table (kernels/dispatch.h) loads
 * a GGUF type as: the type itself when there is no repacked form, this CPU
 * lacks the kernels (AVX2 at least) or repacking is off (--repack off,
 * NIBBLE_REPACK=0). */
nb_dtype nb_repack_target(nb_dtype t);
/* The repacked form of t whatever the CPU (t itself when none). */
nb_dtype nb_repack_layout(nb_dtype t);
/* The lane-order form of a repacked type (Q4_0R -> Q4_0L, W4G*R -> W4G*L),
 * what CPUs whose int8 kernels are AVX2's load instead; t itself for the
 * others. */
nb_dtype nb_repack_lanes(nb_dtype t);
/* Repacks `rows` rows of K elements from src (type `from`) into dst (its
 * nb_repack_target); dst holds rows * row_bytes(target, K). */
void nb_repack_rows(nb_dtype from, const void *src, void *dst, int64_t rows, int64_t K);
/* The same into a given repacked form `to` of `from` (nb_repack_layout or its nb_repack_lanes). */
void nb_repack_rows_to(nb_dtype from, nb_dtype to, const void *src, void *dst, int64_t rows, int64_t K);

/* Kernels and dequantization of a repacked type (NULL when not one). */
const nb_qdot *nb_repack_qdot(nb_dtype t, nb_isa max_isa);
nb_to_float_fn nb_repack_to_float(nb_dtype t);
/* The same at or below max_isa. */
nb_to_float_fn nb_repack_to_float_isa(nb_dtype t, nb_isa max_isa);

/* The integer sum of block i of a Q4_0R / Q8_0R / W4G*R row's quants (q:
 * after the scales) with Q8_0P activations x, for the blocks past the last
 * whole 4-block group (Q4_0R keeps Q4_0's nibble order there), the nibbles
 * less z (Q4_0R: 8): the scalar tails of the SIMD kernels. Include only
 * where auto-vectorisation is off (GCC 12 miscompiles these sums into
 * vpdpbusd: kernels/x86/repack_avx512.c). */
static inline int nb_q4_0r_tail_isum(const uint8_t *q, const int8_t *x, int64_t i, int z) {
    int s = 0;
    for (int j = 0; j < 16; j++)
        s += ((q[i * 16 + j] & 15) - z) * x[i * 32 + j] + ((q[i * 16 + j] >> 4) - z) * x[i * 32 + j + 16];
    return s;
}
static inline int nb_q8_0r_tail_isum(const uint8_t *q, const int8_t *x, int64_t i) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += (q[i * 32 + j] - 128) * x[i * 32 + j];
    return s;
}

/* Scalar references (the definitions; tests compare the SIMD kernels to them). */
void nb_q8_0p_quantize_ref(const float *x, void *dst, int64_t n);
/* The same, and Q8_KP (the K-quant dots' activations), vectorised; byte-identical. */
void nb_q8_0p_quantize_avx512(const float *x, void *dst, int64_t n);
void nb_q8_0p_quantize_avx2(const float *x, void *dst, int64_t n);
void nb_q8_0pl_quantize_ref(const float *x, void *dst, int64_t n);
void nb_q8_0pl_quantize_avx2(const float *x, void *dst, int64_t n);
void nb_q8_kp_quantize_ref(const float *x, void *dst, int64_t n);
void nb_q8_kp_quantize_avx512(const float *x, void *dst, int64_t n);
void nb_q8_kp_quantize_avx2(const float *x, void *dst, int64_t n);
void nb_q4_0r_dot_ref(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_ref(int64_t n, const void *w, const void *a, float *out);
void nb_q4_kr_dot_ref(int64_t n, const void *w, const void *a, float *out); /* a: Q8_KP */
void nb_q6_kr_dot_ref(int64_t n, const void *w, const void *a, float *out);
/* AVX-512 VNNI kernels (kernels/x86/repack_avx512.c) */
void nb_q4_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
/* The same for up to 4 rows x 4 tokens (vec_dot_mxn of kernels/qdot.h): each
 * weight vector unpacked once for all the tokens (small-batch decode). */
void nb_q4_0r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo);
void nb_q8_0r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo);
void nb_q4_0r_to_float_avx512(const void *src, float *dst, int64_t n);
/* W8R and W4G*R (group 32, 64, 128): the decode dots, small-batch dots, dequantization. */
void nb_w8r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_w8r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                           size_t a_stride, float *out, size_t ldo);
void nb_w8r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_w4g32r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_w4g64r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_w4g128r_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void nb_w4g32r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                              size_t a_stride, float *out, size_t ldo);
void nb_w4g64r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                              size_t a_stride, float *out, size_t ldo);
void nb_w4g128r_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                               size_t a_stride, float *out, size_t ldo);
void nb_w4g32r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_w4g64r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_w4g128r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_q8_0r_to_float_avx512(const void *src, float *dst, int64_t n);
void nb_q4_kr_dot_avx512(int64_t n, const void *w, const void *a, float *out);
/* Q4_KR / Q6_KR m x nn tiles (the vec_dot_mxn contract of kernels/qdot.h): one token's rows read in lockstep */
void nb_q4_kr_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo);
void nb_q6_kr_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo);
/* Q4_0R / W4G*R / Q4_KR / Q6_KR rows x tokens with the rows in the vector lanes (the vec_dot_rows
 * form of kernels/qdot.h; kernels/x86/rows_avx512.c). */
void nb_q4_0r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy);
void nb_q4_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy); /* act: Q8_KP */
void nb_w4g32r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                           size_t a_stride, float *y, int64_t ldy);
void nb_w4g64r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                           size_t a_stride, float *y, int64_t ldy);
void nb_w4g128r_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                            size_t a_stride, float *y, int64_t ldy);
void nb_q6_kr_rows_avx512(int64_t n, int64_t nr, const void *w, size_t w_stride, int64_t nt, const void *act,
                          size_t a_stride, float *y, int64_t ldy); /* act: Q8_KP */
void nb_q6_kr_dot_avx512(int64_t n, const void *w, const void *a, float *out);


struct nb_actpack;
struct nb_rgemm;
/* AVX2 kernels over the same layouts (kernels/x86/repack_avx2_impl.h): _avx2
 * with vpmaddubsw + vpmaddwd (any AVX2 CPU), _avxvnni with AVX-VNNI's
 * 256-bit vpdpbusd (only where base/cpu.h reports avxvnni). The GEMMs take
 * the same activation pack as the AVX-512 ones. */
void nb_q4_0r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_q4_kr_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_q6_kr_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_w8r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_w8r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_w4g32r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_w4g64r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_w4g128r_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void nb_q4_0r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_w4g32r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_w4g64r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_w4g128r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_q8_0r_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_q4_kr_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
void nb_q6_kr_dot_avxvnni(int64_t n, const void *w, const void *a, float *out);
#define NB_DOT_DECL_BOTH(type)                                                                                \
    void nb_##type##_dot_avx2(int64_t n, const void *w, const void *a, float *out);                           \
    void nb_##type##_dot_avxvnni(int64_t n, const void *w, const void *a, float *out)
NB_DOT_DECL_BOTH(q4_0l);
NB_DOT_DECL_BOTH(w4g32l);
NB_DOT_DECL_BOTH(w4g64l);
NB_DOT_DECL_BOTH(w4g128l);
NB_DOT_DECL_BOTH(q8_0l);
NB_DOT_DECL_BOTH(w8l);
#undef NB_DOT_DECL_BOTH
/* Their m x nn tiles (the vec_dot_mxn contract of kernels/qdot.h): one token's rows read in lockstep */
#define NB_MXN_DECL(name)                                                                                     \
    void name(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act, size_t a_stride, float *out, \
              size_t ldo)
#define NB_MXN_DECL_BOTH(type) NB_MXN_DECL(nb_##type##_dot_mxn_avx2); NB_MXN_DECL(nb_##type##_dot_mxn_avxvnni)
NB_MXN_DECL_BOTH(q4_0r);
NB_MXN_DECL_BOTH(q8_0r);
NB_MXN_DECL_BOTH(w8r);
NB_MXN_DECL_BOTH(w4g32r);
NB_MXN_DECL_BOTH(w4g64r);
NB_MXN_DECL_BOTH(w4g128r);
NB_MXN_DECL_BOTH(q4_kr);
NB_MXN_DECL_BOTH(q6_kr);
NB_MXN_DECL_BOTH(q4_0l);
NB_MXN_DECL_BOTH(w4g32l);
NB_MXN_DECL_BOTH(w4g64l);
NB_MXN_DECL_BOTH(w4g128l);
NB_MXN_DECL_BOTH(q8_0l);
NB_MXN_DECL_BOTH(w8l);
#undef NB_MXN_DECL_BOTH
#undef NB_MXN_DECL
#define NB_RGEMM_DECL(name) void name(const uint8_t *w, uint64_t row_bytes, int64_t nr, const struct nb_actpack *ap, float *y, int64_t ldy)
NB_RGEMM_DECL(nb_w8r_gemm_avx2);
NB_RGEMM_DECL(nb_w4g32r_gemm_avx2);
NB_RGEMM_DECL(nb_w4g64r_gemm_avx2);
NB_RGEMM_DECL(nb_w4g128r_gemm_avx2);
NB_RGEMM_DECL(nb_w8r_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g32r_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g64r_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g128r_gemm_avxvnni);
NB_RGEMM_DECL(nb_w8r_gemm_avx512);
NB_RGEMM_DECL(nb_w4g32r_gemm_avx512);
NB_RGEMM_DECL(nb_w4g64r_gemm_avx512);
NB_RGEMM_DECL(nb_w4g128r_gemm_avx512);
NB_RGEMM_DECL(nb_q4_0r_gemm_avx2);
NB_RGEMM_DECL(nb_q8_0r_gemm_avx2);
NB_RGEMM_DECL(nb_q4_kr_gemm_avx2);
NB_RGEMM_DECL(nb_q6_kr_gemm_avx2);
NB_RGEMM_DECL(nb_q4_0r_gemm_avxvnni);
NB_RGEMM_DECL(nb_q8_0r_gemm_avxvnni);
NB_RGEMM_DECL(nb_q4_kr_gemm_avxvnni);
NB_RGEMM_DECL(nb_q6_kr_gemm_avxvnni);
NB_RGEMM_DECL(nb_q4_0l_gemm_avx2);
NB_RGEMM_DECL(nb_w4g32l_gemm_avx2);
NB_RGEMM_DECL(nb_w4g64l_gemm_avx2);
NB_RGEMM_DECL(nb_w4g128l_gemm_avx2);
NB_RGEMM_DECL(nb_q4_0l_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g32l_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g64l_gemm_avxvnni);
NB_RGEMM_DECL(nb_w4g128l_gemm_avxvnni);
NB_RGEMM_DECL(nb_q8_0l_gemm_avx2);
NB_RGEMM_DECL(nb_w8l_gemm_avx2);
NB_RGEMM_DECL(nb_q8_0l_gemm_avxvnni);
NB_RGEMM_DECL(nb_w8l_gemm_avxvnni);
/* The repacked decode dots / int8 GEMM of t for one variant: 0 scalar (dots
 * only), 1 AVX2, 2 AVX-VNNI, 3 AVX-512 VNNI; NULL when t has none or this CPU
 * cannot run it (tests compare every variant to the scalar reference). */
const nb_qdot *nb_repack_qdot_variant(nb_dtype t, int variant);
const struct nb_rgemm *nb_repack_gemm_variant(nb_dtype t, int variant);
/* The activation pack filled with AVX2 (byte-identical to nb_actpack_group_ref). */
void nb_actpack_group_avx2(struct nb_actpack *ap, const float *X, int64_t g);


/* Batched int8 GEMM for repacked weights (prefill and batched decode).
 * Activations are quantized like the decode path of the weight type (Q8_0P
 * rounding per 32 for Q4_0R / Q8_0R, Q8_K per 256 for the K types) and
 * packed for vpdpbusd: per group of 16 tokens and per 32-wide block,
 * 8 x 64 bytes = for each 4 consecutive k, the 4 bytes of each of the 16
 * tokens, plus per token the block's integer sum (for unsigned-weight
 * offsets), that sum as float, the sums of its two 16-wide halves (Q6_K's
 * offset), and the scale. A weight's 4 bytes are broadcast and multiplied
 * with 16 tokens at once; the products are exactly the integer dots of the
 * decode kernels, so results differ from them only by float summation order. */
#define NB_ACTPACK_TOKENS 16
typedef struct nb_actpack {
    int64_t K, nb, n, ng; /* row length, blocks, tokens, token groups */
    nb_dtype act;         /* NB_Q8_0P or NB_Q8_K: how the tokens were quantized */
    int8_t *q;            /* [ng][nb][8][64] */
    int32_t *sum;         /* [ng][nb][16] */
    float *fsum;          /* [ng][nb][16] the same sums as floats */
    int32_t *sum16;       /* [ng][nb][2][16] sums of k 0..15 and 16..31 of the block */
    float *d;             /* [ng][nb][16] (Q8_K: the super-block's scale, repeated) */
} nb_actpack;

/* Bytes of the pack for n tokens of row length K. */
size_t nb_actpack_bytes(int64_t K, int64_t n);
/* Scratch each thread filling groups needs (one quantized row). */
size_t nb_actpack_scratch_bytes(int64_t K);
/* (nb_actpack_group uses the process's dispatch table's choice.) */
/* Lays the pack out in mem (64-byte aligned); then every token group g is
 * filled by nb_actpack_group (groups are independent: threads may split
 * them), `row` being nb_actpack_scratch_bytes(K) of the caller's scratch. */
void nb_actpack_init(nb_actpack *ap, void *mem, int64_t n, int64_t K, nb_dtype act);
void nb_actpack_group(nb_actpack *ap, const float *X, int64_t g, void *row);
/* The scalar definition, and the AVX-512 one nb_actpack_group uses where it can. */
void nb_actpack_group_ref(nb_actpack *ap, const float *X, int64_t g, void *row);
/* Zeros group g (its tokens past ap->n multiply as zeros). */
void nb_actpack_clear_group(nb_actpack *ap, int64_t g);
void nb_actpack_group_avx512(nb_actpack *ap, const float *X, int64_t g);

/* Token groups g0 .. g0+ng-1 of a pack, as a pack of their own (views into
 * the same memory; token 0 of the view is token 16*g0 of the whole). */
nb_actpack nb_actpack_slice(const nb_actpack *ap, int64_t g0, int64_t ng);

typedef void (*nb_repack_gemm_fn)(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                                  int64_t ldy);
/* The int8 GEMM of a repacked type and the activation format it wants. */
typedef struct nb_rgemm {
    nb_repack_gemm_fn run;
    nb_dtype act;  /* NB_Q8_0P or NB_Q8_K */
    int tile_rows; /* rows per tile: a call's row count best a multiple of it */
    int64_t beats_rows_from; /* batches from which it is faster than the type's rows-in-lanes kernel
                                (kernels/qdot.h vec_dot_rows), which the matmul then skips; 0: never */
} nb_rgemm;
/* NULL when the type has none (or this CPU lacks AVX2; AVX-512 VNNI, AVX-VNNI
 * or AVX2 kernels by what it has, and for the four types the AMX ones at
 * NB_ISA_AMX where the OS granted the tile unit). */
const nb_rgemm *nb_repack_gemm(nb_dtype t, nb_isa max_isa);
/* The AMX GEMMs (kernels/x86/gemm_amx.c: Q4_0R, Q8_0R, Q4_KR, Q6_KR, W8R, W4G*R), tiles of 16 rows; NULL when this
 * CPU has no usable AMX-INT8 or t has none. Bit-identical to the AVX-512
 * VNNI GEMMs. */
const nb_rgemm *nb_repack_gemm_amx(nb_dtype t);
NB_RGEMM_DECL(nb_q4_0r_gemm_amx);
NB_RGEMM_DECL(nb_q8_0r_gemm_amx);
NB_RGEMM_DECL(nb_q4_kr_gemm_amx);
NB_RGEMM_DECL(nb_q6_kr_gemm_amx);
NB_RGEMM_DECL(nb_w8r_gemm_amx);
NB_RGEMM_DECL(nb_w4g32r_gemm_amx);
NB_RGEMM_DECL(nb_w4g64r_gemm_amx);
NB_RGEMM_DECL(nb_w4g128r_gemm_amx);
/* y[t*ldy + r] for rows r < nr (weights at w + r*row_bytes) and all tokens. */
void nb_q4_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);
void nb_q8_0r_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);
void nb_q4_kr_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);
void nb_q6_kr_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy);

#endif
