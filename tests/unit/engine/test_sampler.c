/* Tests for the sampler, its RNG and the log-softmax utilities. Expected
 * values come from independent math in the test (softmax in double, direct
 * sums, hand-computed penalty formulas, published PRNG test vectors), never
 * from the sampler's own output. Every random test uses a fixed seed, so the
 * results are deterministic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/status.h"
#include "engine/rng.h"
#include "engine/sampler.h"

/* ---- helpers ------------------------------------------------------------ */

static nb_sampler *make(const nb_sampling *s, int32_t n) {
    nb_sampler *sm = NULL;
    nb_status st = nb_sampler_create(s, n, &sm);
    if (st != NB_OK) fprintf(stderr, "create: %s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    assert_non_null(sm);
    return sm;
}

static nb_sampling params(float temperature, uint64_t seed) {
    nb_sampling s;
    nb_sampling_defaults(&s);
    s.temperature = temperature;
    s.seed = seed;
    s.has_seed = true;
    return s;
}

/* Samples `draws` times from a fresh copy of `logits` each time, counting
 * the chosen ids into counts[n]. */
static void draw_counts(nb_sampler *sm, const float *logits, int32_t n, int draws, long *counts) {
    float *buf = malloc((size_t)n * sizeof(float));
    assert_non_null(buf);
    memset(counts, 0, (size_t)n * sizeof(long));
    for (int d = 0; d < draws; d++) {
        memcpy(buf, logits, (size_t)n * sizeof(float));
        int32_t id = nb_sampler_sample(sm, buf);
        assert_true(id >= 0 && id < n);
        counts[id]++;
    }
    free(buf);
}

/* Softmax of logits / T in double, restricted to mask (NULL = all). */
static void softmax_ref(const float *logits, int32_t n, double t, const bool *mask, double *p) {
    double mx = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < n; i++)
        if ((!mask || mask[i]) && logits[i] > mx) mx = logits[i];
    for (int32_t i = 0; i < n; i++) {
        p[i] = (!mask || mask[i]) ? exp(((double)logits[i] - mx) / t) : 0.0;
        z += p[i];
    }
    for (int32_t i = 0; i < n; i++) p[i] /= z;
}

/* Pearson chi-square of observed counts against probabilities p (cells
 * with p == 0 must be empty: asserted). Returns the statistic. */
static double chi_square(const long *counts, const double *p, int32_t n, int draws, int *dof) {
    double chi = 0.0;
    int cells = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] == 0.0) {
            assert_int_equal(counts[i], 0);
            continue;
        }
        double e = p[i] * draws;
        chi += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        cells++;
    }
    *dof = cells - 1;
    return chi;
}

/* Chi-square critical values at p = 0.001, indexed by degrees of freedom. */
static const double CHI2_999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12};

/* ---- RNG ---------------------------------------------------------------- */

static void test_rng_vectors(void **state) {
    (void)state;
    /* splitmix64 from state 0: the published first outputs */
    uint64_t x = 0;
    assert_true(nb_splitmix64(&x) == 0xe220a8397b1dcdafULL);
    assert_true(nb_splitmix64(&x) == 0x6e789e6aa1b965f4ULL);
    assert_true(nb_splitmix64(&x) == 0x06c45d188009454fULL);
    /* xoshiro256** from state {1, 2, 3, 4}: the reference test vector */
    nb_rng r = {{1, 2, 3, 4}};
    const uint64_t want[] = {11520ULL, 0ULL, 1509978240ULL, 1215971899390074240ULL,
                             1216172134540287360ULL, 607988272756665600ULL};
    for (int i = 0; i < 6; i++) assert_true(nb_rng_next(&r) == want[i]);
    /* uniform: in [0, 1), multiples of 2^-53, mean near 1/2 */
    nb_rng_seed(&r, 42);
    double sum = 0.0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = nb_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        assert_true(ldexp(u, 53) == floor(ldexp(u, 53)));
        sum += u;
    }
    /* sd of the mean = sqrt(1/12/n) ~ 6.5e-4; 6 sd */
    assert_true(fabs(sum / n - 0.5) < 4e-3);
}

/* ---- greedy ------------------------------------------------------------- */

static void test_greedy_argmax_ties(void **state) {
    (void)state;
    nb_sampling s = params(0.0f, 1);
    nb_sampler *sm = make(&s, 6);
    float a[6] = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f, 3.0f};
    assert_int_equal(nb_sampler_sample(sm, a), 1); /* ties -> lowest id */
    float b[6] = {NAN, -1.0f, 0.0f, NAN, 0.0f, -5.0f};
    assert_int_equal(nb_sampler_sample(sm, b), 2); /* NaN never wins */
    float c[6] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(nb_sampler_sample(sm, c), 0); /* nothing finite -> lowest id */
    assert_int_equal(nb_sampler_n_generated(sm), 3);
    nb_sampler_free(sm);

    /* temperature below 1e-5 is greedy too */
    s = params(5e-6f, 1);
    sm = make(&s, 6);
    for (int i = 0; i < 20; i++) {
        float d[6] = {0.0f, 0.1f, 0.2f, 0.3f, 0.29f, 0.1f};
        assert_int_equal(nb_sampler_sample(sm, d), 3);
    }
    nb_sampler_free(sm);
}

