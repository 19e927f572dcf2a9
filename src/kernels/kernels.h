/* Compute kernels and their one-time dispatch.
 *
 * Every kernel has a scalar reference in kernels/ref (the definition) and
 * optional SIMD versions in kernels/x86, one ISA per file; the dispatch
 * table (kernels/dispatch.h) picks the set for this CPU and options once.
 *
 * Matrix convention: a weight W is a tensor with ne = {K, R}: R rows of K
 * input elements. nb_matmul computes, for n tokens,
 *     Y[t*R + r] = sum_k W[r][k] * X[t*K + k]
 * reading each weight row once for all n tokens (that is what makes batched
 * decode and prefill cheaper per token than one-at-a-time). */
#ifndef NB_KERNELS_KERNELS_H
#define NB_KERNELS_KERNELS_H

#include "base/cpu.h"
#include "base/threadpool.h"
#include "formats/tensor.h"

/* y[r] = dot of weight row r (n elements of the row's float type, at
 * w + r * row_bytes) with x, for r < rows: decode's float matmul, a run of
 * consecutive rows per call (one call per row cost F16 decode 2-7% of its
 * stream, docs/speed.md "Session 25"). */
typedef void (*nb_dot_fn)(int64_t n, int64_t rows, const void *w, size_t row_bytes, const float *x, float *y);
/* y[r * ldy] = dot of weight row r (at w + r * w_stride) with x, for r < m
 * (<= NB_DECODE_STREAMS_MAX): rows far apart read in lockstep (decode's
 * several streams per thread, matmul.c); each result is nb_dot_fn's. */
typedef void (*nb_dot_m_fn)(int64_t n, int m, const void *w, size_t w_stride, const float *x, float *y, size_t ldy);
/* y[0] and y[ldy]: one weight row's dots with two tokens (x, x + ldx), each
 * nb_dot_fn's result bit for bit; the row is read and converted once
 * (small float batches, matmul.c). */
typedef void (*nb_dot2_fn)(int64_t n, const void *w, const float *x, size_t ldx, float *y, size_t ldy);
/* Convert n elements to float. */
typedef void (*nb_to_f32_fn)(int64_t n, const void *src, float *dst);

/* The float GEMM micro-kernel, on operands nb_matmul packs (GotoBLAS-style
 * blocking, see matmul.c):
 *     c[r*ldc + t] = (add ? c[r*ldc + t] : 0)
 *                    + sum_{k<kc} wp[r*NB_GEMM_KC + k] * xp[k*NB_GEMM_NT + t]
 * for every r < NB_GEMM_MR and t < nt, 1 <= kc <= NB_GEMM_KC,
 * 1 <= nt <= NB_GEMM_NT; nothing else of c is written.
 * wp is a panel of NB_GEMM_MR weight rows already converted to f32 (row r
 * at wp + r*NB_GEMM_KC; rows past the matrix are zero), small enough to stay
 * in L1 while it meets every token block. xp holds kc k-steps of one block
 * of NB_GEMM_NT tokens, k-major (all NB_GEMM_NT columns readable; those past
 * nt are ignored). The SIMD kernels load tokens as vectors and broadcast each
 * weight, so every loaded vector feeds many FMAs and no horizontal sums are
 * needed - what makes prefill compute-bound rather than load-bound. */
#define NB_GEMM_MR 12
#define NB_GEMM_NT 32
#define NB_GEMM_KC 256
typedef void (*nb_gemm_f32_fn)(int64_t kc, const float *wp, const float *xp, int64_t nt, float *c, int64_t ldc,
                               bool add);

/* How many bytes ahead of the weights the streaming kernels (the decode
 * dots, float and quantized, their multi-token forms and the small-batch
 * int8 GEMMs) prefetch. Decode reads every weight once; how far ahead it
 * must ask for them depends on the CPU's memory system (2 KiB on Sapphire
 * Rapids, 8 KiB on a Zen 5-class EPYC: docs/speed.md), so the distance is a
 * choice of the dispatch table (nb_dispatch.decode_prefetch), which the
 * matmul's workers hand to the kernels through this thread-local before
 * they run (the kernels' signatures are shared by every type, and the
 * distance changes no result, only speed). A thread that never ran a matmul
 * job, e.g. a test calling a kernel directly, sees NB_PREFETCH_DEFAULT. */
