/* Constrained decoding (engine/grammar.h): documents byte by byte, the
 * schema keywords one by one (accepted and rejected bytes), refused
 * keywords, and the budget property: a random walk over all 256 bytes that
 * only takes steps the mask's rule allows always ends in a complete
 * document that jansson parses and that satisfies the schema. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ctype.h>

#include <cmocka.h>

#include "engine/grammar.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"

static nb_grammar *schema(const char *s) {
    nb_grammar *g = NULL;
    nb_status st = nb_grammar_json_schema(s, strlen(s), &g);
    if (st != NB_OK) fprintf(stderr, "schema %s refused: %s\n", s, nb_errmsg());
    assert_int_equal(st, NB_OK);
    return g;
}

/* 1 = accepted and complete, 0 = accepted but incomplete, -1 = rejected */
static int run(const nb_grammar *g, const char *doc) {
    nb_gmatch *m;
    assert_int_equal(nb_gmatch_create(g, &m), NB_OK);
    int r = 0;
    for (const char *p = doc; *p; p++)
        if (!nb_gmatch_feed(m, p, 1)) {
            r = -1;
            break;
        }
    if (r == 0) r = nb_gmatch_complete(m) ? 1 : 0;
    nb_gmatch_free(m);
    return r;
}

static void test_object_keywords(void **state) {
    (void)state;
    nb_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,"
                           "\"maxLength\":5},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
                           "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],"
                           "\"additionalProperties\":false}");
    assert_int_equal(run(g, "{\"name\":\"bob\",\"age\":42}"), 1);
    assert_int_equal(run(g, "{ \"age\" : 7 , \"name\" : \"x\" , \"ok\" : true }"), 1);
    assert_int_equal(run(g, "{\"name\":\"bob\"}"), -1);          /* '}' before the required age */
    assert_int_equal(run(g, "{\"name\":\"bob\",\"zzz\""), -1);     /* not a property, none additional */
    assert_int_equal(run(g, "{\"name\":\"\""), -1);              /* minLength 1 */
    assert_int_equal(run(g, "{\"name\":\"abcdef"), -1);          /* maxLength 5 */
    assert_int_equal(run(g, "{\"age\":121"), -1);                /* maximum */
    assert_int_equal(run(g, "{\"age\":-1"), -1);                 /* minimum 0 (-0 would be fine) */
    assert_int_equal(run(g, "{\"age\":1.5"), -1);                /* integer */
    assert_int_equal(run(g, "{\"name\":\"a\",\"name\":"), -1);   /* duplicate key */
    assert_int_equal(run(g, "{\"name\":\"bo"), 0);
    assert_int_equal(run(g, "[1]"), -1);
    nb_grammar_free(g);
}

static void test_arrays_enums_anyof(void **state) {
    (void)state;
    nb_grammar *g = schema("{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",1,10,null]},\"minItems\":1,"
                           "\"maxItems\":2}");
    assert_int_equal(run(g, "[\"red\"]"), 1);
    assert_int_equal(run(g, "[10,null]"), 1);
    assert_int_equal(run(g, "[1]"), 1);
    assert_int_equal(run(g, "[]"), -1);                       /* minItems */
    assert_int_equal(run(g, "[1,1,1"), -1);                   /* maxItems */
    assert_int_equal(run(g, "[\"blue\"]"), -1);
    assert_int_equal(run(g, "[100"), -1);
    nb_grammar_free(g);
    g = schema("{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^[0-9]{4}-[0-9]{2}$\"},{\"type\":\"integer\"}],"
               "\"nullable\":true}");
    assert_int_equal(run(g, "\"2024-11\""), 1);
    assert_int_equal(run(g, "\"2024-1x"), -1);                /* pattern */
    assert_int_equal(run(g, "17"), 1);
    assert_int_equal(run(g, "null"), 1);
    assert_int_equal(run(g, "true"), -1);
    nb_grammar_free(g);
    g = schema("{\"type\":[\"number\",\"string\"],\"exclusiveMaximum\":10}");
    assert_int_equal(run(g, "9.5"), 1);
    assert_int_equal(run(g, "10"), 0);  /* 10 is not < 10, and no digit can follow to save it: */
    assert_int_equal(run(g, "10."), 0); /* ... but 10.0 is still 10: incomplete, never accepted */
    assert_int_equal(run(g, "\"x\""), 1);
    nb_grammar_free(g);
}

static void test_refs_and_refusals(void **state) {
    (void)state;
    nb_grammar *g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                           "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
                           "\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}");
    assert_int_equal(run(g, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"), 1);
    assert_int_equal(run(g, "{\"v\":1,\"next\":{\"v\":2}}"), -1);
    nb_grammar_free(g);
    const char *bad[] = {"{\"type\":\"object\",\"allOf\":[]}", "{\"oneOf\":[{},{}]}", "{\"type\":\"tuple\"}",
                         "{\"$ref\":\"http://example.com/s.json\"}", "{\"type\":\"string\",\"pattern\":\"(\"}",
                         "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_grammar *x = NULL;
        assert_int_not_equal(nb_grammar_json_schema(bad[i], strlen(bad[i]), &x), NB_OK);
        assert_null(x);
    }
    nb_grammar *x = NULL;
    assert_int_equal(nb_grammar_json_schema(bad[0], strlen(bad[0]), &x), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "allOf"));
}

