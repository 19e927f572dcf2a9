/* The memory account as text (the seeds' three steps: ① budget ② weights
 * ③ KV pool -> tokens -> concurrency, then the verdicts) and as JSON with
 * every number in bytes; the --compare table of several schemes side by
 * side. Sizes print in GiB (2^30 bytes), which the header line says. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static double gib(uint64_t b) { return (double)b / GIB; }
static double sgib(int64_t b) { return (double)b / GIB; }

/* GiB with two decimals, MiB below a tenth of a GiB (small models) */
static const char *size_str(int64_t b, char *buf, size_t n) {
    double a = b < 0 ? -(double)b : (double)b;
    if (a >= GIB / 10 || a == 0) snprintf(buf, n, "%.2f GiB", (double)b / GIB);
    else snprintf(buf, n, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    return buf;
}

static const char *level_name(nb_plan_level l) {
    switch (l) {
    case NB_PLAN_OK: return "ok";
    case NB_PLAN_INFO: return "info";
    case NB_PLAN_WARN: return "warn";
    default: return "refuse";
    }
}

/* "14.77 B", "778.6 M", "3.1 K" */
static const char *count_str(uint64_t n, char *buf, size_t len) {
    if (n >= 1000000000ull) snprintf(buf, len, "%.2f B", (double)n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, len, "%.1f M", (double)n / 1e6);
    else if (n >= 1000ull) snprintf(buf, len, "%.1f K", (double)n / 1e3);
    else snprintf(buf, len, "%llu", (unsigned long long)n);
    return buf;
}

static void scheme_desc(const nb_plan_scheme *s, char *buf, size_t n) {
    switch (s->fmt) {
    case NB_PLAN_W_FLOAT: snprintf(buf, n, "%s (%d bytes per weight)", s->name, s->float_bytes); break;
    case NB_PLAN_W_FP8:
        snprintf(buf, n, "%s (e4m3, fp32 scale per %s; embeddings, lm_head, norms, router stay 16-bit)", s->name,
                 s->group == -1 ? "tensor" : s->group == -2 ? "128x128 block" : "output channel");
        break;
    case NB_PLAN_W_INT: {
        char g[32];
        if (s->group > 0) snprintf(g, sizeof g, "group %lld", (long long)s->group);
        else snprintf(g, sizeof g, "%s", s->group == 0 ? "per channel" : "per tensor");
        snprintf(buf, n, "%s (int%d %s, %d-byte scales%s%s, %s; embeddings, lm_head, norms, router stay 16-bit)",
                 s->name, s->bits, g, s->scale_bytes, s->zero_bits ? ", zero points" : ", symmetric",
                 s->g_idx ? ", g_idx" : "", s->activations);
        break;
    }
    case NB_PLAN_W_NF4:
        snprintf(buf, n, "%s (4-bit NormalFloat, absmax per 64%s; embeddings, lm_head, norms stay 16-bit)", s->name,
                 s->double_quant ? ", double-quantized" : " in fp32");
        break;
    case NB_PLAN_W_GGUF:
        snprintf(buf, n, "%s (llama.cpp recipe: base %s%s, output Q6_K, norms F32)", s->name,
                 nb_dtype_name(s->gguf_base),
                 s->gguf_mix == NB_RTN_MIX_NONE ? ""
                 : s->gguf_mix == NB_RTN_MIX_Q4_K_M || s->gguf_mix == NB_RTN_MIX_Q5_K_M
                     ? ", Q6_K on attn_v/ffn_down of 'more bits' layers"
                     : ", more bits on attn_v/attn_output/ffn_down as the mix says");
        break;
    }
}

static void kv_formula(const nb_plan_config *c, const nb_plan_result *r, char *buf, size_t n) {
    const nb_plan_model *m = &c->model;
    const char *per = c->tp > 1 ? " per card" : "";
    char elt[32];
    if (c->kv.fp8) snprintf(elt, sizeof elt, "1 B");
    else {
        const nb_dtype_info *i = nb_dtype_get(c->kv.type);
        if (i && i->block == 1) snprintf(elt, sizeof elt, "%u B", i->block_bytes);
        else if (i) snprintf(elt, sizeof elt, "%u/%u B", i->block_bytes, i->block);
        else snprintf(elt, sizeof elt, "? B");
    }
    if (m->kv_lora_rank > 0)
        snprintf(buf, n, "%lld layers x (%lld latent + %lld rope) x %s, MLA%s", (long long)m->n_layer,
                 (long long)m->kv_lora_rank, (long long)m->qk_rope_dim, elt, per);
    else if (m->v_head_dim && m->v_head_dim != m->head_dim)
        snprintf(buf, n, "%lld layers x %lld KV heads x (%lld + %lld) x %s%s", (long long)m->n_layer,
                 (long long)r->kv_heads_card, (long long)m->head_dim, (long long)m->v_head_dim, elt, per);
    else
        snprintf(buf, n, "2 x %lld layers x %lld KV heads x %lld x %s%s", (long long)m->n_layer,
                 (long long)r->kv_heads_card, (long long)m->head_dim, elt, per);
}

void nb_plan_print(const nb_plan_config *c, const nb_plan_result *r, FILE *f) {
    char b1[32], b2[512], s3[32];
    const nb_plan_model *m = &c->model;
    fprintf(f, "nibble plan: the memory account (GiB = 2^30 bytes)\n");
    fprintf(f, "  model     %s (%s): %s parameters", m->name, m->arch, count_str(r->params, b1, sizeof b1));
    if (r->params_active != r->params) fprintf(f, ", %s active per token", count_str(r->params_active, b1, sizeof b1));
    fprintf(f, "\n            numbers from %s\n", m->source[0] ? m->source : "(given)");
    scheme_desc(&c->scheme, b2, sizeof b2);
    fprintf(f, "  weights   %s\n", b2);
    kv_formula(c, r, b2, sizeof b2);
    fprintf(f, "  KV cache  %s: %.1f KiB per token (%s)\n", c->kv.name, (double)r->kv_token_card / 1024.0, b2);
    fprintf(f, "  hardware  %d x %s, %.2f GiB per card%s, tensor parallel %d", c->gpus, c->device, gib(c->capacity),
            c->host ? (c->cgroup_limited ? " (cgroup memory limit)" : " (host RAM)") : "", c->tp);
    if (r->replicas > 1) fprintf(f, ", %d replicas", r->replicas);
    fprintf(f, "\n\n");

    fprintf(f, "① budget   %.2f x %.2f GiB = %.2f GiB per card\n", c->utilization, gib(c->capacity), gib(r->budget));
    fprintf(f, "② weights  %s per card (%.0f%% of the card)%s\n", size_str((int64_t)r->weight_bytes_card, s3, sizeof s3),
            100.0 * r->weights_frac, r->weights_exact ? ", exact: the file's tensor sizes" : "");
    fprintf(f, "     %-12s %10s %12s %12s  %s\n", "group", "params", "bytes", "per card", "stored");
    for (int g = 0; g < NB_PLAN_G_COUNT; g++) {
        const nb_plan_group_acc *a = &r->groups[g];
        if (!a->params && !a->bytes) continue;
        const char *stored = a->quantized == 0 ? "unquantized" : a->quantized == a->params ? "quantized" : "mixed";
        char s1[32], s2[32];
        fprintf(f, "     %-12s %10s %12s %12s  %s, %.2f bits/weight%s\n", nb_plan_group_name((nb_plan_group)g),
                count_str(a->params, b1, sizeof b1), size_str((int64_t)a->bytes, s1, sizeof s1),
                size_str((int64_t)a->bytes_card, s2, sizeof s2), stored,
                a->params ? (double)a->bytes * 8.0 / (double)a->params : 0.0,
                c->tp > 1 && a->bytes_card == a->bytes ? ", replicated" : "");
    }
    char s1[32], s2[32], s4[32];
    fprintf(f, "     %-12s %10s %12s %12s  %.2f bits/weight\n", "total", count_str(r->params, b1, sizeof b1),
            size_str((int64_t)r->weight_bytes, s1, sizeof s1), size_str((int64_t)r->weight_bytes_card, s2, sizeof s2),
            r->bits_per_weight);
    fprintf(f, "③ KV pool  %.2f GiB - %s (weights) - %.2f GiB (overhead, %s) = %.2f GiB per card\n",
            gib(r->budget), size_str((int64_t)r->weight_bytes_card, s4, sizeof s4), gib(r->overhead),
            r->ovh.engine == NB_PLAN_ENGINE_FIXED ? "estimate"
            : r->ovh.calibrated                 ? "calibrated"
            : r->ovh.exact                      ? "exact"
                                                : nb_plan_engine_name(r->ovh.engine),
            sgib(r->pool));
    if (r->ovh.engine != NB_PLAN_ENGINE_FIXED) {
        fprintf(f, "           overhead as %s sizes it", nb_plan_engine_name(r->ovh.engine));
        if (r->ovh.profile_tokens)
            fprintf(f, " (profiling batch %lld tokens%s)", (long long)r->ovh.profile_tokens,
                    r->ovh.chunked_prefill ? ", chunked prefill" : "");
        fprintf(f, ":\n");
        for (int i = 0; i < r->ovh.n; i++)
            fprintf(f, "             %-11s %8.2f GiB  %s  [%s]\n", r->ovh.term[i].name, gib(r->ovh.term[i].bytes),
                    r->ovh.term[i].formula, r->ovh.term[i].source);
    }
    fprintf(f, "           / %.1f KiB per token = %llu tokens\n", (double)r->kv_token_card / 1024.0,
            (unsigned long long)r->kv_tokens);
    fprintf(f, "           sequences at once:");
    for (int i = 0; i < r->n_lengths; i++)
        fprintf(f, "  %lld -> %lld", (long long)r->lengths[i], (long long)r->concurrency[i]);
    if (r->replicas > 1) fprintf(f, "  (per replica; x%d replicas)", r->replicas);
    fprintf(f, "\n           max_model_len %lld, max_num_seqs %lld\n\n", (long long)r->max_model_len,
            (long long)r->max_num_seqs);

    int warns = 0;
    for (int i = 0; i < r->n_verdicts; i++) {
        fprintf(f, "  %-6s %s: %s\n", level_name(r->verdicts[i].level), r->verdicts[i].code, r->verdicts[i].text);
        warns += r->verdicts[i].level == NB_PLAN_WARN;
    }
    if (r->refused) {
        char msg[600];
        nb_plan_refusal_message(r, msg, sizeof msg);
        fprintf(f, "\nresult: REFUSED: %s\n", msg);
    } else {
        fprintf(f, "\nresult: %s\n", warns ? "fits, with warnings" : "fits");
    }
}

/* ---- JSON ------------------------------------------------------------------------ */

static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *model_json(const nb_plan_model *m) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(m->name));
    json_object_set_new(o, "arch", json_string(m->arch));
    json_object_set_new(o, "source", json_string(m->source));
    json_object_set_new(o, "vocab_size", json_integer(m->n_vocab));
    json_object_set_new(o, "hidden_size", json_integer(m->n_embd));
    json_object_set_new(o, "num_hidden_layers", json_integer(m->n_layer));
    json_object_set_new(o, "num_attention_heads", json_integer(m->n_head));
    json_object_set_new(o, "num_key_value_heads", json_integer(m->n_head_kv));
    json_object_set_new(o, "head_dim", json_integer(m->head_dim));
    json_object_set_new(o, "v_head_dim", json_integer(m->v_head_dim ? m->v_head_dim : m->head_dim));
    json_object_set_new(o, "intermediate_size", json_integer(m->n_ff));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(m->tied));
    json_object_set_new(o, "qkv_bias", json_boolean(m->qkv_bias));
    json_object_set_new(o, "qk_norm", json_boolean(m->qk_norm));
    json_object_set_new(o, "num_experts", json_integer(m->n_expert));
    json_object_set_new(o, "num_experts_per_tok", json_integer(m->n_expert_used));
    json_object_set_new(o, "moe_intermediate_size", json_integer(m->n_ff_expert));
    json_object_set_new(o, "shared_expert_intermediate_size", json_integer(m->n_ff_shared));
    json_object_set_new(o, "kv_lora_rank", json_integer(m->kv_lora_rank));
    json_object_set_new(o, "qk_rope_head_dim", json_integer(m->qk_rope_dim));
    json_object_set_new(o, "sliding_window", json_integer(m->sliding_window));
    json_object_set_new(o, "max_position_embeddings", json_integer(m->n_ctx_train));
    json_object_set_new(o, "published_params", json_integer(m->published_params));
    return o;
}

