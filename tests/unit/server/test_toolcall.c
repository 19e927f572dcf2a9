/* Tool calls (server/toolcall.h): request validation, the family of a
 * template, the parser per format (well-formed and malformed calls), the
 * streaming hold-back rule checked against the final parse on every prefix,
 * and the constraint of tool_choice required / named. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/grammar.h"
#include "server/openai.h"
#include "server/toolcall.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"t\":{\"type\":\"number\"}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"tz\":{\"type\":\"integer\"}}}}}]";

/* Parses a body {"tools": TOOLS, EXTRA}; returns the error param ("" ok). */
static json_t *body(const char *extra) {
    char b[4096];
    snprintf(b, sizeof b, "{\"tools\":%s%s%s}", TOOLS, extra && *extra ? "," : "", extra ? extra : "");
    json_t *j = json_loads(b, 0, NULL);
    assert_non_null(j);
    return j;
}

static const char *req_param(const char *json_body, nb_tool_request *t, nb_oai_error *e) {
    json_t *j = json_loads(json_body, 0, NULL);
    assert_non_null(j);
    bool ok = nb_tool_request_parse(j, t, e);
    json_decref(j); /* t borrows: only its choice / flags are looked at after this */
    return ok ? "" : e->param;
}

static void test_request(void **state) {
    (void)state;
    nb_tool_request t;
    nb_oai_error e;
    json_t *j = body(NULL);
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_int_equal(t.choice, NB_TOOL_CHOICE_AUTO);
    assert_int_equal(t.n_tools, 2);
    assert_true(t.parallel);
    assert_non_null(nb_tool_template_tools(&t));
    json_decref(j);
    j = body("\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}},\"parallel_tool_calls\":false");
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_int_equal(t.choice, NB_TOOL_CHOICE_NAMED);
    assert_string_equal(t.name, "get_time");
    assert_false(t.parallel);
    json_decref(j);
    j = body("\"tool_choice\":\"none\"");
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_int_equal(t.choice, NB_TOOL_CHOICE_NONE);
    assert_null(nb_tool_template_tools(&t)); /* left out of the template */
    json_decref(j);
    assert_string_equal(req_param("{\"messages\":[]}", &t, &e), "");
    assert_int_equal(t.choice, NB_TOOL_CHOICE_NONE);

    assert_string_equal(req_param("{\"tools\":{}}", &t, &e), "tools");
    assert_string_equal(req_param("{\"tools\":[{\"type\":\"code\"}]}", &t, &e), "tools[0]");
    assert_string_equal(req_param("{\"tools\":[{\"type\":\"function\"}]}", &t, &e), "tools[0].function");
    assert_string_equal(req_param("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", &t, &e),
                        "tools[0].function.name");
    assert_string_equal(req_param("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
                                  "{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}", &t, &e),
                        "tools[1].function.name");
    assert_string_equal(req_param("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":3}}]}",
                                  &t, &e), "tools[0].function.parameters");
    assert_string_equal(req_param("{\"tool_choice\":\"required\"}", &t, &e), "tool_choice");
    assert_string_equal(req_param("{\"tool_choice\":\"sometimes\"}", &t, &e), "tool_choice");
    j = body("\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_date\"}}");
    assert_false(nb_tool_request_parse(j, &t, &e));
    assert_string_equal(e.param, "tool_choice.function.name");
    assert_non_null(strstr(e.message, "get_date"));
    json_decref(j);
    j = body("\"parallel_tool_calls\":1");
    assert_false(nb_tool_request_parse(j, &t, &e));
    assert_string_equal(e.param, "parallel_tool_calls");
    json_decref(j);
}

