/* Calibrated quantization driver (see quantize_calib.h). */
#include "cli/quantize_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "quant/imatrix.h"

struct nb_qcal {
    nb_calib_opts o;
    nb_imatrix im;
    bool have_im;
    char im_path[1024];
    char in_sha[65];
};

static nb_status tensor_fn(void *ud, const nb_tensor *src, const nb_rtn_tensor *r, nb_pool *pool, void *dst,
                           uint64_t nbytes, double *rel_rms, bool *handled) {
    nb_qcal *q = ud;
    *handled = false;
    if (q->have_im && r->n_dims >= 2) {
        const nb_imatrix_entry *e = nb_imatrix_find(&q->im, r->name);
        if (e) return nb_imatrix_convert(e, src, r->type, pool, dst, nbytes, rel_rms, handled);
    }
    return NB_OK;
}

static nb_status meta_fn(void *ud, nb_gguf_writer *w) {
    nb_qcal *q = ud;
    if (q->have_im) {
        /* the keys llama-quantize writes */
        NB_TRY(nb_gguf_set_str(w, "quantize.imatrix.file", q->im_path));
        NB_TRY(nb_gguf_set_str(w, "quantize.imatrix.dataset", q->im.dataset));
        NB_TRY(nb_gguf_set_i32(w, "quantize.imatrix.entries_count", (int32_t)q->im.n));
        NB_TRY(nb_gguf_set_i32(w, "quantize.imatrix.chunks_count", q->im.chunks));
    }
    NB_TRY(nb_gguf_set_str(w, "nibble.quantize.input_sha256", q->in_sha));
    return NB_OK;
}

void nb_qcal_free(nb_qcal *q) {
    if (!q) return;
    nb_imatrix_free(&q->im);
    free(q);
}

nb_status nb_qcal_prepare(const nb_calib_opts *o, const char *in, const char *imatrix_path, bool quiet,
                          nb_rtn_params *p, nb_qcal **out) {
    (void)quiet;
    *out = NULL;
    nb_qcal *q = nb_calloc(1, sizeof *q);
    if (!q) return NB_ERR_NOMEM;
    q->o = *o;
    nb_source src;
    nb_status st = nb_source_open(in, &src);
    if (st != NB_OK) {
        free(q);
        return st;
    }
    if (strcmp(src.format, "gguf"))
        st = nb_fail(NB_ERR_UNSUPPORTED, "%s: --imatrix and calibrated methods need a GGUF input (convert it first "
                     "with nibble quantize IN out.gguf --type F16)", in);
    if (st == NB_OK && imatrix_path) {
        st = nb_imatrix_load(imatrix_path, &q->im);
        if (st == NB_OK) {
            q->have_im = true;
            snprintf(q->im_path, sizeof q->im_path, "%s", imatrix_path);
            st = nb_imatrix_check(&q->im, &src, imatrix_path);
        }
    }
    nb_source_close(&src);
    if (st == NB_OK) st = nb_sha256_file(in, q->in_sha);
    if (st == NB_OK && o->method != NB_CALIB_RTN)
        st = nb_fail(NB_ERR_UNSUPPORTED, "--method %s is not available yet", nb_calib_method_name(o->method));
    if (st != NB_OK) {
        nb_qcal_free(q);
        return st;
    }
    p->tensor_fn = tensor_fn;
    p->meta_fn = meta_fn;
    p->ud = q;
    if (q->have_im) p->method = "rtn+imatrix";
    *out = q;
    return NB_OK;
}
