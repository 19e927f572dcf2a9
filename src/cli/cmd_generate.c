/* nibble generate: stream a continuation of a prompt to stdout. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "engine/sampler.h"
#include "engine/session.h"

#define CMD "generate"
#define PROMPT_FILE_MAX (64u << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble generate [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
            "\n"
            "  -m, --model PATH        GGUF file, HF directory or llama2.c .bin (default: the built-in model)\n"
            "      --tokenizer PATH    tokenizer file (llama2.c tokenizer.bin, tokenizer.json, tokenizer.model)\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file PATH         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128)\n"
            "  -t, --threads N         threads (default: one per core)\n"
            "  -c, --ctx-size N        context size (default: prompt + n, at most the model's)\n"
            "      --temp T            temperature, 0 = greedy (default 0.8)\n"
            "      --top-k K           (default 40; 0 = off)\n"
            "      --top-p P           (default 0.95; 1 = off)\n"
            "      --min-p P           (default 0.05; 0 = off)\n"
            "      --repeat-penalty R  repetition penalty (default 1 = off)\n"
            "      --presence-penalty X, --frequency-penalty X   (default 0)\n"
            "      --seed S            sampling seed (default: random; printed to stderr)\n"
            "      --ignore-eos        keep generating after an end-of-generation token\n"
            "      --no-bos            do not add BOS even if the model asks for it\n"
            "      --echo              print the prompt before the generated text\n"
            "      --ids               print the generated token ids as one JSON array instead of text\n"
            "      --mmap              compute from the file mapping instead of a huge-page copy of the weights\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int nb_cmd_generate(int argc, char **argv) {
    nb_session_params sp = {0};
    const char *prompt = NULL, *prompt_file = NULL;
    int64_t n_predict = 128, v;
    double d;
    bool echo = false, ids_out = false, ignore_eos = false, no_bos = false;
    nb_sampling smp;
    nb_sampling_defaults(&smp);
    smp.temperature = 0.8f; smp.top_k = 40; smp.top_p = 0.95f; smp.min_p = 0.05f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VAL() do { if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE; } while (0)
#define INT(lo, hi) do { VAL(); if (!nb_arg_int(CMD, a, val, lo, hi, &v)) return NB_EXIT_USAGE; } while (0)
#define FLT(lo, hi) do { VAL(); if (!nb_arg_float(CMD, a, val, lo, hi, &d)) return NB_EXIT_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); sp.model_path = val; }
        else if (!strcmp(a, "--tokenizer")) { VAL(); sp.tokenizer_path = val; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); prompt = val; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); prompt_file = val; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { INT(0, 1 << 20); n_predict = v; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { INT(1, 512); sp.n_threads = (int)v; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) { INT(1, 1 << 22); sp.n_ctx = (int32_t)v; }
        else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) { FLT(0, 2); smp.temperature = (float)d; }
        else if (!strcmp(a, "--top-k")) { INT(-1, 1 << 30); smp.top_k = (int32_t)v; }
        else if (!strcmp(a, "--top-p")) { FLT(1e-9, 1); smp.top_p = (float)d; }
        else if (!strcmp(a, "--min-p")) { FLT(0, 1); smp.min_p = (float)d; }
        else if (!strcmp(a, "--repeat-penalty")) { FLT(1e-9, 2); smp.repetition_penalty = (float)d; }
        else if (!strcmp(a, "--presence-penalty")) { FLT(-2, 2); smp.presence_penalty = (float)d; }
        else if (!strcmp(a, "--frequency-penalty")) { FLT(-2, 2); smp.frequency_penalty = (float)d; }
        else if (!strcmp(a, "--seed")) {
            VAL();
            char *end;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || *val == '-') {
                fprintf(stderr, "nibble %s: --seed: '%s' is not an integer in 0..18446744073709551615\n", CMD, val);
                return NB_EXIT_USAGE;
            }
            smp.seed = s;
            smp.has_seed = true;
        }
        else if (!strcmp(a, "--mmap")) sp.use_mmap = true;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--echo")) echo = true;
        else if (!strcmp(a, "--ids")) ids_out = true;
        else {
            fprintf(stderr, "nibble %s: unknown option '%s' (see nibble generate --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        }
#undef VAL
#undef INT
#undef FLT
    }
    if (prompt && prompt_file) {
        fprintf(stderr, "nibble %s: give either -p or -f, not both\n", CMD);
        return NB_EXIT_USAGE;
    }
    char *file_text = NULL;
    if (prompt_file) {
        if (nb_read_file(prompt_file, PROMPT_FILE_MAX, &file_text, NULL) != NB_OK) {
            nb_cli_error(CMD);
            return NB_EXIT_USAGE;
        }
        prompt = file_text;
    }
    if (!prompt) prompt = "";
    if (nb_sampling_validate(&smp) != NB_OK) {
        nb_cli_error(CMD);
        free(file_text);
        return NB_EXIT_USAGE;
    }

    int rc = NB_EXIT_FAIL;
    nb_session *s = NULL;
    nb_sampler *sampler = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *out = NULL;
    nb_status st = nb_session_open(&sp, &s);
    if (st != NB_OK) { nb_cli_error(CMD); rc = nb_cli_exit_code(st); goto done; }
    st = nb_tokenize(s->tok, prompt, strlen(prompt), !no_bos, false, &ids, &n_ids);
    if (st != NB_OK) { nb_cli_error(CMD); rc = nb_cli_exit_code(st); goto done; }
    if (n_ids == 0) {
        int32_t bos = nb_tokenizer_bos(s->tok);
        if (bos < 0) {
            fprintf(stderr, "nibble %s: the prompt is empty and the model has no BOS token to start from\n", CMD);
            rc = NB_EXIT_USAGE;
            goto done;
        }
        ids = realloc(ids, sizeof *ids);
        ids[0] = bos;
        n_ids = 1;
    }
    if (sp.n_ctx <= 0 && (int64_t)n_ids + n_predict > s->n_ctx) {
        /* The default context is too small for this request: reopen with what it needs, capped at the model's. */
        int64_t need = (int64_t)n_ids + n_predict;
        if (need > s->model->hp.n_ctx_train) need = s->model->hp.n_ctx_train;
        if (need > s->n_ctx) {
            nb_session_free(s);
            s = NULL;
            nb_session_params p1 = sp;
            p1.n_ctx = (int32_t)need;
            if ((st = nb_session_open(&p1, &s)) != NB_OK) { nb_cli_error(CMD); rc = nb_cli_exit_code(st); goto done; }
        }
    }
    if ((int64_t)n_ids > s->n_ctx) {
        fprintf(stderr, "nibble %s: the prompt has %zu tokens, more than the context size %d\n", CMD, n_ids, s->n_ctx);
        rc = NB_EXIT_USAGE;
        goto done;
    }
    if ((int64_t)n_ids + n_predict > s->n_ctx) {
        fprintf(stderr, "nibble %s: note: prompt (%zu) + n (%lld) exceeds the context size %d; generation stops "
                "at the context end\n", CMD, n_ids, (long long)n_predict, s->n_ctx);
        n_predict = s->n_ctx - (int64_t)n_ids;
    }
    if ((st = nb_sampler_create(&smp, s->n_vocab, &sampler)) != NB_OK) { nb_cli_error(CMD); goto done; }
    nb_sampler_set_prompt(sampler, ids, n_ids);

    size_t cap = nb_tokenizer_max_piece(s->tok) + NB_DETOK_SLACK;
    out = malloc(cap);
    float *logits = malloc((size_t)s->n_vocab * sizeof(float));
    if (!out || !logits) { free(logits); fprintf(stderr, "nibble %s: out of memory\n", CMD); goto done; }
    if (echo && !ids_out) {
        char *pt;
        size_t pl;
        if (nb_detokenize(s->tok, ids, n_ids, false, &pt, &pl) == NB_OK) {
            fwrite(pt, 1, pl, stdout);
            free(pt);
        }
    }
    nb_detok dt;
    nb_detok_init(&dt, s->tok); /* a continuation keeps its leading space */

    double t0 = now_s();
    st = nb_session_eval(s, ids, (int32_t)n_ids, false, logits);
    double t1 = now_s(), t2 = t1;
    int64_t n_gen = 0;
    if (ids_out) fputc('[', stdout);
    while (st == NB_OK && n_gen < n_predict) {
        int32_t id = nb_sampler_sample(sampler, logits);
        n_gen++;
        bool eog = nb_tokenizer_is_eog(s->tok, id);
        if (ids_out) {
            printf("%s%d", n_gen > 1 ? ", " : "", id);
        } else if (!eog || ignore_eos) {
            size_t k = nb_detok_push(&dt, id, out, cap);
            fwrite(out, 1, k, stdout);
        }
        fflush(stdout);
        if (eog && !ignore_eos) break;
        if (n_gen == n_predict) break;
        st = nb_session_eval(s, &id, 1, false, logits);
    }
    t2 = now_s();
    if (ids_out) fputs("]\n", stdout);
    else {
        size_t k = nb_detok_flush(&dt, out, cap);
        fwrite(out, 1, k, stdout);
        fputc('\n', stdout);
    }
    fflush(stdout);
    free(logits);
    if (st != NB_OK) { nb_cli_error(CMD); goto done; }
    fprintf(stderr, "nibble: model %s, %d threads (%s), seed %llu\n", s->model_path, nb_fwd_threads(s->fwd),
            nb_fwd_isa(s->fwd), (unsigned long long)nb_sampler_seed(sampler));
    fprintf(stderr, "nibble: prompt %zu tokens in %.3f s (%.2f tok/s); generation %lld tokens in %.3f s (%.2f tok/s)\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0 > 0 ? t1 - t0 : 1e-9), (long long)n_gen, t2 - t1,
            n_gen > 1 ? (double)(n_gen - 1) / (t2 - t1 > 0 ? t2 - t1 : 1e-9) : 0.0);
    rc = NB_EXIT_OK;
done:
    nb_sampler_free(sampler);
    nb_session_free(s);
    free(ids);
    free(out);
    free(file_text);
    return rc;
}
