/* cmd_attention_bwd.c — `bsk attention-bwd`: block-sparse attention forward and backward on the GPU.
   B=4 H=16 S=8192 D=128 bf16, 128x128 tiles, a random per-(batch, head) layout keeping round(density·nb) key
   blocks per query block, densities 0.1 / 0.25 / 0.5 / 1.0 (optionally causal too). Times bsk_attention_forward
   and bsk_attention_backward (everything it launches: D, the transposed layout, dK/dV, dQ) with CUDA events,
   L2 flushed before each timed run, median after warm-up; TFLOPS on kept tiles: forward 4·tiles·128²·D,
   backward 2.5× that (the FlashAttention convention: the deterministic dQ pass recomputes S and dP, so the
   kernels do 3.5× the forward's tensor work). cuBLAS bf16 GEMM 8192³ in the same run as the reference.
   Each config is spot-checked in float64: a dQ row and a dK and dV row of (batch 0, head 0). JSON to
   bench/results/attention_bwd.json (or --json). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "attn_common.h"
#include "bench.h"
#include "../src/attention/attention_internal.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>

typedef struct fwd_work { bsk_context *ctx; const bsk_attention_params *p; } fwd_work;
typedef struct bwd_work { bsk_context *ctx; const bsk_attention_bwd_params *p; } bwd_work;

static int fwd_run(void *arg)
{
    fwd_work *w = (fwd_work *)arg;
    return (int)bsk_attention_forward(w->ctx, w->p);
}

static int bwd_run(void *arg)
{
    bwd_work *w = (bwd_work *)arg;
    return (int)bsk_attention_backward(w->ctx, w->p);
}

/* Rows s of (batch 0, head 0) of a device [B, S, H, D] bf16 tensor, as float. */
static int fetch_rows(const void *dev, int64_t S, int64_t H, int64_t D, float *out)
{
    uint16_t *tmp = (uint16_t *)malloc((size_t)(S * D) * 2);
    if (!tmp) return 1;
    int bad = cudaMemcpy2D(tmp, (size_t)D * 2, dev, (size_t)(H * D) * 2, (size_t)D * 2, (size_t)S, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (int64_t i = 0; i < S * D && !bad; i++) out[i] = bsk__bf16_to_float(tmp[i]);
    free(tmp);
    return bad;
}

/* float64 dQ of query row qr and dK, dV of key row kr for (batch 0, head 0), from the host inputs, the device
   O and lse; relative error of the three device rows together. */
static double spot_check(const bsk_attn_layout *L, int64_t S, int64_t H, int64_t D, const void *hq, const void *hk,
                         const void *hv, const void *hg, const bsk_attention_bwd_params *dp, int causal)
{
    float *O = (float *)malloc((size_t)(S * D) * sizeof(float)), *lse = (float *)malloc((size_t)S * sizeof(float));
    float *got = (float *)malloc((size_t)(S * D) * sizeof(float));
    double *Dl = (double *)malloc((size_t)S * sizeof(double)), ref[3][512];
    uint8_t *kept = (uint8_t *)malloc((size_t)L->capacity + (size_t)bsk_attn_layout_nb(L) + 1);
    double num = 0, den = 0, scale = 1.0 / sqrt((double)D);
    int bad = !O || !lse || !got || !Dl || !kept || D > 512;
    if (!bad) bad = fetch_rows(dp->o.data, S, H, D, O) || cudaMemcpy(lse, dp->lse, (size_t)S * 4, cudaMemcpyDeviceToHost) != cudaSuccess;
#define X(p, s, d) ((double)bsk__load(p, BSK_BF16, ((s) * H) * D + (d)))
    for (int64_t q = 0; q < S && !bad; q++) {
        double acc = 0;
        for (int64_t d = 0; d < D; d++) acc += X(hg, q, d) * O[q * D + d];
        Dl[q] = acc;
    }
    int64_t nb = bsk_attn_layout_nb(L), bq = L->block_q, bk = L->block_k, qr = S / 3 + 5, kr = S / 2 + 7;
    memset(ref, 0, sizeof ref);
    /* kept(q, k): tile in layout 0's lists and (causal) k <= q */
    for (int64_t i = 0; i < bsk_attn_layout_mq(L) && !bad; i++) {
        memset(kept, 0, (size_t)nb);
        for (int32_t a = 0; a < L->full_count[i]; a++) kept[L->full_idx[i * L->capacity + a]] = 1;
        for (int32_t a = 0; a < L->part_count[i]; a++) kept[L->part_idx[i * L->capacity + a]] = 1;
        for (int64_t q = i * bq; q < (i + 1) * bq && q < S; q++)
            for (int64_t k = 0; k < S; k++) {
                if (!kept[k / bk] || (causal && k > q) || (q != qr && k != kr)) continue;
                double s = 0, dpv = 0;
                for (int64_t d = 0; d < D; d++) { s += X(hq, q, d) * X(hk, k, d); dpv += X(hg, q, d) * X(hv, k, d); }
                double p = exp(s * scale - lse[q]), ds = p * (dpv - Dl[q]);
                for (int64_t d = 0; d < D; d++) {
                    if (q == qr) ref[0][d] += scale * ds * X(hk, k, d);
                    if (k == kr) { ref[1][d] += scale * ds * X(hq, q, d); ref[2][d] += p * X(hg, q, d); }
                }
            }
    }
#undef X
    const void *outs[3] = {dp->dq.data, dp->dk.data, dp->dv.data};
    const int64_t rows[3] = {qr, kr, kr};
    for (int x = 0; x < 3 && !bad; x++) {
        bad = fetch_rows(outs[x], S, H, D, got);
        for (int64_t d = 0; d < D && !bad; d++) {
            double g = got[rows[x] * D + d];
            if (!isfinite(g)) bad = 1;
            num += (g - ref[x][d]) * (g - ref[x][d]);
            den += ref[x][d] * ref[x][d];
        }
    }
    free(O); free(lse); free(got); free(Dl); free(kept);
    return bad ? NAN : sqrt(num / (den > 0 ? den : 1));
}

typedef struct result {
    int causal;
    double density, density_actual, fwd_ms, bwd_ms, fwd_tflops, bwd_tflops, err;
    int64_t kept_tiles;
    const char *fwd_kernel, *bwd_kernel;
    bsk_status status;
} result;

static int run(const char *json, int iters, int warmup, int64_t B, int64_t H, int64_t S, int64_t D, const double *dens,
               int ndens, int with_causal)
{
    /* host memory, refused before any work: q, k, v, dO (16-bit), the layouts' per-(batch, head) masks, and the check's
       float copies of one (batch, head) slice */
    const double nblk = ceil((double)S / 128.0), bhsd = (double)B * (double)H * (double)S * (double)D;
    if (!cli_host_fits("attention-bwd", 4.0 * bhsd * 2.0 + 2.0 * (double)B * (double)H * nblk * nblk + 16.0 * (double)S * (double)D))
        return CLI_FAIL;
    bsk_context *ctx;
    cublasHandle_t blas;
    cli_gpu_timer timer;
    if (attn_bench_open("attention-bwd", &ctx, &blas, &timer)) return CLI_FAIL;
    int rc, failures = 0;
    const double gemm_tflops = attn_bench_cublas_tflops(blas, &timer, iters); /* the dense reference */
    const int32_t bs = 128;
    int64_t n = B * S * H * D;
    size_t bytes = (size_t)n * 2;
    void *h[4] = {malloc(bytes), malloc(bytes), malloc(bytes), malloc(bytes)}; /* q, k, v, dO */
    void *d[8] = {NULL};                                                      /* q, k, v, dO, o, dq, dk, dv */
    float *dlse = NULL;
    int ok = h[0] && h[1] && h[2] && h[3] && cudaMalloc((void **)&dlse, (size_t)(B * H * S) * 4) == cudaSuccess;
    for (int i = 0; i < 8 && ok; i++) ok = cudaMalloc(&d[i], bytes) == cudaSuccess;
    result res[16];
    int nres = 0;
    if (!ok) {
        fprintf(stderr, "bsk attention-bwd: out of memory\n");
        failures++;
    }
    for (int i = 0; i < 4 && ok; i++) {
        cli_fill_random(h[i], BSK_BF16, n, 21 + (uint64_t)i);
        cudaMemcpy(d[i], h[i], bytes, cudaMemcpyHostToDevice);
    }
    for (int causal = 0; causal < 1 + with_causal && ok; causal++)
        for (int x = 0; x < ndens; x++) {
            result *r = &res[nres++];
            memset(r, 0, sizeof *r);
            r->causal = causal;
            r->density = dens[x];
            r->fwd_ms = r->bwd_ms = r->fwd_tflops = r->bwd_tflops = r->err = NAN;
            bsk_attn_layout hl, dl;
            memset(&dl, 0, sizeof dl);
            r->status = attn_bench_layout(S, bs, (int32_t)B, (int32_t)H, dens[x], causal, 2000 + (uint64_t)x, &hl);
            if (r->status) { failures++; continue; }
            double flop;
            attn_bench_tiles(&hl, B, H, bs, D, &r->kept_tiles, &r->density_actual, &flop);
            r->status = bsk_attn_layout_clone(&hl, BSK_MEM_DEVICE, &dl);
            bsk_attention_params p = attn_bench_params(d[0], d[1], d[2], d[4], dlse, &dl, B, S, H, D, causal);
            bsk_attention_bwd_params bp;
            memset(&bp, 0, sizeof bp);
            bp.q = p.q; bp.k = p.k; bp.v = p.v; bp.o = p.o;
            bp.d_o = bsk_attn_tensor_bshd(d[3], B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
            bp.dq = bsk_attn_tensor_bshd(d[5], B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
            bp.dk = bsk_attn_tensor_bshd(d[6], B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
            bp.dv = bsk_attn_tensor_bshd(d[7], B, S, H, D, BSK_BF16, BSK_MEM_DEVICE);
            bp.lse = dlse;
            bp.layout = &dl;
            bp.causal = causal;
            fwd_work fw = {ctx, &p};
            bwd_work bw = {ctx, &bp};
            if (!r->status) {
                r->fwd_ms = cli_time_gpu(&timer, fwd_run, &fw, warmup, iters, &rc);
                r->fwd_kernel = bsk_last_kernel(ctx);
                if (rc) r->status = rc > 0 ? (bsk_status)rc : BSK_ERR_CUDA;
            }
            if (!r->status) {
                r->bwd_ms = cli_time_gpu(&timer, bwd_run, &bw, warmup, iters, &rc);
                r->bwd_kernel = bsk_last_kernel(ctx);
                if (rc) r->status = rc > 0 ? (bsk_status)rc : BSK_ERR_CUDA;
            }
            if (!r->status) r->status = bsk_synchronize(ctx);
            if (!r->status) {
                r->fwd_tflops = flop / (r->fwd_ms * 1e-3) * 1e-12;
                r->bwd_tflops = 2.5 * flop / (r->bwd_ms * 1e-3) * 1e-12;
                r->err = spot_check(&hl, S, H, D, h[0], h[1], h[2], h[3], &bp, causal);
                if (!(r->err <= 3e-2)) failures++;
            }
            if (r->status) failures++;
            printf("%-9s d=%.2f (actual %.3f, %lld tiles): fwd %8.3f ms %6.1f TFLOPS | bwd %8.3f ms %6.1f TFLOPS "
                   "(%.0f%% of cuBLAS, bwd/fwd time %.2f) spot err %.1e  [%s, %s]%s%s\n",
                   causal ? "causal" : "non-caus", dens[x], r->density_actual, (long long)r->kept_tiles, r->fwd_ms,
                   r->fwd_tflops, r->bwd_ms, r->bwd_tflops, 100.0 * r->bwd_tflops / gemm_tflops, r->bwd_ms / r->fwd_ms,
                   r->err, r->fwd_kernel ? r->fwd_kernel : "-", r->bwd_kernel ? r->bwd_kernel : "-",
                   r->status ? "  FAILED: " : "", r->status ? bsk_status_string(r->status) : "");
            fflush(stdout);
            bsk_attn_layout_free(&hl);
            bsk_attn_layout_free(&dl);
        }
    for (int i = 0; i < 4; i++) free(h[i]);
    for (int i = 0; i < 8; i++) cudaFree(d[i]);
    cudaFree(dlse);

    cli_json j;
    FILE *f = attn_bench_json_begin(&j, "attention-bwd", json, B, H, S);
    if (f) {
        cli_json_int(&j, "dim", D);
        cli_json_int(&j, "block", bs);
        cli_json_str(&j, "dtype", "bf16");
        cli_json_str(&j, "layout", "random per (batch, head), round(density * candidates) key blocks per query block");
        cli_json_str(&j, "flop", "fwd 4 * kept_tiles * 128 * 128 * D; bwd 2.5x fwd (kernels do 3.5x: dQ recomputes S, dP)");
        cli_json_str(&j, "timing", "CUDA events, median, L2 flushed before each iteration; bwd = every launch of bsk_attention_backward");
        cli_json_int(&j, "iters", iters);
        cli_json_end(&j);
        cli_json_num(&j, "cublas_bf16_gemm_8192_tflops", gemm_tflops);
        cli_json_arr(&j, "results");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            cli_json_obj(&j, NULL);
            cli_json_str(&j, "causal", r->causal ? "yes" : "no");
            cli_json_num(&j, "density", r->density);
            cli_json_num(&j, "density_actual", r->density_actual);
            cli_json_int(&j, "kept_tiles", r->kept_tiles);
            cli_json_num(&j, "fwd_ms", r->fwd_ms);
            cli_json_num(&j, "fwd_tflops", r->fwd_tflops);
            cli_json_num(&j, "bwd_ms", r->bwd_ms);
            cli_json_num(&j, "bwd_tflops", r->bwd_tflops);
            cli_json_num(&j, "bwd_share_of_cublas", r->bwd_tflops / gemm_tflops);
            cli_json_num(&j, "spot_check_rel_err", r->err);
            cli_json_str(&j, "fwd_kernel", r->fwd_kernel ? r->fwd_kernel : "none");
            cli_json_str(&j, "bwd_kernel", r->bwd_kernel ? r->bwd_kernel : "none");
            cli_json_str(&j, "status", bsk_status_string(r->status));
            cli_json_end(&j);
        }
        cli_json_end(&j);
        attn_bench_json_finish(&j, f, json);
    }
    attn_bench_close(ctx, blas, &timer);
    return failures ? CLI_FAIL : CLI_OK;
}
#endif

int cmd_attention_bwd(int argc, char **argv)
{
    const char *json = "bench/results/attention_bwd.json", *dens_s = "0.10,0.25,0.50,1.0";
    int64_t iters = 10, warmup = 2, B = 4, H = 16, S = 8192, D = 128;
    int with_causal = 0, quick = 0;
    cli_opt opts[] = {
        CLI_OPT_STR("json", &json, "JSON output file"),
        CLI_OPT_INT("iters", &iters, 1, 1000, "timed iterations per config (median)"),
        CLI_OPT_INT("warmup", &warmup, 0, 100, "untimed runs first"),
        CLI_OPT_INT("batch", &B, 1, 64, "batch"),
        CLI_OPT_INT("heads", &H, 1, 128, "heads"),
        CLI_OPT_INT("seq", &S, 128, 131072, "sequence length"),
        CLI_OPT_INT("dim", &D, 64, 128, "head dim (64 or 128)"),
        CLI_OPT_STR("densities", &dens_s, "tile densities, e.g. 0.10,0.25,0.50,1.0"),
        CLI_OPT_FLAG("causal", &with_causal, "also the causal layouts"),
        CLI_OPT_FLAG("quick", &quick, "S=2048, one iteration"),
    };
    int npos;
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                       "bsk attention-bwd [--json FILE] [--iters N] [--densities ...] [--causal]",
                       "Block-sparse attention forward + backward benchmark (GPU): TFLOPS on kept tiles (backward counted\n"
                       "as 2.5x the forward's flops), cuBLAS dense GEMM in the same run, float64 spot check.",
                       NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    double dens[8];
    int ndens = cli_list_real("attention-bwd", "densities", dens_s, 0.001, 1.0, dens, 8);
    if (ndens < 0) return CLI_USAGE;
    if (D != 64 && D != 128) return cli_usage_error("attention-bwd", "--dim must be 64 or 128");
    if (quick) { S = 2048; iters = 1; warmup = 1; }
#ifdef BSK_WITH_CUDA
    if (!bench_json_writable(json, "bsk attention-bwd")) return CLI_FAIL; /* before the run, not after it */
    return run(json, (int)iters, (int)warmup, B, H, S, D, dens, ndens, with_causal);
#else
    (void)with_causal; (void)B; (void)H; (void)json;
    fprintf(stderr, "bsk attention-bwd: this build has no CUDA backend\n");
    return CLI_FAIL;
#endif
}
