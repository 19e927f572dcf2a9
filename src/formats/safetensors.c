/* safetensors reader + writer. Layout: u64 N | N bytes JSON header | data
 * buffer; see safetensors.h for the header fields and the checks made. */
#include "formats/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"

/* ---- dtype table ---------------------------------------------------------- */

typedef struct st_dtype {
    const char *name;
    uint32_t bits;
    bool has;
    nb_dtype type;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F64", 64, true, NB_F64},   {"F32", 32, true, NB_F32},     {"F16", 16, true, NB_F16},
    {"BF16", 16, true, NB_BF16}, {"I64", 64, true, NB_I64},     {"I32", 32, true, NB_I32},
    {"I16", 16, true, NB_I16},   {"I8", 8, true, NB_I8},        {"U64", 64, false, NB_F32},
    {"U32", 32, false, NB_F32},  {"U16", 16, false, NB_F32},    {"U8", 8, false, NB_F32},
    {"BOOL", 8, false, NB_F32},  {"F8_E4M3", 8, false, NB_F32}, {"F8_E5M2", 8, false, NB_F32},
    {"F8_E8M0", 8, false, NB_F32}, {"F6_E2M3", 6, false, NB_F32}, {"F6_E3M2", 6, false, NB_F32},
    {"F4", 4, false, NB_F32},
};
#define ST_N_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])
#define ST_DTYPE_LIST "F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2, F8_E8M0, F6_E2M3, F6_E3M2, F4"

static const st_dtype *st_dtype_find(const char *name) {
    for (size_t i = 0; i < ST_N_DTYPES; i++)
        if (!strcmp(st_dtypes[i].name, name)) return &st_dtypes[i];
    return NULL;
}

uint32_t nb_st_dtype_bits(const char *dtype_name) {
    const st_dtype *d = st_dtype_find(dtype_name);
    return d ? d->bits : 0;
}

bool nb_st_dtype_to_nb(const char *dtype_name, nb_dtype *out) {
    const st_dtype *d = st_dtype_find(dtype_name);
    if (!d || !d->has) return false;
    *out = d->type;
    return true;
}

const char *nb_st_dtype_from_nb(nb_dtype t) {
    for (size_t i = 0; i < ST_N_DTYPES; i++)
        if (st_dtypes[i].has && st_dtypes[i].type == t) return st_dtypes[i].name;
    return NULL;
}

/* ---- the handle ----------------------------------------------------------- */

typedef struct st_file {
    char *path;
    nb_map map;  /* empty for open_mem */
} st_file;

struct nb_safetensors {
    int n_files;
    st_file *files;
    int64_t n, cap;
    nb_st_tensor *t;  /* names owned (char *), sorted by name once opened */
    int64_t n_meta;
    char **meta_k, **meta_v;
};

void nb_safetensors_release(const nb_safetensors *st, const void *p, size_t n) {
    for (int i = 0; i < st->n_files; i++) nb_map_release(&st->files[i].map, p, n);
}

void nb_safetensors_close(nb_safetensors *st) {
    if (!st) return;
    for (int64_t i = 0; i < st->n; i++) free((char *)st->t[i].name);
    free(st->t);
    for (int64_t i = 0; i < st->n_meta; i++) {
        free(st->meta_k[i]);
        free(st->meta_v[i]);
    }
    free(st->meta_k);
    free(st->meta_v);
    for (int i = 0; i < st->n_files; i++) {
        nb_unmap(&st->files[i].map);
        free(st->files[i].path);
    }
    free(st->files);
    free(st);
}

int64_t nb_safetensors_n_tensors(const nb_safetensors *st) { return st->n; }

const nb_st_tensor *nb_safetensors_tensor(const nb_safetensors *st, int64_t i) {
    return (i >= 0 && i < st->n) ? &st->t[i] : NULL;
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const nb_st_tensor *)a)->name, ((const nb_st_tensor *)b)->name);
}

