/* Prompts and request bodies (workload.h). */
#include "bench/workload.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stats.h"

/* Common English words: with a leading space each is a single token in the
 * usual BPE and SentencePiece vocabularies. */
static const char *const WORDS[] = {
    "the", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as", "his", "they",
    "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what", "some", "we", "can",
    "out", "other", "were", "all", "there", "when", "up", "use", "your", "how", "said", "an", "each", "she",
    "which", "do", "their", "time", "if", "will", "way", "about", "many", "then", "them", "would", "write",
    "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day",
    "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water",
    "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part",
    "take", "get", "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year",
    "came", "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just", "form",
    "great", "think", "say", "help", "low", "line", "before", "turn", "cause", "same", "mean", "move", "right",
    "boy", "old", "too", "does", "tell", "set", "three", "want", "air", "well", "also", "play", "small", "end",
    "put", "home", "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must", "big",
    "high", "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need",
    "house", "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self",
    "earth", "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow",
    "study", "still", "learn", "plant", "cover", "food", "sun", "four", "thought", "let", "keep", "eye", "never",
    "last", "door", "between", "city", "tree", "cross", "since", "hard", "start", "might", "story", "saw", "far",
    "sea", "draw", "left", "late", "run", "while", "press", "close", "night", "real", "life", "few", "stop"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

void nb_bench_workload_init(nb_bench_workload *w) {
    memset(w, 0, sizeof *w);
    w->in_lo = w->in_hi = 128;
    w->out_lo = w->out_hi = 128;
    w->temperature = 0;
}

void nb_bench_workload_free(nb_bench_workload *w) {
    for (size_t i = 0; i < w->n_items; i++) {
        free(w->items[i].prompt);
        free(w->items[i].messages_json);
    }
    free(w->items);
    w->items = NULL;
    w->n_items = 0;
    if (w->extra) json_decref(w->extra);
    w->extra = NULL;
}

nb_status nb_bench_workload_set_extra(nb_bench_workload *w, const char *text_or_file) {
    json_error_t err;
    json_t *o = text_or_file[0] == '@' ? json_load_file(text_or_file + 1, JSON_REJECT_DUPLICATES, &err)
                                       : json_loads(text_or_file, JSON_REJECT_DUPLICATES, &err);
    if (!o) {
        if (err.line < 1) return nb_fail(NB_ERR_INVALID, "--extra-body: %s", err.text); /* the file did not open */
        return nb_fail(NB_ERR_INVALID, "--extra-body%s%s: not JSON (line %d: %s)", text_or_file[0] == '@' ? " " : "",
                       text_or_file[0] == '@' ? text_or_file + 1 : "", err.line, err.text);
    }
    if (!json_is_object(o)) {
        json_decref(o);
        return nb_fail(NB_ERR_INVALID, "--extra-body: expected a JSON object of request fields");
    }
    if (json_object_get(o, "stream")) {
        json_decref(o);
        return nb_fail(NB_ERR_INVALID, "--extra-body: 'stream' is the benchmark's own (every request streams)");
    }
    if (w->extra) json_decref(w->extra);
    w->extra = o;
    return NB_OK;
}

nb_status nb_bench_workload_load(nb_bench_workload *w, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return nb_fail(NB_ERR_IO, "--prompts %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, n = 0, alloc = 0;
    ssize_t len;
    long lineno = 0;
    nb_status st = NB_OK;
    nb_bench_item *items = NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t k = (size_t)len;
        while (k && (line[k - 1] == '\n' || line[k - 1] == '\r' || line[k - 1] == ' ' || line[k - 1] == '\t')) k--;
        if (k == 0) continue;
        json_error_t je;
        json_t *o = json_loadb(line, k, 0, &je);
        if (!o || !json_is_object(o)) {
            st = nb_fail(NB_ERR_FORMAT, "--prompts %s: line %ld: %s", path, lineno,
                         o ? "not a JSON object" : je.text);
            json_decref(o);
            break;
        }
        nb_bench_item it = {0};
        json_t *p = json_object_get(o, "prompt"), *m = json_object_get(o, "messages"),
               *mt = json_object_get(o, "max_tokens");
        if (json_is_string(p)) it.prompt = nb_strdup(json_string_value(p));
        else if (json_is_array(m) && json_array_size(m) > 0) it.messages_json = json_dumps(m, JSON_COMPACT);
        else {
            st = nb_fail(NB_ERR_FORMAT,
                         "--prompts %s: line %ld: needs \"prompt\" (a string) or \"messages\" (a non-empty array)",
                         path, lineno);
            json_decref(o);
            break;
        }
        if (mt) {
            if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
                st = nb_fail(NB_ERR_FORMAT, "--prompts %s: line %ld: \"max_tokens\" must be a positive integer",
                             path, lineno);
                free(it.prompt);
                free(it.messages_json);
                json_decref(o);
                break;
            }
            it.max_tokens = json_integer_value(mt);
        }
        json_decref(o);
        if (!it.prompt && !it.messages_json) { st = nb_fail(NB_ERR_NOMEM, "--prompts: out of memory"); break; }
        if (n == alloc) {
            size_t na = alloc ? alloc * 2 : 64;
            nb_bench_item *ni = nb_realloc(items, na * sizeof *ni);
            if (!ni) { free(it.prompt); free(it.messages_json); st = NB_ERR_NOMEM; break; }
            items = ni;
            alloc = na;
        }
        items[n++] = it;
    }
    free(line);
    fclose(f);
    if (st == NB_OK && n == 0) st = nb_fail(NB_ERR_FORMAT, "--prompts %s: no prompts in the file", path);
    if (st != NB_OK) {
        for (size_t i = 0; i < n; i++) { free(items[i].prompt); free(items[i].messages_json); }
        free(items);
        return st;
    }
    w->items = items;
    w->n_items = n;
    return NB_OK;
}

