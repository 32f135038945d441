/* test_reliability.c — the reliability suite (issue 6), through the public API against the float64
   references in tests/util.c:
     - NaN / Inf propagation: exactly the outputs whose reference is non-finite are non-finite, and every
       other output is finite and within tolerance (CPU and GPU);
     - randomized stress: hundreds of random SpMM / SDDMM problems (shapes, block sizes, densities,
       patterns, dtypes, ops, alpha/beta, padded leading dimensions), every element checked;
     - limits: inputs past the documented limits get BSK_ERR_OVERFLOW (never a crash, outputs untouched);
       a valid pattern with col_idx near the top of its range validates and transposes;
     - determinism: three runs on a skewed pattern agree bitwise.
   GPU tests run the same bodies with the operands copied to the device, and skip without a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness.h"
#include "../src/internal.h" /* bsk__load / bsk__store: element access of any dtype (as tests/util.c) */

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
#endif

/* ---------------------------------------------------------------- device plumbing */


static size_t dense_bytes(const bsk_dense *D) { return (size_t)(D->rows * D->ld) * bsk_dtype_size(D->dtype); }
static size_t bsr_value_bytes(const bsk_bsr *A)
{
    return (size_t)A->nnzb * (size_t)A->block_rows * (size_t)A->block_cols * bsk_dtype_size(A->dtype);
}

#ifdef BSK_WITH_CUDA
/* A device copy of host dense H (the whole rows*ld buffer, so ld padding travels too). */
static int dense_up(const bsk_dense *H, bsk_dense *D)
{
    size_t bytes = dense_bytes(H);
    void *p = NULL;
    *D = *H;
    D->mem = BSK_MEM_DEVICE;
    D->data = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) return 0;
    D->data = p;
    return !bytes || cudaMemcpy(p, H->data, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}
#endif

/* C = alpha·op(A)·B + beta·C with host operands A, B, C: on the CPU backend (gpu = 0), or (gpu = 1) on
   device copies, the whole C buffer (ld padding included) brought back into C. */
static bsk_status exec_spmm(bsk_context *ctx, int gpu, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                            float beta, bsk_dense *C)
{
    if (!gpu) return bsk_spmm(ctx, op, alpha, A, B, beta, C);
#ifdef BSK_WITH_CUDA
    bsk_bsr dA;
    bsk_dense dB, dC;
    memset(&dA, 0, sizeof dA);
    bsk_status s = bsk_bsr_clone(A, BSK_MEM_DEVICE, &dA);
    if (s) return s;
    int ok = dense_up(B, &dB) & dense_up(C, &dC);
    s = ok ? bsk_spmm(ctx, op, alpha, &dA, &dB, beta, &dC) : BSK_ERR_CUDA;
    if (!s) s = bsk_synchronize(ctx);
    if (!s && dense_bytes(C) && cudaMemcpy(C->data, dC.data, dense_bytes(C), cudaMemcpyDeviceToHost) != cudaSuccess)
        s = BSK_ERR_CUDA;
    if (dB.data) cudaFree(dB.data);
    if (dC.data) cudaFree(dC.data);
    bsk_bsr_free(&dA);
    return s;
#else
    (void)ctx; (void)op; (void)alpha; (void)A; (void)B; (void)beta; (void)C;
    return BSK_ERR_NO_DEVICE;
#endif
}

/* out.values = alpha·X·Yᵀ (sampled) + beta·out.values, host operands, CPU or device as above. */
static bsk_status exec_sddmm(bsk_context *ctx, int gpu, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                             bsk_bsr *out)
{
    if (!gpu) return bsk_sddmm(ctx, alpha, X, Y, beta, out);
#ifdef BSK_WITH_CUDA
    bsk_bsr dO;
    bsk_dense dX, dY;
    memset(&dO, 0, sizeof dO);
    bsk_status s = bsk_bsr_clone(out, BSK_MEM_DEVICE, &dO);
    if (s) return s;
    int ok = dense_up(X, &dX) & dense_up(Y, &dY);
    s = ok ? bsk_sddmm(ctx, alpha, &dX, &dY, beta, &dO) : BSK_ERR_CUDA;
    if (!s) s = bsk_synchronize(ctx);
    size_t vb = bsr_value_bytes(out);
    if (!s && vb && cudaMemcpy(out->values, dO.values, vb, cudaMemcpyDeviceToHost) != cudaSuccess) s = BSK_ERR_CUDA;
    if (dX.data) cudaFree(dX.data);
    if (dY.data) cudaFree(dY.data);
    bsk_bsr_free(&dO);
    return s;
#else
    (void)ctx; (void)alpha; (void)X; (void)Y; (void)beta; (void)out;
    return BSK_ERR_NO_DEVICE;
#endif
}

