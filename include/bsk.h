/*
 * bsk.h — BlackwellSparseK: block-sparse matrix work on NVIDIA GPUs at dense tensor-core speed.
 *
 * This header is the manual. Everything the library offers is declared and documented here.
 *
 * Conventions
 *   - Every function is prefixed `bsk_`; every type `bsk_`; every macro `BSK_`.
 *   - Functions that can fail return a `bsk_status` (a stable int; 0 is success). Library code never
 *     prints, never calls exit()/abort(), and on any error leaves every output untouched.
 *   - Matrices are described by plain structs (`bsk_dense`, `bsk_bsr`) over memory the caller owns,
 *     on the host or on the CUDA device (the `mem` field says which). The library never frees or keeps
 *     pointers to caller memory after a call returns, except where a function says so.
 *   - Dense matrices are row-major with a leading dimension `ld` (elements between row starts).
 *   - Sizes are int64_t; BSR indices (row_ptr, col_idx) are int32_t. Products of sizes are checked for
 *     overflow; inputs past the limits below get BSK_ERR_OVERFLOW, never a wrapped size.
 *   - Backends follow the memory: when every operand is in host memory the CPU backend runs; when every
 *     operand is in device memory the CUDA backend runs (Hopper kernels on sm_90, the portable tensor-core
 *     path elsewhere) on the context's stream, asynchronously, without host synchronisation. Mixed
 *     locations are BSK_ERR_WRONG_LOCATION.
 *
 * Limits (checked; past them: BSK_ERR_OVERFLOW)
 *   - rows, cols of any matrix: 1 .. 2^31-1 (0 is accepted for an empty product where documented).
 *   - BSR: nnzb <= 2^31-1; block dimensions 1..1024; nnzb * block_rows * block_cols < 2^62.
 *   - dense: ld * rows < 2^62 elements.
 *
 * Minimal use (C = A·B on whatever backend the memory is on):
 *     bsk_context *ctx;  bsk_create(&ctx, BSK_BACKEND_AUTO);
 *     bsk_bsr A;         bsk_bsr_from_dense(&dense_A, 64, 64, 0.0f, &A);   // keep non-zero 64x64 blocks
 *     bsk_status s = bsk_spmm(ctx, BSK_OP_N, 1.0f, &A, &B, 0.0f, &C);
 *     if (s) fprintf(stderr, "bsk: %s\n", bsk_status_string(s));
 *     bsk_bsr_free(&A);  bsk_destroy(ctx);
 */
#ifndef BSK_H
#define BSK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define BSK_API __declspec(dllexport)
#elif defined(__GNUC__)
#define BSK_API __attribute__((visibility("default")))
#else
#define BSK_API
#endif

/* ---------------------------------------------------------------- version */

#define BSK_VERSION_MAJOR 0
#define BSK_VERSION_MINOR 1
#define BSK_VERSION_PATCH 0
#define BSK_VERSION_NUMBER (BSK_VERSION_MAJOR * 10000 + BSK_VERSION_MINOR * 100 + BSK_VERSION_PATCH)

/* The version the library was built as (BSK_VERSION_NUMBER of its header). */
BSK_API unsigned bsk_version(void);
/* The same as a string, e.g. "0.1.0". Static storage; never NULL. */
BSK_API const char *bsk_version_string(void);

/* ---------------------------------------------------------------- status */

/* Stable values: never renumbered, only appended. */
typedef enum bsk_status {
    BSK_SUCCESS = 0,
    BSK_ERR_INVALID_ARGUMENT = 1,  /* an argument is out of its documented range (e.g. unknown enum)   */
    BSK_ERR_NULL_POINTER = 2,      /* a required pointer is NULL                                        */
    BSK_ERR_INVALID_BSR = 3,       /* BSR structure is malformed: row_ptr not monotone or not 0..nnzb,
                                      col_idx unsorted, duplicate or out of range                       */
    BSK_ERR_SHAPE_MISMATCH = 4,    /* operand shapes do not fit together                                */
    BSK_ERR_UNSUPPORTED = 5,       /* valid request this build/backend does not implement (dtype combo)  */
    BSK_ERR_MISALIGNED = 6,        /* a pointer is not aligned to its element size                      */
    BSK_ERR_WRONG_LOCATION = 7,    /* pointer is not where `mem` says, or operands on different sides   */
    BSK_ERR_OVERFLOW = 8,          /* a size or a product of sizes is past the limits above             */
    BSK_ERR_OUT_OF_MEMORY = 9,     /* host or device allocation failed                                  */
    BSK_ERR_NO_DEVICE = 10,        /* a CUDA device was required and none is usable                     */
    BSK_ERR_CUDA = 11,             /* the CUDA runtime reported an error (launch, copy, ...)            */
    BSK_ERR_INTERNAL = 12,         /* a bug in the library: please report it                            */
    BSK_ERR_BAD_LAYOUT = 13,       /* a dense operand's ld is smaller than its cols                     */
} bsk_status;

/* A short English description of `s` ("success", "invalid BSR structure", ...). Static storage; an
   unknown value gives "unknown status". Never NULL. */
BSK_API const char *bsk_status_string(int s);

/* ---------------------------------------------------------------- basic types */

typedef enum bsk_dtype {
    BSK_F32 = 0,  /* IEEE binary32                     */
    BSK_F16 = 1,  /* IEEE binary16                     */
    BSK_BF16 = 2, /* bfloat16 (upper half of binary32) */
} bsk_dtype;

/* Bytes per element of `t`; 0 for an unknown dtype. */
BSK_API size_t bsk_dtype_size(bsk_dtype t);

