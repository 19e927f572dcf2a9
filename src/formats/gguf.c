/* GGUF v2/v3 reader over a read-only mapping. The byte layout is documented
 * in gguf.h. Everything is validated before nb_gguf_open returns, so the
 * accessors never fail on a bad file: each error names the file, the field
 * and the byte offset where the bad value starts. */
#include "formats/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/hugemem.h"
#include "base/nameset.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_NAME 64u      /* tensor names, as ggml's GGML_MAX_NAME */
#define GGUF_MAX_DEPTH 4       /* nested arrays */

/* Large arrays (metadata values, hash slots, key text) are the parser's
 * cost on a crafted file with millions of keys: filled through 4 KiB page
 * faults they cost more than the parsing itself. Blocks of 4 MiB and more
 * are mapped directly and advised as huge pages (2 MiB faults), smaller
 * ones come from calloc. Zero-filled either way. */
#define BIG_MIN (4u << 20)

typedef struct big_block {
    void *base;     /* the mapping (base/hugemem.h), or the calloc'ed block */
    size_t len;     /* mapped length; 0 for calloc */
} big_block;

static void *big_zalloc(big_block *b, size_t n) {
    b->len = 0;
    if (n < BIG_MIN) return b->base = nb_calloc(n ? n : 1, 1);
    if (!(b->base = nb_map_anon(n, true))) {
        nb_fail(NB_ERR_NOMEM, "out of memory (mapping %zu bytes)", n);
        return NULL;
    }
    b->len = n;
    return b->base;
}

static void big_free(big_block *b) {
    if (b->len) nb_unmap_anon(b->base, b->len);
    else free(b->base);
    b->base = NULL;
    b->len = 0;
}

/* Key text: NUL-terminated copies packed into chunks (one allocation per
 * chunk rather than per key). */
typedef struct text_chunk {
    struct text_chunk *next;
    big_block mem;
    size_t used, cap;
    uint8_t *data;
} text_chunk;

#define TEXT_CHUNK (8u << 20)

static char *text_dup(text_chunk **head, const uint8_t *s, size_t n) {
    text_chunk *c = *head;
    if (!c || c->cap - c->used < n + 1) {
        size_t cap = n + 1 > TEXT_CHUNK ? n + 1 : TEXT_CHUNK;
        c = nb_calloc(1, sizeof *c);
        if (!c) return NULL;
        c->data = big_zalloc(&c->mem, cap);
        if (!c->data) { free(c); return NULL; }
        c->cap = cap;
        c->next = *head;
        *head = c;
    }
    char *d = (char *)c->data + c->used;
    memcpy(d, s, n);
    d[n] = '\0';
    c->used += n + 1;
    return d;
}

static void text_free(text_chunk *c) {
    while (c) {
        text_chunk *n = c->next;
        big_free(&c->mem);
        free(c);
        c = n;
    }
}

/* Key / tensor-name sets for duplicate checks and lookups
 * (base/nameset.h), their slots in a huge-page-advised block. */
typedef struct name_set {
    nb_nameset s;
    big_block mem;
} name_set;

static bool name_set_init(name_set *ns, uint64_t n) {
    size_t cap = nb_nameset_cap(n);
    uint64_t *slot = big_zalloc(&ns->mem, cap * sizeof *slot);
    nb_nameset_attach(&ns->s, slot, cap);
    return slot != NULL;
}

static const char *key_at(const void *arr, int64_t i) { return ((char *const *)arr)[i]; }
static const char *tname_at(const void *arr, int64_t i) { return ((const nb_tensor *)arr)[i].name; }

struct nb_gguf {
    char *path;
    nb_map map;            /* owned when opened from a path */
    const uint8_t *data;
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    char **keys;           /* into key_text */
    nb_gguf_value *vals;
    big_block keys_mem, vals_mem;
    text_chunk *key_text;
    int64_t n_tensors;
    nb_tensor *tensors;
    name_set kset, tset;   /* key / tensor-name -> index, for duplicates and lookups */
};

typedef struct {
    const uint8_t *p;
    uint64_t size, off;
    const char *path;
} cursor;

