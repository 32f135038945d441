/* test_cpu.c — the CPU backend (bsk_spmm / bsk_sddmm on host memory) against the float64 references in
   tests/util.c, and bsk_bsr_transpose_index against a brute-force scan. Every output starts poisoned (NaN)
   when beta = 0, every element is compared, and the bytes between rows (ld > cols) must stay untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

static const bsk_dtype DTYPES[3] = {BSK_F32, BSK_F16, BSK_BF16};

static bsk_dense dense_copy(const bsk_dense *D)
{
    bsk_dense c = *D;
    size_t bytes = (size_t)(D->rows * D->ld) * bsk_dtype_size(D->dtype);
    c.data = malloc(bytes ? bytes : 1);
    memcpy(c.data, D->data, bytes);
    return c;
}

/* The error of `got` against `ref` measured on `scale`: *norm = ‖got − ref‖ / ‖scale‖ and *max = max |got − ref| /
   max |scale| (the max catches a few wrong elements that the norm would average away). scale = ref: relative to
   the result; scale = the magnitude reference: relative to the size of the terms, which bounds the rounding error
   of any summation order. NaN if got has a non-finite element; a zero scale gives the absolute error. */
static void err_on_scale(const bsk_dense *got, const double *ref, const double *scale, double *norm, double *max)
{
    double num = 0, den = 0, md = 0, ms = 0;
    for (int64_t i = 0; i < got->rows; i++)
        for (int64_t j = 0; j < got->cols; j++) {
            double g = bsk__load(got->data, got->dtype, i * got->ld + j), r = ref[i * got->cols + j];
            double sc = scale[i * got->cols + j];
            if (!isfinite(g)) {
                *norm = *max = NAN;
                return;
            }
            num += (g - r) * (g - r);
            den += sc * sc;
            md = fmax(md, fabs(g - r));
            ms = fmax(ms, fabs(sc));
        }
    *norm = den > 0 ? sqrt(num / den) : sqrt(num);
    *max = ms > 0 ? md / ms : md;
}

/* The bytes of D in columns cols..ld-1 are the same as in `orig` (bitwise: NaN poison included). */
static int pad_untouched(const bsk_dense *D, const bsk_dense *orig)
{
    size_t es = bsk_dtype_size(D->dtype);
    for (int64_t i = 0; i < D->rows; i++)
        if (D->ld > D->cols &&
            memcmp((char *)D->data + (size_t)(i * D->ld + D->cols) * es,
                   (char *)orig->data + (size_t)(i * D->ld + D->cols) * es, (size_t)(D->ld - D->cols) * es))
            return 0;
    return 1;
}

typedef struct {
    bsk_op op;
    int64_t m, k, n; /* A is m x k (op N computes m x n; op T computes k x n) */
    int br, bc;
    double density;
    bsk_pattern pattern;
    bsk_dtype ab, cd;
    float alpha, beta;
    int64_t padb, padc;
} spmm_case;

