/* test_api.c — the public API's contract: status strings, version, contexts, and every malformed input to
   bsk_bsr_validate / bsk_spmm / bsk_sddmm giving its named status with the output byte-for-byte untouched;
   then odd but valid inputs (no blocks, M = 1, empty block rows, no columns) giving correct numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

/* ---------------------------------------------------------------- status, version, context */

BSK_TEST(api_status_strings)
{
    const char *seen[BSK_ERR_BAD_LAYOUT + 1];
    for (int s = 0; s <= BSK_ERR_BAD_LAYOUT; s++) {
        seen[s] = bsk_status_string(s);
        REQUIRE(seen[s] != NULL);
        CHECK(seen[s][0] != '\0');
        CHECK(strcmp(seen[s], "unknown status") != 0);
        for (int q = 0; q < s; q++) CHECK(strcmp(seen[s], seen[q]) != 0);
    }
    CHECK(strcmp(bsk_status_string(BSK_SUCCESS), "success") == 0);
    const int unknown[] = {-1, BSK_ERR_BAD_LAYOUT + 1, 99, INT32_MIN, INT32_MAX};
    for (size_t q = 0; q < sizeof unknown / sizeof unknown[0]; q++) {
        const char *u = bsk_status_string(unknown[q]);
        REQUIRE(u != NULL);
        CHECK(strcmp(u, "unknown status") == 0);
    }
    /* the values are a stable ABI */
    CHECK(BSK_SUCCESS == 0 && BSK_ERR_INVALID_ARGUMENT == 1 && BSK_ERR_NULL_POINTER == 2 && BSK_ERR_INVALID_BSR == 3 &&
          BSK_ERR_SHAPE_MISMATCH == 4 && BSK_ERR_UNSUPPORTED == 5 && BSK_ERR_MISALIGNED == 6 &&
          BSK_ERR_WRONG_LOCATION == 7 && BSK_ERR_OVERFLOW == 8 && BSK_ERR_OUT_OF_MEMORY == 9 &&
          BSK_ERR_NO_DEVICE == 10 && BSK_ERR_CUDA == 11 && BSK_ERR_INTERNAL == 12 && BSK_ERR_BAD_LAYOUT == 13);
}

BSK_TEST(api_version_and_dtype_sizes)
{
    CHECK(bsk_version() == BSK_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", BSK_VERSION_MAJOR, BSK_VERSION_MINOR, BSK_VERSION_PATCH);
    REQUIRE(bsk_version_string() != NULL);
    CHECK(strcmp(bsk_version_string(), want) == 0);
    CHECK(bsk_dtype_size(BSK_F32) == 4 && bsk_dtype_size(BSK_F16) == 2 && bsk_dtype_size(BSK_BF16) == 2);
    CHECK(bsk_dtype_size((bsk_dtype)3) == 0 && bsk_dtype_size((bsk_dtype)-1) == 0);
    bsk_bsr A = {10, 17, 4, 8, 0, NULL, NULL, NULL, BSK_F32, BSK_MEM_HOST};
    CHECK(bsk_bsr_mb(&A) == 3 && bsk_bsr_nb(&A) == 3);
    CHECK(bsk_bsr_mb(NULL) == 0 && bsk_bsr_nb(NULL) == 0);
    A.block_rows = 0; A.block_cols = -2;
    CHECK(bsk_bsr_mb(&A) == 0 && bsk_bsr_nb(&A) == 0);
}

static int have_device(void)
{
    bsk_device_info info;
    return bsk_device_query(&info) == BSK_SUCCESS;
}

BSK_TEST(api_context_lifecycle)
{
    bsk_context *ctx = (bsk_context *)(uintptr_t)0x1234;
    CHECK_STATUS(bsk_create(NULL, BSK_BACKEND_AUTO), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_create(&ctx, (bsk_backend)3), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_create(&ctx, (bsk_backend)-1), BSK_ERR_INVALID_ARGUMENT);
    CHECK(ctx == (bsk_context *)(uintptr_t)0x1234); /* untouched on failure */
    bsk_destroy(NULL);                              /* a no-op */

    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    CHECK(bsk_has_device(ctx) == 0); /* the CPU backend never uses a device */
    CHECK(strcmp(bsk_last_kernel(ctx), "none") == 0);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    bsk_destroy(ctx);

    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_AUTO));
    void *st = (void *)(uintptr_t)0x99;
    CHECK_STATUS(bsk_get_stream(ctx, &st), BSK_SUCCESS);
    CHECK(st == NULL); /* the legacy default stream until set */
    /* a stream value is only stored, never used, until work is queued: round trip, then back to NULL */
    CHECK_STATUS(bsk_set_stream(ctx, (void *)(uintptr_t)0x4000), BSK_SUCCESS);
    CHECK_STATUS(bsk_get_stream(ctx, &st), BSK_SUCCESS);
    CHECK(st == (void *)(uintptr_t)0x4000);
    CHECK_STATUS(bsk_set_stream(ctx, NULL), BSK_SUCCESS);
    CHECK_STATUS(bsk_get_stream(ctx, &st), BSK_SUCCESS);
    CHECK(st == NULL);
    CHECK_STATUS(bsk_set_stream(NULL, NULL), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_get_stream(NULL, &st), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_get_stream(ctx, NULL), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_synchronize(NULL), BSK_ERR_NULL_POINTER);
    CHECK(bsk_has_device(NULL) == 0);
    CHECK(strcmp(bsk_last_kernel(NULL), "none") == 0);
    CHECK(bsk_has_device(ctx) == have_device());
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    bsk_destroy(ctx);

    bsk_device_info info;
    CHECK_STATUS(bsk_device_query(NULL), BSK_ERR_NULL_POINTER);
    bsk_status s = bsk_device_query(&info);
    CHECK(s == BSK_SUCCESS || s == BSK_ERR_NO_DEVICE);
    CHECK(info.arch_list[0] != '\0' && memchr(info.arch_list, 0, sizeof info.arch_list) != NULL);
}

