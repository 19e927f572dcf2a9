/* Jinja evaluator: values with Python semantics, statements, expressions,
 * and the globals / filters / tests / methods chat templates use.
 *
 * Every allocation of a render comes from one arena freed at the end; an
 * error (raise_exception, a type error, a limit) longjmps back to
 * nb_tmpl_render, so nothing in between owns memory. Values are immutable
 * except namespaces (the sandbox forbids list.append, dict.update, ...). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/jinja_int.h"

/* ---- values ------------------------------------------------------------- */

enum { JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jundef jundef;

typedef struct jv {
    uint8_t t;
    uint8_t tuple;  /* JV_LIST: 1 a tuple, 2 a generator (what map / select / ... return) */
    uint8_t markup; /* JV_STR: markupsafe.Markup (from |safe / |escape): `+` escapes plain str operands */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jlist *l;
        jdict *d;
        jfunc *fn;
        jundef *u;
    } u;
} jv;

struct jlist {
    size_t n;
    jv *v;
};

struct jdict {
    size_t n, cap;
    jv *k, *v;
};

struct jundef {
    const char *name;    /* "'x' is undefined" */
    const char *objtype; /* "'dict object' has no attribute 'y'" (name = y) */
    bool is_index;       /* "... has no element N" */
    bool unsafe;         /* SecurityError when used */
};

typedef struct jframe jframe;

enum { F_MACRO = 1, F_BUILTIN, F_METHOD, F_CALLER };

struct jfunc {
    int kind;
    const jnode *node;  /* F_MACRO: the macro; F_CALLER: the call block */
    jframe *closure;
    int id;             /* F_BUILTIN / F_METHOD */
    jv self;            /* F_METHOD: the bound object */
    const char *name;
};

struct jframe {
    jframe *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

typedef struct jbuf {
    char *p;
    size_t n, cap;
    bool heap; /* malloc'd (the main output) rather than arena */
} jbuf;

typedef struct jctx {
    jarena ar;
    jmp_buf jb;
    nb_status st;
    char err[1024];
    jbuf *out;
    jbuf main;
    jframe *root;
    jdict *globals;
    int depth;
    uint64_t steps, max_steps;
    size_t max_output;
    struct timespec t0;
    uint32_t max_ms;
    int64_t now;
    int line;
    int loopctl; /* 1 break, 2 continue */
} jctx;

static const jv UNDEF = {.t = JV_UNDEF};
static const jv NONE = {.t = JV_NONE};

static jv vbool(bool b) { jv v = {.t = JV_BOOL}; v.u.b = b; return v; }
static jv vint(int64_t i) { jv v = {.t = JV_INT}; v.u.i = i; return v; }
static jv vfloat(double f) { jv v = {.t = JV_FLOAT}; v.u.f = f; return v; }
static jv vstr(const char *p, size_t n) { jv v = {.t = JV_STR}; v.u.s.p = p; v.u.s.n = n; return v; }
static jv vcstr(const char *p) { return vstr(p, strlen(p)); }

/* ---- errors ------------------------------------------------------------- */

static void fail(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(jctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->st = NB_ERR_INVALID;
    longjmp(c->jb, 1);
}

static void oom(jctx *c) __attribute__((noreturn));
static void oom(jctx *c) {
    snprintf(c->err, sizeof c->err, "MemoryError: the render needs more than %zu bytes of memory", c->ar.limit);
    c->st = NB_ERR_NOMEM;
    longjmp(c->jb, 1);
}

static void *alloc(jctx *c, size_t n) {
    void *p = ja_alloc(&c->ar, n);
    if (!p) oom(c);
    return p;
}

static char *dupn(jctx *c, const char *p, size_t n) {
    char *s = ja_strndup(&c->ar, p, n);
    if (!s) oom(c);
    return s;
}

static void step(jctx *c) {
    if (++c->steps > c->max_steps)
        fail(c, "TemplateError: the render took more than %llu steps (limit)", (unsigned long long)c->max_steps);
    if ((c->steps & 0xFFFF) == 0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double ms = (double)(t.tv_sec - c->t0.tv_sec) * 1e3 + (double)(t.tv_nsec - c->t0.tv_nsec) / 1e6;
        if (ms > c->max_ms) fail(c, "TemplateError: the render took more than %u ms (limit)", c->max_ms);
    }
}

static const char *type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.tuple == 2 ? "generator" : v.tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    default: return v.u.fn->kind == F_MACRO || v.u.fn->kind == F_CALLER ? "Macro" : "builtin_function_or_method";
    }
}

/* jinja2's object_type_repr */
static const char *obj_type_repr(jctx *c, jv v) {
    if (v.t == JV_NONE) return "None";
    const char *t = type_name(v);
    char *s = alloc(c, strlen(t) + 8);
    sprintf(s, "%s object", t);
    return s;
}

static void undef_fail(jctx *c, jv v) __attribute__((noreturn));
static void undef_fail(jctx *c, jv v) {
    jundef *u = v.u.u;
    if (!u) fail(c, "UndefinedError: value is undefined");
    if (u->unsafe) fail(c, "SecurityError: access to attribute '%s' of '%s' object is unsafe.", u->name, u->objtype);
    if (!u->objtype) fail(c, "UndefinedError: '%s' is undefined", u->name);
    if (u->is_index) fail(c, "UndefinedError: %s has no element %s", u->objtype, u->name);
    fail(c, "UndefinedError: '%s' has no attribute '%s'", u->objtype, u->name);
}

static jv mk_undef(jctx *c, const char *name, const char *objtype, bool is_index) {
    jundef *u = alloc(c, sizeof *u);
    u->name = name;
    u->objtype = objtype;
    u->is_index = is_index;
    jv v = {.t = JV_UNDEF};
    v.u.u = u;
    return v;
}

/* ---- buffers ------------------------------------------------------------ */

static void buf_add(jctx *c, jbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > ((size_t)1 << 40)) oom(c);
            cap *= 2;
        }
        if (b->heap) {
            if (b->n + n > c->max_output)
                fail(c, "TemplateError: the output exceeds %zu bytes (limit)", c->max_output);
            char *q = realloc(b->p, cap);
            if (!q) oom(c);
            b->p = q;
        } else {
            char *q = alloc(c, cap);
            if (b->n) memcpy(q, b->p, b->n);
            b->p = q;
        }
        b->cap = cap;
    }
    if (b->n + n > c->max_output) fail(c, "TemplateError: the output exceeds %zu bytes (limit)", c->max_output);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void buf_cstr(jctx *c, jbuf *b, const char *s) { buf_add(c, b, s, strlen(s)); }
static jv buf_val(jbuf *b) { return vstr(b->p ? b->p : "", b->n); }

/* ---- lists and dicts ---------------------------------------------------- */

static jlist *list_new(jctx *c, size_t n) {
    jlist *l = alloc(c, sizeof *l);
    l->n = n;
    l->v = n ? alloc(c, n * sizeof *l->v) : NULL;
    return l;
}

static jv vlist(jlist *l) { jv v = {.t = JV_LIST}; v.u.l = l; return v; }

typedef struct lbuild {
    jv *v;
    size_t n, cap;
} lbuild;

static void lb_push(jctx *c, lbuild *b, jv x) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        jv *v = alloc(c, cap * sizeof *v);
        if (b->n) memcpy(v, b->v, b->n * sizeof *v);
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
}

static jv lb_done(jctx *c, lbuild *b) {
    jlist *l = alloc(c, sizeof *l);
    l->n = b->n;
    l->v = b->v;
    return vlist(l);
}

static jdict *dict_new(jctx *c) { return alloc(c, sizeof(jdict)); }
static jv vdict(jdict *d) { jv v = {.t = JV_DICT}; v.u.d = d; return v; }

static bool py_eq(jv a, jv b);

static bool key_eq(jv a, jv b) {
    if (a.t == JV_STR && b.t == JV_STR) return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    if (a.t == JV_STR || b.t == JV_STR) return false;
    return py_eq(a, b);
}

static jv *dict_find(const jdict *d, jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

static jv *dict_find_s(const jdict *d, const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, k, n)) return &d->v[i];
    return NULL;
}

static void dict_set(jctx *c, jdict *d, jv k, jv v) {
    jv *e = dict_find(d, k);
    if (e) { *e = v; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *nk = alloc(c, cap * sizeof *nk), *nv = alloc(c, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

static bool hashable(jv k) { return k.t != JV_LIST || k.tuple; }

/* ---- UTF-8 -------------------------------------------------------------- */

static size_t u8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* byte offset of code point index i (clamped to n) */
static size_t u8_off(const char *s, size_t n, size_t i) {
    size_t off = 0;
    while (off < n && i > 0) {
        off++;
        while (off < n && ((unsigned char)s[off] & 0xC0) == 0x80) off++;
        i--;
    }
    return off;
}

/* Python's str.isspace() for the ASCII range plus U+0085/U+00A0 and the
 * common Unicode spaces (enough for strip / split). Returns the byte
 * length of the space at s[0..n) or 0. */
static size_t space_at(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
    if (c == 0xC2 && n >= 2 && ((unsigned char)s[1] == 0x85 || (unsigned char)s[1] == 0xA0)) return 2;
    if (c == 0xE3 && n >= 3 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] == 0x80) return 3;
    if (c == 0xE2 && n >= 3) {
        unsigned char b1 = (unsigned char)s[1], b2 = (unsigned char)s[2];
        if (b1 == 0x80 && ((b2 >= 0x80 && b2 <= 0x8A) || b2 == 0xA8 || b2 == 0xA9 || b2 == 0xAF)) return 3;
        if (b1 == 0x81 && b2 == 0x9F) return 3;
    }
    return 0;
}

/* length of a space ending at s[n-1] */
static size_t space_before(const char *s, size_t n) {
    if (n == 0) return 0;
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80 && n - k < 3) k--;
    for (size_t st = k; st < n; st++) {
        size_t l = space_at(s + st, n - st);
        if (l && st + l == n) return l;
    }
    return 0;
}

/* ---- Python str() / repr() ----------------------------------------------- */

static void fmt_float(char *out, size_t cap, double x) {
    if (isnan(x)) { snprintf(out, cap, "nan"); return; }
    if (isinf(x)) { snprintf(out, cap, x > 0 ? "inf" : "-inf"); return; }
    char b[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*e", prec - 1, x);
        if (strtod(b, NULL) == x) break;
    }
    /* b = [-]d.ddde[+-]XX */
    char digits[32];
    size_t nd = 0;
    const char *q = b;
    bool neg = false;
    if (*q == '-') { neg = true; q++; }
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int e = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    char *o = out;
    size_t left = cap;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            if ((int)nd <= e + 1) {
                PUT("%s", digits);
                for (int i = (int)nd; i < e + 1; i++) PUT("0");
                PUT(".0");
            } else {
                PUT("%.*s.%s", e + 1, digits, digits + e + 1);
            }
        } else {
            PUT("0.");
            for (int i = 0; i < -e - 1; i++) PUT("0");
            PUT("%s", digits);
        }
    } else {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
#undef PUT
}

static void py_str_into(jctx *c, jbuf *b, jv v);

static void py_repr_str(jctx *c, jbuf *b, const char *s, size_t n) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    buf_add(c, b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == (unsigned char)q || ch == '\\') { e[0] = '\\'; e[1] = (char)ch; buf_add(c, b, e, 2); }
        else if (ch == '\n') buf_cstr(c, b, "\\n");
        else if (ch == '\r') buf_cstr(c, b, "\\r");
        else if (ch == '\t') buf_cstr(c, b, "\\t");
        else if (ch < 0x20 || ch == 0x7F) { snprintf(e, sizeof e, "\\x%02x", ch); buf_cstr(c, b, e); }
        else buf_add(c, b, (const char *)&s[i], 1);
    }
    buf_add(c, b, &q, 1);
}

static void py_repr_into(jctx *c, jbuf *b, jv v) {
    if (v.t == JV_STR) py_repr_str(c, b, v.u.s.p, v.u.s.n);
    else py_str_into(c, b, v);
}

static void py_str_into(jctx *c, jbuf *b, jv v) {
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: buf_cstr(c, b, "None"); return;
    case JV_BOOL: buf_cstr(c, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); buf_cstr(c, b, tmp); return;
    case JV_FLOAT: fmt_float(tmp, sizeof tmp, v.u.f); buf_cstr(c, b, tmp); return;
    case JV_STR: buf_add(c, b, v.u.s.p, v.u.s.n); return;
    case JV_LIST:
        if (v.tuple == 2) { buf_cstr(c, b, "<generator object>"); return; }
        buf_cstr(c, b, v.tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) buf_cstr(c, b, ", ");
            step(c);
            py_repr_into(c, b, v.u.l->v[i]);
        }
        if (v.tuple && v.u.l->n == 1) buf_cstr(c, b, ",");
        buf_cstr(c, b, v.tuple ? ")" : "]");
        return;
    case JV_DICT:
    case JV_NS:
        buf_cstr(c, b, v.t == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) buf_cstr(c, b, ", ");
            step(c);
            py_repr_into(c, b, v.u.d->k[i]);
            buf_cstr(c, b, ": ");
            py_repr_into(c, b, v.u.d->v[i]);
        }
        buf_cstr(c, b, v.t == JV_NS ? "}>" : "}");
        return;
    case JV_FUNC:
        buf_cstr(c, b, "<function ");
        buf_cstr(c, b, v.u.fn->name ? v.u.fn->name : "?");
        buf_cstr(c, b, ">");
        return;
    }
}

