/* The third step of the account: what a serving engine keeps besides weights
 * and KV, per card, modelled term by term after the engine's own startup
 * profiling (see plan.h and docs/plan.md "Overhead"), and the startup-log
 * reader that measures those terms (`nibble plan --calibrate LOG`).
 *
 * The constants below are facts about the engines or were fitted on the
 * published startup logs listed in docs/plan.md; each term records its
 * formula and its source so the report can print both. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define GIB_BYTES(x) ((uint64_t)llround((x) * GIB))

/* vLLM: memory outside PyTorch's allocator seen during profiling
 * ("non_torch_memory"): 0.16-0.35 GiB in the logs of docs/plan.md on one card
 * (CUDA context growth, cuBLAS workspaces); 0.35, their upper end (the
 * RTX 3090 logs of vllm#10517), since under-counting the overhead
 * over-promises KV. */
#define VLLM_RUNTIME GIB_BYTES(0.35)
/* NCCL's NVLink buffers per card under TP on NVSwitch boards: the H100 log
 * pair (vllm#10511) shows non_torch_memory going 1.79 -> 3.58 GiB from TP 1
 * to TP 2; the L40S (PCIe) TP 2 log shows none (0.30 GiB). */
#define VLLM_NVLINK_COMM GIB_BYTES(1.79)
/* vLLM V1's profile also runs the sampler over max_num_seqs dummy rows of
 * full-vocabulary logits (fp32 logits, scaled copy, softmax, top-k/top-p
 * sort values and int64 indices, logprobs): 36 bytes per logit, fitted on
 * the V1 Llama-3.1-8B / L40S log (vllm#17122) after the other terms. */
#define VLLM_V1_SAMPLER_BYTES_PER_LOGIT 36
/* SGLang measures free memory after loading: the CUDA context and NCCL are
 * already in "used"; mem_fraction_static covers weights + KV, the rest of
 * the card is left for activations and CUDA graphs. */
#define SGLANG_RUNTIME GIB_BYTES(0.30)

static const char *const engine_names[] = {"fixed", "vllm-v1", "vllm-v0", "sglang", "nibble"};

const char *nb_plan_engine_name(nb_plan_engine e) {
    return (unsigned)e < sizeof engine_names / sizeof engine_names[0] ? engine_names[e] : "?";
}

nb_status nb_plan_engine_from_name(const char *name, nb_plan_engine *out) {
    for (size_t i = 0; i < sizeof engine_names / sizeof engine_names[0]; i++)
        if (!strcmp(name, engine_names[i])) {
            *out = (nb_plan_engine)i;
            return NB_OK;
        }
    if (!strcmp(name, "vllm")) {
        *out = NB_PLAN_ENGINE_VLLM_V1;
        return NB_OK;
    }
    return nb_fail(NB_ERR_INVALID, "--engine '%s': allowed vllm-v1 (= vllm), vllm-v0, sglang, nibble, fixed", name);
}

int64_t nb_plan_nibble_step_tokens(int64_t max_num_batched_tokens, int64_t max_num_seqs, int64_t max_prefill_tokens) {
    if (max_num_batched_tokens > 0) return max_num_batched_tokens;
    if (max_prefill_tokens > 0) return max_num_seqs + max_prefill_tokens;
    return NB_MAX(NB_PLAN_NIBBLE_STEP_TOKENS, max_num_seqs);
}

uint64_t nb_plan_nibble_activation(int64_t n_embd, int64_t n_head, int64_t head_dim, int64_t n_head_kv, int64_t n_ff,
                                   int64_t rope_dim, int64_t n_vocab, int64_t max_num_batched_tokens,
                                   int64_t max_num_seqs, int64_t max_model_len) {
    /* The forward pass's f32 step buffers for every token of a step (the
     * residual and its norm, Q/K/V, the attention output, the gated MLP's two
     * inputs, rope tables), the logits rows of max_num_seqs sequences plus one,
     * and a few threads' attention-score rows of max_model_len. */
    uint64_t T = (uint64_t)max_num_batched_tokens, E = (uint64_t)n_embd, Q = (uint64_t)(n_head * head_dim),
             KV = (uint64_t)(n_head_kv * head_dim);
    uint64_t per_tok = 2 * E + (E > Q ? E : Q) + 2 * Q + 2 * KV + 2 * (uint64_t)n_ff + (uint64_t)rope_dim;
    uint64_t scores = (uint64_t)max_model_len * 4;
    return 4 * (T * per_tok + (uint64_t)max_num_seqs * (uint64_t)n_vocab + (uint64_t)n_vocab) + 8 * scores;
}

