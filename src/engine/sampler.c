/* The sampler (see sampler.h for the contract, docs/sampling.md for the
 * semantics). Implementation notes:
 *
 * - Penalty state is a bitmap of prompt tokens, a bitmap of generated
 *   tokens and a per-token count of generated tokens; the penalties walk
 *   the set bits (64 tokens per word), so their cost is n_vocab/64 word
 *   tests plus the number of distinct tokens seen, not n_vocab.
 * - Plain temperature sampling (with or without min_p) needs no buffer: the
 *   weights exp((l - max) / T) are written over the logits and one uniform
 *   draw is scanned against their running sum.
 * - top_k up to NB_SAMPLER_HEAP_K_MAX keeps a heap of k (logit, id) pairs
 *   while scanning the logits (one comparison for most tokens); a larger
 *   top_k, or top_p alone, gathers the surviving pairs into an n_vocab
 *   buffer and uses quickselect (nth_element-like; total order: logit
 *   descending, id ascending). Nothing is fully sorted.
 * - top_p first drops every token whose probability is <= (1 - top_p) / N:
 *   such a token can never be in the nucleus (the tail from the nucleus'
 *   last token onwards has mass > 1 - top_p spread over at most N tokens,
 *   none more probable than that last one). The nucleus itself is then
 *   found by a weighted quickselect: partition, sum the weights of the
 *   better side, descend into the side where the cumulative mass crosses
 *   top_p. Expected O(N). Since sampling within the kept set does not
 *   depend on order, the set is all that is needed. */
#include "engine/sampler.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "engine/rng.h"

typedef struct nb_cand {
    float l;    /* penalised logit: the sort key */
    float w;    /* exp((l - max) / T), once the set is known */
    int32_t id;
} nb_cand;

/* top_k up to this uses a heap of k entries instead of an n_vocab buffer
 * (unless top_p also needs the full buffer). */
#define NB_SAMPLER_HEAP_K_MAX 4096

struct nb_sampler {
    nb_sampling p;
    int32_t n_vocab;
    size_t n_words;         /* bitmap words: ceil(n_vocab / 64) */
    nb_rng rng;
    uint64_t seed;
    uint64_t n_generated;
    uint64_t *ban_bits;     /* always allocated */
    int32_t n_banned;
    uint64_t *prompt_bits;  /* repetition_penalty != 1 */
    uint64_t *out_bits;     /* any penalty on */
    uint32_t *counts;       /* presence/frequency penalty on; saturating */
    nb_cand *cand;          /* top_k or top_p on */
    size_t cand_cap;        /* top_k when the heap path is used, else n_vocab */
    int32_t *bias_ids;      /* logit_bias (nb_sampler_set_logit_bias), added to the raw logits */
    float *bias;
    size_t n_bias;
};

/* ---- parameters --------------------------------------------------------- */

void nb_sampling_defaults(nb_sampling *s) {
    memset(s, 0, sizeof *s);
    s->temperature = 1.0f;
    s->top_k = 0;
    s->top_p = 1.0f;
    s->min_p = 0.0f;
    s->repetition_penalty = 1.0f;
    s->presence_penalty = 0.0f;
    s->frequency_penalty = 0.0f;
    s->seed = 0;
    s->has_seed = false;
}

/* v in [lo, hi] (lo excluded when lo_open); NaN fails. */
static nb_status check_range(const char *name, float v, float lo, bool lo_open, float hi,
                             const char *note) {
    bool ok = lo_open ? (v > lo && v <= hi) : (v >= lo && v <= hi);
    if (ok) return NB_OK;
    return nb_fail(NB_ERR_RANGE, "%s: %g is out of range; allowed %c%g, %g]%s", name, (double)v,
                   lo_open ? '(' : '[', (double)lo, (double)hi, note);
}

