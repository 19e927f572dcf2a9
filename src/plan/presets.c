/* Presets for the memory account: model architectures (the numbers of each
 * model's published config.json; `source` names the file) with the
 * published parameter totals, GPU cards (nominal capacity, FP8 path,
 * compute capability), and the names of weight schemes and KV types.
 *
 * GPU capacities are the spec-sheet size read as GiB (N × 2^30 bytes): the
 * HBM / GDDR stacks are binary-sized, and the driver reports slightly less
 * as usable; give --gpu-mem for an exact figure. */
#include <string.h>
#include <strings.h>

#include "plan/plan.h"

#define HF(repo) "https://huggingface.co/" repo "/blob/main/config.json"

/* name, arch, source, vocab, hidden, layers, heads, kv heads, head_dim, v_head_dim, ff,
 * tied, qkv_bias, qk_norm, norms/layer, experts, used, ff_expert, ff_shared, dense layers,
 * kv_lora, q_lora, rope, nope, sliding, alternate, ctx, published total (the rounded figure the
 * Hugging Face model page shows for the safetensors checkpoint; the tests compare the count computed
 * from the architecture against it within 0.5%) */
#define DENSE(id, arch, repo, V, H, L, nh, nkv, hd, ff, tied, bias, qkn, norms, ctx, pub) \
    {id, arch, HF(repo), V, H, L, nh, nkv, hd, 0, ff, tied, bias, qkn, norms, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, ctx, pub}

static const nb_plan_model models[] = {
    DENSE("llama-2-7b", "llama", "meta-llama/Llama-2-7b-hf", 32000, 4096, 32, 32, 32, 128, 11008, false, false, false, 2, 4096, 6740000000LL),
    DENSE("llama-2-13b", "llama", "meta-llama/Llama-2-13b-hf", 32000, 5120, 40, 40, 40, 128, 13824, false, false, false, 2, 4096, 13000000000LL),
    DENSE("llama-2-70b", "llama", "meta-llama/Llama-2-70b-hf", 32000, 8192, 80, 64, 8, 128, 28672, false, false, false, 2, 4096, 69000000000LL),
    DENSE("llama-3.1-8b", "llama", "meta-llama/Llama-3.1-8B", 128256, 4096, 32, 32, 8, 128, 14336, false, false, false, 2, 131072, 8030000000LL),
    DENSE("llama-3.1-70b", "llama", "meta-llama/Llama-3.1-70B", 128256, 8192, 80, 64, 8, 128, 28672, false, false, false, 2, 131072, 70600000000LL),
    DENSE("llama-3.1-405b", "llama", "meta-llama/Llama-3.1-405B", 128256, 16384, 126, 128, 8, 128, 53248, false, false, false, 2, 131072, 406000000000LL),
    DENSE("llama-3.2-1b", "llama", "meta-llama/Llama-3.2-1B", 128256, 2048, 16, 32, 8, 64, 8192, true, false, false, 2, 131072, 1240000000LL),
    DENSE("llama-3.2-3b", "llama", "meta-llama/Llama-3.2-3B", 128256, 3072, 28, 24, 8, 128, 8192, true, false, false, 2, 131072, 3210000000LL),
    /* v0.3: vocab 32768, no sliding window (v0.1 had vocab 32000, window 4096) */
    DENSE("mistral-7b", "mistral", "mistralai/Mistral-7B-v0.3", 32768, 4096, 32, 32, 8, 128, 14336, false, false, false, 2, 32768, 7250000000LL),
    {"mixtral-8x7b", "mixtral", HF("mistralai/Mixtral-8x7B-v0.1"), 32000, 4096, 32, 32, 8, 128, 0, 14336, false, false, false, 2,
     8, 2, 14336, 0, 0, 0, 0, 0, 0, 0, false, 32768, 46700000000LL},
    DENSE("qwen2.5-0.5b", "qwen2", "Qwen/Qwen2.5-0.5B", 151936, 896, 24, 14, 2, 64, 4864, true, true, false, 2, 32768, 494000000LL),
    DENSE("qwen2.5-1.5b", "qwen2", "Qwen/Qwen2.5-1.5B", 151936, 1536, 28, 12, 2, 128, 8960, true, true, false, 2, 32768, 1540000000LL),
    DENSE("qwen2.5-7b", "qwen2", "Qwen/Qwen2.5-7B", 152064, 3584, 28, 28, 4, 128, 18944, false, true, false, 2, 32768, 7620000000LL),
    DENSE("qwen2.5-14b", "qwen2", "Qwen/Qwen2.5-14B", 152064, 5120, 48, 40, 8, 128, 13824, false, true, false, 2, 32768, 14770000000LL),
    DENSE("qwen2.5-32b", "qwen2", "Qwen/Qwen2.5-32B", 152064, 5120, 64, 40, 8, 128, 27648, false, true, false, 2, 32768, 32800000000LL),
    DENSE("qwen2.5-72b", "qwen2", "Qwen/Qwen2.5-72B", 152064, 8192, 80, 64, 8, 128, 29568, false, true, false, 2, 32768, 72700000000LL),
    DENSE("qwen3-8b", "qwen3", "Qwen/Qwen3-8B", 151936, 4096, 36, 32, 8, 128, 12288, false, false, true, 2, 40960, 8190000000LL),
    DENSE("qwen3-32b", "qwen3", "Qwen/Qwen3-32B", 151936, 5120, 64, 64, 8, 128, 25600, false, false, true, 2, 40960, 32800000000LL),
    {"qwen3-30b-a3b", "qwen3_moe", HF("Qwen/Qwen3-30B-A3B"), 151936, 2048, 48, 32, 4, 128, 0, 6144, false, false, true, 2,
     128, 8, 768, 0, 0, 0, 0, 0, 0, 0, false, 40960, 30500000000LL},
    /* MLA: kv_lora_rank 512, q_lora_rank none, qk_rope 64, qk_nope 128, v_head 128; layer 0 dense
     * (first_k_dense_replace 1); 2 shared experts of 1408 = 2816 */
    {"deepseek-v2-lite", "deepseek_v2", HF("deepseek-ai/DeepSeek-V2-Lite"), 102400, 2048, 27, 16, 16, 192, 128, 10944, false,
     false, false, 2, 64, 6, 1408, 2816, 1, 512, 0, 64, 128, 0, false, 163840, 15700000000LL},
    /* gemma2: 4 norms per layer, tied, window 4096 on every other layer */
    {"gemma-2-9b", "gemma2", HF("google/gemma-2-9b"), 256000, 3584, 42, 16, 8, 256, 0, 14336, true, false, false, 4,
     0, 0, 0, 0, 0, 0, 0, 0, 0, 4096, true, 8192, 9240000000LL},
    {"gemma-2-27b", "gemma2", HF("google/gemma-2-27b"), 256000, 4608, 46, 32, 16, 128, 0, 36864, true, false, false, 4,
     0, 0, 0, 0, 0, 0, 0, 0, 0, 4096, true, 8192, 27200000000LL},
};

