/* Synthetic random-weight models (see synth.h for the recipe). Tensor order
 * in the file follows shared/models' synth files: token_embd, output_norm,
 * [output], then per block attn_norm, attn_q, attn_k, attn_v,
 * [attn_q/k/v bias], attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down.
 *
 * Determinism: only IEEE-754 basic operations (correctly rounded) in a fixed
 * order, no FMA contraction (GCC's -std=c11 default is -ffp-contract=off;
 * clang gets the pragma below), frexp and sqrt (exact / correctly rounded),
 * and integer fp16/bf16 rounding from base/half.h. */
#include "model/synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/half.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- PRNG and normals -------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void nb_synth_rng_seed(nb_synth_rng *r, uint64_t seed, const char *stream_name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)stream_name; p && *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    uint64_t x = seed ^ h;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nb_synth_rng_next(nb_synth_rng *r) { /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

#define LN2 0.69314718055994530942
#define HALF_PI 1.57079632679489661923
#define SQRT_HALF 0.70710678118654752440

/* Series coefficients, computed once by division (deterministic). */
static double inv_odd[16];   /* 1/(2k+1) */
static double sin_c[14];     /* (-1)^k / (2k+1)! */
static double cos_c[14];     /* (-1)^k / (2k)! */
static int coef_ready;

static void coef_init(void) {
    if (coef_ready) return;
    for (int k = 0; k < 16; k++) inv_odd[k] = 1.0 / (double)(2 * k + 1);
    for (int k = 0; k < 14; k++) {
        double c = 1.0, s = 1.0;
        for (int j = 2; j <= 2 * k; j++) c *= (double)j;
        for (int j = 2; j <= 2 * k + 1; j++) s *= (double)j;
        cos_c[k] = (k & 1 ? -1.0 : 1.0) / c;
        sin_c[k] = (k & 1 ? -1.0 : 1.0) / s;
    }
    coef_ready = 1;
}

/* ln x for finite x > 0: x = m 2^e, m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s)
 * with s = (m-1)/(m+1), |s| <= 0.1716, 16 odd terms (error < 1e-25). */
