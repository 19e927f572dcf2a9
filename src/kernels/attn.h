/* Paged attention, flash style: a tile of queries (nt consecutive tokens of
 * one sequence x the nq query heads of one GQA group) against the keys and
 * values of one KV head, read through the sequence's block table from a
 * paged KV pool of any element type.
 *
 * For query head h of token i (position pos0 + i), causally:
 *     s_p = scale * (q . K_p) * ks_p      p = 0 .. pos0 + i
 *     out = sum_p softmax(s)_p * V_p * vs_p
 * (ks / vs: the per-slot, per-head scales of the 8-bit pools, else 1).
 *
 * The SIMD kernels walk the keys once per tile, NB_ATTN_KC at a time: each
 * chunk of K and V is converted to f32 once and used by every row of the
 * tile (all nt x nq query vectors), with an online softmax (running max and
 * sum per row, the partial output rescaled when the max grows), so a long
 * prompt reads its K/V once per tile of queries instead of once per token,
 * and no score buffer of context length exists. Rows are the SIMD lanes:
 * Q is transposed once per tile (query rows in lanes, scale folded in), so
 * both products broadcast one K or V element against a vector of rows and
 * the softmax needs no horizontal reductions - the same shape as the float
 * GEMM's micro-kernel.
 *
 * A tile of at most 8 rows (a decode token of a GQA group of <= 8) would
 * leave most of the AVX-512 kernel's 16 lanes empty; there each row takes
 * 16 / R lanes, one key of a group of keys each (attn_avx512.c tile_dec;
 * the AVX2 kernel the same at 8 lanes for R <= 4, attn_dec_impl.h;
 * the bf16-dot kernel too, tile_dec_bf16),
 * so such a tile sums in another order than a larger tile would: a token's
 * result can differ in the last bits with the tile it is computed in.
 *
 * nb_attn_ref is the definition (scalar, key by key, a streaming softmax
 * per row); the AVX2 (8 rows per vector) and AVX-512 (16) kernels differ
 * from it by summation order and a polynomial exp only, and are tested
 * against it. nb_attn_get picks the best one the CPU has (nb_cpu_isa(),
 * capped by max_isa). */
#ifndef NB_KERNELS_ATTN_H
#define NB_KERNELS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "base/cpu.h"

/* KV element types (model/kv.h describes the encodings). */
typedef enum nb_kv_type { NB_KVT_F32 = 0, NB_KVT_F16, NB_KVT_BF16, NB_KVT_INT8, NB_KVT_FP8 } nb_kv_type;
#define NB_KV_TYPES (NB_KVT_FP8 + 1)

/* One layer of a paged KV pool, head-major by groups of blocks: blocks
 * are grouped NB_KV_GROUP_BLOCKS at a time (the last group holds what is
 * left), and within a group each KV head's rows of all the group's blocks
 * lie together, so one head's keys over consecutive blocks are one run
 * (model/kv.h says why). Head h's row in slot s of block b is at
 * k + nb_attn_kv_off(kv, b, s, h) (v alike). */
typedef struct nb_attn_kv {
    nb_kv_type type;
    int32_t elem, head_dim, n_head_kv, block_size;
    int64_t n_blocks;     /* blocks in the pool */
    int64_t row;          /* bytes per slot of one head: head_dim * elem */
    const uint8_t *k, *v;
    const float *ks, *vs; /* [(b * block_size + s) * n_head_kv + h]; NULL: 1 */
} nb_attn_kv;

#define NB_KV_GROUP_BLOCKS 32 /* blocks per group: a head's run is up to 32 x block_size keys */

/* Bytes from the layer's start to head h's row in slot s of block b. */
static inline int64_t nb_attn_kv_off(const nb_attn_kv *kv, int64_t b, int32_t s, int h) {
    const int64_t g0 = b - b % NB_KV_GROUP_BLOCKS; /* the group's first block */
    const int64_t gn = kv->n_blocks - g0 < NB_KV_GROUP_BLOCKS ? kv->n_blocks - g0 : NB_KV_GROUP_BLOCKS;
    return ((g0 * kv->n_head_kv + h * gn + (b - g0)) * kv->block_size + s) * kv->row;
}

typedef struct nb_attn_tile {
    const nb_attn_kv *kv;
    const int32_t *blocks; /* the sequence's block table (covers pos0 + nt - 1) */
    int kvh;               /* KV head */
    int nq;                /* query heads of the group, 1..NB_ATTN_MAX_GROUP */
    int nt;                /* tokens, >= 1 */
    int32_t pos0;          /* token i sits at pos0 + i and attends to 0..pos0 + i */
    const float *q;        /* head h of token i at q + i * q_stride + h * head_dim */
    int64_t q_stride;
    float *out;            /* same layout as q, out_stride */
    int64_t out_stride;
    float scale;
    float *scratch;        /* nb_attn_scratch_floats(head_dim, nq, nt), 64-byte aligned */
    float *lse;            /* NULL, or row r = i * nq + h gets log sum_p e^(s_p) (the running
                            * max + log of the sum): what merging the outputs of tiles over
                            * disjoint key ranges needs (model/attn.c's split decode) */
} nb_attn_tile;

#define NB_ATTN_KC 16          /* keys per chunk */
#define NB_ATTN_KC_DECODE 32   /* keys per chunk of the AVX-512 decode tiles (<= 8 rows) */
#define NB_ATTN_MAX_GROUP 128  /* query heads per KV head */

typedef void (*nb_attn_fn)(const nb_attn_tile *t);

/* Floats of scratch any kernel needs for such a tile. */
size_t nb_attn_scratch_floats(int head_dim, int nq, int nt);

