/* Calibrated quantization: options, calibration data, statistics.
 *
 * `nibble quantize IN OUT --type T --method rtn|gptq|awq|smoothquant --calib FILE`
 * runs calibration text through the model (the driver is src/cli/
 * quantize_calib.c: it needs the model and tokenizer, which come after
 * src/quant in the library order); this header holds what does not need
 * the model:
 *   - the options and their parsing (one place for cmd_quantize's flags);
 *   - reading the calibration file: plain text (one document) or JSONL, one
 *     object per line with "text" (a string) or "messages" (an OpenAI
 *     message list, rendered with the model's chat template by the driver);
 *   - sampling token windows deterministically from the tokenized documents
 *     (nb_calib_sample) and the checks the seeds ask for: fewer than 100
 *     samples, duplicated samples, extreme lengths (a report with the length
 *     histogram and the duplicate rate);
 *   - streaming statistics of a linear layer's input (nb_calib_stats): per
 *     column sum x^2 (imatrix), sum |x| (AWQ), max |x| (SmoothQuant) and,
 *     when asked, H = sum x x^T (GPTQ), never the activations themselves.
 *
 * Thread safety: objects are independent; nb_calib_stats_add is not
 * reentrant per object. */
#ifndef NB_QUANT_CALIB_H
#define NB_QUANT_CALIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "base/threadpool.h"

typedef enum nb_calib_method {
    NB_CALIB_RTN = 0,
    NB_CALIB_GPTQ,
    NB_CALIB_AWQ,
    NB_CALIB_SMOOTHQUANT,
} nb_calib_method;

typedef struct nb_calib_opts {
    nb_calib_method method;
    const char *calib;        /* --calib FILE */
    int64_t samples;          /* --calib-samples (default 128) */
    int64_t seq_len;          /* --calib-seq-len (default 512) */
    uint64_t seed;            /* --seed (default 0) */
    bool report;              /* --calib-report */
    double damp;              /* --damp (GPTQ, default 0.01 of the mean diagonal) */
    bool desc_act;            /* --desc-act (GPTQ act order) */
    bool static_groups;       /* --static-groups */
    double alpha;             /* --alpha (SmoothQuant migration strength, default 0.5) */
    bool gguf_compat;         /* --format gguf-compat */
} nb_calib_opts;

void nb_calib_opts_default(nb_calib_opts *o);
/* True for every flag nb_calib_parse_flag takes; *takes_value says whether
 * it needs a value. */
bool nb_calib_is_flag(const char *flag, bool *takes_value);
nb_status nb_calib_parse_flag(nb_calib_opts *o, const char *flag, const char *val) __attribute__((warn_unused_result));
void nb_calib_usage(FILE *f);
const char *nb_calib_method_name(nb_calib_method m);

/* ---- calibration documents ------------------------------------------------ */

typedef struct nb_calib_doc {
    char *text;         /* "text", or the whole plain file; NULL for messages */
    size_t len;
    int n_msgs;         /* "messages": count and parallel arrays */
    char **roles, **contents;
} nb_calib_doc;

typedef struct nb_calib_docs {
    nb_calib_doc *d;
    int64_t n;
    bool jsonl;
    char sha256[65];    /* of the file */
} nb_calib_docs;

/* Reads `path`: JSONL when every non-empty line is a JSON object with a
 * "text" string or a "messages" array of {role, content} (the first line
 * decides; a bad later line is an error naming it), else plain text. */
nb_status nb_calib_read(const char *path, nb_calib_docs *out) __attribute__((warn_unused_result));
void nb_calib_docs_free(nb_calib_docs *d);

/* ---- sampling ------------------------------------------------------------- */

typedef struct nb_calib_set {
    int64_t n;            /* samples */
    int32_t **ids;        /* [n] token ids, BOS first when the model wants one */
    int32_t *len;         /* [n] */
    int64_t n_tokens;
    /* report */
    int64_t n_docs, n_dup, n_short, n_long;  /* short: < seq_len/8 tokens; long: documents cut to seq_len */
    int64_t hist[8];      /* lengths in [seq_len*k/8, seq_len*(k+1)/8) (the last bin includes seq_len) */
} nb_calib_set;

/* Builds samples from tokenized documents (docs[i], lens[i]); bos >= 0 is
 * put before every sample (plain text's windows), -1: the documents carry
 * the BOS they need (JSONL, tokenized as the model is served).
 * One document (plain text): the token stream is cut into windows of
 * seq_len - 1 tokens (+ BOS), of which n_samples are drawn without
 * replacement, seeded; JSONL: one sample per document (cut to seq_len,
 * seeded choice of n_samples when there are more). NB_ERR_INVALID when no
 * sample of at least 2 tokens can be made (the message says how many tokens
 * there were). */
nb_status nb_calib_sample(int32_t *const *docs, const size_t *lens, int64_t n_docs, bool one_stream, int32_t bos,
                          int64_t n_samples, int64_t seq_len, uint64_t seed, nb_calib_set *out)
    __attribute__((warn_unused_result));
void nb_calib_set_free(nb_calib_set *s);
/* Warnings (fewer than 100 samples, duplicates, extreme lengths) through
 * NB_WARN, and with `report` the histogram and duplicate rate on f. */
void nb_calib_set_report(const nb_calib_set *s, int64_t seq_len, bool report, FILE *f);

/* ---- streaming statistics of one linear input ----------------------------- */

typedef struct nb_calib_stats {
    int64_t dim;
    double count;         /* tokens */
    double *sum2;         /* [dim] sum x^2 */
    double *sum_abs;      /* [dim] sum |x| */
    float *max_abs;       /* [dim] */
    double *H;            /* [dim*dim] sum x x^T, upper triangle (NULL unless want_h) */
    int64_t n_nonfinite;  /* NaN / Inf values seen (skipped tokens) */
    float *hbuf;          /* tokens not yet in H (want_h): [NB_CALIB_HBUF][dim] */
    int64_t hbuf_n;
    float *hscratch;      /* the update's transposed / packed copies */
} nb_calib_stats;

/* Tokens buffered before one H += X^T X update (larger updates amortise the
 * tiles' conversion to double). */
#define NB_CALIB_HBUF 1024

nb_status nb_calib_stats_init(nb_calib_stats *s, int64_t dim, bool want_h) __attribute__((warn_unused_result));
void nb_calib_stats_free(nb_calib_stats *s);
void nb_calib_stats_reset(nb_calib_stats *s);
/* Adds n rows of dim values (a token containing NaN/Inf is skipped and
 * counted). H is updated on the pool (may be NULL) once NB_CALIB_HBUF
 * tokens are buffered; nb_calib_stats_flush adds the rest: call it before
 * reading H. */
void nb_calib_stats_add(nb_calib_stats *s, const float *x, int64_t n, nb_pool *pool);
void nb_calib_stats_flush(nb_calib_stats *s, nb_pool *pool);

#endif
