/* The KV block manager (see kvcache.h).
 *
 * State of a block: USED (refcount > 0), FREE (refcount 0, its bit set in
 * the free bitmap, no hash) or CACHED (refcount 0, hashed, on the LRU list). A USED
 * block may be hashed too (it is then found by lookups and shared). The
 * hash table chains blocks by hash: buckets[hash & mask] -> chain[] -> -1. */
#include "engine/kvcache.h"

#include <stdlib.h>
#include <string.h>

struct nb_kvcache {
    int64_t n;
    int32_t bs;
    bool prefix;
    int32_t *ref;
    uint64_t *free_bits; /* bit b of word b / 64: block b is FREE */
    int64_t n_free;
    int32_t *lru_prev, *lru_next; /* doubly linked: head = least recently used */
    int32_t lru_head, lru_tail;
    int64_t n_cached, n_used;
    bool *hashed;
    uint64_t *hash, *parent;
    int32_t *tokens;              /* [n][bs] when prefix caching */
    int32_t *buckets, *chain;
    uint64_t mask;
    uint64_t evictions;
    nb_kvcache_copy_fn copy;
    void *copy_ud;
};

nb_status nb_kvcache_create(int64_t n_blocks, int32_t block_size, bool prefix_caching, nb_kvcache **out) {
    *out = NULL;
    if (n_blocks < 1 || n_blocks > (1 << 30))
        return nb_fail(NB_ERR_RANGE, "KV cache: %lld blocks, allowed 1..%d", (long long)n_blocks, 1 << 30);
    if (block_size < 1 || block_size > 1024)
        return nb_fail(NB_ERR_RANGE, "--block-size %d: allowed 1..1024", block_size);
    nb_kvcache *c = nb_calloc(1, sizeof *c);
    if (!c) return NB_ERR_NOMEM;
    c->n = n_blocks;
    c->bs = block_size;
    c->prefix = prefix_caching;
    size_t n = (size_t)n_blocks;
    c->ref = nb_calloc(n, sizeof *c->ref);
    c->free_bits = nb_calloc((n + 63) / 64, sizeof *c->free_bits);
    c->lru_prev = nb_malloc(n * sizeof(int32_t));
    c->lru_next = nb_malloc(n * sizeof(int32_t));
    c->hashed = nb_calloc(n, sizeof(bool));
    c->hash = nb_calloc(n, sizeof(uint64_t));
    c->parent = nb_calloc(n, sizeof(uint64_t));
    c->chain = nb_malloc(n * sizeof(int32_t));
    uint64_t nb = 16;
    while (nb < 2 * (uint64_t)n) nb <<= 1;
    c->mask = nb - 1;
    c->buckets = nb_malloc((size_t)nb * sizeof(int32_t));
    if (prefix_caching) c->tokens = nb_calloc(n, (size_t)block_size * sizeof(int32_t));
    if (!c->ref || !c->free_bits || !c->lru_prev || !c->lru_next || !c->hashed || !c->hash || !c->parent ||
        !c->chain || !c->buckets || (prefix_caching && !c->tokens)) {
        nb_kvcache_free(c);
        return nb_fail(NB_ERR_NOMEM, "out of memory for the block manager of %lld blocks", (long long)n_blocks);
    }
    for (int64_t i = 0; i < n_blocks; i++) c->free_bits[i / 64] |= 1ull << (i % 64);
    c->n_free = n_blocks;
    for (uint64_t i = 0; i < nb; i++) c->buckets[i] = -1;
    for (int64_t i = 0; i < n_blocks; i++) c->lru_prev[i] = c->lru_next[i] = c->chain[i] = -1;
    c->lru_head = c->lru_tail = -1;
    *out = c;
    return NB_OK;
}

void nb_kvcache_free(nb_kvcache *c) {
    if (!c) return;
    free(c->ref); free(c->free_bits); free(c->lru_prev); free(c->lru_next); free(c->hashed);
    free(c->hash); free(c->parent); free(c->tokens); free(c->buckets); free(c->chain);
    free(c);
}

void nb_kvcache_set_copy(nb_kvcache *c, nb_kvcache_copy_fn fn, void *ud) {
    c->copy = fn;
    c->copy_ud = ud;
}

int32_t nb_kvcache_block_size(const nb_kvcache *c) { return c->bs; }
int64_t nb_kvcache_n_blocks(const nb_kvcache *c) { return c->n; }
bool nb_kvcache_prefix_caching(const nb_kvcache *c) { return c->prefix; }
int64_t nb_kvcache_n_available(const nb_kvcache *c) { return c->n_free + c->n_cached; }
int64_t nb_kvcache_n_used(const nb_kvcache *c) { return c->n_used; }
int64_t nb_kvcache_n_cached(const nb_kvcache *c) { return c->n_cached; }
uint64_t nb_kvcache_evictions(const nb_kvcache *c) { return c->evictions; }
bool nb_kvcache_is_hashed(const nb_kvcache *c, int32_t b) { return b >= 0 && b < c->n && c->hashed[b]; }

