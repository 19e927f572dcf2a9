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

#include "base/half.h"
#include "kernels/x86/attn_tile.h"
#include "kernels/x86/dpbusd_bcast.h"
#include "kernels/x86/vexp.h"

#define W 16

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
        for (int j = 0; j < hv; j += 16) _mm512_storeu_ps(dst + j, _mm512_mul_ps(attn_fp8x16(src + j), s));
        break;
    }
    for (int j = hv; j < hd; j++) dst[j] = nb_attn_elem(t, src, j) * sc;
}

/* Columns j .. j+NC-1 of O^T = O^T * corr + V^T P for one block of rows
 * (ot: hd vectors): BF = 0 with the f32 probabilities s[KC] and the f32
 * chunk Vf[KC][hd]; BF = 1 with the bf16 pairs of probabilities pp[KC/2]
 * and of values VP[KC/2][hd]. Per column the keys are added in order. */
static inline __attribute__((always_inline)) void o_cols(float *ot, int hd, int j, __m512 corr, const __m512 *s,
                                                         const float *Vf, const __m512bh *pp, const uint32_t *VP,
                                                         const int BF, const int RS, const int NC) {
    __m512 o[4];
#pragma GCC unroll 4
    for (int i = 0; i < NC; i++) {
        o[i] = _mm512_loadu_ps(ot + (size_t)(j + i) * W);
        if (RS) o[i] = _mm512_mul_ps(o[i], corr);
    }
    if (BF) {
#pragma GCC unroll 8
        for (int cp = 0; cp < KC / 2; cp++)
#pragma GCC unroll 4
            for (int i = 0; i < NC; i++) o[i] = dpbf16_bcast(o[i], pp[cp], VP + cp * hd + j + i);
    } else {
#pragma GCC unroll 16
        for (int c = 0; c < KC; c++)
#pragma GCC unroll 4
            for (int i = 0; i < NC; i++) o[i] = _mm512_fmadd_ps(_mm512_set1_ps(Vf[c * hd + j + i]), s[c], o[i]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < NC; i++) _mm512_storeu_ps(ot + (size_t)(j + i) * W, o[i]);
}

/* All hd columns: four at a time (four independent chains), then the
 * tail; O^T rescaled by corr only when RS. */
static inline __attribute__((always_inline)) void o_cols_all(float *ot, int hd, __m512 corr, const __m512 *s,
                                                             const float *Vf, const __m512bh *pp, const uint32_t *VP,
                                                             const int BF, const int RS) {
    int j = 0;
    for (; j + 4 <= hd; j += 4) o_cols(ot, hd, j, corr, s, Vf, pp, VP, BF, RS, 4);
    for (; j < hd; j++) o_cols(ot, hd, j, corr, s, Vf, pp, VP, BF, RS, 1);
}

static inline __attribute__((always_inline)) void o_update(float *ot, int hd, bool rescale, __m512 corr,
                                                           const __m512 *s, const float *Vf, const __m512bh *pp,
                                                           const uint32_t *VP, const int BF) {
    if (rescale) o_cols_all(ot, hd, corr, s, Vf, pp, VP, BF, 1);
    else o_cols_all(ot, hd, corr, s, Vf, pp, VP, BF, 0);
}

/* The max (MAX) or the sum of the KC vectors s, lane by lane: a tree, not
 * a chain, since the softmax's latency is on every chunk's path. */
static inline __attribute__((always_inline)) __m512 tree_kc(const __m512 *s, const int MAX) {
    __m512 r[KC / 2];
#pragma GCC unroll 8
    for (int c = 0; c < KC / 2; c++) r[c] = MAX ? _mm512_max_ps(s[c], s[c + KC / 2]) : _mm512_add_ps(s[c], s[c + KC / 2]);
#pragma GCC unroll 4
    for (int w = KC / 4; w >= 1; w /= 2)
#pragma GCC unroll 4
        for (int c = 0; c < w; c++) r[c] = MAX ? _mm512_max_ps(r[c], r[c + w]) : _mm512_add_ps(r[c], r[c + w]);
    return r[0];
}

/* The causal mask of one chunk's scores s[c] (rows rb*W.., in lanes) and
 * their max per row. */
static inline __attribute__((always_inline)) __m512 mask_chunk(__m512 s[KC], const int32_t *PS, int rb, int32_t k0) {
    const int32_t pmin = PS[rb * W];
    if (k0 + KC - 1 > pmin) { /* the diagonal (or the last, short chunk): key p only for rows at >= p */
        const __m512i pv = _mm512_loadu_si512(PS + rb * W);
        const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 16
        for (int c = 0; c < KC; c++) {
            const __mmask16 ok = _mm512_cmp_epi32_mask(_mm512_set1_epi32(k0 + c), pv, _MM_CMPINT_LE);
            s[c] = _mm512_mask_blend_ps(ok, ninf, s[c]);
        }
    }
    return tree_kc(s, 1);
}


/* 2^x to about 7.5e-5 relative (a degree-3 minimax on [0, 1)): for
 * probabilities that are rounded to bf16 (2^-9) right after. */
static inline __m512 exp2_bf16(__m512 x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
    const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.078024447f), f, _mm512_set1_ps(0.22606800f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69583282f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.99992533f));
    return _mm512_maskz_scalef_ps(live, p, x);
}

