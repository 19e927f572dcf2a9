/* nibble eval golden: run a golden set on a model (in-process) or against
 * an OpenAI-compatible endpoint, judge every item, summarize by bucket
 * (docs/golden.md). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/golden.h"
#include "eval/golden_run.h"
#include "server/openai.h"

#define CMD "eval golden"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble eval golden [MODEL | --endpoint URL [--model NAME]] --set FILE.jsonl [options]\n"
            "\n"
            "  MODEL                 GGUF file, HF directory or llama2.c .bin (default: the built-in model)\n"
            "      --endpoint URL    an OpenAI-compatible server (http://host:port or http://host:port/v1)\n"
            "      --model NAME      the endpoint's model name (default: the first of GET /v1/models)\n"
            "      --api-key KEY     Bearer token for the endpoint (default: $OPENAI_API_KEY if set)\n"
            "      --set FILE        the golden set, one JSON item per line (docs/golden.md)\n"
            "      --out DIR         write DIR/items.jsonl and DIR/summary.json (all or nothing)\n"
            "      --force           write --out even when it is the model's directory, or its files are inputs\n"
            "                        or not regular files (refused by default)\n"
            "      --json            print summary.json to stdout instead of the table\n"
            "      --parallel N      items in flight: engine sequences or HTTP requests (default 8)\n"
            "      --seed S          sampling seed sent with every request (default 0; decoding is greedy)\n"
            "      --tokenizer PATH  tokenizer file (in-process)\n"
            "  -t, --threads N       threads (in-process)\n"
            "      --max-model-len N longest prompt + output (in-process; default the model's, at most 4096)\n"
            "      --timeout S       per request (endpoint; default 300)\n"
            "\n"
            "Exit codes: 0 done (whatever the pass rate), 1 runtime failure, 2 bad input (set, flags,\n"
            "unreachable endpoint, an endpoint without prompt logprobs for choice items).\n");
}

/* A JSON string of text, invalid UTF-8 replaced by U+FFFD. */
static json_t *utf8_json(const char *s, size_t n) {
    size_t l;
    char *c = nb_utf8_sanitize(s, n, &l);
    json_t *j = c ? json_stringn(c, l) : NULL;
    free(c);
    return j ? j : json_null();
}

static int fail_st(nb_status st) {
    nb_cli_error(CMD);
    return nb_cli_exit_code(st);
}

/* dir holds nothing but a previous run's items.jsonl and summary.json. */
static bool dir_is_ours(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    bool ours = d != NULL;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "items.jsonl") &&
            strcmp(e->d_name, "summary.json"))
            ours = false;
    if (d) closedir(d);
    return ours;
}

/* The output rule (base/file.h) before anything runs: --out is not a
 * device, a FIFO or a regular file, not the model's directory, and its
 * items.jsonl / summary.json are not inputs; an existing --out holds
 * nothing else (it is replaced as a whole). */
static int check_out(const char *dir, const char *set_path, const char *model, bool force) {
    static const char *const names[] = {"items.jsonl", "summary.json"};
    const char *ins[] = {set_path, model};
    if (nb_out_dir_check(dir, names, 2, ins, 2, force, "--out") != NB_OK) {
        nb_cli_error(CMD);
        return NB_EXIT_USAGE;
    }
    if (nb_is_dir(dir) && !dir_is_ours(dir)) {
        fprintf(stderr, "nibble %s: --out %s exists and holds other files; not replacing it\n", CMD, dir);
        return NB_EXIT_USAGE;
    }
    return NB_EXIT_OK;
}

/* Writes both files into a fresh sibling of dir, then renames it into place
 * (replacing a previous run's output directory). */
static int write_out(const char *dir, const char *items, size_t items_len, const char *summary) {
    char tmp[4200], f1[4300], f2[4300];
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    if (dl > 4000) {
        fprintf(stderr, "nibble %s: --out: path too long\n", CMD);
        return NB_EXIT_USAGE;
    }
    snprintf(tmp, sizeof tmp, "%.*s.tmp-XXXXXX", (int)dl, dir);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "nibble %s: --out %s: cannot create a temporary directory beside it: %s\n", CMD, dir,
                strerror(errno));
        return NB_EXIT_USAGE;
    }
    snprintf(f1, sizeof f1, "%s/items.jsonl", tmp);
    snprintf(f2, sizeof f2, "%s/summary.json", tmp);
    if (nb_write_file(f1, items, items_len) != NB_OK || nb_write_file(f2, summary, strlen(summary)) != NB_OK) {
        nb_cli_error(CMD);
        unlink(f1);
        unlink(f2);
        rmdir(tmp);
        return NB_EXIT_FAIL;
    }
    char target[4200];
    snprintf(target, sizeof target, "%.*s", (int)dl, dir);
    if (nb_is_dir(target)) {
        /* replace a previous output directory, but only one that holds nothing else */
        if (!dir_is_ours(target)) {
            fprintf(stderr, "nibble %s: --out %s exists and holds other files; not replacing it\n", CMD, target);
            unlink(f1);
            unlink(f2);
            rmdir(tmp);
            return NB_EXIT_USAGE;
        }
        char old1[4300], old2[4300];
        snprintf(old1, sizeof old1, "%s/items.jsonl", target);
        snprintf(old2, sizeof old2, "%s/summary.json", target);
        unlink(old1);
        unlink(old2);
        rmdir(target);
    }
    if (nb_file_commit(tmp, target) != NB_OK) { /* fsync, rename, fsync the parent directory */
        nb_cli_error(CMD);
        unlink(f1);
        unlink(f2);
        rmdir(tmp);
        return NB_EXIT_FAIL;
    }
    return NB_EXIT_OK;
}

