/* cpu_spmm.c — C = alpha·op(A)·B + beta·C on the host.
   Work item = (output block row, tile of CPU_NT output columns). Op N: output block row i is A's block row
   i, its blocks taken from row_ptr/col_idx. Op T: output block row j is A's block column j, its blocks taken
   from the transpose index (block-row order), each block read transposed while packing — no atomics, no
   value copy of Aᵀ. Each item owns its output tile outright, so threads never share an output element and
   every element's sum runs in pattern order: the result is the same bit for bit on every run and for every
   thread count.
   Per item: the blocks' contraction slices are packed chunk by chunk (CPU_KC elements at most) into fp32
   panels — A's rows (zero rows up to the register tile) and the matching rows of B (only rows that exist:
   the padding columns of a partial last block column are skipped, so B is never read past its last row) —
   and accumulated into an fp32 tile that stays in cache across all of the row's blocks. The epilogue then
   writes alpha·acc + beta·C once per element (beta = 0: C is not read). */
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"

typedef struct {
    bsk_op op;
    float alpha, beta;
    const bsk_bsr *A;
    const bsk_dense *B;
    bsk_dense *C;
    int64_t m, n;       /* C's shape                                                  */
    int64_t bh;         /* output block height: block_rows (op N) or block_cols (op T) */
    int64_t hpad;       /* bh rounded up to CPU_MR                                    */
    int64_t nt, ntiles; /* output columns per tile (multiple of CPU_NR), tiles per row */
    const int32_t *t_ptr, *t_row, *t_blk; /* op T: transpose index                  */
    const int32_t *order;                 /* output block rows, most blocks first     */
    bsk__cpu_tile_fn tile;
} spmm_job;

/* Rows [0, hv) of the A panel for one contraction slice [c0, c0 + len) of block `blk`, placed at panel
   positions kk..kk+len-1; rows hv .. ms*CPU_MR-1 are zero. */
static void pack_a(const spmm_job *J, int64_t blk, int64_t c0, int64_t len, int64_t kk, int64_t hv, int64_t ms,
                   float *restrict pa)
{
    const bsk_bsr *A = J->A;
    int64_t br = A->block_rows, bc = A->block_cols, base = blk * br * bc;
    float tmp[BSK_LIMIT_BLOCK > CPU_KC ? BSK_LIMIT_BLOCK : CPU_KC];
    if (J->op == BSK_OP_N) {
        /* panel row r = block row r: contiguous in the block */
        for (int64_t r = 0; r < ms * CPU_MR; r++) {
            float *dst = pa + (r / CPU_MR) * CPU_MR * CPU_KC + kk * CPU_MR + r % CPU_MR;
            if (r < hv) {
                cpu_load_row(tmp, A->values, A->dtype, base + r * bc + c0, len);
                for (int64_t p = 0; p < len; p++) dst[p * CPU_MR] = tmp[p];
            } else {
                for (int64_t p = 0; p < len; p++) dst[p * CPU_MR] = 0.0f;
            }
        }
    } else {
        /* panel row r = block column r; contraction index c = block row c: read block row c whole */
        for (int64_t p = 0; p < len; p++) {
            cpu_load_row(tmp, A->values, A->dtype, base + (c0 + p) * bc, hv);
            for (int64_t r = hv; r < ms * CPU_MR; r++) tmp[r] = 0.0f;
            for (int64_t s = 0; s < ms; s++) {
                float *dst = pa + s * CPU_MR * CPU_KC + (kk + p) * CPU_MR;
                for (int r = 0; r < CPU_MR; r++) dst[r] = tmp[s * CPU_MR + r];
            }
        }
    }
}

/* B rows brow..brow+len-1, columns n0..n0+nv-1, into column strips at positions kk..; columns nv ..
   ns*CPU_NR-1 are zero. */
