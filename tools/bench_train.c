/* bench_train.c — `bsk bench train`: one training step of a block-sparse linear layer and its dense
   equivalent, on the same data in one run.

   Layer: Y = W·X with W a BSR M x K (the weights), X dense K x N (activations), all row-major. A step is
     fwd   Y  = W·X                       bsk_spmm(op N)                 cuBLAS: Y = Wd·X
     dX    dX = Wᵀ·dY                     bsk_spmm(op T)                 cuBLAS: the same GEMM, W's transposed flag
     dW    dW = (dY·Xᵀ) on W's pattern    bsk_sddmm(X := dY, Y := X)     cuBLAS: the dense dY·Xᵀ (M x K)
     step  fwd + dX + dW back to back, one timed region                  cuBLAS: the three GEMMs back to back
   where Wd is W dense (M x K). Each product is timed alone (CUDA events, warm-up, median, L2 flushed before
   each timed call — cli_time_gpu) and the step as a whole. Every bsk product is first run once on poisoned
   outputs and checked, every element, against cuBLAS (fp32 output) on the dense expansion of this W;
   dW's padding entries must be exactly 0. A wrong result gets no figure and makes the exit code 1.
   The dense baselines run on a fully random W (no zeros), timed once per shape.
   Without a GPU (or --device cpu) the same flow runs on the CPU backend against OpenBLAS (f32 only), so
   the whole command can be exercised on any machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "internal.h" /* bsk__load: reading half-precision results on the host */

#ifdef BSK_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef BSK_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#endif

#define MAXLIST 16

enum { P_FWD = 0, P_DX = 1, P_DW = 2, P_STEP = 3, NPROD = 4 };
static const char *const prod_key[NPROD] = {"fwd", "dx", "dw", "step"};
static const char *const prod_what[NPROD] = {"Y = W*X (bsk_spmm op N)", "dX = W^T*dY (bsk_spmm op T)",
                                             "dW = dY*X^T on W's pattern (bsk_sddmm)", "fwd + dX + dW back to back"};

/* What one configuration measured beyond the grid row (shape, block, density, pattern statistics). */
typedef struct train_row {
    bench_fig bsk[NPROD], dense[NPROD];
    double E[NPROD];      /* bsk effective rate / dense rate; for the step: over the three products      */
    double speedup;       /* dense step ms / bsk step ms                                                  */
    double bsk_sum_ms;    /* the three bsk products timed apart, summed                                   */
    double dense_sum_ms;  /* the same for cuBLAS                                                          */
    const char *kernel[3];
} train_row;

typedef struct train_state {
    bench_state g; /* the grid and the shared settings (g.rows[i]: shape, block, density, pattern stats) */
    train_row *t;
    int cache;     /* bsk_set_pattern_cache */
    int failures;
    double flush_bytes;
} train_state;

/* ---------------------------------------------------------------- the device (GPU, or host memory) */

typedef struct tdev {
    int gpu;
    bsk_context *ctx;
    int broken; /* a sticky CUDA error: nothing more can run */
#ifdef BSK_WITH_CUDA
    cublasHandle_t blas;
    cli_gpu_timer timer;
#endif
} tdev;

#ifdef BSK_WITH_CUDA
static cudaDataType cuda_type(bsk_dtype t) { return t == BSK_F32 ? CUDA_R_32F : t == BSK_F16 ? CUDA_R_16F : CUDA_R_16BF; }

/* 1 when e is success; otherwise the note says what failed, and a sticky error marks the device broken. */
static int cuda_ok(tdev *d, cudaError_t e, char *note, size_t n, const char *what)
{
    if (e == cudaSuccess) return 1;
    if (note) snprintf(note, n, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) d->broken = 1;
    return 0;
}
#endif

static void *dv_alloc(tdev *d, size_t bytes)
{
    bytes = bytes ? bytes : 16;
#ifdef BSK_WITH_CUDA
    if (d->gpu) {
        void *p = NULL;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        return p;
    }
#endif
    (void)d;
    return malloc(bytes);
}

static void dv_free(tdev *d, void *p)
{
    if (!p) return;
#ifdef BSK_WITH_CUDA
    if (d->gpu) {
        (void)cudaFree(p);
        return;
    }
#endif
    (void)d;
    free(p);
}

/* Copies and fills; 1 on success (else the note says why). */
static int dv_put(tdev *d, void *dst, const void *src, size_t bytes, char *note, size_t n)
{
#ifdef BSK_WITH_CUDA
    if (d->gpu) return cuda_ok(d, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), note, n, "upload");
#endif
    (void)d, (void)note, (void)n;
    memcpy(dst, src, bytes);
    return 1;
}

static int dv_get(tdev *d, void *dst, const void *src, size_t bytes, char *note, size_t n)
{
#ifdef BSK_WITH_CUDA
    if (d->gpu) return cuda_ok(d, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), note, n, "copy back");
#endif
    (void)d, (void)note, (void)n;
    memcpy(dst, src, bytes);
    return 1;
}

/* All ones: NaN in f32, f16 and bf16, so an unwritten output cannot pass a check. */
static int dv_poison(tdev *d, void *p, size_t bytes, char *note, size_t n)
{
#ifdef BSK_WITH_CUDA
    if (d->gpu) return cuda_ok(d, cudaMemset(p, 0xff, bytes), note, n, "poison");
#endif
    (void)d, (void)note, (void)n;
    memset(p, 0xff, bytes);
    return 1;
}

static int dv_sync(tdev *d, char *note, size_t n)
{
#ifdef BSK_WITH_CUDA
    if (d->gpu) return cuda_ok(d, cudaDeviceSynchronize(), note, n, "run");
#endif
    (void)d, (void)note, (void)n;
    return 1;
}

