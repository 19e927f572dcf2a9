/* The decode tiles of the x86 attention kernels, written once for both
 * vector widths (attn_avx512.c: W 16, attn_avx2.c: W 8): a tile of at most
 * W / 2 rows, each row over G = W / R' lanes (R' = R rounded up to a power
 * of two), lane r * G + u holding row r against key u of each group of G
 * keys; attn_avx512.c's comment above its include describes the scheme.
 * Before including, a kernel defines W and:
 *   DV, DVI                  its float and integer vector types
 *   DV_LOAD / DV_STORE (p), DV_ZERO (), DV_ADD, DV_MUL, DV_FMA (a, b, c = a * b + c)
 *   DV_ROW (row, j, sc, T, lut)   W elements of a KV row of type T from j, as f32 times sc
 *   DV_ILV (v, G)            G row vectors into key-minor order (v[m]: elements m * W/G ..)
 *   DV_BCAST (p, G)          G floats at p repeated over the vector
 *   DV_SOFTMAX (P, NG, G, k0, edge, PL, Mv, Lv)   the mask and online softmax of a chunk's
 *                            NG score vectors in P, returning O's rescale factor (declared
 *                            before the include; it ends with dec_online, below)
 *   DV_MAX, DV_SUB, DV_EXP (x), DV_LANE_XOR (v, lane, w)   v's lanes permuted to lane ^ w
 *   DEC_KC                   keys per chunk, DEC_NC   O columns per pass
 * and gets tile_dec(t, HD, G) (HD 0: run-time head size). */
#ifndef NB_KERNELS_X86_ATTN_DEC_IMPL_H
#define NB_KERNELS_X86_ATTN_DEC_IMPL_H

/* The online softmax's step for NG score vectors in P whose per-lane max is
 * mx: P becomes e^(s - max), the running max Mv and sum Lv per lane are
 * updated; returns the factor O must be rescaled by. Also the prompt
 * tiles' (attn_avx2.c rows_chunk, one lane per row). */
static inline __attribute__((always_inline)) DV online_update(float *P, int NG, DV mx, float *Mv, float *Lv) {
    const DV mo = DV_LOAD(Mv), mn = DV_MAX(mo, mx);
    const DV corr = DV_EXP(DV_SUB(mo, mn));
    DV_STORE(Mv, mn);
    DV sum = DV_ZERO();
    for (int g = 0; g < NG; g++) {
        const DV e = DV_EXP(DV_SUB(DV_LOAD(P + g * W), mn));
        DV_STORE(P + g * W, e);
        sum = DV_ADD(sum, e);
    }
    DV_STORE(Lv, DV_FMA(DV_LOAD(Lv), corr, sum));
    return corr;
}

/* The online softmax of a chunk's NG (masked) score vectors in P: the max
 * over each row's G lanes, P becoming e^(s - max), the per-lane running max
 * Mv and sum Lv updated; returns the factor O must be rescaled by. */
static inline __attribute__((always_inline)) DV dec_online(float *P, int NG, int G, const DVI lane, float *Mv,
                                                           float *Lv) {
    DV mx = DV_LOAD(P);
    for (int g = 1; g < NG; g++) mx = DV_MAX(mx, DV_LOAD(P + g * W));
    for (int w = 1; w < G; w *= 2) mx = DV_MAX(mx, DV_LANE_XOR(mx, lane, w)); /* the max over each row's G lanes */
    return online_update(P, NG, mx, Mv, Lv);
}

/* A chunk's first ng groups of G K and V rows (type T, scales ks / vs)
 * into Kg / Vg, interleaved (tile_dec), converted to f32 on the way. */
