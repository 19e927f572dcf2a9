/* nibble plan: the memory account for a model on a card (src/plan), as the
 * seeds' three steps or JSON, or several weight schemes side by side
 * (--compare). Exit 0 when the configuration fits (warnings included), 2 on
 * a refusal (the pool cannot hold one max_model_len sequence) or a usage
 * error, 1 on other failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "plan/plan.h"

#define CMD "plan"
#define MAX_COMPARE 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: nibble plan [--model] MODEL (--gpu ID | --gpu-mem SIZE | --host) [options]\n"
            "\n"
            "MODEL is a preset (--list-models), a GGUF file (exact tensor sizes), an HF model\n"
            "directory or its config.json (quantization_config picks the scheme).\n"
            "\n"
            "hardware:\n"
            "  --gpu ID                 card preset (--list-gpus): capacity and FP8 path\n"
            "  --gpu-mem SIZE           memory per card, e.g. 32GiB, 80GB (overrides the preset's)\n"
            "  --host                   the CPU engine: capacity = MemTotal of /proc/meminfo, or this\n"
            "                           process's cgroup memory limit where that is lower\n"
            "  --tp N                   tensor-parallel size (default 1, or --gpus)\n"
            "  --gpus N                 cards in all, a multiple of --tp (replicas = gpus / tp)\n"
            "weights and KV:\n"
            "  --weights SCHEME         %s\n"
            "  --group-size N           scales per N weights (int4/int8; 0 = per channel)\n"
            "  --keep LIST              tensors left unquantized: embed,lm_head,router or none\n"
            "  --kv-dtype T             %s\n"
            "account:\n"
            "  --memory-utilization F   share of the card the engine may use (default 0.90)\n"
            "  --engine E               whose startup profiling sizes the overhead: vllm-v1 (default on a\n"
            "                           card), vllm-v0, sglang, nibble (default with --host), fixed\n"
            "  --overhead SIZE          one fixed per-card overhead instead of the engine's model\n"
            "  --max-num-batched-tokens N  the engine's profiling batch (default: the engine's rule)\n"
            "  --enable-chunked-prefill | --no-enable-chunked-prefill   (vllm-v0; default on above 32K)\n"
            "  --mem-fraction-static F  sglang's share for weights + KV (default by --tp: 0.88..0.79)\n"
            "  --block-size N           KV tokens per block (vLLM 16)\n"
            "  --calibrate LOG          read an engine's startup log, store its measured overhead terms\n"
            "                           for this engine + model + card, and plan with them\n"
            "  --no-profile             ignore stored calibrations\n"
            "  --max-model-len N        longest sequence (default: the model's context length)\n"
            "  --max-num-seqs N         sequences at once (default 256)\n"
            "  --lengths L1,L2,...      lengths to report concurrency for (default 4096,8192,32768)\n"
            "output:\n"
            "  --json                   one JSON object with every number (bytes)\n"
            "  --compare[=S1,S2,...]    schemes side by side (default fp16,fp8,int8,int4)\n"
            "  --list-models | --list-gpus | --list-schemes\n",
            nb_plan_scheme_names(), nb_plan_kv_names());
}

static void list_models(void) {
    printf("%-18s %-12s %8s %7s %6s %8s %7s %9s %8s  %s\n", "preset", "arch", "layers", "hidden", "heads", "kv_heads",
           "experts", "params", "ctx", "source");
    const nb_plan_model *m;
    for (int i = 0; (m = nb_plan_model_preset_at(i)) != NULL; i++)
        printf("%-18s %-12s %8lld %7lld %6lld %8lld %7lld %8.2fB %8lld  %s\n", m->name, m->arch, (long long)m->n_layer,
               (long long)m->n_embd, (long long)m->n_head, (long long)m->n_head_kv, (long long)m->n_expert,
               (double)nb_plan_model_params(m) / 1e9, (long long)m->n_ctx_train, m->source);
}

static void list_gpus(void) {
    printf("%-14s %-32s %10s %5s %6s\n", "preset", "card", "memory", "fp8", "cc");
    const nb_plan_gpu *g;
    for (int i = 0; (g = nb_plan_gpu_preset_at(i)) != NULL; i++)
        printf("%-14s %-32s %6.0f GiB %5s %6.1f\n", g->id, g->name, (double)g->bytes / (1 << 30),
               g->fp8_native ? "yes" : "no", g->compute_cap);
}

static bool parse_lengths(const char *val, nb_plan_config *c) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", val);
    c->n_lengths = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (c->n_lengths >= NB_PLAN_MAX_LENGTHS) {
            fprintf(stderr, "nibble plan: --lengths: at most %d lengths\n", NB_PLAN_MAX_LENGTHS);
            return false;
        }
        if (!nb_arg_int(CMD, "--lengths", tok, 1, (int64_t)1 << 32, &v)) return false;
        c->lengths[c->n_lengths++] = v;
    }
    if (!c->n_lengths) {
        fprintf(stderr, "nibble plan: --lengths: give at least one length, e.g. 4096,8192\n");
        return false;
    }
    return true;
}

static bool parse_keep(const char *val, nb_plan_scheme *s) {
    s->keep_embed = s->keep_lm_head = s->keep_router = false;
    if (!strcasecmp(val, "none")) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", val);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(tok, "embed")) s->keep_embed = true;
        else if (!strcasecmp(tok, "lm_head")) s->keep_lm_head = true;
        else if (!strcasecmp(tok, "router")) s->keep_router = true;
        else {
            fprintf(stderr, "nibble plan: --keep: '%s' is not one of embed, lm_head, router, none\n", tok);
            return false;
        }
    }
    return true;
}

typedef struct {
    const char *model, *gpu, *weights, *keep, *compare, *engine, *calibrate;
    uint64_t gpu_mem;
    bool host, json, have_tp, have_gpus, have_group, have_lengths, have_overhead, no_profile, have_kv, have_seqs;
    int64_t group;
} opts;

/* --calibrate LOG: parse, fit for this config, store; the plan then uses it. */
static bool calibrate(const char *path, nb_plan_config *c, nb_plan_calibration *cal, bool quiet) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nibble plan: --calibrate: cannot open %s\n", path);
        return false;
    }
    char *buf = malloc(1 << 22);
    size_t n = buf ? fread(buf, 1, (1 << 22) - 1, f) : 0;
    fclose(f);
    if (!buf) return false;
    nb_plan_log log;
    nb_status st = nb_plan_parse_log(buf, n, &log);
    free(buf);
    if (st != NB_OK) {
        fprintf(stderr, "nibble plan: %s: %s\n", path, nb_errmsg());
        return false;
    }
    if (log.total && c->capacity != log.total) c->capacity = log.total; /* the card as the engine saw it */
    if (log.utilization > 0) c->utilization = log.utilization;
    if (log.engine != c->engine && c->engine != NB_PLAN_ENGINE_FIXED) log.engine = c->engine; /* --engine wins */
    c->engine = log.engine;
    char pp[1024];
    if (nb_plan_calibrate(c, &log, cal) != NB_OK || nb_plan_profile_path(pp, sizeof pp) != NB_OK ||
        nb_plan_profile_store(pp, cal) != NB_OK) {
        fprintf(stderr, "nibble plan: --calibrate %s: %s\n", path, nb_errmsg());
        return false;
    }
    if (!quiet)
        fprintf(stderr,
                "nibble plan: calibrated from %s (%s: %s): runtime %.2f GiB, activation %.2f GiB at %lld tokens, "
                "other %.2f GiB; stored in %s\n",
                path, nb_plan_engine_name(cal->engine), log.text, (double)cal->runtime / (1 << 30),
                (double)cal->activation / (1 << 30), (long long)cal->profile_tokens, (double)cal->other / (1 << 30), pp);
    c->calib = cal;
    return true;
}

