/* Status codes and error messages.
 *
 * Every fallible function returns an nb_status. The human-readable reason
 * (what was wrong, where: file, field, byte offset, request parameter, and
 * what is allowed) is stored per thread by nb_fail() and read back with
 * nb_errmsg() until the next nb_fail() on the same thread.
 *
 * Broken invariants (bugs, never bad input) go through NB_ASSERT, which
 * aborts with file:line in every build type. */
#ifndef NB_BASE_STATUS_H
#define NB_BASE_STATUS_H

#include "nibble_status.h"

#define NB_ERRMSG_MAX 1024

/* Record the reason for a failure and return `st`, so callers can write
 *   return nb_fail(NB_ERR_FORMAT, "%s: tensor '%s': ...", path, name); */
nb_status nb_fail(nb_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with more context ("loading X: " + old). */
nb_status nb_fail_wrap(nb_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void nb_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));

#define NB_ASSERT(x) do { if (!(x)) nb_assert_fail(#x, __FILE__, __LINE__); } while (0)

/* Propagate a non-OK status. */
#define NB_TRY(expr) do { nb_status nb_try_st_ = (expr); if (nb_try_st_ != NB_OK) return nb_try_st_; } while (0)

#define NB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NB_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool nb_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool nb_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* malloc/calloc that record NB_ERR_NOMEM with the size on failure. */
void *nb_malloc(size_t n);
void *nb_calloc(size_t count, size_t size);
void *nb_realloc(void *p, size_t n);
char *nb_strdup(const char *s);
char *nb_strndup(const char *s, size_t n);

#endif
