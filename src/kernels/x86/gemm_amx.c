/* Int8 GEMMs for Q4_0R / Q8_0R / Q4_KR / Q6_KR / W8R / W4G*R weights on the AMX tile unit (the
 * nb_repack_gemm_fn contract of kernels/repack.h: y[t*ldy + r] for rows
 * r < nr and every token of the pack).
 *
 * Why: at 32 sequences and in prefill the AVX-512 VNNI GEMMs
 * (sbatch_avx512.c) are where the time goes, at about a third of the VNNI
 * units' peak; one TDPBSSD does the 16 x 16 x 32 products of a block that
 * take those kernels 128 vpdpbusd (docs/speed.md, session 27).
 *
 * Per tile of 16 weight rows and chunk of KC blocks:
 *   - the rows' quants are unpacked once into A (16 rows of KC*32 signed
 *     bytes: Q4_0R's nibbles minus 8, Q8_0R's q+128 back to q), so no
 *     offset through the tokens' sums is needed: sum (q-8)*a is the
 *     integer the VNNI kernels reach as sum q*a - 8 sum a, exactly;
 *   - the 16 rows' scales of each block are gathered into one vector;
 *   - per token group (16 tokens: the pack's B layout is already TDPBSSD's,
 *     4 consecutive k of each token per 32-bit word) and block: C = A . B
 *     on the tile unit, stored, and on AVX-512, per row,
 *     f = fma(float(C[row]), d_tokens * d_row, f) - the operations and
 *     order of the VNNI kernels' lanes, so the results are bit-identical to
 *     theirs (tests/unit/kernels/test_gemm_amx.c). Four C tiles rotate,
 *     so the tile unit works three blocks ahead of AVX-512's scaling.
 * The f accumulators of a group (16 rows x 16 tokens) live in registers
 * across a chunk; rows past the last whole tile of 16 go to the AVX-512
 * small-batch GEMM. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/sbatch.h"
#include "kernels/x86/amx_tiles.h"
#include "kernels/x86/transpose16.h"

#define AI static inline __attribute__((always_inline))

/* The weight types, as the kernels' constant `kind`. W4GR (any group): the
 * nibbles as they are (0..15, signed bytes too) into A, each row's zero
 * point times the tokens' sums off C in integers (one vpmaddwd, as the
 * VNNI kernel starts its sums there); W8R: Q8_0R with f32 scales. */
enum { Q4_0R, Q8_0R, Q4_KR, Q6_KR, W8R, W4GR };
/* Kinds scaled per block, like Q4_0R (the K types: per super-block). */
#define PER_BLOCK(kind) ((kind) == Q4_0R || (kind) == Q8_0R || (kind) == W8R || (kind) == W4GR)
/* Q6_KR's scales are per 16 weights: its steps are half-blocks, 16 bytes
 * of each A row against 4 rows of B (the other types: 32 bytes, 8 rows). */
#define HALVES(kind) ((kind) == Q6_KR)
#define STEP_BYTES(kind) (HALVES(kind) ? 16 : 32)

enum {
    TM = 16, /* weight rows per tile */
    KC = 64, /* blocks per chunk of A */
    GB = 64, /* token groups per pass over a chunk */
    /* bytes from one row of A to the next: +64 keeps a tile's 16 rows out of
     * each other's L1 sets */
    AROW = KC * 32 + 64,
};

/* Tiles: four C (16 rows x 16 int32) for the blocks in flight, A (16 rows
 * x 32 bytes) and B (8 rows x 64 bytes) alternating between two each. */
#define T_C0 0
#define T_C1 1
#define T_C2 2
#define T_C3 3
#define T_A0 4
#define T_A1 5
#define T_B0 6
#define T_B1 7

static void tiles_begin(const int kind) {
    nb_tile_config c;
    memset(&c, 0, sizeof c);
    nb_tile_shape(&c, T_C0, 4, 16, 64);
    nb_tile_shape(&c, T_A0, 2, 16, STEP_BYTES(kind));
    nb_tile_shape(&c, T_B0, 2, STEP_BYTES(kind) / 4, 64);
    nb_tiles_load(&c);
}

