/* test_gpu.c — the CUDA backend through the public API, against the float64 references in tests/util.c.
   Every test skips cleanly when no CUDA device exists (or the build has no CUDA).

   Each case: a random BSR A (bsk_bsr_random) cloned to the device, dense operands copied with cudaMemcpy,
   the output poisoned with NaN (beta == 0) or filled with random values (beta != 0), then run through the
   dispatcher and through each kernel family directly (test hooks), each run twice: every element is
   checked against the reference, padding columns (ld > cols) must be untouched, the two runs must agree
   bitwise, and the kernel name must be from the family expected. A fresh context per case keeps the
   per-context transpose-index cache from meeting a freed pattern's re-used addresses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
/* test hooks (src/cuda/portable/simt.cu): 0 = Hopper, 1 = portable tensor-core, 2 = SIMT */
bsk_status bsk__cuda_spmm_family(bsk_context *ctx, int family, bsk_op op, float alpha, const bsk_bsr *A,
                                 const bsk_dense *B, float beta, bsk_dense *C);
bsk_status bsk__cuda_sddmm_family(bsk_context *ctx, int family, float alpha, const bsk_dense *X, const bsk_dense *Y,
                                  float beta, bsk_bsr *out);
#endif

/* ---------------------------------------------------------------- device helpers */

static void *dev_alloc(size_t bytes)
{
#ifdef BSK_WITH_CUDA
    void *p = NULL;
    return cudaMalloc(&p, bytes ? bytes : 16) == cudaSuccess ? p : NULL;
#else
    (void)bytes;
    return NULL;
#endif
}
static int dev_put(void *d, const void *h, size_t bytes)
{
#ifdef BSK_WITH_CUDA
    return !bytes || cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
#else
    (void)d; (void)h; (void)bytes;
    return 0;
#endif
}
static int dev_get(void *h, const void *d, size_t bytes)
{
#ifdef BSK_WITH_CUDA
    return !bytes || cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
#else
    (void)d; (void)h; (void)bytes;
    return 0;
#endif
}
static void dev_free(void *d)
{
#ifdef BSK_WITH_CUDA
    if (d) cudaFree(d);
#else
    (void)d;
#endif
}
static bsk_status family_spmm(bsk_context *ctx, int fam, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                              float beta, bsk_dense *C)
{
#ifdef BSK_WITH_CUDA
    return bsk__cuda_spmm_family(ctx, fam, op, alpha, A, B, beta, C);
#else
    (void)ctx; (void)fam; (void)op; (void)alpha; (void)A; (void)B; (void)beta; (void)C;
    return BSK_ERR_NO_DEVICE;
#endif
}
static bsk_status family_sddmm(bsk_context *ctx, int fam, float alpha, const bsk_dense *X, const bsk_dense *Y,
                               float beta, bsk_bsr *out)
{
#ifdef BSK_WITH_CUDA
    return bsk__cuda_sddmm_family(ctx, fam, alpha, X, Y, beta, out);
#else
    (void)ctx; (void)fam; (void)alpha; (void)X; (void)Y; (void)beta; (void)out;
    return BSK_ERR_NO_DEVICE;
#endif
}

static size_t dense_elems(const bsk_dense *D) { return (size_t)(D->rows * D->ld); }

/* A device copy of host dense H; `offset` elements of shift from the allocation start (to test unaligned
   bases). The allocation start is returned in *base for dev_free. */
static int dense_up(const bsk_dense *H, int64_t offset, bsk_dense *D, void **base)
{
    size_t es = bsk_dtype_size(H->dtype), bytes = dense_elems(H) * es;
    *D = *H;
    D->mem = BSK_MEM_DEVICE;
    *base = dev_alloc(bytes + (size_t)offset * es);
    if (!*base) return 0;
    D->data = (char *)*base + offset * (int64_t)es;
    return dev_put(D->data, H->data, bytes);
}


static const char *dt_name(bsk_dtype t) { return t == BSK_F32 ? "f32" : t == BSK_F16 ? "f16" : "bf16"; }

/* ---------------------------------------------------------------- SpMM cases */

enum { EXPECT_ANY = 0, EXPECT_TC = 1, EXPECT_SIMT = 2 };
enum { FAM_PORTABLE = 1 << 1, FAM_SIMT = 1 << 2 };

typedef struct {
    bsk_op op;
    int64_t m, k, n;    /* C is m x n, op(A) is m x k */
    int32_t br, bc;
    bsk_dtype in, out;
    float alpha, beta;
    double density;
    bsk_pattern pat;
    int64_t padb, padc; /* ld - cols; padb < 0: pad B's rows to a multiple of 8 elements (16 bytes) */
    int64_t offb;       /* B's device base shifted by this many elements */
} sp_case;

