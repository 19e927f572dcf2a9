/* The scheduler with a fake model (no weights: a "forward pass" only marks
 * tokens computed and samples a deterministic next token), so the seeds'
 * serving stories can be replayed in simulated time:
 *   - random submit / abort / finish: no leak, no double free, refcounts
 *     exactly the number of block tables holding each block;
 *   - TTFT grows with the number of prefill chunks (budget < prompt);
 *   - a few long requests eat the pool: preemptions counted, waiting grows;
 *     a separate pool for short requests (lower max_model_len) restores
 *     their throughput with no preemption;
 *   - max_num_seqs beyond what the pool holds does not raise throughput.
 * Simulated step time = 1 + tokens / 256 (decode is weight-bandwidth bound:
 * a step costs about the same for 1 or 32 tokens; prefill tokens add). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine/sched.h"

typedef struct sim_req {
    nb_seq seq;
    int32_t max_gen, n_gen;
    bool done, is_long;
    int64_t submit_step, first_step;
    double submit_t, first_t, end_t;
} sim_req;

typedef struct sim {
    nb_kvcache *kv;
    nb_sched *s;
    double t;
    int64_t steps;
    int32_t max_running, max_waiting;
    uint64_t gen_tokens, short_gen_tokens;
} sim;

static void sim_init(sim *m, int64_t n_blocks, int32_t bs, bool prefix, int32_t max_seqs, int32_t budget) {
    memset(m, 0, sizeof *m);
    assert_int_equal(nb_kvcache_create(n_blocks, bs, prefix, &m->kv), NB_OK);
    nb_sched_config c = {max_seqs, budget, 0};
    assert_int_equal(nb_sched_create(&c, m->kv, &m->s), NB_OK);
}

static void sim_free(sim *m) {
    nb_sched_free(m->s);
    nb_kvcache_free(m->kv);
}

static void req_init(sim_req *r, uint64_t id, int32_t n_prompt, int32_t max_gen, int32_t bs, bool shared_prefix) {
    memset(r, 0, sizeof *r);
    int32_t *p = malloc((size_t)n_prompt * sizeof *p);
    for (int32_t i = 0; i < n_prompt; i++) p[i] = shared_prefix ? i : (int32_t)(id * 100003 + (uint64_t)i) % 32000;
    assert_int_equal(nb_seq_init(&r->seq, id, p, n_prompt, n_prompt + max_gen, bs), NB_OK);
    free(p);
    r->max_gen = max_gen;
    r->seq.ud = r;
}

/* One step; returns false when nothing was scheduled. */
static bool sim_step(sim *m) {
    nb_sched_out out;
    nb_sched_step(m->s, &out);
    if (out.n_entries == 0) return false;
    int32_t nt = 0;
    for (int32_t i = 0; i < out.n_entries; i++) {
        nb_seq *q = out.e[i].seq;
        assert_true(out.e[i].n >= 1);
        assert_int_equal(out.e[i].start, q->n_computed);
        /* the block table covers every position written this step */
        assert_true((int64_t)q->n_blocks * nb_kvcache_block_size(m->kv) >= out.e[i].start + out.e[i].n);
        nt += out.e[i].n;
    }
    assert_int_equal(nt, out.n_tokens);
    m->t += 1.0 + nt / 256.0;
    m->steps++;
    nb_sched_advance(m->s, &out);
    for (int32_t i = 0; i < out.n_entries; i++) {
        if (!out.e[i].sample) continue;
        sim_req *r = out.e[i].seq->ud;
        if (r->n_gen == 0) {
            r->first_step = m->steps;
            r->first_t = m->t;
        }
        r->n_gen++;
        m->gen_tokens++;
        if (!r->is_long) m->short_gen_tokens++;
        nb_sched_append(&r->seq, (int32_t)(r->seq.n_tokens * 7 % 1000));
        if (r->n_gen == r->max_gen) {
            nb_sched_finish(m->s, &r->seq);
            r->done = true;
            r->end_t = m->t;
        }
    }
    nb_sched_stats st;
    nb_sched_stats_get(m->s, &st);
    m->max_running = NB_MAX(m->max_running, st.running);
    m->max_waiting = NB_MAX(m->max_waiting, st.waiting);
    return true;
}

