/* fuzz_cli.c — the `bsk` command line's option parser and list parsers on arbitrary argument vectors
   (NUL-separated tokens). A parse that succeeds must leave every value inside its declared range. */
#include <stdlib.h>
#include <string.h>
#include "../tools/cli.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *buf = (char *)malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"spmm";
    for (size_t i = 0; i < size && argc < 63;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    int64_t m = -7, block = -7;
    uint64_t seed = 0;
    double dens = -7.0;
    int flag = 0, choice = -7;
    const char *str = NULL;
    cli_opt opts[] = {
        CLI_OPT_INT("m", &m, 1, INT32_MAX, "rows"),
        CLI_OPT_INT("block", &block, 1, 1024, "block"),
        CLI_OPT_U64("seed", &seed, "seed"),
        CLI_OPT_REAL("density", &dens, 0.0, 1.0, "density"),
        CLI_OPT_FLAG("check", &flag, "check"),
        CLI_OPT_CHOICE("dtype", &choice, "f32|f16|bf16", "dtype"),
        CLI_OPT_STR("json", &str, "json"),
    };
    char *pos[2];
    int npos = 0;
    FILE *keep = stderr;
    stderr = fopen("/dev/null", "w"); /* usage messages are expected; keep the fuzzer's output readable */
    FILE *keep_out = stdout;
    stdout = stderr;
    int r = cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), "fuzz", "fuzz", pos, 2, &npos);
    if (r == CLI_OK) {
        if (m != -7 && (m < 1 || m > INT32_MAX)) abort();
        if (block != -7 && (block < 1 || block > 1024)) abort();
        if (dens != -7.0 && !(dens >= 0.0 && dens <= 1.0)) abort();
        if (choice != -7 && (choice < 0 || choice > 2)) abort();
        if (npos < 0 || npos > 2) abort();
    }
    if (argc > 1) {
        int64_t li[8];
        double lr[8];
        int64_t sh[4][3];
        int lc[8];
        (void)cli_list_int("fuzz", "x", argv[1], 1, 1 << 20, li, 8);
        (void)cli_list_real("fuzz", "x", argv[1], 0.0, 1.0, lr, 8);
        (void)cli_list_shape("fuzz", "x", argv[1], sh, 4);
        (void)cli_list_choice("fuzz", "x", argv[1], "uniform|skewed", lc, 8);
    }
    fclose(stderr);
    stderr = keep;
    stdout = keep_out;
    free(buf);
    return 0;
}
