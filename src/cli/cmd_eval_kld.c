/* nibble eval kld: placeholder while the measurement is built (issue 10). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"

int nb_cmd_eval_kld(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "nibble eval kld: not built yet\n");
    return NB_EXIT_FAIL;
}
