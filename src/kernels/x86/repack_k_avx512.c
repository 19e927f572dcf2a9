/* AVX-512 VNNI kernels for the repacked K-quants Q4_KR / Q6_KR (layouts in
 * kernels/repack.h: weights and activations in "lane order").
 *
 * Decode (one token, Q8_KP activations): per super-block of 256 weights,
 * 2-3 64-byte loads give four vectors of 64 unsigned weights; four chained
 * vpdpbusd with the activations leave in 32-bit lane l the integer sum of
 * 16-weight group l - a Q4_K sub-block's half, a Q6_K scale group. Q4_K
 * lane sums fit in 16 bits (16*15*127 < 2^15), so one vpmaddwd against the
 * lanes' scales (zero high halves) multiplies them exactly in int32; Q6_K's
 * do not, and take vpmulld after the -32 offset (from the per-16 bsums,
 * which are exactly the lanes' activation sums). So the integer sums are the
 * GGUF kernels' and only the float summation order differs.
 *
 * Batched (int8 GEMM, activations packed as in repack.h): per four rows
 * and super-block the weights are unpacked once into 256 bytes each, then
 * every 4 weight bytes are broadcast against 16 tokens' 4 activation bytes
 * (four rows x two token groups per step, as the Q4_0R GEMM); scales are
 * applied per 32 (Q4_K) or 16 (Q6_K) weights in float, and the activation
 * scale once per super-block. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize") /* GCC 12 vpdpbusd miscompile, see repack_avx512.c */
#endif
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "kernels/x86/prefetch_here.h"
#include "base/blocks.h"



/* Lines l0 .. l1-1 of the super-block at p, nb_prefetch_bytes ahead (and
 * nb_prefetch_l2_bytes into L2), at this place in the decode dots
 * (prefetch_here.h) */
static inline void prefetch_lines(const void *p, int l0, int l1) {
    for (int l = l0; l < l1; l++) nb_prefetch_ahead((const char *)p + 64 * l, nb_prefetch_bytes, nb_prefetch_l2_bytes);
}

/* Q4_KR super-block -> four vectors of 64 weights (0..15), in lane order */
static inline void unpack_q4_kr(const nb_block_q4_kr *b, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i v0 = _mm512_loadu_si512((const void *)b->qs), v1 = _mm512_loadu_si512((const void *)(b->qs + 64));
    q[0] = _mm512_and_si512(v0, m4);
    q[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
    q[2] = _mm512_and_si512(v1, m4);
    q[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
}

/* Q6_KR super-block -> four vectors of 64 weights (0..63), in lane order */
static inline void unpack_q6_kr(const nb_block_q6_kr *b, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    __m512i a = _mm512_loadu_si512((const void *)b->ql), c = _mm512_loadu_si512((const void *)(b->ql + 64));
    __m512i h = _mm512_loadu_si512((const void *)b->qh);
    /* 16-bit shifts move bits across bytes only into positions the masks clear */
    q[0] = _mm512_or_si512(_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
    q[2] = _mm512_or_si512(_mm512_and_si512(c, m4), _mm512_and_si512(h, m30));
    q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 4), m4),
                           _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
}

/* The four weight vectors against the four activation vectors: lane l = the
 * integer sum of 16-weight group l. Two chains of two vpdpbusd, added: one
 * chain of four made the decode dot latency-bound (Q4_KR from L2: 32 GB/s
 * per core with one chain and one accumulator, 67 with two of each). */
static inline __m512i group_sums(const __m512i q[4], const int8_t *a8) {
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], _mm512_loadu_si512((const void *)a8));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], _mm512_loadu_si512((const void *)(a8 + 64)));
    s0 = _mm512_dpbusd_epi32(s0, q[2], _mm512_loadu_si512((const void *)(a8 + 128)));
    s1 = _mm512_dpbusd_epi32(s1, q[3], _mm512_loadu_si512((const void *)(a8 + 192)));
    return _mm512_add_epi32(s0, s1);
}

/* lane l <- v[a + l / 2], as a constant (an index built in a stack array
 * and loaded as a vector stalls on store forwarding, twice a row) */
static inline __m512i pair_index(int a) {
    return _mm512_setr_epi32(a, a, a + 1, a + 1, a + 2, a + 2, a + 3, a + 3, a + 4, a + 4, a + 5, a + 5, a + 6, a + 6,
                             a + 7, a + 7);
}

/* Q4_KR / Q6_KR x Q8_KP for M rows (w_stride bytes apart) and one token,
 * the rows read in lockstep, a super-block of each in turn (decode's
 * several streams per thread, matmul.c); M = 1 is the decode dot. Each
 * row's operations and their order do not depend on M, so the results are
 * identical to M one-row dots. `six` and M are constants after inlining. */
