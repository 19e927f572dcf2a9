/* AMX flash attention (attn.h nb_attn_amx_bf16, nb_attn_amx_split): the
 * products on the tile unit (TDPBF16PS, 16 x 16 f32 sums of 32 bf16 pairs
 * per instruction), the online softmax on AVX-512, rows in the lanes as in
 * the other kernels.
 *
 * Why: prefill attention on AVX-512 runs at about 60% of the FMA units'
 * peak and still costs nearly as much per token as the matmuls at 8k
 * context; the tile unit does 16x the multiply-adds per instruction
 * (docs/speed.md, sessions 19 and 24).
 *
 * Numerics, two kinds from one kernel (tile_amx_t):
 * - bf16 pools (nb_attn_amx_bf16): those of the bf16-dot kernel
 *   (attn_avx512.c tile16_bf16): K and V as stored, Q (times the scale)
 *   and the probabilities rounded to bf16 to nearest even, sums, softmax
 *   and output in f32; only the order of the sums inside a tile differs.
 * - any pool (nb_attn_amx_split, split bf16): an f32 x is hi = bf16(x) to
 *   nearest even plus lo = bf16(x - hi), x - hi - lo below 2^-16 |x|; a
 *   product a.b is ah.bh + ah.bl + al.bh (the al.bl term, below 2^-16
 *   |a.b|, is dropped), each pass exact in its f32 sum. Q and P always
 *   split; K and V of f32 and f16 pools too, while bf16 values and the
 *   int8 / fp8 codes are exact in bf16 (their per-slot scales go onto the
 *   scores and into P). Three passes for f32 / f16 pools, two for the
 *   others; against the scalar reference within the f32 kernels' own
 *   tolerance (test_attn_long: 4.6e-6 relative at worst).
 *
 * Per chunk of KA = 32 keys (a paged block table read through
 * attn_chunk_rows), for each block of 16 query rows:
 *   S^T (32 keys x 16 rows) = K (keys x head dims) . Q^T
 *       A = the chunk's K rows (KH[32][hd], KL), B = Q^T as bf16 pairs of
 *       head elements (the QT area, converted in place), two C tiles of 16
 *       keys each, issued step by step during the previous block's softmax;
 *   the causal mask and online softmax per lane (row) on the 32 score
 *   vectors, in base 2 (log2 e folded into Q's scale: nb_exp2_16), against
 *   the rows' running maximum as it stands while no probability exceeds
 *   2^16, else with the new maximum and O^T rescaled in memory (softmax32),
 *   P as bf16 pairs of keys (one B tile: 16 key pairs x 16 rows; split: two);
 *   O^T (head dims x 16 rows) += V^T . P, A = V^T (VH[hd][32 keys], VL,
 *       built once per chunk by a 32-bit transpose of V's key pairs),
 *       C = O^T in the frame's OT layout, 16 head dims per tile.
 * Head sizes that are multiples of 32 (64, 128); other sizes, and tiles of
 * <= 8 rows (decode; the bf16 kernel's only below AMX_DECODE_MIN_KEYS
 * keys), take the fallback: for bf16 pools the bf16-dot kernel (which
 * itself passes non-bf16 pools to the f32 one), for the split kernel the
 * f32 one. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/cpu.h"
#include "kernels/x86/amx_tiles.h"
#include "kernels/x86/attn_tile.h"
#include "kernels/x86/transpose16.h"
#include "kernels/x86/vexp.h"

#define W 16
#define KA 32 /* keys per chunk: the 32 bf16 of one A-tile row */


/* Tiles: C of O^T; A of K and of V^T; B of Q^T (hi) and of P (lo), B of
 * Q^T (lo) and of P (hi); C of the scores (keys 0-15, 16-31). */
#define T_C0 0
#define T_C1 1
#define T_A0 2
#define T_A1 3
#define T_Q 4
#define T_P 5
#define T_S0 6
#define T_S1 7

/* Every tile 16 rows of 64 bytes. */
static void tiles_begin(void) {
    nb_tile_config c;
    memset(&c, 0, sizeof c);
    nb_tile_shape(&c, 0, 8, 16, 64);
    nb_tiles_load(&c);
}

/* x rounded to bf16 (to nearest even), back as f32. */
static inline __m512 bf16_round(__m512 x) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)), 16));
}

/* The hi pairs of (a, b) (bf16_pairs) into *hi, the lo pairs returned: the
 * hi halves back as f32 are the pairs' words shifted and masked. */
