/* Planar repacking of Q4_0 / Q8_0 rows, their scalar reference kernels and
 * dequantization (layouts in repack.h). */
#include "kernels/repack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "quant/blocks.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_types(void) {
    nb_dtype_register((nb_dtype)NB_Q4_0R, (nb_dtype_info){"Q4_0R", 32, 18});
    nb_dtype_register((nb_dtype)NB_Q8_0R, (nb_dtype_info){"Q8_0R", 32, 34});
    nb_dtype_register((nb_dtype)NB_Q8_0P, (nb_dtype_info){"Q8_0P", 32, 36});
}

void nb_repack_init(void) { pthread_once(&once, register_types); }

static bool have_kernels(void) {
    const char *e = getenv("NIBBLE_REPACK");
    if (e && !strcmp(e, "0")) return false;
    return nb_cpu_isa() >= NB_ISA_AVX512 && nb_cpu_get()->avx512vnni;
}

nb_dtype nb_repack_target(nb_dtype t) {
    nb_repack_init();
    if (!have_kernels()) return t;
    if (t == NB_Q4_0) return (nb_dtype)NB_Q4_0R;
    if (t == NB_Q8_0) return (nb_dtype)NB_Q8_0R;
    return t;
}

void nb_repack_rows(nb_dtype from, const void *src, void *dst, int64_t rows, int64_t K) {
    int64_t nb = K / 32;
    for (int64_t r = 0; r < rows; r++) {
        if (from == NB_Q4_0) {
            const nb_block_q4_0 *b = (const nb_block_q4_0 *)src + r * nb;
            uint8_t *d = (uint8_t *)dst + r * nb * 18;
            uint8_t *q = d + nb * 2;
            for (int64_t i = 0; i < nb; i++) {
                memcpy(q + i * 16, b[i].qs, 16);
                memcpy(d + i * 2, &b[i].d, 2);
            }
        } else if (from == NB_Q8_0) {
            const nb_block_q8_0 *b = (const nb_block_q8_0 *)src + r * nb;
            uint8_t *d = (uint8_t *)dst + r * nb * 34;
            uint8_t *q = d + nb * 2;
            for (int64_t i = 0; i < nb; i++) {
                for (int j = 0; j < 32; j++) q[i * 32 + j] = (uint8_t)(b[i].qs[j] + 128);
                memcpy(d + i * 2, &b[i].d, 2);
            }
        }
    }
}

static float getf(const void *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

static float geth(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return nb_fp16_to_fp32(h);
}

static void q4_0r_to_float(const void *src, float *dst, int64_t n) {
    int64_t nb = n / 32;
    const uint8_t *d = src;
    const uint8_t *q = d + nb * 2;
    for (int64_t i = 0; i < nb; i++) {
        float s = geth(d + i * 2);
        for (int j = 0; j < 16; j++) {
            dst[i * 32 + j] = s * (float)((q[i * 16 + j] & 15) - 8);
            dst[i * 32 + j + 16] = s * (float)((q[i * 16 + j] >> 4) - 8);
        }
    }
}

static void q8_0r_to_float(const void *src, float *dst, int64_t n) {
    int64_t nb = n / 32;
    const uint8_t *d = src;
    const uint8_t *q = d + nb * 2;
    for (int64_t i = 0; i < nb; i++) {
        float s = geth(d + i * 2);
        for (int j = 0; j < 32; j++) dst[i * 32 + j] = s * (float)(q[i * 32 + j] - 128);
    }
}

static void q8_0p_to_float(const void *src, float *dst, int64_t n) {
    int64_t nb = n / 32;
    const int8_t *q = src;
    const uint8_t *d = (const uint8_t *)src + nb * 32;
    for (int64_t i = 0; i < nb; i++) {
        float s = getf(d + i * 4);
        for (int j = 0; j < 32; j++) dst[i * 32 + j] = s * (float)q[i * 32 + j];
    }
}

/* As llama.cpp's x86 quantize_row_q8_0: id = 127/amax, ties to even, and the
 * scale rounded through fp16 (what the integer kernels multiply with). */
void nb_q8_0p_quantize_ref(const float *x, void *dst, int64_t n) {
    int64_t nb = n / 32;
    int8_t *q = dst;
    uint8_t *d = (uint8_t *)dst + nb * 32;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        float s = nb_fp16_to_fp32(nb_fp32_to_fp16(amax / 127.f));
        memcpy(d + i * 4, &s, 4);
        for (int j = 0; j < 32; j++) q[i * 32 + j] = (int8_t)nearbyintf(x[j] * id);
    }
}

void nb_q4_0r_dot_ref(int64_t n, const void *w, const void *a, float *out) {
    int64_t nb = n / 32;
    const uint8_t *wd = w, *q = wd + nb * 2;
    const int8_t *x = a;
    const uint8_t *ad = (const uint8_t *)a + nb * 32;
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int acc = 0;
        for (int j = 0; j < 16; j++)
            acc += ((q[i * 16 + j] & 15) - 8) * x[i * 32 + j] + ((q[i * 16 + j] >> 4) - 8) * x[i * 32 + j + 16];
        s += geth(wd + i * 2) * getf(ad + i * 4) * (float)acc;
    }
    *out = s;
}

