/* eval kld: two sessions (or a baseline file and a session) over the same
 * chunks, with per-class statistics (see kld.h). */
#include "eval/kld.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"

/* ---- vocabulary --------------------------------------------------------- */

static const char *entry(const nb_session *s, int32_t id, uint8_t *kind, size_t *len) {
    *len = 0;
    if (id >= nb_tokenizer_n_vocab(s->tok)) {
        *kind = 2;
        return "";
    }
    *kind = nb_tokenizer_is_control(s->tok, id) ? 1 : 0;
    const char *p = nb_token_piece_ref(s->tok, id, true, len);
    return p ? p : "";
}

nb_status nb_kld_vocab_sha256(const nb_session *s, uint8_t out[32]) {
    nb_sha256_ctx c;
    nb_sha256_init(&c);
    for (int32_t id = 0; id < s->n_vocab; id++) {
        uint8_t kind;
        size_t len;
        const char *p = entry(s, id, &kind, &len);
        uint32_t l32 = (uint32_t)len;
        nb_sha256_update(&c, &kind, 1);
        nb_sha256_update(&c, &l32, 4);
        nb_sha256_update(&c, p, len);
    }
    nb_sha256_final(&c, out);
    return NB_OK;
}

nb_status nb_kld_vocab_check(const nb_session *b, const nb_session *c) {
    if (b->n_vocab != c->n_vocab)
        return nb_fail(NB_ERR_INVALID, "vocabulary mismatch: the baseline %s has %d tokens, the candidate %s has %d; "
                       "KL divergence needs the same vocabulary", b->model_path, b->n_vocab, c->model_path, c->n_vocab);
    static const char *const kinds[] = {"text", "control", "absent"};
    for (int32_t id = 0; id < b->n_vocab; id++) {
        uint8_t kb, kc;
        size_t lb, lc;
        const char *pb = entry(b, id, &kb, &lb), *pc = entry(c, id, &kc, &lc);
        if (kb != kc || lb != lc || memcmp(pb, pc, lb) != 0)
            return nb_fail(NB_ERR_INVALID, "vocabulary mismatch: token %d is %s '%.*s' in the baseline %s but %s '%.*s' "
                           "in the candidate %s; KL divergence needs the same vocabulary", id, kinds[kb],
                           (int)NB_MIN(lb, 40), pb, b->model_path, kinds[kc], (int)NB_MIN(lc, 40), pc, c->model_path);
    }
    return NB_OK;
}

/* ---- top-K positions ------------------------------------------------------ */

nb_status nb_kld_position_topk(const nb_kldbase_pos *b, int32_t k, const float *cand, int32_t n_vocab, int32_t next,
                               nb_cmp_pos *out) {
    memset(out, 0, sizeof *out);
    if (next < 0 || next >= n_vocab) return nb_fail(NB_ERR_RANGE, "next token %d outside 0..%d", next, n_vocab - 1);
    int32_t at;
    double lt;
    if (!nb_cmp_logit_stats(cand, n_vocab, &at, &lt))
        return nb_fail(NB_ERR_INVALID, "the candidate logits have no finite maximum");
    uint8_t *in = nb_calloc((size_t)n_vocab, 1);
    if (!in) return NB_ERR_NOMEM;
    double kld = 0;
    for (int32_t i = 0; i < k; i++) {
        int32_t id = b->ids[i];
        if (id < 0 || id >= n_vocab || in[id]) {
            free(in);
            return nb_fail(NB_ERR_FORMAT, "top-K entry %d: token id %d repeated or outside 0..%d", i, id, n_vocab - 1);
        }
        in[id] = 1;
        double lp = b->lp[i], p = exp(lp);
        if (p == 0) continue;
        double lq = isnan(cand[id]) ? -INFINITY : (double)cand[id] - lt;
        kld += p * (lp - lq);
    }
    double q_tail = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (!in[i] && !isnan(cand[i])) q_tail += exp((double)cand[i] - lt);
    free(in);
    if (b->tail > 0) kld += b->tail * (log(b->tail) - log(q_tail > DBL_MIN ? q_tail : DBL_MIN));
    out->kld = kld > 0 ? kld : 0;
    out->same_top = b->ids[0] == at;
    out->nll_base = b->nll;
    out->nll_test = lt - (double)cand[next];
    return NB_OK;
}