BSK_TEST(api_auto_without_gpu_runs_on_cpu)
{
    if (have_device()) SKIP("a CUDA device exists");
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_AUTO)); /* never fails for lack of a GPU */
    CHECK(bsk_has_device(ctx) == 0);
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(24, 16, 8, 8, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F32, &A));
    bsk_dense B = bsk_test_dense(16, 5, 0, BSK_F32, rng), C = bsk_test_dense_poison(24, 5, 0, BSK_F32);
    bsk_status s = bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C);
    CHECK(strcmp(bsk_last_kernel(ctx), "cpu") == 0); /* dispatched to the CPU backend */
    CHECK_STATUS(s, BSK_SUCCESS);
    bsk_destroy(ctx);
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
}

/* bsk_last_kernel names what the last call ran: "none" after a call that ran nothing (an error, empty shapes),
   never a stale name from an earlier call. */
BSK_TEST(api_last_kernel_reports_each_call)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(24, 16, 8, 8, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F32, &A));
    bsk_dense B = bsk_test_dense(16, 5, 0, BSK_F32, rng), C = bsk_test_dense_poison(24, 5, 0, BSK_F32);
    bsk_dense B0 = B, C0 = C, Bbad = B;
    B0.cols = C0.cols = 0; /* empty: nothing to run */
    Bbad.rows = 15;        /* shape mismatch */
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C), BSK_SUCCESS);
    CHECK(strcmp(bsk_last_kernel(ctx), "cpu") == 0);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &Bbad, 0.0f, &C), BSK_ERR_SHAPE_MISMATCH);
    CHECK(strcmp(bsk_last_kernel(ctx), "none") == 0);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C), BSK_SUCCESS);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B0, 0.0f, &C0), BSK_SUCCESS);
    CHECK(strcmp(bsk_last_kernel(ctx), "none") == 0);
    bsk_dense X = bsk_test_dense(24, 5, 0, BSK_F32, rng), Y = bsk_test_dense(16, 5, 0, BSK_F32, rng), Ybad = Y;
    Ybad.rows = 15;
    CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &X, &Y, 0.0f, &A), BSK_SUCCESS); /* A's pattern is 24 x 16 */
    CHECK(strcmp(bsk_last_kernel(ctx), "cpu") == 0);
    CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &X, &Ybad, 0.0f, &A), BSK_ERR_SHAPE_MISMATCH);
    CHECK(strcmp(bsk_last_kernel(ctx), "none") == 0);
    bsk_destroy(ctx);
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
}

BSK_TEST(api_cuda_backend_without_gpu)
{
    if (have_device()) SKIP("a CUDA device exists");
    bsk_context *ctx = (bsk_context *)(uintptr_t)0x777;
    CHECK_STATUS(bsk_create(&ctx, BSK_BACKEND_CUDA), BSK_ERR_NO_DEVICE);
    CHECK(ctx == (bsk_context *)(uintptr_t)0x777);
    bsk_device_info info;
    CHECK_STATUS(bsk_device_query(&info), BSK_ERR_NO_DEVICE);
    CHECK(info.arch_list[0] != '\0'); /* filled GPU or not */
}

/* ---------------------------------------------------------------- fixtures for malformed inputs */

/* A: M x K BSR (tails partial, >= 2 blocks in every block row), B/C for op N and op T, X/Y for SDDMM. */
enum { M = 45, K = 53, N = 7, D = 11, BR = 8, BC = 8, PAD = 3 };

typedef struct {
    bsk_context *ctx;
    bsk_bsr A;
    bsk_dense B, C, Bt, Ct, X, Y;
    size_t vbytes; /* bytes of A.values */
} fixture;

static void fixture_make(fixture *f, bsk_rng *rng)
{
    memset(f, 0, sizeof *f);
    if (bsk_create(&f->ctx, BSK_BACKEND_AUTO)) f->ctx = NULL;
    /* 7 block columns, density 0.5: 3 or 4 blocks per block row */
    if (bsk_bsr_random(M, K, BR, BC, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F32, &f->A)) memset(&f->A, 0, sizeof f->A);
    f->vbytes = (size_t)f->A.nnzb * BR * BC * 4;
    f->B = bsk_test_dense(K, N, PAD, BSK_F32, rng);
    f->C = bsk_test_dense(M, N, PAD, BSK_F32, rng);
    f->Bt = bsk_test_dense(M, N, PAD, BSK_F32, rng);
    f->Ct = bsk_test_dense(K, N, PAD, BSK_F32, rng);
    f->X = bsk_test_dense(M, D, PAD, BSK_F32, rng);
    f->Y = bsk_test_dense(K, D, PAD, BSK_F32, rng);
}

static void fixture_free(fixture *f)
{
    bsk_destroy(f->ctx);
    bsk_bsr_free(&f->A);
    bsk_test_dense_free(&f->B); bsk_test_dense_free(&f->C);
    bsk_test_dense_free(&f->Bt); bsk_test_dense_free(&f->Ct);
    bsk_test_dense_free(&f->X); bsk_test_dense_free(&f->Y);
}

static size_t dense_bytes(const bsk_dense *Dm) { return (size_t)(Dm->rows * Dm->ld) * bsk_dtype_size(Dm->dtype); }

/* Fill a buffer with a recognisable byte pattern; compare later. */
static unsigned char *poison_save(void *p, size_t n)
{
    memset(p, 0x7B, n);
    unsigned char *s = (unsigned char *)malloc(n);
    memcpy(s, p, n);
    return s;
}

/* Ways to break a BSR descriptor or its arrays. Each is applied to a private deep copy. */
typedef enum {
    MUT_UNSORTED, MUT_DUPLICATE, MUT_COL_NEG, MUT_COL_NB, MUT_COL_HUGE, MUT_RP0, MUT_RP_NONMONO, MUT_RP_NEG,
    MUT_NNZB_LESS, MUT_RP_END_MORE, MUT_NNZB_GT_CELLS, MUT_ROWS_HUGE, MUT_COLS_HUGE, MUT_NNZB_HUGE, MUT_BR_HUGE,
    MUT_BC_HUGE, MUT_ROWS_NEG, MUT_COLS_NEG, MUT_BR_ZERO, MUT_BC_NEG, MUT_NNZB_NEG, MUT_RP_NULL, MUT_CI_NULL,
    MUT_VALS_NULL, MUT_RP_MISALIGN, MUT_CI_MISALIGN, MUT_VALS_MISALIGN, MUT_DTYPE_BAD, MUT_DTYPE_NEG, MUT_MEM_BAD,
    MUT_MEM_DEVICE, MUT_COUNT
} mutation;