static void sp_describe(const sp_case *c)
{
    fprintf(stderr, "    case: op %c m %lld k %lld n %lld block %dx%d %s->%s alpha %g beta %g density %.2f %s padb %lld padc %lld offb %lld\n",
            c->op == BSK_OP_N ? 'N' : 'T', (long long)c->m, (long long)c->k, (long long)c->n, c->br, c->bc,
            dt_name(c->in), dt_name(c->out), c->alpha, c->beta, c->density, c->pat == BSK_PATTERN_SKEWED ? "skewed" : "uniform",
            (long long)c->padb, (long long)c->padc, (long long)c->offb);
}

static int kernel_is(const char *name, int expect)
{
    if (expect == EXPECT_SIMT) return strncmp(name, "cuda-simt", 9) == 0;
    if (expect == EXPECT_TC) return strncmp(name, "cuda-mma", 8) == 0 || strncmp(name, "hopper", 6) == 0 ||
                                    strncmp(name, "cuda-sddmm-mma", 14) == 0;
    return 1;
}

/* Copies C0 into dC, runs (family < 0: the public bsk_spmm), brings the result into `got`. */
static bsk_status sp_run(bsk_context *ctx, int family, const sp_case *c, const bsk_bsr *dA, const bsk_dense *dB,
                         bsk_dense *dC, const bsk_dense *C0, bsk_dense *got)
{
    size_t bytes = dense_elems(C0) * bsk_dtype_size(C0->dtype);
    if (!dev_put(dC->data, C0->data, bytes)) return BSK_ERR_CUDA;
    bsk_status s = family < 0 ? bsk_spmm(ctx, c->op, c->alpha, dA, dB, c->beta, dC)
                              : family_spmm(ctx, family, c->op, c->alpha, dA, dB, c->beta, dC);
    if (s) return s;
    if ((s = bsk_synchronize(ctx))) return s;
    return dev_get(got->data, dC->data, bytes) ? BSK_SUCCESS : BSK_ERR_CUDA;
}

/* Runs case c through the dispatcher (its kernel from family `expect`) and through every family in
   `families`. */
static void sp_check(bsk_test_ctx *t, const sp_case *c, int expect, unsigned families)
{
    int failed0 = t->failed;
    bsk_rng *rng = bsk_test_rng();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    int64_t arows = c->op == BSK_OP_N ? c->m : c->k, acols = c->op == BSK_OP_N ? c->k : c->m;
    bsk_bsr A, dA;
    memset(&dA, 0, sizeof dA);
    bsk_status s = bsk_bsr_random(arows, acols, c->br, c->bc, c->density, c->pat, bsk_rng_next(rng), c->in, &A);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s) { bsk_destroy(ctx); return; }
    bsk_dense B = bsk_test_dense(c->k, c->n, c->padb >= 0 ? c->padb : (8 - c->n % 8) % 8, c->in, rng);
    bsk_dense C0 = c->beta != 0.0f ? bsk_test_dense(c->m, c->n, c->padc, c->out, rng)
                                   : bsk_test_dense_poison(c->m, c->n, c->padc, c->out);
    bsk_dense got = bsk_test_dense_poison(c->m, c->n, c->padc, c->out), first = got;
    first.data = malloc(dense_elems(&got) * bsk_dtype_size(c->out) + 1);
    double *ref = (double *)malloc((size_t)(c->m * c->n + 1) * sizeof *ref);
    bsk_ref_spmm(c->op, c->alpha, &A, &B, c->beta, c->beta != 0.0f ? &C0 : NULL, ref);
    bsk_dense dB, dC;
    void *bbase = NULL, *cbase = NULL;
    int ok = bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA) == BSK_SUCCESS && dense_up(&B, c->offb, &dB, &bbase) &&
             dense_up(&C0, 0, &dC, &cbase);
    CHECK(ok);
    const double tol = bsk_tol(c->in, c->out);
    const size_t es = bsk_dtype_size(c->out);
    for (int fam = -1; ok && fam <= 2; fam++) {
        if (fam >= 0 && !(families & (1u << fam))) continue;
        for (int rep = 0; rep < 2; rep++) {
            s = sp_run(ctx, fam, c, &dA, &dB, &dC, &C0, rep ? &got : &first);
            CHECK_STATUS(s, BSK_SUCCESS);
            if (s) break;
        }
        if (s) continue;
        const char *kn = bsk_last_kernel(ctx);
        int want = fam < 0 ? expect : fam == 1 ? EXPECT_TC : fam == 2 ? EXPECT_SIMT : EXPECT_ANY;
        if (!kernel_is(kn, want)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: family %d ran kernel '%s', not the one expected\n", __FILE__, __LINE__, fam, kn);
        }
        double err = bsk_rel_err_dense(&got, ref);
        if (!(err <= tol)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: family %d (%s): rel err %.3e > %.1e\n", __FILE__, __LINE__, fam, kn, err, tol);
        }
        /* determinism: the two runs agree bitwise */
        CHECK(memcmp(first.data, got.data, dense_elems(&got) * es) == 0);
        /* nothing written outside the matrix: padding columns keep C0's bytes */
        int pad_ok = 1;
        for (int64_t i = 0; i < c->m; i++)
            if (memcmp((char *)got.data + (i * got.ld + c->n) * es, (char *)C0.data + (i * got.ld + c->n) * es,
                       (size_t)c->padc * es))
                pad_ok = 0;
        CHECK(pad_ok);
    }
    if (t->failed != failed0) sp_describe(c);
    dev_free(bbase);
    dev_free(cbase);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C0);
    bsk_test_dense_free(&got);
    free(first.data);
    free(ref);
    bsk_destroy(ctx);
}

