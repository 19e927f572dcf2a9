/* OpenAI request parsing and validation; see openai.h. The accepted fields
 * and their ranges are listed in docs/serve.md ("Request parameters"). */
#include "server/openai.h"

#include "engine/grammar.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#define INVALID "invalid_request_error"

void nb_oai_error_set(nb_oai_error *e, int status, const char *type, const char *param, const char *code,
                      const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

char *nb_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    uint64_t cap;
    if (!nb_mul_ok(n, 3, &cap) || !nb_add_ok(cap, 1, &cap)) return NULL;
    char *o = malloc(cap);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        int k = nb_utf8_char((const uint8_t *)s + i, n - i);
        if (k > 0 && !(k == 1 && s[i] == '\0')) {
            memcpy(o + j, s + i, (size_t)k);
            j += (size_t)k;
            i += (size_t)k;
        } else {
            /* invalid, truncated or NUL: U+FFFD for one byte */
            memcpy(o + j, "\xEF\xBF\xBD", 3);
            j += 3;
            i += 1;
        }
    }
    o[j] = '\0';
    if (out_len) *out_len = j;
    return o;
}

bool nb_secret_equal(const char *given, const char *expected) {
    size_t ne = strlen(expected), ng = strlen(given);
    unsigned char diff = (unsigned char)(ng != ne);
    for (size_t i = 0; i < ne; i++) {
        unsigned char g = i < ng ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)expected[i]);
    }
    return diff == 0;
}

char *nb_oai_error_json(const nb_oai_error *e) {
    size_t ml;
    char *msg = nb_utf8_sanitize(e->message, strlen(e->message), &ml);
    if (!msg) return NULL;
    json_t *err = json_object();
    json_object_set_new(err, "message", json_stringn(msg, ml));
    json_object_set_new(err, "type", json_string(e->type ? e->type : INVALID));
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    free(msg);
    return s;
}

/* ---- field helpers ------------------------------------------------------ */

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static bool bad_type(nb_oai_error *e, const char *param, const json_t *v, const char *want) {
    nb_oai_error_set(e, 400, INVALID, param, "invalid_type", "'%s' must be %s, got %s", param, want, type_name(v));
    return false;
}

/* Number field in [lo, hi] (open ends when lo_open / hi_open). Absent or null: keep *out. */
static bool get_num(json_t *o, const char *key, double lo, bool lo_open, double hi, bool hi_open, float *out,
                    nb_oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return bad_type(e, key, v, "a number");
    double d = json_number_value(v);
    if (!isfinite(d) || (lo_open ? d <= lo : d < lo) || (hi_open ? d >= hi : d > hi)) {
        nb_oai_error_set(e, 400, INVALID, key, "invalid_value", "'%s' is %g, must be in %c%g, %g%c", key, d,
                         lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
        return false;
    }
    *out = (float)d;
    return true;
}

/* logit_bias: an object of token ids (decimal strings, as OpenAI's API
 * sends them) to numbers in [-100, 100]; null or {} = none. */
static bool get_logit_bias(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return true;
    if (!json_is_object(lb)) return bad_type(e, "logit_bias", lb, "an object of token ids to numbers");
    size_t n = json_object_size(lb);
    if (n == 0) return true;
    if (n > NB_LOGIT_BIAS_MAX) {
        nb_oai_error_set(e, 400, INVALID, "logit_bias", "invalid_value", "'logit_bias' has %zu entries, at most %d", n,
                         NB_LOGIT_BIAS_MAX);
        return false;
    }
    r->logit_bias_ids = malloc(n * sizeof *r->logit_bias_ids);
    r->logit_bias = malloc(n * sizeof *r->logit_bias);
    if (!r->logit_bias_ids || !r->logit_bias) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v) {
        char *end = NULL;
        errno = 0;
        long id = strtol(k, &end, 10);
        if (!*k || *end || errno || id < 0 || id > INT32_MAX) {
            nb_oai_error_set(e, 400, INVALID, "logit_bias", "invalid_value",
                             "'logit_bias' key '%.40s' is not a token id (a non-negative integer as a string)", k);
            return false;
        }
        if (!json_is_number(v)) {
            nb_oai_error_set(e, 400, INVALID, "logit_bias", "invalid_type", "'logit_bias' value for token %ld must be a number, got %s",
                             id, type_name(v));
            return false;
        }
        double b = json_number_value(v);
        if (!(b >= -NB_LOGIT_BIAS_LIMIT && b <= NB_LOGIT_BIAS_LIMIT)) {
            nb_oai_error_set(e, 400, INVALID, "logit_bias", "invalid_value",
                             "'logit_bias' value for token %ld is %g, must be in [-100, 100]", id, b);
            return false;
        }
        r->logit_bias_ids[r->n_logit_bias] = (int32_t)id;
        r->logit_bias[r->n_logit_bias++] = (float)b;
    }
    return true;
}

