/* libmicrohttpd wrapper; see http.h. We create the listening socket
 * ourselves (precise bind errors, port 0 -> the kernel's choice) and accept
 * on our own thread, which hands each connection to MHD (one thread per
 * connection), answers connections beyond the limit with a canned 503, and
 * closes connections whose request has not fully arrived by the deadline
 * (shutdown(2) of the socket: MHD's connection thread then sees the end of
 * the stream and cleans up). A connection's first request has one clock
 * from accept(2): the time it waited here for its first byte counts, so a
 * client cannot double the deadline by sending one byte just before it. */
#include "server/http.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#if MHD_VERSION < 0x00097002
typedef int nb_mhd_result;
#else
typedef enum MHD_Result nb_mhd_result;
#endif

#define LINGER_MAX 256      /* refused connections draining before close */
#define LINGER_S 2.0

typedef struct conn_rec {
    struct conn_rec *prev, *next;
    int fd;
    double start;  /* the current request's deadline counts from here */
    bool busy;     /* the request has arrived; a response is being produced */
    bool killed;
} conn_rec;

typedef struct linger_ent {
    int fd;
    double until;
} linger_ent;

/* Accepted, waiting for its first bytes before MHD gets it. */
typedef struct pending_ent {
    int fd;
    double accepted, until;
    struct sockaddr_storage addr;
    socklen_t addr_len;
} pending_ent;

/* Handed to MHD, not yet seen by notify_cb (MHD starts the connection on its
 * own thread): the accept time its deadline counts from. */
typedef struct handoff_ent {
    int fd;
    double accepted;
} handoff_ent;

struct nb_http {
    struct MHD_Daemon *d;
    nb_http_handler h, early;
    void *ud;
    size_t max_body;
    int port;
    int listen_fd;
    unsigned max_conn;
    double req_timeout;
    int wake[2];
    pthread_t acceptor;
    bool acceptor_started;
    _Atomic bool quiesce_req, stopping;
    pthread_mutex_t mu; /* guards conns, n_conns, the conn_rec fields */
    conn_rec *conns;
    unsigned n_conns;
    linger_ent linger[LINGER_MAX];
    int n_linger;
    pending_ent *pending; /* max_conn entries */
    unsigned n_pending;
    handoff_ent *handoff; /* max_conn entries, guarded by mu */
    unsigned n_handoff;
    struct pollfd *pfd;   /* max_conn + 2 */
    _Atomic uint64_t refused_limit, deadline_closed, bad_framing;
};

typedef struct conn_state {
    char *body;
    size_t len, cap;
    bool too_large, responded;
    double t_start;
} conn_state;

typedef struct stream_adapter {
    nb_http_stream_fn fn;
    nb_http_stream_free_fn free_fn;
    void *ud;
} stream_adapter;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

bool nb_http_resp_header(nb_http_resp *r, const char *name, const char *value) {
    if (r->n_extra < 0 || r->n_extra >= NB_LIMIT_EXTRA_HEADERS || !name || !value) return false;
    r->extra_name[r->n_extra] = name;
    r->extra_value[r->n_extra] = value;
    r->n_extra++;
    return true;
}

bool nb_http_addr_loopback(const struct sockaddr *sa, socklen_t len) {
    if (!sa) return false;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

bool nb_http_peer_loopback(const nb_http_req *r) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (!r || r->fd < 0 || getpeername(r->fd, (struct sockaddr *)&ss, &sl) != 0) return false;
    return nb_http_addr_loopback((const struct sockaddr *)&ss, sl);
}

const char *nb_http_header(const nb_http_req *r, const char *name) {
    if (!r->conn_) return NULL;
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn_, MHD_HEADER_KIND, name);
}

