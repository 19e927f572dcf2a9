/* An open-addressing hash set of indices into a caller's array of strings
 * (GGUF keys and tensor names, golden-set ids): duplicate checks and lookups
 * in O(1) expected, so an input with millions of names costs linear time.
 *
 * The set stores no strings: a slot holds the upper 32 bits of the name's
 * hash (the tag) and index + 1 (0 = empty); a probe calls get(arr, idx) and
 * compares strings only when the tags agree. Indices must be below
 * UINT32_MAX - 1, and at most the n given to nb_nameset_cap may be inserted.
 *
 * The caller owns the slot memory (zeroed, nb_nameset_cap(n) slots), so a
 * large set can live in a huge-page block (the GGUF reader does this):
 *
 *   size_t cap = nb_nameset_cap(n);
 *   uint64_t *slot = calloc(cap, sizeof *slot);
 *   nb_nameset s;
 *   nb_nameset_attach(&s, slot, cap);
 *   if (nb_nameset_probe(&s, name, get, arr, i) >= 0) ... duplicate of that index
 *   free(slot);
 *
 * Header-only (static inline): the probe is on the GGUF reader's hot path.
 * Not thread-safe for inserts. */
#ifndef NB_BASE_NAMESET_H
#define NB_BASE_NAMESET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct nb_nameset {
    uint64_t *slot; /* NULL: an empty set that finds nothing and stores nothing */
    uint64_t mask;  /* capacity - 1 (a power of two) */
} nb_nameset;

/* The string callback: the name stored at index i of arr. */
typedef const char *(*nb_nameset_get)(const void *arr, int64_t i);

/* Slots needed for up to n names (a power of two >= 2n, >= 16). */
static inline size_t nb_nameset_cap(uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return (size_t)cap;
}

/* slot: cap zeroed slots (cap from nb_nameset_cap), or NULL. */
static inline void nb_nameset_attach(nb_nameset *s, uint64_t *slot, size_t cap) {
    s->slot = slot;
    s->mask = slot ? (uint64_t)cap - 1 : 0;
}

static inline uint64_t nb_nameset_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Index of `name` (hash hv) in the set, or -1. With insert_idx >= 0, adds
 * insert_idx when the name is absent (and returns -1). */
static inline int64_t nb_nameset_probe_h(nb_nameset *s, const char *name, uint64_t hv, nb_nameset_get get,
                                         const void *arr, int64_t insert_idx) {
    if (!s->slot) return -1;
    uint64_t tag = hv >> 32;
    for (uint64_t h = hv & s->mask;; h = (h + 1) & s->mask) {
        uint64_t v = s->slot[h];
        if (v == 0) {
            if (insert_idx >= 0) s->slot[h] = tag << 32 | (uint64_t)(insert_idx + 1);
            return -1;
        }
        int64_t idx = (int64_t)(v & 0xffffffffu) - 1;
        if (v >> 32 == tag && !strcmp(get(arr, idx), name)) return idx;
    }
}

static inline int64_t nb_nameset_probe(nb_nameset *s, const char *name, nb_nameset_get get, const void *arr,
                                       int64_t insert_idx) {
    return nb_nameset_probe_h(s, name, nb_nameset_hash(name), get, arr, insert_idx);
}

/* Inserts names 0..n-1 of arr (hashes hv[] precomputed) in order,
 * prefetching the slot a few names ahead: on a large input one cache miss
 * per name is the whole cost of the set, and the misses overlap this way.
 * Returns the index of the first name equal to an earlier one (*first = that
 * earlier index), or -1. */
static inline int64_t nb_nameset_insert_all(nb_nameset *s, const uint64_t *hv, int64_t n, nb_nameset_get get,
                                            const void *arr, int64_t *first) {
    enum { AHEAD = 16 };
    for (int64_t i = 0; i < n; i++) {
        if (s->slot && i + AHEAD < n) __builtin_prefetch(&s->slot[hv[i + AHEAD] & s->mask], 1);
        int64_t j = nb_nameset_probe_h(s, get(arr, i), hv[i], get, arr, i);
        if (j >= 0) {
            *first = j;
            return i;
        }
    }
    return -1;
}

#endif
