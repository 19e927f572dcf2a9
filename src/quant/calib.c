/* Calibration options, data and statistics (see calib.h). */
#include "quant/calib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/sha256.h"
#include "quant/qla.h"

#define CALIB_MAX_BYTES ((size_t)1 << 30)

void nb_calib_opts_default(nb_calib_opts *o) {
    memset(o, 0, sizeof *o);
    o->samples = 128;
    o->seq_len = 512;
    o->damp = 0.01;
    o->alpha = 0.5;
}

const char *nb_calib_method_name(nb_calib_method m) {
    switch (m) {
    case NB_CALIB_GPTQ: return "gptq";
    case NB_CALIB_AWQ: return "awq";
    case NB_CALIB_SMOOTHQUANT: return "smoothquant";
    default: return "rtn";
    }
}

static const struct { const char *name; bool value; } flags[] = {
    {"--method", true},      {"--calib", true},     {"--calib-samples", true}, {"--calib-seq-len", true},
    {"--seed", true},        {"--calib-report", false}, {"--damp", true},       {"--desc-act", false},
    {"--static-groups", false}, {"--alpha", true},  {"--format", true},
};

bool nb_calib_is_flag(const char *flag, bool *takes_value) {
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strcmp(flag, flags[i].name)) {
            if (takes_value) *takes_value = flags[i].value;
            return true;
        }
    return false;
}

static nb_status parse_num(const char *flag, const char *val, double lo, double hi, double *out) {
    char *end;
    double v = strtod(val, &end);
    if (!*val || *end || !(v >= lo && v <= hi))
        return nb_fail(NB_ERR_INVALID, "%s: '%s' is not a number in %g..%g", flag, val, lo, hi);
    *out = v;
    return NB_OK;
}

nb_status nb_calib_parse_flag(nb_calib_opts *o, const char *flag, const char *val) {
    double v;
    if (!strcmp(flag, "--method")) {
        if (!strcmp(val, "rtn")) o->method = NB_CALIB_RTN;
        else if (!strcmp(val, "gptq")) o->method = NB_CALIB_GPTQ;
        else if (!strcmp(val, "awq")) o->method = NB_CALIB_AWQ;
        else if (!strcmp(val, "smoothquant")) o->method = NB_CALIB_SMOOTHQUANT;
        else return nb_fail(NB_ERR_INVALID, "--method: '%s' (allowed rtn, gptq, awq, smoothquant)", val);
    } else if (!strcmp(flag, "--calib")) {
        o->calib = val;
    } else if (!strcmp(flag, "--calib-samples")) {
        NB_TRY(parse_num(flag, val, 1, 1 << 20, &v));
        o->samples = (int64_t)v;
    } else if (!strcmp(flag, "--calib-seq-len")) {
        NB_TRY(parse_num(flag, val, 8, 1 << 16, &v));
        o->seq_len = (int64_t)v;
    } else if (!strcmp(flag, "--seed")) {
        NB_TRY(parse_num(flag, val, 0, 9007199254740992.0, &v));
        o->seed = (uint64_t)v;
    } else if (!strcmp(flag, "--calib-report")) {
        o->report = true;
    } else if (!strcmp(flag, "--damp")) {
        NB_TRY(parse_num(flag, val, 1e-6, 10, &o->damp));
    } else if (!strcmp(flag, "--desc-act")) {
        o->desc_act = true;
    } else if (!strcmp(flag, "--static-groups")) {
        o->static_groups = true;
    } else if (!strcmp(flag, "--alpha")) {
        NB_TRY(parse_num(flag, val, 0, 1, &o->alpha));
    } else if (!strcmp(flag, "--format")) {
        if (!strcmp(val, "gguf-compat")) o->gguf_compat = true;
        else if (!strcmp(val, "nibble")) o->gguf_compat = false;
        else return nb_fail(NB_ERR_INVALID, "--format: '%s' (allowed nibble, gguf-compat)", val);
    } else {
        return nb_fail(NB_ERR_INVALID, "unknown calibration flag '%s'", flag);
    }
    return NB_OK;
}

void nb_calib_usage(FILE *f) {
    fprintf(f,
            "  --method M         rtn (default), gptq (W4G*, Q4_0/Q4_1/Q4_K), awq (W4G*, ...), smoothquant (W8A8);\n"
            "                     calibrated quantization, see docs/quantize.md\n"
            "  --calib FILE       calibration data: plain text, or JSONL with \"text\" or \"messages\" per line\n"
            "  --calib-samples N  samples (default 128); --calib-seq-len L tokens each (default 512); --seed S\n"
            "  --calib-report     print the sample length histogram and the duplicate rate\n"
            "  --damp F           GPTQ dampening, fraction of the mean Hessian diagonal (default 0.01)\n"
            "  --desc-act         GPTQ act order (columns by decreasing Hessian diagonal; implies --static-groups)\n"
            "  --static-groups    GPTQ group scales fitted on the original weights before any update\n"
            "  --alpha A          SmoothQuant migration strength (default 0.5)\n"
            "  --format F         nibble (default) or gguf-compat (GPTQ into Q4_0 / Q4_1 / Q4_K)\n");
}

