/* nibble perplexity: the old name of `nibble eval ppl` (cmd_eval_ppl.c),
 * kept as an alias - the same code path, the same options and output. */
#include "cli/commands.h"

int nb_cmd_perplexity(int argc, char **argv) { return nb_cmd_eval_ppl(argc, argv); }
