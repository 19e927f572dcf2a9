/* The request lifecycle of the server (request.c, sse.c, respond.c,
 * routes_openai.c) against a FAKE engine behind the nb_server_backend seam:
 * submit and answer, stream, the client gone mid-stream and while waiting,
 * abort, an engine error, a refused submit, the output cap, and shutdown
 * with requests in flight.
 *
 * The server is the real one (libmicrohttpd, real sockets on 127.0.0.1);
 * the fake engine runs its own thread and calls the sinks from there, as
 * the real engine loop does, so the three thread kinds (HTTP connection
 * threads, the engine thread, the test's main thread) interleave here as
 * in `nibble serve`; `make test-tsan` runs this test under ThreadSanitizer.
 * The tokenizer is the built-in vocabulary of a synthesized model (no
 * shared/ needed). Waits are bounded by generous deadlines; nothing asserts
 * a time. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "model/synth.h"
#include "server/server.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

/* ---- the fake engine ---------------------------------------------------- */

typedef enum { MODE_AUTO = 0, MODE_HOLD, MODE_ERROR, MODE_REJECT } fake_mode;

#define FAKE_MAX 64

typedef struct fake_req {
    uint64_t id;
    nb_sink_fn sink;
    void *ud;
    int32_t max_tokens, n_prompt, sent;
    bool aborted, finished;
} fake_req;

typedef struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool stop;
    fake_mode mode;
    int release;          /* MODE_HOLD: tokens the engine may still emit */
    fake_req reqs[FAKE_MAX];
    int n_reqs;
    uint64_t next_id;
    int submits, aborts, finals;
    nb_finish_reason last_finish;
} fake;

static nb_status fake_submit(void *ctx, const nb_request_params *p, uint64_t *id) {
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->submits++;
    if (f->mode == MODE_REJECT || f->n_reqs == FAKE_MAX) {
        pthread_mutex_unlock(&f->mu);
        return nb_fail(NB_ERR_OVERLOADED, "fake engine: the queue is full");
    }
    fake_req *r = &f->reqs[f->n_reqs++];
    memset(r, 0, sizeof *r);
    r->id = *id = ++f->next_id;
    r->sink = p->sink;
    r->ud = p->ud;
    r->max_tokens = p->max_tokens;
    r->n_prompt = (int32_t)p->n_prompt;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NB_OK;
}

static void fake_abort(void *ctx, uint64_t id) {
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->aborts++;
    for (int i = 0; i < f->n_reqs; i++)
        if (f->reqs[i].id == id) f->reqs[i].aborted = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void fake_stats(void *ctx, struct nb_engine_stats *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
}

/* One event to a sink, outside the fake's lock (as the engine does). */
static void emit(fake *f, fake_req *r, bool token, nb_finish_reason fin, const char *err) {
    nb_token_event ev;
    memset(&ev, 0, sizeof ev);
    ev.request_id = r->id;
    ev.token = token ? 'a' : -1; /* any valid id: the text is what is checked */
    ev.text = token ? "a" : NULL;
    ev.text_len = token ? 1 : 0;
    ev.finish = fin;
    ev.error = err;
    ev.n_prompt_tokens = r->n_prompt;
    ev.n_generated = r->sent;
    nb_sink_fn sink = r->sink;
    void *ud = r->ud;
    pthread_mutex_unlock(&f->mu);
    sink(ud, &ev);
    pthread_mutex_lock(&f->mu);
    if (fin != NB_FINISH_NONE) {
        f->finals++;
        f->last_finish = fin;
    }
}

/* The engine thread: every live request gets at most one event per pass;
 * an aborted one gets its final ABORT event, as the real engine sends. */
static void *fake_loop(void *arg) {
    fake *f = arg;
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        bool any = false;
        for (int i = 0; i < f->n_reqs; i++) {
            fake_req *r = &f->reqs[i];
            if (r->finished) continue;
            if (r->aborted) {
                r->finished = true;
                emit(f, r, false, NB_FINISH_ABORT, NULL);
                any = true;
            } else if (f->mode == MODE_ERROR) {
                r->finished = true;
                emit(f, r, false, NB_FINISH_ERROR, "fake engine: the step failed");
                any = true;
            } else if (f->mode == MODE_AUTO || f->release > 0) {
                if (f->mode == MODE_HOLD) f->release--;
                r->sent++;
                bool last = r->sent >= r->max_tokens;
                if (last) r->finished = true;
                emit(f, r, true, last ? NB_FINISH_LENGTH : NB_FINISH_NONE, NULL);
                any = true;
            }
        }
        if (!any) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 5 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&f->cv, &f->mu, &ts);
        }
    }
    /* like nb_engine_free: every request still live gets its final event */
    for (int i = 0; i < f->n_reqs; i++)
        if (!f->reqs[i].finished) {
            f->reqs[i].finished = true;
            emit(f, &f->reqs[i], false, NB_FINISH_ABORT, NULL);
        }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static int fake_get(fake *f, int *field) {
    pthread_mutex_lock(&f->mu);
    int v = *field;
    pthread_mutex_unlock(&f->mu);
    return v;
}

