/* Incremental SSE parser (sse.h). */
#include "bench/sse.h"

#include <stdlib.h>
#include <string.h>

#define SSE_DEFAULT_MAX ((size_t)1 << 20)

void nb_sse_init(nb_sse *s, nb_sse_cb cb, void *ud) {
    memset(s, 0, sizeof *s);
    s->cb = cb;
    s->ud = ud;
    s->max_event = SSE_DEFAULT_MAX;
}

void nb_sse_free(nb_sse *s) {
    free(s->line);
    free(s->data);
    s->line = s->data = NULL;
}

static bool grow(char **b, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *n = realloc(*b, c);
    if (!n) return false;
    *b = n;
    *cap = c;
    return true;
}

/* One complete line (without its terminator). */
static nb_status line_done(nb_sse *s) {
    const char *l = s->line;
    size_t n = s->line_len;
    if (n == 0) { /* blank line: dispatch */
        if (s->has_data) {
            if (!grow(&s->data, &s->data_cap, s->data_len + 1)) return nb_fail(NB_ERR_NOMEM, "SSE: out of memory");
            s->data[s->data_len] = '\0';
            s->cb(s->ud, s->data, s->data_len);
        }
        s->data_len = 0;
        s->has_data = false;
        return NB_OK;
    }
    if (n >= 5 && !memcmp(l, "data:", 5)) {
        l += 5;
        n -= 5;
        if (n && *l == ' ') { l++; n--; }
        size_t need = s->data_len + (s->has_data ? 1 : 0) + n + 1;
        if (need > s->max_event) return nb_fail(NB_ERR_RANGE, "SSE: an event is over %zu bytes", s->max_event);
        if (!grow(&s->data, &s->data_cap, need)) return nb_fail(NB_ERR_NOMEM, "SSE: out of memory");
        if (s->has_data) s->data[s->data_len++] = '\n';
        memcpy(s->data + s->data_len, l, n);
        s->data_len += n;
        s->has_data = true;
    }
    return NB_OK;
}

nb_status nb_sse_feed(nb_sse *s, const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\n' && s->last_cr) { /* the '\n' of "\r\n": the line ended at '\r' */
            s->last_cr = false;
            i++;
            continue;
        }
        s->last_cr = false;
        if (c == '\n' || c == '\r') {
            s->last_cr = c == '\r';
            NB_TRY(line_done(s));
            s->line_len = 0;
            i++;
            continue;
        }
        /* copy the run of ordinary bytes at once */
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r') j++;
        size_t k = j - i;
        if (s->line_len + k > s->max_event + 16) return nb_fail(NB_ERR_RANGE, "SSE: a line is over %zu bytes", s->max_event);
        if (!grow(&s->line, &s->line_cap, s->line_len + k + 1)) return nb_fail(NB_ERR_NOMEM, "SSE: out of memory");
        memcpy(s->line + s->line_len, p + i, k);
        s->line_len += k;
        i = j;
    }
    return NB_OK;
}
