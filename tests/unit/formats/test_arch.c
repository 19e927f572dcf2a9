/* The per-architecture table and the model description (formats/arch.h)
 * from each source: GGUF metadata of the shared models (shapes from
 * docs/synth.md and the models' README), a GGUF written here for an
 * architecture nibble only plans (deepseek2: MLA + MoE, per-layer arrays),
 * HF config.json (a multimodal wrapper's text_config; mixtral, qwen2_moe,
 * deepseek_v2 and gemma2 configs as published) and a llama2.c header. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "formats/arch.h"
#include "formats/gguf.h"
#include "formats/hfconfig.h"
#include "formats/source.h"

static void test_table(void **state) {
    (void)state;
    int n;
    const nb_arch_info *t = nb_arch_table(&n);
    assert_true(n >= 3);
    /* names are unique per namespace, and each forward pass has one canonical row */
    for (int i = 0; i < n; i++) {
        assert_true(t[i].gguf || t[i].hf);
        for (int j = i + 1; j < n; j++) {
            if (t[i].gguf && t[j].gguf) assert_string_not_equal(t[i].gguf, t[j].gguf);
            if (t[i].hf && t[j].hf) assert_string_not_equal(t[i].hf, t[j].hf);
        }
        if (t[i].runs != NB_ARCH_NONE) {
            /* what the engine runs can be named and exported */
            assert_non_null(t[i].gguf);
            assert_non_null(t[i].hf);
            assert_non_null(t[i].hf_class);
            assert_true(t[i].ctx_default > 0);
            assert_int_equal(t[i].norms_per_layer, 2);
        }
    }
    assert_int_equal(nb_arch_find_gguf("llama")->runs, NB_ARCH_LLAMA);
    assert_int_equal(nb_arch_find_gguf("mistral")->runs, NB_ARCH_LLAMA);
    assert_int_equal(nb_arch_find_hf("qwen2")->runs, NB_ARCH_QWEN2);
    assert_true(nb_arch_find_hf("qwen2")->qkv_bias);
    assert_false(nb_arch_find_hf("llama")->qkv_bias);
    assert_int_equal(nb_arch_find_gguf("qwen2")->gguf_rope, NB_ROPE_NEOX);
    assert_int_equal(nb_arch_find_gguf("llama")->gguf_rope, NB_ROPE_NORM);
    /* GGUF and HF spell some differently */
    assert_ptr_equal(nb_arch_find_gguf("deepseek2"), nb_arch_find_hf("deepseek_v2"));
    assert_ptr_equal(nb_arch_find_gguf("qwen2moe"), nb_arch_find_hf("qwen2_moe"));
    assert_null(nb_arch_find_gguf("deepseek_v2"));
    assert_null(nb_arch_find_gguf("mixtral")); /* llama.cpp files Mixtral as llama */
    /* prefix rows: the longest prefix wins, exact rows are not prefixes */
    assert_ptr_equal(nb_arch_find_hf("gemma3_text"), nb_arch_find_hf("gemma3"));
    assert_ptr_equal(nb_arch_find_hf("gemma2"), nb_arch_find_gguf("gemma2"));
    assert_ptr_equal(nb_arch_find_hf("qwen3_next"), nb_arch_find_hf("qwen3"));
    assert_true(nb_arch_find_hf("qwen3_moe") != nb_arch_find_hf("qwen3"));
    assert_null(nb_arch_find_hf("llama4"));
    assert_null(nb_arch_find_hf("qwen2_vl"));
    assert_null(nb_arch_find_hf(NULL));
    assert_null(nb_arch_find_hf("gpt2"));
    /* planner flags */
    assert_true(nb_arch_find_hf("gemma")->tied_default);
    assert_int_equal(nb_arch_find_hf("gemma2")->norms_per_layer, 4);
    assert_true(nb_arch_find_hf("gemma2")->swa_alternate);
    assert_true(nb_arch_find_hf("qwen3")->qk_norm);
    assert_int_equal(nb_arch_find_hf("qwen2")->swa, NB_SWA_FLAG);
    assert_int_equal(nb_arch_find_hf("mistral")->swa, NB_SWA_ALWAYS);
    assert_int_equal(nb_arch_find_hf("llama")->swa, NB_SWA_NONE);
    /* canonical rows of the forward passes, and the names in messages */
    assert_string_equal(nb_arch_info_of(NB_ARCH_LLAMA)->gguf, "llama");
    assert_string_equal(nb_arch_info_of(NB_ARCH_QWEN2)->hf_class, "Qwen2ForCausalLM");
    assert_null(nb_arch_info_of(NB_ARCH_NONE));
    assert_string_equal(nb_arch_supported_gguf(), "llama, mistral, qwen2");
    assert_string_equal(nb_arch_supported_hf(), "llama, mistral, qwen2");
    /* tensor names: the llama layout, each GGUF and HF name once */
    int nl, nm;
    const nb_arch_tensor *L = nb_arch_layer_tensors(NULL, &nl), *M = nb_arch_model_tensors(&nm);
    assert_int_equal(nl, 12);
    assert_int_equal(nm, 3);
    assert_ptr_equal(nb_arch_layer_tensors(nb_arch_find_hf("qwen2"), &nl), L);
    int biases = 0;
    for (int i = 0; i < nl; i++) {
        biases += L[i].role == NB_ROLE_Q_BIAS || L[i].role == NB_ROLE_KV_BIAS;
        for (int j = i + 1; j < nl; j++) {
            assert_string_not_equal(L[i].gguf, L[j].gguf);
            assert_string_not_equal(L[i].hf, L[j].hf);
        }
    }
    assert_int_equal(biases, 3);
    assert_string_equal(M[0].gguf, "token_embd.weight");
    assert_string_equal(M[0].hf, "model.embed_tokens.weight");
}

