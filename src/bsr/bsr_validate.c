/* bsr_validate.c — every structural check on BSR and dense descriptors, in one place. */
#include <stdlib.h>
#include "bsr_common.h"

int bsk__overlaps(const void *a, uint64_t abytes, const void *b, uint64_t bbytes)
{
    if (!a || !b || !abytes || !bbytes) return 0;
    const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b; /* distances, not ends: nothing can wrap */
    return a0 >= b0 ? (uint64_t)(a0 - b0) < bbytes : (uint64_t)(b0 - a0) < abytes;
}

uint64_t bsk__dense_bytes(const bsk_dense *D)
{
    return D->rows ? (uint64_t)((D->rows - 1) * D->ld + D->cols) * bsk_dtype_size(D->dtype) : 0;
}

int bsk__mul_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > (BSK_LIMIT_ELEMS - 1) / a) return 0; /* the documented limits are "< 2^62" */
    *out = a * b;
    return 1;
}

static int mem_ok(bsk_memory m) { return m == BSK_MEM_HOST || m == BSK_MEM_DEVICE; }

int64_t bsk_bsr_mb(const bsk_bsr *A)
{
    return A && A->block_rows > 0 && A->rows >= 0 ? (A->rows + A->block_rows - 1) / A->block_rows : 0;
}

int64_t bsk_bsr_nb(const bsk_bsr *A)
{
    return A && A->block_cols > 0 && A->cols >= 0 ? (A->cols + A->block_cols - 1) / A->block_cols : 0;
}

bsk_status bsk__check_bsr_desc(const bsk_bsr *A)
{
    if (!A) return BSK_ERR_NULL_POINTER;
    if (!bsk__dtype_ok(A->dtype) || !mem_ok(A->mem)) return BSK_ERR_INVALID_ARGUMENT;
    if (A->rows < 0 || A->cols < 0 || A->nnzb < 0 || A->block_rows <= 0 || A->block_cols <= 0)
        return BSK_ERR_INVALID_ARGUMENT;
    if (A->rows > BSK_LIMIT_DIM || A->cols > BSK_LIMIT_DIM || A->nnzb > INT32_MAX ||
        A->block_rows > BSK_LIMIT_BLOCK || A->block_cols > BSK_LIMIT_BLOCK)
        return BSK_ERR_OVERFLOW;
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A), cells, elems;
    if (!bsk__mul_ok(mb, nb, &cells)) return BSK_ERR_OVERFLOW;
    if (A->nnzb > cells) return BSK_ERR_INVALID_BSR; /* more blocks than places for them */
    if (!bsk__mul_ok(A->nnzb, (int64_t)A->block_rows * A->block_cols, &elems)) return BSK_ERR_OVERFLOW;
    if (!A->row_ptr) return BSK_ERR_NULL_POINTER;
    if (A->nnzb > 0 && (!A->col_idx || !A->values)) return BSK_ERR_NULL_POINTER;
    if (!bsk__aligned(A->row_ptr, 4) || (A->col_idx && !bsk__aligned(A->col_idx, 4)) ||
        (A->values && !bsk__aligned(A->values, bsk_dtype_size(A->dtype))))
        return BSK_ERR_MISALIGNED;
    return BSK_SUCCESS;
}

bsk_status bsk__check_bsr_indices(int64_t mb, int64_t nb, int64_t nnzb, const int32_t *row_ptr,
                                  const int32_t *col_idx)
{
    if (row_ptr[0] != 0 || row_ptr[mb] != nnzb) return BSK_ERR_INVALID_BSR;
    for (int64_t i = 0; i < mb; i++) {
        int32_t s = row_ptr[i], e = row_ptr[i + 1];
        if (e < s || e > nnzb) return BSK_ERR_INVALID_BSR;
        for (int32_t k = s; k < e; k++) {
            if (col_idx[k] < 0 || col_idx[k] >= nb) return BSK_ERR_INVALID_BSR;
            if (k > s && col_idx[k] <= col_idx[k - 1]) return BSK_ERR_INVALID_BSR; /* unsorted or duplicate */
        }
    }
    return BSK_SUCCESS;
}

bsk_status bsk__check_dense(const bsk_dense *D)
{
    if (!D) return BSK_ERR_NULL_POINTER;
    if (!bsk__dtype_ok(D->dtype) || !mem_ok(D->mem)) return BSK_ERR_INVALID_ARGUMENT;
    if (D->rows < 0 || D->cols < 0 || D->ld < 0) return BSK_ERR_INVALID_ARGUMENT;
    if (D->rows > BSK_LIMIT_DIM || D->cols > BSK_LIMIT_DIM) return BSK_ERR_OVERFLOW;
    if (D->ld < D->cols) return BSK_ERR_BAD_LAYOUT;
    int64_t elems;
    if (!bsk__mul_ok(D->ld, D->rows, &elems)) return BSK_ERR_OVERFLOW;
    if (D->rows > 0 && D->cols > 0) {
        if (!D->data) return BSK_ERR_NULL_POINTER;
        if (!bsk__aligned(D->data, bsk_dtype_size(D->dtype))) return BSK_ERR_MISALIGNED;
    }
    return BSK_SUCCESS;
}

/* The pointers of a descriptor must be where `mem` says; with no CUDA runtime everything is host. */
bsk_status bsk__check_location(const void *p, bsk_memory want)
{
    if (!p) return BSK_SUCCESS;
    bsk_memory got;
    bsk_status s = bsk_cuda_pointer_mem(p, &got);
    if (s) return s;
    return got == want ? BSK_SUCCESS : BSK_ERR_WRONG_LOCATION;
}

bsk_status bsk__check_bsr_location(const bsk_bsr *A)
{
    bsk_status s = bsk__check_location(A->row_ptr, A->mem);
    if (!s) s = bsk__check_location(A->col_idx, A->mem);
    if (!s) s = bsk__check_location(A->values, A->mem);
    return s;
}

bsk_status bsk__check_dense_location(const bsk_dense *D) { return bsk__check_location(D->data, D->mem); }

bsk_status bsk_bsr_validate(const bsk_bsr *A)
{
    bsk_status s = bsk__check_bsr_desc(A);
    if (s) return s;
    if ((s = bsk__check_bsr_location(A))) return s;
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    if (A->mem == BSK_MEM_HOST) return bsk__check_bsr_indices(mb, nb, A->nnzb, A->row_ptr, A->col_idx);
    /* device: copy the metadata to the host and check it there */
    int32_t *rp = (int32_t *)malloc((size_t)(mb + 1) * 4), *ci = (int32_t *)malloc((size_t)(A->nnzb + 1) * 4);
    if (!rp || !ci) { free(rp); free(ci); return BSK_ERR_OUT_OF_MEMORY; }
    s = bsk_cuda_memcpy(rp, A->row_ptr, (size_t)(mb + 1) * 4, 0, 1);
    if (!s && A->nnzb) s = bsk_cuda_memcpy(ci, A->col_idx, (size_t)A->nnzb * 4, 0, 1);
    if (!s) s = bsk__check_bsr_indices(mb, nb, A->nnzb, rp, ci);
    free(rp);
    free(ci);
    return s;
}
