/* Logging to stderr with a level chosen once from NIBBLE_LOG. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = -1;

static int current_level(void) {
    if (level < 0) {
        const char *e = getenv("NIBBLE_LOG");
        level = NB_LOG_INFO;
        if (e) {
            if (!strcmp(e, "error")) level = NB_LOG_ERROR;
            else if (!strcmp(e, "warn")) level = NB_LOG_WARN;
            else if (!strcmp(e, "debug")) level = NB_LOG_DEBUG;
        }
    }
    return level;
}

void nb_log_set_level(nb_log_level lvl) { level = (int)lvl; }
int nb_log_enabled(nb_log_level lvl) { return (int)lvl <= current_level(); }

void nb_log(nb_log_level lvl, const char *fmt, ...) {
    if (!nb_log_enabled(lvl)) return;
    static const char *names[] = {"error", "warning", "info", "debug"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nibble: %s: %s\n", names[lvl], buf);
}
