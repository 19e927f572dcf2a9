/* nb_source -> HF checkpoint directory (config.json + model.safetensors);
 * the name mapping and the Q/K row permutation are described in
 * hf_export.h. */
#include "formats/hf_export.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/half.h"
#include "base/log.h"
#include "formats/hf_quant.h"
#include "formats/safetensors.h"
#include "base/blocks.h"

/* Names from the architecture table (formats/arch.c): the llama layout,
 * which every architecture the engine runs shares. */
static bool hf_rename(const char *name, bool to_hf, char *buf, size_t n) {
    int ng, nl;
    const nb_arch_tensor *g = nb_arch_model_tensors(&ng), *L = nb_arch_layer_tensors(NULL, &nl);
    for (int i = 0; i < ng; i++)
        if (!strcmp(name, to_hf ? g[i].gguf : g[i].hf)) return (size_t)snprintf(buf, n, "%s", to_hf ? g[i].hf : g[i].gguf) < n;
    unsigned layer;
    int pos = 0;
    if (sscanf(name, to_hf ? "blk.%u.%n" : "model.layers.%u.%n", &layer, &pos) != 1 || pos == 0) return false;
    for (int i = 0; i < nl; i++)
        if (!strcmp(name + pos, to_hf ? L[i].gguf : L[i].hf))
            return (size_t)snprintf(buf, n, to_hf ? "model.layers.%u.%s" : "blk.%u.%s", layer, to_hf ? L[i].hf : L[i].gguf) < n;
    return false;
}

bool nb_hf_name_from_gguf(const char *gguf, char *buf, size_t n) { return hf_rename(gguf, true, buf, n); }
bool nb_hf_name_from_hf(const char *hf, char *buf, size_t n) { return hf_rename(hf, false, buf, n); }

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

static nb_status hf_write_config(const nb_source *src, const char *path, const char *dtype, json_t *qc) {
    const nb_arch_desc *hp = &src->hp;
    const nb_arch_info *row = hp->info && hp->info->hf && hp->info->hf_class ? hp->info : nb_arch_info_of(hp->arch);
    if (!row || !row->hf_class) return nb_fail(NB_ERR_UNSUPPORTED, "%s: architecture '%s' has no HF export", path, hp->arch_name);
    const char *mt = row->hf, *archs = row->hf_class;
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
        if (row->swa == NB_SWA_FLAG) json_object_set_new(c, "use_sliding_window", json_true());
    } else if (row->swa == NB_SWA_FLAG) {
        json_object_set_new(c, "use_sliding_window", json_false());
    }
    if (qc) json_object_set_new(c, "quantization_config", qc);
    char *text = json_dumps(c, JSON_INDENT(2));
    json_decref(c);
    if (!text) return nb_fail(NB_ERR_NOMEM, "%s: cannot serialise config.json", path);
    nb_status rc = nb_write_file(path, text, strlen(text));
    free(text);
    return rc;
}


/* ---- export ----------------------------------------------------------- */

typedef enum { FAM_NONE, FAM_W4, FAM_W8, FAM_FP8, FAM_NF4 } qfam;

static qfam family(nb_dtype t, int *G, bool *sym) {
    switch ((int)t) {
    case NB_W4G32: *G = 32; *sym = false; return FAM_W4;
    case NB_W4G64: *G = 64; *sym = false; return FAM_W4;
    case NB_W4G128: *G = 128; *sym = false; return FAM_W4;
    case NB_W4G32S: *G = 32; *sym = true; return FAM_W4;
    case NB_W4G64S: *G = 64; *sym = true; return FAM_W4;
    case NB_W4G128S: *G = 128; *sym = true; return FAM_W4;
    case NB_W8: case NB_W8A8: return FAM_W8;
    case NB_FP8_E4M3: return FAM_FP8;
    case NB_NF4: return FAM_NF4;
    default: return FAM_NONE;
    }
}