const nb_st_tensor *nb_safetensors_find(const nb_safetensors *st, const char *name) {
    nb_st_tensor key = {.name = name};
    return st->n ? bsearch(&key, st->t, (size_t)st->n, sizeof *st->t, st_cmp_name) : NULL;
}

int nb_safetensors_n_shards(const nb_safetensors *st) { return st->n_files; }

const char *nb_safetensors_shard_path(const nb_safetensors *st, int shard) {
    return (shard >= 0 && shard < st->n_files) ? st->files[shard].path : NULL;
}

int64_t nb_safetensors_n_meta(const nb_safetensors *st) { return st->n_meta; }
const char *nb_safetensors_meta_key(const nb_safetensors *st, int64_t i) {
    return (i >= 0 && i < st->n_meta) ? st->meta_k[i] : NULL;
}
const char *nb_safetensors_meta_value(const nb_safetensors *st, int64_t i) {
    return (i >= 0 && i < st->n_meta) ? st->meta_v[i] : NULL;
}
const char *nb_safetensors_meta_find(const nb_safetensors *st, const char *key) {
    for (int64_t i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_k[i], key)) return st->meta_v[i];
    return NULL;
}

/* ---- header parsing ------------------------------------------------------- */

static nb_status st_reserve(nb_safetensors *st, int64_t more) {
    if (st->n + more <= st->cap) return NB_OK;
    int64_t cap = st->cap ? st->cap : 16;
    while (cap < st->n + more) cap *= 2;
    nb_st_tensor *t = nb_realloc(st->t, (size_t)cap * sizeof *t);
    if (!t) return NB_ERR_NOMEM;
    st->t = t;
    st->cap = cap;
    return NB_OK;
}

/* A JSON integer (or an integral real) in [0, max]. */
static bool st_json_u64(const json_t *v, uint64_t max, uint64_t *out) {
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (uint64_t)i > max) return false;
        *out = (uint64_t)i;
        return true;
    }
    return false;
}

/* Shards after the first: metadata checked, not kept. */
static nb_status st_check_meta(const json_t *m, const char *name) {
    if (!json_is_object(m))
        return nb_fail(NB_ERR_FORMAT, "%s: header field '__metadata__': expected an object of strings", name);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_string(v))
            return nb_fail(NB_ERR_FORMAT, "%s: header field '__metadata__': key '%s': expected a string value", name, k);
    }
    return NB_OK;
}

static nb_status st_parse_meta(nb_safetensors *st, const json_t *m, const char *name) {
    if (!json_is_object(m))
        return nb_fail(NB_ERR_FORMAT, "%s: header field '__metadata__': expected an object of strings", name);
    size_t n = json_object_size(m);
    st->meta_k = nb_calloc(n ? n : 1, sizeof(char *));
    st->meta_v = nb_calloc(n ? n : 1, sizeof(char *));
    if (!st->meta_k || !st->meta_v) return NB_ERR_NOMEM;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_string(v))
            return nb_fail(NB_ERR_FORMAT, "%s: header field '__metadata__': key '%s': expected a string value", name, k);
        st->meta_k[st->n_meta] = nb_strdup(k);
        st->meta_v[st->n_meta] = nb_strdup(json_string_value(v));
        if (!st->meta_k[st->n_meta] || !st->meta_v[st->n_meta]) {
            free(st->meta_k[st->n_meta]);
            free(st->meta_v[st->n_meta]);
            return NB_ERR_NOMEM;
        }
        st->n_meta++;
    }
    return NB_OK;
}

