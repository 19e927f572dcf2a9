/* Parse time of a GGUF file with many metadata keys (issue 15: a crafted
 * file with millions of keys must not stall the reader). Writes a file with
 * N u8 keys "k.%07d" (default 1,000,000) to a temporary directory, then
 * opens it R times (default 7) and prints each wall time, the minimum and
 * the median; a second file with the duplicate key last measures the
 * refusal. Not built by default. Build by hand after building the library:
 *   cc -O2 -Iinclude -Isrc bench/bench_gguf_keys.c build/libnibble.a -lm -lpthread -lpcre2-8 -o bench_gguf_keys
 *   ./bench_gguf_keys [N] [R] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "bench_util.h"

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int write_keys(const char *path, uint64_t n, int dup_last) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    uint32_t v3 = 3;
    uint64_t zero = 0, u;
    fwrite("GGUF", 1, 4, f);
    fwrite(&v3, 4, 1, f);
    fwrite(&zero, 8, 1, f);
    fwrite(&n, 8, 1, f);
    char k[32];
    for (uint64_t i = 0; i < n; i++) {
        int len = snprintf(k, sizeof k, "k.%07llu", (unsigned long long)(dup_last && i == n - 1 ? 0 : i));
        u = (uint64_t)len;
        uint32_t ty = 0;
        uint8_t val = (uint8_t)i;
        fwrite(&u, 8, 1, f);
        fwrite(k, 1, (size_t)len, f);
        fwrite(&ty, 4, 1, f);
        fwrite(&val, 1, 1, f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (n == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_gguf_keys [N>0] [R in 1..100]\n");
        return 2;
    }
    char dir[] = "/tmp/nb_bench_gguf_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char path[64], dpath[64];
    snprintf(path, sizeof path, "%s/keys.gguf", dir);
    snprintf(dpath, sizeof dpath, "%s/dup.gguf", dir);
    if (write_keys(path, n, 0) || write_keys(dpath, n, 1)) { perror("write"); return 1; }
    double t[100], c[100];
    for (int r = 0; r < reps; r++) {
        nb_gguf *g = NULL;
        double t0 = bench_now(), c0 = cpu();
        if (nb_gguf_open(path, &g) != NB_OK) { fprintf(stderr, "open: %s\n", nb_errmsg()); return 1; }
        t[r] = bench_now() - t0;
        c[r] = cpu() - c0;
        if (nb_gguf_n_kv(g) != (int64_t)n || !nb_gguf_find(g, "k.0000000")) { fprintf(stderr, "wrong count\n"); return 1; }
        nb_gguf_close(g);
        printf("open %d: %.3f s wall, %.3f s CPU\n", r + 1, t[r], c[r]);
    }
    double d[100];
    for (int r = 0; r < reps; r++) {
        nb_gguf *g = NULL;
        double t0 = bench_now();
        if (nb_gguf_open(dpath, &g) == NB_OK) { fprintf(stderr, "duplicate not found\n"); return 1; }
        d[r] = bench_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    qsort(d, (size_t)reps, sizeof *d, bench_cmp_double);
    qsort(c, (size_t)reps, sizeof *c, bench_cmp_double);
    printf("%llu keys: open min %.3f s, median %.3f s wall (CPU min %.3f s); duplicate last refused: min %.3f s "
           "(%d runs)\n", (unsigned long long)n, t[0], t[reps / 2], c[0], d[0], reps);
    unlink(path);
    unlink(dpath);
    rmdir(dir);
    return 0;
}