static double det_log(double x) {
    int e;
    double m = frexp(x, &e);
    if (m < SQRT_HALF) {
        m *= 2.0;
        e--;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, sum = 0.0;
    for (int k = 15; k >= 0; k--) sum = sum * s2 + inv_odd[k];
    return 2.0 * s * sum + (double)e * LN2;
}

/* sin and cos of a in [0, pi/2): Taylor series to the 27th/26th power
 * (error < 1e-17 relative). */
static void det_sincos(double a, double *sn, double *cs) {
    double a2 = a * a, ps = 0.0, pc = 0.0;
    for (int k = 13; k >= 0; k--) {
        ps = ps * a2 + sin_c[k];
        pc = pc * a2 + cos_c[k];
    }
    *sn = a * ps;
    *cs = pc;
}

void nb_synth_normals(nb_synth_rng *r, double *out, size_t n) {
    coef_init();
    for (size_t i = 0; i < n; i += 2) {
        /* u1 in (0, 1], u2 in [0, 1), both multiples of 2^-53 */
        double u1 = (double)((nb_synth_rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
        double u2 = (double)(nb_synth_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * det_log(u1));
        double t = u2 * 4.0; /* exact */
        int q = (int)t;
        double sn, cs;
        det_sincos((t - (double)q) * HALF_PI, &sn, &cs);
        double c, s; /* cos and sin of 2 pi u2 = q pi/2 + a */
        switch (q & 3) {
        case 0: c = cs; s = sn; break;
        case 1: c = -sn; s = cs; break;
        case 2: c = -cs; s = -sn; break;
        default: c = sn; s = -cs; break;
        }
        out[i] = rad * c;
        if (i + 1 < n) out[i + 1] = rad * s;
    }
}

/* ---- built-in byte-level BPE vocabulary ----------------------------------- */

/* Pieces to learn, in merge-priority order (raw text; a leading space
 * becomes GPT-2's 'Ġ'). Each is first split by the merges learned so far,
 * then its pieces are merged left to right, adding the missing merges. */
static const char *const vocab_pieces[] = {
    " t", " a", "he", "in", "re", "on", " the", "er", " s", "at", " w", " o", "en", " c", "it", "is",
    "an", "or", "es", " b", "ed", " f", "ing", " p", "ou", " an", "al", "ar", " to", " m", " of", " in",
    " d", " h", " and", "ic", "as", "le", " th", "ion", "om", "ll", "ent", " n", " l", "st", " re", "ve",
    " e", "ro", "ly", " be", " g", " T", "ct", " S", "id", "ot", " I", "ut", "et", " A", " is", " on",
    "im", "am", "ow", "ay", "ad", "se", " that", " C", "ig", " for", "ac", " y", "ver", "ur", " u", "ld",
    " st", " M", "'s", " he", " it", "ation", "ith", "ir", "ce", " you", "il", " B", " wh", "ol", " P",
    " with", " 1", "ter", "ch", " as", " we", " (", "nd", "ill", " D", "if", " 2", "ag", "ers", "ke",
    " \"", " H", "em", " con", " W", " R", "her", " was", " r", "od", " F", "ul", "ate", " at", "ri",
    "pp", "ore", " The", " se", "us", " pro", " ha", "um", " are", " de", "ain", "and", " or", "igh",
    "est", "ist", "ab", "rom", " N", "th", "com", " G", "un", "op", "00", " L", " not", "ess", " ex",
    " v", "res", " E", "ew", "ity", "ant", " by", "el", "os", "ort", "oc", "qu", " from", " have",
    " su", "ive", "ould", " sh", " this", "nt", "ra", "pe", "ight", "art", "ment", " al", "ust", "end",
    "all", " O", "ack", " ch", " le", "ies", "red", "ard", "out", " J", "ear", "iv", "ally", "our",
    "ost", "gh", "pt", " pl", "ast", " can", "ak", "ome", "ud", " his", " do", " go", " has", "ge",
    "'t", " U", " but", " all", "ect", " k", "ame", " will", "ok", " they", "ide", " up", " one",
    " said", " time", " Once", " upon", " little", " there", " day", " she", " her", " happy", " play",
    " saw", " big", " very", " went", " named", " friend", " He", " She", " It", " was", " were",
    " had", " would", " could", " about", " what", " when", " like", " just", " some", " them",
    " then", " into", " over", " after", " other", " people", " make", " know", " good", " new",
    " first", " because", " water", " tree", " house", " happy", " wanted", " looked", " found",
    " mom", " dog", " cat", " sun", " park", " toy", " ball", " girl", " boy", ".\n", "\n\n", ", ",
};

#define VOCAB_MERGES (NB_SYNTH_BUILTIN_VOCAB - 257)

typedef struct {
    char *tok[NB_SYNTH_BUILTIN_VOCAB];
    char *merge[VOCAB_MERGES];
    int left[VOCAB_MERGES], right[VOCAB_MERGES]; /* token ids of each merge */
    int n_tok, n_merge;
} builtin_vocab;

/* GPT-2's byte -> unicode map: printable bytes map to themselves, the other
 * 68 in byte order to U+0100, U+0101, ... Writes UTF-8, returns length. */
static int byte_symbol(unsigned b, char out[4]) {
    unsigned cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174)) {
        cp = b;
    } else {
        unsigned n = 0;
        for (unsigned c = 0; c < b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static int vocab_find(const builtin_vocab *v, const char *s) {
    for (int i = 0; i < v->n_tok; i++)
        if (!strcmp(v->tok[i], s)) return i;
    return -1;
}

static char *concat(const char *a, const char *b, const char *sep) {
    size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
    char *r = nb_malloc(la + ls + lb + 1);
    if (!r) return NULL;
    memcpy(r, a, la);
    memcpy(r + la, sep, ls);
    memcpy(r + la + ls, b, lb + 1);
    return r;
}

static void vocab_free(builtin_vocab *v) {
    for (int i = 0; i < v->n_tok; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merge; i++) free(v->merge[i]);
}

static nb_status vocab_build(builtin_vocab *v) {
    memset(v, 0, sizeof *v);
    for (unsigned b = 0; b < 256; b++) {
        char s[4] = {0};
        byte_symbol(b, s);
        v->tok[v->n_tok] = nb_strdup(s);
        if (!v->tok[v->n_tok]) return NB_ERR_NOMEM;
        v->n_tok++;
    }
    for (size_t w = 0; w < sizeof vocab_pieces / sizeof vocab_pieces[0] && v->n_merge < VOCAB_MERGES; w++) {
        /* the piece as byte-symbol token ids */
        int ids[64], n = 0;
        for (const unsigned char *p = (const unsigned char *)vocab_pieces[w]; *p && n < 64; p++) ids[n++] = *p;
        /* apply the learned merges by rank */
        for (;;) {
            int best = -1, at = -1;
            for (int i = 0; i + 1 < n; i++)
                for (int m = 0; m < v->n_merge; m++)
                    if (v->left[m] == ids[i] && v->right[m] == ids[i + 1] && (best < 0 || m < best)) {
                        best = m;
                        at = i;
                    }
            if (best < 0) break;
            ids[at] = 256 + best;
            memmove(ids + at + 1, ids + at + 2, (size_t)(n - at - 2) * sizeof ids[0]);
            n--;
        }
        /* merge the remaining pieces left to right */
        while (n > 1 && v->n_merge < VOCAB_MERGES) {
            char *joined = concat(v->tok[ids[0]], v->tok[ids[1]], "");
            if (!joined) return NB_ERR_NOMEM;
            int existing = vocab_find(v, joined);
            if (existing >= 0) { /* reachable another way; not a new token */
                free(joined);
                ids[0] = existing;
            } else {
                char *m = concat(v->tok[ids[0]], v->tok[ids[1]], " ");
                if (!m) { free(joined); return NB_ERR_NOMEM; }
                v->merge[v->n_merge] = m;
                v->left[v->n_merge] = ids[0];
                v->right[v->n_merge] = ids[1];
                v->tok[v->n_tok] = joined;
                ids[0] = v->n_tok;
                v->n_tok++;
                v->n_merge++;
            }
            memmove(ids + 1, ids + 2, (size_t)(n - 2) * sizeof ids[0]);
            n--;
        }
    }
    NB_ASSERT(v->n_merge == VOCAB_MERGES); /* the piece list is long enough */
    v->tok[v->n_tok] = nb_strdup("<|endoftext|>");
    if (!v->tok[v->n_tok]) return NB_ERR_NOMEM;
    v->n_tok++;
    NB_ASSERT(v->n_tok == NB_SYNTH_BUILTIN_VOCAB);
    return NB_OK;
}

static nb_status vocab_write(nb_gguf_writer *w) {
    builtin_vocab v;
    nb_status st = vocab_build(&v);
    if (st == NB_OK) st = nb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == NB_OK) st = nb_gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2");
    if (st == NB_OK) st = nb_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL, (uint64_t)v.n_tok);
    int32_t types[NB_SYNTH_BUILTIN_VOCAB];
    for (int i = 0; i < NB_SYNTH_BUILTIN_VOCAB; i++) types[i] = 1; /* normal */
    types[NB_SYNTH_BUILTIN_VOCAB - 1] = 3;                         /* control */
    if (st == NB_OK) st = nb_gguf_set_arr(w, "tokenizer.ggml.token_type", NB_GGUF_I32, types, NB_SYNTH_BUILTIN_VOCAB);
    if (st == NB_OK) st = nb_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge, NULL, (uint64_t)v.n_merge);
    if (st == NB_OK) st = nb_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", NB_SYNTH_BUILTIN_VOCAB - 1);
    if (st == NB_OK) st = nb_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", NB_SYNTH_BUILTIN_VOCAB - 1);
    if (st == NB_OK) st = nb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    vocab_free(&v);
    return st;
}

/* ---- parameters ------------------------------------------------------------ */

void nb_synth_defaults(nb_synth_params *p, nb_arch arch) {
    memset(p, 0, sizeof *p);
    p->arch = arch;
    p->n_embd = 256;
    p->n_layer = 4;
    p->n_head = 8;
    p->n_ctx = 2048;
    p->wtype = NB_F16;
    p->std_embd = 0.2f;
    p->std_out = 0.2f;
    if (arch == NB_ARCH_QWEN2) {
        p->name = "synth-qwen2";
        p->n_head_kv = 4;
        p->n_ff = 704;
        p->seed = 5678;
        p->rope_theta = 1000000.0f;
        p->norm_eps = 1e-6f;
        p->tied = true;
        p->std_block = 0.08f;
        p->std_bias = 0.1f;
    } else {
        p->name = "synth-llama";
        p->n_head_kv = 2;
        p->n_ff = 768;
        p->seed = 1234;
        p->rope_theta = 10000.0f;
        p->norm_eps = 1e-5f;
        p->tied = false;
        p->std_block = 0.04f;
        p->std_bias = 0.1f;
    }
}

/* The GGUF name of a forward pass (formats/arch.c); validated before use. */
static const char *arch_name(nb_arch a) { return nb_arch_info_of(a) ? nb_arch_info_of(a)->gguf : "llama"; }

nb_status nb_synth_validate(const nb_synth_params *p) {
    if (!nb_arch_info_of(p->arch))
        return nb_fail(NB_ERR_INVALID, "synth: arch %d (allowed llama, qwen2)", (int)p->arch);
#define RANGE(f, lo, hi)                                                                                  \
    if (p->f < (lo) || p->f > (hi))                                                                       \
        return nb_fail(NB_ERR_RANGE, "synth: %s = %lld (allowed %lld..%lld)", #f, (long long)p->f, (long long)(lo), \
                       (long long)(hi));
    RANGE(n_embd, 2, 1 << 16)
    RANGE(n_layer, 1, 1024)
    RANGE(n_head, 1, 1024)
    RANGE(n_head_kv, 1, 1024)
    RANGE(n_ff, 1, 1 << 20)
    RANGE(n_ctx, 1, 1 << 24)
#undef RANGE
    if (p->n_embd % p->n_head)
        return nb_fail(NB_ERR_INVALID, "synth: dim %d is not a multiple of heads %d", p->n_embd, p->n_head);
    if ((p->n_embd / p->n_head) % 2)
        return nb_fail(NB_ERR_INVALID, "synth: head_dim = dim/heads = %d must be even (RoPE rotates pairs)",
                       p->n_embd / p->n_head);
    if (p->n_head % p->n_head_kv)
        return nb_fail(NB_ERR_INVALID, "synth: heads %d is not a multiple of kv-heads %d", p->n_head, p->n_head_kv);
    if (p->wtype != NB_F32 && p->wtype != NB_F16 && p->wtype != NB_BF16)
        return nb_fail(NB_ERR_INVALID, "synth: weight type %s (allowed f32, f16, bf16)", nb_dtype_name(p->wtype));
    if (!(p->rope_theta > 0 && p->rope_theta < 1e12f))
        return nb_fail(NB_ERR_RANGE, "synth: rope theta %g (allowed > 0)", (double)p->rope_theta);
    if (!(p->norm_eps > 0 && p->norm_eps < 1))
        return nb_fail(NB_ERR_RANGE, "synth: eps %g (allowed 0 < eps < 1)", (double)p->norm_eps);
    if (p->outlier_channels < 0 || p->outlier_channels > p->n_embd)
        return nb_fail(NB_ERR_RANGE, "synth: --outliers %d (allowed 0..n_embd = %d)", p->outlier_channels, p->n_embd);
    if (p->outlier_channels > 0 && !(p->outlier_scale > 0 && p->outlier_scale <= 1000))
        return nb_fail(NB_ERR_RANGE, "synth: --outlier-scale %g (allowed 0 < s <= 1000)", (double)p->outlier_scale);
    const float stds[4] = {p->std_embd, p->std_out, p->std_block, p->std_bias};
    for (int i = 0; i < 4; i++)
        if (!(stds[i] >= 0 && stds[i] <= 100))
            return nb_fail(NB_ERR_RANGE, "synth: standard deviation %g (allowed 0..100)", (double)stds[i]);
    return NB_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

typedef enum { FILL_NORMAL, FILL_ONES, FILL_NORM } fill_kind;

typedef struct {
    char name[64];
    fill_kind kind;
    nb_dtype type;
    int n_dims;
    int64_t ne[2];
    double std;
    uint64_t seed;
    int32_t n_out;      /* FILL_NORM: outlier channels and their weight */
    float out_scale;
} synth_tensor;

static nb_status fill_tensor(void *ctx, const char *name, void *buf, uint64_t nbytes) {
    const synth_tensor *t = ctx;
    uint64_t n = (uint64_t)t->ne[0] * (uint64_t)(t->n_dims > 1 ? t->ne[1] : 1);
    size_t esz = t->type == NB_F32 ? 4 : 2;
    NB_ASSERT(n * esz == nbytes);
    nb_synth_rng rng;
    nb_synth_rng_seed(&rng, t->seed, name);
    enum { CH = 4096 };
    double z[CH];
    for (uint64_t i = 0; i < n; i += CH) {
        size_t k = (size_t)NB_MIN((uint64_t)CH, n - i);
        if (t->kind == FILL_ONES || t->kind == FILL_NORM) {
            for (size_t j = 0; j < k; j++) z[j] = 1.0;
            for (int32_t o = 0; t->kind == FILL_NORM && o < t->n_out; o++) {
                uint64_t c = ((uint64_t)o * 7919u + 13u) % (uint64_t)t->ne[0];
                if (c >= i && c < i + k) z[c - i] = t->out_scale;
            }
        }
        else {
            nb_synth_normals(&rng, z, k);
            for (size_t j = 0; j < k; j++) z[j] *= t->std;
        }
        for (size_t j = 0; j < k; j++) {
            float f = (float)z[j];
            if (t->type == NB_F32) memcpy((uint8_t *)buf + (i + j) * 4, &f, 4);
            else {
                uint16_t h = t->type == NB_F16 ? nb_fp32_to_fp16(f) : nb_fp32_to_bf16(f);
                memcpy((uint8_t *)buf + (i + j) * 2, &h, 2);
            }
        }
    }
    return NB_OK;
}

/* The tensor list, in file order; returns the count (at most `cap`). */
static int plan_tensors(const nb_synth_params *p, int32_t n_vocab, synth_tensor *ts, int cap) {
    int n = 0;
    int64_t E = p->n_embd, hd = p->n_embd / p->n_head, Q = p->n_head * hd, KV = p->n_head_kv * hd;
#define ADD(kind_, type_, nd, ne0, ne1, std_, ...)                               \
    do {                                                                         \
        NB_ASSERT(n < cap);                                                      \
        synth_tensor *t = &ts[n++];                                              \
        snprintf(t->name, sizeof t->name, __VA_ARGS__);                          \
        t->kind = kind_; t->type = type_; t->n_dims = nd;                        \
        t->ne[0] = ne0; t->ne[1] = ne1; t->std = std_; t->seed = p->seed;        \
    } while (0)
    ADD(FILL_NORMAL, p->wtype, 2, E, n_vocab, p->std_embd, "token_embd.weight");
    ADD(FILL_ONES, NB_F32, 1, E, 1, 0.0, "output_norm.weight");
    if (!p->tied) ADD(FILL_NORMAL, p->wtype, 2, E, n_vocab, p->std_out, "output.weight");
    for (int l = 0; l < p->n_layer; l++) {
        ADD(p->outlier_channels > 0 ? FILL_NORM : FILL_ONES, NB_F32, 1, E, 1, 0.0, "blk.%d.attn_norm.weight", l);
        ts[n - 1].n_out = p->outlier_channels;
        ts[n - 1].out_scale = p->outlier_scale;
        ADD(FILL_NORMAL, p->wtype, 2, E, Q, p->std_block, "blk.%d.attn_q.weight", l);
        ADD(FILL_NORMAL, p->wtype, 2, E, KV, p->std_block, "blk.%d.attn_k.weight", l);
        ADD(FILL_NORMAL, p->wtype, 2, E, KV, p->std_block, "blk.%d.attn_v.weight", l);
        if (nb_arch_info_of(p->arch)->qkv_bias) {
            ADD(FILL_NORMAL, NB_F32, 1, Q, 1, p->std_bias, "blk.%d.attn_q.bias", l);
            ADD(FILL_NORMAL, NB_F32, 1, KV, 1, p->std_bias, "blk.%d.attn_k.bias", l);
            ADD(FILL_NORMAL, NB_F32, 1, KV, 1, p->std_bias, "blk.%d.attn_v.bias", l);
        }
        ADD(FILL_NORMAL, p->wtype, 2, Q, E, p->std_block, "blk.%d.attn_output.weight", l);
        ADD(p->outlier_channels > 0 ? FILL_NORM : FILL_ONES, NB_F32, 1, E, 1, 0.0, "blk.%d.ffn_norm.weight", l);
        ts[n - 1].n_out = p->outlier_channels;
        ts[n - 1].out_scale = p->outlier_scale;
        ADD(FILL_NORMAL, p->wtype, 2, E, p->n_ff, p->std_block, "blk.%d.ffn_gate.weight", l);
        ADD(FILL_NORMAL, p->wtype, 2, E, p->n_ff, p->std_block, "blk.%d.ffn_up.weight", l);
        ADD(FILL_NORMAL, p->wtype, 2, p->n_ff, E, p->std_block, "blk.%d.ffn_down.weight", l);
    }
#undef ADD
    return n;
}

static uint32_t file_type_of(nb_dtype t) { return t == NB_F32 ? 0 : t == NB_F16 ? 1 : 32; }

static nb_status write_meta(nb_gguf_writer *w, const nb_synth_params *p, int32_t *n_vocab) {
    const char *a = arch_name(p->arch);
    char key[96];
    NB_TRY(nb_gguf_set_str(w, "general.architecture", a));
    NB_TRY(nb_gguf_set_str(w, "general.name", p->name && p->name[0] ? p->name : "synth"));
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    NB_TRY(nb_gguf_set_u32(w, KEY("context_length"), (uint32_t)p->n_ctx));
    NB_TRY(nb_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)p->n_embd));
    NB_TRY(nb_gguf_set_u32(w, KEY("block_count"), (uint32_t)p->n_layer));
    NB_TRY(nb_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)p->n_ff));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)p->n_head));
    NB_TRY(nb_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)p->n_head_kv));
    NB_TRY(nb_gguf_set_f32(w, KEY("rope.freq_base"), p->rope_theta));
    NB_TRY(nb_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), p->norm_eps));
    NB_TRY(nb_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)(p->n_embd / p->n_head)));
    if (p->vocab_from) {
        nb_gguf *src;
        NB_TRY(nb_gguf_open(p->vocab_from, &src));
        const nb_gguf_value *tok = nb_gguf_find(src, "tokenizer.ggml.tokens");
        nb_status st = NB_OK;
        if (!tok || tok->type != NB_GGUF_ARRAY || tok->arr_type != NB_GGUF_STRING || tok->n == 0)
            st = nb_fail(NB_ERR_FORMAT, "%s: --vocab-from: no tokenizer.ggml.tokens string array", p->vocab_from);
        else if (tok->n > (uint64_t)INT32_MAX)
            st = nb_fail(NB_ERR_RANGE, "%s: tokenizer.ggml.tokens has %llu entries (allowed up to %d)", p->vocab_from,
                         (unsigned long long)tok->n, INT32_MAX);
        if (st == NB_OK) {
            *n_vocab = (int32_t)tok->n;
            st = nb_gguf_set_u32(w, KEY("vocab_size"), (uint32_t)*n_vocab);
        }
        if (st == NB_OK) st = nb_gguf_set_u32(w, "general.file_type", file_type_of(p->wtype));
        for (int64_t i = 0; st == NB_OK && i < nb_gguf_n_kv(src); i++)
            if (!strncmp(nb_gguf_key(src, i), "tokenizer.", 10))
                st = nb_gguf_set_value(w, nb_gguf_key(src, i), nb_gguf_kv(src, i));
        nb_gguf_close(src);
        return st;
    }
    *n_vocab = NB_SYNTH_BUILTIN_VOCAB;
    NB_TRY(nb_gguf_set_u32(w, KEY("vocab_size"), NB_SYNTH_BUILTIN_VOCAB));
    NB_TRY(nb_gguf_set_u32(w, "general.file_type", file_type_of(p->wtype)));
