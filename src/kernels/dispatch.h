/* One kernel dispatch table, chosen once (issue 12, section 2).
 *
 * nb_dispatch_build() fills an nb_dispatch from the CPU's features
 * (base/cpu.h) and an options struct: the float dots and GEMM, the per-type
 * quantized dots (GGUF, nibble's own and the repacked layouts), the int8
 * GEMMs of the repacked types, dequantization, the activation pack, which
 * file types are repacked at load and to what, and the matmul's path
 * thresholds. After that nothing on a hot path asks the CPU or the
 * environment: the matmul reads the table through its nb_kctx.
 *
 * The process has one table, nb_dispatch_default(), built on first use
 * (model load or the first kernel context, i.e. at engine creation) from
 * the options given to nb_dispatch_configure() (the CLI's --isa, --repack,
 * --qgemm-min, --no-int8-gemm, --int8-gemm-min, --decode-dot, --decode-prefetch flags, see
 * cli/engine_opts.c), else from the defaults plus the environment
 * variables, which are read once, there, and kept for scripts and tests:
 *   NIBBLE_ISA=scalar|avx2|avx512   cap the ISA (also base/cpu.h's cap)
 *   NIBBLE_REPACK=0                 keep GGUF layouts in memory
 *   NIBBLE_QGEMM_MIN=N              the dequantize-into-float-GEMM threshold
 *   NIBBLE_NO_INT8_GEMM=1           no int8 GEMM for batches
 *   NIBBLE_SGEMM_MAX=N              the small-batch int8 GEMMs up to N tokens (0: off)
 * Tests and benches build their own tables with nb_dispatch_build.
 *
 * The attention kernel (kernels/attn.h: flash-style tiles over the paged
 * KV) is the table's too: nb_attn_get at the table's ISA. */
#ifndef NB_KERNELS_DISPATCH_H
#define NB_KERNELS_DISPATCH_H

#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "kernels/qdot.h"
#include "kernels/repack.h"

/* Which vector width the one-token float dots (decode) use. */
typedef enum nb_decode_dot {
    NB_DECODE_DOT_AUTO = 0, /* per CPU: see nb_dispatch_build */
    NB_DECODE_DOT_AVX2,     /* 256-bit loads and conversions */
    NB_DECODE_DOT_AVX512,   /* 512-bit */
} nb_decode_dot;

/* A kernel choice the table makes per CPU unless told. */
typedef enum nb_choice {
    NB_CHOICE_AUTO = 0, /* per CPU: see nb_dispatch_build */
    NB_CHOICE_ON,
    NB_CHOICE_OFF,
} nb_choice;

