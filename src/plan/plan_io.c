/* Inputs of the memory account from files: model presets by id, Hugging
 * Face config.json (an HF directory or the file itself), GGUF files (the
 * `<arch>.*` hyper-parameters and the exact size of every tensor), and host
 * RAM (MemTotal of /proc/meminfo) for the CPU engine.
 *
 * config.json fields read (transformers' names): model_type, hidden_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads (absent =
 * heads: MHA), head_dim (absent or null = hidden/heads), intermediate_size,
 * vocab_size, tie_word_embeddings (absent: true for gemma*, else false),
 * attention_bias (qwen2 always has q/k/v biases), max_position_embeddings,
 * sliding_window (qwen2: only with use_sliding_window), MoE fields of
 * mixtral (num_local_experts), qwen2_moe/qwen3_moe (num_experts,
 * moe_intermediate_size, shared_expert_intermediate_size) and
 * deepseek_v2/v3 (n_routed_experts, n_shared_experts, first_k_dense_replace,
 * kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
 * v_head_dim), num_experts_per_tok, torch_dtype, and quantization_config
 * (awq, gptq, fp8, compressed-tensors, bitsandbytes) to pick the scheme.
 * A "text_config" object (multimodal wrappers) is used when the top level
 * has no hidden_size. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "formats/gguf.h"
#include "formats/hf_quant.h"
#include "plan/plan.h"

#define PLAN_CONFIG_MAX_BYTES (4u << 20)
#define PLAN_MEMINFO_MAX_BYTES (1u << 20)

/* ---- HF config.json ------------------------------------------------------------ */

static nb_status jint(const json_t *o, const char *key, bool required, int64_t def, const char *name, int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return nb_fail(NB_ERR_FORMAT, "%s: field '%s' is missing", name, key);
        *out = def;
        return NB_OK;
    }
    if (!json_is_integer(v)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s' is not an integer", name, key);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x > ((json_int_t)1 << 40)) return nb_fail(NB_ERR_RANGE, "%s: field '%s' = %lld, allowed 0..2^40", name, key, (long long)x);
    *out = x;
    return NB_OK;
}

