/* cmd_bench.c — `bsk bench spmm|sddmm`: the grid, the CPU path (bsk's CPU backend against OpenBLAS), the
   table and the JSON. The GPU path (cuBLAS / cuSPARSE / bsk) is in bench_gpu.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#ifdef BSK_HAVE_CBLAS
#include <cblas.h>
#endif

#define MAXLIST 16

double bench_dense_flop(const bench_row *r) { return 2.0 * (double)r->m * (double)r->n * (double)r->k; }

double bench_sparse_flop(const bench_state *b, const bench_row *r)
{
    return 2.0 * (double)r->nnzb * (double)r->b * (double)r->b * (double)(b->sddmm ? r->k : r->n);
}

void bench_fig_time(bench_fig *f, double ms, double flop)
{
    f->ms = ms;
    f->tflops = flop / (ms * 1e-3) * 1e-12;
}

void bench_write_fig(cli_json *j, const char *key, const bench_fig *f)
{
    static const char *states[] = {"n/a", "ok", "failed", "wrong"};
    cli_json_obj(j, key);
    cli_json_str(j, "state", states[f->state]);
    cli_json_num(j, "ms", f->state == FIG_OK || f->state == FIG_WRONG ? f->ms : NAN);
    cli_json_num(j, "tflops", f->state == FIG_OK || f->state == FIG_WRONG ? f->tflops : NAN);
    cli_json_num(j, "rel_err", f->err);
    if (f->note[0]) cli_json_str(j, "note", f->note);
    cli_json_end(j);
}

FILE *bench_json_open(const char *path, const char *who, char **tmp)
{
    /* write a sibling file and rename it at the end (bench_json_close), so a reader never sees half a document */
    size_t len = strlen(path);
    *tmp = (char *)malloc(len + 8);
    if (!*tmp) return NULL;
    snprintf(*tmp, len + 8, "%s.part", path);
    FILE *f = fopen(*tmp, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s\n", who, *tmp);
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

int bench_json_writable(const char *path, const char *who)
{
    char *tmp;
    FILE *f = bench_json_open(path, who, &tmp);
    if (!f) return 0;
    fclose(f);
    remove(tmp);
    free(tmp);
    return 1;
}

void bench_json_close(FILE *f, char *tmp, const char *path, const char *who)
{
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) fprintf(stderr, "%s: cannot write %s\n", who, path);
    free(tmp);
}

static void write_json(const bench_state *b, int upto)
{
    char *tmp;
    FILE *f = bench_json_open(b->json, "bsk bench", &tmp);
    if (!f) return;
    cli_json j;
    cli_json_begin(&j, f);
    cli_json_meta(&j, b->sddmm ? "bsk bench sddmm" : "bsk bench spmm");
    cli_json_obj(&j, "config");
    cli_json_str(&j, "op", b->sddmm ? "sddmm" : "spmm");
    cli_json_str(&j, "device", b->device == CLI_DEV_CUDA ? "cuda" : "cpu");
    cli_json_str(&j, "dtype", cli_dtype_name(b->dt));
    cli_json_str(&j, "out_dtype", cli_dtype_name(b->ot));
    cli_json_str(&j, "baseline", b->device == CLI_DEV_CUDA ? "cublasGemmEx (fp32 compute)" : "cblas_sgemm (OpenBLAS)");
    cli_json_int(&j, "iters", b->iters);
    cli_json_int(&j, "warmup", b->warmup);
    cli_json_num(&j, "l2_flush_bytes", b->flush_bytes);
    cli_json_str(&j, "timing", b->device == CLI_DEV_CUDA ? "CUDA events, median, L2 flushed before each iteration"
                                                          : "wall clock, median");
    cli_json_str(&j, "pattern_cache", b->cache ? "on" : "off");
    cli_json_str(&j, "E", "bsk effective TFLOPS on kept blocks / dense baseline TFLOPS, same run");
    cli_json_end(&j);
    cli_json_arr(&j, "results");
    for (int i = 0; i < upto; i++) {
        const bench_row *r = &b->rows[i];
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
        cli_json_num(&j, "dense_flop", bench_dense_flop(r));
        cli_json_num(&j, "sparse_flop", bench_sparse_flop(b, r));
        bench_write_fig(&j, "dense", &r->dense);
        if (b->device == CLI_DEV_CUDA && !b->sddmm) {
            bench_write_fig(&j, "cusparse_bsr", &r->bsr);
            bench_write_fig(&j, "cusparse_blocked_ell", &r->ell);
        }
        if (b->device == CLI_DEV_CUDA && b->sddmm) bench_write_fig(&j, "cusparse_sddmm", &r->bsr); /* note: the format */
        bench_write_fig(&j, "bsk", &r->bsk);
        cli_json_str(&j, "kernel", r->kernel ? r->kernel : "");
        cli_json_num(&j, "E", r->E);
        cli_json_end(&j);
    }
    cli_json_end(&j);
    cli_json_finish(&j);
    bench_json_close(f, tmp, b->json, "bsk bench");
}

