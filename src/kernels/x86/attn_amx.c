/* AMX flash attention for bf16 KV pools (attn.h nb_attn_amx_bf16): the
 * products on the tile unit (TDPBF16PS, 16 x 16 f32 sums of 32 bf16 pairs
 * per instruction), the online softmax on AVX-512, rows in the lanes as in
 * the other kernels.
 *
 * Why: a bf16 pool's prefill attention on AVX-512 runs at about 60% of
 * the FMA units' peak and still costs nearly as much per token as the
 * matmuls at 8k context; the tile unit does 16x the multiply-adds per
 * instruction (docs/speed.md, session 19).
 *
 * Numerics: those of the bf16-dot kernel (attn_avx512.c tile16_bf16): K
 * and V as stored, Q (times the scale) and the probabilities rounded to
 * bf16 to nearest even, sums, softmax and output in f32; only the order
 * of the sums inside a tile differs.
 *
 * Per chunk of KA = 32 keys (a paged block table read through
 * attn_chunk_rows), for each block of 16 query rows:
 *   S^T (32 keys x 16 rows) = K (keys x head dims) . Q^T
 *       A = the chunk's K rows (KB[32][hd]), B = Q^T as bf16 pairs of head
 *       elements (the QT area, converted in place as tile16_bf16 does),
 *       two C tiles of 16 keys each;
 *   the causal mask and online softmax per lane (row) on the 32 score
 *   vectors, O^T rescaled in memory when a row's max grew, P as bf16 pairs
 *   of keys (one B tile: 16 key pairs x 16 rows);
 *   O^T (head dims x 16 rows) += V^T . P, A = V^T (VT[hd][32 keys], built
 *       once per chunk by a 32-bit transpose of V's key pairs), C = O^T in
 *       the frame's OT layout, 16 head dims per tile.
 * Head sizes that are multiples of 32 (64, 128); other sizes, scaled or
 * other pools, and tiles of <= 8 rows (decode) over fewer than
 * AMX_DECODE_MIN_KEYS keys take the bf16-dot kernel
 * (which itself passes non-bf16 pools to the f32 one). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/cpu.h"
#include "kernels/x86/attn_tile.h"
#include "kernels/x86/vexp.h"

#define W 16
#define KA 32 /* keys per chunk: the 32 bf16 of one A-tile row */

/* The tile configuration (palette 1): every tile 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Tiles: C of the scores (keys 0-15, 16-31) and later of O^T; A of K and
 * later of V^T; B of Q^T; B of P. */
#define T_C0 0
#define T_C1 1
#define T_A0 2
#define T_A1 3
#define T_Q 4
#define T_P 5

static void tiles_begin(void) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 6; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* r[c] = column c of the 16 x 16 matrix of 32-bit words whose rows were r. */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* 128-bit lane k of u[i + m]: rows i..i+3, word 4k + m */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        const __m512i p = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44), q = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
        const __m512i p2 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xee), q2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xee);
        r[m] = _mm512_shuffle_i32x4(p, q, 0x88);
        r[4 + m] = _mm512_shuffle_i32x4(p, q, 0xdd);
        r[8 + m] = _mm512_shuffle_i32x4(p2, q2, 0x88);
        r[12 + m] = _mm512_shuffle_i32x4(p2, q2, 0xdd);
    }
}

/* 16 bf16 of a V row from element j as the low halves of 32-bit words (0 without a row). */
static inline __m512i v16(const uint8_t *row, int j) {
    return row ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)))
               : _mm512_setzero_si512();
}

/* The chunk's keys k0 .. k0+KA-1 (zeros past the last): K rows into KB,
 * V^T as key pairs into VT[j][kp] (32-bit words: keys 2kp, 2kp+1). */
static void chunk_load(const nb_attn_tile *t, int hd, int32_t k0, uint16_t *KB, uint32_t *VT) {
    const uint8_t *kr[KA], *vr[KA];
    int64_t idx[KA];
    const int nk = attn_chunk_rows(t, hd, k0, KA, kr, vr, idx);
    for (int c = 0; c < KA; c++) {
        if (c < nk) memcpy(KB + (size_t)c * hd, kr[c], (size_t)hd * 2);
        else memset(KB + (size_t)c * hd, 0, (size_t)hd * 2);
        if (c >= nk) vr[c] = NULL;
    }
    for (int j = 0; j < hd; j += 16) {
        __m512i r[16];
        for (int kp = 0; kp < 16; kp++)
            r[kp] = _mm512_or_si512(v16(vr[2 * kp], j), _mm512_slli_epi32(v16(vr[2 * kp + 1], j), 16));
        transpose16(r);
        for (int i = 0; i < 16; i++) _mm512_storeu_si512(VT + (size_t)(j + i) * 16, r[i]);
    }
}

/* The causal mask (on the diagonal chunk), the online softmax of one
 * block's 32 score vectors S[c] (rows in lanes), P as bf16 key pairs; the
 * factor O^T must be rescaled by is returned. */
