/* Model source for llama2.c checkpoints (karpathy/llama2.c run.c / export.py).
 *
 * Version 0 ("legacy", no magic), little-endian:
 *   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *     (vocab_size < 0: the classifier is not shared with the embedding)
 *   float32, each matrix row-major [out, in] as in PyTorch:
 *     token_embedding [vocab, dim]
 *     rms_att [layers, dim]
 *     wq [layers, n_heads*hs, dim]   wk, wv [layers, n_kv_heads*hs, dim]
 *     wo [layers, dim, n_heads*hs]   rms_ffn [layers, dim]
 *     w1 (gate) [layers, hidden, dim]  w2 (down) [layers, dim, hidden]
 *     w3 (up) [layers, hidden, dim]    rms_final [dim]
 *     freq_cis_real [seq_len, hs/2]  freq_cis_imag [seq_len, hs/2]  (unused)
 *     wcls [vocab, dim]              (only when not shared)
 *   hs = dim / n_heads.
 * Version 1: u32 magic 0x616b3432 ("ak42"), int32 version = 1, the 7 int32
 *   above (vocab_size positive), u8 shared_classifier, zero padding to 256
 *   bytes; then float32 rms_att, rms_ffn, rms_final, token_embedding, wq, wk,
 *   wv, wo, w1, w2, w3, [wcls]; no freq_cis tables.
 * Version 2 (int8 Q8_0 groups) is refused.
 *
 * The file size must equal exactly what the header implies. Tensors are
 * views into the read-only mapping under GGUF names (ne = {in, out}); Q/K
 * rows are in Meta's interleaved order, so RoPE rotates adjacent pairs
 * (NB_ROPE_NORM); theta 10000, RMSNorm eps 1e-5, n_ctx_train = seq_len. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "formats/source.h"

#define L2C_MAGIC 0x616b3432u
#define L2C_V1_HEADER 256

typedef struct l2c_impl {
    nb_map map;
    char **names;
    int64_t n_names;
} l2c_impl;

static void l2c_release(nb_source *s, const void *p, size_t n) { nb_map_release(&((l2c_impl *)s->impl)->map, p, n); }

static void l2c_close(nb_source *s) {
    l2c_impl *h = s->impl;
    if (h) {
        for (int64_t i = 0; i < h->n_names; i++) free(h->names[i]);
        free(h->names);
        nb_unmap(&h->map);
        free(h);
    }
    free(s->tensors);
    s->tensors = NULL;
    s->n_tensors = 0;
    s->impl = NULL;
}

static int32_t rd_i32(const uint8_t *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

/* Overflow-checked float counts: acc += a * b * c. */
static bool acc3(uint64_t *acc, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t t;
    return nb_mul_ok(a, b, &t) && nb_mul_ok(t, c, &t) && nb_add_ok(*acc, t, acc);
}

typedef struct l2c_hdr {
    int version;
    int32_t dim, hidden, n_layers, n_heads, n_kv, vocab, seq;
    bool shared;
    uint64_t header_bytes;
} l2c_hdr;

static nb_status l2c_check_field(const char *path, const char *field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        return nb_fail(NB_ERR_FORMAT, "%s: llama2.c header field '%s' = %lld outside the allowed range %lld..%lld", path,
                       field, (long long)v, (long long)lo, (long long)hi);
    return NB_OK;
}

static nb_status l2c_header(const char *path, const uint8_t *d, size_t size, l2c_hdr *h) {
    memset(h, 0, sizeof *h);
    if (size < 28)
        return nb_fail(NB_ERR_FORMAT, "%s: %zu bytes, shorter than the 28-byte llama2.c header", path, size);
    const uint8_t *p = d;
    if ((uint32_t)rd_i32(d) == L2C_MAGIC) {
        if (size < L2C_V1_HEADER)
            return nb_fail(NB_ERR_FORMAT, "%s: llama2.c 'ak42' header needs %d bytes, file has %zu", path, L2C_V1_HEADER, size);
        int32_t ver = rd_i32(d + 4);
        if (ver == 2)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: llama2.c version 2 (int8 Q8_0) checkpoints are not supported; export with --version 0 or 1",
                           path);
        if (ver != 1)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: llama2.c header field 'version' = %d is not supported (0 and 1 are)",
                           path, ver);
        h->version = 1;
        p = d + 8;
        h->header_bytes = L2C_V1_HEADER;
        if (d[36] > 1)
            return nb_fail(NB_ERR_FORMAT, "%s: llama2.c header field 'shared_classifier' (byte 36) = %u, expected 0 or 1", path,
                           d[36]);
        h->shared = d[36] == 1;
    } else {
        h->header_bytes = 28;
    }
    h->dim = rd_i32(p);
    h->hidden = rd_i32(p + 4);
    h->n_layers = rd_i32(p + 8);
    h->n_heads = rd_i32(p + 12);
    h->n_kv = rd_i32(p + 16);
    h->vocab = rd_i32(p + 20);
    h->seq = rd_i32(p + 24);
    if (h->version == 0) {
        h->shared = h->vocab > 0;
        if (h->vocab < 0 && h->vocab != INT32_MIN) h->vocab = -h->vocab;
    }
    NB_TRY(l2c_check_field(path, "dim", h->dim, 1, 1 << 20));
    NB_TRY(l2c_check_field(path, "hidden_dim", h->hidden, 1, 1 << 22));
    NB_TRY(l2c_check_field(path, "n_layers", h->n_layers, 1, 1024));
    NB_TRY(l2c_check_field(path, "n_heads", h->n_heads, 1, 4096));
    if (h->dim % h->n_heads)
        return nb_fail(NB_ERR_FORMAT, "%s: llama2.c header field 'n_heads' = %d does not divide 'dim' = %d", path, h->n_heads,
                       h->dim);
    NB_TRY(l2c_check_field(path, "n_kv_heads", h->n_kv, 1, h->n_heads));
    NB_TRY(l2c_check_field(path, "vocab_size", h->vocab, 1, 1 << 24));
    NB_TRY(l2c_check_field(path, "seq_len", h->seq, 1, 1 << 24));
    if (h->n_heads % h->n_kv)
        return nb_fail(NB_ERR_FORMAT, "%s: llama2.c header field 'n_kv_heads' = %d does not divide 'n_heads' = %d", path,
                       h->n_kv, h->n_heads);
    if ((h->dim / h->n_heads) % 2)
        return nb_fail(NB_ERR_FORMAT, "%s: llama2.c head size dim/n_heads = %d must be even for RoPE", path,
                       h->dim / h->n_heads);
    return NB_OK;
}

