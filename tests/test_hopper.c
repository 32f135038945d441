/* test_hopper.c — the Hopper (sm_90a) TMA + wgmma SpMM through the public API, against the float64
   reference. Every test SKIPs without a CUDA device or on a device that is not compute capability 9.0.
   Each case draws fresh random A, B (and C when beta != 0), poisons C otherwise, runs on the device and
   checks every element, that the padding between cols and ld is untouched, and that the Hopper kernel ran. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
#include "spmm_gpu_util.h"

/* Internal knobs of the Hopper path (src/cuda/hopper/tune.h): force variants and many items per CTA. */
#include "cuda/hopper/tune.h"

/* NULL when the Hopper path can run here; otherwise why the test skips. */
static const char *hopper_skip_reason(bsk_context **ctx)
{
    bsk_device_info info;
    if (bsk_device_query(&info) != BSK_SUCCESS) return "no CUDA device";
    if (info.cc_major != 9 || info.cc_minor != 0) return "device is not compute capability 9.0";
    if (bsk_create(ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) return "no CUDA context";
    return NULL;
}

/* C = alpha*op(A)*B + beta*C on the device, checked against the reference (spmm_gpu_util.h); expect_hopper: the
   Hopper kernel must have run. */
static double run_device_case_op(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, int64_t N,
                                 int64_t padB, int64_t padC, bsk_dtype ct, float alpha, float beta, int expect_hopper)
{
    return spmm_gpu_case(t, ctx, op, A, N, padB, padC, ct, alpha, beta, expect_hopper ? "hopper-wgmma" : NULL);
}

static double run_device_case(bsk_test_ctx *t, bsk_context *ctx, const bsk_bsr *A, int64_t N, int64_t padB,
                              int64_t padC, bsk_dtype ct, float alpha, float beta, int expect_hopper)
{
    return run_device_case_op(t, ctx, BSK_OP_N, A, N, padB, padC, ct, alpha, beta, expect_hopper);
}

/* Every block size, input dtype and output dtype, alpha random, beta random and (16-bit C: the TMA-store
   epilogue) zero, sizes a multiple of nothing. */
BSK_TEST(gpu_hopper_spmm_dtypes_blocks)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    const int blocks[2] = {64, 128};
    const bsk_dtype ins[2] = {BSK_F16, BSK_BF16}, outs[3] = {BSK_F32, BSK_F16, BSK_BF16};
    bsk_rng *r = bsk_test_rng();
    for (int bi = 0; bi < 2; bi++)
        for (int ii = 0; ii < 2; ii++)
            for (int oi = 0; oi < 3; oi++) {
                const int b = blocks[bi];
                int64_t M = 2 * b + bsk_rng_int(r, 1, b), K = 3 * b + bsk_rng_int(r, 1, b);
                int64_t N = 8 * bsk_rng_int(r, 20, 70);
                bsk_bsr A = spmm_random_bsr(M, K, b, 0.5, BSK_PATTERN_UNIFORM, ins[ii]);
                for (int z = 0; z < (oi ? 2 : 1); z++) {
                    float alpha = 0.5f + (float)bsk_rng_uniform(r), beta = z ? 0.0f : bsk_rng_sym(r);
                    double e = run_device_case(t, ctx, &A, N, 8, 8, outs[oi], alpha, beta, 1);
                    if (!(e <= bsk_tol(ins[ii], outs[oi])))
                        fprintf(stderr, "  b=%d in=%d out=%d beta=%g M=%lld N=%lld K=%lld err=%.3e\n", b, (int)ins[ii],
                                (int)outs[oi], beta, (long long)M, (long long)N, (long long)K, e);
                }
                bsk_bsr_free(&A);
            }
    bsk_destroy(ctx);
}

/* M, N, K not multiples of the tile (N odd, K with a partial last block column), beta 0 on NaN C. */
BSK_TEST(gpu_hopper_spmm_tails)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2) {
        int64_t M = b + bsk_rng_int(r, 1, 2 * b - 1), K = b + bsk_rng_int(r, 1, 2 * b - 1);
        int64_t N = 2 * bsk_rng_int(r, 100, 300) + 1; /* odd: the last column is written alone */
        int64_t ldpad = 8 - N % 8;                     /* keeps ld * 2 and ld * 4 multiples of 16 */
        bsk_bsr A = spmm_random_bsr(M, K, b, 0.6, BSK_PATTERN_UNIFORM, BSK_F16);
        run_device_case(t, ctx, &A, N, ldpad, ldpad, BSK_F32, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, ldpad, ldpad + 8, BSK_F16, -0.75f, 0.5f, 1);
        run_device_case(t, ctx, &A, N, ldpad, ldpad, BSK_BF16, 1.25f, 0.0f, 1); /* TMA store clips M, N */
        bsk_bsr_free(&A);
    }
    bsk_destroy(ctx);
}

/* Empty block rows, an all-empty matrix (nnzb = 0: C = beta*C, or 0 with beta = 0), and skewed rows. */
BSK_TEST(gpu_hopper_spmm_empty_and_skewed)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2) {
        const int64_t M = 5 * b - 7, K = 4 * b + 3, N = 264;
        const int64_t mb = (M + b - 1) / b, nb = (K + b - 1) / b;
        bsk_dense D = bsk_test_dense(M, K, 0, BSK_BF16, r);
        uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
        for (int64_t i = 0; i < mb; i++)
            for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = (i % 2 == 1) ? 0 : (bsk_rng_uniform(r) < 0.6);
        bsk_bsr A, Z;
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A));
        memset(mask, 0, (size_t)(mb * nb));
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &Z));
        run_device_case(t, ctx, &A, N, 0, 0, BSK_BF16, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F32, 2.0f, -1.0f, 1);
        run_device_case(t, ctx, &Z, N, 0, 0, BSK_F32, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &Z, N, 0, 0, BSK_F16, 1.0f, 0.25f, 1);
        run_device_case(t, ctx, &Z, N, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        bsk_bsr S = spmm_random_bsr(12 * b, 10 * b, b, 0.3, BSK_PATTERN_SKEWED, BSK_F16);
        run_device_case(t, ctx, &S, 520, 0, 0, BSK_F32, 1.0f, 0.0f, 1);
        bsk_bsr_free(&S);
        bsk_bsr_free(&A);
        bsk_bsr_free(&Z);
        free(mask);
        bsk_test_dense_free(&D);
    }
    bsk_destroy(ctx);
}

/* A tiny persistent grid: each CTA takes many items in turn, so the ring's phases run on across items,
   and both tile widths of BM = 64 run. */
BSK_TEST(gpu_hopper_spmm_persistent_few_ctas)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    for (int v = 0; v < 4; v++) {
        const int b = v == 0 ? 128 : 64;
        bsk__hopper_tune.max_ctas = 3;
        bsk__hopper_tune.b64_wgn = v == 2 ? 256 : 128;
        bsk__hopper_tune.b64_mode = v == 3 ? 1 : 0; /* v 1: the default (paired rows), v 3: split */
        bsk__hopper_tune.l2hint = v == 0 ? 1 : v == 2 ? 2 : 0; /* L2 hints: A loads and C stores, C only */
        bsk__hopper_tune.band_mb = v == 1 ? 1 : 0; /* tiny bands: many bands, partial last band */
        bsk__hopper_tune.classes = v % 3;           /* bit-length classes, none, two bits per class */
        bsk_bsr A = spmm_random_bsr(9 * b - 5, 8 * b, b, 0.45, BSK_PATTERN_SKEWED, v == 2 ? BSK_BF16 : BSK_F16);
        int64_t N = 8 * bsk_rng_int(r, 90, 140);
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F32, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, 8, 0, BSK_BF16, 0.5f, 1.0f, 1);
        run_device_case(t, ctx, &A, N, 0, 8, BSK_F16, 0.5f, 0.0f, 1); /* staging buffer reused item after item */
        /* the default TMA-store epilogue (4 stages, the tile staged in two rounds) with N not a multiple of 128 */
        run_device_case(t, ctx, &A, N + 8 * 17, 0, 0, BSK_BF16, 1.5f, 0.0f, 1);
        bsk__hopper_tune.ring4 = 1; /* the 3-stage, whole-tile configurations (no longer the default) */
        run_device_case(t, ctx, &A, N, 0, 0, v == 2 ? BSK_BF16 : BSK_F16, 0.5f, 0.0f, 1);
        run_device_case(t, ctx, &A, N + 8 * 17, 0, 0, BSK_BF16, 1.5f, 0.0f, 1);
        bsk__hopper_tune.ring4 = 0;
        bsk_bsr_free(&A);
    }
    bsk__hopper_tune = saved;
    /* op T with the C hint */
    {
        bsk_bsr S = spmm_random_bsr(6 * 128 + 3, 5 * 128, 128, 0.5, BSK_PATTERN_SKEWED, BSK_F16);
        bsk__hopper_tune.max_ctas = 3;
        bsk__hopper_tune.l2hint = 2;
        run_device_case_op(t, ctx, BSK_OP_T, &S, 8 * bsk_rng_int(r, 40, 70), 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 136, 0, 0, BSK_F32, 0.5f, 0.5f, 1);
        bsk_bsr_free(&S);
    }
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}

/* The 64 x 512 b64 tile with C staged in its item's last ring slot (tune.slot_epi, session 20; op N and op T): 16-bit C with beta 0
   (the slot path: the store runs on into the next item, whose first stage releases the slot) against the direct
   epilogue (fp32 C, beta != 0, slot_epi -1) on the same matrices. Empty rows (items of one SKIP stage, C = 0), N
   tails inside a 64-column panel and whole panels past N, one and three N tiles, items of one stage, the full grid
   and 2 CTAs (many items in a row, so a pending slot meets every ring position). */
