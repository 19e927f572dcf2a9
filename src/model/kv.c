/* KV pool allocation, stores with conversion to the pool's element type,
 * block copies, and the fp8 e4m3 conversions (see kv.h for the layout). */
#include "model/kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/hugemem.h"
#include "base/threadpool.h"

static int32_t type_elem(nb_kv_type t) {
    switch (t) {
    case NB_KVT_F32: return 4;
    case NB_KVT_F16: case NB_KVT_BF16: return 2;
    default: return 1;
    }
}

static bool type_scaled(nb_kv_type t) { return t == NB_KVT_INT8 || t == NB_KVT_FP8; }

const char *nb_kv_type_name(nb_kv_type t) {
    static const char *n[] = {"f32", "f16", "bf16", "int8", "fp8"};
    return (unsigned)t < 5 ? n[t] : "?";
}

uint64_t nb_kv_bytes_per_token_type(const nb_arch_desc *hp, nb_kv_type t) {
    uint64_t per_layer = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * (uint64_t)type_elem(t);
    if (type_scaled(t)) per_layer += (uint64_t)hp->n_head_kv * sizeof(float);
    return 2ull * (uint64_t)hp->n_layer * per_layer;
}

uint64_t nb_kv_bytes_per_token(const nb_arch_desc *hp) { return nb_kv_bytes_per_token_type(hp, NB_KVT_F32); }

nb_status nb_kv_pool_init(nb_kv_pool *kv, const nb_arch_desc *hp, int32_t block_size, int64_t n_blocks) {
    return nb_kv_pool_init_type(kv, hp, block_size, n_blocks, NB_KVT_F32);
}

nb_status nb_kv_pool_init_type(nb_kv_pool *kv, const nb_arch_desc *hp, int32_t block_size, int64_t n_blocks,
                               nb_kv_type type) {
    memset(kv, 0, sizeof *kv);
    if (block_size < 1 || block_size > 1024)
        return nb_fail(NB_ERR_RANGE, "block size %d outside 1..1024", block_size);
    if (n_blocks < 1) return nb_fail(NB_ERR_RANGE, "KV pool needs at least one block (got %lld)", (long long)n_blocks);
    if ((unsigned)type > NB_KVT_FP8) return nb_fail(NB_ERR_RANGE, "KV element type %d unknown", (int)type);
    kv->n_layer = hp->n_layer;
    kv->n_head_kv = hp->n_head_kv;
    kv->head_dim = hp->head_dim;
    kv->kv_dim = hp->n_head_kv * hp->head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->type = type;
    kv->elem = type_elem(type);
    uint64_t slots, n, ns = 0;
    if (!nb_mul_ok((uint64_t)n_blocks * (uint64_t)block_size, (uint64_t)hp->n_layer, &slots) ||
        !nb_mul_ok(slots, (uint64_t)kv->kv_dim * (uint64_t)kv->elem, &n) ||
        !nb_mul_ok(slots, (uint64_t)kv->n_head_kv * sizeof(float), &ns) || n > SIZE_MAX / 2)
        return nb_fail(NB_ERR_RANGE, "KV pool size overflows (%lld blocks of %d tokens)", (long long)n_blocks,
                       block_size);
    /* 2 MiB pages: a decode token reads every layer's and head's K and V,
     * hundreds of separate runs, and when slots held every head (one 4 KiB
     * page every few keys) 4 KiB pages missed the TLB at nearly every key
     * (d4096: attention 487 -> 394 us a layer, session 25) */
    kv->k = nb_map_anon(n, true);
    kv->v = nb_map_anon(n, true);
    kv->bytes = n;
    bool ok = kv->k && kv->v;
    if (ok && type_scaled(type)) {
        kv->ks = malloc(ns);
        kv->vs = malloc(ns);
        ok = kv->ks && kv->vs;
    }
    if (!ok) {
        nb_kv_pool_free(kv);
        return nb_fail(NB_ERR_NOMEM, "out of memory for a KV pool of 2 x %llu bytes", (unsigned long long)n);
    }
    return NB_OK;
}

void nb_kv_pool_free(nb_kv_pool *kv) {
    nb_unmap_anon(kv->k, kv->bytes);
    nb_unmap_anon(kv->v, kv->bytes);
    free(kv->ks);
    free(kv->vs);
    kv->k = kv->v = NULL;
    kv->ks = kv->vs = NULL;
}

enum { COMMIT_PIECE = 2 << 20, PAGE = 4096 };

typedef struct {
    nb_pool *pool;
    uint8_t *region[4];
    size_t bytes[4];
    int64_t pieces[4]; /* COMMIT_PIECE pieces of each region */
} commit_job;

static void commit_pieces(const commit_job *j, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        int r = 0;
        int64_t k = i;
        while (k >= j->pieces[r]) k -= j->pieces[r++];
        size_t from = (size_t)k * COMMIT_PIECE, to = NB_MIN(from + COMMIT_PIECE, j->bytes[r]);
        /* one write per 4 KiB page: with transparent huge pages the first
         * write of each 2 MiB brings the whole page, without them each page
         * needs its own; and the last byte, for a region that does not
         * start on a page (the scales' malloc, the pool's calloc under
         * ASan). Nothing is stored in a new pool yet. */
        volatile uint8_t *m = j->region[r];
        for (size_t b = from; b < to; b += PAGE) m[b] = 0;
        m[to - 1] = 0;
    }
}

static void commit_worker(void *arg, int ith, int nth) {
    (void)nth;
    commit_job *j = arg;
    int64_t lo, hi;
    while (nb_pool_chunk(j->pool, ith, &lo, &hi)) commit_pieces(j, lo, hi);
}

