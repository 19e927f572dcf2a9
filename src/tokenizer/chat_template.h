/* Chat templates: turn an OpenAI-style message list into the prompt text a
 * chat model was trained on.
 *
 * We do not run Jinja. The template text (GGUF `tokenizer.chat_template`,
 * HF tokenizer_config.json `chat_template`) is only used to recognise the
 * model family by marker substrings, and the family's format is rendered in
 * C. docs/serve.md lists the exact format of each family:
 *
 *   CHATML   "<|im_start|>"           Qwen, SmolLM, Yi, ... (default system
 *                                      prompt taken from the template text)
 *   LLAMA3   "<|start_header_id|>"    Llama 3 / 3.1 / 3.2
 *   LLAMA2   "[INST]" and "<<SYS>>"   Llama 2 chat
 *   MISTRAL  "[INST]" without <<SYS>> Mistral / Mixtral instruct
 *   ZEPHYR   "<|user|>"               Zephyr, StableLM-zephyr
 *   GEMMA    "<start_of_turn>"        Gemma 1/2/3
 *   GENERIC  anything else / none     "System: ...\n\nUser: ...\n\nAssistant:"
 *
 * Rendering is pure string work on caller-provided text (no tokenizer): the
 * BOS / EOS texts are passed in, and the caller tokenizes the result with
 * special-token parsing on and without adding BOS again.
 *
 * Thread-safety: all functions are reentrant. */
#ifndef NB_TOKENIZER_CHAT_TEMPLATE_H
#define NB_TOKENIZER_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef enum nb_chat_family {
    NB_CHAT_GENERIC = 0,
    NB_CHAT_CHATML,
    NB_CHAT_LLAMA2,
    NB_CHAT_LLAMA3,
    NB_CHAT_MISTRAL,
    NB_CHAT_ZEPHYR,
    NB_CHAT_GEMMA,
} nb_chat_family;

typedef enum nb_chat_role {
    NB_ROLE_SYSTEM = 0, /* "system" and "developer" */
    NB_ROLE_USER,
    NB_ROLE_ASSISTANT,
} nb_chat_role;

typedef struct nb_chat_msg {
    nb_chat_role role;
    const char *content; /* UTF-8, NUL-terminated */
} nb_chat_msg;

/* A detected template: the family plus what the template text fixes. */
typedef struct nb_chat_template {
    nb_chat_family family;
    char default_system[512]; /* ChatML templates that inject a system prompt when none is given ("" = none) */
} nb_chat_template;

/* Recognises the family from the template text (NULL or "" -> GENERIC). */
void nb_chat_template_detect(const char *tmpl, nb_chat_template *out);
const char *nb_chat_family_name(nb_chat_family f); /* "chatml", "llama2", ... */
/* Role by its OpenAI name ("developer" counts as system); false if unknown. */
bool nb_chat_role_parse(const char *name, nb_chat_role *out);

/* Renders msgs[0..n) (n >= 1) and, if add_generation_prompt, the opening
 * of the assistant's turn. bos / eos: the model's BOS / EOS token texts
 * ("" when it has none). *out is malloc'd, NUL-terminated. Fails with
 * NB_ERR_INVALID (naming messages[i]) for an empty list, or a system
 * message anywhere but first. */
nb_status nb_chat_render(const nb_chat_template *t, const nb_chat_msg *msgs, size_t n, bool add_generation_prompt,
                         const char *bos, const char *eos, char **out) __attribute__((warn_unused_result));

/* The end-of-turn marker the family's assistant turns end with (e.g.
 * "<|im_end|>"), to be used as an extra stop token; NULL when it is EOS. */
const char *nb_chat_end_of_turn(nb_chat_family f);

#endif
