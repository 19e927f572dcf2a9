/* AVX2 kernels for the repacked layouts (kernels/repack.h), u8 x s8 sums by
 * vpmaddubsw + vpmaddwd: any AVX2 CPU. The kernels are in
 * kernels/x86/repack_avx2_impl.h, shared with the AVX-VNNI build
 * (repack_vnni_avx2.c). Called only after run-time detection (repack.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize") /* as the VNNI build: the scalar tails stay scalar */
#endif
#define RP_VNNI 0
#include "kernels/x86/repack_avx2_impl.h"

#include "base/status.h"

/* ---- activation pack for the int8 GEMMs (AVX2) --------------------------- */

static inline float hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* Q8_K's scale of 256 floats as nb_quant_q8_K sets it: -127 / the first
 * value of largest magnitude (0 for all zeros); *d = its inverse. */
static float q8k_scale(const float *x, float *d) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 32; k++) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absmask));
    float amax = hmax256(m);
    *d = 0;
    if (amax == 0) return 0;
    for (int k = 0; k < 32; k++) {
        int hit = _mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absmask), _mm256_set1_ps(amax), _CMP_EQ_OQ));
        if (hit) {
            float s = -127.f / x[8 * k + __builtin_ctz((unsigned)hit)];
            *d = 1 / s;
            return s;
        }
    }
    return 0;
}

/* 32 int32 in four vectors (values within -127..127) -> 32 int8 in order. */
static inline __m256i pack_i8(const __m256i q[4]) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline int32_t hsum_i32(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1)));
}

/* One token's activations for the decode dots, byte-identical to
 * nb_q8_0p_quantize_ref (see nb_q8_0p_quantize_avx512). */
void nb_q8_0p_quantize_avx2(const float *x, void *dst, int64_t n) {
    const int64_t nb = n / 32;
    int8_t *q = dst;
    float *d = (float *)(q + nb * 32), *ds = d + nb;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                 _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
        float amax = hmax256(m);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        float s = _cvtsh_ss(_cvtss_sh(amax / 127.f, 0));
        __m256i qi[4];
        for (int k = 0; k < 4; k++) qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        _mm256_storeu_si256((__m256i *)(void *)(q + i * 32), pack_i8(qi));
        const int32_t sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
        float fs = s * (float)sum;
        memcpy(d + i, &s, 4);
        memcpy(ds + i, &fs, 4);
        memcpy(ds + nb + i, &sum, 4);
    }
}

/* Q8_0PL (Q4_0L's and W4G*L's activations): Q8_0P, then each 4-block
 * group's quants into lane order, byte-identical to nb_q8_0pl_quantize_ref. */
void nb_q8_0pl_quantize_avx2(const float *x, void *dst, int64_t n) {
    nb_q8_0p_quantize_avx2(x, dst, n);
    int8_t *q = dst;
    for (int64_t g = 0; g < n / 128; g++) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) v[k] = loadu(q + g * 128 + 32 * k);
        nb_pl_lane_transpose(v);
        for (int k = 0; k < 4; k++) _mm256_storeu_si256((__m256i *)(void *)(q + g * 128 + 32 * k), v[k]);
    }
}

/* Q8_KP for the K-quant decode dots, byte-identical to the reference (see
 * nb_q8_kp_quantize_avx512): group l's four words go to words 16c + l. */
