/* nibble inspect: what a model file holds - architecture and
 * hyper-parameters, parameter count, dtype census (tensors, parameters,
 * bytes per type), bits per weight, quantization config, every metadata key
 * (long arrays abbreviated), optionally every tensor and the file's SHA-256.
 * GGUF files are read with nb_gguf_*; other formats (HF directory or
 * .safetensors, llama2.c .bin) through nb_source_open. Text or one JSON
 * object (--json). Exit 2 on a missing or malformed file, with the reader's
 * message (file, field, byte offset). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/sha256.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "formats/safetensors.h"
#include "formats/source.h"

#define ARR_HEAD 8        /* array elements shown before abbreviating */
#define STR_SHOW 160      /* string bytes shown in text mode */

typedef struct {
    bool json, tensors, sha;
} opts;

/* llama.cpp's llama_ftype names (general.file_type), by value. */
static const char *ftype_name(int64_t v) {
    static const char *const names[] = {
        [0] = "ALL_F32", [1] = "MOSTLY_F16", [2] = "MOSTLY_Q4_0", [3] = "MOSTLY_Q4_1",
        [4] = "MOSTLY_Q4_1_SOME_F16", [7] = "MOSTLY_Q8_0", [8] = "MOSTLY_Q5_0", [9] = "MOSTLY_Q5_1",
        [10] = "MOSTLY_Q2_K", [11] = "MOSTLY_Q3_K_S", [12] = "MOSTLY_Q3_K_M", [13] = "MOSTLY_Q3_K_L",
        [14] = "MOSTLY_Q4_K_S", [15] = "MOSTLY_Q4_K_M", [16] = "MOSTLY_Q5_K_S", [17] = "MOSTLY_Q5_K_M",
        [18] = "MOSTLY_Q6_K", [19] = "MOSTLY_IQ2_XXS", [20] = "MOSTLY_IQ2_XS", [21] = "MOSTLY_Q2_K_S",
        [22] = "MOSTLY_IQ3_XS", [23] = "MOSTLY_IQ3_XXS", [24] = "MOSTLY_IQ1_S", [25] = "MOSTLY_IQ4_NL",
        [26] = "MOSTLY_IQ3_S", [27] = "MOSTLY_IQ3_M", [28] = "MOSTLY_IQ2_S", [29] = "MOSTLY_IQ2_M",
        [30] = "MOSTLY_IQ4_XS", [31] = "MOSTLY_IQ1_M", [32] = "MOSTLY_BF16", [36] = "MOSTLY_TQ1_0",
        [37] = "MOSTLY_TQ2_0", [38] = "MOSTLY_MXFP4_MOE",
    };
    if (v >= 0 && v < (int64_t)(sizeof names / sizeof names[0]) && names[v]) return names[v];
    return "unknown";
}

/* ---- census ------------------------------------------------------------- */

typedef struct {
    int64_t tensors[NB_DTYPE_MAX];
    uint64_t params[NB_DTYPE_MAX], bytes[NB_DTYPE_MAX];
    uint64_t total_params, total_bytes;
} census;

static void census_add(census *c, const nb_tensor *t) {
    uint64_t n = (uint64_t)nb_tensor_nelem(t);
    unsigned ty = (unsigned)t->type < NB_DTYPE_MAX ? (unsigned)t->type : 0;
    c->tensors[ty]++;
    c->params[ty] += n;
    c->bytes[ty] += t->nbytes;
    c->total_params += n;
    c->total_bytes += t->nbytes;
}

static void fmt_count(uint64_t v, char *buf, size_t cap) { /* 19400960 -> 19,400,960 */
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
}

/* ---- metadata values ---------------------------------------------------- */

