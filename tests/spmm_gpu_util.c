/* spmm_gpu_util.c — see spmm_gpu_util.h. */
#include "spmm_gpu_util.h"

#ifdef BSK_WITH_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "internal.h" /* bsk__load */

void *spmm_dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

size_t spmm_dense_bytes(const bsk_dense *D) { return (size_t)(D->rows * D->ld) * bsk_dtype_size(D->dtype); }

bsk_bsr spmm_random_bsr(int64_t M, int64_t K, int b, double d, bsk_pattern pat, bsk_dtype dt)
{
    bsk_bsr A;
    memset(&A, 0, sizeof A);
    (void)bsk_bsr_random(M, K, b, b, d, pat, bsk_rng_next(bsk_test_rng()), dt, &A);
    return A;
}

/* Every element: |got - ref| <= tol * (|ref| + rms(ref) / 4): the output rounding is relative to the element, the
   second term covers the fp32 accumulation error of elements that cancel to ~0 (it grows with the reduction length:
   a 132,800-long sum missed rms / 20 by 1.3x on the device, whole-matrix rel err 4e-5). A missing or doubled block
   still moves an element by far more than tol * rms / 4. Returns the number of bad elements (first few printed). */
static int64_t bad_elements(const bsk_dense *got, const double *ref, double tol)
{
    double ss = 0;
    const int64_t n = got->rows * got->cols;
    for (int64_t i = 0; i < n; i++) ss += ref[i] * ref[i];
    const double rms = n ? sqrt(ss / (double)n) : 0.0;
    int64_t bad = 0;
    for (int64_t i = 0; i < got->rows; i++)
        for (int64_t j = 0; j < got->cols; j++) {
            const double g = bsk__load(got->data, got->dtype, i * got->ld + j), r = ref[i * got->cols + j];
            if (!(fabs(g - r) <= tol * (fabs(r) + rms / 4.0))) {
                if (bad < 4) fprintf(stderr, "  C[%lld][%lld] = %.6g, want %.6g\n", (long long)i, (long long)j, g, r);
                bad++;
            }
        }
    return bad;
}

/* Device copies of A, B and C (dA zeroed and dB / dC's data NULL where a copy failed): 1 when all three exist. */
static int upload(const bsk_bsr *A, const bsk_dense *B, const bsk_dense *C, bsk_bsr *dA, bsk_dense *dB, bsk_dense *dC)
{
    memset(dA, 0, sizeof *dA);
    *dB = *B;
    *dC = *C;
    dB->mem = dC->mem = BSK_MEM_DEVICE;
    dB->data = spmm_dev_copy(B->data, spmm_dense_bytes(B));
    dC->data = spmm_dev_copy(C->data, spmm_dense_bytes(C));
    return bsk_bsr_clone(A, BSK_MEM_DEVICE, dA) == BSK_SUCCESS && dB->data && dC->data;
}

