/* One parser and one usage text for the engine options (engine_opts.h). */
#include "cli/engine_opts.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "engine/budget.h"
#include "model/synth.h"

void nb_engine_opts_init(nb_engine_opts *o) {
    memset(o, 0, sizeof *o);
    nb_engine_config_defaults(&o->ec);
    nb_kernel_opts_defaults(&o->kopts);
    if (nb_kernel_opts_from_env(&o->kopts) != NB_OK) {
        fprintf(stderr, "nibble: warning: %s; using the defaults\n", nb_errmsg());
        nb_kernel_opts_defaults(&o->kopts);
    }
    /* the table's options from here on (the flags update them): the environment is read once */
    if (nb_dispatch_configure(&o->kopts) != NB_OK) fprintf(stderr, "nibble: warning: %s\n", nb_errmsg());
}

/* The kernel flags: each one updates the options and hands them to the
 * dispatch table, which is built later, when the model loads. */
static int kernel_opt(nb_engine_opts *o, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    nb_kernel_opts *k = &o->kopts;
    int64_t v;
    if (!strcmp(a, "--no-int8-gemm")) {
        k->int8_gemm = false;
    } else if (!strcmp(a, "--no-amx-gemm")) {
        k->amx_gemm = false;
    } else if (!strcmp(a, "--no-small-batch-dots")) {
        k->small_batch = false;
    } else if (!strcmp(a, "--no-rows-dots")) {
        k->rows_max = 0;
    } else if (!strcmp(a, "--no-attn-bf16-dots")) {
        k->attn_bf16_dots = NB_CHOICE_OFF;
    } else if (!strcmp(a, "--attn-bf16-dots")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!nb_choice_parse(val, &k->attn_bf16_dots)) {
            fprintf(stderr, "nibble %s: --attn-bf16-dots: '%s' is not allowed (allowed auto, on, off)\n", cmd, val);
            return -1;
        }
    } else if (!strcmp(a, "--no-attn-int8-dots")) {
        k->attn_int8_dots = false;
    } else if (!strcmp(a, "--isa")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!nb_isa_parse(val, &k->max_isa)) {
            fprintf(stderr, "nibble %s: --isa: '%s' is not allowed (allowed scalar, avx2, avx512, amx)\n", cmd, val);
            return -1;
        }
    } else if (!strcmp(a, "--repack")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0) {
            fprintf(stderr, "nibble %s: --repack: '%s' is not allowed (allowed on, off)\n", cmd, val);
            return -1;
        }
        k->repack = !strcmp(val, "on");
    } else if (!strcmp(a, "--decode-dot")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!strcmp(val, "auto")) k->decode_dot = NB_DECODE_DOT_AUTO;
        else if (!strcmp(val, "avx2")) k->decode_dot = NB_DECODE_DOT_AVX2;
        else if (!strcmp(val, "avx512")) k->decode_dot = NB_DECODE_DOT_AVX512;
        else {
            fprintf(stderr, "nibble %s: --decode-dot: '%s' is not allowed (allowed auto, avx2, avx512)\n", cmd, val);
            return -1;
        }
    } else if (!strcmp(a, "--qgemm-min")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i)) || !nb_arg_int(cmd, a, val, 2, 1 << 30, &v)) return -1;
        k->qgemm_min = v;
    } else if (!strcmp(a, "--int8-gemm-min")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i)) || !nb_arg_int(cmd, a, val, 2, 1 << 30, &v)) return -1;
        k->rgemm_min = v;
    } else if (!strcmp(a, "--sgemm-max")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i)) || !nb_arg_int(cmd, a, val, 0, 1 << 30, &v)) return -1;
        k->sgemm_max = v;
    } else if (!strcmp(a, "--gemm-slab-kib")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i)) ||
            !nb_arg_int(cmd, a, val, NB_GEMM_SLAB_MIN_KIB, NB_GEMM_SLAB_MAX_KIB, &v))
            return -1;
        k->gemm_slab_kib = v;
    } else if (!strcmp(a, "--decode-prefetch")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!strcmp(val, "auto") || !strcmp(val, "tune")) {
            k->decode_prefetch_set = false;
            k->decode_prefetch_tune = !strcmp(val, "tune") ? NB_CHOICE_ON : NB_CHOICE_AUTO;
            goto configure;
        }
        char *end;
        errno = 0;
        v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < 0 || v > NB_PREFETCH_MAX) {
            fprintf(stderr, "nibble %s: --decode-prefetch: '%s': expected auto, tune or bytes in 0..%d\n", cmd, val,
                    NB_PREFETCH_MAX);
            return -1;
        }
        if (v % 64) {
            fprintf(stderr, "nibble %s: --decode-prefetch: %lld is not a multiple of 64 bytes (a cache line)\n", cmd,
                    (long long)v);
            return -1;
        }
        k->decode_prefetch = (int)v;
        k->decode_prefetch_set = true;
    } else if (!strcmp(a, "--decode-prefetch-l2")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!strcmp(val, "auto")) {
            k->decode_prefetch_l2_set = false;
            goto configure;
        }
        char *end;
        errno = 0;
        v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < 0 || v > NB_PREFETCH_MAX || v % 64) {
            fprintf(stderr, "nibble %s: --decode-prefetch-l2: '%s': expected auto, or bytes in 0..%d, a multiple of 64\n",
                    cmd, val, NB_PREFETCH_MAX);
            return -1;
        }
        k->decode_prefetch_l2 = (int)v;
        k->decode_prefetch_l2_set = true;
    } else if (!strcmp(a, "--decode-streams")) {
        if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1;
        if (!strcmp(val, "auto")) {
            k->decode_streams = 0;
            goto configure;
        }
        char *end;
        errno = 0;
        v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < 1 || v > NB_DECODE_STREAMS_MAX) {
            fprintf(stderr, "nibble %s: --decode-streams: '%s': expected auto or 1..%d\n", cmd, val,
                    NB_DECODE_STREAMS_MAX);
            return -1;
        }
        k->decode_streams = (int)v;
    } else {
        return 0;
    }
