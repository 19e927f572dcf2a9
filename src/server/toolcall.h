/* Tool calls in `nibble serve` (/v1/chat/completions): the request's
 * `tools` / `tool_choice` / `parallel_tool_calls`, the constraint that makes
 * the output a valid call (tool_choice required or a named function), and
 * the parser that turns the model's text into `message.tool_calls`.
 *
 * The call syntax is the model family's, chosen from the chat template text
 * (nb_tool_format_detect; docs/serve.md "Tools"):
 *   hermes      `<tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>`, several allowed
 *               (Hermes 2 Pro / 3, Qwen 2.5 / 3: the template mentions <tool_call>)
 *   mistral     `[TOOL_CALLS][{"name": N, "arguments": {...}}, ...]` (Mistral v3 / Nemo)
 *   mistral11   `[TOOL_CALLS]N[ARGS]{...}` repeated (Mistral Small 3.2 and later: the template has [ARGS])
 *   llama3      `{"name": N, "parameters": {...}}`, optionally after `<|python_tag|>`
 *               (Llama 3.1+: the template has <|python_tag|> or <|start_header_id|>ipython)
 *   generic     a bare JSON object {"name", "arguments"} or an array of them (everything else)
 * Every family also accepts the bare form when its marker is absent. A
 * marker that is a control token of the vocabulary reaches the parser
 * because requests with tools then ask the engine for control-token text
 * (nb_tool_markers_special).
 *
 * Parsing rule (the same for whole and streamed answers): if the family's
 * marker occurs, the text before it is the content (null when only
 * whitespace) and what follows must be calls; else if the text starts
 * (after whitespace) with `{` or `[`, the whole text must be calls. A call
 * names a declared function (the named one under tool_choice {function});
 * its arguments are an object, or a string holding one, or absent ({}).
 * Anything else - malformed JSON, an undeclared name, text between or after
 * calls - leaves the whole output as content (finish_reason stays "stop" /
 * "length"). `arguments` is the model's JSON with the whitespace outside
 * strings removed (numbers and escapes kept byte for byte).
 *
 * Pure functions; the request's JSON (jansson) is borrowed, not copied. */
#ifndef NB_SERVER_TOOLCALL_H
#define NB_SERVER_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

struct nb_oai_error;
struct nb_oai_request;
struct nb_grammar;
struct nb_tokenizer;

typedef enum nb_tool_format {
    NB_TOOLS_GENERIC = 0,
    NB_TOOLS_LLAMA3,
    NB_TOOLS_HERMES,
    NB_TOOLS_MISTRAL,
    NB_TOOLS_MISTRAL11,
} nb_tool_format;

typedef enum nb_tool_choice {
    NB_TOOL_CHOICE_NONE = 0, /* no tools given, or "none": nothing parsed, tools left out of the template */
    NB_TOOL_CHOICE_AUTO,     /* parsed when the model writes a call */
    NB_TOOL_CHOICE_REQUIRED, /* constrained: one call of a declared function */
    NB_TOOL_CHOICE_NAMED,    /* constrained: one call of `name` */
} nb_tool_choice;

#define NB_TOOLS_MAX 128             /* tools in one request */
#define NB_TOOLS_MAX_CONSTRAINED 64  /* tools nb_grammar_tagged can choose from */
#define NB_TOOL_NAME_MAX 64          /* OpenAI: ^[a-zA-Z0-9_-]{1,64}$ */

typedef struct nb_tool_request {
    const void *tools;  /* json_t array of {"type":"function","function":{...}}, NULL: none */
    size_t n_tools;
    nb_tool_choice choice;
    const char *name;   /* NB_TOOL_CHOICE_NAMED */
    bool parallel;      /* parallel_tool_calls (default true); false: at most one call is returned */
} nb_tool_request;

/* Validates `tools`, `tool_choice`, `parallel_tool_calls` of a chat body
 * (json_t object). false: *e filled (400, param named). */
bool nb_tool_request_parse(const void *root, nb_tool_request *out, struct nb_oai_error *e);
/* What the chat template gets as `tools` (NULL under tool_choice none). */
const void *nb_tool_template_tools(const nb_tool_request *t);