/* The kernels a test saw (bsk_last_kernel names are static storage). */
typedef struct { const char *name[24]; int count[24]; int n; } kernel_seen;
static void seen_add(kernel_seen *k, const char *name)
{
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->name[i], name)) { k->count[i]++; return; }
    if (k->n < 24) { k->name[k->n] = name; k->count[k->n++] = 1; }
}
static void seen_print(const char *what, const kernel_seen *k)
{
    printf("  %s kernels:", what);
    for (int i = 0; i < k->n; i++) printf(" %s x%d", k->name[i], k->count[i]);
    printf("\n");
}

static const char *dt_name(bsk_dtype t) { return t == BSK_F32 ? "f32" : t == BSK_F16 ? "f16" : "bf16"; }

/* ---------------------------------------------------------------- checks */

/* Element (i, j) of got (rows x cols, ld) against ref (packed rows x cols):
   ref NaN -> got NaN; ref ±Inf -> got non-finite (Inf·0 may make NaN); ref finite -> got finite, and the
   normwise error over the finite elements within tol. Counts non-finite references into *nonfinite. */
static int check_special(bsk_test_ctx *t, const void *got, bsk_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                         const double *ref, double tol, int64_t *nonfinite, const char *what)
{
    double num = 0, den = 0, g2 = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double g = bsk__load(got, dt, i * ld + j), r = ref[i * cols + j];
            int ok;
            if (isnan(r)) ok = isnan(g);
            else if (isinf(r)) ok = !isfinite(g);
            else {
                ok = isfinite(g);
                if (ok) { num += (g - r) * (g - r); den += r * r; g2 += g * g; }
            }
            if (!isfinite(r)) (*nonfinite)++;
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s: element (%lld, %lld) = %g, reference %g\n", what, (long long)i, (long long)j, g, r);
        }
    double err = den > 0 ? sqrt(num / den) : sqrt(g2);
    if (bad) { t->failed++; fprintf(stderr, "  %s: %lld elements with the wrong finiteness\n", what, (long long)bad); }
    if (!(err <= tol)) { t->failed++; fprintf(stderr, "  %s: rel err over finite elements %.3e > %.1e\n", what, err, tol); }
    return !bad && err <= tol;
}

/* Every element finite and close: normwise error <= tol, and each |got - ref| <= 4·tol·(|ref| + rms(ref))
   (a single wrong element would hide in a normwise figure over 10^5 elements). */
static int check_close(const void *got, bsk_dtype dt, int64_t rows, int64_t cols, int64_t ld, const double *ref,
                       double tol, char *why, size_t whylen)
{
    double num = 0, den = 0, g2 = 0;
    for (int64_t i = 0; i < rows * cols; i++) den += ref[i] * ref[i];
    double rms = rows * cols > 0 ? sqrt(den / (double)(rows * cols)) : 0.0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double g = bsk__load(got, dt, i * ld + j), r = ref[i * cols + j];
            if (!isfinite(g) || fabs(g - r) > 4 * tol * (fabs(r) + rms) + 1e-30) {
                snprintf(why, whylen, "element (%lld, %lld) = %g, reference %g", (long long)i, (long long)j, g, r);
                return 0;
            }
            num += (g - r) * (g - r);
            g2 += g * g;
        }
    double err = den > 0 ? sqrt(num / den) : sqrt(g2);
    if (!(err <= tol)) { snprintf(why, whylen, "rel err %.3e > %.1e", err, tol); return 0; }
    return 1;
}

/* Kept entries inside the matrix must be non-zero for the Inf tests (the reference skips zero A entries,
   a kernel would form Inf·0 = NaN): half rounding could in principle produce a zero. */
static void nonzero_values(bsk_bsr *A)
{
    int64_t mb = bsk_bsr_mb(A), bsz = (int64_t)A->block_rows * A->block_cols;
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            for (int32_t r = 0; r < A->block_rows; r++)
                for (int32_t c = 0; c < A->block_cols; c++) {
                    int64_t gr = i * A->block_rows + r, gc = (int64_t)A->col_idx[k] * A->block_cols + c;
                    int64_t at = (int64_t)k * bsz + (int64_t)r * A->block_cols + c;
                    if (gr < A->rows && gc < A->cols && bsk__load(A->values, A->dtype, at) == 0.0f)
                        bsk__store(A->values, A->dtype, at, 0.5f);
                }
}

/* Stores v into a random kept entry of A inside the matrix; 0 when A has no blocks. */
static int poke_bsr(bsk_bsr *A, float v, bsk_rng *rng)
{
    if (A->nnzb == 0) return 0;
    int32_t k = (int32_t)bsk_rng_int(rng, 0, A->nnzb - 1);
    int64_t i = 0;
    while (A->row_ptr[i + 1] <= k) i++;
    int64_t rmax = A->rows - i * A->block_rows, cmax = A->cols - (int64_t)A->col_idx[k] * A->block_cols;
    if (rmax > A->block_rows) rmax = A->block_rows;
    if (cmax > A->block_cols) cmax = A->block_cols;
    int64_t r = bsk_rng_int(rng, 0, rmax - 1), c = bsk_rng_int(rng, 0, cmax - 1);
    bsk__store(A->values, A->dtype, (int64_t)k * A->block_rows * A->block_cols + r * A->block_cols + c, v);
    return 1;
}

