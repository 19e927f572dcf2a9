/* The SIMD flash attention kernels (kernels/attn.h) against the scalar one
 * over long contexts: about 1100 keys in KV blocks of 16 and 5 through a
 * shuffled block table, so a tile's queries sit far past the first key
 * chunk and every chunk, block and causal-diagonal offset is crossed; for
 * every KV type (f32, f16, bf16, int8 and fp8 with per-slot scales), head
 * sizes 64 and 128 (the compiled constants), 40 (run-time, column tail) and
 * 80 (run-time, a multiple of 16 as the int8-dot kernel needs),
 * GQA groups 1, 2, 3, 4, 6 and 8, tiles of 1, 2, 5, 13, 21 and 37 tokens
 * (the last tile of the context, decode tokens, tiles off the key-chunk
 * grid, the tiles of <= 8 rows the AVX-512 kernel runs its own way). Some
 * keys are made to dominate (a scaled copy of a query), at the first
 * position and at odd places later on, so the running max grows both early and late (the
 * kernels' rescaling paths) or never after the first key. The pool is laid
 * out here as nb_attn_kv describes it, so this runs with nb_kernels alone.
 * A kernel the CPU lacks is a real skip. The bf16-dot kernel for bf16 and
 * fp8 pools rounds Q and the probabilities to bf16 for its products: it is checked
 * against the reference on the same bf16-rounded Q, within what the
 * probabilities' rounding (2^-9 relative) can move the output, and on the
 * other types (its fallback) against the f32 kernel, bit for bit; the
 * int8-dot kernel for int8 pools the same way (INT8_DOTS_TOL). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "kernels/attn.h"
#include "testutil.h"

#define NPOS 1100
#define NKVH 2
#define MAXNQ 8
#define MAXNT 37
/* The int8-dot kernel against the reference: Q rounded to int8 per row
 * (steps of 1/127 of the row's largest element) and the probabilities to
 * u8 per chunk; 2.5x the largest error it showed here (7.8e-3). */
#define INT8_DOTS_TOL 2e-2f
/* The plain-AVX2 int8-dot kernel: Q and the probabilities in 7 bits
 * (attn.h nb_attn_avx2_int8_madd); 2.6x its largest error here (1.36e-2). */
#define INT8_MADD_TOL 3.5e-2f
/* The AMX split-bf16 kernel: the f32 kernels' tolerance (its largest
 * error here is 4.6e-6: products within about 2^-15, sums in f32). */
#define AMX_SPLIT_TOL 2e-5f

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65535.0f) * 2.0f - 1.0f;
}

/* A random fp8 e4m3 code of magnitude below 16 (exponent field 0..10). */
static uint8_t rand_fp8(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    const unsigned r = *s >> 8;
    return (uint8_t)((r & 0x80) | ((r >> 3) % 11) << 3 | (r & 7));
}

typedef struct pool {
    nb_attn_kv kv;
    int32_t *blocks;
    uint8_t *k, *v;
    float *ks, *vs;
} pool;

/* Element i of a row of type t from a float (the 8-bit types get the value
 * already divided by the slot's scale). */
static void put(nb_kv_type t, uint8_t *row, int i, float x) {
    switch (t) {
    case NB_KVT_F32: memcpy(row + 4 * (size_t)i, &x, 4); break;
    case NB_KVT_F16: { uint16_t h = nb_fp32_to_fp16(x); memcpy(row + 2 * (size_t)i, &h, 2); break; }
    case NB_KVT_BF16: { uint16_t h = nb_fp32_to_bf16(x); memcpy(row + 2 * (size_t)i, &h, 2); break; }
    case NB_KVT_INT8: { long c = lrintf(x); row[i] = (uint8_t)(int8_t)(c > 127 ? 127 : c < -127 ? -127 : c); break; }
    case NB_KVT_FP8: { /* the nearest code (only the few hot keys come here) */
        const float *lut = nb_attn_fp8_table();
        int best = 0;
        for (int c = 1; c < 256; c++)
            if ((c & 0x7f) != 0x7f && fabsf(lut[c] - x) < fabsf(lut[best] - x)) best = c;
        row[i] = (uint8_t)best;
        break;
    }
    }
}