static sp_case sp_default(bsk_op op, int32_t br, int32_t bc, bsk_dtype in, bsk_dtype out)
{
    sp_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.br = br;
    c.bc = bc;
    /* partial last block row and column in A, whichever op */
    int64_t arows = 2 * br + br / 2 + 3, acols = 2 * bc + bc / 4 + 5;
    c.m = op == BSK_OP_N ? arows : acols;
    c.k = op == BSK_OP_N ? acols : arows;
    c.n = 100; /* two N tiles of 64, one partial 128-tile, not a multiple of 8 */
    c.in = in;
    c.out = out;
    c.alpha = 1.25f;
    c.beta = 0.0f;
    c.density = 0.6;
    c.pat = BSK_PATTERN_UNIFORM;
    c.padb = -1;
    return c;
}

/* Tensor-core block shapes, fp16 and bf16, op N and T: dispatcher (tensor-core family), portable, SIMT. */
BSK_TEST(gpu_spmm_tensor_core_blocks)
{
    NEED_GPU();
    /* every step shape of the portable kernel: 64-deep chunks (64, 128, 192), 2 or 4 whole blocks per step
       (32, 16), 16-deep chunks (48, 80, 96), under both ops */
    static const int32_t shapes[][2] = {{16, 16}, {32, 32}, {64, 64}, {128, 128}, {16, 32}, {64, 32},
                                        {32, 16}, {48, 80}, {96, 16}, {32, 192}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int op = 0; op < 2; op++) {
                sp_case c = sp_default((bsk_op)op, shapes[i][0], shapes[i][1], d ? BSK_BF16 : BSK_F16, BSK_F32);
                c.n = 60 + 41 * (int64_t)(i % 4); /* 60, 101, 142, 183 */
                sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            }
}

/* Every input x output dtype, beta 0 (NaN-poisoned C) and beta != 0, padded ld on B and C. */
BSK_TEST(gpu_spmm_dtypes_alpha_beta)
{
    NEED_GPU();
    static const bsk_dtype dts[] = {BSK_F32, BSK_F16, BSK_BF16};
    for (int i = 0; i < 3; i++)
        for (int o = 0; o < 3; o++)
            for (int op = 0; op < 2; op++)
                for (int b = 0; b < 2; b++) {
                    sp_case c = sp_default((bsk_op)op, 32, 32, dts[i], dts[o]);
                    c.n = 72;
                    c.padb = 8;
                    c.padc = 3;
                    c.alpha = b ? -0.5f : 1.0f;
                    c.beta = b ? 0.75f : 0.0f;
                    int tc = dts[i] != BSK_F32;
                    sp_check(t, &c, tc ? EXPECT_TC : EXPECT_SIMT, (tc ? FAM_PORTABLE : 0) | FAM_SIMT);
                }
}

/* Block sizes that are not multiples of 16 (and F32) go to the SIMT kernel. */
BSK_TEST(gpu_spmm_simt_shapes)
{
    NEED_GPU();
    static const int32_t shapes[][2] = {{8, 8}, {24, 24}, {8, 24}, {24, 8}, {3, 5}, {1, 1}, {40, 16}, {16, 16}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int op = 0; op < 2; op++) {
                bsk_dtype in = d ? BSK_F16 : BSK_F32;
                sp_case c = sp_default((bsk_op)op, shapes[i][0], shapes[i][1], in, d ? BSK_BF16 : BSK_F32);
                if (shapes[i][0] < 8) { /* tiny blocks: keep the pattern and the reference small */
                    c.m = op == BSK_OP_N ? 37 : 41;
                    c.k = op == BSK_OP_N ? 41 : 37;
                    c.density = 0.3;
                }
                c.beta = op ? 0.5f : 0.0f;
                int simt = in == BSK_F32 || shapes[i][0] % 16 || shapes[i][1] % 16;
                sp_check(t, &c, simt ? EXPECT_SIMT : EXPECT_TC, simt ? FAM_SIMT : FAM_PORTABLE | FAM_SIMT);
            }
}