typedef enum bsk_memory {
    BSK_MEM_HOST = 0,   /* ordinary (or pinned) host memory                  */
    BSK_MEM_DEVICE = 1, /* CUDA device memory of the context's current device */
} bsk_memory;

typedef enum bsk_op {
    BSK_OP_N = 0, /* use A as is      */
    BSK_OP_T = 1, /* use A transposed */
} bsk_op;

typedef enum bsk_backend {
    BSK_BACKEND_AUTO = 0, /* follow the memory: CPU for host operands, CUDA for device operands     */
    BSK_BACKEND_CPU = 1,  /* host operands only; device operands are BSK_ERR_WRONG_LOCATION           */
    BSK_BACKEND_CUDA = 2, /* device operands only; bsk_create fails with BSK_ERR_NO_DEVICE if no GPU  */
} bsk_backend;

/* A dense matrix: rows x cols, row-major, element (r, c) at data[r*ld + c]. ld >= cols.
   `data` must be aligned to the element size. */
typedef struct bsk_dense {
    int64_t rows;
    int64_t cols;
    int64_t ld;
    bsk_dtype dtype;
    bsk_memory mem;
    void *data;
} bsk_dense;

/* A block-sparse row (BSR) matrix of rows x cols elements, cut into blocks of block_rows x block_cols.
   Block rows: mb = ceil(rows / block_rows); block columns: nb = ceil(cols / block_cols).
   - row_ptr[mb + 1]: block row i holds blocks row_ptr[i] .. row_ptr[i+1]-1; row_ptr[0] = 0,
     row_ptr[mb] = nnzb, non-decreasing.
   - col_idx[nnzb]: block column of each block, strictly increasing within a block row, in [0, nb).
   - values: nnzb dense blocks, block k at values + k*block_rows*block_cols elements, row-major inside.
   When rows or cols is not a multiple of the block size, the last block row/column is partial: its
   entries outside the matrix are padding and must be zero (every builder below writes zeros there).
   row_ptr, col_idx and values all live in `mem`. */
typedef struct bsk_bsr {
    int64_t rows;
    int64_t cols;
    int32_t block_rows;
    int32_t block_cols;
    int64_t nnzb;
    int32_t *row_ptr;
    int32_t *col_idx;
    void *values;
    bsk_dtype dtype;
    bsk_memory mem;
} bsk_bsr;

/* Number of block rows / block columns of A (ceil(rows/block_rows), ceil(cols/block_cols)); 0 if A is
   NULL or its block sizes are not positive. */
BSK_API int64_t bsk_bsr_mb(const bsk_bsr *A);
BSK_API int64_t bsk_bsr_nb(const bsk_bsr *A);

/* ---------------------------------------------------------------- context */

/* An opaque handle: chooses the backend, holds the CUDA stream, owns reusable workspace and per-pattern
   caches (e.g. the transpose index of a BSR pattern). Not thread-safe: use one context per thread. */
typedef struct bsk_context bsk_context;

/* Create a context. BSK_BACKEND_AUTO never fails for lack of a GPU (it uses the CPU then).
   BSK_BACKEND_CUDA fails with BSK_ERR_NO_DEVICE when no usable CUDA device exists.
   On success *ctx is set; on failure *ctx is left untouched. */
BSK_API bsk_status bsk_create(bsk_context **ctx, bsk_backend backend);

/* Release the context and everything it owns. Waits for work it queued on its stream. NULL is a no-op. */
BSK_API void bsk_destroy(bsk_context *ctx);

/* The CUDA stream (a cudaStream_t, passed as void*) the CUDA backend launches on; NULL = the legacy
   default stream. The caller keeps ownership. */
BSK_API bsk_status bsk_set_stream(bsk_context *ctx, void *stream);
BSK_API bsk_status bsk_get_stream(const bsk_context *ctx, void **stream);

/* Whether the context can run on a CUDA device (1) or not (0). */
BSK_API int bsk_has_device(const bsk_context *ctx);

/* Wait until all work the context queued has finished; reports asynchronous CUDA errors
   (BSK_ERR_CUDA). A no-op returning BSK_SUCCESS on the CPU. */
BSK_API bsk_status bsk_synchronize(bsk_context *ctx);

/* Pattern cache. The CUDA backend derives data from a BSR pattern (the transpose index Aᵀ·B walks; the row-group
   column lists of the b = 16 / 32 Hopper SpMM; the sorted work list of the b = 64 / 128 Hopper SpMM, per op and
   number of 256-column tiles; a few small kernels, no host synchronisation). By default it rebuilds that data on
   every call, so a pattern may be rewritten or reallocated at will (a Hopper SpMM product small enough to give every
   work item an SM of its own — with, at b = 64 / 128, no row long enough to split — needs no work list and runs as
   one kernel anyway, each work item building its own lists; at b = 16 / 32 that is ~10 % slower than cached lists).
   bsk_set_pattern_cache(ctx, 1) keeps it per context instead, keyed by the pattern's row_ptr/col_idx addresses
   and sizes: faster for repeated calls on one pattern (a repeated Hopper SpMM is then one kernel: on an H200 at
   2048^3, b = 32 +13 to +21 % before those one-kernel calls, +10 to +13 % after them, b = 64 / 128 +6 to +14 %; at
   8192^3 b = 128 d 0.1 +1.6 %). A cached b = 64 list also
   pairs block rows that share columns (a one-time analysis, 30-220 us, too slow to redo on every call; b = 64 at
   d 0.5 then runs +4 to +7 % faster on an H100 or H200, and at d 0.25 on an H100; op N and T; uncached lists of long
   products get a cheaper nearby-rows pairing, +1 to +3 %). But then, after
   rewriting a device pattern's row_ptr or col_idx in place — or freeing it while a new pattern may land at the
   same addresses (caching allocators such as PyTorch's do this) — call bsk_forget_patterns(ctx), which drops
   every entry (waiting for the work that used them). Changing the setting drops every entry too (the call
   synchronises with the work that used them). Inside a stream capture the work lists and the transpose index are
   built in the graph (the index in memory the graph allocates and frees: a graph that captured an op-T bsk_spmm
   holds memory nodes, so it cannot be cloned or made a child graph), not taken from or put in the cache.
   Graphs and the workspace: capture after one eager call of the same shapes, which sizes the context's workspace
   (a workspace grown inside a capture would be the graph's memory), and replay a graph only while no call on the
   same context has needed a larger workspace since the capture (growing it frees the one the graph uses): capture
   the largest shapes first, or give graphs a context of their own. Both calls are no-ops on the CPU. */
BSK_API bsk_status bsk_set_pattern_cache(bsk_context *ctx, int enable);
BSK_API bsk_status bsk_forget_patterns(bsk_context *ctx);

/* Name of the kernel the last operation on this context (bsk_spmm, bsk_sddmm, bsk_attention_forward / _backward,
   bsk_topk_block_layout, bsk_tune_spmm) ran ("cpu", "cuda-simt", "cuda-mma", "hopper-wgmma-b128", ...); "none"
   when that call ran nothing (it returned an error, or the shapes were empty). Static storage; never NULL.
   Nsight: each of those operations is an NVTX range in the "bsk" domain with a mark naming this kernel
   (`make nsys` records one run). */
BSK_API const char *bsk_last_kernel(const bsk_context *ctx);

/* Device facts for `bsk preflight`. Fills what it can; returns BSK_ERR_NO_DEVICE without a GPU.
   `arch_list` receives the GPU architectures this build carries machine code for (e.g. "sm_80 sm_90a"),
   always, GPU or not. */
typedef struct bsk_device_info {
    char name[256];
    int cc_major, cc_minor;
    int multiprocessors;
    int driver_version;  /* e.g. 13000 */
    int runtime_version; /* e.g. 13000 */
    int64_t global_mem_bytes;
    int64_t l2_bytes;
    char arch_list[128];
} bsk_device_info;
BSK_API bsk_status bsk_device_query(bsk_device_info *info);

/* ---------------------------------------------------------------- BSR utilities */

/* Check A's structure: dims, block sizes, NULL pointers, alignment, overflow, row_ptr (starts at 0,
   non-decreasing, ends at nnzb) and col_idx (in range, strictly increasing per block row).
   Works on host or device memory (device metadata is copied to the host: this synchronizes).
   Returns BSK_SUCCESS or the first problem's status. `mem` = DEVICE over host pointers (or the reverse)
   is BSK_ERR_WRONG_LOCATION, with or without a GPU. */
BSK_API bsk_status bsk_bsr_validate(const bsk_bsr *A);

/* The builders below allocate the result's arrays in host memory; free them with bsk_bsr_free().
   On failure *out is untouched and nothing is allocated. Every input is checked first: NULL_POINTER,
   INVALID_ARGUMENT (unknown dtype, negative size, block size < 1), OVERFLOW (past the limits),
   MISALIGNED, BAD_LAYOUT (dense ld < cols), WRONG_LOCATION (a device dense operand), and for CSR/COO
   input INVALID_BSR (row_ptr not 0..nnz or not monotone, a row or column index out of range). */

/* Keep each block_rows x block_cols block of `dense` (host) whose Frobenius norm is > threshold
   (threshold 0: keep every block with a non-zero entry; a negative threshold keeps every block; NaN is
   INVALID_ARGUMENT; a block holding NaN is kept). Values keep the dense dtype. */
BSK_API bsk_status bsk_bsr_from_dense(const bsk_dense *dense, int32_t block_rows, int32_t block_cols,
                                      float threshold, bsk_bsr *out);

/* Keep the blocks where mask[i*nb + j] != 0 (mask: mb x nb bytes, host), values copied from `dense`. */
BSK_API bsk_status bsk_bsr_from_mask(const bsk_dense *dense, int32_t block_rows, int32_t block_cols,
                                     const uint8_t *mask, bsk_bsr *out);

/* From an element-wise CSR matrix (host; row_ptr[rows+1], col_idx[nnz], values of `dtype`): every
   block that holds at least one entry is kept; entries are summed into it (duplicates add). */
BSK_API bsk_status bsk_bsr_from_csr(int64_t rows, int64_t cols, int64_t nnz, const int32_t *row_ptr,
                                    const int32_t *col_idx, const void *values, bsk_dtype dtype,
                                    int32_t block_rows, int32_t block_cols, bsk_bsr *out);

/* From COO triplets (host, any order, duplicates add). */
BSK_API bsk_status bsk_bsr_from_coo(int64_t rows, int64_t cols, int64_t nnz, const int32_t *row_idx,
                                    const int32_t *col_idx, const void *values, bsk_dtype dtype,
                                    int32_t block_rows, int32_t block_cols, bsk_bsr *out);

/* Write A (host) into `dense` (host, same dtype, rows x cols). Entries outside A's blocks become 0; the
   ld gap is not written. Another dtype: BSK_ERR_UNSUPPORTED; another shape: BSK_ERR_SHAPE_MISMATCH. */
BSK_API bsk_status bsk_bsr_to_dense(const bsk_bsr *A, bsk_dense *dense);

