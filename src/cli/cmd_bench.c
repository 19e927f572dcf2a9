/* nibble bench model: llama-bench-like prompt processing (pp) and token
 * generation (tg) throughput, plus the decode roofline: weight bytes
 * streamed per token, the bandwidth decode achieves, and the machine's
 * measured read bandwidth, so the gap to the physical limit is visible.
 *
 * With --concurrency 1,8,32: N requests at once through the serving engine
 * (no HTTP) per level: aggregate prompt tok/s (all prompts / time to the
 * last first token), aggregate decode tok/s (tokens generated once every
 * request is past its prefill / that phase's time), mean TTFT / TPOT,
 * preemptions, how full the allocated KV blocks are (live tokens / tokens
 * the used blocks hold, vs a static max_model_len slot per sequence), and
 * the ratio of decode tok/s at the highest level to N = 1. With
 * --shared-prefix P every prompt starts with the same P tokens and each
 * level runs with prefix caching off and on (TTFT side by side). */
#include <jansson.h>
#include <pthread.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/budget.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "cli/bench_bw.h"

#define CMD "bench"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the process (all threads): on a busy host the decode phase's
 * CPU seconds measure its work where wall time measures the neighbours. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void stats(const double *x, int n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of x[0..n) (n >= 1; x is sorted in place). */
static double median_sorted(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static void usage(FILE *f) {
    fprintf(f, "usage: nibble bench model [MODEL] [-p 512] [-n 128] [-d 0] [-t N] [-r 3] [-b 512] [--mmap] [--no-bw] [--json]\n"
               "  pp: P prompt tokens in batches of B; tg: N tokens one at a time after a 1-token prompt.\n"
               "  -d D (--n-depth, as llama-bench's): both tests start from a D-token context (not timed),\n"
               "  printed as 'pp512 @ d4096'; decode then reads the KV cache of that context too. Past the\n"
               "  model's trained context it runs anyway (as llama-bench) and warns on stderr.\n"
               "  Prints mean +/- sd tok/s over R repetitions (after one warm-up), the weight and KV bytes read\n"
               "  per decoded token, the bandwidth decode achieves and the machine's measured read bandwidth\n"
               "  (the best of the probe's access patterns, each printed; see 'nibble bench bw --help'). The\n"
               "  probe runs before, after, and right after each decode run, and decode's share of the roofline\n"
               "  of that same-minute bandwidth is printed too (median over the runs; a shared host's bandwidth\n"
               "  can move by half between minutes).\n"
               "\n"
               "usage: nibble bench model [MODEL] --concurrency 1,8,32 [--input-len 128] [--output-len 128]\n"
               "       [--shared-prefix P] [--max-num-seqs N] [--max-num-batched-tokens T] [--max-model-len L]\n"
               "       [--block-size B] [--kv-cache-bytes SIZE] [--kv-cache-dtype auto|f16|bf16|fp8|int8] [-t N] [--json]\n"
               "  N concurrent requests per level through the serving engine (no HTTP): aggregate prompt and\n"
               "  decode tok/s, mean TTFT and TPOT, KV block fill vs static slots, preemptions, and the decode\n"
               "  speed-up of the highest level over the lowest. --shared-prefix P: every prompt starts with the\n"
               "  same P tokens; each level runs with prefix caching off, then on, and TTFTs are compared.\n"
               "\nengine options (MODEL may also be given with -m; the serving limits apply to --concurrency):\n");
    nb_engine_opts_usage(f, NB_EOPT_ALL);
}

/* ---- concurrency mode ------------------------------------------------------ */

typedef struct creq {
    int32_t n_gen, n_prompt;
    double t_first, t_last, ttft;
    bool done;
    nb_finish_reason fin;
} creq;

typedef struct cstate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int remaining, n, started;
    int64_t live_tokens; /* prompt + generated of requests in flight */
    double t_all;        /* when the last request got its first token: all decode from then on */
    int64_t after_all;   /* tokens generated after t_all */
    double cpu_all, cpu_last; /* process CPU seconds at t_all and at the last token */
} cstate;

typedef struct csink {
    cstate *cs;
    creq *r;
} csink;

static void conc_sink(void *ud, const nb_token_event *ev) {
    csink *k = ud;
    double t = now_s();
    pthread_mutex_lock(&k->cs->mu);
    if (ev->token >= 0) {
        if (k->r->n_gen == 0) {
            k->r->t_first = t;
            k->r->ttft = ev->ttft_s;
            if (++k->cs->started == k->cs->n) {
                k->cs->t_all = t;
                k->cs->cpu_all = cpu_s();
            }
        } else if (k->cs->started == k->cs->n) {
            k->cs->after_all++;
            k->cs->cpu_last = cpu_s();
        }
        k->r->n_gen++;
        k->r->t_last = t;
        k->cs->live_tokens++;
    }
    if (ev->finish != NB_FINISH_NONE) {
        k->r->done = true;
        k->r->fin = ev->finish;
        k->cs->live_tokens -= k->r->n_prompt + k->r->n_gen;
        k->cs->remaining--;
        pthread_cond_signal(&k->cs->cv);
    }
    pthread_mutex_unlock(&k->cs->mu);
}

typedef struct clevel {
    int n;
    bool prefix_caching;
    double wall, prompt_tps, decode_tps, ttft, tpot, kv_fill, kv_static;
    double decode_cpu_tps; /* decode tokens per CPU-second of the process (same phase as decode_tps) */
    uint64_t preemptions, prefix_hits;
    int64_t max_blocks_used;
} clevel;

static nb_status conc_run(nb_engine *e, int n, int32_t prefix_len, int32_t in_len, int32_t out_len, uint32_t salt,
                          clevel *L) {
    const nb_model *m = nb_engine_model(e);
    int32_t V = m->hp.n_vocab, plen = prefix_len + in_len;
    creq *rs = calloc((size_t)n, sizeof *rs);
    csink *ks = calloc((size_t)n, sizeof *ks);
    int32_t *prompt = malloc((size_t)n * plen * sizeof *prompt);
    nb_request_params *ps = calloc((size_t)n, sizeof *ps);
    if (!rs || !ks || !prompt || !ps) {
        free(rs); free(ks); free(prompt); free(ps);
        return nb_fail(NB_ERR_NOMEM, "out of memory");
    }
    cstate cs = {.remaining = n, .n = n};
    pthread_mutex_init(&cs.mu, NULL);
    pthread_cond_init(&cs.cv, NULL);
    nb_engine_stats s0, s;
    nb_engine_get_stats(e, &s0);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        int32_t *pi = prompt + (size_t)i * plen;
        for (int32_t j = 0; j < plen; j++) {
            uint32_t x = j < prefix_len ? (uint32_t)j * 2654435761u + 17 : ((uint32_t)j * 2654435761u) ^ ((uint32_t)(i + 1) * 40503u + salt);
            pi[j] = (int32_t)(x % (uint32_t)(V - 3)) + 3;
        }
        nb_request_params *p = &ps[i];
        p->prompt = pi;
        p->n_prompt = (size_t)plen;
        nb_sampling_defaults(&p->sampling);
        p->sampling.temperature = 0;
        p->max_tokens = out_len;
        p->ignore_eos = true;
        p->logprobs = -1;
        p->sink = conc_sink;
        ks[i].cs = &cs;
        ks[i].r = &rs[i];
        rs[i].n_prompt = plen;
        p->ud = &ks[i];
    }
    cs.live_tokens = (int64_t)n * plen;
    /* all at once: one by one, the first could finish before the last arrives */
    nb_status st = nb_engine_submit_batch(e, ps, (size_t)n, NULL);
    /* sample KV fill while requests run */
    double fill = 0, stat_fill = 0;
    int samples = 0;
    int64_t max_used = 0;
    for (;;) {
        pthread_mutex_lock(&cs.mu);
        int rem = cs.remaining;
        int64_t live = cs.live_tokens;
        pthread_mutex_unlock(&cs.mu);
        if (rem == 0 || st != NB_OK) break;
        nb_engine_get_stats(e, &s);
        if (s.running > 0 && s.kv_blocks_used > 0) {
            int64_t held = s.kv_blocks_used * s.block_size;
            double f = (double)NB_MIN(live, held) / (double)held;
            fill += f;
            stat_fill += (double)NB_MIN(live, held) / ((double)(s.running + s.waiting) * s.max_model_len);
            samples++;
            max_used = NB_MAX(max_used, s.kv_blocks_used);
        }
        usleep(2000); /* short runs (a tiny model) still get samples */
    }
    double t1 = now_s();
    nb_engine_get_stats(e, &s);
    double first_max = t0, ttft = 0, tpot = 0;
    int64_t gen = 0, dec = 0;
    int ntp = 0;
    for (int i = 0; i < n; i++) {
        first_max = NB_MAX(first_max, rs[i].t_first);
        ttft += rs[i].ttft;
        gen += rs[i].n_gen;
        if (rs[i].n_gen > 1) {
            tpot += (rs[i].t_last - rs[i].t_first) / (rs[i].n_gen - 1);
            dec += rs[i].n_gen - 1;
            ntp++;
        }
    }
    (void)gen;
    double last_first = first_max, end = t0;
    for (int i = 0; i < n; i++) end = NB_MAX(end, rs[i].t_last);
    L->n = n;
    L->wall = t1 - t0;
    L->prompt_tps = (double)n * plen / (last_first - t0 > 0 ? last_first - t0 : 1e-9);
    /* decode: the steady phase where every request is decoding (from the last
     * first token on), so other requests' prefill is not counted against it */
    (void)dec;
    L->decode_tps = (double)cs.after_all / (end - cs.t_all > 0 ? end - cs.t_all : 1e-9);
    L->decode_cpu_tps = (double)cs.after_all / (cs.cpu_last - cs.cpu_all > 0 ? cs.cpu_last - cs.cpu_all : 1e-9);
    L->ttft = ttft / n;
    L->tpot = ntp ? tpot / ntp : 0;
    L->kv_fill = samples ? fill / samples : 0;
    L->kv_static = samples ? stat_fill / samples : 0;
    L->preemptions = s.preemptions_total - s0.preemptions_total;
    L->prefix_hits = s.prefix_hit_tokens - s0.prefix_hit_tokens;
    L->max_blocks_used = max_used;
    pthread_mutex_lock(&cs.mu);
    while (cs.remaining > 0 && st == NB_OK) pthread_cond_wait(&cs.cv, &cs.mu);
    pthread_mutex_unlock(&cs.mu);
    pthread_mutex_destroy(&cs.mu);
    pthread_cond_destroy(&cs.cv);
    free(rs); free(ks); free(prompt); free(ps);
    return st;
}


