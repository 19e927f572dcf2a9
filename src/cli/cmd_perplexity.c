/* nibble perplexity: llama-perplexity-compatible chunked perplexity. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/budget.h"
#include "eval/ppl.h"

#define CMD "perplexity"
#define PPL_EOPTS (NB_EOPT_MODEL | NB_EOPT_THREADS | NB_EOPT_KV_DTYPE)
#define TEXT_MAX (256u << 20)

static void progress(void *ud, const nb_ppl *r) {
    if (*(bool *)ud) return;
    fprintf(stderr, "[%lld]%.4f ", (long long)r->n_chunks, r->ppl);
}

int nb_cmd_perplexity(int argc, char **argv) {
    nb_session_params sp = {0};
    nb_engine_opts eo;
    nb_engine_opts_init(&eo);
    const char *file = NULL;
    int64_t ctx = 512;
    bool json = false, keep_newline = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int eor = nb_engine_opts_parse(&eo, PPL_EOPTS, CMD, argc, argv, &i);
        if (eor < 0) return NB_EXIT_USAGE;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: nibble perplexity [-m MODEL] -f TEXT_FILE [-c CTX] [-t N] [--kv-cache-dtype T] [--json]\n"
                   "       [--keep-newline]\n"
                   "  --kv-cache-dtype measures what a quantized KV cache costs.\n"
                   "  Chunks of CTX tokens (default 512), each from an empty cache, second half scored -\n"
                   "  llama-perplexity's procedure; one trailing newline of the file is removed as it does.\n");
            nb_engine_opts_usage(stdout, PPL_EOPTS);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 4, 1 << 20, &ctx))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--keep-newline")) {
            keep_newline = true;
        } else {
            fprintf(stderr, "nibble %s: unknown option '%s' (see --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "nibble %s: -f TEXT_FILE is required\n", CMD);
        return NB_EXIT_USAGE;
    }
    char *text;
    size_t len;
    if (nb_read_file(file, TEXT_MAX, &text, &len) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (!keep_newline && len && text[len - 1] == '\n') text[--len] = '\0';
    sp.n_ctx = (int32_t)ctx;
    sp.n_batch = (int32_t)ctx;
    char model[4096];
    nb_session *s = NULL;
    nb_status st = nb_engine_opts_model_path(eo.model, model, sizeof model);
    sp.model_path = model;
    sp.tokenizer_path = eo.ec.tokenizer_path;
    sp.n_threads = eo.ec.n_threads;
    sp.kv_dtype = eo.ec.kv_cache_dtype;
    if (st == NB_OK) st = nb_session_open(&sp, &s);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        free(text);
        return nb_cli_exit_code(st);
    }
    nb_ppl r;
    st = nb_perplexity(s, text, len, (int32_t)ctx, &r, progress, &json);
    if (!json) fputc('\n', stderr);
    if (st != NB_OK) {
        nb_cli_error(CMD);
    } else if (json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "model", s->model_path, "n_ctx",
                              (json_int_t)ctx, "n_tokens", (json_int_t)r.n_tokens, "n_chunks", (json_int_t)r.n_chunks,
                              "n_scored", (json_int_t)r.n_scored, "ppl", r.ppl, "ppl_uncertainty", r.uncertainty,
                              "mean_nll", r.mean_nll);
        json_dumpf(o, stdout, JSON_REAL_PRECISION(8));
        fputc('\n', stdout);
        json_decref(o);
    } else {
        printf("Final estimate: PPL = %.4f +/- %.5f (%lld chunks of %lld tokens, %lld predictions scored)\n", r.ppl,
               r.uncertainty, (long long)r.n_chunks, (long long)ctx, (long long)r.n_scored);
    }
    nb_session_free(s);
    free(text);
    return st == NB_OK ? NB_EXIT_OK : nb_cli_exit_code(st);
}
