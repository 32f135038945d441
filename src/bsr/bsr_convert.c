/* bsr_convert.c — BSR to dense, BSR transpose (values moved), deep copy to host or device, free. */
#include <string.h>
#include "bsr_common.h"

/* Copy one element of `esz` bytes: fixed-size copies the compiler turns into a move. */
static inline void copy_elem(unsigned char *dst, const unsigned char *src, size_t esz)
{
    if (esz == 4) memcpy(dst, src, 4);
    else memcpy(dst, src, 2);
}

bsk_status bsk_bsr_to_dense(const bsk_bsr *A, bsk_dense *dense)
{
    bsk_status s;
    if (!A || !dense) return BSK_ERR_NULL_POINTER;
    if ((s = bsk__check_bsr_desc(A)) || (s = bsk__check_dense(dense))) return s;
    if (A->dtype != dense->dtype) return BSK_ERR_UNSUPPORTED;
    if (A->rows != dense->rows || A->cols != dense->cols) return BSK_ERR_SHAPE_MISMATCH;
    if (A->mem != BSK_MEM_HOST || dense->mem != BSK_MEM_HOST) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_bsr_host(A)) || (s = bsk__check_dense_location(dense))) return s;

    const int64_t rows = A->rows, cols = A->cols, br = A->block_rows, bc = A->block_cols, bsz = br * bc;
    const int64_t mb = bsk_bsr_mb(A), ld = dense->ld;
    const size_t esz = bsk_dtype_size(A->dtype);
    /* Writing the output must not clobber the input being read. Sizes are bounded by the checks above
       (< 2^62 elements of at most 4 bytes), so they fit a size_t. */
    const uint64_t dbytes = bsk__dense_bytes(dense); /* dense is rows x cols of A's dtype (checked above) */
    if (bsk__overlaps(dense->data, dbytes, A->values, (size_t)(A->nnzb * bsz) * esz) ||
        bsk__overlaps(dense->data, dbytes, A->row_ptr, (size_t)(mb + 1) * 4) ||
        bsk__overlaps(dense->data, dbytes, A->col_idx, (size_t)A->nnzb * 4))
        return BSK_ERR_INVALID_ARGUMENT;
    if (!rows || !cols) return BSK_SUCCESS;

    unsigned char *dst = (unsigned char *)dense->data;
    const unsigned char *src = (const unsigned char *)A->values;
    for (int64_t r = 0; r < rows; r++) memset(dst + (size_t)(r * ld) * esz, 0, (size_t)cols * esz); /* not the ld gap */
    for (int64_t i = 0; i < mb; i++) {
        const int64_t r0 = i * br, h = rows - r0 < br ? rows - r0 : br;
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            const int64_t c0 = (int64_t)A->col_idx[k] * bc, w = cols - c0 < bc ? cols - c0 : bc;
            for (int64_t r = 0; r < h; r++)
                memcpy(dst + (size_t)((r0 + r) * ld + c0) * esz, src + (size_t)(k * bsz + r * bc) * esz,
                       (size_t)w * esz);
        }
    }
    return BSK_SUCCESS;
}

bsk_status bsk_bsr_transpose(const bsk_bsr *A, bsk_bsr *out)
{
    bsk_status s;
    if (!A || !out) return BSK_ERR_NULL_POINTER;
    if ((s = bsk__check_bsr_host(A))) return s;

    const int64_t rows = A->rows, cols = A->cols, br = A->block_rows, bc = A->block_cols, bsz = br * bc;
    const int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A), nnzb = A->nnzb;
    const size_t esz = bsk_dtype_size(A->dtype);
    size_t rp_bytes = bsk__bytes(nb + 1, 4), ci_bytes = bsk__bytes(nnzb, 4), nx_bytes = bsk__bytes(nb, 4);
    size_t v_bytes = bsk__bytes(nnzb * bsz, esz); /* nnzb*bsz < 2^62: bounded by the descriptor check */
    if (!rp_bytes || !ci_bytes || !nx_bytes || !v_bytes) return BSK_ERR_OVERFLOW;
    int32_t *rp = (int32_t *)calloc(1, rp_bytes), *ci = (int32_t *)malloc(ci_bytes), *next = (int32_t *)malloc(nx_bytes);
    unsigned char *vals = (unsigned char *)malloc(v_bytes);
    if (!rp || !ci || !next || !vals) { free(rp); free(ci); free(next); free(vals); return BSK_ERR_OUT_OF_MEMORY; }

    /* Counting sort by block column; walking A's block rows in order makes each new row's column
       indices (A's block rows) come out sorted. */
    for (int64_t k = 0; k < nnzb; k++) rp[A->col_idx[k] + 1]++;
    for (int64_t j = 0; j < nb; j++) rp[j + 1] += rp[j];
    if (nb) memcpy(next, rp, (size_t)nb * 4);
    const unsigned char *src = (const unsigned char *)A->values;
    for (int64_t i = 0; i < mb; i++) {
        const int64_t h = rows - i * br < br ? rows - i * br : br; /* A's in-matrix rows of this block row */
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++) {
            const int64_t j = A->col_idx[k], p = next[j]++;
            const int64_t w = cols - j * bc < bc ? cols - j * bc : bc;
            ci[p] = (int32_t)i;
            /* block (r, c) of A becomes (c, r) of a bc x br block; padding is written as zero even if
               A's padding was not (it must be, but the result should not depend on that) */
            const unsigned char *sb = src + (size_t)(k * bsz) * esz;
            unsigned char *db = vals + (size_t)(p * bsz) * esz;
            for (int64_t c = 0; c < bc; c++)
                for (int64_t r = 0; r < br; r++) {
                    unsigned char *d = db + (size_t)(c * br + r) * esz;
                    if (r < h && c < w) copy_elem(d, sb + (size_t)(r * bc + c) * esz, esz);
                    else memset(d, 0, esz);
                }
        }
    }
    free(next);
    bsk__bsr_host_out(out, cols, rows, A->block_cols, A->block_rows, nnzb, rp, ci, vals, A->dtype);
    return BSK_SUCCESS;
}

