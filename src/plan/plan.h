/* The memory account ("先算显存账"): how much memory the weights, the KV
 * cache and the fixed overhead take on each card, how many tokens the KV
 * pool holds and how many sequences of each length run at once. The same
 * functions serve `nibble plan` (any model, any GPU) and `nibble serve` (its
 * own budget, host RAM on the CPU engine), so both print the same account
 * and the same refusal.
 *
 * The three steps (seeds/000):
 *   ① budget = utilization × capacity                       (per card)
 *   ② weights per card: exact parameter counts by tensor group from the
 *      architecture, bytes per group per scheme including scale / zero-point
 *      / group metadata, the per-card share under tensor parallelism (norms,
 *      routers, the MLA latent projection and duplicated KV heads are
 *      replicated); for a GGUF file the exact tensor sizes of the file
 *   ③ pool = budget − weights − overhead; tokens = pool / KV bytes per token
 *      per card; concurrency at length L = floor(tokens / L)
 * KV bytes per token = 2 × layers × KV heads × head_dim × bytes per element
 * (row bytes of the KV type, so block scales count); MLA caches
 * layers × (kv_lora_rank + rope dim) elements; sliding-window layers are
 * counted in full (an upper bound, as engines without a hybrid KV manager
 * allocate them).
 *
 * All byte counts are exact integers (bytes); printing uses GiB = 2^30.
 * Nothing here allocates except nb_plan_config_free's tensors (owned by the
 * config) and nb_plan_json's string (owned by the caller). Thread-safe:
 * no globals besides the read-only preset tables. */
#ifndef NB_PLAN_PLAN_H
#define NB_PLAN_PLAN_H

#include <stdio.h>

#include "base/dtype.h"
#include "base/status.h"
#include "formats/arch.h"
#include "quant/rtn.h"

#define NB_PLAN_MAX_LENGTHS 16
#define NB_PLAN_MAX_VERDICTS 12
#define NB_PLAN_DEFAULT_UTILIZATION 0.90
#define NB_PLAN_DEFAULT_OVERHEAD (2ull << 30) /* CUDA context + activation peak + comm buffers, per card */
#define NB_PLAN_DEFAULT_MAX_NUM_SEQS 256
#define NB_PLAN_MAX_CARDS 4096

/* ---- model description ----------------------------------------------------
 * Numbers as in the model's config.json (transformers' names in comments). */
typedef struct nb_plan_model {
    char name[64];          /* preset id or file name */
    char arch[32];          /* model_type / general.architecture */
    char source[160];       /* where the numbers come from (config.json URL, file path) */
    int64_t n_vocab;        /* vocab_size */
    int64_t n_embd;         /* hidden_size */
    int64_t n_layer;        /* num_hidden_layers */
    int64_t n_head;         /* num_attention_heads */
    int64_t n_head_kv;      /* num_key_value_heads (absent = n_head) */
    int64_t head_dim;       /* head_dim (absent = hidden/heads); K length */
    int64_t v_head_dim;     /* V length when it differs (0 = head_dim) */
    int64_t n_ff;           /* intermediate_size (dense MLP, gated: 3 matrices) */
    bool tied;              /* tie_word_embeddings */
    bool qkv_bias;          /* q/k/v projection biases (qwen2) */
    bool qk_norm;           /* per-head q/k RMSNorm weights (qwen3) */
    int norms_per_layer;    /* 2 (llama), 4 (gemma2) */
    /* MoE: n_expert routed experts of n_ff_expert each, n_expert_used per token,
     * shared experts of n_ff_shared in total, first n_dense_layers layers dense */
    int64_t n_expert, n_expert_used, n_ff_expert, n_ff_shared, n_dense_layers;
    /* MLA (deepseek2) when kv_lora_rank > 0 */
    int64_t kv_lora_rank, q_lora_rank, qk_rope_dim, qk_nope_dim;
    int64_t sliding_window; /* 0 = none */
    bool sliding_alternate; /* only every other layer is windowed (gemma2) */
    int64_t n_ctx_train;    /* max_position_embeddings */
    int64_t published_params; /* presets: total as published (model card / safetensors), 0 = unknown */
} nb_plan_model;