/* An array of at most `max` token ids (integers in 0..INT32_MAX) into a
 * malloc'd *ids (owned by the request); a bad element is named as
 * param[i]. The ids' range against the vocabulary: server/prompt.c. */
static bool token_ids(json_t *a, const char *param, size_t max, int32_t **ids, size_t *n_ids, nb_oai_error *e) {
    size_t n = json_array_size(a);
    if (n > max) {
        nb_oai_error_set(e, 400, INVALID, param, "invalid_value", "'%s' has %zu tokens, at most %zu allowed", param, n,
                         max);
        return false;
    }
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
            char p[96];
            snprintf(p, sizeof p, "%s[%zu]", param, i);
            nb_oai_error_set(e, 400, INVALID, p, "invalid_value", "'%s' must be a token id (an integer >= 0)", p);
            return false;
        }
        (*ids)[i] = (int32_t)json_integer_value(x);
    }
    *n_ids = n;
    return true;
}

/* stop_token_ids (vLLM): at most 1024 token ids; null or [] = none. */
static bool get_stop_token_ids(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    json_t *a = json_object_get(o, "stop_token_ids");
    if (!a || json_is_null(a)) return true;
    if (!json_is_array(a)) return bad_type(e, "stop_token_ids", a, "an array of token ids");
    return token_ids(a, "stop_token_ids", 1024, &r->stop_token_ids, &r->n_stop_token_ids, e);
}

static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *present, nb_oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (present) *present = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) return bad_type(e, key, v, "an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        nb_oai_error_set(e, 400, INVALID, key, "invalid_value", "'%s' is %lld, must be in [%lld, %lld]", key,
                         (long long)x, (long long)lo, (long long)hi);
        return false;
    }
    *out = x;
    if (present) *present = true;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, nb_oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad_type(e, key, v, "a boolean");
    *out = json_is_true(v);
    return true;
}

static bool get_str(json_t *o, const char *key, const char **out, nb_oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v)) return bad_type(e, key, v, "a string");
    *out = json_string_value(v);
    return true;
}

/* Fields accepted but only with a neutral value: true if v is null, false,
 * "", 0-length array/object (or, for best_of, 1). */
static bool neutral(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return true;
    if (json_is_string(v)) return json_string_length(v) == 0;
    if (json_is_array(v)) return json_array_size(v) == 0;
    if (json_is_object(v)) return json_object_size(v) == 0;
    return false;
}

static const char *const COMMON_KEYS[] = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "stop", "n", "stream", "stream_options", "logprobs", "ignore_eos", "min_tokens",
    "user", "logit_bias", "best_of", "stop_token_ids", "metadata", "store", "service_tier", "response_format",
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", NULL};
static const char *const COMPLETION_KEYS[] = {"prompt", "echo", "suffix", NULL};
static const char *const CHAT_KEYS[] = {"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice",
                                        "parallel_tool_calls", "functions", "function_call", "chat_template_kwargs",
                                        NULL};

static bool in_list(const char *k, const char *const *l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return true;
    return false;
}