static void test_detect(void **state) {
    (void)state;
    assert_int_equal(nb_tool_format_detect(NULL), NB_TOOLS_GENERIC);
    const char *shared = getenv("NB_SHARED");
    if (!shared) {
        skip();
        return;
    }
    static const struct { const char *file; nb_tool_format f; } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct", NB_TOOLS_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", NB_TOOLS_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct", NB_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct", NB_TOOLS_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407", NB_TOOLS_MISTRAL},
        {"Mistral-Small-3.2-24B-Instruct-2506", NB_TOOLS_MISTRAL11},
        {"google-gemma-2-2b-it", NB_TOOLS_GENERIC},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/templates/%s.jinja", shared, cases[i].file);
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "missing %s\n", path);
            fail();
        }
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        if (nb_tool_format_detect(text) != cases[i].f)
            fprintf(stderr, "%s: detected %s\n", cases[i].file, nb_tool_format_name(nb_tool_format_detect(text)));
        assert_int_equal(nb_tool_format_detect(text), cases[i].f);
    }
}

typedef struct expect {
    const char *content; /* NULL: null */
    int n;
    const char *name[3], *args[3];
} expect;

static void check(nb_tool_format f, const char *extra, const char *text, expect x) {
    nb_tool_request t;
    nb_oai_error e;
    json_t *j = body(extra);
    assert_true(nb_tool_request_parse(j, &t, &e));
    nb_tool_result r;
    assert_int_equal(nb_tool_parse(&t, f, text, strlen(text), &r), NB_OK);
    if ((int)r.n_calls != x.n) fprintf(stderr, "%s: %zu calls for %s\n", nb_tool_format_name(f), r.n_calls, text);
    assert_int_equal((int)r.n_calls, x.n);
    if (x.n == 0) { /* malformed or no call: everything is content */
        assert_non_null(r.content);
        assert_string_equal(r.content, text);
    } else if (x.content) {
        assert_non_null(r.content);
        assert_string_equal(r.content, x.content);
    } else {
        assert_null(r.content);
    }
    for (int i = 0; i < x.n; i++) {
        assert_string_equal(r.calls[i].name, x.name[i]);
        assert_string_equal(r.calls[i].arguments, x.args[i]);
        assert_int_equal(strncmp(r.calls[i].id, "call_", 5), 0);
        assert_int_equal(strlen(r.calls[i].id), 29);
        json_t *a = json_loads(r.calls[i].arguments, 0, NULL); /* arguments: JSON text of an object */
        assert_true(json_is_object(a));
        json_decref(a);
    }
    if (r.n_calls == 2) assert_string_not_equal(r.calls[0].id, r.calls[1].id);
    nb_tool_result_free(&r);
    json_decref(j);
}

