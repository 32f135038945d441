/* cli.c — the helpers every `bsk` subcommand shares (declared and documented in cli.h). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "internal.h" /* bsk__load / bsk__store / bsk__mul_ok: the library's own element conversions */

#ifdef BSK_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* ================================================================ options */

static const char *choice_at(const char *choices, int idx, size_t *len)
{
    const char *p = choices;
    for (int i = 0; i < idx; i++) {
        p = strchr(p, '|');
        if (!p) return NULL;
        p++;
    }
    const char *e = strchr(p, '|');
    *len = e ? (size_t)(e - p) : strlen(p);
    return p;
}

/* Index of `s` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *s, size_t slen)
{
    size_t len;
    const char *c;
    for (int i = 0; (c = choice_at(choices, i, &len)); i++)
        if (len == slen && memcmp(c, s, len) == 0) return i;
    return -1;
}

/* Plain decimal integer: optional sign, digits, nothing else (strtoll alone would take leading blanks). */
static int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return 0;
    const char *d = s + (*s == '-' || *s == '+');
    if (!isdigit((unsigned char)*d)) return 0;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end) return 0;
    *out = (int64_t)v;
    return 1;
}

/* Unsigned decimal; strtoull would quietly wrap "-1", so only digits are let through. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s)) return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int parse_real(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return 0;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || errno == ERANGE) return 0;
    *out = v;
    return 1;
}

static void print_default(const cli_opt *o)
{
    switch (o->kind) {
    case CLI_INT: /* a default outside the range is a "not given" sentinel: the help text says what applies */
        if (*(int64_t *)o->dst >= o->imin) printf(" (default %lld)", (long long)*(int64_t *)o->dst);
        break;
    case CLI_U64: printf(" (default %llu)", (unsigned long long)*(uint64_t *)o->dst); break;
    case CLI_REAL: printf(" (default %g)", *(double *)o->dst); break;
    case CLI_STR:
        if (*(const char **)o->dst) printf(" (default %s)", *(const char **)o->dst);
        break;
    case CLI_CHOICE: {
        size_t len;
        int idx = *(int *)o->dst;
        const char *c = idx >= 0 ? choice_at(o->choices, idx, &len) : NULL;
        if (c) printf(" (default %.*s)", (int)len, c);
        break;
    }
    case CLI_FLAG: break;
    }
}

static void print_help(const cli_opt *opts, int nopts, const char *usage, const char *about)
{
    printf("usage: %s\n", usage);
    if (about && *about) printf("\n%s\n", about);
    printf("\noptions:\n");
    for (int i = 0; i < nopts; i++) {
        const cli_opt *o = &opts[i];
        char left[96];
        switch (o->kind) {
        case CLI_FLAG: snprintf(left, sizeof left, "--%s", o->name); break;
        case CLI_INT:
            snprintf(left, sizeof left, "--%s N", o->name);
            break;
        case CLI_U64: snprintf(left, sizeof left, "--%s N", o->name); break;
        case CLI_REAL: snprintf(left, sizeof left, "--%s X", o->name); break;
        case CLI_STR: snprintf(left, sizeof left, "--%s S", o->name); break;
        case CLI_CHOICE: snprintf(left, sizeof left, "--%s %s", o->name, o->choices); break;
        }
        printf("  %-28s %s", left, o->help ? o->help : "");
        if (o->kind == CLI_INT) printf(" [%lld..%lld]", (long long)o->imin, (long long)o->imax);
        if (o->kind == CLI_REAL) printf(" [%g..%g]", o->rmin, o->rmax);
        print_default(o);
        printf("\n");
    }
    printf("  %-28s %s\n", "-h, --help", "this text");
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bsk %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'bsk %s --help')\n", cmd);
    return CLI_USAGE;
}

/* Options are printed back in messages; cap what an arbitrary argument can make us print. */
#define SHOW(s) (int)(strlen(s) > 60 ? 60 : strlen(s)), (s)

static int set_value(const char *cmd, const cli_opt *o, const char *v)
{
    switch (o->kind) {
    case CLI_INT: {
        int64_t x;
        if (!parse_i64(v, &x)) return cli_usage_error(cmd, "--%s wants an integer, got '%.*s'", o->name, SHOW(v));
        if (x < o->imin || x > o->imax)
            return cli_usage_error(cmd, "--%s %lld is out of range [%lld, %lld]", o->name, (long long)x,
                                   (long long)o->imin, (long long)o->imax);
        *(int64_t *)o->dst = x;
        return CLI_OK;
    }
    case CLI_U64:
        if (!parse_u64(v, (uint64_t *)o->dst))
            return cli_usage_error(cmd, "--%s wants a non-negative integer below 2^64, got '%.*s'", o->name, SHOW(v));
        return CLI_OK;
    case CLI_REAL: {
        double x;
        if (!parse_real(v, &x)) return cli_usage_error(cmd, "--%s wants a finite number, got '%.*s'", o->name, SHOW(v));
        if (!(x >= o->rmin && x <= o->rmax))
            return cli_usage_error(cmd, "--%s %g is out of range [%g, %g]", o->name, x, o->rmin, o->rmax);
        *(double *)o->dst = x;
        return CLI_OK;
    }
    case CLI_STR:
        if (!*v) return cli_usage_error(cmd, "--%s wants a non-empty value", o->name);
        *(const char **)o->dst = v;
        return CLI_OK;
    case CLI_CHOICE: {
        int idx = choice_index(o->choices, v, strlen(v));
        if (idx < 0) return cli_usage_error(cmd, "--%s wants one of %s, got '%.*s'", o->name, o->choices, SHOW(v));
        *(int *)o->dst = idx;
        return CLI_OK;
    }
    case CLI_FLAG: break;
    }
    return CLI_USAGE;
}

