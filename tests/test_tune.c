/* test_tune.c — the autotuner (src/core/tune.c, bsk_cuda_tune_spmm in src/cuda/backend.cu):
   - tune files: a round trip is exact; every malformed form (header, words, numbers out of range, too many
     classes, long lines, NUL bytes, another device) is refused with the documented status and the table kept;
     BSK_TUNE_FILE is read by bsk_create;
   - bsk_tune_spmm on the CPU: C = alpha·op(A)·B + beta·C_in, bad input refused with nothing written;
   - on the GPU: the tuner leaves C = alpha·A·B + beta·C_in (beta != 0, so extra timed runs on C would show), records
     the class, and the next bsk_spmm of that class runs the tuned kernel and is right; a table entry forcing the
     small-block kernel below its default density crossover runs it and is right. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"
#ifdef BSK_WITH_CUDA
#include "spmm_gpu_util.h"
#endif

/* A scratch file holding `text`; its path in buf. */
static const char *tune_file(char *buf, size_t n, const char *tag, const char *text, size_t len)
{
    snprintf(buf, n, "/tmp/bsk_test_tune_%s_%llu.txt", tag, (unsigned long long)bsk_rng_next(bsk_test_rng()));
    FILE *f = fopen(buf, "wb");
    if (!f) return NULL;
    size_t w = fwrite(text, 1, len, f);
    fclose(f);
    return w == len ? buf : NULL;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = (char *)calloc(1, 1 << 16);
    *len = b ? fread(b, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    return b;
}

static const char good[] = "bsk-tune 2 cpu\n"
                           "spmm n 32 32 f16 f16 12 12 12 1 beta0 hopper-small\n"
                           "spmm t 128 128 bf16 f32 13 13 13 5 beta0 hopper\n"
                           "spmm n 16 16 f32 f32 10 9 11 20 beta1 simt\n"
                           "spmm n 64 32 f16 bf16 0 62 1 0 beta0 portable\n";

/* Load `text` into ctx (it must hold `entries` classes then), save the table, and check the file reads `want`. */
static void load_save_check(bsk_test_ctx *t, bsk_context *ctx, const char *tag, const char *text, int entries,
                            const char *want)
{
    char p1[128], p2[160];
    REQUIRE(tune_file(p1, sizeof p1, tag, text, strlen(text)));
    REQUIRE_OK(bsk_tune_load(ctx, p1));
    CHECK(bsk_tune_entries(ctx) == entries);
    snprintf(p2, sizeof p2, "%s.out", p1);
    REQUIRE_OK(bsk_tune_save(ctx, p2));
    size_t len = 0;
    char *back = read_all(p2, &len);
    REQUIRE(back);
    if (strcmp(back, want) != 0) fprintf(stderr, "  %s: saved\n%s  wanted\n%s", tag, back, want);
    CHECK(len == strlen(want) && strcmp(back, want) == 0);
    free(back);
    remove(p1);
    remove(p2);
}

BSK_TEST(tune_file_round_trip)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    CHECK(bsk_tune_entries(ctx) == 0);
    load_save_check(t, ctx, "rt", good, 4, good);
    /* comments, blank lines, CRLF, repeated spaces; a class given twice keeps the later family */
    load_save_check(t, ctx, "loose",
                    "bsk-tune 2 cpu\r\n# comment\r\n\r\nspmm  n 32 32 f16 f16 12 12 12 1 beta0 portable\r\n"
                    "spmm n 32 32\tf16 f16 12 12 12 1 beta0 hopper-small\r\n",
                    1, "bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta0 hopper-small\n");
    /* beta == 0 and beta != 0 are different classes: both kept, in file order */
    static const char betas[] = "bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta0 portable\n"
                                "spmm n 32 32 f16 f16 12 12 12 1 beta1 hopper-small\n";
    load_save_check(t, ctx, "betas", betas, 2, betas);
    /* a header alone is a valid, empty table */
    load_save_check(t, ctx, "empty", "bsk-tune 2 cpu\n", 0, "bsk-tune 2 cpu\n");
    bsk_tune_clear(ctx);
    CHECK(bsk_tune_entries(ctx) == 0);
    bsk_destroy(ctx);
}