static void test_parse(void **state) {
    (void)state;
    /* Hermes / Qwen: content before, several calls, the last one unclosed; numbers kept byte for byte */
    check(NB_TOOLS_HERMES, NULL,
          "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris \\\"X\\\"\", "
          "\"t\": 1.10}}\n</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"get_time\"}",
          (expect){"Let me check.\n", 2, {"get_weather", "get_time"}, {"{\"city\":\"Paris \\\"X\\\"\",\"t\":1.10}", "{}"}});
    check(NB_TOOLS_HERMES, NULL, "  <tool_call>{\"name\":\"get_time\"}</tool_call>\n",
          (expect){NULL, 1, {"get_time"}, {"{}"}});
    check(NB_TOOLS_HERMES, NULL, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }</tool_call>", (expect){0});
    check(NB_TOOLS_HERMES, NULL, "<tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call>", (expect){0});
    check(NB_TOOLS_HERMES, NULL, "<tool_call>{\"name\": \"get_time\"}</tool_call> and more", (expect){0});
    check(NB_TOOLS_HERMES, NULL, "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>", (expect){0});
    check(NB_TOOLS_HERMES, NULL, "Just text, no <tool_call", (expect){0});
    /* Llama 3.1: python_tag, "parameters", several separated by ';'; a string holding the arguments */
    check(NB_TOOLS_LLAMA3, NULL, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
          (expect){NULL, 1, {"get_weather"}, {"{\"city\":\"Oslo\"}"}});
    check(NB_TOOLS_LLAMA3, NULL,
          "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"get_time\", \"parameters\": "
          "\"{\\\"tz\\\": 2}\"}",
          (expect){NULL, 2, {"get_weather", "get_time"}, {"{\"city\":\"Oslo\"}", "{\"tz\":2}"}});
    check(NB_TOOLS_LLAMA3, NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}", (expect){0});
    check(NB_TOOLS_LLAMA3, NULL, "{\"name\": \"get_weather\", \"parameters\": {}, \"arguments\": {}}", (expect){0});
    /* Mistral v3: [TOOL_CALLS] + array; without the marker (a control token) the bare array */
    check(NB_TOOLS_MISTRAL, NULL,
          "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": \"get_time\", "
          "\"arguments\": {\"tz\": -1}}]",
          (expect){NULL, 2, {"get_weather", "get_time"}, {"{\"city\":\"Rome\"}", "{\"tz\":-1}"}});
    check(NB_TOOLS_MISTRAL, NULL, " [{\"name\": \"get_time\", \"arguments\": {}}]", (expect){NULL, 1, {"get_time"}, {"{}"}});
    check(NB_TOOLS_MISTRAL, NULL, "Sure. [TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}},]", (expect){0});
    /* Mistral v11: name [CALL_ID] [ARGS] */
    check(NB_TOOLS_MISTRAL11, NULL,
          "Ok[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}",
          (expect){"Ok", 2, {"get_weather", "get_time"}, {"{\"city\":\"Rome\"}", "{}"}});
    check(NB_TOOLS_MISTRAL11, NULL, "[TOOL_CALLS]get_date[ARGS]{}", (expect){0});
    /* generic: a bare object or array; anything else is content */
    check(NB_TOOLS_GENERIC, NULL, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"K\\u00f8benhavn\"}}\n",
          (expect){NULL, 1, {"get_weather"}, {"{\"city\":\"K\\u00f8benhavn\"}"}});
    check(NB_TOOLS_GENERIC, NULL, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\"}]",
          (expect){NULL, 2, {"get_time", "get_time"}, {"{}", "{}"}});
    check(NB_TOOLS_GENERIC, NULL, "{\"foo\": 1}", (expect){0});
    check(NB_TOOLS_GENERIC, NULL, "Hello {\"name\": \"get_time\"}", (expect){0});
    check(NB_TOOLS_GENERIC, NULL, "", (expect){0});
    /* parallel_tool_calls false: the first call only; a named choice: only that function; none: no parsing */
    check(NB_TOOLS_GENERIC, "\"parallel_tool_calls\":false",
          "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\":\"a\"}}]",
          (expect){NULL, 1, {"get_time"}, {"{}"}});
    check(NB_TOOLS_GENERIC, "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}",
          "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"a\"}}", (expect){0});
    check(NB_TOOLS_GENERIC, "\"tool_choice\":\"none\"", "{\"name\": \"get_time\", \"arguments\": {}}", (expect){0});
}

/* Whatever a prefix lets the stream send as content is where the final
 * parse's content starts (and nothing when the content is null). */
static void test_stream_safe(void **state) {
    (void)state;
    static const struct { nb_tool_format f; const char *text; } cases[] = {
        {NB_TOOLS_HERMES, "Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"},
        {NB_TOOLS_HERMES, "\n <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"},
        {NB_TOOLS_HERMES, "I wrote <tool_ and <tool_call>{\"bad\": 1}</tool_call> then <tool"},
        {NB_TOOLS_HERMES, "a<tool_call>{\"name\": \"get_time\"}</tool_call>"},
        {NB_TOOLS_MISTRAL, "Hi [TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]"},
        {NB_TOOLS_MISTRAL, "[{\"name\": \"get_time\", \"arguments\": {}}]"},
        {NB_TOOLS_LLAMA3, "{\"name\": \"get_time\", \"parameters\": {}}"},
        {NB_TOOLS_LLAMA3, "Text <|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}"},
        {NB_TOOLS_GENERIC, "Plain answer {\"name\": \"get_time\"}"},
        {NB_TOOLS_GENERIC, "  {\"name\": \"get_time\", \"arguments\": {}}"},
        {NB_TOOLS_GENERIC, "  {\"name\": \"nope\", \"arguments\": {}}"},
    };
    nb_tool_request t;
    nb_oai_error e;
    json_t *j = body(NULL);
    assert_true(nb_tool_request_parse(j, &t, &e));
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *s = cases[c].text;
        size_t n = strlen(s);
        nb_tool_result r;
        assert_int_equal(nb_tool_parse(&t, cases[c].f, s, n, &r), NB_OK);
        size_t prev = 0;
        for (size_t k = 0; k <= n; k++) {
            size_t safe = nb_tool_stream_safe(cases[c].f, s, k);
            assert_true(safe <= k);
            if (safe < prev) safe = prev; /* the stream never takes back what it sent */
            prev = safe;
            if (safe) {
                if (!r.content || r.content_len < safe || memcmp(r.content, s, safe) != 0)
                    fprintf(stderr, "case %zu: prefix %zu sent %zu bytes the final content does not start with\n", c, k, safe);
                assert_non_null(r.content);
                assert_true(r.content_len >= safe && !memcmp(r.content, s, safe));
            }
        }
        nb_tool_result_free(&r);
    }
    json_decref(j);
}

