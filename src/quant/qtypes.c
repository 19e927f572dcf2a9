/* The format registry (see qtypes.h): a static table of every quantized
 * format, looked up by dtype id or name, plus the row-length fallback rule. */
#include "quant/qtypes.h"

#include <math.h>
#include <strings.h>

#include "quant/quant_ref.h"

#define ENTRY(T, NAME, BLK, BYTES, TOF, FROMF, ACT, ...) \
    {.type = T, .name = NAME, .block = BLK, .block_bytes = BYTES,  \
     .bits_per_weight = 8.0 * (BYTES) / (BLK), .to_float = TOF, .from_float = FROMF, \
     .act_type = ACT, __VA_ARGS__}

static const nb_qtype table[] = {
    ENTRY(NB_Q4_0, "Q4_0", 32, 18, nb_dequant_q4_0, nb_quant_q4_0, NB_Q8_0,
          .desc = "ggml 4-bit, fp16 scale per 32"),
    ENTRY(NB_Q4_1, "Q4_1", 32, 20, nb_dequant_q4_1, nb_quant_q4_1, NB_Q8_0,
          .desc = "ggml 4-bit, fp16 scale + min per 32"),
    ENTRY(NB_Q5_0, "Q5_0", 32, 22, nb_dequant_q5_0, nb_quant_q5_0, NB_Q8_0,
          .desc = "ggml 5-bit, fp16 scale per 32"),
    ENTRY(NB_Q5_1, "Q5_1", 32, 24, nb_dequant_q5_1, nb_quant_q5_1, NB_Q8_0,
          .desc = "ggml 5-bit, fp16 scale + min per 32"),
    ENTRY(NB_Q8_0, "Q8_0", 32, 34, nb_dequant_q8_0, nb_quant_q8_0, NB_Q8_0,
          .desc = "ggml 8-bit, fp16 scale per 32 (also the activation format)"),
    ENTRY(NB_Q2_K, "Q2_K", 256, 84, nb_dequant_q2_K, nb_quant_q2_K, NB_Q8_K,
          .desc = "ggml k-quant 2-bit, 4-bit scales/mins per 16 in 256"),
    ENTRY(NB_Q3_K, "Q3_K", 256, 110, nb_dequant_q3_K, nb_quant_q3_K, NB_Q8_K,
          .desc = "ggml k-quant 3-bit, 6-bit scales per 16 in 256"),
    ENTRY(NB_Q4_K, "Q4_K", 256, 144, nb_dequant_q4_K, nb_quant_q4_K, NB_Q8_K,
          .desc = "ggml k-quant 4-bit, 6-bit scales/mins per 32 in 256"),
    ENTRY(NB_Q5_K, "Q5_K", 256, 176, nb_dequant_q5_K, nb_quant_q5_K, NB_Q8_K,
          .desc = "ggml k-quant 5-bit, 6-bit scales/mins per 32 in 256"),
    ENTRY(NB_Q6_K, "Q6_K", 256, 210, nb_dequant_q6_K, nb_quant_q6_K, NB_Q8_K,
          .desc = "ggml k-quant 6-bit, int8 scales per 16 in 256"),
    ENTRY(NB_Q8_K, "Q8_K", 256, 292, nb_dequant_q8_K, nb_quant_q8_K, NB_Q8_K, .act_only = true,
          .desc = "ggml 8-bit activations for k-quant dots (f32 scale, block sums)"),
    ENTRY(NB_W8, "W8", 32, 36, nb_dequant_w8, nb_quant_w8, NB_Q8_0, .per_row = true,
          .desc = "int8 per output channel, f32 scale (W8A16)"),
    ENTRY(NB_W8A8, "W8A8", 32, 36, nb_dequant_w8, nb_quant_w8, NB_Q8_T, .per_row = true,
          .desc = "int8 per output channel x int8 per-token activations"),
    ENTRY(NB_Q8_T, "Q8_T", 32, 36, nb_dequant_q8_T, nb_quant_q8_T, NB_Q8_T, .per_row = true,
          .act_only = true, .desc = "int8 activations, one f32 scale per token (W8A8)"),
    ENTRY(NB_W4G32, "W4G32", 32, 20, nb_dequant_w4g32, nb_quant_w4g32, NB_Q8_0, .group = 32,
          .desc = "4-bit, group 32, fp16 scale + zero point"),
    ENTRY(NB_W4G64, "W4G64", 64, 36, nb_dequant_w4g64, nb_quant_w4g64, NB_Q8_0, .group = 64,
          .desc = "4-bit, group 64, fp16 scale + zero point"),
    ENTRY(NB_W4G128, "W4G128", 128, 68, nb_dequant_w4g128, nb_quant_w4g128, NB_Q8_0, .group = 128,
          .desc = "4-bit, group 128, fp16 scale + zero point (AWQ/GPTQ g128)"),
    ENTRY(NB_W4G32S, "W4G32S", 32, 20, nb_dequant_w4g32s, nb_quant_w4g32s, NB_Q8_0, .group = 32,
          .desc = "4-bit symmetric, group 32 (zero point 8)"),
    ENTRY(NB_W4G64S, "W4G64S", 64, 36, nb_dequant_w4g64s, nb_quant_w4g64s, NB_Q8_0, .group = 64,
          .desc = "4-bit symmetric, group 64 (zero point 8)"),
    ENTRY(NB_W4G128S, "W4G128S", 128, 68, nb_dequant_w4g128s, nb_quant_w4g128s, NB_Q8_0, .group = 128,
          .desc = "4-bit symmetric, group 128 (zero point 8)"),
    ENTRY(NB_NF4, "NF4", 64, 36, nb_dequant_nf4, nb_quant_nf4, NB_F32,
          .desc = "bitsandbytes NF4, f32 absmax per 64"),
    ENTRY(NB_FP8_E4M3, "FP8_E4M3", 32, 36, nb_dequant_fp8_e4m3, nb_quant_fp8_e4m3, NB_F32,
          .per_row = true, .desc = "OCP FP8 E4M3, f32 scale per channel (or tensor)"),
    ENTRY(NB_FP8_E5M2, "FP8_E5M2", 32, 36, nb_dequant_fp8_e5m2, nb_quant_fp8_e5m2, NB_F32,
          .per_row = true, .desc = "OCP FP8 E5M2, f32 scale per channel (or tensor)"),
};

