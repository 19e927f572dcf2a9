/* A tokenizer vocabulary as plain data, and loading it from every source.
 *
 * An nb_vocab holds what a tokenizer needs and nothing it computes: the
 * token texts (bytes, exactly as the file stores them: SentencePiece pieces
 * with U+2581 for spaces, byte-level BPE pieces in the GPT-2 byte->unicode
 * alphabet), per-token scores and types, the BPE merges in rank order, the
 * special token ids and flags, the pre-tokenizer name and the chat template.
 * The tokenizer (src/tokenizer) builds its lookup tables from it.
 *
 * Sources (nb_vocab_load picks one from the path):
 *   - GGUF metadata: tokenizer.ggml.* keys (see vocab_gguf.c)
 *   - an HF model directory: tokenizer.json (+ tokenizer_config.json), or
 *     tokenizer.model (SentencePiece protobuf)         (vocab_hf.c, vocab_spm.c)
 *   - a llama2.c tokenizer.bin                          (vocab_spm.c)
 *
 * Ownership: the loader creates, nb_vocab_free frees; nb_tokenizer_create
 * takes ownership of the vocab it is given. Not thread-safe while building;
 * read-only afterwards. */
#ifndef NB_FORMATS_VOCAB_H
#define NB_FORMATS_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "formats/gguf.h"

/* Token types: the numbers of GGUF tokenizer.ggml.token_type and of
 * SentencePiece's ModelProto.SentencePiece.Type (they agree). */
typedef enum nb_token_type {
    NB_TOKEN_UNDEFINED = 0,
    NB_TOKEN_NORMAL = 1,
    NB_TOKEN_UNKNOWN = 2,
    NB_TOKEN_CONTROL = 3,
    NB_TOKEN_USER_DEFINED = 4,
    NB_TOKEN_UNUSED = 5,
    NB_TOKEN_BYTE = 6,
} nb_token_type;

typedef enum nb_vocab_kind {
    NB_VOCAB_SPM = 1, /* SentencePiece BPE: merges by piece score, <0xNN> byte fallback */
    NB_VOCAB_BPE = 2, /* byte-level BPE: GPT-2 byte alphabet, merges by rank, regex pre-tokenizer */
} nb_vocab_kind;

/* Caps on untrusted tokenizer files (named so errors can quote them). */
#define NB_VOCAB_MAX_TOKENS 4000000
#define NB_VOCAB_MAX_TOKEN_BYTES 65536
#define NB_VOCAB_MAX_FILE_BYTES ((size_t)512 << 20)

typedef struct nb_vocab {
    nb_vocab_kind kind;
    char *pre;            /* pre-tokenizer name (BPE): "gpt-2", "llama-bpe", "qwen2", ...; "default" */
    char *source;         /* where it was loaded from, for messages */
    char *chat_template;  /* NULL if none */

    int32_t n_tokens;
    /* token i: text = pool + text_off[i], text_len[i] bytes (not NUL-terminated
     * in general; the pool does put a NUL after each text) */
    char *pool;
    size_t pool_len, pool_cap;
    uint64_t *text_off;
    uint32_t *text_len;
    float *scores;
    uint8_t *types; /* nb_token_type */
    int32_t cap_tokens;

    /* BPE merges in rank order: merge r joins left (pool + m_off[2r], m_len[2r])
     * and right (pool + m_off[2r+1], m_len[2r+1]). */
    int32_t n_merges, cap_merges;
    uint64_t *m_off;
    uint32_t *m_len;

    /* special ids, -1 = none */
    int32_t bos, eos, unk, pad, eot, eom, sep;
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM: prepend U+2581 to text after BOS / at start */
    bool ignore_merges;    /* BPE (llama3, tekken): a word that is a whole token is taken as is */
} nb_vocab;

/* An empty vocab of the given kind with the kind's defaults (SPM: bos 1,
 * eos 2, unk 0, add_bos, add_space_prefix; BPE: no specials, no BOS). */
nb_status nb_vocab_create(nb_vocab_kind kind, nb_vocab **out) __attribute__((warn_unused_result));
void nb_vocab_free(nb_vocab *v);

/* Appends a token (id = current n_tokens). */
nb_status nb_vocab_add_token(nb_vocab *v, const char *text, size_t len, float score, nb_token_type type)
    __attribute__((warn_unused_result));
/* Appends a merge (rank = current n_merges). */
nb_status nb_vocab_add_merge(nb_vocab *v, const char *left, size_t llen, const char *right, size_t rlen)
    __attribute__((warn_unused_result));
nb_status nb_vocab_set_pre(nb_vocab *v, const char *pre) __attribute__((warn_unused_result));
nb_status nb_vocab_set_source(nb_vocab *v, const char *source) __attribute__((warn_unused_result));
nb_status nb_vocab_set_chat_template(nb_vocab *v, const char *tmpl) __attribute__((warn_unused_result));

static inline const char *nb_vocab_text(const nb_vocab *v, int32_t id, size_t *len) {
    *len = v->text_len[id];
    return v->pool + v->text_off[id];
}

/* Defaults that depend on the BPE pre-tokenizer name, applied before the
 * file's own flags (llama.cpp's rules): llama3 / llama-bpe / tekken / ...
 * add BOS and ignore merges for whole-token words; chatglm-bpe has no BOS. */
void nb_vocab_pre_defaults(nb_vocab *v);

/* Linear search by text (loaders only; the tokenizer has a hash table). -1 if absent. */
int32_t nb_vocab_find(const nb_vocab *v, const char *text, size_t len);

/* Checks ids of specials against n_tokens (out-of-range ids become -1 with
 * a warning, as llama.cpp does), add_bos/add_eos need their id. */
nb_status nb_vocab_finish(nb_vocab *v) __attribute__((warn_unused_result));

/* ---- loaders ------------------------------------------------------------ */

/* model_path: a GGUF file, an HF model directory, a llama2.c checkpoint .bin,
 * or a tokenizer file itself (tokenizer.json, tokenizer.model, tokenizer.bin).
 * tokenizer_path: NULL = find it from model_path:
 *   GGUF file           -> its tokenizer.* metadata
 *   directory           -> tokenizer.json, else tokenizer.model
 *   llama2.c .bin       -> tokenizer.bin beside it, else exactly one
 *                          <stem>.tok*.bin beside it, else an error asking
 *                          for --tokenizer FILE
 * else the file named (any of the formats above). */
nb_status nb_vocab_load(const char *model_path, const char *tokenizer_path, nb_vocab **out)
    __attribute__((warn_unused_result));

nb_status nb_vocab_from_gguf(const nb_gguf *g, nb_vocab **out) __attribute__((warn_unused_result));
/* HF: tokenizer.json text (+ optional tokenizer_config.json text). name is for messages. */
nb_status nb_vocab_from_hf_json(const char *json, size_t len, const char *config_json, size_t config_len,
                                const char *name, nb_vocab **out) __attribute__((warn_unused_result));
/* SentencePiece ModelProto bytes (tokenizer.model). */
nb_status nb_vocab_from_spm_model(const uint8_t *data, size_t size, const char *name, nb_vocab **out)
    __attribute__((warn_unused_result));
/* llama2.c tokenizer.bin bytes; n_vocab = -1: read records until the end. */
nb_status nb_vocab_from_llama2c(const uint8_t *data, size_t size, int32_t n_vocab, const char *name, nb_vocab **out)
    __attribute__((warn_unused_result));

#endif
