/* bench_gpu.c — the GPU path of `bsk bench`: cuBLAS dense, cuSPARSE BSR and Blocked-ELL SpMM (spmm) or
   cuSPARSE SDDMM (sddmm), and bsk, on the same data in one run, each timed the same way (cli_time_gpu:
   CUDA events, median, L2 flushed before every iteration) and each checked against cuBLAS on the dense
   expansion of A. */
#ifdef BSK_WITH_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#define DISABLE_CUSPARSE_DEPRECATED /* the legacy API's deprecation attributes warn on merely including the header */
#include <cusparse.h>
#include "bench.h"
#include "internal.h" /* bsk__load: reading half-precision results on the host */

static cudaDataType cuda_type(bsk_dtype t) { return t == BSK_F32 ? CUDA_R_32F : t == BSK_F16 ? CUDA_R_16F : CUDA_R_16BF; }

/* Everything one shape needs on the device; rows of the same shape share it. */
typedef struct gpu_env {
    bsk_context *ctx;
    cublasHandle_t blas;
    cusparseHandle_t sparse;
    cli_gpu_timer timer;
    int broken; /* a sticky CUDA error: nothing more can run */
} gpu_env;

/* ---------------------------------------------------------------- work items */

typedef struct gemm_work {
    cublasHandle_t h;
    int sddmm;
    int64_t m, n, k;
    const void *A, *B; /* spmm: A m x k, B k x n; sddmm: A = X m x k, B = Y n x k (row-major) */
    void *C;           /* m x n row-major */
    cudaDataType dt, ot;
    cublasStatus_t st;
} gemm_work;

/* Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS sees B as the left operand. For X·Yᵀ the left
   operand is Y read transposed. */
