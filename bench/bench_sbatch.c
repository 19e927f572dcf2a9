/* A/B micro-benchmark of batched-decode matmuls (kernels/sbatch.h): about
 * 256 MiB of TinyLlama-shaped 5632 x 2048 weights of one quantized type
 * (repacked as at model load), multiplied with n = 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128
 * tokens per step through nb_matmul with three dispatch tables:
 *   old   the defaults at isa avx512: the AVX-512 VNNI small-batch int8
 *         GEMMs (without the AMX GEMMs of kernels/x86/gemm_amx.c)
 *   new   the defaults: on an AMX CPU the AMX GEMMs for Q4_0R / Q8_0R
 *   norows  "new" without the rows-in-lanes kernels (rows_max 0): 8-24 tokens
 *         through the int8 GEMMs too
 *   prev  (built with -DSB_PREV only) "new" with the small-batch GEMM of this
 *         type replaced by prev_sgemm, another build of
 *         src/kernels/x86/sbatch_avx512.c (an older commit, renamed): old vs new
 *         kernels interleaved in one process
 * The variants run interleaved, rep by rep, so a busy host slows them alike.
 * Prints, per n, the median and best CPU time (WALL=1: wall time) per step of each variant, the
 * step time relative to n = 1 (old) and the ratio of medians to old.
 * Not built by default. Build by hand (after building the libraries):
 *   cc -O2 -Iinclude -Isrc bench/bench_sbatch.c build/libnb_kernels.a build/libnb_quant.a build/libnb_base.a -lm -lpthread
 * With a previous version of the kernels (prev), e.g. from commit C:
 *   F="-O2 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -Iinclude -Isrc"
 *   git show C:src/kernels/x86/sbatch_avx512.c > /tmp/sb_prev.c
 *   cc $F -Dnb_q4_0r_sgemm_avx512=prev_q4_0r -Dnb_q8_0r_sgemm_avx512=prev_q8_0r \
 *      -Dnb_q4_kr_sgemm_avx512=prev_q4_kr -Dnb_q6_kr_sgemm_avx512=prev_q6_kr -c /tmp/sb_prev.c -o /tmp/sb_prev.o
 *   cc -O2 -DSB_PREV -Iinclude -Isrc bench/bench_sbatch.c /tmp/sb_prev.o build/libnb_kernels.a \
 *      build/libnb_quant.a build/libnb_base.a -lm -lpthread -o bench_sbatch
 * usage: bench_sbatch [THREADS (1)] [REPS (5)] [q4_0|q8_0|q4_k|q6_k] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/dispatch.h"
#include "quant/qtypes.h"
#include "bench_util.h"

/* CPU time of the process: on a shared, saturated host the wall time of a
 * step is mostly waiting for a core, while the CPU time it takes is the
 * kernels' cost (with 1 thread no pool spin-wait is counted). */
#ifdef SB_PREV
void prev_q4_0r(const uint8_t *, uint64_t, int64_t, const nb_actpack *, float *, int64_t);
void prev_q8_0r(const uint8_t *, uint64_t, int64_t, const nb_actpack *, float *, int64_t);
void prev_q4_kr(const uint8_t *, uint64_t, int64_t, const nb_actpack *, float *, int64_t);
void prev_q6_kr(const uint8_t *, uint64_t, int64_t, const nb_actpack *, float *, int64_t);
enum { NV = 4 };
#else
enum { NV = 3 };
#endif

