/* A model source: hyper-parameters + weight tensors under GGUF tensor names,
 * whatever the file format. One loader per format fills it:
 *   GGUF file                        (formats/source_gguf.c)
 *   HF directory or .safetensors     (formats/source_hf.c: config.json +
 *     model.safetensors or model.safetensors.index.json shards)
 *   llama2.c checkpoint .bin         (formats/source_llama2c.c)
 *
 * Tensor names (GGUF convention, ne in ggml order, ne[0] = input dim):
 *   token_embd.weight [n_embd, n_vocab]   output_norm.weight [n_embd]
 *   output.weight [n_embd, n_vocab] (absent when tied)
 *   blk.N.attn_norm.weight, blk.N.attn_q.weight [n_embd, n_head*head_dim],
 *   blk.N.attn_k.weight / attn_v.weight [n_embd, n_head_kv*head_dim],
 *   blk.N.attn_q.bias / attn_k.bias / attn_v.bias (qwen2),
 *   blk.N.attn_output.weight [n_head*head_dim, n_embd], blk.N.ffn_norm.weight,
 *   blk.N.ffn_gate.weight / ffn_up.weight [n_embd, n_ff], blk.N.ffn_down.weight [n_ff, n_embd]
 *
 * RoPE pairing is a property of how the Q/K weights are laid out, so the
 * source records it: GGUF `llama` files and llama2.c checkpoints rotate
 * adjacent pairs (2i, 2i+1) (NB_ROPE_NORM); HF checkpoints (and GGUF qwen2)
 * rotate (i, i + rope_dim/2) (NB_ROPE_NEOX, "rotate half"). */
#ifndef NB_FORMATS_SOURCE_H
#define NB_FORMATS_SOURCE_H

#include "formats/arch.h"
#include "formats/gguf.h"

typedef struct nb_source nb_source;
struct nb_source {
    nb_arch_desc hp;        /* the model description (formats/arch.h) */
    const char *format;     /* "gguf", "safetensors", "llama2c" */
    char *path;
    int64_t n_tensors;
    nb_tensor *tensors;     /* GGUF names; data valid until close */
    const nb_gguf *gguf;    /* GGUF sources only: the metadata (tokenizer, template) */
    void *impl;
    void (*close_impl)(nb_source *s);
    void (*release_impl)(nb_source *s, const void *p, size_t n); /* NULL: nothing to drop */
};

/* Detects the format of `path` (a file or an HF directory) and opens it. */
nb_status nb_source_open(const char *path, nb_source *out) __attribute__((warn_unused_result));
void nb_source_close(nb_source *s);
const nb_tensor *nb_source_find(const nb_source *s, const char *name);
/* After the loader has copied [p, p + n) (a tensor's data) elsewhere: drops
 * this process's pages of it where it lies in one of the source's file
 * mappings, so that the model is not held twice; memory the source owns
 * otherwise (converted tensors) is left alone. Reading the range again
 * still works (the pages come back from the file). */
void nb_source_release(nb_source *s, const void *p, size_t n);

/* Per-format openers (called by nb_source_open). */
nb_status nb_source_open_gguf(const char *path, nb_source *out) __attribute__((warn_unused_result));
nb_status nb_source_open_hf(const char *path, nb_source *out) __attribute__((warn_unused_result));
nb_status nb_source_open_llama2c(const char *path, nb_source *out) __attribute__((warn_unused_result));

#endif