static bool check_keys(json_t *o, nb_oai_kind kind, nb_oai_error *e) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (in_list(k, COMMON_KEYS) || in_list(k, kind == NB_OAI_CHAT ? CHAT_KEYS : COMPLETION_KEYS)) continue;
        nb_oai_error_set(e, 400, INVALID, k, "unknown_parameter", "Unrecognized request argument supplied: %s", k);
        return false;
    }
    static const char *const must_be_neutral[] = {"suffix", "functions", "function_call", NULL};
    for (const char *const *n = must_be_neutral; *n; n++) {
        v = json_object_get(o, *n);
        if (!neutral(v)) {
            nb_oai_error_set(e, 400, INVALID, *n, "unsupported_parameter",
                             "'%s' is not supported by this server (only its default value: null/false/empty)", *n);
            return false;
        }
    }
    /* chat_template_kwargs go into the chat template's context; tools: server/toolcall.c */
    v = json_object_get(o, "chat_template_kwargs");
    if (v && !json_is_null(v) && !json_is_object(v)) return bad_type(e, "chat_template_kwargs", v, "an object");
    v = json_object_get(o, "best_of");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return bad_type(e, "best_of", v, "an integer");
        if (json_integer_value(v) != 1) {
            nb_oai_error_set(e, 400, INVALID, "best_of", "unsupported_parameter",
                             "'best_of' is %lld; only best_of = 1 is supported", (long long)json_integer_value(v));
            return false;
        }
    }
    return true;
}

/* ---- output constraints (engine/grammar.h) --------------------------------- */

static bool grammar_error(nb_oai_error *e, const char *param, nb_status st) {
    nb_oai_error_set(e, 400, INVALID, param, st == NB_ERR_UNSUPPORTED ? "unsupported_schema" : "invalid_value", "%s: %s",
                     param, nb_errmsg());
    return false;
}

/* response_format {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}},
 * or vLLM's guided_json (a schema object or its text), guided_regex, guided_choice; at most one. */
static bool parse_constraint(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    const char *given = NULL;
    json_t *rf = json_object_get(o, "response_format");
    static const char *const guided[] = {"guided_json", "guided_regex", "guided_choice", "guided_grammar"};
    if (rf && !json_is_null(rf)) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!t || !json_is_string(t)) return bad_type(e, "response_format.type", t ? t : rf, "\"text\", \"json_object\" or \"json_schema\"");
        if (strcmp(json_string_value(t), "text") != 0) given = "response_format";
    }
    for (size_t i = 0; i < sizeof guided / sizeof guided[0]; i++) {
        json_t *g = json_object_get(o, guided[i]);
        if (!g || json_is_null(g)) continue;
        if (given) {
            nb_oai_error_set(e, 400, INVALID, guided[i], "invalid_value",
                             "'%s' and '%s' both constrain the output: give one", given, guided[i]);
            return false;
        }
        given = guided[i];
    }
    if (!given) return true;
    nb_status st;
    if (!strcmp(given, "response_format")) {
        const char *type = json_string_value(json_object_get(rf, "type"));
        if (!strcmp(type, "json_object")) {
            st = nb_grammar_json_object(&r->grammar);
            return st == NB_OK || grammar_error(e, "response_format", st);
        }
        if (strcmp(type, "json_schema") != 0) {
            nb_oai_error_set(e, 400, INVALID, "response_format.type", "invalid_value",
                             "response_format.type '%s': allowed \"text\", \"json_object\", \"json_schema\"", type);
            return false;
        }
        json_t *js = json_object_get(rf, "json_schema");
        json_t *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!schema || !json_is_object(schema))
            return bad_type(e, "response_format.json_schema.schema", schema ? schema : js ? js : rf, "a JSON Schema object");
        char *text = json_dumps(schema, JSON_COMPACT);
        if (!text) return bad_type(e, "response_format.json_schema.schema", schema, "a JSON Schema object");
        st = nb_grammar_json_schema(text, strlen(text), &r->grammar);
        free(text);
        return st == NB_OK || grammar_error(e, "response_format.json_schema.schema", st);
    }
    json_t *g = json_object_get(o, given);
    if (!strcmp(given, "guided_json")) {
        if (json_is_string(g)) st = nb_grammar_json_schema(json_string_value(g), json_string_length(g), &r->grammar);
        else if (json_is_object(g)) {
            char *text = json_dumps(g, JSON_COMPACT);
            st = text ? nb_grammar_json_schema(text, strlen(text), &r->grammar) : NB_ERR_NOMEM;
            free(text);
        } else
            return bad_type(e, "guided_json", g, "a JSON Schema (object or string)");
        return st == NB_OK || grammar_error(e, "guided_json", st);
    }
    if (!strcmp(given, "guided_regex")) {
        if (!json_is_string(g)) return bad_type(e, "guided_regex", g, "a string");
        st = nb_grammar_regex(json_string_value(g), &r->grammar);
        return st == NB_OK || grammar_error(e, "guided_regex", st);
    }
    if (!strcmp(given, "guided_choice")) {
        if (!json_is_array(g) || json_array_size(g) == 0 || json_array_size(g) > NB_LIMIT_GUIDED_CHOICES)
            return bad_type(e, "guided_choice", g, "a list of 1.." NB_LIMIT_STR(NB_LIMIT_GUIDED_CHOICES) " strings");
        const char *c[NB_LIMIT_GUIDED_CHOICES];
        size_t i;
        json_t *x;
        json_array_foreach(g, i, x) {
            if (!json_is_string(x)) return bad_type(e, "guided_choice", x, "a list of strings");
            c[i] = json_string_value(x);
        }
        st = nb_grammar_choice(c, json_array_size(g), &r->grammar);
        return st == NB_OK || grammar_error(e, "guided_choice", st);
    }
    nb_oai_error_set(e, 400, INVALID, given, "unsupported_parameter",
                     "'%s' is not supported (use response_format json_schema, guided_json, guided_regex or "
                     "guided_choice)", given);
    return false;
}

