/* Micro-benchmark of the repacked kernels (kernels/repack.h) on one thread:
 * for Q4_0, Q8_0, Q4_K and Q6_K weights as the loader repacks them for
 * the chosen isa (avx2: Q4_0L / Q8_0L, the lane order, on any CPU),
 *   - decode: the dot kernel over R rows of K = 2048, in GB/s of weights,
 *     for a matrix that fits L2 (256 rows) and one that does not (32000);
 *   - batched: the int8 GEMM for 512 rows x N tokens (default 128) in
 *     GMAC/s, and the time to pack the activations.
 * Best of 5 repetitions each; numbers from one run are comparable with each
 * other, not across machines. Not built by default. Build by hand after
 * building the library:
 *   cc -O2 -Iinclude -Isrc bench/bench_repack.c build/libnibble.a -lm -lpthread -lpcre2-8 -o bench_repack
 *   ./bench_repack [N] [isa]
 * isa: avx512 (default) or avx2 (NIBBLE_AVXVNNI=0 for plain AVX2 on an
 * AVX-VNNI CPU). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/cpu.h"
#include "kernels/repack.h"
#include "bench_util.h"

static float *fill(int64_t n, unsigned mul) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)((i * mul) % 1000) / 1000.f - .5f;
    return v;
}

/* The layout a model load repacks `type` into for kernels at `isa`: the
 * AVX2 kernels read Q4_0, Q8_0, W8 and W4G* in lane order (repack.h), so
 * `avx2` on an AVX-512 CPU must not time the AVX-512 layout. */
static nb_dtype target(nb_dtype type, nb_isa isa) {
    nb_dtype rt = nb_repack_layout(type);
    return isa == NB_ISA_AVX2 ? nb_repack_lanes(rt) : rt;
}

/* R rows of `type` repacked to rt; *rb = bytes per repacked row. */
static uint8_t *weights(nb_dtype type, nb_dtype rt, int64_t K, int64_t R, uint64_t *rb) {
    float *w = fill(K * R, 2654435761u);
    const nb_qtype *qt = nb_qtype_get(type);
    uint64_t grb;
    nb_dtype_row_bytes(type, (uint64_t)K, &grb);
    nb_dtype_row_bytes(rt, (uint64_t)K, rb);
    uint8_t *g = malloc(grb * (uint64_t)R), *p = malloc(*rb * (uint64_t)R);
    for (int64_t r = 0; r < R; r++) qt->from_float(w + r * K, g + (uint64_t)r * grb, K);
    nb_repack_rows_to(type, rt, g, p, R, K);
    free(g);
    free(w);
    return p;
}

int main(int argc, char **argv) {
    const int64_t K = 2048, n = argc > 1 ? atoll(argv[1]) : 128;
    nb_isa isa = NB_ISA_AVX512;
    if (argc > 2 && !nb_isa_parse(argv[2], &isa)) {
        fprintf(stderr, "bench_repack: unknown isa '%s'\n", argv[2]);
        return 2;
    }
    const nb_dtype types[] = {NB_Q4_0, NB_Q8_0, NB_Q4_K, NB_Q6_K};
    float *x = fill(K * n, 40503u);
    printf("%-6s %14s %16s %16s %10s\n", "type", "dot L2 GB/s", "dot 32000 GB/s", "GEMM GMAC/s", "pack ms");
    for (int ti = 0; ti < 4; ti++) {
        nb_dtype rt = target(types[ti], isa);
        const nb_qdot *qd = nb_repack_qdot(rt, isa);
        const nb_rgemm *gm = nb_repack_gemm(rt, isa);
        if (rt == types[ti] || !qd || !gm) {
            printf("%-6s not repacked on this CPU at this isa\n", nb_dtype_name(types[ti]));
            continue;
        }
        double gbs[2];
        const int64_t rows[2] = {256, 32000};
        uint8_t *a = malloc((size_t)K * 2 + 4096);
        qd->quantize_act(x, a, K);
        for (int s = 0; s < 2; s++) {
            uint64_t rb;
            uint8_t *p = weights(types[ti], rt, K, rows[s], &rb);
            double best = 1e9;
            float o, sink = 0;
            int reps = (int)(200000000 / (rb * (uint64_t)rows[s])) + 1;
            for (int rep = 0; rep < 5; rep++) {
                double t0 = bench_now();
                for (int q = 0; q < reps; q++)
                    for (int64_t r = 0; r < rows[s]; r++) {
                        qd->vec_dot(K, p + (uint64_t)r * rb, a, &o);
                        sink += o;
                    }
                double dt = (bench_now() - t0) / reps;
                best = dt < best ? dt : best;
            }
            gbs[s] = (double)rb * (double)rows[s] / best / 1e9 + (sink == 1.2345f ? 1e-9 : 0);
            free(p);
        }
        const int64_t R = 512;
        uint64_t rb;
        uint8_t *p = weights(types[ti], rt, K, R, &rb);
        float *y = malloc((size_t)(n * R) * sizeof *y);
        void *mem = aligned_alloc(64, (nb_actpack_bytes(K, n) + 63) & ~(size_t)63);
        void *row = malloc(nb_actpack_scratch_bytes(K));
        nb_actpack ap;
        nb_actpack_init(&ap, mem, n, K, gm->act);
        double pack = 1e9, gemm = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = bench_now();
            for (int64_t g = 0; g < ap.ng; g++) nb_actpack_group(&ap, x, g, row);
            double t1 = bench_now();
            gm->run(p, rb, R, &ap, y, R);
            double t2 = bench_now();
            pack = t1 - t0 < pack ? t1 - t0 : pack;
            gemm = t2 - t1 < gemm ? t2 - t1 : gemm;
        }
        printf("%-6s %14.1f %16.1f %16.1f %10.2f\n", nb_dtype_name(rt), gbs[0], gbs[1], (double)(K * R * n) / gemm / 1e9,
               pack * 1e3);
        free(a); free(p); free(y); free(mem); free(row);
    }
    free(x);
    return 0;
}
