/* The overhead model (src/plan/overhead.c) against published startup logs
 * (docs/plan.md "Overhead" lists them with links), each term against a hand
 * computation, and the startup-log reader on the logs' own lines. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "plan/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
    const char *what, *model;
    nb_plan_engine engine;
    double total_gib, util;
    int tp;
    bool nvlink;
    int64_t max_model_len;
    double kv_gib;          /* the pool the engine reported */
    bool refused;           /* the engine refused to start */
} published;

/* Every log of the docs/plan.md table. */
static const published logs[] = {
    {"vllm#10511 V0 Llama-3-8B H100 TP1", "llama-3.1-8b", NB_PLAN_ENGINE_VLLM_V0, 79.22, 0.90, 1, true, 8192, 53.29, false},
    {"vllm#10511 V0 Llama-3-8B H100 TP2", "llama-3.1-8b", NB_PLAN_ENGINE_VLLM_V0, 79.22, 0.90, 2, true, 8192,
     71.29 - 7.48 - 3.58 - 1.26, false},
    {"V0 Qwen2.5-32B 2xL40S TP2", "qwen2.5-32b", NB_PLAN_ENGINE_VLLM_V0, 44.42, 0.90, 2, false, 10000, 7.71, false},
    {"vllm#17122 V1 Llama-3.1-8B L40S", "llama-3.1-8b", NB_PLAN_ENGINE_VLLM_V1, 44.42, 0.90, 1, false, 32768, 19.37, false},
    {"vllm#10517 V0 Llama-3.1-8B 3090 20k", "llama-3.1-8b", NB_PLAN_ENGINE_VLLM_V0, 23.58, 0.90, 1, false, 20000, 3.81, false},
    {"vllm#10517 V0 Llama-3.1-8B 3090 29k", "llama-3.1-8b", NB_PLAN_ENGINE_VLLM_V0, 23.58, 0.90, 1, false, 29000, 2.89, true},
    {"vllm#13061 V0 R1-Distill-Qwen-14B 2x4090 TP2", "qwen2.5-14b", NB_PLAN_ENGINE_VLLM_V0, 23.55, 0.98, 2, false, 131072,
     8.69, true},
};

static void plan_for(const published *p, nb_plan_result *r) {
    nb_plan_config c;
    nb_plan_config_init(&c);
    assert_int_equal(nb_plan_load_model(p->model, &c), NB_OK);
    c.engine = p->engine;
    c.capacity = (uint64_t)llround(p->total_gib * GIB);
    c.utilization = p->util;
    c.tp = c.gpus = p->tp;
    c.nvlink = p->nvlink;
    c.max_model_len = p->max_model_len;
    assert_int_equal(nb_plan_compute(&c, r), NB_OK);
    nb_plan_config_free(&c);
}

static void test_published_logs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
        nb_plan_result r;
        plan_for(&logs[i], &r);
        double pool = (double)r.pool / GIB, err = pool / logs[i].kv_gib - 1;
        printf("  %-44s KV %6.2f GiB, plan %6.2f GiB (%+.1f%%)%s\n", logs[i].what, logs[i].kv_gib, pool, 100 * err,
               r.refused ? ", refused" : "");
        assert_true(fabs(err) <= 0.05);             /* the goal: +-5% on the pool */
        assert_int_equal(r.refused, logs[i].refused); /* and the engine's verdict */
    }
}

/* vllm#10517's refusal: "The model's max seq len (29000) is larger than the
 * maximum number of tokens that can be stored in KV cache (23648)". */
static void test_refusal_words_and_tokens(void **state) {
    (void)state;
    nb_plan_result r;
    plan_for(&logs[5], &r);
    assert_true(r.refused);
    assert_true(fabs((double)r.kv_tokens / 23648.0 - 1) < 0.05);
    assert_int_equal(r.kv_tokens % 16, 0); /* whole blocks */
    char msg[600];
    nb_plan_refusal_message(&r, msg, sizeof msg);
    assert_non_null(strstr(msg, "The model's max seq len (29000) is larger than the maximum number of tokens that can be "
                                "stored in KV cache ("));
}

/* Each vLLM term by hand for Llama-3.1-8B (hidden 4096, ff 14336, vocab
 * 128256, 131072 positions, head_dim 128). */
