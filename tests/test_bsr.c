/* test_bsr.c — the BSR utilities: builders (dense, mask, CSR, COO), to_dense, transpose, clone, free,
   stats and the random generator. Inputs are fresh random data from the test's generator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

static const bsk_dtype DTYPES[3] = {BSK_F32, BSK_F16, BSK_BF16};

/* Shapes with tails that are not multiples of the block, rectangular blocks, blocks larger than the
   matrix, a single element. */
static const struct { int64_t rows, cols; int32_t br, bc; int64_t pad; } SHAPES[] = {
    {37, 53, 8, 8, 3}, {64, 64, 16, 16, 0}, {1, 1, 1, 1, 0}, {50, 31, 4, 16, 5},
    {33, 70, 16, 4, 1}, {7, 5, 16, 16, 2}, {129, 3, 2, 3, 0}, {3, 129, 5, 1, 7},
};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* A struct filled with a byte pattern: a failing call must leave it exactly as it was. */
static bsk_bsr poisoned_bsr(void)
{
    bsk_bsr p;
    memset(&p, 0xA5, sizeof p);
    return p;
}
static int bsr_untouched(const bsk_bsr *o)
{
    bsk_bsr p = poisoned_bsr();
    return memcmp(o, &p, sizeof p) == 0;
}

static size_t esz_of(bsk_dtype t) { return bsk_dtype_size(t); }

/* Every padding entry (outside rows x cols) of every block is the all-zero bit pattern. */
static int padding_is_zero(const bsk_bsr *A)
{
    int64_t mb = bsk_bsr_mb(A), br = A->block_rows, bc = A->block_cols, bsz = br * bc;
    size_t es = esz_of(A->dtype);
    static const unsigned char zero[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t gr = i * br + r, gc = (int64_t)A->col_idx[k] * bc + c;
                    const unsigned char *v = (const unsigned char *)A->values + (size_t)(k * bsz + r * bc + c) * es;
                    if ((gr >= A->rows || gc >= A->cols) && memcmp(v, zero, es) != 0) return 0;
                }
    return 1;
}

/* Every in-matrix entry of every block is non-zero (for patterns built from never-zero data). */
static int inbounds_nonzero(const bsk_bsr *A)
{
    int64_t mb = bsk_bsr_mb(A), br = A->block_rows, bc = A->block_cols, bsz = br * bc;
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t gr = i * br + r, gc = (int64_t)A->col_idx[k] * bc + c;
                    if (gr < A->rows && gc < A->cols && bsk__load(A->values, A->dtype, k * bsz + r * bc + c) == 0.0f)
                        return 0;
                }
    return 1;
}

/* In-matrix bytes of two dense matrices of the same shape and dtype are identical (ld may differ). */
static int dense_equal(const bsk_dense *a, const bsk_dense *b)
{
    size_t es = esz_of(a->dtype);
    for (int64_t r = 0; r < a->rows; r++)
        if (memcmp((const char *)a->data + (size_t)(r * a->ld) * es, (const char *)b->data + (size_t)(r * b->ld) * es,
                   (size_t)a->cols * es) != 0)
            return 0;
    return 1;
}

/* Zero a random subset of blocks of D (about a third) and a few single entries; returns the mask of
   blocks that still hold a non-zero (mb x nb). */
static uint8_t *punch_blocks(bsk_dense *D, int32_t br, int32_t bc, bsk_rng *rng)
{
    int64_t mb = (D->rows + br - 1) / br, nb = (D->cols + bc - 1) / bc;
    uint8_t *keep = (uint8_t *)malloc((size_t)(mb * nb + 1));
    for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) {
            keep[i * nb + j] = bsk_rng_uniform(rng) >= 0.35;
            for (int64_t r = i * br; r < (i + 1) * br && r < D->rows; r++)
                for (int64_t c = j * bc; c < (j + 1) * bc && c < D->cols; c++)
                    if (!keep[i * nb + j] || bsk_rng_uniform(rng) < 0.05) bsk__store(D->data, D->dtype, r * D->ld + c, 0.0f);
        }
    /* a kept block may have lost every entry to the single zeros: recount */
    for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) {
            int any = 0;
            for (int64_t r = i * br; r < (i + 1) * br && r < D->rows; r++)
                for (int64_t c = j * bc; c < (j + 1) * bc && c < D->cols; c++)
                    any |= bsk__load(D->data, D->dtype, r * D->ld + c) != 0.0f;
            keep[i * nb + j] = (uint8_t)any;
        }
    return keep;
}

/* The kept blocks of A are exactly the set `keep` (mb x nb). */
static int pattern_is(const bsk_bsr *A, const uint8_t *keep)
{
    int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    for (int64_t i = 0; i < mb; i++) {
        int32_t k = A->row_ptr[i];
        for (int64_t j = 0; j < nb; j++) {
            int has = k < A->row_ptr[i + 1] && A->col_idx[k] == j;
            if (has != (keep[i * nb + j] != 0)) return 0;
            k += has;
        }
        if (k != A->row_ptr[i + 1]) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- dense round trips */

BSK_TEST(bsr_dense_roundtrip_every_dtype_and_shape)
{
    bsk_rng *rng = bsk_test_rng();
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < NSHAPES; si++) {
            bsk_dtype dt = DTYPES[ti];
            int64_t rows = SHAPES[si].rows, cols = SHAPES[si].cols, pad = SHAPES[si].pad;
            int32_t br = SHAPES[si].br, bc = SHAPES[si].bc;
            bsk_dense D = bsk_test_dense(rows, cols, pad, dt, rng);
            uint8_t *keep = punch_blocks(&D, br, bc, rng);
            int64_t want = 0, mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
            for (int64_t q = 0; q < mb * nb; q++) want += keep[q];
            bsk_bsr A;
            REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, 0.0f, &A));
            CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
            CHECK(A.rows == rows && A.cols == cols && A.block_rows == br && A.block_cols == bc);
            CHECK(A.dtype == dt && A.mem == BSK_MEM_HOST);
            CHECK(A.nnzb == want);
            CHECK(pattern_is(&A, keep));
            CHECK(padding_is_zero(&A));
            /* back to dense, into a poisoned matrix with a different ld: exact, and the ld gap untouched */
            bsk_dense E = bsk_test_dense_poison(rows, cols, pad + 2, dt);
            REQUIRE_OK(bsk_bsr_to_dense(&A, &E));
            CHECK(dense_equal(&D, &E));
            int gap_ok = 1;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = cols; c < E.ld; c++) gap_ok &= isnan(bsk__load(E.data, dt, r * E.ld + c));
            CHECK(gap_ok);
            if (D.dtype != dt || !gap_ok) fprintf(stderr, "  shape %d dtype %d\n", si, ti);
            bsk_bsr_free(&A);
            bsk_test_dense_free(&D);
            bsk_test_dense_free(&E);
            free(keep);
        }
}