static void pack_b(const bsk_dense *B, int64_t brow, int64_t len, int64_t n0, int64_t nv, int64_t ns, int64_t kk,
                   float *restrict pb)
{
    float tmp[CPU_NT];
    for (int64_t l = 0; l < len; l++) {
        cpu_load_row(tmp, B->data, B->dtype, (brow + l) * B->ld + n0, nv);
        for (int64_t q = nv; q < ns * CPU_NR; q++) tmp[q] = 0.0f;
        for (int64_t t = 0; t < ns; t++) {
            float *dst = pb + t * CPU_NR * CPU_KC + (kk + l) * CPU_NR;
            memcpy(dst, tmp + t * CPU_NR, CPU_NR * sizeof(float));
        }
    }
}

/* C tile rows [r0, r0+hv), columns [n0, n0+nv) = alpha·acc + beta·C (beta = 0: C not read). */
static void epilogue(const spmm_job *J, const float *acc, int64_t ldacc, int64_t r0, int64_t hv, int64_t n0,
                     int64_t nv)
{
    bsk_dense *C = J->C;
    float alpha = J->alpha, beta = J->beta, tmp[CPU_NT];
    for (int64_t r = 0; r < hv; r++) {
        const float *a = acc + r * ldacc;
        int64_t off = (r0 + r) * C->ld + n0;
        if (C->dtype == BSK_F32) {
            float *restrict c = (float *)C->data + off;
            if (beta == 0.0f) for (int64_t q = 0; q < nv; q++) c[q] = alpha * a[q];
            else for (int64_t q = 0; q < nv; q++) c[q] = alpha * a[q] + beta * c[q];
        } else {
            if (beta == 0.0f) for (int64_t q = 0; q < nv; q++) tmp[q] = alpha * a[q];
            else {
                cpu_load_row(tmp, C->data, C->dtype, off, nv);
                for (int64_t q = 0; q < nv; q++) tmp[q] = alpha * a[q] + beta * tmp[q];
            }
            cpu_store_row(C->data, C->dtype, off, tmp, nv);
        }
    }
}

static void spmm_item(void *arg, int64_t item, float *ws)
{
    const spmm_job *J = (const spmm_job *)arg;
    const bsk_bsr *A = J->A;
    int64_t ob = J->order[item / J->ntiles], n0 = (item % J->ntiles) * J->nt;
    int64_t nv = J->n - n0 < J->nt ? J->n - n0 : J->nt, ns = (nv + CPU_NR - 1) / CPU_NR;
    int64_t hv = J->m - ob * J->bh < J->bh ? J->m - ob * J->bh : J->bh, ms = (hv + CPU_MR - 1) / CPU_MR;
    float *pa = ws, *pb = pa + J->hpad * CPU_KC, *acc = pb + CPU_KC * J->nt;
    int64_t ldacc = J->nt;

    /* this output row's blocks: op N its block row, op T its block column through the transpose index */
    int64_t q0, q1, kdim, kblk;
    if (J->op == BSK_OP_N) { q0 = A->row_ptr[ob]; q1 = A->row_ptr[ob + 1]; kdim = A->cols; kblk = A->block_cols; }
    else { q0 = J->t_ptr[ob]; q1 = J->t_ptr[ob + 1]; kdim = A->rows; kblk = A->block_rows; }

    int64_t kk = 0;
    int first = 1;
    for (int64_t q = q0; q < q1; q++) {
        int64_t blk = J->op == BSK_OP_N ? q : J->t_blk[q];
        int64_t kb = J->op == BSK_OP_N ? A->col_idx[q] : J->t_row[q]; /* block index along the contraction */
        int64_t brow = kb * kblk, klen = kdim - brow < kblk ? kdim - brow : kblk;
        for (int64_t c0 = 0; c0 < klen;) {
            int64_t take = klen - c0 < CPU_KC - kk ? klen - c0 : CPU_KC - kk;
            pack_a(J, blk, c0, take, kk, hv, ms, pa);
            pack_b(J->B, brow + c0, take, n0, nv, ns, kk, pb);
            kk += take;
            c0 += take;
            if (kk == CPU_KC) {
                J->tile(kk, CPU_KC, ms, ns, pa, pb, acc, ldacc, first);
                first = 0;
                kk = 0;
            }
        }
    }
    if (kk > 0 || first) J->tile(kk, CPU_KC, ms, ns, pa, pb, acc, ldacc, first);
    epilogue(J, acc, ldacc, ob * J->bh, hv, n0, nv);
}

