/* Conformance vectors for the quantized HF layouts (formats/hf_quant.h):
 * for each layout a small tensor whose packed words are computed here from
 * known integers following the published layout (docs/formats.md lists the
 * sources), unpacked by nibble and checked element by element, then emitted
 * into nibble's blocks, which this test decodes by hand from the block
 * layout of docs/quant.md (not with nibble's dequantizers). Literal words
 * pin the bit orders: AWQ's [0,2,4,6,1,3,5,7] nibble order, GPTQ's
 * sequential order and zero-1, bitsandbytes' high-nibble-first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "base/half.h"
#include "formats/hf_quant.h"
#include "base/blocks.h"

/* nibble W4G<G> block decoder written from docs/quant.md. */
static float w4g_value(const uint8_t *row, int G, int64_t k) {
    const uint8_t *blk = row + (k / G) * (4 + G / 2);
    uint16_t h;
    memcpy(&h, blk, 2);
    int z = blk[2], j = (int)(k % G), c = j / 32, jj = j % 32;
    uint8_t byte = blk[4 + c * 16 + jj % 16];
    int q = jj < 16 ? byte & 15 : byte >> 4;
    return nb_fp16_to_fp32(h) * (float)(q - z);
}

static uint32_t code(int r, int k) { return (uint32_t)((r * 7 + k * 3 + (r * k) % 5) % 16); }

/* One AWQ word with columns 0..7 = 1..8: nibbles hold columns 0,2,4,6,1,3,5,7. */
static void test_awq_literal(void **state) {
    (void)state;
    int K = 32, R = 8, G = 32;
    uint32_t qw[32], qz[1] = {0x86427531u};
    uint16_t sc[8];
    for (int k = 0; k < K; k++) qw[k] = 0x86427531u; /* every input: column j has code j+1 */
    for (int r = 0; r < R; r++) sc[r] = nb_fp32_to_fp16(0.5f);
    nb_hfq_unpacked u;
    assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 4, 1), NB_OK);
    nb_hfq_unpack_awq(qw, qz, sc, K, R, G, &u);
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < K; k++) assert_int_equal(u.q[r * K + k], r + 1);
        assert_int_equal(u.zero[r], r + 1);
    }
    nb_hfq_unpacked_free(&u);
}

static void test_awq(void **state) {
    (void)state;
    enum { K = 128, R = 16, G = 64, NG = K / G };
    uint32_t qw[K * R / 8] = {0}, qz[NG * R / 8] = {0};
    uint16_t sc[NG * R];
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int k = 0; k < K; k++)
        for (int c = 0; c < R / 8; c++)
            for (int i = 0; i < 8; i++) qw[k * (R / 8) + c] |= code(8 * c + order[i], k) << (4 * i);
    for (int g = 0; g < NG; g++) {
        for (int c = 0; c < R / 8; c++)
            for (int i = 0; i < 8; i++) qz[g * (R / 8) + c] |= (uint32_t)((8 * c + order[i] + g) % 16) << (4 * i);
        for (int r = 0; r < R; r++) sc[g * R + r] = nb_fp32_to_fp16(0.01f * (float)(r + 1) * (float)(g + 2));
    }
    nb_hfq_unpacked u;
    assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 4, NG), NB_OK);
    nb_hfq_unpack_awq(qw, qz, sc, K, R, G, &u);
    nb_dtype t;
    void *dst;
    uint64_t nb;
    int32_t *perm;
    assert_int_equal(nb_hfq_emit(&u, false, "m", &t, &dst, &nb, &perm), NB_OK);
    assert_int_equal(t, NB_W4G64);
    assert_null(perm);
    assert_int_equal(nb, (uint64_t)R * NG * 36);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            int g = k / G;
            float want = nb_fp16_to_fp32(sc[g * R + r]) * (float)((int)code(r, k) - (r + g) % 16);
            assert_true(w4g_value((uint8_t *)dst + r * NG * 36, 64, k) == want);
        }
    free(dst);
    nb_hfq_unpacked_free(&u);
}

/* GPTQ 4-bit: inputs 0..7 of a word = codes 1..8 -> 0x87654321; zeros stored
 * minus one (v1), 0 stored as 0xF. */