static void test_top_k1_is_greedy(void **state) {
    (void)state;
    const int32_t n = 1000;
    nb_sampling s = params(1.5f, 7);
    s.top_k = 1;
    nb_sampler *sm = make(&s, n);
    nb_rng r;
    nb_rng_seed(&r, 99);
    float *l = malloc((size_t)n * sizeof(float));
    assert_non_null(l);
    for (int rep = 0; rep < 200; rep++) {
        for (int32_t i = 0; i < n; i++) l[i] = (float)(nb_rng_uniform(&r) * 4.0 - 2.0);
        if (rep % 3 == 0) l[(rep * 37) % n] = l[(rep * 11) % n]; /* create ties sometimes */
        int32_t want = 0;
        for (int32_t i = 1; i < n; i++)
            if (l[i] > l[want]) want = i;
        assert_int_equal(nb_sampler_sample(sm, l), want);
    }
    free(l);
    nb_sampler_free(sm);
}

/* ---- determinism ---------------------------------------------------------- */

static void run_seq(uint64_t seed, bool has_seed, int32_t *out, int n_draws, int32_t top_k,
                    float top_p) {
    const int32_t n = 50;
    nb_sampling s = params(1.0f, seed);
    s.has_seed = has_seed;
    s.top_k = top_k;
    s.top_p = top_p;
    nb_sampler *sm = make(&s, n);
    float base[50], buf[50];
    for (int32_t i = 0; i < n; i++) base[i] = (float)((i * 7) % 13) * 0.3f;
    for (int d = 0; d < n_draws; d++) {
        memcpy(buf, base, sizeof buf);
        out[d] = nb_sampler_sample(sm, buf);
    }
    nb_sampler_free(sm);
}

static void test_seed_determinism(void **state) {
    (void)state;
    enum { N = 1000 };
    static int32_t a[N], b[N], c[N];
    const int32_t ks[] = {0, 10};
    const float ps[] = {1.0f, 0.9f};
    for (int v = 0; v < 2; v++) {
        run_seq(1234, true, a, N, ks[v], ps[v]);
        run_seq(1234, true, b, N, ks[v], ps[v]);
        run_seq(1235, true, c, N, ks[v], ps[v]);
        assert_memory_equal(a, b, sizeof a);
        int diff = 0;
        for (int i = 0; i < N; i++) diff += a[i] != c[i];
        assert_true(diff > N / 2); /* a 50-way draw: ~900 expected to differ */
    }
    /* no seed: drawn per sampler, so two samplers differ */
    run_seq(0, false, a, N, 0, 1.0f);
    run_seq(0, false, b, N, 0, 1.0f);
    int diff = 0;
    for (int i = 0; i < N; i++) diff += a[i] != b[i];
    assert_true(diff > N / 2);
}

/* ---- distributions -------------------------------------------------------- */

static void test_temperature_chi_square(void **state) {
    (void)state;
    const float logits[8] = {0.5f, 1.0f, -0.3f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f};
    const float temps[] = {1.0f, 0.7f, 1.8f};
    const int draws = 40000;
    for (int t = 0; t < 3; t++) {
        nb_sampling s = params(temps[t], 2024 + (uint64_t)t);
        nb_sampler *sm = make(&s, 8);
        long counts[8];
        double p[8];
        draw_counts(sm, logits, 8, draws, counts);
        softmax_ref(logits, 8, temps[t], NULL, p);
        int dof;
        double chi = chi_square(counts, p, 8, draws, &dof);
        printf("temperature %.1f: chi2 %.2f (dof %d, critical %.2f)\n", temps[t], chi, dof,
               CHI2_999[dof]);
        assert_true(chi < CHI2_999[dof]);
        nb_sampler_free(sm);
    }
}

static void test_top_k_distribution(void **state) {
    (void)state;
    const float logits[8] = {0.5f, 1.0f, -0.3f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f};
    /* top 4: ids 3 (2.0), 5 (1.5), 1 (1.0), 7 (0.7) */
    const bool mask[8] = {false, true, false, true, false, true, false, true};
    nb_sampling s = params(1.2f, 5);
    s.top_k = 4;
    nb_sampler *sm = make(&s, 8);
    const int draws = 30000;
    long counts[8];
    double p[8];
    draw_counts(sm, logits, 8, draws, counts);
    softmax_ref(logits, 8, 1.2, mask, p);
    int dof;
    double chi = chi_square(counts, p, 8, draws, &dof);
    assert_int_equal(dof, 3);
    assert_true(chi < CHI2_999[dof]);
    nb_sampler_free(sm);

    /* ties at the k-th place: exactly k kept, the lower id wins */
    const float tied[5] = {1.0f, 2.0f, 1.0f, 1.0f, 0.0f};
    s.top_k = 2;
    sm = make(&s, 5);
    long c5[5];
    draw_counts(sm, tied, 5, 4000, c5);
    assert_true(c5[1] > 0 && c5[0] > 0);
    assert_int_equal(c5[2] + c5[3] + c5[4], 0);
    nb_sampler_free(sm);
}

