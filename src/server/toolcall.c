/* Tool calls: request validation, the call grammar, the output parser; see
 * toolcall.h and docs/serve.md "Tools". */
#include "server/toolcall.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "engine/grammar.h"
#include "server/openai.h"
#include "tokenizer/tokenizer.h"

#define INVALID "invalid_request_error"

/* ---- the request -------------------------------------------------------------- */

/* a 400 naming param; fmt takes param then one more string */
#define bad(e, param, fmt, detail) (nb_oai_error_set(e, 400, INVALID, param, "invalid_value", fmt, param, detail), false)

static bool valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > NB_TOOL_NAME_MAX) return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            return false;
    return true;
}

static const char *tool_name(const json_t *tools, size_t i) {
    return json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
}

static bool declared(const nb_tool_request *t, const char *name) {
    if (t->choice == NB_TOOL_CHOICE_NAMED) return !strcmp(name, t->name);
    for (size_t i = 0; i < t->n_tools; i++)
        if (!strcmp(tool_name(t->tools, i), name)) return true;
    return false;
}

bool nb_tool_request_parse(const void *root_, nb_tool_request *out, nb_oai_error *e) {
    const json_t *root = root_;
    memset(out, 0, sizeof *out);
    out->parallel = true;
    char p[128];
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return bad(e, "tools", "'%s' must be an array of tool objects%s", "");
        if (json_array_size(tools) > NB_TOOLS_MAX) {
            nb_oai_error_set(e, 400, INVALID, "tools", "invalid_value", "'tools' has %zu entries, at most %d allowed",
                             json_array_size(tools), NB_TOOLS_MAX);
            return false;
        }
        size_t i;
        json_t *x;
        json_array_foreach(tools, i, x) {
            snprintf(p, sizeof p, "tools[%zu]", i);
            json_t *type = json_object_get(x, "type"), *fn = json_object_get(x, "function");
            if (!json_is_object(x) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
                return bad(e, p, "'%s' must be {\"type\": \"function\", \"function\": {...}}%s", "");
            snprintf(p, sizeof p, "tools[%zu].function", i);
            if (!json_is_object(fn)) return bad(e, p, "'%s' must be an object {\"name\", \"description\", \"parameters\"}%s", "");
            snprintf(p, sizeof p, "tools[%zu].function.name", i);
            json_t *name = json_object_get(fn, "name");
            if (!json_is_string(name) || !valid_name(json_string_value(name)))
                return bad(e, p, "'%s' must be 1..64 characters of a-z, A-Z, 0-9, _ and -%s", "");
            for (size_t k = 0; k < i; k++)
                if (!strcmp(tool_name(tools, k), json_string_value(name)))
                    return bad(e, p, "'%s': the function '%s' is declared twice", json_string_value(name));
            json_t *d = json_object_get(fn, "description");
            snprintf(p, sizeof p, "tools[%zu].function.description", i);
            if (d && !json_is_null(d) && !json_is_string(d)) return bad(e, p, "'%s' must be a string%s", "");
            json_t *ps = json_object_get(fn, "parameters");
            snprintf(p, sizeof p, "tools[%zu].function.parameters", i);
            if (ps && !json_is_null(ps) && !json_is_object(ps)) return bad(e, p, "'%s' must be a JSON Schema object%s", "");
        }
        out->tools = tools;
        out->n_tools = json_array_size(tools);
    }
    json_t *pc = json_object_get(root, "parallel_tool_calls");
    if (pc && !json_is_null(pc)) {
        if (!json_is_boolean(pc)) return bad(e, "parallel_tool_calls", "'%s' must be a boolean%s", "");
        out->parallel = json_is_true(pc);
    }
    out->choice = out->n_tools ? NB_TOOL_CHOICE_AUTO : NB_TOOL_CHOICE_NONE;
    json_t *tc = json_object_get(root, "tool_choice");
    if (!tc || json_is_null(tc)) return true;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (!strcmp(s, "none")) out->choice = NB_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) out->choice = out->n_tools ? NB_TOOL_CHOICE_AUTO : NB_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "required")) out->choice = NB_TOOL_CHOICE_REQUIRED;
        else return bad(e, "tool_choice", "'%s' is '%.64s'; allowed: \"none\", \"auto\", \"required\" or "
                        "{\"type\": \"function\", \"function\": {\"name\": ...}}", s);
    } else {
        json_t *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_object(tc) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
            !json_is_string(name))
            return bad(e, "tool_choice", "'%s' must be \"none\", \"auto\", \"required\" or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}%s", "");
        out->choice = NB_TOOL_CHOICE_NAMED;
        out->name = json_string_value(name);
        bool found = false;
        for (size_t i = 0; i < out->n_tools && !found; i++) found = !strcmp(tool_name(out->tools, i), out->name);
        if (!found && out->n_tools)
            return bad(e, "tool_choice.function.name", "'%s': the function '%.64s' is not among the request's tools",
                       out->name);
    }
    if (out->choice >= NB_TOOL_CHOICE_REQUIRED && !out->n_tools)
        return bad(e, "tool_choice", "'%s' %s needs a non-empty 'tools' list",
                   out->choice == NB_TOOL_CHOICE_REQUIRED ? "\"required\"" : "naming a function");
    return true;
}

