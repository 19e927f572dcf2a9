/* libFuzzer target for the safetensors reader: parse the input with
 * nb_safetensors_open_mem, then view every tensor the way a loader would
 * (name, dtype, ggml-order shape, first and last data byte), then close. */
#include <stddef.h>
#include <stdint.h>

#include "formats/safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_safetensors *st;
    if (nb_safetensors_open_mem(data, size, "fuzz.safetensors", &st) != NB_OK) return 0;
    uint64_t acc = 0;
    for (int64_t i = 0; i < nb_safetensors_n_tensors(st); i++) {
        const nb_st_tensor *t = nb_safetensors_tensor(st, i);
        nb_tensor v;
        if (nb_st_tensor_view(t, "x", &v) == NB_OK && v.nbytes)
            acc += ((const uint8_t *)v.data)[0] + ((const uint8_t *)v.data)[v.nbytes - 1];
    }
    for (int64_t i = 0; i < nb_safetensors_n_meta(st); i++) acc += (uint8_t)nb_safetensors_meta_key(st, i)[0];
    sink = acc;
    nb_safetensors_close(st);
    return 0;
}
