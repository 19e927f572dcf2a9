/* nb_kctx_tune_prefetch (kernels.h): the decode kernels' prefetch distances
 * (into L1, and into L2 beside it) and the runs of rows each thread reads
 * in lockstep (kernels/matmul.c), measured on the model's own weights
 * where the dispatch table has no measured values for this CPU
 * (kernels/dispatch.c nb_prefetch_measured_for_cpu,
 * nb_decode_streams_measured_for_cpu).
 *
 * How far ahead a memory stream must be requested depends on the memory
 * system: 2 KiB is best on Sapphire Rapids, 8 KiB on a Zen 5-class EPYC
 * (decode 92-95 -> 119 tok/s there), and a CPU nobody measured may want
 * either or neither. One-token matmuls are what decode streams, so the
 * trials are exactly those, through nb_matmul on this context's pool: the
 * candidates take turns (a shared host's bandwidth moves between minutes,
 * alike for all of them), each trial continues through the weights where
 * the last one stopped (so no trial reads what the cache kept of the one
 * before), the median of each candidate's trials picks a leader, and a
 * fresh paired sample of the leader against the table's values decides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"

/* L1 distances, each tried alone and with an L2 request twice as far
 * (kernels.h nb_prefetch_l2_bytes: on the Intel guest of session 30, 2 KiB
 * + 4 KiB read 5-9% more than 2 KiB alone; 8 KiB + 16 KiB was never
 * measured anywhere) unless the options fix the L2 distance. */
static const int candidates[] = {1024, 2048, 4096, 8192};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { int pf, l2, streams; } pair;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    return x->pf != y->pf ? x->pf - y->pf : x->l2 != y->l2 ? x->l2 - y->l2 : x->streams - y->streams;
}

static void add_pair(pair *c, int *n, int pf, int l2, int streams) {
    if (l2 > NB_PREFETCH_MAX || *n >= NB_TUNE_MAX) return;
    for (int i = 0; i < *n; i++)
        if (c[i].pf == pf && c[i].l2 == l2 && c[i].streams == streams) return;
    c[(*n)++] = (pair){pf, l2, streams};
}

/* The weights from *next on until about NB_TUNE_TRIAL_BYTES are read, one
 * token each; returns the bytes read. */
static nb_status trial(nb_kctx *k, const nb_tensor *const *W, int count, int *next, const float *x, float *y,
                       size_t *bytes) {
    *bytes = 0;
    while (*bytes < NB_TUNE_TRIAL_BYTES) {
        const nb_tensor *w = W[*next];
        *next = (*next + 1) % count;
        NB_TRY(nb_matmul(k, w, x, 1, y));
        *bytes += (size_t)w->nbytes;
    }
    return NB_OK;
}

