/* nb_kctx_tune_prefetch (kernels/tune.c): measures every candidate pair of
 * distances (L1, L2) and the table's, reports each one's median, keeps the
 * table's unless another is NB_TUNE_MARGIN faster, sets the context's
 * distances to what it chose, leaves results unchanged (the same bits as a
 * context at the table's distances), does not measure weights under
 * min_bytes, and keeps an L2 distance the options fixed; the same for the
 * runs of rows each thread reads in one-token matmuls (NB_TUNE_STREAMS). */
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "quant/qtypes.h"
#include "testutil.h"

enum { K = 1024, R = 512, NW = 12 };

/* NW repacked Q4_0 weights of R x K (about 0.6 MiB each). */
static void make_weights(nb_tensor *W, void **mem) {
    const nb_qtype *qt = nb_qtype_get(NB_Q4_0);
    nb_dtype to = nb_repack_target(NB_Q4_0);
    uint64_t rb, prb;
    assert_true(nb_dtype_row_bytes(NB_Q4_0, K, &rb) && nb_dtype_row_bytes(to, K, &prb));
    float *row = malloc(K * sizeof *row);
    uint8_t *q = malloc(rb * R);
    for (int m = 0; m < NW; m++) {
        for (int64_t r = 0; r < R; r++) {
            for (int i = 0; i < K; i++) row[i] = (float)(((m * R + r) * K + i) * 2654435761u % 1000) / 1000.0f - 0.5f;
            qt->from_float(row, q + (uint64_t)r * rb, K);
        }
        uint8_t *p = malloc(prb * R);
        if (to != NB_Q4_0) nb_repack_rows(NB_Q4_0, q, p, R, K);
        else memcpy(p, q, rb * R);
        mem[m] = p;
        W[m] = (nb_tensor){.name = "w", .type = to, .n_dims = 2, .ne = {K, R, 1, 1}, .data = p, .nbytes = prb * R};
    }
    free(row);
    free(q);
}