/* The causal mask and the online softmax of one chunk's scores s[c], in
 * base 2 (the scores, M and L in units of log2 e: attn_qt_base2): s
 * becomes 2^(s - M), M (moved only past ATTN_LAZY_MAX) and L are updated.
 * Returns whether M moved; then *corr is the factor the partial output
 * must be rescaled by. BF: the probabilities will be rounded to bf16,
 * so a shorter polynomial does. */
static inline __attribute__((always_inline)) bool softmax_chunk(__m512 s[KC], const int32_t *PS, int rb, int32_t k0,
                                                                float *M, float *L, __m512 *corr, const int BF) {
    const __m512 mx = mask_chunk(s, PS, rb, k0), mo = _mm512_loadu_ps(M + rb * W);
    const bool moved =
        _mm512_cmp_ps_mask(mx, _mm512_add_ps(mo, _mm512_set1_ps(ATTN_LAZY_MAX)), _CMP_GT_OQ) != 0;
    __m512 mn = mo;
    *corr = _mm512_set1_ps(1.0f);
    if (moved) {
        mn = _mm512_max_ps(mo, mx);
        *corr = nb_exp2_16(_mm512_sub_ps(mo, mn));
        _mm512_storeu_ps(M + rb * W, mn);
    }
#pragma GCC unroll 16
    for (int c = 0; c < KC; c++) s[c] = BF ? exp2_bf16(_mm512_sub_ps(s[c], mn)) : nb_exp2_16(_mm512_sub_ps(s[c], mn));
    _mm512_storeu_ps(L + rb * W, _mm512_fmadd_ps(_mm512_loadu_ps(L + rb * W), *corr, tree_kc(s, 0)));
    return moved;
}