static void test_gptq4(void **state) {
    (void)state;
    enum { K = 64, R = 8, G = 32, NG = 2 };
    uint32_t qw[K / 8 * R], qz[NG * R / 8] = {0};
    uint16_t sc[NG * R];
    for (int kw = 0; kw < K / 8; kw++)
        for (int r = 0; r < R; r++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= code(r, kw * 8 + i) << (4 * i);
            qw[kw * R + r] = w;
        }
    qw[0] = 0x87654321u; /* input 0..7 of row 0 */
    int zero[NG][R];
    for (int g = 0; g < NG; g++)
        for (int r = 0; r < R; r++) {
            zero[g][r] = (r * 3 + g * 5) % 16; /* includes 0 -> stored 0xF */
            qz[g] |= (uint32_t)((zero[g][r] - 1) & 15) << (4 * r);
            sc[g * R + r] = nb_fp32_to_fp16(0.25f + 0.125f * (float)r - 0.0625f * (float)g);
        }
    for (int v2 = 0; v2 < 2; v2++) {
        uint32_t qz2[NG];
        for (int g = 0; g < NG; g++) {
            qz2[g] = 0;
            for (int r = 0; r < R; r++) qz2[g] |= (uint32_t)zero[g][r] << (4 * r);
        }
        nb_hfq_unpacked u;
        assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 4, NG), NB_OK);
        assert_int_equal(nb_hfq_unpack_gptq(qw, v2 ? qz2 : qz, sc, NULL, K, R, 4, NG, v2, "m", &u), NB_OK);
        for (int i = 0; i < 8; i++) assert_int_equal(u.q[i], i + 1);
        for (int g = 0; g < NG; g++)
            for (int r = 0; r < R; r++) assert_int_equal(u.zero[r * NG + g], zero[g][r]);
        nb_dtype t;
        void *dst;
        uint64_t nb;
        int32_t *perm;
        assert_int_equal(nb_hfq_emit(&u, false, "m", &t, &dst, &nb, &perm), NB_OK);
        assert_int_equal(t, NB_W4G32);
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                int q = r == 0 && k < 8 ? k + 1 : (int)code(r, k);
                float want = nb_fp16_to_fp32(sc[(k / G) * R + r]) * (float)(q - zero[k / G][r]);
                assert_true(w4g_value((uint8_t *)dst + r * (K / 32) * 20, 32, k) == want);
            }
        free(dst);
        nb_hfq_unpacked_free(&u);
    }
}

/* desc_act: g_idx a shuffled assignment of 64 inputs to 2 groups of 32. */
static void test_gptq_desc_act(void **state) {
    (void)state;
    enum { K = 64, R = 8, NG = 2 };
    uint32_t qw[K / 8 * R], qz[NG] = {0x77777777u, 0x77777777u}; /* sym: zero 8 stored as 7 */
    uint16_t sc[NG * R];
    int32_t gidx[K];
    int P[K];
    for (int i = 0; i < K; i++) P[i] = i;
    uint32_t seed = 12345;
    for (int i = K - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 16) % (uint32_t)(i + 1));
        int tmp = P[i];
        P[i] = P[j];
        P[j] = tmp;
    }
    for (int i = 0; i < K; i++) gidx[P[i]] = i / 32; /* GPTQ act-order: g_idx[perm[i]] = i // G */
    for (int kw = 0; kw < K / 8; kw++)
        for (int r = 0; r < R; r++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) w |= code(r, kw * 8 + i) << (4 * i);
            qw[kw * R + r] = w;
        }
    for (int i = 0; i < NG * R; i++) sc[i] = nb_fp32_to_fp16(0.1f * (float)(i + 1));
    nb_hfq_unpacked u;
    assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 4, NG), NB_OK);
    assert_int_equal(nb_hfq_unpack_gptq(qw, qz, sc, gidx, K, R, 4, NG, false, "m", &u), NB_OK);
    nb_dtype t;
    void *dst;
    uint64_t nb;
    int32_t *perm;
    assert_int_equal(nb_hfq_emit(&u, true, "m", &t, &dst, &nb, &perm), NB_OK);
    assert_int_equal(t, NB_W4G32S);
    assert_non_null(perm);
    /* stored input j multiplies activation perm[j]; its value is the original weight there */
    int seen[K] = {0};
    for (int j = 0; j < K; j++) seen[perm[j]]++;
    for (int k = 0; k < K; k++) assert_int_equal(seen[k], 1);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < K; j++) {
            int k = perm[j];
            float want = nb_fp16_to_fp32(sc[gidx[k] * R + r]) * (float)((int)code(r, k) - 8);
            assert_true(w4g_value((uint8_t *)dst + r * 2 * 20, 32, j) == want);
        }
    free(dst);
    free(perm);
    /* groups in aligned runs but out of order: no permutation needed */
    for (int k = 0; k < K; k++) gidx[k] = k < 32 ? 1 : 0;
    assert_int_equal(nb_hfq_unpack_gptq(qw, qz, sc, gidx, K, R, 4, NG, false, "m", &u), NB_OK);
    assert_int_equal(nb_hfq_emit(&u, true, "m", &t, &dst, &nb, &perm), NB_OK);
    assert_null(perm);
    assert_true(w4g_value(dst, 32, 0) == nb_fp16_to_fp32(sc[1 * R + 0]) * (float)((int)code(0, 0) - 8));
    free(dst);
    /* out of range */
    gidx[5] = 2;
    assert_int_equal(nb_hfq_unpack_gptq(qw, qz, sc, gidx, K, R, 4, NG, false, "model.layers.0.mlp.up_proj", &u),
                     NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "model.layers.0.mlp.up_proj.g_idx"));
    assert_non_null(strstr(nb_errmsg(), "element 5 = 2"));
    nb_hfq_unpacked_free(&u);
}

