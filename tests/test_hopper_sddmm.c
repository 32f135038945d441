/* test_hopper_sddmm.c — the Hopper (sm_90a) TMA + wgmma SDDMM, against the float64 reference of tests/util.c.
   Every test SKIPs without a CUDA device or on a device that is not compute capability 9.0.
   Each case draws fresh random X, Y (and old values when beta != 0; NaN poison in every value, padding
   included, when beta = 0), runs on the device through the dispatcher or the Hopper family directly, and
   checks: the Hopper kernel ran, every element against the reference (norm-wise and element-wise), padding
   entries of partial blocks exactly 0, and (where asked) a second run bitwise equal to the first — the D-split
   reduction adds partial tiles in a fixed order. Knobs of src/cuda/hopper/sddmm_tune.h force the split, small
   persistent grids and both b = 64 tiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "../src/internal.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>
#include "cuda/hopper/sddmm_tune.h"

bsk_status bsk__cuda_sddmm_family(bsk_context *ctx, int family, float alpha, const bsk_dense *X, const bsk_dense *Y,
                                  float beta, bsk_bsr *out);

/* NULL when the Hopper path can run here; otherwise why the test skips. */
static const char *hs_skip_reason(bsk_context **ctx)
{
    bsk_device_info info;
    if (bsk_device_query(&info) != BSK_SUCCESS) return "no CUDA device";
    if (info.cc_major != 9 || info.cc_minor != 0) return "device is not compute capability 9.0";
    if (bsk_create(ctx, BSK_BACKEND_CUDA) != BSK_SUCCESS) return "no CUDA context";
    return NULL;
}

static const struct bsk_hopper_sddmm_tune_s tune_default = {0};

typedef struct {
    int64_t m, k, d;     /* out m x k, X m x d, Y k x d */
    int32_t b;
    bsk_dtype in, out;
    float alpha, beta;
    double density;
    bsk_pattern pat;
    int64_t padx, pady;  /* ld - cols (ld * 2 must stay a multiple of 16 for the Hopper path) */
    int64_t offx;        /* X's device base shifted by this many elements */
    int family;          /* -1: bsk_sddmm (dispatcher); 0: the Hopper family directly */
    int reps;            /* 2: run twice, results bitwise equal */
    const char *want;    /* expected kernel-name prefix ("hopper-sddmm"), or NULL                        */
    int want_exact;      /* 1: the kernel name must equal `want`                                         */
    int want_not;        /* 1: the kernel must NOT be a Hopper one (a declined case)                      */
} hs_case;

static const char *dtn(bsk_dtype t) { return t == BSK_F32 ? "f32" : t == BSK_F16 ? "f16" : "bf16"; }

static void hs_describe(const hs_case *c)
{
    fprintf(stderr,
            "    case: m %lld k %lld d %lld b %d %s->%s alpha %g beta %g density %.2f %s padx %lld pady %lld offx %lld "
            "family %d\n",
            (long long)c->m, (long long)c->k, (long long)c->d, c->b, dtn(c->in), dtn(c->out), c->alpha, c->beta,
            c->density, c->pat == BSK_PATTERN_SKEWED ? "skewed" : "uniform", (long long)c->padx, (long long)c->pady,
            (long long)c->offx, c->family);
}

static hs_case hs_default(int32_t b, bsk_dtype in, bsk_dtype out)
{
    hs_case c;
    memset(&c, 0, sizeof c);
    c.b = b;
    c.m = 2 * b + b / 2 + 3; /* partial last block row    */
    c.k = 3 * b + 5;         /* partial last block column */
    c.d = 200;               /* not a multiple of 64      */
    c.in = in;
    c.out = out;
    c.alpha = 0.75f;
    c.density = 0.6;
    c.family = -1;
    c.reps = 1;
    c.want = "hopper-sddmm";
    return c;
}

