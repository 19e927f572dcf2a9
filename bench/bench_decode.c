/* A/B micro-benchmark of one-token (decode) matmuls over TinyLlama-shaped
 * F16/BF16/F32 weights: about 1 GiB of 2048 x 5632 matrices on huge pages,
 * read once per "token" with nb_matmul (n = 1) through dispatch tables that
 * differ only in the decode dot's width (avx2 / avx512) and software
 * prefetch distance (0, 1024, 2048, 4096). The variants run interleaved,
 * rep by rep, so a busy host slows them alike; prints the median and best
 * GB/s of each and the ratio of medians to the first variant.
 * Not built by default. Build by hand (after building the library):
 *   cc -O2 -Iinclude -Isrc bench/bench_decode.c build/libnibble.a -lm -lpthread -lpcre2-8 -ljansson
 * With "q4_0" as the type: Q4_0 weights (repacked where the CPU has the
 * kernels) at 1, 2, 4 and 7 tokens per step, with and without the
 * small-batch multi-token dots; GB/s counts the weights once per step.
 * usage: bench_decode [THREADS] [REPS] [f16|bf16|f32|q4_0] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/half.h"
#include "kernels/dispatch.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#include "quant/qtypes.h"

static int small_batch(int threads, int reps) {
    const int64_t K = 2048, R = 5632;
    const nb_qtype *qt = nb_qtype_get(NB_Q4_0);
    uint64_t rb;
    if (!qt || !nb_dtype_row_bytes(NB_Q4_0, (uint64_t)K, &rb)) return 1;
    size_t mat = rb * (size_t)R;
    int nm = (int)(((size_t)512 << 20) / mat);
    nb_dtype to = nb_repack_target(NB_Q4_0);
    uint64_t prb = rb;
    if (to != NB_Q4_0 && !nb_dtype_row_bytes(to, (uint64_t)K, &prb)) return 1;
    uint8_t *w = malloc(mat * (size_t)nm);
    float *row = malloc((size_t)K * 4), *x = malloc((size_t)(8 * K) * 4), *y = malloc((size_t)(8 * R) * 4);
    uint8_t *tmp = malloc(mat);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t i = 0; i < K; i++) row[i] = (float)(((r * K + i) * 2654435761u) % 1000) / 1000.0f - 0.5f;
        qt->from_float(row, tmp + (size_t)r * rb, K);
    }
    for (int m = 0; m < nm; m++) {
        if (to != NB_Q4_0) nb_repack_rows(NB_Q4_0, tmp, w + (size_t)m * mat, R, K);
        else memcpy(w + (size_t)m * mat, tmp, mat);
    }
    for (int64_t i = 0; i < 8 * K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    nb_tensor *W = calloc((size_t)nm, sizeof *W);
    for (int m = 0; m < nm; m++) W[m] = (nb_tensor){"w", to, 2, {K, R, 1, 1}, w + (size_t)m * mat, mat, NULL};
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
                double t0 = now();
                for (int m = 0; m < nm; m++)
                    if (nb_matmul(&k[v], &W[m], x, ns[ni], y) != NB_OK) return 1;
                if (r >= 0) g[(ni * 2 + v) * reps + r] = (double)(mat * (size_t)nm) / (now() - t0) / 1e9;
            }
    printf("%s, %d threads, %d x %lldx%lld (%.2f GB) per step, %d reps interleaved\n", nb_dtype_name(to), threads, nm,
           (long long)R, (long long)K, (double)(mat * (size_t)nm) / 1e9, reps);
    for (int ni = 0; ni < NN; ni++) {
        double med[2];
        for (int v = 0; v < 2; v++) {
            qsort(g + (ni * 2 + v) * reps, (size_t)reps, sizeof *g, cmp);
            med[v] = g[(ni * 2 + v) * reps + reps / 2];
        }
        printf("  %d tokens: small-batch dots %6.2f GB/s (x tokens: %.1f), one token at a time %6.2f; ratio %.2f\n",
               ns[ni], med[0], med[0] * ns[ni], med[1], med[0] / med[1]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[3], "q4_0")) return small_batch(argc > 1 ? atoi(argv[1]) : 2, argc > 2 ? atoi(argv[2]) : 7);
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 7;
    nb_dtype type = argc > 3 && !strcmp(argv[3], "bf16") ? NB_BF16 : argc > 3 && !strcmp(argv[3], "f32") ? NB_F32 : NB_F16;
    const int64_t K = 2048, R = 5632;
    size_t es = type == NB_F32 ? 4 : 2, mat = (size_t)(K * R) * es;
    int nm = (int)(((size_t)1 << 30) / mat);
    size_t total = mat * (size_t)nm;
    uint8_t *w = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) return 1;
    madvise(w, total, MADV_HUGEPAGE);
    for (size_t i = 0; i < total / 2; i++) ((uint16_t *)w)[i] = (uint16_t)(0x3000 + (i * 2654435761u) % 0x800);
    float *x = malloc((size_t)K * 4), *y = malloc((size_t)R * 4);
    for (int64_t i = 0; i < K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    nb_tensor *W = calloc((size_t)nm, sizeof *W);
    for (int m = 0; m < nm; m++) W[m] = (nb_tensor){"w", type, 2, {K, R, 1, 1}, w + (size_t)m * mat, mat, NULL};

    enum { NV = 8 };
    nb_dispatch d[NV];
    nb_kctx k[NV];
    const char *names[NV];
    char nbuf[NV][64];
    int nv = 0;
    for (int wide = 0; wide < 2; wide++)
        for (int pv = 0; pv < NB_FLOAT_PF_VARIANTS; pv++) {
            nb_kernel_opts o;
            nb_kernel_opts_defaults(&o);
            o.decode_dot = wide ? NB_DECODE_DOT_AVX512 : NB_DECODE_DOT_AVX2;
            o.decode_prefetch_set = true;
            o.decode_prefetch = nb_float_pf_bytes(pv);
            if (nb_dispatch_build(&o, &d[nv]) != NB_OK) return 1;
            if (wide && strcmp(d[nv].decode_dot, "avx512") != 0) continue;
            if (nb_kctx_init_with(&k[nv], threads, &d[nv]) != NB_OK) return 1;
            snprintf(nbuf[nv], sizeof nbuf[nv], "%s pf %d", d[nv].decode_dot, d[nv].decode_prefetch);
            names[nv] = nbuf[nv];
            nv++;
        }
    double *g = calloc((size_t)(nv * reps), sizeof *g);
    for (int r = -1; r < reps; r++)
        for (int v = 0; v < nv; v++) {
            double t0 = now();
            for (int m = 0; m < nm; m++)
                if (nb_matmul(&k[v], &W[m], x, 1, y) != NB_OK) return 1;
            double t = now() - t0;
            if (r >= 0) g[v * reps + r] = (double)total / t / 1e9;
        }
    printf("%s decode, %d threads, %d x %lldx%lld (%.2f GB) per token, %d reps interleaved\n", nb_dtype_name(type),
           threads, nm, (long long)R, (long long)K, (double)total / 1e9, reps);
    double base = 0;
    for (int v = 0; v < nv; v++) {
        qsort(g + v * reps, (size_t)reps, sizeof *g, cmp);
        double med = g[v * reps + reps / 2], best = g[v * reps + reps - 1];
        if (v == 0) base = med;
        printf("  %-16s median %6.2f GB/s  best %6.2f  ratio %.2f\n", names[v], med, best, med / base);
    }
    return 0;
}
