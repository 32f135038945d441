/* tune.c — the autotuner's table: case classes, lookup, the tune file (save / load / parse) and bsk_tune_spmm's
   host part. The timing itself is the CUDA backend's (bsk_cuda_tune_spmm in src/cuda/backend.cu). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../internal.h"

/* One case class and its family. Small integers: a table is 256 entries at most. */
typedef struct tune_entry {
    int op, br, bc, adt, cdt, lm, ln, lk, dstep, beta1, fam; /* beta1: beta != 0 (the Hopper kernels' epilogue
                                                                differs: C is read, no TMA store) */
} tune_entry;

struct bsk__tune_table {
    int n;
    tune_entry e[BSK_TUNE_MAX_ENTRIES];
};

static const char *const fam_names[BSK__FAM_COUNT] = {"none", "hopper", "hopper-small", "portable", "simt"};
static const char *const dtype_names[3] = {"f32", "f16", "bf16"}; /* index = bsk_dtype */
static const char *const beta_names[2] = {"beta0", "beta1"};       /* beta == 0, beta != 0 */

const char *bsk__tune_family_name(int fam) { return fam >= 0 && fam < BSK__FAM_COUNT ? fam_names[fam] : "none"; }

static int floor_log2(int64_t x)
{
    int l = 0;
    while (x > 1) { x >>= 1; l++; }
    return l;
}

/* The class of an SpMM case (the operands already validated). */
static tune_entry class_of(bsk_op op, const bsk_bsr *A, const bsk_dense *B, float beta, const bsk_dense *C)
{
    tune_entry t;
    const double cells = (double)bsk_bsr_mb(A) * (double)bsk_bsr_nb(A);
    const double d = cells > 0 ? (double)A->nnzb / cells : 0.0;
    int step = (int)floor(d * 20.0 + 1e-9);
    t.op = op == BSK_OP_T;
    t.br = A->block_rows; t.bc = A->block_cols;
    t.adt = (int)A->dtype; t.cdt = (int)C->dtype;
    t.lm = floor_log2(C->rows); t.ln = floor_log2(C->cols); t.lk = floor_log2(B->rows);
    t.dstep = step < 0 ? 0 : step > 20 ? 20 : step;
    t.beta1 = beta != 0.0f;
    t.fam = BSK__FAM_NONE;
    return t;
}

static int same_class(const tune_entry *a, const tune_entry *b)
{
    return a->op == b->op && a->br == b->br && a->bc == b->bc && a->adt == b->adt && a->cdt == b->cdt &&
           a->lm == b->lm && a->ln == b->ln && a->lk == b->lk && a->dstep == b->dstep &&
           a->beta1 == b->beta1;
}

static int find(const struct bsk__tune_table *t, const tune_entry *c)
{
    for (int i = 0; t && i < t->n; i++)
        if (same_class(&t->e[i], c)) return i;
    return -1;
}

/* Insert or replace; 0 when the table is full. */
static int put(struct bsk__tune_table *t, const tune_entry *c)
{
    int i = find(t, c);
    if (i < 0) {
        if (t->n >= BSK_TUNE_MAX_ENTRIES) return 0;
        i = t->n++;
    }
    t->e[i] = *c;
    return 1;
}

int bsk__tune_lookup(const bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_dense *B, float beta,
                     const bsk_dense *C)
{
    if (!ctx->tune) return BSK__FAM_NONE;
    tune_entry c = class_of(op, A, B, beta, C);
    int i = find(ctx->tune, &c);
    return i < 0 ? BSK__FAM_NONE : ctx->tune->e[i].fam;
}

/* The name tune files are keyed by: the GPU's, or "cpu" on a context without one. */
static void device_name(const bsk_context *ctx, char *buf, size_t n)
{
    bsk_device_info info;
    memset(&info, 0, sizeof info);
    if (ctx->has_device && bsk_device_query(&info) == BSK_SUCCESS && info.name[0])
        snprintf(buf, n, "%s", info.name);
    else
        snprintf(buf, n, "cpu");
}

/* ---------------------------------------------------------------- the file */

#define LINE_MAX_CHARS 255
#define FILE_MAX_BYTES (1 << 20)

