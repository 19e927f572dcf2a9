/* libFuzzer target for the safetensors reader and the quantized-HF loaders:
 *   1. the whole input as a .safetensors file: parse with
 *      nb_safetensors_open_mem, view every tensor the way a loader would
 *      (name, dtype, ggml-order shape, first and last data byte), close;
 *   2. the input split as u32 L | L bytes of config.json | a .safetensors
 *      file: parse the config (quantization_config included) and, when it
 *      declares a quantization, load the layers' linear modules through
 *      nb_hfq_load_linear (every layout's tensor checks and unpackers) with
 *      the sizes the config implies (capped so one input stays fast). */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_quant.h"
#include "formats/hfconfig.h"
#include "formats/safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void views(const uint8_t *data, size_t size) {
    nb_safetensors *st;
    if (nb_safetensors_open_mem(data, size, "fuzz.safetensors", &st) != NB_OK) return;
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
}

static void quantized(const uint8_t *data, size_t size) {
    if (size < 4) return;
    uint32_t L;
    memcpy(&L, data, 4);
    if ((size_t)L > size - 4) return;
    nb_hf_config c;
    if (nb_hfconfig_parse((const char *)data + 4, L, "fuzz/config.json", &c) != NB_OK) return;
    nb_safetensors *st;
    if (c.quant.method != NB_HFQ_NONE &&
        nb_safetensors_open_mem(data + 4 + L, size - 4 - L, "fuzz.safetensors", &st) == NB_OK) {
        const nb_arch_desc *hp = &c.hp;
        int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
        static const char *const mods[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.down_proj"};
        int64_t dims[4][2] = {{E, Q}, {E, KV}, {Q, E}, {hp->n_ff, E}};
        for (int l = 0; l < hp->n_layer && l < 2; l++)
            for (int m = 0; m < 4; m++) {
                int64_t K = dims[m][0], R = dims[m][1];
                if (K * R > (1 << 20)) continue;
                char module[96];
                snprintf(module, sizeof module, "model.layers.%d.%s", l, mods[m]);
                nb_tensor out;
                void *owned = NULL;
                int32_t *perm = NULL;
                if (nb_hfq_load_linear(st, &c.quant, module, "w", K, R, &out, &owned, &perm, NULL, NULL) == NB_OK &&
                    out.nbytes)
                    sink += ((const uint8_t *)out.data)[out.nbytes - 1] + (perm ? (uint64_t)perm[K - 1] : 0);
                free(owned);
                free(perm);
            }
        for (int i = 0; i < 4; i++) sink += nb_hfquant_ignored(&c.quant, mods[i]);
        nb_safetensors_close(st);
    }
    nb_hfconfig_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    views(data, size);
    quantized(data, size);
    return 0;
}
