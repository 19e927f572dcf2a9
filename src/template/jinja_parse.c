/* Jinja lexer and parser: template text -> AST (jinja_int.h).
 *
 * The lexer follows jinja2 3.1's rules with trim_blocks and lstrip_blocks
 * on: newlines normalised to "\n" and one trailing newline dropped
 * (keep_trailing_newline=False); "{%-" / "-%}" strip whitespace; "{%+"
 * disables lstrip for one tag; a block or comment tag alone on its line
 * loses the indentation before it, and the newline after "%}" / "#}" is
 * dropped; {% raw %} ... {% endraw %} is literal. The parser is a
 * recursive-descent copy of jinja2's grammar (same precedence: filters and
 * tests bind tighter than arithmetic; `not` looser than comparisons). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

/* ---- arena ------------------------------------------------------------- */

struct jarena_chunk {
    jarena_chunk *next;
    size_t cap, off;
    max_align_t data[];
};

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jarena_chunk *c = a->head;
    if (!c || c->cap - c->off < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        if (a->limit && (a->used + cap > a->limit || cap > a->limit)) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->off = 0;
        a->used += cap;
        if (a->head && n > (64u << 10)) { /* a big block: keep filling the current chunk */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = (char *)c->data + c->off;
    c->off += n;
    memset(p, 0, n);
    return p;
}

void ja_free_all(jarena *a) {
    jarena_chunk *c = a->head;
    while (c) {
        jarena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used = 0;
}

char *ja_strndup(jarena *a, const char *s, size_t n) {
    char *p = ja_alloc(a, n + 1);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- lexer ------------------------------------------------------------- */

enum { T_EOF = 0, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP };

typedef struct jtok {
    uint8_t type;
    char op[3];
    int line;
    const char *s;
    size_t n;
    int64_t ival;
    double fval;
} jtok;

typedef struct jparser {
    jarena *ar;
    const char *src;
    size_t len;
    jtok *toks;
    size_t ntok, cap;
    size_t pos;
    int depth;
    char err[512];
    int err_line;
} jparser;

static bool perr(jparser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool perr(jparser *p, int line, const char *fmt, ...) {
    if (p->err[0]) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    if (!p->err[0]) snprintf(p->err, sizeof p->err, "syntax error");
    p->err_line = line;
    return false;
}

static jtok *push_tok(jparser *p, int type, int line) {
    if (p->ntok == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        jtok *t = ja_alloc(p->ar, cap * sizeof *t);
        if (!t) return NULL;
        if (p->ntok) memcpy(t, p->toks, p->ntok * sizeof *t);
        p->toks = t;
        p->cap = cap;
    }
    jtok *t = &p->toks[p->ntok++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = line;
    return t;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static bool emit_data(jparser *p, const char *s, size_t n, int line) {
    if (n == 0) return true;
    jtok *t = push_tok(p, T_DATA, line);
    if (!t) return perr(p, line, "out of memory");
    t->s = s;
    t->n = n;
    return true;
}

/* Where the text before a tag starting at `tag` ends, after "-" stripping
 * or lstrip_blocks. */
static size_t strip_before(const char *src, size_t text_start, size_t tag, char sign, bool lstrip_ok) {
    if (sign == '-') {
        while (tag > text_start && is_space(src[tag - 1])) tag--;
        return tag;
    }
    if (sign == '+' || !lstrip_ok) return tag;
    size_t l = tag;
    while (l > text_start && src[l - 1] != '\n') l--;
    bool line_starting = text_start == 0 || src[text_start - 1] == '\n';
    if (l == text_start && !line_starting) return tag;
    if (l == tag) return tag;
    for (size_t i = l; i < tag; i++)
        if (!is_space(src[i])) return tag;
    return l;
}

/* Python string-literal escapes (jinja2 decodes literals with
 * "unicode-escape"). */
static void put_utf8(char *o, size_t *k, uint32_t cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool unescape(jparser *p, const char *s, size_t n, int line, jtok *t) {
    char *o = ja_alloc(p->ar, n + 1);
    if (!o) return perr(p, line, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { o[k++] = s[i]; continue; }
        char c = s[++i];
        switch (c) {
        case '\n': break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': case 'u': case 'U': {
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + (size_t)nd >= n)
                return perr(p, line, "truncated \\%c escape in a string literal", c);
            for (int d = 1; d <= nd; d++) {
                int h = hexval(s[i + (size_t)d]);
                if (h < 0) return perr(p, line, "truncated \\%c escape in a string literal", c);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF) return perr(p, line, "illegal Unicode character in a string literal");
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            put_utf8(o, &k, cp);
            i += (size_t)nd;
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = 0;
                int d = 0;
                while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') { cp = cp * 8 + (uint32_t)(s[i] - '0'); i++; d++; }
                i--;
                put_utf8(o, &k, cp);
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
    }
    o[k] = '\0';
    t->s = o;
    t->n = k;
    return true;
}

/* Lexes the inside of a {{ }} or {% %} tag from *pos; stops after the end
 * marker (handling "-" and trim_blocks). */
static bool lex_tag(jparser *p, size_t *pos, int *line, bool block) {
    const char *s = p->src;
    size_t i = *pos, n = p->len;
    int bal = 0;
    char stack[64];
    for (;;) {
        if (i >= n) return perr(p, *line, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        if (bal == 0) {
            /* end markers */
            if (block && s[i] == '+' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
                if (!push_tok(p, T_BLOCK_END, *line)) return perr(p, *line, "out of memory");
                i += 3;
                break;
            }
            if (s[i] == '-' && i + 2 < n && s[i + 1] == (block ? '%' : '}') && s[i + 2] == '}') {
                if (!push_tok(p, block ? T_BLOCK_END : T_VAR_END, *line)) return perr(p, *line, "out of memory");
                i += 3;
                while (i < n && is_space(s[i])) { *line += s[i] == '\n'; i++; }
                break;
            }
            if (i + 1 < n && s[i] == (block ? '%' : '}') && s[i + 1] == '}') {
                if (!push_tok(p, block ? T_BLOCK_END : T_VAR_END, *line)) return perr(p, *line, "out of memory");
                i += 2;
                if (block && i < n && s[i] == '\n') { i++; (*line)++; }
                break;
            }
        }
        char c = s[i];
        if (is_space(c)) { *line += c == '\n'; i++; continue; }
        jtok *t;
        if (is_digit(c)) {
            size_t j = i;
            while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
            bool flt = false;
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                flt = true;
                j++;
                while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t k = j + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                if (k < n && is_digit(s[k])) {
                    flt = true;
                    j = k;
                    while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
                }
            }
            char buf[64];
            size_t bl = 0;
            for (size_t k = i; k < j && bl + 1 < sizeof buf; k++)
                if (s[k] != '_') buf[bl++] = s[k];
            buf[bl] = '\0';
            t = push_tok(p, flt ? T_FLOAT : T_INT, *line);
            if (!t) return perr(p, *line, "out of memory");
            errno = 0;
            if (flt) t->fval = strtod(buf, NULL);
            else {
                t->ival = strtoll(buf, NULL, 10);
                if (errno == ERANGE) return perr(p, *line, "integer literal %s is too large", buf);
            }
            i = j;
            continue;
        }
        if (is_alpha(c)) {
            size_t j = i;
            while (j < n && (is_alpha(s[j]) || is_digit(s[j]))) j++;
            t = push_tok(p, T_NAME, *line);
            if (!t) return perr(p, *line, "out of memory");
            t->s = s + i;
            t->n = j - i;
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            int l0 = *line;
            while (j < n && s[j] != c) {
                if (s[j] == '\\') j++;
                if (j < n && s[j] == '\n') (*line)++;
                j++;
            }
            if (j >= n) return perr(p, l0, "unexpected end of string literal");
            t = push_tok(p, T_STRING, l0);
            if (!t) return perr(p, *line, "out of memory");
            if (!unescape(p, s + i + 1, j - i - 1, l0, t)) return false;
            i = j + 1;
            continue;
        }
        /* operators */
        static const char *ops2[] = {"//", "**", "==", "!=", ">=", "<="};
        size_t ol = 0;
        for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
            if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) { ol = 2; break; }
        if (!ol && strchr("+-/*%~[](){}><=.:|,;", c) && c) ol = 1;
        if (!ol) return perr(p, *line, "unexpected char '%c'", c);
        if (ol == 1) {
            if (c == '(' || c == '[' || c == '{') {
                if (bal >= (int)sizeof stack) return perr(p, *line, "brackets nested deeper than %zu", sizeof stack);
                stack[bal++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (bal == 0) return perr(p, *line, "unexpected '%c'", c);
                if (stack[bal - 1] != c) return perr(p, *line, "unexpected '%c', expected '%c'", c, stack[bal - 1]);
                bal--;
            }
        }
        t = push_tok(p, T_OP, *line);
        if (!t) return perr(p, *line, "out of memory");
        memcpy(t->op, s + i, ol);
        i += ol;
    }
    *pos = i;
    return true;
}

/* Matches "{%[-+]? *raw *[-]?%}" / endraw at i; returns the end offset (0 = no). */
static size_t match_word_tag(const char *s, size_t n, size_t i, const char *word, char *sign, bool *minus_end) {
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%') return 0;
    size_t j = i + 2;
    *sign = 0;
    if (j < n && (s[j] == '-' || s[j] == '+')) *sign = s[j++];
    while (j < n && is_space(s[j])) j++;
    size_t wl = strlen(word);
    if (j + wl > n || memcmp(s + j, word, wl) != 0) return 0;
    j += wl;
    if (j < n && (is_alpha(s[j]) || is_digit(s[j]))) return 0;
    while (j < n && is_space(s[j])) j++;
    *minus_end = false;
    if (j + 2 < n && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') {
        *minus_end = true;
        return j + 3;
    }
    if (j + 1 < n && s[j] == '%' && s[j + 1] == '}') return j + 2;
    return 0;
}

static bool lex(jparser *p) {
    const char *s = p->src;
    size_t n = p->len, pos = 0;
    int line = 1;
    while (pos < n) {
        /* find the next tag start */
        size_t i = pos;
        int kind = 0; /* 1 var, 2 block, 3 comment */
        while (i + 1 < n) {
            if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
                kind = s[i + 1] == '{' ? 1 : s[i + 1] == '%' ? 2 : 3;
                break;
            }
            i++;
        }
        if (!kind) {
            if (!emit_data(p, s + pos, n - pos, line)) return false;
            break;
        }
        char sign = (i + 2 < n && (s[i + 2] == '-' || s[i + 2] == '+')) ? s[i + 2] : 0;
        char rsign = 0;
        bool rminus = false;
        size_t raw_end = kind == 2 ? match_word_tag(s, n, i, "raw", &rsign, &rminus) : 0;
        size_t tend = strip_before(s, pos, i, sign, kind != 1);
        if (!emit_data(p, s + pos, tend - pos, line)) return false;
        line += count_nl(s + pos, i - pos);
        if (raw_end) {
            size_t j = raw_end;
            if (rminus)
                while (j < n && is_space(s[j])) j++;
            /* find {% endraw %} */
            size_t k = j, e = 0;
            char esign = 0;
            bool eminus = false;
            for (; k + 1 < n; k++)
                if (s[k] == '{' && s[k + 1] == '%' && (e = match_word_tag(s, n, k, "endraw", &esign, &eminus))) break;
            if (!e) return perr(p, line, "missing end of raw directive");
            size_t bend = strip_before(s, j, k, esign, true);
            if (!emit_data(p, s + j, bend - j, line)) return false;
            line += count_nl(s + i, k - i);
            if (eminus)
                while (e < n && is_space(s[e])) { line += s[e] == '\n'; e++; }
            else if (e < n && s[e] == '\n') { e++; line++; }
            pos = e;
            continue;
        }
        size_t j = i + 2 + (sign ? 1 : 0);
        if (kind == 3) {
            size_t k = j;
            while (k + 1 < n && !(s[k] == '#' && s[k + 1] == '}')) k++;
            if (k + 1 >= n) return perr(p, line, "missing end of comment tag");
            bool minus = k > j && s[k - 1] == '-';
            line += count_nl(s + i, k - i);
            k += 2;
            if (minus)
                while (k < n && is_space(s[k])) { line += s[k] == '\n'; k++; }
            else if (k < n && s[k] == '\n') { k++; line++; }
            pos = k;
            continue;
        }
        if (!push_tok(p, kind == 1 ? T_VAR_BEGIN : T_BLOCK_BEGIN, line)) return perr(p, line, "out of memory");
        if (!lex_tag(p, &j, &line, kind == 2)) return false;
        pos = j;
    }
    return push_tok(p, T_EOF, line) ? true : perr(p, line, "out of memory");
}

/* ---- parser ------------------------------------------------------------ */

static jtok *cur(jparser *p) { return &p->toks[p->pos]; }
static jtok *look(jparser *p) { return &p->toks[p->pos + 1 < p->ntok ? p->pos + 1 : p->pos]; }
static void advance(jparser *p) { if (p->pos + 1 < p->ntok) p->pos++; }
static bool is_op(const jtok *t, const char *op) { return t->type == T_OP && !strcmp(t->op, op); }
static bool is_name(const jtok *t, const char *nm) {
    return t->type == T_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}

static const char *tok_desc(const jtok *t, char *buf, size_t cap) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_BLOCK_END: return "end of statement block";
    case T_NAME: snprintf(buf, cap, "%.*s", (int)NB_MIN(t->n, 64), t->s); return buf;
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: snprintf(buf, cap, "%s", t->op); return buf;
    }
}

static bool expect_op(jparser *p, const char *op) {
    if (is_op(cur(p), op)) { advance(p); return true; }
    char b[80];
    return perr(p, cur(p)->line, "expected token '%s', got '%s'", op, tok_desc(cur(p), b, sizeof b));
}

static bool expect_name(jparser *p, const char *nm) {
    if (is_name(cur(p), nm)) { advance(p); return true; }
    char b[80];
    return perr(p, cur(p)->line, "expected '%s', got '%s'", nm, tok_desc(cur(p), b, sizeof b));
}

static bool expect_type(jparser *p, int type, const char *what) {
    if (cur(p)->type == type) { advance(p); return true; }
    char b[80];
    return perr(p, cur(p)->line, "expected %s, got '%s'", what, tok_desc(cur(p), b, sizeof b));
}

static jnode *mk(jparser *p, int kind, int line) {
    jnode *n = ja_alloc(p->ar, sizeof *n);
    if (!n) { perr(p, line, "out of memory"); return NULL; }
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* growable node list */
typedef struct nlist {
    jnode **v;
    size_t n, cap;
} nlist;

static bool nl_push(jparser *p, nlist *l, jnode *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **v = ja_alloc(p->ar, cap * sizeof *v);
        if (!v) return perr(p, 0, "out of memory");
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static const char *tok_str(jparser *p, const jtok *t) { return ja_strndup(p->ar, t->s, t->n); }

static jnode *parse_expression(jparser *p, bool with_cond);
static jnode *parse_tuple(jparser *p, bool with_cond, bool explicit_paren);
static jnode *parse_unary(jparser *p, bool with_filter);
static jnode *parse_primary(jparser *p);
static jnode *parse_postfix(jparser *p, jnode *n);

#define ENTER(p)                                                                                          \
    do {                                                                                                  \
        if (++(p)->depth > NB_TMPL_MAX_DEPTH) {                                                           \
            perr(p, cur(p)->line, "expressions or blocks nested deeper than %d", NB_TMPL_MAX_DEPTH);      \
            (p)->depth--;                                                                                 \
            return NULL;                                                                                  \
        }                                                                                                 \
    } while (0)
#define LEAVE(p, v) do { (p)->depth--; return (v); } while (0)

/* (args, kw=...) after the '(' check; fills args / kwnames / defs. */
static bool parse_call_args(jparser *p, jnode *n) {
    if (!expect_op(p, "(")) return false;
    nlist args = {0}, kws = {0};
    const char **names = NULL;
    size_t ncap = 0;
    bool comma = false;
    while (!is_op(cur(p), ")")) {
        if (comma) {
            if (!expect_op(p, ",")) return false;
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            return perr(p, cur(p)->line, "*args and **kwargs in calls are not supported");
        if (cur(p)->type == T_NAME && is_op(look(p), "=")) {
            const char *k = tok_str(p, cur(p));
            advance(p);
            advance(p);
            jnode *v = parse_expression(p, true);
            if (!v || !k) return false;
            if (kws.n == ncap) {
                size_t c2 = ncap ? ncap * 2 : 4;
                const char **nn = ja_alloc(p->ar, c2 * sizeof *nn);
                if (!nn) return perr(p, 0, "out of memory");
                if (kws.n) memcpy(nn, names, kws.n * sizeof *nn);
                names = nn;
                ncap = c2;
            }
            names[kws.n] = k;
            if (!nl_push(p, &kws, v)) return false;
        } else {
            if (kws.n) return perr(p, cur(p)->line, "invalid syntax for function call expression");
            jnode *v = parse_expression(p, true);
            if (!v || !nl_push(p, &args, v)) return false;
        }
        comma = true;
    }
    advance(p);
    n->args = args.v;
    n->nargs = args.n;
    n->defs = kws.v;
    n->ndefs = kws.n;
    n->kwnames = names;
    return true;
}

static bool parse_dotted_name(jparser *p, jnode *n) {
    if (cur(p)->type != T_NAME) {
        char b[80];
        return perr(p, cur(p)->line, "expected name, got '%s'", tok_desc(cur(p), b, sizeof b));
    }
    size_t total = cur(p)->n;
    const char *start = cur(p)->s;
    advance(p);
    while (is_op(cur(p), ".") && look(p)->type == T_NAME) {
        advance(p);
        total = (size_t)(cur(p)->s + cur(p)->n - start);
        advance(p);
    }
    n->str = ja_strndup(p->ar, start, total);
    return n->str != NULL;
}

static jnode *parse_filter(jparser *p, jnode *operand, bool start_inline) {
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline) advance(p);
        start_inline = false;
        jnode *f = mk(p, JN_FILTER, cur(p)->line);
        if (!f || !parse_dotted_name(p, f)) return NULL;
        if (is_op(cur(p), "(") && !parse_call_args(p, f)) return NULL;
        f->a = operand;
        operand = f;
    }
    return operand;
}

static jnode *parse_test(jparser *p, jnode *operand) {
    int line = cur(p)->line;
    advance(p); /* is */
    bool neg = false;
    if (is_name(cur(p), "not")) { neg = true; advance(p); }
    jnode *t = mk(p, JN_TEST, line);
    if (!t || !parse_dotted_name(p, t)) return NULL;
    t->a = operand;
    t->neg = neg;
    jtok *c = cur(p);
    if (is_op(c, "(")) {
        if (!parse_call_args(p, t)) return NULL;
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT || is_op(c, "[") ||
                is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) { perr(p, c->line, "You cannot chain multiple tests with is"); return NULL; }
        jnode *arg = parse_primary(p);
        if (!arg) return NULL;
        arg = parse_postfix(p, arg);
        if (!arg) return NULL;
        t->args = ja_alloc(p->ar, sizeof *t->args);
        if (!t->args) { perr(p, line, "out of memory"); return NULL; }
        t->args[0] = arg;
        t->nargs = 1;
    }
    return t;
}

static jnode *parse_subscribed(jparser *p) {
    jnode *parts[3] = {NULL, NULL, NULL};
    int line = cur(p)->line;
    if (is_op(cur(p), ":")) {
        advance(p);
    } else {
        jnode *e = parse_expression(p, true);
        if (!e) return NULL;
        if (!is_op(cur(p), ":")) return e;
        advance(p);
        parts[0] = e;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) {
        if (!(parts[1] = parse_expression(p, true))) return NULL;
    }
    if (is_op(cur(p), ":")) {
        advance(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) {
            if (!(parts[2] = parse_expression(p, true))) return NULL;
        }
    }
    jnode *s = mk(p, JN_SLICE, line);
    if (!s) return NULL;
    s->args = ja_alloc(p->ar, 3 * sizeof *s->args);
    if (!s->args) { perr(p, line, "out of memory"); return NULL; }
    memcpy(s->args, parts, sizeof parts);
    s->nargs = 3;
    return s;
}

static jnode *parse_postfix(jparser *p, jnode *n) {
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, ".")) {
            advance(p);
            jtok *a = cur(p);
            if (a->type == T_NAME) {
                jnode *g = mk(p, JN_GETATTR, t->line);
                if (!g) return NULL;
                g->a = n;
                g->str = tok_str(p, a);
                advance(p);
                n = g;
            } else if (a->type == T_INT) {
                jnode *g = mk(p, JN_GETITEM, t->line), *k = mk(p, JN_INT, t->line);
                if (!g || !k) return NULL;
                k->ival = a->ival;
                g->a = n;
                g->b = k;
                advance(p);
                n = g;
            } else {
                perr(p, a->line, "expected name or number");
                return NULL;
            }
        } else if (is_op(t, "[")) {
            advance(p);
            nlist l = {0};
            while (!is_op(cur(p), "]")) {
                if (l.n && !expect_op(p, ",")) return NULL;
                if (is_op(cur(p), "]")) break;
                jnode *s = parse_subscribed(p);
                if (!s || !nl_push(p, &l, s)) return NULL;
            }
            if (!expect_op(p, "]")) return NULL;
            if (l.n == 0) { perr(p, t->line, "expected subscript expression"); return NULL; }
            jnode *g;
            if (l.n == 1 && l.v[0]->kind == JN_SLICE) {
                g = l.v[0];
                g->a = n;
            } else {
                g = mk(p, JN_GETITEM, t->line);
                if (!g) return NULL;
                g->a = n;
                if (l.n == 1) g->b = l.v[0];
                else {
                    jnode *tu = mk(p, JN_TUPLE, t->line);
                    if (!tu) return NULL;
                    tu->args = l.v;
                    tu->nargs = l.n;
                    g->b = tu;
                }
            }
            n = g;
        } else if (is_op(t, "(")) {
            jnode *c = mk(p, JN_CALL, t->line);
            if (!c || !parse_call_args(p, c)) return NULL;
            c->a = n;
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *parse_filter_expr(jparser *p, jnode *n) {
    for (;;) {
        if (!n) return NULL;
        jtok *t = cur(p);
        if (is_op(t, "|")) n = parse_filter(p, n, false);
        else if (is_name(t, "is")) n = parse_test(p, n);
        else if (is_op(t, "(")) {
            jnode *c = mk(p, JN_CALL, t->line);
            if (!c || !parse_call_args(p, c)) return NULL;
            c->a = n;
            n = c;
        } else return n;
    }
}

static jnode *parse_primary(jparser *p) {
    ENTER(p);
    jtok *t = cur(p);
    jnode *n = NULL;
    if (t->type == T_NAME) {
        advance(p);
        if (is_name(t, "true") || is_name(t, "True")) { if ((n = mk(p, JN_CONST, t->line))) n->cv = 2; }
        else if (is_name(t, "false") || is_name(t, "False")) { if ((n = mk(p, JN_CONST, t->line))) n->cv = 1; }
        else if (is_name(t, "none") || is_name(t, "None")) { if ((n = mk(p, JN_CONST, t->line))) n->cv = 0; }
        else if ((n = mk(p, JN_NAME, t->line))) {
            n->str = tok_str(p, t);
            n->len = t->n;
        }
    } else if (t->type == T_STRING) {
        size_t total = 0, k = p->pos;
        while (p->toks[k].type == T_STRING) total += p->toks[k++].n;
        char *s = ja_alloc(p->ar, total + 1);
        if (!s) { perr(p, t->line, "out of memory"); LEAVE(p, NULL); }
        size_t off = 0;
        while (cur(p)->type == T_STRING) {
            memcpy(s + off, cur(p)->s, cur(p)->n);
            off += cur(p)->n;
            advance(p);
        }
        if ((n = mk(p, JN_STR, t->line))) {
            n->str = s;
            n->len = total;
        }
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        advance(p);
        if ((n = mk(p, t->type == T_INT ? JN_INT : JN_FLOAT, t->line))) {
            n->ival = t->ival;
            n->fval = t->fval;
        }
    } else if (is_op(t, "(")) {
        advance(p);
        n = parse_tuple(p, true, true);
        if (n && !expect_op(p, ")")) n = NULL;
    } else if (is_op(t, "[")) {
        advance(p);
        nlist l = {0};
        while (!is_op(cur(p), "]")) {
            if (l.n) {
                if (!expect_op(p, ",")) LEAVE(p, NULL);
                if (is_op(cur(p), "]")) break;
            }
            jnode *e = parse_expression(p, true);
            if (!e || !nl_push(p, &l, e)) LEAVE(p, NULL);
        }
        advance(p);
        if ((n = mk(p, JN_LIST, t->line))) {
            n->args = l.v;
            n->nargs = l.n;
        }
    } else if (is_op(t, "{")) {
        advance(p);
        nlist k = {0}, v = {0};
        while (!is_op(cur(p), "}")) {
            if (k.n) {
                if (!expect_op(p, ",")) LEAVE(p, NULL);
                if (is_op(cur(p), "}")) break;
            }
            jnode *ke = parse_expression(p, true);
            if (!ke || !expect_op(p, ":")) LEAVE(p, NULL);
            jnode *ve = parse_expression(p, true);
            if (!ve || !nl_push(p, &k, ke) || !nl_push(p, &v, ve)) LEAVE(p, NULL);
        }
        advance(p);
        if ((n = mk(p, JN_DICT, t->line))) {
            n->args = k.v;
            n->nargs = k.n;
            n->defs = v.v;
            n->ndefs = v.n;
        }
    } else {
        char b[80];
        perr(p, t->line, "unexpected '%s'", tok_desc(t, b, sizeof b));
    }
    LEAVE(p, n);
}

static jnode *parse_unary(jparser *p, bool with_filter) {
    ENTER(p);
    jtok *t = cur(p);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(p);
        n = mk(p, JN_UNARY, t->line);
        if (n) {
            n->op = t->op[0] == '-' ? JOP_NEG : JOP_POS;
            n->a = parse_unary(p, false);
            if (!n->a) n = NULL;
        }
    } else {
        n = parse_primary(p);
    }
    if (n) n = parse_postfix(p, n);
    if (n && with_filter) n = parse_filter_expr(p, n);
    LEAVE(p, n);
}

static jnode *binop(jparser *p, int op, jnode *a, jnode *b, int line) {
    if (!a || !b) return NULL;
    jnode *n = mk(p, JN_BINOP, line);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(jparser *p) {
    jnode *l = parse_unary(p, true);
    while (l && is_op(cur(p), "**")) {
        int line = cur(p)->line;
        advance(p);
        l = binop(p, JOP_POW, l, parse_unary(p, true), line);
    }
    return l;
}

static jnode *parse_math2(jparser *p) {
    jnode *l = parse_pow(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV
                 : is_op(t, "%") ? JOP_MOD : 0;
        if (!op || !l) return l;
        advance(p);
        l = binop(p, op, l, parse_pow(p), t->line);
    }
}

static jnode *parse_concat(jparser *p) {
    jnode *l = parse_math2(p);
    while (l && is_op(cur(p), "~")) {
        int line = cur(p)->line;
        advance(p);
        l = binop(p, JOP_CONCAT, l, parse_math2(p), line);
    }
    return l;
}

static jnode *parse_math1(jparser *p) {
    jnode *l = parse_concat(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : 0;
        if (!op || !l) return l;
        advance(p);
        l = binop(p, op, l, parse_concat(p), t->line);
    }
}

static jnode *parse_compare(jparser *p) {
    jnode *e = parse_math1(p);
    if (!e) return NULL;
    nlist l = {0};
    uint8_t opsbuf[64];
    uint8_t *ops = opsbuf;
    size_t cap = sizeof opsbuf;
    int line = cur(p)->line;
    for (;;) {
        jtok *t = cur(p);
        int op = 0;
        if (is_op(t, "==")) op = JOP_EQ;
        else if (is_op(t, "!=")) op = JOP_NE;
        else if (is_op(t, "<")) op = JOP_LT;
        else if (is_op(t, "<=")) op = JOP_LE;
        else if (is_op(t, ">")) op = JOP_GT;
        else if (is_op(t, ">=")) op = JOP_GE;
        else if (is_name(t, "in")) op = JOP_IN;
        else if (is_name(t, "not") && is_name(look(p), "in")) { op = JOP_NOTIN; advance(p); }
        if (!op) break;
        advance(p);
        jnode *r = parse_math1(p);
        if (!r || !nl_push(p, &l, r)) return NULL;
        if (l.n > cap) {
            uint8_t *o2 = ja_alloc(p->ar, cap * 2);
            if (!o2) { perr(p, line, "out of memory"); return NULL; }
            memcpy(o2, ops, cap);
            ops = o2;
            cap *= 2;
        }
        ops[l.n - 1] = (uint8_t)op;
    }
    if (!l.n) return e;
    jnode *c = mk(p, JN_COMPARE, line);
    if (!c) return NULL;
    c->a = e;
    c->args = l.v;
    c->nargs = l.n;
    c->ops = ja_alloc(p->ar, l.n);
    if (!c->ops) { perr(p, line, "out of memory"); return NULL; }
    memcpy(c->ops, ops, l.n);
    return c;
}

static jnode *parse_not(jparser *p) {
    if (is_name(cur(p), "not")) {
        ENTER(p);
        int line = cur(p)->line;
        advance(p);
        jnode *n = mk(p, JN_UNARY, line);
        if (n) {
            n->op = JOP_NOT;
            n->a = parse_not(p);
            if (!n->a) n = NULL;
        }
        LEAVE(p, n);
    }
    return parse_compare(p);
}

static jnode *parse_and(jparser *p) {
    jnode *l = parse_not(p);
    while (l && is_name(cur(p), "and")) {
        int line = cur(p)->line;
        advance(p);
        l = binop(p, JOP_AND, l, parse_not(p), line);
    }
    return l;
}

static jnode *parse_or(jparser *p) {
    jnode *l = parse_and(p);
    while (l && is_name(cur(p), "or")) {
        int line = cur(p)->line;
        advance(p);
        l = binop(p, JOP_OR, l, parse_and(p), line);
    }
    return l;
}

static jnode *parse_expression(jparser *p, bool with_cond) {
    ENTER(p);
    jnode *e = parse_or(p);
    if (!with_cond) LEAVE(p, e);
    while (e && is_name(cur(p), "if")) {
        int line = cur(p)->line;
        advance(p);
        jnode *c = mk(p, JN_COND, line);
        if (!c) LEAVE(p, NULL);
        c->b = e;
        c->a = parse_or(p);
        if (!c->a) LEAVE(p, NULL);
        if (is_name(cur(p), "else")) {
            advance(p);
            c->c = parse_expression(p, true);
            if (!c->c) LEAVE(p, NULL);
        }
        e = c;
    }
    LEAVE(p, e);
}

/* An expression or a comma-separated tuple of them. */
static jnode *parse_tuple(jparser *p, bool with_cond, bool explicit_paren) {
    int line = cur(p)->line;
    nlist l = {0};
    bool comma = false;
    for (;;) {
        if (l.n && !expect_op(p, ",")) return NULL;
        jtok *t = cur(p);
        if (t->type == T_VAR_END || t->type == T_BLOCK_END || is_op(t, ")") || is_name(t, "recursive") ||
            (l.n && is_name(t, "if") && !with_cond) || (l.n && is_name(t, "in")))
            break;
        jnode *e = parse_expression(p, with_cond);
        if (!e || !nl_push(p, &l, e)) return NULL;
        if (is_op(cur(p), ",")) comma = true;
        else break;
    }
    if (!comma) {
        if (l.n == 1) return l.v[0];
        if (!explicit_paren) {
            char b[80];
            perr(p, cur(p)->line, "Expected an expression, got '%s'", tok_desc(cur(p), b, sizeof b));
            return NULL;
        }
    }
    jnode *n = mk(p, JN_TUPLE, line);
    if (!n) return NULL;
    n->args = l.v;
    n->nargs = l.n;
    return n;
}

/* Assignment target: name, name.attr (set only), or a tuple of names. */
static jnode *parse_target(jparser *p, bool with_ns) {
    int line = cur(p)->line;
    nlist l = {0};
    bool paren = false;
    if (is_op(cur(p), "(")) { paren = true; advance(p); }
    for (;;) {
        jtok *t = cur(p);
        if (t->type != T_NAME) {
            char b[80];
            perr(p, t->line, "expected name, got '%s'", tok_desc(t, b, sizeof b));
            return NULL;
        }
        advance(p);
        jnode *n;
        if (with_ns && is_op(cur(p), ".")) {
            advance(p);
            if (cur(p)->type != T_NAME) { perr(p, cur(p)->line, "expected name after '.'"); return NULL; }
            jnode *base = mk(p, JN_NAME, t->line);
            n = mk(p, JN_GETATTR, t->line);
            if (!base || !n) return NULL;
            base->str = tok_str(p, t);
            n->a = base;
            n->str = tok_str(p, cur(p));
            advance(p);
        } else {
            n = mk(p, JN_NAME, t->line);
            if (!n) return NULL;
            n->str = tok_str(p, t);
        }
        if (!nl_push(p, &l, n)) return NULL;
        if (!is_op(cur(p), ",")) break;
        advance(p);
        if (paren && is_op(cur(p), ")")) break;
        if (!paren && (is_name(cur(p), "in") || is_op(cur(p), "="))) break;
    }
    if (paren && !expect_op(p, ")")) return NULL;
    if (l.n == 1 && !paren) return l.v[0];
    jnode *tu = mk(p, JN_TUPLE, line);
    if (!tu) return NULL;
    tu->args = l.v;
    tu->nargs = l.n;
    return tu;
}

static bool parse_signature(jparser *p, jnode *n) {
    if (!expect_op(p, "(")) return false;
    nlist args = {0}, defs = {0};
    bool any_def = false;
    while (!is_op(cur(p), ")")) {
        if (args.n && !expect_op(p, ",")) return false;
        if (is_op(cur(p), ")")) break;
        if (cur(p)->type != T_NAME) {
            char b[80];
            return perr(p, cur(p)->line, "expected name, got '%s'", tok_desc(cur(p), b, sizeof b));
        }
        jnode *a = mk(p, JN_NAME, cur(p)->line);
        if (!a) return false;
        a->str = tok_str(p, cur(p));
        advance(p);
        jnode *d = NULL;
        if (is_op(cur(p), "=")) {
            advance(p);
            if (!(d = parse_expression(p, true))) return false;
            any_def = true;
        } else if (any_def) {
            return perr(p, cur(p)->line, "non-default argument follows default argument");
        }
        if (!nl_push(p, &args, a) || !nl_push(p, &defs, d)) return false;
    }
    advance(p);
    n->args = args.v;
    n->nargs = args.n;
    n->defs = defs.v;
    n->ndefs = defs.n;
    return true;
}

/* Parses statements until a {% name %} in `ends` (NULL-terminated); leaves
 * the parser at that name (after the block-begin). */
static bool parse_body(jparser *p, const char *const *ends, nlist *out, const char **which);

static bool block_end(jparser *p) { return expect_type(p, T_BLOCK_END, "end of statement block"); }

static jnode *parse_statement(jparser *p) {
    ENTER(p);
    jtok *t = cur(p);
    int line = t->line;
    jnode *n = NULL;
    if (t->type != T_NAME) {
        char b[80];
        perr(p, line, "expected statement name, got '%s'", tok_desc(t, b, sizeof b));
        LEAVE(p, NULL);
    }
    const char *which = NULL;
    if (is_name(t, "if")) {
        advance(p);
        n = mk(p, JN_IF, line);
        jnode *node = n;
        for (;;) {
            if (!node || !(node->a = parse_tuple(p, false, false)) || !block_end(p)) LEAVE(p, NULL);
            static const char *const e[] = {"elif", "else", "endif", NULL};
            nlist body = {0};
            if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
            node->body = body.v;
            node->nbody = body.n;
            if (!strcmp(which, "elif")) {
                jnode *el = mk(p, JN_IF, cur(p)->line);
                if (!el) LEAVE(p, NULL);
                node->els = ja_alloc(p->ar, sizeof *node->els);
                if (!node->els) { perr(p, line, "out of memory"); LEAVE(p, NULL); }
                node->els[0] = el;
                node->nels = 1;
                node = el;
                continue;
            }
            if (!strcmp(which, "else")) {
                if (!block_end(p)) LEAVE(p, NULL);
                static const char *const e2[] = {"endif", NULL};
                nlist els = {0};
                if (!parse_body(p, e2, &els, &which)) LEAVE(p, NULL);
                node->els = els.v;
                node->nels = els.n;
            }
            break;
        }
    } else if (is_name(t, "for")) {
        advance(p);
        if (!(n = mk(p, JN_FOR, line)) || !(n->a = parse_target(p, false)) || !expect_name(p, "in") ||
            !(n->b = parse_tuple(p, false, false)))
            LEAVE(p, NULL);
        if (is_name(cur(p), "if")) {
            advance(p);
            if (!(n->c = parse_expression(p, true))) LEAVE(p, NULL);
        }
        if (is_name(cur(p), "recursive")) { perr(p, line, "recursive for loops are not supported"); LEAVE(p, NULL); }
        if (!block_end(p)) LEAVE(p, NULL);
        static const char *const e[] = {"endfor", "else", NULL};
        nlist body = {0}, els = {0};
        if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
        if (!strcmp(which, "else")) {
            if (!block_end(p)) LEAVE(p, NULL);
            static const char *const e2[] = {"endfor", NULL};
            if (!parse_body(p, e2, &els, &which)) LEAVE(p, NULL);
        }
        n->body = body.v;
        n->nbody = body.n;
        n->els = els.v;
        n->nels = els.n;
    } else if (is_name(t, "set")) {
        advance(p);
        if (!(n = mk(p, JN_SET, line)) || !(n->a = parse_target(p, true))) LEAVE(p, NULL);
        if (is_op(cur(p), "=")) {
            advance(p);
            if (!(n->b = parse_tuple(p, true, false))) LEAVE(p, NULL);
        } else {
            if (n->a->kind == JN_TUPLE) { perr(p, line, "a block set takes a single name"); LEAVE(p, NULL); }
            if (is_op(cur(p), "|") && !(n->c = parse_filter(p, NULL, false))) LEAVE(p, NULL);
            if (!block_end(p)) LEAVE(p, NULL);
            static const char *const e[] = {"endset", NULL};
            nlist body = {0};
            if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
            n->body = body.v;
            n->nbody = body.n;
        }
    } else if (is_name(t, "macro")) {
        advance(p);
        if (cur(p)->type != T_NAME) { perr(p, line, "expected a macro name"); LEAVE(p, NULL); }
        if (!(n = mk(p, JN_MACRO, line))) LEAVE(p, NULL);
        n->str = tok_str(p, cur(p));
        advance(p);
        if (!parse_signature(p, n) || !block_end(p)) LEAVE(p, NULL);
        static const char *const e[] = {"endmacro", NULL};
        nlist body = {0};
        if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
        n->body = body.v;
        n->nbody = body.n;
    } else if (is_name(t, "call")) {
        advance(p);
        if (!(n = mk(p, JN_CALLBLOCK, line))) LEAVE(p, NULL);
        if (is_op(cur(p), "(") && !parse_signature(p, n)) LEAVE(p, NULL);
        if (!(n->a = parse_expression(p, true))) LEAVE(p, NULL);
        if (n->a->kind != JN_CALL) { perr(p, line, "expected call"); LEAVE(p, NULL); }
        if (!block_end(p)) LEAVE(p, NULL);
        static const char *const e[] = {"endcall", NULL};
        nlist body = {0};
        if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
        n->body = body.v;
        n->nbody = body.n;
    } else if (is_name(t, "filter")) {
        advance(p);
        if (!(n = mk(p, JN_FILTERBLOCK, line)) || !(n->c = parse_filter(p, NULL, true)) || !block_end(p))
            LEAVE(p, NULL);
        static const char *const e[] = {"endfilter", NULL};
        nlist body = {0};
        if (!parse_body(p, e, &body, &which)) LEAVE(p, NULL);
        n->body = body.v;
        n->nbody = body.n;
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        advance(p);
        n = mk(p, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, line);
        if (n && !block_end(p)) n = NULL;
        LEAVE(p, n);
    } else {
        static const char *const refused[] = {"include", "import", "from", "extends", "block", "with", "do",
                                              "autoescape", "trans", NULL};
        for (size_t i = 0; refused[i]; i++)
            if (is_name(t, refused[i])) {
                perr(p, line, "'%s' is not supported by this engine (chat templates are self-contained)",
                     refused[i]);
                LEAVE(p, NULL);
            }
        perr(p, line, "Encountered unknown tag '%.*s'.", (int)NB_MIN(t->n, 64), t->s);
        LEAVE(p, NULL);
    }
    /* the end tag name is current: consume it and its block end */
    if (n && n->kind != JN_SET && n->kind != JN_BREAK && n->kind != JN_CONTINUE) {
        advance(p);
        if (!block_end(p)) n = NULL;
    } else if (n && n->kind == JN_SET) {
        if (n->b) { if (!block_end(p)) n = NULL; }
        else { advance(p); if (!block_end(p)) n = NULL; }
    }
    LEAVE(p, n);
}

static bool parse_body(jparser *p, const char *const *ends, nlist *out, const char **which) {
    for (;;) {
        jtok *t = cur(p);
        if (t->type == T_EOF) {
            if (!ends) return true;
            return perr(p, t->line, "Unexpected end of template. Jinja was looking for the following tags: '%s'.",
                        ends[0]);
        }
        if (t->type == T_DATA) {
            jnode *n = mk(p, JN_TEXT, t->line);
            if (!n) return false;
            n->str = t->s;
            n->len = t->n;
            if (!nl_push(p, out, n)) return false;
            advance(p);
        } else if (t->type == T_VAR_BEGIN) {
            advance(p);
            jnode *n = mk(p, JN_OUTPUT, t->line);
            if (!n || !(n->a = parse_tuple(p, true, false))) return false;
            if (!expect_type(p, T_VAR_END, "end of print statement")) return false;
            if (!nl_push(p, out, n)) return false;
        } else if (t->type == T_BLOCK_BEGIN) {
            advance(p);
            jtok *nm = cur(p);
            if (ends && nm->type == T_NAME)
                for (size_t i = 0; ends[i]; i++)
                    if (is_name(nm, ends[i])) {
                        *which = ends[i];
                        if (!strcmp(ends[i], "elif") || !strcmp(ends[i], "else")) advance(p);
                        return true;
                    }
            if (nm->type == T_NAME) {
                static const char *const stray[] = {"endif", "endfor", "endset", "endmacro", "endcall",
                                                    "endfilter", "elif", "else", "endraw", NULL};
                for (size_t i = 0; stray[i]; i++)
                    if (is_name(nm, stray[i]))
                        return perr(p, nm->line, "Encountered unknown tag '%s'.%s", stray[i],
                                    ends ? "" : " (no block is open)");
            }
            jnode *n = parse_statement(p);
            if (!n || !nl_push(p, out, n)) return false;
        } else {
            char b[80];
            return perr(p, t->line, "unexpected '%s'", tok_desc(t, b, sizeof b));
        }
    }
}

/* ---- public ------------------------------------------------------------ */

nb_status nb_tmpl_parse(const char *src, size_t len, nb_tmpl **out) {
    *out = NULL;
    if (len > NB_TMPL_MAX_SOURCE)
        return nb_fail(NB_ERR_FORMAT, "template: %zu bytes, at most %u allowed", len, NB_TMPL_MAX_SOURCE);
    nb_tmpl *t = calloc(1, sizeof *t);
    if (!t) return nb_fail(NB_ERR_NOMEM, "template: out of memory");
    t->arena.limit = (size_t)NB_TMPL_MAX_SOURCE * 64;
    /* newlines normalised, one trailing newline dropped */
    char *s = ja_alloc(&t->arena, len + 1);
    if (!s) { nb_tmpl_free(t); return nb_fail(NB_ERR_NOMEM, "template: out of memory"); }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    jparser p = {.ar = &t->arena, .src = s, .len = n};
    nlist body = {0};
    bool ok = lex(&p);
    if (ok) ok = parse_body(&p, NULL, &body, NULL);
    if (!ok) {
        nb_status st = nb_fail(NB_ERR_FORMAT, "template line %d: TemplateSyntaxError: %s", p.err_line,
                               p.err[0] ? p.err : "syntax error");
        nb_tmpl_free(t);
        return st;
    }
    t->body = body.v;
    t->nbody = body.n;
    *out = t;
    return NB_OK;
}

void nb_tmpl_free(nb_tmpl *t) {
    if (!t) return;
    ja_free_all(&t->arena);
    free(t);
}

/* vLLM's content-format detection: a `for` directly over X.content or
 * X['content'] (optionally through a filter such as |list), or over a
 * name set from one. */
static bool is_content_access(const jnode *n) {
    while (n && n->kind == JN_FILTER) n = n->a;
    if (!n) return false;
    return (n->kind == JN_GETATTR && n->str && !strcmp(n->str, "content")) ||
           (n->kind == JN_GETITEM && n->b && n->b->kind == JN_STR && n->b->len == 7 &&
            !memcmp(n->b->str, "content", 7));
}

static bool find_content_loop(jnode *const *v, size_t n, int depth, const char **vars, size_t *nvars) {
    if (depth > NB_TMPL_MAX_DEPTH) return false;
    for (size_t i = 0; i < n; i++) {
        const jnode *x = v[i];
        if (!x) continue;
        if (x->kind == JN_SET && x->b && x->a && x->a->kind == JN_NAME && is_content_access(x->b) && *nvars < 16)
            vars[(*nvars)++] = x->a->str;
        if (x->kind == JN_FOR) {
            if (is_content_access(x->b)) return true;
            const jnode *it = x->b;
            while (it && it->kind == JN_FILTER) it = it->a;
            if (it && it->kind == JN_NAME)
                for (size_t k = 0; k < *nvars; k++)
                    if (!strcmp(vars[k], it->str)) return true;
        }
        if (find_content_loop(x->body, x->nbody, depth + 1, vars, nvars) ||
            find_content_loop(x->els, x->nels, depth + 1, vars, nvars))
            return true;
    }
    return false;
}

bool nb_tmpl_iterates_content(const nb_tmpl *t) {
    const char *vars[16];
    size_t nvars = 0;
    return t && find_content_loop(t->body, t->nbody, 0, vars, &nvars);
}
