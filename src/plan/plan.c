/* The memory account as pure arithmetic (see plan.h for the formulas).
 *
 * ② weights: the architecture is expanded into its tensors (kind, layer,
 * input length, output length, matrices in the stack for MoE experts); each
 * tensor's bytes follow the scheme:
 *   float     elements × float_bytes (norms and biases too)
 *   fp8/int   linear weights: ceil(elements × bits / 8) + scales
 *             (+ zero points, + GPTQ g_idx); embeddings, lm_head and the MoE
 *             router stay float unless the scheme says otherwise
 *   nf4       4 bits + one absmax per 64 weights (fp32, or 8 bits + fp32 per
 *             256 blocks with double quantization)
 *   gguf      llama.cpp's type recipe (nb_plan_gguf_type), row bytes from
 *             src/base/dtype.h; 1-D tensors and the router F32
 * and its per-card share under tensor parallelism: column/row-parallel
 * matrices, embeddings and lm_head (vocab-parallel) divide by tp; K/V
 * projections divide by the KV heads each card holds (a KV head is
 * duplicated when tp > KV heads); norms, o_proj bias, router and the MLA
 * down-projection (kv_a) are replicated. Shares round up to whole bytes. */
#include "plan/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

void nb_plan_config_init(nb_plan_config *c) {
    memset(c, 0, sizeof *c);
    NB_ASSERT(nb_plan_scheme_from_name("fp16", &c->scheme) == NB_OK);
    NB_ASSERT(nb_plan_kv_from_name("fp16", &c->kv) == NB_OK);
    snprintf(c->device, sizeof c->device, "custom");
    c->fp8_native = -1;
    c->tp = 1;
    c->gpus = 1;
    c->utilization = NB_PLAN_DEFAULT_UTILIZATION;
    c->overhead = NB_PLAN_DEFAULT_OVERHEAD;
    c->engine = NB_PLAN_ENGINE_FIXED;
    c->chunked_prefill = -1;
    c->max_num_seqs = NB_PLAN_DEFAULT_MAX_NUM_SEQS;
    c->n_lengths = 3;
    c->lengths[0] = 4096;
    c->lengths[1] = 8192;
    c->lengths[2] = 32768;
}

void nb_plan_config_free(nb_plan_config *c) {
    free(c->tensors);
    c->tensors = NULL;
    c->n_tensors = 0;
}

const char *nb_plan_group_name(nb_plan_group g) {
    static const char *const names[NB_PLAN_G_COUNT] = {
        "embeddings", "attention", "mlp", "moe_experts", "moe_shared", "moe_router", "norms", "lm_head", "other",
    };
    return (unsigned)g < NB_PLAN_G_COUNT ? names[g] : "?";
}

nb_plan_group nb_plan_kind_group(nb_plan_kind k) {
    switch (k) {
    case NB_PLAN_T_EMBED: return NB_PLAN_G_EMBED;
    case NB_PLAN_T_LM_HEAD: return NB_PLAN_G_LM_HEAD;
    case NB_PLAN_T_NORM: return NB_PLAN_G_NORM;
    case NB_PLAN_T_Q: case NB_PLAN_T_K: case NB_PLAN_T_V: case NB_PLAN_T_O:
    case NB_PLAN_T_Q_BIAS: case NB_PLAN_T_K_BIAS: case NB_PLAN_T_V_BIAS: case NB_PLAN_T_O_BIAS:
    case NB_PLAN_T_MLA_A: case NB_PLAN_T_MLA_B:
        return NB_PLAN_G_ATTN;
    case NB_PLAN_T_GATE: case NB_PLAN_T_UP: case NB_PLAN_T_DOWN: return NB_PLAN_G_MLP;
    case NB_PLAN_T_ROUTER: case NB_PLAN_T_SHEXP_ROUTER: return NB_PLAN_G_ROUTER;
    case NB_PLAN_T_EXP_GATE: case NB_PLAN_T_EXP_UP: case NB_PLAN_T_EXP_DOWN: return NB_PLAN_G_EXPERTS;
    case NB_PLAN_T_SHEXP_GATE: case NB_PLAN_T_SHEXP_UP: case NB_PLAN_T_SHEXP_DOWN: return NB_PLAN_G_SHARED;
    default: return NB_PLAN_G_OTHER;
    }
}

static bool kind_is_1d(nb_plan_kind k) {
    return k == NB_PLAN_T_NORM || k == NB_PLAN_T_Q_BIAS || k == NB_PLAN_T_K_BIAS || k == NB_PLAN_T_V_BIAS ||
           k == NB_PLAN_T_O_BIAS;
}