static void test_terms_by_hand(void **state) {
    (void)state;
    nb_plan_config c;
    nb_plan_config_init(&c);
    assert_int_equal(nb_plan_load_model("llama-3.1-8b", &c), NB_OK);
    c.capacity = 80ull << 30;
    c.max_model_len = 8192;
    c.engine = NB_PLAN_ENGINE_VLLM_V0;
    nb_plan_overhead o;
    assert_int_equal(nb_plan_overhead_compute(&c, &o), NB_OK);
    uint64_t act = 0, rope = 0, runtime = 0;
    for (int i = 0; i < o.n; i++) {
        if (!strcmp(o.term[i].name, "activation")) act = o.term[i].bytes;
        if (!strcmp(o.term[i].name, "rope_cache")) rope = o.term[i].bytes;
        if (!strcmp(o.term[i].name, "runtime")) runtime = o.term[i].bytes;
    }
    assert_int_equal(o.profile_tokens, 8192);                       /* V0: max(max_model_len, 2048) */
    assert_int_equal(act, 8192ull * 2 * (3 * 14336 + 3 * 4096));    /* 110,592 B per token */
    assert_int_equal(rope, 131072ull * 128 * 2);
    assert_true(runtime > 0);
    assert_int_equal(o.total, act + rope + runtime);
    /* V0 with chunked prefill above 32K: the profile batch is 2048 */
    c.max_model_len = 65536;
    assert_int_equal(nb_plan_overhead_compute(&c, &o), NB_OK);
    assert_true(o.chunked_prefill);
    assert_int_equal(o.profile_tokens, 2048);
    /* --max-num-batched-tokens wins */
    c.max_num_batched_tokens = 4096;
    assert_int_equal(nb_plan_overhead_compute(&c, &o), NB_OK);
    assert_int_equal(o.profile_tokens, 4096);
    /* TP 2 on NVLink adds the communication term; on PCIe it does not */
    c.max_num_batched_tokens = 0;
    c.max_model_len = 8192;
    c.tp = c.gpus = 2;
    c.nvlink = true;
    assert_int_equal(nb_plan_overhead_compute(&c, &o), NB_OK);
    bool comm = false;
    for (int i = 0; i < o.n; i++) comm |= !strcmp(o.term[i].name, "tp_comm");
    assert_true(comm);
    /* SGLang: budget is mem_fraction_static x card; only runtime is subtracted */
    c.tp = c.gpus = 1;
    c.engine = NB_PLAN_ENGINE_SGLANG;
    c.mem_fraction_static = 0.80;
    nb_plan_result r;
    assert_int_equal(nb_plan_compute(&c, &r), NB_OK);
    assert_int_equal(r.budget, (uint64_t)llroundl((long double)c.capacity * 0.80L));
    assert_int_equal(r.overhead, r.ovh.total);
    /* fixed: the given constant */
    c.engine = NB_PLAN_ENGINE_FIXED;
    c.overhead = 3ull << 30;
    assert_int_equal(nb_plan_compute(&c, &r), NB_OK);
    assert_int_equal(r.overhead, 3ull << 30);
    nb_plan_config_free(&c);
}

/* nibble's own term is the engine's formula, which budget.c uses too. */
static void test_nibble_term(void **state) {
    (void)state;
    uint64_t a = nb_plan_nibble_activation(256, 8, 32, 4, 768, 32, 512, 128, 8, 256);
    uint64_t per_tok = 2 * 256 + 256 + 2 * 256 + 2 * 128 + 2 * 768 + 32;
    assert_int_equal(a, 4 * (128 * per_tok + 8 * 512 + 512) + 8 * 256 * 4);
}

