/* HF config.json -> nb_arch_desc (llama, mistral, qwen2). The field list, the
 * defaults and what is refused are in hfconfig.h. */
#include "formats/hfconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

/* An integer field (JSON integer, or a real with an integral value) in [lo, hi].
 * Absent or null: *out = def and NB_OK when !required. */
static nb_status hf_int(const json_t *root, const char *key, bool required, int64_t def, int64_t lo, int64_t hi,
                        const char *name, int64_t *out) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return nb_fail(NB_ERR_FORMAT, "%s: field '%s': required, missing", name, key);
        *out = def;
        return NB_OK;
    }
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) && fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v);
    } else {
        return nb_fail(NB_ERR_FORMAT, "%s: field '%s': expected an integer", name, key);
    }
    if (x < lo || x > hi)
        return nb_fail(NB_ERR_RANGE, "%s: field '%s' = %lld outside the allowed range %lld..%lld", name, key,
                       (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return NB_OK;
}

static nb_status hf_num(const json_t *obj, const char *key, bool required, double def, const char *name,
                        const char *where, double *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return nb_fail(NB_ERR_FORMAT, "%s: field '%s%s': required, missing", name, where, key);
        *out = def;
        return NB_OK;
    }
    if (!json_is_number(v)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s%s': expected a number", name, where, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return nb_fail(NB_ERR_RANGE, "%s: field '%s%s': not finite", name, where, key);
    return NB_OK;
}

static nb_status hf_bool(const json_t *root, const char *key, bool def, const char *name, bool *out) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return NB_OK;
    }
    if (!json_is_boolean(v)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s': expected true or false", name, key);
    *out = json_is_true(v);
    return NB_OK;
}

static nb_status hf_rope_scaling(const json_t *rs, const char *name, nb_arch_desc *hp) {
    hp->rope_scaling = NB_ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    if (!rs || json_is_null(rs)) return NB_OK;
    if (!json_is_object(rs)) return nb_fail(NB_ERR_FORMAT, "%s: field 'rope_scaling': expected an object or null", name);
    const json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    if (!t || !json_is_string(t))
        return nb_fail(NB_ERR_FORMAT, "%s: field 'rope_scaling.rope_type' (or 'type'): missing or not a string", name);
    const char *type = json_string_value(t);
    double f;
    if (!strcmp(type, "default")) return NB_OK;
    if (!strcmp(type, "linear")) {
        NB_TRY(hf_num(rs, "factor", true, 1, name, "rope_scaling.", &f));
        if (!(f >= 1 && f <= 1024))
            return nb_fail(NB_ERR_RANGE, "%s: field 'rope_scaling.factor' = %g outside 1..1024", name, f);
        hp->rope_scaling = NB_ROPE_SCALING_LINEAR;
        hp->rope_factor = (float)f;
        return NB_OK;
    }
    if (!strcmp(type, "llama3")) {
        double lo, hi;
        int64_t orig;
        NB_TRY(hf_num(rs, "factor", true, 1, name, "rope_scaling.", &f));
        NB_TRY(hf_num(rs, "low_freq_factor", true, 1, name, "rope_scaling.", &lo));
        NB_TRY(hf_num(rs, "high_freq_factor", true, 1, name, "rope_scaling.", &hi));
        NB_TRY(hf_int(rs, "original_max_position_embeddings", true, 0, 1, INT32_MAX, name, &orig));
        if (!(f >= 1 && f <= 1024))
            return nb_fail(NB_ERR_RANGE, "%s: field 'rope_scaling.factor' = %g outside 1..1024", name, f);
        if (!(lo > 0 && hi > lo))
            return nb_fail(NB_ERR_RANGE, "%s: fields 'rope_scaling.low_freq_factor' = %g and 'high_freq_factor' = %g: need 0 < low < high",
                           name, lo, hi);
        hp->rope_scaling = NB_ROPE_SCALING_LLAMA3;
        hp->rope_factor = (float)f;
        hp->rope_low_freq_factor = (float)lo;
        hp->rope_high_freq_factor = (float)hi;
        hp->rope_orig_ctx = (int32_t)orig;
        return NB_OK;
    }
    return nb_fail(NB_ERR_UNSUPPORTED, "%s: field 'rope_scaling.rope_type' = '%s' is not supported (supported: default, linear, llama3)",
                   name, type);
}

