/* SentencePiece vocabularies from two file formats.
 *
 * tokenizer.model: a protobuf ModelProto (read with the minimal, bounds-
 * checked reader below; wire types 0 varint, 1 fixed64, 2 length-delimited,
 * 5 fixed32; groups are refused):
 *   ModelProto     1: repeated SentencePiece pieces
 *                  2: TrainerSpec     { 3: model_type (1 unigram, 2 BPE, 3 word, 4 char),
 *                                       40 unk_id, 41 bos_id, 42 eos_id, 43 pad_id (int32) }
 *                  3: NormalizerSpec  { 3: add_dummy_prefix (bool) }
 *   SentencePiece  1: piece (string), 2: score (float, fixed32), 3: type (enum =
 *                  nb_token_type; default NORMAL)
 *   Only model_type BPE is supported (unigram needs a different algorithm).
 *
 * llama2.c tokenizer.bin (little-endian):
 *   i32 max_token_length, then per token { f32 score, i32 len, len bytes }.
 *   Pieces use plain spaces (converted back to U+2581 here); ids 1 and 2 are
 *   stored as "\n<s>\n" and "\n</s>\n" (renamed <s> / </s>, control); id 0 is
 *   <unk>; pieces <0xNN> are byte tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vocab.h"

/* ---- protobuf ------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end, *base;
    const char *name;
} pb_reader;

static nb_status pb_varint(pb_reader *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return nb_fail(NB_ERR_FORMAT, "%s: truncated varint at byte %td", r->name, r->p - r->base);
        uint8_t b = *r->p++;
        if (shift == 63 && (b & 0x7e))
            return nb_fail(NB_ERR_FORMAT, "%s: varint too long at byte %td", r->name, r->p - r->base);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return NB_OK;
        }
    }
    return nb_fail(NB_ERR_FORMAT, "%s: varint longer than 10 bytes at byte %td", r->name, r->p - r->base);
}

/* One field: number, wire type, and its payload (varint value, fixed bits, or a sub-range). */
typedef struct {
    uint32_t num;
    uint32_t wire;
    uint64_t u;
    const uint8_t *data;
    size_t len;
} pb_field;

static nb_status pb_next(pb_reader *r, pb_field *f) {
    uint64_t key;
    size_t at = (size_t)(r->p - r->base);
    NB_TRY(pb_varint(r, &key));
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    if (f->num == 0) return nb_fail(NB_ERR_FORMAT, "%s: field number 0 at byte %zu", r->name, at);
    switch (f->wire) {
    case 0: return pb_varint(r, &f->u);
    case 1:
        if (r->end - r->p < 8) return nb_fail(NB_ERR_FORMAT, "%s: truncated fixed64 at byte %zu", r->name, at);
        memcpy(&f->u, r->p, 8);
        r->p += 8;
        return NB_OK;
    case 5: {
        if (r->end - r->p < 4) return nb_fail(NB_ERR_FORMAT, "%s: truncated fixed32 at byte %zu", r->name, at);
        uint32_t x;
        memcpy(&x, r->p, 4);
        f->u = x;
        r->p += 4;
        return NB_OK;
    }
    case 2: {
        uint64_t len;
        NB_TRY(pb_varint(r, &len));
        if (len > (uint64_t)(r->end - r->p))
            return nb_fail(NB_ERR_FORMAT, "%s: field %u at byte %zu: length %llu runs past the end (%td bytes left)",
                           r->name, f->num, at, (unsigned long long)len, r->end - r->p);
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return NB_OK;
    }
    default:
        return nb_fail(NB_ERR_FORMAT, "%s: field %u at byte %zu has wire type %u (allowed 0, 1, 2, 5)", r->name,
                       f->num, at, f->wire);
    }
}

static pb_reader pb_sub(const pb_reader *r, const pb_field *f) {
    pb_reader s = {f->data, f->data + f->len, r->base, r->name};
    return s;
}