/* ---- prompt / messages -------------------------------------------------- */

static bool parse_ids(json_t *a, const char *param, nb_oai_request *r, nb_oai_error *e) {
    if (json_array_size(a) == 0) {
        nb_oai_error_set(e, 400, INVALID, param, "invalid_value", "'%s' is an empty token list", param);
        return false;
    }
    return token_ids(a, param, NB_LIMIT_PROMPT_IDS, &r->prompt_ids, &r->n_prompt_ids, e);
}

static bool parse_prompt(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    json_t *p = json_object_get(o, "prompt");
    if (!p || json_is_null(p)) {
        nb_oai_error_set(e, 400, INVALID, "prompt", "missing_required_parameter", "'prompt' is required");
        return false;
    }
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        return true;
    }
    if (!json_is_array(p)) return bad_type(e, "prompt", p, "a string, an array of token ids, or a one-element array");
    size_t n = json_array_size(p);
    if (n >= 1 && json_is_integer(json_array_get(p, 0))) return parse_ids(p, "prompt", r, e);
    if (n != 1) {
        nb_oai_error_set(e, 400, INVALID, "prompt", "unsupported_parameter",
                         "'prompt' has %zu prompts; this server takes one prompt per request", n);
        return false;
    }
    json_t *x = json_array_get(p, 0);
    if (json_is_string(x)) {
        r->prompt = json_string_value(x);
        return true;
    }
    if (json_is_array(x)) return parse_ids(x, "prompt[0]", r, e);
    return bad_type(e, "prompt[0]", x, "a string or an array of token ids");
}

static char *own(nb_oai_request *r, char *s) {
    char **o = realloc(r->owned, (r->n_owned + 1) * sizeof *o);
    if (!o) { free(s); return NULL; }
    r->owned = o;
    r->owned[r->n_owned++] = s;
    return s;
}

