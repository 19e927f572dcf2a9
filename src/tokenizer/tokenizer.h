/* Tokenizers: SentencePiece BPE and byte-level BPE over an nb_vocab, with
 * special-token parsing, detokenization and an incremental UTF-8-safe
 * detokenizer for streaming.
 *
 * Behaviour follows llama.cpp's `llama` (SPM) and `gpt2` (BPE) vocabularies:
 *   SPM: spaces -> U+2581, one U+2581 prepended to each text fragment that
 *        starts the input or follows a special token (add_space_prefix),
 *        UTF-8 characters merged pairwise by highest piece score (leftmost on
 *        ties), unknown characters fall back to <0xNN> byte tokens (or unk).
 *   BPE: the text is split by the pre-tokenizer's regexes (PCRE2, UTF+UCP;
 *        chosen by the vocab's `pre` name), each word mapped through the GPT-2
 *        byte->unicode alphabet, then merged by merge rank (lowest first).
 *   Special tokens: user-defined tokens are always matched in the text first;
 *        control tokens only when parse_special is true (longest first).
 *
 * Thread-safety: an nb_tokenizer is read-only after creation; any number of
 * threads may tokenize / detokenize with it at once. An nb_detok belongs to
 * one stream. */
#ifndef NB_TOKENIZER_TOKENIZER_H
#define NB_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "formats/vocab.h"

typedef struct nb_tokenizer nb_tokenizer;

/* Takes ownership of v (freed on failure too). Fails for an unknown BPE
 * pre-tokenizer name (the message lists the supported ones), duplicate
 * token texts, or a BPE vocab without merges. */
nb_status nb_tokenizer_create(nb_vocab *v, nb_tokenizer **out) __attribute__((warn_unused_result));
void nb_tokenizer_free(nb_tokenizer *t);

/* Loads the vocab (nb_vocab_load rules) and creates the tokenizer. */
nb_status nb_tokenizer_load(const char *model_path, const char *tokenizer_path, nb_tokenizer **out)
    __attribute__((warn_unused_result));

/* Tokenizes len bytes of text (need not be NUL-terminated; invalid UTF-8 is
 * tolerated). add_special: BOS / EOS as the vocab's add_bos / add_eos say.
 * parse_special: text equal to a control token (e.g. "<|im_start|>") becomes
 * that token. *ids is malloc'd (caller frees), *n_ids its length. */
nb_status nb_tokenize(const nb_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t **ids, size_t *n_ids) __attribute__((warn_unused_result));

/* The bytes of one token's text (spaces restored, byte tokens as their byte,
 * byte-level pieces decoded). render_special: control / unknown tokens give
 * their text; otherwise nothing. Returns the piece length; copies
 * min(length, cap) bytes. Out-of-range ids give 0. */
size_t nb_token_piece(const nb_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);
/* The same piece without copying (NULL, 0 for out-of-range ids). */
const char *nb_token_piece_ref(const nb_tokenizer *t, int32_t id, bool render_special, size_t *len);
/* The longest piece in bytes (for sizing buffers). */
size_t nb_tokenizer_max_piece(const nb_tokenizer *t);

/* Decodes a whole sequence: pieces concatenated; a BOS at position 0 is
 * skipped unless render_special; for SPM with add_space_prefix the leading
 * space of the first text piece (the one the tokenizer added) is dropped.
 * *text is malloc'd and NUL-terminated. */
nb_status nb_detokenize(const nb_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                        size_t *len) __attribute__((warn_unused_result));

int32_t nb_tokenizer_n_vocab(const nb_tokenizer *t);
int32_t nb_tokenizer_bos(const nb_tokenizer *t); /* -1 if none */
int32_t nb_tokenizer_eos(const nb_tokenizer *t); /* -1 if none */
bool nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id);
bool nb_tokenizer_is_control(const nb_tokenizer *t, int32_t id);
bool nb_tokenizer_add_bos(const nb_tokenizer *t);
const char *nb_tokenizer_chat_template(const nb_tokenizer *t); /* NULL if none */
const nb_vocab *nb_tokenizer_vocab(const nb_tokenizer *t);
/* Token id of an exact text (any type), -1 if absent. */
int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *text, size_t len);

/* Incremental detokenizer: feed ids one by one, get only complete UTF-8
 * (a multi-byte character split over byte-fallback tokens is held back until
 * complete; invalid sequences come out as U+FFFD). flush emits the rest.
 * `out` must hold at least nb_tokenizer_max_piece(t) + NB_DETOK_SLACK bytes. */
#define NB_DETOK_SLACK 16
typedef struct nb_detok {
    const nb_tokenizer *t;
    bool render_special; /* control tokens print their text (default false) */
    bool strip_space;    /* drop one leading space of the first text piece (default false) */
    bool started;
    uint8_t pend[4];
    int npend;
} nb_detok;

void nb_detok_init(nb_detok *d, const nb_tokenizer *t);
size_t nb_detok_push(nb_detok *d, int32_t id, char *out, size_t cap);
size_t nb_detok_flush(nb_detok *d, char *out, size_t cap);

/* UTF-8 helpers shared by the tokenizer files. nb_utf8_char: length of the
 * valid character at s (1..4), 0 if s holds a valid but incomplete prefix,
 * -1 if invalid. */
int nb_utf8_char(const uint8_t *s, size_t n);
bool nb_utf8_valid(const char *s, size_t n);

#endif
