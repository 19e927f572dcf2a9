/* The kernel dispatch table (kernels/dispatch.h): the per-type slots cover
 * every dtype once; a table capped at each ISA holds only that ISA's (or
 * lower) kernels and matches the per-ISA lookups; the options turn
 * repacking, the int8 GEMM and the thresholds on and off; the environment
 * is parsed with errors that name the variable; and the process table,
 * once built, refuses other options. The numerical checks of the kernels
 * themselves are in test_float_kernels / test_qdot / test_repack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/sbatch.h"
#include "testutil.h"

static void test_slots(void **state) {
    (void)state;
    static bool seen[NB_DISPATCH_SLOTS];
    int n = 0;
    for (int v = 0; v < (int)NB_DTYPE_MAX; v++) {
        int s = nb_dispatch_slot((nb_dtype)v);
        bool valid = v < (int)NB_DTYPE_GGML_END || (v >= (int)NB_DTYPE_EXT_BASE && v < (int)NB_DTYPE_EXT_END) ||
                     (v >= (int)NB_DTYPE_MEM_BASE && v < (int)NB_DTYPE_MEM_END);
        if (!valid) {
            assert_int_equal(s, -1);
            continue;
        }
        assert_true(s >= 0 && s < NB_DISPATCH_SLOTS);
        assert_false(seen[s]);
        seen[s] = true;
        n++;
    }
    assert_int_equal(n, NB_DISPATCH_SLOTS);
    assert_int_equal(nb_dispatch_slot((nb_dtype)-1), -1);
    assert_int_equal(nb_dispatch_slot(NB_DTYPE_MAX), -1);
}

static void test_isa_caps(void **state) {
    (void)state;
    for (int isa = NB_ISA_SCALAR; isa <= (int)nb_cpu_isa() && isa <= NB_ISA_AVX512; isa++) {
        nb_kernel_opts o;
        nb_kernel_opts_defaults(&o);
        o.max_isa = (nb_isa)isa;
        nb_dispatch d;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_int_equal(d.isa, isa);
        assert_ptr_equal(d.fk, nb_float_kernels_get((nb_isa)isa));
        if (isa == NB_ISA_SCALAR) assert_string_equal(d.decode_dot, "scalar");
        static const nb_dtype types[] = {NB_Q4_0, NB_Q8_0, NB_Q4_K, NB_Q6_K, NB_Q5_K, NB_W8, NB_NF4};
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            const nb_qdot *q = nb_dispatch_qdot(&d, types[i]);
            assert_ptr_equal(q, nb_qdot_get(types[i], (nb_isa)isa));
            assert_non_null(q);
            if (isa == NB_ISA_SCALAR) assert_string_equal(q->isa, "scalar");
        }
        bool vnni = isa >= NB_ISA_AVX512 && nb_cpu_get()->avx512vnni;
        bool rp = vnni || isa >= NB_ISA_AVX2; /* AVX2 repacks too (kernels/x86/repack_avx2_impl.h) */
        const char *rk = vnni ? "avx512" : isa < NB_ISA_AVX2 ? "scalar" : nb_cpu_get()->avxvnni ? "avxvnni" : "avx2";
        /* in lane order where the int8 kernels are the AVX2 file's */
        assert_int_equal(d.repack_to[nb_dispatch_slot(NB_Q4_0)], !rp ? NB_Q4_0 : isa == NB_ISA_AVX2 ? NB_Q4_0L : NB_Q4_0R);
        assert_int_equal(d.repack_to[nb_dispatch_slot(NB_W4G128S)], !rp ? NB_W4G128S : isa == NB_ISA_AVX2 ? NB_W4G128L : NB_W4G128R);
        assert_int_equal(d.repack_to[nb_dispatch_slot(NB_Q6_K)], rp ? NB_Q6_KR : NB_Q6_K);
        assert_int_equal(d.repack_to[nb_dispatch_slot(NB_Q5_K)], NB_Q5_K);
        assert_int_equal(d.repack_to[nb_dispatch_slot(NB_F16)], NB_F16);
        assert_true((nb_dispatch_rgemm(&d, NB_Q4_0R) != NULL) == rp);
        /* the repacked types have their kernels at every level (scalar references below AVX2) */
        assert_non_null(nb_dispatch_qdot(&d, NB_Q4_KR));
        assert_string_equal(nb_dispatch_qdot(&d, NB_Q4_KR)->isa, rk);
        assert_non_null(nb_dispatch_to_float(&d, NB_Q4_0R));
        assert_non_null(nb_dispatch_to_float(&d, NB_Q4_K));
        assert_null(nb_dispatch_to_float(&d, NB_F32));
        assert_non_null(d.actpack_group);
        assert_true(strstr(d.desc, nb_isa_name((nb_isa)isa)) != NULL);
    }
}