static inline __attribute__((always_inline)) void kr_dot_rows(int64_t n, const void *w, size_t w_stride,
                                                              const void *a, float *out, size_t ldo, const int six,
                                                              const int M) {
    const nb_block_q8_K *y = a;
    const __m512i sc_idx = pair_index(0), m_idx = pair_index(8); /* lane l: sub-block l/2 */
    const uint8_t *base[4];
    __m512 acc[4], accm[4]; /* Q4_K: scales and mins, two chains */
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) {
        base[r] = (const uint8_t *)w + (size_t)r * w_stride;
        acc[r] = accm[r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / 256; i++) {
        const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)y[i].bsums));
#pragma GCC unroll 4
        for (int r = 0; r < M; r++) {
            __m512i q[4];
            if (six) {
                const nb_block_q6_kr *x = (const nb_block_q6_kr *)base[r] + i;
                prefetch_lines(x, 0, 2);
                unpack_q6_kr(x, q);
                prefetch_lines(x, 2, 3);
                __m512i s = group_sums(q, y[i].qs);
                prefetch_lines(x, 3, 4);
                /* q - 32: minus 32 * the group's activation sum, then times its scale */
                s = _mm512_sub_epi32(s, _mm512_slli_epi32(bs, 5));
                s = _mm512_mullo_epi32(s, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x->sc)));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(_cvtsh_ss(x->d) * y[i].d), acc[r]);
                continue;
            }
            const nb_block_q4_kr *x = (const nb_block_q4_kr *)base[r] + i;
            prefetch_lines(x, 0, 1);
            unpack_q4_kr(x, q);
            prefetch_lines(x, 1, 2);
            __m512i s = group_sums(q, y[i].qs);
            prefetch_lines(x, 2, 3);
            __m512i scm = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->sc)); /* sc[0..7], m[0..7] */
            __m512i isc = _mm512_madd_epi16(s, _mm512_permutexvar_epi32(sc_idx, scm));
            __m512i imn = _mm512_madd_epi16(bs, _mm512_permutexvar_epi32(m_idx, scm));
            uint32_t h2;
            memcpy(&h2, &x->d, 4); /* d, dmin */
            __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)h2)), _mm_set1_ps(y[i].d));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isc), _mm512_broadcastss_ps(dd), acc[r]);
            accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imn), _mm512_broadcastss_ps(_mm_movehdup_ps(dd)), accm[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < M; r++) out[(size_t)r * ldo] = _mm512_reduce_add_ps(six ? acc[r] : _mm512_sub_ps(acc[r], accm[r]));
}

void nb_q4_kr_dot_avx512(int64_t n, const void *w, const void *a, float *out) { kr_dot_rows(n, w, 0, a, out, 0, 0, 1); }
void nb_q6_kr_dot_avx512(int64_t n, const void *w, const void *a, float *out) { kr_dot_rows(n, w, 0, a, out, 0, 1, 1); }

/* The vec_dot_mxn contract of kernels/qdot.h: one token's rows in
 * lockstep, more tokens a dot at a time. */
static inline __attribute__((always_inline)) void kr_mxn(int64_t n, int m, int nn, const void *w, size_t w_stride,
                                                         const void *act, size_t a_stride, float *out, size_t ldo,
                                                         const int six) {
    if (nn == 1) {
        switch (m) {
        case 1: kr_dot_rows(n, w, w_stride, act, out, ldo, six, 1); return;
        case 2: kr_dot_rows(n, w, w_stride, act, out, ldo, six, 2); return;
        case 3: kr_dot_rows(n, w, w_stride, act, out, ldo, six, 3); return;
        default: kr_dot_rows(n, w, w_stride, act, out, ldo, six, 4); return;
        }
    }
    for (int r = 0; r < m; r++)
        for (int t = 0; t < nn; t++)
            kr_dot_rows(n, (const uint8_t *)w + (size_t)r * w_stride, 0, (const uint8_t *)act + (size_t)t * a_stride,
                        out + (size_t)r * ldo + t, 0, six, 1);
}

void nb_q4_kr_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo) {
    kr_mxn(n, m, nn, w, w_stride, act, a_stride, out, ldo, 0);
}

void nb_q6_kr_dot_mxn_avx512(int64_t n, int m, int nn, const void *w, size_t w_stride, const void *act,
                             size_t a_stride, float *out, size_t ldo) {
    kr_mxn(n, m, nn, w, w_stride, act, a_stride, out, ldo, 1);
}

/* ---- batched ------------------------------------------------------------ */

/* The 16 tokens' results of rows r (f0) and r+1 (f1, when `two`) for token
 * group gg into y[t*ldy + r]. */