/* Shapes at the edges: empty product rows, no blocks at all, one row, one column, short K, skew,
   unaligned leading dimensions and bases. */
BSK_TEST(gpu_spmm_edges)
{
    NEED_GPU();
    for (int op = 0; op < 2; op++)
        for (int d = 0; d < 2; d++) {
            bsk_dtype in = d ? BSK_BF16 : BSK_F16;
            sp_case c;
            /* nnz = 0: C = beta*C, or exactly 0 */
            c = sp_default((bsk_op)op, 32, 32, in, BSK_F32);
            c.density = 0.0;
            sp_check(t, &c, EXPECT_ANY, FAM_PORTABLE | FAM_SIMT);
            c.beta = 0.5f;
            sp_check(t, &c, EXPECT_ANY, FAM_PORTABLE | FAM_SIMT);
            /* many empty block rows and columns (skewed, low density), longer matrix */
            c = sp_default((bsk_op)op, 16, 16, in, BSK_F16);
            c.m = 16 * 40 - 3;
            c.k = 16 * 30 - 9;
            c.density = 0.12;
            c.pat = BSK_PATTERN_SKEWED;
            sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            /* skewed, a few long rows */
            c = sp_default((bsk_op)op, 32, 32, in, BSK_F32);
            c.m = 32 * 12;
            c.k = 32 * 24;
            c.n = 40;
            c.density = 0.35;
            c.pat = BSK_PATTERN_SKEWED;
            sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            /* M = 1 (a single, mostly padding, block row) */
            c = sp_default((bsk_op)op, 16, 16, in, BSK_F32);
            c.m = 1;
            c.density = 1.0;
            sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            /* N = 1 and N = 9, K shorter than one block */
            c = sp_default((bsk_op)op, 64, 64, in, BSK_BF16);
            c.n = 1;
            c.k = 17;
            c.density = 1.0;
            sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            c.n = 9;
            c.beta = -1.5f;
            sp_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
            /* ld not a multiple of 8 (16-byte copies impossible): the portable path declines, results hold */
            c = sp_default((bsk_op)op, 32, 32, in, BSK_F16);
            c.n = 45;
            c.padb = 2;
            c.padc = 1;
            sp_check(t, &c, EXPECT_ANY, FAM_SIMT);
            /* B's base aligned to its element only */
            c = sp_default((bsk_op)op, 32, 32, in, BSK_F32);
            c.n = 64;
            c.offb = 1;
            sp_check(t, &c, EXPECT_ANY, FAM_SIMT);
        }
}

