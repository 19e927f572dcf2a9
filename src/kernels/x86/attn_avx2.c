/* AVX2 + FMA + F16C flash attention (attn.h): the AVX-512 kernel's scheme
 * with 8 query rows per vector and sixteen registers. Per chunk of
 * NB_ATTN_KC keys, K and V are converted to f32 once; per block of 8 rows,
 * S^T = K Q^T in two passes of 8 keys (8 accumulators each), the causal mask
 * on diagonal chunks, the online softmax in lanes (probabilities kept in
 * scratch), then O^T = O^T * corr + V^T P four head_dim columns at a time. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"
#include "kernels/x86/vexp.h"

#define W 8

/* hd elements of a row of type t, times sc, into dst: one loop per type
 * (the switch outside, so the f32 copy is a plain load-multiply-store). */
static inline void row_f32(nb_kv_type t, const uint8_t *src, float sc, float *dst, int hd, const float *lut) {
    const __m256 s = _mm256_set1_ps(sc);
    const int hv = hd & ~7;
    switch (t) {
    case NB_KVT_F32:
        for (int j = 0; j < hv; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_loadu_ps((const float *)(const void *)src + j), s));
        break;
    case NB_KVT_F16:
        for (int j = 0; j < hv; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(
                                                        (const __m128i *)(const void *)(src + 2 * (size_t)j))), s));
        break;
    case NB_KVT_BF16:
        for (int j = 0; j < hv; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(
                                                        _mm256_cvtepu16_epi32(_mm_loadu_si128(
                                                            (const __m128i *)(const void *)(src + 2 * (size_t)j))),
                                                        16)),
                                                    s));
        break;
    case NB_KVT_INT8:
        for (int j = 0; j < hv; j += 8) {
            long long b;
            memcpy(&b, src + j, 8);
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b))), s));
        }
        break;
    default:
        for (int j = 0; j < hv; j += 8) {
            long long b;
            memcpy(&b, src + j, 8);
            _mm256_storeu_ps(dst + j,
                             _mm256_mul_ps(_mm256_i32gather_ps(lut, _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(b)), 4), s));
        }
        break;
    }
    for (int j = hv; j < hd; j++) dst[j] = nb_attn_elem(t, src, j) * sc;
}

static inline __attribute__((always_inline)) void tile8(const nb_attn_tile *t, const int HD) {
    attn_frame f;
    attn_frame_begin(t, HD ? HD : t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB;
    float *QT = f.QT, *OT = f.OT, *M = f.M, *L = f.L, *Kf = f.Kf, *Vf = f.Vf;
    const int32_t *PS = f.PS;
    float *P = f.extra; /* the probabilities of one block, KC x W */

    for (int32_t k0 = 0; k0 <= f.last; k0 += KC) {
        attn_frame_chunk(t, &f, k0, row_f32);
        for (int rb = 0; rb < RB; rb++) {
            const int32_t pmin = PS[rb * W], pmax = PS[rb * W + W - 1];
            if (pmax < k0) continue;
            const float *qt = QT + (size_t)rb * hd * W;
            float *ot = OT + (size_t)rb * hd * W;
            const bool diag = k0 + KC - 1 > pmin;
            const __m256i pv = _mm256_loadu_si256((const __m256i *)(const void *)(PS + rb * W));
            __m256 mx = _mm256_set1_ps(-INFINITY);
            for (int c0 = 0; c0 < KC; c0 += 8) {
                __m256 s[8];
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) s[c] = _mm256_setzero_ps();
                for (int j = 0; j < hd; j++) {
                    const __m256 qv = _mm256_loadu_ps(qt + j * W);
#pragma GCC unroll 8
                    for (int c = 0; c < 8; c++)
                        s[c] = _mm256_fmadd_ps(_mm256_broadcast_ss(Kf + (c0 + c) * hd + j), qv, s[c]);
                }
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    if (diag) { /* key k0 + c0 + c only for rows at >= it */
                        const __m256i ok = _mm256_cmpgt_epi32(_mm256_set1_epi32(k0 + c0 + c), pv);
                        s[c] = _mm256_blendv_ps(s[c], _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(ok));
                    }
                    mx = _mm256_max_ps(mx, s[c]);
                    _mm256_storeu_ps(P + (c0 + c) * W, s[c]);
                }
            }
            const __m256 mo = _mm256_loadu_ps(M + rb * W), mn = _mm256_max_ps(mo, mx);
            const __m256 corr = nb_exp8(_mm256_sub_ps(mo, mn));
            _mm256_storeu_ps(M + rb * W, mn);
            __m256 sum = _mm256_setzero_ps();
            for (int c = 0; c < KC; c++) {
                const __m256 e = nb_exp8(_mm256_sub_ps(_mm256_loadu_ps(P + c * W), mn));
                _mm256_storeu_ps(P + c * W, e);
                sum = _mm256_add_ps(sum, e);
            }
            _mm256_storeu_ps(L + rb * W, _mm256_fmadd_ps(_mm256_loadu_ps(L + rb * W), corr, sum));
            int j = 0;
            for (; j + 4 <= hd; j += 4) {
                __m256 o0 = _mm256_mul_ps(_mm256_loadu_ps(ot + (j + 0) * W), corr);
                __m256 o1 = _mm256_mul_ps(_mm256_loadu_ps(ot + (j + 1) * W), corr);
                __m256 o2 = _mm256_mul_ps(_mm256_loadu_ps(ot + (j + 2) * W), corr);
                __m256 o3 = _mm256_mul_ps(_mm256_loadu_ps(ot + (j + 3) * W), corr);
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) {
                    const __m256 pc = _mm256_loadu_ps(P + c * W);
                    const float *v = Vf + c * hd + j;
                    o0 = _mm256_fmadd_ps(_mm256_broadcast_ss(v + 0), pc, o0);
                    o1 = _mm256_fmadd_ps(_mm256_broadcast_ss(v + 1), pc, o1);
                    o2 = _mm256_fmadd_ps(_mm256_broadcast_ss(v + 2), pc, o2);
                    o3 = _mm256_fmadd_ps(_mm256_broadcast_ss(v + 3), pc, o3);
                }
                _mm256_storeu_ps(ot + (j + 0) * W, o0);
                _mm256_storeu_ps(ot + (j + 1) * W, o1);
                _mm256_storeu_ps(ot + (j + 2) * W, o2);
                _mm256_storeu_ps(ot + (j + 3) * W, o3);
            }
            for (; j < hd; j++) {
                __m256 o = _mm256_mul_ps(_mm256_loadu_ps(ot + j * W), corr);
                for (int c = 0; c < KC; c++)
                    o = _mm256_fmadd_ps(_mm256_broadcast_ss(Vf + c * hd + j), _mm256_loadu_ps(P + c * W), o);
                _mm256_storeu_ps(ot + j * W, o);
            }
        }
    }

    attn_frame_end(t, &f, W);
}

static void attn_avx2(const nb_attn_tile *t) {
    switch (t->kv->head_dim) {
    case 64: tile8(t, 64); return;
    case 128: tile8(t, 128); return;
    default: tile8(t, 0); return;
    }
}

nb_attn_fn nb_attn_avx2(void) { return attn_avx2; }
