/* nibble quantize IN OUT --type TYPE: round-to-nearest quantization of any
 * model source to GGUF (src/quant/rtn.h), a per-tensor report, and an
 * optional quality check of the result against the original on a text
 * (src/eval/compare.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/compare.h"
#include "cli/quantize_calib.h"
#include "quant/calib.h"
#include "quant/imatrix.h"
#include "quant/qtypes.h"
#include "quant/rtn.h"

#define CMD "quantize"
#define TEXT_MAX (256u << 20)

typedef struct q_opts {
    const char *in, *out, *type, *check, *tokenizer, *imatrix;
    nb_calib_opts cal;
    int64_t ctx, chunks, threads;
    bool json, pure, quiet;
} q_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble quantize IN OUT --type TYPE [--keep PATTERN=TYPE]... [--pure] [-t N] [--json]\n"
            "                       [--check TEXT_FILE [-c CTX] [--chunks N] [--tokenizer FILE]]\n"
            "       nibble quantize --list\n"
            "  IN: any model source (GGUF, HF directory or .safetensors, llama2.c .bin); OUT: a GGUF file.\n"
            "  --format hf [--layout L]  write OUT as an HF directory instead (nibble export's layouts)\n"
            "  --type TYPE        a format (Q4_0, Q8_0, Q4_K, Q6_K, W8, W4G128, NF4, FP8_E4M3, ... see --list)\n"
            "                     or a llama-quantize mix (Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M); also the 3rd argument\n"
            "  --keep PAT=TYPE    tensors whose GGUF name matches the glob PAT get TYPE (F32, F16, BF16 or a\n"
            "                     format); repeatable, first match wins, e.g. --keep 'blk.*.attn_v.weight=Q6_K'\n"
            "  --pure             no recipe: every 2-D weight gets TYPE (llama-quantize --pure)\n"
            "  --force            write OUT even when it is the input file or not a regular file\n"
            "  -t, --threads N    quantize rows on N threads (default: one per CPU this process may use)\n"
            "  --json             machine-readable report on stdout\n"
            "  -q, --quiet        no per-tensor lines or progress (totals and the check still print)\n"
            "  --check TEXT_FILE  run the original and the quantized model on the text: KL divergence,\n"
            "                     top-1 agreement, perplexity of both (llama-perplexity's chunking)\n"
            "  -c, --ctx-size N   chunk size for --check (default min(512, the model's context))\n"
            "  --chunks N         score at most N chunks (default all)\n"
            "  --tokenizer FILE   tokenizer for --check when the input is not GGUF\n"
            "  --imatrix FILE     importance matrix (nibble imatrix / llama-imatrix, GGUF or .dat): K-quants and\n"
            "                     Q4_0/Q4_1/Q5_0/Q5_1 use it exactly as llama-quantize --imatrix\n");
    nb_calib_usage(f);
}

static void list_types(void) {
    int n;
    const nb_qtype *all = nb_qtype_list(&n);
    printf("%-10s %7s  %s\n", "type", "bits/w", "description");
    for (int i = 0; i < n; i++)
        if (!all[i].act_only) printf("%-10s %7.4g  %s\n", all[i].name, all[i].bits_per_weight, all[i].desc);
    printf("%-10s %7s  %s\n", "Q2_K mix", "~3.0", "llama-quantize mix (what --type Q2_K means; --pure for plain Q2_K): Q3_K/Q4_K on attn_v/attn_output/ffn_down, Q6_K output");
    printf("%-10s %7s  %s\n", "Q3_K_S", "~3.5", "llama-quantize mix: Q3_K, Q6_K output");
    printf("%-10s %7s  %s\n", "Q3_K_M", "~4.0", "llama-quantize mix: Q3_K, Q4_K/Q5_K on attn_v/attn_output/ffn_down, Q6_K output");
    printf("%-10s %7s  %s\n", "Q3_K_L", "~4.3", "llama-quantize mix: Q3_K, Q5_K on attn_v/attn_output/ffn_down, Q6_K output");
    printf("%-10s %7s  %s\n", "Q4_K_S", "~4.6", "llama-quantize mix: Q4_K, Q5_K on early attn_v/ffn_down, Q6_K output");
    printf("%-10s %7s  %s\n", "Q4_K_M", "~4.9", "llama-quantize mix: Q4_K, Q6_K on half of attn_v/ffn_down and output");
    printf("%-10s %7s  %s\n", "Q5_K_S", "~5.5", "llama-quantize mix: Q5_K, Q6_K output");
    printf("%-10s %7s  %s\n", "Q5_K_M", "~5.7", "llama-quantize mix: Q5_K, Q6_K on half of attn_v/ffn_down and output");
    printf("%-10s %7s  %s\n", "F32/F16/BF16", "", "plain conversion");
}

static void fmt_shape(const nb_rtn_tensor *r, char *buf, size_t n) {
    int k = snprintf(buf, n, "%lld", (long long)r->ne[0]);
    for (int d = 1; d < r->n_dims && k > 0 && (size_t)k < n; d++)
        k += snprintf(buf + k, n - (size_t)k, " x %lld", (long long)r->ne[d]);
}

static void progress(void *ud, const nb_rtn_report *rep, int64_t i) {
    const q_opts *o = ud;
    if (o->json || o->quiet) return;
    const nb_rtn_tensor *r = &rep->tensors[i];
    char shape[64], tt[40];
    fmt_shape(r, shape, sizeof shape);
    snprintf(tt, sizeof tt, "%s -> %s", nb_dtype_name(r->src_type), nb_dtype_name(r->type));
    printf("[%4lld/%4lld] %-28s %-16s %-18s %10.3f MiB  rel.rms %-9.3g %s%s%s\n", (long long)i + 1,
           (long long)rep->n_tensors, r->name, shape, tt, (double)r->bytes / 1048576.0, r->rel_rms, r->why,
           r->why[0] && r->method_note[0] ? "; " : "", r->method_note);
    fflush(stdout);
}

static json_t *report_json(const q_opts *o, const nb_rtn_report *rep) {
    json_t *ts = json_array();
    for (int64_t i = 0; i < rep->n_tensors; i++) {
        const nb_rtn_tensor *r = &rep->tensors[i];
        json_t *shape = json_array();
        for (int d = 0; d < r->n_dims; d++) json_array_append_new(shape, json_integer(r->ne[d]));
        json_t *t = json_pack("{s:s, s:o, s:s, s:s, s:s, s:I, s:b, s:s, s:f}", "name", r->name, "shape", shape,
                              "src_type", nb_dtype_name(r->src_type), "wanted", nb_dtype_name(r->wanted), "type",
                              nb_dtype_name(r->type), "bytes", (json_int_t)r->bytes, "fallback", r->fallback, "why",
                              r->why, "seconds", r->seconds);
        json_object_set_new(t, "rel_rms", isnan(r->rel_rms) ? json_null() : json_real(r->rel_rms));
        json_object_set_new(t, "method", json_string(r->method));
        json_object_set_new(t, "method_note", r->method_note[0] ? json_string(r->method_note) : json_null());
        json_array_append_new(ts, t);
    }
    json_t *tot = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:i}", "n_params", (json_int_t)rep->n_params,
                            "bytes", (json_int_t)rep->bytes, "bytes_f16", (json_int_t)rep->bytes_f16,
                            "bits_per_weight", rep->bits_per_weight, "compression_vs_f16", rep->compression_vs_f16,
                            "seconds", rep->seconds, "n_requantized", (json_int_t)rep->n_requantized, "n_fallback",
                            (json_int_t)rep->n_fallback, "threads", rep->n_threads);
    json_t *root = json_pack("{s:s, s:s, s:s, s:o, s:o}", "input", o->in, "output", o->out, "scheme",
                             rep->scheme.name, "tensors", ts, "totals", tot);
    if (rep->scheme.file_type >= 0) json_object_set_new(root, "file_type", json_integer(rep->scheme.file_type));
    return root;
}

static void check_progress(void *ud, const nb_cmp_result *r) {
    const q_opts *o = ud;
    if (o->json || o->quiet) return;
    fprintf(stderr, "[%lld] KLD %.6f top1 %.2f%% ", (long long)r->n_chunks, r->kld_mean, 100 * r->same_top);
}

static bool is_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    char m[4] = {0};
    bool yes = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    if (f) fclose(f);
    return yes;
}

/* Runs the original and the quantized model on the text. */
static int run_check(const q_opts *o, json_t *root) {
    char *text;
    size_t len;
    if (nb_read_file(o->check, TEXT_MAX, &text, &len) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (len && text[len - 1] == '\n') text[--len] = '\0'; /* as llama-perplexity does */
    nb_session_params sp = {.n_threads = (int)o->threads, .tokenizer_path = o->tokenizer,
                            .n_ctx = (int32_t)o->ctx, .n_batch = (int32_t)o->ctx};
    nb_session *base = NULL, *test = NULL;
    sp.model_path = o->in;
    nb_status st = nb_session_open(&sp, &base);
    if (st == NB_OK) {
        /* a GGUF written from an HF directory or a llama2.c checkpoint has no
         * tokenizer metadata; nb_compare tokenizes with the original's, and an
         * HF directory's tokenizer loads from the directory itself */
        sp.model_path = o->out;
        if (!sp.tokenizer_path && nb_is_dir(o->in)) sp.tokenizer_path = o->in;
        st = nb_session_open(&sp, &test);
        if (st != NB_OK && !o->tokenizer && !is_gguf(o->in))
            nb_fail_wrap(st, "(the input is not GGUF, so the output has no tokenizer: pass --tokenizer FILE) ");
    }
    nb_cmp_result r = {0};
    int32_t ctx = (int32_t)o->ctx;
    if (st == NB_OK && ctx <= 0) ctx = NB_MIN(512, NB_MIN(base->n_ctx, test->n_ctx));
    if (st == NB_OK) st = nb_compare(base, test, text, len, ctx, o->chunks, &r, check_progress, (void *)o);
    if (!o->json && !o->quiet) fputc('\n', stderr);
    int rc = NB_EXIT_OK;
    if (st != NB_OK) {
        nb_cli_error(CMD);
        rc = nb_cli_exit_code(st);
    } else if (root) {
        json_t *c = json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                              "s:f, s:f, s:f, s:f}",
                              "text", o->check, "n_ctx", (json_int_t)ctx, "n_chunks", (json_int_t)r.n_chunks,
                              "n_tokens", (json_int_t)r.n_tokens, "n_scored", (json_int_t)r.n, "kld_mean", r.kld_mean,
                              "kld_err", r.kld_err, "kld_median", r.kld_median, "kld_p99", r.kld_p99, "kld_max",
                              r.kld_max, "same_top", r.same_top, "same_top_err", r.same_top_err, "ppl_base",
                              r.ppl_base, "ppl_base_err", r.ppl_base_err, "ppl_quant", r.ppl_test, "ppl_quant_err",
                              r.ppl_test_err, "ppl_ratio", r.ppl_ratio, "ppl_delta", r.ppl_delta, "ln_ppl_ratio",
                              r.ln_ppl_ratio, "rms_dp", r.rms_dp);
        json_object_set_new(root, "check", c);
    } else {
        printf("\n--check %s: %lld chunks of %d tokens, %lld predictions scored\n", o->check, (long long)r.n_chunks,
               ctx, (long long)r.n);
        printf("====== Perplexity statistics ======\n");
        printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", r.ppl_test, r.ppl_test_err);
        printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", r.ppl_base, r.ppl_base_err);
        printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f\n", r.ln_ppl_ratio);
        printf("Mean PPL(Q)/PPL(base)         : %10.6f\n", r.ppl_ratio);
        printf("Mean PPL(Q)-PPL(base)         : %10.6f\n", r.ppl_delta);
        printf("====== KL divergence statistics ======\n");
        printf("Mean    KLD: %10.6f +/- %10.6f\n", r.kld_mean, r.kld_err);
        printf("Maximum KLD: %10.6f\n", r.kld_max);
        printf("99.0%%   KLD: %10.6f\n", r.kld_p99);
        printf("Median  KLD: %10.6f\n", r.kld_median);
        printf("====== Token probability statistics ======\n");
        printf("RMS delta p: %8.3f %%\n", 100 * r.rms_dp);
        printf("Same top p : %8.3f +/- %6.3f %%\n", 100 * r.same_top, 100 * r.same_top_err);
    }
    nb_session_free(test);
    nb_session_free(base);
    free(text);
    return rc;
}

