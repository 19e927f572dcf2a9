/* Model source from a GGUF file: hyper-parameters from `<arch>.*` keys,
 * tensors straight from the mapping. */
#include "formats/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nb_status get_i32(const nb_gguf *g, const char *arch, const char *suffix, int64_t def, bool required,
                         int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (required) NB_TRY(nb_gguf_get_int(g, key, &v));
    else NB_TRY(nb_gguf_get_int_or(g, key, def, &v));
    if (v < 0 || v > INT32_MAX)
        return nb_fail(NB_ERR_FORMAT, "%s: metadata key '%s' = %lld is out of range", nb_gguf_path(g), key,
                       (long long)v);
    *out = (int32_t)v;
    return NB_OK;
}

static nb_status get_f32(const nb_gguf *g, const char *arch, const char *suffix, double def, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    NB_TRY(nb_gguf_get_float_or(g, key, def, &v));
    *out = (float)v;
    return NB_OK;
}

nb_status nb_hparams_from_gguf(const nb_gguf *g, nb_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    const char *arch;
    NB_TRY(nb_gguf_get_str(g, "general.architecture", &arch));
    if (!strcmp(arch, "llama") || !strcmp(arch, "mistral")) {
        hp->arch = NB_ARCH_LLAMA;
        hp->rope_style = NB_ROPE_NORM;
    } else if (!strcmp(arch, "qwen2")) {
        hp->arch = NB_ARCH_QWEN2;
        hp->rope_style = NB_ROPE_NEOX;
        hp->qkv_bias = true;
    } else {
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: general.architecture '%s' is not supported (supported: llama, "
                       "mistral, qwen2)", nb_gguf_path(g), arch);
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arch);
    NB_TRY(get_i32(g, arch, "embedding_length", 0, true, &hp->n_embd));
    NB_TRY(get_i32(g, arch, "block_count", 0, true, &hp->n_layer));
    NB_TRY(get_i32(g, arch, "feed_forward_length", 0, true, &hp->n_ff));
    NB_TRY(get_i32(g, arch, "attention.head_count", 0, true, &hp->n_head));
    NB_TRY(get_i32(g, arch, "attention.head_count_kv", hp->n_head, false, &hp->n_head_kv));
    NB_TRY(get_i32(g, arch, "context_length", 2048, false, &hp->n_ctx_train));
    if (hp->n_head <= 0)
        return nb_fail(NB_ERR_FORMAT, "%s: %s.attention.head_count must be positive", nb_gguf_path(g), arch);
    NB_TRY(get_i32(g, arch, "attention.key_length", hp->n_embd / hp->n_head, false, &hp->head_dim));
    NB_TRY(get_i32(g, arch, "rope.dimension_count", hp->head_dim, false, &hp->rope_dim));
    NB_TRY(get_f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, &hp->norm_eps));
    NB_TRY(get_f32(g, arch, "rope.freq_base", 10000.0, &hp->rope_theta));
    NB_TRY(get_i32(g, arch, "attention.sliding_window", 0, false, &hp->sliding_window));
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const nb_gguf_value *sc = nb_gguf_find(g, key);
    if (sc && sc->type == NB_GGUF_STRING && strcmp(sc->str, "none") != 0) {
        if (!strcmp(sc->str, "linear")) {
            hp->rope_scaling = NB_ROPE_SCALING_LINEAR;
            NB_TRY(get_f32(g, arch, "rope.scaling.factor", 1.0, &hp->rope_factor));
            if (!(hp->rope_factor > 0))
                return nb_fail(NB_ERR_FORMAT, "%s: %s.rope.scaling.factor must be positive", nb_gguf_path(g), arch);
        } else {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: %s = '%s' is not supported (supported: none, linear; llama3 "
                           "scaling comes as the rope_freqs.weight tensor)", nb_gguf_path(g), key, sc->str);
        }
    }
    const nb_tensor *emb = nb_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return nb_fail(NB_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", nb_gguf_path(g));
    int32_t nv = 0;
    NB_TRY(get_i32(g, arch, "vocab_size", 0, false, &nv));
    hp->n_vocab = nv ? nv : (int32_t)emb->ne[1];
    hp->tied_embeddings = nb_gguf_find_tensor(g, "output.weight") == NULL;
    return nb_hparams_validate(hp, nb_gguf_path(g));
}

static void close_gguf(nb_source *s) {
    nb_gguf_close((nb_gguf *)s->impl);
    free(s->tensors);
}

nb_status nb_source_open_gguf(const char *path, nb_source *out) {
    memset(out, 0, sizeof *out);
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_status st = nb_hparams_from_gguf(g, &out->hp);
    if (st != NB_OK) { nb_gguf_close(g); return st; }
    out->format = "gguf";
    out->path = nb_strdup(path);
    out->n_tensors = nb_gguf_n_tensors(g);
    out->tensors = nb_malloc((size_t)(out->n_tensors ? out->n_tensors : 1) * sizeof *out->tensors);
    if (!out->path || !out->tensors) {
        free(out->path);
        free(out->tensors);
        nb_gguf_close(g);
        return NB_ERR_NOMEM;
    }
    for (int64_t i = 0; i < out->n_tensors; i++) out->tensors[i] = *nb_gguf_tensor(g, i);
    out->gguf = g;
    out->impl = g;
    out->close_impl = close_gguf;
    return NB_OK;
}
