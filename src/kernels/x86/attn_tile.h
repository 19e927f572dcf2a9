/* The scalar frame both x86 flash-attention kernels share (attn_avx2.c,
 * attn_avx512.c): the scratch layout, Q transposed into W-row blocks, the
 * K/V chunk converted to f32 once, and the final 1/L scaling. Only the
 * vector work on one block of W rows differs between the ISAs; each kernel
 * includes this after defining its row converter and passes W as a
 * constant, so everything here inlines to the same code as before. */
#ifndef NB_KERNELS_X86_ATTN_TILE_H
#define NB_KERNELS_X86_ATTN_TILE_H

#include <math.h>
#include <string.h>

#include "kernels/attn.h"

#define KC NB_ATTN_KC

/* The online softmax's running max M moves only when some row's chunk max
 * exceeds it by more than this (base 2): the probabilities then stay below
 * 2^ATTN_LAZY_MAX, where f32, bf16 and the int8 kernels' per-chunk scales
 * keep their relative precision, and once a long context's first keys have
 * set M almost every chunk leaves the partial output as it is instead of
 * rescaling it. The final 1/L is exact whatever M is. */
#define ATTN_LAZY_MAX 8.0f

/* hd elements of a row of type t, times sc, into dst (per ISA). */
typedef void (*attn_row_fn)(nb_kv_type t, const uint8_t *src, float sc, float *dst, int hd, const float *lut);

typedef struct attn_frame {
    int hd, R, RB;
    int32_t last;
    float *QT, *OT, *M, *L, *Kf, *Vf, *extra; /* extra: scratch after V, for the kernel's own use */
    int32_t *PS;                              /* each row's position (padding rows: the last one) */
} attn_frame;

/* Lays out the scratch and loads Q (times the scale) transposed: QT[rb][j][lane]. */
static inline __attribute__((always_inline)) void attn_frame_begin(const nb_attn_tile *t, int hd, int W,
                                                                   attn_frame *f) {
    const int nq = t->nq, R = t->nt * nq, RB = (R + W - 1) / W;
    f->hd = hd;
    f->R = R;
    f->RB = RB;
    f->last = t->pos0 + t->nt - 1;
    f->QT = t->scratch;
    f->OT = f->QT + (size_t)RB * hd * W;
    f->M = f->OT + (size_t)RB * hd * W;
    f->L = f->M + RB * W;
    f->PS = (int32_t *)(void *)(f->L + RB * W);
    f->Kf = (float *)(void *)(f->PS + RB * W);
    f->Vf = f->Kf + KC * hd;
    f->extra = f->Vf + KC * hd;
    for (int rb = 0; rb < RB; rb++)
        for (int ln = 0; ln < W; ln++) {
            const int r = rb * W + ln;
            float *qt = f->QT + (size_t)rb * hd * W + ln;
            if (r < R) {
                const int i = r / nq, h = r % nq;
                const float *q = t->q + (int64_t)i * t->q_stride + (int64_t)h * hd;
                for (int j = 0; j < hd; j++) qt[j * W] = q[j] * t->scale;
                f->PS[r] = t->pos0 + i;
            } else {
                for (int j = 0; j < hd; j++) qt[j * W] = 0;
                f->PS[r] = f->last;
            }
        }
    memset(f->OT, 0, (size_t)RB * hd * W * sizeof *f->OT);
    for (int r = 0; r < RB * W; r++) {
        f->M[r] = -INFINITY;
        f->L[r] = 0;
    }
}

/* The next chunk's K and V rows, for the decode tiles to prefetch a few
 * lines at a time while they compute the current chunk. Asked for all at
 * once (as the prefill tiles do, whose chunks carry many more rows of
 * arithmetic) they filled the line fill buffers and the chunk's
 * arithmetic waited behind them: at d4096 decode attention took about the
 * sum of its memory and its arithmetic time (docs/speed.md, session 25). */
typedef struct {
    const uint8_t *p[2 * NB_ATTN_KC_DECODE]; /* runs of whole lines: K, V, K, V, ... */
    int len[2 * NB_ATTN_KC_DECODE];           /* bytes of each */
    int n, lines;                             /* runs, lines in all */
    int r, off;                               /* the next line: run r, offset off */
} attn_pf;

/* The next `count` lines of the plan into the cache. */
static inline __attribute__((always_inline)) void attn_pf_step(attn_pf *p, int count) {
    for (int c = 0; c < count && p->r < p->n; c++) {
        __builtin_prefetch(p->p[p->r] + p->off);
        if ((p->off += 64) >= p->len[p->r]) p->off = 0, p->r++;
    }
}

