/* A/B micro-benchmark of one-token (decode) matmuls over TinyLlama-shaped
 * 2048 x 5632 matrices, about 1 GiB (floats) or 0.5 GiB (quantized) of them
 * on huge pages, each read once per "token" with nb_matmul through dispatch
 * tables that differ only in the streaming kernels' prefetch distances
 * (kernels.h nb_prefetch_bytes: 0, 1, 2, 4, 8 and 16 KiB alone, and 1-8
 * KiB each with nb_prefetch_l2_bytes at twice it) and, for the
 * float types, the decode dot's width (avx2 / avx512). Quantized weights are
 * repacked where the CPU has the kernels, as a model load does. The
 * variants run interleaved, rep by rep, so a busy host slows them alike;
 * prints the median and best GB/s of each and the ratio of medians to the
 * first variant.
 * With "batch" after a quantized type: that type at 1, 2, 4 and 7 tokens per
 * step, with and without the small-batch multi-token dots; GB/s counts the
 * weights once per step.
 * With "isa" after a quantized type: its decode dot through the dispatch
 * table of this CPU and through the one of `--isa avx2` (AVX-VNNI where the
 * CPU has it, NIBBLE_AVXVNNI=0 for plain AVX2), at the default prefetch.
 * Not built by default. Build by hand (after building the library):
 *   cc -O2 -Iinclude -Isrc bench/bench_decode.c build/libnibble.a -lm -lpthread -lpcre2-8 -ljansson
 * usage: bench_decode [THREADS] [REPS] [f16|bf16|f32|q4_0|q8_0|q4_k|q6_k|w8|w4g128] [batch|isa] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/dispatch.h"
#include "quant/qtypes.h"
#include "bench_util.h"

enum { K = 2048, R = 5632 };

typedef struct {
    nb_tensor *W;
    int nm;
    size_t bytes; /* of all nm matrices */
} weights;

/* nm matrices of type t (as loaded: repacked where this CPU repacks it),
 * about `budget` bytes, on huge pages. */
static int make_weights(nb_dtype t, size_t budget, weights *out) {
    nb_dtype to = nb_repack_target(t);
    uint64_t rb, prb;
    if (!nb_dtype_row_bytes(t, K, &rb) || !nb_dtype_row_bytes(to, K, &prb)) return 1;
    size_t mat = (size_t)prb * R;
    int nm = (int)(budget / mat);
    uint8_t *w = mmap(NULL, mat * (size_t)nm, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) return 1;
    madvise(w, mat * (size_t)nm, MADV_HUGEPAGE);
    if (t == NB_F16 || t == NB_BF16 || t == NB_F32) {
        for (size_t i = 0; i < mat * (size_t)nm / 2; i++) ((uint16_t *)w)[i] = (uint16_t)(0x3000 + (i * 2654435761u) % 0x800);
    } else {
        const nb_qtype *qt = nb_qtype_get(t);
        float *row = malloc((size_t)K * 4);
        uint8_t *tmp = malloc((size_t)rb * R);
        if (!qt || !row || !tmp) return 1;
        for (int64_t r = 0; r < R; r++) {
            for (int64_t i = 0; i < K; i++) row[i] = (float)(((r * K + i) * 2654435761u) % 1000) / 1000.0f - 0.5f;
            qt->from_float(row, tmp + (size_t)r * rb, K);
        }
        for (int m = 0; m < nm; m++) {
            if (to != t) nb_repack_rows(t, tmp, w + (size_t)m * mat, R, K);
            else memcpy(w + (size_t)m * mat, tmp, mat);
        }
        free(row);
        free(tmp);
    }
    out->W = calloc((size_t)nm, sizeof *out->W);
    for (int m = 0; m < nm; m++) out->W[m] = (nb_tensor){"w", to, 2, {K, R, 1, 1}, w + (size_t)m * mat, mat, NULL};
    out->nm = nm;
    out->bytes = mat * (size_t)nm;
    return 0;
}

static int run_step(nb_kctx *k, const weights *w, const float *x, int n, float *y) {
    for (int m = 0; m < w->nm; m++)
        if (nb_matmul(k, &w->W[m], x, n, y) != NB_OK) return 1;
    return 0;
}

static void report(const char *name, double *g, int reps, double *base) {
    qsort(g, (size_t)reps, sizeof *g, bench_cmp_double);
    double med = g[reps / 2], best = g[reps - 1];
    if (*base == 0) *base = med;
    printf("  %-20s median %6.2f GB/s  best %6.2f  ratio %.2f\n", name, med, best, med / *base);
}

