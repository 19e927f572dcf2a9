/* GGUF writer: every value type and several tensor dtypes round-trip through
 * nb_gguf_open; the byte layout follows the GGUF spec (checked against an
 * independently computed size and offsets); copying llama.cpp-written files
 * key by key and tensor by tensor reproduces them byte for byte. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/half.h"
#include "formats/gguf.h"

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 512, "%s/%s", nb_test_tmpdir(), name);
    return p;
}

static void fill_bytes(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

typedef struct {
    const char *name;
    nb_dtype type;
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes; /* by hand: elements/block * block bytes */
} tspec;

static const tspec specs[] = {
    {"a.f32", NB_F32, 1, {7, 1, 1, 1}, 28},
    {"b.f16", NB_F16, 2, {5, 3, 1, 1}, 30},
    {"c.q4_0", NB_Q4_0, 2, {64, 3, 1, 1}, 2 * 18 * 3},
    {"d.q8_0", NB_Q8_0, 3, {32, 2, 2, 1}, 34 * 4},
    {"e.bf16", NB_BF16, 4, {3, 1, 2, 2}, 24},
    {"f.q4_k", NB_Q4_K, 1, {256, 1, 1, 1}, 144},
};
#define NSPEC (sizeof specs / sizeof specs[0])

static nb_status fill_stream(void *ctx, const char *name, void *buf, uint64_t nbytes) {
    (void)name;
    fill_bytes(buf, (size_t)nbytes, *(uint32_t *)ctx);
    return NB_OK;
}

static nb_status fill_fail(void *ctx, const char *name, void *buf, uint64_t nbytes) {
    (void)ctx; (void)name; (void)buf; (void)nbytes;
    return nb_fail(NB_ERR_IO, "generator broke");
}