const void *nb_tool_template_tools(const nb_tool_request *t) {
    return t->choice == NB_TOOL_CHOICE_NONE ? NULL : t->tools;
}

/* ---- formats ------------------------------------------------------------------- */

nb_tool_format nb_tool_format_detect(const char *tt) {
    if (!tt) return NB_TOOLS_GENERIC;
    if (strstr(tt, "<tool_call>")) return NB_TOOLS_HERMES;
    if (strstr(tt, "[TOOL_CALLS]")) return strstr(tt, "[ARGS]") ? NB_TOOLS_MISTRAL11 : NB_TOOLS_MISTRAL;
    if (strstr(tt, "<|python_tag|>") || (strstr(tt, "<|start_header_id|>") && strstr(tt, "ipython")))
        return NB_TOOLS_LLAMA3;
    return NB_TOOLS_GENERIC;
}

const char *nb_tool_format_name(nb_tool_format f) {
    static const char *const names[] = {"generic", "llama3", "hermes", "mistral", "mistral11"};
    return (unsigned)f < 5 ? names[f] : "?";
}

static const char *marker(nb_tool_format f) {
    switch (f) {
    case NB_TOOLS_HERMES: return "<tool_call>";
    case NB_TOOLS_MISTRAL:
    case NB_TOOLS_MISTRAL11: return "[TOOL_CALLS]";
    case NB_TOOLS_LLAMA3: return "<|python_tag|>";
    default: return NULL;
    }
}

bool nb_tool_markers_special(nb_tool_format f, const nb_tokenizer *tok) {
    static const char *const m[][3] = {{NULL}, {"<|python_tag|>"}, {"<tool_call>", "</tool_call>"},
                                        {"[TOOL_CALLS]"}, {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}};
    if (!tok || (unsigned)f > NB_TOOLS_MISTRAL11) return false;
    for (int i = 0; i < 3 && m[f][i]; i++) {
        int32_t id = nb_tokenizer_find(tok, m[f][i], strlen(m[f][i]));
        if (id >= 0 && nb_tokenizer_is_control(tok, id)) return true;
    }
    return false;
}

/* ---- the constraint ------------------------------------------------------------ */

bool nb_tool_grammar(const nb_tool_request *t, nb_tool_format f, nb_grammar **out, nb_oai_error *e) {
    *out = NULL;
    if (t->choice != NB_TOOL_CHOICE_REQUIRED && t->choice != NB_TOOL_CHOICE_NAMED) return true;
    if (t->choice == NB_TOOL_CHOICE_REQUIRED && t->n_tools > NB_TOOLS_MAX_CONSTRAINED) {
        nb_oai_error_set(e, 400, INVALID, "tools", "invalid_value",
                         "'tools' has %zu functions; tool_choice \"required\" can choose among at most %d",
                         t->n_tools, NB_TOOLS_MAX_CONSTRAINED);
        return false;
    }
    static const char *const pre_a[] = {"{\"name\": \"", "{\"name\": \"", "<tool_call>\n{\"name\": \"",
                                        "[TOOL_CALLS][{\"name\": \"", "[TOOL_CALLS]"};
    static const char *const pre_b[] = {"\", \"arguments\": ", "\", \"parameters\": ", "\", \"arguments\": ",
                                        "\", \"arguments\": ", "[ARGS]"};
    static const char *const suffix[] = {"}", "}", "}\n</tool_call>", "}]", ""};
    char *pre[NB_TOOLS_MAX_CONSTRAINED] = {0}, *sch[NB_TOOLS_MAX_CONSTRAINED] = {0};
    size_t idx[NB_TOOLS_MAX_CONSTRAINED], n = 0;
    bool ok = true;
    for (size_t i = 0; i < t->n_tools && ok; i++) {
        const char *name = tool_name(t->tools, i);
        if (t->choice == NB_TOOL_CHOICE_NAMED && strcmp(name, t->name) != 0) continue;
        json_t *ps = json_object_get(json_object_get(json_array_get(t->tools, i), "function"), "parameters");
        sch[n] = ps && json_is_object(ps) ? json_dumps(ps, JSON_COMPACT)
                                           : strdup("{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}");
        size_t pl = strlen(pre_a[f]) + strlen(name) + strlen(pre_b[f]) + 1;
        pre[n] = malloc(pl);
        if (pre[n]) snprintf(pre[n], pl, "%s%s%s", pre_a[f], name, pre_b[f]);
        idx[n] = i;
        if (!pre[n] || !sch[n]) {
            nb_oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            ok = false;
        }
        n++;
        nb_grammar *one = NULL;
        if (ok && nb_grammar_tagged((const char *const *)&pre[n - 1], (const char *const *)&sch[n - 1], 1, suffix[f],
                                    &one) != NB_OK) {
            char p[96];
            snprintf(p, sizeof p, "tools[%zu].function.parameters", idx[n - 1]);
            nb_oai_error_set(e, 400, INVALID, p, "unsupported_schema",
                             "%s: tool_choice %s constrains the call to this schema, and %s", p,
                             t->choice == NB_TOOL_CHOICE_NAMED ? "naming this function" : "\"required\"", nb_errmsg());
            ok = false;
        }
        nb_grammar_free(one);
    }
    if (ok && nb_grammar_tagged((const char *const *)pre, (const char *const *)sch, n, suffix[f], out) != NB_OK) {
        nb_oai_error_set(e, 400, INVALID, "tools", "unsupported_schema", "tools: %s", nb_errmsg());
        ok = false;
    }
    for (size_t i = 0; i < n; i++) {
        free(pre[i]);
        free(sch[i]);
    }
    return ok;
}