/* Refcount of each block == number of block tables that hold it. */
static void check_refcounts(sim *m, sim_req *rs, int n) {
    int64_t nb = nb_kvcache_n_blocks(m->kv);
    int32_t *cnt = calloc((size_t)nb, sizeof *cnt);
    for (int i = 0; i < n; i++)
        if (rs[i].seq.tokens && !rs[i].done)
            for (int32_t j = 0; j < rs[i].seq.n_blocks; j++) cnt[rs[i].seq.blocks[j]]++;
    for (int64_t b = 0; b < nb; b++) assert_int_equal(nb_kvcache_refcount(m->kv, (int32_t)b), cnt[b]);
    free(cnt);
    nb_status st = nb_kvcache_check(m->kv);
    if (st != NB_OK) fail_msg("%s", nb_errmsg());
}

static void test_random_invariants(void **state) {
    (void)state;
    enum { N = 200 };
    for (int prefix = 0; prefix < 2; prefix++) {
        sim m;
        sim_init(&m, 40, 4, prefix, 8, 24);
        static sim_req rs[N];
        srand(99 + prefix);
        int submitted = 0;
        for (int it = 0; it < 4000 && (submitted < N || !nb_sched_idle(m.s)); it++) {
            int r = rand() % 10;
            if (r < 3 && submitted < N) {
                sim_req *q = &rs[submitted];
                req_init(q, (uint64_t)submitted, 1 + rand() % 60, 1 + rand() % 40, 4, rand() % 2);
                assert_int_equal(nb_sched_add(m.s, &q->seq), NB_OK);
                submitted++;
            } else if (r < 4 && submitted > 0) { /* abort anything still live */
                sim_req *q = &rs[rand() % submitted];
                if (!q->done) {
                    nb_sched_finish(m.s, &q->seq);
                    q->done = true;
                }
            } else {
                sim_step(&m);
            }
            check_refcounts(&m, rs, submitted);
        }
        assert_true(nb_sched_idle(m.s));
        assert_int_equal(nb_kvcache_n_used(m.kv), 0);
        assert_int_equal(nb_kvcache_n_available(m.kv), 40);
        nb_sched_stats st;
        nb_sched_stats_get(m.s, &st);
        assert_true(st.preemptions_total > 0); /* the pool of 160 tokens is contended */
        if (prefix) assert_true(st.prefix_hit_tokens > 0);
        for (int i = 0; i < submitted; i++) nb_seq_release(&rs[i].seq);
        sim_free(&m);
    }
}

static void test_never_fits(void **state) {
    (void)state;
    sim m;
    sim_init(&m, 4, 16, true, 4, 64);
    sim_req r;
    req_init(&r, 1, 60, 5, 16, false); /* 65 tokens: 5 blocks > 4 */
    assert_int_equal(nb_sched_add(m.s, &r.seq), NB_ERR_CAPACITY);
    assert_non_null(strstr(nb_errmsg(), "only 4"));
    nb_seq_release(&r.seq);
    sim_free(&m);
}

/* TTFT of one 512-token prompt = the number of prefill chunks. */
static void test_ttft_chunks(void **state) {
    (void)state;
    int32_t budgets[] = {64, 256, 512, 1024};
    int64_t want[] = {8, 2, 1, 1};
    for (int i = 0; i < 4; i++) {
        sim m;
        sim_init(&m, 64, 16, false, 4, budgets[i]);
        sim_req r;
        req_init(&r, 1, 512, 4, 16, false);
        assert_int_equal(nb_sched_add(m.s, &r.seq), NB_OK);
        while (sim_step(&m)) {}
        assert_int_equal(r.first_step, want[i]);
        assert_true(r.done);
        nb_seq_release(&r.seq);
        sim_free(&m);
    }
}

/* A decode is never starved by a long prefill: with a running request, a
 * long prompt arriving later is chunked and the decode runs every step. */
static void test_decode_first(void **state) {
    (void)state;
    sim m;
    sim_init(&m, 128, 16, false, 4, 64);
    sim_req a, b;
    req_init(&a, 1, 8, 40, 16, false);
    req_init(&b, 2, 1000, 2, 16, false);
    assert_int_equal(nb_sched_add(m.s, &a.seq), NB_OK);
    sim_step(&m);
    assert_int_equal(nb_sched_add(m.s, &b.seq), NB_OK);
    for (int i = 0; i < 10; i++) {
        int32_t before = a.n_gen;
        sim_step(&m);
        assert_int_equal(a.n_gen, before + 1);
    }
    while (sim_step(&m)) {}
    nb_seq_release(&a.seq);
    nb_seq_release(&b.seq);
    sim_free(&m);
}

typedef struct scen {
    int32_t n_blocks, max_seqs, budget, max_len;
    int n_short, long_every; /* every long_every-th request is long (0: none) */
} scen;

typedef struct scen_out {
    uint64_t preemptions;
    int32_t max_running, max_waiting;
    double short_tok_per_t, tok_per_t, mean_short_ttft;
} scen_out;

