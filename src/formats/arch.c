/* The per-architecture table, its lookups, the model description's checks
 * and its GGUF reader (see arch.h). */
#include "formats/arch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The llama layer layout (llama, mistral, qwen2 and the planning-only rows
 * alike): GGUF suffix after "blk.N.", HF suffix after "model.layers.N.". */
static const nb_arch_tensor llama_layer[] = {
    {"attn_norm.weight", "input_layernorm.weight", NB_ROLE_NORM},
    {"attn_q.weight", "self_attn.q_proj.weight", NB_ROLE_Q},
    {"attn_k.weight", "self_attn.k_proj.weight", NB_ROLE_KV},
    {"attn_v.weight", "self_attn.v_proj.weight", NB_ROLE_KV},
    {"attn_q.bias", "self_attn.q_proj.bias", NB_ROLE_Q_BIAS},
    {"attn_k.bias", "self_attn.k_proj.bias", NB_ROLE_KV_BIAS},
    {"attn_v.bias", "self_attn.v_proj.bias", NB_ROLE_KV_BIAS},
    {"attn_output.weight", "self_attn.o_proj.weight", NB_ROLE_O},
    {"ffn_norm.weight", "post_attention_layernorm.weight", NB_ROLE_NORM},
    {"ffn_gate.weight", "mlp.gate_proj.weight", NB_ROLE_FFN_IN},
    {"ffn_up.weight", "mlp.up_proj.weight", NB_ROLE_FFN_IN},
    {"ffn_down.weight", "mlp.down_proj.weight", NB_ROLE_FFN_OUT},
};

static const nb_arch_tensor model_tensors[] = {
    {"token_embd.weight", "model.embed_tokens.weight", NB_ROLE_EMBED},
    {"output_norm.weight", "model.norm.weight", NB_ROLE_OUT_NORM},
    {"output.weight", "lm_head.weight", NB_ROLE_OUTPUT},
};

/* Context defaults are transformers' config defaults (LlamaConfig 2048,
 * MistralConfig 4096*32, Qwen2Config 32768). The rows below the first three
 * are described for the planner only (runs = NB_ARCH_NONE): their flags
 * size their tensors (qk norms, per-layer norm count, biases, tying). */
#define ROW(gg, hf, cls, pre, runs, rope, bias, qkn, tied, norms, swa, alt, ctx) \
    {gg, hf, cls, pre, runs, NB_NORM_RMS, rope, bias, qkn, tied, norms, swa, alt, ctx, false, NULL, 0}
static const nb_arch_info table[] = {
    {"llama", "llama", "LlamaForCausalLM", false, NB_ARCH_LLAMA, NB_NORM_RMS, NB_ROPE_NORM, false, false, false, 2, NB_SWA_NONE,
     false, 2048, true, NULL, 0},
    ROW("mistral", "mistral", "MistralForCausalLM", false, NB_ARCH_LLAMA, NB_ROPE_NORM, false, false, false, 2, NB_SWA_ALWAYS, false, 131072),
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false, NB_ARCH_QWEN2, NB_NORM_RMS, NB_ROPE_NEOX, true, false, false, 2, NB_SWA_FLAG,
     false, 32768, true, NULL, 0},
    ROW("qwen2moe", "qwen2_moe", NULL, false, NB_ARCH_NONE, NB_ROPE_NEOX, true, false, false, 2, NB_SWA_FLAG, false, 0),
    ROW("qwen3", "qwen3", NULL, true, NB_ARCH_NONE, NB_ROPE_NEOX, false, true, false, 2, NB_SWA_FLAG, false, 0),
    ROW("qwen3moe", "qwen3_moe", NULL, false, NB_ARCH_NONE, NB_ROPE_NEOX, false, true, false, 2, NB_SWA_FLAG, false, 0),
    ROW(NULL, "mixtral", NULL, false, NB_ARCH_NONE, NB_ROPE_NORM, false, false, false, 2, NB_SWA_ALWAYS, false, 0),
    ROW("gemma", "gemma", NULL, true, NB_ARCH_NONE, NB_ROPE_NORM, false, false, true, 2, NB_SWA_ALWAYS, false, 0),
    ROW("gemma2", "gemma2", NULL, true, NB_ARCH_NONE, NB_ROPE_NORM, false, false, true, 4, NB_SWA_ALWAYS, true, 0),
    ROW("gemma3", "gemma3", NULL, true, NB_ARCH_NONE, NB_ROPE_NORM, false, false, true, 4, NB_SWA_ALWAYS, false, 0),
    ROW("deepseek2", "deepseek_v2", NULL, false, NB_ARCH_NONE, NB_ROPE_NORM, false, false, false, 2, NB_SWA_ALWAYS, false, 0),
    ROW(NULL, "deepseek_v3", NULL, false, NB_ARCH_NONE, NB_ROPE_NORM, false, false, false, 2, NB_SWA_ALWAYS, false, 0),
};
#undef ROW
#define N_ROWS ((int)(sizeof table / sizeof table[0]))

