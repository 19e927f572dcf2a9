/* nibble generate: stream a continuation of a prompt to stdout, through the
 * serving engine (one request; the same code path as `nibble serve`). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "base/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_opts.h"
#include "engine/sampler.h"
#include "engine/budget.h"
#include "engine/engine.h"
#include "formats/source.h"
#include "tokenizer/chat_template.h"

#define CMD "generate"
#define GEN_EOPTS (NB_EOPT_MODEL | NB_EOPT_THREADS | NB_EOPT_MMAP | NB_EOPT_KV_DTYPE)
#define PROMPT_FILE_MAX NB_LIMIT_PROMPT_FILE_BYTES

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble generate [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
            "\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file PATH         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128)\n"
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
            "      --chat              send the prompt as one user message through the model's chat template\n"
            "      --chat-template X   like --chat with this template: a Jinja file or a built-in name\n"
            "                          (chatml, llama2, llama3, mistral, zephyr, gemma, generic)\n"
            "      --echo              print the prompt before the generated text\n"
            "      --ids               print the generated token ids as one JSON array instead of text\n");
    nb_engine_opts_usage(f, GEN_EOPTS);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct gen_out {
    bool ids_out;
    int64_t n_gen;
    double t_first, t_last;
    nb_finish_reason fin;
    char err[512];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} gen_out;

/* Runs on the engine thread: print as tokens arrive. */
static void gen_sink(void *ud, const nb_token_event *ev) {
    gen_out *g = ud;
    double t = now_s();
    if (ev->token >= 0) {
        g->n_gen++;
        if (g->n_gen == 1) g->t_first = t;
        g->t_last = t;
        if (g->ids_out) printf("%s%d", g->n_gen > 1 ? ", " : "", ev->token);
    }
    if (!g->ids_out && ev->text_len) fwrite(ev->text, 1, ev->text_len, stdout);
    fflush(stdout);
    if (ev->finish != NB_FINISH_NONE) {
        pthread_mutex_lock(&g->mu);
        g->fin = ev->finish;
        if (ev->error) snprintf(g->err, sizeof g->err, "%s", ev->error);
        g->done = true;
        pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (f) fclose(f);
    return s;
}

/* The command line, parsed. */
typedef struct gen_args {
    nb_engine_opts eo;
    const char *prompt, *prompt_file;
    const char *chat_template; /* --chat-template; NULL: the model's (with --chat) */
    int32_t n_ctx;             /* -c; 0: prompt + n, at most the model's */
    int64_t n_predict;
    bool echo, ids_out, ignore_eos, no_bos, chat;
    nb_sampling smp;
} gen_args;

/* false: exit with *rc (--help printed, or a bad argument reported). */
static bool parse_args(int argc, char **argv, gen_args *ga, int *rc) {
    memset(ga, 0, sizeof *ga);
    nb_engine_opts_init(&ga->eo);
    ga->n_predict = 128;
    nb_sampling *smp = &ga->smp;
    nb_sampling_defaults(smp);
    smp->temperature = 0.8f; smp->top_k = 40; smp->top_p = 0.95f; smp->min_p = 0.05f;
    int64_t v;
    double d;
    *rc = NB_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VAL() do { if (!(val = nb_arg_value(CMD, argc, argv, &i))) return false; } while (0)
#define INT(lo, hi) do { VAL(); if (!nb_arg_int(CMD, a, val, lo, hi, &v)) return false; } while (0)
#define FLT(lo, hi) do { VAL(); if (!nb_arg_float(CMD, a, val, lo, hi, &d)) return false; } while (0)
        int eor = nb_engine_opts_parse(&ga->eo, GEN_EOPTS, CMD, argc, argv, &i);
        if (eor < 0) return false;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); *rc = NB_EXIT_OK; return false; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); ga->prompt = val; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); ga->prompt_file = val; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { INT(0, 1 << 20); ga->n_predict = v; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) { INT(1, 1 << 22); ga->n_ctx = (int32_t)v; }
        else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) { FLT(0, 2); smp->temperature = (float)d; }
        else if (!strcmp(a, "--top-k")) { INT(-1, 1 << 30); smp->top_k = (int32_t)v; }
        else if (!strcmp(a, "--top-p")) { FLT(1e-9, 1); smp->top_p = (float)d; }
        else if (!strcmp(a, "--min-p")) { FLT(0, 1); smp->min_p = (float)d; }
        else if (!strcmp(a, "--repeat-penalty")) { FLT(1e-9, 2); smp->repetition_penalty = (float)d; }
        else if (!strcmp(a, "--presence-penalty")) { FLT(-2, 2); smp->presence_penalty = (float)d; }
        else if (!strcmp(a, "--frequency-penalty")) { FLT(-2, 2); smp->frequency_penalty = (float)d; }
        else if (!strcmp(a, "--seed")) {
            VAL();
            char *end;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || *val == '-') {
                fprintf(stderr, "nibble %s: --seed: '%s' is not an integer in 0..18446744073709551615\n", CMD, val);
                return false;
            }
            smp->seed = s;
            smp->has_seed = true;
        }
        else if (!strcmp(a, "--ignore-eos")) ga->ignore_eos = true;
        else if (!strcmp(a, "--no-bos")) ga->no_bos = true;
        else if (!strcmp(a, "--chat")) ga->chat = true;
        else if (!strcmp(a, "--chat-template")) { VAL(); ga->chat_template = val; ga->chat = true; }
        else if (!strcmp(a, "--echo")) ga->echo = true;
        else if (!strcmp(a, "--ids")) ga->ids_out = true;
        else {
            fprintf(stderr, "nibble %s: unknown option '%s' (see nibble generate --help)\n", CMD, a);
            return false;
        }