BSK_TEST(gpu_hopper_spmm_b64_slot_epi)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    const int64_t b = 64, M = 11 * b - 13, K = 9 * b + 5, mb = (M + b - 1) / b, nb = (K + b - 1) / b;
    bsk_dense D = bsk_test_dense(M, K, 0, BSK_F16, r);
    uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
    REQUIRE(mask != NULL);
    for (int64_t i = 0; i < mb; i++) /* rows 1, 4, 7, 10 empty; row 2 a single block; the others about 0.4 */
        for (int64_t j = 0; j < nb; j++)
            mask[i * nb + j] = (i % 3 == 1) ? 0 : i == 2 ? (j == nb - 1) : (bsk_rng_uniform(r) < 0.4);
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A));
    bsk_bsr U = spmm_random_bsr(20 * b + 7, 12 * b, b, 0.15, BSK_PATTERN_SKEWED, BSK_BF16);
    const int64_t Ns[4] = {264, 8 * bsk_rng_int(r, 70, 127), 1032 + 8 * bsk_rng_int(r, 1, 60), 1536};
    for (int v = 0; v < 2; v++) {
        bsk__hopper_tune = saved;
        bsk__hopper_tune.b64_wgn = 256;
        bsk__hopper_tune.max_ctas = v ? 2 : 0;
        for (int ni = 0; ni < 4; ni++) {
            const int64_t N = Ns[ni];
            bsk__hopper_tune.slot_epi = 0;
            run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 0.75f, 0.0f, 1);
            run_device_case(t, ctx, &U, N, 8, 0, BSK_BF16, -1.25f, 0.0f, 1);
            run_device_case(t, ctx, &U, N, 0, 8, BSK_F16, 1.0f, 0.0f, 1); /* ld past cols: the store clips at N */
            run_device_case(t, ctx, &A, N, 0, 0, BSK_F32, 0.5f, 0.0f, 1);  /* direct: fp32 C */
            run_device_case(t, ctx, &U, N, 0, 0, BSK_F16, 1.0f, 0.5f, 1);  /* direct: beta */
            /* op T (Aᵀ·B over the transpose index, the same tile and epilogue): columns with no block, tails */
            run_device_case_op(t, ctx, BSK_OP_T, &A, N, 0, 0, BSK_F16, -0.5f, 0.0f, 1);
            run_device_case_op(t, ctx, BSK_OP_T, &U, N, 8, 8, BSK_BF16, 1.0f, 0.0f, 1);
            bsk__hopper_tune.slot_epi = -1;
            run_device_case(t, ctx, &A, N, 0, 0, BSK_BF16, 0.75f, 0.0f, 1);
        }
    }
    /* the default chooses this tile for 16-bit C, beta 0, N >= 512 and >= 2 items per CTA (the pair below 512 columns,
       with beta or with few items), and its work list is cached per pattern: the first call runs the prep kernel, the
       second reuses the list */
    bsk__hopper_tune = saved;
    bsk__hopper_tune.max_ctas = 4; /* >= 2 items per CTA: the rule's other condition (U: 21 rows x 3 tiles) */
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
    bsk_bsr dU;
    REQUIRE_OK(bsk_bsr_clone(&U, BSK_MEM_DEVICE, &dU));
    for (int rep = 0; rep < 2; rep++)
        spmm_gpu_cached_case(t, ctx, BSK_OP_N, &U, &dU, 1032, 0.5f, 0.0f, "hopper-wgmma-b64", &bsk__hopper_tune.out_prep,
                             rep == 0, NULL);
    spmm_gpu_cached_case(t, ctx, BSK_OP_N, &U, &dU, 1032, 0.5f, 0.25f, "hopper-wgmma-b64p", &bsk__hopper_tune.out_prep, 1,
                         NULL);
    spmm_gpu_cached_case(t, ctx, BSK_OP_N, &U, &dU, 264, 1.0f, 0.0f, "hopper-wgmma-b64p", &bsk__hopper_tune.out_prep, 1,
                         NULL);
    for (int rep = 0; rep < 2; rep++) /* op T: the same tile by default, its own cached list */
        spmm_gpu_cached_case(t, ctx, BSK_OP_T, &U, &dU, 1032, 0.5f, 0.0f, "hopper-wgmma-b64t", &bsk__hopper_tune.out_prep,
                             rep == 0, NULL);
    { /* a block density of 0.375 or more: the pair (session 21: ahead at d 0.5 on the H100) */
        bsk_bsr Dn = spmm_random_bsr(20 * b + 7, 12 * b, b, 0.6, BSK_PATTERN_UNIFORM, BSK_F16);
        run_device_case(t, ctx, &Dn, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        if (strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64p") != 0) {
            t->failed++;
            fprintf(stderr, "  d 0.6: kernel %s, want hopper-wgmma-b64p\n", bsk_last_kernel(ctx));
        }
        run_device_case_op(t, ctx, BSK_OP_T, &Dn, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        if (strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64pt") != 0) {
            t->failed++;
            fprintf(stderr, "  d 0.6 op T: kernel %s, want hopper-wgmma-b64pt\n", bsk_last_kernel(ctx));
        }
        bsk_bsr_free(&Dn);
    }
    bsk__hopper_tune.max_ctas = 0; /* the full grid: fewer than 2 items per SM, the pair again (its list of 5 tiles cached
                                      by the beta call above) */
    spmm_gpu_cached_case(t, ctx, BSK_OP_N, &U, &dU, 1032, 0.5f, 0.0f, "hopper-wgmma-b64p", &bsk__hopper_tune.out_prep, 0,
                         NULL);
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
    bsk_bsr_free(&dU);
    bsk__hopper_tune = saved;
    bsk_bsr_free(&U);
    bsk_bsr_free(&A);
    free(mask);
    bsk_test_dense_free(&D);
    bsk_destroy(ctx);
}

/* An smid -> L2 partition table for tune.part_tab on the device (1024 entries): w 0 alternate SMs, 1 every SM in
   partition 0, 2 every SM in partition 1. Returns 0 on success. */
static int upload_part_table(unsigned char *dtab, int w)
{
    unsigned char tab[1024];
    for (int i = 0; i < 1024; i++) tab[i] = w == 0 ? (unsigned char)(i & 1) : (unsigned char)(w - 1);
    return cudaMemcpy(dtab, tab, sizeof tab, cudaMemcpyHostToDevice) != cudaSuccess;
}

/* The L2-partition queues (forced, tune.part_mode 1, with tables of our own): a CTA takes items of its partition's tile
   group, then helps with the other's. Tables: SMs split by smid parity; every SM in partition 0 (group 1 is
   done entirely by helping); every SM in partition 1. Odd and even N tile counts, one N tile (the queues
   off), few CTAs and the full grid, beta, the long-row split through the queues; every element checked.
   Then the row groups (tune.part_mode 2, session 9: units split by rank parity between the partitions): the
   same tables, one N tile (row groups still on), an odd number of units, uniform rows in several bands, and the
   split (row groups off, tile groups instead). */
BSK_TEST(gpu_hopper_spmm_partition_queues)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    unsigned char *dtab = NULL;
    REQUIRE(cudaMalloc((void **)&dtab, 1024) == cudaSuccess);
    bsk_bsr A = spmm_random_bsr(7 * 128 - 9, 6 * 128 + 5, 128, 0.5, BSK_PATTERN_SKEWED, BSK_F16);
    for (int v = 0; v < 6; v++) {
        const int w = v % 3;
        REQUIRE(upload_part_table(dtab, w) == 0);
        bsk__hopper_tune = saved;
        bsk__hopper_tune.part_tab = dtab;
        bsk__hopper_tune.part_mode = v < 3 ? 1 : 2;
        bsk__hopper_tune.max_ctas = w == 1 ? 0 : 3;
        if (v >= 3) { /* row groups: uniform rows of mixed lengths (several bands), an odd unit count */
            bsk_bsr U = spmm_random_bsr((9 + w) * 128 - 5 * w, 5 * 128 + 3, 128, 0.35, BSK_PATTERN_UNIFORM, BSK_F16);
            const int64_t NU = 256 * (1 + w) - 8 * bsk_rng_int(r, 0, 20); /* 1, 2, 3 N tiles */
            run_device_case(t, ctx, &U, NU, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_part == 2 || bsk__hopper_tune.out_split_len > 0); /* full grid: the split */
            run_device_case(t, ctx, &U, NU, 8, 0, BSK_F32, 0.5f, 1.0f, 1);
            bsk__hopper_tune.band_mb = 1; /* bands of a few units: groups cross band boundaries unevenly */
            bsk__hopper_tune.l2promo = w + 1; /* the TMA L2 promotion knob: none, 64 B, 128 B */
            run_device_case(t, ctx, &U, NU + 256, 0, 0, BSK_BF16, 1.0f, 0.0f, 1);
            bsk__hopper_tune.band_mb = 0;
            bsk__hopper_tune.l2promo = 0;
            bsk_bsr_free(&U);
            /* part_mode 4 (row groups on unskewed rows): on, once enough items rule out the split (full grid) */
            bsk_bsr D = spmm_random_bsr((w == 1 ? 13 : 5) * 128 - 7, 2 * 128 + 3, 128, 0.3, BSK_PATTERN_UNIFORM, BSK_F16);
            const int64_t ND = 256 * (w == 1 ? 6 : 2) - 8 * w;
            bsk__hopper_tune.part_mode = 4;
            run_device_case(t, ctx, &D, ND, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_part == 3);
            run_device_case(t, ctx, &D, ND, 0, 8, BSK_F32, 0.5f, 0.5f, 1);
            bsk__hopper_tune.part_mode = 2;
            bsk_bsr_free(&D);
        }
        const int64_t N = 256 * (3 + v) - 8 * bsk_rng_int(r, 0, 20); /* 3, 4, 5 N tiles */
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, 8, 0, BSK_F32, 0.5f, 1.0f, 1);
        run_device_case(t, ctx, &A, 200, 0, 0, BSK_BF16, 1.5f, 0.0f, 1); /* one N tile: queues off */
        bsk__hopper_tune.split = 2; /* long rows split into parts, parts queued like rows */
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F32, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 0.5f, 0.0f, 1);
        if (v >= 3) CHECK(bsk__hopper_tune.out_split_len == 0 || bsk__hopper_tune.out_part == 1);
        /* tile groups of 1 / 2 / 3 N tiles inside the partition queues (an odd group count on 3-5 tiles), tile
           queues forced, on the b128 kernel and the b64 64 x 512 tile */
        bsk__hopper_tune.split = 0;
        bsk__hopper_tune.part_mode = 1;
        bsk__hopper_tune.part_tg = 1 + w;
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        CHECK(bsk__hopper_tune.out_part == 1);
        /* beta != 0 (the direct epilogue reads C): an item taken twice would add its product twice */
        run_device_case(t, ctx, &A, N, 8, 0, BSK_F32, 0.5f, 1.0f, 1);
        CHECK(bsk__hopper_tune.out_part == 1);
        {
            bsk_bsr S = spmm_random_bsr(9 * 64 - 5, 14 * 64 + 3, 64, 0.3, BSK_PATTERN_SKEWED, BSK_BF16);
            bsk__hopper_tune.b64_wgn = 256;
            run_device_case(t, ctx, &S, 512 * (3 + w) - 8 * w, 0, 0, BSK_BF16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_part == 1);
            bsk__hopper_tune.b64_wgn = 0;
            bsk_bsr_free(&S);
        }
        /* long units first (part_long): the units of >= pow2ceil(k x mean) blocks walk every tile of their partition,
           then the others the tile groups — beta != 0 (an item taken twice or never shows), both kernels, and split
           parts (the shortest part, which combines, must still come after its row's other parts). On A with split 2
           no part reaches the threshold (4): the one-phase order, which part_long must leave as it was. */
        bsk__hopper_tune.part_long = 1; /* threshold pow2ceil(mean 4) = 4: A's rows of >= 4 blocks are long */
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        CHECK(bsk__hopper_tune.out_part == 1 && bsk__hopper_tune.out_long_len >= 2);
        run_device_case(t, ctx, &A, N, 8, 0, BSK_F32, 0.5f, 1.0f, 1);
        bsk__hopper_tune.split = 2;
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F32, 1.0f, 0.0f, 1);
        CHECK(bsk__hopper_tune.out_split_len == 2 && bsk__hopper_tune.out_long_len >= 2);
        bsk__hopper_tune.split = 0;
        {
            bsk_bsr S = spmm_random_bsr(11 * 64 - 5, 16 * 64 + 3, 64, 0.3, BSK_PATTERN_SKEWED, BSK_F16);
            bsk__hopper_tune.b64_wgn = 256;
            run_device_case(t, ctx, &S, 512 * (3 + w) - 8 * w, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_part == 1 && bsk__hopper_tune.out_long_len >= 2);
            run_device_case(t, ctx, &S, 512 * (2 + w) + 8, 8, 0, BSK_F32, 0.75f, 0.5f, 1);
            /* rows of >= 16 blocks in two parts of >= 8: long units (threshold 8 for k = 1, mean ~5) */
            bsk__hopper_tune.part_long = 1;
            bsk__hopper_tune.split = 8;
            run_device_case(t, ctx, &S, 512 * (3 + w) - 8 * w, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_split_len == 8 && bsk__hopper_tune.out_long_len == 8);
            bsk__hopper_tune.split = 0;
            /* a split row across the long threshold: rows of 15 and 16 blocks, nine short ones (54 blocks, mean 5 ->
               long units >= 8 blocks), split 6: the 15-block row's parts are 8 (phase A) and 7 (phase B, the part that
               combines, after its sibling), the 16-block row's 8 and 8 */
            uint8_t mask[11 * 17];
            memset(mask, 0, sizeof mask);
            for (int j = 0; j < 15; j++) mask[j] = 1;
            for (int j = 0; j < 16; j++) mask[17 + j + 1] = 1;
            for (int i = 2; i < 11; i++)
                for (int q = 0; q < 1 + i % 4; q++) mask[i * 17 + (i * 5 + q * 3) % 17] = 1;
            bsk_dense Dm = bsk_test_dense(11 * 64 - 5, 17 * 64 - 3, 0, BSK_F16, r);
            bsk_bsr S2;
            REQUIRE_OK(bsk_bsr_from_mask(&Dm, 64, 64, mask, &S2));
            bsk__hopper_tune.split = 6;
            run_device_case(t, ctx, &S2, 512 * (2 + w) - 8 * w, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_split_len == 6 && bsk__hopper_tune.out_long_len == 8 &&
                  bsk__hopper_tune.out_part == 1);
            bsk__hopper_tune.split = 0;
            bsk_bsr_free(&S2);
            bsk_test_dense_free(&Dm);
            bsk__hopper_tune.b64_wgn = 0;
            bsk_bsr_free(&S);
        }
        bsk__hopper_tune.part_long = 0;
        bsk__hopper_tune.part_tg = 0;
    }
    bsk__hopper_tune = saved;
    bsk_bsr_free(&A);
    cudaFree(dtab);
    bsk_destroy(ctx);
}

