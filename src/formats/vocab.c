/* nb_vocab: building the vocabulary data, and nb_vocab_load, which finds the
 * tokenizer for a model path (GGUF metadata, HF directory, llama2.c files). */
#include "formats/vocab.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"

nb_status nb_vocab_create(nb_vocab_kind kind, nb_vocab **out) {
    *out = NULL;
    if (kind != NB_VOCAB_SPM && kind != NB_VOCAB_BPE)
        return nb_fail(NB_ERR_INVALID, "vocab kind %d: allowed SPM (1) or BPE (2)", (int)kind);
    nb_vocab *v = nb_calloc(1, sizeof *v);
    if (!v) return NB_ERR_NOMEM;
    v->kind = kind;
    v->bos = v->eos = v->unk = v->pad = v->eot = v->eom = v->sep = -1;
    if (kind == NB_VOCAB_SPM) {
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
    }
    *out = v;
    return NB_OK;
}

void nb_vocab_free(nb_vocab *v) {
    if (!v) return;
    free(v->pre);
    free(v->source);
    free(v->chat_template);
    free(v->pool);
    free(v->text_off);
    free(v->text_len);
    free(v->scores);
    free(v->types);
    free(v->m_off);
    free(v->m_len);
    free(v);
}

/* Copies len bytes + NUL into the pool; returns the offset. */
static nb_status pool_add(nb_vocab *v, const char *s, size_t len, uint64_t *off) {
    if (len > NB_VOCAB_MAX_TOKEN_BYTES)
        return nb_fail(NB_ERR_RANGE, "token text of %zu bytes: the limit is %d", len, NB_VOCAB_MAX_TOKEN_BYTES);
    if (v->pool_len + len + 1 > v->pool_cap) {
        size_t cap = v->pool_cap ? v->pool_cap : 4096;
        while (cap < v->pool_len + len + 1) {
            if (cap > ((size_t)1 << 40)) return nb_fail(NB_ERR_RANGE, "vocab text pool too large");
            cap *= 2;
        }
        char *p = nb_realloc(v->pool, cap);
        if (!p) return NB_ERR_NOMEM;
        v->pool = p;
        v->pool_cap = cap;
    }
    if (len) memcpy(v->pool + v->pool_len, s, len);
    v->pool[v->pool_len + len] = 0;
    *off = v->pool_len;
    v->pool_len += len + 1;
    return NB_OK;
}

nb_status nb_vocab_add_token(nb_vocab *v, const char *text, size_t len, float score, nb_token_type type) {
    if (v->n_tokens >= NB_VOCAB_MAX_TOKENS)
        return nb_fail(NB_ERR_RANGE, "more than %d tokens", NB_VOCAB_MAX_TOKENS);
    if (v->n_tokens == v->cap_tokens) {
        int32_t cap = v->cap_tokens ? v->cap_tokens * 2 : 1024;
        uint64_t *o = nb_realloc(v->text_off, (size_t)cap * sizeof *o);
        if (!o) return NB_ERR_NOMEM;
        v->text_off = o;
        uint32_t *l = nb_realloc(v->text_len, (size_t)cap * sizeof *l);
        if (!l) return NB_ERR_NOMEM;
        v->text_len = l;
        float *s = nb_realloc(v->scores, (size_t)cap * sizeof *s);
        if (!s) return NB_ERR_NOMEM;
        v->scores = s;
        uint8_t *t = nb_realloc(v->types, (size_t)cap);
        if (!t) return NB_ERR_NOMEM;
        v->types = t;
        v->cap_tokens = cap;
    }
    uint64_t off;
    NB_TRY(pool_add(v, text, len, &off));
    int32_t id = v->n_tokens++;
    v->text_off[id] = off;
    v->text_len[id] = (uint32_t)len;
    v->scores[id] = score;
    v->types[id] = (uint8_t)((unsigned)type <= NB_TOKEN_BYTE ? type : NB_TOKEN_UNDEFINED);
    return NB_OK;
}

nb_status nb_vocab_add_merge(nb_vocab *v, const char *left, size_t llen, const char *right, size_t rlen) {
    if (v->n_merges >= NB_VOCAB_MAX_TOKENS * 2)
        return nb_fail(NB_ERR_RANGE, "more than %d merges", NB_VOCAB_MAX_TOKENS * 2);
    if (v->n_merges == v->cap_merges) {
        int32_t cap = v->cap_merges ? v->cap_merges * 2 : 1024;
        uint64_t *o = nb_realloc(v->m_off, (size_t)cap * 2 * sizeof *o);
        if (!o) return NB_ERR_NOMEM;
        v->m_off = o;
        uint32_t *l = nb_realloc(v->m_len, (size_t)cap * 2 * sizeof *l);
        if (!l) return NB_ERR_NOMEM;
        v->m_len = l;
        v->cap_merges = cap;
    }
    uint64_t lo, ro;
    NB_TRY(pool_add(v, left, llen, &lo));
    NB_TRY(pool_add(v, right, rlen, &ro));
    int32_t r = v->n_merges++;
    v->m_off[2 * r] = lo;
    v->m_len[2 * r] = (uint32_t)llen;
    v->m_off[2 * r + 1] = ro;
    v->m_len[2 * r + 1] = (uint32_t)rlen;
    return NB_OK;
}

