/* The public API (include/nibble.h) over the internals: options and events
 * are translated field by field, so the public structs stay stable while
 * the engine's change; requests buffer their events for nb_request_next. */
#include "nibble.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/status.h"
#include "engine/engine.h"
#include "formats/source.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

_Static_assert(NIBBLE_MAX_TOP_LOGPROBS == NB_LIMIT_TOP_LOGPROBS, "top logprobs");
_Static_assert(NIBBLE_MAX_STOP_STRINGS == NB_LIMIT_STOP_STRINGS, "stop strings");

const char *nb_version(void) { return NIBBLE_VERSION; }

void nb_free(void *p) { free(p); }

/* ---- engine ------------------------------------------------------------ */

nb_engine_options nb_engine_options_default(void) {
    nb_engine_config c;
    nb_engine_config_defaults(&c);
    nb_engine_options o = {
        .tokenizer_path = c.tokenizer_path,
        .n_threads = c.n_threads,
        .use_mmap = c.use_mmap,
        .max_model_len = c.max_model_len,
        .max_num_seqs = c.max_num_seqs,
        .max_num_batched_tokens = c.max_num_batched_tokens,
        .block_size = c.block_size,
        .memory_utilization = c.memory_utilization,
        .kv_cache_bytes = c.kv_cache_bytes,
        .kv_cache_dtype = c.kv_cache_dtype,
        .enable_prefix_caching = c.enable_prefix_caching,
        .max_waiting = c.max_waiting,
        .max_prefill_tokens = c.max_prefill_tokens,
    };
    return o;
}

nb_status nb_engine_load(const char *model_path, const nb_engine_options *opts, nb_engine **out) {
    if (!out) return nb_fail(NB_ERR_INVALID, "nb_engine_load: out is NULL");
    *out = NULL;
    if (!model_path || !model_path[0])
        return nb_fail(NB_ERR_INVALID, "nb_engine_load: a model path is required (a GGUF file, a Hugging Face "
                       "directory or a llama2.c checkpoint)");
    nb_engine_options o = opts ? *opts : nb_engine_options_default();
    nb_engine_config c;
    nb_engine_config_defaults(&c);
    c.tokenizer_path = o.tokenizer_path;
    c.n_threads = o.n_threads;
    c.use_mmap = o.use_mmap;
    c.max_model_len = o.max_model_len;
    c.max_num_seqs = o.max_num_seqs;
    c.max_num_batched_tokens = o.max_num_batched_tokens;
    c.block_size = o.block_size;
    c.memory_utilization = o.memory_utilization;
    c.kv_cache_bytes = o.kv_cache_bytes;
    c.kv_cache_dtype = o.kv_cache_dtype;
    c.enable_prefix_caching = o.enable_prefix_caching;
    c.max_waiting = o.max_waiting;
    c.max_prefill_tokens = o.max_prefill_tokens;
    return nb_engine_create(model_path, &c, out);
}

const nb_tokenizer *nb_engine_get_tokenizer(const nb_engine *e) { return nb_engine_tokenizer(e); }

void nb_engine_read_stats(nb_engine *e, nb_stats *out) {
    nb_engine_stats s;
    nb_engine_get_stats(e, &s);
    memset(out, 0, sizeof *out);
    out->running = s.running;
    out->waiting = s.waiting;
    out->preemptions_total = s.preemptions_total;
    out->kv_blocks_total = s.kv_blocks_total;
    out->kv_blocks_used = s.kv_blocks_used;
    out->kv_usage = s.kv_usage;
    out->prefix_queries_tokens = s.prefix_queries_tokens;
    out->prefix_hit_tokens = s.prefix_hit_tokens;
    out->prompt_tokens_total = s.prompt_tokens_total;
    out->generation_tokens_total = s.generation_tokens_total;
    _Static_assert(sizeof out->requests_finished == sizeof s.requests_finished, "finish reasons");
    memcpy(out->requests_finished, s.requests_finished, sizeof out->requests_finished);
    out->steps_total = s.steps_total;
    out->max_model_len = s.max_model_len;
    out->max_num_seqs = s.max_num_seqs;
    out->max_num_batched_tokens = s.max_num_batched_tokens;
    out->block_size = s.block_size;
    out->kv_bytes_per_token = s.kv_bytes_per_token;
    out->kv_cache_bytes = s.kv_pool_bytes;
    out->weight_bytes = s.weight_bytes;
}