static void term(nb_plan_overhead *o, const char *name, uint64_t bytes, const char *source, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void term(nb_plan_overhead *o, const char *name, uint64_t bytes, const char *source, const char *fmt, ...) {
    if (o->n >= NB_PLAN_OVH_TERMS) return;
    snprintf(o->term[o->n].name, sizeof o->term[o->n].name, "%s", name);
    o->term[o->n].bytes = bytes;
    snprintf(o->term[o->n].source, sizeof o->term[o->n].source, "%s", source);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->term[o->n].formula, sizeof o->term[o->n].formula, fmt, ap);
    va_end(ap);
    o->total += bytes;
    o->n++;
}

/* Bytes per token of the activation peak of a vLLM profiling forward (16-bit
 * activations): the MLP's fused gate_up output (2 x ff) and its activation
 * output (ff), plus three hidden-sized buffers (residual, normed input,
 * layer output); for MoE, the routed experts' intermediates of the top-k
 * and their k down-projected outputs. Checked on the RTX 3090 pair of
 * vllm#10517: (17.98 - 17.06) GiB over 9,000 tokens = 109.8 KB/token against
 * 110.6 KB from this formula for Llama-3.1-8B. */
static uint64_t vllm_act_per_token(const nb_plan_model *m, int tp) {
    int64_t ff = m->n_expert > 0 ? m->n_expert_used * m->n_ff_expert + m->n_ff_shared : m->n_ff;
    int64_t ffc = (ff + tp - 1) / tp;
    int64_t extra = m->n_expert > 0 ? m->n_expert_used * m->n_embd : 0;
    return (uint64_t)(2 * (3 * ffc + 3 * m->n_embd + extra));
}

static uint64_t rope_cache_bytes(const nb_plan_model *m) {
    /* vLLM's rotary embedding keeps cos/sin for every position up to
     * max_position_embeddings: positions x rotary dim x 2 bytes; it shows in
     * "model weights take" (14.99 GiB for Llama-3.1-8B against 14.96 GiB of
     * tensors: 131,072 x 128 x 2 B = 32 MiB). */
    int64_t rot = m->kv_lora_rank > 0 ? m->qk_rope_dim : m->head_dim;
    return (uint64_t)(m->n_ctx_train > 0 ? m->n_ctx_train : 0) * (uint64_t)rot * 2;
}

static int64_t vllm_profile_tokens(const nb_plan_config *c, nb_plan_overhead *o, int64_t mml) {
    bool v1 = c->engine == NB_PLAN_ENGINE_VLLM_V1;
    /* V1 always chunks prefill; V0 turns it on by itself above 32K context. */
    o->chunked_prefill = v1 ? true : c->chunked_prefill >= 0 ? c->chunked_prefill == 1 : mml > 32768;
    if (c->max_num_batched_tokens > 0) return c->max_num_batched_tokens;
    if (v1) return 8192;               /* V1 API server default (vllm 0.8-0.10) */
    if (o->chunked_prefill) return 2048; /* V0 chunked prefill default (0.7+; 0.6 used 512) */
    return mml > 2048 ? mml : 2048;    /* V0 profiles one max_model_len prompt, at least 2048 */
}

