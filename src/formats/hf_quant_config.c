/* quantization_config of an HF config.json -> nb_hf_quant. What is accepted
 * and why is in docs/formats.md ("Quantized HF checkpoints"); every refusal
 * names the field, its value and what is supported. */
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/hfconfig.h"

#define QC "quantization_config"

static const char *str_or(const json_t *o, const char *key, const char *def) {
    const json_t *v = json_object_get(o, key);
    return v && json_is_string(v) ? json_string_value(v) : def;
}

/* Integer field (absent/null -> def). */
static nb_status q_int(const json_t *o, const char *key, const char *where, int64_t def, const char *name, int64_t *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return NB_OK;
    }
    if (!json_is_integer(v)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s%s': expected an integer", name, where, key);
    *out = (int64_t)json_integer_value(v);
    return NB_OK;
}

static nb_status q_bool(const json_t *o, const char *key, const char *where, bool def, const char *name, bool *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return NB_OK;
    }
    if (!json_is_boolean(v)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s%s': expected true or false", name, where, key);
    *out = json_is_true(v);
    return NB_OK;
}

static nb_status group_ok(int64_t g, const char *field, const char *name, bool allow_channel) {
    if (g == 32 || g == 64 || g == 128 || (allow_channel && g == -1)) return NB_OK;
    return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%s' = %lld is not supported (supported: 32, 64, 128%s)", name, field,
                   (long long)g, allow_channel ? ", -1 (per channel)" : "");
}

static nb_status add_ignore(nb_hf_quant *q, const json_t *arr, const char *field, const char *name) {
    if (!arr || json_is_null(arr)) return NB_OK;
    if (!json_is_array(arr)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s': expected a list of module names", name, field);
    size_t n = json_array_size(arr);
    if (n > 1u << 16) return nb_fail(NB_ERR_RANGE, "%s: field '%s': %zu entries (at most 65536)", name, field, n);
    char **ig = realloc(q->ignore, ((size_t)q->n_ignore + n + 1) * sizeof *ig);
    if (!ig) return NB_ERR_NOMEM;
    q->ignore = ig;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        if (!json_is_string(e)) return nb_fail(NB_ERR_FORMAT, "%s: field '%s[%zu]': expected a string", name, field, i);
        const char *s = json_string_value(e);
        if (!strncmp(s, "re:", 3)) {
            regex_t re;
            char *pat = malloc(strlen(s) + 8);
            if (!pat) return NB_ERR_NOMEM;
            snprintf(pat, strlen(s) + 8, "^(%s)", s + 3);
            int rc = regcomp(&re, pat, REG_EXTENDED | REG_NOSUB);
            free(pat);
            if (rc) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%s[%zu]' = '%s': not a POSIX extended regular expression nibble can honour",
                                   name, field, i, s);
            regfree(&re);
        }
        q->ignore[q->n_ignore] = strdup(s);
        if (!q->ignore[q->n_ignore]) return NB_ERR_NOMEM;
        q->n_ignore++;
    }
    return NB_OK;
}

static nb_status parse_awq(const json_t *qc, const char *name, nb_hf_quant *q) {
    const char *ver = str_or(qc, "version", "gemm");
    if (strcasecmp(ver, "gemm"))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".version' = '%s' is not supported (supported: gemm)", name, ver);
    int64_t bits = 0, g = 0;
    NB_TRY(q_int(qc, "bits", QC ".", -2, name, &bits));
    if (bits == -2) NB_TRY(q_int(qc, "w_bit", QC ".", 4, name, &bits));
    if (bits != 4) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".bits' = %lld is not supported for awq (supported: 4)", name, (long long)bits);
    NB_TRY(q_int(qc, "group_size", QC ".", -2, name, &g));
    if (g == -2) NB_TRY(q_int(qc, "q_group_size", QC ".", 128, name, &g));
    NB_TRY(group_ok(g, QC ".group_size", name, false));
    bool zp = true;
    NB_TRY(q_bool(qc, "zero_point", QC ".", true, name, &zp));
    if (!zp) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".zero_point' = false is not supported for awq (supported: true)", name);
    q->method = NB_HFQ_AWQ;
    q->bits = 4;
    q->group = (int)g;
    q->ignore_substring = true;
    return add_ignore(q, json_object_get(qc, "modules_to_not_convert"), QC ".modules_to_not_convert", name);
}