/* The lines holding bytes [p, p + n) into the plan. */
static inline void attn_pf_add(attn_pf *pf, const uint8_t *p, int64_t n) {
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    const int len = (int)((uintptr_t)p + (uintptr_t)n - a);
    pf->p[pf->n] = (const uint8_t *)p - ((uintptr_t)p - a);
    pf->len[pf->n++] = len;
    pf->lines += (len + 63) / 64;
}

/* The rows of keys k0 .. k0+n-1 of the tile's head: kr / vr (and the slot
 * indices of the scales, idx) for the first nk (up to the tile's last key),
 * the count returned. The next n keys' rows go into the cache now, or,
 * with `spread` (n <= NB_ATTN_KC_DECODE), into its plan. A head's slots
 * are consecutive within a block (model/kv.h), so both walk the keys a
 * block's run at a time. */
static inline __attribute__((always_inline)) int attn_chunk_rows(const nb_attn_tile *t, int hd, int32_t k0, int n,
                                                                 const uint8_t **kr, const uint8_t **vr,
                                                                 int64_t *idx, attn_pf *spread) {
    (void)hd;
    const nb_attn_kv *kv = t->kv;
    const int32_t bs = kv->block_size, last = t->pos0 + t->nt - 1;
    const int64_t row = kv->row;
    const uint8_t *kh = kv->k, *vh = kv->v;
    const int nk = last - k0 + 1 < n ? last - k0 + 1 : n;
    /* the next chunk's rows: at long contexts K/V of a head no longer fit
     * in L2, and the block table breaks the hardware prefetcher's stride
     * every block_size keys */
    const int nn = last - (k0 + n) + 1 < n ? last - (k0 + n) + 1 : n;
    if (spread) spread->n = spread->lines = spread->r = spread->off = 0;
    for (int32_t c = 0, b = (k0 + n) / bs, o = (k0 + n) % bs; c < nn; b++, o = 0) {
        const int m = bs - o < nn - c ? bs - o : nn - c;
        const int64_t off = nb_attn_kv_off(kv, t->blocks[b], o, t->kvh);
        if (spread) {
            attn_pf_add(spread, kh + off, m * row);
            attn_pf_add(spread, vh + off, m * row);
        } else {
            for (int64_t i = 0; i < m * row; i += 64) {
                __builtin_prefetch(kh + off + i);
                __builtin_prefetch(vh + off + i);
            }
        }
        c += m;
    }
    for (int32_t c = 0, b = k0 / bs, o = k0 % bs; c < nk; b++, o = 0) {
        const int m = bs - o < nk - c ? bs - o : nk - c;
        const int64_t s0 = (int64_t)t->blocks[b] * bs + o, off = nb_attn_kv_off(kv, t->blocks[b], o, t->kvh);
        const uint8_t *kp = kh + off, *vp = vh + off;
        for (int i = 0; i < m; i++) {
            kr[c + i] = kp + i * row;
            vr[c + i] = vp + i * row;
            idx[c + i] = s0 + i;
        }
        c += m;
    }
    return nk;
}

