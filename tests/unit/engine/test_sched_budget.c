/* The step's token budget split between decode and prefill (sched.h,
 * max_num_batched_tokens and max_prefill_tokens), driven by a fake model
 * (a "forward pass" only marks the scheduled tokens computed and appends a
 * deterministic token), as vLLM's chunked-prefill scheduler orders a step:
 *   - every running decode gets its token first, whatever prompts wait;
 *   - prompt chunks take at most max_prefill_tokens per step, and never more
 *     than what the decodes leave of the step's budget;
 *   - a prompt longer than the prefill share is split over several steps,
 *     its logits sampled only at the last chunk;
 *   - a sequence preempted for blocks recomputes under the same cap;
 *   - with the cap off, prefill takes what the decodes leave (the old rule);
 *   - random arrivals: every step keeps all of the above. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine/sched.h"

typedef struct req {
    nb_seq seq;
    int32_t max_gen, n_gen;
    bool done;
} req;

typedef struct fix {
    nb_kvcache *kv;
    nb_sched *s;
    nb_sched_config c;
} fix;

static void fix_init(fix *f, int64_t n_blocks, int32_t max_seqs, int32_t budget, int32_t prefill) {
    memset(f, 0, sizeof *f);
    assert_int_equal(nb_kvcache_create(n_blocks, 16, false, &f->kv), NB_OK);
    f->c = (nb_sched_config){max_seqs, budget, prefill};
    assert_int_equal(nb_sched_create(&f->c, f->kv, &f->s), NB_OK);
}

static void fix_free(fix *f) {
    nb_sched_free(f->s);
    assert_int_equal(nb_kvcache_n_used(f->kv), 0);
    nb_kvcache_free(f->kv);
}

static void req_add(fix *f, req *r, uint64_t id, int32_t n_prompt, int32_t max_gen) {
    memset(r, 0, sizeof *r);
    int32_t *p = malloc((size_t)n_prompt * sizeof *p);
    assert_non_null(p);
    for (int32_t i = 0; i < n_prompt; i++) p[i] = (int32_t)((id * 7919 + (uint64_t)i) % 32000);
    assert_int_equal(nb_seq_init(&r->seq, id, p, n_prompt, n_prompt + max_gen, 16), NB_OK);
    free(p);
    r->max_gen = max_gen;
    r->seq.ud = r;
    assert_int_equal(nb_sched_add(f->s, &r->seq), NB_OK);
}

/* The invariants of one step's plan, checked before it "runs". */
static void check_out(const fix *f, const nb_sched_out *o) {
    int32_t nt = 0, np = 0;
    bool seen_prefill = false;
    for (int32_t i = 0; i < o->n_entries; i++) {
        const nb_sched_entry *e = &o->e[i];
        assert_true(e->n >= 1);
        assert_int_equal(e->start, e->seq->n_computed);
        assert_int_equal(e->sample, e->start + e->n == e->seq->n_tokens);
        if (e->prefill) {
            seen_prefill = true;
            np += e->n;
        } else {
            assert_false(seen_prefill); /* decode entries all come first */
            assert_int_equal(e->n, 1);
        }
        nt += e->n;
    }
    assert_int_equal(nt, o->n_tokens);
    assert_int_equal(np, o->n_prefill_tokens);
    assert_true(o->n_tokens <= f->c.max_num_batched_tokens);
    if (f->c.max_prefill_tokens > 0) assert_true(o->n_prefill_tokens <= f->c.max_prefill_tokens);
}

/* Runs one planned step: advance, sample, finish the complete ones. */
static void run_out(fix *f, const nb_sched_out *o) {
    nb_sched_advance(f->s, o);
    for (int32_t i = 0; i < o->n_entries; i++) {
        if (!o->e[i].sample) continue;
        req *r = o->e[i].seq->ud;
        r->n_gen++;
        nb_sched_append(&r->seq, (int32_t)(r->seq.n_tokens * 13 % 1000));
        if (r->n_gen == r->max_gen) {
            nb_sched_finish(f->s, &r->seq);
            r->done = true;
        }
    }
}

static bool step(fix *f, nb_sched_out *o) {
    nb_sched_step(f->s, o);
    check_out(f, o);
    if (o->n_entries == 0) return false;
    run_out(f, o);
    return true;
}

static int32_t n_decode(const nb_sched_out *o) {
    int32_t n = 0;
    for (int32_t i = 0; i < o->n_entries; i++) n += !o->e[i].prefill;
    return n;
}

/* 8 sequences decode; then 4 prompts of 40 arrive. Budget 64, prefill share
 * 16: every step runs the 8 decodes plus 16 prompt tokens, never more. */