/* The portable kernel declines what it cannot take (so the dispatcher falls through), without writing. */
BSK_TEST(gpu_spmm_portable_declines)
{
    NEED_GPU();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A, dA;
    REQUIRE_OK(bsk_bsr_random(48, 48, 24, 24, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A));
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
    bsk_dense B = bsk_test_dense(48, 16, 0, BSK_F16, rng), C = bsk_test_dense_poison(48, 16, 0, BSK_F32), dB, dC;
    void *bb = NULL, *cb = NULL;
    REQUIRE(dense_up(&B, 0, &dB, &bb) && dense_up(&C, 0, &dC, &cb));
    CHECK_STATUS(family_spmm(ctx, 1, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_ERR_UNSUPPORTED);
    REQUIRE_OK(bsk_synchronize(ctx));
    bsk_dense got = bsk_test_dense_poison(48, 16, 0, BSK_F32);
    REQUIRE(dev_get(got.data, dC.data, 48 * 16 * 4));
    int all_nan = 1;
    for (int i = 0; i < 48 * 16; i++) all_nan &= isnan(((float *)got.data)[i]);
    CHECK(all_nan);
    dev_free(bb);
    dev_free(cb);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_test_dense_free(&got);
    bsk_destroy(ctx);
}

/* Larger op-T problem run several times (fresh and cached transpose index, a second stream): bitwise equal.
   Blocks of 64 (64-deep chunks) and 16 (four blocks per step). */
BSK_TEST(gpu_spmm_transpose_cache_deterministic)
{
    NEED_GPU();
    for (int32_t blk = 64; blk >= 16; blk -= 48) {
        bsk_context *ctx = NULL;
        REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
        REQUIRE_OK(bsk_set_pattern_cache(ctx, blk == 64)); /* cached and rebuilt-per-call index alike */
        bsk_rng *rng = bsk_test_rng();
        const int64_t rows = 64 * 48, cols = 64 * 20, n = 96;
        bsk_bsr A, dA;
        REQUIRE_OK(bsk_bsr_random(rows, cols, blk, blk, 0.4, BSK_PATTERN_SKEWED, bsk_rng_next(rng), BSK_BF16, &A));
        REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
        bsk_dense B = bsk_test_dense(rows, n, 0, BSK_BF16, rng), C = bsk_test_dense_poison(cols, n, 0, BSK_F32), dB, dC;
        void *bb = NULL, *cb = NULL;
        REQUIRE(dense_up(&B, 0, &dB, &bb) && dense_up(&C, 0, &dC, &cb));
        const size_t bytes = (size_t)(cols * n) * 4;
        float *r[4];
        for (int i = 0; i < 4; i++) r[i] = (float *)malloc(bytes);
#ifdef BSK_WITH_CUDA
        cudaStream_t st = NULL;
        CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
#endif
        for (int i = 0; i < 4; i++) {
#ifdef BSK_WITH_CUDA
            if (i == 2) CHECK_STATUS(bsk_set_stream(ctx, st), BSK_SUCCESS);
#endif
            int fam = i == 3 ? 2 : 1;
            CHECK_STATUS(family_spmm(ctx, fam, BSK_OP_T, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
            CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
            CHECK(dev_get(r[i], dC.data, bytes));
        }
        CHECK(memcmp(r[0], r[1], bytes) == 0);
        CHECK(memcmp(r[0], r[2], bytes) == 0);
        double *ref = (double *)malloc((size_t)(cols * n) * sizeof *ref);
        bsk_ref_spmm(BSK_OP_T, 1.0, &A, &B, 0.0, NULL, ref);
        bsk_dense got = {cols, n, n, BSK_F32, BSK_MEM_HOST, r[0]};
        CHECK_REL(bsk_rel_err_dense(&got, ref), bsk_tol(BSK_BF16, BSK_F32));
        got.data = r[3];
        CHECK_REL(bsk_rel_err_dense(&got, ref), bsk_tol(BSK_BF16, BSK_F32));
        bsk_set_stream(ctx, NULL);
        bsk_destroy(ctx); /* frees the cached index after the stream's work */
#ifdef BSK_WITH_CUDA
        cudaStreamDestroy(st);
#endif
        for (int i = 0; i < 4; i++) free(r[i]);
        free(ref);
        dev_free(bb);
        dev_free(cb);
        bsk_bsr_free(&dA);
        bsk_bsr_free(&A);
        bsk_test_dense_free(&B);
        bsk_test_dense_free(&C);
    }
}

/* Malformed device indices (bsk_spmm checks only O(1) things on the device): col_idx out of range,
   row_ptr out of range and not monotone. Every kernel family must run without a fault (run this under
   compute-sanitizer to see "never out of bounds"). */
BSK_TEST(gpu_spmm_malformed_indices)
{
    NEED_GPU();
    bsk_rng *rng = bsk_test_rng();
    static const int32_t shapes[][2] = {{32, 32}, {16, 48}, {24, 8}};
    for (size_t sh = 0; sh < 3; sh++) {
        const int32_t br = shapes[sh][0], bc = shapes[sh][1];
        const int64_t rows = 5 * br - 3, cols = 6 * bc - 1, n = 40;
        bsk_bsr A, dA;
        REQUIRE_OK(bsk_bsr_random(rows, cols, br, bc, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A));
        REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
        int64_t mb = bsk_bsr_mb(&A), nnzb = A.nnzb;
        int32_t *ci = (int32_t *)malloc((size_t)nnzb * 4), *rp = (int32_t *)malloc((size_t)(mb + 1) * 4);
        memcpy(ci, A.col_idx, (size_t)nnzb * 4);
        memcpy(rp, A.row_ptr, (size_t)(mb + 1) * 4);
        ci[0] = 6 + 100;      /* past nb */
        ci[1] = -1;
        ci[nnzb - 1] = INT32_MAX;
        ci[nnzb / 2] = INT32_MIN;
        rp[1] = (int32_t)nnzb + 1000; /* past nnzb */
        rp[2] = -7;                   /* negative, and non-monotone */
        rp[mb] = 3;                   /* not nnzb */
        REQUIRE(dev_put(dA.col_idx, ci, (size_t)nnzb * 4) && dev_put(dA.row_ptr, rp, (size_t)(mb + 1) * 4));
        for (int op = 0; op < 2; op++) {
            int64_t k = op ? rows : cols, m = op ? cols : rows;
            bsk_dense B = bsk_test_dense(k, n, 0, BSK_F16, rng), C = bsk_test_dense(m, n, 0, BSK_F32, rng), dB, dC;
            void *bb = NULL, *cb = NULL;
            REQUIRE(dense_up(&B, 0, &dB, &bb) && dense_up(&C, 0, &dC, &cb));
            bsk_context *ctx = NULL;
            REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
            for (int fam = -1; fam <= 2; fam++) {
                for (int b = 0; b < 2; b++) {
                    bsk_status s = fam < 0 ? bsk_spmm(ctx, (bsk_op)op, 1.0f, &dA, &dB, b ? 1.0f : 0.0f, &dC)
                                           : family_spmm(ctx, fam, (bsk_op)op, 1.0f, &dA, &dB, b ? 1.0f : 0.0f, &dC);
                    CHECK(s == BSK_SUCCESS || s == BSK_ERR_UNSUPPORTED);
                    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
                }
            }
            bsk_destroy(ctx);
            dev_free(bb);
            dev_free(cb);
            bsk_test_dense_free(&B);
            bsk_test_dense_free(&C);
        }
        /* SDDMM on the same malformed pattern */
        {
            const int64_t D = 24;
            bsk_dense X = bsk_test_dense(rows, D, 0, BSK_F16, rng), Y = bsk_test_dense(cols, D, 0, BSK_F16, rng), dX, dY;
            void *xb = NULL, *yb = NULL;
            REQUIRE(dense_up(&X, 0, &dX, &xb) && dense_up(&Y, 0, &dY, &yb));
            bsk_context *ctx = NULL;
            REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
            for (int fam = -1; fam <= 2; fam++) {
                bsk_status s = fam < 0 ? bsk_sddmm(ctx, 1.0f, &dX, &dY, 0.5f, &dA)
                                       : family_sddmm(ctx, fam, 1.0f, &dX, &dY, 0.5f, &dA);
                CHECK(s == BSK_SUCCESS || s == BSK_ERR_UNSUPPORTED);
                CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
            }
            bsk_destroy(ctx);
            dev_free(xb);
            dev_free(yb);
            bsk_test_dense_free(&X);
            bsk_test_dense_free(&Y);
        }
        free(ci);
        free(rp);
        bsk_bsr_free(&dA);
        bsk_bsr_free(&A);
    }
}

/* ---------------------------------------------------------------- SDDMM cases */

typedef struct {
    int64_t m, k, d; /* out is m x k, X m x d, Y k x d */
    int32_t br, bc;
    bsk_dtype in, out;
    float alpha, beta;
    double density;
    int64_t padx, pady; /* < 0: pad rows to a multiple of 8 elements */
} sd_case;

static void sd_describe(const sd_case *c)
{
    fprintf(stderr, "    case: m %lld k %lld d %lld block %dx%d %s->%s alpha %g beta %g density %.2f padx %lld pady %lld\n",
            (long long)c->m, (long long)c->k, (long long)c->d, c->br, c->bc, dt_name(c->in), dt_name(c->out), c->alpha,
            c->beta, c->density, (long long)c->padx, (long long)c->pady);
}

static void sd_check(bsk_test_ctx *t, const sd_case *c, int expect, unsigned families)
{
    int failed0 = t->failed;
    bsk_rng *rng = bsk_test_rng();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    bsk_bsr S, dS;
    memset(&dS, 0, sizeof dS);
    bsk_status s = bsk_bsr_random(c->m, c->k, c->br, c->bc, c->density, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), c->out, &S);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s) { bsk_destroy(ctx); return; }
    const int64_t nv = S.nnzb * c->br * c->bc;
    const size_t es = bsk_dtype_size(c->out), vbytes = (size_t)nv * es;
    /* beta == 0: values poisoned (padding too: it must come back 0); else random values, zero padding */
    if (c->beta == 0.0f)
        for (int64_t i = 0; i < nv; i++) bsk__store(S.values, c->out, i, NAN);
    void *v0 = malloc(vbytes + 1), *got = malloc(vbytes + 1), *first = malloc(vbytes + 1);
    memcpy(v0, S.values, vbytes);
    const int64_t auto_pad = (8 - c->d % 8) % 8;
    bsk_dense X = bsk_test_dense(c->m, c->d, c->padx >= 0 ? c->padx : auto_pad, c->in, rng),
              Y = bsk_test_dense(c->k, c->d, c->pady >= 0 ? c->pady : auto_pad, c->in, rng);
    double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref);
    bsk_ref_sddmm(c->alpha, &X, &Y, c->beta, &S, ref);
    bsk_dense dX, dY;
    void *xb = NULL, *yb = NULL;
    int ok = bsk_bsr_clone(&S, BSK_MEM_DEVICE, &dS) == BSK_SUCCESS && dense_up(&X, 0, &dX, &xb) && dense_up(&Y, 0, &dY, &yb);
    CHECK(ok);
    for (int fam = -1; ok && fam <= 2; fam++) {
        if (fam >= 0 && !(families & (1u << fam))) continue;
        for (int rep = 0; rep < 2 && !s; rep++) {
            if (!dev_put(dS.values, v0, vbytes)) s = BSK_ERR_CUDA;
            if (!s) s = fam < 0 ? bsk_sddmm(ctx, c->alpha, &dX, &dY, c->beta, &dS)
                                : family_sddmm(ctx, fam, c->alpha, &dX, &dY, c->beta, &dS);
            if (!s) s = bsk_synchronize(ctx);
            if (!s && !dev_get(rep ? got : first, dS.values, vbytes)) s = BSK_ERR_CUDA;
        }
        CHECK_STATUS(s, BSK_SUCCESS);
        if (s) { s = BSK_SUCCESS; continue; }
        const char *kn = bsk_last_kernel(ctx);
        int want = fam < 0 ? expect : fam == 1 ? EXPECT_TC : fam == 2 ? EXPECT_SIMT : EXPECT_ANY;
        if (!kernel_is(kn, want)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: family %d ran kernel '%s', not the one expected\n", __FILE__, __LINE__, fam, kn);
        }
        double err = bsk_rel_err(got, c->out, ref, nv), tol = bsk_tol(c->in, c->out);
        if (!(err <= tol)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: family %d (%s): rel err %.3e > %.1e\n", __FILE__, __LINE__, fam, kn, err, tol);
        }
        CHECK(memcmp(first, got, vbytes) == 0);
        /* padding entries of partial blocks are exactly 0 */
        int pad_ok = 1;
        for (int64_t b = 0; b < S.nnzb; b++) {
            int64_t i = 0;
            while (S.row_ptr[i + 1] <= b) i++;
            for (int32_t r = 0; r < c->br; r++)
                for (int32_t q = 0; q < c->bc; q++)
                    if (i * c->br + r >= c->m || (int64_t)S.col_idx[b] * c->bc + q >= c->k)
                        pad_ok &= bsk__load(got, c->out, (b * c->br + r) * c->bc + q) == 0.0f;
        }
        CHECK(pad_ok);
    }
    if (t->failed != failed0) sd_describe(c);
    dev_free(xb);
    dev_free(yb);
    bsk_bsr_free(&dS);
    bsk_bsr_free(&S);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
    free(v0);
    free(got);
    free(first);
    free(ref);
    bsk_destroy(ctx);
}