/* out = Aᵀ (host): blocks moved to their transposed place and each block transposed. Allocates. */
BSK_API bsk_status bsk_bsr_transpose(const bsk_bsr *A, bsk_bsr *out);

/* Metadata-only transpose index of A (host): for each block column j, the blocks of A in it in block-row
   order: t_ptr[nb+1] (like row_ptr), t_row[nnzb] (their block rows), t_blk[nnzb] (their index into A's
   values). Caller-allocated arrays. Used for Aᵀ·B without moving values. */
BSK_API bsk_status bsk_bsr_transpose_index(const bsk_bsr *A, int32_t *t_ptr, int32_t *t_row,
                                           int32_t *t_blk);

/* Copy A into newly allocated memory on `mem` (host or device): out is a deep copy that
   bsk_bsr_free() releases. Synchronous. Validates A. A device on either side without a GPU:
   BSK_ERR_NO_DEVICE. */
BSK_API bsk_status bsk_bsr_clone(const bsk_bsr *A, bsk_memory mem, bsk_bsr *out);

typedef enum bsk_pattern {
    BSK_PATTERN_UNIFORM = 0, /* every block row keeps round(density*nb) blocks (±1), columns uniform       */
    BSK_PATTERN_SKEWED = 1,  /* blocks per row follow a power law (a few long rows, many short), same mean */
} bsk_pattern;

/* A random BSR matrix for tests and benchmarks (host): `density` of the mb x nb blocks kept in the given
   pattern, values uniform in [-1, 1) (never zero), padding zero. Deterministic for a seed. */
BSK_API bsk_status bsk_bsr_random(int64_t rows, int64_t cols, int32_t block_rows, int32_t block_cols,
                                  double density, bsk_pattern pattern, uint64_t seed, bsk_dtype dtype,
                                  bsk_bsr *out);

/* Free arrays allocated by a bsk_bsr_* builder or bsk_bsr_clone and zero the struct. NULL and
   already-freed (zeroed) structs are no-ops. Never pass a bsk_bsr over caller-owned arrays. */
BSK_API void bsk_bsr_free(bsk_bsr *A);

typedef struct bsk_bsr_stats {
    int64_t mb, nb;               /* block rows, block columns                   */
    int64_t nnzb;                 /* kept blocks                                 */
    double density;               /* nnzb / (mb*nb)                              */
    int64_t row_min, row_max;     /* fewest / most blocks in a block row        */
    double row_mean;              /* mean blocks per block row                   */
    int64_t empty_rows;           /* block rows with no blocks                   */
} bsk_bsr_stats;

/* Pattern statistics of A (host or device; device metadata is copied, synchronously). Validates A. */
BSK_API bsk_status bsk_bsr_stats_get(const bsk_bsr *A, bsk_bsr_stats *stats);

/* ---------------------------------------------------------------- operations */

/* SpMM:  C = alpha · op(A) · B + beta · C
   A: BSR, M x K (op N) — op T uses Aᵀ, K x M.  B: dense, op(A).cols x N.  C: dense, op(A).rows x N.
   Dtypes: A and B the same, one of F32/F16/BF16; C any of F32/F16/BF16. Accumulation is fp32.
   beta = 0 means C is not read (NaN in C does not propagate). C must not overlap A (values, row_ptr,
   col_idx) or B: BSK_ERR_INVALID_ARGUMENT.
   Non-finite values: NaN / Inf in a stored block of A or in a row of B that a stored block multiplies reach C as
   in the dense product; a row of C whose block row stores no block in that block column may also become
   NaN (0 · Inf) on the CUDA Hopper kernels for 16 / 32 blocks, which multiply several block rows in one
   tensor-core operation with zero blocks for the absent ones. Finite inputs never see a difference.
   Host operands: CPU backend, threaded over output block rows (threads: the online cores, or environment
   BSK_NUM_THREADS, read on every call); its results are bitwise identical on every run and for every
   thread count; alpha = 0 there gives C = beta·C without reading A or B. Device operands: CUDA backend
   on the context's stream, no host synchronisation; on the device only O(1) checks run on A's arrays
   (call bsk_bsr_validate once per pattern), and the kernels never read or write out of bounds even for
   malformed indices. On an H100 / H200 the first device call outside a stream capture also queues a
   one-time probe (~0.3 ms of GPU work, two small allocations) that finds which SMs share each half of the
   L2; later calls use it to give each half its own work queue on skewed patterns (results are the same
   either way; environment BSK_L2_PARTITIONS=0 turns the probe off).
   Locations: operands whose `mem` differ, or a CPU context given device operands (a CUDA context given
   host ones): BSK_ERR_WRONG_LOCATION; all operands DEVICE on a context without a device:
   BSK_ERR_NO_DEVICE (decided before the pointers are inspected); with a device, pointers not where
   `mem` says: BSK_ERR_WRONG_LOCATION. The same holds for bsk_sddmm. */
BSK_API bsk_status bsk_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                            float beta, bsk_dense *C);

/* SDDMM:  out.values = alpha · (X · Yᵀ) sampled on out's block pattern + beta · out.values
   X: dense M x D, Y: dense K x D (same dtype), out: BSR M x K whose row_ptr/col_idx give the pattern and
   whose values (dtype F32, or the dtype of X) are updated in place. beta = 0: old values not read.
   Padding entries of partial blocks (outside the M x K matrix) are written as 0. out.values must not overlap X,
   Y or out's own row_ptr / col_idx: BSK_ERR_INVALID_ARGUMENT.
   This is dA = dY · Xᵀ of a block-sparse layer Y = A·X (pass X = dY, Y = Xᵀ's rows = X of the layer). */
