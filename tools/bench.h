/* bench.h — what `bsk bench`'s two files share: the grid, one row of results, and the device drivers.
   cmd_bench.c parses the options, builds the grid, runs the CPU path, prints the table and writes JSON;
   bench_gpu.c runs the GPU path (cuBLAS, cuSPARSE and bsk on the same data). */
#ifndef BSK_BENCH_H
#define BSK_BENCH_H

#include "cli.h"

enum { FIG_NONE = 0, /* not run (n/a for this config)            */
       FIG_OK = 1,   /* timed; err checked where a check applies   */
       FIG_FAIL = 2, /* did not run: see note                      */
       FIG_WRONG = 3 /* ran, but its result is off: no figure shown for bsk; flagged for the baselines */ };

/* One implementation's figures on one configuration. */
typedef struct bench_fig {
    int state;
    double ms, tflops, err;
    char note[96];
} bench_fig;

typedef struct bench_row {
    int64_t m, n, k, b;
    double density;
    int pattern;
    /* what bsk_bsr_random made */
    int64_t nnzb, row_min, row_max;
    double density_actual;
    /* dense: cuBLAS (GPU) or OpenBLAS sgemm (CPU); bsr / ell: cuSPARSE BSR and Blocked-ELL (GPU only) */
    bench_fig dense, bsr, ell, bsk;
    const char *kernel;
    double E; /* bsk effective rate / dense rate */
} bench_row;

typedef struct bench_state {
    int sddmm;   /* 0: spmm, 1: sddmm */
    int device;  /* CLI_DEV_CPU / CLI_DEV_CUDA */
    bsk_dtype dt, ot;
    int iters, warmup;
    int cache;   /* bsk_set_pattern_cache for bsk's runs (forgotten after each configuration) */
    uint64_t seed;
    const char *json;
    double flush_bytes;
    bench_row *rows;
    int nrows;
    int failures; /* bsk runs that failed or were wrong */
} bench_state;

/* Called after each row is complete: progress on stderr, JSON rewritten (so a run cut short still
   leaves its results). */
void bench_row_done(bench_state *b, int i);
/* Flop of one configuration: dense 2·M·N·K, bsk on kept blocks 2·nnzb·b²·(N for spmm, K for sddmm). */
double bench_dense_flop(const bench_row *r);
/* Row i's random pattern (rows x cols, its block size, density, pattern, seed + i; values in the dtype the
   op reads) into *A (host; free with bsk_bsr_free), and its statistics into the row. On failure nothing
   stays allocated. */
bsk_status bench_row_pattern(const bench_state *b, int i, int64_t rows, int64_t cols, bsk_bsr *A);
double bench_sparse_flop(const bench_state *b, const bench_row *r);
/* Fill fig from a median time (ms) and flop. */
void bench_fig_time(bench_fig *f, double ms, double flop);
/* One figure as the JSON object `key` (state, ms, tflops, rel_err, note), as `bsk bench` writes it. */
void bench_write_fig(cli_json *j, const char *key, const bench_fig *f);
/* A JSON results file written as path.part and renamed by bench_json_close (NULL: could not open; said on
   stderr under `who`). */
FILE *bench_json_open(const char *path, const char *who, char **tmp);
/* Whether path.part can be created (checked before a long run; says why not on stderr). */
int bench_json_writable(const char *path, const char *who);
void bench_json_close(FILE *f, char *tmp, const char *path, const char *who);

/* `bsk bench train` (tools/bench_train.c): a training step of a block-sparse linear layer (fwd SpMM, Aᵀ·B,
   SDDMM) against cuBLAS. argv[0] = "train". */
int cmd_bench_train(int argc, char **argv);

#ifdef BSK_WITH_CUDA
/* Runs every row on the GPU (rows are grouped by shape). Returns CLI_OK or CLI_FAIL (setup failure). */
int bench_gpu(bench_state *b);
#endif

#endif