bool nb_http_peer_closed(int fd) {
    if (fd < 0) return true;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* The accept time recorded for fd when it was handed to MHD (and forgets
 * it), else dflt. Caller holds mu. */
static double handoff_take(nb_http *s, int fd, double dflt) {
    for (unsigned i = 0; i < s->n_handoff; i++)
        if (s->handoff[i].fd == fd) {
            double t = s->handoff[i].accepted;
            s->handoff[i] = s->handoff[--s->n_handoff];
            return t;
        }
    return dflt;
}

/* Records fd's accept time before MHD_add_connection. An entry with the same
 * fd is stale (MHD closed that connection without starting it), so it is
 * replaced; when full, the oldest goes (its connection is past its deadline
 * or never started). Caller holds mu. */
static void handoff_put(nb_http *s, int fd, double accepted) {
    unsigned at = s->n_handoff, oldest = 0;
    for (unsigned i = 0; i < s->n_handoff; i++) {
        if (s->handoff[i].fd == fd) at = i;
        if (s->handoff[i].accepted < s->handoff[oldest].accepted) oldest = i;
    }
    if (at == s->n_handoff) {
        if (s->n_handoff < s->max_conn) s->n_handoff++;
        else at = oldest;
    }
    s->handoff[at] = (handoff_ent){fd, accepted};
}

static conn_rec *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_rec *)ci->socket_context : NULL;
}

static void set_busy(nb_http *s, struct MHD_Connection *c, bool busy) {
    conn_rec *r = conn_of(c);
    if (!r) return;
    pthread_mutex_lock(&s->mu);
    r->busy = busy;
    if (!busy) r->start = mono_s();
    pthread_mutex_unlock(&s->mu);
}

static nb_mhd_result queue(struct MHD_Connection *c, nb_http_resp *rs) {
    struct MHD_Response *r = NULL;
    if (rs->stream) {
        stream_adapter *a = malloc(sizeof *a);
        if (a) {
            *a = (stream_adapter){rs->stream, rs->stream_free, rs->stream_ud};
            r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader_cb, a, reader_free_cb);
            if (!r) free(a);
        }
        if (!r) {
            if (rs->stream_free) rs->stream_free(rs->stream_ud);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
    } else {
        r = MHD_create_response_from_buffer(rs->body_len, rs->body ? rs->body : (void *)"",
                                            rs->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) {
            free(rs->body);
            return MHD_NO;
        }
    }
    if (rs->status != 204)
        MHD_add_response_header(r, "Content-Type", rs->content_type ? rs->content_type : "application/json");
    if (rs->header_name && rs->header_value) MHD_add_response_header(r, rs->header_name, rs->header_value);
    for (int i = 0; i < rs->n_extra; i++) MHD_add_response_header(r, rs->extra_name[i], rs->extra_value[i]);
    if (rs->close) MHD_add_response_header(r, "Connection", "close");
    nb_mhd_result ret = MHD_queue_response(c, (unsigned)rs->status, r);
    MHD_destroy_response(r);
    return ret;
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static nb_mhd_result respond(nb_http *s, struct MHD_Connection *c, conn_state *cs, const char *url,
                             const char *method) {
    cs->responded = true;
    set_busy(s, c, true);
    nb_http_req req = {.method = method, .path = url, .body = cs->body ? cs->body : "", .body_len = cs->len,
                       .too_large = cs->too_large, .t_start = cs->t_start, .conn_ = c, .fd = conn_fd(c)};
    nb_http_resp rs = {.status = 500};
    s->h(s->ud, &req, &rs);
    return queue(c, &rs);
}

/* A canned error for framing problems: 400 and close. */
static nb_mhd_result bad_request(nb_http *s, struct MHD_Connection *c, conn_state *cs, const char *msg) {
    atomic_fetch_add(&s->bad_framing, 1);
    cs->responded = true;
    set_busy(s, c, true);
    char *body = NULL;
    if (asprintf(&body,
                 "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"param\":null,"
                 "\"code\":\"bad_request\"}}",
                 msg) < 0)
        body = NULL;
    nb_http_resp rs = {.status = 400, .body = body, .body_len = body ? strlen(body) : 0, .close = true};
    return queue(c, &rs);
}

typedef struct hdr_count {
    int n_cl, n_te, n_host;
    bool cl_bad;
} hdr_count;

static nb_mhd_result count_hdr(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    hdr_count *h = cls;
    if (!strcasecmp(key, "Content-Length")) {
        h->n_cl++;
        if (!value || !*value || strspn(value, "0123456789") != strlen(value) || strlen(value) > 19) h->cl_bad = true;
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        h->n_te++;
    } else if (!strcasecmp(key, "Host")) {
        h->n_host++;
    }
    return MHD_YES;
}

static nb_mhd_result access_cb(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    nb_http *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        cs->t_start = mono_s();
        /* Framing: what a proxy in front of us could read differently. */
        hdr_count hc = {0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_hdr, &hc);
        if (hc.n_cl > 1) return bad_request(s, c, cs, "more than one Content-Length header");
        if (hc.cl_bad) return bad_request(s, c, cs, "Content-Length is not a decimal number");
        if (hc.n_cl && hc.n_te) return bad_request(s, c, cs, "both Content-Length and Transfer-Encoding");
        if (hc.n_te > 1) return bad_request(s, c, cs, "more than one Transfer-Encoding header");
        if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) && hc.n_host != 1)
            return bad_request(s, c, cs, hc.n_host ? "more than one Host header" : "HTTP/1.1 request without Host");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > s->max_body) cs->too_large = true;
        }
        /* Headers are here: auth, routing and the like answer now, before any
         * body byte is read (no 100 Continue is sent). */
        if (s->early) {
            nb_http_req req = {.method = method, .path = url, .body = "", .early = true, .t_start = cs->t_start,
                               .conn_ = c, .fd = conn_fd(c)};
            nb_http_resp rs = {.status = 0};
            s->early(s->ud, &req, &rs);
            if (rs.status) {
                cs->responded = true;
                set_busy(s, c, true);
                const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
                if ((cl && strcmp(cl, "0")) || te) rs.close = true; /* a body follows that we will not read */
                return queue(c, &rs);
            }
        }
        /* Refuse an oversized body before reading it. */
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
    (void)toe;
    nb_http *s = cls;
    conn_state *cs = *con_cls;
    if (cs) {
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
    set_busy(s, c, false); /* keep-alive: the next request's deadline starts now */
}