/* GPTQ 8-bit: four codes per word, 0x40302010 = inputs 0..3 = 0x10..0x40;
 * sym zero 128 stored as 127. */
static void test_gptq8(void **state) {
    (void)state;
    enum { K = 32, R = 4 };
    uint32_t qw[K / 4 * R], qz[1] = {0x7f7f7f7fu};
    uint16_t sc[R];
    for (int i = 0; i < K / 4 * R; i++) qw[i] = 0x40302010u + (uint32_t)i;
    for (int r = 0; r < R; r++) sc[r] = nb_fp32_to_fp16(0.5f * (float)(r + 1));
    nb_hfq_unpacked u;
    assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 8, 1), NB_OK);
    assert_int_equal(nb_hfq_unpack_gptq(qw, qz, sc, NULL, K, R, 8, 1, false, "m", &u), NB_OK);
    /* row 1, inputs 0..3 come from word qw[1] */
    assert_int_equal(u.q[1 * K + 0], 0x11);
    assert_int_equal(u.q[1 * K + 1], 0x20);
    assert_int_equal(u.q[1 * K + 3], 0x40);
    assert_int_equal(u.zero[2], 128);
    nb_dtype t;
    void *dst;
    uint64_t nb;
    int32_t *perm;
    assert_int_equal(nb_hfq_emit(&u, false, "m", &t, &dst, &nb, &perm), NB_OK);
    assert_int_equal(t, NB_W8);
    nb_block_w8 b;
    memcpy(&b, (uint8_t *)dst + 36, 36); /* row 1 */
    assert_true(b.d == 1.0f);
    assert_int_equal(b.qs[0], 0x11 - 128);
    assert_int_equal(b.qs[3], 0x40 - 128);
    free(dst);
    /* asymmetric zero 0 with code 200: 200 does not fit int8 -> refused */
    qz[0] = 0xffffffffu; /* stored -1 = zero 0 */
    qw[0] = 200;
    assert_int_equal(nb_hfq_unpack_gptq(qw, qz, sc, NULL, K, R, 8, 1, false, "m", &u), NB_OK);
    assert_int_equal(u.zero[0], 0);
    assert_int_equal(nb_hfq_emit(&u, false, "m", &t, &dst, &nb, &perm), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "int8"));
    nb_hfq_unpacked_free(&u);
}

/* compressed-tensors pack-quantized: signed -8..7 stored +8, input i of a
 * word at bits 4i; zero points packed along the output dimension. */
static void test_ct_pack(void **state) {
    (void)state;
    enum { K = 64, R = 9, G = 32, NG = 2 }; /* R = 9: zero points pad to 2 words */
    uint32_t wp[R * K / 8], zp[2 * NG] = {0};
    uint16_t sc[R * NG]; /* bf16 */
    int sv[R][K];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < K / 8; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) {
                sv[r][8 * c + i] = (int)code(r, 8 * c + i) - 8;
                w |= (uint32_t)(sv[r][8 * c + i] + 8) << (4 * i);
            }
            wp[r * (K / 8) + c] = w;
        }
    wp[0] = 0xfedcba98u; /* row 0 inputs 0..7 = signed 0..7 */
    for (int i = 0; i < 8; i++) sv[0][i] = i;
    int zs[R][NG];
    for (int r = 0; r < R; r++)
        for (int g = 0; g < NG; g++) {
            zs[r][g] = (r + 2 * g) % 16 - 8;
            zp[(r / 8) * NG + g] |= (uint32_t)(zs[r][g] + 8) << (4 * (r % 8));
            sc[r * NG + g] = nb_fp32_to_bf16(0.0078125f * (float)(r + g + 1)); /* exact in fp16 too */
        }
    nb_hfq_unpacked u;
    assert_int_equal(nb_hfq_unpacked_alloc(&u, K, R, 4, NG), NB_OK);
    nb_hfq_unpack_ct_pack(wp, sc, NB_BF16, zp, K, R, NG, &u);
    nb_dtype t;
    void *dst;
    uint64_t nb;
    int32_t *perm;
    assert_int_equal(nb_hfq_emit(&u, false, "m", &t, &dst, &nb, &perm), NB_OK);
    assert_int_equal(t, NB_W4G32);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            float want = nb_bf16_to_fp32(sc[r * NG + k / G]) * (float)(sv[r][k] - zs[r][k / G]);
            assert_true(w4g_value((uint8_t *)dst + r * 2 * 20, 32, k) == want);
        }
    free(dst);
    /* a bf16 scale without an exact fp16 value is refused, naming it */
    sc[3] = nb_fp32_to_bf16(1e-30f);
    nb_hfq_unpack_ct_pack(wp, sc, NB_BF16, NULL, K, R, NG, &u);
    assert_int_equal(nb_hfq_emit(&u, true, "blk", &t, &dst, &nb, &perm), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "fp16"));
    nb_hfq_unpacked_free(&u);
}