/* Upload host dense H to the device at an offset of `off` elements; the allocation is returned in *base. */
static int dense_up(const bsk_dense *H, int64_t off, bsk_dense *D, void **base)
{
    const size_t es = bsk_dtype_size(H->dtype), bytes = (size_t)(H->rows * H->ld) * es;
    *D = *H;
    D->mem = BSK_MEM_DEVICE;
    *base = NULL;
    if (cudaMalloc(base, bytes + (size_t)off * es + 16) != cudaSuccess) return 0;
    D->data = (char *)*base + off * (int64_t)es;
    return cudaMemcpy(D->data, H->data, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

/* Element-wise: the output rounding of `out` on |ref| plus a small absolute term for fp32 accumulation. */
static int64_t count_bad(const void *got, bsk_dtype out, const double *ref, int64_t n, int64_t d)
{
    const double rel = out == BSK_BF16 ? 1.0 / 128 : out == BSK_F16 ? 1.0 / 1024 : 1e-5;
    const double abs_tol = 2e-4 * sqrt((double)d) + 1e-6;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = bsk__load(got, out, i);
        if (!(fabs(g - ref[i]) <= rel * fabs(ref[i]) + abs_tol)) bad++;
    }
    return bad;
}

/* Run one case on pattern P (host, values of dtype c->out) or, when P is NULL, on a random pattern. */
static void hs_run(bsk_test_ctx *t, bsk_context *ctx, const hs_case *c, const bsk_bsr *P)
{
    const int failed0 = t->failed;
    bsk_rng *rng = bsk_test_rng();
    bsk_bsr S, dS;
    memset(&S, 0, sizeof S);
    memset(&dS, 0, sizeof dS);
    if (P) {
        S = *P;
    } else {
        bsk_status s = bsk_bsr_random(c->m, c->k, c->b, c->b, c->density, c->pat, bsk_rng_next(rng), c->out, &S);
        CHECK_STATUS(s, BSK_SUCCESS);
        if (s) return;
    }
    const int64_t bb = (int64_t)S.block_rows * S.block_cols, nv = S.nnzb * bb;
    const size_t es = bsk_dtype_size(c->out), vbytes = (size_t)nv * es;
    void *v0 = malloc(vbytes + 16), *got = malloc(vbytes + 16), *first = malloc(vbytes + 16);
    double *ref = (double *)malloc((size_t)(nv + 1) * sizeof *ref);
    bsk_dense X = bsk_test_dense(c->m, c->d, c->padx, c->in, rng), Y = bsk_test_dense(c->k, c->d, c->pady, c->in, rng);
    /* the values the run starts from: random (beta != 0) or NaN everywhere, padding included (beta = 0) */
    bsk_bsr H = S;
    H.values = v0;
    for (int64_t i = 0; i < nv; i++)
        bsk__store(v0, c->out, i, c->beta != 0.0f ? bsk__load(S.values, c->out, i) : NAN);
    bsk_ref_sddmm(c->alpha, &X, &Y, c->beta, &H, ref);
    bsk_dense dX, dY;
    void *xb = NULL, *yb = NULL;
    int ok = bsk_bsr_clone(&S, BSK_MEM_DEVICE, &dS) == BSK_SUCCESS && dense_up(&X, c->offx, &dX, &xb) &&
             dense_up(&Y, 0, &dY, &yb);
    CHECK(ok);
    bsk_status s = BSK_SUCCESS;
    for (int rep = 0; ok && rep < c->reps && !s; rep++) {
        if (cudaMemcpy(dS.values, v0, vbytes, cudaMemcpyHostToDevice) != cudaSuccess) s = BSK_ERR_CUDA;
        if (!s) s = c->family < 0 ? bsk_sddmm(ctx, c->alpha, &dX, &dY, c->beta, &dS)
                                  : bsk__cuda_sddmm_family(ctx, c->family, c->alpha, &dX, &dY, c->beta, &dS);
        if (!s) s = bsk_synchronize(ctx);
        if (!s && cudaMemcpy(rep ? got : first, dS.values, vbytes, cudaMemcpyDeviceToHost) != cudaSuccess)
            s = BSK_ERR_CUDA;
    }
    CHECK_STATUS(s, BSK_SUCCESS);
    if (ok && !s) {
        const char *kn = bsk_last_kernel(ctx);
        const int is_hopper = strncmp(kn, "hopper-sddmm", 12) == 0;
        if ((c->want && strncmp(kn, c->want, strlen(c->want)) != 0) || (c->want && c->want_exact && strcmp(kn, c->want)) ||
            (c->want_not && is_hopper)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: ran kernel '%s', want %s'%s'\n", __FILE__, __LINE__, kn, c->want_not ? "not " : "",
                    c->want ? c->want : "hopper-sddmm");
        }
        if (c->reps > 1) CHECK(memcmp(first, got, vbytes) == 0);
        const void *res = c->reps > 1 ? got : first;
        const double err = bsk_rel_err(res, c->out, ref, nv), tol = bsk_tol(c->in, c->out);
        if (!(err <= tol)) {
            t->failed++;
            fprintf(stderr, "  %s:%d: kernel %s: rel err %.3e > %.1e\n", __FILE__, __LINE__, kn, err, tol);
        }
        const int64_t bad = count_bad(res, c->out, ref, nv, c->d);
        if (bad) {
            t->failed++;
            fprintf(stderr, "  %s:%d: kernel %s: %lld of %lld entries off the reference\n", __FILE__, __LINE__, kn,
                    (long long)bad, (long long)nv);
        }
        /* padding entries of partial blocks are exactly 0 (they started as NaN or random) */
        int64_t pad_bad = 0;
        const int64_t mb = bsk_bsr_mb(&S);
        for (int64_t i = 0; i < mb; i++)
            for (int32_t p = S.row_ptr[i]; p < S.row_ptr[i + 1]; p++)
                for (int32_t r = 0; r < S.block_rows; r++)
                    for (int32_t q = 0; q < S.block_cols; q++)
                        if (i * S.block_rows + r >= S.rows || (int64_t)S.col_idx[p] * S.block_cols + q >= S.cols)
                            pad_bad += bsk__load(res, c->out, (int64_t)p * bb + (int64_t)r * S.block_cols + q) != 0.0f;
        CHECK(pad_bad == 0);
    }
    if (t->failed != failed0) hs_describe(c);
    cudaFree(xb);
    cudaFree(yb);
    bsk_bsr_free(&dS);
    if (!P) bsk_bsr_free(&S);
    bsk_test_dense_free(&X);
    bsk_test_dense_free(&Y);
    free(v0);
    free(got);
    free(first);
    free(ref);
}