nb_status nb_sampling_validate(const nb_sampling *s) {
    NB_TRY(check_range("temperature", s->temperature, 0.0f, false, NB_SAMPLING_TEMPERATURE_MAX,
                       " (0 = greedy)"));
    NB_TRY(check_range("top_p", s->top_p, 0.0f, true, 1.0f, " (1 = off)"));
    if (s->top_k < -1)
        return nb_fail(NB_ERR_RANGE, "top_k: %d is out of range; allowed -1 or 0 (off) or >= 1",
                       (int)s->top_k);
    NB_TRY(check_range("min_p", s->min_p, 0.0f, false, 1.0f, " (0 = off)"));
    NB_TRY(check_range("repetition_penalty", s->repetition_penalty, 0.0f, true, 2.0f,
                       " (1 = off)"));
    NB_TRY(check_range("presence_penalty", s->presence_penalty, -2.0f, false, 2.0f, " (0 = off)"));
    NB_TRY(check_range("frequency_penalty", s->frequency_penalty, -2.0f, false, 2.0f,
                       " (0 = off)"));
    return NB_OK; /* seed: every uint64 value is valid */
}

/* ---- create / free ------------------------------------------------------ */

/* A seed nobody chose: getrandom(), else the clock and pid, always mixed
 * with a process-wide counter so two samplers created together differ. */
static uint64_t entropy_seed(void) {
    static atomic_uint_fast64_t counter;
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v;
    }
    uint64_t x = v ^ ((uint64_t)atomic_fetch_add(&counter, 1) * 0xd1b54a32d192ed03ULL);
    return nb_splitmix64(&x);
}

nb_status nb_sampler_create(const nb_sampling *s, int32_t n_vocab, nb_sampler **out) {
    *out = NULL;
    NB_TRY(nb_sampling_validate(s));
    if (n_vocab < 1)
        return nb_fail(NB_ERR_RANGE, "sampler: n_vocab %d is out of range; allowed 1..%d",
                       (int)n_vocab, (int)INT32_MAX);
    nb_sampler *sm = nb_calloc(1, sizeof *sm);
    if (!sm) return NB_ERR_NOMEM;
    sm->p = *s;
    sm->n_vocab = n_vocab;
    sm->n_words = ((size_t)n_vocab + 63) / 64;
    sm->seed = s->has_seed ? s->seed : entropy_seed();
    nb_rng_seed(&sm->rng, sm->seed);

    bool rep = s->repetition_penalty != 1.0f;
    bool pf = s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f;
    bool greedy = s->temperature < NB_SAMPLING_GREEDY_EPS;
    bool topk = s->top_k > 0 && s->top_k < n_vocab;
    bool topp = s->top_p < 1.0f;

    sm->ban_bits = nb_calloc(sm->n_words, sizeof(uint64_t));
    if (!sm->ban_bits) goto nomem;
    if (rep) {
        sm->prompt_bits = nb_calloc(sm->n_words, sizeof(uint64_t));
        if (!sm->prompt_bits) goto nomem;
    }
    if (rep || pf) {
        sm->out_bits = nb_calloc(sm->n_words, sizeof(uint64_t));
        if (!sm->out_bits) goto nomem;
    }
    if (pf) {
        sm->counts = nb_calloc((size_t)n_vocab, sizeof(uint32_t));
        if (!sm->counts) goto nomem;
    }
    if (!greedy && (topk || topp)) {
        sm->cand_cap = topk && s->top_k <= NB_SAMPLER_HEAP_K_MAX ? (size_t)s->top_k
                                                                  : (size_t)n_vocab;
        sm->cand = nb_malloc(sm->cand_cap * sizeof(nb_cand));
        if (!sm->cand) goto nomem;
    }
    *out = sm;
    return NB_OK;
nomem:
    nb_sampler_free(sm);
    return NB_ERR_NOMEM;
}

void nb_sampler_free(nb_sampler *sm) {
    if (!sm) return;
    free(sm->ban_bits);
    free(sm->prompt_bits);
    free(sm->out_bits);
    free(sm->counts);
    free(sm->cand);
    free(sm->bias_ids);
    free(sm->bias);
    free(sm);
}

uint64_t nb_sampler_seed(const nb_sampler *sm) { return sm->seed; }
uint64_t nb_sampler_n_generated(const nb_sampler *sm) { return sm->n_generated; }

/* ---- token bookkeeping -------------------------------------------------- */

static inline bool bit_get(const uint64_t *b, int32_t id) {
    return (b[(uint32_t)id >> 6] >> ((uint32_t)id & 63)) & 1;
}
static inline void bit_set(uint64_t *b, int32_t id) {
    b[(uint32_t)id >> 6] |= 1ULL << ((uint32_t)id & 63);
}
static inline void bit_clear(uint64_t *b, int32_t id) {
    b[(uint32_t)id >> 6] &= ~(1ULL << ((uint32_t)id & 63));
}

