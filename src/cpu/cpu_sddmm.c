/* cpu_sddmm.c — out.values = alpha·(X·Yᵀ) sampled on out's pattern + beta·out.values, on the host.
   Work item = (block k, tile of up to CPU_NT of its columns). The block is a small dense GEMM
   X[rows of block row i] · Y[rows of block column j]ᵀ over D, computed with the same packed register-tile
   kernel as SpMM (X rows as the A panel, Y rows transposed into the B panel), D in chunks of CPU_KC.
   Each item owns its outputs: deterministic, independent of the thread count.
   Padding entries (the part of a partial last block row/column outside the matrix) are written as ZERO,
   whatever alpha, beta and their old value: padding must be zero (bsk.h), and writing it keeps it so even
   when the old padding was not. */
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"

typedef struct {
    float alpha, beta;
    const bsk_dense *X, *Y;
    bsk_bsr *out;
    int64_t mb;
    int64_t hpad;        /* block_rows rounded up to CPU_MR          */
    int64_t nt, ctiles;  /* block columns per tile, tiles per block  */
    bsk__cpu_tile_fn tile;
} sddmm_job;

/* The block row holding block k: the last i with row_ptr[i] <= k (empty rows share their start). */
static int64_t block_row_of(const int32_t *row_ptr, int64_t mb, int64_t k)
{
    int64_t lo = 0, hi = mb; /* row_ptr[lo] <= k < row_ptr[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (row_ptr[mid] <= k) lo = mid; else hi = mid;
    }
    return lo;
}

static void sddmm_item(void *arg, int64_t item, float *ws)
{
    const sddmm_job *J = (const sddmm_job *)arg;
    bsk_bsr *O = J->out;
    const bsk_dense *X = J->X, *Y = J->Y;
    int64_t k = item / J->ctiles, c0 = (item % J->ctiles) * J->nt;
    int64_t br = O->block_rows, bc = O->block_cols, bsz = br * bc;
    int64_t i = block_row_of(O->row_ptr, J->mb, k), j = O->col_idx[k];
    int64_t cw = bc - c0 < J->nt ? bc - c0 : J->nt;                 /* columns of this tile          */
    int64_t hv = O->rows - i * br < br ? O->rows - i * br : br;     /* rows inside the matrix        */
    int64_t cv = O->cols - (j * bc + c0);                           /* columns inside the matrix     */
    cv = cv < 0 ? 0 : cv > cw ? cw : cv;
    int64_t ms = (hv + CPU_MR - 1) / CPU_MR, ns = (cv + CPU_NR - 1) / CPU_NR, D = X->cols;
    float *pa = ws, *pb = pa + J->hpad * CPU_KC, *acc = pb + CPU_KC * J->nt;
    int64_t ldacc = J->nt;
    float tmp[CPU_KC];

    if (J->alpha != 0.0f && cv > 0) {
        int first = 1;
        for (int64_t d0 = 0; d0 < D || first; d0 += CPU_KC) {
            int64_t len = D - d0 < CPU_KC ? D - d0 : CPU_KC;
            for (int64_t r = 0; r < ms * CPU_MR; r++) { /* X rows of block row i -> A panel */
                float *dst = pa + (r / CPU_MR) * CPU_MR * CPU_KC + r % CPU_MR;
                if (r < hv) {
                    cpu_load_row(tmp, X->data, X->dtype, (i * br + r) * X->ld + d0, len);
                    for (int64_t p = 0; p < len; p++) dst[p * CPU_MR] = tmp[p];
                } else {
                    for (int64_t p = 0; p < len; p++) dst[p * CPU_MR] = 0.0f;
                }
            }
            for (int64_t c = 0; c < ns * CPU_NR; c++) { /* Y rows of block column j -> B panel (transposed) */
                float *dst = pb + (c / CPU_NR) * CPU_NR * CPU_KC + c % CPU_NR;
                if (c < cv) {
                    cpu_load_row(tmp, Y->data, Y->dtype, (j * bc + c0 + c) * Y->ld + d0, len);
                    for (int64_t p = 0; p < len; p++) dst[p * CPU_NR] = tmp[p];
                } else {
                    for (int64_t p = 0; p < len; p++) dst[p * CPU_NR] = 0.0f;
                }
            }
            J->tile(len, CPU_KC, ms, ns, pa, pb, acc, ldacc, first);
            first = 0;
        }
    }

    /* epilogue over the whole tile, padding included */
    float alpha = J->alpha, beta = J->beta;
    int compute = alpha != 0.0f && cv > 0;
    for (int64_t r = 0; r < br; r++) {
        int64_t base = k * bsz + r * bc + c0;
        for (int64_t c = 0; c < cw; c++) {
            float v = 0.0f;
            if (r < hv && c < cv) {
                if (compute) v = alpha * acc[r * ldacc + c];
                if (beta != 0.0f) v += beta * cpu_load1(O->values, O->dtype, base + c);
            }
            if (O->dtype == BSK_F32) ((float *)O->values)[base + c] = v;
            else bsk__store(O->values, O->dtype, base + c, v);
        }
    }
}

bsk_status bsk_cpu_sddmm(float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, bsk_bsr *out)
{
    if (out->nnzb == 0) return BSK_SUCCESS;
    sddmm_job J;
    memset(&J, 0, sizeof J);
    J.alpha = alpha; J.beta = beta; J.X = X; J.Y = Y; J.out = out;
    J.mb = bsk_bsr_mb(out);
    J.hpad = cpu_round_up(out->block_rows, CPU_MR);
    J.nt = cpu_round_up(out->block_cols, CPU_NR) < CPU_NT ? cpu_round_up(out->block_cols, CPU_NR) : CPU_NT;
    J.ctiles = (out->block_cols + J.nt - 1) / J.nt;
    J.tile = bsk__cpu_pick_tile();
    int64_t items = out->nnzb * J.ctiles;
    double flops = 2.0 * (double)out->nnzb * out->block_rows * out->block_cols * (double)X->cols;
    int threads = bsk__cpu_threads(items, flops);
    int64_t ws = J.hpad * CPU_KC + CPU_KC * J.nt + J.hpad * J.nt;
    return bsk__cpu_parallel(threads, items, sddmm_item, &J, ws);
}