static double dv_time(tdev *d, cli_work_fn fn, void *arg, int warmup, int iters, int *rc)
{
#ifdef BSK_WITH_CUDA
    if (d->gpu) return cli_time_gpu(&d->timer, fn, arg, warmup, iters, rc);
#endif
    (void)d;
    return cli_time_host(fn, arg, warmup, iters, rc);
}

/* ---------------------------------------------------------------- work items */

/* Row-major C (m x n) = op(A)·op(B): A stored m x k (ta = 0) or k x m (ta = 1), B stored k x n (tb = 0) or
   n x k (tb = 1). cuBLAS is column-major: it computes Cᵀ = op(B)ᵀ·op(A)ᵀ on the same buffers, so B is its
   left operand and the transposed flags carry over. */
typedef struct gemm_w {
    tdev *d;
    int ta, tb;
    int64_t m, n, k;
    const void *A, *B;
    void *C;
    bsk_dtype in, out;
    int st; /* the library's status of the last call (cuBLAS) */
} gemm_w;

static int gemm_run(void *p)
{
    gemm_w *w = (gemm_w *)p;
#ifdef BSK_WITH_CUDA
    if (w->d->gpu) {
        const float one = 1.0f, zero = 0.0f;
        w->st = (int)cublasGemmEx(w->d->blas, w->tb ? CUBLAS_OP_T : CUBLAS_OP_N, w->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  (int)w->n, (int)w->m, (int)w->k, &one, w->B, cuda_type(w->in),
                                  (int)(w->tb ? w->k : w->n), w->A, cuda_type(w->in), (int)(w->ta ? w->m : w->k), &zero,
                                  w->C, cuda_type(w->out), (int)w->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return w->st != 0;
    }
#endif
    /* host: f32 only (the command refuses anything else on the CPU) */
    const float *A = (const float *)w->A, *B = (const float *)w->B;
    float *C = (float *)w->C;
    w->st = 0;
#ifdef BSK_HAVE_CBLAS
    cblas_sgemm(CblasRowMajor, w->ta ? CblasTrans : CblasNoTrans, w->tb ? CblasTrans : CblasNoTrans, (int)w->m, (int)w->n,
                (int)w->k, 1.0f, A, (int)(w->ta ? w->m : w->k), B, (int)(w->tb ? w->k : w->n), 0.0f, C, (int)w->n);
#else
    for (int64_t i = 0; i < w->m; i++)
        for (int64_t j = 0; j < w->n; j++) {
            float acc = 0;
            for (int64_t p = 0; p < w->k; p++)
                acc += (w->ta ? A[p * w->m + i] : A[i * w->k + p]) * (w->tb ? B[j * w->k + p] : B[p * w->n + j]);
            C[i * w->n + j] = acc;
        }
#endif
    return 0;
}

static const char *gemm_error(const gemm_w *w)
{
#ifdef BSK_WITH_CUDA
    if (w->d->gpu) return cublasGetStatusString((cublasStatus_t)w->st);
#endif
    (void)w;
    return "sgemm failed";
}

typedef struct dstep_w {
    gemm_w *g[3];
} dstep_w;

static int dense_step_run(void *p)
{
    dstep_w *w = (dstep_w *)p;
    for (int i = 0; i < 3; i++)
        if (gemm_run(w->g[i])) return 1;
    return 0;
}

/* One bsk product, or the whole step. */
typedef struct bsk_w {
    bsk_context *ctx;
    int which;
    const bsk_bsr *W;
    bsk_bsr *dW; /* W's pattern, its own values */
    const bsk_dense *X, *dY;
    bsk_dense *Y, *dX;
    bsk_status st;
} bsk_w;

static int bsk_run(void *p)
{
    bsk_w *w = (bsk_w *)p;
    bsk_status s = BSK_SUCCESS;
    if (w->which == P_FWD || w->which == P_STEP) s = bsk_spmm(w->ctx, BSK_OP_N, 1.0f, w->W, w->X, 0.0f, w->Y);
    if (!s && (w->which == P_DX || w->which == P_STEP)) s = bsk_spmm(w->ctx, BSK_OP_T, 1.0f, w->W, w->dY, 0.0f, w->dX);
    if (!s && (w->which == P_DW || w->which == P_STEP)) s = bsk_sddmm(w->ctx, 1.0f, w->dY, w->X, 0.0f, w->dW);
    w->st = s;
    return s != BSK_SUCCESS;
}

/* ---------------------------------------------------------------- checks */

static double cmp_dense(const void *got, bsk_dtype gt, const float *ref, int64_t n)
{
    cli_err e = {0};
    for (int64_t i = 0; i < n; i++) cli_err_add(&e, bsk__load(got, gt, i), ref[i]);
    return cli_err_value(&e);
}

/* dW's values (nnzb blocks) against the dense M x K reference on the entries inside the matrix; padding
   entries must be exactly 0 (counted in *pad_bad). */
static double cmp_dw(const bsk_bsr *A, const void *vals, bsk_dtype vt, const float *ref, int64_t *pad_bad)
{
    cli_err e = {0};
    int64_t mb = bsk_bsr_mb(A), br = A->block_rows, bc = A->block_cols;
    *pad_bad = 0;
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = A->row_ptr[i]; k < A->row_ptr[i + 1]; k++)
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++) {
                    int64_t gr = i * br + r, gc = (int64_t)A->col_idx[k] * bc + c;
                    double v = bsk__load(vals, vt, ((int64_t)k * br + r) * bc + c);
                    if (gr >= A->rows || gc >= A->cols) {
                        if (v != 0.0) (*pad_bad)++;
                        continue;
                    }
                    cli_err_add(&e, v, ref[gr * A->cols + gc]);
                }
    return cli_err_value(&e);
}

