/* GGUF v3 writer: the layout in gguf.h, written the way llama.cpp's gguf
 * writer (and the Python gguf package) lay a file out, so a file copied key
 * by key and tensor by tensor comes out byte-identical:
 *   "GGUF" | u32 3 | u64 n_tensors | u64 n_kv
 *   n_kv x { u64 len, key bytes | u32 type | value }      (insertion order)
 *   n_tensors x { u64 len, name | u32 n_dims | u64 ne[n_dims] | u32 type
 *                 | u64 offset }                            (insertion order)
 *   zeros up to a multiple of ALIGNMENT (from the start of the file); a
 *   file with no tensors ends after the metadata, unpadded, like llama.cpp's
 *   vocab-only files
 *   data section: each tensor's bytes followed by zeros up to a multiple of
 *   ALIGNMENT (the last one too), offsets relative to the section start.
 * ALIGNMENT is the u32 value of `general.alignment` when set (a power of two),
 * else 32. Everything is written little-endian; this writer assumes a
 * little-endian host (checked at compile time).
 *
 * The file is written to "<path>.tmp.XXXXXX" and renamed over `path` only
 * after every byte went out, so readers never see a half-written file. */
#include "formats/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c writes the host's byte order; GGUF is little-endian"
#endif

#define GW_MAX_NAME 63u     /* tensor name bytes (ggml's GGML_MAX_NAME 64 incl. NUL) */
#define GW_MAX_KEY 65535u   /* key bytes */

static const uint8_t gw_type_size[NB_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct gw_kv {
    char *key;
    nb_gguf_type type;
    uint8_t scalar[8];   /* little-endian bytes of a scalar, type_size of them */
    char *str;           /* NB_GGUF_STRING */
    uint64_t str_len;
    nb_gguf_type arr_type;
    uint64_t n;
    void *arr;           /* numeric array: n * size bytes */
    char **strs;         /* string array */
    uint64_t *lens;
} gw_kv;

typedef struct gw_tensor {
    char *name;
    nb_dtype type;
    int n_dims;
    int64_t ne[NB_MAX_DIMS];
    uint64_t nbytes;
    void *owned;         /* copy made by add_tensor */
    const void *data;    /* owned or borrowed bytes; NULL when fill is used */
    nb_gguf_fill_fn fill;
    void *fill_ctx;
} gw_tensor;

struct nb_gguf_writer {
    gw_kv *kv;
    int64_t n_kv, cap_kv;
    gw_tensor *t;
    int64_t n_t, cap_t;
};

nb_status nb_gguf_writer_create(nb_gguf_writer **out) {
    *out = nb_calloc(1, sizeof **out);
    return *out ? NB_OK : NB_ERR_NOMEM;
}

static void kv_clear(gw_kv *k) {
    free(k->str);
    free(k->arr);
    if (k->strs)
        for (uint64_t i = 0; i < k->n; i++) free(k->strs[i]);
    free(k->strs);
    free(k->lens);
    k->str = NULL;
    k->arr = NULL;
    k->strs = NULL;
    k->lens = NULL;
    k->n = 0;
    k->str_len = 0;
}

void nb_gguf_writer_free(nb_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        kv_clear(&w->kv[i]);
        free(w->kv[i].key);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

/* The entry for `key`: the existing one (cleared, keeps its position) or a new
 * one appended at the end. */
static nb_status kv_slot(nb_gguf_writer *w, const char *key, gw_kv **out) {
    if (!key || !key[0]) return nb_fail(NB_ERR_INVALID, "gguf writer: empty metadata key");
    size_t kl = strlen(key);
    if (kl > GW_MAX_KEY)
        return nb_fail(NB_ERR_INVALID, "gguf writer: key '%.40s...' is %zu bytes (allowed 1..%u)", key, kl, GW_MAX_KEY);
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kv[i].key, key)) {
            kv_clear(&w->kv[i]);
            *out = &w->kv[i];
            return NB_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        gw_kv *nk = nb_realloc(w->kv, (size_t)cap * sizeof *nk);
        if (!nk) return NB_ERR_NOMEM;
        w->kv = nk;
        w->cap_kv = cap;
    }
    gw_kv *k = &w->kv[w->n_kv];
    memset(k, 0, sizeof *k);
    k->key = nb_strdup(key);
    if (!k->key) return NB_ERR_NOMEM;
    w->n_kv++;
    *out = k;
    return NB_OK;
}