#define NB_PREFETCH_DEFAULT 2048
#define NB_PREFETCH_MAX 65536
#define NB_DECODE_STREAMS_MAX 4 /* vec_dot_mxn takes up to 4 rows */
extern _Thread_local int nb_prefetch_bytes __attribute__((tls_model("initial-exec")));
/* And how far ahead the x86 decode dots ask for each line a second time,
 * into L2 only (0: no second request): more lines in flight than the L1
 * requests alone can hold (kernels/x86/prefetch_here.h nb_prefetch_ahead).
 * A choice of the dispatch table too (nb_dispatch.decode_prefetch_l2),
 * handed over the same way; NB_PREFETCH_L2_DEFAULT where no job set it. */
#define NB_PREFETCH_L2_DEFAULT 0
extern _Thread_local int nb_prefetch_l2_bytes __attribute__((tls_model("initial-exec")));

/* SwiGLU in place: g[i] = g[i] / (1 + e^-g[i]) * u[i] for i < n. The
 * vector forms take kernels/x86/vexp.h's e^x (about 2 ulp from libm's). */
typedef void (*nb_swiglu_fn)(int64_t n, float *g, const float *u);
/* out = x / sqrt(mean(x^2) + eps) * w, the mean of squares summed in double
 * (the products are exact there; only the order of the sum is the ISA's). */
typedef void (*nb_rmsnorm_fn)(int64_t n, float *out, const float *x, const float *w, float eps);
/* x[i] += y[i] */
typedef void (*nb_add_fn)(int64_t n, float *x, const float *y);

typedef struct nb_float_kernels {
    const char *isa;
    nb_dot_fn dot_f32, dot_f16, dot_bf16; /* prefetch nb_prefetch_bytes ahead */
    nb_to_f32_fn f16_to_f32, bf16_to_f32;
    nb_gemm_f32_fn gemm_f32;
    nb_swiglu_fn swiglu;
    nb_rmsnorm_fn rmsnorm;
    nb_add_fn add;
    nb_dot_m_fn dot_f32_m, dot_f16_m, dot_bf16_m; /* NULL in the scalar set */
    nb_dot2_fn dot_f32_2, dot_f16_2, dot_bf16_2;  /* NULL in the scalar set */
} nb_float_kernels;

const nb_float_kernels *nb_float_kernels_ref(void);
const nb_float_kernels *nb_float_kernels_avx2(void);   /* NULL when not compiled */
const nb_float_kernels *nb_float_kernels_avx512(void);
/* Best set at or below max_isa. */
const nb_float_kernels *nb_float_kernels_get(nb_isa max_isa);

struct nb_dispatch;

/* Per-thread scratch and the pool the kernels run on. One per engine/loop
 * thread; not shared between threads that call kernels concurrently.
 * The kernels are the dispatch table's (kernels/dispatch.h), chosen once. */
typedef struct nb_kctx {
    nb_pool *pool;
    const struct nb_dispatch *d;
    nb_isa isa;                 /* d->isa */
    const nb_float_kernels *fk; /* d->fk: the float GEMM and conversions */
    uint8_t *scratch;        /* grows on demand, never shrinks */
    size_t scratch_size;
    uint8_t *act;            /* quantized / round-tripped activations, same policy */
    size_t act_size;
    int prefetch;            /* bytes the streaming kernels prefetch ahead (nb_prefetch_bytes): the
                                table's decode_prefetch, or what nb_kctx_tune_prefetch chose */
    int prefetch_l2;         /* the second, L2 distance (nb_prefetch_l2_bytes): the table's */
    int streams;             /* runs of rows per thread in one-token matmuls: the table's decode_streams */
} nb_kctx;

