/* CPU feature detection (cpuid + xgetbv, once). NIBBLE_ISA=scalar|avx2|avx512
 * caps what kernels may use, so tests and users can force each path. */
#ifndef NB_BASE_CPU_H
#define NB_BASE_CPU_H

#include <stdbool.h>
#include <stdint.h>

typedef enum nb_cpu_vendor { NB_CPU_OTHER = 0, NB_CPU_INTEL, NB_CPU_AMD } nb_cpu_vendor;

typedef struct nb_cpu {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx512fp16;
    bool avxvnni;                       /* AVX-VNNI (256-bit vpdpbusd); NIBBLE_AVXVNNI=0 hides it */
    bool amx_tile, amx_int8, amx_bf16; /* usable: OS granted the tile state */
    int n_cores;                        /* online logical CPUs */
    long l2_bytes;                      /* one core's L2 (sysconf _SC_LEVEL2_CACHE_SIZE); 0 unknown */
    nb_cpu_vendor vendor;
    int family, model;                  /* display family / model (CPUID leaf 1, extended fields folded in) */
    char name[49];                      /* brand string (CPUID 0x80000002-4), trimmed; "" if none */
} nb_cpu;

typedef enum nb_isa { NB_ISA_SCALAR = 0, NB_ISA_AVX2 = 1, NB_ISA_AVX512 = 2, NB_ISA_AMX = 3 } nb_isa;

const nb_cpu *nb_cpu_get(void);
/* Best ISA level available, capped by NIBBLE_ISA (read once) or nb_cpu_cap_isa. */
nb_isa nb_cpu_isa(void);
/* Lowers (or raises back up to what the CPU has) the cap nb_cpu_isa applies:
 * the kernels' --isa option (kernels/dispatch.h), set once at startup. */
void nb_cpu_cap_isa(nb_isa cap);
const char *nb_isa_name(nb_isa isa);
/* One line listing the features, for logs and `nibble bench`. */
const char *nb_cpu_describe(void);
/* The brand string ("AMD EPYC 9R14 ...") or "unknown CPU", for benchmark output. */
const char *nb_cpu_name(void);
/* The ISA named "scalar", "avx2", "avx512" or "amx"; false for other names. */
bool nb_isa_parse(const char *name, nb_isa *out);

/* CPUs' worth of time this process's cgroup CFS quota allows (the smallest
 * over its cgroup and their ancestors: v2 cpu.max, v1 cpu.cfs_quota_us /
 * cpu.cfs_period_us), rounded up; 0 when none is set or none can be read.
 * base/cgroup.c; the thread pool's default size takes it into account. */
int nb_cpu_quota(void);
/* The parsers, for tests: "150000 100000" -> 2, "max 100000" -> 0; quota -1 -> 0. */
int nb_cpu_quota_v2(const char *cpu_max);
int nb_cpu_quota_v1(long long quota_us, long long period_us);
/* A /proc/meminfo field ("MemTotal", "MemAvailable") in bytes; path NULL:
 * /proc/meminfo. 0 when the file or the field is missing or unreadable. */
uint64_t nb_meminfo_bytes(const char *path, const char *field);
/* The smallest cgroup memory limit over this process's cgroup and its
 * ancestors (v2 memory.max, v1 memory.limit_in_bytes), 0 when none is set. */
uint64_t nb_mem_limit(void);
/* Bytes this process may still commit: the host's MemAvailable, or less
 * where a cgroup memory limit (v2 memory.max, v1 memory.limit_in_bytes, of
 * its cgroup or an ancestor) leaves less than that above what the cgroup
 * uses (less its inactive page cache); 0 when neither can be read.
 * base/cgroup.c. */
uint64_t nb_mem_available(void);

#endif
