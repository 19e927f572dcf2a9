/* The JSON Schema subset; see jsonschema.h. */
#include "eval/jsonschema.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 64

static const char *const TYPES[] = {"object", "array", "string", "number", "integer", "boolean", "null", NULL};

static bool known_type(const char *t) {
    for (const char *const *p = TYPES; *p; p++)
        if (!strcmp(*p, t)) return true;
    return false;
}

static bool fail(char *why, size_t cap, const char *path, const char *msg) {
    snprintf(why, cap, "%s%s%s", path[0] ? path : "", path[0] ? ": " : "", msg);
    return false;
}

static bool check_rec(const json_t *s, const char *path, int depth, char *why, size_t cap) {
    char msg[256], sub[512];
    if (depth > MAX_DEPTH) return fail(why, cap, path, "schema nested too deeply");
    if (!json_is_object(s)) return fail(why, cap, path, "a schema must be an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", k);
        if (!strcmp(k, "$schema") || !strcmp(k, "$id") || !strcmp(k, "title") || !strcmp(k, "description")) continue;
        if (!strcmp(k, "additionalProperties")) {
            if (!json_is_true(v)) return fail(why, cap, sub, "only 'true' is supported (the default)");
        } else if (!strcmp(k, "type")) {
            if (json_is_string(v)) {
                if (!known_type(json_string_value(v))) {
                    snprintf(msg, sizeof msg, "unknown type '%.40s' (allowed: object, array, string, number, integer, "
                             "boolean, null)", json_string_value(v));
                    return fail(why, cap, sub, msg);
                }
            } else if (json_is_array(v) && json_array_size(v) > 0) {
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x) if (!json_is_string(x) || !known_type(json_string_value(x)))
                    return fail(why, cap, sub, "every entry must be a type name");
            } else {
                return fail(why, cap, sub, "must be a type name or a non-empty list of them");
            }
        } else if (!strcmp(k, "required")) {
            size_t i;
            json_t *x;
            if (!json_is_array(v)) return fail(why, cap, sub, "must be an array of property names");
            json_array_foreach(v, i, x) if (!json_is_string(x)) return fail(why, cap, sub, "must be an array of strings");
        } else if (!strcmp(k, "properties")) {
            if (!json_is_object(v)) return fail(why, cap, sub, "must be an object of schemas");
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                char p2[512];
                snprintf(p2, sizeof p2, "%.400s.%.100s", sub, pk);
                if (!check_rec(pv, p2, depth + 1, why, cap)) return false;
            }
        } else if (!strcmp(k, "items")) {
            if (!check_rec(v, sub, depth + 1, why, cap)) return false;
        } else if (!strcmp(k, "enum")) {
            if (!json_is_array(v) || json_array_size(v) == 0) return fail(why, cap, sub, "must be a non-empty array");
        } else if (!strcmp(k, "minimum") || !strcmp(k, "maximum")) {
            if (!json_is_number(v)) return fail(why, cap, sub, "must be a number");
        } else {
            snprintf(msg, sizeof msg, "unsupported keyword '%.60s' (supported: type, required, properties, enum, "
                     "items, minimum, maximum)", k);
            return fail(why, cap, path, msg);
        }
    }
    return true;
}

bool nb_jsonschema_check(const void *schema, char *why, size_t cap) { return check_rec(schema, "", 0, why, cap); }

static bool is_type(const json_t *x, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(x);
    if (!strcmp(t, "array")) return json_is_array(x);
    if (!strcmp(t, "string")) return json_is_string(x);
    if (!strcmp(t, "number")) return json_is_number(x);
    if (!strcmp(t, "integer"))
        return json_is_integer(x) || (json_is_real(x) && floor(json_real_value(x)) == json_real_value(x));
    if (!strcmp(t, "boolean")) return json_is_boolean(x);
    if (!strcmp(t, "null")) return json_is_null(x);
    return false;
}

static const char *type_of(const json_t *x) {
    switch (json_typeof(x)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* JSON equality with 1 == 1.0 (jansson's json_equal keeps them apart). */
static bool json_eq(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_eq(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !json_eq(v, w)) return false;
        }
        return true;
    }
    return json_equal(a, b);
}

static bool validate_rec(const json_t *s, const json_t *x, const char *path, char *why, size_t cap) {
    char msg[256];
    const char *at = path[0] ? path : "$";
    json_t *v;
    if ((v = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(v)) ok = is_type(x, json_string_value(v));
        else {
            size_t i;
            json_t *t;
            json_array_foreach(v, i, t) ok = ok || is_type(x, json_string_value(t));
        }
        if (!ok) {
            snprintf(msg, sizeof msg, "type: %s is not allowed", type_of(x));
            return fail(why, cap, at, msg);
        }
    }
    if ((v = json_object_get(s, "enum"))) {
        bool ok = false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) ok = ok || json_eq(e, x);
        if (!ok) return fail(why, cap, at, "enum: the value is not one of the allowed values");
    }
    if (json_is_number(x)) {
        double d = json_number_value(x);
        if ((v = json_object_get(s, "minimum")) && d < json_number_value(v)) {
            snprintf(msg, sizeof msg, "minimum: %g < %g", d, json_number_value(v));
            return fail(why, cap, at, msg);
        }
        if ((v = json_object_get(s, "maximum")) && d > json_number_value(v)) {
            snprintf(msg, sizeof msg, "maximum: %g > %g", d, json_number_value(v));
            return fail(why, cap, at, msg);
        }
    }
    if (json_is_object(x)) {
        if ((v = json_object_get(s, "required"))) {
            size_t i;
            json_t *r;
            json_array_foreach(v, i, r) if (!json_object_get(x, json_string_value(r))) {
                snprintf(msg, sizeof msg, "required: property '%.100s' is missing", json_string_value(r));
                return fail(why, cap, at, msg);
            }
        }
        if ((v = json_object_get(s, "properties"))) {
            const char *k;
            json_t *ps;
            json_object_foreach(v, k, ps) {
                json_t *xv = json_object_get(x, k);
                if (!xv) continue;
                char sub[512];
                snprintf(sub, sizeof sub, "%.400s.%.100s", path[0] ? path : "$", k);
                if (!validate_rec(ps, xv, sub, why, cap)) return false;
            }
        }
    }
    if (json_is_array(x) && (v = json_object_get(s, "items"))) {
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) {
            char sub[512];
            snprintf(sub, sizeof sub, "%.480s[%zu]", path[0] ? path : "$", i);
            if (!validate_rec(v, e, sub, why, cap)) return false;
        }
    }
    return true;
}

bool nb_jsonschema_validate(const void *schema, const void *instance, char *why, size_t cap) {
    if (cap) why[0] = '\0';
    return validate_rec(schema, instance, "", why, cap);
}