BSK_TEST(bsr_from_dense_threshold)
{
    bsk_rng *rng = bsk_test_rng();
    const int64_t rows = 45, cols = 38;
    const int32_t br = 8, bc = 6;
    const int64_t mb = 6, nb = 7;
    bsk_dense D = bsk_test_dense(rows, cols, 1, BSK_F32, rng);
    float *d = (float *)D.data;
    /* scale each block by a random factor so the norms spread over three decades */
    double norm[6 * 7], sorted[6 * 7];
    for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) {
            float f = (float)pow(10.0, 3.0 * bsk_rng_uniform(rng) - 1.5);
            double ss = 0;
            for (int64_t r = i * br; r < (i + 1) * br && r < rows; r++)
                for (int64_t c = j * bc; c < (j + 1) * bc && c < cols; c++) {
                    d[r * D.ld + c] *= f;
                    ss += (double)d[r * D.ld + c] * d[r * D.ld + c];
                }
            norm[i * nb + j] = sorted[i * nb + j] = sqrt(ss);
        }
    /* thresholds halfway between neighbouring norms: no ties, every count from 0 to mb*nb reachable */
    for (int a = 0; a < mb * nb; a++)
        for (int b = a + 1; b < mb * nb; b++)
            if (sorted[b] < sorted[a]) { double x = sorted[a]; sorted[a] = sorted[b]; sorted[b] = x; }
    for (int q = 0; q < 5; q++) {
        int at = (int)bsk_rng_int(rng, 0, mb * nb - 2);
        if (sorted[at + 1] - sorted[at] < 1e-6 * sorted[at + 1]) continue; /* too close to call in fp32 */
        float thr = (float)(0.5 * (sorted[at] + sorted[at + 1]));
        uint8_t keep[6 * 7];
        int64_t want = 0;
        for (int p = 0; p < mb * nb; p++) want += keep[p] = norm[p] > (double)thr;
        bsk_bsr A;
        REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, thr, &A));
        CHECK(A.nnzb == want);
        CHECK(want == mb * nb - 1 - at);
        CHECK(pattern_is(&A, keep));
        CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
        bsk_bsr_free(&A);
    }
    /* +inf keeps nothing; a negative threshold keeps every block, zero blocks included */
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, INFINITY, &A));
    CHECK(A.nnzb == 0 && A.row_ptr && A.row_ptr[mb] == 0);
    bsk_bsr_free(&A);
    for (int64_t c = 0; c < bc; c++)
        for (int64_t r = 0; r < br; r++) d[r * D.ld + c] = 0.0f; /* block (0,0) all zero */
    REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, -1.0f, &A));
    CHECK(A.nnzb == mb * nb);
    bsk_bsr_free(&A);
    REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, 0.0f, &A));
    CHECK(A.nnzb == mb * nb - 1 && A.col_idx[0] == 1);
    bsk_bsr_free(&A);
    /* threshold 0 keeps a block whose only non-zero squares to zero in fp32 (1e-30, a subnormal) */
    d[3 * D.ld + 2] = 1e-30f;
    REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, 0.0f, &A));
    CHECK(A.nnzb == mb * nb && A.col_idx[0] == 0);
    bsk_bsr_free(&A);
    d[3 * D.ld + 2] = 1e-45f;
    REQUIRE_OK(bsk_bsr_from_dense(&D, br, bc, 0.0f, &A));
    CHECK(A.nnzb == mb * nb);
    bsk_bsr_free(&A);
    /* NaN threshold: named error, out untouched */
    bsk_bsr o = poisoned_bsr();
    CHECK_STATUS(bsk_bsr_from_dense(&D, br, bc, NAN, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK(bsr_untouched(&o));
    bsk_test_dense_free(&D);
}

BSK_TEST(bsr_from_mask)
{
    bsk_rng *rng = bsk_test_rng();
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < NSHAPES; si++) {
            bsk_dtype dt = DTYPES[ti];
            int64_t rows = SHAPES[si].rows, cols = SHAPES[si].cols;
            int32_t br = SHAPES[si].br, bc = SHAPES[si].bc;
            int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc, want = 0;
            bsk_dense D = bsk_test_dense(rows, cols, SHAPES[si].pad, dt, rng);
            uint8_t *mask = (uint8_t *)malloc((size_t)(mb * nb));
            for (int64_t q = 0; q < mb * nb; q++) {
                /* any non-zero byte means keep */
                mask[q] = bsk_rng_uniform(rng) < 0.5 ? 0 : (uint8_t)bsk_rng_int(rng, 1, 255);
                want += mask[q] != 0;
            }
            bsk_bsr A;
            REQUIRE_OK(bsk_bsr_from_mask(&D, br, bc, mask, &A));
            CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
            CHECK(A.nnzb == want && pattern_is(&A, mask));
            CHECK(padding_is_zero(&A) && inbounds_nonzero(&A));
            /* to_dense gives D with the unmasked blocks zeroed */
            bsk_dense E = bsk_test_dense_poison(rows, cols, 0, dt);
            REQUIRE_OK(bsk_bsr_to_dense(&A, &E));
            int ok = 1;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) {
                    float want_v = mask[(r / br) * nb + c / bc] ? bsk__load(D.data, dt, r * D.ld + c) : 0.0f;
                    float got = bsk__load(E.data, dt, r * E.ld + c);
                    ok &= memcmp(&got, &want_v, 4) == 0;
                }
            CHECK(ok);
            bsk_bsr_free(&A);
            bsk_test_dense_free(&E);
            /* NULL mask: named error, nothing written */
            bsk_bsr o = poisoned_bsr();
            CHECK_STATUS(bsk_bsr_from_mask(&D, br, bc, NULL, &o), BSK_ERR_NULL_POINTER);
            CHECK(bsr_untouched(&o));
            bsk_test_dense_free(&D);
            free(mask);
        }
}