/* The command line into o and c; false: exit with *rc (--help or a listing
 * printed, or a bad argument reported). */
static bool parse_args(int argc, char **argv, opts *o, nb_plan_config *c, int *rc) {
    *rc = NB_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        double d;
#define VAL() do { if (!(v = nb_arg_value(CMD, argc, argv, &i))) return false; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            *rc = NB_EXIT_OK;
            return false;
        } else if (!strcmp(a, "--list-models")) {
            list_models();
            *rc = NB_EXIT_OK;
            return false;
        } else if (!strcmp(a, "--list-gpus")) {
            list_gpus();
            *rc = NB_EXIT_OK;
            return false;
        } else if (!strcmp(a, "--list-schemes")) {
            printf("weights: %s\nKV: %s\n", nb_plan_scheme_names(), nb_plan_kv_names());
            *rc = NB_EXIT_OK;
            return false;
        } else if (!strcmp(a, "--model") || !strcmp(a, "-m")) {
            VAL();
            o->model = v;
        } else if (!strcmp(a, "--gpu")) {
            VAL();
            o->gpu = v;
        } else if (!strcmp(a, "--gpu-mem")) {
            VAL();
            if (!nb_arg_bytes(CMD, "--gpu-mem", v, &o->gpu_mem)) return false;
            if (o->gpu_mem == 0) {
                fprintf(stderr, "nibble plan: --gpu-mem: '%s' is 0 bytes\n", v);
                return false;
            }
        } else if (!strcmp(a, "--host")) {
            o->host = true;
        } else if (!strcmp(a, "--tp")) {
            VAL();
            if (!nb_arg_int(CMD, "--tp", v, 1, NB_PLAN_MAX_CARDS, &n)) return false;
            c->tp = (int)n;
            o->have_tp = true;
        } else if (!strcmp(a, "--gpus")) {
            VAL();
            if (!nb_arg_int(CMD, "--gpus", v, 1, NB_PLAN_MAX_CARDS, &n)) return false;
            c->gpus = (int)n;
            o->have_gpus = true;
        } else if (!strcmp(a, "--weights") || !strcmp(a, "--quant")) {
            VAL();
            o->weights = v;
        } else if (!strcmp(a, "--group-size")) {
            VAL();
            if (!nb_arg_int(CMD, "--group-size", v, 0, 1 << 20, &o->group)) return false;
            o->have_group = true;
        } else if (!strcmp(a, "--keep")) {
            VAL();
            o->keep = v;
        } else if (!strcmp(a, "--kv-dtype")) {
            VAL();
            o->have_kv = true;
            if (nb_plan_kv_from_name(v, &c->kv) != NB_OK) {
                fprintf(stderr, "nibble plan: --kv-dtype: %s\n", nb_errmsg());
                return false;
            }
        } else if (!strcmp(a, "--memory-utilization") || !strcmp(a, "--gpu-memory-utilization")) {
            VAL();
            if (!nb_arg_float(CMD, a, v, 0.01, 1.0, &d)) return false;
            c->utilization = d;
        } else if (!strcmp(a, "--overhead")) {
            VAL();
            if (!nb_arg_bytes(CMD, "--overhead", v, &c->overhead)) return false;
            o->have_overhead = true;
        } else if (!strcmp(a, "--engine")) {
            VAL();
            o->engine = v;
            if (nb_plan_engine_from_name(v, &c->engine) != NB_OK) {
                nb_cli_error(CMD);
                return false;
            }
        } else if (!strcmp(a, "--max-num-batched-tokens")) {
            VAL();
            if (!nb_arg_int(CMD, a, v, 1, (int64_t)1 << 32, &c->max_num_batched_tokens)) return false;
        } else if (!strcmp(a, "--enable-chunked-prefill")) {
            c->chunked_prefill = 1;
        } else if (!strcmp(a, "--no-enable-chunked-prefill")) {
            c->chunked_prefill = 0;
        } else if (!strcmp(a, "--mem-fraction-static")) {
            VAL();
            if (!nb_arg_float(CMD, a, v, 0.01, 1.0, &c->mem_fraction_static)) return false;
        } else if (!strcmp(a, "--block-size")) {
            VAL();
            if (!nb_arg_int(CMD, a, v, 1, 1 << 16, &c->block_size)) return false;
        } else if (!strcmp(a, "--calibrate")) {
            VAL();
            o->calibrate = v;
        } else if (!strcmp(a, "--no-profile")) {
            o->no_profile = true;
        } else if (!strcmp(a, "--max-model-len")) {
            VAL();
            if (!nb_arg_int(CMD, "--max-model-len", v, 1, (int64_t)1 << 32, &c->max_model_len)) return false;
        } else if (!strcmp(a, "--max-num-seqs")) {
            VAL();
            if (!nb_arg_int(CMD, "--max-num-seqs", v, 1, 1 << 20, &c->max_num_seqs)) return false;
            o->have_seqs = true;
        } else if (!strcmp(a, "--lengths")) {
            VAL();
            if (!parse_lengths(v, c)) return false;
            o->have_lengths = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--compare")) {
            o->compare = "fp16,fp8,int8,int4";
        } else if (!strncmp(a, "--compare=", 10)) {
            o->compare = a + 10;
        } else if (a[0] == '-') {
            fprintf(stderr, "nibble plan: unknown option '%s' (nibble plan --help)\n", a);
            return false;
        } else if (!o->model) {
            o->model = a;
        } else {
            fprintf(stderr, "nibble plan: unexpected argument '%s' (the model is '%s')\n", a, o->model);
            return false;
        }
