/* Shared between the tokenizer files (not for other subsystems). */
#ifndef NB_TOKENIZER_TOK_INTERNAL_H
#define NB_TOKENIZER_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"

/* Growable id list. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} nb_idvec;

nb_status nb_idvec_push(nb_idvec *a, int32_t id);

/* Compiled pre-tokenizer (a list of PCRE2 regexes applied one after another;
 * each splits every current piece into matches and the gaps between them). */
typedef struct nb_pretok nb_pretok;

/* NB_ERR_UNSUPPORTED for an unknown name, with the list of supported names. */
nb_status nb_pretok_create(const char *name, nb_pretok **out);
void nb_pretok_free(nb_pretok *p);
/* Splits valid UTF-8 text into words: *offs gets 2*n entries (start, len). */
nb_status nb_pretok_split(const nb_pretok *p, const char *text, size_t len, size_t **offs, size_t *n);
/* Comma-separated list of the supported names into buf. */
void nb_pretok_names(char *buf, size_t cap);

struct nb_tokenizer {
    nb_vocab *v;
    /* text -> id: open addressing, slots hold id + 1 (0 = empty) */
    uint32_t *tok_ht;
    uint64_t tok_mask;
    /* (left, right) -> rank: slots hold rank + 1 */
    uint32_t *mrg_ht;
    uint64_t mrg_mask;
    /* special tokens (control, user-defined, unknown), longest text first */
    int32_t *special;
    int32_t n_special;
    uint8_t *eog; /* per id: end of generation */
    int32_t byte_tok[256]; /* SPM: <0xNN>; BPE: the byte's alphabet character; -1 */
    /* decoded piece per id (special ones included; hidden unless rendered) */
    char *pieces;
    uint64_t *piece_off;
    uint32_t *piece_len;
    size_t max_piece;
    nb_pretok *pre; /* BPE only */
};

int32_t nb_tok_find(const nb_tokenizer *t, const char *s, size_t n);
int32_t nb_tok_merge_rank(const nb_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn);

/* SPM: text already escaped (U+2581 for spaces, prefix added). Appends ids. */
nb_status nb_spm_encode(const nb_tokenizer *t, const char *text, size_t len, nb_idvec *out);
/* BPE: one raw fragment (valid UTF-8): pre-tokenize, byte-encode, merge. */
nb_status nb_bpe_encode(const nb_tokenizer *t, const char *text, size_t len, nb_idvec *out);

/* GPT-2 byte alphabet: byte -> code point, and code point -> byte (-1). */
uint32_t nb_bpe_byte_to_cp(uint8_t b);
int nb_bpe_cp_to_byte(uint32_t cp);

/* Appends code point cp as UTF-8 to buf (returns bytes, 1..4). */
int nb_utf8_put(uint32_t cp, char *buf);
/* Decodes the character at s (n bytes available); *cp = U+FFFD and 1 byte for invalid. */
int nb_utf8_get(const uint8_t *s, size_t n, uint32_t *cp);

#endif
