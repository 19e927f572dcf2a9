/* One model description and one per-architecture table.
 *
 * nb_arch_desc is what every reader produces: GGUF metadata
 * (nb_arch_desc_from_gguf: the `<arch>.*` keys), an HF config.json
 * (formats/hfconfig.h, a "text_config" object included) and a llama2.c
 * header (formats/source_llama2c.c). The engine's model (src/model) and the
 * planner (src/plan) both read it; it is a superset: what the forward pass
 * needs plus the MoE and MLA shapes the planner sizes.
 *
 * nb_arch_info is one row per architecture: the names GGUF and HF give it,
 * which forward pass runs it (or none: described for planning only), the
 * norm and RoPE layout, biases, embedding tying, sliding-window rules and
 * the tensor names. No chat template: one architecture serves several chat
 * formats (a `llama` file may be Llama-2-chat, Llama-3-Instruct or zephyr),
 * so the template comes from the model file, else the tokenizer's built-in
 * generic one (tokenizer/chat_template.h, docs/design.md). Adding a llama-like
 * architecture (Mistral-Nemo, Phi-3, Gemma-2, Qwen3) is one row plus what
 * is truly new (a forward-pass difference, new tensors). Name comparisons
 * elsewhere go through nb_arch_find_gguf / nb_arch_find_hf.
 *
 * The table lives in formats, the lowest layer that needs it (the file
 * readers resolve names and defaults through it); model, quant and plan
 * include this header. Thread-safe: the table is constant. */
#ifndef NB_FORMATS_ARCH_H
#define NB_FORMATS_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "formats/gguf.h"

/* The forward pass that runs an architecture (model/forward.c). */
typedef enum nb_arch { NB_ARCH_NONE = -1, NB_ARCH_LLAMA = 0, NB_ARCH_QWEN2 = 1 } nb_arch;
/* RoPE pairing: adjacent (2i, 2i+1) or rotate-half (i, i + rope_dim/2). */
typedef enum nb_rope_style { NB_ROPE_NORM = 0, NB_ROPE_NEOX = 1 } nb_rope_style;
typedef enum nb_rope_scaling {
    NB_ROPE_SCALING_NONE = 0,
    NB_ROPE_SCALING_LINEAR = 1,
    NB_ROPE_SCALING_LLAMA3 = 2,
    NB_ROPE_SCALING_OTHER = 3, /* yarn, longrope, ...: recorded for the planner, refused by the engine */
} nb_rope_scaling;
typedef enum nb_norm_type { NB_NORM_RMS = 0 } nb_norm_type;
/* How config.json's sliding_window is read. */
typedef enum nb_arch_swa {
    NB_SWA_ALWAYS = 0, /* recorded when present (mistral, gemma2, unknown models) */
    NB_SWA_FLAG,       /* only when use_sliding_window is true (qwen2, qwen2_moe, qwen3*) */
    NB_SWA_NONE,       /* the architecture has none (llama): the engine ignores the field; the
                        * planner still counts it, as vLLM reads it for any model */
} nb_arch_swa;
typedef enum nb_arch_source { NB_ARCH_SRC_GGUF = 0, NB_ARCH_SRC_HF, NB_ARCH_SRC_LLAMA2C } nb_arch_source;

/* One tensor of a layer or of the model: GGUF name (suffix after "blk.N."
 * for layer tensors) and HF name (suffix after "model.layers.N."). */
typedef enum nb_arch_role {
    NB_ROLE_NORM = 0, /* [E] */
    NB_ROLE_Q,        /* [E, n_head*head_dim] */
    NB_ROLE_KV,       /* [E, n_head_kv*head_dim] */
    NB_ROLE_O,        /* [n_head*head_dim, E] */
    NB_ROLE_FFN_IN,   /* gate / up [E, n_ff] */
    NB_ROLE_FFN_OUT,  /* down [n_ff, E] */
    NB_ROLE_Q_BIAS,   /* [n_head*head_dim]: only with qkv_bias */
    NB_ROLE_KV_BIAS,  /* [n_head_kv*head_dim]: only with qkv_bias */
    NB_ROLE_EMBED,    /* [E, n_vocab] (model-level) */
    NB_ROLE_OUTPUT,   /* [E, n_vocab] (model-level, absent when tied) */
    NB_ROLE_OUT_NORM, /* [E] (model-level) */
} nb_arch_role;
typedef struct nb_arch_tensor {
    const char *gguf, *hf;
    nb_arch_role role;
} nb_arch_tensor;

typedef struct nb_arch_info {
    const char *gguf;          /* general.architecture; NULL when llama.cpp files it under another name */
    const char *hf;            /* config.json model_type; NULL when HF has no such type */
    const char *hf_class;      /* "architectures" entry an export writes; NULL: not exported */
    bool prefix;               /* also matches names that start with it (qwen3_next, gemma3_text) */
    nb_arch runs;              /* forward pass; NB_ARCH_NONE: described for planning only */
    nb_norm_type norm;
    nb_rope_style gguf_rope;   /* Q/K row pairing in GGUF files (HF checkpoints are always NEOX) */
    bool qkv_bias;             /* q/k/v projections always carry biases */
    bool qk_norm;              /* per-head q/k RMSNorm */
    bool tied_default;         /* tie_word_embeddings when config.json omits it */
    int norms_per_layer;       /* RMSNorm weight vectors per layer */
    nb_arch_swa swa;
    bool swa_alternate;        /* only every other layer is windowed */
    int32_t ctx_default;       /* max_position_embeddings when config.json omits it (engine) */
    bool l80_is_70b;           /* llama.cpp types an 80-layer model of it 70B (its quantization recipe's is_70b) */
    const nb_arch_tensor *layer_tensors; /* NULL: the llama layout */
    int n_layer_tensors;
} nb_arch_info;