int cli_parse(int argc, char **argv, const cli_opt *opts, int nopts, const char *usage, const char *about,
              char **pos, int maxpos, int *npos)
{
    const char *cmd = argc > 0 && argv[0] ? argv[0] : "?";
    int only_pos = 0;
    *npos = 0;
    /* --help anywhere wins over errors elsewhere, so `bsk spmm --m x --help` still shows help. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help(opts, nopts, usage, about);
            return CLI_HELP;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (*npos >= maxpos)
                return maxpos ? cli_usage_error(cmd, "unexpected argument '%.*s'", SHOW(a))
                              : cli_usage_error(cmd, "takes no positional argument, got '%.*s'", SHOW(a));
            pos[(*npos)++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) { only_pos = 1; continue; }
        if (a[1] != '-') return cli_usage_error(cmd, "unknown option '%.*s' (options are --long)", SHOW(a));
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = NULL;
        for (int k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == nlen && memcmp(opts[k].name, name, nlen) == 0) { o = &opts[k]; break; }
        if (!o) return cli_usage_error(cmd, "unknown option '--%.*s'", (int)(nlen > 60 ? 60 : nlen), name);
        if (o->kind == CLI_FLAG) {
            if (eq) return cli_usage_error(cmd, "--%s takes no value", o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return cli_usage_error(cmd, "--%s needs a value", o->name);
        int rc = set_value(cmd, o, v);
        if (rc) return rc;
    }
    return CLI_OK;
}

/* Split s at commas into a temporary copy; calls each(item) until it fails. */
typedef int (*item_fn)(const char *item, void *ctx, int idx);
static int split_list(const char *cmd, const char *opt, const char *s, int max, item_fn each, void *ctx)
{
    if (!s || !*s) { cli_usage_error(cmd, "--%s wants a comma-separated list", opt); return -1; }
    size_t len = strlen(s);
    char *buf = (char *)malloc(len + 1);
    if (!buf) { fprintf(stderr, "bsk %s: out of memory\n", cmd); return -1; }
    memcpy(buf, s, len + 1);
    int n = 0;
    char *p = buf;
    for (;;) {
        char *c = strchr(p, ',');
        if (c) *c = '\0';
        if (n >= max) { cli_usage_error(cmd, "--%s: more than %d entries", opt, max); n = -1; break; }
        if (!each(p, ctx, n)) { n = -1; break; }
        n++;
        if (!c) break;
        p = c + 1;
    }
    free(buf);
    return n;
}

struct list_ctx {
    const char *cmd, *opt, *choices;
    int64_t ilo, ihi;
    double rlo, rhi;
    void *out;
};

static int item_int(const char *it, void *vc, int idx)
{
    struct list_ctx *c = (struct list_ctx *)vc;
    int64_t x;
    if (!parse_i64(it, &x) || x < c->ilo || x > c->ihi) {
        cli_usage_error(c->cmd, "--%s: '%.*s' is not an integer in [%lld, %lld]", c->opt, SHOW(it), (long long)c->ilo,
                        (long long)c->ihi);
        return 0;
    }
    ((int64_t *)c->out)[idx] = x;
    return 1;
}

static int item_real(const char *it, void *vc, int idx)
{
    struct list_ctx *c = (struct list_ctx *)vc;
    double x;
    if (!parse_real(it, &x) || !(x >= c->rlo && x <= c->rhi)) {
        cli_usage_error(c->cmd, "--%s: '%.*s' is not a number in [%g, %g]", c->opt, SHOW(it), c->rlo, c->rhi);
        return 0;
    }
    ((double *)c->out)[idx] = x;
    return 1;
}

static int item_shape(const char *it, void *vc, int idx)
{
    struct list_ctx *c = (struct list_ctx *)vc;
    int64_t v[3];
    const char *p = it;
    for (int d = 0; d < 3; d++) {
        char part[32];
        const char *x = d < 2 ? strchr(p, 'x') : p + strlen(p);
        size_t len = x ? (size_t)(x - p) : 0;
        if (!x || len == 0 || len >= sizeof part) goto bad;
        memcpy(part, p, len);
        part[len] = '\0';
        if (!parse_i64(part, &v[d]) || v[d] < 1 || v[d] > INT32_MAX) goto bad;
        p = x + 1;
    }
    memcpy(((int64_t(*)[3])c->out)[idx], v, sizeof v);
    return 1;
bad:
    cli_usage_error(c->cmd, "--%s: '%.*s' is not MxNxK with each in [1, 2^31-1]", c->opt, SHOW(it));
    return 0;
}

static int item_choice(const char *it, void *vc, int idx)
{
    struct list_ctx *c = (struct list_ctx *)vc;
    int k = choice_index(c->choices, it, strlen(it));
    if (k < 0) {
        cli_usage_error(c->cmd, "--%s: '%.*s' is not one of %s", c->opt, SHOW(it), c->choices);
        return 0;
    }
    ((int *)c->out)[idx] = k;
    return 1;
}

int cli_list_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, int max)
{
    struct list_ctx c = {cmd, opt, NULL, lo, hi, 0, 0, out};
    return split_list(cmd, opt, s, max, item_int, &c);
}

