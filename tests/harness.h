/* harness.h — the test runner's few macros. Each test file defines tests with BSK_TEST(name) { ... };
   tests register themselves (constructor attribute) and tests/main.c runs them, prints one line each and
   a closing "N passed, N failed, N skipped" line, and exits non-zero on any failure.
   CHECK* record a failure and continue; REQUIRE* record it and end the test. SKIP(msg) ends it as skipped. */
#ifndef BSK_TEST_HARNESS_H
#define BSK_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include "bsk.h"

typedef struct bsk_test_ctx {
    int failed;
    int skipped;
    char skip_msg[200];
} bsk_test_ctx;

typedef void (*bsk_test_fn)(bsk_test_ctx *t);
void bsk_test_register(const char *name, const char *file, bsk_test_fn fn);

#define BSK_TEST(name)                                                                                  \
    static void name(bsk_test_ctx *t);                                                                   \
    __attribute__((constructor)) static void name##_register(void) { bsk_test_register(#name, __FILE__, name); } \
    static void name(bsk_test_ctx *t)

#define CHECK(cond)                                                                                     \
    do { if (!(cond)) { t->failed++; fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } } while (0)
#define REQUIRE(cond)                                                                                   \
    do { if (!(cond)) { t->failed++; fprintf(stderr, "  %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #cond); return; } } while (0)
/* Status equality, printing both names on failure. */
#define CHECK_STATUS(expr, want)                                                                        \
    do { int got_ = (int)(expr), want_ = (int)(want);                                                    \
         if (got_ != want_) { t->failed++; fprintf(stderr, "  %s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #expr, \
                                                  bsk_status_string(got_), bsk_status_string(want_)); } } while (0)
#define REQUIRE_OK(expr)                                                                                \
    do { int got_ = (int)(expr);                                                                         \
         if (got_ != 0) { t->failed++; fprintf(stderr, "  %s:%d: %s = %s\n", __FILE__, __LINE__, #expr, bsk_status_string(got_)); return; } } while (0)
/* Relative error check: fails when err > tol or err is NaN. */
#define CHECK_REL(err, tol)                                                                             \
    do { double e_ = (err), tl_ = (tol);                                                                 \
         if (!(e_ <= tl_)) { t->failed++; fprintf(stderr, "  %s:%d: rel err %.3e > tol %.1e (%s)\n", __FILE__, __LINE__, e_, tl_, #err); } } while (0)
#define SKIP(msg)                                                                                       \
    do { t->skipped = 1; snprintf(t->skip_msg, sizeof t->skip_msg, "%s", msg); return; } while (0)

/* ---- shared helpers (tests/util.c) */
/* The run's seed: BSK_TEST_SEED from the environment, else time-based; printed by main. */
uint64_t bsk_test_seed(void);
/* A fresh generator per test, derived from the run seed and the test name. */
typedef struct { uint64_t s; } bsk_rng;
void bsk_rng_init(bsk_rng *r, uint64_t seed);
uint64_t bsk_rng_next(bsk_rng *r);
double bsk_rng_uniform(bsk_rng *r);           /* [0, 1)   */
float bsk_rng_sym(bsk_rng *r);                /* [-1, 1), never exactly 0 */
int64_t bsk_rng_int(bsk_rng *r, int64_t lo, int64_t hi); /* [lo, hi] */
/* The generator of the running test (seeded from the run seed and the test's name). */
bsk_rng *bsk_test_rng(void);
/* BSK_STRESS_SCALE=n (1..1000, default 1): the factor the random stress tests multiply their problem counts by
   (the long tier, TESTING.md). */
int bsk_test_stress_scale(void);


/* A usable CUDA device: BSK_SUCCESS, BSK_ERR_NO_DEVICE, or another status (tests/util.c). NEED_GPU() skips
   the test without a device and fails it on any other error. */
bsk_status bsk_test_gpu_probe(void);
#define NEED_GPU()                                                                                      \
    do { bsk_status gs_ = bsk_test_gpu_probe(); if (gs_ == BSK_ERR_NO_DEVICE) SKIP("no CUDA device"); REQUIRE_OK(gs_); } while (0)

/* ---- fixtures and float64 references (tests/util.c) */
/* A host dense matrix with fresh random values in [-1, 1) (never zero); ld >= cols (ld = cols + pad). */
bsk_dense bsk_test_dense(int64_t rows, int64_t cols, int64_t pad, bsk_dtype t, bsk_rng *r);
/* A host dense matrix filled with NaN (poison) — check that every element gets written. */
bsk_dense bsk_test_dense_poison(int64_t rows, int64_t cols, int64_t pad, bsk_dtype t);
void bsk_test_dense_free(bsk_dense *D);
/* float64 reference of C = alpha·op(A)·B + beta·C_in, straight from the BSR definition; out is m x n
   (packed). C_in may be NULL when beta == 0. */
void bsk_ref_spmm(bsk_op op, double alpha, const bsk_bsr *A, const bsk_dense *B, double beta,
                  const bsk_dense *C_in, double *out);
/* Its magnitude |alpha|·|op(A)|·|B| + |beta|·|C_in|: the scale of the rounding error of any summation order, for
   outputs whose value cancels (a 1 x 1 product of mixed signs can be far smaller than its terms). */
void bsk_ref_spmm_mag(bsk_op op, double alpha, const bsk_bsr *A, const bsk_dense *B, double beta,
                      const bsk_dense *C_in, double *out);
/* float64 reference of SDDMM: out[k][r][c] (nnzb*br*bc, packed like values). in may be NULL if beta == 0. */
void bsk_ref_sddmm(double alpha, const bsk_dense *X, const bsk_dense *Y, double beta, const bsk_bsr *in,
                   double *out);
/* Its magnitude |alpha|·|X|·|Y|ᵀ + |beta|·|in| on the same entries (as bsk_ref_spmm_mag: for values that cancel). */
void bsk_ref_sddmm_mag(double alpha, const bsk_dense *X, const bsk_dense *Y, double beta, const bsk_bsr *in,
                       double *out);
/* ‖got − ref‖ / ‖ref‖ over n elements of `got` (dtype t, packed) — NaN if any element is NaN/Inf.
   For a dense matrix with ld use bsk_rel_err_dense. ‖ref‖ = 0 gives ‖got‖ instead. */
double bsk_rel_err(const void *got, bsk_dtype t, const double *ref, int64_t n);
double bsk_rel_err_dense(const bsk_dense *got, const double *ref);
/* Tolerance for outputs computed from inputs of dtype `in` and written as `out` (fp32 accumulate). */
double bsk_tol(bsk_dtype in, bsk_dtype out);

#endif
