/* nibble's status codes: the first part of the public API (nibble.h),
 * kept in its own header so the library's internal headers can use them
 * without pulling in the whole API. */
#ifndef NIBBLE_STATUS_H
#define NIBBLE_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NIBBLE_VERSION "0.1.0"

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

const char *nb_status_str(nb_status st);
const char *nb_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif

