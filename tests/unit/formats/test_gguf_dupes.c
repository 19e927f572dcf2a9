/* GGUF duplicate checks at scale (issue 15): a generated file with 1,000,000
 * metadata keys (and one with 200,000 tensor infos) parses in linear time
 * through the reader's hash sets, every key is found again, and a duplicate
 * placed last is still reported with its byte offset. The files are written
 * to a temporary directory; the elapsed time is printed, never asserted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "testutil.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_str(FILE *f, const char *s) {
    put_u64(f, strlen(s));
    put(f, s, strlen(s));
}

/* n_kv u8 keys "k.%07d" (the last one repeating key 0 when dup), then
 * n_t one-element f32 tensors "t.%07d" with their data. */
static char *write_file(const char *dir, const char *name, uint64_t n_kv, uint64_t n_t, bool dup_key, bool dup_tensor) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, n_t);
    put_u64(f, n_kv);
    char k[32];
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(k, sizeof k, "k.%07llu", (unsigned long long)(dup_key && i == n_kv - 1 ? 0 : i));
        put_str(f, k);
        put_u32(f, 0); /* u8 */
        uint8_t v = (uint8_t)i;
        put(f, &v, 1);
    }
    for (uint64_t i = 0; i < n_t; i++) {
        snprintf(k, sizeof k, "t.%07llu", (unsigned long long)(dup_tensor && i == n_t - 1 ? 0 : i));
        put_str(f, k);
        put_u32(f, 1);      /* n_dims */
        put_u64(f, 8);      /* ne[0]: 8 floats = 32 bytes, one alignment unit */
        put_u32(f, 0);      /* f32 */
        put_u64(f, i * 32); /* offset */
    }
    long pos = ftell(f);
    static const char zeros[32];
    if (pos % 32) put(f, zeros, (size_t)(32 - pos % 32));
    for (uint64_t i = 0; i < n_t; i++) put(f, zeros, 32);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_million_keys(void **state) {
    (void)state;
    char dir[] = "/tmp/nb_gguf_dupes_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const uint64_t n = 1000000;
    char *p = write_file(dir, "keys.gguf", n, 0, false, false);
    double t0 = now_s(), c0 = cpu_s();
    nb_gguf *g = NULL;
    assert_int_equal(nb_gguf_open(p, &g), NB_OK);
    double t1 = now_s(), c1 = cpu_s();
    assert_int_equal(nb_gguf_n_kv(g), (int64_t)n);
    char k[32];
    for (uint64_t i = 0; i < n; i += 9973) {
        snprintf(k, sizeof k, "k.%07llu", (unsigned long long)i);
        const nb_gguf_value *v = nb_gguf_find(g, k);
        assert_non_null(v);
        assert_int_equal(v->num.u, (uint8_t)i);
    }
    assert_null(nb_gguf_find(g, "k.9999999"));
    nb_gguf_close(g);
    print_message("1,000,000 keys parsed in %.3f s wall, %.3f s CPU (not asserted)\n", t1 - t0, c1 - c0);
    unlink(p);
    free(p);

    p = write_file(dir, "dupkey.gguf", n, 0, true, false);
    t0 = now_s();
    assert_int_equal(nb_gguf_open(p, &g), NB_ERR_FORMAT);
    print_message("1,000,000 keys with the duplicate last: refused in %.3f s\n", now_s() - t0);
    assert_non_null(strstr(nb_errmsg(), "duplicate metadata key 'k.0000000'"));
    /* each kv is 8 + 9 + 4 + 1 = 22 bytes after the 24-byte header */
    assert_non_null(strstr(nb_errmsg(), "at byte offset 22000002 (first at byte offset 24)"));
    unlink(p);
    free(p);

    p = write_file(dir, "duptensor.gguf", 1, 200000, false, true);
    t0 = now_s();
    assert_int_equal(nb_gguf_open(p, &g), NB_ERR_FORMAT);
    print_message("200,000 tensor infos with the duplicate last: refused in %.3f s\n", now_s() - t0);
    assert_non_null(strstr(nb_errmsg(), "duplicate tensor name 't.0000000'"));
    /* tensor infos start after the one 22-byte kv; each is 8 + 9 + 4 + 8 + 4 + 8 = 41 bytes */
    assert_non_null(strstr(nb_errmsg(), "at byte offset 8200005 (first at byte offset 46)"));
    unlink(p);
    free(p);

    p = write_file(dir, "tensors.gguf", 1, 200000, false, false);
    assert_int_equal(nb_gguf_open(p, &g), NB_OK);
    assert_non_null(nb_gguf_find_tensor(g, "t.0123456"));
    assert_null(nb_gguf_find_tensor(g, "t.0200000"));
    nb_gguf_close(g);
    unlink(p);
    free(p);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_million_keys)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