static size_t elem_size(nb_gguf_type t) {
    static const uint8_t sz[NB_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < NB_GGUF_TYPE_COUNT ? sz[t] : 0;
}

static json_t *num_json(nb_gguf_type t, const void *p) {
    switch (t) {
    case NB_GGUF_U8: return json_integer(*(const uint8_t *)p);
    case NB_GGUF_I8: return json_integer(*(const int8_t *)p);
    case NB_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); return json_integer(v); }
    case NB_GGUF_I16: { int16_t v; memcpy(&v, p, 2); return json_integer(v); }
    case NB_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); return json_integer(v); }
    case NB_GGUF_I32: { int32_t v; memcpy(&v, p, 4); return json_integer(v); }
    case NB_GGUF_F32: { float v; memcpy(&v, p, 4); return json_real(v); }
    case NB_GGUF_BOOL: return json_boolean(*(const uint8_t *)p);
    case NB_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); return v > INT64_MAX ? json_real((double)v) : json_integer((json_int_t)v); }
    case NB_GGUF_I64: { int64_t v; memcpy(&v, p, 8); return json_integer(v); }
    case NB_GGUF_F64: { double v; memcpy(&v, p, 8); return json_real(v); }
    default: return json_null();
    }
}

static json_t *scalar_json(const nb_gguf_value *v) {
    switch (v->type) {
    case NB_GGUF_U8: case NB_GGUF_U16: case NB_GGUF_U32: case NB_GGUF_U64:
        return v->num.u > INT64_MAX ? json_real((double)v->num.u) : json_integer((json_int_t)v->num.u);
    case NB_GGUF_I8: case NB_GGUF_I16: case NB_GGUF_I32: case NB_GGUF_I64: return json_integer(v->num.i);
    case NB_GGUF_F32: case NB_GGUF_F64: return json_real(v->num.f);
    case NB_GGUF_BOOL: return json_boolean(v->num.b);
    case NB_GGUF_STRING: return json_stringn_nocheck(v->str, (size_t)v->str_len);
    default: return json_null();
    }
}

/* Arrays: all elements when short, else {"count", "head": first ARR_HEAD}. */
static json_t *value_json(const nb_gguf_value *v) {
    if (v->type != NB_GGUF_ARRAY) return scalar_json(v);
    json_t *items = json_array();
    uint64_t show = v->n <= 2 * ARR_HEAD ? v->n : ARR_HEAD;
    for (uint64_t i = 0; i < show && v->arr_type != NB_GGUF_ARRAY; i++) {
        if (v->arr_type == NB_GGUF_STRING) json_array_append_new(items, json_stringn_nocheck(v->strs[i], (size_t)v->lens[i]));
        else json_array_append_new(items, num_json(v->arr_type, (const uint8_t *)v->arr + i * elem_size(v->arr_type)));
    }
    if (show == v->n && v->arr_type != NB_GGUF_ARRAY) return items;
    return json_pack("{s:s, s:I, s:o}", "element_type", nb_gguf_type_name(v->arr_type), "count", (json_int_t)v->n,
                     "head", items);
}