void nb_attn_ref(const nb_attn_tile *t);
nb_attn_fn nb_attn_avx2(void); /* NULL when not compiled */
nb_attn_fn nb_attn_avx512(void);
/* For bf16 and fp8 KV pools (other types, scales on a bf16 pool or an odd
 * head size fall back to nb_attn_avx512): the products in bf16 with
 * vdpbf16ps, about half the instructions of the f32 kernel. K and V are
 * used as stored (fp8 e4m3 values are exact in bf16); Q (times the scale)
 * and the softmax probabilities (times the fp8 slots' V scales) are rounded
 * to bf16 for the products (8 significant bits; sums, softmax, the fp8 K
 * scales and the output in f32), so it differs from nb_attn_ref by those
 * roundings, not only by summation order. NULL when not compiled or the
 * CPU lacks AVX512_BF16. */
nb_attn_fn nb_attn_avx512_bf16(void);
/* n fp8 e4m3 codes as the bf16 bits of their nb_attn_fp8_table values
 * (exact), vectorised (AVX-512F; the bf16-dot kernel's K and V rows). */
void nb_attn_fp8_to_bf16_avx512(const uint8_t *src, uint16_t *dst, int n);
/* n fp8 codes at src as f32 at dst, the AVX2 kernel's conversion (its
 * test: every code bit for bit against nb_attn_fp8_table); AVX2 CPUs only. */
void nb_attn_fp8_to_f32_avx2(const uint8_t *src, float *dst, int n);
/* The same numerics for bf16 pools with the products on the AMX tile unit
 * (attn_amx.c): tiles of more than 8 rows and head sizes that are a
 * multiple of 32; anything else goes to nb_attn_avx512_bf16. NULL when not
 * compiled or the CPU (or the OS) does not grant AMX-BF16. */
nb_attn_fn nb_attn_amx_bf16(void);
/* Any pool type's prompt tiles on the AMX tile unit in split bf16: every
 * f32 value the products take (Q times the scale, K and V of f32 / f16
 * pools, the probabilities times the V scales) as hi = bf16(x) plus lo =
 * bf16(x - hi), the products as hi.hi + hi.lo + lo.hi (about 16
 * significant bits where f32 has 24: each product within about 2^-15 of
 * its f32 value, far below f16 / fp8 storage's own rounding; bf16, int8
 * and fp8 values are exact in bf16 and take no lo half). Tiles of more
 * than 8 rows and head sizes that are a multiple of 32 up to
 * NB_ATTN_AMX_SPLIT_MAX_HD; anything else goes to nb_attn_avx512. NULL when
 * not compiled or the CPU (or the OS) does not grant AMX-BF16. */
nb_attn_fn nb_attn_amx_split(void);
/* nb_attn_amx_split for int8 pools where the int8-dot kernel is wanted for
 * the rest: the tiles the split kernel takes go to the tile unit (1.09-1.17x
 * faster than the int8 dots per tile on the Intel guest of session 29, and
 * Q is not quantized), every other tile to nb_attn_avx512_int8. NULL
 * where either is missing. */
nb_attn_fn nb_attn_amx_split_int8(void);
#define NB_ATTN_AMX_SPLIT_MAX_HD 256
/* For int8 KV pools (tiles of more than 8 rows, head sizes that are a
 * multiple of 16; anything else falls back to nb_attn_avx512): the
 * products in int8 with vpdpbusd, about a quarter of the f32 kernel's
 * multiply instructions. K and V are used as stored; each row of Q (times
 * the scale) is rounded to int8 with its own scale, and each chunk's
 * probabilities to u8 relative to the chunk's max per row (8 bits; the
 * softmax, its sums and the output in f32). NULL when not compiled or the
 * CPU lacks AVX512_VNNI. */
nb_attn_fn nb_attn_avx512_int8(void);
/* nb_attn_avx512_int8 with its decode tiles (8 rows or fewer, an even head
 * size) in nb_attn_avx512_bf16's roundings: the int8 codes are exact in
 * bf16, the K slot scales multiply the f32 scores and the V slot scales the
 * probabilities before they are rounded to bf16; Q is rounded to bf16
 * (where the prompt tiles round it to int8). NULL when not compiled or the
 * CPU lacks AVX512_VNNI or AVX512_BF16. */
nb_attn_fn nb_attn_avx512_int8_bf16(void);
/* The same at 8 rows per vector with AVX-VNNI (256-bit vpdpbusd), for
 * AVX2 CPUs without AVX-512 (falling back to nb_attn_avx2); NULL when the
 * CPU lacks AVX-VNNI. */
nb_attn_fn nb_attn_avx2_int8(void);
/* The same for AVX2 CPUs without AVX-VNNI: vpmaddubsw and vpmaddwd in
 * vpdpbusd's place, whose int16 pairs would saturate on 8-bit codes, so Q
 * is rounded to 7 bits (steps of 1/63 of the row's largest element) and
 * the probabilities to 0..127. Never NULL (built for every x86 target;
 * call it only on an AVX2 CPU). */
nb_attn_fn nb_attn_avx2_int8_madd(void);
/* Best kernel the CPU runs (nb_cpu_isa()) at or below max_isa, and its name. */
nb_attn_fn nb_attn_get(nb_isa max_isa, const char **name);

/* fp8 e4m3fn -> f32 for all 256 codes (bias 7, 3 mantissa bits, no inf,
 * 0x7f / 0xff NaN), filled once, thread-safe. */
const float *nb_attn_fp8_table(void);

/* Element i of a K or V row of type t, as f32 (no scale applied). */
float nb_attn_elem(nb_kv_type t, const uint8_t *row, int32_t i);

#endif