void nb_sampler_set_prompt(nb_sampler *sm, const int32_t *ids, size_t n) {
    if (!sm->prompt_bits) return;
    memset(sm->prompt_bits, 0, sm->n_words * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < sm->n_vocab) bit_set(sm->prompt_bits, ids[i]);
}

nb_status nb_logit_bias_validate(const int32_t *ids, const float *bias, size_t n, int32_t n_vocab) {
    if (n > NB_LOGIT_BIAS_MAX) return nb_fail(NB_ERR_RANGE, "logit_bias: %zu entries, at most %d", n, NB_LOGIT_BIAS_MAX);
    if (n && (!ids || !bias)) return nb_fail(NB_ERR_INVALID, "logit_bias: %zu entries announced, none given", n);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return nb_fail(NB_ERR_RANGE, "logit_bias: token id %d outside 0..%d", ids[i], n_vocab - 1);
        if (!(bias[i] >= -NB_LOGIT_BIAS_LIMIT && bias[i] <= NB_LOGIT_BIAS_LIMIT))
            return nb_fail(NB_ERR_RANGE, "logit_bias[%d]: %g outside [-%g, %g]", ids[i], (double)bias[i],
                           (double)NB_LOGIT_BIAS_LIMIT, (double)NB_LOGIT_BIAS_LIMIT);
    }
    return NB_OK;
}

nb_status nb_sampler_set_logit_bias(nb_sampler *sm, const int32_t *ids, const float *bias, size_t n) {
    NB_TRY(nb_logit_bias_validate(ids, bias, n, sm->n_vocab));
    int32_t *ni = NULL;
    float *nbv = NULL;
    if (n) {
        ni = nb_malloc(n * sizeof *ni);
        nbv = nb_malloc(n * sizeof *nbv);
        if (!ni || !nbv) {
            free(ni);
            free(nbv);
            return NB_ERR_NOMEM;
        }
        memcpy(ni, ids, n * sizeof *ni);
        memcpy(nbv, bias, n * sizeof *nbv);
    }
    free(sm->bias_ids);
    free(sm->bias);
    sm->bias_ids = ni;
    sm->bias = nbv;
    sm->n_bias = n;
    return NB_OK;
}

void nb_sampler_accept(nb_sampler *sm, int32_t id) {
    if (id < 0 || id >= sm->n_vocab) return;
    sm->n_generated++;
    if (sm->out_bits) bit_set(sm->out_bits, id);
    if (sm->counts && sm->counts[id] != UINT32_MAX) sm->counts[id]++;
}

void nb_sampler_ban(nb_sampler *sm, int32_t id, bool banned) {
    if (id < 0 || id >= sm->n_vocab) return;
    bool was = bit_get(sm->ban_bits, id);
    if (banned && !was) {
        bit_set(sm->ban_bits, id);
        sm->n_banned++;
    } else if (!banned && was) {
        bit_clear(sm->ban_bits, id);
        sm->n_banned--;
    }
}

/* Repetition (prompt + generated), then frequency, then presence
 * (generated only), in vLLM's order and with its formulas. */
static void apply_penalties(nb_sampler *sm, float *logits) {
    if (sm->prompt_bits) {
        const float rp = sm->p.repetition_penalty;
        for (size_t w = 0; w < sm->n_words; w++) {
            uint64_t bits = sm->prompt_bits[w] | sm->out_bits[w];
            while (bits) {
                int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
                bits &= bits - 1;
                float l = logits[id];
                logits[id] = l > 0.0f ? l / rp : l * rp;
            }
        }
    }
    if (sm->counts) {
        const float fp = sm->p.frequency_penalty, pp = sm->p.presence_penalty;
        for (size_t w = 0; w < sm->n_words; w++) {
            uint64_t bits = sm->out_bits[w];
            while (bits) {
                int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
                bits &= bits - 1;
                logits[id] -= fp * (float)sm->counts[id];
                logits[id] -= pp;
            }
        }
    }
}

