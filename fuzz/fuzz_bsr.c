/* fuzz_bsr.c — arbitrary BSR structure into validate; whatever passes must survive every consumer
   (stats, transpose, transpose index, to_dense, SpMM N/T, SDDMM on the CPU) without a sanitizer report. */
#include <stdlib.h>
#include "bsk.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    bsk_bsr A = {0};
    uint8_t shape = fuzz_u8(&in);
    A.block_rows = (int32_t)(shape & 7) + 1 - (shape >> 7);      /* 0..8: 0 is invalid on purpose */
    A.block_cols = (int32_t)((shape >> 3) & 7) + 1;
    A.rows = fuzz_small(&in, 40) - (fuzz_u8(&in) == 255);        /* sometimes -1 */
    A.cols = fuzz_small(&in, 40);
    if (fuzz_u8(&in) == 254) A.rows = (int64_t)1 << 40;          /* overflow path */
    int64_t mb = bsk_bsr_mb(&A) > 64 ? 64 : bsk_bsr_mb(&A);
    A.nnzb = fuzz_small(&in, 64);
    A.dtype = (bsk_dtype)(fuzz_u8(&in) % 4);                     /* 3 is invalid */
    A.mem = BSK_MEM_HOST;
    int32_t *rp = (int32_t *)malloc((size_t)(mb + 1) * 4), *ci = (int32_t *)malloc((size_t)(A.nnzb + 1) * 4);
    for (int64_t i = 0; i <= mb; i++) rp[i] = fuzz_u8(&in) == 0 ? fuzz_i32(&in) : (int32_t)fuzz_small(&in, A.nnzb);
    for (int64_t i = 0; i < A.nnzb; i++) ci[i] = fuzz_u8(&in) == 0 ? fuzz_i32(&in) : (int32_t)fuzz_small(&in, 12);
    if (mb >= 1) { rp[0] = 0; } /* mostly keep the easy invariants so deeper checks are reached */
    size_t vbytes = (size_t)A.nnzb * (size_t)(A.block_rows > 0 ? A.block_rows : 1) * (size_t)A.block_cols * 4 + 4;
    float *vals = (float *)calloc(1, vbytes);
    A.row_ptr = rp;
    A.col_idx = ci;
    A.values = vals;
    /* validate reads row_ptr[0..mb] only once the O(1) checks pass, so mb > 64 must fail before that */
    if (bsk_bsr_validate(&A) == BSK_SUCCESS) {
        if (bsk_bsr_mb(&A) != mb) abort();
        bsk_bsr_stats st;
        (void)bsk_bsr_stats_get(&A, &st);
        bsk_bsr T = {0};
        if (bsk_bsr_transpose(&A, &T) == BSK_SUCCESS) bsk_bsr_free(&T);
        int64_t nb = bsk_bsr_nb(&A);
        int32_t *tp = (int32_t *)malloc((size_t)(nb + 1) * 4), *tr = (int32_t *)malloc((size_t)A.nnzb * 4 + 4),
                *tb = (int32_t *)malloc((size_t)A.nnzb * 4 + 4);
        (void)bsk_bsr_transpose_index(&A, tp, tr, tb);
        free(tp); free(tr); free(tb);
        size_t esz = bsk_dtype_size(A.dtype);
        int64_t n = 3;
        void *dense = calloc((size_t)(A.rows * A.cols + 1), esz);
        bsk_dense D = {A.rows, A.cols, A.cols, A.dtype, BSK_MEM_HOST, dense};
        (void)bsk_bsr_to_dense(&A, &D);
        void *b = calloc((size_t)((A.rows > A.cols ? A.rows : A.cols) * n + 1), esz);
        void *c = calloc((size_t)((A.rows > A.cols ? A.rows : A.cols) * n + 1), 4);
        bsk_context *ctx = NULL;
        if (bsk_create(&ctx, BSK_BACKEND_CPU) == BSK_SUCCESS) {
            bsk_dense B = {A.cols, n, n, A.dtype, BSK_MEM_HOST, b}, C = {A.rows, n, n, BSK_F32, BSK_MEM_HOST, c};
            (void)bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.5f, &C);
            bsk_dense Bt = {A.rows, n, n, A.dtype, BSK_MEM_HOST, b}, Ct = {A.cols, n, n, BSK_F32, BSK_MEM_HOST, c};
            (void)bsk_spmm(ctx, BSK_OP_T, 1.0f, &A, &Bt, 0.0f, &Ct);
            bsk_dense X = {A.rows, n, n, A.dtype, BSK_MEM_HOST, b}, Y = {A.cols, n, n, A.dtype, BSK_MEM_HOST, dense};
            if (A.cols * n <= A.rows * A.cols) (void)bsk_sddmm(ctx, 1.0f, &X, &Y, 0.0f, &A);
            bsk_destroy(ctx);
        }
        free(dense); free(b); free(c);
    }
    free(rp); free(ci); free(vals);
    return 0;
}
