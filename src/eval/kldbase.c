/* The baseline file of eval kld (format in kldbase.h). */
#include "eval/kldbase.h"

#include "base/file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kldbase.c writes host-order fields; the format is little-endian"
#endif

#define MAGIC "NBKLBASE"
#define HDR_FIXED 172
#define PATH_MAX_LEN 4095

struct nb_kldbase_writer {
    FILE *f;
    char *path, *tmp;
    nb_kldbase_hdr h;
    int64_t written;
    int32_t *ids;
    float *lp;
};

struct nb_kldbase_reader {
    FILE *f;
    char *path;
    nb_kldbase_hdr h;
    int32_t *tokens;
    int64_t read;
    float *logits;
    int32_t *ids;
    float *lp;
};

int64_t nb_kldbase_per_chunk(int32_t ctx) { return (int64_t)ctx - 1 - ctx / 2; }

static uint64_t record_bytes(const nb_kldbase_hdr *h) {
    return h->mode == NB_KLDBASE_FULL ? 4u * (uint64_t)h->n_vocab : 16u + 8u * (uint64_t)h->k;
}

/* ---- top-K ------------------------------------------------------------- */

/* a ranks before b: higher logit, then lower id */
static bool before(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

/* Restores the heap (root = the worst kept) below p over ids[0..m). */
static void sift_down(const float *l, int32_t *ids, int32_t m, int32_t p) {
    for (;;) {
        int32_t a = 2 * p + 1, b = a + 1, w = p;
        if (a < m && before(l, ids[w], ids[a])) w = a;
        if (b < m && before(l, ids[w], ids[b])) w = b;
        if (w == p) return;
        int32_t t = ids[p]; ids[p] = ids[w]; ids[w] = t;
        p = w;
    }
}

int32_t nb_kldbase_topk(const float *l, int32_t n, int32_t k, int32_t *ids) {
    /* min-heap of the best k so far, root = the worst of them */
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (isnan(l[i])) continue;
        if (m < k) {
            int32_t c = m++;
            ids[c] = i;
            while (c > 0) {
                int32_t p = (c - 1) / 2;
                if (!before(l, ids[p], ids[c])) break;
                int32_t t = ids[p]; ids[p] = ids[c]; ids[c] = t;
                c = p;
            }
        } else if (k > 0 && before(l, i, ids[0])) {
            ids[0] = i;
            sift_down(l, ids, m, 0);
        }
    }
    /* heap sort: repeatedly move the worst to the end */
    for (int32_t end = m - 1; end > 0; end--) {
        int32_t t = ids[0]; ids[0] = ids[end]; ids[end] = t;
        sift_down(l, ids, end, 0);
    }
    return m;
}

/* ---- writer ------------------------------------------------------------ */

static void put32(uint8_t *b, uint32_t v) { memcpy(b, &v, 4); }
static void put64(uint8_t *b, int64_t v) { memcpy(b, &v, 8); }