static bool kind_is_linear(nb_plan_kind k) {
    switch (k) {
    case NB_PLAN_T_Q: case NB_PLAN_T_K: case NB_PLAN_T_V: case NB_PLAN_T_O: case NB_PLAN_T_MLA_A:
    case NB_PLAN_T_MLA_B: case NB_PLAN_T_GATE: case NB_PLAN_T_UP: case NB_PLAN_T_DOWN: case NB_PLAN_T_EXP_GATE:
    case NB_PLAN_T_EXP_UP: case NB_PLAN_T_EXP_DOWN: case NB_PLAN_T_SHEXP_GATE: case NB_PLAN_T_SHEXP_UP:
    case NB_PLAN_T_SHEXP_DOWN:
        return true;
    default: return false;
    }
}

/* ---- GGUF recipe ----------------------------------------------------------- */

static bool is_float_type(nb_dtype t) { return t == NB_F16 || t == NB_BF16 || t == NB_F32; }

static nb_dtype gguf_fallback(nb_dtype t, int64_t n_in) {
    const nb_dtype_info *i = nb_dtype_get(t);
    if (i && n_in % i->block == 0) return t;
    nb_dtype f;
    switch (t) {
    case NB_Q2_K: case NB_Q3_K: case NB_IQ4_XS: f = NB_IQ4_NL; break;
    case NB_Q4_K: f = NB_Q5_0; break;
    case NB_Q5_K: f = NB_Q5_1; break;
    case NB_Q6_K: f = NB_Q8_0; break;
    default: f = NB_F16; break;
    }
    const nb_dtype_info *fi = nb_dtype_get(f);
    return (fi && n_in % fi->block == 0) ? f : NB_F16;
}

/* llama.cpp's 70B type, by the architecture table (formats/arch.c). */
static bool arch_l80_is_70b(const char *arch) {
    const nb_arch_info *r = nb_arch_find_gguf(arch);
    if (!r) r = nb_arch_find_hf(arch);
    return r && r->l80_is_70b;
}

nb_dtype nb_plan_gguf_type(const nb_plan_scheme *s, const nb_plan_model *m, nb_plan_kind kind, int64_t layer,
                           int64_t n_in) {
    if (kind_is_1d(kind) || kind == NB_PLAN_T_ROUTER || kind == NB_PLAN_T_SHEXP_ROUTER) return NB_F32;
    nb_dtype base = s->gguf_base;
    if (is_float_type(base)) return base;
    nb_rtn_where w = {.i = layer, .n = m->n_layer, .row_len = n_in, .n_expert = (int)m->n_expert,
                      .n_gqa = m->n_head_kv > 0 ? (int)(m->n_head / m->n_head_kv) : 0,
                      .is_70b = m->n_layer == 80 && arch_l80_is_70b(m->arch)};
    nb_rtn_role role = NB_RTN_ROLE_OTHER;
    switch (kind) {
    case NB_PLAN_T_LM_HEAD: role = NB_RTN_ROLE_OUTPUT; break;
    case NB_PLAN_T_EMBED: role = m->tied ? NB_RTN_ROLE_OUTPUT : NB_RTN_ROLE_OTHER; break;
    case NB_PLAN_T_V: role = NB_RTN_ROLE_ATTN_V; break;
    case NB_PLAN_T_K: role = NB_RTN_ROLE_ATTN_K; break;
    case NB_PLAN_T_O: role = NB_RTN_ROLE_ATTN_OUTPUT; break;
    case NB_PLAN_T_DOWN: case NB_PLAN_T_EXP_DOWN: case NB_PLAN_T_SHEXP_DOWN: role = NB_RTN_ROLE_FFN_DOWN; break;
    default: break;
    }
    nb_dtype t = nb_rtn_recipe_type(s->gguf_mix, base, role, &w, NULL, 0);
    if (role == NB_RTN_ROLE_OUTPUT) return t; /* llama.cpp gives the output tensor no fallback pass of its own */
    return gguf_fallback(t, n_in);
}

/* ---- tensor expansion --------------------------------------------------------- */

typedef struct {
    const nb_plan_config *c;
    nb_plan_result *r;
    int64_t kv_card_heads; /* KV heads per card */
    nb_status st;
} acc_ctx;

static uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : 0; }

/* Bytes on each card of a tensor of `bytes` in all. */
static uint64_t card_share(const acc_ctx *a, nb_plan_kind k, uint64_t bytes) {
    const nb_plan_config *c = a->c;
    uint64_t tp = (uint64_t)c->tp;
    if (tp <= 1) return bytes;
    switch (k) {
    case NB_PLAN_T_NORM: case NB_PLAN_T_O_BIAS: case NB_PLAN_T_ROUTER: case NB_PLAN_T_SHEXP_ROUTER:
    case NB_PLAN_T_MLA_A: case NB_PLAN_T_OTHER:
        return bytes;
    case NB_PLAN_T_K: case NB_PLAN_T_V: case NB_PLAN_T_K_BIAS: case NB_PLAN_T_V_BIAS:
        if (c->model.kv_lora_rank > 0 || c->model.n_head_kv <= 0) return ceil_div(bytes, tp);
        return ceil_div(bytes * (uint64_t)a->kv_card_heads, (uint64_t)c->model.n_head_kv);
    default: return ceil_div(bytes, tp);
    }
}

