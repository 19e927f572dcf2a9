/* SHA-256 as specified in FIPS 180-4 section 6.2: 64-byte blocks, message
 * padded with 0x80, zeros, and the 64-bit big-endian bit length; eight 32-bit
 * working variables, 64 rounds with the K constants of section 4.2.2
 * (fractional parts of the cube roots of the first 64 primes) and the
 * initial hash of section 5.3.3 (square roots of the first 8 primes). */
#include "base/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void nb_sha256_init(nb_sha256_ctx *s) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->len = 0;
    s->nbuf = 0;
}

void nb_sha256_update(nb_sha256_ctx *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->len += n;
    if (s->nbuf) {
        size_t k = NB_MIN(n, (size_t)(64 - s->nbuf));
        memcpy(s->buf + s->nbuf, p, k);
        s->nbuf += (uint32_t)k;
        p += k;
        n -= k;
        if (s->nbuf < 64) return;
        block(s->h, s->buf);
        s->nbuf = 0;
    }
    for (; n >= 64; p += 64, n -= 64) block(s->h, p);
    if (n) {
        memcpy(s->buf, p, n);
        s->nbuf = (uint32_t)n;
    }
}

void nb_sha256_final(nb_sha256_ctx *s, uint8_t digest[32]) {
    uint64_t bits = s->len * 8;
    uint8_t pad[72] = {0x80};
    size_t padn = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
    for (int i = 0; i < 8; i++) pad[padn + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t len = s->len;
    nb_sha256_update(s, pad, padn + 8);
    s->len = len;
    NB_ASSERT(s->nbuf == 0);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(s->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void nb_sha256_hex(const uint8_t digest[32], char hex[65]) {
    static const char xd[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = xd[digest[i] >> 4];
        hex[2 * i + 1] = xd[digest[i] & 15];
    }
    hex[64] = '\0';
}

void nb_sha256(const void *data, size_t n, uint8_t digest[32]) {
    nb_sha256_ctx s;
    nb_sha256_init(&s);
    nb_sha256_update(&s, data, n);
    nb_sha256_final(&s, digest);
}

nb_status nb_sha256_file(const char *path, char hex[65]) {
    hex[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return nb_fail(e == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = nb_malloc(CHUNK);
    if (!buf) { fclose(f); return NB_ERR_NOMEM; }
    nb_sha256_ctx s;
    nb_sha256_init(&s);
    size_t r;
    while ((r = fread(buf, 1, CHUNK, f)) > 0) nb_sha256_update(&s, buf, r);
    int err = ferror(f);
    fclose(f);
    free(buf);
    if (err) return nb_fail(NB_ERR_IO, "%s: read error after %llu bytes", path, (unsigned long long)s.len);
    uint8_t d[32];
    nb_sha256_final(&s, d);
    nb_sha256_hex(d, hex);
    return NB_OK;
}
