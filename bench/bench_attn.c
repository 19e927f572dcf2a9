/* Micro-benchmark of the prefill attention kernels (kernels/attn.h): one
 * tile of T tokens x the 8 query heads of one GQA group (TinyLlama's
 * shape: head_dim 64) against a context of D keys in a paged pool of
 * 16-slot blocks through a shuffled block table, for each KV type and each
 * kernel this CPU has (f32 products; the bf16-dot kernel on bf16 and fp8
 * pools, the int8-dot kernels on int8 ones (AVX-512 VNNI, AVX-VNNI, plain
 * AVX2's vpmaddubsw), the AMX one on bf16 pools, the
 * AMX split-bf16 one on every pool type). The kernels run interleaved, rep by rep, one
 * thread; prints the median and best time per tile and the rate in
 * multiply-adds (Q K^T and P V, causal: T*8 rows x about D keys x head_dim
 * x 2).
 * Not built by default. Build by hand (after building the library):
 *   cc -O2 -Iinclude -Isrc bench/bench_attn.c build/libnibble.a -lm -lpthread -lpcre2-8 -ljansson
 * usage: bench_attn [DEPTH=4096] [TOKENS=64] [REPS=7] [ONLY]
 * ONLY keeps the variants whose "type kernel" (as printed, e.g. "f32 amx
 * split bf16") contains it: one kernel alone for perf record. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "kernels/attn.h"
#include "bench_util.h"

enum { HD = 64, NQ = 8, BS = 16 };

typedef struct {
    nb_attn_kv kv;
    int32_t *blocks;
} pool;

static void pool_make(pool *p, nb_kv_type t, int npos) {
    static const int elem[] = {4, 2, 2, 1, 1};
    const int nblk = (npos + BS - 1) / BS;
    memset(p, 0, sizeof *p);
    p->kv = (nb_attn_kv){.type = t, .elem = elem[t], .head_dim = HD, .n_head_kv = 1, .block_size = BS,
                         .n_blocks = nblk, .row = (int64_t)HD * elem[t]};
    p->blocks = malloc((size_t)nblk * sizeof *p->blocks);
    uint8_t *k = aligned_alloc(64, (size_t)nblk * BS * (size_t)p->kv.row);
    uint8_t *v = aligned_alloc(64, (size_t)nblk * BS * (size_t)p->kv.row);
    float *ks = NULL, *vs = NULL;
    if (!p->blocks || !k || !v) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int b = 0; b < nblk; b++) p->blocks[b] = (int32_t)(((int64_t)b * 7919 + 3) % nblk);
    if (t == NB_KVT_INT8 || t == NB_KVT_FP8) {
        ks = malloc((size_t)nblk * BS * sizeof *ks);
        vs = malloc((size_t)nblk * BS * sizeof *vs);
        if (!ks || !vs) { fprintf(stderr, "out of memory\n"); exit(1); }
        for (int i = 0; i < nblk * BS; i++) ks[i] = vs[i] = 1.0f / 64;
    }
    unsigned s = 7;
    for (int64_t i = 0; i < (int64_t)nblk * BS * HD; i++) {
        float kx = bench_frand(&s), vx = bench_frand(&s);
        switch (t) {
        case NB_KVT_F32: memcpy(k + 4 * i, &kx, 4); memcpy(v + 4 * i, &vx, 4); break;
        case NB_KVT_F16: case NB_KVT_BF16: {
            uint16_t a = t == NB_KVT_F16 ? nb_fp32_to_fp16(kx) : nb_fp32_to_bf16(kx);
            uint16_t c = t == NB_KVT_F16 ? nb_fp32_to_fp16(vx) : nb_fp32_to_bf16(vx);
            memcpy(k + 2 * i, &a, 2);
            memcpy(v + 2 * i, &c, 2);
            break;
        }
        default: k[i] = (uint8_t)(int8_t)lrintf(kx * 64); v[i] = (uint8_t)(int8_t)lrintf(vx * 64); break;
        }
    }
    p->kv.k = k;
    p->kv.v = v;
    p->kv.ks = ks;
    p->kv.vs = vs;
}

typedef struct {
    const char *name;
    nb_attn_fn fn;
    nb_kv_type type;
} variant;

int main(int argc, char **argv) {
    const int depth = argc > 1 ? atoi(argv[1]) : 4096, nt = argc > 2 ? atoi(argv[2]) : 64,
              reps = argc > 3 ? atoi(argv[3]) : 7;
    if (depth < nt || nt < 1 || reps < 1) { fprintf(stderr, "usage: bench_attn [DEPTH>=TOKENS] [TOKENS] [REPS]\n"); return 2; }
    static const char *tname[] = {"f32", "f16", "bf16", "int8", "fp8"};
    variant v[24];
    int nv = 0;
    /* the AVX-512 kernels only where the CPU has them (they are built on every x86 machine) */
    const bool z = nb_cpu_isa() >= NB_ISA_AVX512;
    nb_attn_fn f2 = nb_attn_avx2(), f5 = z ? nb_attn_avx512() : NULL, fb = z ? nb_attn_avx512_bf16() : NULL,
               fi = z ? nb_attn_avx512_int8() : NULL, fib = z ? nb_attn_avx512_int8_bf16() : NULL,
               fa = nb_attn_avx2_int8(), fx = nb_cpu_isa() >= NB_ISA_AMX ? nb_attn_amx_bf16() : NULL,
               fs = nb_cpu_isa() >= NB_ISA_AMX ? nb_attn_amx_split() : NULL;
    for (int t = 0; t < NB_KV_TYPES; t++) {
        if (f5) v[nv++] = (variant){"avx512", f5, (nb_kv_type)t};
        if (f2) v[nv++] = (variant){"avx2", f2, (nb_kv_type)t};
    }
    if (fb) v[nv++] = (variant){"avx512 bf16 dots", fb, NB_KVT_BF16};
    if (fb) v[nv++] = (variant){"avx512 bf16 dots", fb, NB_KVT_FP8};
    if (fx) v[nv++] = (variant){"amx bf16", fx, NB_KVT_BF16};
    for (int t = 0; t < NB_KV_TYPES && fs; t++) v[nv++] = (variant){"amx split bf16", fs, (nb_kv_type)t};
    if (fi) v[nv++] = (variant){"avx512 int8 dots", fi, NB_KVT_INT8};
    if (fib) v[nv++] = (variant){"avx512 int8, bf16 decode", fib, NB_KVT_INT8};
    if (fa) v[nv++] = (variant){"avx2 int8 dots", fa, NB_KVT_INT8};
    if (nb_cpu_isa() >= NB_ISA_AVX2) v[nv++] = (variant){"avx2 int8 maddubs", nb_attn_avx2_int8_madd(), NB_KVT_INT8};
    if (argc > 4) { /* keep the variants that match ONLY */
        int kept = 0;
        for (int i = 0; i < nv; i++) {
            char label[64];
            snprintf(label, sizeof label, "%s %s", tname[v[i].type], v[i].name);
            if (strstr(label, argv[4])) v[kept++] = v[i];
        }
        if (!kept) { fprintf(stderr, "bench_attn: no kernel matches '%s'\n", argv[4]); return 2; }
        nv = kept;
    }
    pool pools[NB_KV_TYPES];
    for (int t = 0; t < NB_KV_TYPES; t++) pool_make(&pools[t], (nb_kv_type)t, depth);
    float *q = malloc((size_t)nt * NQ * HD * sizeof *q), *out = malloc((size_t)nt * NQ * HD * sizeof *out);
    float *scratch = aligned_alloc(64, (nb_attn_scratch_floats(HD, NQ, nt) * sizeof(float) + 63) & ~(size_t)63);
    double *ts = malloc((size_t)nv * reps * sizeof *ts);
    if (!q || !out || !scratch || !ts) { fprintf(stderr, "out of memory\n"); return 1; }
    unsigned s = 11;
    for (int i = 0; i < nt * NQ * HD; i++) q[i] = bench_frand(&s);
    for (int r = -1; r < reps; r++) /* rep -1 warms up */
        for (int i = 0; i < nv; i++) {
            nb_attn_tile t = {&pools[v[i].type].kv, pools[v[i].type].blocks, 0, NQ, nt, depth - nt, q,
                              (int64_t)NQ * HD, out, (int64_t)NQ * HD, 1.0f / sqrtf((float)HD), scratch, NULL};
            double t0 = bench_now();
            v[i].fn(&t);
            if (r >= 0) ts[i * reps + r] = bench_now() - t0;
        }
    /* multiply-adds: each row of token i meets depth - nt + i + 1 keys */
    const double keys = (double)nt * (depth - nt) + (double)nt * (nt + 1) / 2;
    const double macs = 2.0 * NQ * HD * keys;
    printf("one tile: %d tokens x %d heads, head_dim %d, context %d keys, 1 thread, %d reps\n", nt, NQ, HD, depth, reps);
    for (int i = 0; i < nv; i++) {
        qsort(ts + i * reps, (size_t)reps, sizeof *ts, bench_cmp_double);
        const double med = ts[i * reps + reps / 2], best = ts[i * reps];
        printf("  %-5s %-18s median %8.3f ms  best %8.3f ms  %6.1f G mul-adds/s\n", tname[v[i].type], v[i].name,
               med * 1e3, best * 1e3, macs / med / 1e9);
    }
    return 0;
}
