/* ops.c — the public operations: validate every argument, then hand over to the backend the memory
   is on. Nothing is written before every check has passed. */
#include "../internal.h"

bsk_status bsk__check_side(const bsk_context *ctx, bsk_memory m)
{
    if (m == BSK_MEM_DEVICE) {
        if (ctx->backend == BSK_BACKEND_CPU) return BSK_ERR_WRONG_LOCATION;
        if (!ctx->has_device) return BSK_ERR_NO_DEVICE;
    } else if (ctx->backend == BSK_BACKEND_CUDA) {
        return BSK_ERR_WRONG_LOCATION;
    }
    return BSK_SUCCESS;
}

/* Where the operands live decides the backend; mixing host and device is an error. */
static bsk_status pick_side(const bsk_context *ctx, bsk_memory m0, bsk_memory m1, bsk_memory m2)
{
    if (m0 != m1 || m0 != m2) return BSK_ERR_WRONG_LOCATION;
    return bsk__check_side(ctx, m0);
}

static uint64_t bsr_value_bytes(const bsk_bsr *A)
{
    return (uint64_t)(A->nnzb * A->block_rows * A->block_cols) * bsk_dtype_size(A->dtype);
}

/* Bytes of row_ptr (which = 0: mb + 1 entries) or col_idx (1: nnzb entries). */
static uint64_t bsr_index_bytes(const bsk_bsr *A, int which)
{
    return (uint64_t)(which ? A->nnzb : bsk_bsr_mb(A) + 1) * 4;
}

static bsk_status check_bsr_full(const bsk_bsr *A)
{
    bsk_status s = bsk__check_bsr_desc(A);
    if (!s) s = bsk__check_bsr_location(A);
    if (!s && A->mem == BSK_MEM_HOST)
        s = bsk__check_bsr_indices(bsk_bsr_mb(A), bsk_bsr_nb(A), A->nnzb, A->row_ptr, A->col_idx);
    return s;
}

static bsk_status check_dense_full(const bsk_dense *D)
{
    bsk_status s = bsk__check_dense(D);
    return s ? s : bsk__check_dense_location(D);
}

bsk_status bsk__spmm_check(bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_dense *B, const bsk_dense *C,
                           int *empty)
{
    bsk_status s;
    *empty = 0;
    if (!ctx || !A || !B || !C) return BSK_ERR_NULL_POINTER;
    if (op != BSK_OP_N && op != BSK_OP_T) return BSK_ERR_INVALID_ARGUMENT;
    if ((s = bsk__check_bsr_desc(A)) || (s = bsk__check_dense(B)) || (s = bsk__check_dense(C))) return s;
    if (A->dtype != B->dtype) return BSK_ERR_UNSUPPORTED;
    int64_t m = op == BSK_OP_N ? A->rows : A->cols, k = op == BSK_OP_N ? A->cols : A->rows;
    if (B->rows != k || C->rows != m || C->cols != B->cols) return BSK_ERR_SHAPE_MISMATCH;
    if ((s = pick_side(ctx, A->mem, B->mem, C->mem))) return s;
    if ((s = check_bsr_full(A)) || (s = check_dense_full(B)) || (s = check_dense_full(C))) return s;
    uint64_t cb = bsk__dense_bytes(C);
    if (bsk__overlaps(C->data, cb, B->data, bsk__dense_bytes(B)) || bsk__overlaps(C->data, cb, A->values, bsr_value_bytes(A)) ||
        bsk__overlaps(C->data, cb, A->row_ptr, bsr_index_bytes(A, 0)) || bsk__overlaps(C->data, cb, A->col_idx, bsr_index_bytes(A, 1)))
        return BSK_ERR_INVALID_ARGUMENT;
    *empty = m == 0 || B->cols == 0;
    return BSK_SUCCESS;
}

bsk_status bsk__spmm_run(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                         bsk_dense *C)
{
    if (A->mem == BSK_MEM_HOST) {
        ctx->last_kernel = "cpu";
        return bsk_cpu_spmm(op, alpha, A, B, beta, C);
    }
    return bsk_cuda_spmm(ctx, op, alpha, A, B, beta, C);
}

static bsk_status bsk_spmm_body(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                    bsk_dense *C)
{
    int empty;
    bsk_status s = bsk__spmm_check(ctx, op, A, B, C, &empty);
    if (s || empty) return s;
    return bsk__spmm_run(ctx, op, alpha, A, B, beta, C);
}

static bsk_status bsk_sddmm_body(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                     bsk_bsr *out)
{
    bsk_status s;
    if (!ctx || !X || !Y || !out) return BSK_ERR_NULL_POINTER;
    if ((s = bsk__check_bsr_desc(out)) || (s = bsk__check_dense(X)) || (s = bsk__check_dense(Y))) return s;
    if (X->dtype != Y->dtype || (out->dtype != BSK_F32 && out->dtype != X->dtype)) return BSK_ERR_UNSUPPORTED;
    if (X->rows != out->rows || Y->rows != out->cols || X->cols != Y->cols) return BSK_ERR_SHAPE_MISMATCH;
    if ((s = pick_side(ctx, out->mem, X->mem, Y->mem))) return s;
    if ((s = check_bsr_full(out)) || (s = check_dense_full(X)) || (s = check_dense_full(Y))) return s;
    uint64_t vb = bsr_value_bytes(out);
    if (bsk__overlaps(out->values, vb, X->data, bsk__dense_bytes(X)) || bsk__overlaps(out->values, vb, Y->data, bsk__dense_bytes(Y)) ||
        bsk__overlaps(out->values, vb, out->row_ptr, bsr_index_bytes(out, 0)) ||
        bsk__overlaps(out->values, vb, out->col_idx, bsr_index_bytes(out, 1)))
        return BSK_ERR_INVALID_ARGUMENT;
    if (out->nnzb == 0) return BSK_SUCCESS;
    if (out->mem == BSK_MEM_HOST) {
        ctx->last_kernel = "cpu";
        return bsk_cpu_sddmm(alpha, X, Y, beta, out);
    }
    return bsk_cuda_sddmm(ctx, alpha, X, Y, beta, out);
}

bsk_status bsk_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                    bsk_dense *C)
{
    bsk__trace_begin(ctx, "bsk_spmm");
    return bsk__trace_end(ctx, bsk_spmm_body(ctx, op, alpha, A, B, beta, C));
}

bsk_status bsk_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, bsk_bsr *out)
{
    bsk__trace_begin(ctx, "bsk_sddmm");
    return bsk__trace_end(ctx, bsk_sddmm_body(ctx, alpha, X, Y, beta, out));
}