/* Both block sizes, both input dtypes, F32 and in-dtype output, beta 0 (NaN poison) and beta != 0, tails in
   M, K and D, padded leading dimensions, an offset X base, through the dispatcher and the family hook. */
BSK_TEST(gpu_hopper_sddmm_dtypes_blocks)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk__hopper_sddmm_tune = tune_default;
    const bsk_dtype ins[2] = {BSK_F16, BSK_BF16};
    int n = 0;
    for (int b = 64; b <= 128; b *= 2)
        for (int ii = 0; ii < 2; ii++)
            for (int o = 0; o < 2; o++)
                for (int z = 0; z < 2; z++, n++) {
                    hs_case c = hs_default(b, ins[ii], o ? ins[ii] : BSK_F32);
                    c.beta = z ? 0.5f : 0.0f;
                    c.alpha = z ? -1.25f : 0.75f;
                    c.padx = (n % 3) * 8;
                    c.pady = (n % 2) * 16;
                    c.offx = (n % 4 == 1) ? 8 : 0; /* 16 bytes: still TMA-aligned */
                    c.family = n % 2 ? 0 : -1;
                    c.reps = 2;
                    hs_run(t, ctx, &c, NULL);
                }
    bsk_destroy(ctx);
}

/* b = 64: both tiles (4 blocks per item, 64 x 256; 8 blocks, 64 x 512), short items of every length (skewed
   rows), D a multiple of 64 and not. */
