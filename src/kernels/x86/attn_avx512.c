/* AVX-512 flash attention (attn.h): 16 query rows per vector. Per chunk of
 * NB_ATTN_KC keys: K and V converted to f32 once (scales folded in), then
 * for each block of 16 rows S^T = K Q^T (16 accumulators, one per key, each
 * a vector over the rows; K elements broadcast), the causal mask on the
 * diagonal chunks only, the online softmax update in lanes, and
 * O^T = O^T * corr + V^T P (V elements broadcast against the probabilities).
 * head_dim 64 and 128 are compiled as constants; other sizes take the same
 * code with a run-time head_dim. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"

#define W 16

/* e^x per lane (Cephes' expf polynomial, |rel err| ~ 2 ulp); lanes below
 * -87.3 (and -inf, the masked scores) give exactly 0. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    const __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

/* hd elements of a row of type t, times sc, into dst: one loop per type
 * (the switch outside, so the f32 copy is a plain load-multiply-store). */
static inline void row_f32(nb_kv_type t, const uint8_t *src, float sc, float *dst, int hd, const float *lut) {
    const __m512 s = _mm512_set1_ps(sc);
    const int hv = hd & ~15;
    switch (t) {
    case NB_KVT_F32:
        for (int j = 0; j < hv; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_loadu_ps((const float *)(const void *)src + j), s));
        break;
    case NB_KVT_F16:
        for (int j = 0; j < hv; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
                                                        (const __m256i *)(const void *)(src + 2 * (size_t)j))), s));
        break;
    case NB_KVT_BF16:
        for (int j = 0; j < hv; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(
                                                        _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                            (const __m256i *)(const void *)(src + 2 * (size_t)j))),
                                                        16)),
                                                    s));
        break;
    case NB_KVT_INT8:
        for (int j = 0; j < hv; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                        _mm_loadu_si128((const __m128i *)(const void *)(src + j)))),
                                                    s));
        break;
    default:
        for (int j = 0; j < hv; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_i32gather_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                                            (const __m128i *)(const void *)(src + j))),
                                                                        lut, 4),
                                                    s));
        break;
    }
    for (int j = hv; j < hd; j++) dst[j] = nb_attn_elem(t, src, j) * sc;
}

static inline __attribute__((always_inline)) void tile16(const nb_attn_tile *t, const int HD) {
    attn_frame f;
    attn_frame_begin(t, HD ? HD : t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB;
    float *QT = f.QT, *OT = f.OT, *M = f.M, *L = f.L, *Kf = f.Kf, *Vf = f.Vf;
    const int32_t *PS = f.PS;

    for (int32_t k0 = 0; k0 <= f.last; k0 += KC) {
        attn_frame_chunk(t, &f, k0, row_f32);
        for (int rb = 0; rb < RB; rb++) {
            const int32_t pmin = PS[rb * W], pmax = PS[rb * W + W - 1];
            if (pmax < k0) continue; /* these rows' keys ended in an earlier chunk */
            const float *qt = QT + (size_t)rb * hd * W;
            float *ot = OT + (size_t)rb * hd * W;
            __m512 s[KC];
#pragma GCC unroll 16
            for (int c = 0; c < KC; c++) s[c] = _mm512_setzero_ps();
            for (int j = 0; j < hd; j++) {
                const __m512 qv = _mm512_loadu_ps(qt + j * W);
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) s[c] = _mm512_fmadd_ps(_mm512_set1_ps(Kf[c * hd + j]), qv, s[c]);
            }
            if (k0 + KC - 1 > pmin) { /* the diagonal (or the last, short chunk): key p only for rows at >= p */
                const __m512i pv = _mm512_loadu_si512(PS + rb * W);
                const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) {
                    const __mmask16 ok = _mm512_cmp_epi32_mask(_mm512_set1_epi32(k0 + c), pv, _MM_CMPINT_LE);
                    s[c] = _mm512_mask_blend_ps(ok, ninf, s[c]);
                }
            }
            __m512 mx = s[0];
#pragma GCC unroll 16
            for (int c = 1; c < KC; c++) mx = _mm512_max_ps(mx, s[c]);
            const __m512 mo = _mm512_loadu_ps(M + rb * W), mn = _mm512_max_ps(mo, mx);
            const __m512 corr = exp16(_mm512_sub_ps(mo, mn));
            _mm512_storeu_ps(M + rb * W, mn);
            __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
            for (int c = 0; c < KC; c++) {
                s[c] = exp16(_mm512_sub_ps(s[c], mn));
                sum = _mm512_add_ps(sum, s[c]);
            }
            _mm512_storeu_ps(L + rb * W, _mm512_fmadd_ps(_mm512_loadu_ps(L + rb * W), corr, sum));
            int j = 0;
            for (; j + 4 <= hd; j += 4) {
                __m512 o0 = _mm512_mul_ps(_mm512_loadu_ps(ot + (j + 0) * W), corr);
                __m512 o1 = _mm512_mul_ps(_mm512_loadu_ps(ot + (j + 1) * W), corr);
                __m512 o2 = _mm512_mul_ps(_mm512_loadu_ps(ot + (j + 2) * W), corr);
                __m512 o3 = _mm512_mul_ps(_mm512_loadu_ps(ot + (j + 3) * W), corr);
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) {
                    const float *v = Vf + c * hd + j;
                    o0 = _mm512_fmadd_ps(_mm512_set1_ps(v[0]), s[c], o0);
                    o1 = _mm512_fmadd_ps(_mm512_set1_ps(v[1]), s[c], o1);
                    o2 = _mm512_fmadd_ps(_mm512_set1_ps(v[2]), s[c], o2);
                    o3 = _mm512_fmadd_ps(_mm512_set1_ps(v[3]), s[c], o3);
                }
                _mm512_storeu_ps(ot + (j + 0) * W, o0);
                _mm512_storeu_ps(ot + (j + 1) * W, o1);
                _mm512_storeu_ps(ot + (j + 2) * W, o2);
                _mm512_storeu_ps(ot + (j + 3) * W, o3);
            }
            for (; j < hd; j++) {
                __m512 o = _mm512_mul_ps(_mm512_loadu_ps(ot + j * W), corr);
                for (int c = 0; c < KC; c++) o = _mm512_fmadd_ps(_mm512_set1_ps(Vf[c * hd + j]), s[c], o);
                _mm512_storeu_ps(ot + j * W, o);
            }
        }
    }

    attn_frame_end(t, &f, W);
}

static void attn_avx512(const nb_attn_tile *t) {
    switch (t->kv->head_dim) {
    case 64: tile16(t, 64); return;
    case 128: tile16(t, 128); return;
    default: tile16(t, 0); return;
    }
}

nb_attn_fn nb_attn_avx512(void) { return attn_avx512; }