BSK_TEST(tune_file_malformed)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    char p[128];
    REQUIRE(tune_file(p, sizeof p, "base", good, sizeof good - 1));
    REQUIRE_OK(bsk_tune_load(ctx, p));
    static const struct { const char *text; bsk_status want; } bad[] = {
        {"", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 3 cpu\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tun 1 cpu\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 NVIDIA H100 80GB HBM3\nspmm n 32 32 f16 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_UNSUPPORTED},
        {"bsk-tune 2 cpu\nspmm x 32 32 f16 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nsddmm n 32 32 f16 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta2 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 hopper beta0\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 1 cpu\nspmm n 32 32 f16 f16 12 12 12 1 hopper\n", BSK_ERR_INVALID_ARGUMENT}, /* version 1 */
        {"bsk-tune 2 cpu\nspmm n 0 32 f16 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 1025 f16 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f64 f16 12 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 63 12 12 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 21 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 -1 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 +1 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta0 none\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta0 gpu\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 12 1 beta0 hopper extra\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\nspmm n 32 32 f16 f16 12 12 0x1 1 beta0 hopper\n", BSK_ERR_INVALID_ARGUMENT},
        {"bsk-tune 2 cpu\n spmm n 32 32 f16 f16 12 12 12 1 beta0 hopper trailing-good-then-bad\n", BSK_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(tune_file(p, sizeof p, "bad", bad[i].text, strlen(bad[i].text)));
        bsk_status s = bsk_tune_load(ctx, p);
        if (s != bad[i].want) fprintf(stderr, "  case %zu: %s\n", i, bsk_status_string(s));
        CHECK(s == bad[i].want);
        CHECK(bsk_tune_entries(ctx) == 4); /* unchanged */
    }
    /* a NUL byte inside a line, a line of 256 characters, 257 distinct classes */
    static const char nul[] = "bsk-tune 2 cpu\nspmm n 32 32 f16\0 f16 12 12 12 1 beta0 hopper\n";
    REQUIRE(tune_file(p, sizeof p, "nul", nul, sizeof nul - 1));
    CHECK_STATUS(bsk_tune_load(ctx, p), BSK_ERR_INVALID_ARGUMENT);
    char *big = (char *)malloc(64 * 1024);
    REQUIRE(big);
    int n = snprintf(big, 64 * 1024, "bsk-tune 2 cpu\n# ");
    for (int i = 0; i < 254; i++) big[n++] = 'x';
    big[n++] = '\n';
    REQUIRE(tune_file(p, sizeof p, "long", big, (size_t)n));
    CHECK_STATUS(bsk_tune_load(ctx, p), BSK_ERR_INVALID_ARGUMENT);
    n = snprintf(big, 64 * 1024, "bsk-tune 2 cpu\n");
    for (int i = 0; i <= BSK_TUNE_MAX_ENTRIES; i++)
        n += snprintf(big + n, 64 * 1024 - (size_t)n, "spmm n %d 32 f16 f16 12 12 12 1 beta0 simt\n", 1 + i);
    REQUIRE(tune_file(p, sizeof p, "many", big, (size_t)n));
    CHECK_STATUS(bsk_tune_load(ctx, p), BSK_ERR_INVALID_ARGUMENT);
    /* exactly the maximum is fine */
    n = snprintf(big, 64 * 1024, "bsk-tune 2 cpu\n");
    for (int i = 0; i < BSK_TUNE_MAX_ENTRIES; i++)
        n += snprintf(big + n, 64 * 1024 - (size_t)n, "spmm n %d 32 f16 f16 12 12 12 1 beta0 simt\n", 1 + i);
    REQUIRE(tune_file(p, sizeof p, "max", big, (size_t)n));
    CHECK_STATUS(bsk_tune_load(ctx, p), BSK_SUCCESS);
    CHECK(bsk_tune_entries(ctx) == BSK_TUNE_MAX_ENTRIES);
    free(big);
    remove(p);
    CHECK_STATUS(bsk_tune_load(ctx, "/nonexistent/dir/tune.txt"), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_tune_save(ctx, "/nonexistent/dir/tune.txt"), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_tune_load(ctx, NULL), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_tune_load(NULL, p), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_tune_save(ctx, NULL), BSK_ERR_NULL_POINTER);
    CHECK(bsk_tune_entries(NULL) == 0);
    bsk_tune_clear(NULL);
    bsk_destroy(ctx);
}