/* ---- the parser ---------------------------------------------------------------- */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static bool starts(const char *s, size_t n, size_t i, const char *lit) {
    size_t l = strlen(lit);
    return i <= n && n - i >= l && !memcmp(s + i, lit, l);
}

/* End of the JSON value starting at s[i] (structure only: jansson validates
 * it afterwards); (size_t)-1 if it does not end within n. */
#define NO_END ((size_t)-1)
static size_t value_end(const char *s, size_t n, size_t i) {
    int depth = 0;
    if (i >= n) return NO_END;
    if (s[i] != '{' && s[i] != '[' && s[i] != '"') { /* number or literal */
        while (i < n && (s[i] == '-' || s[i] == '+' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
                         (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
            i++;
        return i;
    }
    for (; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            if (i >= n) return NO_END;
            if (depth == 0) return i + 1;
        } else if (c == '{' || c == '[') {
            if (++depth > 64) return NO_END;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return NO_END;
        }
    }
    return NO_END;
}

/* JSON text without the whitespace outside strings. */
static char *minify(const char *s, size_t n) {
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            o[k++] = c;
            if (c == '\\' && i + 1 < n) o[k++] = s[++i];
            else if (c == '"') in_str = false;
        } else if (!is_ws(c)) {
            o[k++] = c;
            if (c == '"') in_str = true;
        }
    }
    o[k] = '\0';
    return o;
}

typedef struct call_list {
    nb_tool_call *v;
    size_t n, cap;
} call_list;

static void call_id(char *id) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[24];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)id ^ (uint64_t)clock();
        for (size_t i = 0; i < sizeof r; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            r[i] = (unsigned char)x;
        }
    }
    memcpy(id, "call_", 5);
    for (size_t i = 0; i < sizeof r; i++) id[5 + i] = al[r[i] % (sizeof al - 1)];
    id[5 + sizeof r] = '\0';
}

static bool add_call(call_list *c, const char *name, size_t name_len, char *args) {
    if (!args) return false;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4;
        nb_tool_call *v = realloc(c->v, cap * sizeof *v);
        if (!v) { free(args); return false; }
        c->v = v;
        c->cap = cap;
    }
    nb_tool_call *k = &c->v[c->n];
    k->name = malloc(name_len + 1);
    if (!k->name) { free(args); return false; }
    memcpy(k->name, name, name_len);
    k->name[name_len] = '\0';
    k->arguments = args;
    call_id(k->id);
    c->n++;
    return true;
}

/* Arguments from their raw JSON text: an object, or a string holding one. */
static char *arguments_text(const char *raw, size_t n) {
    json_t *v = json_loadb(raw, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!v) return NULL;
    char *out = NULL;
    if (json_is_object(v)) {
        out = minify(raw, n);
    } else if (json_is_string(v)) {
        json_t *inner = json_loadb(json_string_value(v), json_string_length(v), JSON_REJECT_DUPLICATES, NULL);
        if (inner && json_is_object(inner)) out = minify(json_string_value(v), json_string_length(v));
        json_decref(inner);
    }
    json_decref(v);
    return out;
}