static inline __attribute__((always_inline)) void tile16(const nb_attn_tile *t, const int HD) {
    attn_frame f;
    attn_frame_begin(t, HD ? HD : t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB;
    float *QT = f.QT, *OT = f.OT, *M = f.M, *L = f.L, *Kf = f.Kf, *Vf = f.Vf;
    const int32_t *PS = f.PS;
    attn_qt_base2(&f, W);

    for (int32_t k0 = 0; k0 <= f.last; k0 += KC) {
        attn_frame_chunk(t, &f, k0, row_f32);
        for (int rb = 0; rb < RB; rb++) {
            if (PS[rb * W + W - 1] < k0) continue; /* these rows' keys ended in an earlier chunk */
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
            __m512 corr;
            const bool moved = softmax_chunk(s, PS, rb, k0, M, L, &corr, 0);
            o_update(ot, hd, moved, corr, s, Vf, NULL, NULL, 0);
        }
    }

    attn_frame_end(t, &f, W, 1);
}

/* ---- decode tiles: G keys per row in the lanes ---------------------------
 * A tile of R <= 8 rows (a decode token's GQA group, or a few tokens of a
 * small group) fills only R of tile16's 16 lanes. Here lane r * G + u holds
 * row r against key u of each group of G = 16 / P keys (P: R rounded up to
 * a power of two), so every multiply-add is full: Q^T is repeated over the
 * G lanes of its row, and each chunk of DKC keys is interleaved in groups,
 * Kg[g][j][u] = K[g * G + u][j] (V the same), so one G-float broadcast
 * (vbroadcastf32x2/x4/x8, a load) serves every lane. The online softmax
 * keeps a max per lane, equal over a row's G lanes (reduced across them each
 * chunk), and per-lane partial sums of P and of O, added over the G lanes
 * at the end. Half (R = 8) to a sixteenth (R = 1) of tile16's instructions. */
#define DKC NB_ATTN_KC_DECODE

/* Float permutation indices that interleave two vectors in units of w =
 * 1, 2, 4, 8 floats ([level][lo, hi]): lo takes the first halves of a and
 * b (b's indices + 16), hi the second. In memory, loaded where used, so
 * the multiply-add loops keep every register for their sums. */
static const int32_t ILV[4][2][16] __attribute__((aligned(64))) = {
    {{0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23}, {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}},
    {{0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23}, {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31}},
    {{0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23}, {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31}},
    {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}, {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
};

/* G key rows (16 floats from element j0 each) into Kg's layout: after the
 * rounds, v[m] holds elements j0 + m * 16/G .. of the G keys, key-minor. */
static inline __attribute__((always_inline)) void interleave(__m512 *v, const int G) {
#pragma GCC unroll 4
    for (int w = 1, lvl = 0; w < G; w *= 2, lvl++) {
        __m512 nv[16];
#pragma GCC unroll 8
        for (int i = 0; i < G / 2; i++) { /* pair i: groups of w vectors, the w-th apart */
            const int ia = 2 * (i / w) * w + i % w;
            nv[2 * i] = _mm512_permutex2var_ps(v[ia], _mm512_load_si512(ILV[lvl][0]), v[ia + w]);
            nv[2 * i + 1] = _mm512_permutex2var_ps(v[ia], _mm512_load_si512(ILV[lvl][1]), v[ia + w]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < G; i++) v[i] = nv[i];
    }
}

/* 16 elements of a row of type T from element j, as f32 times sc (the
 * 8-bit pools' slot scale; the others have none). */
static inline __attribute__((always_inline)) __m512 load16(const uint8_t *row, int j, float sc, const nb_kv_type T,
                                                           const float *lut) {
    (void)lut; /* the AVX2 kernel's converter gathers fp8 from it (DV_ROW) */
    const __m512 x = attn_load16(T, row, j);
    return T == NB_KVT_INT8 || T == NB_KVT_FP8 ? _mm512_mul_ps(x, _mm512_set1_ps(sc)) : x;
}

/* G floats at p repeated over the vector. */
static inline __m512 bcast_g(const float *p, const int G) {
    switch (G) {
    case 2: { /* as one double: vbroadcastsd, a plain load */
        double d;
        memcpy(&d, p, sizeof d);
        return _mm512_castpd_ps(_mm512_set1_pd(d));
    }
    case 4: return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
    case 8: return _mm512_broadcast_f32x8(_mm256_loadu_ps(p));
    default: return _mm512_loadu_ps(p);
    }
}

/* tile_dec, shared with the AVX2 kernel (attn_dec_impl.h) */
#define DV __m512
#define DVI __m512i
#define DV_LOAD _mm512_loadu_ps
#define DV_STORE _mm512_storeu_ps
#define DV_ZERO _mm512_setzero_ps
#define DV_ADD _mm512_add_ps
#define DV_MUL _mm512_mul_ps
#define DV_FMA _mm512_fmadd_ps
#define DV_ROW load16
#define DV_ILV interleave
#define DV_BCAST bcast_g
#define DV_SOFTMAX dec_softmax
#define DV_MAX _mm512_max_ps
#define DV_SUB _mm512_sub_ps
#define DV_EXP nb_exp16
#define DV_LANE_XOR(v, lane, w) _mm512_permutexvar_ps(_mm512_xor_si512(lane, _mm512_set1_epi32(w)), v)
#define DEC_KC DKC
#define DEC_NC 8
static __m512 dec_softmax(float *P, int NG, int G, int32_t k0, bool edge, const int32_t *PL, float *Mv, float *Lv);
#include "kernels/x86/attn_dec_impl.h"

/* The causal mask (when edge), the online softmax update of one chunk's
 * NG score vectors in P (becoming e^(s - max)), the per-lane max Mv and sum
 * Lv; returns the factor O must be rescaled by. Not inlined: its constants
 * would otherwise stay in registers the multiply-add loops need. */
static __attribute__((noinline)) __m512 dec_softmax(float *P, int NG, int G, int32_t k0, bool edge, const int32_t *PL,
                                                    float *Mv, float *Lv) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    if (edge) { /* key k0 + g * G + lane % G only for rows at >= it */
        const __m512i pl = _mm512_loadu_si512(PL), ku = _mm512_and_si512(lane, _mm512_set1_epi32(G - 1));
        for (int g = 0; g < NG; g++) {
            const __m512i key = _mm512_add_epi32(_mm512_set1_epi32(k0 + g * G), ku);
            _mm512_store_ps(P + g * W, _mm512_mask_blend_ps(_mm512_cmp_epi32_mask(key, pl, _MM_CMPINT_LE),
                                                            _mm512_set1_ps(-INFINITY), _mm512_load_ps(P + g * W)));
        }
    }
    return dec_online(P, NG, G, lane, Mv, Lv);
}

NB_DEC_INSTANCES(NB_DEC_FNS16, tile_dec)

static void attn_avx512_f32(const nb_attn_tile *t) {
    if (t->nt * t->nq <= 8) { /* decode tiles: G keys per row in the lanes */
        NB_DEC_RUN(NB_DEC_PICK16, tile_dec, t);
        return;
    }
    switch (NB_ATTN_HD(t->kv->head_dim)) {
    case 64: tile16(t, 64); return;
    case 128: tile16(t, 128); return;
    default: tile16(t, 0); return;
    }
}

/* ---- bf16 and fp8 KV with bf16 dot products (AVX512_BF16) ---------------
 * vdpbf16ps adds two bf16 products per lane per instruction: the same tile
 * as tile16 with half the multiply instructions. K and V are the pool's
 * values unchanged (fp8 e4m3 values are exact in bf16: 3 mantissa bits,
 * exponents well inside bf16's); Q (times the scale) and the probabilities
 * P (times the fp8 slots' V scales) are rounded to bf16 (to nearest even)
 * for the products, which is what this kernel costs in accuracy (attn.h);
 * the sums, the softmax and O stay f32, and the fp8 slots' K scales
 * multiply the f32 scores. Layouts, in pairs of bf16 per 32-bit lane: Q^T
 * as QP[rb][j/2][lane] (head elements 2i, 2i+1 of each row), a chunk's K
 * as its rows (a pair is two neighbouring elements), V as VP[c/2][j]
 * (element j of keys c, c+1), P as pairs of keys per row. */

static inline uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

void nb_attn_fp8_to_bf16_avx512(const uint8_t *src, uint16_t *dst, int n) {
    int j = 0;
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + j), _mm512_cvtepi32_epi16(fp8_bf16x16(src + j)));
    const float *lut = nb_attn_fp8_table();
    for (; j < n; j++) dst[j] = (uint16_t)(f32_bits(lut[src[j]]) >> 16);
}