static jv to_str(jctx *c, jv v) {
    if (v.t == JV_STR) return v;
    if (v.t == JV_UNDEF) return vstr("", 0);
    jbuf b = {0};
    py_str_into(c, &b, v);
    return buf_val(&b);
}

/* ---- JSON (json.dumps) --------------------------------------------------- */

typedef struct jsonopt {
    const char *indent; /* NULL: none */
    const char *item_sep, *key_sep;
    bool ensure_ascii, sort_keys;
} jsonopt;

static void json_str(jctx *c, jbuf *b, const char *s, size_t n, bool ascii) {
    buf_cstr(c, b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *e = NULL;
        char tmp[16];
        if (ch == '"') e = "\\\"";
        else if (ch == '\\') e = "\\\\";
        else if (ch == '\n') e = "\\n";
        else if (ch == '\r') e = "\\r";
        else if (ch == '\t') e = "\\t";
        else if (ch == '\b') e = "\\b";
        else if (ch == '\f') e = "\\f";
        else if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); e = tmp; }
        else if (ascii && ch >= 0x80) {
            uint32_t cp = 0;
            size_t l = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
            if (i + l > n) l = 1;
            cp = l == 1 ? 0xFFFD : ch & (0xFF >> (l + 1));
            for (size_t k = 1; k < l; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            buf_add(c, b, s + i - run, run);
            run = 0;
            buf_cstr(c, b, tmp);
            i += l - 1;
            continue;
        }
        if (e) {
            buf_add(c, b, s + i - run, run);
            run = 0;
            buf_cstr(c, b, e);
        } else {
            run++;
        }
    }
    buf_add(c, b, s + n - run, run);
    buf_cstr(c, b, "\"");
}

static int py_cmp(jctx *c, jv a, jv b);

static void json_val(jctx *c, jbuf *b, jv v, const jsonopt *o, int level) {
    step(c);
    if (level > NB_TMPL_MAX_DEPTH) fail(c, "ValueError: Circular reference detected");
    char tmp[64];
    switch (v.t) {
    case JV_NONE: buf_cstr(c, b, "null"); return;
    case JV_BOOL: buf_cstr(c, b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); buf_cstr(c, b, tmp); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) buf_cstr(c, b, "NaN");
        else if (isinf(v.u.f)) buf_cstr(c, b, v.u.f > 0 ? "Infinity" : "-Infinity");
        else { fmt_float(tmp, sizeof tmp, v.u.f); buf_cstr(c, b, tmp); }
        return;
    case JV_STR: json_str(c, b, v.u.s.p, v.u.s.n, o->ensure_ascii); return;
    case JV_LIST:
        if (v.tuple == 2) fail(c, "TypeError: Object of type generator is not JSON serializable");
        /* fall through */
    case JV_DICT: {
        bool isl = v.t == JV_LIST;
        size_t n = isl ? v.u.l->n : v.u.d->n;
        if (n == 0) { buf_cstr(c, b, isl ? "[]" : "{}"); return; }
        size_t *order = NULL;
        if (!isl && o->sort_keys) {
            order = alloc(c, n * sizeof *order);
            for (size_t i = 0; i < n; i++) order[i] = i;
            for (size_t i = 1; i < n; i++) /* insertion sort: stable, small */
                for (size_t j = i; j > 0 && py_cmp(c, v.u.d->k[order[j - 1]], v.u.d->k[order[j]]) > 0; j--) {
                    size_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
                }
        }
        buf_cstr(c, b, isl ? "[" : "{");
        for (size_t i = 0; i < n; i++) {
            if (i) buf_cstr(c, b, o->item_sep);
            if (o->indent) {
                buf_cstr(c, b, "\n");
                for (int k = 0; k <= level; k++) buf_cstr(c, b, o->indent);
            }
            if (isl) {
                json_val(c, b, v.u.l->v[i], o, level + 1);
            } else {
                size_t ix = order ? order[i] : i;
                jv k = v.u.d->k[ix];
                if (k.t == JV_STR) json_str(c, b, k.u.s.p, k.u.s.n, o->ensure_ascii);
                else if (k.t == JV_INT || k.t == JV_FLOAT || k.t == JV_BOOL || k.t == JV_NONE) {
                    jbuf kb = {0};
                    json_val(c, &kb, k, o, level + 1);
                    buf_cstr(c, b, "\"");
                    buf_add(c, b, kb.p, kb.n);
                    buf_cstr(c, b, "\"");
                } else {
                    fail(c, "TypeError: keys must be str, int, float, bool or None, not %s", type_name(k));
                }
                buf_cstr(c, b, o->key_sep);
                json_val(c, b, v.u.d->v[ix], o, level + 1);
            }
        }
        if (o->indent) {
            buf_cstr(c, b, "\n");
            for (int k = 0; k < level; k++) buf_cstr(c, b, o->indent);
        }
        buf_cstr(c, b, isl ? "]" : "}");
        return;
    }
    default:
        fail(c, "TypeError: Object of type %s is not JSON serializable", type_name(v));
    }
}

/* ---- truth, equality, ordering -------------------------------------------- */

static bool truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.tuple == 2 || v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num_f(jv v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.t == JV_BOOL ? (double)v.u.b : 0.0;
}
static int64_t num_i(jv v) { return v.t == JV_INT ? v.u.i : v.t == JV_BOOL ? (int64_t)v.u.b : 0; }

static bool py_eq(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JV_LIST:
        if (a.tuple != b.tuple || a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!py_eq(a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = dict_find(b.u.d, a.u.d->k[i]);
            if (!o || !py_eq(a.u.d->v[i], *o)) return false;
        }
        return true;
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return false;
    }
}

static int py_cmp_op(jctx *c, jv a, jv b, const char *op) {
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = NB_MIN(a.u.s.n, b.u.s.n);
        int r = memcmp(a.u.s.p, b.u.s.p, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n ? 1 : 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.tuple == b.tuple) {
        size_t n = NB_MIN(a.u.l->n, b.u.l->n);
        for (size_t i = 0; i < n; i++) {
            if (py_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return py_cmp_op(c, a.u.l->v[i], b.u.l->v[i], op);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    if (a.t == JV_UNDEF) undef_fail(c, a);
    if (b.t == JV_UNDEF) undef_fail(c, b);
    fail(c, "TypeError: '%s' not supported between instances of '%s' and '%s'", op, type_name(a), type_name(b));
}

static int py_cmp(jctx *c, jv a, jv b) { return py_cmp_op(c, a, b, "<"); }

/* ---- iteration ---------------------------------------------------------- */

/* A list of the items `for` / filters iterate over. */
static jlist *iter_list(jctx *c, jv v) {
    switch (v.t) {
    case JV_UNDEF: return list_new(c, 0);
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        jlist *l = list_new(c, v.u.d->n);
        memcpy(l->v, v.u.d->k, v.u.d->n * sizeof *l->v);
        return l;
    }
    case JV_STR: {
        size_t n = u8_len(v.u.s.p, v.u.s.n);
        jlist *l = list_new(c, n);
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            size_t e = off + 1;
            while (e < v.u.s.n && ((unsigned char)v.u.s.p[e] & 0xC0) == 0x80) e++;
            l->v[i] = vstr(v.u.s.p + off, e - off);
            off = e;
        }
        return l;
    }
    default: fail(c, "TypeError: '%s' object is not iterable", type_name(v));
    }
}

static int64_t py_len(jctx *c, jv v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)u8_len(v.u.s.p, v.u.s.n);
    case JV_LIST:
        if (v.tuple == 2) fail(c, "TypeError: object of type 'generator' has no len()");
        return (int64_t)v.u.l->n;
    case JV_DICT: case JV_NS: return (int64_t)v.u.d->n;
    default: fail(c, "TypeError: object of type '%s' has no len()", type_name(v));
    }
}

/* ---- JSON context -> values ----------------------------------------------- */

static jv from_json(jctx *c, const json_t *j, int depth) {
    if (depth > 512) fail(c, "TemplateError: the context nests deeper than 512 levels");
    switch (json_typeof(j)) {
    case JSON_NULL: return NONE;
    case JSON_TRUE: return vbool(true);
    case JSON_FALSE: return vbool(false);
    case JSON_INTEGER: return vint((int64_t)json_integer_value(j));
    case JSON_REAL: return vfloat(json_real_value(j));
    case JSON_STRING: {
        size_t n = json_string_length(j);
        return vstr(dupn(c, json_string_value(j), n), n);
    }
    case JSON_ARRAY: {
        jlist *l = list_new(c, json_array_size(j));
        for (size_t i = 0; i < l->n; i++) l->v[i] = from_json(c, json_array_get(j, i), depth + 1);
        return vlist(l);
    }
    case JSON_OBJECT: {
        jdict *d = dict_new(c);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x) dict_set(c, d, vcstr(dupn(c, k, strlen(k))), from_json(c, x, depth + 1));
        return vdict(d);
    }
    }
    return NONE;
}

/* ---- frames -------------------------------------------------------------- */

static jframe *frame_new(jctx *c, jframe *parent) {
    jframe *f = alloc(c, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(jctx *c, jframe *f, const char *name, jv v) {
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) { f->vals[i] = v; return; }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        const char **nn = alloc(c, cap * sizeof *nn);
        jv *nv = alloc(c, cap * sizeof *nv);
        if (f->n) {
            memcpy(nn, f->names, f->n * sizeof *nn);
            memcpy(nv, f->vals, f->n * sizeof *nv);
        }
        f->names = nn;
        f->vals = nv;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

/* ---- builtins: ids ------------------------------------------------------- */

enum {
    B_RANGE = 1, B_NAMESPACE, B_DICT, B_RAISE, B_STRFTIME, B_LIPSUM, B_CYCLER, B_JOINER,
};

static const struct { const char *name; int id; } globals_tab[] = {
    {"range", B_RANGE}, {"namespace", B_NAMESPACE}, {"dict", B_DICT}, {"raise_exception", B_RAISE},
    {"strftime_now", B_STRFTIME},
};

static jv vbuiltin(jctx *c, int id, const char *name) {
    jfunc *f = alloc(c, sizeof *f);
    f->kind = F_BUILTIN;
    f->id = id;
    f->name = name;
    jv v = {.t = JV_FUNC};
    v.u.fn = f;
    return v;
}

static jv lookup(jctx *c, jframe *f, const char *name) {
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name)) return f->vals[i];
    jv *g = dict_find_s(c->globals, name);
    if (g) return *g;
    for (size_t i = 0; i < sizeof globals_tab / sizeof *globals_tab; i++)
        if (!strcmp(globals_tab[i].name, name)) return vbuiltin(c, globals_tab[i].id, globals_tab[i].name);
    return mk_undef(c, name, NULL, false);
}

/* ---- arguments ---------------------------------------------------------- */

typedef struct jargs {
    jv *pos;
    size_t npos;
    const char **kwn;
    jv *kwv;
    size_t nkw;
} jargs;

/* Fetches parameter `name` at position `ix` (or -1: keyword only). */
static bool arg_get(const jargs *a, int ix, const char *name, jv *out) {
    if (ix >= 0 && (size_t)ix < a->npos) { *out = a->pos[ix]; return true; }
    for (size_t i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name)) { *out = a->kwv[i]; return true; }
    return false;
}

static jv arg_or(const jargs *a, int ix, const char *name, jv dflt) {
    jv v;
    return arg_get(a, ix, name, &v) ? v : dflt;
}

static void need_str(jctx *c, jv v, const char *what) {
    if (v.t == JV_UNDEF) undef_fail(c, v);
    if (v.t != JV_STR) fail(c, "TypeError: %s must be str, not %s", what, type_name(v));
}

static int64_t need_int(jctx *c, jv v, const char *what) {
    if (v.t == JV_INT || v.t == JV_BOOL) return num_i(v);
    if (v.t == JV_UNDEF) undef_fail(c, v);
    fail(c, "TypeError: %s must be an integer, not '%s'", what, type_name(v));
}

/* ---- evaluation: forward declarations ------------------------------------- */

static jv eval(jctx *c, jframe *f, const jnode *n);
static void exec_body(jctx *c, jframe *f, jnode *const *body, size_t n);
static jv call_value(jctx *c, jv fn, jargs *a, jframe *f);
static jv apply_filter(jctx *c, jframe *f, const char *name, jv v, jargs *a);
static bool apply_test(jctx *c, jframe *f, const char *name, jv v, jargs *a);
static jv getattr_v(jctx *c, jv obj, const char *name);
static jv html_escape(jctx *c, jv s);

/* ---- string helpers ------------------------------------------------------ */

static jv str_concat(jctx *c, jv a, jv b) {
    size_t n = a.u.s.n + b.u.s.n;
    if (n > c->max_output) fail(c, "TemplateError: a string exceeds %zu bytes (limit)", c->max_output);
    char *p = alloc(c, n + 1);
    memcpy(p, a.u.s.p, a.u.s.n);
    memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
    return vstr(p, n);
}

static bool str_eq(jv v, const char *s) { return v.t == JV_STR && v.u.s.n == strlen(s) && !memcmp(v.u.s.p, s, v.u.s.n); }