static const char *MUT_NAMES[MUT_COUNT] = {
    "unsorted col_idx", "duplicate col_idx", "col_idx < 0", "col_idx == nb", "col_idx INT32_MAX",
    "row_ptr[0] != 0", "row_ptr not monotone", "row_ptr negative", "row_ptr[mb] > nnzb (nnzb short)",
    "row_ptr[mb] != nnzb", "nnzb > mb*nb", "rows 2^31", "cols 2^40", "nnzb 2^31", "block_rows 1025",
    "block_cols 2^20", "rows -1", "cols -7", "block_rows 0", "block_cols -8", "nnzb -1", "row_ptr NULL",
    "col_idx NULL", "values NULL", "row_ptr misaligned", "col_idx misaligned", "values misaligned",
    "dtype 7", "dtype -1", "mem 3", "mem DEVICE (host pointers)",
};

/* Apply m to A (a deep host copy; arrays may be rewritten); returns the status every entry point must give
   for it. `where_device` is the status of a descriptor that says DEVICE over host pointers when it is
   checked alone (bsk_bsr_validate: WRONG_LOCATION, GPU or not). */
static bsk_status mutate(bsk_bsr *A, mutation m)
{
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    /* the first block row with two blocks (the fixture has >= 2 in every row) */
    int32_t k2 = A->row_ptr[0];
    switch (m) {
    case MUT_UNSORTED: { int32_t x = A->col_idx[k2]; A->col_idx[k2] = A->col_idx[k2 + 1]; A->col_idx[k2 + 1] = x; return BSK_ERR_INVALID_BSR; }
    case MUT_DUPLICATE: A->col_idx[k2 + 1] = A->col_idx[k2]; return BSK_ERR_INVALID_BSR;
    case MUT_COL_NEG: A->col_idx[k2] = -1; return BSK_ERR_INVALID_BSR;
    case MUT_COL_NB: A->col_idx[A->nnzb - 1] = (int32_t)nb; return BSK_ERR_INVALID_BSR;
    case MUT_COL_HUGE: A->col_idx[A->nnzb - 1] = INT32_MAX; return BSK_ERR_INVALID_BSR;
    case MUT_RP0: A->row_ptr[0] = 1; return BSK_ERR_INVALID_BSR;
    case MUT_RP_NONMONO: A->row_ptr[2] = A->row_ptr[3] + 1; return BSK_ERR_INVALID_BSR;
    case MUT_RP_NEG: A->row_ptr[2] = -3; return BSK_ERR_INVALID_BSR;
    case MUT_NNZB_LESS: A->nnzb -= 1; return BSK_ERR_INVALID_BSR;
    case MUT_RP_END_MORE: A->row_ptr[mb] += 1; return BSK_ERR_INVALID_BSR;
    case MUT_NNZB_GT_CELLS: A->nnzb = mb * nb + 1; return BSK_ERR_INVALID_BSR;
    case MUT_ROWS_HUGE: A->rows = (int64_t)1 << 31; return BSK_ERR_OVERFLOW;
    case MUT_COLS_HUGE: A->cols = (int64_t)1 << 40; return BSK_ERR_OVERFLOW;
    case MUT_NNZB_HUGE: A->nnzb = (int64_t)1 << 31; return BSK_ERR_OVERFLOW;
    case MUT_BR_HUGE: A->block_rows = 1025; return BSK_ERR_OVERFLOW;
    case MUT_BC_HUGE: A->block_cols = 1 << 20; return BSK_ERR_OVERFLOW;
    case MUT_ROWS_NEG: A->rows = -1; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_COLS_NEG: A->cols = -7; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_BR_ZERO: A->block_rows = 0; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_BC_NEG: A->block_cols = -8; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_NNZB_NEG: A->nnzb = -1; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_RP_NULL: A->row_ptr = NULL; return BSK_ERR_NULL_POINTER;
    case MUT_CI_NULL: A->col_idx = NULL; return BSK_ERR_NULL_POINTER;
    case MUT_VALS_NULL: A->values = NULL; return BSK_ERR_NULL_POINTER;
    case MUT_RP_MISALIGN: A->row_ptr = (int32_t *)((char *)A->row_ptr + 1); return BSK_ERR_MISALIGNED;
    case MUT_CI_MISALIGN: A->col_idx = (int32_t *)((char *)A->col_idx + 2); return BSK_ERR_MISALIGNED;
    case MUT_VALS_MISALIGN: A->values = (char *)A->values + 1; return BSK_ERR_MISALIGNED;
    case MUT_DTYPE_BAD: A->dtype = (bsk_dtype)7; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_DTYPE_NEG: A->dtype = (bsk_dtype)-1; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_MEM_BAD: A->mem = (bsk_memory)3; return BSK_ERR_INVALID_ARGUMENT;
    case MUT_MEM_DEVICE: A->mem = BSK_MEM_DEVICE; return BSK_ERR_WRONG_LOCATION;
    default: return BSK_ERR_INTERNAL;
    }
}

/* A deep host copy of A that survives any mutation: its original pointers are kept for freeing. */
typedef struct { bsk_bsr m, orig; } bsr_copy;
static int copy_make(bsr_copy *c, const bsk_bsr *A)
{
    if (bsk_bsr_clone(A, BSK_MEM_HOST, &c->orig)) return 0;
    c->m = c->orig;
    return 1;
}
static void copy_free(bsr_copy *c) { bsk_bsr_free(&c->orig); }

BSK_TEST(api_validate_malformed_bsr)
{
    fixture f;
    fixture_make(&f, bsk_test_rng());
    REQUIRE(f.A.row_ptr != NULL);
    CHECK_STATUS(bsk_bsr_validate(&f.A), BSK_SUCCESS);
    CHECK_STATUS(bsk_bsr_validate(NULL), BSK_ERR_NULL_POINTER);
    for (int m = 0; m < MUT_COUNT; m++) {
        bsr_copy c;
        REQUIRE(copy_make(&c, &f.A));
        bsk_status want = mutate(&c.m, (mutation)m);
        unsigned char *rp = (unsigned char *)malloc((size_t)(bsk_bsr_mb(&f.A) + 1) * 4);
        memcpy(rp, c.orig.row_ptr, (size_t)(bsk_bsr_mb(&f.A) + 1) * 4);
        int fails = t->failed;
        CHECK_STATUS(bsk_bsr_validate(&c.m), want);
        /* validate only reads */
        CHECK(memcmp(rp, c.orig.row_ptr, (size_t)(bsk_bsr_mb(&f.A) + 1) * 4) == 0);
        if (t->failed != fails) fprintf(stderr, "  (mutation: %s)\n", MUT_NAMES[m]);
        free(rp);
        copy_free(&c);
    }
    /* nnzb = 0 needs no col_idx or values */
    int32_t rp0[7] = {0};
    bsk_bsr E = {M, K, BR, BC, 0, rp0, NULL, NULL, BSK_BF16, BSK_MEM_HOST};
    CHECK_STATUS(bsk_bsr_validate(&E), BSK_SUCCESS);
    fixture_free(&f);
}

