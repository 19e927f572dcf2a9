/* A growable byte buffer with a cap fixed at init; see dynbuf.h. */
#include "base/dynbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DYNBUF_MIN_ALLOC 64

void nb_dynbuf_init(nb_dynbuf *b, size_t cap) {
    NB_ASSERT(cap >= 1);
    b->p = NULL;
    b->len = b->alloc = 0;
    b->cap = cap < SIZE_MAX ? cap : SIZE_MAX - 1; /* len + n + 1 never overflows */
    b->realloc_fn = NULL;
}

void nb_dynbuf_free(nb_dynbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->alloc = 0;
}

void nb_dynbuf_reset(nb_dynbuf *b) {
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

nb_status nb_dynbuf_add(nb_dynbuf *b, const void *s, size_t n) {
    if (n == 0) return NB_OK;
    if (n > b->cap - b->len) {
        size_t had = b->len;
        nb_dynbuf_free(b);
        return nb_fail(NB_ERR_RANGE, "output buffer: %zu + %zu bytes exceed the cap of %zu bytes", had, n, b->cap);
    }
    size_t need = b->len + n + 1; /* cannot overflow: len + n <= cap < SIZE_MAX */
    if (need > b->alloc) {
        size_t a = b->alloc ? b->alloc : DYNBUF_MIN_ALLOC;
        while (a < need) a = a > SIZE_MAX / 2 ? need : a * 2;
        if (a > b->cap + 1) a = b->cap + 1; /* never more than the cap needs */
        if (a < need) a = need;
        char *q = b->realloc_fn ? b->realloc_fn(b->p, a) : realloc(b->p, a);
        if (!q) {
            nb_dynbuf_free(b);
            return nb_fail(NB_ERR_NOMEM, "output buffer: out of memory growing to %zu bytes", a);
        }
        b->p = q;
        b->alloc = a;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return NB_OK;
}

nb_status nb_dynbuf_addstr(nb_dynbuf *b, const char *s) { return nb_dynbuf_add(b, s, strlen(s)); }

nb_status nb_dynbuf_vaddf(nb_dynbuf *b, const char *fmt, va_list ap) {
    char small[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        nb_dynbuf_free(b);
        return nb_fail(NB_ERR_INVALID, "output buffer: formatting '%s' failed", fmt);
    }
    if ((size_t)n < sizeof small) return nb_dynbuf_add(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) {
        nb_dynbuf_free(b);
        return nb_fail(NB_ERR_NOMEM, "output buffer: out of memory formatting %d bytes", n);
    }
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    nb_status st = nb_dynbuf_add(b, big, (size_t)n);
    free(big);
    return st;
}

nb_status nb_dynbuf_addf(nb_dynbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    nb_status st = nb_dynbuf_vaddf(b, fmt, ap);
    va_end(ap);
    return st;
}

const char *nb_dynbuf_ptr(const nb_dynbuf *b) { return b->p ? b->p : ""; }

size_t nb_dynbuf_len(const nb_dynbuf *b) { return b->len; }

char *nb_dynbuf_take(nb_dynbuf *b, size_t *len) {
    char *p = b->p;
    if (len) *len = b->len;
    if (!p) p = calloc(1, 1);
    b->p = NULL;
    b->len = b->alloc = 0;
    return p;
}