/* NPOS positions, head_dim hd, block size bs; the keys at `hot` positions
 * are hot_mul[i] (NULL: 3) times the query row qhot (KV head 0), so they
 * dominate that row. */
static void pool_fill(pool *p, nb_kv_type t, int hd, int bs, unsigned seed, const float *qhot, const int *hot,
                      const float *hot_mul, int nhot) {
    static const int elem[] = {4, 2, 2, 1, 1};
    memset(p, 0, sizeof *p);
    const int nblk = (NPOS + bs - 1) / bs;
    p->kv.type = t;
    p->kv.elem = elem[t];
    p->kv.head_dim = hd;
    p->kv.n_head_kv = NKVH;
    p->kv.block_size = bs;
    p->kv.row = (int64_t)hd * elem[t];
    p->kv.n_blocks = nblk; /* grouped head-major, as model/kv.h lays it out (nb_attn_kv_off) */
    p->blocks = malloc((size_t)nblk * sizeof *p->blocks);
    p->k = malloc((size_t)NKVH * nblk * bs * p->kv.row);
    p->v = malloc((size_t)NKVH * nblk * bs * p->kv.row);
    assert_non_null(p->blocks);
    assert_non_null(p->k);
    assert_non_null(p->v);
    for (int b = 0; b < nblk; b++) p->blocks[b] = (int32_t)((b * 37 + 11) % nblk); /* 37 is prime to every nblk here */
    const bool scaled = t == NB_KVT_INT8 || t == NB_KVT_FP8;
    if (scaled) {
        p->ks = malloc((size_t)nblk * bs * NKVH * sizeof(float));
        p->vs = malloc((size_t)nblk * bs * NKVH * sizeof(float));
        assert_non_null(p->ks);
        assert_non_null(p->vs);
    }
    for (int pos = 0; pos < NPOS; pos++) {
        const int64_t idx = (int64_t)p->blocks[pos / bs] * bs + pos % bs;
        bool is_hot = false;
        float mul = 3.0f;
        for (int i = 0; i < nhot; i++)
            if (hot[i] == pos) {
                is_hot = true;
                if (hot_mul) mul = hot_mul[i];
            }
        for (int h = 0; h < NKVH; h++) {
            uint8_t *kr = p->k + nb_attn_kv_off(&p->kv, p->blocks[pos / bs], pos % bs, h);
            uint8_t *vr = p->v + nb_attn_kv_off(&p->kv, p->blocks[pos / bs], pos % bs, h);
            const float ksc = 0.05f + 0.1f * (frand(&seed) + 1), vsc = 0.05f + 0.1f * (frand(&seed) + 1);
            for (int j = 0; j < hd; j++) {
                float kx = 2.0f * frand(&seed), vx = frand(&seed);
                if (is_hot && h == 0) kx = mul * qhot[j];
                /* the 8-bit types store x / scale; the kernels multiply it back */
                if (t == NB_KVT_FP8 && !(is_hot && h == 0)) { /* any code but NaN */
                    kr[j] = rand_fp8(&seed);
                } else {
                    put(t, kr, j, scaled ? kx / ksc : kx);
                }
                if (t == NB_KVT_FP8) {
                    vr[j] = rand_fp8(&seed);
                } else {
                    put(t, vr, j, scaled ? vx / vsc : vx);
                }
            }
            if (scaled) {
                p->ks[idx * NKVH + h] = ksc;
                p->vs[idx * NKVH + h] = vsc;
            }
        }
    }
    p->kv.k = p->k;
    p->kv.v = p->v;
    p->kv.ks = p->ks;
    p->kv.vs = p->vs;
}

static void pool_free(pool *p) {
    free(p->blocks);
    free(p->k);
    free(p->v);
    free(p->ks);
    free(p->vs);
}

static void run_tile(nb_attn_fn fn, const pool *p, const float *q, float *out, float *lse, int kvh, int nq, int nt,
                     int32_t pos0) {
    const int hd = p->kv.head_dim;
    float *scratch = aligned_alloc(64, (nb_attn_scratch_floats(hd, nq, nt) * sizeof(float) + 63) & ~(size_t)63);
    assert_non_null(scratch);
    nb_attn_tile t = {&p->kv, p->blocks, kvh, nq, nt, pos0, q, (int64_t)nq * hd, out, (int64_t)nq * hd,
                      1.0f / sqrtf((float)hd), scratch, lse};
    fn(&t);
    free(scratch);
}

