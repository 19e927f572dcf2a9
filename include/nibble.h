/* nibble: run large language models quantized - the embeddable API.
 *
 * Conventions: every function that can fail returns nb_status; on failure
 * nb_errmsg() gives the reason (thread-local, valid until the next failure
 * on the same thread). Objects come in create/free pairs and the creator
 * owns what it created. Numbers of nb_status never change meaning. */
#ifndef NIBBLE_H
#define NIBBLE_H

#include "nibble_status.h"

/* The embeddable API, one include for programs linking libnibble.a (compile
 * with -I<nibble>/include -I<nibble>/src; link libnibble.a -lpcre2-8
 * -ljansson -lpthread -lm):
 *   engine/engine.h    nb_engine_*: load a model, submit requests with
 *                      sampling parameters and stop conditions, stream
 *                      tokens through a sink, abort, stats (thread-safe)
 *   engine/session.h   nb_session_*: one sequence, teacher-forced logits
 *   plan/plan.h        nb_plan_*: the memory account
 * tests/embed/embed_example.c is a complete program using it. */
#include "engine/engine.h"
#include "engine/session.h"
#include "plan/plan.h"

#endif
