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

void nb_source_release(nb_source *s, const void *p, size_t n) {
    if (s->release_impl) s->release_impl(s, p, n);
}

const nb_tensor *nb_source_find(const nb_source *s, const char *name) {
    for (int64_t i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}
