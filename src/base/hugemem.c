/* 2 MiB-aligned anonymous mappings (see hugemem.h). */
#include "base/hugemem.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define NB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NB_ASAN 1
#endif
#endif

#ifdef NB_ASAN
/* Under AddressSanitizer from its heap instead: a mapping is invisible to
 * it, and its bounds checks on the KV pools and the weights are worth more
 * in those builds than huge pages. */
#include <stdlib.h>
void *nb_map_anon(size_t bytes, bool huge) {
    (void)huge;
    return bytes ? calloc(1, bytes) : NULL;
}
void nb_unmap_anon(void *p, size_t bytes) {
    (void)bytes;
    free(p);
}
#else
void *nb_map_anon(size_t bytes, bool huge) {
    if (!bytes || bytes > SIZE_MAX - HUGE_PAGE) return NULL;
    char *m = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    /* keep [a, a + bytes) and hand the rest back, so nb_unmap_anon(a, bytes) frees it all */
    char *a = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (a > m) munmap(m, (size_t)(a - m));
    size_t used = (bytes + 4095) & ~(size_t)4095, tail = (size_t)(m + bytes + HUGE_PAGE - (a + used));
    if (tail) munmap(a + used, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(a, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)huge;
#endif
    return a;
}

void nb_unmap_anon(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}
#endif
