/* Constrained decoding (grammar.h): a JSON Schema subset compiled to nodes,
 * matched by small explicit parse stacks fed byte by byte; regexes through
 * PCRE2's partial matching; a trie of the vocabulary for the per-step mask. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/grammar.h"

#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* ---- compiled schema ----------------------------------------------------------------- */

typedef enum {
    K_ANY,      /* any JSON value */
    K_OBJECT,
    K_ARRAY,
    K_STRING,
    K_NUMBER,
    K_INTEGER,
    K_LITERALS, /* enum / const / boolean / null / guided_choice: one of these byte strings */
    K_ANYOF,
    K_REF,      /* resolved to `ref` after compiling */
    K_SEQ,      /* items one after the other (alt[]); literal items are raw bytes (bit i of `required`), and
                 * item `switch_at` is chosen by which literal of item switch_at - 1 matched (sel[]) */
} kind;

#define MAX_PROPS 64
#define MAX_LITS 64
#define MAX_ALTS 8
#define NO_LIMIT INT32_MAX

typedef struct node {
    kind k;
    /* object */
    int32_t n_props;
    char **prop_name;
    size_t *prop_len;
    int32_t *prop_node;
    uint64_t required;
    int32_t additional; /* node index of additionalProperties, -1 = none allowed */
    /* array */
    int32_t items, min_items, max_items;
    /* string */
    int32_t min_len, max_len;
    pcre2_code *pattern;
    int32_t pattern_len; /* characters of the shortest match found (beam search at compile time) */
    const char *const *finish; /* a format's completion templates (formats[]), NULL-terminated */
    /* number */
    bool has_min, has_max, excl_min, excl_max;
    double min, max;
    /* literals */
    int32_t n_lits;
    char **lit;
    size_t *lit_len;
    /* anyOf */
    int32_t n_alts;
    int32_t alt[MAX_ALTS];
    /* sequence */
    int32_t switch_at;
    int32_t *sel;
    /* $ref */
    char *ref;
    int32_t target;
    size_t minlen; /* bytes of the shortest instance */
} node;

struct nb_grammar {
    enum { G_JSON, G_REGEX } mode;
    bool raw_root; /* guided_choice: the root literal, no whitespace around it */
    const char *kind;
    node *nodes;
    int32_t n_nodes, cap;
    int32_t root;
    int32_t any, any_object, any_array, any_string, any_number, lit_null, lit_bool; /* shared nodes for untyped values */
    pcre2_code *regex;
    json_t *defs_root; /* the schema, for $ref resolution while compiling */
};

static int32_t new_node(nb_grammar *g, kind k) {
    if (g->n_nodes == g->cap) {
        int32_t cap = g->cap ? 2 * g->cap : 32;
        node *n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) return -1;
        g->nodes = n;
        g->cap = cap;
    }
    node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->k = k;
    n->additional = -1;
    n->items = -1;
    n->max_items = NO_LIMIT;
    n->max_len = NO_LIMIT;
    n->target = -1;
    n->switch_at = -1;
    return g->n_nodes++;
}

static void free_node(node *n) {
    for (int32_t i = 0; i < n->n_props; i++) free(n->prop_name[i]);
    free(n->prop_name);
    free(n->prop_len);
    free(n->prop_node);
    for (int32_t i = 0; i < n->n_lits; i++) free(n->lit[i]);
    free(n->lit);
    free(n->lit_len);
    if (n->pattern) pcre2_code_free(n->pattern);
    free(n->ref);
    free(n->sel);
}

void nb_grammar_free(nb_grammar *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_nodes; i++) free_node(&g->nodes[i]);
    free(g->nodes);
    if (g->regex) pcre2_code_free(g->regex);
    free(g);
}

const char *nb_grammar_kind(const nb_grammar *g) { return g->kind; }

static nb_status add_literal(node *n, const char *s, size_t len) {
    if (n->n_lits >= MAX_LITS) return nb_fail(NB_ERR_UNSUPPORTED, "more than %d enum values / choices", MAX_LITS);
    char **l = realloc(n->lit, (size_t)(n->n_lits + 1) * sizeof *l);
    if (!l) return nb_fail(NB_ERR_NOMEM, "out of memory");
    n->lit = l;
    size_t *ll = realloc(n->lit_len, (size_t)(n->n_lits + 1) * sizeof *ll);
    if (!ll) return nb_fail(NB_ERR_NOMEM, "out of memory");
    n->lit_len = ll;
    char *c = malloc(len + 1);
    if (!c) return nb_fail(NB_ERR_NOMEM, "out of memory");
    memcpy(c, s, len);
    c[len] = 0;
    n->lit[n->n_lits] = c;
    n->lit_len[n->n_lits++] = len;
    return NB_OK;
}

/* guided_regex: the whole text must match. JSON Schema's `pattern` is not
 * implicitly anchored: it may match anywhere in the string (one anchored
 * with ^ is matched from the start, so prefixes can be checked; an
 * unanchored one can only be decided by the closing quote). */
static nb_status compile_pattern(const char *pat, bool schema, pcre2_code **out, const char *where) {
    size_t n = strlen(pat);
    char *w = malloc(n + 64);
    if (!w) return nb_fail(NB_ERR_NOMEM, "out of memory");
    snprintf(w, n + 64, !schema ? "(?:%s)\\z" : pat[0] == '^' ? "(?:%s)(?s:.*)\\z" : "(?s:.*?)(?:%s)(?s:.*)\\z", pat);
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile((PCRE2_SPTR)w, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &err, &off, NULL);
    free(w);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return nb_fail(NB_ERR_INVALID, "%s: pattern '%s' does not compile: %s", where, pat, (const char *)msg);
    }
    /* the mask checks hundreds of short subjects a step: JIT-compiled when PCRE2 can (whole and partial
     * matching); otherwise, or when a match needs more JIT stack, the interpreter (re_match) */
    (void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    return NB_OK;
}

static int32_t builtin_literals(nb_grammar *g, const char *const *lits, int n) {
    int32_t i = new_node(g, K_LITERALS);
    if (i < 0) return -1;
    for (int k = 0; k < n; k++)
        if (add_literal(&g->nodes[i], lits[k], strlen(lits[k])) != NB_OK) return -1;
    return i;
}

/* Characters of a short match of a compiled schema pattern, by a beam
 * search over printable ASCII (no quote or backslash) with PCRE2's partial
 * matching; -1 when none is found within PAT_SEARCH_DEPTH characters. The
 * budget rule uses it as the room a pattern string still needs. */
#define PAT_SEARCH_DEPTH 48
#define PAT_BEAM 16
static int re_run(pcre2_code *re, pcre2_match_data *md, const char *s, size_t v, uint32_t opts);
static int32_t shortest_match(pcre2_code *re) {
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    if (!md) return -1;
    char beam[PAT_BEAM][PAT_SEARCH_DEPTH + 1], next[PAT_BEAM][PAT_SEARCH_DEPTH + 1];
    int nb = 1, found = -1;
    beam[0][0] = 0;
    if (re_run(re, md, "", 0, 0) >= 0) found = 0;
    for (int d = 1; d <= PAT_SEARCH_DEPTH && found < 0 && nb > 0; d++) {
        int nn = 0;
        for (int i = 0; i < nb && found < 0; i++)
            for (int c = 0x20; c < 0x7f && found < 0; c++) {
                if (c == '"' || c == '\\') continue;
                char cand[PAT_SEARCH_DEPTH + 1];
                memcpy(cand, beam[i], (size_t)(d - 1));
                cand[d - 1] = (char)c;
                if (re_run(re, md, cand, (size_t)d, 0) >= 0) { /* ASCII: the UTF check re_run skips is moot */
                    found = d;
                    break;
                }
                int rc = re_run(re, md, cand, (size_t)d, PCRE2_PARTIAL_HARD);
                if (rc == PCRE2_ERROR_PARTIAL && nn < PAT_BEAM) memcpy(next[nn++], cand, (size_t)d);
            }
        memcpy(beam, next, sizeof next);
        nb = nn;
    }
    pcre2_match_data_free(md);
    return found;
}

/* Shared nodes for untyped values: {} schemas, additionalProperties: true, json_object. */
static nb_status make_any_nodes(nb_grammar *g) {
    static const char *const tf[] = {"true", "false"}, *const nul[] = {"null"};
    int32_t any = g->any = new_node(g, K_ANY);
    g->any_object = new_node(g, K_OBJECT);
    g->any_array = new_node(g, K_ARRAY);
    g->any_string = new_node(g, K_STRING);
    g->any_number = new_node(g, K_NUMBER);
    g->lit_bool = builtin_literals(g, tf, 2);
    g->lit_null = builtin_literals(g, nul, 1);
    if (any < 0 || g->any_object < 0 || g->any_array < 0 || g->any_string < 0 || g->any_number < 0 || g->lit_bool < 0 ||
        g->lit_null < 0)
        return nb_fail(NB_ERR_NOMEM, "out of memory compiling a grammar");
    g->nodes[g->any_object].additional = any;
    g->nodes[g->any_array].items = any;
    return NB_OK;
}

static int32_t any_node(const nb_grammar *g) { return g->any; }

/* JSON Schema's `format`, for the names OpenAI's structured outputs
 * accept, as regular expressions of a valid subset of each form (printable
 * ASCII, no character a JSON string must escape): what they let through
 * parses as the format (Python's datetime / uuid / ipaddress do), while
 * some valid spellings are not produced (a leap second, the IPv4 tail of
 * an IPv6 address, a lower-case 't', a quoted e-mail local part). */
#define FMT_DIG2 "(?:[0-9]{2})"
#define FMT_YEAR "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})" /* 0001-9999 */
#define FMT_LEAP "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
#define FMT_DATE "(?:" FMT_YEAR "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)" \
                 "|02-(?:0[1-9]|1[0-9]|2[0-8]))|" FMT_LEAP "-02-29)"
#define FMT_TIME "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"
#define FMT_LABEL "(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
#define FMT_HOST FMT_LABEL "(?:\\." FMT_LABEL ")*"
#define FMT_OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define FMT_H16 "[0-9A-Fa-f]{1,4}"
#define FMT_UCHAR "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
/* shortest: the characters of the shortest match; no viable prefix needs
 * more than that to finish either (so it is the room a string keeps in
 * reserve, see thread_remaining); max_len: the most characters allowed, 0
 * for no bound; finish: templates, one of whose suffixes finishes any
 * viable prefix (a prefix of a date plus the rest of "0001-01-01" or
 * "0001-01-10", an e-mail's plus a suffix of "a@a.aa"): the completion
 * search near the end of the budget tries them first, where a search byte
 * by byte would wander through the local part. */
#define FMT_FINISH(...) (const char *const[]){__VA_ARGS__, NULL}
static const struct { const char *name, *re; int32_t shortest, max_len; const char *const *finish; } formats[] = {
    {"date-time", FMT_DATE "T" FMT_TIME, 20, 0,
     FMT_FINISH("0001-01-01T00:00:00Z", "0001-01-10T00:00:00Z", "0001-01-01T00:00:00+00:00")},
    {"date", FMT_DATE, 10, 0, FMT_FINISH("0001-01-01", "0001-01-10")},
    {"time", FMT_TIME, 9, 0, FMT_FINISH("00:00:00Z", "00:00:00+00:00")},
    /* RFC 3339 appendix A: P(date [time] | time | weeks) */
    {"duration", "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
                 "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
                 "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)", 3, 0,
     FMT_FINISH("P0D", "P0M", "PT0H", "PT0M", "PT0S", "P0W")},
    {"email", "[A-Za-z0-9_%+-]+(?:\\.[A-Za-z0-9_%+-]+)*@(?:" FMT_LABEL "\\.)+[A-Za-z]{2,63}", 6, 254, FMT_FINISH("a@a.aa")},
    {"hostname", FMT_HOST, 1, 253, FMT_FINISH("a")},
    {"ipv4", "(?:" FMT_OCTET "\\.){3}" FMT_OCTET, 7, 0, FMT_FINISH("0.0.0.0")},
    {"ipv6", "(?:(?:" FMT_H16 ":){7}" FMT_H16 "|(?:" FMT_H16 ":){1,7}:|(?:" FMT_H16 ":){1,6}:" FMT_H16
             "|(?:" FMT_H16 ":){1,5}(?::" FMT_H16 "){1,2}|(?:" FMT_H16 ":){1,4}(?::" FMT_H16 "){1,3}"
             "|(?:" FMT_H16 ":){1,3}(?::" FMT_H16 "){1,4}|(?:" FMT_H16 ":){1,2}(?::" FMT_H16 "){1,5}"
             "|" FMT_H16 ":(?::" FMT_H16 "){1,6}|:(?:(?::" FMT_H16 "){1,7}|:))", 2, 0, FMT_FINISH("::", "0")},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", 36, 0,
     FMT_FINISH("00000000-0000-0000-0000-000000000000")},
    /* scheme://host[:port][/path][?query][#fragment]: the hierarchical form of RFC 3986 */
    {"uri", "[A-Za-z][A-Za-z0-9+.-]*://" FMT_HOST "(?::[0-9]{1,5})?(?:/" FMT_UCHAR "*)*(?:\\?(?:" FMT_UCHAR "|[/?])*)?"
            "(?:#(?:" FMT_UCHAR "|[/?])*)?", 5, 0, FMT_FINISH("a://a", "a://a:0", "a://a/%00")},
};
#define FORMAT_NAMES "date-time, date, time, duration, email, hostname, ipv4, ipv6, uuid, uri"

