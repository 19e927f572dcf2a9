/* GGUF v2/v3 reader (over mmap) and writer.
 *
 * File layout (little-endian):
 *   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value type | value }
 *   n_tensors x { string name | u32 n_dims (1..4) | u64 ne[n_dims]
 *                 | u32 ggml type | u64 offset (relative to the data section) }
 *   zero padding to the alignment, then the data section; each tensor's
 *   offset is a multiple of the alignment (general.alignment, u32, default 32).
 *   string = u64 length + bytes (no NUL). Value types: 0 u8, 1 i8, 2 u16,
 *   3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (u32 element type,
 *   u64 count, elements), 10 u64, 11 i64, 12 f64.
 *
 * nb_gguf_open validates everything before returning: magic, version,
 * counts against the bytes left, string lengths, value types, bool values,
 * dims, type ids, row sizes against block sizes, element-count overflow,
 * tensor extents inside the file. Errors name the file, the field and the
 * byte offset. Keys and string values are copied out NUL-terminated; numeric
 * arrays are copied to aligned memory; tensor data stays in the mapping.
 *
 * Nested arrays are accepted (their contents are skipped, type reported as
 * NB_GGUF_ARRAY with n elements but no data). */
#ifndef NB_FORMATS_GGUF_H
#define NB_FORMATS_GGUF_H

#include "formats/tensor.h"

typedef enum nb_gguf_type {
    NB_GGUF_U8 = 0, NB_GGUF_I8 = 1, NB_GGUF_U16 = 2, NB_GGUF_I16 = 3,
    NB_GGUF_U32 = 4, NB_GGUF_I32 = 5, NB_GGUF_F32 = 6, NB_GGUF_BOOL = 7,
    NB_GGUF_STRING = 8, NB_GGUF_ARRAY = 9, NB_GGUF_U64 = 10, NB_GGUF_I64 = 11,
    NB_GGUF_F64 = 12, NB_GGUF_TYPE_COUNT
} nb_gguf_type;

#define NB_GGUF_DEFAULT_ALIGNMENT 32

typedef struct nb_gguf nb_gguf;

/* One metadata value, as returned by nb_gguf_kv(). For arrays: arr_type and
 * n; numeric elements in `arr` (native, aligned), strings in `strs`/`lens`. */
typedef struct nb_gguf_value {
    nb_gguf_type type;
    union { uint64_t u; int64_t i; double f; bool b; } num; /* scalars, widened */
    const char *str;      /* NB_GGUF_STRING, NUL-terminated */
    uint64_t str_len;
    nb_gguf_type arr_type;
    uint64_t n;            /* array element count */
    const void *arr;       /* numeric arrays: n elements of arr_type */
    const char *const *strs; /* string arrays */
    const uint64_t *lens;
} nb_gguf_value;

nb_status nb_gguf_open(const char *path, nb_gguf **out) __attribute__((warn_unused_result));
/* Parses a buffer the caller keeps alive (fuzzing, embedded files). */
nb_status nb_gguf_open_mem(const void *data, size_t size, const char *name, nb_gguf **out)
    __attribute__((warn_unused_result));
void nb_gguf_close(nb_gguf *g);

const char *nb_gguf_path(const nb_gguf *g);
uint32_t nb_gguf_version(const nb_gguf *g);
uint32_t nb_gguf_alignment(const nb_gguf *g);
uint64_t nb_gguf_data_offset(const nb_gguf *g); /* byte offset of the data section */
uint64_t nb_gguf_file_size(const nb_gguf *g);
const uint8_t *nb_gguf_file_data(const nb_gguf *g);
/* nb_map_release on the file mapping (nothing for a buffer from nb_gguf_open_mem). */
void nb_gguf_release(const nb_gguf *g, const void *p, size_t n);

/* Metadata */
int64_t nb_gguf_n_kv(const nb_gguf *g);
const char *nb_gguf_key(const nb_gguf *g, int64_t i);
const nb_gguf_value *nb_gguf_kv(const nb_gguf *g, int64_t i);
/* NULL when absent. */
const nb_gguf_value *nb_gguf_find(const nb_gguf *g, const char *key);

/* Typed getters: NB_ERR_NOT_FOUND when absent (message names the key),
 * NB_ERR_FORMAT when the stored type does not convert (message names key,
 * stored type and wanted type), NB_ERR_RANGE when the value does not fit. */
