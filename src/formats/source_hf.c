/* Model source for Hugging Face checkpoints: config.json + model.safetensors
 * or model.safetensors.index.json (shards), in one directory.
 *
 * `path` may be the directory, its config.json, a .safetensors file or the
 * index file; the others are looked up next to it. HF names are mapped to
 * GGUF names by the architecture table (formats/arch.c; ggml dim order: an
 * HF [out, in] row-major weight becomes ne = {in, out}, same bytes, no copy):
 *   model.embed_tokens.weight               -> token_embd.weight
 *   model.norm.weight                       -> output_norm.weight
 *   lm_head.weight                          -> output.weight (absent or tied: none)
 *   model.layers.N.input_layernorm.weight   -> blk.N.attn_norm.weight
 *   model.layers.N.self_attn.{q,k,v,o}_proj.weight -> blk.N.attn_{q,k,v,output}.weight
 *   model.layers.N.self_attn.{q,k,v}_proj.bias     -> blk.N.attn_{q,k,v}.bias (qwen2)
 *   model.layers.N.post_attention_layernorm.weight -> blk.N.ffn_norm.weight
 *   model.layers.N.mlp.{gate,up,down}_proj.weight  -> blk.N.ffn_{gate,up,down}.weight
 * Every expected tensor must exist with the shape config.json implies and
 * dtype F32, F16 or BF16. Q/K stay in HF's "rotate half" row order, so the
 * source says NB_ROPE_NEOX (weights are not permuted). Tensors with other
 * names are ignored (a warning counts them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "formats/hf_quant.h"
#include "formats/hfconfig.h"
#include "formats/safetensors.h"
#include "formats/source.h"

typedef struct hf_impl {
    nb_safetensors *st;
    char **names; /* GGUF names of s->tensors, owned */
    int64_t n_names;
    void **owned; /* blocks converted from quantized layouts (one per tensor or NULL) */
    int32_t **perms;
    nb_hf_quant quant;
} hf_impl;

static void hf_close(nb_source *s) {
    hf_impl *h = s->impl;
    if (h) {
        for (int64_t i = 0; i < h->n_names; i++) {
            free(h->names[i]);
            if (h->owned) free(h->owned[i]);
            if (h->perms) free(h->perms[i]);
        }
        free(h->names);
        free(h->owned);
        free(h->perms);
        nb_hfquant_free(&h->quant);
        nb_safetensors_close(h->st);
        free(h);
    }
    free(s->tensors);
    s->tensors = NULL;
    s->n_tensors = 0;
    s->impl = NULL;
}

static void hf_release(nb_source *s, const void *p, size_t n) {
    hf_impl *h = s->impl;
    if (h && h->st) nb_safetensors_release(h->st, p, n);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static char *join(const char *dir, const char *file) {
    size_t dl = strlen(dir), fl = strlen(file);
    char *p = nb_malloc(dl + fl + 2);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    size_t k = dl;
    if (dl && dir[dl - 1] != '/') p[k++] = '/';
    memcpy(p + k, file, fl + 1);
    return p;
}

/* Builder state while matching tensors. */
typedef struct hf_build {
    nb_source *s;
    hf_impl *h;
    bool *used;
    const char *cfg_path;
    int64_t cap;
} hf_build;

static void fmt_shape(char *buf, size_t n, int nd, const int64_t *d) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < nd && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Looks `hf` up, checks dtype and shape (row-major `want`), adds it as `gguf`.
 * Missing tensors fail unless `optional` (then *found = false). */
static void hf_mark(void *ctx, const nb_st_tensor *t) {
    hf_build *b = ctx;
    b->used[t - nb_safetensors_tensor(b->h->st, 0)] = true;
}

/* A quantized module has <module>.qweight / .weight_packed / ... instead of .weight. */
static bool hf_quant_present(const hf_build *b, const char *hf) {
    static const char *const sfx[] = {".qweight", ".weight_packed"};
    char n[300];
    size_t l = strlen(hf);
    if (!ends_with(hf, ".weight")) return false;
    for (size_t i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "%.*s%s", (int)(l - 7), hf, sfx[i]);
        if (nb_safetensors_find(b->h->st, n)) return true;
    }
    return false;
}