/* ---- weights scheme -------------------------------------------------------- */
typedef enum nb_plan_wfmt {
    NB_PLAN_W_FLOAT = 0, /* bf16 / fp16 / fp32: every tensor `float_bytes` */
    NB_PLAN_W_FP8,       /* e4m3 linear weights + fp32 scales */
    NB_PLAN_W_INT,       /* int8 / int4 linear weights + scales (+ zero points) */
    NB_PLAN_W_NF4,       /* bitsandbytes 4-bit, absmax per 64 weights */
    NB_PLAN_W_GGUF,      /* llama.cpp ftype: per-tensor ggml types by its recipe */
} nb_plan_wfmt;

typedef struct nb_plan_scheme {
    char name[32];          /* canonical name: "fp16", "int4-awq", "q4_k_m" */
    nb_plan_wfmt fmt;
    int bits;               /* bits per quantized weight (16, 8, 4) */
    int64_t group;          /* weights per scale along the input dim: >0 group size,
                             * 0 per output channel, -1 per tensor, -2 128x128 blocks */
    int scale_bytes;        /* bytes per scale */
    int zero_bits;          /* bits per zero point (0 = symmetric) */
    bool g_idx;             /* GPTQ: int32 group index per input row */
    bool double_quant;      /* NF4: absmax quantized to 8 bits in blocks of 256 */
    int float_bytes;        /* bytes per element of unquantized tensors (2; 4 for fp32) */
    bool keep_embed, keep_lm_head, keep_router; /* left unquantized (HF schemes) */
    nb_dtype gguf_base;     /* GGUF: the ftype's base type */
    nb_rtn_mix gguf_mix;    /* GGUF: llama.cpp's recipe (quant/rtn.h), NONE for single-type ftypes */
    bool fp8;               /* needs an FP8 path to run fast */
    char activations[8];    /* "A16", "A8", "A8-fp8": informational */
} nb_plan_scheme;

/* ---- KV cache element type ------------------------------------------------ */
typedef struct nb_plan_kv {
    char name[16];          /* "fp16", "bf16", "fp32", "fp8", "fp8_e5m2", "q8_0", "q4_0" */
    nb_dtype type;          /* row bytes come from src/base/dtype.h (NB_F16, NB_Q8_0 ...) */
    bool fp8;               /* one byte fp8 (type NB_I8 used for the size) */
} nb_plan_kv;

/* ---- exact tensors (from a file) ------------------------------------------ */
typedef enum nb_plan_kind {
    NB_PLAN_T_EMBED = 0, NB_PLAN_T_LM_HEAD, NB_PLAN_T_NORM,
    NB_PLAN_T_Q, NB_PLAN_T_K, NB_PLAN_T_V, NB_PLAN_T_O,
    NB_PLAN_T_Q_BIAS, NB_PLAN_T_K_BIAS, NB_PLAN_T_V_BIAS, NB_PLAN_T_O_BIAS,
    NB_PLAN_T_MLA_A,        /* kv_a_proj_with_mqa / q_a_proj: replicated under TP */
    NB_PLAN_T_MLA_B,        /* kv_b_proj / q_b_proj: column-parallel */
    NB_PLAN_T_GATE, NB_PLAN_T_UP, NB_PLAN_T_DOWN,
    NB_PLAN_T_ROUTER,
    NB_PLAN_T_EXP_GATE, NB_PLAN_T_EXP_UP, NB_PLAN_T_EXP_DOWN,
    NB_PLAN_T_SHEXP_GATE, NB_PLAN_T_SHEXP_UP, NB_PLAN_T_SHEXP_DOWN, NB_PLAN_T_SHEXP_ROUTER,
    NB_PLAN_T_OTHER,
    NB_PLAN_T_COUNT
} nb_plan_kind;

typedef struct nb_plan_tensor {
    nb_plan_kind kind;
    int32_t layer;          /* -1 for non-layer tensors */
    uint64_t nelem;
    uint64_t nbytes;
} nb_plan_tensor;

/* Report groups (the account's ② rows). */
typedef enum nb_plan_group {
    NB_PLAN_G_EMBED = 0, NB_PLAN_G_ATTN, NB_PLAN_G_MLP, NB_PLAN_G_EXPERTS, NB_PLAN_G_SHARED,
    NB_PLAN_G_ROUTER, NB_PLAN_G_NORM, NB_PLAN_G_LM_HEAD, NB_PLAN_G_OTHER, NB_PLAN_G_COUNT
} nb_plan_group;

