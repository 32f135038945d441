/* test_training.c — the gradients of a block-sparse linear layer, checked by finite differences.

   Layer: Y = W·X with W a BSR M x K (its stored values are the parameters) and X dense K x N. Loss
   L(W, X) = Σ_{i,n} G[i][n]·(W·X)[i][n] for a fixed random G (M x N), so dL/dY = G and
     dL/dX = Wᵀ·G                       — bsk_spmm(BSK_OP_T, W, B := G)
     dL/dW = (G·Xᵀ) on W's kept entries — bsk_sddmm(X := G, Y := X, out := W's pattern)
   The library's two results must match central finite differences of L computed in float64 straight
   from the definition (not from the kernels), over every kept entry of W and every entry of X, to a tight
   per-element tolerance. L is linear in each single entry, so the central difference has no truncation
   error; the step is a power of two so x ± h is exact. The terms of L that do not depend on the perturbed
   entry cancel exactly in (L(+h) − L(−h)): for a W entry in row i only row i's terms are evaluated, for an
   X entry in column n only column n's (this keeps their float64 rounding out of the difference); a few
   entries are also differenced with the whole L, which must agree.
   Second property: dW is written only inside W's pattern — entries of partial blocks that lie outside the
   matrix are written as 0 whatever they held (bsk.h), with beta = 1 (gradient accumulation) they stay 0,
   and nothing past the value array is touched.
   The GPU test runs the same layer on the device (f32, f16, bf16 inputs; f32 and input-dtype outputs) and
   compares dX and dW with the CPU backend's on the same inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
#endif

#define FD_STEP 0.0625 /* 2^-4: x ± h exact for the values here */
#define GUARD 64       /* elements past a value array that must stay untouched */

/* ---------------------------------------------------------------- the layer */

typedef struct layer {
    int64_t M, K, N;
    bsk_bsr W;   /* host, dtype of the case */
    bsk_dense X; /* K x N */
    bsk_dense G; /* M x N: dL/dY */
} layer;

/* W from a random mask (about half the blocks) that always keeps the last block row's and last block
   column's blocks somewhere, so partial blocks (and their padding) are present whenever the shape has them. */
static int layer_make(layer *L, int64_t M, int64_t K, int64_t N, int32_t br, int32_t bc, bsk_dtype dt)
{
    bsk_rng *r = bsk_test_rng();
    memset(L, 0, sizeof *L);
    L->M = M, L->K = K, L->N = N;
    int64_t mb = (M + br - 1) / br, nb = (K + bc - 1) / bc;
    uint8_t *mask = (uint8_t *)malloc((size_t)(mb * nb));
    bsk_dense D = bsk_test_dense(M, K, 0, dt, r);
    if (!mask || !D.data) {
        free(mask);
        bsk_test_dense_free(&D);
        return 0;
    }
    for (int64_t i = 0; i < mb * nb; i++) mask[i] = bsk_rng_uniform(r) < 0.5;
    mask[(mb - 1) * nb + (nb - 1)] = 1; /* the corner block: partial in both directions */
    mask[0 * nb + (nb - 1)] = 1;        /* a block of the last column in a full row      */
    mask[(mb - 1) * nb + 0] = 1;        /* a block of the last row in a full column      */
    bsk_status s = bsk_bsr_from_mask(&D, br, bc, mask, &L->W);
    free(mask);
    bsk_test_dense_free(&D);
    if (s) return 0;
    L->X = bsk_test_dense(K, N, 0, dt, r);
    L->G = bsk_test_dense(M, N, 0, dt, r);
    return L->X.data && L->G.data;
}

static void layer_free(layer *L)
{
    bsk_bsr_free(&L->W);
    bsk_test_dense_free(&L->X);
    bsk_test_dense_free(&L->G);
}

/* ---------------------------------------------------------------- float64 loss */

/* The layer in float64: W's values (packed like the BSR), X and G (packed). */
typedef struct layer64 {
    const bsk_bsr *W;
    int64_t M, K, N, br, bc, bsz;
    double *w, *x, *g;
} layer64;