#undef VAL
    }
    if (!o->model) {
        fprintf(stderr, "nibble plan: no model (give a preset, a GGUF file or an HF directory; --list-models)\n");
        return false;
    }
    if (!o->gpu && !o->gpu_mem && !o->host) {
        fprintf(stderr, "nibble plan: no hardware (give --gpu ID, --gpu-mem SIZE or --host; --list-gpus)\n");
        return false;
    }
    if (o->host && (o->gpu || o->gpu_mem)) {
        fprintf(stderr, "nibble plan: --host cannot be combined with --gpu / --gpu-mem\n");
        return false;
    }
    return true;
}

/* The card (--gpu preset, --gpu-mem) or the host, and the card counts. An exit code. */
static int set_hardware(const opts *o, nb_plan_config *c) {
    if (o->gpu) {
        const nb_plan_gpu *g = nb_plan_gpu_preset(o->gpu);
        if (!g) {
            fprintf(stderr, "nibble plan: --gpu: '%s' is not a card preset (nibble plan --list-gpus)\n", o->gpu);
            return NB_EXIT_USAGE;
        }
        snprintf(c->device, sizeof c->device, "%s", g->id);
        c->capacity = g->bytes;
        c->fp8_native = g->fp8_native;
        c->compute_cap = g->compute_cap;
        c->nvlink = g->nvlink;
    }
    if (o->gpu_mem) c->capacity = o->gpu_mem;
    if (o->host) {
        if (nb_plan_config_host(c) != NB_OK) {
            nb_cli_error(CMD);
            return NB_EXIT_FAIL;
        }
    }
    if (o->have_gpus && !o->have_tp) c->tp = c->gpus;
    if (o->have_tp && !o->have_gpus) c->gpus = c->tp;
    return NB_EXIT_OK;
}