/* Builder arguments that are not allowed: each a named status and *out untouched. */
BSK_TEST(bsr_from_dense_bad_arguments)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_dense D = bsk_test_dense(20, 30, 2, BSK_F32, rng);
    uint8_t mask[64];
    memset(mask, 1, sizeof mask);
    struct { bsk_dense d; int32_t br, bc; int null_dense, null_out; bsk_status want; } cases[] = {
        {D, 8, 8, 1, 0, BSK_ERR_NULL_POINTER},
        {D, 8, 8, 0, 1, BSK_ERR_NULL_POINTER},
        {D, 0, 8, 0, 0, BSK_ERR_INVALID_ARGUMENT},
        {D, 8, -4, 0, 0, BSK_ERR_INVALID_ARGUMENT},
        {D, 1025, 8, 0, 0, BSK_ERR_OVERFLOW},
        {D, 8, 4096, 0, 0, BSK_ERR_OVERFLOW},
        {{20, 30, 32, (bsk_dtype)9, BSK_MEM_HOST, D.data}, 8, 8, 0, 0, BSK_ERR_INVALID_ARGUMENT},
        {{20, 30, 32, BSK_F32, (bsk_memory)4, D.data}, 8, 8, 0, 0, BSK_ERR_INVALID_ARGUMENT},
        {{20, 30, 29, BSK_F32, BSK_MEM_HOST, D.data}, 8, 8, 0, 0, BSK_ERR_BAD_LAYOUT},
        {{-1, 30, 32, BSK_F32, BSK_MEM_HOST, D.data}, 8, 8, 0, 0, BSK_ERR_INVALID_ARGUMENT},
        {{(int64_t)1 << 31, 30, 32, BSK_F32, BSK_MEM_HOST, D.data}, 8, 8, 0, 0, BSK_ERR_OVERFLOW},
        {{20, 30, (int64_t)1 << 58, BSK_F32, BSK_MEM_HOST, D.data}, 8, 8, 0, 0, BSK_ERR_OVERFLOW},
        {{20, 30, 32, BSK_F32, BSK_MEM_HOST, NULL}, 8, 8, 0, 0, BSK_ERR_NULL_POINTER},
        {{20, 30, 32, BSK_F32, BSK_MEM_HOST, (char *)D.data + 1}, 8, 8, 0, 0, BSK_ERR_MISALIGNED},
        {{20, 30, 32, BSK_F32, BSK_MEM_DEVICE, D.data}, 8, 8, 0, 0, BSK_ERR_WRONG_LOCATION},
    };
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        bsk_bsr o = poisoned_bsr();
        const bsk_dense *dp = cases[q].null_dense ? NULL : &cases[q].d;
        bsk_bsr *op = cases[q].null_out ? NULL : &o;
        int fails = t->failed;
        CHECK_STATUS(bsk_bsr_from_dense(dp, cases[q].br, cases[q].bc, 0.0f, op), cases[q].want);
        CHECK_STATUS(bsk_bsr_from_mask(dp, cases[q].br, cases[q].bc, mask, op), cases[q].want);
        CHECK(bsr_untouched(&o));
        if (t->failed != fails) fprintf(stderr, "  (case %zu)\n", q);
    }
    bsk_test_dense_free(&D);
}

BSK_TEST(bsr_empty_matrices)
{
    bsk_dense D0 = {0, 17, 17, BSK_F32, BSK_MEM_HOST, NULL}, D1 = {9, 0, 0, BSK_F16, BSK_MEM_HOST, NULL};
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_from_dense(&D0, 4, 4, 0.0f, &A));
    CHECK(A.nnzb == 0 && A.row_ptr && A.row_ptr[0] == 0 && bsk_bsr_mb(&A) == 0);
    CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
    bsk_bsr T;
    REQUIRE_OK(bsk_bsr_transpose(&A, &T));
    CHECK(T.rows == 17 && T.cols == 0 && T.nnzb == 0 && T.row_ptr[bsk_bsr_mb(&T)] == 0);
    CHECK_STATUS(bsk_bsr_validate(&T), BSK_SUCCESS);
    bsk_bsr_free(&T);
    bsk_bsr_free(&A);
    REQUIRE_OK(bsk_bsr_from_dense(&D1, 4, 4, 0.0f, &A));
    CHECK(A.nnzb == 0 && bsk_bsr_mb(&A) == 3 && A.row_ptr[3] == 0);
    bsk_bsr_stats st;
    REQUIRE_OK(bsk_bsr_stats_get(&A, &st));
    CHECK(st.mb == 3 && st.nb == 0 && st.density == 0.0 && st.empty_rows == 3 && st.row_max == 0);
    bsk_bsr_free(&A);
    REQUIRE_OK(bsk_bsr_from_coo(0, 0, 0, NULL, NULL, NULL, BSK_BF16, 2, 2, &A));
    CHECK(A.nnzb == 0 && A.row_ptr && A.row_ptr[0] == 0);
    bsk_bsr_free(&A);
}

/* ---------------------------------------------------------------- CSR and COO */

typedef struct {
    int64_t rows, cols, nnz;
    int32_t *ri, *ci, *rp; /* COO rows, columns; CSR row_ptr (for the entries sorted by row) */
    void *vals;
    double *ref;           /* rows x cols: the sums */
    double *absum;         /* rows x cols: sum of |v| (error bound for the fp32 sums) */
    uint8_t *touched;      /* mb x nb: blocks holding an entry */
} triplets;

/* Random entries in random order, some positions repeated (duplicates add), some with value 0 (the
   block still counts as held), grouped by row for the CSR form with unsorted columns inside rows. */