BSK_API bsk_status bsk_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                             bsk_bsr *out);

/* ---------------------------------------------------------------- autotuner

   bsk_spmm picks its kernel by itself (block size, dtypes, shape, density; thresholds measured on an H100). The
   autotuner refines that pick for the GPU at hand. A context holds a tuning table: per case class, the kernel
   family measured fastest. A class is (op, block rows x cols, A's dtype, C's dtype, floor(log2) of M, N and K,
   the block density nnzb / (mb·nb) in steps of 1/20, beta == 0 or not): 2048 and 4096 are different classes, 3000
   and 4000 the same.
   bsk_spmm on the device runs the recorded family first when its case's class is in the table; a family that
   cannot run a case exactly still declines it and the default order follows, so a table changes which kernel
   runs, never what is computed (beyond the kernels' own rounding). Families: "hopper" (TMA + wgmma, b = 64 / 128;
   kernels hopper-wgmma-b*), "hopper-small" (b = 16 / 32, hopper-wgmma-b*s; from a table it also runs below the
   density where the default hands over to "portable"), "portable" (mma.sync, sm_80+: cuda-mma*), "simt" (cuda-simt).

   bsk_tune_spmm: runs every family that takes the case, on the context's stream (one warm-up run each, then
   `iters` rounds timing each family once with CUDA events, in a shuffled order, L2 flushed before each run;
   median per family), records the fastest in the table (replacing the class's
   earlier entry; the default's family stays unless another is more than 2 % faster) and leaves C = alpha·op(A)·B + beta·C as one bsk_spmm call would (the timed runs write a scratch
   copy of C). It synchronises the host: tune first, then capture graphs. result (may be NULL) receives the
   winner's family and kernel name, its median time and that of the default dispatch. Host operands: one CPU
   kernel, nothing to tune: runs bsk_spmm, records nothing, result->family "cpu". Errors as bsk_spmm (nothing
   recorded, C not written), plus INVALID_ARGUMENT for iters outside [1, 1000], OUT_OF_MEMORY when the scratch
   copy cannot be allocated or the table is full (BSK_TUNE_MAX_ENTRIES classes).

   bsk_tune_save / bsk_tune_load: the table as a text file, first line "bsk-tune 2 <device name>", then one line
   per class: "spmm <op n|t> <block rows> <block cols> <A dtype> <C dtype> <log2 M> <log2 N> <log2 K> <density
   step 0..20> <beta0|beta1> <family>" (dtypes f32 / f16 / bf16; beta1: beta != 0; version 1 files are refused). The device name is bsk_device_info's (a CPU-only context: "cpu").
   Load replaces the context's table only when the whole file is valid: a file of another device is
   BSK_ERR_UNSUPPORTED, a malformed one (unknown words, numbers out of range, more than BSK_TUNE_MAX_ENTRIES lines,
   a line over 255 characters) BSK_ERR_INVALID_ARGUMENT, a file that cannot be opened, read or written
   BSK_ERR_INVALID_ARGUMENT; nothing changes then. bsk_create loads the file named by the environment variable
   BSK_TUNE_FILE when it is set (silently skipping a file it cannot use). bsk_tune_clear empties the table;
   bsk_tune_entries returns its size (0 for NULL). */
#define BSK_TUNE_MAX_ENTRIES 256
typedef struct bsk_tune_result {
    char family[16];        /* the winner: "hopper", "hopper-small", "portable", "simt" or "cpu" */
    char kernel[48];        /* its bsk_last_kernel                                               */
    double ms;              /* its median time                                                   */
    double default_ms;      /* the default dispatch's median time (the table bypassed)           */
    char default_kernel[48];
} bsk_tune_result;
BSK_API bsk_status bsk_tune_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                 float beta, bsk_dense *C, int iters, bsk_tune_result *result);
BSK_API bsk_status bsk_tune_save(const bsk_context *ctx, const char *path);
BSK_API bsk_status bsk_tune_load(bsk_context *ctx, const char *path);
BSK_API void bsk_tune_clear(bsk_context *ctx);
BSK_API int bsk_tune_entries(const bsk_context *ctx);

/* ---------------------------------------------------------------- block-sparse attention */

/* Block-sparse attention forward (FlashAttention style, online softmax) over a layout of kept
   (query block, key block) tiles, and a top-k block gate that writes such a layout from Q and K.

   Tensors. Q, K, V and O are 4-D strided views. Element (b, s, h, d) — batch entry, sequence position,
   head, head dimension — lives at data + b*stride_batch + s*stride_seq + h*stride_head + d (strides in
   elements, >= 0; the head dimension is always contiguous). Both [batch, seq, heads, dim] and
   [batch, heads, seq, dim] storage (or any other order, e.g. a slice of a packed QKV tensor) are just
   strides; bsk_attn_tensor_bshd / bsk_attn_tensor_bhsd fill them for packed arrays.
   Inputs may share memory (e.g. stride 0 broadcasts); O must not overlap itself or any input (the layout's
   arrays and kv_lens included). */
typedef struct bsk_attn_tensor {
    int64_t batch, seq, heads, dim;
    int64_t stride_batch, stride_seq, stride_head; /* elements */
    bsk_dtype dtype;
    bsk_memory mem;
    void *data;
} bsk_attn_tensor;

/* Views of packed arrays: [batch, seq, heads, dim] and [batch, heads, seq, dim]. */
BSK_API bsk_attn_tensor bsk_attn_tensor_bshd(void *data, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                                             bsk_dtype dtype, bsk_memory mem);
BSK_API bsk_attn_tensor bsk_attn_tensor_bhsd(void *data, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                                             bsk_dtype dtype, bsk_memory mem);

