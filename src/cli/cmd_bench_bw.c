/* nibble bench bw: the read-bandwidth probe alone (kernels/membw.h): every
 * pattern's best pass, and the maximum, which `bench model` uses as the
 * decode roofline. */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "cli/args.h"
#include "cli/bench_bw.h"

#define CMD "bench bw"

static void usage(FILE *f) {
    fprintf(f, "usage: nibble bench bw [-t N] [--size MiB] [--passes N] [--json]\n"
               "  Read bandwidth with every thread of a pool, as the best pass of each access pattern:\n"
               "  1 or 8 streams per thread in 256-byte turns and 4 in 64-byte turns (as the decode dots read\n"
               "  their streams), with and without software prefetch (2 KiB ahead), on 4 KiB and 2 MiB pages,\n"
               "  with the widest loads and, on AVX-512 CPUs, 32-byte ones too (2 MiB pages).\n"
               "  The maximum is the decode roofline `nibble bench model` reports.\n"
               "  -t N          threads (default: one per CPU this process may use)\n"
               "  --size MiB    buffer per page size (default 1024, at least 64)\n"
               "  --passes N    passes per pattern, interleaved across patterns (default 5)\n"
               "  --json        machine-readable output\n");
}

json_t *nb_bench_bw_json(const nb_membw_result *r) {
    json_t *a = json_array();
    int widest = !strcmp(r->isa, "avx512") ? 64 : !strcmp(r->isa, "avx2") ? 32 : 16;
    for (int i = 0; i < r->n; i++) {
        char name[96];
        nb_membw_pattern_name(&r->p[i], name, sizeof name);
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:s, s:i, s:i, s:f, s:b}", "pattern", name, "streams",
                                           r->p[i].streams, "prefetch", r->p[i].prefetch, "pages",
                                           r->p[i].huge_pages ? "2M" : "4K", "load_bytes",
                                           r->p[i].load_bytes ? r->p[i].load_bytes : widest, "turn_bytes",
                                           r->p[i].turn ? r->p[i].turn : 256, "gb_s", r->p[i].gbps, "best",
                                           i == r->best));
    }
    return a;
}

void nb_bench_bw_print(FILE *f, const nb_membw_result *r) {
    fprintf(f, "read bandwidth by pattern (%s loads%s):\n", r->isa,
            r->huge_granted ? "" : "; the kernel granted no 2M pages, those rows ran on 4K pages");
    for (int i = 0; i < r->n; i++) {
        char name[96];
        nb_membw_pattern_name(&r->p[i], name, sizeof name);
        fprintf(f, "  %-62s %6.1f GB/s%s\n", name, r->p[i].gbps, i == r->best ? "  <- max" : "");
    }
}

int nb_cmd_bench_bw(int argc, char **argv) {
    int64_t threads = 0, size = 1024, passes = 5;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!nb_arg_int(CMD, a, val, 1, 512, &threads)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--size")) { if (!nb_arg_int(CMD, a, val, 64, 1 << 20, &size)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--passes")) { if (!nb_arg_int(CMD, a, val, 1, 1000, &passes)) return NB_EXIT_USAGE; }
        else {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            usage(stderr);
            return NB_EXIT_USAGE;
        }
    }
    nb_pool *pool;
    if (nb_pool_create((int)threads, &pool) != NB_OK) { nb_cli_error(CMD); return NB_EXIT_FAIL; }
    nb_membw_result r;
    nb_status st = nb_membw_measure(pool, (size_t)size << 20, (int)passes, nb_cpu_isa(), &r);
    int nth = nb_pool_size(pool);
    nb_pool_free(pool);
    if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    char best[96];
    nb_membw_pattern_name(&r.p[r.best], best, sizeof best);
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:i, s:f, s:s, s:b, s:o}", "cpu", nb_cpu_name(), "features",
                              nb_cpu_describe(), "threads", nth, "bytes", (json_int_t)size << 20, "passes",
                              (int)passes, "read_bandwidth_gb_s", r.gbps, "read_bandwidth_pattern", best,
                              "huge_pages_granted", r.huge_granted, "read_bandwidth_patterns", nb_bench_bw_json(&r));
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
        return NB_EXIT_OK;
    }
    printf("cpu: %s\n%s\nthreads: %d  buffer: %lld MiB per page size  passes: %lld\n\n", nb_cpu_name(),
           nb_cpu_describe(), nth, (long long)size, (long long)passes);
    nb_bench_bw_print(stdout, &r);
    printf("\nread bandwidth: %.1f GB/s (%s)\n", r.gbps, best);
    return NB_EXIT_OK;
}
