/* Quantized HF layouts -> nibble blocks (see hf_quant.h, docs/formats.md). */
#include "formats/hf_quant.h"
#include "formats/hf_export.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/blocks.h"

const float nb_hfq_nf4_levels[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static uint32_t rd32(const void *p, int64_t i) {
    uint32_t v;
    memcpy(&v, (const uint8_t *)p + 4 * i, 4);
    return v;
}

float nb_hfq_ld_scale(const void *p, int64_t i, nb_dtype t) {
    if (t == NB_F32) {
        float f;
        memcpy(&f, (const uint8_t *)p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    return t == NB_F16 ? nb_fp16_to_fp32(h) : nb_bf16_to_fp32(h);
}

nb_status nb_hfq_unpacked_alloc(nb_hfq_unpacked *u, int64_t K, int64_t R, int bits, int64_t ng) {
    memset(u, 0, sizeof *u);
    u->K = K;
    u->R = R;
    u->bits = bits;
    u->n_groups = ng;
    u->q = malloc((size_t)(K * R));
    u->gidx = malloc((size_t)K * sizeof *u->gidx);
    u->scale = malloc((size_t)(R * ng) * sizeof *u->scale);
    u->zero = malloc((size_t)(R * ng));
    if (!u->q || !u->gidx || !u->scale || !u->zero) {
        nb_hfq_unpacked_free(u);
        return NB_ERR_NOMEM;
    }
    return NB_OK;
}

void nb_hfq_unpacked_free(nb_hfq_unpacked *u) {
    free(u->q);
    free(u->gidx);
    free(u->scale);
    free(u->zero);
    memset(u, 0, sizeof *u);
}

void nb_hfq_unpack_awq(const void *qweight, const void *qzeros, const void *scales, int64_t K, int64_t R, int G,
                       nb_hfq_unpacked *u) {
    int64_t W = R / 8, ng = K / G;
    for (int64_t k = 0; k < K; k++) {
        u->gidx[k] = (int32_t)(k / G);
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = rd32(qweight, k * W + c);
            for (int i = 0; i < 8; i++) u->q[(8 * c + awq_order[i]) * K + k] = (uint8_t)((w >> (4 * i)) & 15);
        }
    }
    for (int64_t g = 0; g < ng; g++) {
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = rd32(qzeros, g * W + c);
            for (int i = 0; i < 8; i++) u->zero[(8 * c + awq_order[i]) * ng + g] = (uint8_t)((w >> (4 * i)) & 15);
        }
        for (int64_t r = 0; r < R; r++) u->scale[r * ng + g] = nb_hfq_ld_scale(scales, g * R + r, NB_F16);
    }
}

nb_status nb_hfq_unpack_gptq(const void *qweight, const void *qzeros, const void *scales, const void *g_idx, int64_t K,
                             int64_t R, int bits, int64_t ng, bool v2, const char *what, nb_hfq_unpacked *u) {
    int pf = 32 / bits;
    uint32_t mask = (1u << bits) - 1;
    int64_t G = K / ng;
    for (int64_t k = 0; k < K; k++) {
        int64_t g = k / G;
        if (g_idx) {
            int32_t v;
            memcpy(&v, (const uint8_t *)g_idx + 4 * k, 4);
            if (v < 0 || v >= ng)
                return nb_fail(NB_ERR_FORMAT, "%s.g_idx: element %lld = %d outside 0..%lld (the number of groups in %s.scales)",
                               what, (long long)k, v, (long long)ng - 1, what);
            g = v;
        }
        u->gidx[k] = (int32_t)g;
    }
    for (int64_t kw = 0; kw < K / pf; kw++)
        for (int64_t r = 0; r < R; r++) {
            uint32_t w = rd32(qweight, kw * R + r);
            for (int i = 0; i < pf; i++) u->q[r * K + kw * pf + i] = (uint8_t)((w >> (bits * i)) & mask);
        }
    int64_t ZW = R / pf;
    for (int64_t g = 0; g < ng; g++) {
        for (int64_t c = 0; c < ZW; c++) {
            uint32_t w = rd32(qzeros, g * ZW + c);
            for (int i = 0; i < pf; i++) {
                uint32_t z = (w >> (bits * i)) & mask;
                if (!v2) z = (z + 1) & mask;
                u->zero[(c * pf + i) * ng + g] = (uint8_t)z;
            }
        }
        for (int64_t r = 0; r < R; r++) u->scale[r * ng + g] = nb_hfq_ld_scale(scales, g * R + r, NB_F16);
    }
    return NB_OK;
}

void nb_hfq_unpack_ct_pack(const void *packed, const void *scale, nb_dtype scale_t, const void *zp, int64_t K, int64_t R,
                           int64_t ng, nb_hfq_unpacked *u) {
    int64_t G = K / ng, W = K / 8;
    for (int64_t k = 0; k < K; k++) u->gidx[k] = (int32_t)(k / G);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = rd32(packed, r * W + c);
            for (int i = 0; i < 8; i++) u->q[r * K + 8 * c + i] = (uint8_t)((w >> (4 * i)) & 15);
        }
        for (int64_t g = 0; g < ng; g++) {
            u->scale[r * ng + g] = nb_hfq_ld_scale(scale, r * ng + g, scale_t);
            u->zero[r * ng + g] = zp ? (uint8_t)((rd32(zp, (r / 8) * ng + g) >> (4 * (r % 8))) & 15) : 8;
        }
    }
}