int nb_cmd_eval_golden(int argc, char **argv) {
    nb_golden_run_params rp = {0};
    const char *set_path = NULL, *out_dir = NULL;
    bool json_out = false, force = false;
    int64_t v;
    double d;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VAL() do { if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        else if (!strcmp(a, "--endpoint")) { VAL(); rp.endpoint = val; }
        else if (!strcmp(a, "--model")) { VAL(); rp.model_name = val; }
        else if (!strcmp(a, "--api-key")) { VAL(); rp.api_key = val; }
        else if (!strcmp(a, "--set")) { VAL(); set_path = val; }
        else if (!strcmp(a, "--out")) { VAL(); out_dir = val; }
        else if (!strcmp(a, "--json")) json_out = true;
        else if (!strcmp(a, "--force")) force = true;
        else if (!strcmp(a, "--tokenizer")) { VAL(); rp.tokenizer_path = val; }
        else if (!strcmp(a, "--parallel")) {
            VAL();
            if (!nb_arg_int(CMD, a, val, 1, 1024, &v)) return NB_EXIT_USAGE;
            rp.parallel = (int)v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            VAL();
            if (!nb_arg_int(CMD, a, val, 1, 512, &v)) return NB_EXIT_USAGE;
            rp.n_threads = (int)v;
        } else if (!strcmp(a, "--max-model-len")) {
            VAL();
            if (!nb_arg_int(CMD, a, val, 16, 1 << 22, &v)) return NB_EXIT_USAGE;
            rp.max_model_len = (int32_t)v;
        } else if (!strcmp(a, "--seed")) {
            VAL();
            if (!nb_arg_int(CMD, a, val, 0, INT64_MAX, &v)) return NB_EXIT_USAGE;
            rp.seed = (uint64_t)v;
        } else if (!strcmp(a, "--timeout")) {
            VAL();
            if (!nb_arg_float(CMD, a, val, 0.1, 86400, &d)) return NB_EXIT_USAGE;
            rp.timeout_s = d;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble %s: unknown option '%s' (see nibble eval golden --help)\n", CMD, a);
            return NB_EXIT_USAGE;
        } else if (!rp.model_path) rp.model_path = a;
        else {
            fprintf(stderr, "nibble %s: one model only (got '%s' and '%s')\n", CMD, rp.model_path, a);
            return NB_EXIT_USAGE;
        }
#undef VAL
    }
    if (!set_path) {
        fprintf(stderr, "nibble %s: --set FILE.jsonl is required (see nibble eval golden --help)\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (out_dir && check_out(out_dir, set_path, rp.model_path, force) != NB_EXIT_OK) return NB_EXIT_USAGE;
    if (rp.endpoint && rp.model_path) {
        fprintf(stderr, "nibble %s: give a MODEL or --endpoint, not both (--model NAME names the endpoint's model)\n",
                CMD);
        return NB_EXIT_USAGE;
    }
    if (rp.model_name && !rp.endpoint) {
        fprintf(stderr, "nibble %s: --model names an endpoint's model; for a local model give its path as MODEL\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (rp.endpoint && !rp.api_key) rp.api_key = getenv("OPENAI_API_KEY");

    nb_golden_set set;
    nb_status st = nb_golden_set_load(set_path, &set);
    if (st != NB_OK) return fail_st(st);
    nb_golden_out *outs = NULL;
    nb_golden_ident id;
    st = nb_golden_run(&set, &rp, &outs, &id);
    if (st != NB_OK) {
        nb_golden_set_free(&set);
        return fail_st(st);
    }

    int rc = NB_EXIT_FAIL;
    nb_golden_summary sum = {0};
    char *items = NULL, *summary = NULL;
    size_t items_len = 0;
    FILE *mf = open_memstream(&items, &items_len);
    json_t *sj = NULL;
    if (!mf) goto done;
    for (size_t i = 0; i < set.n_items; i++) {
        const nb_golden_item *it = &set.items[i];
        nb_golden_out *o = &outs[i];
        nb_golden_verdict vd;
        if (o->failed) {
            memset(&vd, 0, sizeof vd);
            snprintf(vd.reason, sizeof vd.reason, "error: %s", o->error);
        } else if (it->check.kind == NB_GCHK_CHOICE) {
            nb_golden_judge_choice(&it->check, o->loglik, &vd);
        } else {
            nb_golden_judge(&it->check, o->text ? o->text : "", o->len, &vd);
            if (it->involves_json) vd.json_ok = nb_golden_json_parses(o->text ? o->text : "", o->len);
        }
        if (nb_golden_summary_add(&sum, it, &vd) != NB_OK) { nb_cli_error(CMD); goto done; }
        json_t *line = json_object();
        json_object_set_new(line, "id", json_string(it->id));
        json_object_set_new(line, "bucket", json_string(it->bucket));
        json_object_set_new(line, "pass", json_boolean(vd.pass));
        json_object_set_new(line, "reason", utf8_json(vd.reason, strlen(vd.reason)));
        json_object_set_new(line, "output", o->text ? utf8_json(o->text, o->len) : json_null());
        if (it->involves_json) json_object_set_new(line, "json_valid", json_boolean(vd.json_ok));
        if (it->check.kind == NB_GCHK_CHOICE && o->loglik) {
            json_t *ll = json_array();
            for (size_t k = 0; k < it->check.n_options; k++) json_array_append_new(ll, json_real(o->loglik[k]));
            json_object_set_new(line, "loglik", ll);
        }
        char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(line);
        if (!s) { fprintf(stderr, "nibble %s: out of memory\n", CMD); goto done; }
        fprintf(mf, "%s\n", s);
        free(s);
    }
    fclose(mf);
    mf = NULL;
    sj = nb_golden_summary_json(&sum);
    json_t *setj = json_object();
    json_object_set_new(setj, "path", json_string(set.path));
    json_object_set_new(setj, "sha256", json_string(set.sha256));
    json_object_set_new(setj, "n", json_integer((json_int_t)set.n_items));
    json_object_set_new(sj, "set", setj);
    if (rp.endpoint) {
        json_t *ep = json_object();
        json_object_set_new(ep, "url", json_string(id.endpoint));
        json_object_set_new(ep, "model", id.model_name[0] ? json_string(id.model_name) : json_null());
        json_object_set_new(sj, "endpoint", ep);
    } else {
        json_t *m = json_object();
        json_object_set_new(m, "path", json_string(id.model_path));
        json_object_set_new(m, "sha256", id.sha256[0] ? json_string(id.sha256) : json_null());
        json_object_set_new(m, "type", json_string(id.type));
        json_object_set_new(sj, "model", m);
    }
    json_t *par = json_object();
    json_object_set_new(par, "temperature", json_real(0));
    json_object_set_new(par, "seed", json_integer((json_int_t)rp.seed));
    json_object_set_new(par, "default_max_tokens", json_integer(NB_GOLDEN_DEFAULT_MAX_TOKENS));
    json_object_set_new(par, "parallel", json_integer(rp.parallel > 0 ? rp.parallel : 8));
    json_object_set_new(par, "choice_scoring", json_string("sum of continuation log-probabilities"));
    json_object_set_new(sj, "parameters", par);
    summary = json_dumps(sj, JSON_INDENT(2));
    if (!summary) goto done;
    if (out_dir) {
        size_t sl = strlen(summary);
        char *s2 = realloc(summary, sl + 2);
        if (!s2) goto done;
        summary = s2;
        memcpy(summary + sl, "\n", 2);
        rc = write_out(out_dir, items ? items : "", items_len, summary);
        if (rc != NB_EXIT_OK) goto done;
    }
    if (json_out) {
        fputs(summary, stdout);
        if (!out_dir) fputc('\n', stdout);
    } else {
        printf("golden set %s: %zu items, %s\n", set.path, set.n_items,
               rp.endpoint ? id.endpoint : id.model_path);
        printf("  %-24s %6s %6s %8s\n", "bucket", "n", "pass", "rate");
        for (size_t b = 0; b < sum.n_buckets; b++)
            printf("  %-24s %6lld %6lld %7.1f%%\n", sum.buckets[b].name, (long long)sum.buckets[b].n,
                   (long long)sum.buckets[b].n_pass,
                   100.0 * (double)sum.buckets[b].n_pass / (double)sum.buckets[b].n);
        printf("  %-24s %6lld %6lld %7.1f%%\n", "overall", (long long)sum.n, (long long)sum.n_pass,
               100.0 * (double)sum.n_pass / (double)sum.n);
        if (sum.n_json)
            printf("  json valid: %lld of %lld JSON items (%.1f%%)\n", (long long)sum.n_json_ok, (long long)sum.n_json,
                   100.0 * (double)sum.n_json_ok / (double)sum.n_json);
        else printf("  json valid: no item's check involves JSON\n");
        if (out_dir) printf("  wrote %s/items.jsonl and %s/summary.json\n", out_dir, out_dir);
    }
    rc = NB_EXIT_OK;
done:
    if (mf) fclose(mf);
    json_decref(sj);
    free(items);
    free(summary);
    nb_golden_summary_free(&sum);
    nb_golden_outs_free(outs, set.n_items);
    nb_golden_set_free(&set);
    return rc;
}
