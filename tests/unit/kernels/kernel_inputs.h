/* Test inputs for the repacked-kernel tests (test_repack_avx2, test_sbatch_avx2):
 * a xorshift generator and GGUF rows with extreme codes. Header-only: each
 * test binary includes it once. */
#ifndef NB_TEST_KERNEL_INPUTS_H
#define NB_TEST_KERNEL_INPUTS_H

#include <stdint.h>
#include <string.h>

#include "base/blocks.h"
#include "base/dtype.h"
#include "base/half.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
/* uniform in [-1, 1) */
static float frand(void) { return (float)((next() >> 11) * (1.0 / 9007199254740992.0) * 2 - 1); }

/* Rows of GGUF blocks of `gguf` with codes from `mode` (0 random bytes, 1 all
 * bytes 0xff, 2 all 0x00 / the minimum: Q8_0 -128, Q6_K scales -128) and
 * sane scales. */
static void fill_rows(nb_dtype gguf, uint8_t *g, uint64_t bytes, int mode) {
    for (uint64_t i = 0; i < bytes; i++) g[i] = mode == 0 ? (uint8_t)next() : mode == 1 ? 0xff : 0x00;
    const nb_half d = nb_fp32_to_fp16(0.02f), dm = nb_fp32_to_fp16(0.01f);
    if (gguf == NB_Q4_0)
        for (nb_block_q4_0 *b = (nb_block_q4_0 *)g; (uint8_t *)(b + 1) <= g + bytes; b++) b->d = d;
    if (gguf == NB_Q8_0)
        for (nb_block_q8_0 *b = (nb_block_q8_0 *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            if (mode == 2) memset(b->qs, 0x80, 32); /* -128 */
        }
    if (gguf == NB_Q4_K)
        for (nb_block_q4_K *b = (nb_block_q4_K *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            b->dmin = dm;
        }
    if (gguf == NB_Q6_K)
        for (nb_block_q6_K *b = (nb_block_q6_K *)g; (uint8_t *)(b + 1) <= g + bytes; b++) {
            b->d = d;
            if (mode == 2) memset(b->scales, 0x80, 16); /* -128 */
        }
}

#endif
