/* cuda_internal.h — what the CUDA backend's files share (C++ for nvcc, but C-style code). */
#ifndef BSK_CUDA_INTERNAL_H
#define BSK_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include "../internal.h"

/* Map a CUDA error to a status (out of memory stays distinct). */
static inline bsk_status bsk_cuda_status(cudaError_t e)
{
    if (e == cudaSuccess) return BSK_SUCCESS;
    if (e == cudaErrorMemoryAllocation) return BSK_ERR_OUT_OF_MEMORY;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) return BSK_ERR_NO_DEVICE;
    return BSK_ERR_CUDA;
}
/* After a launch: the launch's own error (not a sticky earlier one we can't attribute). */
#define BSK_CUDA_LAUNCH_CHECK() bsk_cuda_status(cudaGetLastError())

/* One cached BSR pattern's derived data (src/cuda/pattern_cache.cu): the transpose index, and up to
   BSK_DERIVED_SLOTS launcher buffers (a kernel family's work lists for this pattern, e.g. the small-block SpMM's
   row-group unions, the b64 / b128 SpMM's sorted units for op N and for op T), each built when first asked for.
   Keyed by the pattern's device pointers and sizes: a pattern rewritten in place, or freed and re-allocated at
   the same addresses with the same sizes, is not noticed. */
#define BSK_TINDEX_SLOTS 8
#define BSK_DERIVED_SLOTS 3
#define BSK_DERIVED_KEY 4
struct bsk_derived {
    void *mem;                     /* the launcher's buffer (its layout), or NULL                         */
    size_t bytes;
    int64_t key[BSK_DERIVED_KEY];  /* the launcher's key: its kind and every input of its prep kernels
                                      other than the pattern                                               */
    int built;                     /* filled: its prep kernels are enqueued                                */
    uint64_t used;                 /* LRU stamp inside the entry                                          */
};
struct bsk_tindex_entry {
    const void *row_ptr, *col_idx; /* key */
    int64_t mb, nb, nnzb;          /* key */
    int32_t *mem;                  /* transpose index: t_ptr[nb+1] | cursor[nb+1] | t_row[nnzb] | t_blk[nnzb], or NULL */
    struct bsk_derived d[BSK_DERIVED_SLOTS];
    cudaEvent_t ev;                /* recorded after the build and after each use: orders reuse/free across streams */
    uint64_t used;                 /* LRU stamp; 0 = empty slot */
};

/* Per-context CUDA state: device facts read once, a growable workspace. */
struct bsk_cuda_state {
    int device;
    int cc_major, cc_minor;
    int sms;
    int dram_gbs;         /* peak DRAM bandwidth in GB/s from the memory clock and bus width (0: not reported) */
    size_t smem_optin;    /* max dynamic shared memory per block */
    void *workspace;
    size_t workspace_bytes;
    unsigned *queues;     /* work queues kept at zero between launches (bsk_cuda_queue, BSK_QUEUE_*)           */
    struct bsk_tindex_entry tindex[BSK_TINDEX_SLOTS]; /* transpose-index LRU (pattern_cache.cu) */
    uint64_t tindex_clock;
    /* L2-partition map (l2_partition.cu): 0 not started, 1 running, 2 valid (l2p_dev holds it), 3 none */
    int l2p_state;
    unsigned char *l2p_dev, *l2p_host;
    cudaEvent_t l2p_ev;
};

/* The context's CUDA state, created on first use. NULL only on allocation failure. */
struct bsk_cuda_state *bsk_cuda_state_get(bsk_context *ctx);
/* Grow the context's workspace to at least `bytes` (stream-ordered free of the old one). */
bsk_status bsk_cuda_workspace(bsk_context *ctx, size_t bytes, void **ptr);
/* Work queues kept at zero between launches by the kernels themselves (each one's last CTA zeroes its words), so that
   no memset sits between a kernel and the one before it, and an earlier kernel's writes to the workspace cannot reach
   them: one 256-byte block per context, allocated and zeroed (stream-ordered) at the first call; each user has its own
   eight words (slot: BSK_QUEUE_*). Not created inside a stream capture (the graph would own the memory): the call is then
   BSK_ERR_UNSUPPORTED and the caller takes another path. */
enum { BSK_QUEUE_ATTN = 0, BSK_QUEUE_SPMM_DIRECT = 8, BSK_QUEUE_SMALL_DIRECT = 16 };
bsk_status bsk_cuda_queue(bsk_context *ctx, int slot, unsigned **ptr);

/* ---- which SMs share an L2 partition (src/cuda/l2_partition.cu): a device table of 1025 bytes (smid ->
   0 / 1, byte 1024 = 1) once known, else NULL. The first call outside a stream capture starts the discovery
   on ctx->stream (two small kernels; its one-time buffers come from cudaMalloc / cudaMallocHost, which may
   synchronise the device once) and returns NULL; later calls poll its event (never wait) and return the table
   once it is in and clear. BSK_L2_PARTITIONS=0 turns it off. Any table gives correct results. */
const unsigned char *bsk_cuda_l2_partitions(bsk_context *ctx);
void bsk_cuda_l2_partitions_release(struct bsk_cuda_state *st);
/* Its test / probe hook, bsk__cuda_l2_partition_probe, is declared in hopper/tune.h. */

