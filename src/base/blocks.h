/* Quantized block layouts: packed structs, one per format, with their sizes
 * asserted. They sit in base because two layers use them: quant and kernels
 * (quantize, dot products) and formats (the HF quantized-checkpoint reader
 * and writer repack AWQ/GPTQ/compressed-tensors/bnb/fp8 tensors into them). All multi-byte fields are little-endian; fp16 is IEEE binary16.
 *
 * ggml types (bit-exact with ggml-common.h, so llama.cpp files run as is):
 *   Q4_0  32 w, 18 B: fp16 d | qs[16]        byte j: w[j] low nibble, w[j+16] high; w = d*(q-8)
 *   Q4_1  32 w, 20 B: fp16 d | fp16 m | qs[16]  same nibbles; w = d*q + m
 *   Q5_0  32 w, 22 B: fp16 d | u8 qh[4] | qs[16]  bit j of qh (u32 LE) = 5th bit of w[j];
 *                     w = d*(q-16)
 *   Q5_1  32 w, 24 B: fp16 d | fp16 m | qh[4] | qs[16]; w = d*q + m
 *   Q8_0  32 w, 34 B: fp16 d | i8 qs[32]; w = d*q
 *   Q2_K 256 w, 84 B: scales[16] (lo nibble scale, hi nibble min) | qs[64] | fp16 d | fp16 dmin
 *                     weight 128h+32k+l (l<32): bits 2k..2k+1 of qs[32h+l]; group g = w/16;
 *                     w = d*(scales[g]&15)*q - dmin*(scales[g]>>4)
 *   Q3_K 256 w,110 B: hmask[32] | qs[64] | scales[12] (16 x 6-bit, packed) | fp16 d
 *                     low 2 bits as Q2_K; bit 2 = hmask[w%32] bit w/32; scale g: low
 *                     nibble of byte g (g<8) / high nibble of byte g-8, top 2 bits at
 *                     bit 2*(g/4) of byte 8+g%4; w = d*(sc6-32)*(q2 + 4*bit - 4)
 *   Q4_K 256 w,144 B: fp16 d | fp16 dmin | scales[12] (8 x 6-bit scale + 6-bit min) | qs[128]
 *                     qs chunk c (32 B) = weights 64c.. : low nibbles sub-block 2c,
 *                     high nibbles sub-block 2c+1; w = d*sc*q - dmin*m
 *   Q5_K 256 w,176 B: fp16 d | fp16 dmin | scales[12] | qh[32] | qs[128]
 *                     5th bit of weight 64c+l (l<32) is qh[l] bit 2c, of 64c+32+l bit 2c+1
 *   Q6_K 256 w,210 B: ql[128] | qh[64] | i8 scales[16] | fp16 d (last); w = d*sc*(q-32)
 *   Q8_K 256 w,292 B: f32 d | i8 qs[256] | i16 bsums[16] (sum of each 16 qs); activations only
 *
 * nibble's own formats (ids from NB_DTYPE_EXT_BASE, see base/dtype.h and quant/qtypes.h; docs/quant.md):
 *   W8     32 w, 36 B: f32 d | i8 qs[32]; w = d*q. Per-channel int8 (W8A16): the
 *                      quantizer gives every block of a row the same d = amax(row)/127.
 *   Q8_T   32 w, 36 B: same layout, activations of W8A8: one d per token (row).
 *   W4G<G> G w (G = 32, 64, 128), 4 + G/2 B: fp16 d | u8 z | u8 0 | qs[G/2]
 *                      qs = G/32 chunks of 16 B; chunk c byte j: w[32c+j] low nibble,
 *                      w[32c+j+16] high nibble (Q4_0 order per 32); w = d*(q - z).
 *                      Symmetric variants (W4G<G>S) store z = 8.
 *   NF4    64 w, 36 B: f32 absmax | qs[32]; byte j: w[j] low nibble, w[j+32] high;
 *                      w = absmax * NF4[q] (bitsandbytes' 16 normal-quantile levels)
 *   FP8_E4M3 / FP8_E5M2  32 w, 36 B: f32 d | u8 f8[32]; w = d * fp8(f8). Per-channel
 *                      (d = amax(row)/max) or per-tensor (same d everywhere).
 */
