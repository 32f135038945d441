/* cmd_spmm.c — `bsk spmm` and `bsk sddmm`: one operation on random data, timed, optionally checked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* The options both commands take. */
typedef struct op_args {
    int64_t m, n, k, block, block_rows, block_cols, check_rows, reps, warmup;
    double density, alpha, beta;
    uint64_t seed;
    int pattern, dtype, out_dtype, op, device, check;
} op_args;

#define COMMON_OPTS(a)                                                                                      \
    CLI_OPT_INT("m", &(a).m, 1, INT32_MAX, "rows of the result"),                                          \
    CLI_OPT_INT("n", &(a).n, 1, INT32_MAX, "columns of the result"),                                       \
    CLI_OPT_INT("k", &(a).k, 1, INT32_MAX, "inner dimension"),                                             \
    CLI_OPT_INT("block", &(a).block, 1, 1024, "block size (square)"),                                      \
    CLI_OPT_INT("block-rows", &(a).block_rows, 1, 1024, "block rows (overrides --block)"),                 \
    CLI_OPT_INT("block-cols", &(a).block_cols, 1, 1024, "block columns (overrides --block)"),              \
    CLI_OPT_REAL("density", &(a).density, 0.0, 1.0, "fraction of blocks kept"),                            \
    CLI_OPT_CHOICE("pattern", &(a).pattern, CLI_PATTERNS, "blocks per block row: equal, or power law"),    \
    CLI_OPT_CHOICE("dtype", &(a).dtype, CLI_DTYPES, "input dtype"),                                        \
    CLI_OPT_CHOICE("out-dtype", &(a).out_dtype, CLI_DTYPES, "output dtype (default: the input dtype)"),    \
    CLI_OPT_REAL("alpha", &(a).alpha, -1e38, 1e38, "alpha"),                                               \
    CLI_OPT_REAL("beta", &(a).beta, -1e38, 1e38, "beta (0: the output is not read)"),                      \
    CLI_OPT_CHOICE("device", &(a).device, CLI_DEVICES, "where to run (default: cuda when present)"),       \
    CLI_OPT_FLAG("check", &(a).check, "compare with a CPU reference; exit 1 past the dtype's tolerance"),  \
    CLI_OPT_INT("check-rows", &(a).check_rows, 1, INT32_MAX, "check only this many block rows, spread evenly"), \
    CLI_OPT_U64("seed", &(a).seed, "random seed"),                                                         \
    CLI_OPT_INT("reps", &(a).reps, 1, 100000, "timed repetitions (the median is reported)"),               \
    CLI_OPT_INT("warmup", &(a).warmup, 0, 1000, "untimed runs first")

static op_args defaults(void)
{
    op_args a = {1024, 1024, 1024, 64, 0, 0, 0, 10, 2, 0.25, 1.0, 0.0, 1, BSK_PATTERN_UNIFORM, BSK_F16, -1, 0,
                 CLI_DEV_AUTO, 0};
    return a;
}

/* Resolve the block shape and the output dtype after parsing. */
static void finish_args(op_args *a)
{
    if (!a->block_rows) a->block_rows = a->block;
    if (!a->block_cols) a->block_cols = a->block;
    if (a->out_dtype < 0) a->out_dtype = a->dtype;
}

typedef struct spmm_work {
    bsk_context *ctx;
    bsk_op op;
    float alpha, beta;
    const bsk_bsr *A;
    const bsk_dense *B;
    bsk_dense *C;
} spmm_work;
static int spmm_once(void *p)
{
    spmm_work *w = (spmm_work *)p;
    return bsk_spmm(w->ctx, w->op, w->alpha, w->A, w->B, w->beta, w->C);
}

typedef struct sddmm_work {
    bsk_context *ctx;
    float alpha, beta;
    const bsk_dense *X, *Y;
    bsk_bsr *out;
} sddmm_work;
static int sddmm_once(void *p)
{
    sddmm_work *w = (sddmm_work *)p;
    return bsk_sddmm(w->ctx, w->alpha, w->X, w->Y, w->beta, w->out);
}