static const char *type_names[NB_GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
static const uint8_t type_sizes[NB_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *nb_gguf_type_name(nb_gguf_type t) {
    return (unsigned)t < NB_GGUF_TYPE_COUNT ? type_names[t] : "invalid";
}

static nb_status need(cursor *c, uint64_t n, const char *field) {
    if (n > c->size - c->off)
        return nb_fail(NB_ERR_FORMAT, "%s: truncated at byte offset %llu: %s needs %llu bytes, %llu left", c->path,
                       (unsigned long long)c->off, field, (unsigned long long)n,
                       (unsigned long long)(c->size - c->off));
    return NB_OK;
}

static nb_status rd(cursor *c, void *dst, uint64_t n, const char *field) {
    NB_TRY(need(c, n, field));
    memcpy(dst, c->p + c->off, n);
    c->off += n;
    return NB_OK;
}

static nb_status rd_u32(cursor *c, uint32_t *v, const char *field) { return rd(c, v, 4, field); }
static nb_status rd_u64(cursor *c, uint64_t *v, const char *field) { return rd(c, v, 8, field); }

/* Reads a string's length and returns a pointer to its bytes in the file. */
static nb_status rd_str(cursor *c, const uint8_t **s, uint64_t *len, uint64_t max, const char *field) {
    uint64_t at = c->off;
    NB_TRY(rd_u64(c, len, field));
    if (*len > max)
        return nb_fail(NB_ERR_FORMAT, "%s: %s at byte offset %llu has length %llu, over the limit of %llu", c->path,
                       field, (unsigned long long)at, (unsigned long long)*len, (unsigned long long)max);
    NB_TRY(need(c, *len, field));
    *s = c->p + c->off;
    c->off += *len;
    return NB_OK;
}

static nb_status rd_type(cursor *c, nb_gguf_type *t, const char *key, const char *what) {
    uint64_t at = c->off;
    uint32_t v;
    NB_TRY(rd_u32(c, &v, what));
    if (v >= NB_GGUF_TYPE_COUNT)
        return nb_fail(NB_ERR_FORMAT, "%s: key '%s': %s at byte offset %llu is %u (allowed 0..%d)", c->path, key,
                       what, (unsigned long long)at, v, NB_GGUF_TYPE_COUNT - 1);
    *t = (nb_gguf_type)v;
    return NB_OK;
}

/* Skips (and validates) a value of type t; used for nested arrays. */
static nb_status skip_value(cursor *c, nb_gguf_type t, const char *key, int depth) {
    if (t == NB_GGUF_STRING) {
        const uint8_t *s;
        uint64_t n;
        return rd_str(c, &s, &n, c->size, "string value");
    }
    if (t == NB_GGUF_ARRAY) {
        if (depth >= GGUF_MAX_DEPTH)
            return nb_fail(NB_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d at byte offset %llu", c->path,
                           key, GGUF_MAX_DEPTH, (unsigned long long)c->off);
        nb_gguf_type et;
        uint64_t n;
        NB_TRY(rd_type(c, &et, key, "array element type"));
        NB_TRY(rd_u64(c, &n, "array length"));
        for (uint64_t i = 0; i < n; i++) NB_TRY(skip_value(c, et, key, depth + 1));
        return NB_OK;
    }
    uint64_t at = c->off;
    NB_TRY(need(c, type_sizes[t], "value"));
    if (t == NB_GGUF_BOOL && c->p[c->off] > 1)
        return nb_fail(NB_ERR_FORMAT, "%s: key '%s': bool at byte offset %llu is %u (allowed 0 or 1)", c->path, key,
                       (unsigned long long)at, c->p[c->off]);
    c->off += type_sizes[t];
    return NB_OK;
}

static void widen_scalar(nb_gguf_value *v, const uint8_t *p) {
    switch (v->type) {
    case NB_GGUF_U8: v->num.u = p[0]; break;
    case NB_GGUF_I8: { int8_t x; memcpy(&x, p, 1); v->num.i = x; break; }
    case NB_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); v->num.u = x; break; }
    case NB_GGUF_I16: { int16_t x; memcpy(&x, p, 2); v->num.i = x; break; }
    case NB_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); v->num.u = x; break; }
    case NB_GGUF_I32: { int32_t x; memcpy(&x, p, 4); v->num.i = x; break; }
    case NB_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); v->num.u = x; break; }
    case NB_GGUF_I64: { int64_t x; memcpy(&x, p, 8); v->num.i = x; break; }
    case NB_GGUF_F32: { float x; memcpy(&x, p, 4); v->num.f = x; break; }
    case NB_GGUF_F64: { double x; memcpy(&x, p, 8); v->num.f = x; break; }
    case NB_GGUF_BOOL: v->num.b = p[0] != 0; break;
    default: break;
    }
}

