/* Chat templates: the built-in named templates (Jinja text reproducing
 * the published templates of each family) and a model's own template
 * rendered on a system + user + assistant + user conversation, compared
 * with the exact strings those Jinja templates produce (worked out by hand
 * from their definitions, with HF's trim_blocks/lstrip_blocks settings;
 * unchanged from the C renderers these built-ins replace). Then the JSON
 * path the server uses: content parts, tools, chat_template_kwargs, tool
 * calls, and the --chat-template override (a name, a file, a JSON file). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/chat_template.h"

static const nb_chat_msg CONV[] = {
    {NB_ROLE_SYSTEM, "You are terse."},
    {NB_ROLE_USER, "Hi there"},
    {NB_ROLE_ASSISTANT, "Hello!"},
    {NB_ROLE_USER, "What is 2+2?"},
};

/* Qwen2-Instruct's template as it appears in tokenizer_config.json after JSON decoding. */
static const char *T_QWEN2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static char *render_t(nb_chat_template *t, const nb_chat_msg *m, size_t n, bool gen, const char *bos,
                      const char *eos) {
    char *out = NULL;
    nb_status st = nb_chat_render(t, m, n, gen, bos, eos, &out);
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    assert_non_null(out);
    nb_chat_template_free(t);
    return out;
}

static char *render_name(const char *name, const nb_chat_msg *m, size_t n, bool gen, const char *bos,
                         const char *eos) {
    nb_chat_template *t = NULL;
    assert_int_equal(nb_chat_template_open(name, &t), NB_OK);
    return render_t(t, m, n, gen, bos, eos);
}

static char *render_text(const char *text, const nb_chat_msg *m, size_t n, bool gen, const char *bos,
                         const char *eos) {
    nb_chat_template *t = NULL;
    assert_int_equal(nb_chat_template_create(text, "test", &t), NB_OK);
    return render_t(t, m, n, gen, bos, eos);
}