static void account_tensor(acc_ctx *a, nb_plan_kind kind, uint64_t nelem, uint64_t bytes, bool quantized) {
    nb_plan_result *r = a->r;
    nb_plan_group g = nb_plan_kind_group(kind);
    uint64_t card = card_share(a, kind, bytes);
    r->groups[g].params += nelem;
    r->groups[g].bytes += bytes;
    r->groups[g].bytes_card += card;
    if (quantized) r->groups[g].quantized += nelem;
    r->params += nelem;
    r->weight_bytes += bytes;
    r->weight_bytes_card += card;
    if (card == bytes && a->c->tp > 1) r->replicated_bytes_card += card;
}

static bool scheme_quantizes(const nb_plan_scheme *s, nb_plan_kind k) {
    if (kind_is_1d(k)) return false;
    if (kind_is_linear(k)) return true;
    if (k == NB_PLAN_T_EMBED) return !s->keep_embed;
    if (k == NB_PLAN_T_LM_HEAD) return !s->keep_lm_head;
    if (k == NB_PLAN_T_ROUTER || k == NB_PLAN_T_SHEXP_ROUTER) return !s->keep_router;
    return false;
}

/* One weight tensor: n_mat matrices of n_out rows × n_in columns (1-D: n_out = 1). */
static void emit(acc_ctx *a, nb_plan_kind kind, int64_t layer, int64_t n_in, int64_t n_out, int64_t n_mat) {
    if (a->st != NB_OK) return;
    const nb_plan_scheme *s = &a->c->scheme;
    uint64_t rows = (uint64_t)n_out * (uint64_t)n_mat, nelem = rows * (uint64_t)n_in;
    uint64_t bytes = 0;
    bool q = false;
    if (s->fmt == NB_PLAN_W_GGUF) {
        nb_dtype t = nb_plan_gguf_type(s, &a->c->model, kind, layer, n_in);
        uint64_t rb;
        if (!nb_dtype_row_bytes(t, (uint64_t)n_in, &rb)) {
            a->st = nb_fail(NB_ERR_INVALID, "plan: tensor of kind %d has rows of %lld elements, not a multiple of "
                            "the %s block", (int)kind, (long long)n_in, nb_dtype_name(t));
            return;
        }
        bytes = rb * rows;
        q = !is_float_type(t) && t != NB_F32;
    } else if (s->fmt == NB_PLAN_W_FLOAT || !scheme_quantizes(s, kind)) {
        bytes = nelem * (uint64_t)s->float_bytes;
    } else {
        q = true;
        bytes = ceil_div(nelem * (uint64_t)s->bits, 8);
        if (s->fmt == NB_PLAN_W_NF4) {
            uint64_t blocks = ceil_div(nelem, 64);
            bytes += s->double_quant ? blocks + 4 * ceil_div(blocks, 256) : 4 * blocks;
        } else {
            uint64_t nscale;
            if (s->group > 0) nscale = rows * ceil_div((uint64_t)n_in, (uint64_t)s->group);
            else if (s->group == 0) nscale = rows;
            else if (s->group == -1) nscale = (uint64_t)n_mat;
            else nscale = (uint64_t)n_mat * ceil_div((uint64_t)n_out, 128) * ceil_div((uint64_t)n_in, 128);
            bytes += nscale * (uint64_t)s->scale_bytes + ceil_div(nscale * (uint64_t)s->zero_bits, 8);
            if (s->g_idx) bytes += 4 * (uint64_t)n_in * (uint64_t)n_mat;
        }
    }
    account_tensor(a, kind, nelem, bytes, q);
}