/* Planner mode: an integer field in 0..INT32_MAX (or absent: def). */
static nb_status plan_int(const json_t *o, const char *key, bool required, int64_t def, const char *name, int32_t *out) {
    int64_t v;
    NB_TRY(hf_int(o, key, required, def, 0, INT32_MAX, name, &v));
    *out = (int32_t)v;
    return NB_OK;
}

/* Lenient booleans of the planner: anything but true/false is the default. */
static bool soft_bool(const json_t *o, const char *key, bool def) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static const char *soft_str(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* quantization_config for the planner (hfconfig.h, nb_hf_quant_hint). */
static nb_status hf_quant_hint(const json_t *q, const char *name, nb_hf_quant_hint *h) {
    memset(h, 0, sizeof *h);
    if (!json_is_object(q)) return NB_OK;
    const char *method = soft_str(q, "quant_method");
    if (!method) return nb_fail(NB_ERR_FORMAT, "%s: quantization_config has no quant_method", name);
    snprintf(h->method, sizeof h->method, "%s", method);
    int64_t v;
#define QI(o, key, def, dst) do { NB_TRY(hf_int(o, key, false, def, 0, (int64_t)1 << 40, name, &v)); (dst) = v; } while (0)
    h->bits = 4;
    h->group = 128;
    h->zero_point = true;
    if (!strcmp(method, "awq")) {
        QI(q, "bits", 4, h->bits);
        if (json_object_get(q, "w_bit")) QI(q, "w_bit", 4, h->bits);
        QI(q, "group_size", 128, h->group);
        if (json_object_get(q, "q_group_size")) QI(q, "q_group_size", 128, h->group);
        h->zero_point = soft_bool(q, "zero_point", true);
    } else if (!strcmp(method, "gptq")) {
        const json_t *g = json_object_get(q, "group_size");
        QI(q, "bits", 4, h->bits);
        h->group = json_is_integer(g) ? json_integer_value(g) : 128;
    } else if (!strcmp(method, "fp8")) {
        h->fp8_block = json_object_get(q, "weight_block_size") != NULL;
    } else if (!strcmp(method, "compressed-tensors")) {
        const json_t *groups = json_object_get(q, "config_groups"), *g0 = NULL;
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)groups, k, e) { g0 = e; break; }
        const json_t *w = g0 ? json_object_get(g0, "weights") : NULL;
        if (!w) return nb_fail(NB_ERR_FORMAT, "%s: compressed-tensors config has no config_groups.*.weights", name);
        QI(w, "num_bits", 8, h->bits);
        const char *type = soft_str(w, "type"), *strategy = soft_str(w, "strategy");
        snprintf(h->ct_type, sizeof h->ct_type, "%s", type ? type : "");
        snprintf(h->ct_strategy, sizeof h->ct_strategy, "%s", strategy ? strategy : "");
        h->ct_act = json_is_object(json_object_get(g0, "input_activations"));
        h->zero_point = !soft_bool(w, "symmetric", true);
        h->group = 0;
        if (strategy && !strcmp(strategy, "group")) QI(w, "group_size", 128, h->group);
        if (strategy && !strcmp(strategy, "tensor")) h->group = -1;
    } else if (!strcmp(method, "bitsandbytes")) {
        h->bnb_8bit = soft_bool(q, "load_in_8bit", false);
        h->bnb_double = soft_bool(q, "bnb_4bit_use_double_quant", false);
    }
#undef QI
    return NB_OK;
}

/* One reader for both modes (hfconfig.h): `root` is config.json, `o` the
 * object that holds the text model (root, or its text_config). */
