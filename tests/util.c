/* util.c — test fixtures and float64 references, written from the definitions (not from the kernels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"
#include "../src/cpu/cpu_internal.h" /* bsk__cpu_parallel: the references' row loops on every core */

bsk_status bsk_test_gpu_probe(void)
{
    bsk_context *c = NULL;
    bsk_status s = bsk_create(&c, BSK_BACKEND_CUDA);
    if (!s) bsk_destroy(c);
    return s;
}

bsk_dense bsk_test_dense(int64_t rows, int64_t cols, int64_t pad, bsk_dtype t, bsk_rng *r)
{
    bsk_dense D = {rows, cols, cols + pad, t, BSK_MEM_HOST, NULL};
    int64_t n = rows * D.ld;
    D.data = malloc((size_t)(n ? n : 1) * bsk_dtype_size(t));
    for (int64_t i = 0; i < n; i++) bsk__store(D.data, t, i, bsk_rng_sym(r));
    return D;
}

bsk_dense bsk_test_dense_poison(int64_t rows, int64_t cols, int64_t pad, bsk_dtype t)
{
    bsk_dense D = {rows, cols, cols + pad, t, BSK_MEM_HOST, NULL};
    int64_t n = rows * D.ld;
    D.data = malloc((size_t)(n ? n : 1) * bsk_dtype_size(t));
    for (int64_t i = 0; i < n; i++) bsk__store(D.data, t, i, NAN);
    return D;
}

void bsk_test_dense_free(bsk_dense *D)
{
    free(D->data);
    D->data = NULL;
}

/* A(r, c) of the matrix the BSR describes (0 outside kept blocks). Builds a dense float64 copy. */
static double *bsr_dense64(const bsk_bsr *A)
{
    double *d = (double *)calloc((size_t)(A->rows * A->cols + 1), sizeof *d);
    int64_t mb = bsk_bsr_mb(A), bsz = (int64_t)A->block_rows * A->block_cols;
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            for (int32_t r = 0; r < A->block_rows; r++)
                for (int32_t c = 0; c < A->block_cols; c++) {
                    int64_t gr = i * A->block_rows + r, gc = (int64_t)A->col_idx[k] * A->block_cols + c;
                    if (gr < A->rows && gc < A->cols)
                        d[gr * A->cols + gc] = bsk__load(A->values, A->dtype, (int64_t)k * bsz + r * A->block_cols + c);
                }
    return d;
}

/* the reference (mag = 0) or its magnitude |alpha|·|op(A)|·|B| + |beta|·|C_in| (mag = 1): the dense float64 sum
   over the nonzero entries of op(A)'s row (a stored zero contributes nothing, as in the definition). One row per
   work item of the library's CPU thread helper (the GPU suites check hundreds of cases; a one-thread strided loop
   was most of their time). */
typedef struct {
    const double *a, *bt; /* op(A) m x k, B transposed n x k, both float64 */
    const bsk_dense *C_in;
    double alpha, beta;
    int64_t n, k;
    int mag;
    double *out;
} ref_spmm_job;

static void ref_spmm_row(void *arg, int64_t i, float *ws)
{
    const ref_spmm_job *J = (const ref_spmm_job *)arg;
    int64_t *nz = (int64_t *)(void *)ws; /* k + 1 indices: the workspace holds 2 (k + 1) floats */
    const double *ar = J->a + i * J->k;
    int64_t cnt = 0;
    for (int64_t p = 0; p < J->k; p++)
        if (ar[p] != 0.0) nz[cnt++] = p;
    for (int64_t j = 0; j < J->n; j++) {
        const double *br = J->bt + j * J->k;
        double acc = 0;
        for (int64_t q = 0; q < cnt; q++) {
            const double v = ar[nz[q]] * br[nz[q]];
            acc += J->mag ? fabs(v) : v;
        }
        const double c = J->beta != 0.0 ? J->beta * bsk__load(J->C_in->data, J->C_in->dtype, i * J->C_in->ld + j) : 0.0;
        J->out[i * J->n + j] = J->mag ? fabs(J->alpha) * acc + fabs(c) : J->alpha * acc + c;
    }
}