/* ---- the serving engine whose rules size the overhead (overhead.c) ---------
 * What an engine keeps besides weights and KV, per card, as it measures it at
 * startup: runtime memory outside the framework's allocator (CUDA context,
 * cuBLAS/NCCL workspaces), communication buffers that appear with tensor
 * parallelism, the activation peak of its profiling forward pass (which
 * depends on the profiling batch: max_num_batched_tokens), the sampler's
 * logits for the profiled sequences, a rotary cos/sin cache. Each term has a
 * formula and a source (docs/plan.md "Overhead"). */
typedef enum nb_plan_engine {
    NB_PLAN_ENGINE_FIXED = 0,   /* one constant (--overhead SIZE); the library default */
    NB_PLAN_ENGINE_VLLM_V1,     /* the CLI's default on a GPU card */
    NB_PLAN_ENGINE_VLLM_V0,
    NB_PLAN_ENGINE_SGLANG,
    NB_PLAN_ENGINE_NIBBLE,      /* this project's engine: exact; the CLI's default with --host */
} nb_plan_engine;

#define NB_PLAN_OVH_TERMS 6
typedef struct nb_plan_overhead {
    nb_plan_engine engine;
    uint64_t total;                 /* what the budget loses besides weights and KV */
    int n;                          /* terms below */
    struct {
        char name[24];              /* "runtime", "tp_comm", "activation", "sampler", "rope_cache", "fixed" */
        uint64_t bytes;
        char formula[200];          /* how it was computed, with the numbers */
        char source[120];           /* where the constants come from */
    } term[NB_PLAN_OVH_TERMS];
    int64_t profile_tokens;         /* the profiling batch (max_num_batched_tokens in effect) */
    int64_t profile_seqs;           /* sequences whose logits the profile samples */
    int64_t block_size;             /* KV tokens are counted in whole blocks of this */
    bool chunked_prefill;
    bool calibrated;                /* terms come from a measured startup log */
    bool exact;                     /* the engine's own formula (nibble) */
} nb_plan_overhead;

/* Terms measured from an engine's startup log (nb_plan_calibrate), stored in
 * a small local profile that later plans of the same engine + model + card use. */
typedef struct nb_plan_calibration {
    nb_plan_engine engine;
    char model[64];
    uint64_t capacity;              /* the card's total as the engine reported it */
    int tp;
    uint64_t runtime;               /* non-torch memory (+ communication) */
    uint64_t activation;            /* activation peak at profile_tokens */
    int64_t profile_tokens;         /* 0 = unknown: the activation is not rescaled */
    uint64_t other;                 /* the rest the log implies (sampler, graphs, compile) */
} nb_plan_calibration;

/* ---- configuration --------------------------------------------------------- */
typedef struct nb_plan_config {
    nb_plan_model model;
    nb_plan_scheme scheme;
    nb_plan_kv kv;
    nb_plan_tensor *tensors;  /* exact sizes from a file; NULL = size from model + scheme */
    int64_t n_tensors;        /* owned by the config: nb_plan_config_free */
    char device[48];          /* "h100-80g", "host", "custom" */
    uint64_t capacity;        /* bytes per card (host: RAM) */
    int fp8_native;           /* 1 yes, 0 no, -1 unknown */
    double compute_cap;       /* CUDA compute capability, 0 = unknown / not NVIDIA */
    bool host;                /* CPU engine: capacity is host RAM */
    bool cgroup_limited;      /* host: capacity is the cgroup memory limit, below MemTotal */
    int tp;                   /* tensor-parallel size */
    int gpus;                 /* cards in all (multiple of tp: data-parallel replicas) */
    double utilization;       /* 0 < u <= 1 */
    uint64_t overhead;        /* fixed overhead per card (estimate) */
    int64_t max_model_len;    /* 0 = the model's n_ctx_train */
    int64_t max_num_seqs;
    int n_lengths;            /* concurrency is reported at these lengths */
    int64_t lengths[NB_PLAN_MAX_LENGTHS];
    /* the overhead model (overhead.c) */
    nb_plan_engine engine;    /* FIXED uses `overhead` as given */
    int64_t max_num_batched_tokens; /* 0 = the engine's default */
    int chunked_prefill;      /* -1 the engine's rule, 0 off, 1 on */
    double mem_fraction_static; /* sglang; 0 = its default for the tp size */
    int64_t block_size;       /* 0 = the engine's (vLLM 16, sglang 1, nibble 16) */
    bool nvlink;              /* the card talks NVLink/NVSwitch (TP communication buffers) */
    bool usable_capacity;     /* capacity is what the driver reports (not the nominal size) */
    const nb_plan_calibration *calib; /* measured terms for this engine/model/card, or NULL */
} nb_plan_config;