/* One call object {"name": N, "arguments" | "parameters": A} spanning s[i..end). */
static bool call_object(const nb_tool_request *t, const char *s, size_t i, size_t end, call_list *c) {
    json_t *o = json_loadb(s + i, end - i, JSON_REJECT_DUPLICATES, NULL);
    bool ok = o && json_is_object(o) && json_is_string(json_object_get(o, "name"));
    ok = ok && !(json_object_get(o, "arguments") && json_object_get(o, "parameters"));
    const char *name = ok ? json_string_value(json_object_get(o, "name")) : NULL;
    ok = ok && declared(t, name);
    if (ok && !json_object_get(o, "arguments") && !json_object_get(o, "parameters")) {
        ok = add_call(c, name, strlen(name), strdup("{}"));
    } else if (ok) {
        /* the raw text of the arguments member: walk the members */
        ok = false;
        size_t k = skip_ws(s, end, i + 1);
        while (k < end && s[k] == '"') {
            size_t ke = value_end(s, end, k);
            if (ke == NO_END) break;
            bool is_args = (ke - k == 11 && !memcmp(s + k, "\"arguments\"", 11)) ||
                           (ke - k == 12 && !memcmp(s + k, "\"parameters\"", 12));
            k = skip_ws(s, end, ke);
            if (k >= end || s[k] != ':') break;
            k = skip_ws(s, end, k + 1);
            size_t ve = value_end(s, end, k);
            if (ve == NO_END) break;
            if (is_args) {
                ok = add_call(c, name, strlen(name), arguments_text(s + k, ve - k));
                break;
            }
            k = skip_ws(s, end, ve);
            if (k < end && s[k] == ',') k = skip_ws(s, end, k + 1);
        }
    }
    json_decref(o);
    return ok;
}

/* Objects separated by whitespace or ';' (Llama 3), or one array of them,
 * up to n. Returns false unless all of s[i..n) is calls. */
static bool bare_calls(const nb_tool_request *t, const char *s, size_t n, size_t i, call_list *c) {
    i = skip_ws(s, n, i);
    if (i < n && s[i] == '[') {
        size_t k = skip_ws(s, n, i + 1);
        for (;;) {
            size_t e = value_end(s, n, k);
            if (k >= n || s[k] != '{' || e == NO_END || !call_object(t, s, k, e, c)) return false;
            k = skip_ws(s, n, e);
            if (k < n && s[k] == ',') { k = skip_ws(s, n, k + 1); continue; }
            if (k < n && s[k] == ']') break;
            return false;
        }
        return skip_ws(s, n, k + 1) == n && c->n > 0;
    }
    while (i < n) {
        size_t e = value_end(s, n, i);
        if (s[i] != '{' || e == NO_END || !call_object(t, s, i, e, c)) return false;
        i = skip_ws(s, n, e);
        if (i < n && s[i] == ';') i = skip_ws(s, n, i + 1);
    }
    return c->n > 0;
}

static size_t find(const char *s, size_t n, size_t from, const char *lit) {
    for (size_t i = from; i < n; i++)
        if (starts(s, n, i, lit)) return i;
    return NO_END;
}

/* Everything from s[i] (the first marker) on is calls in format f. */
static bool marked_calls(const nb_tool_request *t, nb_tool_format f, const char *s, size_t n, size_t i, call_list *c) {
    const char *m = marker(f);
    size_t ml = strlen(m);
    if (f == NB_TOOLS_LLAMA3) return bare_calls(t, s, n, i + ml, c);
    if (f == NB_TOOLS_HERMES) {
        while ((i = skip_ws(s, n, i)) < n) {
            if (!starts(s, n, i, m)) return false;
            size_t close = find(s, n, i + ml, "</tool_call>");
            size_t body_end = close == NO_END ? n : close;
            size_t b = skip_ws(s, body_end, i + ml), e = value_end(s, body_end, b);
            if (b >= body_end || s[b] != '{' || e == NO_END || skip_ws(s, body_end, e) != body_end ||
                !call_object(t, s, b, e, c))
                return false;
            i = close == NO_END ? n : close + strlen("</tool_call>");
        }
        return c->n > 0;
    }
    /* Mistral: [TOOL_CALLS] then an array (or object) of calls, or (v11) NAME [CALL_ID]ID [ARGS]{...} */
    while ((i = skip_ws(s, n, i)) < n) {
        if (!starts(s, n, i, m)) return false;
        i = skip_ws(s, n, i + ml);
        size_t next = find(s, n, i, m), end = next == NO_END ? n : next;
        if (i < end && (s[i] == '[' || s[i] == '{')) {
            if (!bare_calls(t, s, end, i, c)) return false;
        } else {
            size_t a = find(s, end, i, "[ARGS]"), idp = find(s, end, i, "[CALL_ID]");
            size_t name_end = idp != NO_END && (a == NO_END || idp < a) ? idp : a;
            if (a == NO_END || name_end - i == 0 || name_end - i > NB_TOOL_NAME_MAX) return false;
            char name[NB_TOOL_NAME_MAX + 1];
            memcpy(name, s + i, name_end - i);
            name[name_end - i] = '\0';
            size_t b = skip_ws(s, end, a + 6), e = value_end(s, end, b);
            if (!declared(t, name) || b >= end || s[b] != '{' || e == NO_END || skip_ws(s, end, e) != end ||
                !add_call(c, name, strlen(name), arguments_text(s + b, e - b)))
                return false;
        }
        i = end;
    }
    return c->n > 0;
}

