/* libmicrohttpd wrapper; see http.h. We create the listening socket
 * ourselves (precise bind errors, port 0 -> the kernel's choice) and hand it
 * to MHD, which runs one thread per connection. */
#include "server/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

#if MHD_VERSION < 0x00097002
typedef int nb_mhd_result;
#else
typedef enum MHD_Result nb_mhd_result;
#endif

struct nb_http {
    struct MHD_Daemon *d;
    nb_http_handler h;
    void *ud;
    size_t max_body;
    int port;
    int listen_fd;
    bool quiesced;
};

typedef struct conn_state {
    char *body;
    size_t len, cap;
    bool too_large, responded;
} conn_state;

typedef struct stream_adapter {
    nb_http_stream_fn fn;
    nb_http_stream_free_fn free_fn;
    void *ud;
} stream_adapter;

static ssize_t reader_cb(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_adapter *a = cls;
    ssize_t n = a->fn(a->ud, buf, max);
    if (n == NB_HTTP_STREAM_END) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n <= 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    return n;
}

static void reader_free_cb(void *cls) {
    stream_adapter *a = cls;
    if (a->free_fn) a->free_fn(a->ud);
    free(a);
}

const char *nb_http_header(const nb_http_req *r, const char *name) {
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn_, MHD_HEADER_KIND, name);
}

bool nb_http_peer_closed(int fd) {
    if (fd < 0) return true;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static nb_mhd_result respond(nb_http *s, struct MHD_Connection *c, conn_state *cs, const char *url,
                             const char *method) {
    cs->responded = true;
    nb_http_req req = {.method = method, .path = url, .body = cs->body ? cs->body : "",
                       .body_len = cs->len, .too_large = cs->too_large, .conn_ = c, .fd = -1};
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) req.fd = ci->connect_fd;
    nb_http_resp rs = {.status = 500};
    s->h(s->ud, &req, &rs);

    struct MHD_Response *r = NULL;
    if (rs.stream) {
        stream_adapter *a = malloc(sizeof *a);
        if (a) {
            *a = (stream_adapter){rs.stream, rs.stream_free, rs.stream_ud};
            r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader_cb, a, reader_free_cb);
            if (!r) free(a);
        }
        if (!r) {
            if (rs.stream_free) rs.stream_free(rs.stream_ud);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
    } else {
        r = MHD_create_response_from_buffer(rs.body_len, rs.body ? rs.body : (void *)"",
                                            rs.body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) {
            free(rs.body);
            return MHD_NO;
        }
    }
    MHD_add_response_header(r, "Content-Type", rs.content_type ? rs.content_type : "application/json");
    if (rs.header_name && rs.header_value) MHD_add_response_header(r, rs.header_name, rs.header_value);
    nb_mhd_result ret = MHD_queue_response(c, (unsigned)rs.status, r);
    MHD_destroy_response(r);
    return ret;
}

static nb_mhd_result access_cb(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    (void)version;
    nb_http *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > s->max_body) cs->too_large = true;
        }
        /* Refuse an oversized body before reading it (no 100 Continue is sent). */
        if (cs->too_large) return respond(s, c, cs, url, method);
        return MHD_YES;
    }
    if (cs->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cs->too_large) return MHD_YES; /* discard the rest of a chunked body */
        if (n > s->max_body - cs->len) {
            cs->too_large = true;
            free(cs->body);
            cs->body = NULL;
            cs->len = cs->cap = 0;
            return MHD_YES;
        }
        if (cs->len + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : 4096;
            while (cap < cs->len + n + 1) cap *= 2;
            char *b = realloc(cs->body, cap);
            if (!b) return MHD_NO;
            cs->body = b;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->len, upload_data, n);
        cs->len += n;
        cs->body[cs->len] = '\0';
        return MHD_YES;
    }
    return respond(s, c, cs, url, method);
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    conn_state *cs = *con_cls;
    if (cs) {
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

static nb_status make_listener(const char *host, int port, int *fd_out, int *family) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) return nb_fail(NB_ERR_INVALID, "--host %s: cannot resolve: %s", host, gai_strerror(rc));
    int err = 0, fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 512) == 0) {
            *family = a->ai_family;
            break;
        }
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return nb_fail(NB_ERR_IO, "cannot listen on %s:%d: %s", host, port, strerror(err));
    *fd_out = fd;
    return NB_OK;
}

nb_status nb_http_start(const nb_http_config *c, nb_http_handler h, void *ud, nb_http **out) {
    *out = NULL;
    const char *host = c->host ? c->host : "127.0.0.1";
    if (c->port < 0 || c->port > 65535) return nb_fail(NB_ERR_RANGE, "--port %d: allowed 0..65535", c->port);
    nb_http *s = nb_calloc(1, sizeof *s);
    if (!s) return NB_ERR_NOMEM;
    s->h = h;
    s->ud = ud;
    s->max_body = c->max_body;
    int family = AF_INET;
    nb_status st = make_listener(host, c->port, &s->listen_fd, &family);
    if (st != NB_OK) {
        free(s);
        return st;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    if (family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL, MHD_OPTION_CONNECTION_LIMIT,
                            c->max_connections ? c->max_connections : 1024u, MHD_OPTION_CONNECTION_TIMEOUT,
                            c->idle_timeout_s ? c->idle_timeout_s : 300u, MHD_OPTION_END);
    if (!s->d) {
        close(s->listen_fd);
        free(s);
        return nb_fail(NB_ERR_IO, "libmicrohttpd failed to start on %s:%d", host, c->port);
    }
    *out = s;
    return NB_OK;
}

int nb_http_port(const nb_http *s) { return s->port; }

void nb_http_quiesce(nb_http *s) {
    if (!s || s->quiesced) return;
    s->quiesced = true;
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void nb_http_stop(nb_http *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}
