/* bsr_build.c — BSR builders: from a dense matrix (norm threshold or block mask), from CSR and from COO.
   Every argument is checked before anything is allocated; the result is assembled in local arrays and
   stored into *out only on success, so a failure leaves *out untouched and allocates nothing. */
#include <math.h>
#include <string.h>
#include "bsr_common.h"

/* ---------------------------------------------------------------- from a dense matrix */

/* Checks shared by from_dense and from_mask: a host dense operand and valid block sizes. */
static bsk_status check_dense_src(const bsk_dense *dense, int32_t br, int32_t bc, const bsk_bsr *out)
{
    bsk_status s;
    if (!dense || !out) return BSK_ERR_NULL_POINTER;
    if ((s = bsk__check_dense(dense))) return s;
    if ((s = bsk__check_blocks(br, bc))) return s;
    if (dense->mem != BSK_MEM_HOST) return BSK_ERR_WRONG_LOCATION;
    return bsk__check_dense_location(dense);
}

/* Build the BSR of `d` keeping the blocks where mask[i*nb + j] != 0. Arguments checked. */
static bsk_status build_from_mask(const bsk_dense *d, int32_t br, int32_t bc, const uint8_t *mask, bsk_bsr *out)
{
    const int64_t rows = d->rows, cols = d->cols, mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
    const int64_t bsz = (int64_t)br * bc;
    const size_t esz = bsk_dtype_size(d->dtype);

    size_t rp_bytes = bsk__bytes(mb + 1, sizeof(int32_t));
    if (!rp_bytes) return BSK_ERR_OVERFLOW;
    int32_t *rp = (int32_t *)malloc(rp_bytes);
    if (!rp) return BSK_ERR_OUT_OF_MEMORY;
    int64_t nnzb = 0;
    rp[0] = 0;
    for (int64_t i = 0; i < mb; i++) {
        const uint8_t *m = mask + i * nb;
        for (int64_t j = 0; j < nb; j++) nnzb += m[j] != 0;
        if (nnzb > INT32_MAX) { free(rp); return BSK_ERR_OVERFLOW; }
        rp[i + 1] = (int32_t)nnzb;
    }
    int64_t elems;
    size_t ci_bytes = bsk__bytes(nnzb, sizeof(int32_t)), v_bytes = 0;
    if (bsk__mul_ok(nnzb, bsz, &elems)) v_bytes = bsk__bytes(elems, esz);
    if (!ci_bytes || !v_bytes) { free(rp); return BSK_ERR_OVERFLOW; }
    int32_t *ci = (int32_t *)malloc(ci_bytes);
    unsigned char *vals = (unsigned char *)calloc(1, v_bytes); /* zero: the padding of partial blocks */
    if (!ci || !vals) { free(rp); free(ci); free(vals); return BSK_ERR_OUT_OF_MEMORY; }

    const unsigned char *src = (const unsigned char *)d->data;
    int64_t k = 0;
    for (int64_t i = 0; i < mb; i++) {
        const int64_t r0 = i * br, h = rows - r0 < br ? rows - r0 : br;
        for (int64_t j = 0; j < nb; j++) {
            if (!mask[i * nb + j]) continue;
            const int64_t c0 = j * bc, w = cols - c0 < bc ? cols - c0 : bc;
            ci[k] = (int32_t)j;
            unsigned char *blk = vals + (size_t)(k * bsz) * esz;
            for (int64_t r = 0; r < h; r++)
                memcpy(blk + (size_t)(r * bc) * esz, src + (size_t)((r0 + r) * d->ld + c0) * esz, (size_t)w * esz);
            k++;
        }
    }
    bsk__bsr_host_out(out, rows, cols, br, bc, nnzb, rp, ci, vals, d->dtype);
    return BSK_SUCCESS;
}

bsk_status bsk_bsr_from_mask(const bsk_dense *dense, int32_t block_rows, int32_t block_cols, const uint8_t *mask,
                             bsk_bsr *out)
{
    bsk_status s = check_dense_src(dense, block_rows, block_cols, out);
    if (s) return s;
    int64_t mb = (dense->rows + block_rows - 1) / block_rows, nb = (dense->cols + block_cols - 1) / block_cols;
    if (!mask && mb * nb > 0) return BSK_ERR_NULL_POINTER;
    return build_from_mask(dense, block_rows, block_cols, mask, out);
}

