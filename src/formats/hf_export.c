/* nb_source -> HF checkpoint directory (config.json + model.safetensors);
 * the name mapping and the Q/K row permutation are described in
 * hf_export.h. */
#include "formats/hf_export.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/half.h"
#include "base/log.h"
#include "formats/safetensors.h"

static const struct {
    const char *gguf, *hf;
} hf_global[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

static const struct {
    const char *gguf, *hf;
} hf_layer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

bool nb_hf_name_from_gguf(const char *gguf, char *buf, size_t n) {
    for (size_t i = 0; i < sizeof hf_global / sizeof hf_global[0]; i++)
        if (!strcmp(gguf, hf_global[i].gguf)) return (size_t)snprintf(buf, n, "%s", hf_global[i].hf) < n;
    unsigned layer;
    int pos = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &pos) != 1 || pos == 0) return false;
    for (size_t i = 0; i < sizeof hf_layer / sizeof hf_layer[0]; i++)
        if (!strcmp(gguf + pos, hf_layer[i].gguf))
            return (size_t)snprintf(buf, n, "model.layers.%u.%s", layer, hf_layer[i].hf) < n;
    return false;
}

static float ld(nb_dtype t, const uint8_t *p) {
    if (t == NB_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == NB_F16 ? nb_fp16_to_fp32(h) : nb_bf16_to_fp32(h);
}

static void st(nb_dtype t, uint8_t *p, float f) {
    if (t == NB_F32) {
        memcpy(p, &f, 4);
        return;
    }
    uint16_t h = t == NB_F16 ? nb_fp32_to_fp16(f) : nb_fp32_to_bf16(f);
    memcpy(p, &h, 2);
}

static size_t esize(nb_dtype t) { return t == NB_F32 ? 4 : 2; }

/* Source row of HF row r when converting interleaved (NORM) -> rotate-half. */
static int64_t src_row(int64_t r, int64_t hd, bool permute) {
    if (!permute) return r;
    int64_t h = r / hd, w = r % hd, half = hd / 2;
    int64_t j = w / half, i = w % half;
    return h * hd + 2 * i + j;
}

static nb_status hf_write_config(const nb_source *src, const char *path, const char *dtype) {
    const nb_hparams *hp = &src->hp;
    const char *mt = hp->arch == NB_ARCH_QWEN2 ? "qwen2" : (!strcmp(hp->arch_name, "mistral") ? "mistral" : "llama");
    const char *archs = !strcmp(mt, "qwen2") ? "Qwen2ForCausalLM" : !strcmp(mt, "mistral") ? "MistralForCausalLM"
                                                                                           : "LlamaForCausalLM";
    const char *td = !strcmp(dtype, "F16") ? "float16" : !strcmp(dtype, "BF16") ? "bfloat16" : "float32";
    json_t *c = json_object();
    if (!c) return NB_ERR_NOMEM;
    json_t *a = json_array();
    json_array_append_new(a, json_string(archs));
    json_object_set_new(c, "architectures", a);
    json_object_set_new(c, "model_type", json_string(mt));
    json_object_set_new(c, "hidden_size", json_integer(hp->n_embd));
    json_object_set_new(c, "intermediate_size", json_integer(hp->n_ff));
    json_object_set_new(c, "num_hidden_layers", json_integer(hp->n_layer));
    json_object_set_new(c, "num_attention_heads", json_integer(hp->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(hp->n_head_kv));
    json_object_set_new(c, "head_dim", json_integer(hp->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(hp->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(hp->n_ctx_train));
    json_object_set_new(c, "rms_norm_eps", json_real(hp->norm_eps));
    json_object_set_new(c, "rope_theta", json_real(hp->rope_theta));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(hp->tied_embeddings));
    json_object_set_new(c, "torch_dtype", json_string(td));
    if (hp->rope_scaling == NB_ROPE_SCALING_LINEAR) {
        json_t *r = json_object();
        json_object_set_new(r, "rope_type", json_string("linear"));
        json_object_set_new(r, "factor", json_real(hp->rope_factor));
        json_object_set_new(c, "rope_scaling", r);
    } else if (hp->rope_scaling == NB_ROPE_SCALING_LLAMA3) {
        json_t *r = json_object();
        json_object_set_new(r, "rope_type", json_string("llama3"));
        json_object_set_new(r, "factor", json_real(hp->rope_factor));
        json_object_set_new(r, "low_freq_factor", json_real(hp->rope_low_freq_factor));
        json_object_set_new(r, "high_freq_factor", json_real(hp->rope_high_freq_factor));
        json_object_set_new(r, "original_max_position_embeddings", json_integer(hp->rope_orig_ctx));
        json_object_set_new(c, "rope_scaling", r);
    }
    if (hp->sliding_window > 0) {
        json_object_set_new(c, "sliding_window", json_integer(hp->sliding_window));
        if (hp->arch == NB_ARCH_QWEN2) json_object_set_new(c, "use_sliding_window", json_true());
    } else if (hp->arch == NB_ARCH_QWEN2) {
        json_object_set_new(c, "use_sliding_window", json_false());
    }
    char *text = json_dumps(c, JSON_INDENT(2));
    json_decref(c);
    if (!text) return nb_fail(NB_ERR_NOMEM, "%s: cannot serialise config.json", path);
    nb_status rc = nb_write_file(path, text, strlen(text));
    free(text);
    return rc;
}

nb_status nb_hf_export(const nb_source *src, const char *dir, const char *dtype) {
    const nb_hparams *hp = &src->hp;
    nb_dtype out_t;
    if (!dtype) dtype = "F32";
    if (!strcmp(dtype, "F32")) out_t = NB_F32;
    else if (!strcmp(dtype, "F16")) out_t = NB_F16;
    else if (!strcmp(dtype, "BF16")) out_t = NB_BF16;
    else return nb_fail(NB_ERR_INVALID, "HF export: dtype '%s' not supported (F32, F16, BF16)", dtype);
    bool permute = hp->rope_style == NB_ROPE_NORM;
    if (permute && (hp->rope_dim != hp->head_dim || hp->head_dim % 2))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: HF export needs rope_dim (%d) == head_dim (%d), even, to reorder Q/K rows",
                       src->path, hp->rope_dim, hp->head_dim);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nb_fail(NB_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));

    size_t dl = strlen(dir);
    char *cfg = nb_malloc(dl + 32), *model = nb_malloc(dl + 32);
    nb_st_write_tensor *wt = nb_calloc((size_t)src->n_tensors + 1, sizeof *wt);
    char **names = nb_calloc((size_t)src->n_tensors + 1, sizeof *names);
    void **bufs = nb_calloc((size_t)src->n_tensors + 1, sizeof *bufs);
    size_t n = 0;
    nb_status rc = NB_OK;
    if (!cfg || !model || !wt || !names || !bufs) { rc = NB_ERR_NOMEM; goto done; }
    snprintf(cfg, dl + 32, "%s/config.json", dir);
    snprintf(model, dl + 32, "%s/model.safetensors", dir);

    for (int64_t k = 0; k < src->n_tensors; k++) {
        const nb_tensor *t = &src->tensors[k];
        char hf[256];
        if (!nb_hf_name_from_gguf(t->name, hf, sizeof hf)) {
            NB_WARN("%s: tensor '%s' has no HF name; not exported", src->path, t->name);
            continue;
        }
        if (hp->tied_embeddings && !strcmp(t->name, "output.weight")) continue;
        if (t->type != NB_F32 && t->type != NB_F16 && t->type != NB_BF16) {
            rc = nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': type %s cannot be exported (F32, F16, BF16 only)", src->path,
                         t->name, nb_dtype_name(t->type));
            goto done;
        }
        if (t->n_dims < 1 || t->n_dims > 2) {
            rc = nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': %d dims (1 or 2 expected)", src->path, t->name, t->n_dims);
            goto done;
        }
        bool qk = strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.");
        int64_t row = t->n_dims == 2 ? t->ne[0] : 1, rows = t->n_dims == 2 ? t->ne[1] : t->ne[0];
        bool perm = permute && qk;
        if (perm && rows % hp->head_dim) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': %lld rows, not a multiple of head_dim %d", src->path, t->name,
                         (long long)rows, hp->head_dim);
            goto done;
        }
        size_t ib = esize(t->type), ob = esize(out_t);
        uint64_t nel = (uint64_t)row * (uint64_t)rows;
        if (nel * ib != t->nbytes) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': %llu bytes for %llu elements", src->path, t->name,
                         (unsigned long long)t->nbytes, (unsigned long long)nel);
            goto done;
        }
        uint8_t *buf = nb_malloc(nel ? nel * ob : 1);
        if (!buf) { rc = NB_ERR_NOMEM; goto done; }
        bufs[n] = buf;
        const uint8_t *in = t->data;
        for (int64_t r = 0; r < rows; r++) {
            /* A 1-D tensor (bias) is `rows` rows of one element. */
            const uint8_t *srow = in + (uint64_t)src_row(r, hp->head_dim, perm) * (uint64_t)row * ib;
            uint8_t *drow = buf + (uint64_t)r * (uint64_t)row * ob;
            if (t->type == out_t) memcpy(drow, srow, (size_t)row * ib);
            else
                for (int64_t c = 0; c < row; c++) st(out_t, drow + c * ob, ld(t->type, srow + c * ib));
        }
        names[n] = nb_strdup(hf);
        if (!names[n]) { rc = NB_ERR_NOMEM; goto done; }
        wt[n].name = names[n];
        wt[n].dtype = dtype;
        wt[n].n_dims = t->n_dims;
        if (t->n_dims == 2) {
            wt[n].shape[0] = rows;
            wt[n].shape[1] = row;
        } else {
            wt[n].shape[0] = rows;
        }
        wt[n].data = buf;
        wt[n].nbytes = nel * ob;
        n++;
    }
    const nb_st_meta meta[] = {{"format", "pt"}, {"source", "nibble HF export"}};
    if ((rc = hf_write_config(src, cfg, dtype)) != NB_OK) goto done;
    rc = nb_safetensors_write(model, wt, n, meta, 2);
done:
    for (size_t i = 0; i < n + 1 && bufs && names; i++) {
        free(bufs[i]);
        free(names[i]);
    }
    free(bufs);
    free(names);
    free(wt);
    free(cfg);
    free(model);
    return rc;
}