BSK_TEST(gpu_hopper_sddmm_b64_tiles)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    for (int gb = 4; gb <= 8; gb += 4)
        for (int v = 0; v < 2; v++) {
            bsk__hopper_sddmm_tune = tune_default;
            bsk__hopper_sddmm_tune.b64_blocks = gb;
            hs_case c = hs_default(64, v ? BSK_BF16 : BSK_F16, v ? BSK_F32 : BSK_F16);
            c.m = 64 * 12 + 7;
            c.k = 64 * 21;
            c.d = v ? 256 : 136;
            c.density = 0.4;
            c.pat = BSK_PATTERN_SKEWED;
            c.beta = v ? 0.0f : -0.5f;
            c.want = gb == 8 ? "hopper-sddmm-b64w" : "hopper-sddmm-b64";
            c.want_exact = 1;
            c.reps = 2;
            hs_run(t, ctx, &c, NULL);
        }
    bsk__hopper_sddmm_tune = tune_default;
    bsk_destroy(ctx);
}

/* The column-group item order (knob col_groups; automatic only with long rows and >= 64 MB of Y, see
   sddmm_hopper.cu): G = 4, 3, 5 groups (the block columns not a multiple of G, some groups of a row empty) and G = 24
   (more groups than block columns: one-column groups, empty groups past the last column), uniform and skewed rows,
   b = 64 (both tile widths) and 128, beta 0 and not, a grid of 3 CTAs (many items each) — every value against the
   reference, twice bitwise equal. */
BSK_TEST(gpu_hopper_sddmm_col_groups)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    const int groups[4] = {4, 3, 5, 24};
    for (int b = 64; b <= 128; b *= 2)
        for (int v = 0; v < 4; v++) {
            bsk__hopper_sddmm_tune = tune_default;
            bsk__hopper_sddmm_tune.col_groups = groups[v];
            if (b == 64 && v == 1) bsk__hopper_sddmm_tune.b64_blocks = 4;
            if (v == 2) bsk__hopper_sddmm_tune.max_ctas = 3;
            hs_case c = hs_default(b, v == 1 ? BSK_BF16 : BSK_F16, v == 2 ? BSK_F32 : (v == 1 ? BSK_BF16 : BSK_F16));
            c.m = (int64_t)b * 11 + 5;
            c.k = (int64_t)b * 17 + 3;
            c.d = 200;
            c.density = v == 0 ? 0.6 : 0.3;
            c.pat = v == 1 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM;
            c.beta = v == 2 ? 0.75f : 0.0f;
            c.want = "hopper-sddmm";
            c.reps = 2;
            hs_run(t, ctx, &c, NULL);
        }
    bsk__hopper_sddmm_tune = tune_default;
    bsk_destroy(ctx);
}

/* The automatic column-group rule the prep kernel applies (knob col_groups -1: the rule whatever Y's size; by default
   only with >= 64 MB of Y at B = 64): G = 3 on skewed rows (longest >= twice the mean, >= 4 blocks) of >= 2 items on
   average, or on rows of >= 6 items; otherwise the row order. Each case's pattern is drawn here, the rule's answer
   computed from it on the host and compared with the G the kernel reports (tune.groups_out); the values against the
   reference, twice bitwise equal. The cases must produce both answers (a rule stuck at one value fails). */