static void apply_bans(const nb_sampler *sm, float *logits) {
    if (sm->n_banned == 0) return;
    for (size_t w = 0; w < sm->n_words; w++) {
        uint64_t bits = sm->ban_bits[w];
        while (bits) {
            int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
            bits &= bits - 1;
            logits[id] = -INFINITY;
        }
    }
}

/* Lowest non-banned id, for logits with no finite value; -1 if all banned. */
static int32_t first_allowed(const nb_sampler *sm) {
    for (size_t w = 0; w < sm->n_words; w++) {
        uint64_t free_bits = ~sm->ban_bits[w];
        if (free_bits) {
            int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(free_bits));
            return id < sm->n_vocab ? id : -1;
        }
    }
    return -1;
}

/* ---- candidate selection ------------------------------------------------ */

/* Total order: higher logit first, then lower id. */
static inline bool cand_better(const nb_cand *a, const nb_cand *b) {
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

static int cand_cmp_desc(const void *pa, const void *pb) {
    const nb_cand *a = pa, *b = pb;
    return cand_better(a, b) ? -1 : cand_better(b, a) ? 1 : 0;
}

static void cand_sort(nb_cand *c, size_t n) {
    if (n > 1) qsort(c, n, sizeof *c, cand_cmp_desc);
}

static inline void cand_swap(nb_cand *a, nb_cand *b) {
    nb_cand t = *a;
    *a = *b;
    *b = t;
}

/* Recursion budget for the quickselects: past it they sort what is left
 * (O(n log n)), so no input can make them quadratic. */
static int select_depth(size_t n) {
    int depth = 8;
    for (size_t m = n; m > 1; m >>= 1) depth += 2;
    return depth;
}

/* Partitions c[lo..hi) (hi - lo >= 3) around the median of its first,
 * middle and last elements; returns the pivot's final index p, with
 * c[lo..p) better and c(p..hi) worse than c[p]. The keys are distinct (ids
 * differ), so every split is strict. */
static size_t cand_partition(nb_cand *c, size_t lo, size_t hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cand_better(&c[mid], &c[lo])) cand_swap(&c[mid], &c[lo]);
    if (cand_better(&c[hi - 1], &c[lo])) cand_swap(&c[hi - 1], &c[lo]);
    if (cand_better(&c[hi - 1], &c[mid])) cand_swap(&c[hi - 1], &c[mid]);
    cand_swap(&c[mid], &c[hi - 1]); /* the median becomes the pivot */
    const nb_cand pivot = c[hi - 1];
    size_t store = lo;
    for (size_t i = lo; i < hi - 1; i++)
        if (cand_better(&c[i], &pivot)) cand_swap(&c[i], &c[store++]);
    cand_swap(&c[store], &c[hi - 1]);
    return store;
}

/* Rearranges c[0..n) so that c[0..k) hold the k best candidates, in no
 * particular order; 0 < k < n. Quickselect, expected O(n). */
static void cand_select(nb_cand *c, size_t n, size_t k) {
    size_t lo = 0, hi = n;
    int depth = select_depth(n);
    while (hi - lo > 16 && depth-- > 0) {
        size_t p = cand_partition(c, lo, hi);
        if (k == p || k == p + 1) return;
        if (k < p) hi = p;
        else lo = p + 1;
    }
    cand_sort(c + lo, hi - lo);
}

/* The k best tokens that pass the filters (finite, min_p) into c[0..nc),
 * nc <= k, through a heap whose root is the worst one kept: O(n log k), and
 * most tokens cost a single comparison with the root. */
static size_t heap_top_k(nb_cand *c, size_t k, const float *logits, int32_t n, float mx,
                         float inv_t, float lmin) {
    size_t nc = 0;
    for (int32_t i = 0; i < n; i++) {
        const float l = logits[i];
        if (!(l > -INFINITY)) continue; /* -inf (banned) and NaN */
        /* ids only grow, so an equal logit loses to the root too */
        if (nc == k && l <= c[0].l) continue;
        if ((l - mx) * inv_t < lmin) continue;
        const nb_cand x = {l, 0.0f, i};
        size_t j;
        if (nc < k) { /* sift up */
            j = nc++;
            while (j > 0 && cand_better(&c[(j - 1) / 2], &x)) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
        } else { /* replace the root, sift down */
            j = 0;
            for (;;) {
                size_t a = 2 * j + 1, b = a + 1, w;
                if (a >= k) break;
                w = (b < k && cand_better(&c[a], &c[b])) ? b : a; /* the worse child */
                if (!cand_better(&x, &c[w])) break;
                c[j] = c[w];
                j = w;
            }
        }
        c[j] = x;
    }
    return nc;
}