/* Byte offsets of each section (in floats from the header end). */
typedef struct l2c_layout {
    uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
    uint64_t end_shared; /* floats when the classifier is shared */
} l2c_layout;

static bool l2c_compute_layout(const l2c_hdr *h, l2c_layout *o) {
    uint64_t D = (uint64_t)h->dim, F = (uint64_t)h->hidden, L = (uint64_t)h->n_layers, V = (uint64_t)h->vocab;
    uint64_t hs = D / (uint64_t)h->n_heads, KVD = (uint64_t)h->n_kv * hs;
    uint64_t p = 0;
    bool ok = true;
#define SEC(field, a, b, c) (o->field = p, ok = ok && acc3(&p, (a), (b), (c)))
    if (h->version == 0) {
        SEC(emb, V, D, 1);
        SEC(rms_att, L, D, 1);
        SEC(wq, L, D, D);
        SEC(wk, L, D, KVD);
        SEC(wv, L, D, KVD);
        SEC(wo, L, D, D);
        SEC(rms_ffn, L, D, 1);
        SEC(w1, L, F, D);
        SEC(w2, L, D, F);
        SEC(w3, L, F, D);
        SEC(rms_final, D, 1, 1);
        ok = ok && acc3(&p, 2, (uint64_t)h->seq, hs / 2); /* freq_cis real + imag */
    } else {
        SEC(rms_att, L, D, 1);
        SEC(rms_ffn, L, D, 1);
        SEC(rms_final, D, 1, 1);
        SEC(emb, V, D, 1);
        SEC(wq, L, D, D);
        SEC(wk, L, D, KVD);
        SEC(wv, L, D, KVD);
        SEC(wo, L, D, D);
        SEC(w1, L, F, D);
        SEC(w2, L, D, F);
        SEC(w3, L, F, D);
    }
    o->end_shared = p;
    SEC(wcls, V, D, 1);
#undef SEC
    return ok;
}

