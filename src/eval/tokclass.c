/* Token classes by regex over token texts (see tokclass.h). */
#include "eval/tokclass.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const builtin_names[NB_TOKCLASS_BUILTIN] = {"digit", "punct", "space", "word", "other"};
static const char *const builtin_re[NB_TOKCLASS_BUILTIN] = {"[0-9]", "[!-/:-@\\[-`{-~]", "^\\s+$", "\\p{L}", NULL};
#define OTHER 4

static nb_status compile(nb_tokclass_set *s, const char *name, const char *re, size_t re_len) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, re_len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off,
                                  NULL);
    if (!c) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return nb_fail(NB_ERR_INVALID, "--class %s: the regex '%.*s' does not compile at offset %zu: %s", name,
                       (int)re_len, re, (size_t)off, (const char *)msg);
    }
    s->re[s->n] = c;
    snprintf(s->names[s->n], NB_TOKCLASS_NAME_MAX, "%s", name);
    s->n++;
    return NB_OK;
}

nb_status nb_tokclass_init(nb_tokclass_set *s) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < NB_TOKCLASS_BUILTIN; i++) {
        if (!builtin_re[i]) {
            snprintf(s->names[s->n], NB_TOKCLASS_NAME_MAX, "%s", builtin_names[i]);
            s->re[s->n++] = NULL;
            continue;
        }
        nb_status st = compile(s, builtin_names[i], builtin_re[i], strlen(builtin_re[i]));
        if (st != NB_OK) { nb_tokclass_free(s); return st; }
    }
    s->md = pcre2_match_data_create(4, NULL);
    if (!s->md) { nb_tokclass_free(s); return nb_fail(NB_ERR_NOMEM, "out of memory for regex match data"); }
    return NB_OK;
}

void nb_tokclass_free(nb_tokclass_set *s) {
    for (int i = 0; i < s->n; i++) pcre2_code_free(s->re[i]);
    pcre2_match_data_free(s->md);
    memset(s, 0, sizeof *s);
}

nb_status nb_tokclass_add(nb_tokclass_set *s, const char *spec) {
    const char *eq = strchr(spec, '=');
    if (!eq) return nb_fail(NB_ERR_INVALID, "--class '%s': expected NAME=REGEX", spec);
    size_t nl = (size_t)(eq - spec);
    if (nl == 0 || nl >= NB_TOKCLASS_NAME_MAX)
        return nb_fail(NB_ERR_INVALID, "--class '%s': the name must have 1..%d characters", spec, NB_TOKCLASS_NAME_MAX - 1);
    char name[NB_TOKCLASS_NAME_MAX];
    memcpy(name, spec, nl);
    name[nl] = '\0';
    for (size_t i = 0; i < nl; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return nb_fail(NB_ERR_INVALID, "--class '%s': the name may use only letters, digits, '_', '-', '.'", spec);
    }
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name))
            return nb_fail(NB_ERR_INVALID, "--class %s: the class already exists (built-in: digit, punct, space, word, "
                           "other)", name);
    if (s->n >= NB_TOKCLASS_MAX)
        return nb_fail(NB_ERR_RANGE, "--class %s: at most %d classes (%d built in)", name, NB_TOKCLASS_MAX,
                       NB_TOKCLASS_BUILTIN);
    if (!eq[1]) return nb_fail(NB_ERR_INVALID, "--class %s: the regex is empty", name);
    return compile(s, name, eq + 1, strlen(eq + 1));
}

uint32_t nb_tokclass_match(nb_tokclass_set *s, const char *text, size_t len) {
    uint32_t m = 0;
    for (int i = 0; i < s->n; i++) {
        if (!s->re[i]) continue;
        int rc = pcre2_match(s->re[i], (PCRE2_SPTR)(text ? text : ""), len, 0, 0, s->md, NULL);
        if (rc >= 0) m |= 1u << i;
    }
    if (!(m & ((1u << OTHER) - 1))) m |= 1u << OTHER;
    return m;
}

nb_status nb_tokclass_table(nb_tokclass_set *s, const nb_tokenizer *t, int32_t n_vocab, uint32_t **masks) {
    *masks = NULL;
    uint32_t *m = nb_malloc((size_t)(n_vocab > 0 ? n_vocab : 1) * sizeof *m);
    if (!m) return NB_ERR_NOMEM;
    int32_t nt = nb_tokenizer_n_vocab(t);
    for (int32_t id = 0; id < n_vocab; id++) {
        size_t len = 0;
        const char *p = id < nt ? nb_token_piece_ref(t, id, false, &len) : NULL;
        m[id] = nb_tokclass_match(s, p ? p : "", p ? len : 0);
    }
    *masks = m;
    return NB_OK;
}
