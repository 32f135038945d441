/* fuzz_input.h — a tiny cursor over the fuzzer's bytes, shared by the fuzz targets. */
#ifndef BSK_FUZZ_INPUT_H
#define BSK_FUZZ_INPUT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct { const uint8_t *p; size_t n; } fuzz_in;

static inline uint32_t fuzz_u32(fuzz_in *in)
{
    uint32_t v = 0;
    size_t k = in->n < 4 ? in->n : 4;
    memcpy(&v, in->p, k);
    in->p += k;
    in->n -= k;
    return v;
}
static inline int32_t fuzz_i32(fuzz_in *in) { return (int32_t)fuzz_u32(in); }
static inline uint8_t fuzz_u8(fuzz_in *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}
/* A small size in [0, max] that still reaches the edges (0, max) often. */
static inline int64_t fuzz_small(fuzz_in *in, int64_t max) { return (int64_t)(fuzz_u8(in) % (max + 1)); }
#endif
