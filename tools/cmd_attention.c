/* cmd_attention.c — `bsk attention` (meant as `bsk bench attention`): block-sparse attention forward on the
   GPU. Large config B=4 H=16 S=8192 (D=128 and 64, bf16) over densities and causal/non-causal, TFLOPS on
   kept tiles (4·kept_tiles·bq·bk·D, every (batch, head) layout counted, causal diagonal tiles counted as
   kept), with cuBLAS dense bf16 GEMM TFLOPS in the same run as the stability reference; the top-k gate's
   time as a share of the attention time, on Q and K and on pre-pooled block means (bsk_topk_params.pooled), and the
   pooled gate's marginal cost in the sequence gate -> attention (with and without PDL); latency of the small config B=2 H=8 S=512 D=64 fp16. Each
   timed config is spot-checked against a float64 reference on a few query rows. JSON to
   bench/results/attention.json (or --json). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "attn_common.h"
#include "bench.h"
#include "../src/attention/attention_internal.h"

#define MAXD_ATTN_LIST 4

#ifdef BSK_WITH_CUDA
#include <cuda_runtime.h>

typedef struct attn_work {
    bsk_context *ctx;
    const bsk_attention_params *p;
} attn_work;

static int attn_run(void *arg)
{
    attn_work *w = (attn_work *)arg;
    return (int)bsk_attention_forward(w->ctx, w->p);
}

typedef struct gate_work {
    bsk_context *ctx;
    const bsk_topk_params *p;
    bsk_attn_layout *out;
} gate_work;

static int gate_run(void *arg)
{
    gate_work *w = (gate_work *)arg;
    return (int)bsk_topk_block_layout(w->ctx, w->p, w->out);
}

/* The real sequence: the gate writes the layout, the attention reads it, on one stream, nothing in between
   (the Hopper attention is a programmatic dependent launch unless pdl = 0: bsk__attn_pdl). */
typedef struct seq_work {
    bsk_context *ctx;
    const bsk_topk_params *gp;
    bsk_attn_layout *gl;
    const bsk_attention_params *ap;
    int pdl;
} seq_work;

static int seq_run(void *arg) /* gp NULL: the attention alone */
{
    seq_work *w = (seq_work *)arg;
    int rc = w->gp ? (int)bsk_topk_block_layout(w->ctx, w->gp, w->gl) : 0;
    if (rc) return rc;
    const int was = bsk__attn_pdl;
    bsk__attn_pdl = w->pdl;
    rc = (int)bsk_attention_forward(w->ctx, w->ap);
    bsk__attn_pdl = was;
    return rc;
}

/* Pre-pooled gate input: the block means of a B x S x H x D bf16 tensor ([batch, seq, heads, dim]) as a
   B x nblk x H x D bf16 tensor, each mean in fp32 in the gate's pooling order, then rounded to bf16 — what a
   caller fusing the pooling into its projection would pass (bsk_topk_params.pooled). NULL when out of memory. */
static void *pool_rows_bf16(const void *x, int64_t B, int64_t S, int64_t H, int64_t D, int32_t bs)
{
    const int64_t nblk = (S + bs - 1) / bs;
    void *out = malloc((size_t)(B * nblk * H * D) * 2);
    float *p = (float *)malloc((size_t)(8 * D) * sizeof(float));
    if (!out || !p) { free(out); free(p); return NULL; }
    for (int64_t b = 0; b < B; b++)
        for (int64_t blk = 0; blk < nblk; blk++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t r0 = blk * bs, r1 = r0 + bs < S ? r0 + bs : S;
                memset(p, 0, (size_t)(8 * D) * sizeof(float));
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t c = 0; c < D; c++)
                        p[((r - r0) & 7) * D + c] += bsk__load(x, BSK_BF16, ((b * S + r) * H + h) * D + c);
                for (int64_t c = 0; c < D; c++) {
                    const float *q = p + c;
                    const float sum = ((q[0] + q[D]) + (q[2 * D] + q[3 * D])) + ((q[4 * D] + q[5 * D]) + (q[6 * D] + q[7 * D]));
                    bsk__store(out, BSK_BF16, ((b * nblk + blk) * H + h) * D + c, sum / (float)(r1 - r0));
                }
            }
    free(p);
    return out;
}

/* The per-(batch, head) random layout of attn_bench_layout; density 1: the dense / causal builders, expanded
   per (batch, head) as well. */