static bool accepts(const nb_grammar *g, const char *doc) {
    nb_gmatch *m;
    assert_int_equal(nb_gmatch_create(g, &m), NB_OK);
    bool ok = nb_gmatch_feed(m, doc, strlen(doc)) && nb_gmatch_closed(m);
    nb_gmatch_free(m);
    return ok;
}

static void test_constraint(void **state) {
    (void)state;
    nb_tool_request t;
    nb_oai_error e;
    json_t *j = body("\"tool_choice\":\"required\"");
    assert_true(nb_tool_request_parse(j, &t, &e));
    nb_grammar *g = NULL;
    assert_true(nb_tool_grammar(&t, NB_TOOLS_HERMES, &g, &e));
    assert_non_null(g);
    const char *call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    assert_true(accepts(g, call));
    assert_false(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"tz\": 1}}\n</tool_call>"));
    /* what the grammar produces, the parser reads back as the same call */
    nb_tool_result r;
    assert_int_equal(nb_tool_parse(&t, NB_TOOLS_HERMES, call, strlen(call), &r), NB_OK);
    assert_int_equal(r.n_calls, 1);
    assert_string_equal(r.calls[0].arguments, "{\"city\":\"Oslo\"}");
    nb_tool_result_free(&r);
    nb_grammar_free(g);
    static const struct { nb_tool_format f; const char *doc; } fams[] = {
        {NB_TOOLS_GENERIC, "{\"name\": \"get_time\", \"arguments\": {\"tz\": 3}}"},
        {NB_TOOLS_LLAMA3, "{\"name\": \"get_time\", \"parameters\": {}}"},
        {NB_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]"},
        {NB_TOOLS_MISTRAL11, "[TOOL_CALLS]get_time[ARGS]{\"tz\":-2}"},
    };
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        assert_true(nb_tool_grammar(&t, fams[i].f, &g, &e));
        assert_true(accepts(g, fams[i].doc));
        assert_int_equal(nb_tool_parse(&t, fams[i].f, fams[i].doc, strlen(fams[i].doc), &r), NB_OK);
        assert_int_equal(r.n_calls, 1);
        assert_string_equal(r.calls[0].name, "get_time");
        nb_tool_result_free(&r);
        nb_grammar_free(g);
    }
    json_decref(j);
    /* named: only that function */
    j = body("\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}");
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_true(nb_tool_grammar(&t, NB_TOOLS_GENERIC, &g, &e));
    assert_true(accepts(g, "{\"name\": \"get_time\", \"arguments\": {}}"));
    assert_false(accepts(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\"}}"));
    nb_grammar_free(g);
    json_decref(j);
    /* auto: no constraint */
    j = body(NULL);
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_true(nb_tool_grammar(&t, NB_TOOLS_GENERIC, &g, &e));
    assert_null(g);
    json_decref(j);
    /* a parameters schema nibble cannot enforce: 400 naming the tool and the keyword */
    j = json_loads("{\"tool_choice\":\"required\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
                   "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"parameters\":{\"type\":\"object\","
                   "\"oneOf\":[]}}}]}", 0, NULL);
    assert_true(nb_tool_request_parse(j, &t, &e));
    assert_false(nb_tool_grammar(&t, NB_TOOLS_HERMES, &g, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "tools[1].function.parameters");
    assert_non_null(strstr(e.message, "oneOf"));
    json_decref(j);
}

