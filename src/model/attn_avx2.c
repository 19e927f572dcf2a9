/* AVX2 + FMA + F16C paged attention (see attn.h): the same computation as
 * nb_attn_ref, eight head_dim lanes at a time (dot products summed in a
 * different order, so results differ from the reference by rounding only).
 * head_dim not a multiple of 8 falls back to the reference. */
#include "model/attn.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* Eight elements of a row, as floats. */
static inline __m256 load8(nb_kv_type t, const uint8_t *row, int32_t j, const float *lut) {
    switch (t) {
    case NB_KVT_F32: return _mm256_loadu_ps((const float *)(const void *)row + j);
    case NB_KVT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)j)));
    case NB_KVT_BF16: {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)j)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    case NB_KVT_INT8: {
        long long x;
        memcpy(&x, row + j, 8);
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(x)));
    }
    case NB_KVT_FP8: {
        long long x;
        memcpy(&x, row + j, 8);
        return _mm256_i32gather_ps(lut, _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(x)), 4);
    }
    }
    return _mm256_setzero_ps();
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void attn_avx2_one(const nb_attn_head *a) {
    const nb_kv_pool *kv = a->kv;
    int32_t hd = kv->head_dim, bs = kv->block_size;
    if (hd % 8 != 0 || hd > 512) {
        nb_attn_ref(a); /* a is one head here */
        return;
    }
    const float *lut = nb_attn_fp8_table();
    nb_kv_type t = kv->type;
    size_t head_off = (size_t)a->kvh * (size_t)hd * (size_t)kv->elem, row = (size_t)kv->kv_dim * (size_t)kv->elem;
    float mx = -INFINITY;
    for (int32_t i = 0; i < a->n_pos; i++) {
        int64_t idx = nb_kv_index(kv, a->layer, a->blocks[i / bs], i % bs);
        const uint8_t *k = kv->k + (size_t)idx * row + head_off;
        __m256 acc = _mm256_setzero_ps();
        for (int32_t j = 0; j < hd; j += 8) acc = _mm256_fmadd_ps(load8(t, k, j, lut), _mm256_loadu_ps(a->q + j), acc);
        float d = hsum(acc);
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
    __m256 o[64];
    int32_t nv = hd / 8;
    for (int32_t j = 0; j < nv; j++) o[j] = _mm256_setzero_ps();
    for (int32_t i = 0; i < a->n_pos; i++) {
        int64_t idx = nb_kv_index(kv, a->layer, a->blocks[i / bs], i % bs);
        const uint8_t *v = kv->v + (size_t)idx * row + head_off;
        float w = a->scores[i] * inv;
        if (kv->vs) w *= kv->vs[idx * kv->n_head_kv + a->kvh];
        __m256 wv = _mm256_set1_ps(w);
        for (int32_t j = 0; j < nv; j++) o[j] = _mm256_fmadd_ps(wv, load8(t, v, 8 * j, lut), o[j]);
    }
    for (int32_t j = 0; j < nv; j++) _mm256_storeu_ps(a->out + 8 * j, o[j]);
}

static void attn_avx2(const nb_attn_head *a) { nb_attn_for_each_head(a, attn_avx2_one); }

nb_attn_fn nb_attn_avx2(void) { return attn_avx2; }
