/* Big buffers read in long streams - resident weights, KV pools, the
 * bandwidth probe's arrays, a parser's large tables - as anonymous
 * mappings that start on a 2 MiB boundary and are advised as huge pages
 * (MADV_HUGEPAGE). Where transparent huge pages are "madvise" (Debian's
 * default), malloc'd memory stays in 4 KiB pages: a decode token walking
 * a 4k-context KV pool of them missed the TLB on nearly every key
 * (docs/speed.md, session 25). Zero-filled; the pages are committed as
 * they are first touched. Under AddressSanitizer the memory comes from
 * calloc instead, so its bounds checks still cover these buffers. */
#ifndef NB_BASE_HUGEMEM_H
#define NB_BASE_HUGEMEM_H

#include <stdbool.h>
#include <stddef.h>

/* `bytes` (> 0) at a 2 MiB boundary; huge = false advises the opposite
 * (MADV_NOHUGEPAGE: the probe's 4 KiB-page patterns). NULL when the
 * mapping fails. Free with nb_unmap_anon and the same size. */
void *nb_map_anon(size_t bytes, bool huge);
void nb_unmap_anon(void *p, size_t bytes);

#endif
