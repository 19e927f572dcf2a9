/* Small deterministic PRNG for sampling: xoshiro256** seeded with
 * splitmix64 (Blackman & Vigna's published algorithms, written from their
 * description). Pure integer arithmetic, so the same seed gives the same
 * stream on every machine and compiler; not for cryptography.
 *
 * The state is a plain struct owned by the caller (one per request), so it
 * needs no locking. nb_rng_uniform() returns a double in [0, 1) built from
 * the top 53 bits of one 64-bit output (every value is k * 2^-53). */
#ifndef NB_ENGINE_RNG_H
#define NB_ENGINE_RNG_H

#include <stdint.h>

typedef struct nb_rng {
    uint64_t s[4];
} nb_rng;

/* splitmix64: advances *x by the golden-ratio increment and returns the
 * mixed value. Used to expand a 64-bit seed into the 256-bit state. */
static inline uint64_t nb_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Seeds the four state words with four consecutive splitmix64 outputs
 * (never all zero, since splitmix64 is a bijection of distinct inputs). */
static inline void nb_rng_seed(nb_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = nb_splitmix64(&x);
}

static inline uint64_t nb_rng_rotl_(uint64_t v, int k) {
    return (v << k) | (v >> (64 - k));
}

/* xoshiro256**: next 64-bit output. */
static inline uint64_t nb_rng_next(nb_rng *r) {
    uint64_t *s = r->s;
    const uint64_t result = nb_rng_rotl_(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = nb_rng_rotl_(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) from the top 53 bits. */
static inline double nb_rng_uniform(nb_rng *r) {
    return (double)(nb_rng_next(r) >> 11) * 0x1.0p-53;
}

#endif
