/* Constrained decoding: the output must stay a prefix of a document the
 * constraint accepts, token by token.
 *
 * A constraint (nb_grammar, compiled once per request, immutable) is one of
 *   - a JSON Schema (the subset in docs/serve.md "Structured outputs"),
 *   - any JSON object (response_format json_object),
 *   - a regular expression (guided_regex, PCRE2 syntax, matched whole),
 *   - a list of strings (guided_choice).
 * A matcher (nb_gmatch) is one request's position in it: a few parse stacks
 * (anyOf alternatives run side by side) fed byte by byte.
 *
 * Each decode step, nb_grammar_mask() walks a trie of the vocabulary's
 * token bytes (nb_vtrie, built once per tokenizer) from the matcher's state
 * and marks the tokens whose bytes keep the output a viable prefix AND
 * leave a completion short enough for the tokens still allowed
 * (max_tokens): the shortest completion is tracked in bytes, and every byte
 * is a token in nibble's vocabularies (byte-level BPE, SentencePiece byte
 * fallback). The estimate is exact for everything but strings with a
 * `pattern`; so when the room left comes within a margin of it, the mask
 * switches to following one concrete completion found by a bounded search
 * (kept in the matcher until the output leaves it), and a constrained
 * request ends with a whole document.
 * End-of-generation is allowed only when the document is complete; when it
 * is closed (nothing may follow), the engine stops the request.
 *
 * Threads: a grammar may be shared read-only; a matcher belongs to one
 * request (the engine thread). */
#ifndef NB_ENGINE_GRAMMAR_H
#define NB_ENGINE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nibble_status.h"
#include "tokenizer/tokenizer.h"

typedef struct nb_grammar nb_grammar;
typedef struct nb_gmatch nb_gmatch;
typedef struct nb_vtrie nb_vtrie;

/* A JSON Schema given as JSON text. Keywords outside the subset are refused
 * (NB_ERR_UNSUPPORTED) with a message naming the keyword and its path. */
nb_status nb_grammar_json_schema(const char *schema, size_t len, nb_grammar **out) __attribute__((warn_unused_result));
/* Any JSON object (OpenAI's json_object mode). */
nb_status nb_grammar_json_object(nb_grammar **out) __attribute__((warn_unused_result));
/* A PCRE2 pattern the whole output must match. */
nb_status nb_grammar_regex(const char *pattern, nb_grammar **out) __attribute__((warn_unused_result));
/* One of these strings exactly (1..64 choices). */
nb_status nb_grammar_choice(const char *const *choices, size_t n, nb_grammar **out) __attribute__((warn_unused_result));
/* Tagged documents (tool calls): prefix[i] (literal bytes, none a prefix of
 * another) then a JSON document valid under schemas[i] (JSON text; an
 * object or array schema) then `suffix` (literal, may be "" or NULL); the
 * literal chooses the schema. 1..64 alternatives. Nothing may follow. */
nb_status nb_grammar_tagged(const char *const *prefix, const char *const *schemas, size_t n, const char *suffix,
                            nb_grammar **out) __attribute__((warn_unused_result));
void nb_grammar_free(nb_grammar *g);
/* "json_schema", "json_object", "regex", "choice", "tool_call". */
const char *nb_grammar_kind(const nb_grammar *g);

nb_status nb_gmatch_create(const nb_grammar *g, nb_gmatch **out) __attribute__((warn_unused_result));
void nb_gmatch_free(nb_gmatch *m);
/* Advances by n bytes; false (and the matcher unchanged) when they cannot
 * continue a valid document. */
bool nb_gmatch_feed(nb_gmatch *m, const char *bytes, size_t n);
/* The output so far is a whole valid document. */
bool nb_gmatch_complete(const nb_gmatch *m);
/* Complete and nothing but whitespace may follow: stop generating. */
bool nb_gmatch_closed(const nb_gmatch *m);
/* Bytes of the shortest completion the matcher knows (0 when complete). */
size_t nb_gmatch_min_remaining(const nb_gmatch *m);

/* The vocabulary as a byte trie (control tokens and empty pieces left out). */
nb_status nb_vtrie_create(const nb_tokenizer *t, nb_vtrie **out) __attribute__((warn_unused_result));
/* The same with the control tokens that do not end generation, as their
 * text (for requests whose output shows control-token text, e.g. a model
 * whose tool-call marker is a control token): the mask allows one only
 * where it starts inside a literal of a tagged grammar (the call's markup),
 * never inside a JSON value. */
nb_status nb_vtrie_create_special(const nb_tokenizer *t, nb_vtrie **out) __attribute__((warn_unused_result));
void nb_vtrie_free(nb_vtrie *v);

/* Sets allowed[id] (n_vocab bytes, 0/1) for the tokens that may come next,
 * given `budget` tokens left including this one; eog tokens are allowed when
 * the document is complete. Returns how many are allowed. */
int32_t nb_grammar_mask(const nb_vtrie *v, nb_gmatch *m, int32_t budget, const int32_t *eog, size_t n_eog,
                        uint8_t *allowed, int32_t n_vocab);
/* The same mask computed by walking the whole trie, without the one-pass
 * shortcuts nb_grammar_mask takes inside free strings and keys (slower; the
 * reference the tests compare nb_grammar_mask with). */
int32_t nb_grammar_mask_walk(const nb_vtrie *v, nb_gmatch *m, int32_t budget, const int32_t *eog, size_t n_eog,
                             uint8_t *allowed, int32_t n_vocab);

#endif