typedef struct exp_list {
    nb_st_write_tensor *wt;
    void **bufs;
    char **names;
    size_t n, cap;
} exp_list;

static nb_status ex_add(exp_list *l, const char *name, const char *dtype, int nd, int64_t d0, int64_t d1, void *buf,
                        uint64_t nbytes) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        nb_st_write_tensor *wt = realloc(l->wt, nc * sizeof *wt);
        if (wt) l->wt = wt;
        void **b = realloc(l->bufs, nc * sizeof *b);
        if (b) l->bufs = b;
        char **nm = realloc(l->names, nc * sizeof *nm);
        if (nm) l->names = nm;
        if (!wt || !b || !nm) {
            free(buf);
            return NB_ERR_NOMEM;
        }
        l->cap = nc;
    }
    char *n = nb_strdup(name);
    if (!n) {
        free(buf);
        return NB_ERR_NOMEM;
    }
    nb_st_write_tensor *w = &l->wt[l->n];
    memset(w, 0, sizeof *w);
    w->name = n;
    w->dtype = dtype;
    w->n_dims = nd;
    w->shape[0] = d0;
    w->shape[1] = d1;
    w->data = buf;
    w->nbytes = nbytes;
    l->bufs[l->n] = buf;
    l->names[l->n] = n;
    l->n++;
    return NB_OK;
}

static void ex_free(exp_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->bufs[i]);
        free(l->names[i]);
    }
    free(l->wt);
    free(l->bufs);
    free(l->names);
}

static void *xmalloc(uint64_t n) { return malloc(n ? (size_t)n : 1); }