/* The model (preset, GGUF, HF), the weight scheme and the lengths to report. An exit code. */
static int set_model(const opts *o, nb_plan_config *c) {
    nb_status st = nb_plan_load_model(o->model, c);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    if (o->weights) {
        if (nb_plan_scheme_from_name(o->weights, &c->scheme) != NB_OK) {
            fprintf(stderr, "nibble plan: --weights: %s\n", nb_errmsg());
            return NB_EXIT_USAGE;
        }
        nb_plan_config_free(c); /* a scheme of our own: size from the architecture */
    }
    if (!o->have_lengths) { /* default lengths: 4096, 8192, 32768 up to max_model_len, and max_model_len */
        int64_t mml = c->max_model_len > 0 ? c->max_model_len : c->model.n_ctx_train;
        if (mml > 0) {
            int k = 0;
            for (int i = 0; i < c->n_lengths; i++)
                if (c->lengths[i] < mml) c->lengths[k++] = c->lengths[i];
            c->lengths[k++] = mml;
            c->n_lengths = k;
        }
    }
    if (o->have_group) c->scheme.group = o->group;
    if (o->keep && !parse_keep(o->keep, &c->scheme)) return NB_EXIT_USAGE;
    return NB_EXIT_OK;
}

/* The overhead model: --overhead is one constant; otherwise the engine's
 * rules (its defaults, a preset card's usable memory). An exit code. */
static int set_engine(const opts *o, nb_plan_config *c) {
    if (o->have_overhead && o->engine && c->engine != NB_PLAN_ENGINE_FIXED) {
        fprintf(stderr, "nibble plan: --overhead gives one constant; it cannot be combined with --engine %s\n", o->engine);
        return NB_EXIT_USAGE;
    }
    if (!o->engine) c->engine = o->have_overhead ? NB_PLAN_ENGINE_FIXED : o->host ? NB_PLAN_ENGINE_NIBBLE : NB_PLAN_ENGINE_VLLM_V1;
    if (c->engine == NB_PLAN_ENGINE_NIBBLE && !o->host) {
        fprintf(stderr, "nibble plan: --engine nibble plans the CPU engine: give --host\n");
        return NB_EXIT_USAGE;
    }
    if (c->engine == NB_PLAN_ENGINE_NIBBLE) { /* nibble serve's defaults (docs/serve.md) */
        if (!o->have_kv && nb_plan_kv_from_name("fp32", &c->kv) != NB_OK) return NB_EXIT_USAGE; /* --kv-cache-dtype auto */
        if (!o->have_seqs) c->max_num_seqs = 64;
    }
    if (o->gpu && !o->gpu_mem && c->engine != NB_PLAN_ENGINE_FIXED) {
        const nb_plan_gpu *g = nb_plan_gpu_preset(o->gpu);
        if (g && g->usable) {
            c->capacity = g->usable;
            c->usable_capacity = true;
        }
    }
    return NB_EXIT_OK;
}