static void print_str(FILE *f, const char *s, uint64_t n, uint64_t max) {
    fputc('"', f);
    for (uint64_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
    if (n > max) fprintf(f, "... (%llu bytes)", (unsigned long long)n);
}

static void print_value(FILE *f, const nb_gguf_value *v) {
    if (v->type != NB_GGUF_ARRAY) {
        if (v->type == NB_GGUF_STRING) print_str(f, v->str, v->str_len, STR_SHOW);
        else {
            json_t *j = scalar_json(v);
            char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
            fputs(s ? s : "?", f);
            free(s);
            json_decref(j);
        }
        return;
    }
    fprintf(f, "[%s x %llu]", nb_gguf_type_name(v->arr_type), (unsigned long long)v->n);
    if (v->arr_type == NB_GGUF_ARRAY) return;
    uint64_t show = v->n <= 2 * ARR_HEAD ? v->n : ARR_HEAD;
    fputs(" [", f);
    for (uint64_t i = 0; i < show; i++) {
        if (i) fputs(", ", f);
        if (v->arr_type == NB_GGUF_STRING) print_str(f, v->strs[i], v->lens[i], 40);
        else {
            json_t *j = num_json(v->arr_type, (const uint8_t *)v->arr + i * elem_size(v->arr_type));
            char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
            fputs(s ? s : "?", f);
            free(s);
            json_decref(j);
        }
    }
    if (show < v->n) fputs(", ...", f);
    fputc(']', f);
}

/* ---- output shared by both paths ----------------------------------------- */

static json_t *census_json(const census *c) {
    json_t *o = json_object();
    nb_dtype t = NB_F32;
    do
        if (c->tensors[t])
            json_object_set_new(o, nb_dtype_name(t),
                                json_pack("{s:I, s:I, s:I}", "tensors", (json_int_t)c->tensors[t], "params",
                                          (json_int_t)c->params[t], "bytes", (json_int_t)c->bytes[t]));
    while (nb_dtype_next(&t));
    return o;
}

static void print_census(const census *c) {
    char p[32];
    fmt_count(c->total_params, p, sizeof p);
    printf("parameters:   %s (%.2f M)\n", p, (double)c->total_params / 1e6);
    fmt_count(c->total_bytes, p, sizeof p);
    printf("tensor bytes: %s (%.2f MiB)\n", p, (double)c->total_bytes / 1048576.0);
    if (c->total_params)
        printf("bits/weight:  %.4f\n", 8.0 * (double)c->total_bytes / (double)c->total_params);
    printf("dtypes:\n");
    nb_dtype t = NB_F32;
    do {
        if (!c->tensors[t]) continue;
        char pp[32], bb[32];
        fmt_count(c->params[t], pp, sizeof pp);
        fmt_count(c->bytes[t], bb, sizeof bb);
        printf("  %-8s %5lld tensors  %14s params  %14s bytes\n", nb_dtype_name(t), (long long)c->tensors[t],
               pp, bb);
    } while (nb_dtype_next(&t));
}

static json_t *tensor_json(const nb_tensor *t, int64_t offset) {
    json_t *shape = json_array();
    for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->ne[d]));
    json_t *o = json_pack("{s:s, s:s, s:o, s:I}", "name", t->name, "dtype", nb_dtype_name(t->type), "shape", shape,
                          "bytes", (json_int_t)t->nbytes);
    if (offset >= 0) json_object_set_new(o, "offset", json_integer(offset));
    return o;
}

static void print_tensor(const nb_tensor *t, int64_t offset) {
    char shape[96];
    int o = 0;
    for (int d = 0; d < t->n_dims; d++)
        o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    printf("  %-40s %-6s [%s] %llu bytes", t->name, nb_dtype_name(t->type), shape, (unsigned long long)t->nbytes);
    if (offset >= 0) printf(" @ %lld", (long long)offset);
    printf("\n");
}

static int finish_sha(const char *path, const opts *o, json_t *root) {
    if (!o->sha) return NB_EXIT_OK;
    char hex[65];
    nb_status st = nb_sha256_file(path, hex);
    if (st != NB_OK) {
        nb_cli_error("inspect");
        return nb_cli_exit_code(st);
    }
    if (root) json_object_set_new(root, "sha256", json_string(hex));
    else printf("sha256: %s\n", hex);
    return NB_EXIT_OK;
}

static int emit_json(json_t *root) {
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!s) {
        fprintf(stderr, "nibble inspect: cannot encode the JSON output\n");
        return NB_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return NB_EXIT_OK;
}

/* ---- GGUF --------------------------------------------------------------- */