static inline void store_group(float *y, int64_t ldy, int64_t r, int two, int64_t gg, int64_t n, __m512 f0,
                               __m512 f1) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int)ldy));
    int64_t nt = n - gg * 16;
    __mmask16 m = nt >= 16 ? 0xffff : (__mmask16)((1u << nt) - 1);
    _mm512_mask_i32scatter_ps(y + gg * 16 * ldy + r, m, idx, f0, 4);
    if (two) _mm512_mask_i32scatter_ps(y + gg * 16 * ldy + r + 1, m, idx, f1, 4);
}

static inline __m512i bcast4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32((int)v);
}

/* Per super-block scales of a Q4_KR block as floats: [d*sc[0..7], dmin*m[0..7]] */
static inline void q4_kr_scales(const nb_block_q4_kr *b, float *f) {
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
    __m512 dm = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(b->d)), _mm256_set1_ps(_cvtsh_ss(b->dmin)), 1);
    _mm512_storeu_ps(f, _mm512_mul_ps(v, dm));
}

/* Per super-block scales of a Q6_KR block as floats: d*sc[0..15] */
static inline void q6_kr_scales(const nb_block_q6_kr *b, float *f) {
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
    _mm512_storeu_ps(f, _mm512_mul_ps(v, _mm512_set1_ps(_cvtsh_ss(b->d))));
}

/* Integer sums of block j's words kk = k0..k0+nk-1 for rows 0..RT-1 (u[k]:
 * 256 bytes of row k in lane order; block j's weights 4kk..4kk+3 at
 * 64*(kk%4) + 8j + 4*(kk/4)) with token groups g (a0) and, when pair, h
 * (a1): I[row][group]. Four rows share each step's activation loads: with
 * two, a weight broadcast or activation load per vpdpbusd bounded the loop
 * (the AVX2 kernels measured the same, kernels/x86/repack_avx2_impl.h). */
static inline __attribute__((always_inline)) void dot_words(const uint8_t *const u[4], int j, const int8_t *a0,
                                                            const int8_t *a1, int k0, int nk, int pair, const int RT,
                                                            __m512i I[4][2]) {
    const __m512i z = _mm512_setzero_si512();
    __m512i i00 = z, i01 = z, i10 = z, i11 = z, i20 = z, i21 = z, i30 = z, i31 = z;
#pragma GCC unroll 8
    for (int kk = k0; kk < k0 + nk; kk++) {
        const int at = 64 * (kk & 3) + 8 * j + 4 * (kk >> 2);
        const __m512i av0 = _mm512_load_si512((const void *)(a0 + kk * 64));
        const __m512i w0 = bcast4(u[0] + at), w1 = bcast4(u[1] + at);
        i00 = _mm512_dpbusd_epi32(i00, w0, av0);
        i10 = _mm512_dpbusd_epi32(i10, w1, av0);
        __m512i av1 = z, w2 = z, w3 = z;
        if (pair) {
            av1 = _mm512_load_si512((const void *)(a1 + kk * 64));
            i01 = _mm512_dpbusd_epi32(i01, w0, av1);
            i11 = _mm512_dpbusd_epi32(i11, w1, av1);
        }
        if (RT == 4) {
            w2 = bcast4(u[2] + at), w3 = bcast4(u[3] + at);
            i20 = _mm512_dpbusd_epi32(i20, w2, av0);
            i30 = _mm512_dpbusd_epi32(i30, w3, av0);
            if (pair) {
                i21 = _mm512_dpbusd_epi32(i21, w2, av1);
                i31 = _mm512_dpbusd_epi32(i31, w3, av1);
            }
        }
    }
    I[0][0] = i00, I[0][1] = i01, I[1][0] = i10, I[1][1] = i11;
    I[2][0] = i20, I[2][1] = i21, I[3][0] = i30, I[3][1] = i31;
}

/* The K GEMMs (six: Q6_KR, else Q4_KR): per RT rows and pair of token
 * groups, super-block by super-block - weights unpacked into u, scales into
 * sc, then each 32-weight block's integer sums (per 16-weight half for Q6_K,
 * whose scales go by 16) scaled into f, and f times the tokens' Q8_K scale
 * into F at the end of the super-block. A last tile of fewer rows repeats
 * its last row and stores only its own. */