/* ---------------------------------------------------------------- output */

/* A rate cell: TFLOPS on the GPU, GFLOPS on the CPU (scale 1e3). */
static void cell(char *buf, size_t n, const bench_fig *f, double scale)
{
    if (f->state == FIG_OK) snprintf(buf, n, "%.1f", f->tflops * scale);
    else if (f->state == FIG_WRONG) snprintf(buf, n, "WRONG");
    else if (f->state == FIG_FAIL) snprintf(buf, n, "fail");
    else snprintf(buf, n, "-");
}

static void write_json(const train_state *s, int upto)
{
    const bench_state *b = &s->g;
    char *tmp;
    FILE *f = bench_json_open(b->json, "bsk bench train", &tmp);
    if (!f) return;
    cli_json j;
    cli_json_begin(&j, f);
    cli_json_meta(&j, "bsk bench train");
    cli_json_obj(&j, "config");
    cli_json_str(&j, "op", "train");
    cli_json_str(&j, "device", b->device == CLI_DEV_CUDA ? "cuda" : "cpu");
    cli_json_str(&j, "dtype", cli_dtype_name(b->dt));
    cli_json_str(&j, "out_dtype", cli_dtype_name(b->ot));
    cli_json_str(&j, "baseline", b->device == CLI_DEV_CUDA ? "cublasGemmEx (fp32 compute), fully random W" : "cblas_sgemm");
    cli_json_int(&j, "iters", b->iters);
    cli_json_int(&j, "warmup", b->warmup);
    cli_json_num(&j, "l2_flush_bytes", s->flush_bytes);
    cli_json_str(&j, "timing", b->device == CLI_DEV_CUDA ? "CUDA events, median, L2 flushed before each timed call"
                                                          : "wall clock, median");
    cli_json_str(&j, "pattern_cache", s->cache ? "on" : "off");
    cli_json_obj(&j, "products");
    for (int p = 0; p < NPROD; p++) cli_json_str(&j, prod_key[p], prod_what[p]);
    cli_json_end(&j);
    cli_json_str(&j, "E", "bsk effective TFLOPS on kept blocks / dense TFLOPS of the same product, same run");
    cli_json_str(&j, "speedup", "dense step ms / bsk step ms");
    cli_json_end(&j);
    cli_json_arr(&j, "results");
    for (int i = 0; i < upto; i++) {
        const bench_row *r = &b->rows[i];
        const train_row *t = &s->t[i];
        cli_json_obj(&j, NULL);
        cli_json_int(&j, "M", r->m);
        cli_json_int(&j, "N", r->n);
        cli_json_int(&j, "K", r->k);
        cli_json_int(&j, "block", r->b);
        cli_json_num(&j, "density", r->density);
        cli_json_str(&j, "pattern", cli_pattern_name(r->pattern));
        cli_json_int(&j, "nnzb", r->nnzb);
        cli_json_num(&j, "density_actual", r->density_actual);
        cli_json_int(&j, "row_min", r->row_min);
        cli_json_int(&j, "row_max", r->row_max);
        cli_json_num(&j, "dense_flop", bench_dense_flop(r));    /* per product */
        cli_json_num(&j, "sparse_flop", bench_sparse_flop(b, r)); /* per product */
        for (int p = 0; p < NPROD; p++) {
            cli_json_obj(&j, prod_key[p]);
            bench_write_fig(&j, "bsk", &t->bsk[p]);
            bench_write_fig(&j, "dense", &t->dense[p]);
            cli_json_num(&j, "E", t->E[p]);
            if (p < P_STEP) cli_json_str(&j, "kernel", t->kernel[p] ? t->kernel[p] : "");
            else {
                cli_json_num(&j, "bsk_sum_ms", t->bsk_sum_ms);
                cli_json_num(&j, "dense_sum_ms", t->dense_sum_ms);
            }
            cli_json_end(&j);
        }
        cli_json_num(&j, "speedup", t->speedup);
        cli_json_end(&j);
    }
    cli_json_end(&j);
    cli_json_finish(&j);
    bench_json_close(f, tmp, b->json, "bsk bench train");
}

static void row_done(train_state *s, int i)
{
    const bench_row *r = &s->g.rows[i];
    train_row *t = &s->t[i];
    int bad = 0;
    for (int p = 0; p < NPROD; p++) {
        if (t->bsk[p].state == FIG_OK && t->dense[p].state == FIG_OK) t->E[p] = t->bsk[p].tflops / t->dense[p].tflops;
        bad |= t->bsk[p].state == FIG_FAIL || t->bsk[p].state == FIG_WRONG;
    }
    if (t->bsk[P_STEP].state == FIG_OK && t->dense[P_STEP].state == FIG_OK)
        t->speedup = t->dense[P_STEP].ms / t->bsk[P_STEP].ms;
    if (bad) s->failures++;
    fprintf(stderr, "[%d/%d] %lldx%lldx%lld b=%lld d=%.2f %s: E fwd %.3f dX %.3f dW %.3f step %.3f, speedup %.2fx%s\n", i + 1,
            s->g.nrows, (long long)r->m, (long long)r->n, (long long)r->k, (long long)r->b, r->density,
            cli_pattern_name(r->pattern), t->E[P_FWD], t->E[P_DX], t->E[P_DW], t->E[P_STEP], t->speedup,
            bad ? " — FAILED or WRONG (see the table)" : "");
    if (s->g.json) write_json(s, i + 1);
}