/* Streams text in pieces of `step` bytes (0: the lengths in `cuts`, cycled)
 * through an nb_tool_stream; checks OpenAI's delta shape and returns the
 * reassembled calls and content. */
typedef struct streamed {
    char content[2048];
    int n;
    char name[4][64], args[4][1024], id[4][32];
    int fragments[4]; /* argument deltas with text */
} streamed;

static void take_deltas(json_t *deltas, streamed *o) {
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        json_t *tc = json_object_get(d, "tool_calls");
        assert_int_equal(json_array_size(tc), 1);
        json_t *c = json_array_get(tc, 0), *fn = json_object_get(c, "function");
        int idx = (int)json_integer_value(json_object_get(c, "index"));
        assert_true(idx >= 0 && idx < 4 && idx <= o->n);
        const char *a = json_string_value(json_object_get(fn, "arguments"));
        assert_non_null(a);
        if (idx == o->n) { /* the first delta of a call: index, id, type, name, arguments "" */
            assert_string_equal(json_string_value(json_object_get(c, "type")), "function");
            assert_non_null(json_string_value(json_object_get(c, "id")));
            assert_non_null(json_string_value(json_object_get(fn, "name")));
            assert_string_equal(a, "");
            snprintf(o->name[idx], sizeof o->name[idx], "%s", json_string_value(json_object_get(fn, "name")));
            snprintf(o->id[idx], sizeof o->id[idx], "%s", json_string_value(json_object_get(c, "id")));
            o->n++;
        } else { /* later: only index and function.arguments */
            assert_null(json_object_get(c, "id"));
            assert_null(json_object_get(c, "type"));
            assert_null(json_object_get(fn, "name"));
            assert_int_equal(json_object_size(c), 2);
            assert_int_equal(json_object_size(fn), 1);
            assert_true(strlen(o->args[idx]) + strlen(a) < sizeof o->args[idx]);
            strcat(o->args[idx], a);
            if (*a) o->fragments[idx]++;
        }
    }
}

static void stream_pieces(const nb_tool_request *t, nb_tool_format f, const char *text, size_t step,
                          const size_t *cuts, size_t n_cuts, streamed *o) {
    memset(o, 0, sizeof *o);
    nb_tool_stream *s;
    assert_int_equal(nb_tool_stream_create(t, f, &s), NB_OK);
    size_t n = strlen(text), at = 0, ci = 0;
    while (at < n) {
        size_t k = step ? step : cuts[ci++ % n_cuts];
        if (k > n - at) k = n - at;
        const char *p = text + at;
        size_t l = k;
        nb_tool_stream_push(s, &p, &l);
        assert_true(strlen(o->content) + l < sizeof o->content);
        strncat(o->content, p, l);
        json_t *d = nb_tool_stream_deltas(s);
        if (d) take_deltas(d, o);
        json_decref(d);
        at += k;
    }
    const char *p;
    size_t l;
    json_t *d = nb_tool_stream_end(s, &p, &l);
    strncat(o->content, p, l);
    if (d) take_deltas(d, o);
    json_decref(d);
    nb_tool_stream_free(s);
}

/* Arguments streamed as the model writes them reassemble, byte for byte,
 * to the whole answer's, whatever the token boundaries. */
