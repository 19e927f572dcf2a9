/* Quantized Hugging Face checkpoint layouts <-> nibble's block types.
 * Layouts and sources: docs/formats.md ("Quantized HF checkpoints").
 *
 * Read path: a linear layer's tensors (qweight/qzeros/scales/g_idx,
 * weight_packed/weight_scale/..., F8 weights with scales, bitsandbytes
 * quant_state) are unpacked into integer codes, per-group scales and zero
 * points (nb_hfq_unpacked) and emitted straight into W4G<G>[S] / W8 blocks,
 * or converted directly to FP8_E4M3 / W8A8 / NF4 blocks: the stored codes are
 * kept, no float detour. All inputs are little-endian raw bytes (the
 * safetensors mapping, possibly unaligned). Shapes follow PyTorch: a weight
 * has R output rows of K inputs.
 *
 * Write path (export): the inverse packers, from nibble blocks to each
 * layout's tensors. */
#ifndef NB_FORMATS_HF_QUANT_H
#define NB_FORMATS_HF_QUANT_H

#include "formats/hfconfig.h"
#include "formats/safetensors.h"

/* Integer codes + per-group parameters of one weight. */
typedef struct nb_hfq_unpacked {
    int64_t K, R;
    int bits;          /* 4 or 8 */
    int64_t n_groups;  /* groups along K */
    uint8_t *q;        /* [R][K] unsigned codes */
    int32_t *gidx;     /* [K] group of each input (0..n_groups-1) */
    float *scale;      /* [R][n_groups] */
    uint8_t *zero;     /* [R][n_groups] zero point in code units (w = scale * (q - zero)) */
} nb_hfq_unpacked;

nb_status nb_hfq_unpacked_alloc(nb_hfq_unpacked *u, int64_t K, int64_t R, int bits, int64_t n_groups)
    __attribute__((warn_unused_result));
void nb_hfq_unpacked_free(nb_hfq_unpacked *u);

/* Scale element i of a F32 / F16 / BF16 tensor (unaligned read). */
float nb_hfq_ld_scale(const void *p, int64_t i, nb_dtype t);

/* AutoAWQ GEMM: qweight I32 [K, R/8], qzeros I32 [K/G, R/8], scales F16
 * [K/G, R]. Nibble i of a word holds column 8c + AWQ_ORDER[i],
 * AWQ_ORDER = {0, 2, 4, 6, 1, 3, 5, 7}; zeros as stored. */
void nb_hfq_unpack_awq(const void *qweight, const void *qzeros, const void *scales, int64_t K, int64_t R, int G,
                       nb_hfq_unpacked *u);
/* GPTQ (bits 4 or 8, pf = 32/bits): qweight I32 [K/pf, R], input k in bits
 * bits*(k%pf) of row k/pf; qzeros I32 [ng, R/pf], column r in bits
 * bits*(r%pf); scales F16 [ng, R]; g_idx I32 [K] or NULL (= k/G). v1
 * ("gptq") stores zero-1: zero = (stored+1) mod 2^bits; gptq_v2 stores it.
 * NB_ERR_FORMAT when g_idx is out of 0..ng-1 (`what` names the module). */
nb_status nb_hfq_unpack_gptq(const void *qweight, const void *qzeros, const void *scales, const void *g_idx, int64_t K,
                             int64_t R, int bits, int64_t ng, bool v2, const char *what, nb_hfq_unpacked *u)
    __attribute__((warn_unused_result));
/* compressed-tensors pack-quantized 4-bit: weight_packed I32 [R, K/8], input
 * k in bits 4*(k%8) of word k/8, stored as signed+8; weight_scale [R, ng]
 * (F16/BF16/F32); weight_zero_point I32 [ceil(R/8), ng] packed along the
 * output dimension (row r in bits 4*(r%8) of row r/8), signed+8; NULL =
 * symmetric (zero 8). */
void nb_hfq_unpack_ct_pack(const void *packed, const void *scale, nb_dtype scale_t, const void *zp, int64_t K, int64_t R,
                           int64_t ng, nb_hfq_unpacked *u);

/* Emits W4G<G'>[S] rows (4-bit) or W8 rows (8-bit). G' is the largest of
 * 128, 64, 32 dividing K for which every aligned run of G' inputs lies in one
 * group; when none exists the inputs are sorted by group (stable) and the
 * test is repeated: *perm then receives the permutation (malloc'd, K
 * entries: stored input j = original input perm[j]; the matmul gathers the
 * activations through it), else NULL. W4G scales must be exact in fp16
 * (checked); W8 needs q - zero in -128..127 (checked). sym: zero points must
 * all be 8 and the S type is used. *type and *nbytes describe dst; dst NULL
 * = only compute them (dst is then allocated by the caller). */
