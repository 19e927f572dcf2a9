/* Round-to-nearest quantization of a whole model: scheme names, the
 * per-tensor type choice (llama-quantize's recipes), row-parallel conversion
 * through the registry's reference quantizers, and streaming GGUF output.
 * See rtn.h for the rules. */
#include "quant/rtn.h"

#include "formats/vocab_gguf_write.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/half.h"
#include "base/log.h"
#include "quant/qtypes.h"

/* llama.cpp's llama_ftype values (general.file_type). */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13,
    FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_BF16 = 32,
};

static const struct {
    const char *name;
    nb_dtype base;
    nb_rtn_mix mix;
    int32_t file_type;
} mixes[] = {
    /* llama.cpp's Q2_K ftype is a mix (attn_v, attn_output, ffn_down get more
     * bits); it shadows the plain type name: --pure gives Q2_K everywhere */
    {"Q2_K", NB_Q2_K, NB_RTN_MIX_Q2_K, FT_Q2_K},
    {"Q3_K_S", NB_Q3_K, NB_RTN_MIX_Q3_K_S, FT_Q3_K_S},
    {"Q3_K_M", NB_Q3_K, NB_RTN_MIX_Q3_K_M, FT_Q3_K_M},
    {"Q3_K_L", NB_Q3_K, NB_RTN_MIX_Q3_K_L, FT_Q3_K_L},
    {"Q4_K_S", NB_Q4_K, NB_RTN_MIX_Q4_K_S, FT_Q4_K_S},
    {"Q4_K_M", NB_Q4_K, NB_RTN_MIX_Q4_K_M, FT_Q4_K_M},
    {"Q5_K_S", NB_Q5_K, NB_RTN_MIX_Q5_K_S, FT_Q5_K_S},
    {"Q5_K_M", NB_Q5_K, NB_RTN_MIX_Q5_K_M, FT_Q5_K_M},
};
#define N_MIXES ((int)(sizeof mixes / sizeof mixes[0]))

static bool is_plain(nb_dtype t) { return t == NB_F32 || t == NB_F16 || t == NB_BF16; }

static bool is_ggml(nb_dtype t) { return t < NB_DTYPE_GGML_END; }

/* nibble's 4-bit formats, whose default recipe keeps the embeddings in F16. */
static bool is_int4_ext(nb_dtype t) {
    return (t >= NB_W4G32 && t <= NB_W4G128S) || t == NB_NF4;
}

static int32_t file_type_of(nb_dtype t) {
    switch (t) {
    case NB_F32: return FT_ALL_F32;
    case NB_F16: return FT_F16;
    case NB_BF16: return FT_BF16;
    case NB_Q4_0: return FT_Q4_0;
    case NB_Q4_1: return FT_Q4_1;
    case NB_Q5_0: return FT_Q5_0;
    case NB_Q5_1: return FT_Q5_1;
    case NB_Q8_0: return FT_Q8_0;
    case NB_Q2_K: return FT_Q2_K;
    case NB_Q3_K: return FT_Q3_K_S; /* "mostly Q3_K": the nearest llama_ftype */
    case NB_Q4_K: return FT_Q4_K_S;
    case NB_Q5_K: return FT_Q5_K_S;
    case NB_Q6_K: return FT_Q6_K;
    default: return -1;
    }
}

/* A weight type a tensor may be converted to. */
static bool writable_type(nb_dtype t) {
    if (is_plain(t)) return true;
    const nb_qtype *q = nb_qtype_get(t);
    return q && !q->act_only;
}

void nb_rtn_scheme_names(char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    size_t used = 0;
#define APPEND(s)                                                                             \
    do {                                                                                      \
        int k_ = snprintf(buf + used, n - used, "%s%s", used ? " " : "", (s));                \
        if (k_ < 0 || (size_t)k_ >= n - used) return;                                         \
        used += (size_t)k_;                                                                   \
    } while (0)
    int nq;
    const nb_qtype *all = nb_qtype_list(&nq);
    for (int i = 0; i < nq; i++)
        if (!all[i].act_only) APPEND(all[i].name);
    for (int i = 0; i < N_MIXES; i++)
        if (!nb_qtype_by_name(mixes[i].name)) APPEND(mixes[i].name); /* Q2_K is listed once */
    APPEND("F32");
    APPEND("F16");
    APPEND("BF16");
#undef APPEND
}

