/* Golden sets: loading, judging, summary; see golden.h. */
#include "eval/golden.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/nameset.h"
#include "base/sha256.h"
#include "eval/jsonschema.h"

#define SET_FILE_MAX (256u << 20)

static const char *const CHECK_NAMES = "exact, contains, regex, number (+ tol), json_valid, json_schema, choice, all, any";

/* ---- loading ------------------------------------------------------------ */

typedef struct lctx {
    const char *path;
    int line;
} lctx;

static void free_check(nb_golden_check *c) {
    if (c->re) pcre2_code_free(c->re);
    free(c->options);
    for (size_t i = 0; i < c->n_sub; i++) free_check(&c->sub[i]);
    free(c->sub);
    memset(c, 0, sizeof *c);
}

static nb_status parse_check(const lctx *L, json_t *o, const char *where, int depth, bool top, nb_golden_check *c,
                             bool *json_involved) {
    memset(c, 0, sizeof *c);
    if (depth > NB_GOLDEN_MAX_DEPTH)
        return nb_fail(NB_ERR_FORMAT, "%s:%d: %s: checks nested deeper than %d", L->path, L->line, where,
                       NB_GOLDEN_MAX_DEPTH);
    if (!json_is_object(o))
        return nb_fail(NB_ERR_FORMAT, "%s:%d: %s must be an object with one of: %s", L->path, L->line, where,
                       CHECK_NAMES);
    size_t nkeys = json_object_size(o);
    json_t *v;
    if ((v = json_object_get(o, "number"))) {
        c->kind = NB_GCHK_NUMBER;
        json_t *t = json_object_get(o, "tol");
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.number must be a finite number", L->path, L->line, where);
        c->number = json_number_value(v);
        if (t && (!json_is_number(t) || json_number_value(t) < 0 || !isfinite(json_number_value(t))))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.tol must be a number >= 0", L->path, L->line, where);
        c->tol = t ? json_number_value(t) : 0;
        if (nkeys != (t ? 2u : 1u))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s: a number check takes only 'number' and 'tol'", L->path, L->line,
                           where);
        return NB_OK;
    }
    if (nkeys != 1)
        return nb_fail(NB_ERR_FORMAT, "%s:%d: %s must have exactly one key, one of: %s", L->path, L->line, where,
                       CHECK_NAMES);
    const char *k = json_object_iter_key(json_object_iter(o));
    v = json_object_iter_value(json_object_iter(o));
    if (!strcmp(k, "exact") || !strcmp(k, "contains") || !strcmp(k, "regex")) {
        c->kind = !strcmp(k, "exact") ? NB_GCHK_EXACT : !strcmp(k, "contains") ? NB_GCHK_CONTAINS : NB_GCHK_REGEX;
        if (!json_is_string(v))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.%s must be a string", L->path, L->line, where, k);
        c->str = json_string_value(v);
        c->str_len = json_string_length(v);
        if (c->kind == NB_GCHK_CONTAINS && c->str_len == 0)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.contains is empty (it would always pass)", L->path, L->line, where);
        if (c->kind == NB_GCHK_REGEX) {
            int err;
            PCRE2_SIZE off;
            c->re = pcre2_compile((PCRE2_SPTR)c->str, c->str_len, PCRE2_UTF, &err, &off, NULL);
            if (!c->re) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(err, msg, sizeof msg);
                return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.regex: %s at offset %zu", L->path, L->line, where,
                               (const char *)msg, (size_t)off);
            }
        }
        return NB_OK;
    }
    if (!strcmp(k, "json_valid")) {
        if (!json_is_true(v))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.json_valid must be true", L->path, L->line, where);
        c->kind = NB_GCHK_JSON_VALID;
        *json_involved = true;
        return NB_OK;
    }
    if (!strcmp(k, "json_schema")) {
        char why[512];
        if (!nb_jsonschema_check(v, why, sizeof why))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.json_schema: %s", L->path, L->line, where, why);
        c->kind = NB_GCHK_JSON_SCHEMA;
        c->schema = v;
        *json_involved = true;
        return NB_OK;
    }
    if (!strcmp(k, "choice")) {
        if (!top)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s: 'choice' scores options instead of generating, so it must be "
                           "the item's whole check (not inside all/any)", L->path, L->line, where);
        json_t *opts = json_is_object(v) ? json_object_get(v, "options") : NULL;
        json_t *ans = json_is_object(v) ? json_object_get(v, "answer") : NULL;
        if (!json_is_array(opts) || json_array_size(opts) < 2 || json_array_size(opts) > 64)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.choice.options must be an array of 2..64 strings", L->path,
                           L->line, where);
        if (json_object_size(v) != 2)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.choice takes exactly 'options' and 'answer'", L->path, L->line,
                           where);
        c->kind = NB_GCHK_CHOICE;
        c->n_options = json_array_size(opts);
        c->options = calloc(c->n_options, sizeof *c->options);
        if (!c->options) return nb_fail(NB_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < c->n_options; i++) {
            json_t *x = json_array_get(opts, i);
            if (!json_is_string(x) || json_string_length(x) == 0 || strlen(json_string_value(x)) != json_string_length(x))
                return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.choice.options[%zu] must be a non-empty string", L->path,
                               L->line, where, i);
            c->options[i] = json_string_value(x);
        }
        if (!json_is_integer(ans) || json_integer_value(ans) < 0 || json_integer_value(ans) >= (json_int_t)c->n_options)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.choice.answer must be an option index 0..%zu", L->path, L->line,
                           where, c->n_options - 1);
        c->answer = (int32_t)json_integer_value(ans);
        return NB_OK;
    }
    if (!strcmp(k, "all") || !strcmp(k, "any")) {
        c->kind = !strcmp(k, "all") ? NB_GCHK_ALL : NB_GCHK_ANY;
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: %s.%s must be an array of 1..64 checks", L->path, L->line, where, k);
        c->n_sub = json_array_size(v);
        c->sub = calloc(c->n_sub, sizeof *c->sub);
        if (!c->sub) return nb_fail(NB_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < c->n_sub; i++) {
            char w[256];
            snprintf(w, sizeof w, "%.200s.%s[%zu]", where, k, i);
            NB_TRY(parse_check(L, json_array_get(v, i), w, depth + 1, false, &c->sub[i], json_involved));
        }
        return NB_OK;
    }
    return nb_fail(NB_ERR_FORMAT, "%s:%d: %s: unknown check '%.60s' (allowed: %s)", L->path, L->line, where, k,
                   CHECK_NAMES);
}