/* With the process's table (nb_dispatch_default), or the given one. */
nb_status nb_kctx_init(nb_kctx *k, int n_threads) __attribute__((warn_unused_result));
nb_status nb_kctx_init_with(nb_kctx *k, int n_threads, const struct nb_dispatch *d) __attribute__((warn_unused_result));
void nb_kctx_free(nb_kctx *k);
/* Ensures at least `bytes` of scratch (allocates only when it must grow). */
nb_status nb_kctx_scratch(nb_kctx *k, size_t bytes) __attribute__((warn_unused_result));
nb_status nb_kctx_act(nb_kctx *k, size_t bytes) __attribute__((warn_unused_result));

/* The prefetch distances, measured on the weights at hand (kernels/tune.c):
 * one-token matmuls over `count` weights, taken in order from where the
 * last trial stopped, about NB_TUNE_TRIAL_BYTES per trial, each candidate
 * pair of distances (L1, L2: tune.c's and the table's) in turn,
 * NB_TUNE_REPS rounds; the fastest median leads when it beats the table's
 * pair by NB_TUNE_MARGIN, and wins when it does so again in
 * NB_TUNE_CONFIRM more rounds of the two alone (the median of their
 * paired ratios, `confirm`), else the table's stays. Weights under min_bytes
 * are not measured (they would be read from the cache, not memory): the
 * table's stays and `why` says so. Sets k->prefetch and k->prefetch_l2;
 * results of every kernel are the same at any distance, only the speed
 * differs. `what`: NB_TUNE_PREFETCH tries the distances, NB_TUNE_STREAMS
 * the runs of rows per thread (k->streams: 1 and NB_TUNE_STREAMS_ALT
 * beside the table's), each set alone keeping the table's value of the
 * other, both together trying every combination. */
#define NB_TUNE_PREFETCH 1u
#define NB_TUNE_STREAMS 2u
#define NB_TUNE_STREAMS_ALT 4
#define NB_TUNE_MAX 20
#define NB_TUNE_TRIAL_BYTES ((size_t)64 << 20)
#define NB_TUNE_REPS 5
#define NB_TUNE_MARGIN 1.03
#define NB_TUNE_CONFIRM 7
#define NB_TUNE_MIN_BYTES ((size_t)256 << 20) /* the default min_bytes: above the LLCs of the CPUs met */
typedef struct nb_prefetch_tune {
    int n;                      /* candidates measured; 0 when not tuned */
    int bytes[NB_TUNE_MAX];     /* each candidate's L1 distance */
    int l2[NB_TUNE_MAX];        /* and its L2 distance (0: none); by (bytes, l2, streams), ascending */
    double gbps[NB_TUNE_MAX];   /* its median GB/s of weights over the reps */
    int table, chosen;          /* the table's L1 distance; the one kept */
    int table_l2, chosen_l2;    /* the same for L2 */
    int streams[NB_TUNE_MAX];   /* each candidate's runs of rows per thread */
    int table_streams, chosen_streams;
    double ms;                  /* how long the tune took */
    double confirm;             /* the leader's median paired ratio to the table's; 0: no leader */
    char why[160];              /* one line: what was done and why */
} nb_prefetch_tune;
nb_status nb_kctx_tune_prefetch(nb_kctx *k, const nb_tensor *const *W, int count, size_t min_bytes, unsigned what,
                                nb_prefetch_tune *out) __attribute__((warn_unused_result));

/* Y[n][R] = X[n][K] * W^T. Supports F32, F16, BF16 and every quantized
 * type the quant registry and qdot dispatch know. */
nb_status nb_matmul(nb_kctx *k, const nb_tensor *W, const float *X, int64_t n, float *Y)
    __attribute__((warn_unused_result));

/* count (<= 4 share one job) weights applied to the same X, Y[i] = X * W[i]^T:
 * the same results as count nb_matmul calls, but quantized activations are
 * made once and one thread-pool job covers all the rows (Q/K/V, gate/up). */
nb_status nb_matmul_many(nb_kctx *k, int count, const nb_tensor *const *W, const float *X, int64_t n,
                         float *const *Y) __attribute__((warn_unused_result));

/* Row `row` of a 2-D tensor as floats (embedding lookup). */
nb_status nb_get_row(const nb_tensor *W, int64_t row, float *dst) __attribute__((warn_unused_result));

/* True when nb_matmul can compute with this weight type. */
bool nb_matmul_supports(nb_dtype t);

#endif
