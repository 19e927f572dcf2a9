/* cpuid-based feature detection. AMX also needs the OS to grant the tile
 * data state (arch_prctl ARCH_REQ_XCOMP_PERM on Linux), else the first tile
 * instruction raises SIGILL - the crash llama.cpp's AMX path shows here. */
#include "base/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif

static nb_cpu cpu;
static nb_isa isa_cap = NB_ISA_AMX;
static char desc[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static void detect(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu.n_cores = n > 0 ? (int)n : 1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    cpu.l2_bytes = l2 > 0 ? l2 : 0;
#endif
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        char v[13];
        memcpy(v, &b, 4);
        memcpy(v + 4, &d, 4);
        memcpy(v + 8, &c, 4);
        v[12] = 0;
        cpu.vendor = !strcmp(v, "GenuineIntel") ? NB_CPU_INTEL : !strcmp(v, "AuthenticAMD") ? NB_CPU_AMD : NB_CPU_OTHER;
    }
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(cpu.name, r, 48);
        cpu.name[48] = 0;
        char *s = cpu.name;
        while (*s == ' ') s++;
        memmove(cpu.name, s, strlen(s) + 1);
        for (size_t l = strlen(cpu.name); l > 0 && cpu.name[l - 1] == ' '; l--) cpu.name[l - 1] = 0;
    }
    if (!__get_cpuid(1, &a, &b, &c, &d)) goto done;
    {
        int fam = (int)((a >> 8) & 15), mod = (int)((a >> 4) & 15);
        if (fam == 15) fam += (int)((a >> 20) & 255);
        if (fam == 6 || fam >= 15) mod += (int)((a >> 16) & 15) << 4;
        cpu.family = fam;
        cpu.model = mod;
    }
    bool osxsave = c & (1u << 27);
    bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) goto done;
    cpu.avx2 = avx && ymm && (b & (1u << 5));
    cpu.fma = fma && ymm;
    cpu.f16c = f16c && ymm;
    cpu.avx512f = zmm && (b & (1u << 16));
    cpu.avx512dq = zmm && (b & (1u << 17));
    cpu.avx512bw = zmm && (b & (1u << 30));
    cpu.avx512vl = zmm && (b & (1u << 31));
    cpu.avx512vnni = zmm && (c & (1u << 11));
    cpu.avx512fp16 = zmm && (d & (1u << 23));
    bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
    unsigned a1, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
        cpu.avx512bf16 = zmm && (a1 & (1u << 5));
        cpu.avxvnni = ymm && (a1 & (1u << 4));
    }
    if (amx_tile) {
        /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
        bool granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0 && (xcr0 & (3ull << 17)) == (3ull << 17);
        cpu.amx_tile = granted;
        cpu.amx_int8 = granted && amx_int8;
        cpu.amx_bf16 = granted && amx_bf16;
    }
done:
#endif
    {
        const char *e = getenv("NIBBLE_ISA");
        nb_isa cap;
        if (e && nb_isa_parse(e, &cap)) isa_cap = cap;
        e = getenv("NIBBLE_AVXVNNI"); /* =0: take the plain AVX2 int8 kernels on an AVX-VNNI CPU */
        if (e && !strcmp(e, "0")) cpu.avxvnni = false;
    }
    snprintf(desc, sizeof desc, "%s family %d model %d, cores=%d L2=%ldK AVX2=%d FMA=%d F16C=%d AVX512F=%d AVX512BW=%d AVX512_VNNI=%d AVX512_BF16=%d AVX512_FP16=%d AMX_INT8=%d AMX_BF16=%d AVX_VNNI=%d",
             cpu.vendor == NB_CPU_AMD ? "AMD" : cpu.vendor == NB_CPU_INTEL ? "Intel" : "other", cpu.family, cpu.model,
             cpu.n_cores, cpu.l2_bytes >> 10, cpu.avx2, cpu.fma, cpu.f16c, cpu.avx512f, cpu.avx512bw, cpu.avx512vnni,
             cpu.avx512bf16, cpu.avx512fp16, cpu.amx_int8, cpu.amx_bf16, cpu.avxvnni);
}

const nb_cpu *nb_cpu_get(void) {
    pthread_once(&once, detect);
    return &cpu;
}

nb_isa nb_cpu_isa(void) {
    const nb_cpu *c = nb_cpu_get();
    nb_isa best = NB_ISA_SCALAR;
    if (c->avx2 && c->fma && c->f16c) best = NB_ISA_AVX2;
    if (best == NB_ISA_AVX2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq) best = NB_ISA_AVX512;
    if (best == NB_ISA_AVX512 && c->amx_int8 && c->amx_bf16) best = NB_ISA_AMX;
    nb_isa cap = __atomic_load_n(&isa_cap, __ATOMIC_RELAXED);
    return best < cap ? best : cap;
}

const char *nb_isa_name(nb_isa isa) {
    static const char *n[] = {"scalar", "avx2", "avx512", "amx"};
    return (unsigned)isa <= NB_ISA_AMX ? n[isa] : "?";
}

void nb_cpu_cap_isa(nb_isa cap) {
    nb_cpu_get();
    __atomic_store_n(&isa_cap, cap, __ATOMIC_RELAXED);
}

bool nb_isa_parse(const char *name, nb_isa *out) {
    static const char *n[] = {"scalar", "avx2", "avx512", "amx"};
    for (int i = 0; i <= NB_ISA_AMX; i++)
        if (!strcmp(name, n[i])) {
            *out = (nb_isa)i;
            return true;
        }
    return false;
}

const char *nb_cpu_name(void) {
    nb_cpu_get();
    return cpu.name[0] ? cpu.name : "unknown CPU";
}

const char *nb_cpu_describe(void) {
    nb_cpu_get();
    return desc;
}