static void test_options(void **state) {
    (void)state;
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    o.repack = false;
    o.int8_gemm = false;
    o.qgemm_min = 1; /* raised to 2 */
    o.rgemm_min = 33;
    nb_dispatch d;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_int_equal(d.repack_to[nb_dispatch_slot(NB_Q4_0)], NB_Q4_0);
    assert_null(nb_dispatch_rgemm(&d, NB_Q4_0R));
    assert_int_equal(d.qgemm_min, 2);
    assert_int_equal(d.rgemm_min, 33);
    o.qgemm_min = -1;
    assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "qgemm_min"));
    /* decode dot width and prefetch distance */
    if (nb_cpu_isa() >= NB_ISA_AVX2) {
        nb_kernel_opts_defaults(&o);
        o.decode_dot = NB_DECODE_DOT_AVX2;
        o.decode_prefetch_set = true;
        o.decode_prefetch = 0;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_string_equal(d.decode_dot, "avx2");
        assert_int_equal(d.decode_prefetch, 0);
        assert_ptr_equal(d.dot_f16, nb_float_kernels_avx2()->dot_f16);
        o.decode_prefetch = 8192;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_int_equal(d.decode_prefetch, 8192);
        assert_ptr_equal(d.dot_bf16, nb_float_kernels_avx2()->dot_bf16);
        o.decode_prefetch = 3000; /* not a whole number of cache lines */
        assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_non_null(strstr(nb_errmsg(), "multiple of 64"));
        o.decode_prefetch = NB_PREFETCH_MAX + 64;
        assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
        /* unset: the CPU's distance */
        o.decode_prefetch_set = false;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_int_equal(d.decode_prefetch, nb_prefetch_for_cpu(nb_cpu_get()));
        /* measured at load: AUTO where this kind of CPU was not measured,
         * ON always, OFF never, and never over a distance the user set */
        assert_int_equal(d.decode_prefetch_tune, !nb_prefetch_measured_for_cpu(nb_cpu_get()));
        assert_non_null(strstr(d.desc, d.decode_prefetch_tune ? "tuned at load" : "prefetch"));
        o.decode_prefetch_tune = NB_CHOICE_ON;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_true(d.decode_prefetch_tune);
        assert_non_null(strstr(d.desc, "tuned at load"));
        o.decode_prefetch_tune = NB_CHOICE_OFF;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_false(d.decode_prefetch_tune);
        assert_null(strstr(d.desc, "tuned at load"));
        o.decode_prefetch_tune = NB_CHOICE_ON;
        o.decode_prefetch_set = true;
        o.decode_prefetch = 4096;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_false(d.decode_prefetch_tune);
        assert_int_equal(d.decode_prefetch, 4096);
        /* the second, L2 distance: the CPU's unless set, validated as the first */
        nb_kernel_opts_defaults(&o);
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_int_equal(d.decode_prefetch_l2, nb_prefetch_l2_for_cpu(nb_cpu_get()));
        assert_true((strstr(d.desc, ", L2 ") != NULL) == (d.decode_prefetch_l2 > 0));
        o.decode_prefetch_l2_set = true;
        o.decode_prefetch_l2 = 0;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_int_equal(d.decode_prefetch_l2, 0);
        assert_null(strstr(d.desc, ", L2 "));
        o.decode_prefetch_l2 = 8192;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_non_null(strstr(d.desc, ", L2 8192)"));
        nb_kctx k;
        assert_int_equal(nb_kctx_init_with(&k, 1, &d), NB_OK);
        assert_int_equal(k.prefetch_l2, 8192);
        nb_kctx_free(&k);
        o.decode_prefetch_l2 = 100;
        assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_non_null(strstr(nb_errmsg(), "decode_prefetch_l2 100"));
        o.decode_prefetch_l2 = -64;
        assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
        o.decode_prefetch_l2 = NB_PREFETCH_MAX + 64;
        assert_int_not_equal(nb_dispatch_build(&o, &d), NB_OK);
    }
    /* measured only on the Intel AVX-512 + AMX parts: none elsewhere */
    {
        nb_cpu c = *nb_cpu_get();
        c.vendor = NB_CPU_INTEL;
        c.family = 6;
        c.avx512f = c.amx_tile = true;
        assert_int_equal(nb_prefetch_l2_for_cpu(&c), 4096);
        c.amx_tile = false;
        assert_int_equal(nb_prefetch_l2_for_cpu(&c), 0);
        c.vendor = NB_CPU_AMD;
        c.family = 26;
        c.amx_tile = true;
        assert_int_equal(nb_prefetch_l2_for_cpu(&c), 0);
    }
    if (nb_cpu_isa() >= NB_ISA_AVX512) {
        nb_kernel_opts_defaults(&o);
        o.decode_dot = NB_DECODE_DOT_AVX512;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_string_equal(d.decode_dot, "avx512");
        /* AUTO: AVX2 dots on AMD families 25 and 26 (Zen 3/4, Zen 5), AVX-512 elsewhere */
        o.decode_dot = NB_DECODE_DOT_AUTO;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        const nb_cpu *c = nb_cpu_get();
        assert_string_equal(d.decode_dot,
                            c->vendor == NB_CPU_AMD && (c->family == 25 || c->family == 26) ? "avx2" : "avx512");
        /* the 8-bit repacked types' dots follow the float ones to 256 bits
         * on AMD family 26 with AVX-VNNI only; the 4-bit types keep AVX-512 */
        const bool dots8_256 = !strcmp(d.decode_dot, "avx2") && nb_dots8_256_for_cpu(c);
        assert_string_equal(nb_dispatch_qdot(&d, NB_W8R)->isa, dots8_256 ? "avxvnni" : "avx512");
        assert_string_equal(nb_dispatch_qdot(&d, NB_Q8_0R)->isa, dots8_256 ? "avxvnni" : "avx512");
        assert_string_equal(nb_dispatch_qdot(&d, NB_Q4_0R)->isa, "avx512");
        assert_true((strstr(d.desc, "(Q8_0, W8 too)") != NULL) == dots8_256);
        o.decode_dot = NB_DECODE_DOT_AVX512; /* told otherwise: every dot at 512 bits */
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_string_equal(nb_dispatch_qdot(&d, NB_W8R)->isa, "avx512");
        assert_string_equal(nb_dispatch_qdot(&d, NB_Q8_0R)->isa, "avx512");
        assert_null(strstr(d.desc, "W8 too"));
        /* the small-batch GEMMs: 512-bit tiles from 9 tokens where 512-bit
         * ops run at full width, from 17 on Zen 4 (and beside AMX: none) */
        nb_kernel_opts_defaults(&o);
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        const bool wide = nb_sbatch_wide_for_cpu(c);
        const nb_dtype st[] = {NB_Q4_0R, NB_Q8_0R, NB_Q4_KR, NB_Q6_KR};
        for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
            nb_repack_gemm_fn g = nb_dispatch_sgemm(&d, st[i], 12), plain = nb_sbatch_gemm(st[i], NB_ISA_AVX512);
            if (!g || !plain) continue; /* AMX GEMMs, or no AVX-512 VNNI */
            assert_true(g == (wide ? nb_sbatch_gemm_wide(plain) : plain));
        }
        assert_true((strstr(d.desc, "512-bit tiles from 9 tokens") != NULL) == (wide && c->avx512vnni && !strstr(d.desc, "(amx)")));
        /* Q4_KR's rows kernel only up to 8 tokens beside its _wide GEMM (its
         * 512-bit tiles win from 9); every other type up to rows_max */
        const bool q4k8 = nb_dispatch_sgemm(&d, NB_Q4_KR, 12) == nb_q4_kr_sgemm_avx512_wide;
        assert_int_equal(nb_dispatch_rows_to(&d, NB_Q4_KR), q4k8 ? 8 : d.rows_max);
        assert_int_equal(nb_dispatch_rows_to(&d, NB_Q4_0R), d.rows_max);
        assert_int_equal(nb_dispatch_rows_to(&d, NB_Q6_KR), d.rows_max);
        assert_true((strstr(d.desc, "(Q4_K to 8)") != NULL) == q4k8);
    }
    {
        /* made-up CPUs: the 8-bit dots at 256 bits on AMD family 26 with
         * AVX-VNNI only; 512-bit small-batch tiles from 9 tokens on every
         * AVX-512 VNNI CPU but AMD family 25 (Zen 4) */
        static const struct {
            nb_cpu_vendor vendor;
            int family;
            bool avxvnni, avx512vnni, dots8_256, wide;
        } cpus[] = {
            {NB_CPU_AMD, 26, true, true, true, true},    {NB_CPU_AMD, 26, false, true, false, true},
            {NB_CPU_AMD, 25, true, true, false, false},  {NB_CPU_INTEL, 6, true, true, false, true},
            {NB_CPU_AMD, 26, true, false, true, false},
        };
        for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
            nb_cpu c = *nb_cpu_get();
            c.vendor = cpus[i].vendor;
            c.family = cpus[i].family;
            c.avxvnni = cpus[i].avxvnni;
            c.avx512vnni = cpus[i].avx512vnni;
            assert_int_equal(nb_dots8_256_for_cpu(&c), cpus[i].dots8_256);
            assert_int_equal(nb_sbatch_wide_for_cpu(&c), cpus[i].wide);
        }
    }
    /* attention per KV type: the low-precision dot kernels where the CPU has
     * them, the one kernel for every other type and when turned off */
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    const bool avx512 = nb_cpu_isa() >= NB_ISA_AVX512;
    const bool bf16_cpu = avx512 && nb_cpu_get()->avx512bf16;
    /* AMX-BF16 granted (and NIBBLE_ISA at amx): the tile-unit kernel, under auto and on */
    const bool amx = nb_cpu_isa() >= NB_ISA_AMX && nb_cpu_get()->amx_bf16;
    assert_true(d.attn_bf16_amx == amx);
    const bool bf16_dots = !amx && bf16_cpu && nb_attn_bf16_dots_for_cpu(nb_cpu_get());
    assert_true((d.attn_kv[NB_KVT_BF16] != d.attn) == (amx || bf16_dots));
    assert_true((strstr(d.desc, "bf16 dots on amx tiles, other KV: split bf16") != NULL) == amx);
    /* fp8 pools (exact in bf16) with the vdpbf16ps kernel wherever bf16 pools take it */
    assert_ptr_equal(d.attn_kv[NB_KVT_FP8], amx ? nb_attn_amx_split() : bf16_dots ? nb_attn_avx512_bf16() : d.attn);
    assert_true((strstr(d.desc, "fp8 KV: bf16 dots") != NULL) == bf16_dots);
    /* there every other pool type takes the split-bf16 kernel (int8 pools
     * with the int8-dot one for the tiles it cannot take) */
    if (amx)
        for (int t = 0; t < NB_KV_TYPES; t++)
            if (t != NB_KVT_BF16)
                assert_ptr_equal(d.attn_kv[t], t == NB_KVT_INT8 ? nb_attn_amx_split_int8() : nb_attn_amx_split());
    o.attn_bf16_dots = NB_CHOICE_ON; /* on forces it wherever the CPU has the instructions */
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    assert_true((d.attn_kv[NB_KVT_BF16] != d.attn) == bf16_cpu);
    assert_true(d.attn_bf16_amx == amx);
    assert_true((strstr(d.desc, "bf16 KV: bf16 dots") != NULL) == bf16_cpu);
    if (amx) { /* capped below AMX: the vdpbf16ps kernel */
        o.max_isa = NB_ISA_AVX512;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_false(d.attn_bf16_amx);
        assert_ptr_equal(d.attn_kv[NB_KVT_BF16], nb_attn_avx512_bf16());
        assert_ptr_equal(d.attn_kv[NB_KVT_FP8], nb_attn_avx512_bf16());
    }
    nb_kernel_opts_defaults(&o);
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    /* plain AVX2 (no AVX-VNNI) takes the vpmaddubsw kernel */
    const bool int8_dots = avx512 ? nb_cpu_get()->avx512vnni : nb_cpu_isa() == NB_ISA_AVX2;
    assert_true((d.attn_kv[NB_KVT_INT8] != d.attn) == int8_dots);
    if (!avx512 && int8_dots)
        assert_ptr_equal(d.attn_kv[NB_KVT_INT8], nb_cpu_get()->avxvnni ? nb_attn_avx2_int8() : nb_attn_avx2_int8_madd());
    assert_true((strstr(d.desc, "by vpmaddubsw") != NULL) == (!avx512 && int8_dots && !nb_cpu_get()->avxvnni));
    /* their decode tiles with bf16 dots wherever bf16 pools take them (the int8 codes are exact in bf16) */
    if (avx512 && int8_dots && !amx)
        assert_ptr_equal(d.attn_kv[NB_KVT_INT8], bf16_dots ? nb_attn_avx512_int8_bf16() : nb_attn_avx512_int8());
    assert_true((strstr(d.desc, "bf16 dots for decode") != NULL) == (avx512 && int8_dots && !amx && bf16_dots));
    for (int t = 0; t < NB_KV_TYPES; t++)
        if (t != NB_KVT_BF16 && t != NB_KVT_INT8 && t != NB_KVT_FP8)
            assert_ptr_equal(d.attn_kv[t], amx ? nb_attn_amx_split() : d.attn);
    assert_true((strstr(d.desc, "int8 KV: int8 dots") != NULL) == (int8_dots && !amx));
    assert_true((strstr(d.desc, "int8 KV: split bf16, int8 dots") != NULL) == amx);
    if (amx) { /* without the int8 dots the split kernel alone; without the AMX kernels the int8 dots alone */
        o.attn_int8_dots = false;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_ptr_equal(d.attn_kv[NB_KVT_INT8], nb_attn_amx_split());
        assert_null(strstr(d.desc, "int8 KV:"));
        o.attn_int8_dots = true;
        o.attn_bf16_dots = NB_CHOICE_OFF;
        assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
        assert_ptr_equal(d.attn_kv[NB_KVT_INT8], nb_attn_avx512_int8());
        assert_non_null(strstr(d.desc, "int8 KV: int8 dots"));
    }
    o.attn_bf16_dots = NB_CHOICE_OFF;
    o.attn_int8_dots = false;
    assert_int_equal(nb_dispatch_build(&o, &d), NB_OK);
    for (int t = 0; t < NB_KV_TYPES; t++) assert_ptr_equal(d.attn_kv[t], d.attn);
    assert_false(d.attn_bf16_amx);
}