static nb_status read_array(cursor *c, nb_gguf_value *v, const char *key) {
    NB_TRY(rd_type(c, &v->arr_type, key, "array element type"));
    uint64_t at = c->off;
    NB_TRY(rd_u64(c, &v->n, "array length"));
    nb_gguf_type et = v->arr_type;
    uint64_t min_elem = et == NB_GGUF_STRING ? 8 : et == NB_GGUF_ARRAY ? 12 : type_sizes[et];
    if (v->n > (c->size - c->off) / min_elem)
        return nb_fail(NB_ERR_FORMAT, "%s: key '%s': array length %llu at byte offset %llu exceeds the %llu bytes left",
                       c->path, key, (unsigned long long)v->n, (unsigned long long)at,
                       (unsigned long long)(c->size - c->off));
    if (et == NB_GGUF_ARRAY) {
        for (uint64_t i = 0; i < v->n; i++) NB_TRY(skip_value(c, et, key, 1));
        return NB_OK;
    }
    if (et == NB_GGUF_STRING) {
        /* Pass 1: validate and size; pass 2: copy into one block. */
        uint64_t start = c->off, total = 0;
        for (uint64_t i = 0; i < v->n; i++) {
            const uint8_t *s;
            uint64_t len;
            NB_TRY(rd_str(c, &s, &len, c->size, "string array element"));
            total += len + 1;
        }
        char **strs = nb_malloc((size_t)v->n * sizeof *strs);
        uint64_t *lens = nb_malloc((size_t)v->n * sizeof *lens);
        char *block = nb_malloc((size_t)total);
        if (!strs || !lens || !block) { free(strs); free(lens); free(block); return NB_ERR_NOMEM; }
        cursor c2 = *c;
        c2.off = start;
        char *w = block;
        for (uint64_t i = 0; i < v->n; i++) {
            const uint8_t *s;
            uint64_t len;
            (void)rd_str(&c2, &s, &len, c->size, "string array element"); /* validated above */
            memcpy(w, s, len);
            w[len] = '\0';
            strs[i] = w;
            lens[i] = len;
            w += len + 1;
        }
        if (v->n == 0) free(block);
        v->strs = (const char *const *)strs;
        v->lens = lens;
        return NB_OK;
    }
    uint64_t bytes = v->n * type_sizes[et];
    NB_TRY(need(c, bytes, "array data"));
    if (et == NB_GGUF_BOOL)
        for (uint64_t i = 0; i < v->n; i++)
            if (c->p[c->off + i] > 1)
                return nb_fail(NB_ERR_FORMAT, "%s: key '%s': bool element %llu at byte offset %llu is %u (allowed 0 or 1)",
                               c->path, key, (unsigned long long)i, (unsigned long long)(c->off + i), c->p[c->off + i]);
    void *arr = nb_malloc((size_t)(bytes ? bytes : 1));
    if (!arr) return NB_ERR_NOMEM;
    if (bytes) memcpy(arr, c->p + c->off, (size_t)bytes);
    c->off += bytes;
    v->arr = arr;
    return NB_OK;
}