static void notify_cb(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    nb_http *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *r = calloc(1, sizeof *r);
        *socket_context = r;
        if (!r) return; /* no deadline for this one; everything else works */
        r->fd = conn_fd(c);
        r->start = mono_s();
        pthread_mutex_lock(&s->mu);
        r->start = handoff_take(s, r->fd, r->start);
        r->next = s->conns;
        if (s->conns) s->conns->prev = r;
        s->conns = r;
        s->n_conns++;
        pthread_mutex_unlock(&s->mu);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_rec *r = *socket_context;
        if (!r) return;
        pthread_mutex_lock(&s->mu);
        if (r->prev) r->prev->next = r->next;
        else s->conns = r->next;
        if (r->next) r->next->prev = r->prev;
        s->n_conns--;
        pthread_mutex_unlock(&s->mu);
        free(r);
        *socket_context = NULL;
    }
}

/* The request path exactly as sent: no percent-decoding. */
static size_t unescape_none(void *cls, struct MHD_Connection *c, char *uri) {
    (void)cls;
    (void)c;
    return strlen(uri);
}

/* ---- accept thread ------------------------------------------------------ */

static const char refuse_body[] =
    "{\"error\":{\"message\":\"the server has no free connection (--max-connections); retry later\","
    "\"type\":\"service_unavailable\",\"param\":null,\"code\":\"too_many_connections\"}}";

static void linger_close(nb_http *s, int i) {
    close(s->linger[i].fd);
    s->linger[i] = s->linger[--s->n_linger];
}

static const char binary_body[] =
    "{\"error\":{\"message\":\"the request line does not start with an HTTP method\","
    "\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"bad_request\"}}";

/* Sends a canned response and closes after a short drain. */
static void canned(nb_http *s, int fd, const char *status, const char *body, size_t len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     status, status[0] == '5' ? "Retry-After: 1\r\n" : "", len);
    (void)!send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)!send(fd, body, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    /* Drain what the client sends for a moment before closing, so the kernel
     * does not answer its request bytes with a reset that destroys the 503. */
    if (s->n_linger == LINGER_MAX) linger_close(s, 0);
    s->linger[s->n_linger++] = (linger_ent){fd, mono_s() + LINGER_S};
}