/* FP8 block scales 128x128: weight [256, 128], scale_inv [2, 1]. */
static void test_fp8_block(void **state) {
    (void)state;
    enum { K = 128, R = 256 };
    uint8_t *w = malloc(K * R);
    for (int i = 0; i < K * R; i++) w[i] = (uint8_t)(i * 31);
    float s[2] = {0.5f, 3.0f};
    nb_block_fp8 *b = malloc((size_t)R * (K / 32) * sizeof *b);
    nb_hfq_fp8_block(w, s, NB_F32, K, R, 128, 128, b);
    assert_true(b[0].d == 0.5f);
    assert_true(b[127 * 4 + 3].d == 0.5f);
    assert_true(b[128 * 4].d == 3.0f);
    assert_int_equal(b[200 * 4 + 2].f8[5], w[200 * K + 64 + 5]);
    /* per-channel CT FP8, bf16 scales */
    uint16_t cs[R];
    for (int r = 0; r < R; r++) cs[r] = nb_fp32_to_bf16((float)r);
    nb_hfq_scaled_rows(w, cs, NB_BF16, false, K, R, b);
    assert_true(b[7 * 4 + 1].d == 7.0f);
    nb_hfq_scaled_rows(w, s, NB_F32, true, K, R, b);
    assert_true(b[255 * 4 + 3].d == 0.5f);
    free(w);
    free(b);
}

/* bitsandbytes NF4: byte j = element 2j (high nibble) | element 2j+1 (low). */
static void test_nf4(void **state) {
    (void)state;
    enum { K = 128, R = 2 };
    uint8_t p[K * R / 2];
    int e[K * R];
    for (int i = 0; i < K * R; i++) e[i] = (i * 5 + i / 7) % 16;
    e[0] = 0xA;
    e[1] = 0x3;
    for (int j = 0; j < K * R / 2; j++) p[j] = (uint8_t)(e[2 * j] << 4 | e[2 * j + 1]);
    assert_int_equal(p[0], 0xA3);
    float am[4] = {1.0f, 2.0f, 0.5f, 4.0f};
    nb_block_nf4 b[4];
    nb_hfq_nf4(p, am, K, R, b);
    for (int blk = 0; blk < 4; blk++) {
        assert_true(b[blk].absmax == am[blk]);
        for (int j = 0; j < 64; j++) {
            int q = j < 32 ? b[blk].qs[j] & 15 : b[blk].qs[j - 32] >> 4;
            assert_int_equal(q, e[blk * 64 + j]);
        }
    }
    /* double quantization: absmax = code[q] * nested_absmax[b / 256] + offset */
    uint8_t qa[300];
    float code256[256], nested[2] = {2.0f, 4.0f};
    for (int i = 0; i < 256; i++) code256[i] = (float)i / 256.0f;
    for (int i = 0; i < 300; i++) qa[i] = (uint8_t)(i % 256);
    float out[300];
    nb_hfq_bnb_absmax(qa, nested, code256, 300, 256, 0.25f, out);
    assert_true(out[10] == 10.0f / 256.0f * 2.0f + 0.25f);
    assert_true(out[260] == 4.0f / 256.0f * 4.0f + 0.25f);
    /* the NF4 code table (bitsandbytes' published values) */
    assert_true(nb_hfq_nf4_levels[0] == -1.0f && nb_hfq_nf4_levels[7] == 0.0f && nb_hfq_nf4_levels[15] == 1.0f);
    assert_true(nb_hfq_nf4_levels[8] == 0.07958029955625534f);
}