/* The regular expression (malloc'd into *text) that enforces a string
 * keyword, 'pattern' as given or 'format' as its whole-string form; for a
 * format its shortest match and the most characters it allows (else -1 and
 * 0); `where` gets the keyword's path. */
static nb_status string_regex(const char *key, json_t *kv, const char *path, char **text, int32_t *shortest,
                              int32_t *max_len, const char *const **finish, char *where, size_t wcap) {
    snprintf(where, wcap, "%s/%s", path, key);
    *shortest = -1;
    *max_len = 0;
    *finish = NULL;
    if (!json_is_string(kv)) return nb_fail(NB_ERR_INVALID, "%s: not a string", where);
    const char *v = json_string_value(kv);
    if (!strcmp(key, "pattern")) {
        *text = strdup(v);
    } else {
        size_t k = 0;
        while (k < sizeof formats / sizeof formats[0] && strcmp(formats[k].name, v)) k++;
        if (k == sizeof formats / sizeof formats[0])
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: format '%s' cannot be enforced by nibble's constrained decoding "
                           "(supported: " FORMAT_NAMES "; or give the shape as a 'pattern')", where, v);
        size_t n = strlen(formats[k].re) + 16;
        if ((*text = malloc(n))) snprintf(*text, n, "^(?:%s)\\z", formats[k].re);
        *shortest = formats[k].shortest;
        *finish = formats[k].finish;
        *max_len = formats[k].max_len;
    }
    return *text ? NB_OK : nb_fail(NB_ERR_NOMEM, "out of memory");
}

static nb_status compile(nb_grammar *g, json_t *s, const char *path, int depth, int32_t *out);

static nb_status compile_type(nb_grammar *g, json_t *s, const char *type, const char *path, int depth, int32_t *out) {
    static const char *const tf[] = {"true", "false"}, *const nul[] = {"null"};
    kind k;
    if (!strcmp(type, "object")) k = K_OBJECT;
    else if (!strcmp(type, "array")) k = K_ARRAY;
    else if (!strcmp(type, "string")) k = K_STRING;
    else if (!strcmp(type, "number")) k = K_NUMBER;
    else if (!strcmp(type, "integer")) k = K_INTEGER;
    else if (!strcmp(type, "boolean")) {
        *out = builtin_literals(g, tf, 2);
        return *out < 0 ? nb_fail(NB_ERR_NOMEM, "out of memory") : NB_OK;
    } else if (!strcmp(type, "null")) {
        *out = builtin_literals(g, nul, 1);
        return *out < 0 ? nb_fail(NB_ERR_NOMEM, "out of memory") : NB_OK;
    } else
        return nb_fail(NB_ERR_UNSUPPORTED, "%s/type: '%s' is not a JSON Schema type", path, type);
    int32_t i = new_node(g, k);
    if (i < 0) return nb_fail(NB_ERR_NOMEM, "out of memory");
    char sub[512];
    json_t *v;
    if (k == K_OBJECT) {
        json_t *props = json_object_get(s, "properties");
        if (props && !json_is_object(props)) return nb_fail(NB_ERR_INVALID, "%s/properties: not an object", path);
        size_t np = props ? json_object_size(props) : 0;
        if (np > MAX_PROPS) return nb_fail(NB_ERR_UNSUPPORTED, "%s/properties: %zu properties, at most %d", path, np, MAX_PROPS);
        node *n = &g->nodes[i];
        n->prop_name = calloc(np + 1, sizeof *n->prop_name);
        n->prop_len = calloc(np + 1, sizeof *n->prop_len);
        n->prop_node = calloc(np + 1, sizeof *n->prop_node);
        if (!n->prop_name || !n->prop_len || !n->prop_node) return nb_fail(NB_ERR_NOMEM, "out of memory");
        const char *key;
        json_t *ps;
        json_object_foreach(props, key, ps) {
            for (const char *c = key; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == '"' || *c == '\\')
                    return nb_fail(NB_ERR_UNSUPPORTED, "%s/properties: the name '%s' needs escaping in JSON", path, key);
            snprintf(sub, sizeof sub, "%s/properties/%s", path, key);
            int32_t c;
            NB_TRY(compile(g, ps, sub, depth + 1, &c));
            n = &g->nodes[i]; /* compile may move the array */
            int32_t p = n->n_props++;
            n->prop_name[p] = strdup(key);
            if (!n->prop_name[p]) return nb_fail(NB_ERR_NOMEM, "out of memory");
            n->prop_len[p] = strlen(key);
            n->prop_node[p] = c;
        }
        json_t *req = json_object_get(s, "required");
        if (req) {
            if (!json_is_array(req)) return nb_fail(NB_ERR_INVALID, "%s/required: not an array", path);
            size_t ri;
            json_array_foreach(req, ri, v) {
                const char *name = json_string_value(v);
                int32_t p = -1;
                for (int32_t k2 = 0; name && k2 < g->nodes[i].n_props; k2++)
                    if (!strcmp(g->nodes[i].prop_name[k2], name)) p = k2;
                if (p < 0)
                    return nb_fail(NB_ERR_UNSUPPORTED, "%s/required: '%s' is not among the properties (nibble enforces "
                                   "required names it knows the schema of)", path, name ? name : "(not a string)");
                g->nodes[i].required |= 1ull << p;
            }
        }
        json_t *ap = json_object_get(s, "additionalProperties");
        if (ap && json_is_true(ap)) g->nodes[i].additional = any_node(g);
        else if (ap && json_is_object(ap)) {
            snprintf(sub, sizeof sub, "%s/additionalProperties", path);
            int32_t c;
            NB_TRY(compile(g, ap, sub, depth + 1, &c));
            g->nodes[i].additional = c;
        } else if (!ap && !props) {
            g->nodes[i].additional = any_node(g); /* {"type": "object"}: any object */
        }
        /* absent additionalProperties with properties: only the named ones are produced (a valid subset) */
    } else if (k == K_ARRAY) {
        json_t *it = json_object_get(s, "items");
        if (it && json_is_object(it)) {
            snprintf(sub, sizeof sub, "%s/items", path);
            int32_t c;
            NB_TRY(compile(g, it, sub, depth + 1, &c));
            g->nodes[i].items = c;
        } else if (it && !json_is_true(it)) {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s/items: only a schema (tuple forms are not supported)", path);
        } else {
            g->nodes[i].items = any_node(g);
        }
        if ((v = json_object_get(s, "minItems"))) g->nodes[i].min_items = (int32_t)json_integer_value(v);
        if ((v = json_object_get(s, "maxItems"))) g->nodes[i].max_items = (int32_t)json_integer_value(v);
        if (g->nodes[i].min_items < 0 || g->nodes[i].max_items < g->nodes[i].min_items)
            return nb_fail(NB_ERR_INVALID, "%s: minItems/maxItems: need 0 <= minItems <= maxItems", path);
    } else if (k == K_STRING) {
        if ((v = json_object_get(s, "minLength"))) g->nodes[i].min_len = (int32_t)json_integer_value(v);
        if ((v = json_object_get(s, "maxLength"))) g->nodes[i].max_len = (int32_t)json_integer_value(v);
        if (g->nodes[i].min_len < 0 || g->nodes[i].max_len < g->nodes[i].min_len)
            return nb_fail(NB_ERR_INVALID, "%s: minLength/maxLength: need 0 <= minLength <= maxLength", path);
        json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
        if (pat && fmt)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s/format: 'format' beside 'pattern' would not be enforced (nibble "
                           "enforces one regular expression per string): give one of them", path);
        if (pat || fmt) {
            char *text;
            int32_t fmin, fmax;
            NB_TRY(string_regex(pat ? "pattern" : "format", pat ? pat : fmt, path, &text, &fmin, &fmax,
                                &g->nodes[i].finish, sub, sizeof sub));
            pcre2_code *re;
            nb_status st = compile_pattern(text, true, &re, sub);
            free(text);
            NB_TRY(st);
            g->nodes[i].pattern = re;
            g->nodes[i].pattern_len = fmin >= 0 ? fmin : shortest_match(re);
            if (fmax && g->nodes[i].max_len > fmax) g->nodes[i].max_len = fmax;
            if (g->nodes[i].pattern_len < 0 || g->nodes[i].pattern_len > g->nodes[i].max_len)
                return nb_fail(NB_ERR_UNSUPPORTED, "%s: no match of at most %d printable ASCII characters was found "
                               "within maxLength, so nibble cannot promise to finish the string", sub,
                               PAT_SEARCH_DEPTH);
        }
    } else {
        node *n = &g->nodes[i];
        if ((v = json_object_get(s, "minimum"))) n->has_min = true, n->min = json_number_value(v);
        if ((v = json_object_get(s, "maximum"))) n->has_max = true, n->max = json_number_value(v);
        if ((v = json_object_get(s, "exclusiveMinimum"))) n->has_min = n->excl_min = true, n->min = json_number_value(v);
        if ((v = json_object_get(s, "exclusiveMaximum"))) n->has_max = n->excl_max = true, n->max = json_number_value(v);
    }
    *out = i;
    return NB_OK;
}

static nb_status literal_node(nb_grammar *g, json_t *vals, const char *path, int32_t *out) {
    int32_t i = new_node(g, K_LITERALS);
    if (i < 0) return nb_fail(NB_ERR_NOMEM, "out of memory");
    size_t k;
    json_t *v;
    json_array_foreach(vals, k, v) {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!t) return nb_fail(NB_ERR_NOMEM, "out of memory");
        nb_status st = add_literal(&g->nodes[i], t, strlen(t));
        free(t);
        if (st != NB_OK) return nb_fail(st, "%s: %s", path, nb_errmsg());
    }
    if (g->nodes[i].n_lits == 0) return nb_fail(NB_ERR_INVALID, "%s/enum: empty", path);
    *out = i;
    return NB_OK;
}

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "strict", NULL};
static const char *const handled[] = {"type", "properties", "required", "additionalProperties", "enum", "const", "items",
                                      "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
                                      "anyOf", "nullable", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "$ref",
                                      "$defs", "definitions", NULL};
/* Keywords that constrain nothing where they stand: they may sit beside any other. */
static const char *const neutral[] = {"nullable", "$defs", "definitions", NULL};

static bool in_list(const char *k, const char *const *l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return true;
    return false;
}

/* The instance types a keyword constrains (JSON Schema: it holds for every
 * other type); 0 for the rest. */
enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8 };
static unsigned kw_types(const char *k) {
    static const char *const obj[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const arr[] = {"items", "minItems", "maxItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    return in_list(k, obj) ? T_OBJECT : in_list(k, arr) ? T_ARRAY : in_list(k, str) ? T_STRING : in_list(k, num) ? T_NUMBER : 0;
}

static unsigned type_bits(const char *t) {
    return !strcmp(t, "object") ? T_OBJECT : !strcmp(t, "array") ? T_ARRAY : !strcmp(t, "string") ? T_STRING
         : !strcmp(t, "number") || !strcmp(t, "integer") ? T_NUMBER : 0;
}

/* The keywords' own values, where a wrong one would be misread rather than refused. */
static nb_status check_values(json_t *s, const char *path) {
    static const char *const counts[] = {"minLength", "maxLength", "minItems", "maxItems", NULL};
    static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) {
        if (in_list(key, counts) && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX))
            return nb_fail(NB_ERR_INVALID, "%s/%s: a non-negative integer (at most %d)", path, key, INT32_MAX);
        if (in_list(key, bounds) && !json_is_number(v))
            return nb_fail(NB_ERR_INVALID, "%s/%s: a number%s", path, key,
                           json_is_boolean(v) && key[0] == 'e' ? " (the boolean form of draft 4 is not supported: give "
                           "the bound itself, e.g. \"exclusiveMinimum\": 0)" : "");
        if (!strcmp(key, "nullable") && !json_is_boolean(v)) return nb_fail(NB_ERR_INVALID, "%s/nullable: true or false", path);
    }
    return NB_OK;
}