static void fig_cell(char *buf, size_t n, const bench_fig *f, double scale)
{
    if (f->state == FIG_OK) snprintf(buf, n, "%.1f", f->tflops * scale);
    else if (f->state == FIG_WRONG) snprintf(buf, n, "%.1f?", f->tflops * scale);
    else if (f->state == FIG_FAIL) snprintf(buf, n, "fail");
    else snprintf(buf, n, "-");
}

void bench_row_done(bench_state *b, int i)
{
    bench_row *r = &b->rows[i];
    if (r->bsk.state == FIG_OK && r->dense.state == FIG_OK) r->E = r->bsk.tflops / r->dense.tflops;
    if (r->bsk.state == FIG_FAIL || r->bsk.state == FIG_WRONG) b->failures++;
    double scale = b->device == CLI_DEV_CUDA ? 1.0 : 1e3;
    char d[24], k[24];
    fig_cell(d, sizeof d, &r->dense, scale);
    fig_cell(k, sizeof k, &r->bsk, scale);
    fprintf(stderr, "[%d/%d] %lldx%lldx%lld b=%lld d=%.2f %s: dense %s, bsk %s %s, E %.3f%s%s\n", i + 1, b->nrows,
            (long long)r->m, (long long)r->n, (long long)r->k, (long long)r->b, r->density, cli_pattern_name(r->pattern), d,
            k, b->device == CLI_DEV_CUDA ? "TFLOPS" : "GFLOPS", r->E, r->bsk.note[0] ? " — " : "", r->bsk.note);
    if (b->json) write_json(b, i + 1);
}