/* Layout: which tiles of the seq_q x seq_k score matrix are computed, as FlexAttention's BlockMask keeps
   them — per query block, two sorted lists of key blocks: FULL tiles (no element inside is masked) and
   PARTIAL tiles (some elements may be masked: the causal diagonal, keys past the sequence end).
   Query blocks: mq = ceil(seq_q / block_q); key blocks: nb = ceil(seq_k / block_k).
   `batch` is 1 (one layout shared by every batch entry) or the batch size; `heads` is 1 (shared by every
   head) or the number of query heads. Layout l = lb*heads + lh, query block i, row r = l*mq + i:
     full tiles    full_idx[r*capacity + 0 .. full_count[r]-1]
     partial tiles part_idx[r*capacity + 0 .. part_count[r]-1]
   Key block numbers are in [0, nb), strictly increasing within each list, and no tile is in both
   lists; counts are in [0, capacity]; capacity is 0 .. nb. The count arrays hold batch*heads*mq
   int32, the index arrays batch*heads*mq*capacity (entries past a count are not read). All four arrays
   live in `mem`.

   Meaning. Element (q, k) of batch entry b takes part in the softmax iff its tile is in either list,
   k < kv_len(b) (seq_k without per-batch key lengths) and, when causal, k <= q + causal_offset. The
   result does not depend on how kept tiles are split between the lists (the kernels test each tile
   against the mask bounds; the split orders the work as FlashAttention does). The builders below put a
   tile in the partial list exactly when it crosses the causal diagonal they were given or the end of
   seq_k. A query row with nothing to attend to gets O = 0 and LSE = -inf.
   GPU kernels: block_q 64 or 128 and block_k a multiple of 64 run on tensor cores; other block sizes
   run a slower CUDA-core kernel. The CPU backend takes block sizes 1..1024. */
typedef struct bsk_attn_layout {
    int64_t seq_q, seq_k;
    int32_t block_q, block_k;
    int32_t batch, heads;
    int32_t capacity;
    int32_t *full_count;
    int32_t *full_idx;
    int32_t *part_count;
    int32_t *part_idx;
    bsk_memory mem;
} bsk_attn_layout;

/* Query blocks / key blocks of a layout (0 for NULL or non-positive block sizes). */
BSK_API int64_t bsk_attn_layout_mq(const bsk_attn_layout *L);
BSK_API int64_t bsk_attn_layout_nb(const bsk_attn_layout *L);

/* Allocate a layout's arrays in `mem` (host: zeroed; device: counts zeroed, synchronously) for the given
   sizes. The gate (bsk_topk_block_layout) writes into such a layout. Free with bsk_attn_layout_free.
   Errors: INVALID_ARGUMENT (sizes < 1 — seq may be 0 —, capacity outside 0..nb), OVERFLOW,
   OUT_OF_MEMORY, NO_DEVICE. On failure *out is untouched. */
BSK_API bsk_status bsk_attn_layout_alloc(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                         int32_t batch, int32_t heads, int32_t capacity, bsk_memory mem,
                                         bsk_attn_layout *out);
/* Free arrays allocated by bsk_attn_layout_alloc, a builder or bsk_attn_layout_clone; zero the struct.
   NULL and zeroed structs are no-ops. */
BSK_API void bsk_attn_layout_free(bsk_attn_layout *L);

/* Check L's structure (sizes, NULL pointers, alignment, counts and indices as documented above). Device
   arrays are copied to the host (synchronous). Returns BSK_SUCCESS, BSK_ERR_INVALID_BSR for malformed
   lists, or the first other problem's status. */
BSK_API bsk_status bsk_attn_layout_validate(const bsk_attn_layout *L);

/* Host builders of one shared layout (batch = heads = 1, capacity = nb). Tiles with no element allowed
   by the causal rule are left out; tiles crossing the diagonal or the end of seq_k are partial.
   dense:  every tile.
   causal: the tiles on or below the diagonal k <= q + causal_offset (0: top-left aligned; seq_k - seq_q:
           bottom-right aligned, as for a KV cache).
   local:  key blocks within [i' - window_left, i' + window_right] of query block i's diagonal key
           block i' (the key block holding key q + causal_offset for q = i*block_q; i' = i when the block
           sizes are equal), plus `global_blocks` global blocks: every query block keeps key blocks
           0 .. global_blocks-1 and query blocks 0 .. global_blocks-1 keep every key block (BigBird /
           Longformer global tokens). With causal, restricted to the causal tiles.
   from_mask: tile (i, j) of layout l kept where mask[(l*mq + i)*nb + j] != 0 (batch*heads*mq*nb bytes,
           host); sizes as for bsk_attn_layout_alloc.
   Errors: INVALID_ARGUMENT, OVERFLOW, OUT_OF_MEMORY, NULL_POINTER. On failure *out is untouched. */
BSK_API bsk_status bsk_attn_layout_dense(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                         bsk_attn_layout *out);
BSK_API bsk_status bsk_attn_layout_causal(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                          int64_t causal_offset, bsk_attn_layout *out);
BSK_API bsk_status bsk_attn_layout_local(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                         int32_t window_left, int32_t window_right, int32_t global_blocks,
                                         int causal, int64_t causal_offset, bsk_attn_layout *out);
BSK_API bsk_status bsk_attn_layout_from_mask(int64_t seq_q, int64_t seq_k, int32_t block_q, int32_t block_k,
                                             int32_t batch, int32_t heads, const uint8_t *mask, int causal,
                                             int64_t causal_offset, bsk_attn_layout *out);

