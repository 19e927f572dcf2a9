/* Teacher-forced log-likelihoods; see golden_score.h. */
#include "eval/golden_score.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "engine/engine.h"
#include "model/forward.h"
#include "model/kv.h"

#define GS_BLOCK 16
#define GS_BATCH 64

struct nb_gscore {
    const nb_model *m;
    nb_kv_pool kv;
    bool kv_ok;
    nb_fwd *fwd;
    int32_t *blocks;
    int32_t n_blocks, n_ctx, n_vocab;
    float *logits; /* [GS_BATCH][n_vocab] */
};

nb_status nb_gscore_create(const nb_model *m, int32_t n_ctx, int n_threads, nb_gscore **out) {
    *out = NULL;
    if (n_ctx < 2) return nb_fail(NB_ERR_RANGE, "scoring context %d: at least 2 tokens", n_ctx);
    if (n_ctx > m->max_ctx) n_ctx = m->max_ctx;
    nb_gscore *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_vocab = m->hp.n_vocab;
    s->n_blocks = (n_ctx + GS_BLOCK - 1) / GS_BLOCK;
    nb_status st = nb_kv_pool_init_type(&s->kv, &m->hp, GS_BLOCK, s->n_blocks, NB_KVT_F32);
    if (st != NB_OK) goto fail;
    s->kv_ok = true;
    s->blocks = nb_malloc((size_t)s->n_blocks * sizeof *s->blocks);
    s->logits = nb_malloc((size_t)GS_BATCH * (size_t)s->n_vocab * sizeof(float));
    if (!s->blocks || !s->logits) { st = NB_ERR_NOMEM; goto fail; }
    for (int32_t i = 0; i < s->n_blocks; i++) s->blocks[i] = i;
    if ((st = nb_fwd_create(m, &s->kv, n_threads, GS_BATCH, &s->fwd)) != NB_OK) goto fail;
    *out = s;
    return NB_OK;
fail:
    nb_gscore_free(s);
    return st;
}

void nb_gscore_free(nb_gscore *s) {
    if (!s) return;
    nb_fwd_free(s->fwd);
    if (s->kv_ok) nb_kv_pool_free(&s->kv);
    free(s->blocks);
    free(s->logits);
    free(s);
}

/* log-softmax pieces of one logit row: max and log-sum-exp (double). */
static double row_lse(const float *x, int32_t n) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return mx + log(sum);
}

static void row_top(const float *x, int32_t n, double lse, int32_t k, int32_t *ids, float *lps) {
    for (int32_t j = 0; j < k; j++) { ids[j] = -1; lps[j] = -INFINITY; }
    for (int32_t i = 0; i < n; i++) {
        float v = x[i];
        if (ids[k - 1] >= 0 && v <= x[ids[k - 1]]) continue; /* ties keep the lower id */
        int32_t j = k - 1;
        while (j > 0 && (ids[j - 1] < 0 || v > x[ids[j - 1]])) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    for (int32_t j = 0; j < k; j++) lps[j] = ids[j] >= 0 ? (float)((double)x[ids[j]] - lse) : -INFINITY;
}

nb_status nb_gscore_run(nb_gscore *s, const int32_t *ids, size_t n, int32_t n_top, float *lp, int32_t *top_ids,
                        float *top_lps) {
    if (n == 0) return nb_fail(NB_ERR_INVALID, "nothing to score (0 tokens)");
    if (n > (size_t)s->n_ctx)
        return nb_fail(NB_ERR_RANGE, "%zu tokens to score exceed the scoring context of %d tokens", n, s->n_ctx);
    if (n_top < 0 || n_top > NB_LIMIT_TOP_LOGPROBS)
        return nb_fail(NB_ERR_RANGE, "top logprobs %d outside 0..%d", n_top, NB_LIMIT_TOP_LOGPROBS);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return nb_fail(NB_ERR_INVALID, "token %zu is id %d, the vocabulary has ids 0..%d", i, ids[i], s->n_vocab - 1);
    int32_t pos[GS_BATCH], seq[GS_BATCH] = {0};
    bool want[GS_BATCH];
    nb_seq_view sv = {s->blocks, s->n_blocks};
    lp[0] = NAN;
    /* row r of a chunk predicts token done + r + 1 */
    for (size_t done = 0; done < n;) {
        int32_t m = (int32_t)NB_MIN((size_t)GS_BATCH, n - done);
        for (int32_t i = 0; i < m; i++) {
            pos[i] = (int32_t)done + i;
            want[i] = true;
        }
        nb_batch b = {m, ids + done, pos, seq, want, 1, &sv};
        NB_TRY(nb_fwd_run(s->fwd, &b, s->logits));
        for (int32_t r = 0; r < m; r++) {
            size_t t = done + (size_t)r + 1;
            if (t >= n) break;
            const float *x = s->logits + (size_t)r * s->n_vocab;
            double lse = row_lse(x, s->n_vocab);
            lp[t] = (float)((double)x[ids[t]] - lse);
            if (n_top > 0) row_top(x, s->n_vocab, lse, n_top, top_ids + t * n_top, top_lps + t * n_top);
        }
        done += (size_t)m;
    }
    return NB_OK;
}

nb_status nb_gscore_offsets(const nb_tokenizer *tok, const int32_t *ids, size_t n, size_t *off) {
    for (size_t i = 0; i <= n; i++) {
        if (i == 0) { off[0] = 0; continue; }
        char *text = NULL;
        size_t len = 0;
        NB_TRY(nb_detokenize(tok, ids, i, false, &text, &len));
        free(text);
        off[i] = len < off[i - 1] ? off[i - 1] : len; /* never backwards */
    }
    return NB_OK;
}

double nb_gscore_continuation(const float *lp, const size_t *off, size_t n, size_t prompt_len, int *n_tokens) {
    double sum = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (off[i + 1] <= prompt_len || !isfinite(lp[i])) continue;
        sum += lp[i];
        k++;
    }
    if (n_tokens) *n_tokens = k;
    return sum;
}

/* ---- the serving engine's scorer ---------------------------------------- */

static pthread_mutex_t g_engine_mu = PTHREAD_MUTEX_INITIALIZER;
static nb_gscore *g_engine_scorer;
static const void *g_engine_owner;

nb_status nb_gscore_engine_run(void *engine, const int32_t *ids, size_t n, int32_t n_top, float *lp, int32_t *top_ids,
                               float *top_lps) {
    nb_engine *e = engine;
    pthread_mutex_lock(&g_engine_mu);
    nb_status st = NB_OK;
    if (g_engine_scorer && g_engine_owner != e) {
        nb_gscore_free(g_engine_scorer);
        g_engine_scorer = NULL;
    }
    if (!g_engine_scorer) {
        nb_engine_stats es;
        nb_engine_get_stats(e, &es);
        st = nb_gscore_create(nb_engine_model(e), es.max_model_len, nb_engine_threads(e), &g_engine_scorer);
        g_engine_owner = e;
    }
    if (st == NB_OK) st = nb_gscore_run(g_engine_scorer, ids, n, n_top, lp, top_ids, top_lps);
    pthread_mutex_unlock(&g_engine_mu);
    return st;
}

void nb_gscore_engine_release(void) {
    pthread_mutex_lock(&g_engine_mu);
    nb_gscore_free(g_engine_scorer);
    g_engine_scorer = NULL;
    g_engine_owner = NULL;
    pthread_mutex_unlock(&g_engine_mu);
}