static triplets make_triplets(int64_t rows, int64_t cols, int32_t br, int32_t bc, double fill, bsk_dtype dt, bsk_rng *rng)
{
    triplets T = {rows, cols, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc, cap = (int64_t)(fill * rows * cols) + 8;
    T.ri = (int32_t *)malloc((size_t)cap * 4);
    T.ci = (int32_t *)malloc((size_t)cap * 4);
    T.vals = malloc((size_t)cap * 4);
    T.rp = (int32_t *)calloc((size_t)rows + 1, 4);
    T.ref = (double *)calloc((size_t)(rows * cols + 1), sizeof(double));
    T.absum = (double *)calloc((size_t)(rows * cols + 1), sizeof(double));
    T.touched = (uint8_t *)calloc((size_t)(mb * nb + 1), 1);
    int64_t n = 0;
    while (n < cap) {
        int64_t r, c;
        if (n > 0 && bsk_rng_uniform(rng) < 0.2) { r = T.ri[bsk_rng_int(rng, 0, n - 1)]; c = T.ci[bsk_rng_int(rng, 0, n - 1)]; }
        else { r = bsk_rng_int(rng, 0, rows - 1); c = bsk_rng_int(rng, 0, cols - 1); }
        /* sometimes repeat an exact earlier position */
        if (n > 0 && bsk_rng_uniform(rng) < 0.15) { int64_t e = bsk_rng_int(rng, 0, n - 1); r = T.ri[e]; c = T.ci[e]; }
        float v = bsk_rng_uniform(rng) < 0.03 ? 0.0f : bsk_rng_sym(rng);
        bsk__store(T.vals, dt, n, v);
        v = bsk__load(T.vals, dt, n);
        T.ri[n] = (int32_t)r; T.ci[n] = (int32_t)c;
        T.ref[r * cols + c] += v;
        T.absum[r * cols + c] += fabs(v);
        T.touched[(r / br) * nb + c / bc] = 1;
        n++;
    }
    T.nnz = n;
    /* shuffle (the COO order); the CSR form is built from this by a stable sort on the row */
    for (int64_t e = n - 1; e > 0; e--) {
        int64_t f = bsk_rng_int(rng, 0, e);
        int32_t a = T.ri[e]; T.ri[e] = T.ri[f]; T.ri[f] = a;
        a = T.ci[e]; T.ci[e] = T.ci[f]; T.ci[f] = a;
        size_t es = bsk_dtype_size(dt);
        unsigned char tmp[4];
        memcpy(tmp, (char *)T.vals + e * es, es);
        memcpy((char *)T.vals + e * es, (char *)T.vals + f * es, es);
        memcpy((char *)T.vals + f * es, tmp, es);
    }
    return T;
}

static void free_triplets(triplets *T)
{
    free(T->ri); free(T->ci); free(T->rp); free(T->vals); free(T->ref); free(T->absum); free(T->touched);
}

/* CSR arrays from the triplets: entries stably grouped by row (columns stay unsorted, duplicates kept). */
static void to_csr(const triplets *T, bsk_dtype dt, int32_t *rp, int32_t *ci, void *vals)
{
    size_t es = bsk_dtype_size(dt);
    memset(rp, 0, (size_t)(T->rows + 1) * 4);
    for (int64_t e = 0; e < T->nnz; e++) rp[T->ri[e] + 1]++;
    for (int64_t r = 0; r < T->rows; r++) rp[r + 1] += rp[r];
    int32_t *next = (int32_t *)malloc((size_t)(T->rows + 1) * 4);
    memcpy(next, rp, (size_t)(T->rows + 1) * 4);
    for (int64_t e = 0; e < T->nnz; e++) {
        int32_t p = next[T->ri[e]]++;
        ci[p] = T->ci[e];
        memcpy((char *)vals + (size_t)p * es, (const char *)T->vals + (size_t)e * es, es);
    }
    free(next);
}

/* A against the triplets' sums: pattern = touched blocks, each in-matrix value within rounding of the
   sum, padding zero. */
static int check_against_triplets(bsk_test_ctx *t, const bsk_bsr *A, const triplets *T, bsk_dtype dt)
{
    int fails = t->failed;
    CHECK_STATUS(bsk_bsr_validate(A), BSK_SUCCESS);
    CHECK(pattern_is(A, T->touched));
    CHECK(padding_is_zero(A));
    /* fp32 sums of a few terms, then one rounding to the storage type */
    double u = dt == BSK_F32 ? 6e-8 : dt == BSK_F16 ? 4.9e-4 : 3.9e-3;
    bsk_dense E = bsk_test_dense_poison(A->rows, A->cols, 0, dt);
    CHECK_STATUS(bsk_bsr_to_dense(A, &E), BSK_SUCCESS);
    int64_t bad = 0;
    for (int64_t q = 0; q < A->rows * A->cols; q++) {
        double got = bsk__load(E.data, dt, q), want = T->ref[q];
        double tol = u * fabs(want) + 16 * 6e-8 * T->absum[q] + (dt == BSK_F16 ? 6e-8 : 0);
        if (!(fabs(got - want) <= tol)) bad++;
    }
    CHECK(bad == 0);
    bsk_test_dense_free(&E);
    return t->failed == fails;
}

BSK_TEST(bsr_from_csr_and_coo_duplicates_any_order)
{
    bsk_rng *rng = bsk_test_rng();
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < NSHAPES; si++) {
            bsk_dtype dt = DTYPES[ti];
            int64_t rows = SHAPES[si].rows, cols = SHAPES[si].cols;
            int32_t br = SHAPES[si].br, bc = SHAPES[si].bc;
            triplets T = make_triplets(rows, cols, br, bc, 0.08, dt, rng);
            bsk_bsr A, B;
            REQUIRE_OK(bsk_bsr_from_coo(rows, cols, T.nnz, T.ri, T.ci, T.vals, dt, br, bc, &A));
            CHECK(A.dtype == dt && A.block_rows == br && A.block_cols == bc && A.mem == BSK_MEM_HOST);
            if (!check_against_triplets(t, &A, &T, dt)) fprintf(stderr, "  coo: shape %d dtype %d\n", si, ti);
            int32_t *rp = (int32_t *)malloc((size_t)(rows + 1) * 4), *ci = (int32_t *)malloc((size_t)T.nnz * 4);
            void *vals = malloc((size_t)T.nnz * 4);
            to_csr(&T, dt, rp, ci, vals);
            REQUIRE_OK(bsk_bsr_from_csr(rows, cols, T.nnz, rp, ci, vals, dt, br, bc, &B));
            if (!check_against_triplets(t, &B, &T, dt)) fprintf(stderr, "  csr: shape %d dtype %d\n", si, ti);
            /* the same pattern either way */
            CHECK(A.nnzb == B.nnzb && memcmp(A.row_ptr, B.row_ptr, (size_t)(bsk_bsr_mb(&A) + 1) * 4) == 0 &&
                  memcmp(A.col_idx, B.col_idx, (size_t)A.nnzb * 4) == 0);
            bsk_bsr_free(&A);
            bsk_bsr_free(&B);
            free(rp); free(ci); free(vals);
            free_triplets(&T);
        }
}

/* Hundreds of millions of block columns and a handful of entries: the element-wise builders must not
   allocate or scan anything proportional to the number of block columns. */
