/* Model source from a GGUF file: the model description from the `<arch>.*`
 * keys (formats/arch.c), tensors straight from the mapping. */
#include "formats/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void release_gguf(nb_source *s, const void *p, size_t n) { nb_gguf_release(s->impl, p, n); }

static void close_gguf(nb_source *s) {
    nb_gguf_close((nb_gguf *)s->impl);
    free(s->tensors);
}

nb_status nb_source_open_gguf(const char *path, nb_source *out) {
    memset(out, 0, sizeof *out);
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_status st = nb_arch_desc_from_gguf(g, NB_ARCH_RUN, &out->hp);
    if (st != NB_OK) { nb_gguf_close(g); return st; }
    out->format = "gguf";
    out->path = nb_strdup(path);
    out->n_tensors = nb_gguf_n_tensors(g);
    out->tensors = nb_malloc((size_t)(out->n_tensors ? out->n_tensors : 1) * sizeof *out->tensors);
    if (!out->path || !out->tensors) {
        free(out->path);
        free(out->tensors);
        nb_gguf_close(g);
        return NB_ERR_NOMEM;
    }
    for (int64_t i = 0; i < out->n_tensors; i++) out->tensors[i] = *nb_gguf_tensor(g, i);
    out->gguf = g;
    out->impl = g;
    out->close_impl = close_gguf;
    out->release_impl = release_gguf;
    return NB_OK;
}