/* Blocks b0 .. b0+kc-1 of rows w .. w+15 (row_bytes apart, nb blocks):
 * signed quants into A (row i at a + i*AROW, block b - b0 at 32 (b - b0)),
 * the rows' scales as floats into sc[b - b0][16] (W4GR, groups of `group`:
 * and their zero points into zs[b - b0][16]). */
AI void load_tile_q0(const uint8_t *w, uint64_t row_bytes, int64_t nb, int64_t b0, int64_t kc, int8_t *a, float *sc,
                     int32_t *zs, const int kind, const int group) {
    const int four = kind == Q4_0R || kind == W4GR;
    const __m512i m4 = _mm512_set1_epi8(15), x80 = _mm512_set1_epi8((char)0x80);
    const __m512i e8 = _mm512_set1_epi8(kind == Q4_0R ? 8 : 0); /* W4GR: z comes off C */
    const int64_t nb4 = nb / 4 * 4, end = b0 + kc, ng = kind == W4GR ? nb * 32 / group : nb;
    const int64_t head = kind == W4GR ? ng * 4 : kind == W8R ? nb * 4 : nb * 2; /* bytes before the quants */
    for (int i = 0; i < TM; i++) {
        const uint8_t *q = w + (uint64_t)i * row_bytes + head;
        int8_t *dst = a + i * AROW - b0 * 32;
        int64_t b = b0;
        if (four) {
            for (; b + 4 <= end && b < nb4; b += 4) { /* 4 blocks: low nibbles are blocks 0-1, high ones 2-3 */
                _mm_prefetch((const char *)q + b * 16 + nb_prefetch_bytes, _MM_HINT_T0);
                const __m512i v = _mm512_loadu_si512((const void *)(q + b * 16));
                _mm512_storeu_si512((void *)(dst + b * 32), _mm512_sub_epi8(_mm512_and_si512(v, m4), e8));
                _mm512_storeu_si512((void *)(dst + b * 32 + 64),
                                    _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), e8));
            }
            for (; b < end; b++) { /* the tail in Q4_0's order: low nibbles weights 0-15, high 16-31 */
                const __m128i v = _mm_loadu_si128((const __m128i *)(q + b * 16));
                const __m128i lo = _mm_and_si128(v, _mm512_castsi512_si128(m4));
                const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm512_castsi512_si128(m4));
                _mm256_storeu_si256((__m256i *)(void *)(dst + b * 32),
                                    _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm512_castsi512_si256(e8)));
            }
        } else {
            for (; b + 2 <= end; b += 2) {
                _mm_prefetch((const char *)q + b * 32 + nb_prefetch_bytes, _MM_HINT_T0);
                _mm512_storeu_si512((void *)(dst + b * 32),
                                    _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + b * 32)), x80));
            }
            if (b < end)
                _mm256_storeu_si256((__m256i *)(void *)(dst + b * 32),
                                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + b * 32)),
                                                     _mm512_castsi512_si256(x80)));
        }
    }
    /* row i's fp16 scale of block b at w + i*row_bytes + 2b (W4GR: of its
     * group; W8R: f32 at 4b); the 32-bit gather reads 2 bytes past an fp16,
     * inside the row (its zero points or quants follow) */
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)row_bytes));
    for (int64_t b = b0; b < end; b++) {
        const int64_t gi = kind == W4GR ? b * 32 / group : b;
        if (kind == W8R) {
            _mm512_store_ps(sc + (b - b0) * 16, _mm512_i32gather_ps(rows, (const void *)(w + b * 4), 1));
            continue;
        }
        const __m512i h = _mm512_i32gather_epi32(rows, (const void *)(w + gi * 2), 1);
        _mm512_store_ps(sc + (b - b0) * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
        if (kind == W4GR) {
            const __m512i z = _mm512_i32gather_epi32(rows, (const void *)(w + (ng + gi) * 2), 1);
            _mm512_store_si512((void *)(zs + (b - b0) * 16), _mm512_cvttps_epi32(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(z))));
        }
    }
}