static inline __attribute__((always_inline)) void dec_interleave(const uint8_t **kr, const uint8_t **vr,
                                                                 const float *ks, const float *vs, float *Kg,
                                                                 float *Vg, int hd, const nb_kv_type T, const int G,
                                                                 int ng, const float *lut) {
    const int hv = hd & ~(W - 1);
    for (int g = 0; g < ng; g++) {
        for (int j0 = 0; j0 < hv; j0 += W) {
            DV a[W], b[W];
#pragma GCC unroll 16
            for (int u = 0; u < G; u++) {
                a[u] = DV_ROW(kr[g * G + u], j0, ks[g * G + u], T, lut);
                b[u] = DV_ROW(vr[g * G + u], j0, vs[g * G + u], T, lut);
            }
            DV_ILV(a, G);
            DV_ILV(b, G);
#pragma GCC unroll 16
            for (int m = 0; m < G; m++) {
                DV_STORE(Kg + ((size_t)g * hd + j0) * G + m * W, a[m]);
                DV_STORE(Vg + ((size_t)g * hd + j0) * G + m * W, b[m]);
            }
        }
        for (int j = hv; j < hd; j++)
            for (int u = 0; u < G; u++) {
                Kg[((size_t)g * hd + j) * G + u] = nb_attn_elem(T, kr[g * G + u], j) * ks[g * G + u];
                Vg[((size_t)g * hd + j) * G + u] = nb_attn_elem(T, vr[g * G + u], j) * vs[g * G + u];
            }
    }
}

/* One chunk of NG key groups (interleaved in Kg / Vg) against the tile:
 * S = Q K^T in lanes (row, key of the group), the softmax update, then
 * O = O * corr + P V, DEC_NC columns at a time. */
static inline __attribute__((always_inline)) void dec_chunk(const float *QD, float *OD, const float *Kg,
                                                            const float *Vg, int hd, const int G, const int NG,
                                                            int32_t k0, bool edge, const int32_t *PL, float *Mv,
                                                            float *Lv, attn_pf *pf) {
    const int JS = NG >= 8 ? 1 : 8 / NG; /* j-chains, so >= 8 sums run at once */
    const int steps = (hd + JS - 1) / JS, lines = pf->lines;
    const int pf_per = (lines + steps - 1) / steps; /* the next chunk's lines, spread over the j steps */
    /* S = Q K^T: lanes (row, key within the group) */
    DV s[8][DEC_KC / 2];
#pragma GCC unroll 16
    for (int js = 0; js < JS; js++)
#pragma GCC unroll 16
        for (int g = 0; g < NG; g++) s[js][g] = DV_ZERO();
    for (int j = 0; j < hd; j += JS) {
        attn_pf_step(pf, pf_per);
#pragma GCC unroll 16
        for (int js = 0; js < JS; js++) {
            if (JS > 1 && j + js >= hd) break;
            const DV qv = DV_LOAD(QD + (size_t)(j + js) * W);
#pragma GCC unroll 16
            for (int g = 0; g < NG; g++)
                s[js][g] = DV_FMA(DV_BCAST(Kg + ((size_t)g * hd + j + js) * G, G), qv, s[js][g]);
        }
    }
    float P[DEC_KC / 2 * W] __attribute__((aligned(64)));
#pragma GCC unroll 16
    for (int g = 0; g < NG; g++) {
        DV x = s[0][g];
#pragma GCC unroll 16
        for (int js = 1; js < JS; js++) x = DV_ADD(x, s[js][g]);
        DV_STORE(P + g * W, x);
    }
    DV p[DEC_KC / 2];
    const DV corr = DV_SOFTMAX(P, NG, G, k0, edge, PL, Mv, Lv);
#pragma GCC unroll 16
    for (int g = 0; g < NG; g++) p[g] = DV_LOAD(P + g * W);
    /* O = O * corr + P V, eight columns at a time */
    int j = 0;
    for (; j + DEC_NC <= hd; j += DEC_NC) {
        DV o[DEC_NC];
#pragma GCC unroll 16
        for (int i = 0; i < DEC_NC; i++) o[i] = DV_MUL(DV_LOAD(OD + (size_t)(j + i) * W), corr);
#pragma GCC unroll 16
        for (int g = 0; g < NG; g++)
#pragma GCC unroll 16
            for (int i = 0; i < DEC_NC; i++)
                o[i] = DV_FMA(DV_BCAST(Vg + ((size_t)g * hd + j + i) * G, G), p[g], o[i]);
#pragma GCC unroll 16
        for (int i = 0; i < DEC_NC; i++) DV_STORE(OD + (size_t)(j + i) * W, o[i]);
    }
    for (; j < hd; j++) {
        DV o = DV_MUL(DV_LOAD(OD + (size_t)j * W), corr);
#pragma GCC unroll 16
        for (int g = 0; g < NG; g++) o = DV_FMA(DV_BCAST(Vg + ((size_t)g * hd + j) * G, G), p[g], o);
        DV_STORE(OD + (size_t)j * W, o);
    }
}