/* Run one SpMM on the CPU and check every element against the reference. */
static void run_spmm(bsk_test_ctx *t, bsk_context *ctx, const spmm_case *c)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(c->m, c->k, c->br, c->bc, c->density, c->pattern, bsk_rng_next(rng), c->ab, &A));
    int64_t brows = c->op == BSK_OP_N ? c->k : c->m, crows = c->op == BSK_OP_N ? c->m : c->k;
    bsk_dense B = bsk_test_dense(brows, c->n, c->padb, c->ab, rng);
    bsk_dense C = c->beta == 0.0f ? bsk_test_dense_poison(crows, c->n, c->padc, c->cd)
                                  : bsk_test_dense(crows, c->n, c->padc, c->cd, rng);
    bsk_dense C0 = dense_copy(&C);
    double *ref = (double *)malloc((size_t)(crows * c->n + 1) * sizeof *ref);
    double *mag = (double *)malloc((size_t)(crows * c->n + 1) * sizeof *mag);
    bsk_ref_spmm(c->op, c->alpha, &A, &B, c->beta, &C0, ref);
    bsk_ref_spmm_mag(c->op, c->alpha, &A, &B, c->beta, &C0, mag);
    bsk_status s = bsk_spmm(ctx, c->op, c->alpha, &A, &B, c->beta, &C);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s == BSK_SUCCESS) {
        double tol = bsk_tol(c->ab, c->cd);
        /* relative to the result, or — where the result cancels (tiny outputs: M = N = 1) — to the size of its
           terms; a wrong element is off by about its own size and fails both */
        double e, em, e_mag, em_mag;
        err_on_scale(&C, ref, ref, &e, &em);
        err_on_scale(&C, ref, mag, &e_mag, &em_mag);
        if (!(e <= tol)) e = fmin(e, e_mag);
        if (!(em <= 4 * tol)) em = fmin(em, em_mag);
        int bad = !(e <= tol) || !(em <= 4 * tol) || !pad_untouched(&C, &C0);
        if (bad)
            fprintf(stderr, "  spmm op=%c A %lldx%lld b=%dx%d d=%.2f %s N=%lld dt=%d->%d alpha=%g beta=%g "
                            "ld+%lld/%lld: rel %.2e max %.2e pad %s\n",
                    c->op == BSK_OP_N ? 'N' : 'T', (long long)c->m, (long long)c->k, c->br, c->bc, c->density,
                    c->pattern == BSK_PATTERN_UNIFORM ? "uniform" : "skewed", (long long)c->n, (int)c->ab,
                    (int)c->cd, c->alpha, c->beta, (long long)c->padb, (long long)c->padc, e, em,
                    pad_untouched(&C, &C0) ? "ok" : "WRITTEN");
        CHECK_REL(e, tol);
        CHECK_REL(em, 4 * tol);
        CHECK(pad_untouched(&C, &C0));
    }
    free(ref);
    free(mag);
    bsk_test_dense_free(&C0);
    bsk_test_dense_free(&C);
    bsk_test_dense_free(&B);
    bsk_bsr_free(&A);
}

/* Random tails: a size that is rarely a multiple of the block. */
static int64_t rnd_dim(bsk_rng *r, int b, int64_t max_blocks)
{
    return bsk_rng_int(r, 1, max_blocks) * b - bsk_rng_int(r, 0, b - 1);
}

static const float ALPHAS[3] = {0.0f, 1.0f, 2.5f};
static const float BETAS[3] = {0.0f, 1.0f, -0.5f};

BSK_TEST(cpu_spmm_block_shapes)
{
    static const int shapes[][2] = {{1, 1}, {3, 3}, {16, 16}, {32, 32}, {64, 64}, {128, 128},
                                    {16, 32}, {32, 16}, {8, 24}, {5, 2}};
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int op = 0; op < 2; op++)
            for (int rep = 0; rep < 2; rep++) {
                int br = shapes[s][0], bc = shapes[s][1];
                int64_t maxb = br * bc >= 4096 ? 3 : br * bc >= 256 ? 6 : 12;
                spmm_case c = {(bsk_op)op, rnd_dim(r, br, maxb), rnd_dim(r, bc, maxb), 2 * bsk_rng_int(r, 0, 20) + 1,
                               br, bc, 0.1 + 0.8 * bsk_rng_uniform(r), rep ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                               BSK_F32, BSK_F32, 1.0f, rep ? -0.5f : 0.0f, bsk_rng_int(r, 0, 3), bsk_rng_int(r, 0, 3)};
                run_spmm(t, ctx, &c);
            }
    bsk_destroy(ctx);
}

/* Contractions longer than one packed chunk, more than one tile of output columns, huge thin blocks. */
BSK_TEST(cpu_spmm_long_rows_and_wide_n)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (int op = 0; op < 2; op++) {
        spmm_case a = {(bsk_op)op, 70, 16 * 40 - 5, 203, 16, 16, 0.9, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32,
                       1.0f, 1.0f, 1, 2};
        run_spmm(t, ctx, &a);
        spmm_case b = {(bsk_op)op, 300, 500, 397, 128, 128, 0.8, BSK_PATTERN_SKEWED, BSK_BF16, BSK_F32,
                       2.5f, 0.0f, 0, 5};
        run_spmm(t, ctx, &b);
        spmm_case c = {(bsk_op)op, 1030, 7, 9, 1024, 3, 1.0, BSK_PATTERN_UNIFORM, BSK_F16, BSK_F16,
                       1.0f, -0.5f, 2, 0};
        run_spmm(t, ctx, &c);
        spmm_case d = {(bsk_op)op, 5, 1500, 11, 3, 1024, 1.0, BSK_PATTERN_UNIFORM, BSK_F32, BSK_BF16,
                       1.0f, 0.0f, 0, 1};
        run_spmm(t, ctx, &d);
        spmm_case e = {(bsk_op)op, 90, 400, (int64_t)bsk_rng_int(r, 190, 200), 1, 1, 0.3, BSK_PATTERN_SKEWED,
                       BSK_F32, BSK_F32, 1.0f, 0.0f, 0, 0};
        run_spmm(t, ctx, &e);
    }
    bsk_destroy(ctx);
}

