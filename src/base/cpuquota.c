/* The CPU time a cgroup's CFS quota allows this process (Kubernetes CPU
 * limits, `docker run --cpus`): a pool sized by the affinity mask alone
 * would run, say, 64 spinning threads in a 2-CPU quota and spend most of
 * each period throttled. */
#include "base/cpu.h"

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

/* The smallest quota of dir and its ancestors down to root (a limit on a
 * parent binds its children), 0 when none is set. */
static int quota_up(const char *root, const char *rel, bool v2) {
    char dir[1024], path[1100], a[128], b[128];
    if (snprintf(dir, sizeof dir, "%s%s", root, rel) >= (int)sizeof dir) return 0;
    size_t rl = strlen(root);
    int best = 0;
    for (;;) {
        int q = 0;
        if (v2) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            if (read_line(path, a, sizeof a)) q = nb_cpu_quota_v2(a);
        } else {
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
            bool ok = read_line(path, a, sizeof a);
            snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
            if (ok && read_line(path, b, sizeof b)) q = nb_cpu_quota_v1(atoll(a), atoll(b));
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= rl || !slash || (size_t)(slash - dir) < rl) break;
        *slash = 0;
    }
    return best;
}

int nb_cpu_quota(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024];
    int best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *rel = c2 + 1;
        int q = 0;
        if (!strcmp(line, "0") && !*ctrls) { /* cgroup v2 */
            q = quota_up(CG_ROOT, strcmp(rel, "/") ? rel : "", true);
        } else { /* v1: the hierarchy whose controllers include cpu */
            bool has_cpu = false;
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", ctrls);
            for (char *s = strtok(tmp, ","); s; s = strtok(NULL, ","))
                if (!strcmp(s, "cpu")) has_cpu = true;
            if (!has_cpu) continue;
            char root[300];
            snprintf(root, sizeof root, CG_ROOT "/%s", ctrls);
            q = quota_up(root, strcmp(rel, "/") ? rel : "", false);
            if (!q) q = quota_up(CG_ROOT "/cpu", strcmp(rel, "/") ? rel : "", false);
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    fclose(f);
    return best;
}
