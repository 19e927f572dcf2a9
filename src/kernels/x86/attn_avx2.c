/* AVX2 + FMA + F16C flash attention (attn.h): the AVX-512 kernel's scheme
 * with 8 query rows per vector and sixteen registers. Per chunk of
 * NB_ATTN_KC keys, K and V are converted to f32 once; per pair of blocks of
 * 8 rows (rows_chunk: one block where the rows left are odd), S^T = K Q^T
 * in passes of 4 keys (8 accumulators), the causal mask on diagonal chunks,
 * the online softmax in lanes (probabilities kept in scratch), then O^T =
 * O^T * corr + V^T P four head_dim columns at a time. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/x86/attn_tile.h"
#include "kernels/x86/vexp.h"

#define W 8

/* 8 fp8 e4m3 codes at p as f32, by arithmetic (attn_tile.h's fp8_bf16x16
 * at 8 lanes): a normal code's seven low bits shifted into bf16's place
 * plus 120 << 7 (bias 7 to 127), exponent 0 from an 8-entry table, 0x7f
 * NaN, the sign moved over. Where a vpgatherdd from nb_attn_fp8_table made
 * an fp8 pool's decode tile 2x as slow as an int8 pool's (session 37). */
static inline __attribute__((always_inline)) __m256 fp8x8(const uint8_t *p) {
    static const int32_t sub[8] __attribute__((aligned(32))) = {0x0000, 0x3b00, 0x3b80, 0x3bc0,
                                                                0x3c00, 0x3c20, 0x3c40, 0x3c60};
    long long b8;
    memcpy(&b8, p, 8);
    const __m256i code = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(b8));
    const __m256i em = _mm256_and_si256(code, _mm256_set1_epi32(0x7f));
    __m256i b = _mm256_add_epi32(_mm256_slli_epi32(em, 4), _mm256_set1_epi32(120 << 7));
    b = _mm256_blendv_epi8(b, _mm256_permutevar8x32_epi32(_mm256_load_si256((const __m256i *)(const void *)sub), em),
                           _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em));
    b = _mm256_blendv_epi8(b, _mm256_set1_epi32(0x7fc0), _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f)));
    b = _mm256_or_si256(b, _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(0x80)), 8));
    return _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
}

void nb_attn_fp8_to_f32_avx2(const uint8_t *src, float *dst, int n) {
    int j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, fp8x8(src + j));
    const float *lut = nb_attn_fp8_table();
    for (; j < n; j++) dst[j] = lut[src[j]];
}

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
        for (int j = 0; j < hv; j += 8) _mm256_storeu_ps(dst + j, _mm256_mul_ps(fp8x8(src + j), s));
        break;
    }
    for (int j = hv; j < hd; j++) dst[j] = nb_attn_elem(t, src, j) * sc;
}

/* ---- decode tiles: G keys per row in the lanes ---------------------------
 * attn_avx512.c's tile_dec at 8 lanes (the code is attn_dec_impl.h, shared):
 * a tile of R <= 4 rows (a decode token of a GQA group of <= 4) puts each
 * row in G = 8 / P lanes (P: R rounded up to a power of two), one key of
 * each group of G per lane, over chunks of DKC2 keys interleaved in groups
 * (Kg[g][j][u] = K[g*G + u][j]); the max and the sums of P and O are per
 * lane and combined over a row's G lanes at the end. */
#define DKC2 16

/* 8 elements of a row of type T from element j, as f32 times sc (the 8-bit
 * pools' slot scale). */
static inline __attribute__((always_inline)) __m256 load8(const uint8_t *row, int j, float sc, const nb_kv_type T,
                                                          const float *lut) {
    long long b8;
    switch (T) {
    case NB_KVT_F32: return _mm256_loadu_ps((const float *)(const void *)row + j);
    case NB_KVT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)j)));
    case NB_KVT_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)j))), 16));
    case NB_KVT_INT8:
        memcpy(&b8, row + j, 8);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(b8))), _mm256_set1_ps(sc));
    default: return _mm256_mul_ps(fp8x8(row + j), _mm256_set1_ps(sc));
    }
}

/* a, b interleaved in units of w floats: *lo the first halves, *hi the second. */
static inline __attribute__((always_inline)) void ilv2(__m256 a, __m256 b, int w, __m256 *lo, __m256 *hi) {
    __m256 l, h;
    if (w == 1) {
        l = _mm256_unpacklo_ps(a, b);
        h = _mm256_unpackhi_ps(a, b);
    } else if (w == 2) {
        l = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
        h = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
    } else {
        l = a;
        h = b;
    }
    *lo = _mm256_permute2f128_ps(l, h, 0x20);
    *hi = _mm256_permute2f128_ps(l, h, 0x31);
}