static void poke_dense(bsk_dense *D, float v, bsk_rng *rng)
{
    int64_t i = bsk_rng_int(rng, 0, D->rows - 1), j = bsk_rng_int(rng, 0, D->cols - 1);
    bsk__store(D->data, D->dtype, i * D->ld + j, v);
}

/* ---------------------------------------------------------------- 1. NaN / Inf propagation */

static void nan_inf_body(bsk_test_ctx *t, int gpu)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, gpu ? BSK_BACKEND_CUDA : BSK_BACKEND_CPU));
    kernel_seen seen = {{0}, {0}, 0};
    static const int32_t blocks[] = {16, 32, 64, 128};
    static const bsk_dtype dts[] = {BSK_F32, BSK_F16, BSK_BF16};
    char what[160];
    for (int bi = 0; bi < 4; bi++)
        for (int di = 0; di < 3; di++)
            for (int op = 0; op < 2; op++) {
                int32_t b = blocks[bi];
                bsk_dtype in = dts[di];
                int64_t arows = b + b / 2 + 3, acols = b + b / 4 + 5; /* partial last block row and column */
                int64_t m = op ? acols : arows, k = op ? arows : acols, n = 37;
                bsk_bsr A;
                bsk_status s = bsk_bsr_random(arows, acols, b, b, 0.8, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), in, &A);
                CHECK_STATUS(s, BSK_SUCCESS);
                if (s) continue;
                nonzero_values(&A);
                int has_nan = poke_bsr(&A, NAN, rng);
                bsk_dense B = bsk_test_dense(k, n, 3, in, rng);
                poke_dense(&B, INFINITY, rng);
                bsk_dense C = bsk_test_dense_poison(m, n, 2, BSK_F32);
                double *ref = (double *)malloc((size_t)(m * n) * sizeof *ref);
                bsk_ref_spmm((bsk_op)op, 1.5, &A, &B, 0.0, NULL, ref);
                snprintf(what, sizeof what, "%s spmm op %c block %d %s->f32", gpu ? "gpu" : "cpu", op ? 'T' : 'N', b,
                         dt_name(in));
                s = exec_spmm(ctx, gpu, (bsk_op)op, 1.5f, &A, &B, 0.0f, &C);
                CHECK_STATUS(s, BSK_SUCCESS);
                if (!s) {
                    seen_add(&seen, bsk_last_kernel(ctx));
                    int64_t nonfinite = 0;
                    if (!check_special(t, C.data, BSK_F32, m, n, C.ld, ref, bsk_tol(in, BSK_F32), &nonfinite, what))
                        fprintf(stderr, "    (%s ran %s)\n", what, bsk_last_kernel(ctx));
                    CHECK(!has_nan || nonfinite >= n); /* the NaN's output row (or column of Aᵀ) is all NaN */
                }
                free(ref);
                bsk_test_dense_free(&B);
                bsk_test_dense_free(&C);
                bsk_bsr_free(&A);
            }
    /* SDDMM: a NaN in X poisons every sampled entry of its row, an Inf in Y gives ±Inf in its column */
    for (int bi = 0; bi < 4; bi++)
        for (int di = 0; di < 3; di++)
            for (int oi = 0; oi < 2; oi++) {
                int32_t b = blocks[bi];
                bsk_dtype in = dts[di], odt = oi ? in : BSK_F32;
                if (oi && in == BSK_F32) continue;
                int64_t m = b + b / 2 + 3, kk = b + b / 4 + 5, d = 40;
                bsk_bsr O;
                bsk_status s = bsk_bsr_random(m, kk, b, b, 0.8, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), odt, &O);
                CHECK_STATUS(s, BSK_SUCCESS);
                if (s) continue;
                int64_t nv = O.nnzb * b * b;
                for (int64_t i = 0; i < nv; i++) bsk__store(O.values, odt, i, NAN); /* beta = 0: never read */
                bsk_dense X = bsk_test_dense(m, d, 1, in, rng), Y = bsk_test_dense(kk, d, 2, in, rng);
                poke_dense(&X, NAN, rng);
                poke_dense(&Y, INFINITY, rng);
                double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref);
                bsk_ref_sddmm(0.75, &X, &Y, 0.0, &O, ref);
                snprintf(what, sizeof what, "%s sddmm block %d %s->%s", gpu ? "gpu" : "cpu", b, dt_name(in), dt_name(odt));
                s = exec_sddmm(ctx, gpu, 0.75f, &X, &Y, 0.0f, &O);
                CHECK_STATUS(s, BSK_SUCCESS);
                if (!s) {
                    if (O.nnzb) seen_add(&seen, bsk_last_kernel(ctx));
                    int64_t nonfinite = 0;
                    if (!check_special(t, O.values, odt, 1, nv, nv, ref, bsk_tol(in, odt), &nonfinite, what))
                        fprintf(stderr, "    (%s ran %s)\n", what, bsk_last_kernel(ctx));
                }
                free(ref);
                bsk_test_dense_free(&X);
                bsk_test_dense_free(&Y);
                bsk_bsr_free(&O);
            }
    if (gpu) seen_print("nan/inf", &seen);
    bsk_destroy(ctx);
}