static void test_top_p_set(void **state) {
    (void)state;
    /* probabilities 0.1, 0.4, 0.2, 0.3 (ids 0..3); descending 0.4, 0.3, 0.2, 0.1;
     * cumulative 0.4, 0.7, 0.9, 1.0 */
    const float logits[4] = {logf(0.1f), logf(0.4f), logf(0.2f), logf(0.3f)};
    const struct {
        float top_p;
        bool keep[4];
    } cases[] = {
        {0.35f, {false, true, false, false}}, /* 0.4 >= 0.35 */
        {0.65f, {false, true, false, true}},  /* 0.7 >= 0.65 */
        {0.80f, {false, true, true, true}},   /* 0.9 >= 0.8 */
        {0.95f, {true, true, true, true}},
        {1e-6f, {false, true, false, false}}, /* at least one token */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_sampling s = params(1.0f, 11 + c);
        s.top_p = cases[c].top_p;
        nb_sampler *sm = make(&s, 4);
        const int draws = 20000;
        long counts[4];
        double p[4];
        draw_counts(sm, logits, 4, draws, counts);
        for (int i = 0; i < 4; i++) assert_true((counts[i] > 0) == cases[c].keep[i]);
        softmax_ref(logits, 4, 1.0, cases[c].keep, p);
        int dof;
        double chi = chi_square(counts, p, 4, draws, &dof);
        if (dof > 0) assert_true(chi < CHI2_999[dof]);
        nb_sampler_free(sm);
    }
}

/* A large vocabulary where the nucleus spans many chunks of the partial
 * selection: the set is computed here by a full sort in double. */
static int cmp_desc_idx(const void *a, const void *b, void *ctx) {
    const float *l = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (l[i] != l[j]) return l[i] > l[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

/* The kept set for (top_k, top_p) at temperature t, by a full sort in
 * double here: keep[i] is set for members; returns the set's size. */
static int32_t expected_set(const float *l, const int32_t *order, int32_t n, int32_t k,
                            double top_p, double t, bool *keep, double *p) {
    if (k <= 0 || k > n) k = n;
    double mx = l[order[0]], z = 0.0, acc = 0.0;
    for (int32_t i = 0; i < k; i++) z += exp(((double)l[order[i]] - mx) / t);
    int32_t m = 0;
    while (m < k && acc < top_p * z) acc += exp(((double)l[order[m++]] - mx) / t);
    memset(keep, 0, (size_t)n * sizeof(bool));
    memset(p, 0, (size_t)n * sizeof(double));
    for (int32_t i = 0; i < m; i++) {
        keep[order[i]] = true;
        p[order[i]] = exp(((double)l[order[i]] - mx) / t) / acc;
    }
    return m;
}

/* Large vocabularies through every selection path (heap top_k, quickselect
 * top_k beyond the heap limit, nucleus with and without top_k); the sets
 * come from a full sort done here. */
static void test_top_p_large_vocab(void **state) {
    (void)state;
    const int32_t n = 6000;
    float *l = malloc((size_t)n * sizeof(float));
    int32_t *order = malloc((size_t)n * sizeof(int32_t));
    bool *keep = malloc((size_t)n * sizeof(bool));
    double *p = malloc((size_t)n * sizeof(double));
    long *counts = malloc((size_t)n * sizeof(long));
    assert_true(l && order && keep && p && counts);
    const struct {
        int shape; /* 0: a few hundred plausible tokens + flat tail; 1: flat */
        int32_t k;
        float top_p, temp;
        int32_t min_set; /* the set must be at least this big to test much */
    } cfg[] = {
        /* k > 4096 (NB_SAMPLER_HEAP_K_MAX) takes the quickselect path */
        {0, 0, 0.9f, 0.9f, 30},      {0, 50, 0.9f, 0.9f, 20},     {0, 150, 1.0f, 1.0f, 150},
        {1, 4500, 1.0f, 1.0f, 4500}, {1, 5000, 0.5f, 1.0f, 1500}, {1, 0, 0.3f, 0.5f, 500},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        nb_rng r;
        nb_rng_seed(&r, 3);
        for (int32_t i = 0; i < n; i++) {
            if (cfg[c].shape == 0)
                l[i] = (i % 97 == 0) ? (float)(nb_rng_uniform(&r) * 3.0 + 2.0)
                                     : (float)(nb_rng_uniform(&r) * 2.0 - 6.0);
            else
                l[i] = (float)nb_rng_uniform(&r);
            order[i] = i;
        }
        qsort_r(order, (size_t)n, sizeof(int32_t), cmp_desc_idx, l);
        int32_t m = expected_set(l, order, n, cfg[c].k, cfg[c].top_p, cfg[c].temp, keep, p);
        assert_true(m >= cfg[c].min_set);

        nb_sampling s = params(cfg[c].temp, 77 + c);
        s.top_k = cfg[c].k;
        s.top_p = cfg[c].top_p;
        nb_sampler *sm = make(&s, n);
        const int draws = 8000;
        draw_counts(sm, l, n, draws, counts);
        int32_t likely = 0, hit = 0, distinct = 0;
        double want_distinct = 0.0;
        for (int32_t i = 0; i < n; i++) {
            if (!keep[i]) assert_int_equal(counts[i], 0);
            distinct += counts[i] > 0;
            want_distinct += 1.0 - exp(-(double)draws * p[i]); /* E[#drawn at least once] */
            if (p[i] * draws >= 15.0) { /* P(0 hits) < 4e-7 */
                likely++;
                hit += counts[i] > 0;
            }
        }
        printf("large vocab k=%d top_p=%.2f: set of %d, %d drawn (expected %.0f)\n",
               (int)cfg[c].k, (double)cfg[c].top_p, (int)m, (int)distinct, want_distinct);
        assert_int_equal(hit, likely);
        assert_true(fabs(distinct - want_distinct) < 0.03 * want_distinct + 3.0);
        nb_sampler_free(sm);
    }
    free(l);
    free(order);
    free(keep);
    free(p);
    free(counts);
}

/* Many random small cases with heavily tied logits (few distinct values),
 * so that an off-by-one anywhere in the selection admits a token as likely
 * as the kept ones: nothing outside the set computed here may be drawn. */
static void test_random_sets(void **state) {
    (void)state;
    enum { NMAX = 120 };
    float l[NMAX];
    int32_t order[NMAX];
    bool keep[NMAX];
    double p[NMAX];
    long counts[NMAX];
    nb_rng g;
    nb_rng_seed(&g, 2718);
    for (int trial = 0; trial < 150; trial++) {
        int32_t n = 17 + (int32_t)(nb_rng_next(&g) % (NMAX - 16));
        for (int32_t i = 0; i < n; i++) {
            l[i] = -0.5f * (float)(nb_rng_next(&g) % 4);
            order[i] = i;
        }
        qsort_r(order, (size_t)n, sizeof(int32_t), cmp_desc_idx, l);
        nb_sampling s = params(1.0f, 1000 + (uint64_t)trial);
        if (trial % 3 != 1) s.top_p = (float)(0.05 + 0.9 * nb_rng_uniform(&g));
        if (trial % 3 != 0) s.top_k = 1 + (int32_t)(nb_rng_next(&g) % (uint64_t)n);
        int32_t m = expected_set(l, order, n, s.top_k, s.top_p, 1.0, keep, p);
        nb_sampler *sm = make(&s, n);
        draw_counts(sm, l, n, 25 * m + 50, counts);
        for (int32_t i = 0; i < n; i++) {
            if (!keep[i] && counts[i] != 0)
                fprintf(stderr, "trial %d: n %d top_k %d top_p %g: token %d drawn, not in the set of %d\n",
                        trial, (int)n, (int)s.top_k, (double)s.top_p, (int)i, (int)m);
            assert_true(keep[i] || counts[i] == 0);
        }
        nb_sampler_free(sm);
    }
}

/* Exact ties decide set membership by id (lower first) in every selection
 * path, and the nucleus boundary is exact: an off-by-one there would admit
 * a token of the same weight as the kept ones, which would then be drawn. */
static void test_ties_in_selection(void **state) {
    (void)state;
    /* 100 tokens: 20 heavy (logit 0, weight 1) at scattered ids, 80 light
     * (weight ~0.25); Z ~ 40, top_p 0.44 -> target 17.6 -> exactly the 18
     * heavy tokens with the lowest ids */
    enum { N = 100 };
    float l[N];
    int32_t heavy[20];
    for (int i = 0; i < N; i++) l[i] = logf(0.25f);
    for (int j = 0; j < 20; j++) {
        heavy[j] = (j * 37 + 11) % N; /* 37 is coprime to 100: distinct */
        l[heavy[j]] = 0.0f;
    }
    bool keep[N] = {false};
    int kept = 0;
    for (int i = 0; i < N && kept < 18; i++)
        if (l[i] == 0.0f) {
            keep[i] = true;
            kept++;
        }
    nb_sampling s = params(1.0f, 9);
    s.top_p = 0.44f;
    nb_sampler *sm = make(&s, N);
    long counts[N];
    draw_counts(sm, l, N, 4000, counts); /* ~222 draws per kept token */
    for (int i = 0; i < N; i++) assert_true((counts[i] > 0) == keep[i]);
    nb_sampler_free(sm);

    /* quickselect top_k (k > NB_SAMPLER_HEAP_K_MAX) over all-equal logits:
     * the kept ones are ids 0..k-1 */
    const int32_t n = 6000, k = 4500;
    float *flat = calloc((size_t)n, sizeof(float));
    long *c2 = malloc((size_t)n * sizeof(long));
    assert_true(flat && c2);
    s = params(1.0f, 10);
    s.top_k = k;
    sm = make(&s, n);
    draw_counts(sm, flat, n, 3000, c2);
    long inside = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i >= k) assert_int_equal(c2[i], 0);
        else inside += c2[i];
    }
    assert_int_equal(inside, 3000);
    nb_sampler_free(sm);
    free(flat);
    free(c2);
}

