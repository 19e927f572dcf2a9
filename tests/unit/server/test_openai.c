/* OpenAI request parsing/validation, the error shape, UTF-8 sanitizing,
 * the constant-time key comparison, and the Prometheus histogram format
 * (expected text worked out by hand from the exposition format spec). */
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"
#include "server/openai.h"
#include "testutil.h"

static bool parse(nb_oai_kind k, const char *body, nb_oai_request *r, nb_oai_error *e) {
    return nb_oai_parse(k, body, strlen(body), r, e);
}

static void expect_err(nb_oai_kind k, const char *body, const char *param, const char *needle) {
    nb_oai_request r;
    nb_oai_error e;
    bool ok = parse(k, body, &r, &e);
    if (ok) fail_msg("accepted: %s", body);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.type, "invalid_request_error");
    if (param) assert_string_equal(e.param, param);
    if (needle && !strstr(e.message, needle)) fail_msg("'%s' not in '%s'", needle, e.message);
    nb_oai_request_free(&r);
}

static void test_parse_completion(void **state) {
    (void)state;
    nb_oai_request r;
    nb_oai_error e;
    assert_true(parse(NB_OAI_COMPLETIONS,
                      "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
                      "\"top_k\":-1,\"min_p\":0.1,\"presence_penalty\":1,\"frequency_penalty\":-1,"
                      "\"repetition_penalty\":1.1,\"seed\":-3,\"stop\":[\"a\",\"bc\"],\"n\":1,\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true},\"logprobs\":2,\"ignore_eos\":true,"
                      "\"min_tokens\":3,\"user\":\"u\"}",
                      &r, &e));
    assert_string_equal(r.model, "m");
    assert_string_equal(r.prompt, "hi");
    assert_int_equal(r.max_tokens, 7);
    assert_true(r.sampling.temperature == 0.5f && r.sampling.top_p == 0.9f && r.sampling.top_k == 0);
    assert_true(r.sampling.has_seed && r.sampling.seed == (uint64_t)-3);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "bc");
    assert_true(r.stream && r.include_usage && r.ignore_eos);
    assert_int_equal(r.logprobs, 2);
    assert_int_equal(r.min_tokens, 3);
    nb_oai_request_free(&r);
    assert_true(parse(NB_OAI_COMPLETIONS, "{\"prompt\":[[1,2,3]]}", &r, &e));
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 3);
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.logprobs, -1);
    nb_oai_request_free(&r);
}

static void test_parse_chat(void **state) {
    (void)state;
    nb_oai_request r;
    nb_oai_error e;
    assert_true(parse(NB_OAI_CHAT,
                      "{\"messages\":[{\"role\":\"developer\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
                      "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],"
                      "\"max_tokens\":5,\"max_completion_tokens\":9,\"logprobs\":true,\"top_logprobs\":3}",
                      &r, &e));
    assert_int_equal(r.n_msgs, 3);
    assert_int_equal(r.msgs[0].role, NB_ROLE_SYSTEM);
    assert_string_equal(r.msgs[1].content, "ab");
    assert_string_equal(r.msgs[2].content, "");
    assert_int_equal(r.max_tokens, 9);
    assert_int_equal(r.logprobs, 3);
    nb_oai_request_free(&r);
}

static void test_errors(void **state) {
    (void)state;
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":", NULL, "not valid JSON");
    expect_err(NB_OAI_COMPLETIONS, "[]", NULL, "JSON object");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"prompt\":\"b\"}", NULL, NULL);
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"temperature\":2.5}", "temperature", "[0, 2]");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"top_p\":0}", "top_p", "(0, 1]");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"top_k\":-2}", "top_k", NULL);
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"max_tokens\":\"5\"}", "max_tokens", "an integer");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"n\":3}", "n", "n = 1");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"zzz\":1}", "zzz", "Unrecognized request argument");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "one prompt");
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":[1,-1]}", "prompt[1]", NULL);
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"stream_options\":{}}", "stream_options", NULL);
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"max_tokens\":2,\"min_tokens\":3}", "min_tokens", NULL);
    expect_err(NB_OAI_COMPLETIONS, "{\"prompt\":\"a\",\"stop\":[\"\"]}", "stop[0]", NULL);
    expect_err(NB_OAI_CHAT, "{\"messages\":[]}", "messages", NULL);
    expect_err(NB_OAI_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0].role", NULL);
    expect_err(NB_OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", NULL);
    expect_err(NB_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":1}",
               "top_logprobs", NULL);
    expect_err(NB_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"prompt\":\"x\"}", "prompt",
               NULL);
}