int nb_cmd_quantize(int argc, char **argv) {
    q_opts o = {.threads = 0, .ctx = 0, .chunks = 0};
    nb_calib_opts_default(&o.cal);
    nb_rtn_keep keep[NB_RTN_MAX_KEEP];
    int n_keep = 0;
    const char *pos[3];
    const char *hf_format = NULL, *hf_layout = NULL; /* --format hf [--layout L] */
    int n_pos = 0;
    bool list = false, force = false, takes = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            list = true;
        } else if (!strcmp(a, "--type")) {
            if (!(o.type = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--keep")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
            if (n_keep == NB_RTN_MAX_KEEP) {
                fprintf(stderr, "nibble %s: --keep: at most %d rules\n", CMD, NB_RTN_MAX_KEEP);
                return NB_EXIT_USAGE;
            }
            if (nb_rtn_keep_parse(val, &keep[n_keep]) != NB_OK) {
                nb_cli_error(CMD);
                return NB_EXIT_USAGE;
            }
            n_keep++;
        } else if (!strcmp(a, "--pure")) {
            o.pure = true;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.quiet = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 1, 512, &o.threads))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--check")) {
            if (!(o.check = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 4, 1 << 20, &o.ctx))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--chunks")) {
            if (!(val = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, val, 1, INT32_MAX, &o.chunks))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--imatrix")) {
            if (!(o.imatrix = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--format")) {
            /* gguf (default) / nibble: a GGUF file; gguf-compat: the nearest llama.cpp types (calibrated
             * methods); hf: a Hugging Face directory (cmd_export.c) */
            if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
            if (!strcmp(val, "hf") || !strcmp(val, "gguf")) {
                hf_format = val;
            } else if (strcmp(val, "nibble") && strcmp(val, "gguf-compat")) {
                fprintf(stderr, "nibble %s: --format: '%s' is not supported (allowed: gguf, nibble, gguf-compat, hf)\n",
                        CMD, val);
                return NB_EXIT_USAGE;
            } else if (nb_calib_parse_flag(&o.cal, a, val) != NB_OK) {
                nb_cli_error(CMD);
                return NB_EXIT_USAGE;
            }
        } else if (nb_calib_is_flag(a, &takes)) {
            val = "";
            if (takes && !(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
            if (nb_calib_parse_flag(&o.cal, a, val) != NB_OK) {
                nb_cli_error(CMD);
                return NB_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--tokenizer")) {
            if (!(o.tokenizer = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--layout")) { /* with --format hf: cmd_export.c */
            if (!(hf_layout = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s' (see --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "nibble %s: unexpected argument '%s' (usage: IN OUT --type TYPE)\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (list) {
        list_types();
        return NB_EXIT_OK;
    }
    if (n_pos == 3) {
        if (o.type) {
            fprintf(stderr, "nibble %s: the type is given twice ('%s' and --type %s)\n", CMD, pos[2], o.type);
            return NB_EXIT_USAGE;
        }
        o.type = pos[2];
    }
    if (n_pos < 2 || !o.type) {
        fprintf(stderr, "nibble %s: IN, OUT and --type TYPE are required\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    o.in = pos[0];
    o.out = pos[1];
    char hf_tmp[4096]; /* --format hf: quantize to a GGUF next to OUT, then export it */
    if (hf_format && strcmp(hf_format, "gguf")) {
        if (strcmp(hf_format, "hf")) {
            fprintf(stderr, "nibble %s: --format: '%s' is not supported (supported: gguf, hf)\n", CMD, hf_format);
            return NB_EXIT_USAGE;
        }
        snprintf(hf_tmp, sizeof hf_tmp, "%s.nibble-tmp.gguf", pos[1]);
        o.out = hf_tmp;
    }
    nb_rtn_params p = {.keep = keep, .n_keep = n_keep, .pure = o.pure, .n_threads = (int)o.threads};
    if (nb_rtn_scheme_parse(o.type, &p.scheme) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (o.cal.gguf_compat) {
        /* the nearest llama.cpp type llama.cpp can load: W4G32S -> Q4_0, W4G32 -> Q4_1, other W4G -> Q4_K */
        nb_dtype b = p.scheme.base;
        const char *to = b == NB_W4G32S ? "Q4_0" : b == NB_W4G32 ? "Q4_1"
                         : (b >= NB_W4G32 && b <= NB_W4G128S) ? "Q4_K" : NULL;
        if (to && nb_rtn_scheme_parse(to, &p.scheme) != NB_OK) {
            nb_cli_error(CMD);
            return NB_EXIT_USAGE;
        }
        if (!to && (int)p.scheme.base >= NB_DTYPE_GGML_END) {
            fprintf(stderr, "nibble %s: --format gguf-compat: %s has no llama.cpp equivalent (use W4G*, Q4_0, Q4_1 "
                            "or Q4_K)\n", CMD, p.scheme.name);
            return NB_EXIT_USAGE;
        }
    }
    if (!nb_file_exists(o.in) && !nb_is_dir(o.in)) {
        fprintf(stderr, "nibble %s: input '%s' not found\n", CMD, o.in);
        return NB_EXIT_USAGE;
    }
    const char *ins[] = {o.in, o.check};
    if (nb_out_check(o.out, ins, 2, force, "OUT") != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (o.out != pos[1] && nb_cmd_export_check_out(CMD, pos[1], o.in, o.tokenizer, force, "OUT") != NB_EXIT_OK)
        return NB_EXIT_USAGE; /* --format hf: OUT is a directory */
    if (o.check && !nb_file_exists(o.check)) {
        fprintf(stderr, "nibble %s: --check text file '%s' not found\n", CMD, o.check);
        return NB_EXIT_USAGE;
    }
    nb_qcal *cc = NULL;
    if (o.imatrix || o.cal.method != NB_CALIB_RTN) {
        nb_status cst = nb_qcal_prepare(&o.cal, o.in, o.imatrix, o.json || o.quiet, &p, &cc);
        if (cst != NB_OK) {
            nb_cli_error(CMD);
            return nb_cli_exit_code(cst);
        }
    }
    nb_rtn_report rep;
    if (!o.json && !o.quiet)
        printf("quantizing %s -> %s as %s%s\n", o.in, o.out, p.scheme.name, o.pure ? " (pure)" : "");
    nb_status st = nb_rtn_quantize(o.in, o.out, &p, &rep, progress, &o);
    nb_qcal_free(cc);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        nb_rtn_report_free(&rep);
        return nb_cli_exit_code(st);
    }
    if (o.out != pos[1]) {
        int xrc = nb_cmd_export_quantized(o.out, o.in, pos[1], hf_layout, o.tokenizer);
        o.out = pos[1];
        if (xrc != NB_EXIT_OK) {
            nb_rtn_report_free(&rep);
            return xrc;
        }
    }
    json_t *root = o.json ? report_json(&o, &rep) : NULL;
    if (!o.json) {
        printf("total: %lld tensors, %llu weights, %.3f MiB, %.4f bits per weight; F16 would be %.3f MiB: "
               "%.2fx smaller; %.2f s on %d threads\n",
               (long long)rep.n_tensors, (unsigned long long)rep.n_params, (double)rep.bytes / 1048576.0,
               rep.bits_per_weight, (double)rep.bytes_f16 / 1048576.0, rep.compression_vs_f16, rep.seconds,
               rep.n_threads);
        if (rep.n_fallback)
            printf("%lld tensors fell back to another type (row length not a multiple of the block)\n",
                   (long long)rep.n_fallback);
        if (rep.n_requantized)
            printf("warning: %lld input tensors were already quantized and were dequantized first "
                   "(requantizing loses quality)\n", (long long)rep.n_requantized);
    }
    nb_rtn_report_free(&rep);
    int rc = NB_EXIT_OK;
    if (o.check) rc = run_check(&o, root);
    if (root) {
        json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
        fputc('\n', stdout);
        json_decref(root);
    }
    return rc;
}