static void test_budget_split(void **state) {
    (void)state;
    fix f;
    fix_init(&f, 256, 16, 64, 16);
    req d[8], p[4];
    for (int i = 0; i < 8; i++) req_add(&f, &d[i], (uint64_t)i, 4, 50);
    nb_sched_out o;
    /* the 8 prompts of 4 tokens: 32 prompt tokens at 16 per step */
    assert_true(step(&f, &o));
    assert_int_equal(o.n_prefill_tokens, 16);
    assert_int_equal(n_decode(&o), 0);
    assert_true(step(&f, &o));
    assert_int_equal(o.n_prefill_tokens, 16); /* the other 4 prompts, after the first 4's decodes */
    assert_int_equal(n_decode(&o), 4);
    assert_true(step(&f, &o));
    assert_int_equal(n_decode(&o), 8);
    assert_int_equal(o.n_prefill_tokens, 0);
    for (int i = 0; i < 4; i++) req_add(&f, &p[i], (uint64_t)(100 + i), 40, 4);
    /* 160 prompt tokens: 10 steps of 8 decodes + 16 prompt tokens */
    for (int s = 0; s < 10; s++) {
        assert_true(step(&f, &o));
        assert_true(n_decode(&o) >= 8);
        assert_int_equal(o.n_prefill_tokens, 16);
        assert_int_equal(o.n_tokens, n_decode(&o) + 16);
    }
    while (step(&f, &o)) {}
    for (int i = 0; i < 8; i++) {
        assert_true(d[i].done);
        nb_seq_release(&d[i].seq);
    }
    for (int i = 0; i < 4; i++) {
        assert_true(p[i].done);
        nb_seq_release(&p[i].seq);
    }
    fix_free(&f);
}

/* The step's budget is the hard limit: with budget 12 and 10 decoders, the
 * prefill share (16) is cut to the 2 tokens the decodes leave; with budget
 * == decoders, a waiting prompt gets nothing until a decoder finishes. */
static void test_decode_first(void **state) {
    (void)state;
    fix f;
    fix_init(&f, 256, 12, 12, 16);
    req d[10], p;
    for (int i = 0; i < 10; i++) req_add(&f, &d[i], (uint64_t)i, 1, 30 + i);
    nb_sched_out o;
    assert_true(step(&f, &o)); /* ten 1-token prompts: prefill, 10 tokens */
    assert_int_equal(o.n_prefill_tokens, 10);
    req_add(&f, &p, 99, 64, 3);
    for (int s = 0; s < 5; s++) {
        assert_true(step(&f, &o));
        assert_int_equal(n_decode(&o), 10);
        for (int32_t i = 0; i < 10; i++) assert_false(o.e[i].prefill);
        assert_int_equal(o.n_prefill_tokens, 2);
    }
    while (step(&f, &o)) {}
    for (int i = 0; i < 10; i++) nb_seq_release(&d[i].seq);
    nb_seq_release(&p.seq);
    fix_free(&f);

    fix_init(&f, 256, 4, 4, 16);
    req e[4], w;
    for (int i = 0; i < 4; i++) req_add(&f, &e[i], (uint64_t)i, 1, 5);
    assert_true(step(&f, &o));
    req_add(&f, &w, 50, 8, 2);
    for (int s = 0; s < 4; s++) { /* all 4 decode; the running limit and budget leave w waiting */
        assert_true(step(&f, &o));
        assert_int_equal(o.n_prefill_tokens, 0);
        assert_int_equal(w.seq.n_computed, 0);
    }
    while (step(&f, &o)) {}
    assert_true(w.done);
    for (int i = 0; i < 4; i++) nb_seq_release(&e[i].seq);
    nb_seq_release(&w.seq);
    fix_free(&f);
}

/* A 100-token prompt with a prefill share of 32: chunks 32, 32, 32, 4, one
 * per step, while a running sequence decodes in every one of those steps;
 * the first token comes from the last chunk only. */
static void test_long_prompt_chunks(void **state) {
    (void)state;
    fix f;
    fix_init(&f, 256, 4, 256, 32);
    req a, l;
    req_add(&f, &a, 1, 3, 20);
    nb_sched_out o;
    assert_true(step(&f, &o));
    assert_int_equal(a.n_gen, 1);
    req_add(&f, &l, 2, 100, 2);
    const int32_t want[4] = {32, 32, 32, 4};
    for (int s = 0; s < 4; s++) {
        int32_t before = a.n_gen;
        assert_true(step(&f, &o));
        assert_int_equal(a.n_gen, before + 1); /* the decode never waits for the prompt */
        assert_int_equal(o.n_entries, 2);
        assert_false(o.e[0].prefill);
        assert_ptr_equal(o.e[1].seq, &l.seq);
        assert_true(o.e[1].prefill);
        assert_int_equal(o.e[1].start, 32 * s);
        assert_int_equal(o.e[1].n, want[s]);
        assert_int_equal(o.e[1].sample, s == 3);
        assert_int_equal(l.n_gen, s == 3 ? 1 : 0);
    }
    assert_true(step(&f, &o)); /* both decode now */
    assert_int_equal(o.n_prefill_tokens, 0);
    assert_int_equal(o.n_entries, 2);
    while (step(&f, &o)) {}
    assert_true(a.done && l.done);
    nb_seq_release(&a.seq);
    nb_seq_release(&l.seq);
    fix_free(&f);
}