#undef KEY
    return vocab_write(w);
}

nb_status nb_synth_write(const nb_synth_params *p, const char *path) {
    NB_TRY(nb_synth_validate(p));
    nb_gguf_writer *w;
    NB_TRY(nb_gguf_writer_create(&w));
    int32_t n_vocab = 0;
    nb_status st = write_meta(w, p, &n_vocab);
    int cap = 3 + 12 * p->n_layer;
    synth_tensor *ts = NULL;
    if (st == NB_OK) {
        ts = nb_calloc((size_t)cap, sizeof *ts);
        if (!ts) st = NB_ERR_NOMEM;
    }
    if (st == NB_OK) {
        int n = plan_tensors(p, n_vocab, ts, cap);
        for (int i = 0; i < n && st == NB_OK; i++)
            st = nb_gguf_writer_add_tensor_fn(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, fill_tensor, &ts[i]);
    }
    if (st == NB_OK) st = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    free(ts);
    return st;
}

/* ---- the built-in default model ------------------------------------------ */

void nb_default_model_params(nb_synth_params *p) {
    nb_synth_defaults(p, NB_ARCH_LLAMA);
    p->name = "nibble-default";
    p->n_head_kv = 4;
    p->n_ff = 768;
    p->seed = 1234;
}

static nb_status mkdir_p(char *dir) {
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        int r = mkdir(dir, 0755), e = errno;
        *s = '/';
        if (r != 0 && e != EEXIST) return nb_fail(NB_ERR_IO, "cannot create directory %s: %s", dir, strerror(e));
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        return nb_fail(NB_ERR_IO, "cannot create directory %s: %s", dir, strerror(e));
    }
    return NB_OK;
}

