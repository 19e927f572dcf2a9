/* Chat templates: the model's Jinja template (or an override, or a
 * built-in) rendered by src/template with the context Transformers
 * passes. See chat_template.h. */
#include "tokenizer/chat_template.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "template/jinja.h"

#define MAX_TEMPLATE_FILE (4u << 20)

struct nb_chat_template {
    nb_tmpl *tmpl;
    char *text, *origin;
    bool generic, iterates_parts;
    const char *eot;
};

/* ---- built-ins (the published templates of each family, as Jinja) -------- */

static const struct {
    const char *name, *text;
} BUILTINS[] = {
    {"chatml",
     "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
     "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    /* Meta's Llama-2-chat template */
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
     "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    /* Meta's Llama-3-Instruct template */
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
     "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    /* Mistral-7B-Instruct's template; a leading system message is folded
     * into the first user turn as Mistral's later templates do */
    {"mistral",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
     "{% set loop_messages = messages[1:] %}{% else %}{% set system_message = '' %}{% set loop_messages = messages %}"
     "{% endif %}{% set ns = namespace(first=true) %}{% for message in loop_messages %}"
     "{% if message['role'] == 'user' %}{{ '[INST] ' }}{% if ns.first and system_message %}"
     "{{ system_message + '\\n\\n' }}{% endif %}{% set ns.first = false %}{{ message['content'] + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
     "{% else %}{{ raise_exception('Only user and assistant roles are supported after an initial system message') }}"
     "{% endif %}{% endfor %}"},
    {"zephyr",
     "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    /* Gemma's template; a leading system message is prepended to the first
     * user turn as Gemma 3's does */
    {"gemma",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first_prefix = messages[0]['content'] + "
     "'\\n\\n' %}{% set loop_messages = messages[1:] %}{% else %}{% set first_prefix = '' %}"
     "{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}"
     "{% if message['role'] == 'system' %}{{ raise_exception('System role only supported as the first message') }}"
     "{% endif %}{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
     "{{ '<start_of_turn>' + role + '\\n' + ((first_prefix + message['content']) if loop.first else "
     "message['content']) | trim + '<end_of_turn>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    /* nibble's fallback for models without a template */
    {"generic",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] in ['system', 'developer'] %}System: "
     "{% elif message['role'] == 'user' %}User: {% elif message['role'] == 'tool' %}Tool: {% else %}Assistant: "
     "{% endif %}{{ message['content'] if message['content'] is string else '' }}\n\n{% endfor %}"
     "{% if add_generation_prompt %}Assistant:{% endif %}"},
};

const char *nb_chat_builtin(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof BUILTINS / sizeof *BUILTINS; i++)
        if (!strcmp(BUILTINS[i].name, name)) return BUILTINS[i].text;
    return NULL;
}

const char *nb_chat_builtin_names(void) { return "chatml, llama2, llama3, mistral, zephyr, gemma, generic"; }

bool nb_chat_role_parse(const char *name, nb_chat_role *out) {
    if (!strcmp(name, "system") || !strcmp(name, "developer")) *out = NB_ROLE_SYSTEM;
    else if (!strcmp(name, "user")) *out = NB_ROLE_USER;
    else if (!strcmp(name, "assistant")) *out = NB_ROLE_ASSISTANT;
    else if (!strcmp(name, "tool")) *out = NB_ROLE_TOOL;
    else return false;
    return true;
}

/* ---- creation -------------------------------------------------------------- */

static const char *find_eot(const char *text) {
    static const char *const markers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", NULL};
    for (size_t i = 0; markers[i]; i++)
        if (strstr(text, markers[i])) return markers[i];
    return NULL;
}

nb_status nb_chat_template_create(const char *text, const char *origin, nb_chat_template **out) {
    *out = NULL;
    bool generic = !text || !*text;
    if (generic) {
        text = nb_chat_builtin("generic");
        origin = "built-in generic (the model has none)";
    }
    nb_chat_template *t = calloc(1, sizeof *t);
    if (!t) return nb_fail(NB_ERR_NOMEM, "chat template: out of memory");
    t->text = nb_strdup(text);
    t->origin = nb_strdup(origin ? origin : "the model's");
    if (!t->text || !t->origin) {
        nb_chat_template_free(t);
        return nb_fail(NB_ERR_NOMEM, "chat template: out of memory");
    }
    nb_status st = nb_tmpl_parse(text, strlen(text), &t->tmpl);
    if (st != NB_OK) {
        st = nb_fail_wrap(st, "chat template (%s): ", t->origin);
        nb_chat_template_free(t);
        return st;
    }
    t->generic = generic;
    t->iterates_parts = nb_tmpl_iterates_content(t->tmpl);
    t->eot = find_eot(text);
    *out = t;
    return NB_OK;
}

nb_status nb_chat_template_open(const char *arg, nb_chat_template **out) {
    *out = NULL;
    const char *b = nb_chat_builtin(arg);
    if (b) {
        char origin[96];
        snprintf(origin, sizeof origin, "built-in %s", arg);
        return nb_chat_template_create(b, origin, out);
    }
    char *data = NULL;
    size_t len = 0;
    nb_status st = nb_read_file(arg, MAX_TEMPLATE_FILE, &data, &len);
    if (st != NB_OK)
        return nb_fail_wrap(st, "--chat-template '%s': neither a built-in name (%s) nor a readable file: ", arg,
                            nb_chat_builtin_names());
    if (strlen(data) != len) {
        free(data);
        return nb_fail(NB_ERR_INVALID, "--chat-template '%s': the file contains a NUL byte", arg);
    }
    /* a JSON file holding "chat_template" (tokenizer_config.json, chat_template.json) */
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r')) i++;
    if (i < len && data[i] == '{') {
        json_t *j = json_loadb(data, len, 0, NULL);
        if (j) {
            json_t *ct = json_object_get(j, "chat_template");
            if (json_is_array(ct)) /* [{"name": "default", "template": ...}, ...] */
                for (size_t k = 0; k < json_array_size(ct); k++) {
                    json_t *e = json_array_get(ct, k);
                    const char *nm = json_string_value(json_object_get(e, "name"));
                    if (nm && !strcmp(nm, "default")) { ct = json_object_get(e, "template"); break; }
                }
            if (!json_is_string(ct)) {
                json_decref(j);
                free(data);
                return nb_fail(NB_ERR_INVALID, "--chat-template '%s': a JSON file without a \"chat_template\" string",
                               arg);
            }
            st = nb_chat_template_create(json_string_value(ct), arg, out);
            json_decref(j);
            free(data);
            return st;
        }
    }
    st = nb_chat_template_create(data, arg, out);
    free(data);
    return st;
}

