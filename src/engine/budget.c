/* The engine's KV budget through the plan/ account (see budget.h). */
#include "engine/budget.h"

#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

nb_status nb_engine_kv_type(nb_kv_dtype d, nb_kv_type *out) {
    switch (d) {
    case NB_KV_AUTO: case NB_KV_F32: *out = NB_KVT_F32; return NB_OK;
    case NB_KV_F16: *out = NB_KVT_F16; return NB_OK;
    case NB_KV_BF16: *out = NB_KVT_BF16; return NB_OK;
    case NB_KV_FP8: *out = NB_KVT_FP8; return NB_OK;
    case NB_KV_INT8: *out = NB_KVT_INT8; return NB_OK;
    }
    return nb_fail(NB_ERR_RANGE, "--kv-cache-dtype %d unknown", (int)d);
}

nb_status nb_engine_kv_dtype_parse(const char *s, nb_kv_dtype *out) {
    static const struct { const char *n; nb_kv_dtype d; } t[] = {
        {"auto", NB_KV_AUTO}, {"f32", NB_KV_F32}, {"fp32", NB_KV_F32}, {"float32", NB_KV_F32},
        {"f16", NB_KV_F16}, {"fp16", NB_KV_F16}, {"float16", NB_KV_F16}, {"half", NB_KV_F16},
        {"bf16", NB_KV_BF16}, {"bfloat16", NB_KV_BF16}, {"fp8", NB_KV_FP8}, {"fp8_e4m3", NB_KV_FP8},
        {"int8", NB_KV_INT8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].n)) {
            *out = t[i].d;
            return NB_OK;
        }
    return nb_fail(NB_ERR_INVALID, "--kv-cache-dtype '%s': allowed auto, f32, f16, bf16, fp8, int8", s);
}

/* Bytes the forward pass and the engine allocate per step, beyond weights
 * and KV: the plan's formula for this engine, so `nibble plan --engine
 * nibble` and this account agree to the byte. */
static uint64_t activation_reserve(const nb_model *m, const nb_engine_config *c) {
    const nb_arch_desc *hp = &m->hp;
    return nb_plan_nibble_activation(hp->n_embd, hp->n_head, hp->head_dim, hp->n_head_kv, hp->n_ff, hp->rope_dim,
                                     hp->n_vocab, c->max_num_batched_tokens, c->max_num_seqs, c->max_model_len);
}