/* ---- documents -------------------------------------------------------------- */

void nb_calib_docs_free(nb_calib_docs *d) {
    if (!d) return;
    for (int64_t i = 0; i < d->n; i++) {
        free(d->d[i].text);
        for (int k = 0; k < d->d[i].n_msgs; k++) {
            free(d->d[i].roles[k]);
            free(d->d[i].contents[k]);
        }
        free(d->d[i].roles);
        free(d->d[i].contents);
    }
    free(d->d);
    memset(d, 0, sizeof *d);
}

static nb_status add_doc(nb_calib_docs *d, nb_calib_doc *doc) {
    nb_calib_doc *p = realloc(d->d, (size_t)(d->n + 1) * sizeof *p);
    if (!p) return NB_ERR_NOMEM;
    d->d = p;
    d->d[d->n++] = *doc;
    return NB_OK;
}

static nb_status parse_line(const char *path, int64_t lineno, const char *line, size_t len, nb_calib_doc *doc) {
    memset(doc, 0, sizeof *doc);
    json_error_t err;
    json_t *o = json_loadb(line, len, 0, &err);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return nb_fail(NB_ERR_INVALID, "%s:%lld: not a JSON object (%s)", path, (long long)lineno,
                       o ? "another JSON value" : err.text);
    }
    json_t *t = json_object_get(o, "text"), *m = json_object_get(o, "messages");
    nb_status st = NB_OK;
    if (json_is_string(t)) {
        doc->len = json_string_length(t);
        doc->text = nb_strndup(json_string_value(t), doc->len);
        if (!doc->text) st = NB_ERR_NOMEM;
    } else if (json_is_array(m) && json_array_size(m) > 0 && json_array_size(m) < 4096) {
        size_t n = json_array_size(m);
        doc->roles = calloc(n, sizeof(char *));
        doc->contents = calloc(n, sizeof(char *));
        if (!doc->roles || !doc->contents) st = NB_ERR_NOMEM;
        for (size_t i = 0; st == NB_OK && i < n; i++) {
            json_t *msg = json_array_get(m, i);
            json_t *r = json_object_get(msg, "role"), *c = json_object_get(msg, "content");
            if (!json_is_string(r) || !json_is_string(c)) {
                st = nb_fail(NB_ERR_INVALID, "%s:%lld: messages[%zu] needs string \"role\" and \"content\"", path,
                             (long long)lineno, i);
                break;
            }
            doc->roles[i] = strdup(json_string_value(r));
            doc->contents[i] = strdup(json_string_value(c));
            doc->n_msgs = (int)i + 1;
        }
    } else {
        st = nb_fail(NB_ERR_INVALID, "%s:%lld: a JSONL calibration line needs \"text\" (string) or \"messages\" "
                     "(non-empty array)", path, (long long)lineno);
    }
    json_decref(o);
    return st;
}

nb_status nb_calib_read(const char *path, nb_calib_docs *out) {
    memset(out, 0, sizeof *out);
    char *data;
    size_t len;
    NB_TRY(nb_read_file(path, CALIB_MAX_BYTES, &data, &len));
    uint8_t dg[32];
    nb_sha256(data, len, dg);
    nb_sha256_hex(dg, out->sha256);
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) i++;
    nb_status st = NB_OK;
    if (i < len && data[i] == '{') {
        out->jsonl = true;
        int64_t lineno = 0;
        size_t p = 0;
        while (st == NB_OK && p < len) {
            size_t e = p;
            while (e < len && data[e] != '\n') e++;
            lineno++;
            size_t q = p;
            while (q < e && (data[q] == ' ' || data[q] == '\t' || data[q] == '\r')) q++;
            if (q < e) {
                nb_calib_doc doc;
                st = parse_line(path, lineno, data + p, e - p, &doc);
                if (st == NB_OK) st = add_doc(out, &doc);
                else {
                    free(doc.text);
                    for (int k = 0; k < doc.n_msgs; k++) {
                        free(doc.roles[k]);
                        free(doc.contents[k]);
                    }
                    free(doc.roles);
                    free(doc.contents);
                }
            }
            p = e + 1;
        }
        free(data);
    } else {
        nb_calib_doc doc = {.text = data, .len = len};
        st = add_doc(out, &doc);
        if (st != NB_OK) free(data);
    }
    if (st == NB_OK && out->n == 0) st = nb_fail(NB_ERR_INVALID, "%s: no calibration text", path);
    if (st != NB_OK) nb_calib_docs_free(out);
    return st;
}

