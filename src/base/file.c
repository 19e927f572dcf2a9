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

void nb_map_release(const nb_map *m, const void *p, size_t n) {
    if (!m->data || !n) return;
    uintptr_t lo = (uintptr_t)p, hi = lo + n, mlo = (uintptr_t)m->data, mhi = mlo + m->size;
    if (lo < mlo) lo = mlo;
    if (hi > mhi) hi = mhi;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    /* MADV_DONTNEED on a read-only private file mapping only unmaps the
     * pages: their contents come back from the file */
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
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
    if (bad) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return nb_fail(NB_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    nb_status st = nb_file_commit(tmp, path);
    if (st != NB_OK) unlink(tmp);
    free(tmp);
    return st;
}

static const char *node_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISREG(m)) return "a regular file";
    return "not a regular file";
}

nb_status nb_out_check(const char *out, const char *const *inputs, size_t n_inputs, bool force, const char *what) {
    struct stat so;
    if (stat(out, &so) != 0) return NB_OK; /* does not exist (or a dangling link): created anew */
    if (force) return NB_OK;
    if (!S_ISREG(so.st_mode))
        return nb_fail(NB_ERR_INVALID,
                       "%s '%s' is %s; writing would replace it with a regular file (refused; --force to do it "
                       "anyway)",
                       what, out, node_kind(so.st_mode));
    for (size_t i = 0; i < n_inputs; i++) {
        struct stat si;
        if (!inputs[i] || stat(inputs[i], &si) != 0) continue;
        if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return nb_fail(NB_ERR_INVALID,
                           "%s '%s' is the same file as the input '%s' (device %llu, inode %llu); writing it would "
                           "destroy the input (refused; choose another name, or --force)",
                           what, out, inputs[i], (unsigned long long)so.st_dev, (unsigned long long)so.st_ino);
    }
    return NB_OK;
}

static nb_status fsync_path(const char *path, int flags, const char *what) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return nb_fail(NB_ERR_IO, "%s: cannot open %s for fsync: %s", path, what, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* Some file systems cannot fsync a directory (EINVAL); the data is synced. */
    if (rc != 0 && !(e == EINVAL && (flags & O_DIRECTORY)))
        return nb_fail(NB_ERR_IO, "%s: fsync of %s failed: %s", path, what, strerror(e));
    return NB_OK;
}

nb_status nb_out_dir_check(const char *dir, const char *const *names, size_t n_names, const char *const *inputs,
                           size_t n_inputs, bool force, const char *what) {
    struct stat sd;
    if (stat(dir, &sd) != 0) return NB_OK; /* created anew, empty */
    if (!S_ISDIR(sd.st_mode))
        return nb_fail(NB_ERR_INVALID, "%s '%s' is %s, not a directory: the files cannot be written into it (refused)",
                       what, dir, node_kind(sd.st_mode));
    for (size_t i = 0; i < n_inputs && !force; i++) {
        struct stat si;
        if (!inputs[i] || stat(inputs[i], &si) != 0) continue;
        if (si.st_dev == sd.st_dev && si.st_ino == sd.st_ino)
            return nb_fail(NB_ERR_INVALID,
                           "%s '%s' is the same directory as the input '%s' (device %llu, inode %llu); writing into it "
                           "would replace the input's files (refused; choose another directory, or --force)",
                           what, dir, inputs[i], (unsigned long long)sd.st_dev, (unsigned long long)sd.st_ino);
    }
    size_t dl = strlen(dir);
    for (size_t k = 0; k < n_names; k++) {
        size_t nl = strlen(names[k]);
        char *path = nb_malloc(dl + nl + 2);
        if (!path) return NB_ERR_NOMEM;
        memcpy(path, dir, dl);
        path[dl] = '/';
        memcpy(path + dl + 1, names[k], nl + 1);
        nb_status st = nb_out_check(path, inputs, n_inputs, force, what);
        free(path);
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

nb_status nb_file_commit(const char *tmp, const char *path) {
    NB_TRY(fsync_path(tmp, O_RDONLY, "the temporary file"));
    if (rename(tmp, path) != 0)
        return nb_fail(NB_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    size_t n = strlen(path);
    while (n > 0 && path[n - 1] != '/') n--;
    char *dir = nb_malloc(n ? n + 1 : 2);
    if (!dir) return NB_ERR_NOMEM;
    if (n) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    } else {
        memcpy(dir, ".", 2);
    }
    nb_status st = fsync_path(dir, O_RDONLY | O_DIRECTORY, "its directory");
    free(dir);
    return st;
}

bool nb_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool nb_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