/* Reads a GGUF in both modes; PLAN and RUN agree on everything but the
 * context default (absent: 0 for the planner, 2048 for the engine). */
static void both(const char *path, nb_arch_desc *run, nb_arch_desc *plan) {
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(path, &g), NB_OK);
    assert_int_equal(nb_arch_desc_from_gguf(g, NB_ARCH_RUN, run), NB_OK);
    assert_int_equal(nb_arch_desc_from_gguf(g, NB_ARCH_PLAN, plan), NB_OK);
    nb_gguf_close(g);
    assert_int_equal(run->source, NB_ARCH_SRC_GGUF);
    assert_int_equal(plan->n_embd, run->n_embd);
    assert_int_equal(plan->n_layer, run->n_layer);
    assert_int_equal(plan->n_head, run->n_head);
    assert_int_equal(plan->n_head_kv, run->n_head_kv);
    assert_int_equal(plan->head_dim, run->head_dim);
    assert_int_equal(plan->n_ff, run->n_ff);
    assert_int_equal(plan->n_vocab, run->n_vocab);
    assert_int_equal(plan->tied_embeddings, run->tied_embeddings);
    assert_int_equal(plan->qkv_bias, run->qkv_bias);
    assert_true(plan->rope_theta == run->rope_theta);
    assert_true(plan->norm_eps == run->norm_eps);
    assert_ptr_equal(plan->info, run->info);
}

