/* Every cap on what one request, one command line or one server may carry,
 * defined once. Parsers check against these, error messages quote them, and
 * arrays sized by them live in the engine, the server and the CLI alike.
 *
 * Changing a value here changes it everywhere (the public header's
 * NIBBLE_MAX_* copies are checked against these by static asserts in
 * src/api.c). docs/serve.md lists the request caps a client can meet. */
#ifndef NB_BASE_LIMITS_H
#define NB_BASE_LIMITS_H

/* ---- one generation request (engine, OpenAI parser, CLI) ---- */
#define NB_LIMIT_STOP_STRINGS 16            /* stop strings per request */
#define NB_LIMIT_STOP_LEN 256               /* bytes per stop string */
#define NB_LIMIT_TOP_LOGPROBS 20            /* alternatives per token (chat top_logprobs) */
#define NB_LIMIT_LOGPROBS_COMPLETIONS 5     /* /v1/completions logprobs (OpenAI's limit) */
#define NB_LIMIT_MAX_TOKENS (1 << 24)       /* max_tokens / max_completion_tokens / min_tokens */
#define NB_LIMIT_COMPLETIONS_DEFAULT_MAX_TOKENS 16 /* /v1/completions without max_tokens (OpenAI, vLLM) */
#define NB_LIMIT_PROMPT_IDS (1 << 22)       /* token ids in a completions prompt */
#define NB_LIMIT_MESSAGES 4096              /* chat messages per request */
#define NB_LIMIT_N 128                      /* the range 'n' is parsed in (only n = 1 is served) */
#define NB_LIMIT_GUIDED_CHOICES 64          /* guided_choice alternatives */

/* ---- the HTTP server ---- */
#define NB_LIMIT_REQUEST_BYTES (8u << 20)        /* default --max-request-bytes */
#define NB_LIMIT_REQUEST_BYTES_MIN 1024u         /* --max-request-bytes range */
#define NB_LIMIT_REQUEST_BYTES_MAX (1u << 30)
#define NB_LIMIT_RESPONSE_BYTES (256u << 20)     /* one response body, or the output one request holds */
#define NB_LIMIT_CONNECTIONS 1024u               /* default --max-connections */
#define NB_LIMIT_CONNECTIONS_MAX (1 << 16)
#define NB_LIMIT_REQUEST_TIMEOUT_S 30u           /* default --request-timeout */
#define NB_LIMIT_IDLE_TIMEOUT_S 300u             /* inactivity while a response is produced */
#define NB_LIMIT_EXTRA_HEADERS 8                 /* extra response headers (CORS, Retry-After, ...) */

/* ---- files the CLI reads whole ---- */
#define NB_LIMIT_TEXT_FILE_BYTES (256u << 20)    /* eval ppl / kld, imatrix calibration text */
#define NB_LIMIT_PROMPT_FILE_BYTES (64u << 20)   /* generate --file */

/* A cap as a string literal, for messages built at compile time. */
#define NB_LIMIT_STR_(x) #x
#define NB_LIMIT_STR(x) NB_LIMIT_STR_(x)

#endif