/* A K or V row of the pool (bf16 or fp8) as hd bf16 values at dst. */
static inline __attribute__((always_inline)) void row_bf16(const uint8_t *src, uint16_t *dst, int hd, const int FP8) {
    if (FP8) nb_attn_fp8_to_bf16_avx512(src, dst, hd);
    else memcpy(dst, src, (size_t)hd * 2);
}

/* 16 elements from j of a V row (bf16 or fp8; NULL: zeros) as bf16 bits in
 * the low half of each 32-bit lane. */
static inline __attribute__((always_inline)) __m512i v_bf16x16(const uint8_t *row, int j, const int FP8) {
    if (!row) return _mm512_setzero_si512();
    if (FP8) return fp8_bf16x16(row + j);
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)));
}

static inline __attribute__((always_inline)) void tile16_bf16(const nb_attn_tile *t, const int HD, const int FP8) {
    const nb_attn_kv *kv = t->kv;
    attn_frame f;
    attn_frame_begin(t, HD ? HD : kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB, hp = hd / 2;
    const __m512i idx = _mm512_load_si512(attn_pair_idx);
    float *OT = f.OT, *M = f.M, *L = f.L;
    const int32_t *PS = f.PS;
    const float *lut = FP8 ? nb_attn_fp8_table() : NULL;
    attn_qt_base2(&f, W);
    attn_qt_bf16_pairs(&f, idx);
    uint16_t *Kb = (uint16_t *)(void *)f.Kf; /* [KC][hd] */
    uint32_t *VP = (uint32_t *)(void *)f.Vf; /* [KC/2][hd] */
    const int hv = hd & ~15;

    for (int32_t k0 = 0; k0 <= f.last; k0 += KC) {
        const uint8_t *kr[KC], *vr[KC];
        int64_t sl[KC];
        float ksc[KC], vsc[KC]; /* fp8 slots' scales (1 past the last key) */
        const int nk = attn_chunk_rows(t, hd, k0, KC, kr, vr, sl, NULL);
        for (int c = 0; c < KC; c++) {
            if (c < nk) row_bf16(kr[c], Kb + c * hd, hd, FP8);
            else memset(Kb + c * hd, 0, (size_t)hd * 2);
            if (FP8) {
                ksc[c] = c < nk && kv->ks ? kv->ks[sl[c] * kv->n_head_kv + t->kvh] : 1.0f;
                vsc[c] = c < nk && kv->vs ? kv->vs[sl[c] * kv->n_head_kv + t->kvh] : 1.0f;
            }
        }
        for (int cp = 0; cp < KC / 2; cp++) {
            const uint8_t *a = 2 * cp < nk ? vr[2 * cp] : NULL, *b = 2 * cp + 1 < nk ? vr[2 * cp + 1] : NULL;
            uint32_t *o = VP + cp * hd;
            int j = 0;
            for (; j < hv; j += 16)
                _mm512_storeu_si512(o + j, _mm512_or_si512(v_bf16x16(a, j, FP8),
                                                           _mm512_slli_epi32(v_bf16x16(b, j, FP8), 16)));
            for (; j < hd; j++) {
                const uint32_t ea = a ? (FP8 ? f32_bits(lut[a[j]]) >> 16 : ((const uint16_t *)(const void *)a)[j]) : 0u;
                const uint32_t eb = b ? (FP8 ? f32_bits(lut[b[j]]) >> 16 : ((const uint16_t *)(const void *)b)[j]) : 0u;
                o[j] = ea | eb << 16;
            }
        }
        for (int rb = 0; rb < RB; rb++) {
            if (PS[rb * W + W - 1] < k0) continue; /* these rows' keys ended in an earlier chunk */
            const float *qp = f.QT + (size_t)rb * hd * W;
            float *ot = OT + (size_t)rb * hd * W;
            __m512 s[KC];
#pragma GCC unroll 16
            for (int c = 0; c < KC; c++) s[c] = _mm512_setzero_ps();
            for (int j2 = 0; j2 < hp; j2++) {
                const __m512bh qv = (__m512bh)_mm512_loadu_si512(qp + j2 * W);
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) s[c] = dpbf16_bcast(s[c], qv, Kb + c * hd + 2 * j2);
            }
            if (FP8)
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) s[c] = _mm512_mul_ps(s[c], _mm512_set1_ps(ksc[c]));
            __m512 corr;
            const bool moved = softmax_chunk(s, PS, rb, k0, M, L, &corr, 1);
            if (FP8)
#pragma GCC unroll 16
                for (int c = 0; c < KC; c++) s[c] = _mm512_mul_ps(s[c], _mm512_set1_ps(vsc[c]));
            __m512bh pp[KC / 2];
#pragma GCC unroll 8
            for (int cp = 0; cp < KC / 2; cp++) pp[cp] = (__m512bh)bf16_pairs(s[2 * cp], s[2 * cp + 1], idx);
            o_update(ot, hd, moved, corr, NULL, NULL, pp, VP, 1);
        }
    }

    attn_frame_end(t, &f, W, 1);
}