static void fake_release(fake *f, int n) {
    pthread_mutex_lock(&f->mu);
    f->release += n;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* ---- fixture: tokenizer, fake engine, server ---------------------------- */

static nb_tokenizer *tok;

typedef struct fixture {
    fake f;
    nb_server *srv;
    int port;
} fixture;

static int group_setup(void **state) {
    (void)state;
    static char path[600];
    snprintf(path, sizeof path, "%s/lifecycle-synth.gguf", nb_test_tmpdir());
    nb_synth_params sp;
    nb_synth_defaults(&sp, NB_ARCH_LLAMA);
    sp.n_embd = 32; sp.n_layer = 1; sp.n_head = 2; sp.n_head_kv = 2; sp.n_ff = 64; sp.n_ctx = 256;
    sp.wtype = NB_F32;
    if (nb_synth_write(&sp, path) != NB_OK) return -1;
    return nb_tokenizer_load(path, NULL, &tok) == NB_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    nb_tokenizer_free(tok);
    return 0;
}

static fixture *start(fake_mode mode, size_t max_response_bytes) {
    fixture *x = calloc(1, sizeof *x);
    assert_non_null(x);
    pthread_mutex_init(&x->f.mu, NULL);
    pthread_cond_init(&x->f.cv, NULL);
    x->f.mode = mode;
    assert_int_equal(pthread_create(&x->f.thread, NULL, fake_loop, &x->f), 0);
    nb_server_config c = {.served_model_name = "fake", .max_response_bytes = max_response_bytes};
    assert_int_equal(nb_server_create(&c, &x->srv), NB_OK);
    x->port = nb_server_port(x->srv);
    nb_server_backend be = {.ctx = &x->f, .submit = fake_submit, .abort = fake_abort, .stats = fake_stats,
                            .tok = tok, .max_model_len = 256};
    nb_server_set_ready(x->srv, &be);
    return x;
}

/* The shutdown order of cmd_serve: stop accepting, abort, the engine
 * delivers its final events and stops, then the server is freed. */
static void stop(fixture *x) {
    nb_server_begin_shutdown(x->srv);
    nb_server_abort_all(x->srv);
    pthread_mutex_lock(&x->f.mu);
    x->f.stop = true;
    pthread_cond_broadcast(&x->f.cv);
    pthread_mutex_unlock(&x->f.mu);
    pthread_join(x->f.thread, NULL);
    nb_server_free(x->srv);
    pthread_mutex_destroy(&x->f.mu);
    pthread_cond_destroy(&x->f.cv);
    free(x);
}

/* Polls cond(x) every 10 ms for up to 20 s (a deadline against hangs, not
 * a timing assertion). */
static bool eventually(bool (*cond)(fixture *), fixture *x) {
    for (int i = 0; i < 2000; i++) {
        if (cond(x)) return true;
        usleep(10000);
    }
    return cond(x);
}

static bool no_in_flight(fixture *x) { return nb_server_in_flight(x->srv) == 0; }
static bool one_submitted(fixture *x) { return fake_get(&x->f, &x->f.submits) >= 1; }
static bool one_in_flight(fixture *x) { return nb_server_in_flight(x->srv) == 1 && one_submitted(x); }
static bool one_abort(fixture *x) { return fake_get(&x->f, &x->f.aborts) >= 1; }
static bool one_final(fixture *x) { return fake_get(&x->f, &x->f.finals) >= 1; }

/* ---- a small HTTP client ------------------------------------------------ */

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static int send_post(int port, const char *path, const char *body) {
    int fd = connect_to(port);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     path, strlen(body));
    assert_int_equal(write(fd, head, (size_t)n), n);
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    return fd;
}

/* Reads until the server closes (or 20 s without a byte); a malloc'd string. */
static char *read_all(int fd) {
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20000) <= 0) break;
        if (len + 1024 > cap) {
            cap *= 2;
            s = realloc(s, cap);
            assert_non_null(s);
        }
        ssize_t k = read(fd, s + len, cap - len - 1);
        if (k <= 0) break;
        len += (size_t)k;
    }
    s[len] = '\0';
    return s;
}

