/* safetensors reader/writer: hand-built files (bytes written here, not by
 * the writer) for the reader, writer round trips, shard indexes, and every
 * malformed-input class giving an error that names the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "base/file.h"
#include "base/half.h"
#include "formats/safetensors.h"

/* u64 N | header padded with spaces to `pad_to` | data */
static size_t build(uint8_t *out, size_t cap, const char *hdr, size_t pad_to, const void *data, size_t dlen) {
    size_t hl = strlen(hdr), n = hl;
    while (pad_to && (8 + n) % pad_to) n++;
    assert_true(8 + n + dlen <= cap);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(out + 8, hdr, hl);
    memset(out + 8 + hl, ' ', n - hl);
    if (dlen) memcpy(out + 8 + n, data, dlen);
    return 8 + n + dlen;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 512, "%s/%s", nb_test_tmpdir(), name);
    return p;
}

static void expect_err_mem(const char *hdr, const void *data, size_t dlen, const char *needle, const char *needle2) {
    static uint8_t buf[4096];
    size_t n = build(buf, sizeof buf, hdr, 8, data, dlen);
    nb_safetensors *st = NULL;
    nb_status rc = nb_safetensors_open_mem(buf, n, "bad.safetensors", &st);
    if (rc == NB_OK) fail_msg("accepted malformed header %s", hdr);
    assert_null(st);
    const char *m = nb_errmsg();
    if (!strstr(m, needle) || (needle2 && !strstr(m, needle2)))
        fail_msg("message '%s' lacks '%s' / '%s'", m, needle, needle2 ? needle2 : "");
    assert_non_null(strstr(m, "bad.safetensors"));
}

static void test_read_handcrafted(void **state) {
    (void)state;
    float b[2] = {1.5f, -2.0f};
    uint8_t data[8 + 3 + 2 + 1];
    memcpy(data, b, 8);
    data[8] = 7, data[9] = 8, data[10] = 9;      /* a: U8 [3] */
    data[11] = 0xff, data[12] = 0x7f;            /* c: I8 [2] = -1, 127 */
    data[13] = 0x38;                             /* d: F8_E4M3 scalar */
    const char *hdr = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]},"
                      "\"c\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[11,13]},"
                      "\"d\":{\"dtype\":\"F8_E4M3\",\"shape\":[],\"data_offsets\":[13,14]},"
                      "\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"}}";
    uint8_t buf[1024];
    size_t n = build(buf, sizeof buf, hdr, 8, data, sizeof data);
    const char *path = tmp_path("hand.safetensors");
    write_bytes(path, buf, n);
    nb_safetensors *st;
    assert_int_equal(nb_safetensors_open(path, &st), NB_OK);
    assert_int_equal(nb_safetensors_n_tensors(st), 4);
    assert_string_equal(nb_safetensors_tensor(st, 0)->name, "a"); /* sorted by name */
    const nb_st_tensor *tb = nb_safetensors_find(st, "b");
    assert_non_null(tb);
    assert_string_equal(tb->dtype_name, "F32");
    assert_true(tb->has_type);
    assert_int_equal(tb->type, NB_F32);
    assert_int_equal(tb->n_dims, 2);
    assert_int_equal(tb->shape[0], 1);
    assert_int_equal(tb->shape[1], 2);
    float got[2];
    memcpy(got, tb->data, 8);
    assert_true(got[0] == 1.5f && got[1] == -2.0f);
    nb_tensor v;
    assert_int_equal(nb_st_tensor_view(tb, "renamed", &v), NB_OK);
    assert_string_equal(v.name, "renamed");
    assert_int_equal(v.n_dims, 2);
    assert_int_equal(v.ne[0], 2); /* ggml order: reversed */
    assert_int_equal(v.ne[1], 1);
    assert_int_equal(v.nbytes, 8);
    const nb_st_tensor *ta = nb_safetensors_find(st, "a");
    assert_false(ta->has_type);
    assert_string_equal(ta->dtype_name, "U8");
    assert_int_equal(((const uint8_t *)ta->data)[2], 9);
    assert_int_not_equal(nb_st_tensor_view(ta, NULL, &v), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "U8"));
    const nb_st_tensor *tc = nb_safetensors_find(st, "c");
    assert_true(tc->has_type);
    assert_int_equal(tc->type, NB_I8);
    assert_int_equal(((const int8_t *)tc->data)[0], -1);
    const nb_st_tensor *td = nb_safetensors_find(st, "d");
    assert_int_equal(td->n_dims, 0);
    assert_int_equal(td->nelem, 1);
    assert_string_equal(td->dtype_name, "F8_E4M3");
    assert_int_equal(((const uint8_t *)td->data)[0], 0x38);
    assert_null(nb_safetensors_find(st, "zz"));
    assert_int_equal(nb_safetensors_n_meta(st), 2);
    assert_string_equal(nb_safetensors_meta_find(st, "format"), "pt");
    assert_string_equal(nb_safetensors_meta_find(st, "x"), "y");
    assert_null(nb_safetensors_meta_find(st, "nope"));
    nb_safetensors_close(st);
}