/* The same for the K types: steps b0 .. b0+kc-1 (Q4_KR: 32-weight blocks,
 * Q6_KR: their 16-weight halves) cover whole super-blocks, whose quants go
 * from lane order (kernels/repack.h: position 64k + 4l + c holds weight
 * 16l + 4k + c) back to the weights' order, the pack's. Q4_KR: a
 * sub-block is 32 consecutive bytes of A (unsigned 0..15, the min coming
 * off through the tokens' sums as in the VNNI kernel); sc[step - b0][16]
 * gets d*sc[sub-block] of each row, mn[step - b0][16] dmin*m[sub-block].
 * Q6_KR: q - 32 (16 bytes a step); sc gets d*sc[half]. */
AI void load_tile_k(const uint8_t *w, uint64_t row_bytes, int64_t b0, int64_t kc, int8_t *a, float *sc, float *mn,
                    const int kind) {
    const int six = kind == Q6_KR, steps = six ? 16 : 8; /* per super-block */
    const uint64_t bs = six ? sizeof(nb_block_q6_kr) : sizeof(nb_block_q4_kr);
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), e32 = _mm512_set1_epi8(32);
    for (int i = 0; i < TM; i++) {
        for (int64_t s = b0 / steps; s < (b0 + kc) / steps; s++) {
            const uint8_t *blk = w + (uint64_t)i * row_bytes + (uint64_t)s * bs;
            for (uint64_t l = 0; l < bs; l += 64) _mm_prefetch((const char *)blk + nb_prefetch_bytes + l, _MM_HINT_T0);
            __m512i u0, u1, u2, u3;
            _Alignas(64) float f[16];
            if (six) { /* as sbatch_avx512.c unpack_k */
                const nb_block_q6_kr *b = (const nb_block_q6_kr *)blk;
                const __m512i lo0 = _mm512_loadu_si512((const void *)b->ql), lo1 = _mm512_loadu_si512((const void *)(b->ql + 64));
                const __m512i h = _mm512_loadu_si512((const void *)b->qh);
                u0 = _mm512_or_si512(_mm512_and_si512(lo0, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
                u1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo0, 4), m4), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
                u2 = _mm512_or_si512(_mm512_and_si512(lo1, m4), _mm512_and_si512(h, m30));
                u3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo1, 4), m4), _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
                const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
                _mm512_store_ps(f, _mm512_mul_ps(v, _mm512_set1_ps(_cvtsh_ss(b->d))));
            } else { /* d*sc[0..7], dmin*m[0..7] as the VNNI kernel computes them */
                const nb_block_q4_kr *b = (const nb_block_q4_kr *)blk;
                const __m512i v0 = _mm512_loadu_si512((const void *)b->qs), v1 = _mm512_loadu_si512((const void *)(b->qs + 64));
                u0 = _mm512_and_si512(v0, m4);
                u1 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
                u2 = _mm512_and_si512(v1, m4);
                u3 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
                const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->sc)));
                const __m512 dm = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(b->d)), _mm256_set1_ps(_cvtsh_ss(b->dmin)), 1);
                _mm512_store_ps(f, _mm512_mul_ps(v, dm));
            }
            /* 128-bit lane j of r_i: the words of l = 4j + i for k = 0..3, i.e. weights 64j + 16i .. +15 */
            const __m512i t0 = _mm512_unpacklo_epi32(u0, u1), t1 = _mm512_unpackhi_epi32(u0, u1);
            const __m512i t2 = _mm512_unpacklo_epi32(u2, u3), t3 = _mm512_unpackhi_epi32(u2, u3);
            const __m512i r0 = _mm512_unpacklo_epi64(t0, t2), r1 = _mm512_unpackhi_epi64(t0, t2);
            const __m512i r2 = _mm512_unpacklo_epi64(t1, t3), r3 = _mm512_unpackhi_epi64(t1, t3);
            const __m512i x0 = _mm512_shuffle_i32x4(r0, r1, 0x44), x1 = _mm512_shuffle_i32x4(r2, r3, 0x44);
            const __m512i x2 = _mm512_shuffle_i32x4(r0, r1, 0xee), x3 = _mm512_shuffle_i32x4(r2, r3, 0xee);
            const __m512i n[4] = {_mm512_shuffle_i32x4(x0, x1, 0x88), _mm512_shuffle_i32x4(x0, x1, 0xdd),
                                  _mm512_shuffle_i32x4(x2, x3, 0x88), _mm512_shuffle_i32x4(x2, x3, 0xdd)};
            int8_t *dst = a + i * AROW + (s * steps - b0) * STEP_BYTES(kind);
            for (int j = 0; j < 4; j++) _mm512_storeu_si512((void *)(dst + 64 * j), six ? _mm512_sub_epi8(n[j], e32) : n[j]);
            for (int jb = 0; jb < steps; jb++) {
                sc[(s * steps - b0 + jb) * 16 + i] = f[jb];
                if (!six) mn[(s * steps - b0 + jb) * 16 + i] = f[8 + jb];
            }
        }
    }
}