static void free_calls(call_list *c) {
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].arguments);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}

nb_status nb_tool_parse(const nb_tool_request *t, nb_tool_format f, const char *text, size_t len, nb_tool_result *out) {
    memset(out, 0, sizeof *out);
    call_list c = {0};
    size_t content_len = len;
    if (t->choice != NB_TOOL_CHOICE_NONE && t->n_tools) {
        const char *m = marker(f);
        size_t at = m ? find(text, len, 0, m) : NO_END;
        size_t first = skip_ws(text, len, 0);
        bool found = false;
        if (at != NO_END) {
            found = marked_calls(t, f, text, len, at, &c);
            if (found) content_len = skip_ws(text, at, 0) == at ? 0 : at;
        } else if (first < len && (text[first] == '{' || text[first] == '[')) {
            found = bare_calls(t, text, len, first, &c);
            if (found) content_len = 0;
        }
        if (!found) free_calls(&c);
    }
    if (c.n > 1 && !t->parallel) { /* parallel_tool_calls false: the first call only */
        for (size_t i = 1; i < c.n; i++) {
            free(c.v[i].name);
            free(c.v[i].arguments);
        }
        c.n = 1;
    }
    if (c.n == 0 || content_len) {
        out->content = malloc(content_len + 1);
        if (!out->content) {
            free_calls(&c);
            return nb_fail(NB_ERR_NOMEM, "out of memory parsing tool calls");
        }
        memcpy(out->content, text, content_len);
        out->content[content_len] = '\0';
        out->content_len = content_len;
    }
    out->calls = c.v;
    out->n_calls = c.n;
    return NB_OK;
}

void nb_tool_result_free(nb_tool_result *r) {
    if (!r) return;
    call_list c = {r->calls, r->n_calls, r->n_calls};
    free_calls(&c);
    free(r->content);
    memset(r, 0, sizeof *r);
}

size_t nb_tool_stream_safe(nb_tool_format f, const char *text, size_t len) {
    size_t first = skip_ws(text, len, 0);
    if (first == len || text[first] == '{' || text[first] == '[') return 0; /* may still become calls */
    const char *m = marker(f);
    if (!m) return len;
    size_t ml = strlen(m), at = find(text, len, first, m);
    if (at != NO_END) return at == first ? 0 : at;
    /* hold back a tail that may be the start of the marker */
    for (size_t k = ml - 1; k > 0; k--)
        if (len >= k && !memcmp(text + len - k, m, k)) return len - k > first ? len - k : 0;
    return len;
}

/* ---- streamed calls: where the calls of an unfinished output are --------------------
 * The same grammar as the parser above, read on a prefix: a call is located
 * once its name is whole (and declared); its arguments stream from their
 * opening '{' when that comes after the name (else they wait for the end),
 * and end with the object (JSON structure: depth outside strings). */

#define STREAM_CALLS_MAX 64

typedef struct call_loc {
    size_t name_at, name_len;
    size_t args_at;  /* the arguments object's '{', NO_END: not streamable (yet) */
    size_t args_end; /* one past its '}', NO_END: not written yet */
} call_loc;

typedef struct loc_list {
    call_loc v[STREAM_CALLS_MAX];
    size_t n;
    const nb_tool_request *t;
} loc_list;

/* A call object from s[i] ('{'); adds it once its name is known. Returns
 * one past its end, NO_END when it does not end (or is not a call) within n. */
static size_t loc_object(loc_list *l, const char *s, size_t n, size_t i) {
    call_loc *c = NULL; /* this object's call once its name is read */
    size_t k = skip_ws(s, n, i + 1);
    for (;;) {
        if (k >= n) return NO_END;
        if (s[k] == '}') return c ? k + 1 : NO_END;
        if (s[k] != '"') return NO_END;
        size_t ke = value_end(s, n, k);
        if (ke == NO_END) return NO_END;
        bool is_args = (ke - k == 11 && !memcmp(s + k, "\"arguments\"", 11)) ||
                       (ke - k == 12 && !memcmp(s + k, "\"parameters\"", 12));
        bool is_name = ke - k == 6 && !memcmp(s + k, "\"name\"", 6);
        k = skip_ws(s, n, ke);
        if (k >= n || s[k] != ':') return NO_END;
        k = skip_ws(s, n, k + 1);
        if (k >= n) return NO_END;
        size_t ve = value_end(s, n, k);
        if (is_args && c && s[k] == '{' && c->args_at == NO_END) {
            c->args_at = k;
            c->args_end = ve;
        }
        if (ve == NO_END || ve >= n) return NO_END; /* a number or literal may go on */
        if (is_name && !c) {
            size_t nl = ve - k - 2;
            if (s[k] != '"' || nl == 0 || nl > NB_TOOL_NAME_MAX || memchr(s + k + 1, '\\', nl)) return NO_END;
            char name[NB_TOOL_NAME_MAX + 1];
            memcpy(name, s + k + 1, nl);
            name[nl] = '\0';
            if (!declared(l->t, name) || l->n == STREAM_CALLS_MAX) return NO_END;
            c = &l->v[l->n++];
            *c = (call_loc){.name_at = k + 1, .name_len = nl, .args_at = NO_END, .args_end = NO_END};
        }
        k = skip_ws(s, n, ve);
        if (k < n && s[k] == ',') k = skip_ws(s, n, k + 1);
    }
}