static void test_error_json_utf8_secret(void **state) {
    (void)state;
    nb_oai_error e;
    nb_oai_error_set(&e, 400, "invalid_request_error", "top_p", NULL, "bad \xff value");
    char *s = nb_oai_error_json(&e);
    assert_non_null(strstr(s, "\"message\":\"bad \xEF\xBF\xBD value\""));
    assert_non_null(strstr(s, "\"param\":\"top_p\""));
    assert_non_null(strstr(s, "\"code\":null"));
    free(s);
    size_t n;
    char *u = nb_utf8_sanitize("a\xC3\xA9" "b\xE2\x82", 6, &n); /* é complete, € truncated */
    assert_string_equal(u, "a\xC3\xA9" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    free(u);
    assert_true(nb_secret_equal("abc", "abc"));
    assert_false(nb_secret_equal("ab", "abc"));
    assert_false(nb_secret_equal("abcd", "abc"));
    assert_false(nb_secret_equal("abd", "abc"));
    assert_false(nb_secret_equal("", "abc"));
}

static void test_histogram_format(void **state) {
    (void)state;
    static const double le[] = {0.1, 1.0};
    nb_histogram h = {.name = "x", .help = "h", .le = le, .n_le = 2};
    /* observations 0.05, 0.5, 0.5, 3: buckets (not cumulative) 1, 2, 1 */
    h.counts[0] = 1; h.counts[1] = 2; h.counts[2] = 1;
    h.sum = 4.05; h.count = 4;
    nb_dynbuf db;
    nb_dynbuf_init(&db, 1 << 20);
    assert_int_equal(nb_histogram_format(&h, "model_name=\"m\"", &db), NB_OK);
    char *b = nb_dynbuf_take(&db, NULL);
    assert_string_equal(b, "# HELP x h\n# TYPE x histogram\n"
                           "x_bucket{model_name=\"m\",le=\"0.1\"} 1\n"
                           "x_bucket{model_name=\"m\",le=\"1.0\"} 3\n"
                           "x_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
                           "x_sum{model_name=\"m\"} 4.0499999999999998\n"
                           "x_count{model_name=\"m\"} 4\n");
    free(b);
    /* nb_metrics_observe puts values on bucket boundaries into that bucket (le = less or equal). */
    nb_metrics m;
    nb_metrics_init(&m);
    nb_metrics_observe(&m, NB_HIST_TTFT, 0.001);
    nb_metrics_observe(&m, NB_HIST_TTFT, 1e9);
    assert_int_equal(m.h[NB_HIST_TTFT].counts[0], 1);
    assert_int_equal(m.h[NB_HIST_TTFT].counts[m.h[NB_HIST_TTFT].n_le], 1);
    char *page = nb_metrics_format(&m, NULL, "a\"b");
    assert_non_null(strstr(page, "nibble:num_requests_running{model_name=\"a\\\"b\"} 0\n"));
    assert_non_null(strstr(page, "nibble:time_to_first_token_seconds_count{model_name=\"a\\\"b\"} 2\n"));
    assert_non_null(strstr(page, "finished_reason=\"length\"} 0\n"));
    free(page);
    nb_metrics_destroy(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_completion), cmocka_unit_test(test_parse_chat), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_json_utf8_secret), cmocka_unit_test(test_histogram_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