static inline __m512i split_pairs(__m512 a, __m512 b, __m512i idx, __m512i *hi) {
    const __m512i h = bf16_pairs(a, b, idx);
    *hi = h;
    const __m512 ah = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)),
                 bh = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32((int)0xffff0000u)));
    return bf16_pairs(_mm512_sub_ps(a, ah), _mm512_sub_ps(b, bh), idx);
}

/* 16 elements of a row as f32 (zeros without a row). */
static inline __attribute__((always_inline)) __m512 elems16(nb_kv_type t, const uint8_t *row, int j) {
    return row ? attn_load16(t, row, j) : _mm512_setzero_ps();
}

/* Whether a type's values need a lo half (are not exact in bf16). */
static inline bool needs_lo(nb_kv_type t) { return t == NB_KVT_F32 || t == NB_KVT_F16; }

/* The chunk's keys k0 .. k0+KA-1 (zeros past the last): K rows as bf16 hi
 * (and lo where the type needs one) into KH (KL), V^T as key pairs into
 * VH (VL), VT[j][kp] holding keys 2kp, 2kp+1 of head element j (a 32-bit
 * transpose of V's key pairs); the slots' scales into ksc / vsc (1 for
 * unscaled pools, 0 past the last key). */
static inline __attribute__((always_inline)) void chunk_load(const nb_attn_tile *t, nb_kv_type type, int hd,
                                                             int32_t k0, uint16_t *KH, uint16_t *KL, uint32_t *VH,
                                                             uint32_t *VL, float *ksc, float *vsc) {
    const nb_attn_kv *kv = t->kv;
    const uint8_t *kr[KA], *vr[KA];
    int64_t idx[KA];
    const int nk = attn_chunk_rows(t, hd, k0, KA, kr, vr, idx, NULL);
    const int lo = needs_lo(type);
    for (int c = 0; c < KA; c++) {
        if (c >= nk) {
            memset(KH + (size_t)c * hd, 0, (size_t)hd * 2);
            if (lo) memset(KL + (size_t)c * hd, 0, (size_t)hd * 2);
            vr[c] = NULL;
            ksc[c] = vsc[c] = 0;
            continue;
        }
        ksc[c] = kv->ks ? kv->ks[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
        vsc[c] = kv->vs ? kv->vs[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
        if (type == NB_KVT_BF16) {
            memcpy(KH + (size_t)c * hd, kr[c], (size_t)hd * 2);
            continue;
        }
        for (int j = 0; j < hd; j += 16) {
            const __m512 x = attn_load16(type, kr[c], j);
            _mm256_storeu_si256((__m256i *)(void *)(KH + (size_t)c * hd + j), (__m256i)_mm512_cvtneps_pbh(x));
            if (lo)
                _mm256_storeu_si256((__m256i *)(void *)(KL + (size_t)c * hd + j),
                                    (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, bf16_round(x))));
        }
    }
    /* V's key pairs, hi and lo from one load: r[kp] lane i = keys 2kp,
     * 2kp+1 of head element j+i; transposed to rows of head elements */
    const __m512i pidx = _mm512_load_si512(attn_pair_idx);
    for (int j = 0; j < hd; j += 16) {
        __m512i rh[16], rl[16];
        for (int kp = 0; kp < 16; kp++) {
            const __m512 a = elems16(type, vr[2 * kp], j), b = elems16(type, vr[2 * kp + 1], j);
            if (lo) rl[kp] = split_pairs(a, b, pidx, &rh[kp]);
            else rh[kp] = bf16_pairs(a, b, pidx);
        }
        nb_transpose16(rh, rh);
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(VH + (size_t)(j + i) * 16, rh[i]);
        if (!lo) continue;
        nb_transpose16(rl, rl);
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(VL + (size_t)(j + i) * 16, rl[i]);
    }
}

/* The frame's Q^T blocks (f32, [hd][16]) as bf16 pairs of head elements,
 * hi pairs in the block's first hd/2 rows, lo pairs in the rest. */
static void qt_split_pairs(const attn_frame *f, __m512i idx) {
    const int hd = f->hd;
    uint32_t tmp[NB_ATTN_AMX_SPLIT_MAX_HD * 16] __attribute__((aligned(64)));
    for (int rb = 0; rb < f->RB; rb++) {
        float *qt = f->QT + (size_t)rb * hd * 16;
        for (int j2 = 0; j2 < hd / 2; j2++) {
            __m512i h;
            const __m512i l =
                split_pairs(_mm512_loadu_ps(qt + 2 * j2 * 16), _mm512_loadu_ps(qt + (2 * j2 + 1) * 16), idx, &h);
            _mm512_store_si512(tmp + j2 * 16, h);
            _mm512_store_si512(tmp + (hd / 2 + j2) * 16, l);
        }
        memcpy(qt, tmp, (size_t)hd * 16 * sizeof *tmp);
    }
}

/* A block's scores into T_S0 / T_S1 (keys 0-15, 16-31) as a sequence of
 * groups, each one tile product per C tile: for each 32 head elements d,
 * K hi . Q^T hi, then K hi . Q^T lo (split), then K lo . Q^T hi (klo),
 * in that order (each reuses the tiles the one before it loaded). qp: the
 * block's Q^T hi pairs (lo pairs hd / 2 rows on). */
typedef struct scores_seq {
    const float *qp; /* NULL: no block */
    const uint16_t *KH, *KL;
    int hd, passes, groups; /* passes per 32 head elements: 1 + split + klo */
} scores_seq;

static inline scores_seq scores_of(const float *qp, const uint16_t *KH, const uint16_t *KL, int hd, int split,
                                   int klo) {
    const int passes = 1 + split + klo;
    return (scores_seq){qp, KH, KL, hd, passes, hd / 32 * passes};
}

static inline __attribute__((always_inline)) void scores_group(const scores_seq *q, int g) {
    const int d = g / q->passes * 32, pass = g % q->passes;
    const size_t kstride = (size_t)q->hd * 2;
    if (g == 0) {
        _tile_zero(T_S0);
        _tile_zero(T_S1);
    }
    if (pass == 0) {
        _tile_loadd(T_Q, q->qp + (size_t)d / 2 * W, 64);
        _tile_loadd(T_A0, q->KH + d, kstride);
        _tile_loadd(T_A1, q->KH + (size_t)16 * q->hd + d, kstride);
        _tile_dpbf16ps(T_S0, T_A0, T_Q);
        _tile_dpbf16ps(T_S1, T_A1, T_Q);
    } else if (pass == 1) { /* Q^T lo (split) */
        _tile_loadd(T_P, q->qp + (size_t)(q->hd + d) / 2 * W, 64);
        _tile_dpbf16ps(T_S0, T_A0, T_P);
        _tile_dpbf16ps(T_S1, T_A1, T_P);
    } else { /* K lo (klo) */
        _tile_loadd(T_A0, q->KL + d, kstride);
        _tile_loadd(T_A1, q->KL + (size_t)16 * q->hd + d, kstride);
        _tile_dpbf16ps(T_S0, T_A0, T_Q);
        _tile_dpbf16ps(T_S1, T_A1, T_Q);
    }
}

/* The groups of the next block's scores due at key pair kp (0..KA/2-1) of
 * a block's softmax, spread evenly over the 16 key pairs: the tile unit
 * always has work queued, never so much that tile instructions fill the
 * reorder window ahead of the vector work (hd 64, f32 pool: 6 groups, one
 * per two or three key pairs; against all of them at once before the
 * softmax, 7-8% less time per tile in bench_attn; docs/speed.md, session 28). */
static inline __attribute__((always_inline)) void scores_due(const scores_seq *q, int kp) {
    if (!q->qp) return;
    for (int g = (kp * q->groups + KA / 2 - 1) / (KA / 2); g < ((kp + 1) * q->groups + KA / 2 - 1) / (KA / 2); g++)
        scores_group(q, g);
}

/* The scores of one block's chunk (rows in lanes), scaled: times the
 * slots' K scales; edge (the diagonal chunk): the causal mask applied. */
static inline __attribute__((always_inline)) __m512 score(const float *S, int c, const float *ksc, int scaled,
                                                          bool edge, int32_t k0, __m512i pv) {
    __m512 s = _mm512_load_ps(S + c * W);
    if (scaled) s = _mm512_mul_ps(s, _mm512_set1_ps(ksc[c]));
    if (edge)
        s = _mm512_mask_blend_ps(_mm512_cmp_epi32_mask(_mm512_set1_epi32(k0 + c), pv, _MM_CMPINT_LE),
                                 _mm512_set1_ps(-INFINITY), s);
    return s;
}

/* Probabilities e0, e1 of keys 2kp, 2kp+1 (times the slots' V scales when
 * scaled) as bf16 key pairs into PH (split: and the lo pairs into PL). */
static inline __attribute__((always_inline)) void store_pair(__m512 e0, __m512 e1, int kp, uint32_t *PH, uint32_t *PL,
                                                             const float *vsc, __m512i idx, int scaled, int split) {
    if (scaled) {
        e0 = _mm512_mul_ps(e0, _mm512_set1_ps(vsc[2 * kp]));
        e1 = _mm512_mul_ps(e1, _mm512_set1_ps(vsc[2 * kp + 1]));
    }
    if (split) {
        __m512i h;
        _mm512_store_si512(PL + kp * W, split_pairs(e0, e1, idx, &h));
        _mm512_store_si512(PH + kp * W, h);
    } else {
        _mm512_store_si512(PH + kp * W, bf16_pairs(e0, e1, idx));
    }
}

/* A block's online softmax over one chunk, in base 2 (the scores are in
 * units of log2 e, M and L too), rows in lanes: P into PH / PL, L summed
 * from the unscaled probabilities; returns the factor O^T must be rescaled
 * by.
 *
 * First the cheap path: P = 2^(s - M) against each row's running maximum
 * as it stands, no maximum taken, nothing rescaled. It holds when every
 * row's chunk sum stays within 2^16 (so no probability exceeds 2^16: M is
 * still a safe reference, the sums and O^T far from overflow, and every
 * product keeps its relative precision). Otherwise (a row's first chunk,
 * where M is -inf; a score more than 16 above its row's M; a NaN) the
 * exact path takes the chunk again from S: the new maximum, M updated, the
 * factor returned. The diagonal chunk (edge: the causal mask, and past the
 * last key the only place zero key rows occur) goes to the exact path
 * directly. Why: after a row's first keys
 * its maximum rarely grows by 2^16, so most chunks skip the maximum, the
 * correction's exponential and the rescale of O^T (whose rows would be
 * rescaled whenever any of the 16 rows' maximum grew at all); the results
 * differ from always rescaling only in rounding. */
static inline __attribute__((always_inline)) __m512 softmax32(const float *S, uint32_t *PH, uint32_t *PL,
                                                              const float *ksc, const float *vsc, const int32_t *PS,
                                                              int rb, int32_t k0, float *M, float *L, __m512i idx,
                                                              int scaled, int split, const scores_seq *next) {
    const __m512i pv = _mm512_loadu_si512(PS + rb * W);
    const bool edge = k0 + KA - 1 > PS[rb * W];
    const __m512 mo = _mm512_loadu_ps(M + rb * W);
    if (!edge && !_mm512_cmp_ps_mask(mo, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ)) {
        __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int kp = 0; kp < KA / 2; kp++) {
            scores_due(next, kp);
            const __m512 e0 = nb_exp2_16(_mm512_sub_ps(score(S, 2 * kp, ksc, scaled, false, k0, pv), mo)),
                         e1 = nb_exp2_16(_mm512_sub_ps(score(S, 2 * kp + 1, ksc, scaled, false, k0, pv), mo));
            sum = _mm512_add_ps(_mm512_add_ps(sum, e0), e1);
            store_pair(e0, e1, kp, PH, PL, vsc, idx, scaled, split);
        }
        if (!_mm512_cmp_ps_mask(sum, _mm512_set1_ps(65536.0f), _CMP_NLE_UQ)) {
            _mm512_storeu_ps(L + rb * W, _mm512_add_ps(_mm512_loadu_ps(L + rb * W), sum));
            return _mm512_set1_ps(1.0f);
        }
    } else {
        for (int kp = 0; kp < KA / 2; kp++) scores_due(next, kp);
    }
    __m512 s[KA];
    __m512 mx = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 32
    for (int c = 0; c < KA; c++) {
        s[c] = score(S, c, ksc, scaled, edge, k0, pv);
        mx = _mm512_max_ps(mx, s[c]);
    }
    const __m512 mn = _mm512_max_ps(mo, mx);
    const __m512 corr = nb_exp2_16(_mm512_sub_ps(mo, mn));
    _mm512_storeu_ps(M + rb * W, mn);
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int kp = 0; kp < KA / 2; kp++) {
        const __m512 e0 = nb_exp2_16(_mm512_sub_ps(s[2 * kp], mn)), e1 = nb_exp2_16(_mm512_sub_ps(s[2 * kp + 1], mn));
        sum = _mm512_add_ps(_mm512_add_ps(sum, e0), e1);
        store_pair(e0, e1, kp, PH, PL, vsc, idx, scaled, split);
    }
    _mm512_storeu_ps(L + rb * W, _mm512_fmadd_ps(_mm512_loadu_ps(L + rb * W), corr, sum));
    return corr;
}

