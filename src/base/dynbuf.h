/* A growable byte buffer with a cap fixed at init (curl's dynbuf idea).
 *
 * Every append reports failure as a status: NB_ERR_RANGE when the result
 * would exceed the cap, NB_ERR_NOMEM when growing failed. A failed append
 * frees the contents (the buffer is then empty, its cap unchanged, and
 * usable again), so a partial result can never be mistaken for a whole one:
 * callers turn the failure into an error, never into truncated output.
 *
 * The contents are always NUL-terminated (the NUL is not counted in len and
 * does not count against the cap). The caller owns the struct; init cannot
 * fail and allocates nothing; nb_dynbuf_take hands the bytes over.
 *
 *   nb_dynbuf b;
 *   nb_dynbuf_init(&b, NB_LIMIT_RESPONSE_BYTES);
 *   if (nb_dynbuf_add(&b, "data: ", 6) != NB_OK) ...   (nb_errmsg() says why)
 *   char *s = nb_dynbuf_take(&b, &len);                 (caller frees s)
 *
 * Not thread-safe: one owner at a time. */
#ifndef NB_BASE_DYNBUF_H
#define NB_BASE_DYNBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "base/status.h"

typedef struct nb_dynbuf {
    char *p;        /* NULL until the first byte is added */
    size_t len;     /* bytes held, the NUL excluded */
    size_t alloc;   /* bytes allocated at p */
    size_t cap;     /* most bytes len may reach */
    /* Growth function: NULL uses realloc; else one with realloc's contract
     * whose memory free() releases. A seam for tests (failure injection). */
    void *(*realloc_fn)(void *p, size_t n);
} nb_dynbuf;

/* An empty buffer that will hold at most cap bytes (cap >= 1). */
void nb_dynbuf_init(nb_dynbuf *b, size_t cap);
/* Frees the contents; the buffer stays usable with the same cap. */
void nb_dynbuf_free(nb_dynbuf *b);
/* Empties the buffer and keeps its memory for reuse. */
void nb_dynbuf_reset(nb_dynbuf *b);

/* Appends n bytes. NB_ERR_RANGE past the cap, NB_ERR_NOMEM when growing
 * failed; on either the contents are freed (see above). */
nb_status nb_dynbuf_add(nb_dynbuf *b, const void *s, size_t n) __attribute__((warn_unused_result));
nb_status nb_dynbuf_addstr(nb_dynbuf *b, const char *s) __attribute__((warn_unused_result));
nb_status nb_dynbuf_addf(nb_dynbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), warn_unused_result));
nb_status nb_dynbuf_vaddf(nb_dynbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0), warn_unused_result));

/* The contents ("" when empty; valid until the next change). */
const char *nb_dynbuf_ptr(const nb_dynbuf *b);
size_t nb_dynbuf_len(const nb_dynbuf *b);
/* Hands the contents to the caller (free() them) and empties the buffer;
 * *len (optional) gets their length. An empty buffer gives a malloc'd ""
 * (NULL only when that allocation fails). */
char *nb_dynbuf_take(nb_dynbuf *b, size_t *len);

#endif