BSK_TEST(tune_env_file)
{
    char p[128];
    REQUIRE(tune_file(p, sizeof p, "env", good, sizeof good - 1));
    const char *old = getenv("BSK_TUNE_FILE");
    char *saved = old ? strdup(old) : NULL;
    setenv("BSK_TUNE_FILE", p, 1);
    bsk_context *ctx;
    bsk_status s = bsk_create(&ctx, BSK_BACKEND_CPU);
    if (!s) {
        CHECK(bsk_tune_entries(ctx) == 4);
        bsk_destroy(ctx);
    }
    setenv("BSK_TUNE_FILE", "/nonexistent/tune.txt", 1); /* skipped silently */
    CHECK_STATUS(bsk_create(&ctx, BSK_BACKEND_CPU), BSK_SUCCESS);
    if (ctx) { CHECK(bsk_tune_entries(ctx) == 0); bsk_destroy(ctx); }
    if (saved) { setenv("BSK_TUNE_FILE", saved, 1); free(saved); }
    else unsetenv("BSK_TUNE_FILE");
    REQUIRE_OK(s);
    remove(p);
}

/* The parser on arbitrary bytes never reads past len (run under ASan in make test-asan) and refuses NUL-free junk. */
BSK_TEST(tune_parse_arbitrary)
{
    bsk_rng *r = bsk_test_rng();
    for (int it = 0; it < 2000; it++) {
        size_t n = (size_t)bsk_rng_int(r, 0, 200);
        char *b = (char *)malloc(n ? n : 1);
        REQUIRE(b);
        memcpy(b, good, n < sizeof good - 1 ? n : sizeof good - 1);
        for (size_t i = 0; i < n; i++)
            if (i >= sizeof good - 1 || bsk_rng_int(r, 0, 15) == 0) b[i] = (char)bsk_rng_int(r, 0, 255);
        struct bsk__tune_table *tab = (struct bsk__tune_table *)0x1;
        bsk_status s = bsk__tune_parse(b, n, "cpu", &tab);
        CHECK(s == BSK_SUCCESS || s == BSK_ERR_INVALID_ARGUMENT || s == BSK_ERR_UNSUPPORTED);
        CHECK(s == BSK_SUCCESS || tab == NULL);
        free(tab);
        free(b);
    }
}

BSK_TEST(tune_spmm_cpu)
{
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CPU));
    bsk_rng *r = bsk_test_rng();
    bsk_bsr A;
    REQUIRE_OK(bsk_bsr_random(96, 80, 16, 16, 0.3, BSK_PATTERN_UNIFORM, bsk_rng_next(r), BSK_F32, &A));
    bsk_dense B = bsk_test_dense(80, 40, 3, BSK_F32, r), C = bsk_test_dense(96, 40, 1, BSK_F32, r),
              C0 = bsk_test_dense(96, 40, 1, BSK_F32, r);
    REQUIRE(B.data && C.data && C0.data);
    memcpy(C0.data, C.data, (size_t)(96 * 41) * 4);
    double *ref = (double *)malloc(sizeof(double) * 96 * 40);
    REQUIRE(ref);
    bsk_ref_spmm(BSK_OP_N, 0.75, &A, &B, -0.5, &C0, ref);
    bsk_tune_result res;
    memset(&res, 0x55, sizeof res);
    REQUIRE_OK(bsk_tune_spmm(ctx, BSK_OP_N, 0.75f, &A, &B, -0.5f, &C, 3, &res));
    CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(BSK_F32, BSK_F32));
    CHECK(strcmp(res.family, "cpu") == 0 && strcmp(res.kernel, "cpu") == 0);
    CHECK(bsk_tune_entries(ctx) == 0);
    /* bad input: the documented status, C untouched */
    memcpy(C.data, C0.data, (size_t)(96 * 41) * 4);
    CHECK_STATUS(bsk_tune_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C, 0, NULL), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_tune_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C, 1001, NULL), BSK_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(bsk_tune_spmm(ctx, BSK_OP_T, 1.0f, &A, &B, 0.0f, &C, 1, NULL), BSK_ERR_SHAPE_MISMATCH);
    CHECK_STATUS(bsk_tune_spmm(NULL, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C, 1, NULL), BSK_ERR_NULL_POINTER);
    CHECK_STATUS(bsk_tune_spmm(ctx, (bsk_op)7, 1.0f, &A, &B, 0.0f, &C, 1, NULL), BSK_ERR_INVALID_ARGUMENT);
    if (A.nnzb > 1) { /* unsorted columns in row 0 */
        int32_t c0 = A.col_idx[0];
        int row0 = A.row_ptr[1] - A.row_ptr[0];
        if (row0 > 1) {
            A.col_idx[0] = A.col_idx[1];
            A.col_idx[1] = c0;
            CHECK_STATUS(bsk_tune_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C, 1, NULL), BSK_ERR_INVALID_BSR);
            A.col_idx[1] = A.col_idx[0];
            A.col_idx[0] = c0;
        }
    }
    CHECK(memcmp(C.data, C0.data, (size_t)(96 * 41) * 4) == 0);
    free(ref);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_test_dense_free(&C0);
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
}

