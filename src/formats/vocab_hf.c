/* Vocabulary from Hugging Face tokenizer files.
 *
 * tokenizer.json (only "model": {"type": "BPE"} is supported):
 *   model.vocab          {"piece": id, ...}
 *   model.merges         ["left right", ...] or [["left", "right"], ...], in rank order
 *   model.byte_fallback  true for SentencePiece-style BPE (pieces with U+2581,
 *                        <0xNN> byte tokens): loaded as an SPM vocab whose
 *                        piece scores are -(rank of the merge that forms the
 *                        piece), so the SPM algorithm merges in rank order
 *   added_tokens         [{"id", "content", "special"}]: special -> control,
 *                        else user-defined
 *   pre_tokenizer        byte-level vocabularies: ByteLevel (use_regex) = gpt-2,
 *                        or a Sequence of Split {pattern: {Regex}, behavior
 *                        "Isolated"} + ByteLevel {use_regex: false}; the regex
 *                        list must equal one of the known pre-tokenizers'
 *                        (table below), else the file is refused naming it.
 *   normalizer           SPM-style: Prepend("\u2581") or Metaspace -> add_space_prefix
 * tokenizer_config.json (optional): bos_token / eos_token (string or
 *   {"content": ...}), add_bos_token, add_eos_token, chat_template (string,
 *   or a list of {name, template}: the one named "default"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vocab.h"

/* Split regexes of tokenizer.json files (as the models ship them), and the
 * pre-tokenizer name they mean. */
