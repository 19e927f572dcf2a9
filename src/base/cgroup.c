/* What this process's cgroups allow it:
 * - CPU time, from the CFS quota (Kubernetes CPU limits, `docker run
 *   --cpus`): a pool sized by the affinity mask alone would run, say, 64
 *   spinning threads in a 2-CPU quota and spend most of each period
 *   throttled.
 * - Memory still to be had, from the memory limit less what the cgroup
 *   uses (`docker run -m`): /proc/meminfo shows the host's, and a process
 *   that commits more than its limit is killed. */
#include "base/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_ROOT "/sys/fs/cgroup"

int nb_cpu_quota_v2(const char *cpu_max) {
    long long q, p;
    if (!cpu_max || sscanf(cpu_max, "%lld %lld", &q, &p) != 2 || q <= 0 || p <= 0) return 0; /* "max 100000": none */
    return (int)((q + p - 1) / p);
}

int nb_cpu_quota_v1(long long quota_us, long long period_us) {
    if (quota_us <= 0 || period_us <= 0) return 0; /* -1: none */
    return (int)((quota_us + period_us - 1) / period_us);
}

static bool read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* The value of one cgroup directory, or 0 when it sets none. */
typedef uint64_t (*cg_value_fn)(const char *dir, bool v2);

static uint64_t cpu_value(const char *dir, bool v2) {
    char path[1100], a[128], b[128];
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        return read_line(path, a, sizeof a) ? (uint64_t)nb_cpu_quota_v2(a) : 0;
    }
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    bool ok = read_line(path, a, sizeof a);
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    return ok && read_line(path, b, sizeof b) ? (uint64_t)nb_cpu_quota_v1(atoll(a), atoll(b)) : 0;
}

/* The directory's memory limit in bytes, 0 when it sets none. */
static uint64_t mem_limit(const char *dir, bool v2) {
    char path[1100], a[128];
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (!read_line(path, a, sizeof a) || !strncmp(a, "max", 3)) return 0;
    unsigned long long limit = strtoull(a, NULL, 10);
    return limit && limit < 1ull << 60 ? limit : 0; /* v1's "no limit" is a page-rounded 2^63 */
}

/* A "name value" line of the directory's memory.stat, 0 when absent. */
static uint64_t mem_stat(const char *dir, const char *name) {
    char path[1100], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t nl = strlen(name);
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, nl) && line[nl] == ' ') {
            v = strtoull(line + nl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Bytes the directory's limit leaves above what it uses (at least 1 when
 * it is used up), 0 when it sets none. What it uses leaves out the
 * inactive page cache, which the kernel reclaims before it kills anyone
 * (the working set kubelet and `docker stats` show): reading a model file
 * charges its pages to the cgroup. */
static uint64_t mem_left(const char *dir, bool v2) {
    char path[1100], b[128];
    uint64_t limit = mem_limit(dir, v2), used = 0;
    if (!limit) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (read_line(path, b, sizeof b)) used = strtoull(b, NULL, 10);
    uint64_t cache = mem_stat(dir, v2 ? "inactive_file" : "total_inactive_file");
    used = cache < used ? used - cache : 0;
    return used < limit ? limit - used : 1;
}

/* The smallest value of dir and its ancestors down to root (a limit on a
 * parent binds its children), 0 when none is set. */
static uint64_t min_up(const char *root, const char *rel, bool v2, cg_value_fn value) {
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s%s", root, rel) >= (int)sizeof dir) return 0;
    size_t rl = strlen(root);
    uint64_t best = 0;
    for (;;) {
        uint64_t q = value(dir, v2);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= rl || !slash || (size_t)(slash - dir) < rl) break;
        *slash = 0;
    }
    return best;
}

/* The smallest value over this process's cgroups: the v2 one and the v1
 * hierarchy whose controllers include ctrl; 0 when none sets one. */
static uint64_t cgroup_min(const char *ctrl, cg_value_fn value) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024];
    uint64_t best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *rel = strcmp(c2 + 1, "/") ? c2 + 1 : "";
        uint64_t q = 0;
        if (!strcmp(line, "0") && !*ctrls) { /* cgroup v2 */
            q = min_up(CG_ROOT, rel, true, value);
        } else { /* v1: the hierarchy whose controllers include ctrl */
            bool has = false;
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", ctrls);
            for (char *s = strtok(tmp, ","); s; s = strtok(NULL, ","))
                if (!strcmp(s, ctrl)) has = true;
            if (!has) continue;
            char root[300];
            snprintf(root, sizeof root, CG_ROOT "/%s", ctrls);
            q = min_up(root, rel, false, value);
            if (!q) { /* "cpu,cpuacct" is also mounted as "cpu" on some systems */
                snprintf(root, sizeof root, CG_ROOT "/%s", ctrl);
                q = min_up(root, rel, false, value);
            }
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    fclose(f);
    return best;
}

int nb_cpu_quota(void) { return (int)cgroup_min("cpu", cpu_value); }

uint64_t nb_meminfo_bytes(const char *path, const char *field) {
    FILE *f = fopen(path ? path : "/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t fl = strlen(field);
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            if (sscanf(line + fl + 1, "%llu", &kb) != 1 || kb > 1ull << 50) kb = 0;
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

uint64_t nb_mem_limit(void) { return cgroup_min("memory", mem_limit); }

uint64_t nb_mem_available(void) {
    uint64_t host = nb_meminfo_bytes(NULL, "MemAvailable"), cg = cgroup_min("memory", mem_left);
    return cg && (!host || cg < host) ? cg : host;
}
