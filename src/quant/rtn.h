/* Round-to-nearest quantization of a whole model (`nibble quantize`).
 *
 * A *scheme* names what to produce: any weight format of the registry
 * (qtypes.h: Q4_0 ... Q6_K, W8, W8A8, W4G32..W4G128S, NF4, FP8_E4M3/E5M2),
 * plain F32 / F16 / BF16, or one of llama-quantize's mixes (Q2_K, Q3_K_S,
 * Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M). The name Q2_K is both a
 * type and llama.cpp's Q2_K mix; as a scheme it means the mix (as in
 * llama-quantize), --pure gives Q2_K everywhere; Q3_K alone is the plain
 * type (general.file_type 11, MOSTLY_Q3_K_S, whose recipe it equals for
 * dense models below 70B). Per tensor the type is chosen in this order:
 *   1. tensors with one dimension (norms, biases, rope_freqs) stay F32;
 *   2. the first --keep PATTERN=TYPE whose glob matches the GGUF name;
 *   3. the scheme's recipe (unless `pure`): llama-quantize's
 *      llama_tensor_get_type rules for the GGUF schemes (output tensor,
 *      or token_embd when the embeddings are tied, -> Q6_K, Q8_0 when its
 *      row is not a multiple of 256; Q4_K_M / Q5_K_M put Q6_K on attn_v and
 *      ffn_down of the layers use_more_bits() selects; Q4_K_S Q5_K on the
 *      first 4 attn_v and the first 1/8 of ffn_down; Q2_K: attn_v Q4_K
 *      when n_head/n_head_kv >= 4 else Q3_K, attn_output and ffn_down Q3_K;
 *      Q3_K_M: attn_v Q5_K in the first 2 layers then Q4_K, attn_output
 *      Q4_K, ffn_down Q5_K in the first n/16 layers then Q4_K; Q3_K_L:
 *      attn_v, attn_output, ffn_down Q5_K; Q3_K_S: no change; 70B llama:
 *      attn_v Q3_K/Q4_K -> Q5_K), and for nibble's
 *      INT4 formats (W4G*, NF4) token_embd and output stay F16;
 *   4. otherwise the scheme's base type;
 * then, when the row length ne0 does not fit the type's block,
 * nb_qtype_fallback() (reported as "fallback: 704 not a multiple of 256").
 * One deviation from llama-quantize: it falls back from Q2_K / Q3_K to
 * IQ4_NL, which nibble does not implement; Q4_0 (same 4.5 bits, block 32)
 * is used instead, so such tensors differ from llama.cpp's files.
 *
 * Data: every input type the registry can dequantize is accepted (F32, F16,
 * BF16, and quantized tensors, which are dequantized first: the report's
 * `requantized` counts them). A NaN or Inf anywhere in the input is refused
 * before anything is written (one read of every tensor, on the thread pool:
 * nb_rtn_check_finite). Quantization runs row-parallel on a thread
 * pool and streams one tensor at a time into the GGUF writer, so the output
 * is never held in memory whole. The quantizers are the registry's
 * reference functions, so the bytes do not depend on the ISA or the thread
 * count, and GGUF types are byte-identical to llama-quantize's (no imatrix).
 *
 * Output metadata: every key of a GGUF input except general.file_type and
 * general.quantization_version; for other inputs the architecture keys
 * from the hyper-parameters (no tokenizer: pass --tokenizer when loading).
 * Then general.quantization_version = 2, general.file_type (llama.cpp's
 * llama_ftype number, GGUF schemes only) and nibble.quantize.scheme.
 * HF `llama` sources have their attn_q / attn_k rows permuted from "rotate
 * half" to GGUF's adjacent-pair order, as llama.cpp's converter does.
 *
 * Thread safety: each call is independent; reports are owned by the caller
 * (nb_rtn_report_free). */
#ifndef NB_QUANT_RTN_H
#define NB_QUANT_RTN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "formats/gguf.h"
#include "formats/source.h"

/* Cap on --keep rules (a named limit, quoted in errors). */
#define NB_RTN_MAX_KEEP 64

typedef enum nb_rtn_mix {
    NB_RTN_MIX_NONE = 0, /* a single base type (with the llama.cpp output rule for GGUF types) */
    NB_RTN_MIX_Q4_K_S,
    NB_RTN_MIX_Q4_K_M,
    NB_RTN_MIX_Q5_K_S,
    NB_RTN_MIX_Q5_K_M,
    NB_RTN_MIX_Q2_K,   /* llama.cpp's Q2_K ftype: the name of the type, used as the mix */
    NB_RTN_MIX_Q3_K_S,
    NB_RTN_MIX_Q3_K_M,
    NB_RTN_MIX_Q3_K_L,
} nb_rtn_mix;