static nb_status hf_add(hf_build *b, const char *hf, const char *gguf, int nd, int64_t d0, int64_t d1, bool optional,
                        bool *found) {
    if (found) *found = false;
    const nb_st_tensor *t = nb_safetensors_find(b->h->st, hf);
    if (nd == 2 && b->h->quant.method != NB_HFQ_NONE && strcmp(gguf, "token_embd.weight") &&
        (t || hf_quant_present(b, hf))) {
        char *name = nb_strdup(gguf);
        if (!name) return NB_ERR_NOMEM;
        int64_t i = b->h->n_names;
        b->h->names[b->h->n_names++] = name;
        nb_tensor *out = &b->s->tensors[b->s->n_tensors];
        char module[256];
        snprintf(module, sizeof module, "%.*s", (int)(strlen(hf) - 7), hf);
        NB_TRY(nb_hfq_load_linear(b->h->st, &b->h->quant, module, name, d1, d0, out, &b->h->owned[i], &b->h->perms[i],
                                  hf_mark, b));
        b->s->n_tensors++;
        if (found) *found = true;
        return NB_OK;
    }
    int64_t want[2] = {d0, d1};
    char ws[64], hs[64];
    fmt_shape(ws, sizeof ws, nd, want);
    if (!t) {
        if (optional) return NB_OK;
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' (%s) is missing; expected shape %s from %s", b->s->path, hf, gguf, ws,
                       b->cfg_path);
    }
    const char *file = nb_safetensors_shard_path(b->h->st, t->shard);
    if (!t->has_type || (t->type != NB_F32 && t->type != NB_F16 && t->type != NB_BF16))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16)", file, hf,
                       t->dtype_name);
    bool ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        fmt_shape(hs, sizeof hs, t->n_dims, t->shape);
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': shape %s, expected %s (from %s)", file, hf, hs, ws, b->cfg_path);
    }
    char *name = nb_strdup(gguf);
    if (!name) return NB_ERR_NOMEM;
    b->h->names[b->h->n_names++] = name;
    nb_tensor *out = &b->s->tensors[b->s->n_tensors];
    NB_TRY(nb_st_tensor_view(t, name, out));
    b->s->n_tensors++;
    b->used[t - nb_safetensors_tensor(b->h->st, 0)] = true;
    if (found) *found = true;
    return NB_OK;
}

static nb_status hf_build_tensors(hf_build *b) {
    const nb_arch_desc *hp = &b->s->hp;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    char hf[256], gg[96];
    NB_TRY(hf_add(b, "model.embed_tokens.weight", "token_embd.weight", 2, V, E, false, NULL));
    NB_TRY(hf_add(b, "model.norm.weight", "output_norm.weight", 1, E, 0, false, NULL));
    if (!hp->tied_embeddings) {
        bool found;
        NB_TRY(hf_add(b, "lm_head.weight", "output.weight", 2, V, E, true, &found));
        if (!found) b->s->hp.tied_embeddings = true;
    } else {
        const nb_st_tensor *t = nb_safetensors_find(b->h->st, "lm_head.weight");
        if (t) b->used[t - nb_safetensors_tensor(b->h->st, 0)] = true; /* tied: the copy is not used */
    }
    int nl;
    const nb_arch_tensor *L = nb_arch_layer_tensors(hp->info, &nl);
    for (int l = 0; l < hp->n_layer; l++) {
        for (int i = 0; i < nl; i++) {
            nb_arch_role k = L[i].role;
            if ((k == NB_ROLE_Q_BIAS || k == NB_ROLE_KV_BIAS) && !hp->qkv_bias) continue;
            snprintf(hf, sizeof hf, "model.layers.%d.%s", l, L[i].hf);
            snprintf(gg, sizeof gg, "blk.%d.%s", l, L[i].gguf);
            int nd = (k == NB_ROLE_NORM || k == NB_ROLE_Q_BIAS || k == NB_ROLE_KV_BIAS) ? 1 : 2;
            int64_t d0 = 0, d1 = 0;
            switch (k) {
            case NB_ROLE_NORM: d0 = E; break;
            case NB_ROLE_Q: d0 = Q; d1 = E; break;
            case NB_ROLE_KV: d0 = KV; d1 = E; break;
            case NB_ROLE_O: d0 = E; d1 = Q; break;
            case NB_ROLE_FFN_IN: d0 = F; d1 = E; break;
            case NB_ROLE_FFN_OUT: d0 = E; d1 = F; break;
            case NB_ROLE_Q_BIAS: d0 = Q; break;
            case NB_ROLE_KV_BIAS: d0 = KV; break;
            default: return nb_fail(NB_ERR_INVALID, "%s: layer tensor '%s' has a model-level role", b->s->path, L[i].gguf);
            }
            NB_TRY(hf_add(b, hf, gg, nd, d0, d1, false, NULL));
        }
    }
    /* Tensors nobody asked for. */
    int64_t n_unused = 0;
    const char *first = NULL;
    for (int64_t i = 0; i < nb_safetensors_n_tensors(b->h->st); i++) {
        const char *n = nb_safetensors_tensor(b->h->st, i)->name;
        if (b->used[i] || ends_with(n, ".rotary_emb.inv_freq")) continue;
        if (!first) first = n;
        n_unused++;
    }
    if (n_unused) NB_WARN("%s: %lld tensors with unknown names ignored (first: '%s')", b->s->path, (long long)n_unused, first);
    return NB_OK;
}