/* G key rows (8 floats each) into Kg's layout: v[m] = elements m * 8/G .. of the G keys, key-minor. */
static inline __attribute__((always_inline)) void interleave8(__m256 *v, const int G) {
#pragma GCC unroll 4
    for (int w = 1; w < G; w *= 2) {
        __m256 nv[8];
#pragma GCC unroll 4
        for (int i = 0; i < G / 2; i++) {
            const int ia = 2 * (i / w) * w + i % w;
            ilv2(v[ia], v[ia + w], w, &nv[2 * i], &nv[2 * i + 1]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < G; i++) v[i] = nv[i];
    }
}

/* G floats at p repeated over the vector. */
static inline __m256 bcast8_g(const float *p, const int G) {
    switch (G) {
    case 2: return _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(const void *)p));
    case 4: return _mm256_broadcast_ps((const __m128 *)(const void *)p);
    default: return _mm256_loadu_ps(p);
    }
}

/* tile_dec, shared with the AVX-512 kernel (attn_dec_impl.h) */
#define DV __m256
#define DVI __m256i
#define DV_LOAD _mm256_loadu_ps
#define DV_STORE _mm256_storeu_ps
#define DV_ZERO _mm256_setzero_ps
#define DV_ADD _mm256_add_ps
#define DV_MUL _mm256_mul_ps
#define DV_FMA _mm256_fmadd_ps
#define DV_ROW load8
#define DV_ILV interleave8
#define DV_BCAST bcast8_g
#define DV_SOFTMAX dec8_softmax
#define DV_MAX _mm256_max_ps
#define DV_SUB _mm256_sub_ps
#define DV_EXP nb_exp8
#define DV_LANE_XOR(v, lane, w) _mm256_permutevar8x32_ps(v, _mm256_xor_si256(lane, _mm256_set1_epi32(w)))
#define DEC_KC DKC2
#define DEC_NC 4
static __m256 dec8_softmax(float *P, int NG, int G, int32_t k0, bool edge, const int32_t *PL, float *Mv, float *Lv);
#include "kernels/x86/attn_dec_impl.h"

/* The mask (when edge) and the online softmax of one chunk's NG score
 * vectors in P (per lane max Mv, sum Lv); returns O's rescale factor. Not
 * inlined, so its constants do not take the sums' registers. */
static __attribute__((noinline)) __m256 dec8_softmax(float *P, int NG, int G, int32_t k0, bool edge,
                                                     const int32_t *PL, float *Mv, float *Lv) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    if (edge) {
        const __m256i pl = _mm256_loadu_si256((const __m256i *)(const void *)PL);
        const __m256i ku = _mm256_and_si256(lane, _mm256_set1_epi32(G - 1));
        for (int g = 0; g < NG; g++) {
            const __m256i key = _mm256_add_epi32(_mm256_set1_epi32(k0 + g * G), ku);
            const __m256 out = _mm256_castsi256_ps(_mm256_cmpgt_epi32(key, pl)); /* key > row's position */
            _mm256_storeu_ps(P + g * W, _mm256_blendv_ps(_mm256_loadu_ps(P + g * W), _mm256_set1_ps(-INFINITY), out));
        }
    }
    return dec_online(P, NG, G, lane, Mv, Lv);
}

NB_DEC_INSTANCES(NB_DEC_FNS8, tile_dec)

/* ---- prompt tiles (more than 4 rows) ------------------------------------ */

/* One chunk of KC keys (Kf, Vf) against NR (1 or 2) consecutive blocks of
 * W rows from block rb. With two blocks each broadcast K or V element
 * feeds two FMAs: a broadcast from memory takes a vector pipe on Zen 3, and
 * with one block per broadcast (a load, eight broadcasts and eight FMAs a
 * step) the FMAs ran at 75% of the core's peak, with two (two loads, four
 * broadcasts, eight FMAs) at 90% (docs/speed.md, session 45). Either way
 * eight accumulators: an FMA's latency is four cycles and there are two
 * pipes. The same sums in the same order whatever NR. */