BSK_TEST(bsr_from_coo_huge_sparse_width)
{
    bsk_rng *rng = bsk_test_rng();
    const int64_t rows = 5, cols = INT32_MAX;
    int32_t ri[16], ci[16];
    float v[16];
    for (int e = 0; e < 16; e++) {
        ri[e] = (int32_t)bsk_rng_int(rng, 0, rows - 1);
        ci[e] = (int32_t)bsk_rng_int(rng, 0, cols - 1);
        v[e] = bsk_rng_sym(rng);
    }
    ri[15] = ri[3]; ci[15] = ci[3]; /* a duplicate */
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_from_coo(rows, cols, 16, ri, ci, v, BSK_F32, 1, 1, &A));
    CHECK(A.nnzb == 15);
    CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
    for (int e = 0; e < 15; e++) {
        if (e == 3) continue;
        int found = 0;
        for (int32_t k = A.row_ptr[ri[e]]; k < A.row_ptr[ri[e] + 1]; k++)
            if (A.col_idx[k] == ci[e]) found = ((float *)A.values)[k] == v[e];
        CHECK(found);
    }
    for (int32_t k = A.row_ptr[ri[3]]; k < A.row_ptr[ri[3] + 1]; k++)
        if (A.col_idx[k] == ci[3]) CHECK(((float *)A.values)[k] == v[3] + v[15]);
    bsk_bsr_stats st;
    REQUIRE_OK(bsk_bsr_stats_get(&A, &st));
    CHECK(st.nnzb == 15 && st.nb == cols && st.mb == rows);
    bsk_bsr_free(&A);
}

BSK_TEST(bsr_from_csr_coo_bad_arguments)
{
    bsk_rng *rng = bsk_test_rng();
    const int64_t rows = 12, cols = 10;
    /* a valid CSR: 2 entries per row */
    int32_t rp[13], ci[24], ri[24];
    float v[24];
    for (int r = 0; r <= rows; r++) rp[r] = 2 * r;
    for (int e = 0; e < 24; e++) {
        ri[e] = e / 2;
        ci[e] = (int32_t)bsk_rng_int(rng, 0, cols - 1);
        v[e] = bsk_rng_sym(rng);
    }
    bsk_bsr o = poisoned_bsr();
    /* control: both succeed */
    REQUIRE_OK(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o));
    bsk_bsr_free(&o);
    REQUIRE_OK(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, 3, &o));
    bsk_bsr_free(&o);

#define EXPECT_FAIL(call, want)                                                                    \
    do { o = poisoned_bsr(); CHECK_STATUS(call, want); CHECK(bsr_untouched(&o)); } while (0)

    /* shared arguments */
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, NULL), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, 3, NULL), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, (bsk_dtype)3, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, (bsk_dtype)-1, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, -1, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, -5, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_csr(-1, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, -2, 24, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_csr((int64_t)1 << 31, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_OVERFLOW);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, (int64_t)1 << 40, 24, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_OVERFLOW);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 0, 3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, -3, &o), BSK_ERR_INVALID_ARGUMENT);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 1025, &o), BSK_ERR_OVERFLOW);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 2048, 3, &o), BSK_ERR_OVERFLOW);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, NULL, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, NULL, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, (char *)v + 1, BSK_F16, 4, 3, &o), BSK_ERR_MISALIGNED);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, (char *)v + 2, BSK_F32, 4, 3, &o), BSK_ERR_MISALIGNED);
    /* CSR structure */
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, NULL, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, NULL, v, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, (int32_t *)((char *)rp + 1), ci, v, BSK_F32, 4, 3, &o),
                BSK_ERR_MISALIGNED);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, (int32_t *)((char *)ci + 2), v, BSK_F32, 4, 3, &o),
                BSK_ERR_MISALIGNED);
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 23, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR); /* rp[rows] != nnz */
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, (int64_t)INT32_MAX + 1, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_OVERFLOW);
    rp[0] = 1;
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    rp[0] = 0;
    rp[5] = 13; /* rp[5] > rp[6] = 12 */
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    rp[5] = -1;
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    rp[5] = 10;
    int32_t keep = ci[17];
    ci[17] = (int32_t)cols;
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    ci[17] = -1;
    EXPECT_FAIL(bsk_bsr_from_csr(rows, cols, 24, rp, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    /* COO indices: every one is checked, the last included */
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
    ci[17] = keep;
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, NULL, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, NULL, v, BSK_F32, 4, 3, &o), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, (int32_t *)((char *)ri + 1), ci, v, BSK_F32, 4, 3, &o),
                BSK_ERR_MISALIGNED);
    int32_t bad_vals[4] = {-1, (int32_t)rows, INT32_MIN, INT32_MAX};
    for (int q = 0; q < 4; q++) {
        int32_t keep_r = ri[23], keep_c = ci[23];
        ri[23] = bad_vals[q];
        EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
        ri[23] = keep_r;
        ci[23] = q == 1 ? (int32_t)cols : bad_vals[q];
        EXPECT_FAIL(bsk_bsr_from_coo(rows, cols, 24, ri, ci, v, BSK_F32, 4, 3, &o), BSK_ERR_INVALID_BSR);
        ci[23] = keep_c;
    }
    /* nnz = 0 accepts NULL index and value arrays */
    REQUIRE_OK(bsk_bsr_from_coo(rows, cols, 0, NULL, NULL, NULL, BSK_F32, 4, 3, &o));
    CHECK(o.nnzb == 0 && o.row_ptr[bsk_bsr_mb(&o)] == 0);
    bsk_bsr_free(&o);
    int32_t rp0[13] = {0};
    REQUIRE_OK(bsk_bsr_from_csr(rows, cols, 0, rp0, NULL, NULL, BSK_F32, 4, 3, &o));
    CHECK(o.nnzb == 0);
    bsk_bsr_free(&o);
#undef EXPECT_FAIL
}

/* ---------------------------------------------------------------- to_dense errors, transpose */

BSK_TEST(bsr_to_dense_bad_arguments)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(30, 20, 8, 4, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A));
    bsk_dense E = bsk_test_dense(30, 20, 3, BSK_F16, rng);
    size_t bytes = (size_t)(30 * E.ld) * 2;
    unsigned char *saved = (unsigned char *)malloc(bytes);
    memcpy(saved, E.data, bytes);