static bool allowed_item_key(const char *k) {
    static const char *const keys[] = {"id", "bucket", "prompt", "messages", "max_tokens", "stop", "check", "meta",
                                       NULL};
    for (const char *const *p = keys; *p; p++)
        if (!strcmp(k, *p)) return true;
    return false;
}

static nb_status parse_item(const lctx *L, json_t *o, nb_golden_item *it) {
    memset(it, 0, sizeof *it);
    it->line = L->line;
    it->max_tokens = NB_GOLDEN_DEFAULT_MAX_TOKENS;
    if (!json_is_object(o)) return nb_fail(NB_ERR_FORMAT, "%s:%d: an item must be a JSON object", L->path, L->line);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) if (!allowed_item_key(k))
        return nb_fail(NB_ERR_FORMAT, "%s:%d: unknown field '%.60s' (allowed: id, bucket, prompt | messages, "
                       "max_tokens, stop, check, meta)", L->path, L->line, k);
    v = json_object_get(o, "id");
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256)
        return nb_fail(NB_ERR_FORMAT, "%s:%d: 'id' must be a string of 1..256 bytes", L->path, L->line);
    it->id = json_string_value(v);
    v = json_object_get(o, "bucket");
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 63)
        return nb_fail(NB_ERR_FORMAT, "%s:%d: 'bucket' must be a string of 1..63 bytes", L->path, L->line);
    it->bucket = json_string_value(v);
    json_t *p = json_object_get(o, "prompt"), *m = json_object_get(o, "messages");
    if ((p != NULL) == (m != NULL))
        return nb_fail(NB_ERR_FORMAT, "%s:%d: give exactly one of 'prompt' (a string) and 'messages' (a chat)", L->path,
                       L->line);
    if (p) {
        if (!json_is_string(p) || strlen(json_string_value(p)) != json_string_length(p))
            return nb_fail(NB_ERR_FORMAT, "%s:%d: 'prompt' must be a string without NUL characters", L->path, L->line);
        it->prompt = json_string_value(p);
    } else {
        if (!json_is_array(m) || json_array_size(m) == 0 || json_array_size(m) > 256)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: 'messages' must be an array of 1..256 messages", L->path, L->line);
        it->n_messages = json_array_size(m);
        it->messages = calloc(it->n_messages, sizeof *it->messages);
        if (!it->messages) return nb_fail(NB_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < it->n_messages; i++) {
            json_t *msg = json_array_get(m, i), *r = json_object_get(msg, "role"), *c = json_object_get(msg, "content");
            if (!json_is_object(msg) || !json_is_string(r) || !json_is_string(c) || json_object_size(msg) != 2)
                return nb_fail(NB_ERR_FORMAT, "%s:%d: messages[%zu] must be {\"role\": str, \"content\": str}", L->path,
                               L->line, i);
            const char *role = json_string_value(r);
            if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && strcmp(role, "assistant"))
                return nb_fail(NB_ERR_FORMAT, "%s:%d: messages[%zu].role is '%.40s' (allowed: system, developer, "
                               "user, assistant)", L->path, L->line, i, role);
            it->messages[i].role = role;
            it->messages[i].content = json_string_value(c);
        }
    }
    v = json_object_get(o, "max_tokens");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: 'max_tokens' must be an integer in 1..65536", L->path, L->line);
        it->max_tokens = (int32_t)json_integer_value(v);
    }
    v = json_object_get(o, "stop");
    if (v) {
        json_t *one = v;
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (n == 0 || n > NB_GOLDEN_MAX_STOP)
            return nb_fail(NB_ERR_FORMAT, "%s:%d: 'stop' must be a string or 1..%d strings", L->path, L->line,
                           NB_GOLDEN_MAX_STOP);
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_is_array(v) ? json_array_get(v, i) : one;
            if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 256 ||
                strlen(json_string_value(x)) != json_string_length(x))
                return nb_fail(NB_ERR_FORMAT, "%s:%d: 'stop' entries must be strings of 1..256 bytes", L->path,
                               L->line);
            it->stop[it->n_stop++] = json_string_value(x);
        }
    }
    v = json_object_get(o, "check");
    if (!v) return nb_fail(NB_ERR_FORMAT, "%s:%d: 'check' is missing (one of: %s)", L->path, L->line, CHECK_NAMES);
    NB_TRY(parse_check(L, v, "check", 0, true, &it->check, &it->involves_json));
    if (it->check.kind == NB_GCHK_CHOICE && !it->prompt)
        return nb_fail(NB_ERR_FORMAT, "%s:%d: a choice item needs a 'prompt' (options are scored as its "
                       "continuation), not 'messages'", L->path, L->line);
    return NB_OK;
}

