/* internal.h — what the library's own files share: the context, the backend entry points, checks.
   Nothing here is public; the public contract is include/bsk.h. */
#ifndef BSK_INTERNAL_H
#define BSK_INTERNAL_H

#include "bsk.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BSK_LIMIT_DIM ((int64_t)INT32_MAX)         /* rows, cols                     */
#define BSK_LIMIT_BLOCK 1024                       /* block_rows, block_cols         */
#define BSK_LIMIT_ELEMS ((int64_t)1 << 62)         /* elements in one array          */

struct bsk_cuda_state; /* owned by the CUDA backend (src/cuda/), opaque to host code */

struct bsk_context {
    bsk_backend backend;   /* as asked at creation                               */
    int has_device;        /* a usable CUDA device exists                        */
    void *stream;          /* cudaStream_t                                       */
    const char *last_kernel;
    int pattern_cache;     /* keep derived pattern data between calls (bsk_set_pattern_cache) */
    struct bsk_cuda_state *cuda; /* lazily created workspace and pattern caches */
    struct bsk__tune_table *tune; /* the autotuner's table (src/core/tune.c), NULL while empty */
    int spmm_forced;       /* set while a family chosen by the tuner runs: it takes every case it can do exactly */
};

/* ---- autotuner (src/core/tune.c). Families in the default dispatch order; 0 = none (the default order). */
enum { BSK__FAM_NONE = 0, BSK__FAM_HOPPER = 1, BSK__FAM_HOPPER_SMALL = 2, BSK__FAM_PORTABLE = 3, BSK__FAM_SIMT = 4,
       BSK__FAM_COUNT = 5 };
const char *bsk__tune_family_name(int fam);
/* The family recorded for this SpMM case's class, or BSK__FAM_NONE. O(entries); 0 work without a table. */
int bsk__tune_lookup(const bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_dense *B, float beta,
                     const bsk_dense *C);
/* Parse a tune file's text (len bytes, need not be NUL-terminated) for `device`: on success *out holds a newly
   allocated table (free()), which is NULL for a file without entries. Errors as bsk_tune_load. The fuzz target's entry. */
bsk_status bsk__tune_parse(const char *text, size_t len, const char *device, struct bsk__tune_table **out);
/* bsk_spmm's checks, shared with bsk_tune_spmm (src/core/ops.c): BSK_SUCCESS and *empty = 1 when there is nothing to
   compute (m == 0 or N == 0). */
bsk_status bsk__spmm_check(bsk_context *ctx, bsk_op op, const bsk_bsr *A, const bsk_dense *B, const bsk_dense *C,
                           int *empty);
/* bsk_spmm after its checks passed (and the case is not empty): the CPU or the CUDA backend. */
bsk_status bsk__spmm_run(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                         bsk_dense *C);

/* ---- checks (src/bsr/bsr_validate.c). Each returns BSK_SUCCESS or the named status. */

/* O(1): dims, block sizes, dtype, mem, NULL pointers, alignment, overflow of the value array size. */
bsk_status bsk__check_bsr_desc(const bsk_bsr *A);
/* O(mb + nnzb) on host arrays: row_ptr monotone from 0 to nnzb, col_idx sorted, unique, in range. */
bsk_status bsk__check_bsr_indices(int64_t mb, int64_t nb, int64_t nnzb, const int32_t *row_ptr,
                                  const int32_t *col_idx);
/* O(1): dims, ld >= cols, dtype, mem, NULL data (allowed only when rows*cols == 0), alignment. */
bsk_status bsk__check_dense(const bsk_dense *D);
/* Whether ctx may run on operands in `m`: device memory needs a device and a non-CPU context (NO_DEVICE /
   WRONG_LOCATION), host memory a non-CUDA context (WRONG_LOCATION). (src/core/ops.c) */
bsk_status bsk__check_side(const bsk_context *ctx, bsk_memory m);
/* `p` (NULL passes) is where `want` says, by the CUDA runtime's account. */
bsk_status bsk__check_location(const void *p, bsk_memory want);
/* Pointers are where `mem` says (asks the CUDA runtime; all host without CUDA). */
bsk_status bsk__check_bsr_location(const bsk_bsr *A);
bsk_status bsk__check_dense_location(const bsk_dense *D);
/* a*b with overflow check against BSK_LIMIT_ELEMS; returns 0 on overflow. */
int bsk__mul_ok(int64_t a, int64_t b, int64_t *out);
/* Whether the byte ranges [a, a + abytes) and [b, b + bbytes) share a byte (NULL or empty ranges never do; byte
   counts are unsigned: validated element counts < 2^62 times the element size can pass INT64_MAX). The one aliasing
   test of every entry point. */
