/* sddmm_probe.c — device probe for the Hopper SDDMM's schedule (src/cuda/hopper/sddmm_tune.h knobs): cuBLAS X·Yᵀ vs
   bsk_sddmm at M = K = D = 8192, fp16 in / out, b = 128 (--block 64: 64), uniform pattern, with the D split forced or
   off, item-major or part-major — or with --groups, the column-group item order (col_groups 1 = rows / 2 / 3 / 4 / 6 / 0 = automatic) —
   alternated so each configuration is read early and late in the run.
   Timing: CUDA events around one call, 3 warm-ups, median of ITERS, L2 flushed (256 MB memset) before each timed
   call. Every configuration's values are checked against cuBLAS X·Yᵀ (fp32) on the kept blocks.
   --ctas alternates the persistent grid (max_ctas 0 = one CTA per SM / 120 / 110 / 100 / 88 / 66).
   --skewed: the power-law pattern (bsk_bsr_random's skewed rows) instead of the uniform one (session 22).
   Usage: sddmm_probe [--d 0.1] [--block 64|128] [--skewed] [--groups | --ctas] [--iters N] — built by `make probes`, run by hand on the
   device machine. */
#include "probe_util.h"

#include "cuda/hopper/sddmm_tune.h"

#define S_ 8192
static int BLK = 128;
static int ITERS = 20;
static void *flush_buf;
static const size_t FLUSH = 256u << 20;
static cudaEvent_t ev0, ev1;

