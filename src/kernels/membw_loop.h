/* The probe's inner loop (kernels/membw.h), written once for each load
 * width. Include only from kernels/membw.c and kernels/x86/membw_*.c after
 * defining MB_V (vector type), MB_LOAD(p), MB_ADD(a, b), MB_ZERO(),
 * MB_REDUCE(v) (uint64_t sum of the lanes), MB_VB (bytes per vector) and
 * MB_NAME (the function to define). Each 256-byte step of each stream is
 * 256 / MB_VB loads into four accumulators (one per 64-byte line), taken
 * 256 bytes of a stream at a time, or (turn 64) a line of each stream at a
 * time. */
#ifndef NB_MEMBW_NO_TSAN
#if defined(__GNUC__)
#define NB_MEMBW_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define NB_MEMBW_NO_TSAN
#endif
#endif
#ifndef MB_PF
#define MB_PF(p) __builtin_prefetch((p), 0, 3)
#endif

/* Not instrumented by ThreadSanitizer: the probe reads a gigabyte or more
 * per run, which under TSan took `bench model` 3 minutes (the CI's TSan
 * pass); the threads only read slices the caller wrote before the pool's
 * hand-off, which TSan still sees. */
NB_MEMBW_NO_TSAN uint64_t MB_NAME(const void *const *p, int streams, size_t bytes, int prefetch, int turn) {
    MB_V s0 = MB_ZERO(), s1 = s0, s2 = s0, s3 = s0;
    enum { PER_LINE = 64 / MB_VB };
    /* each line's prefetch next to its loads: the four lines' prefetches in
     * one burst read 2-18% less on Sapphire Rapids (docs/speed.md, session 26) */
#define MB_LINE(acc, q, at)                                                   \
    do {                                                                      \
        if (prefetch) MB_PF((q) + (at) + prefetch);                           \
        for (int v = 0; v < PER_LINE; v++) acc = MB_ADD(acc, MB_LOAD((q) + (at) + v * MB_VB)); \
    } while (0)
    for (int st0 = 0; st0 < streams; st0 += 8) { /* up to 8 streams in lockstep */
        int ns = streams - st0 < 8 ? streams - st0 : 8;
        const char *b[8];
        for (int s = 0; s < ns; s++) b[s] = p[st0 + s];
        for (size_t off = 0; off < bytes; off += 256) {
            if (turn == 64) { /* a line of each stream in turn */
                for (int s = 0; s < ns; s++) MB_LINE(s0, b[s] + off, 0);
                for (int s = 0; s < ns; s++) MB_LINE(s1, b[s] + off, 64);
                for (int s = 0; s < ns; s++) MB_LINE(s2, b[s] + off, 128);
                for (int s = 0; s < ns; s++) MB_LINE(s3, b[s] + off, 192);
                continue;
            }
            for (int s = 0; s < ns; s++) { /* 256 bytes of each stream in turn */
                const char *q = b[s] + off;
                MB_LINE(s0, q, 0);
                MB_LINE(s1, q, 64);
                MB_LINE(s2, q, 128);
                MB_LINE(s3, q, 192);
            }
        }
    }
#undef MB_LINE
    return MB_REDUCE(MB_ADD(MB_ADD(s0, s1), MB_ADD(s2, s3)));
}