static void test_stream_calls(void **state) {
    (void)state;
    static const struct { nb_tool_format f; const char *extra, *text; int min_fragments; } cases[] = {
        {NB_TOOLS_HERMES, NULL,
         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris \\\"X\\\" {}\", "
         "\"t\": 1.10}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": 3}}\n</tool_call>", 8},
        {NB_TOOLS_HERMES, NULL, "<tool_call>{\"arguments\": {\"tz\": 1}, \"name\": \"get_time\"}</tool_call>", 0},
        {NB_TOOLS_HERMES, NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\\\\\", \"t\": "
         "-2.5e3 }}\n</tool_call>", 4},
        {NB_TOOLS_MISTRAL, NULL,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"}]\\\\\\\"[TOOL_CALL\"}}, "
         "{\"name\": \"get_time\", \"arguments\": {}}]", 4},
        {NB_TOOLS_MISTRAL11, NULL,
         "Ok[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\\u00e9 [ARGS]\"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]"
         "{ \"tz\" : 2 }", 4},
        {NB_TOOLS_LLAMA3, NULL,
         "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"t\": 0}}; "
         "{\"name\": \"get_time\", \"parameters\": \"{\\\"tz\\\": 2}\"}", 4},
        {NB_TOOLS_LLAMA3, NULL, "{\"name\": \"get_time\", \"parameters\": {\"tz\": 12345}}", 4},
        {NB_TOOLS_GENERIC, NULL, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"K\\u00f8benhavn {\\\"\"}}\n", 8},
        {NB_TOOLS_GENERIC, "\"parallel_tool_calls\":false",
         "[{\"name\": \"get_time\", \"arguments\": {\"tz\": 1}}, {\"name\": \"get_weather\", \"arguments\": {\"city\":\"a\"}}]", 4},
        {NB_TOOLS_GENERIC, NULL, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3\xbcrich \xe6\x9d\xb1\xe4\xba\xac "
         "\xf0\x9f\x98\x80\"}}", 4}, /* raw UTF-8: 1-byte pieces cut characters; fragments wait for whole ones */
        {NB_TOOLS_GENERIC, NULL, "Plain answer, {\"name\": \"get_time\"}", 0},
    };
    static const size_t cuts_a[] = {1, 3, 2, 7, 1, 1, 5}, cuts_b[] = {4, 1, 9, 2};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        nb_tool_request t;
        nb_oai_error e;
        json_t *j = body(cases[c].extra);
        assert_true(nb_tool_request_parse(j, &t, &e));
        const char *text = cases[c].text;
        size_t n = strlen(text);
        nb_tool_result r;
        assert_int_equal(nb_tool_parse(&t, cases[c].f, text, n, &r), NB_OK);
        for (size_t way = 0; way < n + 3; way++) {
            streamed o;
            if (way == 0) stream_pieces(&t, cases[c].f, text, 1, NULL, 0, &o);
            else if (way == 1) stream_pieces(&t, cases[c].f, text, 0, cuts_a, 7, &o);
            else if (way == 2) stream_pieces(&t, cases[c].f, text, 0, cuts_b, 4, &o);
            else { /* two pieces, cut at every byte */
                size_t cut[2] = {way - 3 ? way - 3 : 1, n};
                stream_pieces(&t, cases[c].f, text, 0, cut, 2, &o);
            }
            if (o.n != (int)r.n_calls)
                fprintf(stderr, "case %zu way %zu: %d calls streamed, %zu whole\n", c, way, o.n, r.n_calls);
            assert_int_equal(o.n, (int)r.n_calls);
            assert_string_equal(o.content, r.content ? r.content : "");
            for (int i = 0; i < o.n; i++) {
                assert_string_equal(o.name[i], r.calls[i].name);
                if (strcmp(o.args[i], r.calls[i].arguments) != 0)
                    fprintf(stderr, "case %zu way %zu call %d: streamed %s, whole %s\n", c, way, i, o.args[i],
                            r.calls[i].arguments);
                assert_string_equal(o.args[i], r.calls[i].arguments);
                assert_int_equal(strlen(o.id[i]), 29);
                if (way == 0) assert_true(o.fragments[i] >= (i == 0 ? cases[c].min_fragments : 0));
            }
        }
        nb_tool_result_free(&r);
        json_decref(j);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request), cmocka_unit_test(test_detect),     cmocka_unit_test(test_parse),
        cmocka_unit_test(test_stream_safe), cmocka_unit_test(test_constraint),
        cmocka_unit_test(test_stream_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