BSK_TEST(gpu_hopper_sddmm_col_groups_auto)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    int *d_groups = NULL;
    if (cudaMalloc((void **)&d_groups, sizeof(int)) != cudaSuccess) {
        CHECK(0);
        bsk_destroy(ctx);
        return;
    }
    /* case 5: uniform rows of ~2.4 items (>= 2, < 6, not skewed): the row order — a rule that ignored the spread fails */
    static const struct { int b; double density; bsk_pattern pat; int ctas; float beta; } cs[6] = {
        {64, 0.30, BSK_PATTERN_SKEWED, 0, 0.0f},  {64, 0.20, BSK_PATTERN_UNIFORM, 0, 0.0f},
        {64, 0.85, BSK_PATTERN_UNIFORM, 3, 0.5f}, {64, 0.10, BSK_PATTERN_SKEWED, 0, 0.0f},
        {128, 0.40, BSK_PATTERN_SKEWED, 5, 0.0f}, {64, 0.30, BSK_PATTERN_UNIFORM, 0, 0.0f}};
    int seen[2] = {0, 0};
    for (int v = 0; v < 6; v++) {
        bsk__hopper_sddmm_tune = tune_default;
        bsk__hopper_sddmm_tune.col_groups = -1;
        bsk__hopper_sddmm_tune.groups_out = d_groups;
        bsk__hopper_sddmm_tune.max_ctas = cs[v].ctas;
        const int b = cs[v].b, gb = b == 64 ? 8 : 2;
        hs_case c = hs_default(b, v == 2 ? BSK_BF16 : BSK_F16, v == 2 ? BSK_F32 : BSK_F16);
        c.m = (int64_t)b * 9 + 7;
        c.k = (int64_t)b * (b == 64 ? 64 : 32) + 3; /* 65 / 33 block columns, a partial last one */
        c.d = 136;
        c.density = cs[v].density;
        c.pat = cs[v].pat;
        c.beta = cs[v].beta;
        c.reps = 2;
        bsk_bsr P;
        bsk_status s = bsk_bsr_random(c.m, c.k, b, b, c.density, c.pat, bsk_rng_next(bsk_test_rng()), c.out, &P);
        CHECK_STATUS(s, BSK_SUCCESS);
        if (s) continue;
        const long long mb = bsk_bsr_mb(&P), n = P.nnzb;
        long long L = 0;
        for (long long i = 0; i < mb; i++)
            if (P.row_ptr[i + 1] - P.row_ptr[i] > L) L = P.row_ptr[i + 1] - P.row_ptr[i];
        const int skewed = L >= 4 && L * mb >= 2 * n;
        const int want = (skewed && n >= 2LL * gb * mb) || n >= 6LL * gb * mb ? 3 : 1;
        int got = -7;
        cudaMemset(d_groups, 0xff, sizeof(int));
        hs_run(t, ctx, &c, &P);
        CHECK(cudaMemcpy(&got, d_groups, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
        if (got != want) {
            t->failed++;
            fprintf(stderr, "  %s:%d: case %d (b %d, longest %lld, nnzb %lld, rows %lld): groups %d, want %d\n",
                    __FILE__, __LINE__, v, b, L, n, mb, got, want);
        }
        seen[want == 3]++;
        bsk_bsr_free(&P);
    }
    CHECK(seen[0] > 0 && seen[1] > 0);
    cudaFree(d_groups);
    bsk__hopper_sddmm_tune = tune_default;
    bsk_destroy(ctx);
}

/* The D split and its reduction: forced S on small persistent grids (each CTA takes many units, the ring's
   phases run on across items), item-major and part-major units, and the planner's own choice on a grid that
   leaves a one-round tail (5 CTAs, ~6 items: it splits the last one 5 ways). Results are
   bitwise the same on a second run (partials are added in part order, whatever the arrival order). */
BSK_TEST(gpu_hopper_sddmm_split)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    static const int splits[] = {2, 3, 4, 8, 0, -1, 3};
    static const int grids[] = {1, 3, 7, 5, 5, 2, 4};
    static const int orders[] = {0, 0, 1, 0, 0, 0, 1}; /* 1: part-major units */
    int n = 0;
    for (int b = 64; b <= 128; b *= 2)
        for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++, n++) {
            bsk__hopper_sddmm_tune = tune_default;
            bsk__hopper_sddmm_tune.split = splits[i];
            bsk__hopper_sddmm_tune.max_ctas = grids[i];
            bsk__hopper_sddmm_tune.split_order = orders[i];
            bsk__hopper_sddmm_tune.b64_blocks = (n % 2) ? 4 : 8;
            hs_case c = hs_default(b, n % 3 ? BSK_F16 : BSK_BF16, n % 2 ? BSK_F32 : (n % 3 ? BSK_F16 : BSK_BF16));
            /* forced: 10 chunks, parts of uneven length; planner: 18 chunks, few items on 5 CTAs (it splits) */
            c.m = splits[i] == 0 ? 3 * b + 9 : 4 * b + 9;
            c.k = 5 * b - 3;
            c.d = splits[i] == 0 ? 64 * 17 + 24 : 64 * 9 + 24;
            c.density = 0.5;
            c.pat = n % 4 < 2 ? BSK_PATTERN_UNIFORM : BSK_PATTERN_SKEWED;
            c.beta = n % 2 ? 0.25f : 0.0f;
            c.family = 0;
            c.reps = 2;
            hs_run(t, ctx, &c, NULL);
        }
    bsk__hopper_sddmm_tune = tune_default;
    bsk_destroy(ctx);
}

