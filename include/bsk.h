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

/* Name of the kernel the last bsk_spmm / bsk_sddmm call on this context ran ("cpu", "cuda-simt",
   "cuda-mma", "hopper-wgmma", ...). Static storage; never NULL. */
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
   Returns BSK_SUCCESS or the first problem's status. */
BSK_API bsk_status bsk_bsr_validate(const bsk_bsr *A);

/* The builders below allocate the result's arrays in host memory; free them with bsk_bsr_free().
   On failure *out is untouched and nothing is allocated. */

/* Keep each block_rows x block_cols block of `dense` (host) whose Frobenius norm is > threshold
   (threshold 0: keep every block with a non-zero entry). Values keep the dense dtype. */
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

/* Write A (host) into `dense` (host, same dtype, rows x cols). Entries outside A's blocks become 0. */
BSK_API bsk_status bsk_bsr_to_dense(const bsk_bsr *A, bsk_dense *dense);

/* out = Aᵀ (host): blocks moved to their transposed place and each block transposed. Allocates. */
BSK_API bsk_status bsk_bsr_transpose(const bsk_bsr *A, bsk_bsr *out);

/* Metadata-only transpose index of A (host): for each block column j, the blocks of A in it in block-row
   order: t_ptr[nb+1] (like row_ptr), t_row[nnzb] (their block rows), t_blk[nnzb] (their index into A's
   values). Caller-allocated arrays. Used for Aᵀ·B without moving values. */
BSK_API bsk_status bsk_bsr_transpose_index(const bsk_bsr *A, int32_t *t_ptr, int32_t *t_row,
                                           int32_t *t_blk);

/* Copy A into newly allocated memory on `mem` (host or device): out is a deep copy that
   bsk_bsr_free() releases. Synchronous. */
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
   beta = 0 means C is not read (NaN in C does not propagate). C must not alias A or B.
   Host operands: CPU backend (threaded). Device operands: CUDA backend on the context's stream, no host
   synchronisation; on the device only O(1) checks run on A's arrays (call bsk_bsr_validate once per
   pattern), and the kernels never read or write out of bounds even for malformed indices. */
BSK_API bsk_status bsk_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                            float beta, bsk_dense *C);

/* SDDMM:  out.values = alpha · (X · Yᵀ) sampled on out's block pattern + beta · out.values
   X: dense M x D, Y: dense K x D (same dtype), out: BSR M x K whose row_ptr/col_idx give the pattern and
   whose values (dtype F32, or the dtype of X) are updated in place. beta = 0: old values not read.
   This is dA = dY · Xᵀ of a block-sparse layer Y = A·X (pass X = dY, Y = Xᵀ's rows = X of the layer). */
BSK_API bsk_status bsk_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                             bsk_bsr *out);

#ifdef __cplusplus
}
#endif
#endif /* BSK_H */
