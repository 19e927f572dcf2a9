/* A tensor as stored in a model file: a view, the file (or its loader) owns
 * the bytes. Shapes use ggml's order: ne[0] is the fastest-varying axis (the
 * row length, i.e. the input dimension of a weight matrix), ne[1] the number
 * of rows (output dimension). A PyTorch [out, in] weight has ne = {in, out}. */
#ifndef NB_FORMATS_TENSOR_H
#define NB_FORMATS_TENSOR_H

#include "base/dtype.h"
#include "base/status.h"

#define NB_MAX_DIMS 4

typedef struct nb_tensor {
    const char *name;
    nb_dtype type;
    int n_dims;
    int64_t ne[NB_MAX_DIMS]; /* unused dims are 1 */
    const void *data;        /* ne[0]*...*ne[3] elements, rows contiguous */
    uint64_t nbytes;
    /* NULL, or ne[0] input indices: stored input j multiplies activation
     * in_perm[j] (GPTQ act-order groups made contiguous at load; nb_matmul
     * gathers the activations). */
    const int32_t *in_perm;
} nb_tensor;

static inline int64_t nb_tensor_nelem(const nb_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}
static inline int64_t nb_tensor_rows(const nb_tensor *t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

#endif