static void print_table(const train_state *s)
{
    const bench_state *b = &s->g;
    int gpu = b->device == CLI_DEV_CUDA;
    printf("\nTraining step of Y = W*X (W: BSR M x K, X: K x N) on the %s, %s -> %s, pattern cache %s, median of %d%s\n",
           gpu ? "GPU" : "CPU", cli_dtype_name(b->dt), cli_dtype_name(b->ot), s->cache ? "on" : "off", b->iters,
           gpu ? ", L2 flushed" : "");
    printf("%s: effective on kept blocks; E = bsk / %s for the same product; speedup = dense step / bsk step\n",
           gpu ? "TFLOPS" : "GFLOPS", gpu ? "cuBLAS" : "OpenBLAS");
    const double sc = gpu ? 1.0 : 1e3;
    int64_t pm = -1, pn = -1, pk = -1;
    for (int i = 0; i < b->nrows; i++) {
        const bench_row *r = &b->rows[i];
        const train_row *t = &s->t[i];
        if (r->m != pm || r->n != pn || r->k != pk) {
            char c0[24], c1[24], c2[24];
            cell(c0, sizeof c0, &t->dense[P_FWD], sc);
            cell(c1, sizeof c1, &t->dense[P_DX], sc);
            cell(c2, sizeof c2, &t->dense[P_DW], sc);
            printf("\n%s %lldx%lldx%lld: fwd %s, dX %s, dW %s %s; step %.3f ms (the three apart: %.3f ms)\n",
                   gpu ? "cuBLAS" : "sgemm", (long long)r->m, (long long)r->n, (long long)r->k, c0, c1, c2,
                   gpu ? "TFLOPS" : "GFLOPS", t->dense[P_STEP].ms, t->dense_sum_ms);
            printf("%-18s %4s %5s %-8s %7s %6s %7s %6s %7s %6s %9s %8s  %s\n", "M x N x K", "b", "dens", "pattern", "fwd",
                   "E", "dX", "E", "dW", "E", "step ms", "speedup", "kernels fwd / dX / dW");
            pm = r->m, pn = r->n, pk = r->k;
        }
        char shape[40], c[3][24], e[3][16], st[24], sp[16];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)r->m, (long long)r->n, (long long)r->k);
        for (int p = 0; p < 3; p++) {
            cell(c[p], sizeof c[p], &t->bsk[p], sc);
            if (isfinite(t->E[p])) snprintf(e[p], sizeof e[p], "%.3f", t->E[p]);
            else snprintf(e[p], sizeof e[p], "-");
        }
        if (t->bsk[P_STEP].state == FIG_OK) snprintf(st, sizeof st, "%.3f", t->bsk[P_STEP].ms);
        else cell(st, sizeof st, &t->bsk[P_STEP], sc);
        if (isfinite(t->speedup)) snprintf(sp, sizeof sp, "%.2fx", t->speedup);
        else snprintf(sp, sizeof sp, "-");
        printf("%-18s %4lld %5.2f %-8s %7s %6s %7s %6s %7s %6s %9s %8s  %s / %s / %s\n", shape, (long long)r->b, r->density,
               cli_pattern_name(r->pattern), c[0], e[0], c[1], e[1], c[2], e[2], st, sp, t->kernel[0] ? t->kernel[0] : "-",
               t->kernel[1] ? t->kernel[1] : "-", t->kernel[2] ? t->kernel[2] : "-");
    }
    int notes = 0;
    for (int i = 0; i < b->nrows; i++)
        for (int p = 0; p < NPROD; p++) {
            const bench_fig *f[2] = {&s->t[i].bsk[p], &s->t[i].dense[p]};
            for (int q = 0; q < 2; q++)
                if (f[q]->note[0] && (q == 0 || i == 0 || strcmp(f[q]->note, s->t[i - 1].dense[p].note) != 0)) {
                    if (!notes++) printf("\nnotes:\n");
                    printf("  row %d %s %s: %s\n", i + 1, q ? "dense" : "bsk", prod_key[p], f[q]->note);
                }
        }
}

/* ---------------------------------------------------------------- the run */

typedef struct shape_buf {
    void *W, *X, *dY;   /* dt: W dense M x K, X K x N, dY M x N (device, or host on the CPU path) */
    void *Y, *dX, *dWd; /* ot: M x N, K x N, M x K                                                */
    void *ref;          /* f32 reference, the largest of the three                                */
    void *hW;           /* host dt M x K: the random dense W, then each pattern's expansion       */
    float *hRef;        /* host f32 reference                                                     */
    void *hGot;         /* host ot: a copied-back Y or dX                                         */
} shape_buf;

static void free_shape(tdev *d, shape_buf *s)
{
    dv_free(d, s->W);
    dv_free(d, s->X);
    dv_free(d, s->dY);
    dv_free(d, s->Y);
    dv_free(d, s->dX);
    dv_free(d, s->dWd);
    dv_free(d, s->ref);
    free(s->hW);
    free(s->hRef);
    free(s->hGot);
    memset(s, 0, sizeof *s);
}

static int alloc_shape(tdev *d, shape_buf *s, const bench_state *b, int64_t m, int64_t n, int64_t k)
{
    size_t e = bsk_dtype_size(b->dt), o = bsk_dtype_size(b->ot);
    int64_t big = m * n > k * n ? m * n : k * n;
    big = big > m * k ? big : m * k;
    memset(s, 0, sizeof *s);
    s->W = dv_alloc(d, (size_t)(m * k) * e);
    s->X = dv_alloc(d, (size_t)(k * n) * e);
    s->dY = dv_alloc(d, (size_t)(m * n) * e);
    s->Y = dv_alloc(d, (size_t)(m * n) * o);
    s->dX = dv_alloc(d, (size_t)(k * n) * o);
    s->dWd = dv_alloc(d, (size_t)(m * k) * o);
    s->ref = dv_alloc(d, (size_t)big * sizeof(float));
    s->hW = malloc((size_t)(m * k) * e);
    s->hRef = (float *)malloc((size_t)big * sizeof(float));
    s->hGot = malloc((size_t)big * o);
    return s->W && s->X && s->dY && s->Y && s->dX && s->dWd && s->ref && s->hW && s->hRef && s->hGot;
}

