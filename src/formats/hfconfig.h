/* Hugging Face config.json -> nb_hparams, for the architectures nibble
 * runs: model_type "llama", "mistral" (both NB_ARCH_LLAMA) and "qwen2"
 * (NB_ARCH_QWEN2, q/k/v biases).
 *
 * Fields read (transformers' names): hidden_size, num_hidden_layers,
 * num_attention_heads, intermediate_size, vocab_size (required);
 * num_key_value_heads (absent = num_attention_heads), head_dim (absent or
 * null = hidden_size / num_attention_heads), rms_norm_eps (default 1e-6),
 * rope_theta (default 10000), max_position_embeddings (defaults: llama 2048,
 * mistral 131072, qwen2 32768), tie_word_embeddings (default false),
 * rope_scaling (null, {"rope_type"|"type": "default" | "linear" (factor) |
 * "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings)}; others refused), sliding_window
 * (mistral: recorded; qwen2: only when use_sliding_window is true; 0 = none),
 * torch_dtype, bos_token_id, eos_token_id (first of a list).
 *
 * Refused with NB_ERR_UNSUPPORTED and a message naming the field:
 * other model_types (the message lists the supported ones), a
 * quantization_config, hidden_act other than silu, attention_bias / mlp_bias
 * true on llama/mistral, unknown rope_scaling types.
 * NB_ERR_FORMAT for missing or mistyped required fields, NB_ERR_RANGE for
 * values out of range (heads not dividing, non-positive sizes). */
#ifndef NB_FORMATS_HFCONFIG_H
#define NB_FORMATS_HFCONFIG_H

#include "formats/source.h"

#define NB_HFCONFIG_MAX_BYTES (4u << 20)

typedef struct nb_hf_config {
    nb_hparams hp;
    char torch_dtype[16];    /* "bfloat16", "float16", "float32"; "" when absent */
    int32_t bos_token_id;    /* -1 when absent */
    int32_t eos_token_id;    /* -1 when absent; the first one when a list */
} nb_hf_config;

/* Parses config.json text; `name` is used in messages (the file path). */
nb_status nb_hfconfig_parse(const char *json, size_t len, const char *name, nb_hf_config *out)
    __attribute__((warn_unused_result));
/* Reads and parses a config.json file (capped at NB_HFCONFIG_MAX_BYTES). */
nb_status nb_hfconfig_load(const char *path, nb_hf_config *out) __attribute__((warn_unused_result));

#endif