BSK_TEST(rel_nan_inf_propagate_cpu) { nan_inf_body(t, 0); }
BSK_TEST(gpu_rel_nan_inf_propagate)
{
    NEED_GPU();
    nan_inf_body(t, 1);
}

/* ---------------------------------------------------------------- 2. randomized stress */

static const int32_t stress_blocks[] = {8, 16, 24, 32, 64, 128};

/* tc = 1: problems the tensor-core kernels take (square blocks 16..128 — mostly 64 / 128, the Hopper
   sizes —, 16-bit inputs, leading dimensions that keep TMA's 16-byte rules); tc = 0: anything. */
static void pick_block(bsk_rng *rng, int tc, int32_t *br, int32_t *bc)
{
    if (tc) {
        *br = *bc = stress_blocks[bsk_rng_uniform(rng) < 0.75 ? bsk_rng_int(rng, 4, 5) : bsk_rng_int(rng, 1, 3)];
        if (*br == 24) *br = *bc = 32;
        return;
    }
    *br = stress_blocks[bsk_rng_int(rng, 0, 5)];
    *bc = bsk_rng_uniform(rng) < 0.8 ? *br : stress_blocks[bsk_rng_int(rng, 0, 5)];
}
/* a leading-dimension pad: tc keeps ld a multiple of 8 elements when the columns are */
static int64_t pick_pad(bsk_rng *rng, int tc, int64_t cols)
{
    if (tc) return cols % 8 ? 8 - cols % 8 : bsk_rng_uniform(rng) < 0.3 ? 8 : 0;
    return bsk_rng_uniform(rng) < 0.3 ? bsk_rng_int(rng, 1, 9) : 0;
}
static double pick_density(bsk_rng *rng)
{
    double u = bsk_rng_uniform(rng);
    return u < 0.1 ? 0.0 : u < 0.2 ? 1.0 : bsk_rng_uniform(rng);
}
static bsk_dtype pick_dtype(bsk_rng *rng) { return (bsk_dtype)bsk_rng_int(rng, 0, 2); }
static bsk_dtype pick_dtype16(bsk_rng *rng) { return bsk_rng_int(rng, 0, 1) ? BSK_F16 : BSK_BF16; }

/* One random SpMM problem; returns 1 when it passed. */
static int stress_spmm_one(bsk_test_ctx *t, bsk_context *ctx, int gpu, int tc, int64_t maxdim, kernel_seen *seen)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_op op = (bsk_op)bsk_rng_int(rng, 0, 1);
    int64_t m = bsk_rng_int(rng, 1, maxdim), n = bsk_rng_int(rng, 1, maxdim), k = bsk_rng_int(rng, 1, maxdim);
    int32_t br, bc;
    pick_block(rng, tc, &br, &bc);
    double density = pick_density(rng);
    bsk_pattern pat = (bsk_pattern)bsk_rng_int(rng, 0, 1);
    bsk_dtype in = tc ? pick_dtype16(rng) : pick_dtype(rng), out = pick_dtype(rng);
    float alpha = bsk_rng_uniform(rng) < 0.05 ? 0.0f : 2.0f * bsk_rng_sym(rng);
    float beta = bsk_rng_uniform(rng) < 0.4 ? 0.0f : bsk_rng_sym(rng);
    int64_t padb = pick_pad(rng, tc, n);
    int64_t padc = pick_pad(rng, tc, n);
    int64_t arows = op == BSK_OP_N ? m : k, acols = op == BSK_OP_N ? k : m;
    bsk_bsr A;
    bsk_status s = bsk_bsr_random(arows, acols, br, bc, density, pat, bsk_rng_next(rng), in, &A);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s) return 0;
    bsk_dense B = bsk_test_dense(k, n, padb, in, rng);
    bsk_dense C = beta != 0.0f ? bsk_test_dense(m, n, padc, out, rng) : bsk_test_dense_poison(m, n, padc, out);
    size_t cb = dense_bytes(&C);
    void *C0 = malloc(cb ? cb : 1);
    memcpy(C0, C.data, cb);
    double *ref = (double *)malloc((size_t)(m * n) * sizeof *ref);
    bsk_dense Cin = C;
    Cin.data = C0;
    bsk_ref_spmm(op, alpha, &A, &B, beta, beta != 0.0f ? &Cin : NULL, ref);
    char why[160] = "";
    s = exec_spmm(ctx, gpu, op, alpha, &A, &B, beta, &C);
    int ok = s == BSK_SUCCESS;
    if (!ok) snprintf(why, sizeof why, "status %s", bsk_status_string(s));
    if (ok) {
        seen_add(seen, bsk_last_kernel(ctx));
        ok = check_close(C.data, out, m, n, C.ld, ref, bsk_tol(in, out), why, sizeof why);
        size_t es = bsk_dtype_size(out);
        for (int64_t i = 0; ok && i < m; i++) /* the ld gap keeps its bytes */
            if (memcmp((char *)C.data + (size_t)(i * C.ld + n) * es, (char *)C0 + (size_t)(i * C.ld + n) * es,
                       (size_t)padc * es)) {
                snprintf(why, sizeof why, "ld padding of row %lld written", (long long)i);
                ok = 0;
            }
    }
    if (!ok) {
        t->failed++;
        fprintf(stderr, "  spmm op %c m %lld n %lld k %lld block %dx%d density %.3f %s %s->%s alpha %g beta %g padb %lld padc %lld"
                        " kernel %s: %s\n", op ? 'T' : 'N', (long long)m, (long long)n, (long long)k, br, bc, density,
                pat ? "skewed" : "uniform", dt_name(in), dt_name(out), alpha, beta, (long long)padb, (long long)padc,
                bsk_last_kernel(ctx), why);
    }
    free(ref);
    free(C0);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&A);
    return ok;
}

