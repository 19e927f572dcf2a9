/* Operating `nibble serve` behind a load balancer (docs/operations.md):
 * the /health body, the drain wait of the main thread, the cold-start
 * breakdown, --warmup and the periodic stats line (--log-stats-interval).
 *
 * Drain (SIGTERM, or POST /admin/drain with the API key when one is set;
 * without a key, POST /admin/drain only from a loopback client, else 403):
 * /health answers 503 {"status":"draining"} at once so the balancer stops
 * sending; requests that still arrive are served; when none is in flight
 * (or --shutdown-timeout has passed) the listener closes, what is left is
 * aborted and the process exits 0. */
#ifndef NB_SERVER_ADMIN_H
#define NB_SERVER_ADMIN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/server.h"

/* The /health body: {"status", "model", "running", "waiting", "kv_usage"}
 * (st NULL while loading: the three numbers are 0). Sets rs (200 when
 * http_ok, else 503 with Retry-After: 1). */
void nb_admin_health(nb_http_resp *rs, const char *status, bool http_ok, const char *model,
                     const nb_engine_stats *st);

/* The answer to POST /admin/drain: 202 {"status":"draining","in_flight":N}. */
void nb_admin_drain_resp(nb_http_resp *rs, int in_flight);

/* --warmup N: one request (the BOS token, or token 0) generating n_steps
 * tokens with ignore_eos, run to completion through the engine before the
 * server reports ready. n_steps is capped at max_model_len - 1. */
nb_status nb_admin_warmup(nb_engine *e, int32_t n_steps) __attribute__((warn_unused_result));

/* The cold-start breakdown from the engine's phases plus warm-up and the
 * total: phases[NB_PHASE_COUNT]. */
void nb_admin_startup_phases(const nb_engine_stats *st, double warmup_s, double total_s, double *phases);
/* One line: "startup: read 0.12 s, repack 0.30 s, kv_alloc 0.01 s, warmup 0.05 s, total 0.52 s". */
void nb_admin_startup_line(const double *phases, char *out, size_t cap);

/* vLLM's periodic line, from two snapshots dt seconds apart:
 * "Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s,
 *  Running: N reqs, Waiting: M reqs, KV cache usage: Z%, Prefix cache hit
 *  rate: W%, Preemptions: P (+d)". The hit rate is over the interval. */
void nb_admin_stats_line(const nb_engine_stats *prev, const nb_engine_stats *cur, double dt, char *out, size_t cap);

/* The main thread's wait while serving: returns the signal taken from sigs
 * (SIGTERM / SIGINT), or 0 when a drain was requested over HTTP. Every
 * log_interval_s seconds (0: never) logs nb_admin_stats_line to stderr. */
int nb_admin_wait(nb_server *srv, nb_engine *eng, const sigset_t *sigs, double log_interval_s);

#endif