/* Largest G' in {128, 64, 32} dividing K with one group per aligned run. */
static int run_group(const int32_t *gidx, const int32_t *perm, int64_t K) {
    for (int gp = 128; gp >= 32; gp /= 2) {
        if (K % gp) continue;
        bool ok = true;
        for (int64_t k = 0; ok && k < K; k++) {
            int64_t first = perm ? perm[k - k % gp] : k - k % gp;
            ok = gidx[perm ? perm[k] : k] == gidx[first];
        }
        if (ok) return gp;
    }
    return 0;
}

nb_status nb_hfq_emit(const nb_hfq_unpacked *u, bool sym, const char *what, nb_dtype *type, void **dst, uint64_t *nbytes,
                      int32_t **perm_out) {
    int64_t K = u->K, R = u->R, ng = u->n_groups;
    *perm_out = NULL;
    *dst = NULL;
    if (K % 32)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: %lld inputs per row is not a multiple of 32 (nibble's W4G/W8 blocks)", what,
                       (long long)K);
    int32_t *perm = NULL;
    int gp = run_group(u->gidx, NULL, K);
    if (!gp) {
        /* counting sort of the inputs by group (stable) */
        perm = malloc((size_t)K * sizeof *perm);
        int64_t *start = calloc((size_t)ng + 1, sizeof *start);
        if (!perm || !start) {
            free(perm);
            free(start);
            return NB_ERR_NOMEM;
        }
        for (int64_t k = 0; k < K; k++) start[u->gidx[k] + 1]++;
        for (int64_t g = 0; g < ng; g++) start[g + 1] += start[g];
        for (int64_t k = 0; k < K; k++) perm[start[u->gidx[k]]++] = (int32_t)k;
        free(start);
        gp = run_group(u->gidx, perm, K);
        if (!gp) {
            free(perm);
            return nb_fail(NB_ERR_UNSUPPORTED, "%s.g_idx: some group has a number of members that is not a multiple of 32, even "
                           "after sorting the inputs by group; nibble's blocks cannot hold it", what);
        }
    }
    nb_dtype t;
    uint64_t bb;
    if (u->bits == 4) {
        t = sym ? (gp == 128 ? NB_W4G128S : gp == 64 ? NB_W4G64S : NB_W4G32S)
                : (gp == 128 ? NB_W4G128 : gp == 64 ? NB_W4G64 : NB_W4G32);
        bb = (uint64_t)NB_W4_BLOCK_BYTES(gp);
    } else {
        t = NB_W8;
        gp = 32;
        bb = sizeof(nb_block_w8);
    }
    uint64_t total = (uint64_t)R * (uint64_t)(K / gp) * bb;
    uint8_t *out = malloc(total ? total : 1);
    if (!out) {
        free(perm);
        return NB_ERR_NOMEM;
    }
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *q = u->q + r * K;
        for (int64_t b = 0; b < K / gp; b++) {
            uint8_t *blk = out + ((uint64_t)r * (uint64_t)(K / gp) + (uint64_t)b) * bb;
            int64_t k0 = perm ? perm[b * gp] : b * gp;
            int64_t g = u->gidx[k0];
            float s = u->scale[r * ng + g];
            int z = u->zero[r * ng + g];
            if (u->bits == 4) {
                uint16_t h = nb_fp32_to_fp16(s);
                if (nb_fp16_to_fp32(h) != s && !(isnan(s) && isnan(nb_fp16_to_fp32(h)))) {
                    free(out);
                    free(perm);
                    return nb_fail(NB_ERR_UNSUPPORTED, "%s: scale [%lld, %lld] = %g has no exact fp16 value (W4G blocks keep fp16 scales)",
                                   what, (long long)r, (long long)g, (double)s);
                }
                if (sym && z != 8) {
                    free(out);
                    free(perm);
                    return nb_fail(NB_ERR_FORMAT, "%s: symmetric quantization declared but zero point [%lld, %lld] = %d (expected 8)",
                                   what, (long long)r, (long long)g, z);
                }
                memcpy(blk, &h, 2);
                blk[2] = (uint8_t)z;
                blk[3] = 0;
                memset(blk + 4, 0, (size_t)gp / 2);
                for (int j = 0; j < gp; j++) {
                    int64_t k = perm ? perm[b * gp + j] : b * gp + j;
                    int c = j / 32, jj = j % 32;
                    uint8_t *byte = blk + 4 + c * 16 + jj % 16;
                    *byte |= (uint8_t)(jj < 16 ? q[k] : q[k] << 4);
                }
            } else {
                nb_block_w8 w;
                w.d = s;
                for (int j = 0; j < 32; j++) {
                    int64_t k = perm ? perm[b * gp + j] : b * gp + j;
                    int v = (int)q[k] - z;
                    if (v < -128 || v > 127) {
                        free(out);
                        free(perm);
                        return nb_fail(NB_ERR_UNSUPPORTED, "%s: code %d - zero point %d at [%lld, %lld] does not fit int8 (W8 blocks); "
                                       "8-bit asymmetric weights are read only when every q - zero fits", what, q[k], z,
                                       (long long)r, (long long)k);
                    }
                    w.qs[j] = (int8_t)v;
                }
                memcpy(blk, &w, sizeof w);
            }
        }
    }
    *type = t;
    *dst = out;
    *nbytes = total;
    *perm_out = perm;
    return NB_OK;
}

