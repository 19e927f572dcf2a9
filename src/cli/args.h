/* Small helpers shared by the subcommands for parsing flag values with
 * errors that name the flag and the allowed range. Exit codes: 0 ok,
 * 1 runtime failure, 2 usage error / refused configuration. */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#define NB_EXIT_OK 0
#define NB_EXIT_FAIL 1
#define NB_EXIT_USAGE 2

/* Parse an integer / float flag value; on error prints
 * "nibble <cmd>: <flag>: '<val>' is not ... (allowed lo..hi)" and returns false. */
bool nb_arg_int(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi, int64_t *out);
bool nb_arg_float(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out);
/* Parses sizes like 32GiB, 512MiB, 80GB, 1.5T, 4096 (bytes). */
bool nb_arg_bytes(const char *cmd, const char *flag, const char *val, uint64_t *out);
/* argv[*i] is a flag needing a value: returns it and advances *i, or prints an error and returns NULL. */
const char *nb_arg_value(const char *cmd, int argc, char **argv, int *i);
/* Prints "nibble <cmd>: <nb_errmsg()>" to stderr. */
void nb_cli_error(const char *cmd);
/* Exit code for a failed nb_status: 2 for bad input/config, 1 otherwise. */
int nb_cli_exit_code(int status);

#endif