/* Offline batch: n_short short requests (prompt 192 + 64 generated = 256
 * tokens, "4K" scaled by 1/16) and, when long_every > 0, long ones (prompt
 * 1920 + 128 = 2048, "32K") mixed in, all queued at t = 0. */
static scen_out run_scenario(const scen *c) {
    sim m;
    sim_init(&m, c->n_blocks, 16, false, c->max_seqs, c->budget);
    int n_long = c->long_every ? c->n_short / (c->long_every - 1) : 0, n = c->n_short + n_long;
    sim_req *rs = calloc((size_t)n, sizeof *rs);
    for (int i = 0, ns = 0; i < n; i++) {
        bool lng = c->long_every && i % c->long_every == c->long_every - 1 && ns >= 0;
        if (lng) req_init(&rs[i], (uint64_t)i, 1920, 128, 16, false);
        else req_init(&rs[i], (uint64_t)i, 192, 64, 16, false), ns++;
        rs[i].is_long = lng;
        assert_true(rs[i].seq.cap <= c->max_len);
        assert_int_equal(nb_sched_add(m.s, &rs[i].seq), NB_OK);
    }
    double short_end = 0, ttft = 0;
    int n_short = 0;
    while (sim_step(&m)) {}
    for (int i = 0; i < n; i++) {
        assert_true(rs[i].done);
        if (!rs[i].is_long) {
            short_end = NB_MAX(short_end, rs[i].end_t);
            ttft += rs[i].first_t;
            n_short++;
        }
        nb_seq_release(&rs[i].seq);
    }
    nb_sched_stats st;
    nb_sched_stats_get(m.s, &st);
    scen_out o = {st.preemptions_total, m.max_running, m.max_waiting, (double)m.short_gen_tokens / short_end,
                  (double)m.gen_tokens / m.t, ttft / n_short};
    assert_int_equal(nb_kvcache_n_used(m.kv), 0);
    free(rs);
    sim_free(&m);
    return o;
}

static void test_seed_long_requests_eat_pool(void **state) {
    (void)state;
    /* pool: 364 blocks x 16 = 5824 tokens ("18.3 GB / 192 KiB" scaled by 1/16) */
    scen mixed = {364, 32, 256, 2048, 90, 10};    /* one pool for all, max_model_len "32K", budget "4096" */
    scen shortp = {364, 22, 512, 512, 90, 0};     /* short-text pool: max_model_len "8K", max_num_seqs 22 */
    scen_out a = run_scenario(&mixed), b = run_scenario(&shortp);
    fprintf(stderr, "mixed pool: preemptions %llu, max running %d, max waiting %d, short tok/t %.2f, mean short TTFT %.1f\n",
            (unsigned long long)a.preemptions, a.max_running, a.max_waiting, a.short_tok_per_t, a.mean_short_ttft);
    fprintf(stderr, "short pool: preemptions %llu, max running %d, max waiting %d, short tok/t %.2f, mean short TTFT %.1f\n",
            (unsigned long long)b.preemptions, b.max_running, b.max_waiting, b.short_tok_per_t, b.mean_short_ttft);
    assert_true(a.preemptions > 0);
    assert_true(a.max_waiting > a.max_running);
    assert_int_equal(b.preemptions, 0);
    assert_true(b.short_tok_per_t > 1.2 * a.short_tok_per_t);
    assert_true(b.mean_short_ttft < a.mean_short_ttft);
}

static void test_seed_max_num_seqs_beyond_pool(void **state) {
    (void)state;
    /* the pool holds 22 sequences of 256 tokens: 64 slots run no more of them */
    scen s22 = {352, 22, 512, 512, 88, 0}, s64 = {352, 64, 512, 512, 88, 0};
    scen_out a = run_scenario(&s22), b = run_scenario(&s64);
    fprintf(stderr, "max_num_seqs 22: running <= %d, tok/t %.2f, preemptions %llu; 64: running <= %d, tok/t %.2f, "
            "preemptions %llu\n", a.max_running, a.tok_per_t, (unsigned long long)a.preemptions, b.max_running,
            b.tok_per_t, (unsigned long long)b.preemptions);
    assert_true(b.max_running <= 352 * 16 / 192); /* admitted on prompt blocks, then preempted */
    assert_true(b.tok_per_t < 1.10 * a.tok_per_t);
    assert_true(b.preemptions > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_never_fits),
        cmocka_unit_test(test_ttft_chunks),
        cmocka_unit_test(test_decode_first),
        cmocka_unit_test(test_seed_long_requests_eat_pool),
        cmocka_unit_test(test_seed_max_num_seqs_beyond_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
