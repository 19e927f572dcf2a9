/* Importance matrix files (see imatrix.h for both layouts). */
#include "quant/imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/half.h"
#include "quant/qtypes.h"
#include "formats/gguf.h"

#define DAT_MAX_BYTES ((size_t)4 << 30)

void nb_imatrix_free(nb_imatrix *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].sum2);
    }
    free(m->e);
    memset(m, 0, sizeof *m);
}

nb_imatrix_entry *nb_imatrix_add(nb_imatrix *m, const char *name, int64_t n) {
    if (n < 1 || n > NB_IMATRIX_MAX_VALUES || m->n >= NB_IMATRIX_MAX_ENTRIES) return NULL;
    nb_imatrix_entry *e = realloc(m->e, (size_t)(m->n + 1) * sizeof *e);
    if (!e) return NULL;
    m->e = e;
    e = &m->e[m->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->sum2 = calloc((size_t)n, sizeof(double));
    if (!e->name || !e->sum2) {
        free(e->name);
        free(e->sum2);
        return NULL;
    }
    e->n = n;
    m->n++;
    return e;
}

const nb_imatrix_entry *nb_imatrix_find(const nb_imatrix *m, const char *name) {
    for (int64_t i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].name, name)) return &m->e[i];
    return NULL;
}

void nb_imatrix_values(const nb_imatrix_entry *e, float *out) {
    for (int64_t j = 0; j < e->n; j++) out[j] = e->count > 0 ? (float)(e->sum2[j] / e->count) : 1.0f;
}

void nb_imatrix_accumulate(nb_imatrix_entry *e, const float *x, int64_t n_tok, int64_t dim) {
    if (dim != e->n) return;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *r = x + t * dim;
        for (int64_t j = 0; j < dim; j++) e->sum2[j] += (double)r[j] * r[j];
    }
    e->count += (double)n_tok;
}

/* ---- legacy .dat ----------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
} rd;

static bool rd_i32(rd *r, int32_t *v) {
    if (r->len - r->off < 4) return false;
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return true;
}

static nb_status load_dat(const char *path, nb_imatrix *m) {
    char *data;
    size_t len;
    NB_TRY(nb_read_file(path, DAT_MAX_BYTES, &data, &len));
    rd r = {(const uint8_t *)data, len, 0};
    nb_status st = NB_OK;
    int32_t n_entries;
    if (!rd_i32(&r, &n_entries) || n_entries < 1 || n_entries > NB_IMATRIX_MAX_ENTRIES) {
        st = nb_fail(NB_ERR_FORMAT, "imatrix %s: not an imatrix file (GGUF or legacy .dat): the entry count "
                     "must be 1..%d", path, NB_IMATRIX_MAX_ENTRIES);
        goto out;
    }
    m->legacy = true;
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t nlen, ncall, nval;
        char name[NB_IMATRIX_MAX_NAME + 1];
        if (!rd_i32(&r, &nlen) || nlen < 1 || nlen > NB_IMATRIX_MAX_NAME || r.len - r.off < (size_t)nlen) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: entry %d: name length outside 1..%d or past the end of the file",
                         path, i, NB_IMATRIX_MAX_NAME);
            goto out;
        }
        memcpy(name, r.p + r.off, (size_t)nlen);
        name[nlen] = 0;
        r.off += (size_t)nlen;
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval) || nval < 1 || nval > NB_IMATRIX_MAX_VALUES ||
            (r.len - r.off) / 4 < (size_t)nval) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: entry '%s': value count outside 1..%d or past the end of the file",
                         path, name, NB_IMATRIX_MAX_VALUES);
            goto out;
        }
        if (nb_imatrix_find(m, name)) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: entry '%s' appears twice", path, name);
            goto out;
        }
        nb_imatrix_entry *e = nb_imatrix_add(m, name, nval);
        if (!e) { st = NB_ERR_NOMEM; goto out; }
        e->ncall = ncall;
        e->count = 1; /* values are means once divided by ncall */
        for (int32_t j = 0; j < nval; j++) {
            float v;
            memcpy(&v, r.p + r.off + 4 * (size_t)j, 4);
            if (!isfinite(v) || v < 0) {
                st = nb_fail(NB_ERR_FORMAT, "imatrix %s: entry '%s' value %d is %g (must be finite and >= 0)", path,
                             name, j, (double)v);
                goto out;
            }
            e->sum2[j] = ncall > 0 ? (double)v / ncall : (double)v;
        }
        r.off += 4 * (size_t)nval;
    }
    int32_t last_call, dlen;
    if (r.off < r.len && rd_i32(&r, &last_call) && rd_i32(&r, &dlen) && dlen >= 0 &&
        (size_t)dlen <= r.len - r.off) {
        m->chunks = last_call;
        size_t k = NB_MIN((size_t)dlen, sizeof m->dataset - 1);
        memcpy(m->dataset, r.p + r.off, k);
        m->dataset[k] = 0;
    }