static void roundtrip(uint32_t alignment) {
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    nb_gguf_value v;
    memset(&v, 0, sizeof v);
    /* every scalar type through nb_gguf_set_value, plus the typed setters */
    v.type = NB_GGUF_U8; v.num.u = 200; assert_int_equal(nb_gguf_set_value(w, "t.u8", &v), NB_OK);
    v.type = NB_GGUF_I8; v.num.i = -100; assert_int_equal(nb_gguf_set_value(w, "t.i8", &v), NB_OK);
    v.type = NB_GGUF_U16; v.num.u = 60000; assert_int_equal(nb_gguf_set_value(w, "t.u16", &v), NB_OK);
    v.type = NB_GGUF_I16; v.num.i = -30000; assert_int_equal(nb_gguf_set_value(w, "t.i16", &v), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "t.u32", 4000000000u), NB_OK);
    assert_int_equal(nb_gguf_set_i32(w, "t.i32", -2000000000), NB_OK);
    assert_int_equal(nb_gguf_set_f32(w, "t.f32", 1.5e-5f), NB_OK);
    assert_int_equal(nb_gguf_set_bool(w, "t.bool", true), NB_OK);
    assert_int_equal(nb_gguf_set_str(w, "t.str", "h\xc3\xa9llo"), NB_OK);
    assert_int_equal(nb_gguf_set_str(w, "t.empty", ""), NB_OK);
    assert_int_equal(nb_gguf_set_u64(w, "t.u64", 0xfedcba9876543210ull), NB_OK);
    v.type = NB_GGUF_I64; v.num.i = INT64_MIN + 5; assert_int_equal(nb_gguf_set_value(w, "t.i64", &v), NB_OK);
    v.type = NB_GGUF_F64; v.num.f = 3.141592653589793; assert_int_equal(nb_gguf_set_value(w, "t.f64", &v), NB_OK);
    /* arrays */
    const uint8_t a_u8[] = {0, 1, 255};
    const int16_t a_i16[] = {-1, 2, -32768};
    const int32_t a_i32[] = {-7, 0, 7, 123456};
    const float a_f32[] = {0.5f, -2.25f};
    const uint64_t a_u64[] = {1, UINT64_MAX};
    const double a_f64[] = {1e300, -1e-300, 0};
    const uint8_t a_bool[] = {1, 0, 1};
    assert_int_equal(nb_gguf_set_arr(w, "a.u8", NB_GGUF_U8, a_u8, 3), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.i16", NB_GGUF_I16, a_i16, 3), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.i32", NB_GGUF_I32, a_i32, 4), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.f32", NB_GGUF_F32, a_f32, 2), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.u64", NB_GGUF_U64, a_u64, 2), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.f64", NB_GGUF_F64, a_f64, 3), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.bool", NB_GGUF_BOOL, a_bool, 3), NB_OK);
    assert_int_equal(nb_gguf_set_arr(w, "a.empty", NB_GGUF_I32, NULL, 0), NB_OK);
    const char *strs[] = {"one", "", "thr\0ee"};
    const uint64_t lens[] = {3, 0, 6};
    assert_int_equal(nb_gguf_set_arr_str(w, "a.str", strs, lens, 3), NB_OK);
    /* replacing keeps the position: t.u32 stays 5th, with the new value */
    assert_int_equal(nb_gguf_set_u32(w, "t.u32", 7), NB_OK);
    if (alignment) assert_int_equal(nb_gguf_set_u32(w, "general.alignment", alignment), NB_OK);
    /* refused values */
    assert_int_equal(nb_gguf_set_arr(w, "a.badbool", NB_GGUF_BOOL, (const uint8_t[]){2}, 1), NB_ERR_RANGE);
    assert_int_equal(nb_gguf_set_arr(w, "a.bad", NB_GGUF_STRING, a_u8, 1), NB_ERR_INVALID);

    /* tensors: copied, borrowed and streamed */
    uint8_t *data[NSPEC];
    static uint32_t seeds[NSPEC];
    for (size_t i = 0; i < NSPEC; i++) {
        data[i] = malloc(specs[i].nbytes);
        seeds[i] = (uint32_t)i + 11;
        fill_bytes(data[i], specs[i].nbytes, seeds[i]);
        nb_status st;
        if (i % 3 == 0) st = nb_gguf_writer_add_tensor(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne, data[i]);
        else if (i % 3 == 1) st = nb_gguf_writer_add_tensor_ref(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne, data[i]);
        else st = nb_gguf_writer_add_tensor_fn(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne, fill_stream, &seeds[i]);
        assert_int_equal(st, NB_OK);
    }
    if (specs[0].nbytes) data[0][0] ^= 0xff; /* add_tensor copied: this change must not show */
    data[0][0] ^= 0xff;
    /* refused tensors */
    assert_int_equal(nb_gguf_writer_add_tensor_ref(w, "bad.q4", NB_Q4_0, 1, (int64_t[]){33}, data[0]), NB_ERR_INVALID);
    assert_int_equal(nb_gguf_writer_add_tensor_ref(w, "a.f32", NB_F32, 1, (int64_t[]){7}, data[0]), NB_ERR_INVALID);
    assert_int_equal(nb_gguf_writer_add_tensor_ref(w, "bad.dims", NB_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, data[0]), NB_ERR_INVALID);
    assert_int_equal(nb_gguf_writer_add_tensor_ref(w, "bad.zero", NB_F32, 2, (int64_t[]){4, 0}, data[0]), NB_ERR_INVALID);
    char longname[80];
    memset(longname, 'x', 64);
    longname[64] = 0;
    assert_int_equal(nb_gguf_writer_add_tensor_ref(w, longname, NB_F32, 1, (int64_t[]){1}, data[0]), NB_ERR_INVALID);

    const char *path = tmp_path(alignment ? "rt-align.gguf" : "rt.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);

    nb_gguf *g;
    nb_status st = nb_gguf_open(path, &g);
    if (st != NB_OK) fail_msg("%s", nb_errmsg());
    uint32_t A = alignment ? alignment : 32;
    assert_int_equal(nb_gguf_version(g), 3);
    assert_int_equal(nb_gguf_alignment(g), A);
    assert_int_equal(nb_gguf_n_kv(g), 22 + (alignment ? 1 : 0));
    assert_string_equal(nb_gguf_key(g, 0), "t.u8");
    assert_string_equal(nb_gguf_key(g, 4), "t.u32");
    const nb_gguf_value *x;
    x = nb_gguf_find(g, "t.u8"); assert_int_equal(x->type, NB_GGUF_U8); assert_int_equal(x->num.u, 200);
    x = nb_gguf_find(g, "t.i8"); assert_int_equal(x->type, NB_GGUF_I8); assert_int_equal(x->num.i, -100);
    x = nb_gguf_find(g, "t.u16"); assert_int_equal(x->type, NB_GGUF_U16); assert_int_equal(x->num.u, 60000);
    x = nb_gguf_find(g, "t.i16"); assert_int_equal(x->type, NB_GGUF_I16); assert_int_equal(x->num.i, -30000);
    x = nb_gguf_find(g, "t.u32"); assert_int_equal(x->type, NB_GGUF_U32); assert_int_equal(x->num.u, 7);
    x = nb_gguf_find(g, "t.i32"); assert_int_equal(x->type, NB_GGUF_I32); assert_int_equal(x->num.i, -2000000000);
    x = nb_gguf_find(g, "t.f32"); assert_int_equal(x->type, NB_GGUF_F32); assert_true(x->num.f == (double)1.5e-5f);
    x = nb_gguf_find(g, "t.bool"); assert_int_equal(x->type, NB_GGUF_BOOL); assert_true(x->num.b);
    x = nb_gguf_find(g, "t.str"); assert_int_equal(x->type, NB_GGUF_STRING); assert_string_equal(x->str, "h\xc3\xa9llo");
    assert_int_equal(x->str_len, 6);
    x = nb_gguf_find(g, "t.empty"); assert_int_equal(x->type, NB_GGUF_STRING); assert_int_equal(x->str_len, 0);
    x = nb_gguf_find(g, "t.u64"); assert_int_equal(x->type, NB_GGUF_U64); assert_true(x->num.u == 0xfedcba9876543210ull);
    x = nb_gguf_find(g, "t.i64"); assert_int_equal(x->type, NB_GGUF_I64); assert_true(x->num.i == INT64_MIN + 5);
    x = nb_gguf_find(g, "t.f64"); assert_int_equal(x->type, NB_GGUF_F64); assert_true(x->num.f == 3.141592653589793);
    x = nb_gguf_find(g, "a.u8"); assert_int_equal(x->arr_type, NB_GGUF_U8); assert_int_equal(x->n, 3);
    assert_memory_equal(x->arr, a_u8, sizeof a_u8);
    x = nb_gguf_find(g, "a.i16"); assert_int_equal(x->arr_type, NB_GGUF_I16); assert_memory_equal(x->arr, a_i16, sizeof a_i16);
    x = nb_gguf_find(g, "a.i32"); assert_int_equal(x->n, 4); assert_memory_equal(x->arr, a_i32, sizeof a_i32);
    x = nb_gguf_find(g, "a.f32"); assert_int_equal(x->arr_type, NB_GGUF_F32); assert_memory_equal(x->arr, a_f32, sizeof a_f32);
    x = nb_gguf_find(g, "a.u64"); assert_memory_equal(x->arr, a_u64, sizeof a_u64);
    x = nb_gguf_find(g, "a.f64"); assert_int_equal(x->arr_type, NB_GGUF_F64); assert_memory_equal(x->arr, a_f64, sizeof a_f64);
    x = nb_gguf_find(g, "a.bool"); assert_int_equal(x->arr_type, NB_GGUF_BOOL); assert_memory_equal(x->arr, a_bool, 3);
    x = nb_gguf_find(g, "a.empty"); assert_int_equal(x->type, NB_GGUF_ARRAY); assert_int_equal(x->n, 0);
    x = nb_gguf_find(g, "a.str"); assert_int_equal(x->arr_type, NB_GGUF_STRING); assert_int_equal(x->n, 3);
    assert_string_equal(x->strs[0], "one");
    assert_int_equal(x->lens[1], 0);
    assert_int_equal(x->lens[2], 6);
    assert_memory_equal(x->strs[2], "thr\0ee", 6);
    assert_null(nb_gguf_find(g, "a.badbool"));

    assert_int_equal(nb_gguf_n_tensors(g), NSPEC);
    const uint8_t *file = nb_gguf_file_data(g);
    uint64_t data_off = nb_gguf_data_offset(g);
    assert_int_equal(data_off % A, 0);
    uint64_t expect_off = 0;
    for (size_t i = 0; i < NSPEC; i++) {
        const nb_tensor *t = nb_gguf_tensor(g, (int64_t)i);
        assert_string_equal(t->name, specs[i].name);
        assert_int_equal(t->type, specs[i].type);
        assert_int_equal(t->n_dims, specs[i].n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], specs[i].ne[d]);
        assert_int_equal(t->nbytes, specs[i].nbytes);
        /* offsets relative to the data section, each a multiple of A */
        assert_int_equal((const uint8_t *)t->data - file, data_off + expect_off);
        assert_memory_equal(t->data, data[i], specs[i].nbytes);
        /* padding after each tensor is zeros */
        uint64_t end = specs[i].nbytes, padded = (end + A - 1) / A * A;
        for (uint64_t b = end; b < padded; b++) assert_int_equal(((const uint8_t *)t->data)[b], 0);
        expect_off += padded;
    }
    assert_int_equal(nb_gguf_file_size(g), data_off + expect_off);
    nb_gguf_close(g);
    for (size_t i = 0; i < NSPEC; i++) free(data[i]);
}