void nb_hfq_fp8_block(const void *w, const void *s, nb_dtype s_t, int64_t K, int64_t R, int bo, int bi, void *dst) {
    int64_t sc = (K + bi - 1) / bi;
    nb_block_fp8 *out = dst;
    for (int64_t r = 0; r < R; r++)
        for (int64_t b = 0; b < K / 32; b++) {
            nb_block_fp8 *o = &out[r * (K / 32) + b];
            o->d = nb_hfq_ld_scale(s, (r / bo) * sc + (b * 32) / bi, s_t);
            memcpy(o->f8, (const uint8_t *)w + r * K + b * 32, 32);
        }
}

void nb_hfq_scaled_rows(const void *w, const void *s, nb_dtype s_t, bool per_tensor, int64_t K, int64_t R, void *dst) {
    nb_block_fp8 *out = dst; /* same layout as nb_block_w8: f32 d | 32 bytes */
    for (int64_t r = 0; r < R; r++) {
        float d = nb_hfq_ld_scale(s, per_tensor ? 0 : r, s_t);
        for (int64_t b = 0; b < K / 32; b++) {
            nb_block_fp8 *o = &out[r * (K / 32) + b];
            o->d = d;
            memcpy(o->f8, (const uint8_t *)w + r * K + b * 32, 32);
        }
    }
}

void nb_hfq_nf4(const void *packed, const float *absmax, int64_t K, int64_t R, void *dst) {
    const uint8_t *p = packed;
    nb_block_nf4 *out = dst;
    for (int64_t r = 0; r < R; r++)
        for (int64_t b = 0; b < K / 64; b++) {
            int64_t e0 = r * K + b * 64; /* flattened element index, even */
            nb_block_nf4 *o = &out[r * (K / 64) + b];
            o->absmax = absmax[e0 / 64];
            for (int j = 0; j < 32; j++) {
                /* element e: byte e/2, high nibble when e is even */
                int64_t e = e0 + j, f = e0 + j + 32;
                uint8_t lo = (uint8_t)(e % 2 ? p[e / 2] & 15 : p[e / 2] >> 4);
                uint8_t hi = (uint8_t)(f % 2 ? p[f / 2] & 15 : p[f / 2] >> 4);
                o->qs[j] = (uint8_t)(lo | hi << 4);
            }
        }
}

void nb_hfq_bnb_absmax(const uint8_t *qabs, const void *nested_absmax, const void *code, int64_t n, int64_t nbs,
                       float offset, float *out) {
    for (int64_t b = 0; b < n; b++)
        out[b] = nb_hfq_ld_scale(code, qabs[b], NB_F32) * nb_hfq_ld_scale(nested_absmax, b / nbs, NB_F32) + offset;
}

/* ---- one linear layer ------------------------------------------------- */

typedef struct lctx {
    const nb_safetensors *st;
    const char *module;
    nb_hfq_mark_fn mark;
    void *ctx;
} lctx;

static void fmt_shape(char *buf, size_t n, int nd, const int64_t *d) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* <module>.<suffix> with one of the dtypes in `dtypes` (comma list of
 * safetensors names) and shape {d0[, d1]} (nd 0..2; d < 0 = any). */
static nb_status get(const lctx *c, const char *suffix, const char *dtypes, int nd, int64_t d0, int64_t d1, bool optional,
                     const nb_st_tensor **out) {
    char name[512];
    snprintf(name, sizeof name, "%s.%s", c->module, suffix);
    const nb_st_tensor *t = nb_safetensors_find(c->st, name);
    *out = NULL;
    if (!t) {
        if (optional) return NB_OK;
        return nb_fail(NB_ERR_FORMAT, "tensor '%s' is missing (required by the quantization_config)", name);
    }
    char want[64] = "", have[96];
    int64_t d[2] = {d0, d1};
    bool ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = d[i] < 0 || t->shape[i] == d[i];
    if (!ok) {
        fmt_shape(want, sizeof want, nd, d);
        fmt_shape(have, sizeof have, t->n_dims, t->shape);
        return nb_fail(NB_ERR_FORMAT, "tensor '%s': field 'shape' = %s, expected %s (-1 = any)", name, have, want);
    }
    const char *p = dtypes;
    size_t l = strlen(t->dtype_name);
    bool dt = false;
    while (*p && !dt) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        dt = n == l && !strncmp(p, t->dtype_name, n);
        p += n + (e ? 1 : 0);
    }
    if (!dt) return nb_fail(NB_ERR_FORMAT, "tensor '%s': field 'dtype' = %s, expected one of %s", name, t->dtype_name, dtypes);
    if (c->mark) c->mark(c->ctx, t);
    *out = t;
    return NB_OK;
}