static nb_status st_parse_entry(const char *name, const char *tname, const json_t *e, uint64_t bufsize,
                                nb_st_tensor *t) {
    if (!json_is_object(e))
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': expected an object {dtype, shape, data_offsets}", name, tname);
    const json_t *jd = json_object_get(e, "dtype");
    if (!jd || !json_is_string(jd))
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'dtype': missing or not a string", name, tname);
    const st_dtype *d = st_dtype_find(json_string_value(jd));
    if (!d)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'dtype': unknown dtype '%s' (known: " ST_DTYPE_LIST ")",
                       name, tname, json_string_value(jd));
    t->dtype_name = d->name;
    t->has_type = d->has;
    t->type = d->type;
    t->elem_bits = d->bits;

    const json_t *js = json_object_get(e, "shape");
    if (!js || !json_is_array(js))
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': missing or not an array", name, tname);
    size_t nd = json_array_size(js);
    if (nd > NB_ST_MAX_DIMS)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': %zu dims (at most %d supported)", name, tname, nd,
                       NB_ST_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t nelem = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t v;
        if (!st_json_u64(json_array_get(js, i), (uint64_t)INT64_MAX, &v))
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': dim %zu is not an integer in 0..2^63-1", name,
                           tname, i);
        t->shape[i] = (int64_t)v;
        if (!nb_mul_ok(nelem, v, &nelem) || nelem > (uint64_t)INT64_MAX)
            return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': element count overflows", name, tname);
    }
    t->nelem = (int64_t)nelem;
    uint64_t bits;
    if (!nb_mul_ok(nelem, d->bits, &bits))
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': byte size overflows", name, tname);
    if (bits % 8)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'shape': %llu elements of %u bits are not a whole number of bytes",
                       name, tname, (unsigned long long)nelem, d->bits);
    uint64_t want = bits / 8;

    const json_t *jo = json_object_get(e, "data_offsets");
    if (!jo || !json_is_array(jo) || json_array_size(jo) != 2)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets': expected [begin, end]", name, tname);
    uint64_t b, en;
    if (!st_json_u64(json_array_get(jo, 0), bufsize, &b) || !st_json_u64(json_array_get(jo, 1), bufsize, &en))
        return nb_fail(NB_ERR_FORMAT,
                       "%s: tensor '%s': field 'data_offsets': begin and end must be integers within the %llu-byte data buffer",
                       name, tname, (unsigned long long)bufsize);
    if (en < b)
        return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets': end %llu < begin %llu", name, tname,
                       (unsigned long long)en, (unsigned long long)b);
    if (en - b != want)
        return nb_fail(NB_ERR_FORMAT,
                       "%s: tensor '%s': field 'data_offsets': [%llu, %llu) holds %llu bytes but shape x dtype %s needs %llu",
                       name, tname, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), d->name,
                       (unsigned long long)want);
    t->offset = b;
    t->nbytes = want;
    return NB_OK;
}