/* Rearranges c[0..n) so that c[0..m) is the nucleus, the smallest set of
 * best candidates whose weight reaches `target`, and returns m. Weighted
 * quickselect: expected O(n), nothing is sorted except the last few. */
static size_t nucleus_select(nb_cand *c, size_t n, double target) {
    size_t lo = 0, hi = n;
    double need = target; /* still needed from c[lo..hi), best first */
    int depth = select_depth(n);
    while (hi - lo > 16 && depth-- > 0) {
        size_t p = cand_partition(c, lo, hi);
        double mb = 0.0;
        for (size_t i = lo; i < p; i++) mb += c[i].w;
        if (mb >= need) { /* the nucleus ends among the better ones */
            hi = p;
            continue;
        }
        need -= mb;
        if (c[p].w >= need) return p + 1;
        need -= c[p].w;
        lo = p + 1;
    }
    cand_sort(c + lo, hi - lo);
    for (size_t i = lo; i < hi; i++) {
        if (c[i].w >= need) return i + 1;
        need -= c[i].w;
    }
    return hi; /* rounding left a sliver: keep everything */
}

/* ---- sampling ----------------------------------------------------------- */

static int32_t sample_random(nb_sampler *sm, float *logits) {
    const int32_t n = sm->n_vocab;
    const float inv_t = 1.0f / sm->p.temperature;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i]; /* NaN never compares greater */
    if (mx == INFINITY) {
        for (int32_t i = 0; i < n; i++)
            if (logits[i] == INFINITY) return i;
    }
    if (mx == -INFINITY) return first_allowed(sm);
    /* min_p: p_i >= min_p * p_max  <=>  (l_i - max) / T >= log(min_p) */
    const float lmin = sm->p.min_p > 0.0f ? logf(sm->p.min_p) : -INFINITY;

    if (!sm->cand) {
        /* temperature (+ min_p) only: weights over the logits, one scan */
        double z = 0.0;
        for (int32_t i = 0; i < n; i++) {
            float x = (logits[i] - mx) * inv_t;
            float w = x >= lmin ? expf(x) : 0.0f; /* NaN -> 0 */
            logits[i] = w;
            z += w;
        }
        double u = nb_rng_uniform(&sm->rng) * z, acc = 0.0;
        int32_t last = -1;
        for (int32_t i = 0; i < n; i++) {
            if (logits[i] > 0.0f) last = i;
            acc += logits[i];
            if (acc > u) return i;
        }
        return last; /* unreachable: acc ends at z > u */
    }

    nb_cand *c = sm->cand;
    size_t nc = 0;
    const bool topk = sm->p.top_k > 0 && sm->p.top_k < n;
    if (sm->cand_cap < (size_t)n) { /* small top_k: heap of cand_cap = top_k */
        nc = heap_top_k(c, (size_t)sm->p.top_k, logits, n, mx, inv_t, lmin);
    } else {
        for (int32_t i = 0; i < n; i++) {
            const float l = logits[i];
            if (!(l > -INFINITY)) continue; /* -inf (banned) and NaN */
            if ((l - mx) * inv_t < lmin) continue;
            c[nc].l = l;
            c[nc].id = i;
            nc++;
        }
        if (topk && (size_t)sm->p.top_k < nc) {
            cand_select(c, nc, (size_t)sm->p.top_k);
            nc = (size_t)sm->p.top_k;
        }
    }
    NB_ASSERT(nc >= 1); /* the max itself always passes */
    double z = 0.0;
    for (size_t i = 0; i < nc; i++) {
        c[i].w = expf((c[i].l - mx) * inv_t);
        z += c[i].w;
    }
    if (sm->p.top_p < 1.0f) {
        /* drop what can never be in the nucleus (see the top of the file);
         * the slack absorbs rounding */
        const double thr = (1.0 - (double)sm->p.top_p) * z / (double)nc * (1.0 - 1e-3);
        size_t nf = 0;
        for (size_t i = 0; i < nc; i++)
            if ((double)c[i].w >= thr) c[nf++] = c[i];
        nc = nucleus_select(c, nf, (double)sm->p.top_p * z);
        z = 0.0;
        for (size_t i = 0; i < nc; i++) z += c[i].w;
    }
    double u = nb_rng_uniform(&sm->rng) * z, acc = 0.0;
    for (size_t i = 0; i < nc; i++) {
        acc += c[i].w;
        if (acc > u) return c[i].id;
    }
    return c[nc - 1].id; /* unreachable: acc ends at z > u */
}