nb_status nb_gguf_get_int(const nb_gguf *g, const char *key, int64_t *out); /* any integer type */
nb_status nb_gguf_get_u32(const nb_gguf *g, const char *key, uint32_t *out);
nb_status nb_gguf_get_float(const nb_gguf *g, const char *key, double *out); /* f32, f64 or integer */
nb_status nb_gguf_get_bool(const nb_gguf *g, const char *key, bool *out);
nb_status nb_gguf_get_str(const nb_gguf *g, const char *key, const char **out);
/* Array of the given element type; `n` receives the count. */
nb_status nb_gguf_get_arr(const nb_gguf *g, const char *key, nb_gguf_type elem, const nb_gguf_value **out);
/* Like the getters above but a missing key yields `def` and NB_OK. */
nb_status nb_gguf_get_int_or(const nb_gguf *g, const char *key, int64_t def, int64_t *out);
nb_status nb_gguf_get_float_or(const nb_gguf *g, const char *key, double def, double *out);
nb_status nb_gguf_get_bool_or(const nb_gguf *g, const char *key, bool def, bool *out);

const char *nb_gguf_type_name(nb_gguf_type t);

/* Tensors (data points into the mapping) */
int64_t nb_gguf_n_tensors(const nb_gguf *g);
const nb_tensor *nb_gguf_tensor(const nb_gguf *g, int64_t i);
const nb_tensor *nb_gguf_find_tensor(const nb_gguf *g, const char *name); /* NULL if absent */

/* ---- writer ---------------------------------------------------------------
 * Collects metadata and tensors in memory (tensor data is copied, or
 * borrowed with nb_gguf_writer_add_tensor_ref until write), then writes a
 * v3 file with the given alignment. Keys keep insertion order; setting an
 * existing key replaces its value in place. */
typedef struct nb_gguf_writer nb_gguf_writer;

nb_status nb_gguf_writer_create(nb_gguf_writer **out) __attribute__((warn_unused_result));
void nb_gguf_writer_free(nb_gguf_writer *w);
nb_status nb_gguf_set_u32(nb_gguf_writer *w, const char *key, uint32_t v);
nb_status nb_gguf_set_i32(nb_gguf_writer *w, const char *key, int32_t v);
nb_status nb_gguf_set_u64(nb_gguf_writer *w, const char *key, uint64_t v);
nb_status nb_gguf_set_f32(nb_gguf_writer *w, const char *key, float v);
nb_status nb_gguf_set_bool(nb_gguf_writer *w, const char *key, bool v);
nb_status nb_gguf_set_str(nb_gguf_writer *w, const char *key, const char *v);
/* Numeric array: n elements of `elem` from `data` (native layout). */
nb_status nb_gguf_set_arr(nb_gguf_writer *w, const char *key, nb_gguf_type elem, const void *data, uint64_t n);
nb_status nb_gguf_set_arr_str(nb_gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens, uint64_t n);
/* Copies every key of `src` (except those starting with `skip_prefix`, if not NULL). */
nb_status nb_gguf_copy_kv(nb_gguf_writer *w, const nb_gguf *src, const char *skip_prefix);
/* ne in ggml order; data holds the tensor's bytes (row_bytes(ne[0]) * rows). */
nb_status nb_gguf_writer_add_tensor(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                    const int64_t *ne, const void *data);
/* Same, but the bytes are only read during nb_gguf_writer_write (caller keeps them alive). */
nb_status nb_gguf_writer_add_tensor_ref(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                        const int64_t *ne, const void *data);
nb_status nb_gguf_writer_write(nb_gguf_writer *w, const char *path) __attribute__((warn_unused_result));

/* ---- writer additions (owner: synth; src/formats/gguf_write.c) -----------
 * nb_gguf_set_value sets a key to any value type the reader returns (every
 * scalar type, strings, arrays of numbers/bools/strings; nested arrays are
 * refused with NB_ERR_UNSUPPORTED). nb_gguf_writer_add_tensor_fn streams a
 * tensor: `fill` is called once during nb_gguf_writer_write with a scratch
 * buffer of exactly the tensor's byte size, so a file far larger than memory
 * can be written one tensor at a time. nb_gguf_writer_write writes to a
 * unique temporary name next to `path` and renames it into place, so
 * concurrent writers of the same path never expose a partial file. */
typedef nb_status (*nb_gguf_fill_fn)(void *ctx, const char *name, void *buf, uint64_t nbytes);
nb_status nb_gguf_set_value(nb_gguf_writer *w, const char *key, const nb_gguf_value *v);
nb_status nb_gguf_writer_add_tensor_fn(nb_gguf_writer *w, const char *name, nb_dtype type, int n_dims,
                                       const int64_t *ne, nb_gguf_fill_fn fill, void *ctx);

#endif