void nb_golden_set_free(nb_golden_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_items; i++) {
        free_check(&s->items[i].check);
        free(s->items[i].messages);
    }
    free(s->items);
    free(s->path);
    if (s->lines) json_decref(s->lines);
    memset(s, 0, sizeof *s);
}

static const char *item_id_at(const void *arr, int64_t i) { return ((const nb_golden_item *)arr)[i].id; }

nb_status nb_golden_set_parse(const char *text, size_t len, const char *path, nb_golden_set *out) {
    memset(out, 0, sizeof *out);
    out->path = nb_strdup(path);
    out->lines = json_array();
    if (!out->path || !out->lines) { nb_golden_set_free(out); return nb_fail(NB_ERR_NOMEM, "out of memory"); }
    uint8_t dg[32];
    nb_sha256(text, len, dg);
    for (int i = 0; i < 32; i++) snprintf(out->sha256 + 2 * i, 3, "%02x", dg[i]);
    /* The duplicate-id check: a hash set sized for one item per line, so a
     * set of n items costs O(n), not O(n^2). */
    size_t n_lines = 1;
    for (const char *p = text, *e = text + len; len && p < e && (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        n_lines++;
    if (n_lines >= UINT32_MAX - 1) {
        nb_golden_set_free(out);
        return nb_fail(NB_ERR_INVALID, "%s: %zu lines: at most %u are supported", path, n_lines, UINT32_MAX - 2);
    }
    size_t id_cap = nb_nameset_cap(n_lines);
    uint64_t *id_slot = calloc(id_cap, sizeof *id_slot);
    if (!id_slot) { nb_golden_set_free(out); return nb_fail(NB_ERR_NOMEM, "out of memory"); }
    nb_nameset ids;
    nb_nameset_attach(&ids, id_slot, id_cap);
    size_t cap = 0;
    int line = 0;
    nb_status st = NB_OK;
    for (size_t off = 0; off < len && st == NB_OK;) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len, l = end - off;
        const char *s = text + off;
        off = nl ? end + 1 : len;
        line++;
        size_t a = 0;
        while (a < l && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) a++;
        if (a == l) continue;
        json_error_t je;
        json_t *o = json_loadb(s, l, JSON_REJECT_DUPLICATES, &je);
        if (!o) {
            st = nb_fail(NB_ERR_FORMAT, "%s:%d: malformed JSON: %s (column %d)", path, line, je.text, je.column);
            break;
        }
        json_array_append_new(out->lines, o);
        if (out->n_items == cap) {
            size_t nc = cap ? cap * 2 : 64;
            nb_golden_item *ni = realloc(out->items, nc * sizeof *ni);
            if (!ni) { st = nb_fail(NB_ERR_NOMEM, "out of memory"); break; }
            out->items = ni;
            cap = nc;
        }
        lctx L = {path, line};
        st = parse_item(&L, o, &out->items[out->n_items]);
        out->n_items++; /* freed either way */
        if (st != NB_OK) break;
        int64_t j = nb_nameset_probe(&ids, out->items[out->n_items - 1].id, item_id_at, out->items,
                                     (int64_t)out->n_items - 1);
        if (j >= 0)
            st = nb_fail(NB_ERR_FORMAT, "%s:%d: duplicate id '%.100s' (first on line %d)", path, line,
                         out->items[j].id, out->items[j].line);
    }
    free(id_slot);
    if (st == NB_OK && out->n_items == 0)
        st = nb_fail(NB_ERR_INVALID, "%s: the golden set has no items (one JSON object per line expected)", path);
    if (st != NB_OK) nb_golden_set_free(out);
    return st;
}

nb_status nb_golden_set_load(const char *path, nb_golden_set *out) {
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    nb_status st = nb_read_file(path, SET_FILE_MAX, &text, &len);
    if (st != NB_OK) return st;
    st = nb_golden_set_parse(text, len, path, out);
    free(text);
    return st;
}

/* ---- judging ------------------------------------------------------------ */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void trim(const char **s, size_t *n) {
    while (*n && is_ws(**s)) { (*s)++; (*n)--; }
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* A short, printable quote of text for reasons. */
static void quote(char *dst, size_t cap, const char *s, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') { dst[j++] = '\\'; dst[j++] = 'n'; }
        else if (c == '"') { dst[j++] = '\\'; dst[j++] = '"'; }
        else if (c < 0x20) dst[j++] = ' ';
        else dst[j++] = (char)c;
        if (i + 1 < n && j + 8 >= cap) { memcpy(dst + j, "...", 3); j += 3; }
    }
    dst[j] = '\0';
}

bool nb_golden_json_parses(const char *out, size_t len) {
    trim(&out, &len);
    if (len == 0) return false;
    json_error_t je;
    json_t *j = json_loadb(out, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!j) return false;
    json_decref(j);
    return true;
}

#define DIG(c) ((c) >= '0' && (c) <= '9')

bool nb_golden_first_number(const char *t, size_t n, double *out) {
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') continue;
        bool neg = i > 0 && t[i - 1] == '-';
        char buf[128];
        size_t j = 0, k = i;
        /* integer part: digits, commas only between groups of three digits */
        while (k < n && j < 100) {
            if (t[k] >= '0' && t[k] <= '9') buf[j++] = t[k++];
            else if (t[k] == ',' && k + 3 < n && DIG(t[k + 1]) && DIG(t[k + 2]) && DIG(t[k + 3]) &&
                     (k + 4 >= n || !DIG(t[k + 4])))
                k++;
            else break;
        }
        if (k + 1 < n && t[k] == '.' && t[k + 1] >= '0' && t[k + 1] <= '9') {
            buf[j++] = t[k++];
            while (k < n && t[k] >= '0' && t[k] <= '9' && j < 120) buf[j++] = t[k++];
        }
        buf[j] = '\0';
        double v = strtod(buf, NULL);
        *out = neg ? -v : v;
        return true;
    }
    return false;
}

