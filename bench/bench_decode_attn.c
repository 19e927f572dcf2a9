/* Decode attention at depth, the way the engine runs it: one token at
 * position D of one sequence over every layer of a real KV pool
 * (model/kv.h: TinyLlama's shape, 22 layers, 32 query heads over 4 KV
 * heads of 64), through nb_attn_batch (model/attn.h: split into pieces
 * of NB_ATTN_SPLIT_KEYS keys, the pieces merged) on a thread pool, for
 * each KV type, the types interleaved rep by rep. Before each rep a 64 MiB
 * buffer is read, so the pool comes from memory as it does in the engine
 * (where the weights stream between layers). Prints the median and best
 * time per token (all layers) and the KV bytes read per second at the
 * median.
 * Not built by default. Build by hand (after building the library):
 *   cc -O2 -Iinclude -Isrc bench/bench_decode_attn.c build/libnibble.a -lm -lpthread -lpcre2-8 -ljansson
 * usage: bench_decode_attn [DEPTH=4096] [REPS=21] [THREADS=2] [SEQS=1] [RUN=1]
 * SEQS > 1: the sequence's blocks as they come when SEQS sequences grow
 * side by side and each gets RUN consecutive blocks at a time (block b of
 * the sequence is pool block (b / RUN) * RUN * SEQS + b % RUN); the pool
 * then has SEQS times the blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/attn.h"
#include "model/kv.h"
#include "bench_util.h"

enum { LAYERS = 22, HEADS = 32, KV_HEADS = 4, HD = 64, BS = 16 };

int main(int argc, char **argv) {
    const int depth = argc > 1 ? atoi(argv[1]) : 4096, reps = argc > 2 ? atoi(argv[2]) : 21,
              threads = argc > 3 ? atoi(argv[3]) : 2, seqs = argc > 4 ? atoi(argv[4]) : 1,
              run = argc > 5 ? atoi(argv[5]) : 1;
    if (depth < 1 || reps < 1 || reps > 1000 || threads < 1 || seqs < 1 || seqs > 64 || run < 1) {
        fprintf(stderr, "usage: bench_decode_attn [DEPTH>=1] [REPS 1..1000] [THREADS>=1] [SEQS 1..64] [RUN>=1]\n");
        return 2;
    }
    static const char *tname[] = {"f32", "f16", "bf16", "int8", "fp8"};
    nb_arch_desc hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layer = LAYERS;
    hp.n_head = HEADS;
    hp.n_head_kv = KV_HEADS;
    hp.head_dim = HD;
    hp.n_embd = HEADS * HD;
    const int32_t nblk = (depth + BS) / BS; /* positions 0..depth */
    int32_t *blocks = malloc((size_t)nblk * sizeof *blocks);
    float *k = malloc(KV_HEADS * HD * sizeof *k), *v = malloc(KV_HEADS * HD * sizeof *v);
    float *q = malloc(HEADS * HD * sizeof *q), *out = malloc(HEADS * HD * sizeof *out);
    const size_t evict_bytes = (size_t)64 << 20;
    unsigned char *evict = malloc(evict_bytes);
    double *ts = malloc((size_t)NB_KV_TYPES * reps * sizeof *ts);
    if (!blocks || !k || !v || !q || !out || !evict || !ts) { fprintf(stderr, "out of memory\n"); return 1; }
    memset(evict, 1, evict_bytes);
    for (int32_t b = 0; b < nblk; b++) blocks[b] = (b / run) * run * seqs + b % run;
    unsigned s = 7;
    for (int i = 0; i < HEADS * HD; i++) q[i] = bench_frand(&s);

    nb_kv_pool pools[NB_KV_TYPES];
    for (int t = 0; t < NB_KV_TYPES; t++) {
        if (nb_kv_pool_init_type(&pools[t], &hp, BS, (nblk + run) * seqs, (nb_kv_type)t) != NB_OK) {
            fprintf(stderr, "bench_decode_attn: %s\n", nb_errmsg());
            return 1;
        }
        unsigned r = 11;
        for (int l = 0; l < LAYERS; l++)
            for (int32_t p = 0; p <= depth; p++) {
                for (int i = 0; i < KV_HEADS * HD; i++) k[i] = bench_frand(&r), v[i] = bench_frand(&r);
                nb_kv_store(&pools[t], l, blocks[p / BS], p % BS, k, v);
            }
    }
    nb_pool *pool;
    nb_attn_batch a;
    const nb_seq_view sv = {blocks, nblk};
    const int32_t pos = depth, seq = 0, tok = 0;
    const nb_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &seq, .n_seqs = 1, .seqs = &sv};
    if (nb_pool_create(threads, &pool) != NB_OK || nb_attn_batch_init(&a, &hp, nb_dispatch_default(), threads, BS) != NB_OK ||
        nb_attn_batch_plan(&a, &b) != NB_OK) {
        fprintf(stderr, "bench_decode_attn: %s\n", nb_errmsg());
        return 1;
    }
    volatile unsigned sink = 0;
    for (int r = 0; r < reps; r++)
        for (int t = 0; t < NB_KV_TYPES; t++) {
            for (size_t i = 0; i < evict_bytes; i += 64) sink += evict[i];
            const double t0 = bench_now();
            for (int l = 0; l < LAYERS; l++) nb_attn_batch_run(&a, pool, &pools[t], &b, l, q, out);
            ts[t * reps + r] = bench_now() - t0;
        }
    printf("decode attention: 1 token at depth %d, %d layers x %d KV heads (group %d, head_dim %d), block %d, "
           "%d threads, %d reps, kernels %s; its blocks as one of %d sequences growing %d block(s) at a time\n",
           depth, LAYERS, KV_HEADS, HEADS / KV_HEADS, HD, BS, threads, reps, a.isa, seqs, run);
    for (int t = 0; t < NB_KV_TYPES; t++) {
        double *x = ts + t * reps;
        qsort(x, (size_t)reps, sizeof *x, bench_cmp_double);
        const double bytes = (double)LAYERS * KV_HEADS * (depth + 1) * HD * pools[t].elem * 2;
        printf("  %-5s median %7.3f ms  best %7.3f ms  %6.1f GB/s of KV at the median\n", tname[t], x[reps / 2] * 1e3,
               x[0] * 1e3, bytes / x[reps / 2] / 1e9);
    }
    nb_attn_batch_free(&a);
    nb_pool_free(pool);
    for (int t = 0; t < NB_KV_TYPES; t++) nb_kv_pool_free(&pools[t]);
    free(blocks), free(k), free(v), free(q), free(out), free(evict), free(ts);
    return (int)(sink & 0);
}