/* The L2-partition map found by timing on this GPU. Either it is accepted (flag 1: 30-70 % of the SMs on each
   side, the reference SM in partition 0, every table entry 0 / 1) or the whole table stays zero (timings
   distorted, e.g. under compute-sanitizer: nothing half-written is used). Agreement with ncu's fabric counters
   is checked by bench/hopper_probe --part (a device-run probe). Then the default dispatch (queues on for
   skewed rows with that map) gives correct results, skewed and uniform, alpha / beta. */
BSK_TEST(gpu_hopper_l2_partition_map)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    unsigned char tab[1025];
    float lat[1024];
    int smid[1024], n = 0;
    REQUIRE_OK(bsk__cuda_l2_partition_probe(ctx, tab, lat, smid, &n));
    int n1 = 0;
    for (int i = 0; i < n; i++) n1 += tab[smid[i]];
    fprintf(stderr, "  L2 partitions: valid %d, %d of %d SMs in partition 1\n", tab[1024], n1, n);
    int bad = 0;
    for (int i = 0; i < 1024; i++) bad += tab[i] > 1 || (tab[1024] != 1 && tab[i] != 0);
    CHECK(bad == 0);
    CHECK(tab[1024] <= 1);
    if (tab[1024] == 1) {
        CHECK(10 * n1 >= 3 * n && 10 * n1 <= 7 * n);
        CHECK(tab[smid[0]] == 0); /* the reference SM is partition 0 */
    }
    bsk_rng *r = bsk_test_rng();
    for (int v = 0; v < 2; v++) {
        bsk_bsr A = spmm_random_bsr(9 * 128 + 5, 7 * 128, 128, 0.3, v ? BSK_PATTERN_UNIFORM : BSK_PATTERN_SKEWED,
                                    BSK_F16);
        const int64_t N = 256 * 5 - 8 * bsk_rng_int(r, 0, 20);
        run_device_case(t, ctx, &A, N, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        run_device_case(t, ctx, &A, N, 0, 8, BSK_F32, 0.5f, 1.0f, 1);
        bsk_bsr_free(&A);
    }
    bsk_destroy(ctx);
}

/* The 2-CTA cluster variants (BM = 128, A multicast to both CTAs): 3 stages + TMA-store epilogue (16-bit C,
   beta = 0) and 4 stages + direct epilogue (any C, beta): tails, an odd number of N tiles (the second CTA's
   tile is past N), empty rows, skew, few clusters taking many items. */
BSK_TEST(gpu_hopper_spmm_cluster)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    const int b = 128;
    for (int v = 0; v < 8; v++) {
        /* v 0-3: 3 stages + TMA-store epilogue (16-bit C, beta 0); v 4-7: 4 stages + direct epilogue (cluster 3),
           any C and beta. cl_acq (the cluster-scope waits) and the L2 hints on some of each. */
        const int w = v % 4;
        bsk__hopper_tune.cluster = v < 4 ? 1 : 3;
        bsk__hopper_tune.max_ctas = w >= 2 ? 4 : 0;
        bsk__hopper_tune.cl_acq = w == 2;
        bsk__hopper_tune.l2hint = w == 1 ? 1 : w == 3 ? 2 : 0; /* w 3: the C hint alone */
        int64_t M = 3 * b + bsk_rng_int(r, 1, b - 1), K = 5 * b + bsk_rng_int(r, 1, b - 1);
        int64_t N = 8 * bsk_rng_int(r, 40, 100); /* 1..4 N tiles of 256, odd or even */
        if (v >= 4 && w % 2) N += 1;             /* direct epilogue: N odd */
        bsk_bsr A = spmm_random_bsr(w == 3 ? 10 * b : M, K, b, w == 1 ? 0.15 : 0.5, w == 3 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                               w % 2 ? BSK_BF16 : BSK_F16);
        const bsk_dtype ct = v >= 4 && w != 1 ? BSK_F32 : w % 2 ? BSK_BF16 : BSK_F16;
        const int64_t pad = N % 8 ? 8 - N % 8 : 8 * (w % 2);
        run_device_case(t, ctx, &A, N, pad, pad + 8 * (w / 2), ct, 0.75f, v >= 4 && w != 3 ? -0.5f : 0.0f, 1);
        if (strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b128x2") != 0) {
            t->failed++;
            fprintf(stderr, "  last kernel %s, want hopper-wgmma-b128x2\n", bsk_last_kernel(ctx));
        }
        bsk_bsr_free(&A);
    }
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}

/* BM = 64 both ways: the split 64 x 256 tile (b64_mode 1) and paired block rows (b64_mode 2, the merge of
   two rows' column lists; mode 3: the rows paired by the prep kernel's matching, pair_match 1). Every input/output
   dtype, beta random (direct epilogue) and zero (TMA store for 16-bit C), an odd number of block rows (the last pair
   has no second row), M / N / K tails, pairs with one or both rows empty, and a skewed pattern. */
BSK_TEST(gpu_hopper_spmm_b64_modes)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    const bsk_dtype ins[2] = {BSK_F16, BSK_BF16}, outs[3] = {BSK_F32, BSK_F16, BSK_BF16};
    bsk_rng *r = bsk_test_rng();
    const int b = 64;
    for (int mode = 1; mode <= 3; mode++) {
        bsk__hopper_tune.b64_mode = mode == 1 ? 1 : 2;
        bsk__hopper_tune.pair_match = mode == 3 ? 1 : -1;
        const char *want = mode >= 2 ? "hopper-wgmma-b64p" : "hopper-wgmma-b64";
        for (int ii = 0; ii < 2; ii++)
            for (int oi = 0; oi < 3; oi++) {
                /* 4..6 block rows, the last one partial: odd or even counts of rows */
                int64_t M = (int64_t)b * bsk_rng_int(r, 3, 5) + bsk_rng_int(r, 1, b - 1);
                int64_t K = 5 * b + bsk_rng_int(r, 1, b - 1), N = 8 * bsk_rng_int(r, 20, 70);
                bsk_bsr A = spmm_random_bsr(M, K, b, 0.55, BSK_PATTERN_UNIFORM, ins[ii]);
                for (int z = 0; z < 2; z++) {
                    float alpha = 0.5f + (float)bsk_rng_uniform(r), beta = z ? 0.0f : bsk_rng_sym(r);
                    double e = run_device_case(t, ctx, &A, N, 8, 8, outs[oi], alpha, beta, 1);
                    if (strcmp(bsk_last_kernel(ctx), want) != 0) {
                        t->failed++;
                        fprintf(stderr, "  last kernel %s, want %s\n", bsk_last_kernel(ctx), want);
                    }
                    if (mode >= 2 && bsk__hopper_tune.out_pair_match != (mode == 3)) {
                        t->failed++;
                        fprintf(stderr, "  pair matching %d, want %d\n", bsk__hopper_tune.out_pair_match, mode == 3);
                    }
                    if (!(e <= bsk_tol(ins[ii], outs[oi])))
                        fprintf(stderr, "  mode=%d in=%d out=%d beta=%g M=%lld N=%lld K=%lld err=%.3e\n", mode, (int)ins[ii],
                                (int)outs[oi], beta, (long long)M, (long long)N, (long long)K, e);
                }
                bsk_bsr_free(&A);
            }
        /* pairs with an empty row: rows 1 mod 4 empty (second row of even pairs), rows 2, 3 mod 8 both empty,
           N = 8k + 1 (the last column alone, direct epilogue), then N - 1 */
        const int64_t M = 11 * b - 9, K = 6 * b + 5, N = 8 * bsk_rng_int(r, 15, 35) + 1;
        const int64_t mb = (M + b - 1) / b, nb = (K + b - 1) / b;
        bsk_dense D = bsk_test_dense(M, K, 0, BSK_F16, r);
        uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
        for (int64_t i = 0; i < mb; i++)
            for (int64_t j = 0; j < nb; j++)
                mask[i * nb + j] = (i % 4 == 1 || i % 8 == 2 || i % 8 == 3) ? 0 : (bsk_rng_uniform(r) < 0.5);
        bsk_bsr E;
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &E));
        run_device_case(t, ctx, &E, N, 8 - N % 8, 8 - N % 8, BSK_F32, 1.5f, 0.0f, 1);
        run_device_case(t, ctx, &E, N - 1, 0, 0, BSK_F16, 1.0f, 0.0f, 1); /* N even: TMA-store epilogue */
        run_device_case(t, ctx, &E, N - 1, 0, 0, BSK_BF16, 1.0f, -0.5f, 1);
        bsk_bsr S = spmm_random_bsr(13 * b, 12 * b, b, 0.3, BSK_PATTERN_SKEWED, BSK_BF16);
        run_device_case(t, ctx, &S, 392, 0, 0, BSK_BF16, 0.75f, 0.0f, 1);
        run_device_case(t, ctx, &S, 392, 0, 0, BSK_F32, 0.75f, 0.5f, 1);
        bsk_bsr_free(&S);
        bsk_bsr_free(&E);
        free(mask);
        bsk_test_dense_free(&D);
    }
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}

/* Rows longer than 64 blocks (the producer reloads its 32-index window twice per row and the L2-prefetch
   look-ups reach into the next window), with the prefetch off (the default), at a 4-stage lead and at the largest lead
   (32 blocks: past the end of every window), on a grid of 2 CTAs (the next item's look-ahead runs every
   item). BM = 128, and BM = 64 split and paired. */
BSK_TEST(gpu_hopper_spmm_long_rows_prefetch)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    for (int v = 0; v < 3; v++) {
        const int b = v == 0 ? 128 : 64;
        bsk__hopper_tune.b64_mode = v == 1 ? 1 : 2;
        bsk__hopper_tune.max_ctas = 2;
        const int64_t M = 3 * b + bsk_rng_int(r, 1, b - 1), K = 78 * b + bsk_rng_int(r, 1, b - 1);
        bsk_bsr A = spmm_random_bsr(M, K, b, 0.92, BSK_PATTERN_UNIFORM, v == 2 ? BSK_BF16 : BSK_F16);
        for (int q = 0; q < 3; q++) {
            bsk__hopper_tune.pf = q == 0 ? 0 : q == 1 ? 4 : 64; /* default (off), 4 stages, 64 (clamped to 32 blocks) */
            run_device_case(t, ctx, &A, 136, 0, 0, q == 2 ? BSK_F32 : A.dtype, 1.0f, 0.0f, 1);
            const int want = q == 0 ? 0 : q == 1 ? (b == 128 ? 2 : 4) : 32;
            if (bsk__hopper_tune.out_pf != want) {
                t->failed++;
                fprintf(stderr, "  prefetch lead %d blocks, want %d\n", bsk__hopper_tune.out_pf, want);
            }
        }
        bsk_bsr_free(&A);
    }
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}

/* The long-row split (BM = 128): rows of >= 2L blocks run as parts on different CTAs; the row's last part adds
   the others' fp32 partials. Rows of chosen lengths (full, empty, exactly 2L, 2L - 1), M / N / K tails, fp16
   and bf16 inputs, every output dtype, alpha and beta (the TMA-store and the direct epilogue), the 3-stage
   configuration, one CTA and two (every other part stored before the last runs), tile groups (the queue's
   order), a workspace budget so small that the prep kernel must lengthen the parts, a row past the 64-part cap,
   op T, a skewed pattern, the automatic rule on a few-rows shape, and bitwise-equal repeats. Sizes are small:
   the float64 reference is dense. */
