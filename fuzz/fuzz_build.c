/* fuzz_build.c — arbitrary CSR / COO / dense input into the BSR builders; whatever they build must
   validate, and the builders must never crash, leak or read out of bounds on malformed input. */
#include <stdlib.h>
#include "bsk.h"
#include "fuzz_input.h"

static void check_built(bsk_bsr *A)
{
    if (bsk_bsr_validate(A) != BSK_SUCCESS) abort(); /* a builder produced an invalid matrix: a bug */
    bsk_bsr_free(A);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t which = fuzz_u8(&in) % 3;
    int64_t rows = fuzz_small(&in, 33) - (fuzz_u8(&in) == 255), cols = fuzz_small(&in, 33);
    int32_t br = (int32_t)fuzz_small(&in, 9), bc = (int32_t)fuzz_small(&in, 9);
    int64_t nnz = fuzz_small(&in, 80);
    bsk_dtype dt = (bsk_dtype)(fuzz_u8(&in) % 3);
    bsk_bsr A = {0};
    if (which == 0 || which == 1) {
        int32_t *ri = (int32_t *)malloc((size_t)(rows > 0 ? rows + 1 : 1) * 4 + (size_t)nnz * 4);
        int32_t *ci = (int32_t *)malloc((size_t)nnz * 4 + 4);
        float *v = (float *)malloc((size_t)nnz * 4 + 4);
        int64_t nri = which == 0 ? (rows > 0 ? rows + 1 : 1) : nnz;
        for (int64_t i = 0; i < nri; i++) ri[i] = fuzz_u8(&in) == 0 ? fuzz_i32(&in) : (int32_t)fuzz_small(&in, which ? 34 : nnz);
        for (int64_t i = 0; i < nnz; i++) { ci[i] = fuzz_u8(&in) == 0 ? fuzz_i32(&in) : (int32_t)fuzz_small(&in, 34); v[i] = (float)fuzz_u8(&in) - 128.0f; }
        if (which == 0) { ri[0] = 0; if (rows > 0) ri[rows] = (int32_t)nnz; }
        bsk_status s = which == 0 ? bsk_bsr_from_csr(rows, cols, nnz, ri, ci, v, BSK_F32, br, bc, &A)
                                  : bsk_bsr_from_coo(rows, cols, nnz, ri, ci, v, BSK_F32, br, bc, &A);
        if (s == BSK_SUCCESS) check_built(&A);
        free(ri); free(ci); free(v);
    } else {
        size_t esz = bsk_dtype_size(dt);
        int64_t n = rows > 0 && cols > 0 ? rows * cols : 0;
        uint8_t *d = (uint8_t *)calloc((size_t)n + 1, esz);
        for (int64_t i = 0; i < n * (int64_t)esz && in.n; i++) d[i] = fuzz_u8(&in) & 0x3f; /* finite values */
        bsk_dense D = {rows, cols, cols, dt, BSK_MEM_HOST, d};
        float thr = (float)fuzz_u8(&in) / 16.0f;
        if (bsk_bsr_from_dense(&D, br, bc, thr, &A) == BSK_SUCCESS) check_built(&A);
        int64_t mb = br > 0 && rows > 0 ? (rows + br - 1) / br : 0, nb = bc > 0 && cols > 0 ? (cols + bc - 1) / bc : 0;
        uint8_t *mask = (uint8_t *)malloc((size_t)(mb * nb) + 1);
        for (int64_t i = 0; i < mb * nb; i++) mask[i] = fuzz_u8(&in) & 1;
        if (bsk_bsr_from_mask(&D, br, bc, mask, &A) == BSK_SUCCESS) check_built(&A);
        free(mask); free(d);
    }
    return 0;
}