static void expand_model(acc_ctx *a) {
    const nb_plan_model *m = &a->c->model;
    int64_t H = m->n_embd, hd = m->head_dim, vhd = m->v_head_dim ? m->v_head_dim : m->head_dim;
    emit(a, NB_PLAN_T_EMBED, -1, H, m->n_vocab, 1);
    for (int64_t l = 0; l < m->n_layer; l++) {
        for (int i = 0; i < m->norms_per_layer; i++) emit(a, NB_PLAN_T_NORM, l, H, 1, 1);
        if (m->kv_lora_rank > 0) {
            int64_t qk = m->qk_nope_dim + m->qk_rope_dim;
            if (m->q_lora_rank > 0) {
                emit(a, NB_PLAN_T_MLA_A, l, H, m->q_lora_rank, 1);
                emit(a, NB_PLAN_T_NORM, l, m->q_lora_rank, 1, 1);
                emit(a, NB_PLAN_T_MLA_B, l, m->q_lora_rank, m->n_head * qk, 1);
            } else {
                emit(a, NB_PLAN_T_Q, l, H, m->n_head * qk, 1);
            }
            emit(a, NB_PLAN_T_MLA_A, l, H, m->kv_lora_rank + m->qk_rope_dim, 1);
            emit(a, NB_PLAN_T_NORM, l, m->kv_lora_rank, 1, 1);
            emit(a, NB_PLAN_T_MLA_B, l, m->kv_lora_rank, m->n_head * (m->qk_nope_dim + vhd), 1);
            emit(a, NB_PLAN_T_O, l, m->n_head * vhd, H, 1);
        } else {
            emit(a, NB_PLAN_T_Q, l, H, m->n_head * hd, 1);
            emit(a, NB_PLAN_T_K, l, H, m->n_head_kv * hd, 1);
            emit(a, NB_PLAN_T_V, l, H, m->n_head_kv * vhd, 1);
            if (m->qkv_bias) {
                emit(a, NB_PLAN_T_Q_BIAS, l, m->n_head * hd, 1, 1);
                emit(a, NB_PLAN_T_K_BIAS, l, m->n_head_kv * hd, 1, 1);
                emit(a, NB_PLAN_T_V_BIAS, l, m->n_head_kv * vhd, 1, 1);
            }
            if (m->qk_norm) {
                emit(a, NB_PLAN_T_NORM, l, hd, 1, 1);
                emit(a, NB_PLAN_T_NORM, l, hd, 1, 1);
            }
            emit(a, NB_PLAN_T_O, l, m->n_head * vhd, H, 1);
        }
        if (m->n_expert > 0 && l >= m->n_dense_layers) {
            emit(a, NB_PLAN_T_ROUTER, l, H, m->n_expert, 1);
            emit(a, NB_PLAN_T_EXP_GATE, l, H, m->n_ff_expert, m->n_expert);
            emit(a, NB_PLAN_T_EXP_UP, l, H, m->n_ff_expert, m->n_expert);
            emit(a, NB_PLAN_T_EXP_DOWN, l, m->n_ff_expert, H, m->n_expert);
            if (m->n_ff_shared > 0) {
                emit(a, NB_PLAN_T_SHEXP_GATE, l, H, m->n_ff_shared, 1);
                emit(a, NB_PLAN_T_SHEXP_UP, l, H, m->n_ff_shared, 1);
                emit(a, NB_PLAN_T_SHEXP_DOWN, l, m->n_ff_shared, H, 1);
            }
        } else {
            emit(a, NB_PLAN_T_GATE, l, H, m->n_ff, 1);
            emit(a, NB_PLAN_T_UP, l, H, m->n_ff, 1);
            emit(a, NB_PLAN_T_DOWN, l, m->n_ff, H, 1);
        }
    }
    emit(a, NB_PLAN_T_NORM, -1, H, 1, 1);
    if (!m->tied) emit(a, NB_PLAN_T_LM_HEAD, -1, H, m->n_vocab, 1);
}

static nb_status check_model(const nb_plan_model *m) {
    struct { const char *name; int64_t v; } need[] = {
        {"vocab_size", m->n_vocab}, {"hidden_size", m->n_embd}, {"num_hidden_layers", m->n_layer},
        {"num_attention_heads", m->n_head},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v <= 0 || need[i].v > ((int64_t)1 << 32))
            return nb_fail(NB_ERR_RANGE, "model %s: %s = %lld, allowed 1..2^32", m->name, need[i].name,
                           (long long)need[i].v);
    if (m->kv_lora_rank > 0) {
        if (m->qk_rope_dim <= 0 || m->qk_nope_dim <= 0 || m->v_head_dim <= 0)
            return nb_fail(NB_ERR_RANGE, "model %s: MLA needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim > 0",
                           m->name);
    } else {
        if (m->head_dim <= 0 || m->head_dim > 65536)
            return nb_fail(NB_ERR_RANGE, "model %s: head_dim = %lld, allowed 1..65536", m->name, (long long)m->head_dim);
        if (m->n_head_kv <= 0 || m->n_head_kv > m->n_head || m->n_head % m->n_head_kv)
            return nb_fail(NB_ERR_RANGE, "model %s: num_key_value_heads = %lld must divide num_attention_heads = %lld",
                           m->name, (long long)m->n_head_kv, (long long)m->n_head);
    }
    if (m->n_expert > 0 ? m->n_ff_expert <= 0 : m->n_ff <= 0)
        return nb_fail(NB_ERR_RANGE, "model %s: %s must be > 0", m->name,
                       m->n_expert > 0 ? "moe_intermediate_size" : "intermediate_size");
    if (m->n_expert > 0 && m->n_dense_layers > 0 && m->n_ff <= 0)
        return nb_fail(NB_ERR_RANGE, "model %s: intermediate_size must be > 0 for the dense layers", m->name);
    if (m->n_expert < 0 || m->n_expert > 4096)
        return nb_fail(NB_ERR_RANGE, "model %s: num_experts = %lld, allowed 0..4096", m->name, (long long)m->n_expert);
    if (m->norms_per_layer < 0 || m->norms_per_layer > 8)
        return nb_fail(NB_ERR_RANGE, "model %s: norms per layer = %d, allowed 0..8", m->name, m->norms_per_layer);
    return NB_OK;
}