const nb_arch_info *nb_arch_table(int *n) {
    *n = N_ROWS;
    return table;
}

static const nb_arch_info *find(const char *name, bool hf) {
    if (!name) return NULL;
    const nb_arch_info *best = NULL;
    size_t best_len = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const char *k = hf ? table[i].hf : table[i].gguf;
        if (!k) continue;
        if (!strcmp(k, name)) return &table[i];
        size_t l = strlen(k);
        if (table[i].prefix && l > best_len && !strncmp(name, k, l)) {
            best = &table[i];
            best_len = l;
        }
    }
    return best;
}

const nb_arch_info *nb_arch_find_gguf(const char *name) { return find(name, false); }
const nb_arch_info *nb_arch_find_hf(const char *name) { return find(name, true); }

const nb_arch_info *nb_arch_info_of(nb_arch a) {
    for (int i = 0; i < N_ROWS; i++)
        if (table[i].runs == a && a != NB_ARCH_NONE) return &table[i];
    return NULL;
}

static char supported_names[2][160];

static void supported_init(void) {
    for (int hf = 0; hf < 2; hf++) {
        char *s = supported_names[hf];
        size_t k = 0;
        for (int i = 0; i < N_ROWS; i++) {
            const char *n = hf ? table[i].hf : table[i].gguf;
            if (table[i].runs == NB_ARCH_NONE || !n) continue;
            k += (size_t)snprintf(s + k, sizeof supported_names[0] - k, "%s%s", k ? ", " : "", n);
        }
    }
}

static const char *supported(bool hf) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, supported_init);
    return supported_names[hf];
}

const char *nb_arch_supported_gguf(void) { return supported(false); }
const char *nb_arch_supported_hf(void) { return supported(true); }

const char *nb_arch_gguf_name(const nb_arch_desc *d) {
    if (d->info && d->info->gguf) return d->info->gguf;
    const nb_arch_info *r = nb_arch_info_of(d->arch);
    return r ? r->gguf : "llama";
}

const nb_arch_tensor *nb_arch_layer_tensors(const nb_arch_info *info, int *n) {
    if (info && info->layer_tensors) {
        *n = info->n_layer_tensors;
        return info->layer_tensors;
    }
    *n = (int)(sizeof llama_layer / sizeof llama_layer[0]);
    return llama_layer;
}

const nb_arch_tensor *nb_arch_model_tensors(int *n) {
    *n = (int)(sizeof model_tensors / sizeof model_tensors[0]);
    return model_tensors;
}

nb_status nb_arch_desc_validate(const nb_arch_desc *hp, const char *path) {
    if (hp->arch == NB_ARCH_NONE)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: architecture '%s' is described but nibble cannot run it (supported: %s)",
                       path, hp->arch_name, nb_arch_supported_gguf());
#define POS(f) if (hp->f <= 0) return nb_fail(NB_ERR_FORMAT, "%s: hyper-parameter " #f " = %d must be positive", path, (int)hp->f)
    POS(n_vocab); POS(n_embd); POS(n_layer); POS(n_head); POS(n_head_kv); POS(head_dim); POS(n_ff);
#undef POS
    if (hp->n_head % hp->n_head_kv)
        return nb_fail(NB_ERR_FORMAT, "%s: head count %d is not a multiple of the KV head count %d", path, hp->n_head,
                       hp->n_head_kv);
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return nb_fail(NB_ERR_FORMAT, "%s: rope dimension count %d must be even and within 2..head_dim (%d)", path,
                       hp->rope_dim, hp->head_dim);
    if (!(hp->norm_eps > 0 && hp->norm_eps < 1))
        return nb_fail(NB_ERR_FORMAT, "%s: RMSNorm epsilon %g outside (0, 1)", path, hp->norm_eps);
    if (!(hp->rope_theta > 0))
        return nb_fail(NB_ERR_FORMAT, "%s: rope theta %g must be positive", path, hp->rope_theta);
    if (hp->n_layer > 1024 || hp->n_embd > 1 << 20 || hp->n_head > 4096 || hp->head_dim > 4096 || hp->n_ff > 1 << 22)
        return nb_fail(NB_ERR_FORMAT, "%s: hyper-parameters out of any plausible range (layers %d, embd %d, heads %d, "
                       "head_dim %d, ffn %d)", path, hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim, hp->n_ff);
    return NB_OK;
}

/* ---- GGUF ---------------------------------------------------------------- */

