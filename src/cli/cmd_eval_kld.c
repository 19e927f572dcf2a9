/* nibble eval kld: KL divergence of a candidate against its baseline on the
 * same tokens, per token class; the baseline from a model or from a file of
 * --save-base (src/eval/kld.h, docs/eval.md). */
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
#include "eval/kld.h"

#define CMD "eval kld"
#define TEXT_MAX NB_LIMIT_TEXT_FILE_BYTES
/* the engine options kld shares with the other model-loading commands (cli/engine_opts.h);
 * its models are positional (BASE CAND), so -m is not one of them */
#define KLD_EOPTS NB_EOPT_THREADS

static void usage(void) {
    printf("usage: nibble eval kld BASE CAND -f TEXT [-c CTX] [--json] [--class NAME=REGEX ...]\n"
           "       nibble eval kld BASE -f TEXT --save-base FILE [--save-topk K]      (baseline only)\n"
           "       nibble eval kld BASE CAND -f TEXT --save-base FILE                   (both, and save)\n"
           "       nibble eval kld CAND -f TEXT --base-logits FILE [--json]             (reuse a baseline)\n\n"
           "KL(base || cand) per scored position (chunks of CTX tokens, default 512, each from an\n"
           "empty cache with BOS first, second half scored - llama-perplexity's positions): mean,\n"
           "median, p90, p99, max; top-1 agreement ('same top p'); perplexity of each and the ratio;\n"
           "the same per class of the predicted token: digit, punct, space, word, other, and each\n"
           "--class NAME=REGEX (PCRE2 on the token's text; classes may overlap). The summary names\n"
           "the class with the highest mean KLD (among classes of >= %d positions when any).\n\n"
           "  --save-base FILE   store the baseline for later runs: full logits by default (exact);\n"
           "  --save-topk K      store only the top K log-probs + tail mass (smaller; KLD becomes a\n"
           "                     lower bound, top-1 and perplexities stay exact; docs/eval.md)\n"
           "  --base-logits FILE read the baseline from FILE (same text, -c and vocabulary, or refused)\n"
           "  --force            write --save-base FILE even when it is an input or not a regular file\n"
           "  --chunks N         score only the first N chunks\n"
           "  --keep-newline     keep the file's trailing newline\n"
           "Models: GGUF, HF directory, llama2.c .bin; both must have the same vocabulary (exit 2).\n"
           "engine options:\n",
           NB_KLD_WORST_MIN_N);
    nb_engine_opts_usage(stdout, KLD_EOPTS);
}

static void progress(void *ud, int64_t c, int64_t n, const nb_cmp_result *r) {
    if (*(bool *)ud) return;
    fprintf(stderr, "\r[%lld/%lld] KLD %.6f top-1 %.2f%%", (long long)c, (long long)n, r->kld_mean,
            100 * r->same_top);
}

/* JSON has no inf / nan: such values (a candidate giving a token zero
 * probability makes its perplexity infinite) are written as null */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *report_json(const nb_kld_report *r, const char *saved) {
    const nb_cmp_result *a = &r->all;
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer(a->n));
    json_object_set_new(o, "ctx", json_integer(r->n_ctx));
    json_object_set_new(o, "n_chunks", json_integer(r->n_chunks));
    json_object_set_new(o, "n_tokens", json_integer(r->n_tokens));
    json_object_set_new(o, "ppl_base", num(a->ppl_base));
    json_object_set_new(o, "ppl_base_stderr", num(a->ppl_base_err));
    json_object_set_new(o, "base", nb_model_id_json(&r->base));
    if (saved) json_object_set_new(o, "save_base", json_string(saved));
    if (!r->has_cand) return o;
    json_object_set_new(o, "kld_mean", num(a->kld_mean));
    json_object_set_new(o, "kld_stderr", num(a->kld_err));
    json_object_set_new(o, "kld_median", num(a->kld_median));
    json_object_set_new(o, "kld_p90", num(a->kld_p90));
    json_object_set_new(o, "kld_p99", num(a->kld_p99));
    json_object_set_new(o, "kld_max", num(a->kld_max));
    json_object_set_new(o, "top1_agreement", num(a->same_top));
    json_object_set_new(o, "top1_stderr", num(a->same_top_err));
    json_object_set_new(o, "ppl_cand", num(a->ppl_test));
    json_object_set_new(o, "ppl_cand_stderr", num(a->ppl_test_err));
    json_object_set_new(o, "ppl_ratio", num(a->ppl_ratio));
    json_object_set_new(o, "rms_dp", num(a->rms_dp));
    json_object_set_new(o, "base_topk", r->base_topk ? json_integer(r->base_topk) : json_null());
    if (r->base_topk) json_object_set_new(o, "base_tail_mass_mean", num(r->base_tail_mean));
    json_t *cl = json_object();
    for (int c = 0; c < r->n_classes; c++) {
        const nb_kld_class_stat *k = &r->cls[c];
        json_object_set_new(cl, r->cls_names[c], json_pack("{s:I, s:o, s:o}", "n", (json_int_t)k->n, "kld_mean",
                                                           num(k->kld_mean), "top1_agreement", num(k->top1)));
    }
    json_object_set_new(o, "classes", cl);
    json_object_set_new(o, "worst_class", r->worst >= 0 ? json_string(r->cls_names[r->worst]) : json_null());
    json_object_set_new(o, "cand", nb_model_id_json(&r->cand));
    return o;
}