static size_t utf8_chars(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

/* Does the value v satisfy the keyword key (value kv) of JSON Schema? Only
 * the keywords kw_types names and "type"; false also when a pattern does
 * not compile (its error is set). */
static bool value_satisfies(json_t *v, const char *key, json_t *kv, const char *path, nb_status *st) {
    *st = NB_OK;
    if (!strcmp(key, "type")) {
        size_t n = json_is_array(kv) ? json_array_size(kv) : 1;
        bool match = false;
        for (size_t k = 0; k < n; k++) {
            const char *t = json_string_value(json_is_array(kv) ? json_array_get(kv, k) : kv);
            if (!t) {
                *st = nb_fail(NB_ERR_INVALID, "%s/type: a type name or a list of them", path);
                return false;
            }
            if (!type_bits(t) && strcmp(t, "boolean") && strcmp(t, "null")) {
                *st = nb_fail(NB_ERR_UNSUPPORTED, "%s/type: '%s' is not a JSON Schema type", path, t);
                return false;
            }
            double d = json_number_value(v);
            match = match || (!strcmp(t, "string") && json_is_string(v)) || (!strcmp(t, "number") && json_is_number(v)) ||
                    (!strcmp(t, "integer") && (json_is_integer(v) || (json_is_real(v) && d == floor(d)))) ||
                    (!strcmp(t, "boolean") && json_is_boolean(v)) || (!strcmp(t, "null") && json_is_null(v)) ||
                    (!strcmp(t, "object") && json_is_object(v)) || (!strcmp(t, "array") && json_is_array(v));
        }
        return match;
    }
    unsigned t = kw_types(key);
    if (t == T_STRING && json_is_string(v)) {
        size_t n = utf8_chars(json_string_value(v), json_string_length(v));
        if (!strcmp(key, "minLength")) return n >= (size_t)json_integer_value(kv);
        if (!strcmp(key, "maxLength")) return n <= (size_t)json_integer_value(kv);
        char where[512], *text;
        int32_t fmin, fmax;
        const char *const *fin;
        if ((*st = string_regex(key, kv, path, &text, &fmin, &fmax, &fin, where, sizeof where)) != NB_OK) return false;
        if (fmax && n > (size_t)fmax) {
            free(text);
            return false;
        }
        pcre2_code *re;
        *st = compile_pattern(text, true, &re, where);
        free(text);
        if (*st != NB_OK) return false;
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        bool ok = md && re_run(re, md, json_string_value(v), json_string_length(v), 0) >= 0;
        if (!md) *st = nb_fail(NB_ERR_NOMEM, "out of memory");
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        return ok;
    }
    if (t == T_NUMBER && json_is_number(v)) {
        double x = json_number_value(v), b = json_number_value(kv);
        return !strcmp(key, "minimum") ? x >= b : !strcmp(key, "maximum") ? x <= b
             : !strcmp(key, "exclusiveMinimum") ? x > b : x < b;
    }
    if (t == T_ARRAY && json_is_array(v) && strcmp(key, "items")) {
        size_t n = json_array_size(v);
        return !strcmp(key, "minItems") ? n >= (size_t)json_integer_value(kv) : n <= (size_t)json_integer_value(kv);
    }
    return true; /* the keyword does not constrain this type of value */
}

/* enum / const: nibble produces exactly the listed values, so a keyword
 * beside them is accepted only when every value already satisfies it
 * (redundant); "properties", "items" and the like are not checked, so they
 * are refused rather than ignored. */
static nb_status check_beside_literals(json_t *s, const char *path) {
    json_t *c = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    const char *what = c ? "const" : "enum";
    if (e && !json_is_array(e)) return nb_fail(NB_ERR_INVALID, "%s/enum: not an array", path);
    if (c && e) {
        bool found = false;
        size_t k;
        json_t *x;
        json_array_foreach(e, k, x) found = found || json_equal(x, c);
        if (!found)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s/enum: the 'const' beside it is not among its values (no document "
                           "satisfies both)", path);
    }
    const char *key;
    json_t *kv;
    json_object_foreach(s, key, kv) {
        if (!strcmp(key, "const") || !strcmp(key, "enum") || in_list(key, annotations) || in_list(key, neutral)) continue;
        if (strcmp(key, "type") && (!kw_types(key) || !strcmp(key, "items") || kw_types(key) == T_OBJECT))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s/%s: '%s' beside '%s' would not be enforced (nibble produces the "
                           "%s value%s as given; beside it only type, minLength, maxLength, pattern, format, minimum, maximum, "
                           "exclusiveMinimum, exclusiveMaximum, minItems, maxItems when every value satisfies them, "
                           "nullable and annotations)", path, key, key, what, what, c ? "" : "s");
        size_t n = c ? 1 : json_array_size(e);
        bool nullable = json_is_true(json_object_get(s, "nullable")); /* OpenAPI: null joins the type */
        for (size_t k = 0; k < n; k++) {
            nb_status st;
            json_t *x = c ? c : json_array_get(e, k);
            if (nullable && json_is_null(x) && !strcmp(key, "type")) continue;
            if (!value_satisfies(x, key, kv, path, &st)) {
                if (st != NB_OK) return st;
                char at[32] = "";
                if (!c) snprintf(at, sizeof at, "/%zu", k);
                return nb_fail(NB_ERR_UNSUPPORTED, "%s/%s: the value at %s/%s%s does not satisfy it, and nibble "
                               "produces the %s value%s as given (so a keyword beside '%s' must hold for every value)",
                               path, key, path, what, at, what, c ? "" : "s", what);
            }
        }
    }
    return NB_OK;
}

static nb_status compile(nb_grammar *g, json_t *s, const char *path, int depth, int32_t *out) {
    if (depth > 32) return nb_fail(NB_ERR_UNSUPPORTED, "%s: schema nested deeper than 32", path);
    if (json_is_true(s)) {
        *out = any_node(g);
        return NB_OK;
    }
    if (!json_is_object(s)) return nb_fail(NB_ERR_INVALID, "%s: a schema must be an object or true", path);
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) {
        if (!in_list(key, handled) && !in_list(key, annotations))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: the keyword '%s' cannot be enforced by nibble's constrained decoding "
                           "(supported: type, properties, required, additionalProperties, enum, const, items, minItems, "
                           "maxItems, minLength, maxLength, pattern, format, anyOf, nullable, minimum, maximum, "
                           "exclusiveMinimum, exclusiveMaximum, $ref, $defs)", path, key);
    }
    NB_TRY(check_values(s, path));
    /* One keyword decides what is compiled ($ref, then const / enum, then
     * anyOf, then type); what else stands beside it must be enforced too,
     * or proven redundant, or refused: never silently dropped. */
    const char *alone = json_object_get(s, "$ref") ? "$ref" : json_object_get(s, "const") || json_object_get(s, "enum")
                        ? NULL : json_object_get(s, "anyOf") ? "anyOf" : NULL;
    if (alone) {
        json_object_foreach(s, key, v)
            if (strcmp(key, alone) && !in_list(key, annotations) && !in_list(key, neutral))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s/%s: '%s' beside '%s' would not be enforced (nibble compiles "
                               "'%s' alone; beside it only nullable, $defs, definitions and annotations): move it %s",
                               path, key, key, alone, alone,
                               !strcmp(alone, "$ref") ? "into the referenced schema" : "into every anyOf alternative");
    } else if (json_object_get(s, "const") || json_object_get(s, "enum")) {
        NB_TRY(check_beside_literals(s, path));
    } else {
        /* type: every type-specific keyword must apply to one of the types;
         * without type, the keywords of one kind give the type (a valid
         * subset: e.g. "properties" alone -> an object) */
        json_t *t = json_object_get(s, "type");
        unsigned allowed = 0, used = 0;
        const char *first[9] = {0};
        if (json_is_string(t)) allowed = type_bits(json_string_value(t));
        size_t k;
        json_t *a;
        if (json_is_array(t)) json_array_foreach(t, k, a) if (json_is_string(a)) allowed |= type_bits(json_string_value(a));
        json_object_foreach(s, key, v) {
            unsigned b = kw_types(key);
            if (!b) continue;
            if (t && !(b & allowed))
                return nb_fail(NB_ERR_UNSUPPORTED, "%s/%s: '%s' does not apply to the type given (%s), so it would not "
                               "be enforced", path, key, key, json_is_string(t) ? json_string_value(t) : "a list without it");
            used |= b;
            if (!first[b]) first[b] = key;
        }
        if (!t && used && (used & (used - 1)))
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: '%s' and '%s' constrain different types and there is no 'type': "
                           "nibble would produce one type and drop the other's keywords; give \"type\" (a list is "
                           "allowed)", path, first[used & -used], first[used & (used - 1) & -(used & (used - 1))]);
    }
    char sub[512];
    int32_t r;
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return nb_fail(NB_ERR_INVALID, "%s/$ref: not a string", path);
        r = new_node(g, K_REF);
        if (r < 0 || !(g->nodes[r].ref = strdup(json_string_value(v)))) return nb_fail(NB_ERR_NOMEM, "out of memory");
    } else if ((v = json_object_get(s, "const"))) {
        json_t *a = json_array();
        json_array_append(a, v);
        nb_status st = literal_node(g, a, path, &r);
        json_decref(a);
        NB_TRY(st);
    } else if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v)) return nb_fail(NB_ERR_INVALID, "%s/enum: not an array", path);
        NB_TRY(literal_node(g, v, path, &r));
    } else if ((v = json_object_get(s, "anyOf"))) {
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MAX_ALTS)
            return nb_fail(NB_ERR_UNSUPPORTED, "%s/anyOf: 1..%d schemas", path, MAX_ALTS);
        int32_t alts[MAX_ALTS];
        size_t k;
        json_t *a;
        json_array_foreach(v, k, a) {
            snprintf(sub, sizeof sub, "%s/anyOf/%zu", path, k);
            NB_TRY(compile(g, a, sub, depth + 1, &alts[k]));
        }
        r = new_node(g, K_ANYOF);
        if (r < 0) return nb_fail(NB_ERR_NOMEM, "out of memory");
        g->nodes[r].n_alts = (int32_t)json_array_size(v);
        memcpy(g->nodes[r].alt, alts, sizeof alts);
    } else if ((v = json_object_get(s, "type"))) {
        if (json_is_string(v)) {
            NB_TRY(compile_type(g, s, json_string_value(v), path, depth, &r));
        } else if (json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= MAX_ALTS) {
            int32_t alts[MAX_ALTS];
            size_t k;
            json_t *a;
            json_array_foreach(v, k, a) {
                if (!json_is_string(a)) return nb_fail(NB_ERR_INVALID, "%s/type: not a string", path);
                NB_TRY(compile_type(g, s, json_string_value(a), path, depth, &alts[k]));
            }
            r = new_node(g, K_ANYOF);
            if (r < 0) return nb_fail(NB_ERR_NOMEM, "out of memory");
            g->nodes[r].n_alts = (int32_t)json_array_size(v);
            memcpy(g->nodes[r].alt, alts, sizeof alts);
        } else {
            return nb_fail(NB_ERR_INVALID, "%s/type: a type name or a list of 1..%d", path, MAX_ALTS);
        }
    } else {
        unsigned used = 0;
        json_object_foreach(s, key, v) used |= kw_types(key);
        if (used) /* one kind only (checked above) */
            NB_TRY(compile_type(g, s, used == T_OBJECT ? "object" : used == T_ARRAY ? "array"
                                       : used == T_STRING ? "string" : "number", path, depth, &r));
        else r = any_node(g);
    }
    if (json_is_true(json_object_get(s, "nullable"))) {
        int32_t a = new_node(g, K_ANYOF);
        if (a < 0) return nb_fail(NB_ERR_NOMEM, "out of memory");
        g->nodes[a].n_alts = 2;
        g->nodes[a].alt[0] = r;
        g->nodes[a].alt[1] = g->lit_null;
        r = a;
    }
    *out = r;
    return NB_OK;
}

static nb_status resolve_refs(nb_grammar *g, json_t *root, int32_t root_node, int32_t from) {
    for (int32_t i = from; i < g->n_nodes; i++) {
        node *n = &g->nodes[i];
        if (n->k != K_REF || n->target >= 0) continue;
        const char *ref = n->ref;
        const char *name = NULL;
        json_t *defs = NULL;
        if (!strcmp(ref, "#")) {
            n->target = root_node;
            continue;
        }
        if (!strncmp(ref, "#/$defs/", 8)) name = ref + 8, defs = json_object_get(root, "$defs");
        else if (!strncmp(ref, "#/definitions/", 14)) name = ref + 14, defs = json_object_get(root, "definitions");
        json_t *target = defs && name ? json_object_get(defs, name) : NULL;
        if (!target)
            return nb_fail(NB_ERR_UNSUPPORTED, "$ref '%s': only '#', '#/$defs/NAME' and '#/definitions/NAME' of this "
                           "schema are resolved", ref);
        /* one compiled node per definition: reuse a K_REF already resolved to the same name */
        int32_t found = -1;
        for (int32_t j = from; j < i; j++)
            if (g->nodes[j].k == K_REF && g->nodes[j].target >= 0 && !strcmp(g->nodes[j].ref, ref)) found = g->nodes[j].target;
        if (found < 0) {
            char path[300];
            snprintf(path, sizeof path, "%s", ref);
            NB_TRY(compile(g, target, path, 1, &found));
        }
        g->nodes[i].target = found;
    }
    return NB_OK;
}