/* Empty block rows (an explicit mask), a very sparse pattern with many empty rows, and nnzb = 0 (success,
   nothing written) through the dispatcher and the family hook. */
BSK_TEST(gpu_hopper_sddmm_empty_rows_and_nnz0)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk__hopper_sddmm_tune = tune_default;
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2) {
        hs_case c = hs_default(b, BSK_F16, BSK_F32);
        c.m = 6 * b - 11;
        c.k = 5 * b + 1;
        const int64_t mb = (c.m + b - 1) / b, nb = (c.k + b - 1) / b;
        bsk_dense Dn = bsk_test_dense(c.m, c.k, 0, c.out, r);
        uint8_t *mask = (uint8_t *)calloc((size_t)(mb * nb), 1);
        for (int64_t i = 0; i < mb; i++)
            for (int64_t j = 0; j < nb; j++) mask[i * nb + j] = (i % 3 == 1) ? 0 : (bsk_rng_uniform(r) < 0.5);
        mask[(mb - 1) * nb + nb - 1] = 1; /* the corner block: partial in both directions */
        bsk_bsr A;
        REQUIRE_OK(bsk_bsr_from_mask(&Dn, b, b, mask, &A));
        hs_run(t, ctx, &c, &A);
        c.beta = 1.5f;
        c.family = 0;
        hs_run(t, ctx, &c, &A);
        bsk_bsr_free(&A);
        /* sparse: most rows empty */
        c = hs_default(b, BSK_BF16, BSK_BF16);
        c.m = 20 * b;
        c.k = 9 * b + 7;
        c.density = 0.06;
        hs_run(t, ctx, &c, NULL);
        /* nnzb = 0 */
        memset(mask, 0, (size_t)(mb * nb));
        bsk_bsr Z, dZ;
        REQUIRE_OK(bsk_bsr_from_mask(&Dn, b, b, mask, &Z));
        REQUIRE(Z.nnzb == 0);
        REQUIRE_OK(bsk_bsr_clone(&Z, BSK_MEM_DEVICE, &dZ));
        bsk_dense X = bsk_test_dense(Z.rows, 64, 0, BSK_F16, r), Y = bsk_test_dense(Z.cols, 64, 0, BSK_F16, r);
        bsk_dense dX, dY;
        void *xb = NULL, *yb = NULL;
        REQUIRE(dense_up(&X, 0, &dX, &xb) && dense_up(&Y, 0, &dY, &yb));
        CHECK_STATUS(bsk_sddmm(ctx, 1.0f, &dX, &dY, 0.0f, &dZ), BSK_SUCCESS);
        CHECK_STATUS(bsk__cuda_sddmm_family(ctx, 0, 1.0f, &dX, &dY, 0.5f, &dZ), BSK_SUCCESS);
        CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
        cudaFree(xb);
        cudaFree(yb);
        bsk_test_dense_free(&X);
        bsk_test_dense_free(&Y);
        bsk_bsr_free(&dZ);
        bsk_bsr_free(&Z);
        free(mask);
        bsk_test_dense_free(&Dn);
    }
    bsk_destroy(ctx);
}

