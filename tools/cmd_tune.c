/* cmd_tune.c — `bsk tune`: the autotuner over a grid of SpMM cases on this GPU (bsk_tune_spmm per case: every kernel
   family timed, the fastest recorded), a table of default vs tuned kernels, the table saved as a tune file that
   bsk_tune_load / BSK_TUNE_FILE read back. Each case's result is checked against the CPU backend on a few block rows. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"

int cmd_tune(int argc, char **argv)
{
    const char *cmd = "tune";
    const char *out_path = "bsk_tune.txt", *blocks_s = "16,32,64,128", *dens_s = "0.05,0.10,0.25,0.50",
               *shapes_s = "4096x4096x4096", *ops_s = "n,t", *betas_s = "0,1";
    int dtype = BSK_F16, quick = 0;
    int64_t iters = 10, check_rows = 4;
    uint64_t seed = 1;
    cli_opt opts[] = {
        CLI_OPT_STR("out", &out_path, "tune file to write (default bsk_tune.txt)"),
        CLI_OPT_STR("blocks", &blocks_s, "square block sizes (default 16,32,64,128)"),
        CLI_OPT_STR("densities", &dens_s, "block densities (default 0.05,0.10,0.25,0.50)"),
        CLI_OPT_STR("shapes", &shapes_s, "MxNxK list (default 4096x4096x4096)"),
        CLI_OPT_STR("ops", &ops_s, "n, t or n,t (default n,t: op t is dX = W^T dY in training)"),
        CLI_OPT_STR("betas", &betas_s, "beta values (default 0,1: beta = 0 and beta != 0 are classes of their own)"),
        CLI_OPT_CHOICE("dtype", &dtype, CLI_DTYPES, "A and B dtype; C has the same (default f16)"),
        CLI_OPT_INT("iters", &iters, 1, 1000, "timed runs per family (median; default 10)"),
        CLI_OPT_INT("check-rows", &check_rows, 0, 1 << 30, "block rows checked vs the CPU backend (0: all; default 4)"),
        CLI_OPT_U64("seed", &seed, "random seed (default 1)"),
        CLI_OPT_FLAG("quick", &quick, "one small shape (1024^3), beta 0, 5 timed rounds"),
    };
    int npos, rc = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                             "bsk tune [--out FILE] [--blocks 16,32,64,128] [--densities ...] [--shapes MxNxK,...]",
                             "Autotune bsk_spmm for this GPU: for each case of the grid, time every kernel family that\n"
                             "can run it (bsk_tune_spmm), record the fastest per case class, print default vs tuned,\n"
                             "and save the table (load it with bsk_tune_load or the environment variable BSK_TUNE_FILE).",
                             NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    if (quick) { shapes_s = "1024x1024x1024"; betas_s = "0"; iters = 5; }
    int64_t blocks[8], shapes[8][3];
    double dens[16], betas[4];
    int ops[2];
    int nb = cli_list_int(cmd, "blocks", blocks_s, 1, 1024, blocks, 8);
    int nd = cli_list_real(cmd, "densities", dens_s, 1e-6, 1.0, dens, 16);
    int ns = cli_list_shape(cmd, "shapes", shapes_s, shapes, 8);
    int no = cli_list_choice(cmd, "ops", ops_s, "n|t", ops, 2);
    int nbe = cli_list_real(cmd, "betas", betas_s, -1e6, 1e6, betas, 4);
    if (nb < 0 || nd < 0 || ns < 0 || no < 0 || nbe < 0) return CLI_USAGE;
    /* host memory of each case (A, B, C0 and C on the host, the check's rows: what cli_spmm_host_bytes counts),
       refused before any work; an overcommitted malloc is otherwise killed once touched */
    for (int si = 0; si < ns; si++)
        for (int oi = 0; oi < no; oi++)
            for (int bi = 0; bi < nb; bi++)
                for (int di = 0; di < nd; di++) {
                    const double need = cli_spmm_host_bytes(ops[oi], shapes[si][0], shapes[si][1], shapes[si][2], blocks[bi],
                                                            blocks[bi], dens[di], (bsk_dtype)dtype, (bsk_dtype)dtype, 1);
                    if (!cli_host_fits(cmd, need)) return CLI_FAIL;
                }

    bsk_context *ctx = NULL;
    int device;
    if (cli_open(cmd, CLI_DEV_CUDA, &ctx, &device)) return CLI_FAIL;
    const bsk_dtype dt = (bsk_dtype)dtype;
    int ret = CLI_OK, changed = 0, cases = 0;
    printf("%-3s %-5s %-5s %-4s %-16s | %-22s %9s | %-22s %9s | %7s | %s\n", "op", "block", "dens", "beta", "shape M x N x K",
           "default kernel", "ms", "tuned kernel", "ms", "speedup", "check");
    for (int si = 0; si < ns && ret == CLI_OK; si++)
        for (int oi = 0; oi < no && ret == CLI_OK; oi++)
            for (int bi = 0; bi < nb && ret == CLI_OK; bi++)
                for (int di = 0; di < nd && ret == CLI_OK; di++)
                for (int ei = 0; ei < nbe && ret == CLI_OK; ei++) {
                    const int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                    const bsk_op op = (bsk_op)ops[oi];
                    const int32_t b = (int32_t)blocks[bi];
                    const float beta = (float)betas[ei];
                    bsk_bsr A = {0}, dA = {0};
                    bsk_dense B = {0}, C0 = {0}, C = {0}, dB = {0}, dC = {0};
                    bsk_tune_result r;
                    bsk_status s = bsk_bsr_random(op ? k : m, op ? m : k, b, b, dens[di], BSK_PATTERN_UNIFORM,
                                                  seed + (uint64_t)cases, dt, &A);
                    if (!s) s = cli_dense_new(&B, k, n, dt, BSK_MEM_HOST);
                    if (!s) s = cli_dense_new(&C0, m, n, dt, BSK_MEM_HOST);
                    if (!s) s = cli_dense_new(&C, m, n, dt, BSK_MEM_HOST);
                    if (!s) {
                        cli_fill_random(B.data, dt, k * n, seed + 1000 + (uint64_t)cases);
                        cli_fill_random(C0.data, dt, m * n, seed + 2000 + (uint64_t)cases);
                    }
                    if (!s) s = bsk_bsr_clone(&A, BSK_MEM_DEVICE, &dA);
                    if (!s) s = cli_dense_new(&dB, k, n, dt, BSK_MEM_DEVICE);
                    if (!s) s = cli_dense_new(&dC, m, n, dt, BSK_MEM_DEVICE);
                    if (!s) s = cli_dense_copy(&dB, &B);
                    if (!s) s = cli_dense_copy(&dC, &C0);
                    /* beta != 0: the tuner must leave C = alpha A B + beta C0, however many runs it timed */
                    if (!s) s = bsk_tune_spmm(ctx, op, 1.0f, &dA, &dB, beta, &dC, (int)iters, &r);
                    if (!s) s = bsk_synchronize(ctx);
                    if (!s) s = cli_dense_copy(&C, &dC);
                    double err = NAN, tol = cli_tol(dt, dt);
                    if (!s) err = cli_check_spmm(op, 1.0f, &A, &B, beta, &C0, &C, CLI_REF_CPU, check_rows, 0, &s);
                    if (s) {
                        fprintf(stderr, "bsk %s: op %c b %d d %.3f %lldx%lldx%lld: %s\n", cmd, op ? 't' : 'n', b,
                                dens[di], (long long)m, (long long)n, (long long)k, bsk_status_string(s));
                        ret = CLI_FAIL;
                    } else {
                        char shape[48];
                        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
                        int pass = err <= tol;
                        changed += strcmp(r.kernel, r.default_kernel) != 0;
                        printf("%-3s %-5d %-5.3f %-4g %-16s | %-22s %9.4f | %-22s %9.4f | %6.2fx | %.1e %s\n",
                               op ? "t" : "n", b, dens[di], (double)beta, shape, r.default_kernel, r.default_ms, r.kernel, r.ms,
                               r.default_ms / r.ms, err, pass ? "ok" : "FAIL");
                        fflush(stdout);
                        if (!pass) ret = CLI_FAIL;
                    }
                    cases++;
                    bsk_bsr_free(&A);
                    bsk_bsr_free(&dA);
                    cli_dense_free(&B);
                    cli_dense_free(&C0);
                    cli_dense_free(&C);
                    cli_dense_free(&dB);
                    cli_dense_free(&dC);
                }
    if (ret == CLI_OK) {
        bsk_status s = bsk_tune_save(ctx, out_path);
        if (s) {
            fprintf(stderr, "bsk %s: writing %s: %s\n", cmd, out_path, bsk_status_string(s));
            ret = CLI_FAIL;
        } else {
            printf("%d cases, %d where the tuned kernel differs from the default; %d classes written to %s\n", cases,
                   changed, bsk_tune_entries(ctx), out_path);
        }
    }
    bsk_destroy(ctx);
    return ret;
}