static void judge(const nb_golden_check *c, const char *out, size_t len, nb_golden_verdict *v, int depth) {
    char q1[160], q2[160];
    const char *t = out;
    size_t tl = len;
    trim(&t, &tl);
    v->pass = false;
    switch (c->kind) {
    case NB_GCHK_EXACT:
        v->pass = tl == c->str_len && !memcmp(t, c->str, tl);
        quote(q1, sizeof q1, c->str, c->str_len);
        quote(q2, sizeof q2, t, tl);
        if (v->pass) snprintf(v->reason, sizeof v->reason, "exact: \"%s\"", q1);
        else snprintf(v->reason, sizeof v->reason, "exact: expected \"%s\", got \"%s\"", q1, q2);
        return;
    case NB_GCHK_CONTAINS:
        v->pass = c->str_len <= len && memmem(out, len, c->str, c->str_len) != NULL;
        quote(q1, sizeof q1, c->str, c->str_len);
        snprintf(v->reason, sizeof v->reason, "contains: \"%s\" %s", q1, v->pass ? "found" : "not found");
        return;
    case NB_GCHK_REGEX: {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(c->re, NULL);
        int rc = md ? pcre2_match(c->re, (PCRE2_SPTR)out, len, 0, 0, md, NULL) : -1;
        if (md) pcre2_match_data_free(md);
        v->pass = rc >= 0;
        quote(q1, sizeof q1, c->str, c->str_len);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            snprintf(v->reason, sizeof v->reason, "regex /%s/: match error %d (invalid UTF-8 output?)", q1, rc);
        else snprintf(v->reason, sizeof v->reason, "regex /%s/ %s", q1, v->pass ? "matched" : "did not match");
        return;
    }
    case NB_GCHK_NUMBER: {
        double x;
        if (!nb_golden_first_number(out, len, &x)) {
            snprintf(v->reason, sizeof v->reason, "number: expected %.10g, the output has no number", c->number);
            return;
        }
        double slack = c->tol + 1e-9 * fmax(1.0, fabs(c->number));
        v->pass = fabs(x - c->number) <= slack;
        snprintf(v->reason, sizeof v->reason, "number: got %.10g, expected %.10g +- %g", x, c->number, c->tol);
        return;
    }
    case NB_GCHK_JSON_VALID:
    case NB_GCHK_JSON_SCHEMA: {
        json_error_t je;
        json_t *j = tl ? json_loadb(t, tl, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je) : NULL;
        if (!j) {
            if (tl) snprintf(v->reason, sizeof v->reason, "json: not valid JSON: %s (column %d)", je.text, je.column);
            else snprintf(v->reason, sizeof v->reason, "json: the output is empty");
            return;
        }
        if (c->kind == NB_GCHK_JSON_VALID) {
            v->pass = true;
            snprintf(v->reason, sizeof v->reason, "json: valid");
        } else {
            char why[400];
            v->pass = nb_jsonschema_validate(c->schema, j, why, sizeof why);
            if (v->pass) snprintf(v->reason, sizeof v->reason, "json_schema: valid");
            else snprintf(v->reason, sizeof v->reason, "json_schema: %s", why);
        }
        json_decref(j);
        return;
    }
    case NB_GCHK_ALL:
    case NB_GCHK_ANY: {
        bool all = c->kind == NB_GCHK_ALL;
        nb_golden_verdict sub, first = {0};
        bool have_first = false;
        for (size_t i = 0; i < c->n_sub; i++) {
            judge(&c->sub[i], out, len, &sub, depth + 1);
            if (sub.pass != all) { /* decides: a failure of all, a pass of any */
                v->pass = !all;
                snprintf(v->reason, sizeof v->reason, "%s[%zu] %.400s", all ? "all" : "any", i, sub.reason);
                return;
            }
            if (!have_first) { first = sub; have_first = true; }
        }
        v->pass = all;
        if (all) snprintf(v->reason, sizeof v->reason, "all %zu checks passed", c->n_sub);
        else snprintf(v->reason, sizeof v->reason, "any: none of %zu passed; [0] %.400s", c->n_sub, first.reason);
        return;
    }
    case NB_GCHK_CHOICE:
        snprintf(v->reason, sizeof v->reason, "choice: scored, not generated");
        return;
    }
}