static nb_status set_str(char **dst, const char *s) {
    char *c = NULL;
    if (s) {
        c = nb_strdup(s);
        if (!c) return NB_ERR_NOMEM;
    }
    free(*dst);
    *dst = c;
    return NB_OK;
}

nb_status nb_vocab_set_pre(nb_vocab *v, const char *pre) { return set_str(&v->pre, pre); }
nb_status nb_vocab_set_source(nb_vocab *v, const char *source) { return set_str(&v->source, source); }
nb_status nb_vocab_set_chat_template(nb_vocab *v, const char *tmpl) { return set_str(&v->chat_template, tmpl); }

void nb_vocab_pre_defaults(nb_vocab *v) {
    if (v->kind != NB_VOCAB_BPE || !v->pre) return;
    static const char *llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                   "midm-2.0", "lfm2", "tekken"};
    for (size_t i = 0; i < sizeof llama3 / sizeof llama3[0]; i++)
        if (!strcmp(v->pre, llama3[i])) {
            v->add_bos = true;
            v->ignore_merges = true;
        }
    if (!strcmp(v->pre, "chameleon")) v->add_bos = true;
    if (!strcmp(v->pre, "minicpm5")) v->ignore_merges = true;
    if (!strcmp(v->pre, "chatglm-bpe") || !strcmp(v->pre, "glm4")) v->bos = -1;
}

int32_t nb_vocab_find(const nb_vocab *v, const char *text, size_t len) {
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->text_len[i] == len && !memcmp(v->pool + v->text_off[i], text, len)) return i;
    return -1;
}

nb_status nb_vocab_finish(nb_vocab *v) {
    const char *src = v->source ? v->source : "vocab";
    if (v->n_tokens <= 0) return nb_fail(NB_ERR_FORMAT, "%s: the vocabulary has no tokens", src);
    struct { int32_t *id; const char *name; } sp[] = {
        {&v->bos, "bos"}, {&v->eos, "eos"}, {&v->unk, "unknown"}, {&v->pad, "padding"},
        {&v->eot, "eot"}, {&v->eom, "eom"}, {&v->sep, "separator"},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        if (*sp[i].id < -1 || *sp[i].id >= v->n_tokens) {
            if (*sp[i].id != -1)
                NB_DEBUG("%s: %s token id %d is outside 0..%d; treated as none", src, sp[i].name, *sp[i].id,
                         v->n_tokens - 1);
            *sp[i].id = -1;
        }
    }
    if (v->add_bos && v->bos < 0)
        return nb_fail(NB_ERR_FORMAT, "%s: add_bos_token is true but there is no BOS token id", src);
    if (v->add_eos && v->eos < 0)
        return nb_fail(NB_ERR_FORMAT, "%s: add_eos_token is true but there is no EOS token id", src);
    if (!v->pre) NB_TRY(nb_vocab_set_pre(v, "default"));
    return NB_OK;
}

/* ---- finding the tokenizer ------------------------------------------------ */

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static nb_status load_file_bytes(const char *path, uint8_t **data, size_t *len) {
    char *d;
    nb_status st = nb_read_file(path, NB_VOCAB_MAX_FILE_BYTES, &d, len);
    *data = (uint8_t *)d;
    return st;
}

static bool is_gguf_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char m[4] = {0};
    size_t n = fread(m, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(m, "GGUF", 4);
}

static nb_status load_gguf(const char *path, nb_vocab **out) {
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_status st = nb_vocab_from_gguf(g, out);
    nb_gguf_close(g);
    return st;
}

static nb_status load_hf_json(const char *path, nb_vocab **out) {
    uint8_t *js, *cfg = NULL;
    size_t jl, cl = 0;
    NB_TRY(load_file_bytes(path, &js, &jl));
    /* tokenizer_config.json beside it, if any */
    char cpath[4096];
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) : 0;
    snprintf(cpath, sizeof cpath, "%.*s%stokenizer_config.json", dl, path, slash ? "/" : "");
    if (nb_file_exists(cpath)) {
        nb_status st = load_file_bytes(cpath, &cfg, &cl);
        if (st != NB_OK) { free(js); return st; }
    }
    nb_status st = nb_vocab_from_hf_json((const char *)js, jl, (const char *)cfg, cl, path, out);
    free(js);
    free(cfg);
    return st;
}