nb_status nb_engine_kv_budget(const nb_model *m, const nb_engine_config *c, uint64_t bpt, nb_engine_budget *b) {
    memset(b, 0, sizeof *b);
    uint64_t bs = (uint64_t)c->block_size, mml = (uint64_t)c->max_model_len;
    uint64_t cap_tokens = (uint64_t)c->max_num_seqs * mml;
    size_t o = 0;
    if (c->kv_cache_bytes > 0) {
        b->kv_tokens = c->kv_cache_bytes / bpt;
        o += (size_t)snprintf(b->text + o, sizeof b->text - o,
                              "KV cache: --kv-cache-bytes %llu (%.2f GiB) at %llu bytes/token = %llu tokens\n",
                              (unsigned long long)c->kv_cache_bytes, (double)c->kv_cache_bytes / GIB,
                              (unsigned long long)bpt, (unsigned long long)b->kv_tokens);
        if (b->kv_tokens < mml) {
            b->refused = true;
            snprintf(b->refusal, sizeof b->refusal,
                     "max model len %llu is larger than the maximum number of tokens that can be stored in KV "
                     "cache (%llu); lower --max-model-len, raise --kv-cache-bytes or --memory-utilization, quantize "
                     "weights or KV", (unsigned long long)mml, (unsigned long long)b->kv_tokens);
        }
    } else {
        nb_plan_config pc;
        nb_plan_config_init(&pc);
        NB_TRY(nb_plan_config_host(&pc));
        pc.utilization = c->memory_utilization;
        pc.overhead = activation_reserve(m, c) + NB_PLAN_NIBBLE_FIXED_OVERHEAD;
        pc.max_model_len = (int64_t)mml;
        pc.max_num_seqs = c->max_num_seqs;
        pc.n_lengths = 1;
        pc.lengths[0] = (int64_t)mml;
        pc.model.n_ctx_train = m->hp.n_ctx_train;
        nb_plan_result r;
        memset(&r, 0, sizeof r);
        nb_status st = nb_plan_account(&pc, m->weight_bytes, bpt, &r);
        nb_plan_config_free(&pc);
        NB_TRY(st);
        b->kv_tokens = r.kv_tokens;
        o += (size_t)snprintf(b->text + o, sizeof b->text - o,
                              "memory (%s): %.2f GiB x %.2f = budget %.2f GiB; weights %.2f GiB; overhead "
                              "%.2f GiB (activations + runtime); KV pool %.2f GiB = %llu tokens at %llu bytes/token\n"
                              "memory in bytes: budget %llu, weights %llu, overhead %llu, pool %lld\n",
                              pc.cgroup_limited ? "cgroup memory limit" : "host RAM", (double)r.capacity / GIB,
                              r.utilization, (double)r.budget / GIB,
                              (double)m->weight_bytes / GIB, (double)pc.overhead / GIB,
                              r.pool > 0 ? (double)r.pool / GIB : 0.0, (unsigned long long)r.kv_tokens,
                              (unsigned long long)bpt, (unsigned long long)r.budget,
                              (unsigned long long)m->weight_bytes, (unsigned long long)pc.overhead, (long long)r.pool);
        if (r.refused) {
            b->refused = true;
            nb_plan_refusal_message(&r, b->refusal, sizeof b->refusal);
        }
    }
    if (b->refused) {
        o += (size_t)snprintf(b->text + o, sizeof b->text - o, "refused: %s\n", b->refusal);
        return NB_OK;
    }
    uint64_t tokens = b->kv_tokens;
    if (tokens > cap_tokens) {
        o += (size_t)snprintf(b->text + o, sizeof b->text - o,
                              "KV pool capped at max_num_seqs %d x max_model_len %llu = %llu tokens\n",
                              c->max_num_seqs, (unsigned long long)mml, (unsigned long long)cap_tokens);
        tokens = cap_tokens;
    }
    uint64_t nbk = tokens / bs;
    if (nbk * bs < mml) nbk = (mml + bs - 1) / bs; /* whole blocks for one full-length sequence */
    if (nbk > (1u << 30)) nbk = 1u << 30;
    b->n_blocks = (int64_t)nbk;
    uint64_t held = nbk * bs;
    o += (size_t)snprintf(b->text + o, sizeof b->text - o,
                          "KV blocks: %llu of %llu tokens (%.2f GiB); concurrency at max_model_len %llu: %llu\n",
                          (unsigned long long)nbk, (unsigned long long)bs, (double)(held * bpt) / GIB,
                          (unsigned long long)mml, (unsigned long long)(held / mml));
    if (held < cap_tokens) {
        char per[160] = "";
        size_t po = 0;
        for (uint64_t div = 1; div <= 16 && po < sizeof per; div *= 4) {
            uint64_t len = mml / div;
            if (len < 1 || (div > 1 && len < bs)) break;
            po += (size_t)snprintf(per + po, sizeof per - po, "%s%llu at %llu tokens", div > 1 ? ", " : "",
                                   (unsigned long long)(held / len), (unsigned long long)len);
        }
        snprintf(b->warning, sizeof b->warning,
                 "max_num_seqs %d x max_model_len %llu = %llu tokens exceeds the KV pool of %llu tokens: sequences "
                 "that fit at once: %s (more wait or get preempted)",
                 c->max_num_seqs, (unsigned long long)mml, (unsigned long long)cap_tokens, (unsigned long long)held,
                 per);
        snprintf(b->text + o, sizeof b->text - o, "warning: %s\n", b->warning);
    }
    return NB_OK;
}
