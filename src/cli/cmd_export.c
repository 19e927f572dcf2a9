/* nibble export: write a model as a Hugging Face checkpoint directory.
 *
 *   nibble export IN OUT_DIR --format hf [--layout awq|gptq|compressed-tensors|bitsandbytes]
 *                 [--dtype F32|F16|BF16] [--max-shard-size 5GB] [--tokenizer FILE|DIR] [--force]
 *
 * Quantized tensors of nibble's types go into the layout's tensors with a
 * matching quantization_config (formats/hf_export.h); the result loads back
 * bit for bit (nibble) and in vLLM / Transformers. */
#include <stdio.h>
#include <string.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "formats/hf_export.h"
#include "formats/source.h"
#include "quant/qtypes.h"

#define CMD "export"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble export IN OUT_DIR --format hf [--layout L] [--dtype T] [--max-shard-size SIZE] [--tokenizer PATH]\n"
            "\n"
            "  IN                  GGUF file, HF directory or llama2.c checkpoint\n"
            "  OUT_DIR             directory to write (config.json, safetensors, tokenizer files)\n"
            "  --format hf         the output format (only hf)\n"
            "  --layout L          for quantized tensors: awq, gptq, compressed-tensors (W4G*), bitsandbytes (NF4);\n"
            "                      default: awq for W4G, gptq for W4G*S, compressed-tensors for W8/W8A8/FP8_E4M3,\n"
            "                      bitsandbytes for NF4\n"
            "  --dtype T           convert float tensors to F32, F16 or BF16 (default: keep each tensor's type)\n"
            "  --max-shard-size S  split the weights into shards of at most S (default 5GB)\n"
            "  --tokenizer PATH    copy tokenizer files from this directory or file (default: an HF input's own)\n"
            "  --force             write even when OUT_DIR is the input directory or one of the files to\n"
            "                      write in it is an input or not a regular file (refused by default)\n");
}

/* The files an HF export may write in OUT_DIR (formats/hf_export.c): each
 * must not be an input nor a device / FIFO (the shards are named
 * model-0000N-of-0000M.safetensors; those are new names in practice). */
static const char *const OUT_NAMES[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                                        "tokenizer.model", "special_tokens_map.json"};

int nb_cmd_export_check_out(const char *cmd, const char *dir, const char *in, const char *tokenizer, int force,
                            const char *what) {
    const char *ins[] = {in, tokenizer};
    if (nb_out_dir_check(dir, OUT_NAMES, sizeof OUT_NAMES / sizeof *OUT_NAMES, ins, 2, force != 0, what) != NB_OK) {
        nb_cli_error(cmd);
        return NB_EXIT_USAGE;
    }
    return NB_EXIT_OK;
}

int nb_cmd_export(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *format = NULL;
    nb_hf_export_opts o = {0};
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (!strcmp(a, "--format")) {
            if (!(format = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--layout")) {
            if (!(o.layout = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--dtype")) {
            if (!(o.dtype = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!(o.tokenizer = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--max-shard-size")) {
            const char *v = nb_arg_value(CMD, argc, argv, &i);
            if (!v || !nb_arg_bytes(CMD, a, v, &o.max_shard_bytes)) return NB_EXIT_USAGE;
            if (!o.max_shard_bytes) {
                fprintf(stderr, "nibble %s: --max-shard-size: must be positive\n", CMD);
                return NB_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            usage(stderr);
            return NB_EXIT_USAGE;
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            fprintf(stderr, "nibble %s: unexpected argument '%s'\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "nibble %s: IN and OUT_DIR are required\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    if (!format || strcmp(format, "hf")) {
        fprintf(stderr, "nibble %s: --format: '%s' is not supported (supported: hf)\n", CMD, format ? format : "(missing)");
        return NB_EXIT_USAGE;
    }
    if (o.layout && strcmp(o.layout, "awq") && strcmp(o.layout, "gptq") && strcmp(o.layout, "compressed-tensors") &&
        strcmp(o.layout, "bitsandbytes")) {
        fprintf(stderr, "nibble %s: --layout: '%s' is not supported (supported: awq, gptq, compressed-tensors, bitsandbytes)\n",
                CMD, o.layout);
        return NB_EXIT_USAGE;
    }
    if (o.dtype && strcmp(o.dtype, "F32") && strcmp(o.dtype, "F16") && strcmp(o.dtype, "BF16")) {
        fprintf(stderr, "nibble %s: --dtype: '%s' is not supported (supported: F32, F16, BF16)\n", CMD, o.dtype);
        return NB_EXIT_USAGE;
    }
    if (nb_cmd_export_check_out(CMD, out, in, o.tokenizer, force, "OUT_DIR") != NB_EXIT_OK) return NB_EXIT_USAGE;
    nb_source src;
    nb_status st = nb_source_open(in, &src);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    st = nb_hf_export_ex(&src, out, &o);
    nb_source_close(&src);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    fprintf(stderr, "nibble %s: wrote %s\n", CMD, out);
    return NB_EXIT_OK;
}

int nb_cmd_export_quantized(const char *gguf, const char *in, const char *dir, const char *layout, const char *tokenizer) {
    nb_hf_export_opts o = {.layout = layout};
    /* tokenizer files: --tokenizer when it is one HF can hold, else an HF input's own */
    size_t tl = tokenizer ? strlen(tokenizer) : 0;
    if (tokenizer && (nb_is_dir(tokenizer) || (tl > 5 && !strcmp(tokenizer + tl - 5, ".json")) ||
                      (tl > 6 && !strcmp(tokenizer + tl - 6, ".model"))))
        o.tokenizer = tokenizer;
    else if (nb_is_dir(in))
        o.tokenizer = in;
    nb_source src;
    nb_status st = nb_source_open(gguf, &src);
    if (st == NB_OK) {
        st = nb_hf_export_ex(&src, dir, &o);
        nb_source_close(&src);
    }
    remove(gguf);
    if (st != NB_OK) {
        nb_cli_error("quantize");
        return nb_cli_exit_code(st);
    }
    return NB_EXIT_OK;
}
