/* The int8-dot attention of int8 KV pools for prompt tiles, written once for
 * both vector widths (attn_avx512.c: W 16, AVX512_VNNI; attn_vnni_avx2.c:
 * W 8, AVX-VNNI). vpdpbusd adds four u8 x s8 products per lane per
 * instruction: a quarter of the f32 kernels' multiply instructions for
 * S = K Q^T and for O += V^T P. What it rounds (attn.h): each row of Q
 * (times the scale) to int8 with its own scale (max |q| / 127), and each
 * chunk's probabilities to u8: taken relative to the chunk's own max per
 * row (so that keys far below the running max keep their 8 bits), times
 * their key's V scale over the chunk's largest. K and V are the pool's
 * codes as stored; the scores' scales, the softmax, its sums and O stay
 * f32. The softmax is in base 2 (log2 e folded into Q's scales) with a
 * degree-4 polynomial for 2^f (relative error 4e-5, far under the
 * probabilities' 8 bits).
 *
 * Chunks are IKC = 32 keys: the scores in groups of IX_KG keys (one
 * accumulator each) to a stack buffer, then the softmax over the 32, then
 * one pass of P V with 8 vpdpbusd per output column before its conversion
 * and rescaling (skipped while a row's max holds).
 * Layouts: Q^T as QU[rb][j/4][lane], the bytes of head elements 4i..4i+3
 * of each row plus 128 (vpdpbusd's unsigned side: sum (q + 128) k = q.k +
 * 128 sum k, taken out per key by starting the accumulator at -128 sum k);
 * a chunk's K as KT[j/4][c] (a dword = four neighbouring elements of a key,
 * broadcast; one pointer and constant offsets for the group's keys); V as
 * VT[c/4][j], element j of keys 4i..4i+3 in the four bytes; P as the bytes
 * of four keys per row.
 *
 * Before including, a kernel defines W and:
 *   IX_FV, IX_IV               its float and integer vector types
 *   IX_LOADF / IX_STOREF, IX_LOADI / IX_STOREI (p [, v]), IX_SETF / IX_SETI (x), IX_ZEROF / IX_ZEROI ()
 *   IX_ADD, IX_SUB, IX_MUL, IX_MAX, IX_FMADD (a, b, c = a * b + c), IX_FMSUB (a * b - c), IX_ABS
 *   IX_CVTI2F, IX_CVTF2I (round to nearest), IX_ADDI, IX_ORI, IX_SLLI (v, n)
 *   IX_ROUND (x)               x rounded to the nearest integer, IX_SCALE2 (p, n): p x 2^n (n integral, >= -126)
 *   IX_INVQ (mx)               IX_QMAX / mx per lane, 0 where mx is 0
 *   IX_OWN_MAX (mx, mn)        mx, or mn in the lanes where mx is -inf
 *   IX_ANY_GT (a, b)           whether a > b in any lane
 *   IX_DPBUSD (acc *, u, p)    *acc += u (u8) x the four s8 at p, broadcast
 *   IX_KG                      keys per score group, IX_MASK (s, PS, rb, k0): the causal
 *                              mask of a group's IX_KG scores (rows rb*W..), returning their max
 *   IX_NC                      O columns per P V pass
 * and gets tile_i8(t, HD) (HD 0: run-time head size, a multiple of 16)
 * and tile_i8_run (the tiles it takes, the rest to a fallback). */
#ifndef NB_KERNELS_X86_ATTN_I8_IMPL_H
#define NB_KERNELS_X86_ATTN_I8_IMPL_H

/* The codes' ranges: Q's largest code and its unsigned offset, the
 * probabilities' largest byte. vpdpbusd takes the full 8 bits; a kernel
 * whose products go through int16 pairs (vpmaddubsw) sets 63 / 64 / 127,
 * so that no pair sum passes 2 x 127 x 128 (attn_i8_avx2.c). */
#ifndef IX_QMAX
#define IX_QMAX 127.0f
#define IX_QOFF 128
#define IX_PMAX 255.0f
#endif

#define IKC 32

