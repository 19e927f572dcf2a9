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
/* Drops this process's pages of [p, p + n) where they lie in m (whole pages
 * only; a range outside m, or an empty m, is left alone). The mapping stays
 * valid: a later read faults the bytes in again from the file. For a loader
 * that has copied tensors out of the mapping, so that the process does not
 * hold the model twice (docs/model.md, "Weights in memory"). */
void nb_map_release(const nb_map *m, const void *p, size_t n);

/* Reads a whole file into a NUL-terminated malloc'd buffer, refusing files
 * over max_bytes (a named cap: the caller says what it expects). */
nb_status nb_read_file(const char *path, size_t max_bytes, char **data, size_t *len)
    __attribute__((warn_unused_result));

/* Writes a whole file (to path.tmp, then nb_file_commit). */
nb_status nb_write_file(const char *path, const void *data, size_t len) __attribute__((warn_unused_result));

/* The rule for every command that writes an output file (quantize, synth,
 * export, imatrix -o, eval kld --save-base; docs/security.md): refuses `out` when it already exists and is
 * not a regular file (a device, FIFO, directory: renaming over it would
 * replace the node), or when it is the same file as one of `inputs` (same
 * device and inode, so also through a symlink or hard link), unless force.
 * `what` names the argument in the message ("OUT", "-o"). NB_ERR_INVALID
 * with the reason. */
nb_status nb_out_check(const char *out, const char *const *inputs, size_t n_inputs, bool force, const char *what)
    __attribute__((warn_unused_result));

/* The same rule for a command that writes into a directory (export's
 * OUT_DIR, eval golden / bench --out): refuses `dir` when it exists and is
 * not a directory (always: nothing could be written into it), or when it
 * is the same directory as one of `inputs` (unless force); then applies
 * nb_out_check to each of the n_names files the command will write in it
 * (dir/name). `what` names the argument ("OUT_DIR", "--out"). */
nb_status nb_out_dir_check(const char *dir, const char *const *names, size_t n_names, const char *const *inputs,
                           size_t n_inputs, bool force, const char *what) __attribute__((warn_unused_result));

/* Moves a fully written temporary file into place durably: fsync(tmp),
 * rename(tmp, path), fsync(path's directory). The caller has closed tmp and
 * removes it on failure. */
nb_status nb_file_commit(const char *tmp, const char *path) __attribute__((warn_unused_result));

bool nb_file_exists(const char *path);
bool nb_is_dir(const char *path);

#endif
