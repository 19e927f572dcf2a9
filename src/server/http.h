/* A thin wrapper over libmicrohttpd (MHD) for the server: one callback per
 * complete request (method, path, headers, body), answered with either a
 * whole body or a stream, plus an optional early callback when the headers
 * have arrived (before any body byte is read).
 *
 * Threading: MHD runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION);
 * our own accept thread owns the listening socket, hands connections to MHD
 * and enforces the connection limit and the request deadline. The handler
 * and a stream's read callback run on that connection's thread and may
 * block (waiting for the engine); nb_http_peer_closed() lets them notice
 * that the client went away. docs/serve.md explains the choice.
 *
 * Limits enforced here, before the handler sees anything:
 *   - the connection limit: a connection beyond max_connections gets a
 *     canned 503 with Retry-After and is closed (it never waits unanswered
 *     in the listen backlog);
 *   - the request deadline: from the connection's start (or the end of the
 *     previous response on a keep-alive connection) the request line,
 *     headers and body must have arrived within request_timeout_s, or the
 *     connection is closed; a response being produced has no deadline;
 *   - framing: several Content-Length headers, Content-Length together with
 *     Transfer-Encoding, a Content-Length that is not a number, and HTTP/1.1
 *     without Host get 400 and the connection is closed;
 *   - the body cap (Content-Length checked up front, chunked bodies counted
 *     as they arrive; the handler is then called with too_large set and no
 *     body);
 *   - the path is passed exactly as the client sent it (no percent-decoding,
 *     no dot-segment or slash normalisation; the query string is cut off by
 *     MHD and not used). */
#ifndef NB_SERVER_HTTP_H
#define NB_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/limits.h"
#include "base/status.h"

typedef struct nb_http nb_http;

typedef struct nb_http_req nb_http_req;
typedef struct nb_http_resp nb_http_resp;
typedef void (*nb_http_handler)(void *ud, const nb_http_req *req, nb_http_resp *resp);

typedef struct nb_http_config {
    const char *host;          /* numeric address or name; NULL: 127.0.0.1 */
    int port;                  /* 0: any free port (see nb_http_port) */
    size_t max_body;           /* bytes */
    unsigned max_connections;  /* 0: NB_LIMIT_CONNECTIONS */
    unsigned idle_timeout_s;   /* 0: NB_LIMIT_IDLE_TIMEOUT_S (inactivity while a response is produced) */
    unsigned request_timeout_s;/* 0: NB_LIMIT_REQUEST_TIMEOUT_S (request line + headers + body) */
    /* Called when the headers have arrived, before the body is read (req.body
     * is empty). Leave resp->status 0 to go on reading the body; set a
     * response to answer now (the connection is closed after it when the
     * client sent a body). */
    nb_http_handler early;
} nb_http_config;

struct nb_http_req {
    const char *method, *path;
    const char *body;          /* NUL-terminated copy (body_len bytes before the NUL) */
    size_t body_len;
    bool too_large;            /* the body exceeded max_body: answer 413 */
    bool early;                /* the early (headers-only) call */
    double t_start;            /* CLOCK_MONOTONIC seconds when the headers arrived */
    void *conn_;               /* MHD connection (private) */
    int fd;                    /* the client socket */
};

/* A stream reader: fills up to cap bytes, may block. Returns the number of
 * bytes (> 0), NB_HTTP_STREAM_END when done, NB_HTTP_STREAM_ERROR to drop
 * the connection. Never 0. */
#define NB_HTTP_STREAM_END ((ssize_t)-1)
#define NB_HTTP_STREAM_ERROR ((ssize_t)-2)
typedef ssize_t (*nb_http_stream_fn)(void *ud, char *buf, size_t cap);
/* Called once when the stream's response is released (finished, or the
 * client disconnected). */
typedef void (*nb_http_stream_free_fn)(void *ud);

#define NB_HTTP_MAX_EXTRA_HEADERS NB_LIMIT_EXTRA_HEADERS /* old name (base/limits.h) */

struct nb_http_resp {
    int status;
    const char *content_type;      /* NULL: application/json */
    char *body;                    /* malloc'd; the wrapper frees it */
    size_t body_len;
    nb_http_stream_fn stream;      /* set for a streamed (chunked) response instead of body */
    nb_http_stream_free_fn stream_free;
    void *stream_ud;
    const char *header_name, *header_value; /* one extra header (Allow, WWW-Authenticate), optional */
    /* more headers (CORS, Retry-After) through nb_http_resp_header; values must outlive the call */
    const char *extra_name[NB_LIMIT_EXTRA_HEADERS], *extra_value[NB_LIMIT_EXTRA_HEADERS];
    int n_extra;
    bool close;                    /* close the connection after this response */
};

/* Adds a header to resp. false (resp unchanged) when it already holds
 * NB_LIMIT_EXTRA_HEADERS or name / value is NULL: the caller must not send
 * the response without it (server: nb_resp_header answers 500). */
bool nb_http_resp_header(nb_http_resp *r, const char *name, const char *value) __attribute__((warn_unused_result));

nb_status nb_http_start(const nb_http_config *c, nb_http_handler h, void *ud, nb_http **out)
    __attribute__((warn_unused_result));
int nb_http_port(const nb_http *s);
/* Stops accepting new connections (existing ones continue). */
void nb_http_quiesce(nb_http *s);
/* Stops the server: closes every connection, joins the threads, frees. */
void nb_http_stop(nb_http *s);

/* Counters since start: connections refused with 503 (limit), closed at
 * the request deadline, requests refused with 400 for framing. */
typedef struct nb_http_counters {
    uint64_t refused_limit, deadline_closed, bad_framing;
    unsigned open_connections;
} nb_http_counters;
void nb_http_get_counters(nb_http *s, nb_http_counters *out);

/* A request header (case-insensitive name), NULL if absent. */
const char *nb_http_header(const nb_http_req *r, const char *name);
/* True when the client closed its end of the connection (POLLRDHUP/HUP/ERR). */
bool nb_http_peer_closed(int fd);
/* True when the address is a loopback one: 127.0.0.0/8, ::1, or
 * ::ffff:127.0.0.0/104 (IPv4 loopback on a dual-stack socket). */
bool nb_http_addr_loopback(const struct sockaddr *sa, socklen_t len);
/* True when the request's client connects from a loopback address
 * (getpeername of its socket); false when that cannot be told. */
bool nb_http_peer_loopback(const nb_http_req *r);

#endif