static const char *cstr(jctx *c, jv v) { return dupn(c, v.u.s.p, v.u.s.n); }

/* strip with Python semantics: chars NULL = whitespace */
static jv str_strip(jctx *c, jv s, jv chars, bool left, bool right) {
    const char *p = s.u.s.p;
    size_t b = 0, e = s.u.s.n;
    if (chars.t == JV_NONE || chars.t == JV_UNDEF) {
        size_t l;
        if (left) while (b < e && (l = space_at(p + b, e - b))) b += l;
        if (right) while (e > b && (l = space_before(p + b, e - b))) e -= l;
    } else {
        need_str(c, chars, "strip arg");
        jlist *cl = iter_list(c, chars);
        for (bool moved = true; left && moved && b < e;) {
            moved = false;
            for (size_t i = 0; i < cl->n; i++) {
                jv ch = cl->v[i];
                if (e - b >= ch.u.s.n && !memcmp(p + b, ch.u.s.p, ch.u.s.n)) { b += ch.u.s.n; moved = true; break; }
            }
        }
        for (bool moved = true; right && moved && e > b;) {
            moved = false;
            for (size_t i = 0; i < cl->n; i++) {
                jv ch = cl->v[i];
                if (e - b >= ch.u.s.n && !memcmp(p + e - ch.u.s.n, ch.u.s.p, ch.u.s.n)) {
                    e -= ch.u.s.n;
                    moved = true;
                    break;
                }
            }
        }
    }
    return vstr(p + b, e - b);
}

static jv str_case(jctx *c, jv s, int mode) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    char *p = alloc(c, s.u.s.n + 1);
    bool prev_cased = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        if (mode == 0) ch = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
        else if (mode == 1) ch = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
        else if (mode == 2) {
            if (alpha) ch = prev_cased ? ((ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch)
                                       : ((ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch);
            prev_cased = alpha || ((unsigned char)ch >= 0x80 && prev_cased);
        } else {
            if (i == 0) ch = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
            else ch = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
        }
        p[i] = ch;
    }
    return vstr(p, s.u.s.n);
}

static jv str_replace(jctx *c, jv s, jv old, jv new_, int64_t count) {
    need_str(c, old, "replace() argument 1");
    need_str(c, new_, "replace() argument 2");
    jbuf b = {0};
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) {
        /* Python inserts `new` between every character */
        size_t cps = u8_len(p, n);
        for (size_t k = 0; k <= cps; k++) {
            if (count >= 0 && done >= count) { buf_add(c, &b, p + i, n - i); return buf_val(&b); }
            buf_add(c, &b, new_.u.s.p, new_.u.s.n);
            done++;
            if (k < cps) {
                size_t e = i + 1;
                while (e < n && ((unsigned char)p[e] & 0xC0) == 0x80) e++;
                buf_add(c, &b, p + i, e - i);
                i = e;
            }
        }
        return buf_val(&b);
    }
    while (i < n) {
        step(c);
        const char *h = (count < 0 || done < count) ? memmem(p + i, n - i, old.u.s.p, old.u.s.n) : NULL;
        if (!h) break;
        buf_add(c, &b, p + i, (size_t)(h - (p + i)));
        buf_add(c, &b, new_.u.s.p, new_.u.s.n);
        i = (size_t)(h - p) + old.u.s.n;
        done++;
    }
    buf_add(c, &b, p + i, n - i);
    return buf_val(&b);
}

static jv str_split(jctx *c, jv s, jv sep, int64_t maxsplit, bool from_right) {
    lbuild lb = {0};
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        /* runs of whitespace, no empty strings */
        if (!from_right) {
            size_t i = 0, l;
            int64_t done = 0;
            for (;;) {
                while (i < n && (l = space_at(p + i, n - i))) i += l;
                if (i >= n) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    size_t e = n;
                    while (e > i && (l = space_before(p + i, e - i))) e -= l;
                    lb_push(c, &lb, vstr(p + i, e - i));
                    break;
                }
                size_t st = i;
                while (i < n && !space_at(p + i, n - i)) i++;
                lb_push(c, &lb, vstr(p + st, i - st));
                done++;
            }
        } else {
            size_t e = n, l;
            int64_t done = 0;
            lbuild rev = {0};
            for (;;) {
                while (e > 0 && (l = space_before(p, e))) e -= l;
                if (e == 0) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    size_t b = 0;
                    while (b < e && (l = space_at(p + b, e - b))) b += l;
                    lb_push(c, &rev, vstr(p + b, e - b));
                    break;
                }
                size_t en = e;
                while (e > 0 && !space_before(p, e)) e--;
                lb_push(c, &rev, vstr(p + e, en - e));
                done++;
            }
            for (size_t k = rev.n; k-- > 0;) lb_push(c, &lb, rev.v[k]);
        }
        return lb_done(c, &lb);
    }
    need_str(c, sep, "must be str or None");
    if (sep.u.s.n == 0) fail(c, "ValueError: empty separator");
    if (!from_right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            step(c);
            const char *h = (maxsplit < 0 || done < maxsplit) ? memmem(p + i, n - i, sep.u.s.p, sep.u.s.n) : NULL;
            if (!h) { lb_push(c, &lb, vstr(p + i, n - i)); break; }
            lb_push(c, &lb, vstr(p + i, (size_t)(h - (p + i))));
            i = (size_t)(h - p) + sep.u.s.n;
            done++;
        }
    } else {
        lbuild rev = {0};
        size_t e = n;
        int64_t done = 0;
        for (;;) {
            step(c);
            const char *h = NULL;
            if ((maxsplit < 0 || done < maxsplit) && e >= sep.u.s.n)
                for (size_t k = e - sep.u.s.n + 1; k-- > 0;)
                    if (!memcmp(p + k, sep.u.s.p, sep.u.s.n)) { h = p + k; break; }
            if (!h) { lb_push(c, &rev, vstr(p, e)); break; }
            size_t st = (size_t)(h - p) + sep.u.s.n;
            lb_push(c, &rev, vstr(p + st, e - st));
            e = (size_t)(h - p);
            done++;
        }
        for (size_t k = rev.n; k-- > 0;) lb_push(c, &lb, rev.v[k]);
    }
    return lb_done(c, &lb);
}

static bool affix(jctx *c, jv s, jv x, bool end) {
    if (x.t == JV_LIST && x.tuple) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (affix(c, s, x.u.l->v[i], end)) return true;
        return false;
    }
    if (x.t != JV_STR)
        fail(c, "TypeError: %s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
             type_name(x));
    if (x.u.s.n > s.u.s.n) return false;
    return !memcmp(s.u.s.p + (end ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n);
}