void nb_q8_kp_quantize_avx2(const float *x, void *dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        nb_block_q8_K *y = (nb_block_q8_K *)dst + i;
        float d;
        const float s = q8k_scale(x, &d);
        if (s == 0) {
            memset(y, 0, sizeof *y);
            continue;
        }
        const __m256 sv = _mm256_set1_ps(s);
        const __m256i top = _mm256_set1_epi32(127);
        uint32_t *w = (uint32_t *)(void *)y->qs;
        for (int l = 0; l < 16; l += 2) { /* two groups of 16 per 32 values */
            __m256i qi[4];
            for (int k = 0; k < 4; k++)
                qi[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * l + 8 * k), sv)), top);
            y->bsums[l] = (int16_t)hsum_i32(_mm256_add_epi32(qi[0], qi[1]));
            y->bsums[l + 1] = (int16_t)hsum_i32(_mm256_add_epi32(qi[2], qi[3]));
            _Alignas(32) uint32_t words[8];
            _mm256_store_si256((__m256i *)(void *)words, pack_i8(qi));
            for (int c = 0; c < 4; c++) {
                w[16 * c + l] = words[c];
                w[16 * c + l + 1] = words[4 + c];
            }
        }
        y->d = d;
    }
}

/* nb_actpack_group_ref with the quantization vectorised: the same roundings
 * (x * scale in float, then to nearest, ties to even - vcvtps2dq in the
 * default rounding mode), so the bytes are identical (tests compare). */
void nb_actpack_group_avx2(nb_actpack *ap, const float *X, int64_t g) {
    const int64_t nb = ap->nb, K = ap->K;
    const int nt = (int)NB_MIN(NB_ACTPACK_TOKENS, ap->n - g * NB_ACTPACK_TOKENS);
    if (nt < NB_ACTPACK_TOKENS) nb_actpack_clear_group(ap, g); /* missing tokens multiply as zeros */
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const float *x0 = X + g * NB_ACTPACK_TOKENS * K;
    float ks[NB_ACTPACK_TOKENS], kd[NB_ACTPACK_TOKENS]; /* Q8_K: the current super-block's */
    for (int64_t b = 0; b < nb; b++) {
        if (ap->act == NB_Q8_K && b % 8 == 0)
            for (int tt = 0; tt < nt; tt++) ks[tt] = q8k_scale(x0 + tt * K + b * 32, &kd[tt]);
        int8_t *dst = ap->q + (g * nb + b) * 512;
        for (int tt = 0; tt < nt; tt++) {
            const float *xb = x0 + tt * K + b * 32;
            __m256 v[4];
            for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(xb + 8 * k);
            float scale, d;
            if (ap->act == NB_Q8_K) {
                scale = ks[tt];
                d = kd[tt];
            } else {
                __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                         _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
                float amax = hmax256(m);
                scale = amax != 0.0f ? 127.f / amax : 0.0f;
                d = _cvtsh_ss(_cvtss_sh(amax / 127.f, 0));
            }
            const __m256 sv = _mm256_set1_ps(scale);
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], sv));
                if (ap->act == NB_Q8_K) q[k] = _mm256_min_epi32(q[k], _mm256_set1_epi32(127));
            }
            __m256i p = pack_i8(q);
            _Alignas(32) int8_t blk[32];
            _mm256_store_si256((__m256i *)blk, p);
            for (int kk = 0; kk < 8; kk++) memcpy(dst + kk * 64 + tt * 4, blk + kk * 4, 4);
            __m256i s0 = _mm256_add_epi32(q[0], q[1]), s1 = _mm256_add_epi32(q[2], q[3]);
            __m128i h0 = _mm_add_epi32(_mm256_castsi256_si128(s0), _mm256_extracti128_si256(s0, 1));
            __m128i h1 = _mm_add_epi32(_mm256_castsi256_si128(s1), _mm256_extracti128_si256(s1, 1));
            __m128i hh = _mm_hadd_epi32(h0, h1); /* h0 01, h0 23, h1 01, h1 23 */
            hh = _mm_hadd_epi32(hh, hh);
            int32_t a0 = _mm_cvtsi128_si32(hh), a1 = _mm_extract_epi32(hh, 1);
            int64_t at = (g * nb + b) * 16 + tt;
            ap->sum[at] = a0 + a1;
            ap->fsum[at] = (float)(a0 + a1);
            ap->sum16[(g * nb + b) * 32 + tt] = a0;
            ap->sum16[(g * nb + b) * 32 + 16 + tt] = a1;
            ap->d[at] = d;
        }
    }
}