/* Defaults: utilization 0.90, overhead 2 GiB, tp = gpus = 1, max_num_seqs 256,
 * fp16 weights and KV, lengths 4096/8192/32768; model and capacity unset. */
void nb_plan_config_init(nb_plan_config *c);
void nb_plan_config_free(nb_plan_config *c);

/* ---- result ------------------------------------------------------------------ */
typedef enum nb_plan_level { NB_PLAN_OK = 0, NB_PLAN_INFO, NB_PLAN_WARN, NB_PLAN_REFUSE } nb_plan_level;

typedef struct nb_plan_verdict {
    nb_plan_level level;
    char code[24];            /* stable id: "weights_over_75pct", "max_len_refused", ... */
    char text[400];           /* the reason in words and numbers */
} nb_plan_verdict;

typedef struct nb_plan_group_acc {
    uint64_t params;          /* elements */
    uint64_t bytes;           /* whole model */
    uint64_t bytes_card;      /* on each card under tp */
    uint64_t quantized;       /* elements stored quantized */
} nb_plan_group_acc;

typedef struct nb_plan_result {
    nb_plan_group_acc groups[NB_PLAN_G_COUNT];
    uint64_t params, params_active;   /* active: per token for MoE (top-k experts) */
    uint64_t weight_bytes;            /* whole model */
    uint64_t weight_bytes_card;       /* per card */
    uint64_t replicated_bytes_card;   /* of which replicated on every card */
    bool weights_exact;               /* from a file's tensor sizes */
    double bits_per_weight;           /* weight_bytes × 8 / params */
    uint64_t kv_token;                /* KV bytes per token, whole model */
    uint64_t kv_token_card;           /* KV bytes per token on each card */
    int64_t kv_heads_card;            /* KV heads held by each card (MLA: 1 latent) */
    /* ① ③ */
    uint64_t capacity, budget, overhead;
    double utilization;
    int tp, gpus, replicas;
    int64_t pool;                     /* budget − weights − overhead per card; may be negative */
    uint64_t kv_tokens;               /* tokens the pool holds (0 when pool <= 0) */
    double weights_frac;              /* weights per card / capacity */
    int64_t max_model_len, max_num_seqs;
    int n_lengths;
    int64_t lengths[NB_PLAN_MAX_LENGTHS];
    int64_t concurrency[NB_PLAN_MAX_LENGTHS]; /* per replica: floor(kv_tokens / length) */
    bool refused;
    nb_plan_overhead ovh;             /* how `overhead` was made */
    int n_verdicts;
    nb_plan_verdict verdicts[NB_PLAN_MAX_VERDICTS];
} nb_plan_result;

/* The whole account: ② from the model (or exact tensors) and scheme, then
 * nb_plan_account. NB_ERR_INVALID / NB_ERR_RANGE when the configuration is
 * inconsistent (tp not dividing heads, capacity 0, ...), message names the
 * field. A refusal is not an error: r->refused is set, status NB_OK. */
nb_status nb_plan_compute(const nb_plan_config *c, nb_plan_result *r) __attribute__((warn_unused_result));

/* Steps ① and ③ and the verdicts on given numbers: weights per card and KV
 * bytes per token per card (r's other fields are left as they are). The
 * seeds' worked examples call this directly with their own numbers. */
nb_status nb_plan_account(const nb_plan_config *c, uint64_t weights_card, uint64_t kv_token_card,
                          nb_plan_result *r) __attribute__((warn_unused_result));

/* The refusal text shared with `nibble serve` (empty when not refused).
 * Returns the length it wanted, like snprintf. */
int nb_plan_refusal_message(const nb_plan_result *r, char *buf, size_t n);

