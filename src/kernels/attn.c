/* Attention kernel choice, the fp8 table and the scratch size (attn.h). */
#include "kernels/attn.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/half.h"

static float fp8_lut[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;

/* e4m3fn: s eeee mmm, bias 7; exponent 0 is subnormal (m x 2^-9);
 * s1111111 is NaN (no infinities). */
static void fp8_fill(void) {
    for (int c = 0; c < 256; c++) {
        int e = (c >> 3) & 15, m = c & 7;
        float v;
        if ((c & 0x7f) == 0x7f) v = NAN;
        else if (e == 0) v = ldexpf((float)m, -9);
        else v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
        fp8_lut[c] = (c & 0x80) ? -v : v;
    }
}

const float *nb_attn_fp8_table(void) {
    pthread_once(&fp8_once, fp8_fill);
    return fp8_lut;
}

float nb_attn_elem(nb_kv_type t, const uint8_t *row, int32_t i) {
    switch (t) {
    case NB_KVT_F32: { float f; memcpy(&f, row + 4 * (size_t)i, 4); return f; }
    case NB_KVT_F16: { uint16_t h; memcpy(&h, row + 2 * (size_t)i, 2); return nb_fp16_to_fp32(h); }
    case NB_KVT_BF16: { uint16_t h; memcpy(&h, row + 2 * (size_t)i, 2); return nb_bf16_to_fp32(h); }
    case NB_KVT_INT8: return (float)(int8_t)row[i];
    case NB_KVT_FP8: return nb_attn_fp8_table()[row[i]];
    }
    return 0;
}

/* Layout (the SIMD kernels', at the widest vector, 16 rows): per block of
 * 16 rows Q^T and O^T (head_dim x 16 each), running max, sum and the rows'
 * positions (16 each); then one chunk of K and of V as f32 (NB_ATTN_KC x
 * head_dim each) and the chunk's probabilities (NB_ATTN_KC x 16). The
 * decode tiles' layout is in attn_avx512.c (tile_dec). */
size_t nb_attn_scratch_floats(int head_dim, int nq, int nt) {
    size_t rb = ((size_t)nq * (size_t)nt + 15) / 16;
    /* the frame (attn_tile.h), then the AMX kernels' extra: the split
     * kernel's V^T hi and lo (head_dim x 16 words each), 2 x 32 slot
     * scales, 32 score vectors and 2 x 16 of probability pairs */
    size_t tile = rb * 16 * (2 * (size_t)head_dim + 3) + 2 * NB_ATTN_KC * (size_t)head_dim +
                  2 * 16 * (size_t)head_dim + 64 + 64 * 16 + 64;
    /* the AVX-512 decode tiles (<= 8 rows): Q^T and O^T (head_dim x 16
     * each), a chunk of K and V interleaved (NB_ATTN_KC_DECODE x head_dim
     * each) and a row of zeros */
    size_t dec = 2 * 16 * (size_t)head_dim + 2 * NB_ATTN_KC_DECODE * (size_t)head_dim + (size_t)head_dim + 64;
    return (size_t)nq * (size_t)nt <= 8 && dec > tile ? dec : tile;
}

nb_attn_fn nb_attn_get(nb_isa max_isa, const char **name) {
    nb_isa isa = nb_cpu_isa();
    if (isa > max_isa) isa = max_isa;
    nb_attn_fp8_table();
    nb_attn_fn f;
    if (isa >= NB_ISA_AVX512 && (f = nb_attn_avx512())) {
        if (name) *name = "avx512";
        return f;
    }
    if (isa >= NB_ISA_AVX2 && (f = nb_attn_avx2())) {
        if (name) *name = "avx2";
        return f;
    }
    if (name) *name = "scalar";
    return nb_attn_ref;
}
