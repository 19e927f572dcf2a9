/* Chat templates: detection from real template texts (excerpts of the
 * published Jinja templates) and rendering of a system + user + assistant +
 * user conversation, compared with the exact strings those Jinja templates
 * produce (worked out by hand from their definitions, with HF's
 * trim_blocks/lstrip_blocks Jinja settings). */
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

/* Template excerpts as they appear in tokenizer_config.json after JSON decoding. */
static const char *T_QWEN2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char *T_SMOL =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char *T_LLAMA3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}";
static const char *T_LLAMA2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}";
static const char *T_MISTRAL =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
    "eos_token}}{% endif %}{% endfor %}";
static const char *T_ZEPHYR =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
    "eos_token }}\n{% endif %}\n{% endfor %}";
static const char *T_GEMMA =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
    "'<end_of_turn>\n' }}{% endfor %}";

static char *render(nb_chat_family fam, const char *default_sys, const nb_chat_msg *m, size_t n, bool gen,
                    const char *bos, const char *eos) {
    nb_chat_template t;
    memset(&t, 0, sizeof t);
    t.family = fam;
    if (default_sys) strcpy(t.default_system, default_sys);
    char *out = NULL;
    assert_int_equal(nb_chat_render(&t, m, n, gen, bos, eos, &out), NB_OK);
    assert_non_null(out);
    return out;
}

static void test_detect(void **state) {
    (void)state;
    nb_chat_template t;
    nb_chat_template_detect(T_QWEN2, &t);
    assert_int_equal(t.family, NB_CHAT_CHATML);
    assert_string_equal(t.default_system, "You are a helpful assistant.");
    nb_chat_template_detect(T_SMOL, &t);
    assert_int_equal(t.family, NB_CHAT_CHATML);
    assert_string_equal(t.default_system, "");
    nb_chat_template_detect(T_LLAMA3, &t);
    assert_int_equal(t.family, NB_CHAT_LLAMA3);
    nb_chat_template_detect(T_LLAMA2, &t);
    assert_int_equal(t.family, NB_CHAT_LLAMA2);
    nb_chat_template_detect(T_MISTRAL, &t);
    assert_int_equal(t.family, NB_CHAT_MISTRAL);
    nb_chat_template_detect(T_ZEPHYR, &t);
    assert_int_equal(t.family, NB_CHAT_ZEPHYR);
    nb_chat_template_detect(T_GEMMA, &t);
    assert_int_equal(t.family, NB_CHAT_GEMMA);
    nb_chat_template_detect("{{ messages }}", &t);
    assert_int_equal(t.family, NB_CHAT_GENERIC);
    nb_chat_template_detect(NULL, &t);
    assert_int_equal(t.family, NB_CHAT_GENERIC);
    assert_string_equal(nb_chat_family_name(NB_CHAT_GEMMA), "gemma");
}

static void test_chatml(void **state) {
    (void)state;
    char *s = render(NB_CHAT_CHATML, NULL, CONV, 4, true, "", "");
    assert_string_equal(s, "<|im_start|>system\nYou are terse.<|im_end|>\n"
                           "<|im_start|>user\nHi there<|im_end|>\n"
                           "<|im_start|>assistant\nHello!<|im_end|>\n"
                           "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(s);
    /* Qwen2: no system message -> the template's default one. */
    s = render(NB_CHAT_CHATML, "You are a helpful assistant.", CONV + 1, 1, true, "", "");
    assert_string_equal(s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                           "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    /* Without the generation prompt. */
    s = render(NB_CHAT_CHATML, NULL, CONV + 1, 1, false, "", "");
    assert_string_equal(s, "<|im_start|>user\nHi there<|im_end|>\n");
    free(s);
}

static void test_llama2(void **state) {
    (void)state;
    nb_chat_msg m[4];
    memcpy(m, CONV, sizeof m);
    m[3].content = "  What is 2+2? \n"; /* content.strip() */
    char *s = render(NB_CHAT_LLAMA2, NULL, m, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! </s>"
                           "<s>[INST] What is 2+2? [/INST]");
    free(s);
    s = render(NB_CHAT_LLAMA2, NULL, CONV + 1, 1, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] Hi there [/INST]");
    free(s);
}

static void test_llama3(void **state) {
    (void)state;
    nb_chat_msg m[4];
    memcpy(m, CONV, sizeof m);
    m[2].content = "\nHello!  "; /* | trim */
    char *s = render(NB_CHAT_LLAMA3, NULL, m, 4, true, "<|begin_of_text|>", "<|end_of_text|>");
    assert_string_equal(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
}

static void test_mistral(void **state) {
    (void)state;
    char *s = render(NB_CHAT_MISTRAL, NULL, CONV + 1, 3, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] Hi there [/INST]Hello!</s>[INST] What is 2+2? [/INST]");
    free(s);
    s = render(NB_CHAT_MISTRAL, NULL, CONV, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<s>[INST] You are terse.\n\nHi there [/INST]Hello!</s>[INST] What is 2+2? [/INST]");
    free(s);
}

static void test_zephyr(void **state) {
    (void)state;
    char *s = render(NB_CHAT_ZEPHYR, NULL, CONV, 4, true, "<s>", "</s>");
    assert_string_equal(s, "<|system|>\nYou are terse.</s>\n<|user|>\nHi there</s>\n<|assistant|>\nHello!</s>\n"
                           "<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n");
    free(s);
}

static void test_gemma(void **state) {
    (void)state;
    char *s = render(NB_CHAT_GEMMA, NULL, CONV, 4, true, "<bos>", "<eos>");
    assert_string_equal(s, "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
                           "<start_of_turn>model\nHello!<end_of_turn>\n"
                           "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
    free(s);
}

static void test_generic(void **state) {
    (void)state;
    char *s = render(NB_CHAT_GENERIC, NULL, CONV, 4, true, "", "");
    assert_string_equal(s, "System: You are terse.\n\nUser: Hi there\n\nAssistant: Hello!\n\n"
                           "User: What is 2+2?\n\nAssistant:");
    free(s);
}

static void test_errors(void **state) {
    (void)state;
    nb_chat_template t = {.family = NB_CHAT_LLAMA2};
    char *out = NULL;
    assert_int_equal(nb_chat_render(&t, CONV, 0, true, "", "", &out), NB_ERR_INVALID);
    assert_null(out);
    nb_chat_msg m[3] = {{NB_ROLE_USER, "a"}, {NB_ROLE_SYSTEM, "b"}, {NB_ROLE_USER, "c"}};
    assert_int_equal(nb_chat_render(&t, m, 3, true, "", "", &out), NB_ERR_INVALID);
    assert_non_null(strstr(nb_errmsg(), "messages[1]"));
    /* ChatML renders a system message anywhere. */
    t.family = NB_CHAT_CHATML;
    assert_int_equal(nb_chat_render(&t, m, 3, true, "", "", &out), NB_OK);
    free(out);
    nb_chat_role r;
    assert_true(nb_chat_role_parse("developer", &r));
    assert_int_equal(r, NB_ROLE_SYSTEM);
    assert_false(nb_chat_role_parse("tool", &r));
    assert_string_equal(nb_chat_end_of_turn(NB_CHAT_CHATML), "<|im_end|>");
    assert_null(nb_chat_end_of_turn(NB_CHAT_LLAMA2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect), cmocka_unit_test(test_chatml),  cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_llama3), cmocka_unit_test(test_mistral), cmocka_unit_test(test_zephyr),
        cmocka_unit_test(test_gemma),  cmocka_unit_test(test_generic), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