static void print_table(const bench_state *b)
{
    int gpu = b->device == CLI_DEV_CUDA, spmm_gpu = gpu && !b->sddmm;
    double scale = gpu ? 1.0 : 1e3;
    printf("\n%s %s, %s -> %s, %s; %s (effective on kept blocks), median of %d%s\n", b->sddmm ? "SDDMM" : "SpMM",
           gpu ? "GPU" : "CPU", cli_dtype_name(b->dt), cli_dtype_name(b->ot),
           gpu ? "dense = cublasGemmEx" : "dense = OpenBLAS sgemm", gpu ? "TFLOPS" : "GFLOPS", b->iters,
           gpu && b->cache ? ", bsk with the pattern cache on" : "");
    printf("%-20s %4s %5s %-8s %8s", "M x N x K", "b", "dens", "pattern", "dense");
    if (spmm_gpu) printf(" %8s %8s", "cuSP-BSR", "cuSP-ELL");
    if (gpu && b->sddmm) printf(" %8s", "cuSPARSE");
    printf(" %8s %6s %9s  %s\n", "bsk", "E", "rel err", "kernel / note");
    for (int i = 0; i < b->nrows; i++) {
        const bench_row *r = &b->rows[i];
        char shape[40], c0[24], c1[24], c2[24], c3[24], e[16];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)r->m, (long long)r->n, (long long)r->k);
        fig_cell(c0, sizeof c0, &r->dense, scale);
        fig_cell(c1, sizeof c1, &r->bsr, scale);
        fig_cell(c2, sizeof c2, &r->ell, scale);
        fig_cell(c3, sizeof c3, &r->bsk, scale);
        if (isfinite(r->E)) snprintf(e, sizeof e, "%.3f", r->E);
        else snprintf(e, sizeof e, "-");
        printf("%-20s %4lld %5.2f %-8s %8s", shape, (long long)r->b, r->density, cli_pattern_name(r->pattern), c0);
        if (spmm_gpu) printf(" %8s %8s", c1, c2);
        if (gpu && b->sddmm) printf(" %8s", c1);
        printf(" %8s %6s %9.2e  %s%s%s\n", c3, e, r->bsk.err, r->kernel ? r->kernel : "-", r->bsk.note[0] ? " " : "",
               r->bsk.note);
    }
    if (spmm_gpu) printf("'?' = the baseline's result disagreed with cuBLAS (rel err in the JSON)\n");
    if (gpu && b->sddmm) {
        /* what the cuSPARSE column ran (BSR, or CSR over the expanded pattern) or why it could not, once per change */
        printf("cuSPARSE = cusparseSDDMM (ALG_DEFAULT, fp32 compute); '?' = its result disagreed with cuBLAS\n");
        for (int i = 0; i < b->nrows; i++)
            if (b->rows[i].bsr.note[0] && (i == 0 || strcmp(b->rows[i].bsr.note, b->rows[i - 1].bsr.note) != 0))
                printf("  cuSPARSE from row %d: %s\n", i + 1, b->rows[i].bsr.note);
    }
}

/* ---------------------------------------------------------------- CPU path */

typedef struct cpu_work {
    bsk_context *ctx;
    int sddmm;
    bsk_bsr *A;
    bsk_dense *B, *C, *X, *Y;
    const float *Ad, *Bd; /* dense baseline operands (f32) */
    float *Cd;
    int64_t m, n, k;
} cpu_work;

static int cpu_bsk_once(void *p)
{
    cpu_work *w = (cpu_work *)p;
    return w->sddmm ? bsk_sddmm(w->ctx, 1.0f, w->X, w->Y, 0.0f, w->A) : bsk_spmm(w->ctx, BSK_OP_N, 1.0f, w->A, w->B, 0.0f, w->C);
}

