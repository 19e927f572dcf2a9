/* The kernel dispatch table (dispatch.h), built once. */
#include "kernels/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kernels/sbatch.h"

void nb_kernel_opts_defaults(nb_kernel_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_isa = NB_ISA_AMX;
    o->repack = true;
    o->int8_gemm = true;
    o->amx_gemm = true;
    o->small_batch = true;
    o->attn_int8_dots = true;
    o->qgemm_min = 16; /* docs/performance.md: below it per-(row, token) integer dots win */
    o->rgemm_min = 0;  /* per CPU and type: below */
    o->decode_dot = NB_DECODE_DOT_AUTO;
    o->decode_prefetch = 0;
    /* Every batch size: the small-batch GEMMs' 16-token tiles (kernels/sbatch.h,
     * Z = 1) beat kernels/x86/repack*_avx512.c's at every size measured on
     * AMD (docs/speed.md, session 11: pp512 Q4_K_M +5-24%, Q4_0 +3-16%, 32
     * HTTP clients +7%) and equal them on AVX2; 0 restores those. */
    o->sgemm_max = (int64_t)1 << 30;
    /* Q4_0R rows-in-lanes (kernels/x86/rows_avx512.c) against the paths it
     * replaces, 1 thread, 256 MiB of 5632 x 2048 weights (docs/speed.md):
     * 0.92x at 4 tokens, 1.13x at 5, 1.51x at 8, 1.57x at 16, 1.03x at 24
     * (Q6_KR against its small-batch GEMM, 2 threads: 1.4x at 8 and 16,
     * even at 24; session 12). From 4 (session 40, on the Zen 5 guest:
     * Q4_0R 1.26-1.40x, Q4_KR 1.36-1.59x, Q6_KR 1.28-1.59x at 5-7 tokens,
     * Q4_KR 1.44x and Q6_KR 1.17x at 4; decode of 5-7 sequences Q4_0
     * +2-42%, Q4_K_M +18-73%, of 4 Q4_K_M +21-48% in 5 of 6 rounds); Q4_0R
     * and W4G*R from 4 too since their kernel transposes half groups in
     * registers (session 52, Zen 5 guest: decode of 4 sequences Q4_0
     * 1.14-1.17x, W4G128 1.10-1.14x against their multi-token dots). Below it the multi-token dots give exactly the
     * one-token results (test_matmul_many); from it, as the int8 GEMMs, the
     * same integer sums in another float order. */
    o->rows_min = 4;
    o->rows_max = 24;
}

static nb_status env_int(const char *name, int64_t lo, int64_t hi, int64_t *out) {
    const char *e = getenv(name);
    if (!e) return NB_OK;
    char *end;
    long long v = strtoll(e, &end, 10);
    if (!*e || *end || v < lo || v > hi)
        return nb_fail(NB_ERR_INVALID, "environment %s='%s': expected an integer %lld..%lld", name, e, (long long)lo,
                       (long long)hi);
    *out = v;
    return NB_OK;
}

