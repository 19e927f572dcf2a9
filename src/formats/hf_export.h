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
 * Only F32 / F16 / BF16 source tensors are accepted (quantized sources:
 * NB_ERR_UNSUPPORTED); they are converted to `dtype` ("F32", "F16" or
 * "BF16"). Tensors with unknown GGUF names (e.g. rope_freqs.weight) are
 * skipped with a warning. The whole converted model is held in memory while
 * writing. No tokenizer files are written. */
#ifndef NB_FORMATS_HF_EXPORT_H
#define NB_FORMATS_HF_EXPORT_H

#include "formats/source.h"

/* Creates `dir` if needed; overwrites config.json and model.safetensors. */
nb_status nb_hf_export(const nb_source *src, const char *dir, const char *dtype) __attribute__((warn_unused_result));

/* The HF tensor name for a GGUF one ("blk.3.attn_q.weight" ->
 * "model.layers.3.self_attn.q_proj.weight"); false when unknown. */
bool nb_hf_name_from_gguf(const char *gguf, char *buf, size_t n);

#endif
