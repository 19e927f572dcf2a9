/* Response bodies of the OpenAI routes (respond.c): the error shape, the
 * envelope, usage, logprobs in the chat and completions shapes, and the
 * whole (non-streamed) answer of a finished request. Private to src/server. */
#ifndef NB_SERVER_RESPOND_H
#define NB_SERVER_RESPOND_H

#include <jansson.h>

#include "server/http.h"
#include "server/openai.h"
#include "server/request.h"

/* The body is j (consumed), at most NB_LIMIT_RESPONSE_BYTES (_cap: cap)
 * bytes; a body that does not fit, or no memory, makes the answer a 500
 * naming why, never a cut body. */
void nb_resp_set_json(nb_http_resp *rs, int status, json_t *j);
void nb_resp_set_json_cap(nb_http_resp *rs, int status, json_t *j, size_t cap);
/* Allocation failures while a JSON answer is built (respond.c): install
 * the checking allocator once (nb_server_create), clear the thread's flag
 * when a request starts, mark a member that could not be built. A marked
 * answer fails in nb_resp_dump instead of going out with a piece missing. */
void nb_resp_json_install(void);
void nb_resp_json_begin(void);
void nb_resp_json_lost(void);
/* Appends j's compact JSON text to b (j is not consumed); fails when the
 * answer was marked lost. */
nb_status nb_resp_dump(nb_dynbuf *b, const json_t *j);
/* e as the error JSON text (malloc'd); a fixed out-of-memory error
 * (*fixed) when e's could not be built whole; NULL only when not even that. */
char *nb_resp_error_json(const nb_oai_error *e, bool *fixed);
void nb_resp_set_error(nb_http_resp *rs, const nb_oai_error *e);
void nb_resp_error(nb_http_resp *rs, int status, const char *type, const char *param, const char *code,
                   const char *msg);
/* Adds a header (nb_http_resp_header): true. When the response has no room
 * left for it, the answer becomes a 500 naming the header instead of going
 * out without it (a body or stream already set is released): false. */
bool nb_resp_header(nb_http_resp *rs, const char *name, const char *value);
json_t *nb_resp_jstr(const char *s, size_t n);
json_t *nb_resp_usage(const srv_req *r);
const char *nb_resp_finish_str(nb_finish_reason f);
json_t *nb_resp_chat_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n);
json_t *nb_resp_completion_logprobs(const nb_tokenizer *tok, const lp_entry *e, size_t n, size_t *offset);
json_t *nb_resp_envelope(const srv_req *r, const char *object);
/* Waits for the request to finish and answers it whole (or with its error). */
void nb_resp_finish_blocking(srv_req *r, nb_http_resp *rs);

#endif