void nb_q8_0r_dot_ref(int64_t n, const void *w, const void *a, float *out) {
    int64_t nb = n / 32;
    const uint8_t *wd = w, *q = wd + nb * 2;
    const int8_t *x = a;
    const uint8_t *ad = (const uint8_t *)a + nb * 32;
    float s = 0;
    for (int64_t i = 0; i < nb; i++) {
        int acc = 0;
        for (int j = 0; j < 32; j++) acc += (q[i * 32 + j] - 128) * x[i * 32 + j];
        s += geth(wd + i * 2) * getf(ad + i * 4) * (float)acc;
    }
    *out = s;
}

static const nb_qdot q4r_ref = {(nb_dtype)NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q4_0r_dot_ref, NULL, "scalar"};
static const nb_qdot q8r_ref = {(nb_dtype)NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q8_0r_dot_ref, NULL, "scalar"};
static const nb_qdot q4r_512 = {(nb_dtype)NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q4_0r_dot_avx512, NULL, "avx512"};
static const nb_qdot q8r_512 = {(nb_dtype)NB_Q8_0P, nb_q8_0p_quantize_ref, nb_q8_0r_dot_avx512, NULL, "avx512"};

const nb_qdot *nb_repack_qdot(nb_dtype t, nb_isa max_isa) {
    bool simd = max_isa >= NB_ISA_AVX512 && nb_cpu_isa() >= NB_ISA_AVX512 && nb_cpu_get()->avx512vnni;
    if ((int)t == NB_Q4_0R) return simd ? &q4r_512 : &q4r_ref;
    if ((int)t == NB_Q8_0R) return simd ? &q8r_512 : &q8r_ref;
    return NULL;
}

nb_to_float_fn nb_repack_to_float(nb_dtype t) {
    bool simd = nb_cpu_isa() >= NB_ISA_AVX512;
    if ((int)t == NB_Q4_0R) return simd ? nb_q4_0r_to_float_avx512 : q4_0r_to_float;
    if ((int)t == NB_Q8_0R) return simd ? nb_q8_0r_to_float_avx512 : q8_0r_to_float;
    if ((int)t == NB_Q8_0P) return q8_0p_to_float;
    return NULL;
}

size_t nb_actpack_bytes(int64_t K, int64_t n) {
    int64_t nb = K / 32, ng = (n + NB_ACTPACK_TOKENS - 1) / NB_ACTPACK_TOKENS;
    return (size_t)(ng * nb) * (512 + 16 * 4 + 16 * 4);
}

void nb_actpack_init(nb_actpack *ap, void *mem, int64_t n, int64_t K) {
    int64_t nb = K / 32, ng = (n + NB_ACTPACK_TOKENS - 1) / NB_ACTPACK_TOKENS;
    uint8_t *m = mem;
    ap->K = K; ap->nb = nb; ap->n = n; ap->ng = ng;
    ap->q = (int8_t *)m;
    m += (size_t)(ng * nb) * 512;
    ap->sum = (int32_t *)m;
    m += (size_t)(ng * nb) * 64;
    ap->d = (float *)m;
}

void nb_actpack_group(nb_actpack *ap, const float *X, int64_t g, int8_t *row) {
    const int64_t nb = ap->nb, K = ap->K;
    memset(ap->q + g * nb * 512, 0, (size_t)nb * 512);
    memset(ap->sum + g * nb * 16, 0, (size_t)nb * 64);
    memset(ap->d + g * nb * 16, 0, (size_t)nb * 64);
    for (int64_t tt = 0; tt < NB_ACTPACK_TOKENS && g * NB_ACTPACK_TOKENS + tt < ap->n; tt++) {
        nb_q8_0p_quantize_ref(X + (g * NB_ACTPACK_TOKENS + tt) * K, row, K);
        for (int64_t b = 0; b < nb; b++) {
            int8_t *dst = ap->q + (g * nb + b) * 512;
            int32_t s = 0;
            for (int kk = 0; kk < 8; kk++)
                for (int c = 0; c < 4; c++) {
                    int8_t v = row[b * 32 + kk * 4 + c];
                    dst[kk * 64 + tt * 4 + c] = v;
                    s += v;
                }
            ap->sum[(g * nb + b) * 16 + tt] = s;
            memcpy(&ap->d[(g * nb + b) * 16 + tt], row + K + b * 4, 4);
        }
    }
}

nb_repack_gemm_fn nb_repack_gemm(nb_dtype t, nb_isa max_isa) {
    if (max_isa < NB_ISA_AVX512 || nb_cpu_isa() < NB_ISA_AVX512 || !nb_cpu_get()->avx512vnni) return NULL;
    if ((int)t == NB_Q4_0R) return nb_q4_0r_gemm_avx512;
    if ((int)t == NB_Q8_0R) return nb_q8_0r_gemm_avx512;
    return NULL;
}
