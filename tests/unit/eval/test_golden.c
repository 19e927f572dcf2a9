/* Tests of golden sets (eval/golden.h, eval/jsonschema.h) and of the
 * continuation rule of choice scoring (eval/golden_score.h), model-free:
 *  - every check type judged on a passing and a failing output
 *    (exact, contains, regex, number with tol and thousands separators,
 *    json_valid, json_schema keyword by keyword, choice, all, any);
 *  - JSON validity counted exactly over the items whose check involves
 *    JSON (a schema failure still counts as valid JSON);
 *  - set loading: line numbers for malformed JSON, unknown checks, an
 *    empty set, duplicate ids, bad regexes and schemas, choice nested;
 *  - the duplicate-id check on a 200,000-item set (a hash set: linear,
 *    where comparing every pair took minutes): duplicates at the start,
 *    middle and end are each found with the right lines, and near-equal ids
 *    are not taken for duplicates;
 *  - the continuation rule over text offsets. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "eval/golden.h"
#include "eval/golden_score.h"
#include "eval/jsonschema.h"

static nb_golden_set load(const char *text) {
    nb_golden_set s;
    nb_status st = nb_golden_set_parse(text, strlen(text), "t.jsonl", &s);
    if (st != NB_OK) fprintf(stderr, "load: %s\n", nb_errmsg());
    assert_int_equal(st, NB_OK);
    return s;
}

/* Judges `out` against the check of a one-item set written as JSON. */
static bool judge(const char *check, const char *out) {
    char line[2048];
    snprintf(line, sizeof line, "{\"id\": \"x\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": %s}\n", check);
    nb_golden_set s = load(line);
    nb_golden_verdict v;
    nb_golden_judge(&s.items[0].check, out, strlen(out), &v);
    assert_true(v.reason[0] != '\0');
    nb_golden_set_free(&s);
    return v.pass;
}

static void test_exact_contains_regex(void **state) {
    (void)state;
    assert_true(judge("{\"exact\": \"42\"}", "  42\n"));
    assert_false(judge("{\"exact\": \"42\"}", "42."));
    assert_false(judge("{\"exact\": \"42\"}", "The answer is 42"));
    assert_true(judge("{\"contains\": \"Paris\"}", "It is Paris, France"));
    assert_false(judge("{\"contains\": \"Paris\"}", "It is paris"));
    assert_true(judge("{\"regex\": \"^\\\\d{4}-\\\\d{2}-\\\\d{2}$\"}", "2024-03-05"));
    assert_false(judge("{\"regex\": \"^\\\\d{4}-\\\\d{2}-\\\\d{2}$\"}", "2024-3-5"));
    assert_true(judge("{\"regex\": \"caf\\u00e9\"}", "un caf\xc3\xa9 noir")); /* UTF-8 */
}

static void test_number(void **state) {
    (void)state;
    assert_true(judge("{\"number\": 1234.5}", "Total: $1,234.50 due"));
    assert_false(judge("{\"number\": 1234.5}", "Total: $1,234.55 due"));
    assert_true(judge("{\"number\": 1234.5, \"tol\": 0.1}", "1,234.55"));
    assert_true(judge("{\"number\": -7}", "it is -7 degrees"));
    assert_false(judge("{\"number\": 7}", "it is -7 degrees"));
    assert_false(judge("{\"number\": 3}", "no digits here"));
    assert_true(judge("{\"number\": 12}", "12 apples and 3 pears")); /* the first number */
    assert_false(judge("{\"number\": 3}", "12 apples and 3 pears"));
    double x;
    assert_true(nb_golden_first_number("1,23", 4, &x)); /* not a thousands group: 1 */
    assert_true(x == 1);
    assert_true(nb_golden_first_number("x 12,345,678.9 y", 16, &x));
    assert_true(x == 12345678.9);
}