int bsk__overlaps(const void *a, uint64_t abytes, const void *b, uint64_t bbytes);
/* Bytes a dense descriptor spans from its data pointer: ((rows - 1) * ld + cols) elements (0 when rows is 0). */
uint64_t bsk__dense_bytes(const bsk_dense *D);

/* ---- Nsight hooks (src/core/trace.c): an NVTX range per public operation, a mark naming the kernel that ran.
   Usage: `bsk__trace_begin(ctx, "bsk_spmm"); return bsk__trace_end(ctx, body(...));` (end returns the status).
   begin also sets ctx->last_kernel to "none", which the operation overwrites when it runs a kernel. */
void bsk__trace_begin(bsk_context *ctx, const char *op);
bsk_status bsk__trace_end(const bsk_context *ctx, bsk_status s);

/* ---- host element conversions (src/core/convert.c) */
float bsk__half_to_float(uint16_t h);
uint16_t bsk__float_to_half(float f);   /* round to nearest even */
float bsk__bf16_to_float(uint16_t h);
uint16_t bsk__float_to_bf16(float f);   /* round to nearest even, NaN kept */
/* Element i of an array of dtype t, as float / store float into it. */
float bsk__load(const void *p, bsk_dtype t, int64_t i);
void bsk__store(void *p, bsk_dtype t, int64_t i, float v);

/* ---- CPU backend (src/cpu/). Arguments already validated (host memory). */
bsk_status bsk_cpu_spmm(bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                        bsk_dense *C);
bsk_status bsk_cpu_sddmm(float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, bsk_bsr *out);
/* The transpose index of an already validated host pattern (src/bsr/bsr_transpose_index.c): what
   bsk_bsr_transpose_index computes, without the checks. O(nnzb + nb), no allocation. */
void bsk__bsr_transpose_index_host(int64_t mb, int64_t nb, const int32_t *row_ptr, const int32_t *col_idx,
                                   int32_t *t_ptr, int32_t *t_row, int32_t *t_blk);

/* ---- CUDA backend (src/cuda/, or src/cuda/stub.c when built without CUDA). */
int bsk_cuda_device_count(void); /* 0 when no driver/device */
/* Where `p` lives according to the CUDA runtime: sets *mem, returns BSK_SUCCESS; unknown/unregistered
   host memory is BSK_MEM_HOST. Without CUDA: always host. */
bsk_status bsk_cuda_pointer_mem(const void *p, bsk_memory *mem);
bsk_status bsk_cuda_malloc(void **p, size_t bytes);
void bsk_cuda_free(void *p);
bsk_status bsk_cuda_memcpy(void *dst, const void *src, size_t bytes, int dst_on_device, int src_on_device);
bsk_status bsk_cuda_synchronize(bsk_context *ctx);
/* Before ctx->stream becomes `next`: make `next` wait for the work queued on the current stream (no host
   sync), so the workspace and caches it used are never touched by both at once. */
bsk_status bsk_cuda_stream_switch(bsk_context *ctx, void *next);
void bsk_cuda_release(bsk_context *ctx); /* frees ctx->cuda */
void bsk_cuda_forget_patterns(bsk_context *ctx); /* drops the per-pattern caches */
bsk_status bsk_cuda_device_query(bsk_device_info *info);
const char *bsk_cuda_arch_list(void);
/* Arguments validated (device memory, O(1) checks). Launch on ctx->stream; set ctx->last_kernel. */
bsk_status bsk_cuda_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                         float beta, bsk_dense *C);
bsk_status bsk_cuda_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                          bsk_bsr *out);
/* The autotuner's device part: times every family (and the default dispatch, table bypassed) on a scratch copy of
   C, then runs the fastest on C once. *best: its family. Synchronises the host. */
bsk_status bsk_cuda_tune_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                              float beta, bsk_dense *C, int iters, int *best, bsk_tune_result *result);

#ifdef __cplusplus
}
#endif
#endif