/* Time a dense product (or the step) into f. */
static void time_dense(tdev *d, const bench_state *b, bench_fig *f, cli_work_fn fn, void *w, const gemm_w *err_of,
                       double flop)
{
    int rc;
    double ms = dv_time(d, fn, w, b->warmup, b->iters, &rc);
    if (rc) {
        f->state = FIG_FAIL;
        snprintf(f->note, sizeof f->note, "%s", rc > 0 ? gemm_error(err_of) : "CUDA error in the timed runs");
        return;
    }
    bench_fig_time(f, ms, flop);
    f->state = FIG_OK;
}

/* One configuration: pattern, checks, timings. */
static void run_row(train_state *ts, tdev *d, shape_buf *s, int i, gemm_w g[3])
{
    const bench_state *b = &ts->g;
    bench_row *r = &b->rows[i];
    train_row *t = &ts->t[i];
    const int64_t m = r->m, n = r->n, k = r->k;
    const bsk_memory mem = d->gpu ? BSK_MEM_DEVICE : BSK_MEM_HOST;
    const size_t e = bsk_dtype_size(b->dt), o = bsk_dtype_size(b->ot);
    double sflop = 0;
    bsk_bsr A = {0}, dA = {0}, dW = {0};
    void *hv = NULL;
    bsk_status st;
    char *note = t->bsk[P_FWD].note;
    const size_t nn = sizeof t->bsk[P_FWD].note;

    for (int p = 0; p < NPROD; p++) t->bsk[p].state = FIG_FAIL;
    if ((st = bench_row_pattern(b, i, m, k, &A)) || (st = bsk_bsr_clone(&A, mem, &dA))) {
        snprintf(note, nn, "setup: %s", bsk_status_string(st));
        goto out;
    }
    int64_t nvals = A.nnzb * A.block_rows * A.block_cols;
    sflop = bench_sparse_flop(b, r); /* on the kept blocks bench_row_pattern counted */
    dW = dA;
    dW.dtype = b->ot; /* bsk_sddmm writes f32 or the input dtype; the command allows only those */
    dW.values = dv_alloc(d, (size_t)nvals * o);
    hv = malloc((size_t)nvals * o + 1);
    bsk_dense hd = {m, k, k, b->dt, BSK_MEM_HOST, s->hW};
    if (!dW.values || !hv) {
        snprintf(note, nn, "out of memory for dW");
        goto out;
    }
    /* the references run on this W's dense expansion */
    if ((st = bsk_bsr_to_dense(&A, &hd))) {
        snprintf(note, nn, "bsk_bsr_to_dense: %s", bsk_status_string(st));
        goto out;
    }
    if (!dv_put(d, s->W, s->hW, (size_t)(m * k) * e, note, nn)) goto out;

    bsk_dense X = {k, n, n, b->dt, mem, s->X}, dY = {m, n, n, b->dt, mem, s->dY};
    bsk_dense Y = {m, n, n, b->ot, mem, s->Y}, dX = {k, n, n, b->ot, mem, s->dX};
    int good = 1;
    for (int p = 0; p < 3; p++) {
        bench_fig *f = &t->bsk[p];
        char *pn = f->note;
        /* reference: the same product by the dense library, fp32 output */
        gemm_w ref = g[p];
        ref.C = s->ref;
        ref.out = BSK_F32;
        int64_t relems = ref.m * ref.n;
        if (gemm_run(&ref)) {
            snprintf(pn, sizeof f->note, "reference: %s", gemm_error(&ref));
            good = 0;
            continue;
        }
        if (!dv_sync(d, pn, sizeof f->note) ||
            !dv_get(d, s->hRef, s->ref, (size_t)relems * sizeof(float), pn, sizeof f->note)) {
            good = 0;
            continue;
        }
        /* bsk once on poisoned output, checked */
        void *out = p == P_FWD ? s->Y : p == P_DX ? s->dX : dW.values;
        size_t obytes = p == P_DW ? (size_t)nvals * o : (size_t)relems * o;
        void *hgot = p == P_DW ? hv : s->hGot;
        bsk_w w = {d->ctx, p, &dA, &dW, &X, &dY, &Y, &dX, BSK_SUCCESS};
        if (!dv_poison(d, out, obytes, pn, sizeof f->note)) { good = 0; continue; }
        if (bsk_run(&w)) {
            snprintf(pn, sizeof f->note, "%s", bsk_status_string(w.st));
            good = 0;
            continue;
        }
        if (!dv_sync(d, pn, sizeof f->note) || !dv_get(d, hgot, out, obytes, pn, sizeof f->note)) {
            good = 0;
            continue;
        }
        t->kernel[p] = bsk_last_kernel(d->ctx);
        int64_t pad_bad = 0;
        f->err = p == P_DW ? cmp_dw(&A, hv, b->ot, s->hRef, &pad_bad) : cmp_dense(hgot, b->ot, s->hRef, relems);
        if (!(f->err <= cli_tol(b->dt, b->ot)) || pad_bad) {
            f->state = FIG_WRONG;
            if (pad_bad) snprintf(pn, sizeof f->note, "WRONG RESULT: %lld padding entries not 0", (long long)pad_bad);
            else snprintf(pn, sizeof f->note, "WRONG RESULT (rel err %.2e vs the dense product)", f->err);
            good = 0;
            continue;
        }
        int rc;
        double ms = dv_time(d, bsk_run, &w, b->warmup, b->iters, &rc);
        if (rc) {
            snprintf(pn, sizeof f->note, "timed runs: %s", rc > 0 ? bsk_status_string(w.st) : "CUDA error");
            good = 0;
            continue;
        }
        bench_fig_time(f, ms, sflop);
        f->state = FIG_OK;
    }
    if (d->broken) goto out;
    if (!good) {
        snprintf(t->bsk[P_STEP].note, sizeof t->bsk[P_STEP].note, "not timed: a product failed or was wrong");
        goto out;
    }
    t->bsk_sum_ms = t->bsk[P_FWD].ms + t->bsk[P_DX].ms + t->bsk[P_DW].ms;
    {
        bsk_w w = {d->ctx, P_STEP, &dA, &dW, &X, &dY, &Y, &dX, BSK_SUCCESS};
        int rc;
        double ms = dv_time(d, bsk_run, &w, b->warmup, b->iters, &rc);
        if (rc)
            snprintf(t->bsk[P_STEP].note, sizeof t->bsk[P_STEP].note, "timed runs: %s",
                     rc > 0 ? bsk_status_string(w.st) : "CUDA error");
        else {
            bench_fig_time(&t->bsk[P_STEP], ms, 3.0 * sflop);
            t->bsk[P_STEP].state = FIG_OK;
        }
    }
out:
    /* a pattern cache keyed by addresses must not outlive the pattern (a new one may land there) */
    if (ts->cache) (void)bsk_forget_patterns(d->ctx);
    dv_free(d, dW.values);
    free(hv);
    bsk_bsr_free(&dA);
    bsk_bsr_free(&A);
}

