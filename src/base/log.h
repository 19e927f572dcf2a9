/* Logging to stderr. Level from NIBBLE_LOG=error|warn|info|debug (default info). */
#ifndef NB_BASE_LOG_H
#define NB_BASE_LOG_H

typedef enum { NB_LOG_ERROR, NB_LOG_WARN, NB_LOG_INFO, NB_LOG_DEBUG } nb_log_level;

void nb_log(nb_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nb_log_set_level(nb_log_level lvl);
int nb_log_enabled(nb_log_level lvl);

#define NB_ERROR(...) nb_log(NB_LOG_ERROR, __VA_ARGS__)
#define NB_WARN(...) nb_log(NB_LOG_WARN, __VA_ARGS__)
#define NB_INFO(...) nb_log(NB_LOG_INFO, __VA_ARGS__)
#define NB_DEBUG(...) nb_log(NB_LOG_DEBUG, __VA_ARGS__)

#endif