#define EXPECT_FAIL(call, want) do { CHECK_STATUS(call, want); CHECK(memcmp(E.data, saved, bytes) == 0); } while (0)
    bsk_dense W = E;
    EXPECT_FAIL(bsk_bsr_to_dense(NULL, &E), BSK_ERR_NULL_POINTER);
    EXPECT_FAIL(bsk_bsr_to_dense(&A, NULL), BSK_ERR_NULL_POINTER);
    W.dtype = BSK_BF16;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_UNSUPPORTED);
    W = E; W.rows = 29;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_SHAPE_MISMATCH);
    W = E; W.cols = 21; W.ld = 23;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_SHAPE_MISMATCH);
    W = E; W.ld = 19;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_BAD_LAYOUT);
    W = E; W.data = (char *)E.data + 1;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_MISALIGNED);
    W = E; W.mem = BSK_MEM_DEVICE;
    EXPECT_FAIL(bsk_bsr_to_dense(&A, &W), BSK_ERR_WRONG_LOCATION);
    bsk_bsr B = A;
    B.mem = BSK_MEM_DEVICE;
    EXPECT_FAIL(bsk_bsr_to_dense(&B, &E), BSK_ERR_WRONG_LOCATION);
    B = A;
    B.col_idx[0] = B.col_idx[1]; /* row 0 holds round(0.5*5) >= 2 blocks: a duplicate */
    EXPECT_FAIL(bsk_bsr_to_dense(&B, &E), BSK_ERR_INVALID_BSR);
    B.col_idx[0] = -1;
    EXPECT_FAIL(bsk_bsr_to_dense(&B, &E), BSK_ERR_INVALID_BSR);
    bsk_bsr_free(&A);
    REQUIRE_OK(bsk_bsr_random(30, 20, 8, 4, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F16, &A));
    /* output overlapping the input's values: a 2 x 4 matrix of one 8 x 4 block, written over that block */
    W = E; W.data = A.values; W.rows = 2; W.cols = 4; W.ld = 4;
    A.rows = 2; A.cols = 4; A.col_idx[0] = 0; A.row_ptr[1] = 1; A.nnzb = 1;
    unsigned char vsave[64];
    memcpy(vsave, A.values, sizeof vsave);
    CHECK_STATUS(bsk_bsr_to_dense(&A, &W), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(vsave, A.values, sizeof vsave) == 0);
    bsk_bsr_free(&A);
#undef EXPECT_FAIL
    free(saved);
    bsk_test_dense_free(&E);
}

BSK_TEST(bsr_transpose_twice_is_identity_and_matches_dense)
{
    bsk_rng *rng = bsk_test_rng();
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < NSHAPES; si++) {
            bsk_dtype dt = DTYPES[ti];
            int64_t rows = SHAPES[si].rows, cols = SHAPES[si].cols;
            int32_t br = SHAPES[si].br, bc = SHAPES[si].bc;
            bsk_bsr A, T, TT;
            double d = bsk_rng_uniform(rng);
            REQUIRE_OK(bsk_bsr_random(rows, cols, br, bc, d, si & 1 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                                      bsk_rng_next(rng), dt, &A));
            REQUIRE_OK(bsk_bsr_transpose(&A, &T));
            CHECK_STATUS(bsk_bsr_validate(&T), BSK_SUCCESS);
            CHECK(T.rows == cols && T.cols == rows && T.block_rows == bc && T.block_cols == br);
            CHECK(T.nnzb == A.nnzb && T.dtype == dt && T.mem == BSK_MEM_HOST);
            CHECK(padding_is_zero(&T) && inbounds_nonzero(&T));
            /* to_dense(Aᵀ) = to_dense(A)ᵀ, bit for bit */
            bsk_dense DA = bsk_test_dense_poison(rows, cols, 1, dt), DT = bsk_test_dense_poison(cols, rows, 0, dt);
            REQUIRE_OK(bsk_bsr_to_dense(&A, &DA));
            REQUIRE_OK(bsk_bsr_to_dense(&T, &DT));
            size_t es = bsk_dtype_size(dt);
            int ok = 1;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++)
                    ok &= memcmp((char *)DA.data + (r * DA.ld + c) * es, (char *)DT.data + (c * DT.ld + r) * es, es) == 0;
            CHECK(ok);
            /* twice: every array identical, padding included */
            REQUIRE_OK(bsk_bsr_transpose(&T, &TT));
            CHECK(TT.rows == rows && TT.cols == cols && TT.block_rows == br && TT.block_cols == bc && TT.nnzb == A.nnzb);
            CHECK(memcmp(TT.row_ptr, A.row_ptr, (size_t)(bsk_bsr_mb(&A) + 1) * 4) == 0);
            CHECK(memcmp(TT.col_idx, A.col_idx, (size_t)A.nnzb * 4) == 0);
            CHECK(memcmp(TT.values, A.values, (size_t)A.nnzb * br * bc * es) == 0);
            if (!ok) fprintf(stderr, "  shape %d dtype %d\n", si, ti);
            bsk_bsr_free(&A); bsk_bsr_free(&T); bsk_bsr_free(&TT);
            bsk_test_dense_free(&DA); bsk_test_dense_free(&DT);
        }
    /* malformed input: named status, out untouched */
    bsk_bsr A, o = poisoned_bsr();
    REQUIRE_OK(bsk_bsr_random(40, 40, 8, 8, 0.6, BSK_PATTERN_UNIFORM, bsk_rng_next(rng), BSK_F32, &A));
    int32_t c0 = A.col_idx[0];
    A.col_idx[0] = 5;
    CHECK_STATUS(bsk_bsr_transpose(&A, &o), BSK_ERR_INVALID_BSR);
    CHECK(bsr_untouched(&o));
    A.col_idx[0] = c0;
    CHECK_STATUS(bsk_bsr_transpose(NULL, &o), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_transpose(&A, NULL), BSK_ERR_NULL_POINTER);
    A.mem = BSK_MEM_DEVICE;
    CHECK_STATUS(bsk_bsr_transpose(&A, &o), BSK_ERR_WRONG_LOCATION);
    A.mem = BSK_MEM_HOST;
    CHECK(bsr_untouched(&o));
    bsk_bsr_free(&A);
}

/* ---------------------------------------------------------------- clone, free */