/* One quantized matrix -> the layout's tensors under HF module `mod`. */
static nb_status ex_quant(exp_list *l, const nb_tensor *t, const char *mod, const char *layout, const int64_t *rows) {
    int64_t K = t->ne[0], R = t->ne[1];
    int G = 0;
    bool sym = false;
    qfam f = family(t->type, &G, &sym);
    char n[320];
    if (f == FAM_W4) {
        nb_hfq_unpacked u;
        NB_TRY(nb_hfq_from_w4g(t->data, G, K, R, rows, &u));
        int64_t ng = K / G;
        nb_status rc = NB_OK;
        if (!strcmp(layout, "awq") || !strcmp(layout, "gptq")) {
            if (R % 8) {
                nb_hfq_unpacked_free(&u);
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: %lld output rows, not a multiple of 8 (%s packs 8 per int32)", t->name,
                               (long long)R, layout);
            }
            uint32_t *qw = xmalloc((uint64_t)K * R / 2), *qz = xmalloc((uint64_t)ng * R / 2);
            uint16_t *sc = xmalloc((uint64_t)ng * R * 2);
            int32_t *gi = !strcmp(layout, "gptq") ? xmalloc((uint64_t)K * 4) : NULL;
            if (!qw || !qz || !sc || (!gi && !strcmp(layout, "gptq"))) {
                free(qw); free(qz); free(sc); free(gi);
                nb_hfq_unpacked_free(&u);
                return NB_ERR_NOMEM;
            }
            if (gi) nb_hfq_pack_gptq(&u, qw, qz, sc, gi);
            else nb_hfq_pack_awq(&u, qw, qz, sc);
            snprintf(n, sizeof n, "%s.qweight", mod);
            if (gi) rc = ex_add(l, n, "I32", 2, K / 8, R, qw, (uint64_t)K * R / 2);
            else rc = ex_add(l, n, "I32", 2, K, R / 8, qw, (uint64_t)K * R / 2);
            snprintf(n, sizeof n, "%s.qzeros", mod);
            if (rc == NB_OK) rc = ex_add(l, n, "I32", 2, ng, R / 8, qz, (uint64_t)ng * R / 2);
            else free(qz);
            snprintf(n, sizeof n, "%s.scales", mod);
            if (rc == NB_OK) rc = ex_add(l, n, "F16", 2, ng, R, sc, (uint64_t)ng * R * 2);
            else free(sc);
            snprintf(n, sizeof n, "%s.g_idx", mod);
            if (gi && rc == NB_OK) rc = ex_add(l, n, "I32", 1, K, 0, gi, (uint64_t)K * 4);
            else if (gi) free(gi);
        } else {
            uint32_t *wp = xmalloc((uint64_t)K * R / 2), *zp = sym ? NULL : xmalloc((uint64_t)(R + 7) / 8 * ng * 4);
            uint16_t *sc = xmalloc((uint64_t)ng * R * 2);
            int64_t *shp = xmalloc(16);
            if (!wp || !sc || !shp || (!sym && !zp)) {
                free(wp); free(zp); free(sc); free(shp);
                nb_hfq_unpacked_free(&u);
                return NB_ERR_NOMEM;
            }
            nb_hfq_pack_ct(&u, wp, sc, zp);
            shp[0] = R;
            shp[1] = K;
            snprintf(n, sizeof n, "%s.weight_packed", mod);
            rc = ex_add(l, n, "I32", 2, R, K / 8, wp, (uint64_t)K * R / 2);
            snprintf(n, sizeof n, "%s.weight_scale", mod);
            if (rc == NB_OK) rc = ex_add(l, n, "F16", 2, R, ng, sc, (uint64_t)ng * R * 2);
            else free(sc);
            snprintf(n, sizeof n, "%s.weight_shape", mod);
            if (rc == NB_OK) rc = ex_add(l, n, "I64", 1, 2, 0, shp, 16);
            else free(shp);
            snprintf(n, sizeof n, "%s.weight_zero_point", mod);
            if (zp && rc == NB_OK) rc = ex_add(l, n, "I32", 2, (R + 7) / 8, ng, zp, (uint64_t)(R + 7) / 8 * ng * 4);
            else free(zp);
        }
        nb_hfq_unpacked_free(&u);
        return rc;
    }
    if (f == FAM_W8 || f == FAM_FP8) {
        /* one scale per row: every 32-block of a row must carry the same d */
        uint8_t *w = xmalloc((uint64_t)K * R);
        float *sc = xmalloc((uint64_t)R * 4);
        if (!w || !sc) {
            free(w);
            free(sc);
            return NB_ERR_NOMEM;
        }
        for (int64_t r = 0; r < R; r++) {
            const nb_block_fp8 *b = (const nb_block_fp8 *)t->data + (rows ? rows[r] : r) * (K / 32);
            for (int64_t j = 0; j < K / 32; j++) {
                nb_block_fp8 x;
                memcpy(&x, &b[j], sizeof x);
                if (j == 0) sc[r] = x.d;
                else if (x.d != sc[r]) {
                    free(w);
                    free(sc);
                    return nb_fail(NB_ERR_UNSUPPORTED, "%s: row %lld has different scales in its blocks; compressed-tensors "
                                   "stores one scale per output channel", t->name, (long long)r);
                }
                memcpy(w + r * K + j * 32, x.f8, 32);
            }
        }
        snprintf(n, sizeof n, "%s.weight", mod);
        nb_status rc = ex_add(l, n, f == FAM_FP8 ? "F8_E4M3" : "I8", 2, R, K, w, (uint64_t)K * R);
        snprintf(n, sizeof n, "%s.weight_scale", mod);
        if (rc == NB_OK) rc = ex_add(l, n, "F32", 2, R, 1, sc, (uint64_t)R * 4);
        else free(sc);
        return rc;
    }
    /* NF4 -> bitsandbytes: flattened [R, K], element 2j in the high nibble */
    uint64_t nel = (uint64_t)K * R;
    uint8_t *p = xmalloc(nel / 2);
    float *am = xmalloc(nel / 64 * 4), *qm = xmalloc(64);
    if (!p || !am || !qm) {
        free(p); free(am); free(qm);
        return NB_ERR_NOMEM;
    }
    memset(p, 0, nel / 2);
    for (int64_t r = 0; r < R; r++)
        for (int64_t b = 0; b < K / 64; b++) {
            nb_block_nf4 x;
            memcpy(&x, (const nb_block_nf4 *)t->data + (rows ? rows[r] : r) * (K / 64) + b, sizeof x);
            int64_t e0 = r * K + b * 64;
            am[e0 / 64] = x.absmax;
            for (int j = 0; j < 64; j++) {
                uint8_t q = (uint8_t)(j < 32 ? x.qs[j] & 15 : x.qs[j - 32] >> 4);
                int64_t e = e0 + j;
                p[e / 2] |= (uint8_t)(e % 2 ? q : q << 4);
            }
        }
    memcpy(qm, nb_hfq_nf4_levels, 64);
    char js[256];
    int jl = snprintf(js, sizeof js, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [%lld, %lld]}",
                      (long long)R, (long long)K);
    char *jb = xmalloc((uint64_t)jl);
    if (!jb) {
        free(p); free(am); free(qm);
        return NB_ERR_NOMEM;
    }
    memcpy(jb, js, (size_t)jl);
    snprintf(n, sizeof n, "%s.weight", mod);
    nb_status rc = ex_add(l, n, "U8", 2, (int64_t)(nel / 2), 1, p, nel / 2);
    snprintf(n, sizeof n, "%s.weight.absmax", mod);
    if (rc == NB_OK) rc = ex_add(l, n, "F32", 1, (int64_t)(nel / 64), 0, am, nel / 64 * 4);
    else free(am);
    snprintf(n, sizeof n, "%s.weight.quant_map", mod);
    if (rc == NB_OK) rc = ex_add(l, n, "F32", 1, 16, 0, qm, 64);
    else free(qm);
    snprintf(n, sizeof n, "%s.weight.quant_state.bitsandbytes__nf4", mod);
    if (rc == NB_OK) rc = ex_add(l, n, "U8", 1, jl, 0, jb, (uint64_t)jl);
    else free(jb);
    return rc;
}