/* Allocate `bytes` (>= 1) on the host or the device. */
static bsk_status alloc_on(bsk_memory mem, size_t bytes, void **p)
{
    if (mem == BSK_MEM_DEVICE) {
        bsk_status s = bsk_cuda_malloc(p, bytes);
        if (s) *p = NULL;
        return s;
    }
    *p = malloc(bytes);
    return *p ? BSK_SUCCESS : BSK_ERR_OUT_OF_MEMORY;
}

static void free_on(bsk_memory mem, void *p)
{
    if (mem == BSK_MEM_DEVICE) bsk_cuda_free(p);
    else free(p);
}

bsk_status bsk_bsr_clone(const bsk_bsr *A, bsk_memory mem, bsk_bsr *out)
{
    bsk_status s;
    if (!A || !out) return BSK_ERR_NULL_POINTER;
    if (mem != BSK_MEM_HOST && mem != BSK_MEM_DEVICE) return BSK_ERR_INVALID_ARGUMENT;
    if ((s = bsk__check_bsr_desc(A))) return s;
    /* a device on either side needs a GPU; asked first so that "no GPU" is not reported as a location
       mismatch of pointers that claim to be on the device */
    if ((mem == BSK_MEM_DEVICE || A->mem == BSK_MEM_DEVICE) && bsk_cuda_device_count() <= 0) return BSK_ERR_NO_DEVICE;
    if ((s = bsk_bsr_validate(A))) return s; /* device metadata is copied to the host for this */

    const int64_t mb = bsk_bsr_mb(A), bsz = (int64_t)A->block_rows * A->block_cols;
    const size_t esz = bsk_dtype_size(A->dtype);
    const size_t rp_n = (size_t)(mb + 1) * 4, ci_n = (size_t)A->nnzb * 4, v_n = (size_t)(A->nnzb * bsz) * esz;
    size_t rp_bytes = bsk__bytes(mb + 1, 4), ci_bytes = bsk__bytes(A->nnzb, 4), v_bytes = bsk__bytes(A->nnzb * bsz, esz);
    if (!rp_bytes || !ci_bytes || !v_bytes) return BSK_ERR_OVERFLOW;
    void *rp = NULL, *ci = NULL, *vals = NULL;
    if ((s = alloc_on(mem, rp_bytes, &rp))) goto fail;
    if ((s = alloc_on(mem, ci_bytes, &ci))) goto fail;
    if ((s = alloc_on(mem, v_bytes, &vals))) goto fail;
    const int dd = mem == BSK_MEM_DEVICE, sd = A->mem == BSK_MEM_DEVICE;
    if ((s = bsk_cuda_memcpy(rp, A->row_ptr, rp_n, dd, sd))) goto fail;
    if (ci_n && (s = bsk_cuda_memcpy(ci, A->col_idx, ci_n, dd, sd))) goto fail;
    if (v_n && (s = bsk_cuda_memcpy(vals, A->values, v_n, dd, sd))) goto fail;
    *out = *A;
    out->row_ptr = (int32_t *)rp; out->col_idx = (int32_t *)ci; out->values = vals; out->mem = mem;
    return BSK_SUCCESS;
fail:
    if (rp) free_on(mem, rp);
    if (ci) free_on(mem, ci);
    if (vals) free_on(mem, vals);
    return s;
}

void bsk_bsr_free(bsk_bsr *A)
{
    if (!A) return;
    if (A->mem == BSK_MEM_DEVICE) {
        bsk_cuda_free(A->row_ptr);
        bsk_cuda_free(A->col_idx);
        bsk_cuda_free(A->values);
    } else if (A->mem == BSK_MEM_HOST) {
        free(A->row_ptr);
        free(A->col_idx);
        free(A->values);
    } /* an unknown `mem` is not ours to guess: leaking beats freeing with the wrong allocator */
    memset(A, 0, sizeof *A);
}