int cli_list_real(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out, int max)
{
    struct list_ctx c = {cmd, opt, NULL, 0, 0, lo, hi, out};
    return split_list(cmd, opt, s, max, item_real, &c);
}

int cli_list_shape(const char *cmd, const char *opt, const char *s, int64_t (*out)[3], int max)
{
    struct list_ctx c = {cmd, opt, NULL, 0, 0, 0, 0, out};
    return split_list(cmd, opt, s, max, item_shape, &c);
}

int cli_list_choice(const char *cmd, const char *opt, const char *s, const char *choices, int *out, int max)
{
    struct list_ctx c = {cmd, opt, choices, 0, 0, 0, 0, out};
    return split_list(cmd, opt, s, max, item_choice, &c);
}

const char *cli_dtype_name(bsk_dtype t)
{
    return t == BSK_F32 ? "f32" : t == BSK_F16 ? "f16" : t == BSK_BF16 ? "bf16" : "?";
}

const char *cli_pattern_name(int p) { return p == BSK_PATTERN_UNIFORM ? "uniform" : p == BSK_PATTERN_SKEWED ? "skewed" : "?"; }

static double dtype_tol(bsk_dtype t) { return t == BSK_BF16 ? 1e-2 : t == BSK_F16 ? 2e-3 : 1e-4; }
double cli_tol(bsk_dtype in, bsk_dtype out)
{
    double a = dtype_tol(in), b = dtype_tol(out);
    return a > b ? a : b;
}

/* ================================================================ device and memory */

int cli_open(const char *cmd, int requested, bsk_context **ctx, int *device)
{
    bsk_status s;
    if (requested == CLI_DEV_CPU) {
        s = bsk_create(ctx, BSK_BACKEND_CPU);
        *device = CLI_DEV_CPU;
    } else {
        s = bsk_create(ctx, BSK_BACKEND_AUTO);
        if (!s && requested == CLI_DEV_CUDA && !bsk_has_device(*ctx)) {
            bsk_destroy(*ctx);
            s = BSK_ERR_NO_DEVICE;
        }
        if (!s) *device = bsk_has_device(*ctx) ? CLI_DEV_CUDA : CLI_DEV_CPU;
    }
    if (s) {
        fprintf(stderr, "bsk %s: cannot open the %s backend: %s\n", cmd, requested == CLI_DEV_CPU ? "CPU" : "CUDA",
                bsk_status_string(s));
        return CLI_FAIL;
    }
    return CLI_OK;
}

int cli_mul(int64_t a, int64_t b, int64_t *out) { return bsk__mul_ok(a, b, out); }

int cli_host_fits(const char *cmd, double bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    if (have > 0 && bytes > 0.9 * have) {
        fprintf(stderr, "bsk %s: this needs about %.1f GiB of host memory; the machine has %.1f GiB\n", cmd,
                bytes / 1073741824.0, have / 1073741824.0);
        return 0;
    }
    return 1;
}

double cli_spmm_host_bytes(int op, int64_t m, int64_t n, int64_t k, int64_t br, int64_t bc, double density, bsk_dtype dt,
                           bsk_dtype ot, int check)
{
    const double esz = (double)bsk_dtype_size(dt), osz = (double)bsk_dtype_size(ot);
    const int64_t arows = op ? k : m, acols = op ? m : k;
    const double ablocks = density * ceil((double)arows / (double)br) * ceil((double)acols / (double)bc);
    double need = ablocks * ((double)br * (double)bc * esz + 4.0) * (check && op ? 2 : 1) +
                  (double)k * (double)n * (esz + (check ? 4 : 0)) + 2.0 * (double)m * (double)n * osz +
                  16.0 * ((double)arows + (double)acols);
    const double orb = (double)(op ? bc : br), omb = ceil((double)m / orb);
    if (check) need += fmin((double)m, fmax(1.0, floor(omb / 20)) * orb) * (double)n * 12.0;
    return need;
}

int64_t cli_dense_bytes(const bsk_dense *D)
{
    return D->rows * D->ld * (int64_t)bsk_dtype_size(D->dtype);
}