/* printf-style formatting: "%s ... %d" % args */
/* Python's %-formatting and strftime_now: the C format strings below are
 * built by this file from a template's conversion spec (flags, width,
 * precision and one conversion, each checked before use), so they are not
 * literals by design. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static jv percent_format(jctx *c, jv fmt, jv args) {
    jlist *al;
    if (args.t == JV_LIST && args.tuple) al = args.u.l;
    else {
        al = list_new(c, 1);
        al->v[0] = args;
    }
    jbuf b = {0};
    size_t ai = 0;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { buf_add(c, &b, p + i, 1); continue; }
        if (++i >= n) fail(c, "ValueError: incomplete format");
        char spec[32];
        size_t sl = 0;
        spec[sl++] = '%';
        while (i < n && strchr("-+ #0123456789.", p[i]) && sl < 20) spec[sl++] = p[i++];
        if (i >= n) fail(c, "ValueError: incomplete format");
        char conv = p[i];
        if (conv == '%') { buf_cstr(c, &b, "%"); continue; }
        if (ai >= al->n) fail(c, "TypeError: not enough arguments for format string");
        jv a = al->v[ai++];
        char tmp[128];
        if (conv == 's' || conv == 'r') {
            jbuf sb = {0};
            if (conv == 's') py_str_into(c, &sb, a);
            else py_repr_into(c, &sb, a);
            spec[sl++] = 's';
            spec[sl] = '\0';
            if (sl == 2) buf_add(c, &b, sb.p, sb.n);
            else {
                int w = snprintf(NULL, 0, spec, sb.p ? sb.p : "");
                char *o = alloc(c, (size_t)w + 1);
                snprintf(o, (size_t)w + 1, spec, sb.p ? sb.p : "");
                buf_cstr(c, &b, o);
            }
        } else if (conv == 'd' || conv == 'i') {
            if (!is_num(a)) fail(c, "TypeError: %%%c format: a real number is required, not %s", conv, type_name(a));
            spec[sl++] = 'l';
            spec[sl++] = 'l';
            spec[sl++] = 'd';
            spec[sl] = '\0';
            if (a.t == JV_FLOAT && !(fabs(a.u.f) < 9.2e18)) fail(c, "OverflowError: cannot convert float to integer");
            snprintf(tmp, sizeof tmp, spec, (long long)(a.t == JV_FLOAT ? (int64_t)a.u.f : num_i(a)));
            buf_cstr(c, &b, tmp);
        } else if (strchr("feEgGxXo", conv)) {
            if (!is_num(a)) fail(c, "TypeError: must be real number, not %s", type_name(a));
            spec[sl++] = conv;
            spec[sl] = '\0';
            if (strchr("xXo", conv)) snprintf(tmp, sizeof tmp, spec, (unsigned)num_i(a));
            else snprintf(tmp, sizeof tmp, spec, num_f(a));
            buf_cstr(c, &b, tmp);
        } else {
            fail(c, "ValueError: unsupported format character '%c'", conv);
        }
    }
    if (ai < al->n && !(args.t != JV_LIST || !args.tuple ? false : false))
        fail(c, "TypeError: not all arguments converted during string formatting");
    return buf_val(&b);
}
#pragma GCC diagnostic pop

/* str.format with {} {0} {name} and {{ }} (format specs refused) */
static jv brace_format(jctx *c, jv fmt, const jargs *a) {
    jbuf b = {0};
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, auto_ix = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { buf_cstr(c, &b, "{"); i++; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { buf_cstr(c, &b, "}"); i++; continue; }
        if (p[i] == '}') fail(c, "ValueError: Single '}' encountered in format string");
        if (p[i] != '{') { buf_add(c, &b, p + i, 1); continue; }
        size_t e = i + 1;
        while (e < n && p[e] != '}') e++;
        if (e >= n) fail(c, "ValueError: Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = e - i - 1;
        const char *colon = memchr(f, ':', fl);
        if (colon) fail(c, "ValueError: format specs in str.format are not supported");
        jv v;
        if (fl == 0) {
            if (auto_ix >= a->npos) fail(c, "IndexError: Replacement index %zu out of range", auto_ix);
            v = a->pos[auto_ix++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t ix = (size_t)strtoul(f, NULL, 10);
            if (ix >= a->npos) fail(c, "IndexError: Replacement index %zu out of range", ix);
            v = a->pos[ix];
        } else {
            char *name = dupn(c, f, fl);
            if (!arg_get(a, -1, name, &v)) fail(c, "KeyError: '%s'", name);
        }
        py_str_into(c, &b, v);
        i = e;
    }
    return buf_val(&b);
}

/* ---- methods -------------------------------------------------------------- */

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper", "title",
    "capitalize", "format", "find", "rfind", "index", "count", "join", "isdigit", "isalpha", "isspace", "isalnum",
    "isupper", "islower", "splitlines", "removeprefix", "removesuffix", "casefold", "swapcase", "zfill", "center",
    "ljust", "rjust", "partition", "rpartition", "isnumeric", "isdecimal", "istitle", "expandtabs", "encode", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const dict_unsafe[] = {"pop", "popitem", "update", "setdefault", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const list_unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear",
                                          NULL};

static int find_name(const char *const *tab, const char *name) {
    for (int i = 0; tab[i]; i++)
        if (!strcmp(tab[i], name)) return i;
    return -1;
}

/* A bound method of obj, or UNDEF-ish (t = JV_UNDEF with u == NULL) if none. */
static bool method_of(jctx *c, jv obj, const char *name, jv *out) {
    const char *const *tab = NULL;
    const char *const *unsafe = NULL;
    if (obj.t == JV_STR) tab = str_methods;
    else if (obj.t == JV_DICT) { tab = dict_methods; unsafe = dict_unsafe; }
    else if (obj.t == JV_LIST) { tab = list_methods; unsafe = list_unsafe; }
    else return false;
    int id = find_name(tab, name);
    if (id < 0) {
        if (unsafe && find_name(unsafe, name) >= 0 && !(obj.t == JV_LIST && obj.tuple)) {
            jv u = mk_undef(c, dupn(c, name, strlen(name)), type_name(obj), false);
            u.u.u->unsafe = true;
            *out = u;
            return true;
        }
        return false;
    }
    jfunc *f = alloc(c, sizeof *f);
    f->kind = F_METHOD;
    f->id = id;
    f->self = obj;
    f->name = tab[id];
    jv v = {.t = JV_FUNC};
    v.u.fn = f;
    *out = v;
    return true;
}

static int64_t cp_index_of(const char *s, const char *hit) { return (int64_t)u8_len(s, (size_t)(hit - s)); }

static jv call_str_method(jctx *c, jv s, const char *m, jargs *a) {
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (!strcmp(m, "strip")) return str_strip(c, s, arg_or(a, 0, "chars", NONE), true, true);
    if (!strcmp(m, "lstrip")) return str_strip(c, s, arg_or(a, 0, "chars", NONE), true, false);
    if (!strcmp(m, "rstrip")) return str_strip(c, s, arg_or(a, 0, "chars", NONE), false, true);
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv ms = arg_or(a, 1, "maxsplit", vint(-1));
        return str_split(c, s, arg_or(a, 0, "sep", NONE), need_int(c, ms, "maxsplit"), m[0] == 'r');
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        jv x;
        if (!arg_get(a, 0, "prefix", &x)) fail(c, "TypeError: %s() takes at least 1 argument (0 given)", m);
        return vbool(affix(c, s, x, m[0] == 'e'));
    }
    if (!strcmp(m, "replace")) {
        jv o, nw;
        if (!arg_get(a, 0, "old", &o) || !arg_get(a, 1, "new", &nw))
            fail(c, "TypeError: replace() takes at least 2 arguments");
        return str_replace(c, s, o, nw, need_int(c, arg_or(a, 2, "count", vint(-1)), "count"));
    }
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return str_case(c, s, 0);
    if (!strcmp(m, "upper")) return str_case(c, s, 1);
    if (!strcmp(m, "title")) return str_case(c, s, 2);
    if (!strcmp(m, "capitalize")) return str_case(c, s, 3);
    if (!strcmp(m, "swapcase")) {
        char *q = alloc(c, n + 1);
        for (size_t i = 0; i < n; i++) {
            char ch = p[i];
            q[i] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
        }
        return vstr(q, n);
    }
    if (!strcmp(m, "format")) return brace_format(c, s, a);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "count")) {
        jv x;
        if (!arg_get(a, 0, "sub", &x)) fail(c, "TypeError: %s() takes at least 1 argument (0 given)", m);
        need_str(c, x, "argument");
        if (!strcmp(m, "count")) {
            if (x.u.s.n == 0) return vint((int64_t)u8_len(p, n) + 1);
            int64_t k = 0;
            for (const char *h = p; (h = memmem(h, n - (size_t)(h - p), x.u.s.p, x.u.s.n)); h += x.u.s.n) k++;
            return vint(k);
        }
        const char *hit = NULL;
        if (m[0] == 'r') {
            if (x.u.s.n <= n)
                for (size_t k = n - x.u.s.n + 1; k-- > 0;)
                    if (!memcmp(p + k, x.u.s.p, x.u.s.n)) { hit = p + k; break; }
        } else {
            hit = x.u.s.n == 0 ? p : memmem(p, n, x.u.s.p, x.u.s.n);
        }
        if (!hit && !strcmp(m, "index")) fail(c, "ValueError: substring not found");
        return vint(hit ? cp_index_of(p, hit) : -1);
    }
    if (!strcmp(m, "join")) {
        jv x;
        if (!arg_get(a, 0, "iterable", &x)) fail(c, "TypeError: join() takes exactly one argument (0 given)");
        jlist *l = iter_list(c, x);
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JV_STR)
                fail(c, "TypeError: sequence item %zu: expected str instance, %s found", i, type_name(l->v[i]));
            if (i) buf_add(c, &b, p, n);
            buf_add(c, &b, l->v[i].u.s.p, l->v[i].u.s.n);
        }
        return buf_val(&b);
    }
    if (!strncmp(m, "is", 2)) {
        if (n == 0) return vbool(false);
        bool all = true, any_cased = false, any_upper = false, any_lower = false;
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)p[i];
            bool d = ch >= '0' && ch <= '9', lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
            any_upper |= up;
            any_lower |= lo;
            any_cased |= lo || up;
            if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal")) all &= d;
            else if (!strcmp(m, "isalpha")) all &= lo || up || ch >= 0x80;
            else if (!strcmp(m, "isalnum")) all &= lo || up || d || ch >= 0x80;
            else if (!strcmp(m, "isspace")) all &= space_at(p + i, n - i) > 0;
        }
        if (!strcmp(m, "isupper")) return vbool(any_upper && !any_lower);
        if (!strcmp(m, "islower")) return vbool(any_lower && !any_upper);
        if (!strcmp(m, "istitle")) return vbool(any_cased && py_eq(str_case(c, s, 2), s));
        return vbool(all);
    }
    if (!strcmp(m, "splitlines")) {
        lbuild lb = {0};
        bool keep = truthy(arg_or(a, 0, "keepends", vbool(false)));
        size_t st = 0;
        for (size_t i = 0; i < n; i++) {
            char ch = p[i];
            if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == 0x1c || ch == 0x1d || ch == 0x1e) {
                size_t e = i + 1;
                if (ch == '\r' && e < n && p[e] == '\n') e++;
                lb_push(c, &lb, vstr(p + st, (keep ? e : i) - st));
                st = e;
                i = e - 1;
            }
        }
        if (st < n) lb_push(c, &lb, vstr(p + st, n - st));
        return lb_done(c, &lb);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        jv x = arg_or(a, 0, "prefix", UNDEF);
        need_str(c, x, "argument");
        bool suf = m[6] == 's';
        if (x.u.s.n <= n && !memcmp(p + (suf ? n - x.u.s.n : 0), x.u.s.p, x.u.s.n))
            return suf ? vstr(p, n - x.u.s.n) : vstr(p + x.u.s.n, n - x.u.s.n);
        return s;
    }
    if (!strcmp(m, "zfill") || !strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        int64_t w = need_int(c, arg_or(a, 0, "width", vint(0)), "width");
        size_t len = u8_len(p, n);
        if (w <= (int64_t)len) return s;
        if (w > (int64_t)c->max_output) fail(c, "TemplateError: width %lld exceeds the output limit", (long long)w);
        jv fill = arg_or(a, 1, "fillchar", vstr(" ", 1));
        need_str(c, fill, "fillchar");
        size_t pad = (size_t)w - len, lp = 0;
        if (!strcmp(m, "zfill")) { fill = vstr("0", 1); lp = pad; }
        else if (!strcmp(m, "rjust")) lp = pad;
        else if (!strcmp(m, "center")) lp = pad / 2 + (pad & (size_t)w & 1);
        jbuf b = {0};
        size_t sign = 0;
        if (!strcmp(m, "zfill") && n && (p[0] == '-' || p[0] == '+')) { buf_add(c, &b, p, 1); sign = 1; }
        for (size_t i = 0; i < lp; i++) buf_add(c, &b, fill.u.s.p, fill.u.s.n);
        buf_add(c, &b, p + sign, n - sign);
        for (size_t i = lp; i < pad; i++) buf_add(c, &b, fill.u.s.p, fill.u.s.n);
        return buf_val(&b);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        jv x = arg_or(a, 0, "sep", UNDEF);
        need_str(c, x, "argument");
        if (x.u.s.n == 0) fail(c, "ValueError: empty separator");
        const char *hit = NULL;
        if (m[0] == 'r') {
            if (x.u.s.n <= n)
                for (size_t k = n - x.u.s.n + 1; k-- > 0;)
                    if (!memcmp(p + k, x.u.s.p, x.u.s.n)) { hit = p + k; break; }
        } else hit = memmem(p, n, x.u.s.p, x.u.s.n);
        jlist *l = list_new(c, 3);
        if (!hit) {
            l->v[0] = m[0] == 'r' ? vstr("", 0) : s;
            l->v[1] = vstr("", 0);
            l->v[2] = m[0] == 'r' ? s : vstr("", 0);
        } else {
            l->v[0] = vstr(p, (size_t)(hit - p));
            l->v[1] = x;
            l->v[2] = vstr(hit + x.u.s.n, n - (size_t)(hit - p) - x.u.s.n);
        }
        jv r = vlist(l);
        r.tuple = 1;
        return r;
    }
    if (!strcmp(m, "expandtabs")) return str_replace(c, s, vstr("\t", 1), vstr("        ", 8), -1);
    fail(c, "TypeError: str.%s() is not supported by this engine", m);
}

static jv call_method(jctx *c, jfunc *f, jargs *a) {
    jv s = f->self;
    const char *m = f->name;
    if (s.t == JV_STR) return call_str_method(c, s, m, a);
    if (s.t == JV_DICT) {
        jdict *d = s.u.d;
        if (!strcmp(m, "items")) {
            jlist *l = list_new(c, d->n);
            for (size_t i = 0; i < d->n; i++) {
                jlist *pr = list_new(c, 2);
                pr->v[0] = d->k[i];
                pr->v[1] = d->v[i];
                l->v[i] = vlist(pr);
                l->v[i].tuple = 1;
            }
            return vlist(l);
        }
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            jlist *l = list_new(c, d->n);
            memcpy(l->v, m[0] == 'k' ? d->k : d->v, d->n * sizeof *l->v);
            return vlist(l);
        }
        if (!strcmp(m, "get")) {
            jv k;
            if (!arg_get(a, 0, "key", &k)) fail(c, "TypeError: get expected at least 1 argument, got 0");
            jv *v = hashable(k) ? dict_find(d, k) : NULL;
            return v ? *v : arg_or(a, 1, "default", NONE);
        }
        if (!strcmp(m, "copy")) return s;
    }
    if (s.t == JV_LIST) {
        if (!strcmp(m, "copy")) return s;
        jv x;
        if (!arg_get(a, 0, "value", &x)) fail(c, "TypeError: %s() takes exactly one argument (0 given)", m);
        int64_t k = 0;
        for (size_t i = 0; i < s.u.l->n; i++)
            if (py_eq(s.u.l->v[i], x)) {
                if (!strcmp(m, "index")) return vint((int64_t)i);
                k++;
            }
        if (!strcmp(m, "index")) fail(c, "ValueError: value is not in list");
        return vint(k);
    }
    fail(c, "TypeError: method %s is not supported", m);
}

/* ---- attribute and item access --------------------------------------------- */

static jv getattr_v(jctx *c, jv obj, const char *name) {
    if (obj.t == JV_UNDEF) undef_fail(c, obj);
    jv m;
    if (method_of(c, obj, name, &m)) return m;
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        jv *v = dict_find_s(obj.u.d, name);
        if (v) return *v;
    }
    return mk_undef(c, dupn(c, name, strlen(name)), obj_type_repr(c, obj), false);
}

static int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

static jv getitem_v(jctx *c, jv obj, jv key) {
    if (obj.t == JV_UNDEF) undef_fail(c, obj);
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        if (!hashable(key)) fail(c, "TypeError: unhashable type: '%s'", type_name(key));
        jv *v = dict_find(obj.u.d, key);
        if (v) return *v;
    } else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t n = obj.t == JV_LIST ? (int64_t)obj.u.l->n : py_len(c, obj);
        int64_t i = norm_index(num_i(key), n);
        if (i >= 0 && i < n) {
            if (obj.t == JV_LIST) return obj.u.l->v[i];
            size_t b = u8_off(obj.u.s.p, obj.u.s.n, (size_t)i), e = u8_off(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
            return vstr(obj.u.s.p + b, e - b);
        }
    }
    if (key.t == JV_STR) {
        jv m;
        const char *k = cstr(c, key);
        if (method_of(c, obj, k, &m)) return m;
        return mk_undef(c, k, obj_type_repr(c, obj), false);
    }
    jbuf kb = {0};
    py_repr_into(c, &kb, key);
    return mk_undef(c, kb.p ? kb.p : "", obj_type_repr(c, obj), true);
}

static jv slice_v(jctx *c, jv obj, jv start, jv stop, jv stepv) {
    if (obj.t == JV_UNDEF) undef_fail(c, obj);
    if (obj.t != JV_LIST && obj.t != JV_STR) fail(c, "TypeError: '%s' object is not subscriptable", type_name(obj));
    int64_t n = obj.t == JV_LIST ? (int64_t)obj.u.l->n : py_len(c, obj);
    int64_t st = stepv.t == JV_NONE || stepv.t == JV_UNDEF ? 1 : need_int(c, stepv, "slice step");
    if (st == 0) fail(c, "ValueError: slice step cannot be zero");
    if (st > n + 1) st = n + 1; /* same items, no overflow */
    if (st < -(n + 1)) st = -(n + 1);
    int64_t lo, hi;
    if (st > 0) {
        lo = start.t == JV_NONE || start.t == JV_UNDEF ? 0 : norm_index(need_int(c, start, "slice index"), n);
        hi = stop.t == JV_NONE || stop.t == JV_UNDEF ? n : norm_index(need_int(c, stop, "slice index"), n);
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
    } else {
        lo = start.t == JV_NONE || start.t == JV_UNDEF ? n - 1 : norm_index(need_int(c, start, "slice index"), n);
        hi = stop.t == JV_NONE || stop.t == JV_UNDEF ? -1 : norm_index(need_int(c, stop, "slice index"), n);
        lo = lo < -1 ? -1 : lo > n - 1 ? n - 1 : lo;
        hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
    }
    if (obj.t == JV_STR && st == 1) {
        if (hi <= lo) return vstr("", 0);
        size_t b = u8_off(obj.u.s.p, obj.u.s.n, (size_t)lo), e = u8_off(obj.u.s.p, obj.u.s.n, (size_t)hi);
        return vstr(obj.u.s.p + b, e - b);
    }
    jlist *src = iter_list(c, obj);
    lbuild lb = {0};
    if (st > 0)
        for (int64_t i = lo; i < hi; i += st) lb_push(c, &lb, src->v[i]);
    else
        for (int64_t i = lo; i > hi; i += st) lb_push(c, &lb, src->v[i]);
    if (obj.t == JV_LIST) {
        jv r = lb_done(c, &lb);
        r.tuple = obj.tuple;
        return r;
    }
    jbuf b = {0};
    for (size_t i = 0; i < lb.n; i++) buf_add(c, &b, lb.v[i].u.s.p, lb.v[i].u.s.n);
    return buf_val(&b);
}

