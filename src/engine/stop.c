/* Stop-string matching with hold-back (see stop.h). The held text never
 * contains a whole stop string, so a match can only end inside the newest
 * push; searching the whole hold buffer is still cheap (it is at most one
 * push + the longest stop string). */
#include "engine/stop.h"

#include <stdlib.h>
#include <string.h>

nb_status nb_stop_init(nb_stop *s, const char *const *strs, size_t n) {
    memset(s, 0, sizeof *s);
    if (n > NB_LIMIT_STOP_STRINGS) return nb_fail(NB_ERR_RANGE, "stop: %zu strings, at most %d allowed", n, NB_LIMIT_STOP_STRINGS);
    if (n && !strs) return nb_fail(NB_ERR_INVALID, "stop: %zu strings announced but none given", n);
    for (size_t i = 0; i < n; i++) {
        size_t l = strs[i] ? strlen(strs[i]) : 0;
        if (l == 0 || l > NB_LIMIT_STOP_LEN) {
            nb_stop_free(s);
            return nb_fail(NB_ERR_RANGE, "stop[%zu]: length %zu, allowed 1..%d bytes", i, l, NB_LIMIT_STOP_LEN);
        }
        s->str[i] = nb_strndup(strs[i], l);
        if (!s->str[i]) {
            nb_stop_free(s);
            return NB_ERR_NOMEM;
        }
        s->len[i] = l;
        s->max_len = NB_MAX(s->max_len, l);
        s->n++;
    }
    return NB_OK;
}

void nb_stop_free(nb_stop *s) {
    for (int i = 0; i < s->n; i++) free(s->str[i]);
    free(s->buf);
    free(s->out);
    memset(s, 0, sizeof *s);
}

static const char *find_bytes(const char *h, size_t nh, const char *nd, size_t nn) {
    if (nn > nh) return NULL;
    for (size_t i = 0; i + nn <= nh; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

bool nb_stop_push(nb_stop *s, const char *text, size_t n, const char **out, size_t *n_out) {
    *out = "";
    *n_out = 0;
    if (s->stopped) return true;
    if (s->n == 0) { /* nothing to hold back */
        *out = text;
        *n_out = n;
        return false;
    }
    if (s->n_buf + n > s->cap) {
        size_t cap = NB_MAX(s->cap * 2, s->n_buf + n + s->max_len);
        char *b = realloc(s->buf, cap);
        if (!b) { /* cannot hold: emit unchecked rather than lose text */
            *out = text;
            *n_out = n;
            return false;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->n_buf, text, n);
    s->n_buf += n;
    /* the stop string that completes first (earliest end; then earliest start) */
    const char *first = NULL, *first_end = NULL;
    for (int i = 0; i < s->n; i++) {
        const char *p = find_bytes(s->buf, s->n_buf, s->str[i], s->len[i]);
        if (p && (!first || p + s->len[i] < first_end || (p + s->len[i] == first_end && p < first))) {
            first = p;
            first_end = p + s->len[i];
        }
    }
    if (first) {
        s->stopped = true;
        *out = s->buf;
        *n_out = (size_t)(first - s->buf);
        s->n_buf = 0;
        return true;
    }
    /* hold back the longest suffix that is a proper prefix of a stop string */
    size_t hold = 0;
    for (int i = 0; i < s->n; i++)
        for (size_t k = NB_MIN(s->len[i] - 1, s->n_buf); k > hold; k--)
            if (!memcmp(s->buf + s->n_buf - k, s->str[i], k)) {
                hold = k;
                break;
            }
    size_t emit = s->n_buf - hold;
    if (emit > s->out_cap) {
        char *o = realloc(s->out, s->cap);
        if (!o) { /* cannot copy out: emit nothing now, the text stays held */
            return false;
        }
        s->out = o;
        s->out_cap = s->cap;
    }
    if (emit == 0) return false;
    memcpy(s->out, s->buf, emit);
    memmove(s->buf, s->buf + emit, hold);
    s->n_buf = hold;
    *out = s->out;
    *n_out = emit;
    return false;
}

void nb_stop_flush(nb_stop *s, const char **out, size_t *n_out) {
    *out = s->buf ? s->buf : "";
    *n_out = s->stopped ? 0 : s->n_buf;
    s->n_buf = 0;
}