static bool jbool(const json_t *o, const char *key, bool def) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static const char *jstr(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool starts(const char *s, const char *p) { return s && !strncmp(s, p, strlen(p)); }

static nb_status scheme_from_quant(const json_t *q, const char *name, nb_plan_scheme *s) {
    const char *method = jstr(q, "quant_method");
    if (!method) return nb_fail(NB_ERR_FORMAT, "%s: quantization_config has no quant_method", name);
    int64_t bits = 4, group = 128;
    if (!strcmp(method, "awq")) {
        NB_TRY(jint(q, "bits", false, 4, name, &bits));
        if (json_object_get(q, "w_bit")) NB_TRY(jint(q, "w_bit", false, 4, name, &bits));
        NB_TRY(jint(q, "group_size", false, 128, name, &group));
        if (json_object_get(q, "q_group_size")) NB_TRY(jint(q, "q_group_size", false, 128, name, &group));
        NB_TRY(nb_plan_scheme_from_name("int4-awq", s));
        if (!jbool(q, "zero_point", true)) s->zero_bits = 0;
    } else if (!strcmp(method, "gptq")) {
        json_t *g = json_object_get(q, "group_size");
        NB_TRY(jint(q, "bits", false, 4, name, &bits));
        group = json_is_integer(g) ? json_integer_value(g) : 128;
        NB_TRY(nb_plan_scheme_from_name("int4-gptq", s));
        s->zero_bits = (int)bits;
    } else if (!strcmp(method, "fp8")) {
        NB_TRY(nb_plan_scheme_from_name(json_object_get(q, "weight_block_size") ? "fp8-block" : "fp8-tensor", s));
        return NB_OK;
    } else if (!strcmp(method, "compressed-tensors")) {
        json_t *groups = json_object_get(q, "config_groups"), *g0 = NULL;
        const char *k;
        json_t *v;
        json_object_foreach(groups, k, v) { g0 = v; break; }
        json_t *w = g0 ? json_object_get(g0, "weights") : NULL;
        if (!w) return nb_fail(NB_ERR_FORMAT, "%s: compressed-tensors config has no config_groups.*.weights", name);
        NB_TRY(jint(w, "num_bits", false, 8, name, &bits));
        const char *type = jstr(w, "type"), *strategy = jstr(w, "strategy");
        bool act = json_is_object(json_object_get(g0, "input_activations"));
        bool sym = jbool(w, "symmetric", true);
        if (type && !strcmp(type, "float")) {
            NB_TRY(nb_plan_scheme_from_name(strategy && !strcmp(strategy, "block") ? "fp8-block"
                                            : strategy && !strcmp(strategy, "tensor") ? "fp8-tensor" : "fp8", s));
            return NB_OK;
        }
        NB_TRY(nb_plan_scheme_from_name(bits <= 4 ? "int4-sym" : act ? "w8a8" : "int8", s));
        group = 0;
        if (strategy && !strcmp(strategy, "group")) NB_TRY(jint(w, "group_size", false, 128, name, &group));
        if (strategy && !strcmp(strategy, "tensor")) group = -1;
        if (!sym) s->zero_bits = (int)bits;
        s->g_idx = false;
    } else if (!strcmp(method, "bitsandbytes")) {
        if (jbool(q, "load_in_8bit", false)) {
            NB_TRY(nb_plan_scheme_from_name("int8", s));
            s->scale_bytes = 4;
            return NB_OK;
        }
        return nb_plan_scheme_from_name(jbool(q, "bnb_4bit_use_double_quant", false) ? "nf4-dq" : "nf4", s);
    } else {
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: quantization_config.quant_method '%s' is not supported (allowed: awq, "
                       "gptq, fp8, compressed-tensors, bitsandbytes)", name, method);
    }
    if (bits != 4 && bits != 8)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: quantization_config bits = %lld, allowed 4 or 8", name, (long long)bits);
    s->bits = (int)bits;
    s->group = group < 0 ? 0 : group;
    if (bits == 8) snprintf(s->name, sizeof s->name, "int8-%s", method);
    return NB_OK;
}

nb_status nb_plan_model_from_hf_json(const char *text, size_t len, const char *name, nb_plan_config *c) {
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    if (!root) return nb_fail(NB_ERR_FORMAT, "%s: line %d column %d: %s", name, err.line, err.column, err.text);
    nb_status st = NB_OK;
    json_t *o = root;
    if (!json_is_object(root)) {
        st = nb_fail(NB_ERR_FORMAT, "%s: not a JSON object", name);
        goto done;
    }
    if (!json_object_get(root, "hidden_size") && json_is_object(json_object_get(root, "text_config")))
        o = json_object_get(root, "text_config");
    nb_plan_model *m = &c->model;
    memset(m, 0, sizeof *m);
    const char *mt = jstr(o, "model_type");
    if (!mt) mt = jstr(root, "model_type");
    snprintf(m->arch, sizeof m->arch, "%s", mt ? mt : "unknown");
    const char *base = strrchr(name, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : name);
    snprintf(m->source, sizeof m->source, "%s", name);
#define GET(key, req, def, dst) do { if ((st = jint(o, key, req, def, name, &(dst))) != NB_OK) goto done; } while (0)
    GET("hidden_size", true, 0, m->n_embd);
    GET("num_hidden_layers", true, 0, m->n_layer);
    GET("num_attention_heads", true, 0, m->n_head);
    GET("vocab_size", true, 0, m->n_vocab);
    GET("num_key_value_heads", false, m->n_head, m->n_head_kv);
    if (m->n_head <= 0) {
        st = nb_fail(NB_ERR_RANGE, "%s: num_attention_heads must be > 0", name);
        goto done;
    }
    GET("head_dim", false, m->n_embd / m->n_head, m->head_dim);
    GET("intermediate_size", false, 0, m->n_ff);
    GET("max_position_embeddings", false, 0, m->n_ctx_train);
    m->tied = jbool(o, "tie_word_embeddings", jbool(root, "tie_word_embeddings", starts(m->arch, "gemma")));
    m->qkv_bias = jbool(o, "attention_bias", false) || !strcmp(m->arch, "qwen2") || !strcmp(m->arch, "qwen2_moe");
    m->qk_norm = starts(m->arch, "qwen3");
    m->norms_per_layer = (starts(m->arch, "gemma2") || starts(m->arch, "gemma3")) ? 4 : 2;
    /* MoE */
    GET("num_experts_per_tok", false, 0, m->n_expert_used);
    if (json_object_get(o, "num_local_experts")) { /* mixtral */
        GET("num_local_experts", false, 0, m->n_expert);
        m->n_ff_expert = m->n_ff;
    } else if (json_object_get(o, "n_routed_experts")) { /* deepseek */
        int64_t nshared = 0;
        GET("n_routed_experts", false, 0, m->n_expert);
        GET("moe_intermediate_size", false, 0, m->n_ff_expert);
        GET("n_shared_experts", false, 0, nshared);
        GET("first_k_dense_replace", false, 0, m->n_dense_layers);
        m->n_ff_shared = nshared * m->n_ff_expert;
    } else if (json_object_get(o, "num_experts") && json_object_get(o, "moe_intermediate_size")) { /* qwen moe */
        GET("num_experts", false, 0, m->n_expert);
        GET("moe_intermediate_size", false, 0, m->n_ff_expert);
        GET("shared_expert_intermediate_size", false, 0, m->n_ff_shared);
    }
    /* MLA */
    GET("kv_lora_rank", false, 0, m->kv_lora_rank);
    if (m->kv_lora_rank > 0) {
        GET("q_lora_rank", false, 0, m->q_lora_rank);
        GET("qk_rope_head_dim", false, 0, m->qk_rope_dim);
        GET("qk_nope_head_dim", false, 0, m->qk_nope_dim);
        GET("v_head_dim", false, 0, m->v_head_dim);
        m->head_dim = m->qk_rope_dim + m->qk_nope_dim;
    }
    if (!strcmp(m->arch, "qwen2") || !strcmp(m->arch, "qwen2_moe") || starts(m->arch, "qwen3")) {
        if (jbool(o, "use_sliding_window", false)) GET("sliding_window", false, 0, m->sliding_window);
    } else {
        GET("sliding_window", false, 0, m->sliding_window);
    }
    m->sliding_alternate = starts(m->arch, "gemma2");
#undef GET
    /* scheme */
    json_t *q = json_object_get(root, "quantization_config");
    if (json_is_object(q)) {
        st = scheme_from_quant(q, name, &c->scheme);
    } else {
        const char *dt = jstr(o, "torch_dtype");
        if (!dt) dt = jstr(root, "torch_dtype");
        if (!dt) dt = jstr(root, "dtype");
        st = nb_plan_scheme_from_name(dt && !strcmp(dt, "float16") ? "fp16" : dt && !strcmp(dt, "float32") ? "fp32"
                                                                                                          : "bf16",
                                      &c->scheme);
    }
done:
    json_decref(root);
    return st;
}

/* ---- GGUF ------------------------------------------------------------------------ */

static nb_plan_kind classify(const char *name, int32_t *layer) {
    *layer = -1;
    if (!strcmp(name, "token_embd.weight")) return NB_PLAN_T_EMBED;
    if (!strcmp(name, "output.weight")) return NB_PLAN_T_LM_HEAD;
    if (!strncmp(name, "output_norm", 11)) return NB_PLAN_T_NORM;
    if (strncmp(name, "blk.", 4)) return NB_PLAN_T_OTHER;
    const char *p = name + 4;
    long l = 0;
    if (!isdigit((unsigned char)*p)) return NB_PLAN_T_OTHER;
    while (isdigit((unsigned char)*p) && l < 1000000) l = l * 10 + (*p++ - '0');
    *layer = (int32_t)l;
    if (*p++ != '.') return NB_PLAN_T_OTHER;
    static const struct { const char *pre; nb_plan_kind k; } tab[] = {
        {"attn_q.bias", NB_PLAN_T_Q_BIAS}, {"attn_k.bias", NB_PLAN_T_K_BIAS}, {"attn_v.bias", NB_PLAN_T_V_BIAS},
        {"attn_output.bias", NB_PLAN_T_O_BIAS}, {"attn_qkv.bias", NB_PLAN_T_Q_BIAS},
        {"attn_q.", NB_PLAN_T_Q}, {"attn_k.", NB_PLAN_T_K}, {"attn_v.", NB_PLAN_T_V}, {"attn_qkv.", NB_PLAN_T_Q},
        {"attn_output.", NB_PLAN_T_O}, {"attn_kv_a_mqa.", NB_PLAN_T_MLA_A}, {"attn_q_a.", NB_PLAN_T_MLA_A},
        {"attn_q_b.", NB_PLAN_T_MLA_B}, {"attn_kv_b.", NB_PLAN_T_MLA_B}, {"attn_k_b.", NB_PLAN_T_MLA_B},
        {"attn_v_b.", NB_PLAN_T_MLA_B},
        {"ffn_gate_inp_shexp.", NB_PLAN_T_SHEXP_ROUTER}, {"ffn_gate_inp.", NB_PLAN_T_ROUTER},
        {"ffn_gate_exps.", NB_PLAN_T_EXP_GATE}, {"ffn_up_exps.", NB_PLAN_T_EXP_UP}, {"ffn_down_exps.", NB_PLAN_T_EXP_DOWN},
        {"ffn_gate_shexp.", NB_PLAN_T_SHEXP_GATE}, {"ffn_up_shexp.", NB_PLAN_T_SHEXP_UP},
        {"ffn_down_shexp.", NB_PLAN_T_SHEXP_DOWN},
        {"ffn_gate.", NB_PLAN_T_GATE}, {"ffn_up.", NB_PLAN_T_UP}, {"ffn_down.", NB_PLAN_T_DOWN},
    };
    if (strstr(p, "norm")) return NB_PLAN_T_NORM;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strncmp(p, tab[i].pre, strlen(tab[i].pre))) return tab[i].k;
    return NB_PLAN_T_OTHER;
}