void nb_chat_template_free(nb_chat_template *t) {
    if (!t) return;
    nb_tmpl_free(t->tmpl);
    free(t->text);
    free(t->origin);
    free(t);
}

const char *nb_chat_template_origin(const nb_chat_template *t) { return t->origin; }
const char *nb_chat_template_text(const nb_chat_template *t) { return t->text; }
bool nb_chat_template_is_generic(const nb_chat_template *t) { return t->generic; }
const char *nb_chat_end_of_turn(const nb_chat_template *t) { return t ? t->eot : NULL; }

/* ---- rendering ------------------------------------------------------------- */

/* A copy of one message as the template sees it. */
static json_t *prep_message(const json_t *m, bool flatten) {
    json_t *o = json_deep_copy(m);
    if (!o || !json_is_object(o)) return o;
    json_t *c = json_object_get(o, "content");
    if (flatten && json_is_array(c)) {
        size_t total = 0, n = json_array_size(c), k = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_object_get(json_array_get(c, i), "text");
            if (json_is_string(x)) total += json_string_length(x) + 1;
        }
        char *s = malloc(total + 1);
        if (!s) { json_decref(o); return NULL; }
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_object_get(json_array_get(c, i), "text");
            if (!json_is_string(x)) continue;
            if (k++) s[off++] = '\n';
            memcpy(s + off, json_string_value(x), json_string_length(x));
            off += json_string_length(x);
        }
        json_object_set_new(o, "content", json_stringn(s, off));
        free(s);
    }
    json_t *tc = json_object_get(o, "tool_calls");
    for (size_t i = 0; json_is_array(tc) && i < json_array_size(tc); i++) {
        json_t *fn = json_object_get(json_array_get(tc, i), "function");
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_t *parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (json_is_object(parsed)) json_object_set_new(fn, "arguments", parsed);
            else json_decref(parsed);
        }
    }
    return o;
}

nb_status nb_chat_render_json(const nb_chat_template *t, const nb_chat_input *in, char **out) {
    *out = NULL;
    const json_t *msgs = in->messages;
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return nb_fail(NB_ERR_INVALID, "messages: the list is empty (at least one message is required)");
    json_t *ctx = json_object();
    json_t *ms = json_array();
    if (!ctx || !ms) {
        json_decref(ctx);
        json_decref(ms);
        return nb_fail(NB_ERR_NOMEM, "chat template: out of memory");
    }
    bool ok = true;
    /* chat_template_kwargs first: the standard variables win, as in vLLM */
    if (json_is_object((json_t *)in->kwargs)) ok &= json_object_update(ctx, (json_t *)in->kwargs) == 0;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = prep_message(json_array_get(msgs, i), !t->iterates_parts);
        ok &= m && json_array_append_new(ms, m) == 0;
    }
    ok &= json_object_set_new(ctx, "messages", ms) == 0;
    if (in->tools && json_is_array((json_t *)in->tools) && json_array_size(in->tools))
        ok &= json_object_set(ctx, "tools", (json_t *)in->tools) == 0;
    ok &= json_object_set_new(ctx, "add_generation_prompt", json_boolean(in->add_generation_prompt)) == 0;
    ok &= json_object_set_new(ctx, "bos_token", json_string(in->bos ? in->bos : "")) == 0;
    ok &= json_object_set_new(ctx, "eos_token", json_string(in->eos ? in->eos : "")) == 0;
    if (!ok) {
        json_decref(ctx);
        return nb_fail(NB_ERR_NOMEM, "chat template: out of memory building the context");
    }
    nb_tmpl_opts o = {.now = in->now};
    nb_status st = nb_tmpl_render(t->tmpl, ctx, &o, out, NULL);
    json_decref(ctx);
    if (st != NB_OK) return nb_fail_wrap(st, "chat template: ");
    return NB_OK;
}

nb_status nb_chat_render(const nb_chat_template *t, const nb_chat_msg *msgs, size_t n, bool gen, const char *bos,
                         const char *eos, char **out) {
    *out = NULL;
    static const char *const names[] = {"system", "user", "assistant", "tool"};
    json_t *arr = json_array();
    if (!arr) return nb_fail(NB_ERR_NOMEM, "chat template: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].content) {
            json_decref(arr);
            return nb_fail(NB_ERR_INVALID, "messages[%zu].content: missing", i);
        }
        json_t *m = json_pack("{s:s, s:s}", "role", names[msgs[i].role & 3], "content", msgs[i].content);
        if (!m || json_array_append_new(arr, m)) {
            json_decref(arr);
            return nb_fail(NB_ERR_NOMEM, "chat template: out of memory");
        }
    }
    nb_chat_input in = {.messages = arr, .add_generation_prompt = gen, .bos = bos, .eos = eos, .now = -1};
    nb_status st = nb_chat_render_json(t, &in, out);
    json_decref(arr);
    return st;
}