/* Objects separated by whitespace or ';', or one array of them (bare_calls). */
static void loc_bare(loc_list *l, const char *s, size_t n, size_t i) {
    i = skip_ws(s, n, i);
    bool arr = i < n && s[i] == '[';
    if (arr) i = skip_ws(s, n, i + 1);
    while (i < n && s[i] == '{') {
        size_t e = loc_object(l, s, n, i);
        if (e == NO_END) return;
        i = skip_ws(s, n, e);
        if (i < n && s[i] == (arr ? ',' : ';')) i = skip_ws(s, n, i + 1);
    }
}

static void loc_calls(loc_list *l, nb_tool_format f, const char *s, size_t n) {
    const char *m = marker(f);
    size_t at = m ? find(s, n, 0, m) : NO_END, first = skip_ws(s, n, 0);
    if (at == NO_END) {
        if (first < n && (s[first] == '{' || s[first] == '[')) loc_bare(l, s, n, first);
        return;
    }
    size_t ml = strlen(m), i = at;
    if (f == NB_TOOLS_LLAMA3) {
        loc_bare(l, s, n, i + ml);
        return;
    }
    if (f == NB_TOOLS_HERMES) {
        while ((i = skip_ws(s, n, i)) < n && starts(s, n, i, m)) {
            size_t b = skip_ws(s, n, i + ml);
            if (b >= n || s[b] != '{') return;
            size_t e = loc_object(l, s, n, b);
            if (e == NO_END) return;
            size_t close = find(s, n, e, "</tool_call>");
            if (close == NO_END) return;
            i = close + strlen("</tool_call>");
        }
        return;
    }
    while ((i = skip_ws(s, n, i)) < n && starts(s, n, i, m)) { /* Mistral */
        i = skip_ws(s, n, i + ml);
        size_t next = find(s, n, i, m), end = next == NO_END ? n : next;
        if (i < end && (s[i] == '[' || s[i] == '{')) {
            loc_bare(l, s, end, i);
        } else {
            size_t a = find(s, end, i, "[ARGS]"), idp = find(s, end, i, "[CALL_ID]");
            size_t name_end = idp != NO_END && (a == NO_END || idp < a) ? idp : a;
            if (a == NO_END || name_end - i == 0 || name_end - i > NB_TOOL_NAME_MAX) return;
            char name[NB_TOOL_NAME_MAX + 1];
            memcpy(name, s + i, name_end - i);
            name[name_end - i] = '\0';
            if (!declared(l->t, name) || l->n == STREAM_CALLS_MAX) return;
            size_t b = skip_ws(s, end, a + 6);
            call_loc c = {.name_at = i, .name_len = name_end - i, .args_at = NO_END, .args_end = NO_END};
            if (b < end && s[b] == '{') {
                c.args_at = b;
                c.args_end = value_end(s, end, b);
            }
            l->v[l->n++] = c;
            if (c.args_end == NO_END) return;
        }
        if (next == NO_END) return;
        i = next;
    }
}

/* ---- the response ---------------------------------------------------------------- */

typedef struct sent_call {
    char id[32];
    size_t raw;      /* arguments read up to here (raw offset) */
    size_t args;     /* bytes of arguments sent */
    bool in_str, esc;
} sent_call;

struct nb_tool_stream {
    nb_tool_request req; /* tools held (json_incref), name copied */
    char *name;
    nb_tool_format f;
    char *all;           /* the output so far */
    size_t len, cap, sent;
    sent_call calls[STREAM_CALLS_MAX]; /* the calls whose first delta went out */
    size_t n_calls;
    json_t *deltas;      /* produced by the last push */
};

nb_status nb_tool_stream_create(const nb_tool_request *t, nb_tool_format f, nb_tool_stream **out) {
    *out = NULL;
    if (t->choice == NB_TOOL_CHOICE_NONE || !t->n_tools) return NB_OK;
    nb_tool_stream *s = calloc(1, sizeof *s);
    if (!s) return nb_fail(NB_ERR_NOMEM, "out of memory");
    s->req = *t;
    s->f = f;
    if (t->name && !(s->name = strdup(t->name))) {
        free(s);
        return nb_fail(NB_ERR_NOMEM, "out of memory");
    }
    s->req.name = s->name;
    json_incref((json_t *)t->tools);
    *out = s;
    return NB_OK;
}

