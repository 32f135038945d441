/* cli.h — what the files of the `bsk` command share: option parsing, data, timing, checks, JSON.
   Each helper lives once, in tools/cli.c. The command prints; the library never does.
   Exit codes of every subcommand: CLI_OK (0), CLI_FAIL (1: a check failed or the library reported an
   error), CLI_USAGE (2: bad command line). */
#ifndef BSK_CLI_H
#define BSK_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "bsk.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* ---------------------------------------------------------------- subcommands
   Handlers are listed once, in BSK_COMMANDS in tools/bsk.c (which declares them too). Each gets
   argv[0] = its own name and returns an exit code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

/* ---------------------------------------------------------------- options
   `--name value` or `--name=value`; `-h`/`--help` prints the option list and returns CLI_HELP; `--`
   ends the options. Numbers must be plain decimal (reals: anything strtod takes that is finite), fully
   consumed, and within the option's range; anything else is a usage error (message on stderr). The
   last occurrence of an option wins. */
typedef enum cli_kind {
    CLI_FLAG,   /* int: set to 1                                    */
    CLI_INT,    /* int64_t in [imin, imax]                          */
    CLI_U64,    /* uint64_t, any decimal 0 .. 2^64-1                */
    CLI_REAL,   /* double in [rmin, rmax], finite                   */
    CLI_STR,    /* const char *: the argument itself                */
    CLI_CHOICE, /* int: index of the value in choices "a|b|c"      */
} cli_kind;

typedef struct cli_opt {
    const char *name; /* long name without "--" */
    cli_kind kind;
    void *dst;
    int64_t imin, imax;
    double rmin, rmax;
    const char *choices;
    const char *help;
} cli_opt;

#define CLI_OPT_FLAG(n, p, h) {n, CLI_FLAG, p, 0, 0, 0, 0, NULL, h}
#define CLI_OPT_INT(n, p, lo, hi, h) {n, CLI_INT, p, lo, hi, 0, 0, NULL, h}
#define CLI_OPT_U64(n, p, h) {n, CLI_U64, p, 0, 0, 0, 0, NULL, h}
#define CLI_OPT_REAL(n, p, lo, hi, h) {n, CLI_REAL, p, 0, 0, lo, hi, NULL, h}
#define CLI_OPT_STR(n, p, h) {n, CLI_STR, p, 0, 0, 0, 0, NULL, h}
#define CLI_OPT_CHOICE(n, p, ch, h) {n, CLI_CHOICE, p, 0, 0, 0, 0, ch, h}

#define CLI_HELP 3 /* cli_parse: help was printed; the command returns CLI_OK */

/* Parse argv[1..argc-1] (argv[0] is the command's name, e.g. "spmm"). Positional arguments go to
   pos[0..maxpos-1] (*npos of them); more than maxpos is a usage error. `usage` is the one-line synopsis
   and `about` a paragraph printed by --help. Returns CLI_OK, CLI_HELP or CLI_USAGE. */
int cli_parse(int argc, char **argv, const cli_opt *opts, int nopts, const char *usage, const char *about,
              char **pos, int maxpos, int *npos);
/* Print "bsk <cmd>: <message>" on stderr and return CLI_USAGE (for checks after parsing). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Comma-separated lists: "32,64,128" / "0.1,0.25" / "8192x8192x8192,2048x2048x2048". At most `max`
   entries, each in [lo, hi]. Return the count, or -1 after printing why on stderr. */
int cli_list_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, int max);
int cli_list_real(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out, int max);
int cli_list_shape(const char *cmd, const char *opt, const char *s, int64_t (*out)[3], int max);
/* A list of names from choices "a|b": indices into out. */
int cli_list_choice(const char *cmd, const char *opt, const char *s, const char *choices, int *out, int max);

#define CLI_DTYPES "f32|f16|bf16" /* index = bsk_dtype */
#define CLI_DEVICES "cpu|cuda"    /* index = CLI_DEV_* */
#define CLI_PATTERNS "uniform|skewed" /* index = bsk_pattern */
enum { CLI_DEV_AUTO = -1, CLI_DEV_CPU = 0, CLI_DEV_CUDA = 1 };

