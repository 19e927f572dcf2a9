/* Status codes, per-thread error messages, checked allocation. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char errmsg[NB_ERRMSG_MAX];

const char *nb_status_str(nb_status st) {
    switch (st) {
    case NB_OK: return "ok";
    case NB_ERR_INVALID: return "invalid argument";
    case NB_ERR_IO: return "i/o error";
    case NB_ERR_FORMAT: return "malformed file";
    case NB_ERR_UNSUPPORTED: return "unsupported";
    case NB_ERR_NOMEM: return "out of memory";
    case NB_ERR_RANGE: return "value out of range";
    case NB_ERR_CAPACITY: return "does not fit in memory";
    case NB_ERR_OVERLOADED: return "overloaded";
    case NB_ERR_ABORTED: return "aborted";
    case NB_ERR_NOT_FOUND: return "not found";
    case NB_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *nb_errmsg(void) {
    return errmsg[0] ? errmsg : "no error message recorded";
}

nb_status nb_fail(nb_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    return st;
}

nb_status nb_fail_wrap(nb_status st, const char *fmt, ...) {
    char old[NB_ERRMSG_MAX];
    memcpy(old, errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof errmsg)
        snprintf(errmsg + n, sizeof errmsg - (size_t)n, "%s", old);
    return st;
}

void nb_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "nibble: internal invariant failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

void *nb_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) nb_fail(NB_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *nb_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) nb_fail(NB_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *nb_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) nb_fail(NB_ERR_NOMEM, "out of memory reallocating to %zu bytes", n);
    return q;
}

char *nb_strndup(const char *s, size_t n) {
    char *d = nb_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *nb_strdup(const char *s) { return nb_strndup(s, strlen(s)); }
