/* The resident copy of the weights (model/model.c make_resident): once the
 * matrices are copied out of the file mapping, the process no longer holds
 * the file's pages of them (it would hold the model twice), the copy is
 * byte for byte the file's tensors, and the mapping still reads correctly
 * afterwards. With use_mmap nothing is copied and the weights are the
 * mapping itself. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "model/synth.h"

/* kB of this process's resident pages in mappings of `path` (/proc/self/smaps),
 * -1 when smaps cannot be read. */
static long mapped_rss_kb(const char *path) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[1024];
    long kb = 0;
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int off = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) >= 3 && off > 0) {
            char *name = line + off;
            name[strcspn(name, "\n")] = 0;
            in = !strcmp(name, path);
            continue;
        }
        long v;
        if (in && sscanf(line, "Rss: %ld kB", &v) == 1) kb += v;
    }
    fclose(f);
    return kb;
}

static const char *model_file(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/resident.gguf", nb_test_tmpdir());
    nb_synth_params p;
    nb_synth_defaults(&p, NB_ARCH_LLAMA);
    p.n_embd = 256;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 512;
    p.wtype = NB_F16; /* not repacked on any CPU: the copy must equal the file */
    assert_int_equal(nb_synth_write(&p, path), NB_OK);
    return path;
}

/* model_file(), for the tests that read its pages' residency: NULL (the
 * test skipped, visibly) where /proc/self/smaps cannot be read. */
static const char *measurable_model_file(void) {
    const char *path = model_file();
    if (mapped_rss_kb(path) < 0) {
        NB_TEST_SKIP("/proc/self/smaps cannot be read here: page residency unmeasurable");
        return NULL;
    }
    return path;
}

static void test_released(void **state) {
    (void)state;
    const char *path = measurable_model_file();
    if (!path) return;
    nb_map file;
    assert_int_equal(nb_map_file(path, &file), NB_OK);
    nb_model *m;
    assert_int_equal(nb_model_load(path, &m), NB_OK);
    /* the file's size less its metadata is the matrices' and norms' bytes;
     * what stays mapped is the header, the norms and pages shared with them */
    long kb = mapped_rss_kb(path);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(path, &g), NB_OK);
    uint64_t data_bytes = nb_gguf_file_size(g) - nb_gguf_data_offset(g);
    /* the copy is the file's tensors (the same bytes the mapping holds) */
    int64_t copied = 0;
    for (int64_t i = 0; i < nb_gguf_n_tensors(g); i++) {
        const nb_tensor *ft = nb_gguf_tensor(g, i);
        if (ft->n_dims < 2) continue;
        const nb_tensor *mt = nb_source_find(&m->src, ft->name);
        assert_non_null(mt);
        assert_int_equal(mt->type, ft->type);
        assert_int_equal(mt->nbytes, ft->nbytes);
        assert_memory_equal(mt->data, ft->data, (size_t)ft->nbytes);
        assert_true(mt->data != ft->data);
        copied++;
    }
    assert_true(copied >= 2 * 7 + 1);
    nb_gguf_close(g);
    printf("file %zu bytes (%llu of tensor data), this process's pages of its mapping after load: %ld kB\n",
           file.size, (unsigned long long)data_bytes, kb);
    /* two mappings of the file were open when kb was read: the model's and
     * `file` (untouched), so kb is the model's mapping */
    assert_true((uint64_t)kb * 1024 < data_bytes / 8);
    nb_model_free(m);
    nb_unmap(&file);
}

static void test_mmap_kept(void **state) {
    (void)state;
    const char *path = model_file();
    nb_model_params p = {.use_mmap = true};
    nb_model *m;
    assert_int_equal(nb_model_load_ex(path, &p, &m), NB_OK);
    nb_gguf *g;
    assert_int_equal(nb_gguf_open(path, &g), NB_OK);
    const nb_tensor *ft = nb_gguf_find_tensor(g, "blk.0.ffn_up.weight");
    assert_non_null(ft);
    const nb_tensor *mt = nb_source_find(&m->src, ft->name);
    assert_non_null(mt);
    assert_null(m->resident);
    assert_memory_equal(mt->data, ft->data, (size_t)ft->nbytes);
    nb_gguf_close(g);
    nb_model_free(m);
}

/* nb_map_release on a mapping: those pages leave the process, the
 * bytes read the same afterwards, and ranges outside the mapping (here a
 * heap buffer) are left alone. */
static void test_map_release(void **state) {
    (void)state;
    const char *path = measurable_model_file();
    if (!path) return;
    nb_map a;
    assert_int_equal(nb_map_file(path, &a), NB_OK);
    uint8_t *before = malloc(a.size);
    memcpy(before, a.data, a.size); /* faults every page in */
    long full = mapped_rss_kb(path);
    assert_true(full * 1024 >= (long)(a.size & ~(size_t)4095));
    nb_map_release(&a, a.data, a.size);
    assert_true(mapped_rss_kb(path) < full / 4);
    assert_memory_equal(a.data, before, a.size);
    nb_map_release(&a, before, a.size); /* not in the mapping: nothing happens */
    assert_memory_equal(a.data, before, a.size);
    nb_map empty = {0};
    nb_map_release(&empty, before, a.size);
    assert_memory_equal(a.data, before, a.size);
    free(before);
    nb_unmap(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_released), cmocka_unit_test(test_mmap_kept),
                                       cmocka_unit_test(test_map_release)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