BSK_TEST(cpu_spmm_dtype_pairs)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (int ab = 0; ab < 3; ab++)
        for (int cd = 0; cd < 3; cd++)
            for (int op = 0; op < 2; op++) {
                int rect = (ab + cd + op) % 2;
                int br = rect ? 8 : 16, bc = rect ? 24 : 16;
                spmm_case c = {(bsk_op)op, rnd_dim(r, br, 6), rnd_dim(r, bc, 6), 2 * bsk_rng_int(r, 1, 30) + 1,
                               br, bc, 0.5, op ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, DTYPES[ab], DTYPES[cd],
                               2.5f, cd == 1 ? 0.0f : -0.5f, 3, 2};
                run_spmm(t, ctx, &c);
            }
    bsk_destroy(ctx);
}

BSK_TEST(cpu_spmm_alpha_beta)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int op = 0; op < 2; op++) {
                bsk_dtype cd = DTYPES[(a + b) % 3];
                spmm_case c = {(bsk_op)op, rnd_dim(r, 32, 4), rnd_dim(r, 32, 4), 2 * bsk_rng_int(r, 0, 20) + 1,
                               32, 32, 0.5, BSK_PATTERN_UNIFORM, BSK_F32, cd, ALPHAS[a], BETAS[b], 1, 3};
                run_spmm(t, ctx, &c);
            }
    bsk_destroy(ctx);
}

/* No blocks at all, a single row, a single column of B, empty block rows. */
BSK_TEST(cpu_spmm_edges)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    for (int op = 0; op < 2; op++)
        for (int b = 0; b < 3; b++) {
            spmm_case nnz0 = {(bsk_op)op, 40, 50, 7, 16, 16, 0.0, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32,
                              1.0f, BETAS[b], 0, 2};
            run_spmm(t, ctx, &nnz0);
            spmm_case m1 = {(bsk_op)op, 1, 100, 13, 1, 16, 1.0, BSK_PATTERN_UNIFORM, BSK_F16, BSK_F32,
                            2.5f, BETAS[b], 0, 0};
            run_spmm(t, ctx, &m1);
            spmm_case m1b = {(bsk_op)op, 1, 100, 13, 32, 32, 1.0, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32,
                             1.0f, BETAS[b], 4, 0};
            run_spmm(t, ctx, &m1b);
            spmm_case n1 = {(bsk_op)op, 45, 37, 1, 8, 8, 0.6, BSK_PATTERN_UNIFORM, BSK_BF16, BSK_BF16,
                            1.0f, BETAS[b], 0, 5};
            run_spmm(t, ctx, &n1);
            /* skewed at low density: most block rows (and columns) are empty */
            spmm_case sk = {(bsk_op)op, 400, 300, 9, 4, 4, 0.02, BSK_PATTERN_SKEWED, BSK_F32, BSK_F16,
                            1.0f, BETAS[b], 1, 1};
            run_spmm(t, ctx, &sk);
        }
    /* an empty contraction (op N: A has no columns; op T: A has no rows): C = beta·C */
    for (int b = 0; b < 3; b++) {
        spmm_case k0 = {BSK_OP_N, 33, 0, 5, 8, 8, 0.5, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F16, 1.0f, BETAS[b], 0, 1};
        run_spmm(t, ctx, &k0);
        spmm_case m0 = {BSK_OP_T, 0, 33, 5, 8, 8, 0.5, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32, 1.0f, BETAS[b], 0, 1};
        run_spmm(t, ctx, &m0);
    }
    /* the skewed pattern at low density really has empty block rows */
    bsk_bsr A;
    bsk_bsr_stats st;
    REQUIRE_OK(bsk_bsr_random(400, 300, 4, 4, 0.02, BSK_PATTERN_SKEWED, 7, BSK_F32, &A));
    REQUIRE_OK(bsk_bsr_stats_get(&A, &st));
    CHECK(st.empty_rows > 0);
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
}

