/* Byte-level BPE pre-tokenizers: the regex lists per `pre` name, compiled
 * with PCRE2 (PCRE2_UTF | PCRE2_UCP, `$` = end of subject only), JIT when
 * available.
 *
 * The regexes are those of the models' tokenizer.json files as llama.cpp's
 * llama-vocab.cpp lists them per pre-tokenizer type. Where llama.cpp had to
 * rewrite a regex for std::regex (\p{Lu}/\p{Ll} classes, possessive
 * quantifiers) the original form is used, since PCRE2 supports it; the
 * case-insensitive contractions (?i:'s|'t|...) are spelled with explicit
 * classes ('[sS] ...) so that no Unicode case folding (U+017F for s) applies.
 *
 * Semantics (as llama.cpp's unicode_regex_split): the text starts as one
 * piece; each regex in turn splits every piece into its matches and the
 * non-matching gaps between them (both kept, in order); each piece is its
 * own subject, so `$` and (?!\S) see the piece's end. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTR "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*" CONTR \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define CJK_KANA "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+"
#define CJK_HANGUL "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"
#define DS3_MAIN "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
#define BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{0964}\\x{06d4}\\x{060c})]+"
#define DS_LETTERS \
    "A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"          \
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"    \
    "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}"             \
    "\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}" \
    "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}"            \
    "\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}"            \
    "\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}"    \
    "\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}"   \
    "\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}"            \
    "\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}"    \
    "\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}"    \
    "\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}"              \
    "\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}"             \
    "\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}"            \
    "\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}"            \
    "\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}"        \
    "\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"    \
    "\\x{1e900}-\\x{1e943}"

typedef struct {
    const char *names; /* space-separated pre names */
    const char *re[6];
} pretok_def;

static const pretok_def defs[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jina-v1-en jina-v2-code "
     "roberta-bpe exaone4 mpt olmo jais trillion granite-docling gpt-neox",
     {RE_GPT2}},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano dbrx smaug-bpe glm4 chatglm-bpe",
     {RE_LLAMA3}},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open grok-2", {RE_QWEN2}},
    {"qwen35",
     {CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"deepseek-llm",
     {"[\\r\\n]", "\\s?[" DS_LETTERS "]+",
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+", "\\s+$", CJK_HANGUL,
      "\\p{N}+"}},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_HANGUL, "\\p{N}"}},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4",
     {"\\p{N}{1,3}", CJK_KANA, DS3_MAIN "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"spark2_5", {"\\p{N}{1,3}", CJK_KANA, DS3_MAIN "| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+", "\\p{N}"}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2", {"\\p{N}", RE_GPT2}},
    {"poro-chat bloom gpt3-finnish", {BLOOM}},
    {"viking", {BLOOM, "\\p{N}"}},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER
      "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", {RE_GPT4O}},
    {"tiny_aya cohere2moe", {"\\d{1,3}(?=(?:\\d{3})*\\b)", RE_GPT4O}},
    {"seed-coder",
     {CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe bailingmoe2 llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"jais-2",
     {CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|"
      "\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|"
      "\\s{1,2}(?!\\S)|\\s{1}"}},
    {"minicpm5",
     {"\\p{N}{1,3}", CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"ufakzeka", {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"exaone-moe",
     {CONTR "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"laguna", {"[^\\n]+|[\\n]+", RE_QWEN2}},
};

#define N_DEFS (sizeof defs / sizeof defs[0])
#define MAX_RE 6

struct nb_pretok {
    int n;
    pcre2_code *code[MAX_RE];
};

static bool name_in(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *sp = strchr(p, ' ');
        size_t k = sp ? (size_t)(sp - p) : strlen(p);
        if (k == n && !strncmp(p, name, n)) return true;
        if (!sp) break;
        p = sp + 1;
    }
    return false;
}

void nb_pretok_names(char *buf, size_t cap) {
    size_t o = 0;
    if (cap == 0) return;
    for (size_t i = 0; i < N_DEFS; i++)
        for (const char *p = defs[i].names; *p && o + 3 < cap; p++) {
            if ((p == defs[i].names && o) || *p == ' ') {
                buf[o++] = ',';
                buf[o++] = ' ';
            }
            if (*p != ' ') buf[o++] = *p;
        }
    buf[o] = 0;
}

void nb_pretok_free(nb_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

nb_status nb_pretok_create(const char *name, nb_pretok **out) {
    *out = NULL;
    const pretok_def *d = NULL;
    for (size_t i = 0; i < N_DEFS && !d; i++)
        if (name_in(defs[i].names, name)) d = &defs[i];
    if (!d) {
        char names[2048];
        nb_pretok_names(names, sizeof names);
        return nb_fail(NB_ERR_UNSUPPORTED, "pre-tokenizer '%s' is not supported (supported: %s)", name, names);
    }
    nb_pretok *p = nb_calloc(1, sizeof *p);
    if (!p) return NB_ERR_NOMEM;
    for (int i = 0; i < MAX_RE && d->re[i]; i++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *c = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (!c) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            nb_pretok_free(p);
            return nb_fail(NB_ERR_INTERNAL, "pre-tokenizer '%s': regex %d does not compile at offset %zu: %s", name, i,
                           (size_t)at, (const char *)msg);
        }
        (void)pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* optional speed-up */
        p->code[p->n++] = c;
    }
    *out = p;
    return NB_OK;
}

typedef struct {
    size_t *a;
    size_t n, cap; /* pairs */
} offvec;

static nb_status off_push(offvec *v, size_t start, size_t len) {
    if (len == 0) return NB_OK;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        size_t *a = nb_realloc(v->a, cap * 2 * sizeof *a);
        if (!a) return NB_ERR_NOMEM;
        v->a = a;
        v->cap = cap;
    }
    v->a[2 * v->n] = start;
    v->a[2 * v->n + 1] = len;
    v->n++;
    return NB_OK;
}

nb_status nb_pretok_split(const nb_pretok *p, const char *text, size_t len, size_t **offs, size_t *n) {
    *offs = NULL;
    *n = 0;
    offvec cur = {0}, next = {0};
    nb_status st = off_push(&cur, 0, len);
    for (int r = 0; st == NB_OK && r < p->n; r++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code[r], NULL);
        if (!md) { st = nb_fail(NB_ERR_NOMEM, "pre-tokenizer: out of memory"); break; }
        next.n = 0;
        for (size_t i = 0; st == NB_OK && i < cur.n; i++) {
            const char *sub = text + cur.a[2 * i];
            size_t sl = cur.a[2 * i + 1], pos = 0, last = 0;
            while (st == NB_OK && pos <= sl) {
                int rc = pcre2_match(p->code[r], (PCRE2_SPTR)sub, sl, pos, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    st = nb_fail(NB_ERR_INTERNAL, "pre-tokenizer regex %d failed: %s", r, (const char *)msg);
                    break;
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) { /* empty match: step one character */
                    pos = ms + 1;
                    while (pos < sl && ((uint8_t)sub[pos] & 0xC0) == 0x80) pos++;
                    continue;
                }
                if (ms > last) st = off_push(&next, cur.a[2 * i] + last, ms - last);
                if (st == NB_OK) st = off_push(&next, cur.a[2 * i] + ms, me - ms);
                last = pos = me;
            }
            if (st == NB_OK && last < sl) st = off_push(&next, cur.a[2 * i] + last, sl - last);
        }
        pcre2_match_data_free(md);
        offvec t = cur;
        cur = next;
        next = t;
    }
    free(next.a);
    if (st != NB_OK) {
        free(cur.a);
        return st;
    }
    *offs = cur.a;
    *n = cur.n;
    return NB_OK;
}