/* ---- arithmetic -------------------------------------------------------------- */

static void check_undef2(jctx *c, jv a, jv b) {
    if (a.t == JV_UNDEF) undef_fail(c, a);
    if (b.t == JV_UNDEF) undef_fail(c, b);
}

static void bad_operands(jctx *c, const char *op, jv a, jv b) __attribute__((noreturn));
static void bad_operands(jctx *c, const char *op, jv a, jv b) {
    fail(c, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, type_name(a), type_name(b));
}

static jv repeat(jctx *c, jv seq, int64_t k) {
    if (k <= 0) return seq.t == JV_STR ? vstr("", 0) : vlist(list_new(c, 0));
    size_t unit = seq.t == JV_STR ? seq.u.s.n : seq.u.l->n * sizeof(jv);
    uint64_t total;
    if (__builtin_mul_overflow((uint64_t)k, (uint64_t)unit, &total) || total > c->max_output)
        fail(c, "TemplateError: a repeated value exceeds %zu bytes (limit)", c->max_output);
    if (seq.t == JV_STR) {
        jbuf b = {0};
        for (int64_t i = 0; i < k; i++) buf_add(c, &b, seq.u.s.p, seq.u.s.n);
        return buf_val(&b);
    }
    jlist *l = list_new(c, seq.u.l->n * (size_t)k);
    for (int64_t i = 0; i < k; i++) memcpy(l->v + (size_t)i * seq.u.l->n, seq.u.l->v, seq.u.l->n * sizeof(jv));
    jv r = vlist(l);
    r.tuple = seq.tuple;
    return r;
}

static jv binop(jctx *c, int op, jv a, jv b) {
    static const char *const opname[] = {[JOP_ADD] = "+", [JOP_SUB] = "-", [JOP_MUL] = "*", [JOP_DIV] = "/",
                                         [JOP_FLOORDIV] = "//", [JOP_MOD] = "%", [JOP_POW] = "** or pow()"};
    if (op == JOP_CONCAT) {
        jv x = to_str(c, a), y = to_str(c, b);
        return str_concat(c, x, y);
    }
    check_undef2(c, a, b);
    if (is_num(a) && is_num(b)) {
        bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
        int64_t x = num_i(a), y = num_i(b), r;
        double fx = num_f(a), fy = num_f(b);
        switch (op) {
        case JOP_ADD:
            if (fl) return vfloat(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) fail(c, "OverflowError: integer result too large");
            return vint(r);
        case JOP_SUB:
            if (fl) return vfloat(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) fail(c, "OverflowError: integer result too large");
            return vint(r);
        case JOP_MUL:
            if (fl) return vfloat(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) fail(c, "OverflowError: integer result too large");
            return vint(r);
        case JOP_DIV:
            if (fy == 0) fail(c, "ZeroDivisionError: division by zero");
            return vfloat(fx / fy);
        case JOP_FLOORDIV:
            if (fl) {
                if (fy == 0) fail(c, "ZeroDivisionError: float floor division by zero");
                return vfloat(floor(fx / fy));
            }
            if (y == 0) fail(c, "ZeroDivisionError: integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) fail(c, "OverflowError: integer result too large");
            r = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) r--;
            return vint(r);
        case JOP_MOD:
            if (fl) {
                if (fy == 0) fail(c, "ZeroDivisionError: float modulo");
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return vfloat(m);
            }
            if (y == 0) fail(c, "ZeroDivisionError: integer division or modulo by zero");
            if (y == -1) return vint(0);
            r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return vint(r);
        case JOP_POW:
            if (fl || y < 0) return vfloat(pow(fx, fy));
            r = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(r, x, &r)) fail(c, "OverflowError: integer result too large");
                if (r == 0 || r == 1) break;
                if (i > 64 && (r == -1)) { r = (y & 1) ? -1 : 1; break; }
            }
            return vint(r);
        }
    }
    if (op == JOP_ADD) {
        if (a.t == JV_STR && b.t == JV_STR) {
            if (a.markup == b.markup) {
                jv r = str_concat(c, a, b);
                r.markup = a.markup;
                return r;
            }
            /* Markup + str escapes the str (markupsafe) */
            jv r = str_concat(c, a.markup ? a : html_escape(c, a), b.markup ? b : html_escape(c, b));
            r.markup = 1;
            return r;
        }
        if (a.t == JV_LIST && b.t == JV_LIST && a.tuple == b.tuple) {
            jlist *l = list_new(c, a.u.l->n + b.u.l->n);
            if (a.u.l->n) memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(jv));
            if (b.u.l->n) memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jv));
            jv r = vlist(l);
            r.tuple = a.tuple;
            return r;
        }
        if (a.t == JV_STR) fail(c, "TypeError: can only concatenate str (not \"%s\") to str", type_name(b));
        if (a.t == JV_LIST)
            fail(c, "TypeError: can only concatenate %s (not \"%s\") to %s", type_name(a), type_name(b), type_name(a));
    }
    if (op == JOP_MUL) {
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(c, a, num_i(b));
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(c, b, num_i(a));
    }
    if (op == JOP_MOD && a.t == JV_STR) return percent_format(c, a, b);
    bad_operands(c, opname[op], a, b);
}

static bool contains(jctx *c, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t == JV_UNDEF) undef_fail(c, needle);
        if (needle.t != JV_STR)
            fail(c, "TypeError: 'in <string>' requires string as left operand, not %s", type_name(needle));
        return needle.u.s.n == 0 || memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (py_eq(hay.u.l->v[i], needle)) return true;
        return false;
    case JV_DICT:
    case JV_NS:
        if (!hashable(needle)) fail(c, "TypeError: unhashable type: '%s'", type_name(needle));
        return dict_find(hay.u.d, needle) != NULL;
    case JV_UNDEF: return false;
    default: fail(c, "TypeError: argument of type '%s' is not iterable", type_name(hay));
    }
}

/* ---- calls ------------------------------------------------------------------- */

static void eval_args(jctx *c, jframe *f, const jnode *n, jargs *a) {
    memset(a, 0, sizeof *a);
    if (n->nargs) {
        a->pos = alloc(c, n->nargs * sizeof *a->pos);
        for (size_t i = 0; i < n->nargs; i++) a->pos[i] = eval(c, f, n->args[i]);
        a->npos = n->nargs;
    }
    if (n->ndefs) {
        a->kwv = alloc(c, n->ndefs * sizeof *a->kwv);
        a->kwn = (const char **)n->kwnames;
        for (size_t i = 0; i < n->ndefs; i++) a->kwv[i] = eval(c, f, n->defs[i]);
        a->nkw = n->ndefs;
    }
}

static jv call_macro(jctx *c, jfunc *fn, jargs *a, jv caller) {
    const jnode *m = fn->node;
    if (++c->depth > NB_TMPL_MAX_DEPTH) fail(c, "RecursionError: maximum recursion depth exceeded");
    jframe *fr = frame_new(c, fn->closure);
    lbuild extra = {0};
    jdict *kw = dict_new(c);
    for (size_t i = 0; i < m->nargs; i++) {
        const char *pn = m->args[i]->str;
        jv v;
        if (i < a->npos) v = a->pos[i];
        else if (!arg_get(a, -1, pn, &v)) v = m->defs[i] ? eval(c, fr, m->defs[i]) : mk_undef(c, pn, NULL, false);
        frame_set(c, fr, pn, v);
    }
    for (size_t i = m->nargs; i < a->npos; i++) lb_push(c, &extra, a->pos[i]);
    for (size_t i = 0; i < a->nkw; i++) {
        bool known = false;
        for (size_t k = 0; k < m->nargs; k++)
            if (!strcmp(m->args[k]->str, a->kwn[i])) known = true;
        if (!known && strcmp(a->kwn[i], "caller")) dict_set(c, kw, vcstr(a->kwn[i]), a->kwv[i]);
    }
    jv va = lb_done(c, &extra);
    va.tuple = 1;
    frame_set(c, fr, "varargs", va);
    frame_set(c, fr, "kwargs", vdict(kw));
    if (caller.t != JV_UNDEF) frame_set(c, fr, "caller", caller);
    jbuf b = {0}, *saved = c->out;
    c->out = &b;
    int lc = c->loopctl;
    exec_body(c, fr, m->body, m->nbody);
    c->loopctl = lc;
    c->out = saved;
    c->depth--;
    return buf_val(&b);
}

