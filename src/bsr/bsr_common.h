/* bsr_common.h — small helpers the BSR utility files share (argument checks, checked allocation).
   Private to src/bsr/. */
#ifndef BSK_BSR_COMMON_H
#define BSK_BSR_COMMON_H

#include <stdlib.h>
#include <string.h>
#include "../internal.h"

static inline int bsk__dtype_ok(bsk_dtype t) { return t == BSK_F32 || t == BSK_F16 || t == BSK_BF16; }
static inline int bsk__aligned(const void *p, size_t a) { return a && ((uintptr_t)p & (a - 1)) == 0; }

/* Block sizes of a builder: 1..BSK_LIMIT_BLOCK (non-positive is invalid, too large is past the limits). */
static inline bsk_status bsk__check_blocks(int32_t br, int32_t bc)
{
    if (br <= 0 || bc <= 0) return BSK_ERR_INVALID_ARGUMENT;
    if (br > BSK_LIMIT_BLOCK || bc > BSK_LIMIT_BLOCK) return BSK_ERR_OVERFLOW;
    return BSK_SUCCESS;
}

/* Matrix dims of a builder: 0..BSK_LIMIT_DIM. */
static inline bsk_status bsk__check_dims(int64_t rows, int64_t cols)
{
    if (rows < 0 || cols < 0) return BSK_ERR_INVALID_ARGUMENT;
    if (rows > BSK_LIMIT_DIM || cols > BSK_LIMIT_DIM) return BSK_ERR_OVERFLOW;
    return BSK_SUCCESS;
}

/* n * size bytes, or 0 when that does not fit a size_t (callers turn 0 into BSK_ERR_OVERFLOW).
   Never 0 for a representable size: empty arrays get one byte so that malloc never returns NULL
   for success. */
static inline size_t bsk__bytes(int64_t n, size_t size)
{
    if (n < 0 || size == 0) return 0;
    if (n == 0) return 1;
    if ((uint64_t)n > (uint64_t)SIZE_MAX / size) return 0;
    return (size_t)n * size;
}

/* Host-side full check of a BSR: descriptor, pointer location, and index structure. The caller has
   already required A->mem == BSK_MEM_HOST. */
static inline bsk_status bsk__check_bsr_host(const bsk_bsr *A)
{
    bsk_status s = bsk__check_bsr_desc(A);
    if (s) return s;
    if (A->mem != BSK_MEM_HOST) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_bsr_location(A))) return s;
    return bsk__check_bsr_indices(bsk_bsr_mb(A), bsk_bsr_nb(A), A->nnzb, A->row_ptr, A->col_idx);
}

/* Hand a newly built host BSR (arrays malloc'd by the builder, freed by bsk_bsr_free) to the caller. */
static inline void bsk__bsr_host_out(bsk_bsr *out, int64_t rows, int64_t cols, int32_t br, int32_t bc, int64_t nnzb,
                                     int32_t *rp, int32_t *ci, void *vals, bsk_dtype dt)
{
    memset(out, 0, sizeof *out);
    out->rows = rows; out->cols = cols; out->block_rows = br; out->block_cols = bc; out->nnzb = nnzb;
    out->row_ptr = rp; out->col_idx = ci; out->values = vals; out->dtype = dt; out->mem = BSK_MEM_HOST;
}

#endif