static void test_min_p(void **state) {
    (void)state;
    /* p = 0.5, 0.25, 0.15, 0.1 at T = 1; min_p 0.25 -> threshold 0.125:
     * keep ids 0, 1, 2 */
    const float logits[4] = {logf(0.5f), logf(0.25f), logf(0.15f), logf(0.1f)};
    const bool keep[4] = {true, true, true, false};
    for (int variant = 0; variant < 2; variant++) {
        nb_sampling s = params(1.0f, 31);
        s.min_p = 0.25f;
        if (variant == 1) s.top_k = 3; /* same set through the candidate path */
        nb_sampler *sm = make(&s, 4);
        const int draws = 20000;
        long counts[4];
        double p[4];
        draw_counts(sm, logits, 4, draws, counts);
        softmax_ref(logits, 4, 1.0, keep, p);
        int dof;
        double chi = chi_square(counts, p, 4, draws, &dof);
        assert_int_equal(dof, 2);
        assert_true(chi < CHI2_999[dof]);
        nb_sampler_free(sm);
    }
    /* min_p acts on the tempered distribution: at T = 2 the probabilities
     * become proportional to sqrt(p): 0.707, 0.5, 0.387, 0.316 of which the
     * max is 0.707, so 0.5 * 0.707 = 0.354 keeps ids 0, 1, 2 and drops 3 */
    nb_sampling s = params(2.0f, 32);
    s.min_p = 0.5f;
    nb_sampler *sm = make(&s, 4);
    long counts[4];
    draw_counts(sm, logits, 4, 20000, counts);
    assert_true(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
    assert_int_equal(counts[3], 0);
    nb_sampler_free(sm);
}

/* ---- penalties ------------------------------------------------------------ */

/* With greedy sampling the logits array holds the penalised logits after
 * the call (nothing else is written), which lets us check exact values. */
static void test_repetition_penalty(void **state) {
    (void)state;
    nb_sampling s = params(0.0f, 1);
    s.repetition_penalty = 1.25f;
    nb_sampler *sm = make(&s, 6);
    const int32_t prompt[] = {0, 1, 1, 99, -3}; /* out-of-range ids ignored */
    nb_sampler_set_prompt(sm, prompt, 5);
    float l[6] = {2.0f, -1.0f, 0.5f, 1.9f, -2.0f, 0.0f};
    /* 0: 2.0 / 1.25 = 1.6 < 1.9 -> argmax moves to 3 */
    assert_int_equal(nb_sampler_sample(sm, l), 3);
    assert_true(l[0] == 2.0f / 1.25f);
    assert_true(l[1] == -1.0f * 1.25f);
    assert_true(l[2] == 0.5f && l[3] == 1.9f && l[4] == -2.0f && l[5] == 0.0f);
    /* now 3 was generated: it is penalised too (prompt + generated) */
    float l2[6] = {2.0f, -1.0f, 0.5f, 1.9f, -2.0f, 0.0f};
    assert_int_equal(nb_sampler_sample(sm, l2), 0); /* 1.6 > 1.9/1.25 = 1.52 */
    assert_true(l2[3] == 1.9f / 1.25f);
    assert_true(l2[0] == 2.0f / 1.25f); /* once per token, not per occurrence */
    nb_sampler_free(sm);
}

static void test_frequency_presence_penalty(void **state) {
    (void)state;
    /* generated: 3, 3, 1 (counts 3 -> 2, 1 -> 1); prompt token 4 */
    const int32_t prompt[] = {4};
    const float f = 0.5f, pr = 0.25f, rp = 2.0f;
    struct {
        float f, p, rp;
        float want[5];
    } cases[] = {
        /* frequency: l - f * count */
        {f, 0.0f, 1.0f, {1.0f, 1.0f - f * 1, 1.0f, 1.0f - f * 2, 1.0f}},
        /* presence: l - p if count > 0; the prompt token is untouched */
        {0.0f, pr, 1.0f, {1.0f, 1.0f - pr, 1.0f, 1.0f - pr, 1.0f}},
        /* all three: repetition first (1 / 2 = 0.5; prompt token 4 too), then
         * frequency, then presence */
        {f, pr, rp, {1.0f, 0.5f - f * 1 - pr, 1.0f, 0.5f - f * 2 - pr, 0.5f}},
        /* negative penalties encourage repetition */
        {-f, -pr, 1.0f, {1.0f, 1.0f + f + pr, 1.0f, 1.0f + 2 * f + pr, 1.0f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_sampling s = params(0.0f, 1);
        s.frequency_penalty = cases[c].f;
        s.presence_penalty = cases[c].p;
        s.repetition_penalty = cases[c].rp;
        nb_sampler *sm = make(&s, 5);
        nb_sampler_set_prompt(sm, prompt, 1);
        nb_sampler_accept(sm, 3);
        nb_sampler_accept(sm, 3);
        nb_sampler_accept(sm, 1);
        nb_sampler_accept(sm, 5); /* out of range: ignored */
        assert_int_equal(nb_sampler_n_generated(sm), 3);
        float l[5] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
        nb_sampler_sample(sm, l);
        for (int i = 0; i < 5; i++) {
            if (l[i] != cases[c].want[i])
                fprintf(stderr, "case %zu token %d: got %g want %g\n", c, i, (double)l[i],
                        (double)cases[c].want[i]);
            assert_true(l[i] == cases[c].want[i]);
        }
        nb_sampler_free(sm);
    }
    /* the penalty applies before random sampling too: a token pushed far
     * down by frequency is never drawn */
    long counts[3] = {0};
    for (int d = 0; d < 300; d++) { /* fresh state per draw: draws are recorded too */
        nb_sampling s = params(1.0f, 3 + (uint64_t)d);
        s.frequency_penalty = 2.0f;
        nb_sampler *sm = make(&s, 3);
        for (int i = 0; i < 20; i++) nb_sampler_accept(sm, 0); /* 0: 5 - 40 = -35 */
        float l[3] = {5.0f, 0.0f, 0.0f};
        counts[nb_sampler_sample(sm, l)]++;
        nb_sampler_free(sm);
    }
    assert_true(counts[0] == 0 && counts[1] > 0 && counts[2] > 0);
}

/* ---- bans and degenerate logits ------------------------------------------ */

static void test_ban(void **state) {
    (void)state;
    nb_sampling s = params(0.0f, 1);
    nb_sampler *sm = make(&s, 70); /* two bitmap words */
    float base[70];
    for (int i = 0; i < 70; i++) base[i] = (float)i * 0.01f;
    float l[70];
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 69);
    nb_sampler_ban(sm, 69, true);
    nb_sampler_ban(sm, 69, true); /* idempotent */
    nb_sampler_ban(sm, 70, true); /* out of range: ignored */
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 68);
    nb_sampler_ban(sm, 69, false);
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 69);
    for (int i = 0; i < 70; i++) nb_sampler_ban(sm, i, true);
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), -1); /* everything banned */
    nb_sampler_ban(sm, 65, false);
    for (int i = 0; i < 70; i++) l[i] = -INFINITY;
    assert_int_equal(nb_sampler_sample(sm, l), 65); /* lowest non-banned */
    nb_sampler_free(sm);

    /* random sampling never draws a banned token */
    s = params(1.0f, 8);
    s.top_p = 0.99f;
    sm = make(&s, 4);
    nb_sampler_ban(sm, 2, true);
    const float lr[4] = {0.0f, 0.0f, 3.0f, 0.0f};
    long counts[4];
    draw_counts(sm, lr, 4, 3000, counts);
    assert_int_equal(counts[2], 0);
    assert_true(counts[0] > 0 && counts[1] > 0 && counts[3] > 0);
    nb_sampler_free(sm);
}