/* fn against ref (the scalar kernel unless said) on every case;
 * only_type >= 0: that KV type alone; bf16_q: both get Q rounded to bf16
 * (to nearest even) first; tol: the allowed |ref - got| / (1 + |ref|).
 * Returns the largest one seen. */
static float check_cases(nb_attn_fn fn, nb_attn_fn ref, const char *name, int only_type, bool bf16_q, float tol) {
    const int hds[] = {64, 128, 40, 80, 96}, bss[] = {16, 5}; /* 96: three tile steps over 16 key pairs */
    /* (group, tokens, first position): the last tile of the context, one
     * decode token at its end, a mid tile off the chunk grid, an early one;
     * then tiles of <= 8 rows (the AVX-512 decode tiles, G = 2, 4, 8, 16
     * keys per row in the lanes): a decode token of each group size, rows
     * at two or five positions, padding rows (6 of 8, 5 of 8), the first
     * key alone, a tile ending on a 32-key chunk edge */
    static const struct { int nq, nt; int32_t pos0; } cases_[] = {
        {8, 21, NPOS - 21}, {4, 1, NPOS - 1}, {1, 13, 511}, {8, 13, 17}, {2, MAXNT, 700},
        {8, 1, NPOS - 1},   {2, 1, 777},      {1, 1, 600},  {3, 2, NPOS - 2}, {1, 5, 40},
        {1, 1, 0},          {2, 2, 30},       {6, 1, 95}};
    enum { NCASE = sizeof cases_ / sizeof cases_[0] };
    float *q = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    float *want = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    float *got = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    float want_lse[MAXNT * MAXNQ], got_lse[MAXNT * MAXNQ];
    assert_non_null(q);
    assert_non_null(want);
    assert_non_null(got);
    int ncases = 0;
    float worst = 0;
    for (int t = 0; t <= NB_KVT_FP8; t++)
        for (int hi = 0; hi < 5 && (only_type < 0 || t == only_type); hi++)
            for (int hot_kind = 0; hot_kind < 3; hot_kind++) {
                const int hd = hds[hi], bs = bss[(t + hi + hot_kind) % 2];
                unsigned s = 101u + (unsigned)(t * 7 + hi * 3 + hot_kind);
                for (int i = 0; i < MAXNT * MAXNQ * hd; i++) {
                    q[i] = frand(&s);
                    if (bf16_q) q[i] = nb_bf16_to_fp32(nb_fp32_to_bf16(q[i]));
                }
                /* hot keys: the first one only (max never grows after key 0),
                 * some spread over the context (it grows late, mid-chunk), or
                 * growing ones: row 0's max grows by a few powers of 2 at key
                 * 300 and by more than 2^16 at key 700 (hd 64: about 6 and
                 * 17 in log2 units; the AMX kernels' two softmax paths) */
                const int hot_first[] = {0}, hot_late[] = {3, 200, 517, 1049}, hot_grow[] = {40, 300, 700};
                const float grow_mul[] = {1.0f, 2.5f, 7.0f};
                pool p;
                if (hot_kind == 0) pool_fill(&p, (nb_kv_type)t, hd, bs, 7u + (unsigned)t, q, hot_first, NULL, 1);
                else if (hot_kind == 1) pool_fill(&p, (nb_kv_type)t, hd, bs, 7u + (unsigned)t, q, hot_late, NULL, 4);
                else pool_fill(&p, (nb_kv_type)t, hd, bs, 7u + (unsigned)t, q, hot_grow, grow_mul, 3);
                for (int c = 0; c < NCASE; c++) {
                    const int nq = cases_[c].nq, nt = cases_[c].nt, kvh = (c + hot_kind) % 2;
                    const int32_t pos0 = cases_[c].pos0;
                    const int n = nt * nq * hd;
                    run_tile(ref, &p, q, want, want_lse, kvh, nq, nt, pos0);
                    for (int i = 0; i < n; i++) got[i] = NAN;
                    for (int r = 0; r < nt * nq; r++) got_lse[r] = NAN;
                    run_tile(fn, &p, q, got, got_lse, kvh, nq, nt, pos0);
                    /* the log-sum-exp the split decode merges by: log L errs
                     * by L's relative error */
                    for (int r = 0; r < nt * nq; r++)
                        if (!(fabsf(want_lse[r] - got_lse[r]) <= tol * (1 + fabsf(want_lse[r]))))
                            fail_msg("%s type %d hd %d bs %d hot %d nq %d nt %d pos0 %d: row %d lse ref %g got %g", name, t,
                                     hd, bs, hot_kind, nq, nt, pos0, r, want_lse[r], got_lse[r]);
                    for (int i = 0; i < n; i++) {
                        const float e = fabsf(want[i] - got[i]) / (1 + fabsf(want[i]));
                        if (!(e <= tol))
                            fail_msg("%s type %d hd %d bs %d hot %d nq %d nt %d pos0 %d: row %d elem %d ref %g got %g",
                                     name, t, hd, bs, hot_kind, nq, nt, pos0, i / hd, i % hd, want[i], got[i]);
                        worst = e > worst ? e : worst;
                    }
                    ncases++;
                }
                pool_free(&p);
            }
    assert_int_equal(ncases, (only_type < 0 ? 5 : 1) * 5 * 3 * NCASE);
    free(q);
    free(want);
    free(got);
    return worst;
}