/* ---- sampling ------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void nb_calib_set_free(nb_calib_set *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) free(s->ids[i]);
    free(s->ids);
    free(s->len);
    memset(s, 0, sizeof *s);
}

static uint64_t hash_ids(const int32_t *p, int32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)p[i];
        h *= 1099511628211ull;
    }
    return h ^ (uint64_t)n;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

nb_status nb_calib_sample(int32_t *const *docs, const size_t *lens, int64_t n_docs, bool one_stream, int32_t bos,
                          int64_t n_samples, int64_t seq_len, uint64_t seed, nb_calib_set *out) {
    memset(out, 0, sizeof *out);
    out->n_docs = n_docs;
    int64_t body = bos >= 0 ? seq_len - 1 : seq_len;
    /* candidate windows: (doc, start, length) */
    int64_t n_cand = 0, total = 0;
    for (int64_t d = 0; d < n_docs; d++) {
        total += (int64_t)lens[d];
        n_cand += one_stream ? (int64_t)lens[d] / body : (lens[d] > 0);
    }
    if (one_stream && n_cand == 0 && total >= 1) n_cand = 1; /* shorter than one sample: use what there is */
    if (n_cand == 0 || total < 1)
        return nb_fail(NB_ERR_INVALID, "calibration data: %lld tokens make no sample (need at least 1 token of text)",
                       (long long)total);
    int64_t *cd = nb_malloc((size_t)n_cand * sizeof(int64_t)), *cs = nb_malloc((size_t)n_cand * sizeof(int64_t));
    if (!cd || !cs) {
        free(cd);
        free(cs);
        return NB_ERR_NOMEM;
    }
    int64_t k = 0;
    for (int64_t d = 0; d < n_docs && k < n_cand; d++) {
        if (one_stream) {
            int64_t nw = (int64_t)lens[d] / body;
            if (nw == 0 && lens[d] > 0) nw = 1;
            for (int64_t w = 0; w < nw && k < n_cand; w++, k++) {
                cd[k] = d;
                cs[k] = w * body;
            }
        } else if (lens[d] > 0) {
            cd[k] = d;
            cs[k++] = 0;
        }
    }
    n_cand = k;
    uint64_t rs = seed ^ 0x6e6962626c65ull;
    for (int64_t i = n_cand - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(splitmix(&rs) % (uint64_t)(i + 1));
        int64_t t = cd[i]; cd[i] = cd[j]; cd[j] = t;
        t = cs[i]; cs[i] = cs[j]; cs[j] = t;
    }
    int64_t n = NB_MIN(n_samples, n_cand);
    out->ids = nb_calloc((size_t)n, sizeof(int32_t *));
    out->len = nb_calloc((size_t)n, sizeof(int32_t));
    uint64_t *hs = nb_calloc((size_t)n, sizeof(uint64_t));
    nb_status st = out->ids && out->len && hs ? NB_OK : NB_ERR_NOMEM;
    for (int64_t i = 0; st == NB_OK && i < n; i++) {
        int64_t d = cd[i], s = cs[i];
        int64_t avail = (int64_t)lens[d] - s, m = NB_MIN(avail, body);
        if (!one_stream && avail > body) out->n_long++;
        int32_t L = (int32_t)(m + (bos >= 0));
        out->ids[i] = nb_malloc((size_t)L * sizeof(int32_t));
        if (!out->ids[i]) { st = NB_ERR_NOMEM; break; }
        if (bos >= 0) out->ids[i][0] = bos;
        memcpy(out->ids[i] + (bos >= 0), docs[d] + s, (size_t)m * sizeof(int32_t));
        out->len[i] = L;
        out->n = i + 1;
        out->n_tokens += L;
        if (L < seq_len / 8) out->n_short++;
        int bin = (int)NB_MIN(7, (int64_t)L * 8 / seq_len);
        out->hist[bin]++;
        hs[i] = hash_ids(out->ids[i], L);
    }
    if (st == NB_OK) {
        qsort(hs, (size_t)n, sizeof *hs, cmp_u64);
        for (int64_t i = 1; i < n; i++) out->n_dup += hs[i] == hs[i - 1];
    }
    free(hs);
    free(cd);
    free(cs);
    if (st != NB_OK) nb_calib_set_free(out);
    return st;
}