int32_t nb_kvcache_refcount(const nb_kvcache *c, int32_t b) {
    NB_ASSERT(b >= 0 && b < c->n);
    return c->ref[b];
}

static void lru_remove(nb_kvcache *c, int32_t b) {
    int32_t p = c->lru_prev[b], n = c->lru_next[b];
    if (p >= 0) c->lru_next[p] = n; else c->lru_head = n;
    if (n >= 0) c->lru_prev[n] = p; else c->lru_tail = p;
    c->lru_prev[b] = c->lru_next[b] = -1;
    c->n_cached--;
}

static void lru_push(nb_kvcache *c, int32_t b) {
    c->lru_prev[b] = c->lru_tail;
    c->lru_next[b] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = b; else c->lru_head = b;
    c->lru_tail = b;
    c->n_cached++;
}

static void unhash(nb_kvcache *c, int32_t b) {
    int32_t *pp = &c->buckets[c->hash[b] & c->mask];
    while (*pp != b) {
        NB_ASSERT(*pp >= 0);
        pp = &c->chain[*pp];
    }
    *pp = c->chain[b];
    c->chain[b] = -1;
    c->hashed[b] = false;
}

static bool is_free(const nb_kvcache *c, int64_t b) { return c->free_bits[b / 64] >> (b % 64) & 1; }

static void free_push(nb_kvcache *c, int32_t b) {
    c->free_bits[b / 64] |= 1ull << (b % 64);
    c->n_free++;
}

/* Where a block goes that does not continue its sequence's last one: the
 * middle of the longest run of free blocks (the first block of a run that
 * starts the pool), so that the sequence owning the block before the run
 * keeps room to grow into the first half, and this one into the second.
 * Sequences that grow side by side (batched decode) then each get long
 * runs of consecutive blocks - one contiguous run per KV head in the
 * head-major pool (model/kv.h) - where handing out the lowest free block
 * interleaved them block by block: a sequence holding every 8th block read
 * its keys at d4096 1.9-3.5x as slowly as one holding consecutive blocks
 * (docs/speed.md, session 38). A scan of the bitmap: one word per 64
 * blocks, once per sequence start or collision. */
static int32_t spread_pick(const nb_kvcache *c) {
    int64_t best = -1, best_len = 0, start = -1;
    const int64_t nw = (c->n + 63) / 64;
    for (int64_t w = 0; w <= nw; w++) {
        const uint64_t x = w < nw ? c->free_bits[w] : 0; /* a used sentinel past the end */
        if (x == ~0ull) {
            if (start < 0) start = w * 64;
            continue;
        }
        for (int i = 0; i < 64; i++) {
            if (x >> i & 1) {
                if (start < 0) start = w * 64 + i;
            } else if (start >= 0) {
                const int64_t len = w * 64 + i - start;
                if (len > best_len) best = start, best_len = len;
                start = -1;
            }
            if (!(x >> i) && start < 0) break; /* no free block left in this word */
        }
    }
    NB_ASSERT(best >= 0);
    return (int32_t)(best == 0 ? 0 : best + best_len / 2);
}

int32_t nb_kvcache_alloc(nb_kvcache *c, int32_t after) {
    int32_t b;
    if (c->n_free > 0) {
        b = after >= 0 && after + 1 < c->n && is_free(c, after + 1) ? after + 1 : spread_pick(c);
        c->free_bits[b / 64] &= ~(1ull << (b % 64));
        c->n_free--;
    } else if (c->lru_head >= 0) {
        b = c->lru_head;
        lru_remove(c, b);
        unhash(c, b);
        c->evictions++;
    } else {
        return -1;
    }
    NB_ASSERT(c->ref[b] == 0);
    c->ref[b] = 1;
    c->n_used++;
    return b;
}

void nb_kvcache_ref(nb_kvcache *c, int32_t b) {
    NB_ASSERT(b >= 0 && b < c->n && c->ref[b] > 0);
    c->ref[b]++;
}

void nb_kvcache_release(nb_kvcache *c, int32_t b) {
    NB_ASSERT(b >= 0 && b < c->n && c->ref[b] > 0);
    if (--c->ref[b] > 0) return;
    c->n_used--;
    if (c->hashed[b]) lru_push(c, b);
    else free_push(c, b);
}

uint64_t nb_kvcache_hash(uint64_t parent, const int32_t *tokens, int32_t n) {
    /* splitmix64-style mixing of each 32-bit token into the running state */
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uint32_t)n << 32);
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i];
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h ? h : 1; /* 0 is the parent of the first block */
}

static int32_t find(const nb_kvcache *c, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    for (int32_t b = c->buckets[hash & c->mask]; b >= 0; b = c->chain[b])
        if (c->hash[b] == hash && c->parent[b] == parent &&
            !memcmp(c->tokens + (int64_t)b * c->bs, tokens, (size_t)c->bs * sizeof(int32_t)))
            return b;
    return -1;
}