typedef struct nb_kernel_opts {
    nb_isa max_isa;          /* highest ISA the kernels may use (default NB_ISA_AMX: no cap) */
    bool repack;             /* repack Q4_0/Q8_0/Q4_K/Q6_K at load where kernels exist (default true) */
    bool int8_gemm;          /* int8 GEMM for batches of repacked weights (default true) */
    bool amx_gemm;           /* int8 GEMMs (the repacked types) on the AMX tile unit where the OS grants it
                                (kernels/x86/gemm_amx.c; default true; --no-amx-gemm, NIBBLE_AMX_GEMM=0) */
    int64_t qgemm_min;       /* tokens from which quantized weights without an int8 GEMM are
                                dequantized into the float GEMM (default 16, >= 2) */
    int64_t rgemm_min;       /* tokens from which the int8 GEMM is used (>= 2; 0, the default: 8, and
                                12 for Q4_KR, Q6_KR, W4G*R and the lane forms where the GEMMs are plain AVX2's:
                                nb_dispatch_rgemm_from) */
    bool small_batch;        /* small batches (2 .. the GEMM thresholds) through the kernels' multi-token
                                dots (vec_dot_mxn) where they have one, and float weights' batches of up to
                                8 tokens through per-token dots instead of the float GEMM (default true) */
    nb_decode_dot decode_dot; /* default AUTO */
    bool decode_prefetch_set; /* false (default): the distance is chosen per CPU */
    int decode_prefetch;     /* else: bytes the streaming kernels prefetch ahead (kernels.h
                                nb_prefetch_bytes), a multiple of 64 in 0..NB_PREFETCH_MAX */
    nb_choice decode_prefetch_tune; /* unless decode_prefetch_set: measure the distance on the model's
                                weights at load (nb_kctx_tune_prefetch). AUTO (default): on CPUs whose
                                distance was not measured (nb_prefetch_measured_for_cpu); ON: always;
                                OFF: never. --decode-prefetch auto|tune|BYTES */
    bool decode_prefetch_l2_set; /* false (default): the L2 distance is chosen per CPU */
    int decode_prefetch_l2;  /* else: bytes ahead the x86 decode dots ask for each line into L2 too
                                (kernels.h nb_prefetch_l2_bytes; 0: not), as decode_prefetch.
                                --decode-prefetch-l2 auto|BYTES */
    int decode_streams;      /* 0 (default): per CPU (nb_decode_streams_for_cpu); else 1..NB_DECODE_STREAMS_MAX:
                                how many far-apart runs of rows each thread of a one-token matmul reads in
                                lockstep, where the weight type's kernel has the multi-row dot
                                (kernels/qdot.h vec_dot_mxn). --decode-streams auto|N */
    int64_t rows_min, rows_max; /* batches of rows_min .. rows_max tokens go through the kernels'
                                   rows-in-lanes form (kernels/qdot.h vec_dot_rows) where every weight of
                                   the job has one, before the other paths (default 4 .. 24; rows_max
                                   0 = never: --no-rows-dots) */
    int64_t sgemm_max;       /* batches of rgemm_min .. sgemm_max tokens take the small-batch int8 GEMMs
                                (kernels/sbatch.h: 8-token units) instead of the 16-token ones; 0 = never
                                (default: every batch size, dispatch.c; NIBBLE_SGEMM_MAX) */
    nb_choice attn_bf16_dots; /* attention with bf16 dot products where the CPU has them. Where AMX-BF16
                                is granted, unless OFF: bf16 pools take nb_attn_amx_bf16 and every other
                                pool type's prompt tiles nb_attn_amx_split (split bf16, f32-like
                                accuracy; int8 pools too). Else bf16 pools take
                                nb_attn_avx512_bf16 where AUTO = nb_attn_bf16_dots_for_cpu or ON; 
                                NIBBLE_ATTN_BF16_DOTS=0|1|auto, --attn-bf16-dots off|on|auto */
    bool attn_int8_dots;     /* int8 KV pools: attention with int8 dot products where the CPU has AVX512_VNNI
                                (kernels/attn.h nb_attn_avx512_int8), or AVX-VNNI at avx2, unless the
                                split-bf16 AMX kernel runs the other pools (it takes int8 pools too);
                                default true, NIBBLE_ATTN_INT8_DOTS=0 */
    int64_t gemm_slab_kib;   /* KiB of packed activations per slab of the int8 GEMM (every row passes one
                                slab before the next; it should stay in one core's L2); 0 (default) = per
                                CPU, nb_gemm_slab_for_cpu (--gemm-slab-kib, NIBBLE_GEMM_SLAB_KIB) */
} nb_kernel_opts;

void nb_kernel_opts_defaults(nb_kernel_opts *o);
/* The environment variables above over *o; a bad value is an error naming
 * the variable and what is allowed. */
nb_status nb_kernel_opts_from_env(nb_kernel_opts *o) __attribute__((warn_unused_result));

/* Compact index of a dtype into the table's per-type arrays. */
#define NB_DISPATCH_SLOTS                                                                                   \
    ((int)NB_DTYPE_GGML_END + ((int)NB_DTYPE_EXT_END - (int)NB_DTYPE_EXT_BASE) +                              \
     ((int)NB_DTYPE_MEM_END - (int)NB_DTYPE_MEM_BASE))
static inline int nb_dispatch_slot(nb_dtype t) {
    int v = (int)t;
    if (v >= 0 && v < (int)NB_DTYPE_GGML_END) return v;
    if (v >= (int)NB_DTYPE_EXT_BASE && v < (int)NB_DTYPE_EXT_END) return (int)NB_DTYPE_GGML_END + v - (int)NB_DTYPE_EXT_BASE;
    if (v >= (int)NB_DTYPE_MEM_BASE && v < (int)NB_DTYPE_MEM_END)
        return (int)NB_DTYPE_GGML_END + ((int)NB_DTYPE_EXT_END - (int)NB_DTYPE_EXT_BASE) + v - (int)NB_DTYPE_MEM_BASE;
    return -1;
}

typedef void (*nb_actpack_group_fn)(nb_actpack *ap, const float *X, int64_t g, void *row);