static int inspect_gguf(const char *path, const opts *o) {
    nb_gguf *g;
    nb_status st = nb_gguf_open(path, &g);
    if (st != NB_OK) {
        nb_cli_error("inspect");
        return NB_EXIT_USAGE;
    }
    census c;
    memset(&c, 0, sizeof c);
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) census_add(&c, nb_gguf_tensor(g, i));
    const char *arch = "", *name = NULL;
    (void)nb_gguf_get_str(g, "general.architecture", &arch);
    if (nb_gguf_get_str(g, "general.name", &name) != NB_OK) name = NULL;
    size_t al = strlen(arch);
    const nb_gguf_value *tok = nb_gguf_find(g, "tokenizer.ggml.tokens");
    int64_t vocab = tok && tok->type == NB_GGUF_ARRAY ? (int64_t)tok->n : -1;
    int64_t ftype = -1, qver = -1;
    if (nb_gguf_find(g, "general.file_type") && nb_gguf_get_int(g, "general.file_type", &ftype) != NB_OK) ftype = -1;
    if (nb_gguf_find(g, "general.quantization_version") &&
        nb_gguf_get_int(g, "general.quantization_version", &qver) != NB_OK)
        qver = -1;
    const uint8_t *base = nb_gguf_file_data(g);
    uint64_t doff = nb_gguf_data_offset(g);

    int rc = NB_EXIT_OK;
    if (o->json) {
        json_t *root = json_object();
        json_object_set_new(root, "path", json_string(path));
        json_object_set_new(root, "format", json_string("gguf"));
        json_object_set_new(root, "gguf_version", json_integer(nb_gguf_version(g)));
        json_object_set_new(root, "file_size", json_integer((json_int_t)nb_gguf_file_size(g)));
        json_object_set_new(root, "alignment", json_integer(nb_gguf_alignment(g)));
        json_object_set_new(root, "architecture", json_string(arch));
        json_object_set_new(root, "name", name ? json_string(name) : json_null());
        json_t *hp = json_object();
        for (int64_t i = 0; al && i < nb_gguf_n_kv(g); i++) {
            const char *k = nb_gguf_key(g, i);
            if (!strncmp(k, arch, al) && k[al] == '.') json_object_set_new(hp, k + al + 1, value_json(nb_gguf_kv(g, i)));
        }
        if (vocab >= 0 && !json_object_get(hp, "vocab_size")) json_object_set_new(hp, "vocab_size", json_integer(vocab));
        json_object_set_new(root, "hparams", hp);
        json_object_set_new(root, "n_params", json_integer((json_int_t)c.total_params));
        json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)c.total_bytes));
        json_object_set_new(root, "bits_per_weight",
                            json_real(c.total_params ? 8.0 * (double)c.total_bytes / (double)c.total_params : 0));
        json_t *q = json_null();
        if (ftype >= 0 || qver >= 0) {
            q = json_object();
            if (ftype >= 0) {
                json_object_set_new(q, "file_type", json_integer(ftype));
                json_object_set_new(q, "file_type_name", json_string(ftype_name(ftype)));
            }
            if (qver >= 0) json_object_set_new(q, "quantization_version", json_integer(qver));
        }
        json_object_set_new(root, "quantization", q);
        json_object_set_new(root, "n_tensors", json_integer(nb_gguf_n_tensors(g)));
        json_object_set_new(root, "dtypes", census_json(&c));
        json_t *md = json_object();
        for (int64_t i = 0; i < nb_gguf_n_kv(g); i++)
            json_object_set_new(md, nb_gguf_key(g, i), value_json(nb_gguf_kv(g, i)));
        json_object_set_new(root, "metadata", md);
        if (o->tensors) {
            json_t *ts = json_array();
            for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
                const nb_tensor *t = nb_gguf_tensor(g, i);
                json_array_append_new(ts, tensor_json(t, (int64_t)((const uint8_t *)t->data - base - doff)));
            }
            json_object_set_new(root, "tensors", ts);
        }
        rc = finish_sha(path, o, root);
        if (rc == NB_EXIT_OK) rc = emit_json(root);
        else json_decref(root);
    } else {
        printf("file:         %s\n", path);
        printf("format:       GGUF v%u, %lld tensors, %lld metadata keys, alignment %u, %llu bytes\n",
               nb_gguf_version(g), (long long)nb_gguf_n_tensors(g), (long long)nb_gguf_n_kv(g), nb_gguf_alignment(g),
               (unsigned long long)nb_gguf_file_size(g));
        printf("architecture: %s%s%s%s\n", arch[0] ? arch : "(none)", name ? " (" : "", name ? name : "", name ? ")" : "");
        printf("hyper-parameters:\n");
        for (int64_t i = 0; al && i < nb_gguf_n_kv(g); i++) {
            const char *k = nb_gguf_key(g, i);
            if (strncmp(k, arch, al) || k[al] != '.') continue;
            printf("  %-40s ", k + al + 1);
            print_value(stdout, nb_gguf_kv(g, i));
            printf("\n");
        }
        char vk[160];
        snprintf(vk, sizeof vk, "%s.vocab_size", arch);
        if (vocab >= 0 && !nb_gguf_find(g, vk))
            printf("  %-40s %lld (tokenizer.ggml.tokens)\n", "vocab_size", (long long)vocab);
        print_census(&c);
        if (ftype >= 0 || qver >= 0) {
            printf("quantization: ");
            if (ftype >= 0) printf("general.file_type %lld = %s", (long long)ftype, ftype_name(ftype));
            if (qver >= 0) printf("%squantization_version %lld", ftype >= 0 ? ", " : "", (long long)qver);
            printf("\n");
        } else {
            printf("quantization: none recorded\n");
        }
        printf("metadata:\n");
        for (int64_t i = 0; i < nb_gguf_n_kv(g); i++) {
            const nb_gguf_value *v = nb_gguf_kv(g, i);
            printf("  %-40s %-7s ", nb_gguf_key(g, i), nb_gguf_type_name(v->type));
            print_value(stdout, v);
            printf("\n");
        }
        if (o->tensors) {
            printf("tensors (offset relative to the data section at byte %llu):\n", (unsigned long long)doff);
            for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
                const nb_tensor *t = nb_gguf_tensor(g, i);
                print_tensor(t, (int64_t)((const uint8_t *)t->data - base - doff));
            }
        }
        rc = finish_sha(path, o, NULL);
    }
    nb_gguf_close(g);
    return rc;
}