static clockid_t clk = CLOCK_PROCESS_CPUTIME_ID;
static double now(void) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (getenv("WALL")) clk = CLOCK_MONOTONIC;
    const char *tn = argc > 3 ? argv[3] : "q4_0";
    nb_dtype type = !strcmp(tn, "q8_0") ? NB_Q8_0 : !strcmp(tn, "q4_k") ? NB_Q4_K : !strcmp(tn, "q6_k") ? NB_Q6_K : NB_Q4_0;
    const int64_t K = 2048, R = 5632;
    const nb_qtype *qt = nb_qtype_get(type);
    uint64_t rb, prb;
    nb_dtype to = nb_repack_target(type);
    if (!qt || !nb_dtype_row_bytes(type, (uint64_t)K, &rb) || !nb_dtype_row_bytes(to, (uint64_t)K, &prb)) return 1;
    size_t mat = prb * (size_t)R;
    int nm = (int)(((size_t)256 << 20) / mat);
    enum { NMAX = 128 };
    uint8_t *w = malloc(mat * (size_t)nm), *tmp = malloc(rb * (size_t)R);
    float *row = malloc((size_t)K * 4), *x = malloc((size_t)(NMAX * K) * 4), *y = malloc((size_t)(NMAX * R) * 4);
    for (int64_t r = 0; r < R; r++) {
        for (int64_t i = 0; i < K; i++) row[i] = (float)(((r * K + i) * 2654435761u) % 1000) / 1000.0f - 0.5f;
        qt->from_float(row, tmp + (size_t)r * rb, K);
    }
    for (int m = 0; m < nm; m++) {
        if (to != type) nb_repack_rows(type, tmp, w + (size_t)m * mat, R, K);
        else memcpy(w + (size_t)m * mat, tmp, mat);
    }
    for (int64_t i = 0; i < NMAX * K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    nb_tensor *W = calloc((size_t)nm, sizeof *W);
    for (int m = 0; m < nm; m++) W[m] = (nb_tensor){"w", to, 2, {K, R, 1, 1}, w + (size_t)m * mat, mat, NULL};
    static const char *names[4] = {"old", "new", "norows", "prev"};
    nb_dispatch d[NV];
    nb_kctx k[NV];
    for (int v = 0; v < NV; v++) {
        nb_kernel_opts o;
        nb_kernel_opts_defaults(&o);
        if (v == 0) o.max_isa = NB_ISA_AVX512;
        if (v == 2) o.rows_max = 0;
        if (nb_dispatch_build(&o, &d[v]) != NB_OK) return 1;
#ifdef SB_PREV
        if (v == 3) {
            int s = nb_dispatch_slot(to);
            if (s < 0 || !d[v].sgemm[s]) return 1;
            d[v].sgemm[s] = to == NB_Q4_0R ? prev_q4_0r : to == NB_Q8_0R ? prev_q8_0r : to == NB_Q4_KR ? prev_q4_kr : prev_q6_kr;
        }
#endif
        if (nb_kctx_init_with(&k[v], threads, &d[v]) != NB_OK) return 1;
    }
    static const int ns[] = {1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
    enum { NN = 13 };
    double *g = calloc((size_t)(NV * NN * reps), sizeof *g);
    /* ONLY_N=n / ONLY_V=0..3: just that size / variant (for perf stat) */
    int only_n = getenv("ONLY_N") ? atoi(getenv("ONLY_N")) : 0, only_v = getenv("ONLY_V") ? atoi(getenv("ONLY_V")) : -1;
    for (int r = -1; r < reps; r++)
        for (int ni = 0; ni < NN; ni++)
            for (int v = 0; v < NV; v++) {
                if ((only_n && ns[ni] != only_n) || (only_v >= 0 && v != only_v)) continue;
                double t0 = now();
                for (int m = 0; m < nm; m++)
                    if (nb_matmul(&k[v], &W[m], x, ns[ni], y) != NB_OK) return 1;
                if (r >= 0) g[(ni * NV + v) * reps + r] = now() - t0;
            }
    printf("%s, %d threads, %d x %lldx%lld (%.2f GB) per step, %d reps interleaved, %s time; %s\n", nb_dtype_name(to),
           threads, nm, (long long)R, (long long)K, (double)(mat * (size_t)nm) / 1e9, reps,
           clk == CLOCK_MONOTONIC ? "wall" : "CPU", d[1].desc);
    double base = 0;
    for (int ni = 0; ni < NN; ni++) {
        double med[NV], best[NV];
        for (int v = 0; v < NV; v++) {
            double *s = g + (ni * NV + v) * reps;
            qsort(s, (size_t)reps, sizeof *s, bench_cmp_double);
            med[v] = s[reps / 2];
            best[v] = s[0];
        }
        if (ni == 0) base = med[0];
        printf("  n=%2d:", ns[ni]);
        for (int v = 0; v < NV; v++)
            printf("  %s %7.2f ms (best %7.2f, %.2fx a 1-token step, %.2fx old)", names[v], med[v] * 1e3, best[v] * 1e3,
                   med[v] / base, med[0] / med[v]);
        printf("\n");
    }
    return 0;
}
