/* spmm_gpu_util.h — fixtures the device SpMM tests share (tests/spmm_gpu_util.c): upload, a random BSR, and one
   SpMM case run on the device and checked against the float64 reference. Used by test_hopper.c (b = 64 / 128)
   and test_hopper_small.c (b = 16 / 32). Built only with CUDA. */
#ifndef BSK_TEST_SPMM_GPU_UTIL_H
#define BSK_TEST_SPMM_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "harness.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
/* A device copy of `bytes` host bytes (a 1-byte allocation for 0), or NULL. */
void *spmm_dev_copy(const void *h, size_t bytes);
/* Bytes of a dense matrix's buffer: rows x ld elements. */
size_t spmm_dense_bytes(const bsk_dense *D);
/* A random host BSR with square b x b blocks (seeded from the test stream); zeroed on failure. */
bsk_bsr spmm_random_bsr(int64_t M, int64_t K, int b, double d, bsk_pattern pat, bsk_dtype dt);
/* C = alpha * op(A) * B + beta * C on the device for host A (fresh random B, random C when beta != 0, NaN-poisoned
   C otherwise), checked against the float64 reference: the relative error of the whole, every element (|got - ref|
   <= tol * (|ref| + rms(ref) / 4)), the padding between cols and ld untouched, and — when want is not NULL — that
   the kernel that ran (bsk_last_kernel) starts with `want`, so a silent fallback fails. Returns the relative
   error (NaN on any failure, after recording it). */
double spmm_gpu_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, int64_t N, int64_t padB,
                     int64_t padC, bsk_dtype ct, float alpha, float beta, const char *want);
/* Determinism: the same bsk_spmm (alpha 1, beta 0, fresh random B of N columns, C of dtype ct poisoned) `reps` times
   on the device gives the same bytes every time; the kernel that ran starts with `want` (NULL: any). */
void spmm_gpu_repeat_same(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, int64_t N, bsk_dtype ct,
                          int reps, const char *want);
/* Two code paths, same bytes: bsk_spmm (alpha, beta 0, fresh random B of N columns with ld N + padB, C of dtype ct
   with ld N + padC, NaN-poisoned before each call) with *knob = v0, then *knob = v1; both runs' whole C buffers
   (padding included) must be identical and both kernels start with `want` (NULL: any). *knob is left at v0. */
void spmm_gpu_knob_same(bsk_test_ctx *t, bsk_context *ctx, const bsk_bsr *A, int64_t N, int64_t padB, int64_t padC,
                        bsk_dtype ct, float alpha, int *knob, int v0, int v1, const char *want);
/* One call with the pattern cache on, on a device pattern dA (host copy A): C = alpha * op(A) * B + beta * C with
   fresh random B (N columns) and C (poisoned when beta = 0; beta != 0 also shows an item run twice), checked against
   the float64 reference; the kernel that ran is `want` (exactly), and *prep_flag (the launcher's out_prep knob)
   equals prep: 1 its prep kernels ran (first use of the pattern, or a capture), 0 it took the cached lists. With
   `capture` (a stream) the call is captured there and the graph replayed three times, C restored on that stream
   before each replay, each replay checked. */
void spmm_gpu_cached_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_bsr *dA, int64_t N,
                          float alpha, float beta, const char *want, const int *prep_flag, int prep,
                          cudaStream_t capture);
/* A launcher's out_prep after the last call (1 prep kernels, 0 cached lists, 2 direct mode) is `want`; `what` names the
   case in the failure message. */
void spmm_gpu_expect_prep(bsk_test_ctx *t, int out_prep, int want, const char *what);
/* After a direct-mode call: the eight words of its queue slot (the launcher's out_queue; NULL fails) are zero again —
   the main kernel's last CTA resets them; a word left non-zero would grow call by call. Synchronises the context. */
void spmm_gpu_expect_queue_zero(bsk_test_ctx *t, bsk_context *ctx, const void *queue, const char *what);
#endif

#endif