#define N_TABLE ((int)(sizeof table / sizeof table[0]))

const nb_qtype *nb_qtype_get(nb_dtype t) {
    for (int i = 0; i < N_TABLE; i++) {
        if (table[i].type == t) return &table[i];
    }
    return NULL;
}

const nb_qtype *nb_qtype_by_name(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_TABLE; i++) {
        if (!strcasecmp(table[i].name, name)) return &table[i];
    }
    return NULL;
}

const nb_qtype *nb_qtype_list(int *n) {
    *n = N_TABLE;
    return table;
}

bool nb_qtype_supports_row(nb_dtype t, int64_t ne0) {
    const nb_qtype *q = nb_qtype_get(t);
    return q && ne0 > 0 && ne0 % q->block == 0;
}

nb_dtype nb_qtype_fallback(nb_dtype t, int64_t ne0) {
    for (int guard = 0; guard < 8; guard++) {
        if (nb_qtype_supports_row(t, ne0)) return t;
        switch (t) {
        /* k-quants: llama-quantize's own fallbacks */
        /* llama-quantize takes IQ4_NL (4.5 bpw, block 32) for Q2_K/Q3_K, which
         * nibble does not implement: Q4_0 has the same size and block */
        case NB_Q2_K: case NB_Q3_K: t = NB_Q4_0; break;
        case NB_Q4_K: t = NB_Q5_0; break;
        case NB_Q5_K: t = NB_Q5_1; break;
        case NB_Q6_K: t = NB_Q8_0; break;
        case NB_W4G128: t = NB_W4G64; break;
        case NB_W4G64: t = NB_W4G32; break;
        case NB_W4G128S: t = NB_W4G64S; break;
        case NB_W4G64S: t = NB_W4G32S; break;
        case NB_NF4: t = NB_W4G32S; break;
        default: return NB_F16;
        }
    }
    return NB_F16;
}

bool nb_qtype_row_bytes(nb_dtype t, int64_t n, uint64_t *bytes) {
    if (n < 0) return false;
    return nb_dtype_row_bytes(t, (uint64_t)n, bytes);
}

void nb_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) { nb_quant_q8_0(x, dst, n); }
void nb_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) { nb_quant_q8_K(x, dst, n); }
void nb_quantize_row_q8_T_ref(const float *x, void *dst, int64_t n) { nb_quant_q8_T(x, dst, n); }

int64_t nb_first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}