nb_status nb_kldbase_create(const char *path, nb_kldbase_hdr *h, const int32_t *tokens, nb_kldbase_writer **out) {
    *out = NULL;
    if (h->mode == NB_KLDBASE_FULL) h->k = h->n_vocab;
    if (h->n_vocab <= 0 || h->ctx < 4 || h->k < 1 || h->k > h->n_vocab || h->n_chunks < 1)
        return nb_fail(NB_ERR_INVALID, "%s: bad baseline file parameters (n_vocab %d, ctx %d, k %d, chunks %lld)", path,
                       h->n_vocab, h->ctx, h->k, (long long)h->n_chunks);
    h->n_positions = h->n_chunks * nb_kldbase_per_chunk(h->ctx);
    size_t plen = strlen(h->model_path);
    if (plen > PATH_MAX_LEN) plen = PATH_MAX_LEN;
    nb_kldbase_writer *w = nb_calloc(1, sizeof *w);
    if (!w) return NB_ERR_NOMEM;
    w->h = *h;
    w->path = strdup(path);
    w->tmp = malloc(strlen(path) + 5);
    w->ids = nb_malloc((size_t)h->k * sizeof *w->ids);
    w->lp = nb_malloc((size_t)h->k * sizeof *w->lp);
    if (!w->path || !w->tmp || !w->ids || !w->lp) { nb_kldbase_abort(w); return NB_ERR_NOMEM; }
    sprintf(w->tmp, "%s.tmp", path);
    if (!(w->f = fopen(w->tmp, "wb"))) {
        nb_status st = nb_fail(NB_ERR_IO, "--save-base %s: cannot create: %s", w->tmp, strerror(errno));
        free(w->path); free(w->tmp); free(w->ids); free(w->lp); free(w);
        return st;
    }
    uint8_t hb[HDR_FIXED] = {0};
    memcpy(hb, MAGIC, 8);
    put32(hb + 8, NB_KLDBASE_VERSION);
    put32(hb + 12, h->mode);
    put32(hb + 16, (uint32_t)h->n_vocab);
    put32(hb + 20, (uint32_t)h->ctx);
    put32(hb + 24, (uint32_t)h->k);
    put64(hb + 32, h->n_tokens);
    put64(hb + 40, h->n_chunks);
    put64(hb + 48, h->n_positions);
    memcpy(hb + 56, h->text_sha, 32);
    memcpy(hb + 88, h->vocab_sha, 32);
    memcpy(hb + 120, h->model_sha, 32);
    memcpy(hb + 152, h->model_type, strnlen(h->model_type, 16));
    put32(hb + 168, (uint32_t)plen);
    size_t nt = (size_t)h->n_chunks * (size_t)h->ctx;
    if (fwrite(hb, 1, HDR_FIXED, w->f) != HDR_FIXED || fwrite(h->model_path, 1, plen, w->f) != plen ||
        fwrite(tokens, sizeof *tokens, nt, w->f) != nt) {
        nb_status st = nb_fail(NB_ERR_IO, "--save-base %s: write failed: %s", w->tmp, strerror(errno));
        nb_kldbase_abort(w);
        return st;
    }
    *out = w;
    return NB_OK;
}

nb_status nb_kldbase_write(nb_kldbase_writer *w, const float *l, int32_t next) {
    if (w->written >= w->h.n_positions)
        return nb_fail(NB_ERR_INTERNAL, "--save-base %s: more positions than the %lld announced", w->path,
                       (long long)w->h.n_positions);
    int32_t nv = w->h.n_vocab;
    bool ok;
    if (w->h.mode == NB_KLDBASE_FULL) {
        ok = fwrite(l, sizeof *l, (size_t)nv, w->f) == (size_t)nv;
    } else {
        if (next < 0 || next >= nv) return nb_fail(NB_ERR_RANGE, "--save-base: next token %d outside 0..%d", next, nv - 1);
        int32_t k = w->h.k;
        int32_t got = nb_kldbase_topk(l, nv, k, w->ids);
        if (got < k) return nb_fail(NB_ERR_INVALID, "--save-base: only %d of %d logits are numbers (K = %d)", got, nv, k);
        double m = l[w->ids[0]], s = 0;
        for (int32_t i = 0; i < nv; i++)
            if (!isnan(l[i])) s += exp((double)l[i] - m);
        double lse = m + log(s);
        /* tail = mass outside the top K, summed directly (accurate when tiny) */
        double tail = 0;
        int32_t cut = w->ids[k - 1];
        for (int32_t i = 0; i < nv; i++) /* outside the top K: ranked after its last member */
            if (!isnan(l[i]) && before(l, cut, i)) tail += exp((double)l[i] - lse);
        for (int32_t i = 0; i < k; i++) w->lp[i] = (float)((double)l[w->ids[i]] - lse);
        double nll = lse - (double)l[next];
        ok = fwrite(&nll, 8, 1, w->f) == 1 && fwrite(&tail, 8, 1, w->f) == 1 &&
             fwrite(w->ids, 4, (size_t)k, w->f) == (size_t)k && fwrite(w->lp, 4, (size_t)k, w->f) == (size_t)k;
    }
    if (!ok) return nb_fail(NB_ERR_IO, "--save-base %s: write failed: %s", w->tmp, strerror(errno));
    w->written++;
    return NB_OK;
}

void nb_kldbase_abort(nb_kldbase_writer *w) {
    if (!w) return;
    if (w->f) {
        fclose(w->f);
        remove(w->tmp);
    }
    free(w->path);
    free(w->tmp);
    free(w->ids);
    free(w->lp);
    free(w);
}

