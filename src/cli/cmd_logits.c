/* nibble logits: teacher-forced top-K logits at every position, one JSON
 * line per position in the shape of shared/reference's `positions`:
 *   {"pos": i, "token": id, "top10": [[id, logit], ...], "logsumexp": x}
 * (the key is "top<K>"), so output diffs directly against llama.cpp's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/budget.h"
#include "engine/sampler.h"
#include "engine/session.h"

#define CMD "logits"
#define LOGITS_EOPTS (NB_EOPT_MODEL | NB_EOPT_THREADS | NB_EOPT_KV_DTYPE)

static bool parse_ids(const char *s, int32_t **ids, size_t *n) {
    json_error_t err;
    json_t *a = json_loads(s, 0, &err);
    if (!a || !json_is_array(a) || json_array_size(a) == 0) {
        fprintf(stderr, "nibble %s: --ids: expected a non-empty JSON array of token ids, e.g. [1, 15043]%s%s\n", CMD,
                a ? "" : ": ", a ? "" : err.text);
        json_decref(a);
        return false;
    }
    *n = json_array_size(a);
    *ids = malloc(*n * sizeof **ids);
    for (size_t i = 0; i < *n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            fprintf(stderr, "nibble %s: --ids: element %zu is not a non-negative integer token id\n", CMD, i);
            free(*ids);
            json_decref(a);
            return false;
        }
        (*ids)[i] = (int32_t)json_integer_value(v);
    }
    json_decref(a);
    return true;
}

int nb_cmd_logits(int argc, char **argv) {
    nb_session_params sp = {0};
    nb_engine_opts eo;
    nb_engine_opts_init(&eo);
    const char *prompt = NULL, *ids_json = NULL;
    int64_t top = 10;
    bool no_bos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int eor = nb_engine_opts_parse(&eo, LOGITS_EOPTS, CMD, argc, argv, &i);
        if (eor < 0) return NB_EXIT_USAGE;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: nibble logits [-m MODEL] (--ids JSON | -p TEXT) [--top K] [-t N] [--no-bos] [--kv-cache-dtype T]\n"
                   "  One JSON line per position: the top-K next-token logits after consuming tokens 0..pos,\n"
                   "  and the log-sum-exp over the vocabulary (log p(id) = logit - logsumexp).\n");
            nb_engine_opts_usage(stdout, LOGITS_EOPTS);
            return NB_EXIT_OK;
        }
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "--ids") || !strcmp(a, "--top")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
            if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = val;
            else if (!strcmp(a, "--ids")) ids_json = val;
            else if (!nb_arg_int(CMD, a, val, 1, 1000, &top)) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else {
            fprintf(stderr, "nibble %s: unknown option '%s' (see --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!!prompt == !!ids_json) {
        fprintf(stderr, "nibble %s: give exactly one of --ids JSON or -p TEXT\n", CMD);
        return NB_EXIT_USAGE;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (ids_json && !parse_ids(ids_json, &ids, &n)) return NB_EXIT_USAGE;
    nb_session *s = NULL;
    int rc = NB_EXIT_FAIL;
    char model[4096];
    nb_status st = nb_engine_opts_model_path(eo.model, model, sizeof model);
    if (st != NB_OK) goto err;
    sp.model_path = model;
    sp.tokenizer_path = eo.ec.tokenizer_path;
    sp.n_threads = eo.ec.n_threads;
    sp.kv_dtype = eo.ec.kv_cache_dtype;
    if (prompt) {
        /* Tokenize with the model's tokenizer first to size the context. */
        nb_tokenizer *tok;
        if ((st = nb_tokenizer_load(sp.model_path, sp.tokenizer_path, &tok)) != NB_OK) goto err;
        st = nb_tokenize(tok, prompt, strlen(prompt), !no_bos, false, &ids, &n);
        nb_tokenizer_free(tok);
        if (st != NB_OK) goto err;
        if (n == 0) {
            fprintf(stderr, "nibble %s: the prompt produced no tokens\n", CMD);
            return NB_EXIT_USAGE;
        }
    }
    sp.n_ctx = (int32_t)n;
    if ((st = nb_session_open(&sp, &s)) != NB_OK) goto err;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= s->n_vocab) {
            fprintf(stderr, "nibble %s: token id %d (position %zu) outside the vocabulary 0..%d\n", CMD, ids[i], i,
                    s->n_vocab - 1);
            rc = NB_EXIT_USAGE;
            goto done;
        }
    float *lg = malloc(n * (size_t)s->n_vocab * sizeof(float));
    int32_t *tid = malloc((size_t)top * sizeof *tid);
    float *tv = malloc((size_t)top * sizeof *tv);
    if (!lg || !tid || !tv) { free(lg); free(tid); free(tv); fprintf(stderr, "nibble %s: out of memory\n", CMD); goto done; }
    st = nb_session_eval(s, ids, (int32_t)n, true, lg);
    if (st == NB_OK) {
        char key[16];
        snprintf(key, sizeof key, "top%d", (int)top);
        int32_t k = (int32_t)NB_MIN(top, s->n_vocab);
        for (size_t i = 0; i < n; i++) {
            const float *l = lg + i * (size_t)s->n_vocab;
            nb_top_k(l, s->n_vocab, k, tid, tv);
            json_t *arr = json_array();
            for (int32_t j = 0; j < k; j++) json_array_append_new(arr, json_pack("[i, f]", tid[j], (double)tv[j]));
            json_t *o = json_pack("{s:I, s:i, s:o, s:f}", "pos", (json_int_t)i, "token", ids[i], key, arr, "logsumexp",
                                  nb_logsumexp(l, s->n_vocab));
            json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(7) | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
            json_decref(o);
        }
        rc = NB_EXIT_OK;
    }
    free(lg); free(tid); free(tv);
    if (st != NB_OK) goto err;
    goto done;
err:
    nb_cli_error(CMD);
    rc = nb_cli_exit_code(st);
done:
    nb_session_free(s);
    free(ids);
    return rc;
}
