/* Model sources: format detection and the common accessors. */
#include "formats/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

nb_status nb_source_open(const char *path, nb_source *out) {
    memset(out, 0, sizeof *out);
    if (nb_is_dir(path) || has_suffix(path, ".safetensors") || has_suffix(path, "config.json")) {
        return nb_source_open_hf(path, out);
    }
    nb_map m;
    NB_TRY(nb_map_file(path, &m));
    bool gguf = m.size >= 4 && !memcmp(m.data, "GGUF", 4);
    /* What the file starts with, for the message when neither reader takes it. */
    char magic[64];
    if (m.size >= 4) {
        char txt[5];
        for (int i = 0; i < 4; i++) txt[i] = m.data[i] >= 0x20 && m.data[i] < 0x7f ? (char)m.data[i] : '.';
        txt[4] = '\0';
        snprintf(magic, sizeof magic, "magic '%s' = %02x %02x %02x %02x, GGUF files start with 'GGUF'", txt, m.data[0],
                 m.data[1], m.data[2], m.data[3]);
    } else {
        snprintf(magic, sizeof magic, "only %zu bytes, no 4-byte magic", m.size);
    }
    nb_unmap(&m);
    if (gguf) return nb_source_open_gguf(path, out);
    nb_status st = nb_source_open_llama2c(path, out);
    if (st == NB_OK || st == NB_ERR_NOMEM) return st;
    char why[512];
    const char *msg = nb_errmsg();
    size_t pl = strlen(path);
    if (!strncmp(msg, path, pl) && !strncmp(msg + pl, ": ", 2)) msg += pl + 2; /* drop the repeated path */
    snprintf(why, sizeof why, "%s", msg);
    return nb_fail(st, "%s: not a GGUF file (%s), and not a llama2.c checkpoint because %s", path, magic, why);
}

void nb_source_close(nb_source *s) {
    if (!s) return;
    if (s->close_impl) s->close_impl(s);
    free(s->path);
    memset(s, 0, sizeof *s);
}

const nb_tensor *nb_source_find(const nb_source *s, const char *name) {
    for (int64_t i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}

nb_status nb_hparams_validate(const nb_hparams *hp, const char *path) {
#define POS(f) if (hp->f <= 0) return nb_fail(NB_ERR_FORMAT, "%s: hyper-parameter " #f " = %d must be positive", path, (int)hp->f)
    POS(n_vocab); POS(n_embd); POS(n_layer); POS(n_head); POS(n_head_kv); POS(head_dim); POS(n_ff);
#undef POS
    if (hp->n_head % hp->n_head_kv)
        return nb_fail(NB_ERR_FORMAT, "%s: head count %d is not a multiple of the KV head count %d", path, hp->n_head,
                       hp->n_head_kv);
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return nb_fail(NB_ERR_FORMAT, "%s: rope dimension count %d must be even and within 2..head_dim (%d)", path,
                       hp->rope_dim, hp->head_dim);
    if (!(hp->norm_eps > 0 && hp->norm_eps < 1))
        return nb_fail(NB_ERR_FORMAT, "%s: RMSNorm epsilon %g outside (0, 1)", path, hp->norm_eps);
    if (!(hp->rope_theta > 0))
        return nb_fail(NB_ERR_FORMAT, "%s: rope theta %g must be positive", path, hp->rope_theta);
    if (hp->n_layer > 1024 || hp->n_embd > 1 << 20 || hp->n_head > 4096 || hp->head_dim > 4096 || hp->n_ff > 1 << 22)
        return nb_fail(NB_ERR_FORMAT, "%s: hyper-parameters out of any plausible range (layers %d, embd %d, heads %d, "
                       "head_dim %d, ffn %d)", path, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim, hp->n_ff);
    return NB_OK;
}