static int32_t deref(const nb_grammar *g, int32_t i) {
    for (int guard = 0; i >= 0 && g->nodes[i].k == K_REF && guard < 64; guard++) i = g->nodes[i].target;
    return i;
}

/* Shortest instance of every node, by fixpoint (recursive $refs). */
#define INF_LEN ((size_t)1 << 40)
static size_t sat_add(size_t a, size_t b) { return a >= INF_LEN || b >= INF_LEN ? INF_LEN : a + b; }

static size_t node_minlen(const nb_grammar *g, int32_t i) {
    const node *n = &g->nodes[i];
    size_t best, s;
    switch (n->k) {
    case K_ANY: return 1; /* 0 */
    case K_OBJECT:
        s = 2;
        for (int32_t p = 0, k = 0; p < n->n_props; p++)
            if (n->required >> p & 1) {
                s = sat_add(s, (k++ ? 1 : 0) + n->prop_len[p] + 3);
                s = sat_add(s, g->nodes[deref(g, n->prop_node[p])].minlen);
            }
        return s;
    case K_ARRAY:
        if (n->min_items == 0) return 2;
        s = sat_add(2 + (size_t)(n->min_items - 1), 0);
        for (int32_t k = 0; k < n->min_items && s < INF_LEN; k++) s = sat_add(s, g->nodes[deref(g, n->items)].minlen);
        return s;
    case K_STRING: return 2 + (size_t)(n->pattern && n->pattern_len > n->min_len ? n->pattern_len : n->min_len);
    case K_NUMBER:
    case K_INTEGER: return 1;
    case K_LITERALS:
        best = INF_LEN;
        for (int32_t k = 0; k < n->n_lits; k++)
            if (n->lit_len[k] < best) best = n->lit_len[k];
        return best;
    case K_ANYOF:
        best = INF_LEN;
        for (int32_t k = 0; k < n->n_alts; k++) {
            size_t m = g->nodes[deref(g, n->alt[k])].minlen;
            if (m < best) best = m;
        }
        return best;
    case K_REF: return g->nodes[deref(g, i)].minlen;
    case K_SEQ:
        s = 0;
        for (int32_t k = 0; k < n->n_alts; k++) {
            if (k + 1 == n->switch_at) { /* the literal and the item it selects, together */
                const node *l = &g->nodes[n->alt[k]];
                best = INF_LEN;
                for (int32_t j = 0; j < l->n_lits; j++) {
                    size_t m = sat_add(l->lit_len[j], g->nodes[deref(g, n->sel[j])].minlen);
                    if (m < best) best = m;
                }
                s = sat_add(s, best);
                k++;
                continue;
            }
            s = sat_add(s, g->nodes[deref(g, n->alt[k])].minlen);
        }
        return s;
    }
    return INF_LEN;
}

static void compute_minlen(nb_grammar *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) g->nodes[i].minlen = INF_LEN;
    for (int iter = 0; iter < 64; iter++) {
        bool changed = false;
        for (int32_t i = 0; i < g->n_nodes; i++) {
            size_t m = node_minlen(g, i);
            if (m < g->nodes[i].minlen) g->nodes[i].minlen = m, changed = true;
        }
        if (!changed) break;
    }
}

static nb_grammar *grammar_new(const char *what) {
    nb_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->kind = what;
    g->mode = G_JSON;
    return g;
}

nb_status nb_grammar_json_schema(const char *schema, size_t len, nb_grammar **out) {
    *out = NULL;
    json_error_t je;
    json_t *s = json_loadb(schema, len, 0, &je);
    if (!s) return nb_fail(NB_ERR_INVALID, "json_schema: not JSON (line %d: %s)", je.line, je.text);
    nb_grammar *g = grammar_new("json_schema");
    nb_status st = g ? make_any_nodes(g) : nb_fail(NB_ERR_NOMEM, "out of memory");
    if (st == NB_OK) st = compile(g, s, "#", 0, &g->root);
    if (st == NB_OK) st = resolve_refs(g, s, g->root, 0);
    json_decref(s);
    if (st != NB_OK) {
        nb_grammar_free(g);
        return st;
    }
    compute_minlen(g);
    if (g->nodes[g->root].minlen >= INF_LEN) {
        nb_grammar_free(g);
        return nb_fail(NB_ERR_UNSUPPORTED, "json_schema: no finite document satisfies it (a required property that "
                       "recurses without end)");
    }
    *out = g;
    return NB_OK;
}

nb_status nb_grammar_json_object(nb_grammar **out) {
    *out = NULL;
    nb_grammar *g = grammar_new("json_object");
    nb_status st = g ? make_any_nodes(g) : nb_fail(NB_ERR_NOMEM, "out of memory");
    if (st != NB_OK) {
        nb_grammar_free(g);
        return st;
    }
    g->root = g->any_object;
    compute_minlen(g);
    *out = g;
    return NB_OK;
}

nb_status nb_grammar_regex(const char *pattern, nb_grammar **out) {
    *out = NULL;
    nb_grammar *g = grammar_new("regex");
    if (!g) return nb_fail(NB_ERR_NOMEM, "out of memory");
    g->mode = G_REGEX;
    nb_status st = compile_pattern(pattern, false, &g->regex, "guided_regex");
    if (st != NB_OK) {
        nb_grammar_free(g);
        return st;
    }
    *out = g;
    return NB_OK;
}

nb_status nb_grammar_choice(const char *const *choices, size_t n, nb_grammar **out) {
    *out = NULL;
    if (n == 0 || n > MAX_LITS) return nb_fail(NB_ERR_INVALID, "guided_choice: 1..%d strings", MAX_LITS);
    nb_grammar *g = grammar_new("choice");
    nb_status st = g ? make_any_nodes(g) : nb_fail(NB_ERR_NOMEM, "out of memory");
    int32_t r = st == NB_OK ? new_node(g, K_LITERALS) : -1;
    if (st == NB_OK && r < 0) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == NB_OK && i < n; i++) {
        if (!choices[i][0]) st = nb_fail(NB_ERR_INVALID, "guided_choice[%zu]: empty string", i);
        else st = add_literal(&g->nodes[r], choices[i], strlen(choices[i]));
    }
    if (st != NB_OK) {
        nb_grammar_free(g);
        return st;
    }
    g->root = r;
    g->raw_root = true;
    compute_minlen(g);
    *out = g;
    return NB_OK;
}

nb_status nb_grammar_tagged(const char *const *prefix, const char *const *schemas, size_t n, const char *suffix,
                            nb_grammar **out) {
    *out = NULL;
    if (n == 0 || n > MAX_LITS) return nb_fail(NB_ERR_UNSUPPORTED, "tool call grammar: 1..%d alternatives", MAX_LITS);
    for (size_t i = 0; i < n; i++) {
        if (!prefix[i][0]) return nb_fail(NB_ERR_INVALID, "tool call grammar: alternative %zu has an empty prefix", i);
        for (size_t j = 0; j < n; j++)
            if (i != j && !strncmp(prefix[i], prefix[j], strlen(prefix[i])))
                return nb_fail(NB_ERR_INVALID, "tool call grammar: prefix %zu starts prefix %zu", i, j);
    }
    nb_grammar *g = grammar_new("tool_call");
    nb_status st = g ? make_any_nodes(g) : nb_fail(NB_ERR_NOMEM, "out of memory");
    int32_t lit = st == NB_OK ? new_node(g, K_LITERALS) : -1;
    if (st == NB_OK && lit < 0) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    int32_t *sel = st == NB_OK ? calloc(n, sizeof *sel) : NULL;
    if (st == NB_OK && !sel) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == NB_OK && i < n; i++) {
        st = add_literal(&g->nodes[lit], prefix[i], strlen(prefix[i]));
        json_error_t je;
        json_t *js = st == NB_OK ? json_loadb(schemas[i], strlen(schemas[i]), 0, &je) : NULL;
        if (st == NB_OK && !js) st = nb_fail(NB_ERR_INVALID, "schema %zu: not JSON (line %d: %s)", i, je.line, je.text);
        int32_t from = g->n_nodes;
        if (st == NB_OK) st = compile(g, js, "#", 0, &sel[i]);
        if (st == NB_OK) st = resolve_refs(g, js, sel[i], from);
        if (st == NB_OK) {
            kind k = g->nodes[deref(g, sel[i])].k;
            if (k != K_OBJECT && k != K_ARRAY) /* a value the literal after it can end without a delimiter */
                st = nb_fail(NB_ERR_UNSUPPORTED, "schema %zu: must describe an object", i);
        }
        json_decref(js);
    }
    int32_t suf = -1;
    if (st == NB_OK && suffix && *suffix) {
        suf = new_node(g, K_LITERALS);
        st = suf < 0 ? nb_fail(NB_ERR_NOMEM, "out of memory") : add_literal(&g->nodes[suf], suffix, strlen(suffix));
    }
    int32_t seq = st == NB_OK ? new_node(g, K_SEQ) : -1;
    if (st == NB_OK && seq < 0) st = nb_fail(NB_ERR_NOMEM, "out of memory");
    if (st != NB_OK) {
        free(sel);
        nb_grammar_free(g);
        return st;
    }
    node *q = &g->nodes[seq];
    q->alt[0] = lit;
    q->alt[1] = sel[0];
    q->n_alts = 2;
    q->required = 1; /* item 0 is raw */
    if (suf >= 0) q->alt[q->n_alts++] = suf, q->required |= 4;
    q->switch_at = 1;
    q->sel = sel;
    g->root = seq;
    g->raw_root = true;
    compute_minlen(g);
    if (g->nodes[seq].minlen >= INF_LEN) {
        nb_grammar_free(g);
        return nb_fail(NB_ERR_UNSUPPORTED, "tool call grammar: no finite document satisfies a schema");
    }
    *out = g;
    return NB_OK;
}

/* ---- the matcher ------------------------------------------------------------------------ */

enum { F_VALUE, F_OBJ, F_ARR, F_STR, F_NUM, F_LIT, F_SEQ };
enum { O_OPEN, O_KEY, O_COLON, O_AFTER, O_COMMA };
enum { A_OPEN, A_AFTER, A_COMMA };
enum { S_NORMAL, S_ESC, S_U1, S_U2, S_U3, S_U4 };
enum { N_START, N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

typedef struct frame {
    uint8_t kind, sub, utf8, neg;
    int32_t node;
    int32_t a, b;    /* obj: key pos, prop; arr: count; str: chars; lit: pos */
    uint64_t bits;   /* obj: seen props; lit: candidates */
    uint64_t cand;   /* obj: key candidates */
    double val;      /* number: value so far (bounds) */
    double scale;    /* number: place of the next fraction digit */
} frame;

#define MAX_DEPTH 32
#define MAX_THREADS 8
#define PAT_CAP 128
#define WS_MAX 16
#define NUM_DIGITS 15

typedef struct thread {
    int32_t depth;
    int32_t pat_len;
    int32_t ws; /* whitespace bytes in a row (outside strings) */
    frame f[MAX_DEPTH];
    char pat[PAT_CAP]; /* content of the open string when its schema has a pattern */
} thread;

struct nb_gmatch {
    const nb_grammar *g;
    int32_t n;
    thread t[MAX_THREADS];
    /* regex mode: the output so far */
    char *out;
    size_t out_len, out_cap;
    pcre2_match_data *md;
    /* near the end of the budget: a whole completion found by search, and how
     * much of it has been written (grammar.h "budget") */
    char *forced;
    size_t forced_len, forced_pos;
};

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static void push(thread *t, uint8_t fk, int32_t ni) {
    frame *f = &t->f[t->depth++];
    memset(f, 0, sizeof *f);
    f->kind = fk;
    f->node = ni;
}

/* Length of the longest prefix of s that is whole UTF-8 characters, and
 * whether the rest is just a character cut short (not an invalid byte). */
static size_t utf8_prefix(const char *s, size_t n, bool *cut) {
    size_t i = 0;
    *cut = false;
    while (i < n) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k) return i;
        size_t j = 1;
        while (j < k && i + j < n && ((uint8_t)s[i + j] & 0xC0) == 0x80) j++;
        if (j < k) {
            *cut = i + j == n; /* ran out of bytes, not into a bad one */
            return i;
        }
        i += k;
    }
    return i;
}

/* 0: no completion of s can match the regex; 1: s is a viable prefix;
 * 2: s matches whole. */
static int re_match(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n);

/* s ends in a character cut short after byte v: viable when some completion
 * of it is. The first missing byte runs over its whole valid range, the
 * ones after it take their smallest and largest values. */