static int run_all(train_state *ts)
{
    bench_state *b = &ts->g;
    tdev d;
    memset(&d, 0, sizeof d);
    d.gpu = b->device == CLI_DEV_CUDA;
    int rc = CLI_OK;
    if (bsk_create(&d.ctx, d.gpu ? BSK_BACKEND_CUDA : BSK_BACKEND_CPU) || bsk_set_pattern_cache(d.ctx, ts->cache)) {
        fprintf(stderr, "bsk bench train: cannot create a bsk context\n");
        bsk_destroy(d.ctx);
        return CLI_FAIL;
    }
#ifdef BSK_WITH_CUDA
    if (d.gpu && (cublasCreate(&d.blas) != CUBLAS_STATUS_SUCCESS || cli_gpu_timer_init(&d.timer, NULL))) {
        fprintf(stderr, "bsk bench train: cannot set up cuBLAS / timers on the GPU\n");
        rc = CLI_FAIL;
        goto done;
    }
    ts->flush_bytes = d.gpu ? (double)d.timer.flush_bytes : 0;
#endif
    for (int i0 = 0; i0 < b->nrows && !d.broken;) {
        int64_t m = b->rows[i0].m, n = b->rows[i0].n, k = b->rows[i0].k;
        int i1 = i0;
        while (i1 < b->nrows && b->rows[i1].m == m && b->rows[i1].n == n && b->rows[i1].k == k) i1++;
        shape_buf s;
        if (!alloc_shape(&d, &s, b, m, n, k)) {
            fprintf(stderr, "bsk bench train: %lldx%lldx%lld does not fit in memory\n", (long long)m, (long long)n,
                    (long long)k);
            for (int i = i0; i < i1; i++) {
                for (int p = 0; p < NPROD; p++) ts->t[i].bsk[p].state = FIG_FAIL;
                snprintf(ts->t[i].bsk[P_FWD].note, sizeof ts->t[i].bsk[P_FWD].note, "out of memory");
                row_done(ts, i);
            }
            free_shape(&d, &s);
            i0 = i1;
            continue;
        }
        fprintf(stderr, "shape %lldx%lldx%lld: generating operands, timing the dense step ...\n", (long long)m,
                (long long)n, (long long)k);
        size_t e = bsk_dtype_size(b->dt);
        train_row dense;
        memset(&dense, 0, sizeof dense);
        for (int p = 0; p < NPROD; p++) dense.dense[p].err = NAN;
        char *dn = dense.dense[P_FWD].note;
        size_t dnn = sizeof dense.dense[P_FWD].note;
        /* X and dY through hRef's bytes (big enough for either), W fully random for the dense timing */
        int ok = 1;
        cli_fill_random(s.hRef, b->dt, k * n, b->seed + 31);
        ok = ok && dv_put(&d, s.X, s.hRef, (size_t)(k * n) * e, dn, dnn);
        cli_fill_random(s.hRef, b->dt, m * n, b->seed + 32);
        ok = ok && dv_put(&d, s.dY, s.hRef, (size_t)(m * n) * e, dn, dnn);
        cli_fill_random(s.hW, b->dt, m * k, b->seed + 33);
        ok = ok && dv_put(&d, s.W, s.hW, (size_t)(m * k) * e, dn, dnn);
        /* fwd: Y = W·X;  dX = Wᵀ·dY (W stored M x K = k x m of this product);  dW = dY·Xᵀ (X stored K x N) */
        gemm_w g[3] = {{&d, 0, 0, m, n, k, s.W, s.X, s.Y, b->dt, b->ot, 0},
                       {&d, 1, 0, k, n, m, s.W, s.dY, s.dX, b->dt, b->ot, 0},
                       {&d, 0, 1, m, k, n, s.dY, s.X, s.dWd, b->dt, b->ot, 0}};
        const double dflop = 2.0 * (double)m * (double)n * (double)k;
        if (ok) {
            for (int p = 0; p < 3; p++) time_dense(&d, b, &dense.dense[p], gemm_run, &g[p], &g[p], dflop);
            dstep_w sw = {{&g[0], &g[1], &g[2]}};
            time_dense(&d, b, &dense.dense[P_STEP], dense_step_run, &sw, &g[0], 3.0 * dflop);
            dense.dense_sum_ms = dense.dense[P_FWD].ms + dense.dense[P_DX].ms + dense.dense[P_DW].ms;
        } else
            for (int p = 0; p < NPROD; p++) dense.dense[p].state = FIG_FAIL;

        for (int i = i0; i < i1 && !d.broken; i++) {
            train_row *t = &ts->t[i];
            memcpy(t->dense, dense.dense, sizeof t->dense);
            t->dense_sum_ms = dense.dense_sum_ms;
            run_row(ts, &d, &s, i, g);
            row_done(ts, i);
        }
        free_shape(&d, &s);
        i0 = i1;
    }
    if (d.broken) {
        fprintf(stderr, "bsk bench train: a CUDA error left the device unusable; stopping\n");
        rc = CLI_FAIL;
    }
#ifdef BSK_WITH_CUDA
done:
    cli_gpu_timer_free(&d.timer);
    if (d.blas) cublasDestroy(d.blas);
#endif
    bsk_destroy(d.ctx);
    return rc;
}