/* alpha = 0: C = beta·C, A and B not read (as BLAS does). */
static void scale_c(bsk_dense *C, float beta)
{
    for (int64_t r = 0; r < C->rows; r++) {
        int64_t off = r * C->ld;
        for (int64_t q = 0; q < C->cols; q++) {
            float v = beta == 0.0f ? 0.0f : beta * cpu_load1(C->data, C->dtype, off + q);
            bsk__store(C->data, C->dtype, off + q, v);
        }
    }
}

bsk_status bsk_cpu_spmm(bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta, bsk_dense *C)
{
    if (C->rows == 0 || C->cols == 0) return BSK_SUCCESS;
    if (alpha == 0.0f) { scale_c(C, beta); return BSK_SUCCESS; }

    spmm_job J;
    memset(&J, 0, sizeof J);
    J.op = op; J.alpha = alpha; J.beta = beta; J.A = A; J.B = B; J.C = C;
    J.m = C->rows; J.n = C->cols;
    J.bh = op == BSK_OP_N ? A->block_rows : A->block_cols;
    J.hpad = cpu_round_up(J.bh, CPU_MR);
    J.nt = cpu_round_up(J.n, CPU_NR) < CPU_NT ? cpu_round_up(J.n, CPU_NR) : CPU_NT;
    J.ntiles = (J.n + J.nt - 1) / J.nt;
    J.tile = bsk__cpu_pick_tile();
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A), nob = op == BSK_OP_N ? mb : nb;

    /* every allocation first: on failure nothing has been written */
    int32_t *order = (int32_t *)malloc((size_t)nob * sizeof *order);
    int32_t *cnt = (int32_t *)calloc((size_t)(op == BSK_OP_N ? nb : mb) + 2, sizeof *cnt);
    int32_t *tix = NULL;
    if (op == BSK_OP_T) tix = (int32_t *)malloc((size_t)(nb + 1 + 2 * A->nnzb) * sizeof *tix);
    if (!order || !cnt || (op == BSK_OP_T && !tix)) { free(order); free(cnt); free(tix); return BSK_ERR_OUT_OF_MEMORY; }
    const int32_t *ptr = A->row_ptr;
    if (op == BSK_OP_T) {
        J.t_ptr = tix; J.t_row = tix + nb + 1; J.t_blk = tix + nb + 1 + A->nnzb;
        bsk__bsr_transpose_index_host(mb, nb, A->row_ptr, A->col_idx, tix, tix + nb + 1, tix + nb + 1 + A->nnzb);
        ptr = J.t_ptr;
    }
    /* Longest output rows first (counting sort, stable): with items handed out in order, the long rows of a
       skewed pattern start early instead of finishing last on one thread. Order never affects values. */
    int64_t maxc = op == BSK_OP_N ? nb : mb;
    for (int64_t i = 0; i < nob; i++) cnt[maxc - (ptr[i + 1] - ptr[i])]++;
    for (int64_t c = 0, run = 0; c <= maxc; c++) { int32_t v = cnt[c]; cnt[c] = (int32_t)run; run += v; }
    for (int64_t i = 0; i < nob; i++) order[cnt[maxc - (ptr[i + 1] - ptr[i])]++] = (int32_t)i;
    J.order = order;

    int64_t items = nob * J.ntiles;
    double flops = 2.0 * (double)A->nnzb * A->block_rows * A->block_cols * (double)J.n;
    int threads = bsk__cpu_threads(items, flops);
    int64_t ws = J.hpad * CPU_KC + CPU_KC * J.nt + J.hpad * J.nt;
    bsk_status s = bsk__cpu_parallel(threads, items, spmm_item, &J, ws);
    free(order); free(cnt); free(tix);
    return s;
}