out:
    free(data);
    return st;
}

static void put_i32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }

nb_status nb_imatrix_save_dat(const nb_imatrix *m, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return nb_fail(NB_ERR_IO, "imatrix: cannot create %s", tmp);
    put_i32(f, (int32_t)m->n);
    int32_t ncall = m->chunks > 0 ? m->chunks : 1;
    for (int64_t i = 0; i < m->n; i++) {
        const nb_imatrix_entry *e = &m->e[i];
        put_i32(f, (int32_t)strlen(e->name));
        fwrite(e->name, 1, strlen(e->name), f);
        put_i32(f, ncall);
        put_i32(f, (int32_t)e->n);
        for (int64_t j = 0; j < e->n; j++) {
            float v = e->count > 0 ? (float)(e->sum2[j] / e->count * ncall) : (float)ncall;
            fwrite(&v, 4, 1, f);
        }
    }
    put_i32(f, ncall);
    put_i32(f, (int32_t)strlen(m->dataset));
    fwrite(m->dataset, 1, strlen(m->dataset), f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad) {
        remove(tmp);
        return nb_fail(NB_ERR_IO, "imatrix: cannot write %s", path);
    }
    nb_status st = nb_file_commit(tmp, path); /* fsync, rename, fsync the directory */
    if (st != NB_OK) remove(tmp);
    return st;
}

