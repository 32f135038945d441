/* fuzz_sddmm_views.c — the SDDMM counterpart of fuzz_spmm_views.c: out's row_ptr, col_idx and values, X and Y in one
   arena at fuzzed offsets and leading dimensions. Properties (CPU backend):
     - a refused call leaves every byte of the arena as it was;
     - an accepted call wrote only out's values (nothing else), its values share no byte with X, Y or out's
       own index arrays, and every value equals alpha * (X·Yᵀ) at its position (0 in a partial block's padding),
       exactly (small-integer inputs). */
#include <stdlib.h>
#include <string.h>
#include "bsk.h"
#include "fuzz_input.h"

enum { ARENA = 8192 }; /* 4-byte words */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int32_t br = (int32_t)fuzz_small(&in, 3) + 1, bc = (int32_t)fuzz_small(&in, 3) + 1;
    const int64_t rows = fuzz_small(&in, 12), cols = fuzz_small(&in, 12), d = fuzz_small(&in, 6);
    const float alpha = (float)((int)fuzz_small(&in, 4) - 2);
    const int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
    uint32_t *arena = fuzz_arena_new(ARENA), *before = (uint32_t *)malloc(ARENA * 4);
    unsigned char *m = (unsigned char *)calloc(ARENA, 1);
    int32_t rp[16], ci[16 * 16];
    const int64_t nnzb = fuzz_pattern(&in, mb, nb, rp, ci);
    const int64_t ldx = d + fuzz_small(&in, 3), ldy = d + fuzz_small(&in, 3);
    const int64_t o_rp = fuzz_word_off(&in), o_ci = fuzz_word_off(&in), o_v = fuzz_word_off(&in), o_x = fuzz_word_off(&in), o_y = fuzz_word_off(&in);
    const int64_t nv = nnzb * br * bc;
    const int64_t end_x = rows ? o_x + (rows - 1) * ldx + d : o_x, end_y = cols ? o_y + (cols - 1) * ldy + d : o_y;
    if (o_rp + mb + 1 > ARENA || o_ci + nnzb > ARENA || o_v + nv > ARENA || end_x > ARENA || end_y > ARENA) goto out;
    /* the index arrays apart from each other and from X and Y (X and Y may share memory); the values anywhere */
    if (!fuzz_index_apart(o_rp, mb, o_ci, nnzb, o_x, end_x) || !fuzz_index_apart(o_rp, mb, o_ci, nnzb, o_y, end_y)) goto out;
    bsk_bsr O = fuzz_bsr_in_arena(arena, o_rp, o_ci, o_v, rp, ci, rows, cols, br, bc);
    bsk_dense X = {rows, d, ldx, BSK_F32, BSK_MEM_HOST, arena + o_x}, Y = {cols, d, ldy, BSK_F32, BSK_MEM_HOST, arena + o_y};
    memcpy(before, arena, ARENA * 4);
    bsk_context *ctx = NULL;
    if (bsk_create(&ctx, BSK_BACKEND_CPU) != BSK_SUCCESS) abort();
    const bsk_status s = bsk_sddmm(ctx, alpha, &X, &Y, 0.0f, &O);
    bsk_destroy(ctx);
    if (s != BSK_SUCCESS) {
        if (memcmp(before, arena, ARENA * 4) != 0) abort(); /* a refused call wrote */
        goto out;
    }
    /* bit 1: out's values; bit 2: what the call reads (index arrays, X, Y) */
    for (int64_t i = 0; i < nv; i++) m[o_v + i] |= 1;
    for (int64_t i = 0; i < mb + 1; i++) m[o_rp + i] |= 2;
    for (int64_t i = 0; i < nnzb; i++) m[o_ci + i] |= 2;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < d; k++) m[o_x + i * ldx + k] |= 2;
    for (int64_t i = 0; i < cols; i++)
        for (int64_t k = 0; k < d; k++) m[o_y + i * ldy + k] |= 2;
    for (int i = 0; i < ARENA; i++) {
        if (m[i] == 3) abort();                           /* values accepted over something the call reads */
        if (!(m[i] & 1) && arena[i] != before[i]) abort(); /* written outside out's values */
    }
    const float *bx = (const float *)(before + o_x), *by = (const float *)(before + o_y), *ov = (const float *)(arena + o_v);
    for (int64_t r = 0; r < mb; r++)
        for (int32_t p = rp[r]; p < rp[r + 1]; p++)
            for (int32_t u = 0; u < br; u++)
                for (int32_t w = 0; w < bc; w++) {
                    const int64_t i = r * br + u, j = (int64_t)ci[p] * bc + w;
                    double acc = 0.0;
                    if (i < rows && j < cols)
                        for (int64_t k = 0; k < d; k++) acc += (double)bx[i * ldx + k] * by[j * ldy + k];
                    if ((double)ov[(p * br + u) * bc + w] != alpha * acc) abort(); /* wrong value (exact here) */
                }
out:
    free(arena), free(before), free(m);
    return 0;
}
