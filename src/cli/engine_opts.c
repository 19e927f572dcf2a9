/* One parser and one usage text for the engine options (engine_opts.h). */
#include "cli/engine_opts.h"

#include <stdint.h>
#include <string.h>

#include "cli/args.h"
#include "engine/budget.h"
#include "model/synth.h"

void nb_engine_opts_init(nb_engine_opts *o) {
    memset(o, 0, sizeof *o);
    nb_engine_config_defaults(&o->ec);
}

static bool is(const char *a, const char *s1, const char *s2) { return !strcmp(a, s1) || (s2 && !strcmp(a, s2)); }

int nb_engine_opts_parse(nb_engine_opts *o, unsigned groups, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    int64_t v;
    nb_engine_config *c = &o->ec;
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
    if (groups & NB_EOPT_THREADS) fputs("  -t, --threads N                  compute threads (default: one per core)\n", f);
    if (groups & NB_EOPT_MMAP)
        fputs("      --mmap                       compute from the file mapping instead of a huge-page copy\n", f);
    if (groups & NB_EOPT_KV_DTYPE)
        fputs("      --kv-cache-dtype T           auto, f32, f16, bf16, fp8, int8 (default auto = f32)\n", f);
    if (groups & NB_EOPT_SERVING)
        fputs("      --max-model-len N            max prompt + completion tokens (default: the model's context)\n"
              "      --max-num-seqs N             sequences in one batch (default 64)\n"
              "      --max-num-batched-tokens N   tokens per engine step (default 512)\n"
              "      --memory-utilization F       fraction of host memory for weights + KV (default 0.90);\n"
              "                                   alias --gpu-memory-utilization\n"
              "      --kv-cache-bytes SIZE        KV pool size (e.g. 64MiB), overriding the memory account\n"
              "      --block-size N               tokens per KV block, a power of two 1..1024 (default 16)\n"
              "      --enable-prefix-caching / --no-enable-prefix-caching   (default on)\n"
              "      --max-waiting N              waiting-queue length before requests are refused (default 1024)\n",
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