static json_t *str_list(char **v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

/* The GPTQ recipe a calibrated nibble quantize recorded (quantize_calib.c's
 * nibble.quantize.* keys); zero values for other sources. */
typedef struct gptq_recipe {
    bool gptq;           /* nibble.quantize.method = "gptq" */
    bool desc_act, static_groups;
    double damp;
} gptq_recipe;

static gptq_recipe read_recipe(const nb_source *src) {
    gptq_recipe r = {.damp = 0.01};
    const char *m = NULL;
    if (!src->gguf || nb_gguf_get_str(src->gguf, "nibble.quantize.method", &m) != NB_OK || strcmp(m, "gptq")) return r;
    r.gptq = true;
    if (nb_gguf_get_bool_or(src->gguf, "nibble.quantize.desc_act", false, &r.desc_act) != NB_OK) r.desc_act = false;
    if (nb_gguf_get_bool_or(src->gguf, "nibble.quantize.static_groups", false, &r.static_groups) != NB_OK)
        r.static_groups = false;
    if (nb_gguf_get_float_or(src->gguf, "nibble.quantize.damp", 0.01, &r.damp) != NB_OK) r.damp = 0.01;
    r.damp = round(r.damp * 1e6) / 1e6; /* stored as f32: 0.01 reads back as 0.0099999998 */
    return r;
}

static json_t *quant_config(const char *layout, qfam f, int G, bool sym, bool a8, const gptq_recipe *rc, char **ign,
                            size_t n_ign) {
    json_t *q = json_object();
    if (!strcmp(layout, "awq")) {
        json_object_set_new(q, "quant_method", json_string("awq"));
        json_object_set_new(q, "bits", json_integer(4));
        json_object_set_new(q, "group_size", json_integer(G));
        json_object_set_new(q, "version", json_string("gemm"));
        json_object_set_new(q, "zero_point", json_true());
        json_object_set_new(q, "modules_to_not_convert", n_ign ? str_list(ign, n_ign) : json_null());
    } else if (!strcmp(layout, "gptq")) {
        json_object_set_new(q, "quant_method", json_string("gptq"));
        json_object_set_new(q, "bits", json_integer(4));
        json_object_set_new(q, "group_size", json_integer(G));
        /* act order in nibble implies static groups (quant/gptq.h): the groups stay contiguous, so g_idx is
         * k / group_size, as AutoGPTQ writes it for desc_act with static_groups */
        json_object_set_new(q, "desc_act", json_boolean(rc->desc_act));
        json_object_set_new(q, "sym", json_boolean(sym));
        json_object_set_new(q, "static_groups", json_boolean(rc->static_groups || rc->desc_act));
        json_object_set_new(q, "true_sequential", json_true());
        json_object_set_new(q, "damp_percent", json_real(rc->damp));
        json_object_set_new(q, "checkpoint_format", json_string("gptq"));
        if (n_ign) json_object_set_new(q, "modules_to_not_convert", str_list(ign, n_ign));
    } else if (!strcmp(layout, "bitsandbytes")) {
        json_object_set_new(q, "quant_method", json_string("bitsandbytes"));
        json_object_set_new(q, "load_in_4bit", json_true());
        json_object_set_new(q, "load_in_8bit", json_false());
        json_object_set_new(q, "bnb_4bit_quant_type", json_string("nf4"));
        json_object_set_new(q, "bnb_4bit_use_double_quant", json_false());
        json_object_set_new(q, "bnb_4bit_compute_dtype", json_string("float16"));
        json_object_set_new(q, "bnb_4bit_quant_storage", json_string("uint8"));
        json_object_set_new(q, "llm_int8_skip_modules", str_list(ign, n_ign));
    } else {
        json_t *w = json_object(), *g = json_object(), *groups = json_object();
        json_object_set_new(w, "num_bits", json_integer(f == FAM_W4 ? 4 : 8));
        json_object_set_new(w, "type", json_string(f == FAM_FP8 ? "float" : "int"));
        json_object_set_new(w, "symmetric", json_boolean(f != FAM_W4 || sym));
        json_object_set_new(w, "strategy", json_string(f == FAM_W4 ? "group" : "channel"));
        json_object_set_new(w, "group_size", f == FAM_W4 ? json_integer(G) : json_null());
        json_object_set_new(w, "dynamic", json_false());
        json_t *ia = json_null();
        if (a8) {
            ia = json_object();
            json_object_set_new(ia, "num_bits", json_integer(8));
            json_object_set_new(ia, "type", json_string("int"));
            json_object_set_new(ia, "symmetric", json_true());
            json_object_set_new(ia, "strategy", json_string("token"));
            json_object_set_new(ia, "dynamic", json_true());
        }
        json_t *tg = json_array();
        json_array_append_new(tg, json_string("Linear"));
        json_object_set_new(g, "targets", tg);
        json_object_set_new(g, "weights", w);
        json_object_set_new(g, "input_activations", ia);
        json_object_set_new(g, "output_activations", json_null());
        json_object_set_new(groups, "group_0", g);
        json_object_set_new(q, "quant_method", json_string("compressed-tensors"));
        json_object_set_new(q, "format", json_string(f == FAM_W4 ? "pack-quantized" : f == FAM_FP8 ? "float-quantized" : "int-quantized"));
        json_object_set_new(q, "config_groups", groups);
        json_object_set_new(q, "ignore", str_list(ign, n_ign));
        json_object_set_new(q, "quantization_status", json_string("compressed"));
        json_object_set_new(q, "kv_cache_scheme", json_null());
    }
    return q;
}

/* Writes the tensors as one file or shards of at most max_bytes + an index. */
static nb_status write_shards(const char *dir, exp_list *l, uint64_t max_bytes) {
    const nb_st_meta meta[] = {{"format", "pt"}, {"source", "nibble HF export"}};
    char path[4096];
    uint64_t total = 0;
    for (size_t i = 0; i < l->n; i++) total += l->wt[i].nbytes;
    /* greedy split in order */
    size_t *first = calloc(l->n + 2, sizeof *first), n_sh = 0;
    if (!first) return NB_ERR_NOMEM;
    uint64_t cur = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (i == 0 || (cur + l->wt[i].nbytes > max_bytes && cur > 0)) {
            first[n_sh++] = i;
            cur = 0;
        }
        cur += l->wt[i].nbytes;
    }
    first[n_sh] = l->n;
    nb_status rc = NB_OK;
    if (n_sh <= 1) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = nb_safetensors_write(path, l->wt, l->n, meta, 2);
        free(first);
        return rc;
    }
    json_t *wm = json_object();
    for (size_t s = 0; s < n_sh && rc == NB_OK; s++) {
        char file[64];
        snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", s + 1, n_sh);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        rc = nb_safetensors_write(path, l->wt + first[s], first[s + 1] - first[s], meta, 2);
        for (size_t i = first[s]; i < first[s + 1]; i++) json_object_set_new(wm, l->wt[i].name, json_string(file));
    }
    free(first);
    if (rc != NB_OK) {
        json_decref(wm);
        return rc;
    }
    json_t *idx = json_object(), *md = json_object();
    json_object_set_new(md, "total_size", json_integer((json_int_t)total));
    json_object_set_new(idx, "metadata", md);
    json_object_set_new(idx, "weight_map", wm);
    char *text = json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(idx);
    if (!text) return NB_ERR_NOMEM;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    rc = nb_write_file(path, text, strlen(text));
    free(text);
    return rc;
}