nb_status nb_hfq_emit(const nb_hfq_unpacked *u, bool sym, const char *what, nb_dtype *type, void **dst, uint64_t *nbytes,
                      int32_t **perm) __attribute__((warn_unused_result));

/* FP8 E4M3 weight [R, K] with block scales (quant_method fp8) s [ceil(R/bo), ceil(K/bi)]. */
void nb_hfq_fp8_block(const void *w, const void *s, nb_dtype s_t, int64_t K, int64_t R, int bo, int bi, void *dst);
/* FP8 E4M3 or I8 weight [R, K] with one scale per row (per_tensor: scale[0]) -> FP8_E4M3 / W8 blocks. */
void nb_hfq_scaled_rows(const void *w, const void *s, nb_dtype s_t, bool per_tensor, int64_t K, int64_t R, void *dst);
/* bitsandbytes NF4: packed U8 of the flattened [R, K] weight (element 2j
 * in the HIGH nibble of byte j, 2j+1 low), absmax per 64 (f32) -> NF4 blocks. */
void nb_hfq_nf4(const void *packed, const float *absmax, int64_t K, int64_t R, void *dst);
/* Double quantization: absmax[b] = code[qabs[b]] * nested_absmax[b / nbs] + offset. */
void nb_hfq_bnb_absmax(const uint8_t *qabs, const void *nested_absmax, const void *code, int64_t n, int64_t nbs,
                       float offset, float *out);
extern const float nb_hfq_nf4_levels[16];

/* One linear layer of an HF checkpoint (module = "model.layers.0.mlp.up_proj"):
 * reads the tensors the layout implies, checks their dtypes and shapes
 * (errors name the tensor, the field and the expected value) and fills
 * `out` (GGUF name `gguf`, ne = {K, R}) with owned blocks (*owned, free
 * it) or a view of a plain F32/F16/BF16 `<module>.weight` when the module
 * is ignored or has no quantized tensors. *perm as in nb_hfq_emit.
 * mark(ctx, t) is called for every tensor consumed. */
typedef void (*nb_hfq_mark_fn)(void *ctx, const nb_st_tensor *t);
nb_status nb_hfq_load_linear(const nb_safetensors *st, const nb_hf_quant *q, const char *module, const char *gguf,
                             int64_t K, int64_t R, nb_tensor *out, void **owned, int32_t **perm, nb_hfq_mark_fn mark,
                             void *ctx) __attribute__((warn_unused_result));

#endif

/* ---- write direction (export) ------------------------------------------ */
/* Rows of a W4G<G>[S] tensor (row r of the output = source row rows[r], or r
 * when rows is NULL) -> codes, fp16-exact scales, zeros, gidx = k/G. */
nb_status nb_hfq_from_w4g(const void *data, int G, int64_t K, int64_t R, const int64_t *rows, nb_hfq_unpacked *u)
    __attribute__((warn_unused_result));
/* Inverse packers of the unpack functions above (4-bit, contiguous groups).
 * Output buffers: AWQ qweight [K, R/8] I32, qzeros [ng, R/8] I32, scales
 * [ng, R] F16; GPTQ (v1: zero-1) qweight [K/8, R], qzeros [ng, R/8],
 * scales [ng, R], g_idx [K]; compressed-tensors weight_packed [R, K/8],
 * weight_scale [R, ng] F16, weight_zero_point [ceil(R/8), ng] (zp NULL:
 * symmetric, not written). */
void nb_hfq_pack_awq(const nb_hfq_unpacked *u, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales);
void nb_hfq_pack_gptq(const nb_hfq_unpacked *u, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales, int32_t *g_idx);
void nb_hfq_pack_ct(const nb_hfq_unpacked *u, uint32_t *packed, uint16_t *scale, uint32_t *zp);

/* The tensors of an HF checkpoint (directory, config.json, .safetensors or
 * index) as the memory planner needs them: for every safetensors tensor,
 * the GGUF name of the weight it belongs to (qweight, scales, zeros, g_idx,
 * quant state all name their module's "<...>.weight"; NULL when unknown),
 * the number of weights it stands for (packed words x values per word; 0
 * for scales, zeros, g_idx and quant state) and its bytes in the file. */
typedef void (*nb_hf_storage_fn)(void *ctx, const char *gguf, uint64_t params, uint64_t bytes);
nb_status nb_hf_storage(const char *path, nb_hf_storage_fn fn, void *ctx) __attribute__((warn_unused_result));