static bool parse_content(json_t *c, size_t i, nb_chat_role role, nb_oai_request *r, nb_oai_error *e) {
    char param[96];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        if (role == NB_ROLE_ASSISTANT) { r->msgs[i].content = ""; return true; }
        nb_oai_error_set(e, 400, INVALID, param, "missing_required_parameter", "'%s' is required", param);
        return false;
    }
    if (json_is_string(c)) {
        r->msgs[i].content = json_string_value(c);
        return true;
    }
    if (!json_is_array(c)) return bad_type(e, param, c, "a string or an array of text parts");
    size_t total = 0, n = json_array_size(c);
    for (size_t k = 0; k < n; k++) {
        json_t *part = json_array_get(c, k), *t, *x;
        char pp[128];
        snprintf(pp, sizeof pp, "%s[%zu]", param, k);
        if (!json_is_object(part)) return bad_type(e, pp, part, "an object {\"type\": \"text\", \"text\": ...}");
        t = json_object_get(part, "type");
        if (!t || !json_is_string(t) || strcmp(json_string_value(t), "text") != 0) {
            nb_oai_error_set(e, 400, INVALID, pp, "unsupported_content_type",
                             "'%s.type' must be \"text\" (this model takes text only)", pp);
            return false;
        }
        x = json_object_get(part, "text");
        if (!x || !json_is_string(x)) {
            char pt[160];
            snprintf(pt, sizeof pt, "%s.text", pp);
            return x ? bad_type(e, pt, x, "a string")
                     : (nb_oai_error_set(e, 400, INVALID, pt, "missing_required_parameter", "'%s' is required", pt),
                        false);
        }
        total += json_string_length(x);
    }
    char *s = malloc(total + 1);
    if (!s || !own(r, s)) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        json_t *x = json_object_get(json_array_get(c, k), "text");
        size_t l = json_string_length(x);
        memcpy(s + off, json_string_value(x), l);
        off += l;
    }
    s[off] = '\0';
    r->msgs[i].content = s;
    return true;
}

static bool parse_messages(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    json_t *m = json_object_get(o, "messages");
    if (!m || json_is_null(m)) {
        nb_oai_error_set(e, 400, INVALID, "messages", "missing_required_parameter", "'messages' is required");
        return false;
    }
    if (!json_is_array(m)) return bad_type(e, "messages", m, "an array");
    size_t n = json_array_size(m);
    if (n == 0 || n > NB_LIMIT_MESSAGES) {
        nb_oai_error_set(e, 400, INVALID, "messages", "invalid_value", "'messages' has %zu entries, allowed 1..%d", n,
                         NB_LIMIT_MESSAGES);
        return false;
    }
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) {
        nb_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    r->n_msgs = n;
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        char param[96];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return bad_type(e, param, msg, "an object");
        const char *k;
        json_t *v;
        json_object_foreach(msg, k, v) {
            if (!strcmp(k, "role") || !strcmp(k, "content") || !strcmp(k, "name") || !strcmp(k, "tool_call_id") ||
                (!strcmp(k, "tool_calls") && json_is_array(v)))
                continue;
            if (!strcmp(k, "tool_calls") || !strcmp(k, "refusal") || !strcmp(k, "function_call")) {
                if (neutral(v)) continue;
            }
            char pk[160];
            snprintf(pk, sizeof pk, "%s.%s", param, k);
            nb_oai_error_set(e, 400, INVALID, pk, "unknown_parameter", "Unrecognized message field supplied: %s", pk);
            return false;
        }
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) {
            nb_oai_error_set(e, 400, INVALID, param, "missing_required_parameter", "'%s' is required", param);
            return false;
        }
        if (!json_is_string(role)) return bad_type(e, param, role, "a string");
        if (!nb_chat_role_parse(json_string_value(role), &r->msgs[i].role)) {
            nb_oai_error_set(e, 400, INVALID, param, "invalid_value",
                             "'%s' is '%.64s'; allowed: system, developer, user, assistant, tool", param,
                             json_string_value(role));
            return false;
        }
        json_t *name = json_object_get(msg, "name");
        if (name && !json_is_null(name) && !json_is_string(name)) {
            snprintf(param, sizeof param, "messages[%zu].name", i);
            return bad_type(e, param, name, "a string");
        }
        if (!parse_content(json_object_get(msg, "content"), i, r->msgs[i].role, r, e)) return false;
    }
    return true;
}