static nb_status copy_file(const char *from, const char *to) {
    char *text = NULL;
    size_t len = 0;
    NB_TRY(nb_read_file(from, 1u << 30, &text, &len));
    nb_status rc = nb_write_file(to, text, len);
    free(text);
    return rc;
}

/* Tokenizer files next to an HF source (or in opts->tokenizer: a directory,
 * or a tokenizer.json / tokenizer.model file). */
static nb_status copy_tokenizer(const nb_source *src, const char *dir, const char *tok) {
    static const char *const files[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "generation_config.json"};
    char from[4400], to[4400], sdir[4096];
    if (tok && !nb_is_dir(tok)) {
        const char *base = strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok;
        bool spm = strlen(base) > 6 && !strcmp(base + strlen(base) - 6, ".model");
        if (!spm && !(strlen(base) > 5 && !strcmp(base + strlen(base) - 5, ".json")))
            return nb_fail(NB_ERR_UNSUPPORTED, "--tokenizer %s: only tokenizer.json or a sentencepiece .model can be copied "
                           "into an HF checkpoint", tok);
        snprintf(to, sizeof to, "%s/%s", dir, spm ? "tokenizer.model" : "tokenizer.json");
        return copy_file(tok, to);
    }
    if (tok) snprintf(sdir, sizeof sdir, "%s", tok);
    else if (src->format && !strcmp(src->format, "safetensors")) {
        if (nb_is_dir(src->path)) snprintf(sdir, sizeof sdir, "%s", src->path);
        else {
            const char *sl = strrchr(src->path, '/');
            snprintf(sdir, sizeof sdir, "%.*s", sl ? (int)(sl - src->path) : 1, sl ? src->path : ".");
        }
    } else {
        return NB_OK;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", sdir, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        if (nb_file_exists(from) && strcmp(from, to)) NB_TRY(copy_file(from, to));
    }
    return NB_OK;
}