/* Reads until `needle` arrived (or the connection ended); returns whether it did. */
static bool read_until(int fd, const char *needle) {
    char buf[8192];
    size_t len = 0;
    while (len + 1 < sizeof buf) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20000) <= 0) return false;
        ssize_t k = read(fd, buf + len, sizeof buf - len - 1);
        if (k <= 0) return false;
        len += (size_t)k;
        buf[len] = '\0';
        if (strstr(buf, needle)) return true;
    }
    return false;
}

static int status_of(const char *resp) {
    int st = 0;
    return sscanf(resp, "HTTP/1.1 %d", &st) == 1 ? st : 0;
}

/* The JSON body of a whole (non-chunked) response. */
static json_t *body_json(const char *resp) {
    const char *b = strstr(resp, "\r\n\r\n");
    assert_non_null(b);
    json_error_t e;
    json_t *j = json_loads(b + 4, 0, &e);
    if (!j) fprintf(stderr, "not JSON: %s\n", b + 4);
    assert_non_null(j);
    return j;
}

/* Concatenates the "text" (completions) or delta "content" (chat) of every
 * SSE event of a streamed response; counts the events with an "error". */
static char *sse_text(const char *resp, int *n_errors, bool *done, char *last_finish, size_t lf_cap) {
    static char out[4096];
    size_t k = 0;
    *n_errors = 0;
    *done = false;
    if (last_finish) last_finish[0] = '\0';
    for (const char *p = strstr(resp, "data: "); p; p = strstr(p + 1, "data: ")) {
        p += 6;
        if (!strncmp(p, "[DONE]", 6)) { *done = true; continue; }
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        json_error_t e;
        json_t *j = json_loadb(p, (size_t)(end - p), 0, &e);
        assert_non_null(j);
        if (json_object_get(j, "error")) (*n_errors)++;
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        if (c) {
            json_t *t = json_object_get(c, "text");
            if (!t) t = json_object_get(json_object_get(c, "delta"), "content");
            if (json_is_string(t)) {
                size_t l = json_string_length(t);
                assert_true(k + l < sizeof out);
                memcpy(out + k, json_string_value(t), l);
                k += l;
            }
            json_t *fr = json_object_get(c, "finish_reason");
            if (json_is_string(fr) && last_finish) snprintf(last_finish, lf_cap, "%s", json_string_value(fr));
        }
        json_decref(j);
    }
    out[k] = '\0';
    return out;
}

/* One whole exchange: POST body to path, read until the server closes. */
static char *post(fixture *x, const char *path, const char *body) {
    int fd = send_post(x->port, path, body);
    char *resp = read_all(fd);
    close(fd);
    return resp;
}

/* A stream that failed before any text: 200, one error event naming
 * `needle`, then [DONE]. Frees resp. */
static void assert_stream_failed(char *resp, const char *needle) {
    int nerr;
    bool done;
    assert_int_equal(status_of(resp), 200);
    assert_string_equal(sse_text(resp, &nerr, &done, NULL, 0), "");
    assert_int_equal(nerr, 1);
    assert_true(done);
    assert_non_null(strstr(resp, needle));
    free(resp);
}

/* ---- the tests ---------------------------------------------------------- */

/* A blocking request: submitted once, answered whole, released. */
static void test_submit_blocking(void **state) {
    (void)state;
    fixture *x = start(MODE_AUTO, 0);
    char *resp = post(x, "/v1/completions", "{\"prompt\": \"hello\", \"max_tokens\": 5}");
    assert_int_equal(status_of(resp), 200);
    json_t *j = body_json(resp);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "text")), "aaaaa");
    assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), 5);
    /* the prompt tokens the fake saw are what the usage reports */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(nb_tokenize(tok, "hello", 5, true, false, &ids, &n), NB_OK);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), (json_int_t)n);
    free(ids);
    json_decref(j);
    free(resp);
    assert_true(eventually(no_in_flight, x));
    assert_int_equal(fake_get(&x->f, &x->f.submits), 1);
    assert_int_equal(fake_get(&x->f, &x->f.aborts), 0);
    stop(x);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* A stream: every token arrives as its own event, in order, then the final
 * chunk and [DONE]; chat's first chunk carries the role. The fake engine
 * emits tokens far faster than the HTTP side reads them, so one event per
 * token holds only if the server keeps the tokens apart (clients count
 * events for ITL; vLLM and llama-server send one per token). */