/* An integer key that may be stored per layer as an array: the largest value. */
static nb_status gguf_int_any(const nb_gguf *g, const char *key, int64_t def, int64_t *out) {
    const nb_gguf_value *v = nb_gguf_find(g, key);
    if (v && v->type == NB_GGUF_ARRAY && v->arr) {
        int64_t best = 0;
        for (uint64_t i = 0; i < v->n; i++) {
            int64_t x;
            switch (v->arr_type) {
            case NB_GGUF_U32: x = ((const uint32_t *)v->arr)[i]; break;
            case NB_GGUF_I32: x = ((const int32_t *)v->arr)[i]; break;
            case NB_GGUF_U64: x = (int64_t)((const uint64_t *)v->arr)[i]; break;
            case NB_GGUF_I64: x = ((const int64_t *)v->arr)[i]; break;
            default: return nb_fail(NB_ERR_FORMAT, "%s: key '%s' is an array of %s, expected integers",
                                    nb_gguf_path(g), key, nb_gguf_type_name(v->arr_type));
            }
            best = NB_MAX(best, x);
        }
        *out = best;
        return NB_OK;
    }
    return nb_gguf_get_int_or(g, key, def, out);
}

static const char *ftype_scheme(int64_t ft) {
    switch (ft) {
    case 0: return "gguf-f32";
    case 1: return "gguf-f16";
    case 2: return "q4_0";
    case 3: return "q4_1";
    case 7: return "q8_0";
    case 8: return "q5_0";
    case 9: return "q5_1";
    case 10: return "q2_k";
    case 11: return "q3_k_s";
    case 12: return "q3_k_m";
    case 13: return "q3_k_l";
    case 14: return "q4_k_s";
    case 15: return "q4_k_m";
    case 16: return "q5_k_s";
    case 17: return "q5_k_m";
    case 18: return "q6_k";
    case 32: return "gguf-bf16";
    default: return NULL;
    }
}

