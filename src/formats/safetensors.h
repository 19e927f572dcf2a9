/* safetensors reader (single file, or shards listed by a
 * model.safetensors.index.json) and writer.
 *
 * File layout (little-endian):
 *   u64 N | N bytes of UTF-8 JSON (an object, may be padded with spaces)
 *   | data buffer (the rest of the file)
 *   JSON: { "__metadata__": {string: string, ...}          (optional)
 *           "<tensor name>": { "dtype": "F32" | "F16" | "BF16" | ...,
 *                              "shape": [d0, d1, ...]      (row-major, PyTorch order),
 *                              "data_offsets": [begin, end] (relative to the buffer) },
 *           ... }
 *   The tensors, sorted by offset, tile the buffer exactly: the first begins
 *   at 0, each begins where the previous ends, the last ends at the end of
 *   the file. end - begin = product(shape) x element size.
 * Shard index (model.safetensors.index.json):
 *   { "metadata": { "total_size": ... }, "weight_map": { "<tensor>": "<shard file>", ... } }
 *   shard file names are plain names in the index's directory.
 *
 * nb_safetensors_open validates all of the above before returning (header
 * length against the file and NB_ST_MAX_HEADER, JSON, dtype names, shapes
 * non-negative with an overflow-checked size, offsets inside the buffer,
 * tiling, metadata values are strings, no duplicate names); errors name the
 * file, the tensor, the field and what was expected. Tensor data stays in the
 * read-only mapping (its address is only as aligned as the writer made it:
 * this module's writer aligns every tensor to its element size; other writers' data
 * may be unaligned, so read elements with memcpy or copy first).
 *
 * Not thread-safe for concurrent open/close of the same handle; reads of an
 * opened handle are. */
#ifndef NB_FORMATS_SAFETENSORS_H
#define NB_FORMATS_SAFETENSORS_H

#include "formats/tensor.h"

#define NB_ST_MAX_HEADER (100u << 20)     /* bytes of JSON header accepted */
#define NB_ST_MAX_INDEX (64u << 20)       /* bytes of model.safetensors.index.json */
#define NB_ST_MAX_DIMS 8
#define NB_ST_MAX_SHARDS 4096

typedef struct nb_st_tensor {
    const char *name;
    const char *dtype_name;     /* as in the file: "F32", "F8_E4M3", ... */
    bool has_type;              /* false when no nb_dtype matches (U8, U16, U32, U64, BOOL, F8_*, F4, F6_*) */
    nb_dtype type;              /* valid when has_type: F32 F16 BF16 F64 I8 I16 I32 I64 */
    uint32_t elem_bits;         /* bits per element (4, 6, 8, 16, 32, 64) */
    int n_dims;                 /* 0 = scalar */
    int64_t shape[NB_ST_MAX_DIMS]; /* row-major (PyTorch order), as in the file */
    int64_t nelem;
    uint64_t offset;            /* begin, relative to the data buffer */
    uint64_t nbytes;            /* end - begin */
    const void *data;           /* into the mapping of its shard */
    int shard;                  /* index of the file it lives in (0 for single files) */
} nb_st_tensor;

typedef struct nb_safetensors nb_safetensors;

/* Opens one .safetensors file (mapped read-only). */
nb_status nb_safetensors_open(const char *path, nb_safetensors **out) __attribute__((warn_unused_result));
/* Parses a buffer the caller keeps alive for the handle's lifetime (fuzzing). */
nb_status nb_safetensors_open_mem(const void *data, size_t size, const char *name, nb_safetensors **out)
    __attribute__((warn_unused_result));
/* Opens every shard named by a model.safetensors.index.json once; every
 * weight_map entry must exist in the shard it names, names are unique across
 * shards. Tensors of the shards not in weight_map are kept too. */
nb_status nb_safetensors_open_index(const char *index_path, nb_safetensors **out) __attribute__((warn_unused_result));
void nb_safetensors_close(nb_safetensors *st);
/* nb_map_release on the shards' file mappings (nothing for nb_safetensors_open_mem buffers). */
void nb_safetensors_release(const nb_safetensors *st, const void *p, size_t n);

int64_t nb_safetensors_n_tensors(const nb_safetensors *st);
/* Tensors sorted by name. */
const nb_st_tensor *nb_safetensors_tensor(const nb_safetensors *st, int64_t i);
const nb_st_tensor *nb_safetensors_find(const nb_safetensors *st, const char *name); /* NULL if absent */
int nb_safetensors_n_shards(const nb_safetensors *st);
const char *nb_safetensors_shard_path(const nb_safetensors *st, int shard);

/* __metadata__ (of the first shard for sharded checkpoints). */
int64_t nb_safetensors_n_meta(const nb_safetensors *st);
const char *nb_safetensors_meta_key(const nb_safetensors *st, int64_t i);
const char *nb_safetensors_meta_value(const nb_safetensors *st, int64_t i);
const char *nb_safetensors_meta_find(const nb_safetensors *st, const char *key); /* NULL if absent */

/* dtype name facts: bits per element (0 when unknown) and the nb_dtype if any. */
uint32_t nb_st_dtype_bits(const char *dtype_name);
bool nb_st_dtype_to_nb(const char *dtype_name, nb_dtype *out);
const char *nb_st_dtype_from_nb(nb_dtype t); /* NULL when safetensors has no name for it */

/* Fills a GGUF-order view (ne reversed from the row-major shape) of a tensor
 * whose type maps to an nb_dtype; NB_ERR_UNSUPPORTED (naming the tensor and
 * dtype) otherwise, NB_ERR_RANGE for more than NB_MAX_DIMS dims. */
nb_status nb_st_tensor_view(const nb_st_tensor *t, const char *name, nb_tensor *out) __attribute__((warn_unused_result));

/* ---- writer ---------------------------------------------------------------
 * Writes to path.tmp, then renames. The header is padded with spaces so the
 * buffer starts at a multiple of 8; the data is laid out by element size,
 * largest first (stable: the given order otherwise), so every tensor is
 * aligned to its element size without gaps (the format forbids gaps). The
 * header lists the tensors in the given order; metadata keys are unique.
 * nbytes must equal product(shape) x the dtype's element size. */
typedef struct nb_st_write_tensor {
    const char *name;
    const char *dtype;          /* safetensors dtype name */
    int n_dims;
    int64_t shape[NB_ST_MAX_DIMS]; /* row-major */
    const void *data;
    uint64_t nbytes;
} nb_st_write_tensor;

typedef struct nb_st_meta {
    const char *key;
    const char *value;
} nb_st_meta;

nb_status nb_safetensors_write(const char *path, const nb_st_write_tensor *tensors, size_t n,
                               const nb_st_meta *meta, size_t n_meta) __attribute__((warn_unused_result));

#endif