const char *cli_dtype_name(bsk_dtype t);
const char *cli_pattern_name(int p);
/* Relative-error tolerance of a result computed from `in` operands into `out`: the coarser of the two
   (bf16 1e-2, f16 2e-3, f32 1e-4). */
double cli_tol(bsk_dtype in, bsk_dtype out);

/* ---------------------------------------------------------------- device and memory */

/* Resolve --device (CLI_DEV_AUTO: CUDA when a device is usable, else the CPU) and create a context of that
   backend. Prints the reason and returns CLI_FAIL when it cannot. */
int cli_open(const char *cmd, int requested, bsk_context **ctx, int *device);

/* a*b (both >= 0) into *out; 0 when it passes 2^62. */
int cli_mul(int64_t a, int64_t b, int64_t *out);
/* Whether `bytes` of host memory are plausible on this machine (at most ~90% of physical memory);
   prints why not. Guards against an overcommitted malloc that the kernel later kills us for. */
int cli_host_fits(const char *cmd, double bytes);
/* Host bytes one SpMM case of the CLI holds (C = op(A)·B, C m x n, inner k; A's stored shape op ? k x m : m x k in
   br x bc blocks at `density`): A as stored (whole blocks, a block larger than the matrix padded, plus a column index
   each; twice with the op-T check's transpose), B (and its float copy for the check), C twice (input and result) of
   dtype ot, pattern metadata and the generator's scratch, and with `check` the check's result rows (one chunk of
   block rows — a twentieth, or one sampled — in float64 and a float copy). */
double cli_spmm_host_bytes(int op, int64_t m, int64_t n, int64_t k, int64_t br, int64_t bc, double density, bsk_dtype dt,
                           bsk_dtype ot, int check);

/* A dense rows x cols matrix (ld = cols) of dtype t, newly allocated on `mem` (uninitialised).
   Returns a bsk_status. cli_dense_free accepts a zeroed or freed struct. */
bsk_status cli_dense_new(bsk_dense *D, int64_t rows, int64_t cols, bsk_dtype t, bsk_memory mem);
void cli_dense_free(bsk_dense *D);
/* Copy src into dst of the same shape and dtype (both ld = cols), host or device either side. */
bsk_status cli_dense_copy(bsk_dense *dst, const bsk_dense *src);
/* Bytes of a dense matrix's data (rows * ld * element size). */
int64_t cli_dense_bytes(const bsk_dense *D);
/* Fill n elements with uniform values in [-1, 1), deterministic for a seed. */
void cli_fill_random(void *p, bsk_dtype t, int64_t n, uint64_t seed);
/* Fill n elements with NaN (so an unwritten output cannot pass a check). */
void cli_fill_nan(void *p, bsk_dtype t, int64_t n);
/* n elements of dtype t, as floats (newly allocated; NULL on failure). */
float *cli_to_float(const void *p, bsk_dtype t, int64_t n);

/* ---------------------------------------------------------------- checks */

/* Accumulates ‖got − ref‖² and ‖ref‖²; a non-finite `got` where `ref` is finite poisons it. */
typedef struct cli_err {
    double num, den, got2;
    int64_t bad, n;
} cli_err;
void cli_err_add(cli_err *e, double got, double ref);
/* ‖got − ref‖ / ‖ref‖ (‖got‖ when ref is all zero); NaN when poisoned. */
double cli_err_value(const cli_err *e);

enum { CLI_REF_CPU = 0, /* the library's CPU backend (fp32 accumulation, threaded) */
       CLI_REF_F64 = 1  /* a plain float64 loop in tools/cli.c                     */ };

/* Check got (host, op(A).rows x N) = alpha·op(A)·B + beta·C_in (all host) on `sample` block rows of the
   result spread evenly over it (0: all). progress: print progress on stderr for long checks.
   Returns the relative error (NaN when got holds NaN/Inf where it should not); *st receives the
   library's status when the reference itself failed (then the result is NaN). */
double cli_check_spmm(bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta, const bsk_dense *C_in,
                      const bsk_dense *got, int ref, int64_t sample, int progress, bsk_status *st);