/* logit_bias: added to the raw logits before the penalties; -100 moves the
 * argmax away, +100 onto a token; a repeated id adds both entries; bad
 * entries are refused naming the id or value; n = 0 clears it. */
static void test_logit_bias(void **state) {
    (void)state;
    nb_sampling s = params(0.0f, 1);
    s.repetition_penalty = 2.0f; /* after the bias: 3 - 2.5 = 0.5 > 0, so 0.5 / 2 */
    nb_sampler *sm = make(&s, 5);
    const float base[5] = {1.0f, 2.0f, 3.0f, 0.5f, 0.4f};
    float l[5];
    const int32_t ids[3] = {2, 4, 4};
    const float b[3] = {-2.5f, 0.5f, 0.6f};
    assert_int_equal(nb_sampler_set_logit_bias(sm, ids, b, 3), NB_OK);
    int32_t prompt[1] = {2};
    nb_sampler_set_prompt(sm, prompt, 1);
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 1);
    assert_true(fabsf(l[2] - 0.25f) < 1e-6f); /* bias, then the repetition penalty */
    assert_true(fabsf(l[4] - 1.5f) < 1e-6f);  /* both entries of id 4 */
    const int32_t up[1] = {3};
    const float hundred[1] = {100.0f};
    assert_int_equal(nb_sampler_set_logit_bias(sm, up, hundred, 1), NB_OK); /* replaces the earlier set */
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 3);
    assert_int_equal(nb_sampler_set_logit_bias(sm, NULL, NULL, 0), NB_OK);
    memcpy(l, base, sizeof l);
    assert_int_equal(nb_sampler_sample(sm, l), 2); /* no bias; penalised: 2 (prompt) 3/2 = 1.5, 1 (generated) 2/2 = 1 */

    const int32_t bad_id[1] = {5};
    assert_int_equal(nb_sampler_set_logit_bias(sm, bad_id, hundred, 1), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "token id 5 outside 0..4"));
    const float over[1] = {100.5f}, nan1[1] = {NAN};
    assert_int_equal(nb_sampler_set_logit_bias(sm, up, over, 1), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "logit_bias[3]: 100.5 outside [-100, 100]"));
    assert_int_equal(nb_sampler_set_logit_bias(sm, up, nan1, 1), NB_ERR_RANGE);
    assert_int_equal(nb_logit_bias_validate(up, NULL, 1, 5), NB_ERR_INVALID);
    nb_sampler_free(sm);
}