/* ---- requests ---------------------------------------------------------- */

/* One buffered event with its own copies of the strings. */
typedef struct pending {
    struct pending *next;
    nb_event ev;
    char *text, *error;
} pending;

struct nb_request {
    nb_engine *engine;
    uint64_t id;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pending *head, *tail;
    pending *current;  /* returned by the last nb_request_next; freed by the next */
    bool finished;     /* the engine delivered the final event: it holds no pointer to us */
    bool returned_end; /* nb_request_next returned the final event */
    bool oom;          /* an event could not be buffered: the request ends with an error */
};

static void pending_free(pending *p) {
    if (!p) return;
    free(p->text);
    free(p->error);
    free(p);
}

/* Called on the engine thread: copy the event, wake the reader. */
static void request_sink(void *ud, const nb_token_event *ev) {
    nb_request *r = ud;
    pending *p = calloc(1, sizeof *p);
    if (p) {
        p->text = malloc(ev->text_len + 1);
        if (ev->error) p->error = strdup(ev->error);
        if (!p->text || (ev->error && !p->error)) {
            pending_free(p);
            p = NULL;
        }
    }
    pthread_mutex_lock(&r->mu);
    if (p) {
        if (ev->text_len) memcpy(p->text, ev->text, ev->text_len);
        p->text[ev->text_len] = 0;
        nb_event *o = &p->ev;
        o->token = ev->token;
        o->text = p->text;
        o->text_len = ev->text_len;
        o->logprob = ev->logprob;
        o->n_top = ev->n_top;
        memcpy(o->top_ids, ev->top_ids, sizeof o->top_ids);
        memcpy(o->top_logprobs, ev->top_logprobs, sizeof o->top_logprobs);
        o->finish = ev->finish;
        o->error = p->error;
        o->n_prompt_tokens = ev->n_prompt_tokens;
        o->n_generated = ev->n_generated;
        o->n_cached_tokens = ev->n_cached_tokens;
        o->queue_s = ev->queue_s;
        o->ttft_s = ev->ttft_s;
        if (r->tail) r->tail->next = p;
        else r->head = p;
        r->tail = p;
    } else {
        r->oom = true; /* the reader reports it as the end */
    }
    if (ev->finish != NB_FINISH_NONE) r->finished = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (!p && ev->finish == NB_FINISH_NONE) nb_engine_abort(r->engine, r->id);
}

nb_request_options nb_request_options_default(void) {
    nb_sampling s;
    nb_sampling_defaults(&s);
    nb_request_options o = {
        .max_tokens = 16,
        .temperature = s.temperature,
        .top_k = s.top_k,
        .top_p = s.top_p,
        .min_p = s.min_p,
        .repetition_penalty = s.repetition_penalty,
        .presence_penalty = s.presence_penalty,
        .frequency_penalty = s.frequency_penalty,
        .has_seed = s.has_seed,
        .seed = s.seed,
        .logprobs = -1,
    };
    return o;
}