nb_status nb_plan_model_from_gguf(const char *path, nb_plan_config *c) {
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_status st = NB_OK;
    nb_plan_model *m = &c->model;
    memset(m, 0, sizeof *m);
    const char *arch;
    char key[128];
    if ((st = nb_gguf_get_str(g, "general.architecture", &arch)) != NB_OK) goto done;
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    snprintf(m->source, sizeof m->source, "%s", path);
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
#define REQ(suffix, dst) do { if ((st = gguf_int_any(g, K(suffix), -1, &(dst))) != NB_OK) goto done; \
        if ((dst) < 0) { st = nb_fail(NB_ERR_FORMAT, "%s: metadata key '%s' is missing", path, key); goto done; } } while (0)
#define OPT(suffix, def, dst) do { if ((st = gguf_int_any(g, K(suffix), def, &(dst))) != NB_OK) goto done; } while (0)
    REQ("block_count", m->n_layer);
    REQ("embedding_length", m->n_embd);
    REQ("attention.head_count", m->n_head);
    if (m->n_head <= 0) {
        st = nb_fail(NB_ERR_FORMAT, "%s: %s.attention.head_count must be > 0", path, arch);
        goto done;
    }
    OPT("attention.head_count_kv", m->n_head, m->n_head_kv);
    OPT("feed_forward_length", 0, m->n_ff);
    OPT("attention.key_length", m->n_embd / m->n_head, m->head_dim);
    OPT("attention.value_length", m->head_dim, m->v_head_dim);
    OPT("context_length", 0, m->n_ctx_train);
    OPT("expert_count", 0, m->n_expert);
    OPT("expert_used_count", 0, m->n_expert_used);
    OPT("expert_feed_forward_length", 0, m->n_ff_expert);
    OPT("leading_dense_block_count", 0, m->n_dense_layers);
    OPT("attention.kv_lora_rank", 0, m->kv_lora_rank);
    OPT("attention.q_lora_rank", 0, m->q_lora_rank);
    OPT("attention.sliding_window", 0, m->sliding_window);
    if (m->kv_lora_rank > 0) {
        OPT("rope.dimension_count", 64, m->qk_rope_dim);
        m->qk_nope_dim = NB_MAX(m->head_dim - m->qk_rope_dim, 1);
        if (m->v_head_dim <= 0) m->v_head_dim = 1;
    }
    if (m->n_expert > 0 && m->n_ff_expert == 0) m->n_ff_expert = m->n_ff;
    int64_t vocab = 0;
    OPT("vocab_size", 0, vocab);
    const nb_gguf_value *toks = nb_gguf_find(g, "tokenizer.ggml.tokens");
    if (!vocab && toks && toks->type == NB_GGUF_ARRAY) vocab = (int64_t)toks->n;
    const nb_tensor *emb = nb_gguf_find_tensor(g, "token_embd.weight");
    if (!vocab && emb) vocab = emb->ne[1];
    m->n_vocab = vocab;
    m->tied = nb_gguf_find_tensor(g, "output.weight") == NULL;
    m->qkv_bias = nb_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    m->qk_norm = nb_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    m->norms_per_layer = 2;
    m->sliding_alternate = !strcmp(arch, "gemma2");
