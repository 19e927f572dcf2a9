/* A program that embeds nibble through include/nibble.h and libnibble.a
 * alone (compiled with only -I include; CMake links it against the combined
 * archive, and tests/integration/install_pkgconfig.sh builds it again against
 * an installed copy with `pkg-config --cflags --libs nibble`): describe a
 * model, load it into an engine, tokenize a prompt, run a greedy request
 * and read its events, check the stats. On shared/models/aidreams260K.gguf
 * it checks the text equals llama.cpp's greedy continuation
 * (shared/reference/aidreams260K.json, case S1); on any other model that 16
 * tokens stream and the request finishes with "length".
 *   usage: embed_example MODEL [EXPECTED_TEXT] */
#include <nibble.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "embed: %s: %s\n", what, nb_errmsg());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: embed_example MODEL [EXPECTED_TEXT]\n");
        return 2;
    }
    const char *model = argv[1];
    const char *expected = argc > 2 ? argv[2] : NULL;
    if (strcmp(nb_version(), NIBBLE_VERSION) != 0) {
        fprintf(stderr, "embed: library %s, header %s\n", nb_version(), NIBBLE_VERSION);
        return 1;
    }

    /* the library requires a model: no built-in default behind NULL */
    nb_engine *e = NULL;
    if (nb_engine_load(NULL, NULL, &e) == NB_OK || e || !strstr(nb_errmsg(), "model path")) {
        fprintf(stderr, "embed: nb_engine_load(NULL) did not refuse\n");
        return 1;
    }

    nb_model_info *mi;
    if (nb_model_info_load(model, &mi) != NB_OK) return fail("model info");
    printf("model: %s (%s), %d layers, %d vocab, %llu params\n", nb_model_info_arch(mi), nb_model_info_format(mi),
           nb_model_info_n_layer(mi), nb_model_info_n_vocab(mi), (unsigned long long)nb_model_info_n_params(mi));
    int32_t n_vocab = nb_model_info_n_vocab(mi);
    uint64_t n_params = nb_model_info_n_params(mi);
    nb_model_info_free(mi);

    nb_engine_options eo = nb_engine_options_default();
    eo.max_model_len = 128;
    eo.kv_cache_bytes = 16u << 20;
    eo.max_prefill_tokens = 2; /* the prompt is prefilled 2 tokens a step; the text must not change */
    if (nb_engine_load(model, &eo, &e) != NB_OK) return fail("load");
    nb_stats es;
    nb_engine_read_stats(e, &es);
    if (es.max_num_batched_tokens != es.max_num_seqs + 2) {
        fprintf(stderr, "embed: max_prefill_tokens 2 gave a step budget of %d, not max_num_seqs (%d) + 2\n",
                es.max_num_batched_tokens, es.max_num_seqs);
        return 1;
    }
    if (nb_engine_model_info(e, &mi) != NB_OK) return fail("engine model info");
    int bad_info = nb_model_info_n_vocab(mi) != n_vocab || nb_model_info_n_params(mi) != n_params;
    nb_model_info_free(mi);
    if (bad_info) {
        fprintf(stderr, "embed: the engine's model description differs from the file's\n");
        return 1;
    }

    const nb_tokenizer *tok = nb_engine_get_tokenizer(e);
    const char *prompt = "Once upon a time";
    int32_t *ids;
    size_t n;
    if (nb_tokenizer_encode(tok, prompt, strlen(prompt), true, false, &ids, &n) != NB_OK) return fail("encode");
    char *back;
    size_t back_len;
    if (nb_tokenizer_decode(tok, ids, n, false, &back, &back_len) != NB_OK) return fail("decode");
    int round_trip = back_len == strlen(prompt) && !memcmp(back, prompt, back_len);
    nb_free(back);

    nb_request_options ro = nb_request_options_default();
    ro.temperature = 0;
    ro.max_tokens = expected ? 48 : 16;
    ro.ignore_eos = true;
    nb_request *r;
    nb_status st = nb_request_submit(e, ids, n, &ro, &r);
    nb_free(ids);
    if (st != NB_OK) return fail("submit");
    char text[4096];
    size_t len = 0;
    int tokens = 0;
    nb_finish_reason finish = NB_FINISH_NONE;
    nb_event ev;
    while (nb_request_next(r, &ev)) {
        if (ev.text_len && len + ev.text_len < sizeof text) {
            memcpy(text + len, ev.text, ev.text_len);
            len += ev.text_len;
        }
        if (ev.token >= 0) tokens++;
        finish = ev.finish;
    }
    nb_request_free(r);

    /* logit_bias: +100 on one token makes it every generated token */
    if (nb_tokenizer_encode(tok, prompt, strlen(prompt), true, false, &ids, &n) != NB_OK) return fail("encode");
    const int32_t forced_id = 5;
    const float forced_bias = 100.0f;
    ro.max_tokens = 4;
    ro.logit_bias_ids = &forced_id;
    ro.logit_bias = &forced_bias;
    ro.n_logit_bias = 1;
    st = nb_request_submit(e, ids, n, &ro, &r);
    nb_free(ids);
    if (st != NB_OK) return fail("submit with logit_bias");
    int forced = 0;
    while (nb_request_next(r, &ev)) forced += ev.token == forced_id;
    nb_request_free(r);
    ro.max_tokens = expected ? 48 : 16; /* the first request's, for the checks below */
    nb_stats s;
    nb_engine_read_stats(e, &s);
    nb_engine_free(e);

    printf("%d tokens, finish %s: %.*s\n", tokens, nb_finish_reason_str(finish), (int)len, text);
    int failed = 0;
    if (finish != NB_FINISH_LENGTH || tokens != ro.max_tokens) {
        fprintf(stderr, "embed: expected %d tokens and finish 'length'\n", ro.max_tokens);
        failed++;
    }
    /* (counters are published after each engine step, so they may lag the
     * last event; the configuration is fixed) */
    if (s.max_model_len != 128 || s.kv_blocks_total <= 0 || s.kv_bytes_per_token == 0 || s.running < 0) {
        fprintf(stderr, "embed: stats: max_model_len %d, %lld KV blocks\n", s.max_model_len,
                (long long)s.kv_blocks_total);
        failed++;
    }
    if (expected && (strlen(expected) != len || memcmp(expected, text, len) != 0)) {
        fprintf(stderr, "embed: text differs from the expected continuation:\n  %s\n", expected);
        failed++;
    }
    if (forced != 4) {
        fprintf(stderr, "embed: logit_bias +100 on token %d: %d of 4 tokens were it\n", forced_id, forced);
        failed++;
    }
    if (expected && !round_trip) {
        fprintf(stderr, "embed: the prompt does not decode back to itself\n");
        failed++;
    }
    printf("%d passed, %d failed\n", 5 - failed, failed);
    return failed ? 1 : 0;
}