static int cut_viable(pcre2_code *re, pcre2_match_data *md, const char *s, size_t v, size_t n) {
    uint8_t lead = (uint8_t)s[v];
    size_t k = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2, have = n - v;
    char *t = malloc(v + 4);
    if (!t) return 0;
    memcpy(t, s, n);
    int found = 0;
    for (int first = 0x80; first <= 0xBF && !found; first++) {
        if (have == 1) { /* the second byte's range depends on the lead */
            if ((lead == 0xE0 && first < 0xA0) || (lead == 0xED && first > 0x9F) || (lead == 0xF0 && first < 0x90) ||
                (lead == 0xF4 && first > 0x8F))
                continue;
        }
        t[n] = (char)first;
        for (int hi = 0; hi < 2 && !found; hi++) {
            for (size_t i = have + 1; i < k; i++) t[v + i] = (char)(hi ? 0xBF : 0x80);
            found = re_match(re, md, t, v + k) != 0;
        }
    }
    free(t);
    return found;
}

static int re_check(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n) {
    bool cut;
    size_t v = utf8_prefix(s, n, &cut);
    if (v < n && !cut) return 0;
    if (v < n) return cut_viable(re, md, s, v, n);
    return re_match(re, md, s, n);
}

/* s is whole UTF-8: 2 = matches whole, 1 = a viable prefix, 0 = neither.
 * The empty text is viable unless nothing can follow. */
/* One match, JIT-compiled code first (compile_pattern), the interpreter when the JIT stack is too small. */
static int re_run(pcre2_code *re, pcre2_match_data *md, const char *s, size_t v, uint32_t opts) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, v, 0, opts | PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(re, (PCRE2_SPTR)s, v, 0, opts | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    return rc;
}

static int re_match(pcre2_code *re, pcre2_match_data *md, const char *s, size_t v) {
    size_t n = v;
    if (v == n && re_run(re, md, s, v, 0) >= 0) return 2;
    if (n == 0) return 1; /* PCRE2 reports no partial match on an empty subject */
    int rc = re_run(re, md, s, v, PCRE2_PARTIAL_HARD);
    if (rc == PCRE2_ERROR_PARTIAL || rc >= 0) return 1;
    return 0; /* matching failed (limits): treat as not viable rather than let anything through */
}

static bool num_in_bounds(const node *n, double v) {
    if (n->has_min && (n->excl_min ? !(v > n->min) : !(v >= n->min))) return false;
    if (n->has_max && (n->excl_max ? !(v < n->max) : !(v <= n->max))) return false;
    return true;
}

/* A number can still reach the bounds by appending digits: for |v| growing
 * with more digits, a positive value past the maximum (a negative one past
 * the minimum) is lost. */
static bool num_viable(const node *n, const frame *f) {
    if (!n->has_min && !n->has_max) return true;
    if (!f->neg && n->has_max && f->val > n->max) return false;
    if (f->neg && n->has_min && -f->val < n->min) return false;
    return true;
}

static bool num_accepting(const nb_grammar *g, const frame *f) {
    if (!(f->sub == N_ZERO || f->sub == N_INT || f->sub == N_FRAC || f->sub == N_EXP)) return false;
    return num_in_bounds(&g->nodes[f->node], f->neg ? -f->val : f->val);
}

static void lit_start(const nb_grammar *g, frame *f) {
    const node *n = &g->nodes[f->node];
    f->kind = F_LIT, f->a = 0;
    f->bits = n->n_lits >= 64 ? ~0ull : (1ull << n->n_lits) - 1;
}

/* A raw literal item of a sequence ended with literal k: the sequence's
 * switch item (if any) follows it. */
static void lit_popped(thread *t, int32_t k) {
    if (t->depth >= 1 && t->f[t->depth - 1].kind == F_SEQ) t->f[t->depth - 1].b = k;
}

/* The top frame is a sequence: start its next item (a raw literal at once),
 * or end it. false: the item cannot start. Items after a JSON value are
 * literals (nb_grammar_tagged), so an anyOf item is only ever started here
 * before its first byte and expanded by the caller. */
static bool seq_advance(const nb_grammar *g, thread *t) {
    frame *f = &t->f[t->depth - 1];
    const node *n = &g->nodes[f->node];
    if (f->a >= n->n_alts) {
        t->depth--;
        return true;
    }
    int32_t item = n->alt[f->a];
    if (f->a == n->switch_at) item = f->b >= 0 && f->b < g->nodes[n->alt[f->a - 1]].n_lits ? n->sel[f->b] : -1;
    bool raw = n->required >> f->a & 1;
    f->a++;
    if (item < 0 || t->depth >= MAX_DEPTH) return false;
    push(t, F_VALUE, item);
    if (raw) lit_start(g, &t->f[t->depth - 1]);
    return true;
}

static bool settle(const nb_grammar *g, thread *t) {
    while (t->depth > 0 && t->f[t->depth - 1].kind == F_SEQ)
        if (!seq_advance(g, t)) return false;
    return true;
}

/* A number starting with 0 (after an optional '-') is 0 for an integer,
 * in [0, 1) (or (-1, 0]) otherwise: can that still meet the bounds? */
static bool zero_viable(const node *n, bool neg, bool integer) {
    if (integer) return num_in_bounds(n, 0);
    if (!neg) /* [0, 1) */
        return !(n->has_min && n->min >= 1) && !(n->has_max && (n->excl_max ? n->max <= 0 : n->max < 0));
    /* (-1, 0] */
    return !(n->has_max && n->max <= -1) && !(n->has_min && (n->excl_min ? n->min >= 0 : n->min > 0));
}

/* one byte into one thread; false = dead. anyOf forks are expanded by the caller before. */
/* A format string takes a byte only while it can still be finished within
 * its length limit: always while the room left holds a shortest match
 * (formats[]: no viable prefix needs more), and near the limit when it
 * matches whole or one of its templates' suffixes completes it. Without
 * this a long free part (a URI's scheme) could leave no room for the rest. */
static bool format_finishable(const node *n, pcre2_match_data *md, const thread *t) {
    int32_t limit = n->max_len < PAT_CAP ? n->max_len : PAT_CAP;
    if (t->pat_len + n->pattern_len <= limit) return true;
    char buf[2 * PAT_CAP];
    memcpy(buf, t->pat, (size_t)t->pat_len);
    if (re_check(n->pattern, md, buf, (size_t)t->pat_len) == 2) return true;
    for (const char *const *fin = n->finish; *fin; fin++) {
        size_t len = strlen(*fin);
        for (size_t k = 1; k <= len && t->pat_len + (int32_t)k <= limit; k++) {
            memcpy(buf + t->pat_len, *fin + len - k, k);
            if (re_check(n->pattern, md, buf, (size_t)t->pat_len + k) == 2) return true;
        }
    }
    return false;
}

static bool step(const nb_grammar *g, thread *t, uint8_t c, pcre2_match_data *md) {
    for (;;) {
        if (t->depth == 0) return !g->raw_root && is_ws(c);
        frame *f = &t->f[t->depth - 1];
        const node *n = &g->nodes[f->node];
        switch (f->kind) {
        case F_VALUE: {
            if (is_ws(c)) return true;
            int32_t ni = f->node;
            switch (n->k) {
            case K_ANY:
                ni = c == '{' ? g->any_object : c == '[' ? g->any_array : c == '"' ? g->any_string
                   : (c == '-' || (c >= '0' && c <= '9')) ? g->any_number : c == 'n' ? g->lit_null
                   : (c == 't' || c == 'f') ? g->lit_bool : -1;
                if (ni < 0) return false;
                f->node = ni;
                continue; /* again with the typed node */
            case K_OBJECT:
                if (c != '{') return false;
                f->kind = F_OBJ, f->sub = O_OPEN;
                return true;
            case K_ARRAY:
                if (c != '[') return false;
                f->kind = F_ARR, f->sub = A_OPEN;
                return true;
            case K_STRING:
                if (c != '"') return false;
                f->kind = F_STR, f->sub = S_NORMAL;
                t->pat_len = 0;
                return true;
            case K_NUMBER:
            case K_INTEGER:
                f->kind = F_NUM, f->sub = N_START, f->val = 0, f->scale = 0.1;
                continue;
            case K_LITERALS:
                f->kind = F_LIT, f->a = 0;
                f->bits = n->n_lits >= 64 ? ~0ull : (1ull << n->n_lits) - 1;
                continue;
            case K_REF:
                f->node = deref(g, ni);
                continue;
            case K_ANYOF:
                return false; /* expanded by the caller */
            case K_SEQ:
                f->kind = F_SEQ, f->a = 0, f->b = -1;
                continue;
            }
            return false;
        }
        case F_SEQ:
            if (!seq_advance(g, t)) return false;
            continue;
        case F_OBJ: {
            if (f->sub == O_KEY) {
                if (c == '"') {
                    int32_t prop = -1;
                    for (int32_t p = 0; p < n->n_props; p++)
                        if ((f->cand >> p & 1) && n->prop_len[p] == (size_t)f->a) prop = p;
                    if (prop < 0 && n->additional < 0) return false;
                    if (prop >= 0 && (f->bits >> prop & 1)) return false; /* duplicate key */
                    f->b = prop;
                    f->sub = O_COLON;
                    return true;
                }
                if (c < 0x20 || c == '\\' || c >= 0x80) return false; /* keys: plain ASCII (a valid subset) */
                uint64_t keep = 0;
                for (int32_t p = 0; p < n->n_props; p++)
                    if ((f->cand >> p & 1) && (size_t)f->a < n->prop_len[p] && (uint8_t)n->prop_name[p][f->a] == c)
                        keep |= 1ull << p;
                f->cand = keep;
                f->a++;
                return keep != 0 || n->additional >= 0;
            }
            if (is_ws(c)) return true;
            uint64_t unseen = 0;
            for (int32_t p = 0; p < n->n_props; p++)
                if (!(f->bits >> p & 1)) unseen |= 1ull << p;
            switch (f->sub) {
            case O_OPEN:
            case O_COMMA:
                if (c == '"' && (unseen || n->additional >= 0)) {
                    f->sub = O_KEY, f->a = 0, f->cand = unseen;
                    return true;
                }
                if (c == '}' && f->sub == O_OPEN && (n->required & ~f->bits) == 0) {
                    t->depth--;
                    return true;
                }
                return false;
            case O_COLON:
                if (c != ':') return false;
                if (t->depth >= MAX_DEPTH) return false;
                if (f->b >= 0) f->bits |= 1ull << f->b;
                f->sub = O_AFTER;
                push(t, F_VALUE, f->b >= 0 ? n->prop_node[f->b] : n->additional);
                return true;
            case O_AFTER:
                if (c == ',' && (unseen || n->additional >= 0)) {
                    f->sub = O_COMMA;
                    return true;
                }
                if (c == '}' && (n->required & ~f->bits) == 0) {
                    t->depth--;
                    return true;
                }
                return false;
            }
            return false;
        }
        case F_ARR:
            if (is_ws(c)) return true;
            if (f->sub == A_OPEN || f->sub == A_AFTER) {
                if (c == ']' && f->a >= n->min_items) {
                    t->depth--;
                    return true;
                }
                if (f->sub == A_AFTER) {
                    if (c != ',' || f->a >= n->max_items) return false;
                    f->sub = A_COMMA;
                    return true;
                }
            }
            /* A_OPEN or A_COMMA: an item starts with c */
            if (f->a >= n->max_items || t->depth >= MAX_DEPTH) return false;
            f->a++;
            f->sub = A_AFTER;
            push(t, F_VALUE, n->items);
            continue;
        case F_STR:
            if (f->sub == S_NORMAL) {
                if (f->utf8) {
                    if ((c & 0xC0) != 0x80) return false;
                    if (f->neg) { /* the byte after E0, ED, F0, F4: no overlong, surrogate or > U+10FFFF */
                        uint8_t lead = f->neg;
                        if ((lead == 0xE0 && c < 0xA0) || (lead == 0xED && c > 0x9F) || (lead == 0xF0 && c < 0x90) ||
                            (lead == 0xF4 && c > 0x8F))
                            return false;
                        f->neg = 0;
                    }
                    f->utf8--;
                } else if (c == '"') {
                    if (f->a < n->min_len) return false;
                    if (n->pattern && re_check(n->pattern, md, t->pat, (size_t)t->pat_len) != 2) return false;
                    t->depth--;
                    return true;
                } else if (c == '\\') {
                    if (f->a >= n->max_len) return false; /* the escaped character would be one too many */
                    if (n->pattern) return false;          /* pattern strings: plain ASCII, no escapes */
                    f->sub = S_ESC;
                    return true;
                } else if (c < 0x20 || (c & 0xC0) == 0x80 || c == 0xC0 || c == 0xC1 || c > 0xF4) {
                    return false;
                } else if (c >= 0x80 && n->pattern) {
                    return false; /* pattern strings are written in ASCII: a cut character cannot be checked */
                } else {
                    f->utf8 = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
                    f->neg = (c == 0xE0 || c == 0xED || c == 0xF0 || c == 0xF4) ? c : 0;
                    if (++f->a > n->max_len) return false;
                }
                if (n->pattern) {
                    if (t->pat_len >= PAT_CAP) return false;
                    t->pat[t->pat_len++] = (char)c;
                    if (!f->utf8 && re_check(n->pattern, md, t->pat, (size_t)t->pat_len) == 0) return false;
                    if (n->finish && !format_finishable(n, md, t)) return false;
                }
                return true;
            }
            if (f->sub == S_ESC) {
                const char *simple = "\"\\/bfnrt";
                if (c == 'u') {
                    if (n->pattern) return false; /* escapes in pattern strings: kept out (a valid subset) */
                    f->sub = S_U1;
                    return true;
                }
                if (!strchr(simple, c) || !c) return false;
                if (++f->a > n->max_len) return false;
                f->sub = S_NORMAL;
                if (n->pattern) {
                    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
                    if (t->pat_len >= PAT_CAP) return false;
                    t->pat[t->pat_len++] = to[strchr(from, c) - from];
                    if (re_check(n->pattern, md, t->pat, (size_t)t->pat_len) == 0) return false;
                }
                return true;
            }
            /* \uXXXX; surrogates are kept out (a lone one is invalid JSON text for strict parsers) */
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
            if (f->sub == S_U1 && (c == 'd' || c == 'D')) return false;
            if (f->sub == S_U4) {
                if (++f->a > n->max_len) return false;
                f->sub = S_NORMAL;
            } else {
                f->sub++;
            }
            return true;
        case F_NUM: {
            bool integer = n->k == K_INTEGER, bounded = n->has_min || n->has_max;
            bool digit = c >= '0' && c <= '9';
            switch (f->sub) {
            case N_START:
                if (c == '-') {
                    /* every number after '-' is <= 0 */
                    if (n->has_min && (n->excl_min ? n->min >= 0 : n->min > 0)) return false;
                    f->neg = 1; f->sub = N_SIGN; return true;
                }
                /* fallthrough */
            case N_SIGN:
                if (!digit) return false;
                if (c == '0' && !zero_viable(n, f->neg, integer)) return false; /* 0 cannot grow into the bounds */
                f->sub = c == '0' ? N_ZERO : N_INT;
                f->val = c - '0';
                f->b = 1;
                return num_viable(n, f);
            case N_INT:
                if (digit) {
                    /* at most 15 digits: every parser reads them exactly (int64 and double) */
                    if (++f->b > NUM_DIGITS) return false;
                    f->val = f->val * 10 + (c - '0');
                    return num_viable(n, f);
                }
                /* fallthrough */
            case N_ZERO:
                if (c == '.' && !integer) { f->sub = N_DOT; f->b = 0; return true; }
                if ((c == 'e' || c == 'E') && !integer && !bounded) { f->sub = N_E; return true; }
                break; /* the number ends here */
            case N_DOT:
            case N_FRAC:
                if (digit) {
                    if (++f->b > NUM_DIGITS) return false;
                    f->val += (c - '0') * f->scale;
                    f->scale /= 10;
                    f->sub = N_FRAC;
                    return num_viable(n, f);
                }
                if (f->sub == N_DOT) return false;
                if ((c == 'e' || c == 'E') && !bounded) { f->sub = N_E; return true; }
                break;
            case N_E:
                if (c == '+' || c == '-') { f->sub = N_ESIGN; return true; }
                /* fallthrough */
            case N_ESIGN:
                if (!digit) return false;
                f->sub = N_EXP;
                f->b = 1;
                return true;
            case N_EXP:
                if (digit) return ++f->b <= 2; /* |exponent| < 100: no overflow to infinity */
                break;
            }
            if (!num_accepting(g, f)) return false;
            t->depth--; /* the number is over: c belongs to the parent */
            continue;
        }
        case F_LIT: {
            uint64_t keep = 0;
            bool exact = false;
            for (int32_t k = 0; k < n->n_lits && k < 64; k++) {
                if (!(f->bits >> k & 1)) continue;
                if ((size_t)f->a < n->lit_len[k] && (uint8_t)n->lit[k][f->a] == c) keep |= 1ull << k;
                if ((size_t)f->a == n->lit_len[k]) exact = true;
            }
            if (keep) {
                f->bits = keep;
                f->a++;
                /* closed when every candidate left is complete */
                bool all_done = true;
                int32_t first = -1;
                for (int32_t k = 0; k < n->n_lits && k < 64; k++)
                    if (keep >> k & 1) {
                        if (n->lit_len[k] != (size_t)f->a) all_done = false;
                        else if (first < 0) first = k;
                    }
                if (all_done) {
                    t->depth--;
                    lit_popped(t, first);
                }
                return true;
            }
            if (!exact) return false;
            int32_t done = -1;
            for (int32_t k = 0; k < n->n_lits && k < 64 && done < 0; k++)
                if ((f->bits >> k & 1) && n->lit_len[k] == (size_t)f->a) done = k;
            t->depth--; /* a shorter candidate was complete: c belongs to the parent */
            lit_popped(t, done);
            continue;
        }
        }
        return false;
    }
}