static void report_text(const nb_kld_report *r, const char *saved) {
    const nb_cmp_result *a = &r->all;
    printf("baseline  %s (%s, sha256 %.16s)%s\n", r->base.path, r->base.type, r->base.sha256,
           r->base_topk ? " [from a top-K file]" : "");
    if (r->has_cand) printf("candidate %s (%s, sha256 %.16s)\n", r->cand.path, r->cand.type, r->cand.sha256);
    printf("scored    %lld positions (%lld chunks of %d; %lld tokens in the text)\n", (long long)a->n,
           (long long)r->n_chunks, r->n_ctx, (long long)r->n_tokens);
    if (!r->has_cand) {
        printf("PPL(base) %.4f +/- %.5f\n", a->ppl_base, a->ppl_base_err);
        if (saved) printf("saved     %s\n", saved);
        return;
    }
    printf("PPL       base %.4f +/- %.5f, cand %.4f +/- %.5f, ratio %.5f\n", a->ppl_base, a->ppl_base_err, a->ppl_test,
           a->ppl_test_err, a->ppl_ratio);
    printf("KLD       mean %.6f +/- %.6f, median %.6f, p90 %.6f, p99 %.6f, max %.6f\n", a->kld_mean, a->kld_err,
           a->kld_median, a->kld_p90, a->kld_p99, a->kld_max);
    printf("same top  %.3f%% +/- %.3f%%   RMS dp %.3f%%\n", 100 * a->same_top, 100 * a->same_top_err, 100 * a->rms_dp);
    if (r->base_topk)
        printf("          (top-%d baseline: KLD is a lower bound; mean baseline mass outside the top K %.4f)\n",
               r->base_topk, r->base_tail_mean);
    printf("\n%-16s %8s %12s %8s\n", "class", "n", "KLD mean", "top-1");
    for (int c = 0; c < r->n_classes; c++) {
        const nb_kld_class_stat *k = &r->cls[c];
        printf("%-16s %8lld %12.6f %7.2f%%\n", r->cls_names[c], (long long)k->n, k->kld_mean, 100 * k->top1);
    }
    if (r->worst >= 0)
        printf("\nworst class: %s (mean KLD %.6f, %.2fx the overall mean, top-1 %.2f%%, n %lld)\n",
               r->cls_names[r->worst], r->cls[r->worst].kld_mean,
               a->kld_mean > 0 ? r->cls[r->worst].kld_mean / a->kld_mean : 1.0, 100 * r->cls[r->worst].top1,
               (long long)r->cls[r->worst].n);
    if (saved) printf("saved     %s\n", saved);
}

