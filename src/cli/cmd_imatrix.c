/* nibble imatrix MODEL -f TEXT -o FILE: an importance matrix the way
 * llama-imatrix computes it (src/quant/imatrix.h): the text is tokenized
 * once with BOS, cut into chunks of -c tokens (the first token of each chunk
 * replaced by BOS), each chunk run from an empty cache through the serving
 * forward pass with a capture hook on every linear layer's input; per
 * weight, the sum over tokens of x^2 per input column and the token count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "engine/session.h"
#include "quant/imatrix.h"

#define CMD "imatrix"
#define TEXT_MAX NB_LIMIT_TEXT_FILE_BYTES

static const char *const slot_names[NB_FWD_CAP_N][3] = {
    {"attn_q", "attn_k", "attn_v"}, {"attn_output", NULL, NULL}, {"ffn_gate", "ffn_up", NULL}, {"ffn_down", NULL, NULL}};

typedef struct collector {
    nb_imatrix *m;
    nb_imatrix_entry **slot; /* [n_layer][NB_FWD_CAP_N]: the first entry of the slot */
    int n_layer;
    bool bad;                /* NaN / Inf seen */
    char bad_where[128];
} collector;

static void capture(void *ud, int layer, nb_fwd_cap where, const float *x, int64_t n, int64_t dim) {
    collector *c = ud;
    nb_imatrix_entry *e = c->slot[layer * NB_FWD_CAP_N + where];
    if (!e) return;
    for (int64_t i = 0; i < n * dim && !c->bad; i++)
        if (!isfinite(x[i])) {
            c->bad = true;
            snprintf(c->bad_where, sizeof c->bad_where, "input of %s", e->name);
        }
    nb_imatrix_accumulate(e, x, n, dim);
}

static void usage(FILE *f) {
    fprintf(f, "usage: nibble imatrix MODEL -f TEXT -o FILE [--chunks N] [-c CTX] [--output-format gguf|dat] [-t N] [--force]\n"
               "  computes llama.cpp's importance matrix (mean x^2 per input column of every linear weight)\n"
               "  -f, --file TEXT         calibration text\n"
               "  -o, --output FILE       output (default imatrix.gguf); --output-format dat writes the legacy binary\n"
               "  -c, --ctx-size N        tokens per chunk (default 512)\n"
               "  --chunks N              use at most N chunks (default all)\n"
               "  -t, --threads N         threads (default: one per CPU this process may use)\n"
               "  --force                 write FILE even when it is the model or the text, or not a regular file\n");
}