nb_status nb_request_submit(nb_engine *e, const int32_t *prompt, size_t n_prompt, const nb_request_options *opts,
                            nb_request **out) {
    if (!out) return nb_fail(NB_ERR_INVALID, "nb_request_submit: out is NULL");
    *out = NULL;
    if (!e) return nb_fail(NB_ERR_INVALID, "nb_request_submit: engine is NULL");
    nb_request_options o = opts ? *opts : nb_request_options_default();
    nb_request *r = nb_calloc(1, sizeof *r);
    if (!r) return NB_ERR_NOMEM;
    r->engine = e;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    nb_request_params p;
    memset(&p, 0, sizeof p);
    p.prompt = prompt;
    p.n_prompt = n_prompt;
    nb_sampling_defaults(&p.sampling);
    p.sampling.temperature = o.temperature;
    p.sampling.top_k = o.top_k;
    p.sampling.top_p = o.top_p;
    p.sampling.min_p = o.min_p;
    p.sampling.repetition_penalty = o.repetition_penalty;
    p.sampling.presence_penalty = o.presence_penalty;
    p.sampling.frequency_penalty = o.frequency_penalty;
    p.sampling.has_seed = o.has_seed;
    p.sampling.seed = o.seed;
    p.max_tokens = o.max_tokens;
    p.min_tokens = o.min_tokens;
    p.ignore_eos = o.ignore_eos;
    p.stop = o.stop;
    p.n_stop = o.n_stop;
    p.stop_ids = o.stop_ids;
    p.n_stop_ids = o.n_stop_ids;
    p.logprobs = o.logprobs;
    p.logit_bias_ids = o.logit_bias_ids;
    p.logit_bias = o.logit_bias;
    p.n_logit_bias = o.n_logit_bias;
    p.sink = request_sink;
    p.ud = r;
    /* the sink may run before submit returns: r->id is only read by the
     * reader's thread (abort/free), after this assignment */
    nb_status st = nb_engine_submit(e, &p, &r->id);
    if (st != NB_OK) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
        return st;
    }
    *out = r;
    return NB_OK;
}

bool nb_request_next(nb_request *r, nb_event *ev) {
    pthread_mutex_lock(&r->mu);
    pending_free(r->current);
    r->current = NULL;
    if (r->returned_end) {
        pthread_mutex_unlock(&r->mu);
        return false;
    }
    while (!r->head && !r->oom) pthread_cond_wait(&r->cv, &r->mu);
    if (!r->head) { /* an event was lost for lack of memory: end here */
        while (!r->finished) pthread_cond_wait(&r->cv, &r->mu);
        memset(ev, 0, sizeof *ev);
        ev->token = -1;
        ev->text = "";
        ev->finish = NB_FINISH_ERROR;
        ev->error = "out of memory buffering the request's events";
        r->returned_end = true;
        pthread_mutex_unlock(&r->mu);
        return true;
    }
    pending *p = r->head;
    r->head = p->next;
    if (!r->head) r->tail = NULL;
    r->current = p;
    *ev = p->ev;
    if (ev->finish != NB_FINISH_NONE) r->returned_end = true;
    pthread_mutex_unlock(&r->mu);
    return true;
}

void nb_request_abort(nb_request *r) {
    pthread_mutex_lock(&r->mu);
    bool finished = r->finished;
    pthread_mutex_unlock(&r->mu);
    /* not finished: the engine still runs (nb_engine_free delivers the
     * final event to every request before it returns) */
    if (!finished) nb_engine_abort(r->engine, r->id);
}