double spmm_gpu_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, int64_t N, int64_t padB,
                     int64_t padC, bsk_dtype ct, float alpha, float beta, const char *want)
{
    bsk_rng *r = bsk_test_rng();
    const int64_t kr = op == BSK_OP_N ? A->cols : A->rows, cr = op == BSK_OP_N ? A->rows : A->cols;
    bsk_dense B = bsk_test_dense(kr, N, padB, A->dtype, r);
    bsk_dense C = beta != 0.0f ? bsk_test_dense(cr, N, padC, ct, r) : bsk_test_dense_poison(cr, N, padC, ct);
    double *ref = (double *)malloc((size_t)(cr * N + 1) * sizeof(double));
    bsk_ref_spmm(op, alpha, A, &B, beta, &C, ref);

    double err = NAN;
    bsk_bsr dA;
    bsk_dense dB, dC;
    const int up = upload(A, &B, &C, &dA, &dB, &dC);
    void *back = malloc(spmm_dense_bytes(&C) + 1);
    if (!up || !back || !ref) {
        t->failed++;
        fprintf(stderr, "  device setup failed\n");
        goto done;
    }
    bsk_status s = bsk_spmm(ctx, op, alpha, &dA, &dB, beta, &dC);
    CHECK_STATUS(s, BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    if (s != BSK_SUCCESS) goto done;
    if (want && strncmp(bsk_last_kernel(ctx), want, strlen(want)) != 0) {
        t->failed++;
        fprintf(stderr, "  last kernel %s, want %s*\n", bsk_last_kernel(ctx), want);
    }
    if (cudaMemcpy(back, dC.data, spmm_dense_bytes(&C), cudaMemcpyDeviceToHost) != cudaSuccess) {
        t->failed++;
        goto done;
    }
    {
        bsk_dense got = C;
        got.data = back;
        const double tol = bsk_tol(A->dtype, ct);
        err = bsk_rel_err_dense(&got, ref);
        CHECK_REL(err, tol);
        const int64_t bad = bad_elements(&got, ref, tol);
        CHECK(bad == 0);
        /* padding columns [cols, ld) keep their old bytes (NaN poison or random values) */
        const size_t es = bsk_dtype_size(ct);
        int pad_ok = 1;
        for (int64_t i = 0; i < C.rows && pad_ok; i++)
            if (C.ld > C.cols &&
                memcmp((char *)back + (size_t)(i * C.ld + C.cols) * es, (char *)C.data + (size_t)(i * C.ld + C.cols) * es,
                       (size_t)(C.ld - C.cols) * es) != 0)
                pad_ok = 0;
        CHECK(pad_ok);
        if (!(err <= tol) || bad)
            fprintf(stderr, "  op %s b=%d M=%lld N=%lld K=%lld nnzb=%lld in=%d out=%d alpha=%g beta=%g: rel err %.3e, %lld bad\n",
                    op == BSK_OP_N ? "N" : "T", (int)A->block_rows, (long long)A->rows, (long long)N, (long long)A->cols,
                    (long long)A->nnzb, (int)A->dtype, (int)ct, alpha, beta, err, (long long)bad);
    }
done:
    free(back);
    cudaFree(dB.data);
    cudaFree(dC.data);
    bsk_bsr_free(&dA);
    free(ref);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    return err;
}

void spmm_gpu_repeat_same(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, int64_t N, bsk_dtype ct,
                          int reps, const char *want)
{
    const int64_t kr = op == BSK_OP_N ? A->cols : A->rows, cr = op == BSK_OP_N ? A->rows : A->cols;
    bsk_dense B = bsk_test_dense(kr, N, 0, A->dtype, bsk_test_rng()), C = bsk_test_dense_poison(cr, N, 0, ct);
    bsk_bsr dA;
    bsk_dense dB, dC;
    const int up = upload(A, &B, &C, &dA, &dB, &dC);
    const size_t bytes = spmm_dense_bytes(&C);
    void *h1 = malloc(bytes + 1), *h2 = malloc(bytes + 1);
    if (!up || !h1 || !h2) {
        t->failed++;
        fprintf(stderr, "  device setup failed\n");
    } else {
        for (int rep = 0; rep < reps; rep++) {
            CHECK_STATUS(bsk_spmm(ctx, op, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
            CHECK(bsk_cuda_memcpy(rep ? h2 : h1, dC.data, bytes, 0, 1) == BSK_SUCCESS);
            if (rep) CHECK(memcmp(h1, h2, bytes) == 0);
        }
        if (want) CHECK(strncmp(bsk_last_kernel(ctx), want, strlen(want)) == 0);
    }
    free(h1);
    free(h2);
    bsk_cuda_free(dB.data);
    bsk_cuda_free(dC.data);
    bsk_bsr_free(&dA);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
}

void spmm_gpu_knob_same(bsk_test_ctx *t, bsk_context *ctx, const bsk_bsr *A, int64_t N, int64_t padB, int64_t padC,
                        bsk_dtype ct, float alpha, int *knob, int v0, int v1, const char *want)
{
    bsk_dense B = bsk_test_dense(A->cols, N, padB, A->dtype, bsk_test_rng()), C = bsk_test_dense_poison(A->rows, N, padC, ct);
    bsk_bsr dA;
    bsk_dense dB, dC;
    const int up = upload(A, &B, &C, &dA, &dB, &dC);
    const size_t bytes = spmm_dense_bytes(&C);
    void *h[2] = {malloc(bytes + 1), malloc(bytes + 1)};
    if (!up || !h[0] || !h[1]) {
        t->failed++;
        fprintf(stderr, "  device setup failed\n");
    } else {
        for (int w = 0; w < 2; w++) {
            *knob = w ? v1 : v0;
            CHECK(bsk_cuda_memcpy(dC.data, C.data, bytes, 1, 0) == BSK_SUCCESS); /* poisoned again */
            CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, alpha, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
            CHECK(bsk_cuda_memcpy(h[w], dC.data, bytes, 0, 1) == BSK_SUCCESS);
            if (want) CHECK(strncmp(bsk_last_kernel(ctx), want, strlen(want)) == 0);
        }
        CHECK(memcmp(h[0], h[1], bytes) == 0);
    }
    *knob = v0;
    free(h[0]);
    free(h[1]);
    bsk_cuda_free(dB.data);
    bsk_cuda_free(dC.data);
    bsk_bsr_free(&dA);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
}

void spmm_gpu_cached_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_bsr *dA, int64_t N,
                          float alpha, float beta, const char *want, const int *prep_flag, int prep,
                          cudaStream_t capture)
{
    bsk_rng *r = bsk_test_rng();
    const int64_t rows = op == BSK_OP_T ? A->cols : A->rows, inner = op == BSK_OP_T ? A->rows : A->cols;
    bsk_dense B = bsk_test_dense(inner, N, 0, A->dtype, r);
    bsk_dense C = beta != 0.0f ? bsk_test_dense(rows, N, 0, A->dtype, r) : bsk_test_dense_poison(rows, N, 0, A->dtype);
    double *ref = (double *)malloc((size_t)(rows * N + 1) * sizeof(double));
    bsk_ref_spmm(op, alpha, A, &B, beta, beta != 0.0f ? &C : NULL, ref);
    bsk_dense dB = B, dC = C;
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    void *back = malloc(spmm_dense_bytes(&C) + 1);
    REQUIRE(ref && dB.data && dC.data && back);
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (capture) CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_STATUS(bsk_spmm(ctx, op, alpha, dA, &dB, beta, &dC), BSK_SUCCESS);
    CHECK(strcmp(bsk_last_kernel(ctx), want) == 0);
    CHECK(*prep_flag == prep);
    if (capture) {
        CHECK(cudaStreamEndCapture(capture, &g) == cudaSuccess);
        CHECK(g && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess);
    }
    for (int rep = 0; rep < (capture ? 3 : 1); rep++) {
        if (capture) {
            CHECK(cudaMemcpyAsync(dC.data, C.data, spmm_dense_bytes(&C), cudaMemcpyHostToDevice, capture) == cudaSuccess);
            CHECK(ge && cudaGraphLaunch(ge, capture) == cudaSuccess);
        }
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        CHECK(cudaMemcpy(back, dC.data, spmm_dense_bytes(&C), cudaMemcpyDeviceToHost) == cudaSuccess);
        bsk_dense got = C;
        got.data = back;
        CHECK_REL(bsk_rel_err_dense(&got, ref), bsk_tol(A->dtype, A->dtype));
    }
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    free(back);
    free(ref);
    cudaFree(dB.data);
    cudaFree(dC.data);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
}

void spmm_gpu_expect_prep(bsk_test_ctx *t, int out_prep, int want, const char *what)
{
    if (out_prep != want) {
        t->failed++;
        fprintf(stderr, "  %s: out_prep %d, want %d\n", what, out_prep, want);
    }
}

void spmm_gpu_expect_queue_zero(bsk_test_ctx *t, bsk_context *ctx, const void *queue, const char *what)
{
    unsigned q[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(queue != NULL);
    if (!queue) return;
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(cudaMemcpy(q, queue, sizeof q, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int i = 0; i < 8; i++)
        if (q[i]) {
            t->failed++;
            fprintf(stderr, "  %s: queue word %d = %u, want 0\n", what, i, q[i]);
        }
}

#endif