/* ---------------------------------------------------------------- command */

int cmd_bench_train(int argc, char **argv)
{
    int quick = 0, nocache = 0, dtype = -1, out_dtype = -1, device_req = CLI_DEV_AUTO, npos;
    int64_t iters = 0, warmup = -1;
    uint64_t seed = 1;
    const char *json = NULL, *sizes = NULL, *blocks = NULL, *dens = NULL, *pats = NULL;
    char *av0 = argv[0];
    argv[0] = (char *)"bench train"; /* messages say "bsk bench train: ..." */
    cli_opt opts[] = {
        CLI_OPT_FLAG("quick", &quick, "one configuration: b=128, d=0.25, uniform (the issue's target point)"),
        CLI_OPT_STR("json", &json, "write every figure and the configuration to this file"),
        CLI_OPT_STR("sizes", &sizes, "layers MxNxK,... (W: M x K, X: K x N; default 8192x8192x8192)"),
        CLI_OPT_STR("blocks", &blocks, "block sizes (default 64,128)"),
        CLI_OPT_STR("densities", &dens, "block densities (default 0.1,0.25,0.5)"),
        CLI_OPT_STR("patterns", &pats, "uniform,skewed (default both)"),
        CLI_OPT_CHOICE("dtype", &dtype, CLI_DTYPES, "input dtype (default f16 on the GPU; the CPU path is f32 only)"),
        CLI_OPT_CHOICE("out-dtype", &out_dtype, CLI_DTYPES, "Y, dX and dW dtype: f32 or the input dtype (default: input)"),
        CLI_OPT_INT("iters", &iters, 1, 100000, "timed iterations per figure (default 20 on the GPU, 5 on the CPU)"),
        CLI_OPT_INT("warmup", &warmup, 0, 1000, "untimed iterations first (default 3 GPU, 1 CPU)"),
        CLI_OPT_FLAG("no-pattern-cache", &nocache, "rebuild the pattern data (transpose index) on every call"),
        CLI_OPT_CHOICE("device", &device_req, CLI_DEVICES, "GPU (vs cuBLAS) or CPU (vs OpenBLAS, f32)"),
        CLI_OPT_U64("seed", &seed, "random seed"),
    };
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                       "bsk bench train [--quick] [--json FILE] [--sizes MxNxK,...] [--blocks ...] [--dtype f16|bf16] ...",
                       "One training step of a block-sparse linear layer Y = W*X (W: BSR M x K, X: dense K x N):\n"
                       "  fwd  Y  = W*X                    bsk_spmm op N   vs cublasGemmEx Y = Wd*X\n"
                       "  dX   dX = W^T*dY                 bsk_spmm op T   vs cublasGemmEx, W's transposed flag\n"
                       "  dW   dW = dY*X^T on W's pattern  bsk_sddmm       vs cublasGemmEx dY*X^T (dense M x K)\n"
                       "  step the three back to back      (one timed region each side)\n"
                       "Each product alone and the step: CUDA events, warm-up, median, L2 flushed before each timed call.\n"
                       "Every bsk result is checked once per configuration against cuBLAS (fp32 output) on the dense\n"
                       "expansion of W (dW's padding must be 0); a wrong result shows no figure and makes the exit code 1.\n"
                       "E = bsk effective TFLOPS on kept blocks / cuBLAS TFLOPS of the same product (fully random W,\n"
                       "same run); speedup = cuBLAS step ms / bsk step ms (issue 4 target: >= 3x at b=128, d=0.25).\n"
                       "These are also the A^T*B (op T) figures per configuration: 'bsk bench spmm' has no --op.\n"
                       "The pattern cache (bsk_set_pattern_cache) is on, as in a training loop over a fixed pattern.\n"
                       "Without a GPU (or --device cpu): the same flow on the CPU backend vs OpenBLAS sgemm, f32, 1024^3.",
                       NULL, 0, &npos);
    argv[0] = av0;
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;

    train_state ts;
    memset(&ts, 0, sizeof ts);
    bench_state *b = &ts.g;
    b->seed = seed;
    b->json = json;
    if (json && !bench_json_writable(json, "bsk bench train")) return CLI_FAIL;
    ts.cache = !nocache;
    bsk_context *probe;
    if (cli_open("bench train", device_req, &probe, &b->device)) return CLI_FAIL;
    bsk_destroy(probe);
    int gpu = b->device == CLI_DEV_CUDA;
