/* Read-only file mappings and whole-file reads. */
#ifndef NB_BASE_FILE_H
#define NB_BASE_FILE_H

#include "base/status.h"

typedef struct nb_map {
    const uint8_t *data;
    size_t size;
} nb_map;

/* Maps `path` read-only. An empty file maps to data=NULL, size=0. */
nb_status nb_map_file(const char *path, nb_map *m) __attribute__((warn_unused_result));
void nb_unmap(nb_map *m);

/* Reads a whole file into a NUL-terminated malloc'd buffer, refusing files
 * over max_bytes (a named cap: the caller says what it expects). */
nb_status nb_read_file(const char *path, size_t max_bytes, char **data, size_t *len)
    __attribute__((warn_unused_result));

/* Writes a whole file (to path.tmp, then rename). */
nb_status nb_write_file(const char *path, const void *data, size_t len) __attribute__((warn_unused_result));

bool nb_file_exists(const char *path);
bool nb_is_dir(const char *path);

#endif
