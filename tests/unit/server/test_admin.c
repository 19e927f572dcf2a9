/* The operating hooks (server/admin.h, the additions to server/metrics.h):
 * the /health body, the drain answer, the vLLM-style stats line and the
 * startup line from known snapshots (expected values worked out by hand),
 * and the /metrics page's HTTP classes, abort reasons, startup phases and
 * TPOT histogram; the page whole or not at all when it cannot grow, a
 * header that does not fit turning the answer into a 500, and the
 * loopback test that guards POST /admin/drain without an API key. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "server/admin.h"
#include "server/metrics.h"
#include "server/respond.h"
#include "testutil.h"

static void test_health_body(void **state) {
    (void)state;
    nb_engine_stats st = {0};
    st.running = 3;
    st.waiting = 7;
    st.kv_usage = 0.25;
    nb_http_resp rs = {0};
    nb_admin_health(&rs, "draining", false, "m\"x", &st);
    assert_int_equal(rs.status, 503);
    json_error_t err;
    json_t *o = json_loadb(rs.body, rs.body_len, 0, &err);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "draining");
    assert_string_equal(json_string_value(json_object_get(o, "model")), "m\"x");
    assert_int_equal(json_integer_value(json_object_get(o, "running")), 3);
    assert_int_equal(json_integer_value(json_object_get(o, "waiting")), 7);
    assert_true(json_real_value(json_object_get(o, "kv_usage")) == 0.25);
    assert_int_equal(json_object_size(o), 5);
    assert_int_equal(rs.n_extra, 1);
    assert_string_equal(rs.extra_name[0], "Retry-After");
    json_decref(o);
    free(rs.body);

    nb_http_resp ok = {0};
    nb_admin_health(&ok, "loading", true, "m", NULL); /* no stats yet: zeros */
    assert_int_equal(ok.status, 200);
    assert_non_null(strstr(ok.body, "\"running\":0"));
    assert_int_equal(ok.n_extra, 0);
    free(ok.body);

    nb_http_resp d = {0};
    nb_admin_drain_resp(&d, 4);
    assert_int_equal(d.status, 202);
    assert_string_equal(d.body, "{\"status\":\"draining\",\"in_flight\":4}");
    free(d.body);
}

static void test_stats_line(void **state) {
    (void)state;
    nb_engine_stats a = {0}, b = {0};
    a.prompt_tokens_total = 100;
    a.generation_tokens_total = 50;
    a.prefix_queries_tokens = 1000;
    a.prefix_hit_tokens = 900;
    a.preemptions_total = 2;
    b = a;
    b.prompt_tokens_total = 100 + 800;    /* 800 in 10 s: 80.0 tokens/s */
    b.generation_tokens_total = 50 + 125; /* 12.5 tokens/s */
    b.prefix_queries_tokens = 1000 + 400; /* the interval's rate: 100 of 400 = 25.0%, not the cumulative 71.4% */
    b.prefix_hit_tokens = 900 + 100;
    b.preemptions_total = 5;
    b.running = 8;
    b.waiting = 27;
    b.kv_usage = 0.412;
    char line[512];
    nb_admin_stats_line(&a, &b, 10.0, line, sizeof line);
    assert_string_equal(line, "Avg prompt throughput: 80.0 tokens/s, Avg generation throughput: 12.5 tokens/s, "
                              "Running: 8 reqs, Waiting: 27 reqs, KV cache usage: 41.2%, Prefix cache hit rate: "
                              "25.0%, Preemptions: 5 (+3)");
    nb_admin_stats_line(&b, &b, 10.0, line, sizeof line); /* idle: no division by zero */
    assert_non_null(strstr(line, "Prefix cache hit rate: 0.0%, Preemptions: 5 (+0)"));
}