#undef K
#undef REQ
#undef OPT
    /* tensors */
    int64_t n = nb_gguf_n_tensors(g);
    free(c->tensors);
    c->tensors = n ? nb_calloc((size_t)n, sizeof *c->tensors) : NULL;
    c->n_tensors = 0;
    if (n && !c->tensors) {
        st = NB_ERR_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        const nb_tensor *t = nb_gguf_tensor(g, i);
        nb_plan_tensor *pt = &c->tensors[c->n_tensors++];
        pt->kind = classify(t->name, &pt->layer);
        pt->nelem = (uint64_t)nb_tensor_nelem(t);
        pt->nbytes = t->nbytes;
    }
    /* the scheme it was stored with (for display; the bytes are the file's) */
    int64_t ft = -1;
    if ((st = nb_gguf_get_int_or(g, "general.file_type", -1, &ft)) != NB_OK) goto done;
    const char *sn = ftype_scheme(ft);
    if (sn) {
        NB_ASSERT(nb_plan_scheme_from_name(sn, &c->scheme) == NB_OK);
    } else {
        NB_ASSERT(nb_plan_scheme_from_name("gguf-f16", &c->scheme) == NB_OK);
        snprintf(c->scheme.name, sizeof c->scheme.name, "gguf-ftype-%lld", (long long)ft);
    }