nb_status nb_source_open_llama2c(const char *path, nb_source *out) {
    memset(out, 0, sizeof *out);
    out->format = "llama2c";
    out->close_impl = l2c_close;
    out->release_impl = l2c_release;
    out->path = nb_strdup(path);
    l2c_impl *im = nb_calloc(1, sizeof *im);
    out->impl = im;
    nb_status rc = NB_OK;
    if (!out->path || !im) { rc = NB_ERR_NOMEM; goto fail; }
    if ((rc = nb_map_file(path, &im->map)) != NB_OK) goto fail;
    const uint8_t *d = im->map.data;
    size_t size = im->map.size;
    l2c_hdr h;
    if ((rc = l2c_header(path, d, size, &h)) != NB_OK) goto fail;
    l2c_layout lay;
    uint64_t with_cls = 0, bytes_shared = 0, bytes_cls = 0;
    bool ok = l2c_compute_layout(&h, &lay);
    ok = ok && nb_add_ok(lay.wcls, (uint64_t)h.vocab * (uint64_t)h.dim, &with_cls) && nb_mul_ok(lay.end_shared, 4, &bytes_shared) &&
         nb_add_ok(bytes_shared, h.header_bytes, &bytes_shared) && nb_mul_ok(with_cls, 4, &bytes_cls) &&
         nb_add_ok(bytes_cls, h.header_bytes, &bytes_cls);
    if (!ok) {
        rc = nb_fail(NB_ERR_FORMAT, "%s: llama2.c header implies a size that overflows (dim=%d, hidden_dim=%d, n_layers=%d, vocab_size=%d)",
                     path, h.dim, h.hidden, h.n_layers, h.vocab);
        goto fail;
    }
    uint64_t want = h.shared ? bytes_shared : bytes_cls;
    if ((uint64_t)size != want) {
        uint64_t other = h.shared ? bytes_cls : bytes_shared;
        rc = nb_fail(NB_ERR_FORMAT,
                     "%s: file size %zu bytes, but the llama2.c v%d header (dim=%d, hidden_dim=%d, n_layers=%d, n_heads=%d, "
                     "n_kv_heads=%d, vocab_size=%d, seq_len=%d) implies %llu bytes with a %s classifier%s",
                     path, size, h.version, h.dim, h.hidden, h.n_layers, h.n_heads, h.n_kv, h.vocab, h.seq,
                     (unsigned long long)want, h.shared ? "shared" : "separate",
                     (uint64_t)size == other ? (h.version == 0 ? " (the size would fit the other classifier layout: check the sign of field 'vocab_size')"
                                                               : " (the size would fit the other classifier layout: check field 'shared_classifier')")
                                             : "");
        goto fail;
    }

    nb_arch_desc *hp = &out->hp;
    hp->info = nb_arch_find_gguf("llama");
    hp->arch = hp->info->runs;
    hp->source = NB_ARCH_SRC_LLAMA2C;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", hp->info->gguf);
    hp->n_vocab = h.vocab;
    hp->n_embd = h.dim;
    hp->n_layer = h.n_layers;
    hp->n_head = h.n_heads;
    hp->n_head_kv = h.n_kv;
    hp->head_dim = h.dim / h.n_heads;
    hp->n_ff = h.hidden;
    hp->n_ctx_train = h.seq;
    hp->norm_eps = 1e-5f;
    hp->rope_theta = 10000.0f;
    hp->rope_dim = hp->head_dim;
    hp->rope_style = NB_ROPE_NORM;
    hp->rope_scaling = NB_ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    hp->tied_embeddings = h.shared;
    if ((rc = nb_arch_desc_validate(hp, path)) != NB_OK) goto fail;

    int64_t cap = 3 + 9 * (int64_t)h.n_layers;
    out->tensors = nb_calloc((size_t)cap, sizeof *out->tensors);
    im->names = nb_calloc((size_t)cap, sizeof *im->names);
    if (!out->tensors || !im->names) { rc = NB_ERR_NOMEM; goto fail; }
    const float *base = (const float *)(d + h.header_bytes);
    int64_t D = h.dim, F = h.hidden, V = h.vocab, KVD = (int64_t)h.n_kv * hp->head_dim;
    char nm[96];
#define ADD(NAME, OFF, ND, NE0, NE1)                                          \
    do {                                                                      \
        char *s_ = nb_strdup(NAME);                                           \
        if (!s_) { rc = NB_ERR_NOMEM; goto fail; }                             \
        im->names[im->n_names++] = s_;                                        \
        nb_tensor *t_ = &out->tensors[out->n_tensors++];                      \
        t_->name = s_;                                                        \
        t_->type = NB_F32;                                                    \
        t_->n_dims = (ND);                                                    \
        t_->ne[0] = (NE0); t_->ne[1] = (NE1); t_->ne[2] = t_->ne[3] = 1;      \
        t_->data = base + (OFF);                                              \
        t_->nbytes = (uint64_t)(NE0) * (uint64_t)(NE1) * 4u;                  \
    } while (0)
    ADD("token_embd.weight", lay.emb, 2, D, V);
    ADD("output_norm.weight", lay.rms_final, 1, D, 1);
    if (!h.shared) ADD("output.weight", lay.wcls, 2, D, V);
    for (int64_t l = 0; l < h.n_layers; l++) {
        snprintf(nm, sizeof nm, "blk.%lld.attn_norm.weight", (long long)l);
        ADD(nm, lay.rms_att + l * D, 1, D, 1);
        snprintf(nm, sizeof nm, "blk.%lld.attn_q.weight", (long long)l);
        ADD(nm, lay.wq + l * D * D, 2, D, D);
        snprintf(nm, sizeof nm, "blk.%lld.attn_k.weight", (long long)l);
        ADD(nm, lay.wk + l * D * KVD, 2, D, KVD);
        snprintf(nm, sizeof nm, "blk.%lld.attn_v.weight", (long long)l);
        ADD(nm, lay.wv + l * D * KVD, 2, D, KVD);
        snprintf(nm, sizeof nm, "blk.%lld.attn_output.weight", (long long)l);
        ADD(nm, lay.wo + l * D * D, 2, D, D);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_norm.weight", (long long)l);
        ADD(nm, lay.rms_ffn + l * D, 1, D, 1);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_gate.weight", (long long)l);
        ADD(nm, lay.w1 + l * F * D, 2, D, F);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_up.weight", (long long)l);
        ADD(nm, lay.w3 + l * F * D, 2, D, F);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_down.weight", (long long)l);
        ADD(nm, lay.w2 + l * D * F, 2, F, D);
    }
#undef ADD
    return NB_OK;
fail:
    l2c_close(out);
    free(out->path);
    memset(out, 0, sizeof *out);
    return rc;
}
