/* mmap / read / write of whole files with errors that name the path. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

nb_status nb_map_file(const char *path, nb_map *m) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return nb_fail(e == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return nb_fail(NB_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return nb_fail(NB_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) { close(fd); return NB_OK; }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return nb_fail(NB_ERR_IO, "%s: cannot mmap %lld bytes: %s", path, (long long)st.st_size, strerror(e));
    m->data = p;
    m->size = (size_t)st.st_size;
    return NB_OK;
}

void nb_unmap(nb_map *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

nb_status nb_read_file(const char *path, size_t max_bytes, char **data, size_t *len) {
    *data = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return nb_fail(e == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); return nb_fail(NB_ERR_NOMEM, "%s: out of memory", path); }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max_bytes) {
                free(buf);
                fclose(f);
                return nb_fail(NB_ERR_RANGE, "%s: larger than the %zu-byte limit for this kind of file", path, max_bytes);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); fclose(f); return nb_fail(NB_ERR_NOMEM, "%s: out of memory", path); }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0) break;
        n += r;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return nb_fail(NB_ERR_IO, "%s: read error", path); }
    if (n > max_bytes) {
        free(buf);
        return nb_fail(NB_ERR_RANGE, "%s: %zu bytes, over the %zu-byte limit for this kind of file", path, n, max_bytes);
    }
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return NB_OK;
}

nb_status nb_write_file(const char *path, const void *data, size_t len) {
    size_t pl = strlen(path);
    char *tmp = nb_malloc(pl + 5);
    if (!tmp) return NB_ERR_NOMEM;
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(tmp);
        return nb_fail(NB_ERR_IO, "%s: cannot create: %s", path, strerror(e));
    }
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    int bad = (w != len) | (fclose(f) != 0);
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return nb_fail(NB_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    free(tmp);
    return NB_OK;
}

bool nb_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool nb_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