static int layer64_make(layer64 *F, const layer *L)
{
    const bsk_bsr *W = &L->W;
    F->W = W;
    F->M = L->M, F->K = L->K, F->N = L->N;
    F->br = W->block_rows, F->bc = W->block_cols, F->bsz = F->br * F->bc;
    F->w = (double *)malloc((size_t)(W->nnzb * F->bsz + 1) * sizeof(double));
    F->x = (double *)malloc((size_t)(L->K * L->N) * sizeof(double));
    F->g = (double *)malloc((size_t)(L->M * L->N) * sizeof(double));
    if (!F->w || !F->x || !F->g) return 0;
    for (int64_t i = 0; i < W->nnzb * F->bsz; i++) F->w[i] = bsk__load(W->values, W->dtype, i);
    for (int64_t j = 0; j < L->K; j++)
        for (int64_t n = 0; n < L->N; n++) F->x[j * L->N + n] = bsk__load(L->X.data, L->X.dtype, j * L->X.ld + n);
    for (int64_t i = 0; i < L->M; i++)
        for (int64_t n = 0; n < L->N; n++) F->g[i * L->N + n] = bsk__load(L->G.data, L->G.dtype, i * L->G.ld + n);
    return 1;
}

static void layer64_free(layer64 *F)
{
    free(F->w);
    free(F->x);
    free(F->g);
}

/* Σ_n G[gr][n]·(W·X)[gr][n]: the terms of L in matrix row gr. When col >= 0 only column `col` of Y
   counts (then the sum is one term). */
static double loss_row(const layer64 *F, int64_t gr, int64_t col)
{
    const bsk_bsr *W = F->W;
    int64_t i = gr / F->br, r = gr % F->br, n0 = col >= 0 ? col : 0, n1 = col >= 0 ? col + 1 : F->N;
    double l = 0;
    for (int64_t n = n0; n < n1; n++) {
        double y = 0;
        for (int32_t k = W->row_ptr[i]; k < W->row_ptr[i + 1]; k++)
            for (int64_t c = 0; c < F->bc; c++) {
                int64_t gc = (int64_t)W->col_idx[k] * F->bc + c;
                if (gc >= F->K) break; /* padding is not part of the matrix */
                y += F->w[k * F->bsz + r * F->bc + c] * F->x[gc * F->N + n];
            }
        l += F->g[gr * F->N + n] * y;
    }
    return l;
}

/* Σ_i G[i][n]·(W·X)[i][n]: the terms of L in column n. */
static double loss_col(const layer64 *F, int64_t n)
{
    double l = 0;
    for (int64_t gr = 0; gr < F->M; gr++) l += loss_row(F, gr, n);
    return l;
}

static double loss_full(const layer64 *F)
{
    double l = 0;
    for (int64_t gr = 0; gr < F->M; gr++) l += loss_row(F, gr, -1);
    return l;
}

/* Central difference of `f` in *p. */
#define CENTRAL(p, expr, out)                                                                          \
    do {                                                                                               \
        double save_ = *(p);                                                                           \
        *(p) = save_ + FD_STEP;                                                                        \
        double lp_ = (expr);                                                                           \
        *(p) = save_ - FD_STEP;                                                                        \
        double lm_ = (expr);                                                                           \
        *(p) = save_;                                                                                  \
        (out) = (lp_ - lm_) / (2.0 * FD_STEP);                                                         \
    } while (0)

/* Per-element agreement: |got − fd| <= tol·scale (scale = Σ|products| of the exact sum, so the test is as
   tight as fp32 accumulation allows for that element), plus the norm-wise relative error. */
typedef struct agree {
    double num, den, worst; /* worst: max |got − fd| / scale */
    int64_t n, bad, nonfinite;
} agree;

static void agree_add(agree *a, double got, double fd, double scale, double tol)
{
    a->n++;
    if (!isfinite(got)) {
        a->nonfinite++;
        return;
    }
    double d = fabs(got - fd), rel = scale > 0 ? d / scale : d;
    a->num += d * d;
    a->den += fd * fd;
    if (rel > a->worst) a->worst = rel;
    if (rel > tol) a->bad++;
}