typedef struct nb_dispatch {
    nb_kernel_opts opts;   /* as given, after defaults */
    nb_isa isa;            /* the effective ISA: min(CPU, opts.max_isa) */
    const nb_float_kernels *fk; /* float GEMM and conversions (prefill) */
    nb_dot_fn dot_f32, dot_f16, dot_bf16; /* one-token float dots (decode) */
    nb_dot_m_fn dot_f32_m, dot_f16_m, dot_bf16_m; /* the same, several rows in lockstep (NULL: none) */
    nb_dot2_fn dot_f32_2, dot_f16_2, dot_bf16_2;   /* the same, one row and two tokens (NULL: none) */
    const char *decode_dot; /* which: "avx2", "avx512", "scalar" */
    int decode_prefetch;    /* bytes ahead the streaming kernels prefetch (nb_prefetch_for_cpu, or the option) */
    bool decode_prefetch_tune; /* a model's forward pass measures its own distance at load (opts) */
    int decode_prefetch_l2; /* the L2 distance (nb_prefetch_l2_for_cpu, or the option; 0: none) */
    int decode_streams;     /* runs of rows per thread in one-token matmuls (nb_decode_streams_for_cpu, or
                               the option) */
    bool decode_streams_tune; /* a model's forward pass measures them at load (opts AUTO on a CPU where
                                 they were not measured) */
    /* per weight type (nb_dispatch_slot): NULL / the type itself when none */
    const nb_qdot *qdot[NB_DISPATCH_SLOTS];
    const nb_rgemm *rgemm[NB_DISPATCH_SLOTS]; /* NULL unless opts.int8_gemm */
    nb_to_float_fn to_float[NB_DISPATCH_SLOTS];
    nb_dtype repack_to[NB_DISPATCH_SLOTS];    /* load-time layout of each file type */
    nb_actpack_group_fn actpack_group;        /* fills one token group of an int8-GEMM pack */
    int64_t qgemm_min, rgemm_min, rows_min, rows_max;
    int64_t rgemm_min_dots; /* nb_dispatch_rgemm_from: rgemm_min, or 12 where the multi-token dots win */
    int64_t rows_max_q4_k;  /* nb_dispatch_rows_to for Q4_KR: rows_max, or 8 beside the _wide small-batch GEMM */
    nb_attn_fn attn;       /* the attention tile kernel (kernels/attn.h) */
    const char *attn_name; /* its ISA, for logs */
    nb_attn_fn attn_kv[NB_KV_TYPES]; /* the one for each KV pool type: attn, or the bf16-dot kernel
                                        (bf16 pools), the int8-dot kernel (int8 pools), the AMX
                                        split-bf16 kernel (the others, where AMX is used) */
    bool attn_bf16_amx; /* bf16 pools take the AMX kernel (kernels/attn.h nb_attn_amx_bf16), the
                           other pool types the AMX split-bf16 one (nb_attn_amx_split) */
    char desc[512];   /* one line: isa, decode dot, prefetch, repack, thresholds */
    nb_repack_gemm_fn sgemm[NB_DISPATCH_SLOTS]; /* small-batch int8 GEMMs (kernels/sbatch.h), NULL unless rgemm */
    int64_t sgemm_max;
    size_t gemm_slab_bytes; /* opts.gemm_slab_kib, or nb_gemm_slab_for_cpu */
} nb_dispatch;

nb_status nb_dispatch_build(const nb_kernel_opts *o, nb_dispatch *out) __attribute__((warn_unused_result));
/* The streaming kernels' prefetch distance the table takes on this CPU
 * unless the options set one (dispatch.c says what it rests on). */
int nb_prefetch_for_cpu(const nb_cpu *c);
/* Whether that distance was measured on this kind of CPU (else the model
 * loader measures it, decode_prefetch_tune AUTO). */
bool nb_prefetch_measured_for_cpu(const nb_cpu *c);
/* The decode dots' second, L2 distance the table takes on this CPU
 * (kernels.h nb_prefetch_l2_bytes; 0: none). */
int nb_prefetch_l2_for_cpu(const nb_cpu *c);
/* Runs of rows each thread reads in lockstep in one-token matmuls on this
 * CPU (opts.decode_streams; dispatch.c says what it rests on). */
int nb_decode_streams_for_cpu(const nb_cpu *c);
/* Whether that count was measured on this kind of CPU (else the model
 * loader measures it, with decode_streams auto). */
bool nb_decode_streams_measured_for_cpu(const nb_cpu *c);
/* Whether bf16 pools take the bf16-dot attention kernel on this CPU when
 * the options leave it to the table (dispatch.c says what it rests on). */