int32_t nb_kvcache_lookup(nb_kvcache *c, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    if (!c->prefix) return -1;
    int32_t b = find(c, hash, parent, tokens);
    if (b < 0) return -1;
    if (c->ref[b] == 0) {
        lru_remove(c, b);
        c->n_used++;
    }
    c->ref[b]++;
    return b;
}

void nb_kvcache_commit(nb_kvcache *c, int32_t b, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    NB_ASSERT(b >= 0 && b < c->n && c->ref[b] > 0);
    if (!c->prefix || c->hashed[b]) return;
    for (int32_t o = c->buckets[hash & c->mask]; o >= 0; o = c->chain[o])
        if (c->hash[o] == hash) return; /* another block holds this hash (or a colliding one) */
    c->hashed[b] = true;
    c->hash[b] = hash;
    c->parent[b] = parent;
    memcpy(c->tokens + (int64_t)b * c->bs, tokens, (size_t)c->bs * sizeof(int32_t));
    uint64_t k = hash & c->mask;
    c->chain[b] = c->buckets[k];
    c->buckets[k] = b;
}

nb_status nb_kvcache_cow(nb_kvcache *c, int32_t *block) {
    int32_t b = *block;
    NB_ASSERT(b >= 0 && b < c->n && c->ref[b] > 0);
    if (c->ref[b] == 1) return NB_OK;
    int32_t nbk = nb_kvcache_alloc(c, b);
    if (nbk < 0) return nb_fail(NB_ERR_CAPACITY, "no free KV block for a copy-on-write of block %d", b);
    if (c->copy) c->copy(c->copy_ud, nbk, b);
    nb_kvcache_release(c, b);
    *block = nbk;
    return NB_OK;
}

nb_status nb_kvcache_check(const nb_kvcache *c) {
    int64_t used = 0, cached = 0;
    uint8_t *seen = calloc((size_t)c->n, 1); /* 1 free, 2 lru */
    if (!seen) return NB_ERR_NOMEM;
    nb_status st = NB_OK;
    int64_t n_free = 0;
    for (int64_t w = 0; w < (c->n + 63) / 64 && st == NB_OK; w++)
        for (int i = 0; i < 64 && st == NB_OK; i++) {
            if (!(c->free_bits[w] >> i & 1)) continue;
            const int64_t b = w * 64 + i;
            if (b >= c->n) st = nb_fail(NB_ERR_INTERNAL, "free bit %lld past the %lld blocks", (long long)b, (long long)c->n);
            else if (c->ref[b] != 0 || c->hashed[b]) st = nb_fail(NB_ERR_INTERNAL, "free block %lld has refcount %d / hashed %d", (long long)b, c->ref[b], c->hashed[b]);
            else { seen[b] = 1; n_free++; }
        }
    if (st == NB_OK && n_free != c->n_free) st = nb_fail(NB_ERR_INTERNAL, "free bitmap holds %lld blocks, counter %lld", (long long)n_free, (long long)c->n_free);
    int32_t prev = -1;
    for (int32_t b = c->lru_head; b >= 0 && st == NB_OK; prev = b, b = c->lru_next[b]) {
        if (seen[b]) st = nb_fail(NB_ERR_INTERNAL, "block %d on the LRU list twice or also free", b);
        else if (c->ref[b] != 0 || !c->hashed[b]) st = nb_fail(NB_ERR_INTERNAL, "cached block %d has refcount %d / hashed %d", b, c->ref[b], c->hashed[b]);
        else if (c->lru_prev[b] != prev) st = nb_fail(NB_ERR_INTERNAL, "LRU back link of block %d broken", b);
        else { seen[b] = 2; cached++; }
    }
    if (st == NB_OK && prev != c->lru_tail) st = nb_fail(NB_ERR_INTERNAL, "LRU tail %d, list ends at %d", c->lru_tail, prev);
    for (int64_t b = 0; b < c->n && st == NB_OK; b++) {
        if (c->ref[b] < 0) st = nb_fail(NB_ERR_INTERNAL, "block %lld refcount %d", (long long)b, c->ref[b]);
        else if (c->ref[b] > 0) {
            used++;
            if (seen[b]) st = nb_fail(NB_ERR_INTERNAL, "block %lld in use but on a free list", (long long)b);
        } else if (!seen[b]) st = nb_fail(NB_ERR_INTERNAL, "block %lld leaked (refcount 0, on no list)", (long long)b);
        if (st == NB_OK && c->hashed[b] && find(c, c->hash[b], c->parent[b], c->tokens + b * c->bs) != (int32_t)b)
            st = nb_fail(NB_ERR_INTERNAL, "hashed block %lld not found under its hash", (long long)b);
    }
    if (st == NB_OK && (used != c->n_used || cached != c->n_cached || used + cached + c->n_free != c->n))
        st = nb_fail(NB_ERR_INTERNAL, "counters: used %lld/%lld cached %lld/%lld free %lld of %lld", (long long)used,
                     (long long)c->n_used, (long long)cached, (long long)c->n_cached, (long long)c->n_free, (long long)c->n);
    free(seen);
    return st;
}