void nb_tool_stream_free(nb_tool_stream *s) {
    if (!s) return;
    json_decref((json_t *)s->req.tools);
    free(s->name);
    free(s->all);
    if (s->deltas) json_decref(s->deltas);
    free(s);
}

static json_t *text_json(const char *p, size_t n) {
    size_t l;
    char *c = nb_utf8_sanitize(p, n, &l);
    json_t *j = c ? json_stringn(c, l) : NULL;
    free(c);
    return j ? j : json_string("");
}

static json_t *call_json(const nb_tool_call *c, int index, bool stream, bool with_args) {
    json_t *o = json_object(), *fn = json_object();
    if (stream) json_object_set_new(o, "index", json_integer(index));
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "type", json_string("function"));
    json_object_set_new(fn, "name", json_string(c->name));
    json_object_set_new(fn, "arguments", with_args ? text_json(c->arguments, strlen(c->arguments)) : json_string(""));
    json_object_set_new(o, "function", fn);
    return o;
}

bool nb_tool_message(nb_tool_stream *s, const char *text, size_t len, void *message) {
    nb_tool_result r;
    if (nb_tool_parse(&s->req, s->f, text ? text : "", text ? len : 0, &r) != NB_OK || r.n_calls == 0) {
        nb_tool_result_free(&r);
        return false; /* the caller's content (all the text) stands */
    }
    json_t *m = message, *arr = json_array();
    json_object_set_new(m, "content", r.content ? text_json(r.content, r.content_len) : json_null());
    for (size_t i = 0; i < r.n_calls; i++) json_array_append_new(arr, call_json(&r.calls[i], (int)i, false, true));
    json_object_set_new(m, "tool_calls", arr);
    nb_tool_result_free(&r);
    return true;
}

/* {"tool_calls": [{"index": i, "function": {"arguments": A}}]} */
static json_t *args_delta(size_t i, const char *a, size_t n) {
    json_t *d = json_object(), *arr = json_array(), *c = json_object(), *fn = json_object();
    json_object_set_new(c, "index", json_integer((json_int_t)i));
    json_object_set_new(fn, "arguments", text_json(a, n));
    json_object_set_new(c, "function", fn);
    json_array_append_new(arr, c);
    json_object_set_new(d, "tool_calls", arr);
    return d;
}

/* The first delta of a call: index, id, type, name, arguments "". */
static json_t *head_delta(size_t i, const char *id, const char *name, size_t name_len) {
    json_t *d = json_object(), *arr = json_array(), *c = json_object(), *fn = json_object();
    json_object_set_new(c, "index", json_integer((json_int_t)i));
    json_object_set_new(c, "id", json_string(id));
    json_object_set_new(c, "type", json_string("function"));
    json_object_set_new(fn, "name", json_stringn(name, name_len));
    json_object_set_new(fn, "arguments", json_string(""));
    json_object_set_new(c, "function", fn);
    json_array_append_new(arr, c);
    json_object_set_new(d, "tool_calls", arr);
    return d;
}

static void add_delta(nb_tool_stream *s, json_t *d) {
    if (!s->deltas) s->deltas = json_array();
    if (s->deltas && d) json_array_append_new(s->deltas, d);
    else if (d) json_decref(d);
}

/* Minified arguments read from sc->raw up to `upto`, appended to o (room for
 * upto - raw bytes); returns the bytes written. */
static size_t args_read(sent_call *sc, const char *s, size_t upto, char *o) {
    size_t k = 0;
    for (; sc->raw < upto; sc->raw++) {
        char c = s[sc->raw];
        if (sc->in_str) {
            o[k++] = c;
            if (sc->esc) sc->esc = false;
            else if (c == '\\') sc->esc = true;
            else if (c == '"') sc->in_str = false;
        } else if (!is_ws(c)) {
            o[k++] = c;
            if (c == '"') sc->in_str = true;
        }
    }
    return k;
}

/* The calls located in the output so far: first deltas and argument
 * fragments for what is new. */