static void test_stream(void **state) {
    (void)state;
    fixture *x = start(MODE_AUTO, 0);
    char *resp = post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 7, \"stream\": true}");
    assert_int_equal(status_of(resp), 200);
    assert_non_null(strstr(resp, "text/event-stream"));
    int nerr;
    bool done;
    char fin[32];
    assert_string_equal(sse_text(resp, &nerr, &done, fin, sizeof fin), "aaaaaaa");
    assert_int_equal(count_of(resp, "\"text\":\"a\""), 7);
    assert_int_equal(nerr, 0);
    assert_true(done);
    assert_string_equal(fin, "length");
    free(resp);

    resp = post(x, "/v1/chat/completions",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 3, \"stream\": true,"
                   " \"stream_options\": {\"include_usage\": true}}");
    assert_int_equal(status_of(resp), 200);
    assert_string_equal(sse_text(resp, &nerr, &done, fin, sizeof fin), "aaa");
    assert_int_equal(count_of(resp, "\"content\":\"a\""), 3);
    assert_true(done);
    assert_string_equal(fin, "length");
    const char *first = strstr(resp, "data: ");
    assert_non_null(first);
    const char *role = strstr(first, "\"role\":\"assistant\"");
    assert_non_null(role);
    assert_true(role < strstr(first, "\n\n")); /* in the first event */
    assert_non_null(strstr(resp, "\"completion_tokens\":3"));
    free(resp);
    assert_true(eventually(no_in_flight, x));
    assert_int_equal(fake_get(&x->f, &x->f.aborts), 0);
    stop(x);
}

/* The client closes mid-stream: the engine request is aborted, the request
 * is released (in flight drops to 0) once its final event arrived. */
static void test_client_gone_mid_stream(void **state) {
    (void)state;
    fixture *x = start(MODE_HOLD, 0);
    int fd = send_post(x->port, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 100, \"stream\": true}");
    assert_true(eventually(one_in_flight, x));
    fake_release(&x->f, 2);
    assert_true(read_until(fd, "\"text\":\"a")); /* a token event arrived */
    close(fd);
    assert_true(eventually(one_abort, x));
    assert_true(eventually(one_final, x));
    assert_true(eventually(no_in_flight, x));
    pthread_mutex_lock(&x->f.mu);
    assert_int_equal(x->f.last_finish, NB_FINISH_ABORT);
    assert_true(x->f.reqs[0].sent < 100);
    pthread_mutex_unlock(&x->f.mu);
    stop(x);
}

/* The client closes while a blocking request waits: noticed by the 50 ms
 * peer check, the engine request is aborted and released. */
static void test_client_gone_blocking(void **state) {
    (void)state;
    fixture *x = start(MODE_HOLD, 0);
    int fd = send_post(x->port, "/v1/chat/completions",
                       "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 50}");
    assert_true(eventually(one_in_flight, x));
    close(fd);
    assert_true(eventually(one_abort, x));
    assert_true(eventually(no_in_flight, x));
    stop(x);
}

typedef struct client_arg {
    int port;
    const char *path, *body;
    char *resp;
} client_arg;

static void *client(void *p) {
    client_arg *a = p;
    int fd = send_post(a->port, a->path, a->body);
    a->resp = read_all(fd);
    close(fd);
    return NULL;
}

/* nb_server_abort_all: running requests end with 503 "aborted" (blocking)
 * or an error event and [DONE] (streamed); each is aborted once. */
static void test_abort_all(void **state) {
    (void)state;
    fixture *x = start(MODE_HOLD, 0);
    client_arg a = {x->port, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 50}", NULL};
    client_arg b = {x->port, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 50, \"stream\": true}", NULL};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, client, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, client, &b), 0);
    for (int i = 0; i < 2000 && (nb_server_in_flight(x->srv) < 2 || fake_get(&x->f, &x->f.submits) < 2); i++)
        usleep(10000);
    if (nb_server_in_flight(x->srv) != 2)
        fprintf(stderr, "test_abort_all: in flight %d, submits %d after 20 s\n", nb_server_in_flight(x->srv),
                fake_get(&x->f, &x->f.submits));
    assert_int_equal(nb_server_in_flight(x->srv), 2);
    nb_server_abort_all(x->srv);
    nb_server_abort_all(x->srv); /* a second call aborts nothing twice */
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(fake_get(&x->f, &x->f.aborts), 2);
    assert_int_equal(status_of(a.resp), 503);
    json_t *j = body_json(a.resp);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "aborted");
    json_decref(j);
    int nerr;
    bool done;
    assert_int_equal(status_of(b.resp), 200);
    sse_text(b.resp, &nerr, &done, NULL, 0);
    assert_int_equal(nerr, 1);
    assert_true(done);
    assert_non_null(strstr(b.resp, "\"code\":\"aborted\""));
    free(a.resp);
    free(b.resp);
    assert_true(eventually(no_in_flight, x));
    stop(x);
}