static inline __attribute__((always_inline)) void rows_chunk(attn_frame *f, int rb, const int NR, int32_t k0,
                                                             float *P) {
    const int hd = f->hd, NK = 8 / NR; /* keys per pass of the scores, columns per pass of O */
    const float *Kf = f->Kf, *Vf = f->Vf;
    const float *qt[2];
    float *ot[2];
    __m256i pv[2];
    __m256 mx[2], corr[2];
#pragma GCC unroll 2
    for (int n = 0; n < NR; n++) {
        qt[n] = f->QT + (size_t)(rb + n) * hd * W;
        ot[n] = f->OT + (size_t)(rb + n) * hd * W;
        pv[n] = _mm256_loadu_si256((const __m256i *)(const void *)(f->PS + (rb + n) * W));
        mx[n] = _mm256_set1_ps(-INFINITY);
    }
    const bool diag = k0 + KC - 1 > f->PS[rb * W]; /* some key after some row's position */
    for (int c0 = 0; c0 < KC; c0 += NK) {
        __m256 sc[2][8];
#pragma GCC unroll 2
        for (int n = 0; n < NR; n++)
#pragma GCC unroll 8
            for (int c = 0; c < NK; c++) sc[n][c] = _mm256_setzero_ps();
        for (int j = 0; j < hd; j++) {
            __m256 qv[2];
#pragma GCC unroll 2
            for (int n = 0; n < NR; n++) qv[n] = _mm256_loadu_ps(qt[n] + j * W);
#pragma GCC unroll 8
            for (int c = 0; c < NK; c++) {
                const __m256 kb = _mm256_broadcast_ss(Kf + (c0 + c) * hd + j);
#pragma GCC unroll 2
                for (int n = 0; n < NR; n++) sc[n][c] = _mm256_fmadd_ps(kb, qv[n], sc[n][c]);
            }
        }
#pragma GCC unroll 2
        for (int n = 0; n < NR; n++)
#pragma GCC unroll 8
            for (int c = 0; c < NK; c++) {
                if (diag) { /* key k0 + c0 + c only for rows at >= it */
                    const __m256i late = _mm256_cmpgt_epi32(_mm256_set1_epi32(k0 + c0 + c), pv[n]);
                    sc[n][c] = _mm256_blendv_ps(sc[n][c], _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(late));
                }
                mx[n] = _mm256_max_ps(mx[n], sc[n][c]);
                _mm256_storeu_ps(P + (n * KC + c0 + c) * W, sc[n][c]);
            }
    }
#pragma GCC unroll 2
    for (int n = 0; n < NR; n++) corr[n] = online_update(P + n * KC * W, KC, mx[n], f->M + (rb + n) * W, f->L + (rb + n) * W);
    int j = 0;
    for (; j + NK <= hd; j += NK) {
        __m256 o[2][8];
#pragma GCC unroll 2
        for (int n = 0; n < NR; n++)
#pragma GCC unroll 8
            for (int u = 0; u < NK; u++) o[n][u] = _mm256_mul_ps(_mm256_loadu_ps(ot[n] + (j + u) * W), corr[n]);
#pragma GCC unroll 4
        for (int c = 0; c < KC; c++) {
            __m256 pc[2];
#pragma GCC unroll 2
            for (int n = 0; n < NR; n++) pc[n] = _mm256_loadu_ps(P + (n * KC + c) * W);
            const float *v = Vf + c * hd + j;
#pragma GCC unroll 8
            for (int u = 0; u < NK; u++) {
                const __m256 vb = _mm256_broadcast_ss(v + u);
#pragma GCC unroll 2
                for (int n = 0; n < NR; n++) o[n][u] = _mm256_fmadd_ps(vb, pc[n], o[n][u]);
            }
        }
#pragma GCC unroll 2
        for (int n = 0; n < NR; n++)
#pragma GCC unroll 8
            for (int u = 0; u < NK; u++) _mm256_storeu_ps(ot[n] + (j + u) * W, o[n][u]);
    }
    for (; j < hd; j++)
        for (int n = 0; n < NR; n++) {
            __m256 o = _mm256_mul_ps(_mm256_loadu_ps(ot[n] + j * W), corr[n]);
            for (int c = 0; c < KC; c++)
                o = _mm256_fmadd_ps(_mm256_broadcast_ss(Vf + c * hd + j), _mm256_loadu_ps(P + (n * KC + c) * W), o);
            _mm256_storeu_ps(ot[n] + j * W, o);
        }
}

static inline __attribute__((always_inline)) void tile8(const nb_attn_tile *t, const int HD) {
    attn_frame f;
    attn_frame_begin(t, HD ? HD : t->kv->head_dim, W, &f);
    float *P = f.extra; /* the probabilities of two blocks, 2 x KC x W */

    for (int32_t k0 = 0; k0 <= f.last; k0 += KC) {
        attn_frame_chunk(t, &f, k0, row_f32);
        /* the blocks whose rows all come before the chunk are a prefix
         * (positions never fall with the row): the rest go two at a time */
        int rb = 0;
        while (rb < f.RB && f.PS[rb * W + W - 1] < k0) rb++;
        for (; rb + 2 <= f.RB; rb += 2) rows_chunk(&f, rb, 2, k0, P);
        if (rb < f.RB) rows_chunk(&f, rb, 1, k0, P);
    }

    attn_frame_end(t, &f, W, 0);
}

static void attn_avx2(const nb_attn_tile *t) {
    if (t->nt * t->nq <= 4) { /* decode tiles: G keys per row in the lanes */
        NB_DEC_RUN(NB_DEC_PICK8, tile_dec, t);
        return;
    }
    switch (NB_ATTN_HD(t->kv->head_dim)) {
    case 64: tile8(t, 64); return;
    case 128: tile8(t, 128); return;
    default: tile8(t, 0); return;
    }
}

nb_attn_fn nb_attn_avx2(void) { return attn_avx2; }
