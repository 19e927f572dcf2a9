/* The probe's inner loop (kernels/membw.h), written once for each load
 * width. Include only from kernels/membw.c and kernels/x86/membw_*.c after
 * defining MB_V (vector type), MB_LOAD(p), MB_ADD(a, b), MB_ZERO(),
 * MB_REDUCE(v) (uint64_t sum of the lanes), MB_VB (bytes per vector) and
 * MB_NAME (the function to define). Each 256-byte step of each stream is
 * 256 / MB_VB loads into four accumulators (one per 64-byte line). */
#ifndef MB_PF
#define MB_PF(p) __builtin_prefetch((p), 0, 3)
#endif

uint64_t MB_NAME(const void *const *p, int streams, size_t bytes, int prefetch) {
    MB_V s0 = MB_ZERO(), s1 = s0, s2 = s0, s3 = s0;
    enum { PER_LINE = 64 / MB_VB };
    for (int st0 = 0; st0 < streams; st0 += 8) { /* up to 8 streams in lockstep */
        int ns = streams - st0 < 8 ? streams - st0 : 8;
        const char *b[8];
        for (int s = 0; s < ns; s++) b[s] = p[st0 + s];
        for (size_t off = 0; off < bytes; off += 256) {
            for (int s = 0; s < ns; s++) {
                const char *q = b[s] + off;
                if (prefetch) {
                    MB_PF(q + prefetch);
                    MB_PF(q + prefetch + 64);
                    MB_PF(q + prefetch + 128);
                    MB_PF(q + prefetch + 192);
                }
                for (int v = 0; v < PER_LINE; v++) {
                    s0 = MB_ADD(s0, MB_LOAD(q + v * MB_VB));
                    s1 = MB_ADD(s1, MB_LOAD(q + 64 + v * MB_VB));
                    s2 = MB_ADD(s2, MB_LOAD(q + 128 + v * MB_VB));
                    s3 = MB_ADD(s3, MB_LOAD(q + 192 + v * MB_VB));
                }
            }
        }
    }
    return MB_REDUCE(MB_ADD(MB_ADD(s0, s1), MB_ADD(s2, s3)));
}