static nb_status read_value(cursor *c, nb_gguf_value *v, const char *key) {
    if (v->type == NB_GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        NB_TRY(rd_str(c, &s, &len, c->size, "string value"));
        char *d = nb_strndup((const char *)s, (size_t)len);
        if (!d) return NB_ERR_NOMEM;
        v->str = d;
        v->str_len = len;
        return NB_OK;
    }
    if (v->type == NB_GGUF_ARRAY) return read_array(c, v, key);
    uint64_t at = c->off;
    NB_TRY(need(c, type_sizes[v->type], "value"));
    if (v->type == NB_GGUF_BOOL && c->p[c->off] > 1)
        return nb_fail(NB_ERR_FORMAT, "%s: key '%s': bool at byte offset %llu is %u (allowed 0 or 1)", c->path, key,
                       (unsigned long long)at, c->p[c->off]);
    widen_scalar(v, c->p + c->off);
    c->off += type_sizes[v->type];
    return NB_OK;
}

/* A string array's characters live in one block starting at strs[0]. */
static void free_value(nb_gguf_value *v) {
    free((void *)v->str);
    free((void *)v->arr);
    if (v->strs && v->n) free((void *)v->strs[0]);
    free((void *)v->strs);
    free((void *)v->lens);
}

void nb_gguf_close(nb_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) free_value(&g->vals[i]);
    for (int64_t i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    big_free(&g->keys_mem);
    big_free(&g->vals_mem);
    text_free(g->key_text);
    free(g->tensors);
    big_free(&g->kset.mem);
    big_free(&g->tset.mem);
    nb_unmap(&g->map);
    free(g->path);
    free(g);
}

static int cmp_offset(const void *a, const void *b) {
    const nb_tensor *x = *(const nb_tensor *const *)a, *y = *(const nb_tensor *const *)b;
    const uint8_t *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

/* Byte offset of metadata key i (the file was validated up to it). */
static uint64_t kv_offset(const nb_gguf *g, int64_t i) {
    cursor c = {g->data, g->size, 24, g->path};
    for (int64_t j = 0; j < i; j++) {
        const uint8_t *k;
        uint64_t klen;
        nb_gguf_type t;
        (void)rd_str(&c, &k, &klen, GGUF_MAX_KEY, "metadata key");
        (void)rd_type(&c, &t, "", "value type");
        (void)skip_value(&c, t, "", 0);
    }
    return c.off;
}

/* Byte offset of tensor info i, the infos starting at byte offset start. */
static uint64_t tensor_info_offset(const nb_gguf *g, uint64_t start, int64_t i) {
    cursor c = {g->data, g->size, start, g->path};
    for (int64_t j = 0; j < i; j++) {
        const uint8_t *nm;
        uint64_t nlen, v;
        uint32_t nd, type;
        (void)rd_str(&c, &nm, &nlen, GGUF_MAX_NAME, "tensor name");
        (void)rd_u32(&c, &nd, "tensor n_dims");
        for (uint32_t d = 0; d < nd; d++) (void)rd_u64(&c, &v, "tensor dimension");
        (void)rd_u32(&c, &type, "tensor type");
        (void)rd_u64(&c, &v, "tensor offset");
    }
    return c.off;
}

static nb_status parse_sections(nb_gguf *g, uint64_t n_kv, uint64_t n_tensors, uint64_t *hv);

static nb_status parse(nb_gguf *g) {
    cursor c = {g->data, g->size, 0, g->path};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    if (g->size < 4 || (memcpy(&magic, g->data, 4), magic != GGUF_MAGIC))
        return nb_fail(NB_ERR_FORMAT, "%s: not a GGUF file (magic at byte offset 0 is not \"GGUF\")", g->path);
    c.off = 4;
    NB_TRY(rd_u32(&c, &g->version, "version"));
    if (g->version != 2 && g->version != 3)
        return nb_fail(NB_ERR_FORMAT, "%s: GGUF version %u at byte offset 4 is not supported (allowed 2 or 3)", g->path,
                       g->version);
    NB_TRY(rd_u64(&c, &n_tensors, "tensor count"));
    NB_TRY(rd_u64(&c, &n_kv, "metadata kv count"));
    /* Minimal sizes: a kv is >= 8 (key len) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 8 + 4 + 8. */
    if (n_kv > (g->size - c.off) / 13)
        return nb_fail(NB_ERR_FORMAT, "%s: metadata kv count %llu at byte offset 16 cannot fit in the file", g->path,
                       (unsigned long long)n_kv);
    if (n_tensors > (g->size - c.off) / 32)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor count %llu at byte offset 8 cannot fit in the file", g->path,
                       (unsigned long long)n_tensors);
    if (n_kv >= UINT32_MAX || n_tensors >= UINT32_MAX)
        return nb_fail(NB_ERR_FORMAT, "%s: %llu metadata keys and %llu tensors: at most %u of each are supported",
                       g->path, (unsigned long long)n_kv, (unsigned long long)n_tensors, UINT32_MAX - 1);
    g->keys = big_zalloc(&g->keys_mem, (size_t)n_kv * sizeof *g->keys);
    g->vals = big_zalloc(&g->vals_mem, (size_t)n_kv * sizeof *g->vals);
    g->tensors = nb_calloc((size_t)n_tensors, sizeof *g->tensors);
    if (!g->keys || !g->vals || !g->tensors) return NB_ERR_NOMEM;
    if (!name_set_init(&g->kset, n_kv) || !name_set_init(&g->tset, n_tensors)) return NB_ERR_NOMEM;
    /* Names are hashed while parsing and inserted into the sets after each
     * section (nb_nameset_insert_all); the duplicate check is the same. */
    big_block hv_mem;
    uint64_t *hv = big_zalloc(&hv_mem, (size_t)(n_kv > n_tensors ? n_kv : n_tensors) * sizeof *hv);
    if (!hv) return NB_ERR_NOMEM;
    nb_status st = parse_sections(g, n_kv, n_tensors, hv);
    big_free(&hv_mem);
    return st;
}

