/* Synthetic models: deterministic random weights in the exact tensor layout
 * of a real architecture (llama, qwen2), written as a GGUF that llama.cpp
 * loads, at any size (tensors are generated one at a time while the file is
 * written, so a 1B-parameter model needs one tensor's worth of memory).
 *
 * Weights: for each tensor an independent xoshiro256** stream seeded from
 * splitmix64(seed ^ FNV-1a-64(tensor name)); normals by Box-Muller computed
 * in double with this file's own log/sin/cos (only +,-,*,/ and frexp/sqrt,
 * which IEEE 754 defines exactly), so the same seed gives the same bytes on
 * every machine and libm. Matrices ~ N(0, std^2) rounded to the weight type,
 * norms exactly 1.0, biases ~ N(0, std_bias^2) in F32.
 *
 * Vocabulary: copied from another GGUF (every tokenizer.* key), or the
 * built-in 512-token byte-level BPE (GPT-2 byte symbols 0..255, 255
 * merges of common English pieces, <|endoftext|> = 511 as BOS/EOS). */
#ifndef NB_MODEL_SYNTH_H
#define NB_MODEL_SYNTH_H

#include "formats/source.h"

typedef struct nb_synth_params {
    nb_arch arch;
    const char *name;        /* general.name */
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    uint64_t seed;
    nb_dtype wtype;          /* 2-D weights: NB_F32, NB_F16 or NB_BF16 */
    float rope_theta, norm_eps;
    bool tied;               /* no output.weight */
    const char *vocab_from;  /* GGUF to copy tokenizer.* from; NULL = built-in */
    float std_embd, std_out, std_block, std_bias;
    /* Activation outliers, as real LLMs have (--outliers N --outlier-scale S):
     * N residual channels (channel (7919 k + 13) mod n_embd for k < N) get the
     * weight S instead of 1.0 in every attn_norm and ffn_norm, so the inputs
     * of q/k/v and gate/up carry those channels S times larger. 0: none. */
    int32_t outlier_channels;
    float outlier_scale;
} nb_synth_params;

/* Built-in vocabulary size (the value of <arch>.vocab_size without vocab_from). */
#define NB_SYNTH_BUILTIN_VOCAB 512

/* The shapes of shared/models' synth-llama / synth-qwen2 (see docs/synth.md). */
void nb_synth_defaults(nb_synth_params *p, nb_arch arch);
/* Checks every field, naming it and its allowed range. */
nb_status nb_synth_validate(const nb_synth_params *p) __attribute__((warn_unused_result));
nb_status nb_synth_write(const nb_synth_params *p, const char *path) __attribute__((warn_unused_result));

/* The built-in default model (llama, dim 256, 4 layers, 8 heads, 4 KV heads,
 * ffn 768, built-in vocab, F16): its path in the user cache
 * ($XDG_CACHE_HOME/nibble, else $HOME/.cache/nibble), synthesized there on
 * first use (atomically: concurrent callers are fine). */
void nb_default_model_params(nb_synth_params *p);
nb_status nb_default_model_path(char *buf, size_t cap) __attribute__((warn_unused_result));

/* Deterministic standard normals (exposed for tests and other generators). */
typedef struct nb_synth_rng { uint64_t s[4]; } nb_synth_rng;
void nb_synth_rng_seed(nb_synth_rng *r, uint64_t seed, const char *stream_name);
uint64_t nb_synth_rng_next(nb_synth_rng *r);
/* Fills n standard normals (pairs from one Box-Muller draw; an odd tail
 * drops the second of the last pair). */
void nb_synth_normals(nb_synth_rng *r, double *out, size_t n);

#endif
