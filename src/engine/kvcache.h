/* The KV block manager: which block of the KV pool (model/kv.h) belongs to
 * whom. Blocks are reference-counted; a block whose count drops to zero goes
 * back to the free list, or - when it holds a full, hashed block of tokens
 * (prefix caching) - to an LRU list of cached blocks that a later request
 * with the same prefix can take back, and that are evicted (oldest first)
 * only when no never-cached free block is left.
 *
 * Prefix cache keys: a full block of `block_size` tokens is keyed by a hash
 * chain, hash(parent block's hash, the block's tokens); the manager also
 * stores the parent hash and the tokens themselves and compares them on
 * lookup, so a 64-bit hash collision can never hand out wrong KV.
 *
 * Copy-on-write: a block shared by several sequences (refcount > 1) must not
 * be written; nb_kvcache_cow gives the writer a private copy (the caller's
 * copy callback moves the bytes).
 *
 * Not thread-safe: owned by the engine loop thread. Memory: 41-49 bytes per
 * block (the hash table's buckets: 2-4 per block) + 4 x block_size bytes per
 * block when prefix caching is on. */
#ifndef NB_ENGINE_KVCACHE_H
#define NB_ENGINE_KVCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct nb_kvcache nb_kvcache;

/* Copies the KV bytes of block src into block dst (all layers). */
typedef void (*nb_kvcache_copy_fn)(void *ud, int32_t dst, int32_t src);

/* n_blocks: 1 .. 2^30; block_size: 1 .. 1024. */
nb_status nb_kvcache_create(int64_t n_blocks, int32_t block_size, bool prefix_caching, nb_kvcache **out)
    __attribute__((warn_unused_result));
void nb_kvcache_free(nb_kvcache *c);
void nb_kvcache_set_copy(nb_kvcache *c, nb_kvcache_copy_fn fn, void *ud);

int32_t nb_kvcache_block_size(const nb_kvcache *c);
int64_t nb_kvcache_n_blocks(const nb_kvcache *c);
bool nb_kvcache_prefix_caching(const nb_kvcache *c);
/* Blocks an allocation can get now: free + cached-evictable. */
int64_t nb_kvcache_n_available(const nb_kvcache *c);
/* Blocks with refcount > 0. */
int64_t nb_kvcache_n_used(const nb_kvcache *c);
/* Free blocks holding a reusable prefix (refcount 0, hashed). */
int64_t nb_kvcache_n_cached(const nb_kvcache *c);
int32_t nb_kvcache_refcount(const nb_kvcache *c, int32_t block);
uint64_t nb_kvcache_evictions(const nb_kvcache *c);

/* A block with refcount 1 (a free one, else the least recently used cached
 * one, whose hash is dropped); -1 when none is available. `after`: the
 * sequence's last block (-1 for its first): the block after it when free,
 * so a sequence's blocks stay consecutive; else the middle of the longest
 * run of free blocks (block 0 when that run starts the pool), which leaves
 * the sequences on either side room to grow (kvcache.c spread_pick). */
int32_t nb_kvcache_alloc(nb_kvcache *c, int32_t after);
/* refcount += 1. */
void nb_kvcache_ref(nb_kvcache *c, int32_t block);
/* refcount -= 1; at 0 the block becomes free (or cached, if hashed). */
void nb_kvcache_release(nb_kvcache *c, int32_t block);

/* The hash of a full block of tokens after `parent` (0 for the first block). */
uint64_t nb_kvcache_hash(uint64_t parent, const int32_t *tokens, int32_t n);
/* A block holding exactly these tokens after this parent, with its refcount
 * incremented (taken off the LRU list if it was cached); -1 when none. */
int32_t nb_kvcache_lookup(nb_kvcache *c, uint64_t hash, uint64_t parent, const int32_t *tokens);
/* Registers a full block (refcount > 0) under its hash; a no-op when
 * prefix caching is off, the block is already hashed, or another block
 * already holds this hash. */
void nb_kvcache_commit(nb_kvcache *c, int32_t block, uint64_t hash, uint64_t parent, const int32_t *tokens);
bool nb_kvcache_is_hashed(const nb_kvcache *c, int32_t block);

/* Makes *block writable: when its refcount is > 1, allocates a new block,
 * copies the bytes (copy callback), releases the old one and stores the new
 * id in *block. NB_ERR_CAPACITY when no block is available. */
nb_status nb_kvcache_cow(nb_kvcache *c, int32_t *block) __attribute__((warn_unused_result));

/* Checks every invariant (refcounts >= 0, each block on exactly the list its
 * state says, counters match, hash table consistent). NB_ERR_INTERNAL with a
 * message naming the first violation. For tests. */
nb_status nb_kvcache_check(const nb_kvcache *c);

#endif