nb_status nb_kctx_tune_prefetch(nb_kctx *k, const nb_tensor *const *W, int count, size_t min_bytes, unsigned what,
                                nb_prefetch_tune *out) {
    memset(out, 0, sizeof *out);
    out->table = out->chosen = k->prefetch;
    out->table_l2 = out->chosen_l2 = k->prefetch_l2;
    out->table_streams = out->chosen_streams = k->streams;
    size_t total = 0;
    int64_t max_k = 0, max_r = 0;
    for (int i = 0; i < count; i++) {
        total += (size_t)W[i]->nbytes;
        max_k = NB_MAX(max_k, W[i]->ne[0]);
        max_r = NB_MAX(max_r, nb_tensor_rows(W[i]));
    }
    if (count < 1 || total < min_bytes) {
        snprintf(out->why, sizeof out->why, "not measured: %zu MiB of weights, under the %zu MiB that leave the cache",
                 total >> 20, min_bytes >> 20);
        return NB_OK;
    }
    const bool l2_fixed = k->d->opts.decode_prefetch_l2_set;
    pair cand[NB_TUNE_MAX];
    int n = 0;
    const int ts = out->table_streams, alt[2] = {1, NB_TUNE_STREAMS_ALT};
    add_pair(cand, &n, out->table, out->table_l2, ts);
    for (int si = 0; si < ((what & NB_TUNE_STREAMS) ? 2 : 0); si++)
        add_pair(cand, &n, out->table, out->table_l2, alt[si]);
    for (size_t i = 0; (what & NB_TUNE_PREFETCH) && i < sizeof candidates / sizeof *candidates; i++)
        for (int si = 0; si < ((what & NB_TUNE_STREAMS) ? 2 : 1); si++) {
            const int st = (what & NB_TUNE_STREAMS) ? alt[si] : ts;
            add_pair(cand, &n, candidates[i], l2_fixed ? out->table_l2 : 0, st);
            if (!l2_fixed) add_pair(cand, &n, candidates[i], 2 * candidates[i], st);
        }
    qsort(cand, (size_t)n, sizeof *cand, cmp_pair);
    for (int i = 0; i < n; i++) {
        out->bytes[i] = cand[i].pf;
        out->l2[i] = cand[i].l2;
        out->streams[i] = cand[i].streams;
    }
    out->n = n;

    float *x = malloc((size_t)max_k * sizeof *x), *y = malloc((size_t)max_r * sizeof *y);
    double *g = malloc((size_t)(n * NB_TUNE_REPS) * sizeof *g);
    if (!x || !y || !g) {
        free(x); free(y); free(g);
        return nb_fail(NB_ERR_NOMEM, "out of memory tuning the prefetch distance");
    }
    for (int64_t i = 0; i < max_k; i++) x[i] = (float)(i % 17) * 0.01f - 0.08f; /* any values: only time counts */
    int next = 0;
    size_t bytes;
    int64_t t_start = now_ns();
    nb_status st = trial(k, W, count, &next, x, y, &bytes); /* warm-up: wakes the pool, faults nothing in */
    for (int r = 0; r < NB_TUNE_REPS && st == NB_OK; r++)
        for (int c = 0; c < n && st == NB_OK; c++) {
            int ci = (c + r) % n; /* a different candidate first each round */
            k->prefetch = out->bytes[ci];
            k->prefetch_l2 = out->l2[ci];
            k->streams = out->streams[ci];
            int64_t t0 = now_ns();
            st = trial(k, W, count, &next, x, y, &bytes);
            g[ci * NB_TUNE_REPS + r] = (double)bytes / (double)NB_MAX(now_ns() - t0, 1);
        }
    out->ms = (double)(now_ns() - t_start) / 1e6;
    int best = 0, table_i = 0;
    for (int c = 0; st == NB_OK && c < n; c++) {
        qsort(g + c * NB_TUNE_REPS, NB_TUNE_REPS, sizeof *g, cmp_double);
        out->gbps[c] = g[c * NB_TUNE_REPS + NB_TUNE_REPS / 2];
        if (out->gbps[c] > out->gbps[best]) best = c;
        if (out->bytes[c] == out->table && out->l2[c] == out->table_l2 && out->streams[c] == ts) table_i = c;
    }
    bool wins = best != table_i && out->gbps[best] >= NB_TUNE_MARGIN * out->gbps[table_i];
    if (wins) {
        /* The fastest of several medians is biased upward: on a shared host
         * a candidate wins partly on its minutes. A fresh sample decides,
         * the leader and the table's pair in adjacent trials (the order
         * alternating), by the median of the pairs' ratios. Without it,
         * 1 KiB + 2 KiB into L2 "won" on TinyLlama F16 in two of three
         * loads on the AMD guest of session 34, and read 10-13% less than
         * the table's 2 KiB in a same-process A/B (docs/speed.md). */
        double ratio[NB_TUNE_CONFIRM];
        for (int r = 0; r < NB_TUNE_CONFIRM && st == NB_OK; r++) {
            double gg[2] = {0, 0};
            for (int s = 0; s < 2 && st == NB_OK; s++) {
                const int lead = (r + s) & 1, ci = lead ? best : table_i;
                k->prefetch = out->bytes[ci];
                k->prefetch_l2 = out->l2[ci];
                k->streams = out->streams[ci];
                int64_t t0 = now_ns();
                st = trial(k, W, count, &next, x, y, &bytes);
                gg[lead] = (double)bytes / (double)NB_MAX(now_ns() - t0, 1);
            }
            ratio[r] = gg[1] / gg[0];
        }
        if (st == NB_OK) {
            qsort(ratio, NB_TUNE_CONFIRM, sizeof *ratio, cmp_double);
            out->confirm = ratio[NB_TUNE_CONFIRM / 2];
            wins = out->confirm >= NB_TUNE_MARGIN;
        }
        out->ms = (double)(now_ns() - t_start) / 1e6;
    }
    free(x); free(y); free(g);
    if (st != NB_OK) {
        k->prefetch = out->table;
        k->prefetch_l2 = out->table_l2;
        k->streams = ts;
        out->n = 0;
        return st;
    }
    out->chosen = k->prefetch = wins ? out->bytes[best] : out->table;
    out->chosen_l2 = k->prefetch_l2 = wins ? out->l2[best] : out->table_l2;
    out->chosen_streams = k->streams = wins ? out->streams[best] : ts;
    const char *because = wins ? "faster than the CPU's default by 3% or more, confirmed in paired trials"
                          : out->confirm > 0 ? "the CPU's default: the fastest was not 3% faster in paired trials"
                                             : "the CPU's default, no other 3% faster";
    snprintf(out->why, sizeof out->why, "measured at load (%d x %d trials of %zu MiB, %.0f ms): %s", n, NB_TUNE_REPS,
             NB_TUNE_TRIAL_BYTES >> 20, out->ms, because);
    return NB_OK;
}