static void test_roundtrip_default_alignment(void **state) { (void)state; roundtrip(0); }
static void test_roundtrip_alignment_64(void **state) { (void)state; roundtrip(64); }

/* A minimal file computed by hand, byte by byte, from the spec. */
static void test_exact_bytes(void **state) {
    (void)state;
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "k", 5), NB_OK);
    const float f[2] = {1.0f, -2.0f};
    assert_int_equal(nb_gguf_writer_add_tensor(w, "t", NB_F32, 1, (int64_t[]){2}, f), NB_OK);
    const char *path = tmp_path("exact.gguf");
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);
    static const uint8_t want[] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, /* header 24 */
        1, 0, 0, 0, 0, 0, 0, 0, 'k', 4, 0, 0, 0, 5, 0, 0, 0,                         /* kv -> 41 */
        1, 0, 0, 0, 0, 0, 0, 0, 't', 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,             /* name, n_dims, ne */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                                          /* type, offset -> 74 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,           /* pad to 96 */
        0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0,                                             /* data */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* pad to 128 */
    };
    char *got;
    size_t n;
    assert_int_equal(nb_read_file(path, 1 << 20, &got, &n), NB_OK);
    bool same = n == sizeof want && !memcmp(got, want, sizeof want);
    free(got);
    assert_true(same);
}