nb_status nb_plan_overhead_compute(const nb_plan_config *c, nb_plan_overhead *o) {
    memset(o, 0, sizeof *o);
    o->engine = c->engine;
    const nb_plan_model *m = &c->model;
    int tp = c->tp > 0 ? c->tp : 1;
    int64_t mml = c->max_model_len > 0 ? c->max_model_len : m->n_ctx_train;
    if (mml <= 0) mml = 4096;
    /* vLLM counts whole blocks of 16; SGLang pages of 1; nibble serve prints its pool in tokens */
    o->block_size = c->block_size > 0 ? c->block_size
                    : c->engine == NB_PLAN_ENGINE_VLLM_V0 || c->engine == NB_PLAN_ENGINE_VLLM_V1 ? 16 : 1;
    char src[120];
    switch (c->engine) {
    case NB_PLAN_ENGINE_FIXED:
        term(o, "fixed", c->overhead, "--overhead (an estimate to replace with a measurement)",
             "one constant: %.2f GiB per card", (double)c->overhead / GIB);
        return NB_OK;
    case NB_PLAN_ENGINE_NIBBLE: {
        int64_t T = nb_plan_nibble_step_tokens(c->max_num_batched_tokens, c->max_num_seqs, 0);
        o->profile_tokens = T;
        o->profile_seqs = c->max_num_seqs;
        o->chunked_prefill = true;
        o->exact = true;
        uint64_t act = nb_plan_nibble_activation(m->n_embd, m->n_head, m->head_dim, m->n_head_kv, m->n_ff, m->head_dim,
                                                 m->n_vocab, T, c->max_num_seqs, mml);
        term(o, "activation", act, "src/plan/overhead.c nb_plan_nibble_activation (what nibble serve reserves)",
             "4 B x (%lld tokens x (2E + max(E,Q) + 2Q + 2KV + 2FF + rope) + %lld seqs x %lld vocab + vocab) + 8 x 4 B "
             "x %lld scores",
             (long long)T, (long long)c->max_num_seqs, (long long)m->n_vocab, (long long)mml);
        term(o, "runtime", NB_PLAN_NIBBLE_FIXED_OVERHEAD, "engine/budget.h: runtime, tokenizer, thread stacks",
             "fixed %.0f MiB", (double)NB_PLAN_NIBBLE_FIXED_OVERHEAD / (1 << 20));
        return NB_OK;
    }
    case NB_PLAN_ENGINE_SGLANG:
        term(o, "runtime", SGLANG_RUNTIME, "CUDA context + NCCL, in SGLang's 'used after load'",
             "%.2f GiB per card", (double)SGLANG_RUNTIME / GIB);
        if (tp > 1 && c->nvlink)
            term(o, "tp_comm", VLLM_NVLINK_COMM, "NCCL NVLink buffers (vllm#10511 TP1->TP2 on H100)",
                 "%.2f GiB per card on an NVSwitch board under --tp %d", (double)VLLM_NVLINK_COMM / GIB, tp);
        return NB_OK;
    case NB_PLAN_ENGINE_VLLM_V0:
    case NB_PLAN_ENGINE_VLLM_V1:
        break;
    }
    bool v1 = c->engine == NB_PLAN_ENGINE_VLLM_V1;
    if (c->calib) {
        const nb_plan_calibration *k = c->calib;
        int64_t T = vllm_profile_tokens(c, o, mml);
        o->calibrated = true;
        o->profile_tokens = T;
        term(o, "runtime", k->runtime, "measured (plan --calibrate)", "%.2f GiB from the startup log",
             (double)k->runtime / GIB);
        uint64_t act = k->activation;
        if (k->profile_tokens > 0 && T != k->profile_tokens) {
            /* the MLP part scales with the profile batch; keep the rest as measured */
            uint64_t per = vllm_act_per_token(m, tp);
            long double scaled = (long double)act + (long double)per * (long double)(T - k->profile_tokens);
            act = scaled > 0 ? (uint64_t)scaled : 0;
            term(o, "activation", act, "measured, rescaled by the MLP's bytes per token",
                 "%.2f GiB at %lld tokens %+lld tokens x %llu B", (double)k->activation / GIB,
                 (long long)k->profile_tokens, (long long)(T - k->profile_tokens), (unsigned long long)per);
        } else {
            term(o, "activation", act, "measured (plan --calibrate)", "%.2f GiB at %lld profile tokens",
                 (double)act / GIB, (long long)(k->profile_tokens ? k->profile_tokens : T));
        }
        if (k->other) term(o, "other", k->other, "measured: the rest of the log's account", "%.2f GiB", (double)k->other / GIB);
        uint64_t rc = rope_cache_bytes(m); /* inside the log's weights, outside the plan's */
        if (rc)
            term(o, "rope_cache", rc, "rotary cos/sin cache, counted in vLLM's 'model weights take'",
                 "%lld positions x %lld dims x 2 B", (long long)m->n_ctx_train,
                 (long long)(m->kv_lora_rank > 0 ? m->qk_rope_dim : m->head_dim));
        return NB_OK;
    }
    int64_t T = vllm_profile_tokens(c, o, mml);
    o->profile_tokens = T;
    o->profile_seqs = v1 ? (c->max_num_seqs > 0 && c->max_num_seqs != NB_PLAN_DEFAULT_MAX_NUM_SEQS ? c->max_num_seqs : 1024)
                         : c->max_num_seqs;
    term(o, "runtime", VLLM_RUNTIME, "non_torch_memory in the logs of docs/plan.md: 0.16-0.35 GiB, the upper end",
         "%.2f GiB per card", (double)VLLM_RUNTIME / GIB);
    if (tp > 1 && c->nvlink)
        term(o, "tp_comm", VLLM_NVLINK_COMM, "NCCL NVLink buffers (vllm#10511: 1.79 -> 3.58 GiB at TP 2 on H100)",
             "%.2f GiB per card on an NVSwitch board under --tp %d", (double)VLLM_NVLINK_COMM / GIB, tp);
    uint64_t per = vllm_act_per_token(m, tp);
    snprintf(src, sizeof src, "%s; MLP bytes/token checked on vllm#10517",
             v1 ? "V1 profiles max_num_batched_tokens (default 8192)"
                : o->chunked_prefill ? "V0 with chunked prefill profiles max_num_batched_tokens (default 2048)"
                                     : "V0 profiles max(max_model_len, 2048) tokens");
    term(o, "activation", per * (uint64_t)T, src,
         "%lld profile tokens x %llu B (2 B x (3 x ff/tp %lld + 3 x hidden %lld%s))", (long long)T,
         (unsigned long long)per,
         (long long)((m->n_expert > 0 ? m->n_expert_used * m->n_ff_expert + m->n_ff_shared : m->n_ff) / tp),
         (long long)m->n_embd, m->n_expert > 0 ? " + top-k x hidden" : "");
    if (v1) {
        uint64_t s = (uint64_t)o->profile_seqs * (uint64_t)m->n_vocab * VLLM_V1_SAMPLER_BYTES_PER_LOGIT;
        term(o, "sampler", s, "V1's dummy sampler run; 36 B/logit fitted on vllm#17122",
             "%lld seqs x %lld vocab x %d B", (long long)o->profile_seqs, (long long)m->n_vocab,
             VLLM_V1_SAMPLER_BYTES_PER_LOGIT);
    }
    uint64_t rc = rope_cache_bytes(m);
    if (rc)
        term(o, "rope_cache", rc, "rotary cos/sin cache, counted in vLLM's 'model weights take'",
             "%lld positions x %lld dims x 2 B", (long long)m->n_ctx_train,
             (long long)(m->kv_lora_rank > 0 ? m->qk_rope_dim : m->head_dim));
    return NB_OK;
}