done:
    nb_gguf_close(g);
    if (st != NB_OK) nb_plan_config_free(c);
    return st;
}

/* ---- HF weights: exact sizes from the safetensors headers (formats/hf_quant.h) ---- */

typedef struct { nb_plan_config *c; int64_t cap; bool nomem; } hf_acc;

static void hf_tensor(void *ctx, const char *gguf, uint64_t params, uint64_t bytes) {
    hf_acc *a = ctx;
    if (a->nomem) return;
    if (a->c->n_tensors == a->cap) {
        int64_t nc = a->cap ? 2 * a->cap : 256;
        nb_plan_tensor *t = realloc(a->c->tensors, (size_t)nc * sizeof *t);
        if (!t) { a->nomem = true; return; }
        a->c->tensors = t;
        a->cap = nc;
    }
    nb_plan_tensor *pt = &a->c->tensors[a->c->n_tensors++];
    pt->layer = -1;
    pt->kind = gguf ? classify(gguf, &pt->layer) : NB_PLAN_T_OTHER;
    pt->nelem = params;
    pt->nbytes = bytes;
}

/* Fills c->tensors from the checkpoint next to config.json; without weights
 * (a lone config.json) the sizes stay estimated from the scheme. */
static void plan_hf_tensors(const char *config_path, nb_plan_config *c) {
    hf_acc a = {.c = c};
    free(c->tensors);
    c->tensors = NULL;
    c->n_tensors = 0;
    if (nb_hf_storage(config_path, hf_tensor, &a) != NB_OK || a.nomem || !c->n_tensors) {
        free(c->tensors);
        c->tensors = NULL;
        c->n_tensors = 0;
    }
}

/* ---- dispatch on the spec ----------------------------------------------------------- */

nb_status nb_plan_load_model(const char *spec, nb_plan_config *c) {
    const nb_plan_model *p = nb_plan_model_preset(spec);
    if (p) {
        c->model = *p;
        nb_plan_config_free(c);
        return NB_OK;
    }
    char path[4096];
    if (nb_is_dir(spec)) {
        snprintf(path, sizeof path, "%s/config.json", spec);
        if (!nb_file_exists(path))
            return nb_fail(NB_ERR_NOT_FOUND, "%s: a directory without config.json (give a preset, a GGUF file or an "
                           "HF model directory)", spec);
    } else if (nb_file_exists(spec)) {
        snprintf(path, sizeof path, "%s", spec);
    } else {
        return nb_fail(NB_ERR_NOT_FOUND, "model '%s' is neither a preset (nibble plan --list-models) nor a file or "
                       "directory", spec);
    }
    size_t len = strlen(path);
    if (len >= 5 && !strcmp(path + len - 5, ".json")) {
        char *text;
        size_t n;
        NB_TRY(nb_read_file(path, PLAN_CONFIG_MAX_BYTES, &text, &n));
        nb_plan_config_free(c);
        nb_status st = nb_plan_model_from_hf_json(text, n, path, c);
        free(text);
        if (st == NB_OK) plan_hf_tensors(path, c); /* exact sizes when the weights are there */
        return st;
    }
    return nb_plan_model_from_gguf(path, c);
}

nb_status nb_plan_host_ram(const char *path, uint64_t *bytes) {
    const char *p = path ? path : "/proc/meminfo";
    char *text;
    size_t n;
    NB_TRY(nb_read_file(p, PLAN_MEMINFO_MAX_BYTES, &text, &n));
    const char *m = strstr(text, "MemTotal:");
    unsigned long long kb = 0;
    char unit[8] = "";
    int got = m ? sscanf(m + 9, "%llu %7s", &kb, unit) : 0;
    free(text);
    if (got < 1 || kb == 0 || kb > (1ull << 50))
        return nb_fail(NB_ERR_FORMAT, "%s: no usable 'MemTotal: N kB' line", p);
    *bytes = (uint64_t)kb * 1024;
    return NB_OK;
}