#ifndef BSK_WITH_CUDA
    gpu = 0;
    b->device = CLI_DEV_CPU;
#endif
    b->dt = (bsk_dtype)(dtype >= 0 ? dtype : gpu ? BSK_F16 : BSK_F32);
    b->ot = (bsk_dtype)(out_dtype >= 0 ? out_dtype : (int)b->dt);
    if (b->ot != BSK_F32 && b->ot != b->dt)
        return cli_usage_error("bench train", "--out-dtype must be f32 or the input dtype (bsk_sddmm writes those)");
    if (!gpu && (b->dt != BSK_F32 || b->ot != BSK_F32))
        return cli_usage_error("bench train", "the CPU path is f32 only (its dense baseline is sgemm)");
    b->iters = (int)(iters ? iters : gpu ? 20 : 5);
    b->warmup = (int)(warmup >= 0 ? warmup : gpu ? 3 : 1);

    int64_t shp[MAXLIST][3], blk[MAXLIST] = {64, 128};
    double den[MAXLIST] = {0.10, 0.25, 0.50};
    int pat[MAXLIST] = {BSK_PATTERN_UNIFORM, BSK_PATTERN_SKEWED}, ns = 1, nb = 2, nd = 3, np = 2;
    shp[0][0] = shp[0][1] = shp[0][2] = gpu ? 8192 : 1024;
    if (quick) {
        blk[0] = 128;
        den[0] = 0.25;
        nb = nd = np = 1;
    }
    if (sizes && (ns = cli_list_shape("bench train", "sizes", sizes, shp, MAXLIST)) < 0) return CLI_USAGE;
    if (blocks && (nb = cli_list_int("bench train", "blocks", blocks, 1, 1024, blk, MAXLIST)) < 0) return CLI_USAGE;
    if (dens && (nd = cli_list_real("bench train", "densities", dens, 0.0, 1.0, den, MAXLIST)) < 0) return CLI_USAGE;
    if (pats && (np = cli_list_choice("bench train", "patterns", pats, CLI_PATTERNS, pat, MAXLIST)) < 0) return CLI_USAGE;
    for (int s = 0; s < ns; s++)
        for (int x = 0; x < nb; x++)
            for (int dd = 0; dd < nd; dd++) {
                double m = (double)shp[s][0], n = (double)shp[s][1], k = (double)shp[s][2], e = (double)bsk_dtype_size(b->dt);
                double o = (double)bsk_dtype_size(b->ot), bs = (double)blk[x];
                /* host: W dense and a pattern (values, dW values), the f32 reference, a copied-back result; the
                   pattern's values as stored (whole blocks: a block larger than the matrix is padded) */
                double big = fmax(m * n, fmax(k * n, m * k));
                double pat = fmax(m * k, den[dd] * ceil(m / bs) * ceil(k / bs) * bs * bs) * e + 16.0 * (m + k);
                double need = m * k * (e + 8) + 2 * pat + big * (4 + 4);
                /* the CPU path's "device" buffers are host memory as well: W, X, dY, Y, dX, dW dense, the f32
                   reference, the pattern's clone and dW's values */
                if (!gpu) need += (m * k + k * n + m * n) * (e + o) + big * 4 + 2 * pat;
                if (!cli_host_fits("bench train", need)) return CLI_FAIL;
            }
    b->nrows = ns * nb * nd * np;
    b->rows = (bench_row *)calloc((size_t)b->nrows, sizeof *b->rows);
    ts.t = (train_row *)calloc((size_t)b->nrows, sizeof *ts.t);
    if (!b->rows || !ts.t) {
        free(b->rows);
        free(ts.t);
        fprintf(stderr, "bsk bench train: out of memory\n");
        return CLI_FAIL;
    }
    int i = 0;
    for (int s = 0; s < ns; s++)
        for (int x = 0; x < nb; x++)
            for (int p = 0; p < np; p++)
                for (int dd = 0; dd < nd; dd++, i++) {
                    bench_row *r = &b->rows[i];
                    r->m = shp[s][0];
                    r->n = shp[s][1];
                    r->k = shp[s][2];
                    r->b = blk[x];
                    r->density = den[dd];
                    r->pattern = pat[p];
                    train_row *t = &ts.t[i];
                    t->speedup = t->bsk_sum_ms = t->dense_sum_ms = NAN;
                    for (int q = 0; q < NPROD; q++) {
                        t->E[q] = NAN;
                        t->bsk[q].err = t->dense[q].err = NAN;
                        t->bsk[q].ms = t->dense[q].ms = t->bsk[q].tflops = t->dense[q].tflops = NAN;
                    }
                }
    fprintf(stderr, "bsk bench train on %s: %d configurations, %s -> %s, median of %d after %d warm-up, pattern cache %s\n",
            gpu ? "the GPU" : "the CPU", b->nrows, cli_dtype_name(b->dt), cli_dtype_name(b->ot), b->iters, b->warmup,
            ts.cache ? "on" : "off");
    rc = run_all(&ts);
    print_table(&ts);
    if (b->json) printf("JSON: %s\n", b->json);
    if (ts.failures) printf("%d configuration(s) where a bsk product failed or was wrong\n", ts.failures);
    free(b->rows);
    free(ts.t);
    return rc ? rc : ts.failures ? CLI_FAIL : CLI_OK;
}