static void test_gguf_shared(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/synth-llama-F16.gguf");
    if (!p) skip();
    nb_arch_desc r, q;
    both(p, &r, &q);
    /* docs/synth.md: 256 / 4 / 8 / 2 / 768, ctx 2048, theta 1e4, eps 1e-5, untied, no biases */
    assert_int_equal(r.arch, NB_ARCH_LLAMA);
    assert_string_equal(r.arch_name, "llama");
    assert_int_equal(r.n_embd, 256);
    assert_int_equal(r.n_layer, 4);
    assert_int_equal(r.n_head, 8);
    assert_int_equal(r.n_head_kv, 2);
    assert_int_equal(r.n_ff, 768);
    assert_int_equal(r.head_dim, 32);
    assert_int_equal(r.rope_dim, 32);
    assert_int_equal(r.v_head_dim, 32);
    assert_int_equal(r.n_ctx_train, 2048);
    assert_int_equal(q.n_ctx_train, 2048); /* written in the file */
    assert_false(r.tied_embeddings);
    assert_false(r.qkv_bias);
    assert_int_equal(r.rope_style, NB_ROPE_NORM);
    assert_int_equal(r.n_expert, 0);
    assert_int_equal(r.kv_lora_rank, 0);
    assert_false(r.per_layer);

    p = nb_test_shared("models/synth-qwen2-F16.gguf");
    if (!p) skip();
    both(p, &r, &q);
    /* 256 / 4 / 8 / 4 / 704, theta 1e6, eps 1e-6, tied, q/k/v biases */
    assert_int_equal(r.arch, NB_ARCH_QWEN2);
    assert_int_equal(r.n_head_kv, 4);
    assert_int_equal(r.n_ff, 704);
    assert_true(r.rope_theta == 1e6f);
    assert_true(r.norm_eps == 1e-6f);
    assert_true(r.tied_embeddings);
    assert_true(r.qkv_bias);
    assert_int_equal(r.rope_style, NB_ROPE_NEOX);

    p = nb_test_shared("models/aidreams260K.gguf");
    if (!p) skip();
    both(p, &r, &q);
    /* README: dim 64, hidden 172, 4 layers, 4 heads, vocab 512, seq_len 128 */
    assert_int_equal(r.n_embd, 64);
    assert_int_equal(r.n_ff, 172);
    assert_int_equal(r.n_layer, 4);
    assert_int_equal(r.n_vocab, 512);
    assert_int_equal(r.n_ctx_train, 128);
}

/* A deepseek2 GGUF header (DeepSeek-V2-Lite's published shapes, 3 layers),
 * with tensors only where the reader looks (embedding, a bias probe). */
static const char *write_deepseek(const char *name, bool per_layer_ff) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", nb_test_tmpdir(), name);
    nb_gguf_writer *w;
    assert_int_equal(nb_gguf_writer_create(&w), NB_OK);
    assert_int_equal(nb_gguf_set_str(w, "general.architecture", "deepseek2"), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.block_count", 3), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.embedding_length", 2048), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.attention.head_count", 16), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.attention.head_count_kv", 16), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.attention.key_length", 192), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.attention.value_length", 128), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.attention.kv_lora_rank", 512), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.rope.dimension_count", 64), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.expert_count", 64), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.expert_used_count", 6), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.expert_feed_forward_length", 1408), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.leading_dense_block_count", 1), NB_OK);
    assert_int_equal(nb_gguf_set_u32(w, "deepseek2.context_length", 163840), NB_OK);
    if (per_layer_ff) {
        uint32_t ff[3] = {10944, 0, 0};
        assert_int_equal(nb_gguf_set_arr(w, "deepseek2.feed_forward_length", NB_GGUF_U32, ff, 3), NB_OK);
    } else {
        assert_int_equal(nb_gguf_set_u32(w, "deepseek2.feed_forward_length", 10944), NB_OK);
    }
    static float emb[4 * 8];
    int64_t ne[2] = {4, 8};
    assert_int_equal(nb_gguf_writer_add_tensor(w, "token_embd.weight", NB_F32, 2, ne, emb), NB_OK);
    assert_int_equal(nb_gguf_writer_add_tensor(w, "output.weight", NB_F32, 2, ne, emb), NB_OK);
    assert_int_equal(nb_gguf_writer_write(w, path), NB_OK);
    nb_gguf_writer_free(w);
    return path;
}