static int st_cmp_offset(const void *a, const void *b) {
    const nb_st_tensor *x = *(const nb_st_tensor *const *)a, *y = *(const nb_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* Parses one file's header and appends its tensors (shard index `shard`). */
static nb_status st_parse(nb_safetensors *st, const uint8_t *data, size_t size, const char *name, int shard) {
    if (size < 8)
        return nb_fail(NB_ERR_FORMAT, "%s: %zu bytes, shorter than the 8-byte header length field", name, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | data[i];
    if (n > size - 8)
        return nb_fail(NB_ERR_FORMAT, "%s: header length N=%llu (bytes 0..7) exceeds the %zu bytes after the length field",
                       name, (unsigned long long)n, size - 8);
    if (n > NB_ST_MAX_HEADER)
        return nb_fail(NB_ERR_FORMAT, "%s: header length N=%llu (bytes 0..7) is over the %u-byte limit", name,
                       (unsigned long long)n, NB_ST_MAX_HEADER);
    if (n < 2) return nb_fail(NB_ERR_FORMAT, "%s: header length N=%llu (bytes 0..7): too short for a JSON object", name,
                              (unsigned long long)n);
    const uint8_t *buf = data + 8 + n;
    uint64_t bufsize = size - 8 - n;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)data + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return nb_fail(NB_ERR_FORMAT, "%s: header JSON at byte %lld: %s", name, (long long)(8 + jerr.position), jerr.text);
    nb_status rc = NB_OK;
    nb_st_tensor **order = NULL;
    int64_t first = st->n;
    if (!json_is_object(root)) {
        rc = nb_fail(NB_ERR_FORMAT, "%s: header (bytes 8..%llu): expected a JSON object", name,
                     (unsigned long long)(8 + n));
        goto done;
    }
    size_t count = json_object_size(root);
    if ((rc = st_reserve(st, (int64_t)count)) != NB_OK) goto done;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!strcmp(k, "__metadata__")) {
            if (shard == 0) {
                if ((rc = st_parse_meta(st, v, name)) != NB_OK) goto done;
            } else if ((rc = st_check_meta(v, name)) != NB_OK) {
                goto done;
            }
            continue;
        }
        nb_st_tensor *t = &st->t[st->n];
        memset(t, 0, sizeof *t);
        if ((rc = st_parse_entry(name, k, v, bufsize, t)) != NB_OK) goto done;
        t->name = nb_strdup(k);
        if (!t->name) { rc = NB_ERR_NOMEM; goto done; }
        t->data = buf + t->offset;
        t->shard = shard;
        st->n++;
    }
    /* Tiling: sorted by offset, each begins where the previous ended. */
    int64_t nt = st->n - first;
    order = nb_malloc((size_t)(nt ? nt : 1) * sizeof *order);
    if (!order) { rc = NB_ERR_NOMEM; goto done; }
    for (int64_t i = 0; i < nt; i++) order[i] = &st->t[first + i];
    qsort(order, (size_t)nt, sizeof *order, st_cmp_offset);
    uint64_t pos = 0;
    for (int64_t i = 0; i < nt; i++) {
        if (order[i]->offset != pos) {
            if (order[i]->offset < pos)
                rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets': [%llu, %llu) overlaps tensor '%s' (ends at %llu)",
                             name, order[i]->name, (unsigned long long)order[i]->offset,
                             (unsigned long long)(order[i]->offset + order[i]->nbytes), order[i - 1]->name,
                             (unsigned long long)pos);
            else
                rc = nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets': begins at %llu, leaving a gap after byte %llu (tensors must tile the data buffer)",
                             name, order[i]->name, (unsigned long long)order[i]->offset, (unsigned long long)pos);
            goto done;
        }
        pos += order[i]->nbytes;
    }
    if (pos != bufsize)
        rc = nb_fail(NB_ERR_FORMAT, "%s: data_offsets: the tensors cover %llu bytes but the data buffer has %llu (bytes after the header must all belong to tensors)",
                     name, (unsigned long long)pos, (unsigned long long)bufsize);
done:
    free(order);
    json_decref(root);
    return rc;
}

static nb_status st_finish(nb_safetensors *st) {
    if (st->n) qsort(st->t, (size_t)st->n, sizeof *st->t, st_cmp_name);
    for (int64_t i = 1; i < st->n; i++) {
        if (!strcmp(st->t[i].name, st->t[i - 1].name))
            return nb_fail(NB_ERR_FORMAT, "tensor '%s' appears in two shards: %s and %s", st->t[i].name,
                           st->files[st->t[i - 1].shard].path, st->files[st->t[i].shard].path);
    }
    return NB_OK;
}

static nb_safetensors *st_new(int n_files) {
    nb_safetensors *st = nb_calloc(1, sizeof *st);
    if (!st) return NULL;
    st->files = nb_calloc((size_t)n_files, sizeof *st->files);
    if (!st->files) { free(st); return NULL; }
    return st;
}

nb_status nb_safetensors_open_mem(const void *data, size_t size, const char *name, nb_safetensors **out) {
    *out = NULL;
    nb_safetensors *st = st_new(1);
    if (!st) return NB_ERR_NOMEM;
    st->n_files = 1;
    st->files[0].path = nb_strdup(name ? name : "<memory>");
    nb_status rc = st->files[0].path ? st_parse(st, data, size, st->files[0].path, 0) : NB_ERR_NOMEM;
    if (rc == NB_OK) rc = st_finish(st);
    if (rc != NB_OK) { nb_safetensors_close(st); return rc; }
    *out = st;
    return NB_OK;
}