/* Every malformed A for SpMM, op N and op T: named status, C byte-for-byte untouched. */
BSK_TEST(api_spmm_malformed_bsr)
{
    fixture f;
    fixture_make(&f, bsk_test_rng());
    REQUIRE(f.ctx && f.A.row_ptr);
    size_t cn = dense_bytes(&f.C), ctn = dense_bytes(&f.Ct);
    unsigned char *cs = poison_save(f.C.data, cn), *cts = poison_save(f.Ct.data, ctn);
    for (int m = 0; m < MUT_COUNT; m++) {
        bsr_copy c;
        REQUIRE(copy_make(&c, &f.A));
        bsk_status want = mutate(&c.m, (mutation)m);
        /* A alone on the "device" while B and C are on the host: mixed locations */
        int fails = t->failed;
        CHECK_STATUS(bsk_spmm(f.ctx, BSK_OP_N, 1.0f, &c.m, &f.B, 0.5f, &f.C), want);
        CHECK(memcmp(f.C.data, cs, cn) == 0);
        CHECK_STATUS(bsk_spmm(f.ctx, BSK_OP_T, 1.0f, &c.m, &f.Bt, 0.5f, &f.Ct), want);
        CHECK(memcmp(f.Ct.data, cts, ctn) == 0);
        if (t->failed != fails) fprintf(stderr, "  (mutation: %s)\n", MUT_NAMES[m]);
        copy_free(&c);
    }
    free(cs); free(cts);
    fixture_free(&f);
}

/* Every malformed `out` pattern for SDDMM: named status, out.values byte-for-byte untouched. */
BSK_TEST(api_sddmm_malformed_bsr)
{
    fixture f;
    fixture_make(&f, bsk_test_rng());
    REQUIRE(f.ctx && f.A.row_ptr);
    for (int m = 0; m < MUT_COUNT; m++) {
        bsr_copy c;
        REQUIRE(copy_make(&c, &f.A));
        unsigned char *vs = poison_save(c.orig.values, f.vbytes);
        bsk_status want = mutate(&c.m, (mutation)m);
        int fails = t->failed;
        CHECK_STATUS(bsk_sddmm(f.ctx, 1.0f, &f.X, &f.Y, 0.5f, &c.m), want);
        CHECK(memcmp(c.orig.values, vs, f.vbytes) == 0);
        if (t->failed != fails) fprintf(stderr, "  (mutation: %s)\n", MUT_NAMES[m]);
        free(vs);
        copy_free(&c);
    }
    fixture_free(&f);
}

/* Ways to break a dense operand. */
typedef enum {
    DM_NULL_DATA, DM_MISALIGN, DM_LD_LT_COLS, DM_LD_NEG, DM_ROWS_NEG, DM_COLS_NEG, DM_ROWS_HUGE, DM_COLS_HUGE,
    DM_LD_ROWS_OVERFLOW, DM_DTYPE_BAD, DM_MEM_BAD, DM_MEM_DEVICE, DM_COUNT
} dmutation;
static const char *DM_NAMES[DM_COUNT] = {"data NULL", "data misaligned", "ld < cols", "ld -1", "rows -1", "cols -1",
                                         "rows 2^31", "cols 2^31", "ld*rows >= 2^62", "dtype 9", "mem 2",
                                         "mem DEVICE (host pointer)"};
static bsk_status dmutate(bsk_dense *Dm, dmutation m)
{
    switch (m) {
    case DM_NULL_DATA: Dm->data = NULL; return BSK_ERR_NULL_POINTER;
    case DM_MISALIGN: Dm->data = (char *)Dm->data + 1; return BSK_ERR_MISALIGNED;
    case DM_LD_LT_COLS: Dm->ld = Dm->cols - 1; return BSK_ERR_BAD_LAYOUT;
    case DM_LD_NEG: Dm->ld = -1; return BSK_ERR_INVALID_ARGUMENT;
    case DM_ROWS_NEG: Dm->rows = -1; return BSK_ERR_INVALID_ARGUMENT;
    case DM_COLS_NEG: Dm->cols = -1; return BSK_ERR_INVALID_ARGUMENT;
    case DM_ROWS_HUGE: Dm->rows = (int64_t)1 << 31; return BSK_ERR_OVERFLOW;
    case DM_COLS_HUGE: Dm->cols = (int64_t)1 << 31; Dm->ld = Dm->cols; return BSK_ERR_OVERFLOW;
    case DM_LD_ROWS_OVERFLOW: Dm->ld = (int64_t)1 << 58; return BSK_ERR_OVERFLOW; /* rows >= 16 here */
    case DM_DTYPE_BAD: Dm->dtype = (bsk_dtype)9; return BSK_ERR_INVALID_ARGUMENT;
    case DM_MEM_BAD: Dm->mem = (bsk_memory)2; return BSK_ERR_INVALID_ARGUMENT;
    case DM_MEM_DEVICE: Dm->mem = BSK_MEM_DEVICE; return BSK_ERR_WRONG_LOCATION; /* mixed with host operands */
    default: return BSK_ERR_INTERNAL;
    }
}