static sd_case sd_default(int32_t br, int32_t bc, bsk_dtype in, bsk_dtype out)
{
    sd_case c;
    memset(&c, 0, sizeof c);
    c.br = br;
    c.bc = bc;
    c.m = 2 * br + br / 2 + 3;
    c.k = 2 * bc + bc / 4 + 5;
    c.d = 72;
    c.in = in;
    c.out = out;
    c.alpha = 0.75f;
    c.density = 0.6;
    c.padx = c.pady = -1;
    return c;
}

BSK_TEST(gpu_sddmm_tensor_core_blocks)
{
    NEED_GPU();
    static const int32_t shapes[][2] = {{16, 16}, {32, 32}, {64, 64}, {128, 128}, {16, 32}, {64, 32}, {48, 80}};
    static const int64_t ds[] = {72, 100, 8, 33};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++) {
            bsk_dtype in = d ? BSK_BF16 : BSK_F16;
            sd_case c = sd_default(shapes[i][0], shapes[i][1], in, i % 2 ? in : BSK_F32);
            c.d = ds[i % 4];
            sd_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
        }
}

BSK_TEST(gpu_sddmm_dtypes_alpha_beta)
{
    NEED_GPU();
    static const bsk_dtype dts[] = {BSK_F32, BSK_F16, BSK_BF16};
    for (int i = 0; i < 3; i++)
        for (int o = 0; o < 2; o++)
            for (int b = 0; b < 2; b++) {
                bsk_dtype out = o ? dts[i] : BSK_F32;
                if (o && dts[i] == BSK_F32) continue;
                sd_case c = sd_default(32, 32, dts[i], out);
                c.beta = b ? 0.5f : 0.0f;
                c.alpha = b ? -1.0f : 1.5f;
                c.padx = 8;
                c.pady = 16;
                int tc = dts[i] != BSK_F32;
                sd_check(t, &c, tc ? EXPECT_TC : EXPECT_SIMT, (tc ? FAM_PORTABLE : 0) | FAM_SIMT);
            }
}