void nb_kv_pool_commit(nb_kv_pool *kv, nb_pool *threads) {
    size_t scales = kv->ks ? (size_t)kv->n_layer * (size_t)kv->n_blocks * (size_t)kv->block_size *
                                 (size_t)kv->n_head_kv * sizeof(float)
                           : 0;
    commit_job j = {threads,
                    {kv->k, kv->v, (uint8_t *)kv->ks, (uint8_t *)kv->vs},
                    {kv->bytes, kv->bytes, scales, scales},
                    {0}};
    int64_t n = 0;
    for (int r = 0; r < 4; r++)
        n += j.pieces[r] = j.region[r] ? (int64_t)((j.bytes[r] + COMMIT_PIECE - 1) / COMMIT_PIECE) : 0;
    if (threads) nb_pool_run_chunks(threads, commit_worker, &j, n, 1);
    else commit_pieces(&j, 0, n);
}

uint8_t nb_fp32_to_fp8_e4m3(float f) {
    if (isnan(f)) return 0x7f;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 448.0f) return sign | 0x7e;
    if (a < 0.015625f) { /* below 2^-6: subnormals in steps of 2^-9 (8 -> the smallest normal) */
        int q = (int)rintf(a * 512.0f);
        return (uint8_t)(sign | q);
    }
    int e2;
    float m = frexpf(a, &e2); /* a = m * 2^e2, m in [0.5, 1) */
    int e = e2 - 1;           /* a = (2m) * 2^e, 2m in [1, 2) */
    int q = (int)rintf((2.0f * m - 1.0f) * 8.0f);
    if (q == 8) { q = 0; e++; }
    int code = ((e + 7) << 3) | q;
    if (code > 0x7e) code = 0x7e;
    return (uint8_t)(sign | code);
}

float nb_fp8_e4m3_to_fp32(uint8_t c) {
    int e = (c >> 3) & 15, m = c & 7;
    float v;
    if ((c & 0x7f) == 0x7f) return NAN;
    if (e == 0) v = (float)m * (1.0f / 512.0f);
    else v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return (c & 0x80) ? -v : v;
}

/* One head's hd values x as the pool's type at dst; the 8-bit types' scale into *scale. */
static void store_head(const nb_kv_pool *kv, uint8_t *dst, float *scale, const float *x) {
    const int32_t hd = kv->head_dim;
    switch (kv->type) {
    case NB_KVT_F32: memcpy(dst, x, (size_t)hd * sizeof(float)); break;
    case NB_KVT_F16: {
        uint16_t *d = (uint16_t *)(void *)dst;
        for (int32_t i = 0; i < hd; i++) d[i] = nb_fp32_to_fp16(x[i]);
        break;
    }
    case NB_KVT_BF16: {
        uint16_t *d = (uint16_t *)(void *)dst;
        for (int32_t i = 0; i < hd; i++) d[i] = nb_fp32_to_bf16(x[i]);
        break;
    }
    case NB_KVT_INT8:
    case NB_KVT_FP8: {
        const float qmax = kv->type == NB_KVT_INT8 ? 127.0f : 448.0f;
        float amax = 0;
        for (int32_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float inv = amax > 0 ? qmax / amax : 0;
        *scale = amax / qmax;
        for (int32_t i = 0; i < hd; i++) {
            const float y = x[i] * inv;
            if (kv->type == NB_KVT_INT8) {
                const float r = rintf(y);
                dst[i] = (uint8_t)(int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
            } else {
                dst[i] = nb_fp32_to_fp8_e4m3(y);
            }
        }
        break;
    }
    }
}

void nb_kv_store(nb_kv_pool *kv, int layer, int32_t block, int32_t slot, const float *k, const float *v) {
    nb_attn_kv view;
    nb_kv_layer_view(kv, layer, &view);
    const int64_t base = view.k - kv->k, idx = nb_kv_index(kv, layer, block, slot);
    float unscaled;
    for (int32_t h = 0; h < kv->n_head_kv; h++) {
        const int64_t off = base + nb_attn_kv_off(&view, block, slot, h), s = idx * kv->n_head_kv + h;
        store_head(kv, kv->k + off, kv->ks ? kv->ks + s : &unscaled, k + (int64_t)h * kv->head_dim);
        store_head(kv, kv->v + off, kv->vs ? kv->vs + s : &unscaled, v + (int64_t)h * kv->head_dim);
    }
}

void nb_kv_copy_block(nb_kv_pool *kv, int32_t dst, int32_t src) {
    const size_t bytes = (size_t)kv->head_dim * (size_t)kv->elem * (size_t)kv->block_size;
    const size_t sbytes = (size_t)kv->n_head_kv * sizeof(float) * (size_t)kv->block_size;
    for (int l = 0; l < kv->n_layer; l++) {
        nb_attn_kv view;
        nb_kv_layer_view(kv, l, &view);
        const int64_t base = view.k - kv->k;
        for (int32_t h = 0; h < kv->n_head_kv; h++) {
            const int64_t d = base + nb_attn_kv_off(&view, dst, 0, h), s = base + nb_attn_kv_off(&view, src, 0, h);
            memcpy(kv->k + d, kv->k + s, bytes);
            memcpy(kv->v + d, kv->v + s, bytes);
        }
        if (kv->ks) {
            const int64_t d = nb_kv_index(kv, l, dst, 0), s = nb_kv_index(kv, l, src, 0);
            memcpy(kv->ks + d * kv->n_head_kv, kv->ks + s * kv->n_head_kv, sbytes);
            memcpy(kv->vs + d * kv->n_head_kv, kv->vs + s * kv->n_head_kv, sbytes);
        }
    }
}