typedef struct {
    bsk_context *ctx;
    bsk_dense *X, *Y;
    bsk_bsr *out;
} sddmm_arg;
static void run_sddmm(void *p)
{
    sddmm_arg *s = (sddmm_arg *)p;
    CS(bsk_sddmm(s->ctx, 1.0f, s->X, s->Y, 0.0f, s->out));
}
/* row-major R (M x K, fp32) = X (M x D) · Yᵀ: column-major Rᵀ = Y·Xᵀ */
typedef struct {
    cublasHandle_t h;
    void *X, *Y, *R;
} xyt_arg;
static void run_xyt(void *p)
{
    const xyt_arg *g = (const xyt_arg *)p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, S_, S_, S_, &one, g->Y, CUDA_R_16F, S_, g->X, CUDA_R_16F, S_, &zero,
                    g->R, CUDA_R_32F, S_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

int main(int argc, char **argv)
{
    double d = 0.10;
    int groups = 0, ctas = 0, skewed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--d") && i + 1 < argc) d = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) ITERS = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block") && i + 1 < argc) BLK = atoi(argv[++i]) == 64 ? 64 : 128;
        else if (!strcmp(argv[i], "--groups")) groups = 1;
        else if (!strcmp(argv[i], "--ctas")) ctas = 1;
        else if (!strcmp(argv[i], "--skewed")) skewed = 1;
    }
    cublasHandle_t h;
    bsk_context *ctx;
    probe_setup(&flush_buf, FLUSH, &ev0, &ev1, &h, &ctx);
    struct cudaDeviceProp info;
    CK(cudaGetDeviceProperties(&info, 0));
    const size_t n2 = (size_t)S_ * S_;
    uint16_t *hx = (uint16_t *)malloc(n2 * 2);
    float *hr = (float *)malloc(n2 * 4);
    if (!hx || !hr) return 1;
    void *dX, *dY, *dR;
    CK(cudaMalloc(&dX, n2 * 2));
    CK(cudaMalloc(&dY, n2 * 2));
    CK(cudaMalloc(&dR, n2 * 4));
    probe_fill_rand16(hx, n2, 0);
    CK(cudaMemcpy(dX, hx, n2 * 2, cudaMemcpyHostToDevice));
    probe_fill_rand16(hx, n2, 0);
    CK(cudaMemcpy(dY, hx, n2 * 2, cudaMemcpyHostToDevice));
    xyt_arg g = {h, dX, dY, dR};
    const double dense_ms = probe_time(run_xyt, &g, ITERS, flush_buf, FLUSH, ev0, ev1, NULL);
    const double dense_tf = 2.0 * (double)n2 * S_ / (dense_ms * 1e-3) * 1e-12;
    CK(cudaMemcpy(hr, dR, n2 * 4, cudaMemcpyDeviceToHost));

    bsk_bsr hA, A;
    CS(bsk_bsr_random(S_, S_, BLK, BLK, d, skewed ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, 777, BSK_F16, &hA));
    CS(bsk_bsr_clone(&hA, BSK_MEM_DEVICE, &A));
    const size_t nv = (size_t)A.nnzb * BLK * BLK;
    uint16_t *hv = (uint16_t *)malloc(nv * 2);
    if (!hv) return 1;
    bsk_dense X = {S_, S_, S_, BSK_F16, BSK_MEM_DEVICE, dX}, Y = {S_, S_, S_, BSK_F16, BSK_MEM_DEVICE, dY};
    sddmm_arg sa = {ctx, &X, &Y, &A};
    /* split knob: -1 none, 0 the planner's choice, S >= 2 forced on the last items; order 1 part-major */
    const int cfg_split[][2] = {{-1, 0}, {0, 0}, {2, 1}, {3, 1}, {3, 0}, {4, 1}, {4, 1}, {3, 0}, {3, 1}, {2, 1}, {0, 0}, {-1, 0}};
    /* --groups: {0, col_groups} (the planner's split either way; col_groups 1 = row order, 0 = automatic) */
    const int cfg_groups[][2] = {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 6}, {0, 0}, {0, 0}, {0, 6}, {0, 4}, {0, 3}, {0, 2}, {0, 1}};
    /* --ctas: {0, max_ctas} (0 = one CTA per SM; the defaults otherwise) */
    const int cfg_ctas[][2] = {{0, 0}, {0, 120}, {0, 110}, {0, 100}, {0, 88}, {0, 66},
                               {0, 66}, {0, 88}, {0, 100}, {0, 110}, {0, 120}, {0, 0}};
    const int (*cfg)[2] = ctas ? cfg_ctas : groups ? cfg_groups : cfg_split;
    const int nc = ctas     ? (int)(sizeof cfg_ctas / sizeof cfg_ctas[0])
                   : groups ? (int)(sizeof cfg_groups / sizeof cfg_groups[0])
                            : (int)(sizeof cfg_split / sizeof cfg_split[0]);
    const int dflt = groups || ctas; /* the split knobs at their defaults */
    printf("SDDMM probe: %s, 8192^3 b%d d %.2f %s, nnzb %lld, cuBLAS X·Yᵀ %.1f TFLOPS\n", info.name, BLK, d,
           skewed ? "skewed" : "uniform", (long long)A.nnzb, dense_tf);
    int *d_groups = NULL, used_groups = 0; /* the column groups the prep kernel used (its automatic rule) */
    CK(cudaMalloc((void **)&d_groups, sizeof(int)));
    for (int ci = 0; ci < nc; ci++) {
        memset(&bsk__hopper_sddmm_tune, 0, sizeof bsk__hopper_sddmm_tune);
        bsk__hopper_sddmm_tune.groups_out = d_groups;
        bsk__hopper_sddmm_tune.split = dflt ? 0 : cfg[ci][0];
        bsk__hopper_sddmm_tune.split_order = dflt ? 0 : cfg[ci][1];
        bsk__hopper_sddmm_tune.col_groups = groups ? cfg[ci][1] : 0;
        bsk__hopper_sddmm_tune.max_ctas = ctas ? cfg[ci][1] : 0;
        CK(cudaMemset(A.values, 0xff, nv * 2)); /* NaN poison */
        run_sddmm(&sa);
        CS(bsk_synchronize(ctx));
        CK(cudaMemcpy(hv, A.values, nv * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&used_groups, d_groups, sizeof(int), cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int64_t i = 0; i < S_ / BLK; i++)
            for (int32_t k = hA.row_ptr[i]; k < hA.row_ptr[i + 1]; k++) {
                const int64_t j = hA.col_idx[k];
                for (int r = 0; r < BLK; r++)
                    for (int c = 0; c < BLK; c++) {
                        const double got = probe_h2f(hv[(size_t)k * BLK * BLK + r * BLK + c]);
                        const double ref = hr[(size_t)(i * BLK + r) * S_ + j * BLK + c];
                        num += (got - ref) * (got - ref);
                        den += ref * ref;
                    }
            }
        const double err = sqrt(num / den);
        const double ms = probe_time(run_sddmm, &sa, ITERS, flush_buf, FLUSH, ev0, ev1, NULL);
        const double tf = 2.0 * (double)A.nnzb * BLK * BLK * S_ / (ms * 1e-3) * 1e-12;
        printf("split %2d %s %d | %8.4f ms %7.1f TFLOPS E %.3f err %.2e %s (groups %d)%s\n", cfg[ci][0],
               ctas ? "max_ctas" : groups ? "col_groups" : "order", cfg[ci][1], ms, tf, tf / dense_tf, err, bsk_last_kernel(ctx),
               used_groups, err < 2e-3 ? "" : "  WRONG");
        fflush(stdout);
    }
    CK(cudaFree(d_groups));
    bsk_bsr_free(&A);
    bsk_bsr_free(&hA);
    bsk_destroy(ctx);
    return 0;
}