BSK_TEST(bsr_clone_host_and_device)
{
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr A, B;
    REQUIRE_OK(bsk_bsr_random(77, 45, 16, 8, 0.4, BSK_PATTERN_SKEWED, bsk_rng_next(rng), BSK_BF16, &A));
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_HOST, &B));
    CHECK(B.rows == A.rows && B.cols == A.cols && B.block_rows == A.block_rows && B.block_cols == A.block_cols);
    CHECK(B.nnzb == A.nnzb && B.dtype == A.dtype && B.mem == BSK_MEM_HOST);
    CHECK(B.row_ptr != A.row_ptr && B.col_idx != A.col_idx && B.values != A.values);
    CHECK(memcmp(B.row_ptr, A.row_ptr, (size_t)(bsk_bsr_mb(&A) + 1) * 4) == 0);
    CHECK(memcmp(B.col_idx, A.col_idx, (size_t)A.nnzb * 4) == 0);
    CHECK(memcmp(B.values, A.values, (size_t)A.nnzb * 16 * 8 * 2) == 0);
    /* a deep copy: changing the clone leaves A alone */
    ((uint16_t *)B.values)[0] ^= 0x8000u;
    CHECK(((uint16_t *)B.values)[0] != ((uint16_t *)A.values)[0]);
    bsk_bsr_free(&B);
    bsk_bsr z;
    memset(&z, 0, sizeof z);
    CHECK(memcmp(&B, &z, sizeof z) == 0); /* free zeroes the struct */
    bsk_bsr_free(&B);                     /* and freeing again is a no-op */
    bsk_bsr_free(NULL);

    /* bad arguments */
    bsk_bsr o = poisoned_bsr();
    CHECK_STATUS(bsk_bsr_clone(&A, (bsk_memory)2, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_clone(NULL, BSK_MEM_HOST, &o), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_clone(&A, BSK_MEM_HOST, NULL), BSK_ERR_NULL_POINTER);
    int32_t keep = A.row_ptr[1];
    A.row_ptr[1] = A.row_ptr[2] + 1;
    CHECK_STATUS(bsk_bsr_clone(&A, BSK_MEM_HOST, &o), BSK_ERR_INVALID_BSR);
    A.row_ptr[1] = keep;
    CHECK(bsr_untouched(&o));

    bsk_device_info info;
    if (bsk_device_query(&info) != BSK_SUCCESS) {
        CHECK_STATUS(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &o), BSK_ERR_NO_DEVICE);
        bsk_bsr fake = A;
        fake.mem = BSK_MEM_DEVICE; /* host pointers claiming to be on a device that does not exist */
        CHECK_STATUS(bsk_bsr_clone(&fake, BSK_MEM_HOST, &o), BSK_ERR_NO_DEVICE);
        bsk_bsr_stats st;
        CHECK_STATUS(bsk_bsr_stats_get(&fake, &st), BSK_ERR_NO_DEVICE);
        CHECK(bsr_untouched(&o));
        bsk_bsr_free(&A);
        SKIP("no CUDA device: device clone checked to fail with BSK_ERR_NO_DEVICE");
    }
    /* with a device: host -> device -> host round trip, device validate and stats */
    bsk_bsr D, H;
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &D));
    CHECK(D.mem == BSK_MEM_DEVICE);
    CHECK_STATUS(bsk_bsr_validate(&D), BSK_SUCCESS);
    bsk_bsr_stats s1, s2;
    REQUIRE_OK(bsk_bsr_stats_get(&A, &s1));
    REQUIRE_OK(bsk_bsr_stats_get(&D, &s2));
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
    REQUIRE_OK(bsk_bsr_clone(&D, BSK_MEM_HOST, &H));
    CHECK(memcmp(H.row_ptr, A.row_ptr, (size_t)(bsk_bsr_mb(&A) + 1) * 4) == 0);
    CHECK(memcmp(H.col_idx, A.col_idx, (size_t)A.nnzb * 4) == 0);
    CHECK(memcmp(H.values, A.values, (size_t)A.nnzb * 16 * 8 * 2) == 0);
    bsk_bsr_free(&H);
    bsk_bsr_free(&D);
    bsk_bsr_free(&A);
}

/* ---------------------------------------------------------------- stats and the random generator */

/* Stats computed here from the arrays, to compare with bsk_bsr_stats_get. */
static bsk_bsr_stats stats_by_hand(const bsk_bsr *A)
{
    bsk_bsr_stats s;
    memset(&s, 0, sizeof s);
    s.mb = bsk_bsr_mb(A); s.nb = bsk_bsr_nb(A); s.nnzb = A->nnzb;
    s.row_min = s.mb ? INT64_MAX : 0;
    for (int64_t i = 0; i < s.mb; i++) {
        int64_t n = A->row_ptr[i + 1] - A->row_ptr[i];
        if (n < s.row_min) s.row_min = n;
        if (n > s.row_max) s.row_max = n;
        s.empty_rows += n == 0;
    }
    s.density = (double)A->nnzb / ((double)s.mb * (double)s.nb);
    s.row_mean = (double)A->nnzb / (double)s.mb;
    return s;
}