typedef struct {
    const nb_gguf *g;
    const char *arch;
    nb_arch_desc *d;
    bool plan;
    char key[128];
} gg_ctx;

static const char *gg_key(gg_ctx *c, const char *suffix) {
    snprintf(c->key, sizeof c->key, "%s.%s", c->arch, suffix);
    return c->key;
}

/* An integer key in 0..INT32_MAX, possibly a per-layer array (its largest
 * value); `def` when absent, or an error naming the key when required. */
static nb_status gg_int(gg_ctx *c, const char *suffix, bool required, int32_t def, int32_t *out) {
    const char *key = gg_key(c, suffix);
    const nb_gguf_value *v = nb_gguf_find(c->g, key);
    int64_t x;
    if (!v) {
        if (required) /* the engine's readers have always said NOT_FOUND, the planner FORMAT */
            return nb_fail(c->plan ? NB_ERR_FORMAT : NB_ERR_NOT_FOUND, "%s: metadata key '%s' is missing",
                           nb_gguf_path(c->g), key);
        *out = def;
        return NB_OK;
    }
    if (v->type == NB_GGUF_ARRAY && v->arr) {
        x = 0;
        for (uint64_t i = 0; i < v->n; i++) {
            int64_t e;
            switch (v->arr_type) {
            case NB_GGUF_U32: e = ((const uint32_t *)v->arr)[i]; break;
            case NB_GGUF_I32: e = ((const int32_t *)v->arr)[i]; break;
            case NB_GGUF_U64: e = (int64_t)(((const uint64_t *)v->arr)[i] > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX
                                                                                                 : ((const uint64_t *)v->arr)[i]); break;
            case NB_GGUF_I64: e = ((const int64_t *)v->arr)[i]; break;
            default: return nb_fail(NB_ERR_FORMAT, "%s: key '%s' is an array of %s, expected integers",
                                    nb_gguf_path(c->g), key, nb_gguf_type_name(v->arr_type));
            }
            if (i && e != x) c->d->per_layer = true;
            x = i ? NB_MAX(x, e) : e;
        }
    } else {
        NB_TRY(nb_gguf_get_int(c->g, key, &x));
    }
    if (x < 0 || x > INT32_MAX)
        return nb_fail(NB_ERR_FORMAT, "%s: metadata key '%s' = %lld is out of range", nb_gguf_path(c->g), key,
                       (long long)x);
    *out = (int32_t)x;
    return NB_OK;
}

static nb_status gg_float(gg_ctx *c, const char *suffix, double def, float *out) {
    double v;
    NB_TRY(nb_gguf_get_float_or(c->g, gg_key(c, suffix), def, &v));
    *out = (float)v;
    return NB_OK;
}

