/* libFuzzer target for llama2.c checkpoints (version 0 legacy header and
 * version 1 "ak42"): the input is written to an anonymous memory file and
 * opened through nb_source_open_llama2c, the way `nibble generate x.bin`
 * opens it; every tensor view it hands out is then read end to end. The
 * reader must refuse any header whose sizes do not match the file, never
 * read outside the mapping, and never leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats/source.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz.bin", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { close(fd); return 0; }
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    nb_source s;
    if (nb_source_open_llama2c(path, &s) == NB_OK) {
        uint64_t acc = 0;
        for (int64_t i = 0; i < s.n_tensors; i++) {
            const nb_tensor *t = &s.tensors[i];
            const uint8_t *p = t->data;
            if (!p) continue;
            if (t->nbytes) acc += p[0] + p[t->nbytes - 1];
        }
        sink = acc;
        nb_source_close(&s);
    }
    close(fd);
    return 0;
}