/* An optional tensor nibble does not use: marked when present; it must be
 * one value (input_scale) or all zero bytes (zero points). */
static nb_status mark_opt(const lctx *c, const char *suffix, bool zero) {
    char name[512];
    snprintf(name, sizeof name, "%s.%s", c->module, suffix);
    const nb_st_tensor *t = nb_safetensors_find(c->st, name);
    if (!t) return NB_OK;
    if (c->mark) c->mark(c->ctx, t);
    if (zero) {
        for (uint64_t i = 0; i < t->nbytes; i++)
            if (((const uint8_t *)t->data)[i])
                return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': non-zero zero points are not supported (symmetric only)", name);
    } else if (t->nelem != 1) {
        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': %lld values; only a static per-tensor scale is supported", name,
                       (long long)t->nelem);
    }
    return NB_OK;
}
static nb_status mark_scalar(const lctx *c, const char *suffix) { return mark_opt(c, suffix, false); }
static nb_status mark_zero(const lctx *c, const char *suffix) { return mark_opt(c, suffix, true); }

static nb_dtype st_type(const nb_st_tensor *t) {
    return !strcmp(t->dtype_name, "F32") ? NB_F32 : !strcmp(t->dtype_name, "F16") ? NB_F16 : NB_BF16;
}

static void set_out(nb_tensor *out, const char *gguf, nb_dtype t, int64_t K, int64_t R, const void *data, uint64_t nb) {
    memset(out, 0, sizeof *out);
    out->name = gguf;
    out->type = t;
    out->n_dims = 2;
    out->ne[0] = K;
    out->ne[1] = R;
    out->ne[2] = out->ne[3] = 1;
    out->data = data;
    out->nbytes = nb;
}

static nb_status plain(const lctx *c, const char *gguf, int64_t K, int64_t R, nb_tensor *out) {
    const nb_st_tensor *t;
    NB_TRY(get(c, "weight", "F32,F16,BF16", 2, R, K, false, &t));
    set_out(out, gguf, st_type(t), K, R, t->data, t->nbytes);
    return NB_OK;
}

static nb_status need_div(const char *module, const char *what, int64_t v, int64_t by) {
    if (by > 0 && v % by == 0) return NB_OK;
    return nb_fail(NB_ERR_UNSUPPORTED, "%s: %s = %lld is not a multiple of %lld", module, what, (long long)v, (long long)by);
}

static nb_status alloc_blocks(nb_dtype t, int64_t K, int64_t R, int blk, int bytes, void **owned, uint64_t *nb) {
    (void)t;
    *nb = (uint64_t)R * (uint64_t)(K / blk) * (uint64_t)bytes;
    *owned = malloc(*nb ? *nb : 1);
    return *owned ? NB_OK : NB_ERR_NOMEM;
}

/* bitsandbytes' quant_state JSON blob. */
static nb_status bnb_state(const lctx *c, const nb_st_tensor *qs, int64_t K, int64_t R, int64_t *nbs, float *offset) {
    json_error_t err;
    json_t *j = json_loadb(qs->data, (size_t)qs->nbytes, 0, &err);
    nb_status rc = NB_OK;
    if (!j || !json_is_object(j)) {
        rc = nb_fail(NB_ERR_FORMAT, "tensor '%s': not a JSON object (%s)", qs->name, j ? "wrong type" : err.text);
        goto done;
    }
    const json_t *qt = json_object_get(j, "quant_type"), *bs = json_object_get(j, "blocksize"), *sh = json_object_get(j, "shape");
    if (!qt || !json_is_string(qt) || strcmp(json_string_value(qt), "nf4")) {
        rc = nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': field 'quant_type' = %s (supported: nf4)", qs->name,
                     qt && json_is_string(qt) ? json_string_value(qt) : "missing");
        goto done;
    }
    if (!bs || !json_is_integer(bs) || json_integer_value(bs) != 64) {
        rc = nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': field 'blocksize' = %lld (supported: 64)", qs->name,
                     bs && json_is_integer(bs) ? (long long)json_integer_value(bs) : -1LL);
        goto done;
    }
    if (!sh || !json_is_array(sh) || json_array_size(sh) != 2 || json_integer_value(json_array_get(sh, 0)) != R ||
        json_integer_value(json_array_get(sh, 1)) != K) {
        rc = nb_fail(NB_ERR_FORMAT, "tensor '%s': field 'shape' is not [%lld, %lld]", qs->name, (long long)R, (long long)K);
        goto done;
    }
    const json_t *nb = json_object_get(j, "nested_blocksize"), *no = json_object_get(j, "nested_offset");
    *nbs = nb && json_is_integer(nb) ? (int64_t)json_integer_value(nb) : 0;
    *offset = no && json_is_number(no) ? (float)json_number_value(no) : 0.0f;
    (void)c;