static jv call_caller(jctx *c, jfunc *fn, jargs *a) {
    const jnode *cb = fn->node;
    if (++c->depth > NB_TMPL_MAX_DEPTH) fail(c, "RecursionError: maximum recursion depth exceeded");
    jframe *fr = frame_new(c, fn->closure);
    for (size_t i = 0; i < cb->nargs; i++) {
        const char *pn = cb->args[i]->str;
        jv v;
        if (!arg_get(a, (int)i, pn, &v)) v = cb->defs[i] ? eval(c, fr, cb->defs[i]) : mk_undef(c, pn, NULL, false);
        frame_set(c, fr, pn, v);
    }
    jbuf b = {0}, *saved = c->out;
    c->out = &b;
    exec_body(c, fr, cb->body, cb->nbody);
    c->out = saved;
    c->depth--;
    return buf_val(&b);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void fmt_time(jctx *c, jbuf *b, const char *fmt) {
    time_t t = (time_t)(c->now >= 0 ? c->now : (int64_t)time(NULL));
    struct tm tm;
    gmtime_r(&t, &tm);
    char out[512];
    size_t n = strftime(out, sizeof out, fmt, &tm);
    if (n == 0 && fmt[0]) fail(c, "ValueError: strftime format too long or invalid");
    buf_add(c, b, out, n);
}
#pragma GCC diagnostic pop

static jv call_builtin(jctx *c, jfunc *fn, jargs *a) {
    switch (fn->id) {
    case B_RANGE: {
        int64_t st = 0, en, sp = 1;
        if (a->npos == 1) en = need_int(c, a->pos[0], "range() argument");
        else if (a->npos >= 2) {
            st = need_int(c, a->pos[0], "range() argument");
            en = need_int(c, a->pos[1], "range() argument");
            if (a->npos >= 3) sp = need_int(c, a->pos[2], "range() argument");
        } else fail(c, "TypeError: range expected at least 1 argument, got 0");
        if (sp == 0) fail(c, "ValueError: range() arg 3 must not be zero");
        lbuild lb = {0};
        for (int64_t i = st; sp > 0 ? i < en : i > en;) {
            if (lb.n >= 1000000) fail(c, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            lb_push(c, &lb, vint(i));
            if (__builtin_add_overflow(i, sp, &i)) break;
        }
        if (lb.n > 100000)
            fail(c, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        return lb_done(c, &lb);
    }
    case B_NAMESPACE:
    case B_DICT: {
        jdict *d = dict_new(c);
        for (size_t i = 0; i < a->npos; i++) {
            jv x = a->pos[i];
            if (x.t == JV_DICT || x.t == JV_NS)
                for (size_t k = 0; k < x.u.d->n; k++) dict_set(c, d, x.u.d->k[k], x.u.d->v[k]);
            else if (x.t == JV_LIST)
                for (size_t k = 0; k < x.u.l->n; k++) {
                    jv pr = x.u.l->v[k];
                    if (pr.t != JV_LIST || pr.u.l->n != 2)
                        fail(c, "ValueError: dictionary update sequence element #%zu has the wrong length", k);
                    dict_set(c, d, pr.u.l->v[0], pr.u.l->v[1]);
                }
            else fail(c, "TypeError: '%s' object is not iterable", type_name(x));
        }
        for (size_t i = 0; i < a->nkw; i++) dict_set(c, d, vcstr(a->kwn[i]), a->kwv[i]);
        jv v = vdict(d);
        if (fn->id == B_NAMESPACE) v.t = JV_NS;
        return v;
    }
    case B_RAISE: {
        jv m = a->npos ? a->pos[0] : vstr("", 0);
        jv s = to_str(c, m);
        fail(c, "TemplateError: %.*s", (int)NB_MIN(s.u.s.n, 900), s.u.s.p);
    }
    case B_STRFTIME: {
        jv f = arg_or(a, 0, "format", UNDEF);
        need_str(c, f, "strftime_now() argument");
        jbuf b = {0};
        fmt_time(c, &b, cstr(c, f));
        return buf_val(&b);
    }
    }
    fail(c, "TypeError: '%s' is not callable", fn->name);
}

static jv call_value(jctx *c, jv fn, jargs *a, jframe *f) {
    step(c);
    if (fn.t == JV_UNDEF) undef_fail(c, fn);
    if (fn.t != JV_FUNC) fail(c, "TypeError: '%s' object is not callable", type_name(fn));
    switch (fn.u.fn->kind) {
    case F_MACRO: return call_macro(c, fn.u.fn, a, arg_or(a, -1, "caller", UNDEF));
    case F_CALLER: return call_caller(c, fn.u.fn, a);
    case F_METHOD: return call_method(c, fn.u.fn, a);
    case F_BUILTIN: return call_builtin(c, fn.u.fn, a);
    }
    (void)f;
    fail(c, "TypeError: not callable");
}

/* ---- sorting ------------------------------------------------------------------ */

typedef struct sortkey {
    jv key;
    jv val;
} sortkey;

static jv lower_if_str(jctx *c, jv v, bool case_sensitive) {
    return v.t == JV_STR && !case_sensitive ? str_case(c, v, 0) : v;
}

/* stable merge sort of keys by py_cmp */
static void msort(jctx *c, sortkey *v, sortkey *tmp, size_t n, bool rev) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(c, v, tmp, h, rev);
    msort(c, v + h, tmp, n - h, rev);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = py_cmp(c, v[j].key, v[i].key);
        if (rev ? r > 0 : r < 0) tmp[k++] = v[j++];
        else tmp[k++] = v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

/* attribute "a.b.0" lookup as jinja's make_attrgetter */
static jv attr_path(jctx *c, jv v, jv attr) {
    if (attr.t == JV_INT) return getitem_v(c, v, attr);
    need_str(c, attr, "attribute");
    const char *p = attr.u.s.p;
    size_t n = attr.u.s.n, st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') continue;
        jv part = vstr(p + st, i - st);
        bool digits = i > st;
        for (size_t k = st; k < i; k++) digits &= p[k] >= '0' && p[k] <= '9';
        v = digits ? getitem_v(c, v, vint(strtoll(cstr(c, part), NULL, 10))) : getitem_v(c, v, part);
        st = i + 1;
    }
    return v;
}

/* ---- filters ------------------------------------------------------------------ */

static jv to_list_v(jctx *c, jv v) { return vlist(iter_list(c, v)); }

static jv html_escape(jctx *c, jv s) {
    jbuf b = {0};
    for (size_t i = 0; i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;"
                        : ch == '\'' ? "&#39;" : NULL;
        if (e) buf_cstr(c, &b, e);
        else buf_add(c, &b, &ch, 1);
    }
    return buf_val(&b);
}

static jv filter_indent(jctx *c, jv s, jargs *a) {
    jv w = arg_or(a, 0, "width", vint(4));
    bool first = truthy(arg_or(a, 1, "first", vbool(false))), blank = truthy(arg_or(a, 2, "blank", vbool(false)));
    jv ind;
    if (w.t == JV_STR) ind = w;
    else ind = repeat(c, vstr(" ", 1), need_int(c, w, "width"));
    jargs none = {0};
    jv sn = str_concat(c, s, vstr("\n", 1));
    jlist *lines = call_str_method(c, sn, "splitlines", &none).u.l;
    jbuf b = {0};
    for (size_t i = 0; i < lines->n; i++) {
        jv ln = lines->v[i];
        if (i) buf_cstr(c, &b, "\n");
        if (i && (blank || ln.u.s.n)) buf_add(c, &b, ind.u.s.p, ind.u.s.n);
        buf_add(c, &b, ln.u.s.p, ln.u.s.n);
    }
    jv r = buf_val(&b);
    if (first) r = str_concat(c, ind, r);
    return r;
}

/* map / select / reject / selectattr / rejectattr */
static jv filter_seq(jctx *c, jframe *f, const char *name, jv seq, jargs *a) {
    if (!truthy(seq)) return vlist(list_new(c, 0)); /* jinja2: `if value:` before iterating */
    jlist *l = iter_list(c, seq);
    lbuild lb = {0};
    bool is_map = !strcmp(name, "map");
    bool attr = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
    bool reject = !strcmp(name, "reject") || !strcmp(name, "rejectattr");
    if (is_map) {
        jv at;
        if (arg_get(a, -1, "attribute", &at)) {
            jv dflt = arg_or(a, -1, "default", UNDEF);
            for (size_t i = 0; i < l->n; i++) {
                jv v = attr_path(c, l->v[i], at);
                lb_push(c, &lb, v.t == JV_UNDEF && dflt.t != JV_UNDEF ? dflt : v);
            }
            return lb_done(c, &lb);
        }
        if (a->npos == 0) return to_list_v(c, seq);
        need_str(c, a->pos[0], "map filter name");
        const char *fname = cstr(c, a->pos[0]);
        jargs rest = {.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
        for (size_t i = 0; i < l->n; i++) lb_push(c, &lb, apply_filter(c, f, fname, l->v[i], &rest));
        return lb_done(c, &lb);
    }
    size_t off = 0;
    jv at = UNDEF;
    if (attr) {
        if (a->npos < 1) fail(c, "TypeError: %s needs an attribute name", name);
        at = a->pos[0];
        off = 1;
    }
    const char *tname = NULL;
    if (a->npos > off) {
        need_str(c, a->pos[off], "test name");
        tname = cstr(c, a->pos[off]);
    }
    jargs rest = {.pos = a->npos > off + 1 ? a->pos + off + 1 : NULL, .npos = a->npos > off + 1 ? a->npos - off - 1 : 0,
                  .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    for (size_t i = 0; i < l->n; i++) {
        step(c);
        jv v = attr ? attr_path(c, l->v[i], at) : l->v[i];
        bool ok = tname ? apply_test(c, f, tname, v, &rest) : truthy(v);
        if (ok != reject) lb_push(c, &lb, l->v[i]);
    }
    return lb_done(c, &lb);
}

static jv filter_sort(jctx *c, jv seq, jargs *a, bool dictsort) {
    bool rev, cs;
    jv at = UNDEF;
    jlist *l;
    int by_value = 0;
    if (dictsort) {
        if (seq.t != JV_DICT) fail(c, "TypeError: dictsort expects a mapping, not %s", type_name(seq));
        cs = truthy(arg_or(a, 0, "case_sensitive", vbool(false)));
        jv by = arg_or(a, 1, "by", vcstr("key"));
        if (str_eq(by, "value")) by_value = 1;
        else if (!str_eq(by, "key")) fail(c, "FilterArgumentError: You can only sort by either \"key\" or \"value\"");
        rev = truthy(arg_or(a, 2, "reverse", vbool(false)));
        jargs none = {0};
        jfunc tmp = {.kind = F_METHOD, .self = seq, .name = "items"};
        l = call_method(c, &tmp, &none).u.l;
    } else {
        rev = truthy(arg_or(a, 0, "reverse", vbool(false)));
        cs = truthy(arg_or(a, 1, "case_sensitive", vbool(false)));
        at = arg_or(a, 2, "attribute", NONE);
        l = iter_list(c, seq);
    }
    sortkey *v = alloc(c, (l->n + 1) * sizeof *v), *tmp = alloc(c, (l->n + 1) * sizeof *tmp);
    for (size_t i = 0; i < l->n; i++) {
        jv k = l->v[i];
        if (dictsort) k = k.u.l->v[by_value];
        else if (at.t != JV_NONE && at.t != JV_UNDEF) k = attr_path(c, k, at);
        v[i].key = lower_if_str(c, k, cs);
        v[i].val = l->v[i];
    }
    msort(c, v, tmp, l->n, rev);
    jlist *o = list_new(c, l->n);
    for (size_t i = 0; i < l->n; i++) o->v[i] = v[i].val;
    return vlist(o);
}

static jv filter_tojson(jctx *c, jv v, jargs *a) {
    jsonopt o = {.indent = NULL, .item_sep = ", ", .key_sep = ": "};
    /* Transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    jv ind = arg_or(a, 1, "indent", NONE);
    if (ind.t == JV_INT) {
        int64_t k = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i;
        char *s = alloc(c, (size_t)k + 1);
        memset(s, ' ', (size_t)k);
        o.indent = s;
    } else if (ind.t == JV_STR) {
        o.indent = cstr(c, ind);
    } else if (ind.t != JV_NONE && ind.t != JV_UNDEF) {
        fail(c, "TypeError: tojson indent must be an int or a string, not %s", type_name(ind));
    }
    if (o.indent) o.item_sep = ",";
    jv seps = arg_or(a, 2, "separators", NONE);
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
        o.item_sep = cstr(c, seps.u.l->v[0]);
        o.key_sep = cstr(c, seps.u.l->v[1]);
    }
    o.ensure_ascii = truthy(arg_or(a, 0, "ensure_ascii", vbool(false)));
    o.sort_keys = truthy(arg_or(a, 3, "sort_keys", vbool(false)));
    jbuf b = {0};
    json_val(c, &b, v, &o, 0);
    return buf_val(&b);
}

static bool parse_py_int(const char *s, size_t n, int base, int64_t *out) {
    char buf[72];
    size_t k = 0;
    size_t i = 0, e = n;
    while (i < e && (s[i] == ' ' || (s[i] >= 9 && s[i] <= 13))) i++;
    while (e > i && (s[e - 1] == ' ' || (s[e - 1] >= 9 && s[e - 1] <= 13))) e--;
    if (i == e || e - i >= sizeof buf) return false;
    for (size_t j = i; j < e; j++) {
        if (s[j] == '_') {
            if (j == i || j + 1 == e || s[j - 1] == '_') return false;
            continue;
        }
        buf[k++] = s[j];
    }
    buf[k] = '\0';
    size_t st = (buf[0] == '-' || buf[0] == '+') ? 1 : 0;
    if (base == 10 && buf[st] == '0' && k > st + 1) {
        for (size_t j = st; j < k; j++)
            if (buf[j] != '0') return false;
    }
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, base);
    if (*end || errno || end == buf + st) return false;
    *out = v;
    return true;
}

static jv filter_int(jctx *c, jv v, jargs *a) {
    jv dflt = arg_or(a, 0, "default", vint(0));
    int64_t base = need_int(c, arg_or(a, 1, "base", vint(10)), "base");
    if (v.t == JV_INT) return v;
    if (v.t == JV_BOOL) return vint(v.u.b);
    if (v.t == JV_FLOAT) {
        if (isnan(v.u.f) || isinf(v.u.f) || fabs(v.u.f) > 9.2e18) return dflt;
        return vint((int64_t)v.u.f);
    }
    if (v.t == JV_STR) {
        int64_t r;
        if (base >= 2 && base <= 36 && parse_py_int(v.u.s.p, v.u.s.n, (int)base, &r)) return vint(r);
        char *s = (char *)cstr(c, v), *end;
        double d = strtod(s, &end);
        while (*end == ' ' || *end == '\n' || *end == '\t') end++;
        if (end != s && !*end && isfinite(d) && fabs(d) < 9.2e18) return vint((int64_t)d);
    }
    return dflt;
}

static jv filter_float(jctx *c, jv v, jargs *a) {
    jv dflt = arg_or(a, 0, "default", vfloat(0.0));
    if (is_num(v)) return vfloat(num_f(v));
    if (v.t == JV_STR) {
        char *s = (char *)cstr(c, v), *end;
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        double d = strtod(s, &end);
        while (*end == ' ' || *end == '\n' || *end == '\t') end++;
        if (end != s && !*end) return vfloat(d);
    }
    return dflt;
}

static jv minmax(jctx *c, jv seq, jargs *a, bool max) {
    jlist *l = iter_list(c, seq);
    bool cs = truthy(arg_or(a, 0, "case_sensitive", vbool(false)));
    jv at = arg_or(a, 1, "attribute", NONE);
    if (l->n == 0) return mk_undef(c, "no items", "sequence", false);
    jv best = l->v[0], bk = lower_if_str(c, at.t == JV_NONE ? best : attr_path(c, best, at), cs);
    for (size_t i = 1; i < l->n; i++) {
        jv k = lower_if_str(c, at.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], at), cs);
        int r = py_cmp(c, k, bk);
        if (max ? r > 0 : r < 0) { best = l->v[i]; bk = k; }
    }
    return best;
}

static jv apply_filter(jctx *c, jframe *f, const char *name, jv v, jargs *a) {
    step(c);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv dv = arg_or(a, 0, "default_value", vstr("", 0));
        bool boolean = truthy(arg_or(a, 1, "boolean", vbool(false)));
        if (v.t == JV_UNDEF || (boolean && !truthy(v))) return dv;
        return v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return vint(py_len(c, v));
    if (!strcmp(name, "safe") || !strcmp(name, "string")) {
        jv r = to_str(c, v);
        if (name[1] == 'a') r.markup = 1; /* markupsafe.Markup */
        return r;
    }
    if (!strcmp(name, "tojson")) return filter_tojson(c, v, a);
    if (!strcmp(name, "list")) return to_list_v(c, v);
    if (!strcmp(name, "items")) {
        jv r = vlist(list_new(c, 0));
        if (v.t != JV_UNDEF && v.t != JV_DICT) fail(c, "TypeError: Can only get item pairs from a mapping.");
        if (v.t == JV_DICT) {
            jargs none = {0};
            jfunc tmp = {.kind = F_METHOD, .self = v, .name = "items"};
            r = call_method(c, &tmp, &none);
        }
        r.tuple = 2; /* a generator in jinja2 */
        return r;
    }
    if (!strcmp(name, "dictsort")) return filter_sort(c, v, a, true);
    if (!strcmp(name, "sort")) return filter_sort(c, v, a, false);
    if (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr")) {
        jv r = filter_seq(c, f, name, v, a);
        r.tuple = 2; /* jinja2 returns a generator */
        return r;
    }
    if (!strcmp(name, "join")) {
        jv d = arg_or(a, 0, "d", vstr("", 0));
        jv at = arg_or(a, 1, "attribute", NONE);
        jlist *l = iter_list(c, v);
        jv sep = to_str(c, d);
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) buf_add(c, &b, sep.u.s.p, sep.u.s.n);
            jv x = at.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], at);
            py_str_into(c, &b, x);
        }
        return buf_val(&b);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        if (name[0] == 'l' && v.t == JV_LIST && v.tuple == 2) fail(c, "TypeError: 'generator' object is not reversible");
        jlist *l = iter_list(c, v);
        if (!l->n) return mk_undef(c, name[0] == 'f' ? "first" : "last", "No", false);
        return l->v[name[0] == 'f' ? 0 : l->n - 1];
    }
    if (!strcmp(name, "int")) return filter_int(c, v, a);
    if (!strcmp(name, "float")) return filter_float(c, v, a);
    if (!strcmp(name, "abs")) {
        if (v.t == JV_INT) {
            if (v.u.i == INT64_MIN) fail(c, "OverflowError: integer result too large");
            return vint(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.t == JV_BOOL) return vint(v.u.b);
        if (v.t == JV_FLOAT) return vfloat(fabs(v.u.f));
        if (v.t == JV_UNDEF) undef_fail(c, v);
        fail(c, "TypeError: bad operand type for abs(): '%s'", type_name(v));
    }
    if (!strcmp(name, "attr")) {
        jv at = arg_or(a, 0, "name", UNDEF);
        need_str(c, at, "attribute name");
        if (v.t == JV_DICT) return mk_undef(c, cstr(c, at), obj_type_repr(c, v), false); /* attr() skips items */
        return getattr_v(c, v, cstr(c, at));
    }
    if (!strcmp(name, "unique")) {
        jlist *l = iter_list(c, v);
        bool cs = truthy(arg_or(a, 0, "case_sensitive", vbool(false)));
        jv at = arg_or(a, 1, "attribute", NONE);
        lbuild seen = {0}, out = {0};
        for (size_t i = 0; i < l->n; i++) {
            jv k = lower_if_str(c, at.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], at), cs);
            bool dup = false;
            for (size_t j = 0; j < seen.n && !dup; j++) dup = py_eq(seen.v[j], k);
            if (dup) continue;
            lb_push(c, &seen, k);
            lb_push(c, &out, l->v[i]);
        }
        jv r = lb_done(c, &out);
        r.tuple = 2; /* a generator in jinja2 */
        return r;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) return slice_v(c, v, NONE, NONE, vint(-1));
        jlist *l = iter_list(c, v), *o = list_new(c, l->n);
        for (size_t i = 0; i < l->n; i++) o->v[i] = l->v[l->n - 1 - i];
        return vlist(o);
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) return minmax(c, v, a, name[1] == 'a');
    if (!strcmp(name, "sum")) {
        jlist *l = iter_list(c, v);
        jv at = arg_or(a, 0, "attribute", NONE), acc = arg_or(a, 1, "start", vint(0));
        for (size_t i = 0; i < l->n; i++) acc = binop(c, JOP_ADD, acc, at.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], at));
        return acc;
    }
    if (!strcmp(name, "round")) {
        int64_t prec = need_int(c, arg_or(a, 0, "precision", vint(0)), "precision");
        jv method = arg_or(a, 1, "method", vcstr("common"));
        if (!is_num(v)) fail(c, "TypeError: type %s doesn't define __round__ method", type_name(v));
        double x = num_f(v), m = pow(10.0, (double)prec);
        if (str_eq(method, "common")) x = round(x * m) / m;
        else if (str_eq(method, "ceil")) x = ceil(x * m) / m;
        else if (str_eq(method, "floor")) x = floor(x * m) / m;
        else fail(c, "FilterArgumentError: method must be common, ceil or floor");
        return vfloat(x);
    }
    if (!strcmp(name, "format")) {
        need_str(c, v, "format string");
        jv args;
        if (a->npos == 1) args = a->pos[0];
        else {
            jlist *l = list_new(c, a->npos);
            if (a->npos) memcpy(l->v, a->pos, a->npos * sizeof(jv));
            args = vlist(l);
            args.tuple = 1;
            if (a->npos == 1) args = a->pos[0];
        }
        if (a->npos == 1 && !(args.t == JV_LIST && args.tuple)) {
            jlist *l = list_new(c, 1);
            l->v[0] = args;
            args = vlist(l);
            args.tuple = 1;
        }
        return percent_format(c, v, args);
    }
    if (!strcmp(name, "batch") || !strcmp(name, "slice")) fail(c, "TemplateError: filter '%s' is not supported", name);
    if (!strcmp(name, "wordcount")) {
        jv s = to_str(c, v);
        jargs none = {0};
        return vint((int64_t)str_split(c, s, NONE, -1, false).u.l->n + 0 * (int64_t)none.npos);
    }
    /* string filters: the value is str()'d first */
    jv s = to_str(c, v);
    if (v.t == JV_UNDEF && strcmp(name, "trim") && strcmp(name, "upper") && strcmp(name, "lower") &&
        strcmp(name, "title") && strcmp(name, "capitalize") && strcmp(name, "replace") && strcmp(name, "indent") &&
        strcmp(name, "escape") && strcmp(name, "e") && strcmp(name, "center") && strcmp(name, "truncate") &&
        strcmp(name, "striptags") && strcmp(name, "wordwrap") && strcmp(name, "urlencode"))
        goto unknown;
    if (!strcmp(name, "trim")) return str_strip(c, s, arg_or(a, 0, "chars", NONE), true, true);
    if (!strcmp(name, "upper")) return str_case(c, s, 1);
    if (!strcmp(name, "lower")) return str_case(c, s, 0);
    if (!strcmp(name, "capitalize")) return str_case(c, s, 3);
    if (!strcmp(name, "title")) {
        /* jinja: capitalise each word separated by whitespace, - ( { [ < */
        char *p = alloc(c, s.u.s.n + 1);
        bool start = true;
        for (size_t i = 0; i < s.u.s.n; i++) {
            char ch = s.u.s.p[i];
            bool sepc = strchr(" \t\n\r\v\f-({[<", ch) && ch;
            if (sepc) { p[i] = ch; start = true; continue; }
            if (start) p[i] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
            else p[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
            start = false;
        }
        return vstr(p, s.u.s.n);
    }
    if (!strcmp(name, "replace")) {
        jv o = arg_or(a, 0, "old", UNDEF), nw = arg_or(a, 1, "new", UNDEF);
        jv cnt = arg_or(a, 2, "count", NONE);
        return str_replace(c, s, o, nw, cnt.t == JV_NONE ? -1 : need_int(c, cnt, "count"));
    }
    if (!strcmp(name, "indent")) return filter_indent(c, s, a);
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
        jv r = v.t == JV_STR && v.markup ? v : html_escape(c, s);
        r.markup = 1;
        return r;
    }
    if (!strcmp(name, "center")) {
        jargs b = {.pos = a->pos, .npos = a->npos ? 1 : 0};
        if (!a->npos) {
            jv w = vint(80);
            b.pos = &w;
            b.npos = 1;
            return call_str_method(c, s, "center", &b);
        }
        return call_str_method(c, s, "center", &b);
    }
    if (!strcmp(name, "truncate")) {
        int64_t len = need_int(c, arg_or(a, 0, "length", vint(255)), "length");
        bool kill = truthy(arg_or(a, 1, "killwords", vbool(false)));
        jv end = arg_or(a, 2, "end", vstr("...", 3));
        int64_t leeway = need_int(c, arg_or(a, 3, "leeway", vint(5)), "leeway");
        need_str(c, end, "end");
        int64_t n = py_len(c, s);
        if (n <= len + leeway) return s;
        int64_t keep = len - (int64_t)u8_len(end.u.s.p, end.u.s.n);
        if (keep < 0) keep = 0;
        jv head = slice_v(c, s, vint(0), vint(keep), NONE);
        if (!kill) {
            const char *sp = NULL;
            for (size_t i = head.u.s.n; i-- > 0;)
                if (head.u.s.p[i] == ' ') { sp = head.u.s.p + i; break; }
            if (sp) head = vstr(head.u.s.p, (size_t)(sp - head.u.s.p));
        }
        return str_concat(c, head, end);
    }
    if (!strcmp(name, "striptags")) {
        jbuf b = {0};
        bool in = false, sp = false;
        for (size_t i = 0; i < s.u.s.n; i++) {
            char ch = s.u.s.p[i];
            if (ch == '<') { in = true; continue; }
            if (ch == '>' && in) { in = false; continue; }
            if (in) continue;
            if (is_num(vint(0)) && (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r')) { sp = b.n > 0; continue; }
            if (sp) { buf_cstr(c, &b, " "); sp = false; }
            buf_add(c, &b, &ch, 1);
        }
        return buf_val(&b);
    }
unknown:
    fail(c, "TemplateAssertionError: No filter named '%s'.", name);
}

/* ---- tests ----------------------------------------------------------------------- */

static bool apply_test(jctx *c, jframe *f, const char *name, jv v, jargs *a) {
    step(c);
    (void)f;
    jv x = a->npos ? a->pos[0] : UNDEF;
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "mapping")) return v.t == JV_DICT;
    if (!strcmp(name, "number")) return is_num(v);
    if (!strcmp(name, "integer")) return v.t == JV_INT;
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.u.b;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.u.b;
    if (!strcmp(name, "iterable")) return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    if (!strcmp(name, "sequence")) return v.t == JV_STR || (v.t == JV_LIST && v.tuple != 2) || v.t == JV_DICT;
    if (!strcmp(name, "callable")) return v.t == JV_FUNC;
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return py_eq(v, x);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !py_eq(v, x);
    if (!strcmp(name, "sameas")) {
        if (v.t != x.t) return false;
        if (v.t == JV_NONE || v.t == JV_UNDEF) return true;
        if (v.t == JV_BOOL) return v.u.b == x.u.b;
        if (v.t == JV_INT) return v.u.i == x.u.i;
        return py_eq(v, x) && (v.t != JV_LIST || v.u.l == x.u.l) && (v.t != JV_DICT || v.u.d == x.u.d);
    }
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return py_cmp_op(c, v, x, "<") < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return py_cmp_op(c, v, x, "<=") <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return py_cmp_op(c, v, x, ">") > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return py_cmp_op(c, v, x, ">=") >= 0;
    if (!strcmp(name, "in")) return contains(c, x, v);
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        int64_t i = need_int(c, v, "value");
        return (i & 1) == (name[0] == 'o');
    }
    if (!strcmp(name, "divisibleby")) {
        int64_t i = need_int(c, v, "value"), d = need_int(c, x, "divisor");
        if (d == 0) fail(c, "ZeroDivisionError: integer division or modulo by zero");
        return d == -1 || i % d == 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != JV_STR) fail(c, "AttributeError: '%s' object has no attribute '%s'", type_name(v), name);
        jargs none = {0};
        return truthy(call_str_method(c, v, name[0] == 'l' ? "islower" : "isupper", &none));
    }
    if (!strcmp(name, "escaped")) return false;
    if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        static const char *const filters[] = {"default", "d", "length", "count", "safe", "string", "tojson", "list",
            "items", "dictsort", "sort", "map", "select", "reject", "selectattr", "rejectattr", "join", "first", "last",
            "int", "float", "abs", "attr", "unique", "reverse", "min", "max", "sum", "round", "format", "trim", "upper",
            "lower", "capitalize", "title", "replace", "indent", "escape", "e", "center", "truncate", "striptags",
            "wordcount", NULL};
        static const char *const tests[] = {"defined", "undefined", "none", "string", "mapping", "number", "integer",
            "float", "boolean", "true", "false", "iterable", "sequence", "callable", "eq", "equalto", "ne", "sameas",
            "lt", "le", "gt", "ge", "in", "odd", "even", "divisibleby", "lower", "upper", "escaped", "filter", "test",
            "lessthan", "greaterthan", NULL};
        if (v.t != JV_STR) return false;
        return find_name(name[0] == 'f' ? filters : tests, cstr(c, v)) >= 0;
    }
    fail(c, "TemplateAssertionError: No test named '%s'.", name);
}