/* The decode prefetch distance and how it was chosen (kernels/tune.c). */
static void print_prefetch(const nb_fwd *f) {
    const nb_prefetch_tune *t = nb_fwd_prefetch_tune(f);
    printf("decode prefetch: %d bytes, L2 %d, %d stream(s) per thread", nb_fwd_prefetch(f), nb_fwd_prefetch_l2(f),
           nb_fwd_decode_streams(f));
    if (t->n) {
        printf(" (%s;", t->why);
        for (int i = 0; i < t->n; i++)
            printf(" %d/L2 %d/%d: %.1f GB/s%s", t->bytes[i], t->l2[i], t->streams[i], t->gbps[i],
                   i + 1 < t->n ? "," : ")");
    } else if (t->why[0]) {
        printf(" (the CPU's default; %s)", t->why);
    } else {
        const nb_kernel_opts *o = &nb_dispatch_default()->opts;
        printf(" (%s)", o->decode_prefetch_set || o->decode_prefetch_l2_set ? "--decode-prefetch[-l2]"
                        : "the CPU's defaults, measured on this kind of CPU");
    }
    putchar('\n');
}

static json_t *prefetch_json(const nb_fwd *f) {
    const nb_prefetch_tune *t = nb_fwd_prefetch_tune(f);
    json_t *o = json_pack("{s:i, s:i, s:i, s:b}", "bytes", nb_fwd_prefetch(f), "l2_bytes", nb_fwd_prefetch_l2(f),
                          "streams", nb_fwd_decode_streams(f), "tuned", t->n > 0);
    if (t->why[0]) json_object_set_new(o, "why", json_string(t->why));
    if (t->confirm > 0) json_object_set_new(o, "confirm_ratio", json_real(t->confirm));
    if (t->n) {
        json_t *a = json_array();
        for (int i = 0; i < t->n; i++)
            json_array_append_new(
                a, json_pack("{s:i, s:i, s:i, s:f}", "bytes", t->bytes[i], "l2_bytes", t->l2[i], "streams",
                             t->streams[i], "gb_s", t->gbps[i]));
        json_object_set_new(o, "measured", a);
    }
    return o;
}

