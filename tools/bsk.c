/* bsk.c — the `bsk` command: main and the subcommand table. Each subcommand lives in tools/cmd_*.c;
   the helpers they share are in tools/cli.{h,c}. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

/* The subcommands: X(name, handler, one-line summary). Adding one is one line here (the handler's
   declaration comes from the same line). */
#define BSK_COMMANDS(X)                                                                                  \
    X("spmm", cmd_spmm, "C = alpha*op(A)*B + beta*C on random data: time, TFLOPS, kernel, --check")     \
    X("sddmm", cmd_sddmm, "out = alpha*(X*Y^T) on a random block pattern + beta*out: time, --check")     \
    X("verify", cmd_verify, "a grid of small random checks against the CPU reference; pass/fail table")  \
    X("bench", cmd_bench, "benchmark: 'bench spmm' (vs cuBLAS/cuSPARSE or OpenBLAS), 'bench sddmm', 'bench train'")     \
    X("attention", cmd_attention, "block-sparse attention benchmark (GPU): TFLOPS vs cuBLAS, gate share, latency") \
    X("attention-bwd", cmd_attention_bwd, "block-sparse attention forward + backward benchmark (GPU): TFLOPS") \
    X("tune", cmd_tune, "autotune bsk_spmm for this GPU: every kernel family timed per case, the table saved")      \
    X("preflight", cmd_preflight, "the GPU, its capabilities, and the architectures this build carries") \
    X("version", cmd_version, "print the library version")

#define DECLARE(name, fn, summary) int fn(int argc, char **argv);
BSK_COMMANDS(DECLARE)

typedef struct command {
    const char *name;
    cli_cmd_fn fn;
    const char *summary;
} command;

#define ENTRY(name, fn, summary) {name, fn, summary},
static const command commands[] = {BSK_COMMANDS(ENTRY)};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

int cmd_version(int argc, char **argv)
{
    int npos;
    int rc = cli_parse(argc, argv, NULL, 0, "bsk version", "Print the library version.", NULL, 0, &npos);
    if (rc) return rc == CLI_HELP ? CLI_OK : rc;
    printf("bsk %s\n", bsk_version_string());
    return CLI_OK;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bsk <command> [options]      (bsk <command> --help for its options)\n\n"
               "BlackwellSparseK %s: block-sparse matrix work on NVIDIA GPUs.\n\ncommands:\n",
            bsk_version_string());
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit codes: 0 success, 1 a check failed or the library reported an error, 2 bad command line\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2) /* bsk help spmm == bsk spmm --help */
            for (int i = 0; i < NCOMMANDS; i++)
                if (strcmp(argv[2], commands[i].name) == 0) {
                    char *av[] = {argv[2], "--help", NULL};
                    return commands[i].fn(2, av);
                }
        if (argc > 2) { /* bsk help nosuch: a bad argument, not a request for the general help */
            fprintf(stderr, "bsk: unknown command '%.*s'\n\n", (int)(strlen(argv[2]) > 60 ? 60 : strlen(argv[2])), argv[2]);
            usage(stderr);
            return CLI_USAGE;
        }
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0) return cmd_version(argc - 1, argv + 1); /* bsk --version == bsk version */
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "bsk: unknown command '%.*s'\n\n", (int)(strlen(name) > 60 ? 60 : strlen(name)), name);
    usage(stderr);
    return CLI_USAGE;
}