/* ---- GGUF ------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf, size_t *stem) {
    size_t n = strlen(s), k = strlen(suf);
    if (n <= k || strcmp(s + n - k, suf)) return false;
    *stem = n - k;
    return true;
}

static nb_status load_gguf(const char *path, nb_imatrix *m) {
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_status st = NB_OK;
    const char *type = NULL;
    if (nb_gguf_get_str(g, "general.type", &type) != NB_OK || strcmp(type, "imatrix")) {
        st = nb_fail(NB_ERR_FORMAT, "imatrix %s: a GGUF file without general.type = \"imatrix\" (a model?)", path);
        goto out;
    }
    int64_t v;
    if (nb_gguf_get_int_or(g, "imatrix.chunk_count", 0, &v) == NB_OK) m->chunks = (int32_t)v;
    if (nb_gguf_get_int_or(g, "imatrix.chunk_size", 0, &v) == NB_OK) m->chunk_size = (int32_t)v;
    const nb_gguf_value *ds = nb_gguf_find(g, "imatrix.datasets");
    if (ds && ds->type == NB_GGUF_ARRAY && ds->arr_type == NB_GGUF_STRING && ds->n > 0)
        snprintf(m->dataset, sizeof m->dataset, "%.*s", (int)NB_MIN(ds->lens[0], 500), ds->strs[0]);
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        const nb_tensor *t = nb_gguf_tensor(g, i);
        size_t stem;
        if (!ends_with(t->name, ".in_sum2", &stem)) continue;
        char name[NB_IMATRIX_MAX_NAME + 1], cname[NB_IMATRIX_MAX_NAME + 16];
        if (stem > NB_IMATRIX_MAX_NAME) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: tensor name '%s' too long", path, t->name);
            goto out;
        }
        memcpy(name, t->name, stem);
        name[stem] = 0;
        snprintf(cname, sizeof cname, "%s.counts", name);
        const nb_tensor *c = nb_gguf_find_tensor(g, cname);
        if (!c) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: '%s' has no matching '%s'", path, t->name, cname);
            goto out;
        }
        if (t->type != NB_F32 || c->type != NB_F32 || nb_tensor_nelem(c) < 1) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: '%s' / '%s' must be F32 with at least one count", path,
                         t->name, cname);
            goto out;
        }
        if (nb_tensor_nelem(c) > 1 || t->ne[1] > 1) {
            st = nb_fail(NB_ERR_UNSUPPORTED, "imatrix %s: '%s' has per-expert data (%lld experts); MoE models are "
                         "not supported", path, name, (long long)t->ne[1]);
            goto out;
        }
        nb_imatrix_entry *e = nb_imatrix_add(m, name, t->ne[0]);
        if (!e) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: entry '%s' of %lld values (allowed 1..%d)", path, name,
                         (long long)t->ne[0], NB_IMATRIX_MAX_VALUES);
            goto out;
        }
        float cnt;
        memcpy(&cnt, c->data, 4);
        if (!isfinite(cnt) || cnt < 0) {
            st = nb_fail(NB_ERR_FORMAT, "imatrix %s: '%s' count %g is not a finite count", path, cname, (double)cnt);
            goto out;
        }
        e->count = cnt;
        e->ncall = m->chunks;
        const float *s = t->data;
        for (int64_t j = 0; j < e->n; j++) {
            float x;
            memcpy(&x, s + j, 4);
            if (!isfinite(x) || x < 0) {
                st = nb_fail(NB_ERR_FORMAT, "imatrix %s: '%s' value %lld is %g (must be finite and >= 0)", path,
                             t->name, (long long)j, (double)x);
                goto out;
            }
            e->sum2[j] = x;
        }
    }
    if (!m->n) st = nb_fail(NB_ERR_FORMAT, "imatrix %s: no '<name>.in_sum2' tensors", path);
out:
    nb_gguf_close(g);
    return st;
}

nb_status nb_imatrix_save_gguf(const nb_imatrix *m, const char *path) {
    nb_gguf_writer *w;
    NB_TRY(nb_gguf_writer_create(&w));
    nb_status st = nb_gguf_set_str(w, "general.type", "imatrix");
    const char *ds[1] = {m->dataset};
    uint64_t dl[1] = {strlen(m->dataset)};
    if (st == NB_OK) st = nb_gguf_set_arr_str(w, "imatrix.datasets", ds, dl, 1);
    if (st == NB_OK) st = nb_gguf_set_u32(w, "imatrix.chunk_count", (uint32_t)NB_MAX(m->chunks, 0));
    if (st == NB_OK) st = nb_gguf_set_u32(w, "imatrix.chunk_size", (uint32_t)NB_MAX(m->chunk_size, 0));
    float *buf = NULL;
    for (int64_t i = 0; st == NB_OK && i < m->n; i++) {
        const nb_imatrix_entry *e = &m->e[i];
        char name[NB_IMATRIX_MAX_NAME + 16];
        free(buf);
        buf = nb_malloc((size_t)e->n * sizeof(float));
        if (!buf) { st = NB_ERR_NOMEM; break; }
        for (int64_t j = 0; j < e->n; j++) buf[j] = (float)e->sum2[j];
        int64_t ne[2] = {e->n, 1};
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        st = nb_gguf_writer_add_tensor(w, name, NB_F32, 2, ne, buf);
        float cnt = (float)e->count;
        int64_t ne1[2] = {1, 1};
        snprintf(name, sizeof name, "%s.counts", e->name);
        if (st == NB_OK) st = nb_gguf_writer_add_tensor(w, name, NB_F32, 2, ne1, &cnt);
    }
    free(buf);
    if (st == NB_OK) st = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    return st;
}

nb_status nb_imatrix_load(const char *path, nb_imatrix *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return nb_fail(NB_ERR_NOT_FOUND, "imatrix file '%s' not found", path);
    char mg[4] = {0};
    bool gguf = fread(mg, 1, 4, f) == 4 && !memcmp(mg, "GGUF", 4);
    fclose(f);
    nb_status st = gguf ? load_gguf(path, out) : load_dat(path, out);
    if (st != NB_OK) nb_imatrix_free(out);
    return st;
}

nb_status nb_imatrix_check(const nb_imatrix *m, const nb_source *src, const char *path) {
    int64_t matched = 0;
    for (int64_t i = 0; i < m->n; i++) {
        const nb_imatrix_entry *e = &m->e[i];
        const nb_tensor *t = nb_source_find(src, e->name);
        if (!t || t->n_dims < 2)
            return nb_fail(NB_ERR_INVALID, "imatrix %s: entry '%s' names no weight matrix of %s: the imatrix was "
                           "made for another model", path, e->name, src->path);
        if (t->ne[0] != e->n)
            return nb_fail(NB_ERR_INVALID, "imatrix %s: entry '%s' has %lld values but the tensor's rows have %lld "
                           "columns: the imatrix was made for another model", path, e->name, (long long)e->n,
                           (long long)t->ne[0]);
        matched++;
    }
    if (!matched) return nb_fail(NB_ERR_INVALID, "imatrix %s: no entries", path);
    return NB_OK;
}

/* ---- quantize --imatrix ------------------------------------------------------ */

