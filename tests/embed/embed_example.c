/* A program that embeds nibble through include/nibble.h and libnibble.a
 * alone (CMake links it against the combined archive, not the per-subsystem
 * libraries): load a model into an engine, submit a greedy request, collect
 * the streamed text in a sink, wait for the end. Run by ctest on
 * shared/models/aidreams260K.gguf, it checks the text equals llama.cpp's
 * greedy continuation (shared/reference/aidreams260K.json, case S1);
 * without shared/ it runs the built-in default model and checks that 16
 * tokens stream and finish with "length".
 *   usage: embed_example [MODEL [EXPECTED_TEXT]] */
#include <nibble.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[4096];
    size_t len;
    int tokens;
    nb_finish_reason finish;
} collector;

static void sink(void *ud, const nb_token_event *ev) {
    collector *c = ud;
    pthread_mutex_lock(&c->mu);
    if (ev->text_len && c->len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->len, ev->text, ev->text_len);
        c->len += ev->text_len;
    }
    if (ev->token >= 0) c->tokens++;
    if (ev->finish != NB_FINISH_NONE) {
        c->finish = ev->finish;
        pthread_cond_signal(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 && argv[1][0] ? argv[1] : NULL;
    const char *expected = argc > 2 ? argv[2] : NULL;
    nb_engine_config cfg;
    nb_engine_config_defaults(&cfg);
    cfg.max_model_len = 128;
    cfg.kv_cache_bytes = 16u << 20;
    nb_engine *e;
    if (nb_engine_create(model, &cfg, &e) != NB_OK) {
        fprintf(stderr, "embed: %s\n", nb_errmsg());
        return 1;
    }
    const char *prompt = "Once upon a time";
    int32_t *ids;
    size_t n;
    if (nb_tokenize(nb_engine_tokenizer(e), prompt, strlen(prompt), true, false, &ids, &n) != NB_OK) {
        fprintf(stderr, "embed: %s\n", nb_errmsg());
        nb_engine_free(e);
        return 1;
    }
    collector c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, NB_FINISH_NONE};
    nb_request_params rp = {0};
    rp.prompt = ids;
    rp.n_prompt = n;
    nb_sampling_defaults(&rp.sampling);
    rp.sampling.temperature = 0;
    rp.max_tokens = expected ? 48 : 16;
    rp.ignore_eos = true;
    rp.logprobs = -1;
    rp.sink = sink;
    rp.ud = &c;
    uint64_t id;
    nb_status st = nb_engine_submit(e, &rp, &id);
    free(ids);
    if (st != NB_OK) {
        fprintf(stderr, "embed: %s\n", nb_errmsg());
        nb_engine_free(e);
        return 1;
    }
    pthread_mutex_lock(&c.mu);
    while (c.finish == NB_FINISH_NONE) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    nb_engine_free(e);
    printf("%d tokens, finish %s: %.*s\n", c.tokens, nb_finish_reason_str(c.finish), (int)c.len, c.text);
    if (c.finish != NB_FINISH_LENGTH || c.tokens != rp.max_tokens) return 1;
    if (expected && (strlen(expected) != c.len || memcmp(expected, c.text, c.len) != 0)) {
        fprintf(stderr, "embed: text differs from the expected continuation:\n  %s\n", expected);
        return 1;
    }
    printf("1 passed, 0 failed\n");
    return 0;
}