nb_status nb_safetensors_open(const char *path, nb_safetensors **out) {
    *out = NULL;
    nb_safetensors *st = st_new(1);
    if (!st) return NB_ERR_NOMEM;
    st->n_files = 1;
    nb_status rc = NB_ERR_NOMEM;
    st->files[0].path = nb_strdup(path);
    if (st->files[0].path) rc = nb_map_file(path, &st->files[0].map);
    if (rc == NB_OK) rc = st_parse(st, st->files[0].map.data, st->files[0].map.size, path, 0);
    if (rc == NB_OK) rc = st_finish(st);
    if (rc != NB_OK) { nb_safetensors_close(st); return rc; }
    *out = st;
    return NB_OK;
}

/* A shard name must be a plain file name in the index's directory. */
static bool st_plain_name(const char *s) {
    return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && !strchr(s, '\\');
}

nb_status nb_safetensors_open_index(const char *index_path, nb_safetensors **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    NB_TRY(nb_read_file(index_path, NB_ST_MAX_INDEX, &text, &len));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) return nb_fail(NB_ERR_FORMAT, "%s: JSON at byte %lld: %s", index_path, (long long)jerr.position, jerr.text);

    nb_status rc = NB_OK;
    nb_safetensors *st = NULL;
    const char **names = NULL; /* distinct shard names, borrowed from root */
    int n_names = 0;
    char *dir = NULL;
    const json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!wm || !json_is_object(wm)) {
        rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': missing or not an object of tensor -> shard file", index_path);
        goto done;
    }
    size_t n_map = json_object_size(wm);
    if (n_map == 0) {
        rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': empty", index_path);
        goto done;
    }
    names = nb_calloc(n_map, sizeof *names);
    if (!names) { rc = NB_ERR_NOMEM; goto done; }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)wm, k, v) {
        if (!json_is_string(v) || !st_plain_name(json_string_value(v))) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': tensor '%s': expected a plain file name (no '/')",
                         index_path, k);
            goto done;
        }
        const char *f = json_string_value(v);
        int j = 0;
        while (j < n_names && strcmp(names[j], f)) j++;
        if (j == n_names) {
            if (n_names == NB_ST_MAX_SHARDS) {
                rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': more than %d shard files", index_path, NB_ST_MAX_SHARDS);
                goto done;
            }
            names[n_names++] = f;
        }
    }
    /* Directory of the index (with trailing '/', or empty). */
    const char *slash = strrchr(index_path, '/');
    size_t dl = slash ? (size_t)(slash - index_path + 1) : 0;
    dir = nb_strndup(index_path, dl);
    st = st_new(n_names);
    if (!dir || !st) { rc = NB_ERR_NOMEM; goto done; }
    for (int i = 0; i < n_names; i++) {
        size_t fl = strlen(names[i]);
        char *p = nb_malloc(dl + fl + 1);
        if (!p) { rc = NB_ERR_NOMEM; goto done; }
        memcpy(p, dir, dl);
        memcpy(p + dl, names[i], fl + 1);
        st->files[i].path = p;
        st->n_files = i + 1;
        if ((rc = nb_map_file(p, &st->files[i].map)) != NB_OK) {
            rc = nb_fail_wrap(rc, "%s: shard named in 'weight_map': ", index_path);
            goto done;
        }
        if ((rc = st_parse(st, st->files[i].map.data, st->files[i].map.size, p, i)) != NB_OK) goto done;
    }
    if ((rc = st_finish(st)) != NB_OK) {
        rc = nb_fail_wrap(rc, "%s: ", index_path);
        goto done;
    }
    json_object_foreach((json_t *)wm, k, v) {
        const nb_st_tensor *t = nb_safetensors_find(st, k);
        if (!t) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': tensor '%s' is not in shard %s", index_path, k,
                         json_string_value(v));
            goto done;
        }
        if (strcmp(names[t->shard], json_string_value(v))) {
            rc = nb_fail(NB_ERR_FORMAT, "%s: field 'weight_map': tensor '%s' is mapped to %s but found in %s", index_path, k,
                         json_string_value(v), names[t->shard]);
            goto done;
        }
    }