BSK_TEST(api_spmm_malformed_dense_and_arguments)
{
    fixture f;
    fixture_make(&f, bsk_test_rng());
    REQUIRE(f.ctx && f.A.row_ptr);
    size_t cn = dense_bytes(&f.C), bn = dense_bytes(&f.B), ctn = dense_bytes(&f.Ct);
    unsigned char *cs = poison_save(f.C.data, cn), *cts = poison_save(f.Ct.data, ctn);
    unsigned char *bs = (unsigned char *)malloc(bn);
    memcpy(bs, f.B.data, bn);
#define SPMM_FAIL(ctx_, op_, a_, b_, c_, want, what)                                                     \
    do {                                                                                             \
        int fails_ = t->failed;                                                                      \
        CHECK_STATUS(bsk_spmm(ctx_, op_, 1.0f, a_, b_, 0.5f, c_), want);                             \
        CHECK(memcmp(f.C.data, cs, cn) == 0 && memcmp(f.Ct.data, cts, ctn) == 0);                    \
        CHECK(memcmp(f.B.data, bs, bn) == 0);                                                        \
        if (t->failed != fails_) fprintf(stderr, "  (case: %s)\n", what);                            \
    } while (0)

    /* B and C broken every way, op N and op T */
    for (int m = 0; m < DM_COUNT; m++) {
        bsk_dense B = f.B, C = f.C, Bt = f.Bt, Ct = f.Ct;
        bsk_status want = dmutate(&B, (dmutation)m);
        SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &B, &f.C, want, DM_NAMES[m]);
        dmutate(&C, (dmutation)m);
        SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, want, DM_NAMES[m]);
        dmutate(&Bt, (dmutation)m);
        SPMM_FAIL(f.ctx, BSK_OP_T, &f.A, &Bt, &f.Ct, want, DM_NAMES[m]);
        dmutate(&Ct, (dmutation)m);
        SPMM_FAIL(f.ctx, BSK_OP_T, &f.A, &f.Bt, &Ct, want, DM_NAMES[m]);
    }
    /* NULL handles */
    SPMM_FAIL(NULL, BSK_OP_N, &f.A, &f.B, &f.C, BSK_ERR_NULL_POINTER, "ctx NULL");
    SPMM_FAIL(f.ctx, BSK_OP_N, NULL, &f.B, &f.C, BSK_ERR_NULL_POINTER, "A NULL");
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, NULL, &f.C, BSK_ERR_NULL_POINTER, "B NULL");
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, NULL, BSK_ERR_NULL_POINTER, "C NULL");
    /* unknown op */
    SPMM_FAIL(f.ctx, (bsk_op)2, &f.A, &f.B, &f.C, BSK_ERR_INVALID_ARGUMENT, "op 2");
    SPMM_FAIL(f.ctx, (bsk_op)-1, &f.A, &f.B, &f.C, BSK_ERR_INVALID_ARGUMENT, "op -1");
    /* shapes, op N: B.rows must be K, C.rows M, C.cols = B.cols */
    bsk_dense B = f.B, C = f.C;
    B.rows = K - 1;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &B, &f.C, BSK_ERR_SHAPE_MISMATCH, "N: B.rows != K");
    B = f.B; B.cols = N - 1;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &B, &f.C, BSK_ERR_SHAPE_MISMATCH, "N: B.cols != C.cols");
    C.rows = M - 1;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, BSK_ERR_SHAPE_MISMATCH, "N: C.rows != M");
    C = f.C; C.cols = N + 1;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, BSK_ERR_SHAPE_MISMATCH, "N: C.cols != B.cols");
    /* op T: op(A) is K x M, so the op-N operands do not fit (A is not square) */
    SPMM_FAIL(f.ctx, BSK_OP_T, &f.A, &f.B, &f.C, BSK_ERR_SHAPE_MISMATCH, "T with N-shaped B and C");
    SPMM_FAIL(f.ctx, BSK_OP_T, &f.A, &f.Bt, &f.C, BSK_ERR_SHAPE_MISMATCH, "T: C.rows != K");
    SPMM_FAIL(f.ctx, BSK_OP_T, &f.A, &f.B, &f.Ct, BSK_ERR_SHAPE_MISMATCH, "T: B.rows != M");
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.Bt, &f.Ct, BSK_ERR_SHAPE_MISMATCH, "N with T-shaped B and C");
    /* A and B must share a dtype */
    B = f.B; B.dtype = BSK_F16;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &B, &f.C, BSK_ERR_UNSUPPORTED, "A f32, B f16");
    B.dtype = BSK_BF16;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &B, &f.C, BSK_ERR_UNSUPPORTED, "A f32, B bf16");
    /* C aliasing B (same bytes read and written) */
    C = f.C; C.data = f.B.data; C.ld = f.B.ld;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, BSK_ERR_INVALID_ARGUMENT, "C aliases B");
    C = f.C; C.data = f.A.values; C.ld = N;
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, BSK_ERR_INVALID_ARGUMENT, "C aliases A.values");

    /* Locations. Every operand claiming DEVICE over host pointers: without a GPU the AUTO context has no
       device, so the call is BSK_ERR_NO_DEVICE (the side is chosen before pointers are inspected); with a
       GPU the pointers are checked and found on the host: BSK_ERR_WRONG_LOCATION. */
    bsk_bsr Ad = f.A;
    Ad.mem = BSK_MEM_DEVICE;
    B = f.B; B.mem = BSK_MEM_DEVICE;
    C = f.C; C.mem = BSK_MEM_DEVICE;
    bsk_status all_dev = bsk_has_device(f.ctx) ? BSK_ERR_WRONG_LOCATION : BSK_ERR_NO_DEVICE;
    SPMM_FAIL(f.ctx, BSK_OP_N, &Ad, &B, &C, all_dev, "all DEVICE over host pointers");
    SPMM_FAIL(f.ctx, BSK_OP_N, &Ad, &B, &f.C, BSK_ERR_WRONG_LOCATION, "A, B device; C host");
    SPMM_FAIL(f.ctx, BSK_OP_N, &f.A, &f.B, &C, BSK_ERR_WRONG_LOCATION, "C device; A, B host");
    /* a CPU context refuses device operands whatever exists */
    bsk_context *cpu;
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    SPMM_FAIL(cpu, BSK_OP_N, &Ad, &B, &C, BSK_ERR_WRONG_LOCATION, "CPU context, device operands");
    bsk_destroy(cpu);
    if (have_device()) { /* a CUDA context refuses host operands */
        bsk_context *gpu;
        REQUIRE_OK(bsk_create(&gpu, BSK_BACKEND_CUDA));
        SPMM_FAIL(gpu, BSK_OP_N, &f.A, &f.B, &f.C, BSK_ERR_WRONG_LOCATION, "CUDA context, host operands");
        bsk_destroy(gpu);
    }