/* Parameter counts and bytes by group from the architecture (no TP). */
nb_status nb_plan_weights(const nb_plan_config *c, nb_plan_result *r) __attribute__((warn_unused_result));
/* KV bytes per token of the whole model and per card under c->tp. */
nb_status nb_plan_kv_bytes(const nb_plan_config *c, uint64_t *per_token, uint64_t *per_token_card,
                           int64_t *heads_card) __attribute__((warn_unused_result));
/* Parameter count of a model description (all experts). */
uint64_t nb_plan_model_params(const nb_plan_model *m);
/* ggml type llama.cpp's recipe gives a tensor of `kind` in `layer` whose
 * rows have n_in elements, for a GGUF scheme. */
nb_dtype nb_plan_gguf_type(const nb_plan_scheme *s, const nb_plan_model *m, nb_plan_kind kind, int64_t layer,
                           int64_t n_in);
const char *nb_plan_group_name(nb_plan_group g);
nb_plan_group nb_plan_kind_group(nb_plan_kind k);

/* ---- presets and names (presets.c) ------------------------------------------ */
typedef struct nb_plan_gpu {
    const char *id;           /* "h100-80g" */
    const char *name;         /* "NVIDIA H100 80GB (SXM)" */
    uint64_t bytes;
    bool fp8_native;
    double compute_cap;       /* 0 for non-NVIDIA */
    bool nvlink;              /* SXM / NVSwitch boards: NCCL allocates NVLink buffers under TP */
    uint64_t usable;          /* total the CUDA driver reports (vLLM's total_gpu_memory), 0 = unknown */
} nb_plan_gpu;

const nb_plan_model *nb_plan_model_preset(const char *id); /* NULL when unknown */
const nb_plan_model *nb_plan_model_preset_at(int i);     /* NULL past the end */
const nb_plan_gpu *nb_plan_gpu_preset(const char *id);
const nb_plan_gpu *nb_plan_gpu_preset_at(int i);
/* Scheme by name (fp16, bf16, fp32, fp8, fp8-tensor, fp8-channel, fp8-block,
 * int8 / w8a16, w8a8, int4 / int4-gptq / gptq, int4-awq / awq, int4-sym,
 * nf4, nf4-dq, q8_0, q6_k, q5_k_m, q5_k_s, q4_k_m, q4_k_s, q3_k_l, q3_k_m,
 * q3_k_s, q2_k, q5_0, q5_1, q4_0, q4_1, gguf-f16, gguf-bf16, gguf-f32).
 * NB_ERR_INVALID naming the allowed names. */
nb_status nb_plan_scheme_from_name(const char *name, nb_plan_scheme *out) __attribute__((warn_unused_result));
const char *nb_plan_scheme_names(void);
nb_status nb_plan_kv_from_name(const char *name, nb_plan_kv *out) __attribute__((warn_unused_result));
const char *nb_plan_kv_names(void);

/* ---- overhead.c -------------------------------------------------------------------- */
/* "vllm-v1", "vllm-v0", "sglang", "nibble", "fixed"; NB_ERR_INVALID naming them. */
nb_status nb_plan_engine_from_name(const char *name, nb_plan_engine *out) __attribute__((warn_unused_result));
const char *nb_plan_engine_name(nb_plan_engine e);
/* Fills r->ovh and returns its total for c (called by nb_plan_compute). */
nb_status nb_plan_overhead_compute(const nb_plan_config *c, nb_plan_overhead *o) __attribute__((warn_unused_result));
/* nibble's own engine: bytes its forward pass and sampler allocate per step
 * beyond weights and KV (engine/budget.c sizes its pool with exactly this). */
uint64_t nb_plan_nibble_activation(int64_t n_embd, int64_t n_head, int64_t head_dim, int64_t n_head_kv, int64_t n_ff,
                                   int64_t rope_dim, int64_t n_vocab, int64_t max_num_batched_tokens,
                                   int64_t max_num_seqs, int64_t max_model_len);
#define NB_PLAN_NIBBLE_FIXED_OVERHEAD (256ull << 20) /* runtime, tokenizer, thread stacks */
/* nibble's tokens per engine step: max_num_batched_tokens when > 0, else
 * max_num_seqs + max_prefill_tokens when a prefill share is set (> 0), else
 * max(NB_PLAN_NIBBLE_STEP_TOKENS, max_num_seqs). The engine sizes its steps
 * with it, the plan its activation term (docs/speed.md, "Serving 32
 * clients", has the measurements behind the 256). */
