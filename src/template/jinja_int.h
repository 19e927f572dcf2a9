/* Internals of the Jinja engine shared by the parser (jinja_parse.c) and
 * the evaluator (jinja_eval.c): the arena, the AST. Not a public header. */
#ifndef NB_TEMPLATE_JINJA_INT_H
#define NB_TEMPLATE_JINJA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"

/* ---- arena: bump allocation in chunks, freed at once ------------------- */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used, limit; /* bytes allocated in chunks, cap (0 = none) */
} jarena;

/* NULL when the cap is reached or malloc fails. Memory is zeroed. */
void *ja_alloc(jarena *a, size_t n);
void ja_free_all(jarena *a);
char *ja_strndup(jarena *a, const char *s, size_t n);

/* ---- AST ---------------------------------------------------------------- */

typedef enum jnode_kind {
    /* statements */
    JN_TEXT = 1,  /* str/len */
    JN_OUTPUT,    /* a */
    JN_IF,        /* a cond, body, els */
    JN_FOR,       /* a target, b iter, c filter (or NULL), body, els */
    JN_SET,       /* a target, b value; or (b NULL) body captured, c filter chain applied (or NULL) */
    JN_MACRO,     /* str name, args (JN_NAME), defs (defaults, NULL entries), body */
    JN_CALLBLOCK, /* a call expr, args/defs: caller's parameters, body */
    JN_FILTERBLOCK, /* c filter chain (innermost operand NULL), body */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,     /* cv: 0 none, 1 false, 2 true; JN_INT / JN_FLOAT / JN_STR literals below */
    JN_INT,       /* ival */
    JN_FLOAT,     /* fval */
    JN_STR,       /* str/len */
    JN_NAME,      /* str */
    JN_LIST,      /* args items */
    JN_TUPLE,     /* args items */
    JN_DICT,      /* args keys, defs values */
    JN_BINOP,     /* op, a, b */
    JN_UNARY,     /* op, a */
    JN_COMPARE,   /* a, args operands, ops */
    JN_COND,      /* a cond, b then, c else (NULL = undefined) */
    JN_GETATTR,   /* a, str */
    JN_GETITEM,   /* a, b */
    JN_SLICE,     /* a, args[3] (entries may be NULL) */
    JN_CALL,      /* a callee, args, kwnames/defs (kwargs) */
    JN_FILTER,    /* a operand (NULL inside a filter block / set block), str name, args, kwnames/defs */
    JN_TEST,      /* a operand, str name, args, neg */
} jnode_kind;

enum { JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT, JOP_AND, JOP_OR,
       JOP_NEG, JOP_POS, JOP_NOT,
       JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN };

typedef struct jnode jnode;
struct jnode {
    uint8_t kind, op, neg, cv;
    int line;
    jnode *a, *b, *c;
    jnode **args, **defs, **body, **els;
    size_t nargs, ndefs, nbody, nels;
    const char **kwnames; /* JN_CALL / JN_FILTER: names of defs[] (kwargs) */
    uint8_t *ops;         /* JN_COMPARE: one per args[] */
    const char *str;
    size_t len;
    int64_t ival;
    double fval;
};

struct nb_tmpl {
    jarena arena;
    jnode **body;
    size_t nbody;
};

#endif