bsk_status bsk_bsr_from_dense(const bsk_dense *dense, int32_t block_rows, int32_t block_cols, float threshold,
                              bsk_bsr *out)
{
    bsk_status s = check_dense_src(dense, block_rows, block_cols, out);
    if (s) return s;
    if (isnan(threshold)) return BSK_ERR_INVALID_ARGUMENT;
    const int64_t rows = dense->rows, cols = dense->cols, br = block_rows, bc = block_cols;
    const int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
    /* mb*nb <= rows*cols <= ld*rows, which bsk__check_dense bounded: no overflow here */
    uint8_t *mask = (uint8_t *)malloc(bsk__bytes(mb * nb, 1));
    double *ss = (double *)malloc(bsk__bytes(nb, sizeof(double)));
    if (!mask || !ss) { free(mask); free(ss); return BSK_ERR_OUT_OF_MEMORY; }
    /* One streaming pass over the dense rows: per block row, the sum of squares of each block (in
       double: squares of tiny floats do not underflow, so threshold 0 keeps any non-zero entry). */
    for (int64_t i = 0; i < mb; i++) {
        for (int64_t j = 0; j < nb; j++) ss[j] = 0.0;
        const int64_t r1 = (i + 1) * br < rows ? (i + 1) * br : rows;
        for (int64_t r = i * br; r < r1; r++) {
            const int64_t base = r * dense->ld;
            for (int64_t j = 0; j < nb; j++) {
                const int64_t c1 = (j + 1) * bc < cols ? (j + 1) * bc : cols;
                double acc = 0.0;
                if (dense->dtype == BSK_F32) {
                    const float *row = (const float *)dense->data + base;
                    for (int64_t c = j * bc; c < c1; c++) acc += (double)row[c] * (double)row[c];
                } else {
                    for (int64_t c = j * bc; c < c1; c++) {
                        double v = bsk__load(dense->data, dense->dtype, base + c);
                        acc += v * v;
                    }
                }
                ss[j] += acc;
            }
        }
        /* NaN norms (a NaN or Inf-Inf entry) are kept: dropping them would hide bad data */
        for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = !(sqrt(ss[j]) <= (double)threshold);
    }
    free(ss);
    s = build_from_mask(dense, block_rows, block_cols, mask, out);
    free(mask);
    return s;
}

/* ---------------------------------------------------------------- from element-wise triplets */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The BSR of checked triplets (row ri[e], column ci[e], value e of `vals`), in any order; entries of the
   same position add. O(nnz log nnz) time, O(nnz + mb) memory, nothing proportional to nb. */