/* The model description (see the top of the file). Sizes as the file gives
 * them; fields a source does not have stay 0 unless noted. */
typedef struct nb_arch_desc {
    nb_arch arch;              /* forward pass (info->runs); NB_ARCH_NONE when nibble does not run it */
    char arch_name[32];        /* as the file names it: "llama", "mistral", "qwen2", "deepseek_v2" */
    const nb_arch_info *info;  /* the table row; NULL for an architecture the table does not know */
    nb_arch_source source;
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;         /* absent = n_head */
    int32_t head_dim;          /* key length per head (absent = n_embd / n_head; MLA: rope + nope) */
    int32_t v_head_dim;        /* value length when it differs (0 = head_dim) */
    int32_t n_ff;              /* dense MLP width (0 = absent; the engine requires it) */
    int32_t n_ctx_train;       /* max_position_embeddings / context_length (0 = absent for the planner) */
    float norm_eps;            /* RMSNorm epsilon */
    float rope_theta;
    int32_t rope_dim;          /* rotated dims per head (<= head_dim) */
    nb_rope_style rope_style;
    nb_rope_scaling rope_scaling;
    float rope_factor;            /* linear and llama3 */
    float rope_low_freq_factor;   /* llama3 */
    float rope_high_freq_factor;  /* llama3 */
    int32_t rope_orig_ctx;        /* llama3: original_max_position_embeddings */
    bool tied_embeddings;         /* no output.weight: logits use token_embd */
    bool qkv_bias;
    bool qk_norm;                 /* per-head q/k norms (qwen3) */
    int32_t sliding_window;       /* 0 = none; model.c caps contexts at it (no SWA kernel yet) */
    /* MoE: n_expert routed experts of n_ff_expert each, n_expert_used per
     * token, shared experts n_ff_shared wide in all, the first
     * n_dense_layers layers dense */
    int32_t n_expert, n_expert_used, n_ff_expert, n_ff_shared, n_dense_layers;
    /* MLA (deepseek2/3) when kv_lora_rank > 0 */
    int32_t kv_lora_rank, q_lora_rank, qk_rope_dim, qk_nope_dim;
    bool per_layer;               /* GGUF: some key was a per-layer array (the largest value is kept) */
} nb_arch_desc;

/* How strictly a reader takes a file. NB_ARCH_RUN (the engine, quantize,
 * export): only architectures nibble runs, every field it needs, values in
 * range, unsupported features refused with the field named. NB_ARCH_PLAN
 * (the memory account): any architecture, sizes only; fields that do not
 * change the account (rope scaling, activation, epsilon) are not checked. */
typedef enum nb_arch_read { NB_ARCH_RUN = 0, NB_ARCH_PLAN = 1 } nb_arch_read;

/* The row whose GGUF / HF name is `name` (exact, else the longest prefix
 * row); NULL when none. */
const nb_arch_info *nb_arch_find_gguf(const char *name);
const nb_arch_info *nb_arch_find_hf(const char *name);
/* All rows (for listings and tests); *n receives the count. */
const nb_arch_info *nb_arch_table(int *n);
/* The row of a forward pass, for writers that name it (synth, GGUF/HF export). */
const nb_arch_info *nb_arch_info_of(nb_arch a);
/* Comma-separated names of the architectures nibble runs, as GGUF or HF spells them. */
const char *nb_arch_supported_gguf(void);
const char *nb_arch_supported_hf(void);
/* The GGUF name writers use for `d` (a row's gguf name; for an HF-only
 * name, its forward pass's). */
const char *nb_arch_gguf_name(const nb_arch_desc *d);
/* The layer tensors of `info` (the llama layout when it has none of its own). */
const nb_arch_tensor *nb_arch_layer_tensors(const nb_arch_info *info, int *n);
/* The model-level tensors (embedding, output norm, output). */
const nb_arch_tensor *nb_arch_model_tensors(int *n);

/* Reads the `<arch>.*` keys of a GGUF file (and, for the vocabulary size
 * and embedding tying, its token_embd / output tensors). Per-layer arrays
 * give their largest value (d->per_layer is set). RUN refuses
 * architectures nibble does not run and missing required keys; PLAN reads
 * any architecture. */
nb_status nb_arch_desc_from_gguf(const nb_gguf *g, nb_arch_read mode, nb_arch_desc *d) __attribute__((warn_unused_result));

/* Checks that `d` a model the engine can run: internal
 * consistency (heads divide, dims positive and plausible, rope dims even)
 * and a known forward pass; the message names the offending field. */
nb_status nb_arch_desc_validate(const nb_arch_desc *d, const char *path) __attribute__((warn_unused_result));

#endif
