/* The request lifecycle (request.c): one srv_req per generation request,
 * reference-counted, filled by the engine's sink and read by the HTTP side.
 *
 * One request = one srv_req, reference-counted: the HTTP side holds one
 * reference until its response is released, the engine side one until the
 * final event (finish != NONE) arrived. Events are copied into the srv_req
 * under its mutex by the sink (engine thread); the HTTP thread waits on its
 * condition variable in 50 ms slices, checking in between whether the
 * client closed the connection (then it aborts the engine request, which
 * frees its KV blocks before the next engine step). Private to src/server. */
#ifndef NB_SERVER_REQUEST_H
#define NB_SERVER_REQUEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dynbuf.h"
#include "server/server_int.h"

/* Where one token's output ends in the pending text and logprob entries:
 * a stream sends one chunk per token, as vLLM and llama-server do, however
 * many tokens came between two reads (clients count chunks for ITL). */
typedef struct tok_mark {
    size_t text_end, lps_end;
} tok_mark;

typedef struct lp_entry {
    int32_t token;
    float logprob;
    int32_t n_top;
    int32_t top_ids[NB_LIMIT_TOP_LOGPROBS];
    float top_lps[NB_LIMIT_TOP_LOGPROBS];
} lp_entry;

struct srv_req {
    nb_server *srv;
    srv_req *prev, *next;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool chat, stream, include_usage, submitted, client_gone;
    int32_t logprobs;
    uint64_t eid;
    int fd;
    char id[48];
    int64_t created;
    int32_t n_prompt;
    /* filled by the sink */
    nb_dynbuf text;        /* new text not yet consumed (capped: cfg.max_response_bytes) */
    lp_entry *lps;         /* new logprob entries not yet consumed */
    size_t n_lps, cap_lps;
    tok_mark *marks;       /* streams: per token, the ends above (none: one chunk) */
    size_t n_marks, cap_marks;
    bool done, got_first;
    nb_finish_reason finish;
    char error[512];
    int32_t n_generated, n_cached;
    double t_submit, t_last;
    /* streaming */
    int stage;             /* 0 role chunk due (chat), 1 tokens, 2 finished */
    nb_dynbuf out;         /* SSE bytes framed, not yet handed to the HTTP layer */
    size_t out_off;
    size_t text_offset;    /* completions logprobs text_offset */
    /* echo (completions): the prompt's text and logprobs, put first in the answer */
    char *echo_text;
    size_t echo_len;
    void *echo_lp;         /* json_t * in the legacy shape, NULL without logprobs */
    bool oom, oom_aborted; /* the sink could not store an event (memory or the output cap): 500 */
    char store_err[200];   /* why (nb_errmsg of the failed append) */
    bool abort_sent;       /* nb_server_abort_all did it (under srv->mu) */
    bool abort_pending;    /* nb_server_abort_all came while it was being submitted (under srv->mu) */
    const char *method, *path; /* for the access log (string constants) */
    nb_tool_stream *tools; /* chat with tools active: parses the output into tool_calls */
    double t_start;        /* headers arrived */
    double t_first;        /* first token delivered (TPOT) */
};

double nb_srv_now(void);
/* A new request of server s: one reference (the HTTP side), its output
 * buffers capped at s->cfg.max_response_bytes. NULL when out of memory. */
srv_req *nb_req_new(nb_server *s);
/* Hands the request to the engine (p->sink / p->ud are set here): links it
 * into the server's live list and takes the engine side's reference. On
 * failure the engine never saw it (one reference left) and the status is
 * the backend's. */
nb_status nb_req_submit(srv_req *r, nb_request_params *p);
void nb_req_release(srv_req *r);
/* The HTTP side is done with the request (response sent or dropped). */
void nb_req_http_done(srv_req *r);
/* The engine's event sink (engine thread); ud is the srv_req. */
void nb_req_sink(void *ud, const nb_token_event *ev);
/* Waits (mu held) until there is news or the request is done; false when
 * the client went away (the engine request is then aborted). */
bool nb_req_wait_news(srv_req *r, bool any_news);

#endif