static bsk_status build_from_triplets(int64_t rows, int64_t cols, int64_t nnz, const int32_t *ri, const int32_t *cidx,
                                      const void *vals, bsk_dtype dt, int32_t br, int32_t bc, bsk_bsr *out)
{
    const int64_t mb = (rows + br - 1) / br, bsz = (int64_t)br * bc;
    const size_t esz = bsk_dtype_size(dt);
    size_t bp_bytes = bsk__bytes(mb + 1, sizeof(int64_t)), ord_bytes = bsk__bytes(nnz, sizeof(int64_t));
    size_t rp_bytes = bsk__bytes(mb + 1, sizeof(int32_t)), ci_bytes = bsk__bytes(nnz, sizeof(int32_t));
    if (!bp_bytes || !ord_bytes || !rp_bytes || !ci_bytes) return BSK_ERR_OVERFLOW;
    int64_t *bptr = (int64_t *)calloc(1, bp_bytes), *order = (int64_t *)malloc(ord_bytes);
    int32_t *rp = (int32_t *)malloc(rp_bytes), *ci = (int32_t *)malloc(ci_bytes);
    float *acc = NULL;
    void *values = NULL;
    bsk_status s = BSK_ERR_OUT_OF_MEMORY;
    if (!bptr || !order || !rp || !ci) goto fail;

    /* Stable counting sort of the entries by block row: order[bptr[i] .. bptr[i+1]) are block row i's,
       in input order (so duplicates add in a deterministic order). */
    for (int64_t e = 0; e < nnz; e++) bptr[ri[e] / br + 1]++;
    for (int64_t i = 0; i < mb; i++) bptr[i + 1] += bptr[i];
    for (int64_t e = 0; e < nnz; e++) order[bptr[ri[e] / br]++] = e;
    for (int64_t i = mb; i > 0; i--) bptr[i] = bptr[i - 1];
    bptr[0] = 0;

    /* Block columns of each block row: sorted and made unique in place in ci. Block row i's keys fit at
       ci[rp[i] ..] because rp[i] <= bptr[i] (each kept block holds at least one entry). */
    int64_t nnzb = 0, max_row = 0;
    rp[0] = 0;
    for (int64_t i = 0; i < mb; i++) {
        int64_t n = bptr[i + 1] - bptr[i], u = 0;
        int32_t *key = ci + nnzb;
        for (int64_t t = 0; t < n; t++) key[t] = cidx[order[bptr[i] + t]] / bc;
        qsort(key, (size_t)n, sizeof *key, cmp_i32);
        for (int64_t t = 0; t < n; t++)
            if (u == 0 || key[t] != key[u - 1]) key[u++] = key[t];
        nnzb += u;
        if (nnzb > INT32_MAX) { s = BSK_ERR_OVERFLOW; goto fail; }
        rp[i + 1] = (int32_t)nnzb;
        if (u > max_row) max_row = u;
    }
    int64_t elems, row_elems;
    size_t v_bytes = 0, acc_bytes = 0;
    if (bsk__mul_ok(nnzb, bsz, &elems)) v_bytes = bsk__bytes(elems, esz);
    if (bsk__mul_ok(max_row, bsz, &row_elems)) acc_bytes = bsk__bytes(row_elems, sizeof(float));
    if (!v_bytes || !acc_bytes) { s = BSK_ERR_OVERFLOW; goto fail; }
    values = calloc(1, v_bytes); /* zero: padding and positions no entry touches */
    acc = (float *)malloc(acc_bytes);
    if (!values || !acc) goto fail;
    if (nnzb < nnz) { /* give back the unused tail of ci; a failed shrink keeps the larger array */
        int32_t *shrunk = (int32_t *)realloc(ci, bsk__bytes(nnzb, sizeof(int32_t)));
        if (shrunk) ci = shrunk;
    }

    /* Sum the entries of each block row in fp32 (so fp16/bf16 duplicates round once), then store. */
    for (int64_t i = 0; i < mb; i++) {
        const int32_t *cols_i = ci + rp[i];
        const int64_t u = rp[i + 1] - rp[i];
        if (!u) continue;
        memset(acc, 0, (size_t)(u * bsz) * sizeof(float));
        for (int64_t t = bptr[i]; t < bptr[i + 1]; t++) {
            const int64_t e = order[t];
            const int32_t j = cidx[e] / bc;
            int64_t lo = 0, hi = u - 1; /* binary search of j among the row's sorted block columns */
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (cols_i[mid] < j) lo = mid + 1; else hi = mid;
            }
            acc[lo * bsz + (int64_t)(ri[e] % br) * bc + cidx[e] % bc] += bsk__load(vals, dt, e);
        }
        /* in-matrix positions only: padding stays the calloc zero */
        const int64_t h = rows - i * br < br ? rows - i * br : br;
        for (int64_t q = 0; q < u; q++) {
            const int64_t c0 = (int64_t)cols_i[q] * bc, w = cols - c0 < bc ? cols - c0 : bc;
            for (int64_t r = 0; r < h; r++)
                for (int64_t c = 0; c < w; c++)
                    bsk__store(values, dt, ((int64_t)rp[i] + q) * bsz + r * bc + c, acc[q * bsz + r * bc + c]);
        }
    }
    free(bptr);
    free(order);
    free(acc);
    bsk__bsr_host_out(out, rows, cols, br, bc, nnzb, rp, ci, values, dt);
    return BSK_SUCCESS;