static void set_threads(const char *v)
{
    if (v) setenv("BSK_NUM_THREADS", v, 1);
    else unsetenv("BSK_NUM_THREADS");
}

static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    if (!v) return NULL;
    char *c = (char *)malloc(strlen(v) + 1);
    strcpy(c, v);
    return c;
}

static void restore_env(const char *name, char *v)
{
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    free(v);
}

/* Same bits on every run and for every thread count, for both ops and both kernels (AVX2 and portable). */
BSK_TEST(cpu_spmm_deterministic)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    char *saved = saved_env("BSK_NUM_THREADS"), *saved_p = saved_env("BSK_CPU_PORTABLE");
    static const char *threads[] = {"1", "2", "3", "7", NULL};
    for (int portable = 0; portable < 2; portable++) {
        if (portable) setenv("BSK_CPU_PORTABLE", "1", 1);
        else unsetenv("BSK_CPU_PORTABLE");
        for (int op = 0; op < 2; op++) {
            bsk_bsr A;
            REQUIRE_OK(bsk_bsr_random(301, 277, 16, 8, 0.4, BSK_PATTERN_SKEWED, bsk_rng_next(r), BSK_BF16, &A));
            int64_t brows = op ? 301 : 277, crows = op ? 277 : 301, n = 211;
            bsk_dense B = bsk_test_dense(brows, n, 1, BSK_BF16, r);
            bsk_dense C0 = bsk_test_dense(crows, n, 0, BSK_F32, r), first = dense_copy(&C0);
            double *ref = (double *)malloc((size_t)(crows * n) * sizeof *ref);
            bsk_ref_spmm((bsk_op)op, 1.5, &A, &B, -0.5, &C0, ref);
            CHECK_STATUS(bsk_spmm(ctx, (bsk_op)op, 1.5f, &A, &B, -0.5f, &first), BSK_SUCCESS);
            CHECK_REL(bsk_rel_err_dense(&first, ref), bsk_tol(BSK_BF16, BSK_F32));
            for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++)
                for (int rep = 0; rep < 2; rep++) {
                    set_threads(threads[i]);
                    bsk_dense C = dense_copy(&C0);
                    CHECK_STATUS(bsk_spmm(ctx, (bsk_op)op, 1.5f, &A, &B, -0.5f, &C), BSK_SUCCESS);
                    int same = memcmp(C.data, first.data, (size_t)(crows * n) * 4) == 0;
                    if (!same) fprintf(stderr, "  op %d portable %d threads %s: bits differ\n", op, portable,
                                       threads[i] ? threads[i] : "auto");
                    CHECK(same);
                    bsk_test_dense_free(&C);
                }
            set_threads(saved);
            free(ref);
            bsk_test_dense_free(&first);
            bsk_test_dense_free(&C0);
            bsk_test_dense_free(&B);
            bsk_bsr_free(&A);
        }
    }
    restore_env("BSK_NUM_THREADS", saved);
    restore_env("BSK_CPU_PORTABLE", saved_p);
    bsk_destroy(ctx);
}

/* The portable kernel (forced on machines that have AVX2) is right too, dtypes and tails included. */
BSK_TEST(cpu_spmm_portable_kernel)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    char *saved_p = saved_env("BSK_CPU_PORTABLE");
    setenv("BSK_CPU_PORTABLE", "1", 1);
    for (int op = 0; op < 2; op++)
        for (int d = 0; d < 3; d++) {
            spmm_case c = {(bsk_op)op, rnd_dim(r, 16, 8), rnd_dim(r, 32, 5), 2 * bsk_rng_int(r, 0, 30) + 1,
                           16, 32, 0.5, BSK_PATTERN_SKEWED, DTYPES[d], DTYPES[(d + 1) % 3], 2.5f, -0.5f, 1, 1};
            run_spmm(t, ctx, &c);
        }
    restore_env("BSK_CPU_PORTABLE", saved_p);
    bsk_destroy(ctx);
}

/* ---------------------------------------------------------------- SDDMM */

typedef struct {
    int64_t m, k, d;
    int br, bc;
    double density;
    bsk_pattern pattern;
    bsk_dtype xd, od;
    float alpha, beta;
    int64_t padx, pady;
} sddmm_case;