static void test_malformed(void **state) {
    (void)state;
    uint8_t d16[16] = {0};
    /* short file, N beyond the file */
    nb_safetensors *st = NULL;
    uint8_t tiny[4] = {1, 0, 0, 0};
    assert_int_equal(nb_safetensors_open_mem(tiny, 4, "bad.safetensors", &st), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "header length"));
    uint8_t big[20] = {0xe8, 0x03}; /* N = 1000 */
    memcpy(big + 8, "{}          ", 12);
    assert_int_equal(nb_safetensors_open_mem(big, 20, "bad.safetensors", &st), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "header length N=1000"));
    /* the same through a file */
    const char *p = tmp_path("trunc.safetensors");
    write_bytes(p, big, 20);
    assert_int_equal(nb_safetensors_open(p, &st), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "trunc.safetensors"));
    assert_int_equal(nb_safetensors_open(tmp_path("absent.safetensors"), &st), NB_ERR_NOT_FOUND);

    expect_err_mem("{\"a\": ", NULL, 0, "header JSON", NULL);
    expect_err_mem("[1, 2]", NULL, 0, "expected a JSON object", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   d16, 12, "overlaps", "data_offsets");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                   d16, 12, "gap", "'b'");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d16, 8, "data buffer", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", d16, 4, "'dtype'", "F17");
    expect_err_mem("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", d16, 4, "'dtype'", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d16, 8, "'data_offsets'", "needs 12");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[25],\"data_offsets\":[0,100]}}", d16, 8, "'data_offsets'",
                   "within");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", d16, 4, "'data_offsets'", "end");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", d16, 4, "'data_offsets'", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", d16, 4, "'data_offsets'", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", d16, 4, "'shape'", "'a'");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", d16, 4, "'shape'", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", d16, 4,
                   "'shape'", "overflow");
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", d16, 4, "'shape'",
                   "dims");
    expect_err_mem("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", d16, 2, "'shape'", "whole number");
    expect_err_mem("{\"a\":[1,2]}", d16, 0, "'a'", "expected an object");
    expect_err_mem("{\"__metadata__\":{\"k\":1}}", NULL, 0, "'__metadata__'", "'k'");
    expect_err_mem("{\"__metadata__\":[]}", NULL, 0, "'__metadata__'", NULL);
    expect_err_mem("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   d16, 8, "duplicate", NULL);
}

/* Every truncation and single-byte corruption of a valid file is handled
 * without a crash; truncations are always rejected (the tiling must be exact). */
static void test_corruptions(void **state) {
    (void)state;
    float d[6] = {1, 2, 3, 4, 5, 6};
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                      "\"v\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]},\"__metadata__\":{\"a\":\"b\"}}";
    uint8_t buf[512], mut[512];
    size_t n = build(buf, sizeof buf, hdr, 8, d, 24);
    nb_safetensors *st;
    assert_int_equal(nb_safetensors_open_mem(buf, n, "ok", &st), NB_OK);
    nb_safetensors_close(st);
    for (size_t len = 0; len < n; len++) {
        memcpy(mut, buf, len);
        if (nb_safetensors_open_mem(mut, len, "cut", &st) == NB_OK) fail_msg("truncation to %zu bytes accepted", len);
    }
    static const uint8_t vals[] = {0x00, '"', '{', '}', '9', '-', 0xff, ','};
    for (size_t i = 0; i < n - 24; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(mut, buf, n);
            mut[i] = vals[v];
            if (nb_safetensors_open_mem(mut, n, "flip", &st) == NB_OK) nb_safetensors_close(st);
        }
    }
}