static nb_status load_spm_model(const char *path, nb_vocab **out) {
    uint8_t *d;
    size_t n;
    NB_TRY(load_file_bytes(path, &d, &n));
    nb_status st = nb_vocab_from_spm_model(d, n, path, out);
    free(d);
    return st;
}

static nb_status load_llama2c_tok(const char *path, nb_vocab **out) {
    uint8_t *d;
    size_t n;
    NB_TRY(load_file_bytes(path, &d, &n));
    nb_status st = nb_vocab_from_llama2c(d, n, -1, path, out);
    free(d);
    return st;
}

/* A file given as the tokenizer itself: decide by content / name. */
static nb_status load_tokenizer_file(const char *path, nb_vocab **out) {
    if (nb_is_dir(path)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/tokenizer.json", path);
        if (nb_file_exists(p)) return load_hf_json(p, out);
        snprintf(p, sizeof p, "%s/tokenizer.model", path);
        if (nb_file_exists(p)) return load_spm_model(p, out);
        return nb_fail(NB_ERR_NOT_FOUND, "%s: directory has neither tokenizer.json nor tokenizer.model", path);
    }
    if (!nb_file_exists(path)) return nb_fail(NB_ERR_NOT_FOUND, "%s: no such file", path);
    if (is_gguf_file(path)) return load_gguf(path, out);
    if (has_suffix(path, ".json")) return load_hf_json(path, out);
    if (has_suffix(path, ".model")) return load_spm_model(path, out);
    if (has_suffix(path, ".bin")) return load_llama2c_tok(path, out);
    return nb_fail(NB_ERR_UNSUPPORTED,
                   "%s: not a known tokenizer file (allowed: GGUF, tokenizer.json, tokenizer.model, llama2.c "
                   "tokenizer .bin)",
                   path);
}

/* A llama2.c checkpoint: a 7 x int32 header, no magic. Tokenizer files
 * start with max_token_length followed by a float score. We tell them apart
 * by the header looking like model dimensions. */
static bool looks_like_llama2c_checkpoint(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    int32_t h[7];
    size_t n = fread(h, sizeof h[0], 7, f);
    fclose(f);
    if (n != 7) return false;
    int32_t vocab = h[5] < 0 ? -h[5] : h[5];
    return h[0] > 0 && h[0] <= 65536 && h[1] > 0 && h[2] > 0 && h[2] <= 1024 && h[3] > 0 && h[4] > 0 &&
           h[4] <= h[3] && vocab > 0 && h[6] > 0;
}

static nb_status load_beside_llama2c(const char *model_path, nb_vocab **out) {
    char dir[4096], stem[1024], p[4096 + 1100];
    const char *slash = strrchr(model_path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - model_path), model_path);
    else snprintf(dir, sizeof dir, ".");
    const char *base = slash ? slash + 1 : model_path;
    snprintf(stem, sizeof stem, "%s", base);
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    snprintf(p, sizeof p, "%s/tokenizer.bin", dir);
    if (nb_file_exists(p)) return load_llama2c_tok(p, out);
    DIR *d = opendir(dir);
    if (!d) return nb_fail(NB_ERR_IO, "%s: cannot list its folder %s to find the tokenizer", model_path, dir);
    char found[1024] = {0};
    int n_found = 0;
    size_t sl = strlen(stem);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strncmp(nm, stem, sl) && !strncmp(nm + sl, ".tok", 4) && has_suffix(nm, ".bin")) {
            if (n_found++ == 0) snprintf(found, sizeof found, "%s", nm);
        }
    }
    closedir(d);
    if (n_found == 1) {
        snprintf(p, sizeof p, "%s/%s", dir, found);
        return load_llama2c_tok(p, out);
    }
    if (n_found > 1)
        return nb_fail(NB_ERR_INVALID, "%s: %d files %s.tok*.bin beside it; pass --tokenizer FILE to choose one",
                       model_path, n_found, stem);
    return nb_fail(NB_ERR_NOT_FOUND,
                   "%s: llama2.c checkpoints carry no tokenizer and none was found beside it (tokenizer.bin or "
                   "%s.tok*.bin); pass --tokenizer FILE",
                   model_path, stem);
}

nb_status nb_vocab_load(const char *model_path, const char *tokenizer_path, nb_vocab **out) {
    *out = NULL;
    if (tokenizer_path) return load_tokenizer_file(tokenizer_path, out);
    if (!model_path) return nb_fail(NB_ERR_INVALID, "no model or tokenizer path given");
    if (nb_is_dir(model_path)) return load_tokenizer_file(model_path, out);
    if (!nb_file_exists(model_path)) return nb_fail(NB_ERR_NOT_FOUND, "%s: no such file", model_path);
    if (is_gguf_file(model_path)) return load_gguf(model_path, out);
    if (has_suffix(model_path, ".bin") && looks_like_llama2c_checkpoint(model_path))
        return load_beside_llama2c(model_path, out);
    return load_tokenizer_file(model_path, out);
}
