/* What the parts of the server share (server.c, request.c, respond.c,
 * sse.c, prompt.c, routes_openai.c): the server object and the access log.
 * Private to src/server. */
#ifndef NB_SERVER_SERVER_INT_H
#define NB_SERVER_SERVER_INT_H

#include <stdatomic.h>
#include <stdio.h>

#include "server/http.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/toolcall.h"
#include "tokenizer/chat_template.h"

enum { ST_LOADING = 0, ST_READY, ST_SHUTTING, ST_DRAINING };

typedef struct srv_req srv_req;

struct nb_server {
    nb_http *http;
    nb_server_config cfg;
    char *model_name, *api_key;
    _Atomic int state;
    nb_server_backend be;
    nb_chat_template *tmpl; /* the model's (or --chat-template's) Jinja template */
    char bos_text[64], eos_text[64];
    int32_t eot_id;       /* the template's end-of-turn token, -1 if none */
    nb_tool_format tool_format; /* tool-call syntax of the template's family (toolcall.h) */
    bool tool_special;          /* its markers are control tokens: requests with tools render control-token text */
    nb_metrics metrics;
    pthread_mutex_t mu;   /* guards reqs, in_flight */
    srv_req *reqs;        /* live requests (doubly linked) */
    int in_flight;
    _Atomic uint64_t id_seq;
    _Atomic int64_t last_arrival_us; /* CLOCK_MONOTONIC of the last generation request (nb_server_idle_s) */
    int64_t created;
    FILE *access_log;     /* --access-log, NULL: none */
    bool own_log;         /* fclose at free */
};

/* One access-log line (server.c). */
void nb_server_access_log(nb_server *s, const char *method, const char *path, int status, int32_t n_prompt,
                          int32_t n_gen, double t_start);

#endif