static const struct {
    const char *pre;
    const char *re[4];
} known_splits[] = {
    {"llama-bpe",
     {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"qwen2",
     {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"gpt-4o",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"starcoder", {"\\p{N}", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"}},
    {"gpt-2", {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"}},
};

#define FAIL_JSON(...) nb_fail(NB_ERR_FORMAT, __VA_ARGS__)

static const char *token_content(json_t *t) {
    if (json_is_string(t)) return json_string_value(t);
    if (json_is_object(t) && json_is_string(json_object_get(t, "content")))
        return json_string_value(json_object_get(t, "content"));
    return NULL;
}

/* Collects the Split regexes of the pre_tokenizer and maps them to a name. */
static nb_status map_pre_tokenizer(json_t *pre, const char *name, const char **out) {
    *out = NULL;
    if (!json_is_object(pre))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: byte-level BPE without a pre_tokenizer is not supported", name);
    const char *regs[8];
    int nr = 0;
    bool bytelevel = false, bl_regex = false;
    json_t *items = NULL;
    const char *type = json_string_value(json_object_get(pre, "type"));
    if (type && !strcmp(type, "Sequence")) {
        items = json_object_get(pre, "pretokenizers");
        if (!json_is_array(items))
            return FAIL_JSON("%s: pre_tokenizer.pretokenizers must be an array", name);
    }
    size_t n = items ? json_array_size(items) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *p = items ? json_array_get(items, i) : pre;
        const char *ty = json_is_object(p) ? json_string_value(json_object_get(p, "type")) : NULL;
        if (!ty) return FAIL_JSON("%s: pre_tokenizer entry %zu has no \"type\" string", name, i);
        if (!strcmp(ty, "ByteLevel")) {
            bytelevel = true;
            json_t *ur = json_object_get(p, "use_regex");
            bl_regex = !ur || json_is_true(ur);
        } else if (!strcmp(ty, "Split")) {
            json_t *pat = json_object_get(p, "pattern");
            const char *re = json_is_object(pat) ? json_string_value(json_object_get(pat, "Regex")) : NULL;
            const char *beh = json_string_value(json_object_get(p, "behavior"));
            if (!re) return nb_fail(NB_ERR_UNSUPPORTED, "%s: pre_tokenizer Split %zu has no Regex pattern", name, i);
            if (beh && strcmp(beh, "Isolated"))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: pre_tokenizer Split behavior '%s' (only Isolated)", name, beh);
            if (json_is_true(json_object_get(p, "invert")))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: pre_tokenizer Split with invert=true", name);
            if (nr == 8) return nb_fail(NB_ERR_UNSUPPORTED, "%s: more than 8 Split regexes", name);
            regs[nr++] = re;
        } else if (!strcmp(ty, "Digits") || !strcmp(ty, "Punctuation") || !strcmp(ty, "Metaspace") ||
                   !strcmp(ty, "Whitespace") || !strcmp(ty, "WhitespaceSplit")) {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: pre_tokenizer type '%s' is not supported (Split + ByteLevel only)",
                           name, ty);
        } else {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: unknown pre_tokenizer type '%s'", name, ty);
        }
    }
    if (!bytelevel)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: the pre_tokenizer has no ByteLevel step (not a byte-level BPE)", name);
    if (bl_regex) {
        if (nr) return nb_fail(NB_ERR_UNSUPPORTED, "%s: Split regexes combined with ByteLevel use_regex", name);
        *out = "gpt-2";
        return NB_OK;
    }
    for (size_t k = 0; k < sizeof known_splits / sizeof known_splits[0]; k++) {
        int m = 0;
        while (m < 4 && known_splits[k].re[m]) m++;
        if (m != nr) continue;
        bool same = true;
        for (int i = 0; i < nr && same; i++) same = !strcmp(regs[i], known_splits[k].re[i]);
        if (same) {
            *out = known_splits[k].pre;
            return NB_OK;
        }
    }
    return nb_fail(NB_ERR_UNSUPPORTED,
                   "%s: unknown pre-tokenizer: Split regex '%.200s'%s is none of the known ones (llama-bpe, qwen2, "
                   "gpt-4o, tekken, starcoder, gpt-2); convert the model to GGUF to name its pre-tokenizer",
                   name, nr ? regs[0] : "", nr > 1 ? " (and more)" : "");
}

static bool spm_style(json_t *root, json_t *model) {
    if (json_is_true(json_object_get(model, "byte_fallback"))) return true;
    json_t *pre = json_object_get(root, "pre_tokenizer");
    const char *ty = json_is_object(pre) ? json_string_value(json_object_get(pre, "type")) : NULL;
    return ty && !strcmp(ty, "Metaspace");
}

static bool wants_space_prefix(json_t *root) {
    json_t *norm = json_object_get(root, "normalizer");
    json_t *list = json_object_get(norm, "normalizers");
    size_t n = json_is_array(list) ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(list) ? json_array_get(list, i) : norm;
        const char *ty = json_string_value(json_object_get(e, "type"));
        if (ty && !strcmp(ty, "Prepend")) return true;
    }
    json_t *pre = json_object_get(root, "pre_tokenizer");
    const char *ty = json_string_value(json_object_get(pre, "type"));
    if (ty && !strcmp(ty, "Metaspace")) {
        const char *sch = json_string_value(json_object_get(pre, "prepend_scheme"));
        if (sch) return strcmp(sch, "never") != 0;
        return !json_is_false(json_object_get(pre, "add_prefix_space"));
    }
    return false;
}

static nb_status build(json_t *root, json_t *cfg, const char *name, nb_vocab **out) {
    if (!json_is_object(root)) return FAIL_JSON("%s: the top level is not a JSON object", name);
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return FAIL_JSON("%s: \"model\" must be an object", name);
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (mtype && strcmp(mtype, "BPE"))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: model type '%s' is not supported (only BPE)", name, mtype);
    json_t *jv = json_object_get(model, "vocab");
    if (!json_is_object(jv)) return FAIL_JSON("%s: model.vocab must be an object {piece: id}", name);
    json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_array(merges)) return FAIL_JSON("%s: model.merges must be an array", name);
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return FAIL_JSON("%s: added_tokens must be an array", name);
    bool spm = spm_style(root, model);

    /* id -> (text, type), ids may be sparse */
    int64_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(jv, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= NB_VOCAB_MAX_TOKENS)
            return FAIL_JSON("%s: model.vocab['%.64s'] must be an integer id in 0..%d", name, key,
                             NB_VOCAB_MAX_TOKENS - 1);
        if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
    }
    size_t na = json_is_array(added) ? json_array_size(added) : 0;
    for (size_t i = 0; i < na; i++) {
        json_t *a = json_array_get(added, i);
        json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= NB_VOCAB_MAX_TOKENS ||
            !json_is_string(json_object_get(a, "content")))
            return FAIL_JSON("%s: added_tokens[%zu] needs an integer \"id\" in 0..%d and a string \"content\"", name, i,
                             NB_VOCAB_MAX_TOKENS - 1);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id < 0) return FAIL_JSON("%s: empty vocabulary", name);
    size_t n = (size_t)max_id + 1;
    const char **text = nb_calloc(n, sizeof *text);
    size_t *tlen = nb_calloc(n, sizeof *tlen);
    uint8_t *type = nb_calloc(n, 1);
    float *score = nb_calloc(n, sizeof *score);
    nb_vocab *v = NULL;
    nb_status st = (text && tlen && type && score) ? NB_OK : NB_ERR_NOMEM;
    if (st == NB_OK) st = nb_vocab_create(spm ? NB_VOCAB_SPM : NB_VOCAB_BPE, &v);
    if (st == NB_OK) st = nb_vocab_set_source(v, name);
    if (st == NB_OK) {
        json_object_foreach(jv, key, val) {
            size_t id = (size_t)json_integer_value(val);
            text[id] = key;
            tlen[id] = strlen(key);
            type[id] = NB_TOKEN_NORMAL;
            if (spm && tlen[id] == 6 && !strncmp(key, "<0x", 3) && key[5] == '>') type[id] = NB_TOKEN_BYTE;
            score[id] = spm ? -1e9f : 0.0f;
        }
        for (size_t i = 0; i < na; i++) {
            json_t *a = json_array_get(added, i);
            size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
            text[id] = json_string_value(json_object_get(a, "content"));
            tlen[id] = json_string_length(json_object_get(a, "content"));
            type[id] = json_is_true(json_object_get(a, "special")) ? NB_TOKEN_CONTROL : NB_TOKEN_USER_DEFINED;
            score[id] = 0.0f;
        }
    }
    /* merges: parse into (l, r) pairs; SPM-style gets scores from them */
    size_t nm = merges ? json_array_size(merges) : 0;
    for (size_t i = 0; st == NB_OK && i < nm; i++) {
        json_t *m = json_array_get(merges, i);
        const char *l, *r;
        size_t ll, rl;
        char *tmp = NULL;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t sl = json_string_length(m);
            const char *sp = sl > 1 ? memchr(s + 1, ' ', sl - 1) : NULL;
            if (!sp) { st = FAIL_JSON("%s: model.merges[%zu] = '%.64s' has no space", name, i, s); break; }
            l = s; ll = (size_t)(sp - s); r = sp + 1; rl = sl - ll - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            l = json_string_value(json_array_get(m, 0)); ll = json_string_length(json_array_get(m, 0));
            r = json_string_value(json_array_get(m, 1)); rl = json_string_length(json_array_get(m, 1));
        } else {
            st = FAIL_JSON("%s: model.merges[%zu] must be \"left right\" or [\"left\", \"right\"]", name, i);
            break;
        }
        if (spm) {
            tmp = nb_malloc(ll + rl + 1);
            if (!tmp) { st = NB_ERR_NOMEM; break; }
            memcpy(tmp, l, ll);
            memcpy(tmp + ll, r, rl);
            json_t *idv = json_object_getn(jv, tmp, ll + rl);
            if (json_is_integer(idv)) {
                size_t id = (size_t)json_integer_value(idv);
                if (score[id] == -1e9f) score[id] = -(float)i;
            }
            free(tmp);
        } else {
            st = nb_vocab_add_merge(v, l, ll, r, rl);
        }
    }
    for (size_t id = 0; st == NB_OK && id < n; id++) {
        if (text[id]) {
            st = nb_vocab_add_token(v, text[id], tlen[id], score[id], (nb_token_type)type[id]);
        } else { /* hole in the ids */
            char pad[32];
            int k = snprintf(pad, sizeof pad, "[PAD%zu]", id);
            st = nb_vocab_add_token(v, pad, (size_t)k, 0.0f, NB_TOKEN_UNUSED);
        }
    }
    if (st == NB_OK && spm) {
        v->add_space_prefix = wants_space_prefix(root);
        v->unk = v->bos = v->eos = -1;
        json_t *unk = json_object_get(model, "unk_token");
        if (json_is_string(unk)) v->unk = nb_vocab_find(v, json_string_value(unk), json_string_length(unk));
        if (v->unk >= 0) v->types[v->unk] = NB_TOKEN_UNKNOWN;
    }
    if (st == NB_OK && !spm) {
        const char *pre;
        st = map_pre_tokenizer(json_object_get(root, "pre_tokenizer"), name, &pre);
        if (st == NB_OK) st = nb_vocab_set_pre(v, pre);
        if (st == NB_OK) {
            v->add_bos = false;
            nb_vocab_pre_defaults(v);
        }
    }
    /* tokenizer_config.json */
    if (st == NB_OK && json_is_object(cfg)) {
        const char *b = token_content(json_object_get(cfg, "bos_token"));
        const char *e = token_content(json_object_get(cfg, "eos_token"));
        const char *u = token_content(json_object_get(cfg, "unk_token"));
        if (b) v->bos = nb_vocab_find(v, b, strlen(b));
        if (e) v->eos = nb_vocab_find(v, e, strlen(e));
        if (u) v->unk = nb_vocab_find(v, u, strlen(u));
        json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
        if (json_is_boolean(ab)) v->add_bos = json_is_true(ab);
        else if (spm) v->add_bos = v->bos >= 0;
        if (json_is_boolean(ae)) v->add_eos = json_is_true(ae);
        json_t *ct = json_object_get(cfg, "chat_template");
        if (json_is_string(ct)) {
            st = nb_vocab_set_chat_template(v, json_string_value(ct));
        } else if (json_is_array(ct)) {
            for (size_t i = 0; i < json_array_size(ct) && st == NB_OK; i++) {
                json_t *c = json_array_get(ct, i);
                const char *nm2 = json_string_value(json_object_get(c, "name"));
                const char *tp = json_string_value(json_object_get(c, "template"));
                if (nm2 && tp && !strcmp(nm2, "default")) st = nb_vocab_set_chat_template(v, tp);
            }
        }
    } else if (st == NB_OK && spm) {
        v->bos = nb_vocab_find(v, "<s>", 3);
        v->eos = nb_vocab_find(v, "</s>", 4);
        v->add_bos = v->bos >= 0;
    }
    if (st == NB_OK) st = nb_vocab_finish(v);
    free(text);
    free(tlen);
    free(type);
    free(score);
    if (st != NB_OK) {
        nb_vocab_free(v);
        return st;
    }
    *out = v;
    return NB_OK;
}

nb_status nb_vocab_from_hf_json(const char *json, size_t len, const char *config_json, size_t config_len,
                                const char *name, nb_vocab **out) {
    *out = NULL;
    if (!name) name = "tokenizer.json";
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &err);
    if (!root) return nb_fail(NB_ERR_FORMAT, "%s: line %d column %d: %s", name, err.line, err.column, err.text);
    json_t *cfg = NULL;
    if (config_json) {
        cfg = json_loadb(config_json, config_len, 0, &err);
        if (!cfg) {
            json_decref(root);
            return nb_fail(NB_ERR_FORMAT, "tokenizer_config.json beside %s: line %d column %d: %s", name, err.line,
                           err.column, err.text);
        }
    }
    nb_status st = build(root, cfg, name, out);
    json_decref(root);
    json_decref(cfg);
    return st;
}