static void test_json_checks(void **state) {
    (void)state;
    assert_true(judge("{\"json_valid\": true}", " {\"a\": [1, 2]}\n"));
    assert_true(judge("{\"json_valid\": true}", "3"));
    assert_false(judge("{\"json_valid\": true}", "{\"a\": 1"));
    assert_false(judge("{\"json_valid\": true}", "{\"a\": 1} trailing"));
    assert_false(judge("{\"json_valid\": true}", "{\"a\": 1, \"a\": 2}")); /* duplicate keys */
    assert_false(judge("{\"json_valid\": true}", ""));
    const char *tool = "{\"json_schema\": {\"type\": \"object\", \"required\": [\"name\", \"arguments\"], "
                       "\"properties\": {\"name\": {\"enum\": [\"get_weather\", \"book\"]}, "
                       "\"arguments\": {\"type\": \"object\", \"required\": [\"city\"], \"properties\": "
                       "{\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1, "
                       "\"maximum\": 7}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}}}}";
    assert_true(judge(tool, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}"));
    assert_true(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3.0, \"tags\": []}}"));
    /* one keyword at a time */
    assert_false(judge(tool, "[1]"));                                                       /* type */
    assert_false(judge(tool, "{\"name\": \"get_weather\"}"));                               /* required */
    assert_false(judge(tool, "{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}")); /* enum */
    assert_false(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": 5}}"));           /* properties type */
    assert_false(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": \"a\", \"days\": 0}}"));  /* minimum */
    assert_false(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": \"a\", \"days\": 8}}"));  /* maximum */
    assert_false(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": \"a\", \"days\": 2.5}}")); /* integer */
    assert_false(judge(tool, "{\"name\": \"book\", \"arguments\": {\"city\": \"a\", \"tags\": [1]}}")); /* items */
    assert_true(judge("{\"json_schema\": {\"type\": [\"number\", \"null\"]}}", "null"));
    assert_false(judge("{\"json_schema\": {\"type\": [\"number\", \"null\"]}}", "\"1\""));
    assert_true(judge("{\"json_schema\": {\"enum\": [1, \"a\"]}}", "1.0")); /* 1 == 1.0 */
    /* the violation is named with its path */
    json_t *s = json_loads("{\"properties\": {\"a\": {\"items\": {\"maximum\": 2}}}}", 0, NULL);
    json_t *x = json_loads("{\"a\": [1, 3]}", 0, NULL);
    char why[256];
    assert_false(nb_jsonschema_validate(s, x, why, sizeof why));
    assert_non_null(strstr(why, "$.a[1]"));
    assert_non_null(strstr(why, "maximum"));
    json_decref(s);
    json_decref(x);
}

static void test_all_any_choice(void **state) {
    (void)state;
    const char *all = "{\"all\": [{\"contains\": \"2024\"}, {\"regex\": \"03\"}]}";
    assert_true(judge(all, "2024-03-05"));
    assert_false(judge(all, "2024-04-05"));
    const char *any = "{\"any\": [{\"exact\": \"yes\"}, {\"exact\": \"Yes\"}]}";
    assert_true(judge(any, "Yes"));
    assert_false(judge(any, "no"));
    nb_golden_set s = load("{\"id\": \"c\", \"bucket\": \"b\", \"prompt\": \"The sky is\", "
                           "\"check\": {\"choice\": {\"options\": [\" blue\", \" green\", \" loud\"], \"answer\": 0}}}");
    nb_golden_verdict v;
    double ll_right[3] = {-1.5, -3.0, -9.0}, ll_wrong[3] = {-4.0, -3.0, -9.0}, ll_tie[3] = {-2.0, -2.0, -9.0};
    nb_golden_judge_choice(&s.items[0].check, ll_right, &v);
    assert_true(v.pass);
    nb_golden_judge_choice(&s.items[0].check, ll_wrong, &v);
    assert_false(v.pass);
    assert_non_null(strstr(v.reason, "picked 1"));
    nb_golden_judge_choice(&s.items[0].check, ll_tie, &v); /* ties -> the lowest index */
    assert_true(v.pass);
    nb_golden_set_free(&s);
}

