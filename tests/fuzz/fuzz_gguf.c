/* libFuzzer target for the GGUF reader: parse the input with
 * nb_gguf_open_mem, then touch every metadata value and tensor the way a
 * loader would (keys, strings, array elements, tensor bytes), then close.
 * A crash, sanitizer report or leak here is a reader bug. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/gguf.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_gguf *g;
    if (nb_gguf_open_mem(data, size, "fuzz.gguf", &g) != NB_OK) return 0;
    uint64_t acc = nb_gguf_version(g) + nb_gguf_alignment(g) + nb_gguf_data_offset(g);
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++) {
        const char *key = nb_gguf_key(g, i);
        const nb_gguf_value *v = nb_gguf_kv(g, i);
        acc += strlen(key) + (uint64_t)v->type;
        if (nb_gguf_find(g, key) == NULL) __builtin_trap(); /* every listed key is findable */
        if (v->type == NB_GGUF_STRING) acc += strlen(v->str) + v->str_len;
        if (v->type == NB_GGUF_ARRAY) {
            for (uint64_t j = 0; j < v->n; j++) {
                if (v->arr_type == NB_GGUF_STRING) acc += v->lens[j] + (uint8_t)v->strs[j][v->lens[j]];
                else if (v->arr && v->arr_type != NB_GGUF_ARRAY) acc += ((const uint8_t *)v->arr)[j];
            }
        }
        int64_t iv;
        double fv;
        const char *sv;
        (void)nb_gguf_get_int(g, key, &iv);
        (void)nb_gguf_get_float(g, key, &fv);
        (void)nb_gguf_get_str(g, key, &sv);
    }
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        const nb_tensor *t = nb_gguf_tensor(g, i);
        acc += strlen(t->name) + (uint64_t)t->type + (uint64_t)nb_tensor_nelem(t);
        if (t->nbytes) { /* first and last byte must be inside the buffer */
            acc += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
            if ((const uint8_t *)t->data < data || (const uint8_t *)t->data + t->nbytes > data + size) __builtin_trap();
        }
        if (nb_gguf_find_tensor(g, t->name) == NULL) __builtin_trap();
    }
    sink = acc;
    nb_gguf_close(g);
    return 0;
}