int nb_cmd_imatrix(int argc, char **argv) {
    const char *model = NULL, *text_path = NULL, *out = "imatrix.gguf", *fmt = NULL;
    int64_t ctx = 512, chunks = 0, threads = 0;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return NB_EXIT_OK;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(text_path = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--output-format")) {
            if (!(fmt = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
            if (strcmp(fmt, "gguf") && strcmp(fmt, "dat")) {
                fprintf(stderr, "nibble %s: --output-format: '%s' (allowed gguf, dat)\n", CMD, fmt);
                return NB_EXIT_USAGE;
            }
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(v = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, v, 8, 1 << 20, &ctx))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--chunks")) {
            if (!(v = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, v, 1, INT32_MAX, &chunks))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = nb_arg_value(CMD, argc, argv, &i)) || !nb_arg_int(CMD, a, v, 1, 512, &threads))
                return NB_EXIT_USAGE;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s' (see --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        } else if (!model) {
            model = a;
        } else {
            fprintf(stderr, "nibble %s: unexpected argument '%s'\n", CMD, a);
            return NB_EXIT_USAGE;
        }
    }
    if (!model || !text_path) {
        fprintf(stderr, "nibble %s: MODEL and -f TEXT are required\n", CMD);
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    const char *ins[] = {model, text_path};
    if (nb_out_check(out, ins, 2, force, "-o") != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (!fmt) {
        size_t n = strlen(out);
        fmt = n > 4 && !strcmp(out + n - 4, ".dat") ? "dat" : "gguf";
    }
    char *text;
    size_t len;
    if (nb_read_file(text_path, TEXT_MAX, &text, &len) != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    nb_session_params sp = {.model_path = model, .n_threads = (int)threads, .n_ctx = (int32_t)ctx,
                            .n_batch = (int32_t)ctx};
    nb_session *s = NULL;
    nb_status st = nb_session_open(&sp, &s);
    if (st != NB_OK) {
        free(text);
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st = nb_tokenize(s->tok, text, len, true, false, &ids, &n_ids);
    free(text);
    int64_t n_chunk = st == NB_OK ? (int64_t)n_ids / ctx : 0;
    if (st == NB_OK && n_chunk < 1)
        st = nb_fail(NB_ERR_INVALID, "%s: %zu tokens, fewer than one chunk of %lld (use a longer text or a smaller -c)",
                     text_path, n_ids, (long long)ctx);
    if (chunks > 0 && n_chunk > chunks) n_chunk = chunks;
    nb_imatrix m = {0};
    collector c = {.m = &m, .n_layer = s->model->hp.n_layer};
    c.slot = calloc((size_t)c.n_layer * NB_FWD_CAP_N, sizeof *c.slot);
    if (!c.slot) st = NB_ERR_NOMEM;
    const nb_arch_desc *hp = &s->model->hp;
    int64_t dims[NB_FWD_CAP_N] = {hp->n_embd, (int64_t)hp->n_head * hp->head_dim, hp->n_embd, hp->n_ff};
    for (int l = 0; st == NB_OK && l < c.n_layer; l++)
        for (int k = 0; k < NB_FWD_CAP_N; k++) {
            char name[128];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, slot_names[k][0]);
            nb_imatrix_entry *e = nb_imatrix_add(&m, name, dims[k]);
            if (!e) { st = NB_ERR_NOMEM; break; }
        }
    /* entries were appended in order (realloc may move them): bind after */
    for (int l = 0; st == NB_OK && l < c.n_layer; l++)
        for (int k = 0; k < NB_FWD_CAP_N; k++) c.slot[l * NB_FWD_CAP_N + k] = &m.e[l * NB_FWD_CAP_N + k];
    if (st == NB_OK) nb_fwd_set_capture(s->fwd, capture, &c);
    int32_t bos = nb_tokenizer_bos(s->tok);
    bool add_bos = nb_tokenizer_add_bos(s->tok) && bos >= 0, tty = isatty(2);
    for (int64_t ch = 0; st == NB_OK && ch < n_chunk; ch++) {
        int32_t *chunk = ids + ch * ctx;
        if (add_bos) chunk[0] = bos;
        nb_session_reset(s);
        st = nb_session_eval(s, chunk, (int32_t)ctx, false, s->logits);
        if (tty) fprintf(stderr, "\r[%lld/%lld] chunks", (long long)ch + 1, (long long)n_chunk);
    }
    if (tty) fputc('\n', stderr);
    if (st == NB_OK && c.bad)
        st = nb_fail(NB_ERR_INVALID, "%s: NaN or Inf in the %s: the model's weights are broken", model, c.bad_where);
    int64_t n_base = st == NB_OK ? m.n : 0;
    /* the other weights that share an input get a copy of its statistics */
    for (int64_t i = 0; st == NB_OK && i < n_base; i++) {
        int k = (int)(i % NB_FWD_CAP_N), l = (int)(i / NB_FWD_CAP_N);
        for (int j = 1; j < 3 && slot_names[k][j]; j++) {
            char name[128];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, slot_names[k][j]);
            nb_imatrix_entry *e = nb_imatrix_add(&m, name, m.e[i].n);
            if (!e) { st = NB_ERR_NOMEM; break; }
            memcpy(e->sum2, m.e[i].sum2, (size_t)e->n * sizeof(double));
            e->count = m.e[i].count;
        }
    }
    if (st == NB_OK) {
        m.chunks = (int32_t)n_chunk;
        m.chunk_size = (int32_t)ctx;
        snprintf(m.dataset, sizeof m.dataset, "%s", text_path);
        st = !strcmp(fmt, "dat") ? nb_imatrix_save_dat(&m, out) : nb_imatrix_save_gguf(&m, out);
    }
    if (st == NB_OK)
        printf("imatrix: %lld entries from %lld chunks of %lld tokens -> %s (%s)\n", (long long)m.n,
               (long long)n_chunk, (long long)ctx, out, fmt);
    int rc = NB_EXIT_OK;
    if (st != NB_OK) {
        nb_cli_error(CMD);
        rc = nb_cli_exit_code(st);
    }
    nb_imatrix_free(&m);
    free(c.slot);
    free(ids);
    nb_session_free(s);
    return rc;
}
