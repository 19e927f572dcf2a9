/* Chat templates: family detection by marker substrings of the Jinja text,
 * and a C rendering of each family's published template (see
 * chat_template.h and docs/serve.md for the exact formats). */
#include "tokenizer/chat_template.h"

#include <stdlib.h>
#include <string.h>

/* ---- a small growable string ------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    uint64_t need;
    if (!nb_add_ok(b->len, n, &need) || !nb_add_ok(need, 1, &need)) { b->oom = true; return; }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_add(sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Jinja's `trim` / Python's str.strip() on ASCII whitespace. */
static void sb_add_trim(sbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_ws(s[i])) i++;
    while (n > i && is_ws(s[n - 1])) n--;
    sb_addn(b, s + i, n - i);
}

/* ---- detection ---------------------------------------------------------- */

const char *nb_chat_family_name(nb_chat_family f) {
    switch (f) {
    case NB_CHAT_CHATML: return "chatml";
    case NB_CHAT_LLAMA2: return "llama2";
    case NB_CHAT_LLAMA3: return "llama3";
    case NB_CHAT_MISTRAL: return "mistral";
    case NB_CHAT_ZEPHYR: return "zephyr";
    case NB_CHAT_GEMMA: return "gemma";
    case NB_CHAT_GENERIC: break;
    }
    return "generic";
}

bool nb_chat_role_parse(const char *name, nb_chat_role *out) {
    if (!strcmp(name, "system") || !strcmp(name, "developer")) *out = NB_ROLE_SYSTEM;
    else if (!strcmp(name, "user")) *out = NB_ROLE_USER;
    else if (!strcmp(name, "assistant")) *out = NB_ROLE_ASSISTANT;
    else return false;
    return true;
}

/* ChatML templates of Qwen-style models inject a fixed system message when
 * the conversation has none: a Jinja string literal
 * '<|im_start|>system\nYou are ...<|im_end|>\n'. Find a literal one (the
 * text after "system\n" up to <|im_end|> contains no quote, brace or '+',
 * so it is not built from message content) and unescape \n. */
static void find_default_system(const char *tmpl, char *out, size_t cap) {
    static const char *heads[] = {"<|im_start|>system\\n", "<|im_start|>system\n"};
    out[0] = '\0';
    for (size_t h = 0; h < 2; h++) {
        size_t hl = strlen(heads[h]);
        for (const char *p = strstr(tmpl, heads[h]); p; p = strstr(p + 1, heads[h])) {
            const char *s = p + hl, *e = strstr(s, "<|im_end|>");
            if (!e || e == s) continue;
            bool literal = true;
            for (const char *q = s; q < e; q++)
                if (*q == '\'' || *q == '"' || *q == '{' || *q == '}' || *q == '+') { literal = false; break; }
            if (!literal) continue;
            size_t o = 0;
            for (const char *q = s; q < e && o + 1 < cap; q++) {
                if (q[0] == '\\' && q + 1 < e && q[1] == 'n') { out[o++] = '\n'; q++; }
                else out[o++] = *q;
            }
            out[o] = '\0';
            return;
        }
    }
}

void nb_chat_template_detect(const char *tmpl, nb_chat_template *out) {
    memset(out, 0, sizeof *out);
    out->family = NB_CHAT_GENERIC;
    if (!tmpl || !*tmpl) return;
    if (strstr(tmpl, "<|im_start|>")) {
        out->family = NB_CHAT_CHATML;
        find_default_system(tmpl, out->default_system, sizeof out->default_system);
    } else if (strstr(tmpl, "<|start_header_id|>")) {
        out->family = NB_CHAT_LLAMA3;
    } else if (strstr(tmpl, "<start_of_turn>")) {
        out->family = NB_CHAT_GEMMA;
    } else if (strstr(tmpl, "[INST]")) {
        out->family = strstr(tmpl, "<<SYS>>") ? NB_CHAT_LLAMA2 : NB_CHAT_MISTRAL;
    } else if (strstr(tmpl, "<|user|>")) {
        out->family = NB_CHAT_ZEPHYR;
    }
}