/* Decode tiles (<= 8 rows) of bf16 KV with bf16 dots: tile_dec's lanes
 * (row, key of a group) and tile16_bf16's roundings. Q^T as bf16 pairs of
 * head elements (QP[j2][lane]); a chunk's K as its rows' pairs, interleaved
 * by group (Kp[g][j2][u]); V as pairs of keys two groups apart, VP[h][j][u]
 * = (V[2h*G + u][j], V[(2h+1)*G + u][j]), matching the probabilities'
 * pairs (p[2h], p[2h+1]) in each lane. */
/* 16 elements from j of a row of an 8-bit pool (int8 or fp8 codes; their
 * values are exact in bf16) as bf16 bits in the low half of each 32-bit
 * lane. */
static inline __attribute__((always_inline)) __m512i v8_bf16x16(const uint8_t *row, int j, const nb_kv_type T) {
    if (T == NB_KVT_FP8) return fp8_bf16x16(row + j);
    return _mm512_srli_epi32(_mm512_castps_si512(attn_load16(NB_KVT_INT8, row, j)), 16);
}

/* 16 elements from j of a V row of type T as bf16 bits, low halves. */
static inline __attribute__((always_inline)) __m512i v_bf16x16_t(const uint8_t *row, int j, const nb_kv_type T) {
    if (T != NB_KVT_BF16) return v8_bf16x16(row, j, T);
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)));
}

/* Pairs j2 .. j2+15 of a K row (elements 2 j2 ..) of type T as bf16 pairs,
 * one pair a 32-bit lane (element 2i low, 2i+1 high). */
static inline __attribute__((always_inline)) __m512 k_pairs16(const uint8_t *row, int j2, const nb_kv_type T) {
    if (T == NB_KVT_BF16) return _mm512_loadu_ps((const float *)(const void *)row + j2);
    /* the low words of 32 elements' lanes, in order: word k <- word 2k of a:b */
    const __m512i even = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24,
                                          22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_castsi512_ps(
        _mm512_permutex2var_epi16(v8_bf16x16(row, 2 * j2, T), even, v8_bf16x16(row, 2 * j2 + 16, T)));
}

/* Element j of a row of type T as bf16 bits (the tails past whole vectors). */
static inline uint32_t bf16_at(const uint8_t *row, int j, const nb_kv_type T) {
    uint16_t h;
    if (T == NB_KVT_BF16) memcpy(&h, row + 2 * (size_t)j, 2);
    else if (T == NB_KVT_INT8) h = nb_fp32_to_bf16((float)(int8_t)row[j]);
    else h = (uint16_t)(f32_bits(nb_attn_fp8_table()[row[j]]) >> 16);
    return h;
}