/* ---- startup logs ------------------------------------------------------------------ */

/* The number (in GiB unless the unit says otherwise) right after `key` in
 * line, or -1. Accepts "key 1.23GiB", "key=1.23GiB", "key: 1.23 GiB",
 * "key (1.23GiB)". vLLM's "GB" in "took 14.9888 GB" is GiB as well. */
static double num_after(const char *text, const char *key, const char **end) {
    const char *p = strstr(text, key);
    if (!p) return -1;
    p += strlen(key);
    while (*p && (*p == ' ' || *p == '=' || *p == ':' || *p == '(' || *p == '\t')) p++;
    if (!isdigit((unsigned char)*p)) return -1;
    char buf[64];
    size_t n = 0;
    while ((isdigit((unsigned char)*p) || *p == '.' || *p == ',') && n + 1 < sizeof buf) {
        if (*p != ',') buf[n++] = *p;
        p++;
    }
    buf[n] = 0;
    if (end) *end = p;
    return strtod(buf, NULL);
}

static void note(nb_plan_log *l, const char *what) {
    size_t o = strlen(l->text);
    snprintf(l->text + o, sizeof l->text - o, "%s%s", o ? ", " : "", what);
}

nb_status nb_plan_parse_log(const char *text, size_t len, nb_plan_log *l) {
    memset(l, 0, sizeof *l);
    l->engine = NB_PLAN_ENGINE_VLLM_V0;
    char *t = malloc(len + 1);
    if (!t) return nb_fail(NB_ERR_NOMEM, "plan --calibrate: out of memory for a %zu-byte log", len);
    memcpy(t, text, len);
    t[len] = 0;
    double v;
    const char *e;
    /* vLLM V0 (0.6.5+): "can use total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB" */
    if ((v = num_after(t, "total_gpu_memory", &e)) >= 0) {
        l->total = GIB_BYTES(v);
        note(l, "total_gpu_memory");
    }
    if ((v = num_after(t, "gpu_memory_utilization", NULL)) >= 0) l->utilization = v;
    if ((v = num_after(t, "the current vLLM instance can use", NULL)) >= 0) l->budget = GIB_BYTES(v);
    else if ((e = strstr(t, "gpu_memory_utilization (")) && (e = strstr(e, ") =")) && (v = num_after(e, ") =", NULL)) >= 0)
        l->budget = GIB_BYTES(v);
    if ((v = num_after(t, "model weights take", NULL)) >= 0 || (v = num_after(t, "Loading model weights took", NULL)) >= 0 ||
        (v = num_after(t, "Model loading took", NULL)) >= 0) {
        l->weights = GIB_BYTES(v);
        note(l, "weights");
    }
    if ((v = num_after(t, "non_torch_memory takes", NULL)) >= 0 || (v = num_after(t, "non_torch_memory", NULL)) >= 0) {
        l->non_torch = GIB_BYTES(v);
        note(l, "non_torch_memory");
    }
    if ((v = num_after(t, "PyTorch activation peak memory takes", NULL)) >= 0 ||
        (v = num_after(t, "PyTorch activation peak memory", NULL)) >= 0) {
        l->activation = GIB_BYTES(v);
        note(l, "activation peak");
    } else if ((v = num_after(t, "peak_torch_memory", NULL)) >= 0 && l->weights) {
        /* 0.6.x: peak_torch_memory includes the weights */
        double w = (double)l->weights / GIB;
        l->activation = v > w ? GIB_BYTES(v - w) : 0;
        note(l, "peak_torch_memory");
    }
    if ((v = num_after(t, "the rest of the memory reserved for KV Cache is", NULL)) >= 0 ||
        (v = num_after(t, "available_kv_cache_memory", NULL)) >= 0 || (v = num_after(t, "kv_cache_size", NULL)) >= 0 ||
        (v = num_after(t, "Available KV cache memory", NULL)) >= 0) {
        l->kv_bytes = GIB_BYTES(v);
        note(l, "KV cache memory");
    }
    if ((v = num_after(t, "GPU KV cache size", NULL)) >= 0) {
        l->kv_tokens = (int64_t)v;
        l->engine = NB_PLAN_ENGINE_VLLM_V1;
        note(l, "GPU KV cache size (V1)");
    }
    if ((v = num_after(t, "# GPU blocks", NULL)) >= 0 || (v = num_after(t, "GPU blocks", NULL)) >= 0 ||
        (v = num_after(t, "# CUDA blocks", NULL)) >= 0) {
        l->blocks = (int64_t)v;
        note(l, "GPU blocks");
    }
    /* "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648)" */
    if ((v = num_after(t, "max seq len", NULL)) >= 0) {
        l->refused_len = (int64_t)v;
        if ((v = num_after(t, "can be stored in KV cache", NULL)) >= 0) l->refused_tokens = (int64_t)v;
        note(l, "refusal");
    }
    /* SGLang: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB" */
    if ((v = num_after(t, "KV Cache is allocated. #tokens", NULL)) >= 0) {
        l->engine = NB_PLAN_ENGINE_SGLANG;
        l->kv_tokens = (int64_t)v;
        double k = num_after(t, "K size", NULL), vv = num_after(t, "V size", NULL);
        if (k >= 0 && vv >= 0) l->kv_bytes = GIB_BYTES(k + vv);
        note(l, "SGLang KV allocation");
    }
    if ((v = num_after(t, "tensor_parallel_size", NULL)) >= 0 || (v = num_after(t, "tensor_parallel_size=", NULL)) >= 0)
        l->tp = (int)v;
    free(t);
    if (!l->text[0])
        return nb_fail(NB_ERR_INVALID,
                       "plan --calibrate: no startup account found; looked for vLLM's 'Memory profiling' lines "
                       "(total_gpu_memory, model weights take, non_torch_memory, PyTorch activation peak memory, "
                       "KV Cache), V1's 'Model loading took' / 'Available KV cache memory' / 'GPU KV cache size', "
                       "and SGLang's 'KV Cache is allocated'");
    return NB_OK;
}

