/* Token classes for the per-class KL breakdown of `nibble eval kld`.
 *
 * A class is a PCRE2 pattern matched (unanchored, UTF + UCP, invalid UTF-8
 * tolerated) against a token's text: the bytes the token decodes to
 * (nb_token_piece without special rendering: SentencePiece's U+2581 is a
 * space again, a byte token is its one byte, control tokens are empty).
 * Built-in classes, in this order:
 *   digit  [0-9]                          the text holds an ASCII digit
 *   punct  [!-/:-@\[-`{-~]                 an ASCII punctuation / JSON structure character
 *   space  ^\s+$                          the text is whitespace only (newlines, indentation)
 *   word   \p{L}                          the text holds a letter (any script)
 *   other  none of the four above         (control tokens, lone UTF-8 fragments, symbols)
 * A token may be in several classes (" 3rd" is digit and word; "\"," is punct
 * only; " " is space only), so the built-in classes overlap and their counts
 * need not add up; every token is in at least one of them ("other" catches
 * the rest). User classes (nb_tokclass_add "NAME=REGEX") come after and may
 * overlap anything. At most NB_TOKCLASS_MAX classes in all. */
#ifndef NB_EVAL_TOKCLASS_H
#define NB_EVAL_TOKCLASS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

#define NB_TOKCLASS_MAX 32
#define NB_TOKCLASS_NAME_MAX 64
#define NB_TOKCLASS_BUILTIN 5

typedef struct nb_tokclass_set {
    int n;
    char names[NB_TOKCLASS_MAX][NB_TOKCLASS_NAME_MAX];
    void *re[NB_TOKCLASS_MAX];  /* pcre2_code*; NULL for "other" */
    void *md;                   /* pcre2_match_data* */
} nb_tokclass_set;

/* The built-in classes. */
nb_status nb_tokclass_init(nb_tokclass_set *s) __attribute__((warn_unused_result));
void nb_tokclass_free(nb_tokclass_set *s);
/* Adds "NAME=REGEX": NAME 1..63 of [A-Za-z0-9_.-], not already used; the
 * message names the problem (and the regex error offset). */
nb_status nb_tokclass_add(nb_tokclass_set *s, const char *spec) __attribute__((warn_unused_result));
/* Bit c set when the text is in class c. Not thread-safe (shared match data). */
uint32_t nb_tokclass_match(nb_tokclass_set *s, const char *text, size_t len);
/* A mask per token id 0..n_vocab-1 (ids the tokenizer lacks have empty text). *masks is malloc'd. */
nb_status nb_tokclass_table(nb_tokclass_set *s, const nb_tokenizer *t, int32_t n_vocab, uint32_t **masks)
    __attribute__((warn_unused_result));

#endif
