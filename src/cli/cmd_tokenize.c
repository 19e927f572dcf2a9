/* nibble tokenize: show how a model's tokenizer splits a text (the
 * equivalent of llama.cpp's llama-tokenize).
 *
 *   nibble tokenize -m MODEL [--tokenizer FILE] (-p TEXT | -f FILE) [--ids] [--no-bos] [--special]
 *
 * Output: one "id<TAB>piece" line per token (pieces with control tokens
 * shown), or with --ids a JSON array of the ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

#define CMD "tokenize"
#define MAX_INPUT_BYTES ((size_t)256 << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble tokenize -m MODEL [--tokenizer FILE] (-p TEXT | -f FILE) [--ids] [--no-bos] [--special]\n"
            "\n"
            "  -m, --model MODEL   GGUF file, HF model directory, llama2.c checkpoint .bin, or a tokenizer file\n"
            "                      (tokenizer.json, tokenizer.model, llama2.c tokenizer .bin)\n"
            "  --tokenizer FILE    use this tokenizer file instead of the one found from MODEL\n"
            "  -p, --prompt TEXT   text to tokenize\n"
            "  -f, --file FILE     read the text from FILE\n"
            "  --ids               print only a JSON array of the ids\n"
            "  --no-bos            do not add BOS/EOS even if the vocabulary asks for them\n"
            "  --special           parse control-token text (e.g. <|im_start|>) into those tokens\n"
            "\n"
            "Prints one 'id<TAB>piece' line per token.\n");
}

/* Writes a piece with tabs / newlines / control bytes escaped so each token stays on one line. */
static void print_piece(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

int nb_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *tok = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, no_bos = false, special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!(tok = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--ids")) {
            ids_only = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            usage(stderr);
            return NB_EXIT_USAGE;
        }
    }
    if (!model && !tok) {
        fprintf(stderr, "nibble %s: -m MODEL (or --tokenizer FILE) is required\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (!!prompt == !!file) {
        fprintf(stderr, "nibble %s: give exactly one of -p TEXT or -f FILE\n", CMD);
        return NB_EXIT_USAGE;
    }
    char *buf = NULL;
    size_t len;
    if (file) {
        nb_status st = nb_read_file(file, MAX_INPUT_BYTES, &buf, &len);
        if (st != NB_OK) {
            nb_cli_error(CMD);
            return nb_cli_exit_code(st);
        }
    } else {
        len = strlen(prompt);
    }
    const char *text = file ? buf : prompt;
    nb_tokenizer *t;
    nb_status st = nb_tokenizer_load(model, tok, &t);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        free(buf);
        return nb_cli_exit_code(st);
    }
    int32_t *ids;
    size_t n;
    st = nb_tokenize(t, text, len, !no_bos, special, &ids, &n);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        nb_tokenizer_free(t);
        free(buf);
        return nb_cli_exit_code(st);
    }
    if (ids_only) {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        printf("]\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t k;
            const char *p = nb_token_piece_ref(t, ids[i], true, &k);
            printf("%d\t", ids[i]);
            print_piece(p, k);
            putchar('\n');
        }
    }
    int rc = fflush(stdout) == 0 ? NB_EXIT_OK : NB_EXIT_FAIL;
    free(ids);
    nb_tokenizer_free(t);
    free(buf);
    return rc;
}