static nb_status set_scalar(nb_gguf_writer *w, const char *key, nb_gguf_type t, const void *bytes) {
    gw_kv *k;
    NB_TRY(kv_slot(w, key, &k));
    k->type = t;
    memcpy(k->scalar, bytes, gw_type_size[t]);
    return NB_OK;
}

nb_status nb_gguf_set_u32(nb_gguf_writer *w, const char *key, uint32_t v) { return set_scalar(w, key, NB_GGUF_U32, &v); }
nb_status nb_gguf_set_i32(nb_gguf_writer *w, const char *key, int32_t v) { return set_scalar(w, key, NB_GGUF_I32, &v); }
nb_status nb_gguf_set_u64(nb_gguf_writer *w, const char *key, uint64_t v) { return set_scalar(w, key, NB_GGUF_U64, &v); }
nb_status nb_gguf_set_f32(nb_gguf_writer *w, const char *key, float v) { return set_scalar(w, key, NB_GGUF_F32, &v); }
nb_status nb_gguf_set_bool(nb_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, NB_GGUF_BOOL, &b);
}

static nb_status set_str_n(nb_gguf_writer *w, const char *key, const char *v, uint64_t len) {
    if (!v && len) return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': NULL string", key);
    gw_kv *k;
    NB_TRY(kv_slot(w, key, &k));
    k->type = NB_GGUF_STRING;
    k->str = nb_malloc((size_t)len + 1);
    if (!k->str) return NB_ERR_NOMEM;
    if (len) memcpy(k->str, v, (size_t)len);
    k->str[len] = '\0';
    k->str_len = len;
    return NB_OK;
}

nb_status nb_gguf_set_str(nb_gguf_writer *w, const char *key, const char *v) {
    if (!v) return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': NULL string", key ? key : "?");
    return set_str_n(w, key, v, strlen(v));
}

nb_status nb_gguf_set_arr(nb_gguf_writer *w, const char *key, nb_gguf_type elem, const void *data, uint64_t n) {
    if ((unsigned)elem >= NB_GGUF_TYPE_COUNT || elem == NB_GGUF_STRING || elem == NB_GGUF_ARRAY)
        return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': numeric array element type %d (allowed u8..f64 except string/array)",
                       key ? key : "?", (int)elem);
    uint64_t bytes;
    if (!nb_mul_ok(n, gw_type_size[elem], &bytes) || bytes > SIZE_MAX - 1)
        return nb_fail(NB_ERR_RANGE, "gguf writer: key '%s': array of %llu elements is too large", key ? key : "?",
                       (unsigned long long)n);
    if (n && !data) return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': NULL array data", key ? key : "?");
    if (elem == NB_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return nb_fail(NB_ERR_RANGE, "gguf writer: key '%s': bool element %llu is %u (allowed 0 or 1)", key,
                               (unsigned long long)i, ((const uint8_t *)data)[i]);
    void *copy = nb_malloc((size_t)bytes);
    if (!copy) return NB_ERR_NOMEM;
    if (bytes) memcpy(copy, data, (size_t)bytes);
    gw_kv *k;
    nb_status st = kv_slot(w, key, &k);
    if (st != NB_OK) { free(copy); return st; }
    k->type = NB_GGUF_ARRAY;
    k->arr_type = elem;
    k->arr = copy;
    k->n = n;
    return NB_OK;
}

nb_status nb_gguf_set_arr_str(nb_gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens, uint64_t n) {
    if (n > SIZE_MAX / sizeof(char *)) return nb_fail(NB_ERR_RANGE, "gguf writer: key '%s': too many strings", key ? key : "?");
    if (n && !strs) return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': NULL string array", key ? key : "?");
    char **cs = nb_calloc(n ? (size_t)n : 1, sizeof *cs);
    uint64_t *cl = nb_malloc((n ? (size_t)n : 1) * sizeof *cl);
    if (!cs || !cl) { free(cs); free(cl); return NB_ERR_NOMEM; }
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i]) {
            for (uint64_t j = 0; j < i; j++) free(cs[j]);
            free(cs);
            free(cl);
            return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': string %llu is NULL", key, (unsigned long long)i);
        }
        cl[i] = lens ? lens[i] : strlen(strs[i]);
        cs[i] = nb_malloc((size_t)cl[i] + 1);
        if (!cs[i]) {
            for (uint64_t j = 0; j < i; j++) free(cs[j]);
            free(cs);
            free(cl);
            return NB_ERR_NOMEM;
        }
        memcpy(cs[i], strs[i], (size_t)cl[i]);
        cs[i][cl[i]] = '\0';
    }
    gw_kv *k;
    nb_status st = kv_slot(w, key, &k);
    if (st != NB_OK) {
        for (uint64_t j = 0; j < n; j++) free(cs[j]);
        free(cs);
        free(cl);
        return st;
    }
    k->type = NB_GGUF_ARRAY;
    k->arr_type = NB_GGUF_STRING;
    k->strs = cs;
    k->lens = cl;
    k->n = n;
    return NB_OK;
}