static inline __attribute__((always_inline)) void tile_dec_bf16(const nb_attn_tile *t, const int HD, const int G,
                                                                const nb_kv_type T) {
    const nb_attn_kv *kv = t->kv;
    const bool scaled = T != NB_KVT_BF16 && (kv->ks || kv->vs);
    const int hd = HD ? HD : kv->head_dim, hp = hd / 2, nq = t->nq, R = t->nt * nq;
    const int NG = DKC / G, NH = NG / 2, JS = NG >= 8 ? 1 : 8 / NG;
    const int32_t last = t->pos0 + t->nt - 1;
    float *QP = t->scratch, *OD = QP + (size_t)hd * W, *Kp = OD + (size_t)hd * W, *VP = Kp + (size_t)DKC * hd;
    uint16_t *zero = (uint16_t *)(void *)(VP + (size_t)DKC * hd); /* keys past the last */
    memset(zero, 0, (size_t)hd * sizeof *zero);
    memset(QP, 0, (size_t)hp * W * sizeof *QP);
    for (int r = 0; r < R; r++) {
        const float *q = t->q + (int64_t)(r / nq) * t->q_stride + (int64_t)(r % nq) * hd;
        for (int j2 = 0; j2 < hp; j2++) {
            const uint32_t pr = (uint32_t)nb_fp32_to_bf16(q[2 * j2] * t->scale) |
                                (uint32_t)nb_fp32_to_bf16(q[2 * j2 + 1] * t->scale) << 16;
            for (int u = 0; u < G; u++) memcpy(QP + j2 * W + r * G + u, &pr, 4);
        }
    }
    memset(OD, 0, (size_t)hd * W * sizeof *OD);
    int32_t PL[W];
    float Mv[W], Lv[W];
    dec_lanes_init(t, W, G, PL, Mv, Lv);
    const __m512i idx = _mm512_load_si512(attn_pair_idx);
    const int hpv = hp & ~15, hv = hd & ~15;
    for (int32_t k0 = 0; k0 <= last; k0 += DKC) {
        const uint8_t *kr[DKC], *vr[DKC];
        int64_t sl[DKC];
        attn_pf pf; /* the next chunk's lines, a few per step of Q K^T (as tile_dec) */
        const int nk = attn_chunk_rows(t, hd, k0, DKC, kr, vr, sl, &pf);
        const int steps = (hp + JS - 1) / JS, pf_per = (pf.lines + steps - 1) / steps;
        for (int c = nk; c < DKC; c++) kr[c] = vr[c] = (const uint8_t *)(const void *)zero;
        float ksc[DKC], vsc[DKC]; /* the 8-bit pools' slot scales (1 past the last key) */
        if (scaled)
            for (int c = 0; c < DKC; c++) {
                ksc[c] = c < nk && kv->ks ? kv->ks[sl[c] * kv->n_head_kv + t->kvh] : 1.0f;
                vsc[c] = c < nk && kv->vs ? kv->vs[sl[c] * kv->n_head_kv + t->kvh] : 1.0f;
            }
        for (int g = 0; g < NG; g++) { /* K: the rows' pairs, interleaved by group */
            for (int j0 = 0; j0 < hpv; j0 += 16) {
                __m512 a[16];
#pragma GCC unroll 16
                for (int u = 0; u < G; u++) a[u] = k_pairs16(kr[g * G + u], j0, T);
                interleave(a, G);
#pragma GCC unroll 16
                for (int m = 0; m < G; m++) _mm512_storeu_ps(Kp + ((size_t)g * hp + j0) * G + m * 16, a[m]);
            }
            for (int j2 = hpv; j2 < hp; j2++)
                for (int u = 0; u < G; u++) {
                    const uint32_t pr = bf16_at(kr[g * G + u], 2 * j2, T) | bf16_at(kr[g * G + u], 2 * j2 + 1, T) << 16;
                    memcpy(Kp + ((size_t)g * hp + j2) * G + u, &pr, 4);
                }
        }
        for (int h = 0; h < NH; h++) { /* V: pairs of keys two groups apart, interleaved */
            for (int j0 = 0; j0 < hv; j0 += 16) {
                __m512 a[16];
#pragma GCC unroll 16
                for (int u = 0; u < G; u++) {
                    const __m512i lo = v_bf16x16_t(vr[2 * h * G + u], j0, T);
                    const __m512i hi = v_bf16x16_t(vr[(2 * h + 1) * G + u], j0, T);
                    a[u] = _mm512_castsi512_ps(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
                }
                interleave(a, G);
#pragma GCC unroll 16
                for (int m = 0; m < G; m++) _mm512_storeu_ps(VP + ((size_t)h * hd + j0) * G + m * 16, a[m]);
            }
            for (int j = hv; j < hd; j++)
                for (int u = 0; u < G; u++) {
                    const uint32_t pr = bf16_at(vr[2 * h * G + u], j, T) | bf16_at(vr[(2 * h + 1) * G + u], j, T) << 16;
                    memcpy(VP + ((size_t)h * hd + j) * G + u, &pr, 4);
                }
        }
        __m512 sacc[8][16];
#pragma GCC unroll 16
        for (int js = 0; js < JS; js++)
#pragma GCC unroll 16
            for (int g = 0; g < NG; g++) sacc[js][g] = _mm512_setzero_ps();
        for (int j2 = 0; j2 < hp; j2 += JS) {
            attn_pf_step(&pf, pf_per);
#pragma GCC unroll 16
            for (int js = 0; js < JS; js++) {
                if (JS > 1 && j2 + js >= hp) break;
                const __m512bh qv = (__m512bh)_mm512_loadu_si512(QP + (size_t)(j2 + js) * W);
#pragma GCC unroll 16
                for (int g = 0; g < NG; g++)
                    sacc[js][g] = _mm512_dpbf16_ps(sacc[js][g], qv,
                                                   (__m512bh)bcast_g(Kp + ((size_t)g * hp + j2 + js) * G, G));
            }
        }
        attn_pf_step(&pf, INT32_MAX); /* what the steps left */
        float P[16 * W] __attribute__((aligned(64)));
#pragma GCC unroll 16
        for (int g = 0; g < NG; g++) {
            __m512 x = sacc[0][g];
#pragma GCC unroll 16
            for (int js = 1; js < JS; js++) x = _mm512_add_ps(x, sacc[js][g]);
            if (scaled) x = _mm512_mul_ps(x, bcast_g(ksc + g * G, G));
            _mm512_store_ps(P + g * W, x);
        }
        const __m512 corr = dec_softmax(P, NG, G, k0, k0 + DKC - 1 > t->pos0, PL, Mv, Lv);
        __m512bh pp[8];
#pragma GCC unroll 8
        for (int h = 0; h < NH; h++) {
            __m512 p0 = _mm512_load_ps(P + 2 * h * W), p1 = _mm512_load_ps(P + (2 * h + 1) * W);
            if (scaled) { /* V's scales on the probabilities, before their rounding */
                p0 = _mm512_mul_ps(p0, bcast_g(vsc + 2 * h * G, G));
                p1 = _mm512_mul_ps(p1, bcast_g(vsc + (2 * h + 1) * G, G));
            }
            pp[h] = (__m512bh)bf16_pairs(p0, p1, idx);
        }
        int j = 0;
        for (; j + 8 <= hd; j += 8) {
            __m512 o[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) o[i] = _mm512_mul_ps(_mm512_loadu_ps(OD + (size_t)(j + i) * W), corr);
#pragma GCC unroll 8
            for (int h = 0; h < NH; h++)
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++)
                    o[i] = _mm512_dpbf16_ps(o[i], pp[h], (__m512bh)bcast_g(VP + ((size_t)h * hd + j + i) * G, G));
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(OD + (size_t)(j + i) * W, o[i]);
        }
        for (; j < hd; j++) {
            __m512 o = _mm512_mul_ps(_mm512_loadu_ps(OD + (size_t)j * W), corr);
#pragma GCC unroll 8
            for (int h = 0; h < NH; h++)
                o = _mm512_dpbf16_ps(o, pp[h], (__m512bh)bcast_g(VP + ((size_t)h * hd + j) * G, G));
            _mm512_storeu_ps(OD + (size_t)j * W, o);
        }
    }
    dec_tile_end(t, hd, W, G, OD, Mv, Lv);
}

