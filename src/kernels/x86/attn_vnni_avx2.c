/* AVX-VNNI (256-bit vpdpbusd) int8-dot attention for int8 KV pools: the
 * AVX-512 kernel's scheme (attn_i8_impl.h) at 8 rows per vector, for CPUs
 * with AVX2 and AVX-VNNI but no AVX-512 (Intel Alder Lake and later client
 * cores; kernels/attn.h nb_attn_avx2_int8). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"

#define W 8

/* *acc += the u8 x s8 products of u and the four bytes at p (broadcast);
 * in asm for the same reason as dpbusd_bcast.h's ({vex}: the
 * AVX-VNNI encoding). */
static inline __attribute__((always_inline)) void dpbusd8(__m256i *acc, __m256i u, const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    const __m256i b = _mm256_set1_epi32(v);
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(*acc) : "x"(u), "x"(b));
}

/* The causal mask of 8 scores (rows rb*W.., keys k0..k0+7) and their max. */
static inline __attribute__((always_inline)) __m256 mask8(__m256 s[8], const int32_t *PS, int rb, int32_t k0) {
    if (k0 + 7 > PS[rb * W]) { /* the diagonal (or the last, short chunk): key p only for rows at >= p */
        const __m256i pv = _mm256_loadu_si256((const __m256i *)(const void *)(PS + rb * W));
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const __m256i out = _mm256_cmpgt_epi32(_mm256_set1_epi32(k0 + c), pv);
            s[c] = _mm256_blendv_ps(s[c], _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(out));
        }
    }
    __m256 mx = s[0];
#pragma GCC unroll 8
    for (int c = 1; c < 8; c++) mx = _mm256_max_ps(mx, s[c]);
    return mx;
}

#define IX_FV __m256
#define IX_IV __m256i
#define IX_LOADF _mm256_loadu_ps
#define IX_STOREF _mm256_storeu_ps
#define IX_LOADI(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define IX_STOREI(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define IX_SETF _mm256_set1_ps
#define IX_SETI _mm256_set1_epi32
#define IX_ZEROF _mm256_setzero_ps
#define IX_ZEROI _mm256_setzero_si256
#define IX_ADD _mm256_add_ps
#define IX_SUB _mm256_sub_ps
#define IX_MUL _mm256_mul_ps
#define IX_MAX _mm256_max_ps
#define IX_FMADD _mm256_fmadd_ps
#define IX_FMSUB _mm256_fmsub_ps
#define IX_ABS(v) _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define IX_CVTI2F _mm256_cvtepi32_ps
#define IX_CVTF2I _mm256_cvtps_epi32
#define IX_ADDI _mm256_add_epi32
#define IX_ORI _mm256_or_si256
#define IX_SLLI _mm256_slli_epi32
#define IX_ROUND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define IX_SCALE2(p, n) \
    _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))
#define IX_INV127(mx) \
    _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(127.0f), mx), _mm256_cmp_ps(mx, _mm256_setzero_ps(), _CMP_GT_OQ))
#define IX_OWN_MAX(mx, mn) _mm256_blendv_ps(mx, mn, _mm256_cmp_ps(mx, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ))
#define IX_ANY_GT(a, b) (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)) != 0)
#define IX_DPBUSD dpbusd8
#define IX_KG 8
#define IX_MASK mask8
#define IX_NC 4
#include "kernels/x86/attn_i8_impl.h"

/* int8 KV (with its scales) in tiles of more than 8 rows and a head size
 * that is a multiple of 16; anything else takes the AVX2 f32 kernel. */
static void attn_avx2_i8(const nb_attn_tile *t) {
    const nb_attn_kv *kv = t->kv;
    if (kv->type != NB_KVT_INT8 || !kv->ks || !kv->vs || kv->head_dim % 16 || t->nt * t->nq <= 8) {
        nb_attn_avx2()(t);
        return;
    }
    switch (kv->head_dim) {
    case 64: tile_i8(t, 64); return;
    case 128: tile_i8(t, 128); return;
    default: tile_i8(t, 0); return;
    }
}

nb_attn_fn nb_attn_avx2_int8(void) { return nb_cpu_get()->avxvnni ? attn_avx2_i8 : NULL; }