#define NB_PLAN_NIBBLE_STEP_TOKENS 256
int64_t nb_plan_nibble_step_tokens(int64_t max_num_batched_tokens, int64_t max_num_seqs, int64_t max_prefill_tokens);

/* What a startup log says (any field may be missing: 0 / -1). */
typedef struct nb_plan_log {
    nb_plan_engine engine;
    uint64_t total, budget, weights, non_torch, activation, kv_bytes;
    double utilization;
    int64_t kv_tokens, blocks, refused_len, refused_tokens;
    int tp;
    char text[256];                 /* the lines recognised, for the report */
} nb_plan_log;
/* Reads a vLLM (V0 or V1) or SGLang startup log; NB_ERR_INVALID naming the
 * lines it looks for when none is found. */
nb_status nb_plan_parse_log(const char *text, size_t len, nb_plan_log *out) __attribute__((warn_unused_result));
/* The overhead terms a log implies for config c (model, card, settings),
 * NB_ERR_INVALID when the log lacks the numbers needed. */
nb_status nb_plan_calibrate(const nb_plan_config *c, const nb_plan_log *log, nb_plan_calibration *out)
    __attribute__((warn_unused_result));
/* The local profile file: $NIBBLE_PLAN_PROFILES, else
 * $XDG_CONFIG_HOME/nibble/plan-profiles.json, else ~/.config/nibble/... */
nb_status nb_plan_profile_path(char *buf, size_t n) __attribute__((warn_unused_result));
/* Adds or replaces the entry for (engine, model, capacity, tp). */
nb_status nb_plan_profile_store(const char *path, const nb_plan_calibration *cal) __attribute__((warn_unused_result));
/* NB_OK with *found = false when the file or the entry is absent. */
nb_status nb_plan_profile_find(const char *path, nb_plan_engine e, const char *model, uint64_t capacity, int tp,
                               nb_plan_calibration *out, bool *found) __attribute__((warn_unused_result));

/* ---- inputs from files (plan_io.c) ------------------------------------------- */
/* A preset id, a GGUF file, an HF directory or its config.json. GGUF: model
 * from `<arch>.*` keys, exact tensor sizes, scheme "as stored" (name = the
 * file's ftype). HF: model from config.json; scheme from quantization_config
 * if present, else from torch_dtype. */
nb_status nb_plan_load_model(const char *spec, nb_plan_config *c) __attribute__((warn_unused_result));
nb_status nb_plan_model_from_hf_json(const char *json, size_t len, const char *name, nb_plan_config *c)
    __attribute__((warn_unused_result));
nb_status nb_plan_model_from_gguf(const char *path, nb_plan_config *c) __attribute__((warn_unused_result));
/* The planner's model from the model description every reader produces
 * (formats/arch.h); `path` names it (file name and source). */
void nb_plan_model_from_desc(const nb_arch_desc *d, const char *path, nb_plan_model *m);
/* MemTotal from /proc/meminfo (or `path` when not NULL, for tests). */
nb_status nb_plan_host_ram(const char *path, uint64_t *bytes) __attribute__((warn_unused_result));
/* The CPU engine as the device: host, no native FP8, capacity MemTotal or,
 * where lower, this process's cgroup memory limit (then cgroup_limited): a
 * container's budget is its limit, not the node's RAM. */
nb_status nb_plan_config_host(nb_plan_config *c) __attribute__((warn_unused_result));

/* ---- reports (plan_report.c) -------------------------------------------------- */
void nb_plan_print(const nb_plan_config *c, const nb_plan_result *r, FILE *f);
/* One JSON object with every number; malloc'd, NULL on allocation failure. */
char *nb_plan_json(const nb_plan_config *c, const nb_plan_result *r);
/* Side-by-side table of several schemes for one model and card. */
void nb_plan_print_compare(const nb_plan_config *c, const nb_plan_result *rs, const nb_plan_scheme *schemes,
                           int n, FILE *f);
char *nb_plan_json_compare(const nb_plan_config *c, const nb_plan_result *rs, const nb_plan_scheme *schemes, int n);

#endif