static nb_status hf_parse_root(const json_t *root, const char *name, nb_arch_read mode, nb_hf_config *out) {
    nb_arch_desc *hp = &out->hp;
    bool plan = mode == NB_ARCH_PLAN;
    if (!json_is_object(root)) return nb_fail(NB_ERR_FORMAT, "%s: expected a JSON object", name);
    const json_t *o = root;
    if (!json_object_get(root, "hidden_size") && json_is_object(json_object_get(root, "text_config")))
        o = json_object_get(root, "text_config"); /* a multimodal wrapper: the text model */
    hp->source = NB_ARCH_SRC_HF;

    const json_t *mt = json_object_get(o, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(root, "model_type");
    if (!mt || !json_is_string(mt)) {
        if (!plan)
            return nb_fail(NB_ERR_FORMAT, "%s: field 'model_type': missing or not a string (supported: %s)", name,
                           nb_arch_supported_hf());
    }
    const char *type = json_is_string(mt) ? json_string_value(mt) : "unknown";
    const nb_arch_info *info = nb_arch_find_hf(type);
    if (!plan && (!info || info->runs == NB_ARCH_NONE))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field 'model_type' = '%s' is not supported (supported: %s)", name, type,
                       nb_arch_supported_hf());
    hp->info = info;
    hp->arch = info ? info->runs : NB_ARCH_NONE;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", type);

    int64_t v;
    if (plan) {
        NB_TRY(plan_int(o, "hidden_size", true, 0, name, &hp->n_embd));
        NB_TRY(plan_int(o, "num_hidden_layers", true, 0, name, &hp->n_layer));
        NB_TRY(plan_int(o, "num_attention_heads", true, 0, name, &hp->n_head));
        NB_TRY(plan_int(o, "vocab_size", true, 0, name, &hp->n_vocab));
        NB_TRY(plan_int(o, "num_key_value_heads", false, hp->n_head, name, &hp->n_head_kv));
        if (hp->n_head <= 0) return nb_fail(NB_ERR_RANGE, "%s: num_attention_heads must be > 0", name);
        NB_TRY(plan_int(o, "head_dim", false, hp->n_embd / hp->n_head, name, &hp->head_dim));
        NB_TRY(plan_int(o, "intermediate_size", false, 0, name, &hp->n_ff));
        NB_TRY(plan_int(o, "max_position_embeddings", false, 0, name, &hp->n_ctx_train));
    } else {
        NB_TRY(nb_hfquant_parse(json_object_get(root, "quantization_config"), name, &out->quant));
        const json_t *act = json_object_get(o, "hidden_act");
        if (act && !json_is_null(act) && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field 'hidden_act' = '%s' is not supported (only silu)", name,
                           json_is_string(act) ? json_string_value(act) : "(not a string)");
        NB_TRY(hf_int(o, "hidden_size", true, 0, 1, 1 << 20, name, &v));
        hp->n_embd = (int32_t)v;
        NB_TRY(hf_int(o, "num_hidden_layers", true, 0, 1, 1024, name, &v));
        hp->n_layer = (int32_t)v;
        NB_TRY(hf_int(o, "num_attention_heads", true, 0, 1, 4096, name, &v));
        hp->n_head = (int32_t)v;
        NB_TRY(hf_int(o, "num_key_value_heads", false, hp->n_head, 1, 4096, name, &v));
        hp->n_head_kv = (int32_t)v;
        NB_TRY(hf_int(o, "intermediate_size", true, 0, 1, 1 << 22, name, &v));
        hp->n_ff = (int32_t)v;
        NB_TRY(hf_int(o, "vocab_size", true, 0, 1, 1 << 24, name, &v));
        hp->n_vocab = (int32_t)v;
        NB_TRY(hf_int(o, "max_position_embeddings", false, info->ctx_default, 1, INT32_MAX, name, &v));
        hp->n_ctx_train = (int32_t)v;

        if (hp->n_head % hp->n_head_kv)
            return nb_fail(NB_ERR_RANGE, "%s: field 'num_attention_heads' = %d is not a multiple of 'num_key_value_heads' = %d",
                           name, hp->n_head, hp->n_head_kv);
        const json_t *hd = json_object_get(o, "head_dim");
        if (hd && !json_is_null(hd)) {
            NB_TRY(hf_int(o, "head_dim", true, 0, 2, 4096, name, &v));
            hp->head_dim = (int32_t)v;
        } else {
            if (hp->n_embd % hp->n_head)
                return nb_fail(NB_ERR_RANGE, "%s: field 'hidden_size' = %d is not a multiple of 'num_attention_heads' = %d (and no 'head_dim' is given)",
                               name, hp->n_embd, hp->n_head);
            hp->head_dim = hp->n_embd / hp->n_head;
        }
        if (hp->head_dim % 2)
            return nb_fail(NB_ERR_RANGE, "%s: head dimension %d (field 'head_dim' or hidden_size/num_attention_heads) must be even for RoPE",
                           name, hp->head_dim);
    }
    hp->rope_dim = hp->head_dim;
    hp->rope_style = NB_ROPE_NEOX;

    /* MoE: mixtral (num_local_experts), deepseek (n_routed_experts ...), qwen moe (num_experts + moe_intermediate_size) */
    NB_TRY(plan_int(o, "num_experts_per_tok", false, 0, name, &hp->n_expert_used));
    if (json_object_get(o, "num_local_experts")) {
        NB_TRY(plan_int(o, "num_local_experts", false, 0, name, &hp->n_expert));
        hp->n_ff_expert = hp->n_ff;
    } else if (json_object_get(o, "n_routed_experts")) {
        int32_t nshared = 0;
        NB_TRY(plan_int(o, "n_routed_experts", false, 0, name, &hp->n_expert));
        NB_TRY(plan_int(o, "moe_intermediate_size", false, 0, name, &hp->n_ff_expert));
        NB_TRY(plan_int(o, "n_shared_experts", false, 0, name, &nshared));
        NB_TRY(plan_int(o, "first_k_dense_replace", false, 0, name, &hp->n_dense_layers));
        if ((int64_t)nshared * hp->n_ff_expert > INT32_MAX)
            return nb_fail(NB_ERR_RANGE, "%s: fields 'n_shared_experts' x 'moe_intermediate_size' overflow", name);
        hp->n_ff_shared = nshared * hp->n_ff_expert;
    } else if (json_object_get(o, "num_experts") && json_object_get(o, "moe_intermediate_size")) {
        NB_TRY(plan_int(o, "num_experts", false, 0, name, &hp->n_expert));
        NB_TRY(plan_int(o, "moe_intermediate_size", false, 0, name, &hp->n_ff_expert));
        NB_TRY(plan_int(o, "shared_expert_intermediate_size", false, 0, name, &hp->n_ff_shared));
    }
    /* MLA */
    NB_TRY(plan_int(o, "kv_lora_rank", false, 0, name, &hp->kv_lora_rank));
    if (hp->kv_lora_rank > 0) {
        NB_TRY(plan_int(o, "q_lora_rank", false, 0, name, &hp->q_lora_rank));
        NB_TRY(plan_int(o, "qk_rope_head_dim", false, 0, name, &hp->qk_rope_dim));
        NB_TRY(plan_int(o, "qk_nope_head_dim", false, 0, name, &hp->qk_nope_dim));
        NB_TRY(plan_int(o, "v_head_dim", false, 0, name, &hp->v_head_dim));
        hp->head_dim = hp->qk_rope_dim + hp->qk_nope_dim;
        hp->rope_dim = hp->qk_rope_dim;
    }
    if (!plan && (hp->n_expert > 0 || hp->kv_lora_rank > 0))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: fields '%s': mixture-of-experts and MLA models are not supported by the engine",
                       name, hp->n_expert > 0 ? "num_experts" : "kv_lora_rank");

    double d;
    if (plan) {
        /* constants that do not change the account: read when well-formed */
        hp->norm_eps = 1e-6f;
        hp->rope_theta = 10000.0f;
        if (hf_num(o, "rms_norm_eps", false, 1e-6, name, "", &d) == NB_OK) hp->norm_eps = (float)d;
        if (hf_num(o, "rope_theta", false, 10000.0, name, "", &d) == NB_OK) hp->rope_theta = (float)d;
        if (hf_rope_scaling(json_object_get(o, "rope_scaling"), name, hp) != NB_OK) hp->rope_scaling = NB_ROPE_SCALING_OTHER;
        bool tied_def = info ? info->tied_default : false;
        hp->tied_embeddings = soft_bool(o, "tie_word_embeddings", soft_bool(root, "tie_word_embeddings", tied_def));
        hp->qkv_bias = soft_bool(o, "attention_bias", false) || (info && info->qkv_bias);
    } else {
        NB_TRY(hf_num(o, "rms_norm_eps", false, 1e-6, name, "", &d));
        if (!(d > 0 && d < 1)) return nb_fail(NB_ERR_RANGE, "%s: field 'rms_norm_eps' = %g outside (0, 1)", name, d);
        hp->norm_eps = (float)d;
        NB_TRY(hf_num(o, "rope_theta", false, 10000.0, name, "", &d));
        if (!(d > 0)) return nb_fail(NB_ERR_RANGE, "%s: field 'rope_theta' = %g must be positive", name, d);
        hp->rope_theta = (float)d;
        NB_TRY(hf_rope_scaling(json_object_get(o, "rope_scaling"), name, hp));
        const json_t *tw = json_object_get(o, "tie_word_embeddings") ? o : root; /* a wrapper may say it outside */
        NB_TRY(hf_bool(tw, "tie_word_embeddings", info->tied_default, name, &hp->tied_embeddings));
        if (info->qkv_bias) {
            hp->qkv_bias = true;
        } else {
            bool ab, mb;
            NB_TRY(hf_bool(o, "attention_bias", false, name, &ab));
            NB_TRY(hf_bool(o, "mlp_bias", false, name, &mb));
            if (ab || mb)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%s' = true is not supported (biases on %s)", name,
                               ab ? "attention_bias" : "mlp_bias", ab ? "q/k/v/o projections" : "MLP projections");
            hp->qkv_bias = false;
        }
    }
    hp->qk_norm = info && info->qk_norm;

    /* sliding window (arch.h, nb_arch_swa) */
    nb_arch_swa swa = info ? info->swa : NB_SWA_ALWAYS;
    bool use_sw = swa == NB_SWA_ALWAYS || (plan && swa == NB_SWA_NONE);
    if (swa == NB_SWA_FLAG) {
        if (plan) use_sw = soft_bool(o, "use_sliding_window", false);
        else NB_TRY(hf_bool(o, "use_sliding_window", false, name, &use_sw));
    }
    hp->sliding_window = 0;
    if (use_sw) {
        NB_TRY(hf_int(o, "sliding_window", false, 0, 0, INT32_MAX, name, &v));
        hp->sliding_window = (int32_t)v;
    }

    const char *td = soft_str(o, "torch_dtype");
    if (!td) td = soft_str(root, "torch_dtype");
    if (!td) td = soft_str(root, "dtype"); /* newer transformers */
    out->torch_dtype[0] = '\0';
    if (td) snprintf(out->torch_dtype, sizeof out->torch_dtype, "%s", td);
    if (plan) return hf_quant_hint(json_object_get(root, "quantization_config"), name, &out->qhint);

    out->bos_token_id = out->eos_token_id = -1;
    NB_TRY(hf_int(root, "bos_token_id", false, -1, -1, INT32_MAX, name, &v));
    out->bos_token_id = (int32_t)v;
    const json_t *eos = json_object_get(root, "eos_token_id");
    if (eos && json_is_array(eos)) {
        const json_t *e0 = json_array_get(eos, 0);
        if (e0 && json_is_integer(e0) && json_integer_value(e0) >= 0 && json_integer_value(e0) <= INT32_MAX)
            out->eos_token_id = (int32_t)json_integer_value(e0);
        else if (json_array_size(eos))
            return nb_fail(NB_ERR_FORMAT, "%s: field 'eos_token_id': expected token ids", name);
    } else {
        NB_TRY(hf_int(root, "eos_token_id", false, -1, -1, INT32_MAX, name, &v));
        out->eos_token_id = (int32_t)v;
    }
    return nb_arch_desc_validate(hp, name);
}

nb_status nb_hfconfig_parse(const char *json, size_t len, const char *name, nb_hf_config *out) {
    return nb_hfconfig_parse_mode(json, len, name, NB_ARCH_RUN, out);
}

nb_status nb_hfconfig_parse_mode(const char *json, size_t len, const char *name, nb_arch_read mode, nb_hf_config *out) {
    memset(out, 0, sizeof *out);
    if (!name) name = "config.json";
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) return nb_fail(NB_ERR_FORMAT, "%s: JSON at byte %lld (line %d): %s", name, (long long)err.position, err.line,
                              err.text);
    nb_status rc = hf_parse_root(root, name, mode, out);
    json_decref(root);
    if (rc != NB_OK) nb_hfquant_free(&out->quant);
    return rc;
}

nb_status nb_hfconfig_load(const char *path, nb_hf_config *out) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    NB_TRY(nb_read_file(path, NB_HFCONFIG_MAX_BYTES, &text, &len));
    nb_status rc = nb_hfconfig_parse(text, len, path, out);
    free(text);
    return rc;
}

void nb_hfconfig_free(nb_hf_config *c) {
    if (c) nb_hfquant_free(&c->quant);
}