static int gemm_once(void *p)
{
    gemm_work *w = (gemm_work *)p;
    const float one = 1.0f, zero = 0.0f;
    if (!w->sddmm)
        w->st = cublasGemmEx(w->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)w->n, (int)w->m, (int)w->k, &one, w->B, w->dt, (int)w->n,
                             w->A, w->dt, (int)w->k, &zero, w->C, w->ot, (int)w->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        w->st = cublasGemmEx(w->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n, (int)w->m, (int)w->k, &one, w->B, w->dt, (int)w->k,
                             w->A, w->dt, (int)w->k, &zero, w->C, w->ot, (int)w->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return w->st != CUBLAS_STATUS_SUCCESS;
}

typedef struct sparse_work {
    cusparseHandle_t h;
    cusparseSpMatDescr_t A;
    cusparseDnMatDescr_t B, C;
    cusparseSpMMAlg_t alg;
    void *buf;
    cusparseStatus_t st;
} sparse_work;

static int sparse_once(void *p)
{
    sparse_work *w = (sparse_work *)p;
    const float one = 1.0f, zero = 0.0f;
    w->st = cusparseSpMM(w->h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, w->A, w->B, &zero,
                         w->C, CUDA_R_32F, w->alg, w->buf);
    return w->st != CUSPARSE_STATUS_SUCCESS;
}

typedef struct bsk_work {
    bsk_context *ctx;
    int sddmm;
    const bsk_bsr *A;   /* spmm: A; sddmm: the output pattern */
    const bsk_dense *B; /* spmm: B; sddmm: X */
    bsk_dense *C;       /* spmm: C; sddmm: Y (read only) */
    bsk_status st;
} bsk_work;

static int bsk_once(void *p)
{
    bsk_work *w = (bsk_work *)p;
    w->st = w->sddmm ? bsk_sddmm(w->ctx, 1.0f, w->B, w->C, 0.0f, (bsk_bsr *)w->A)
                     : bsk_spmm(w->ctx, BSK_OP_N, 1.0f, w->A, w->B, 0.0f, w->C);
    return w->st != BSK_SUCCESS;
}

/* ---------------------------------------------------------------- helpers */

static int cuda_ok(gpu_env *g, cudaError_t e, char *note, size_t n, const char *what)
{
    if (e == cudaSuccess) return 1;
    snprintf(note, n, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    /* an error from a kernel is sticky: every later call fails the same way */
    if (cudaDeviceSynchronize() != cudaSuccess) g->broken = 1;
    return 0;
}

/* ‖got − ref‖/‖ref‖ over n elements of dtype t (host). */
static double rel_err(const void *got, const void *ref, bsk_dtype t, int64_t n)
{
    cli_err e = {0};
    for (int64_t i = 0; i < n; i++) cli_err_add(&e, bsk__load(got, t, i), bsk__load(ref, t, i));
    return cli_err_value(&e);
}

/* Run a work item once (outputs poisoned first), copy the result back and compare with `ref`; then time
   it. bsk is not timed when its result is wrong (its figure would be meaningless); the baselines are
   timed and flagged. */
static void measure(gpu_env *g, const bench_state *b, bench_fig *f, cli_work_fn fn, void *w, void *dout, size_t out_bytes,
                    void *hgot, const void *href, bsk_dtype ot, double flop, int is_bsk, const bsk_bsr *pattern,
                    int64_t ref_ld)
{
    if (!cuda_ok(g, cudaMemset(dout, 0xff, out_bytes), f->note, sizeof f->note, "poison")) { f->state = FIG_FAIL; return; }
    if (fn(w)) {
        f->state = FIG_FAIL;
        return; /* the caller's work item names the library status */
    }
    if (!cuda_ok(g, cudaDeviceSynchronize(), f->note, sizeof f->note, "run") ||
        !cuda_ok(g, cudaMemcpy(hgot, dout, out_bytes, cudaMemcpyDeviceToHost), f->note, sizeof f->note, "copy back")) {
        f->state = FIG_FAIL;
        return;
    }
    if (!pattern) f->err = rel_err(hgot, href, ot, (int64_t)(out_bytes / bsk_dtype_size(ot)));
    else {
        /* sddmm: the kept blocks' entries inside the matrix against the dense product */
        cli_err e = {0};
        int64_t mb = bsk_bsr_mb(pattern), br = pattern->block_rows, bc = pattern->block_cols;
        for (int64_t i = 0; i < mb; i++)
            for (int32_t k = pattern->row_ptr[i]; k < pattern->row_ptr[i + 1]; k++)
                for (int64_t r = 0; r < br && i * br + r < pattern->rows; r++)
                    for (int64_t c = 0; c < bc && (int64_t)pattern->col_idx[k] * bc + c < pattern->cols; c++)
                        cli_err_add(&e, bsk__load(hgot, ot, ((int64_t)k * br + r) * bc + c),
                                    bsk__load(href, ot, (i * br + r) * ref_ld + (int64_t)pattern->col_idx[k] * bc + c));
        f->err = cli_err_value(&e);
    }
    int good = f->err <= cli_tol(b->dt, ot);
    if (!good && is_bsk) {
        f->state = FIG_WRONG;
        snprintf(f->note, sizeof f->note, "WRONG RESULT (rel err %.2e vs cuBLAS)", f->err);
        return;
    }
    int rc;
    double ms = cli_time_gpu(&g->timer, fn, w, b->warmup, b->iters, &rc);
    if (rc) {
        f->state = FIG_FAIL;
        if (rc < 0) cuda_ok(g, cudaGetLastError(), f->note, sizeof f->note, "timed runs");
        return;
    }
    bench_fig_time(f, ms, flop);
    f->state = good ? FIG_OK : FIG_WRONG;
}

/* cuSPARSE SpMM of the row's pattern in BSR (ell = 0) or Blocked-ELL (ell = 1) form. */
static void run_cusparse(gpu_env *g, const bench_state *b, bench_row *r, int ell, const bsk_bsr *A, const bsk_bsr *dA,
                         void *dB, void *dC, void *hgot, const void *href)
{
    bench_fig *f = ell ? &r->ell : &r->bsr;
    sparse_work w = {g->sparse, NULL, NULL, NULL, ell ? CUSPARSE_SPMM_BLOCKED_ELL_ALG1 : CUSPARSE_SPMM_BSR_ALG1, NULL,
                     CUSPARSE_STATUS_SUCCESS};
    int32_t *hcol = NULL, *dcol = NULL;
    void *hval = NULL, *dval = NULL;
    const char *what = "cusparseCreateBsr";
    int64_t mb = bsk_bsr_mb(A), bs = A->block_rows, esz = (int64_t)bsk_dtype_size(A->dtype);
    if (A->rows % bs || A->cols % A->block_cols) {
        snprintf(f->note, sizeof f->note, "needs block multiples");
        return;
    }
    if (!ell) {
        w.st = cusparseCreateBsr(&w.A, mb, bsk_bsr_nb(A), A->nnzb, bs, A->block_cols, dA->row_ptr, dA->col_idx, dA->values,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, cuda_type(A->dtype),
                                 CUSPARSE_ORDER_ROW);
    } else {
        /* Blocked-ELL: every block row holds ellb slots (the longest row; -1 marks an empty slot), values an
           M x (ellb·b) row-major array, slot s of block row i at columns s·b .. s·b+b-1 */
        what = "cusparseCreateBlockedEll";
        int64_t ellb = r->row_max > 0 ? r->row_max : 1, width = ellb * bs;
        size_t vbytes = (size_t)(A->rows * width * esz);
        hcol = (int32_t *)malloc((size_t)(mb * ellb) * sizeof *hcol);
        hval = calloc(1, vbytes);
        if (!hcol || !hval) { snprintf(f->note, sizeof f->note, "out of host memory"); f->state = FIG_FAIL; goto out; }
        for (int64_t i = 0; i < mb; i++)
            for (int64_t s = 0; s < ellb; s++) {
                int64_t kk = A->row_ptr[i] + s;
                hcol[i * ellb + s] = kk < A->row_ptr[i + 1] ? A->col_idx[kk] : -1;
                if (kk >= A->row_ptr[i + 1]) continue;
                for (int64_t rr = 0; rr < bs; rr++)
                    memcpy((char *)hval + ((i * bs + rr) * width + s * bs) * esz,
                           (const char *)A->values + (kk * bs * bs + rr * bs) * esz, (size_t)(bs * esz));
            }
        if (!cuda_ok(g, cudaMalloc((void **)&dcol, (size_t)(mb * ellb) * sizeof *dcol), f->note, sizeof f->note, "malloc") ||
            !cuda_ok(g, cudaMalloc(&dval, vbytes), f->note, sizeof f->note, "malloc") ||
            !cuda_ok(g, cudaMemcpy(dcol, hcol, (size_t)(mb * ellb) * sizeof *dcol, cudaMemcpyHostToDevice), f->note,
                     sizeof f->note, "upload") ||
            !cuda_ok(g, cudaMemcpy(dval, hval, vbytes, cudaMemcpyHostToDevice), f->note, sizeof f->note, "upload")) {
            f->state = FIG_FAIL;
            goto out;
        }
        w.st = cusparseCreateBlockedEll(&w.A, A->rows, A->cols, bs, width, dcol, dval, CUSPARSE_INDEX_32I,
                                        CUSPARSE_INDEX_BASE_ZERO, cuda_type(A->dtype));
    }
    if (w.st == CUSPARSE_STATUS_SUCCESS) {
        what = "cusparseCreateDnMat";
        w.st = cusparseCreateDnMat(&w.B, r->k, r->n, r->n, dB, cuda_type(b->dt), CUSPARSE_ORDER_ROW);
    }
    if (w.st == CUSPARSE_STATUS_SUCCESS)
        w.st = cusparseCreateDnMat(&w.C, r->m, r->n, r->n, dC, cuda_type(b->ot), CUSPARSE_ORDER_ROW);
    size_t bufsize = 0;
    const float one = 1.0f, zero = 0.0f;
    if (w.st == CUSPARSE_STATUS_SUCCESS) {
        what = "cusparseSpMM_bufferSize";
        w.st = cusparseSpMM_bufferSize(g->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                       w.A, w.B, &zero, w.C, CUDA_R_32F, w.alg, &bufsize);
    }
    if (w.st == CUSPARSE_STATUS_SUCCESS && bufsize &&
        !cuda_ok(g, cudaMalloc(&w.buf, bufsize), f->note, sizeof f->note, "workspace")) {
        f->state = FIG_FAIL;
        goto out;
    }
    if (w.st == CUSPARSE_STATUS_SUCCESS) {
        /* optional, but it is what a caller running one pattern many times would do */
        what = "cusparseSpMM_preprocess";
        w.st = cusparseSpMM_preprocess(g->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                       w.A, w.B, &zero, w.C, CUDA_R_32F, w.alg, w.buf);
    }
    if (w.st == CUSPARSE_STATUS_SUCCESS) {
        what = "cusparseSpMM";
        measure(g, b, f, sparse_once, &w, dC, (size_t)(r->m * r->n) * bsk_dtype_size(b->ot), hgot, href, b->ot,
                bench_sparse_flop(b, r), 0, NULL, 0);
    }
    if (w.st != CUSPARSE_STATUS_SUCCESS) {
        f->state = FIG_FAIL;
        snprintf(f->note, sizeof f->note, "%s: %s", what, cusparseGetErrorString(w.st));
    }
out:
    if (w.A) cusparseDestroySpMat(w.A);
    if (w.B) cusparseDestroyDnMat(w.B);
    if (w.C) cusparseDestroyDnMat(w.C);
    if (w.buf) cudaFree(w.buf);
    if (dcol) cudaFree(dcol);
    if (dval) cudaFree(dval);
    free(hcol);
    free(hval);
}

/* ---------------------------------------------------------------- cuSPARSE SDDMM */

/* cusparseSDDMM (CUSPARSE_SDDMM_ALG_DEFAULT, fp32 compute): out = X·Yᵀ sampled on the pattern. Y (n x k,
   row-major) goes in as op(B) either transposed (opB = T) or, where that is refused, as a column-major
   k x n matrix (the same bytes) with opB = N. */
typedef struct sddmm_work {
    cusparseHandle_t h;
    cusparseDnMatDescr_t X, Y;
    cusparseSpMatDescr_t C;
    cusparseOperation_t opB;
    void *buf;
    cusparseStatus_t st;
} sddmm_work;

static int sddmm_once(void *p)
{
    sddmm_work *w = (sddmm_work *)p;
    const float one = 1.0f, zero = 0.0f;
    w->st = cusparseSDDMM(w->h, CUSPARSE_OPERATION_NON_TRANSPOSE, w->opB, &one, w->X, w->Y, &zero, w->C, CUDA_R_32F,
                          CUSPARSE_SDDMM_ALG_DEFAULT, w->buf);
    return w->st != CUSPARSE_STATUS_SUCCESS;
}

/* Descriptors for Y, workspace and the (optional) preprocessing of w->C; the first Y variant cuSPARSE
   takes. On failure *what names the call that refused. */
static cusparseStatus_t sddmm_prepare(gpu_env *g, sddmm_work *w, const bench_state *b, int64_t n, int64_t k, void *dY,
                                      const char **what)
{
    const float one = 1.0f, zero = 0.0f;
    cusparseStatus_t st = CUSPARSE_STATUS_SUCCESS;
    for (int v = 0; v < 2; v++) {
        if (w->Y) cusparseDestroyDnMat(w->Y);
        w->Y = NULL;
        w->opB = v == 0 ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
        *what = "cusparseCreateDnMat";
        st = v == 0 ? cusparseCreateDnMat(&w->Y, n, k, k, dY, cuda_type(b->dt), CUSPARSE_ORDER_ROW)
                    : cusparseCreateDnMat(&w->Y, k, n, k, dY, cuda_type(b->dt), CUSPARSE_ORDER_COL);
        size_t bytes = 0;
        if (st == CUSPARSE_STATUS_SUCCESS) {
            *what = "cusparseSDDMM_bufferSize";
            st = cusparseSDDMM_bufferSize(g->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, w->opB, &one, w->X, w->Y, &zero,
                                          w->C, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes);
        }
        if (st != CUSPARSE_STATUS_SUCCESS) continue;
        if (w->buf) cudaFree(w->buf);
        w->buf = NULL;
        if (bytes && cudaMalloc(&w->buf, bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            *what = "workspace";
            return CUSPARSE_STATUS_ALLOC_FAILED;
        }
        *what = "cusparseSDDMM_preprocess";
        st = cusparseSDDMM_preprocess(g->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, w->opB, &one, w->X, w->Y, &zero, w->C,
                                      CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, w->buf);
        if (st == CUSPARSE_STATUS_SUCCESS) return st;
    }
    return st;
}

/* cuSPARSE SDDMM of the row's pattern into r->bsr: as BSR where cuSPARSE accepts it, else as CSR over the
   expanded pattern (every entry of the kept blocks inside the matrix: the same products, the same flop
   count on kept blocks), checked against cuBLAS like bsk. The note says which format ran and why. */
static void run_cusparse_sddmm(gpu_env *g, const bench_state *b, bench_row *r, const bsk_bsr *A, const bsk_bsr *dA,
                               void *dX, void *dY, void *hgot, const void *href)
{
    bench_fig *f = &r->bsr;
    sddmm_work w = {g->sparse, NULL, NULL, NULL, CUSPARSE_OPERATION_TRANSPOSE, NULL, CUSPARSE_STATUS_SUCCESS};
    int64_t m = A->rows, n = A->cols, k = r->k, mb = bsk_bsr_mb(A), br = A->block_rows, bc = A->block_cols;
    size_t o = bsk_dtype_size(b->ot), vbytes = (size_t)(A->nnzb * br * bc) * o;
    int32_t *hrp = NULL, *hci = NULL, *drp = NULL, *dci = NULL;
    void *dval = NULL;
    char *hcref = NULL, bsr_why[80] = "";
    const char *what = "cusparseCreateDnMat";
    w.st = cusparseCreateDnMat(&w.X, m, k, k, dX, cuda_type(b->dt), CUSPARSE_ORDER_ROW);
    if (w.st != CUSPARSE_STATUS_SUCCESS) goto fail;
    what = "cusparseCreateBsr";
    w.st = cusparseCreateBsr(&w.C, mb, bsk_bsr_nb(A), A->nnzb, br, bc, dA->row_ptr, dA->col_idx, dA->values,
                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, cuda_type(b->ot),
                             CUSPARSE_ORDER_ROW);
    if (w.st == CUSPARSE_STATUS_SUCCESS) w.st = sddmm_prepare(g, &w, b, n, k, dY, &what);
    if (w.st == CUSPARSE_STATUS_SUCCESS) {
        measure(g, b, f, sddmm_once, &w, dA->values, vbytes, hgot, href, b->ot, bench_sparse_flop(b, r), 0, A, n);
        if (f->state != FIG_FAIL) snprintf(f->note, sizeof f->note, "BSR%s", w.opB == CUSPARSE_OPERATION_NON_TRANSPOSE ? ", Y column-major" : "");
        else if (w.st != CUSPARSE_STATUS_SUCCESS) snprintf(f->note, sizeof f->note, "cusparseSDDMM (BSR): %s", cusparseGetErrorString(w.st));
        goto out;
    }
    /* the error's name, not its sentence: the note (96 characters) has to hold the CSR outcome too */
    snprintf(bsr_why, sizeof bsr_why, "BSR refused by %.28s: %.30s", what, cusparseGetErrorName(w.st));
    if (w.C) cusparseDestroySpMat(w.C);
    w.C = NULL;

    /* CSR over the expanded pattern, with the reference gathered in the same order */
    {
        int64_t nnz = 0;
        for (int64_t i = 0; i < mb; i++) {
            int64_t rows = m - i * br < br ? m - i * br : br;
            for (int32_t kk = A->row_ptr[i]; kk < A->row_ptr[i + 1]; kk++) {
                int64_t cols = n - (int64_t)A->col_idx[kk] * bc < bc ? n - (int64_t)A->col_idx[kk] * bc : bc;
                nnz += rows * cols;
            }
        }
        if (nnz > INT32_MAX) {
            snprintf(f->note, sizeof f->note, "%.64s; CSR: > 2^31 entries", bsr_why);
            f->state = FIG_FAIL;
            goto out;
        }
        hrp = (int32_t *)malloc((size_t)(m + 1) * sizeof *hrp);
        hci = (int32_t *)malloc((size_t)(nnz + 1) * sizeof *hci);
        hcref = (char *)malloc((size_t)nnz * o + 1);
        if (!hrp || !hci || !hcref) {
            snprintf(f->note, sizeof f->note, "%.64s; CSR: out of memory", bsr_why);
            f->state = FIG_FAIL;
            goto out;
        }
        int64_t p = 0;
        hrp[0] = 0;
        for (int64_t gr = 0; gr < m; gr++) {
            int64_t i = gr / br;
            for (int32_t kk = A->row_ptr[i]; kk < A->row_ptr[i + 1]; kk++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t gc = (int64_t)A->col_idx[kk] * bc + c;
                    if (gc >= n) break;
                    hci[p] = (int32_t)gc;
                    memcpy(hcref + (size_t)p * o, (const char *)href + (size_t)(gr * n + gc) * o, o);
                    p++;
                }
            hrp[gr + 1] = (int32_t)p;
        }
        if (!cuda_ok(g, cudaMalloc((void **)&drp, (size_t)(m + 1) * sizeof *drp), f->note, sizeof f->note, "malloc") ||
            !cuda_ok(g, cudaMalloc((void **)&dci, (size_t)(nnz + 1) * sizeof *dci), f->note, sizeof f->note, "malloc") ||
            !cuda_ok(g, cudaMalloc(&dval, (size_t)nnz * o + 1), f->note, sizeof f->note, "malloc") ||
            !cuda_ok(g, cudaMemcpy(drp, hrp, (size_t)(m + 1) * sizeof *drp, cudaMemcpyHostToDevice), f->note,
                     sizeof f->note, "upload") ||
            !cuda_ok(g, cudaMemcpy(dci, hci, (size_t)nnz * sizeof *dci, cudaMemcpyHostToDevice), f->note, sizeof f->note,
                     "upload")) {
            f->state = FIG_FAIL;
            goto out;
        }
        what = "cusparseCreateCsr";
        w.st = cusparseCreateCsr(&w.C, m, n, nnz, drp, dci, dval, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_BASE_ZERO, cuda_type(b->ot));
        if (w.st == CUSPARSE_STATUS_SUCCESS) w.st = sddmm_prepare(g, &w, b, n, k, dY, &what);
        if (w.st != CUSPARSE_STATUS_SUCCESS) {
            snprintf(f->note, sizeof f->note, "%.64s; CSR: %.24s", bsr_why, cusparseGetErrorName(w.st));
            f->state = FIG_FAIL;
            goto out;
        }
        measure(g, b, f, sddmm_once, &w, dval, (size_t)nnz * o, hgot, hcref, b->ot, bench_sparse_flop(b, r), 0, NULL, 0);
        if (f->state != FIG_FAIL) snprintf(f->note, sizeof f->note, "CSR, expanded pattern (%.66s)", bsr_why);
        else if (w.st != CUSPARSE_STATUS_SUCCESS)
            snprintf(f->note, sizeof f->note, "cusparseSDDMM (CSR): %s", cusparseGetErrorString(w.st));
        goto out;
    }
fail:
    f->state = FIG_FAIL;
    snprintf(f->note, sizeof f->note, "%s: %s", what, cusparseGetErrorString(w.st));
out:
    if (w.X) cusparseDestroyDnMat(w.X);
    if (w.Y) cusparseDestroyDnMat(w.Y);
    if (w.C) cusparseDestroySpMat(w.C);
    if (w.buf) cudaFree(w.buf);
    if (drp) cudaFree(drp);
    if (dci) cudaFree(dci);
    if (dval) cudaFree(dval);
    free(hrp);
    free(hci);
    free(hcref);
}

/* ---------------------------------------------------------------- driver */

typedef struct shape_bufs {
    /* device */
    void *dA, *dB, *dCref, *dC; /* spmm: dense A (m x k), B (k x n); sddmm: X in dA (m x k), Y in dB (n x k) */
    /* host */
    void *hA, *hB, *hRef, *hGot;
} shape_bufs;

static void free_bufs(shape_bufs *s)
{
    cudaFree(s->dA);
    cudaFree(s->dB);
    cudaFree(s->dCref);
    cudaFree(s->dC);
    free(s->hA);
    free(s->hB);
    free(s->hRef);
    free(s->hGot);
    memset(s, 0, sizeof *s);
}

static int alloc_bufs(shape_bufs *s, const bench_state *b, int64_t m, int64_t n, int64_t k)
{
    size_t e = bsk_dtype_size(b->dt), o = bsk_dtype_size(b->ot);
    size_t a = (size_t)(m * k) * e, bb = (size_t)(b->sddmm ? n * k : k * n) * e, c = (size_t)(m * n) * o;
    memset(s, 0, sizeof *s);
    if (cudaMalloc(&s->dA, a) != cudaSuccess || cudaMalloc(&s->dB, bb) != cudaSuccess ||
        cudaMalloc(&s->dCref, c) != cudaSuccess || cudaMalloc(&s->dC, c) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    s->hA = malloc(a);
    s->hB = malloc(bb);
    s->hRef = malloc(c);
    s->hGot = malloc(c);
    return s->hA && s->hB && s->hRef && s->hGot;
}

int bench_gpu(bench_state *b)
{
    gpu_env g;
    memset(&g, 0, sizeof g);
    int rc = CLI_OK;
    if (bsk_create(&g.ctx, BSK_BACKEND_CUDA) || bsk_set_pattern_cache(g.ctx, b->cache) ||
        cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS ||
        cusparseCreate(&g.sparse) != CUSPARSE_STATUS_SUCCESS || cli_gpu_timer_init(&g.timer, NULL)) {
        fprintf(stderr, "bsk bench: cannot set up bsk / cuBLAS / cuSPARSE / timers on the GPU\n");
        rc = CLI_FAIL;
        goto done;
    }
    b->flush_bytes = (double)g.timer.flush_bytes;
    for (int i0 = 0; i0 < b->nrows && !g.broken;) {
        int64_t m = b->rows[i0].m, n = b->rows[i0].n, k = b->rows[i0].k;
        int i1 = i0;
        while (i1 < b->nrows && b->rows[i1].m == m && b->rows[i1].n == n && b->rows[i1].k == k) i1++;
        shape_bufs s;
        if (!alloc_bufs(&s, b, m, n, k)) {
            fprintf(stderr, "bsk bench: %lldx%lldx%lld does not fit in memory\n", (long long)m, (long long)n, (long long)k);
            for (int i = i0; i < i1; i++) {
                b->rows[i].bsk.state = FIG_FAIL;
                snprintf(b->rows[i].bsk.note, sizeof b->rows[i].bsk.note, "out of memory");
                bench_row_done(b, i);
            }
            free_bufs(&s);
            i0 = i1;
            continue;
        }
        size_t cbytes = (size_t)(m * n) * bsk_dtype_size(b->ot);
        int64_t bn = b->sddmm ? n * k : k * n;
        fprintf(stderr, "shape %lldx%lldx%lld: generating operands, timing cuBLAS ...\n", (long long)m, (long long)n,
                (long long)k);
        cli_fill_random(s.hA, b->dt, m * k, b->seed + 21);
        cli_fill_random(s.hB, b->dt, bn, b->seed + 22);
        bench_fig dense = {FIG_NONE, NAN, NAN, NAN, ""};
        gemm_work gw = {g.blas, b->sddmm, m, n, k, s.dA, s.dB, s.dCref, cuda_type(b->dt), cuda_type(b->ot),
                        CUBLAS_STATUS_SUCCESS};
        if (cuda_ok(&g, cudaMemcpy(s.dA, s.hA, (size_t)(m * k) * bsk_dtype_size(b->dt), cudaMemcpyHostToDevice), dense.note,
                    sizeof dense.note, "upload") &&
            cuda_ok(&g, cudaMemcpy(s.dB, s.hB, (size_t)bn * bsk_dtype_size(b->dt), cudaMemcpyHostToDevice), dense.note,
                    sizeof dense.note, "upload")) {
            /* the dense baseline on fully random operands, timed once per shape */
            int wrc;
            double ms = cli_time_gpu(&g.timer, gemm_once, &gw, b->warmup, b->iters, &wrc);
            if (wrc) {
                dense.state = FIG_FAIL;
                snprintf(dense.note, sizeof dense.note, "cublasGemmEx: %s",
                         wrc > 0 ? cublasGetStatusString(gw.st) : "CUDA error");
            } else {
                dense.state = FIG_OK;
                bench_fig_time(&dense, ms, 2.0 * (double)m * (double)n * (double)k);
            }
        } else dense.state = FIG_FAIL;
        /* sddmm: X and Y stay the same for every row, so the reference product is computed once here */
        if (b->sddmm && dense.state == FIG_OK &&
            (gemm_once(&gw) || !cuda_ok(&g, cudaMemcpy(s.hRef, s.dCref, cbytes, cudaMemcpyDeviceToHost), dense.note,
                                        sizeof dense.note, "reference")))
            dense.state = FIG_FAIL;

        for (int i = i0; i < i1 && !g.broken; i++) {
            bench_row *r = &b->rows[i];
            r->dense = dense;
            bsk_bsr A = {0}, dA = {0};
            bsk_status bs;
            if ((bs = bench_row_pattern(b, i, m, b->sddmm ? n : k, &A)) || (bs = bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA))) {
                r->bsk.state = FIG_FAIL;
                snprintf(r->bsk.note, sizeof r->bsk.note, "setup: %s", bsk_status_string(bs));
                bsk_bsr_free(&A);
                bench_row_done(b, i);
                continue;
            }
            if (dense.state != FIG_OK) {
                r->bsk.state = FIG_FAIL;
                snprintf(r->bsk.note, sizeof r->bsk.note, "no cuBLAS reference");
            } else if (!b->sddmm) {
                /* the reference: cuBLAS on the dense expansion of this A */
                bsk_dense hd = {m, k, k, b->dt, BSK_MEM_HOST, s.hA};
                int ok = !(bs = bsk_bsr_to_dense(&A, &hd)) &&
                         cuda_ok(&g, cudaMemcpy(s.dA, s.hA, (size_t)(m * k) * bsk_dtype_size(b->dt), cudaMemcpyHostToDevice),
                                 r->bsk.note, sizeof r->bsk.note, "upload") &&
                         !gemm_once(&gw) &&
                         cuda_ok(&g, cudaMemcpy(s.hRef, s.dCref, cbytes, cudaMemcpyDeviceToHost), r->bsk.note,
                                 sizeof r->bsk.note, "reference");
                if (!ok) {
                    r->bsk.state = FIG_FAIL;
                    if (bs) snprintf(r->bsk.note, sizeof r->bsk.note, "bsk_bsr_to_dense: %s", bsk_status_string(bs));
                } else {
                    bsk_dense dB = {k, n, n, b->dt, BSK_MEM_DEVICE, s.dB}, dC = {m, n, n, b->ot, BSK_MEM_DEVICE, s.dC};
                    bsk_work w = {g.ctx, 0, &dA, &dB, &dC, BSK_SUCCESS};
                    measure(&g, b, &r->bsk, bsk_once, &w, s.dC, cbytes, s.hGot, s.hRef, b->ot, bench_sparse_flop(b, r), 1,
                            NULL, 0);
                    if (w.st) snprintf(r->bsk.note, sizeof r->bsk.note, "%s", bsk_status_string(w.st));
                    r->kernel = bsk_last_kernel(g.ctx);
                    if (!g.broken) run_cusparse(&g, b, r, 0, &A, &dA, s.dB, s.dC, s.hGot, s.hRef);
                    if (!g.broken && r->pattern == BSK_PATTERN_UNIFORM)
                        run_cusparse(&g, b, r, 1, &A, &dA, s.dB, s.dC, s.hGot, s.hRef);
                }
            } else {
                bsk_dense dX = {m, k, k, b->dt, BSK_MEM_DEVICE, s.dA}, dY = {n, k, k, b->dt, BSK_MEM_DEVICE, s.dB};
                bsk_work w = {g.ctx, 1, &dA, &dX, &dY, BSK_SUCCESS};
                size_t vbytes = (size_t)(A.nnzb * A.block_rows * A.block_cols) * bsk_dtype_size(b->ot);
                void *hv = malloc(vbytes + 1);
                if (!hv) {
                    r->bsk.state = FIG_FAIL;
                    snprintf(r->bsk.note, sizeof r->bsk.note, "out of host memory");
                } else {
                    measure(&g, b, &r->bsk, bsk_once, &w, dA.values, vbytes, hv, s.hRef, b->ot, bench_sparse_flop(b, r), 1,
                            &A, n);
                    if (w.st) snprintf(r->bsk.note, sizeof r->bsk.note, "%s", bsk_status_string(w.st));
                    r->kernel = bsk_last_kernel(g.ctx);
                    /* the baseline writes the same values array (poisoned again first) */
                    if (!g.broken) run_cusparse_sddmm(&g, b, r, &A, &dA, s.dA, s.dB, hv, s.hRef);
                }
                free(hv);
            }
            if (b->cache) (void)bsk_forget_patterns(g.ctx); /* dA's memory may hold the next row's pattern */
            bsk_bsr_free(&dA);
            bsk_bsr_free(&A);
            bench_row_done(b, i);
        }
        free_bufs(&s);
        i0 = i1;
    }
    if (g.broken) {
        fprintf(stderr, "bsk bench: a CUDA error left the device unusable; stopping\n");
        rc = CLI_FAIL;
    }
done:
    cli_gpu_timer_free(&g.timer);
    if (g.sparse) cusparseDestroy(g.sparse);
    if (g.blas) cublasDestroy(g.blas);
    bsk_destroy(g.ctx);
    return rc;
}
#else
typedef int bench_gpu_unused; /* ISO C wants a translation unit to declare something */
#endif