nb_status nb_source_open_hf(const char *path, nb_source *out) {
    memset(out, 0, sizeof *out);
    nb_status rc = NB_OK;
    char *dir = NULL, *cfg = NULL, *weights = NULL;
    bool *used = NULL;
    out->format = "safetensors";
    out->path = nb_strdup(path);
    out->close_impl = hf_close;
    out->release_impl = hf_release;
    hf_impl *h = nb_calloc(1, sizeof *h);
    out->impl = h;
    if (!out->path || !h) { rc = NB_ERR_NOMEM; goto fail; }

    if (nb_is_dir(path)) {
        dir = nb_strdup(path);
    } else {
        const char *slash = strrchr(path, '/');
        dir = slash ? nb_strndup(path, (size_t)(slash - path) + 1) : nb_strdup("./");
        if (dir && (ends_with(path, ".safetensors") || ends_with(path, ".index.json"))) weights = nb_strdup(path);
        else if (dir && !ends_with(path, "config.json")) {
            rc = nb_fail(NB_ERR_INVALID, "%s: not an HF checkpoint (expected a directory, config.json, a .safetensors file or model.safetensors.index.json)",
                         path);
            goto fail;
        }
    }
    if (!dir) { rc = NB_ERR_NOMEM; goto fail; }
    cfg = nb_is_dir(path) || !ends_with(path, "config.json") ? join(dir, "config.json") : nb_strdup(path);
    if (!cfg) { rc = NB_ERR_NOMEM; goto fail; }
    if (!weights) {
        weights = join(dir, "model.safetensors.index.json");
        if (weights && !nb_file_exists(weights)) {
            free(weights);
            weights = join(dir, "model.safetensors");
            if (weights && !nb_file_exists(weights)) {
                rc = nb_fail(NB_ERR_NOT_FOUND, "%s: no model.safetensors.index.json or model.safetensors in %s", path, dir);
                goto fail;
            }
        }
        if (!weights) { rc = NB_ERR_NOMEM; goto fail; }
    }

    nb_hf_config hc;
    if ((rc = nb_hfconfig_load(cfg, &hc)) != NB_OK) goto fail;
    out->hp = hc.hp;
    h->quant = hc.quant; /* ownership moves to the source */
    rc = ends_with(weights, ".index.json") ? nb_safetensors_open_index(weights, &h->st) : nb_safetensors_open(weights, &h->st);
    if (rc != NB_OK) goto fail;

    /* At most 3 + 12 per layer tensors. */
    int64_t cap = 3 + 12 * (int64_t)out->hp.n_layer;
    out->tensors = nb_calloc((size_t)cap, sizeof *out->tensors);
    h->names = nb_calloc((size_t)cap, sizeof *h->names);
    h->owned = nb_calloc((size_t)cap, sizeof *h->owned);
    h->perms = nb_calloc((size_t)cap, sizeof *h->perms);
    used = nb_calloc((size_t)nb_safetensors_n_tensors(h->st) + 1, sizeof *used);
    if (!out->tensors || !h->names || !h->owned || !h->perms || !used) { rc = NB_ERR_NOMEM; goto fail; }
    hf_build b = {.s = out, .h = h, .used = used, .cfg_path = cfg, .cap = cap};
    if ((rc = hf_build_tensors(&b)) != NB_OK) goto fail;
    free(used);
    free(dir);
    free(cfg);
    free(weights);
    return NB_OK;
fail:
    free(used);
    free(dir);
    free(cfg);
    free(weights);
    hf_close(out);
    free(out->path);
    memset(out, 0, sizeof *out);
    return rc;
}