/* Deep copy of L into newly allocated memory on `mem` (synchronous). Free with bsk_attn_layout_free. */
BSK_API bsk_status bsk_attn_layout_clone(const bsk_attn_layout *L, bsk_memory mem, bsk_attn_layout *out);

/* Number of full and partial tiles over all layouts and query blocks (host or device; device counts are
   copied, synchronously). Either output may be NULL. Validates L's descriptor (not the lists). */
BSK_API bsk_status bsk_attn_layout_tiles(const bsk_attn_layout *L, int64_t *full, int64_t *partial);

/* Attention forward: for each batch entry b, query head h (key/value head h / (heads / kv_heads): GQA
   and MQA, consecutive query heads share a key/value head) and query position q < seq_q,
     O[b,q,h,:] = sum_k softmax_k(scale · Q[b,q,h,:]·K[b,k,hk,:] + mask) · V[b,k,hk,:]
     lse[(b*heads + h)*seq_q + q] = log(sum_k exp(scale · Q·K + mask))   (natural log; -inf when empty)
   over the elements the layout and the mask rules keep (see bsk_attn_layout). Accumulation is fp32;
   O is written in the input dtype.
     q, o: batch x seq_q x heads x dim;  k, v: batch x seq_k x kv_heads x dim; heads % kv_heads == 0.
     dtype: F16 or BF16 (F32 also accepted: CPU and the CUDA-core GPU kernel); the same for q, k, v, o.
     dim: 1..512 (GPU tensor-core kernels: 64 and 128 with 16-byte aligned rows, i.e. data aligned to 16
          bytes and strides multiples of 8, and 256 on the mma.sync kernel where the GPU has the shared memory
          (cc >= 9.0; an A100 for 64-row query blocks); anything else runs the CUDA-core kernel).
     scale: finite; 0 means 1/sqrt(dim).
     kv_lens: NULL, or batch int32 key lengths in [0, seq_k] (host-checked; clamped on the device).
     lse: NULL (not saved) or batch*heads*seq_q float32 (packed), in the same memory as the tensors.
   Errors (nothing is written): NULL_POINTER, INVALID_ARGUMENT (bad dtype/memory enum, negative size or
   stride, O or lse overlapping itself or an input — the layout and kv_lens included —, non-finite scale, kv_lens out of range, |causal_offset| >
   2^31), SHAPE_MISMATCH (tensors disagree with each other or with the layout's seq/batch/heads),
   UNSUPPORTED (dtype mix, dim > 512), MISALIGNED, WRONG_LOCATION, OVERFLOW, INVALID_BSR (host layout
   malformed; a device layout is trusted — check it once with bsk_attn_layout_validate — and kernels clamp
   counts and skip out-of-range indices so malformed lists never cause out-of-bounds access), NO_DEVICE,
   CUDA. Device operands: runs on the context's stream without host synchronisation. bsk_last_kernel
   names the kernel ("cpu-attention", "hopper-attn-wgmma" (sm_90: F16/BF16, dim 64/128, 128 x 128 blocks,
   positive scale), "cuda-attention-mma", "cuda-attention-simt"). The Hopper kernel is a programmatic
   dependent launch: its setup overlaps the end of the kernel before it on the stream (e.g. the device
   bsk_topk_block_layout, which lets it start early), and it touches no memory before that kernel is done. */
typedef struct bsk_attention_params {
    bsk_attn_tensor q, k, v, o;
    float *lse;
    const bsk_attn_layout *layout;
    const int32_t *kv_lens;
    float scale;
    int causal;            /* 0 or 1 */
    int64_t causal_offset; /* key k is visible to query q iff k <= q + causal_offset */
} bsk_attention_params;
BSK_API bsk_status bsk_attention_forward(bsk_context *ctx, const bsk_attention_params *params);

/* Top-k block gate: writes into `out` (allocated by the caller, e.g. bsk_attn_layout_alloc, with
   out->batch = batch, out->heads = heads of q, capacity >= min(top_k, nb), block sizes and seq lengths
   of q and k) the layout keeping, for each (batch, head, query block i), the top_k key blocks j by the
   score  s(i, j) = P_q(mean_q(i)) · P_k(mean_k(j))  where mean_q(i) is the mean of the query block's
   rows of Q (rows < seq_q) for that head, mean_k(j) the mean of the key block's rows of K (rows <
   kv_len(b)) for the head's key/value head, and P_q, P_k the optional projections w_q, w_k (dim x
   proj_dim dense matrices, any float dtype; both or neither). Candidates are key blocks with at least
   one key the mask rules allow (k < kv_len(b); with causal, some k <= q + causal_offset for a q in the
   block). keep_first forces key block 0 and keep_diagonal the block holding key
   min(q_last + causal_offset, kv_len - 1) (q_last: the block's last row) when they are candidates;
   forced blocks count toward top_k (top_k >= keep_first + keep_diagonal). Ties go to the lower block.
   Kept tiles are classified full/partial as the builders do (causal diagonal, kv_len). Pooling and
   projection sums run in a fixed order in fp32/fp64, so the CPU and the GPU gate select the same tiles.
   Device operands: no host synchronisation (workspace from the context); nb <= 8192 on the GPU.
   Pre-pooled input (pooled = 1): q and k already hold one row per block — q is batch x mq x heads x dim,
   k is batch x nb x kv_heads x dim (mq, nb: the query / key blocks of `out`, whose seq_q / seq_k are the
   real sequence lengths) — and row i of q (j of k) is taken as mean_q(i) (mean_k(j)) as it is: the gate
   reads no full-length tensor, so its cost no longer includes reading all of Q and K (the caller computes
   the means where they are cheap, e.g. fused into the projection: the mean of a block's rows commutes with
   a linear projection, mean(X)·W = mean(X·W), before RoPE). Everything else is unchanged: candidates
   (kv_len and causal still decide them: a key block starting at or past kv_len(b) is never a candidate,
   whatever its row holds), forced blocks, ties, classification, projections. The rows are read in their
   dtype and scored exactly as the pooled means of pooled = 0 (fp32 values, fp64 products), so a caller who
   passes the means that pooling computes gets the same layout (F32 rows; pooling sums, per dimension, 8
   partial sums over rows r0+g, r0+g+8, ... in ascending order combined as ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)),
   then divides by the row count, all in fp32; key rows only up to kv_len). kv_lens lie in [0, out->seq_k].
   On the GPU without projections (nb <= 512) the pooled gate is one kernel launch.
   Errors as bsk_attention_forward, plus INVALID_ARGUMENT for top_k < 1 or pooled not 0/1, or out's arrays
   overlapping each other or an input (q, k, kv_lens, w_q, w_k), SHAPE_MISMATCH for pooled q.seq != mq or
   k.seq != nb. */