static bool parse_stop(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    json_t *s = json_object_get(o, "stop");
    if (!s || json_is_null(s)) return true;
    json_t *one[1] = {s};
    size_t n = 1;
    if (json_is_array(s)) n = json_array_size(s);
    else if (!json_is_string(s)) return bad_type(e, "stop", s, "a string or an array of strings");
    if (n > NB_LIMIT_STOP_STRINGS) {
        nb_oai_error_set(e, 400, INVALID, "stop", "invalid_value", "'stop' has %zu strings, at most %d allowed", n,
                         NB_LIMIT_STOP_STRINGS);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(s) ? json_array_get(s, i) : one[0];
        char p[32];
        snprintf(p, sizeof p, json_is_array(s) ? "stop[%zu]" : "stop", i);
        if (!json_is_string(x)) return bad_type(e, p, x, "a string");
        size_t l = json_string_length(x);
        if (l == 0 || l > NB_LIMIT_STOP_LEN) {
            nb_oai_error_set(e, 400, INVALID, p, "invalid_value", "'%s' is %zu bytes long, allowed 1..%d", p, l,
                             NB_LIMIT_STOP_LEN);
            return false;
        }
        if (strlen(json_string_value(x)) != l) {
            nb_oai_error_set(e, 400, INVALID, p, "invalid_value", "'%s' contains a NUL character", p);
            return false;
        }
        r->stop[r->n_stop++] = json_string_value(x);
    }
    return true;
}