/* C = A . B for block kb of the chunk into C tile S (A and B tiles S & 1),
 * stored at cb[S]. A tile store reaches memory only after it retires, and
 * the loads that read it back wait for that: block kb is issued three
 * blocks before it is scaled (with one block of lead, 60% of the time went
 * to those loads' waits). */
#define ISSUE(S, AB, kb)                                                                                     \
    do {                                                                                                     \
        if ((kb) < kc) {                                                                                     \
            _tile_zero(T_C##S);                                                                              \
            _tile_loadd(T_A##AB, a + (kb) * STEP_BYTES(kind), AROW);                                         \
            _tile_loadd(T_B##AB, q + (kb) * STEP_BYTES(kind) * 16, 64);                                      \
            _tile_dpbssd(T_C##S, T_A##AB, T_B##AB);                                                          \
            _tile_stored(T_C##S, cb[S], 64);                                                                 \
        }                                                                                                    \
    } while (0)
#define SCALE(S, kb)                                                                                         \
    do {                                                                                                     \
        if ((kb) < kc)                                                                                       \
            scale_block(cb[S], ap, g, b0 + (kb), sc + (kb) * 16, mn + (kb) * 16, zs + (kb) * 16, f, acc, kind); \
    } while (0)

/* Step b's products C (16 rows x 16 tokens of group g) into f, with the
 * operations of the VNNI kernels' lanes:
 *   Q4_0R / Q8_0R: f += float(C) * (d_tokens * d_row);
 *   Q4_KR: f = f + float(C) * d*sc_row - fsum_tokens * dmin*m_row,
 *   Q6_KR: f += float(C) * d*sc_row,
 *   and for both at the end of a super-block acc += f * d_tokens, f = 0. */
AI void scale_block(const int32_t *c, const nb_actpack *ap, int64_t g, int64_t b, const float *sc, const float *mn,
                    const int32_t *zs, __m512 f[TM], float *acc, const int kind) {
    const int64_t lane = (g * ap->nb + (b >> HALVES(kind))) * 16;
    if (kind == W4GR) { /* C - z*sum: the VNNI kernel's integer, then its float operations */
        const __m512 da = _mm512_load_ps(ap->d + lane);
        const __m512i sum = _mm512_load_si512((const void *)(ap->sum + lane));
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++) {
            const __m512i cz = _mm512_sub_epi32(_mm512_load_si512((const void *)(c + 16 * r)),
                                                _mm512_madd_epi16(sum, _mm512_set1_epi32(zs[r])));
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cz), _mm512_mul_ps(da, _mm512_set1_ps(sc[r])), f[r]);
        }
        return;
    }
    if (PER_BLOCK(kind)) {
        const __m512 da = _mm512_load_ps(ap->d + lane);
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++)
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(c + 16 * r))),
                                   _mm512_mul_ps(da, _mm512_set1_ps(sc[r])), f[r]);
        return;
    }
    if (kind == Q4_KR) {
        const __m512 fs = _mm512_load_ps(ap->fsum + lane);
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++)
            f[r] = _mm512_fnmadd_ps(fs, _mm512_set1_ps(mn[r]),
                                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(c + 16 * r))),
                                                    _mm512_set1_ps(sc[r]), f[r]));
    } else {
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++)
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(c + 16 * r))),
                                   _mm512_set1_ps(sc[r]), f[r]);
    }
    if ((b & (kind == Q6_KR ? 15 : 7)) == (kind == Q6_KR ? 15 : 7)) {
        const __m512 da = _mm512_load_ps(ap->d + lane);
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++) {
            _mm512_store_ps(acc + 16 * r, _mm512_fmadd_ps(f[r], da, _mm512_load_ps(acc + 16 * r)));
            f[r] = _mm512_setzero_ps();
        }
    }
}