static bsk_status make_layout(int64_t S, int32_t bs, int32_t B, int32_t H, double density, int causal, uint64_t seed,
                              bsk_attn_layout *out)
{
    if (density >= 1.0) {
        bsk_attn_layout one;
        bsk_status s = causal ? bsk_attn_layout_causal(S, S, bs, bs, 0, &one) : bsk_attn_layout_dense(S, S, bs, bs, &one);
        if (s) return s;
        /* expand to per-(batch, head) so the flop count and the kernel see the same shape as the sparse runs */
        int64_t mq = bsk_attn_layout_mq(&one), nb = bsk_attn_layout_nb(&one);
        uint8_t *mask = (uint8_t *)malloc((size_t)(B * H * mq * nb));
        if (!mask) { bsk_attn_layout_free(&one); return BSK_ERR_OUT_OF_MEMORY; }
        memset(mask, 0, (size_t)(B * H * mq * nb));
        for (int64_t l = 0; l < (int64_t)B * H; l++)
            for (int64_t i = 0; i < mq; i++) {
                for (int32_t a = 0; a < one.full_count[i]; a++) mask[(l * mq + i) * nb + one.full_idx[i * one.capacity + a]] = 1;
                for (int32_t a = 0; a < one.part_count[i]; a++) mask[(l * mq + i) * nb + one.part_idx[i * one.capacity + a]] = 1;
            }
        bsk_attn_layout_free(&one);
        s = bsk_attn_layout_from_mask(S, S, bs, bs, B, H, mask, causal, 0, out);
        free(mask);
        return s;
    }
    return attn_bench_layout(S, bs, B, H, density, causal, seed, out);
}

/* float64 reference of a few query rows of (batch 0, head 0) against the device result. */
static double spot_check(const bsk_attention_params *hp, const void *o_dev, int64_t nrows)
{
    const bsk_attn_tensor *Q = &hp->q, *K = &hp->k, *V = &hp->v;
    const bsk_attn_layout *L = hp->layout;
    int64_t D = Q->dim, S = Q->seq;
    size_t es = bsk_dtype_size(Q->dtype);
    double num = 0, den = 0;
    double *s = (double *)malloc((size_t)S * sizeof(double)), *o = (double *)malloc((size_t)D * sizeof(double));
    uint8_t *allowed = (uint8_t *)malloc((size_t)S);
    void *got = malloc((size_t)D * es);
    int bad = !s || !o || !allowed || !got;
    for (int64_t n = 0; n < nrows && !bad; n++) {
        int64_t q = (S - 1) * n / (nrows > 1 ? nrows - 1 : 1), row = q / L->block_q;
        memset(allowed, 0, (size_t)S);
        for (int list = 0; list < 2; list++) {
            int32_t cnt = list ? L->part_count[row] : L->full_count[row];
            const int32_t *idx = (list ? L->part_idx : L->full_idx) + row * L->capacity;
            for (int32_t a = 0; a < cnt; a++)
                for (int64_t k = (int64_t)idx[a] * L->block_k; k < ((int64_t)idx[a] + 1) * L->block_k && k < S; k++)
                    allowed[k] = !hp->causal || k <= q;
        }
        double mx = -INFINITY, sum = 0, scale = 1.0 / sqrt((double)D);
        for (int64_t k = 0; k < S; k++) {
            if (!allowed[k]) continue;
            double acc = 0;
            for (int64_t d = 0; d < D; d++)
                acc += (double)bsk__load(Q->data, Q->dtype, q * Q->stride_seq + d) * bsk__load(K->data, K->dtype, k * K->stride_seq + d);
            s[k] = acc * scale;
            if (s[k] > mx) mx = s[k];
        }
        for (int64_t d = 0; d < D; d++) o[d] = 0;
        for (int64_t k = 0; k < S; k++) {
            if (!allowed[k]) continue;
            double e = exp(s[k] - mx);
            sum += e;
            for (int64_t d = 0; d < D; d++) o[d] += e * bsk__load(V->data, V->dtype, k * V->stride_seq + d);
        }
        if (cudaMemcpy(got, (const char *)o_dev + (size_t)(q * hp->o.stride_seq) * es, (size_t)D * es, cudaMemcpyDeviceToHost) != cudaSuccess) { bad = 1; break; }
        for (int64_t d = 0; d < D; d++) {
            double r = sum > 0 ? o[d] / sum : 0, g = bsk__load(got, Q->dtype, d);
            if (!isfinite(g)) bad = 1;
            num += (g - r) * (g - r);
            den += r * r;
        }
    }
    free(s); free(o); free(allowed); free(got);
    return bad ? NAN : sqrt(num / (den > 0 ? den : 1));
}