done:
    json_decref(j);
    return rc;
}

static nb_status load_bnb(const lctx *c, const nb_hf_quant *q, const char *gguf, int64_t K, int64_t R, nb_tensor *out,
                          void **owned) {
    const nb_st_tensor *w, *qs, *am, *qm, *na = NULL, *nm = NULL;
    char name[512];
    snprintf(name, sizeof name, "%s.weight.quant_state.bitsandbytes__nf4", c->module);
    if (!nb_safetensors_find(c->st, name)) {
        snprintf(name, sizeof name, "%s.weight.quant_state.bitsandbytes__fp4", c->module);
        if (nb_safetensors_find(c->st, name))
            return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': fp4 is not supported (supported: nf4)", name);
        return plain(c, gguf, K, R, out);
    }
    NB_TRY(need_div(c->module, "the input size", K, 64));
    int64_t n = R * K, nblk = n / 64;
    NB_TRY(get(c, "weight.quant_state.bitsandbytes__nf4", "U8", 1, -1, 0, false, &qs));
    const nb_st_tensor *wt = nb_safetensors_find(c->st, (snprintf(name, sizeof name, "%s.weight", c->module), name));
    NB_TRY(get(c, "weight", "U8", wt && wt->n_dims == 1 ? 1 : 2, n / 2, 1, false, &w));
    NB_TRY(get(c, "weight.quant_map", "F32", 1, 16, 0, false, &qm));
    for (int i = 0; i < 16; i++)
        if (fabsf(nb_hfq_ld_scale(qm->data, i, NB_F32) - nb_hfq_nf4_levels[i]) > 1e-6f)
            return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': element %d = %g is not the NF4 level %g", qm->name, i,
                           (double)nb_hfq_ld_scale(qm->data, i, NB_F32), (double)nb_hfq_nf4_levels[i]);
    int64_t nbs = 0;
    float off = 0;
    NB_TRY(bnb_state(c, qs, K, R, &nbs, &off));
    float *abs = malloc((size_t)nblk * sizeof *abs);
    if (!abs) return NB_ERR_NOMEM;
    nb_status rc;
    if (q->bnb_double) {
        if (nbs <= 0) {
            free(abs);
            return nb_fail(NB_ERR_FORMAT, "tensor '%s': field 'nested_blocksize' missing (bnb_4bit_use_double_quant is true)", qs->name);
        }
        if ((rc = get(c, "weight.absmax", "U8", 1, nblk, 0, false, &am)) != NB_OK ||
            (rc = get(c, "weight.nested_absmax", "F32", 1, (nblk + nbs - 1) / nbs, 0, false, &na)) != NB_OK ||
            (rc = get(c, "weight.nested_quant_map", "F32", 1, 256, 0, false, &nm)) != NB_OK) {
            free(abs);
            return rc;
        }
        nb_hfq_bnb_absmax(am->data, na->data, nm->data, nblk, nbs, off, abs);
    } else {
        if ((rc = get(c, "weight.absmax", "F32", 1, nblk, 0, false, &am)) != NB_OK) {
            free(abs);
            return rc;
        }
        for (int64_t b = 0; b < nblk; b++) abs[b] = nb_hfq_ld_scale(am->data, b, NB_F32);
    }
    uint64_t nb;
    if ((rc = alloc_blocks(NB_NF4, K, R, 64, 36, owned, &nb)) != NB_OK) {
        free(abs);
        return rc;
    }
    nb_hfq_nf4(w->data, abs, K, R, *owned);
    free(abs);
    set_out(out, gguf, NB_NF4, K, R, *owned, nb);
    return NB_OK;
}