static void test_errors(void **state) {
    (void)state;
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "general.alignment", 48), NB_OK);
    assert_int_equal(nb_gguf_writer_write(w, tmp_path("bad-align.gguf")), NB_ERR_RANGE);
    assert_non_null(strstr(nb_errmsg(), "general.alignment"));
    assert_int_equal(nb_gguf_set_u32(w, "general.alignment", 32), NB_OK);
    assert_int_equal(nb_gguf_writer_add_tensor_fn(w, "s", NB_F32, 1, (int64_t[]){4}, fill_fail, NULL), NB_OK);
    const char *p = tmp_path("fail.gguf");
    assert_int_equal(nb_gguf_writer_write(w, p), NB_ERR_IO);
    assert_non_null(strstr(nb_errmsg(), "generator broke"));
    assert_false(nb_file_exists(p)); /* nothing left behind under the final name */
    assert_int_equal(nb_gguf_writer_write(w, "/nonexistent-dir/x.gguf"), NB_ERR_IO);
    nb_gguf_writer_free(w);
}

/* Copying every KV and tensor of a llama.cpp-written file reproduces it exactly. */
static void copy_exact(const char *rel) {
    const char *src = nb_test_shared(rel);
    if (!src) skip();
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(src, &g), NB_OK);
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    assert_int_equal(nb_gguf_copy_kv(w, g, NULL), NB_OK);
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        const nb_tensor *t = nb_gguf_tensor(g, i);
        assert_int_equal(nb_gguf_writer_add_tensor_ref(w, t->name, t->type, t->n_dims, t->ne, t->data), NB_OK);
    }
    const char *dst = tmp_path("copy.gguf");
    assert_int_equal(nb_gguf_writer_write(w, dst), NB_OK);
    nb_gguf_writer_free(w);
    nb_map a, b;
    assert_int_equal(nb_map_file(src, &a), NB_OK);
    assert_int_equal(nb_map_file(dst, &b), NB_OK);
    size_t diff = 0;
    while (diff < a.size && diff < b.size && a.data[diff] == b.data[diff]) diff++;
    bool same = a.size == b.size && diff == a.size;
    nb_unmap(&a);
    nb_unmap(&b);
    nb_gguf_close(g);
    if (!same) fail_msg("%s: copy differs at byte %zu", rel, diff);
}

static void test_copy_llama_cpp_files(void **state) {
    (void)state;
    copy_exact("models/synth-llama-Q4_0.gguf");
    copy_exact("models/synth-llama-Q4_K_M.gguf");
    copy_exact("models/synth-llama-F16.gguf");
    copy_exact("models/synth-qwen2-Q4_0.gguf");
    copy_exact("models/aidreams260K.gguf");
    copy_exact("vocab/ggml-vocab-gpt-2.gguf");
}

/* skip_prefix leaves those keys out. */
static void test_copy_kv_skip(void **state) {
    (void)state;
    const char *src = nb_test_shared("vocab/ggml-vocab-llama-spm.gguf");
    if (!src) skip();
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(src, &g), NB_OK);
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    assert_int_equal(nb_gguf_copy_kv(w, g, "tokenizer."), NB_OK);
    const char *dst = tmp_path("skip.gguf");
    assert_int_equal(nb_gguf_writer_write(w, dst), NB_OK);
    nb_gguf_writer_free(w);
    nb_gguf *h;
    assert_int_equal(nb_gguf_open(dst, &h), NB_OK);
    int64_t kept = 0;
    for (int64_t i = 0; i < nb_gguf_n_kv(g); i++)
        if (strncmp(nb_gguf_key(g, i), "tokenizer.", 10)) kept++;
    assert_true(kept > 0 && kept < nb_gguf_n_kv(g));
    assert_int_equal(nb_gguf_n_kv(h), kept);
    assert_null(nb_gguf_find(h, "tokenizer.ggml.tokens"));
    nb_gguf_close(h);
    nb_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_default_alignment),
        cmocka_unit_test(test_roundtrip_alignment_64),
        cmocka_unit_test(test_exact_bytes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_copy_llama_cpp_files),
        cmocka_unit_test(test_copy_kv_skip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