static int bench_concurrency(const char *model, const char *levels, int n_threads, int64_t in_len, int64_t out_len,
                             int64_t prefix_len, const nb_engine_config *base, bool json) {
    int lv[16], nl = 0, maxn = 1;
    for (const char *p = levels; *p && nl < 16;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 4096) {
            fprintf(stderr, "nibble %s: --concurrency '%s': expected a list like 1,8,32 of values in 1..4096\n", CMD, levels);
            return NB_EXIT_USAGE;
        }
        lv[nl++] = (int)x;
        maxn = NB_MAX(maxn, (int)x);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "nibble %s: --concurrency '%s': expected a list like 1,8,32\n", CMD, levels);
            return NB_EXIT_USAGE;
        }
    }
    nb_engine_config c = *base;
    c.n_threads = n_threads;
    if (c.max_model_len <= 0) c.max_model_len = (int32_t)(prefix_len + in_len + out_len);
    if (c.max_num_seqs <= 0) c.max_num_seqs = maxn;
    if (c.max_num_batched_tokens <= 0) c.max_num_batched_tokens = NB_MAX(512, c.max_num_seqs);
    int passes = prefix_len > 0 ? 2 : 1;
    clevel res[2][16];
    memset(res, 0, sizeof res);
    char model_desc[512] = "", acct[2048] = "";
    nb_engine_stats es;
    memset(&es, 0, sizeof es);
    for (int pass = 0; pass < passes; pass++) {
        c.enable_prefix_caching = passes == 2 ? pass == 1 : base->enable_prefix_caching;
        nb_engine *e;
        nb_status st = nb_engine_create(model, &c, &e);
        if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
        snprintf(model_desc, sizeof model_desc, "threads %d (%s, attention %s), weights %.2f GB, KV %s", nb_engine_threads(e),
                 nb_engine_isa(e), nb_engine_attn_isa(e), (double)nb_engine_model(e)->weight_bytes / 1e9,
                 nb_kv_type_name((nb_kv_type)(c.kv_cache_dtype == NB_KV_AUTO ? 0 : c.kv_cache_dtype - 1)));
        snprintf(acct, sizeof acct, "%s", nb_engine_account(e));
        nb_engine_get_stats(e, &es);
        /* warm-up: pages in the weights; with prefix caching it also caches the shared prefix */
        clevel w;
        st = c.enable_prefix_caching ? conc_run(e, 1, (int32_t)prefix_len, (int32_t)in_len, 2, 0xabcdu, &w)
                                     : conc_run(e, 1, 0, (int32_t)NB_MIN(in_len, 16), 2, 0xabcdu, &w);
        for (int i = 0; i < nl && st == NB_OK; i++)
            st = conc_run(e, lv[i], (int32_t)prefix_len, (int32_t)in_len, (int32_t)out_len, (uint32_t)(i * 7919 + pass),
                          &res[pass][i]);
        for (int i = 0; i < nl; i++) res[pass][i].prefix_caching = c.enable_prefix_caching;
        nb_engine_free(e);
        if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    }
    if (json) {
        json_t *arr = json_array();
        for (int pass = 0; pass < passes; pass++)
            for (int i = 0; i < nl; i++) {
                clevel *L = &res[pass][i];
                json_array_append_new(arr, json_pack("{s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:f}", "concurrency", L->n,
                    "prefix_caching", L->prefix_caching, "wall_s", L->wall, "prompt_tok_s", L->prompt_tps,
                    "decode_tok_s", L->decode_tps, "mean_ttft_s", L->ttft, "mean_tpot_s", L->tpot,
                    "kv_used_blocks_fill", L->kv_fill, "kv_static_slots_fill", L->kv_static,
                    "preemptions", (json_int_t)L->preemptions, "prefix_hit_tokens", (json_int_t)L->prefix_hits,
                    "decode_tok_per_cpu_s", L->decode_cpu_tps));
            }
        json_t *o = json_pack("{s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "model", model, "input_len", (json_int_t)in_len,
                              "output_len", (json_int_t)out_len, "shared_prefix", (json_int_t)prefix_len,
                              "kv_bytes_per_token", (json_int_t)es.kv_bytes_per_token, "kv_blocks_total",
                              (json_int_t)es.kv_blocks_total, "block_size", (json_int_t)es.block_size,
                              "max_model_len", (json_int_t)es.max_model_len, "levels", arr);
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
        return NB_EXIT_OK;
    }
    printf("model: %s\n%s\n%s", model, model_desc, acct);
    printf("requests: shared prefix %lld + input %lld tokens, output %lld tokens (greedy, ignore_eos); "
           "max_num_seqs %d, max_num_batched_tokens %d, block %d\n\n", (long long)prefix_len, (long long)in_len,
           (long long)out_len, c.max_num_seqs, c.max_num_batched_tokens, c.block_size > 0 ? c.block_size : 16);
    printf("| N | prefix cache | prompt tok/s | decode tok/s | mean TTFT s | mean TPOT s | KV fill (used blocks) | KV fill (static slots) | preemptions |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int pass = 0; pass < passes; pass++)
        for (int i = 0; i < nl; i++) {
            clevel *L = &res[pass][i];
            printf("| %d | %s | %.1f | %.2f | %.3f | %.4f | %.1f%% | %.1f%% | %llu |\n", L->n, L->prefix_caching ? "on" : "off",
                   L->prompt_tps, L->decode_tps, L->ttft, L->tpot, 100 * L->kv_fill, 100 * L->kv_static,
                   (unsigned long long)L->preemptions);
        }
    int lo = 0, hi = 0;
    for (int i = 0; i < nl; i++) {
        if (lv[i] < lv[lo]) lo = i;
        if (lv[i] > lv[hi]) hi = i;
    }
    clevel *R = res[passes - 1];
    if (hi != lo)
        printf("\naggregate decode tok/s at N=%d vs N=%d: %.2fx\n", lv[hi], lv[lo],
               R[hi].decode_tps / (R[lo].decode_tps > 0 ? R[lo].decode_tps : 1e-9));
    if (passes == 2)
        for (int i = 0; i < nl; i++)
            printf("prefix cache, shared %lld-token prefix, N=%d: mean TTFT %.3f s off vs %.3f s on: %.2fx faster\n",
                   (long long)prefix_len, lv[i], res[0][i].ttft, res[1][i].ttft,
                   res[0][i].ttft / (res[1][i].ttft > 0 ? res[1][i].ttft : 1e-9));
    return NB_EXIT_OK;
}