static void check_kernel(nb_attn_fn fn, const char *name) { check_cases(fn, nb_attn_ref, name, -1, false, 2e-5f); }

static void test_avx2_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX2 ? nb_attn_avx2() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX2 kernel on this CPU (or NIBBLE_ISA below it)");
    check_kernel(fn, "avx2");
}

static void test_avx512_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX-512 kernel on this CPU (or NIBBLE_ISA below it)");
    check_kernel(fn, "avx512");
}

/* A low-precision dot kernel for pools of type own (and own2, -1: none):
 * against the reference within tol (Q rounded to bf16 first for both when
 * bf16_q), and it must round (worst > min_err: not its fallback by
 * mistake); every other type goes to the fallback bit for bit. */
static void check_lowp(nb_attn_fn fn, nb_attn_fn fallback, const char *name, nb_kv_type own, int own2, bool bf16_q,
                       float tol, float min_err) {
    for (int t = 0; t <= NB_KVT_FP8; t++) {
        if (t != (int)own && t != own2) {
            check_cases(fn, fallback, name, t, false, 0);
            continue;
        }
        const float worst = check_cases(fn, nb_attn_ref, name, t, bf16_q, tol);
        fprintf(stderr, "  %s, KV type %d: largest |ref - got| / (1 + |ref|) %.2e\n", name, t, worst);
        assert_true(worst > min_err);
    }
}

static void test_avx512_bf16_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512_bf16() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX512_BF16 on this CPU (or NIBBLE_ISA below AVX-512)");
    check_lowp(fn, nb_attn_avx512(), "avx512 bf16 dots", NB_KVT_BF16, NB_KVT_FP8, true, 4e-3f, 0);
}

/* A vectorised fp8 conversion writing n codes' values as 32-bit words
 * (the f32 bits, or the bf16 bits widened), and the word past them
 * untouched (FP8_SENTINEL) or not. */
#define FP8_SENTINEL 0xa5a5a5a5u
typedef void (*fp8_conv)(const uint8_t *codes, uint32_t *out, int n);

static void fp8_bf16_avx512(const uint8_t *codes, uint32_t *out, int n) {
    uint16_t h[256 + 16];
    memset(h, 0xa5, sizeof h);
    nb_attn_fp8_to_bf16_avx512(codes, h, n);
    for (int i = 0; i < n; i++) out[i] = h[i];
    out[n] = h[n] == 0xa5a5 ? FP8_SENTINEL : 0;
}

static void fp8_f32_avx2(const uint8_t *codes, uint32_t *out, int n) {
    float f[256 + 16];
    memset(f, 0xa5, sizeof f);
    nb_attn_fp8_to_f32_avx2(codes, f, n);
    memcpy(out, f, (size_t)(n + 1) * sizeof *out);
}

/* Every code bit for bit against nb_attn_fp8_table's values (>> shift:
 * 16 for bf16 bits), from every start offset of a step of `step` codes
 * and with every tail length; nothing written past n. */