configure:
    if (nb_dispatch_configure(k) != NB_OK) {
        fprintf(stderr, "nibble %s: %s: %s\n", cmd, a, nb_errmsg());
        return -1;
    }
    return 1;
}

static bool is(const char *a, const char *s1, const char *s2) { return !strcmp(a, s1) || (s2 && !strcmp(a, s2)); }

int nb_engine_opts_parse(nb_engine_opts *o, unsigned groups, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    int64_t v;
    nb_engine_config *c = &o->ec;
    if (groups & NB_EOPT_KERNELS) {
        int r = kernel_opt(o, cmd, argc, argv, i);
        if (r) return r;
    }
#define VAL() do { if (!(val = nb_arg_value(cmd, argc, argv, i))) return -1; } while (0)
#define INT(lo, hi) do { VAL(); if (!nb_arg_int(cmd, a, val, lo, hi, &v)) return -1; } while (0)
    if (groups & NB_EOPT_MODEL) {
        if (is(a, "-m", "--model")) { VAL(); o->model = val; return 1; }
        if (is(a, "--tokenizer", NULL)) { VAL(); c->tokenizer_path = val; return 1; }
    }
    if ((groups & NB_EOPT_THREADS) && is(a, "-t", "--threads")) { INT(1, 512); c->n_threads = (int)v; return 1; }
    if ((groups & NB_EOPT_MMAP) && is(a, "--mmap", NULL)) { c->use_mmap = true; return 1; }
    if ((groups & NB_EOPT_KV_DTYPE) && is(a, "--kv-cache-dtype", NULL)) {
        VAL();
        if (nb_engine_kv_dtype_parse(val, &c->kv_cache_dtype) != NB_OK) {
            nb_cli_error(cmd);
            return -1;
        }
        return 1;
    }
    if (!(groups & NB_EOPT_SERVING)) return 0;
    if (is(a, "--max-model-len", NULL)) { INT(1, 1 << 24); c->max_model_len = (int32_t)v; return 1; }
    if (is(a, "--max-num-seqs", NULL)) { INT(1, 1 << 16); c->max_num_seqs = (int32_t)v; return 1; }
    if (is(a, "--max-num-batched-tokens", NULL)) { INT(1, 1 << 20); c->max_num_batched_tokens = (int32_t)v; return 1; }
    if (is(a, "--max-prefill-tokens-per-step", NULL)) {
        INT(0, 1 << 20);
        c->max_prefill_tokens = v ? (int32_t)v : -1; /* -1: no separate share */
        return 1;
    }
    if (is(a, "--max-waiting", NULL)) { INT(1, 1 << 20); c->max_waiting = (int32_t)v; return 1; }
    if (is(a, "--block-size", NULL)) {
        INT(1, 1024);
        if (v & (v - 1)) {
            fprintf(stderr, "nibble %s: --block-size: '%s' is not allowed (allowed a power of two 1..1024)\n", cmd,
                    val);
            return -1;
        }
        c->block_size = (int32_t)v;
        return 1;
    }
    if (is(a, "--memory-utilization", "--gpu-memory-utilization")) {
        double d;
        VAL();
        if (!nb_arg_float(cmd, a, val, 1e-6, 1, &d)) return -1;
        c->memory_utilization = d;
        return 1;
    }
    if (is(a, "--kv-cache-bytes", NULL)) {
        VAL();
        return nb_arg_bytes(cmd, a, val, &c->kv_cache_bytes) ? 1 : -1;
    }
    if (is(a, "--enable-prefix-caching", NULL)) { c->enable_prefix_caching = true; return 1; }
    if (is(a, "--no-enable-prefix-caching", NULL)) { c->enable_prefix_caching = false; return 1; }
#undef VAL
#undef INT
    return 0;
}