static void stream_calls(nb_tool_stream *s) {
    loc_list *l = malloc(sizeof *l);
    if (!l) return;
    l->n = 0;
    l->t = &s->req;
    loc_calls(l, s->f, s->all, s->len);
    if (!s->req.parallel && l->n > 1) l->n = 1;
    for (size_t i = 0; i < l->n; i++) {
        const call_loc *c = &l->v[i];
        sent_call *sc = &s->calls[i];
        if (i == s->n_calls) {
            memset(sc, 0, sizeof *sc);
            call_id(sc->id);
            sc->raw = c->args_at;
            add_delta(s, head_delta(i, sc->id, s->all + c->name_at, c->name_len));
            s->n_calls++;
        }
        if (c->args_at == NO_END) continue;
        if (sc->raw == NO_END || sc->raw < c->args_at) { /* the arguments began since */
            sc->raw = c->args_at;
            sc->in_str = sc->esc = false;
        }
        size_t upto = c->args_end == NO_END ? s->len : c->args_end;
        if (c->args_end == NO_END && upto > sc->raw) { /* a character cut at the end waits for its rest */
            size_t k = upto - 1;
            while (k > sc->raw && ((uint8_t)s->all[k] & 0xC0) == 0x80 && upto - k < 4) k--;
            uint8_t lead = (uint8_t)s->all[k];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            if (lead >= 0x80 && upto - k < need) upto = k;
        }
        if (upto <= sc->raw) continue;
        char *o = malloc(upto - sc->raw);
        if (!o) continue;
        size_t k = args_read(sc, s->all, upto, o);
        if (k) {
            add_delta(s, args_delta(i, o, k));
            sc->args += k;
        }
        free(o);
    }
    free(l);
}

void nb_tool_stream_push(nb_tool_stream *s, const char **text, size_t *len) {
    bool news = *len > 0;
    if (*len) {
        if (s->len + *len + 1 > s->cap) {
            size_t cap = (s->len + *len + 1) * 2;
            char *p = realloc(s->all, cap);
            if (!p) { /* cannot hold it back: pass it through as content */
                s->sent = s->len + *len;
                return;
            }
            s->all = p;
            s->cap = cap;
        }
        memcpy(s->all + s->len, *text, *len);
        s->len += *len;
    }
    size_t safe = s->all ? nb_tool_stream_safe(s->f, s->all, s->len) : 0;
    if (safe < s->sent) safe = s->sent;
    *text = s->all ? s->all + s->sent : "";
    *len = safe - s->sent;
    s->sent = safe;
    if (news) stream_calls(s);
}

void *nb_tool_stream_deltas(nb_tool_stream *s) {
    json_t *d = s->deltas;
    s->deltas = NULL;
    return d;
}

void *nb_tool_stream_end(nb_tool_stream *s, const char **text, size_t *len) {
    nb_tool_result r;
    *text = "";
    *len = 0;
    if (s->deltas) json_decref(s->deltas);
    s->deltas = NULL;
    bool calls = s->all && nb_tool_parse(&s->req, s->f, s->all, s->len, &r) == NB_OK && r.n_calls > 0;
    if (!calls) {
        if (s->all) nb_tool_result_free(&r);
        if (s->all && s->sent < s->len) *text = s->all + s->sent, *len = s->len - s->sent;
        s->sent = s->len;
        return NULL;
    }
    if (r.content_len > s->sent) *text = s->all + s->sent, *len = r.content_len - s->sent;
    s->sent = s->len;
    /* OpenAI's shape: per call, a delta with index, id, type, name and empty
     * arguments, then the arguments; for the calls streamed already, the rest
     * of their arguments */
    json_t *deltas = json_array();
    for (size_t i = 0; i < r.n_calls; i++) {
        const char *a = r.calls[i].arguments;
        size_t an = strlen(a), from = 0;
        if (i < s->n_calls) {
            from = s->calls[i].args; /* a prefix of a: the same bytes minified the same way */
            if (from > an) from = an;
        } else {
            json_array_append_new(deltas, head_delta(i, r.calls[i].id, r.calls[i].name, strlen(r.calls[i].name)));
        }
        if (an > from) json_array_append_new(deltas, args_delta(i, a + from, an - from));
    }
    nb_tool_result_free(&r);
    return deltas;
}

void nb_tool_chunk_set(void *chunk, void *delta, bool finish_tool_calls) {
    json_t *c = json_array_get(json_object_get(chunk, "choices"), 0);
    if (!c) {
        if (delta) json_decref(delta);
        return;
    }
    if (delta) json_object_set_new(c, "delta", delta);
    if (finish_tool_calls) json_object_set_new(c, "finish_reason", json_string("tool_calls"));
}

bool nb_tool_prepare(nb_oai_request *q, nb_tool_format f, nb_oai_error *e) {
    if (q->tools.choice != NB_TOOL_CHOICE_REQUIRED && q->tools.choice != NB_TOOL_CHOICE_NAMED) return true;
    if (q->grammar) {
        nb_oai_error_set(e, 400, INVALID, "tool_choice", "invalid_value",
                         "'tool_choice' %s constrains the output to a tool call; it cannot be combined with "
                         "response_format or guided_*", q->tools.choice == NB_TOOL_CHOICE_NAMED ? "naming a function"
                                                                                                   : "\"required\"");
        return false;
    }
    return nb_tool_grammar(&q->tools, f, &q->grammar, e);
}