/* --calibrate's log, else a stored calibration for this engine, model and
 * card (unless --no-profile), into *cal, which c then points to. false: a
 * bad log (reported). */
static bool find_calibration(const opts *o, nb_plan_config *c, nb_plan_calibration *cal) {
    if (o->calibrate) {
        if (!calibrate(o->calibrate, c, cal, o->json)) return false;
    } else if (!o->no_profile && c->engine != NB_PLAN_ENGINE_FIXED && c->engine != NB_PLAN_ENGINE_NIBBLE) {
        char pp[1024];
        bool found = false;
        if (nb_plan_profile_path(pp, sizeof pp) == NB_OK &&
            nb_plan_profile_find(pp, c->engine, c->model.name, c->capacity, c->tp, cal, &found) == NB_OK && found) {
            c->calib = cal;
            if (!o->json) fprintf(stderr, "nibble plan: using the calibration stored in %s (--no-profile ignores it)\n", pp);
        }
    }
    return true;
}

/* --compare: the plan for each listed scheme side by side. An exit code. */
static int print_compare(const opts *o, const nb_plan_config *c) {
    nb_plan_scheme sch[MAX_COMPARE];
    nb_plan_result res[MAX_COMPARE];
    int ns = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->compare);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (ns >= MAX_COMPARE) {
            fprintf(stderr, "nibble plan: --compare: at most %d schemes\n", MAX_COMPARE);
            return NB_EXIT_USAGE;
        }
        if (nb_plan_scheme_from_name(tok, &sch[ns]) != NB_OK) {
            fprintf(stderr, "nibble plan: --compare: %s\n", nb_errmsg());
            return NB_EXIT_USAGE;
        }
        if (o->have_group && sch[ns].fmt == NB_PLAN_W_INT) sch[ns].group = o->group;
        ns++;
    }
    if (!ns) {
        fprintf(stderr, "nibble plan: --compare: no schemes\n");
        return NB_EXIT_USAGE;
    }
    for (int i = 0; i < ns; i++) {
        nb_plan_config ci = *c;
        ci.scheme = sch[i];
        ci.tensors = NULL;
        ci.n_tensors = 0;
        nb_status st = nb_plan_compute(&ci, &res[i]);
        if (st != NB_OK) {
            nb_cli_error(CMD);
            return nb_cli_exit_code(st);
        }
    }
    if (o->json) {
        char *j = nb_plan_json_compare(c, res, sch, ns);
        if (!j) return NB_EXIT_FAIL;
        printf("%s\n", j);
        free(j);
    } else {
        nb_plan_print_compare(c, res, sch, ns, stdout);
    }
    return NB_EXIT_OK;
}

/* The plan, printed or as JSON; exit 2 when the engine would refuse it. */
static int print_plan(const opts *o, const nb_plan_config *c) {
    nb_plan_result r;
    nb_status st = nb_plan_compute(c, &r);
    if (st != NB_OK) {
        nb_cli_error(CMD);
        return nb_cli_exit_code(st);
    }
    if (o->json) {
        char *j = nb_plan_json(c, &r);
        if (!j) return NB_EXIT_FAIL;
        printf("%s\n", j);
        free(j);
    } else {
        nb_plan_print(c, &r, stdout);
    }
    if (!r.refused) return NB_EXIT_OK;
    char msg[600];
    nb_plan_refusal_message(&r, msg, sizeof msg);
    fprintf(stderr, "nibble plan: refused: %s\n", msg);
    return NB_EXIT_USAGE;
}

int nb_cmd_plan(int argc, char **argv) {
    opts o = {0};
    nb_plan_config c;
    nb_plan_config_init(&c);
    nb_plan_calibration cal; /* c.calib may point here */
    int rc;
    if (parse_args(argc, argv, &o, &c, &rc) && (rc = set_hardware(&o, &c)) == NB_EXIT_OK &&
        (rc = set_model(&o, &c)) == NB_EXIT_OK && (rc = set_engine(&o, &c)) == NB_EXIT_OK)
        rc = !find_calibration(&o, &c, &cal) ? NB_EXIT_USAGE : o.compare ? print_compare(&o, &c) : print_plan(&o, &c);
    nb_plan_config_free(&c);
    return rc;
}
