/* Golden sets: prompts with a machine-checkable expectation, grouped into
 * buckets (docs/golden.md).
 *
 * A set is a JSONL file, one item per line:
 *   {"id": str, "bucket": str, "prompt": str | "messages": [...],
 *    "max_tokens"?: int, "stop"?: [str...], "check": CHECK}
 * CHECK is one of
 *   {"exact": s}            the output, trimmed of surrounding whitespace, is s
 *   {"contains": s}         s occurs in the output
 *   {"regex": s}            PCRE2 pattern (UTF) found in the output
 *   {"number": x, "tol"?: t} the first number in the output is within t of x
 *                           (default t = 0; "1,234.5" reads 1234.5)
 *   {"json_valid": true}    the trimmed output parses as one JSON value
 *   {"json_schema": {...}}  ... and validates (eval/jsonschema.h subset)
 *   {"choice": {"options": [s...], "answer": i}}  the option with the
 *                           highest log-likelihood after the prompt is i
 *                           (top level only; nothing is generated)
 *   {"all": [CHECK...]} / {"any": [CHECK...]}
 *
 * This module is the model-free half: loading and validating a set,
 * judging an output against a check, and the summary. The generation and
 * scoring run in golden_run.c (in-process engine or an HTTP endpoint). */
#ifndef NB_EVAL_GOLDEN_H
#define NB_EVAL_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define NB_GOLDEN_DEFAULT_MAX_TOKENS 64
#define NB_GOLDEN_MAX_STOP 4
#define NB_GOLDEN_MAX_DEPTH 16

typedef enum nb_golden_kind {
    NB_GCHK_EXACT = 0, NB_GCHK_CONTAINS, NB_GCHK_REGEX, NB_GCHK_NUMBER, NB_GCHK_JSON_VALID, NB_GCHK_JSON_SCHEMA,
    NB_GCHK_CHOICE, NB_GCHK_ALL, NB_GCHK_ANY,
} nb_golden_kind;

typedef struct nb_golden_check {
    nb_golden_kind kind;
    const char *str;             /* exact / contains / regex (points into the item's JSON) */
    size_t str_len;
    void *re;                    /* pcre2_code * (regex) */
    double number, tol;
    void *schema;                /* json_t * (json_schema; borrowed from the item's JSON) */
    const char **options;        /* choice */
    size_t n_options;
    int32_t answer;
    struct nb_golden_check *sub; /* all / any */
    size_t n_sub;
} nb_golden_check;

typedef struct nb_golden_msg {
    const char *role, *content;
} nb_golden_msg;

typedef struct nb_golden_item {
    const char *id, *bucket;
    const char *prompt;          /* NULL for chat items */
    nb_golden_msg *messages;
    size_t n_messages;
    int32_t max_tokens;
    const char *stop[NB_GOLDEN_MAX_STOP];
    size_t n_stop;
    nb_golden_check check;
    bool involves_json;          /* the check tree has json_valid / json_schema */
    int line;                    /* 1-based line in the file */
} nb_golden_item;

typedef struct nb_golden_set {
    nb_golden_item *items;
    size_t n_items;
    char *path;
    char sha256[65];             /* of the file */
    void *lines;                 /* json_t * array holding each line's tree (owns the strings) */
} nb_golden_set;

/* Loads and validates a set. NB_ERR_FORMAT / NB_ERR_INVALID with the file
 * and 1-based line (malformed JSON, unknown check, bad field, duplicate id,
 * bad regex or schema); NB_ERR_INVALID for a set with no items. Blank lines
 * are skipped. */
nb_status nb_golden_set_load(const char *path, nb_golden_set *out) __attribute__((warn_unused_result));
/* Same from memory (path is used in messages only). */
nb_status nb_golden_set_parse(const char *text, size_t len, const char *path, nb_golden_set *out)
    __attribute__((warn_unused_result));
void nb_golden_set_free(nb_golden_set *s);

/* The result of one item. */
typedef struct nb_golden_verdict {
    bool pass;
    bool json_ok;      /* involves_json: the output parsed as JSON */
    char reason[512];
} nb_golden_verdict;

/* Judges a generated output against a (non-choice) check. */
void nb_golden_judge(const nb_golden_check *c, const char *out, size_t len, nb_golden_verdict *v);
/* Judges a choice item from the options' log-likelihoods (ties -> lowest index). */
void nb_golden_judge_choice(const nb_golden_check *c, const double *loglik, nb_golden_verdict *v);
/* The trimmed output parses as exactly one JSON value. */
bool nb_golden_json_parses(const char *out, size_t len);
/* The first number in text (see "number" above); false if none. */
bool nb_golden_first_number(const char *text, size_t len, double *out);

/* Summary counters, by bucket in order of first appearance. */
typedef struct nb_golden_bucket_acc {
    const char *name;
    int64_t n, n_pass;
} nb_golden_bucket_acc;

typedef struct nb_golden_summary {
    int64_t n, n_pass, n_json, n_json_ok;
    nb_golden_bucket_acc *buckets;
    size_t n_buckets;
} nb_golden_summary;

nb_status nb_golden_summary_add(nb_golden_summary *s, const nb_golden_item *it, const nb_golden_verdict *v)
    __attribute__((warn_unused_result));
void nb_golden_summary_free(nb_golden_summary *s);
/* summary.json's tree (a json_t *): overall, buckets, json_valid_rate,
 * n_json; the caller adds model identity and parameters. */
void *nb_golden_summary_json(const nb_golden_summary *s);

#endif