#ifdef BSK_HAVE_CBLAS
static int cpu_sgemm_once(void *p)
{
    cpu_work *w = (cpu_work *)p;
    /* spmm: C = A·B; sddmm: C = X·Yᵀ with Bd holding Y (n x k) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, w->sddmm ? CblasTrans : CblasNoTrans, (int)w->m, (int)w->n, (int)w->k, 1.0f,
                w->Ad, (int)w->k, w->Bd, w->sddmm ? (int)w->k : (int)w->n, 0.0f, w->Cd, (int)w->n);
    return 0;
}
#endif

static int bench_cpu(bench_state *b)
{
    bsk_context *ctx;
    int dev;
    if (cli_open("bench", CLI_DEV_CPU, &ctx, &dev)) return CLI_FAIL;
    int rc = CLI_OK;
    for (int i0 = 0; i0 < b->nrows;) {
        bench_row *r0 = &b->rows[i0];
        int i1 = i0;
        while (i1 < b->nrows && b->rows[i1].m == r0->m && b->rows[i1].n == r0->n && b->rows[i1].k == r0->k) i1++;
        int64_t m = r0->m, n = r0->n, k = r0->k;
        /* spmm: B is k x n, C m x n; sddmm: X m x k, Y n x k */
        bsk_dense B = {0}, C = {0};
        float *Ad = NULL, *Bd = NULL, *Cd = NULL;
        bsk_status s;
        if ((s = cli_dense_new(&B, b->sddmm ? m : k, b->sddmm ? k : n, b->dt, BSK_MEM_HOST)) ||
            (s = cli_dense_new(&C, b->sddmm ? n : m, b->sddmm ? k : n, b->sddmm ? b->dt : b->ot, BSK_MEM_HOST))) {
            fprintf(stderr, "bsk bench: host buffers: %s\n", bsk_status_string(s));
            cli_dense_free(&B);
            rc = CLI_FAIL;
            break;
        }
        cli_fill_random(B.data, B.dtype, B.rows * B.cols, b->seed + 11);
        cli_fill_random(C.data, C.dtype, C.rows * C.cols, b->seed + 12);
        bench_fig dense = {FIG_NONE, NAN, NAN, NAN, "no BLAS in this build"};
#ifdef BSK_HAVE_CBLAS
        Ad = (float *)malloc((size_t)(m * k) * sizeof *Ad);
        Bd = cli_to_float(b->sddmm ? C.data : B.data, b->dt, b->sddmm ? n * k : k * n);
        Cd = (float *)malloc((size_t)(m * n) * sizeof *Cd);
        if (Ad && Bd && Cd) {
            cli_fill_random(Ad, BSK_F32, m * k, b->seed + 13);
            cpu_work w = {ctx, b->sddmm, NULL, NULL, NULL, NULL, NULL, Ad, Bd, Cd, m, n, k};
            int wrc;
            fprintf(stderr, "timing OpenBLAS sgemm %lldx%lldx%lld ...\n", (long long)m, (long long)n, (long long)k);
            double ms = cli_time_host(cpu_sgemm_once, &w, b->warmup, b->iters, &wrc);
            dense.state = FIG_OK;
            dense.note[0] = '\0';
            bench_fig_time(&dense, ms, 2.0 * (double)m * (double)n * (double)k);
        } else {
            dense.state = FIG_FAIL;
            snprintf(dense.note, sizeof dense.note, "out of memory");
        }
#endif
        for (int i = i0; i < i1; i++) {
            bench_row *r = &b->rows[i];
            r->dense = dense;
            bsk_bsr A = {0};
            bsk_dense out = {0};
            void *vals = NULL;
            if ((s = bench_row_pattern(b, i, m, b->sddmm ? n : k, &A))) {
                r->bsk.state = FIG_FAIL;
                snprintf(r->bsk.note, sizeof r->bsk.note, "bsk_bsr_random: %s", bsk_status_string(s));
                bench_row_done(b, i);
                continue;
            }
            cpu_work w = {ctx, b->sddmm, &A, &B, &out, &B, &C, NULL, NULL, NULL, m, n, k};
            size_t vbytes = (size_t)(A.nnzb * A.block_rows * A.block_cols) * bsk_dtype_size(A.dtype);
            if (!b->sddmm) s = cli_dense_new(&out, m, n, b->ot, BSK_MEM_HOST);
            else if (!(vals = malloc(vbytes + 1))) s = BSK_ERR_OUT_OF_MEMORY;
            bsk_bsr P = A; /* sddmm writes into a copy; A keeps the pattern's initial values for the check */
            if (b->sddmm) { P.values = vals; w.A = &P; }
            int wrc = s;
            double ms = NAN;
            if (!s) ms = cli_time_host(cpu_bsk_once, &w, b->warmup, b->iters, &wrc);
            if (wrc) {
                r->bsk.state = FIG_FAIL;
                snprintf(r->bsk.note, sizeof r->bsk.note, "%s", bsk_status_string(wrc));
            } else {
                /* beta = 0: the last timed run's output is the result to check (16 block rows, float64) */
                bsk_status cs;
                r->bsk.err = b->sddmm ? cli_check_sddmm(1.0f, &B, &C, 0.0f, &A, vals, b->ot, CLI_REF_F64, 16, 0, &cs)
                                      : cli_check_spmm(BSK_OP_N, 1.0f, &A, &B, 0.0f, &out, &out, CLI_REF_F64, 16, 0, &cs);
                r->kernel = bsk_last_kernel(ctx);
                bench_fig_time(&r->bsk, ms, bench_sparse_flop(b, r));
                r->bsk.state = r->bsk.err <= cli_tol(b->dt, b->ot) ? FIG_OK : FIG_WRONG;
                if (r->bsk.state == FIG_WRONG) snprintf(r->bsk.note, sizeof r->bsk.note, "WRONG RESULT");
            }
            cli_dense_free(&out);
            free(vals);
            bsk_bsr_free(&A);
            bench_row_done(b, i);
        }
        free(Ad);
        free(Bd);
        free(Cd);
        cli_dense_free(&B);
        cli_dense_free(&C);
        i0 = i1;
    }
    bsk_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------- command */