void nb_golden_judge(const nb_golden_check *c, const char *out, size_t len, nb_golden_verdict *v) {
    memset(v, 0, sizeof *v);
    judge(c, out, len, v, 0);
}

void nb_golden_judge_choice(const nb_golden_check *c, const double *ll, nb_golden_verdict *v) {
    memset(v, 0, sizeof *v);
    size_t best = 0;
    for (size_t i = 1; i < c->n_options; i++)
        if (ll[i] > ll[best]) best = i;
    v->pass = (int32_t)best == c->answer;
    char q[96];
    quote(q, sizeof q, c->options[best], strlen(c->options[best]));
    snprintf(v->reason, sizeof v->reason, "choice: picked %zu \"%s\" (log-likelihood %.4f) vs answer %d (%.4f)", best,
             q, ll[best], c->answer, ll[c->answer]);
}

/* ---- summary ------------------------------------------------------------ */

nb_status nb_golden_summary_add(nb_golden_summary *s, const nb_golden_item *it, const nb_golden_verdict *v) {
    size_t b = 0;
    while (b < s->n_buckets && strcmp(s->buckets[b].name, it->bucket) != 0) b++;
    if (b == s->n_buckets) {
        nb_golden_bucket_acc *nb = realloc(s->buckets, (s->n_buckets + 1) * sizeof *nb);
        if (!nb) return nb_fail(NB_ERR_NOMEM, "out of memory");
        s->buckets = nb;
        s->buckets[b] = (nb_golden_bucket_acc){it->bucket, 0, 0};
        s->n_buckets++;
    }
    s->n++;
    s->buckets[b].n++;
    if (v->pass) { s->n_pass++; s->buckets[b].n_pass++; }
    if (it->involves_json) {
        s->n_json++;
        if (v->json_ok) s->n_json_ok++;
    }
    return NB_OK;
}

