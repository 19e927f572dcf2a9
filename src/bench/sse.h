/* Incremental Server-Sent Events parser: bytes go in as they arrive (any
 * split, even inside a line or a "\r\n"), one callback per complete event
 * with its data lines joined by '\n'. Lines end in "\n", "\r\n" or "\r";
 * "data:" strips one leading space; comments (":...") and other fields
 * (event, id, retry) are ignored; an event without data is not delivered. */
#ifndef NB_BENCH_SSE_H
#define NB_BENCH_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef void (*nb_sse_cb)(void *ud, const char *data, size_t len);

typedef struct nb_sse {
    nb_sse_cb cb;
    void *ud;
    size_t max_event; /* bytes one event's data may hold (default 1 MiB) */
    char *line, *data;
    size_t line_len, line_cap, data_len, data_cap;
    bool has_data, last_cr;
} nb_sse;

void nb_sse_init(nb_sse *s, nb_sse_cb cb, void *ud);
/* Feeds n bytes. NB_ERR_RANGE when an event exceeds max_event (the parser is then unusable). */
nb_status nb_sse_feed(nb_sse *s, const char *p, size_t n);
void nb_sse_free(nb_sse *s);

#endif