#ifndef NB_BASE_BLOCKS_H
#define NB_BASE_BLOCKS_H

#include <stdint.h>

#define NB_QK 32   /* block of the legacy ggml types and of Q8_0 activations */
#define NB_QK_K 256 /* super-block of the k-quants */
#define NB_K_SCALE_SIZE 12

typedef uint16_t nb_half; /* IEEE fp16 bits */

#define NB_PACKED __attribute__((packed))

typedef struct NB_PACKED { nb_half d; uint8_t qs[16]; } nb_block_q4_0;
typedef struct NB_PACKED { nb_half d, m; uint8_t qs[16]; } nb_block_q4_1;
typedef struct NB_PACKED { nb_half d; uint8_t qh[4]; uint8_t qs[16]; } nb_block_q5_0;
typedef struct NB_PACKED { nb_half d, m; uint8_t qh[4]; uint8_t qs[16]; } nb_block_q5_1;
typedef struct NB_PACKED { nb_half d; int8_t qs[32]; } nb_block_q8_0;

typedef struct NB_PACKED {
    uint8_t scales[16]; uint8_t qs[64]; nb_half d, dmin;
} nb_block_q2_K;
typedef struct NB_PACKED {
    uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; nb_half d;
} nb_block_q3_K;
typedef struct NB_PACKED {
    nb_half d, dmin; uint8_t scales[NB_K_SCALE_SIZE]; uint8_t qs[128];
} nb_block_q4_K;
typedef struct NB_PACKED {
    nb_half d, dmin; uint8_t scales[NB_K_SCALE_SIZE]; uint8_t qh[32]; uint8_t qs[128];
} nb_block_q5_K;
typedef struct NB_PACKED {
    uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; nb_half d;
} nb_block_q6_K;
typedef struct NB_PACKED {
    float d; int8_t qs[256]; int16_t bsums[16];
} nb_block_q8_K;

/* ours */
typedef struct NB_PACKED { float d; int8_t qs[32]; } nb_block_w8;   /* W8 and Q8_T */
typedef struct NB_PACKED { nb_half d; uint8_t z, pad; uint8_t qs[16]; } nb_block_w4g32;
typedef struct NB_PACKED { nb_half d; uint8_t z, pad; uint8_t qs[32]; } nb_block_w4g64;
typedef struct NB_PACKED { nb_half d; uint8_t z, pad; uint8_t qs[64]; } nb_block_w4g128;
typedef struct NB_PACKED { float absmax; uint8_t qs[32]; } nb_block_nf4;
typedef struct NB_PACKED { float d; uint8_t f8[32]; } nb_block_fp8;

_Static_assert(sizeof(nb_block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(nb_block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(nb_block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(nb_block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(nb_block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(nb_block_q2_K) == 84, "q2_K");
_Static_assert(sizeof(nb_block_q3_K) == 110, "q3_K");
_Static_assert(sizeof(nb_block_q4_K) == 144, "q4_K");
_Static_assert(sizeof(nb_block_q5_K) == 176, "q5_K");
_Static_assert(sizeof(nb_block_q6_K) == 210, "q6_K");
_Static_assert(sizeof(nb_block_q8_K) == 292, "q8_K");
_Static_assert(sizeof(nb_block_w8) == 36, "w8");
_Static_assert(sizeof(nb_block_w4g32) == 20, "w4g32");
_Static_assert(sizeof(nb_block_w4g64) == 36, "w4g64");
_Static_assert(sizeof(nb_block_w4g128) == 68, "w4g128");
_Static_assert(sizeof(nb_block_nf4) == 36, "nf4");
_Static_assert(sizeof(nb_block_fp8) == 36, "fp8");

/* Bytes of a W4 group of G weights (header + nibbles). */
#define NB_W4_BLOCK_BYTES(G) (4 + (G) / 2)

#endif