static int small_batch(nb_dtype t, int threads, int reps) {
    weights w;
    if (make_weights(t, (size_t)512 << 20, &w)) return 1;
    float *x = malloc((size_t)(8 * K) * 4), *y = malloc((size_t)(8 * R) * 4);
    for (int64_t i = 0; i < 8 * K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    nb_dispatch d[2];
    nb_kctx k[2];
    for (int v = 0; v < 2; v++) {
        nb_kernel_opts o;
        nb_kernel_opts_defaults(&o);
        o.small_batch = v == 0;
        if (nb_dispatch_build(&o, &d[v]) != NB_OK || nb_kctx_init_with(&k[v], threads, &d[v]) != NB_OK) return 1;
    }
    static const int ns[] = {1, 2, 4, 7};
    enum { NN = 4 };
    double *g = calloc((size_t)(2 * NN * reps), sizeof *g);
    for (int r = -1; r < reps; r++)
        for (int ni = 0; ni < NN; ni++)
            for (int v = 0; v < 2; v++) {
                double t0 = bench_now();
                if (run_step(&k[v], &w, x, ns[ni], y)) return 1;
                if (r >= 0) g[(ni * 2 + v) * reps + r] = (double)w.bytes / (bench_now() - t0) / 1e9;
            }
    printf("%s, %d threads, %d x %dx%d (%.2f GB) per step, %d reps interleaved\n", nb_dtype_name(w.W[0].type),
           threads, w.nm, R, K, (double)w.bytes / 1e9, reps);
    for (int ni = 0; ni < NN; ni++) {
        double med[2];
        for (int v = 0; v < 2; v++) {
            qsort(g + (ni * 2 + v) * reps, (size_t)reps, sizeof *g, bench_cmp_double);
            med[v] = g[(ni * 2 + v) * reps + reps / 2];
        }
        printf("  %d tokens: small-batch dots %6.2f GB/s (x tokens: %.1f), one token at a time %6.2f; ratio %.2f\n",
               ns[ni], med[0], med[0] * ns[ni], med[1], med[0] / med[1]);
    }
    return 0;
}

static nb_dtype parse_type(const char *s) {
    static const struct { const char *name; nb_dtype t; } types[] = {
        {"f16", NB_F16}, {"bf16", NB_BF16}, {"f32", NB_F32}, {"q4_0", NB_Q4_0},
        {"q8_0", NB_Q8_0}, {"q4_k", NB_Q4_K}, {"q6_k", NB_Q6_K}, {"w8", NB_W8}, {"w4g128", NB_W4G128}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(s, types[i].name)) return types[i].t;
    return NB_DTYPE_MAX;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 7;
    nb_dtype type = argc > 3 ? parse_type(argv[3]) : NB_F16;
    if (type == NB_DTYPE_MAX) {
        fprintf(stderr, "bench_decode: type '%s': expected f16, bf16, f32, q4_0, q8_0, q4_k, q6_k, w8 or w4g128\n",
                argv[3]);
        return 2;
    }
    bool is_float = type == NB_F16 || type == NB_BF16 || type == NB_F32;
    if (argc > 4 && !strcmp(argv[4], "batch") && !is_float) return small_batch(type, threads, reps);
    bool by_isa = argc > 4 && !strcmp(argv[4], "isa") && !is_float;
    weights w;
    if (make_weights(type, is_float ? (size_t)1 << 30 : (size_t)512 << 20, &w)) return 1;
    float *x = malloc((size_t)K * 4), *y = malloc((size_t)R * 4);
    for (int64_t i = 0; i < K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;

    /* (L1, L2) prefetch distances: L1 alone, then with L2 at twice it */
    static const int pfs[][2] = {{0, 0},       {1024, 0},    {2048, 0},    {4096, 0},     {8192, 0},
                                 {16384, 0},   {1024, 2048}, {2048, 4096}, {4096, 8192}, {8192, 16384}};
    enum { NPF = sizeof pfs / sizeof *pfs, NV = 2 * NPF };
    nb_dispatch d[NV];
    nb_kctx k[NV];
    char names[NV][64];
    int nv = 0;
    for (int wide = 0; wide < (is_float ? 2 : 1); wide++)
        for (int pv = 0; pv < (by_isa ? 2 : NPF); pv++) {
            nb_kernel_opts o;
            nb_kernel_opts_defaults(&o);
            if (by_isa) { /* this CPU's table, then --isa avx2's, default prefetch */
                if (pv == 1) o.max_isa = NB_ISA_AVX2;
                if (nb_dispatch_build(&o, &d[nv]) != NB_OK || nb_kctx_init_with(&k[nv], threads, &d[nv]) != NB_OK)
                    return 1;
                snprintf(names[nv], sizeof names[nv], "%s pf %d L2 %d", nb_dispatch_qdot(&d[nv], w.W[0].type)->isa,
                         d[nv].decode_prefetch, d[nv].decode_prefetch_l2);
                nv++;
                continue;
            }
            if (is_float) o.decode_dot = wide ? NB_DECODE_DOT_AVX512 : NB_DECODE_DOT_AVX2;
            o.decode_prefetch_set = o.decode_prefetch_l2_set = true;
            o.decode_prefetch = pfs[pv][0];
            o.decode_prefetch_l2 = pfs[pv][1];
            if (nb_dispatch_build(&o, &d[nv]) != NB_OK) return 1;
            if (wide && strcmp(d[nv].decode_dot, "avx512") != 0) continue;
            if (nb_kctx_init_with(&k[nv], threads, &d[nv]) != NB_OK) return 1;
            snprintf(names[nv], sizeof names[nv], "%s pf %d L2 %d",
                     is_float ? d[nv].decode_dot : nb_dispatch_qdot(&d[nv], w.W[0].type)->isa, d[nv].decode_prefetch,
                     d[nv].decode_prefetch_l2);
            nv++;
        }
    double *g = calloc((size_t)(nv * reps), sizeof *g);
    for (int r = -1; r < reps; r++)
        for (int v = 0; v < nv; v++) {
            double t0 = bench_now();
            if (run_step(&k[v], &w, x, 1, y)) return 1;
            if (r >= 0) g[v * reps + r] = (double)w.bytes / (bench_now() - t0) / 1e9;
        }
    printf("%s decode, %d threads, %d x %dx%d (%.2f GB) per token, %d reps interleaved; this CPU's default: pf %d L2 %d\n",
           nb_dtype_name(w.W[0].type), threads, w.nm, R, K, (double)w.bytes / 1e9, reps,
           nb_prefetch_for_cpu(nb_cpu_get()), nb_prefetch_l2_for_cpu(nb_cpu_get()));
    double base = 0;
    for (int v = 0; v < nv; v++) report(names[v], g + v * reps, reps, &base);
    return 0;
}