BSK_TEST(gpu_sddmm_simt_and_edges)
{
    NEED_GPU();
    static const int32_t shapes[][2] = {{8, 8}, {24, 24}, {8, 24}, {3, 5}};
    for (size_t i = 0; i < 4; i++)
        for (int d = 0; d < 2; d++) {
            bsk_dtype in = d ? BSK_F16 : BSK_F32;
            sd_case c = sd_default(shapes[i][0], shapes[i][1], in, in);
            c.d = 19 + 8 * (int64_t)i;
            c.beta = d ? 0.25f : 0.0f;
            sd_check(t, &c, EXPECT_SIMT, FAM_SIMT);
        }
    for (int d = 0; d < 2; d++) {
        bsk_dtype in = d ? BSK_BF16 : BSK_F16;
        sd_case c = sd_default(16, 16, in, BSK_F32);
        /* one row of output; D = 1 */
        c.m = 1;
        c.d = 1;
        c.density = 1.0;
        sd_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
        /* ld not a multiple of 8: portable declines */
        c = sd_default(32, 32, in, in);
        c.d = 30;
        c.padx = 1;
        c.pady = 3;
        sd_check(t, &c, EXPECT_ANY, FAM_SIMT);
        /* low density, skewless but with empty rows */
        c = sd_default(32, 16, in, BSK_F32);
        c.m = 32 * 20;
        c.k = 16 * 10 + 3;
        c.density = 0.1;
        sd_check(t, &c, EXPECT_TC, FAM_PORTABLE | FAM_SIMT);
    }
}

