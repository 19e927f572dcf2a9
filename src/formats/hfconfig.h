/* Hugging Face config.json -> nb_arch_desc, for the architectures nibble
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
 * quantization_config that nb_hfquant_parse refuses, hidden_act other than silu, attention_bias / mlp_bias
 * true on llama/mistral, unknown rope_scaling types.
 * NB_ERR_FORMAT for missing or mistyped required fields, NB_ERR_RANGE for
 * values out of range (heads not dividing, non-positive sizes). */
#ifndef NB_FORMATS_HFCONFIG_H
#define NB_FORMATS_HFCONFIG_H

#include "formats/source.h"

#define NB_HFCONFIG_MAX_BYTES (4u << 20)

/* quantization_config (docs/formats.md "Quantized HF checkpoints"). */
typedef enum nb_hfq_method {
    NB_HFQ_NONE = 0,
    NB_HFQ_AWQ,        /* quant_method awq, version gemm: W4G<G> */
    NB_HFQ_GPTQ,       /* quant_method gptq, bits 4 (W4G<G>) or 8 (W8) */
    NB_HFQ_CT_FP8,     /* compressed-tensors float-quantized: FP8_E4M3 */
    NB_HFQ_CT_INT8,    /* compressed-tensors int-quantized: W8A8 (or W8 without activations) */
    NB_HFQ_CT_PACK,    /* compressed-tensors pack-quantized W4A16: W4G<G> */
    NB_HFQ_FP8_BLOCK,  /* quant_method fp8, weight_scale_inv per block: FP8_E4M3 */
    NB_HFQ_BNB_NF4,    /* quant_method bitsandbytes, load_in_4bit, nf4: NF4 */
} nb_hfq_method;

typedef struct nb_hf_quant {
    nb_hfq_method method;
    char method_name[32];   /* quant_method as written */
    int bits;               /* 4 or 8 */
    int group;              /* group size along the input dimension; -1 = one per output channel */
    bool sym;               /* no zero points (GPTQ sym, CT symmetric) */
    bool desc_act;          /* GPTQ: g_idx may be a permutation */
    bool gptq_v2;           /* GPTQ checkpoint_format gptq_v2: zeros stored as is */
    bool act_quant;         /* CT: input_activations present (W8A8 / FP8 dynamic or static) */
    bool act_static;        /* CT: input_activations.dynamic false (input_scale tensors) */
    bool weight_per_tensor; /* CT: weights strategy "tensor" */
    int block_out, block_in; /* fp8: weight_block_size */
    bool bnb_double;        /* bnb_4bit_use_double_quant */
    int n_ignore;           /* modules left unquantized: names, or "re:<regex>" (CT) */
    char **ignore;          /* owned; nb_hfconfig_free */
    bool ignore_substring;  /* AWQ / bnb: a name matches when it contains the entry */
    char *json;             /* the quantization_config object, compact (for inspect); owned */
} nb_hf_quant;

/* Parses a quantization_config object (a jansson json_t *, given as void *
 * so this header does not need jansson); `name` is used in messages. */
nb_status nb_hfquant_parse(const void *qc, const char *name, nb_hf_quant *out) __attribute__((warn_unused_result));
void nb_hfquant_free(nb_hf_quant *q);
/* True when the HF module name (e.g. "model.layers.0.mlp.down_proj") is in the ignore list. */
bool nb_hfquant_ignored(const nb_hf_quant *q, const char *module);

/* quantization_config as the planner reads it (NB_ARCH_PLAN): the scheme a
 * checkpoint was stored with, leniently; nb_hfquant_parse is the strict
 * reader the loader uses. */
typedef struct nb_hf_quant_hint {
    char method[32];     /* quant_method; "" when config.json has none */
    int64_t bits;        /* awq bits | w_bit, gptq bits (4); compressed-tensors weights.num_bits (8) */
    int64_t group;       /* awq group_size | q_group_size, gptq group_size (128); compressed-tensors:
                          * strategy group -> group_size (128), tensor -> -1, else 0 */
    bool zero_point;     /* awq zero_point (true); compressed-tensors: not symmetric */
    bool fp8_block;      /* fp8: weight_block_size present */
    char ct_type[16];    /* compressed-tensors weights.type ("int", "float"; "" absent) */
    char ct_strategy[16]; /* compressed-tensors weights.strategy ("" absent) */
    bool ct_act;         /* compressed-tensors input_activations is an object */
    bool bnb_8bit;       /* bitsandbytes load_in_8bit */
    bool bnb_double;     /* bitsandbytes bnb_4bit_use_double_quant */
} nb_hf_quant_hint;

typedef struct nb_hf_config {
    nb_arch_desc hp;
    nb_hf_quant quant;       /* method NB_HFQ_NONE when config.json has none; nb_hfconfig_free */
    char torch_dtype[16];    /* "bfloat16", "float16", "float32"; "" when absent */
    int32_t bos_token_id;    /* -1 when absent */
    int32_t eos_token_id;    /* -1 when absent; the first one when a list */
    nb_hf_quant_hint qhint;  /* NB_ARCH_PLAN only */
} nb_hf_config;

/* Parses config.json text for the engine (NB_ARCH_RUN); `name` is used in
 * messages (the file path). */
nb_status nb_hfconfig_parse(const char *json, size_t len, const char *name, nb_hf_config *out)
    __attribute__((warn_unused_result));
nb_status nb_hfconfig_parse_mode(const char *json, size_t len, const char *name, nb_arch_read mode, nb_hf_config *out)
    __attribute__((warn_unused_result));
/* Reads and parses a config.json file (capped at NB_HFCONFIG_MAX_BYTES). */
nb_status nb_hfconfig_load(const char *path, nb_hf_config *out) __attribute__((warn_unused_result));
/* Frees what a successful parse allocated (the quantization_config). */
void nb_hfconfig_free(nb_hf_config *c);

#endif