nb_status nb_rtn_scheme_parse(const char *name, nb_rtn_scheme *out) {
    memset(out, 0, sizeof *out);
    if (!name) name = "";
    for (int i = 0; i < N_MIXES; i++) {
        if (!strcasecmp(name, mixes[i].name)) {
            snprintf(out->name, sizeof out->name, "%s", mixes[i].name);
            out->base = mixes[i].base;
            out->mix = mixes[i].mix;
            out->file_type = mixes[i].file_type;
            return NB_OK;
        }
    }
    const nb_qtype *q = nb_qtype_by_name(name);
    nb_dtype t;
    if (q && !q->act_only) {
        t = q->type;
        snprintf(out->name, sizeof out->name, "%s", q->name);
    } else if (!strcasecmp(name, "F32") || !strcasecmp(name, "F16") || !strcasecmp(name, "BF16")) {
        t = !strcasecmp(name, "F32") ? NB_F32 : !strcasecmp(name, "F16") ? NB_F16 : NB_BF16;
        snprintf(out->name, sizeof out->name, "%s", nb_dtype_name(t));
    } else {
        char list[1024];
        nb_rtn_scheme_names(list, sizeof list);
        return nb_fail(NB_ERR_INVALID, "--type '%s' is not a known type (valid: %s)", name, list);
    }
    out->base = t;
    out->mix = NB_RTN_MIX_NONE;
    out->file_type = file_type_of(t);
    return NB_OK;
}

nb_status nb_rtn_keep_parse(const char *arg, nb_rtn_keep *out) {
    memset(out, 0, sizeof *out);
    const char *eq = arg ? strrchr(arg, '=') : NULL;
    if (!eq || eq == arg || !eq[1])
        return nb_fail(NB_ERR_INVALID, "--keep '%s': expected PATTERN=TYPE, e.g. token_embd.weight=F16",
                       arg ? arg : "");
    size_t plen = (size_t)(eq - arg);
    if (plen >= sizeof out->pattern)
        return nb_fail(NB_ERR_RANGE, "--keep '%s': the pattern is %zu bytes, at most %zu allowed", arg, plen,
                       sizeof out->pattern - 1);
    memcpy(out->pattern, arg, plen);
    out->pattern[plen] = '\0';
    nb_dtype t;
    const nb_qtype *q = nb_qtype_by_name(eq + 1);
    if (q && !q->act_only) {
        t = q->type;
    } else if (nb_dtype_from_name(eq + 1, &t) && is_plain(t)) {
        /* F32 / F16 / BF16 */
    } else {
        char list[1024];
        nb_rtn_scheme_names(list, sizeof list);
        return nb_fail(NB_ERR_INVALID, "--keep '%s': '%s' is not a tensor type (valid: F32 F16 BF16 and the "
                       "formats of: %s; mixes such as Q4_K_M are not types)", arg, eq + 1, list);
    }
    out->type = t;
    return NB_OK;
}

bool nb_rtn_use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* ---- the per-tensor type choice ------------------------------------------ */

typedef struct recipe_state {
    int i_attn_v, n_attn_v, i_ffn_down, n_ffn_down;
    bool has_output;
    bool is_70b;
    int n_gqa; /* query heads per KV head (llama.cpp's n_gqa(); 0 when unknown) */
} recipe_state;

/* llama-quantize's llama_tensor_get_type for the schemes we support (dense
 * models). `t` is the base type; `why` receives the rule that applied. */
#define WHY(...) (why ? (void)snprintf(why, wn, __VA_ARGS__) : (void)0)

