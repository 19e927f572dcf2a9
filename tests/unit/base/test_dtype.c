/* The constant type table: every type round-trips through its name, file
 * ids are accepted exactly for the file types, and the in-memory-only
 * layouts are never file types. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/dtype.h"

static void test_names_round_trip(void **state) {
    (void)state;
    int n = 0, n_mem = 0;
    nb_dtype t = NB_F32;
    do {
        const nb_dtype_info *i = nb_dtype_get(t);
        assert_non_null(i);
        assert_string_equal(nb_dtype_name(t), i->name);
        nb_dtype back;
        assert_true(nb_dtype_from_name(i->name, &back));
        assert_int_equal(back, t);
        /* case-insensitive */
        char lower[32];
        size_t k = 0;
        for (; i->name[k] && k + 1 < sizeof lower; k++) lower[k] = (char)(i->name[k] | (i->name[k] >= 'A' && i->name[k] <= 'Z' ? 0x20 : 0));
        lower[k] = 0;
        assert_true(nb_dtype_from_name(lower, &back));
        assert_int_equal(back, t);
        assert_true(i->block >= 1 && i->block_bytes >= 1);
        uint64_t rb;
        assert_true(nb_dtype_row_bytes(t, i->block * 3, &rb));
        assert_int_equal(rb, 3 * (uint64_t)i->block_bytes);
        if (i->block > 1) assert_false(nb_dtype_row_bytes(t, i->block + 1, &rb));
        /* the file-id conversion accepts exactly the file types */
        nb_dtype f = NB_F16;
        bool file = nb_dtype_from_file_id((uint32_t)t, &f);
        assert_int_equal(file, !i->in_memory_only);
        if (file) assert_int_equal(f, t);
        else assert_int_equal(f, NB_F16); /* untouched */
        bool mem_range = t >= NB_DTYPE_MEM_BASE && t < NB_DTYPE_MEM_END;
        assert_int_equal(i->in_memory_only, mem_range);
        n++;
        n_mem += i->in_memory_only;
    } while (nb_dtype_next(&t));
    assert_int_equal(n, 32 + 12 + 17); /* ggml's, nibble's, the repacks */
    assert_int_equal(n_mem, 17);
}

static void test_unknown(void **state) {
    (void)state;
    nb_dtype t = NB_F32;
    assert_false(nb_dtype_from_name("Q4_0X", &t));
    assert_false(nb_dtype_from_name("", &t));
    assert_int_equal(t, NB_F32);
    const uint32_t bad[] = {4, 5, 31, 40, 63, 64, 1023, NB_DTYPE_EXT_END, 2047, NB_DTYPE_MEM_END, 0xffffffffu,
                            NB_Q4_0R, NB_Q8_0R, NB_Q8_0P, NB_Q4_KR, NB_Q6_KR, NB_Q8_KP,
                            NB_W4G32R, NB_W4G64R, NB_W4G128R, NB_W8R, NB_Q4_0L, NB_W4G32L, NB_W4G64L,
                            NB_W4G128L, NB_Q8_0PL, NB_Q8_0L, NB_W8L};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_false(nb_dtype_from_file_id(bad[i], &t));
    assert_int_equal(t, NB_F32);
    assert_string_equal(nb_dtype_name(NB_DTYPE_GGML_END), "?");
    assert_null(nb_dtype_get(NB_DTYPE_MAX));
    /* the repacked layouts keep the byte count of their source blocks (Q4_KR adds the unpacked scales) */
    assert_int_equal(nb_dtype_get(NB_Q4_0R)->block_bytes, nb_dtype_get(NB_Q4_0)->block_bytes);
    assert_int_equal(nb_dtype_get(NB_Q8_0R)->block_bytes, nb_dtype_get(NB_Q8_0)->block_bytes);
    assert_int_equal(nb_dtype_get(NB_Q6_KR)->block_bytes, nb_dtype_get(NB_Q6_K)->block_bytes);
    assert_int_equal(nb_dtype_get(NB_Q8_KP)->block_bytes, nb_dtype_get(NB_Q8_K)->block_bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