typedef struct result {
    int64_t D;
    int causal;
    double density, density_actual;
    int64_t kept_tiles;
    double ms, tflops, err, gate_ms, gate_share, tflops_var[3], tflops_mma, tflops_persist, tflops_per_item;
    double gate_pooled_ms, gate_pooled_share; /* the gate on pre-pooled input (params.pooled = 1) */
    /* the sequence pooled gate -> attention on the gate's layout, round-robin with the attention alone on it:
       attention alone, the sequence with / without PDL, the medians of the paired differences (marginal cost) */
    double seq_attn_ms, seq_ms, seq_nopdl_ms, seq_marg_ms, seq_marg_nopdl_ms, seq_attn_nopdl_ms, seq_attn_pdl_diff_ms;
    const char *kernel;
    bsk_status status;
} result;

static int run(const char *json, int iters, int warmup, int64_t B, int64_t H, int64_t S, const int64_t *dims, int nd,
               const double *dens, int ndens, int variants, int variant, int compare, int seq_iters)
{
    /* host memory at the largest head dim, refused before any work (an overcommitted malloc is killed once touched):
       q, k, v (bf16), the pooled gate input, the full-density layout's per-(batch, head) mask */
    int64_t dmax = 0;
    for (int di = 0; di < nd; di++) dmax = dims[di] > dmax ? dims[di] : dmax;
    const double nblk = ceil((double)S / 128.0), bhsd = (double)B * (double)H * (double)S * (double)dmax;
    if (!cli_host_fits("attention", 3.0 * bhsd * 2.0 + bhsd / (double)S * nblk * 2.0 + (double)B * (double)H * nblk * nblk))
        return CLI_FAIL;
    bsk_context *ctx;
    cublasHandle_t blas;
    cli_gpu_timer timer;
    if (attn_bench_open("attention", &ctx, &blas, &timer)) return CLI_FAIL;
    int rc, failures = 0;
    const double gemm_tflops = attn_bench_cublas_tflops(blas, &timer, iters); /* the dense reference */

    result res[2 * MAXD_ATTN_LIST * 8];
    int nres = 0;
    for (int di = 0; di < nd; di++) {
        int64_t D = dims[di], n = B * S * H * D;
        int32_t bs = 128;
        size_t bytes = (size_t)n * 2;
        void *hq = malloc(bytes), *hk = malloc(bytes), *hv = malloc(bytes);
        void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL;
        float *dlse = NULL;
        if (!hq || !hk || !hv || cudaMalloc(&dq, bytes) || cudaMalloc(&dk, bytes) || cudaMalloc(&dv, bytes) ||
            cudaMalloc(&dout, bytes) || cudaMalloc((void **)&dlse, (size_t)(B * H * S) * 4)) {
            fprintf(stderr, "bsk attention: out of memory at D=%lld\n", (long long)D);
            failures++;
            free(hq); free(hk); free(hv); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dlse);
            continue;
        }
        cli_fill_random(hq, BSK_BF16, n, 11 + (uint64_t)D);
        cli_fill_random(hk, BSK_BF16, n, 12 + (uint64_t)D);
        cli_fill_random(hv, BSK_BF16, n, 13 + (uint64_t)D);
        cudaMemcpy(dq, hq, bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(dk, hk, bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(dv, hv, bytes, cudaMemcpyHostToDevice);
        /* pre-pooled Q and K for the pooled gate (one row per 128-row block) */
        const int64_t nblk = (S + bs - 1) / bs;
        const size_t pbytes = (size_t)(B * nblk * H * D) * 2;
        void *hpq = pool_rows_bf16(hq, B, S, H, D, bs), *hpk = pool_rows_bf16(hk, B, S, H, D, bs), *dpq = NULL, *dpk = NULL;
        if (!hpq || !hpk || cudaMalloc(&dpq, pbytes) || cudaMalloc(&dpk, pbytes) ||
            cudaMemcpy(dpq, hpq, pbytes, cudaMemcpyHostToDevice) || cudaMemcpy(dpk, hpk, pbytes, cudaMemcpyHostToDevice)) {
            cudaFree(dpq); cudaFree(dpk);
            dpq = dpk = NULL; /* the pooled gate is not timed */
        }
        free(hpq); free(hpk);
        for (int causal = 0; causal < 2; causal++)
            for (int x = 0; x < ndens; x++) {
                result *r = &res[nres++];
                memset(r, 0, sizeof *r);
                r->D = D; r->causal = causal; r->density = dens[x];
                r->ms = r->tflops = r->err = r->gate_ms = r->gate_share = NAN;
                r->gate_pooled_ms = r->gate_pooled_share = NAN;
                r->seq_attn_ms = r->seq_ms = r->seq_nopdl_ms = r->seq_marg_ms = r->seq_marg_nopdl_ms = NAN;
                r->seq_attn_nopdl_ms = r->seq_attn_pdl_diff_ms = NAN;
                r->tflops_var[0] = r->tflops_var[1] = r->tflops_var[2] = r->tflops_mma = NAN;
                r->tflops_persist = r->tflops_per_item = NAN;
                bsk_attn_layout hl, dl;
                memset(&dl, 0, sizeof dl);
                r->status = make_layout(S, bs, (int32_t)B, (int32_t)H, dens[x], causal, 1000 + (uint64_t)x, &hl);
                if (r->status) { failures++; continue; }
                const int64_t mq = bsk_attn_layout_mq(&hl);
                double flop;
                attn_bench_tiles(&hl, B, H, bs, D, &r->kept_tiles, &r->density_actual, &flop);
                r->status = bsk_attn_layout_clone(&hl, BSK_MEM_DEVICE, &dl);
                bsk_attention_params p = attn_bench_params(dq, dk, dv, dout, dlse, &dl, B, S, H, D, causal);
                attn_work w = {ctx, &p};
                if (!r->status) {
                    bsk__attn_variant = variant;
                    r->ms = cli_time_gpu(&timer, attn_run, &w, warmup, iters, &rc);
                    bsk__attn_variant = 0;
                    if (rc) r->status = rc > 0 ? (bsk_status)rc : BSK_ERR_CUDA;
                    r->kernel = bsk_last_kernel(ctx);
                    r->tflops = flop / (r->ms * 1e-3) * 1e-12;
                }
                if (!r->status && compare) {
                    /* the mma.sync kernel's default build, and the Hopper kernel's builds 5 and 7 (attention_hopper.cu;
                       the JSON keys tflops_persist / tflops_per_item are their historical names), on the same problem */
                    double *dst[3] = {&r->tflops_mma, &r->tflops_persist, &r->tflops_per_item};
                    const int cv[3] = {3, 5, 7};
                    for (int k = 0; k < 3; k++) {
                        bsk__attn_variant = cv[k];
                        double ms = cli_time_gpu(&timer, attn_run, &w, warmup, iters, &rc);
                        bsk__attn_variant = 0;
                        if (!rc) *dst[k] = flop / (ms * 1e-3) * 1e-12;
                    }
                }
                if (!r->status) r->tflops_var[0] = r->tflops;
                for (int var = 1; var < 3 && !r->status && variants; var++) {
                    bsk__attn_variant = var;
                    double ms = cli_time_gpu(&timer, attn_run, &w, warmup, iters, &rc);
                    bsk__attn_variant = 0;
                    if (!rc) r->tflops_var[var] = flop / (ms * 1e-3) * 1e-12;
                }
                if (!r->status) {
                    if (compare) { /* the spot check below looks at the timed kernel's output */
                        bsk__attn_variant = variant;
                        rc = attn_run(&w);
                        bsk__attn_variant = 0;
                        if (rc || cudaDeviceSynchronize() != cudaSuccess) r->status = BSK_ERR_CUDA;
                    }
                }
                if (!r->status) {
                    bsk_attention_params hp = p;
                    hp.q.data = hq; hp.k.data = hk; hp.v.data = hv;
                    hp.q.mem = hp.k.mem = hp.v.mem = BSK_MEM_HOST;
                    hp.layout = &hl;
                    r->err = spot_check(&hp, dout, 4);
                    if (!(r->err <= 2e-2)) failures++;
                }
                /* the gate producing a layout of the same density */
                if (!r->status && dens[x] < 1.0) {
                    bsk_topk_params gp;
                    memset(&gp, 0, sizeof gp);
                    gp.q = p.q; gp.k = p.k;
                    gp.top_k = (int32_t)llround(dens[x] * (double)mq);
                    if (gp.top_k < 2) gp.top_k = 2;
                    gp.causal = causal;
                    gp.keep_first = 1;
                    gp.keep_diagonal = 1;
                    bsk_attn_layout gl;
                    if (!bsk_attn_layout_alloc(S, S, bs, bs, (int32_t)B, (int32_t)H, gp.top_k, BSK_MEM_DEVICE, &gl)) {
                        gate_work gw = {ctx, &gp, &gl};
                        r->gate_ms = cli_time_gpu(&timer, gate_run, &gw, warmup, iters, &rc);
                        if (rc) r->gate_ms = NAN;
                        r->gate_share = r->gate_ms / r->ms;
                        if (dpq && dpk) { /* the same gate on pre-pooled input: scores + top-k + layout only */
                            bsk_topk_params pp = gp;
                            pp.pooled = 1;
                            pp.q = bsk_attn_tensor_bshd(dpq, B, nblk, H, D, BSK_BF16, BSK_MEM_DEVICE);
                            pp.k = bsk_attn_tensor_bshd(dpk, B, nblk, H, D, BSK_BF16, BSK_MEM_DEVICE);
                            gate_work pw = {ctx, &pp, &gl};
                            r->gate_pooled_ms = cli_time_gpu(&timer, gate_run, &pw, warmup, iters, &rc);
                            if (rc) r->gate_pooled_ms = NAN;
                            r->gate_pooled_share = r->gate_pooled_ms / r->ms;
                        }
                        bsk_attn_layout_free(&gl);
                    }
                }
                if (r->status) failures++;
                printf("D=%3lld %-9s d=%.2f (actual %.3f, %lld tiles): %8.3f ms %7.1f TFLOPS (%.0f%% of cuBLAS) err %.1e  "
                       "gate %.3f ms (%.1f%%) pooled %.4f ms (%.1f%%) [%s]%s%s",
                       (long long)D, causal ? "causal" : "non-caus", dens[x], r->density_actual, (long long)r->kept_tiles,
                       r->ms, r->tflops, 100.0 * r->tflops / gemm_tflops, r->err, r->gate_ms, 100.0 * r->gate_share,
                       r->gate_pooled_ms, 100.0 * r->gate_pooled_share,
                       r->kernel ? r->kernel : "none", r->status ? "  FAILED: " : "", r->status ? bsk_status_string(r->status) : "");
                if (compare)
                    printf("  [mma.sync %.1f | hopper alt options %.1f | hopper no options %.1f]", r->tflops_mma, r->tflops_persist,
                           r->tflops_per_item);
                if (variants) printf("  [variants 0/1/2: %.1f / %.1f / %.1f]", r->tflops_var[0], r->tflops_var[1], r->tflops_var[2]);
                printf("\n");
                fflush(stdout);
                bsk_attn_layout_free(&hl);
                bsk_attn_layout_free(&dl);
            }
        /* second pass, after every config's timings above (a long run of back-to-back sequences leaves the GPU
           slower for a while after it: in the first pass it slowed the next config's attention timing by up to
           12 %): the pooled gate's marginal cost in the real sequence, (gate -> attention) - attention on the
           layout the gate writes, round-robin with the attention alone, each with and without PDL */
        for (int i = nres - 2 * ndens; i < nres && seq_iters > 0 && dpq && dpk; i++) {
            result *r = &res[i];
            const int causal = r->causal;
            const int x = (i - (nres - 2 * ndens)) % ndens;
            if (r->status || !(dens[x] < 1.0) || !isfinite(r->gate_pooled_ms)) continue;
            const int64_t mq = nblk;
            bsk_attention_params p = attn_bench_params(dq, dk, dv, dout, dlse, NULL, B, S, H, D, causal);
            bsk_topk_params pp;
            memset(&pp, 0, sizeof pp);
            pp.top_k = (int32_t)llround(dens[x] * (double)mq);
            if (pp.top_k < 2) pp.top_k = 2;
            pp.causal = causal;
            pp.keep_first = 1;
            pp.keep_diagonal = 1;
            pp.pooled = 1;
            pp.q = bsk_attn_tensor_bshd(dpq, B, nblk, H, D, BSK_BF16, BSK_MEM_DEVICE);
            pp.k = bsk_attn_tensor_bshd(dpk, B, nblk, H, D, BSK_BF16, BSK_MEM_DEVICE);
            bsk_attn_layout gl;
            if (bsk_attn_layout_alloc(S, S, bs, bs, (int32_t)B, (int32_t)H, pp.top_k, BSK_MEM_DEVICE, &gl)) continue;
            if (!bsk_topk_block_layout(ctx, &pp, &gl)) { /* gl holds the gate's layout before the attention alone runs */
                p.layout = &gl;
                seq_work aw1 = {ctx, NULL, &gl, &p, 1}, aw0 = {ctx, NULL, &gl, &p, 0};
                seq_work sw1 = {ctx, &pp, &gl, &p, 1}, sw0 = {ctx, &pp, &gl, &p, 0};
                cli_work_fn fns[4] = {seq_run, seq_run, seq_run, seq_run};
                void *args[4] = {&aw1, &sw1, &sw0, &aw0}; /* attention alone, with / without PDL */
                double med[4], dif[4];
                if (!cli_time_gpu_rr(&timer, fns, args, 4, warmup, seq_iters, med, dif)) {
                    r->seq_attn_ms = med[0]; r->seq_ms = med[1]; r->seq_nopdl_ms = med[2];
                    r->seq_marg_ms = dif[1]; r->seq_marg_nopdl_ms = dif[2];
                    r->seq_attn_nopdl_ms = med[3]; r->seq_attn_pdl_diff_ms = -dif[3];
                }
            }
            bsk_attn_layout_free(&gl);
            if (isfinite(r->seq_ms))
                printf("  seq D=%lld %s d=%.2f: attn %.1f us, gate+attn %.1f PDL / %.1f no PDL: marginal gate %.2f us "
                       "(%.1f%%) / %.2f us (%.1f%%), isolated gate %.2f us (%.1f%%)\n",
                       (long long)D, causal ? "causal" : "non-caus", dens[x], 1e3 * r->seq_attn_ms, 1e3 * r->seq_ms,
                       1e3 * r->seq_nopdl_ms, 1e3 * r->seq_marg_ms, 100.0 * r->seq_marg_ms / r->seq_attn_ms,
                       1e3 * r->seq_marg_nopdl_ms, 100.0 * r->seq_marg_nopdl_ms / r->seq_attn_ms, 1e3 * r->gate_pooled_ms,
                       100.0 * r->gate_pooled_share);
            if (isfinite(r->seq_ms))
                printf("  seq D=%lld %s d=%.2f: attention alone %.1f us PDL / %.1f us no PDL (paired: PDL %+.2f us); "
                       "marginal gate / the attention timed above at this density: %.1f%% PDL, %.1f%% no PDL\n",
                       (long long)D, causal ? "causal" : "non-caus", dens[x], 1e3 * r->seq_attn_ms, 1e3 * r->seq_attn_nopdl_ms,
                       1e3 * r->seq_attn_pdl_diff_ms, 100.0 * r->seq_marg_ms / r->ms, 100.0 * r->seq_marg_nopdl_ms / r->ms);
            fflush(stdout);
        }
        free(hq); free(hk); free(hv);
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dlse); cudaFree(dpq); cudaFree(dpk);
    }

    /* ---- small config latency: B=2 H=8 S=512 D=64 fp16, dense, non-causal and causal */
    double small_cold[2] = {NAN, NAN}, small_warm[2] = {NAN, NAN};
    const char *small_kernel = "none";
    {
        int64_t sB = 2, sH = 8, sS = 512, sD = 64, n = sB * sS * sH * sD;
        void *h = malloc((size_t)n * 2), *d[4] = {NULL, NULL, NULL, NULL};
        float *dl = NULL;
        int ok = h != NULL && cudaMalloc((void **)&dl, (size_t)(sB * sH * sS) * 4) == cudaSuccess;
        for (int i = 0; i < 4 && ok; i++) ok = cudaMalloc(&d[i], (size_t)n * 2) == cudaSuccess;
        if (ok) {
            cli_fill_random(h, BSK_F16, n, 77);
            for (int i = 0; i < 3; i++) cudaMemcpy(d[i], h, (size_t)n * 2, cudaMemcpyHostToDevice);
            for (int causal = 0; causal < 2; causal++) {
                bsk_attn_layout hl, dlay;
                if ((causal ? bsk_attn_layout_causal(sS, sS, 64, 64, 0, &hl) : bsk_attn_layout_dense(sS, sS, 64, 64, &hl))) continue;
                if (bsk_attn_layout_clone(&hl, BSK_MEM_DEVICE, &dlay)) { bsk_attn_layout_free(&hl); continue; }
                bsk_attention_params p;
                memset(&p, 0, sizeof p);
                p.q = bsk_attn_tensor_bshd(d[0], sB, sS, sH, sD, BSK_F16, BSK_MEM_DEVICE);
                p.k = bsk_attn_tensor_bshd(d[1], sB, sS, sH, sD, BSK_F16, BSK_MEM_DEVICE);
                p.v = bsk_attn_tensor_bshd(d[2], sB, sS, sH, sD, BSK_F16, BSK_MEM_DEVICE);
                p.o = bsk_attn_tensor_bshd(d[3], sB, sS, sH, sD, BSK_F16, BSK_MEM_DEVICE);
                p.lse = dl;
                p.layout = &dlay;
                p.causal = causal;
                attn_work w = {ctx, &p};
                bsk__attn_variant = variant;
                small_cold[causal] = cli_time_gpu(&timer, attn_run, &w, 5, iters * 4, &rc) * 1e3;
                /* warm: back-to-back launches, mean */
                cudaEvent_t e0, e1;
                cudaEventCreate(&e0);
                cudaEventCreate(&e1);
                for (int i = 0; i < 10; i++) bsk_attention_forward(ctx, &p);
                cudaEventRecord(e0, NULL);
                for (int i = 0; i < 200; i++) bsk_attention_forward(ctx, &p);
                cudaEventRecord(e1, NULL);
                cudaEventSynchronize(e1);
                float ms = 0;
                cudaEventElapsedTime(&ms, e0, e1);
                small_warm[causal] = ms * 1e3 / 200.0;
                small_kernel = bsk_last_kernel(ctx);
                bsk__attn_variant = 0;
                cudaEventDestroy(e0);
                cudaEventDestroy(e1);
                printf("small B=2 H=8 S=512 D=64 fp16 %s: %.1f us cold L2 (median), %.1f us warm (mean of 200 back-to-back)\n",
                       causal ? "causal" : "non-causal", small_cold[causal], small_warm[causal]);
                bsk_attn_layout_free(&hl);
                bsk_attn_layout_free(&dlay);
            }
        }
        free(h);
        for (int i = 0; i < 4; i++) cudaFree(d[i]);
        cudaFree(dl);
    }

    cli_json j;
    FILE *f = attn_bench_json_begin(&j, "attention", json, B, H, S);
    if (f) {
        cli_json_int(&j, "block", 128);
        cli_json_str(&j, "dtype", "bf16");
        cli_json_str(&j, "layout", "random per (batch, head); causal keeps the diagonal; density 1 = dense/causal builder");
        cli_json_str(&j, "flop", "4 * kept_tiles * 128 * 128 * D over all (batch, head) layouts; diagonal tiles counted whole");
        cli_json_str(&j, "timing", "CUDA events, median, L2 flushed before each iteration");
        cli_json_int(&j, "iters", iters);
        cli_json_int(&j, "seq_iters", seq_iters);
        cli_json_int(&j, "variant", variant);
        cli_json_end(&j);
        cli_json_num(&j, "cublas_bf16_gemm_8192_tflops", gemm_tflops);
        cli_json_arr(&j, "results");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            cli_json_obj(&j, NULL);
            cli_json_int(&j, "D", r->D);
            cli_json_str(&j, "causal", r->causal ? "yes" : "no");
            cli_json_num(&j, "density", r->density);
            cli_json_num(&j, "density_actual", r->density_actual);
            cli_json_int(&j, "kept_tiles", r->kept_tiles);
            cli_json_num(&j, "ms", r->ms);
            cli_json_num(&j, "tflops", r->tflops);
            cli_json_num(&j, "share_of_cublas", r->tflops / gemm_tflops);
            cli_json_num(&j, "tflops_variant0_4w_32rows", r->tflops_var[0]);
            cli_json_num(&j, "tflops_variant1_8w_16rows_2cta", r->tflops_var[1]);
            cli_json_num(&j, "tflops_variant2_8w_16rows_1cta", r->tflops_var[2]);
            cli_json_num(&j, "tflops_mma_default_build", r->tflops_mma);
            cli_json_num(&j, "tflops_hopper_alt_options", r->tflops_persist); /* variant 5 */
            cli_json_num(&j, "tflops_hopper_no_options", r->tflops_per_item); /* variant 7: the session-3 kernel */
            cli_json_num(&j, "spot_check_rel_err", r->err);
            cli_json_num(&j, "gate_ms", r->gate_ms);
            cli_json_num(&j, "gate_share_of_attention", r->gate_share);
            cli_json_num(&j, "gate_pooled_ms", r->gate_pooled_ms);
            cli_json_num(&j, "gate_pooled_share_of_attention", r->gate_pooled_share);
            cli_json_num(&j, "seq_attention_on_gate_layout_ms", r->seq_attn_ms);
            cli_json_num(&j, "seq_gate_then_attention_ms", r->seq_ms);
            cli_json_num(&j, "seq_gate_then_attention_no_pdl_ms", r->seq_nopdl_ms);
            cli_json_num(&j, "seq_gate_marginal_ms", r->seq_marg_ms);
            cli_json_num(&j, "seq_gate_marginal_share", r->seq_marg_ms / r->seq_attn_ms);
            cli_json_num(&j, "seq_gate_marginal_no_pdl_ms", r->seq_marg_nopdl_ms);
            cli_json_num(&j, "seq_attention_on_gate_layout_no_pdl_ms", r->seq_attn_nopdl_ms);
            cli_json_num(&j, "seq_attention_pdl_minus_no_pdl_ms", r->seq_attn_pdl_diff_ms);
            cli_json_str(&j, "kernel", r->kernel ? r->kernel : "none");
            cli_json_str(&j, "status", bsk_status_string(r->status));
            cli_json_end(&j);
        }
        cli_json_end(&j);
        cli_json_obj(&j, "small_b2_h8_s512_d64_f16");
        cli_json_num(&j, "noncausal_us_cold_l2", small_cold[0]);
        cli_json_num(&j, "noncausal_us_warm", small_warm[0]);
        cli_json_num(&j, "causal_us_cold_l2", small_cold[1]);
        cli_json_num(&j, "causal_us_warm", small_warm[1]);
        cli_json_str(&j, "kernel", small_kernel);
        cli_json_end(&j);
        attn_bench_json_finish(&j, f, json);
    }
    attn_bench_close(ctx, blas, &timer);
    return failures ? CLI_FAIL : CLI_OK;
}
#endif