nb_status nb_kldbase_finish(nb_kldbase_writer *w) {
    nb_status st = NB_OK;
    if (w->written != w->h.n_positions)
        st = nb_fail(NB_ERR_INTERNAL, "--save-base %s: %lld of %lld positions written", w->path,
                     (long long)w->written, (long long)w->h.n_positions);
    else if (fflush(w->f) != 0 || ferror(w->f))
        st = nb_fail(NB_ERR_IO, "--save-base %s: write failed: %s", w->tmp, strerror(errno));
    if (st != NB_OK) { nb_kldbase_abort(w); return st; }
    int rc = fclose(w->f);
    w->f = NULL;
    if (rc != 0) st = nb_fail(NB_ERR_IO, "--save-base %s: cannot complete the file: %s", w->path, strerror(errno));
    else if ((st = nb_file_commit(w->tmp, w->path)) != NB_OK) /* fsync, rename, fsync the directory */
        nb_fail_wrap(st, "--save-base: ");
    if (st != NB_OK) remove(w->tmp);
    free(w->path); free(w->tmp); free(w->ids); free(w->lp); free(w);
    return st;
}

/* ---- reader ------------------------------------------------------------ */

static uint32_t get32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static int64_t get64(const uint8_t *b) { int64_t v; memcpy(&v, b, 8); return v; }

nb_status nb_kldbase_open(const char *path, nb_kldbase_reader **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return nb_fail(errno == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "--base-logits %s: cannot open: %s", path,
                       strerror(errno));
    nb_kldbase_reader *r = nb_calloc(1, sizeof *r);
    if (!r) { fclose(f); return NB_ERR_NOMEM; }
    r->f = f;
    nb_status st = NB_OK;
    uint8_t hb[HDR_FIXED];
    nb_kldbase_hdr *h = &r->h;
    if (fread(hb, 1, HDR_FIXED, f) != HDR_FIXED || memcmp(hb, MAGIC, 8) != 0) {
        st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: not a baseline file (no 'NBKLBASE' header; write one with "
                     "--save-base)", path);
        goto fail;
    }
    uint32_t ver = get32(hb + 8);
    if (ver != NB_KLDBASE_VERSION) {
        st = nb_fail(NB_ERR_UNSUPPORTED, "--base-logits %s: format version %u (this nibble reads %d)", path, ver,
                     NB_KLDBASE_VERSION);
        goto fail;
    }
    h->mode = get32(hb + 12);
    h->n_vocab = (int32_t)get32(hb + 16);
    h->ctx = (int32_t)get32(hb + 20);
    h->k = (int32_t)get32(hb + 24);
    h->n_tokens = get64(hb + 32);
    h->n_chunks = get64(hb + 40);
    h->n_positions = get64(hb + 48);
    memcpy(h->text_sha, hb + 56, 32);
    memcpy(h->vocab_sha, hb + 88, 32);
    memcpy(h->model_sha, hb + 120, 32);
    memcpy(h->model_type, hb + 152, 16);
    h->model_type[16] = '\0';
    uint32_t plen = get32(hb + 168);
    if (h->mode > NB_KLDBASE_TOPK || h->n_vocab <= 0 || h->n_vocab > (1 << 24) || h->ctx < 4 || h->ctx > (1 << 20) ||
        h->k < 1 || h->k > h->n_vocab || (h->mode == NB_KLDBASE_FULL && h->k != h->n_vocab) || h->n_chunks < 1 ||
        h->n_chunks > ((int64_t)1 << 40) / h->ctx || h->n_tokens < h->n_chunks * h->ctx ||
        h->n_positions != h->n_chunks * nb_kldbase_per_chunk(h->ctx) || plen > PATH_MAX_LEN) {
        st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: inconsistent header (mode %u, n_vocab %d, ctx %d, k %d, "
                     "chunks %lld, positions %lld, path length %u)", path, h->mode, h->n_vocab, h->ctx, h->k,
                     (long long)h->n_chunks, (long long)h->n_positions, plen);
        goto fail;
    }
    if (fread(h->model_path, 1, plen, f) != plen) {
        st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: truncated in the header", path);
        goto fail;
    }
    h->model_path[plen] = '\0';
    /* the exact size the header implies */
    uint64_t nt = (uint64_t)h->n_chunks * (uint64_t)h->ctx, recs, want;
    if (!nb_mul_ok((uint64_t)h->n_positions, record_bytes(h), &recs) ||
        !nb_add_ok(HDR_FIXED + plen + 4 * nt, recs, &want)) {
        st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: the header's sizes overflow", path);
        goto fail;
    }
    if (fseeko(f, 0, SEEK_END) != 0) { st = nb_fail(NB_ERR_IO, "--base-logits %s: cannot seek", path); goto fail; }
    uint64_t have = (uint64_t)ftello(f);
    if (have != want) {
        st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: %llu bytes, the header implies %llu (truncated or not a "
                     "complete --save-base file)", path, (unsigned long long)have, (unsigned long long)want);
        goto fail;
    }
    fseeko(f, (off_t)(HDR_FIXED + plen), SEEK_SET);
    r->tokens = nb_malloc(nt * sizeof *r->tokens);
    if (!r->tokens) { st = NB_ERR_NOMEM; goto fail; }
    if (fread(r->tokens, 4, nt, f) != nt) { st = nb_fail(NB_ERR_IO, "--base-logits %s: read failed", path); goto fail; }
    for (uint64_t i = 0; i < nt; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= h->n_vocab) {
            st = nb_fail(NB_ERR_FORMAT, "--base-logits %s: token %llu: id %d outside 0..%d", path,
                         (unsigned long long)i, r->tokens[i], h->n_vocab - 1);
            goto fail;
        }
    if (h->mode == NB_KLDBASE_FULL) r->logits = nb_malloc((size_t)h->n_vocab * sizeof *r->logits);
    else {
        r->ids = nb_malloc((size_t)h->k * sizeof *r->ids);
        r->lp = nb_malloc((size_t)h->k * sizeof *r->lp);
    }
    if (!r->logits && !(r->ids && r->lp)) { st = NB_ERR_NOMEM; goto fail; }
    r->path = strdup(path);
    if (!r->path) { st = NB_ERR_NOMEM; goto fail; }
    *out = r;
    return NB_OK;
fail:
    nb_kldbase_close(r);
    return st;
}