/* Replace threads whose next value is an anyOf by one thread per alternative. */
static void expand(const nb_grammar *g, nb_gmatch *m) {
    for (int guard = 0; guard < 8; guard++) {
        bool any = false;
        for (int32_t i = 0; i < m->n; i++) {
            thread *t = &m->t[i];
            if (t->depth == 0) continue;
            frame *f = &t->f[t->depth - 1];
            if (f->kind != F_VALUE) continue;
            int32_t ni = deref(g, f->node);
            f->node = ni;
            const node *n = &g->nodes[ni];
            if (n->k != K_ANYOF) continue;
            any = true;
            thread base = *t;
            int32_t slot = i;
            for (int32_t k = 0; k < n->n_alts; k++) {
                if (k > 0) {
                    if (m->n >= MAX_THREADS) break; /* the rest are dropped: a valid subset */
                    slot = m->n++;
                }
                m->t[slot] = base;
                m->t[slot].f[base.depth - 1].node = deref(g, n->alt[k]);
            }
        }
        if (!any) return;
    }
}

static void copy_match(nb_gmatch *dst, const nb_gmatch *src) {
    dst->g = src->g;
    dst->n = src->n;
    for (int32_t i = 0; i < src->n; i++) {
        const thread *s = &src->t[i];
        thread *d = &dst->t[i];
        d->depth = s->depth;
        d->pat_len = s->pat_len;
        d->ws = s->ws;
        memcpy(d->f, s->f, (size_t)s->depth * sizeof s->f[0]);
        memcpy(d->pat, s->pat, (size_t)s->pat_len);
    }
}

/* JSON mode: feed one byte to all threads, dropping the dead (a thread that
 * fails is discarded, so it may be stepped in place). */
static bool feed_byte(nb_gmatch *m, uint8_t c) {
    const nb_grammar *g = m->g;
    if (!is_ws(c)) expand(g, m);
    int32_t k = 0;
    for (int32_t i = 0; i < m->n; i++) {
        thread *t = &m->t[i];
        const frame *top = t->depth > 0 ? &t->f[t->depth - 1] : NULL; /* a key's bytes are string content too */
        bool in_str = top && (top->kind == F_STR || (top->kind == F_OBJ && top->sub == O_KEY));
        if (is_ws(c) && !in_str) {
            /* no run of whitespace longer than an indented line; one byte before the document */
            bool start = t->depth == 1 && t->f[0].kind == F_VALUE;
            if (++t->ws > (start ? 1 : WS_MAX)) continue;
        } else {
            t->ws = 0;
        }
        if (!step(g, t, c, m->md) || !settle(g, t)) continue;
        if (k != i) {
            thread *d = &m->t[k];
            d->depth = t->depth;
            d->pat_len = t->pat_len;
            d->ws = t->ws;
            memcpy(d->f, t->f, (size_t)t->depth * sizeof t->f[0]);
            memcpy(d->pat, t->pat, (size_t)t->pat_len);
        }
        k++;
    }
    m->n = k;
    return k > 0;
}

nb_status nb_gmatch_create(const nb_grammar *g, nb_gmatch **out) {
    nb_gmatch *m = calloc(1, sizeof *m);
    if (!m) return nb_fail(NB_ERR_NOMEM, "out of memory for a matcher");
    m->g = g;
    m->md = pcre2_match_data_create(32, NULL);
    if (!m->md) {
        free(m);
        return nb_fail(NB_ERR_NOMEM, "out of memory for a matcher");
    }
    if (g->mode == G_JSON) {
        m->n = 1;
        push(&m->t[0], F_VALUE, g->root);
        if (g->nodes[g->root].k == K_SEQ) { /* tool calls: the first literal at once */
            m->t[0].f[0].kind = F_SEQ;
            m->t[0].f[0].b = -1;
            if (!settle(g, &m->t[0])) m->n = 0;
        } else if (g->raw_root) { /* guided_choice: the literal itself, no whitespace first */
            lit_start(g, &m->t[0].f[0]);
        }
    }
    *out = m;
    return NB_OK;
}

void nb_gmatch_free(nb_gmatch *m) {
    if (!m) return;
    pcre2_match_data_free(m->md);
    free(m->forced);
    free(m->out);
    free(m);
}

static bool regex_append(nb_gmatch *m, const char *b, size_t n) {
    if (m->out_len + n > m->out_cap) {
        size_t cap = (m->out_len + n) * 2 + 64;
        char *o = realloc(m->out, cap);
        if (!o) return false;
        m->out = o;
        m->out_cap = cap;
    }
    memcpy(m->out + m->out_len, b, n);
    m->out_len += n;
    return true;
}

static bool feed_raw(nb_gmatch *m, const char *bytes, size_t n);

bool nb_gmatch_feed(nb_gmatch *m, const char *bytes, size_t n) {
    if (!feed_raw(m, bytes, n)) return false;
    if (m->forced) {
        if (m->forced_pos + n <= m->forced_len && !memcmp(m->forced + m->forced_pos, bytes, n)) {
            m->forced_pos += n;
        } else {
            free(m->forced);
            m->forced = NULL;
        }
    }
    return true;
}

static bool feed_raw(nb_gmatch *m, const char *bytes, size_t n) {
    if (m->g->mode == G_REGEX) {
        size_t keep = m->out_len;
        if (!regex_append(m, bytes, n)) return false;
        if (re_check(m->g->regex, m->md, m->out, m->out_len) == 0) {
            m->out_len = keep;
            return false;
        }
        return true;
    }
    nb_gmatch *save = malloc(sizeof *save);
    if (!save) return false;
    copy_match(save, m);
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(m, (uint8_t)bytes[i])) {
            copy_match(m, save);
            free(save);
            return false;
        }
    free(save);
    return true;
}

static bool thread_complete(const nb_grammar *g, const thread *t) {
    if (t->depth == 0) return true;
    if (t->depth != 1) return false;
    const frame *f = &t->f[0];
    if (f->kind == F_NUM) return num_accepting(g, f);
    if (f->kind == F_LIT) {
        const node *n = &g->nodes[f->node];
        for (int32_t k = 0; k < n->n_lits && k < 64; k++)
            if ((f->bits >> k & 1) && n->lit_len[k] == (size_t)f->a) return true;
    }
    return false;
}

bool nb_gmatch_complete(const nb_gmatch *m) {
    if (m->g->mode == G_REGEX) {
        return re_check(m->g->regex, m->md, m->out ? m->out : "", m->out_len) == 2;
    }
    for (int32_t i = 0; i < m->n; i++)
        if (thread_complete(m->g, &m->t[i])) return true;
    return false;
}

bool nb_gmatch_closed(const nb_gmatch *m) {
    if (m->g->mode == G_REGEX) return false;
    for (int32_t i = 0; i < m->n; i++)
        if (m->t[i].depth == 0) return true;
    return false;
}

/* Bytes to finish thread t along one concrete completion (close the open
 * frames with their shortest valid continuation). */
