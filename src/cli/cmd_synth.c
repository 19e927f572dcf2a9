/* nibble synth: write a deterministic random-weight model of a real
 * architecture and any size (src/model/synth.h; docs/synth.md). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "model/synth.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble synth --arch llama|qwen2 [options] -o OUT.gguf\n"
            "\n"
            "Writes a deterministic random-weight model (same seed -> same bytes).\n"
            "Defaults are the shapes of shared/models' synth-llama / synth-qwen2.\n"
            "\n"
            "  --arch A          llama or qwen2 (required)\n"
            "  --dim N           embedding length (default 256)\n"
            "  --layers N        blocks (default 4)\n"
            "  --heads N         attention heads (default 8)\n"
            "  --kv-heads N      KV heads, divides --heads (llama 2, qwen2 4)\n"
            "  --ffn N           feed-forward length (llama 768, qwen2 704)\n"
            "  --ctx N           context length (default 2048)\n"
            "  --vocab-from F    copy every tokenizer.* key of GGUF F (vocab size follows);\n"
            "                    default: built-in 512-token byte-level BPE\n"
            "  --seed S          weight seed (llama 1234, qwen2 5678)\n"
            "  --type T          f32, f16 or bf16 for 2-D weights (default f16; norms/biases f32)\n"
            "  --rope-theta X    RoPE base (llama 10000, qwen2 1000000)\n"
            "  --eps X           RMSNorm epsilon (llama 1e-5, qwen2 1e-6)\n"
            "  --tied / --untied share token_embd as the output (qwen2 default tied)\n"
            "  --outliers N      N residual channels get weight S in every attn_norm / ffn_norm: activation\n"
            "                    outliers at the q/k/v and gate/up inputs, as real LLMs have (default 0)\n"
            "  --outlier-scale S their norm weight (default 20)\n"
            "  --name S          general.name\n"
            "  -o, --output F    output path (required)\n"
            "  --force           write F even when it is the --vocab-from file or not a regular file\n");
}

int nb_cmd_synth(int argc, char **argv) {
    const char *cmd = "synth";
    nb_synth_params p;
    const char *arch = NULL, *out = NULL;
    bool force = false;
    /* first pass: the architecture sets the defaults the other flags override */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return NB_EXIT_OK;
        }
        if (!strcmp(argv[i], "--arch") && i + 1 < argc) arch = argv[i + 1];
    }
    if (!arch) {
        fprintf(stderr, "nibble synth: --arch is required (llama or qwen2)\n\n");
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    const nb_arch_info *row = nb_arch_find_gguf(arch);
    if (row && row->runs != NB_ARCH_NONE && nb_arch_info_of(row->runs) == row) /* one name per forward pass */
        nb_synth_defaults(&p, row->runs);
    else {
        fprintf(stderr, "nibble synth: --arch: '%s' is not supported (allowed llama, qwen2)\n", arch);
        return NB_EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        double dv;
#define INT_FLAG(flag, field, lo, hi)                                                               \
    if (!strcmp(a, flag)) {                                                                         \
        if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_int(cmd, flag, v, lo, hi, &iv))   \
            return NB_EXIT_USAGE;                                                                   \
        p.field = (int32_t)iv;                                                                      \
        continue;                                                                                   \
    }
        INT_FLAG("--dim", n_embd, 2, 1 << 16)
        INT_FLAG("--layers", n_layer, 1, 1024)
        INT_FLAG("--heads", n_head, 1, 1024)
        INT_FLAG("--kv-heads", n_head_kv, 1, 1024)
        INT_FLAG("--ffn", n_ff, 1, 1 << 20)
        INT_FLAG("--ctx", n_ctx, 1, 1 << 24)
#undef INT_FLAG
        if (!strcmp(a, "--arch")) {
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_int(cmd, a, v, 0, INT64_MAX, &iv))
                return NB_EXIT_USAGE;
            p.seed = (uint64_t)iv;
        } else if (!strcmp(a, "--type")) {
            if (!(v = nb_arg_value(cmd, argc, argv, &i))) return NB_EXIT_USAGE;
            if (!strcmp(v, "f32")) p.wtype = NB_F32;
            else if (!strcmp(v, "f16")) p.wtype = NB_F16;
            else if (!strcmp(v, "bf16")) p.wtype = NB_BF16;
            else {
                fprintf(stderr, "nibble synth: --type: '%s' is not supported (allowed f32, f16, bf16)\n", v);
                return NB_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--rope-theta")) {
            if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_float(cmd, a, v, 1e-3, 1e11, &dv))
                return NB_EXIT_USAGE;
            p.rope_theta = (float)dv;
        } else if (!strcmp(a, "--eps")) {
            if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_float(cmd, a, v, 1e-12, 0.5, &dv))
                return NB_EXIT_USAGE;
            p.norm_eps = (float)dv;
        } else if (!strcmp(a, "--vocab-from")) {
            if (!(p.vocab_from = nb_arg_value(cmd, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--name")) {
            if (!(p.name = nb_arg_value(cmd, argc, argv, &i))) return NB_EXIT_USAGE;
        } else if (!strcmp(a, "--outliers")) {
            int64_t nv;
            if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_int(cmd, a, v, 0, 1 << 16, &nv)) return NB_EXIT_USAGE;
            p.outlier_channels = (int32_t)nv;
            if (p.outlier_scale == 0) p.outlier_scale = 20.f;
        } else if (!strcmp(a, "--outlier-scale")) {
            if (!(v = nb_arg_value(cmd, argc, argv, &i)) || !nb_arg_float(cmd, a, v, 1e-3, 1000, &dv))
                return NB_EXIT_USAGE;
            p.outlier_scale = (float)dv;
        } else if (!strcmp(a, "--tied")) {
            p.tied = true;
        } else if (!strcmp(a, "--untied")) {
            p.tied = false;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out = nb_arg_value(cmd, argc, argv, &i))) return NB_EXIT_USAGE;
        } else {
            fprintf(stderr, "nibble synth: unknown option '%s'\n\n", a);
            usage(stderr);
            return NB_EXIT_USAGE;
        }
    }
    if (!out) {
        fprintf(stderr, "nibble synth: -o OUT.gguf is required\n");
        return NB_EXIT_USAGE;
    }
    const char *ins[] = {p.vocab_from};
    nb_status st = nb_out_check(out, ins, 1, force, "-o");
    if (st != NB_OK) {
        nb_cli_error(cmd);
        return NB_EXIT_USAGE;
    }
    st = nb_synth_validate(&p);
    if (st == NB_OK) st = nb_synth_write(&p, out);
    if (st != NB_OK) {
        nb_cli_error(cmd);
        return nb_cli_exit_code(st);
    }
    struct stat sb;
    long long size = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    printf("wrote %s: %s, dim %d, %d layers, %d/%d heads, ffn %d, %s, seed %llu, %lld bytes\n", out, arch, p.n_embd,
           p.n_layer, p.n_head, p.n_head_kv, p.n_ff, nb_dtype_name(p.wtype), (unsigned long long)p.seed, size);
    return NB_EXIT_OK;
}