static void test_gguf_planning_only(void **state) {
    (void)state;
    const char *p = write_deepseek("ds2.gguf", false);
    nb_gguf *g;
    nb_arch_desc d;
    assert_int_equal(nb_gguf_open(p, &g), NB_OK);
    assert_int_equal(nb_arch_desc_from_gguf(g, NB_ARCH_RUN, &d), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "'deepseek2'"));
    assert_non_null(strstr(nb_errmsg(), "llama, mistral, qwen2"));
    assert_int_equal(nb_arch_desc_from_gguf(g, NB_ARCH_PLAN, &d), NB_OK);
    nb_gguf_close(g);
    assert_int_equal(d.arch, NB_ARCH_NONE);
    assert_ptr_equal(d.info, nb_arch_find_hf("deepseek_v2"));
    assert_int_equal(d.n_layer, 3);
    assert_int_equal(d.n_ff, 10944);
    assert_int_equal(d.head_dim, 192);
    assert_int_equal(d.v_head_dim, 128);
    assert_int_equal(d.kv_lora_rank, 512);
    assert_int_equal(d.qk_rope_dim, 64);
    assert_int_equal(d.qk_nope_dim, 128); /* 192 - 64 */
    assert_int_equal(d.n_expert, 64);
    assert_int_equal(d.n_expert_used, 6);
    assert_int_equal(d.n_ff_expert, 1408);
    assert_int_equal(d.n_dense_layers, 1);
    assert_int_equal(d.n_ctx_train, 163840);
    assert_int_equal(d.n_vocab, 8); /* token_embd.weight ne[1] */
    assert_false(d.tied_embeddings);
    assert_false(d.per_layer);
    assert_int_equal(nb_arch_desc_validate(&d, "ds2"), NB_ERR_UNSUPPORTED);

    /* a per-layer array: its largest value, flagged */
    p = write_deepseek("ds2-arr.gguf", true);
    assert_int_equal(nb_gguf_open(p, &g), NB_OK);
    assert_int_equal(nb_arch_desc_from_gguf(g, NB_ARCH_PLAN, &d), NB_OK);
    nb_gguf_close(g);
    assert_int_equal(d.n_ff, 10944);
    assert_true(d.per_layer);
}

static nb_status hf(const char *json, nb_arch_read mode, nb_hf_config *c) {
    return nb_hfconfig_parse_mode(json, strlen(json), "config.json", mode, c);
}

/* A LLaVA-style wrapper: the text model's fields under text_config. Both
 * modes take them; the engine runs it as llama. */
static void test_hf_text_config(void **state) {
    (void)state;
    const char *j = "{\"architectures\":[\"LlavaForConditionalGeneration\"],\"model_type\":\"llava\","
                    "\"tie_word_embeddings\":false,\"torch_dtype\":\"float16\",\"vision_config\":{\"hidden_size\":1024},"
                    "\"text_config\":{\"model_type\":\"llama\",\"hidden_size\":4096,\"num_hidden_layers\":32,"
                    "\"num_attention_heads\":32,\"num_key_value_heads\":32,\"intermediate_size\":11008,"
                    "\"vocab_size\":32064,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-05}}";
    nb_hf_config c;
    for (int m = 0; m < 2; m++) {
        assert_int_equal(hf(j, m ? NB_ARCH_PLAN : NB_ARCH_RUN, &c), NB_OK);
        assert_int_equal(c.hp.source, NB_ARCH_SRC_HF);
        assert_int_equal(c.hp.arch, NB_ARCH_LLAMA);
        assert_string_equal(c.hp.arch_name, "llama");
        assert_int_equal(c.hp.n_embd, 4096);
        assert_int_equal(c.hp.n_layer, 32);
        assert_int_equal(c.hp.n_head_kv, 32);
        assert_int_equal(c.hp.head_dim, 128);
        assert_int_equal(c.hp.n_ff, 11008);
        assert_int_equal(c.hp.n_vocab, 32064);
        assert_int_equal(c.hp.n_ctx_train, 4096);
        assert_true(c.hp.norm_eps == 1e-5f);
        assert_false(c.hp.tied_embeddings);
        assert_string_equal(c.torch_dtype, "float16"); /* from the wrapper */
        nb_hfconfig_free(&c);
    }
    /* without text_config the wrapper is not a model nibble runs */
    assert_int_equal(hf("{\"model_type\":\"llava\",\"hidden_size\":8}", NB_ARCH_RUN, &c), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "'llava'"));
}