static void test_startup(void **state) {
    (void)state;
    nb_engine_stats st = {0};
    st.startup_read_s = 0.5;
    st.startup_repack_s = 1.25;
    st.startup_kv_s = 0.125;
    double ph[NB_PHASE_COUNT];
    nb_admin_startup_phases(&st, 0.0625, 2.5, ph);
    char line[256];
    nb_admin_startup_line(ph, line, sizeof line);
    assert_string_equal(line, "startup: read 0.500 s, repack 1.250 s, kv_alloc 0.125 s, warmup 0.062 s, total 2.500 s");

    nb_metrics m;
    nb_metrics_init(&m);
    char *page = nb_metrics_format(&m, NULL, "x");
    assert_null(strstr(page, "nibble:startup_seconds")); /* not before it is known */
    free(page);
    nb_metrics_set_startup(&m, ph);
    nb_metrics_http_response(&m, 200);
    nb_metrics_http_response(&m, 204);
    nb_metrics_http_response(&m, 499);
    nb_metrics_http_response(&m, 503);
    nb_metrics_http_response(&m, 301); /* not counted */
    nb_metrics_abort(&m, NB_ABORT_CLIENT);
    nb_metrics_abort(&m, NB_ABORT_SHUTDOWN);
    nb_metrics_abort(&m, NB_ABORT_SHUTDOWN);
    nb_metrics_observe(&m, NB_HIST_TPOT, 0.02);
    page = nb_metrics_format(&m, NULL, "x");
    const char *want[] = {
        "nibble:startup_seconds{model_name=\"x\",phase=\"repack\"} 1.25\n",
        "nibble:startup_seconds{model_name=\"x\",phase=\"total\"} 2.5\n",
        "# TYPE nibble:http_responses_total counter\n",
        "nibble:http_responses_total{model_name=\"x\",code=\"2xx\"} 2\n",
        "nibble:http_responses_total{model_name=\"x\",code=\"4xx\"} 1\n",
        "nibble:http_responses_total{model_name=\"x\",code=\"5xx\"} 1\n",
        "nibble:request_aborts_total{model_name=\"x\",reason=\"client_disconnect\"} 1\n",
        "nibble:request_aborts_total{model_name=\"x\",reason=\"shutdown\"} 2\n",
        "nibble:request_aborts_total{model_name=\"x\",reason=\"server_error\"} 0\n",
        "# TYPE nibble:request_time_per_output_token_seconds histogram\n",
        "nibble:request_time_per_output_token_seconds_bucket{model_name=\"x\",le=\"0.01\"} 0\n",
        "nibble:request_time_per_output_token_seconds_bucket{model_name=\"x\",le=\"0.025\"} 1\n",
        "nibble:request_time_per_output_token_seconds_count{model_name=\"x\"} 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(page, want[i])) fail_msg("missing: %s", want[i]);
    assert_null(strstr(page, "code=\"3xx\""));
    free(page);
    nb_metrics_destroy(&m);
}

static int grow_budget;
static void *failing_realloc(void *p, size_t n) {
    if (grow_budget-- <= 0) return NULL;
    return realloc(p, n);
}

static void test_metrics_page_whole(void **state) {
    (void)state;
    nb_metrics m;
    nb_metrics_init(&m);
    nb_metrics_observe(&m, NB_HIST_TTFT, 0.5);
    nb_dynbuf b;
    nb_dynbuf_init(&b, 1 << 20);
    assert_int_equal(nb_metrics_format_into(&m, NULL, "x", &b), NB_OK);
    size_t whole = nb_dynbuf_len(&b);
    assert_true(whole > 4096); /* so the page grows several times */
    nb_dynbuf_free(&b);
    /* a growth that fails at any point: no page, not the first part of one */
    for (int k = 0; k < 8; k++) {
        nb_dynbuf_init(&b, 1 << 20);
        b.realloc_fn = failing_realloc;
        grow_budget = k;
        nb_status st = nb_metrics_format_into(&m, NULL, "x", &b);
        if (st == NB_OK) {
            assert_int_equal(nb_dynbuf_len(&b), whole); /* enough growths allowed: the whole page */
        } else {
            assert_int_equal(st, NB_ERR_NOMEM);
            assert_int_equal(nb_dynbuf_len(&b), 0);
        }
        nb_dynbuf_free(&b);
    }
    /* past the cap: refused the same way */
    nb_dynbuf_init(&b, whole / 2);
    assert_int_equal(nb_metrics_format_into(&m, NULL, "x", &b), NB_ERR_RANGE);
    assert_int_equal(nb_dynbuf_len(&b), 0);
    nb_dynbuf_free(&b);
    nb_metrics_destroy(&m);
}

static void test_headers_full(void **state) {
    (void)state;
    nb_http_resp rs = {0};
    for (int i = 0; i < NB_LIMIT_EXTRA_HEADERS; i++) assert_true(nb_http_resp_header(&rs, "X-A", "1"));
    assert_false(nb_http_resp_header(&rs, "X-B", "2")); /* reported, not dropped silently */
    assert_int_equal(rs.n_extra, NB_LIMIT_EXTRA_HEADERS);
    nb_http_resp r2 = {0};
    assert_false(nb_http_resp_header(&r2, NULL, "v"));
    assert_int_equal(r2.n_extra, 0);
    /* the server's helper: the answer becomes a 500 naming the header */
    nb_admin_drain_resp(&rs, 2);
    assert_int_equal(rs.status, 202);
    assert_false(nb_resp_header(&rs, "Retry-After", "1"));
    assert_int_equal(rs.status, 500);
    assert_int_equal(rs.n_extra, 0);
    assert_non_null(strstr(rs.body, "too_many_headers"));
    assert_non_null(strstr(rs.body, "Retry-After"));
    free(rs.body);
    /* /health with room: the header is there */
    nb_http_resp h = {0};
    nb_admin_health(&h, "draining", false, "m", NULL);
    assert_int_equal(h.status, 503);
    assert_int_equal(h.n_extra, 1);
    free(h.body);
}

static bool loopback4(const char *a) {
    struct sockaddr_in s = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
    return nb_http_addr_loopback((struct sockaddr *)&s, sizeof s);
}

static bool loopback6(const char *a) {
    struct sockaddr_in6 s = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
    return nb_http_addr_loopback((struct sockaddr *)&s, sizeof s);
}

static void test_loopback(void **state) {
    (void)state;
    assert_true(loopback4("127.0.0.1"));
    assert_true(loopback4("127.3.2.1"));
    assert_false(loopback4("10.0.0.1"));
    assert_false(loopback4("128.0.0.1"));
    assert_false(loopback4("0.0.0.0"));
    assert_true(loopback6("::1"));
    assert_true(loopback6("::ffff:127.0.0.1"));
    assert_false(loopback6("::ffff:10.0.0.1"));
    assert_false(loopback6("::"));
    assert_false(loopback6("fe80::1"));
    assert_false(loopback6("2001:db8::1"));
    struct sockaddr_in s = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &s.sin_addr);
    assert_false(nb_http_addr_loopback((struct sockaddr *)&s, 4)); /* too short to hold one */
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    assert_false(nb_http_addr_loopback((struct sockaddr *)&u, sizeof u));
    assert_false(nb_http_addr_loopback(NULL, 0));
    nb_http_req r = {.fd = -1};
    assert_false(nb_http_peer_loopback(&r));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_body),
        cmocka_unit_test(test_stats_line),
        cmocka_unit_test(test_startup),
        cmocka_unit_test(test_metrics_page_whole),
        cmocka_unit_test(test_headers_full),
        cmocka_unit_test(test_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