/* One tile on the tile unit. split: Q and P in hi + lo (nb_attn_amx_split),
 * else rounded to bf16 (nb_attn_amx_bf16, bf16 pools). Per chunk of KA
 * keys, for each active block of 16 rows: the block's scores were issued
 * to T_S0 / T_S1 during the previous block's softmax (scores_due: the tile
 * unit computes them while the vector units run it); they are stored, then
 * this block's softmax issues the next block's scores, O^T is rescaled in
 * memory when the exact path moved a row's max, and O^T (head dims x 16
 * rows) += V^T . P with C = O^T in the frame's OT layout, 16 head dims per
 * tile. */
static inline __attribute__((always_inline)) void tile_amx_t(const nb_attn_tile *t, nb_kv_type type, int split) {
    attn_frame f;
    attn_frame_begin(t, t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB, klo = split && needs_lo(type), vlo = klo, scaled = t->kv->ks != NULL;
    const __m512i idx = _mm512_load_si512(attn_pair_idx);
    float *OT = f.OT, *M = f.M, *L = f.L;
    const int32_t *PS = f.PS;
    attn_qt_base2(&f, W); /* the softmax runs in base 2: it is about half of this kernel's time */
    if (split) qt_split_pairs(&f, idx);
    else attn_qt_bf16_pairs(&f, idx);
    /* KH, KL (KA x hd bf16 each) in Kf and Vf; after them V^T hi and lo
     * (hd x KA bf16 each), the slots' scales, the scores and P hi / lo */
    uint16_t *KH = (uint16_t *)(void *)f.Kf, *KL = (uint16_t *)(void *)f.Vf;
    uint32_t *VH = (uint32_t *)(void *)f.extra, *VL = VH + (size_t)hd * 16;
    float *ksc = (float *)(void *)(VL + (size_t)hd * 16), *vsc = ksc + KA;
    float *S = vsc + KA;                                   /* [KA][W], 64-byte aligned */
    uint32_t *PH = (uint32_t *)(void *)(S + KA * W), *PL = PH + KA / 2 * W;
    const size_t qstride = (size_t)hd * W;                 /* floats from one block's Q^T to the next */
    tiles_begin();
    for (int32_t k0 = 0; k0 <= f.last; k0 += KA) {
        chunk_load(t, type, hd, k0, KH, KL, VH, VL, ksc, vsc);
        int rb = 0; /* blocks whose rows' keys ended in an earlier chunk come first (positions grow with rows) */
        while (rb < RB && PS[rb * W + W - 1] < k0) rb++;
        if (rb < RB) {
            const scores_seq first = scores_of(f.QT + rb * qstride, KH, KL, hd, split, klo);
            for (int g = 0; g < first.groups; g++) scores_group(&first, g);
        }
        for (; rb < RB; rb++) {
            float *ot = OT + (size_t)rb * hd * W;
            _tile_stored(T_S0, S, 64);
            _tile_stored(T_S1, S + 16 * W, 64);
            const scores_seq next = scores_of(rb + 1 < RB ? f.QT + (rb + 1) * qstride : NULL, KH, KL, hd, split, klo);
            const __m512 corr = scaled ? softmax32(S, PH, PL, ksc, vsc, PS, rb, k0, M, L, idx, 1, split, &next)
                                       : softmax32(S, PH, PL, ksc, vsc, PS, rb, k0, M, L, idx, 0, split, &next);
            if (_mm512_cmp_ps_mask(corr, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ))
                for (int j = 0; j < hd; j++) _mm512_storeu_ps(ot + j * W, _mm512_mul_ps(_mm512_loadu_ps(ot + j * W), corr));
            _tile_loadd(T_P, PH, 64);
            if (split) _tile_loadd(T_Q, PL, 64);
            for (int j = 0; j < hd; j += 32) { /* 16 head elements per C tile */
                _tile_loadd(T_C0, ot + (size_t)j * W, 64);
                _tile_loadd(T_C1, ot + (size_t)(j + 16) * W, 64);
                _tile_loadd(T_A0, VH + (size_t)j * 16, 64);
                _tile_loadd(T_A1, VH + (size_t)(j + 16) * 16, 64);
                _tile_dpbf16ps(T_C0, T_A0, T_P);
                _tile_dpbf16ps(T_C1, T_A1, T_P);
                if (split) {
                    _tile_dpbf16ps(T_C0, T_A0, T_Q);
                    _tile_dpbf16ps(T_C1, T_A1, T_Q);
                }
                if (vlo) {
                    _tile_loadd(T_A0, VL + (size_t)j * 16, 64);
                    _tile_loadd(T_A1, VL + (size_t)(j + 16) * 16, 64);
                    _tile_dpbf16ps(T_C0, T_A0, T_P);
                    _tile_dpbf16ps(T_C1, T_A1, T_P);
                }
                _tile_stored(T_C0, ot + (size_t)j * W, 64);
                _tile_stored(T_C1, ot + (size_t)(j + 16) * W, 64);
            }
        }
    }
    _tile_release();
    attn_frame_end(t, &f, W, 1);
}

/* One instance per pool type (and numerics), so the element loads compile
 * to one loop each. */
static __attribute__((noinline)) void tile_amx_bf16(const nb_attn_tile *t) { tile_amx_t(t, NB_KVT_BF16, 0); }

static __attribute__((noinline)) void tile_amx_split(const nb_attn_tile *t) {
    switch (t->kv->type) {
    case NB_KVT_F32: tile_amx_t(t, NB_KVT_F32, 1); break;
    case NB_KVT_F16: tile_amx_t(t, NB_KVT_F16, 1); break;
    case NB_KVT_BF16: tile_amx_t(t, NB_KVT_BF16, 1); break;
    case NB_KVT_INT8: tile_amx_t(t, NB_KVT_INT8, 1); break;
    case NB_KVT_FP8: tile_amx_t(t, NB_KVT_FP8, 1); break;
    }
}

static nb_attn_fn fallback, split_fallback, int8_fallback;

/* Decode tiles (<= 8 rows: one token's GQA group) fill half a tile or less,
 * and the tile setup costs about 2 us a call: below this many keys the
 * bf16-dot kernel's decode lanes are faster, above it the tile unit
 * (bench/bench_attn.c 1 token x 8 heads, head_dim 64, one thread on the
 * Intel guest of session 20: 64 keys 0.002 vs 0.004 ms, 512 keys 0.014
 * vs 0.011, 4096 keys 0.113 vs 0.065). */
#define AMX_DECODE_MIN_KEYS 512

static void attn_amx_bf16(const nb_attn_tile *t) {
    const nb_attn_kv *kv = t->kv;
    const int decode = t->nt * t->nq <= 8;
    if (kv->type != NB_KVT_BF16 || kv->ks || kv->vs || kv->head_dim % 32 ||
        (decode && t->pos0 + t->nt < AMX_DECODE_MIN_KEYS))
        fallback(t);
    else
        tile_amx_bf16(t);
}

/* Prompt tiles (more than 8 rows) of a head size that is a multiple of 32
 * up to NB_ATTN_AMX_SPLIT_MAX_HD; decode tiles (memory-bound, the f32
 * kernel's own lanes) and other sizes take the f32 AVX-512 kernel. */
static bool split_takes(const nb_attn_tile *t) {
    const int hd = t->kv->head_dim;
    return t->nt * t->nq > 8 && hd % 32 == 0 && hd <= NB_ATTN_AMX_SPLIT_MAX_HD;
}

static void attn_amx_split(const nb_attn_tile *t) {
    if (split_takes(t)) tile_amx_split(t);
    else split_fallback(t);
}

static void attn_amx_split_int8(const nb_attn_tile *t) {
    if (split_takes(t)) tile_amx_split(t);
    else int8_fallback(t);
}

nb_attn_fn nb_attn_amx_split(void) {
    const nb_cpu *c = nb_cpu_get();
    if (!c->amx_bf16 || !(split_fallback = nb_attn_avx512())) return NULL;
    return attn_amx_split;
}

nb_attn_fn nb_attn_amx_split_int8(void) {
    if (!nb_attn_amx_split() || !(int8_fallback = nb_attn_avx512_int8())) return NULL;
    return attn_amx_split_int8;
}

nb_attn_fn nb_attn_amx_bf16(void) {
    const nb_cpu *c = nb_cpu_get();
    if (!c->amx_bf16 || !(fallback = nb_attn_avx512_bf16())) return NULL;
    return attn_amx_bf16;
}