/* Mixture-of-experts configs as published (Mixtral-8x7B, Qwen1.5-MoE-A2.7B). */
static void test_hf_moe(void **state) {
    (void)state;
    const char *mixtral = "{\"architectures\":[\"MixtralForCausalLM\"],\"hidden_size\":4096,\"intermediate_size\":14336,"
                          "\"max_position_embeddings\":32768,\"model_type\":\"mixtral\",\"num_attention_heads\":32,"
                          "\"num_experts_per_tok\":2,\"num_hidden_layers\":32,\"num_key_value_heads\":8,"
                          "\"num_local_experts\":8,\"rms_norm_eps\":1e-05,\"rope_theta\":1000000.0,\"sliding_window\":null,"
                          "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\",\"vocab_size\":32000}";
    nb_hf_config c;
    assert_int_equal(hf(mixtral, NB_ARCH_RUN, &c), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "'mixtral'"));
    assert_int_equal(hf(mixtral, NB_ARCH_PLAN, &c), NB_OK);
    assert_int_equal(c.hp.arch, NB_ARCH_NONE);
    assert_int_equal(c.hp.n_expert, 8);
    assert_int_equal(c.hp.n_expert_used, 2);
    assert_int_equal(c.hp.n_ff_expert, 14336);
    assert_int_equal(c.hp.n_ff_shared, 0);
    assert_int_equal(c.hp.sliding_window, 0);
    assert_int_equal(c.hp.n_head_kv, 8);
    assert_true(c.hp.rope_theta == 1e6f);
    assert_string_equal(c.qhint.method, "");
    nb_hfconfig_free(&c);

    const char *qmoe = "{\"architectures\":[\"Qwen2MoeForCausalLM\"],\"hidden_size\":2048,\"intermediate_size\":5632,"
                       "\"max_position_embeddings\":8192,\"model_type\":\"qwen2_moe\",\"moe_intermediate_size\":1408,"
                       "\"num_attention_heads\":16,\"num_experts\":60,\"num_experts_per_tok\":4,\"num_hidden_layers\":24,"
                       "\"num_key_value_heads\":16,\"shared_expert_intermediate_size\":5632,\"sliding_window\":32768,"
                       "\"tie_word_embeddings\":false,\"use_sliding_window\":false,\"vocab_size\":151936}";
    assert_int_equal(hf(qmoe, NB_ARCH_PLAN, &c), NB_OK);
    assert_int_equal(c.hp.n_expert, 60);
    assert_int_equal(c.hp.n_expert_used, 4);
    assert_int_equal(c.hp.n_ff_expert, 1408);
    assert_int_equal(c.hp.n_ff_shared, 5632);
    assert_int_equal(c.hp.n_ff, 5632);
    assert_true(c.hp.qkv_bias);             /* the table's qwen2_moe row */
    assert_int_equal(c.hp.sliding_window, 0); /* use_sliding_window false */
    nb_hfconfig_free(&c);
}