/* ---- other formats (nb_source) -------------------------------------------- */

/* HF: the quantization_config object of <dir>/config.json, if any. */
static json_t *hf_quant_config(const char *path) {
    char cfg[4096];
    if (nb_is_dir(path)) snprintf(cfg, sizeof cfg, "%s/config.json", path);
    else {
        const char *slash = strrchr(path, '/');
        int dl = slash ? (int)(slash - path) : 1;
        snprintf(cfg, sizeof cfg, "%.*s/config.json", dl, slash ? path : ".");
    }
    char *text;
    size_t len;
    if (nb_read_file(cfg, 16 << 20, &text, &len) != NB_OK) return NULL;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    if (!root) return NULL;
    json_t *q = json_object_get(root, "quantization_config");
    if (q) json_incref(q);
    json_decref(root);
    return q;
}


/* HF: the storage census of the safetensors files themselves (what is on
 * disk, before nibble converts quantized layouts to its blocks), grouped by
 * the role of each tensor in the quantized layouts (docs/formats.md). */
enum { ST_FLOAT, ST_PACKED, ST_SCALES, ST_ZEROS, ST_GIDX, ST_STATE, ST_N };
static const char *const st_role_name[ST_N] = {"float", "packed", "scales", "zeros", "g_idx", "quant_state"};

static bool sfx(const char *s, const char *x) {
    size_t n = strlen(s), m = strlen(x);
    return n >= m && !strcmp(s + n - m, x);
}

static int st_role(const nb_st_tensor *t) {
    const char *n = t->name;
    if (sfx(n, ".g_idx")) return ST_GIDX;
    if (sfx(n, ".qzeros") || sfx(n, ".weight_zero_point") || sfx(n, ".input_zero_point")) return ST_ZEROS;
    if (sfx(n, ".scales") || sfx(n, ".weight_scale") || sfx(n, ".weight_scale_inv") || sfx(n, ".input_scale") ||
        sfx(n, ".weight.absmax") || sfx(n, ".weight.nested_absmax"))
        return ST_SCALES;
    if (strstr(n, ".quant_state.") || sfx(n, ".quant_map") || sfx(n, ".weight_shape")) return ST_STATE;
    if (sfx(n, ".qweight") || sfx(n, ".weight_packed") ||
        (sfx(n, ".weight") && (!t->has_type || t->type == NB_I8)))
        return ST_PACKED;
    return ST_FLOAT;
}