static size_t thread_remaining(const nb_grammar *g, const thread *t, bool lower) {
    size_t s = 0;
    for (int32_t d = t->depth - 1; d >= 0; d--) {
        const frame *f = &t->f[d];
        const node *n = &g->nodes[f->node];
        switch (f->kind) {
        case F_VALUE: s = sat_add(s, g->nodes[deref(g, f->node)].minlen); break;
        case F_OBJ: {
            uint64_t need = n->required & ~f->bits;
            size_t rest = 0;
            int cnt = 0;
            for (int32_t p = 0; p < n->n_props; p++)
                if (need >> p & 1) {
                    rest = sat_add(rest, 1 + n->prop_len[p] + 3 + g->nodes[deref(g, n->prop_node[p])].minlen);
                    cnt++;
                }
            switch (f->sub) {
            case O_OPEN: s = sat_add(s, rest + 1 - (cnt ? 1 : 0)); break; /* no comma before the first */
            case O_AFTER: s = sat_add(s, rest + 1); break;
            case O_COLON: {
                int32_t vn = f->b >= 0 ? n->prop_node[f->b] : n->additional;
                uint64_t need2 = f->b >= 0 ? need & ~(1ull << f->b) : need;
                size_t r2 = 0;
                for (int32_t p = 0; p < n->n_props; p++)
                    if (need2 >> p & 1) r2 = sat_add(r2, 1 + n->prop_len[p] + 3 + g->nodes[deref(g, n->prop_node[p])].minlen);
                s = sat_add(s, 1 + g->nodes[deref(g, vn)].minlen + r2 + 1);
                break;
            }
            case O_KEY:
            case O_COMMA: {
                /* finish (or start) one key: the cheapest candidate, then the rest */
                size_t best = INF_LEN;
                for (int32_t p = 0; p < n->n_props; p++) {
                    if (f->sub == O_KEY ? !(f->cand >> p & 1) : (f->bits >> p & 1)) continue;
                    size_t done = f->sub == O_KEY ? (size_t)f->a : 0;
                    size_t c = (n->prop_len[p] - done) + 2 + g->nodes[deref(g, n->prop_node[p])].minlen;
                    if (f->sub == O_COMMA) c += 1;
                    uint64_t need2 = need & ~(1ull << p);
                    for (int32_t q = 0; q < n->n_props; q++)
                        if (need2 >> q & 1) c = sat_add(c, 1 + n->prop_len[q] + 3 + g->nodes[deref(g, n->prop_node[q])].minlen);
                    if (c < best) best = c;
                }
                if (n->additional >= 0) {
                    size_t c = 2 + g->nodes[deref(g, n->additional)].minlen + (f->sub == O_COMMA ? 1 : 0);
                    c = sat_add(c, rest);
                    if (c < best) best = c;
                }
                s = sat_add(s, sat_add(best, 1));
                break;
            }
            }
            break;
        }
        case F_ARR: {
            size_t item = g->nodes[deref(g, n->items)].minlen;
            int32_t have = f->a;
            if (f->sub == A_COMMA) s = sat_add(s, item), have++;
            for (int32_t k = have; k < n->min_items; k++) s = sat_add(s, (k > 0 ? 1 : 0) + item);
            s = sat_add(s, 1);
            break;
        }
        case F_STR: {
            /* an open pattern string keeps the room of a whole shortest match in reserve: what a
             * prefix still needs is not known without a search, and rarely exceeds that */
            size_t need = n->pattern && !lower
                              ? (size_t)(n->pattern_len > n->min_len - f->a ? n->pattern_len : n->min_len - f->a)
                              : (size_t)(f->a < n->min_len ? n->min_len - f->a : 0);
            s = sat_add(s, need + f->utf8 + 1);
            if (f->sub == S_ESC) s = sat_add(s, 1);
            if (f->sub >= S_U1) s = sat_add(s, (size_t)(S_U4 - f->sub + 1));
            break;
        }
        case F_NUM:
            if (f->sub == N_START || f->sub == N_SIGN || f->sub == N_DOT || f->sub == N_E || f->sub == N_ESIGN) s = sat_add(s, 1);
            else if (!num_accepting(g, f)) s = sat_add(s, 16); /* below a minimum: a few more digits */
            break;
        case F_LIT: {
            size_t best = INF_LEN;
            for (int32_t k = 0; k < n->n_lits && k < 64; k++)
                if ((f->bits >> k & 1) && n->lit_len[k] - (size_t)f->a < best) best = n->lit_len[k] - (size_t)f->a;
            s = sat_add(s, best);
            break;
        }
        case F_SEQ:
            for (int32_t k = f->a; k < n->n_alts; k++) {
                int32_t item = n->alt[k];
                if (k == n->switch_at) {
                    if (f->b < 0) { /* the literal is still open: the cheapest item its candidates select */
                        size_t best = INF_LEN;
                        uint64_t cand = d + 1 < t->depth && t->f[d + 1].kind == F_LIT ? t->f[d + 1].bits : ~0ull;
                        for (int32_t j = 0; j < g->nodes[n->alt[k - 1]].n_lits && j < 64; j++)
                            if ((cand >> j & 1) && g->nodes[deref(g, n->sel[j])].minlen < best)
                                best = g->nodes[deref(g, n->sel[j])].minlen;
                        s = sat_add(s, best);
                        continue;
                    }
                    item = n->sel[f->b];
                }
                s = sat_add(s, g->nodes[deref(g, item)].minlen);
            }
            break;
        }
    }
    return s;
}

/* lower: a lower bound (an open pattern string counted as its quote only),
 * for pruning the completion search; otherwise the estimate the budget rule
 * uses, which keeps room for a whole pattern match. */
static size_t remaining(const nb_gmatch *m, bool lower) {
    if (m->g->mode == G_REGEX) return nb_gmatch_complete(m) ? 0 : 1;
    size_t best = INF_LEN;
    for (int32_t i = 0; i < m->n; i++) {
        size_t r = thread_complete(m->g, &m->t[i]) ? 0 : thread_remaining(m->g, &m->t[i], lower);
        if (r < best) best = r;
    }
    return best;
}

size_t nb_gmatch_min_remaining(const nb_gmatch *m) { return remaining(m, false); }

/* ---- the vocabulary trie and the mask ------------------------------------------------------- */

typedef struct tnode {
    int32_t first_child, next_sibling;
    int32_t tok_first; /* index into toks of the tokens ending here, -1 none */
    int32_t tok_n;
    uint8_t byte;
    bool special;      /* the subtree holds a token that is not plain string text */
    bool special_str;  /* ... that is neither plain nor utf8 (see nb_vtrie) */
} tnode;

struct nb_vtrie {
    tnode *nodes;
    int32_t n_nodes, cap;
    int32_t *toks; /* grouped by node */
    int32_t n_toks;
    int32_t max_depth;
    /* plain tokens: printable ASCII without '"' or '\\' - inside a free
     * string any of them fits, so the mask takes them in one pass */
    uint8_t *plain;   /* by token id: 0, or the token's length (1..255) */
    int32_t *plain_ids;
    int32_t n_plain;
    uint8_t *ctl;     /* nb_vtrie_create_special: by token id, 1 for a control token (markup only) */
    /* utf8 tokens: whole, valid UTF-8 characters, not all ASCII, without
     * control characters, '"' or '\\' - inside a free string any of them
     * fits too (keys are ASCII, so they are not plain) */
    uint8_t *u8;      /* by token id: 0, or the token's characters (1..255) */
    int32_t *u8_ids;
    int32_t n_u8;
};