BSK_TEST(gpu_hopper_spmm_split)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    const int b = 128, L = 2;
    /* rows: 0 full, 1 empty, 2 exactly 2L, 3 2L - 1 (not split), 4 (partial rows) half the columns */
    const int64_t M = 4 * b + 19, K = 8 * b - 51, mb = (M + b - 1) / b, nb = (K + b - 1) / b;
    uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
    for (int64_t j = 0; j < nb; j++) {
        mask[0 * nb + j] = 1;
        mask[2 * nb + j] = j < 2 * L;
        mask[3 * nb + j] = j >= nb - (2 * L - 1);
        mask[4 * nb + j] = bsk_rng_uniform(r) < 0.5;
    }
    bsk_bsr A[2];
    for (int i = 0; i < 2; i++) {
        bsk_dense D = bsk_test_dense(M, K, 0, i ? BSK_BF16 : BSK_F16, r);
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A[i]));
        bsk_test_dense_free(&D);
    }
    for (int v = 0; v < 8; v++) {
        bsk__hopper_tune = saved;
        bsk__hopper_tune.split = L;
        bsk__hopper_tune.max_ctas = v == 1 ? 1 : v == 2 ? 2 : 0;
        bsk__hopper_tune.ring4 = v == 3 ? 1 : 0;
        bsk__hopper_tune.split_mb = v == 4 ? 1 : 0; /* 1 MB: few slots, the prep doubles L */
        bsk__hopper_tune.tgroup = v == 6 ? 1 : v == 7 ? 2 : 0;
        const bsk_bsr *Av = &A[v % 2];
        /* v 4: at most 2 N tiles (the 1 MB budget then holds parts of a doubled L); v 5: N odd (direct epilogue);
           v 6, 7: 3 to 5 N tiles in tile groups of 1 and 2 */
        const int64_t N = v == 5 ? 2 * bsk_rng_int(r, 60, 160) + 1
                                 : 8 * (v >= 6 ? bsk_rng_int(r, 65, 80) : bsk_rng_int(r, 16, 40));
        const int64_t pad = N % 8 ? 8 - N % 8 : 8 * (v % 2);
        const float alpha = 0.5f + (float)bsk_rng_uniform(r);
        /* 16-bit C, beta 0 (TMA store unless N is odd), then fp32 or bf16 with beta (direct epilogue) */
        run_device_case(t, ctx, Av, N, pad, pad, v % 2 ? BSK_BF16 : BSK_F16, alpha, 0.0f, 1);
        if (bsk__hopper_tune.out_split_len <= 0) {
            t->failed++;
            fprintf(stderr, "  v=%d: no split (L %d)\n", v, bsk__hopper_tune.out_split_len);
        }
        run_device_case(t, ctx, Av, N, pad, pad + 8, v % 2 ? BSK_F32 : BSK_BF16, -alpha, bsk_rng_sym(r), 1);
    }
    bsk__hopper_tune = saved;
    /* a row of 67 blocks with L = 1: 64 parts (the cap), and a grid of 3 CTAs */
    {
        const int64_t M1 = 100, K1 = 66 * b + 5, nb1 = (K1 + b - 1) / b;
        uint8_t *m1 = (uint8_t *)malloc((size_t)nb1);
        memset(m1, 1, (size_t)nb1);
        bsk_dense D = bsk_test_dense(M1, K1, 0, BSK_F16, r);
        bsk_bsr W;
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, m1, &W));
        bsk__hopper_tune.split = 1;
        run_device_case(t, ctx, &W, 136, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        bsk__hopper_tune.max_ctas = 3;
        run_device_case(t, ctx, &W, 136, 0, 0, BSK_F32, 0.5f, -1.0f, 1);
        bsk__hopper_tune = saved;
        bsk_bsr_free(&W);
        bsk_test_dense_free(&D);
        free(m1);
    }
    /* op T through the transpose index (units are A's block columns) */
    for (int v = 0; v < 2; v++) {
        bsk__hopper_tune.split = v ? 1 : 2;
        bsk__hopper_tune.max_ctas = v ? 3 : 0;
        bsk_bsr S = spmm_random_bsr(12 * b + 5, 4 * b, b, 0.5, BSK_PATTERN_SKEWED, v ? BSK_BF16 : BSK_F16);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 136, 0, 0, BSK_F32, 0.75f, -0.5f, 1);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 136, 0, 0, v ? BSK_BF16 : BSK_F16, 0.75f, 0.0f, 1);
        bsk_bsr_free(&S);
    }
    bsk__hopper_tune = saved;
    /* a skewed pattern: the automatic L, and L = 2 in tile groups of 1 */
    {
        bsk_bsr S = spmm_random_bsr(8 * b - 3, 8 * b, b, 0.4, BSK_PATTERN_SKEWED, BSK_F16);
        for (int v = 0; v < 2; v++) {
            bsk__hopper_tune.split = v ? 2 : -2;
            bsk__hopper_tune.tgroup = v;
            run_device_case(t, ctx, &S, v ? 392 : 136, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            if (!v) run_device_case(t, ctx, &S, 136, 0, 0, BSK_F32, 1.0f, 0.25f, 1);
        }
        bsk_bsr_free(&S);
    }
    bsk__hopper_tune = saved;
    /* the default (automatic) rule on one long row (48 blocks, 2 N tiles: 2 items for the whole grid): parts of
       16 blocks (SPLIT_MIN_LEN); and none on a grid the items fill */
    {
        bsk_bsr T = spmm_random_bsr(b, 48 * b, b, 1.0, BSK_PATTERN_UNIFORM, BSK_BF16);
        run_device_case(t, ctx, &T, 264, 0, 0, BSK_BF16, 1.0f, 0.0f, 1);
        if (bsk__hopper_tune.out_split_len != 16) {
            t->failed++;
            fprintf(stderr, "  automatic split length %d, want 16\n", bsk__hopper_tune.out_split_len);
        }
        bsk__hopper_tune.max_ctas = 3;
        run_device_case(t, ctx, &T, 264, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        if (bsk__hopper_tune.out_split_len != 0) {
            t->failed++;
            fprintf(stderr, "  automatic split length %d on 3 CTAs, want 0\n", bsk__hopper_tune.out_split_len);
        }
        bsk__hopper_tune.max_ctas = 0;
        run_device_case(t, ctx, &T, 264, 0, 0, BSK_F32, -1.0f, 1.0f, 1);
        bsk_bsr_free(&T);
    }
    bsk__hopper_tune = saved;
    /* determinism: the same split call three times gives the same bytes (whichever part finishes first) */
    for (int v = 0; v < 2; v++) {
        bsk__hopper_tune.split = 1;
        bsk__hopper_tune.max_ctas = v ? 5 : 0;
        spmm_gpu_repeat_same(t, ctx, BSK_OP_N, &A[0], 520, v ? BSK_F16 : BSK_F32, 3, "hopper-wgmma");
    }
    bsk__hopper_tune = saved;
    bsk_bsr_free(&A[0]);
    bsk_bsr_free(&A[1]);
    free(mask);
    bsk_destroy(ctx);
}

/* Session 21: the long-row split on the 64 x 512 slot-epilogue tile (b64, 16-bit C, beta 0), op N and op T. Rows
   0 full, 1 empty, 2 exactly 2L, 3 2L - 1 (not split), 4.. about half; N from one partial 512-column tile to three;
   parts on 1 / 2 / 3 CTAs, few slots (the prep doubles L), tile groups, partition queues forced; the automatic rule
   on a skewed pattern; session 22's long-row rule (L, the fp32 tile without it, forced partition queues, the knobs
   that restore the old path); determinism (the parts add in part order whichever finishes first). */
BSK_TEST(gpu_hopper_spmm_b64_wide_split)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    unsigned char *dtab = NULL;
    REQUIRE(cudaMalloc((void **)&dtab, 1024) == cudaSuccess);
    REQUIRE(upload_part_table(dtab, 0) == 0);
    const int b = 64, L = 2;
    const int64_t M = 7 * b + 19, K = 12 * b - 51, mb = (M + b - 1) / b, nb = (K + b - 1) / b;
    uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
    REQUIRE(mask != NULL);
    for (int64_t j = 0; j < nb; j++) {
        mask[0 * nb + j] = 1;
        mask[2 * nb + j] = j < 2 * L;
        mask[3 * nb + j] = j >= nb - (2 * L - 1);
        for (int64_t i = 4; i < mb; i++) mask[i * nb + j] = bsk_rng_uniform(r) < 0.5;
    }
    bsk_bsr A[2];
    for (int i = 0; i < 2; i++) {
        bsk_dense D = bsk_test_dense(M, K, 0, i ? BSK_BF16 : BSK_F16, r);
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A[i]));
        bsk_test_dense_free(&D);
    }
    for (int v = 0; v < 8; v++) {
        bsk__hopper_tune = saved;
        bsk__hopper_tune.b64_wgn = 256; /* the 64 x 512 tile whatever the item count */
        bsk__hopper_tune.split = L;
        bsk__hopper_tune.max_ctas = v == 1 ? 1 : v == 2 ? 2 : v == 3 ? 3 : 0;
        bsk__hopper_tune.split_mb = v == 4 ? 1 : 0;      /* 1 MB: 64 KB x 2 per part and tile, the prep doubles L */
        bsk__hopper_tune.tgroup = v == 5 ? 1 : 0;
        bsk__hopper_tune.part_mode = v == 6 ? 1 : 0;      /* partition queues (tile groups) forced ... */
        bsk__hopper_tune.part_tab = v == 6 ? dtab : NULL; /* ... with a table (alternate SMs), not the discovered map */
        const bsk_bsr *Av = &A[v % 2];
        const bsk_dtype ct = v % 2 ? BSK_BF16 : BSK_F16;
        /* 1 to 3 N tiles; v 4 one (few slots), v 5 / 6 two or three (tile groups, partition queues need >= 2) */
        const int64_t N = v == 4 ? 8 * bsk_rng_int(r, 20, 64) : 8 * bsk_rng_int(r, v == 5 || v == 6 ? 66 : 40, 190);
        const float alpha = 0.5f + (float)bsk_rng_uniform(r);
        run_device_case(t, ctx, Av, N, 8 * (v % 2), 8 * (v % 3 == 0), ct, alpha, 0.0f, 1);
        if (bsk__hopper_tune.out_split_len <= 0 || strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64") != 0) {
            t->failed++;
            fprintf(stderr, "  v=%d: kernel %s, split L %d (want hopper-wgmma-b64, L > 0)\n", v, bsk_last_kernel(ctx),
                    bsk__hopper_tune.out_split_len);
        }
        if (v == 6) CHECK(bsk__hopper_tune.out_part == 1);
        /* op T over the transpose index: units are A's block columns (each about half full, column j < 2L fuller) */
        run_device_case_op(t, ctx, BSK_OP_T, Av, N, 0, 0, ct, -alpha, 0.0f, 1);
        if (bsk__hopper_tune.out_split_len <= 0 || strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64t") != 0) {
            t->failed++;
            fprintf(stderr, "  v=%d op T: kernel %s, split L %d\n", v, bsk_last_kernel(ctx), bsk__hopper_tune.out_split_len);
        }
    }
    bsk__hopper_tune = saved;
    /* a skewed pattern on the full grid: the automatic rule (few blocks per CTA: 24 rows x 3 tiles of 192 blocks on
       >= 72 CTAs, w <= 8, so L = max(8, 2w) <= 16 and 2L <= 40 block columns: the rule asks for a split) */
    {
        bsk_bsr S = spmm_random_bsr(24 * b - 3, 40 * b, b, 0.2, BSK_PATTERN_SKEWED, BSK_F16);
        bsk__hopper_tune.b64_wgn = 256;
        bsk__hopper_tune.split = -2;
        run_device_case(t, ctx, &S, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        CHECK(bsk__hopper_tune.out_split_len > 0);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 520, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        bsk_bsr_free(&S);
    }
    bsk__hopper_tune = saved;
    /* Session 22's long-row rule (B64_SKEW_RULE, the default): 40 rows of 64 block columns, row 0 full, the others
       about 12 blocks; N = 2560 (5 tiles) keeps both rules above off (2 x 40 x 5 > the grid; w > 16, so 2 max(8, 2w)
       > 64), so L = max(32, 2 x the mean row) = 32 and only row 0 splits, in fp16 and bf16; not on the direct-epilogue
       64 x 512 tile (fp32 C, beta != 0), where it was not measured */
    {
        const int64_t M2 = 40 * b, K2 = 64 * b;
        uint8_t *m2 = (uint8_t *)calloc(40 * 64, 1);
        REQUIRE(m2 != NULL);
        for (int64_t j = 0; j < 64; j++) {
            m2[j] = 1;
            for (int64_t i = 1; i < 40; i++) m2[i * 64 + j] = bsk_rng_uniform(r) < 0.19;
        }
        for (int v = 0; v < 2; v++) {
            bsk_dense D = bsk_test_dense(M2, K2, 0, v ? BSK_BF16 : BSK_F16, r);
            bsk_bsr S;
            REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, m2, &S));
            bsk__hopper_tune.b64_wgn = 256;
            const int64_t mean2 = 2 * ((S.nnzb + 39) / 40), want = mean2 > 32 ? (2 * mean2 > 64 ? 0 : mean2) : 32;
            run_device_case(t, ctx, &S, 2560, 0, 0, v ? BSK_BF16 : BSK_F16, 1.0f, 0.0f, 1);
            if (bsk__hopper_tune.out_split_len != want || strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64") != 0) {
                t->failed++;
                fprintf(stderr, "  long-row rule: kernel %s, split L %d, want hopper-wgmma-b64, %d\n", bsk_last_kernel(ctx),
                        bsk__hopper_tune.out_split_len, (int)want);
            }
            run_device_case(t, ctx, &S, 2560, 0, 0, BSK_F32, 0.5f, -0.75f, 1);
            CHECK(bsk__hopper_tune.out_split_len == 0);
            /* the split parts with one tile per group in forced partition queues (a table, not the discovered map,
               which may not be ready): row 0's parts share their tile's queue */
            bsk__hopper_tune.part_mode = 1;
            bsk__hopper_tune.part_tab = dtab;
            run_device_case(t, ctx, &S, 2560 - 8 * v, 8, 0, v ? BSK_BF16 : BSK_F16, -1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_part == 1 && bsk__hopper_tune.out_split_len == want);
            bsk__hopper_tune = saved;
            bsk__hopper_tune.b64_wgn = 256;
            /* the knob restores the old order (half the tiles per partition queue) and no split */
            bsk__hopper_tune.part_tg = -1;
            bsk__hopper_tune.split = -1;
            run_device_case(t, ctx, &S, 2560, 0, 0, v ? BSK_BF16 : BSK_F16, 1.0f, 0.0f, 1);
            CHECK(bsk__hopper_tune.out_split_len == 0);
            bsk__hopper_tune = saved;
            bsk_bsr_free(&S);
            bsk_test_dense_free(&D);
        }
        free(m2);
    }
    bsk__hopper_tune = saved;
    for (int v = 0; v < 2; v++) {
        const char *want = v ? "hopper-wgmma-b64t" : "hopper-wgmma-b64";
        bsk__hopper_tune.b64_wgn = 256;
        bsk__hopper_tune.split = 1;
        bsk__hopper_tune.max_ctas = v ? 5 : 0;
        spmm_gpu_repeat_same(t, ctx, v ? BSK_OP_T : BSK_OP_N, &A[0], 1040, v ? BSK_BF16 : BSK_F16, 3, want);
        /* the helper matches the name by prefix (b64p would pass): the exact kernel, and the split ran */
        CHECK(strcmp(bsk_last_kernel(ctx), want) == 0 && bsk__hopper_tune.out_split_len > 0);
    }
    bsk__hopper_tune = saved;
    bsk_bsr_free(&A[0]);
    bsk_bsr_free(&A[1]);
    free(mask);
    cudaFree(dtab);
    bsk_destroy(ctx);
}