static void check_fp8_conv(fp8_conv conv, int step, int shift, const char *what) {
    const float *lut = nb_attn_fp8_table();
    uint8_t codes[256 + 16];
    uint32_t out[256 + 16];
    for (int off = 0; off < step; off++)
        for (int n = 256 - step + 1; n <= 256; n++) {
            for (int i = 0; i < n; i++) codes[i] = (uint8_t)(i + off);
            conv(codes, out, n);
            for (int i = 0; i < n; i++) {
                uint32_t u;
                memcpy(&u, &lut[codes[i]], 4);
                if (out[i] != u >> shift)
                    fail_msg("%s: code 0x%02x (offset %d, n %d): 0x%08x, the table's 0x%08x", what, codes[i], off, n,
                             (unsigned)out[i], (unsigned)(u >> shift));
            }
            assert_int_equal(out[n], FP8_SENTINEL);
        }
}

/* The bf16-dot kernel's fp8 codes as bf16 bits (by arithmetic). */
static void test_fp8_to_bf16(void **state) {
    (void)state;
    if (nb_cpu_isa() < NB_ISA_AVX512) NB_TEST_SKIP("no AVX-512 on this CPU (or NIBBLE_ISA below AVX-512)");
    check_fp8_conv(fp8_bf16_avx512, 16, 16, "avx512 fp8 -> bf16");
}

/* The AVX2 kernels' fp8 codes as f32 (by arithmetic, no table gather). */
static void test_fp8_to_f32_avx2(void **state) {
    (void)state;
    if (nb_cpu_isa() < NB_ISA_AVX2) NB_TEST_SKIP("no AVX2 on this CPU (or NIBBLE_ISA below AVX2)");
    check_fp8_conv(fp8_f32_avx2, 8, 0, "avx2 fp8 -> f32");
}

/* The AMX kernel has the bf16-dot kernel's roundings (head sizes 64 and
 * 128 on the tile unit, 40 and 80 and the decode tiles through the
 * bf16-dot kernel): the same tolerance. */
static void test_amx_bf16_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AMX ? nb_attn_amx_bf16() : NULL;
    if (!fn) NB_TEST_SKIP("no AMX-BF16 granted on this CPU (or NIBBLE_ISA below amx)");
    check_lowp(fn, nb_attn_avx512(), "amx bf16", NB_KVT_BF16, -1, true, 4e-3f, 0);
}

/* The AMX split-bf16 kernel on every pool type: products within about
 * 2^-15 of f32 (attn.h), so against the reference within AMX_SPLIT_TOL;
 * its prompt tiles must not be the f32 kernel's (some element differs)
 * and its decode tiles must be (bit for bit). */
static void test_amx_split_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AMX ? nb_attn_amx_split() : NULL;
    if (!fn) NB_TEST_SKIP("no AMX-BF16 granted on this CPU (or NIBBLE_ISA below amx)");
    const float worst = check_cases(fn, nb_attn_ref, "amx split", -1, false, AMX_SPLIT_TOL);
    fprintf(stderr, "  amx split: largest |ref - got| / (1 + |ref|) %.2e\n", worst);
    const int hd = 64, nq = 8;
    float *q = malloc((size_t)MAXNT * nq * hd * sizeof(float)), *a = malloc((size_t)MAXNT * nq * hd * sizeof(float)),
          *b = malloc((size_t)MAXNT * nq * hd * sizeof(float));
    assert_non_null(q);
    assert_non_null(a);
    assert_non_null(b);
    unsigned s = 5;
    for (int i = 0; i < MAXNT * nq * hd; i++) q[i] = frand(&s);
    const int hot[] = {300};
    pool p;
    pool_fill(&p, NB_KVT_F32, hd, 16, 9, q, hot, NULL, 1);
    for (int nt = 1; nt <= MAXNT; nt += MAXNT - 1) {
        run_tile(fn, &p, q, a, NULL, 1, nq, nt, NPOS - nt);
        run_tile(nb_attn_avx512(), &p, q, b, NULL, 1, nq, nt, NPOS - nt);
        const bool same = !memcmp(a, b, (size_t)nt * nq * hd * sizeof(float));
        if (same != (nt * nq <= 8)) fail_msg("amx split, %d rows: %s the f32 kernel's output", nt * nq,
                                             same ? "equal to" : "differs from");
    }
    pool_free(&p);
    free(q);
    free(a);
    free(b);
}