#undef VAL
#undef INT
#undef FLT
    }
    if (ga->prompt && ga->prompt_file) {
        fprintf(stderr, "nibble %s: give either -p or -f, not both\n", CMD);
        return false;
    }
    return true;
}

/* The prompt text: -p, the -f file (into *file_text, the caller frees it)
 * or empty; then the sampling parameters are checked. An exit code. */
static int load_prompt(gen_args *ga, char **file_text) {
    *file_text = NULL;
    if (ga->prompt_file) {
        if (nb_read_file(ga->prompt_file, PROMPT_FILE_MAX, file_text, NULL) != NB_OK) {
            nb_cli_error(CMD);
            return NB_EXIT_USAGE;
        }
        ga->prompt = *file_text;
    }
    if (!ga->prompt) ga->prompt = "";
    if (nb_sampling_validate(&ga->smp) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    return NB_EXIT_OK;
}

/* The context the model computes exactly: its training context, or its
 * sliding window when shorter (hyper-parameters only; the engine loads the
 * weights). <= 0 when the file does not say. */
static nb_status model_context(const char *path, int64_t *model_ctx) {
    nb_source src;
    nb_status st = nb_source_open(path, &src);
    if (st != NB_OK) return st;
    *model_ctx = src.hp.n_ctx_train;
    if (src.hp.sliding_window > 0 && src.hp.sliding_window < *model_ctx) *model_ctx = src.hp.sliding_window;
    nb_source_close(&src);
    return NB_OK;
}

/* --chat: the prompt as one user message through the chat template
 * (--chat-template's, else the model's), rendered into *chat_text and
 * tokenized into *ids. An exit code; errors are reported. */
static int tokenize_chat(const gen_args *ga, nb_tokenizer *tok, char **chat_text, int32_t **ids, size_t *n_ids) {
    nb_chat_template *ct = NULL;
    nb_status st = ga->chat_template ? nb_chat_template_open(ga->chat_template, &ct)
                                     : nb_chat_template_create(nb_tokenizer_chat_template(tok), "the model's", &ct);
    if (st != NB_OK) { nb_cli_error(CMD); return NB_EXIT_USAGE; }
    char bos[128] = "", eos[128] = "";
    int32_t b = nb_tokenizer_bos(tok), e_id = nb_tokenizer_eos(tok);
    if (b >= 0 && !nb_chat_template_is_generic(ct)) bos[NB_MIN(nb_token_piece(tok, b, true, bos, sizeof bos - 1), sizeof bos - 1)] = '\0';
    if (e_id >= 0) eos[NB_MIN(nb_token_piece(tok, e_id, true, eos, sizeof eos - 1), sizeof eos - 1)] = '\0';
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", ga->prompt);
    nb_chat_input in = {.messages = msgs, .add_generation_prompt = true, .bos = bos, .eos = eos, .now = -1};
    st = msgs ? nb_chat_render_json(ct, &in, chat_text) : nb_fail(NB_ERR_INVALID, "the prompt is not valid UTF-8");
    json_decref(msgs);
    bool generic = nb_chat_template_is_generic(ct);
    nb_chat_template_free(ct);
    if (st == NB_OK) st = nb_tokenize(tok, *chat_text, strlen(*chat_text), generic && !ga->no_bos, true, ids, n_ids);
    if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    return NB_EXIT_OK;
}

/* The prompt's token ids (through the chat template with --chat); an
 * empty prompt becomes the BOS token alone. An exit code. */
static int tokenize_prompt(const gen_args *ga, nb_tokenizer *tok, char **chat_text, int32_t **ids, size_t *n_ids) {
    if (ga->chat) {
        int rc = tokenize_chat(ga, tok, chat_text, ids, n_ids);
        if (rc != NB_EXIT_OK) return rc;
    } else {
        nb_status st = nb_tokenize(tok, ga->prompt, strlen(ga->prompt), !ga->no_bos, false, ids, n_ids);
        if (st != NB_OK) { nb_cli_error(CMD); return nb_cli_exit_code(st); }
    }
    if (*n_ids > 0) return NB_EXIT_OK;
    int32_t bos = nb_tokenizer_bos(tok);
    if (bos < 0) {
        fprintf(stderr, "nibble %s: the prompt is empty and the model has no BOS token to start from\n", CMD);
        return NB_EXIT_USAGE;
    }
    int32_t *one = realloc(*ids, sizeof **ids);
    if (!one) return NB_EXIT_FAIL;
    *ids = one;
    (*ids)[0] = bos;
    *n_ids = 1;
    return NB_EXIT_OK;
}

/* The context size (-c, else prompt + n at most the model's) and the tokens
 * to generate, cut to what the context leaves. An exit code. */
static int fit_context(const gen_args *ga, size_t n_ids, int64_t model_ctx, int64_t *n_ctx, int64_t *n_predict) {
    *n_predict = ga->n_predict;
    *n_ctx = ga->n_ctx > 0 ? ga->n_ctx : NB_MIN((int64_t)n_ids + NB_MAX(*n_predict, 1), model_ctx);
    if (model_ctx <= 0 && ga->n_ctx <= 0) *n_ctx = (int64_t)n_ids + NB_MAX(*n_predict, 1);
    if ((int64_t)n_ids > *n_ctx) {
        fprintf(stderr, "nibble %s: the prompt has %zu tokens, more than the context size %lld\n", CMD, n_ids,
                (long long)*n_ctx);
        return NB_EXIT_USAGE;
    }
    if ((int64_t)n_ids + *n_predict > *n_ctx) {
        fprintf(stderr, "nibble %s: note: prompt (%zu) + n (%lld) exceeds the context size %lld; generation stops "
                "at the context end\n", CMD, n_ids, (long long)*n_predict, (long long)*n_ctx);
        *n_predict = *n_ctx - (int64_t)n_ids;
    }
    return NB_EXIT_OK;
}

/* One request through the engine: the prompt's ids, n_predict tokens,
 * streamed to stdout by gen_sink; returns once the request finished (at
 * once when n_predict is 0). g->t_first / t_last are the times of the
 * first and last token, *t0 the submit time. */
static nb_status run_request(nb_engine *e, const gen_args *ga, const int32_t *ids, size_t n_ids, int64_t n_predict,
                             gen_out *g, double *t0) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (ga->ids_out) fputc('[', stdout);
    *t0 = now_s();
    g->t_first = g->t_last = *t0;
    nb_status st = NB_OK;
    if (n_predict > 0) {
        nb_request_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = ids;
        rp.n_prompt = n_ids;
        rp.sampling = ga->smp;
        rp.max_tokens = (int32_t)n_predict;
        rp.ignore_eos = ga->ignore_eos;
        rp.logprobs = -1;
        rp.sink = gen_sink;
        rp.ud = g;
        uint64_t id;
        st = nb_engine_submit(e, &rp, &id);
        if (st == NB_OK) {
            pthread_mutex_lock(&g->mu);
            while (!g->done) pthread_cond_wait(&g->cv, &g->mu);
            pthread_mutex_unlock(&g->mu);
        }
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    return st;
}

/* The model, threads, kernels and seed, and the prompt and generation speeds, on stderr. */
static void report_speed(const char *path, nb_engine *e, const gen_args *ga, size_t n_ids, const gen_out *g,
                         double t0) {
    double t1 = g->t_first, t2 = g->t_last;
    fprintf(stderr, "nibble: model %s, %d threads (%s, attention %s), seed %llu\n", path, nb_engine_threads(e),
            nb_engine_isa(e), nb_engine_attn_isa(e), (unsigned long long)ga->smp.seed);
    fprintf(stderr, "nibble: prompt %zu tokens in %.3f s (%.2f tok/s); generation %lld tokens in %.3f s (%.2f tok/s)\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0 > 0 ? t1 - t0 : 1e-9), (long long)g->n_gen, t2 - t1,
            g->n_gen > 1 ? (double)(g->n_gen - 1) / (t2 - t1 > 0 ? t2 - t1 : 1e-9) : 0.0);
}

int nb_cmd_generate(int argc, char **argv) {
    gen_args ga;
    int rc;
    if (!parse_args(argc, argv, &ga, &rc)) return rc;
    char *file_text = NULL, *chat_text = NULL;
    nb_engine *e = NULL;
    nb_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int64_t model_ctx = 0, n_ctx, n_predict;
    char path[4096];
    nb_status st;
    if ((rc = load_prompt(&ga, &file_text)) != NB_EXIT_OK) goto done;
    if ((st = nb_engine_opts_model_path(ga.eo.model, path, sizeof path)) != NB_OK ||
        (st = model_context(path, &model_ctx)) != NB_OK ||
        (st = nb_tokenizer_load(path, ga.eo.ec.tokenizer_path, &tok)) != NB_OK) {
        nb_cli_error(CMD);
        rc = nb_cli_exit_code(st);
        goto done;
    }
    if ((rc = tokenize_prompt(&ga, tok, &chat_text, &ids, &n_ids)) != NB_EXIT_OK) goto done;
    if ((rc = fit_context(&ga, n_ids, model_ctx, &n_ctx, &n_predict)) != NB_EXIT_OK) goto done;
    if (!ga.smp.has_seed) {
        ga.smp.seed = random_seed();
        ga.smp.has_seed = true;
    }
    nb_engine_config ec = ga.eo.ec; /* one sequence of exactly the context it needs */
    ec.max_model_len = (int32_t)n_ctx;
    ec.max_num_seqs = 1;
    ec.max_num_batched_tokens = 512;
    ec.enable_prefix_caching = false;
    if ((st = nb_engine_create(path, &ec, &e)) != NB_OK) { nb_cli_error(CMD); rc = nb_cli_exit_code(st); goto done; }
    if (ga.echo && !ga.ids_out) {
        char *pt;
        size_t pl;
        if (nb_detokenize(tok, ids, n_ids, false, &pt, &pl) == NB_OK) {
            fwrite(pt, 1, pl, stdout);
            free(pt);
        }
    }
    gen_out g = {.ids_out = ga.ids_out};
    double t0;
    if ((st = run_request(e, &ga, ids, n_ids, n_predict, &g, &t0)) != NB_OK) {
        nb_cli_error(CMD);
        rc = nb_cli_exit_code(st);
        goto done;
    }
    if (ga.ids_out) fputs("]\n", stdout);
    else fputc('\n', stdout);
    fflush(stdout);
    if (g.fin == NB_FINISH_ERROR || g.fin == NB_FINISH_ABORT) {
        fprintf(stderr, "nibble %s: %s\n", CMD, g.err[0] ? g.err : "generation aborted");
        rc = NB_EXIT_FAIL;
        goto done;
    }
    report_speed(path, e, &ga, n_ids, &g, t0);
    rc = NB_EXIT_OK;
done:
    nb_engine_free(e);
    nb_tokenizer_free(tok);
    free(ids);
    free(file_text);
    free(chat_text);
    return rc;
}