/* Keys k0 .. k0+KC-1 (zeros past the last) into Kf and Vf, scales folded in. */
static inline __attribute__((always_inline)) void attn_frame_chunk(const nb_attn_tile *t, const attn_frame *f,
                                                                   int32_t k0, attn_row_fn row_f32) {
    const nb_attn_kv *kv = t->kv;
    const int hd = f->hd;
    const float *lut = nb_attn_fp8_table();
    const uint8_t *kr[KC], *vr[KC];
    int64_t idx[KC];
    const int nk = attn_chunk_rows(t, hd, k0, KC, kr, vr, idx, NULL);
    for (int c = 0; c < KC; c++) {
        if (c < nk) {
            const float ks = kv->ks ? kv->ks[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
            const float vs = kv->vs ? kv->vs[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
            row_f32(kv->type, kr[c], ks, f->Kf + c * hd, hd, lut);
            row_f32(kv->type, vr[c], vs, f->Vf + c * hd, hd, lut);
        } else {
            memset(f->Kf + c * hd, 0, (size_t)hd * sizeof *f->Kf);
            memset(f->Vf + c * hd, 0, (size_t)hd * sizeof *f->Vf);
        }
    }
}

/* out = O / L, rows back from the transposed blocks; base2: M and L are of
 * scores in units of log2 e (the int8-dot kernel's softmax in base 2). */
static inline __attribute__((always_inline)) void attn_frame_end(const nb_attn_tile *t, const attn_frame *f, int W,
                                                                 int base2) {
    const int hd = f->hd, nq = t->nq;
    for (int rb = 0; rb < f->RB; rb++) {
        const float *ot = f->OT + (size_t)rb * hd * W;
        for (int ln = 0; ln < W; ln++) {
            const int r = rb * W + ln;
            if (r >= f->R) break;
            const float inv = 1.0f / f->L[r];
            float *o = t->out + (int64_t)(r / nq) * t->out_stride + (int64_t)(r % nq) * hd;
            for (int j = 0; j < hd; j++) o[j] = ot[j * W + ln] * inv;
            if (t->lse) t->lse[r] = base2 ? (f->M[r] + log2f(f->L[r])) * 0.69314718f : f->M[r] + logf(f->L[r]);
        }
    }
}

#ifdef __AVX512F__
#include <immintrin.h>

/* 16 fp8 codes at p as bf16 bits in the low half of each 32-bit lane: the
 * bits of nb_attn_fp8_table's values (exact in bf16), by arithmetic where
 * a gather from the table made an fp8 pool's prompt tile about 10% slower
 * than a bf16 pool's (3-6% now: docs/speed.md, session 36) and its decode
 * tile 2.5x slower than an int8 pool's (session 37). e4m3's exponent bias
 * is 7 and bf16's 127, so a normal code's seven low bits shifted into
 * place plus 120 << 7 are its bf16 bits; exponent 0 (m x 2^-9 and zero)
 * comes from an 8-entry table, 0x7f is NaN, and the sign is moved over
 * last. */
static const int32_t fp8_subnormal_bf16[16] __attribute__((aligned(64))) = {
    0x0000, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60}; /* m x 2^-9, m = 0..7 */

static inline __m512i fp8_bf16x16(const uint8_t *p) {
    const __m512i code = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m512i em = _mm512_and_si512(code, _mm512_set1_epi32(0x7f));
    __m512i b = _mm512_add_epi32(_mm512_slli_epi32(em, 4), _mm512_set1_epi32(120 << 7));
    b = _mm512_mask_permutexvar_epi32(b, _mm512_cmplt_epu32_mask(em, _mm512_set1_epi32(8)), em,
                                      _mm512_load_si512(fp8_subnormal_bf16));
    b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7f)), _mm512_set1_epi32(0x7fc0));
    return _mm512_or_si512(b, _mm512_slli_epi32(_mm512_and_si512(code, _mm512_set1_epi32(0x80)), 8));
}

/* 16 fp8 codes at p as f32 (exact: the bf16 bits above, widened). */
static inline __m512 attn_fp8x16(const uint8_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(fp8_bf16x16(p), 16));
}

/* 16 elements of a row of type t from element j, as f32 (the 8-bit
 * pools' codes unscaled). */
static inline __attribute__((always_inline)) __m512 attn_load16(nb_kv_type t, const uint8_t *row, int j) {
    switch (t) {
    case NB_KVT_F32: return _mm512_loadu_ps((const float *)(const void *)row + j);
    case NB_KVT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j)));
    case NB_KVT_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)j))), 16));
    case NB_KVT_INT8:
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + j))));
    default: return attn_fp8x16(row + j);
    }
}


/* The frame's Q^T times log2 e, for the softmaxes kept in base 2 (M and L
 * in units of log2 e; nb_exp2_16 takes 9 operations where nb_exp16 takes
 * 16; attn_frame_end(..., base2 = 1) turns the log-sum-exp back). */
static inline void attn_qt_base2(const attn_frame *f, int W) {
    for (size_t i = 0; i < (size_t)f->RB * f->hd * W; i += 16)
        _mm512_storeu_ps(f->QT + i, _mm512_mul_ps(_mm512_loadu_ps(f->QT + i), _mm512_set1_ps(1.44269504088896341f)));
}
#endif

#ifdef __AVX512BF16__
#include <immintrin.h>