/* The split kernel with the int8 dots beside it (int8 pools where AMX is
 * granted): int8 pools against the reference within the int8 dots'
 * tolerance (head sizes 40 and 80 and the decode tiles take them), and
 * every pool bit for bit as the two kernels it routes to. */
static nb_attn_fn split_kernel, int8_kernel;
static void split_or_int8(const nb_attn_tile *t) {
    const int hd = t->kv->head_dim;
    if (t->nt * t->nq > 8 && hd % 32 == 0 && hd <= NB_ATTN_AMX_SPLIT_MAX_HD) split_kernel(t);
    else int8_kernel(t);
}

static void test_amx_split_int8_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AMX ? nb_attn_amx_split_int8() : NULL;
    if (!fn) NB_TEST_SKIP("no AMX-BF16 granted on this CPU (or NIBBLE_ISA below amx)");
    split_kernel = nb_attn_amx_split();
    int8_kernel = nb_attn_avx512_int8();
    const float worst = check_cases(fn, nb_attn_ref, "amx split + int8 dots", NB_KVT_INT8, false, INT8_DOTS_TOL);
    fprintf(stderr, "  amx split + int8 dots: largest |ref - got| / (1 + |ref|) %.2e\n", worst);
    check_cases(fn, split_or_int8, "amx split + int8 dots", -1, false, 0);
}

static void test_avx512_int8_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512_int8() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX512_VNNI on this CPU (or NIBBLE_ISA below AVX-512)");
    check_lowp(fn, nb_attn_avx512(), "avx512 int8 dots", NB_KVT_INT8, -1, false, INT8_DOTS_TOL, 1e-4f);
}

/* The same with the decode tiles on bf16 dots: Q rounded to bf16 there
 * instead of int8, within the int8 dots' tolerance. */
static void test_avx512_int8_bf16_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512_int8_bf16() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX512_VNNI and AVX512_BF16 on this CPU (or NIBBLE_ISA below AVX-512)");
    check_lowp(fn, nb_attn_avx512(), "avx512 int8 dots, bf16 decode", NB_KVT_INT8, -1, false, INT8_DOTS_TOL, 1e-4f);
}

static void test_avx2_int8_long(void **state) {
    (void)state;
    nb_attn_fn fn = nb_cpu_isa() >= NB_ISA_AVX2 ? nb_attn_avx2_int8() : NULL;
    if (!fn) NB_TEST_SKIP("no AVX-VNNI on this CPU (or NIBBLE_ISA below AVX2, or NIBBLE_AVXVNNI=0)");
    check_lowp(fn, nb_attn_avx2(), "avx2 int8 dots", NB_KVT_INT8, -1, false, INT8_DOTS_TOL, 1e-4f);
}

/* The plain-AVX2 int8-dot kernel (vpmaddubsw): Q and the probabilities in
 * 7 bits, so within INT8_MADD_TOL; other pools and decode tiles are the
 * f32 kernel's, bit for bit. */
static void test_avx2_int8_madd_long(void **state) {
    (void)state;
    if (nb_cpu_isa() < NB_ISA_AVX2) NB_TEST_SKIP("no AVX2 on this CPU (or NIBBLE_ISA below AVX2)");
    check_lowp(nb_attn_avx2_int8_madd(), nb_attn_avx2(), "avx2 int8 maddubs", NB_KVT_INT8, -1, false, INT8_MADD_TOL,
               1e-4f);
}

/* The two widths of the int8-dot kernel (attn_i8_impl.h) agree to the bit
 * on the tiles they run (more than 8 rows): every per-lane operation is
 * the same and the integer sums are exact. */
