/* A JSON Schema subset for golden-set checks: `type` (a name or a list of
 * names: object, array, string, number, integer, boolean, null), `required`,
 * `properties`, `enum`, `items` (one schema for every element), `minimum`,
 * `maximum` (inclusive). Annotations (`$schema`, `title`, `description`,
 * `$id`, `additionalProperties` true) are accepted and ignored; any other
 * keyword is refused when the set is loaded rather than silently ignored.
 * Semantics follow JSON Schema draft 2020-12 for these keywords ("integer"
 * also accepts a real number with zero fraction; enum compares with JSON
 * equality). Schemas and instances are jansson trees passed as void *. */
#ifndef NB_EVAL_JSONSCHEMA_H
#define NB_EVAL_JSONSCHEMA_H

#include <stdbool.h>
#include <stddef.h>

/* Checks the schema itself. false with a message naming the schema path
 * ("properties.amount.type") in why. */
bool nb_jsonschema_check(const void *schema, char *why, size_t cap);
/* Validates an instance; false with the first violation (instance path and
 * keyword) in why. The schema must have passed nb_jsonschema_check. */
bool nb_jsonschema_validate(const void *schema, const void *instance, char *why, size_t cap);

#endif