/* 2^x for x <= 0 (or -inf): below -126 it gives 2^-126, which the
 * probabilities' u8 rounding and the sums take as 0. */
static inline __attribute__((always_inline)) IX_FV ix_exp2(IX_FV x) {
    x = IX_MAX(x, IX_SETF(-126.0f));
    const IX_FV n = IX_ROUND(x);
    const IX_FV f = IX_SUB(x, n); /* [-0.5, 0.5] */
    IX_FV p = IX_FMADD(IX_SETF(9.6181291e-3f), f, IX_SETF(5.5504109e-2f));
    p = IX_FMADD(p, f, IX_SETF(2.4022651e-1f));
    p = IX_FMADD(p, f, IX_SETF(6.9314718e-1f));
    p = IX_FMADD(p, f, IX_SETF(1.0f));
    return IX_SCALE2(p, n);
}

/* Q^T (times the scale) to int8 per row, stored as u8 (+128), in place:
 * dword j4 goes where element j4 was (at or below the four it is made of);
 * the rows' scales (times log2 e; never 0, so that -inf scores stay -inf)
 * after them, where element h4 was. */
static inline __attribute__((always_inline)) void ix_quant_q(float *QT, int RB, int hd) {
    const int h4 = hd / 4;
    for (int rb = 0; rb < RB; rb++) {
        float *qt = QT + (size_t)rb * hd * W;
        IX_FV mx = IX_ZEROF();
        for (int j = 0; j < hd; j++) mx = IX_MAX(mx, IX_ABS(IX_LOADF(qt + j * W)));
        const IX_FV inv = IX_INVQ(mx);
        for (int j4 = 0; j4 < h4; j4++) {
            IX_IV d = IX_ZEROI();
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const IX_IV c = IX_CVTF2I(IX_MUL(IX_LOADF(qt + (4 * j4 + i) * W), inv));
                d = IX_ORI(d, IX_SLLI(IX_ADDI(c, IX_SETI(IX_QOFF)), 8 * i));
            }
            IX_STOREI(qt + j4 * W, d);
        }
        IX_STOREF(qt + h4 * W, IX_MAX(IX_MUL(mx, IX_SETF(1.44269504f / IX_QMAX)), IX_SETF(1e-30f)));
    }
}

/* A chunk of IKC keys from k0 in the kernel's layouts (KT, KS, KSC, VT;
 * VSC = 255 x the key's V scale over the chunk's largest); returns the
 * factor from u8 probabilities back to the V scale (largest / 255). */
static inline __attribute__((always_inline)) float ix_chunk(const nb_attn_tile *t, int hd, int32_t k0, uint32_t *KT,
                                                            int32_t *KS, float *KSC, float *VSC, uint32_t *VT,
                                                            const uint8_t *zero) {
    const nb_attn_kv *kv = t->kv;
    const int h4 = hd / 4;
    const uint8_t *kr[IKC], *vr[IKC];
    int64_t sl[IKC];
    const int nk = attn_chunk_rows(t, hd, k0, IKC, kr, vr, sl, NULL);
    float vmax = 0;
    for (int c = 0; c < IKC; c++) {
        if (c < nk) {
            int32_t sum = 0;
            for (int j = 0; j < hd; j++) sum += (int8_t)kr[c][j];
            for (int j4 = 0; j4 < h4; j4++) memcpy(KT + j4 * IKC + c, kr[c] + 4 * j4, 4);
            KS[c] = IX_QOFF * sum;
            KSC[c] = kv->ks[sl[c] * kv->n_head_kv + t->kvh];
            VSC[c] = kv->vs[sl[c] * kv->n_head_kv + t->kvh];
            vmax = fmaxf(vmax, VSC[c]);
        } else {
            for (int j4 = 0; j4 < h4; j4++) KT[j4 * IKC + c] = 0;
            KS[c] = 0;
            KSC[c] = VSC[c] = 0;
            vr[c] = zero;
        }
    }
    const float vq = vmax > 0 ? IX_PMAX / vmax : 0.0f;
    for (int c = 0; c < IKC; c++) VSC[c] *= vq;
    for (int c4 = 0; c4 < IKC / 4; c4++) { /* V^T: unpack bytes of key pairs, then words of pair pairs */
        const uint8_t *const *r = vr + 4 * c4;
        uint32_t *o = VT + c4 * hd;
        for (int j = 0; j < hd; j += 16) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(r[0] + j));
            const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(r[1] + j));
            const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(r[2] + j));
            const __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(r[3] + j));
            const __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
            const __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
            _mm_storeu_si128((__m128i *)(void *)(o + j), _mm_unpacklo_epi16(ab0, cd0));
            _mm_storeu_si128((__m128i *)(void *)(o + j + 4), _mm_unpackhi_epi16(ab0, cd0));
            _mm_storeu_si128((__m128i *)(void *)(o + j + 8), _mm_unpacklo_epi16(ab1, cd1));
            _mm_storeu_si128((__m128i *)(void *)(o + j + 12), _mm_unpackhi_epi16(ab1, cd1));
        }
    }
    return vmax / IX_PMAX;
}

