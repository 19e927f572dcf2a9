/* nibble eval ppl: today the llama-perplexity procedure of `nibble perplexity`. */
#include "cli/commands.h"

int nb_cmd_eval_ppl(int argc, char **argv) { return nb_cmd_perplexity(argc, argv); }
