/* nibble eval: the quality measurements, one subcommand each. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

static void usage(FILE *f) {
    fprintf(f, "usage: nibble eval <what> [options]\n\n"
               "  ppl     perplexity of a model over a text (chunked or sliding window)\n"
               "  kld     KL divergence of a candidate against its baseline, per token class\n"
               "  golden  a golden set scored by bucket, in-process or against an endpoint\n\n"
               "'nibble eval <what> --help' shows its options.\n");
}

int nb_cmd_eval(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return NB_EXIT_OK;
    }
    if (!strcmp(argv[1], "ppl")) return nb_cmd_eval_ppl(argc - 1, argv + 1);
    if (!strcmp(argv[1], "kld")) return nb_cmd_eval_kld(argc - 1, argv + 1);
    if (!strcmp(argv[1], "golden")) return nb_cmd_eval_golden(argc - 1, argv + 1);
    fprintf(stderr, "nibble eval: unknown measurement '%s' (allowed: ppl, kld, golden)\n", argv[1]);
    return NB_EXIT_USAGE;
}
