/* Inputs of the memory account from files: model presets by id, Hugging
 * Face config.json (an HF directory or the file itself), GGUF files (the
 * `<arch>.*` hyper-parameters and the exact size of every tensor), and host
 * RAM (MemTotal of /proc/meminfo) for the CPU engine.
 *
 * The model description itself comes from formats: config.json through
 * formats/hfconfig.c and GGUF metadata through formats/arch.c, both in
 * NB_ARCH_PLAN mode (any architecture; the fields and defaults are listed in
 * formats/hfconfig.h), converted here to nb_plan_model; the
 * quantization_config's hint picks the scheme. This file reads the tensor
 * sizes (GGUF tensor infos, safetensors headers) and /proc/meminfo. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/file.h"
#include "formats/arch.h"
#include "formats/gguf.h"
#include "formats/hf_quant.h"
#include "formats/hfconfig.h"
#include "plan/plan.h"

#define PLAN_CONFIG_MAX_BYTES (4u << 20)

/* ---- the model description (formats/arch.h) -> the planner's model ---------- */

static void plan_name(const char *path, nb_plan_model *m) {
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    snprintf(m->source, sizeof m->source, "%s", path);
}

void nb_plan_model_from_desc(const nb_arch_desc *d, const char *path, nb_plan_model *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->arch, sizeof m->arch, "%s", d->arch_name);
    plan_name(path, m);
    m->n_vocab = d->n_vocab;
    m->n_embd = d->n_embd;
    m->n_layer = d->n_layer;
    m->n_head = d->n_head;
    m->n_head_kv = d->n_head_kv;
    m->head_dim = d->head_dim;
    m->v_head_dim = d->v_head_dim;
    m->n_ff = d->n_ff;
    m->n_ctx_train = d->n_ctx_train;
    m->tied = d->tied_embeddings;
    m->qkv_bias = d->qkv_bias;
    m->qk_norm = d->qk_norm;
    /* a GGUF file's norms are counted from its tensors */
    m->norms_per_layer = d->source != NB_ARCH_SRC_GGUF && d->info ? d->info->norms_per_layer : 2;
    m->n_expert = d->n_expert;
    m->n_expert_used = d->n_expert_used;
    m->n_ff_expert = d->n_ff_expert;
    m->n_ff_shared = d->n_ff_shared;
    m->n_dense_layers = d->n_dense_layers;
    m->kv_lora_rank = d->kv_lora_rank;
    m->q_lora_rank = d->q_lora_rank;
    m->qk_rope_dim = d->qk_rope_dim;
    m->qk_nope_dim = d->qk_nope_dim;
    m->sliding_window = d->sliding_window;
    m->sliding_alternate = d->info && d->info->swa_alternate;
}

/* The scheme a checkpoint was stored with, from its quantization_config. */
static nb_status scheme_from_quant(const nb_hf_quant_hint *q, const char *name, nb_plan_scheme *s) {
    const char *method = q->method;
    int64_t bits = q->bits, group = q->group;
    if (!strcmp(method, "awq")) {
        NB_TRY(nb_plan_scheme_from_name("int4-awq", s));
        if (!q->zero_point) s->zero_bits = 0;
    } else if (!strcmp(method, "gptq")) {
        NB_TRY(nb_plan_scheme_from_name("int4-gptq", s));
        s->zero_bits = (int)bits;
    } else if (!strcmp(method, "fp8")) {
        return nb_plan_scheme_from_name(q->fp8_block ? "fp8-block" : "fp8-tensor", s);
    } else if (!strcmp(method, "compressed-tensors")) {
        const char *strategy = q->ct_strategy;
        if (!strcmp(q->ct_type, "float"))
            return nb_plan_scheme_from_name(!strcmp(strategy, "block") ? "fp8-block" : !strcmp(strategy, "tensor") ? "fp8-tensor" : "fp8", s);
        NB_TRY(nb_plan_scheme_from_name(bits <= 4 ? "int4-sym" : q->ct_act ? "w8a8" : "int8", s));
        if (q->zero_point) s->zero_bits = (int)bits;
        s->g_idx = false;
    } else if (!strcmp(method, "bitsandbytes")) {
        if (q->bnb_8bit) {
            NB_TRY(nb_plan_scheme_from_name("int8", s));
            s->scale_bytes = 4;
            return NB_OK;
        }
        return nb_plan_scheme_from_name(q->bnb_double ? "nf4-dq" : "nf4", s);
    } else {
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: quantization_config.quant_method '%s' is not supported (allowed: awq, "
                       "gptq, fp8, compressed-tensors, bitsandbytes)", name, method);
    }
    if (bits != 4 && bits != 8)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: quantization_config bits = %lld, allowed 4 or 8", name, (long long)bits);
    s->bits = (int)bits;
    s->group = group < 0 ? 0 : group;
    if (bits == 8) snprintf(s->name, sizeof s->name, "int8-%.26s", method);
    return NB_OK;
}