static double agree_rel(const agree *a) { return a->nonfinite ? NAN : a->den > 0 ? sqrt(a->num / a->den) : sqrt(a->num); }

/* ---------------------------------------------------------------- CPU gradients vs finite differences */

/* Check dX (K x N, any dtype, ld) against the finite differences over every entry of X. */
static void check_dx_fd(bsk_test_ctx *t, layer64 *F, const bsk_dense *dX, double tol, const char *what)
{
    agree a = {0};
    for (int64_t j = 0; j < F->K; j++)
        for (int64_t n = 0; n < F->N; n++) {
            double fd, scale = 0;
            CENTRAL(&F->x[j * F->N + n], loss_col(F, n), fd);
            /* dL/dX[j][n] = Σ_i W[i][j]·G[i][n] over the kept entries of column j */
            for (int64_t i = 0; i < bsk_bsr_mb(F->W); i++)
                for (int32_t k = F->W->row_ptr[i]; k < F->W->row_ptr[i + 1]; k++) {
                    if (F->W->col_idx[k] != j / F->bc) continue;
                    for (int64_t r = 0; r < F->br && i * F->br + r < F->M; r++)
                        scale += fabs(F->w[k * F->bsz + r * F->bc + j % F->bc] * F->g[(i * F->br + r) * F->N + n]);
                }
            agree_add(&a, bsk__load(dX->data, dX->dtype, j * dX->ld + n), fd, scale, tol);
        }
    if (a.bad || a.nonfinite || !(agree_rel(&a) <= tol)) {
        t->failed++;
        fprintf(stderr, "  %s: dX vs finite differences: %lld of %lld entries off (worst %.2e of scale, tol %.0e), "
                        "%lld non-finite, norm-wise rel err %.3e\n",
                what, (long long)a.bad, (long long)a.n, a.worst, tol, (long long)a.nonfinite, agree_rel(&a));
    }
}

/* Check dW values (packed like W's, dtype vt; `old` = the values before a beta = 1 run, or NULL for
   beta = 0) against the finite differences over every kept entry, and the padding entries: exactly 0. */
static void check_dw_fd(bsk_test_ctx *t, layer64 *F, const void *vals, bsk_dtype vt, const void *old, double tol,
                        const char *what)
{
    const bsk_bsr *W = F->W;
    agree a = {0};
    int64_t pad_bad = 0, pads = 0;
    for (int64_t i = 0; i < bsk_bsr_mb(W); i++)
        for (int32_t k = W->row_ptr[i]; k < W->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < F->br; r++)
                for (int64_t c = 0; c < F->bc; c++) {
                    int64_t gr = i * F->br + r, gc = (int64_t)W->col_idx[k] * F->bc + c, idx = k * F->bsz + r * F->bc + c;
                    double got = bsk__load(vals, vt, idx);
                    if (gr >= F->M || gc >= F->K) {
                        pads++;
                        if (got != 0.0 || signbit(got)) pad_bad++; /* +0 exactly (NaN poison fails here) */
                        continue;
                    }
                    double fd, scale = 0;
                    CENTRAL(&F->w[idx], loss_row(F, gr, -1), fd);
                    for (int64_t n = 0; n < F->N; n++) scale += fabs(F->g[gr * F->N + n] * F->x[gc * F->N + n]);
                    double base = old ? bsk__load(old, vt, idx) : 0.0;
                    agree_add(&a, got - base, fd, scale + fabs(base), tol);
                }
    if (a.bad || a.nonfinite || !(agree_rel(&a) <= tol)) {
        t->failed++;
        fprintf(stderr, "  %s: dW vs finite differences: %lld of %lld entries off (worst %.2e of scale, tol %.0e), "
                        "%lld non-finite, norm-wise rel err %.3e\n",
                what, (long long)a.bad, (long long)a.n, a.worst, tol, (long long)a.nonfinite, agree_rel(&a));
    }
    if (pad_bad) {
        t->failed++;
        fprintf(stderr, "  %s: %lld of %lld padding entries of dW are not 0\n", what, (long long)pad_bad, (long long)pads);
    }
}