#define GIB_U (1ull << 30)
/* What the CUDA driver reports as total memory (vLLM's total_gpu_memory),
 * read off the startup logs cited in docs/plan.md: H100 80GB 79.22 GiB
 * (vllm#10511), L40S 44.42 GiB, RTX 3090 23.58 GiB (vllm#10517), RTX 4090
 * 23.55 GiB (vllm#11550, #13061). nvlink: SXM / NVSwitch boards, where NCCL
 * keeps NVLink buffers under tensor parallelism. */
#define USABLE(gib) ((uint64_t)((gib) * 1073741824.0 + 0.5))
static const nb_plan_gpu gpus[] = {
    {"v100-16g", "NVIDIA V100 16GB", 16 * GIB_U, false, 7.0, false, 0},
    {"v100-32g", "NVIDIA V100 32GB", 32 * GIB_U, false, 7.0, false, 0},
    {"t4-16g", "NVIDIA T4 16GB", 16 * GIB_U, false, 7.5, false, 0},
    {"a10-24g", "NVIDIA A10 24GB", 24 * GIB_U, false, 8.6, false, 0},
    {"a10g-24g", "NVIDIA A10G 24GB", 24 * GIB_U, false, 8.6, false, 0},
    {"rtx3090-24g", "NVIDIA GeForce RTX 3090 24GB", 24 * GIB_U, false, 8.6, false, USABLE(23.58)},
    {"a100-40g", "NVIDIA A100 40GB", 40 * GIB_U, false, 8.0, true, 0},
    {"a100-80g", "NVIDIA A100 80GB", 80 * GIB_U, false, 8.0, true, 0},
    {"l4-24g", "NVIDIA L4 24GB", 24 * GIB_U, true, 8.9, false, 0},
    {"l40s-48g", "NVIDIA L40S 48GB", 48 * GIB_U, true, 8.9, false, USABLE(44.42)},
    {"rtx4090-24g", "NVIDIA GeForce RTX 4090 24GB", 24 * GIB_U, true, 8.9, false, USABLE(23.55)},
    {"rtx5090-32g", "NVIDIA GeForce RTX 5090 32GB", 32 * GIB_U, true, 12.0, false, 0},
    {"h100-80g", "NVIDIA H100 80GB", 80 * GIB_U, true, 9.0, true, USABLE(79.22)},
    {"h100-94g", "NVIDIA H100 NVL 94GB", 94 * GIB_U, true, 9.0, false, 0},
    {"h20-96g", "NVIDIA H20 96GB", 96 * GIB_U, true, 9.0, true, 0},
    {"h200-141g", "NVIDIA H200 141GB", 141 * GIB_U, true, 9.0, true, 0},
    {"b200-180g", "NVIDIA B200 180GB", 180 * GIB_U, true, 10.0, true, 0},
    {"mi300x-192g", "AMD Instinct MI300X 192GB", 192 * GIB_U, true, 0, false, 0},
    {"mi325x-256g", "AMD Instinct MI325X 256GB", 256 * GIB_U, true, 0, false, 0},
};

