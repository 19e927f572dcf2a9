/* OpenAI request parsing and validation (POST /v1/completions and
 * /v1/chat/completions) and the OpenAI error shape.
 *
 * A body is parsed with jansson (duplicate keys rejected) into an
 * nb_oai_request; every field is type- and range-checked, and a failure
 * fills an nb_oai_error naming the parameter (`param`, JSON-path style
 * such as "messages[2].content") and the allowed range - ready to be sent
 * as {"error": {"message", "type", "param", "code"}}.
 *
 * Unknown top-level fields are rejected ("Unrecognized request argument
 * supplied: X", OpenAI's wording); fields we accept only with their
 * neutral value (suffix, logit_bias, best_of > 1, n > 1) are rejected with a
 * message saying so. Output constraints (response_format json_object /
 * json_schema, vLLM's guided_json / guided_regex / guided_choice) are
 * compiled here; a schema keyword nibble cannot enforce is a 400 naming it.
 *
 * Pure functions, reentrant; the request owns its JSON tree and strings. */
#ifndef NB_SERVER_OPENAI_H
#define NB_SERVER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "engine/engine.h"
#include "server/toolcall.h"
#include "tokenizer/chat_template.h"

/* Caps on what one request may carry (errors quote them): base/limits.h.
 * Old names, kept for code written before it: */
#define NB_OAI_MAX_MESSAGES NB_LIMIT_MESSAGES
#define NB_OAI_MAX_TOKENS_CAP NB_LIMIT_MAX_TOKENS
#define NB_OAI_MAX_PROMPT_IDS NB_LIMIT_PROMPT_IDS
#define NB_OAI_MAX_LOGPROBS_COMPLETIONS NB_LIMIT_LOGPROBS_COMPLETIONS
#define NB_OAI_COMPLETIONS_DEFAULT_MAX_TOKENS NB_LIMIT_COMPLETIONS_DEFAULT_MAX_TOKENS

typedef enum nb_oai_kind { NB_OAI_COMPLETIONS = 0, NB_OAI_CHAT } nb_oai_kind;

typedef struct nb_oai_error {
    int status;         /* HTTP status */
    const char *type;   /* "invalid_request_error", ... */
    const char *code;   /* NULL -> JSON null */
    char param[96];     /* "" -> JSON null */
    char message[1024];
} nb_oai_error;

typedef struct nb_oai_request {
    nb_oai_kind kind;
    void *root;                 /* the parsed json_t (owned) */
    const char *model;          /* NULL: not given */
    /* completions: a text prompt or token ids (exactly one is set) */
    const char *prompt;
    int32_t *prompt_ids;
    size_t n_prompt_ids;
    /* chat */
    nb_chat_msg *msgs;
    size_t n_msgs;
    char **owned;               /* joined text parts, freed with the request */
    size_t n_owned;
    int32_t max_tokens;         /* -1: not given (the caller picks the default) */
    int32_t min_tokens;
    nb_sampling sampling;
    const char *stop[NB_LIMIT_STOP_STRINGS];
    size_t n_stop;
    bool stream, include_usage, ignore_eos;
    bool echo;                  /* completions: the prompt (and its logprobs) come first in the answer */
    int32_t logprobs;           /* -1: none; else the number of top alternatives (0..20) */
    int32_t *logit_bias_ids;    /* logit_bias {"token id": bias in [-100, 100]} (owned); the */
    float *logit_bias;          /* ids' range against the vocabulary is checked by the engine */
    size_t n_logit_bias;
    int32_t *stop_token_ids;    /* vLLM's stop_token_ids (owned): generation ends on any of them */
    size_t n_stop_token_ids;
    const char *user;
    /* response_format json_object / json_schema, guided_json, guided_regex or
     * guided_choice, compiled (engine/grammar.h); owned until handed to the
     * engine (set to NULL then), freed with the request otherwise */
    struct nb_grammar *grammar;
    nb_tool_request tools;      /* chat: tools / tool_choice / parallel_tool_calls (server/toolcall.h) */
} nb_oai_request;

/* Parses and validates one body. On failure returns false with *err filled
 * (status 400) and *out left empty (safe to free). */
bool nb_oai_parse(nb_oai_kind kind, const char *body, size_t len, nb_oai_request *out, nb_oai_error *err);
void nb_oai_request_free(nb_oai_request *r);

/* Fills an error. param may be NULL, code may be NULL. */
void nb_oai_error_set(nb_oai_error *e, int status, const char *type, const char *param, const char *code,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error":{"message":...,"type":...,"param":...,"code":...}} as a malloc'd
 * string (NULL only when out of memory). */
char *nb_oai_error_json(const nb_oai_error *e);

/* Copies n bytes of text into a JSON-safe UTF-8 string: invalid sequences
 * become U+FFFD. Returns a malloc'd NUL-terminated string (*out_len its length). */
char *nb_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* Constant-time comparison of a presented secret with the expected one
 * (the time depends only on the expected length). */
bool nb_secret_equal(const char *given, const char *expected);

#endif
