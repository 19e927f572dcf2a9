/* AVX-512 paged attention for a GQA group (see attn.h): the query heads
 * sharing a KV head go together, so each K and V row is loaded (and, for
 * f16 / bf16 / int8 / fp8 pools, converted) once for the whole group instead
 * of once per head - the per-head kernel did one load per FMA. Scores are
 * the reference's (dot, times the row's scale, times `scale`); the output
 * accumulates four heads at a time in registers. head_dim 64 and 128 take
 * this path; other sizes use the AVX2 kernel head by head. Results differ
 * from nb_attn_ref by summation order only. */
#include "model/attn.h"

#include <immintrin.h>
#include <math.h>

/* Sixteen elements of a row, as floats. */
static inline __m512 load16(nb_kv_type t, const uint8_t *row, int32_t j, const float *lut) {
    switch (t) {
    case NB_KVT_F32: return _mm512_loadu_ps((const float *)(const void *)row + j);
    case NB_KVT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)));
    case NB_KVT_BF16: {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    case NB_KVT_INT8:
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + j))));
    case NB_KVT_FP8:
        return _mm512_i32gather_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + j))), lut,
                                   4);
    }
    return _mm512_setzero_ps();
}

/* NC = head_dim / 16, a constant after inlining. */
static inline __attribute__((always_inline)) void attn_group(const nb_attn_head *a, const int NC) {
    const nb_kv_pool *kv = a->kv;
    const int32_t hd = 16 * NC, bs = kv->block_size, n = a->n_pos;
    const int nq = a->nq > 1 ? a->nq : 1;
    const float *lut = nb_attn_fp8_table();
    const nb_kv_type t = kv->type;
    const size_t head_off = (size_t)a->kvh * (size_t)hd * (size_t)kv->elem, row = (size_t)kv->kv_dim * (size_t)kv->elem;
    float mx[NB_ATTN_MAX_GROUP], inv[NB_ATTN_MAX_GROUP];
    for (int h = 0; h < nq; h++) mx[h] = -INFINITY;
    for (int32_t p0 = 0; p0 < n; p0 += bs) {
        const int64_t base = nb_kv_index(kv, a->layer, a->blocks[p0 / bs], 0);
        const int32_t cnt = n - p0 < bs ? n - p0 : bs;
        for (int32_t s = 0; s < cnt; s++) {
            const uint8_t *k = kv->k + (size_t)(base + s) * row + head_off;
            __m512 kc[8];
            for (int c = 0; c < NC; c++) kc[c] = load16(t, k, 16 * c, lut);
            for (int h = 0; h < nq; h++) {
                __m512 acc = _mm512_mul_ps(kc[0], _mm512_loadu_ps(a->q + h * hd));
                for (int c = 1; c < NC; c++) acc = _mm512_fmadd_ps(kc[c], _mm512_loadu_ps(a->q + h * hd + 16 * c), acc);
                float d = _mm512_reduce_add_ps(acc);
                if (kv->ks) d *= kv->ks[(base + s) * kv->n_head_kv + a->kvh];
                d *= a->scale;
                a->scores[(int64_t)h * n + p0 + s] = d;
                if (d > mx[h]) mx[h] = d;
            }
        }
    }
    for (int h = 0; h < nq; h++) {
        float *sc = a->scores + (int64_t)h * n, sum = 0;
        for (int32_t i = 0; i < n; i++) {
            sc[i] = expf(sc[i] - mx[h]);
            sum += sc[i];
        }
        inv[h] = 1.0f / sum;
    }
    for (int h0 = 0; h0 < nq; h0 += 4) { /* four heads' outputs in registers */
        const int m = nq - h0 < 4 ? nq - h0 : 4;
        __m512 o[4][8];
        for (int hh = 0; hh < 4; hh++)
            for (int c = 0; c < NC; c++) o[hh][c] = _mm512_setzero_ps();
        for (int32_t p0 = 0; p0 < n; p0 += bs) {
            const int64_t base = nb_kv_index(kv, a->layer, a->blocks[p0 / bs], 0);
            const int32_t cnt = n - p0 < bs ? n - p0 : bs;
            for (int32_t s = 0; s < cnt; s++) {
                const uint8_t *v = kv->v + (size_t)(base + s) * row + head_off;
                __m512 vc[8];
                for (int c = 0; c < NC; c++) vc[c] = load16(t, v, 16 * c, lut);
                const float vs = kv->vs ? kv->vs[(base + s) * kv->n_head_kv + a->kvh] : 1.0f;
#pragma GCC unroll 4
                for (int hh = 0; hh < 4; hh++) {
                    if (hh >= m) break;
                    float w = a->scores[(int64_t)(h0 + hh) * n + p0 + s] * inv[h0 + hh];
                    if (kv->vs) w *= vs;
                    const __m512 wv = _mm512_set1_ps(w);
                    for (int c = 0; c < NC; c++) o[hh][c] = _mm512_fmadd_ps(wv, vc[c], o[hh][c]);
                }
            }
        }
        for (int hh = 0; hh < m; hh++)
            for (int c = 0; c < NC; c++) _mm512_storeu_ps(a->out + (int64_t)(h0 + hh) * hd + 16 * c, o[hh][c]);
    }
}

static void attn_avx512(const nb_attn_head *a) {
    switch (a->kv->head_dim) {
    case 64: attn_group(a, 4); return;
    case 128: attn_group(a, 8); return;
    default: {
        nb_attn_fn f = nb_attn_avx2();
        (f ? f : nb_attn_ref)(a);
    }
    }
}

nb_attn_fn nb_attn_avx512(void) { return attn_avx512; }
