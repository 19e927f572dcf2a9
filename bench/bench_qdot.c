/* Micro-benchmark of the quantized dot products (kernels/qdot.h): one
 * 4096-wide activation row against a 4096 x 1024 weight matrix per format,
 * each compiled ISA side by side, printing GB/s of weights read and the ratio
 * to the scalar reference (numbers measured in one run, side by side).
 * Formats that are repacked at load (kernels/repack.h) get a second line,
 * "<type>R", with the repacked kernel on the repacked rows.
 * Not built by default. Build by hand (after building the library):
 *   cc -O2 -Iinclude -Isrc bench/bench_qdot.c build/libnibble.a -lm -lpthread -lpcre2-8 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/qdot.h"
#include "kernels/repack.h"
#include "quant/qtypes.h"
#include "bench_util.h"

int main(void) {
    const int64_t K = 4096, R = 1024;
    float *w = malloc(K * R * sizeof *w), *x = malloc(K * sizeof *x);
    for (int64_t i = 0; i < K * R; i++) w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int64_t i = 0; i < K; i++) x[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    int n;
    const nb_qtype *all = nb_qtype_list(&n);
    printf("%-9s %8s %10s %10s %8s\n", "format", "isa", "us/matvec", "GB/s", "x scalar");
    for (int t = 0; t < n; t++) {
        if (all[t].act_only) continue;
        size_t rb = (size_t)(K / all[t].block) * all[t].block_bytes;
        unsigned char *q = malloc(rb * R), *xa = malloc(K * 4 + 4096);
        for (int64_t r = 0; r < R; r++) all[t].from_float(w + r * K, q + r * rb, K);
        double base = 0;
        for (int isa = NB_ISA_SCALAR; isa <= NB_ISA_AVX512; isa++) {
            const nb_qdot *k = nb_qdot_get_exact(all[t].type, (nb_isa)isa);
            if (!k) continue;
            k->quantize_act(x, xa, K);
            float sink = 0, o;
            int reps = isa == NB_ISA_SCALAR ? 3 : 30;
            double t0 = bench_now();
            for (int rep = 0; rep < reps; rep++) {
                for (int64_t r = 0; r < R; r++) { k->vec_dot(K, q + r * rb, xa, &o); sink += o; }
            }
            double dt = (bench_now() - t0) / reps;
            if (isa == NB_ISA_SCALAR) base = dt;
            printf("%-9s %8s %10.1f %10.2f %8.1f%s\n", all[t].name, k->isa, dt * 1e6, rb * R / dt / 1e9,
                   base / dt, sink == 12345.f ? "!" : "");
        }
        nb_dtype rt = nb_repack_target(all[t].type);
        const nb_qdot *k = nb_repack_qdot(rt, NB_ISA_AVX512);
        uint64_t prb;
        if (rt != all[t].type && k && nb_dtype_row_bytes(rt, (uint64_t)K, &prb)) {
            unsigned char *p = malloc(prb * R);
            nb_repack_rows(all[t].type, q, p, R, K);
            k->quantize_act(x, xa, K);
            float sink = 0, o;
            double t0 = bench_now();
            for (int rep = 0; rep < 30; rep++)
                for (int64_t r = 0; r < R; r++) { k->vec_dot(K, p + r * prb, xa, &o); sink += o; }
            double dt = (bench_now() - t0) / 30;
            printf("%-9s %8s %10.1f %10.2f %8s%s\n", nb_dtype_name(rt), k->isa, dt * 1e6, prb * R / dt / 1e9, "",
                   sink == 12345.f ? "!" : "");
            free(p);
        }
        free(q);
        free(xa);
    }
    free(w);
    free(x);
    return 0;
}