static nb_safetensors *hf_open_st(const char *path) {
    char p[4096];
    nb_safetensors *st = NULL;
    if (!nb_is_dir(path)) {
        if (sfx(path, ".safetensors") && nb_safetensors_open(path, &st) == NB_OK) return st;
        if (sfx(path, ".index.json") && nb_safetensors_open_index(path, &st) == NB_OK) return st;
        return NULL;
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
    if (nb_file_exists(p)) return nb_safetensors_open_index(p, &st) == NB_OK ? st : NULL;
    snprintf(p, sizeof p, "%s/model.safetensors", path);
    return nb_safetensors_open(p, &st) == NB_OK ? st : NULL;
}

/* Census + consistency notes; params = the model's weight count (0 unknown). */
static json_t *hf_storage(const char *path, uint64_t params, bool print) {
    nb_safetensors *st = hf_open_st(path);
    if (!st) return NULL;
    uint64_t bytes[ST_N] = {0}, total = 0;
    int64_t count[ST_N] = {0};
    json_t *notes = json_array();
    for (int64_t i = 0; i < nb_safetensors_n_tensors(st); i++) {
        const nb_st_tensor *t = nb_safetensors_tensor(st, i);
        int r = st_role(t);
        bytes[r] += t->nbytes;
        count[r]++;
        total += t->nbytes;
        char mod[512];
        size_t nl = strlen(t->name);
        if (r == ST_PACKED && (sfx(t->name, ".qweight") || sfx(t->name, ".weight_packed") || sfx(t->name, ".weight"))) {
            size_t cut = sfx(t->name, ".qweight") ? 8 : sfx(t->name, ".weight_packed") ? 14 : 7;
            snprintf(mod, sizeof mod, "%.*s", (int)(nl - cut), t->name);
            char sc[600];
            bool has = false;
            static const char *const ss[] = {"scales", "weight_scale", "weight_scale_inv", "weight.absmax"};
            for (size_t k = 0; k < 4 && !has; k++) {
                snprintf(sc, sizeof sc, "%s.%s", mod, ss[k]);
                has = nb_safetensors_find(st, sc) != NULL;
            }
            if (!has) {
                char m[700];
                snprintf(m, sizeof m, "%s: quantized weight without scales", t->name);
                json_array_append_new(notes, json_string(m));
            }
        }
        if (r == ST_GIDX && t->n_dims == 1 && t->has_type && t->type == NB_I32) {
            /* g_idx: every group must have the same number of members */
            int64_t K = t->shape[0], maxg = -1;
            const int32_t *g = t->data;
            for (int64_t k = 0; k < K; k++) {
                int32_t v;
                memcpy(&v, g + k, 4);
                if (v > maxg) maxg = v;
                if (v < 0) maxg = INT32_MAX;
            }
            if (maxg >= 0 && maxg < K) {
                int64_t *cnt = calloc((size_t)maxg + 1, sizeof *cnt);
                bool contiguous = true;
                for (int64_t k = 0; cnt && k < K; k++) {
                    int32_t v;
                    memcpy(&v, g + k, 4);
                    cnt[v]++;
                    contiguous &= v == k / (K / (maxg + 1));
                }
                bool even = cnt != NULL;
                for (int64_t x = 0; cnt && x <= maxg; x++) even &= cnt[x] == cnt[0];
                free(cnt);
                if (!even) {
                    char m[700];
                    snprintf(m, sizeof m, "%s: not a permutation of equal groups (group sizes differ)", t->name);
                    json_array_append_new(notes, json_string(m));
                }
                (void)contiguous;
            } else {
                char m[700];
                snprintf(m, sizeof m, "%s: values outside 0..%lld", t->name, (long long)K - 1);
                json_array_append_new(notes, json_string(m));
            }
        }
    }
    json_t *o = json_object();
    for (int r = 0; r < ST_N; r++)
        if (count[r])
            json_object_set_new(o, st_role_name[r], json_pack("{s:I, s:I}", "tensors", (json_int_t)count[r], "bytes",
                                                              (json_int_t)bytes[r]));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)total));
    if (params) json_object_set_new(o, "file_bits_per_weight", json_real(8.0 * (double)total / (double)params));
    json_object_set_new(o, "inconsistencies", notes);
    if (print) {
        printf("storage (safetensors, as on disk):\n");
        for (int r = 0; r < ST_N; r++)
            if (count[r])
                printf("  %-12s %5lld tensors %14llu bytes\n", st_role_name[r], (long long)count[r],
                       (unsigned long long)bytes[r]);
        printf("  file bytes   %llu", (unsigned long long)total);
        if (params) printf(", %.4f bits/weight incl. scales, zeros and g_idx", 8.0 * (double)total / (double)params);
        printf("\n");
        for (size_t i = 0; i < json_array_size(notes); i++)
            printf("inconsistency: %s\n", json_string_value(json_array_get(notes, i)));
    }
    nb_safetensors_close(st);
    return o;
}