static bool parse_fields(json_t *o, nb_oai_request *r, nb_oai_error *e) {
    if (!check_keys(o, r->kind, e)) return false;
    if (r->kind == NB_OAI_CHAT && !nb_tool_request_parse(o, &r->tools, e)) return false;
    if (!get_str(o, "model", &r->model, e)) return false;
    if (!get_str(o, "user", &r->user, e)) return false;
    if (r->kind == NB_OAI_CHAT ? !parse_messages(o, r, e) : !parse_prompt(o, r, e)) return false;

    int64_t v;
    bool has;
    /* completions: max_tokens 0 with echo scores the prompt only (prompt logprobs) */
    if (!get_int(o, "max_tokens", r->kind == NB_OAI_COMPLETIONS ? 0 : 1, NB_LIMIT_MAX_TOKENS, &v, &has, e))
        return false;
    if (has) r->max_tokens = (int32_t)v;
    if (r->kind == NB_OAI_COMPLETIONS) {
        if (!get_bool(o, "echo", &r->echo, e)) return false;
        if (has && v == 0 && !r->echo) {
            nb_oai_error_set(e, 400, INVALID, "max_tokens", "invalid_value",
                             "'max_tokens' is 0, must be in [1, %d] (0 only with echo: true)", NB_LIMIT_MAX_TOKENS);
            return false;
        }
    }
    if (r->kind == NB_OAI_CHAT) {
        if (!get_int(o, "max_completion_tokens", 1, NB_LIMIT_MAX_TOKENS, &v, &has, e)) return false;
        if (has) r->max_tokens = (int32_t)v; /* wins over the deprecated max_tokens, as in OpenAI's API */
    }
    if (!get_int(o, "min_tokens", 0, NB_LIMIT_MAX_TOKENS, &v, &has, e)) return false;
    if (has) r->min_tokens = (int32_t)v;
    if (r->max_tokens > 0 && r->min_tokens > r->max_tokens) {
        nb_oai_error_set(e, 400, INVALID, "min_tokens", "invalid_value",
                         "'min_tokens' (%d) must be at most max_tokens (%d)", r->min_tokens, r->max_tokens);
        return false;
    }
    if (!get_logit_bias(o, r, e)) return false;
    if (!get_stop_token_ids(o, r, e)) return false;
    if (!get_int(o, "n", 1, NB_LIMIT_N, &v, &has, e)) return false;
    if (has && v > 1) {
        nb_oai_error_set(e, 400, INVALID, "n", "unsupported_parameter",
                         "'n' is %lld; only n = 1 is supported (send separate requests)", (long long)v);
        return false;
    }

    nb_sampling *s = &r->sampling;
    if (!get_num(o, "temperature", 0, false, NB_SAMPLING_TEMPERATURE_MAX, false, &s->temperature, e)) return false;
    if (!get_num(o, "top_p", 0, true, 1, false, &s->top_p, e)) return false;
    if (!get_num(o, "min_p", 0, false, 1, false, &s->min_p, e)) return false;
    if (!get_num(o, "presence_penalty", -2, false, 2, false, &s->presence_penalty, e)) return false;
    if (!get_num(o, "frequency_penalty", -2, false, 2, false, &s->frequency_penalty, e)) return false;
    if (!get_num(o, "repetition_penalty", 0, true, 2, false, &s->repetition_penalty, e)) return false;
    if (!get_int(o, "top_k", -1, INT32_MAX, &v, &has, e)) return false;
    if (has) s->top_k = v < 0 ? 0 : (int32_t)v;
    json_t *seed = json_object_get(o, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed)) return bad_type(e, "seed", seed, "an integer");
        s->seed = (uint64_t)json_integer_value(seed);
        s->has_seed = true;
    }
    if (!parse_stop(o, r, e)) return false;
    if (!get_bool(o, "stream", &r->stream, e)) return false;
    if (!get_bool(o, "ignore_eos", &r->ignore_eos, e)) return false;
    if (r->echo && r->stream) {
        nb_oai_error_set(e, 400, INVALID, "echo", "unsupported_parameter",
                         "'echo' is not supported with 'stream': true on this server");
        return false;
    }
    if (!parse_constraint(o, r, e)) return false;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad_type(e, "stream_options", so, "an object");
        if (!r->stream) {
            nb_oai_error_set(e, 400, INVALID, "stream_options", "invalid_value",
                             "'stream_options' is only allowed when 'stream' is true");
            return false;
        }
        const char *k;
        json_t *x;
        json_object_foreach(so, k, x) {
            if (!strcmp(k, "include_usage") || !strcmp(k, "continuous_usage_stats")) continue;
            nb_oai_error_set(e, 400, INVALID, "stream_options", "unknown_parameter",
                             "Unrecognized stream_options field supplied: %s", k);
            return false;
        }
        x = json_object_get(so, "include_usage");
        if (x && !json_is_null(x)) {
            if (!json_is_boolean(x)) return bad_type(e, "stream_options.include_usage", x, "a boolean");
            r->include_usage = json_is_true(x);
        }
    }

    /* logprobs: completions take an integer 0..5 (top alternatives);
     * chat takes a boolean plus top_logprobs 0..20. */
    json_t *lp = json_object_get(o, "logprobs");
    if (r->kind == NB_OAI_COMPLETIONS) {
        if (!get_int(o, "logprobs", 0, NB_LIMIT_LOGPROBS_COMPLETIONS, &v, &has, e)) return false;
        if (has) r->logprobs = (int32_t)v;
    } else {
        bool want = false;
        if (lp && !json_is_null(lp) && !json_is_boolean(lp)) return bad_type(e, "logprobs", lp, "a boolean");
        want = lp && json_is_true(lp);
        if (!get_int(o, "top_logprobs", 0, NB_LIMIT_TOP_LOGPROBS, &v, &has, e)) return false;
        if (has && !want) {
            nb_oai_error_set(e, 400, INVALID, "top_logprobs", "invalid_value",
                             "'top_logprobs' requires 'logprobs' to be true");
            return false;
        }
        if (want) r->logprobs = has ? (int32_t)v : 0;
    }
    if (nb_sampling_validate(s) != NB_OK) {
        nb_oai_error_set(e, 400, INVALID, NULL, "invalid_value", "%s", nb_errmsg());
        return false;
    }
    return true;
}

bool nb_oai_parse(nb_oai_kind kind, const char *body, size_t len, nb_oai_request *r, nb_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->logprobs = -1;
    nb_sampling_defaults(&r->sampling);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        nb_oai_error_set(e, 400, INVALID, NULL, "invalid_json",
                         "The request body is not valid JSON: %s (line %d, column %d, byte offset %d)", je.text,
                         je.line, je.column, je.position);
        return false;
    }
    r->root = root;
    if (!json_is_object(root)) {
        nb_oai_error_set(e, 400, INVALID, NULL, "invalid_json", "The request body must be a JSON object, got %s",
                         type_name(root));
        nb_oai_request_free(r);
        return false;
    }
    if (!parse_fields(root, r, e)) {
        nb_oai_request_free(r);
        return false;
    }
    return true;
}

void nb_oai_request_free(nb_oai_request *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->msgs);
    free(r->prompt_ids);
    free(r->logit_bias_ids);
    free(r->logit_bias);
    free(r->stop_token_ids);
    nb_grammar_free(r->grammar);
    if (r->root) json_decref((json_t *)r->root);
    nb_oai_kind k = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->max_tokens = -1;
    r->logprobs = -1;
}