static nb_status parse_gptq(const json_t *qc, const char *name, nb_hf_quant *q) {
    int64_t bits = 0, g = 0;
    NB_TRY(q_int(qc, "bits", QC ".", 4, name, &bits));
    if (bits != 4 && bits != 8)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".bits' = %lld is not supported for gptq (supported: 4, 8)", name, (long long)bits);
    NB_TRY(q_int(qc, "group_size", QC ".", 128, name, &g));
    NB_TRY(group_ok(g, QC ".group_size", name, true));
    NB_TRY(q_bool(qc, "sym", QC ".", true, name, &q->sym));
    NB_TRY(q_bool(qc, "desc_act", QC ".", false, name, &q->desc_act));
    const char *fmt = str_or(qc, "checkpoint_format", NULL);
    if (!fmt) fmt = str_or(qc, "format", "gptq");
    if (!strcmp(fmt, "gptq_v2")) q->gptq_v2 = true;
    else if (strcmp(fmt, "gptq"))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".checkpoint_format' = '%s' is not supported (supported: gptq, gptq_v2; "
                       "exllama/marlin/bitblas layouts are not read)", name, fmt);
    const json_t *dyn = json_object_get(qc, "dynamic");
    if (dyn && !json_is_null(dyn) && !(json_is_object(dyn) && json_object_size(dyn) == 0))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".dynamic': per-module overrides are not supported", name);
    q->method = NB_HFQ_GPTQ;
    q->bits = (int)bits;
    q->group = (int)g;
    q->ignore_substring = true;
    return add_ignore(q, json_object_get(qc, "modules_to_not_convert"), QC ".modules_to_not_convert", name);
}