nb_dtype nb_rtn_recipe_type(nb_rtn_mix mix, nb_dtype base, nb_rtn_role role, const nb_rtn_where *w, char *why,
                            size_t wn) {
    nb_dtype t = base;
    switch (role) {
    case NB_RTN_ROLE_OUTPUT:
        if (w->row_len % 256 != 0) {
            WHY("recipe: output, row %lld not a multiple of 256", (long long)w->row_len);
            return NB_Q8_0;
        }
        if (t != NB_Q8_0) {
            WHY("recipe: output");
            return NB_Q6_K;
        }
        return t;
    case NB_RTN_ROLE_ATTN_V:
        if (mix == NB_RTN_MIX_Q2_K) {
            t = w->n_gqa >= 4 ? NB_Q4_K : NB_Q3_K;
            WHY("recipe: attn_v, %d query heads per KV head", w->n_gqa);
        } else if (mix == NB_RTN_MIX_Q3_K_M) {
            t = w->i < 2 ? NB_Q5_K : NB_Q4_K;
            WHY("recipe: attn_v%s", w->i < 2 ? " of the first 2 layers" : "");
        } else if (mix == NB_RTN_MIX_Q3_K_L) {
            t = NB_Q5_K;
            WHY("recipe: attn_v");
        } else if ((mix == NB_RTN_MIX_Q4_K_M || mix == NB_RTN_MIX_Q5_K_M) && nb_rtn_use_more_bits((int)w->i, (int)w->n)) {
            t = NB_Q6_K;
            WHY("recipe: attn_v, use_more_bits(%lld, %lld)", (long long)w->i, (long long)w->n);
        } else if (mix == NB_RTN_MIX_Q4_K_S && w->i < 4) {
            t = NB_Q5_K;
            WHY("recipe: attn_v of the first 4 layers");
        }
        if (w->is_70b && (t == NB_Q3_K || t == NB_Q4_K)) {
            t = NB_Q5_K;
            WHY("recipe: attn_v of a 70B model (8 query heads per KV head)");
        }
        if (w->n_expert == 8) {
            t = NB_Q8_0;
            WHY("recipe: attn_v of an 8-expert model");
        }
        return t;
    case NB_RTN_ROLE_ATTN_K:
        if (w->n_expert == 8) {
            WHY("recipe: attn_k of an 8-expert model");
            return NB_Q8_0;
        }
        return t;
    case NB_RTN_ROLE_FFN_DOWN:
        if (mix == NB_RTN_MIX_Q2_K) {
            WHY("recipe: ffn_down");
            return NB_Q3_K;
        }
        if (mix == NB_RTN_MIX_Q3_K_M) {
            WHY("recipe: ffn_down%s", w->i < w->n / 16 ? " of the first 1/16 of layers" : "");
            return w->i < w->n / 16 ? NB_Q5_K : NB_Q4_K;
        }
        if (mix == NB_RTN_MIX_Q3_K_L) {
            WHY("recipe: ffn_down");
            return NB_Q5_K;
        }
        if ((mix == NB_RTN_MIX_Q4_K_M || mix == NB_RTN_MIX_Q5_K_M) && nb_rtn_use_more_bits((int)w->i, (int)w->n)) {
            WHY("recipe: ffn_down, use_more_bits(%lld, %lld)", (long long)w->i, (long long)w->n);
            return NB_Q6_K;
        }
        if (mix == NB_RTN_MIX_Q4_K_S && w->i < w->n / 8) {
            WHY("recipe: ffn_down of the first 1/8 of layers");
            return NB_Q5_K;
        }
        return t;
    case NB_RTN_ROLE_ATTN_OUTPUT: {
        nb_dtype o = t;
        if (w->n_expert == 8)
            o = (mix == NB_RTN_MIX_Q2_K || mix == NB_RTN_MIX_Q3_K_S || mix == NB_RTN_MIX_Q3_K_M ||
                 mix == NB_RTN_MIX_Q4_K_S || mix == NB_RTN_MIX_Q4_K_M) ? NB_Q5_K : t;
        else
            o = mix == NB_RTN_MIX_Q2_K ? NB_Q3_K : mix == NB_RTN_MIX_Q3_K_M ? NB_Q4_K
              : mix == NB_RTN_MIX_Q3_K_L ? NB_Q5_K : t;
        if (o != t) WHY("recipe: attn_output");
        return o;
    }
    case NB_RTN_ROLE_ATTN_QKV: {
        nb_dtype o = (mix == NB_RTN_MIX_Q3_K_M || mix == NB_RTN_MIX_Q3_K_L) ? NB_Q4_K
                   : mix == NB_RTN_MIX_Q4_K_M ? NB_Q5_K : mix == NB_RTN_MIX_Q5_K_M ? NB_Q6_K : t;
        if (o != t) WHY("recipe: attn_qkv");
        return o;
    }
    case NB_RTN_ROLE_OTHER: break;
    }
    return t;
}

/* nibble quantize's side: the tensor's role from its GGUF name. */
static nb_dtype recipe_type(const nb_rtn_scheme *sc, recipe_state *rs, const nb_tensor *tn, char *why, size_t wn) {
    const char *name = tn->name;
    if (is_int4_ext(sc->base)) {
        if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) {
            snprintf(why, wn, "recipe: embeddings stay F16 for INT4");
            return NB_F16;
        }
        return sc->base;
    }
    if (!is_ggml(sc->base) || is_plain(sc->base)) return sc->base;
    nb_rtn_where w = {.row_len = tn->ne[0], .n_gqa = rs->n_gqa, .is_70b = rs->is_70b};
    nb_rtn_role role = NB_RTN_ROLE_OTHER;
    if (!strcmp(name, "output.weight") || (!rs->has_output && !strcmp(name, "token_embd.weight"))) {
        role = NB_RTN_ROLE_OUTPUT;
    } else if (strstr(name, "attn_v.weight")) {
        role = NB_RTN_ROLE_ATTN_V;
        w.i = rs->i_attn_v++;
        w.n = rs->n_attn_v;
    } else if (strstr(name, "ffn_down")) {
        role = NB_RTN_ROLE_FFN_DOWN;
        w.i = rs->i_ffn_down++;
        w.n = rs->n_ffn_down;
    } else if (strstr(name, "attn_output.weight")) {
        role = NB_RTN_ROLE_ATTN_OUTPUT;
    } else if (strstr(name, "attn_qkv.weight")) {
        role = NB_RTN_ROLE_ATTN_QKV;
    } else if (strstr(name, "attn_k.weight")) {
        role = NB_RTN_ROLE_ATTN_K;
    }
    nb_dtype t = nb_rtn_recipe_type(sc->mix, sc->base, role, &w, why, wn);
    if (role == NB_RTN_ROLE_OUTPUT && !rs->has_output && t == NB_Q6_K) snprintf(why, wn, "recipe: output (tied token_embd)");
    return t;
}