/* With the prefill cap off (<= 0), prompt chunks take what the decodes leave
 * of the budget (the rule before the cap). */
static void test_cap_off(void **state) {
    (void)state;
    fix f;
    fix_init(&f, 256, 8, 40, 0);
    req d[6], l;
    for (int i = 0; i < 6; i++) req_add(&f, &d[i], (uint64_t)i, 2, 30);
    nb_sched_out o;
    assert_true(step(&f, &o));
    assert_int_equal(o.n_prefill_tokens, 12);
    req_add(&f, &l, 9, 200, 2);
    assert_true(step(&f, &o));
    assert_int_equal(n_decode(&o), 6);
    assert_int_equal(o.n_prefill_tokens, 34);
    assert_int_equal(o.n_tokens, 40);
    while (step(&f, &o)) {}
    for (int i = 0; i < 6; i++) nb_seq_release(&d[i].seq);
    nb_seq_release(&l.seq);
    fix_free(&f);
}

/* A pool of 10 blocks of 16 and two sequences that grow to 96 tokens each
 * (6 blocks): the younger one is preempted, recomputes its prompt and
 * generated tokens in chunks of at most the prefill share, and both finish
 * with the right number of tokens. */
static void test_preemption_recompute(void **state) {
    (void)state;
    fix f;
    fix_init(&f, 10, 4, 64, 24);
    req a, b;
    req_add(&f, &a, 1, 32, 64);
    req_add(&f, &b, 2, 32, 64);
    nb_sched_out o;
    uint64_t preempted = 0;
    int recompute_steps = 0;
    int guard = 0;
    for (;;) {
        assert_true(++guard < 1000);
        nb_sched_step(f.s, &o);
        check_out(&f, &o);
        if (!o.n_entries) break;
        preempted += (uint64_t)o.n_preempted;
        for (int32_t i = 0; i < o.n_entries; i++)
            if (o.e[i].prefill && o.e[i].seq->n_tokens > o.e[i].seq->n_prompt) { /* a recompute */
                recompute_steps++;
                assert_true(o.e[i].n <= 24);
            }
        run_out(&f, &o);
    }
    nb_sched_stats st;
    nb_sched_stats_get(f.s, &st);
    assert_true(st.preemptions_total >= 1);
    assert_true(preempted >= 1);
    assert_true(recompute_steps >= 2); /* the recompute of > 24 tokens took several steps */
    assert_true(a.done && b.done);
    assert_int_equal(a.seq.n_tokens, 96);
    assert_int_equal(b.seq.n_tokens, 96);
    nb_seq_release(&a.seq);
    nb_seq_release(&b.seq);
    fix_free(&f);
}

/* Random arrivals and prompt lengths under several budget / share pairs:
 * every step passes check_out, every running decoder is scheduled whenever
 * the budget covers max_num_seqs, and everything finishes. */
static void test_random(void **state) {
    (void)state;
    const int32_t cfg[][4] = {{24, 24 + 32, 32, 400}, {8, 8, 16, 400}, {16, 64, 0, 400}, {8, 40, 8, 30}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        fix f;
        fix_init(&f, cfg[c][3], cfg[c][0], cfg[c][1], cfg[c][2]);
        enum { N = 60 };
        req *rs = calloc(N, sizeof *rs);
        assert_non_null(rs);
        uint32_t x = 12345u + (uint32_t)c;
        int added = 0, guard = 0;
        nb_sched_out o;
        for (;;) {
            x = x * 1103515245u + 12345u;
            if (added < N && (x >> 16) % 3 == 0) {
                int32_t np = 1 + (int32_t)((x >> 8) % 90);
                req_add(&f, &rs[added], (uint64_t)added, np, 1 + (int32_t)((x >> 20) % 40));
                added++;
            }
            int32_t decoders = 0;
            for (nb_seq *q = nb_sched_running(f.s); q; q = q->next) decoders += q->n_tokens - q->n_computed == 1;
            nb_sched_step(f.s, &o);
            check_out(&f, &o);
            if (!o.n_preempted && f.c.max_num_batched_tokens >= f.c.max_num_seqs) assert_true(n_decode(&o) >= decoders);
            if (o.n_entries) run_out(&f, &o);
            else if (added == N) break;
            assert_true(++guard < 100000);
        }
        for (int i = 0; i < N; i++) {
            assert_true(rs[i].done);
            assert_int_equal(rs[i].n_gen, rs[i].max_gen);
            nb_seq_release(&rs[i].seq);
        }
        free(rs);
        fix_free(&f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_split),
        cmocka_unit_test(test_decode_first),
        cmocka_unit_test(test_long_prompt_chunks),
        cmocka_unit_test(test_cap_off),
        cmocka_unit_test(test_preemption_recompute),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