/* JSON validity is counted over JSON items only, exactly. */
static void test_json_valid_rate(void **state) {
    (void)state;
    nb_golden_set s = load(
        "{\"id\": \"1\", \"bucket\": \"tool\", \"prompt\": \"p\", \"check\": {\"json_valid\": true}}\n"
        "{\"id\": \"2\", \"bucket\": \"tool\", \"prompt\": \"p\", \"check\": {\"json_schema\": {\"type\": \"array\"}}}\n"
        "{\"id\": \"3\", \"bucket\": \"tool\", \"prompt\": \"p\", \"check\": {\"all\": [{\"contains\": \"k\"}, "
        "{\"json_valid\": true}]}}\n"
        "\n"
        "{\"id\": \"4\", \"bucket\": \"math\", \"prompt\": \"p\", \"check\": {\"number\": 4}}\n"
        "{\"id\": \"5\", \"bucket\": \"math\", \"prompt\": \"p\", \"check\": {\"exact\": \"{}\"}}\n");
    assert_int_equal(s.n_items, 5);
    const char *outs[5] = {"{\"k\": 1}", "{\"k\": 1}", "{\"k\": ", "4", "{}"};
    bool want_pass[5] = {true, false, false, true, true};
    bool want_json[5] = {true, true, false, false, false};
    nb_golden_summary sum = {0};
    for (size_t i = 0; i < 5; i++) {
        nb_golden_verdict v;
        nb_golden_judge(&s.items[i].check, outs[i], strlen(outs[i]), &v);
        if (s.items[i].involves_json) v.json_ok = nb_golden_json_parses(outs[i], strlen(outs[i]));
        assert_int_equal(v.pass, want_pass[i]);
        assert_int_equal(s.items[i].involves_json, i < 3);
        if (s.items[i].involves_json) assert_int_equal(v.json_ok, want_json[i]);
        assert_int_equal(nb_golden_summary_add(&sum, &s.items[i], &v), NB_OK);
    }
    assert_int_equal(sum.n, 5);
    assert_int_equal(sum.n_pass, 3);
    assert_int_equal(sum.n_json, 3);    /* item 5's output is JSON but its check is not about JSON */
    assert_int_equal(sum.n_json_ok, 2); /* item 2 fails its schema but is valid JSON */
    json_t *j = nb_golden_summary_json(&sum);
    assert_true(json_real_value(json_object_get(j, "json_valid_rate")) == 2.0 / 3.0);
    json_t *b = json_object_get(json_object_get(j, "buckets"), "tool");
    assert_true(json_real_value(json_object_get(b, "pass_rate")) == 1.0 / 3.0);
    assert_int_equal(json_integer_value(json_object_get(b, "n")), 3);
    assert_true(json_real_value(json_object_get(json_object_get(j, "overall"), "pass_rate")) == 0.6);
    json_decref(j);
    nb_golden_summary_free(&sum);
    nb_golden_set_free(&s);
}

static void expect_bad(const char *text, nb_status want, const char *needle) {
    nb_golden_set s;
    nb_status st = nb_golden_set_parse(text, strlen(text), "set.jsonl", &s);
    if (st != want || !strstr(nb_errmsg(), needle)) fprintf(stderr, "got %d: %s (wanted '%s')\n", st, nb_errmsg(), needle);
    assert_int_equal(st, want);
    assert_non_null(strstr(nb_errmsg(), needle));
}

static void test_bad_sets(void **state) {
    (void)state;
    const char *ok = "{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": \"x\"}}\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s\n%s{\"id\": \"c\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": }\n", ok,
             "{\"id\": \"b\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": \"y\"}}\n");
    expect_bad(buf, NB_ERR_FORMAT, "set.jsonl:4: malformed JSON");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"fuzzy\": \"x\"}}",
               NB_ERR_FORMAT, "set.jsonl:1: check: unknown check 'fuzzy'");
    expect_bad("\n  \n", NB_ERR_INVALID, "no items");
    expect_bad("", NB_ERR_INVALID, "no items");
    snprintf(buf, sizeof buf, "%s%s", ok, ok);
    expect_bad(buf, NB_ERR_FORMAT, "set.jsonl:2: duplicate id 'a'");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"regex\": \"(\"}}", NB_ERR_FORMAT,
               "set.jsonl:1: check.regex");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"json_schema\": {\"pattern\": \"x\"}}}",
               NB_ERR_FORMAT, "unsupported keyword 'pattern'");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"any\": [{\"choice\": {\"options\": "
               "[\"x\", \"y\"], \"answer\": 0}}]}}", NB_ERR_FORMAT, "must be the item's whole check");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"choice\": {\"options\": [\"x\", "
               "\"y\"], \"answer\": 2}}}", NB_ERR_FORMAT, "answer");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"check\": {\"exact\": \"x\"}}", NB_ERR_FORMAT, "'prompt'");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\"}", NB_ERR_FORMAT, "'check' is missing");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": \"x\"}, \"extra\": 1}",
               NB_ERR_FORMAT, "unknown field 'extra'");
    expect_bad("{\"id\": \"a\", \"bucket\": \"b\", \"prompt\": \"p\", \"max_tokens\": 0, \"check\": {\"exact\": \"x\"}}",
               NB_ERR_FORMAT, "max_tokens");
    expect_bad("[1, 2]", NB_ERR_FORMAT, "set.jsonl:1: an item must be a JSON object");
    /* chat items load; roles are checked */
    nb_golden_set s = load("{\"id\": \"m\", \"bucket\": \"b\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                           "\"stop\": \"\\n\", \"check\": {\"contains\": \"h\"}}");
    assert_int_equal(s.items[0].n_messages, 1);
    assert_int_equal(s.items[0].n_stop, 1);
    assert_int_equal(s.items[0].max_tokens, NB_GOLDEN_DEFAULT_MAX_TOKENS);
    nb_golden_set_free(&s);
    expect_bad("{\"id\": \"m\", \"bucket\": \"b\", \"messages\": [{\"role\": \"bot\", \"content\": \"hi\"}], "
               "\"check\": {\"contains\": \"h\"}}", NB_ERR_FORMAT, "messages[0].role");
}