static void refuse(nb_http *s, int fd) {
    atomic_fetch_add(&s->refused_limit, 1);
    canned(s, fd, "503 Service Unavailable", refuse_body, sizeof refuse_body - 1);
}

static void accept_some(nb_http *s) {
    for (int k = 0; k < 64; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        pthread_mutex_lock(&s->mu);
        bool full = s->n_conns + s->n_pending >= s->max_conn;
        pthread_mutex_unlock(&s->mu);
        if (full) {
            refuse(s, fd);
            continue;
        }
        /* Wait for the first bytes here (no thread yet for a silent client). */
        pending_ent *p = &s->pending[s->n_pending++];
        p->fd = fd;
        p->accepted = mono_s();
        p->until = p->accepted + s->req_timeout;
        p->addr = ss;
        p->addr_len = sl;
    }
}

static void pending_drop(nb_http *s, unsigned i) { s->pending[i] = s->pending[--s->n_pending]; }

/* The first bytes of a pending connection arrived: a request line starts
 * with an upper-case method token; anything else (TLS, binary) gets 400. */
static void pending_ready(nb_http *s, unsigned i) {
    pending_ent p = s->pending[i];
    pending_drop(s, i);
    unsigned char b[1];
    ssize_t n = recv(p.fd, b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) {
        close(p.fd);
        return;
    }
    if (b[0] < 'A' || b[0] > 'Z') {
        atomic_fetch_add(&s->bad_framing, 1);
        canned(s, p.fd, "400 Bad Request", binary_body, sizeof binary_body - 1);
        return;
    }
    /* the deadline keeps counting from accept, not from now (notify_cb) */
    pthread_mutex_lock(&s->mu);
    handoff_put(s, p.fd, p.accepted);
    pthread_mutex_unlock(&s->mu);
    if (MHD_add_connection(s->d, p.fd, (struct sockaddr *)&p.addr, p.addr_len) != MHD_YES) {
        int e = errno;
        pthread_mutex_lock(&s->mu);
        (void)handoff_take(s, p.fd, 0); /* MHD closed it: the fd number may come back */
        pthread_mutex_unlock(&s->mu);
        NB_WARN("http: could not hand a connection to libmicrohttpd: %s", strerror(e));
    }
}

static void reap(nb_http *s) {
    double now = mono_s();
    pthread_mutex_lock(&s->mu);
    for (conn_rec *r = s->conns; r; r = r->next)
        if (!r->busy && !r->killed && r->fd >= 0 && now - r->start > s->req_timeout) {
            r->killed = true;
            shutdown(r->fd, SHUT_RDWR);
            atomic_fetch_add(&s->deadline_closed, 1);
        }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_linger;) {
        char b[4096];
        ssize_t n = recv(s->linger[i].fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || now > s->linger[i].until)
            linger_close(s, i);
        else i++;
    }
}

static void *acceptor_main(void *arg) {
    nb_http *s = arg;
    struct pollfd *p = s->pfd;
    while (!atomic_load(&s->stopping)) {
        if (atomic_load(&s->quiesce_req) && s->listen_fd >= 0) {
            close(s->listen_fd);
            s->listen_fd = -1;
        }
        p[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN}; /* -1: ignored by poll */
        unsigned np = s->n_pending;
        for (unsigned i = 0; i < np; i++) p[2 + i] = (struct pollfd){.fd = s->pending[i].fd, .events = POLLIN};
        int rc = poll(p, (nfds_t)(2 + np), 100);
        if (rc > 0 && (p[0].revents & POLLIN)) {
            char b[64];
            (void)!read(s->wake[0], b, sizeof b);
        }
        double now = mono_s();
        /* pending, from the end so that pending_drop's swap keeps indices valid */
        for (unsigned i = np; i-- > 0;) {
            if (rc > 0 && p[2 + i].revents) pending_ready(s, i);
            else if (now > s->pending[i].until) {
                atomic_fetch_add(&s->deadline_closed, 1);
                close(s->pending[i].fd);
                pending_drop(s, i);
            }
        }
        if (rc > 0 && s->listen_fd >= 0 && (p[1].revents & POLLIN)) accept_some(s);
        reap(s);
    }
    return NULL;
}