bsk_status cli_dense_new(bsk_dense *D, int64_t rows, int64_t cols, bsk_dtype t, bsk_memory mem)
{
    int64_t n, bytes;
    if (!cli_mul(rows, cols, &n) || !cli_mul(n, (int64_t)bsk_dtype_size(t), &bytes)) return BSK_ERR_OVERFLOW;
    bsk_dense d = {rows, cols, cols, t, mem, NULL};
    if (mem == BSK_MEM_HOST) {
        d.data = malloc(bytes ? (size_t)bytes : 1);
        if (!d.data) return BSK_ERR_OUT_OF_MEMORY;
    } else {
#ifdef BSK_WITH_CUDA
        cudaError_t e = cudaMalloc(&d.data, bytes ? (size_t)bytes : 1);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return e == cudaErrorMemoryAllocation ? BSK_ERR_OUT_OF_MEMORY : BSK_ERR_CUDA;
        }
#else
        return BSK_ERR_NO_DEVICE;
#endif
    }
    *D = d;
    return BSK_SUCCESS;
}

void cli_dense_free(bsk_dense *D)
{
    if (!D || !D->data) return;
    if (D->mem == BSK_MEM_HOST) free(D->data);
#ifdef BSK_WITH_CUDA
    else (void)cudaFree(D->data);
#endif
    D->data = NULL;
}