/* quantization_config parsing: accepted forms and refusals naming field and value. */
static void test_config(void **state) {
    (void)state;
#define BASE_CONFIG                                                                                          \
    "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":2,"              \
    "\"intermediate_size\":128,\"vocab_size\":32,\"quantization_config\":%s}"
    static const struct {
        const char *qc;
        nb_status st;
        nb_hfq_method m;
        const char *msg;
    } c[] = {
        {"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"version\":\"gemm\",\"zero_point\":true,\"modules_to_not_convert\":[\"lm_head\"]}",
         NB_OK, NB_HFQ_AWQ, NULL},
        {"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"version\":\"gemv\"}", NB_ERR_UNSUPPORTED, 0, "'quantization_config.version' = 'gemv'"},
        {"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":100}", NB_ERR_UNSUPPORTED, 0, "'quantization_config.group_size' = 100"},
        {"{\"quant_method\":\"gptq\",\"bits\":8,\"group_size\":-1,\"desc_act\":true,\"sym\":false,\"checkpoint_format\":\"gptq_v2\"}",
         NB_OK, NB_HFQ_GPTQ, NULL},
        {"{\"quant_method\":\"gptq\",\"bits\":3,\"group_size\":128}", NB_ERR_UNSUPPORTED, 0, "'quantization_config.bits' = 3"},
        {"{\"quant_method\":\"gptq\",\"bits\":4,\"checkpoint_format\":\"marlin\"}", NB_ERR_UNSUPPORTED, 0, "'marlin'"},
        {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],"
         "\"weights\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\",\"symmetric\":true,\"dynamic\":false},"
         "\"input_activations\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"token\",\"dynamic\":true}}},\"ignore\":[\"lm_head\"]}",
         NB_OK, NB_HFQ_CT_FP8, NULL},
        {"{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],"
         "\"weights\":{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"group\",\"group_size\":128,\"symmetric\":false}}},\"ignore\":[\"re:.*lm_head\"]}",
         NB_OK, NB_HFQ_CT_PACK, NULL},
        {"{\"quant_method\":\"compressed-tensors\",\"format\":\"marlin-24\",\"config_groups\":{\"g\":{\"targets\":[\"Linear\"],\"weights\":{}}}}",
         NB_ERR_UNSUPPORTED, 0, "'quantization_config.format' = 'marlin-24'"},
        {"{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128]}", NB_OK,
         NB_HFQ_FP8_BLOCK, NULL},
        {"{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true,\"bnb_4bit_quant_type\":\"fp4\"}", NB_ERR_UNSUPPORTED, 0,
         "'quantization_config.bnb_4bit_quant_type' = 'fp4'"},
        {"{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true,\"bnb_4bit_quant_type\":\"nf4\",\"bnb_4bit_use_double_quant\":true}",
         NB_OK, NB_HFQ_BNB_NF4, NULL},
        {"{\"quant_method\":\"hqq\"}", NB_ERR_UNSUPPORTED, 0, "'quantization_config.quant_method' = 'hqq'"},
    };
    char buf[2048];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(buf, sizeof buf, BASE_CONFIG, c[i].qc);
        nb_hf_config h;
        nb_status rc = nb_hfconfig_parse(buf, strlen(buf), "cfg.json", &h);
        if (rc != c[i].st) fail_msg("case %zu: status %d, expected %d (%s)", i, rc, c[i].st, nb_errmsg());
        if (rc == NB_OK) {
            assert_int_equal(h.quant.method, c[i].m);
            assert_non_null(h.quant.json);
            nb_hfconfig_free(&h);
        } else if (!strstr(nb_errmsg(), c[i].msg)) {
            fail_msg("case %zu: message '%s' lacks '%s'", i, nb_errmsg(), c[i].msg);
        }
    }
    /* ignore matching */
    snprintf(buf, sizeof buf, BASE_CONFIG, c[7].qc);
    nb_hf_config h;
    assert_int_equal(nb_hfconfig_parse(buf, strlen(buf), "cfg.json", &h), NB_OK);
    assert_true(nb_hfquant_ignored(&h.quant, "lm_head"));
    assert_false(nb_hfquant_ignored(&h.quant, "model.layers.0.mlp.up_proj"));
    assert_int_equal(h.quant.group, 128);
    assert_false(h.quant.sym);
    nb_hfconfig_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_awq_literal), cmocka_unit_test(test_awq),       cmocka_unit_test(test_gptq4),
        cmocka_unit_test(test_gptq_desc_act), cmocka_unit_test(test_gptq8),   cmocka_unit_test(test_ct_pack),
        cmocka_unit_test(test_fp8_block),   cmocka_unit_test(test_nf4),       cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