#ifdef BSK_WITH_CUDA
/* One device SpMM case through bsk_tune_spmm with beta != 0: C must equal alpha·A·B + beta·C_in once. */
static void tune_gpu_case(bsk_test_ctx *t, bsk_context *ctx, bsk_op op, int b, double d, bsk_tune_result *res)
{
    const int64_t M = 384, K = 512, N = 256; /* C = alpha op(A) B + beta C: M x N, op(A) M x K */
    bsk_rng *r = bsk_test_rng();
    bsk_bsr A = spmm_random_bsr(op == BSK_OP_N ? M : K, op == BSK_OP_N ? K : M, b, d, BSK_PATTERN_UNIFORM, BSK_F16), dA;
    REQUIRE(A.row_ptr);
    bsk_dense B = bsk_test_dense(K, N, 0, BSK_F16, r), C = bsk_test_dense(M, N, 0, BSK_F16, r);
    REQUIRE(B.data && C.data);
    double *ref = (double *)malloc(sizeof(double) * (size_t)(M * N));
    REQUIRE(ref);
    bsk_ref_spmm(op, 1.25, &A, &B, 0.5, &C, ref);
    REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
    bsk_dense dB = B, dC = C;
    dB.mem = dC.mem = BSK_MEM_DEVICE;
    dB.data = spmm_dev_copy(B.data, spmm_dense_bytes(&B));
    dC.data = spmm_dev_copy(C.data, spmm_dense_bytes(&C));
    REQUIRE(dB.data && dC.data);
    REQUIRE_OK(bsk_tune_spmm(ctx, op, 1.25f, &dA, &dB, 0.5f, &dC, 3, res));
    REQUIRE_OK(bsk_synchronize(ctx));
    REQUIRE_OK(bsk_cuda_memcpy(C.data, dC.data, spmm_dense_bytes(&C), 0, 1));
    CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(BSK_F16, BSK_F16));
    /* the winner is the default's family or one measured faster; the default dispatch was timed apart (noise) */
    CHECK(isfinite(res->ms) && res->ms > 0 && isfinite(res->default_ms) && res->ms <= res->default_ms * 1.5);
    CHECK(res->kernel[0] && res->default_kernel[0] && strcmp(res->family, "cpu") != 0);
    /* the class (beta != 0 is part of it) is recorded: the next bsk_spmm of this case with another nonzero beta
       runs the tuned kernel and is right */
    bsk_dense P = bsk_test_dense(M, N, 0, BSK_F16, r);
    REQUIRE(P.data);
    REQUIRE_OK(bsk_cuda_memcpy(dC.data, P.data, spmm_dense_bytes(&P), 1, 0));
    bsk_ref_spmm(op, 1.0, &A, &B, -0.25, &P, ref);
    REQUIRE_OK(bsk_spmm(ctx, op, 1.0f, &dA, &dB, -0.25f, &dC));
    CHECK(strcmp(bsk_last_kernel(ctx), res->kernel) == 0);
    REQUIRE_OK(bsk_synchronize(ctx));
    REQUIRE_OK(bsk_cuda_memcpy(C.data, dC.data, spmm_dense_bytes(&C), 0, 1));
    CHECK_REL(bsk_rel_err_dense(&C, ref), bsk_tol(BSK_F16, BSK_F16));
    fprintf(stderr, "  op %s b %d d %.2f: default %s %.4f ms, tuned %s (%s) %.4f ms\n", op == BSK_OP_N ? "n" : "t", b, d,
            res->default_kernel,
            res->default_ms, res->kernel, res->family, res->ms);
    bsk_test_dense_free(&P);
    bsk_cuda_free(dB.data);
    bsk_cuda_free(dC.data);
    bsk_bsr_free(&dA);
    bsk_test_dense_free(&B);
    bsk_test_dense_free(&C);
    bsk_bsr_free(&A);
    free(ref);
}