/* ---- expressions ---------------------------------------------------------------- */

static jv eval(jctx *c, jframe *f, const jnode *n) {
    step(c);
    if (++c->depth > NB_TMPL_MAX_DEPTH * 4) fail(c, "TemplateError: expressions nested deeper than %d", NB_TMPL_MAX_DEPTH * 4);
    c->line = n->line;
    jv r = UNDEF;
    switch (n->kind) {
    case JN_CONST: r = n->cv == 0 ? NONE : vbool(n->cv == 2); break;
    case JN_INT: r = vint(n->ival); break;
    case JN_FLOAT: r = vfloat(n->fval); break;
    case JN_STR: r = vstr(n->str, n->len); break;
    case JN_NAME: r = lookup(c, f, n->str); break;
    case JN_LIST:
    case JN_TUPLE: {
        jlist *l = list_new(c, n->nargs);
        for (size_t i = 0; i < n->nargs; i++) l->v[i] = eval(c, f, n->args[i]);
        r = vlist(l);
        r.tuple = n->kind == JN_TUPLE;
        break;
    }
    case JN_DICT: {
        jdict *d = dict_new(c);
        for (size_t i = 0; i < n->nargs; i++) {
            jv k = eval(c, f, n->args[i]);
            if (!hashable(k) || k.t == JV_DICT) fail(c, "TypeError: unhashable type: '%s'", type_name(k));
            dict_set(c, d, k, eval(c, f, n->defs[i]));
        }
        r = vdict(d);
        break;
    }
    case JN_BINOP:
        if (n->op == JOP_AND) {
            r = eval(c, f, n->a);
            if (truthy(r)) r = eval(c, f, n->b);
        } else if (n->op == JOP_OR) {
            r = eval(c, f, n->a);
            if (!truthy(r)) r = eval(c, f, n->b);
        } else {
            jv a = eval(c, f, n->a);
            jv b = eval(c, f, n->b);
            r = binop(c, n->op, a, b);
        }
        break;
    case JN_UNARY: {
        jv a = eval(c, f, n->a);
        if (n->op == JOP_NOT) r = vbool(!truthy(a));
        else {
            if (a.t == JV_UNDEF) undef_fail(c, a);
            if (!is_num(a)) fail(c, "TypeError: bad operand type for unary %c: '%s'", n->op == JOP_NEG ? '-' : '+', type_name(a));
            if (n->op == JOP_POS) r = a.t == JV_BOOL ? vint(a.u.b) : a;
            else if (a.t == JV_FLOAT) r = vfloat(-a.u.f);
            else {
                if (num_i(a) == INT64_MIN) fail(c, "OverflowError: integer result too large");
                r = vint(-num_i(a));
            }
        }
        break;
    }
    case JN_COMPARE: {
        jv a = eval(c, f, n->a);
        bool ok = true;
        for (size_t i = 0; i < n->nargs && ok; i++) {
            jv b = eval(c, f, n->args[i]);
            switch (n->ops[i]) {
            case JOP_EQ: ok = py_eq(a, b); break;
            case JOP_NE: ok = !py_eq(a, b); break;
            case JOP_LT: ok = py_cmp_op(c, a, b, "<") < 0; break;
            case JOP_LE: ok = py_cmp_op(c, a, b, "<=") <= 0; break;
            case JOP_GT: ok = py_cmp_op(c, a, b, ">") > 0; break;
            case JOP_GE: ok = py_cmp_op(c, a, b, ">=") >= 0; break;
            case JOP_IN: ok = contains(c, b, a); break;
            case JOP_NOTIN: ok = !contains(c, b, a); break;
            }
            a = b;
        }
        r = vbool(ok);
        break;
    }
    case JN_COND:
        if (truthy(eval(c, f, n->a))) r = eval(c, f, n->b);
        else r = n->c ? eval(c, f, n->c) : UNDEF;
        break;
    case JN_GETATTR: r = getattr_v(c, eval(c, f, n->a), n->str); break;
    case JN_GETITEM: {
        jv o = eval(c, f, n->a);
        r = getitem_v(c, o, eval(c, f, n->b));
        break;
    }
    case JN_SLICE: {
        /* x[a:b, c] parses as a tuple holding a slice; Python refuses to
         * index with it at run time, and so do we (the slice has no object). */
        if (!n->a) fail(c, "TypeError: a slice inside a subscript tuple cannot be used as an index");
        jv o = eval(c, f, n->a);
        jv p[3];
        for (int i = 0; i < 3; i++) p[i] = n->args[i] ? eval(c, f, n->args[i]) : NONE;
        r = slice_v(c, o, p[0], p[1], p[2]);
        break;
    }
    case JN_CALL: {
        jv fn = eval(c, f, n->a);
        jargs a;
        eval_args(c, f, n, &a);
        r = call_value(c, fn, &a, f);
        break;
    }
    case JN_FILTER: {
        jv v = n->a ? eval(c, f, n->a) : UNDEF;
        jargs a;
        eval_args(c, f, n, &a);
        r = apply_filter(c, f, n->str, v, &a);
        break;
    }
    case JN_TEST: {
        jv v = eval(c, f, n->a);
        jargs a;
        eval_args(c, f, n, &a);
        bool t = apply_test(c, f, n->str, v, &a);
        r = vbool(n->neg ? !t : t);
        break;
    }
    default: fail(c, "TemplateError: unexpected node %d", n->kind);
    }
    c->depth--;
    return r;
}