static void test_int8_dots_widths(void **state) {
    (void)state;
    nb_attn_fn a = nb_cpu_isa() >= NB_ISA_AVX512 ? nb_attn_avx512_int8() : NULL;
    nb_attn_fn b = nb_cpu_isa() >= NB_ISA_AVX2 ? nb_attn_avx2_int8() : NULL;
    if (!a || !b) NB_TEST_SKIP("needs both AVX512_VNNI and AVX-VNNI (and NIBBLE_ISA at AVX-512)");
    static const struct { int nq, nt; int32_t pos0; } cases_[] = {
        {8, 21, NPOS - 21}, {1, 13, 511}, {8, 13, 17}, {2, MAXNT, 700}, {3, 5, 60}, {1, 9, 0}};
    const int hds[] = {64, 128, 80};
    float *q = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    float *x = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    float *y = malloc((size_t)MAXNT * MAXNQ * 128 * sizeof(float));
    assert_non_null(q);
    assert_non_null(x);
    assert_non_null(y);
    for (int hi = 0; hi < 3; hi++) {
        const int hd = hds[hi];
        unsigned s = 77u + (unsigned)hd;
        for (int i = 0; i < MAXNT * MAXNQ * hd; i++) q[i] = frand(&s);
        const int hot[] = {3, 517};
        pool p;
        pool_fill(&p, NB_KVT_INT8, hd, 16, 5u, q, hot, NULL, 2);
        for (size_t c = 0; c < sizeof cases_ / sizeof cases_[0]; c++) {
            const int n = cases_[c].nt * cases_[c].nq * hd;
            run_tile(a, &p, q, x, NULL, (int)c % 2, cases_[c].nq, cases_[c].nt, cases_[c].pos0);
            run_tile(b, &p, q, y, NULL, (int)c % 2, cases_[c].nq, cases_[c].nt, cases_[c].pos0);
            for (int i = 0; i < n; i++)
                if (memcmp(&x[i], &y[i], sizeof x[i]))
                    fail_msg("hd %d nq %d nt %d: elem %d avx512 %a avx2 %a", hd, cases_[c].nq, cases_[c].nt, i, x[i],
                             y[i]);
        }
        pool_free(&p);
    }
    free(q);
    free(x);
    free(y);
}

/* The kernel nb_attn_get picks (whatever the CPU and NIBBLE_ISA allow,
 * the scalar one included) against the scalar one on one long tile. */
static void test_dispatched_long(void **state) {
    (void)state;
    const char *name = NULL;
    nb_attn_fn fn = nb_attn_get(nb_cpu_isa(), &name);
    assert_non_null(fn);
    assert_non_null(name);
    const int hd = 64, nq = 8, nt = 37;
    unsigned s = 9;
    float *q = malloc((size_t)nt * nq * hd * sizeof(float)), *want = malloc((size_t)nt * nq * hd * sizeof(float)),
          *got = malloc((size_t)nt * nq * hd * sizeof(float));
    assert_non_null(q);
    assert_non_null(want);
    assert_non_null(got);
    for (int i = 0; i < nt * nq * hd; i++) q[i] = frand(&s);
    const int hot[] = {700};
    pool p;
    pool_fill(&p, NB_KVT_F16, hd, 16, 3, q, hot, NULL, 1);
    run_tile(nb_attn_ref, &p, q, want, NULL, 0, nq, nt, NPOS - nt);
    run_tile(fn, &p, q, got, NULL, 0, nq, nt, NPOS - nt);
    for (int i = 0; i < nt * nq * hd; i++)
        if (!(fabsf(want[i] - got[i]) <= 2e-5f * (1 + fabsf(want[i]))))
            fail_msg("%s: elem %d ref %g got %g", name, i, want[i], got[i]);
    pool_free(&p);
    free(q);
    free(want);
    free(got);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2_long),
        cmocka_unit_test(test_avx512_long),
        cmocka_unit_test(test_avx512_bf16_long),
        cmocka_unit_test(test_fp8_to_bf16),
        cmocka_unit_test(test_fp8_to_f32_avx2),
        cmocka_unit_test(test_amx_bf16_long),
        cmocka_unit_test(test_amx_split_long),
        cmocka_unit_test(test_amx_split_int8_long),
        cmocka_unit_test(test_avx512_int8_long),
        cmocka_unit_test(test_avx512_int8_bf16_long),
        cmocka_unit_test(test_avx2_int8_long),
        cmocka_unit_test(test_avx2_int8_madd_long),
        cmocka_unit_test(test_int8_dots_widths),
        cmocka_unit_test(test_dispatched_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