static json_t *result_json(const nb_plan_config *c, const nb_plan_result *r) {
    json_t *o = json_object();
    json_t *w = json_object(), *groups = json_object();
    for (int g = 0; g < NB_PLAN_G_COUNT; g++) {
        const nb_plan_group_acc *a = &r->groups[g];
        if (!a->params && !a->bytes) continue;
        json_t *x = json_object();
        json_object_set_new(x, "params", u64(a->params));
        json_object_set_new(x, "bytes", u64(a->bytes));
        json_object_set_new(x, "bytes_per_card", u64(a->bytes_card));
        json_object_set_new(x, "quantized_params", u64(a->quantized));
        json_object_set_new(x, "replicated", json_boolean(c->tp > 1 && a->bytes_card == a->bytes));
        json_object_set_new(groups, nb_plan_group_name((nb_plan_group)g), x);
    }
    json_object_set_new(w, "scheme", json_string(c->scheme.name));
    json_object_set_new(w, "params", u64(r->params));
    json_object_set_new(w, "params_active", u64(r->params_active));
    json_object_set_new(w, "bytes", u64(r->weight_bytes));
    json_object_set_new(w, "bytes_per_card", u64(r->weight_bytes_card));
    json_object_set_new(w, "replicated_bytes_per_card", u64(r->replicated_bytes_card));
    json_object_set_new(w, "bits_per_weight", json_real(r->bits_per_weight));
    json_object_set_new(w, "fraction_of_card", json_real(r->weights_frac));
    json_object_set_new(w, "exact", json_boolean(r->weights_exact));
    json_object_set_new(w, "groups", groups);
    json_object_set_new(o, "weights", w);

    json_t *kv = json_object();
    json_object_set_new(kv, "dtype", json_string(c->kv.name));
    json_object_set_new(kv, "bytes_per_token", u64(r->kv_token));
    json_object_set_new(kv, "bytes_per_token_per_card", u64(r->kv_token_card));
    json_object_set_new(kv, "kv_heads_per_card", json_integer(r->kv_heads_card));
    json_object_set_new(kv, "mla", json_boolean(c->model.kv_lora_rank > 0));
    json_object_set_new(o, "kv", kv);

    json_t *hw = json_object();
    json_object_set_new(hw, "device", json_string(c->device));
    json_object_set_new(hw, "host", json_boolean(c->host));
    json_object_set_new(hw, "capacity_bytes", u64(c->capacity));
    json_object_set_new(hw, "fp8_native", c->fp8_native < 0 ? json_null() : json_boolean(c->fp8_native));
    json_object_set_new(hw, "tp", json_integer(c->tp));
    json_object_set_new(hw, "gpus", json_integer(c->gpus));
    json_object_set_new(hw, "replicas", json_integer(r->replicas));
    json_object_set_new(o, "hardware", hw);

    json_t *a = json_object();
    json_object_set_new(a, "utilization", json_real(r->utilization));
    json_object_set_new(a, "budget_bytes", u64(r->budget));
    json_object_set_new(a, "weights_bytes_per_card", u64(r->weight_bytes_card));
    json_object_set_new(a, "overhead_bytes", u64(r->overhead));
    json_object_set_new(a, "overhead_is_estimate", json_boolean(r->ovh.engine == NB_PLAN_ENGINE_FIXED));
    json_t *ov = json_object(), *terms = json_array();
    json_object_set_new(ov, "engine", json_string(nb_plan_engine_name(r->ovh.engine)));
    json_object_set_new(ov, "total_bytes", u64(r->ovh.total));
    json_object_set_new(ov, "profile_tokens", json_integer(r->ovh.profile_tokens));
    json_object_set_new(ov, "chunked_prefill", json_boolean(r->ovh.chunked_prefill));
    json_object_set_new(ov, "block_size", json_integer(r->ovh.block_size));
    json_object_set_new(ov, "calibrated", json_boolean(r->ovh.calibrated));
    for (int i = 0; i < r->ovh.n; i++)
        json_array_append_new(terms, json_pack("{s:s, s:o, s:s, s:s}", "name", r->ovh.term[i].name, "bytes",
                                               u64(r->ovh.term[i].bytes), "formula", r->ovh.term[i].formula,
                                               "source", r->ovh.term[i].source));
    json_object_set_new(ov, "terms", terms);
    json_object_set_new(a, "overhead", ov);
    json_object_set_new(a, "pool_bytes", json_integer(r->pool));
    json_object_set_new(a, "kv_tokens", u64(r->kv_tokens));
    json_object_set_new(a, "max_model_len", json_integer(r->max_model_len));
    json_object_set_new(a, "max_num_seqs", json_integer(r->max_num_seqs));
    json_t *conc = json_array();
    for (int i = 0; i < r->n_lengths; i++) {
        json_t *x = json_object();
        json_object_set_new(x, "length", json_integer(r->lengths[i]));
        json_object_set_new(x, "sequences", json_integer(r->concurrency[i]));
        json_array_append_new(conc, x);
    }
    json_object_set_new(a, "concurrency", conc);
    json_object_set_new(o, "account", a);

    json_t *vs = json_array();
    for (int i = 0; i < r->n_verdicts; i++) {
        json_t *x = json_object();
        json_object_set_new(x, "level", json_string(level_name(r->verdicts[i].level)));
        json_object_set_new(x, "code", json_string(r->verdicts[i].code));
        json_object_set_new(x, "text", json_string(r->verdicts[i].text));
        json_array_append_new(vs, x);
    }
    json_object_set_new(o, "verdicts", vs);
    json_object_set_new(o, "refused", json_boolean(r->refused));
    if (r->refused) {
        char msg[600];
        nb_plan_refusal_message(r, msg, sizeof msg);
        json_object_set_new(o, "refusal", json_string(msg));
    }
    return o;
}

