/* nibble template: render a chat template with a JSON context, the way
 * Transformers' apply_chat_template does (for debugging a model's
 * template and for the conformance tests).
 *
 *   nibble template FILE|MODEL|NAME --context CONTEXT.json [--now 2026-11-29T12:00:00] [--chat]
 *
 * FILE: a Jinja template file (or a tokenizer_config.json /
 * chat_template.json holding one); MODEL: a GGUF file or HF directory
 * whose chat template is used (bos_token / eos_token default to the
 * vocabulary's); NAME: a built-in template (docs/template.md).
 * CONTEXT.json: the variables, e.g. {"messages": [...], "tools": [...],
 * "add_generation_prompt": true, "bos_token": "<s>"}. By default the
 * context is passed to the template as given; with --chat the
 * messages are prepared as the server does (text parts flattened,
 * tool-call arguments parsed). The rendering goes to stdout as is; a
 * template error goes to stderr and exits 2. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "template/jinja.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define CMD "template"
#define MAX_CONTEXT_BYTES ((size_t)64 << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble template FILE|MODEL|NAME --context CONTEXT.json [--now 2026-11-29T12:00:00] [--chat]\n"
            "\n"
            "  FILE                 a Jinja chat template (or a tokenizer_config.json holding one)\n"
            "  MODEL                a GGUF file or HF model directory: its chat template, and bos_token /\n"
            "                       eos_token from its vocabulary unless the context gives them\n"
            "  NAME                 a built-in template: %s\n"
            "  --context FILE       the template variables as a JSON object (messages, tools,\n"
            "                       add_generation_prompt, bos_token, eos_token, ...); '-' reads stdin\n"
            "  --now TIME           the time strftime_now() sees (UTC), default the current time\n"
            "  --chat               prepare messages as the server does (text parts joined unless the\n"
            "                       template iterates them, tool-call arguments parsed from JSON strings)\n"
            "\n"
            "Prints the rendering exactly (no newline added). A template error (raise_exception, a type\n"
            "error) is printed to stderr and the exit status is 2.\n",
            nb_chat_builtin_names());
}

static bool is_model(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return false;
    if (S_ISDIR(sb.st_mode)) return true;
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".gguf")) return true;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[4] = {0};
    bool gguf = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    fclose(f);
    return gguf;
}

static char *token_text(const nb_tokenizer *tok, int32_t id) {
    char buf[256];
    if (id < 0) return strdup("");
    size_t n = nb_token_piece(tok, id, true, buf, sizeof buf - 1);
    buf[NB_MIN(n, sizeof buf - 1)] = '\0';
    return strdup(buf);
}

int nb_cmd_template(int argc, char **argv) {
    const char *src = NULL, *ctx_path = NULL, *now_s = NULL;
    bool chat = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "--context") || !strcmp(a, "-c")) {
            if (!(ctx_path = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--now")) {
            if (!(now_s = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s'\n", CMD, a);
            usage(stderr);
            return NB_EXIT_USAGE;
        } else if (!src) {
            src = a;
        } else {
            fprintf(stderr, "nibble %s: more than one template given ('%s', '%s')\n", CMD, src, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!src || !ctx_path) {
        fprintf(stderr, "nibble %s: a template (FILE, MODEL or NAME) and --context CONTEXT.json are required\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    int64_t now = -1;
    if (now_s && !nb_tmpl_parse_time(now_s, &now)) {
        fprintf(stderr, "nibble %s: --now: '%s' is not a time like 2026-11-29T12:00:00\n", CMD, now_s);
        return NB_EXIT_USAGE;
    }
    /* the context */
    json_error_t je;
    json_t *ctx = !strcmp(ctx_path, "-") ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &je)
                                         : json_load_file(ctx_path, JSON_REJECT_DUPLICATES, &je);
    if (!ctx || !json_is_object(ctx)) {
        if (ctx) fprintf(stderr, "nibble %s: --context %s: must be a JSON object\n", CMD, ctx_path);
        else fprintf(stderr, "nibble %s: --context %s: line %d: %s\n", CMD, ctx_path, je.line, je.text);
        json_decref(ctx);
        return NB_EXIT_USAGE;
    }
    /* the template */
    nb_chat_template *t = NULL;
    nb_status st;
    if (is_model(src)) {
        nb_tokenizer *tok = NULL;
        st = nb_tokenizer_load(src, NULL, &tok);
        if (st != NB_OK) {
            nb_cli_error(CMD);
            json_decref(ctx);
            return nb_cli_exit_code(st);
        }
        st = nb_chat_template_create(nb_tokenizer_chat_template(tok), "the model's", &t);
        if (st == NB_OK && !json_object_get(ctx, "bos_token")) {
            char *s = token_text(tok, nb_tokenizer_bos(tok));
            json_object_set_new(ctx, "bos_token", json_string(s ? s : ""));
            free(s);
        }
        if (st == NB_OK && !json_object_get(ctx, "eos_token")) {
            char *s = token_text(tok, nb_tokenizer_eos(tok));
            json_object_set_new(ctx, "eos_token", json_string(s ? s : ""));
            free(s);
        }
        nb_tokenizer_free(tok);
    } else {
        st = nb_chat_template_open(src, &t);
    }
    if (st != NB_OK) {
        nb_cli_error(CMD);
        json_decref(ctx);
        return NB_EXIT_USAGE;
    }
    char *out = NULL;
    size_t len = 0;
    if (chat) {
        json_t *kw = json_deep_copy(ctx);
        json_object_del(kw, "messages");
        json_object_del(kw, "tools");
        json_t *gen = json_object_get(ctx, "add_generation_prompt");
        nb_chat_input in = {.messages = json_object_get(ctx, "messages"),
                            .tools = json_object_get(ctx, "tools"),
                            .kwargs = kw,
                            .add_generation_prompt = gen ? json_is_true(gen) : true,
                            .bos = json_string_value(json_object_get(ctx, "bos_token")),
                            .eos = json_string_value(json_object_get(ctx, "eos_token")),
                            .now = now};
        st = nb_chat_render_json(t, &in, &out);
        json_decref(kw);
        if (out) len = strlen(out);
    } else {
        nb_tmpl *jt = NULL;
        const char *text = nb_chat_template_text(t);
        st = nb_tmpl_parse(text, strlen(text), &jt);
        if (st == NB_OK) {
            nb_tmpl_opts o = {.now = now};
            st = nb_tmpl_render(jt, ctx, &o, &out, &len);
        }
        nb_tmpl_free(jt);
    }
    int rc = NB_EXIT_OK;
    if (st != NB_OK) {
        fprintf(stderr, "%s\n", nb_errmsg());
        rc = st == NB_ERR_NOMEM ? NB_EXIT_FAIL : NB_EXIT_USAGE;
    } else if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        rc = NB_EXIT_FAIL;
    }
    free(out);
    nb_chat_template_free(t);
    json_decref(ctx);
    return rc;
}
