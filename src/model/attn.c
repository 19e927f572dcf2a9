/* The scalar paged-attention kernel (the definition; see attn.h) and the
 * kernel choice. */
#include "model/attn.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/half.h"

static float fp8_lut[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;
static void fp8_fill(void) {
    for (int i = 0; i < 256; i++) fp8_lut[i] = nb_fp8_e4m3_to_fp32((uint8_t)i);
}
const float *nb_attn_fp8_table(void) {
    pthread_once(&fp8_once, fp8_fill);
    return fp8_lut;
}

/* Element i of a row of the pool's type. */
static float elem(const nb_kv_pool *kv, const uint8_t *row, int32_t i) {
    switch (kv->type) {
    case NB_KVT_F32: { float f; memcpy(&f, row + 4 * (size_t)i, 4); return f; }
    case NB_KVT_F16: { uint16_t h; memcpy(&h, row + 2 * (size_t)i, 2); return nb_fp16_to_fp32(h); }
    case NB_KVT_BF16: { uint16_t h; memcpy(&h, row + 2 * (size_t)i, 2); return nb_bf16_to_fp32(h); }
    case NB_KVT_INT8: return (float)(int8_t)row[i];
    case NB_KVT_FP8: return nb_fp8_e4m3_to_fp32(row[i]);
    }
    return 0;
}

static void attn_ref_one(const nb_attn_head *a) {
    const nb_kv_pool *kv = a->kv;
    int32_t hd = kv->head_dim, bs = kv->block_size;
    float mx = -INFINITY;
    for (int32_t i = 0; i < a->n_pos; i++) {
        int64_t idx = nb_kv_index(kv, a->layer, a->blocks[i / bs], i % bs);
        const uint8_t *k = kv->k + (idx * kv->kv_dim + (int64_t)a->kvh * hd) * kv->elem;
        float d = 0;
        for (int32_t j = 0; j < hd; j++) d += elem(kv, k, j) * a->q[j];
        if (kv->ks) d *= kv->ks[idx * kv->n_head_kv + a->kvh];
        d *= a->scale;
        a->scores[i] = d;
        if (d > mx) mx = d;
    }
    float sum = 0;
    for (int32_t i = 0; i < a->n_pos; i++) {
        a->scores[i] = expf(a->scores[i] - mx);
        sum += a->scores[i];
    }
    float inv = 1.0f / sum;
    memset(a->out, 0, (size_t)hd * sizeof *a->out);
    for (int32_t i = 0; i < a->n_pos; i++) {
        int64_t idx = nb_kv_index(kv, a->layer, a->blocks[i / bs], i % bs);
        const uint8_t *v = kv->v + (idx * kv->kv_dim + (int64_t)a->kvh * hd) * kv->elem;
        float w = a->scores[i] * inv;
        if (kv->vs) w *= kv->vs[idx * kv->n_head_kv + a->kvh];
        for (int32_t j = 0; j < hd; j++) a->out[j] += w * elem(kv, v, j);
    }
}

void nb_attn_for_each_head(const nb_attn_head *a, void (*one)(const nb_attn_head *)) {
    int nq = a->nq > 1 ? a->nq : 1, hd = a->kv->head_dim;
    for (int h = 0; h < nq; h++) {
        nb_attn_head x = *a;
        x.nq = 1;
        x.q = a->q + (int64_t)h * hd;
        x.out = a->out + (int64_t)h * hd;
        x.scores = a->scores + (int64_t)h * a->n_pos;
        one(&x);
    }
}

void nb_attn_ref(const nb_attn_head *a) { nb_attn_for_each_head(a, attn_ref_one); }

nb_attn_fn nb_attn_get(nb_isa max_isa, const char **name) {
    nb_attn_fn f = NULL;
    nb_attn_fp8_table();
    if (max_isa >= NB_ISA_AVX512 && nb_cpu_isa() >= NB_ISA_AVX512 && (f = nb_attn_avx512())) {
        if (name) *name = "avx512";
        return f;
    }
    if (max_isa >= NB_ISA_AVX2 && (f = nb_attn_avx2())) {
        if (name) *name = "avx2";
        return f;
    }
    if (name) *name = "scalar";
    return nb_attn_ref;
}
