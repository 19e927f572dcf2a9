/* HF config.json -> nb_hparams (llama, mistral, qwen2). The field list, the
 * defaults and what is refused are in hfconfig.h. */
#include "formats/hfconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

#define HF_SUPPORTED "llama, mistral, qwen2"

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

static nb_status hf_rope_scaling(const json_t *rs, const char *name, nb_hparams *hp) {
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

static nb_status hf_parse_root(const json_t *root, const char *name, nb_hf_config *out) {
    nb_hparams *hp = &out->hp;
    if (!json_is_object(root)) return nb_fail(NB_ERR_FORMAT, "%s: expected a JSON object", name);

    const json_t *mt = json_object_get(root, "model_type");
    if (!mt || !json_is_string(mt))
        return nb_fail(NB_ERR_FORMAT, "%s: field 'model_type': missing or not a string (supported: " HF_SUPPORTED ")", name);
    const char *type = json_string_value(mt);
    int64_t def_ctx;
    if (!strcmp(type, "llama")) {
        hp->arch = NB_ARCH_LLAMA;
        def_ctx = 2048;
    } else if (!strcmp(type, "mistral")) {
        hp->arch = NB_ARCH_LLAMA;
        def_ctx = 131072;
    } else if (!strcmp(type, "qwen2")) {
        hp->arch = NB_ARCH_QWEN2;
        def_ctx = 32768;
    } else {
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field 'model_type' = '%s' is not supported (supported: " HF_SUPPORTED ")",
                       name, type);
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", type);

    NB_TRY(nb_hfquant_parse(json_object_get(root, "quantization_config"), name, &out->quant));
    const json_t *act = json_object_get(root, "hidden_act");
    if (act && !json_is_null(act) && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field 'hidden_act' = '%s' is not supported (only silu)", name,
                       json_is_string(act) ? json_string_value(act) : "(not a string)");

    int64_t v;
    NB_TRY(hf_int(root, "hidden_size", true, 0, 1, 1 << 20, name, &v));
    hp->n_embd = (int32_t)v;
    NB_TRY(hf_int(root, "num_hidden_layers", true, 0, 1, 1024, name, &v));
    hp->n_layer = (int32_t)v;
    NB_TRY(hf_int(root, "num_attention_heads", true, 0, 1, 4096, name, &v));
    hp->n_head = (int32_t)v;
    NB_TRY(hf_int(root, "num_key_value_heads", false, hp->n_head, 1, 4096, name, &v));
    hp->n_head_kv = (int32_t)v;
    NB_TRY(hf_int(root, "intermediate_size", true, 0, 1, 1 << 22, name, &v));
    hp->n_ff = (int32_t)v;
    NB_TRY(hf_int(root, "vocab_size", true, 0, 1, 1 << 24, name, &v));
    hp->n_vocab = (int32_t)v;
    NB_TRY(hf_int(root, "max_position_embeddings", false, def_ctx, 1, INT32_MAX, name, &v));
    hp->n_ctx_train = (int32_t)v;

    if (hp->n_head % hp->n_head_kv)
        return nb_fail(NB_ERR_RANGE, "%s: field 'num_attention_heads' = %d is not a multiple of 'num_key_value_heads' = %d",
                       name, hp->n_head, hp->n_head_kv);
    const json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        NB_TRY(hf_int(root, "head_dim", true, 0, 2, 4096, name, &v));
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
    hp->rope_dim = hp->head_dim;
    hp->rope_style = NB_ROPE_NEOX;

    double d;
    NB_TRY(hf_num(root, "rms_norm_eps", false, 1e-6, name, "", &d));
    if (!(d > 0 && d < 1)) return nb_fail(NB_ERR_RANGE, "%s: field 'rms_norm_eps' = %g outside (0, 1)", name, d);
    hp->norm_eps = (float)d;
    NB_TRY(hf_num(root, "rope_theta", false, 10000.0, name, "", &d));
    if (!(d > 0)) return nb_fail(NB_ERR_RANGE, "%s: field 'rope_theta' = %g must be positive", name, d);
    hp->rope_theta = (float)d;
    NB_TRY(hf_rope_scaling(json_object_get(root, "rope_scaling"), name, hp));

    NB_TRY(hf_bool(root, "tie_word_embeddings", false, name, &hp->tied_embeddings));
    if (hp->arch == NB_ARCH_QWEN2) {
        hp->qkv_bias = true;
    } else {
        bool ab, mb;
        NB_TRY(hf_bool(root, "attention_bias", false, name, &ab));
        NB_TRY(hf_bool(root, "mlp_bias", false, name, &mb));
        if (ab || mb)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%s' = true is not supported (biases on %s)", name,
                           ab ? "attention_bias" : "mlp_bias", ab ? "q/k/v/o projections" : "MLP projections");
        hp->qkv_bias = false;
    }

    hp->sliding_window = 0;
    bool use_sw = !strcmp(type, "mistral");
    if (hp->arch == NB_ARCH_QWEN2) NB_TRY(hf_bool(root, "use_sliding_window", false, name, &use_sw));
    if (use_sw) {
        NB_TRY(hf_int(root, "sliding_window", false, 0, 0, INT32_MAX, name, &v));
        hp->sliding_window = (int32_t)v;
    }

    const json_t *td = json_object_get(root, "torch_dtype");
    if (!td) td = json_object_get(root, "dtype"); /* newer transformers */
    out->torch_dtype[0] = '\0';
    if (td && json_is_string(td)) snprintf(out->torch_dtype, sizeof out->torch_dtype, "%s", json_string_value(td));
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
    return nb_hparams_validate(hp, name);
}

nb_status nb_hfconfig_parse(const char *json, size_t len, const char *name, nb_hf_config *out) {
    memset(out, 0, sizeof *out);
    if (!name) name = "config.json";
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) return nb_fail(NB_ERR_FORMAT, "%s: JSON at byte %lld (line %d): %s", name, (long long)err.position, err.line,
                              err.text);
    nb_status rc = hf_parse_root(root, name, out);
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
