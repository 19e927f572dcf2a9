/* The tokenizer object: lookup tables built from an nb_vocab, special-token
 * partitioning, the tokenize driver, pieces, detokenization (whole and
 * incremental), and UTF-8 helpers. The merge algorithms live in tok_spm.c
 * and tok_bpe.c, the regex pre-tokenizers in pretok.c. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "tokenizer/tok_internal.h"

/* ---- UTF-8 ------------------------------------------------------------------ */

int nb_utf8_char(const uint8_t *s, size_t n) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c == 0xE0) { need = 3; lo = 0xA0; }
    else if (c == 0xED) { need = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 3;
    else if (c == 0xF0) { need = 4; lo = 0x90; }
    else if (c == 0xF4) { need = 4; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 4;
    else return -1;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n) return 0;
        uint8_t b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -1;
    }
    return need;
}

bool nb_utf8_valid(const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        int k = nb_utf8_char(p + i, n - i);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

int nb_utf8_put(uint32_t cp, char *b) {
    if (cp < 0x80) { b[0] = (char)cp; return 1; }
    if (cp < 0x800) { b[0] = (char)(0xC0 | (cp >> 6)); b[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12)); b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); b[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (char)(0xF0 | (cp >> 18)); b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int nb_utf8_get(const uint8_t *s, size_t n, uint32_t *cp) {
    int k = nb_utf8_char(s, n);
    if (k <= 0) { *cp = 0xFFFD; return 1; }
    uint32_t c = s[0];
    if (k == 1) *cp = c;
    else if (k == 2) *cp = ((c & 0x1F) << 6) | (s[1] & 0x3F);
    else if (k == 3) *cp = ((c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    else *cp = ((c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return k;
}

nb_status nb_idvec_push(nb_idvec *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *p = nb_realloc(a->v, cap * sizeof *p);
        if (!p) return NB_ERR_NOMEM;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return NB_OK;
}

/* ---- hash tables ------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ULL

static uint64_t table_size(uint64_t n) {
    uint64_t s = 64;
    while (s < n * 2) s *= 2;
    return s;
}

int32_t nb_tok_find(const nb_tokenizer *t, const char *s, size_t n) {
    const nb_vocab *v = t->v;
    uint64_t h = fnv(FNV_SEED, s, n) & t->tok_mask;
    for (;;) {
        uint32_t e = t->tok_ht[h];
        if (!e) return -1;
        int32_t id = (int32_t)e - 1;
        if (v->text_len[id] == n && !memcmp(v->pool + v->text_off[id], s, n)) return id;
        h = (h + 1) & t->tok_mask;
    }
}

int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *text, size_t len) { return nb_tok_find(t, text, len); }

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn) {
    uint64_t h = fnv(FNV_SEED, l, ln);
    h ^= 0xff;
    h *= 0x100000001b3ULL;
    return fnv(h, r, rn);
}

int32_t nb_tok_merge_rank(const nb_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn) {
    if (!t->mrg_ht) return -1;
    const nb_vocab *v = t->v;
    uint64_t h = pair_hash(l, ln, r, rn) & t->mrg_mask;
    for (;;) {
        uint32_t e = t->mrg_ht[h];
        if (!e) return -1;
        int32_t m = (int32_t)e - 1;
        if (v->m_len[2 * m] == ln && v->m_len[2 * m + 1] == rn && !memcmp(v->pool + v->m_off[2 * m], l, ln) &&
            !memcmp(v->pool + v->m_off[2 * m + 1], r, rn))
            return m;
        h = (h + 1) & t->mrg_mask;
    }
}

/* ---- creation --------------------------------------------------------------- */

static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
};

static int cmp_special_len_desc(const void *a, const void *b, void *ctx) {
    const nb_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (v->text_len[x] != v->text_len[y]) return v->text_len[x] > v->text_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool is_special_type(uint8_t ty) {
    return ty == NB_TOKEN_CONTROL || ty == NB_TOKEN_USER_DEFINED || ty == NB_TOKEN_UNKNOWN;
}

/* Decoded bytes of token id into buf (cap >= text_len + 8). */
static size_t decode_piece(const nb_tokenizer *t, int32_t id, char *buf) {
    const nb_vocab *v = t->v;
    size_t n;
    const char *s = nb_vocab_text(v, id, &n);
    uint8_t ty = v->types[id];
    if (is_special_type(ty)) {
        memcpy(buf, s, n);
        return n;
    }
    if (ty == NB_TOKEN_BYTE && n == 6 && !memcmp(s, "<0x", 3)) {
        buf[0] = (char)strtol((char[]){s[3], s[4], 0}, NULL, 16);
        return 1;
    }
    if (ty != NB_TOKEN_NORMAL) return 0; /* unused / undefined: nothing, as llama.cpp */
    size_t o = 0;
    if (v->kind == NB_VOCAB_SPM) {
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                buf[o++] = ' ';
                i += 3;
            } else {
                buf[o++] = s[i++];
            }
        }
        return o;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = nb_utf8_get((const uint8_t *)s + i, n - i, &cp);
        int b = nb_bpe_cp_to_byte(cp);
        if (b >= 0) {
            buf[o++] = (char)b;
        } else { /* not in the byte alphabet: keep the character's own bytes */
            memcpy(buf + o, s + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    return o;
}

static nb_status build(nb_tokenizer *t) {
    nb_vocab *v = t->v;
    const char *src = v->source ? v->source : "vocab";
    int32_t n = v->n_tokens;
    uint64_t ts = table_size((uint64_t)n);
    t->tok_ht = nb_calloc(ts, sizeof *t->tok_ht);
    if (!t->tok_ht) return NB_ERR_NOMEM;
    t->tok_mask = ts - 1;
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const char *s = nb_vocab_text(v, id, &len);
        uint64_t h = fnv(FNV_SEED, s, len) & t->tok_mask;
        for (;;) {
            uint32_t e = t->tok_ht[h];
            if (!e) {
                t->tok_ht[h] = (uint32_t)id + 1;
                break;
            }
            int32_t o = (int32_t)e - 1;
            if (v->text_len[o] == len && !memcmp(v->pool + v->text_off[o], s, len))
                return nb_fail(NB_ERR_FORMAT, "%s: duplicate token text '%.*s' at ids %d and %d", src,
                               (int)(len > 64 ? 64 : len), s, o, id);
            h = (h + 1) & t->tok_mask;
        }
    }
    if (v->n_merges > 0) {
        uint64_t ms = table_size((uint64_t)v->n_merges);
        t->mrg_ht = nb_calloc(ms, sizeof *t->mrg_ht);
        if (!t->mrg_ht) return NB_ERR_NOMEM;
        t->mrg_mask = ms - 1;
        for (int32_t m = 0; m < v->n_merges; m++) {
            const char *l = v->pool + v->m_off[2 * m], *r = v->pool + v->m_off[2 * m + 1];
            size_t ln = v->m_len[2 * m], rn = v->m_len[2 * m + 1];
            uint64_t h = pair_hash(l, ln, r, rn) & t->mrg_mask;
            bool dup = false;
            for (;;) {
                uint32_t e = t->mrg_ht[h];
                if (!e) break;
                int32_t o = (int32_t)e - 1;
                if (v->m_len[2 * o] == ln && v->m_len[2 * o + 1] == rn && !memcmp(v->pool + v->m_off[2 * o], l, ln) &&
                    !memcmp(v->pool + v->m_off[2 * o + 1], r, rn)) {
                    dup = true; /* keep the first (lowest) rank, as llama.cpp's map emplace does */
                    break;
                }
                h = (h + 1) & t->mrg_mask;
            }
            if (!dup) t->mrg_ht[h] = (uint32_t)m + 1;
        }
    } else if (v->kind == NB_VOCAB_BPE) {
        return nb_fail(NB_ERR_FORMAT, "%s: byte-level BPE vocabulary without merges", src);
    }

    /* byte tokens */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        t->byte_tok[b] = -1;
        if (v->kind == NB_VOCAB_SPM) {
            static const char hex[] = "0123456789ABCDEF";
            char hb[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            t->byte_tok[b] = nb_tok_find(t, hb, 6);
            if (t->byte_tok[b] < 0) {
                buf[0] = (char)b;
                t->byte_tok[b] = nb_tok_find(t, buf, 1);
            }
        } else {
            int k = nb_utf8_put(nb_bpe_byte_to_cp((uint8_t)b), buf);
            t->byte_tok[b] = nb_tok_find(t, buf, (size_t)k);
        }
    }

    /* special tokens, longest first */
    t->special = nb_malloc(sizeof(int32_t) * (size_t)n);
    t->eog = nb_calloc((size_t)n, 1);
    if (!t->special || !t->eog) return NB_ERR_NOMEM;
    for (int32_t id = 0; id < n; id++)
        if (is_special_type(v->types[id]) && v->text_len[id] > 0) t->special[t->n_special++] = id;
    qsort_r(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special_len_desc, v);

    /* end-of-generation set: EOS, EOT, EOM and the usual end-of-turn texts */
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        int32_t id = nb_tok_find(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0) t->eog[id] = 1;
    }
    if (v->eos >= 0) t->eog[v->eos] = 1;
    if (v->eot >= 0) t->eog[v->eot] = 1;
    if (v->eom >= 0) t->eog[v->eom] = 1;

    /* decoded pieces */
    size_t total = 0;
    for (int32_t id = 0; id < n; id++) total += v->text_len[id] + 1;
    t->pieces = nb_malloc(total + 16);
    t->piece_off = nb_malloc(sizeof(uint64_t) * (size_t)n);
    t->piece_len = nb_malloc(sizeof(uint32_t) * (size_t)n);
    if (!t->pieces || !t->piece_off || !t->piece_len) return NB_ERR_NOMEM;
    size_t o = 0;
    for (int32_t id = 0; id < n; id++) {
        size_t k = decode_piece(t, id, t->pieces + o); /* decoded is never longer than the text */
        t->piece_off[id] = o;
        t->piece_len[id] = (uint32_t)k;
        if (k > t->max_piece) t->max_piece = k;
        o += k;
    }

    if (v->kind == NB_VOCAB_BPE) {
        nb_status st = nb_pretok_create(v->pre, &t->pre);
        if (st != NB_OK) return nb_fail_wrap(st, "%s: ", src);
    }
    return NB_OK;
}

nb_status nb_tokenizer_create(nb_vocab *v, nb_tokenizer **out) {
    *out = NULL;
    if (!v) return nb_fail(NB_ERR_INVALID, "nb_tokenizer_create: no vocabulary");
    nb_tokenizer *t = nb_calloc(1, sizeof *t);
    if (!t) {
        nb_vocab_free(v);
        return NB_ERR_NOMEM;
    }
    t->v = v;
    nb_status st = build(t);
    if (st != NB_OK) {
        nb_tokenizer_free(t);
        return st;
    }
    *out = t;
    return NB_OK;
}

void nb_tokenizer_free(nb_tokenizer *t) {
    if (!t) return;
    nb_vocab_free(t->v);
    free(t->tok_ht);
    free(t->mrg_ht);
    free(t->special);
    free(t->eog);
    free(t->pieces);
    free(t->piece_off);
    free(t->piece_len);
    nb_pretok_free(t->pre);
    free(t);
}

nb_status nb_tokenizer_load(const char *model_path, const char *tokenizer_path, nb_tokenizer **out) {
    *out = NULL;
    nb_vocab *v;
    NB_TRY(nb_vocab_load(model_path, tokenizer_path, &v));
    return nb_tokenizer_create(v, out);
}

/* ---- tokenize ------------------------------------------------------------------ */

/* A fragment of the input: raw text [off, off+len) or a special token. */
typedef struct {
    size_t off, len;
    int32_t id; /* -1 = raw text */
} fragment;

typedef struct {
    fragment *f;
    size_t n, cap;
} fraglist;

static nb_status frag_insert(fraglist *l, size_t at, fragment f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *p = nb_realloc(l->f, cap * sizeof *p);
        if (!p) return NB_ERR_NOMEM;
        l->f = p;
        l->cap = cap;
    }
    memmove(l->f + at + 1, l->f + at, (l->n - at) * sizeof *l->f);
    l->f[at] = f;
    l->n++;
    return NB_OK;
}

/* Splits raw fragments at every occurrence of each special token (longest
 * token first); control / unknown ones only with parse_special. */
static nb_status partition(const nb_tokenizer *t, const char *text, fraglist *l, bool parse_special) {
    const nb_vocab *v = t->v;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        uint8_t ty = v->types[id];
        if (!parse_special && ty != NB_TOKEN_USER_DEFINED) continue;
        size_t sl;
        const char *s = nb_vocab_text(v, id, &sl);
        for (size_t i = 0; i < l->n; i++) {
            fragment f = l->f[i];
            if (f.id >= 0 || f.len < sl) continue;
            const char *m = memmem(text + f.off, f.len, s, sl);
            if (!m) continue;
            size_t mo = (size_t)(m - text);
            /* replace f by [left] token [right]; the right part is examined next */
            size_t at = i;
            l->f[at].len = mo - f.off;
            if (l->f[at].len == 0) {
                l->f[at] = (fragment){mo, sl, id};
            } else {
                NB_TRY(frag_insert(l, ++at, (fragment){mo, sl, id}));
            }
            size_t re = f.off + f.len, ro = mo + sl;
            if (ro < re) NB_TRY(frag_insert(l, at + 1, (fragment){ro, re - ro, -1}));
            i = at; /* loop increment moves to the right remainder */
        }
    }
    return NB_OK;
}

/* Replaces invalid UTF-8 by U+FFFD (the BPE regexes need valid input). */
static nb_status sanitize_utf8(const char *s, size_t n, char **out, size_t *on) {
    char *b = nb_malloc(n * 3 + 1);
    if (!b) return NB_ERR_NOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = nb_utf8_char((const uint8_t *)s + i, n - i);
        if (k <= 0) {
            memcpy(b + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(b + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        }
    }
    *out = b;
    *on = o;
    return NB_OK;
}

static nb_status spm_fragment(const nb_tokenizer *t, const char *s, size_t n, bool prefix, nb_idvec *out) {
    size_t cnt = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++) cnt += s[i] == ' ';
    char *b = nb_malloc(n + cnt * 2 + 1);
    if (!b) return NB_ERR_NOMEM;
    size_t o = 0;
    if (prefix) { memcpy(b, "\xe2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(b + o, "\xe2\x96\x81", 3); o += 3; }
        else b[o++] = s[i];
    }
    nb_status st = nb_spm_encode(t, b, o, out);
    free(b);
    return st;
}

nb_status nb_tokenize(const nb_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    const nb_vocab *v = t->v;
    nb_idvec out = {0};
    fraglist fl = {0};
    nb_status st = NB_OK;
    char *clean = NULL;
    if (len > 0) {
        if (v->kind == NB_VOCAB_BPE && !nb_utf8_valid(text, len)) {
            st = sanitize_utf8(text, len, &clean, &len);
            text = clean;
        }
        if (st == NB_OK) st = frag_insert(&fl, 0, (fragment){0, len, -1});
        if (st == NB_OK) st = partition(t, text, &fl, parse_special);
    }
    if (st == NB_OK && add_special && v->add_bos) st = nb_idvec_push(&out, v->bos);
    bool prev_special = true;
    for (size_t i = 0; st == NB_OK && i < fl.n; i++) {
        fragment f = fl.f[i];
        if (f.id >= 0) {
            st = nb_idvec_push(&out, f.id);
            prev_special = true;
            continue;
        }
        if (v->kind == NB_VOCAB_SPM)
            st = spm_fragment(t, text + f.off, f.len, v->add_space_prefix && prev_special, &out);
        else
            st = nb_bpe_encode(t, text + f.off, f.len, &out);
        prev_special = false;
    }
    if (st == NB_OK && add_special && v->add_eos) st = nb_idvec_push(&out, v->eos);
    free(fl.f);
    free(clean);
    if (st != NB_OK) {
        free(out.v);
        return st;
    }
    if (!out.v) {
        out.v = nb_malloc(sizeof(int32_t));
        if (!out.v) return NB_ERR_NOMEM;
    }
    *ids = out.v;
    *n_ids = out.n;
    return NB_OK;
}

/* ---- pieces and detokenization ---------------------------------------------- */

const char *nb_token_piece_ref(const nb_tokenizer *t, int32_t id, bool render_special, size_t *len) {
    *len = 0;
    if (id < 0 || id >= t->v->n_tokens) return NULL;
    uint8_t ty = t->v->types[id];
    if (!render_special && (ty == NB_TOKEN_CONTROL || ty == NB_TOKEN_UNKNOWN)) return t->pieces + t->piece_off[id];
    *len = t->piece_len[id];
    return t->pieces + t->piece_off[id];
}

size_t nb_token_piece(const nb_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    size_t n;
    const char *p = nb_token_piece_ref(t, id, render_special, &n);
    if (p && buf) memcpy(buf, p, NB_MIN(n, cap));
    return n;
}

size_t nb_tokenizer_max_piece(const nb_tokenizer *t) { return t->max_piece; }

nb_status nb_detokenize(const nb_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                        size_t *len) {
    *text = NULL;
    *len = 0;
    size_t start = 0;
    if (!render_special && n > 0 && ids[0] == t->v->bos && t->v->bos >= 0) start = 1;
    size_t total = 0;
    for (size_t i = start; i < n; i++) {
        size_t k;
        nb_token_piece_ref(t, ids[i], render_special, &k);
        total += k;
    }
    char *b = nb_malloc(total + 1);
    if (!b) return NB_ERR_NOMEM;
    size_t o = 0;
    bool strip = t->v->kind == NB_VOCAB_SPM && t->v->add_space_prefix;
    for (size_t i = start; i < n; i++) {
        size_t k;
        const char *p = nb_token_piece_ref(t, ids[i], render_special, &k);
        if (strip && k > 0) {
            if (p[0] == ' ' && t->v->types[ids[i]] == NB_TOKEN_NORMAL) { p++; k--; }
            strip = false;
        }
        if (k) memcpy(b + o, p, k);
        o += k;
    }
    b[o] = 0;
    *text = b;
    *len = o;
    return NB_OK;
}

void nb_detok_init(nb_detok *d, const nb_tokenizer *t) {
    memset(d, 0, sizeof *d);
    d->t = t;
}

/* Emits the complete characters of pend+piece; keeps a valid incomplete tail. */
size_t nb_detok_push(nb_detok *d, int32_t id, char *out, size_t cap) {
    size_t k;
    const char *p = nb_token_piece_ref(d->t, id, d->render_special, &k);
    if (d->strip_space && !d->started && k > 0) {
        if (p[0] == ' ') { p++; k--; }
    }
    if (k > 0 || d->render_special) d->started = true;
    NB_ASSERT(cap >= k + NB_DETOK_SLACK);
    size_t o = 0;
    /* work buffer: pending bytes then the piece, processed char by char */
    size_t i = 0, total = (size_t)d->npend + k;
    uint8_t tmp[8];
#define BYTE_AT(j) ((j) < (size_t)d->npend ? d->pend[j] : (uint8_t)p[(j) - (size_t)d->npend])
    while (i < total) {
        size_t avail = total - i < 4 ? total - i : 4;
        for (size_t j = 0; j < avail; j++) tmp[j] = BYTE_AT(i + j);
        int c = nb_utf8_char(tmp, avail);
        if (c > 0) {
            memcpy(out + o, tmp, (size_t)c);
            o += (size_t)c;
            i += (size_t)c;
        } else if (c == 0) {
            break; /* incomplete: hold it back */
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += 1;
        }
    }
    int np = 0;
    uint8_t keep[4];
    for (; i < total; i++) keep[np++] = BYTE_AT(i);
#undef BYTE_AT
    memcpy(d->pend, keep, (size_t)np);
    d->npend = np;
    return o;
}

size_t nb_detok_flush(nb_detok *d, char *out, size_t cap) {
    size_t o = 0;
    if (d->npend > 0 && cap >= 3) {
        memcpy(out, "\xef\xbf\xbd", 3); /* an unfinished character */
        o = 3;
    }
    d->npend = 0;
    return o;
}

/* ---- accessors ---------------------------------------------------------------- */

int32_t nb_tokenizer_n_vocab(const nb_tokenizer *t) { return t->v->n_tokens; }
int32_t nb_tokenizer_bos(const nb_tokenizer *t) { return t->v->bos; }
int32_t nb_tokenizer_eos(const nb_tokenizer *t) { return t->v->eos; }
bool nb_tokenizer_add_bos(const nb_tokenizer *t) { return t->v->add_bos; }
const char *nb_tokenizer_chat_template(const nb_tokenizer *t) { return t->v->chat_template; }
const nb_vocab *nb_tokenizer_vocab(const nb_tokenizer *t) { return t->v; }

bool nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->v->n_tokens && t->eog[id];
}

bool nb_tokenizer_is_control(const nb_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->v->n_tokens && t->v->types[id] == NB_TOKEN_CONTROL;
}