/* Malformed device indices (row_ptr past nnzb and decreasing, col_idx out of range) must not fault:
   the call succeeds (device indices are not validated) and the stream stays healthy. */
BSK_TEST(gpu_hopper_spmm_malformed_indices_safe)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    const int b = 64;
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_bsr A = spmm_random_bsr(4 * b, 4 * b, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
    bsk_bsr dA;
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
    int32_t bad_rp[5] = {0, 7, 3, 1000000, -5};
    int32_t *bad_ci = (int32_t *)malloc((size_t)A.nnzb * 4);
    for (int64_t k = 0; k < A.nnzb; k++) bad_ci[k] = (k % 3 == 0) ? -1 - (int32_t)k : (k % 3 == 1 ? 1 << 30 : (int32_t)(k % 4));
    REQUIRE(cudaMemcpy(dA.row_ptr, bad_rp, sizeof bad_rp, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dA.col_idx, bad_ci, (size_t)A.nnzb * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    bsk_rng *r = bsk_test_rng();
    bsk_dense B = bsk_test_dense(A.cols, 256, 0, BSK_F16, r), C = bsk_test_dense_poison(A.rows, 256, 0, BSK_F32);
    bsk_dense dB = B, dC = C;
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    REQUIRE(dB.data && dC.data);
    /* BM = 64 both ways (paired rows merge two malformed lists), prefetch at its largest lead */
    for (int mode = 1; mode <= 2; mode++) {
        bsk__hopper_tune.b64_mode = mode;
        bsk__hopper_tune.pf = 64;
        CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
    }
    bsk__hopper_tune = saved;
    cudaFree(dB.data);
    cudaFree(dC.data);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
    /* the same with 128-blocks through the cluster variant (16-bit C) and unclustered */
    bsk__hopper_tune.cluster = 1;
    A = spmm_random_bsr(4 * 128, 4 * 128, 128, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
    free(bad_ci);
    bad_ci = (int32_t *)malloc((size_t)A.nnzb * 4);
    for (int64_t k = 0; k < A.nnzb; k++) bad_ci[k] = (k % 3 == 0) ? -7 : (k % 3 == 1 ? 99 : (int32_t)(k % 4));
    REQUIRE(cudaMemcpy(dA.row_ptr, bad_rp, sizeof bad_rp, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dA.col_idx, bad_ci, (size_t)A.nnzb * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    B = bsk_test_dense(A.cols, 512, 0, BSK_F16, r);
    C = bsk_test_dense_poison(A.rows, 512, 0, BSK_F16);
    dB = B;
    dC = C;
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    REQUIRE(dB.data && dC.data);
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    bsk__hopper_tune.cluster = 3;
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    bsk__hopper_tune.cluster = 2;
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    /* the long-row split over overlapping clamped rows (more blocks in all than nnzb: the prep lengthens the
       parts until they fit the slots) */
    bsk__hopper_tune.split = 1;
    CHECK_STATUS(bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC), BSK_SUCCESS);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    bsk__hopper_tune = saved;
    cudaFree(dB.data);
    cudaFree(dC.data);
    free(bad_ci);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
}

/* Cases the Hopper kernel must decline (the call then goes to another backend or is unsupported). */
BSK_TEST(gpu_hopper_spmm_declines_unaligned)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    const int b = 64;
    bsk_bsr A = spmm_random_bsr(2 * b, 2 * b, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16), dA;
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
    bsk_rng *r = bsk_test_rng();
    bsk_dense B = bsk_test_dense(A.cols, 100, 1, BSK_F16, r), C = bsk_test_dense_poison(A.rows, 100, 0, BSK_F32);
    bsk_dense dB = B, dC = C; /* ld of B = 101 halves: not a multiple of 16 bytes, TMA cannot describe it */
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    REQUIRE(dB.data && dC.data);
    bsk_status s = bsk_spmm(ctx, BSK_OP_N, 1.0f, &dA, &dB, 0.0f, &dC);
    CHECK(s == BSK_SUCCESS || s == BSK_ERR_UNSUPPORTED);
    if (s == BSK_SUCCESS) CHECK(strncmp(bsk_last_kernel(ctx), "hopper", 6) != 0);
    CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
    cudaFree(dB.data);
    cudaFree(dC.data);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
}

/* Aᵀ·B on the Hopper kernels (transpose index, A read M-major): every block size and dtype pair, alpha/beta,
   tails on all three dimensions, empty block columns, a skewed pattern, a tiny persistent grid (ring phases
   across many items), bitwise-equal repeats; an empty pattern goes to the portable path and is still right. */
BSK_TEST(gpu_hopper_spmm_op_t)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    const bsk_dtype ins[2] = {BSK_F16, BSK_BF16}, outs[3] = {BSK_F32, BSK_F16, BSK_BF16};
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2) {
        for (int ii = 0; ii < 2; ii++)
            for (int oi = 0; oi < 3; oi++) {
                const int64_t M = b * bsk_rng_int(r, 2, 5) + bsk_rng_int(r, 0, b - 1);
                const int64_t K = b * bsk_rng_int(r, 2, 5) + bsk_rng_int(r, 0, b - 1);
                const int64_t N = 8 * bsk_rng_int(r, 20, 70);
                bsk_bsr A = spmm_random_bsr(M, K, b, 0.45, BSK_PATTERN_UNIFORM, ins[ii]);
                const float alpha = 2.0f * bsk_rng_sym(r), beta = (oi + ii) % 2 ? bsk_rng_sym(r) : 0.0f;
                run_device_case_op(t, ctx, BSK_OP_T, &A, N, 8, 8, outs[oi], alpha, beta, 1);
                bsk_bsr_free(&A);
            }
        /* odd N (the last column alone), empty block columns, skewed rows, no blocks */
        const int64_t M = 6 * b - 5, K = 5 * b + 9, mb = (M + b - 1) / b, nb = (K + b - 1) / b;
        bsk_dense D = bsk_test_dense(M, K, 0, BSK_F16, r);
        uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
        for (int64_t i = 0; i < mb; i++)
            for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = (j % 2 == 1) ? 0 : (bsk_rng_uniform(r) < 0.7);
        bsk_bsr E, Z;
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &E));
        memset(mask, 0, (size_t)(mb * nb));
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &Z));
        const int64_t No = 2 * bsk_rng_int(r, 60, 150) + 1;
        run_device_case_op(t, ctx, BSK_OP_T, &E, No, 8 - No % 8, 8 - No % 8, BSK_F32, 1.5f, 0.0f, 1);
        run_device_case_op(t, ctx, BSK_OP_T, &E, 264, 0, 0, BSK_F16, 1.0f, 0.0f, 1); /* TMA-store epilogue */
        bsk__hopper_tune.ring4 = 1; /* ... the 3-stage, whole-tile configuration (the default, 4 stages and two
                                       store rounds, ran just above) */
        run_device_case_op(t, ctx, BSK_OP_T, &E, 264, 0, 0, BSK_BF16, 1.0f, 0.0f, 1);
        bsk__hopper_tune.ring4 = 0;
        run_device_case_op(t, ctx, BSK_OP_T, &E, 264, 0, 0, BSK_BF16, 1.0f, -0.5f, 1);
        run_device_case_op(t, ctx, BSK_OP_T, &Z, 136, 0, 0, BSK_F16, 1.0f, 0.25f, 0);
        bsk_bsr S = spmm_random_bsr(14 * b, 9 * b, b, 0.3, BSK_PATTERN_SKEWED, BSK_BF16);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 392, 0, 0, BSK_BF16, 0.75f, 0.0f, 1);
        bsk__hopper_tune.max_ctas = 3;
        run_device_case_op(t, ctx, BSK_OP_T, &S, 520, 0, 0, BSK_F32, 0.75f, 0.5f, 1);
        run_device_case_op(t, ctx, BSK_OP_T, &S, 520, 0, 0, BSK_F16, 0.75f, 0.0f, 1);
        bsk__hopper_tune.ring4 = 1; /* the 3-stage configuration with three CTAs taking many items */
        run_device_case_op(t, ctx, BSK_OP_T, &S, 520, 0, 0, BSK_BF16, 0.75f, 0.0f, 1);
        bsk__hopper_tune.ring4 = 0;
        bsk__hopper_tune = saved;
        /* determinism: the same call twice gives the same bytes */
        spmm_gpu_repeat_same(t, ctx, BSK_OP_T, &S, 256, BSK_F32, 2, "hopper-wgmma");
        bsk_bsr_free(&S);
        bsk_bsr_free(&E);
        bsk_bsr_free(&Z);
        free(mask);
        bsk_test_dense_free(&D);
    }
    bsk_destroy(ctx);
}

/* One pattern-cached call (spmm_gpu_util.h) on the b64 / b128 path: that kernel ran, and its prep as expected. */
static void cached_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_bsr *dA, int64_t N,
                        float beta, int prep, cudaStream_t capture)
{
    const int b = A->block_rows;
    const char *want = op == BSK_OP_T ? (b == 128 ? "hopper-wgmma-b128t" : "hopper-wgmma-b64pt")
                                      : (b == 128 ? "hopper-wgmma-b128" : "hopper-wgmma-b64p");
    const float alpha = 0.5f + (float)bsk_rng_uniform(bsk_test_rng());
    spmm_gpu_cached_case(t, ctx, op, A, dA, N, alpha, beta, want, &bsk__hopper_tune.out_prep, prep, capture);
}