done:
    free(names);
    free(dir);
    json_decref(root);
    if (rc != NB_OK) {
        nb_safetensors_close(st);
        return rc;
    }
    *out = st;
    return NB_OK;
}

nb_status nb_st_tensor_view(const nb_st_tensor *t, const char *name, nb_tensor *out) {
    memset(out, 0, sizeof *out);
    if (!t->has_type)
        return nb_fail(NB_ERR_UNSUPPORTED, "tensor '%s': dtype %s has no compute type here (F32, F16, BF16, F64, I8..I64 do)",
                       t->name, t->dtype_name);
    if (t->n_dims > NB_MAX_DIMS)
        return nb_fail(NB_ERR_RANGE, "tensor '%s': %d dims, at most %d supported", t->name, t->n_dims, NB_MAX_DIMS);
    out->name = name ? name : t->name;
    out->type = t->type;
    out->n_dims = t->n_dims ? t->n_dims : 1;
    for (int i = 0; i < NB_MAX_DIMS; i++) out->ne[i] = 1;
    for (int i = 0; i < t->n_dims; i++) out->ne[i] = t->shape[t->n_dims - 1 - i];
    out->data = t->data;
    out->nbytes = t->nbytes;
    return NB_OK;
}

/* ---- writer --------------------------------------------------------------- */

typedef struct st_wslot {
    size_t idx;
    uint32_t bits;
} st_wslot;

