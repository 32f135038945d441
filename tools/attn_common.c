/* attn_common.c — pieces the attention benchmarks share (see attn_common.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn_common.h"

bsk_status attn_bench_layout(int64_t S, int32_t bs, int32_t B, int32_t H, double density, int causal, uint64_t seed,
                             bsk_attn_layout *out)
{
    int64_t mq = (S + bs - 1) / bs, nb = mq;
    uint8_t *mask = (uint8_t *)calloc((size_t)(B * H * mq * nb), 1);
    int64_t *perm = (int64_t *)malloc((size_t)nb * sizeof(int64_t));
    if (!mask || !perm) { free(mask); free(perm); return BSK_ERR_OUT_OF_MEMORY; }
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t l = 0; l < (int64_t)B * H; l++)
        for (int64_t i = 0; i < mq; i++) {
            int64_t cand = causal ? i + 1 : nb, keep = (int64_t)llround(density * (double)cand);
            if (keep < 1) keep = 1;
            uint8_t *row = mask + (l * mq + i) * nb;
            if (causal) { row[i] = 1; keep--; cand--; } /* the diagonal, then from the blocks before it */
            for (int64_t j = 0; j < cand; j++) perm[j] = j;
            for (int64_t j = 0; j < keep && j < cand; j++) {
                st ^= st << 13; st ^= st >> 7; st ^= st << 17;
                int64_t r = j + (int64_t)(st % (uint64_t)(cand - j)), x = perm[j];
                perm[j] = perm[r]; perm[r] = x;
                row[perm[j]] = 1;
            }
        }
    free(perm);
    bsk_status s = bsk_attn_layout_from_mask(S, S, bs, bs, B, H, mask, causal, 0, out);
    free(mask);
    return s;
}

void attn_bench_tiles(const bsk_attn_layout *L, int64_t B, int64_t H, int32_t bs, int64_t D, int64_t *kept,
                      double *density_actual, double *flop)
{
    int64_t nf = 0, np = 0, mq = bsk_attn_layout_mq(L);
    bsk_attn_layout_tiles(L, &nf, &np);
    *kept = nf + np;
    *density_actual = (double)(nf + np) / (double)(B * H * mq * mq);
    *flop = 4.0 * (double)(nf + np) * bs * bs * (double)D;
}

bsk_attention_params attn_bench_params(void *q, void *k, void *v, void *o, float *lse, const bsk_attn_layout *L, int64_t B,
                                       int64_t S, int64_t H, int64_t D, int causal)
{
    bsk_attention_params p;
    memset(&p, 0, sizeof p);
    p.q = bsk_attn_tensor_bshd(q, B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
    p.k = bsk_attn_tensor_bshd(k, B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
    p.v = bsk_attn_tensor_bshd(v, B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
    p.o = bsk_attn_tensor_bshd(o, B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
    p.lse = lse;
    p.layout = L;
    p.causal = causal;
    return p;
}

FILE *attn_bench_json_begin(cli_json *j, const char *cmd, const char *json, int64_t B, int64_t H, int64_t S)
{
    FILE *f = fopen(json, "w");
    if (!f) {
        fprintf(stderr, "bsk %s: cannot write %s\n", cmd, json);
        return NULL;
    }
    char tool[64];
    snprintf(tool, sizeof tool, "bsk %s", cmd);
    cli_json_begin(j, f);
    cli_json_meta(j, tool);
    cli_json_obj(j, "config");
    cli_json_int(j, "batch", B);
    cli_json_int(j, "heads", H);
    cli_json_int(j, "seq", S);
    return f;
}

void attn_bench_json_finish(cli_json *j, FILE *f, const char *json)
{
    cli_json_finish(j);
    fclose(f);
    printf("wrote %s\n", json);
}

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>

int attn_bench_open(const char *cmd, bsk_context **ctx, cublasHandle_t *blas, cli_gpu_timer *timer)
{
    *ctx = NULL;
    *blas = NULL;
    if (bsk_create(ctx, BSK_BACKEND_CUDA)) { fprintf(stderr, "bsk %s: needs a CUDA device\n", cmd); return CLI_FAIL; }
    if (cublasCreate(blas) != CUBLAS_STATUS_SUCCESS || cli_gpu_timer_init(timer, NULL)) {
        fprintf(stderr, "bsk %s: cuBLAS / timer setup failed\n", cmd);
        bsk_destroy(*ctx);
        return CLI_FAIL;
    }
    return CLI_OK;
}

void attn_bench_close(bsk_context *ctx, cublasHandle_t blas, cli_gpu_timer *timer)
{
    cli_gpu_timer_free(timer);
    cublasDestroy(blas);
    bsk_destroy(ctx);
}

typedef struct gemm_work {
    cublasHandle_t h;
    void *a, *b, *c;
    int n;
} gemm_work;

static int gemm_run(void *arg)
{
    gemm_work *w = (gemm_work *)arg;
    float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(w->h, CUBLAS_OP_N, CUBLAS_OP_N, w->n, w->n, w->n, &one, w->a, CUDA_R_16BF, w->n, w->b, CUDA_R_16BF,
                        w->n, &zero, w->c, CUDA_R_16BF, w->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

double attn_bench_cublas_tflops(cublasHandle_t blas, cli_gpu_timer *timer, int iters)
{
    double tflops = NAN;
    gemm_work g = {blas, NULL, NULL, NULL, 8192};
    size_t bytes = (size_t)8192 * 8192 * 2;
    if (cudaMalloc(&g.a, bytes) == cudaSuccess && cudaMalloc(&g.b, bytes) == cudaSuccess && cudaMalloc(&g.c, bytes) == cudaSuccess) {
        int rc;
        cudaMemset(g.a, 0x3c, bytes);
        cudaMemset(g.b, 0x3c, bytes);
        double ms = cli_time_gpu(timer, gemm_run, &g, 2, iters, &rc);
        tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e-3) * 1e-12;
    }
    cudaFree(g.a); cudaFree(g.b); cudaFree(g.c);
    (void)cudaGetLastError();
    printf("cuBLAS dense bf16 GEMM 8192^3: %.1f TFLOPS\n", tflops);
    return tflops;
}
#endif