nb_status nb_default_model_path(char *buf, size_t cap) {
    nb_synth_params p;
    nb_default_model_params(&p);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(dir, sizeof dir, "%s/nibble", xdg);
    else if (home && home[0]) n = snprintf(dir, sizeof dir, "%s/.cache/nibble", home);
    else return nb_fail(NB_ERR_NOT_FOUND, "default model: neither XDG_CACHE_HOME nor HOME is set");
    if (n < 0 || (size_t)n >= sizeof dir) return nb_fail(NB_ERR_RANGE, "default model: cache directory path too long");
    n = snprintf(buf, cap, "%s/default-%s-d%d-l%d-h%d-kv%d-ff%d-%s-v1.gguf", dir, arch_name(p.arch), p.n_embd,
                 p.n_layer, p.n_head, p.n_head_kv, p.n_ff, p.wtype == NB_F16 ? "f16" : "f32");
    if (n < 0 || (size_t)n >= cap) return nb_fail(NB_ERR_RANGE, "default model: path needs %d bytes, buffer has %zu", n, cap);
    if (nb_file_exists(buf)) return NB_OK;
    NB_TRY(mkdir_p(dir));
    nb_status st = nb_synth_write(&p, buf);
    if (st != NB_OK) return nb_fail_wrap(st, "synthesizing the default model: ");
    return NB_OK;
}
