/* Stop strings over streamed text: text is pushed as it is detokenized; what
 * comes out never contains a stop string and never ends with the beginning
 * of one (that part is held back until the next push shows whether the stop
 * string follows). When a stop string completes (the first to complete, if
 * they overlap, whatever the pushes' sizes), the text before it comes out
 * and the matcher reports the stop; the stop string and anything after it
 * are dropped (OpenAI / vLLM: the stop sequence is not returned).
 *
 * Limits: NB_LIMIT_STOP_STRINGS strings of 1..NB_LIMIT_STOP_LEN bytes
 * (base/limits.h). Memory: the strings plus a hold
 * buffer of one push + the longest stop string. */
#ifndef NB_ENGINE_STOP_H
#define NB_ENGINE_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/limits.h"
#include "base/status.h"

typedef struct nb_stop {
    char *str[NB_LIMIT_STOP_STRINGS];
    size_t len[NB_LIMIT_STOP_STRINGS];
    int n;
    size_t max_len;
    char *buf;         /* held-back text (after a stop: the text before it) */
    size_t n_buf, cap;
    char *out;         /* the text the last push released */
    size_t out_cap;
    bool stopped;
} nb_stop;

/* Copies the strings. NB_ERR_RANGE naming the index when one is empty or
 * too long, or when there are too many. */
nb_status nb_stop_init(nb_stop *s, const char *const *strs, size_t n) __attribute__((warn_unused_result));
void nb_stop_free(nb_stop *s);

/* Appends text; *out / *n_out: the text that may be emitted now (valid
 * until the next call). Returns true when a stop string was found (then
 * *out is the text before it and the matcher ignores later pushes). */
bool nb_stop_push(nb_stop *s, const char *text, size_t n, const char **out, size_t *n_out);
/* End of the stream: everything held back. */
void nb_stop_flush(nb_stop *s, const char **out, size_t *n_out);

#endif
