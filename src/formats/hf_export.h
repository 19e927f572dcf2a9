/* Export a model source as a Hugging Face checkpoint directory:
 * config.json + model.safetensors (llama / mistral / qwen2 layouts, the
 * names of source_hf.c in reverse).
 *
 * GGUF `llama` sources and llama2.c checkpoints keep Q/K rows in Meta's
 * interleaved order (RoPE on adjacent pairs, NB_ROPE_NORM); HF keeps them in
 * "rotate half" order. For NB_ROPE_NORM sources the rows of attn_q / attn_k
 * (weights and biases) are permuted per head, the inverse of what llama.cpp's
 * HF->GGUF converter does:
 *   HF row  h*hd + j*hd/2 + i  =  source row  h*hd + 2*i + j
 *   (h = head, i in [0, hd/2), j in {0, 1}, hd = head_dim)
 * so the exported checkpoint, read back with NB_ROPE_NEOX, computes the same
 * attention scores. NB_ROPE_NEOX sources (qwen2) are written unpermuted.
 *
 * Float tensors are converted to `dtype` ("F32", "F16" or "BF16"). Tensors with unknown GGUF names (e.g. rope_freqs.weight) are
 * skipped with a warning. The whole converted model is held in memory while
 * writing. */
#ifndef NB_FORMATS_HF_EXPORT_H
#define NB_FORMATS_HF_EXPORT_H

#include "formats/source.h"

/* Creates `dir` if needed; overwrites config.json and model.safetensors.
 * (nb_hf_export_ex with dtype, tokenizer files of HF sources, 5 GB shards.) */
nb_status nb_hf_export(const nb_source *src, const char *dir, const char *dtype) __attribute__((warn_unused_result));

/* Export of quantized sources (docs/formats.md "Export"): W4G<G>[S] ->
 * AutoAWQ GEMM (default for asymmetric), GPTQ v1 (default for symmetric
 * and for files nibble quantize --method gptq wrote: its g_idx is
 * k / group_size, and quantization_config takes desc_act, static_groups
 * and damp_percent from the file's nibble.quantize.* recipe, as AutoGPTQ
 * writes an act-order model with static groups) or compressed-tensors
 * pack-quantized; W8 / W8A8 -> compressed-tensors
 * int-quantized (one scale per row); FP8_E4M3 -> float-quantized
 * (per channel); NF4 -> bitsandbytes (no double quantization). Every
 * quantized matrix must share one scheme; float matrices are listed as not
 * converted (modules_to_not_convert / ignore / llm_int8_skip_modules).
 * Tensors are sharded above max_shard_bytes (model-0000i-of-0000n +
 * model.safetensors.index.json); tokenizer files are copied from `tokenizer`
 * (a directory, or a tokenizer.json / .model file) or from an HF source's
 * directory. */
typedef struct nb_hf_export_opts {
    const char *dtype;         /* float tensors: "F32" | "F16" | "BF16"; NULL = keep each tensor's type */
    const char *layout;        /* NULL = by type; "awq" | "gptq" | "compressed-tensors" | "bitsandbytes" */
    uint64_t max_shard_bytes;  /* 0 = 5 GB */
    const char *tokenizer;     /* NULL = the source's directory when it is HF */
} nb_hf_export_opts;
nb_status nb_hf_export_ex(const nb_source *src, const char *dir, const nb_hf_export_opts *o) __attribute__((warn_unused_result));

/* The HF tensor name for a GGUF one ("blk.3.attn_q.weight" ->
 * "model.layers.3.self_attn.q_proj.weight"); false when unknown. */
bool nb_hf_name_from_gguf(const char *gguf, char *buf, size_t n);
/* The inverse ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"). */
bool nb_hf_name_from_hf(const char *hf, char *buf, size_t n);

#endif