/* A set of n items with ids "item-<i>" (line i + 1), except that the item
 * at index dup_at (when >= 0) repeats the id of the item at dup_of. */
static char *big_set(int n, int dup_at, int dup_of, size_t *len) {
    size_t cap = (size_t)n * 96 + 1, off = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    for (int i = 0; i < n; i++) {
        int id = i == dup_at ? dup_of : i;
        off += (size_t)snprintf(t + off, cap - off,
                                "{\"id\": \"item-%d\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": \"x\"}}\n",
                                id);
        assert_true(off < cap);
    }
    *len = off;
    return t;
}

static void expect_dup(int n, int dup_at, int dup_of) {
    size_t len;
    char *t = big_set(n, dup_at, dup_of, &len);
    nb_golden_set s;
    nb_status st = nb_golden_set_parse(t, len, "big.jsonl", &s);
    if (st == NB_OK) nb_golden_set_free(&s);
    char want[128];
    snprintf(want, sizeof want, "big.jsonl:%d: duplicate id 'item-%d' (first on line %d)", dup_at + 1, dup_of,
             dup_of + 1);
    if (st != NB_ERR_FORMAT || strcmp(nb_errmsg(), want)) fprintf(stderr, "got %d: %s (wanted '%s')\n", st, nb_errmsg(), want);
    assert_int_equal(st, NB_ERR_FORMAT);
    assert_string_equal(nb_errmsg(), want);
    free(t);
}

static void test_large_set_duplicates(void **state) {
    (void)state;
    enum { N = 200000 };
    /* Each case stops at its duplicate; the end case parses all N items, so
     * its exact message (line N, first on line N/2 + 1) also shows that no
     * earlier pair of the near-equal ids item-1, item-10, item-100, ... was
     * taken for a duplicate. */
    expect_dup(N, 1, 0);          /* start: the second item repeats the first */
    expect_dup(N, N / 2, 7);      /* middle: repeats an early item */
    expect_dup(N, N - 1, N / 2);  /* end: the last item repeats the middle one */
}

static void test_continuation_rule(void **state) {
    (void)state;
    /* "<s>" "The" " cat" " sat": text "The cat sat", offsets 0 0 3 7, length 11 */
    float lp[4] = {NAN, -1.0f, -2.0f, -4.0f};
    size_t off[5] = {0, 0, 3, 7, 11};
    int n;
    /* prompt "The" (3 bytes): continuation " cat sat" */
    assert_true(fabs(nb_gscore_continuation(lp, off, 4, 3, &n) - (-6.0)) < 1e-9);
    assert_int_equal(n, 2);
    /* prompt "The cat" */
    assert_true(fabs(nb_gscore_continuation(lp, off, 4, 7, &n) - (-4.0)) < 1e-9);
    assert_int_equal(n, 1);
    /* a token straddling the boundary belongs to the continuation: prompt "The c" */
    assert_true(fabs(nb_gscore_continuation(lp, off, 4, 5, &n) - (-6.0)) < 1e-9);
    /* nothing after the prompt */
    assert_true(nb_gscore_continuation(lp, off, 4, 11, &n) == 0);
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_contains_regex),
        cmocka_unit_test(test_number),
        cmocka_unit_test(test_json_checks),
        cmocka_unit_test(test_all_any_choice),
        cmocka_unit_test(test_json_valid_rate),
        cmocka_unit_test(test_bad_sets),
        cmocka_unit_test(test_continuation_rule),
        cmocka_unit_test(test_large_set_duplicates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