nb_status nb_plan_calibrate(const nb_plan_config *c, const nb_plan_log *l, nb_plan_calibration *k) {
    memset(k, 0, sizeof *k);
    k->engine = l->engine;
    snprintf(k->model, sizeof k->model, "%s", c->model.name);
    k->capacity = l->total ? l->total : c->capacity;
    k->tp = l->tp > 0 ? l->tp : c->tp;
    double u = l->utilization > 0 ? l->utilization : c->utilization;
    uint64_t budget = l->budget ? l->budget : (uint64_t)llround((double)k->capacity * u);
    if (!l->weights) return nb_fail(NB_ERR_INVALID, "plan --calibrate: the log gives no weights line ('model weights take' / 'Model loading took')");
    uint64_t kv = l->kv_bytes;
    if (!kv) return nb_fail(NB_ERR_INVALID, "plan --calibrate: the log gives no KV cache size in bytes");
    if (budget < l->weights + kv)
        return nb_fail(NB_ERR_INVALID, "plan --calibrate: budget %.2f GiB < weights %.2f + KV %.2f GiB: the log's numbers "
                       "do not add up (give --gpu-mem / --memory-utilization as the engine ran)",
                       (double)budget / GIB, (double)l->weights / GIB, (double)kv / GIB);
    uint64_t rest = budget - l->weights - kv;
    k->runtime = l->non_torch;
    k->activation = l->activation;
    if (l->engine != NB_PLAN_ENGINE_SGLANG) {
        nb_plan_overhead o;
        memset(&o, 0, sizeof o);
        nb_plan_config cc = *c;
        cc.engine = l->engine;
        cc.max_model_len = c->max_model_len;
        k->profile_tokens = vllm_profile_tokens(&cc, &o, c->max_model_len > 0 ? c->max_model_len : c->model.n_ctx_train);
    }
    /* the log's weights include what the plan calls rope_cache: keep it in the measured weights */
    uint64_t named = k->runtime + k->activation;
    k->other = rest > named ? rest - named : 0;
    return NB_OK;
}