const char *nb_chat_end_of_turn(nb_chat_family f) {
    switch (f) {
    case NB_CHAT_CHATML: return "<|im_end|>";
    case NB_CHAT_LLAMA3: return "<|eot_id|>";
    case NB_CHAT_GEMMA: return "<end_of_turn>";
    default: return NULL;
    }
}

/* ---- rendering ---------------------------------------------------------- */

static const char *role_name(nb_chat_role r) {
    return r == NB_ROLE_SYSTEM ? "system" : r == NB_ROLE_USER ? "user" : "assistant";
}

/* Families whose templates only allow a leading system message. */
static bool system_first_only(nb_chat_family f) {
    return f == NB_CHAT_LLAMA2 || f == NB_CHAT_MISTRAL || f == NB_CHAT_GEMMA;
}

static void render_chatml(sbuf *b, const nb_chat_template *t, const nb_chat_msg *m, size_t n, bool gen) {
    if (m[0].role != NB_ROLE_SYSTEM && t->default_system[0]) {
        sb_add(b, "<|im_start|>system\n");
        sb_add(b, t->default_system);
        sb_add(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|im_start|>");
        sb_add(b, role_name(m[i].role));
        sb_add(b, "\n");
        sb_add(b, m[i].content);
        sb_add(b, "<|im_end|>\n");
    }
    if (gen) sb_add(b, "<|im_start|>assistant\n");
}

/* Meta's Llama-2 chat template: the system prompt is folded into the first
 * user turn inside <<SYS>> markers; every user turn opens with BOS, every
 * assistant turn closes with EOS; contents are strip()ped. The template
 * has no generation prompt: the text ends with " [/INST]". */
static void render_llama2(sbuf *b, const nb_chat_msg *m, size_t n, const char *bos, const char *eos) {
    size_t i = 0;
    const char *sys = NULL;
    if (m[0].role == NB_ROLE_SYSTEM) { sys = m[0].content; i = 1; }
    for (size_t k = i; k < n; k++) {
        sbuf c = {0};
        if (k == i && sys) {
            sb_add(&c, "<<SYS>>\n");
            sb_add(&c, sys);
            sb_add(&c, "\n<</SYS>>\n\n");
        }
        sb_add(&c, m[k].content);
        if (c.oom) { b->oom = true; free(c.p); return; }
        if (m[k].role == NB_ROLE_USER) {
            sb_add(b, bos);
            sb_add(b, "[INST] ");
            sb_add_trim(b, c.p ? c.p : "");
            sb_add(b, " [/INST]");
        } else {
            sb_add(b, " ");
            sb_add_trim(b, c.p ? c.p : "");
            sb_add(b, " ");
            sb_add(b, eos);
        }
        free(c.p);
    }
}

static void render_llama3(sbuf *b, const nb_chat_msg *m, size_t n, bool gen, const char *bos) {
    sb_add(b, bos);
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|start_header_id|>");
        sb_add(b, role_name(m[i].role));
        sb_add(b, "<|end_header_id|>\n\n");
        sb_add_trim(b, m[i].content);
        sb_add(b, "<|eot_id|>");
    }
    if (gen) sb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Mistral-7B-Instruct's template: BOS, "[INST] user [/INST]", "assistant</s>".
 * The original template rejects system messages; like Mistral's later
 * templates we fold a leading system message into the first user turn,
 * followed by a blank line. */
static void render_mistral(sbuf *b, const nb_chat_msg *m, size_t n, const char *bos, const char *eos) {
    size_t i = 0;
    const char *sys = NULL;
    if (m[0].role == NB_ROLE_SYSTEM) { sys = m[0].content; i = 1; }
    sb_add(b, bos);
    bool first_user = true;
    for (size_t k = i; k < n; k++) {
        if (m[k].role == NB_ROLE_USER) {
            sb_add(b, "[INST] ");
            if (first_user && sys) {
                sb_add(b, sys);
                sb_add(b, "\n\n");
            }
            first_user = false;
            sb_add(b, m[k].content);
            sb_add(b, " [/INST]");
        } else {
            sb_add(b, m[k].content);
            sb_add(b, eos);
        }
    }
}

static void render_zephyr(sbuf *b, const nb_chat_msg *m, size_t n, bool gen, const char *eos) {
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|");
        sb_add(b, role_name(m[i].role));
        sb_add(b, "|>\n");
        sb_add(b, m[i].content);
        sb_add(b, eos);
        sb_add(b, "\n");
    }
    if (gen) sb_add(b, "<|assistant|>\n");
}