bsk_status cli_dense_copy(bsk_dense *dst, const bsk_dense *src)
{
    if (dst->rows != src->rows || dst->cols != src->cols || dst->dtype != src->dtype || dst->ld != dst->cols ||
        src->ld != src->cols)
        return BSK_ERR_SHAPE_MISMATCH;
    size_t bytes = (size_t)cli_dense_bytes(src);
    if (dst->mem == BSK_MEM_HOST && src->mem == BSK_MEM_HOST) {
        memcpy(dst->data, src->data, bytes);
        return BSK_SUCCESS;
    }
#ifdef BSK_WITH_CUDA
    if (cudaMemcpy(dst->data, src->data, bytes, cudaMemcpyDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return BSK_ERR_CUDA;
    }
    return BSK_SUCCESS;
#else
    return BSK_ERR_NO_DEVICE;
#endif
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cli_fill_random(void *p, bsk_dtype t, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 0x1234567ull;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((double)(splitmix(&s) >> 40) * (2.0 / 16777216.0) - 1.0);
        bsk__store(p, t, i, v);
    }
}

void cli_fill_nan(void *p, bsk_dtype t, int64_t n)
{
    for (int64_t i = 0; i < n; i++) bsk__store(p, t, i, NAN);
}

float *cli_to_float(const void *p, bsk_dtype t, int64_t n)
{
    float *f = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (!f) return NULL;
    if (t == BSK_F32) memcpy(f, p, (size_t)n * sizeof *f);
    else
        for (int64_t i = 0; i < n; i++) f[i] = bsk__load(p, t, i);
    return f;
}

/* ================================================================ checks */

void cli_err_add(cli_err *e, double got, double ref)
{
    e->n++;
    if (!isfinite(got)) {
        if (isfinite(ref)) e->bad++;
        return;
    }
    e->num += (got - ref) * (got - ref);
    e->den += ref * ref;
    e->got2 += got * got;
}

double cli_err_value(const cli_err *e)
{
    if (e->bad) return NAN;
    return e->den > 0 ? sqrt(e->num / e->den) : sqrt(e->got2);
}

/* The block rows [i0, i1) of A (host) as a BSR of their own, over A's arrays; rp gets the rebased row
   pointers (i1 - i0 + 1 entries). */
static bsk_bsr bsr_rows_view(const bsk_bsr *A, int64_t i0, int64_t i1, int32_t *rp)
{
    bsk_bsr v = *A;
    int64_t r0 = i0 * A->block_rows, r1 = i1 * A->block_rows;
    if (r1 > A->rows) r1 = A->rows;
    int32_t base = A->row_ptr[i0];
    for (int64_t i = i0; i <= i1; i++) rp[i - i0] = A->row_ptr[i] - base;
    v.rows = r1 - r0;
    v.nnzb = A->row_ptr[i1] - base;
    v.row_ptr = rp;
    v.col_idx = A->col_idx + base;
    v.values = (char *)A->values + (size_t)base * A->block_rows * A->block_cols * bsk_dtype_size(A->dtype);
    return v;
}

static bsk_dense dense_rows_view(const bsk_dense *D, int64_t r0, int64_t r1)
{
    bsk_dense v = *D;
    v.rows = r1 - r0;
    v.data = (char *)D->data + (size_t)(r0 * D->ld) * bsk_dtype_size(D->dtype);
    return v;
}

/* The chunks a check walks: all block rows in ~20 runs (so progress can be shown), or `sample` single
   block rows spread evenly. */
typedef struct chunk_plan {
    int64_t mb, sample, step, count;
} chunk_plan;
static chunk_plan plan_chunks(int64_t mb, int64_t sample)
{
    chunk_plan p = {mb, sample > 0 && sample < mb ? sample : 0, 0, 0};
    if (p.sample) p.count = p.sample;
    else {
        p.step = mb / 20 > 0 ? mb / 20 : 1;
        p.count = (mb + p.step - 1) / p.step;
    }
    return p;
}
static void chunk_at(const chunk_plan *p, int64_t c, int64_t *i0, int64_t *i1)
{
    if (p->sample) {
        *i0 = (int64_t)((double)c * (double)p->mb / (double)p->sample);
        *i1 = *i0 + 1;
    } else {
        *i0 = c * p->step;
        *i1 = *i0 + p->step < p->mb ? *i0 + p->step : p->mb;
    }
}

static void progress_line(int on, double t0, int64_t done, int64_t total, const char *what)
{
    if (!on || cli_now() - t0 < 2.0) return;
    fprintf(stderr, "  check: %lld/%lld %s (%.0f s)\n", (long long)done, (long long)total, what, cli_now() - t0);
}

double cli_check_spmm(bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta, const bsk_dense *C_in,
                      const bsk_dense *got, int ref, int64_t sample, int progress, bsk_status *st)
{
    *st = BSK_SUCCESS;
    bsk_bsr At = {0};
    const bsk_bsr *W = A; /* op(A) as a BSR to be used untransposed */
    if (op == BSK_OP_T) {
        if ((*st = bsk_bsr_transpose(A, &At))) return NAN;
        W = &At;
    }
    int64_t mb = bsk_bsr_mb(W), n = B->cols, br = W->block_rows, bc = W->block_cols, bsz = br * bc;
    chunk_plan plan = plan_chunks(mb, sample);
    int64_t maxrows = (plan.sample ? 1 : plan.step) * br;
    if (maxrows > W->rows) maxrows = W->rows; /* a block taller than the matrix: only its rows are computed */
    int32_t *rp = (int32_t *)malloc((size_t)(plan.sample ? 2 : plan.step + 1) * sizeof *rp);
    double *out64 = (double *)malloc((size_t)(maxrows * n + 1) * sizeof *out64);
    float *Bf = ref == CLI_REF_F64 ? cli_to_float(B->data, B->dtype, B->rows * B->ld) : NULL;
    bsk_dense scratch = {0};
    bsk_context *ctx = NULL;
    cli_err e = {0};
    if (!rp || !out64 || (ref == CLI_REF_F64 && !Bf)) { *st = BSK_ERR_OUT_OF_MEMORY; goto done; }
    if (ref == CLI_REF_CPU) {
        if ((*st = cli_dense_new(&scratch, maxrows, n, BSK_F32, BSK_MEM_HOST))) goto done;
        if ((*st = bsk_create(&ctx, BSK_BACKEND_CPU))) goto done;
    }
    double t0 = cli_now();
    for (int64_t c = 0; c < plan.count; c++) {
        int64_t i0, i1;
        chunk_at(&plan, c, &i0, &i1);
        bsk_bsr v = bsr_rows_view(W, i0, i1, rp);
        int64_t r0 = i0 * br, rows = v.rows;
        if (ref == CLI_REF_CPU) {
            bsk_dense s = scratch, cin = dense_rows_view(C_in, r0, r0 + rows);
            s.rows = rows;
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < n; j++)
                    ((float *)s.data)[i * n + j] = beta != 0.0f ? bsk__load(cin.data, cin.dtype, i * cin.ld + j) : 0.0f;
            if ((*st = bsk_spmm(ctx, BSK_OP_N, alpha, &v, B, beta, &s))) goto done;
            for (int64_t i = 0; i < rows * n; i++) out64[i] = ((float *)s.data)[i];
        } else {
            for (int64_t i = 0; i < rows * n; i++) out64[i] = 0.0;
            for (int64_t bi = 0; bi < i1 - i0; bi++)
                for (int32_t k = v.row_ptr[bi]; k < v.row_ptr[bi + 1]; k++)
                    for (int64_t r = 0; r < br && bi * br + r < rows; r++) {
                        double *o = out64 + (bi * br + r) * n;
                        for (int64_t cc = 0; cc < bc; cc++) {
                            int64_t gc = (int64_t)v.col_idx[k] * bc + cc;
                            if (gc >= W->cols) break;
                            double a = bsk__load(v.values, v.dtype, (int64_t)k * bsz + r * bc + cc);
                            if (a == 0.0) continue;
                            const float *brow = Bf + gc * B->ld;
                            for (int64_t j = 0; j < n; j++) o[j] += a * brow[j];
                        }
                    }
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < n; j++) {
                    double cv = beta != 0.0f ? (double)beta * bsk__load(C_in->data, C_in->dtype, (r0 + i) * C_in->ld + j) : 0.0;
                    out64[i * n + j] = (double)alpha * out64[i * n + j] + cv;
                }
        }
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++)
                cli_err_add(&e, bsk__load(got->data, got->dtype, (r0 + i) * got->ld + j), out64[i * n + j]);
        if ((c + 1) % (plan.count / 10 > 0 ? plan.count / 10 : 1) == 0 && c + 1 < plan.count)
            progress_line(progress, t0, c + 1, plan.count, plan.sample ? "sampled block rows" : "chunks of block rows");
    }
done:
    bsk_destroy(ctx);
    cli_dense_free(&scratch);
    free(Bf);
    free(out64);
    free(rp);
    bsk_bsr_free(&At);
    return *st ? NAN : cli_err_value(&e);
}