#undef SPMM_FAIL
    free(cs); free(cts); free(bs);
    fixture_free(&f);
}

BSK_TEST(api_sddmm_malformed_dense_and_arguments)
{
    fixture f;
    fixture_make(&f, bsk_test_rng());
    REQUIRE(f.ctx && f.A.row_ptr);
    unsigned char *vs = poison_save(f.A.values, f.vbytes);
#define SDDMM_FAIL(ctx_, x_, y_, out_, want, what)                                                       \
    do {                                                                                             \
        int fails_ = t->failed;                                                                      \
        CHECK_STATUS(bsk_sddmm(ctx_, 1.0f, x_, y_, 0.5f, out_), want);                               \
        CHECK(memcmp(f.A.values, vs, f.vbytes) == 0);                                                \
        if (t->failed != fails_) fprintf(stderr, "  (case: %s)\n", what);                            \
    } while (0)
    for (int m = 0; m < DM_COUNT; m++) {
        bsk_dense X = f.X, Y = f.Y;
        bsk_status want = dmutate(&X, (dmutation)m);
        SDDMM_FAIL(f.ctx, &X, &f.Y, &f.A, want, DM_NAMES[m]);
        dmutate(&Y, (dmutation)m);
        SDDMM_FAIL(f.ctx, &f.X, &Y, &f.A, want, DM_NAMES[m]);
    }
    SDDMM_FAIL(NULL, &f.X, &f.Y, &f.A, BSK_ERR_NULL_POINTER, "ctx NULL");
    SDDMM_FAIL(f.ctx, NULL, &f.Y, &f.A, BSK_ERR_NULL_POINTER, "X NULL");
    SDDMM_FAIL(f.ctx, &f.X, NULL, &f.A, BSK_ERR_NULL_POINTER, "Y NULL");
    SDDMM_FAIL(f.ctx, &f.X, &f.Y, NULL, BSK_ERR_NULL_POINTER, "out NULL");
    /* shapes: X M x D, Y K x D, out M x K */
    bsk_dense X = f.X, Y = f.Y;
    X.rows = M - 1;
    SDDMM_FAIL(f.ctx, &X, &f.Y, &f.A, BSK_ERR_SHAPE_MISMATCH, "X.rows != M");
    Y.rows = K + 1;
    SDDMM_FAIL(f.ctx, &f.X, &Y, &f.A, BSK_ERR_SHAPE_MISMATCH, "Y.rows != K");
    X = f.X; X.cols = D - 1;
    SDDMM_FAIL(f.ctx, &X, &f.Y, &f.A, BSK_ERR_SHAPE_MISMATCH, "X.cols != Y.cols");
    SDDMM_FAIL(f.ctx, &f.Y, &f.X, &f.A, BSK_ERR_SHAPE_MISMATCH, "X and Y swapped");
    /* dtypes: X and Y alike; out F32 or X's dtype */
    X = f.X; X.dtype = BSK_F16;
    SDDMM_FAIL(f.ctx, &X, &f.Y, &f.A, BSK_ERR_UNSUPPORTED, "X f16, Y f32");
    Y = f.Y; Y.dtype = BSK_F16;
    bsk_bsr O = f.A;
    O.dtype = BSK_BF16;
    SDDMM_FAIL(f.ctx, &X, &Y, &O, BSK_ERR_UNSUPPORTED, "X, Y f16, out bf16");
    SDDMM_FAIL(f.ctx, &f.X, &f.Y, &O, BSK_ERR_UNSUPPORTED, "X, Y f32, out bf16");
    /* out.values aliasing X */
    X = f.X; X.data = f.A.values; X.ld = D;
    SDDMM_FAIL(f.ctx, &X, &f.Y, &f.A, BSK_ERR_INVALID_ARGUMENT, "X aliases out.values");
    /* locations (see the SpMM test for why all-DEVICE depends on the GPU) */
    O = f.A; O.mem = BSK_MEM_DEVICE;
    X = f.X; X.mem = BSK_MEM_DEVICE;
    Y = f.Y; Y.mem = BSK_MEM_DEVICE;
    SDDMM_FAIL(f.ctx, &X, &Y, &O, bsk_has_device(f.ctx) ? BSK_ERR_WRONG_LOCATION : BSK_ERR_NO_DEVICE, "all DEVICE");
    SDDMM_FAIL(f.ctx, &X, &Y, &f.A, BSK_ERR_WRONG_LOCATION, "X, Y device; out host");
    bsk_context *cpu;
    REQUIRE_OK(bsk_create(&cpu, BSK_BACKEND_CPU));
    SDDMM_FAIL(cpu, &X, &Y, &O, BSK_ERR_WRONG_LOCATION, "CPU context, device operands");
    bsk_destroy(cpu);
#undef SDDMM_FAIL
    free(vs);
    fixture_free(&f);
}

/* ---------------------------------------------------------------- odd but valid inputs */

/* Run SpMM on host operands, compare with the float64 reference over every element of C (the ld gap
   must keep its old bytes). */
static void spmm_check(bsk_test_ctx *t, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                       bsk_dtype ct, const char *what)
{
    bsk_rng *rng = bsk_test_rng();
    int64_t m = op == BSK_OP_N ? A->rows : A->cols, n = B->cols;
    bsk_dense C = beta == 0.0f ? bsk_test_dense_poison(m, n, 2, ct) : bsk_test_dense(m, n, 2, ct, rng);
    bsk_dense Cin = C;
    Cin.data = malloc(dense_bytes(&C) + 1);
    memcpy(Cin.data, C.data, dense_bytes(&C));
    double *ref = (double *)malloc((size_t)(m * n + 1) * sizeof(double));
    bsk_ref_spmm(op, alpha, A, B, beta, beta == 0.0f ? NULL : &Cin, ref);
    bsk_context *ctx;
    int fails = t->failed;
    if (bsk_create(&ctx, BSK_BACKEND_CPU) == BSK_SUCCESS) {
        CHECK_STATUS(bsk_spmm(ctx, op, alpha, A, B, beta, &C), BSK_SUCCESS);
        CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(A->dtype, ct));
        size_t es = bsk_dtype_size(ct);
        int gap = 1;
        for (int64_t r = 0; r < m; r++)
            gap &= memcmp((char *)C.data + (size_t)(r * C.ld + n) * es, (char *)Cin.data + (size_t)(r * C.ld + n) * es,
                          (size_t)(C.ld - n) * es) == 0;
        CHECK(gap);
        bsk_destroy(ctx);
    } else {
        CHECK(0);
    }
    if (t->failed != fails) fprintf(stderr, "  (%s, op %d, dtypes %d->%d, alpha %g beta %g)\n", what, (int)op, A->dtype, ct, alpha, beta);
    free(ref);
    free(Cin.data);
    bsk_test_dense_free(&C);
}