static int32_t trie_child(nb_vtrie *v, int32_t parent, uint8_t b) {
    for (int32_t c = v->nodes[parent].first_child; c >= 0; c = v->nodes[c].next_sibling)
        if (v->nodes[c].byte == b) return c;
    if (v->n_nodes == v->cap) {
        int32_t cap = v->cap * 2;
        tnode *nn = realloc(v->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return -1;
        v->nodes = nn;
        v->cap = cap;
    }
    int32_t c = v->n_nodes++;
    v->nodes[c] = (tnode){.first_child = -1, .next_sibling = v->nodes[parent].first_child, .tok_first = -1, .byte = b};
    v->nodes[parent].first_child = c;
    return c;
}

/* Characters of a token that a free JSON string takes as they are: whole,
 * valid UTF-8 characters (step()'s rules: no overlong form, surrogate or
 * > U+10FFFF), at least one not ASCII, none a control character, '"' or
 * '\\'; 0 otherwise. */
static int string_chars(const uint8_t *p, size_t n) {
    int chars = 0;
    bool wide = false;
    for (size_t i = 0; i < n; chars++) {
        uint8_t c = p[i];
        if (c < 0x20 || c == '"' || c == '\\') return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        if ((c & 0xC0) == 0x80 || c == 0xC0 || c == 0xC1 || c > 0xF4 || n - i <= k) return 0;
        uint8_t c1 = p[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
            return 0;
        for (size_t j = 1; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return 0;
        wide = true;
        i += k + 1;
    }
    return wide ? chars : 0;
}

static nb_status vtrie_build(const nb_tokenizer *tk, bool with_control, nb_vtrie **out) {
    *out = NULL;
    nb_vtrie *v = calloc(1, sizeof *v);
    if (!v) return nb_fail(NB_ERR_NOMEM, "out of memory for the vocabulary trie");
    int32_t nv = nb_tokenizer_n_vocab(tk);
    v->cap = 1024;
    v->nodes = malloc((size_t)v->cap * sizeof *v->nodes);
    int32_t *end = malloc((size_t)nv * sizeof *end);
    v->toks = malloc((size_t)nv * sizeof *v->toks);
    if (!v->nodes || !end || !v->toks) {
        free(end);
        nb_vtrie_free(v);
        return nb_fail(NB_ERR_NOMEM, "out of memory for the vocabulary trie");
    }
    v->nodes[0] = (tnode){.first_child = -1, .next_sibling = -1, .tok_first = -1};
    v->n_nodes = 1;
    for (int32_t id = 0; id < nv; id++) {
        end[id] = -1;
        bool ctl = nb_tokenizer_is_control(tk, id);
        if (ctl && (!with_control || nb_tokenizer_is_eog(tk, id))) continue;
        size_t len;
        const char *p = nb_token_piece_ref(tk, id, ctl, &len);
        if (!p || !len) continue;
        int32_t at = 0;
        for (size_t i = 0; i < len && at >= 0; i++) at = trie_child(v, at, (uint8_t)p[i]);
        if (at < 0) {
            free(end);
            nb_vtrie_free(v);
            return nb_fail(NB_ERR_NOMEM, "out of memory for the vocabulary trie");
        }
        end[id] = at;
        if ((int32_t)len > v->max_depth) v->max_depth = (int32_t)len;
    }
    /* group token ids by their end node: count, then place */
    for (int32_t i = 0; i < v->n_nodes; i++) v->nodes[i].tok_n = 0;
    for (int32_t id = 0; id < nv; id++)
        if (end[id] >= 0) v->nodes[end[id]].tok_n++;
    int32_t at = 0;
    for (int32_t i = 0; i < v->n_nodes; i++) {
        v->nodes[i].tok_first = v->nodes[i].tok_n ? at : -1;
        at += v->nodes[i].tok_n;
        v->nodes[i].tok_n = 0;
    }
    for (int32_t id = 0; id < nv; id++)
        if (end[id] >= 0) {
            tnode *n = &v->nodes[end[id]];
            v->toks[n->tok_first + n->tok_n++] = id;
        }
    v->n_toks = at;
    /* plain tokens, and which subtrees hold anything else */
    v->plain = calloc((size_t)nv, 1);
    v->plain_ids = malloc((size_t)nv * sizeof *v->plain_ids);
    v->u8 = calloc((size_t)nv, 1);
    v->u8_ids = malloc((size_t)nv * sizeof *v->u8_ids);
    if (with_control && v->plain) v->ctl = calloc((size_t)nv, 1);
    if (!v->plain || !v->plain_ids || !v->u8 || !v->u8_ids || (with_control && !v->ctl)) {
        free(end);
        nb_vtrie_free(v);
        return nb_fail(NB_ERR_NOMEM, "out of memory for the vocabulary trie");
    }
    for (int32_t id = 0; id < nv; id++) {
        if (end[id] < 0) continue;
        size_t len;
        bool ctl = nb_tokenizer_is_control(tk, id);
        const char *p = nb_token_piece_ref(tk, id, ctl, &len);
        if (ctl) v->ctl[id] = 1;
        bool plain = len < 256 && !ctl;
        for (size_t i = 0; i < len && plain; i++)
            plain = (uint8_t)p[i] >= 0x20 && (uint8_t)p[i] < 0x7f && p[i] != '"' && p[i] != '\\';
        if (plain) {
            v->plain[id] = (uint8_t)len;
            v->plain_ids[v->n_plain++] = id;
        } else if (!ctl) {
            int chars = string_chars((const uint8_t *)p, len);
            if (chars > 0 && chars < 256) {
                v->u8[id] = (uint8_t)chars;
                v->u8_ids[v->n_u8++] = id;
            }
        }
    }
    /* children are created after their parents: mark bottom-up in reverse creation order */
    for (int32_t i = v->n_nodes - 1; i >= 0; i--) {
        tnode *n = &v->nodes[i];
        for (int32_t k = 0; k < n->tok_n; k++) {
            int32_t id = v->toks[n->tok_first + k];
            n->special |= !v->plain[id];
            n->special_str |= !v->plain[id] && !v->u8[id];
        }
        for (int32_t c = n->first_child; c >= 0; c = v->nodes[c].next_sibling) {
            n->special |= v->nodes[c].special;
            n->special_str |= v->nodes[c].special_str;
        }
    }
    free(end);
    *out = v;
    return NB_OK;
}

nb_status nb_vtrie_create(const nb_tokenizer *tk, nb_vtrie **out) { return vtrie_build(tk, false, out); }

nb_status nb_vtrie_create_special(const nb_tokenizer *tk, nb_vtrie **out) { return vtrie_build(tk, true, out); }

void nb_vtrie_free(nb_vtrie *v) {
    if (!v) return;
    free(v->ctl);
    free(v->u8);
    free(v->u8_ids);
    free(v->plain);
    free(v->plain_ids);
    free(v->nodes);
    free(v->toks);
    free(v);
}

typedef struct mask_ctx {
    const nb_vtrie *v;
    uint8_t *allowed;
    int32_t count;
    size_t budget_bytes; /* completion must fit in this many more tokens (one byte each at worst) */
    nb_gmatch *stack;    /* one matcher per trie depth */
    char *path;          /* regex mode: committed output + the trie path */
    size_t base_len;
    const nb_gmatch *root;
    bool plain_done; /* plain tokens were decided in one pass: the walk skips them */
    bool str_done;   /* ... and the utf8 ones too */
    bool full_walk;  /* nb_grammar_mask_walk: no one-pass shortcuts */
    bool markup;     /* the output is in a literal of a tagged grammar: control tokens may start here */
} mask_ctx;

static void mark(mask_ctx *c, const tnode *n) {
    for (int32_t k = 0; k < n->tok_n; k++) {
        int32_t id = c->v->toks[n->tok_first + k];
        if (c->plain_done && c->v->plain[id]) continue;
        if (c->str_done && c->v->u8[id]) continue;
        if (c->v->ctl && c->v->ctl[id] && !c->markup) continue;
        if (!c->allowed[id]) c->count++;
        c->allowed[id] = 1;
    }
}

/* Inside a string without a pattern, every plain token is allowed as long as
 * maxLength and the budget leave room for its characters: decided in one
 * pass over the plain tokens instead of walking their part of the trie. */
static bool plain_pass(mask_ctx *c, const nb_gmatch *m) {
    if (m->g->mode != G_JSON || m->n != 1 || m->t[0].depth == 0) return false;
    const thread *t = &m->t[0];
    const frame *f = &t->f[t->depth - 1];
    const node *n = &m->g->nodes[f->node];
    if (f->kind == F_OBJ && f->sub == O_KEY && f->cand == 0 && n->additional >= 0) {
        /* a key none of the properties start with: any plain text continues it */
        size_t rem = nb_gmatch_min_remaining(m);
        if (rem > c->budget_bytes) return false;
        for (int32_t i = 0; i < c->v->n_plain; i++) c->allowed[c->v->plain_ids[i]] = 1;
        c->count += c->v->n_plain;
        c->plain_done = true;
        return true;
    }
    if (f->kind != F_STR || f->sub != S_NORMAL || f->utf8) return false;
    if (n->pattern) return false;
    size_t rem = nb_gmatch_min_remaining(m);
    size_t need = f->a < n->min_len ? (size_t)(n->min_len - f->a) : 0;
    for (int32_t i = 0; i < c->v->n_plain; i++) {
        int32_t id = c->v->plain_ids[i];
        size_t len = c->v->plain[id];
        if ((int64_t)f->a + (int64_t)len > n->max_len) continue;
        size_t after = rem - (len < need ? len : need);
        if (after > c->budget_bytes) continue;
        c->allowed[id] = 1;
        c->count++;
    }
    for (int32_t i = 0; i < c->v->n_u8; i++) { /* the same rule, counted in characters */
        int32_t id = c->v->u8_ids[i];
        size_t len = c->v->u8[id];
        if ((int64_t)f->a + (int64_t)len > n->max_len) continue;
        size_t after = rem - (len < need ? len : need);
        if (after > c->budget_bytes) continue;
        c->allowed[id] = 1;
        c->count++;
    }
    c->plain_done = c->str_done = true;
    return true;
}

static void dfs_json(mask_ctx *c, int32_t ni, int32_t depth) {
    const nb_vtrie *v = c->v;
    for (int32_t ch = v->nodes[ni].first_child; ch >= 0; ch = v->nodes[ch].next_sibling) {
        if (c->str_done ? !v->nodes[ch].special_str : c->plain_done && !v->nodes[ch].special) continue;
        nb_gmatch *m = &c->stack[depth + 1];
        copy_match(m, &c->stack[depth]);
        m->md = c->stack[0].md;
        if (!feed_byte(m, v->nodes[ch].byte)) continue;
        if (v->nodes[ch].tok_n && nb_gmatch_min_remaining(m) <= c->budget_bytes) mark(c, &v->nodes[ch]);
        if (v->nodes[ch].first_child >= 0 && !nb_gmatch_closed(m)) dfs_json(c, ch, depth + 1);
    }
}

static void dfs_regex(mask_ctx *c, int32_t ni, size_t len) {
    const nb_vtrie *v = c->v;
    for (int32_t ch = v->nodes[ni].first_child; ch >= 0; ch = v->nodes[ch].next_sibling) {
        c->path[len] = (char)v->nodes[ch].byte;
        if (re_check(c->root->g->regex, c->root->md, c->path, len + 1) == 0) continue;
        if (v->nodes[ch].tok_n) mark(c, &v->nodes[ch]);
        if (v->nodes[ch].first_child >= 0) dfs_regex(c, ch, len + 1);
    }
}

/* Depth-first search for a completion of at most `room` bytes (printable
 * ASCII, space and newline), trying at each step the bytes whose state needs the
 * least, within `*nodes` expansions. */
/* The completion templates of a format string open in one of the parses, or NULL. */
static const char *const *open_format(const nb_gmatch *m) {
    for (int32_t i = 0; i < m->n; i++) {
        const thread *t = &m->t[i];
        if (t->depth > 0 && t->f[t->depth - 1].kind == F_STR && m->g->nodes[t->f[t->depth - 1].node].finish)
            return m->g->nodes[t->f[t->depth - 1].node].finish;
    }
    return NULL;
}

static bool search(nb_gmatch *stack, int32_t depth, size_t room, char *out, int32_t *nodes) {
    nb_gmatch *m = &stack[depth];
    if (nb_gmatch_complete(m)) return true;
    if (depth >= (int32_t)room || --*nodes <= 0) return false;
    /* an open format string: closed when it can be, else finished by the
     * suffixes of its templates (formats[]); a byte-by-byte search would
     * wander through its free parts (an e-mail's local part) */
    const char *const *fin = open_format(m);
    if (fin) {
        nb_gmatch *q = &stack[room + 1]; /* scratch: no level's state lives there (depth < room) */
        copy_match(q, m);
        q->md = m->md;
        q->forced = NULL;
        if (feed_byte(q, '"')) {
            copy_match(&stack[depth + 1], q);
            stack[depth + 1].md = m->md;
            stack[depth + 1].forced = NULL;
            out[depth] = '"';
            return search(stack, depth + 1, room, out, nodes);
        }
        for (; *fin; fin++) /* each template's suffixes, the shortest first, that let the string close */
            for (size_t n = 1; n <= strlen(*fin) && (size_t)depth + n < room; n++) {
                const char *suf = *fin + strlen(*fin) - n;
                nb_gmatch *u = &stack[depth + n];
                copy_match(u, m);
                u->md = m->md;
                u->forced = NULL;
                bool ok = true;
                for (size_t i = 0; i < n && ok; i++) ok = feed_byte(u, (uint8_t)suf[i]);
                copy_match(q, u);
                q->md = m->md;
                if (!ok || !feed_byte(q, '"')) continue;
                memcpy(out + depth, suf, n);
                if (search(stack, depth + (int32_t)n, room, out, nodes)) return true;
            }
        return false;
    }
    uint8_t order[96];
    size_t est[96];
    int k = 0;
    nb_gmatch *t = &stack[depth + 1];
    /* printable ASCII, and the space / newline a literal (a tool call's markup) may hold; whitespace is
     * tried last among equals as it never brings the end closer */
    for (int ci = 0x21; ci < 0x81; ci++) {
        int c = ci == 0x7f ? ' ' : ci == 0x80 ? '\n' : ci;
        copy_match(t, m);
        t->md = m->md;
        t->forced = NULL;
        if (!feed_byte(t, (uint8_t)c)) continue;
        size_t r = remaining(t, true);
        if ((size_t)depth + 1 + r > room) continue;
        int j = k++;
        while (j > 0 && est[j - 1] > r) order[j] = order[j - 1], est[j] = est[j - 1], j--;
        order[j] = (uint8_t)c, est[j] = r;
    }
    for (int i = 0; i < k; i++) {
        copy_match(t, m);
        t->md = m->md;
        if (!feed_byte(t, order[i])) continue;
        out[depth] = (char)order[i];
        if (search(stack, depth + 1, room, out, nodes)) return true;
    }
    return false;
}

/* Finds and keeps a completion that fits `room` bytes (JSON mode). */
static bool force_completion(nb_gmatch *m, size_t room) {
    if (m->forced) return true;
    if (room > 4096) room = 4096;
    nb_gmatch *stack = malloc((room + 2) * sizeof *stack);
    char *out = malloc(room + 1);
    bool ok = false;
    if (stack && out) {
        copy_match(&stack[0], m);
        stack[0].md = m->md;
        int32_t nodes = 4000; /* expansions in all (each tries 94 bytes) */
        for (size_t d = 0; d <= room; d++) stack[d].forced = NULL;
        /* the shortest first: iterative deepening over the room */
        for (size_t r = remaining(m, true); r <= room && !ok && nodes > 0; r = r == room ? room + 1 : NB_MIN(room, r + 1 + r / 2)) {
            ok = search(stack, 0, r, out, &nodes);
            if (ok) {
                size_t len = 0;
                nb_gmatch *chk = &stack[1];
                copy_match(chk, m);
                chk->md = m->md;
                while (!nb_gmatch_complete(chk) && len < r) feed_byte(chk, (uint8_t)out[len++]);
                m->forced = out;
                m->forced_len = len;
                m->forced_pos = 0;
                out = NULL;
            }
        }
    }
    free(stack);
    free(out);
    return ok;
}

/* the completion's next bytes, as tokens: walk the trie along them */
static int32_t mark_forced(mask_ctx *c, const nb_gmatch *m) {
    const nb_vtrie *v = c->v;
    int32_t at = 0;
    for (size_t i = m->forced_pos; i < m->forced_len; i++) {
        int32_t ch = v->nodes[at].first_child;
        while (ch >= 0 && v->nodes[ch].byte != (uint8_t)m->forced[i]) ch = v->nodes[ch].next_sibling;
        if (ch < 0) break;
        mark(c, &v->nodes[ch]);
        at = ch;
    }
    return c->count;
}

/* When the room left is this close to what the document still needs, the
 * mask follows a completion found by search instead of the estimate. */
#define FORCE_MARGIN 16

static int32_t grammar_mask(const nb_vtrie *v, nb_gmatch *m, int32_t budget, const int32_t *eog, size_t n_eog,
                            uint8_t *allowed, int32_t n_vocab, bool full_walk) {
    memset(allowed, 0, (size_t)n_vocab);
    mask_ctx c = {.v = v, .allowed = allowed, .root = m, .full_walk = full_walk};
    c.markup = v->ctl && m->g->mode == G_JSON && m->n > 0;
    for (int32_t i = 0; i < m->n && c.markup; i++) /* each parse is inside a raw literal of the sequence */
        c.markup = m->t[i].depth >= 2 && m->t[i].f[m->t[i].depth - 2].kind == F_SEQ &&
                   m->t[i].f[m->t[i].depth - 1].kind == F_LIT;
    c.budget_bytes = budget > 1 ? (size_t)(budget - 1) : 0;
    bool complete = nb_gmatch_complete(m);
    if (m->g->mode == G_JSON && !nb_gmatch_closed(m) && !complete &&
        nb_gmatch_min_remaining(m) + FORCE_MARGIN >= (size_t)budget && budget > 0 &&
        force_completion(m, (size_t)budget)) {
        mark_forced(&c, m);
    } else if (!nb_gmatch_closed(m)) {
        if (m->g->mode == G_REGEX) {
            c.path = malloc(m->out_len + (size_t)v->max_depth + 1);
            if (c.path) {
                if (m->out_len) memcpy(c.path, m->out, m->out_len);
                dfs_regex(&c, 0, m->out_len);
                free(c.path);
            }
        } else {
            c.stack = malloc((size_t)(v->max_depth + 2) * sizeof *c.stack);
            if (!c.full_walk) plain_pass(&c, m);
            if (c.stack) {
                copy_match(&c.stack[0], m);
                c.stack[0].md = m->md;
                dfs_json(&c, 0, 0);
                free(c.stack);
            }
        }
    }
    if (complete)
        for (size_t i = 0; i < n_eog; i++)
            if (eog[i] >= 0 && eog[i] < n_vocab && !allowed[eog[i]]) allowed[eog[i]] = 1, c.count++;
    return c.count;
}

int32_t nb_grammar_mask(const nb_vtrie *v, nb_gmatch *m, int32_t budget, const int32_t *eog, size_t n_eog,
                        uint8_t *allowed, int32_t n_vocab) {
    return grammar_mask(v, m, budget, eog, n_eog, allowed, n_vocab, false);
}

int32_t nb_grammar_mask_walk(const nb_vtrie *v, nb_gmatch *m, int32_t budget, const int32_t *eog, size_t n_eog,
                             uint8_t *allowed, int32_t n_vocab) {
    return grammar_mask(v, m, budget, eog, n_eog, allowed, n_vocab, true);
}