bool nb_attn_bf16_dots_for_cpu(const nb_cpu *c);
/* Whether Q8_0R's and W8R's decode dots are the 256-bit AVX-VNNI ones where
 * the float decode dots are 256-bit too (AMD family 26 with AVX-VNNI;
 * dispatch.c). */
bool nb_dots8_256_for_cpu(const nb_cpu *c);
/* Whether the AVX-512 small-batch GEMMs take 512-bit tiles from 9 tokens
 * (sbatch.h _wide) rather than 17: CPUs that run 512-bit ops at full
 * width (all with AVX-512 VNNI but AMD family 25; dispatch.c). */
bool nb_sbatch_wide_for_cpu(const nb_cpu *c);
/* "auto", "on"/"1", "off"/"0"; false for anything else. */
bool nb_choice_parse(const char *s, nb_choice *out);
/* Bytes of packed activations per int8-GEMM slab on this CPU: a quarter of
 * its L2, all of it for the AMX GEMMs (256 KiB when unknown), within
 * NB_GEMM_SLAB_MIN_KIB..NB_GEMM_SLAB_MAX_KIB. */
size_t nb_gemm_slab_for_cpu(const nb_cpu *c, bool amx);
#define NB_GEMM_SLAB_MIN_KIB 64
#define NB_GEMM_SLAB_MAX_KIB (64 << 10)

/* Sets the options of the process's table. Before the table is built it
 * also caps base/cpu.h's ISA (what code outside the table, like attention,
 * asks); afterwards it fails unless the options are the ones in use. */
nb_status nb_dispatch_configure(const nb_kernel_opts *o) __attribute__((warn_unused_result));
/* The process's table (built on first call; never NULL: a bad environment
 * value is logged and the defaults are used). */
const nb_dispatch *nb_dispatch_default(void);

/* Table lookups (t may be any dtype; out-of-range ids give NULL / t). */
static inline const nb_qdot *nb_dispatch_qdot(const nb_dispatch *d, nb_dtype t) {
    int s = nb_dispatch_slot(t);
    return s < 0 ? NULL : d->qdot[s];
}
static inline const nb_rgemm *nb_dispatch_rgemm(const nb_dispatch *d, nb_dtype t) {
    int s = nb_dispatch_slot(t);
    return s < 0 ? NULL : d->rgemm[s];
}
/* The small-batch int8 GEMM for a batch of n tokens of weight type t, NULL
 * when the 16-token GEMM (nb_dispatch_rgemm) is the one to use. */
static inline nb_repack_gemm_fn nb_dispatch_sgemm(const nb_dispatch *d, nb_dtype t, int64_t n) {
    int s = nb_dispatch_slot(t);
    return s < 0 || n > d->sgemm_max ? NULL : d->sgemm[s];
}
static inline nb_to_float_fn nb_dispatch_to_float(const nb_dispatch *d, nb_dtype t) {
    int s = nb_dispatch_slot(t);
    return s < 0 ? NULL : d->to_float[s];
}
/* The most tokens of weight type t that take its rows-in-lanes kernel:
 * rows_max, but at most 8 for Q4_KR where the small-batch GEMM takes
 * 512-bit tiles from 9 tokens (sbatch.h _wide): through them its batches
 * of 12 and 16 ran 1.19x and 1.36x the rows kernel's speed (Zen 5, one
 * thread; docs/speed.md session 51). */
static inline int64_t nb_dispatch_rows_to(const nb_dispatch *d, nb_dtype t) {
    return t == NB_Q4_KR ? d->rows_max_q4_k : d->rows_max;
}
/* The fewest tokens of weight type t that take the int8 GEMM: rgemm_min,
 * but rgemm_min_dots for Q4_KR, Q6_KR, W4G*R and the lane forms Q4_0L,
 * Q8_0L, W8L, W4G*L (12 where the GEMMs are
 * plain AVX2's and rgemm_min was not set: there their multi-token dots,
 * which unpack each block once for 4 tokens, beat the GEMM up to 12 tokens;
 * dispatch.c, docs/speed.md session 41). */
static inline int64_t nb_dispatch_rgemm_from(const nb_dispatch *d, nb_dtype t) {
    bool dots = t == NB_Q4_KR || t == NB_Q6_KR || t == NB_W4G32R || t == NB_W4G64R || t == NB_W4G128R ||
                t == NB_Q4_0L || t == NB_W4G32L || t == NB_W4G64L || t == NB_W4G128L || t == NB_Q8_0L || t == NB_W8L;
    return dots ? d->rgemm_min_dots : d->rgemm_min;
}

#endif