void nb_engine_opts_usage(FILE *f, unsigned groups) {
    if (groups & NB_EOPT_MODEL)
        fputs("  -m, --model PATH                 GGUF file, HF directory or llama2.c .bin (default: the built-in\n"
              "                                   model, synthesized into the user cache on first use)\n"
              "      --tokenizer PATH             tokenizer file (tokenizer.json, tokenizer.model, llama2.c\n"
              "                                   tokenizer.bin), when not found from the model\n", f);
    if (groups & NB_EOPT_THREADS) fputs("  -t, --threads N                  compute threads (default: one per CPU this process may use)\n", f);
    if (groups & NB_EOPT_MMAP)
        fputs("      --mmap                       compute from the file mapping instead of a huge-page copy\n", f);
    if (groups & NB_EOPT_KV_DTYPE)
        fputs("      --kv-cache-dtype T           auto, f32, f16, bf16, fp8, int8 (default auto = f32)\n", f);
    if (groups & NB_EOPT_SERVING)
        fputs("      --max-model-len N            max prompt + completion tokens (default: the model's context)\n"
              "      --max-num-seqs N             sequences in one batch (default 64)\n"
              "      --max-num-batched-tokens N   tokens per engine step: decodes first, then prompt chunks\n"
              "                                   (default max(256, --max-num-seqs), or --max-num-seqs + the\n"
              "                                   prefill share when that is set)\n"
              "      --max-prefill-tokens-per-step N  prompt tokens per step on top of the decodes, so a step with\n"
              "                                   prefill costs at most the decodes + N tokens (default 0: none,\n"
              "                                   prompt chunks take what the decodes leave of the budget)\n"
              "      --memory-utilization F       fraction of host memory (or the cgroup memory limit, where\n"
              "                                   lower) for weights + KV (default 0.90); alias\n"
              "                                   --gpu-memory-utilization\n"
              "      --kv-cache-bytes SIZE        KV pool size (e.g. 64MiB), overriding the memory account\n"
              "      --block-size N               tokens per KV block, a power of two 1..1024 (default 16)\n"
              "      --enable-prefix-caching / --no-enable-prefix-caching   (default on)\n"
              "      --max-waiting N              waiting-queue length before requests are refused (default 1024)\n",
              f);
    if (groups & NB_EOPT_KERNELS)
        fputs("kernel options (chosen once, when the model loads; docs/performance.md):\n"
              "      --isa scalar|avx2|avx512|amx highest instruction set the kernels use (default: the CPU's best;\n"
              "                                   env NIBBLE_ISA)\n"
              "      --repack on|off              repack Q4_0/Q8_0/Q4_K/Q6_K at load for the AVX2/AVX-512 kernels (default on;\n"
              "                                   env NIBBLE_REPACK=0)\n"
              "      --no-int8-gemm               no int8 GEMM for batches of repacked weights (env NIBBLE_NO_INT8_GEMM=1)\n"
              "      --no-amx-gemm                int8 GEMMs on AVX-512 VNNI, not the AMX tile unit where it is\n"
              "                                   granted (env NIBBLE_AMX_GEMM=0)\n"
              "      --int8-gemm-min N            batch size from which the int8 GEMM is used (default 8; 12 for\n"
              "                                   Q4_0, Q8_0, Q4_K, Q6_K, W8, W4G* where the GEMMs are plain AVX2's)\n"
              "      --sgemm-max N                batches up to N tokens take the small-batch int8 GEMMs (default:\n"
              "                                   all; 0 = the 16-token GEMM; env NIBBLE_SGEMM_MAX)\n"
              "      --no-small-batch-dots        smaller batches one token at a time, not the multi-token dots;\n"
              "                                   float weights' batches of 2-8 through the float GEMM\n"
              "      --no-rows-dots               batches of 4-24 tokens not through the rows-in-lanes kernels\n"
              "                                   (Q4_0, Q4_K, Q6_K, W4G*; AVX-512 VNNI) but the multi-token dots /\n"
              "                                   int8 GEMMs\n"
              "      --attn-bf16-dots auto|on|off attention with bf16 dot products. On the AMX tile unit, where it is\n"
              "                                   granted (auto or on): bf16 KV pools in bf16, the other pools' prompt\n"
              "                                   tiles in split bf16 (hi + lo halves, f32-like accuracy, 1.3-1.4x\n"
              "                                   at 8k prompts). Else bf16 and fp8 pools, and int8 pools' decode,\n"
              "                                   with AVX512_BF16's (auto: not on Intel, where the f32 products\n"
              "                                   were faster). off: f32 products\n"
              "                                   (env NIBBLE_ATTN_BF16_DOTS=auto|1|0; --no-attn-bf16-dots = off)\n"
              "      --no-attn-int8-dots          int8 KV pools: attention in f32 products, not the int8 dot\n"
              "                                   products of AVX512_VNNI / AVX-VNNI / plain AVX2 (there Q and the\n"
              "                                   probabilities in 7 bits) (env NIBBLE_ATTN_INT8_DOTS=0)\n"
              "      --qgemm-min N                batch size from which other quantized weights are dequantized into\n"
              "                                   the float GEMM (default 16; env NIBBLE_QGEMM_MIN)\n"
              "      --decode-dot auto|avx2|avx512  width of the one-token float dots, and of Q8_0's and W8's\n"
              "                                   on AMD Zen 5 (default auto: per CPU vendor)\n"
              "      --decode-prefetch auto|tune|BYTES  how far ahead the decode kernels (float and quantized\n"
              "                                   dots, small-batch GEMMs) prefetch weights: a multiple of 64 in\n"
              "                                   0..65536, or tune: measured on the model's weights at load (1, 2,\n"
              "                                   4, 8 KiB, each alone and with L2 at twice it, 5 rounds of 64 MiB\n"
              "                                   trials; kept when 3% faster than the CPU's values). Default\n"
              "                                   auto: per CPU (2048 on Intel AVX-512 + AMX servers, measured with\n"
              "                                   the L2 distance; 2048 on AMD family 26, 8192 on 25), tuned at load\n"
              "                                   elsewhere when the weights pass 256 MiB (not with --mmap)\n"
              "      --decode-prefetch-l2 auto|BYTES  how far ahead the decode dots ask for each weight line a\n"
              "                                   second time, into L2 only (0: not; a multiple of 64 in\n"
              "                                   0..65536). Default auto: 4096 on Intel AVX-512 + AMX servers\n"
              "                                   (measured), else 0 or what the load-time measurement chose\n"
              "      --decode-streams auto|N      runs of rows each thread of a one-token matmul reads in\n"
              "                                   lockstep (1..4; env NIBBLE_DECODE_STREAMS). Default auto: 4 on\n"
              "                                   AMD family 26 (measured), else 1 or 4 as measured at load\n"
              "      --gemm-slab-kib N            KiB of packed activations the int8 GEMM keeps in L2 while every\n"
              "                                   row passes (64..65536; default per CPU: a quarter of the L2, all\n"
              "                                   of it with the AMX GEMMs; env NIBBLE_GEMM_SLAB_KIB)\n",
              f);
}

nb_status nb_engine_opts_model_path(const char *model, char *buf, size_t cap) {
    if (model) {
        size_t n = strlen(model);
        if (n >= cap) return nb_fail(NB_ERR_RANGE, "model path of %zu bytes (allowed < %zu)", n, cap);
        memcpy(buf, model, n + 1);
        return NB_OK;
    }
    return nb_default_model_path(buf, cap);
}