/* compressed-tensors: every config_group must describe the same scheme. */
static nb_status parse_ct(const json_t *qc, const char *name, nb_hf_quant *q) {
    const char *fmt = str_or(qc, "format", "");
    const json_t *groups = json_object_get(qc, "config_groups");
    if (!groups || !json_is_object(groups) || json_object_size(groups) == 0)
        return nb_fail(NB_ERR_FORMAT, "%s: field '" QC ".config_groups': expected a non-empty object", name);
    const char *key;
    const json_t *grp;
    bool first = true;
    json_object_foreach((json_t *)groups, key, grp) {
        char where[160];
        snprintf(where, sizeof where, QC ".config_groups.%s.", key);
        if (!json_is_object(grp)) return nb_fail(NB_ERR_FORMAT, "%s: field '%.150s': expected an object", name, where);
        const json_t *tg = json_object_get(grp, "targets");
        bool linear = false;
        for (size_t i = 0; tg && json_is_array(tg) && i < json_array_size(tg); i++) {
            const json_t *e = json_array_get(tg, i);
            if (json_is_string(e) && (!strcmp(json_string_value(e), "Linear") || !strcmp(json_string_value(e), "re:.*Linear")))
                linear = true;
        }
        if (!linear)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%stargets' must include \"Linear\" (per-module targets are not supported)", name, where);
        const json_t *w = json_object_get(grp, "weights");
        if (!w || !json_is_object(w)) return nb_fail(NB_ERR_FORMAT, "%s: field '%sweights': expected an object", name, where);
        int64_t bits = 0, gs = 0;
        bool sym = true, dyn = false;
        NB_TRY(q_int(w, "num_bits", where, 8, name, &bits));
        NB_TRY(q_int(w, "group_size", where, -1, name, &gs));
        NB_TRY(q_bool(w, "symmetric", where, true, name, &sym));
        NB_TRY(q_bool(w, "dynamic", where, false, name, &dyn));
        const char *type = str_or(w, "type", "int");
        const char *strat = str_or(w, "strategy", "tensor");
        const json_t *ia = json_object_get(grp, "input_activations");
        bool act = ia && !json_is_null(ia), act_static = false;
        if (act) {
            if (!json_is_object(ia)) return nb_fail(NB_ERR_FORMAT, "%s: field '%sinput_activations': expected an object or null", name, where);
            int64_t ab = 8;
            bool ad = true;
            NB_TRY(q_int(ia, "num_bits", where, 8, name, &ab));
            NB_TRY(q_bool(ia, "dynamic", where, true, name, &ad));
            if (ab != 8) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sinput_activations.num_bits' = %lld is not supported (supported: 8)", name, where, (long long)ab);
            act_static = !ad;
        }
        if (json_object_get(grp, "output_activations") && !json_is_null(json_object_get(grp, "output_activations")))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%soutput_activations' is not supported (null only)", name, where);
        if (dyn) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.dynamic' = true is not supported", name, where);
        nb_hfq_method m;
        int group = -1;
        if (!strcmp(fmt, "float-quantized") || (!strcmp(fmt, "naive-quantized") && !strcmp(type, "float"))) {
            if (strcmp(type, "float") || bits != 8)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: fields '%sweights.type' = '%s', 'num_bits' = %lld are not supported with format %s (supported: float, 8)",
                               name, where, type, (long long)bits, fmt);
            if (strcmp(strat, "tensor") && strcmp(strat, "channel"))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.strategy' = '%s' is not supported for FP8 (supported: tensor, channel)", name, where, strat);
            if (!sym) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.symmetric' = false is not supported for FP8", name, where);
            m = NB_HFQ_CT_FP8;
        } else if (!strcmp(fmt, "int-quantized") || !strcmp(fmt, "naive-quantized")) {
            if (strcmp(type, "int") || bits != 8)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: fields '%sweights.type' = '%s', 'num_bits' = %lld are not supported with format %s (supported: int, 8)",
                               name, where, type, (long long)bits, fmt);
            if (strcmp(strat, "tensor") && strcmp(strat, "channel"))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.strategy' = '%s' is not supported for INT8 (supported: tensor, channel)", name, where, strat);
            if (!sym) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.symmetric' = false is not supported for INT8 (supported: true)", name, where);
            m = NB_HFQ_CT_INT8;
        } else if (!strcmp(fmt, "pack-quantized")) {
            if (strcmp(type, "int") || bits != 4)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: fields '%sweights.type' = '%s', 'num_bits' = %lld are not supported with format pack-quantized (supported: int, 4)",
                               name, where, type, (long long)bits);
            if (!strcmp(strat, "group")) {
                char f[200];
                snprintf(f, sizeof f, "%sweights.group_size", where);
                NB_TRY(group_ok(gs, f, name, false));
                group = (int)gs;
            } else if (strcmp(strat, "channel")) {
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sweights.strategy' = '%s' is not supported for pack-quantized (supported: group, channel)", name, where, strat);
            }
            if (act) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '%sinput_activations' must be null for pack-quantized (W4A16)", name, where);
            m = NB_HFQ_CT_PACK;
        } else {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".format' = '%s' is not supported (supported: float-quantized, int-quantized, pack-quantized)",
                           name, fmt);
        }
        if (!first && (m != q->method || q->group != group || q->sym != sym || q->act_quant != act))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".config_groups': groups with different schemes are not supported", name);
        first = false;
        q->method = m;
        q->bits = (int)bits;
        q->group = group;
        q->sym = sym;
        q->act_quant = act;
        q->act_static = act_static;
        q->weight_per_tensor = !strcmp(strat, "tensor");
    }
    const json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (kv && !json_is_null(kv)) return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".kv_cache_scheme' is not supported (null only)", name);
    return add_ignore(q, json_object_get(qc, "ignore"), QC ".ignore", name);
}

static nb_status parse_fp8(const json_t *qc, const char *name, nb_hf_quant *q) {
    const char *fmt = str_or(qc, "fmt", "e4m3");
    if (strcmp(fmt, "e4m3"))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".fmt' = '%s' is not supported (supported: e4m3)", name, fmt);
    const json_t *bs = json_object_get(qc, "weight_block_size");
    if (!bs || !json_is_array(bs) || json_array_size(bs) != 2 || !json_is_integer(json_array_get(bs, 0)) ||
        !json_is_integer(json_array_get(bs, 1)))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".weight_block_size': expected [out, in] (block-wise scales are the supported fp8 form)", name);
    int64_t bo = json_integer_value(json_array_get(bs, 0)), bi = json_integer_value(json_array_get(bs, 1));
    if (bo < 1 || bo > 1 << 16 || bi < 32 || bi > 1 << 16 || bi % 32)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".weight_block_size' = [%lld, %lld]: the input block must be a multiple of 32",
                       name, (long long)bo, (long long)bi);
    q->method = NB_HFQ_FP8_BLOCK;
    q->bits = 8;
    q->block_out = (int)bo;
    q->block_in = (int)bi;
    q->ignore_substring = true;
    return add_ignore(q, json_object_get(qc, "modules_to_not_convert"), QC ".modules_to_not_convert", name);
}

