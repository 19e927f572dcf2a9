/* A loaded model: hyper-parameters and weights bound per layer, from any
 * source format (formats/source.h). Weights stay where the source put them
 * (mmap for GGUF/safetensors/llama2.c); only the small 1-D tensors (norms,
 * biases) are converted to f32 and owned here.
 *
 * Supported: llama family (Llama 2/3, TinyLlama, SmolLM, Mistral: with a
 * sliding window, contexts are capped at the window, where full attention is
 * exact) and qwen2 (q/k/v biases, tied embeddings). */
#ifndef NB_MODEL_MODEL_H
#define NB_MODEL_MODEL_H

#include "formats/source.h"

typedef struct nb_layer {
    const float *attn_norm, *ffn_norm;  /* [n_embd] */
    const float *bq, *bk, *bv;          /* biases or NULL */
    const nb_tensor *wq, *wk, *wv, *wo; /* wq {n_embd, n_head*hd}, wk/wv {n_embd, n_head_kv*hd}, wo {n_head*hd, n_embd} */
    const nb_tensor *w_gate, *w_up, *w_down;
} nb_layer;

typedef struct nb_model {
    nb_source src;
    nb_arch_desc hp;
    const nb_tensor *tok_embd;  /* {n_embd, n_vocab} */
    const nb_tensor *output;    /* {n_embd, n_vocab}; == tok_embd when tied */
    const float *output_norm;
    nb_layer *layers;
    float *rope_freq_factors;   /* NULL, or rope_dim/2 divisors (llama3 scaling) */
    float *owned;               /* backing store of the f32 norms/biases */
    int32_t max_ctx;            /* longest sequence computed exactly (sliding-window models: the window) */
    uint64_t weight_bytes;      /* bytes of all tensors */
    uint64_t n_params;
    void *resident;             /* anonymous copy of the matrices (NULL with use_mmap) */
    size_t resident_bytes;
    double load_read_s, load_repack_s; /* load time: open + parse + map; copy/repack into resident memory (0 with use_mmap) */
} nb_model;

typedef struct nb_model_params {
    /* false (default): the matrices are copied out of the file mapping into
     * anonymous memory backed by transparent huge pages - decode streams
     * every weight once per token, and 2 MiB pages read ~10% faster than the
     * page cache's 4 KiB ones (measured: 29.3 vs 26.3 GB/s, docs/performance.md).
     * true: compute straight from the mapping (faster start, shared page cache). */
    bool use_mmap;
} nb_model_params;

nb_status nb_model_load(const char *path, nb_model **out) __attribute__((warn_unused_result));
nb_status nb_model_load_ex(const char *path, const nb_model_params *p, nb_model **out)
    __attribute__((warn_unused_result));
void nb_model_free(nb_model *m);

/* Bytes of weights read per decoded token (every tensor but the embedding
 * table, of which only one row is gathered). */
uint64_t nb_model_bytes_per_token(const nb_model *m);

/* llama3 rope scaling as per-pair frequency divisors (rope_dim/2 values),
 * the form GGUF files store in rope_freqs.weight. */
void nb_rope_llama3_factors(const nb_arch_desc *hp, float *ff);

#endif
