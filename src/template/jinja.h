/* A Jinja2 engine for chat templates.
 *
 * Renders Hugging Face chat templates the way Transformers'
 * apply_chat_template does: jinja2 3.1's ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks, the loopcontrols extension (break /
 * continue), raise_exception(msg), strftime_now(fmt) and Transformers'
 * tojson(x, ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False). Values follow Python semantics (str() of numbers,
 * lists and dicts, dict insertion order, UTF-8 strings indexed by code
 * point). docs/template.md lists what of Jinja is supported and what is
 * refused (include / extends / import, the `do` extension, mutation of
 * lists and dicts).
 *
 * A template is parsed once (nb_tmpl_parse) and rendered any number of
 * times, concurrently, against a JSON context (nb_tmpl_render): the
 * parsed template is immutable; each render allocates from its own arena
 * and frees it before returning.
 *
 * Limits (templates come from downloaded files): nesting depth of the
 * parser and of calls, output bytes, memory, evaluation steps and wall
 * time per render; exceeding one is an error naming the limit.
 *
 * Errors: nb_tmpl_parse fails with NB_ERR_FORMAT, "template line N: ...";
 * nb_tmpl_render with NB_ERR_INVALID and a message in jinja2's words,
 * prefixed by the Python exception name ("TemplateError: <the message
 * given to raise_exception>", "UndefinedError: 'x' is undefined",
 * "TypeError: can only concatenate str (not \"list\") to str", ...),
 * or NB_ERR_NOMEM. */
#ifndef NB_TEMPLATE_JINJA_H
#define NB_TEMPLATE_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct nb_tmpl nb_tmpl;

/* Default limits (nb_tmpl_opts fields left 0 take these). */
#define NB_TMPL_MAX_SOURCE (4u << 20)       /* template text bytes */
#define NB_TMPL_MAX_DEPTH 256               /* parser nesting and call depth */
#define NB_TMPL_MAX_OUTPUT (32u << 20)      /* rendered bytes */
#define NB_TMPL_MAX_MEMORY (512u << 20)     /* arena bytes per render */
#define NB_TMPL_MAX_STEPS 50000000ull       /* evaluation steps per render */
#define NB_TMPL_MAX_MS 10000                /* wall milliseconds per render */

typedef struct nb_tmpl_opts {
    int64_t now;          /* strftime_now's time: seconds since the epoch, local = UTC; < 0: the current time */
    size_t max_output;    /* 0: NB_TMPL_MAX_OUTPUT */
    size_t max_memory;    /* 0: NB_TMPL_MAX_MEMORY */
    uint64_t max_steps;   /* 0: NB_TMPL_MAX_STEPS */
    uint32_t max_ms;      /* 0: NB_TMPL_MAX_MS */
} nb_tmpl_opts;

/* Parses len bytes of template text. */
nb_status nb_tmpl_parse(const char *src, size_t len, nb_tmpl **out) __attribute__((warn_unused_result));
void nb_tmpl_free(nb_tmpl *t);

/* Renders with the variables of `context` (a jansson json_t object, passed
 * as void * so callers need not include jansson; NULL = no variables).
 * opts may be NULL (the defaults, current time). *out is malloc'd and
 * NUL-terminated; *out_len (may be NULL) its length. */
nb_status nb_tmpl_render(const nb_tmpl *t, const void *context, const nb_tmpl_opts *opts, char **out,
                         size_t *out_len) __attribute__((warn_unused_result));

/* True when the template text reads message contents as lists of parts
 * (a `for` over `content`, or a test that content is a string / iterable):
 * callers that flatten text parts to a string should leave them as lists
 * for such templates (vLLM's "content format" detection). */
bool nb_tmpl_iterates_content(const nb_tmpl *t);

/* Parses "2026-11-29T12:00:00" (or with a space, or a date alone) as UTC
 * seconds since the epoch; false if malformed. */
bool nb_tmpl_parse_time(const char *s, int64_t *out);

#endif