/* An engine error: 500 with the engine's message, or an error event. */
static void test_engine_error(void **state) {
    (void)state;
    fixture *x = start(MODE_ERROR, 0);
    char *resp = post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 5}");
    assert_int_equal(status_of(resp), 500);
    assert_non_null(strstr(resp, "fake engine: the step failed"));
    free(resp);
    assert_stream_failed(post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 5, \"stream\": true}"),
                         "fake engine: the step failed");
    assert_true(eventually(no_in_flight, x));
    stop(x);
}

/* The engine refuses the submit (queue full): 429 with Retry-After, and the
 * request never counted as in flight afterwards. */
static void test_submit_refused(void **state) {
    (void)state;
    fixture *x = start(MODE_REJECT, 0);
    char *resp = post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 5}");
    assert_int_equal(status_of(resp), 429);
    assert_non_null(strstr(resp, "Retry-After: 1"));
    assert_non_null(strstr(resp, "the queue is full"));
    free(resp);
    assert_int_equal(nb_server_in_flight(x->srv), 0);
    assert_int_equal(fake_get(&x->f, &x->f.finals), 0);
    stop(x);
}

/* Output beyond max_response_bytes: a blocking answer is a 500 naming the
 * cap, a stream ends with an error event and [DONE]; never a cut text. */
static void test_output_cap(void **state) {
    (void)state;
    fixture *x = start(MODE_AUTO, 16);
    char *resp = post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 40}");
    assert_int_equal(status_of(resp), 500);
    assert_non_null(strstr(resp, "cap of 16 bytes"));
    assert_null(strstr(resp, "aaaa"));
    free(resp);
    assert_true(eventually(no_in_flight, x));
    /* streamed: even one chunk's JSON is over 16 bytes */
    assert_stream_failed(post(x, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 40, \"stream\": true}"),
                         "could not be sent");
    assert_true(eventually(no_in_flight, x));
    stop(x);
}

/* Shutdown with requests in flight (cmd_serve's order): after
 * begin_shutdown the running stream goes on until abort_all ends it with an
 * error event, and freeing after the engine's final events leaves nothing
 * behind (the ASan and TSan builds check). */
static void test_shutdown_in_flight(void **state) {
    (void)state;
    fixture *x = start(MODE_HOLD, 0);
    int fd = send_post(x->port, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 100, \"stream\": true}");
    assert_true(eventually(one_in_flight, x));
    fake_release(&x->f, 1);
    assert_true(read_until(fd, "\"text\":\"a"));
    nb_server_begin_shutdown(x->srv);
    assert_int_equal(nb_server_in_flight(x->srv), 1);
    fake_release(&x->f, 1); /* still streaming */
    assert_true(read_until(fd, "\"text\":\"a"));
    nb_server_abort_all(x->srv);
    char *rest = read_all(fd);
    close(fd);
    assert_non_null(strstr(rest, "\"code\":\"aborted\""));
    assert_non_null(strstr(rest, "data: [DONE]"));
    free(rest);
    assert_true(eventually(no_in_flight, x));
    assert_int_equal(fake_get(&x->f, &x->f.aborts), 1);
    stop(x);
}

/* Shutdown with a request the engine still holds when the server stops:
 * the engine's final event at its own shutdown releases it. */
static void test_engine_stops_with_request(void **state) {
    (void)state;
    fixture *x = start(MODE_HOLD, 0);
    client_arg a = {x->port, "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 50}", NULL};
    pthread_t ta;
    assert_int_equal(pthread_create(&ta, NULL, client, &a), 0);
    assert_true(eventually(one_in_flight, x));
    nb_server_begin_shutdown(x->srv);
    /* the engine stops first (no abort_all): its final ABORT ends the wait */
    pthread_mutex_lock(&x->f.mu);
    x->f.stop = true;
    pthread_cond_broadcast(&x->f.cv);
    pthread_mutex_unlock(&x->f.mu);
    pthread_join(x->f.thread, NULL);
    pthread_join(ta, NULL);
    assert_int_equal(status_of(a.resp), 503);
    free(a.resp);
    assert_true(eventually(no_in_flight, x));
    nb_server_free(x->srv);
    pthread_mutex_destroy(&x->f.mu);
    pthread_cond_destroy(&x->f.cv);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_blocking),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_client_gone_mid_stream),
        cmocka_unit_test(test_client_gone_blocking),
        cmocka_unit_test(test_abort_all),
        cmocka_unit_test(test_engine_error),
        cmocka_unit_test(test_submit_refused),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_shutdown_in_flight),
        cmocka_unit_test(test_engine_stops_with_request),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