nb_status nb_vocab_from_spm_model(const uint8_t *data, size_t size, const char *name, nb_vocab **out) {
    *out = NULL;
    if (!name) name = "tokenizer.model";
    nb_vocab *v;
    NB_TRY(nb_vocab_create(NB_VOCAB_SPM, &v));
    nb_status st = nb_vocab_set_source(v, name);
    pb_reader r = {data, data + size, data, name};
    int64_t model_type = -1;
    while (st == NB_OK && r.p < r.end) {
        pb_field f;
        st = pb_next(&r, &f);
        if (st != NB_OK) break;
        if (f.num == 1 && f.wire == 2) {
            pb_reader s = pb_sub(&r, &f);
            const uint8_t *piece = NULL;
            size_t plen = 0;
            bool has_piece = false;
            float score = 0;
            uint64_t type = NB_TOKEN_NORMAL;
            while (st == NB_OK && s.p < s.end) {
                pb_field g;
                st = pb_next(&s, &g);
                if (st != NB_OK) break;
                if (g.num == 1 && g.wire == 2) { piece = g.data; plen = g.len; has_piece = true; }
                else if (g.num == 2 && g.wire == 5) { uint32_t b = (uint32_t)g.u; memcpy(&score, &b, 4); }
                else if (g.num == 3 && g.wire == 0) type = g.u;
            }
            if (st != NB_OK) break;
            if (!has_piece) {
                st = nb_fail(NB_ERR_FORMAT, "%s: piece %d (ending at byte %td) has no text", name, v->n_tokens,
                             s.p - data);
                break;
            }
            if (type < 1 || type > NB_TOKEN_BYTE) {
                st = nb_fail(NB_ERR_FORMAT, "%s: piece %d has type %llu (allowed 1..6)", name, v->n_tokens,
                             (unsigned long long)type);
                break;
            }
            st = nb_vocab_add_token(v, (const char *)piece, plen, score, (nb_token_type)type);
        } else if (f.num == 2 && f.wire == 2) {
            pb_reader s = pb_sub(&r, &f);
            while (st == NB_OK && s.p < s.end) {
                pb_field g;
                st = pb_next(&s, &g);
                if (st != NB_OK || g.wire != 0) continue;
                int32_t iv = (int32_t)(int64_t)g.u;
                if (g.num == 3) model_type = (int64_t)g.u;
                else if (g.num == 40) v->unk = iv;
                else if (g.num == 41) v->bos = iv;
                else if (g.num == 42) v->eos = iv;
                else if (g.num == 43) v->pad = iv;
            }
        } else if (f.num == 3 && f.wire == 2) {
            pb_reader s = pb_sub(&r, &f);
            while (st == NB_OK && s.p < s.end) {
                pb_field g;
                st = pb_next(&s, &g);
                if (st == NB_OK && g.num == 3 && g.wire == 0) v->add_space_prefix = g.u != 0;
            }
        }
    }
    if (st == NB_OK && model_type != -1 && model_type != 2)
        st = nb_fail(NB_ERR_UNSUPPORTED,
                     "%s: SentencePiece model_type %lld is not supported (only 2 = BPE; 1 = unigram is not)", name,
                     (long long)model_type);
    if (st == NB_OK && v->n_tokens == 0) st = nb_fail(NB_ERR_FORMAT, "%s: no pieces (not a SentencePiece model?)", name);
    if (st == NB_OK) st = nb_vocab_finish(v);
    if (st != NB_OK) {
        nb_vocab_free(v);
        return st;
    }
    *out = v;
    return NB_OK;
}

/* ---- llama2.c tokenizer.bin ---------------------------------------------- */

static bool is_byte_piece(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

nb_status nb_vocab_from_llama2c(const uint8_t *data, size_t size, int32_t n_vocab, const char *name, nb_vocab **out) {
    *out = NULL;
    if (!name) name = "tokenizer.bin";
    if (size < 4) return nb_fail(NB_ERR_FORMAT, "%s: %zu bytes, too short for the max_token_length header", name, size);
    int32_t max_len;
    memcpy(&max_len, data, 4);
    if (max_len <= 0 || max_len > NB_VOCAB_MAX_TOKEN_BYTES)
        return nb_fail(NB_ERR_FORMAT, "%s: max_token_length %d at byte 0 (allowed 1..%d)", name, max_len,
                       NB_VOCAB_MAX_TOKEN_BYTES);
    nb_vocab *v;
    NB_TRY(nb_vocab_create(NB_VOCAB_SPM, &v));
    nb_status st = nb_vocab_set_source(v, name);
    size_t pos = 4;
    char *buf = nb_malloc((size_t)max_len * 3 + 1);
    if (!buf) st = NB_ERR_NOMEM;
    while (st == NB_OK && (n_vocab < 0 ? pos < size : v->n_tokens < n_vocab)) {
        int32_t id = v->n_tokens;
        if (size - pos < 8) {
            st = nb_fail(NB_ERR_FORMAT, "%s: token %d at byte %zu: truncated record header (%zu bytes left, need 8)",
                         name, id, pos, size - pos);
            break;
        }
        float score;
        int32_t len;
        memcpy(&score, data + pos, 4);
        memcpy(&len, data + pos + 4, 4);
        if (len < 0 || len > max_len) {
            st = nb_fail(NB_ERR_FORMAT, "%s: token %d at byte %zu: length %d (allowed 0..max_token_length %d)", name,
                         id, pos + 4, len, max_len);
            break;
        }
        pos += 8;
        if (size - pos < (size_t)len) {
            st = nb_fail(NB_ERR_FORMAT, "%s: token %d at byte %zu: %d text bytes but only %zu left", name, id, pos,
                         len, size - pos);
            break;
        }
        const char *t = (const char *)data + pos;
        pos += (size_t)len;
        nb_token_type type = NB_TOKEN_NORMAL;
        size_t n = 0;
        if (len == 5 && !memcmp(t, "\n<s>\n", 5)) {
            memcpy(buf, "<s>", 3);
            n = 3;
            type = NB_TOKEN_CONTROL;
        } else if (len == 6 && !memcmp(t, "\n</s>\n", 6)) {
            memcpy(buf, "</s>", 4);
            n = 4;
            type = NB_TOKEN_CONTROL;
        } else if (id == 0 && len == 5 && !memcmp(t, "<unk>", 5)) {
            memcpy(buf, t, 5);
            n = 5;
            type = NB_TOKEN_UNKNOWN;
        } else if (is_byte_piece(t, (size_t)len)) {
            memcpy(buf, t, 6);
            n = 6;
            type = NB_TOKEN_BYTE;
        } else {
            for (int32_t i = 0; i < len; i++) {
                if (t[i] == ' ') {
                    memcpy(buf + n, "\xe2\x96\x81", 3);
                    n += 3;
                } else {
                    buf[n++] = t[i];
                }
            }
        }
        st = nb_vocab_add_token(v, buf, n, score, type);
    }
    free(buf);
    if (st == NB_OK && pos != size && n_vocab < 0)
        st = nb_fail(NB_ERR_FORMAT, "%s: %zu trailing bytes after the last token", name, size - pos);
    if (st == NB_OK) st = nb_vocab_finish(v);
    if (st != NB_OK) {
        nb_vocab_free(v);
        return st;
    }
    *out = v;
    return NB_OK;
}