/* ---- the local profile file ---------------------------------------------------------- */

nb_status nb_plan_profile_path(char *buf, size_t n) {
    const char *p = getenv("NIBBLE_PLAN_PROFILES");
    if (p && *p) {
        snprintf(buf, n, "%s", p);
        return NB_OK;
    }
    const char *x = getenv("XDG_CONFIG_HOME");
    if (x && *x) {
        snprintf(buf, n, "%s/nibble/plan-profiles.json", x);
        return NB_OK;
    }
    const char *h = getenv("HOME");
    if (!h || !*h) return nb_fail(NB_ERR_INVALID, "plan profiles: neither NIBBLE_PLAN_PROFILES, XDG_CONFIG_HOME nor HOME is set");
    snprintf(buf, n, "%s/.config/nibble/plan-profiles.json", h);
    return NB_OK;
}

static bool same_entry(json_t *e, nb_plan_engine eng, const char *model, uint64_t cap, int tp) {
    const char *en = json_string_value(json_object_get(e, "engine"));
    const char *mo = json_string_value(json_object_get(e, "model"));
    json_int_t c = json_integer_value(json_object_get(e, "capacity_bytes"));
    json_int_t t = json_integer_value(json_object_get(e, "tp"));
    /* cards of one kind differ by a few MiB in what the driver reports */
    long double d = (long double)c - (long double)cap;
    return en && mo && !strcmp(en, nb_plan_engine_name(eng)) && !strcmp(mo, model) && fabsl(d) < (64 << 20) && t == tp;
}

