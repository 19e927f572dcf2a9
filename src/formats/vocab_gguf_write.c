/* nb_vocab -> tokenizer.* GGUF keys (the inverse of vocab_gguf.c). */
#include "formats/vocab_gguf_write.h"

#include <stdlib.h>
#include <string.h>

static nb_status put_id(nb_gguf_writer *w, const char *key, int32_t id) {
    return id >= 0 ? nb_gguf_set_u32(w, key, (uint32_t)id) : NB_OK;
}

nb_status nb_vocab_to_gguf(const nb_vocab *v, nb_gguf_writer *w) {
    uint64_t n = (uint64_t)v->n_tokens;
    const char **strs = malloc((size_t)(n ? n : 1) * sizeof *strs);
    uint64_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    int32_t *types = malloc((size_t)(n ? n : 1) * sizeof *types);
    nb_status st = strs && lens && types ? NB_OK : NB_ERR_NOMEM;
    for (uint64_t i = 0; st == NB_OK && i < n; i++) {
        strs[i] = v->pool + v->text_off[i];
        lens[i] = v->text_len[i];
        types[i] = v->types[i];
    }
    if (st == NB_OK) st = nb_gguf_set_str(w, "tokenizer.ggml.model", v->kind == NB_VOCAB_SPM ? "llama" : "gpt2");
    if (st == NB_OK && v->pre) st = nb_gguf_set_str(w, "tokenizer.ggml.pre", v->pre);
    if (st == NB_OK) st = nb_gguf_set_arr_str(w, "tokenizer.ggml.tokens", strs, lens, n);
    if (st == NB_OK && v->scores) st = nb_gguf_set_arr(w, "tokenizer.ggml.scores", NB_GGUF_F32, v->scores, n);
    if (st == NB_OK) st = nb_gguf_set_arr(w, "tokenizer.ggml.token_type", NB_GGUF_I32, types, n);
    if (st == NB_OK && v->n_merges > 0) {
        /* "left right" strings */
        uint64_t nm = (uint64_t)v->n_merges;
        char **ms = calloc((size_t)nm, sizeof *ms);
        if (!ms) st = NB_ERR_NOMEM;
        for (uint64_t r = 0; st == NB_OK && r < nm; r++) {
            uint32_t ll = v->m_len[2 * r], rl = v->m_len[2 * r + 1];
            ms[r] = malloc((size_t)ll + rl + 2);
            if (!ms[r]) { st = NB_ERR_NOMEM; break; }
            memcpy(ms[r], v->pool + v->m_off[2 * r], ll);
            ms[r][ll] = ' ';
            memcpy(ms[r] + ll + 1, v->pool + v->m_off[2 * r + 1], rl);
            ms[r][ll + 1 + rl] = '\0';
        }
        if (st == NB_OK) st = nb_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)ms, NULL, nm);
        for (uint64_t r = 0; ms && r < nm; r++) free(ms[r]);
        free(ms);
    }
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.bos_token_id", v->bos);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.eos_token_id", v->eos);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.unknown_token_id", v->unk);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.padding_token_id", v->pad);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.eot_token_id", v->eot);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.eom_token_id", v->eom);
    if (st == NB_OK) st = put_id(w, "tokenizer.ggml.seperator_token_id", v->sep);
    if (st == NB_OK) st = nb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (st == NB_OK) st = nb_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
    if (st == NB_OK && v->kind == NB_VOCAB_SPM)
        st = nb_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (st == NB_OK && v->chat_template) st = nb_gguf_set_str(w, "tokenizer.chat_template", v->chat_template);
    free(strs);
    free(lens);
    free(types);
    return st;
}