static int64_t kv_heads_card(const nb_plan_config *c) {
    int64_t nkv = c->model.n_head_kv, tp = c->tp;
    if (c->model.kv_lora_rank > 0) return 1;
    return nkv >= tp ? nkv / tp : 1;
}

static nb_status check_parallel(const nb_plan_config *c) {
    const nb_plan_model *m = &c->model;
    if (c->tp < 1 || c->tp > NB_PLAN_MAX_CARDS)
        return nb_fail(NB_ERR_RANGE, "--tp %d: allowed 1..%d", c->tp, NB_PLAN_MAX_CARDS);
    if (c->gpus < c->tp || c->gpus > NB_PLAN_MAX_CARDS || c->gpus % c->tp)
        return nb_fail(NB_ERR_RANGE, "--gpus %d: must be a multiple of --tp %d (data-parallel replicas), at most %d",
                       c->gpus, c->tp, NB_PLAN_MAX_CARDS);
    if (c->tp > 1) {
        if (m->n_head % c->tp)
            return nb_fail(NB_ERR_RANGE, "--tp %d does not divide the %lld attention heads of %s", c->tp,
                           (long long)m->n_head, m->name);
        if (m->kv_lora_rank == 0 && m->n_head_kv % c->tp && c->tp % m->n_head_kv)
            return nb_fail(NB_ERR_RANGE, "--tp %d and the %lld KV heads of %s: one must divide the other", c->tp,
                           (long long)m->n_head_kv, m->name);
    }
    return NB_OK;
}

uint64_t nb_plan_model_params(const nb_plan_model *m) {
    nb_plan_config c;
    nb_plan_config_init(&c);
    c.model = *m;
    nb_plan_result r;
    if (nb_plan_weights(&c, &r) != NB_OK) return 0;
    return r.params;
}

nb_status nb_plan_weights(const nb_plan_config *c, nb_plan_result *r) {
    memset(r->groups, 0, sizeof r->groups);
    r->params = r->params_active = r->weight_bytes = r->weight_bytes_card = r->replicated_bytes_card = 0;
    NB_TRY(check_model(&c->model));
    acc_ctx a = {.c = c, .r = r, .kv_card_heads = kv_heads_card(c), .st = NB_OK};
    if (c->tensors) {
        for (int64_t i = 0; i < c->n_tensors; i++) {
            const nb_plan_tensor *t = &c->tensors[i];
            account_tensor(&a, t->kind, t->nelem, t->nbytes, t->nelem && t->nbytes * 8 < t->nelem * 16 &&
                           !kind_is_1d(t->kind));
        }
        r->weights_exact = true;
    } else {
        expand_model(&a);
        NB_TRY(a.st);
        r->weights_exact = false;
    }
    const nb_plan_model *m = &c->model;
    uint64_t exp = r->groups[NB_PLAN_G_EXPERTS].params;
    r->params_active = r->params;
    if (m->n_expert > 0 && m->n_expert_used > 0 && m->n_expert_used < m->n_expert)
        r->params_active = r->params - exp + exp / (uint64_t)m->n_expert * (uint64_t)m->n_expert_used;
    r->bits_per_weight = r->params ? (double)r->weight_bytes * 8.0 / (double)r->params : 0;
    return NB_OK;
}

