/* The engine options every command that loads a model shares: one parser
 * and one usage text for -m, --tokenizer, -t, --mmap, --kv-cache-dtype and
 * the serving limits (--max-model-len, --max-num-seqs, ...), so `generate`,
 * `serve`, `bench`, `logits`, `eval ppl` (alias `perplexity`) and `eval kld`
 * spell, range-check and document them the same way. The built-in default model (used when no
 * model is given) is chosen here, in the CLI: the library requires a path. */
#ifndef NB_CLI_ENGINE_OPTS_H
#define NB_CLI_ENGINE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/engine.h"
#include "kernels/dispatch.h"

/* Option groups a command accepts (OR them). */
enum {
    NB_EOPT_MODEL = 1 << 0,    /* -m/--model PATH, --tokenizer PATH */
    NB_EOPT_THREADS = 1 << 1,  /* -t/--threads N */
    NB_EOPT_MMAP = 1 << 2,     /* --mmap */
    NB_EOPT_KV_DTYPE = 1 << 3, /* --kv-cache-dtype T */
    NB_EOPT_SERVING = 1 << 4,  /* --max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size,
                                  --memory-utilization, --kv-cache-bytes, --[no-]enable-prefix-caching,
                                  --max-waiting */
    NB_EOPT_KERNELS = 1 << 5,  /* --isa, --repack, --qgemm-min, --no-int8-gemm, --decode-dot, --decode-prefetch
                                  (kernels/dispatch.h; each one sets the process's dispatch options) */
    NB_EOPT_ALL = (1 << 6) - 1,
};

typedef struct nb_engine_opts {
    const char *model;   /* -m/--model; NULL: not given */
    nb_engine_config ec; /* the rest, starting from nb_engine_config_defaults */
    nb_kernel_opts kopts; /* the kernel options: defaults, then the NIBBLE_* environment, then the flags */
} nb_engine_opts;

void nb_engine_opts_init(nb_engine_opts *o);

/* Looks at argv[*i]: 1 when it was one of `groups`' options (its value
 * consumed, *i advanced past it), 0 when it is not an engine option (left
 * for the command), -1 when its value is missing or bad (the message, which
 * names the flag and the allowed values, is printed; exit with
 * NB_EXIT_USAGE). */
int nb_engine_opts_parse(nb_engine_opts *o, unsigned groups, const char *cmd, int argc, char **argv, int *i);

/* The usage lines of `groups`' options. */
void nb_engine_opts_usage(FILE *f, unsigned groups);

/* The model to load: -m's path, else the built-in default model (its
 * path in the user cache, synthesized there on first use). */
nb_status nb_engine_opts_model_path(const char *model, char *buf, size_t cap) __attribute__((warn_unused_result));

#endif