/* Group g's tokens against the chunk in A (blocks b0 .. b0+kc-1): acc
 * (16 rows x 16 tokens) += the chunk's products, from zero when first. */
AI void group_chunk(const int8_t *a, const float *sc, const float *mn, const int32_t *zs, const nb_actpack *ap,
                    int64_t g, int64_t b0, int64_t kc, float *acc, int first, const int kind) {
    const int8_t *q = ap->q + (g * ap->nb + (b0 >> HALVES(kind))) * 512;
    _Alignas(64) int32_t cb[4][TM * 16];
    __m512 f[TM];
#pragma GCC unroll 16
    for (int r = 0; r < TM; r++) {
        if (kind == Q4_KR || kind == Q6_KR) { /* acc takes whole super-blocks */
            f[r] = _mm512_setzero_ps();
            if (first) _mm512_store_ps(acc + 16 * r, f[r]);
        } else {
            f[r] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + 16 * r);
        }
    }
    ISSUE(0, 0, 0);
    ISSUE(1, 1, 1);
    ISSUE(2, 0, 2);
    for (int64_t kb = 0; kb < kc; kb += 4) {
        ISSUE(3, 1, kb + 3);
        SCALE(0, kb);
        ISSUE(0, 0, kb + 4);
        SCALE(1, kb + 1);
        ISSUE(1, 1, kb + 5);
        SCALE(2, kb + 2);
        ISSUE(2, 0, kb + 6);
        SCALE(3, kb + 3);
    }
    if (PER_BLOCK(kind))
#pragma GCC unroll 16
        for (int r = 0; r < TM; r++) _mm512_store_ps(acc + 16 * r, f[r]);
}

/* One instance per kind, so each inner loop compiles once. */
static __attribute__((noinline)) void group_chunk_q4_0r(const int8_t *a, const float *sc, const nb_actpack *ap,
                                                         int64_t g, int64_t b0, int64_t kc, float *acc, int first) {
    group_chunk(a, sc, NULL, NULL, ap, g, b0, kc, acc, first, Q4_0R);
}
static __attribute__((noinline)) void group_chunk_w4gr(const int8_t *a, const float *sc, const int32_t *zs,
                                                        const nb_actpack *ap, int64_t g, int64_t b0, int64_t kc,
                                                        float *acc, int first) {
    group_chunk(a, sc, NULL, zs, ap, g, b0, kc, acc, first, W4GR);
}
static __attribute__((noinline)) void group_chunk_q4_kr(const int8_t *a, const float *sc, const float *mn,
                                                         const nb_actpack *ap, int64_t g, int64_t b0, int64_t kc,
                                                         float *acc, int first) {
    group_chunk(a, sc, mn, NULL, ap, g, b0, kc, acc, first, Q4_KR);
}
static __attribute__((noinline)) void group_chunk_q6_kr(const int8_t *a, const float *sc, const nb_actpack *ap,
                                                         int64_t g, int64_t b0, int64_t kc, float *acc, int first) {
    group_chunk(a, sc, NULL, NULL, ap, g, b0, kc, acc, first, Q6_KR);
}

/* acc (16 rows x 16 tokens) of group g into y: token t's 16 rows at y[t*ldy]. */
static void store_group(const float *acc, const nb_actpack *ap, int64_t g, float *y, int64_t ldy) {
    __m512i v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) v[r] = _mm512_load_si512((const void *)(acc + 16 * r));
    nb_transpose16(v, v);
    const int64_t t0 = g * 16, nt = ap->n - t0 < 16 ? ap->n - t0 : 16;
    for (int64_t t = 0; t < nt; t++) _mm512_storeu_si512((void *)(y + (t0 + t) * ldy), v[t]);
}