void nb_calib_set_report(const nb_calib_set *s, int64_t seq_len, bool report, FILE *f) {
    if (s->n < 100)
        NB_WARN("calibration: only %lld samples (fewer than 100): the statistics may not represent the model's use; "
                "give more text or a larger --calib-samples", (long long)s->n);
    if (s->n_dup)
        NB_WARN("calibration: %lld of %lld samples are duplicates (%.1f%%)", (long long)s->n_dup, (long long)s->n,
                100.0 * (double)s->n_dup / (double)s->n);
    if (s->n_short)
        NB_WARN("calibration: %lld samples are shorter than %lld tokens (1/8 of --calib-seq-len)",
                (long long)s->n_short, (long long)(seq_len / 8));
    if (s->n_long)
        NB_WARN("calibration: %lld documents were longer than %lld tokens and were cut", (long long)s->n_long,
                (long long)seq_len);
    if (!report) return;
    fprintf(f, "calibration: %lld samples, %lld tokens, from %lld documents; duplicates %.2f%%\n", (long long)s->n,
            (long long)s->n_tokens, (long long)s->n_docs, s->n ? 100.0 * (double)s->n_dup / (double)s->n : 0.0);
    fprintf(f, "length histogram (tokens):\n");
    for (int b = 0; b < 8; b++)
        fprintf(f, "  %5lld..%-5lld %6lld\n", (long long)(seq_len * b / 8),
                (long long)(b == 7 ? seq_len : seq_len * (b + 1) / 8 - 1), (long long)s->hist[b]);
}

/* ---- statistics ------------------------------------------------------------------ */

nb_status nb_calib_stats_init(nb_calib_stats *s, int64_t dim, bool want_h) {
    memset(s, 0, sizeof *s);
    s->dim = dim;
    s->sum2 = nb_calloc((size_t)dim, sizeof(double));
    s->sum_abs = nb_calloc((size_t)dim, sizeof(double));
    s->max_abs = nb_calloc((size_t)dim, sizeof(float));
    if (want_h) s->H = nb_calloc((size_t)(dim * dim), sizeof(double));
    if (want_h) s->hbuf = nb_malloc((size_t)(NB_CALIB_HBUF * dim) * sizeof(float));
    if (want_h) s->hscratch = nb_malloc((size_t)nb_qla_syrk_scratch(dim, NB_CALIB_HBUF) * sizeof(float));
    if (!s->sum2 || !s->sum_abs || !s->max_abs || (want_h && (!s->H || !s->hbuf || !s->hscratch))) {
        nb_calib_stats_free(s);
        return nb_fail(NB_ERR_NOMEM, "out of memory for the statistics of a %lld-wide input", (long long)dim);
    }
    return NB_OK;
}

void nb_calib_stats_free(nb_calib_stats *s) {
    if (!s) return;
    free(s->sum2);
    free(s->sum_abs);
    free(s->max_abs);
    free(s->H);
    free(s->hbuf);
    free(s->hscratch);
    memset(s, 0, sizeof *s);
}

void nb_calib_stats_reset(nb_calib_stats *s) {
    int64_t d = s->dim;
    memset(s->sum2, 0, (size_t)d * sizeof(double));
    memset(s->sum_abs, 0, (size_t)d * sizeof(double));
    memset(s->max_abs, 0, (size_t)d * sizeof(float));
    if (s->H) memset(s->H, 0, (size_t)(d * d) * sizeof(double));
    s->count = 0;
    s->n_nonfinite = 0;
    s->hbuf_n = 0;
}

void nb_calib_stats_flush(nb_calib_stats *s, nb_pool *pool) {
    if (s->H && s->hbuf_n) nb_qla_syrk_acc(s->H, s->dim, s->hbuf, s->hbuf_n, s->hscratch, pool);
    s->hbuf_n = 0;
}

void nb_calib_stats_add(nb_calib_stats *s, const float *x, int64_t n, nb_pool *pool) {
    const int64_t d = s->dim;
    for (int64_t t = 0; t < n; t++) {
        const float *r = x + t * d;
        bool ok = true;
        for (int64_t i = 0; i < d; i++)
            if (!isfinite(r[i])) { ok = false; break; }
        if (!ok) { s->n_nonfinite++; continue; }
        for (int64_t i = 0; i < d; i++) {
            double v = r[i];
            s->sum2[i] += v * v;
            s->sum_abs[i] += fabs(v);
            if (fabsf(r[i]) > s->max_abs[i]) s->max_abs[i] = fabsf(r[i]);
        }
        s->count += 1;
        if (s->H) {
            /* H += X^T X over the buffered tokens (upper triangle, float
             * tiles added in double, on the pool) */
            memcpy(s->hbuf + s->hbuf_n++ * d, r, (size_t)d * sizeof(float));
            if (s->hbuf_n == NB_CALIB_HBUF) nb_calib_stats_flush(s, pool);
        }
    }
}