BSK_TEST(gpu_tune_spmm)
{
    NEED_GPU();
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    static const struct { bsk_op op; int b; double d; } cases[] = {
        {BSK_OP_N, 128, 0.25}, {BSK_OP_N, 64, 0.5}, {BSK_OP_N, 32, 0.05}, {BSK_OP_N, 16, 0.3}, {BSK_OP_T, 128, 0.25}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases; i++) {
        bsk_tune_result res;
        tune_gpu_case(t, ctx, cases[i].op, cases[i].b, cases[i].d, &res);
        CHECK(bsk_tune_entries(ctx) == i + 1); /* op T is a class of its own */
    }
    /* save + load on the device context: the same classes come back */
    char p[128];
    snprintf(p, sizeof p, "/tmp/bsk_test_tune_gpu_%llu.txt", (unsigned long long)bsk_rng_next(bsk_test_rng()));
    REQUIRE_OK(bsk_tune_save(ctx, p));
    bsk_context *c2;
    REQUIRE_OK(bsk_create(&c2, BSK_BACKEND_CUDA));
    REQUIRE_OK(bsk_tune_load(c2, p));
    CHECK(bsk_tune_entries(c2) == ncases);
    bsk_destroy(c2);
    remove(p);
    bsk_destroy(ctx);
}

/* A table entry for the small-block kernel below its default density crossover (b32: 0.07): bsk_spmm runs it
   (not the portable kernel the default picks) and is right. */
BSK_TEST(gpu_tune_forced_family)
{
    NEED_GPU();
    bsk_context *ctx;
    REQUIRE_OK(bsk_create(&ctx, BSK_BACKEND_CUDA));
    bsk_device_info info;
    REQUIRE_OK(bsk_device_query(&info));
    const int hopper = info.cc_major == 9 && info.cc_minor == 0 && strstr(info.arch_list, "sm_90a");
    /* M = 384 (floor log2 8), N = 256 (8), K = 512 (9), b32 at d 0.05 (step 1) */
    char text[512], p[128];
    snprintf(text, sizeof text, "bsk-tune 2 %s\nspmm n 32 32 f16 f16 8 8 9 1 beta0 hopper-small\n", info.name);
    snprintf(p, sizeof p, "/tmp/bsk_test_tune_forced_%llu.txt", (unsigned long long)bsk_rng_next(bsk_test_rng()));
    FILE *f = fopen(p, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
    REQUIRE_OK(bsk_tune_load(ctx, p));
    remove(p);
    bsk_bsr A = spmm_random_bsr(384, 512, 32, 0.05, BSK_PATTERN_UNIFORM, BSK_F16);
    REQUIRE(A.row_ptr);
    /* where the small kernel cannot run (not sm_90a), the default order follows: the portable kernel */
    double err = spmm_gpu_case(t, ctx, BSK_OP_N, &A, 256, 0, 0, BSK_F16, 1.0f, 0.0f,
                               hopper ? "hopper-wgmma-b32s" : "cuda-mma");
    CHECK_REL(err, bsk_tol(BSK_F16, BSK_F16));
    /* without the table, the default at this size (4 items of 256 x 128) is the portable kernel */
    bsk_tune_clear(ctx);
    err = spmm_gpu_case(t, ctx, BSK_OP_N, &A, 256, 0, 0, BSK_F16, 1.0f, 0.0f, "cuda-mma");
    CHECK_REL(err, bsk_tol(BSK_F16, BSK_F16));
    bsk_bsr_free(&A);
    bsk_destroy(ctx);
}
#endif