#define NMODELS (int)(sizeof models / sizeof models[0])
#define NGPUS (int)(sizeof gpus / sizeof gpus[0])

const nb_plan_model *nb_plan_model_preset(const char *id) {
    for (int i = 0; i < NMODELS; i++)
        if (!strcasecmp(models[i].name, id)) return &models[i];
    return NULL;
}
const nb_plan_model *nb_plan_model_preset_at(int i) { return i >= 0 && i < NMODELS ? &models[i] : NULL; }

const nb_plan_gpu *nb_plan_gpu_preset(const char *id) {
    for (int i = 0; i < NGPUS; i++)
        if (!strcasecmp(gpus[i].id, id)) return &gpus[i];
    return NULL;
}
const nb_plan_gpu *nb_plan_gpu_preset_at(int i) { return i >= 0 && i < NGPUS ? &gpus[i] : NULL; }

/* ---- schemes ------------------------------------------------------------------- */
typedef struct {
    const char *names; /* canonical first, aliases after, '|'-separated */
    nb_plan_scheme s;
} scheme_entry;

#define FLOATS(n, b) {n, {.fmt = NB_PLAN_W_FLOAT, .bits = (b) * 8, .float_bytes = (b), .activations = "A16"}}
#define QUANT(n, f, b, g, sb, zb, gi, act, isfp8)                                                               \
    {n, {.fmt = f, .bits = b, .group = g, .scale_bytes = sb, .zero_bits = zb, .g_idx = gi, .float_bytes = 2, \
         .keep_embed = true, .keep_lm_head = true, .keep_router = true, .fp8 = isfp8, .activations = act}}
#define GGUF(n, t, mix) {n, {.fmt = NB_PLAN_W_GGUF, .gguf_base = t, .gguf_mix = mix, .float_bytes = 4, .activations = "A32"}}

static const scheme_entry schemes[] = {
    FLOATS("fp16|f16|float16|half", 2),
    FLOATS("bf16|bfloat16", 2),
    FLOATS("fp32|f32|float32", 4),
    QUANT("fp8|fp8-channel|fp8-e4m3", NB_PLAN_W_FP8, 8, 0, 4, 0, false, "A8-fp8", true),
    QUANT("fp8-tensor", NB_PLAN_W_FP8, 8, -1, 4, 0, false, "A8-fp8", true),
    QUANT("fp8-block", NB_PLAN_W_FP8, 8, -2, 4, 0, false, "A8-fp8", true),
    QUANT("int8|w8a16|int8-w8a16", NB_PLAN_W_INT, 8, 0, 2, 0, false, "A16", false),
    QUANT("w8a8|int8-w8a8", NB_PLAN_W_INT, 8, 0, 4, 0, false, "A8", false),
    QUANT("int4|int4-gptq|gptq|w4a16", NB_PLAN_W_INT, 4, 128, 2, 4, true, "A16", false),
    QUANT("int4-awq|awq", NB_PLAN_W_INT, 4, 128, 2, 4, false, "A16", false),
    QUANT("int4-sym", NB_PLAN_W_INT, 4, 128, 2, 0, false, "A16", false),
    {"nf4", {.fmt = NB_PLAN_W_NF4, .bits = 4, .float_bytes = 2, .keep_embed = true, .keep_lm_head = true,
             .keep_router = true, .activations = "A16"}},
    {"nf4-dq", {.fmt = NB_PLAN_W_NF4, .bits = 4, .double_quant = true, .float_bytes = 2, .keep_embed = true,
                .keep_lm_head = true, .keep_router = true, .activations = "A16"}},
    GGUF("q8_0", NB_Q8_0, NB_RTN_MIX_NONE),
    GGUF("q6_k", NB_Q6_K, NB_RTN_MIX_NONE),
    GGUF("q5_k_m", NB_Q5_K, NB_RTN_MIX_Q5_K_M),
    GGUF("q5_k_s", NB_Q5_K, NB_RTN_MIX_Q5_K_S),
    GGUF("q4_k_m", NB_Q4_K, NB_RTN_MIX_Q4_K_M),
    GGUF("q4_k_s", NB_Q4_K, NB_RTN_MIX_Q4_K_S),
    GGUF("q3_k_l", NB_Q3_K, NB_RTN_MIX_Q3_K_L),
    GGUF("q3_k_m", NB_Q3_K, NB_RTN_MIX_Q3_K_M),
    GGUF("q3_k_s", NB_Q3_K, NB_RTN_MIX_Q3_K_S),
    GGUF("q2_k", NB_Q2_K, NB_RTN_MIX_Q2_K),
    GGUF("q5_0", NB_Q5_0, NB_RTN_MIX_NONE),
    GGUF("q5_1", NB_Q5_1, NB_RTN_MIX_NONE),
    GGUF("q4_0", NB_Q4_0, NB_RTN_MIX_NONE),
    GGUF("q4_1", NB_Q4_1, NB_RTN_MIX_NONE),
    GGUF("gguf-f16", NB_F16, NB_RTN_MIX_NONE),
    GGUF("gguf-bf16", NB_BF16, NB_RTN_MIX_NONE),
    GGUF("gguf-f32", NB_F32, NB_RTN_MIX_NONE),
};