static json_t *load_profiles(const char *path, nb_status *st) {
    *st = NB_OK;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return json_array();
        *st = nb_fail(NB_ERR_IO, "plan profiles: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    fclose(f);
    json_t *arr = root ? json_object_get(root, "profiles") : NULL;
    if (!root || !json_is_array(arr)) {
        *st = nb_fail(NB_ERR_INVALID, "plan profiles: %s: %s (expected {\"profiles\": [...]}; delete it to start over)",
                      path, root ? "no 'profiles' array" : je.text);
        json_decref(root);
        return NULL;
    }
    json_incref(arr);
    json_decref(root);
    return arr;
}

static nb_status mkdirs_for(const char *path) {
    char d[1024];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) != 0 && errno != EEXIST) return nb_fail(NB_ERR_IO, "plan profiles: cannot create %s: %s", d, strerror(errno));
        *p = '/';
    }
    return NB_OK;
}

nb_status nb_plan_profile_store(const char *path, const nb_plan_calibration *k) {
    nb_status st;
    json_t *arr = load_profiles(path, &st);
    if (!arr) return st;
    for (size_t i = json_array_size(arr); i-- > 0;)
        if (same_entry(json_array_get(arr, i), k->engine, k->model, k->capacity, k->tp)) json_array_remove(arr, i);
    json_t *e = json_pack("{s:s, s:s, s:I, s:i, s:I, s:I, s:I, s:I}", "engine", nb_plan_engine_name(k->engine), "model",
                          k->model, "capacity_bytes", (json_int_t)k->capacity, "tp", k->tp, "runtime_bytes",
                          (json_int_t)k->runtime, "activation_bytes", (json_int_t)k->activation, "profile_tokens",
                          (json_int_t)k->profile_tokens, "other_bytes", (json_int_t)k->other);
    json_t *root = e ? json_pack("{s:i, s:o}", "version", 1, "profiles", arr) : NULL;
    if (!root) {
        json_decref(e);
        json_decref(arr);
        return nb_fail(NB_ERR_NOMEM, "plan profiles: out of memory");
    }
    json_array_append_new(arr, e);
    st = mkdirs_for(path);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (st == NB_OK && json_dump_file(root, tmp, JSON_INDENT(2)) != 0)
        st = nb_fail(NB_ERR_IO, "plan profiles: cannot write %s", tmp);
    if (st == NB_OK && rename(tmp, path) != 0) st = nb_fail(NB_ERR_IO, "plan profiles: cannot rename %s: %s", tmp, strerror(errno));
    json_decref(root);
    return st;
}

nb_status nb_plan_profile_find(const char *path, nb_plan_engine eng, const char *model, uint64_t cap, int tp,
                               nb_plan_calibration *out, bool *found) {
    *found = false;
    nb_status st;
    json_t *arr = load_profiles(path, &st);
    if (!arr) return st;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        if (!same_entry(e, eng, model, cap, tp)) continue;
        memset(out, 0, sizeof *out);
        out->engine = eng;
        snprintf(out->model, sizeof out->model, "%s", model);
        out->capacity = (uint64_t)json_integer_value(json_object_get(e, "capacity_bytes"));
        out->tp = tp;
        out->runtime = (uint64_t)json_integer_value(json_object_get(e, "runtime_bytes"));
        out->activation = (uint64_t)json_integer_value(json_object_get(e, "activation_bytes"));
        out->profile_tokens = (int64_t)json_integer_value(json_object_get(e, "profile_tokens"));
        out->other = (uint64_t)json_integer_value(json_object_get(e, "other_bytes"));
        *found = true;
        break;
    }
    json_decref(arr);
    return NB_OK;
}
