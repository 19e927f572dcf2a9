/* Chat templates: turn an OpenAI-style message list into the prompt text a
 * chat model was trained on, by running the model's own Jinja template
 * (src/template, jinja2 semantics as in Transformers' apply_chat_template).
 *
 * Where the template comes from (docs/template.md):
 *   - the model: GGUF `tokenizer.chat_template`, or `chat_template` in an
 *     HF directory's tokenizer_config.json (nb_tokenizer_chat_template);
 *   - an override (`--chat-template FILE|NAME`): a file with Jinja text
 *     (or a tokenizer_config.json / chat_template.json holding one), or a
 *     built-in name;
 *   - nothing: the built-in "generic" template,
 *     "System: ...\n\nUser: ...\n\nAssistant: ...\n\n" then "Assistant:".
 * Built-in names (Jinja text in chat_template.c): chatml, llama2, llama3,
 * mistral, zephyr, gemma, generic.
 *
 * The template context is what Transformers passes: messages, tools (when
 * given), add_generation_prompt, bos_token, eos_token, plus the request's
 * chat_template_kwargs. Messages whose content is a list of text parts
 * are flattened to one string (parts joined with "\n", as vLLM does)
 * unless the template itself iterates over content parts; tool-call
 * `arguments` given as a JSON string are parsed to an object, as vLLM does.
 *
 * Rendering is pure string work (no tokenizer): the caller tokenizes the
 * result with special-token parsing on and without adding BOS again.
 *
 * Thread-safety: a created template is immutable; render concurrently. */
#ifndef NB_TOKENIZER_CHAT_TEMPLATE_H
#define NB_TOKENIZER_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum nb_chat_role {
    NB_ROLE_SYSTEM = 0, /* "system" and "developer" */
    NB_ROLE_USER,
    NB_ROLE_ASSISTANT,
    NB_ROLE_TOOL,
} nb_chat_role;

typedef struct nb_chat_msg {
    nb_chat_role role;
    const char *content; /* UTF-8, NUL-terminated */
} nb_chat_msg;

typedef struct nb_chat_template nb_chat_template;

/* Role by its OpenAI name ("developer" counts as system); false if unknown. */
bool nb_chat_role_parse(const char *name, nb_chat_role *out);

/* The Jinja text of a built-in template, NULL if `name` is not one. */
const char *nb_chat_builtin(const char *name);
/* "chatml, llama2, llama3, mistral, zephyr, gemma, generic" */
const char *nb_chat_builtin_names(void);

/* From template text (a model's); NULL or "" gives the built-in generic
 * template. `origin` ("the model's", a path...) is kept for messages. A
 * template that does not parse fails with NB_ERR_FORMAT naming the line. */
nb_status nb_chat_template_create(const char *text, const char *origin, nb_chat_template **out)
    __attribute__((warn_unused_result));
/* `--chat-template ARG`: a built-in name, or a file holding Jinja text, or a
 * JSON file (tokenizer_config.json, chat_template.json) whose
 * "chat_template" is the text. */
nb_status nb_chat_template_open(const char *arg, nb_chat_template **out) __attribute__((warn_unused_result));
void nb_chat_template_free(nb_chat_template *t);

const char *nb_chat_template_origin(const nb_chat_template *t);
const char *nb_chat_template_text(const nb_chat_template *t);
/* True for the built-in generic fallback (callers add BOS as a token). */
bool nb_chat_template_is_generic(const nb_chat_template *t);
/* The end-of-turn marker the template closes assistant turns with (e.g.
 * "<|im_end|>", "<|eot_id|>", "<end_of_turn>"), to be used as an extra
 * stop token; NULL when none is recognised (EOS ends the turn). */
const char *nb_chat_end_of_turn(const nb_chat_template *t);

typedef struct nb_chat_input {
    const void *messages; /* json_t array of OpenAI message objects (not modified) */
    const void *tools;    /* json_t array or NULL */
    const void *kwargs;   /* json_t object (chat_template_kwargs) or NULL */
    bool add_generation_prompt;
    const char *bos, *eos; /* token texts, "" when none */
    int64_t now;           /* strftime_now's time (UTC seconds); < 0: the current time */
} nb_chat_input;

/* Renders. *out is malloc'd, NUL-terminated. An empty message list fails
 * with NB_ERR_INVALID ("messages: ..."); an error raised by the template
 * (raise_exception, a type error) fails with NB_ERR_INVALID and its text
 * ("chat template: TemplateError: ..."). */
nb_status nb_chat_render_json(const nb_chat_template *t, const nb_chat_input *in, char **out)
    __attribute__((warn_unused_result));

/* Convenience for plain text messages (roles system / user / assistant / tool). */
nb_status nb_chat_render(const nb_chat_template *t, const nb_chat_msg *msgs, size_t n, bool add_generation_prompt,
                         const char *bos, const char *eos, char **out) __attribute__((warn_unused_result));

#endif
