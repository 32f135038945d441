/* spmm_mma.cu — entry point of the portable tensor-core SpMM (sm_80+) and its op-N instances; the kernel
   and its design notes are in spmm_mma.cuh, the op-T instances in spmm_mma_t.cu. */
#include "spmm_mma.cuh"

bsk_status bsk_portable_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                             float beta, bsk_dense *C)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major < 8) return BSK_ERR_UNSUPPORTED;
    if (A->dtype != BSK_F16 && A->dtype != BSK_BF16) return BSK_ERR_UNSUPPORTED;
    if (A->block_rows % 16 || A->block_cols % 16) return BSK_ERR_UNSUPPORTED;
    /* 16-byte copies need 16-byte aligned rows; anything else goes to the SIMT kernel */
    if (B->ld % 8 || !bsk_aligned16(B->data) || (A->nnzb && !bsk_aligned16(A->values))) return BSK_ERR_UNSUPPORTED;

    spmm_args a;
    memset(&a, 0, sizeof a);
    const bool trans = op == BSK_OP_T;
    a.vals = A->values;
    a.B = B->data;
    a.C = C->data;
    a.ldb = B->ld;
    a.ldc = C->ld;
    a.M = C->rows;
    a.K = B->rows;
    a.N = C->cols;
    a.nnzb = A->nnzb;
    a.bsz = (int64_t)A->block_rows * A->block_cols;
    a.bc = A->block_cols;
    a.MB = trans ? A->block_cols : A->block_rows;
    a.KB = trans ? A->block_rows : A->block_cols;
    a.nlist = trans ? bsk_bsr_nb(A) : bsk_bsr_mb(A);
    a.nidx = trans ? bsk_bsr_mb(A) : bsk_bsr_nb(A);
    a.ntiles = (a.N + 127) / 128;
    a.alpha = alpha;
    a.beta = beta;
    a.cdt = C->dtype;
    size_t cs = bsk_dtype_size(C->dtype);
    a.cpair = C->ld % 2 == 0 && ((uintptr_t)C->data % (2 * cs)) == 0;
    const int BM = a.MB % 128 == 0 ? 128 : a.MB % 64 == 0 ? 64 : a.MB % 32 == 0 ? 32 : 16;

    bsk_tindex ti = {NULL, NULL, NULL, -1};
    if (trans) {
        bsk_status s = bsk_cuda_tindex_get(ctx, A, &ti);
        if (s) return s;
        a.ptr = ti.t_ptr;
        a.idx = ti.t_row;
        a.blk = ti.t_blk;
    } else {
        a.ptr = A->row_ptr;
        a.idx = A->col_idx;
    }
    a.msub = a.MB / BM;
    a.items = a.nlist * a.msub * a.ntiles;
    bsk_status s;
    if (trans) s = bsk__portable_spmm_launch_t(ctx, a, BM, A->dtype);
    else if (A->dtype == BSK_F16) s = spmm_mma_launch<__half, false>(ctx, a, BM);
    else s = spmm_mma_launch<__nv_bfloat16, false>(ctx, a, BM);
    if (trans) bsk_cuda_tindex_done(ctx, &ti);
    if (!s) ctx->last_kernel = trans ? "cuda-mma-t" : "cuda-mma";
    return s;
}