void nb_golden_summary_free(nb_golden_summary *s) {
    free(s->buckets);
    memset(s, 0, sizeof *s);
}

void *nb_golden_summary_json(const nb_golden_summary *s) {
    json_t *o = json_object(), *ov = json_object(), *bs = json_object();
    json_object_set_new(ov, "pass_rate", json_real(s->n ? (double)s->n_pass / (double)s->n : 0));
    json_object_set_new(ov, "n", json_integer(s->n));
    json_object_set_new(ov, "n_pass", json_integer(s->n_pass));
    json_object_set_new(o, "overall", ov);
    for (size_t i = 0; i < s->n_buckets; i++) {
        json_t *b = json_object();
        const nb_golden_bucket_acc *a = &s->buckets[i];
        json_object_set_new(b, "pass_rate", json_real(a->n ? (double)a->n_pass / (double)a->n : 0));
        json_object_set_new(b, "n", json_integer(a->n));
        json_object_set_new(b, "n_pass", json_integer(a->n_pass));
        json_object_set_new(bs, a->name, b);
    }
    json_object_set_new(o, "buckets", bs);
    json_object_set_new(o, "json_valid_rate",
                        s->n_json ? json_real((double)s->n_json_ok / (double)s->n_json) : json_null());
    json_object_set_new(o, "n_json", json_integer(s->n_json));
    json_object_set_new(o, "n_json_valid", json_integer(s->n_json_ok));
    return o;
}
