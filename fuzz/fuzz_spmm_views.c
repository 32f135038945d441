/* fuzz_spmm_views.c — one arena holds everything bsk_spmm touches: A's row_ptr, col_idx and values, B and C
   (offsets, leading dimensions and op fuzzed), so the arrays may overlap in any way. The pattern is valid
   (sorted, in range) so that the aliasing rules are what is exercised. Properties (CPU backend):
     - a refused call leaves every byte of the arena as it was;
     - an accepted call wrote only C's elements (not the ld gap, not anything else), C shares no byte with
       A's arrays or B, and C equals the product of the operands as they were before the call (small-integer
       values: fp32 sums are exact, so the comparison is exact). */
#include <stdlib.h>
#include <string.h>
#include "bsk.h"
#include "fuzz_input.h"

enum { ARENA = 8192 }; /* 4-byte words */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int32_t br = (int32_t)fuzz_small(&in, 3) + 1, bc = (int32_t)fuzz_small(&in, 3) + 1;
    const int64_t rows = fuzz_small(&in, 12), cols = fuzz_small(&in, 12), n = fuzz_small(&in, 6);
    const int op = fuzz_u8(&in) & 1;
    const int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
    uint32_t *arena = fuzz_arena_new(ARENA), *before = (uint32_t *)malloc(ARENA * 4);
    unsigned char *m = (unsigned char *)calloc(ARENA, 1);
    int32_t rp[16], ci[16 * 16];
    const int64_t nnzb = fuzz_pattern(&in, mb, nb, rp, ci);
    const int64_t orow = op ? cols : rows, ocol = op ? rows : cols; /* op(A) is orow x ocol */
    const int64_t ldb = n + fuzz_small(&in, 3), ldc = n + fuzz_small(&in, 3);
    const int64_t o_rp = fuzz_word_off(&in), o_ci = fuzz_word_off(&in), o_v = fuzz_word_off(&in), o_b = fuzz_word_off(&in), o_c = fuzz_word_off(&in);
    const int64_t nv = nnzb * br * bc;
    const int64_t end_b = ocol ? o_b + (ocol - 1) * ldb + n : o_b, end_c = orow ? o_c + (orow - 1) * ldc + n : o_c;
    if (o_rp + mb + 1 > ARENA || o_ci + nnzb > ARENA || o_v + nv > ARENA || end_b > ARENA || end_c > ARENA) goto out;
    /* the index arrays apart from each other and from the float inputs (values and B may share memory: both hold
       small integers as floats, so the products stay exact); C goes anywhere */
    if (!fuzz_index_apart(o_rp, mb, o_ci, nnzb, o_v, o_v + nv) || !fuzz_index_apart(o_rp, mb, o_ci, nnzb, o_b, end_b)) goto out;
    bsk_bsr A = fuzz_bsr_in_arena(arena, o_rp, o_ci, o_v, rp, ci, rows, cols, br, bc);
    bsk_dense B = {ocol, n, ldb, BSK_F32, BSK_MEM_HOST, arena + o_b}, C = {orow, n, ldc, BSK_F32, BSK_MEM_HOST, arena + o_c};
    memcpy(before, arena, ARENA * 4);
    bsk_context *ctx = NULL;
    if (bsk_create(&ctx, BSK_BACKEND_CPU) != BSK_SUCCESS) abort();
    const bsk_status s = bsk_spmm(ctx, op ? BSK_OP_T : BSK_OP_N, 1.0f, &A, &B, 0.0f, &C);
    bsk_destroy(ctx);
    if (s != BSK_SUCCESS) {
        if (memcmp(before, arena, ARENA * 4) != 0) abort(); /* a refused call wrote */
        goto out;
    }
    /* bit 1: C's elements; bit 2: A's arrays and B's elements (read by the call) */
    for (int64_t i = 0; i < orow; i++)
        for (int64_t j = 0; j < n; j++) m[o_c + i * ldc + j] |= 1;
    for (int64_t i = 0; i < mb + 1; i++) m[o_rp + i] |= 2;
    for (int64_t i = 0; i < nnzb; i++) m[o_ci + i] |= 2;
    for (int64_t i = 0; i < nv; i++) m[o_v + i] |= 2;
    for (int64_t i = 0; i < ocol; i++)
        for (int64_t j = 0; j < n; j++) m[o_b + i * ldb + j] |= 2;
    for (int i = 0; i < ARENA; i++) {
        if (m[i] == 3) abort();                                 /* C accepted over something the call reads */
        if (!(m[i] & 1) && arena[i] != before[i]) abort();       /* written outside C's elements */
    }
    /* C against the product of the operands as they were (from `before`; A's padding rows / columns drop out) */
    const float *bv = (const float *)(before + o_v), *bb = (const float *)(before + o_b);
    const float *cc = (const float *)(arena + o_c);
    for (int64_t i = 0; i < orow; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (int64_t r = 0; r < mb; r++)
                for (int32_t p = rp[r]; p < rp[r + 1]; p++)
                    for (int32_t u = 0; u < br; u++)
                        for (int32_t w = 0; w < bc; w++) {
                            const int64_t ar = r * br + u, ac = (int64_t)ci[p] * bc + w; /* A(ar, ac) */
                            if (ar >= rows || ac >= cols) continue;
                            const int64_t oi = op ? ac : ar, ok = op ? ar : ac;     /* op(A)(oi, ok) */
                            if (oi == i) acc += (double)bv[(p * br + u) * bc + w] * bb[ok * ldb + j];
                        }
            if ((double)cc[i * ldc + j] != acc) abort(); /* wrong product (exact with these values) */
        }
out:
    free(arena), free(before), free(m);
    return 0;
}
