/* The prompt of a parsed request; see prompt.h. */
#include "server/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "eval/golden_score.h"
#include "server/respond.h"

/* A text of more bytes than this cannot fit in max_model_len tokens: no
 * token covers more input bytes than its decoded piece (at least 4 for an
 * unknown UTF-8 character, 64 leaves room for special-token texts). Such
 * prompts are refused before tokenizing, which also caps the tokenizer's
 * work per request. */
static size_t prompt_byte_bound(const nb_server *s) {
    size_t per = NB_MAX(nb_tokenizer_max_piece(s->be.tok), (size_t)64);
    return (size_t)NB_MAX(s->be.max_model_len, 1) * per;
}

static bool too_many_bytes(const nb_server *s, const nb_oai_request *q, size_t bytes, nb_oai_error *e) {
    size_t bound = prompt_byte_bound(s);
    if (bytes <= bound) return false;
    const char *what = q->kind == NB_OAI_CHAT ? "messages" : "prompt";
    nb_oai_error_set(e, 400, "invalid_request_error", what, "context_length_exceeded",
                     "This model's maximum context length is %d tokens. However, the %s is %zu bytes long, more "
                     "than %zu tokens of at most %zu bytes each can hold. Please reduce the length of the %s.",
                     s->be.max_model_len, what, bytes, (size_t)s->be.max_model_len, bound / (size_t)NB_MAX(s->be.max_model_len, 1), what);
    return true;
}

/* Tokenizes the prompt of a parsed request. */
bool nb_prompt_build(nb_server *s, const nb_oai_request *q, int32_t **ids, size_t *n, nb_oai_error *e) {
    const nb_tokenizer *tok = s->be.tok;
    nb_status st;
    *ids = NULL;
    *n = 0;
    for (size_t i = 0; i < q->n_logit_bias; i++)
        if (q->logit_bias_ids[i] >= nb_tokenizer_n_vocab(tok)) {
            nb_oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                             "'logit_bias' has token id %d, the vocabulary has ids 0..%d", q->logit_bias_ids[i],
                             nb_tokenizer_n_vocab(tok) - 1);
            return false;
        }
    for (size_t i = 0; i < q->n_stop_token_ids; i++)
        if (q->stop_token_ids[i] >= nb_tokenizer_n_vocab(tok)) {
            nb_oai_error_set(e, 400, "invalid_request_error", "stop_token_ids", "invalid_value",
                             "'stop_token_ids[%zu]' is token id %d, the vocabulary has ids 0..%d", i,
                             q->stop_token_ids[i], nb_tokenizer_n_vocab(tok) - 1);
            return false;
        }
    if (q->kind == NB_OAI_CHAT) {
        char *text = NULL;
        bool generic = nb_chat_template_is_generic(s->tmpl);
        json_t *root = q->root;
        nb_chat_input in = {.messages = json_object_get(root, "messages"), .tools = nb_tool_template_tools(&q->tools),
                            .kwargs = json_object_get(root, "chat_template_kwargs"), .add_generation_prompt = true,
                            .bos = generic ? "" : s->bos_text, .eos = s->eos_text, .now = -1};
        st = nb_chat_render_json(s->tmpl, &in, &text);
        if (st != NB_OK) {
            nb_oai_error_set(e, st == NB_ERR_NOMEM ? 500 : 400, st == NB_ERR_NOMEM ? "server_error" : "invalid_request_error",
                             "messages", "invalid_value", "%s", nb_errmsg());
            return false;
        }
        int32_t *t = NULL;
        size_t nt = 0;
        if (too_many_bytes(s, q, strlen(text), e)) {
            free(text);
            return false;
        }
        st = nb_tokenize(tok, text, strlen(text), false, true, &t, &nt);
        free(text);
        if (st != NB_OK) goto fail;
        int32_t bos = nb_tokenizer_bos(tok);
        if (generic && nb_tokenizer_add_bos(tok) && bos >= 0) {
            int32_t *u = realloc(t, (nt + 1) * sizeof *u);
            if (!u) { free(t); goto fail; }
            memmove(u + 1, u, nt * sizeof *u);
            u[0] = bos;
            t = u;
            nt++;
        }
        *ids = t;
        *n = nt;
    } else if (q->prompt_ids) {
        int32_t nv = nb_tokenizer_n_vocab(tok);
        for (size_t i = 0; i < q->n_prompt_ids; i++)
            if (q->prompt_ids[i] >= nv) {
                nb_oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value",
                                 "'prompt[%zu]' is token id %d, the vocabulary has ids 0..%d", i, q->prompt_ids[i],
                                 nv - 1);
                return false;
            }
        *ids = malloc((q->n_prompt_ids ? q->n_prompt_ids : 1) * sizeof **ids);
        if (!*ids) goto fail;
        memcpy(*ids, q->prompt_ids, q->n_prompt_ids * sizeof **ids);
        *n = q->n_prompt_ids;
    } else {
        if (too_many_bytes(s, q, strlen(q->prompt), e)) return false;
        st = nb_tokenize(tok, q->prompt, strlen(q->prompt), true, false, ids, n);
        if (st != NB_OK) goto fail;
    }
    if (*n == 0) {
        int32_t bos = nb_tokenizer_bos(tok);
        if (bos < 0) {
            nb_oai_error_set(e, 400, "invalid_request_error", q->kind == NB_OAI_CHAT ? "messages" : "prompt",
                             "invalid_value", "the prompt is empty and the model has no BOS token to start from");
            free(*ids);
            *ids = NULL;
            return false;
        }
        free(*ids);
        *ids = malloc(sizeof **ids);
        if (!*ids) goto fail;
        (*ids)[0] = bos;
        *n = 1;
    }
    return true;