static int word_index(const char *w, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(w, names[i]) == 0) return i;
    return -1;
}

/* A plain decimal integer in [lo, hi], the whole word. */
static int parse_int(const char *w, int lo, int hi, int *out)
{
    if (!*w || strlen(w) > 9) return 0;
    for (const char *p = w; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    long v = strtol(w, NULL, 10);
    if (v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* One entry line, split into words at single or repeated spaces / tabs. */
static int parse_entry(char *line, tune_entry *t)
{
    char *w[13];
    int n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = 0;
        if (!*p) break;
        if (n == 13) return 0;
        w[n++] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
    }
    if (n != 12 || strcmp(w[0], "spmm") != 0) return 0;
    if (strcmp(w[1], "n") == 0) t->op = 0;
    else if (strcmp(w[1], "t") == 0) t->op = 1;
    else return 0;
    if (!parse_int(w[2], 1, 1024, &t->br) || !parse_int(w[3], 1, 1024, &t->bc)) return 0;
    if ((t->adt = word_index(w[4], dtype_names, 3)) < 0 || (t->cdt = word_index(w[5], dtype_names, 3)) < 0) return 0;
    if (!parse_int(w[6], 0, 62, &t->lm) || !parse_int(w[7], 0, 62, &t->ln) || !parse_int(w[8], 0, 62, &t->lk)) return 0;
    if (!parse_int(w[9], 0, 20, &t->dstep)) return 0;
    if ((t->beta1 = word_index(w[10], beta_names, 2)) < 0) return 0;
    t->fam = word_index(w[11], fam_names, BSK__FAM_COUNT);
    return t->fam > BSK__FAM_NONE;
}

bsk_status bsk__tune_parse(const char *text, size_t len, const char *device, struct bsk__tune_table **out)
{
    *out = NULL;
    if (!text || !device) return BSK_ERR_NULL_POINTER;
    if (len > FILE_MAX_BYTES) return BSK_ERR_INVALID_ARGUMENT;
    struct bsk__tune_table *t = (struct bsk__tune_table *)calloc(1, sizeof *t);
    if (!t) return BSK_ERR_OUT_OF_MEMORY;
    char line[LINE_MAX_CHARS + 2];
    bsk_status s = BSK_SUCCESS;
    int lineno = 0;
    size_t pos = 0;
    while (pos < len && !s) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        size_t n = end - pos;
        if (n > 0 && text[end - 1] == '\r') n--; /* CRLF files */
        if (n > LINE_MAX_CHARS || memchr(text + pos, 0, n)) { s = BSK_ERR_INVALID_ARGUMENT; break; }
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = end + 1;
        if (lineno++ == 0) { /* "bsk-tune 2 <device name>" (version 1 files, without the beta word, are refused) */
            static const char head[] = "bsk-tune 2 ";
            if (strncmp(line, head, sizeof head - 1) != 0) s = BSK_ERR_INVALID_ARGUMENT;
            else if (strcmp(line + sizeof head - 1, device) != 0) s = BSK_ERR_UNSUPPORTED;
            continue;
        }
        if (line[0] == 0 || line[0] == '#') continue;
        tune_entry e;
        if (!parse_entry(line, &e)) s = BSK_ERR_INVALID_ARGUMENT;
        else if (find(t, &e) < 0 && t->n >= BSK_TUNE_MAX_ENTRIES) s = BSK_ERR_INVALID_ARGUMENT;
        else put(t, &e);
    }
    if (!s && lineno == 0) s = BSK_ERR_INVALID_ARGUMENT; /* no header */
    if (s || t->n == 0) {
        free(t);
        t = NULL;
    }
    *out = t;
    return s;
}

bsk_status bsk_tune_save(const bsk_context *ctx, const char *path)
{
    if (!ctx || !path) return BSK_ERR_NULL_POINTER;
    char name[256];
    device_name(ctx, name, sizeof name);
    FILE *f = fopen(path, "w");
    if (!f) return BSK_ERR_INVALID_ARGUMENT;
    int bad = fprintf(f, "bsk-tune 2 %s\n", name) < 0;
    for (int i = 0; ctx->tune && i < ctx->tune->n && !bad; i++) {
        const tune_entry *e = &ctx->tune->e[i];
        bad = fprintf(f, "spmm %s %d %d %s %s %d %d %d %d %s %s\n", e->op ? "t" : "n", e->br, e->bc,
                      dtype_names[e->adt], dtype_names[e->cdt], e->lm, e->ln, e->lk, e->dstep, beta_names[e->beta1],
                      fam_names[e->fam]) < 0;
    }
    bad |= fclose(f) != 0;
    return bad ? BSK_ERR_INVALID_ARGUMENT : BSK_SUCCESS;
}

bsk_status bsk_tune_load(bsk_context *ctx, const char *path)
{
    if (!ctx || !path) return BSK_ERR_NULL_POINTER;
    FILE *f = fopen(path, "rb");
    if (!f) return BSK_ERR_INVALID_ARGUMENT;
    char *buf = (char *)malloc(FILE_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return BSK_ERR_OUT_OF_MEMORY;
    }
    size_t len = fread(buf, 1, FILE_MAX_BYTES + 1, f);
    int err = ferror(f);
    fclose(f);
    bsk_status s = err ? BSK_ERR_INVALID_ARGUMENT : BSK_SUCCESS;
    struct bsk__tune_table *t = NULL;
    if (!s) {
        char name[256];
        device_name(ctx, name, sizeof name);
        s = bsk__tune_parse(buf, len, name, &t); /* len > FILE_MAX_BYTES: INVALID_ARGUMENT */
    }
    free(buf);
    if (s) return s;
    free(ctx->tune);
    ctx->tune = t;
    return BSK_SUCCESS;
}

void bsk_tune_clear(bsk_context *ctx)
{
    if (!ctx) return;
    free(ctx->tune);
    ctx->tune = NULL;
}

int bsk_tune_entries(const bsk_context *ctx) { return ctx && ctx->tune ? ctx->tune->n : 0; }

/* ---------------------------------------------------------------- tuning */

static void set_name(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

static bsk_status bsk_tune_spmm_body(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                         bsk_dense *C, int iters, bsk_tune_result *result)
{
    int empty;
    bsk_status s = bsk__spmm_check(ctx, op, A, B, C, &empty);
    if (s) return s;
    if (iters < 1 || iters > 1000) return BSK_ERR_INVALID_ARGUMENT;
    bsk_tune_result r;
    memset(&r, 0, sizeof r);
    r.ms = r.default_ms = NAN;
    if (empty || A->mem == BSK_MEM_HOST) { /* nothing to time: one kernel or nothing to compute (checked above) */
        s = empty ? BSK_SUCCESS : bsk__spmm_run(ctx, op, alpha, A, B, beta, C);
        set_name(r.family, sizeof r.family, empty ? "none" : "cpu");
        set_name(r.kernel, sizeof r.kernel, empty ? "none" : bsk_last_kernel(ctx));
        set_name(r.default_kernel, sizeof r.default_kernel, r.kernel);
        if (!s && result) *result = r;
        return s;
    }
    tune_entry c = class_of(op, A, B, beta, C);
    if (!ctx->tune) {
        ctx->tune = (struct bsk__tune_table *)calloc(1, sizeof *ctx->tune);
        if (!ctx->tune) return BSK_ERR_OUT_OF_MEMORY;
    }
    if (find(ctx->tune, &c) < 0 && ctx->tune->n >= BSK_TUNE_MAX_ENTRIES) return BSK_ERR_OUT_OF_MEMORY;
    int best = BSK__FAM_NONE;
    s = bsk_cuda_tune_spmm(ctx, op, alpha, A, B, beta, C, iters, &best, &r);
    if (s) {
        if (ctx->tune->n == 0) bsk_tune_clear(ctx);
        return s;
    }
    c.fam = best;
    put(ctx->tune, &c); /* room checked above */
    set_name(r.family, sizeof r.family, bsk__tune_family_name(best));
    if (result) *result = r;
    return BSK_SUCCESS;
}

bsk_status bsk_tune_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                         bsk_dense *C, int iters, bsk_tune_result *result)
{
    bsk__trace_begin(ctx, "bsk_tune_spmm");
    return bsk__trace_end(ctx, bsk_tune_spmm_body(ctx, op, alpha, A, B, beta, C, iters, result));
}