static inline __attribute__((always_inline)) void kgemm(const uint8_t *w, uint64_t row_bytes, int64_t nr,
                                                        const nb_actpack *ap, float *y, int64_t ldy, const int six,
                                                        const int RT) {
    const int64_t nb = ap->nb, nsb = ap->K / 256;
    const uint64_t bs = six ? sizeof(nb_block_q6_kr) : sizeof(nb_block_q4_kr);
    _Alignas(64) uint8_t u[4][256];
    float sc[4][16];
    const uint8_t *const up[4] = {u[0], u[1], u[2], u[3]};
    for (int64_t r = 0; r < nr; r += RT) {
        const int nrows = nr - r < RT ? (int)(nr - r) : RT;
        const uint8_t *x[4];
        for (int i = 0; i < RT; i++) x[i] = w + (r + (i < nrows ? i : nrows - 1)) * row_bytes;
        for (int64_t g = 0; g < ap->ng; g += 2) {
            const int64_t h = g + 1 < ap->ng ? g + 1 : g;
            const int pair = h != g;
            __m512 F[4][2];
            for (int i = 0; i < 4; i++) F[i][0] = F[i][1] = _mm512_setzero_ps();
            for (int64_t s = 0; s < nsb; s++) {
                for (int i = 0; i < RT; i++) {
                    __m512i q[4];
                    if (six) {
                        unpack_q6_kr((const nb_block_q6_kr *)(x[i] + s * bs), q);
                        q6_kr_scales((const nb_block_q6_kr *)(x[i] + s * bs), sc[i]);
                    } else {
                        unpack_q4_kr((const nb_block_q4_kr *)(x[i] + s * bs), q);
                        q4_kr_scales((const nb_block_q4_kr *)(x[i] + s * bs), sc[i]);
                    }
                    for (int k = 0; k < 4; k++) _mm512_store_si512((void *)(u[i] + 64 * k), q[k]);
                }
                __m512 f[4][2];
                for (int i = 0; i < 4; i++) f[i][0] = f[i][1] = _mm512_setzero_ps();
                for (int j = 0; j < 8; j++) {
                    const int64_t b = s * 8 + j;
                    const int8_t *a0 = ap->q + (g * nb + b) * 512, *a1 = ap->q + (h * nb + b) * 512;
                    const int halves = six ? 2 : 1; /* Q6_K: a scale per 16 weights */
#pragma GCC unroll 2
                    for (int half = 0; half < 2; half++) {
                        if (half >= halves) break;
                        const int k0 = six ? 4 * half : 0, nk = six ? 4 : 8;
                        __m512i I[4][2];
                        if (pair) dot_words(up, j, a0, a1, k0, nk, 1, RT, I);
                        else dot_words(up, j, a0, a1, k0, nk, 0, RT, I);
                        if (six) { /* q - 32: the offset through the tokens' sums of these 16 activations */
                            const __m512i o[2] = {
                                _mm512_slli_epi32(_mm512_load_si512((const void *)(ap->sum16 + (g * nb + b) * 32 + 16 * half)), 5),
                                _mm512_slli_epi32(_mm512_load_si512((const void *)(ap->sum16 + (h * nb + b) * 32 + 16 * half)), 5)};
#pragma GCC unroll 4
                            for (int i = 0; i < RT; i++) {
                                const __m512 wi = _mm512_set1_ps(sc[i][2 * j + half]);
                                f[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(I[i][0], o[0])), wi, f[i][0]);
                                f[i][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(I[i][1], o[1])), wi, f[i][1]);
                            }
                        } else { /* d*sc*q - dmin*m: the min through the tokens' sums */
                            const __m512 s0 = _mm512_load_ps(ap->fsum + (g * nb + b) * 16);
                            const __m512 s1 = _mm512_load_ps(ap->fsum + (h * nb + b) * 16);
#pragma GCC unroll 4
                            for (int i = 0; i < RT; i++) {
                                const __m512 wi = _mm512_set1_ps(sc[i][j]), mi = _mm512_set1_ps(sc[i][8 + j]);
                                f[i][0] = _mm512_fnmadd_ps(s0, mi, _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i][0]), wi, f[i][0]));
                                f[i][1] = _mm512_fnmadd_ps(s1, mi, _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i][1]), wi, f[i][1]));
                            }
                        }
                    }
                }
                const __m512 d0 = _mm512_load_ps(ap->d + (g * nb + s * 8) * 16), d1 = _mm512_load_ps(ap->d + (h * nb + s * 8) * 16);
#pragma GCC unroll 4
                for (int i = 0; i < RT; i++) {
                    F[i][0] = _mm512_fmadd_ps(f[i][0], d0, F[i][0]);
                    F[i][1] = _mm512_fmadd_ps(f[i][1], d1, F[i][1]);
                }
            }
            for (int i = 0; i < nrows; i += 2) {
                store_group(y, ldy, r + i, i + 1 < nrows, g, ap->n, F[i][0], F[i + 1][0]);
                if (pair) store_group(y, ldy, r + i, i + 1 < nrows, h, ap->n, F[i][1], F[i + 1][1]);
            }
        }
    }
}

void nb_q4_kr_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy) {
    kgemm(w, row_bytes, nr, ap, y, ldy, 0, 4);
}

void nb_q6_kr_gemm_avx512(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y,
                          int64_t ldy) {
    kgemm(w, row_bytes, nr, ap, y, ldy, 1, 4);
}