BSK_TEST(api_spmm_valid_numbers)
{
    bsk_rng *rng = bsk_test_rng();
    const bsk_dtype dts[3] = {BSK_F32, BSK_F16, BSK_BF16};
    for (int ai = 0; ai < 3; ai++)
        for (int ci = 0; ci < 3; ci++)
            for (int op = 0; op < 2; op++) {
                bsk_bsr A;
                REQUIRE_OK(bsk_bsr_random(M, K, BR, 16, 0.4, BSK_PATTERN_SKEWED, bsk_rng_next(rng), dts[ai], &A));
                bsk_dense B = bsk_test_dense(op ? M : K, N, 1, dts[ai], rng);
                spmm_check(t, (bsk_op)op, bsk_rng_sym(rng), &A, &B, 0.0f, dts[ci], "beta 0, NaN C");
                spmm_check(t, (bsk_op)op, bsk_rng_sym(rng), &A, &B, bsk_rng_sym(rng), dts[ci], "alpha, beta");
                bsk_bsr_free(&A);
                bsk_test_dense_free(&B);
            }
}

BSK_TEST(api_spmm_valid_odd_shapes)
{
    bsk_rng *rng = bsk_test_rng();
    /* no blocks at all: C = beta*C, and beta = 0 clears NaN */
    int32_t rp0[7] = {0};
    bsk_bsr Z = {M, K, BR, BC, 0, rp0, NULL, NULL, BSK_F32, BSK_MEM_HOST};
    bsk_dense B = bsk_test_dense(K, N, 0, BSK_F32, rng), Bt = bsk_test_dense(M, N, 0, BSK_F32, rng);
    spmm_check(t, BSK_OP_N, 1.0f, &Z, &B, 0.75f, BSK_F32, "nnzb 0");
    spmm_check(t, BSK_OP_N, 1.0f, &Z, &B, 0.0f, BSK_F16, "nnzb 0, beta 0");
    spmm_check(t, BSK_OP_T, 1.0f, &Z, &Bt, -2.0f, BSK_BF16, "nnzb 0, op T");
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&Bt);

    /* M = 1 (a single partial block row), op N; and op T with one output column of A */
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(1, K, BR, BC, 0.6, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F32, &A));
    B = bsk_test_dense(K, N, 0, BSK_F32, rng);
    spmm_check(t, BSK_OP_N, 1.5f, &A, &B, 0.0f, BSK_F32, "M = 1");
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);
    REQUIRE_OK(bsk_bsr_random(M, 1, BR, BC, 0.6, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A));
    B = bsk_test_dense(M, N, 0, BSK_F16, rng);
    spmm_check(t, BSK_OP_T, 1.0f, &A, &B, 0.5f, BSK_F32, "op T, 1 output row");
    bsk_bsr_free(&A);
    bsk_test_dense_free(&B);

    /* empty block rows (and empty block columns for op T) */
    bsk_dense Dn = bsk_test_dense(M, K, 0, BSK_BF16, rng);
    uint8_t mask[6 * 7];
    for (int q = 0; q < 6 * 7; q++) mask[q] = (q / 7) % 2 == 0 && q % 7 != 3 && bsk_rng_uniform(rng) < 0.7;
    REQUIRE_OK(bsk_bsr_from_mask(&Dn, BR, BC, mask, &A));
    bsk_bsr_stats st;
    REQUIRE_OK(bsk_bsr_stats_get(&A, &st));
    CHECK(st.empty_rows >= 3);
    B = bsk_test_dense(K, N, 1, BSK_BF16, rng);
    Bt = bsk_test_dense(M, N, 1, BSK_BF16, rng);
    spmm_check(t, BSK_OP_N, 1.0f, &A, &B, 0.25f, BSK_F32, "empty block rows");
    spmm_check(t, BSK_OP_T, 1.0f, &A, &Bt, 0.0f, BSK_BF16, "empty block rows, op T");
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&Bt);
    bsk_test_dense_free(&Dn);

    /* 0-column B: nothing to compute or write; succeeds with NULL data */
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_AUTO));
    bsk_dense B0 = {K, 0, 0, BSK_BF16, BSK_MEM_HOST, NULL}, C0 = {M, 0, 0, BSK_F32, BSK_MEM_HOST, NULL};
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B0, 0.5f, &C0), BSK_SUCCESS);
    bsk_dense B0t = {M, 0, 4, BSK_BF16, BSK_MEM_HOST, NULL}, C0t = {K, 0, 4, BSK_F16, BSK_MEM_HOST, NULL};
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &A, &B0t, 0.0f, &C0t), BSK_SUCCESS);
    bsk_destroy(ctx);
    bsk_bsr_free(&A);

    /* K = 0 (A has no columns): C = beta*C */
    int32_t rpk[7] = {0};
    bsk_bsr Ak = {M, 0, BR, BC, 0, rpk, NULL, NULL, BSK_F16, BSK_MEM_HOST};
    bsk_dense Bk = {0, N, N, BSK_F16, BSK_MEM_HOST, NULL};
    spmm_check(t, BSK_OP_N, 1.0f, &Ak, &Bk, 3.0f, BSK_F32, "K = 0");
}