nb_status nb_rtn_plan(const nb_source *src, const nb_rtn_params *p, nb_rtn_report *out) {
    memset(out, 0, sizeof *out);
    out->scheme = p->scheme;
    if (p->n_keep < 0 || p->n_keep > NB_RTN_MAX_KEEP)
        return nb_fail(NB_ERR_RANGE, "%d --keep rules, at most %d allowed", p->n_keep, NB_RTN_MAX_KEEP);
    if (!writable_type(p->scheme.base))
        return nb_fail(NB_ERR_INVALID, "scheme '%s': base type %s cannot store weights", p->scheme.name,
                       nb_dtype_name(p->scheme.base));
    for (int k = 0; k < p->n_keep; k++)
        if (!writable_type(p->keep[k].type))
            return nb_fail(NB_ERR_INVALID, "--keep %s: type %s cannot store weights", p->keep[k].pattern,
                           nb_dtype_name(p->keep[k].type));
    out->tensors = nb_calloc((size_t)(src->n_tensors ? src->n_tensors : 1), sizeof *out->tensors);
    if (!out->tensors) return NB_ERR_NOMEM;
    out->n_tensors = src->n_tensors;
    recipe_state rs = {0};
    rs.has_output = nb_source_find(src, "output.weight") != NULL;
    rs.n_gqa = src->hp.n_head_kv > 0 ? src->hp.n_head / src->hp.n_head_kv : 0;
    rs.is_70b = src->hp.arch == NB_ARCH_LLAMA && src->hp.n_layer == 80 && src->hp.n_head != src->hp.n_head_kv;
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const char *nm = src->tensors[i].name;
        if (strstr(nm, "attn_v.weight")) rs.n_attn_v++;
        if (strstr(nm, "ffn_down")) rs.n_ffn_down++;
    }
    bool permute = src->hp.arch == NB_ARCH_LLAMA && src->hp.rope_style == NB_ROPE_NEOX;
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const nb_tensor *tn = &src->tensors[i];
        nb_rtn_tensor *r = &out->tensors[i];
        if (strlen(tn->name) >= sizeof r->name)
            return nb_fail(NB_ERR_RANGE, "%s: tensor name '%.64s...' is longer than %zu bytes", src->path, tn->name,
                           sizeof r->name - 1);
        snprintf(r->name, sizeof r->name, "%s", tn->name);
        r->n_dims = tn->n_dims;
        memcpy(r->ne, tn->ne, sizeof r->ne);
        r->src_type = tn->type;
        r->rel_rms = NAN;
        snprintf(r->method, sizeof r->method, "rtn");
        if (!is_plain(tn->type)) {
            const nb_qtype *q = nb_qtype_get(tn->type);
            if (!q || q->act_only)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be dequantized "
                               "(supported: F32, F16, BF16 and the formats of `nibble quantize --list`)",
                               src->path, tn->name, nb_dtype_name(tn->type));
            out->n_requantized++;
        }
        bool is_qk = strstr(tn->name, "attn_q.") || strstr(tn->name, "attn_k.");
        if (permute && is_qk) {
            if (tn->n_dims != 2)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': reordering HF q/k rows for GGUF is only "
                               "implemented for weights, not %d-D tensors", src->path, tn->name, tn->n_dims);
            int64_t hd = src->hp.head_dim;
            if (hd <= 0 || hd % 2 || src->hp.rope_dim != hd || tn->ne[1] % hd)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: tensor '%s': cannot reorder q/k rows (head_dim %lld, "
                               "rope_dim %d, %lld rows)", src->path, tn->name, (long long)hd, src->hp.rope_dim,
                               (long long)tn->ne[1]);
            r->permute_qk = true;
        }
        nb_dtype t;
        if (tn->n_dims < 2) {
            t = NB_F32;
            snprintf(r->why, sizeof r->why, "1-D: F32");
        } else {
            int k = 0;
            for (; k < p->n_keep; k++)
                if (fnmatch(p->keep[k].pattern, tn->name, 0) == 0) break;
            if (k < p->n_keep) {
                t = p->keep[k].type;
                snprintf(r->why, sizeof r->why, "keep %.60s=%s", p->keep[k].pattern, nb_dtype_name(t));
                /* the recipe's layer counters still advance past this tensor */
                char dummy[NB_RTN_WHY_MAX];
                if (!p->pure) (void)recipe_type(&p->scheme, &rs, tn, dummy, sizeof dummy);
            } else if (p->pure) {
                t = p->scheme.base;
            } else {
                t = recipe_type(&p->scheme, &rs, tn, r->why, sizeof r->why);
            }
        }
        r->wanted = t;
        if (!is_plain(t) && !nb_qtype_supports_row(t, tn->ne[0])) {
            const nb_qtype *q = nb_qtype_get(t);
            nb_dtype fb = nb_qtype_fallback(t, tn->ne[0]);
            snprintf(r->why, sizeof r->why, "fallback: %lld not a multiple of %u (%s -> %s)", (long long)tn->ne[0],
                     q ? q->block : 0, nb_dtype_name(t), nb_dtype_name(fb));
            t = fb;
            r->fallback = true;
            out->n_fallback++;
        }
        r->type = t;
        uint64_t rb, bytes;
        int64_t rows = nb_tensor_rows(tn);
        if (!nb_dtype_row_bytes(t, (uint64_t)tn->ne[0], &rb) || rows < 0 || !nb_mul_ok(rb, (uint64_t)rows, &bytes))
            return nb_fail(NB_ERR_RANGE, "%s: tensor '%s': size of %lld x %lld %s overflows", src->path, tn->name,
                           (long long)tn->ne[0], (long long)rows, nb_dtype_name(t));
        r->bytes = bytes;
        uint64_t n = (uint64_t)nb_tensor_nelem(tn);
        out->n_params += n;
        out->bytes += bytes;
        out->bytes_f16 += 2 * n;
    }
    out->bits_per_weight = out->n_params ? 8.0 * (double)out->bytes / (double)out->n_params : 0;
    out->compression_vs_f16 = out->bytes ? (double)out->bytes_f16 / (double)out->bytes : 0;
    return NB_OK;
}