void nb_imatrix_row_to_float(const nb_tensor *t, int64_t row, float *out) {
    const int64_t n = t->ne[0];
    if (t->type == NB_F32) {
        memcpy(out, (const float *)t->data + row * n, (size_t)n * sizeof(float));
    } else if (t->type == NB_F16) {
        const uint16_t *h = (const uint16_t *)t->data + row * n;
        for (int64_t i = 0; i < n; i++) out[i] = nb_fp16_to_fp32(h[i]);
    } else if (t->type == NB_BF16) {
        const uint16_t *h = (const uint16_t *)t->data + row * n;
        for (int64_t i = 0; i < n; i++) out[i] = nb_bf16_to_fp32(h[i]);
    } else {
        const nb_qtype *q = nb_qtype_get(t->type);
        uint64_t rb = 0;
        nb_dtype_row_bytes(t->type, (uint64_t)n, &rb);
        q->to_float((const uint8_t *)t->data + (uint64_t)row * rb, out, n);
    }
}

typedef struct wjob {
    const nb_tensor *src;
    nb_dtype type;
    uint8_t *dst;
    uint64_t dst_rb;
    const float *qw;
    float *scratch;
    double *e2, *r2;
} wjob;

static void wjob_run(void *arg, int ith, int nth) {
    wjob *j = arg;
    int64_t lo, hi, n = j->src->ne[0];
    nb_split(nb_tensor_rows(j->src), ith, nth, &lo, &hi);
    float *x = j->scratch + (size_t)ith * 2 * (size_t)n, *y = x + n;
    const nb_qtype *q = nb_qtype_get(j->type);
    double e2 = 0, r2 = 0;
    for (int64_t r = lo; r < hi; r++) {
        nb_imatrix_row_to_float(j->src, r, x);
        uint8_t *d = j->dst + (uint64_t)r * j->dst_rb;
        nb_quant_row_weighted(j->type, x, d, n, j->qw);
        q->to_float(d, y, n);
        for (int64_t i = 0; i < n; i++) {
            double df = (double)y[i] - x[i];
            e2 += df * df;
            r2 += (double)x[i] * x[i];
        }
    }
    j->e2[ith] = e2;
    j->r2[ith] = r2;
}

nb_status nb_imatrix_convert(const nb_imatrix_entry *e, const nb_tensor *src, nb_dtype type, nb_pool *pool, void *dst,
                             uint64_t nbytes, double *rel_rms, bool *handled) {
    *handled = false;
    const int64_t n = src->ne[0];
    if (e->n != n)
        return nb_fail(NB_ERR_INVALID, "imatrix entry '%s' has %lld values, the tensor's rows %lld", e->name,
                       (long long)e->n, (long long)n);
    bool k = type == NB_Q2_K || type == NB_Q3_K || type == NB_Q4_K || type == NB_Q5_K || type == NB_Q6_K;
    bool legacy = type == NB_Q4_0 || type == NB_Q4_1 || type == NB_Q5_0 || type == NB_Q5_1;
    if (!(k && n % 256 == 0) && !(legacy && n % 32 == 0))
        return NB_OK; /* no weighted path for this type: RTN */
    uint64_t rb;
    if (!nb_dtype_row_bytes(type, (uint64_t)n, &rb) || rb * (uint64_t)nb_tensor_rows(src) != nbytes)
        return nb_fail(NB_ERR_INVALID, "tensor '%s': %llu bytes do not hold %lld rows of %s", e->name,
                       (unsigned long long)nbytes, (long long)nb_tensor_rows(src), nb_dtype_name(type));
    int nth = pool ? nb_pool_size(pool) : 1;
    wjob j = {.src = src, .type = type, .dst = dst, .dst_rb = rb};
    float *qw = nb_malloc((size_t)n * sizeof(float));
    j.scratch = nb_malloc((size_t)nth * 2 * (size_t)n * sizeof(float));
    j.e2 = nb_calloc((size_t)nth * 2, sizeof(double));
    if (!qw || !j.scratch || !j.e2) {
        free(qw);
        free(j.scratch);
        free(j.e2);
        return NB_ERR_NOMEM;
    }
    j.r2 = j.e2 + nth;
    nb_imatrix_values(e, qw);
    j.qw = qw;
    if (pool && nth > 1) nb_pool_run(pool, wjob_run, &j);
    else wjob_run(&j, 0, 1);
    double e2 = 0, r2 = 0;
    for (int i = 0; i < nth; i++) {
        e2 += j.e2[i];
        r2 += j.r2[i];
    }
    *rel_rms = r2 > 0 ? sqrt(e2 / r2) : 0;
    *handled = true;
    free(qw);
    free(j.scratch);
    free(j.e2);
    return NB_OK;
}