nb_status nb_hfq_load_linear(const nb_safetensors *st, const nb_hf_quant *q, const char *module, const char *gguf,
                             int64_t K, int64_t R, nb_tensor *out, void **owned, int32_t **perm, nb_hfq_mark_fn mark,
                             void *ctx) {
    lctx c = {st, module, mark, ctx};
    *owned = NULL;
    *perm = NULL;
    char name[512];
    if (q->method == NB_HFQ_NONE || nb_hfquant_ignored(q, module)) return plain(&c, gguf, K, R, out);
    if (q->method == NB_HFQ_BNB_NF4) return load_bnb(&c, q, gguf, K, R, out, owned);

    const nb_st_tensor *w, *s, *z = NULL, *g = NULL;
    nb_hfq_unpacked u;
    nb_status rc;
    uint64_t nb;
    nb_dtype t;
    switch (q->method) {
    case NB_HFQ_AWQ:
    case NB_HFQ_GPTQ: {
        snprintf(name, sizeof name, "%s.qweight", module);
        if (!nb_safetensors_find(st, name)) return plain(&c, gguf, K, R, out);
        int G = q->group > 0 ? q->group : (int)K;
        NB_TRY(need_div(module, "the input size", K, G));
        int64_t ng = K / G;
        if (q->method == NB_HFQ_AWQ) {
            NB_TRY(need_div(module, "the output size", R, 8));
            NB_TRY(get(&c, "qweight", "I32", 2, K, R / 8, false, &w));
            NB_TRY(get(&c, "qzeros", "I32", 2, ng, R / 8, false, &z));
            NB_TRY(get(&c, "scales", "F16", 2, ng, R, false, &s));
            NB_TRY(nb_hfq_unpacked_alloc(&u, K, R, 4, ng));
            nb_hfq_unpack_awq(w->data, z->data, s->data, K, R, G, &u);
        } else {
            int pf = 32 / q->bits;
            NB_TRY(need_div(module, "the input size", K, pf));
            NB_TRY(need_div(module, "the output size", R, pf));
            NB_TRY(get(&c, "qweight", "I32", 2, K / pf, R, false, &w));
            NB_TRY(get(&c, "qzeros", "I32", 2, ng, R / pf, false, &z));
            NB_TRY(get(&c, "scales", "F16", 2, ng, R, false, &s));
            NB_TRY(get(&c, "g_idx", "I32", 1, K, 0, true, &g));
            snprintf(name, sizeof name, "%s.bias", module);
            if (nb_safetensors_find(st, name)) {
                const nb_st_tensor *bias = nb_safetensors_find(st, name);
                if (mark) mark(ctx, bias); /* GPTQ writes zero biases; nibble's llama layers have none */
                for (uint64_t i = 0; i < bias->nbytes; i++)
                    if (((const uint8_t *)bias->data)[i])
                        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': a non-zero bias is not supported on this layer", name);
            }
            NB_TRY(nb_hfq_unpacked_alloc(&u, K, R, q->bits, ng));
            if ((rc = nb_hfq_unpack_gptq(w->data, z->data, s->data, g ? g->data : NULL, K, R, q->bits, ng, q->gptq_v2, module,
                                         &u)) != NB_OK) {
                nb_hfq_unpacked_free(&u);
                return rc;
            }
            if (g && !q->desc_act) {
                for (int64_t k = 0; k < K; k++)
                    if (u.gidx[k] != k / G) {
                        int32_t v = u.gidx[k];
                        nb_hfq_unpacked_free(&u);
                        return nb_fail(NB_ERR_FORMAT, "tensor '%s.g_idx': element %lld = %d but desc_act is false (expected %lld)",
                                       module, (long long)k, v, (long long)(k / G));
                    }
            }
        }
        /* GPTQ sym=true stores zero 2^(bits-1) (after the -1 convention) */
        bool sym = q->method == NB_HFQ_GPTQ && q->sym && q->bits == 4;
        rc = nb_hfq_emit(&u, sym, module, &t, owned, &nb, perm);
        nb_hfq_unpacked_free(&u);
        NB_TRY(rc);
        set_out(out, gguf, t, K, R, *owned, nb);
        out->in_perm = *perm;
        return NB_OK;
    }
    case NB_HFQ_CT_PACK: {
        snprintf(name, sizeof name, "%s.weight_packed", module);
        if (!nb_safetensors_find(st, name)) return plain(&c, gguf, K, R, out);
        int64_t G = q->group > 0 ? q->group : K;
        NB_TRY(need_div(module, "the input size", K, G));
        NB_TRY(need_div(module, "the input size", K, 8));
        int64_t ng = K / G;
        const nb_st_tensor *shp;
        NB_TRY(get(&c, "weight_packed", "I32", 2, R, K / 8, false, &w));
        NB_TRY(get(&c, "weight_scale", "F32,F16,BF16", 2, R, ng, false, &s));
        NB_TRY(get(&c, "weight_shape", "I32,I64", 1, 2, 0, true, &shp));
        if (shp) {
            int64_t v[2];
            for (int i = 0; i < 2; i++) {
                if (!strcmp(shp->dtype_name, "I32")) v[i] = (int32_t)rd32(shp->data, i);
                else memcpy(&v[i], (const uint8_t *)shp->data + 8 * i, 8);
            }
            if (v[0] != R || v[1] != K)
                return nb_fail(NB_ERR_FORMAT, "tensor '%s.weight_shape' = [%lld, %lld], expected [%lld, %lld]", module,
                               (long long)v[0], (long long)v[1], (long long)R, (long long)K);
        }
        if (!q->sym) NB_TRY(get(&c, "weight_zero_point", "I32", 2, (R + 7) / 8, ng, false, &z));
        NB_TRY(nb_hfq_unpacked_alloc(&u, K, R, 4, ng));
        nb_hfq_unpack_ct_pack(w->data, s->data, st_type(s), z ? z->data : NULL, K, R, ng, &u);
        rc = nb_hfq_emit(&u, q->sym, module, &t, owned, &nb, perm);
        nb_hfq_unpacked_free(&u);
        NB_TRY(rc);
        set_out(out, gguf, t, K, R, *owned, nb);
        return NB_OK;
    }
    case NB_HFQ_CT_FP8:
    case NB_HFQ_CT_INT8:
    case NB_HFQ_FP8_BLOCK: {
        bool fp8 = q->method != NB_HFQ_CT_INT8;
        snprintf(name, sizeof name, "%s.weight", module);
        const nb_st_tensor *wt = nb_safetensors_find(st, name);
        if (!wt || strcmp(wt->dtype_name, fp8 ? "F8_E4M3" : "I8")) return plain(&c, gguf, K, R, out);
        NB_TRY(need_div(module, "the input size", K, 32));
        NB_TRY(get(&c, "weight", fp8 ? "F8_E4M3" : "I8", 2, R, K, false, &w));
        NB_TRY(mark_scalar(&c, "input_scale")); /* activations are quantized per token at run time */
        if (q->method == NB_HFQ_FP8_BLOCK) {
            NB_TRY(get(&c, "weight_scale_inv", "F32,F16,BF16", 2, (R + q->block_out - 1) / q->block_out,
                       (K + q->block_in - 1) / q->block_in, false, &s));
            NB_TRY(alloc_blocks(NB_FP8_E4M3, K, R, 32, 36, owned, &nb));
            nb_hfq_fp8_block(w->data, s->data, st_type(s), K, R, q->block_out, q->block_in, *owned);
            set_out(out, gguf, NB_FP8_E4M3, K, R, *owned, nb);
            return NB_OK;
        }
        bool per_tensor = false;
        snprintf(name, sizeof name, "%s.weight_scale", module);
        const nb_st_tensor *sc = nb_safetensors_find(st, name);
        if (sc && nb_safetensors_find(st, name)->nelem == 1 && R != 1) {
            per_tensor = true;
            NB_TRY(get(&c, "weight_scale", "F32,F16,BF16", sc->n_dims, 1, 1, false, &s));
        } else {
            NB_TRY(get(&c, "weight_scale", "F32,F16,BF16", 2, R, 1, false, &s));
        }
        if (!fp8) {
            NB_TRY(mark_zero(&c, "weight_zero_point"));
            NB_TRY(mark_zero(&c, "input_zero_point"));
        }
        nb_dtype ot = fp8 ? NB_FP8_E4M3 : q->act_quant ? NB_W8A8 : NB_W8;
        NB_TRY(alloc_blocks(ot, K, R, 32, 36, owned, &nb));
        nb_hfq_scaled_rows(w->data, s->data, st_type(s), per_tensor, K, R, *owned);
        set_out(out, gguf, ot, K, R, *owned, nb);
        return NB_OK;
    }
    default: break;
    }
    return nb_fail(NB_ERR_UNSUPPORTED, "%s: quant_method %s is not supported", module, q->method_name);
}

