/* cmd_verify.c — `bsk verify`: a grid of small random SpMM / SDDMM problems on the available device,
   each compared with a reference (the CPU backend for GPU runs, float64 for CPU runs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static const int32_t BLOCKS[][2] = {{16, 16}, {32, 32}, {64, 64}, {128, 128}, {64, 32}, {32, 64}};
static const bsk_dtype DTYPES[][2] = {{BSK_F32, BSK_F32}, {BSK_F16, BSK_F16}, {BSK_BF16, BSK_BF16},
                                      {BSK_F16, BSK_F32}, {BSK_BF16, BSK_F32}};
#define NBLOCKS ((int)(sizeof BLOCKS / sizeof BLOCKS[0]))
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

typedef struct vcase {
    int sddmm;
    int32_t br, bc;
    bsk_dtype in, out;
    bsk_op op;
    int tail;
    int64_t m, n, k; /* result m x n, inner k */
    double density;
    bsk_pattern pattern;
    float alpha, beta;
    uint64_t seed;
} vcase;

typedef struct vresult {
    bsk_status status; /* of the run under test, or of the reference */
    const char *where;
    double err, tol;
    const char *kernel;
} vresult;

static vresult run_case(bsk_context *ctx, int device, const vcase *c)
{
    vresult r = {BSK_SUCCESS, "", NAN, cli_tol(c->in, c->out), "-"};
    int ref = device == CLI_DEV_CUDA ? CLI_REF_CPU : CLI_REF_F64;
    bsk_bsr A = {0};
    bsk_dense B = {0}, C0 = {0}, C = {0};
    void *got = NULL;
    bsk_status s;
    if (!c->sddmm) {
        /* A is m x k (op N) or k x m (op T); its block shape is (br, bc) as stored */
        int64_t ar = c->op ? c->k : c->m, ac = c->op ? c->m : c->k;
        if ((s = bsk_bsr_random(ar, ac, c->br, c->bc, c->density, c->pattern, c->seed, c->in, &A)) ||
            (s = cli_dense_new(&B, c->k, c->n, c->in, BSK_MEM_HOST)) || (s = cli_dense_new(&C0, c->m, c->n, c->out, BSK_MEM_HOST)) ||
            (s = cli_dense_new(&C, c->m, c->n, c->out, BSK_MEM_HOST))) { r.where = "setup"; goto out; }
        cli_fill_random(B.data, c->in, c->k * c->n, c->seed + 1);
        if (c->beta != 0.0f) cli_fill_random(C0.data, c->out, c->m * c->n, c->seed + 2);
        else cli_fill_nan(C0.data, c->out, c->m * c->n);
        cli_fill_nan(C.data, c->out, c->m * c->n);
        if ((s = cli_spmm_on(ctx, device, c->op, c->alpha, &A, &B, c->beta, &C0, &C))) { r.where = "bsk_spmm"; goto out; }
        r.kernel = bsk_last_kernel(ctx);
        r.err = cli_check_spmm(c->op, c->alpha, &A, &B, c->beta, &C0, &C, ref, 0, 0, &s);
        if (s) r.where = "reference";
    } else {
        int64_t nvals;
        if ((s = bsk_bsr_random(c->m, c->n, c->br, c->bc, c->density, c->pattern, c->seed, c->out, &A)) ||
            (s = cli_dense_new(&B, c->m, c->k, c->in, BSK_MEM_HOST)) || (s = cli_dense_new(&C, c->n, c->k, c->in, BSK_MEM_HOST))) {
            r.where = "setup";
            goto out;
        }
        nvals = A.nnzb * A.block_rows * A.block_cols;
        if (!(got = malloc((size_t)nvals * bsk_dtype_size(c->out) + 1))) { s = BSK_ERR_OUT_OF_MEMORY; r.where = "setup"; goto out; }
        if (c->beta == 0.0f) cli_fill_nan(A.values, c->out, nvals);
        cli_fill_random(B.data, c->in, c->m * c->k, c->seed + 1);
        cli_fill_random(C.data, c->in, c->n * c->k, c->seed + 2);
        if ((s = cli_sddmm_on(ctx, device, c->alpha, &B, &C, c->beta, &A, got))) { r.where = "bsk_sddmm"; goto out; }
        r.kernel = bsk_last_kernel(ctx);
        r.err = cli_check_sddmm(c->alpha, &B, &C, c->beta, &A, got, c->out, ref, 0, 0, &s);
        if (s) r.where = "reference";
    }
out:
    r.status = s;
    bsk_bsr_free(&A);
    cli_dense_free(&B);
    cli_dense_free(&C0);
    cli_dense_free(&C);
    free(got);
    return r;
}