nb_status nb_plan_kv_bytes(const nb_plan_config *c, uint64_t *per_token, uint64_t *per_token_card,
                           int64_t *heads_card) {
    const nb_plan_model *m = &c->model;
    uint64_t rows[2] = {0, 0}; /* elements per layer: K and V (MLA: the latent in rows[0]) */
    uint64_t rows_card[2] = {0, 0};
    int64_t hc = kv_heads_card(c);
    int64_t vhd = m->v_head_dim ? m->v_head_dim : m->head_dim;
    if (m->kv_lora_rank > 0) {
        rows[0] = rows_card[0] = (uint64_t)(m->kv_lora_rank + m->qk_rope_dim);
    } else {
        rows[0] = (uint64_t)(m->n_head_kv * m->head_dim);
        rows[1] = (uint64_t)(m->n_head_kv * vhd);
        rows_card[0] = (uint64_t)(hc * m->head_dim);
        rows_card[1] = (uint64_t)(hc * vhd);
    }
    uint64_t tot = 0, card = 0;
    for (int i = 0; i < 2; i++) {
        uint64_t b, bc;
        if (!rows[i]) continue;
        if (c->kv.fp8) {
            b = rows[i];
            bc = rows_card[i];
        } else if (!nb_dtype_row_bytes(c->kv.type, rows[i], &b) || !nb_dtype_row_bytes(c->kv.type, rows_card[i], &bc)) {
            return nb_fail(NB_ERR_INVALID, "--kv-dtype %s: a KV row of %llu elements per card is not a multiple of "
                           "its block of %u", c->kv.name, (unsigned long long)rows_card[i],
                           nb_dtype_get(c->kv.type) ? nb_dtype_get(c->kv.type)->block : 0);
        }
        tot += b;
        card += bc;
    }
    *per_token = tot * (uint64_t)m->n_layer;
    *per_token_card = card * (uint64_t)m->n_layer;
    if (heads_card) *heads_card = hc;
    return NB_OK;
}

/* ---- ① ③ and the verdicts --------------------------------------------------------- */