nb_status nb_gguf_set_value(nb_gguf_writer *w, const char *key, const nb_gguf_value *v) {
    uint8_t b[8];
    switch (v->type) {
    case NB_GGUF_U8: b[0] = (uint8_t)v->num.u; return set_scalar(w, key, v->type, b);
    case NB_GGUF_I8: { int8_t x = (int8_t)v->num.i; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_U16: { uint16_t x = (uint16_t)v->num.u; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_I16: { int16_t x = (int16_t)v->num.i; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_U32: { uint32_t x = (uint32_t)v->num.u; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_I32: { int32_t x = (int32_t)v->num.i; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_U64: return set_scalar(w, key, v->type, &v->num.u);
    case NB_GGUF_I64: return set_scalar(w, key, v->type, &v->num.i);
    case NB_GGUF_F32: { float x = (float)v->num.f; return set_scalar(w, key, v->type, &x); }
    case NB_GGUF_F64: return set_scalar(w, key, v->type, &v->num.f);
    case NB_GGUF_BOOL: return nb_gguf_set_bool(w, key, v->num.b);
    case NB_GGUF_STRING: return set_str_n(w, key, v->str, v->str_len);
    case NB_GGUF_ARRAY:
        if (v->arr_type == NB_GGUF_STRING) return nb_gguf_set_arr_str(w, key, v->strs, v->lens, v->n);
        if (v->arr_type == NB_GGUF_ARRAY)
            return nb_fail(NB_ERR_UNSUPPORTED, "gguf writer: key '%s': nested arrays cannot be written", key);
        return nb_gguf_set_arr(w, key, v->arr_type, v->arr, v->n);
    default: break;
    }
    return nb_fail(NB_ERR_INVALID, "gguf writer: key '%s': value type %d (allowed 0..%d)", key, (int)v->type,
                   NB_GGUF_TYPE_COUNT - 1);
}

nb_status nb_gguf_copy_kv(nb_gguf_writer *w, const nb_gguf *src, const char *skip_prefix) {
    size_t pl = skip_prefix ? strlen(skip_prefix) : 0;
    for (int64_t i = 0; i < nb_gguf_n_kv(src); i++) {
        const char *key = nb_gguf_key(src, i);
        if (pl && !strncmp(key, skip_prefix, pl)) continue;
        NB_TRY(nb_gguf_set_value(w, key, nb_gguf_kv(src, i)));
    }
    return NB_OK;
}

/* Validates name/type/shape and appends an entry (data filled by the caller). */
static nb_status add_entry(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims, const int64_t *ne,
                           gw_tensor **out) {
    if (!name || !name[0]) return nb_fail(NB_ERR_INVALID, "gguf writer: empty tensor name");
    size_t nl = strlen(name);
    if (nl > GW_MAX_NAME)
        return nb_fail(NB_ERR_INVALID, "gguf writer: tensor name '%s' is %zu bytes (allowed 1..%u)", name, nl, GW_MAX_NAME);
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return nb_fail(NB_ERR_INVALID, "gguf writer: duplicate tensor '%s'", name);
    const nb_dtype_info *info = nb_dtype_get(type);
    if (!info || info->in_memory_only)
        return nb_fail(NB_ERR_INVALID, "gguf writer: tensor '%s': type id %d is not a type a file may hold", name,
                       (int)type);
    if (n_dims < 1 || n_dims > NB_MAX_DIMS)
        return nb_fail(NB_ERR_INVALID, "gguf writer: tensor '%s': n_dims %d (allowed 1..%d)", name, n_dims, NB_MAX_DIMS);
    uint64_t rows = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1)
            return nb_fail(NB_ERR_INVALID, "gguf writer: tensor '%s': ne[%d] = %lld (allowed >= 1)", name, d, (long long)ne[d]);
        if (d > 0 && !nb_mul_ok(rows, (uint64_t)ne[d], &rows))
            return nb_fail(NB_ERR_RANGE, "gguf writer: tensor '%s': element count overflows", name);
    }
    uint64_t row_bytes, nbytes;
    if (!nb_dtype_row_bytes(type, (uint64_t)ne[0], &row_bytes))
        return nb_fail(NB_ERR_INVALID, "gguf writer: tensor '%s': ne[0] = %lld is not a multiple of %s's block of %u",
                       name, (long long)ne[0], info->name, info->block);
    if (!nb_mul_ok(row_bytes, rows, &nbytes) || nbytes > (uint64_t)INT64_MAX)
        return nb_fail(NB_ERR_RANGE, "gguf writer: tensor '%s': byte size overflows", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        gw_tensor *nt = nb_realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return NB_ERR_NOMEM;
        w->t = nt;
        w->cap_t = cap;
    }
    gw_tensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = nb_strdup(name);
    if (!t->name) return NB_ERR_NOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < NB_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    w->n_t++;
    *out = t;
    return NB_OK;
}

nb_status nb_gguf_writer_add_tensor(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                    const int64_t *ne, const void *data) {
    gw_tensor *t;
    NB_TRY(add_entry(w, name, type, n_dims, ne, &t));
    if (t->nbytes > SIZE_MAX) return nb_fail(NB_ERR_RANGE, "gguf writer: tensor '%s' too large", name);
    t->owned = nb_malloc((size_t)t->nbytes);
    if (!t->owned) {
        free(t->name);
        w->n_t--;
        return NB_ERR_NOMEM;
    }
    memcpy(t->owned, data, (size_t)t->nbytes);
    t->data = t->owned;
    return NB_OK;
}

nb_status nb_gguf_writer_add_tensor_ref(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                        const int64_t *ne, const void *data) {
    gw_tensor *t;
    NB_TRY(add_entry(w, name, type, n_dims, ne, &t));
    t->data = data;
    return NB_OK;
}

nb_status nb_gguf_writer_add_tensor_fn(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                       const int64_t *ne, nb_gguf_fill_fn fill, void *ctx) {
    if (!fill) return nb_fail(NB_ERR_INVALID, "gguf writer: tensor '%s': NULL fill function", name ? name : "?");
    gw_tensor *t;
    NB_TRY(add_entry(w, name, type, n_dims, ne, &t));
    t->fill = fill;
    t->fill_ctx = ctx;
    return NB_OK;
}

/* ---- output ---------------------------------------------------------------- */

typedef struct {
    FILE *f;
    uint64_t off;
    bool bad;
} gw_out;

static void out_bytes(gw_out *o, const void *p, uint64_t n) {
    if (o->bad || !n) return;
    if (fwrite(p, 1, (size_t)n, o->f) != (size_t)n) o->bad = true;
    o->off += n;
}
static void out_u32(gw_out *o, uint32_t v) { out_bytes(o, &v, 4); }
static void out_u64(gw_out *o, uint64_t v) { out_bytes(o, &v, 8); }
static void out_str(gw_out *o, const char *s, uint64_t n) {
    out_u64(o, n);
    out_bytes(o, s, n);
}
static void out_pad(gw_out *o, uint32_t align) {
    static const uint8_t zeros[256];
    uint64_t r = o->off % align;
    if (!r) return;
    uint64_t n = align - r;
    while (n) {
        uint64_t k = NB_MIN(n, (uint64_t)sizeof zeros);
        out_bytes(o, zeros, k);
        n -= k;
    }
}

static void out_kv(gw_out *o, const gw_kv *k) {
    out_str(o, k->key, strlen(k->key));
    out_u32(o, (uint32_t)k->type);
    if (k->type == NB_GGUF_STRING) {
        out_str(o, k->str, k->str_len);
    } else if (k->type == NB_GGUF_ARRAY) {
        out_u32(o, (uint32_t)k->arr_type);
        out_u64(o, k->n);
        if (k->arr_type == NB_GGUF_STRING)
            for (uint64_t i = 0; i < k->n; i++) out_str(o, k->strs[i], k->lens[i]);
        else
            out_bytes(o, k->arr, k->n * gw_type_size[k->arr_type]);
    } else {
        out_bytes(o, k->scalar, gw_type_size[k->type]);
    }
}

/* The alignment from general.alignment (u32, power of two) or the default. */
static nb_status writer_alignment(const nb_gguf_writer *w, uint32_t *align) {
    *align = NB_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment")) continue;
        if (w->kv[i].type != NB_GGUF_U32)
            return nb_fail(NB_ERR_INVALID, "gguf writer: general.alignment has type %s (must be u32)",
                           nb_gguf_type_name(w->kv[i].type));
        uint32_t a;
        memcpy(&a, w->kv[i].scalar, 4);
        if (a == 0 || (a & (a - 1)) || a > (1u << 30))
            return nb_fail(NB_ERR_RANGE, "gguf writer: general.alignment = %u (allowed: a power of two, 1..2^30)", a);
        *align = a;
    }
    return NB_OK;
}

static nb_status write_body(nb_gguf_writer *w, gw_out *o, uint32_t align, const char *path) {
    out_u32(o, 0x46554747u); /* "GGUF" */
    out_u32(o, 3);
    out_u64(o, (uint64_t)w->n_t);
    out_u64(o, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) out_kv(o, &w->kv[i]);
    uint64_t off = 0, max_fill = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const gw_tensor *t = &w->t[i];
        out_str(o, t->name, strlen(t->name));
        out_u32(o, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, (uint32_t)t->type);
        out_u64(o, off);
        uint64_t padded = (t->nbytes + align - 1) / align * align;
        if (!nb_add_ok(off, padded, &off)) return nb_fail(NB_ERR_RANGE, "%s: data section size overflows", path);
        if (t->fill) max_fill = NB_MAX(max_fill, t->nbytes);
    }
    /* A file without tensors (a vocab-only GGUF) ends right after its
     * metadata, as llama.cpp's writers leave it: there is no data section. */
    if (w->n_t) out_pad(o, align);
    if (max_fill > SIZE_MAX) return nb_fail(NB_ERR_RANGE, "%s: a streamed tensor is too large for memory", path);
    void *scratch = NULL;
    if (max_fill) {
        scratch = nb_malloc((size_t)max_fill);
        if (!scratch) return nb_fail_wrap(NB_ERR_NOMEM, "%s: scratch for the largest streamed tensor: ", path);
    }
    for (int64_t i = 0; i < w->n_t && !o->bad; i++) {
        const gw_tensor *t = &w->t[i];
        if (t->fill) {
            nb_status st = t->fill(t->fill_ctx, t->name, scratch, t->nbytes);
            if (st != NB_OK) {
                free(scratch);
                return nb_fail_wrap(st, "%s: producing tensor '%s': ", path, t->name);
            }
            out_bytes(o, scratch, t->nbytes);
        } else {
            out_bytes(o, t->data, t->nbytes);
        }
        out_pad(o, align);
    }
    free(scratch);
    return NB_OK;
}

nb_status nb_gguf_writer_write(nb_gguf_writer *w, const char *path) {
    uint32_t align;
    NB_TRY(writer_alignment(w, &align));
    size_t pl = strlen(path);
    char *tmp = nb_malloc(pl + 16);
    if (!tmp) return NB_ERR_NOMEM;
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return nb_fail(NB_ERR_IO, "%s: cannot create a temporary file next to it: %s", path, strerror(e));
    }
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    gw_out o = {fdopen(fd, "wb"), 0, false};
    if (!o.f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return nb_fail(NB_ERR_IO, "%s: fdopen: %s", path, strerror(e));
    }
    setvbuf(o.f, NULL, _IOFBF, 1 << 20);
    nb_status st = write_body(w, &o, align, path);
    int e = errno;
    if (fclose(o.f) != 0 && !o.bad) {
        o.bad = true;
        e = errno;
    }
    if (st == NB_OK && o.bad) st = nb_fail(NB_ERR_IO, "%s: write failed after %llu bytes: %s", path,
                                          (unsigned long long)o.off, strerror(e));
    if (st == NB_OK) st = nb_file_commit(tmp, path); /* fsync, rename, fsync the directory */
    if (st != NB_OK) unlink(tmp);
    free(tmp);
    return st;
}