/* ---- write direction ---------------------------------------------------- */

nb_status nb_hfq_from_w4g(const void *data, int G, int64_t K, int64_t R, const int64_t *rows, nb_hfq_unpacked *u) {
    int64_t ng = K / G, bb = NB_W4_BLOCK_BYTES(G);
    NB_TRY(nb_hfq_unpacked_alloc(u, K, R, 4, ng));
    for (int64_t k = 0; k < K; k++) u->gidx[k] = (int32_t)(k / G);
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *row = (const uint8_t *)data + (rows ? rows[r] : r) * ng * bb;
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *blk = row + g * bb;
            uint16_t h;
            memcpy(&h, blk, 2);
            u->scale[r * ng + g] = nb_fp16_to_fp32(h);
            u->zero[r * ng + g] = blk[2];
            for (int j = 0; j < G; j++) {
                int c = j / 32, jj = j % 32;
                uint8_t byte = blk[4 + c * 16 + jj % 16];
                u->q[r * K + g * G + j] = (uint8_t)(jj < 16 ? byte & 15 : byte >> 4);
            }
        }
    }
    return NB_OK;
}

static void wr32(void *p, int64_t i, uint32_t v) { memcpy((uint8_t *)p + 4 * i, &v, 4); }

void nb_hfq_pack_awq(const nb_hfq_unpacked *u, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales) {
    int64_t K = u->K, R = u->R, W = R / 8, ng = u->n_groups;
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= (uint32_t)u->q[(8 * c + awq_order[i]) * K + k] << (4 * i);
            wr32(qweight, k * W + c, w);
        }
    for (int64_t g = 0; g < ng; g++) {
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= (uint32_t)u->zero[(8 * c + awq_order[i]) * ng + g] << (4 * i);
            wr32(qzeros, g * W + c, w);
        }
        for (int64_t r = 0; r < R; r++) {
            uint16_t h = nb_fp32_to_fp16(u->scale[r * ng + g]);
            memcpy(&scales[g * R + r], &h, 2);
        }
    }
}

void nb_hfq_pack_gptq(const nb_hfq_unpacked *u, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales, int32_t *g_idx) {
    int64_t K = u->K, R = u->R, ng = u->n_groups;
    for (int64_t kw = 0; kw < K / 8; kw++)
        for (int64_t r = 0; r < R; r++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= (uint32_t)u->q[r * K + kw * 8 + i] << (4 * i);
            wr32(qweight, kw * R + r, w);
        }
    for (int64_t g = 0; g < ng; g++) {
        for (int64_t c = 0; c < R / 8; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= (uint32_t)((u->zero[(8 * c + i) * ng + g] - 1) & 15) << (4 * i);
            wr32(qzeros, g * (R / 8) + c, w);
        }
        for (int64_t r = 0; r < R; r++) {
            uint16_t h = nb_fp32_to_fp16(u->scale[r * ng + g]);
            memcpy(&scales[g * R + r], &h, 2);
        }
    }
    for (int64_t k = 0; k < K; k++) {
        int32_t v = u->gidx[k];
        memcpy(&g_idx[k], &v, 4);
    }
}