static void test_degenerate_logits(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        nb_sampling s = params(1.0f, 4);
        if (variant) s.top_k = 2;
        nb_sampler *sm = make(&s, 5);
        float a[5] = {NAN, 0.0f, NAN, 0.0f, -INFINITY};
        long hits[5] = {0};
        for (int i = 0; i < 500; i++) {
            float b[5];
            memcpy(b, a, sizeof b);
            hits[nb_sampler_sample(sm, b)]++;
        }
        assert_true(hits[0] == 0 && hits[2] == 0 && hits[4] == 0);
        assert_true(hits[1] > 0 && hits[3] > 0);
        float c[5] = {0.0f, INFINITY, 1.0f, INFINITY, NAN};
        assert_int_equal(nb_sampler_sample(sm, c), 1);
        float d[5] = {NAN, NAN, -INFINITY, NAN, -INFINITY};
        assert_int_equal(nb_sampler_sample(sm, d), 0);
        nb_sampler_free(sm);
    }
}

/* ---- validation ----------------------------------------------------------- */

static void test_validate(void **state) {
    (void)state;
    nb_sampling s;
    nb_sampling_defaults(&s);
    assert_true(s.temperature == 1.0f && s.top_k <= 0 && s.top_p == 1.0f && s.min_p == 0.0f &&
                s.repetition_penalty == 1.0f && s.presence_penalty == 0.0f &&
                s.frequency_penalty == 0.0f && !s.has_seed);
    assert_int_equal(nb_sampling_validate(&s), NB_OK);

#define FIELD_F(name) offsetof(nb_sampling, name), #name
    const struct {
        size_t off;
        const char *name;
        float bad[3];
        float good[3];
    } fcases[] = {
        {FIELD_F(temperature), {-0.01f, 2.01f, NAN}, {0.0f, 2.0f, 0.7f}},
        {FIELD_F(top_p), {0.0f, 1.01f, NAN}, {1.0f, 1e-6f, 0.5f}},
        {FIELD_F(min_p), {-0.01f, 1.01f, NAN}, {0.0f, 1.0f, 0.05f}},
        {FIELD_F(repetition_penalty), {0.0f, 2.01f, NAN}, {2.0f, 0.01f, 1.0f}},
        {FIELD_F(presence_penalty), {-2.01f, 2.01f, NAN}, {-2.0f, 2.0f, 0.0f}},
        {FIELD_F(frequency_penalty), {-2.01f, 2.01f, INFINITY}, {-2.0f, 2.0f, 0.0f}},
    };
#undef FIELD_F
    for (size_t c = 0; c < sizeof fcases / sizeof fcases[0]; c++) {
        for (int k = 0; k < 3; k++) {
            nb_sampling_defaults(&s);
            memcpy((char *)&s + fcases[c].off, &fcases[c].bad[k], sizeof(float));
            assert_int_equal(nb_sampling_validate(&s), NB_ERR_RANGE);
            const char *msg = nb_errmsg();
            if (!strstr(msg, fcases[c].name) || !strstr(msg, "allowed"))
                fprintf(stderr, "bad message for %s: %s\n", fcases[c].name, msg);
            assert_non_null(strstr(msg, fcases[c].name));
            assert_non_null(strstr(msg, "allowed"));
            nb_sampler *sm = NULL;
            assert_int_equal(nb_sampler_create(&s, 10, &sm), NB_ERR_RANGE);
            assert_null(sm);

            nb_sampling_defaults(&s);
            memcpy((char *)&s + fcases[c].off, &fcases[c].good[k], sizeof(float));
            assert_int_equal(nb_sampling_validate(&s), NB_OK);
        }
    }
    /* a message names the parameter, not a neighbour that shares a prefix */
    nb_sampling_defaults(&s);
    s.top_p = 2.0f;
    assert_int_equal(nb_sampling_validate(&s), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "top_p"));
    assert_non_null(strstr(nb_errmsg(), "(0, 1]"));

    const int32_t bad_k[] = {-2, -100, INT32_MIN};
    const int32_t good_k[] = {-1, 0, 1, 40, INT32_MAX};
    for (int k = 0; k < 3; k++) {
        nb_sampling_defaults(&s);
        s.top_k = bad_k[k];
        assert_int_equal(nb_sampling_validate(&s), NB_ERR_RANGE);
        assert_non_null(strstr(nb_errmsg(), "top_k"));
    }
    for (int k = 0; k < 5; k++) {
        nb_sampling_defaults(&s);
        s.top_k = good_k[k];
        assert_int_equal(nb_sampling_validate(&s), NB_OK);
    }
    /* seed: any value */
    nb_sampling_defaults(&s);
    s.seed = UINT64_MAX;
    s.has_seed = true;
    assert_int_equal(nb_sampling_validate(&s), NB_OK);
    nb_sampler *sm = NULL;
    assert_int_equal(nb_sampler_create(&s, 10, &sm), NB_OK);
    assert_true(nb_sampler_seed(sm) == UINT64_MAX);
    nb_sampler_free(sm);
    sm = NULL;
    assert_int_equal(nb_sampler_create(&s, 0, &sm), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "n_vocab"));
    assert_null(sm);
}

