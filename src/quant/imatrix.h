/* Importance matrices, llama.cpp's way (`nibble imatrix`, `nibble quantize
 * --imatrix`).
 *
 * An importance matrix holds, for every linear weight of the model (by its
 * GGUF name, e.g. "blk.3.ffn_down.weight"), the mean over calibration tokens
 * of x_j^2 for each input column j: sum_t x_tj^2 / n_tokens. llama-quantize
 * passes those values as `quant_weights` to the K-quant and Q4_0/Q4_1/
 * Q5_0/Q5_1 quantizers (nb_quant_weighted, quant_ggml.c).
 *
 * Two file formats, both read and written (docs/quantize.md):
 *   GGUF (llama-imatrix's default since 2025): general.type = "imatrix",
 *     imatrix.datasets (string array), imatrix.chunk_count, imatrix.chunk_size
 *     (u32); per weight two F32 tensors "<name>.in_sum2" [n] (sum of x^2)
 *     and "<name>.counts" [1] (tokens); value = in_sum2 / counts (a count
 *     of 0 gives 1 for every column, as llama-quantize).
 *   legacy binary (.dat, little-endian): i32 n_entries; per entry: i32
 *     name length, the name bytes (no NUL), i32 ncall, i32 nval, nval f32
 *     values = mean * ncall; then optionally i32 last_call (chunks), i32
 *     dataset-name length and its bytes. The reader divides by ncall when
 *     ncall > 0.
 * Loading detects the format from the GGUF magic. Every count, length and
 * size is bounds-checked; NaN/Inf or negative values are refused.
 *
 * Thread safety: objects are independent; no global state. */
#ifndef NB_QUANT_IMATRIX_H
#define NB_QUANT_IMATRIX_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "formats/source.h"

#define NB_IMATRIX_MAX_ENTRIES (1 << 20)
#define NB_IMATRIX_MAX_NAME 1024
#define NB_IMATRIX_MAX_VALUES (1 << 24)

typedef struct nb_imatrix_entry {
    char *name;
    int64_t n;        /* columns (the weight's row length) */
    double *sum2;     /* [n] sum over tokens of x^2 */
    double count;     /* tokens summed */
    int32_t ncall;    /* legacy: calls (chunks) */
} nb_imatrix_entry;

typedef struct nb_imatrix {
    int64_t n;
    nb_imatrix_entry *e;
    char dataset[512];   /* text file it was computed on (first dataset) */
    int32_t chunks, chunk_size;
    bool legacy;         /* read from a .dat file */
} nb_imatrix;

/* Reads either format (detected). */
nb_status nb_imatrix_load(const char *path, nb_imatrix *out) __attribute__((warn_unused_result));
/* Writes legacy .dat or GGUF, atomically (temporary name + rename). */
nb_status nb_imatrix_save_dat(const nb_imatrix *m, const char *path) __attribute__((warn_unused_result));
nb_status nb_imatrix_save_gguf(const nb_imatrix *m, const char *path) __attribute__((warn_unused_result));
void nb_imatrix_free(nb_imatrix *m);

/* Adds an entry (copies name); returns it, NULL when out of memory. */
nb_imatrix_entry *nb_imatrix_add(nb_imatrix *m, const char *name, int64_t n);
const nb_imatrix_entry *nb_imatrix_find(const nb_imatrix *m, const char *name);
/* The importance values llama-quantize uses: sum2 / count (1 when count == 0),
 * as floats into out[e->n]. */
void nb_imatrix_values(const nb_imatrix_entry *e, float *out);

/* Adds n_tok rows of dim activations to e (sum of squares per column and
 * the token count), as llama-imatrix's collector does. dim must be e->n. */
void nb_imatrix_accumulate(nb_imatrix_entry *e, const float *x, int64_t n_tok, int64_t dim);

/* Quantizes ONE row of n weights of type t with importance values qw[n]
 * the way llama-quantize does with an imatrix (quantize_row_*_impl):
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Returns false (and
 * writes nothing) for any other type, where llama.cpp ignores the
 * imatrix too (Q8_0) or nibble has no weighted path (its own formats):
 * the caller then uses the reference quantizer. (quant_ggml.c) */
bool nb_quant_row_weighted(nb_dtype t, const float *x, void *dst, int64_t n, const float *qw);

/* Row `row` of a 2-D tensor (F32, F16, BF16 or a registry format) as floats. */
void nb_imatrix_row_to_float(const nb_tensor *t, int64_t row, float *out);

/* Quantizes a whole tensor to `type` with the entry's importance values
 * (rows in parallel on pool, may be NULL). *handled is false, and nothing is
 * written, when `type` has no weighted path (the caller then uses RTN). */
nb_status nb_imatrix_convert(const nb_imatrix_entry *e, const nb_tensor *src, nb_dtype type, nb_pool *pool, void *dst,
                             uint64_t nbytes, double *rel_rms, bool *handled) __attribute__((warn_unused_result));

/* Refuses an imatrix made for another model: every entry must name a 2-D
 * tensor of `src` whose row length equals the entry's size, and at least one
 * must match. The message names the first offending entry. */
nb_status nb_imatrix_check(const nb_imatrix *m, const nb_source *src, const char *path)
    __attribute__((warn_unused_result));

#endif