fail:
    free(bptr); free(order); free(rp); free(ci); free(acc); free(values);
    return s;
}

/* Arguments both element-wise builders share. Index arrays are checked by the callers. */
static bsk_status check_triplet_args(int64_t rows, int64_t cols, int64_t nnz, const void *values, bsk_dtype dtype,
                                     int32_t br, int32_t bc, const bsk_bsr *out)
{
    bsk_status s;
    if (!out) return BSK_ERR_NULL_POINTER;
    if (!bsk__dtype_ok(dtype) || nnz < 0) return BSK_ERR_INVALID_ARGUMENT;
    if ((s = bsk__check_dims(rows, cols)) || (s = bsk__check_blocks(br, bc))) return s;
    if (nnz > 0 && !values) return BSK_ERR_NULL_POINTER;
    if (values && !bsk__aligned(values, bsk_dtype_size(dtype))) return BSK_ERR_MISALIGNED;
    return BSK_SUCCESS;
}

bsk_status bsk_bsr_from_coo(int64_t rows, int64_t cols, int64_t nnz, const int32_t *row_idx, const int32_t *col_idx,
                            const void *values, bsk_dtype dtype, int32_t block_rows, int32_t block_cols, bsk_bsr *out)
{
    bsk_status s = check_triplet_args(rows, cols, nnz, values, dtype, block_rows, block_cols, out);
    if (s) return s;
    if (nnz > 0 && (!row_idx || !col_idx)) return BSK_ERR_NULL_POINTER;
    if ((row_idx && !bsk__aligned(row_idx, 4)) || (col_idx && !bsk__aligned(col_idx, 4))) return BSK_ERR_MISALIGNED;
    for (int64_t e = 0; e < nnz; e++) /* every index, before anything is allocated */
        if (row_idx[e] < 0 || row_idx[e] >= rows || col_idx[e] < 0 || col_idx[e] >= cols) return BSK_ERR_INVALID_BSR;
    return build_from_triplets(rows, cols, nnz, row_idx, col_idx, values, dtype, block_rows, block_cols, out);
}

bsk_status bsk_bsr_from_csr(int64_t rows, int64_t cols, int64_t nnz, const int32_t *row_ptr, const int32_t *col_idx,
                            const void *values, bsk_dtype dtype, int32_t block_rows, int32_t block_cols, bsk_bsr *out)
{
    bsk_status s = check_triplet_args(rows, cols, nnz, values, dtype, block_rows, block_cols, out);
    if (s) return s;
    if (nnz > INT32_MAX) return BSK_ERR_OVERFLOW; /* row_ptr is int32: it cannot count more */
    if (!row_ptr || (nnz > 0 && !col_idx)) return BSK_ERR_NULL_POINTER;
    if (!bsk__aligned(row_ptr, 4) || (col_idx && !bsk__aligned(col_idx, 4))) return BSK_ERR_MISALIGNED;
    if (row_ptr[0] != 0 || row_ptr[rows] != nnz) return BSK_ERR_INVALID_BSR;
    for (int64_t r = 0; r < rows; r++)
        if (row_ptr[r + 1] < row_ptr[r]) return BSK_ERR_INVALID_BSR;
    for (int64_t e = 0; e < nnz; e++)
        if (col_idx[e] < 0 || col_idx[e] >= cols) return BSK_ERR_INVALID_BSR;
    /* the rows as explicit indices, then the COO path (which does not need the CSR order) */
    size_t ri_bytes = bsk__bytes(nnz, sizeof(int32_t));
    if (!ri_bytes) return BSK_ERR_OVERFLOW;
    int32_t *ri = (int32_t *)malloc(ri_bytes);
    if (!ri) return BSK_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < rows; r++)
        for (int32_t e = row_ptr[r]; e < row_ptr[r + 1]; e++) ri[e] = (int32_t)r;
    s = build_from_triplets(rows, cols, nnz, ri, col_idx, values, dtype, block_rows, block_cols, out);
    free(ri);
    return s;
}