/* Which of llama.cpp's per-tensor rules (llama_tensor_get_type) a 2-D
 * weight falls under. */
typedef enum nb_rtn_role {
    NB_RTN_ROLE_OTHER = 0,
    NB_RTN_ROLE_OUTPUT,      /* output.weight, or token_embd when the output is tied to it */
    NB_RTN_ROLE_ATTN_V,
    NB_RTN_ROLE_ATTN_K,
    NB_RTN_ROLE_ATTN_OUTPUT,
    NB_RTN_ROLE_ATTN_QKV,    /* fused Q/K/V */
    NB_RTN_ROLE_FFN_DOWN,
} nb_rtn_role;

typedef struct nb_rtn_where {
    int64_t i, n;     /* ATTN_V / FFN_DOWN: index of this tensor among the model's of its role, and their count */
    int64_t row_len;  /* elements per row (OUTPUT: Q8_0 when not a multiple of 256) */
    int n_gqa;        /* query heads per KV head (0: unknown) */
    int n_expert;     /* experts per MoE layer (0: dense) */
    bool is_70b;      /* a 70B llama-like model (llama.cpp's LLM_TYPE_70B) */
} nb_rtn_where;

/* llama.cpp's type for one tensor of a GGUF mix whose base type is `base`,
 * before any row-length fallback (which differs: llama.cpp falls back to
 * IQ4_NL where nibble writes Q4_0). The one implementation of these rules:
 * `nibble quantize` writes by it and `nibble plan` sizes by it. `why`
 * (may be NULL) names the rule when the type differs from base. */
nb_dtype nb_rtn_recipe_type(nb_rtn_mix mix, nb_dtype base, nb_rtn_role role, const nb_rtn_where *w, char *why,
                            size_t wn);

typedef struct nb_rtn_scheme {
    char name[16];        /* canonical spelling: "Q4_K_M", "W4G128", "F16" */
    nb_dtype base;        /* default type of 2-D weights */
    nb_rtn_mix mix;
    int32_t file_type;    /* llama.cpp llama_ftype, -1 for nibble's own formats */
} nb_rtn_scheme;

/* Parses a scheme name, case-insensitive. NB_ERR_INVALID for an unknown
 * name; the message lists every valid name. */
nb_status nb_rtn_scheme_parse(const char *name, nb_rtn_scheme *out) __attribute__((warn_unused_result));
/* Space-separated list of every valid scheme name (into buf, truncated). */
void nb_rtn_scheme_names(char *buf, size_t n);

typedef struct nb_rtn_keep {
    char pattern[128];    /* fnmatch() glob over GGUF tensor names */
    nb_dtype type;        /* F32, F16, BF16 or a registry weight format */
} nb_rtn_keep;

/* Parses "PATTERN=TYPE" (TYPE: F32, F16, BF16 or a registry weight format). */
nb_status nb_rtn_keep_parse(const char *arg, nb_rtn_keep *out) __attribute__((warn_unused_result));

struct nb_rtn_tensor;

typedef struct nb_rtn_params {
    nb_rtn_scheme scheme;
    const nb_rtn_keep *keep;  /* first match wins */
    int n_keep;               /* 0 .. NB_RTN_MAX_KEEP */
    bool pure;                /* no recipe: every 2-D weight gets scheme.base (llama-quantize --pure) */
    int n_threads;            /* <= 0: one per CPU the process may use */
    /* Calibrated quantization (imatrix, GPTQ, AWQ, SmoothQuant; quant/calib.h):
     * tensor_fn is called for every tensor before it is converted; when it
     * sets *handled it has written dst (nbytes of r->type) and *rel_rms
     * itself (and may set r->method / r->method_note), otherwise the tensor
     * is converted by RTN. meta_fn adds keys
     * after nibble.quantize.*; method names nibble.quantize.method (NULL:
     * "rtn"). All NULL for plain RTN. */
    nb_status (*tensor_fn)(void *ud, const nb_tensor *src, struct nb_rtn_tensor *r, nb_pool *pool, void *dst,
                           uint64_t nbytes, double *rel_rms, bool *handled);
    nb_status (*meta_fn)(void *ud, nb_gguf_writer *w);
    void *ud;
    const char *method;
    bool finite_checked;      /* the caller ran nb_rtn_check_source_finite on this input: not again */
} nb_rtn_params;