static void test_writer_roundtrip(void **state) {
    (void)state;
    float f32[6] = {0.5f, -1.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x3800, 0x0001}; /* 1, -2, 0.5, smallest subnormal */
    uint16_t bf[3] = {0x3f80, 0xbf80, 0x4049};          /* 1, -1, 3.140625 */
    int32_t i32[1] = {-123456};
    uint8_t u8[5] = {1, 2, 3, 4, 5};
    nb_st_write_tensor t[5] = {
        {.name = "u", .dtype = "U8", .n_dims = 1, .shape = {5}, .data = u8, .nbytes = 5},
        {.name = "h", .dtype = "F16", .n_dims = 2, .shape = {2, 2}, .data = f16, .nbytes = 8},
        {.name = "f", .dtype = "F32", .n_dims = 2, .shape = {2, 3}, .data = f32, .nbytes = 24},
        {.name = "b", .dtype = "BF16", .n_dims = 1, .shape = {3}, .data = bf, .nbytes = 6},
        {.name = "i", .dtype = "I32", .n_dims = 0, .data = i32, .nbytes = 4},
    };
    nb_st_meta meta[1] = {{"format", "pt"}};
    const char *path = tmp_path("rt.safetensors");
    assert_int_equal(nb_safetensors_write(path, t, 5, meta, 1), NB_OK);

    /* Raw checks: header length multiple of 8 so the buffer is 8-aligned,
     * file size = 8 + N + data. */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    uint8_t raw[1024];
    size_t rn = fread(raw, 1, sizeof raw, fp);
    fclose(fp);
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--) N = (N << 8) | raw[i];
    assert_int_equal((8 + N) % 8, 0);
    assert_int_equal(rn, 8 + N + 5 + 8 + 24 + 6 + 4);

    nb_safetensors *st;
    assert_int_equal(nb_safetensors_open(path, &st), NB_OK);
    assert_int_equal(nb_safetensors_n_tensors(st), 5);
    for (int k = 0; k < 5; k++) {
        const nb_st_tensor *r = nb_safetensors_find(st, t[k].name);
        assert_non_null(r);
        assert_string_equal(r->dtype_name, t[k].dtype);
        assert_int_equal(r->n_dims, t[k].n_dims);
        for (int j = 0; j < t[k].n_dims; j++) assert_int_equal(r->shape[j], t[k].shape[j]);
        assert_int_equal(r->nbytes, t[k].nbytes);
        assert_memory_equal(r->data, t[k].data, t[k].nbytes);
        /* every tensor aligned to its element size */
        assert_int_equal((uintptr_t)r->data % (r->elem_bits / 8), 0);
    }
    const nb_st_tensor *h = nb_safetensors_find(st, "h");
    uint16_t hv;
    memcpy(&hv, (const uint8_t *)h->data + 2, 2);
    assert_true(nb_fp16_to_fp32(hv) == -2.0f);
    assert_string_equal(nb_safetensors_meta_find(st, "format"), "pt");
    nb_safetensors_close(st);

    /* Writer refusals. */
    nb_st_write_tensor bad = {.name = "x", .dtype = "F32", .n_dims = 1, .shape = {3}, .data = f32, .nbytes = 8};
    assert_int_equal(nb_safetensors_write(tmp_path("bad1.safetensors"), &bad, 1, NULL, 0), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "nbytes"));
    nb_st_write_tensor dup[2] = {t[2], t[2]};
    assert_int_equal(nb_safetensors_write(tmp_path("bad2.safetensors"), dup, 2, NULL, 0), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "repeated"));
    bad.nbytes = 12;
    bad.dtype = "F99";
    assert_int_equal(nb_safetensors_write(tmp_path("bad3.safetensors"), &bad, 1, NULL, 0), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "F99"));
    assert_false(nb_file_exists(tmp_path("bad3.safetensors")));
}