/* Median time of fn on the context's device (events + L2 flush on the GPU, wall clock on the CPU). */
static double time_it(int device, bsk_context *ctx, cli_work_fn fn, void *w, const op_args *a, int *rc)
{
#ifdef BSK_WITH_CUDA
    if (device == CLI_DEV_CUDA) {
        cli_gpu_timer t;
        void *stream = NULL;
        bsk_get_stream(ctx, &stream);
        if (cli_gpu_timer_init(&t, stream)) { *rc = -1; return NAN; }
        double ms = cli_time_gpu(&t, fn, w, (int)a->warmup, (int)a->reps, rc);
        cli_gpu_timer_free(&t);
        return ms;
    }
#else
    (void)device; (void)ctx;
#endif
    return cli_time_host(fn, w, (int)a->warmup, (int)a->reps, rc);
}

static int report_status(const char *cmd, const char *what, int rc)
{
    if (rc > 0) fprintf(stderr, "bsk %s: %s: %s\n", cmd, what, bsk_status_string(rc));
    else fprintf(stderr, "bsk %s: %s: CUDA error (see above)\n", cmd, what);
    return CLI_FAIL;
}

static void print_config(const char *cmd, const op_args *a, const bsk_bsr *P, int device)
{
    bsk_bsr_stats st;
    memset(&st, 0, sizeof st);
    (void)bsk_bsr_stats_get(P, &st);
    printf("%s  M=%lld N=%lld K=%lld  block %lldx%lld  density %.3g (kept %lld blocks, %.4f; per block row %lld..%lld)\n",
           cmd, (long long)a->m, (long long)a->n, (long long)a->k, (long long)a->block_rows, (long long)a->block_cols,
           a->density, (long long)P->nnzb, st.density, (long long)st.row_min, (long long)st.row_max);
    printf("      pattern %s  %s -> %s", cli_pattern_name(a->pattern), cli_dtype_name((bsk_dtype)a->dtype),
           cli_dtype_name((bsk_dtype)a->out_dtype));
    if (strcmp(cmd, "spmm") == 0) printf("  op %s", a->op ? "T" : "N");
    printf("  alpha %g beta %g  device %s  seed %llu\n", a->alpha, a->beta, device == CLI_DEV_CUDA ? "cuda" : "cpu",
           (unsigned long long)a->seed);
}

/* Print the figures and, with --check, the verdict; returns the exit code. */
static int report(const op_args *a, const char *kernel, double ms, double flop, double err, int checked,
                  int64_t mb, int ref)
{
    printf("kernel  %s\n", kernel);
    printf("time    %.4f ms (median of %lld)\n", ms, (long long)a->reps);
    printf("rate    ");
    cli_print_rate(stdout, flop, ms);
    printf(" effective on kept blocks (%.4g flop)\n", flop);
    if (!checked) return CLI_OK;
    double tol = cli_tol((bsk_dtype)a->dtype, (bsk_dtype)a->out_dtype);
    int pass = err <= tol;
    printf("check   rel err %.3e (tol %.0e) vs %s on %lld of %lld block rows: %s\n", err, tol,
           ref == CLI_REF_CPU ? "the CPU backend" : "a float64 reference",
           (long long)(a->check_rows && a->check_rows < mb ? a->check_rows : mb), (long long)mb,
           pass ? "PASS" : "FAIL");
    return pass ? CLI_OK : CLI_FAIL;
}

