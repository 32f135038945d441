/* test_hopper_small.c — the small-block Hopper SpMM (BS = 32 / 16, swapped operands: src/cuda/hopper/spmm_small_*)
   through the public API, against the float64 reference. Every test SKIPs without a CUDA device or on a device
   that is not compute capability 9.0. Each case draws fresh random A, B (and C when beta != 0), poisons C with NaN
   otherwise, checks every element against the reference (and the relative error of the whole), that the padding
   between cols and ld is untouched, and that the small-block kernel ran (bsk_last_kernel), so a silent fallback to
   the portable kernel fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
#include "spmm_gpu_util.h"

/* Internal knobs of the small-block path: the other stage shapes, tiny grids, bands, PDL. */
#include "cuda/hopper/spmm_small_tune.h"

/* Every test runs with the density crossover off (force = 1): the cases are about correctness at any density. */
static struct bsk_hopper_small_tune_s small_saved;
static const char *small_skip_reason(bsk_context **ctx)
{
    bsk_device_info info;
    if (bsk_device_query(&info) != BSK_SUCCESS) return "no CUDA device";
    if (info.cc_major != 9 || info.cc_minor != 0) return "device is not compute capability 9.0";
    if (bsk_create(ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) return "no CUDA context";
    /* only once the test runs (a skipped test returns without restoring the knobs) */
    small_saved = bsk__hopper_small_tune;
    bsk__hopper_small_tune.force = 1;
    return NULL;
}

static const char *small_name(int b) { return b == 32 ? "hopper-wgmma-b32s" : "hopper-wgmma-b16s"; }

/* The rows-per-wgmma knob (rows_per_mma) of block size b: index 0 the default, 1 one row per wgmma (session 8),
   2 / 3 / 4 the grouped shapes (b32: 2, 4, 8 rows; b16: 4, 8, 16 rows; session 9). */
static int small_rg(int b, int i)
{
    static const int g32[5] = {0, 1, 2, 4, 8}, g16[5] = {0, 1, 4, 8, 16};
    return b == 32 ? g32[i % 5] : g16[i % 5];
}

/* C = alpha*A*B + beta*C on the device, checked against the reference (spmm_gpu_util.h); want: the kernel name
   that must have run (NULL: any kernel, e.g. a declined case). */
static double run_case(bsk_test_ctx *t, bsk_context *ctx, const bsk_bsr *A, int64_t N, int64_t padB, int64_t padC,
                       bsk_dtype ct, float alpha, float beta, const char *want)
{
    return spmm_gpu_case(t, ctx, BSK_OP_N, A, N, padB, padC, ct, alpha, beta, want);
}

/* A from a block mask: keep(i, j) decides block (i, j); values fresh random. */
static bsk_bsr mask_bsr(int64_t M, int64_t K, int b, bsk_dtype dt, int (*keep)(int64_t, int64_t, bsk_rng *))
{
    bsk_rng *r = bsk_test_rng();
    const int64_t mb = (M + b - 1) / b, nb = (K + b - 1) / b;
    bsk_dense D = bsk_test_dense(M, K, 0, dt, r);
    uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
    for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = (uint8_t)keep(i, j, r);
    bsk_bsr A;
    memset(&A, 0, sizeof A);
    (void)bsk_bsr_from_mask(&D, b, b, mask, &A);
    free(mask);
    bsk_test_dense_free(&D);
    return A;
}

/* Both block sizes, both input dtypes, every output dtype; alpha random, beta random (C read) and zero (C
   poisoned); M, K not multiples of anything, N a multiple of 8 (16-byte vectors all the way); rows per wgmma
   varied, the absent-row slots zeroed by the default way and by stores. */
BSK_TEST(gpu_hopper_small_dtypes)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const bsk_dtype ins[2] = {BSK_F16, BSK_BF16}, outs[3] = {BSK_F32, BSK_F16, BSK_BF16};
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2)
        for (int ii = 0; ii < 2; ii++)
            for (int oi = 0; oi < 3; oi++) {
                const int64_t M = (int64_t)b * bsk_rng_int(r, 9, 20) + bsk_rng_int(r, 1, b - 1);
                const int64_t K = (int64_t)b * bsk_rng_int(r, 6, 12) + bsk_rng_int(r, 1, b - 1);
                const int64_t N = 8 * bsk_rng_int(r, 17, 45);
                bsk_bsr A = spmm_random_bsr(M, K, b, 0.35, BSK_PATTERN_UNIFORM, ins[ii]);
                for (int z = 0; z < 2; z++) {
                    const float alpha = 0.5f + (float)bsk_rng_uniform(r), beta = z ? 0.0f : bsk_rng_sym(r);
                    /* rows per wgmma: fp16 input meets knob indices 0-4, bf16 1-4 (index 0: chosen by density) */
                    const int k = ii * 3 + oi + 2 * z;
                    bsk__hopper_small_tune.rows_per_mma = small_rg(b, k % 5 + (k >= 5));
                    bsk__hopper_small_tune.zero_tma = z ? 0 : 1; /* absent-row slots: the default / stores */
                    run_case(t, ctx, &A, N, 8 * z, 8 * (1 - z), outs[oi], alpha, beta, small_name(b));
                }
                bsk__hopper_small_tune.rows_per_mma = 0;
                bsk__hopper_small_tune.zero_tma = 0;
                bsk_bsr_free(&A);
            }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* Tails: N odd and N not a multiple of 8 (element-wise stores at the row end, ld padded to keep 16-byte rows), N
   below one 64-column half (a whole consumer past N) and below 8, K below one block (a partial single block
   column: B's rows past K read as zero), M below one block row (M = 1 .. b-1), M = 1; every rows-per-wgmma shape
   with the absent-row slots zeroed by TMA (the default only up to 4 rows). */
BSK_TEST(gpu_hopper_small_tails)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2)
    for (int gi = 1; gi < 5; gi++) { /* rows per wgmma: 1 and the grouped shapes */
        bsk__hopper_small_tune.rows_per_mma = small_rg(b, gi);
        bsk__hopper_small_tune.zero_tma = 2; /* absent-row slots zeroed by TMA at every group width */
        const char *want = small_name(b);
        {
            const int64_t M = (int64_t)b * bsk_rng_int(r, 10, 17) + bsk_rng_int(r, 1, b - 1);
            const int64_t K = (int64_t)b * bsk_rng_int(r, 5, 9) + bsk_rng_int(r, 1, b - 1);
            bsk_bsr A = spmm_random_bsr(M, K, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
            const int64_t No = 2 * bsk_rng_int(r, 70, 200) + 1; /* odd */
            const int64_t pad = 8 - No % 8;                     /* ld * 2 and ld * 4 multiples of 16 */
            run_case(t, ctx, &A, No, pad, pad, BSK_F32, 1.0f, 0.0f, want);
            run_case(t, ctx, &A, No, pad, pad + 8, BSK_F16, -0.75f, 0.5f, want);
            run_case(t, ctx, &A, No + 5, 8 - (No + 5) % 8, 8 - (No + 5) % 8, BSK_BF16, 1.25f, 0.0f, want);
            run_case(t, ctx, &A, 40, 0, 0, BSK_F32, 1.0f, -1.0f, want); /* consumer 1 entirely past N */
            run_case(t, ctx, &A, 5, 3, 3, BSK_F32, 1.0f, 0.5f, want);   /* N < 8: ld 8 (f32: 32 bytes)   */
            bsk_bsr_free(&A);
        }
        {
            /* K < b: one partial block column */
            bsk_bsr A = spmm_random_bsr((int64_t)b * 9 + 3, bsk_rng_int(r, 1, b - 1), b, 1.0, BSK_PATTERN_UNIFORM, BSK_BF16);
            run_case(t, ctx, &A, 136, 0, 0, BSK_BF16, 1.0f, 0.0f, want);
            run_case(t, ctx, &A, 136, 0, 0, BSK_F32, 0.5f, 2.0f, want);
            bsk_bsr_free(&A);
        }
        for (int q = 0; q < 2; q++) {
            /* M below one block row (one group, one row), M = 1 */
            const int64_t M = q ? 1 : bsk_rng_int(r, 2, b - 1);
            bsk_bsr A = spmm_random_bsr(M, (int64_t)b * 7 + 5, b, 0.6, BSK_PATTERN_UNIFORM, BSK_F16);
            run_case(t, ctx, &A, 264, 0, 0, BSK_F16, 1.0f, 0.0f, want);
            run_case(t, ctx, &A, 264, 8, 0, BSK_F32, 1.0f, 0.25f, want);
            bsk_bsr_free(&A);
        }
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

static int keep_sparse_rows(int64_t i, int64_t j, bsk_rng *r)
{
    (void)j;
    /* rows 1 mod 3 empty; rows 24..47 (whole groups at b = 32 and the second half of a group at b = 16) empty */
    if (i % 3 == 1 || (i >= 24 && i < 48)) return 0;
    return bsk_rng_uniform(r) < 0.4;
}
static int keep_none(int64_t i, int64_t j, bsk_rng *r)
{
    (void)i; (void)j; (void)r;
    return 0;
}

/* Empty rows inside groups, empty row groups (items with no stage), nnzb = 0 (every item empty: C = beta*C, or 0 on a
   poisoned C), and skewed rows (a few long rows, many short). */
BSK_TEST(gpu_hopper_small_empty_skewed)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    for (int b = 32; b >= 16; b /= 2)
    for (int gi = 1; gi < 5; gi++) { /* rows per wgmma: 1 and the grouped shapes (absent rows inside groups) */
        bsk__hopper_small_tune.rows_per_mma = small_rg(b, gi);
        const char *want = small_name(b);
        const int64_t M = (int64_t)b * 70 - 9, K = (int64_t)b * 9 + 3;
        bsk_bsr E = mask_bsr(M, K, b, BSK_F16, keep_sparse_rows);
        run_case(t, ctx, &E, 264, 0, 0, BSK_F16, 1.0f, 0.0f, want);
        run_case(t, ctx, &E, 264, 0, 0, BSK_F32, 2.0f, -1.0f, want);
        bsk_bsr Z = mask_bsr(M, K, b, BSK_BF16, keep_none);
        CHECK(Z.nnzb == 0);
        run_case(t, ctx, &Z, 200, 0, 0, BSK_F32, 1.0f, 0.0f, want);
        run_case(t, ctx, &Z, 200, 0, 0, BSK_BF16, 1.0f, 0.25f, want);
        bsk_bsr S = spmm_random_bsr((int64_t)b * 64, (int64_t)b * 24, b, 0.3, BSK_PATTERN_SKEWED, BSK_BF16);
        run_case(t, ctx, &S, 392, 0, 0, BSK_F32, 0.75f, 0.0f, want);
        run_case(t, ctx, &S, 392, 0, 0, BSK_BF16, 0.75f, 0.5f, want);
        bsk_bsr_free(&S);
        bsk_bsr_free(&Z);
        bsk_bsr_free(&E);
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* A persistent grid of 3 CTAs taking many items each (ring phases and the item look-ahead run on across items;
   the epilogue's staging buffer reused item after item), tiny bands (many bands, a partial last one), PDL off,
   every stage shape and producer count of each block size (variants 1-4 exist for fp16 input), and the default shape
   with rows grouped per wgmma (rows_per_mma, both input dtypes); then a bitwise repeat. */
BSK_TEST(gpu_hopper_small_persistent)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2) {
        const char *want = small_name(b);
        for (int v = 0; v < 8; v++) { /* 5-7: the default shape with rows grouped per wgmma (small_rg 2-4) */
            bsk__hopper_small_tune.variant = v < 5 ? v : 0;
            bsk__hopper_small_tune.rows_per_mma = v < 5 ? 0 : small_rg(b, v - 3);
            bsk__hopper_small_tune.max_ctas = 3;
            bsk__hopper_small_tune.band_mb = v == 0 || v == 6 ? 1 : 0;
            bsk__hopper_small_tune.no_pdl = v == 1;
            const int64_t M = (int64_t)b * bsk_rng_int(r, 40, 60) + 7, K = (int64_t)b * bsk_rng_int(r, 8, 14) + 1;
            bsk_bsr A = spmm_random_bsr(M, K, b, v == 7 ? 0.12 : 0.45, v == 1 || v == 5 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                                        v == 0 || v == 6 ? BSK_BF16 : BSK_F16);
            const int64_t N = 8 * bsk_rng_int(r, 60, 90);
            run_case(t, ctx, &A, N, 0, 0, BSK_F32, 1.0f, 0.0f, want);
            CHECK(bsk__hopper_small_tune.out_grid == 3);
            CHECK(bsk__hopper_small_tune.out_items > 3); /* more items than CTAs */
            run_case(t, ctx, &A, N, 8, 0, BSK_BF16, 0.5f, 1.0f, want);
            run_case(t, ctx, &A, N, 0, 8, BSK_F16, 0.5f, 0.0f, want);
            bsk_bsr_free(&A);
        }
        bsk__hopper_small_tune = saved;
        /* the same call twice gives the same bytes (no atomics in the sums: each item owns its outputs) */
        bsk_bsr S = spmm_random_bsr((int64_t)b * 40, (int64_t)b * 30, b, 0.3, BSK_PATTERN_SKEWED, BSK_F16);
        spmm_gpu_repeat_same(t, ctx, BSK_OP_N, &S, 264, BSK_F32, 2, want);
        bsk_bsr_free(&S);
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* The TMA-store epilogue (16-bit C of the input's dtype, beta = 0, N % 8 == 0; session 16) against the reference
   and, bitwise, against the direct epilogue (epi_direct = 1: the same fp32 sums, the same rounding): M and K tails,
   N past the last 64-column half (the store clips at N; the padding up to ld untouched), a consumer wholly past N
   (N = 40), M = 1 and M < b, empty rows and groups, nnzb = 0, every rows-per-wgmma shape, both input dtypes, and 2
   CTAs taking many items (each consumer's two buffers reused round after round, item after item); N odd and N < 8
   (the direct epilogue: TMA wrote into the padding there) next to them. */
BSK_TEST(gpu_hopper_small_tma_store)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_rng *r = bsk_test_rng();
    int *direct = &bsk__hopper_small_tune.epi_direct;
    for (int b = 32; b >= 16; b /= 2)
        for (int gi = 0; gi < 5; gi++) {
            bsk__hopper_small_tune.rows_per_mma = small_rg(b, gi);
            bsk__hopper_small_tune.max_ctas = gi == 2 ? 2 : 0;
            const bsk_dtype dt = (gi + b) % 2 ? BSK_BF16 : BSK_F16;
            const char *want = small_name(b);
            const float alpha = 0.25f + (float)bsk_rng_uniform(r);
            const int64_t M = (int64_t)b * bsk_rng_int(r, 20, 40) + bsk_rng_int(r, 1, b - 1);
            const int64_t K = (int64_t)b * bsk_rng_int(r, 5, 9) + bsk_rng_int(r, 1, b - 1);
            bsk_bsr A = spmm_random_bsr(M, K, b, 0.1 + 0.2 * gi, BSK_PATTERN_UNIFORM, dt);
            const int64_t N8 = 8 * bsk_rng_int(r, 17, 50) + 8 * (gi % 2); /* some N tile partly past N */
            run_case(t, ctx, &A, N8, 8, 16, dt, alpha, 0.0f, want);
            CHECK(bsk__hopper_small_tune.out_ts == 1);
            spmm_gpu_knob_same(t, ctx, &A, N8, 8, 16, dt, alpha, direct, 0, 1, want);
            CHECK(bsk__hopper_small_tune.out_ts == 0); /* the knob's run: the direct epilogue */
            run_case(t, ctx, &A, 40, 0, 8, dt, alpha, 0.0f, want); /* consumer 1 wholly past N */
            CHECK(bsk__hopper_small_tune.out_ts == 1);
            spmm_gpu_knob_same(t, ctx, &A, 40, 0, 8, dt, alpha, direct, 0, 1, want);
            const int64_t No = 2 * bsk_rng_int(r, 70, 200) + 1, pad = 8 - No % 8; /* N odd: the direct epilogue */
            run_case(t, ctx, &A, No, pad, pad, dt, alpha, 0.0f, want);
            CHECK(bsk__hopper_small_tune.out_ts == 0);
            run_case(t, ctx, &A, 5, 3, 3, dt, alpha, 0.0f, want); /* N < 8 */
            CHECK(bsk__hopper_small_tune.out_ts == 0);
            bsk_bsr_free(&A);
            for (int q = 0; q < 2; q++) { /* M = 1, M < b */
                bsk_bsr T = spmm_random_bsr(q ? 1 : bsk_rng_int(r, 2, b - 1), (int64_t)b * 7 + 5, b, 0.6, BSK_PATTERN_UNIFORM, dt);
                run_case(t, ctx, &T, 136, 0, 8, dt, alpha, 0.0f, want);
                CHECK(bsk__hopper_small_tune.out_ts == 1);
                bsk_bsr_free(&T);
            }
            bsk_bsr E = mask_bsr((int64_t)b * 70 - 9, K, b, dt, keep_sparse_rows);
            run_case(t, ctx, &E, 264, 0, 0, dt, alpha, 0.0f, want);
            spmm_gpu_knob_same(t, ctx, &E, 264, 0, 8, dt, alpha, direct, 0, 1, want);
            bsk_bsr Z = mask_bsr((int64_t)b * 20 + 3, K, b, dt, keep_none);
            run_case(t, ctx, &Z, 200, 0, 0, dt, alpha, 0.0f, want); /* every item empty: C = 0 */
            bsk_bsr_free(&Z);
            bsk_bsr_free(&E);
        }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* One cached-pattern call (spmm_gpu_util.h) on the small-block path: that kernel ran, and its prep as expected. */
static void cached_case(bsk_test_ctx *t, bsk_context *ctx, const bsk_bsr *A, const bsk_bsr *dA, int64_t N, float alpha,
                        int prep, cudaStream_t capture)
{
    spmm_gpu_cached_case(t, ctx, BSK_OP_N, A, dA, N, alpha, 0.0f, small_name(A->block_rows),
                         &bsk__hopper_small_tune.out_prep, prep, capture);
}

/* The pattern cache (bsk_set_pattern_cache) on the small-block path: the first call on a device pattern runs the
   prep kernels into the cache, later calls launch the main kernel alone (the queue left at zero by the previous
   launch's last CTA) — each against the reference, with N changing between calls (another number of items), a
   second pattern in between, grids of 2-5 CTAs (each CTA takes tickets from the queue: a queue not reset would skip
   items) and the one-producer-warp variant (its first ticket comes from the queue too) on the cached lists, both
   block sizes; a call captured in a CUDA graph (the cache is not used inside a capture: the prep kernels are in
   the graph) replayed three times; and bsk_forget_patterns (the next call builds again). */
BSK_TEST(gpu_hopper_small_pattern_cache)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
    cudaStream_t st = NULL;
    REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2) {
        const bsk_dtype dt = BSK_F16; /* the producer variants exist for fp16 input */
        bsk_bsr A[2], dA[2];
        for (int q = 0; q < 2; q++) {
            A[q] = spmm_random_bsr((int64_t)b * bsk_rng_int(r, 30, 50) + 5, (int64_t)b * bsk_rng_int(r, 6, 10) + 3, b,
                                   0.15 + 0.3 * q, BSK_PATTERN_UNIFORM, dt);
            REQUIRE_OK(bsk_bsr_clone(&A[q], BSK_MEM_DEVICE, &dA[q]));
        }
        const int64_t Ns[7] = {264, 136, 264, 1032, 8, 72, 200};
        const int which[7] = {0, 0, 1, 0, 1, 0, 0}, prep[7] = {1, 0, 1, 0, 0, 0, 0};
        const int ctas[7] = {0, 3, 0, 5, 3, 2, 0}, variant[7] = {0, 0, 0, 0, 3, 3, 0};
        for (int i = 0; i < 7; i++) {
            const float alpha = 0.5f + (float)bsk_rng_uniform(r);
            bsk__hopper_small_tune.max_ctas = ctas[i];
            bsk__hopper_small_tune.variant = variant[i];
            cached_case(t, ctx, &A[which[i]], &dA[which[i]], Ns[i], alpha, prep[i], NULL);
        }
        bsk__hopper_small_tune.variant = 0;
        /* the workspace grows outside the capture (an allocation inside one would belong to the graph): one call with
           the cache off, which also drops the cached entries (direct mode: the items fit the grid; the workspace is
           sized for the prep's lists all the same) */
        REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
        cached_case(t, ctx, &A[0], &dA[0], 200, 1.0f, 2, NULL);
        REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
        bsk__hopper_small_tune.max_ctas = 3;
        REQUIRE_OK(bsk_set_stream(ctx, st));
        cached_case(t, ctx, &A[0], &dA[0], 200, 1.0f, 1, st); /* captured with its prep kernels, replayed */
        REQUIRE_OK(bsk_set_stream(ctx, NULL));
        bsk__hopper_small_tune.max_ctas = 0;
        cached_case(t, ctx, &A[0], &dA[0], 264, 1.0f, 1, NULL); /* nothing was cached inside the capture */
        cached_case(t, ctx, &A[0], &dA[0], 136, 1.0f, 0, NULL);
        REQUIRE_OK(bsk_forget_patterns(ctx));
        cached_case(t, ctx, &A[0], &dA[0], 136, 1.0f, 1, NULL);
        REQUIRE_OK(bsk_forget_patterns(ctx)); /* before the patterns' memory is freed (and perhaps reused) */
        for (int q = 0; q < 2; q++) {
            bsk_bsr_free(&dA[q]);
            bsk_bsr_free(&A[q]);
        }
    }
    cudaStreamDestroy(st);
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

static int keep_all(int64_t i, int64_t j, bsk_rng *r)
{
    (void)i; (void)j; (void)r;
    return 1;
}

/* The producer variants (the default: 4 producer warps taking turns by stage; 3 / 4: 1 / 2 warps; 1: 4 warps, one
   block column per stage): tails (N odd, N < 64, K < b, M = 1), empty rows
   and groups (items of one stage, fewer stages than producer warps), nnzb = 0, skewed rows, full blocks (d = 1),
   each on a few CTAs too (ring phases and the producers' ticket hand-over across items); and the default with rows
   grouped per wgmma (rows_per_mma: the producer zeroes absent rows of present groups, tracked per ring slot).
   fp16 input (the variants exist for it). */
BSK_TEST(gpu_hopper_small_producers)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2) {
        const char *want = small_name(b);
        for (int v = 0; v < 8; v++) { /* 5-7: the default shape with rows grouped per wgmma (small_rg 2-4) */
            if (v == 2) continue;
            bsk__hopper_small_tune.variant = v < 5 ? v : 0;
            bsk__hopper_small_tune.rows_per_mma = v < 5 ? 0 : small_rg(b, v - 3);
            for (int few = 0; few < 2; few++) {
                bsk__hopper_small_tune.max_ctas = few ? 3 : 0;
                const int64_t M = (int64_t)b * bsk_rng_int(r, 20, 40) + bsk_rng_int(r, 1, b - 1);
                const int64_t K = (int64_t)b * bsk_rng_int(r, 8, 20) + bsk_rng_int(r, 1, b - 1);
                const int64_t No = 2 * bsk_rng_int(r, 70, 200) + 1, pad = 8 - No % 8;
                for (int di = 0; di < 3; di++) {
                    const double d = di == 0 ? 0.08 : di == 1 ? 0.3 : 0.7;
                    bsk_bsr A = spmm_random_bsr(M, K, b, d, di == 1 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, BSK_F16);
                    run_case(t, ctx, &A, No, pad, pad, BSK_F32, 1.0f, 0.0f, want);
                    run_case(t, ctx, &A, 264, 0, 8, BSK_F16, -0.75f, 0.5f, want);
                    run_case(t, ctx, &A, 40, 0, 0, BSK_BF16, 1.0f, 0.0f, want);
                    bsk_bsr_free(&A);
                }
                bsk_bsr F = mask_bsr(M, K, b, BSK_F16, keep_all);
                run_case(t, ctx, &F, 136, 0, 0, BSK_F32, 0.5f, 0.0f, want);
                bsk_bsr_free(&F);
                bsk_bsr E = mask_bsr((int64_t)b * 70 - 9, K, b, BSK_F16, keep_sparse_rows);
                run_case(t, ctx, &E, 264, 0, 0, BSK_F32, 2.0f, -1.0f, want);
                bsk_bsr_free(&E);
                bsk_bsr Z = mask_bsr(M, K, b, BSK_F16, keep_none);
                run_case(t, ctx, &Z, 200, 0, 0, BSK_F16, 1.0f, 0.25f, want);
                bsk_bsr_free(&Z);
                bsk_bsr P = spmm_random_bsr(bsk_rng_int(r, 1, b - 1), bsk_rng_int(r, 1, b - 1), b, 1.0, BSK_PATTERN_UNIFORM, BSK_F16);
                run_case(t, ctx, &P, 72, 0, 0, BSK_F32, 1.0f, 0.0f, want); /* M < b, K < b */
                bsk_bsr_free(&P);
            }
        }
        bsk__hopper_small_tune = saved;
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

static int keep_wide(int64_t i, int64_t j, bsk_rng *r)
{
    /* dense stretches, a gap, and lone columns around the prep kernel's 4096-column windows */
    if (j == 3 || j == 4095 || j == 4096 || j == 4097 || j == 8191 + (int64_t)i) return 1;
    if (j >= 5000 && j < 5100) return 0;
    return bsk_rng_uniform(r) < (i % 2 ? 0.3 : 0.05);
}

/* Long union lists: more than 1023 entries (the order kernel's top bin), many 32-entry windows of the producer, and
   more than one 4096-column window of the union kernel (with the jump over empty columns). b = 16, 2 block rows
   (one group), K = 16 * 8300. */
BSK_TEST(gpu_hopper_small_long_lists)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_bsr A = mask_bsr(29, 16 * 8300, 16, BSK_F16, keep_wide);
    REQUIRE(A.nnzb > 1100);
    run_case(t, ctx, &A, 72, 0, 0, BSK_F32, 1.0f, 0.0f, "hopper-wgmma-b16s");
    bsk_bsr_free(&A);
    bsk_bsr A32 = mask_bsr(40, 32 * 4200, 32, BSK_BF16, keep_wide);
    run_case(t, ctx, &A32, 24, 0, 0, BSK_BF16, 1.0f, 0.5f, "hopper-wgmma-b32s");
    bsk_bsr_free(&A32);
    /* one producer warp (variant 3, fp16) walks the same long lists across all the 32-entry windows */
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk__hopper_small_tune.variant = 3;
    bsk_bsr W = mask_bsr(29, 16 * 8300, 16, BSK_F16, keep_wide);
    run_case(t, ctx, &W, 72, 0, 0, BSK_F32, 1.0f, 0.0f, "hopper-wgmma-b16s");
    bsk_bsr_free(&W);
    bsk_bsr W32 = mask_bsr(40, 32 * 4200, 32, BSK_F16, keep_wide);
    run_case(t, ctx, &W32, 24, 0, 0, BSK_F16, 1.0f, 0.5f, "hopper-wgmma-b32s");
    bsk_bsr_free(&W32);
    /* all rows of a group in one wgmma: the zeroed row slots tracked across many stages */
    bsk__hopper_small_tune.variant = 0;
    bsk__hopper_small_tune.rows_per_mma = 16;
    bsk_bsr G = mask_bsr(29, 16 * 8300, 16, BSK_BF16, keep_wide);
    run_case(t, ctx, &G, 72, 0, 0, BSK_F32, 1.0f, 0.0f, "hopper-wgmma-b16s");
    bsk_bsr_free(&G);
    bsk__hopper_small_tune.rows_per_mma = 2;
    bsk_bsr G32 = mask_bsr(40, 32 * 4200, 32, BSK_F16, keep_wide);
    run_case(t, ctx, &G32, 24, 0, 0, BSK_F16, 1.0f, 0.5f, "hopper-wgmma-b32s");
    bsk_bsr_free(&G32);
    bsk__hopper_small_tune = saved;
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* The compact-pair stages (b32; the default below d 0.3: 8 row slots + 4 overflow slots, both input dtypes; variant
   8: no overflow slots, fp16; variant 9: the previous default, two entries' own slots): a stage's two entries share
   the row slots, entry 1's groups that entry 0 also has go to overflow slots, and pairs with more of them split into
   two stages — every density from few collisions to all of them (d 1), skewed rows, tails, lists across many
   32-entry windows (pairs split at a window's last entry), few CTAs (ring phases across items); the absent-row
   slots zeroed both ways (knob zero_tma: TMA loads of an out-of-bounds block, the default up to 4 rows per wgmma, or
   stores). */
BSK_TEST(gpu_hopper_small_compact)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    const double ds[6] = {0.05, 0.15, 0.3, 0.6, 1.0, 0.3};
    for (int v = 0; v < 3; v++) { /* the default with 2 rows per wgmma (fp16, bf16), variants 8, 9 */
        bsk__hopper_small_tune.variant = v == 0 ? 0 : 7 + v;
        bsk__hopper_small_tune.rows_per_mma = v == 0 ? 2 : 0;
        for (int di = 0; di < 6; di++) {
            bsk__hopper_small_tune.max_ctas = di % 2 ? 3 : 0;
            bsk__hopper_small_tune.zero_tma = 1 + (di + v) % 2; /* absent-row slots zeroed by stores / by TMA */
            const int64_t M = 32 * (int64_t)bsk_rng_int(r, 20, 40) + bsk_rng_int(r, 0, 31);
            const int64_t K = 32 * (int64_t)bsk_rng_int(r, 8, 90) + bsk_rng_int(r, 0, 31);
            bsk_bsr A = spmm_random_bsr(M, K, 32, ds[di], di == 5 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                                        v == 0 && di % 2 ? BSK_BF16 : BSK_F16);
            run_case(t, ctx, &A, 8 * bsk_rng_int(r, 20, 60), 0, 0, BSK_F32, 1.0f, 0.0f, "hopper-wgmma-b32s");
            const int64_t No = 2 * bsk_rng_int(r, 30, 90) + 1, pad = 8 - No % 8;
            run_case(t, ctx, &A, No, pad, pad, BSK_F16, -0.5f, 0.75f, "hopper-wgmma-b32s");
            bsk_bsr_free(&A);
        }
        bsk_bsr W = mask_bsr(40, 32 * 4200, 32, BSK_F16, keep_wide);
        run_case(t, ctx, &W, 24, 0, 0, BSK_F32, 1.0f, 0.5f, "hopper-wgmma-b32s");
        bsk_bsr_free(&W);
    }
    bsk__hopper_small_tune = saved;
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* Wide items (session 19, knob `wide`: NH 64-column halves per consumer, an item of 256 / (b * NH) block rows x
   128 * NH columns; the default below d 0.35 at b32, below 0.4 at b16): b32 NH 4, b16 NH 2 and 4, both input
   dtypes — densities from sparse to full, skewed rows, M tails inside a group and M = 1, N = 40 (one consumer wholly
   past N), N past a half (N % 64 != 0), N inside the first consumer's halves, the TMA-store epilogue (C of the input's
   dtype, beta 0) and the direct one (fp32 / other 16-bit C, beta != 0), 3 CTAs taking many items, long lists across
   the 32-entry windows; then the density rule picks them (out_nh). */
BSK_TEST(gpu_hopper_small_wide)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    const int bs[3] = {32, 16, 16}, nhs[3] = {4, 2, 4};
    const double ds[5] = {0.05, 0.2, 0.45, 1.0, 0.3};
    for (int vi = 0; vi < 3; vi++) {
        const int b = bs[vi];
        bsk__hopper_small_tune.wide = nhs[vi];
        for (int di = 0; di < 5; di++) {
            bsk__hopper_small_tune.max_ctas = di % 2 ? 3 : 0;
            const bsk_dtype dt = (di + vi) % 2 ? BSK_BF16 : BSK_F16, other = dt == BSK_F16 ? BSK_BF16 : BSK_F16;
            const int64_t M = di == 3 ? 1 : (int64_t)b * bsk_rng_int(r, 20, 50) + bsk_rng_int(r, 0, b - 1);
            const int64_t K = (int64_t)b * bsk_rng_int(r, 8, 90) + bsk_rng_int(r, 0, b - 1);
            bsk_bsr A = spmm_random_bsr(M, K, b, ds[di], di == 4 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, dt);
            const int64_t N = di == 0 ? 40 : di == 1 ? 8 * bsk_rng_int(r, 17, 31) /* 136..248 */ : 8 * bsk_rng_int(r, 40, 140);
            run_case(t, ctx, &A, N, 0, 0, dt, 1.0f, 0.0f, small_name(b)); /* TMA-store epilogue */
            CHECK(bsk__hopper_small_tune.out_ts == 1);
            CHECK(bsk__hopper_small_tune.out_nh == nhs[vi]);
            run_case(t, ctx, &A, N, 8, 0, BSK_F32, 0.5f, 1.0f, small_name(b));
            const int64_t No = 2 * bsk_rng_int(r, 30, 300) + 1, pad = 8 - No % 8;
            run_case(t, ctx, &A, No, pad, pad, other, -0.5f, 0.75f, small_name(b));
            CHECK(bsk__hopper_small_tune.out_ts == 0);
            bsk_bsr_free(&A);
        }
        bsk_bsr W = b == 32 ? mask_bsr(40, 32 * 4200, 32, BSK_F16, keep_wide) : mask_bsr(29, 16 * 8300, 16, BSK_BF16, keep_wide);
        run_case(t, ctx, &W, 264, 0, 0, BSK_F32, 1.0f, 0.5f, small_name(b));
        bsk_bsr_free(&W);
    }
    /* b32 NH 4 (one entry per stage): an entry's eight B boxes as one 3-D box where N % 64 == 0 (the last item's
       chunks past N zero-filled), and the knob that keeps the 2-D boxes; a K tail (rows past K zero-filled) */
    bsk__hopper_small_tune = saved;
    bsk__hopper_small_tune.wide = 4;
    for (int k = 0; k < 2; k++) {
        bsk__hopper_small_tune.b_box3d = k;
        bsk__hopper_small_tune.max_ctas = k ? 0 : 3;
        bsk_bsr A = spmm_random_bsr(32 * bsk_rng_int(r, 20, 40) + 5, 32 * bsk_rng_int(r, 10, 60) + 17, 32, 0.15,
                                    k ? BSK_PATTERN_UNIFORM : BSK_PATTERN_SKEWED, k ? BSK_BF16 : BSK_F16);
        const int64_t N = 64 * bsk_rng_int(r, 9, 23); /* 576 .. 1472: a partial last 512-column item */
        run_case(t, ctx, &A, N, 0, 0, A.dtype, 1.0f, 0.0f, small_name(32));
        CHECK(bsk__hopper_small_tune.out_b3d == !k);
        run_case(t, ctx, &A, N, 8, 0, BSK_F32, 0.5f, 1.0f, small_name(32));
        CHECK(bsk__hopper_small_tune.out_b3d == !k);
        bsk_bsr_free(&A);
    }
    /* the default picks by density where there are at least 2 items (of 256 rows x 128 columns) per SM: b32 NH 4
       below 0.35, b16 NH 4 below 0.17, NH 2 below 0.4, else NH 1; with fewer items NH 1 */
    bsk__hopper_small_tune = saved;
    bsk_device_info info;
    REQUIRE_OK(bsk_device_query(&info));
    const int64_t tiles = (2 * info.multiprocessors + 15) / 16 + 1; /* 16 row groups: 16 x tiles > 2 per SM */
    const int rb[6] = {32, 32, 16, 16, 16, 32}, rn[6] = {4, 1, 4, 2, 1, 1};
    const double rd[6] = {0.1, 0.6, 0.1, 0.3, 0.6, 0.1};
    for (int i = 0; i < 6; i++) {
        const int64_t M = i == 5 ? 256 * 4 : 256 * 16; /* the last: 4 row groups, too few items */
        bsk_bsr A = spmm_random_bsr(M - 3, (int64_t)rb[i] * 12 + 5, rb[i], rd[i], BSK_PATTERN_UNIFORM, BSK_F16);
        run_case(t, ctx, &A, 128 * tiles - 8, 0, 0, BSK_F16, 1.0f, 0.0f, small_name(rb[i]));
        CHECK(bsk__hopper_small_tune.out_nh == rn[i]);
        bsk_bsr_free(&A);
    }
    bsk__hopper_small_tune = saved;
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

static void small_expect_prep(bsk_test_ctx *t, int want, const char *what)
{
    spmm_gpu_expect_prep(t, bsk__hopper_small_tune.out_prep, want, what);
}

/* Direct mode (session 27): where every item has a CTA of its own and no cached list exists, the main kernel runs
   alone, each CTA building its item's union list itself (out_prep 2). Both block sizes, against the float64 reference:
   fp16 / bf16 / fp32 C, alpha and beta, M / K / N tails, M = 1, empty rows and whole empty groups, a skewed and an
   empty pattern, every rows-per-wgmma shape and wide items; each once with direct mode off (the prep ran: out_prep
   1); the same bytes either way (the same list, built by the same code); calls in a row with beta != 0 (an item run
   twice would show) leave the queue's words at zero; more items than CTAs and the one-producer-warp variant keep the
   prep; with the pattern cache on the prep fills the cache and later calls take it, and inside a capture (where the
   cache keeps nothing) direct mode runs in the graph, replayed three times. nb past one 4096-column window of the
   union scratch: gpu_hopper_small_wide (40 x 4200 blocks); malformed indices in direct mode:
   gpu_hopper_small_malformed_indices_safe (its calls on the full grid). */
BSK_TEST(gpu_hopper_small_direct)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2) {
        const char *want = small_name(b);
        bsk_bsr A = spmm_random_bsr((int64_t)b * bsk_rng_int(r, 20, 40) + 11, (int64_t)b * bsk_rng_int(r, 10, 30) + 5, b,
                                    0.3, BSK_PATTERN_UNIFORM, BSK_F16);
        bsk_bsr E = mask_bsr((int64_t)b * 60 - 3, (int64_t)b * 9 + 1, b, BSK_BF16, keep_sparse_rows);
        bsk_bsr S = spmm_random_bsr((int64_t)b * 33, (int64_t)b * 25, b, 0.2, BSK_PATTERN_SKEWED, BSK_BF16);
        bsk_bsr Z = mask_bsr((int64_t)b * 9, (int64_t)b * 5, b, BSK_F16, keep_none);
        bsk_bsr O = spmm_random_bsr(1, (int64_t)b * 7 + 3, b, 0.6, BSK_PATTERN_UNIFORM, BSK_F16);
        const int64_t No = 2 * bsk_rng_int(r, 30, 200) + 1;
        for (int v = 0; v < 2; v++) {
            bsk__hopper_small_tune = saved;
            bsk__hopper_small_tune.direct = v ? -1 : 0;
            const int wp = v ? 1 : 2;
            run_case(t, ctx, &A, 264, 0, 0, BSK_F16, 0.75f, 0.0f, want);
            small_expect_prep(t, wp, "A fp16");
            run_case(t, ctx, &A, No, 8 - No % 8, 8 - No % 8, BSK_F32, 1.5f, -0.5f, want);
            small_expect_prep(t, wp, "A fp32 beta, odd N");
            run_case(t, ctx, &E, 200, 0, 8, BSK_BF16, -1.0f, 0.0f, want);
            small_expect_prep(t, wp, "empty rows and groups");
            run_case(t, ctx, &S, 392, 8, 0, BSK_F16, 1.0f, 0.5f, want);
            small_expect_prep(t, wp, "skewed");
            run_case(t, ctx, &Z, 264, 0, 0, BSK_F32, 1.0f, 0.25f, want);
            small_expect_prep(t, wp, "empty pattern");
            run_case(t, ctx, &O, 136, 0, 0, BSK_F16, 1.0f, 0.0f, want);
            small_expect_prep(t, wp, "M = 1");
            for (int g = 1; g < 5; g++) { /* every rows-per-wgmma shape */
                bsk__hopper_small_tune.rows_per_mma = small_rg(b, g);
                run_case(t, ctx, &S, 264, 0, 0, BSK_F16, 1.0f, 0.0f, want);
                small_expect_prep(t, wp, "rows per wgmma");
            }
            bsk__hopper_small_tune.rows_per_mma = 0;
            for (int nh = 2; nh <= 4; nh += 2) { /* wide items: fewer rows per group */
                if (nh == 2 && b == 32) continue;
                bsk__hopper_small_tune.wide = nh;
                run_case(t, ctx, &A, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, want);
                small_expect_prep(t, wp, "wide");
                CHECK(bsk__hopper_small_tune.out_nh == nh);
            }
            bsk__hopper_small_tune.wide = 0;
        }
        bsk__hopper_small_tune = saved;
        /* the same bytes with and without the prep (the helper's second call runs the default: direct) */
        spmm_gpu_knob_same(t, ctx, &A, 264, 0, 0, BSK_F32, 1.25f, &bsk__hopper_small_tune.direct, -1, 0, want);
        small_expect_prep(t, 2, "A, the same bytes");
        spmm_gpu_knob_same(t, ctx, &S, 520, 0, 0, BSK_BF16, 0.5f, &bsk__hopper_small_tune.direct, -1, 0, want);
        small_expect_prep(t, 2, "skewed, the same bytes");
        bsk__hopper_small_tune.direct = saved.direct; /* the helper left it at its first value (off) */
        for (int rep = 0; rep < 4; rep++) {
            run_case(t, ctx, &S, 264, 0, 0, BSK_F16, 1.0f, 0.5f, want);
            small_expect_prep(t, 2, "calls in a row");
            spmm_gpu_expect_queue_zero(t, ctx, bsk__hopper_small_tune.out_queue, "calls in a row");
        }
        /* where the rule does not hold, the prep runs: more items than CTAs; one producer warp (its first ticket
           comes from the queue) */
        bsk__hopper_small_tune.max_ctas = 3;
        run_case(t, ctx, &S, 392, 0, 0, BSK_F16, 1.0f, 0.0f, want);
        small_expect_prep(t, 1, "3 CTAs");
        CHECK(bsk__hopper_small_tune.out_queue == NULL);
        bsk__hopper_small_tune.max_ctas = 0;
        bsk__hopper_small_tune.variant = 3; /* fp16 input only (bf16 runs the default) */
        run_case(t, ctx, &A, 264, 0, 0, BSK_F32, 1.0f, 0.5f, want);
        small_expect_prep(t, 1, "one producer warp");
        bsk__hopper_small_tune = saved;
        /* the pattern cache on: the prep fills it, then the cached lists; inside a capture (nothing cached there)
           direct mode, in the graph */
        {
            bsk_bsr dA;
            REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
            cudaStream_t cs = NULL;
            REQUIRE(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess);
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
            cached_case(t, ctx, &A, &dA, 264, 1.0f, 1, NULL);
            cached_case(t, ctx, &A, &dA, 264, 0.5f, 0, NULL);
            REQUIRE_OK(bsk_set_stream(ctx, cs));
            spmm_gpu_cached_case(t, ctx, BSK_OP_N, &A, &dA, 264, 1.0f, 0.0f, want, &bsk__hopper_small_tune.out_prep, 2, cs);
            REQUIRE_OK(bsk_set_stream(ctx, NULL));
            REQUIRE_OK(bsk_forget_patterns(ctx));
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
            cudaStreamDestroy(cs);
            bsk_bsr_free(&dA);
        }
        bsk_bsr_free(&A);
        bsk_bsr_free(&E);
        bsk_bsr_free(&S);
        bsk_bsr_free(&Z);
        bsk_bsr_free(&O);
    }
    bsk__hopper_small_tune = saved;
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* Malformed device indices (row_ptr past nnzb, decreasing and negative; col_idx out of range, negative, duplicated
   and unsorted) must not fault: the call succeeds (device indices are not validated) and the stream stays healthy.
   compute-sanitizer memcheck runs this test. */
BSK_TEST(gpu_hopper_small_malformed_indices_safe)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_rng *r = bsk_test_rng();
    for (int b = 32; b >= 16; b /= 2) {
        bsk_bsr A = spmm_random_bsr((int64_t)b * 20, (int64_t)b * 12, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16), dA;
        REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
        const int64_t mb = bsk_bsr_mb(&A);
        int32_t *rp = (int32_t *)malloc((size_t)(mb + 1) * 4), *ci = (int32_t *)malloc((size_t)A.nnzb * 4);
        for (int64_t i = 0; i <= mb; i++)
            rp[i] = i % 5 == 1 ? 1000000 : i % 5 == 2 ? -7 : i % 5 == 3 ? A.row_ptr[mb - i] : A.row_ptr[i];
        for (int64_t k = 0; k < A.nnzb; k++)
            ci[k] = k % 4 == 0 ? -1 - (int32_t)k : k % 4 == 1 ? (1 << 30) : k % 4 == 2 ? (int32_t)(k % 3) : A.col_idx[k];
        REQUIRE(cudaMemcpy(dA.row_ptr, rp, (size_t)(mb + 1) * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dA.col_idx, ci, (size_t)A.nnzb * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        bsk_dense B = bsk_test_dense(A.cols, 264, 0, BSK_F16, r), C = bsk_test_dense_poison(A.rows, 264, 0, BSK_F32);
        bsk_dense dB = B, dC = C;
        dB.mem = dC.mem = BSK_MEM_DEVICE;
        dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
        dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
        REQUIRE(dB.data && dC.data);
        for (int v = 0; v < 13; v++) { /* 5-7: the default shape with rows grouped per wgmma (small_rg 2-4); 8, 9:
                                           the compact-pair stages (b32); 10-12: wide items NH 1 / 2 (b16) / 4 */
            if (v == 11 && b == 32) continue;
            bsk__hopper_small_tune.wide = v >= 10 ? (v == 10 ? 1 : v == 11 ? 2 : 4) : 0;
            bsk__hopper_small_tune.variant = v < 5 || (v >= 8 && v < 10) ? v : 0;
            bsk__hopper_small_tune.rows_per_mma = v < 5 || v >= 8 ? 0 : small_rg(b, v - 3);
            bsk__hopper_small_tune.max_ctas = v % 2 ? 2 : 0;
            CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.5f, &dC), BSK_SUCCESS);
            CHECK(strcmp(bsk_last_kernel(ctx), small_name(b)) == 0);
            CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
        }
        bsk__hopper_small_tune = saved;
        free(rp);
        free(ci);
        cudaFree(dB.data);
        cudaFree(dC.data);
        bsk_test_dense_free(&B);
        bsk_test_dense_free(&C);
        bsk_bsr_free(&dA);
        bsk_bsr_free(&A);
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* What the small-block kernel declines runs elsewhere and is still right: op T, a B row stride that TMA cannot
   describe (ld * 2 not a multiple of 16), non-square 32 x 16 blocks, and the decline knob. */
BSK_TEST(gpu_hopper_small_declines)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    const struct bsk_hopper_small_tune_s saved = bsk__hopper_small_tune;
    bsk_bsr A = spmm_random_bsr(32 * 6 + 5, 32 * 5 + 3, 32, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
    run_case(t, ctx, &A, 100, 1, 0, BSK_F32, 1.0f, 0.0f, NULL); /* ld of B = 101 */
    CHECK(strncmp(bsk_last_kernel(ctx), "hopper", 6) != 0);
    bsk__hopper_small_tune.variant = -1;
    run_case(t, ctx, &A, 128, 0, 0, BSK_F16, 1.0f, 0.0f, NULL);
    CHECK(strncmp(bsk_last_kernel(ctx), "hopper", 6) != 0);
    bsk__hopper_small_tune = saved;
    bsk_bsr_free(&A);
    bsk_rng *r = bsk_test_rng();
    bsk_bsr R;
    memset(&R, 0, sizeof R);
    REQUIRE_OK(bsk_bsr_random(32 * 4, 16 * 9, 32, 16, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(r), BSK_F16, &R));
    run_case(t, ctx, &R, 128, 0, 0, BSK_F32, 1.0f, 0.0f, NULL);
    CHECK(strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b32s") != 0 && strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b16s") != 0);
    bsk_bsr_free(&R);
    /* op T at b = 32 (a host reference through the transposed pattern) */
    bsk_bsr T = spmm_random_bsr(32 * 5, 32 * 4 + 7, 32, 0.5, BSK_PATTERN_UNIFORM, BSK_F16), dT;
    REQUIRE_OK(bsk_bsr_clone(&T, BSK_MEM_DEVICE, &dT));
    bsk_dense B = bsk_test_dense(T.rows, 64, 0, BSK_F16, r), C = bsk_test_dense_poison(T.cols, 64, 0, BSK_F32);
    double *ref = (double *)malloc((size_t)(T.cols * 64) * sizeof(double));
    bsk_ref_spmm(BSK_OP_T, 1.0, &T, &B, 0.0, NULL, ref);
    bsk_dense dB = B, dC = C;
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    REQUIRE(dB.data && dC.data && ref);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_T, 1.0f, &dT, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK(strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b32s") != 0);
    CHECK(cudaMemcpy(C.data, dC.data, spmm_dense_bytes(&C), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(BSK_F16, BSK_F32));
    free(ref);
    cudaFree(dB.data);
    cudaFree(dC.data);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&dT);
    bsk_bsr_free(&T);
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

/* The library's own choice (force = 0): below the density crossover (b32 and b16 0.01: the portable kernel
   is faster there), with fewer 256 x 128 items than half the SMs (the portable kernel's smaller tiles fill the
   GPU), or at b16 below d 0.06 with fewer items than two per SM, the small-block kernel declines and the portable
   one answers, else the small-block kernel runs; either way the result is right. Densities sit clear of the
   thresholds (bsk_bsr_random keeps round(d · mb · nb) blocks: 13 / 3200 and 26 / 6400 = 0.0040625 for d 0.004, 0.045
   exactly); the item rules are evaluated with this GPU's SM count. */
BSK_TEST(gpu_hopper_small_dispatch)
{
    bsk_context *ctx = NULL;
    const char *why = small_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk__hopper_small_tune.force = 0;
    bsk_device_info info;
    REQUIRE_OK(bsk_device_query(&info));
    /* rows: 2560 (10 items of 256 rows) or 48 blocks; N 1024 (8 column tiles) or 256 (2) */
    const struct { int b; double d; int64_t M, N; int dense_enough; } cases[] = {
        {32, 0.004, 2560, 1024, 0}, {32, 0.30, 2560, 1024, 1}, {16, 0.004, 2560, 1024, 0}, {16, 0.35, 2560, 1024, 1},
        {16, 0.045, 2560, 1024, 1}, {32, 0.30, 32 * 48, 256, 1}, {16, 0.35, 16 * 48, 256, 1}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const int b = cases[i].b;
        const int64_t items = (cases[i].M / b + 256 / b - 1) / (256 / b) * ((cases[i].N + 127) / 128);
        const int few16 = b == 16 && cases[i].d < 0.06 && items < 2 * (int64_t)info.multiprocessors;
        const int small = cases[i].dense_enough && 2 * items >= info.multiprocessors && !few16;
        bsk_bsr A = spmm_random_bsr(cases[i].M, (int64_t)b * 40, b, cases[i].d, BSK_PATTERN_UNIFORM, BSK_F16);
        run_case(t, ctx, &A, cases[i].N, 0, 0, BSK_F16, 1.0f, 0.0f, small ? small_name(b) : NULL);
        if (!small) CHECK(strcmp(bsk_last_kernel(ctx), small_name(b)) != 0);
        bsk_bsr_free(&A);
    }
    bsk_destroy(ctx);
    bsk__hopper_small_tune = small_saved;
}

#else /* built without CUDA: the tests exist and skip */
BSK_TEST(gpu_hopper_small_dtypes) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_tails) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_empty_skewed) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_persistent) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_producers) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_long_lists) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_malformed_indices_safe) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_compact) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_declines) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_dispatch) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_tma_store) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_pattern_cache) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_small_direct) { SKIP("built without CUDA"); }
#endif
