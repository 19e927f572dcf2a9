/* `nibble bench bw` (cmd_bench_bw.c) and the probe's report, which
 * `nibble bench model` prints under its roofline. */
#ifndef NB_CLI_BENCH_BW_H
#define NB_CLI_BENCH_BW_H

#include <jansson.h>
#include <stdio.h>

#include "kernels/membw.h"

int nb_cmd_bench_bw(int argc, char **argv);

/* The patterns as a JSON array [{"pattern", "streams", "prefetch", "pages", "gb_s", "best"}]. */
json_t *nb_bench_bw_json(const nb_membw_result *r);
/* One line per pattern, the fastest marked. */
void nb_bench_bw_print(FILE *f, const nb_membw_result *r);

#endif