nb_status nb_plan_model_from_hf_json(const char *text, size_t len, const char *name, nb_plan_config *c) {
    nb_hf_config hc;
    NB_TRY(nb_hfconfig_parse_mode(text, len, name, NB_ARCH_PLAN, &hc));
    nb_plan_model_from_desc(&hc.hp, name, &c->model);
    nb_status st;
    if (hc.qhint.method[0]) {
        st = scheme_from_quant(&hc.qhint, name, &c->scheme);
    } else {
        const char *dt = hc.torch_dtype;
        st = nb_plan_scheme_from_name(!strcmp(dt, "float16") ? "fp16" : !strcmp(dt, "float32") ? "fp32" : "bf16", &c->scheme);
    }
    nb_hfconfig_free(&hc);
    return st;
}

/* ---- GGUF ------------------------------------------------------------------------ */

static nb_plan_kind classify(const char *name, int32_t *layer) {
    *layer = -1;
    if (!strcmp(name, "token_embd.weight")) return NB_PLAN_T_EMBED;
    if (!strcmp(name, "output.weight")) return NB_PLAN_T_LM_HEAD;
    if (!strncmp(name, "output_norm", 11)) return NB_PLAN_T_NORM;
    if (strncmp(name, "blk.", 4)) return NB_PLAN_T_OTHER;
    const char *p = name + 4;
    long l = 0;
    if (!isdigit((unsigned char)*p)) return NB_PLAN_T_OTHER;
    while (isdigit((unsigned char)*p) && l < 1000000) l = l * 10 + (*p++ - '0');
    *layer = (int32_t)l;
    if (*p++ != '.') return NB_PLAN_T_OTHER;
    static const struct { const char *pre; nb_plan_kind k; } tab[] = {
        {"attn_q.bias", NB_PLAN_T_Q_BIAS}, {"attn_k.bias", NB_PLAN_T_K_BIAS}, {"attn_v.bias", NB_PLAN_T_V_BIAS},
        {"attn_output.bias", NB_PLAN_T_O_BIAS}, {"attn_qkv.bias", NB_PLAN_T_Q_BIAS},
        {"attn_q.", NB_PLAN_T_Q}, {"attn_k.", NB_PLAN_T_K}, {"attn_v.", NB_PLAN_T_V}, {"attn_qkv.", NB_PLAN_T_Q},
        {"attn_output.", NB_PLAN_T_O}, {"attn_kv_a_mqa.", NB_PLAN_T_MLA_A}, {"attn_q_a.", NB_PLAN_T_MLA_A},
        {"attn_q_b.", NB_PLAN_T_MLA_B}, {"attn_kv_b.", NB_PLAN_T_MLA_B}, {"attn_k_b.", NB_PLAN_T_MLA_B},
        {"attn_v_b.", NB_PLAN_T_MLA_B},
        {"ffn_gate_inp_shexp.", NB_PLAN_T_SHEXP_ROUTER}, {"ffn_gate_inp.", NB_PLAN_T_ROUTER},
        {"ffn_gate_exps.", NB_PLAN_T_EXP_GATE}, {"ffn_up_exps.", NB_PLAN_T_EXP_UP}, {"ffn_down_exps.", NB_PLAN_T_EXP_DOWN},
        {"ffn_gate_shexp.", NB_PLAN_T_SHEXP_GATE}, {"ffn_up_shexp.", NB_PLAN_T_SHEXP_UP},
        {"ffn_down_shexp.", NB_PLAN_T_SHEXP_DOWN},
        {"ffn_gate.", NB_PLAN_T_GATE}, {"ffn_up.", NB_PLAN_T_UP}, {"ffn_down.", NB_PLAN_T_DOWN},
    };
    if (strstr(p, "norm")) return NB_PLAN_T_NORM;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strncmp(p, tab[i].pre, strlen(tab[i].pre))) return tab[i].k;
    return NB_PLAN_T_OTHER;
}

static const char *ftype_scheme(int64_t ft) {
    switch (ft) {
    case 0: return "gguf-f32";
    case 1: return "gguf-f16";
    case 2: return "q4_0";
    case 3: return "q4_1";
    case 7: return "q8_0";
    case 8: return "q5_0";
    case 9: return "q5_1";
    case 10: return "q2_k";
    case 11: return "q3_k_s";
    case 12: return "q3_k_m";
    case 13: return "q3_k_l";
    case 14: return "q4_k_s";
    case 15: return "q4_k_m";
    case 16: return "q5_k_s";
    case 17: return "q5_k_m";
    case 18: return "q6_k";
    case 32: return "gguf-bf16";
    default: return NULL;
    }
}