/* The b64 / b128 launcher's out_prep and direct-mode queue (spmm_gpu_util.h) */
static void expect_prep(bsk_test_ctx *t, int want, const char *what)
{
    spmm_gpu_expect_prep(t, bsk__hopper_tune.out_prep, want, what);
}
static void expect_queue_zero(bsk_test_ctx *t, bsk_context *ctx, const char *what)
{
    spmm_gpu_expect_queue_zero(t, ctx, bsk__hopper_tune.out_queue, what);
}

/* Direct mode (session 26): where every item has a CTA of its own, no row is split and the rows pair without matching,
   a call with no cached list runs the main kernel alone, each CTA its own item with its lists read from the row pointer
   (out_prep 2). b 64 (pairs: an odd row out, empty rows) and b 128, op N and T, against the float64 reference with
   fp16 / bf16 / fp32 C, alpha and beta, tails, a skewed and an empty pattern; each once with direct mode off (the prep
   ran: out_prep 1); the same bytes either way (the same lists in the same order per item); calls in a row with beta !=
   0 (an item run twice would show); more items than CTAs (max_ctas 3) and a forced split keep the prep (tune.direct 2:
   direct on 3 CTAs, the queue reset between calls); a full row among
   short ones runs direct without the few-blocks split, with the pattern cache on split as before, and with the cache
   on inside a capture (no list cached there) direct again; a split length no row can reach (2L > the block columns)
   is dropped (direct, out_split_len 0); a capture in a fresh context (its zeroed queue cannot be created inside one:
   the prep is captured) and after an eager call there (direct), with the cache off and on, replayed three times. */