static nb_status parse_bnb(const json_t *qc, const char *name, nb_hf_quant *q) {
    bool l4 = false, l8 = false;
    NB_TRY(q_bool(qc, "load_in_4bit", QC ".", false, name, &l4));
    NB_TRY(q_bool(qc, "load_in_8bit", QC ".", false, name, &l8));
    if (!l4 || l8)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".%s' is not supported (supported: load_in_4bit true with nf4)", name,
                       l8 ? "load_in_8bit = true" : "load_in_4bit = false");
    const char *t = str_or(qc, "bnb_4bit_quant_type", "fp4");
    if (strcmp(t, "nf4"))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".bnb_4bit_quant_type' = '%s' is not supported (supported: nf4)", name, t);
    NB_TRY(q_bool(qc, "bnb_4bit_use_double_quant", QC ".", false, name, &q->bnb_double));
    q->method = NB_HFQ_BNB_NF4;
    q->bits = 4;
    q->group = 64;
    q->ignore_substring = true;
    return add_ignore(q, json_object_get(qc, "llm_int8_skip_modules"), QC ".llm_int8_skip_modules", name);
}

nb_status nb_hfquant_parse(const void *qcv, const char *name, nb_hf_quant *q) {
    const json_t *qc = qcv;
    memset(q, 0, sizeof *q);
    if (!qc || json_is_null(qc)) return NB_OK;
    if (!json_is_object(qc)) return nb_fail(NB_ERR_FORMAT, "%s: field '" QC "': expected an object", name);
    const json_t *qm = json_object_get(qc, "quant_method");
    if (!qm || !json_is_string(qm))
        return nb_fail(NB_ERR_FORMAT, "%s: field '" QC ".quant_method': missing or not a string", name);
    const char *m = json_string_value(qm);
    snprintf(q->method_name, sizeof q->method_name, "%s", m);
    q->json = json_dumps(qc, JSON_COMPACT | JSON_SORT_KEYS);
    nb_status rc;
    if (!strcmp(m, "awq")) rc = parse_awq(qc, name, q);
    else if (!strcmp(m, "gptq")) rc = parse_gptq(qc, name, q);
    else if (!strcmp(m, "compressed-tensors")) rc = parse_ct(qc, name, q);
    else if (!strcmp(m, "fp8")) rc = parse_fp8(qc, name, q);
    else if (!strcmp(m, "bitsandbytes")) rc = parse_bnb(qc, name, q);
    else
        rc = nb_fail(NB_ERR_UNSUPPORTED, "%s: field '" QC ".quant_method' = '%s' is not supported (supported: awq, gptq, "
                     "compressed-tensors, fp8, bitsandbytes)", name, m);
    if (rc != NB_OK) nb_hfquant_free(q);
    return rc;
}

void nb_hfquant_free(nb_hf_quant *q) {
    if (!q) return;
    for (int i = 0; i < q->n_ignore; i++) free(q->ignore[i]);
    free(q->ignore);
    free(q->json);
    memset(q, 0, sizeof *q);
}

bool nb_hfquant_ignored(const nb_hf_quant *q, const char *module) {
    for (int i = 0; i < q->n_ignore; i++) {
        const char *e = q->ignore[i];
        if (!strncmp(e, "re:", 3)) {
            size_t n = strlen(e) + 8;
            char *pat = malloc(n);
            if (!pat) continue;
            snprintf(pat, n, "^(%s)", e + 3);
            regex_t re;
            bool hit = false;
            if (!regcomp(&re, pat, REG_EXTENDED | REG_NOSUB)) {
                hit = regexec(&re, module, 0, NULL, 0) == 0;
                regfree(&re);
            }
            free(pat);
            if (hit) return true;
        } else if (q->ignore_substring ? strstr(module, e) != NULL : !strcmp(module, e)) {
            return true;
        } else if (!q->ignore_substring) {
            /* compressed-tensors also lists short names ("lm_head") */
            size_t ml = strlen(module), el = strlen(e);
            if (ml > el && module[ml - el - 1] == '.' && !strcmp(module + ml - el, e)) return true;
        }
    }
    return false;
}