static void run_sddmm(bsk_test_ctx *t, bsk_context *ctx, const sddmm_case *c)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr O;
    REQUIRE_OK(bsk_bsr_random(c->m, c->k, c->br, c->bc, c->density, c->pattern, bsk_rng_next(rng), c->od, &O));
    bsk_dense X = bsk_test_dense(c->m, c->d, c->padx, c->xd, rng), Y = bsk_test_dense(c->k, c->d, c->pady, c->xd, rng);
    int64_t bsz = (int64_t)c->br * c->bc, nv = O.nnzb * bsz;
    double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref), *mag = (double *)malloc((size_t)(nv + 1) * sizeof *mag);
    REQUIRE(ref && mag);
    bsk_ref_sddmm(c->alpha, &X, &Y, c->beta, &O, ref); /* old values: random, padding zero */
    bsk_ref_sddmm_mag(c->alpha, &X, &Y, c->beta, &O, mag);
    if (c->beta == 0.0f) /* poison every value, padding included: all must be written */
        for (int64_t i = 0; i < nv; i++) bsk__store(O.values, O.dtype, i, NAN);
    bsk_status s = bsk_sddmm(ctx, c->alpha, &X, &Y, c->beta, &O);
    CHECK_STATUS(s, BSK_SUCCESS);
    if (s == BSK_SUCCESS) {
        double tol = bsk_tol(c->xd, c->od), e = bsk_rel_err(O.values, O.dtype, ref, nv);
        /* padding entries are written as exact zeros */
        int64_t mb = bsk_bsr_mb(&O), pad_bad = 0;
        double md = 0, mr = 0, mm = 0, m2 = 0, d2 = 0;
        for (int64_t i = 0; i < mb; i++)
            for (int32_t k = O.row_ptr[i]; k < O.row_ptr[i + 1]; k++)
                for (int64_t rr = 0; rr < c->br; rr++)
                    for (int64_t cc = 0; cc < c->bc; cc++) {
                        int64_t idx = k * bsz + rr * c->bc + cc;
                        double g = bsk__load(O.values, O.dtype, idx);
                        int pad = i * c->br + rr >= c->m || (int64_t)O.col_idx[k] * c->bc + cc >= c->k;
                        if (pad && !(g == 0.0)) pad_bad++;
                        md = isfinite(g) ? fmax(md, fabs(g - ref[idx])) : INFINITY;
                        mr = fmax(mr, fabs(ref[idx]));
                        mm = fmax(mm, mag[idx]);
                        m2 += mag[idx] * mag[idx];
                        d2 += (g - ref[idx]) * (g - ref[idx]);
                    }
        double em = mr > 0 ? md / mr : md;
        /* relative to the result, or — where it cancels (alpha·X·Yᵀ against beta·old on a few values) — to the size
           of its terms, as the SpMM checks do; a wrong value is off by about its own size and fails both */
        if (!(e <= tol) && m2 > 0) e = fmin(e, sqrt(d2 / m2));
        if (!(em <= 4 * tol) && mm > 0) em = fmin(em, md / mm);
        if (!(e <= tol) || !(em <= 4 * tol) || pad_bad)
            fprintf(stderr, "  sddmm %lldx%lld D=%lld b=%dx%d d=%.2f dt=%d->%d alpha=%g beta=%g: rel %.2e max %.2e "
                            "pad nonzero %lld\n", (long long)c->m, (long long)c->k, (long long)c->d, c->br, c->bc,
                    c->density, (int)c->xd, (int)c->od, c->alpha, c->beta, e, em, (long long)pad_bad);
        CHECK_REL(e, tol);
        CHECK_REL(em, 4 * tol);
        CHECK(pad_bad == 0);
    }
    free(ref);
    free(mag);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
    bsk_bsr_free(&O);
}

BSK_TEST(cpu_sddmm_block_shapes)
{
    static const int shapes[][2] = {{1, 1}, {3, 3}, {16, 16}, {32, 32}, {64, 64}, {128, 128},
                                    {16, 32}, {32, 16}, {8, 24}, {2, 200}};
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int rep = 0; rep < 2; rep++) {
            int br = shapes[s][0], bc = shapes[s][1];
            int64_t maxb = br * bc >= 4096 ? 3 : br * bc >= 256 ? 5 : 10;
            sddmm_case c = {rnd_dim(r, br, maxb), rnd_dim(r, bc, maxb), bsk_rng_int(r, 1, 40), br, bc,
                            0.2 + 0.6 * bsk_rng_uniform(r), rep ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                            BSK_F32, BSK_F32, rep ? 2.5f : 1.0f, rep ? -0.5f : 0.0f, bsk_rng_int(r, 0, 3),
                            bsk_rng_int(r, 0, 3)};
            run_sddmm(t, ctx, &c);
        }
    bsk_destroy(ctx);
}

