/* The AMX tile configuration, shared by the tile-unit kernels (attn_amx.c,
 * gemm_amx.c). Include from _amx.c files only. */
#ifndef NB_KERNELS_X86_AMX_TILES_H
#define NB_KERNELS_X86_AMX_TILES_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The 64-byte operand of ldtilecfg (palette 1). */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} nb_tile_config;

/* Tiles t .. t+n-1 as `rows` rows of `colsb` bytes in c (zeroed first by
 * the caller: unnamed tiles stay unconfigured). */
static inline void nb_tile_shape(nb_tile_config *c, int t, int n, int rows, int colsb) {
    for (int i = t; i < t + n; i++) {
        c->rows[i] = (uint8_t)rows;
        c->colsb[i] = (uint16_t)colsb;
    }
}

/* Loads c as this thread's tile configuration (palette 1). */
static inline void nb_tiles_load(nb_tile_config *c) {
    c->palette = 1;
    /* GCC 12 does not see that ldtilecfg reads c and may drop the stores
     * that filled it (the first tile instruction then raises SIGILL) */
    __asm__ volatile("" : : "r"(c) : "memory");
    _tile_loadconfig(c);
}

#endif
