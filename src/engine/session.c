/* Single-sequence sessions for the one-shot tools. */
#include "engine/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/budget.h"

#define SESSION_BLOCK 16
#define SESSION_DEFAULT_CTX_CAP 4096

nb_status nb_session_open(const nb_session_params *p, nb_session **out) {
    *out = NULL;
    if (!p->model_path || !p->model_path[0])
        return nb_fail(NB_ERR_INVALID, "session: a model path is required");
    nb_session *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    nb_status st;
    snprintf(s->model_path, sizeof s->model_path, "%s", p->model_path);
    nb_model_params mp = {.use_mmap = p->use_mmap};
    if ((st = nb_model_load_ex(s->model_path, &mp, &s->model)) != NB_OK) goto fail;
    if ((st = nb_tokenizer_load(s->model_path, p->tokenizer_path, &s->tok)) != NB_OK) goto fail;
    s->n_vocab = s->model->hp.n_vocab;
    if (nb_tokenizer_n_vocab(s->tok) > s->n_vocab) {
        st = nb_fail(NB_ERR_FORMAT, "%s: the tokenizer has %d tokens but the model only %d", s->model_path,
                     nb_tokenizer_n_vocab(s->tok), s->n_vocab);
        goto fail;
    }
    s->n_ctx = p->n_ctx > 0 ? p->n_ctx : NB_MIN(s->model->hp.n_ctx_train, SESSION_DEFAULT_CTX_CAP);
    if (s->n_ctx > s->model->max_ctx) {
        st = nb_fail(NB_ERR_RANGE, "context size %d exceeds %d, the sliding-window length up to which this model is "
                     "computed exactly", s->n_ctx, s->model->max_ctx);
        goto fail;
    }
    s->n_batch = p->n_batch > 0 ? NB_MIN(p->n_batch, s->n_ctx) : NB_MIN(512, s->n_ctx);
    s->n_blocks = (s->n_ctx + SESSION_BLOCK - 1) / SESSION_BLOCK;
    nb_kv_type kvt;
    if ((st = nb_engine_kv_type(p->kv_dtype, &kvt)) != NB_OK) goto fail;
    if ((st = nb_kv_pool_init_type(&s->kv, &s->model->hp, SESSION_BLOCK, s->n_blocks, kvt)) != NB_OK) goto fail;
    s->blocks = nb_malloc((size_t)s->n_blocks * sizeof *s->blocks);
    s->logits = nb_malloc((size_t)s->n_batch * (size_t)s->n_vocab * sizeof(float));
    if (!s->blocks || !s->logits) { st = NB_ERR_NOMEM; goto fail; }
    for (int32_t i = 0; i < s->n_blocks; i++) s->blocks[i] = i;
    if ((st = nb_fwd_create(s->model, &s->kv, p->n_threads, s->n_batch, &s->fwd)) != NB_OK) goto fail;
    *out = s;
    return NB_OK;
fail:
    nb_session_free(s);
    return st;
}

void nb_session_free(nb_session *s) {
    if (!s) return;
    nb_fwd_free(s->fwd);
    nb_kv_pool_free(&s->kv);
    nb_tokenizer_free(s->tok);
    nb_model_free(s->model);
    free(s->blocks);
    free(s->logits);
    free(s);
}

void nb_session_reset(nb_session *s) { s->n_past = 0; }

nb_status nb_session_eval(nb_session *s, const int32_t *ids, int32_t n, bool all_logits, float *out) {
    if (n <= 0) return nb_fail(NB_ERR_INVALID, "nothing to evaluate (0 tokens)");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return nb_fail(NB_ERR_RANGE, "%d tokens after the %d already in context exceed the context size %d "
                       "(raise --ctx-size; the model was trained for %d)", n, s->n_past, s->n_ctx,
                       s->model->hp.n_ctx_train);
    int32_t *P = nb_malloc((size_t)s->n_batch * sizeof(int32_t) * 2);
    bool *want = nb_malloc((size_t)s->n_batch);
    if (!P || !want) { free(P); free(want); return NB_ERR_NOMEM; }
    int32_t *seq = P + s->n_batch;
    memset(seq, 0, (size_t)s->n_batch * sizeof *seq);
    nb_seq_view sv = {s->blocks, s->n_blocks};
    nb_status st = NB_OK;
    for (int32_t done = 0; done < n && st == NB_OK;) {
        int32_t m = NB_MIN(s->n_batch, n - done);
        for (int32_t i = 0; i < m; i++) {
            P[i] = s->n_past + i;
            want[i] = all_logits || done + i == n - 1;
        }
        nb_batch b = {m, ids + done, P, seq, want, 1, &sv};
        float *dst = all_logits ? out + (size_t)done * s->n_vocab : (done + m == n ? out : s->logits);
        st = nb_fwd_run(s->fwd, &b, dst);
        if (st == NB_OK) {
            s->n_past += m;
            done += m;
        }
    }
    free(P);
    free(want);
    return st;
}