static void test_parse_logs(void **state) {
    (void)state;
    nb_plan_log l;
    const char *v0 =
        "INFO 12-13 19:54:18 worker.py:243] the current vLLM instance can use total_gpu_memory (79.22GiB) x "
        "gpu_memory_utilization (0.90) = 71.29GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] model weights take 14.96GiB; non_torch_memory takes 1.79GiB; PyTorch "
        "activation peak memory takes 1.26GiB; the rest of the memory reserved for KV Cache is 53.29GiB.\n";
    assert_int_equal(nb_plan_parse_log(v0, strlen(v0), &l), NB_OK);
    assert_int_equal(l.engine, NB_PLAN_ENGINE_VLLM_V0);
    assert_true(fabs((double)l.total / GIB - 79.22) < 1e-6);
    assert_true(fabs(l.utilization - 0.90) < 1e-9);
    assert_true(fabs((double)l.budget / GIB - 71.29) < 1e-6);
    assert_true(fabs((double)l.weights / GIB - 14.96) < 1e-6);
    assert_true(fabs((double)l.non_torch / GIB - 1.79) < 1e-6);
    assert_true(fabs((double)l.activation / GIB - 1.26) < 1e-6);
    assert_true(fabs((double)l.kv_bytes / GIB - 53.29) < 1e-6);

    const char *v1 = "INFO 04-24 16:33:00 [gpu_model_runner.py:1316] Model loading took 14.9889 GiB and 3.65 seconds\n"
                     "INFO 04-24 16:33:13 [gpu_worker.py:200] Available KV cache memory: 19.37 GiB\n"
                     "INFO 04-24 16:33:13 [kv_cache_utils.py:634] GPU KV cache size: 158,656 tokens\n";
    assert_int_equal(nb_plan_parse_log(v1, strlen(v1), &l), NB_OK);
    assert_int_equal(l.engine, NB_PLAN_ENGINE_VLLM_V1);
    assert_int_equal(l.kv_tokens, 158656);
    assert_true(fabs((double)l.kv_bytes / GIB - 19.37) < 1e-6);

    const char *refuse = "ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that "
                         "can be stored in KV cache (23648). Try increasing `gpu_memory_utilization`";
    assert_int_equal(nb_plan_parse_log(refuse, strlen(refuse), &l), NB_OK);
    assert_int_equal(l.refused_len, 29000);
    assert_int_equal(l.refused_tokens, 23648);

    const char *sg = "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB";
    assert_int_equal(nb_plan_parse_log(sg, strlen(sg), &l), NB_OK);
    assert_int_equal(l.engine, NB_PLAN_ENGINE_SGLANG);
    assert_int_equal(l.kv_tokens, 367404);

    const char *none = "hello\nworld\n";
    assert_int_equal(nb_plan_parse_log(none, strlen(none), &l), NB_ERR_INVALID);
}

/* Calibration gives back the log's own pool, and the profile round-trips. */
static void test_calibrate_and_profile(void **state) {
    (void)state;
    const char *v0 =
        "the current vLLM instance can use total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB\n"
        "model weights take 14.96GiB; non_torch_memory takes 1.79GiB; PyTorch activation peak memory takes 1.26GiB; "
        "the rest of the memory reserved for KV Cache is 53.29GiB.\n";
    nb_plan_log l;
    assert_int_equal(nb_plan_parse_log(v0, strlen(v0), &l), NB_OK);
    nb_plan_config c;
    nb_plan_config_init(&c);
    assert_int_equal(nb_plan_load_model("llama-3.1-8b", &c), NB_OK);
    c.engine = NB_PLAN_ENGINE_VLLM_V0;
    c.capacity = l.total;
    c.max_model_len = 8192;
    nb_plan_calibration k;
    assert_int_equal(nb_plan_calibrate(&c, &l, &k), NB_OK);
    char path[] = "/tmp/nb_plan_profiles_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    assert_int_equal(nb_plan_profile_store(path, &k), NB_OK);
    assert_int_equal(nb_plan_profile_store(path, &k), NB_OK); /* replaces, does not duplicate */
    nb_plan_calibration back;
    bool found = false;
    assert_int_equal(nb_plan_profile_find(path, NB_PLAN_ENGINE_VLLM_V0, "llama-3.1-8b", l.total, 1, &back, &found), NB_OK);
    assert_true(found);
    assert_int_equal(back.runtime, k.runtime);
    assert_int_equal(back.activation, k.activation);
    assert_int_equal(nb_plan_profile_find(path, NB_PLAN_ENGINE_VLLM_V1, "llama-3.1-8b", l.total, 1, &back, &found), NB_OK);
    assert_false(found);
    c.calib = &k;
    nb_plan_result r;
    assert_int_equal(nb_plan_compute(&c, &r), NB_OK);
    /* the plan's weights lack the rope cache the log counts as weights: within 0.05 GiB */
    assert_true(fabs((double)r.pool / GIB - 53.29) < 0.05);
    unlink(path);
    nb_plan_config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_logs),       cmocka_unit_test(test_refusal_words_and_tokens),
        cmocka_unit_test(test_terms_by_hand),        cmocka_unit_test(test_nibble_term),
        cmocka_unit_test(test_parse_logs),           cmocka_unit_test(test_calibrate_and_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
