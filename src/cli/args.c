/* Flag value parsing for the subcommands. */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nibble_status.h"

bool nb_arg_int(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "nibble %s: %s: '%s' is not an integer in the allowed range %lld..%lld\n", cmd, flag, val,
                (long long)lo, (long long)hi);
        return false;
    }
    *out = v;
    return true;
}

bool nb_arg_float(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || isnan(v) || v < lo || v > hi) {
        fprintf(stderr, "nibble %s: %s: '%s' is not a number in the allowed range %g..%g\n", cmd, flag, val, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool nb_arg_bytes(const char *cmd, const char *flag, const char *val, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    static const struct { const char *suffix; double mul; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0}, {"MiB", 1048576.0},
        {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
        {"TiB", 1099511627776.0}, {"TB", 1e12},
    };
    if (errno || end == val || isnan(v) || v < 0) goto bad;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcasecmp(end, units[i].suffix) && (strcmp(end, "b") != 0)) {
            double b = v * units[i].mul;
            if (b > 1.8e19) goto bad;
            *out = (uint64_t)b;
            return true;
        }
    }
bad:
    fprintf(stderr, "nibble %s: %s: '%s' is not a size (examples: 32GiB, 80GB, 512MiB, 4096)\n", cmd, flag, val);
    return false;
}

const char *nb_arg_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "nibble %s: %s needs a value, or is not an option of this command (see --help)\n", cmd, argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

void nb_cli_error(const char *cmd) { fprintf(stderr, "nibble %s: %s\n", cmd, nb_errmsg()); }

int nb_cli_exit_code(int status) {
    switch ((nb_status)status) {
    case NB_OK: return NB_EXIT_OK;
    case NB_ERR_INVALID: case NB_ERR_RANGE: case NB_ERR_CAPACITY: case NB_ERR_UNSUPPORTED:
    case NB_ERR_FORMAT: case NB_ERR_NOT_FOUND:
        return NB_EXIT_USAGE;
    default: return NB_EXIT_FAIL;
    }
}