nb_status nb_plan_model_from_gguf(const char *path, nb_plan_config *c) {
    nb_gguf *g;
    NB_TRY(nb_gguf_open(path, &g));
    nb_arch_desc d;
    nb_status st = nb_arch_desc_from_gguf(g, NB_ARCH_PLAN, &d);
    if (st != NB_OK) goto done;
    nb_plan_model_from_desc(&d, path, &c->model);
    /* tensors */
    int64_t n = nb_gguf_n_tensors(g);
    free(c->tensors);
    c->tensors = n ? nb_calloc((size_t)n, sizeof *c->tensors) : NULL;
    c->n_tensors = 0;
    if (n && !c->tensors) {
        st = NB_ERR_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        const nb_tensor *t = nb_gguf_tensor(g, i);
        nb_plan_tensor *pt = &c->tensors[c->n_tensors++];
        pt->kind = classify(t->name, &pt->layer);
        pt->nelem = (uint64_t)nb_tensor_nelem(t);
        pt->nbytes = t->nbytes;
    }
    /* the scheme it was stored with (for display; the bytes are the file's) */
    int64_t ft = -1;
    if ((st = nb_gguf_get_int_or(g, "general.file_type", -1, &ft)) != NB_OK) goto done;
    const char *sn = ftype_scheme(ft);
    if (sn) {
        NB_ASSERT(nb_plan_scheme_from_name(sn, &c->scheme) == NB_OK);
    } else {
        NB_ASSERT(nb_plan_scheme_from_name("gguf-f16", &c->scheme) == NB_OK);
        snprintf(c->scheme.name, sizeof c->scheme.name, "gguf-ftype-%lld", (long long)ft);
    }
done:
    nb_gguf_close(g);
    if (st != NB_OK) nb_plan_config_free(c);
    return st;
}

/* ---- HF weights: exact sizes from the safetensors headers (formats/hf_quant.h) ---- */

typedef struct { nb_plan_config *c; int64_t cap; bool nomem; } hf_acc;

static void hf_tensor(void *ctx, const char *gguf, uint64_t params, uint64_t bytes) {
    hf_acc *a = ctx;
    if (a->nomem) return;
    if (a->c->n_tensors == a->cap) {
        int64_t nc = a->cap ? 2 * a->cap : 256;
        nb_plan_tensor *t = realloc(a->c->tensors, (size_t)nc * sizeof *t);
        if (!t) { a->nomem = true; return; }
        a->c->tensors = t;
        a->cap = nc;
    }
    nb_plan_tensor *pt = &a->c->tensors[a->c->n_tensors++];
    pt->layer = -1;
    pt->kind = gguf ? classify(gguf, &pt->layer) : NB_PLAN_T_OTHER;
    pt->nelem = params;
    pt->nbytes = bytes;
}

/* Fills c->tensors from the checkpoint next to config.json; without weights
 * (a lone config.json) the sizes stay estimated from the scheme. */
static void plan_hf_tensors(const char *config_path, nb_plan_config *c) {
    hf_acc a = {.c = c};
    free(c->tensors);
    c->tensors = NULL;
    c->n_tensors = 0;
    if (nb_hf_storage(config_path, hf_tensor, &a) != NB_OK || a.nomem || !c->n_tensors) {
        free(c->tensors);
        c->tensors = NULL;
        c->n_tensors = 0;
    }
}

/* ---- dispatch on the spec ----------------------------------------------------------- */

nb_status nb_plan_load_model(const char *spec, nb_plan_config *c) {
    const nb_plan_model *p = nb_plan_model_preset(spec);
    if (p) {
        c->model = *p;
        nb_plan_config_free(c);
        return NB_OK;
    }
    char path[4096];
    if (nb_is_dir(spec)) {
        snprintf(path, sizeof path, "%s/config.json", spec);
        if (!nb_file_exists(path))
            return nb_fail(NB_ERR_NOT_FOUND, "%s: a directory without config.json (give a preset, a GGUF file or an "
                           "HF model directory)", spec);
    } else if (nb_file_exists(spec)) {
        snprintf(path, sizeof path, "%s", spec);
    } else {
        return nb_fail(NB_ERR_NOT_FOUND, "model '%s' is neither a preset (nibble plan --list-models) nor a file or "
                       "directory", spec);
    }
    size_t len = strlen(path);
    if (len >= 5 && !strcmp(path + len - 5, ".json")) {
        char *text;
        size_t n;
        NB_TRY(nb_read_file(path, PLAN_CONFIG_MAX_BYTES, &text, &n));
        nb_plan_config_free(c);
        nb_status st = nb_plan_model_from_hf_json(text, n, path, c);
        free(text);
        if (st == NB_OK) plan_hf_tensors(path, c); /* exact sizes when the weights are there */
        return st;
    }
    return nb_plan_model_from_gguf(path, c);
}

nb_status nb_plan_host_ram(const char *path, uint64_t *bytes) {
    const char *p = path ? path : "/proc/meminfo";
    uint64_t b = nb_meminfo_bytes(p, "MemTotal");
    if (!b) return nb_fail(NB_ERR_FORMAT, "%s: no usable 'MemTotal: N kB' line", p);
    *bytes = b;
    return NB_OK;
}

nb_status nb_plan_config_host(nb_plan_config *c) {
    NB_TRY(nb_plan_host_ram(NULL, &c->capacity));
    uint64_t limit = nb_mem_limit();
    c->cgroup_limited = limit && limit < c->capacity;
    if (c->cgroup_limited) c->capacity = limit;
    c->host = true;
    c->fp8_native = 0;
    snprintf(c->device, sizeof c->device, "host");
    return NB_OK;
}