BSK_TEST(cpu_sddmm_dtypes_alpha_beta)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    for (int xd = 0; xd < 3; xd++)
        for (int od = 0; od < 2; od++)
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) {
                    if (xd == 0 && od == 1) continue; /* out dtype is F32 or X's dtype: F32/F32 once */
                    int rect = (a + b) % 2;
                    sddmm_case c = {rnd_dim(r, rect ? 8 : 16, 5), rnd_dim(r, rect ? 24 : 16, 5),
                                    bsk_rng_int(r, 1, 30), rect ? 8 : 16, rect ? 24 : 16, 0.5,
                                    BSK_PATTERN_UNIFORM, DTYPES[xd], od ? DTYPES[xd] : BSK_F32, ALPHAS[a], BETAS[b],
                                    1, 2};
                    run_sddmm(t, ctx, &c);
                }
    bsk_destroy(ctx);
}

/* D longer than one packed chunk, D = 0 (the product is empty: out = beta·out), blocks wider than a tile. */
BSK_TEST(cpu_sddmm_long_and_empty)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    sddmm_case a = {100, 90, 600, 32, 32, 0.5, BSK_PATTERN_SKEWED, BSK_BF16, BSK_F32, 1.0f, 1.0f, 3, 0};
    run_sddmm(t, ctx, &a);
    sddmm_case b = {50, 60, 0, 16, 16, 0.5, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32, 1.0f, -0.5f, 0, 0};
    run_sddmm(t, ctx, &b);
    sddmm_case b0 = {50, 60, 0, 16, 16, 0.5, BSK_PATTERN_UNIFORM, BSK_F16, BSK_F16, 2.5f, 0.0f, 0, 0};
    run_sddmm(t, ctx, &b0);
    sddmm_case c = {9, 990, 20, 3, 500, 1.0, BSK_PATTERN_UNIFORM, BSK_F16, BSK_F16, 2.5f, 0.0f, 1, 1};
    run_sddmm(t, ctx, &c);
    sddmm_case d = {1, 70, 33, 1, 16, 1.0, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32, 1.0f, 0.0f, 0, 0};
    run_sddmm(t, ctx, &d);
    sddmm_case e = {2000, 3, 5, 1024, 2, 1.0, BSK_PATTERN_UNIFORM, BSK_F32, BSK_F32, 1.0f, 1.0f, 0, 0};
    run_sddmm(t, ctx, &e);
    bsk_destroy(ctx);
}

BSK_TEST(cpu_sddmm_deterministic)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    char *saved = saved_env("BSK_NUM_THREADS");
    bsk_bsr O;
    REQUIRE_OK(bsk_bsr_random(200, 170, 16, 24, 0.5, BSK_PATTERN_SKEWED, bsk_rng_next(r), BSK_F32, &O));
    bsk_dense X = bsk_test_dense(200, 300, 0, BSK_F16, r), Y = bsk_test_dense(170, 300, 2, BSK_F16, r);
    size_t bytes = (size_t)(O.nnzb * 16 * 24) * 4;
    void *orig = malloc(bytes), *first = malloc(bytes);
    memcpy(orig, O.values, bytes);
    CHECK_STATUS(bsk_sddmm(ctx, 1.5f, &X, &Y, 0.5f, &O), BSK_SUCCESS);
    memcpy(first, O.values, bytes);
    static const char *threads[] = {"1", "2", "5", NULL};
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++)
        for (int rep = 0; rep < 2; rep++) {
            set_threads(threads[i]);
            memcpy(O.values, orig, bytes);
            CHECK_STATUS(bsk_sddmm(ctx, 1.5f, &X, &Y, 0.5f, &O), BSK_SUCCESS);
            CHECK(memcmp(O.values, first, bytes) == 0);
        }
    restore_env("BSK_NUM_THREADS", saved);
    free(orig);
    free(first);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
    bsk_bsr_free(&O);
    bsk_destroy(ctx);
}

/* ---------------------------------------------------------------- transpose index */