static bool name_in(const char *names, const char *name, size_t *first_len) {
    const char *p = names;
    *first_len = strcspn(names, "|");
    while (*p) {
        size_t n = strcspn(p, "|");
        if (n == strlen(name) && !strncasecmp(p, name, n)) return true;
        p += n;
        if (*p == '|') p++;
    }
    return false;
}

nb_status nb_plan_scheme_from_name(const char *name, nb_plan_scheme *out) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t fl;
        if (name_in(schemes[i].names, name, &fl)) {
            *out = schemes[i].s;
            snprintf(out->name, sizeof out->name, "%.*s", (int)fl, schemes[i].names);
            return NB_OK;
        }
    }
    return nb_fail(NB_ERR_INVALID, "weights scheme '%s' is unknown; allowed: %s", name, nb_plan_scheme_names());
}

const char *nb_plan_scheme_names(void) {
    return "fp16, bf16, fp32, fp8 (= fp8-channel), fp8-tensor, fp8-block, int8 (= w8a16), w8a8, "
           "int4 (= int4-gptq, gptq), int4-awq (= awq), int4-sym, nf4, nf4-dq, q8_0, q6_k, q5_k_m, q5_k_s, "
           "q4_k_m, q4_k_s, q3_k_l, q3_k_m, q3_k_s, q2_k, q5_0, q5_1, q4_0, q4_1, gguf-f16, gguf-bf16, gguf-f32";
}

/* ---- KV types -------------------------------------------------------------------- */
static const struct {
    const char *names;
    nb_dtype type;
    bool fp8;
} kvs[] = {
    {"fp16|f16|float16|half", NB_F16, false}, {"bf16|bfloat16", NB_BF16, false}, {"fp32|f32|float32", NB_F32, false},
    {"fp8|fp8_e4m3|fp8-e4m3", NB_I8, true},  {"fp8_e5m2|fp8-e5m2", NB_I8, true},
    {"q8_0", NB_Q8_0, false}, {"q5_1", NB_Q5_1, false}, {"q5_0", NB_Q5_0, false}, {"q4_1", NB_Q4_1, false},
    {"q4_0", NB_Q4_0, false}, {"iq4_nl", NB_IQ4_NL, false},
};

nb_status nb_plan_kv_from_name(const char *name, nb_plan_kv *out) {
    for (size_t i = 0; i < sizeof kvs / sizeof kvs[0]; i++) {
        size_t fl;
        if (name_in(kvs[i].names, name, &fl)) {
            memset(out, 0, sizeof *out);
            snprintf(out->name, sizeof out->name, "%.*s", (int)fl, kvs[i].names);
            out->type = kvs[i].type;
            out->fp8 = kvs[i].fp8;
            return NB_OK;
        }
    }
    return nb_fail(NB_ERR_INVALID, "KV dtype '%s' is unknown; allowed: %s", name, nb_plan_kv_names());
}

const char *nb_plan_kv_names(void) { return "fp16, bf16, fp32, fp8 (= fp8_e4m3), fp8_e5m2, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl"; }
