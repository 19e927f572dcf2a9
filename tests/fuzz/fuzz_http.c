/* libFuzzer target for the HTTP layer as a client reaches it: the input is
 * sent as raw bytes (request line, headers, chunked or fixed bodies, several
 * pipelined requests) over a loopback socket to the real server — the
 * libmicrohttpd wrapper (server/http.c), routing, auth, CORS, the OpenAI
 * parser and the response writers of server/server.c — backed by a fake
 * engine that answers every request at once with three tokens (with
 * logprobs when asked). The client half-closes after sending and reads
 * until the server closes or 2 s pass, then waits until the server has
 * closed its side. A crash, sanitizer report or leak in the server shows up
 * in this process. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/server.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static nb_server *srv;
static nb_tokenizer *tok;
static uint64_t next_id;

static nb_status fake_submit(void *ctx, const nb_request_params *p, uint64_t *id) {
    (void)ctx;
    *id = ++next_id;
    static const char *pieces[] = {"a", "b", "\xc3\xa9"};
    for (int i = 0; i < 3; i++) {
        nb_token_event ev = {.request_id = *id, .token = 3 + 'a' + i, .text = pieces[i],
                             .text_len = strlen(pieces[i]), .logprob = -0.5f,
                             .n_top = p->logprobs > 0 ? p->logprobs : 0, .n_prompt_tokens = (int32_t)p->n_prompt,
                             .n_generated = i + 1};
        for (int k = 0; k < ev.n_top && k < NB_LIMIT_TOP_LOGPROBS; k++) {
            ev.top_ids[k] = 3 + k;
            ev.top_logprobs[k] = -1.0f - (float)k;
        }
        if (i == 2 || i + 1 >= p->max_tokens) ev.finish = NB_FINISH_LENGTH;
        p->sink(p->ud, &ev);
        if (ev.finish) break;
    }
    return NB_OK;
}
static void fake_abort(void *ctx, uint64_t id) { (void)ctx; (void)id; }
static void fake_stats(void *ctx, struct nb_engine_stats *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
    out->max_model_len = 64;
}

/* An SPM vocab: <unk>, <s>, </s>, the 256 byte tokens, then the letters. */
static void setup(void) {
    signal(SIGPIPE, SIG_IGN);
    nb_vocab *v = NULL;
    if (nb_vocab_create(NB_VOCAB_SPM, &v) != NB_OK) abort();
    int ok = nb_vocab_add_token(v, "<unk>", 5, 0, NB_TOKEN_UNKNOWN) == NB_OK &&
             nb_vocab_add_token(v, "<s>", 3, 0, NB_TOKEN_CONTROL) == NB_OK &&
             nb_vocab_add_token(v, "</s>", 4, 0, NB_TOKEN_CONTROL) == NB_OK;
    for (int b = 0; b < 256 && ok; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        ok = nb_vocab_add_token(v, t, 6, 0, NB_TOKEN_BYTE) == NB_OK;
    }
    for (char c = 'a'; c <= 'z' && ok; c++) ok = nb_vocab_add_token(v, &c, 1, -1, NB_TOKEN_NORMAL) == NB_OK;
    if (!ok || nb_vocab_finish(v) != NB_OK || nb_tokenizer_create(v, &tok) != NB_OK) abort();
    nb_server_config c = {.host = "127.0.0.1", .port = 0, .served_model_name = "fuzz", .api_key = "k",
                          .max_request_bytes = 64 * 1024, .max_connections = 64, .allowed_origins = "http://a.test",
                          .request_timeout_s = 2};
    if (nb_server_create(&c, &srv) != NB_OK) abort();
    nb_server_backend be = {.submit = fake_submit, .abort = fake_abort, .stats = fake_stats, .tok = tok,
                            .max_model_len = 64};
    nb_server_set_ready(srv, &be);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv) setup();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)nb_server_port(srv)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        size_t off = 0;
        while (off < size) {
            ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        shutdown(fd, SHUT_WR);
        char buf[4096];
        while (recv(fd, buf, sizeof buf, 0) > 0) {}
    }
    close(fd);
    /* Let the server's connection thread finish before the next input, so
     * that LeakSanitizer's per-input check never sees a response that is
     * still being torn down (up to 2 s). */
    for (int i = 0; i < 2000 && nb_server_open_connections(srv) > 0; i++) usleep(1000);
    return 0;
}
