/* nibble bench model: llama-bench-like prompt processing (pp) and token
 * generation (tg) throughput, plus the decode roofline: weight bytes
 * streamed per token, the bandwidth decode achieves, and the machine's
 * measured read bandwidth, so the gap to the physical limit is visible. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "engine/session.h"
#include "eval/membw.h"

#define CMD "bench"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void stats(const double *x, int n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: nibble bench model [MODEL] [-p 512] [-n 128] [-t N] [-r 3] [-b 512] [--mmap] [--no-bw] [--json]\n"
               "  pp: P prompt tokens in batches of B; tg: N tokens one at a time after a 1-token prompt.\n"
               "  Prints mean +/- sd tok/s over R repetitions (after one warm-up), the weight bytes read per\n"
               "  decoded token, the bandwidth decode achieves and the machine's measured read bandwidth.\n");
}

int nb_cmd_bench(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "model") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) { usage(stdout); return 0; }
        fprintf(stderr, "nibble %s: expected 'nibble bench model [MODEL] ...'\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    nb_session_params sp = {0};
    int64_t pp = 512, tg = 128, reps = 3, batch = 512, v;
    bool json = false, bw = true;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!strcmp(a, "--no-bw")) { bw = false; continue; }
        if (!strcmp(a, "--mmap")) { sp.use_mmap = true; continue; }
        if (a[0] != '-') { sp.model_path = a; continue; }
        if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) sp.model_path = val;
        else if (!strcmp(a, "-p")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &pp)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-n")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &tg)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-r")) { if (!nb_arg_int(CMD, a, val, 1, 1000, &reps)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-b")) { if (!nb_arg_int(CMD, a, val, 1, 1 << 16, &batch)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!nb_arg_int(CMD, a, val, 1, 512, &v)) return NB_EXIT_USAGE;
            sp.n_threads = (int)v;
        } else {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    sp.n_ctx = (int32_t)NB_MAX(pp, tg + 1);
    sp.n_batch = (int32_t)NB_MIN(batch, sp.n_ctx);
    nb_session *s;
    nb_status st = nb_session_open(&sp, &s);
    if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    int32_t n_tok = (int32_t)NB_MAX(pp, 1);
    int32_t *ids = malloc((size_t)n_tok * sizeof *ids);
    float *logits = malloc((size_t)s->n_vocab * sizeof(float));
    double *pp_r = calloc((size_t)reps, sizeof(double)), *tg_r = calloc((size_t)reps, sizeof(double));
    for (int32_t i = 0; i < n_tok; i++) ids[i] = (int32_t)((i * 7919u + 13) % (uint32_t)s->n_vocab);
    /* rep -1 is the warm-up (page-in of the mmapped weights) */
    for (int64_t r = -1; r < reps && st == NB_OK; r++) {
        if (pp > 0) {
            nb_session_reset(s);
            double t0 = now_s();
            st = nb_session_eval(s, ids, (int32_t)pp, false, logits);
            if (r >= 0) pp_r[r] = (double)pp / (now_s() - t0);
        }
        if (tg > 0 && st == NB_OK) {
            nb_session_reset(s);
            st = nb_session_eval(s, ids, 1, false, logits);
            double t0 = now_s();
            for (int64_t i = 0; i < tg && st == NB_OK; i++) st = nb_session_eval(s, &ids[(i + 1) % n_tok], 1, false, logits);
            if (r >= 0) tg_r[r] = (double)tg / (now_s() - t0);
        }
    }
    if (st != NB_OK) { nb_cli_error(CMD); }
    double pp_m = 0, pp_sd = 0, tg_m = 0, tg_sd = 0, gbps = 0;
    stats(pp_r, (int)reps, &pp_m, &pp_sd);
    stats(tg_r, (int)reps, &tg_m, &tg_sd);
    uint64_t bpt = nb_model_bytes_per_token(s->model);
    nb_pool *pool = NULL;
    if (bw && st == NB_OK && nb_pool_create(nb_fwd_threads(s->fwd), &pool) == NB_OK) {
        if (nb_measure_read_bandwidth(pool, (size_t)1 << 30, 5, &gbps) != NB_OK) gbps = 0;
        nb_pool_free(pool);
    }
    double achieved = tg_m * (double)bpt / 1e9, roof = gbps > 0 ? gbps * 1e9 / (double)bpt : 0;
    if (st == NB_OK && json) {
        json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "model",
                              s->model_path, "isa", nb_fwd_isa(s->fwd), "threads", nb_fwd_threads(s->fwd), "pp",
                              (json_int_t)pp, "tg", (json_int_t)tg, "reps", (json_int_t)reps, "pp_tok_s", pp_m,
                              "pp_tok_s_sd", pp_sd, "tg_tok_s", tg_m, "tg_tok_s_sd", tg_sd, "weight_bytes_per_token",
                              (json_int_t)bpt, "decode_gb_s", achieved, "read_bandwidth_gb_s", gbps,
                              "tg_roofline_tok_s", roof);
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
    } else if (st == NB_OK) {
        printf("model: %s\nthreads: %d  isa: %s  params: %.3f B  weights: %.2f GB\n\n", s->model_path,
               nb_fwd_threads(s->fwd), nb_fwd_isa(s->fwd), (double)s->model->n_params / 1e9,
               (double)s->model->weight_bytes / 1e9);
        printf("| test | t/s |\n|---|---|\n");
        if (pp > 0) printf("| pp%lld | %.2f +/- %.2f |\n", (long long)pp, pp_m, pp_sd);
        if (tg > 0) printf("| tg%lld | %.2f +/- %.2f |\n", (long long)tg, tg_m, tg_sd);
        if (tg > 0) {
            printf("\ndecode roofline: %.3f GB of weights read per token -> %.1f GB/s achieved", (double)bpt / 1e9,
                   achieved);
            if (gbps > 0)
                printf("; measured read bandwidth %.1f GB/s -> roofline %.1f tok/s, decode at %.0f%% of it", gbps,
                       roof, 100 * tg_m / roof);
            printf("\n");
        }
    }
    free(ids); free(logits); free(pp_r); free(tg_r);
    nb_session_free(s);
    return st == NB_OK ? NB_EXIT_OK : nb_cli_exit_code(st);
}