int cmd_verify(int argc, char **argv)
{
    int device_req = CLI_DEV_AUTO, quick = 0, which = 2, npos;
    uint64_t seed = 1;
    cli_opt opts[] = {
        CLI_OPT_CHOICE("device", &device_req, CLI_DEVICES, "device under test (default: cuda when present)"),
        CLI_OPT_CHOICE("ops", &which, "spmm|sddmm|all", "which operations"),
        CLI_OPT_FLAG("quick", &quick, "square blocks 32 and 128 only"),
        CLI_OPT_U64("seed", &seed, "random seed"),
    };
    int rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "bsk verify [--device D] [--ops O] [--quick]",
                       "Run a grid of small random problems (block shapes 16..128 incl. non-square, f32/f16/bf16\n"
                       "inputs with same-type and f32 outputs, op N and T, sizes that are and are not block\n"
                       "multiples, uniform and skewed patterns, beta 0 and not) on the device under test and compare\n"
                       "each with the CPU backend (GPU runs) or a float64 reference (CPU runs). Prints one line per\n"
                       "case; exits 1 if any fails.",
                       NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    bsk_context *ctx;
    int device;
    if (cli_open("verify", device_req, &ctx, &device)) return CLI_FAIL;
    printf("bsk verify on %s, reference: %s, seed %llu\n", device == CLI_DEV_CUDA ? "cuda" : "cpu",
           device == CLI_DEV_CUDA ? "the CPU backend" : "float64", (unsigned long long)seed);
    printf("%-5s %-7s %-9s %-2s %-16s %-14s %-10s %-8s %s\n", "what", "block", "dtype", "op", "M x N x K", "kernel", "rel err",
           "tol", "result");
    int pass = 0, fail = 0, idx = 0;
    for (int kind = 0; kind < 2; kind++) {
        if ((which == 0 && kind == 1) || (which == 1 && kind == 0)) continue;
        for (int b = 0; b < NBLOCKS; b++) {
            if (quick && !(BLOCKS[b][0] == BLOCKS[b][1] && (BLOCKS[b][0] == 32 || BLOCKS[b][0] == 128))) continue;
            for (int d = 0; d < NDTYPES; d++)
                for (int op = 0; op < (kind ? 1 : 2); op++)
                    for (int tail = 0; tail < 2; tail++, idx++) {
                        vcase c;
                        memset(&c, 0, sizeof c);
                        c.sddmm = kind;
                        c.br = BLOCKS[b][0];
                        c.bc = BLOCKS[b][1];
                        c.in = DTYPES[d][0];
                        c.out = DTYPES[d][1];
                        c.op = (bsk_op)op;
                        c.tail = tail;
                        /* the result's rows are cut by the block dimension that lies along them */
                        int32_t along_m = op ? c.bc : c.br, along_k = op ? c.br : c.bc;
                        if (kind) along_k = c.bc; /* sddmm: out is m x n in (br, bc) blocks */
                        /* several block rows / columns, and N past one 256-wide tile (with a ragged end) */
                        c.m = 5 * (int64_t)along_m + (tail ? along_m / 2 + 1 : 0);
                        c.n = kind ? 4 * (int64_t)c.bc + (tail ? c.bc / 3 + 2 : 0) : (tail ? 300 : 256);
                        c.k = kind ? (tail ? 72 : 64) : 4 * (int64_t)along_k + (tail ? along_k / 3 + 2 : 0);
                        c.density = idx % 2 ? 0.6 : 0.3;
                        c.pattern = idx % 3 == 2 ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM;
                        c.alpha = 1.25f;
                        c.beta = idx % 2 ? 0.5f : 0.0f;
                        c.seed = seed * 1000003u + (uint64_t)idx;
                        vresult r = run_case(ctx, device, &c);
                        char blk[16], dts[16], dims[40];
                        snprintf(blk, sizeof blk, "%dx%d", c.br, c.bc);
                        snprintf(dts, sizeof dts, "%s>%s", cli_dtype_name(c.in), cli_dtype_name(c.out));
                        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)c.m, (long long)c.n, (long long)c.k);
                        int ok = r.status == BSK_SUCCESS && r.err <= r.tol;
                        printf("%-5s %-7s %-9s %-2s %-16s %-14s %-10.2e %-8.0e %s", kind ? "sddmm" : "spmm", blk, dts,
                               kind ? "-" : (op ? "T" : "N"), dims, r.kernel, r.err, r.tol, ok ? "PASS" : "FAIL");
                        if (r.status) printf(" (%s: %s)", r.where, bsk_status_string(r.status));
                        printf("\n");
                        fflush(stdout);
                        ok ? pass++ : fail++;
                    }
        }
    }
    printf("%d passed, %d failed\n", pass, fail);
    bsk_destroy(ctx);
    return fail ? CLI_FAIL : CLI_OK;
}