void nb_rtn_report_free(nb_rtn_report *r) {
    if (!r) return;
    free(r->tensors);
    r->tensors = NULL;
    r->n_tensors = 0;
}

/* ---- conversion ----------------------------------------------------------- */

#define MAX_THREADS 512

typedef struct conv_job {
    const nb_tensor *src;
    nb_dtype type;
    uint8_t *dst;
    int64_t ne0, rows;
    uint64_t src_rb, dst_rb;
    const nb_qtype *sq, *dq;
    int64_t head_dim;   /* > 0: dst row r takes src row perm(r) (HF q/k -> GGUF order) */
    float *scratch;     /* nth x 2 x ne0 */
    double *err2, *ref2;
} conv_job;

static void row_to_float(nb_dtype t, const nb_qtype *q, const void *row, float *out, int64_t n) {
    if (t == NB_F32) {
        memcpy(out, row, (size_t)n * sizeof(float));
    } else if (t == NB_F16) {
        const uint16_t *h = row;
        for (int64_t i = 0; i < n; i++) out[i] = nb_fp16_to_fp32(h[i]);
    } else if (t == NB_BF16) {
        const uint16_t *h = row;
        for (int64_t i = 0; i < n; i++) out[i] = nb_bf16_to_fp32(h[i]);
    } else {
        q->to_float(row, out, n);
    }
}

static void row_from_float(nb_dtype t, const nb_qtype *q, const float *x, void *row, int64_t n) {
    if (t == NB_F32) {
        memcpy(row, x, (size_t)n * sizeof(float));
    } else if (t == NB_F16) {
        uint16_t *h = row;
        for (int64_t i = 0; i < n; i++) h[i] = nb_fp32_to_fp16(x[i]);
    } else if (t == NB_BF16) {
        uint16_t *h = row;
        for (int64_t i = 0; i < n; i++) h[i] = nb_fp32_to_bf16(x[i]);
    } else {
        q->from_float(x, row, n);
    }
}

/* GGUF row h*hd + 2*i + j comes from HF row h*hd + j*hd/2 + i. */
static int64_t src_row_of(int64_t r, int64_t hd) {
    if (hd <= 0) return r;
    int64_t h = r / hd, w = r % hd;
    return h * hd + (w % 2) * (hd / 2) + w / 2;
}

static void conv_worker(void *arg, int ith, int nth) {
    conv_job *j = arg;
    int64_t lo, hi;
    nb_split(j->rows, ith, nth, &lo, &hi);
    float *x = j->scratch + (size_t)ith * 2 * (size_t)j->ne0, *y = x + j->ne0;
    const uint8_t *sdata = j->src->data;
    double e2 = 0, r2 = 0;
    for (int64_t r = lo; r < hi; r++) {
        int64_t sr = src_row_of(r, j->head_dim);
        row_to_float(j->src->type, j->sq, sdata + (uint64_t)sr * j->src_rb, x, j->ne0);
        uint8_t *drow = j->dst + (uint64_t)r * j->dst_rb;
        row_from_float(j->type, j->dq, x, drow, j->ne0);
        if (j->type == NB_F32) {
            for (int64_t i = 0; i < j->ne0; i++) r2 += (double)x[i] * x[i];
            continue;
        }
        row_to_float(j->type, j->dq, drow, y, j->ne0);
        for (int64_t i = 0; i < j->ne0; i++) {
            double d = (double)y[i] - (double)x[i];
            e2 += d * d;
            r2 += (double)x[i] * x[i];
        }
    }
    j->err2[ith] = e2;
    j->ref2[ith] = r2;
}

