/* Vocabulary from GGUF metadata (the keys llama.cpp writes):
 *   tokenizer.ggml.model        string: "llama" (SentencePiece BPE) or "gpt2" (byte-level BPE)
 *   tokenizer.ggml.pre          string: pre-tokenizer name (BPE), e.g. "gpt-2", "llama-bpe", "qwen2"
 *   tokenizer.ggml.tokens       [string] token texts
 *   tokenizer.ggml.scores       [f32] (or [i32]) per token, optional
 *   tokenizer.ggml.token_type   [i32] nb_token_type per token, optional
 *   tokenizer.ggml.merges       [string] "left right" in rank order (BPE; split at the
 *                               first space after the first byte)
 *   tokenizer.ggml.{bos,eos,unknown,padding,eot,eom,seperator}_token_id  u32; ids
 *                               outside the vocab (e.g. 4294967295) mean none
 *   tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix   bool
 *   tokenizer.chat_template     string */
#include <stdlib.h>
#include <string.h>

#include "formats/vocab.h"

static nb_status get_id(const nb_gguf *g, const char *key, int32_t *id) {
    const nb_gguf_value *val = nb_gguf_find(g, key);
    if (!val) return NB_OK;
    int64_t x;
    NB_TRY(nb_gguf_get_int(g, key, &x));
    *id = (x < 0 || x > INT32_MAX) ? -1 : (int32_t)x;
    return NB_OK;
}

static nb_status get_flag(const nb_gguf *g, const char *key, bool *b) {
    if (!nb_gguf_find(g, key)) return NB_OK;
    return nb_gguf_get_bool(g, key, b);
}

nb_status nb_vocab_from_gguf(const nb_gguf *g, nb_vocab **out) {
    *out = NULL;
    const char *path = nb_gguf_path(g) ? nb_gguf_path(g) : "gguf";
    const char *model;
    nb_status st = nb_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (st != NB_OK) return nb_fail_wrap(st, "%s: no tokenizer: ", path);
    nb_vocab_kind kind;
    if (!strcmp(model, "llama")) kind = NB_VOCAB_SPM;
    else if (!strcmp(model, "gpt2")) kind = NB_VOCAB_BPE;
    else
        return nb_fail(NB_ERR_UNSUPPORTED,
                       "%s: tokenizer.ggml.model = '%s' is not supported (allowed: 'llama' = SentencePiece BPE, "
                       "'gpt2' = byte-level BPE)",
                       path, model);

    const nb_gguf_value *toks;
    st = nb_gguf_get_arr(g, "tokenizer.ggml.tokens", NB_GGUF_STRING, &toks);
    if (st != NB_OK) return nb_fail_wrap(st, "%s: ", path);
    if (toks->n == 0 || toks->n > NB_VOCAB_MAX_TOKENS)
        return nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (allowed 1..%d)", path,
                       (unsigned long long)toks->n, NB_VOCAB_MAX_TOKENS);
    uint64_t n = toks->n;

    const float *fscores = NULL;
    const int32_t *iscores = NULL;
    const nb_gguf_value *sv = nb_gguf_find(g, "tokenizer.ggml.scores");
    if (sv) {
        if (sv->type != NB_GGUF_ARRAY || (sv->arr_type != NB_GGUF_F32 && sv->arr_type != NB_GGUF_I32))
            return nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.scores must be an array of f32 or i32", path);
        if (sv->n < n)
            return nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.scores has %llu entries for %llu tokens", path,
                           (unsigned long long)sv->n, (unsigned long long)n);
        if (sv->arr_type == NB_GGUF_F32) fscores = sv->arr;
        else iscores = sv->arr;
    }
    const int32_t *ttypes = NULL;
    const nb_gguf_value *tv = nb_gguf_find(g, "tokenizer.ggml.token_type");
    if (tv) {
        if (tv->type != NB_GGUF_ARRAY || tv->arr_type != NB_GGUF_I32)
            return nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an array of i32", path);
        if (tv->n < n)
            return nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", path,
                           (unsigned long long)tv->n, (unsigned long long)n);
        ttypes = tv->arr;
    }

    nb_vocab *v;
    NB_TRY(nb_vocab_create(kind, &v));
    st = nb_vocab_set_source(v, path);
    for (uint64_t i = 0; st == NB_OK && i < n; i++) {
        float score = fscores ? fscores[i] : iscores ? (float)iscores[i] : 0.0f;
        nb_token_type type = NB_TOKEN_NORMAL;
        if (ttypes) type = (ttypes[i] >= 0 && ttypes[i] <= NB_TOKEN_BYTE) ? (nb_token_type)ttypes[i] : NB_TOKEN_UNDEFINED;
        st = nb_vocab_add_token(v, toks->strs[i], toks->lens[i], score, type);
        if (st != NB_OK) st = nb_fail_wrap(st, "%s: tokenizer.ggml.tokens[%llu]: ", path, (unsigned long long)i);
    }
    if (st == NB_OK && kind == NB_VOCAB_BPE) {
        const nb_gguf_value *mv;
        st = nb_gguf_get_arr(g, "tokenizer.ggml.merges", NB_GGUF_STRING, &mv);
        if (st != NB_OK) st = nb_fail_wrap(st, "%s: byte-level BPE needs merges: ", path);
        for (uint64_t i = 0; st == NB_OK && i < mv->n; i++) {
            const char *m = mv->strs[i];
            uint64_t ml = mv->lens[i];
            const char *sp = ml > 1 ? memchr(m + 1, ' ', ml - 1) : NULL;
            if (!sp) {
                st = nb_fail(NB_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] = '%.*s' has no space separating two parts",
                             path, (unsigned long long)i, (int)(ml > 64 ? 64 : ml), m);
                break;
            }
            st = nb_vocab_add_merge(v, m, (size_t)(sp - m), sp + 1, (size_t)(ml - (uint64_t)(sp - m) - 1));
        }
    }
    const char *pre = NULL;
    if (st == NB_OK && nb_gguf_find(g, "tokenizer.ggml.pre")) st = nb_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    if (st == NB_OK && kind == NB_VOCAB_BPE) st = nb_vocab_set_pre(v, pre ? pre : "default");
    if (st == NB_OK && kind == NB_VOCAB_SPM) st = nb_vocab_set_pre(v, "default");
    if (st == NB_OK) nb_vocab_pre_defaults(v);

    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.bos_token_id", &v->bos);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.eos_token_id", &v->eos);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.unknown_token_id", &v->unk);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.padding_token_id", &v->pad);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.eot_token_id", &v->eot);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.eom_token_id", &v->eom);
    if (st == NB_OK) st = get_id(g, "tokenizer.ggml.seperator_token_id", &v->sep);
    if (st == NB_OK) st = get_flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    if (st == NB_OK) st = get_flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    if (st == NB_OK) st = get_flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    if (st == NB_OK && nb_gguf_find(g, "tokenizer.chat_template")) {
        const char *t;
        st = nb_gguf_get_str(g, "tokenizer.chat_template", &t);
        if (st == NB_OK) st = nb_vocab_set_chat_template(v, t);
    }
    if (st == NB_OK) st = nb_vocab_finish(v);
    if (st != NB_OK) {
        nb_vocab_free(v);
        return st;
    }
    *out = v;
    return NB_OK;
}