/* ---- log-softmax utilities ------------------------------------------------ */

static void test_logsumexp(void **state) {
    (void)state;
    /* direct double-precision sum where it cannot overflow */
    enum { N = 1000 };
    static float l[N];
    nb_rng r;
    nb_rng_seed(&r, 5);
    double direct = 0.0;
    for (int i = 0; i < N; i++) {
        l[i] = (float)(nb_rng_uniform(&r) * 40.0 - 20.0);
        direct += exp((double)l[i]);
    }
    assert_true(fabs(nb_logsumexp(l, N) - log(direct)) < 1e-12 * fabs(log(direct)) + 1e-12);
    /* huge: direct exp overflows; by hand log(e^a + e^b) = a + log(1 + e^(b-a)) */
    const float big[3] = {1000.0f, 999.0f, 1000.0f};
    assert_true(fabs(nb_logsumexp(big, 3) - (1000.0 + log(2.0 + exp(-1.0)))) < 1e-10);
    const float big2[2] = {3.0e38f, 3.0e38f};
    double lbig2 = nb_logsumexp(big2, 2); /* no overflow to inf */
    assert_true(isfinite(lbig2) && fabs(lbig2 - ((double)big2[0] + log(2.0))) <= 3.0e38 * 1e-15);
    /* tiny: direct exp underflows to 0 */
    const float small[2] = {-1000.0f, -1000.5f};
    assert_true(fabs(nb_logsumexp(small, 2) - (-1000.0 + log(1.0 + exp(-0.5)))) < 1e-10);
    /* one dominant logit and far-away ones */
    const float mixed[3] = {50.0f, -1.0e30f, -INFINITY};
    assert_true(fabs(nb_logsumexp(mixed, 3) - 50.0) < 1e-12);
    /* special values */
    const float inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    assert_true(isinf(nb_logsumexp(inf, 3)) && nb_logsumexp(inf, 3) < 0);
    assert_true(isinf(nb_logsumexp(l, 0)) && nb_logsumexp(l, 0) < 0);
    const float pinf[2] = {1.0f, INFINITY};
    assert_true(isinf(nb_logsumexp(pinf, 2)) && nb_logsumexp(pinf, 2) > 0);
    const float nan[2] = {1.0f, NAN};
    assert_true(isnan(nb_logsumexp(nan, 2)));

    /* log_softmax: exp sums to 1 and differences are preserved */
    static float ls[N];
    nb_log_softmax(l, N, ls);
    double s = 0.0;
    for (int i = 0; i < N; i++) s += exp((double)ls[i]);
    assert_true(fabs(s - 1.0) < 1e-5);
    assert_true(fabs((double)ls[3] - (double)ls[7] - ((double)l[3] - (double)l[7])) < 1e-5);
    float b2[3];
    nb_log_softmax(big, 3, b2);
    assert_true(fabs((double)b2[0] - (-log(2.0 + exp(-1.0)))) < 1e-6);
}