/* One instance set per pool type (the macros pass t, HD, G). */
static inline __attribute__((always_inline)) void tile_dec_b16(const nb_attn_tile *t, const int HD, const int G) {
    tile_dec_bf16(t, HD, G, NB_KVT_BF16);
}
static inline __attribute__((always_inline)) void tile_dec_q8(const nb_attn_tile *t, const int HD, const int G) {
    tile_dec_bf16(t, HD, G, NB_KVT_INT8);
}
static inline __attribute__((always_inline)) void tile_dec_f8(const nb_attn_tile *t, const int HD, const int G) {
    tile_dec_bf16(t, HD, G, NB_KVT_FP8);
}
NB_DEC_INSTANCES(NB_DEC_FNS16, tile_dec_b16)
NB_DEC_INSTANCES(NB_DEC_FNS16, tile_dec_q8)
NB_DEC_INSTANCES(NB_DEC_FNS16, tile_dec_f8)

/* bf16 KV without scales, and fp8 KV, with an even head size; anything
 * else takes the f32 kernel. */
static void attn_avx512_bf16(const nb_attn_tile *t) {
    const nb_attn_kv *kv = t->kv;
    const bool bf16 = kv->type == NB_KVT_BF16 && !kv->ks && !kv->vs, fp8 = kv->type == NB_KVT_FP8;
    if ((!bf16 && !fp8) || kv->head_dim % 2) {
        attn_avx512_f32(t);
        return;
    }
    if (t->nt * t->nq <= 8) {
        if (fp8) NB_DEC_RUN(NB_DEC_PICK16, tile_dec_f8, t);
        else NB_DEC_RUN(NB_DEC_PICK16, tile_dec_b16, t);
        return;
    }
    switch (NB_ATTN_HD(kv->head_dim)) {
    case 64: fp8 ? tile16_bf16(t, 64, 1) : tile16_bf16(t, 64, 0); return;
    case 128: fp8 ? tile16_bf16(t, 128, 1) : tile16_bf16(t, 128, 0); return;
    default: fp8 ? tile16_bf16(t, 0, 1) : tile16_bf16(t, 0, 0); return;
    }
}