static void test_tune(void **state) {
    (void)state;
    nb_tensor W[NW];
    void *mem[NW];
    make_weights(W, mem);
    const nb_tensor *wp[NW];
    size_t total = 0;
    for (int m = 0; m < NW; m++) {
        wp[m] = &W[m];
        total += W[m].nbytes;
    }
    nb_kctx k, ref;
    assert_int_equal(nb_kctx_init(&k, 2), NB_OK);
    assert_int_equal(nb_kctx_init(&ref, 2), NB_OK);
    const int table = k.prefetch, table_l2 = k.prefetch_l2;
    assert_int_equal(table, nb_dispatch_default()->decode_prefetch);
    assert_int_equal(table_l2, nb_dispatch_default()->decode_prefetch_l2);

    nb_prefetch_tune t;
    /* under min_bytes: not measured, the table's distance stays */
    assert_int_equal(nb_kctx_tune_prefetch(&k, wp, NW, total + 1, NB_TUNE_PREFETCH, &t), NB_OK);
    assert_int_equal(t.n, 0);
    assert_int_equal(k.prefetch, table);
    assert_int_equal(k.prefetch_l2, table_l2);
    assert_int_equal(t.chosen, table);
    assert_int_equal(t.chosen_l2, table_l2);
    assert_non_null(strstr(t.why, "not measured"));
    assert_int_equal(nb_kctx_tune_prefetch(&k, wp, 0, 0, NB_TUNE_PREFETCH, &t), NB_OK);
    assert_int_equal(t.n, 0);

    /* measured (from the cache here: the test checks the bookkeeping, not the speed) */
    assert_int_equal(nb_kctx_tune_prefetch(&k, wp, NW, total / 2, NB_TUNE_PREFETCH, &t), NB_OK);
    assert_true(t.n >= 8 && t.n <= NB_TUNE_MAX); /* four L1 distances, each without and with L2 */
    bool has_table = false, has_chosen = false;
    int with_l2 = 0;
    double best = 0, at_table = 0;
    for (int i = 0; i < t.n; i++) {
        if (i) assert_true(t.bytes[i] > t.bytes[i - 1] || (t.bytes[i] == t.bytes[i - 1] && t.l2[i] > t.l2[i - 1]));
        assert_true(t.bytes[i] % 64 == 0 && t.bytes[i] <= NB_PREFETCH_MAX);
        assert_true(t.l2[i] % 64 == 0 && t.l2[i] >= 0 && t.l2[i] <= NB_PREFETCH_MAX);
        with_l2 += t.l2[i] > 0;
        assert_true(t.gbps[i] > 0);
        if (t.bytes[i] == table && t.l2[i] == table_l2) { has_table = true; at_table = t.gbps[i]; }
        if (t.bytes[i] == t.chosen && t.l2[i] == t.chosen_l2) has_chosen = true;
        if (t.gbps[i] > best) best = t.gbps[i];
    }
    assert_true(has_table && has_chosen);
    assert_true(with_l2 >= 4);
    assert_int_equal(t.table, table);
    assert_int_equal(t.table_l2, table_l2);
    assert_int_equal(k.prefetch, t.chosen);
    assert_int_equal(k.prefetch_l2, t.chosen_l2);
    /* the rule: the fastest leads when it beats the table's by the margin,
     * and wins when the paired confirmation says so again; else the table's */
    const bool leads = best >= NB_TUNE_MARGIN * at_table && best != at_table;
    if (t.chosen != table || t.chosen_l2 != table_l2) {
        for (int i = 0; i < t.n; i++)
            if (t.bytes[i] == t.chosen && t.l2[i] == t.chosen_l2) assert_true(t.gbps[i] == best);
        assert_true(leads && t.confirm >= NB_TUNE_MARGIN);
        assert_non_null(strstr(t.why, "confirmed"));
    } else if (leads) {
        assert_true(t.confirm > 0 && t.confirm < NB_TUNE_MARGIN); /* a leader the paired trials did not confirm */
        assert_non_null(strstr(t.why, "paired trials"));
    } else {
        assert_true(t.confirm == 0);
    }
    assert_true(t.ms > 0);
    assert_non_null(strstr(t.why, "measured at load"));

    /* an L2 distance the options fixed is the only one tried */
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    o.decode_prefetch_l2_set = true;
    o.decode_prefetch_l2 = 6144;
    nb_dispatch d;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    nb_kctx kf;
    assert_int_equal(nb_kctx_init_with(&kf, 2, &d), NB_OK);
    assert_int_equal(nb_kctx_tune_prefetch(&kf, wp, NW, total / 2, NB_TUNE_PREFETCH, &t), NB_OK);
    assert_true(t.n >= 4);
    for (int i = 0; i < t.n; i++) assert_int_equal(t.l2[i], 6144);
    assert_int_equal(kf.prefetch_l2, 6144);
    nb_kctx_free(&kf);

    /* the runs of rows per thread: alone at the table's distances, or with them */
    const int table_streams = nb_dispatch_default()->decode_streams;
    assert_int_equal(nb_kctx_init(&kf, 2), NB_OK);
    assert_int_equal(kf.streams, table_streams);
    assert_int_equal(nb_kctx_tune_prefetch(&kf, wp, NW, total / 2, NB_TUNE_STREAMS, &t), NB_OK);
    assert_true(t.n >= 2 && t.n <= 3);
    bool one = false, alt = false;
    for (int i = 0; i < t.n; i++) {
        assert_int_equal(t.bytes[i], kf.prefetch);
        assert_int_equal(t.l2[i], kf.prefetch_l2);
        one |= t.streams[i] == 1;
        alt |= t.streams[i] == NB_TUNE_STREAMS_ALT;
        if (i) assert_true(t.streams[i] > t.streams[i - 1]);
    }
    assert_true(one && alt);
    assert_int_equal(t.table_streams, table_streams);
    assert_int_equal(kf.streams, t.chosen_streams);
    assert_int_equal(nb_kctx_tune_prefetch(&kf, wp, NW, total / 2, NB_TUNE_PREFETCH | NB_TUNE_STREAMS, &t), NB_OK);
    assert_true(t.n >= 16 && t.n <= NB_TUNE_MAX); /* four L1 distances, without and with L2, 1 and 4 streams */
    assert_int_equal(kf.streams, t.chosen_streams);
    assert_int_equal(kf.prefetch, t.chosen);
    nb_kctx_free(&kf);

    /* any distances and runs of rows compute the same bits */
    k.prefetch = t.bytes[t.n - 1] == table ? t.bytes[0] : t.bytes[t.n - 1];
    k.prefetch_l2 = table_l2 ? 0 : 4096;
    k.streams = table_streams == 1 ? 3 : 1;
    float *x = malloc(K * sizeof *x), *y = malloc(R * sizeof *y), *yr = malloc(R * sizeof *yr);
    for (int i = 0; i < K; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
    for (int m = 0; m < NW; m++) {
        assert_int_equal(nb_matmul(&k, wp[m], x, 1, y), NB_OK);
        assert_int_equal(nb_matmul(&ref, wp[m], x, 1, yr), NB_OK);
        assert_memory_equal(y, yr, R * sizeof *y);
    }
    free(x); free(y); free(yr);
    nb_kctx_free(&k);
    nb_kctx_free(&ref);
    for (int m = 0; m < NW; m++) free(mem[m]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tune)};
    return nb_test_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