bsk_status bench_row_pattern(const bench_state *b, int i, int64_t rows, int64_t cols, bsk_bsr *A)
{
    bench_row *r = &b->rows[i];
    bsk_bsr_stats st;
    bsk_status s = bsk_bsr_random(rows, cols, (int32_t)r->b, (int32_t)r->b, r->density, (bsk_pattern)r->pattern,
                                  b->seed + (uint64_t)i, b->sddmm ? b->ot : b->dt, A);
    if (s) return s;
    if ((s = bsk_bsr_stats_get(A, &st))) {
        bsk_bsr_free(A);
        return s;
    }
    r->nnzb = A->nnzb;
    r->row_min = st.row_min;
    r->row_max = st.row_max;
    r->density_actual = st.density;
    return BSK_SUCCESS;
}

int cmd_attention(int argc, char **argv); /* tools/cmd_attention.c */

int cmd_bench(int argc, char **argv)
{
    /* `bsk bench attention ...` is the attention benchmark (the same as `bsk attention ...`) */
    if (argc > 1 && !strcmp(argv[1], "attention")) return cmd_attention(argc - 1, argv + 1);
    /* `bsk bench train ...`: the training step (fwd, Aᵀ·B, SDDMM) against cuBLAS, tools/bench_train.c */
    if (argc > 1 && !strcmp(argv[1], "train")) return cmd_bench_train(argc - 1, argv + 1);
    int quick = 0, dtype = -1, out_dtype = -1, device_req = CLI_DEV_AUTO, npos, cache = 0;
    int64_t iters = 0, warmup = -1;
    uint64_t seed = 1;
    const char *json = NULL, *sizes = NULL, *blocks = NULL, *dens = NULL, *pats = NULL;
    char *pos[1];
    cli_opt opts[] = {
        CLI_OPT_FLAG("quick", &quick, "a small subset of the grid"),
        CLI_OPT_STR("json", &json, "write every figure and the configuration to this file"),
        CLI_OPT_STR("sizes", &sizes, "shapes MxNxK,... (spmm: C MxN, inner K; sddmm: out MxN, inner K)"),
        CLI_OPT_STR("blocks", &blocks, "block sizes, e.g. 32,64,128"),
        CLI_OPT_STR("densities", &dens, "block densities, e.g. 0.1,0.25,0.5"),
        CLI_OPT_STR("patterns", &pats, "uniform,skewed"),
        CLI_OPT_CHOICE("dtype", &dtype, CLI_DTYPES, "input dtype (default f16 on the GPU, f32 on the CPU)"),
        CLI_OPT_CHOICE("out-dtype", &out_dtype, CLI_DTYPES, "output dtype (default: the input dtype)"),
        CLI_OPT_INT("iters", &iters, 1, 100000, "timed iterations (default 20 on the GPU, 5 on the CPU)"),
        CLI_OPT_INT("warmup", &warmup, 0, 1000, "untimed iterations first (default 3 GPU, 1 CPU)"),
        CLI_OPT_CHOICE("device", &device_req, CLI_DEVICES, "GPU (vs cuBLAS/cuSPARSE) or CPU (vs OpenBLAS)"),
        CLI_OPT_U64("seed", &seed, "random seed"),
        CLI_OPT_FLAG("pattern-cache", &cache, "bsk keeps each pattern's derived data between calls (bsk_set_pattern_cache), as "
                                              "for fixed weights; the baselines' format conversions are untimed too"),
    };
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                       "bsk bench spmm|sddmm [--quick] [--json FILE] [--sizes MxNxK,...] [--blocks ...] ...",
                       "GPU: cuBLAS dense (cublasGemmEx, fp32 compute, same M,N,K), cuSPARSE BSR SpMM, cuSPARSE\n"
                       "Blocked-ELL (uniform pattern) and bsk on the same data in one run; CUDA events, warm-up, median,\n"
                       "L2 flushed between iterations. bsk's output is checked against cuBLAS on the dense expansion of\n"
                       "A for every configuration; a wrong result shows no figure and makes the exit code 1.\n"
                       "E = bsk's effective TFLOPS on kept blocks / cuBLAS dense TFLOPS.\n"
                       "Default grid (spmm and sddmm): b in {32,64,128} x density in {0.10,0.25,0.50} x {uniform,skewed}\n"
                       "at 8192x8192x8192, 32768x4096x4096 and 2048x2048x2048.\n"
                       "CPU (no GPU or --device cpu): bsk's CPU backend against OpenBLAS sgemm (f32), 2048^3.\n"
                       "A^T*B (op T) and the whole training step: 'bsk bench train' (per configuration, vs cuBLAS).",
                       pos, 1, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    if (npos != 1 || (strcmp(pos[0], "spmm") != 0 && strcmp(pos[0], "sddmm") != 0))
        return cli_usage_error("bench", "say what to benchmark: 'bsk bench spmm', 'bsk bench sddmm' or 'bsk bench train'");

    bench_state b;
    memset(&b, 0, sizeof b);
    b.sddmm = strcmp(pos[0], "sddmm") == 0;
    b.seed = seed;
    b.cache = cache;
    b.json = json;
    if (json && !bench_json_writable(json, "bsk bench")) return CLI_FAIL;
    bsk_context *probe;
    if (cli_open("bench", device_req, &probe, &b.device)) return CLI_FAIL;
    bsk_destroy(probe);
    int gpu = b.device == CLI_DEV_CUDA;
#ifndef BSK_WITH_CUDA
    gpu = 0;
#endif
    b.dt = (bsk_dtype)(dtype >= 0 ? dtype : gpu ? BSK_F16 : BSK_F32);
    b.ot = (bsk_dtype)(out_dtype >= 0 ? out_dtype : (int)b.dt);
    if (b.sddmm && b.ot != BSK_F32 && b.ot != b.dt) return cli_usage_error("bench", "--out-dtype must be f32 or the input dtype");
    if (!gpu && b.dt != BSK_F32) fprintf(stderr, "bsk bench: note: the OpenBLAS baseline is f32 whatever --dtype says\n");
    b.iters = (int)(iters ? iters : gpu ? 20 : 5);
    b.warmup = (int)(warmup >= 0 ? warmup : gpu ? 3 : 1);

    /* the grid: defaults, --quick, then whatever the options name */
    int64_t shp[MAXLIST][3], blk[MAXLIST];
    double den[MAXLIST];
    int pat[MAXLIST], ns, nb, nd, np;
    if (gpu) {
        int64_t s0[][3] = {{8192, 8192, 8192}, {32768, 4096, 4096}, {2048, 2048, 2048}};
        ns = quick ? 1 : 3;
        memcpy(shp, s0, sizeof s0);
    } else {
        shp[0][0] = shp[0][1] = shp[0][2] = quick ? 1024 : 2048;
        ns = 1;
    }
    int64_t b0[] = {32, 64, 128}, bq[] = {64, 128};
    double d0[] = {0.10, 0.25, 0.50}, dq[] = {0.10, 0.50};
    nb = quick ? 2 : 3;
    memcpy(blk, quick ? bq : b0, (size_t)nb * sizeof blk[0]);
    nd = quick ? 2 : 3;
    memcpy(den, quick ? dq : d0, (size_t)nd * sizeof den[0]);
    pat[0] = BSK_PATTERN_UNIFORM;
    pat[1] = BSK_PATTERN_SKEWED;
    np = 2;
    if (sizes && (ns = cli_list_shape("bench", "sizes", sizes, shp, MAXLIST)) < 0) return CLI_USAGE;
    if (blocks && (nb = cli_list_int("bench", "blocks", blocks, 1, 1024, blk, MAXLIST)) < 0) return CLI_USAGE;
    if (dens && (nd = cli_list_real("bench", "densities", dens, 0.0, 1.0, den, MAXLIST)) < 0) return CLI_USAGE;
    if (pats && (np = cli_list_choice("bench", "patterns", pats, CLI_PATTERNS, pat, MAXLIST)) < 0) return CLI_USAGE;

    /* refuse what cannot fit before allocating anything: the dense baseline needs A (or X, Y), B and C, and each
       configuration its pattern on the host (whole blocks: a block larger than the matrix is padded; sddmm keeps a
       second copy of the values). The CPU path also holds f32 copies of the operands (sgemm, the check) and bsk's
       output. */
    for (int s = 0; s < ns; s++)
        for (int x = 0; x < nb; x++)
            for (int d = 0; d < nd; d++) {
                double m = (double)shp[s][0], n = (double)shp[s][1], k = (double)shp[s][2], e = (double)bsk_dtype_size(b.dt);
                double o = (double)bsk_dtype_size(b.ot), bs = (double)blk[x], pc = b.sddmm ? n : k; /* pattern m x pc */
                double pat = (b.sddmm ? 2 : 1) * den[d] * ceil(m / bs) * ceil(pc / bs) * (bs * bs * (b.sddmm ? o : e) + 4) +
                             16.0 * (m + pc); /* pattern metadata and the generator's scratch */
                double need = (m * k + k * n + n * k) * (e + 4) + 3.0 * m * n * 4 + pat;
                if (!gpu)
                    need = fmax(need, pat + (b.sddmm ? (m + n) * k * (e + 8) + m * n * 4 + 8 * bs * bs * ceil(n / bs)
                                                     : k * n * (e + 8) + m * n * (2 * o + 4) + m * k * 4 + 8 * bs * n));
                if (!cli_host_fits("bench", need)) return CLI_FAIL;
            }
    b.nrows = ns * nb * nd * np;
    b.rows = (bench_row *)calloc((size_t)b.nrows, sizeof *b.rows);
    if (!b.rows) { fprintf(stderr, "bsk bench: out of memory\n"); return CLI_FAIL; }
    int i = 0;
    for (int s = 0; s < ns; s++)
        for (int x = 0; x < nb; x++)
            for (int p = 0; p < np; p++)
                for (int d = 0; d < nd; d++, i++) {
                    bench_row *r = &b.rows[i];
                    r->m = shp[s][0];
                    r->n = shp[s][1];
                    r->k = shp[s][2];
                    r->b = blk[x];
                    r->density = den[d];
                    r->pattern = pat[p];
                    r->E = NAN;
                    r->dense.err = r->bsr.err = r->ell.err = r->bsk.err = NAN;
                }
    fprintf(stderr, "bsk bench %s on %s: %d configurations, %s -> %s, median of %d after %d warm-up\n", pos[0],
            gpu ? "the GPU" : "the CPU", b.nrows, cli_dtype_name(b.dt), cli_dtype_name(b.ot), b.iters, b.warmup);
#ifdef BSK_WITH_CUDA
    rc = gpu ? bench_gpu(&b) : bench_cpu(&b);
#else
    rc = bench_cpu(&b);
#endif
    print_table(&b);
    if (b.json) printf("JSON: %s\n", b.json);
    if (b.failures) printf("%d configuration(s) where bsk failed or was wrong\n", b.failures);
    free(b.rows);
    return rc ? rc : b.failures ? CLI_FAIL : CLI_OK;
}