double cli_check_sddmm(float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, const bsk_bsr *in,
                       const void *got_values, bsk_dtype got_dtype, int ref, int64_t sample, int progress,
                       bsk_status *st)
{
    *st = BSK_SUCCESS;
    int64_t mb = bsk_bsr_mb(in), br = in->block_rows, bc = in->block_cols, bsz = br * bc, d = X->cols;
    chunk_plan plan = plan_chunks(mb, sample);
    int32_t *rp = (int32_t *)malloc((size_t)(plan.sample ? 2 : plan.step + 1) * sizeof *rp);
    float *Xf = ref == CLI_REF_F64 ? cli_to_float(X->data, X->dtype, X->rows * X->ld) : NULL;
    float *Yf = ref == CLI_REF_F64 ? cli_to_float(Y->data, Y->dtype, Y->rows * Y->ld) : NULL;
    int64_t maxblk = 0;
    for (int64_t c = 0; c < plan.count; c++) {
        int64_t i0, i1;
        chunk_at(&plan, c, &i0, &i1);
        if (in->row_ptr[i1] - in->row_ptr[i0] > maxblk) maxblk = in->row_ptr[i1] - in->row_ptr[i0];
    }
    double *ref64 = (double *)malloc((size_t)(maxblk * bsz + 1) * sizeof *ref64);
    float *scratch = ref == CLI_REF_CPU ? (float *)malloc((size_t)(maxblk * bsz + 1) * sizeof *scratch) : NULL;
    bsk_context *ctx = NULL;
    cli_err e = {0};
    if (!rp || !ref64 || (ref == CLI_REF_F64 && (!Xf || !Yf)) || (ref == CLI_REF_CPU && !scratch)) {
        *st = BSK_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (ref == CLI_REF_CPU && (*st = bsk_create(&ctx, BSK_BACKEND_CPU))) goto done;
    double t0 = cli_now();
    for (int64_t c = 0; c < plan.count; c++) {
        int64_t i0, i1;
        chunk_at(&plan, c, &i0, &i1);
        bsk_bsr v = bsr_rows_view(in, i0, i1, rp);
        int64_t r0 = i0 * br, base = in->row_ptr[i0], nel = v.nnzb * bsz;
        if (ref == CLI_REF_CPU) {
            for (int64_t i = 0; i < nel; i++) scratch[i] = bsk__load(v.values, v.dtype, i);
            v.values = scratch;
            v.dtype = BSK_F32;
            bsk_dense xv = dense_rows_view(X, r0, r0 + v.rows);
            if ((*st = bsk_sddmm(ctx, alpha, &xv, Y, beta, &v))) goto done;
            for (int64_t i = 0; i < nel; i++) ref64[i] = scratch[i];
        } else {
            for (int64_t bi = 0; bi < i1 - i0; bi++)
                for (int32_t k = v.row_ptr[bi]; k < v.row_ptr[bi + 1]; k++)
                    for (int64_t r = 0; r < br; r++)
                        for (int64_t cc = 0; cc < bc; cc++) {
                            int64_t gr = r0 + bi * br + r, gc = (int64_t)v.col_idx[k] * bc + cc, idx = (int64_t)k * bsz + r * bc + cc;
                            double old = beta != 0.0f ? (double)beta * bsk__load(v.values, v.dtype, idx) : 0.0;
                            if (gr >= in->rows || gc >= in->cols) { ref64[idx] = old; continue; }
                            const float *x = Xf + gr * X->ld, *y = Yf + gc * Y->ld;
                            double acc = 0;
                            for (int64_t p = 0; p < d; p++) acc += (double)x[p] * y[p];
                            ref64[idx] = (double)alpha * acc + old;
                        }
        }
        for (int64_t i = 0; i < nel; i++) cli_err_add(&e, bsk__load(got_values, got_dtype, base * bsz + i), ref64[i]);
        if ((c + 1) % (plan.count / 10 > 0 ? plan.count / 10 : 1) == 0 && c + 1 < plan.count)
            progress_line(progress, t0, c + 1, plan.count, plan.sample ? "sampled block rows" : "chunks of block rows");
    }
done:
    bsk_destroy(ctx);
    free(scratch);
    free(ref64);
    free(Xf);
    free(Yf);
    free(rp);
    return *st ? NAN : cli_err_value(&e);
}

bsk_status cli_spmm_on(bsk_context *ctx, int device, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                       float beta, const bsk_dense *C_in, bsk_dense *C_out)
{
    bsk_status s = cli_dense_copy(C_out, C_in);
    if (s) return s;
    if (device != CLI_DEV_CUDA) return bsk_spmm(ctx, op, alpha, A, B, beta, C_out);
    bsk_bsr dA = {0};
    bsk_dense dB = {0}, dC = {0};
    if (!(s = bsk_bsr_clone(A, BSK_MEM_DEVICE, &dA)) && !(s = cli_dense_new(&dB, B->rows, B->cols, B->dtype, BSK_MEM_DEVICE)) &&
        !(s = cli_dense_new(&dC, C_in->rows, C_in->cols, C_in->dtype, BSK_MEM_DEVICE)) && !(s = cli_dense_copy(&dB, B)) &&
        !(s = cli_dense_copy(&dC, C_in)) && !(s = bsk_spmm(ctx, op, alpha, &dA, &dB, beta, &dC)) &&
        !(s = bsk_synchronize(ctx)))
        s = cli_dense_copy(C_out, &dC);
    bsk_bsr_free(&dA);
    cli_dense_free(&dB);
    cli_dense_free(&dC);
    return s;
}

bsk_status cli_sddmm_on(bsk_context *ctx, int device, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                        const bsk_bsr *in, void *out_values)
{
    size_t vbytes = (size_t)(in->nnzb * in->block_rows * in->block_cols) * bsk_dtype_size(in->dtype);
    memcpy(out_values, in->values, vbytes);
    bsk_bsr W = *in;
    W.values = out_values;
    if (device != CLI_DEV_CUDA) return bsk_sddmm(ctx, alpha, X, Y, beta, &W);
    bsk_bsr dW = {0};
    bsk_dense dX = {0}, dY = {0};
    bsk_status s;
    if (!(s = bsk_bsr_clone(&W, BSK_MEM_DEVICE, &dW)) && !(s = cli_dense_new(&dX, X->rows, X->cols, X->dtype, BSK_MEM_DEVICE)) &&
        !(s = cli_dense_new(&dY, Y->rows, Y->cols, Y->dtype, BSK_MEM_DEVICE)) && !(s = cli_dense_copy(&dX, X)) &&
        !(s = cli_dense_copy(&dY, Y)) && !(s = bsk_sddmm(ctx, alpha, &dX, &dY, beta, &dW)) && !(s = bsk_synchronize(ctx))) {
        /* the values come back through a host clone: the bsk_bsr API is the one copy path we have */
        bsk_bsr h = {0};
        if (!(s = bsk_bsr_clone(&dW, BSK_MEM_HOST, &h))) memcpy(out_values, h.values, vbytes);
        bsk_bsr_free(&h);
    }
    bsk_bsr_free(&dW);
    cli_dense_free(&dX);
    cli_dense_free(&dY);
    return s;
}

/* ================================================================ timing */

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double cli_time_host(cli_work_fn fn, void *arg, int warmup, int iters, int *rc)
{
    *rc = 0;
    for (int i = 0; i < warmup; i++)
        if ((*rc = fn(arg))) return NAN;
    double *t = (double *)malloc((size_t)(iters > 0 ? iters : 1) * sizeof *t);
    if (!t) { *rc = -1; return NAN; }
    for (int i = 0; i < iters; i++) {
        double t0 = cli_now();
        if ((*rc = fn(arg))) { free(t); return NAN; }
        t[i] = (cli_now() - t0) * 1e3;
    }
    double m = cli_median(t, iters);
    free(t);
    return m;
}

#ifdef BSK_WITH_CUDA
int cli_gpu_timer_init(cli_gpu_timer *t, void *stream)
{
    memset(t, 0, sizeof *t);
    t->stream = stream;
    int dev = 0, l2 = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
        return -1;
    /* twice L2, and never under 64 MiB, so each timed run starts with a cold L2 */
    t->flush_bytes = 2 * (size_t)l2 > ((size_t)64 << 20) ? 2 * (size_t)l2 : ((size_t)64 << 20);
    if (cudaMalloc(&t->flush, t->flush_bytes) != cudaSuccess ||
        cudaEventCreate((cudaEvent_t *)&t->start) != cudaSuccess ||
        cudaEventCreate((cudaEvent_t *)&t->stop) != cudaSuccess) {
        (void)cudaGetLastError();
        cli_gpu_timer_free(t);
        return -1;
    }
    return 0;
}

void cli_gpu_timer_free(cli_gpu_timer *t)
{
    if (t->flush) (void)cudaFree(t->flush);
    if (t->start) (void)cudaEventDestroy((cudaEvent_t)t->start);
    if (t->stop) (void)cudaEventDestroy((cudaEvent_t)t->stop);
    memset(t, 0, sizeof *t);
}

int cli_time_gpu_rr(cli_gpu_timer *t, cli_work_fn *fns, void **args, int n, int warmup, int iters, double *med,
                    double *diff)
{
    cudaStream_t s = (cudaStream_t)t->stream;
    int rc = 0;
    for (int w = 0; w < n; w++) {
        med[w] = NAN;
        if (diff) diff[w] = NAN;
    }
    if (n < 1 || iters < 1) return 0;
    double *ms = (double *)malloc((size_t)n * (size_t)iters * sizeof *ms), *tmp = (double *)malloc((size_t)iters * sizeof *tmp);
    if (!ms || !tmp) { free(ms); free(tmp); return -1; }
    for (int i = 0; i < warmup && !rc; i++)
        for (int w = 0; w < n && !rc; w++) rc = fns[w](args[w]);
    if (!rc && cudaStreamSynchronize(s) != cudaSuccess) rc = -1;
    for (int i = 0; i < iters && !rc; i++)
        for (int x = 0; x < n && !rc; x++) {
            const int w = (x + i) % n;
            float f = 0;
            if (cudaMemsetAsync(t->flush, i & 0xff, t->flush_bytes, s) != cudaSuccess ||
                cudaEventRecord((cudaEvent_t)t->start, s) != cudaSuccess) { rc = -1; break; }
            if ((rc = fns[w](args[w]))) break;
            if (cudaEventRecord((cudaEvent_t)t->stop, s) != cudaSuccess || cudaEventSynchronize((cudaEvent_t)t->stop) != cudaSuccess ||
                cudaEventElapsedTime(&f, (cudaEvent_t)t->start, (cudaEvent_t)t->stop) != cudaSuccess) { rc = -1; break; }
            ms[w * iters + i] = f;
        }
    if (rc) {
        if (rc < 0) (void)cudaGetLastError();
        free(ms); free(tmp);
        return rc;
    }
    for (int w = 0; w < n && diff; w++) { /* pairs first: cli_median sorts in place */
        for (int i = 0; i < iters; i++) tmp[i] = ms[w * iters + i] - ms[i];
        diff[w] = cli_median(tmp, iters);
    }
    for (int w = 0; w < n; w++) med[w] = cli_median(ms + w * iters, iters);
    free(ms); free(tmp);
    return 0;
}

double cli_time_gpu(cli_gpu_timer *t, cli_work_fn fn, void *arg, int warmup, int iters, int *rc)
{
    double med;
    *rc = cli_time_gpu_rr(t, &fn, &arg, 1, warmup, iters, &med, NULL);
    return *rc ? NAN : med;
}
#endif

/* ================================================================ output */

void cli_print_rate(FILE *f, double flop, double ms)
{
    double r = flop / (ms * 1e-3);
    if (!isfinite(r)) fprintf(f, "n/a");
    else if (r >= 1e12) fprintf(f, "%.1f TFLOPS", r * 1e-12);
    else fprintf(f, "%.2f GFLOPS", r * 1e-9);
}

void cli_commit(char *buf, size_t n)
{
    const char *env = getenv("BSK_COMMIT");
    snprintf(buf, n, "unknown");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    char line[64] = {0};
    if (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = '\0';
        int ok = line[0] != '\0';
        for (char *c = line; *c; c++) ok &= isxdigit((unsigned char)*c) != 0;
        if (ok) snprintf(buf, n, "%s", line);
    }
    pclose(p);
}

void cli_date(char *buf, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* Comma and indentation before a member, then its key (none inside arrays). */
static void json_sep(cli_json *j, const char *key)
{
    if (!j->first[j->depth]) fputc(',', j->f);
    j->first[j->depth] = 0;
    fprintf(j->f, "\n%*s", 2 * j->depth, "");
    if (key) {
        json_escaped(j->f, key);
        fputs(": ", j->f);
    }
}

void cli_json_begin(cli_json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    fputc('{', f);
    j->first[0] = 1;
    j->close[0] = '}';
}

static void json_open(cli_json *j, const char *key, char open, char close)
{
    if (j->depth + 1 >= 32) return;
    json_sep(j, key);
    fputc(open, j->f);
    j->depth++;
    j->first[j->depth] = 1;
    j->close[j->depth] = close;
}

void cli_json_obj(cli_json *j, const char *key) { json_open(j, key, '{', '}'); }
void cli_json_arr(cli_json *j, const char *key) { json_open(j, key, '[', ']'); }

void cli_json_end(cli_json *j)
{
    if (j->depth == 0) return;
    int empty = j->first[j->depth];
    char c = j->close[j->depth];
    j->depth--;
    if (!empty) fprintf(j->f, "\n%*s", 2 * j->depth, "");
    fputc(c, j->f);
}

void cli_json_str(cli_json *j, const char *key, const char *v)
{
    json_sep(j, key);
    if (v) json_escaped(j->f, v);
    else fputs("null", j->f);
}

void cli_json_num(cli_json *j, const char *key, double v)
{
    json_sep(j, key);
    if (isfinite(v)) fprintf(j->f, "%.6g", v);
    else fputs("null", j->f);
}

void cli_json_int(cli_json *j, const char *key, int64_t v)
{
    json_sep(j, key);
    fprintf(j->f, "%lld", (long long)v);
}

void cli_json_finish(cli_json *j)
{
    while (j->depth > 0) cli_json_end(j);
    fputs("\n}\n", j->f);
}

void cli_json_meta(cli_json *j, const char *tool)
{
    char commit[64], date[64];
    bsk_device_info info;
    bsk_status s = bsk_device_query(&info);
    cli_commit(commit, sizeof commit);
    cli_date(date, sizeof date);
    cli_json_obj(j, "meta");
    cli_json_str(j, "tool", tool);
    cli_json_str(j, "bsk_version", bsk_version_string());
    cli_json_str(j, "commit", commit);
    cli_json_str(j, "date", date);
    cli_json_obj(j, "device");
    if (s == BSK_SUCCESS) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
        cli_json_str(j, "name", info.name);
        cli_json_str(j, "cc", cc);
        cli_json_int(j, "sms", info.multiprocessors);
        cli_json_int(j, "memory_bytes", info.global_mem_bytes);
        cli_json_int(j, "l2_bytes", info.l2_bytes);
        cli_json_int(j, "driver_version", info.driver_version);
        cli_json_int(j, "runtime_version", info.runtime_version);
    } else {
        cli_json_str(j, "name", "none (CPU)");
    }
    cli_json_str(j, "arch_list", info.arch_list);
    cli_json_end(j);
    cli_json_end(j);
}
