/* The OpenAI routes (routes_openai.c): POST /v1/completions and
 * /v1/chat/completions (parse, prompt, submit, wait or stream) and
 * GET /v1/models. Private to src/server. */
#ifndef NB_SERVER_ROUTES_OPENAI_H
#define NB_SERVER_ROUTES_OPENAI_H

#include <stdbool.h>
#include <stdint.h>

#include "server/http.h"
#include "server/openai.h"
#include "server/server_int.h"

void nb_route_generate(nb_server *s, const nb_http_req *req, nb_http_resp *rs, nb_oai_kind kind,
                       int32_t *n_prompt, int32_t *n_gen, bool *logged);
void nb_route_models(nb_server *s, nb_http_resp *rs);

#endif