/* ---- int8 KV with int8 dot products (AVX512_VNNI): attn_i8_impl.h ---- */


#define IX_FV __m512
#define IX_IV __m512i
#define IX_LOADF _mm512_loadu_ps
#define IX_STOREF _mm512_storeu_ps
#define IX_LOADI(p) _mm512_loadu_si512(p)
#define IX_STOREI(p, v) _mm512_storeu_si512(p, v)
#define IX_SETF _mm512_set1_ps
#define IX_SETI _mm512_set1_epi32
#define IX_ZEROF _mm512_setzero_ps
#define IX_ZEROI _mm512_setzero_si512
#define IX_ADD _mm512_add_ps
#define IX_SUB _mm512_sub_ps
#define IX_MUL _mm512_mul_ps
#define IX_MAX _mm512_max_ps
#define IX_FMADD _mm512_fmadd_ps
#define IX_FMSUB _mm512_fmsub_ps
#define IX_ABS _mm512_abs_ps
#define IX_CVTI2F _mm512_cvtepi32_ps
#define IX_CVTF2I _mm512_cvtps_epi32
#define IX_ADDI _mm512_add_epi32
#define IX_ORI _mm512_or_si512
#define IX_SLLI _mm512_slli_epi32
#define IX_ROUND(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define IX_SCALE2 _mm512_scalef_ps
#define IX_INVQ(mx) \
    _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(IX_QMAX), mx)
#define IX_OWN_MAX(mx, mn) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), mx, mn)
#define IX_ANY_GT(a, b) (_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) != 0)
#define IX_DPBUSD dpbusd_bcast
#define IX_KG KC
#define IX_MASK mask_chunk
#define IX_NC 8
#include "kernels/x86/attn_i8_impl.h"

/* int8 KV (with its scales) in tiles of more than 8 rows and a head size
 * that is a multiple of 16 (tile_i8_run); with BF16_DEC, decode tiles (8
 * rows or fewer, an even head size) with bf16 dots; anything else takes the
 * f32 kernel. */
static inline __attribute__((always_inline)) void attn_i8(const nb_attn_tile *t, const bool BF16_DEC) {
    const nb_attn_kv *kv = t->kv;
    if (BF16_DEC && kv->type == NB_KVT_INT8 && t->nt * t->nq <= 8 && kv->head_dim % 2 == 0) {
        NB_DEC_RUN(NB_DEC_PICK16, tile_dec_q8, t);
        return;
    }
    tile_i8_run(t, attn_avx512_f32);
}

nb_attn_fn nb_attn_avx512(void) { return attn_avx512_f32; }
static void attn_avx512_i8(const nb_attn_tile *t) { attn_i8(t, false); }
static void attn_avx512_i8_bf16(const nb_attn_tile *t) { attn_i8(t, true); }

nb_attn_fn nb_attn_avx512_int8(void) { return nb_cpu_get()->avx512vnni ? attn_avx512_i8 : NULL; }
nb_attn_fn nb_attn_avx512_int8_bf16(void) {
    return nb_cpu_get()->avx512vnni && nb_cpu_get()->avx512bf16 ? attn_avx512_i8_bf16 : NULL;
}
nb_attn_fn nb_attn_avx512_bf16(void) { return nb_cpu_get()->avx512bf16 ? attn_avx512_bf16 : NULL; }