static nb_status parse_sections(nb_gguf *g, uint64_t n_kv, uint64_t n_tensors, uint64_t *hv) {
    cursor c = {g->data, g->size, 24, g->path};

    g->alignment = NB_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t at = c.off;
        const uint8_t *k;
        uint64_t klen;
        NB_TRY(rd_str(&c, &k, &klen, GGUF_MAX_KEY, "metadata key"));
        char *key = text_dup(&g->key_text, k, (size_t)klen);
        if (!key) return NB_ERR_NOMEM;
        g->keys[i] = key;
        g->n_kv = (int64_t)i + 1;
        hv[i] = nb_nameset_hash(key);
        nb_gguf_value *v = &g->vals[i];
        NB_TRY(rd_type(&c, &v->type, key, "value type"));
        NB_TRY(read_value(&c, v, key));
        if (!strcmp(key, "general.alignment")) {
            if (v->type != NB_GGUF_U32 || v->num.u == 0 || (v->num.u & (v->num.u - 1)) || v->num.u > (1u << 20))
                return nb_fail(NB_ERR_FORMAT, "%s: general.alignment (byte offset %llu) must be a u32 power of two "
                               "up to 1 MiB", g->path, (unsigned long long)at);
            g->alignment = (uint32_t)v->num.u;
        }
    }
    int64_t first, dup = nb_nameset_insert_all(&g->kset.s, hv, g->n_kv, key_at, g->keys, &first);
    if (dup >= 0)
        return nb_fail(NB_ERR_FORMAT, "%s: duplicate metadata key '%s' at byte offset %llu (first at byte offset %llu)",
                       g->path, g->keys[dup], (unsigned long long)kv_offset(g, dup),
                       (unsigned long long)kv_offset(g, first));

    uint64_t tinfo_start = c.off;
    for (uint64_t i = 0; i < n_tensors; i++) {
        nb_tensor *t = &g->tensors[i];
        uint64_t at = c.off;
        const uint8_t *nm;
        uint64_t nlen;
        NB_TRY(rd_str(&c, &nm, &nlen, GGUF_MAX_NAME, "tensor name"));
        char *name = nb_strndup((const char *)nm, (size_t)nlen);
        if (!name) return NB_ERR_NOMEM;
        t->name = name;
        g->n_tensors = (int64_t)i + 1;
        uint32_t nd;
        uint64_t nd_at = c.off;
        NB_TRY(rd_u32(&c, &nd, "tensor n_dims"));
        if (nd < 1 || nd > NB_MAX_DIMS)
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': n_dims at byte offset %llu is %u (allowed 1..%d)", g->path,
                           name, (unsigned long long)nd_at, nd, NB_MAX_DIMS);
        t->n_dims = (int)nd;
        uint64_t nelem = 1;
        for (int d = 0; d < NB_MAX_DIMS; d++) {
            uint64_t ne = 1;
            uint64_t d_at = c.off;
            if ((uint32_t)d < nd) NB_TRY(rd_u64(&c, &ne, "tensor dimension"));
            if (ne > (uint64_t)INT64_MAX || !nb_mul_ok(nelem, ne, &nelem) || nelem > (uint64_t)INT64_MAX)
                return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': dimension %d at byte offset %llu (%llu) overflows "
                               "the element count", g->path, name, d, (unsigned long long)d_at, (unsigned long long)ne);
            t->ne[d] = (int64_t)ne;
        }
        uint32_t type;
        uint64_t ty_at = c.off;
        NB_TRY(rd_u32(&c, &type, "tensor type"));
        if (!nb_dtype_from_file_id(type, &t->type))
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': type id %u at byte offset %llu is not a type a file may "
                           "hold (ggml's 0..%d, nibble's %d..%d)", g->path, name, type, (unsigned long long)ty_at,
                           NB_DTYPE_GGML_END - 1, NB_DTYPE_EXT_BASE, NB_DTYPE_EXT_END - 1);
        const nb_dtype_info *ti = nb_dtype_get(t->type);
        uint64_t row_bytes, bytes;
        if (!nb_dtype_row_bytes(t->type, (uint64_t)t->ne[0], &row_bytes))
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s' (%s, byte offset %llu): row length %lld is not a multiple "
                           "of the block size %u", g->path, name, ti->name, (unsigned long long)at,
                           (long long)t->ne[0], ti->block);
        if (!nb_mul_ok(row_bytes, (uint64_t)t->ne[1], &bytes) ||
            !nb_mul_ok(bytes, (uint64_t)t->ne[2], &bytes) || !nb_mul_ok(bytes, (uint64_t)t->ne[3], &bytes))
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': byte size overflows", g->path, name);
        t->nbytes = bytes;
        uint64_t off;
        uint64_t off_at = c.off;
        NB_TRY(rd_u64(&c, &off, "tensor offset"));
        if (off % g->alignment)
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': offset %llu at byte offset %llu is not a multiple of the "
                           "alignment %u", g->path, name, (unsigned long long)off, (unsigned long long)off_at,
                           g->alignment);
        t->data = (const void *)(uintptr_t)off; /* relative for now, fixed below */
        hv[i] = nb_nameset_hash(name);
    }
    dup = nb_nameset_insert_all(&g->tset.s, hv, g->n_tensors, tname_at, g->tensors, &first);
    if (dup >= 0)
        return nb_fail(NB_ERR_FORMAT, "%s: duplicate tensor name '%s' at byte offset %llu (first at byte offset %llu)",
                       g->path, g->tensors[dup].name, (unsigned long long)tensor_info_offset(g, tinfo_start, dup),
                       (unsigned long long)tensor_info_offset(g, tinfo_start, first));

    uint64_t data_off = c.off;
    if (data_off % g->alignment) data_off += g->alignment - data_off % g->alignment;
    if (n_tensors > 0 && data_off > g->size)
        return nb_fail(NB_ERR_FORMAT, "%s: data section would start at byte offset %llu, past the end of the file "
                       "(%llu bytes)", g->path, (unsigned long long)data_off, (unsigned long long)g->size);
    g->data_offset = data_off;
    uint64_t avail = g->size >= data_off ? g->size - data_off : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        nb_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off > avail || t->nbytes > avail - off)
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': data [%llu, %llu) relative to the data section at byte "
                           "offset %llu extends past the end of the file (%llu bytes)", g->path, t->name,
                           (unsigned long long)off, (unsigned long long)(off + t->nbytes), (unsigned long long)data_off,
                           (unsigned long long)g->size);
        t->data = g->data + data_off + off;
    }
    /* Tensor data must not overlap. */
    if (g->n_tensors > 1) {
        const nb_tensor **ord = nb_malloc((size_t)g->n_tensors * sizeof *ord);
        if (!ord) return NB_ERR_NOMEM;
        for (int64_t i = 0; i < g->n_tensors; i++) ord[i] = &g->tensors[i];
        qsort(ord, (size_t)g->n_tensors, sizeof *ord, cmp_offset);
        for (int64_t i = 1; i < g->n_tensors; i++) {
            const uint8_t *end = (const uint8_t *)ord[i - 1]->data + ord[i - 1]->nbytes;
            if ((const uint8_t *)ord[i]->data < end) {
                nb_status st = nb_fail(NB_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", g->path,
                                       ord[i - 1]->name, ord[i]->name);
                free(ord);
                return st;
            }
        }
        free(ord);
    }
    return NB_OK;
}