static int32_t argmax(const nb_sampler *sm, const float *logits) {
    int32_t best = -1;
    float bl = -INFINITY;
    for (int32_t i = 0; i < sm->n_vocab; i++) {
        if (logits[i] > bl) { /* strict: ties keep the lower id */
            bl = logits[i];
            best = i;
        }
    }
    return best >= 0 ? best : first_allowed(sm);
}

int32_t nb_sampler_sample(nb_sampler *sm, float *logits) {
    for (size_t i = 0; i < sm->n_bias; i++) logits[sm->bias_ids[i]] += sm->bias[i];
    apply_penalties(sm, logits);
    apply_bans(sm, logits);
    int32_t id = sm->p.temperature < NB_SAMPLING_GREEDY_EPS ? argmax(sm, logits)
                                                             : sample_random(sm, logits);
    if (id >= 0) nb_sampler_accept(sm, id);
    return id;
}

/* ---- log-softmax utilities ---------------------------------------------- */

double nb_logsumexp(const float *logits, int32_t n) {
    if (n <= 0) return -INFINITY;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (isnan(logits[i])) return NAN;
        if (logits[i] > mx) mx = logits[i];
    }
    if (isinf(mx)) return mx; /* +inf, or every logit -inf */
    double s = 0.0;
    for (int32_t i = 0; i < n; i++) s += exp((double)logits[i] - (double)mx);
    return (double)mx + log(s);
}

void nb_log_softmax(const float *logits, int32_t n, float *out) {
    double lse = nb_logsumexp(logits, n);
    for (int32_t i = 0; i < n; i++) out[i] = (float)((double)logits[i] - lse);
}

/* Order for nb_top_k: NaN below everything, then logit desc, id asc. */
static inline bool tk_better(float la, int32_t ia, float lb, int32_t ib) {
    bool an = isnan(la), bn = isnan(lb);
    if (an || bn) return an != bn ? bn : ia < ib;
    return la > lb || (la == lb && ia < ib);
}

/* Min-heap (root = worst kept) sift-down over ids/vals[0..n). */
static void tk_sift(int32_t *ids, float *vals, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && tk_better(vals[w], ids[w], vals[l], ids[l])) w = l;
        if (r < n && tk_better(vals[w], ids[w], vals[r], ids[r])) w = r;
        if (w == i) return;
        int32_t ti = ids[i];
        ids[i] = ids[w];
        ids[w] = ti;
        float tv = vals[i];
        vals[i] = vals[w];
        vals[w] = tv;
        i = w;
    }
}

void nb_top_k(const float *logits, int32_t n, int32_t k, int32_t *ids, float *vals) {
    if (n < 0) n = 0;
    if (k > n) k = n;
    if (k <= 0) return;
    for (int32_t i = 0; i < k; i++) {
        ids[i] = i;
        vals[i] = logits[i];
    }
    for (int32_t i = k / 2 - 1; i >= 0; i--) tk_sift(ids, vals, k, i);
    for (int32_t i = k; i < n; i++) {
        if (tk_better(logits[i], i, vals[0], ids[0])) {
            ids[0] = i;
            vals[0] = logits[i];
            tk_sift(ids, vals, k, 0);
        }
    }
    /* heap sort: move the worst to the end repeatedly -> descending */
    for (int32_t end = k - 1; end > 0; end--) {
        int32_t ti = ids[0];
        ids[0] = ids[end];
        ids[end] = ti;
        float tv = vals[0];
        vals[0] = vals[end];
        vals[end] = tv;
        tk_sift(ids, vals, end, 0);
    }
}
