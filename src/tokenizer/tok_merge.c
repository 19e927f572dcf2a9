/* The two merge algorithms over a doubly linked list of symbols and a
 * binary heap of candidate pairs (so a long input costs O(n log n), not a
 * rescan per merge):
 *   SPM: a pair is a candidate when its concatenation is a vocab piece; the
 *        highest piece score merges first (leftmost on ties). Final symbols
 *        not in the vocab become <0xNN> byte tokens (unk when there are none).
 *   BPE: a pair is a candidate when (left, right) is a merge; the lowest
 *        rank merges first (leftmost on ties). Words are first mapped through
 *        the GPT-2 byte alphabet: bytes 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF
 *        are their own code point, the other 68 bytes map to U+0100.. in
 *        byte order.
 * A queued pair is stale when either symbol changed length since it was
 * queued (symbols only grow to the right, so that is exact). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef struct {
    int prev, next;
    uint32_t off, n; /* bytes of the text */
} symbol;

typedef struct {
    double key; /* larger first */
    int left, right;
    uint32_t ln, rn;
} pair;

typedef struct {
    pair *a;
    size_t n, cap;
} heap;

static bool before(const pair *x, const pair *y) {
    return x->key > y->key || (x->key == y->key && x->left < y->left);
}

static nb_status heap_push(heap *h, pair p) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        pair *a = nb_realloc(h->a, cap * sizeof *a);
        if (!a) return NB_ERR_NOMEM;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&p, &h->a[up])) break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = p;
    return NB_OK;
}

static pair heap_pop(heap *h) {
    pair top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->a[c + 1], &h->a[c])) c++;
        if (!before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

/* Splits text into UTF-8 characters (lead-byte length, clipped at the end, as
 * llama.cpp does: no validation here). */
static nb_status make_symbols(const char *text, size_t len, symbol **out, int *n_out) {
    symbol *s = nb_malloc((len + 1) * sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    int n = 0;
    for (size_t off = 0; off < len;) {
        uint8_t c = (uint8_t)text[off];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (k > len - off) k = len - off;
        s[n] = (symbol){n - 1, off + k == len ? -1 : n + 1, (uint32_t)off, (uint32_t)k};
        off += k;
        n++;
    }
    *out = s;
    *n_out = n;
    return NB_OK;
}

typedef struct {
    const nb_tokenizer *t;
    const char *text;
    symbol *sym;
    heap h;
    bool spm;
} merger;

static nb_status try_pair(merger *m, int l, int r) {
    if (l < 0 || r < 0) return NB_OK;
    const symbol *a = &m->sym[l], *b = &m->sym[r];
    double key;
    if (m->spm) {
        int32_t id = nb_tok_find(m->t, m->text + a->off, a->n + b->n);
        if (id < 0) return NB_OK;
        key = m->t->v->scores[id];
    } else {
        int32_t rank = nb_tok_merge_rank(m->t, m->text + a->off, a->n, m->text + b->off, b->n);
        if (rank < 0) return NB_OK;
        key = -(double)rank;
    }
    return heap_push(&m->h, (pair){key, l, r, a->n, b->n});
}

static nb_status run_merges(merger *m, int n) {
    for (int i = 1; i < n; i++) NB_TRY(try_pair(m, i - 1, i));
    while (m->h.n > 0) {
        pair p = heap_pop(&m->h);
        symbol *a = &m->sym[p.left], *b = &m->sym[p.right];
        if (a->n == 0 || b->n == 0 || a->n != p.ln || b->n != p.rn) continue;
        a->n += b->n;
        b->n = 0;
        a->next = b->next;
        if (b->next >= 0) m->sym[b->next].prev = p.left;
        NB_TRY(try_pair(m, a->prev, p.left));
        NB_TRY(try_pair(m, p.left, a->next));
    }
    return NB_OK;
}

nb_status nb_spm_encode(const nb_tokenizer *t, const char *text, size_t len, nb_idvec *out) {
    if (len == 0) return NB_OK;
    merger m = {t, text, NULL, {0}, true};
    int n;
    NB_TRY(make_symbols(text, len, &m.sym, &n));
    nb_status st = run_merges(&m, n);
    for (int i = 0; st == NB_OK && i != -1; i = m.sym[i].next) {
        const symbol *s = &m.sym[i];
        int32_t id = nb_tok_find(t, text + s->off, s->n);
        if (id >= 0) {
            st = nb_idvec_push(out, id);
            continue;
        }
        for (uint32_t j = 0; st == NB_OK && j < s->n; j++) {
            int32_t b = t->byte_tok[(uint8_t)text[s->off + j]];
            if (b < 0) b = t->v->unk;
            if (b >= 0) st = nb_idvec_push(out, b);
        }
    }
    free(m.sym);
    free(m.h.a);
    return st;
}

/* ---- byte-level BPE --------------------------------------------------------- */

static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 non-printable bytes, in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD. */
uint32_t nb_bpe_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

int nb_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return 0xAD;
}

static nb_status bpe_word(const nb_tokenizer *t, const char *w, size_t wn, nb_idvec *out) {
    if (t->v->ignore_merges) {
        int32_t id = nb_tok_find(t, w, wn);
        if (id >= 0) return nb_idvec_push(out, id);
    }
    merger m = {t, w, NULL, {0}, false};
    int n;
    NB_TRY(make_symbols(w, wn, &m.sym, &n));
    nb_status st = run_merges(&m, n);
    for (int i = 0; st == NB_OK && n > 0 && i != -1; i = m.sym[i].next) {
        const symbol *s = &m.sym[i];
        int32_t id = nb_tok_find(t, w + s->off, s->n);
        if (id >= 0) {
            st = nb_idvec_push(out, id);
            continue;
        }
        for (uint32_t j = 0; st == NB_OK && j < s->n; j++) { /* as llama.cpp: single-byte tokens, if any */
            int32_t b = nb_tok_find(t, w + s->off + j, 1);
            if (b >= 0) st = nb_idvec_push(out, b);
        }
    }
    free(m.sym);
    free(m.h.a);
    return st;
}

nb_status nb_bpe_encode(const nb_tokenizer *t, const char *text, size_t len, nb_idvec *out) {
    size_t *offs = NULL, nw = 0;
    NB_TRY(nb_pretok_split(t->pre, text, len, &offs, &nw));
    /* byte-encode each word into a scratch buffer (at most 2 bytes per byte) */
    size_t maxw = 0;
    for (size_t i = 0; i < nw; i++) maxw = NB_MAX(maxw, offs[2 * i + 1]);
    char *buf = nb_malloc(maxw * 2 + 1);
    nb_status st = buf ? NB_OK : NB_ERR_NOMEM;
    for (size_t i = 0; st == NB_OK && i < nw; i++) {
        const uint8_t *w = (const uint8_t *)text + offs[2 * i];
        size_t wn = offs[2 * i + 1], o = 0;
        for (size_t j = 0; j < wn; j++) o += (size_t)nb_utf8_put(nb_bpe_byte_to_cp(w[j]), buf + o);
        st = bpe_word(t, buf, o, out);
    }
    free(buf);
    free(offs);
    return st;
}