/* O^T = O^T * corr (when RESCALE) + dq * V^T P for one block of rows:
 * IX_NC columns at a time, IX_NC independent chains of IKC / 4 vpdpbusd. */
static inline __attribute__((always_inline)) void ix_pv(float *ot, int hd, const IX_IV *pk, const uint32_t *VT,
                                                        IX_FV dq, IX_FV corr, const bool RESCALE) {
    for (int j = 0; j < hd; j += IX_NC) {
        IX_IV a[IX_NC];
#pragma GCC unroll 8
        for (int i = 0; i < IX_NC; i++) a[i] = IX_ZEROI();
#pragma GCC unroll 8
        for (int c4 = 0; c4 < IKC / 4; c4++)
#pragma GCC unroll 8
            for (int i = 0; i < IX_NC; i++) IX_DPBUSD(&a[i], pk[c4], VT + c4 * hd + j + i);
#pragma GCC unroll 8
        for (int i = 0; i < IX_NC; i++) {
            const IX_FV o = IX_LOADF(ot + (j + i) * W);
            IX_STOREF(ot + (j + i) * W, IX_FMADD(IX_CVTI2F(a[i]), dq, RESCALE ? IX_MUL(o, corr) : o));
        }
    }
}

static inline __attribute__((always_inline)) void tile_i8(const nb_attn_tile *t, const int HD) {
    attn_frame f;
    attn_frame_begin(t, HD ? HD : t->kv->head_dim, W, &f);
    const int hd = f.hd, RB = f.RB, h4 = hd / 4;
    float *OT = f.OT, *M = f.M, *L = f.L;
    const int32_t *PS = f.PS;
    ix_quant_q(f.QT, RB, hd);
    uint32_t *KT = (uint32_t *)(void *)f.Kf;         /* [hd/4][IKC]: dword j4 of each key */
    int32_t *KS = (int32_t *)(void *)(KT + h4 * IKC); /* [IKC]: 128 x the sum of the key's codes */
    float *KSC = (float *)(void *)(KS + IKC), *VSC = KSC + IKC; /* the keys' K scales; 255 x V scale / largest */
    uint32_t *VT = (uint32_t *)(void *)f.Vf;         /* [IKC/4][hd] */
    uint8_t *zero = (uint8_t *)(VT + IKC / 4 * hd);   /* keys past the last */
    memset(zero, 0, (size_t)hd);
    float S[IKC * W] __attribute__((aligned(64))); /* a chunk's scores, without the rows' scales */

    for (int32_t k0 = 0; k0 <= f.last; k0 += IKC) {
        const IX_FV vdq = IX_SETF(ix_chunk(t, hd, k0, KT, KS, KSC, VSC, VT, zero));
        for (int rb = 0; rb < RB; rb++) {
            if (PS[rb * W + W - 1] < k0) continue; /* these rows' keys ended in an earlier chunk */
            const float *qu = f.QT + (size_t)rb * hd * W;
            float *ot = OT + (size_t)rb * hd * W;
            IX_FV mx = IX_SETF(-INFINITY);
            for (int g = 0; g < IKC; g += IX_KG) { /* scores of keys g.., the rows' scales left for later */
                IX_IV acc[IX_KG];
#pragma GCC unroll 16
                for (int c = 0; c < IX_KG; c++) acc[c] = IX_SETI(-KS[g + c]);
                for (int j4 = 0; j4 < h4; j4++) {
                    const IX_IV qv = IX_LOADI(qu + j4 * W);
#pragma GCC unroll 16
                    for (int c = 0; c < IX_KG; c++) IX_DPBUSD(&acc[c], qv, KT + j4 * IKC + g + c);
                }
                IX_FV s[IX_KG];
#pragma GCC unroll 16
                for (int c = 0; c < IX_KG; c++) s[c] = IX_MUL(IX_CVTI2F(acc[c]), IX_SETF(KSC[g + c]));
                mx = IX_MAX(mx, IX_MASK(s, PS, rb, k0 + g));
#pragma GCC unroll 16
                for (int c = 0; c < IX_KG; c++) IX_STOREF(S + (g + c) * W, s[c]);
            }
            const IX_FV qs = IX_LOADF(qu + h4 * W);
            mx = IX_MUL(mx, qs);
            const IX_FV mo = IX_LOADF(M + rb * W);
            const bool moved = IX_ANY_GT(mx, IX_ADD(mo, IX_SETF(ATTN_LAZY_MAX)));
            const IX_FV mn = moved ? IX_MAX(mo, mx) : mo;
            const IX_FV corr = moved ? ix_exp2(IX_SUB(mo, mn)) : IX_SETF(1.0f);
            if (moved) IX_STOREF(M + rb * W, mn);
            /* the chunk's own max (rows whose keys are all masked here: the running one, their P are 0) */
            const IX_FV ml = IX_OWN_MAX(mx, mn);
            const IX_FV e = ix_exp2(IX_SUB(ml, mn));
            IX_FV sum[4] = {IX_ZEROF(), IX_ZEROF(), IX_ZEROF(), IX_ZEROF()}; /* four chains, not one */
            IX_IV pk[IKC / 4];
#pragma GCC unroll 8
            for (int c4 = 0; c4 < IKC / 4; c4++) {
                IX_IV d = IX_ZEROI();
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    const int c = 4 * c4 + i;
                    const IX_FV p = ix_exp2(IX_FMSUB(IX_LOADF(S + c * W), qs, ml));
                    sum[i] = IX_ADD(sum[i], p);
                    d = IX_ORI(d, IX_SLLI(IX_CVTF2I(IX_MUL(p, IX_SETF(VSC[c]))), 8 * i));
                }
                pk[c4] = d;
            }
            IX_STOREF(L + rb * W, IX_FMADD(IX_LOADF(L + rb * W), corr, IX_MUL(e, IX_ADD(IX_ADD(sum[0], sum[1]), IX_ADD(sum[2], sum[3])))));
            const IX_FV dq = IX_MUL(e, vdq);
            if (moved) ix_pv(ot, hd, pk, VT, dq, corr, true);
            else ix_pv(ot, hd, pk, VT, dq, corr, false);
        }
    }

    attn_frame_end(t, &f, W, 1);
}

/* int8 KV (with its scales) in tiles of more than 8 rows and a head size
 * that is a multiple of 16 take tile_i8; anything else the fallback (the
 * ISA's f32 kernel). */
static inline __attribute__((always_inline)) void tile_i8_run(const nb_attn_tile *t, nb_attn_fn fallback) {
    const nb_attn_kv *kv = t->kv;
    if (kv->type != NB_KVT_INT8 || !kv->ks || !kv->vs || kv->head_dim % 16 || t->nt * t->nq <= 8) {
        fallback(t);
        return;
    }
    switch (NB_ATTN_HD(kv->head_dim)) {
    case 64: tile_i8(t, 64); return;
    case 128: tile_i8(t, 128); return;
    default: tile_i8(t, 0); return;
    }
}

#endif