static void verdict(nb_plan_result *r, nb_plan_level lv, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void verdict(nb_plan_result *r, nb_plan_level lv, const char *code, const char *fmt, ...) {
    if (r->n_verdicts >= NB_PLAN_MAX_VERDICTS) return;
    nb_plan_verdict *v = &r->verdicts[r->n_verdicts++];
    v->level = lv;
    snprintf(v->code, sizeof v->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->text, sizeof v->text, fmt, ap);
    va_end(ap);
    if (lv == NB_PLAN_REFUSE) r->refused = true;
}

static double gib(uint64_t b) { return (double)b / GIB; }

nb_status nb_plan_account(const nb_plan_config *c, uint64_t weights_card, uint64_t kv_token_card,
                          nb_plan_result *r) {
    if (c->capacity == 0) return nb_fail(NB_ERR_INVALID, "plan: no memory capacity (give --gpu, --gpu-mem or --host)");
    if (!(c->utilization > 0 && c->utilization <= 1))
        return nb_fail(NB_ERR_RANGE, "--memory-utilization %g: allowed (0, 1]", c->utilization);
    if (kv_token_card == 0) return nb_fail(NB_ERR_INVALID, "plan: KV bytes per token is 0");
    if (c->max_num_seqs < 1) return nb_fail(NB_ERR_RANGE, "--max-num-seqs %lld: allowed >= 1", (long long)c->max_num_seqs);
    if (c->n_lengths < 0 || c->n_lengths > NB_PLAN_MAX_LENGTHS)
        return nb_fail(NB_ERR_RANGE, "--lengths: %d lengths, allowed 0..%d", c->n_lengths, NB_PLAN_MAX_LENGTHS);
    r->weight_bytes_card = weights_card;
    r->kv_token_card = kv_token_card;
    r->capacity = c->capacity;
    r->utilization = c->utilization;
    r->overhead = c->overhead;
    r->tp = c->tp;
    r->gpus = c->gpus;
    r->replicas = c->tp > 0 ? c->gpus / c->tp : 1;
    r->budget = (uint64_t)llroundl((long double)c->capacity * (long double)c->utilization);
    long double pool = (long double)r->budget - (long double)weights_card - (long double)c->overhead;
    r->pool = pool > 9.2e18L ? INT64_MAX : pool < -9.2e18L ? INT64_MIN : (int64_t)pool;
    r->kv_tokens = r->pool > 0 ? (uint64_t)r->pool / kv_token_card : 0;
    if (c->block_size > 1) /* engines hand out whole blocks */
        r->kv_tokens = r->kv_tokens / (uint64_t)c->block_size * (uint64_t)c->block_size;
    r->weights_frac = (double)weights_card / (double)c->capacity;
    r->max_model_len = c->max_model_len > 0 ? c->max_model_len : c->model.n_ctx_train;
    if (r->max_model_len <= 0) { /* no context length known: the longest length asked about */
        r->max_model_len = 0;
        for (int i = 0; i < c->n_lengths; i++) r->max_model_len = NB_MAX(r->max_model_len, c->lengths[i]);
    }
    r->max_num_seqs = c->max_num_seqs;
    r->n_lengths = c->n_lengths;
    for (int i = 0; i < c->n_lengths; i++) {
        if (c->lengths[i] <= 0) return nb_fail(NB_ERR_RANGE, "--lengths: %lld is not a positive length", (long long)c->lengths[i]);
        r->lengths[i] = c->lengths[i];
        r->concurrency[i] = (int64_t)(r->kv_tokens / (uint64_t)c->lengths[i]);
    }
    r->refused = false;
    r->n_verdicts = 0;

    /* pool and max_model_len */
    if (r->pool <= 0) {
        verdict(r, NB_PLAN_REFUSE, "no_kv_pool",
                "weights %.2f GiB + overhead %.2f GiB per card exceed the budget of %.2f GiB (%.2f x %.2f GiB): "
                "nothing is left for the KV cache",
                gib(weights_card), gib(c->overhead), gib(r->budget), c->utilization, gib(c->capacity));
    } else if (r->max_model_len > 0 && r->kv_tokens < (uint64_t)r->max_model_len) {
        verdict(r, NB_PLAN_REFUSE, "max_len_refused",
                "the KV pool of %.2f GiB holds %llu tokens, fewer than one sequence of max_model_len %lld "
                "(needs %.2f GiB at %.1f KiB/token)",
                gib((uint64_t)r->pool), (unsigned long long)r->kv_tokens, (long long)r->max_model_len,
                gib((uint64_t)r->max_model_len * kv_token_card), (double)kv_token_card / 1024.0);
    }
    /* weights share of the card */
    if (r->weights_frac > 0.75) {
        verdict(r, NB_PLAN_WARN, "weights_over_75pct",
                "weights take %.2f GiB per card, %.0f%% of the card's %.2f GiB (rule: > 75%%): the rest must hold the "
                "KV cache, activations and the CUDA context; quantize or add cards",
                gib(weights_card), 100.0 * r->weights_frac, gib(c->capacity));
    }
    /* max_num_seqs x max_model_len against the pool */
    if (!r->refused && r->max_model_len > 0) {
        long double need = (long double)r->max_model_len * (long double)c->max_num_seqs;
        if (need > (long double)r->kv_tokens) {
            char fits[256];
            size_t o = (size_t)snprintf(fits, sizeof fits, "%llu at max_model_len %lld",
                                        (unsigned long long)(r->kv_tokens / (uint64_t)r->max_model_len),
                                        (long long)r->max_model_len);
            for (int i = 0; i < r->n_lengths && o < sizeof fits; i++)
                o += (size_t)snprintf(fits + o, sizeof fits - o, ", %lld at %lld",
                                      (long long)r->concurrency[i], (long long)r->lengths[i]);
            verdict(r, NB_PLAN_WARN, "seqs_over_pool",
                    "max_num_seqs %lld x max_model_len %lld = %.0Lf tokens > the %llu the pool holds; "
                    "max_num_seqs that fits: %s (more sequences wait or get preempted)",
                    (long long)c->max_num_seqs, (long long)r->max_model_len, need,
                    (unsigned long long)r->kv_tokens, fits);
        }
    }
    /* FP8 without a native path */
    if (c->scheme.fp8 && c->fp8_native == 0) {
        verdict(r, NB_PLAN_WARN, "fp8_not_native",
                "%s has no native FP8 path%s: fp8 weights run through weight-only dequantizing kernels (no FP8 "
                "tensor-core speedup) or not at all; prefer int8 / AWQ / GPTQ here",
                c->device, c->host ? " (CPU)" : "");
    }
    if (c->kv.fp8 && c->fp8_native == 0) {
        verdict(r, NB_PLAN_INFO, "fp8_kv_storage",
                "%s has no native FP8: the fp8 KV cache saves memory but is converted on every read", c->device);
    }
    if (c->scheme.fmt == NB_PLAN_W_INT && c->scheme.bits == 4 && c->compute_cap > 0 && c->compute_cap < 7.5) {
        verdict(r, NB_PLAN_WARN, "int4_kernels",
                "%s (compute capability %.1f) lacks the AWQ / Marlin INT4 kernels of common engines (they need 7.5 / "
                "8.0): check support before downloading", c->device, c->compute_cap);
    }
    /* short and long pools */
    if (r->kv_tokens > 0 && r->n_lengths >= 2) {
        int lo = 0, hi = 0;
        for (int i = 1; i < r->n_lengths; i++) {
            if (r->lengths[i] < r->lengths[lo]) lo = i;
            if (r->lengths[i] > r->lengths[hi]) hi = i;
        }
        if (r->lengths[hi] >= 8 * r->lengths[lo]) {
            int64_t short_len = r->lengths[lo];
            for (int i = 0; i < r->n_lengths; i++)
                if (r->lengths[i] < r->lengths[hi] && r->lengths[i] > short_len) short_len = r->lengths[i];
            verdict(r, NB_PLAN_INFO, "split_pools",
                    "lengths span %lld..%lld (%.0fx): the same pool runs %lld sequences at %lld but %lld at %lld; "
                    "serve short requests from one pool (max_model_len %lld, max_num_seqs %lld) and long ones from "
                    "a separate pool (max_model_len %lld, max_num_seqs %lld)",
                    (long long)r->lengths[lo], (long long)r->lengths[hi],
                    (double)r->lengths[hi] / (double)r->lengths[lo], (long long)r->concurrency[lo],
                    (long long)r->lengths[lo], (long long)r->concurrency[hi], (long long)r->lengths[hi],
                    (long long)short_len, (long long)r->concurrency[lo], (long long)r->lengths[hi],
                    (long long)NB_MAX(r->concurrency[hi], 1));
        }
    }
    if (c->model.kv_lora_rank > 0)
        verdict(r, NB_PLAN_INFO, "mla",
                "MLA: the KV cache holds the compressed latent (kv_lora_rank %lld + rope %lld per layer), the same on "
                "every card under tensor parallelism",
                (long long)c->model.kv_lora_rank, (long long)c->model.qk_rope_dim);
    if (c->model.sliding_window > 0)
        verdict(r, NB_PLAN_INFO, "sliding_window",
                "sliding window %lld on %s layers: counted in full here (an upper bound; an engine that caps "
                "windowed layers holds more tokens)",
                (long long)c->model.sliding_window, c->model.sliding_alternate ? "every other" : "all");
    if (c->tp > 1 && c->model.kv_lora_rank == 0 && c->model.n_head_kv < c->tp)
        verdict(r, NB_PLAN_INFO, "kv_heads_duplicated",
                "--tp %d exceeds the %lld KV heads: each card holds a copy of one KV head (K/V weights and cache "
                "duplicated %lldx)",
                c->tp, (long long)c->model.n_head_kv, (long long)(c->tp / c->model.n_head_kv));
    if (c->engine == NB_PLAN_ENGINE_FIXED)
        verdict(r, NB_PLAN_INFO, "overhead_estimate",
                "the fixed overhead of %.2f GiB per card (CUDA context, activation peak, communication buffers) is an "
                "estimate: replace it with a measurement (--overhead, or --engine and --calibrate LOG)",
                gib(c->overhead));
    else
        verdict(r, NB_PLAN_INFO, "overhead_model",
                "overhead %.2f GiB per card modelled on %s's startup profiling%s (terms under ③)", gib(c->overhead),
                nb_plan_engine_name(c->engine), c->calib ? ", calibrated from a startup log" : "");
    return NB_OK;
}

/* SGLang's default mem_fraction_static by tensor-parallel size (its
 * server_args.py, 0.4 series): the share of the card for weights + KV. */
static double sglang_default_fraction(int tp) {
    return tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
}

nb_status nb_plan_compute(const nb_plan_config *c, nb_plan_result *r) {
    memset(r, 0, sizeof *r);
    NB_TRY(check_parallel(c));
    NB_TRY(nb_plan_weights(c, r));
    NB_TRY(nb_plan_kv_bytes(c, &r->kv_token, &r->kv_token_card, &r->kv_heads_card));
    NB_TRY(nb_plan_overhead_compute(c, &r->ovh));
    nb_plan_config cc = *c;
    cc.overhead = r->ovh.total;
    cc.block_size = r->ovh.block_size;
    if (c->engine == NB_PLAN_ENGINE_SGLANG)
        cc.utilization = c->mem_fraction_static > 0 ? c->mem_fraction_static : sglang_default_fraction(c->tp);
    return nb_plan_account(&cc, r->weight_bytes_card, r->kv_token_card, r);
}

int nb_plan_refusal_message(const nb_plan_result *r, char *buf, size_t n) {
    if (!r->refused) {
        if (n) buf[0] = 0;
        return 0;
    }
    if (r->pool <= 0)
        return snprintf(buf, n,
                        "weights (%.2f GiB per card) + overhead (%.2f GiB) exceed the memory budget (%.2f GiB = %.2f x "
                        "%.2f GiB), so no KV cache fits; quantize weights, add cards (--tp) or raise "
                        "--memory-utilization",
                        gib(r->weight_bytes_card), gib(r->overhead), gib(r->budget), r->utilization, gib(r->capacity));
    if (r->ovh.engine == NB_PLAN_ENGINE_VLLM_V0 || r->ovh.engine == NB_PLAN_ENGINE_VLLM_V1)
        return snprintf(buf, n,
                        "The model's max seq len (%lld) is larger than the maximum number of tokens that can be stored "
                        "in KV cache (%llu). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                        "initializing the engine. (vLLM's words: at most %llu fits)",
                        (long long)r->max_model_len, (unsigned long long)r->kv_tokens, (unsigned long long)r->kv_tokens);
    return snprintf(buf, n,
                    "max model len %lld is larger than the maximum number of tokens that can be stored in KV cache "
                    "(%llu); lower --max-model-len (at most %llu fits), raise --memory-utilization, quantize weights "
                    "or KV",
                    (long long)r->max_model_len, (unsigned long long)r->kv_tokens, (unsigned long long)r->kv_tokens);
}