/* A keyword beside $ref / const / enum / anyOf, a keyword that does not
 * apply to the type, `format`: enforced, proven redundant, or refused
 * naming the keyword and its path; never dropped. */
static void test_keywords_beside(void **state) {
    (void)state;
    static const struct { const char *schema, *want[3]; nb_status st; } bad[] = {
        {"{\"type\":\"string\",\"format\":\"color\"}", {"#/format", "'color'", "uuid"}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"iri\"}}}",
         {"#/properties/d/format", "'pattern'", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"^2\"}", {"#/format", "beside 'pattern'", NULL},
         NB_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":5}", {"#/format", "not a string", NULL}, NB_ERR_INVALID},
        {"{\"type\":\"integer\",\"format\":\"date\"}", {"#/format", "does not apply", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":9}", {"#/format", "maxLength", NULL},
         NB_ERR_UNSUPPORTED},
        {"{\"enum\":[\"2024-01-31\",\"2024-02-30\"],\"format\":\"date\"}", {"#/format", "#/enum/1", NULL},
         NB_ERR_UNSUPPORTED},
        {"{\"$defs\":{\"a\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a\",\"maxLength\":3}",
         {"#/maxLength", "beside '$ref'", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"$ref\":\"#\",\"type\":\"object\"}", {"#/type", "'$ref'", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"type\":\"string\"}",
         {"#/type", "beside 'anyOf'", "every anyOf alternative"}, NB_ERR_UNSUPPORTED},
        {"{\"anyOf\":[{\"type\":\"string\"}],\"minLength\":2}", {"#/minLength", "anyOf", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"enum\":[\"a\",\"bb\"],\"minLength\":2}", {"#/minLength", "#/enum/0", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"object\",\"properties\":{\"c\":{\"const\":\"x\",\"type\":\"integer\"}}}",
         {"#/properties/c/type", "#/properties/c/const", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"enum\":[1,5],\"maximum\":4}", {"#/maximum", "#/enum/1", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"enum\":[\"a\",null]}", {"#/type", "#/enum/1", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"enum\":[\"ab\",\"x1\"],\"pattern\":\"^[a-z]+$\"}", {"#/pattern", "#/enum/1", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"enum\":[{\"a\":1}],\"properties\":{\"a\":{\"type\":\"integer\"}}}", {"#/properties", "beside 'enum'", NULL},
         NB_ERR_UNSUPPORTED},
        {"{\"const\":[1],\"items\":{\"type\":\"string\"}}", {"#/items", "beside 'const'", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"enum\":[1,2],\"anyOf\":[{}]}", {"#/anyOf", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"const\":1,\"enum\":[2,3]}", {"#/enum", "'const'", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"minimum\":3}", {"#/minimum", "does not apply", "string"}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"integer\",\"properties\":{}}", {"#/properties", "does not apply", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"boolean\",\"maxLength\":1}", {"#/maxLength", NULL}, NB_ERR_UNSUPPORTED},
        {"{\"minLength\":2,\"minimum\":1}", {"no 'type'", "minLength", "minimum"}, NB_ERR_UNSUPPORTED},
        {"{\"properties\":{\"a\":{}},\"items\":{}}", {"no 'type'", "properties", "items"}, NB_ERR_UNSUPPORTED},
        {"{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":true}}}",
         {"#/properties/x/exclusiveMinimum", "a number", NULL}, NB_ERR_INVALID},
        {"{\"type\":\"string\",\"maxLength\":\"5\"}", {"#/maxLength", "non-negative integer", NULL}, NB_ERR_INVALID},
        {"{\"type\":\"array\",\"minItems\":-1}", {"#/minItems", NULL}, NB_ERR_INVALID},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_grammar *x = NULL;
        nb_status st = nb_grammar_json_schema(bad[i].schema, strlen(bad[i].schema), &x);
        if (st != bad[i].st) fail_msg("%s: status %d, want %d (%s)", bad[i].schema, st, bad[i].st, st ? nb_errmsg() : "");
        assert_null(x);
        for (int k = 0; k < 3 && bad[i].want[k]; k++)
            if (!strstr(nb_errmsg(), bad[i].want[k])) fail_msg("%s: '%s' not in: %s", bad[i].schema, bad[i].want[k], nb_errmsg());
    }
    /* tool parameters go through the same compiler */
    const char *pre[] = {"<"}, *fmt[] = {"{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"color\"}}}"};
    nb_grammar *tg = NULL;
    assert_int_equal(nb_grammar_tagged(pre, fmt, 1, ">", &tg), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "#/properties/when/format"));

    /* redundant and consistent: accepted, and the values are what is produced */
    nb_grammar *g = schema("{\"type\":\"string\",\"enum\":[\"a\",\"b\"],\"description\":\"d\"}");
    assert_int_equal(run(g, "\"a\""), 1);
    assert_int_equal(run(g, "\"c\""), -1);
    nb_grammar_free(g);
    g = schema("{\"enum\":[\"ab\",\"cd\",3],\"type\":[\"string\",\"integer\"],\"minLength\":2,\"maxLength\":2,"
               "\"pattern\":\"^[a-z]+$\",\"maximum\":3,\"exclusiveMinimum\":2}");
    assert_int_equal(run(g, "\"cd\""), 1);
    assert_int_equal(run(g, "3"), 1);
    nb_grammar_free(g);
    g = schema("{\"type\":\"string\",\"enum\":[\"a\",null],\"nullable\":true}"); /* OpenAPI's nullable */
    assert_int_equal(run(g, "null"), 1);
    nb_grammar_free(g);
    g = schema("{\"enum\":[\"2024-02-29\",\"1999-12-31\"],\"format\":\"date\"}"); /* every value a date */
    assert_int_equal(run(g, "\"1999-12-31\""), 1);
    nb_grammar_free(g);
    g = schema("{\"const\":5,\"type\":\"integer\",\"minimum\":0,\"enum\":[4,5]}");
    assert_int_equal(run(g, "5"), 1);
    assert_int_equal(run(g, "4"), -1);
    nb_grammar_free(g);
    g = schema("{\"enum\":[1,2.0,\"\\u00e9t\\u00e9\"],\"type\":[\"integer\",\"string\"],\"maxLength\":4,\"minItems\":3}");
    nb_grammar_free(g); /* 2.0 is an integer; "été" is 3 characters (5 bytes) */
    g = schema("{\"$defs\":{\"a\":{\"type\":\"string\",\"maxLength\":2}},\"$ref\":\"#/$defs/a\",\"nullable\":true,"
               "\"title\":\"t\"}");
    assert_int_equal(run(g, "null"), 1);
    assert_int_equal(run(g, "\"abc"), -1);
    nb_grammar_free(g);
    /* keywords of one kind without a type give the type (they were ignored: any value came out) */
    g = schema("{\"minItems\":1}");
    assert_int_equal(run(g, "[]"), -1);
    assert_int_equal(run(g, "[1]"), 1);
    assert_int_equal(run(g, "1"), -1);
    nb_grammar_free(g);
    g = schema("{\"additionalProperties\":false}");
    assert_int_equal(run(g, "{}"), 1);
    assert_int_equal(run(g, "{\"a\""), -1);
    nb_grammar_free(g);
    g = schema("{\"maxLength\":1}");
    assert_int_equal(run(g, "\"ab"), -1);
    assert_int_equal(run(g, "\"a\""), 1);
    nb_grammar_free(g);
}

static void test_choice_and_regex(void **state) {
    (void)state;
    const char *c[] = {"yes", "no", "not sure"};
    nb_grammar *g;
    assert_int_equal(nb_grammar_choice(c, 3, &g), NB_OK);
    assert_int_equal(run(g, "no"), 1);
    assert_int_equal(run(g, "not sure"), 1);
    assert_int_equal(run(g, "not"), 0);
    assert_int_equal(run(g, " no"), -1);
    assert_int_equal(run(g, "nope"), -1);
    nb_grammar_free(g);
    assert_int_equal(nb_grammar_regex("[0-9]{4}-[0-9]{2}-[0-9]{2}", &g), NB_OK);
    assert_int_equal(run(g, "2026-11-30"), 1);
    assert_int_equal(run(g, "2026-1"), 0);
    assert_int_equal(run(g, "2026x"), -1);
    assert_int_equal(run(g, "2026-11-301"), -1);
    nb_grammar_free(g);
    assert_int_equal(nb_grammar_regex("caf\xc3\xa9", &g), NB_OK);
    assert_int_equal(run(g, "caf\xc3"), 0); /* a character cut in half is still viable */
    assert_int_equal(run(g, "caf\xc3\xa9"), 1);
    nb_grammar_free(g);
}

/* Random walks: at every step pick uniformly among the bytes that keep the
 * document viable with a completion no longer than the steps left; the
 * result must be whole, parse, and satisfy the schema's keywords. */
static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* A uniformly random one of the n tokens the mask allows. */
static int32_t pick_allowed(const uint8_t *allowed, int32_t nv, int32_t n) {
    int32_t k = (int32_t)(next_rand() % (uint32_t)n);
    for (int32_t i = 0; i < nv; i++)
        if (allowed[i] && k-- == 0) return i;
    fail_msg("the mask allows fewer than %d tokens", n);
    return -1;
}

/* A random walk under g's mask: at most `budget` tokens, each a uniform
 * pick among the allowed ones, until the match closes or EOS is picked;
 * the text goes to out (NUL-terminated). Returns the match, for the
 * caller's checks and nb_gmatch_free. `what` and `w` name the walk in a
 * failure. */
static nb_gmatch *random_walk(nb_vtrie *v, const nb_tokenizer *tk, const nb_grammar *g, int budget, int32_t eos,
                              uint8_t *allowed, int32_t nv, char *out, size_t cap, const char *what, int w) {
    nb_gmatch *m;
    assert_int_equal(nb_gmatch_create(g, &m), NB_OK);
    size_t on = 0;
    out[0] = 0;
    for (int left = budget; left > 0 && !nb_gmatch_closed(m); left--) {
        int32_t n = nb_grammar_mask(v, m, left, &eos, 1, allowed, nv);
        if (n == 0) fprintf(stderr, "%s %d: no token allowed after %.*s\n", what, w, (int)on, out);
        assert_true(n > 0);
        int32_t id = pick_allowed(allowed, nv, n);
        if (id == eos) break;
        size_t l;
        const char *p = nb_token_piece_ref(tk, id, false, &l);
        assert_true(nb_gmatch_feed(m, p, l));
        assert_true(on + l < cap);
        memcpy(out + on, p, l);
        on += l;
        out[on] = 0;
    }
    return m;
}

static void walk(const nb_grammar *g, int budget, char *out) {
    nb_gmatch *m;
    assert_int_equal(nb_gmatch_create(g, &m), NB_OK);
    int n = 0;
    for (int left = budget; left > 0 && !nb_gmatch_closed(m); left--) {
        uint8_t ok[256];
        int k = 0;
        for (int b = 1; b < 256; b++) {
            nb_gmatch *t;
            assert_int_equal(nb_gmatch_create(g, &t), NB_OK);
            bool good = nb_gmatch_feed(t, out, (size_t)n);
            char c = (char)b;
            good = good && nb_gmatch_feed(t, &c, 1) && nb_gmatch_min_remaining(t) <= (size_t)(left - 1);
            nb_gmatch_free(t);
            if (good) ok[k++] = (uint8_t)b;
        }
        if (k == 0) break;
        /* stop at a complete document one time in four, like an EOS */
        if (nb_gmatch_complete(m) && next_rand() % 4 == 0) break;
        char c = (char)ok[next_rand() % (uint32_t)k];
        assert_true(nb_gmatch_feed(m, &c, 1));
        out[n++] = c;
    }
    out[n] = 0;
    if (!nb_gmatch_complete(m)) {
        fprintf(stderr, "walk ended incomplete after %d bytes (remaining %zu): ", n, nb_gmatch_min_remaining(m));
        for (int i = 0; i < n; i++) fprintf(stderr, (uint8_t)out[i] < 0x20 || (uint8_t)out[i] > 0x7e ? "\\x%02x" : "%c", (uint8_t)out[i]);
        fprintf(stderr, "\n");
    }
    assert_true(nb_gmatch_complete(m));
    nb_gmatch_free(m);
}

static void test_budget_walks(void **state) {
    (void)state;
    nb_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"tags\":{\"type\":"
                           "\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},\"minItems\":2},\"who\":{\"type\":"
                           "\"object\",\"properties\":{\"n\":{\"type\":\"string\"}},\"required\":[\"n\"]}},"
                           "\"required\":[\"id\",\"tags\",\"who\"],\"additionalProperties\":false}");
    char out[512];
    for (int i = 0; i < 60; i++) {
        walk(g, 40 + i % 40, out); /* tight budgets too: the shortest document is 38 bytes */
        json_error_t je;
        json_t *j = json_loads(out, 0, &je);
        if (!j) fprintf(stderr, "walk %d produced invalid JSON: %s (%s)\n", i, out, je.text);
        assert_non_null(j);
        assert_true(json_is_integer(json_object_get(j, "id")));
        json_t *tags = json_object_get(j, "tags");
        assert_true(json_is_array(tags) && json_array_size(tags) >= 2);
        for (size_t k = 0; k < json_array_size(tags); k++) {
            json_t *t = json_array_get(tags, k);
            assert_true(json_is_string(t));
            assert_true(json_string_length(t) <= 12); /* <= 3 characters, up to 4 UTF-8 bytes each */
        }
        assert_true(json_is_string(json_object_get(json_object_get(j, "who"), "n")));
        json_decref(j);
    }
    nb_grammar_free(g);
    assert_int_equal(nb_grammar_json_object(&g), NB_OK);
    for (int i = 0; i < 20; i++) {
        walk(g, 40, out);
        json_error_t je;
        json_t *j = json_loads(out, JSON_ALLOW_NUL, &je); /* \u0000 is valid JSON */
        if (!j) fprintf(stderr, "json_object walk %d: %s (%s)\n", i, out, je.text);
        assert_non_null(j);
        assert_true(json_is_object(j));
        json_decref(j);
    }
    nb_grammar_free(g);
}

/* ---- format: oracles written without the grammar's regular expressions ---- */

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

static int num(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) v = 10 * v + (s[i] - '0');
    return v;
}

static bool is_date(const char *s, size_t n) {
    if (n != 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return false;
    int y = num(s, 4), m = num(s + 5, 2), d = num(s + 8, 2);
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] + (m == 2 && leap);
}

static bool is_time(const char *s, size_t n) {
    if (n < 9 || !digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2)) return false;
    if (num(s, 2) > 23 || num(s + 3, 2) > 59 || num(s + 6, 2) > 59) return false;
    size_t i = 8;
    if (s[i] == '.') {
        size_t k = ++i;
        while (i < n && isdigit((unsigned char)s[i])) i++;
        if (i == k || i - k > 6) return false;
    }
    if (i + 1 == n && s[i] == 'Z') return true;
    return i + 6 == n && (s[i] == '+' || s[i] == '-') && digits(s + i + 1, 2) && s[i + 3] == ':' &&
           digits(s + i + 4, 2) && num(s + i + 1, 2) <= 23 && num(s + i + 4, 2) <= 59;
}

/* RFC 3339 appendix A: the units of the date part and of the time part are
 * each a run of "YMD" / "HMS" without gaps, weeks stand alone. */
static bool is_duration(const char *s, size_t n) {
    if (n < 3 || s[0] != 'P') return false;
    char units[8];
    int nu = 0;
    bool in_time = false;
    size_t tpos = 0;
    int ntime = 0, ndate = 0;
    for (size_t i = 1; i < n;) {
        if (s[i] == 'T') {
            if (in_time) return false;
            in_time = true;
            tpos = (size_t)nu;
            i++;
            continue;
        }
        size_t k = i;
        while (i < n && isdigit((unsigned char)s[i])) i++;
        if (i == k || i == n || nu == 7) return false;
        units[nu++] = s[i++];
        in_time ? ntime++ : ndate++;
    }
    if (in_time && ntime == 0) return false;
    if (!in_time) tpos = (size_t)nu;
    units[nu] = 0;
    char date[8] = {0}, time[8] = {0};
    memcpy(date, units, tpos);
    memcpy(time, units + tpos, (size_t)nu - tpos);
    if (!strcmp(date, "W")) return !time[0];
    return (!date[0] || strstr("YMD", date)) && (!time[0] || strstr("HMS", time)) && (date[0] || time[0]);
}

static bool is_label(const char *s, size_t n) {
    if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-') return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-') return false;
    return true;
}

/* dot-separated labels; with tld, at least two and the last 2-63 letters */
static bool is_host(const char *s, size_t n, bool tld) {
    if (n > 253) return false;
    int labels = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '.') {
            if (!is_label(s + start, i - start)) return false;
            labels++;
            if (i == n && tld) {
                if (labels < 2 || i - start < 2) return false;
                for (size_t k = start; k < i; k++)
                    if (!isalpha((unsigned char)s[k])) return false;
            }
            start = i + 1;
        }
    return true;
}

static bool is_email(const char *s, size_t n) {
    const char *at = memchr(s, '@', n);
    if (!at || at == s || at[-1] == '.' || s[0] == '.') return false;
    for (const char *p = s; p < at; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._%+-", *p)) return false;
        else if (*p == '.' && p[1] == '.') return false;
    return is_host(at + 1, n - (size_t)(at + 1 - s), true);
}

static bool is_uuid(const char *s, size_t n) {
    if (n != 36) return false;
    for (size_t i = 0; i < n; i++)
        if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !isxdigit((unsigned char)s[i])) return false;
    return true;
}

static bool is_uri(const char *s, size_t n) {
    size_t i = 0;
    if (n == 0 || !isalpha((unsigned char)s[0])) return false;
    while (i < n && (isalnum((unsigned char)s[i]) || strchr("+.-", s[i]))) i++;
    if (n - i < 3 || memcmp(s + i, "://", 3)) return false;
    size_t h = i += 3;
    while (i < n && !strchr(":/?#", s[i])) i++;
    if (!is_host(s + h, i - h, false)) return false;
    if (i < n && s[i] == ':') {
        size_t k = ++i;
        while (i < n && isdigit((unsigned char)s[i])) i++;
        if (i == k || i - k > 5) return false;
    }
    for (; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2])) return false;
            i += 2;
        } else if (!isalnum((unsigned char)s[i]) && !strchr("._~!$&'()*+,;=:@-/?#", s[i])) {
            return false;
        }
    }
    return true;
}

static bool is_format(const char *f, const char *s, size_t n) {
    char buf[300];
    unsigned char ip[16];
    if (n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (!strcmp(f, "date")) return is_date(s, n);
    if (!strcmp(f, "time")) return is_time(s, n);
    if (!strcmp(f, "date-time")) return n > 11 && s[10] == 'T' && is_date(s, 10) && is_time(s + 11, n - 11);
    if (!strcmp(f, "duration")) return is_duration(s, n);
    if (!strcmp(f, "email")) return is_email(s, n);
    if (!strcmp(f, "hostname")) return is_host(s, n, false);
    if (!strcmp(f, "ipv4")) return inet_pton(AF_INET, buf, ip) == 1;
    if (!strcmp(f, "ipv6")) return inet_pton(AF_INET6, buf, ip) == 1;
    if (!strcmp(f, "uuid")) return is_uuid(s, n);
    if (!strcmp(f, "uri")) return is_uri(s, n);
    fail_msg("no oracle for %s", f);
    return false;
}

/* Every `format` nibble enforces: strings that are (and are not) of the
 * format, checked byte by byte against the independent oracle above (the
 * token walks below check what the mask produces). */
static void test_formats(void **state) {
    (void)state;
    static const struct { const char *fmt; int shortest; const char *good[4], *bad[4]; } cases[] = {
        {"date", 10, {"2024-02-29", "0001-01-01", "1999-12-31", "2000-02-29"}, {"2023-02-29", "1900-02-29", "2024-04-31", "0000-01-01"}},
        {"time", 9, {"23:59:59Z", "00:00:00.123456+05:30", "12:30:00-00:00", NULL}, {"24:00:00Z", "12:60:00Z", "12:30:00", "12:30:00.1234567Z"}},
        {"date-time", 20, {"2024-02-29T12:30:00Z", "1970-01-01T00:00:00.5+01:00", NULL}, {"2024-02-29 12:30:00Z", "2024-02-29t12:30:00Z", NULL}},
        {"duration", 3, {"P1Y2M3DT4H5M6S", "P1W", "PT36H", "P3D"}, {"P", "PT", "P1Y1D", "P1WT1H"}},
        {"email", 6, {"a@b.co", "first.last+tag@mail.example.org", NULL}, {"a@b", ".a@b.co", "a..b@c.de", "a@b.c1"}},
        {"hostname", 1, {"localhost", "a-b.example.com", "x1.y2", NULL}, {"-a.com", "a-.com", "a..b", "a_b.com"}},
        {"ipv4", 7, {"0.0.0.0", "255.255.255.255", "192.168.1.10", NULL}, {"256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"}},
        {"ipv6", 2, {"::1", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "::"}, {"1:2:3:4:5:6:7:8:9", ":1", "1:::2", "12345::"}},
        {"uuid", 36, {"123e4567-e89b-12d3-a456-426614174000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", NULL}, {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", NULL}},
        {"uri", 5, {"https://example.com", "http://a.b:8080/p/q?x=1&y=%20#frag", "ftp://h/", NULL}, {"example.com", "https://", "http://a b", "http://h/%zz"}},
    };
    char doc[320];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char sch[128];
        snprintf(sch, sizeof sch, "{\"type\":\"string\",\"format\":\"%s\"}", cases[c].fmt);
        nb_grammar *g = schema(sch);
        for (int k = 0; k < 4; k++) {
            if (cases[c].good[k]) {
                assert_true(is_format(cases[c].fmt, cases[c].good[k], strlen(cases[c].good[k]))); /* the oracle agrees */
                snprintf(doc, sizeof doc, "\"%s\"", cases[c].good[k]);
                if (run(g, doc) != 1) fail_msg("%s: %s not accepted", cases[c].fmt, doc);
            }
            if (cases[c].bad[k]) {
                assert_false(is_format(cases[c].fmt, cases[c].bad[k], strlen(cases[c].bad[k])));
                snprintf(doc, sizeof doc, "\"%s\"", cases[c].bad[k]);
                if (run(g, doc) == 1) fail_msg("%s: %s accepted", cases[c].fmt, doc);
            }
        }
        nb_grammar_free(g);
    }
}

/* Token walks with the built-in vocabulary (512 byte-level tokens, as the
 * default model has): random allowed tokens under nb_grammar_mask with a
 * budget, down to the shortest document's length; never a step without an
 * allowed token, always a whole document that parses. */
static void test_token_walks(void **state) {
    (void)state;
    char path[] = "/tmp/nb_grammar_vocab_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    nb_synth_params sp;
    nb_synth_defaults(&sp, NB_ARCH_LLAMA);
    sp.n_embd = 64, sp.n_layer = 1, sp.n_head = 2, sp.n_head_kv = 1, sp.n_ff = 128;
    assert_int_equal(nb_synth_write(&sp, path), NB_OK);
    nb_tokenizer *tk;
    assert_int_equal(nb_tokenizer_load(path, NULL, &tk), NB_OK);
    unlink(path);
    nb_vtrie *v;
    assert_int_equal(nb_vtrie_create(tk, &v), NB_OK);
    const char *sch = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                      "\"email\":{\"type\":\"string\",\"pattern\":\"^[a-z]{1,8}@[a-z]{1,8}\\\\.com$\"},"
                      "\"n\":{\"type\":[\"integer\",\"null\"],\"minimum\":-5,\"maximum\":500},"
                      "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bb\"]},\"minItems\":1}},"
                      "\"required\":[\"name\",\"email\",\"n\",\"tags\"],\"additionalProperties\":false}";
    nb_grammar *g = schema(sch);
    int32_t nv = nb_tokenizer_n_vocab(tk), eos = nb_tokenizer_eos(tk);
    uint8_t *allowed = malloc((size_t)nv);
    assert_non_null(allowed);
    /* {"name":"","email":"a@a.com","n":0,"tags":["a"]} is 49 bytes */
    for (int w = 0; w < 120; w++) {
        int budget = 49 + w % 60;
        char out[1024];
        nb_gmatch *m = random_walk(v, tk, g, budget, eos, allowed, nv, out, sizeof out, "walk", w);
        assert_true(nb_gmatch_complete(m));
        json_t *j = json_loads(out, 0, NULL);
        if (!j) fprintf(stderr, "walk %d: not JSON: %s\n", w, out);
        assert_non_null(j);
        json_decref(j);
        nb_gmatch_free(m);
    }
    nb_grammar_free(g);

    /* every format in one object, from the tightest budget up: the completion
     * search near the end finishes each open format string */
    static const char *const fmts[] = {"date-time", "date", "time", "duration", "email", "hostname",
                                       "ipv4", "ipv6", "uuid", "uri"};
    char fs[1024] = "{\"type\":\"object\",\"properties\":{", req[256] = "";
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        size_t o = strlen(fs), r = strlen(req);
        snprintf(fs + o, sizeof fs - o, "%s\"%s\":{\"type\":\"string\",\"format\":\"%s\"}", k ? "," : "", fmts[k], fmts[k]);
        snprintf(req + r, sizeof req - r, "%s\"%s\"", k ? "," : "", fmts[k]);
    }
    size_t o = strlen(fs);
    snprintf(fs + o, sizeof fs - o, "},\"required\":[%s],\"additionalProperties\":false}", req);
    g = schema(fs);
    /* the shortest document is 213 bytes (99 of them values); the budget rule asks for a little more at
     * the start, as an open format string keeps a whole shortest match in reserve */
    for (int w = 0; w < 60; w++) {
        int budget = 232 + w * 4;
        char out[2048];
        nb_gmatch *m = random_walk(v, tk, g, budget, eos, allowed, nv, out, sizeof out, "format walk", w);
        assert_true(nb_gmatch_complete(m));
        json_t *j = json_loads(out, 0, NULL);
        if (!j) fail_msg("format walk %d: not JSON: %s", w, out);
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            json_t *x = json_object_get(j, fmts[k]);
            if (!json_is_string(x) || !is_format(fmts[k], json_string_value(x), json_string_length(x)))
                fail_msg("format walk %d: %s is not a %s value: %s", w, fmts[k], out, fmts[k]);
        }
        json_decref(j);
        nb_gmatch_free(m);
    }
    free(allowed);
    nb_grammar_free(g);
    nb_vtrie_free(v);
    nb_tokenizer_free(tk);
}

/* Tool calls (nb_grammar_tagged): a literal prefix names the function and
 * selects its arguments' schema, then a literal suffix; token walks under
 * the mask always end in one whole call of a declared function. */
static void test_tagged(void **state) {
    (void)state;
    const char *pre[] = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
                         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "};
    const char *sch[] = {"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":8},"
                         "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"]}",
                         "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"integer\",\"minimum\":-12,"
                         "\"maximum\":14}},\"required\":[\"tz\"],\"additionalProperties\":false}"};
    nb_grammar *g = NULL;
    assert_int_equal(nb_grammar_tagged(pre, sch, 2, "}\n</tool_call>", &g), NB_OK);
    assert_string_equal(nb_grammar_kind(g), "tool_call");
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\",\"unit\":\"c\"}}\n</tool_call>"), 1);
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": { \"tz\" : -3 }}\n</tool_call>"), 1);
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":15"), -1);  /* maximum */
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\""), -1); /* the other schema */
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_date\""), -1);                       /* undeclared */
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":3}}\n</tool"), 0);
    assert_int_equal(run(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":3}}\n</tool_call> "), -1);
    assert_int_equal(run(g, " <tool_call>"), -1); /* nothing before the prefix */
    nb_grammar_free(g);
    /* a leading 0 or '-' that can never reach the bounds is refused at once (a dead end otherwise) */
    g = schema("{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}");
    assert_int_equal(run(g, "0"), -1);
    assert_int_equal(run(g, "-"), -1);
    assert_int_equal(run(g, "7"), 1);
    nb_grammar_free(g);
    g = schema("{\"type\":\"number\",\"minimum\":0.5}");
    assert_int_equal(run(g, "0.7"), 1);
    assert_int_equal(run(g, "-"), -1);
    nb_grammar_free(g);
    g = schema("{\"type\":\"number\",\"minimum\":1}");
    assert_int_equal(run(g, "0"), -1);
    nb_grammar_free(g);
    /* refusals: an undeclared keyword, a non-object schema, prefixes that are prefixes of each other */
    const char *bad[] = {"{\"type\":\"object\",\"oneOf\":[]}"}, *num[] = {"{\"type\":\"number\"}"};
    assert_int_equal(nb_grammar_tagged(pre, bad, 1, "}", &g), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "oneOf"));
    assert_int_equal(nb_grammar_tagged(pre, num, 1, "}", &g), NB_ERR_UNSUPPORTED);
    const char *dup[] = {"{\"name\": \"a", "{\"name\": \"ab"};
    assert_int_equal(nb_grammar_tagged(dup, sch, 2, "}", &g), NB_ERR_INVALID);
    assert_null(g);

    /* token walks with the built-in vocabulary, budgets down to the shortest call */
    char path[] = "/tmp/nb_grammar_vocab_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    nb_synth_params sp;
    nb_synth_defaults(&sp, NB_ARCH_LLAMA);
    sp.n_embd = 64, sp.n_layer = 1, sp.n_head = 2, sp.n_head_kv = 1, sp.n_ff = 128;
    assert_int_equal(nb_synth_write(&sp, path), NB_OK);
    nb_tokenizer *tk;
    assert_int_equal(nb_tokenizer_load(path, NULL, &tk), NB_OK);
    unlink(path);
    nb_vtrie *v;
    assert_int_equal(nb_vtrie_create(tk, &v), NB_OK);
    const char *mpre[] = {"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": ",
                          "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": ",
                          "[TOOL_CALLS][{\"name\": \"get_zone\", \"arguments\": ",
                          "[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": "};
    const char *msch[] = {"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},"
                          "\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\","
                          "\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}",
                          sch[1],
                          "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\",\"pattern\":"
                          "\"^[A-Z]{3}$\"}},\"required\":[\"tz\"]}",
                          "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"};
    assert_int_equal(nb_grammar_tagged(mpre, msch, 4, "}]", &g), NB_OK);
    int32_t nv = nb_tokenizer_n_vocab(tk), eos = nb_tokenizer_eos(tk);
    uint8_t *allowed = malloc((size_t)nv);
    assert_non_null(allowed);
    /* [TOOL_CALLS][{"name": "get_time", "arguments": {"tz":0}}] is 58 bytes */
    for (int w = 0; w < 300; w++) {
        int budget = 58 + w % 90;
        char out[1024];
        nb_gmatch *m = random_walk(v, tk, g, budget, eos, allowed, nv, out, sizeof out, "tagged walk", w);
        assert_true(nb_gmatch_closed(m));
        assert_true(!strncmp(out, "[TOOL_CALLS]", 12));
        json_t *j = json_loads(out + 12, 0, NULL);
        if (!j) fprintf(stderr, "tagged walk %d: not JSON: %s\n", w, out);
        assert_non_null(j);
        json_t *c = json_array_get(j, 0), *a = json_object_get(c, "arguments");
        const char *name = json_string_value(json_object_get(c, "name"));
        assert_non_null(name);
        if (!strcmp(name, "get_time")) {
            assert_true(json_is_integer(json_object_get(a, "tz")));
            assert_true(json_integer_value(json_object_get(a, "tz")) >= -12);
        } else if (!strcmp(name, "get_zone")) {
            assert_int_equal(json_string_length(json_object_get(a, "tz")), 3);
        } else if (!strcmp(name, "ping")) {
            assert_int_equal(json_object_size(a), 0);
        } else {
            assert_string_equal(name, "get_weather");
            assert_true(json_is_string(json_object_get(a, "city")));
            assert_true(json_is_string(json_object_get(a, "unit")));
        }
        json_decref(j);
        nb_gmatch_free(m);
    }
    free(allowed);
    nb_grammar_free(g);
    nb_vtrie_free(v);
    nb_tokenizer_free(tk);
}