const nb_kldbase_hdr *nb_kldbase_header(const nb_kldbase_reader *r) { return &r->h; }
const int32_t *nb_kldbase_tokens(const nb_kldbase_reader *r) { return r->tokens; }

nb_status nb_kldbase_read(nb_kldbase_reader *r, nb_kldbase_pos *p) {
    memset(p, 0, sizeof *p);
    const nb_kldbase_hdr *h = &r->h;
    if (r->read >= h->n_positions)
        return nb_fail(NB_ERR_RANGE, "--base-logits %s: all %lld positions already read", r->path,
                       (long long)h->n_positions);
    bool ok;
    if (h->mode == NB_KLDBASE_FULL) {
        ok = fread(r->logits, 4, (size_t)h->n_vocab, r->f) == (size_t)h->n_vocab;
        p->logits = r->logits;
    } else {
        ok = fread(&p->nll, 8, 1, r->f) == 1 && fread(&p->tail, 8, 1, r->f) == 1 &&
             fread(r->ids, 4, (size_t)h->k, r->f) == (size_t)h->k && fread(r->lp, 4, (size_t)h->k, r->f) == (size_t)h->k;
        p->ids = r->ids;
        p->lp = r->lp;
        if (ok) {
            bool bad = !(p->nll >= 0 && p->nll < 1e6) || !(p->tail >= 0 && p->tail <= 1.0 + 1e-6);
            for (int32_t i = 0; i < h->k && !bad; i++)
                bad = r->ids[i] < 0 || r->ids[i] >= h->n_vocab || isnan(r->lp[i]) || r->lp[i] > 1e-4f;
            if (bad)
                return nb_fail(NB_ERR_FORMAT, "--base-logits %s: position %lld: a value out of range (nll %g, tail %g, "
                               "or a token id / log-probability)", r->path, (long long)r->read, p->nll, p->tail);
        }
    }
    if (!ok) return nb_fail(NB_ERR_IO, "--base-logits %s: read failed at position %lld", r->path, (long long)r->read);
    r->read++;
    return NB_OK;
}

void nb_kldbase_close(nb_kldbase_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->path);
    free(r->tokens);
    free(r->logits);
    free(r->ids);
    free(r->lp);
    free(r);
}