static void ref_spmm(bsk_op op, double alpha, const bsk_bsr *A, const bsk_dense *B, double beta, const bsk_dense *C_in,
                     double *out, int mag)
{
    const int64_t m = op == BSK_OP_N ? A->rows : A->cols, k = op == BSK_OP_N ? A->cols : A->rows, n = B->cols;
    double *a0 = bsr_dense64(A), *a = a0;
    if (op != BSK_OP_N && a0) { /* op(A) = A^T, m x k */
        a = (double *)malloc((size_t)(m * k + 1) * sizeof *a);
        for (int64_t i = 0; a && i < m; i++)
            for (int64_t p = 0; p < k; p++) a[i * k + p] = a0[p * A->cols + i];
    }
    double *bt = (double *)malloc((size_t)(n * k + 1) * sizeof *bt);
    for (int64_t p = 0; bt && p < k; p++)
        for (int64_t j = 0; j < n; j++) bt[j * k + p] = bsk__load(B->data, B->dtype, p * B->ld + j);
    ref_spmm_job job = {a, bt, C_in, alpha, beta, n, k, mag, out};
    const int ok = a && bt &&
                   bsk__cpu_parallel(bsk__cpu_threads(m, 2.0 * (double)m * (double)n * (double)k), m, ref_spmm_row, &job,
                                     2 * (k + 1)) == BSK_SUCCESS;
    if (!ok)
        for (int64_t i = 0; i < m * n; i++) out[i] = NAN; /* out of host memory: the check fails, never passes */
    if (a != a0) free(a);
    free(a0);
    free(bt);
}

void bsk_ref_spmm(bsk_op op, double alpha, const bsk_bsr *A, const bsk_dense *B, double beta,
                  const bsk_dense *C_in, double *out)
{
    ref_spmm(op, alpha, A, B, beta, C_in, out, 0);
}

void bsk_ref_spmm_mag(bsk_op op, double alpha, const bsk_bsr *A, const bsk_dense *B, double beta,
                      const bsk_dense *C_in, double *out)
{
    ref_spmm(op, alpha, A, B, beta, C_in, out, 1);
}

static void ref_sddmm(double alpha, const bsk_dense *X, const bsk_dense *Y, double beta, const bsk_bsr *in,
                      double *out, int mag)
{
    int64_t mb = bsk_bsr_mb(in), br = in->block_rows, bc = in->block_cols, bsz = br * bc;
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = in->row_ptr[i]; k < in->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t gr = i * br + r, gc = (int64_t)in->col_idx[k] * bc + c, idx = (int64_t)k * bsz + r * bc + c;
                    double acc = 0;
                    if (gr < in->rows && gc < in->cols)
                        for (int64_t p = 0; p < X->cols; p++)
                        {
                            const double v = (double)bsk__load(X->data, X->dtype, gr * X->ld + p) *
                                             (double)bsk__load(Y->data, Y->dtype, gc * Y->ld + p);
                            acc += mag ? fabs(v) : v;
                        }
                    double old = beta != 0.0 ? beta * bsk__load(in->values, in->dtype, idx) : 0.0;
                    if (mag) old = fabs(old);
                    out[idx] = (gr < in->rows && gc < in->cols) ? (mag ? fabs(alpha) : alpha) * acc + old : old;
                }
}

void bsk_ref_sddmm(double alpha, const bsk_dense *X, const bsk_dense *Y, double beta, const bsk_bsr *in,
                   double *out)
{
    ref_sddmm(alpha, X, Y, beta, in, out, 0);
}

void bsk_ref_sddmm_mag(double alpha, const bsk_dense *X, const bsk_dense *Y, double beta, const bsk_bsr *in,
                       double *out)
{
    ref_sddmm(alpha, X, Y, beta, in, out, 1);
}

double bsk_rel_err(const void *got, bsk_dtype t, const double *ref, int64_t n)
{
    double num = 0, den = 0, g2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = bsk__load(got, t, i);
        if (!isfinite(g) && isfinite(ref[i])) return NAN;
        double d = g - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        g2 += g * g;
    }
    return den > 0 ? sqrt(num / den) : sqrt(g2);
}

double bsk_rel_err_dense(const bsk_dense *got, const double *ref)
{
    double num = 0, den = 0, g2 = 0;
    for (int64_t i = 0; i < got->rows; i++)
        for (int64_t j = 0; j < got->cols; j++) {
            double g = bsk__load(got->data, got->dtype, i * got->ld + j), r = ref[i * got->cols + j];
            if (!isfinite(g) && isfinite(r)) return NAN;
            num += (g - r) * (g - r);
            den += r * r;
            g2 += g * g;
        }
    return den > 0 ? sqrt(num / den) : sqrt(g2);
}

double bsk_tol(bsk_dtype in, bsk_dtype out)
{
    /* fp32 accumulation; the output rounding dominates for half outputs */
    double t = in == BSK_F32 ? 1e-5 : 1e-3;
    if (out == BSK_F16) t = t < 2e-3 ? 2e-3 : t;
    if (out == BSK_BF16) t = t < 1e-2 ? 1e-2 : t;
    return t;
}