void nb_hfq_pack_ct(const nb_hfq_unpacked *u, uint32_t *packed, uint16_t *scale, uint32_t *zp) {
    int64_t K = u->K, R = u->R, ng = u->n_groups;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < K / 8; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= (uint32_t)u->q[r * K + 8 * c + i] << (4 * i);
            wr32(packed, r * (K / 8) + c, w);
        }
        for (int64_t g = 0; g < ng; g++) {
            uint16_t h = nb_fp32_to_fp16(u->scale[r * ng + g]);
            memcpy(&scale[r * ng + g], &h, 2);
        }
    }
    if (zp) {
        memset(zp, 0, (size_t)((R + 7) / 8 * ng) * 4);
        for (int64_t r = 0; r < R; r++)
            for (int64_t g = 0; g < ng; g++) {
                uint32_t w = rd32(zp, (r / 8) * ng + g) | (uint32_t)u->zero[r * ng + g] << (4 * (r % 8));
                wr32(zp, (r / 8) * ng + g, w);
            }
    }
}

/* ---- storage census for planners ----------------------------------------- */

static bool has_sfx(const char *s, const char *x) {
    size_t n = strlen(s), m = strlen(x);
    return n >= m && !strcmp(s + n - m, x);
}

nb_status nb_hf_storage(const char *path, nb_hf_storage_fn fn, void *ctx) {
    char p[4200], dir[4096];
    nb_safetensors *st = NULL;
    if (has_sfx(path, ".safetensors")) NB_TRY(nb_safetensors_open(path, &st));
    else if (has_sfx(path, ".index.json")) NB_TRY(nb_safetensors_open_index(path, &st));
    else {
        if (has_sfx(path, "config.json")) {
            const char *sl = strrchr(path, '/');
            snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - path) : 1, sl ? path : ".");
        } else {
            snprintf(dir, sizeof dir, "%s", path);
        }
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        FILE *f = fopen(p, "rb");
        if (f) {
            fclose(f);
            NB_TRY(nb_safetensors_open_index(p, &st));
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors", dir);
            NB_TRY(nb_safetensors_open(p, &st));
        }
    }
    int qbits = 4; /* GPTQ 8-bit packs 4 values per qweight word */
    if (!has_sfx(path, ".safetensors") && !has_sfx(path, ".index.json")) {
        nb_hf_config hc;
        snprintf(p, sizeof p, "%s/config.json", dir);
        if (nb_hfconfig_load(p, &hc) == NB_OK) {
            if (hc.quant.bits == 8) qbits = 8;
            nb_hfconfig_free(&hc);
        }
    }
    /* suffix, values per element of the stored tensor (0 = no weights) */
    static const struct { const char *sfx; int per; } S[] = {
        {".weight.quant_state.bitsandbytes__nf4", 0}, {".weight.quant_state.bitsandbytes__fp4", 0},
        {".weight.nested_quant_map", 0}, {".weight.nested_absmax", 0}, {".weight.quant_map", 0}, {".weight.absmax", 0},
        {".weight_packed", 8}, {".weight_scale_inv", 0}, {".weight_scale", 0}, {".weight_zero_point", 0},
        {".weight_shape", 0}, {".input_scale", 0}, {".input_zero_point", 0},
        {".qweight", -1}, {".qzeros", 0}, {".scales", 0}, {".g_idx", 0}, {".weight", 1}, {".bias", 1},
    };
    for (int64_t i = 0; i < nb_safetensors_n_tensors(st); i++) {
        const nb_st_tensor *t = nb_safetensors_tensor(st, i);
        char hf[600], gg[256];
        uint64_t params = 0;
        const char *gname = NULL;
        for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
            if (!has_sfx(t->name, S[k].sfx)) continue;
            size_t ml = strlen(t->name) - strlen(S[k].sfx);
            bool bias = !strcmp(S[k].sfx, ".bias");
            snprintf(hf, sizeof hf, "%.*s%s", (int)ml, t->name, bias ? ".bias" : ".weight");
            if (nb_hf_name_from_hf(hf, gg, sizeof gg)) gname = gg;
            int per = S[k].per;
            if (per == -1) per = 32 / qbits;
            if (per == 1 && !strcmp(t->dtype_name, "U8") && t->n_dims == 2 && t->shape[1] == 1) per = 2; /* bnb 4-bit */
            params = (uint64_t)t->nelem * (uint64_t)per;
            break;
        }
        fn(ctx, gname, params, t->nbytes);
    }
    nb_safetensors_close(st);
    return NB_OK;
}