int nb_cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "serve")) return nb_cmd_bench_serve(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "compare")) return nb_cmd_bench_compare(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "bw")) return nb_cmd_bench_bw(argc, argv);
    if (argc < 2 || strcmp(argv[1], "model") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) { usage(stdout); return 0; }
        fprintf(stderr, "nibble %s: expected 'nibble bench model [MODEL] ...', 'nibble bench serve ...', 'nibble bench bw ...' or 'nibble bench compare A.json B.json'\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    nb_session_params sp = {0};
    nb_engine_opts eo;
    nb_engine_opts_init(&eo);
    int64_t pp = 512, tg = 128, reps = 3, batch = 512, depth = 0;
    bool json = false, bw = true;
    const char *conc = NULL;
    int64_t in_len = 128, out_len = 128, prefix_len = 0;
    eo.ec.max_num_seqs = 0;          /* 0: the highest concurrency level */
    eo.ec.max_num_batched_tokens = 0; /* 0: max(512, max_num_seqs) */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val;
        int eor = nb_engine_opts_parse(&eo, NB_EOPT_ALL, CMD, argc, argv, &i);
        if (eor < 0) return NB_EXIT_USAGE;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!strcmp(a, "--no-bw")) { bw = false; continue; }
        if (a[0] != '-') { eo.model = a; continue; }
        if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        if (!strcmp(a, "-p")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &pp)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-n")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &tg)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-r")) { if (!nb_arg_int(CMD, a, val, 1, 1000, &reps)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-b")) { if (!nb_arg_int(CMD, a, val, 1, 1 << 16, &batch)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &depth)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--concurrency")) conc = val;
        else if (!strcmp(a, "--input-len")) { if (!nb_arg_int(CMD, a, val, 1, 1 << 20, &in_len)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--output-len")) { if (!nb_arg_int(CMD, a, val, 1, 1 << 20, &out_len)) return NB_EXIT_USAGE; }
        else if (!strcmp(a, "--shared-prefix")) { if (!nb_arg_int(CMD, a, val, 0, 1 << 20, &prefix_len)) return NB_EXIT_USAGE; }
        else {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    char model[4096];
    nb_status st = nb_engine_opts_model_path(eo.model, model, sizeof model);
    if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    nb_engine_config ec = eo.ec;
    if (conc) return bench_concurrency(model, conc, ec.n_threads, in_len, out_len, prefix_len, &ec, json);
    sp.model_path = model;
    sp.tokenizer_path = ec.tokenizer_path;
    sp.n_threads = ec.n_threads;
    sp.use_mmap = ec.use_mmap;
    sp.kv_dtype = ec.kv_cache_dtype;
    sp.n_ctx = (int32_t)(depth + NB_MAX(pp, tg + 1));
    sp.n_batch = (int32_t)NB_MIN(batch, sp.n_ctx);
    nb_session *s;
    st = nb_session_open(&sp, &s);
    if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    const int32_t trained = s->model->hp.n_ctx_train;
    if (trained > 0 && sp.n_ctx > trained) /* runs anyway, as llama-bench does; the numbers are still speed */
        fprintf(stderr, "nibble bench: warning: -d %lld plus the test needs a context of %d tokens, past the %d "
                "the model was trained for (positions beyond it are extrapolated)\n", (long long)depth, sp.n_ctx,
                trained);
    int32_t n_tok = (int32_t)(depth + NB_MAX(pp, 1));
    int32_t *ids = malloc((size_t)n_tok * sizeof *ids);
    float *logits = malloc((size_t)s->n_vocab * sizeof(float));
    double *pp_r = calloc((size_t)reps, sizeof(double)), *tg_r = calloc((size_t)reps, sizeof(double));
    double *bw_r = calloc((size_t)reps, sizeof(double)); /* the best pattern re-measured after each tg run */
    for (int32_t i = 0; i < n_tok; i++) ids[i] = (int32_t)((i * 7919u + 13) % (uint32_t)s->n_vocab);
    /* The probe runs before and after the pp/tg runs and keeps each
     * pattern's better result (kernels/membw.h nb_membw_merge): on a shared
     * host one probe can land in a slow minute. */
    nb_pool *pool = NULL;
    nb_membw_result bwr = {0}, bwr2;
    bool have_bw = bw && nb_pool_create(nb_fwd_threads(s->fwd), &pool) == NB_OK &&
                   nb_membw_measure(pool, (size_t)512 << 20, 3, nb_cpu_isa(), &bwr) == NB_OK;
    /* rep -1 is the warm-up (page-in of the mmapped weights) */
    for (int64_t r = -1; r < reps && st == NB_OK; r++) {
        /* each test starts from a context of `depth` tokens (untimed; at
         * depth 0 the decode test starts from a 1-token prompt) */
        if (pp > 0) {
            nb_session_reset(s);
            if (depth > 0) st = nb_session_eval(s, ids, (int32_t)depth, false, logits);
            double t0 = now_s();
            if (st == NB_OK) st = nb_session_eval(s, ids + depth, (int32_t)pp, false, logits);
            if (r >= 0) pp_r[r] = (double)pp / (now_s() - t0);
        }
        if (tg > 0 && st == NB_OK) {
            nb_session_reset(s);
            const int32_t ctx0 = (int32_t)NB_MAX(depth, 1);
            st = nb_session_eval(s, ids, ctx0, false, logits);
            double t0 = now_s();
            for (int64_t i = 0; i < tg && st == NB_OK; i++)
                st = nb_session_eval(s, &ids[(ctx0 + i) % n_tok], 1, false, logits);
            if (r >= 0) tg_r[r] = (double)tg / (now_s() - t0);
            /* a shared host's bandwidth moves between minutes: the probe
             * again right after the run (every pattern; one pattern alone
             * read less than the decode before it), for a same-minute ratio */
            nb_membw_result one;
            if (r >= 0 && have_bw && st == NB_OK &&
                nb_membw_measure(pool, (size_t)512 << 20, 2, nb_cpu_isa(), &one) == NB_OK) {
                bw_r[r] = one.gbps;
                nb_membw_merge(&bwr, &one);
            }
        }
    }
    if (st != NB_OK) { nb_cli_error(CMD); }
    double pp_m = 0, pp_sd = 0, tg_m = 0, tg_sd = 0, gbps = 0;
    stats(pp_r, (int)reps, &pp_m, &pp_sd);
    stats(tg_r, (int)reps, &tg_m, &tg_sd);
    /* bytes a decoded token reads: the weights, and the KV cache of the
     * context it attends to (the mean over the tg run) */
    const uint64_t bpt = nb_model_bytes_per_token(s->model);
    const double kv_ctx = (double)NB_MAX(depth, 1) + (double)tg / 2;
    const uint64_t kvpt = tg > 0 ? (uint64_t)(kv_ctx * (double)nb_kv_bytes_per_token_type(&s->model->hp, s->kv.type)) : 0;
    const uint64_t rpt = bpt + kvpt;
    char bw_best[96] = "";
    if (have_bw && st == NB_OK) {
        /* the best of several access patterns (kernels/membw.h): the roofline */
        if (nb_membw_measure(pool, (size_t)512 << 20, 3, nb_cpu_isa(), &bwr2) == NB_OK) nb_membw_merge(&bwr, &bwr2);
        gbps = bwr.gbps;
        nb_membw_pattern_name(&bwr.p[bwr.best], bw_best, sizeof bw_best);
    } else {
        bwr.n = 0;
    }
    nb_pool_free(pool);
    double achieved = tg_m * (double)rpt / 1e9, roof = gbps > 0 ? gbps * 1e9 / (double)rpt : 0;
    /* decode / the roofline of the bandwidth measured right after each run */
    double same_pct[1000], same_med = 0, bw_lo = 0, bw_hi = 0;
    int n_same = 0;
    for (int r = 0; r < (int)reps; r++)
        if (bw_r[r] > 0 && tg_r[r] > 0) {
            same_pct[n_same++] = 100 * tg_r[r] * (double)rpt / (bw_r[r] * 1e9);
            bw_lo = bw_lo == 0 || bw_r[r] < bw_lo ? bw_r[r] : bw_lo;
            bw_hi = bw_r[r] > bw_hi ? bw_r[r] : bw_hi;
        }
    if (n_same) same_med = median_sorted(same_pct, n_same); /* sorts: same_pct[0] / [n-1] are min / max */
    if (st == NB_OK && json) {
        json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "model",
                              s->model_path, "isa", nb_fwd_isa(s->fwd), "threads", nb_fwd_threads(s->fwd), "pp",
                              (json_int_t)pp, "tg", (json_int_t)tg, "reps", (json_int_t)reps, "pp_tok_s", pp_m,
                              "pp_tok_s_sd", pp_sd, "tg_tok_s", tg_m, "tg_tok_s_sd", tg_sd, "weight_bytes_per_token",
                              (json_int_t)bpt, "decode_gb_s", achieved, "read_bandwidth_gb_s", gbps,
                              "tg_roofline_tok_s", roof);
        json_object_set_new(o, "depth", json_integer((json_int_t)depth));
        if (n_same) {
            json_t *a = json_array();
            for (int r = 0; r < (int)reps; r++) json_array_append_new(a, json_real(bw_r[r]));
            json_object_set_new(o, "read_bandwidth_gb_s_after_each_tg", a);
            json_object_set_new(o, "tg_roofline_pct_same_minute", json_real(same_med));
        }
        json_object_set_new(o, "kv_bytes_per_token", json_integer((json_int_t)kvpt));
        json_object_set_new(o, "pool_benchings", json_integer((json_int_t)nb_fwd_pool_benchings(s->fwd)));
        json_object_set_new(o, "cpu", json_string(nb_cpu_name()));
        json_object_set_new(o, "kernels", json_string(nb_dispatch_default()->desc));
        json_object_set_new(o, "decode_prefetch", prefetch_json(s->fwd));
        if (bwr.n) {
            json_object_set_new(o, "read_bandwidth_pattern", json_string(bw_best));
            json_object_set_new(o, "read_bandwidth_patterns", nb_bench_bw_json(&bwr));
        }
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
    } else if (st == NB_OK) {
        printf("cpu: %s\nmodel: %s\nthreads: %d  isa: %s  params: %.3f B  weights: %.2f GB\n\n", nb_cpu_name(), s->model_path,
               nb_fwd_threads(s->fwd), nb_fwd_isa(s->fwd), (double)s->model->n_params / 1e9,
               (double)s->model->weight_bytes / 1e9);
        printf("kernels: %s\n", nb_dispatch_default()->desc);
        print_prefetch(s->fwd);
        printf("\n| test | t/s |\n|---|---|\n");
        char at[32] = "";
        if (depth > 0) snprintf(at, sizeof at, " @ d%lld", (long long)depth);
        if (pp > 0) printf("| pp%lld%s | %.2f +/- %.2f |\n", (long long)pp, at, pp_m, pp_sd);
        if (tg > 0) printf("| tg%lld%s | %.2f +/- %.2f |\n", (long long)tg, at, tg_m, tg_sd);
        if (tg > 0) {
            printf("\ndecode roofline: %.3f GB of weights + %.3f GB of KV cache read per token -> %.1f GB/s achieved",
                   (double)bpt / 1e9, (double)kvpt / 1e9, achieved);
            if (gbps > 0)
                printf("; measured read bandwidth %.1f GB/s (max over patterns, set by: %s) -> roofline %.1f tok/s, "
                       "decode at %.0f%% of it", gbps, bw_best, roof, 100 * tg_m / roof);
            printf("\n");
            if (n_same)
                printf("same minute: decode at %.0f%% (%.0f-%.0f%% over %d runs) of the roofline of the bandwidth "
                       "re-measured right after each run (max over patterns: %.1f-%.1f GB/s)\n",
                       same_med, same_pct[0], same_pct[n_same - 1], n_same, bw_lo, bw_hi);
            if (bwr.n) nb_bench_bw_print(stdout, &bwr);
        }
        int64_t benched = nb_fwd_pool_benchings(s->fwd);
        if (benched > 0)
            printf("thread pool: a late worker was benched %lld times (something else ran on its core: another process, or a kernel thread; "
                   "docs/performance.md, \"Benching a late worker\")\n", (long long)benched);
    }
    free(ids); free(logits); free(pp_r); free(tg_r); free(bw_r);
    nb_session_free(s);
    return st == NB_OK ? NB_EXIT_OK : nb_cli_exit_code(st);
}