/* A few entries differenced with the whole loss: the local sums above are the same derivative. */
static void check_local_equals_full(bsk_test_ctx *t, layer64 *F)
{
    bsk_rng *r = bsk_test_rng();
    int64_t nvals = F->W->nnzb * F->bsz;
    for (int s = 0; s < 12; s++) {
        int64_t j = bsk_rng_int(r, 0, F->K - 1), n = bsk_rng_int(r, 0, F->N - 1);
        double full, local;
        CENTRAL(&F->x[j * F->N + n], loss_full(F), full);
        CENTRAL(&F->x[j * F->N + n], loss_col(F, n), local);
        CHECK(fabs(full - local) <= 1e-9 * (1.0 + fabs(local)));
        int64_t idx = bsk_rng_int(r, 0, nvals - 1), k = idx / F->bsz, rr = (idx % F->bsz) / F->bc;
        int64_t i = 0;
        while (F->W->row_ptr[i + 1] <= k) i++;
        int64_t gr = i * F->br + rr;
        if (gr >= F->M) continue;
        CENTRAL(&F->w[idx], loss_full(F), full);
        CENTRAL(&F->w[idx], loss_row(F, gr, -1), local);
        CHECK(fabs(full - local) <= 1e-9 * (1.0 + fabs(local)));
    }
}

/* Whether values entry idx of W lies outside the matrix (padding of a partial block). */
static int is_pad(const bsk_bsr *W, int64_t idx)
{
    int64_t bsz = (int64_t)W->block_rows * W->block_cols, k = idx / bsz, r = (idx % bsz) / W->block_cols,
            c = idx % W->block_cols, i = 0;
    while (W->row_ptr[i + 1] <= k) i++;
    return i * W->block_rows + r >= W->rows || (int64_t)W->col_idx[k] * W->block_cols + c >= W->cols;
}

static int guard_ok(const float *g)
{
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 12345.0f) return 0;
    return 1;
}

/* One layer on the CPU backend: dX, dW (beta = 0 on NaN poison), dW accumulated (beta = 1). */
static void cpu_case(bsk_test_ctx *t, bsk_context *ctx, int64_t M, int64_t K, int64_t N, int32_t br, int32_t bc)
{
    char what[96];
    snprintf(what, sizeof what, "M=%lld K=%lld N=%lld block %dx%d", (long long)M, (long long)K, (long long)N, br, bc);
    layer L;
    layer64 F;
    memset(&F, 0, sizeof F);
    if (!layer_make(&L, M, K, N, br, bc, BSK_F32) || !layer64_make(&F, &L)) {
        t->failed++;
        fprintf(stderr, "  %s: setup failed\n", what);
        layer_free(&L);
        layer64_free(&F);
        return;
    }
    const double tol = 1e-5;
    const int64_t nvals = L.W.nnzb * F.bsz;

    /* dX = Wᵀ·G into a NaN-poisoned K x N with an ld gap that must stay untouched */
    bsk_dense dX = bsk_test_dense_poison(K, N, 3, BSK_F32);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &L.W, &L.G, 0.0f, &dX), BSK_SUCCESS);
    check_dx_fd(t, &F, &dX, tol, what);
    int gap_ok = 1;
    for (int64_t j = 0; j < K; j++)
        for (int64_t c = N; c < dX.ld; c++) gap_ok &= isnan(((float *)dX.data)[j * dX.ld + c]) != 0;
    CHECK(gap_ok);

    /* dW = G·Xᵀ on W's pattern, into NaN-poisoned values followed by a guard */
    float *vals = (float *)malloc((size_t)(nvals + GUARD) * sizeof(float));
    float *old = (float *)malloc((size_t)(nvals + 1) * sizeof(float));
    if (!vals || !old) {
        t->failed++;
        free(vals);
        free(old);
        bsk_test_dense_free(&dX);
        layer64_free(&F);
        layer_free(&L);
        return;
    }
    for (int64_t i = 0; i < nvals; i++) vals[i] = NAN;
    for (int i = 0; i < GUARD; i++) vals[nvals + i] = 12345.0f;
    bsk_bsr dW = L.W;
    dW.values = vals;
    CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &L.G, &L.X, 0.0f, &dW), BSK_SUCCESS);
    check_dw_fd(t, &F, vals, BSK_F32, NULL, tol, what);
    CHECK(guard_ok(vals + nvals));

    /* accumulation: random old gradient inside the matrix, zero padding; beta = 1 adds and keeps it 0 */
    bsk_rng *r = bsk_test_rng();
    for (int64_t i = 0; i < nvals; i++) old[i] = is_pad(&L.W, i) ? 0.0f : bsk_rng_sym(r);
    memcpy(vals, old, (size_t)nvals * sizeof(float));
    CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &L.G, &L.X, 1.0f, &dW), BSK_SUCCESS);
    check_dw_fd(t, &F, vals, BSK_F32, old, tol, what);
    CHECK(guard_ok(vals + nvals));

    check_local_equals_full(t, &F);
    free(vals);
    free(old);
    bsk_test_dense_free(&dX);
    layer64_free(&F);
    layer_free(&L);
}

