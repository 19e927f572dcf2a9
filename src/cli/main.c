/* nibble: one binary, one subcommand per cmd_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

#define X(n, h) {#n, nb_cmd_##n, h},
static const command commands[] = {NB_COMMANDS(X)};
#undef X

static void usage(FILE *f) {
    fprintf(f, "nibble %s - run large language models quantized\n\nusage: nibble <command> [options]\n\ncommands:\n",
            NIBBLE_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'nibble <command> --help' shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? NB_EXIT_USAGE : NB_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("nibble %s\n", NIBBLE_VERSION);
        return NB_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "nibble: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return NB_EXIT_USAGE;
}