static nb_status convert_impl(const nb_tensor *src, nb_dtype type, void *dst, uint64_t dst_bytes, nb_pool *pool,
                              int64_t head_dim, double *rel_rms) {
    conv_job j = {.src = src, .type = type, .dst = dst, .ne0 = src->ne[0], .rows = nb_tensor_rows(src),
                  .head_dim = head_dim};
    if (!is_plain(src->type)) {
        j.sq = nb_qtype_get(src->type);
        if (!j.sq || j.sq->act_only)
            return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': source type %s cannot be dequantized", src->name,
                           nb_dtype_name(src->type));
    }
    if (!is_plain(type)) {
        j.dq = nb_qtype_get(type);
        if (!j.dq || j.dq->act_only)
            return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': %s is not a weight format", src->name,
                           nb_dtype_name(type));
    }
    uint64_t need;
    if (j.ne0 <= 0 || j.rows < 0 || !nb_dtype_row_bytes(src->type, (uint64_t)j.ne0, &j.src_rb) ||
        !nb_dtype_row_bytes(type, (uint64_t)j.ne0, &j.dst_rb))
        return nb_fail(NB_ERR_INVALID, "tensor '%s': row of %lld does not fit %s -> %s", src->name,
                       (long long)j.ne0, nb_dtype_name(src->type), nb_dtype_name(type));
    uint64_t src_need;
    if (!nb_mul_ok(j.src_rb, (uint64_t)j.rows, &src_need) || src_need > src->nbytes)
        return nb_fail(NB_ERR_FORMAT, "tensor '%s': %lld rows of %llu bytes exceed its %llu bytes", src->name,
                       (long long)j.rows, (unsigned long long)j.src_rb, (unsigned long long)src->nbytes);
    if (!nb_mul_ok(j.dst_rb, (uint64_t)j.rows, &need) || need != dst_bytes)
        return nb_fail(NB_ERR_INVALID, "tensor '%s': destination holds %llu bytes, %s needs %llu", src->name,
                       (unsigned long long)dst_bytes, nb_dtype_name(type), (unsigned long long)need);
    if (head_dim > 0 && (head_dim % 2 || j.rows % head_dim))
        return nb_fail(NB_ERR_INVALID, "tensor '%s': %lld rows are not whole heads of %lld", src->name,
                       (long long)j.rows, (long long)head_dim);
    int nth = pool ? nb_pool_size(pool) : 1;
    if (nth < 1) nth = 1;
    if (nth > MAX_THREADS) nth = MAX_THREADS;
    j.scratch = nb_malloc((size_t)nth * 2 * (size_t)j.ne0 * sizeof(float));
    j.err2 = nb_calloc((size_t)nth * 2, sizeof(double));
    if (!j.scratch || !j.err2) {
        free(j.scratch);
        free(j.err2);
        return NB_ERR_NOMEM;
    }
    j.ref2 = j.err2 + nth;
    if (pool && nth > 1) nb_pool_run(pool, conv_worker, &j);
    else conv_worker(&j, 0, 1);
    double e2 = 0, r2 = 0;
    for (int i = 0; i < nth; i++) {
        e2 += j.err2[i];
        r2 += j.ref2[i];
    }
    if (rel_rms) *rel_rms = r2 > 0 ? sqrt(e2 / r2) : 0;
    free(j.scratch);
    free(j.err2);
    return NB_OK;
}

nb_status nb_rtn_convert(const nb_tensor *src, nb_dtype type, void *dst, uint64_t dst_bytes, nb_pool *pool,
                         double *rel_rms) {
    return convert_impl(src, type, dst, dst_bytes, pool, 0, rel_rms);
}

/* ---- refusing non-finite weights ------------------------------------------ */

typedef struct scan_job {
    const nb_tensor *t;
    const nb_qtype *q;      /* NULL for F32 / F16 / BF16 */
    int64_t ne0, rows;
    uint64_t rb;
    float *scratch;         /* nth x ne0 */
    int64_t *first, *count; /* per thread: first bad element (row * ne0 + column, -1: none), bad values */
} scan_job;

static void scan_worker(void *arg, int ith, int nth) {
    scan_job *j = arg;
    int64_t lo, hi;
    nb_split(j->rows, ith, nth, &lo, &hi);
    float *x = j->scratch + (size_t)ith * (size_t)j->ne0;
    const uint8_t *data = j->t->data;
    j->first[ith] = -1;
    j->count[ith] = 0;
    for (int64_t r = lo; r < hi; r++) {
        row_to_float(j->t->type, j->q, data + (uint64_t)r * j->rb, x, j->ne0);
        int64_t c = nb_first_nonfinite(x, j->ne0);
        if (c < 0) continue;
        if (j->first[ith] < 0) j->first[ith] = r * j->ne0 + c;
        for (; c < j->ne0; c++) j->count[ith] += !isfinite(x[c]);
    }
}

/* The error for the first bad element (rows are split in order, so the
 * lowest thread with a hit has it). */