char *nb_bench_workload_body(const nb_bench_workload *w, uint64_t idx, int64_t *in_words, int64_t *max_tokens) {
    nb_bench_rng r;
    nb_bench_rng_seed(&r, w->seed * 0x9e3779b97f4a7c15ull + idx);
    json_t *o = json_object();
    if (w->model) json_object_set_new(o, "model", json_string(w->model));
    int64_t mt = 0;
    *in_words = 0;
    if (w->n_items) {
        const nb_bench_item *it = &w->items[idx % w->n_items];
        mt = it->max_tokens;
        if (it->messages_json) {
            json_t *m = json_loads(it->messages_json, 0, NULL);
            if (w->chat) json_object_set_new(o, "messages", m);
            else { /* completions from a chat line: the messages' text, joined */
                char *s = NULL;
                size_t sl = 0;
                FILE *mf = open_memstream(&s, &sl);
                size_t i;
                json_t *e;
                json_array_foreach(m, i, e) {
                    json_t *c = json_object_get(e, "content");
                    if (json_is_string(c) && mf) fprintf(mf, "%s%s", i ? "\n" : "", json_string_value(c));
                }
                if (mf) fclose(mf);
                json_object_set_new(o, "prompt", json_string(s ? s : ""));
                free(s);
                json_decref(m);
            }
        } else if (w->chat) {
            json_object_set_new(o, "messages", json_pack("[{s:s, s:s}]", "role", "user", "content", it->prompt));
        } else {
            json_object_set_new(o, "prompt", json_string(it->prompt));
        }
    } else {
        int64_t nw = nb_bench_rng_range(&r, w->in_lo, w->in_hi);
        *in_words = nw;
        size_t cap = (size_t)nw * 9 + 1, l = 0;
        char *s = malloc(cap);
        if (!s) { json_decref(o); return NULL; }
        for (int64_t i = 0; i < nw; i++) {
            const char *wd = WORDS[nb_bench_rng_next(&r) % N_WORDS];
            size_t k = strlen(wd);
            if (i) s[l++] = ' ';
            memcpy(s + l, wd, k);
            l += k;
        }
        s[l] = '\0';
        if (w->chat) json_object_set_new(o, "messages", json_pack("[{s:s, s:s}]", "role", "user", "content", s));
        else json_object_set_new(o, "prompt", json_string(s));
        free(s);
    }
    if (w->out_lo > 0 && (mt == 0 || w->n_items == 0)) mt = nb_bench_rng_range(&r, w->out_lo, w->out_hi);
    *max_tokens = mt;
    if (mt > 0) json_object_set_new(o, "max_tokens", json_integer(mt));
    if (w->temperature >= 0) json_object_set_new(o, "temperature", json_real(w->temperature));
    if (w->ignore_eos) json_object_set_new(o, "ignore_eos", json_true());
    json_object_set_new(o, "stream", json_true());
    json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (w->extra) json_object_update(o, w->extra);
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return body;
}
