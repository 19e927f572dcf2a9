/* nibble gate: placeholder while the gate is built (issue 10). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"

int nb_cmd_gate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "nibble gate: not built yet\n");
    return NB_EXIT_FAIL;
}