static int st_cmp_wslot(const void *a, const void *b) {
    const st_wslot *x = a, *y = b;
    if (x->bits != y->bits) return x->bits > y->bits ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

nb_status nb_safetensors_write(const char *path, const nb_st_write_tensor *tensors, size_t n, const nb_st_meta *meta,
                               size_t n_meta) {
    nb_status rc = NB_OK;
    json_t *root = json_object();
    st_wslot *slots = nb_calloc(n ? n : 1, sizeof *slots);
    uint64_t *offsets = nb_calloc(n ? n : 1, sizeof *offsets);
    char *hdr = NULL, *tmp = NULL;
    FILE *f = NULL;
    if (!root || !slots || !offsets) { rc = nb_fail(NB_ERR_NOMEM, "%s: out of memory building the header", path); goto done; }
    if (n_meta) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m)) { rc = NB_ERR_NOMEM; goto done; }
        for (size_t i = 0; i < n_meta; i++) {
            if (!meta[i].key || !meta[i].value || json_object_get(m, meta[i].key)) {
                rc = nb_fail(NB_ERR_INVALID, "%s: metadata entry %zu: key missing, value missing or key repeated", path, i);
                goto done;
            }
            if (json_object_set_new(m, meta[i].key, json_string(meta[i].value))) {
                rc = nb_fail(NB_ERR_INVALID, "%s: metadata key '%s': not valid UTF-8 (or out of memory)", path, meta[i].key);
                goto done;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        const nb_st_write_tensor *t = &tensors[i];
        if (!t->name || !t->name[0] || !strcmp(t->name, "__metadata__") || json_object_get(root, t->name)) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor %zu: name '%s' is empty, reserved or repeated", path, i,
                         t->name ? t->name : "");
            goto done;
        }
        const st_dtype *d = t->dtype ? st_dtype_find(t->dtype) : NULL;
        if (!d) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': dtype '%s' unknown (known: " ST_DTYPE_LIST ")", path, t->name,
                         t->dtype ? t->dtype : "(null)");
            goto done;
        }
        if (t->n_dims < 0 || t->n_dims > NB_ST_MAX_DIMS) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': n_dims %d outside 0..%d", path, t->name, t->n_dims, NB_ST_MAX_DIMS);
            goto done;
        }
        uint64_t ne = 1;
        for (int j = 0; j < t->n_dims; j++) {
            if (t->shape[j] < 0 || !nb_mul_ok(ne, (uint64_t)t->shape[j], &ne)) {
                rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': shape dim %d = %lld is negative or overflows", path, t->name,
                             j, (long long)t->shape[j]);
                goto done;
            }
        }
        uint64_t bits;
        if (!nb_mul_ok(ne, d->bits, &bits) || bits % 8 || bits / 8 != t->nbytes || (t->nbytes && !t->data)) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': nbytes %llu does not match shape x %s (%llu elements)", path,
                         t->name, (unsigned long long)t->nbytes, d->name, (unsigned long long)ne);
            goto done;
        }
        slots[i].idx = i;
        slots[i].bits = d->bits;
        /* placeholder: reserves the name (duplicates) and its header position */
        if (json_object_set_new(root, t->name, json_null())) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': name not valid UTF-8 (or out of memory)", path, t->name);
            goto done;
        }
    }
    qsort(slots, n, sizeof *slots, st_cmp_wslot);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        offsets[slots[i].idx] = pos;
        if (!nb_add_ok(pos, tensors[slots[i].idx].nbytes, &pos)) {
            rc = nb_fail(NB_ERR_RANGE, "%s: total size overflows", path);
            goto done;
        }
    }
    /* Header entries in the given order. */
    for (size_t i = 0; i < n; i++) {
        const nb_st_write_tensor *t = &tensors[i];
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        if (!e || !shape || !offs) {
            json_decref(e);
            json_decref(shape);
            json_decref(offs);
            rc = NB_ERR_NOMEM;
            goto done;
        }
        for (int j = 0; j < t->n_dims; j++) json_array_append_new(shape, json_integer(t->shape[j]));
        json_array_append_new(offs, json_integer((json_int_t)offsets[i]));
        json_array_append_new(offs, json_integer((json_int_t)(offsets[i] + t->nbytes)));
        json_object_set_new(e, "dtype", json_string(t->dtype));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        if (json_object_set_new(root, t->name, e)) {
            rc = nb_fail(NB_ERR_INVALID, "%s: tensor '%s': name not valid UTF-8 (or out of memory)", path, t->name);
            goto done;
        }
    }
    hdr = json_dumps(root, JSON_COMPACT);
    if (!hdr) { rc = nb_fail(NB_ERR_NOMEM, "%s: cannot serialise the header", path); goto done; }
    size_t hl = strlen(hdr);
    size_t pad = (8 - (8 + hl) % 8) % 8;
    uint64_t hn = hl + pad;
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)(hn >> (8 * i));
    size_t pl = strlen(path);
    tmp = nb_malloc(pl + 5);
    if (!tmp) { rc = NB_ERR_NOMEM; goto done; }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    f = fopen(tmp, "wb");
    if (!f) { rc = nb_fail(NB_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    bool ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(hdr, 1, hl, f) == hl;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    for (size_t i = 0; ok && i < n; i++) {
        const nb_st_write_tensor *t = &tensors[slots[i].idx];
        if (t->nbytes) ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
    }
    int e1 = errno;
    if (fclose(f) != 0 && ok) { ok = false; e1 = errno; }
    f = NULL;
    if (!ok) {
        unlink(tmp);
        rc = nb_fail(NB_ERR_IO, "%s: write failed: %s", path, strerror(e1));
    } else if ((rc = nb_file_commit(tmp, path)) != NB_OK) {
        unlink(tmp);
    }
done:
    if (f) { fclose(f); unlink(tmp); }
    free(tmp);
    free(hdr);
    free(slots);
    free(offsets);
    json_decref(root);
    return rc;
}