static void check_tindex(bsk_test_ctx *t, const bsk_bsr *A)
{
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    int32_t *tp = (int32_t *)malloc((size_t)(nb + 1) * 4), *tr = (int32_t *)malloc((size_t)(A->nnzb + 1) * 4);
    int32_t *tb = (int32_t *)malloc((size_t)(A->nnzb + 1) * 4);
    CHECK_STATUS(bsk_bsr_transpose_index(A, tp, tr, tb), BSK_SUCCESS);
    /* brute force: column j's blocks are every (i, k) with col_idx[k] == j, scanned in block-row order */
    int64_t at = 0, bad = 0;
    for (int64_t j = 0; j < nb; j++) {
        if (tp[j] != at) bad++;
        for (int64_t i = 0; i < mb; i++)
            for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
                if (A->col_idx[k] == j) {
                    if (at >= A->nnzb || tr[at] != i || tb[at] != k) bad++;
                    at++;
                }
    }
    CHECK(tp[nb] == A->nnzb);
    CHECK(at == A->nnzb);
    CHECK(bad == 0);
    free(tp);
    free(tr);
    free(tb);
}

BSK_TEST(cpu_transpose_index_matches_scan)
{
    bsk_rng *r = bsk_test_rng();
    for (int rep = 0; rep < 30; rep++) {
        int br = (int)bsk_rng_int(r, 1, 9), bc = (int)bsk_rng_int(r, 1, 9);
        bsk_bsr A;
        double d = rep % 5 == 0 ? 0.0 : rep % 5 == 1 ? 1.0 : bsk_rng_uniform(r);
        REQUIRE_OK(bsk_bsr_random(bsk_rng_int(r, 1, 120), bsk_rng_int(r, 1, 120), br, bc, d,
                                  rep % 2 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, bsk_rng_next(r), BSK_F32, &A));
        check_tindex(t, &A);
        bsk_bsr_free(&A);
    }
    /* no rows at all: only t_ptr (all zero) is written */
    bsk_bsr E;
    REQUIRE_OK(bsk_bsr_random(0, 10, 4, 4, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &E));
    int32_t tp[4] = {-1, -1, -1, -1};
    CHECK_STATUS(bsk_bsr_transpose_index(&E, tp, NULL, NULL), BSK_SUCCESS);
    CHECK(tp[0] == 0 && tp[1] == 0 && tp[2] == 0 && tp[3] == 0);
    bsk_bsr_free(&E);
}

BSK_TEST(cpu_transpose_index_rejects_bad_input)
{
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(40, 30, 4, 5, 0.5, BSK_PATTERN_UNIFORM, 3, BSK_F32, &A));
    int32_t tp[8], tr[64], tb[64];
    int32_t sentinel[8];
    for (int i = 0; i < 8; i++) tp[i] = sentinel[i] = -7;
    CHECK_STATUS(bsk_bsr_transpose_index(NULL, tp, tr, tb), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_transpose_index(&A, NULL, tr, tb), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, NULL, tb), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, tr, NULL), BSK_ERR_NULL_POINTER);
    bsk_bsr B = A;
    B.block_rows = 0;
    CHECK_STATUS(bsk_bsr_transpose_index(&B, tp, tr, tb), BSK_ERR_INVALID_ARGUMENT);
    B = A;
    B.mem = BSK_MEM_DEVICE;
    CHECK_STATUS(bsk_bsr_transpose_index(&B, tp, tr, tb), BSK_ERR_WRONG_LOCATION);
    /* malformed indices: a column out of range, then a row_ptr that goes backwards */
    int32_t keep = A.col_idx[0];
    A.col_idx[0] = 6;
    CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, tr, tb), BSK_ERR_INVALID_BSR);
    A.col_idx[0] = keep;
    int32_t keep_rp = A.row_ptr[3];
    A.row_ptr[3] = A.row_ptr[2] - 1;
    CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, tr, tb), BSK_ERR_INVALID_BSR);
    A.row_ptr[3] = keep_rp;
    CHECK(memcmp(tp, sentinel, sizeof tp) == 0); /* no failed call wrote anything */
    CHECK_STATUS(bsk_bsr_transpose_index(&A, tp, tr, tb), BSK_SUCCESS);
    CHECK(tp[0] == 0 && tp[6] == A.nnzb);
    bsk_bsr_free(&A);
}