int cmd_attention(int argc, char **argv)
{
    const char *json = "bench/results/attention.json", *dims_s = "128,64", *dens_s = "0.10,0.25,0.50,1.0";
    int64_t iters = 5, warmup = 2, B = 4, H = 16, S = 8192, seq_iters = 41, pdl = 1;
    int variants = 0, quick = 0, compare = 0;
    int64_t variant = 0;
    cli_opt opts[] = {
        CLI_OPT_STR("json", &json, "JSON output file"),
        CLI_OPT_INT("iters", &iters, 1, 1000, "timed iterations per config (median)"),
        CLI_OPT_INT("warmup", &warmup, 0, 100, "untimed runs first"),
        CLI_OPT_INT("batch", &B, 1, 64, "batch"),
        CLI_OPT_INT("heads", &H, 1, 128, "heads"),
        CLI_OPT_INT("seq", &S, 128, 131072, "sequence length"),
        CLI_OPT_STR("dims", &dims_s, "head dims 64..256, e.g. 128,64 (256: the mma.sync kernel)"),
        CLI_OPT_STR("densities", &dens_s, "tile densities, e.g. 0.10,0.25,0.50,1.0"),
        CLI_OPT_FLAG("variants", &variants, "also time the other builds of the 128-row kernel (see attention_fwd.cu)"),
        CLI_OPT_FLAG("quick", &quick, "S=2048, one iteration"),
        CLI_OPT_INT("variant", &variant, 0, 8,
                    "kernel choice (0 default, 3 mma.sync only, 4 Hopper kernel first; 5, 7, 8 its other builds)"),
        CLI_OPT_INT("pdl", &pdl, 0, 1, "1: the Hopper attention launched with programmatic dependent launch (default), 0: without"),
        CLI_OPT_INT("seq-iters", &seq_iters, 0, 1000,
                    "round-robin iterations of attention alone and pooled gate -> attention, each with and without PDL (0: skip)"),
        CLI_OPT_FLAG("compare", &compare, "also time the mma.sync kernel and the Hopper kernel's other builds (variants 5 and 7: see attention_hopper.cu) on every config"),
    };
    char *pos[1];
    int npos;
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                       "bsk attention [--json FILE] [--iters N] [--dims 128,64] [--densities ...] [--variants]",
                       "Block-sparse attention forward benchmark (GPU): TFLOPS on kept tiles vs cuBLAS dense GEMM in the\n"
                       "same run, top-k gate time as a share of attention, small-config latency.",
                       pos, 1, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    if (npos == 1 && strcmp(pos[0], "bench") != 0) return cli_usage_error("attention", "unknown argument '%s'", pos[0]);
    int64_t dims[MAXD_ATTN_LIST];
    double dens[8];
    int nd = cli_list_int("attention", "dims", dims_s, 64, 256, dims, MAXD_ATTN_LIST);
    int ndens = cli_list_real("attention", "densities", dens_s, 0.001, 1.0, dens, 8);
    if (nd < 0 || ndens < 0) return CLI_USAGE;
    if (quick) { S = 2048; iters = 1; warmup = 1; seq_iters = 1; }
#ifdef BSK_WITH_CUDA
    bsk__attn_pdl = (int)pdl;
    if (!bench_json_writable(json, "bsk attention")) return CLI_FAIL; /* before the run, not after it */
    return run(json, (int)iters, (int)warmup, B, H, S, dims, nd, dens, ndens, variants, (int)variant, compare, (int)seq_iters);
#else
    (void)variants;
    (void)seq_iters;
    (void)pdl;
    (void)variant;
    (void)compare;
    fprintf(stderr, "bsk attention: this build has no CUDA backend\n");
    return CLI_FAIL;
#endif
}