/* One random SDDMM problem; returns 1 when it passed. */
static int stress_sddmm_one(bsk_test_ctx *t, bsk_context *ctx, int gpu, int tc, int64_t maxdim, kernel_seen *seen)
{
    bsk_rng *rng = bsk_test_rng();
    int64_t m = bsk_rng_int(rng, 1, maxdim), kk = bsk_rng_int(rng, 1, maxdim), d = bsk_rng_int(rng, 1, maxdim / 2 + 1);
    int32_t br, bc;
    pick_block(rng, tc, &br, &bc);
    double density = pick_density(rng);
    bsk_pattern pat = (bsk_pattern)bsk_rng_int(rng, 0, 1);
    bsk_dtype in = tc ? pick_dtype16(rng) : pick_dtype(rng), odt = bsk_rng_int(rng, 0, 1) ? in : BSK_F32;
    float alpha = 2.0f * bsk_rng_sym(rng);
    float beta = bsk_rng_uniform(rng) < 0.4 ? 0.0f : bsk_rng_sym(rng);
    int64_t padx = pick_pad(rng, tc, d);
    int64_t pady = pick_pad(rng, tc, d);
    bsk_bsr O;
    bsk_status s = bsk_bsr_random(m, kk, br, bc, density, pat, bsk_rng_next(rng), odt, &O);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s) return 0;
    int64_t nv = O.nnzb * br * bc;
    /* beta = 0: poison every value (padding included: it must come back 0); else keep the random values
       (zero padding, as the BSR contract asks) */
    if (beta == 0.0f)
        for (int64_t i = 0; i < nv; i++) bsk__store(O.values, odt, i, NAN);
    bsk_dense X = bsk_test_dense(m, d, padx, in, rng), Y = bsk_test_dense(kk, d, pady, in, rng);
    double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref);
    bsk_ref_sddmm(alpha, &X, &Y, beta, &O, ref);
    char why[160] = "";
    s = exec_sddmm(ctx, gpu, alpha, &X, &Y, beta, &O);
    int ok = s == BSK_SUCCESS;
    if (!ok) snprintf(why, sizeof why, "status %s", bsk_status_string(s));
    if (ok) {
        if (nv) seen_add(seen, bsk_last_kernel(ctx));
        ok = check_close(O.values, odt, 1, nv, nv, ref, bsk_tol(in, odt), why, sizeof why);
    }
    if (!ok) {
        t->failed++;
        fprintf(stderr, "  sddmm m %lld k %lld d %lld block %dx%d density %.3f %s %s->%s alpha %g beta %g padx %lld pady %lld"
                        " kernel %s: %s\n", (long long)m, (long long)kk, (long long)d, br, bc, density,
                pat ? "skewed" : "uniform", dt_name(in), dt_name(odt), alpha, beta, (long long)padx, (long long)pady,
                bsk_last_kernel(ctx), why);
    }
    free(ref);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
    bsk_bsr_free(&O);
    return ok;
}

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void stress_body(bsk_test_ctx *t, int gpu, int tc, int nspmm, int nsddmm, int64_t maxdim)
{
    nspmm *= bsk_test_stress_scale();
    nsddmm *= bsk_test_stress_scale();
    bsk_context *ctx = NULL; /* one context for the whole loop */
    REQUIRE_OK(bsk_create(&ctx, gpu ? BSK_BACKEND_CUDA : BSK_BACKEND_CPU));
    kernel_seen ks = {{0}, {0}, 0}, kd = {{0}, {0}, 0};
    double t0 = now_s();
    int pass_s = 0, pass_d = 0, fails = 0;
    for (int i = 0; i < nspmm && fails < 8; i++) {
        int ok = stress_spmm_one(t, ctx, gpu, tc, maxdim, &ks);
        pass_s += ok;
        fails += !ok;
    }
    for (int i = 0; i < nsddmm && fails < 8; i++) {
        int ok = stress_sddmm_one(t, ctx, gpu, tc, maxdim, &kd);
        pass_d += ok;
        fails += !ok;
    }
    printf("  %s%s stress: %d/%d spmm, %d/%d sddmm problems passed in %.2f s\n", gpu ? "gpu" : "cpu", tc ? " tensor-core" : "", pass_s, nspmm,
           pass_d, nsddmm, now_s() - t0);
    seen_print("spmm", &ks);
    seen_print("sddmm", &kd);
    if (fails >= 8) fprintf(stderr, "  stopped after %d failures\n", fails);
    bsk_device_info info;
    if (tc && gpu && bsk_device_query(&info) == BSK_SUCCESS && info.cc_major == 9 && info.cc_minor == 0) {
        int hopper = 0; /* the loop must have reached the Hopper kernels, not only the fallbacks */
        for (int i = 0; i < ks.n; i++) hopper += strncmp(ks.name[i], "hopper-", 7) == 0;
        CHECK(hopper > 0);
    }
    bsk_destroy(ctx);
}