static inline __attribute__((always_inline)) __m512 softmax32(const float *S, uint32_t *P, const int32_t *PS, int rb,
                                                              int32_t k0, float *M, float *L, __m512i idx) {
    const __m512i pv = _mm512_loadu_si512(PS + rb * W);
    const bool edge = k0 + KA - 1 > PS[rb * W];
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 s[KA];
    __m512 mx = ninf;
#pragma GCC unroll 32
    for (int c = 0; c < KA; c++) {
        s[c] = _mm512_load_ps(S + c * W);
        if (edge)
            s[c] = _mm512_mask_blend_ps(_mm512_cmp_epi32_mask(_mm512_set1_epi32(k0 + c), pv, _MM_CMPINT_LE), ninf, s[c]);
        mx = _mm512_max_ps(mx, s[c]);
    }
    const __m512 mo = _mm512_loadu_ps(M + rb * W), mn = _mm512_max_ps(mo, mx);
    const __m512 corr = nb_exp16(_mm512_sub_ps(mo, mn));
    _mm512_storeu_ps(M + rb * W, mn);
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int kp = 0; kp < KA / 2; kp++) {
        const __m512 e0 = nb_exp16(_mm512_sub_ps(s[2 * kp], mn)), e1 = nb_exp16(_mm512_sub_ps(s[2 * kp + 1], mn));
        sum = _mm512_add_ps(_mm512_add_ps(sum, e0), e1);
        _mm512_store_si512(P + kp * W, bf16_pairs(e0, e1, idx));
    }
    _mm512_storeu_ps(L + rb * W, _mm512_fmadd_ps(_mm512_loadu_ps(L + rb * W), corr, sum));
    return corr;
}

static void tile_amx(const nb_attn_tile *t) {
    attn_frame f;
    attn_frame_begin(t, t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB;
    const __m512i idx = _mm512_load_si512(attn_pair_idx);
    float *OT = f.OT, *M = f.M, *L = f.L;
    const int32_t *PS = f.PS;
    attn_qt_bf16_pairs(&f, idx);
    /* KB (KA x hd bf16) in Kf, VT (hd x KA bf16) in Vf, the scores and P after them */
    uint16_t *KB = (uint16_t *)(void *)f.Kf;
    uint32_t *VT = (uint32_t *)(void *)f.Vf;
    float *S = f.extra;                          /* [KA][W], 64-byte aligned */
    uint32_t *P = (uint32_t *)(void *)(S + KA * W); /* [KA / 2][W] */
    const size_t kstride = (size_t)hd * 2;
    tiles_begin();
    for (int32_t k0 = 0; k0 <= f.last; k0 += KA) {
        chunk_load(t, hd, k0, KB, VT);
        for (int rb = 0; rb < RB; rb++) {
            if (PS[rb * W + W - 1] < k0) continue; /* these rows' keys ended in an earlier chunk */
            const float *qp = f.QT + (size_t)rb * hd * W;
            float *ot = OT + (size_t)rb * hd * W;
            _tile_zero(T_C0);
            _tile_zero(T_C1);
            for (int d = 0; d < hd; d += 32) { /* 32 head elements: 16 pairs of Q^T, one K-tile row */
                _tile_loadd(T_Q, qp + (size_t)d / 2 * W, 64);
                _tile_loadd(T_A0, KB + d, kstride);
                _tile_loadd(T_A1, KB + (size_t)16 * hd + d, kstride);
                _tile_dpbf16ps(T_C0, T_A0, T_Q);
                _tile_dpbf16ps(T_C1, T_A1, T_Q);
            }
            _tile_stored(T_C0, S, 64);
            _tile_stored(T_C1, S + 16 * W, 64);
            const __m512 corr = softmax32(S, P, PS, rb, k0, M, L, idx);
            if (_mm512_cmp_ps_mask(corr, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ))
                for (int j = 0; j < hd; j++) _mm512_storeu_ps(ot + j * W, _mm512_mul_ps(_mm512_loadu_ps(ot + j * W), corr));
            _tile_loadd(T_P, P, 64);
            for (int j = 0; j < hd; j += 32) { /* 16 head elements per C tile */
                _tile_loadd(T_C0, ot + (size_t)j * W, 64);
                _tile_loadd(T_A0, VT + (size_t)j * 16, 64);
                _tile_loadd(T_C1, ot + (size_t)(j + 16) * W, 64);
                _tile_loadd(T_A1, VT + (size_t)(j + 16) * 16, 64);
                _tile_dpbf16ps(T_C0, T_A0, T_P);
                _tile_dpbf16ps(T_C1, T_A1, T_P);
                _tile_stored(T_C0, ot + (size_t)j * W, 64);
                _tile_stored(T_C1, ot + (size_t)(j + 16) * W, 64);
            }
        }
    }
    _tile_release();
    attn_frame_end(t, &f, W, 0);
}

static nb_attn_fn fallback;

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
        tile_amx(t);
}

nb_attn_fn nb_attn_amx_bf16(void) {
    const nb_cpu *c = nb_cpu_get();
    if (!c->amx_bf16 || !(fallback = nb_attn_avx512_bf16())) return NULL;
    return attn_amx_bf16;
}