char *nb_plan_json(const nb_plan_config *c, const nb_plan_result *r) {
    json_t *o = result_json(c, r);
    json_object_set_new(o, "model", model_json(&c->model));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

char *nb_plan_json_compare(const nb_plan_config *c, const nb_plan_result *rs, const nb_plan_scheme *schemes, int n) {
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "model", model_json(&c->model));
    for (int i = 0; i < n; i++) {
        nb_plan_config ci = *c;
        ci.scheme = schemes[i];
        json_array_append_new(arr, result_json(&ci, &rs[i]));
    }
    json_object_set_new(o, "schemes", arr);
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

void nb_plan_print_compare(const nb_plan_config *c, const nb_plan_result *rs, const nb_plan_scheme *schemes, int n,
                           FILE *f) {
    fprintf(f, "nibble plan --compare: %s on %d x %s (%.2f GiB per card, tp %d), KV %s, utilization %.2f, "
               "overhead %.2f GiB (estimate); GiB = 2^30 bytes\n\n",
            c->model.name, c->gpus, c->device, gib(c->capacity), c->tp, c->kv.name, c->utilization, gib(c->overhead));
    fprintf(f, "%-10s %12s %7s %11s %11s", "scheme", "weights/card", "of card", "KV pool", "tokens");
    const nb_plan_result *r0 = n ? &rs[0] : NULL;
    for (int j = 0; r0 && j < r0->n_lengths; j++) fprintf(f, " %7lld", (long long)r0->lengths[j]);
    fprintf(f, "  verdict\n");
    for (int i = 0; i < n; i++) {
        const nb_plan_result *r = &rs[i];
        fprintf(f, "%-10s %8.2f GiB %6.0f%% %7.2f GiB %11llu", schemes[i].name, gib(r->weight_bytes_card),
                100.0 * r->weights_frac, sgib(r->pool), (unsigned long long)r->kv_tokens);
        for (int j = 0; j < r->n_lengths; j++) fprintf(f, " %7lld", (long long)r->concurrency[j]);
        char v[160] = "";
        size_t o = 0;
        for (int k = 0; k < r->n_verdicts && o < sizeof v; k++)
            if (r->verdicts[k].level >= NB_PLAN_WARN)
                o += (size_t)snprintf(v + o, sizeof v - o, "%s%s", o ? "," : "", r->verdicts[k].code);
        fprintf(f, "  %s%s\n", r->refused ? "REFUSED " : "", o ? v : "fits");
    }
    fprintf(f, "\ncolumns under lengths: sequences of that length the KV pool holds at once");
    if (n && rs[0].replicas > 1) fprintf(f, " (per replica, x%d replicas)", rs[0].replicas);
    fprintf(f, "\n");
}