BSK_TEST(training_gradients_cpu_fd)
{
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    cpu_case(t, ctx, 96, 80, 40, 16, 16); /* whole blocks                          */
    cpu_case(t, ctx, 96, 80, 40, 32, 32); /* partial last block column (80 = 2.5·32) */
    cpu_case(t, ctx, 90, 76, 40, 16, 16); /* partial in both directions             */
    cpu_case(t, ctx, 90, 80, 40, 32, 16); /* rectangular blocks, partial last row   */
    bsk_destroy(ctx);
}

/* ---------------------------------------------------------------- GPU vs CPU */

#ifdef BSK_WITH_CUDA
static void *dev_put(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 16) != cudaSuccess) return NULL;
    if (h && bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

/* ‖got − ref‖/‖ref‖ over the entries of values arrays (packed, nvals) that lie inside the matrix; padding
   entries counted in *pad_bad unless exactly +0. */
static double dw_rel_err(const bsk_bsr *W, const void *got, bsk_dtype gt, const void *ref, bsk_dtype rt, int64_t *pad_bad)
{
    int64_t br = W->block_rows, bc = W->block_cols, bsz = br * bc;
    double num = 0, den = 0;
    *pad_bad = 0;
    for (int64_t i = 0; i < bsk_bsr_mb(W); i++)
        for (int32_t k = W->row_ptr[i]; k < W->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t idx = (int64_t)k * bsz + r * bc + c;
                    double g = bsk__load(got, gt, idx), f = bsk__load(ref, rt, idx);
                    if (i * br + r >= W->rows || (int64_t)W->col_idx[k] * bc + c >= W->cols) {
                        if (g != 0.0 || signbit(g)) (*pad_bad)++;
                        continue;
                    }
                    if (!isfinite(g)) return NAN;
                    num += (g - f) * (g - f);
                    den += f * f;
                }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One layer: CPU (f32 outputs, the reference) and GPU (outputs of dtype ot) on the same inputs of dtype dt. */
static void gpu_case(bsk_test_ctx *t, bsk_context *gctx, bsk_context *cctx, int64_t M, int64_t K, int64_t N, int32_t b,
                     bsk_dtype dt, bsk_dtype ot, int64_t pad)
{
    char what[128];
    snprintf(what, sizeof what, "GPU M=%lld K=%lld N=%lld b=%d in=%s out=%s", (long long)M, (long long)K, (long long)N, b,
             dt == BSK_F32 ? "f32" : dt == BSK_F16 ? "f16" : "bf16", ot == BSK_F32 ? "f32" : ot == BSK_F16 ? "f16" : "bf16");
    layer L;
    if (!layer_make(&L, M, K, N, b, b, dt)) {
        t->failed++;
        fprintf(stderr, "  %s: setup failed\n", what);
        layer_free(&L);
        return;
    }
    const int64_t nvals = L.W.nnzb * (int64_t)b * b;
    const size_t es = bsk_dtype_size(ot), vbytes = (size_t)nvals * es, gbytes = GUARD * es;
    /* CPU reference: f32 outputs from the same (rounded) inputs */
    bsk_dense cdX = bsk_test_dense_poison(K, N, 0, BSK_F32);
    float *cdW = (float *)malloc((size_t)(nvals + 1) * sizeof(float)), *cold = (float *)malloc((size_t)(nvals + 1) * sizeof(float));
    void *old = malloc(vbytes + 1), *back = malloc(vbytes + gbytes + 1), *dxback = malloc((size_t)(K * (N + pad)) * es + 1);
    bsk_bsr cW = L.W;
    cW.values = cdW;
    cW.dtype = BSK_F32;
    bsk_bsr dW = {0};
    bsk_dense gG = L.G, gX = L.X, gdX = {K, N, N + pad, ot, BSK_MEM_DEVICE, NULL};
    gG.mem = gX.mem = BSK_MEM_DEVICE;
    gG.data = dev_put(L.G.data, (size_t)(M * N) * bsk_dtype_size(dt));
    gX.data = dev_put(L.X.data, (size_t)(K * N) * bsk_dtype_size(dt));
    gdX.data = dev_put(NULL, (size_t)(K * (N + pad)) * es);
    void *gvals = dev_put(NULL, vbytes + gbytes);
    if (!cdW || !cold || !old || !back || !dxback || !gG.data || !gX.data || !gdX.data || !gvals ||
        bsk_bsr_clone(&L.W, BSK_MEM_DEVICE, &dW) != BSK_SUCCESS) {
        t->failed++;
        fprintf(stderr, "  %s: setup failed\n", what);
        goto done;
    }
    if (bsk_spmm(cctx, BSK_OP_T, 1.0f, &L.W, &L.G, 0.0f, &cdX) || bsk_sddmm(cctx, 1.0f, &L.G, &L.X, 0.0f, &cW)) {
        t->failed++;
        fprintf(stderr, "  %s: CPU reference failed\n", what);
        goto done;
    }

    {
        /* dX on the device into poison (0xff.. is NaN in every dtype), the ld gap checked too */
        CHECK(cudaMemset(gdX.data, 0xff, (size_t)(K * (N + pad)) * es) == cudaSuccess);
        CHECK_STATUS(bsk_spmm(gctx, BSK_OP_T, 1.0f, &dW, &gG, 0.0f, &gdX), BSK_SUCCESS);
        CHECK_STATUS(bsk_synchronize(gctx), BSK_SUCCESS);
        const char *kdx = bsk_last_kernel(gctx);
        CHECK(cudaMemcpy(dxback, gdX.data, (size_t)(K * (N + pad)) * es, cudaMemcpyDeviceToHost) == cudaSuccess);
        double num = 0, den = 0;
        int gap_ok = 1;
        for (int64_t j = 0; j < K; j++)
            for (int64_t n = 0; n < N + pad; n++) {
                double g = bsk__load(dxback, ot, j * (N + pad) + n);
                if (n >= N) { gap_ok &= isnan(g) != 0; continue; }
                double f = ((float *)cdX.data)[j * N + n];
                num += isfinite(g) ? (g - f) * (g - f) : INFINITY;
                den += f * f;
            }
        double edx = sqrt(num / den);
        CHECK(gap_ok);
        if (!(edx <= bsk_tol(dt, ot))) {
            t->failed++;
            fprintf(stderr, "  %s: dX (%s) vs CPU: rel err %.3e > %.1e\n", what, kdx, edx, bsk_tol(dt, ot));
        }

        /* dW on the device: poison values, guard of 0x5a bytes after them */
        bsk_bsr gW = dW;
        gW.values = gvals;
        gW.dtype = ot;
        CHECK(cudaMemset(gvals, 0xff, vbytes) == cudaSuccess);
        CHECK(cudaMemset((char *)gvals + vbytes, 0x5a, gbytes) == cudaSuccess);
        CHECK_STATUS(bsk_sddmm(gctx, 1.0f, &gG, &gX, 0.0f, &gW), BSK_SUCCESS);
        CHECK_STATUS(bsk_synchronize(gctx), BSK_SUCCESS);
        const char *kdw = bsk_last_kernel(gctx);
        CHECK(cudaMemcpy(back, gvals, vbytes + gbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        int64_t pad_bad;
        double edw = dw_rel_err(&L.W, back, ot, cdW, BSK_F32, &pad_bad);
        int guard = 1;
        for (size_t i = 0; i < gbytes; i++) guard &= ((unsigned char *)back)[vbytes + i] == 0x5a;
        CHECK(guard);
        if (pad_bad) {
            t->failed++;
            fprintf(stderr, "  %s: %lld padding entries of dW (%s) are not 0\n", what, (long long)pad_bad, kdw);
        }
        if (!(edw <= bsk_tol(dt, ot))) {
            t->failed++;
            fprintf(stderr, "  %s: dW (%s) vs CPU: rel err %.3e > %.1e\n", what, kdw, edw, bsk_tol(dt, ot));
        }

        /* accumulation (beta = 1) onto a random old gradient with zero padding: padding stays 0 */
        bsk_rng *r = bsk_test_rng();
        for (int64_t i = 0; i < nvals; i++) {
            float v = is_pad(&L.W, i) ? 0.0f : bsk_rng_sym(r);
            bsk__store(old, ot, i, v);
            cold[i] = bsk__load(old, ot, i);
        }
        CHECK(cudaMemcpy(gvals, old, vbytes, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_STATUS(bsk_sddmm(gctx, 1.0f, &gG, &gX, 1.0f, &gW), BSK_SUCCESS);
        CHECK_STATUS(bsk_synchronize(gctx), BSK_SUCCESS);
        CHECK(cudaMemcpy(back, gvals, vbytes + gbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        bsk_bsr cA = cW;
        cA.values = cold;
        CHECK_STATUS(bsk_sddmm(cctx, 1.0f, &L.G, &L.X, 1.0f, &cA), BSK_SUCCESS);
        double eacc = dw_rel_err(&L.W, back, ot, cold, BSK_F32, &pad_bad);
        CHECK(pad_bad == 0);
        if (!(eacc <= bsk_tol(dt, ot))) {
            t->failed++;
            fprintf(stderr, "  %s: dW += (%s) vs CPU: rel err %.3e > %.1e\n", what, kdw, eacc, bsk_tol(dt, ot));
        }
        guard = 1;
        for (size_t i = 0; i < gbytes; i++) guard &= ((unsigned char *)back)[vbytes + i] == 0x5a;
        CHECK(guard);
        printf("  %-58s dX %-16s %.1e  dW %-16s %.1e\n", what, kdx, edx, kdw, edw);
    }
done:
    bsk_bsr_free(&dW);
    cudaFree(gG.data);
    cudaFree(gX.data);
    cudaFree(gdX.data);
    cudaFree(gvals);
    bsk_test_dense_free(&cdX);
    free(cdW);
    free(cold);
    free(old);
    free(back);
    free(dxback);
    layer_free(&L);
}
#endif

BSK_TEST(training_gradients_gpu_vs_cpu)
{
    NEED_GPU();
#ifdef BSK_WITH_CUDA
    bsk_context *g = NULL, *c = NULL;
    REQUIRE_OK(bsk_create(&g, BSK_BACKEND_CUDA));
    REQUIRE_OK(bsk_create(&c, BSK_BACKEND_CPU));
    const bsk_dtype dts[3] = {BSK_F32, BSK_F16, BSK_BF16};
    for (int d = 0; d < 3; d++)
        for (int o = 0; o < 2; o++) {
            bsk_dtype dt = dts[d], ot = o ? dt : BSK_F32;
            if (o && dt == BSK_F32) continue;
            gpu_case(t, g, c, 90, 76, 40, 16, dt, ot, 3);       /* small blocks, partial both ways, ld gap */
            gpu_case(t, g, c, 256, 192, 128, 64, dt, ot, 0);    /* Hopper-sized                           */
            gpu_case(t, g, c, 384, 256, 192, 128, dt, ot, 0);   /* b = 128                                */
            gpu_case(t, g, c, 200, 160, 136, 64, dt, ot, 0);    /* partial blocks at b = 64               */
        }
    bsk_destroy(g);
    bsk_destroy(c);
#endif
}