/* Applies a filter chain parsed with a NULL innermost operand to v. */
static jv apply_chain(jctx *c, jframe *f, const jnode *chain, jv v) {
    if (!chain) return v;
    if (chain->a) v = apply_chain(c, f, chain->a, v);
    jargs a;
    eval_args(c, f, chain, &a);
    return apply_filter(c, f, chain->str, v, &a);
}

/* ---- statements ------------------------------------------------------------------- */

static void assign(jctx *c, jframe *f, const jnode *target, jv v) {
    if (target->kind == JN_NAME) { frame_set(c, f, target->str, v); return; }
    if (target->kind == JN_GETATTR) {
        jv ns = lookup(c, f, target->a->str);
        if (ns.t != JV_NS) fail(c, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
        dict_set(c, ns.u.d, vcstr(target->str), v);
        return;
    }
    /* tuple unpacking */
    jlist *l = iter_list(c, v);
    if (l->n != target->nargs) {
        if (l->n > target->nargs) fail(c, "ValueError: too many values to unpack (expected %zu)", target->nargs);
        fail(c, "ValueError: not enough values to unpack (expected %zu, got %zu)", target->nargs, l->n);
    }
    for (size_t i = 0; i < l->n; i++) assign(c, f, target->args[i], l->v[i]);
}

static void exec_for(jctx *c, jframe *f, const jnode *n) {
    jv it = eval(c, f, n->b);
    jlist *src = iter_list(c, it);
    jlist *items = src;
    if (n->c) { /* filtered loop: loop.* counts the kept items */
        lbuild lb = {0};
        for (size_t i = 0; i < src->n; i++) {
            jframe *tf = frame_new(c, f);
            assign(c, tf, n->a, src->v[i]);
            if (truthy(eval(c, tf, n->c))) lb_push(c, &lb, src->v[i]);
        }
        items = lb_done(c, &lb).u.l;
    }
    if (items->n == 0) {
        exec_body(c, f, n->els, n->nels);
        return;
    }
    size_t len = items->n;
    for (size_t i = 0; i < len; i++) {
        step(c);
        jframe *fr = frame_new(c, f);
        jdict *loop = dict_new(c);
        dict_set(c, loop, vcstr("index"), vint((int64_t)i + 1));
        dict_set(c, loop, vcstr("index0"), vint((int64_t)i));
        dict_set(c, loop, vcstr("revindex"), vint((int64_t)(len - i)));
        dict_set(c, loop, vcstr("revindex0"), vint((int64_t)(len - i - 1)));
        dict_set(c, loop, vcstr("first"), vbool(i == 0));
        dict_set(c, loop, vcstr("last"), vbool(i + 1 == len));
        dict_set(c, loop, vcstr("length"), vint((int64_t)len));
        dict_set(c, loop, vcstr("depth"), vint(1));
        dict_set(c, loop, vcstr("depth0"), vint(0));
        dict_set(c, loop, vcstr("previtem"), i ? items->v[i - 1] : mk_undef(c, "previtem", "LoopContext", false));
        dict_set(c, loop, vcstr("nextitem"), i + 1 < len ? items->v[i + 1] : mk_undef(c, "nextitem", "LoopContext", false));
        jv lv = vdict(loop);
        lv.t = JV_NS; /* attribute access, not a mapping */
        frame_set(c, fr, "loop", lv);
        assign(c, fr, n->a, items->v[i]);
        exec_body(c, fr, n->body, n->nbody);
        if (c->loopctl == 1) { c->loopctl = 0; break; }
        c->loopctl = 0;
    }
}

static void exec_stmt(jctx *c, jframe *f, const jnode *n) {
    step(c);
    c->line = n->line;
    switch (n->kind) {
    case JN_TEXT: buf_add(c, c->out, n->str, n->len); return;
    case JN_OUTPUT: {
        jv v = eval(c, f, n->a);
        if (v.t == JV_STR) buf_add(c, c->out, v.u.s.p, v.u.s.n);
        else py_str_into(c, c->out, v);
        return;
    }
    case JN_IF:
        if (truthy(eval(c, f, n->a))) exec_body(c, f, n->body, n->nbody);
        else exec_body(c, f, n->els, n->nels);
        return;
    case JN_FOR: exec_for(c, f, n); return;
    case JN_SET:
        if (n->b) assign(c, f, n->a, eval(c, f, n->b));
        else {
            jbuf b = {0}, *saved = c->out;
            c->out = &b;
            exec_body(c, f, n->body, n->nbody);
            c->out = saved;
            assign(c, f, n->a, apply_chain(c, f, n->c, buf_val(&b)));
        }
        return;
    case JN_MACRO: {
        jfunc *fn = alloc(c, sizeof *fn);
        fn->kind = F_MACRO;
        fn->node = n;
        fn->closure = f;
        fn->name = n->str;
        jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        frame_set(c, f, n->str, v);
        return;
    }
    case JN_CALLBLOCK: {
        jfunc *cf = alloc(c, sizeof *cf);
        cf->kind = F_CALLER;
        cf->node = n;
        cf->closure = f;
        cf->name = "caller";
        jv caller = {.t = JV_FUNC};
        caller.u.fn = cf;
        const jnode *call = n->a;
        jv fn = eval(c, f, call->a);
        jargs a;
        eval_args(c, f, call, &a);
        jv r;
        if (fn.t == JV_FUNC && fn.u.fn->kind == F_MACRO) r = call_macro(c, fn.u.fn, &a, caller);
        else r = call_value(c, fn, &a, f);
        py_str_into(c, c->out, r);
        return;
    }
    case JN_FILTERBLOCK: {
        jbuf b = {0}, *saved = c->out;
        c->out = &b;
        exec_body(c, f, n->body, n->nbody);
        c->out = saved;
        py_str_into(c, c->out, apply_chain(c, f, n->c, buf_val(&b)));
        return;
    }
    case JN_BREAK: c->loopctl = 1; return;
    case JN_CONTINUE: c->loopctl = 2; return;
    default: fail(c, "TemplateError: unexpected statement %d", n->kind);
    }
}

static void exec_body(jctx *c, jframe *f, jnode *const *body, size_t n) {
    if (++c->depth > NB_TMPL_MAX_DEPTH * 4) fail(c, "TemplateError: blocks nested deeper than %d", NB_TMPL_MAX_DEPTH * 4);
    for (size_t i = 0; i < n && !c->loopctl; i++) exec_stmt(c, f, body[i]);
    c->depth--;
}

/* ---- public -------------------------------------------------------------------- */

nb_status nb_tmpl_render(const nb_tmpl *t, const void *context, const nb_tmpl_opts *opts, char **out,
                         size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    const json_t *ctxj = context;
    if (ctxj && !json_is_object(ctxj)) return nb_fail(NB_ERR_INVALID, "template context: must be a JSON object");
    jctx *c = calloc(1, sizeof *c);
    if (!c) return nb_fail(NB_ERR_NOMEM, "template: out of memory");
    c->ar.limit = opts && opts->max_memory ? opts->max_memory : NB_TMPL_MAX_MEMORY;
    c->max_output = opts && opts->max_output ? opts->max_output : NB_TMPL_MAX_OUTPUT;
    c->max_steps = opts && opts->max_steps ? opts->max_steps : NB_TMPL_MAX_STEPS;
    c->max_ms = opts && opts->max_ms ? opts->max_ms : NB_TMPL_MAX_MS;
    c->now = opts ? opts->now : -1;
    c->main.heap = true;
    c->out = &c->main;
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    nb_status st = NB_OK;
    if (setjmp(c->jb) == 0) {
        c->globals = dict_new(c);
        if (ctxj) {
            jv g = from_json(c, ctxj, 0);
            c->globals = g.u.d;
        }
        c->root = frame_new(c, NULL);
        exec_body(c, c->root, t->body, t->nbody);
        c->loopctl = 0;
        if (!c->main.p) {
            c->main.p = malloc(1);
            if (!c->main.p) oom(c);
            c->main.p[0] = '\0';
        }
        *out = c->main.p;
        if (out_len) *out_len = c->main.n;
    } else {
        free(c->main.p);
        st = nb_fail(c->st ? c->st : NB_ERR_INVALID, "%s", c->err);
    }
    ja_free_all(&c->ar);
    free(c);
    return st;
}

bool nb_tmpl_parse_time(const char *s, int64_t *out) {
    int Y, M, D, h = 0, m = 0, sec = 0;
    char sep;
    int k = sscanf(s, "%d-%d-%d%c%d:%d:%d", &Y, &M, &D, &sep, &h, &m, &sec);
    if (k != 3 && k != 7) return false;
    if (k == 7 && sep != 'T' && sep != ' ') return false;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60) return false;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return false;
    *out = (int64_t)t;
    return true;
}