/* Gemma: BOS, "<start_of_turn>user|model\n" + trimmed content +
 * "<end_of_turn>\n". A leading system message is prepended to the first
 * user turn followed by a blank line (Gemma 3's template). */
static void render_gemma(sbuf *b, const nb_chat_msg *m, size_t n, bool gen, const char *bos) {
    size_t i = 0;
    const char *sys = NULL;
    if (m[0].role == NB_ROLE_SYSTEM) { sys = m[0].content; i = 1; }
    sb_add(b, bos);
    for (size_t k = i; k < n; k++) {
        sb_add(b, "<start_of_turn>");
        sb_add(b, m[k].role == NB_ROLE_ASSISTANT ? "model" : "user");
        sb_add(b, "\n");
        if (k == i && sys) {
            sbuf c = {0};
            sb_add(&c, sys);
            sb_add(&c, "\n\n");
            sb_add(&c, m[k].content);
            if (c.oom) { b->oom = true; free(c.p); return; }
            sb_add_trim(b, c.p);
            free(c.p);
        } else {
            sb_add_trim(b, m[k].content);
        }
        sb_add(b, "<end_of_turn>\n");
    }
    if (gen) sb_add(b, "<start_of_turn>model\n");
}

/* The documented fallback: "System: ...\n\nUser: ...\n\nAssistant: ...\n\n"
 * then "Assistant:" (BOS first when the caller passes one). */
static void render_generic(sbuf *b, const nb_chat_msg *m, size_t n, bool gen, const char *bos) {
    sb_add(b, bos);
    for (size_t i = 0; i < n; i++) {
        sb_add(b, m[i].role == NB_ROLE_SYSTEM ? "System: " : m[i].role == NB_ROLE_USER ? "User: " : "Assistant: ");
        sb_add(b, m[i].content);
        sb_add(b, "\n\n");
    }
    if (gen) sb_add(b, "Assistant:");
}

nb_status nb_chat_render(const nb_chat_template *t, const nb_chat_msg *msgs, size_t n, bool gen, const char *bos,
                         const char *eos, char **out) {
    *out = NULL;
    if (n == 0) return nb_fail(NB_ERR_INVALID, "messages: the list is empty (at least one message is required)");
    if (!bos) bos = "";
    if (!eos) eos = "";
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].content) return nb_fail(NB_ERR_INVALID, "messages[%zu].content: missing", i);
        if (i > 0 && msgs[i].role == NB_ROLE_SYSTEM && system_first_only(t->family))
            return nb_fail(NB_ERR_INVALID,
                           "messages[%zu]: the %s chat template allows a system message only as the first message", i,
                           nb_chat_family_name(t->family));
    }
    if (system_first_only(t->family) && n == 1 && msgs[0].role == NB_ROLE_SYSTEM)
        return nb_fail(NB_ERR_INVALID, "messages: the %s chat template needs a user message after the system message",
                       nb_chat_family_name(t->family));
    sbuf b = {0};
    switch (t->family) {
    case NB_CHAT_CHATML: render_chatml(&b, t, msgs, n, gen); break;
    case NB_CHAT_LLAMA2: render_llama2(&b, msgs, n, bos, eos); break;
    case NB_CHAT_LLAMA3: render_llama3(&b, msgs, n, gen, bos); break;
    case NB_CHAT_MISTRAL: render_mistral(&b, msgs, n, bos, eos); break;
    case NB_CHAT_ZEPHYR: render_zephyr(&b, msgs, n, gen, eos); break;
    case NB_CHAT_GEMMA: render_gemma(&b, msgs, n, gen, bos); break;
    case NB_CHAT_GENERIC: render_generic(&b, msgs, n, gen, bos); break;
    }
    if (b.oom) {
        free(b.p);
        return nb_fail(NB_ERR_NOMEM, "chat template: out of memory rendering %zu messages", n);
    }
    if (!b.p) {
        b.p = nb_strdup("");
        if (!b.p) return NB_ERR_NOMEM;
    }
    *out = b.p;
    return NB_OK;
}