/* The element order of bf16_pairs: lane i of lo, then of hi. */
static const uint16_t attn_pair_idx[32] __attribute__((aligned(64))) = {
    0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* (lo[i], hi[i]) as bf16 pairs (to nearest even) in 32-bit lane i; idx
 * is attn_pair_idx loaded. */
static inline __m512i bf16_pairs(__m512 lo, __m512 hi, __m512i idx) {
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* The frame's Q^T (16 lanes) as bf16 pairs of head elements, in place:
 * pair j2 goes where element j2 was, below both elements it is made of,
 * so nothing is overwritten before it is read. */
static inline void attn_qt_bf16_pairs(const attn_frame *f, __m512i idx) {
    const int hd = f->hd;
    for (int rb = 0; rb < f->RB; rb++) {
        float *qt = f->QT + (size_t)rb * hd * 16;
        for (int j2 = 0; j2 < hd / 2; j2++)
            _mm512_storeu_si512(qt + j2 * 16, bf16_pairs(_mm512_loadu_ps(qt + 2 * j2 * 16),
                                                         _mm512_loadu_ps(qt + (2 * j2 + 1) * 16), idx));
    }
}
#endif

/* Decode tiles (rows r of a tile in lanes r * G .. r * G + G - 1, one key
 * of each group of G per lane): each lane's row position (padding lanes:
 * the last), running max and sum. */
static inline __attribute__((always_inline)) void dec_lanes_init(const nb_attn_tile *t, int W, int G, int32_t *PL,
                                                                 float *Mv, float *Lv) {
    const int R = t->nt * t->nq;
    for (int ln = 0; ln < W; ln++) {
        PL[ln] = ln / G < R ? t->pos0 + ln / G / t->nq : t->pos0 + t->nt - 1;
        Mv[ln] = -INFINITY;
        Lv[ln] = 0;
    }
}

/* out = O / L of a decode tile, each row's G lanes of O^T (OD[j][lane])
 * and of L added (a row's lanes share its max, Mv). */
static inline __attribute__((always_inline)) void dec_tile_end(const nb_attn_tile *t, int hd, int W, int G,
                                                               const float *OD, const float *Mv, const float *Lv) {
    const int R = t->nt * t->nq, nq = t->nq;
    for (int r = 0; r < R; r++) {
        float l = 0;
        for (int u = 0; u < G; u++) l += Lv[r * G + u];
        const float inv = 1.0f / l;
        if (t->lse) t->lse[r] = Mv[r * G] + logf(l);
        float *o = t->out + (int64_t)(r / nq) * t->out_stride + (int64_t)(r % nq) * hd;
        for (int j = 0; j < hd; j++) {
            float acc = 0;
            for (int u = 0; u < G; u++) acc += OD[j * W + r * G + u];
            o[j] = acc * inv;
        }
    }
}

/* Decode tiles: the template F(t, HD, G) compiled once per (head size 64,
 * 128 or run-time 0, G) as a separate, not inlined function F_HD_G (each
 * gets its own register allocation), and the run of a tile by the one with
 * G = lanes / (R rounded up to a power of 2), R = nt x nq rows. */
#define NB_DEC_FN(F, HD, G) \
    static __attribute__((noinline)) void F##_##HD##_##G(const nb_attn_tile *t) { F(t, HD, G); }
#define NB_DEC_FNS8(F, HD) NB_DEC_FN(F, HD, 2) NB_DEC_FN(F, HD, 4) NB_DEC_FN(F, HD, 8)
#define NB_DEC_FNS16(F, HD) NB_DEC_FNS8(F, HD) NB_DEC_FN(F, HD, 16)
#define NB_DEC_PICK8(F, HD, R) ((R) > 2 ? F##_##HD##_2 : (R) > 1 ? F##_##HD##_4 : F##_##HD##_8)
#define NB_DEC_PICK16(F, HD, R) ((R) > 4 ? F##_##HD##_2 : (R) > 2 ? F##_##HD##_4 : (R) > 1 ? F##_##HD##_8 : F##_##HD##_16)
/* The head sizes compiled as constants: 64 and 128 (every tile kernel's
 * switch over NB_ATTN_HD), the rest at run time (HD 0). Sanitizer builds
 * (make test-asan, test-tsan) compile the run-time one only: the same
 * source with HD a variable, which makes the same accesses; instrumented,
 * the 64/128 copies cost those builds' compile about a minute of CI's 2
 * cores. Release builds and their tests keep all three. */
#ifdef NB_SANITIZER_BUILD
#define NB_ATTN_HD(hd) 0
#define NB_DEC_INSTANCES(FNS, F) FNS(F, 0)
#define NB_DEC_RUN(PICK, F, t) PICK(F, 0, (t)->nt * (t)->nq)(t)
#else
#define NB_ATTN_HD(hd) (hd)
#define NB_DEC_INSTANCES(FNS, F) FNS(F, 64) FNS(F, 128) FNS(F, 0)
#define NB_DEC_RUN(PICK, F, t)                                       \
    do {                                                             \
        const int r_ = (t)->nt * (t)->nq;                            \
        switch ((t)->kv->head_dim) {                                 \
        case 64: PICK(F, 64, r_)(t); break;                          \
        case 128: PICK(F, 128, r_)(t); break;                        \
        default: PICK(F, 0, r_)(t); break;                           \
        }                                                            \
    } while (0)
#endif

#endif