static inline __attribute__((always_inline)) void tile_dec(const nb_attn_tile *t, const int HD, const int G) {
    const nb_attn_kv *kv = t->kv;
    const int hd = HD ? HD : kv->head_dim, nq = t->nq, R = t->nt * nq;
    const int NG = DEC_KC / G; /* key groups of a chunk */
    const int32_t last = t->pos0 + t->nt - 1;
    float *QD = t->scratch, *OD = QD + (size_t)hd * W, *Kg = OD + (size_t)hd * W, *Vg = Kg + (size_t)DEC_KC * hd;
    float *Kc = Vg + (size_t)DEC_KC * hd; /* a row of zeros (hd elements of any type) */
    /* Q^T times the scale, each row over its G lanes; padding lanes 0 */
    memset(QD, 0, (size_t)hd * W * sizeof *QD);
    for (int r = 0; r < R; r++) {
        const float *q = t->q + (int64_t)(r / nq) * t->q_stride + (int64_t)(r % nq) * hd;
        for (int j = 0; j < hd; j++)
            for (int u = 0; u < G; u++) QD[j * W + r * G + u] = q[j] * t->scale;
    }
    memset(OD, 0, (size_t)hd * W * sizeof *OD);
    /* per lane: its row's position (padding: the last);
     * the running max and sum, in memory between chunks like O */
    int32_t PL[W];
    float Mv[W], Lv[W];
    dec_lanes_init(t, W, G, PL, Mv, Lv);
    const int32_t pmin = t->pos0;
    const float *lut = nb_attn_fp8_table();
    memset(Kc, 0, (size_t)hd * sizeof *Kc);
    const uint8_t *zero = (const uint8_t *)(const void *)Kc; /* keys past the last: a row of zeros */
    float ks[DEC_KC], vs[DEC_KC]; /* the slots' scales (1: unscaled pools, keys past the last) */
    for (int c = 0; c < DEC_KC; c++) ks[c] = vs[c] = 1.0f;

    for (int32_t k0 = 0; k0 <= last; k0 += DEC_KC) {
        const uint8_t *kr[DEC_KC], *vr[DEC_KC];
        int64_t idx[DEC_KC];
        attn_pf pf;
        const int nk = attn_chunk_rows(t, hd, k0, DEC_KC, kr, vr, idx, &pf);
        for (int c = nk; c < DEC_KC; c++) kr[c] = vr[c] = zero;
        if (kv->ks)
            for (int c = 0; c < DEC_KC; c++) {
                ks[c] = c < nk ? kv->ks[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
                vs[c] = c < nk ? kv->vs[idx[c] * kv->n_head_kv + t->kvh] : 1.0f;
            }
        const int ngk = (nk + G - 1) / G; /* groups holding keys: a short last chunk takes half the work */
        const int ng = NG > 1 && ngk <= NG / 2 ? NG / 2 : NG;
        switch (kv->type) {
        case NB_KVT_F32: dec_interleave(kr, vr, ks, vs, Kg, Vg, hd, NB_KVT_F32, G, ng, lut); break;
        case NB_KVT_F16: dec_interleave(kr, vr, ks, vs, Kg, Vg, hd, NB_KVT_F16, G, ng, lut); break;
        case NB_KVT_BF16: dec_interleave(kr, vr, ks, vs, Kg, Vg, hd, NB_KVT_BF16, G, ng, lut); break;
        case NB_KVT_INT8: dec_interleave(kr, vr, ks, vs, Kg, Vg, hd, NB_KVT_INT8, G, ng, lut); break;
        default: dec_interleave(kr, vr, ks, vs, Kg, Vg, hd, NB_KVT_FP8, G, ng, lut); break;
        }
        const bool edge = k0 + ng * G - 1 > pmin; /* the causal edge, or keys past the last */
        if (ng == NG) dec_chunk(QD, OD, Kg, Vg, hd, G, NG, k0, edge, PL, Mv, Lv, &pf);
        else dec_chunk(QD, OD, Kg, Vg, hd, G, NG / 2, k0, edge, PL, Mv, Lv, &pf);
        attn_pf_step(&pf, INT32_MAX); /* what the steps left (none: they cover the plan) */
    }

    dec_tile_end(t, hd, W, G, OD, Mv, Lv);
}

#endif