/* ---- the run -------------------------------------------------------------- */

static void class_add(nb_kld_report *r, uint32_t mask, const nb_cmp_pos *p) {
    for (int c = 0; c < r->n_classes; c++)
        if (mask & (1u << c)) {
            r->cls[c].n++;
            r->cls[c].kld_sum += p->kld;
            r->cls[c].same += p->same_top;
        }
}

static void class_finish(nb_kld_report *r) {
    r->worst = -1;
    bool any_big = false;
    for (int c = 0; c < r->n_classes; c++) {
        nb_kld_class_stat *k = &r->cls[c];
        k->kld_mean = k->n ? k->kld_sum / (double)k->n : 0;
        k->top1 = k->n ? (double)k->same / (double)k->n : 0;
        any_big |= k->n >= NB_KLD_WORST_MIN_N;
    }
    if (!r->has_cand) return;
    for (int c = 0; c < r->n_classes; c++) {
        const nb_kld_class_stat *k = &r->cls[c];
        if (k->n == 0 || k->kld_mean <= 0 || (any_big && k->n < NB_KLD_WORST_MIN_N)) continue;
        if (r->worst < 0 || k->kld_mean > r->cls[r->worst].kld_mean) r->worst = c;
    }
}

nb_status nb_kld_run(nb_session *base, nb_session *cand, const char *text, size_t len, const nb_kld_opts *o,
                     nb_kld_report *out, nb_kld_progress cb, void *ud) {
    memset(out, 0, sizeof *out);
    out->worst = -1;
    out->has_cand = cand != NULL;
    if (!o->classes) return nb_fail(NB_ERR_INVALID, "eval kld: no token classes");
    if (!base == !o->base_logits)
        return nb_fail(NB_ERR_INVALID, "eval kld: give either a baseline model or --base-logits, not %s",
                       base ? "both" : "neither");
    if (!cand && !o->save_base)
        return nb_fail(NB_ERR_INVALID, "eval kld: no candidate model (only --save-base runs without one)");
    if (o->save_base && !base)
        return nb_fail(NB_ERR_INVALID, "--save-base needs the baseline model, not --base-logits");
    out->n_classes = o->classes->n;
    for (int c = 0; c < out->n_classes; c++) memcpy(out->cls_names[c], o->classes->names[c], NB_TOKCLASS_NAME_MAX);

    uint8_t text_sha[32];
    if (o->text_sha) memcpy(text_sha, o->text_sha, 32);
    else nb_sha256(text, len, text_sha);

    nb_status st = NB_OK;
    nb_kldbase_reader *rd = NULL;
    nb_kldbase_writer *wr = NULL;
    int32_t *ids = NULL, *toks = NULL;
    uint32_t *masks = NULL;
    float *lb = NULL, *lt = NULL;
    nb_cmp_acc acc;
    nb_cmp_acc_init(&acc);
    nb_session *ref = base ? base : cand; /* vocabulary, classes */
    int32_t nv = ref->n_vocab;
    int32_t ctx = o->n_ctx;
    int64_t n_chunks;
    double tail_sum = 0;

    if (cand && (st = nb_model_id_of(cand, &out->cand)) != NB_OK) goto done;
    if (base) {
        if ((st = nb_model_id_of(base, &out->base)) != NB_OK) goto done;
        if (cand && (st = nb_kld_vocab_check(base, cand)) != NB_OK) goto done;
        if (ctx < 4 || ctx > base->n_ctx || (cand && ctx > cand->n_ctx)) {
            st = nb_fail(NB_ERR_RANGE, "eval kld: context %d outside 4..%d (the sessions' context)", ctx,
                         cand ? NB_MIN(base->n_ctx, cand->n_ctx) : base->n_ctx);
            goto done;
        }
        size_t n;
        if ((st = nb_tokenize(base->tok, text, len, true, false, &ids, &n)) != NB_OK) goto done;
        out->n_tokens = (int64_t)n;
        n_chunks = (int64_t)n / ctx;
        if (o->max_chunks > 0 && n_chunks > o->max_chunks) n_chunks = o->max_chunks;
        if (n_chunks == 0) {
            st = nb_fail(NB_ERR_RANGE, "eval kld: the text has %zu tokens, fewer than one chunk of %d (lower -c)", n,
                         ctx);
            goto done;
        }
        int32_t bos = nb_tokenizer_bos(base->tok);
        bool add_bos = nb_tokenizer_add_bos(base->tok) && bos >= 0;
        if (add_bos)
            for (int64_t c = 0; c < n_chunks; c++) ids[c * ctx] = bos;
        toks = ids;
    } else {
        if ((st = nb_kldbase_open(o->base_logits, &rd)) != NB_OK) goto done;
        const nb_kldbase_hdr *h = nb_kldbase_header(rd);
        if (ctx == 0) ctx = h->ctx;
        if (ctx != h->ctx) {
            st = nb_fail(NB_ERR_INVALID, "--base-logits %s was made with -c %d, this run asks for -c %d (use the same "
                         "context, or leave -c out)", o->base_logits, h->ctx, ctx);
            goto done;
        }
        if (memcmp(h->text_sha, text_sha, 32) != 0) {
            char a[65], b[65];
            nb_sha256_hex(h->text_sha, a);
            nb_sha256_hex(text_sha, b);
            st = nb_fail(NB_ERR_INVALID, "--base-logits %s was made on a different text (sha256 %.12s..., this text "
                         "%.12s...)", o->base_logits, a, b);
            goto done;
        }
        uint8_t vs[32];
        if ((st = nb_kld_vocab_sha256(cand, vs)) != NB_OK) goto done;
        if (h->n_vocab != cand->n_vocab || memcmp(vs, h->vocab_sha, 32) != 0) {
            st = nb_fail(NB_ERR_INVALID, "vocabulary mismatch: --base-logits %s was made with a %d-token vocabulary "
                         "that is not the candidate's (%s, %d tokens%s); KL divergence needs the same vocabulary",
                         o->base_logits, h->n_vocab, cand->model_path, cand->n_vocab,
                         h->n_vocab == cand->n_vocab ? ", different token texts" : "");
            goto done;
        }
        if (ctx > cand->n_ctx) {
            st = nb_fail(NB_ERR_RANGE, "eval kld: context %d exceeds the candidate session's %d", ctx, cand->n_ctx);
            goto done;
        }
        snprintf(out->base.path, sizeof out->base.path, "%s", h->model_path);
        nb_sha256_hex(h->model_sha, out->base.sha256);
        memcpy(out->base.type, h->model_type, strnlen(h->model_type, sizeof out->base.type - 1));
        out->n_tokens = h->n_tokens;
        n_chunks = h->n_chunks;
        if (o->max_chunks > 0 && n_chunks > o->max_chunks) n_chunks = o->max_chunks;
        out->base_topk = h->mode == NB_KLDBASE_TOPK ? h->k : 0;
        toks = (int32_t *)nb_kldbase_tokens(rd);
    }
    out->n_ctx = ctx;

    if ((st = nb_tokclass_table(o->classes, ref->tok, nv, &masks)) != NB_OK) goto done;
    if (o->save_base) {
        nb_kldbase_hdr h = {.mode = o->save_topk > 0 ? NB_KLDBASE_TOPK : NB_KLDBASE_FULL, .n_vocab = nv, .ctx = ctx,
                            .k = o->save_topk > 0 ? o->save_topk : nv, .n_tokens = out->n_tokens,
                            .n_chunks = n_chunks};
        if (h.k > nv) {
            st = nb_fail(NB_ERR_RANGE, "--save-topk %d exceeds the vocabulary (%d tokens)", h.k, nv);
            goto done;
        }
        memcpy(h.text_sha, text_sha, 32);
        if ((st = nb_kld_vocab_sha256(base, h.vocab_sha)) != NB_OK) goto done;
        for (int i = 0; i < 32; i++) {
            unsigned v;
            sscanf(out->base.sha256 + 2 * i, "%2x", &v);
            h.model_sha[i] = (uint8_t)v;
        }
        memcpy(h.model_type, out->base.type, strnlen(out->base.type, 16));
        snprintf(h.model_path, sizeof h.model_path, "%s", out->base.path);
        if ((st = nb_kldbase_create(o->save_base, &h, toks, &wr)) != NB_OK) goto done;
    }

    size_t cells = (size_t)ctx * (size_t)nv;
    lb = base ? nb_malloc(cells * sizeof *lb) : NULL;
    lt = cand ? nb_malloc(cells * sizeof *lt) : NULL;
    if ((base && !lb) || (cand && !lt)) {
        st = nb_fail(NB_ERR_NOMEM, "eval kld: out of memory for %d x %d logits", ctx, nv);
        goto done;
    }
    for (int64_t c = 0; c < n_chunks && st == NB_OK; c++) {
        const int32_t *chunk = toks + c * ctx;
        if (base) {
            nb_session_reset(base);
            if ((st = nb_session_eval(base, chunk, ctx, true, lb)) != NB_OK) break;
        }
        if (cand) {
            nb_session_reset(cand);
            if ((st = nb_session_eval(cand, chunk, ctx, true, lt)) != NB_OK) break;
        }
        for (int32_t j = ctx / 2; j < ctx - 1; j++) {
            int32_t next = chunk[j + 1];
            const float *cl = cand ? lt + (size_t)j * nv : NULL;
            nb_cmp_pos p;
            if (base) {
                const float *bl = lb + (size_t)j * nv;
                if (wr && (st = nb_kldbase_write(wr, bl, next)) != NB_OK) break;
                st = nb_cmp_position(bl, cl ? cl : bl, nv, next, &p);
            } else {
                nb_kldbase_pos bp;
                if ((st = nb_kldbase_read(rd, &bp)) != NB_OK) break;
                if (bp.logits) {
                    st = nb_cmp_position(bp.logits, cl, nv, next, &p);
                } else {
                    st = nb_kld_position_topk(&bp, nb_kldbase_header(rd)->k, cl, nv, next, &p);
                    tail_sum += bp.tail;
                }
            }
            if (st != NB_OK) {
                nb_fail_wrap(st, "eval kld: chunk %lld, position %d: ", (long long)c, j);
                break;
            }
            if ((st = nb_cmp_acc_push(&acc, &p, true)) != NB_OK) break;
            class_add(out, masks[next], &p);
        }
        if (st != NB_OK) break;
        nb_cmp_acc_result(&acc, &out->all);
        out->n_chunks = c + 1;
        if (cb) cb(ud, c + 1, n_chunks, &out->all);
    }
    if (st == NB_OK) {
        nb_cmp_acc_result(&acc, &out->all);
        out->all.n_chunks = out->n_chunks;
        out->all.n_tokens = out->n_tokens;
        if (out->base_topk && acc.n) out->base_tail_mean = tail_sum / (double)acc.n;
        class_finish(out);
    }
done:
    if (wr) {
        if (st == NB_OK) st = nb_kldbase_finish(wr);
        else nb_kldbase_abort(wr);
    }
    nb_cmp_acc_free(&acc);
    nb_kldbase_close(rd);
    free(ids);
    free(masks);
    free(lb);
    free(lt);
    return st;
}
