/* nibble gate: may the candidate replace the baseline? Reads the summaries
 * of eval golden (and optionally eval ppl / eval kld / bench serve), runs
 * the checks of eval/gate.h in order, prints each one and the verdict.
 * Exit 0 accept, 1 reject, 2 bad input. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "eval/gate.h"

#define CMD "gate"

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble gate --base BASE.json --cand CAND.json [inputs] [thresholds] [--json]\n"
            "\n"
            "Inputs:\n"
            "  --base FILE, --cand FILE         golden summaries (summary.json of nibble eval golden)\n"
            "  --kld FILE                       nibble eval kld --json of the candidate against the base\n"
            "  --ppl-base FILE --ppl-cand FILE  nibble eval ppl --json of each\n"
            "  --bench-base FILE --bench-cand FILE  nibble bench serve results.json of each\n"
            "Thresholds (defaults from the acceptance rules of docs/golden.md):\n"
            "  --ppl-delta X        max relative perplexity increase (0.05)\n"
            "  --golden-pass X      min overall pass rate (0.90)\n"
            "  --bucket-floor X     min pass rate of every bucket (0.85)\n"
            "  --json-valid X       min structured-output validity (0.99)\n"
            "  --bucket-drop X      max drop of any bucket below the base's rate (0.05)\n"
            "  --kld-max X          max mean KL divergence, nats (0.05)\n"
            "  --top1-min X         min top-1 agreement (0.90)\n"
            "  --min-bucket-n N     fewer items than this in a bucket fails the gate (20; 0 = off)\n"
            "  --max-p99-ttft-regression X  max (cand p99 TTFT / base) - 1 at any matched level (default: report only)\n"
            "  --min-throughput-gain X      min (best cand output tok/s / best base) - 1 (default: report only)\n"
            "  --json               print the checks and the verdict as JSON\n"
            "\n"
            "Exit codes: 0 accept, 1 reject, 2 bad input.\n");
}

static json_t *load(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j) fprintf(stderr, "nibble %s: %s: %s (line %d, column %d)\n", CMD, path, je.text, je.line, je.column);
    return j;
}

static const char *outcome_str(nb_gate_outcome o) {
    return o == NB_GATE_PASS ? "pass" : o == NB_GATE_FAIL ? "FAIL" : "info";
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int nb_cmd_gate(int argc, char **argv) {
    const char *base = NULL, *cand = NULL, *kld = NULL, *ppl_b = NULL, *ppl_c = NULL, *bench_b = NULL, *bench_c = NULL;
    bool json_out = false;
    nb_gate_thresholds t;
    nb_gate_thresholds_defaults(&t);
    static const struct { const char *flag; size_t off; double lo, hi; } TH[] = {
        {"--ppl-delta", offsetof(nb_gate_thresholds, ppl_delta), -1, 100},
        {"--golden-pass", offsetof(nb_gate_thresholds, golden_pass), 0, 1},
        {"--bucket-floor", offsetof(nb_gate_thresholds, bucket_floor), 0, 1},
        {"--json-valid", offsetof(nb_gate_thresholds, json_valid), 0, 1},
        {"--bucket-drop", offsetof(nb_gate_thresholds, bucket_drop), 0, 1},
        {"--kld-max", offsetof(nb_gate_thresholds, kld_max), 0, 1e6},
        {"--top1-min", offsetof(nb_gate_thresholds, top1_min), 0, 1},
        {"--max-p99-ttft-regression", offsetof(nb_gate_thresholds, max_p99_ttft_regression), -1, 1e6},
        {"--min-throughput-gain", offsetof(nb_gate_thresholds, min_throughput_gain), -1, 1e6},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
#define VAL() do { if (!(val = nb_arg_value(CMD, argc, argv, &i))) return NB_EXIT_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return NB_EXIT_OK; }
        else if (!strcmp(a, "--base")) { VAL(); base = val; }
        else if (!strcmp(a, "--cand")) { VAL(); cand = val; }
        else if (!strcmp(a, "--kld")) { VAL(); kld = val; }
        else if (!strcmp(a, "--ppl-base")) { VAL(); ppl_b = val; }
        else if (!strcmp(a, "--ppl-cand")) { VAL(); ppl_c = val; }
        else if (!strcmp(a, "--bench-base")) { VAL(); bench_b = val; }
        else if (!strcmp(a, "--bench-cand")) { VAL(); bench_c = val; }
        else if (!strcmp(a, "--json")) json_out = true;
        else if (!strcmp(a, "--min-bucket-n")) {
            int64_t v;
            VAL();
            if (!nb_arg_int(CMD, a, val, 0, INT64_MAX / 2, &v)) return NB_EXIT_USAGE;
            t.min_bucket_n = v;
        } else {
            size_t k = 0;
            while (k < sizeof TH / sizeof TH[0] && strcmp(a, TH[k].flag) != 0) k++;
            if (k == sizeof TH / sizeof TH[0]) {
                fprintf(stderr, "nibble %s: unknown option '%s' (see nibble gate --help)\n", CMD, a);
                return NB_EXIT_USAGE;
            }
            double d;
            VAL();
            if (!nb_arg_float(CMD, a, val, TH[k].lo, TH[k].hi, &d)) return NB_EXIT_USAGE;
            *(double *)((char *)&t + TH[k].off) = d;
        }
#undef VAL
    }
    if (!base || !cand) {
        fprintf(stderr, "nibble %s: --base and --cand (golden summaries) are required (see nibble gate --help)\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (!ppl_b != !ppl_c) {
        fprintf(stderr, "nibble %s: give both --ppl-base and --ppl-cand, or neither\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (!bench_b != !bench_c) {
        fprintf(stderr, "nibble %s: give both --bench-base and --bench-cand, or neither\n", CMD);
        return NB_EXIT_USAGE;
    }
    if (!bench_b && (!isnan(t.max_p99_ttft_regression) || !isnan(t.min_throughput_gain))) {
        fprintf(stderr, "nibble %s: --max-p99-ttft-regression / --min-throughput-gain need --bench-base and "
                "--bench-cand\n", CMD);
        return NB_EXIT_USAGE;
    }

    int rc = NB_EXIT_USAGE;
    nb_gate_input in;
    memset(&in, 0, sizeof in);
    nb_gate_result res = {0};
    json_t *jb = NULL, *jc = NULL, *jk = NULL, *jpb = NULL, *jpc = NULL, *jbb = NULL, *jbc = NULL;
    nb_status st;
    if (!(jb = load(base)) || !(jc = load(cand))) goto done;
    if ((st = nb_gate_golden_from_json(jb, base, &in.base)) != NB_OK ||
        (st = nb_gate_golden_from_json(jc, cand, &in.cand)) != NB_OK) {
        nb_cli_error(CMD);
        goto done;
    }
    if (kld) {
        if (!(jk = load(kld))) goto done;
        if (nb_gate_kld_from_json(jk, kld, &in.kld_mean, &in.top1_agreement) != NB_OK) { nb_cli_error(CMD); goto done; }
        in.has_kld = true;
    }
    if (ppl_b) {
        if (!(jpb = load(ppl_b)) || !(jpc = load(ppl_c))) goto done;
        if (nb_gate_ppl_from_json(jpb, ppl_b, &in.ppl_base) != NB_OK ||
            nb_gate_ppl_from_json(jpc, ppl_c, &in.ppl_cand) != NB_OK) {
            nb_cli_error(CMD);
            goto done;
        }
        in.has_ppl = true;
    }
    if (bench_b) {
        if (!(jbb = load(bench_b)) || !(jbc = load(bench_c))) goto done;
        if (nb_gate_bench_from_json(jbb, jbc, bench_b, bench_c, &in.bench) != NB_OK) { nb_cli_error(CMD); goto done; }
        in.has_bench = true;
    }
    if (nb_gate_evaluate(&in, &t, &res) != NB_OK) {
        nb_cli_error(CMD);
        rc = NB_EXIT_FAIL;
        goto done;
    }
    const nb_gate_check *ff = res.first_fail >= 0 ? &res.checks[res.first_fail] : NULL;
    if (json_out) {
        json_t *o = json_object(), *cs = json_array();
        for (size_t i = 0; i < res.n_checks; i++) {
            const nb_gate_check *c = &res.checks[i];
            json_t *x = json_object();
            json_object_set_new(x, "check", json_string(c->name));
            json_object_set_new(x, "bucket", c->subject[0] ? json_string(c->subject) : json_null());
            json_object_set_new(x, "value", num(c->value));
            json_object_set_new(x, "op", json_string(c->op));
            json_object_set_new(x, "threshold", num(c->threshold));
            json_object_set_new(x, "result", json_string(c->outcome == NB_GATE_PASS ? "pass"
                                                         : c->outcome == NB_GATE_FAIL ? "fail" : "info"));
            json_object_set_new(x, "detail", json_string(c->reason));
            json_array_append_new(cs, x);
        }
        json_object_set_new(o, "verdict", json_string(res.accept ? "accept" : "reject"));
        json_object_set_new(o, "reason", ff ? json_string(ff->reason) : json_null());
        json_object_set_new(o, "first_failure", ff ? json_incref(json_array_get(cs, (size_t)res.first_fail)) : json_null());
        json_object_set_new(o, "checks", cs);
        char *s = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        if (s) puts(s);
        free(s);
    } else {
        printf("nibble gate: base %s (%lld items, %.1f%%), candidate %s (%lld items, %.1f%%)\n", base,
               (long long)in.base.n, 100 * in.base.pass_rate, cand, (long long)in.cand.n, 100 * in.cand.pass_rate);
        printf("  %-20s %-16s %10s %14s  %s\n", "check", "bucket", "value", "threshold", "result");
        for (size_t i = 0; i < res.n_checks; i++) {
            const nb_gate_check *c = &res.checks[i];
            char val[32], th[40];
            if (isfinite(c->value)) snprintf(val, sizeof val, "%.4f", c->value);
            else snprintf(val, sizeof val, "-");
            if (isfinite(c->threshold)) snprintf(th, sizeof th, "%s %.4g", c->op, c->threshold);
            else snprintf(th, sizeof th, "-");
            printf("  %-20s %-16s %10s %14s  %-4s  %s\n", c->name, c->subject[0] ? c->subject : "-", val, th,
                   outcome_str(c->outcome), c->reason);
        }
        if (ff) {
            char th[40] = "";
            if (isfinite(ff->threshold)) snprintf(th, sizeof th, " (%s %.4g required)", ff->op, ff->threshold);
            printf("verdict: REJECT\nreason: %s%s%s: %s%s\n", ff->name, ff->subject[0] ? " " : "", ff->subject,
                   ff->reason, th);
        } else {
            printf("verdict: ACCEPT (all %zu checks passed)\n", res.n_checks);
        }
    }
    rc = res.accept ? NB_EXIT_OK : NB_EXIT_FAIL;
done:
    nb_gate_result_free(&res);
    nb_gate_golden_free(&in.base);
    nb_gate_golden_free(&in.cand);
    json_decref(jb);
    json_decref(jc);
    json_decref(jk);
    json_decref(jpb);
    json_decref(jpc);
    json_decref(jbb);
    json_decref(jbc);
    return rc;
}