static void wake(nb_http *s) { (void)!write(s->wake[1], "x", 1); }

static nb_status make_listener(const char *host, int port, int *fd_out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) return nb_fail(NB_ERR_INVALID, "--host %s: cannot resolve: %s", host, gai_strerror(rc));
    int err = 0, fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
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
    s->early = c->early;
    s->ud = ud;
    s->max_body = c->max_body;
    s->max_conn = c->max_connections ? c->max_connections : NB_LIMIT_CONNECTIONS;
    s->req_timeout = (double)(c->request_timeout_s ? c->request_timeout_s : NB_LIMIT_REQUEST_TIMEOUT_S);
    s->wake[0] = s->wake[1] = -1;
    s->pending = nb_calloc(s->max_conn, sizeof *s->pending);
    s->handoff = nb_calloc(s->max_conn, sizeof *s->handoff);
    s->pfd = nb_calloc(s->max_conn + 2, sizeof *s->pfd);
    if (!s->pending || !s->handoff || !s->pfd) {
        free(s->pending);
        free(s->handoff);
        free(s->pfd);
        free(s);
        return NB_ERR_NOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    nb_status st = make_listener(host, c->port, &s->listen_fd);
    if (st != NB_OK) {
        pthread_mutex_destroy(&s->mu);
        free(s->pending);
        free(s->handoff);
        free(s->pfd);
        free(s);
        return st;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        int e = errno;
        close(s->listen_fd);
        pthread_mutex_destroy(&s->mu);
        free(s->pending);
        free(s->handoff);
        free(s->pfd);
        free(s);
        return nb_fail(NB_ERR_IO, "http: pipe: %s", strerror(e));
    }
    /* poll(), not select(): select cannot watch descriptors >= FD_SETSIZE (1024),
     * and MHD refuses such connections, so past ~1000 open sockets every new
     * client would be dropped. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_POLL;
    /* MHD's own limit sits above ours: the accept thread refuses with 503 first. */
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, s, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, s,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_cb, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_none,
                            NULL, MHD_OPTION_CONNECTION_LIMIT, s->max_conn + 64, MHD_OPTION_CONNECTION_TIMEOUT,
                            c->idle_timeout_s ? c->idle_timeout_s : NB_LIMIT_IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (!s->d) {
        close(s->listen_fd);
        close(s->wake[0]);
        close(s->wake[1]);
        pthread_mutex_destroy(&s->mu);
        free(s->pending);
        free(s->handoff);
        free(s->pfd);
        free(s);
        return nb_fail(NB_ERR_IO, "libmicrohttpd failed to start on %s:%d", host, c->port);
    }
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        MHD_stop_daemon(s->d);
        close(s->listen_fd);
        close(s->wake[0]);
        close(s->wake[1]);
        pthread_mutex_destroy(&s->mu);
        free(s->pending);
        free(s->handoff);
        free(s->pfd);
        free(s);
        return nb_fail(NB_ERR_IO, "http: cannot start the accept thread");
    }
    s->acceptor_started = true;
    *out = s;
    return NB_OK;
}

int nb_http_port(const nb_http *s) { return s->port; }

void nb_http_quiesce(nb_http *s) {
    if (!s) return;
    atomic_store(&s->quiesce_req, true);
    wake(s);
}

void nb_http_get_counters(nb_http *s, nb_http_counters *out) {
    out->refused_limit = atomic_load(&s->refused_limit);
    out->deadline_closed = atomic_load(&s->deadline_closed);
    out->bad_framing = atomic_load(&s->bad_framing);
    pthread_mutex_lock(&s->mu);
    out->open_connections = s->n_conns;
    pthread_mutex_unlock(&s->mu);
}

void nb_http_stop(nb_http *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    wake(s);
    if (s->acceptor_started) pthread_join(s->acceptor, NULL);
    if (s->listen_fd >= 0) close(s->listen_fd);
    for (int i = 0; i < s->n_linger; i++) close(s->linger[i].fd);
    for (unsigned i = 0; i < s->n_pending; i++) close(s->pending[i].fd);
    MHD_stop_daemon(s->d);
    free(s->pending);
    free(s->handoff);
    free(s->pfd);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