static nb_status nonfinite_error(const scan_job *j, int nth) {
    int64_t first = -1, count = 0;
    for (int i = 0; i < nth; i++) {
        if (first < 0) first = j->first[i];
        count += j->count[i];
    }
    if (first < 0) return NB_OK;
    int64_t r = first / j->ne0, c = first % j->ne0;
    row_to_float(j->t->type, j->q, (const uint8_t *)j->t->data + (uint64_t)r * j->rb, j->scratch, j->ne0);
    const char *what = isnan(j->scratch[c]) ? "NaN" : "Inf";
    char at[64];
    if (j->t->n_dims < 2) snprintf(at, sizeof at, "element %lld", (long long)c);
    else snprintf(at, sizeof at, "row %lld, column %lld", (long long)r, (long long)c);
    return nb_fail(NB_ERR_INVALID, "tensor '%s': %s is %s (%lld of its %lld values are NaN or Inf); weights must be "
                   "finite to be quantized (repair or re-export the model)", j->t->name, at, what, (long long)count,
                   (long long)(j->ne0 * j->rows));
}

nb_status nb_rtn_check_finite(const nb_tensor *t, nb_pool *pool) {
    scan_job j = {.t = t, .ne0 = t->ne[0], .rows = nb_tensor_rows(t)};
    if (!is_plain(t->type) && (!(j.q = nb_qtype_get(t->type)) || j.q->act_only))
        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be dequantized", t->name,
                       nb_dtype_name(t->type));
    uint64_t need;
    if (j.ne0 <= 0 || j.rows < 0 || !nb_dtype_row_bytes(t->type, (uint64_t)j.ne0, &j.rb) ||
        !nb_mul_ok(j.rb, (uint64_t)j.rows, &need) || need > t->nbytes)
        return nb_fail(NB_ERR_FORMAT, "tensor '%s': %lld rows of %lld %s values exceed its %llu bytes", t->name,
                       (long long)j.rows, (long long)j.ne0, nb_dtype_name(t->type), (unsigned long long)t->nbytes);
    int nth = pool ? nb_pool_size(pool) : 1;
    nth = nth < 1 ? 1 : nth > MAX_THREADS ? MAX_THREADS : nth;
    j.scratch = nb_malloc((size_t)nth * (size_t)j.ne0 * sizeof(float));
    j.first = nb_malloc((size_t)nth * 2 * sizeof(int64_t));
    nb_status st = j.scratch && j.first ? NB_OK : NB_ERR_NOMEM;
    if (st == NB_OK) {
        j.count = j.first + nth;
        if (pool && nth > 1) nb_pool_run(pool, scan_worker, &j);
        else scan_worker(&j, 0, 1);
        st = nonfinite_error(&j, nth);
    }
    free(j.scratch);
    free(j.first);
    return st;
}

nb_status nb_rtn_check_source_finite(const nb_source *src, nb_pool *pool) {
    for (int64_t i = 0; i < src->n_tensors; i++) {
        nb_status st = nb_rtn_check_finite(&src->tensors[i], pool);
        if (st != NB_OK) return nb_fail_wrap(st, "%s: ", src->path);
    }
    return NB_OK;
}

/* ---- writing -------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct fill_ctx {
    const nb_source *src;
    nb_rtn_report *rep;
    nb_pool *pool;
    int64_t next;
    nb_rtn_progress cb;
    void *ud;
    const nb_rtn_params *p;
} fill_ctx;

static nb_status fill_tensor(void *vctx, const char *name, void *buf, uint64_t nbytes) {
    fill_ctx *c = vctx;
    int64_t i = c->next++;
    if (i >= c->src->n_tensors || strcmp(c->src->tensors[i].name, name) != 0)
        return nb_fail(NB_ERR_INVALID, "quantize: the writer asked for tensor '%s' out of order", name);
    nb_rtn_tensor *r = &c->rep->tensors[i];
    double t0 = now_s();
    int64_t hd = r->permute_qk ? c->src->hp.head_dim : 0;
    bool handled = false;
    nb_status st = NB_OK;
    if (c->p->tensor_fn)
        st = c->p->tensor_fn(c->p->ud, &c->src->tensors[i], r, c->pool, buf, nbytes, &r->rel_rms, &handled);
    if (st == NB_OK && !handled) st = convert_impl(&c->src->tensors[i], r->type, buf, nbytes, c->pool, hd, &r->rel_rms);
    if (st != NB_OK) return nb_fail_wrap(st, "%s: tensor '%s': ", c->src->path, name);
    r->seconds = now_s() - t0;
    if (c->cb) c->cb(c->ud, c->rep, i);
    return NB_OK;
}

/* Architecture keys for sources that are not GGUF (what source_gguf.c reads). */
static nb_status write_hparams(nb_gguf_writer *w, const nb_source *src) {
    const nb_arch_desc *hp = &src->hp;
    const char *a = nb_arch_gguf_name(hp); /* formats/arch.c */
    char key[128];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", a, s), key)
    NB_TRY(nb_gguf_set_str(w, "general.architecture", a));
    NB_TRY(nb_gguf_set_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx_train));
    NB_TRY(nb_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd));
    NB_TRY(nb_gguf_set_u32(w, KEY("block_count"), (uint32_t)hp->n_layer));
    NB_TRY(nb_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)hp->n_ff));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim));
    NB_TRY(nb_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hp->rope_dim));
    NB_TRY(nb_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), hp->norm_eps));
    NB_TRY(nb_gguf_set_f32(w, KEY("rope.freq_base"), hp->rope_theta));
    NB_TRY(nb_gguf_set_u32(w, KEY("vocab_size"), (uint32_t)hp->n_vocab));
    if (hp->sliding_window > 0) NB_TRY(nb_gguf_set_u32(w, KEY("attention.sliding_window"), (uint32_t)hp->sliding_window));
    if (hp->rope_scaling == NB_ROPE_SCALING_LINEAR) {
        NB_TRY(nb_gguf_set_str(w, KEY("rope.scaling.type"), "linear"));
        NB_TRY(nb_gguf_set_f32(w, KEY("rope.scaling.factor"), hp->rope_factor));
    } else if (hp->rope_scaling != NB_ROPE_SCALING_NONE) {
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: llama3 RoPE scaling cannot be written to GGUF yet (it needs a "
                       "rope_freqs.weight tensor); convert this model with a GGUF input", src->path);
    }