BSK_TEST(rel_stress_random_cpu) { stress_body(t, 0, 0, 150, 60, 180); }
BSK_TEST(gpu_rel_stress_random)
{
    NEED_GPU();
    stress_body(t, 1, 0, 320, 100, 300);
}
/* The same over the shapes the tensor-core kernels (Hopper wgmma, mma.sync) take, up to 700 per side. */
BSK_TEST(gpu_rel_stress_tensor_core)
{
    NEED_GPU();
    stress_body(t, 1, 1, 300, 120, 700);
}

/* ---------------------------------------------------------------- 3. limits */

BSK_TEST(rel_limits)
{
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    const int64_t big = (int64_t)1 << 31; /* INT32_MAX + 1 */
    int32_t rp[4] = {0, 1, 1, 1}, ci[2] = {0, 0};
    float vals[64], cbuf[64], bbuf[64];
    for (int i = 0; i < 64; i++) { vals[i] = 1.0f; bbuf[i] = 1.0f; cbuf[i] = 42.0f; }
    /* a valid small A (2 x 2 blocks of 4, one block) and B, C to pair with broken operands */
    bsk_bsr A0 = {8, 8, 4, 4, 1, rp, ci, vals, BSK_F32, BSK_MEM_HOST};
    rp[2] = 1; rp[3] = 1;
    bsk_dense B0 = {8, 4, 4, BSK_F32, BSK_MEM_HOST, bbuf}, C0 = {8, 4, 4, BSK_F32, BSK_MEM_HOST, cbuf};
    CHECK_STATUS(bsk_bsr_validate(&A0), BSK_SUCCESS);

    /* BSR descriptors past the limits: validate, stats, transpose index, SpMM, SDDMM all say OVERFLOW
       before touching the (small) arrays, and C / stats stay untouched */
    for (int c = 0; c < 6; c++) {
        bsk_bsr A = A0;
        switch (c) {
        case 0: A.rows = big; break;
        case 1: A.cols = big; break;
        case 2: A.nnzb = big; break;                      /* nnzb > INT32_MAX */
        case 3: A.block_rows = 1025; break;
        case 4: A.block_cols = 1025; break;
        case 5: A.rows = INT64_MAX; A.cols = INT64_MAX; break;
        }
        CHECK_STATUS(bsk_bsr_validate(&A), BSK_ERR_OVERFLOW);
        bsk_bsr_stats st;
        memset(&st, 0x5a, sizeof st);
        CHECK_STATUS(bsk_bsr_stats_get(&A, &st), BSK_ERR_OVERFLOW);
        CHECK(((unsigned char *)&st)[0] == 0x5a);
        int32_t tp[8] = {0}, tr[8] = {0}, tb[8] = {0};
        CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, tr, tb), BSK_ERR_OVERFLOW);
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B0, 0.0f, &C0), BSK_ERR_OVERFLOW);
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &A, &B0, 0.0f, &C0), BSK_ERR_OVERFLOW);
        bsk_dense X = {8, 4, 4, BSK_F32, BSK_MEM_HOST, bbuf};
        CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &X, &X, 0.0f, &A), BSK_ERR_OVERFLOW);
        bsk_bsr cl;
        memset(&cl, 0, sizeof cl);
        CHECK_STATUS(bsk_bsr_clone(&A, BSK_MEM_HOST, &cl), BSK_ERR_OVERFLOW);
        CHECK(cl.row_ptr == NULL);
    }
    for (int i = 0; i < 64; i++) CHECK(cbuf[i] == 42.0f);

    /* dense descriptors past the limits: rows/cols = 2^31, ld·rows >= 2^62 (exactly 2^62 and far past) */
    for (int c = 0; c < 5; c++) {
        bsk_dense B = B0;
        switch (c) {
        case 0: B.rows = big; break;
        case 1: B.cols = big; B.ld = big; break;
        case 2: B.rows = (int64_t)1 << 30; B.ld = (int64_t)1 << 32; break; /* ld·rows = 2^62 */
        case 3: B.rows = INT32_MAX; B.ld = INT64_MAX / 2; break;
        case 4: B.rows = INT32_MAX; B.ld = INT64_MAX; break;
        }
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A0, &B, 0.0f, &C0), BSK_ERR_OVERFLOW);
        bsk_dense C = B; /* the same as output */
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A0, &B0, 0.0f, &C), BSK_ERR_OVERFLOW);
        CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &B, &B0, 0.0f, &A0), BSK_ERR_OVERFLOW);
        bsk_bsr o;
        memset(&o, 0, sizeof o);
        CHECK_STATUS(bsk_bsr_from_dense(&B, 4, 4, 0.0f, &o), BSK_ERR_OVERFLOW);
        CHECK(o.row_ptr == NULL);
    }
    /* just under the dense limit (ld·rows = 2^62 - 2^30) passes the size checks: the shapes are what fail */
    {
        bsk_dense B = B0;
        B.rows = (int64_t)1 << 30;
        B.ld = ((int64_t)1 << 32) - 1;
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A0, &B, 0.0f, &C0), BSK_ERR_SHAPE_MISMATCH);
    }
    for (int i = 0; i < 64; i++) CHECK(cbuf[i] == 42.0f);

    /* builders past the limits */
    bsk_bsr o;
    memset(&o, 0, sizeof o);
    CHECK_STATUS(bsk_bsr_random(big, 16, 16, 16, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_random(16, big, 16, 16, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_random(16, 16, 1025, 16, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_from_csr(big, 16, 1, rp, ci, vals, BSK_F32, 4, 4, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_from_csr(16, 16, big, rp, ci, vals, BSK_F32, 4, 4, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_from_coo(16, big, 1, ci, ci, vals, BSK_F32, 4, 4, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_from_coo(16, 16, 1, ci, ci, vals, BSK_F32, 4, 1025, &o), BSK_ERR_OVERFLOW);
    CHECK(o.row_ptr == NULL && o.values == NULL);

    /* a valid pattern at the top of the index range: cols = 2^31 - 1, block 1024, so nb = 2^21 (the last
       block column partial); one block per block row at column nb - 1 */
    {
        const int64_t cols = INT32_MAX, rows = 1030; /* 2 block rows, the second partial */
        const int32_t b = 1024;
        int32_t trp[3] = {0, 1, 2}, tci[2];
        float *v = (float *)calloc((size_t)2 * b * b, sizeof *v);
        REQUIRE(v);
        bsk_bsr T = {rows, cols, b, b, 2, trp, tci, v, BSK_F32, BSK_MEM_HOST};
        int64_t nb = bsk_bsr_nb(&T);
        CHECK(nb == ((int64_t)1 << 21));
        CHECK(bsk_bsr_mb(&T) == 2);
        tci[0] = tci[1] = (int32_t)(nb - 1);
        CHECK_STATUS(bsk_bsr_validate(&T), BSK_SUCCESS);
        bsk_bsr_stats st;
        CHECK_STATUS(bsk_bsr_stats_get(&T, &st), BSK_SUCCESS);
        CHECK(st.mb == 2 && st.nb == nb && st.nnzb == 2 && st.row_min == 1 && st.row_max == 1 && st.empty_rows == 0);
        CHECK(fabs(st.density - 2.0 / (2.0 * (double)nb)) < 1e-15 && st.row_mean == 1.0);
        /* the transpose index: caller arrays of nb + 1 and nnzb entries (8 MiB), no library allocation */
        int32_t *tp = (int32_t *)malloc((size_t)(nb + 1) * sizeof *tp), tr[2] = {-1, -1}, tb[2] = {-1, -1};
        REQUIRE(tp);
        CHECK_STATUS(bsk_bsr_transpose_index(&T, tp, tr, tb), BSK_SUCCESS);
        CHECK(tp[0] == 0 && tp[nb - 1] == 0 && tp[nb] == 2);
        CHECK(tr[0] == 0 && tr[1] == 1 && tb[0] == 0 && tb[1] == 1);
        free(tp);
        /* one past the top, and INT32_MAX itself: structure errors, not crashes */
        tci[1] = (int32_t)nb;
        CHECK_STATUS(bsk_bsr_validate(&T), BSK_ERR_INVALID_BSR);
        tci[1] = INT32_MAX;
        CHECK_STATUS(bsk_bsr_validate(&T), BSK_ERR_INVALID_BSR);
        CHECK_STATUS(bsk_bsr_stats_get(&T, &st), BSK_ERR_INVALID_BSR);
        /* SpMM with this A would need a B of 2^31 - 1 rows: a B of the wrong height is a shape error */
        bsk_dense B = {16, 4, 4, BSK_F32, BSK_MEM_HOST, bbuf}, C = {rows, 4, 4, BSK_F32, BSK_MEM_HOST, cbuf};
        tci[1] = (int32_t)(nb - 1);
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &T, &B, 0.0f, &C), BSK_ERR_SHAPE_MISMATCH);
        free(v);
    }
    for (int i = 0; i < 64; i++) CHECK(cbuf[i] == 42.0f);
    bsk_destroy(ctx);
}

/* ---------------------------------------------------------------- 4. determinism */

static void determinism_body(bsk_test_ctx *t, int gpu)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, gpu ? BSK_BACKEND_CUDA : BSK_BACKEND_CPU));
    /* (block, input dtype): SIMT (f32), tensor-core and Hopper shapes (f16 / bf16) on the GPU */
    static const struct { int32_t b; bsk_dtype in; } cfg[] = {{16, BSK_F16}, {32, BSK_F32}, {64, BSK_BF16}};
    kernel_seen seen = {{0}, {0}, 0};
    for (int ci = 0; ci < 3; ci++) {
        int32_t b = cfg[ci].b;
        bsk_dtype in = cfg[ci].in;
        /* skewed: a few block rows far longer than the mean */
        int64_t arows = b == 64 ? 64 * 12 + 5 : (int64_t)b * 24 + 5, acols = b == 64 ? 64 * 10 + 7 : (int64_t)b * 20 + 7;
        bsk_bsr A;
        bsk_status s = bsk_bsr_random(arows, acols, b, b, 0.3, BSK_PATTERN_SKEWED, bsk_rng_next(rng), in, &A);
        CHECK_STATUS(s, BSK_SUCCESS);
        if (s) continue;
        for (int op = 0; op < 2; op++) {
            int64_t m = op ? acols : arows, k = op ? arows : acols, n = 72;
            bsk_dense B = bsk_test_dense(k, n, 0, in, rng);
            bsk_dense C = bsk_test_dense_poison(m, n, 0, BSK_F32);
            size_t cb = dense_bytes(&C);
            void *runs[3];
            double *ref = (double *)malloc((size_t)(m * n) * sizeof *ref);
            bsk_ref_spmm((bsk_op)op, 1.0, &A, &B, 0.0, NULL, ref);
            for (int r = 0; r < 3; r++) {
                runs[r] = malloc(cb);
                for (int64_t i = 0; i < m * n; i++) ((float *)C.data)[i] = NAN;
                s = exec_spmm(ctx, gpu, (bsk_op)op, 1.0f, &A, &B, 0.0f, &C);
                CHECK_STATUS(s, BSK_SUCCESS);
                memcpy(runs[r], C.data, cb);
            }
            seen_add(&seen, bsk_last_kernel(ctx));
            CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(in, BSK_F32));
            if (memcmp(runs[0], runs[1], cb) || memcmp(runs[0], runs[2], cb)) {
                t->failed++;
                fprintf(stderr, "  spmm op %c block %d %s (%s): runs differ\n", op ? 'T' : 'N', b, dt_name(in),
                        bsk_last_kernel(ctx));
            }
            for (int r = 0; r < 3; r++) free(runs[r]);
            free(ref);
            bsk_test_dense_free(&B);
            bsk_test_dense_free(&C);
        }
        /* SDDMM on the same (skewed) pattern, output F32 */
        {
            int64_t d = 80, nv = A.nnzb * b * b;
            bsk_bsr O;
            REQUIRE_OK(bsk_bsr_random(arows, acols, b, b, 0.3, BSK_PATTERN_SKEWED, bsk_rng_next(rng), BSK_F32, &O));
            bsk_dense X = bsk_test_dense(arows, d, 0, in, rng), Y = bsk_test_dense(acols, d, 0, in, rng);
            nv = O.nnzb * b * b;
            size_t vb = bsr_value_bytes(&O);
            void *runs[3];
            for (int r = 0; r < 3; r++) {
                runs[r] = malloc(vb ? vb : 1);
                for (int64_t i = 0; i < nv; i++) ((float *)O.values)[i] = NAN;
                s = exec_sddmm(ctx, gpu, 1.0f, &X, &Y, 0.0f, &O);
                CHECK_STATUS(s, BSK_SUCCESS);
                memcpy(runs[r], O.values, vb);
            }
            if (nv) seen_add(&seen, bsk_last_kernel(ctx));
            double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref);
            bsk_ref_sddmm(1.0, &X, &Y, 0.0, &O, ref);
            CHECK_REL(bsk_rel_err(O.values, BSK_F32, ref, nv), bsk_tol(in, BSK_F32));
            if (memcmp(runs[0], runs[1], vb) || memcmp(runs[0], runs[2], vb)) {
                t->failed++;
                fprintf(stderr, "  sddmm block %d %s (%s): runs differ\n", b, dt_name(in), bsk_last_kernel(ctx));
            }
            for (int r = 0; r < 3; r++) free(runs[r]);
            free(ref);
            bsk_test_dense_free(&X);
            bsk_test_dense_free(&Y);
            bsk_bsr_free(&O);
        }
        bsk_bsr_free(&A);
    }
    if (gpu) seen_print("determinism", &seen);
    bsk_destroy(ctx);
}

BSK_TEST(rel_determinism_cpu) { determinism_body(t, 0); }
BSK_TEST(gpu_rel_determinism)
{
    NEED_GPU();
    determinism_body(t, 1);
}
