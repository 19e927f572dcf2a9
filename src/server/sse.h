/* Server-sent events of a streamed answer (sse.c): the chunks
 * ("data: {json}\n\n"), the error event, the usage chunk and [DONE], produced
 * as the HTTP layer asks for bytes. Private to src/server. */
#ifndef NB_SERVER_SSE_H
#define NB_SERVER_SSE_H

#include <sys/types.h>

#include "server/request.h"

/* nb_http_stream_fn over a srv_req (ud). */
ssize_t nb_srv_sse_read(void *ud, char *out, size_t cap);
/* nb_http_stream_free_fn: aborts the engine request when the client went
 * away mid-stream, logs, releases the HTTP side. */
void nb_srv_sse_free(void *ud);

#endif