/* name=value is refused with an error that names the variable; unsets it. */
static void env_refused(nb_kernel_opts *o, const char *name, const char *value) {
    setenv(name, value, 1);
    assert_int_not_equal(nb_kernel_opts_from_env(o), NB_OK);
    assert_non_null(strstr(nb_errmsg(), name));
    unsetenv(name);
}

/* The variables test_env sets or expects unset: saved and cleared at its
 * start, put back at its end, so that one set around the test program (an
 * oracle run's NIBBLE_ISA, NIBBLE_ATTN_BF16_DOTS=0) neither fails its
 * checks of the defaults nor is lost to the tests after it. */
static const char *const env_names[] = {"NIBBLE_ISA", "NIBBLE_REPACK", "NIBBLE_NO_INT8_GEMM", "NIBBLE_QGEMM_MIN",
                                        "NIBBLE_ATTN_INT8_DOTS", "NIBBLE_ATTN_BF16_DOTS"};
#define N_ENV_NAMES (sizeof env_names / sizeof *env_names)

static void env_save(char *saved[N_ENV_NAMES]) {
    for (size_t i = 0; i < N_ENV_NAMES; i++) {
        const char *v = getenv(env_names[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(env_names[i]);
    }
}

static void env_restore(char *saved[N_ENV_NAMES]) {
    for (size_t i = 0; i < N_ENV_NAMES; i++) {
        if (saved[i]) setenv(env_names[i], saved[i], 1);
        else unsetenv(env_names[i]);
        free(saved[i]);
    }
}

static void test_env(void **state) {
    (void)state;
    char *saved[N_ENV_NAMES];
    env_save(saved);
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    setenv("NIBBLE_ISA", "avx2", 1);
    setenv("NIBBLE_REPACK", "0", 1);
    setenv("NIBBLE_NO_INT8_GEMM", "1", 1);
    setenv("NIBBLE_QGEMM_MIN", "40", 1);
    setenv("NIBBLE_ATTN_INT8_DOTS", "0", 1);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_false(o.attn_int8_dots);
    assert_int_equal(o.attn_bf16_dots, NB_CHOICE_AUTO);
    unsetenv("NIBBLE_ATTN_INT8_DOTS");
    /* values other than the allowed ones are refused, naming the variable */
    env_refused(&o, "NIBBLE_ATTN_INT8_DOTS", "no");
    setenv("NIBBLE_ATTN_BF16_DOTS", "on", 1);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_int_equal(o.attn_bf16_dots, NB_CHOICE_ON);
    env_refused(&o, "NIBBLE_ATTN_BF16_DOTS", "yes");
    nb_kernel_opts_defaults(&o);
    setenv("NIBBLE_ISA", "avx2", 1);
    setenv("NIBBLE_REPACK", "0", 1);
    setenv("NIBBLE_NO_INT8_GEMM", "1", 1);
    setenv("NIBBLE_QGEMM_MIN", "40", 1);
    assert_int_equal(nb_kernel_opts_from_env(&o), NB_OK);
    assert_int_equal(o.max_isa, NB_ISA_AVX2);
    assert_false(o.repack);
    assert_false(o.int8_gemm);
    assert_int_equal(o.qgemm_min, 40);
    env_refused(&o, "NIBBLE_QGEMM_MIN", "4x");
    env_refused(&o, "NIBBLE_ISA", "sse9");
    env_restore(saved);
}

/* Last: builds the process table. */
static void test_process_table(void **state) {
    (void)state;
    nb_kernel_opts o;
    nb_kernel_opts_defaults(&o);
    o.qgemm_min = 24;
    assert_int_equal(nb_dispatch_configure(&o), NB_OK);
    const nb_dispatch *d = nb_dispatch_default();
    assert_ptr_equal(d, nb_dispatch_default()); /* built once */
    assert_int_equal(d->qgemm_min, 24);
    assert_int_equal(nb_dispatch_configure(&o), NB_OK); /* the same options: fine */
    o.qgemm_min = 25;
    assert_int_not_equal(nb_dispatch_configure(&o), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "already built"));
    assert_int_equal(nb_repack_target(NB_Q8_0), d->repack_to[nb_dispatch_slot(NB_Q8_0)]);
    nb_kctx k;
    assert_int_equal(nb_kctx_init(&k, 1), NB_OK);
    assert_ptr_equal(k.d, d);
    assert_ptr_equal(k.fk, d->fk);
    nb_kctx_free(&k);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_slots), cmocka_unit_test(test_isa_caps),
                                       cmocka_unit_test(test_options), cmocka_unit_test(test_env),
                                       cmocka_unit_test(test_process_table)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