static void write_shard(const char *name, const char *tn1, const char *tn2, const float *d) {
    nb_st_write_tensor t[2] = {
        {.name = tn1, .dtype = "F32", .n_dims = 1, .shape = {2}, .data = d, .nbytes = 8},
        {.name = tn2, .dtype = "F32", .n_dims = 2, .shape = {1, 1}, .data = d + 2, .nbytes = 4},
    };
    assert_int_equal(nb_safetensors_write(tmp_path(name), t, tn2 ? 2 : 1, NULL, 0), NB_OK);
}

static void write_text(const char *name, const char *text) { write_bytes(tmp_path(name), text, strlen(text)); }

static void test_sharded(void **state) {
    (void)state;
    float d1[3] = {1, 2, 3}, d2[3] = {4, 5, 6};
    write_shard("s-1.safetensors", "a", "b", d1);
    write_shard("s-2.safetensors", "c", NULL, d2);
    write_text("ok.index.json", "{\"metadata\":{\"total_size\":16},\"weight_map\":{\"a\":\"s-1.safetensors\","
                                "\"b\":\"s-1.safetensors\",\"c\":\"s-2.safetensors\"}}");
    nb_safetensors *st;
    assert_int_equal(nb_safetensors_open_index(tmp_path("ok.index.json"), &st), NB_OK);
    assert_int_equal(nb_safetensors_n_tensors(st), 3);
    assert_int_equal(nb_safetensors_n_shards(st), 2);
    const nb_st_tensor *c = nb_safetensors_find(st, "c");
    assert_non_null(c);
    assert_non_null(strstr(nb_safetensors_shard_path(st, c->shard), "s-2.safetensors"));
    assert_memory_equal(c->data, d2, 8);
    const nb_st_tensor *b = nb_safetensors_find(st, "b");
    assert_non_null(strstr(nb_safetensors_shard_path(st, b->shard), "s-1.safetensors"));
    float bv;
    memcpy(&bv, b->data, 4);
    assert_true(bv == 3.0f);
    nb_safetensors_close(st);

    struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"weight_map\":{\"a\":\"s-1.safetensors\",\"c\":\"s-1.safetensors\"}}", "not in shard"},
        {"{\"weight_map\":{\"a\":\"s-1.safetensors\",\"d\":\"s-2.safetensors\"}}", "'d'"},
        {"{\"weight_map\":{\"a\":\"../s-1.safetensors\"}}", "plain file name"},
        {"{\"weight_map\":{\"a\":\"missing.safetensors\"}}", "missing.safetensors"},
        {"{\"weight_map\":{}}", "empty"},
        {"{\"metadata\":{}}", "'weight_map'"},
        {"{\"weight_map\":{\"a\":\"s-1.safetensors\"", "JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text("bad.index.json", bad[i].json);
        nb_status rc = nb_safetensors_open_index(tmp_path("bad.index.json"), &st);
        if (rc == NB_OK) fail_msg("index %s accepted", bad[i].json);
        if (!strstr(nb_errmsg(), bad[i].needle)) fail_msg("message '%s' lacks '%s'", nb_errmsg(), bad[i].needle);
    }
    /* a name in two shards */
    write_shard("s-3.safetensors", "c", NULL, d1);
    write_text("dup.index.json", "{\"weight_map\":{\"c\":\"s-2.safetensors\",\"x\":\"s-3.safetensors\"}}");
    assert_int_not_equal(nb_safetensors_open_index(tmp_path("dup.index.json"), &st), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "two shards"));
}

static void test_dtype_names(void **state) {
    (void)state;
    nb_dtype t;
    assert_true(nb_st_dtype_to_nb("BF16", &t) && t == NB_BF16);
    assert_true(nb_st_dtype_to_nb("I32", &t) && t == NB_I32);
    assert_false(nb_st_dtype_to_nb("U32", &t));
    assert_false(nb_st_dtype_to_nb("F8_E5M2", &t));
    assert_int_equal(nb_st_dtype_bits("F8_E5M2"), 8);
    assert_int_equal(nb_st_dtype_bits("F64"), 64);
    assert_int_equal(nb_st_dtype_bits("F4"), 4);
    assert_int_equal(nb_st_dtype_bits("nope"), 0);
    assert_string_equal(nb_st_dtype_from_nb(NB_F16), "F16");
    assert_null(nb_st_dtype_from_nb(NB_Q4_0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_handcrafted), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_corruptions),      cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_sharded),          cmocka_unit_test(test_dtype_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
