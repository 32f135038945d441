/* fuzz_input.h — a tiny cursor over the fuzzer's bytes, shared by the fuzz targets. */
#ifndef BSK_FUZZ_INPUT_H
#define BSK_FUZZ_INPUT_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "bsk.h"

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
/* ---- arenas for the *_views targets: every array of one call inside one allocation at fuzzed offsets */

/* n 4-byte words holding small integers as floats ((i % 7) - 3): products and short sums of them are exact */
static inline uint32_t *fuzz_arena_new(size_t n)
{
    uint32_t *a = (uint32_t *)malloc(n * 4);
    for (size_t i = 0; a && i < n; i++) { float f = (float)(i % 7) - 3.0f; memcpy(&a[i], &f, 4); }
    return a;
}
/* a word offset in [0, 255 * 24] */
static inline int64_t fuzz_word_off(fuzz_in *in) { return fuzz_small(in, 255) * 24; }
/* [a0, a1) and [b0, b1) share no word */
static inline int fuzz_apart(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return a1 <= b0 || b1 <= a0; }
/* row_ptr (mb + 1 words at o_rp) and col_idx (nnzb at o_ci) apart from each other and from [a0, a1) */
static inline int fuzz_index_apart(int64_t o_rp, int64_t mb, int64_t o_ci, int64_t nnzb, int64_t a0, int64_t a1)
{
    return fuzz_apart(o_rp, o_rp + mb + 1, o_ci, o_ci + nnzb) && fuzz_apart(o_rp, o_rp + mb + 1, a0, a1) &&
           fuzz_apart(o_ci, o_ci + nnzb, a0, a1);
}
/* A valid BSR pattern of mb (<= 15) x nb (<= 16) blocks: each block row keeps the block columns of a fuzzed bit
   mask, in order. Writes rp[0..mb], ci[0..nnzb); returns nnzb. */
static inline int64_t fuzz_pattern(fuzz_in *in, int64_t mb, int64_t nb, int32_t *rp, int32_t *ci)
{
    int64_t nnzb = 0;
    rp[0] = 0;
    for (int64_t i = 0; i < mb; i++) {
        const uint32_t bits = fuzz_u32(in);
        for (int64_t j = 0; j < nb; j++)
            if ((bits >> j) & 1u) ci[nnzb++] = (int32_t)j;
        rp[i + 1] = (int32_t)nnzb;
    }
    return nnzb;
}
/* The pattern copied into the arena at word offsets o_rp / o_ci, values at o_v, as an F32 host BSR. */
static inline bsk_bsr fuzz_bsr_in_arena(uint32_t *arena, int64_t o_rp, int64_t o_ci, int64_t o_v, const int32_t *rp,
                                        const int32_t *ci, int64_t rows, int64_t cols, int32_t br, int32_t bc)
{
    const int64_t mb = (rows + br - 1) / br, nnzb = rp[mb];
    memcpy(arena + o_rp, rp, (size_t)(mb + 1) * 4);
    memcpy(arena + o_ci, ci, (size_t)nnzb * 4);
    bsk_bsr A = {rows, cols, br, bc, nnzb, (int32_t *)(arena + o_rp), (int32_t *)(arena + o_ci), arena + o_v,
                 BSK_F32, BSK_MEM_HOST};
    return A;
}
#endif
