/* SHA-256 (FIPS 180-4), streaming. Used for model checksums (`nibble
 * inspect --sha256`) and content keys. Not constant-time; not for secrets. */
#ifndef NB_BASE_SHA256_H
#define NB_BASE_SHA256_H

#include "base/status.h"

typedef struct nb_sha256_ctx {
    uint32_t h[8];
    uint64_t len;      /* bytes hashed so far */
    uint8_t buf[64];   /* pending partial block */
    uint32_t nbuf;
} nb_sha256_ctx;

void nb_sha256_init(nb_sha256_ctx *s);
void nb_sha256_update(nb_sha256_ctx *s, const void *data, size_t n);
void nb_sha256_final(nb_sha256_ctx *s, uint8_t digest[32]);
/* Lower-case hex of a digest, NUL-terminated. */
void nb_sha256_hex(const uint8_t digest[32], char hex[65]);
/* One-shot over a buffer. */
void nb_sha256(const void *data, size_t n, uint8_t digest[32]);
/* Hashes a whole file (streamed, 1 MiB at a time) into lower-case hex. */
nb_status nb_sha256_file(const char *path, char hex[65]) __attribute__((warn_unused_result));

#endif