AI void gemm_amx(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy,
                 const int kind, const int group, nb_repack_gemm_fn rest) {
    /* Q6_KR: each 16-row tile's unpack (a transpose per super-block) costs
     * more than two token groups save: 32 tokens, one thread, 256 MiB of
     * 5632 x 2048 weights: 93-96 ms against the VNNI GEMM's 90, 64 tokens
     * 148 against 164 (docs/speed.md, session 27) */
    const int64_t whole = kind == Q6_KR && ap->ng < 3 ? 0 : nr / TM * TM;
    const int64_t nb = ap->nb << HALVES(kind); /* steps per row */
    if (whole) {
        _Alignas(64) int8_t a[TM * AROW];
        _Alignas(64) float sc[KC * 16], mn[KC * 16];
        _Alignas(64) int32_t zs[KC * 16];
        _Alignas(64) float acc[GB][TM * 16];
        tiles_begin(kind);
        for (int64_t r = 0; r < whole; r += TM) {
            const uint8_t *wr = w + (uint64_t)r * row_bytes;
            for (int64_t g0 = 0; g0 < ap->ng; g0 += GB) {
                const int64_t gn = ap->ng - g0 < GB ? ap->ng - g0 : GB;
                for (int64_t b0 = 0; b0 < nb; b0 += KC) {
                    const int64_t kc = nb - b0 < KC ? nb - b0 : KC;
                    if (kind == Q4_KR || kind == Q6_KR) load_tile_k(wr, row_bytes, b0, kc, a, sc, mn, kind);
                    else load_tile_q0(wr, row_bytes, nb, b0, kc, a, sc, zs, kind, group);
                    for (int64_t gi = 0; gi < gn; gi++) {
                        /* Q8_0R and W8R share Q4_0R's instance: only the loads differ */
                        if (kind == Q4_KR) group_chunk_q4_kr(a, sc, mn, ap, g0 + gi, b0, kc, acc[gi], b0 == 0);
                        else if (kind == Q6_KR) group_chunk_q6_kr(a, sc, ap, g0 + gi, b0, kc, acc[gi], b0 == 0);
                        else if (kind == W4GR) group_chunk_w4gr(a, sc, zs, ap, g0 + gi, b0, kc, acc[gi], b0 == 0);
                        else group_chunk_q4_0r(a, sc, ap, g0 + gi, b0, kc, acc[gi], b0 == 0);
                    }
                }
                for (int64_t gi = 0; gi < gn; gi++) store_group(acc[gi], ap, g0 + gi, y + r, ldy);
            }
        }
        _tile_release();
    }
    /* the rows past the last whole tile: the AVX-512 kernel the results equal bit for bit */
    if (nr > whole) rest(w + (uint64_t)whole * row_bytes, row_bytes, nr - whole, ap, y + whole, ldy);
}

#define GEMM_AMX(name, kind, group, rest)                                                                            \
    void name(const uint8_t *w, uint64_t row_bytes, int64_t nr, const nb_actpack *ap, float *y, int64_t ldy) {       \
        gemm_amx(w, row_bytes, nr, ap, y, ldy, kind, group, rest);                                                   \
    }
GEMM_AMX(nb_q4_0r_gemm_amx, Q4_0R, 0, nb_q4_0r_sgemm_avx512)
GEMM_AMX(nb_q8_0r_gemm_amx, Q8_0R, 0, nb_q8_0r_sgemm_avx512)
GEMM_AMX(nb_q4_kr_gemm_amx, Q4_KR, 0, nb_q4_kr_sgemm_avx512)
GEMM_AMX(nb_q6_kr_gemm_amx, Q6_KR, 0, nb_q6_kr_sgemm_avx512)
GEMM_AMX(nb_w8r_gemm_amx, W8R, 0, nb_w8r_gemm_avx512)
GEMM_AMX(nb_w4g32r_gemm_amx, W4GR, 32, nb_w4g32r_gemm_avx512)
GEMM_AMX(nb_w4g64r_gemm_amx, W4GR, 64, nb_w4g64r_gemm_avx512)
GEMM_AMX(nb_w4g128r_gemm_amx, W4GR, 128, nb_w4g128r_gemm_avx512)