static nb_status open_common(nb_gguf *g, nb_gguf **out) {
    nb_status st = parse(g);
    if (st != NB_OK) {
        nb_gguf_close(g);
        *out = NULL;
        return st;
    }
    *out = g;
    return NB_OK;
}

nb_status nb_gguf_open(const char *path, nb_gguf **out) {
    *out = NULL;
    nb_gguf *g = nb_calloc(1, sizeof *g);
    if (!g) return NB_ERR_NOMEM;
    g->path = nb_strdup(path);
    if (!g->path) { free(g); return NB_ERR_NOMEM; }
    nb_status st = nb_map_file(path, &g->map);
    if (st != NB_OK) { nb_gguf_close(g); return st; }
    g->data = g->map.data;
    g->size = g->map.size;
    return open_common(g, out);
}

nb_status nb_gguf_open_mem(const void *data, size_t size, const char *name, nb_gguf **out) {
    *out = NULL;
    nb_gguf *g = nb_calloc(1, sizeof *g);
    if (!g) return NB_ERR_NOMEM;
    g->path = nb_strdup(name ? name : "<memory>");
    if (!g->path) { free(g); return NB_ERR_NOMEM; }
    g->data = data;
    g->size = size;
    return open_common(g, out);
}

const char *nb_gguf_path(const nb_gguf *g) { return g->path; }
uint32_t nb_gguf_version(const nb_gguf *g) { return g->version; }
uint32_t nb_gguf_alignment(const nb_gguf *g) { return g->alignment; }
uint64_t nb_gguf_data_offset(const nb_gguf *g) { return g->data_offset; }
uint64_t nb_gguf_file_size(const nb_gguf *g) { return g->size; }
const uint8_t *nb_gguf_file_data(const nb_gguf *g) { return g->data; }
void nb_gguf_release(const nb_gguf *g, const void *p, size_t n) { nb_map_release(&g->map, p, n); }
int64_t nb_gguf_n_kv(const nb_gguf *g) { return g->n_kv; }
const char *nb_gguf_key(const nb_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->keys[i] : NULL; }
const nb_gguf_value *nb_gguf_kv(const nb_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? &g->vals[i] : NULL; }
int64_t nb_gguf_n_tensors(const nb_gguf *g) { return g->n_tensors; }
const nb_tensor *nb_gguf_tensor(const nb_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const nb_gguf_value *nb_gguf_find(const nb_gguf *g, const char *key) {
    int64_t i = nb_nameset_probe((nb_nameset *)&g->kset.s, key, key_at, g->keys, -1);
    return i >= 0 && i < g->n_kv ? &g->vals[i] : NULL;
}

const nb_tensor *nb_gguf_find_tensor(const nb_gguf *g, const char *name) {
    int64_t i = nb_nameset_probe((nb_nameset *)&g->tset.s, name, tname_at, g->tensors, -1);
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

static bool is_int(nb_gguf_type t) {
    return t == NB_GGUF_U8 || t == NB_GGUF_I8 || t == NB_GGUF_U16 || t == NB_GGUF_I16 || t == NB_GGUF_U32 ||
           t == NB_GGUF_I32 || t == NB_GGUF_U64 || t == NB_GGUF_I64;
}
static bool is_signed(nb_gguf_type t) {
    return t == NB_GGUF_I8 || t == NB_GGUF_I16 || t == NB_GGUF_I32 || t == NB_GGUF_I64;
}

static nb_status lookup(const nb_gguf *g, const char *key, const nb_gguf_value **v) {
    *v = nb_gguf_find(g, key);
    if (!*v) return nb_fail(NB_ERR_NOT_FOUND, "%s: metadata key '%s' is missing", g->path, key);
    return NB_OK;
}

static nb_status wrong_type(const nb_gguf *g, const char *key, nb_gguf_type have, const char *want) {
    return nb_fail(NB_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected %s", g->path, key,
                   nb_gguf_type_name(have), want);
}

nb_status nb_gguf_get_int(const nb_gguf *g, const char *key, int64_t *out) {
    const nb_gguf_value *v;
    NB_TRY(lookup(g, key, &v));
    if (!is_int(v->type)) return wrong_type(g, key, v->type, "an integer");
    if (!is_signed(v->type) && v->num.u > (uint64_t)INT64_MAX)
        return nb_fail(NB_ERR_RANGE, "%s: metadata key '%s' = %llu is too large", g->path, key,
                       (unsigned long long)v->num.u);
    *out = is_signed(v->type) ? v->num.i : (int64_t)v->num.u;
    return NB_OK;
}

nb_status nb_gguf_get_u32(const nb_gguf *g, const char *key, uint32_t *out) {
    int64_t x;
    NB_TRY(nb_gguf_get_int(g, key, &x));
    if (x < 0 || x > (int64_t)UINT32_MAX)
        return nb_fail(NB_ERR_RANGE, "%s: metadata key '%s' = %lld is outside 0..4294967295", g->path, key,
                       (long long)x);
    *out = (uint32_t)x;
    return NB_OK;
}

nb_status nb_gguf_get_float(const nb_gguf *g, const char *key, double *out) {
    const nb_gguf_value *v;
    NB_TRY(lookup(g, key, &v));
    if (v->type == NB_GGUF_F32 || v->type == NB_GGUF_F64) { *out = v->num.f; return NB_OK; }
    if (is_int(v->type)) { *out = is_signed(v->type) ? (double)v->num.i : (double)v->num.u; return NB_OK; }
    return wrong_type(g, key, v->type, "a number");
}

nb_status nb_gguf_get_bool(const nb_gguf *g, const char *key, bool *out) {
    const nb_gguf_value *v;
    NB_TRY(lookup(g, key, &v));
    if (v->type != NB_GGUF_BOOL) return wrong_type(g, key, v->type, "bool");
    *out = v->num.b;
    return NB_OK;
}

nb_status nb_gguf_get_str(const nb_gguf *g, const char *key, const char **out) {
    const nb_gguf_value *v;
    NB_TRY(lookup(g, key, &v));
    if (v->type != NB_GGUF_STRING) return wrong_type(g, key, v->type, "string");
    *out = v->str;
    return NB_OK;
}

nb_status nb_gguf_get_arr(const nb_gguf *g, const char *key, nb_gguf_type elem, const nb_gguf_value **out) {
    const nb_gguf_value *v;
    NB_TRY(lookup(g, key, &v));
    if (v->type != NB_GGUF_ARRAY) return wrong_type(g, key, v->type, "array");
    if (v->arr_type != elem)
        return nb_fail(NB_ERR_FORMAT, "%s: metadata key '%s' is an array of %s, expected an array of %s", g->path, key,
                       nb_gguf_type_name(v->arr_type), nb_gguf_type_name(elem));
    *out = v;
    return NB_OK;
}

nb_status nb_gguf_get_int_or(const nb_gguf *g, const char *key, int64_t def, int64_t *out) {
    if (!nb_gguf_find(g, key)) { *out = def; return NB_OK; }
    return nb_gguf_get_int(g, key, out);
}

nb_status nb_gguf_get_float_or(const nb_gguf *g, const char *key, double def, double *out) {
    if (!nb_gguf_find(g, key)) { *out = def; return NB_OK; }
    return nb_gguf_get_float(g, key, out);
}

nb_status nb_gguf_get_bool_or(const nb_gguf *g, const char *key, bool def, bool *out) {
    if (!nb_gguf_find(g, key)) { *out = def; return NB_OK; }
    return nb_gguf_get_bool(g, key, out);
}
