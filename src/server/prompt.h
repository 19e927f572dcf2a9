/* The prompt of a parsed request (prompt.c): the chat template rendered,
 * tokenized and bounded, or the completions prompt; echo's prompt text and
 * log-probabilities. Private to src/server. */
#ifndef NB_SERVER_PROMPT_H
#define NB_SERVER_PROMPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/openai.h"
#include "server/server_int.h"

/* Tokenizes the prompt of a parsed request. */
bool nb_prompt_build(nb_server *s, const nb_oai_request *q, int32_t **ids, size_t *n, nb_oai_error *e);
/* echo: the prompt's text and, with logprobs, its log-probabilities. */
bool nb_prompt_echo(nb_server *s, const nb_oai_request *q, const int32_t *ids, size_t n, char **text,
                    size_t *text_len, json_t **lpj, nb_oai_error *e);

#endif
