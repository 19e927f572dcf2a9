/* nibble's status codes and the other small vocabulary types of the public
 * API (include/nibble.h) that the library's internals use as they are: kept
 * in their own header so internal headers can use them (through
 * src/base/status.h) without the whole API. Self-contained: the C standard
 * headers only. */
#ifndef NIBBLE_STATUS_H
#define NIBBLE_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_INVALID = 1,     /* bad argument or request parameter */
    NB_ERR_IO = 2,          /* open/read/write/mmap failed */
    NB_ERR_FORMAT = 3,      /* malformed model/tokenizer/config file */
    NB_ERR_UNSUPPORTED = 4, /* well-formed but not supported (arch, dtype, tokenizer) */
    NB_ERR_NOMEM = 5,
    NB_ERR_RANGE = 6,       /* a value outside its allowed range */
    NB_ERR_CAPACITY = 7,    /* configuration does not fit the memory budget */
    NB_ERR_OVERLOADED = 8,  /* queue full */
    NB_ERR_ABORTED = 9,
    NB_ERR_NOT_FOUND = 10,  /* key, tensor, file or model name absent */
    NB_ERR_INTERNAL = 11,
} nb_status;

/* "ok", "invalid argument", ... */
const char *nb_status_str(nb_status st);
/* The reason of the last failure on this thread: what was wrong, where
 * (file, field, byte offset, parameter) and what is allowed. Valid until the
 * next failure on the same thread. */
const char *nb_errmsg(void);

/* Why a request ended (the last event of a request carries it). */
typedef enum nb_finish_reason {
    NB_FINISH_NONE = 0,   /* not finished (a streamed token) */
    NB_FINISH_STOP,       /* EOS / stop token / stop string */
    NB_FINISH_LENGTH,     /* max_tokens or max_model_len reached */
    NB_FINISH_ABORT,      /* aborted, or the engine shut down */
    NB_FINISH_ERROR,      /* the request could not be served (message in the event's `error`) */
} nb_finish_reason;

const char *nb_finish_reason_str(nb_finish_reason r); /* "stop", "length", "abort", "error", "none" */

/* Element type of the KV cache. */
typedef enum nb_kv_dtype {
    NB_KV_AUTO = 0, /* the engine's default (f32 today; docs/engine.md) */
    NB_KV_F32, NB_KV_F16, NB_KV_BF16, NB_KV_FP8, NB_KV_INT8,
} nb_kv_dtype;

#ifdef __cplusplus
}
#endif
#endif
