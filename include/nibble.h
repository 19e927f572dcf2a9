/* nibble: run large language models quantized - the embeddable API.
 *
 * Conventions: every function that can fail returns nb_status; on failure
 * nb_errmsg() gives the reason (thread-local, valid until the next failure
 * on the same thread). Objects come in create/free pairs and the creator
 * owns what it created. Numbers of nb_status never change meaning. */
#ifndef NIBBLE_H
#define NIBBLE_H

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