nb_status nb_hf_export_ex(const nb_source *src, const char *dir, const nb_hf_export_opts *o) {
    const nb_arch_desc *hp = &src->hp;
    const char *dtype = o && o->dtype ? o->dtype : NULL;
    nb_dtype out_t = NB_F32;
    if (dtype) {
        if (!strcmp(dtype, "F32")) out_t = NB_F32;
        else if (!strcmp(dtype, "F16")) out_t = NB_F16;
        else if (!strcmp(dtype, "BF16")) out_t = NB_BF16;
        else return nb_fail(NB_ERR_INVALID, "HF export: dtype '%s' not supported (F32, F16, BF16)", dtype);
    }
    bool permute = hp->rope_style == NB_ROPE_NORM;
    if (permute && (hp->rope_dim != hp->head_dim || hp->head_dim % 2))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: HF export needs rope_dim (%d) == head_dim (%d), even, to reorder Q/K rows",
                       src->path, hp->rope_dim, hp->head_dim);

    /* the quantization scheme: one family (and group size) for every quantized matrix */
    qfam fam = FAM_NONE;
    int G = 0;
    bool sym = false, a8 = false;
    const char *first_q = NULL;
    for (int64_t k = 0; k < src->n_tensors; k++) {
        const nb_tensor *t = &src->tensors[k];
        if (hp->tied_embeddings && !strcmp(t->name, "output.weight")) continue;
        if (t->type == NB_F32 || t->type == NB_F16 || t->type == NB_BF16) continue;
        int g = 0;
        bool s = false;
        qfam f = family(t->type, &g, &s);
        if (f == FAM_NONE)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which no HF layout holds (export F32/F16/BF16, "
                           "W4G*, W8, W8A8, FP8_E4M3 or NF4 tensors)", src->path, t->name, nb_dtype_name(t->type));
        if (!strcmp(t->name, "token_embd.weight"))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor 'token_embd.weight' has type %s; HF layouts keep embeddings in float "
                           "(quantize with --keep token_embd.weight=F16)", src->path, nb_dtype_name(t->type));
        if (!first_q) {
            first_q = t->name;
            fam = f;
            G = g;
            sym = s;
            a8 = t->type == NB_W8A8;
        } else if (f != fam || g != G || s != sym || a8 != (t->type == NB_W8A8)) {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s but '%s' has another scheme; one HF "
                           "quantization_config describes one scheme", src->path, t->name, nb_dtype_name(t->type), first_q);
        }
    }
    const char *layout = o && o->layout ? o->layout : NULL;
    const gptq_recipe recipe = read_recipe(src);
    if (fam != FAM_NONE) {
        /* W4: GPTQ's layout (with g_idx) for what GPTQ made and for symmetric types, else AutoAWQ's */
        const char *def = fam == FAM_W4 ? (sym || recipe.gptq ? "gptq" : "awq")
                          : fam == FAM_NF4 ? "bitsandbytes" : "compressed-tensors";
        if (!layout) layout = def;
        bool ok = !strcmp(layout, def) || (fam == FAM_W4 && (!strcmp(layout, "awq") || !strcmp(layout, "gptq") ||
                                                             !strcmp(layout, "compressed-tensors")));
        if (!ok)
            return nb_fail(NB_ERR_INVALID, "--layout %s cannot hold the quantized tensors (e.g. '%s'); supported for them: %s%s",
                           layout, first_q, def, fam == FAM_W4 ? ", awq, gptq, compressed-tensors" : "");
    } else if (layout) {
        NB_WARN("%s: no quantized tensors; --layout %s ignored", src->path, layout);
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nb_fail(NB_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));

    exp_list l = {0};
    char **ign = calloc((size_t)src->n_tensors + 1, sizeof *ign);
    size_t n_ign = 0;
    int64_t *rows = NULL;
    nb_status rc = NB_OK;
    if (!ign) return NB_ERR_NOMEM;
    const char *torch_dtype = NULL;
    for (int64_t k = 0; k < src->n_tensors && rc == NB_OK; k++) {
        const nb_tensor *t = &src->tensors[k];
        char hf[256];
        if (!nb_hf_name_from_gguf(t->name, hf, sizeof hf)) {
            NB_WARN("%s: tensor '%s' has no HF name; not exported", src->path, t->name);
            continue;
        }
        if (hp->tied_embeddings && !strcmp(t->name, "output.weight")) continue;
        if (t->n_dims < 1 || t->n_dims > 2) {
            rc = nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': %d dims (1 or 2 expected)", src->path, t->name, t->n_dims);
            break;
        }
        bool qk = strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.");
        int64_t row = t->n_dims == 2 ? t->ne[0] : 1, nrows = t->n_dims == 2 ? t->ne[1] : t->ne[0];
        bool perm = permute && qk;
        if (perm && nrows % hp->head_dim) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': %lld rows, not a multiple of head_dim %d", src->path, t->name,
                         (long long)nrows, hp->head_dim);
            break;
        }
        bool is_float = t->type == NB_F32 || t->type == NB_F16 || t->type == NB_BF16;
        bool linear = t->n_dims == 2 && strcmp(t->name, "token_embd.weight");
        if (!is_float) {
            free(rows);
            rows = NULL;
            if (perm) {
                rows = malloc((size_t)nrows * sizeof *rows);
                if (!rows) { rc = NB_ERR_NOMEM; break; }
                for (int64_t r = 0; r < nrows; r++) rows[r] = src_row(r, hp->head_dim, true);
            }
            char mod[256];
            snprintf(mod, sizeof mod, "%.*s", (int)(strlen(hf) - 7), hf);
            rc = ex_quant(&l, t, mod, layout, rows);
            continue;
        }
        if (linear && fam != FAM_NONE) {
            /* a float matrix in a quantized checkpoint: listed as not converted */
            ign[n_ign] = nb_strndup(hf, strlen(hf) - 7);
            if (!ign[n_ign]) { rc = NB_ERR_NOMEM; break; }
            n_ign++;
        }
        nb_dtype ot = dtype ? out_t : t->type;
        if (t->n_dims == 2 && !torch_dtype) torch_dtype = nb_st_dtype_from_nb(ot);
        size_t ib = esize(t->type), ob = esize(ot);
        uint64_t nel = (uint64_t)row * (uint64_t)nrows;
        if (nel * ib != t->nbytes) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': %llu bytes for %llu elements", src->path, t->name,
                         (unsigned long long)t->nbytes, (unsigned long long)nel);
            break;
        }
        uint8_t *buf = xmalloc(nel * ob);
        if (!buf) { rc = NB_ERR_NOMEM; break; }
        const uint8_t *in = t->data;
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *srow = in + (uint64_t)src_row(r, hp->head_dim, perm) * (uint64_t)row * ib;
            uint8_t *drow = buf + (uint64_t)r * (uint64_t)row * ob;
            if (t->type == ot) memcpy(drow, srow, (size_t)row * ib);
            else
                for (int64_t c = 0; c < row; c++) st(ot, drow + c * ob, ld(t->type, srow + c * ib));
        }
        rc = ex_add(&l, hf, nb_st_dtype_from_nb(ot), t->n_dims, t->n_dims == 2 ? nrows : nrows, t->n_dims == 2 ? row : 0,
                    buf, nel * ob);
    }
    free(rows);
    if (rc == NB_OK) {
        char cfg[4096];
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        json_t *qc = fam != FAM_NONE ? quant_config(layout, fam, G, sym, a8, &recipe, ign, n_ign) : NULL;
        const char *cd = !torch_dtype ? "F16" : torch_dtype;
        rc = hf_write_config(src, cfg, dtype ? dtype : cd, qc);
    }
    if (rc == NB_OK) rc = write_shards(dir, &l, o && o->max_shard_bytes ? o->max_shard_bytes : 5000000000ull);
    if (rc == NB_OK) rc = copy_tokenizer(src, dir, o ? o->tokenizer : NULL);
    for (size_t i = 0; i < n_ign; i++) free(ign[i]);
    free(ign);
    ex_free(&l);
    return rc;
}

nb_status nb_hf_export(const nb_source *src, const char *dir, const char *dtype) {
    nb_hf_export_opts o = {.dtype = dtype ? dtype : "F32"};
    return nb_hf_export_ex(src, dir, &o);
}
