/* nibble eval ppl (alias: nibble perplexity): perplexity of a model over a
 * text, chunked the way llama-perplexity does it, or with a sliding window
 * (--stride); procedures in src/eval/ppl.h, documented in docs/eval.md. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/budget.h"
#include "eval/model_id.h"
#include "eval/ppl.h"

#define TEXT_MAX NB_LIMIT_TEXT_FILE_BYTES
/* the engine options ppl shares with the other model-loading commands (cli/engine_opts.h) */
#define PPL_EOPTS (NB_EOPT_MODEL | NB_EOPT_THREADS | NB_EOPT_KV_DTYPE)

static void progress(void *ud, const nb_ppl *r) {
    if (*(bool *)ud) return;
    fprintf(stderr, "[%lld]%.4f ", (long long)r->n_chunks, r->ppl);
}

/* JSON has no inf / nan (a model giving a token zero probability): null */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static void usage(const char *cmd) {
    printf("usage: nibble %s [-m] MODEL -f TEXT_FILE [-c CTX] [--stride S] [--json]\n"
           "       [-t N] [--tokenizer F] [--kv-cache-dtype T] [--keep-newline]\n\n"
           "Chunked (default): chunks of CTX tokens (default 512), each from an empty cache\n"
           "  with BOS first, only the second half scored - llama-perplexity's procedure.\n"
           "--stride S: sliding window of CTX tokens moved by S (1 <= S <= CTX); each window\n"
           "  scores only the tokens no earlier window scored, so every token after the first\n"
           "  is scored once with at least CTX-S tokens of context (docs/eval.md).\n"
           "One trailing newline of the file is removed (as llama-perplexity does) unless\n"
           "--keep-newline. --kv-cache-dtype auto|f32|f16|bf16|fp8|int8 measures what a\n"
           "quantized KV cache costs. --json prints ppl, ppl_stderr, mean_nll, n_scored,\n"
           "n_tokens, ctx, stride (null when chunked), mode, model {path, sha256, type}.\n\n"
           "MODEL (GGUF file, HF directory, llama2.c .bin; also -m/--model) is required;\n"
           "--tokenizer PATH names a tokenizer file the model does not point to.\n"
           "engine options:\n",
           cmd);
    nb_engine_opts_usage(stdout, PPL_EOPTS & ~NB_EOPT_MODEL); /* its -m line names a default ppl does not have */
}

int nb_cmd_eval_ppl(int argc, char **argv) {
    /* one implementation for both names: argv[0] is "ppl" or "perplexity" */
    const char *cmd = argc > 0 && !strcmp(argv[0], "perplexity") ? "perplexity" : "eval ppl";
    nb_engine_opts eo;
    nb_engine_opts_init(&eo);
    const char *file = NULL;
    int64_t ctx = 512, stride = 0;
    bool json = false, keep_newline = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int eor = nb_engine_opts_parse(&eo, PPL_EOPTS, cmd, argc, argv, &i);
        if (eor < 0) return NB_EXIT_USAGE;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(cmd);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = nb_arg_value(cmd, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(val = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_int(cmd, a, val, 4, 1 << 20, &ctx))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--stride")) {
            if (!(val = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_int(cmd, a, val, 1, 1 << 20, &stride))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--keep-newline")) {
            keep_newline = true;
        } else if (a[0] != '-' && !eo.model) {
            eo.model = a;
        } else {
            fprintf(stderr, "nibble %s: unexpected argument '%s' (see --help)\n", cmd, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "nibble %s: -f TEXT_FILE is required\n", cmd);
        return NB_EXIT_USAGE;
    }
    if (stride > ctx) {
        fprintf(stderr, "nibble %s: --stride %lld exceeds the window -c %lld (allowed 1..%lld; a larger stride would "
                "leave tokens unscored)\n", cmd, (long long)stride, (long long)ctx, (long long)ctx);
        return NB_EXIT_USAGE;
    }
    char *text;
    size_t len;
    if (nb_read_file(file, TEXT_MAX, &text, &len) != NB_OK) {
        nb_cli_error(cmd);
        return NB_EXIT_USAGE;
    }
    if (!keep_newline && len && text[len - 1] == '\n') text[--len] = '\0';
    /* MODEL is required: unlike generate, ppl has no built-in default (the session refuses none) */
    nb_session_params sp = {.model_path = eo.model, .tokenizer_path = eo.ec.tokenizer_path,
                            .n_threads = eo.ec.n_threads, .kv_dtype = eo.ec.kv_cache_dtype,
                            .n_ctx = (int32_t)ctx, .n_batch = (int32_t)ctx};
    nb_session *s;
    nb_status st = nb_session_open(&sp, &s);
    if (st != NB_OK) {
        nb_cli_error(cmd);
        free(text);
        return nb_cli_exit_code(st);
    }
    nb_model_id id;
    st = nb_model_id_of(s, &id);
    nb_ppl r;
    if (st == NB_OK)
        st = stride ? nb_perplexity_sliding(s, text, len, (int32_t)ctx, (int32_t)stride, &r, progress, &json)
                    : nb_perplexity(s, text, len, (int32_t)ctx, &r, progress, &json);
    if (!json) fputc('\n', stderr);
    if (st != NB_OK) {
        nb_cli_error(cmd);
    } else if (json) {
        json_t *o = json_pack("{s:o, s:o, s:o, s:I, s:I, s:I, s:o, s:s, s:I, s:o}", "ppl", num(r.ppl), "ppl_stderr",
                              num(r.uncertainty), "mean_nll", num(r.mean_nll), "n_scored", (json_int_t)r.n_scored, "n_tokens",
                              (json_int_t)r.n_tokens, "ctx", (json_int_t)ctx, "stride",
                              stride ? json_integer(stride) : json_null(), "mode", stride ? "sliding" : "chunked",
                              "n_chunks", (json_int_t)r.n_chunks, "model", nb_model_id_json(&id));
        json_dumpf(o, stdout, JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        json_decref(o);
    } else if (stride) {
        printf("Final estimate: PPL = %.4f +/- %.5f (sliding window of %lld, stride %lld: %lld windows, %lld "
               "predictions scored)\n", r.ppl, r.uncertainty, (long long)ctx, (long long)stride,
               (long long)r.n_chunks, (long long)r.n_scored);
    } else {
        printf("Final estimate: PPL = %.4f +/- %.5f (%lld chunks of %lld tokens, %lld predictions scored)\n", r.ppl,
               r.uncertainty, (long long)r.n_chunks, (long long)ctx, (long long)r.n_scored);
    }
    nb_session_free(s);
    free(text);
    return st == NB_OK ? NB_EXIT_OK : nb_cli_exit_code(st);
}