int nb_cmd_eval_kld(int argc, char **argv) {
    const char *models[2] = {NULL, NULL}, *file = NULL, *save = NULL, *base_file = NULL;
    int n_models = 0;
    int64_t ctx = 0, chunks = 0, topk = 0;
    nb_engine_opts eo;
    nb_engine_opts_init(&eo);
    bool json = false, keep_newline = false, force = false;
    nb_tokclass_set classes;
    if (nb_tokclass_init(&classes) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_FAIL;
    }
    int rc = NB_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int eor = nb_engine_opts_parse(&eo, KLD_EOPTS, CMD, argc, argv, &i);
        if (eor < 0) goto out;
        if (eor > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            rc = NB_EXIT_OK;
            goto out;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = nb_arg_value(CMD, argc, argv, &i))) goto out;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 4, 1 << 20, &ctx)) goto out;
        } else if (!strcmp(a, "--chunks")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 1, INT32_MAX, &chunks)) goto out;
        } else if (!strcmp(a, "--save-topk")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 1, 1 << 24, &topk)) goto out;
        } else if (!strcmp(a, "--save-base")) {
            if (!(save = nb_arg_value(CMD, argc, argv, &i))) goto out;
        } else if (!strcmp(a, "--base-logits")) {
            if (!(base_file = nb_arg_value(CMD, argc, argv, &i))) goto out;
        } else if (!strcmp(a, "--class")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i))) goto out;
            if (nb_tokclass_add(&classes, val) != NB_OK) {
                nb_cli_error(CMD);
                goto out;
            }
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (!strcmp(a, "--keep-newline")) {
            keep_newline = true;
        } else if (a[0] != '-' && n_models < 2) {
            models[n_models++] = a;
        } else {
            fprintf(stderr, "nibble %s: unexpected argument '%s' (see --help)\n", CMD, a);
            goto out;
        }
    }
    if (!file) {
        fprintf(stderr, "nibble %s: -f TEXT_FILE is required\n", CMD);
        goto out;
    }
    if (base_file && save) {
        fprintf(stderr, "nibble %s: --save-base and --base-logits exclude each other\n", CMD);
        goto out;
    }
    if (topk && !save) {
        fprintf(stderr, "nibble %s: --save-topk applies to --save-base only\n", CMD);
        goto out;
    }
    if (base_file ? n_models != 1 : (n_models != 2 && !(n_models == 1 && save))) {
        fprintf(stderr, "nibble %s: %s (got %d model%s; see --help)\n", CMD,
                base_file ? "with --base-logits give only the candidate model"
                          : "give BASE and CAND (or only BASE with --save-base)",
                n_models, n_models == 1 ? "" : "s");
        goto out;
    }
    if (save) {
        const char *ins[] = {models[0], models[1], file};
        if (nb_out_check(save, ins, 3, force, "--save-base") != NB_OK) {
            nb_cli_error(CMD);
            goto out;
        }
    }
    if (base_file && !ctx) {
        nb_kldbase_reader *r;
        if (nb_kldbase_open(base_file, &r) != NB_OK) {
            nb_cli_error(CMD);
            goto out;
        }
        ctx = nb_kldbase_header(r)->ctx;
        nb_kldbase_close(r);
    }
    if (!ctx) ctx = 512;

    char *text;
    size_t len;
    if (nb_read_file(file, TEXT_MAX, &text, &len) != NB_OK) {
        nb_cli_error(CMD);
        goto out;
    }
    if (!keep_newline && len && text[len - 1] == '\n') text[--len] = '\0';

    nb_session *base = NULL, *cand = NULL;
    nb_session_params sp = {.n_threads = eo.ec.n_threads, .n_ctx = (int32_t)ctx, .n_batch = (int32_t)ctx};
    nb_status st = NB_OK;
    if (!base_file) {
        sp.model_path = models[0];
        st = nb_session_open(&sp, &base);
    }
    const char *cand_path = base_file ? models[0] : n_models == 2 ? models[1] : NULL;
    if (st == NB_OK && cand_path) {
        sp.model_path = cand_path;
        st = nb_session_open(&sp, &cand);
    }
    nb_kld_report *r = calloc(1, sizeof *r);
    if (st == NB_OK && !r) st = NB_ERR_NOMEM;
    if (st == NB_OK) {
        nb_kld_opts o = {.n_ctx = (int32_t)ctx, .max_chunks = chunks, .save_base = save, .save_topk = (int32_t)topk,
                         .base_logits = base_file, .classes = &classes};
        st = nb_kld_run(base, cand, text, len, &o, r, progress, &json);
        if (!json) fputc('\n', stderr);
    }
    if (st != NB_OK) {
        nb_cli_error(CMD);
        rc = nb_cli_exit_code(st);
    } else {
        if (json) {
            json_t *o = report_json(r, save);
            json_dumpf(o, stdout, JSON_REAL_PRECISION(10));
            fputc('\n', stdout);
            json_decref(o);
        } else {
            report_text(r, save);
        }
        rc = NB_EXIT_OK;
    }
    free(r);
    nb_session_free(base);
    nb_session_free(cand);
    free(text);
out:
    nb_tokclass_free(&classes);
    return rc;
}