/* DeepSeek-V2-Lite's config (MLA + MoE) and Gemma-2-9B's (planning flags). */
static void test_hf_mla_gemma(void **state) {
    (void)state;
    const char *ds = "{\"architectures\":[\"DeepseekV2ForCausalLM\"],\"first_k_dense_replace\":1,\"hidden_size\":2048,"
                     "\"intermediate_size\":10944,\"kv_lora_rank\":512,\"max_position_embeddings\":163840,"
                     "\"model_type\":\"deepseek_v2\",\"moe_intermediate_size\":1408,\"n_routed_experts\":64,"
                     "\"n_shared_experts\":2,\"num_attention_heads\":16,\"num_experts_per_tok\":6,\"num_hidden_layers\":27,"
                     "\"num_key_value_heads\":16,\"q_lora_rank\":null,\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,"
                     "\"rope_scaling\":{\"beta_fast\":32,\"beta_slow\":1,\"factor\":40,\"mscale\":0.707,\"mscale_all_dim\":0.707,"
                     "\"original_max_position_embeddings\":4096,\"type\":\"yarn\"},\"tie_word_embeddings\":false,"
                     "\"torch_dtype\":\"bfloat16\",\"v_head_dim\":128,\"vocab_size\":102400}";
    nb_hf_config c;
    assert_int_equal(hf(ds, NB_ARCH_RUN, &c), NB_ERR_UNSUPPORTED);
    assert_int_equal(hf(ds, NB_ARCH_PLAN, &c), NB_OK);
    assert_int_equal(c.hp.kv_lora_rank, 512);
    assert_int_equal(c.hp.q_lora_rank, 0);
    assert_int_equal(c.hp.qk_rope_dim, 64);
    assert_int_equal(c.hp.qk_nope_dim, 128);
    assert_int_equal(c.hp.v_head_dim, 128);
    assert_int_equal(c.hp.head_dim, 192);
    assert_int_equal(c.hp.n_expert, 64);
    assert_int_equal(c.hp.n_ff_expert, 1408);
    assert_int_equal(c.hp.n_ff_shared, 2 * 1408);
    assert_int_equal(c.hp.n_dense_layers, 1);
    assert_int_equal(c.hp.rope_scaling, NB_ROPE_SCALING_OTHER); /* yarn: recorded, not refused */
    nb_hfconfig_free(&c);

    const char *gemma2 = "{\"architectures\":[\"Gemma2ForCausalLM\"],\"head_dim\":256,\"hidden_act\":\"gelu_pytorch_tanh\","
                         "\"hidden_size\":3584,\"intermediate_size\":14336,\"max_position_embeddings\":8192,"
                         "\"model_type\":\"gemma2\",\"num_attention_heads\":16,\"num_hidden_layers\":42,"
                         "\"num_key_value_heads\":8,\"rms_norm_eps\":1e-06,\"sliding_window\":4096,\"vocab_size\":256000}";
    assert_int_equal(hf(gemma2, NB_ARCH_RUN, &c), NB_ERR_UNSUPPORTED);
    assert_int_equal(hf(gemma2, NB_ARCH_PLAN, &c), NB_OK);
    assert_true(c.hp.tied_embeddings); /* gemma's default */
    assert_int_equal(c.hp.sliding_window, 4096);
    assert_int_equal(c.hp.head_dim, 256);
    assert_int_equal(c.hp.info->norms_per_layer, 4);
    nb_hfconfig_free(&c);

    /* no model_type: the planner still sizes it, the engine refuses */
    const char *bare = "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}";
    assert_int_equal(hf(bare, NB_ARCH_PLAN, &c), NB_OK);
    assert_string_equal(c.hp.arch_name, "unknown");
    assert_null(c.hp.info);
    assert_int_equal(c.hp.n_ctx_train, 0);
    nb_hfconfig_free(&c);
    assert_int_equal(hf(bare, NB_ARCH_RUN, &c), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "'model_type'"));
}