/* Check got_values (host, nnzb blocks of dtype got_dtype) = alpha·(X·Yᵀ) sampled on in's pattern +
   beta·in.values (in: host, the values before the run), on `sample` block rows (0: all). */
double cli_check_sddmm(float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, const bsk_bsr *in,
                       const void *got_values, bsk_dtype got_dtype, int ref, int64_t sample, int progress,
                       bsk_status *st);

/* One operation on `device` from host operands: uploads (CLI_DEV_CUDA), runs, synchronizes, and writes
   the result to host memory (C_out: same shape/dtype as C_in; out_values: nnzb blocks of out's dtype).
   The inputs are not modified. Returns the first failing status. */
bsk_status cli_spmm_on(bsk_context *ctx, int device, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                       float beta, const bsk_dense *C_in, bsk_dense *C_out);
bsk_status cli_sddmm_on(bsk_context *ctx, int device, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                        const bsk_bsr *in, void *out_values);

/* ---------------------------------------------------------------- timing */

double cli_now(void);                     /* monotonic seconds          */
double cli_median(double *v, int n);      /* sorts v; NaN for n <= 0     */
typedef int (*cli_work_fn)(void *arg);    /* one run; non-zero = failed  */
/* Host timing: `warmup` untimed runs, then `iters` timed; median milliseconds, or NaN when a run failed
   (its return value in *rc). */
double cli_time_host(cli_work_fn fn, void *arg, int warmup, int iters, int *rc);

#ifdef BSK_WITH_CUDA
/* GPU timing with CUDA events on `stream`: warm-up runs, then per iteration an L2 flush (cudaMemsetAsync
   of a buffer >= 2x L2, outside the timed region) and one timed run; median milliseconds, NaN on failure
   (*rc: the work's own status, or -1 for a CUDA error). */
typedef struct cli_gpu_timer {
    void *stream;      /* cudaStream_t */
    void *start, *stop; /* cudaEvent_t  */
    void *flush;
    size_t flush_bytes;
} cli_gpu_timer;
int cli_gpu_timer_init(cli_gpu_timer *t, void *stream);
void cli_gpu_timer_free(cli_gpu_timer *t);
double cli_time_gpu(cli_gpu_timer *t, cli_work_fn fn, void *arg, int warmup, int iters, int *rc);
/* The same method for n works timed round-robin (each iteration times every work once, the first one rotating),
   so that slow drifts of the GPU's clock hit all alike: med[w] the median milliseconds of work w, diff[w] the
   median over iterations of (work w - work 0) (diff may be NULL). Returns 0, the failing work's status, or -1
   for a CUDA error (then med is NaN). */
int cli_time_gpu_rr(cli_gpu_timer *t, cli_work_fn *fns, void **args, int n, int warmup, int iters, double *med,
                    double *diff);
#endif

/* ---------------------------------------------------------------- output */

/* Print a rate as "123.4 TFLOPS" or "56.7 GFLOPS" (flop / ms). */
void cli_print_rate(FILE *f, double flop, double ms);
/* The build's git commit: $BSK_COMMIT, else `git rev-parse --short HEAD`, else "unknown". */
void cli_commit(char *buf, size_t n);
/* Current UTC time, ISO 8601. */
void cli_date(char *buf, size_t n);

/* A small JSON writer (pretty-printed). Keys are NULL inside arrays. Non-finite numbers become null. */
typedef struct cli_json {
    FILE *f;
    int depth;
    int first[32];
    char close[32];
} cli_json;
void cli_json_begin(cli_json *j, FILE *f); /* opens the top-level object */
void cli_json_obj(cli_json *j, const char *key);
void cli_json_arr(cli_json *j, const char *key);
void cli_json_end(cli_json *j); /* closes the innermost object or array */
void cli_json_str(cli_json *j, const char *key, const char *v);
void cli_json_num(cli_json *j, const char *key, double v);
void cli_json_int(cli_json *j, const char *key, int64_t v);
void cli_json_finish(cli_json *j); /* closes everything still open, final newline */
/* Device facts, commit, date and version as the object "meta". */
void cli_json_meta(cli_json *j, const char *tool);

#endif