fail:
    free(*ids);
    *ids = NULL;
    nb_oai_error_set(e, 500, "server_error", NULL, NULL, "tokenizing the prompt failed: %s", nb_errmsg());
    return false;
}

/* echo: the prompt's text and, with logprobs, its log-probabilities in the
 * legacy shape (tokens, token_logprobs with null first, top_logprobs,
 * text_offset = byte offsets into the echoed text). */
bool nb_prompt_echo(nb_server *s, const nb_oai_request *q, const int32_t *ids, size_t n, char **text,
                    size_t *text_len, json_t **lpj, nb_oai_error *e) {
    const nb_tokenizer *tok = s->be.tok;
    *text = NULL;
    *lpj = NULL;
    if (!s->be.score) {
        nb_oai_error_set(e, 400, "invalid_request_error", "echo", "unsupported_parameter",
                         "'echo' is not supported by this server's backend");
        return false;
    }
    if (nb_detokenize(tok, ids, n, false, text, text_len) != NB_OK) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "detokenizing the prompt failed: %s", nb_errmsg());
        return false;
    }
    if (q->logprobs < 0) return true;
    int32_t k = q->logprobs;
    float *lp = malloc(n * sizeof *lp), *tl = k ? malloc(n * (size_t)k * sizeof *tl) : NULL;
    int32_t *ti = k ? malloc(n * (size_t)k * sizeof *ti) : NULL;
    size_t *off = malloc((n + 1) * sizeof *off);
    bool ok = lp && off && (!k || (tl && ti));
    nb_status st = ok ? s->be.score(s->be.ctx, ids, n, k, lp, ti, tl) : NB_ERR_NOMEM;
    if (st == NB_OK) st = nb_gscore_offsets(tok, ids, n, off);
    if (st != NB_OK) {
        if (st == NB_ERR_RANGE || st == NB_ERR_INVALID)
            nb_oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value", "%s", nb_errmsg());
        else nb_oai_error_set(e, 500, "server_error", NULL, NULL, "scoring the prompt failed: %s", nb_errmsg());
        free(lp); free(tl); free(ti); free(off);
        free(*text);
        *text = NULL;
        return false;
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = nb_token_piece_ref(tok, ids[i], true, &len);
        json_array_append_new(toks, nb_resp_jstr(p ? p : "", p ? len : 0));
        json_array_append_new(lps, i ? json_real(lp[i]) : json_null());
        json_array_append_new(offs, json_integer((json_int_t)off[i]));
        if (!i) { json_array_append_new(tops, json_null()); continue; }
        json_t *t = json_object();
        for (int32_t j = 0; j < k; j++) {
            size_t l2 = 0, sl;
            const char *pq = nb_token_piece_ref(tok, ti[i * (size_t)k + j], true, &l2);
            char *key = nb_utf8_sanitize(pq ? pq : "", pq ? l2 : 0, &sl);
            if (key) json_object_set_new(t, key, json_real(tl[i * (size_t)k + j]));
            else nb_resp_json_lost();
            free(key);
        }
        json_array_append_new(tops, t);
    }
    *lpj = json_object();
    json_object_set_new(*lpj, "tokens", toks);
    json_object_set_new(*lpj, "token_logprobs", lps);
    json_object_set_new(*lpj, "top_logprobs", tops);
    json_object_set_new(*lpj, "text_offset", offs);
    free(lp); free(tl); free(ti); free(off);
    return true;
}