/* A device pattern rewritten in place: after bsk_forget_patterns the op-T result follows the new pattern
   (the cached transpose index of the old one is gone). Same pointers, same sizes: only forget can tell. */
BSK_TEST(gpu_spmm_forget_patterns_after_rewrite)
{
    NEED_GPU();
    bsk_context *ctx = NULL;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    CHECK_STATUS(bsk_set_pattern_cache(ctx, 2), BSK_ERR_INVALID_ARGUMENT);
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
    bsk_rng *rng = bsk_test_rng();
    const int64_t rows = 32 * 12, cols = 32 * 10, n = 40;
    bsk_bsr A1, A2, dA;
    REQUIRE_OK(bsk_bsr_random(rows, cols, 32, 32, 0.3, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A1));
    REQUIRE_OK(bsk_bsr_random(rows, cols, 32, 32, 0.3, BSK_PATTERN_SKEWED, bsk_rng_next(rng), BSK_F16, &A2));
    REQUIRE(A1.nnzb == A2.nnzb);
    REQUIRE_OK(bsk_bsr_clone(&A1, BSK_MEM_DEVICE, &dA));
    bsk_dense B = bsk_test_dense(rows, n, 0, BSK_F16, rng), C = bsk_test_dense_poison(cols, n, 0, BSK_F32), dB, dC;
    void *bb = NULL, *cb = NULL;
    REQUIRE(dense_up(&B, 0, &dB, &bb) && dense_up(&C, 0, &dC, &cb));
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS); /* caches A1's index */
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    /* rewrite the pattern and values in place: same addresses, same sizes */
    int64_t mb = bsk_bsr_mb(&A1), vbytes = A1.nnzb * 32 * 32 * 2;
    CHECK(dev_put(dA.row_ptr, A2.row_ptr, (size_t)(mb + 1) * 4));
    CHECK(dev_put(dA.col_idx, A2.col_idx, (size_t)A2.nnzb * 4));
    CHECK(dev_put(dA.values, A2.values, (size_t)vbytes));
    CHECK_STATUS(bsk_forget_patterns(ctx), BSK_SUCCESS);
    CHECK(dev_put(dC.data, C.data, (size_t)(cols * n) * 4)); /* poison again */
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    float *got = (float *)malloc((size_t)(cols * n) * 4);
    double *ref = (double *)malloc((size_t)(cols * n) * sizeof *ref);
    CHECK(dev_get(got, dC.data, (size_t)(cols * n) * 4));
    bsk_ref_spmm(BSK_OP_T, 1.0, &A2, &B, 0.0, NULL, ref);
    bsk_dense g = {cols, n, n, BSK_F32, BSK_MEM_HOST, got};
    CHECK_REL(bsk_rel_err_dense(&g, ref), bsk_tol(BSK_F16, BSK_F32));
    CHECK_STATUS(bsk_forget_patterns(NULL), BSK_ERR_NULL_POINTER);
    /* the default (no cache): rewriting in place needs no call at all */
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK(dev_put(dA.row_ptr, A1.row_ptr, (size_t)(mb + 1) * 4));
    CHECK(dev_put(dA.col_idx, A1.col_idx, (size_t)A1.nnzb * 4));
    CHECK(dev_put(dA.values, A1.values, (size_t)vbytes));
    CHECK(dev_put(dC.data, C.data, (size_t)(cols * n) * 4));
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(dev_get(got, dC.data, (size_t)(cols * n) * 4));
    bsk_ref_spmm(BSK_OP_T, 1.0, &A1, &B, 0.0, NULL, ref);
    CHECK_REL(bsk_rel_err_dense(&g, ref), bsk_tol(BSK_F16, BSK_F32));
    free(got); free(ref);
    dev_free(bb); dev_free(cb);
    bsk_bsr_free(&dA); bsk_bsr_free(&A1); bsk_bsr_free(&A2);
    bsk_test_dense_free(&B); bsk_test_dense_free(&C);
    bsk_destroy(ctx);
}