int cmd_spmm(int argc, char **argv)
{
    op_args a = defaults();
    cli_opt opts[] = {COMMON_OPTS(a), CLI_OPT_CHOICE("op", &a.op, "n|t", "use A (n) or A transposed (t)")};
    int npos, rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                             "bsk spmm [--m M --n N --k K] [--block B] [--density D] [--dtype T] [--check] ...",
                             "C = alpha*op(A)*B + beta*C with A a random M x K block-sparse matrix (K x M with --op t),\n"
                             "B random K x N, C M x N. Prints the median time, the effective rate on kept blocks\n"
                             "(2*nnzb*block_rows*block_cols*N flop) and the kernel that ran. --check compares with the\n"
                             "CPU backend (GPU runs) or a float64 reference (CPU runs).",
                             NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    finish_args(&a);
    const char *cmd = "spmm";
    bsk_dtype dt = (bsk_dtype)a.dtype, ot = (bsk_dtype)a.out_dtype;
    int64_t arows = a.op ? a.k : a.m, acols = a.op ? a.m : a.k;

    if (!cli_host_fits(cmd, cli_spmm_host_bytes(a.op, a.m, a.n, a.k, a.block_rows, a.block_cols, a.density, dt, ot, a.check)))
        return CLI_FAIL;

    bsk_context *ctx = NULL;
    int device, ret = CLI_FAIL;
    if (cli_open(cmd, a.device, &ctx, &device)) return CLI_FAIL;
    bsk_bsr A = {0}, dA = {0};
    bsk_dense B = {0}, C0 = {0}, C = {0}, dB = {0}, dC = {0};
    bsk_status s;
    if ((s = bsk_bsr_random(arows, acols, (int32_t)a.block_rows, (int32_t)a.block_cols, a.density,
                            (bsk_pattern)a.pattern, a.seed, dt, &A))) {
        fprintf(stderr, "bsk %s: bsk_bsr_random: %s\n", cmd, bsk_status_string(s));
        goto out;
    }
    if ((s = cli_dense_new(&B, a.k, a.n, dt, BSK_MEM_HOST)) || (s = cli_dense_new(&C0, a.m, a.n, ot, BSK_MEM_HOST)) ||
        (s = cli_dense_new(&C, a.m, a.n, ot, BSK_MEM_HOST))) {
        fprintf(stderr, "bsk %s: host buffers: %s\n", cmd, bsk_status_string(s));
        goto out;
    }
    cli_fill_random(B.data, dt, a.k * a.n, a.seed + 1);
    /* beta = 0 promises C is not read: NaN there would show if it were */
    if (a.beta != 0.0) cli_fill_random(C0.data, ot, a.m * a.n, a.seed + 2);
    else cli_fill_nan(C0.data, ot, a.m * a.n);
    print_config(cmd, &a, &A, device);
    fflush(stdout);

    spmm_work w = {ctx, (bsk_op)a.op, (float)a.alpha, (float)a.beta, &A, &B, &C};
    if (device == CLI_DEV_CUDA) {
        if ((s = bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA)) || (s = cli_dense_new(&dB, a.k, a.n, dt, BSK_MEM_DEVICE)) ||
            (s = cli_dense_new(&dC, a.m, a.n, ot, BSK_MEM_DEVICE)) || (s = cli_dense_copy(&dB, &B))) {
            fprintf(stderr, "bsk %s: device buffers: %s\n", cmd, bsk_status_string(s));
            goto out;
        }
        w.A = &dA;
        w.B = &dB;
        w.C = &dC;
    }
    /* the timed runs, then one more from the initial C: the result the check sees */
    if ((s = cli_dense_copy(w.C, &C0))) { ret = report_status(cmd, "set C", s); goto out; }
    double ms = time_it(device, ctx, spmm_once, &w, &a, &rc);
    if (rc) { ret = report_status(cmd, "bsk_spmm", rc); goto out; }
    if ((s = cli_dense_copy(w.C, &C0))) { ret = report_status(cmd, "reset C", s); goto out; }
    if ((rc = spmm_once(&w)) || (rc = bsk_synchronize(ctx))) { ret = report_status(cmd, "bsk_spmm", rc); goto out; }
    if (device == CLI_DEV_CUDA && (s = cli_dense_copy(&C, &dC))) { ret = report_status(cmd, "copy back", s); goto out; }
    const char *kernel = bsk_last_kernel(ctx);
    double flop = 2.0 * (double)A.nnzb * (double)A.block_rows * (double)A.block_cols * (double)a.n;
    double err = NAN;
    int ref = device == CLI_DEV_CUDA ? CLI_REF_CPU : CLI_REF_F64;
    int64_t mb = (a.m + (a.op ? a.block_cols : a.block_rows) - 1) / (a.op ? a.block_cols : a.block_rows);
    if (a.check) {
        double t0 = cli_now();
        err = cli_check_spmm((bsk_op)a.op, (float)a.alpha, &A, &B, (float)a.beta, &C0, &C, ref, a.check_rows, 1, &s);
        if (s) { ret = report_status(cmd, "reference", s); goto out; }
        if (cli_now() - t0 > 2.0) fprintf(stderr, "  check took %.1f s\n", cli_now() - t0);
    }
    ret = report(&a, kernel, ms, flop, err, a.check, mb, ref);
