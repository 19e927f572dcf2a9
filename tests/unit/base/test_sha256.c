/* SHA-256 against the FIPS 180-2/180-4 example vectors and the checksums
 * published for the shared test models (shared/models/README.md). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"

static void hex_of(const void *p, size_t n, char hex[65]) {
    uint8_t d[32];
    nb_sha256(p, n, d);
    nb_sha256_hex(d, hex);
}

static void test_fips_vectors(void **state) {
    (void)state;
    char hex[65];
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* 896-bit two-block message (FIPS 180-2 appendix, SHA-256 value from the NIST examples). */
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a_streamed(void **state) {
    (void)state;
    /* One million 'a', fed in uneven pieces to exercise the partial-block path. */
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    nb_sha256_ctx s;
    nb_sha256_init(&s);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t k = step < 1000000 - off ? step : 1000000 - off;
        nb_sha256_update(&s, a + off, k);
        off += k;
        step = step * 3 % 1021 + 1;
    }
    uint8_t d[32];
    char hex[65];
    nb_sha256_final(&s, d);
    nb_sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    hex_of(a, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes) must agree
 * between one-shot and byte-at-a-time hashing. */
static void test_boundaries(void **state) {
    (void)state;
    uint8_t msg[130];
    for (int i = 0; i < 130; i++) msg[i] = (uint8_t)(i * 7 + 1);
    for (size_t n = 50; n <= 130; n++) {
        char h1[65], h2[65];
        hex_of(msg, n, h1);
        nb_sha256_ctx s;
        nb_sha256_init(&s);
        for (size_t i = 0; i < n; i++) nb_sha256_update(&s, msg + i, 1);
        uint8_t d[32];
        nb_sha256_final(&s, d);
        nb_sha256_hex(d, h2);
        assert_string_equal(h1, h2);
    }
}

static void test_model_files(void **state) {
    (void)state;
    static const struct { const char *rel, *sha; } files[] = {
        {"models/aidreams260K.bin", "aa722d252ace805c9ff2264dce993df6843c8cec3d1a930d03e4c487f3db9028"},
        {"models/aidreams260K.tok512.bin", "3817c307fffc9637c908ca3430a028db0c46b5700392e0d19b2133d246f54bcb"},
        {"models/aidreams260K.gguf", "4bce04b23b28ddcca4c273812eaf5e32a0a301411912c9663597de5e1f67e0e3"},
        {"models/synth-llama-Q4_K_M.gguf", "3be340260c339cccf9b89d5042bfefc7ae251a2471fdb3f576b580ba4a6b318e"},
        {"models/synth-qwen2-Q4_0.gguf", "2b20d58e90b910d3f650fddb5fbf60f04cd14e0c066c5cd022a164662255ad8d"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *p = nb_test_shared(files[i].rel);
        if (!p) skip();
        char hex[65];
        assert_int_equal(nb_sha256_file(p, hex), NB_OK);
        assert_string_equal(hex, files[i].sha);
    }
    char hex[65];
    assert_int_equal(nb_sha256_file("/nonexistent/nibble-sha-test", hex), NB_ERR_NOT_FOUND);
    assert_non_null(strstr(nb_errmsg(), "nibble-sha-test"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_million_a_streamed),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_model_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