/* SDDMM against the float64 reference, poisoned (NaN) values when beta = 0. */
static void sddmm_check(bsk_test_ctx *t, const bsk_bsr *P, bsk_dtype xt, float alpha, float beta, const char *what)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_dense X = bsk_test_dense(P->rows, D, 2, xt, rng), Y = bsk_test_dense(P->cols, D, 1, xt, rng);
    int64_t n = P->nnzb * P->block_rows * P->block_cols;
    size_t es = bsk_dtype_size(P->dtype);
    bsk_bsr out;
    if (bsk_bsr_clone(P, BSK_MEM_HOST, &out)) { CHECK(0); return; }
    /* beta = 0: in-matrix values poisoned (they must not be read); padding stays zero as in any valid BSR
       and must still be zero afterwards */
    int64_t mb = bsk_bsr_mb(&out), br = out.block_rows, bc = out.block_cols;
    uint8_t *pad = (uint8_t *)calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = out.row_ptr[i]; k < out.row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t q = (int64_t)k * br * bc + r * bc + c;
                    pad[q] = i * br + r >= out.rows || (int64_t)out.col_idx[k] * bc + c >= out.cols;
                    if (beta == 0.0f && !pad[q]) bsk__store(out.values, out.dtype, q, NAN);
                }
    double *ref = (double *)malloc((size_t)(n + 1) * sizeof(double));
    bsk_ref_sddmm(alpha, &X, &Y, beta, &out, ref);
    bsk_context *ctx;
    int fails = t->failed;
    if (bsk_create(&ctx, BSK_BACKEND_CPU) == BSK_SUCCESS) {
        CHECK_STATUS(bsk_sddmm(ctx, alpha, &X, &Y, beta, &out), BSK_SUCCESS);
        CHECK_REL(bsk_rel_err(out.values, out.dtype, ref, n), bsk_tol(xt, out.dtype));
        static const unsigned char zero[4] = {0, 0, 0, 0};
        int pad_zero = 1;
        for (int64_t q = 0; q < n; q++)
            if (pad[q]) pad_zero &= memcmp((char *)out.values + (size_t)q * es, zero, es) == 0;
        CHECK(pad_zero);
        bsk_destroy(ctx);
    }
    free(pad);
    if (t->failed != fails) fprintf(stderr, "  (%s, X %d, out %d)\n", what, xt, out.dtype);
    free(ref);
    bsk_bsr_free(&out);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
}

BSK_TEST(api_sddmm_valid_numbers)
{
    bsk_rng *rng = bsk_test_rng();
    const bsk_dtype dts[3] = {BSK_F32, BSK_F16, BSK_BF16};
    for (int xi = 0; xi < 3; xi++)
        for (int same = 0; same < 2; same++) {
            bsk_dtype ot = same ? dts[xi] : BSK_F32;
            bsk_bsr P;
            REQUIRE_OK(bsk_bsr_random(M, K, BR, 4, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), ot, &P));
            sddmm_check(t, &P, dts[xi], bsk_rng_sym(rng), 0.0f, "beta 0");
            sddmm_check(t, &P, dts[xi], bsk_rng_sym(rng), bsk_rng_sym(rng), "alpha, beta");
            bsk_bsr_free(&P);
        }
    /* no blocks: nothing to do */
    int32_t rp0[7] = {0};
    bsk_bsr Z = {M, K, BR, BC, 0, rp0, NULL, NULL, BSK_F32, BSK_MEM_HOST};
    bsk_dense X = bsk_test_dense(M, D, 0, BSK_F32, rng), Y = bsk_test_dense(K, D, 0, BSK_F32, rng);
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_AUTO));
    CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &X, &Y, 0.0f, &Z), BSK_SUCCESS);
    bsk_destroy(ctx);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
}

/* C over A's row_ptr / col_idx (which the CPU kernel reads while writing C): refused, nothing written */
BSK_TEST(api_spmm_c_over_a_indices)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    int32_t *meta = (int32_t *)calloc(64, 4); /* row_ptr[3], col_idx[2], then C's tail */
    float *vals = (float *)malloc(32 * 4), *b = (float *)malloc(32 * 4);
    for (int i = 0; i < 32; i++) vals[i] = 1.0f;
    for (int k = 0; k < 8; k++) { b[k * 4] = 1.0f; b[k * 4 + 1] = 0.0f; b[k * 4 + 2] = 1.4e-45f; b[k * 4 + 3] = -1.0f; }
    int32_t *rp = meta, *ci = meta + 3;
    rp[0] = 0; rp[1] = 1; rp[2] = 2; ci[0] = 0; ci[1] = 1;
    bsk_bsr A = {8, 8, 4, 4, 2, rp, ci, vals, BSK_F32, BSK_MEM_HOST};
    REQUIRE_OK(bsk_bsr_validate(&A));
    bsk_dense B = {8, 4, 4, BSK_F32, BSK_MEM_HOST, b};
    int32_t before[64];
    memcpy(before, meta, sizeof before);
    bsk_dense C = {8, 4, 4, BSK_F32, BSK_MEM_HOST, meta};          /* over row_ptr and col_idx */
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(before, meta, sizeof before) == 0);
    C.data = ci;                                                   /* over col_idx only */
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &A, &B, 0.0f, &C), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(before, meta, sizeof before) == 0);
    free(meta); free(vals); free(b);
    bsk_destroy(ctx);
}

/* SDDMM: out.values over out's own col_idx. Before the fix: SEGV in sddmm_item (cpu_sddmm.c:67). */

/* out.values over out's own col_idx: refused, nothing written */
BSK_TEST(api_sddmm_values_over_own_indices)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    float *x = (float *)malloc(32 * 4), *v = (float *)calloc(64, 4);
    for (int i = 0; i < 32; i++) x[i] = 1.0f;
    bsk_dense X = {8, 4, 4, BSK_F32, BSK_MEM_HOST, x};
    int32_t *rp = (int32_t *)v + 40, *ci = (int32_t *)v + 2;       /* col_idx inside block 0's values */
    rp[0] = 0; rp[1] = 1; rp[2] = 2; ci[0] = 0; ci[1] = 1;
    bsk_bsr O = {8, 8, 4, 4, 2, rp, ci, v, BSK_F32, BSK_MEM_HOST};
    REQUIRE_OK(bsk_bsr_validate(&O));
    float before[64];
    memcpy(before, v, sizeof before);
    CHECK_STATUS(bsk_sddmm(ctx, -1.0f, &X, &X, 0.0f, &O), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(before, v, sizeof before) == 0);
    free(x); free(v);
    bsk_destroy(ctx);
}

/* Attention forward: O over the layout's full_count (an input). Before the fix: heap-buffer-overflow read in
   run_item (attention_cpu.c:45): a count rewritten with float bits. */