out:
    bsk_bsr_free(&dA);
    cli_dense_free(&dB);
    cli_dense_free(&dC);
    bsk_bsr_free(&A);
    cli_dense_free(&B);
    cli_dense_free(&C0);
    cli_dense_free(&C);
    bsk_destroy(ctx);
    return ret;
}

int cmd_sddmm(int argc, char **argv)
{
    op_args a = defaults();
    cli_opt opts[] = {COMMON_OPTS(a)};
    int npos, rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                             "bsk sddmm [--m M --n N --k K] [--block B] [--density D] [--dtype T] [--check] ...",
                             "out = alpha*(X*Y^T) sampled on a random M x N block pattern + beta*out, with X random\n"
                             "M x K and Y random N x K. Prints the median time, the effective rate on kept blocks\n"
                             "(2*nnzb*block_rows*block_cols*K flop) and the kernel. --out-dtype must be f32 or the\n"
                             "input dtype. --check compares with the CPU backend (GPU runs) or float64 (CPU runs).",
                             NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    finish_args(&a);
    const char *cmd = "sddmm";
    bsk_dtype dt = (bsk_dtype)a.dtype, ot = (bsk_dtype)a.out_dtype;
    if (ot != BSK_F32 && ot != dt) return cli_usage_error(cmd, "--out-dtype must be f32 or the input dtype");

    double esz = (double)bsk_dtype_size(dt), osz = (double)bsk_dtype_size(ot);
    double pblocks = a.density * ceil((double)a.m / (double)a.block_rows) * ceil((double)a.n / (double)a.block_cols);
    double need = 3.0 * pblocks * ((double)a.block_rows * (double)a.block_cols * osz + 4.0) +
                  ((double)a.m + (double)a.n) * (double)a.k * (esz + (a.check ? 4 : 0)) +
                  16.0 * ((double)a.m + (double)a.n); /* pattern metadata and the generator's scratch */
    /* the check's reference values: one chunk of block rows (a twentieth, or one sampled) in float64 and a float copy */
    double pmb = ceil((double)a.m / (double)a.block_rows), pnb = ceil((double)a.n / (double)a.block_cols);
    if (a.check) need += fmin(pblocks, fmax(1.0, floor(pmb / 20)) * pnb) * (double)a.block_rows * (double)a.block_cols * 12.0;
    if (!cli_host_fits(cmd, need)) return CLI_FAIL;

    bsk_context *ctx = NULL;
    int device, ret = CLI_FAIL;
    if (cli_open(cmd, a.device, &ctx, &device)) return CLI_FAIL;
    bsk_bsr P = {0}, dP = {0};
    bsk_dense X = {0}, Y = {0}, dX = {0}, dY = {0};
    void *got = NULL;
    bsk_status s;
    if ((s = bsk_bsr_random(a.m, a.n, (int32_t)a.block_rows, (int32_t)a.block_cols, a.density, (bsk_pattern)a.pattern,
                            a.seed, ot, &P))) {
        fprintf(stderr, "bsk %s: bsk_bsr_random: %s\n", cmd, bsk_status_string(s));
        goto out;
    }
    int64_t nvals = P.nnzb * P.block_rows * P.block_cols;
    size_t vbytes = (size_t)nvals * bsk_dtype_size(ot);
    if (a.beta == 0.0) cli_fill_nan(P.values, ot, nvals); /* beta = 0: old values must not be read */
    if ((s = cli_dense_new(&X, a.m, a.k, dt, BSK_MEM_HOST)) || (s = cli_dense_new(&Y, a.n, a.k, dt, BSK_MEM_HOST)) ||
        !(got = malloc(vbytes + 1))) {
        fprintf(stderr, "bsk %s: host buffers: %s\n", cmd, bsk_status_string(s ? s : BSK_ERR_OUT_OF_MEMORY));
        goto out;
    }
    cli_fill_random(X.data, dt, a.m * a.k, a.seed + 1);
    cli_fill_random(Y.data, dt, a.n * a.k, a.seed + 2);
    print_config(cmd, &a, &P, device);
    fflush(stdout);

    /* the run writes into a copy of the pattern's values; P keeps the initial ones for the check */
    bsk_bsr W = P;
    sddmm_work w = {ctx, (float)a.alpha, (float)a.beta, &X, &Y, &W};
    if (device == CLI_DEV_CUDA) {
        if ((s = bsk_bsr_clone(&P, BSK_MEM_DEVICE, &dP)) || (s = cli_dense_new(&dX, a.m, a.k, dt, BSK_MEM_DEVICE)) ||
            (s = cli_dense_new(&dY, a.n, a.k, dt, BSK_MEM_DEVICE)) || (s = cli_dense_copy(&dX, &X)) ||
            (s = cli_dense_copy(&dY, &Y))) {
            fprintf(stderr, "bsk %s: device buffers: %s\n", cmd, bsk_status_string(s));
            goto out;
        }
        w.X = &dX;
        w.Y = &dY;
        w.out = &dP;
    } else {
        memcpy(got, P.values, vbytes);
        W.values = got;
    }
    /* the timed runs, then one more from the initial values: the result the check sees */
    double ms = time_it(device, ctx, sddmm_once, &w, &a, &rc);
    if (rc) { ret = report_status(cmd, "bsk_sddmm", rc); goto out; }
    if (device == CLI_DEV_CPU) memcpy(got, P.values, vbytes);
#ifdef BSK_WITH_CUDA
    if (device == CLI_DEV_CUDA && cudaMemcpy(dP.values, P.values, vbytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        ret = report_status(cmd, "reset values", BSK_ERR_CUDA);
        goto out;
    }
#endif
    if ((rc = sddmm_once(&w)) || (rc = bsk_synchronize(ctx))) { ret = report_status(cmd, "bsk_sddmm", rc); goto out; }
#ifdef BSK_WITH_CUDA
    if (device == CLI_DEV_CUDA && cudaMemcpy(got, dP.values, vbytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        ret = report_status(cmd, "copy back", BSK_ERR_CUDA);
        goto out;
    }
#endif
    const char *kernel = bsk_last_kernel(ctx);
    double flop = 2.0 * (double)nvals * (double)a.k, err = NAN;
    int ref = device == CLI_DEV_CUDA ? CLI_REF_CPU : CLI_REF_F64;
    if (a.check) {
        double t0 = cli_now();
        err = cli_check_sddmm((float)a.alpha, &X, &Y, (float)a.beta, &P, got, ot, ref, a.check_rows, 1, &s);
        if (s) { ret = report_status(cmd, "reference", s); goto out; }
        if (cli_now() - t0 > 2.0) fprintf(stderr, "  check took %.1f s\n", cli_now() - t0);
    }
    ret = report(&a, kernel, ms, flop, err, a.check, bsk_bsr_mb(&P), ref);
out:
    bsk_bsr_free(&dP);
    cli_dense_free(&dX);
    cli_dense_free(&dY);
    bsk_bsr_free(&P);
    cli_dense_free(&X);
    cli_dense_free(&Y);
    free(got);
    bsk_destroy(ctx);
    return ret;
}