nb_status nb_kernel_opts_from_env(nb_kernel_opts *o) {
    const char *e = getenv("NIBBLE_ISA");
    if (e && *e) {
        nb_isa isa;
        if (!nb_isa_parse(e, &isa))
            return nb_fail(NB_ERR_INVALID, "environment NIBBLE_ISA='%s': expected scalar, avx2, avx512 or amx", e);
        o->max_isa = isa;
    }
    e = getenv("NIBBLE_REPACK");
    if (e && !strcmp(e, "0")) o->repack = false;
    e = getenv("NIBBLE_ATTN_BF16_DOTS");
    if (e && !nb_choice_parse(e, &o->attn_bf16_dots))
        return nb_fail(NB_ERR_INVALID, "environment NIBBLE_ATTN_BF16_DOTS='%s': expected 0, 1 or auto", e);
    e = getenv("NIBBLE_ATTN_INT8_DOTS");
    if (e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
        return nb_fail(NB_ERR_INVALID, "environment NIBBLE_ATTN_INT8_DOTS='%s': expected 0 or 1", e);
    if (e) o->attn_int8_dots = !strcmp(e, "1");
    e = getenv("NIBBLE_NO_INT8_GEMM");
    if (e && *e && strcmp(e, "0") != 0) o->int8_gemm = false;
    e = getenv("NIBBLE_AMX_GEMM");
    if (e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
        return nb_fail(NB_ERR_INVALID, "environment NIBBLE_AMX_GEMM='%s': expected 0 or 1", e);
    if (e) o->amx_gemm = !strcmp(e, "1");
    NB_TRY(env_int("NIBBLE_QGEMM_MIN", 0, (int64_t)1 << 40, &o->qgemm_min));
    NB_TRY(env_int("NIBBLE_SGEMM_MAX", 0, (int64_t)1 << 40, &o->sgemm_max));
    int64_t streams = o->decode_streams;
    NB_TRY(env_int("NIBBLE_DECODE_STREAMS", 0, NB_DECODE_STREAMS_MAX, &streams));
    o->decode_streams = (int)streams;
    NB_TRY(env_int("NIBBLE_GEMM_SLAB_KIB", NB_GEMM_SLAB_MIN_KIB, NB_GEMM_SLAB_MAX_KIB, &o->gemm_slab_kib));
    return NB_OK;
}

_Thread_local int nb_prefetch_bytes __attribute__((tls_model("initial-exec"))) = NB_PREFETCH_DEFAULT;
_Thread_local int nb_prefetch_l2_bytes __attribute__((tls_model("initial-exec"))) = NB_PREFETCH_L2_DEFAULT;

/* The streaming kernels' prefetch distance (kernels.h) on this CPU. AMD:
 * 8 KiB. On the Zen 5-class EPYC guest of 2026-12-01 (family 26) the
 * Q4_0R decode dot streamed 35.6 GB/s per core at 2 KiB, 39.0-39.7 at 4 KiB,
 * 41.1-41.5 at 8 KiB and 39.5-41.0 at 12-24 KiB, two cores at once, 512 MiB
 * of weights on huge pages (the probe's best pattern: 41-42 per core);
 * TinyLlama Q4_0 tg64 went from 99-100 to 114-118 tok/s (docs/speed.md).
 * Zen 4 (family 25) was not measured; its memory system rewarded the same
 * single-stream pattern (../shared/MEASURED.md), so it takes the same.
 * Intel and others: 2 KiB, the best of 1/2/4 KiB measured for F16 decode on
 * Sapphire Rapids (docs/performance.md). */
/* bf16-dot attention (vdpbf16ps) against the f32 products for a bf16
 * pool, TinyLlama-shaped Q4_0, 2 threads, interleaved (docs/speed.md,
 * session 16): on the Intel AVX-512/AMX guest pp8192 132.1 / 162.8 and
 * 141.6 / 170.2 tok/s (0.81-0.83x), decode at d4096 equal (30.6 / 29.0,
 * 28.9 / 29.3); on the AMD Zen 5-class guest pp8192 229 -> 275 (1.20x,
 * session 10). So AMD (and others) take it, Intel does not. */
bool nb_attn_bf16_dots_for_cpu(const nb_cpu *c) { return c->vendor != NB_CPU_INTEL; }
/* With AMX-BF16 granted the tile-unit kernel (kernels/x86/attn_amx.c) is
 * taken instead, whatever the vendor: one 64-token tile at 4096 keys took
 * 1.29 ms against 4.20 ms with f32 products and 5.82 ms with vdpbf16ps
 * (bench/bench_attn.c, Intel guest, docs/speed.md session 19). */

bool nb_choice_parse(const char *s, nb_choice *out) {
    if (!strcmp(s, "auto")) *out = NB_CHOICE_AUTO;
    else if (!strcmp(s, "1") || !strcmp(s, "on")) *out = NB_CHOICE_ON;
    else if (!strcmp(s, "0") || !strcmp(s, "off")) *out = NB_CHOICE_OFF;
    else return false;
    return true;
}

/* With 4 streams per thread (nb_decode_streams_for_cpu) each stream needs
 * less: on the family 26 guest of session 32, TinyLlama tg64 with 4 streams
 * read Q4_0 72.2 / 73.4 tok/s at 2 KiB against 61.3 / 55.2 at 8 KiB, F16
 * 22.1 / 21.6 against 19.3 / 17.3 (interleaved), and the load-time
 * measurement picked 2 KiB there as well. */
int nb_prefetch_for_cpu(const nb_cpu *c) {
    if (c->vendor == NB_CPU_AMD && c->family == 26) return 2048;
    return c->vendor == NB_CPU_AMD && c->family >= 25 ? 8192 : NB_PREFETCH_DEFAULT;
}

/* The second request of each line, into L2 (kernels.h nb_prefetch_l2_bytes):
 * 4 KiB on the Intel AVX-512 + AMX parts, where it was measured (Q4_0R
 * decode dot 28.1 -> 29.3-31.1 GB/s, 2 threads; 1-8 KiB tried: 8 KiB lost,
 * 2 KiB under the L1 distance lost; docs/speed.md session 30); none in the
 * table elsewhere, where nobody measured it: the loader tries it there
 * (kernels/tune.c). */
int nb_prefetch_l2_for_cpu(const nb_cpu *c) {
    return c->vendor == NB_CPU_INTEL && c->family == 6 && c->avx512f && c->amx_tile ? 4096 : 0;
}

/* Runs of rows per thread in one-token matmuls (matmul.c seg_streams). On
 * the AMD Zen 5-class EPYC guest (family 26) of session 32 a read-only sum,
 * 2 threads, 512 MiB on huge pages, read 38.5 GB/s as one stream per thread
 * (8 KiB prefetch) and 51.7 as 4 streams per thread in 64-byte lockstep (2
 * KiB prefetch; 2 streams 42.8; the same 4 streams over 32 KiB chunks only
 * 22.6, row-sized turns 38.8): TinyLlama tg64, 2 threads, 1 -> 4 streams,
 * Q4_0 63.3 -> 74.1 and 56.9 -> 62.0 tok/s, Q8_0 26.3 -> 43.9, W4G128 45.0
 * -> 60.0, Q4_K_M 53.9-55.0 -> 59.9-69.1, F16 17.5-18.2 -> 21.3-22.4
 * (docs/speed.md, session 32). Zen 4 and Intel were not measured: one
 * stream, as before. */
int nb_decode_streams_for_cpu(const nb_cpu *c) { return nb_decode_streams_measured_for_cpu(c) ? 4 : 1; }
bool nb_decode_streams_measured_for_cpu(const nb_cpu *c) { return c->vendor == NB_CPU_AMD && c->family == 26; }

/* Measured, both distances: Intel's AVX-512 + AMX server parts (Sapphire
 * Rapids and the guests reporting family 6 model 167 with AMX: L1 2 KiB
 * best of 0-16 KiB, bench/bench_decode.c; L2 4 KiB, session 30). AMD
 * family 26 has its L1 distance measured (8 KiB, docs/speed.md session 7)
 * but not the L2 one, Zen 4 (family 25) takes 8 KiB by analogy and client
 * CPUs 2 KiB by default: there the loader measures (kernels/tune.c). */
bool nb_prefetch_measured_for_cpu(const nb_cpu *c) {
    return c->vendor == NB_CPU_INTEL && c->family == 6 && c->avx512f && c->amx_tile;
}

/* Every row of a job passes one slab of packed activations before the next
 * slab (matmul.c), so a slab should stay in the core's L2 next to the
 * weights streaming through. Half the L2 at first: on the Zen 5-class EPYC guest of
 * 2026-12-01 (1 MiB L2) pp512 of TinyLlama, 2 threads, went from 305-326 to
 * 367-383 tok/s (Q4_0), 290-292 to 359-364 (Q4_K_M), 261-268 to 327
 * (Q8_0) when the slab went from 1.5 MiB (the size set on Sapphire Rapids,
 * 2 MiB L2) to 512 KiB; 384 KiB measured the same, 640-768 KiB 5% slower,
 * 256 KiB 5% slower (docs/speed.md, session 10). With the small-batch
 * GEMMs' tiles at every size (session 11) a quarter is better: pp512 Q4_0
 * 456-463 -> 499-508 tok/s at 256-384 KiB, Q8_0 483-502 -> 515-518, Q4_K_M
 * the same, AVX2 the same. The AMX GEMMs (kernels/x86/gemm_amx.c) unpack
 * each 16-row tile's weights once per slab and then run every group of the
 * slab through the tile unit: the whole L2 is better there (Intel guest
 * with 2 MiB L2, pp512 Q4_0: 383-389 tok/s at 512 KiB, 430-433 at 2 MiB,
 * 414-416 at 4 MiB; docs/speed.md, session 27). */
size_t nb_gemm_slab_for_cpu(const nb_cpu *c, bool amx) {
    long kib = c->l2_bytes > 0 ? (c->l2_bytes >> 10) / (amx ? 1 : 4) : 256;
    return (size_t)NB_MIN(NB_MAX(kib, NB_GEMM_SLAB_MIN_KIB), NB_GEMM_SLAB_MAX_KIB) << 10;
}

/* The float dots for one token (decode). Per CPU: on AMD Zen 4 and Zen 5
 * the 256-bit F16 dot streams faster than the 512-bit one (Zen 4: F16
 * decode 15.5 vs 10.8 tok/s on TinyLlama, ../shared/MEASURED.md; Zen 5:
 * 0.5-6% more, docs/speed.md session 34), so AMD families 25 and 26 take
 * the AVX2 dots unless told otherwise; Intel and other CPUs take the
 * widest. */
static void pick_decode(const nb_kernel_opts *o, nb_isa isa, nb_dispatch *d) {
    const nb_float_kernels *k512 = isa >= NB_ISA_AVX512 ? nb_float_kernels_avx512() : NULL;
    const nb_float_kernels *k256 = isa >= NB_ISA_AVX2 ? nb_float_kernels_avx2() : NULL;
    const nb_float_kernels *pick = k512 ? k512 : k256;
    nb_decode_dot want = o->decode_dot;
    /* Zen 4 (AMD family 25) runs 512-bit ops as two 256-bit halves and its
     * AVX-512 F16 dot was the slower one (issue 14: 10.8 vs 15.5 tok/s).
     * Zen 5 (family 26) has full-width units, yet in one process over
     * TinyLlama's matrix sequence the AVX2 F16 / BF16 dots read 1.005-1.06x
     * / 1.06x the AVX-512 ones' bytes per second in all six A/Bs of session
     * 34 (docs/speed.md; session 10's engine-level pairs had gone 2:1 the
     * other way, within that host's noise). */
    const nb_cpu *c = nb_cpu_get();
    if (want == NB_DECODE_DOT_AUTO)
        want = c->vendor == NB_CPU_AMD && (c->family == 25 || c->family == 26) ? NB_DECODE_DOT_AVX2
                                                                              : NB_DECODE_DOT_AVX512;
    if (want == NB_DECODE_DOT_AVX2 && k256) pick = k256;
    if (want == NB_DECODE_DOT_AVX512 && k512) pick = k512;
    if (!pick) pick = nb_float_kernels_ref();
    d->dot_f32 = pick->dot_f32;
    d->dot_f16 = pick->dot_f16;
    d->dot_bf16 = pick->dot_bf16;
    d->dot_f32_m = pick->dot_f32_m;
    d->dot_f16_m = pick->dot_f16_m;
    d->dot_bf16_m = pick->dot_bf16_m;
    d->dot_f32_2 = pick->dot_f32_2;
    d->dot_f16_2 = pick->dot_f16_2;
    d->dot_bf16_2 = pick->dot_bf16_2;
    d->decode_dot = pick->isa;
    d->decode_prefetch = o->decode_prefetch_set ? o->decode_prefetch : nb_prefetch_for_cpu(c);
    d->decode_prefetch_l2 = o->decode_prefetch_l2_set ? o->decode_prefetch_l2 : nb_prefetch_l2_for_cpu(c);
    d->decode_streams = o->decode_streams ? o->decode_streams : nb_decode_streams_for_cpu(c);
    d->decode_streams_tune = !o->decode_streams && !nb_decode_streams_measured_for_cpu(c);
    d->decode_prefetch_tune = !o->decode_prefetch_set &&
                              (o->decode_prefetch_tune == NB_CHOICE_ON ||
                               (o->decode_prefetch_tune == NB_CHOICE_AUTO && !nb_prefetch_measured_for_cpu(c)));
}

/* The 8-bit repacked types' dots (Q8_0R, W8R; one token, and 2-7 tokens)
 * at 256 bits where the float decode dots are (pick_decode) on AMD family
 * 26 with AVX-VNNI. On the Zen 5 guest of session 50 the AVX-VNNI dots
 * read 1.08-1.11x the AVX-512 ones' bytes per second (bench/bench_decode.c
 * `isa`, 1 and 2 threads, interleaved); TinyLlama-shaped tg64, old and new
 * binaries interleaved: W8 0.97-1.17x (10 of 11 pairs faster, median
 * 1.08x), Q8_0 0.93-1.02x in 8 pairs in a noisy half hour and 1.00-1.07x
 * in 10 in a quiet one (docs/speed.md, session 50). The 4-bit dots were
 * 0.84-0.85x there and keep AVX-512. The weights stay in the AVX-512
 * layouts for the GEMMs; both widths take the same Q8_0P activations. */
bool nb_dots8_256_for_cpu(const nb_cpu *c) { return c->vendor == NB_CPU_AMD && c->family == 26 && c->avxvnni; }

/* The AVX-512 small-batch GEMMs' 512-bit tiles from 9 tokens (sbatch.h
 * _wide) on every AVX-512 CPU but AMD family 25 (Zen 4), whose 512-bit ops
 * cost two 256-bit ones, so that two 8-token units in 256-bit registers are
 * as fast there. On the Zen 5 guest of session 51 the 512-bit tiles at 9-16
 * tokens ran 1.3-2x the 256-bit ones (one thread, from L2 and from DRAM;
 * docs/speed.md). */
bool nb_sbatch_wide_for_cpu(const nb_cpu *c) { return c->avx512vnni && !(c->vendor == NB_CPU_AMD && c->family == 25); }

static void actpack_avx512(nb_actpack *ap, const float *X, int64_t g, void *row) {
    (void)row;
    nb_actpack_group_avx512(ap, X, g);
}

static void actpack_avx2(nb_actpack *ap, const float *X, int64_t g, void *row) {
    (void)row;
    nb_actpack_group_avx2(ap, X, g);
}

nb_status nb_dispatch_build(const nb_kernel_opts *o, nb_dispatch *d) {
    memset(d, 0, sizeof *d);
    nb_kernel_opts def;
    if (!o) {
        nb_kernel_opts_defaults(&def);
        o = &def;
    }
    if (o->qgemm_min < 0 || o->rgemm_min < 0)
        return nb_fail(NB_ERR_INVALID, "kernel options: qgemm_min %lld, rgemm_min %lld (neither may be negative)",
                       (long long)o->qgemm_min, (long long)o->rgemm_min);
    if (o->decode_prefetch_set && (o->decode_prefetch < 0 || o->decode_prefetch > NB_PREFETCH_MAX || o->decode_prefetch % 64))
        return nb_fail(NB_ERR_INVALID, "kernel options: decode_prefetch %d: expected a multiple of 64 in 0..%d bytes",
                       o->decode_prefetch, NB_PREFETCH_MAX);
    if (o->decode_prefetch_l2_set &&
        (o->decode_prefetch_l2 < 0 || o->decode_prefetch_l2 > NB_PREFETCH_MAX || o->decode_prefetch_l2 % 64))
        return nb_fail(NB_ERR_INVALID, "kernel options: decode_prefetch_l2 %d: expected a multiple of 64 in 0..%d bytes",
                       o->decode_prefetch_l2, NB_PREFETCH_MAX);
    if (o->decode_streams < 0 || o->decode_streams > NB_DECODE_STREAMS_MAX)
        return nb_fail(NB_ERR_INVALID, "kernel options: decode_streams %d: expected 0 (per CPU) or 1..%d",
                       o->decode_streams, NB_DECODE_STREAMS_MAX);
    if (o->gemm_slab_kib && (o->gemm_slab_kib < NB_GEMM_SLAB_MIN_KIB || o->gemm_slab_kib > NB_GEMM_SLAB_MAX_KIB))
        return nb_fail(NB_ERR_INVALID, "kernel options: gemm_slab_kib %lld: expected 0 (per CPU) or %d..%d KiB",
                       (long long)o->gemm_slab_kib, NB_GEMM_SLAB_MIN_KIB, NB_GEMM_SLAB_MAX_KIB);
    d->opts = *o;
    nb_isa isa = nb_cpu_isa();
    if (isa > o->max_isa) isa = o->max_isa;
    d->isa = isa;
    d->fk = nb_float_kernels_get(isa);
    d->attn = nb_attn_get(isa, &d->attn_name);
    for (int t = 0; t < NB_KV_TYPES; t++) d->attn_kv[t] = d->attn;
    /* bf16 products for bf16 pools: on the AMX tile unit wherever it is
     * granted (unless turned off), and there the other pools' prompt tiles
     * in split bf16 (f32-like accuracy, 2x the f32 kernel's speed: docs/
     * engine.md "KV dtypes"); else vdpbf16ps for bf16 and fp8 pools where
     * the CPU is faster with it (nb_attn_bf16_dots_for_cpu) or asked to */
    const bool amx = isa >= NB_ISA_AMX && o->attn_bf16_dots != NB_CHOICE_OFF;
    nb_attn_fn lo = amx ? nb_attn_amx_bf16() : NULL, split = amx ? nb_attn_amx_split() : NULL;
    d->attn_bf16_amx = lo != NULL && split != NULL;
    if (d->attn_bf16_amx)
        for (int t = 0; t < NB_KV_TYPES; t++) d->attn_kv[t] = split;
    bool bf16_dots = o->attn_bf16_dots == NB_CHOICE_ON ||
                     (o->attn_bf16_dots == NB_CHOICE_AUTO && nb_attn_bf16_dots_for_cpu(nb_cpu_get()));
    if (!lo && isa >= NB_ISA_AVX512 && bf16_dots && (lo = nb_attn_avx512_bf16()))
        d->attn_kv[NB_KVT_FP8] = lo; /* fp8 values are exact in bf16 (attn.h) */
    if (lo) d->attn_kv[NB_KVT_BF16] = lo;
    /* int8 pools: the int8-dot kernels where the CPU has them, their
     * decode tiles with bf16 dots where bf16 pools take them; where the
     * split-bf16 kernel runs on the AMX tile unit, it takes their prompt
     * tiles too (faster, and Q is not quantized: attn.h) */
    const nb_attn_fn i8_512 = bf16_dots && nb_attn_avx512_int8_bf16() ? nb_attn_avx512_int8_bf16() : nb_attn_avx512_int8();
    const nb_attn_fn i8 = !o->attn_int8_dots     ? NULL
                          : d->attn_bf16_amx     ? nb_attn_amx_split_int8()
                          : isa >= NB_ISA_AVX512 ? i8_512
                          : isa == NB_ISA_AVX2   ? (nb_attn_avx2_int8() ? nb_attn_avx2_int8() : nb_attn_avx2_int8_madd())
                                                 : NULL;
    if (i8) d->attn_kv[NB_KVT_INT8] = i8;
    pick_decode(o, isa, d);
    d->qgemm_min = o->qgemm_min < 2 ? 2 : o->qgemm_min;
    d->sgemm_max = o->sgemm_max < 0 ? 0 : o->sgemm_max;
    d->rows_min = o->rows_min < 1 ? 1 : o->rows_min;
    d->rows_max = o->rows_max < 0 ? 0 : o->rows_max;
    bool vnni512 = isa >= NB_ISA_AVX512 && nb_cpu_get()->avx512vnni;
    /* The int8 GEMM from 8 tokens (Q4_0: equal to per-row dots at 8, 73 vs
     * 53 tok/s at 12). Where the GEMMs are plain AVX2's (vpmaddubsw, no
     * VNNI of either width) Q4_KR, Q6_KR and W4G*R from 12: their
     * multi-token dots unpack each block once for 4 tokens, and on the Zen 3
     * EPYC guest of session 41 (1 thread, 256 MiB of 5632 x 2048 weights,
     * CPU time per step) the GEMM took 1.49 / 1.30 / 1.63x the dots' time at
     * 8 tokens and 1.48 / 1.27 / 1.09x at 12, 1.18 / 0.98 / 0.87x at 14;
     * Q4_0R and Q8_0R 0.91 and 0.77x at 8 (docs/speed.md, session 41).
     * The lane orders join them (session 42): Q4_0L 1.14x at 8, 1.30x at
     * 12, 1.04x at 14; Q8_0L 1.59x at 8, 1.10x at 12, 0.87x at 14. */
    d->rgemm_min = o->rgemm_min ? NB_MAX(o->rgemm_min, 2) : 8;
    d->rgemm_min_dots = !o->rgemm_min && isa == NB_ISA_AVX2 && !nb_cpu_get()->avxvnni ? 12 : d->rgemm_min;
    d->actpack_group = isa >= NB_ISA_AVX512 ? actpack_avx512 : nb_actpack_group_ref;
    /* AVX2 CPUs (and AVX-512 ones without VNNI) repack too: kernels/x86/repack_avx2_impl.h */
    bool rp = vnni512 || isa >= NB_ISA_AVX2;
    if (isa == NB_ISA_AVX2) d->actpack_group = actpack_avx2;
    const nb_isa gemm_isa = o->amx_gemm || isa < NB_ISA_AMX ? isa : NB_ISA_AVX512;
    const bool amx_gemm = o->int8_gemm && nb_repack_gemm(NB_Q4_0R, gemm_isa) == nb_repack_gemm_amx(NB_Q4_0R) &&
                          nb_repack_gemm_amx(NB_Q4_0R);
    d->gemm_slab_bytes = o->gemm_slab_kib ? (size_t)o->gemm_slab_kib << 10 : nb_gemm_slab_for_cpu(nb_cpu_get(), amx_gemm);
    const bool dots8_256 = isa >= NB_ISA_AVX512 && !strcmp(d->decode_dot, "avx2") && nb_dots8_256_for_cpu(nb_cpu_get());
    const bool sgemm_wide = nb_sbatch_wide_for_cpu(nb_cpu_get());
    for (int v = 0; v < (int)NB_DTYPE_MAX; v++) {
        int s = nb_dispatch_slot((nb_dtype)v);
        if (s < 0) continue;
        nb_dtype t = (nb_dtype)v;
        const nb_qdot *qd = nb_repack_qdot(t, isa);
        if (dots8_256 && (t == NB_Q8_0R || t == NB_W8R)) qd = nb_repack_qdot(t, NB_ISA_AVX2);
        d->qdot[s] = qd ? qd : nb_qdot_get(t, isa);
        nb_to_float_fn f = nb_repack_to_float_isa(t, isa);
        if (!f) {
            const nb_qtype *qt = nb_qtype_get(t);
            f = qt ? qt->to_float : NULL;
        }
        d->to_float[s] = f;
        d->rgemm[s] = o->int8_gemm ? nb_repack_gemm(t, gemm_isa) : NULL;
        d->sgemm[s] = d->rgemm[s] ? nb_sbatch_gemm(t, gemm_isa) : NULL; /* NULL beside an AMX GEMM */
        if (sgemm_wide && nb_sbatch_gemm_wide(d->sgemm[s])) d->sgemm[s] = nb_sbatch_gemm_wide(d->sgemm[s]);
        /* where the int8 kernels are the AVX2 file's, Q4_0, Q8_0, W8 and W4G*
         * in lane order (repack.h Q4_0L, Q8_0L): no fold of the sums across lanes */
        nb_dtype to = isa == NB_ISA_AVX2 ? nb_repack_lanes(nb_repack_layout(t)) : nb_repack_layout(t);
        d->repack_to[s] = o->repack && rp && to != t ? to : t;
    }
    const int s4k = nb_dispatch_slot(NB_Q4_KR);
    d->rows_max_q4_k = d->rows_max;
    if (s4k >= 0 && d->sgemm[s4k] == nb_q4_kr_sgemm_avx512_wide && d->rows_max > 8) d->rows_max_q4_k = 8;
    char rows[64] = "off"; /* the rows-in-lanes kernels exist for AVX-512 VNNI only */
    char l2[32] = "";
    if (d->decode_prefetch_l2) snprintf(l2, sizeof l2, ", L2 %d", d->decode_prefetch_l2);
    char streams[40] = "";
    if (d->decode_streams > 1) snprintf(streams, sizeof streams, " in %d streams per thread", d->decode_streams);
    char dots_k[64] = "";
    if (d->rgemm_min_dots != d->rgemm_min)
        snprintf(dots_k, sizeof dots_k, " (Q4_0, Q8_0, Q4_K, Q6_K, W8, W4G* from %lld)", (long long)d->rgemm_min_dots);
    if (vnni512 && d->rows_max >= d->rows_min)
        snprintf(rows, sizeof rows, "%lld..%lld tokens%s", (long long)d->rows_min, (long long)d->rows_max,
                 d->rows_max_q4_k < d->rows_max ? " (Q4_K to 8)" : "");
    snprintf(d->desc, sizeof d->desc, "isa %s, decode dots %s%s (prefetch %d%s%s)%s, repack %s, int8 GEMM %s from %lld tokens%s (slabs of %zu KiB), dequant GEMM from %lld, small-batch dots %s, rows dots %s, attention %s%s%s",
             nb_isa_name(isa), d->decode_dot, dots8_256 ? " (Q8_0, W8 too)" : "", d->decode_prefetch, d->decode_prefetch_tune ? ", tuned at load" : "", l2, streams, !(o->repack && rp) ? "off" : isa == NB_ISA_AVX2 ? "on (Q4_0, Q8_0, W8, W4G* in lane order)" : "on",
             o->int8_gemm && rp ? (amx_gemm ? "on (amx)" : vnni512 ? (sgemm_wide ? "on (avx512 vnni, 512-bit tiles from 9 tokens)" : "on (avx512 vnni)") : nb_cpu_get()->avxvnni ? "on (avx-vnni)" : "on (avx2)") : "off", (long long)d->rgemm_min, dots_k, d->gemm_slab_bytes >> 10, (long long)d->qgemm_min,
             o->small_batch ? "on" : "off", rows, d->attn_name ? d->attn_name : "?",
             d->attn_bf16_amx ? " (bf16 KV: bf16 dots on amx tiles, other KV: split bf16)"
             : d->attn_kv[NB_KVT_FP8] != d->attn  ? " (bf16 KV: bf16 dots, fp8 KV: bf16 dots)"
             : d->attn_kv[NB_KVT_BF16] != d->attn ? " (bf16 KV: bf16 dots)" : "",
             !i8                                       ? ""
             : d->attn_bf16_amx                         ? " (int8 KV: split bf16, int8 dots where the tiles cannot)"
             : d->attn_kv[NB_KVT_INT8] == nb_attn_avx512_int8_bf16() ? " (int8 KV: int8 dots, bf16 dots for decode)"
             : d->attn_kv[NB_KVT_INT8] == nb_attn_avx2_int8_madd()   ? " (int8 KV: int8 dots by vpmaddubsw, Q and P in 7 bits)"
                                                                     : " (int8 KV: int8 dots)");
    return NB_OK;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static nb_dispatch table;
static nb_kernel_opts configured;
static bool have_configured, built;

nb_status nb_dispatch_configure(const nb_kernel_opts *o) {
    pthread_mutex_lock(&mu);
    nb_status st = NB_OK;
    if (built) {
        if (memcmp(&table.opts, o, sizeof *o) != 0)
            st = nb_fail(NB_ERR_INVALID, "kernel options: the dispatch table was already built with other options");
    } else {
        configured = *o;
        have_configured = true;
        nb_cpu_cap_isa(o->max_isa);
    }
    pthread_mutex_unlock(&mu);
    return st;
}

const nb_dispatch *nb_dispatch_default(void) {
    if (__atomic_load_n(&built, __ATOMIC_ACQUIRE)) return &table; /* constant once built */
    pthread_mutex_lock(&mu);
    if (!built) {
        nb_kernel_opts o;
        if (have_configured) {
            o = configured;
        } else {
            nb_kernel_opts_defaults(&o);
            if (nb_kernel_opts_from_env(&o) != NB_OK) {
                NB_WARN("%s; using the default kernel options", nb_errmsg());
                nb_kernel_opts_defaults(&o);
            }
        }
        if (nb_dispatch_build(&o, &table) != NB_OK) { /* configure's options are checked: cannot happen */
            NB_WARN("%s; using the default kernel options", nb_errmsg());
            if (nb_dispatch_build(NULL, &table) != NB_OK) NB_WARN("%s", nb_errmsg()); /* the defaults are valid */
        }
        __atomic_store_n(&built, true, __ATOMIC_RELEASE);
        NB_DEBUG("kernels: %s", table.desc);
    }
    pthread_mutex_unlock(&mu);
    return &table;
}