static void test_chatml(void **state) {
    (void)state;
    char *s = render_name("chatml", CONV, 4, true, "", "");
    assert_string_equal(s, "<|im_start|>system\nYou are terse.<|im_end|>\n"
                           "<|im_start|>user\nHi there<|im_end|>\n"
                           "<|im_start|>assistant\nHello!<|im_end|>\n"
                           "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(s);
    /* Qwen2's own template: no system message -> the template's default one. */
    s = render_text(T_QWEN2, CONV + 1, 1, true, "", "");
    assert_string_equal(s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                           "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    /* Without the generation prompt. */
    s = render_name("chatml", CONV + 1, 1, false, "", "");
    assert_string_equal(s, "<|im_start|>user\nHi there<|im_end|>\n");
    free(s);
}

static void test_llama2(void **state) {
    (void)state;
    nb_chat_msg m[4];
    memcpy(m, CONV, sizeof m);
    m[3].content = "  What is 2+2? \n"; /* content.strip() */
    char *s = render_name("llama2", m, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! </s>"
                           "<s>[INST] What is 2+2? [/INST]");
    free(s);
    s = render_name("llama2", CONV + 1, 1, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] Hi there [/INST]");
    free(s);
}

static void test_llama3(void **state) {
    (void)state;
    nb_chat_msg m[4];
    memcpy(m, CONV, sizeof m);
    m[2].content = "\nHello!  "; /* | trim */
    char *s = render_name("llama3", m, 4, true, "<|begin_of_text|>", "<|end_of_text|>");
    assert_string_equal(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
}

static void test_mistral(void **state) {
    (void)state;
    char *s = render_name("mistral", CONV + 1, 3, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] Hi there [/INST]Hello!</s>[INST] What is 2+2? [/INST]");
    free(s);
    s = render_name("mistral", CONV, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] You are terse.\n\nHi there [/INST]Hello!</s>[INST] What is 2+2? [/INST]");
    free(s);
}

static void test_zephyr(void **state) {
    (void)state;
    char *s = render_name("zephyr", CONV, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<|system|>\nYou are terse.</s>\n<|user|>\nHi there</s>\n<|assistant|>\nHello!</s>\n"
                           "<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n");
    free(s);
}

static void test_gemma(void **state) {
    (void)state;
    char *s = render_name("gemma", CONV, 4, true, "<bos>", "<eos>");
    assert_string_equal(s, "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
                           "<start_of_turn>model\nHello!<end_of_turn>\n"
                           "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
    free(s);
}

static void test_generic(void **state) {
    (void)state;
    char *s = render_name("generic", CONV, 4, true, "", "");
    assert_string_equal(s, "System: You are terse.\n\nUser: Hi there\n\nAssistant: Hello!\n\n"
                           "User: What is 2+2?\n\nAssistant:");
    free(s);
}

static void test_errors(void **state) {
    (void)state;
    nb_chat_template *t = NULL;
    assert_int_equal(nb_chat_template_open("llama2", &t), NB_OK);
    char *out = NULL;
    assert_int_equal(nb_chat_render(t, CONV, 0, true, "", "", &out), NB_ERR_INVALID);
    assert_null(out);
    assert_non_null(strstr(nb_errmsg(), "messages"));
    /* the template's own raise_exception (Meta's llama2 template silently drops a
     * system message after the first; two user turns in a row raise) */
    nb_chat_msg m[3] = {{NB_ROLE_USER, "a"}, {NB_ROLE_SYSTEM, "b"}, {NB_ROLE_USER, "c"}};
    nb_chat_msg uu[2] = {{NB_ROLE_USER, "a"}, {NB_ROLE_USER, "c"}};
    assert_int_equal(nb_chat_render(t, uu, 2, true, "", "", &out), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "TemplateError: Conversation roles must alternate"));
    assert_null(nb_chat_end_of_turn(t));
    nb_chat_template_free(t);
    /* ChatML renders a system message anywhere. */
    assert_int_equal(nb_chat_template_open("chatml", &t), NB_OK);
    assert_int_equal(nb_chat_render(t, m, 3, true, "", "", &out), NB_OK);
    free(out);
    assert_string_equal(nb_chat_end_of_turn(t), "<|im_end|>");
    nb_chat_template_free(t);
    nb_chat_role r;
    assert_true(nb_chat_role_parse("developer", &r));
    assert_int_equal(r, NB_ROLE_SYSTEM);
    assert_true(nb_chat_role_parse("tool", &r));
    assert_false(nb_chat_role_parse("function", &r));
    /* unknown name, missing file, syntax error */
    assert_int_not_equal(nb_chat_template_open("no-such-template-or-file", &t), NB_OK);
    assert_non_null(strstr(nb_errmsg(), "chatml"));
    assert_int_equal(nb_chat_template_create("{% for x in %}", "bad", &t), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "line 1"));
    /* no template: the generic one */
    assert_int_equal(nb_chat_template_create(NULL, NULL, &t), NB_OK);
    assert_true(nb_chat_template_is_generic(t));
    nb_chat_template_free(t);
}

static char *render_json(nb_chat_template *t, const char *msgs, const char *tools, const char *kwargs) {
    json_t *m = json_loads(msgs, 0, NULL), *tl = tools ? json_loads(tools, 0, NULL) : NULL;
    json_t *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    assert_non_null(m);
    nb_chat_input in = {.messages = m, .tools = tl, .kwargs = kw, .add_generation_prompt = true, .bos = "<s>",
                        .eos = "</s>", .now = 0};
    char *out = NULL;
    nb_status st = nb_chat_render_json(t, &in, &out);
    if (st != NB_OK) fprintf(stderr, "%s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    json_decref(m);
    json_decref(tl);
    json_decref(kw);
    return out;
}

static void test_json_context(void **state) {
    (void)state;
    nb_chat_template *t = NULL;
    /* a template that concatenates content: text parts are joined with "\n" */
    assert_int_equal(nb_chat_template_open("chatml", &t), NB_OK);
    char *s = render_json(t, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
                             "{\"type\":\"text\",\"text\":\"B\"}]}]", NULL, NULL);
    assert_string_equal(s, "<|im_start|>user\nA\nB<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    nb_chat_template_free(t);
    /* a template that iterates parts sees the list */
    assert_int_equal(nb_chat_template_create("{% for m in messages %}{% for p in m.content %}[{{ p.text }}]"
                                             "{% endfor %}{% endfor %}", "t", &t), NB_OK);
    s = render_json(t, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
                       "{\"type\":\"text\",\"text\":\"B\"}]}]", NULL, NULL);
    assert_string_equal(s, "[A][B]");
    free(s);
    nb_chat_template_free(t);
    /* tools, chat_template_kwargs, tool-call arguments parsed from a JSON string */
    assert_int_equal(nb_chat_template_create(
                         "{{ bos_token }}{% for t in tools %}{{ t.function.name }};{% endfor %}"
                         "{% if enable_thinking is defined and not enable_thinking %}no-think;{% endif %}"
                         "{% for m in messages %}{% for c in m.tool_calls or [] %}"
                         "{{ c.function.arguments.city }}|{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}"
                         "{{ add_generation_prompt }}{{ eos_token }}", "t", &t), NB_OK);
    s = render_json(t, "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":null,"
                       "\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"w\","
                       "\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}]",
                    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]",
                    "{\"enable_thinking\": false, \"add_generation_prompt\": false}");
    assert_string_equal(s, "<s>get_weather;no-think;Paris|{\"city\": \"Paris\"}True</s>");
    free(s);
    nb_chat_template_free(t);
}

static void test_open_file(void **state) {
    (void)state;
    const char *dir = nb_test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/t.jinja", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}\n", f);
    fclose(f);
    nb_chat_template *t = NULL;
    assert_int_equal(nb_chat_template_open(path, &t), NB_OK);
    char *s = render_t(t, CONV + 1, 2, true, "", "");
    assert_string_equal(s, "<user>Hi there\n<assistant>Hello!\n"); /* the final newline is dropped, as jinja2 does */
    free(s);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"bos_token\": \"<s>\", \"chat_template\": \"{{ bos_token }}{{ messages[0].content }}\"}", f);
    fclose(f);
    assert_int_equal(nb_chat_template_open(path, &t), NB_OK);
    s = render_t(t, CONV + 1, 1, true, "<s>", "");
    assert_string_equal(s, "<s>Hi there");
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml),  cmocka_unit_test(test_llama2),       cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral), cmocka_unit_test(test_zephyr),       cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_generic), cmocka_unit_test(test_errors),       cmocka_unit_test(test_json_context),
        cmocka_unit_test(test_open_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