static int inspect_source(const char *path, const opts *o) {
    nb_source s;
    nb_status st = nb_source_open(path, &s);
    if (st != NB_OK && (nb_is_dir(path) || sfx(path, ".safetensors") || sfx(path, "config.json"))) {
        /* a quantized HF checkpoint nibble refuses: show what is on disk and why */
        char *why = strdup(nb_errmsg());
        json_t *qc = hf_quant_config(path);
        if (!o->json) {
            if (qc) {
                char *txt = json_dumps(qc, JSON_COMPACT | JSON_SORT_KEYS);
                printf("quantization: quantization_config %s\n", txt ? txt : "?");
                free(txt);
            }
            json_decref(hf_storage(path, 0, true));
            printf("inconsistency: %s\n", why ? why : "?");
        } else {
            json_t *root = json_object();
            json_object_set_new(root, "path", json_string(path));
            json_object_set_new(root, "quantization", qc ? json_incref(qc) : json_null());
            json_t *sto = hf_storage(path, 0, false);
            json_object_set_new(root, "storage", sto ? sto : json_null());
            json_object_set_new(root, "error", json_string(why ? why : "?"));
            emit_json(root);
        }
        if (qc) json_decref(qc);
        if (why) (void)nb_fail(st, "%s", why);
        free(why);
    }
    if (st != NB_OK) {
        nb_cli_error("inspect");
        return nb_cli_exit_code(st) == NB_EXIT_FAIL ? NB_EXIT_FAIL : NB_EXIT_USAGE;
    }
    census c;
    memset(&c, 0, sizeof c);
    for (int64_t i = 0; i < s.n_tensors; i++) census_add(&c, &s.tensors[i]);
    const nb_arch_desc *hp = &s.hp;
    json_t *qc = !strcmp(s.format ? s.format : "", "safetensors") ? hf_quant_config(path) : NULL;
    int rc = NB_EXIT_OK;
    json_t *h = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:s, s:b, s:b}", "n_vocab",
                          hp->n_vocab, "n_embd", hp->n_embd, "n_layer", hp->n_layer, "n_head", hp->n_head, "n_head_kv",
                          hp->n_head_kv, "head_dim", hp->head_dim, "n_ff", hp->n_ff, "n_ctx_train", hp->n_ctx_train,
                          "norm_eps", (double)hp->norm_eps, "rope_theta", (double)hp->rope_theta, "rope_dim",
                          hp->rope_dim, "rope_style", hp->rope_style == NB_ROPE_NEOX ? "neox" : "norm",
                          "tied_embeddings", hp->tied_embeddings, "qkv_bias", hp->qkv_bias);
    if (o->json) {
        json_t *root = json_object();
        json_object_set_new(root, "path", json_string(path));
        json_object_set_new(root, "format", json_string(s.format ? s.format : "?"));
        json_object_set_new(root, "architecture", json_string(hp->arch_name));
        json_object_set_new(root, "hparams", h);
        json_object_set_new(root, "n_params", json_integer((json_int_t)c.total_params));
        json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)c.total_bytes));
        json_object_set_new(root, "bits_per_weight",
                            json_real(c.total_params ? 8.0 * (double)c.total_bytes / (double)c.total_params : 0));
        json_object_set_new(root, "quantization", qc ? qc : json_null());
        if (qc) {
            json_t *sto = hf_storage(path, c.total_params, false);
            json_object_set_new(root, "storage", sto ? sto : json_null());
        }
        json_object_set_new(root, "n_tensors", json_integer(s.n_tensors));
        json_object_set_new(root, "dtypes", census_json(&c));
        if (o->tensors) {
            json_t *ts = json_array();
            for (int64_t i = 0; i < s.n_tensors; i++) json_array_append_new(ts, tensor_json(&s.tensors[i], -1));
            json_object_set_new(root, "tensors", ts);
        }
        rc = nb_is_dir(path) ? NB_EXIT_OK : finish_sha(path, o, root);
        if (rc == NB_EXIT_OK) rc = emit_json(root);
        else json_decref(root);
    } else {
        printf("file:         %s\n", path);
        printf("format:       %s, %lld tensors\n", s.format ? s.format : "?", (long long)s.n_tensors);
        printf("architecture: %s\n", hp->arch_name);
        printf("hyper-parameters:\n");
        const char *k;
        json_t *v;
        json_object_foreach(h, k, v) {
            char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
            printf("  %-40s %s\n", k, txt ? txt : "?");
            free(txt);
        }
        json_decref(h);
        print_census(&c);
        if (qc) {
            char *txt = json_dumps(qc, JSON_COMPACT | JSON_SORT_KEYS);
            printf("quantization: quantization_config %s\n", txt ? txt : "?");
            free(txt);
            json_decref(qc);
            printf("(dtypes above: nibble's blocks after loading)\n");
            json_decref(hf_storage(path, c.total_params, true));
        } else {
            printf("quantization: none recorded\n");
        }
        if (o->tensors) {
            printf("tensors:\n");
            for (int64_t i = 0; i < s.n_tensors; i++) print_tensor(&s.tensors[i], -1);
        }
        if (o->sha && nb_is_dir(path)) printf("sha256: (a directory; run on each file)\n");
        else rc = finish_sha(path, o, NULL);
    }
    nb_source_close(&s);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: nibble inspect MODEL [--json] [--tensors] [--sha256]\n"
               "\n"
               "MODEL: a GGUF file, an HF directory / .safetensors file, or a llama2.c .bin.\n"
               "  --json      one JSON object instead of text\n"
               "  --tensors   list every tensor (name, dtype, shape, bytes, offset)\n"
               "  --sha256    the file's SHA-256\n");
}

int nb_cmd_inspect(int argc, char **argv) {
    opts o = {false, false, false};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(argv[i], "--json")) o.json = true;
        else if (!strcmp(argv[i], "--tensors")) o.tensors = true;
        else if (!strcmp(argv[i], "--sha256")) o.sha = true;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "nibble inspect: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return NB_EXIT_USAGE;
        } else if (path) {
            fprintf(stderr, "nibble inspect: one model at a time ('%s' and '%s')\n", path, argv[i]);
            return NB_EXIT_USAGE;
        } else path = argv[i];
    }
    if (!path) {
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    if (!nb_file_exists(path) && !nb_is_dir(path)) {
        fprintf(stderr, "nibble inspect: %s: no such file or directory\n", path);
        return NB_EXIT_USAGE;
    }
    bool gguf = false;
    if (nb_file_exists(path)) {
        FILE *f = fopen(path, "rb");
        char magic[4] = {0};
        if (f) {
            gguf = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
            fclose(f);
        }
        size_t n = strlen(path);
        if (n >= 5 && !strcmp(path + n - 5, ".gguf")) gguf = true; /* a damaged .gguf: report the reader's error */
    }
    return gguf ? inspect_gguf(path, &o) : inspect_source(path, &o);
}