/* The one-pass shortcuts of nb_grammar_mask (plain and UTF-8 tokens inside
 * free strings, plain ones in free keys) change the cost, never the mask:
 * on random token walks with the 32,000-token llama vocabulary (../shared,
 * many multi-byte tokens) it equals nb_grammar_mask_walk's (the whole trie
 * walked) at every step, byte for byte. */
static void test_mask_shortcuts(void **state) {
    (void)state;
    const char *shared = getenv("NB_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared ? shared : "");
    if (!shared || access(path, R_OK) != 0) {
        skip();
        return;
    }
    nb_tokenizer *tk;
    assert_int_equal(nb_tokenizer_load(path, NULL, &tk), NB_OK);
    nb_vtrie *v;
    assert_int_equal(nb_vtrie_create(tk, &v), NB_OK);
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":9},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},"
        "\"required\":[\"name\",\"tags\"],\"additionalProperties\":{\"type\":\"string\",\"maxLength\":4}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]},"
        "\"b\":{\"type\":\"string\",\"minLength\":20}},\"required\":[\"a\",\"b\"]}",
    };
    int32_t nv = nb_tokenizer_n_vocab(tk), eos = nb_tokenizer_eos(tk);
    uint8_t *fast = malloc((size_t)nv), *walk = malloc((size_t)nv);
    assert_non_null(fast);
    assert_non_null(walk);
    int steps = 0;
    for (size_t si = 0; si < sizeof schemas / sizeof *schemas; si++) {
        nb_grammar *g = schema(schemas[si]);
        for (int w = 0; w < 6; w++) {
            nb_gmatch *m;
            assert_int_equal(nb_gmatch_create(g, &m), NB_OK);
            int budget = 40 + 12 * w;
            for (int left = budget; left > 0 && !nb_gmatch_closed(m); left--) {
                int32_t n = nb_grammar_mask(v, m, left, &eos, 1, fast, nv);
                int32_t n2 = nb_grammar_mask_walk(v, m, left, &eos, 1, walk, nv);
                if (n != n2 || memcmp(fast, walk, (size_t)nv) != 0)
                {
                    fprintf(stderr, "schema %zu walk %d left %d: %d tokens vs %d walking the trie\n", si, w, left, n, n2);
                    for (int32_t i = 0, shown = 0; i < nv && shown < 12; i++)
                        if (fast[i] != walk[i]) {
                            size_t l;
                            const char *p = nb_token_piece_ref(tk, i, false, &l);
                            fprintf(stderr, "  token %d [%.*s] fast %d walk %d\n", i, (int)l, p, fast[i], walk[i]);
                            shown++;
                        }
                }
                assert_int_equal(n, n2);
                assert_memory_equal(fast, walk, (size_t)nv);
                steps++;
                assert_true(n > 0);
                int32_t id = pick_allowed(fast, nv, n);
                if (id == eos) break;
                size_t l;
                const char *p = nb_token_piece_ref(tk, id, false, &l);
                assert_true(nb_gmatch_feed(m, p, l));
            }
            assert_true(nb_gmatch_complete(m));
            nb_gmatch_free(m);
        }
        nb_grammar_free(g);
    }
    assert_true(steps > 100);
    free(fast);
    free(walk);
    nb_vtrie_free(v);
    nb_tokenizer_free(tk);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_object_keywords), cmocka_unit_test(test_arrays_enums_anyof),
        cmocka_unit_test(test_refs_and_refusals), cmocka_unit_test(test_keywords_beside),
        cmocka_unit_test(test_choice_and_regex),
        cmocka_unit_test(test_budget_walks),      cmocka_unit_test(test_formats),      cmocka_unit_test(test_token_walks),
        cmocka_unit_test(test_tagged),            cmocka_unit_test(test_mask_shortcuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