#define NB_RTN_WHY_MAX 96
#define NB_RTN_NAME_MAX 128 /* GGUF allows 64 */

typedef struct nb_rtn_tensor {
    char name[NB_RTN_NAME_MAX];
    int n_dims;
    int64_t ne[NB_MAX_DIMS];
    nb_dtype src_type;
    nb_dtype wanted;          /* before the row-length fallback */
    nb_dtype type;            /* written */
    char why[NB_RTN_WHY_MAX]; /* "1-D", "keep token_embd.weight=F16", "recipe: output", "fallback: ..." */
    bool fallback;
    bool permute_qk;          /* HF llama attn_q/attn_k rows reordered */
    uint64_t bytes;           /* written bytes */
    double rel_rms;           /* ||dequant(q(w)) - w|| / ||w|| (0 when lossless, NaN before quantizing) */
    double seconds;
    char method[16];          /* what rounded it: "rtn" (also plain float conversion), "rtn+imatrix", "gptq", "awq",
                               * "smoothquant" */
    char method_note[NB_RTN_WHY_MAX]; /* a calibrated run that could not apply its method as planned says why
                                       * ("GPTQ cannot write Q8_0: round-to-nearest"); "" otherwise */
} nb_rtn_tensor;

typedef struct nb_rtn_report {
    nb_rtn_scheme scheme;
    int64_t n_tensors;
    nb_rtn_tensor *tensors;
    int64_t n_requantized;    /* input tensors that were already quantized */
    int64_t n_fallback;
    uint64_t n_params;        /* all elements */
    uint64_t bytes;           /* tensor data written */
    uint64_t bytes_f16;       /* the same tensors at 2 bytes per element */
    double bits_per_weight;   /* 8 * bytes / n_params */
    double compression_vs_f16;
    double seconds;
    int n_threads;
} nb_rtn_report;

/* Chooses every tensor's type (no data is read). `out` is owned by the
 * caller (nb_rtn_report_free). */
nb_status nb_rtn_plan(const nb_source *src, const nb_rtn_params *p, nb_rtn_report *out)
    __attribute__((warn_unused_result));

/* Called after each tensor is written (progress, live table); may be NULL. */
typedef void (*nb_rtn_progress)(void *ud, const nb_rtn_report *r, int64_t i);

/* Opens `in_path` (any source), quantizes it and writes `out_path` (GGUF,
 * atomically). Every tensor is first checked for NaN / Inf
 * (nb_rtn_check_source_finite, unless p->finite_checked): a non-finite
 * weight fails with NB_ERR_INVALID before the output is created. The
 * report is filled even on failure as far as it got. */
nb_status nb_rtn_quantize(const char *in_path, const char *out_path, const nb_rtn_params *p, nb_rtn_report *out,
                          nb_rtn_progress cb, void *ud) __attribute__((warn_unused_result));

void nb_rtn_report_free(nb_rtn_report *r);

/* Converts one tensor's data to `type` (rows in parallel on `pool`, which
 * may be NULL for the calling thread only). `dst` holds exactly the bytes of
 * ne[0] x rows elements of `type`. `rel_rms` (may be NULL) receives
 * ||dequant(dst) - src|| / ||src|| (0 when src is all zeros).
 * Source types: F32, F16, BF16 or a registry format; destination types the
 * same minus activation-only formats; ne[0] must fit the destination block. */
nb_status nb_rtn_convert(const nb_tensor *src, nb_dtype type, void *dst, uint64_t dst_bytes, nb_pool *pool,
                         double *rel_rms) __attribute__((warn_unused_result));

/* NB_ERR_INVALID when a value of the tensor (dequantized row by row for
 * quantized types) is NaN or Inf; the message names the tensor, the first
 * bad row and column (element for 1-D tensors) and how many values are
 * bad. Rows are split across `pool` (may be NULL). */
nb_status nb_rtn_check_finite(const nb_tensor *t, nb_pool *pool) __attribute__((warn_unused_result));
/* nb_rtn_check_finite on every tensor of the source (the message starts with its path). */
nb_status nb_rtn_check_source_finite(const nb_source *src, nb_pool *pool) __attribute__((warn_unused_result));

/* llama.cpp's use_more_bits(i_layer, n_layers): the first and last 1/8 of
 * the layers and every third one in between. */
bool nb_rtn_use_more_bits(int i_layer, int n_layers);

#endif