/* ---- transpose index of a device BSR pattern (src/cuda/pattern_cache.cu), for Aᵀ·B: for block column j,
   its blocks t_ptr[j] .. t_ptr[j+1]-1 in block-row order, each with its block row t_row[] and its index into
   A's values t_blk[]. Built on ctx->stream by small kernels (no host synchronisation), cached per context.
   Malformed metadata gives an index whose every entry is still in range (t_row in [0, mb), t_blk in
   [0, nnzb), t_ptr within [0, nnzb]). nnzb == 0 gives all pointers NULL (every column empty). Inside a stream
   capture (or when that cannot be told) the cache is not touched: the call gets an index of its own, built in the
   graph in memory the graph allocates and frees (a graph never holds a cache entry's memory, nor waits on an event
   recorded outside it). */
typedef struct bsk_tindex {
    const int32_t *t_ptr, *t_row, *t_blk;
    int slot;       /* the cache entry, or -1 (nnzb == 0, or an index of this call's own) */
    int32_t *owned; /* inside a stream capture: this call's own index, allocated and (by bsk_cuda_tindex_done) freed
                       in the graph; NULL otherwise */
} bsk_tindex;
bsk_status bsk_cuda_tindex_get(bsk_context *ctx, const bsk_bsr *A, bsk_tindex *ti);
/* After the launches that read ti (also on their error paths): records their end so a later eviction or another
   stream waits for them, or frees the call's own index after them (stream-ordered). */
void bsk_cuda_tindex_done(bsk_context *ctx, const bsk_tindex *ti);
/* Frees every cached index (called by bsk_cuda_release). */
void bsk_cuda_pattern_cache_release(struct bsk_cuda_state *st);
/* With the pattern cache on (ctx->pattern_cache): a launcher's cached buffer of at least `bytes` for A's pattern
   under `key` (BSK_DERIVED_KEY integers: the launcher's kind first, then whatever else its lists depend on).
   *built = 1: filled by an earlier call, this stream ordered after that call; *built = 0: one to fill (a new
   buffer, or the same key's buffer grown). After its launches the caller calls bsk_cuda_derived_done(ctx,
   *slot, filled): filled = 1 once the kernels that fill it are enqueued (until then a later call refills it).
   Inside a stream capture *buf stays NULL (the caller uses its workspace and captures its prep kernels: a graph
   never holds a cache buffer that a later eviction could free). Not called with the cache off (the lists then
   live in the workspace, rebuilt every call). An entry keeps BSK_DERIVED_SLOTS keys (least recently used out):
   a training step's op N and op T lists of one pattern both stay. */
bsk_status bsk_cuda_derived_get(bsk_context *ctx, const bsk_bsr *A, const int64_t key[BSK_DERIVED_KEY], size_t bytes,
                                void **buf, int *built, int *slot);
void bsk_cuda_derived_done(bsk_context *ctx, int slot, int filled);
/* Exclusive prefix sum of counts[0..n) into ptr[0..n] (ptr[n] = the total) on `stream` by the one-CTA scan
   the transpose index uses; counts[c] becomes ptr[c] too. Also builds the attention backward's transposed
   layout (src/cuda/attention/attention_bwd.cu). */
bsk_status bsk_cuda_exclusive_scan_i32(int32_t *counts, int32_t *ptr, int64_t n, cudaStream_t stream);

/* Test hooks (tests/test_gpu.c): run one kernel family directly, 0 = Hopper, 1 = portable tensor-core,
   2 = SIMT, on arguments that already passed bsk_spmm's / bsk_sddmm's checks. */
extern "C" bsk_status bsk__cuda_spmm_family(bsk_context *ctx, int family, bsk_op op, float alpha, const bsk_bsr *A,
                                            const bsk_dense *B, float beta, bsk_dense *C);
extern "C" bsk_status bsk__cuda_sddmm_family(bsk_context *ctx, int family, float alpha, const bsk_dense *X,
                                             const bsk_dense *Y, float beta, bsk_bsr *out);

/* ---- kernels. Each returns BSK_ERR_UNSUPPORTED when the case is not its own (the dispatcher then tries
   the next), BSK_SUCCESS after a successful launch, or an error. Arguments are validated. */

/* Hopper TMA + wgmma SpMM (src/cuda/hopper/). */
bsk_status bsk_hopper_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                           float beta, bsk_dense *C);
/* Hopper SpMM for small square blocks (BS = 32 / 16, op N), swapped operands Cᵀ = Bᵀ·Aᵀ over row groups
   (src/cuda/hopper/spmm_small_hopper.cu). */
bsk_status bsk_hopper_spmm_small(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                 float beta, bsk_dense *C);
/* Portable tensor-core (mma.sync) SpMM, sm_80+ (src/cuda/portable/). */
bsk_status bsk_portable_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                             float beta, bsk_dense *C);
/* Simple CUDA-core kernels for every remaining case (any dtype, block shape, op) (src/cuda/portable/). */
bsk_status bsk_simt_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                         float beta, bsk_dense *C);
bsk_status bsk_hopper_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                            bsk_bsr *out);
/* Hopper TMA + wgmma block-sparse attention forward (src/cuda/hopper/attention_hopper.cu); arguments validated
   by bsk_attention_forward. Sets ctx->last_kernel ("hopper-attn-wgmma") when it launches. */
struct bsk__attn_dims;
bsk_status bsk_hopper_attention_forward(bsk_context *ctx, const bsk_attention_params *p, const struct bsk__attn_dims *d);
bsk_status bsk_portable_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                              bsk_bsr *out);
bsk_status bsk_simt_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                          bsk_bsr *out);

#endif