void nb_request_free(nb_request *r) {
    if (!r) return;
    nb_request_abort(r);
    pthread_mutex_lock(&r->mu);
    while (!r->finished) pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    pending_free(r->current);
    while (r->head) {
        pending *p = r->head;
        r->head = p->next;
        pending_free(p);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* ---- tokenizer --------------------------------------------------------- */

nb_status nb_tokenizer_encode(const nb_tokenizer *t, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **ids, size_t *n_ids) {
    if (!t || (!text && len) || !ids || !n_ids) return nb_fail(NB_ERR_INVALID, "nb_tokenizer_encode: NULL argument");
    return nb_tokenize(t, text ? text : "", len, add_special, parse_special, ids, n_ids);
}

nb_status nb_tokenizer_decode(const nb_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **text,
                              size_t *len) {
    if (!t || (!ids && n) || !text || !len) return nb_fail(NB_ERR_INVALID, "nb_tokenizer_decode: NULL argument");
    int32_t nv = nb_tokenizer_n_vocab(t);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            return nb_fail(NB_ERR_RANGE, "nb_tokenizer_decode: ids[%zu] = %d (allowed 0..%d)", i, ids[i], nv - 1);
    return nb_detokenize(t, ids, n, render_special, text, len);
}

int32_t nb_tokenizer_vocab_size(const nb_tokenizer *t) { return nb_tokenizer_n_vocab(t); }
int32_t nb_tokenizer_bos_id(const nb_tokenizer *t) { return nb_tokenizer_bos(t); }
int32_t nb_tokenizer_eos_id(const nb_tokenizer *t) { return nb_tokenizer_eos(t); }
bool nb_tokenizer_is_end(const nb_tokenizer *t, int32_t id) { return nb_tokenizer_is_eog(t, id); }

/* ---- model description ------------------------------------------------- */

struct nb_model_info {
    char arch[32];
    char format[16];
    nb_arch_desc hp;
    uint64_t n_params, weight_bytes;
};

static nb_model_info *info_from(const nb_source *s) {
    nb_model_info *m = nb_calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->arch, sizeof m->arch, "%s", s->hp.arch_name);
    snprintf(m->format, sizeof m->format, "%s", s->format ? s->format : "");
    m->hp = s->hp;
    for (int64_t i = 0; i < s->n_tensors; i++) {
        m->weight_bytes += s->tensors[i].nbytes;
        m->n_params += (uint64_t)nb_tensor_nelem(&s->tensors[i]);
    }
    return m;
}

nb_status nb_model_info_load(const char *model_path, nb_model_info **out) {
    if (!out) return nb_fail(NB_ERR_INVALID, "nb_model_info_load: out is NULL");
    *out = NULL;
    if (!model_path || !model_path[0]) return nb_fail(NB_ERR_INVALID, "nb_model_info_load: a model path is required");
    nb_source s;
    NB_TRY(nb_source_open(model_path, &s));
    *out = info_from(&s);
    nb_source_close(&s);
    return *out ? NB_OK : NB_ERR_NOMEM;
}

nb_status nb_engine_model_info(const nb_engine *e, nb_model_info **out) {
    if (!out) return nb_fail(NB_ERR_INVALID, "nb_engine_model_info: out is NULL");
    *out = NULL;
    if (!e) return nb_fail(NB_ERR_INVALID, "nb_engine_model_info: engine is NULL");
    const nb_model *md = nb_engine_model(e);
    *out = info_from(&md->src);
    if (!*out) return NB_ERR_NOMEM;
    (*out)->hp = md->hp;
    (*out)->n_params = md->n_params;
    (*out)->weight_bytes = md->weight_bytes;
    return NB_OK;
}

void nb_model_info_free(nb_model_info *m) { free(m); }

const char *nb_model_info_arch(const nb_model_info *m) { return m->arch; }
const char *nb_model_info_format(const nb_model_info *m) { return m->format; }
int32_t nb_model_info_n_vocab(const nb_model_info *m) { return m->hp.n_vocab; }
int32_t nb_model_info_n_ctx_train(const nb_model_info *m) { return m->hp.n_ctx_train; }
int32_t nb_model_info_n_layer(const nb_model_info *m) { return m->hp.n_layer; }
int32_t nb_model_info_n_embd(const nb_model_info *m) { return m->hp.n_embd; }
int32_t nb_model_info_n_head(const nb_model_info *m) { return m->hp.n_head; }
int32_t nb_model_info_n_head_kv(const nb_model_info *m) { return m->hp.n_head_kv; }
uint64_t nb_model_info_n_params(const nb_model_info *m) { return m->n_params; }
uint64_t nb_model_info_weight_bytes(const nb_model_info *m) { return m->weight_bytes; }