#undef KEY
    return NB_OK;
}

static nb_status write_meta(nb_gguf_writer *w, const nb_source *src, const nb_rtn_params *p) {
    const nb_rtn_scheme *sc = &p->scheme;
    if (src->gguf) {
        const nb_gguf *g = src->gguf;
        for (int64_t i = 0; i < nb_gguf_n_kv(g); i++) {
            const char *k = nb_gguf_key(g, i);
            if (!strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version") ||
                !strncmp(k, "nibble.quantize.", 16))
                continue;
            NB_TRY(nb_gguf_set_value(w, k, nb_gguf_kv(g, i)));
        }
    } else {
        NB_TRY(write_hparams(w, src));
        /* the tokenizer the source's loaders find (HF directory, llama2.c's
         * tokenizer beside the .bin) goes into the output's metadata */
        nb_vocab *v = NULL;
        if (nb_vocab_load(src->path, NULL, &v) == NB_OK) {
            nb_status vs = nb_vocab_to_gguf(v, w);
            nb_vocab_free(v);
            NB_TRY(vs);
        } else {
            NB_WARN("quantize: %s is not a GGUF file and no tokenizer was found beside it: the output has no tokenizer "
                    "metadata (pass --tokenizer when loading it)", src->path);
        }
    }
    NB_TRY(nb_gguf_set_u32(w, "general.quantization_version", 2));
    if (sc->file_type >= 0) NB_TRY(nb_gguf_set_u32(w, "general.file_type", (uint32_t)sc->file_type));
    NB_TRY(nb_gguf_set_str(w, "nibble.quantize.scheme", sc->name));
    NB_TRY(nb_gguf_set_str(w, "nibble.quantize.method", p->method ? p->method : "rtn"));
    if (p->meta_fn) NB_TRY(p->meta_fn(p->ud, w));
    return NB_OK;
}

nb_status nb_rtn_quantize(const char *in_path, const char *out_path, const nb_rtn_params *p, nb_rtn_report *out,
                          nb_rtn_progress cb, void *ud) {
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    nb_source src;
    NB_TRY(nb_source_open(in_path, &src));
    nb_status st = nb_rtn_plan(&src, p, out);
    nb_pool *pool = NULL;
    nb_gguf_writer *w = NULL;
    if (st == NB_OK && out->n_requantized)
        NB_WARN("quantize: %s: %lld tensors are already quantized; they are dequantized first and requantizing "
                "loses quality (start from F16/BF16/F32 weights when you can)", in_path,
                (long long)out->n_requantized);
    if (st == NB_OK) st = nb_pool_create(p->n_threads, &pool);
    if (st == NB_OK) out->n_threads = nb_pool_size(pool);
    if (st == NB_OK && !p->finite_checked) st = nb_rtn_check_source_finite(&src, pool);
    if (st == NB_OK) st = nb_gguf_writer_create(&w);
    if (st == NB_OK) st = write_meta(w, &src, p);
    fill_ctx fc = {&src, out, pool, 0, cb, ud, p};
    for (int64_t i = 0; st == NB_OK && i < src.n_tensors; i++) {
        const nb_rtn_tensor *r = &out->tensors[i];
        st = nb_gguf_writer_add_tensor_fn(w, r->name, r->type, r->n_dims, r->ne, fill_tensor, &fc);
    }
    if (st == NB_OK) st = nb_gguf_writer_write(w, out_path);
    out->seconds = now_s() - t0;
    nb_gguf_writer_free(w);
    nb_pool_free(pool);
    nb_source_close(&src);
    return st;
}