/* The quantization_config hint the planner picks a scheme from. */
static void test_hf_quant_hint(void **state) {
    (void)state;
#define BASE "\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100"
    nb_hf_config c;
    assert_int_equal(hf("{" BASE ",\"quantization_config\":{\"quant_method\":\"awq\",\"w_bit\":4,\"q_group_size\":64,"
                        "\"zero_point\":false}}", NB_ARCH_PLAN, &c), NB_OK);
    assert_string_equal(c.qhint.method, "awq");
    assert_int_equal(c.qhint.bits, 4);
    assert_int_equal(c.qhint.group, 64);
    assert_false(c.qhint.zero_point);
    nb_hfconfig_free(&c);
    assert_int_equal(hf("{" BASE ",\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"config_groups\":"
                        "{\"g\":{\"weights\":{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"tensor\",\"symmetric\":false},"
                        "\"input_activations\":{\"num_bits\":8}}}}}", NB_ARCH_PLAN, &c), NB_OK);
    assert_int_equal(c.qhint.bits, 8);
    assert_int_equal(c.qhint.group, -1);
    assert_true(c.qhint.zero_point);
    assert_true(c.qhint.ct_act);
    assert_string_equal(c.qhint.ct_type, "int");
    nb_hfconfig_free(&c);
    assert_int_equal(hf("{" BASE ",\"quantization_config\":{\"bits\":4}}", NB_ARCH_PLAN, &c), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "quant_method"));
#undef BASE
}

static void test_llama2c(void **state) {
    (void)state;
    const char *p = nb_test_shared("models/stories260K.bin");
    if (!p) skip();
    /* the header: 7 little-endian int32 (dim, hidden, layers, heads, kv heads, vocab, seq_len) */
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    int32_t h[7];
    assert_int_equal(fread(h, sizeof h[0], 7, f), 7);
    fclose(f);
    nb_source s;
    assert_int_equal(nb_source_open(p, &s), NB_OK);
    assert_int_equal(s.hp.source, NB_ARCH_SRC_LLAMA2C);
    assert_ptr_equal(s.hp.info, nb_arch_find_gguf("llama"));
    assert_int_equal(s.hp.n_embd, h[0]);
    assert_int_equal(s.hp.n_ff, h[1]);
    assert_int_equal(s.hp.n_layer, h[2]);
    assert_int_equal(s.hp.n_head, h[3]);
    assert_int_equal(s.hp.n_head_kv, h[4]);
    assert_int_equal(s.hp.n_vocab, h[5] < 0 ? -h[5] : h[5]);
    assert_int_equal(s.hp.n_ctx_train, h[6]);
    assert_int_equal(s.hp.rope_style, NB_ROPE_NORM);
    assert_string_equal(nb_arch_gguf_name(&s.hp), "llama");
    nb_source_close(&s);
}

static void test_validate(void **state) {
    (void)state;
    nb_arch_desc d = {.arch = NB_ARCH_LLAMA, .n_vocab = 10, .n_embd = 8, .n_layer = 1, .n_head = 2, .n_head_kv = 2,
                      .head_dim = 4, .n_ff = 16, .rope_dim = 4, .norm_eps = 1e-5f, .rope_theta = 1e4f};
    assert_int_equal(nb_arch_desc_validate(&d, "x"), NB_OK);
    d.n_head_kv = 3;
    assert_int_equal(nb_arch_desc_validate(&d, "x"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_errmsg(), "KV head count 3"));
    d.n_head_kv = 2;
    d.arch = NB_ARCH_NONE;
    snprintf(d.arch_name, sizeof d.arch_name, "phi3");
    assert_int_equal(nb_arch_desc_validate(&d, "x"), NB_ERR_UNSUPPORTED);
    assert_non_null(strstr(nb_errmsg(), "'phi3'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_gguf_shared),
        cmocka_unit_test(test_gguf_planning_only),
        cmocka_unit_test(test_hf_text_config),
        cmocka_unit_test(test_hf_moe),
        cmocka_unit_test(test_hf_mla_gemma),
        cmocka_unit_test(test_hf_quant_hint),
        cmocka_unit_test(test_llama2c),
        cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
