/* Prometheus text -> the server view (prom.h). */
#include "bench/prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct known {
    const char *name, *flavor;
    nb_prom_field f;
} known;

static const known KNOWN[] = {
    {"nibble:num_requests_running", "nibble", NB_PROM_RUNNING},
    {"nibble:num_requests_waiting", "nibble", NB_PROM_WAITING},
    {"nibble:kv_cache_usage_perc", "nibble", NB_PROM_KV_USAGE},
    {"nibble:num_preemptions_total", "nibble", NB_PROM_PREEMPTIONS},
    {"nibble:prompt_tokens_total", "nibble", NB_PROM_PROMPT_TOKENS},
    {"nibble:generation_tokens_total", "nibble", NB_PROM_GENERATION_TOKENS},
    {"nibble:request_success_total", "nibble", NB_PROM_REQUESTS},
    {"vllm:num_requests_running", "vllm", NB_PROM_RUNNING},
    {"vllm:num_requests_waiting", "vllm", NB_PROM_WAITING},
    {"vllm:kv_cache_usage_perc", "vllm", NB_PROM_KV_USAGE},
    {"vllm:gpu_cache_usage_perc", "vllm", NB_PROM_KV_USAGE},
    {"vllm:num_preemptions_total", "vllm", NB_PROM_PREEMPTIONS},
    {"vllm:prompt_tokens_total", "vllm", NB_PROM_PROMPT_TOKENS},
    {"vllm:generation_tokens_total", "vllm", NB_PROM_GENERATION_TOKENS},
    {"vllm:request_success_total", "vllm", NB_PROM_REQUESTS},
    {"llamacpp:requests_processing", "llamacpp", NB_PROM_RUNNING},
    {"llamacpp:requests_deferred", "llamacpp", NB_PROM_WAITING},
    {"llamacpp:kv_cache_usage_ratio", "llamacpp", NB_PROM_KV_USAGE},
    {"llamacpp:prompt_tokens_total", "llamacpp", NB_PROM_PROMPT_TOKENS},
    {"llamacpp:tokens_predicted_total", "llamacpp", NB_PROM_GENERATION_TOKENS},
};

const char *nb_prom_field_name(nb_prom_field f) {
    static const char *const names[NB_PROM_COUNT] = {"running", "waiting", "kv_usage", "preemptions",
                                                     "prompt_tokens", "generation_tokens", "requests"};
    return (unsigned)f < NB_PROM_COUNT ? names[f] : "?";
}

static void line(nb_prom *o, const char *l, size_t n) {
    if (n == 0 || l[0] == '#') return;
    size_t k = 0;
    while (k < n && l[k] != '{' && l[k] != ' ' && l[k] != '\t') k++;
    const known *m = NULL;
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (strlen(KNOWN[i].name) == k && !memcmp(KNOWN[i].name, l, k)) { m = &KNOWN[i]; break; }
    if (!m) return;
    size_t p = k;
    if (p < n && l[p] == '{') { /* skip labels, honouring quoted values with escapes */
        bool q = false;
        for (p++; p < n; p++) {
            if (q && l[p] == '\\') { p++; continue; }
            if (l[p] == '"') q = !q;
            else if (!q && l[p] == '}') break;
        }
        if (p >= n) return;
        p++;
    }
    while (p < n && (l[p] == ' ' || l[p] == '\t')) p++;
    char num[64];
    size_t j = 0;
    while (p < n && l[p] != ' ' && l[p] != '\t' && j + 1 < sizeof num) num[j++] = l[p++];
    num[j] = '\0';
    char *end;
    double v = strtod(num, &end);
    if (j == 0 || *end != '\0' || isnan(v)) return;
    if (m->f == NB_PROM_KV_USAGE) o->v[m->f] = o->has[m->f] ? fmax(o->v[m->f], v) : v;
    else o->v[m->f] += v;
    o->has[m->f] = true;
    if (!o->flavor) o->flavor = m->flavor;
}

void nb_prom_parse(const char *text, size_t n, nb_prom *out) {
    memset(out, 0, sizeof *out);
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && text[j] != '\n') j++;
        size_t e = j;
        if (e > i && text[e - 1] == '\r') e--;
        line(out, text + i, e - i);
        i = j + 1;
    }
}
