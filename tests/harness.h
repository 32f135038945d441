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

#endif