static int cmp_pair(const void *a, const void *b, void *ctx) {
    const float *l = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    bool ni = isnan(l[i]), nj = isnan(l[j]);
    if (ni != nj) return ni ? 1 : -1;
    if (!ni && l[i] != l[j]) return l[i] > l[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

static void test_top_k_util(void **state) {
    (void)state;
    const float l[8] = {1.0f, 5.0f, 3.0f, 5.0f, NAN, 3.0f, -INFINITY, 2.0f};
    int32_t ids[8];
    float vals[8];
    nb_top_k(l, 8, 5, ids, vals);
    const int32_t want[5] = {1, 3, 2, 5, 7};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ids[i], want[i]);
        assert_true(vals[i] == l[want[i]]);
    }
    nb_top_k(l, 8, 8, ids, vals); /* k = n: a full order, NaN last */
    const int32_t all[8] = {1, 3, 2, 5, 7, 0, 6, 4};
    for (int i = 0; i < 8; i++) assert_int_equal(ids[i], all[i]);
    ids[0] = -7;
    nb_top_k(l, 8, 0, ids, vals);
    assert_int_equal(ids[0], -7); /* k = 0 writes nothing */

    /* random with many ties against a full sort done here */
    enum { N = 5000, K = 64 };
    static float r[N];
    static int32_t order[N], got[K];
    static float gv[K];
    nb_rng g;
    nb_rng_seed(&g, 17);
    for (int i = 0; i < N; i++) {
        r[i] = (float)(int)(nb_rng_uniform(&g) * 200.0); /* ~25 copies of each */
        order[i] = i;
    }
    qsort_r(order, N, sizeof(int32_t), cmp_pair, r);
    const int32_t ks[] = {1, 7, K};
    for (int t = 0; t < 3; t++) {
        nb_top_k(r, N, ks[t], got, gv);
        for (int i = 0; i < ks[t]; i++) {
            assert_int_equal(got[i], order[i]);
            assert_true(gv[i] == r[order[i]]);
        }
    }
}

/* Big vocabulary: every path runs at 256k and returns plausible ids. */
static void test_large_vocab_paths(void **state) {
    (void)state;
    const int32_t n = 256000;
    float *base = malloc((size_t)n * sizeof(float));
    float *l = malloc((size_t)n * sizeof(float));
    assert_true(base && l);
    nb_rng g;
    nb_rng_seed(&g, 21);
    for (int32_t i = 0; i < n; i++) base[i] = (float)(nb_rng_uniform(&g) * 10.0 - 10.0);
    /* the tail holds about n * (1 - e^-10) / 10 = 25600 in e^x units, so
     * e^12 = 162755 is about 0.86 of the mass */
    base[123456] = 12.0f;
    const struct {
        int32_t k;
        float p, minp;
        bool pen;
    } cfg[] = {{0, 1.0f, 0.0f, true},   {40, 1.0f, 0.0f, true},  {0, 0.3f, 0.0f, false},
               {0, 0.95f, 0.0f, true},  {100, 0.9f, 0.0f, true}, {0, 1.0f, 0.1f, false},
               {n, 1.0f, 0.0f, false},  {0, 0.999f, 0.0f, false}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        nb_sampling s = params(1.0f, 40 + c);
        s.top_k = cfg[c].k;
        s.top_p = cfg[c].p;
        s.min_p = cfg[c].minp;
        if (cfg[c].pen) {
            s.repetition_penalty = 1.1f;
            s.frequency_penalty = 0.1f;
        }
        nb_sampler *sm = make(&s, n);
        int hits = 0;
        for (int d = 0; d < 20; d++) {
            memcpy(l, base, (size_t)n * sizeof(float));
            int32_t id = nb_sampler_sample(sm, l);
            assert_true(id >= 0 && id < n);
            hits += id == 123456;
        }
        /* top_p 0.3 and min_p 0.1 (every other token is below 0.1 * p_max)
         * leave only the dominant token */
        if (cfg[c].p == 0.3f || cfg[c].minp > 0.0f) assert_int_equal(hits, 20);
        nb_sampler_free(sm);
    }
    free(base);
    free(l);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* progress lines appear as they happen */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_vectors),
        cmocka_unit_test(test_greedy_argmax_ties),
        cmocka_unit_test(test_top_k1_is_greedy),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_temperature_chi_square),
        cmocka_unit_test(test_top_k_distribution),
        cmocka_unit_test(test_top_p_set),
        cmocka_unit_test(test_top_p_large_vocab),
        cmocka_unit_test(test_ties_in_selection),
        cmocka_unit_test(test_random_sets),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_frequency_presence_penalty),
        cmocka_unit_test(test_ban),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_degenerate_logits),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_logsumexp),
        cmocka_unit_test(test_top_k_util),
        cmocka_unit_test(test_large_vocab_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