typedef struct bsk_topk_params {
    bsk_attn_tensor q, k;
    const int32_t *kv_lens;    /* [batch] or NULL */
    int32_t top_k;
    int causal;
    int64_t causal_offset;
    int keep_first;            /* 0 or 1 */
    int keep_diagonal;         /* 0 or 1 */
    const bsk_dense *w_q;      /* NULL or dim x proj_dim */
    const bsk_dense *w_k;      /* NULL or dim x proj_dim */
    int pooled;                /* 0: q, k are the full tensors; 1: one row per block (see above) */
} bsk_topk_params;
BSK_API bsk_status bsk_topk_block_layout(bsk_context *ctx, const bsk_topk_params *params, bsk_attn_layout *out);

/* Attention backward: the gradients of bsk_attention_forward's O with respect to Q, K and V, given
   dO = dLoss/dO, the forward's O and its lse, over the same layout and mask rules (the same layout,
   kv_lens, scale, causal and causal_offset must be passed). With P = exp(scale·Q·Kᵀ + mask − lse) (the
   softmax the forward applied; masked elements and rows with lse = -inf give P = 0) and
   D = rowsum(dO ∘ O):
     dV = Pᵀ·dO,   dS = P ∘ (dO·Vᵀ − D),   dQ = scale · dS·K,   dK = scale · dSᵀ·Q
   per (batch, head); with GQA / MQA the dK and dV of a key/value head sum over the query heads sharing it.
   Every element of dq, dk and dv is written: rows that take part in nothing (empty query rows, keys no
   kept tile covers, keys at or past kv_len) get 0.
     q, o, d_o, dq: batch x seq_q x heads x dim;  k, v, dk, dv: batch x seq_k x kv_heads x dim; any strides
     (as for the forward); one dtype for all eight (F16 / BF16; F32 on the CPU and the CUDA-core kernel).
     lse: required, batch*heads*seq_q float32 as the forward wrote it. o and lse are read, never written.
     d_lse: NULL, or the gradient of the loss with respect to lse (batch*heads*seq_q float32, packed), for
          losses that use lse too: it enters as D = rowsum(dO ∘ O) − d_lse (dlse/dS = P).
     dq, dk, dv must not overlap themselves, each other or any input (the layout's arrays and kv_lens
     included). Inputs may share memory.
   Accumulation is fp32 (the GPU rounds P and dS to the input dtype for the tensor-core products, as
   FlashAttention does). Results are bitwise deterministic on both backends: no floating-point atomics,
   every sum in a fixed order (the CPU result does not depend on the thread count either).
   GPU kernels (no host synchronisation; workspace from the context): a pass for D and the transposed
   layout (per key block, the query blocks that keep it: built on the device), then one kernel over
   (batch, kv head, 64-key chunk) accumulating dK and dV in registers over those query blocks and one
   over (batch, head, 64-row query chunk) recomputing dS for dQ. Tensor cores (mma.sync, sm_80+): F16 /
   BF16, dim 64 or 128, block_q and block_k multiples of 64, 16-byte aligned rows for q, k, v, d_o, dq,
   dk, dv; anything else runs CUDA-core kernels. bsk_last_kernel: "cpu-attention-bwd",
   "cuda-attention-bwd-mma", "cuda-attention-bwd-simt".
   Errors (nothing is written) as bsk_attention_forward, plus NULL_POINTER for a NULL lse and
   SHAPE_MISMATCH for d_o / dq / dk / dv shapes that differ from o / q / k / v. */
typedef struct bsk_attention_bwd_params {
    bsk_attn_tensor q, k, v, o, d_o;   /* inputs                                  */
    const float *lse;                  /* input: the forward's lse                 */
    const float *d_lse;                /* input: dLoss/dlse, or NULL (none)        */
    bsk_attn_tensor dq, dk, dv;        /* outputs                                 */
    const bsk_attn_layout *layout;
    const int32_t *kv_lens;
    float scale;                       /* 0 means 1/sqrt(dim), as in the forward   */
    int causal;
    int64_t causal_offset;
} bsk_attention_bwd_params;
BSK_API bsk_status bsk_attention_backward(bsk_context *ctx, const bsk_attention_bwd_params *params);

#ifdef __cplusplus
}
#endif
#endif /* BSK_H */