BSK_TEST(gpu_hopper_spmm_direct)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2) {
        const int64_t M = 5 * b - 7, K = 4 * b + 3, mb = (M + b - 1) / b, nb = (K + b - 1) / b;
        bsk_dense D = bsk_test_dense(M, K, 0, BSK_F16, r);
        uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
        REQUIRE(mask != NULL);
        for (int64_t i = 0; i < mb; i++) /* row 1 empty, column 2 empty (op T: an empty unit) */
            for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = i != 1 && j != 2 && bsk_rng_uniform(r) < 0.6;
        bsk_bsr A, Z;
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A));
        memset(mask, 0, (size_t)(mb * nb));
        REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &Z));
        bsk_bsr S = spmm_random_bsr(9 * b + 5, 7 * b, b, 0.3, BSK_PATTERN_SKEWED, BSK_BF16);
        const int64_t No = 136 + 8 * bsk_rng_int(r, 0, 30) + 1; /* an odd tail */
        for (int v = 0; v < 2; v++) {
            bsk__hopper_tune = saved;
            bsk__hopper_tune.direct = v ? -1 : 0;
            const int want = v ? 1 : 2;
            for (int opi = 0; opi < 2; opi++) {
                const bsk_op op = opi ? BSK_OP_T : BSK_OP_N;
                run_device_case_op(t, ctx, op, &A, 264, 0, 0, BSK_F16, 0.75f, 0.0f, 1);
                expect_prep(t, want, "A fp16");
                run_device_case_op(t, ctx, op, &A, No, 8 - No % 8, 8 - No % 8, BSK_F32, 1.5f, -0.5f, 1);
                expect_prep(t, want, "A fp32 beta, tail");
                run_device_case_op(t, ctx, op, &S, 392, 0, 8, BSK_BF16, -1.0f, 0.0f, 1);
                expect_prep(t, want, "skewed bf16");
                /* an empty pattern: op T has no transpose index and leaves it to the portable path */
                run_device_case_op(t, ctx, op, &Z, 264, 0, 0, BSK_F16, 1.0f, 0.25f, op == BSK_OP_N);
            }
        }
        bsk__hopper_tune = saved;
        /* the same bytes with and without the prep, and calls in a row with beta (the queue is the context's). The
           helper's last call runs with its second value and leaves the knob at its first: direct mode off first, then
           the default, whose call out_prep shows ran direct */
        spmm_gpu_knob_same(t, ctx, &A, 264, 0, 0, BSK_F32, 1.25f, &bsk__hopper_tune.direct, -1, 0, "hopper-wgmma");
        expect_prep(t, 2, "A, the same bytes");
        spmm_gpu_knob_same(t, ctx, &S, 520, 0, 0, BSK_BF16, 0.5f, &bsk__hopper_tune.direct, -1, 0, "hopper-wgmma");
        expect_prep(t, 2, "skewed, the same bytes");
        bsk__hopper_tune.direct = saved.direct;
        for (int rep = 0; rep < 4; rep++) {
            run_device_case(t, ctx, &S, 264, 0, 0, BSK_F16, 1.0f, 0.5f, 1);
            expect_prep(t, 2, "calls in a row");
            expect_queue_zero(t, ctx, "calls in a row");
        }
        /* where the rule does not hold, the prep runs: more items than CTAs; a split (b 128) */
        bsk__hopper_tune.max_ctas = 3;
        run_device_case(t, ctx, &S, 264, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        expect_prep(t, 1, "3 CTAs");
        /* ... unless tune.direct 2 asks for direct mode past one item per CTA (an experiment): the CTAs then take the
           items after their first from the context's queue, which each call must leave at zero — calls in a row with
           beta, op N and T (a queue left non-zero would skip items: their C stays beta x C) */
        bsk__hopper_tune.direct = 2;
        bsk__hopper_tune.split = -1;
        for (int rep = 0; rep < 3; rep++) {
            run_device_case_op(t, ctx, rep == 1 ? BSK_OP_T : BSK_OP_N, &S, 392, 0, 0, BSK_F32, 1.0f, 0.5f, 1);
            expect_prep(t, 2, "direct 2 on 3 CTAs");
            expect_queue_zero(t, ctx, "direct 2 on 3 CTAs");
        }
        bsk__hopper_tune = saved;
        if (b == 128) {
            bsk__hopper_tune.split = 2;
            run_device_case(t, ctx, &S, 264, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            expect_prep(t, 1, "split");
            bsk__hopper_tune = saved;
            /* 20 rows of ~2 blocks and one full row of 16 on 5 N tiles (100 items): by default direct, without the
               few-blocks split; with the pattern cache on the split (and the prep) as before */
            const int64_t fm = 20, fn = 16;
            uint8_t *fmask = (uint8_t *)calloc((size_t)(fm * fn), 1);
            REQUIRE(fmask != NULL);
            for (int64_t i = 0; i < fm; i++)
                for (int64_t j = 0; j < fn; j++) fmask[i * fn + j] = i == 3 || bsk_rng_uniform(r) < 0.12;
            bsk_dense FD = bsk_test_dense(fm * b - 7, fn * b, 0, BSK_F16, r);
            bsk_bsr F;
            REQUIRE_OK(bsk_bsr_from_mask(&FD, b, b, fmask, &F));
            run_device_case(t, ctx, &F, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            if (bsk__hopper_tune.out_max_grid >= 100) { /* 100 items: direct only where each has an SM */
                expect_prep(t, 2, "full row, direct");
                CHECK(bsk__hopper_tune.out_split_len == 0);
            }
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
            const int all_sms = bsk__hopper_tune.out_max_grid >= 100;
            run_device_case(t, ctx, &F, 1032, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            expect_prep(t, 1, "full row, cache on");
            CHECK(bsk__hopper_tune.out_split_len > 0);
            /* the cache on inside a capture, where it keeps no list: as with the cache off (direct, no split, where
               each item has an SM; else the prep with the split), the workspace sized by the eager calls above */
            {
                cudaStream_t fs = NULL;
                REQUIRE(cudaStreamCreateWithFlags(&fs, cudaStreamNonBlocking) == cudaSuccess);
                bsk_bsr dF;
                REQUIRE_OK(bsk_bsr_clone(&F, BSK_MEM_DEVICE, &dF));
                REQUIRE_OK(bsk_set_stream(ctx, fs));
                cached_case(t, ctx, BSK_OP_N, &F, &dF, 1032, 0.0f, all_sms ? 2 : 1, fs);
                CHECK(all_sms ? bsk__hopper_tune.out_split_len == 0 : bsk__hopper_tune.out_split_len > 0);
                REQUIRE_OK(bsk_set_stream(ctx, NULL));
                bsk_bsr_free(&dF);
                cudaStreamDestroy(fs);
            }
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
            bsk_bsr_free(&F);
            bsk_test_dense_free(&FD);
            free(fmask);
            /* 10 rows of 20 block columns on one N tile (10 items): the first rule's L (SPLIT_MIN_LEN 16, with room
               for nnzb / 16 >= 2 parts) cannot split a row of at most 20 blocks: no split sized or reported, direct */
            bsk_bsr W = spmm_random_bsr(10 * 128, 20 * 128, 128, 0.6, BSK_PATTERN_UNIFORM, BSK_F16);
            run_device_case(t, ctx, &W, 256, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
            expect_prep(t, 2, "2L > nb, direct");
            CHECK(bsk__hopper_tune.out_split_len == 0);
            bsk_bsr_free(&W);
        }
        /* captures: a fresh context has no queue yet and cannot create one inside a capture (the prep is captured);
           after an eager call it has one (direct in the graph); each graph replayed three times, each replay checked */
        {
            bsk_context *c2 = NULL;
            REQUIRE_OK(bsk_create(&c2, BSK_BACKEND_CUDA));
            cudaStream_t st = NULL;
            REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
            bsk_bsr dA;
            REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
            /* the workspace sized outside the capture first, as every captured call needs (direct off: no queue made) */
            bsk__hopper_tune.direct = -1;
            cached_case(t, c2, BSK_OP_N, &A, &dA, 264, 0.0f, 1, NULL);
            bsk__hopper_tune = saved;
            REQUIRE_OK(bsk_set_stream(c2, st));
            cached_case(t, c2, BSK_OP_N, &A, &dA, 264, 0.5f, 1, st);
            REQUIRE_OK(bsk_set_stream(c2, NULL));
            cached_case(t, c2, BSK_OP_N, &A, &dA, 264, 0.0f, 2, NULL);
            REQUIRE_OK(bsk_set_stream(c2, st));
            cached_case(t, c2, BSK_OP_N, &A, &dA, 264, 0.5f, 2, st);
            /* the pattern cache on: inside a capture it gives no list, so the captured call runs direct too */
            REQUIRE_OK(bsk_set_pattern_cache(c2, 1));
            cached_case(t, c2, BSK_OP_N, &A, &dA, 264, 0.5f, 2, st);
            REQUIRE_OK(bsk_set_stream(c2, NULL));
            bsk_bsr_free(&dA);
            cudaStreamDestroy(st);
            bsk_destroy(c2);
        }
        bsk_bsr_free(&S);
        bsk_bsr_free(&A);
        bsk_bsr_free(&Z);
        free(mask);
        bsk_test_dense_free(&D);
    }
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}


/* The pattern cache on the b64 / b128 path: the first call on a device pattern (per op and N-tile count) runs the
   prep kernel into the cache; later calls launch the main kernel alone — the queues left at zero by the previous
   launch's last CTA, the long-row split's counters by each row's last part — each against the reference: grids of
   2-5 CTAs (every CTA takes tickets: a queue not reset would skip items), N changing within the same tile count, a
   second pattern in between, op N and op T of one pattern in turn (both lists stay cached), beta != 0 (the direct
   epilogue's configuration on the same list), a pattern that the few-blocks-per-CTA rule splits (a full row among
   short ones) called three times, a forced split on 3 CTAs, calls captured in a CUDA graph (op N: prep kernel inside;
   op T after a cached eager call: its own transpose index built in the graph's memory; each replayed three times),
   and bsk_forget_patterns. */
BSK_TEST(gpu_hopper_spmm_pattern_cache)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk__hopper_tune.direct = -1; /* the calls with the cache off build their lists too (direct mode: its own test) */
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
    cudaStream_t st = NULL;
    REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
    bsk_rng *r = bsk_test_rng();
    for (int b = 128; b >= 64; b /= 2) {
        bsk_bsr A[3], dA[3];
        for (int q = 0; q < 2; q++)
            A[q] = spmm_random_bsr((int64_t)b * bsk_rng_int(r, 12, 20) + 5, (int64_t)b * bsk_rng_int(r, 6, 10) + 3, b,
                                   0.2 + 0.3 * q, q ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, BSK_F16);
        /* 20 block rows of ~2 blocks and one full row of 16: few blocks per CTA, one row far longer */
        {
            const int64_t mb = 20, nb = 16;
            uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
            for (int64_t i = 0; i < mb; i++)
                for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = i == 3 || bsk_rng_uniform(r) < 0.12;
            bsk_dense D = bsk_test_dense(mb * b - 7, nb * b, 0, BSK_F16, r);
            REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A[2]));
            bsk_test_dense_free(&D);
            free(mask);
        }
        for (int q = 0; q < 3; q++) REQUIRE_OK(bsk_bsr_clone(&A[q], BSK_MEM_DEVICE, &dA[q]));
        /* b64 op N: the paired kernel for every call (beta 0 with N >= 512 would take the 64 x 512 tile, whose list is
           another: gpu_hopper_spmm_b64_slot_epi checks its caching) */
        bsk__hopper_tune.b64_mode = b == 64 ? 2 : 0;
        for (int opi = 0; opi < 2; opi++) {
            const bsk_op op = opi ? BSK_OP_T : BSK_OP_N;
            /* N 264 and 392: two N tiles of 256 (b128 / paired b64), the same cached list; 136: one tile, another */
            const int64_t Ns[8] = {264, 392, 264, 392, 392, 136, 136, 264};
            const int which[8] = {0, 0, 1, 1, 0, 0, 0, 0}, prep[8] = {1, 0, 1, 0, 0, 1, 0, 0};
            const int ctas[8] = {0, 3, 0, 5, 2, 0, 4, 2};
            bsk__hopper_tune.split = -1; /* the split length (part of the list's key) would follow the grid size */
            for (int i = 0; i < 8; i++) {
                bsk__hopper_tune.max_ctas = ctas[i];
                /* beta != 0 every other call: the direct epilogue's configuration, the same list (and an item run
                   twice would show) */
                cached_case(t, ctx, op, &A[which[i]], &dA[which[i]], Ns[i], i % 2 ? 0.5f : 0.0f, prep[i], NULL);
            }
            bsk__hopper_tune.max_ctas = 0;
            bsk__hopper_tune.split = 0;
        }
        /* op N and op T of pattern 0 with two N tiles both stayed cached (the entry keeps three lists: the op-N one
           of one tile went out first) */
        bsk__hopper_tune.split = -1;
        cached_case(t, ctx, BSK_OP_N, &A[0], &dA[0], 264, 0.0f, 0, NULL);
        cached_case(t, ctx, BSK_OP_T, &A[0], &dA[0], 264, -1.0f, 0, NULL);
        bsk__hopper_tune.split = 0;
        /* the few-blocks split (b128 only: paired b64 has no split): three calls on the cached list, the row's parts
           combined through counters its last part zeroes */
        for (int rep = 0; rep < 3; rep++) {
            cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, rep == 1 ? 0.25f : 0.0f, rep == 0, NULL);
            if (b == 128 && bsk__hopper_tune.out_split_len <= 0) {
                t->failed++;
                fprintf(stderr, "  few-blocks split: L %d, want > 0\n", bsk__hopper_tune.out_split_len);
            }
        }
        /* a forced split (L = 2, part of the key) on 3 CTAs: split parts, tickets and a cached list together (paired
           b64 has no split: its list, of L = 0, is the one cached above) */
        bsk__hopper_tune.split = 2;
        bsk__hopper_tune.max_ctas = 3;
        for (int rep = 0; rep < 3; rep++)
            cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, rep == 0 && b == 128, NULL);
        bsk__hopper_tune.split = 0;
        bsk__hopper_tune.max_ctas = 0;
        /* the workspace grows outside the capture (an allocation inside one would belong to the graph): one call with
           the cache off, which also drops the entries */
        REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
        cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, 1, NULL);
        REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
        REQUIRE_OK(bsk_set_stream(ctx, st));
        cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, 1, st); /* captured with its prep kernel, replayed */
        REQUIRE_OK(bsk_set_stream(ctx, NULL));
        cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, 1, NULL); /* nothing was cached inside the capture */
        cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, 0, NULL);
        /* op T in a capture after a cached eager call (which sized the workspace for it): the capture builds its own
           transpose index in the graph's memory and its lists in the workspace; the cached entry stays usable */
        cached_case(t, ctx, BSK_OP_T, &A[1], &dA[1], 520, 0.0f, 1, NULL);
        REQUIRE_OK(bsk_set_stream(ctx, st));
        cached_case(t, ctx, BSK_OP_T, &A[1], &dA[1], 520, 0.0f, 1, st);
        REQUIRE_OK(bsk_set_stream(ctx, NULL));
        cached_case(t, ctx, BSK_OP_T, &A[1], &dA[1], 520, 0.0f, 0, NULL);
        REQUIRE_OK(bsk_forget_patterns(ctx));
        cached_case(t, ctx, BSK_OP_N, &A[2], &dA[2], 1032, 0.0f, 1, NULL);
        /* turning the cache on drops what calls without it left: an op-T call with the cache off (its transpose index
           kept in an entry), pattern 0 rewritten in place (every column shifted by one: the same sizes), then the cache
           on — the next call must see the new pattern */
        {
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
            cached_case(t, ctx, BSK_OP_T, &A[0], &dA[0], 264, 0.0f, 1, NULL);
            const int64_t mb0 = bsk_bsr_mb(&A[0]), nb0 = bsk_bsr_nb(&A[0]);
            uint8_t *mask = (uint8_t *)calloc((size_t)(mb0 * nb0), 1);
            for (int64_t i = 0; i < mb0; i++)
                for (int32_t k = A[0].row_ptr[i]; k < A[0].row_ptr[i + 1]; k++) mask[i * nb0 + (A[0].col_idx[k] + 1) % nb0] = 1;
            bsk_dense D = bsk_test_dense(A[0].rows, A[0].cols, 0, BSK_F16, r);
            bsk_bsr S;
            REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &S));
            REQUIRE(S.nnzb == A[0].nnzb);
            REQUIRE(cudaMemcpy((void *)dA[0].row_ptr, S.row_ptr, (size_t)(mb0 + 1) * 4, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemcpy((void *)dA[0].col_idx, S.col_idx, (size_t)S.nnzb * 4, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemcpy(dA[0].values, S.values, (size_t)S.nnzb * b * b * 2, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
            cached_case(t, ctx, BSK_OP_T, &S, &dA[0], 264, 0.0f, 1, NULL);
            bsk_bsr_free(&S);
            bsk_test_dense_free(&D);
            free(mask);
        }
        REQUIRE_OK(bsk_forget_patterns(ctx)); /* before the patterns' memory is freed (and perhaps reused) */
        for (int q = 0; q < 3; q++) {
            bsk_bsr_free(&dA[q]);
            bsk_bsr_free(&A[q]);
        }
    }
    bsk__hopper_tune = saved;
    cudaStreamDestroy(st);
    bsk_destroy(ctx);
}

/* The host reference of the paired tiles' row matching (the prep kernel in spmm_kernel.cuh, session 24): rounds of
   mutual best partners over the units' column sets (set: units x cols bytes, 1 = member), the key shared columns, then
   nearness, then the lower unit; at most 4 rounds; then the pairs in order of their first unit and the units left
   over two by two in index order (an odd one out with `units` as its second). Candidates: every other unit (window 0,
   pair_match 1) or those at most `window` away (16: pair_match 2). pr: 2 x ceil(units / 2) ints. */
static void pair_match_ref(const uint8_t *set, int units, int cols, int window, int *pr)
{
    int *partner = (int *)malloc((size_t)units * sizeof(int)), *np = (int *)malloc((size_t)units * sizeof(int));
    unsigned *best = (unsigned *)malloc((size_t)units * sizeof(unsigned));
    for (int r = 0; r < units; r++) partner[r] = -1;
    for (int round = 0; round < 4; round++) {
        for (int r = 0; r < units; r++) {
            best[r] = 0;
            for (int c = 0; c < units; c++) {
                if (c == r || partner[r] >= 0 || partner[c] >= 0 || (window && (c > r + window || c < r - window)))
                    continue;
                unsigned sc = 0;
                for (int j = 0; j < cols; j++) sc += set[(size_t)r * cols + j] & set[(size_t)c * cols + j];
                const int dist = c > r ? c - r : r - c;
                const unsigned k = sc ? (sc << 11) | ((unsigned)(1023 - dist) << 1) | (c < r ? 1u : 0u) : 0u;
                if (k > best[r]) best[r] = k;
            }
        }
        int any = 0;
        memcpy(np, partner, (size_t)units * sizeof(int));
        for (int r = 0; r < units; r++) {
            if (!best[r]) continue;
            const int d = 1023 - (int)((best[r] >> 1) & 1023u), c = (best[r] & 1u) ? r - d : r + d;
            const int d2 = 1023 - (int)((best[c] >> 1) & 1023u), c2 = (best[c] & 1u) ? c - d2 : c + d2;
            if (best[c] && c2 == r) {
                np[r] = c;
                any = 1;
            }
        }
        memcpy(partner, np, (size_t)units * sizeof(int));
        if (!any) break;
    }
    int n = 0, left = -1;
    for (int r = 0; r < units; r++)
        if (partner[r] > r) {
            pr[2 * n] = r;
            pr[2 * n + 1] = partner[r];
            n++;
        }
    for (int r = 0; r < units; r++)
        if (partner[r] < 0) {
            if (left < 0) left = r;
            else {
                pr[2 * n] = left;
                pr[2 * n + 1] = r;
                n++;
                left = -1;
            }
        }
    if (left >= 0) {
        pr[2 * n] = left;
        pr[2 * n + 1] = units;
    }
    free(partner);
    free(np);
    free(best);
}

/* The units' column sets of a host pattern for pair_match_ref (op N: block rows x block columns; op T: transposed),
   units x cols bytes (calloc'd, 1 = member). */
static uint8_t *pair_unit_sets(const bsk_bsr *A, bsk_op op, int units, int cols)
{
    uint8_t *set = (uint8_t *)calloc((size_t)units * cols, 1);
    for (int64_t i = 0; set && i < bsk_bsr_mb(A); i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            set[op == BSK_OP_N ? (size_t)i * cols + A->col_idx[k] : (size_t)A->col_idx[k] * cols + i] = 1;
    return set;
}

/* Paired b64 tiles with the rows matched by the prep kernel, full (pair_match 1) and windowed (2), op N and op T: the
   pairs it made (tune.pair_rows_out) equal the host reference's in that mode, on a planted pattern (units 2p and a
   random partner, within 11 units, hold the same four columns of their own: the reference must find exactly those
   pairs, which checks the reference too), a uniform pattern with an odd number of units, a skewed one, and (op N) 200
   units x 100 columns and 1024 x 64 (masks of 4 and 2 words, every thread of the prep kernel busy: the matcher's
   limits); 1024 x 96 (3 words) is past the full matching's work limit (rows^2 x words = 3 x 2^20 > 2^21) but within the
   windowed one's: adjacent rows in mode 1, matched in mode 2. Results against the float64 reference (alpha / beta
   random, fp16 / bf16 / fp32 C). The mode through the pattern cache and inside a capture (below). Past the matcher's
   row limit (1030 units) the launcher keeps adjacent rows. The default dispatch: with the pattern cache on and DRAM
   below 4 TB/s the matched pair from d 0.2, else the 64 x 512 tile below d 0.375. */
BSK_TEST(gpu_hopper_spmm_pair_match)
{
    bsk_context *ctx = NULL;
    const char *why = hopper_skip_reason(&ctx);
    if (why) SKIP(why);
    struct bsk_hopper_tune_s saved = bsk__hopper_tune;
    bsk_rng *r = bsk_test_rng();
    const int b = 64;
    int2 *d_pr = NULL;
    REQUIRE(cudaMalloc((void **)&d_pr, 1024 * sizeof(int2)) == cudaSuccess);
    bsk__hopper_tune.b64_mode = 2;
    bsk__hopper_tune.pair_rows_out = d_pr;
    for (int vm = 0; vm < 18; vm++) {
        const int mode = 1 + vm / 9, v = vm % 9; /* every case full, then windowed */
        bsk__hopper_tune.pair_match = mode;
        const bsk_op op = v < 6 && (v & 1) ? BSK_OP_T : BSK_OP_N;
        const int kind = v < 6 ? v >> 1 : v - 3; /* 3, 4: the shapes the matching is for (masks of 4 / 2 words), 5: the
                                                    windowed mode's limit case */
        const int pm_want = kind == 5 && mode == 1 ? 0 : mode;
        /* units (block rows for op N, block columns for op T) and their members */
        const int units = kind == 0 ? 12 : kind == 1 ? 2 * bsk_rng_int(r, 10, 20) + 1 : kind == 2 ? 26 : kind == 3 ? 200 : 1024;
        const int cols = kind == 0 ? 24 : kind <= 2 ? 30 : kind == 3 ? 100 : kind == 4 ? 64 : 96;
        const int64_t mb = op == BSK_OP_N ? units : cols, nb = op == BSK_OP_N ? cols : units;
        const int64_t M = mb * b - (kind == 1 ? 17 : 0), K = nb * b - (kind == 2 ? 5 : 0);
        bsk_bsr A;
        if (kind == 0) {
            /* planted: a random perfect matching of the units, each pair alone on four columns */
            int perm[12];
            for (int i = 0; i < units; i++) perm[i] = i;
            for (int i = units - 1; i > 0; i--) {
                const int j = bsk_rng_int(r, 0, i), x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
            uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
            for (int p = 0; p < units / 2; p++)
                for (int q = 0; q < 2; q++)
                    for (int j = 0; j < 4; j++) {
                        const int u = perm[2 * p + q], m = 4 * p + j;
                        mask[op == BSK_OP_N ? (size_t)u * nb + m : (size_t)m * nb + u] = 1;
                    }
            bsk_dense D = bsk_test_dense(M, K, 0, BSK_F16, r);
            REQUIRE_OK(bsk_bsr_from_mask(&D, b, b, mask, &A));
            bsk_test_dense_free(&D);
            free(mask);
        } else {
            A = spmm_random_bsr(M, K, b, kind == 1 ? 0.3 : kind == 2 ? 0.25 : kind == 5 ? 0.05 : 0.1,
                                kind == 2 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, v & 2 ? BSK_BF16 : BSK_F16);
        }
        uint8_t *set = pair_unit_sets(&A, op, units, cols);
        const int U = (units + 1) / 2;
        int *ref = (int *)malloc((size_t)U * 2 * sizeof(int)), *got = (int *)malloc((size_t)U * 2 * sizeof(int));
        if (pm_want) pair_match_ref(set, units, cols, mode == 2 ? 16 : 0, ref);
        else /* adjacent rows (an odd one out with `units` as its second) */
            for (int i = 0; i < 2 * U; i++) ref[i] = i;
        REQUIRE(cudaMemset(d_pr, 0xff, 1024 * sizeof(int2)) == cudaSuccess);
        const bsk_dtype ct = v % 3 == 0 ? BSK_F32 : A.dtype;
        const float beta = v == 3 ? 0.5f : 0.0f;
        run_device_case_op(t, ctx, op, &A, kind >= 3 ? 64 : 8 * bsk_rng_int(r, 20, 60), 0, 0, ct,
                           0.5f + (float)bsk_rng_uniform(r), beta, 1);
        const char *want = op == BSK_OP_N ? "hopper-wgmma-b64p" : "hopper-wgmma-b64pt";
        if (strcmp(bsk_last_kernel(ctx), want) != 0 || bsk__hopper_tune.out_pair_match != pm_want) {
            t->failed++;
            fprintf(stderr, "  mode %d v %d: last kernel %s (want %s), pair matching %d (want %d)\n", mode, v,
                    bsk_last_kernel(ctx), want, bsk__hopper_tune.out_pair_match, pm_want);
        }
        REQUIRE(cudaMemcpy(got, d_pr, (size_t)U * sizeof(int2), cudaMemcpyDeviceToHost) == cudaSuccess);
        int bad = 0;
        for (int i = 0; i < 2 * U; i++) bad += got[i] != ref[i];
        if (kind == 0) /* planted: every pair is one of the planted ones (both units on the same four columns) */
            for (int u = 0; u < U; u++)
                bad += ref[2 * u] >= ref[2 * u + 1] || ref[2 * u + 1] >= units ||
                       memcmp(set + (size_t)ref[2 * u] * cols, set + (size_t)ref[2 * u + 1] * cols, (size_t)cols) != 0;
        if (bad) {
            t->failed++;
            fprintf(stderr, "  mode %d v %d (%d units): %d pair entries differ from the host's; first pairs got / ref:",
                    mode, v, units, bad);
            for (int u = 0; u < U && u < 6; u++)
                fprintf(stderr, " (%d,%d)/(%d,%d)", got[2 * u], got[2 * u + 1], ref[2 * u], ref[2 * u + 1]);
            fprintf(stderr, "\n");
        }
        free(ref);
        free(got);
        free(set);
        bsk_bsr_free(&A);
    }
    /* through the pattern cache (op N, the pair forced by b64_mode): the key holds the mode, so a list built in one mode
       is not reused by a call asking another (cases 0-3, modes 2, 2, 1, 2: built, reused, built, reused); with no knob
       a cached pattern past the full matching's work limit (1024 x 96) gets the windowed one (4); lists rebuilt on every
       call get it from tune.window_min_flop (set low here): the cache off (5), and on but inside a capture, the list
       built in the graph (6) */
    {
        cudaStream_t cst;
        REQUIRE(cudaStreamCreateWithFlags(&cst, cudaStreamNonBlocking) == cudaSuccess);
        bsk_bsr W = {0}, dW = {0};
        for (int q = 0; q < 7; q++) {
            const int big = q >= 4, knob = q < 4 ? (q == 2 ? 1 : 2) : 0, capture = q == 6;
            const int units = big ? 1024 : 200, cols = big ? 96 : 100, want_pm = knob == 1 ? 1 : 2;
            const int want_prep = q == 0 || q == 2 || q >= 4;
            if (q == 0 || q == 4 || q == 6) REQUIRE_OK(bsk_set_pattern_cache(ctx, 1));
            if (q == 5) REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
            bsk__hopper_tune.pair_match = knob;
            bsk__hopper_tune.window_min_flop = q >= 5 ? 1.0 : 0.0;
            if (q == 0 || q == 4) {
                W = spmm_random_bsr((int64_t)units * b, (int64_t)cols * b, b, big ? 0.05 : 0.1, BSK_PATTERN_UNIFORM,
                                    BSK_F16);
                REQUIRE_OK(bsk_bsr_clone(&W, BSK_MEM_DEVICE, &dW));
            }
            uint8_t *set = pair_unit_sets(&W, BSK_OP_N, units, cols);
            const int U = (units + 1) / 2;
            int *ref = (int *)malloc((size_t)U * 2 * sizeof(int)), *got = (int *)malloc((size_t)U * 2 * sizeof(int));
            pair_match_ref(set, units, cols, want_pm == 2 ? 16 : 0, ref);
            REQUIRE(cudaMemset(d_pr, 0xff, 1024 * sizeof(int2)) == cudaSuccess);
            if (capture) REQUIRE_OK(bsk_set_stream(ctx, cst));
            spmm_gpu_cached_case(t, ctx, BSK_OP_N, &W, &dW, 64, 1.0f, 0.0f, "hopper-wgmma-b64p", &bsk__hopper_tune.out_prep,
                                 want_prep, capture ? cst : NULL);
            if (capture) REQUIRE_OK(bsk_set_stream(ctx, NULL));
            REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
            REQUIRE(cudaMemcpy(got, d_pr, (size_t)U * sizeof(int2), cudaMemcpyDeviceToHost) == cudaSuccess);
            int bad = 0;
            for (int i = 0; i < 2 * U; i++) bad += got[i] != ref[i];
            if (bad || bsk__hopper_tune.out_pair_match != want_pm) {
                t->failed++;
                fprintf(stderr, "  cache case %d: pair matching %d (want %d), %d pair entries differ from the host's\n", q,
                        bsk__hopper_tune.out_pair_match, want_pm, bad);
            }
            free(ref);
            free(got);
            free(set);
            if (q == 3 || q == 6) {
                REQUIRE_OK(bsk_forget_patterns(ctx));
                bsk_bsr_free(&dW);
                bsk_bsr_free(&W);
            }
        }
        REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
        bsk__hopper_tune.window_min_flop = 0.0;
        cudaStreamDestroy(cst);
    }
    /* past the matcher's row limit (windowed asked, as the loop left it): adjacent rows, still right */
    bsk__hopper_tune.pair_rows_out = NULL;
    bsk_bsr L = spmm_random_bsr(1030 * b - 3, 2 * b, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
    run_device_case(t, ctx, &L, 64, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
    if (bsk__hopper_tune.out_pair_match != 0) {
        t->failed++;
        fprintf(stderr, "  1030 block rows: pair matching %d, want 0 (past the limit)\n", bsk__hopper_tune.out_pair_match);
    }
    bsk_bsr_free(&L);
    /* the default dispatch at d 0.3 (N >= 512, >= 2 items of the 64 x 512 tile per CTA): with the pattern cache on and
       DRAM slower than the rule's bound (an H100's 3350 GB/s) the matched pair, twice (the list built, then reused);
       with an H200's 4800 GB/s, or the cache off, the 64 x 512 tile (lists rebuilt on every call get the windowed
       matching, which does not lower the density bound). Then at d 0.5 (the pair on any device), cache off: adjacent
       rows (the windowed matching, PAIR_MATCH_UNCACHED_DEFAULT, only from PAIR_WINDOW_MIN_FLOP: its ~4 us of prep) */
    bsk__hopper_tune = saved;
    bsk__hopper_tune.max_ctas = 8;
    bsk_bsr P = spmm_random_bsr(16 * b, 8 * b, b, 0.3, BSK_PATTERN_UNIFORM, BSK_F16);
    for (int q = 0; q < 4; q++) {
        bsk__hopper_tune.dram_gbs = q < 3 ? 3350 : 4800;
        REQUIRE_OK(bsk_set_pattern_cache(ctx, q != 2));
        run_device_case(t, ctx, &P, 512, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
        const char *want = q < 2 ? "hopper-wgmma-b64p" : "hopper-wgmma-b64";
        if (strcmp(bsk_last_kernel(ctx), want) != 0 || (q < 2 && bsk__hopper_tune.out_pair_match != 1)) {
            t->failed++;
            fprintf(stderr, "  d 0.3, pattern cache %s, DRAM %d GB/s: last kernel %s (want %s), pair matching %d\n",
                    q != 2 ? "on" : "off", bsk__hopper_tune.dram_gbs, bsk_last_kernel(ctx), want,
                    bsk__hopper_tune.out_pair_match);
        }
    }
    bsk_bsr_free(&P);
    bsk__hopper_tune.dram_gbs = 0;
    REQUIRE_OK(bsk_set_pattern_cache(ctx, 0));
    bsk_bsr H = spmm_random_bsr(16 * b, 8 * b, b, 0.5, BSK_PATTERN_UNIFORM, BSK_F16);
    run_device_case(t, ctx, &H, 512, 0, 0, BSK_F16, 1.0f, 0.0f, 1);
    if (strcmp(bsk_last_kernel(ctx), "hopper-wgmma-b64p") != 0 || bsk__hopper_tune.out_pair_match != 0) {
        t->failed++;
        fprintf(stderr, "  d 0.5, pattern cache off: last kernel %s (want hopper-wgmma-b64p), pair matching %d (want 0)\n",
                bsk_last_kernel(ctx), bsk__hopper_tune.out_pair_match);
    }
    bsk_bsr_free(&H);
    cudaFree(d_pr);
    bsk__hopper_tune = saved;
    bsk_destroy(ctx);
}

#else /* built without CUDA: the tests exist and skip */
BSK_TEST(gpu_hopper_spmm_dtypes_blocks) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_op_t) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_b64_modes) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_long_rows_prefetch) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_split) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_b64_wide_split) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_partition_queues) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_l2_partition_map) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_pattern_cache) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_pair_match) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_spmm_direct) { SKIP("built without CUDA"); }
#endif