/* Malformed device indices (bsk_sddmm checks only O(1) things on the device): col_idx outside [0, nb), row_ptr
   past nnzb, negative, not monotone, not ending at nnzb (row 0 then covers every block: more items than the
   work list has room for, which the prep kernel drops). The Hopper kernel must run without a fault and write
   nothing outside the values array (guard zones around it; run under compute-sanitizer for the rest), also
   with the 64 x 256 tile and with a forced D split on a small grid. */
BSK_TEST(gpu_hopper_sddmm_malformed_indices_safe)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk_rng *r = bsk_test_rng();
    for (int b = 64; b <= 128; b *= 2)
        for (int v = 0; v < 4; v++) {
            bsk__hopper_sddmm_tune = tune_default;
            if (v == 1) bsk__hopper_sddmm_tune.b64_blocks = 4;
            if (v == 2) {
                bsk__hopper_sddmm_tune.split = 3;
                bsk__hopper_sddmm_tune.max_ctas = 4;
            }
            if (v == 3) bsk__hopper_sddmm_tune.col_groups = 3; /* binary searches over out-of-order columns */
            const int64_t rows = 5 * b - 3, cols = 6 * b - 1, d = 136;
            bsk_bsr A, dA;
            REQUIRE_OK(bsk_bsr_random(rows, cols, b, b, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(r), BSK_F32, &A));
            REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
            const int64_t mb = bsk_bsr_mb(&A), nnzb = A.nnzb;
            REQUIRE(nnzb >= 4);
            int32_t *ci = (int32_t *)malloc((size_t)nnzb * 4), *rp = (int32_t *)malloc((size_t)(mb + 1) * 4);
            memcpy(ci, A.col_idx, (size_t)nnzb * 4);
            memcpy(rp, A.row_ptr, (size_t)(mb + 1) * 4);
            ci[0] = 6 + 100; /* past nb */
            ci[1] = -1;
            ci[nnzb - 1] = INT32_MAX;
            ci[nnzb / 2] = INT32_MIN;
            rp[1] = (int32_t)nnzb + 1000; /* past nnzb */
            rp[2] = -7;                   /* negative, and not monotone */
            rp[mb] = 3;                   /* not nnzb */
            REQUIRE(cudaMemcpy(dA.col_idx, ci, (size_t)nnzb * 4, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemcpy(dA.row_ptr, rp, (size_t)(mb + 1) * 4, cudaMemcpyHostToDevice) == cudaSuccess);
            /* values inside guard zones */
            const size_t vbytes = (size_t)nnzb * b * b * 4, guard = 65536;
            unsigned char *g = NULL, *hb = (unsigned char *)malloc(vbytes + 2 * guard);
            REQUIRE(cudaMalloc((void **)&g, vbytes + 2 * guard) == cudaSuccess);
            memset(hb, 0x5a, vbytes + 2 * guard);
            REQUIRE(cudaMemcpy(g, hb, vbytes + 2 * guard, cudaMemcpyHostToDevice) == cudaSuccess);
            void *vals = dA.values;
            dA.values = g + guard;
            bsk_dense X = bsk_test_dense(rows, d, 0, BSK_F16, r), Y = bsk_test_dense(cols, d, 0, BSK_F16, r), dX, dY;
            void *xb = NULL, *yb = NULL;
            REQUIRE(dense_up(&X, 0, &dX, &xb) && dense_up(&Y, 0, &dY, &yb));
            for (int z = 0; z < 2; z++) {
                bsk_status s = bsk__cuda_sddmm_family(ctx, 0, 1.0f, &dX, &dY, z ? 0.5f : 0.0f, &dA);
                CHECK_STATUS(s, BSK_SUCCESS);
                CHECK_STATUS(bsk_synchronize(ctx), BSK_SUCCESS);
                CHECK(strncmp(bsk_last_kernel(ctx), "hopper-sddmm", 12) == 0);
            }
            unsigned char *back = (unsigned char *)malloc(vbytes + 2 * guard);
            REQUIRE(cudaMemcpy(back, g, vbytes + 2 * guard, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(memcmp(back, hb, guard) == 0);
            CHECK(memcmp(back + guard + vbytes, hb + guard + vbytes, guard) == 0);
            /* (no value check: row 0 now covers every block, so blocks are written by two items at once) */
            dA.values = vals;
            cudaFree(g);
            free(hb);
            free(back);
            cudaFree(xb);
            cudaFree(yb);
            bsk_test_dense_free(&X);
            bsk_test_dense_free(&Y);
            free(ci);
            free(rp);
            bsk_bsr_free(&dA);
            bsk_bsr_free(&A);
        }
    bsk__hopper_sddmm_tune = tune_default;
    bsk_destroy(ctx);
}

/* What the Hopper family declines (BSK_ERR_UNSUPPORTED; the dispatcher then runs the portable kernels, and
   the result is still right): blocks other than 64 / 128 or not square, F32 inputs, a row stride that is
   not a multiple of 16 bytes, a base not 16-byte aligned. */
BSK_TEST(gpu_hopper_sddmm_declines)
{
    bsk_context *ctx = NULL;
    const char *why = hs_skip_reason(&ctx);
    if (why) SKIP(why);
    bsk__hopper_sddmm_tune = tune_default;
    bsk_rng *r = bsk_test_rng();
    struct { int32_t br, bc; bsk_dtype in; int64_t d, padx, offx; } cases[] = {
        {32, 32, BSK_F16, 64, 0, 0},   {64, 128, BSK_F16, 64, 0, 0}, {128, 128, BSK_F32, 64, 0, 0},
        {64, 64, BSK_F16, 201, 0, 0},  {128, 128, BSK_BF16, 64, 4, 0}, {64, 64, BSK_F16, 64, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t m = 2 * cases[i].br + 5, k = 2 * cases[i].bc + 3, d = cases[i].d;
        bsk_bsr A, dA;
        REQUIRE_OK(bsk_bsr_random(m, k, cases[i].br, cases[i].bc, 0.5, BSK_PATTERN_UNIFORM, bsk_rng_next(r), BSK_F32, &A));
        REQUIRE_OK(bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA));
        bsk_dense X = bsk_test_dense(m, d, cases[i].padx, cases[i].in, r), Y = bsk_test_dense(k, d, 0, cases[i].in, r);
        bsk_dense dX, dY;
        void *xb = NULL, *yb = NULL;
        REQUIRE(dense_up(&X, cases[i].offx, &dX, &xb) && dense_up(&Y, 0, &dY, &yb));
        CHECK_STATUS(bsk__cuda_sddmm_family(ctx, 0, 1.0f, &dX, &dY, 0.0f, &dA), BSK_ERR_UNSUPPORTED);
        cudaFree(xb);
        cudaFree(yb);
        bsk_test_dense_free(&X);
        bsk_test_dense_free(&Y);
        bsk_bsr_free(&dA);
        bsk_bsr_free(&A);
        if (cases[i].br == cases[i].bc && cases[i].in != BSK_F32 && cases[i].br >= 64) {
            /* the dispatcher still gets it right, on another kernel */
            hs_case c = hs_default(cases[i].br, cases[i].in, BSK_F32);
            c.m = m;
            c.k = k;
            c.d = d;
            c.padx = cases[i].padx;
            c.offx = cases[i].offx;
            c.want = NULL;
            c.want_not = 1;
            hs_run(t, ctx, &c, NULL);
        }
    }
    bsk_destroy(ctx);
}

#else
BSK_TEST(gpu_hopper_sddmm_dtypes_blocks) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_b64_tiles) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_split) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_col_groups) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_col_groups_auto) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_empty_rows_and_nnz0) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_malformed_indices_safe) { SKIP("built without CUDA"); }
BSK_TEST(gpu_hopper_sddmm_declines) { SKIP("built without CUDA"); }
#endif
