/* Model identity for evaluation reports (see model_id.h). */
#include "eval/model_id.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/sha256.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static nb_status dir_sha256(const char *dir, char hex[65]) {
    DIR *d = opendir(dir);
    if (!d) return nb_fail(NB_ERR_IO, "%s: cannot list the directory", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    nb_status st = NB_OK;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) { st = NB_ERR_NOMEM; break; }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) { st = NB_ERR_NOMEM; break; }
        n++;
    }
    closedir(d);
    if (st == NB_OK) qsort(names, n, sizeof *names, cmp_str);
    nb_sha256_ctx ctx;
    nb_sha256_init(&ctx);
    for (size_t i = 0; i < n && st == NB_OK; i++) {
        char fh[65];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if ((st = nb_sha256_file(path, fh)) != NB_OK) break;
        nb_sha256_update(&ctx, names[i], strlen(names[i]));
        nb_sha256_update(&ctx, "\t", 1);
        nb_sha256_update(&ctx, fh, 64);
        nb_sha256_update(&ctx, "\n", 1);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != NB_OK) return st;
    uint8_t dg[32];
    nb_sha256_final(&ctx, dg);
    nb_sha256_hex(dg, hex);
    return NB_OK;
}

nb_status nb_model_id_sha256(const char *path, char hex[65]) {
    hex[0] = '\0';
    return nb_is_dir(path) ? dir_sha256(path, hex) : nb_sha256_file(path, hex);
}

nb_status nb_model_id_of(const nb_session *s, nb_model_id *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", s->model_path);
    snprintf(out->type, sizeof out->type, "%s", s->model->src.format ? s->model->src.format : "unknown");
    return nb_model_id_sha256(s->model_path, out->sha256);
}

json_t *nb_model_id_json(const nb_model_id *id) {
    return json_pack("{s:s, s:s, s:s}", "path", id->path, "sha256", id->sha256, "type", id->type);
}