BSK_TEST(bsr_stats_uniform_and_skewed)
{
    bsk_rng *rng = bsk_test_rng();
    const int64_t rows = 4 * 200 + 1, cols = 4 * 150 - 3; /* mb = 201, nb = 150 */
    const double densities[] = {0.01, 0.1, 0.37, 0.9};
    for (int q = 0; q < 4; q++) {
        double d = densities[q];
        bsk_bsr U, S;
        uint64_t seed = bsk_rng_next(rng);
        REQUIRE_OK(bsk_bsr_random(rows, cols, 4, 4, d, BSK_PATTERN_UNIFORM, seed, BSK_F16, &U));
        REQUIRE_OK(bsk_bsr_random(rows, cols, 4, 4, d, BSK_PATTERN_SKEWED, seed, BSK_F16, &S));
        bsk_bsr_stats su, ss;
        REQUIRE_OK(bsk_bsr_stats_get(&U, &su));
        REQUIRE_OK(bsk_bsr_stats_get(&S, &ss));
        bsk_bsr_stats hu = stats_by_hand(&U), hs = stats_by_hand(&S);
        CHECK(su.mb == 201 && su.nb == 150 && ss.mb == 201 && ss.nb == 150);
        CHECK(su.nnzb == hu.nnzb && su.row_min == hu.row_min && su.row_max == hu.row_max && su.empty_rows == hu.empty_rows);
        CHECK(ss.nnzb == hs.nnzb && ss.row_min == hs.row_min && ss.row_max == hs.row_max && ss.empty_rows == hs.empty_rows);
        CHECK(fabs(su.density - hu.density) < 1e-12 && fabs(su.row_mean - hu.row_mean) < 1e-9);
        CHECK(fabs(ss.density - hs.density) < 1e-12 && fabs(ss.row_mean - hs.row_mean) < 1e-9);
        /* the requested density, in both patterns (same total) */
        int64_t want = llround(d * 201.0 * 150.0);
        CHECK(su.nnzb == want && ss.nnzb == want);
        CHECK(fabs(su.density - d) < 0.5 / (201.0 * 150.0) + 1e-12);
        /* uniform: every row within one of the mean; skewed: long rows far above it */
        CHECK(su.row_max - su.row_min <= 1 && (double)su.row_min <= su.row_mean && su.row_mean <= (double)su.row_max);
        CHECK(su.empty_rows == (su.row_min == 0 ? hu.empty_rows : 0));
        if (d <= 0.37) CHECK((double)ss.row_max >= 1.5 * ss.row_mean);
        CHECK(ss.row_max <= 150);
        if (d == 0.01) CHECK(ss.empty_rows > 0 && su.empty_rows == 0); /* 1.5 blocks/row on average */
        bsk_bsr_free(&U);
        bsk_bsr_free(&S);
    }
    /* bad arguments */
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(50, 50, 8, 8, 0.3, BSK_PATTERN_UNIFORM, 1, BSK_F32, &A));
    bsk_bsr_stats st, poison;
    memset(&poison, 0x5A, sizeof poison);
    st = poison;
    CHECK_STATUS(bsk_bsr_stats_get(NULL, &st), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_bsr_stats_get(&A, NULL), BSK_ERR_NULL_POINTER);
    A.row_ptr[bsk_bsr_mb(&A)]++;
    CHECK_STATUS(bsk_bsr_stats_get(&A, &st), BSK_ERR_INVALID_BSR);
    A.row_ptr[bsk_bsr_mb(&A)]--;
    A.block_rows = 0;
    CHECK_STATUS(bsk_bsr_stats_get(&A, &st), BSK_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&st, &poison, sizeof st) == 0);
    A.block_rows = 8;
    bsk_bsr_free(&A);
}

BSK_TEST(bsr_random_properties)
{
    bsk_rng *rng = bsk_test_rng();
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < NSHAPES; si++)
            for (int pat = 0; pat < 2; pat++) {
                bsk_dtype dt = DTYPES[ti];
                int64_t rows = SHAPES[si].rows, cols = SHAPES[si].cols;
                int32_t br = SHAPES[si].br, bc = SHAPES[si].bc;
                int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc;
                double d = bsk_rng_uniform(rng);
                uint64_t seed = bsk_rng_next(rng);
                bsk_bsr A, B, C;
                REQUIRE_OK(bsk_bsr_random(rows, cols, br, bc, d, (bsk_pattern)pat, seed, dt, &A));
                /* sorted, unique, in range: validate checks exactly that */
                CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
                CHECK(A.nnzb == llround(d * (double)mb * (double)nb));
                CHECK(A.rows == rows && A.cols == cols && A.block_rows == br && A.block_cols == bc && A.dtype == dt);
                if (pat == BSK_PATTERN_UNIFORM)
                    for (int64_t i = 0; i < mb; i++) {
                        int64_t n = A.row_ptr[i + 1] - A.row_ptr[i];
                        CHECK(n == A.nnzb / mb || n == A.nnzb / mb + 1);
                    }
                CHECK(inbounds_nonzero(&A));
                CHECK(padding_is_zero(&A));
                /* deterministic per seed; another seed gives another matrix */
                REQUIRE_OK(bsk_bsr_random(rows, cols, br, bc, d, (bsk_pattern)pat, seed, dt, &B));
                size_t vb = (size_t)A.nnzb * br * bc * bsk_dtype_size(dt);
                CHECK(B.nnzb == A.nnzb && memcmp(A.row_ptr, B.row_ptr, (size_t)(mb + 1) * 4) == 0 &&
                      memcmp(A.col_idx, B.col_idx, (size_t)A.nnzb * 4) == 0 && memcmp(A.values, B.values, vb) == 0);
                REQUIRE_OK(bsk_bsr_random(rows, cols, br, bc, d, (bsk_pattern)pat, seed + 1, dt, &C));
                if (A.nnzb > 0) /* a few non-zero values: equal by chance only with negligible odds */
                    CHECK(C.nnzb != A.nnzb || memcmp(A.col_idx, C.col_idx, (size_t)A.nnzb * 4) != 0 ||
                          memcmp(A.values, C.values, vb) != 0);
                bsk_bsr_free(&A); bsk_bsr_free(&B); bsk_bsr_free(&C);
            }
    /* density 0 and 1 */
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(100, 90, 16, 16, 1.0, BSK_PATTERN_SKEWED, 7, BSK_F32, &A));
    CHECK(A.nnzb == 7 * 6);
    CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
    bsk_bsr_free(&A);
    REQUIRE_OK(bsk_bsr_random(100, 90, 16, 16, 0.0, BSK_PATTERN_UNIFORM, 7, BSK_F32, &A));
    CHECK(A.nnzb == 0 && A.row_ptr[7] == 0);
    bsk_bsr_free(&A);
    /* a wide pattern stays fast (no per-row O(nb) reset, no quadratic sort): 500 x 20000 blocks */
    REQUIRE_OK(bsk_bsr_random(500, 20000, 1, 1, 0.5, BSK_PATTERN_UNIFORM, 9, BSK_F32, &A));
    CHECK(A.nnzb == 5000000);
    CHECK_STATUS(bsk_bsr_validate(&A), BSK_SUCCESS);
    bsk_bsr_free(&A);
    /* bad arguments */
    bsk_bsr o = poisoned_bsr();
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2, 1.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2, NAN, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2, 0.5, (bsk_pattern)2, 1, BSK_F32, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_random(10, 10, 0, 2, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2, 0.5, BSK_PATTERN_UNIFORM, 1, (bsk_dtype)5, &o), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2000, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_random((int64_t)1 << 32, 10, 2, 2, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, &o), BSK_ERR_OVERFLOW);
    CHECK_STATUS(bsk_bsr_random(10, 10, 2, 2, 0.5, BSK_PATTERN_UNIFORM, 1, BSK_F32, NULL), BSK_ERR_NULL_POINTER);
    CHECK(bsr_untouched(&o));
}