nb_tool_format nb_tool_format_detect(const char *template_text);
const char *nb_tool_format_name(nb_tool_format f);
/* A marker of format f ([TOOL_CALLS], [ARGS], [CALL_ID], <tool_call>,
 * </tool_call>, <|python_tag|>) is a control token of the vocabulary: the
 * engine leaves control-token text out of the output unless asked, so
 * requests with tools then ask for it (nb_request_params.render_special). */
bool nb_tool_markers_special(nb_tool_format f, const struct nb_tokenizer *tok);

/* tool_choice required / named: the grammar of one call in format f
 * (engine/grammar.h nb_grammar_tagged). *out stays NULL for none / auto. A
 * parameters schema nibble cannot enforce is a 400 naming
 * tools[i].function.parameters and the keyword. */
bool nb_tool_grammar(const nb_tool_request *t, nb_tool_format f, struct nb_grammar **out, struct nb_oai_error *e);

typedef struct nb_tool_call {
    char id[32];      /* "call_" + 24 random letters and digits */
    char *name;
    char *arguments;  /* JSON text of an object */
} nb_tool_call;

typedef struct nb_tool_result {
    char *content;    /* NULL: null (only when there are calls) */
    size_t content_len;
    nb_tool_call *calls;
    size_t n_calls;
} nb_tool_result;

/* Splits a finished output. n_calls == 0 means plain content (all of it). */
nb_status nb_tool_parse(const nb_tool_request *t, nb_tool_format f, const char *text, size_t len, nb_tool_result *out)
    __attribute__((warn_unused_result));
void nb_tool_result_free(nb_tool_result *r);

/* Streaming: how many bytes from the start of the output so far are
 * content whatever comes next (the parse's content starts with them). */
size_t nb_tool_stream_safe(nb_tool_format f, const char *text, size_t len);

/* ---- the response (server.c's hooks) ----
 * One per chat request whose tools are active (NULL otherwise): it keeps the
 * tools alive past the request body and the streamed output so far. */
typedef struct nb_tool_stream nb_tool_stream;
nb_status nb_tool_stream_create(const nb_tool_request *t, nb_tool_format f, nb_tool_stream **out)
    __attribute__((warn_unused_result));
void nb_tool_stream_free(nb_tool_stream *s);
/* After nb_oai_parse: tool_choice required / named compiles the call's
 * grammar into q->grammar (a 400 with response_format / guided_*). */
bool nb_tool_prepare(struct nb_oai_request *q, nb_tool_format f, struct nb_oai_error *e);
/* Whole answers: parses text into the message (json_t object: sets
 * "content" and "tool_calls"); true when there are calls (finish_reason
 * "tool_calls"), false leaves the message as it is. */
bool nb_tool_message(nb_tool_stream *s, const char *text, size_t len, void *message);
/* Streams: new output text in, the part that may be sent as content now
 * out (*text / *len rewritten; points into s, valid until the next call).
 * The calls found so far stream too (nb_tool_stream_deltas). */
void nb_tool_stream_push(nb_tool_stream *s, const char **text, size_t *len);
/* The tool-call deltas of the last push, OpenAI's shape: a json_t array of
 * `delta` objects {"tool_calls": [...]} (the caller owns it), NULL if none.
 * A call's first delta (index, id, type "function", name, arguments "")
 * goes out once its name is whole and declared; then its arguments, as
 * the model writes them (minified as the whole answer's), up to the '}'
 * that closes them. A call whose arguments come before its name, or are a
 * string, gets them at the end. */
void *nb_tool_stream_deltas(nb_tool_stream *s);
/* The end of a stream: the content still due (*text / *len) and a json_t
 * array of `delta` objects carrying what is left of the tool calls (per
 * call not streamed yet: index, id, type, name with arguments "", then the
 * arguments; per streamed call the rest of its arguments), or NULL when the
 * output holds no calls. A call streamed that the whole output does not
 * confirm (malformed later) cannot be taken back: the rest of the output
 * then goes out as content, as without calls. */
void *nb_tool_stream_end(nb_tool_stream *s, const char **text, size_t *len);
/* Sets choices[0].delta of a chunk (json_t; takes `delta` over, NULL: keep)
 * and, when asked, its finish_reason to "tool_calls". */
void nb_tool_chunk_set(void *chunk, void *delta, bool finish_tool_calls);

#endif
