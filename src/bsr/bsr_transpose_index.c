/* bsr_transpose_index.c — the metadata-only transpose of a BSR pattern: for each block column, its blocks
   in block-row order. A counting sort over block columns: O(nnzb + nb) time, no extra memory (t_ptr doubles
   as the fill cursor). */
#include "../internal.h"

void bsk__bsr_transpose_index_host(int64_t mb, int64_t nb, const int32_t *row_ptr, const int32_t *col_idx,
                                   int32_t *t_ptr, int32_t *t_row, int32_t *t_blk)
{
    int32_t nnzb = row_ptr[mb];
    for (int64_t j = 0; j <= nb; j++) t_ptr[j] = 0;
    for (int32_t k = 0; k < nnzb; k++) t_ptr[col_idx[k] + 1]++;
    for (int64_t j = 0; j < nb; j++) t_ptr[j + 1] += t_ptr[j];
    /* t_ptr[j] is now the start of column j; use it as column j's cursor. Scanning block rows in order keeps
       each column's blocks in block-row order. */
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            int32_t at = t_ptr[col_idx[k]]++;
            t_row[at] = (int32_t)i;
            t_blk[at] = k;
        }
    /* each cursor ended at the start of the next column: shift back by one */
    for (int64_t j = nb; j > 0; j--) t_ptr[j] = t_ptr[j - 1];
    t_ptr[0] = 0;
}

bsk_status bsk_bsr_transpose_index(const bsk_bsr *A, int32_t *t_ptr, int32_t *t_row, int32_t *t_blk)
{
    if (!A || !t_ptr) return BSK_ERR_NULL_POINTER;
    bsk_status s = bsk__check_bsr_desc(A);
    if (s) return s;
    /* t_row / t_blk have nnzb entries: they may be NULL only when there is nothing to write */
    if (A->nnzb > 0 && (!t_row || !t_blk)) return BSK_ERR_NULL_POINTER;
    if (A->mem != BSK_MEM_HOST) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_bsr_location(A))) return s;
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    if ((s = bsk__check_bsr_indices(mb, nb, A->nnzb, A->row_ptr, A->col_idx))) return s;
    bsk__bsr_transpose_index_host(mb, nb, A->row_ptr, A->col_idx, t_ptr, t_row, t_blk);
    return BSK_SUCCESS;
}