nb_status nb_arch_desc_from_gguf(const nb_gguf *g, nb_arch_read mode, nb_arch_desc *d) {
    memset(d, 0, sizeof *d);
    const char *path = nb_gguf_path(g);
    const char *arch;
    NB_TRY(nb_gguf_get_str(g, "general.architecture", &arch));
    const nb_arch_info *info = nb_arch_find_gguf(arch);
    if (mode == NB_ARCH_RUN && (!info || info->runs == NB_ARCH_NONE))
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: general.architecture '%s' is not supported (supported: %s)", path, arch,
                       nb_arch_supported_gguf());
    bool plan = mode == NB_ARCH_PLAN;
    snprintf(d->arch_name, sizeof d->arch_name, "%s", arch ? arch : "");
    d->info = info;
    d->arch = info ? info->runs : NB_ARCH_NONE;
    d->source = NB_ARCH_SRC_GGUF;
    d->rope_style = info ? info->gguf_rope : NB_ROPE_NORM;
    gg_ctx c = {.g = g, .arch = arch, .d = d, .plan = plan};
    NB_TRY(gg_int(&c, "embedding_length", true, 0, &d->n_embd));
    NB_TRY(gg_int(&c, "block_count", true, 0, &d->n_layer));
    NB_TRY(gg_int(&c, "feed_forward_length", !plan, 0, &d->n_ff));
    NB_TRY(gg_int(&c, "attention.head_count", true, 0, &d->n_head));
    if (d->n_head <= 0)
        return nb_fail(NB_ERR_FORMAT, "%s: %s.attention.head_count must be positive", path, arch);
    NB_TRY(gg_int(&c, "attention.head_count_kv", false, d->n_head, &d->n_head_kv));
    NB_TRY(gg_int(&c, "context_length", false, plan ? 0 : 2048, &d->n_ctx_train));
    NB_TRY(gg_int(&c, "attention.key_length", false, d->n_embd / d->n_head, &d->head_dim));
    NB_TRY(gg_int(&c, "attention.value_length", false, d->head_dim, &d->v_head_dim));
    NB_TRY(gg_int(&c, "attention.sliding_window", false, 0, &d->sliding_window));
    NB_TRY(gg_int(&c, "expert_count", false, 0, &d->n_expert));
    NB_TRY(gg_int(&c, "expert_used_count", false, 0, &d->n_expert_used));
    NB_TRY(gg_int(&c, "expert_feed_forward_length", false, 0, &d->n_ff_expert));
    NB_TRY(gg_int(&c, "leading_dense_block_count", false, 0, &d->n_dense_layers));
    NB_TRY(gg_int(&c, "attention.kv_lora_rank", false, 0, &d->kv_lora_rank));
    NB_TRY(gg_int(&c, "attention.q_lora_rank", false, 0, &d->q_lora_rank));
    if (d->n_expert > 0 && d->n_ff_expert == 0) d->n_ff_expert = d->n_ff;
    if (d->kv_lora_rank > 0) {
        NB_TRY(gg_int(&c, "rope.dimension_count", false, 64, &d->qk_rope_dim));
        d->qk_nope_dim = NB_MAX(d->head_dim - d->qk_rope_dim, 1);
        if (d->v_head_dim <= 0) d->v_head_dim = 1;
    }
    if (plan) {
        /* rope and norm constants do not change the account: read when well-formed */
        double v;
        d->rope_dim = d->head_dim;
        d->norm_eps = 1e-5f;
        d->rope_theta = 10000.0f;
        const nb_gguf_value *rd = nb_gguf_find(g, gg_key(&c, "rope.dimension_count"));
        int64_t x;
        if (rd && nb_gguf_get_int(g, c.key, &x) == NB_OK && x > 0 && x <= INT32_MAX) d->rope_dim = (int32_t)x;
        if (nb_gguf_get_float_or(g, gg_key(&c, "attention.layer_norm_rms_epsilon"), 1e-5, &v) == NB_OK) d->norm_eps = (float)v;
        if (nb_gguf_get_float_or(g, gg_key(&c, "rope.freq_base"), 10000.0, &v) == NB_OK) d->rope_theta = (float)v;
    } else {
        NB_TRY(gg_int(&c, "rope.dimension_count", false, d->head_dim, &d->rope_dim));
        NB_TRY(gg_float(&c, "attention.layer_norm_rms_epsilon", 1e-5, &d->norm_eps));
        NB_TRY(gg_float(&c, "rope.freq_base", 10000.0, &d->rope_theta));
    }
    const nb_gguf_value *sc = nb_gguf_find(g, gg_key(&c, "rope.scaling.type"));
    if (sc && sc->type == NB_GGUF_STRING && strcmp(sc->str, "none") != 0) {
        if (!strcmp(sc->str, "linear")) {
            d->rope_scaling = NB_ROPE_SCALING_LINEAR;
            nb_status st = gg_float(&c, "rope.scaling.factor", 1.0, &d->rope_factor);
            if (!plan && st != NB_OK) return st;
            if (!plan && !(d->rope_factor > 0))
                return nb_fail(NB_ERR_FORMAT, "%s: %s.rope.scaling.factor must be positive", path, arch);
        } else if (plan) {
            d->rope_scaling = NB_ROPE_SCALING_OTHER;
        } else {
            return nb_fail(NB_ERR_UNSUPPORTED, "%s: %s.rope.scaling.type = '%s' is not supported (supported: none, linear; llama3 "
                           "scaling comes as the rope_freqs.weight tensor)", path, arch, sc->str);
        }
    }
    const nb_tensor *emb = nb_gguf_find_tensor(g, "token_embd.weight");
    if (!emb && !plan) return nb_fail(NB_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", path);
    int32_t nv = 0;
    NB_TRY(gg_int(&c, "vocab_size", false, 0, &nv));
    const nb_gguf_value *toks = nb_gguf_find(g, "tokenizer.ggml.tokens");
    if (!nv && plan && toks && toks->type == NB_GGUF_ARRAY) nv = (int32_t)NB_MIN(toks->n, (uint64_t)INT32_MAX);
    if (!nv && emb) nv = (int32_t)NB_MIN(emb->ne[1], INT32_MAX);
    d->n_vocab = nv;
    d->tied_embeddings = nb_gguf_find_tensor(g, "output.weight") == NULL;
    d->qkv_bias = (info && info->qkv_bias) || nb_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    d->qk_norm = nb_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    if (plan) return NB_OK;
    if (d->per_layer)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: per-layer hyper-parameters (a `%s.*` key holds an array of differing values) "
                       "are not supported", path, arch);
    return nb_arch_desc_validate(d, path);
}
