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

/* Per-context CUDA state: device facts read once, a growable workspace. */
struct bsk_cuda_state {
    int device;
    int cc_major, cc_minor;
    int sms;
    size_t smem_optin;    /* max dynamic shared memory per block */
    void *workspace;
    size_t workspace_bytes;
};

/* The context's CUDA state, created on first use. NULL only on allocation failure. */
struct bsk_cuda_state *bsk_cuda_state_get(bsk_context *ctx);
/* Grow the context's workspace to at least `bytes` (stream-ordered free of the old one). */
bsk_status bsk_cuda_workspace(bsk_context *ctx, size_t bytes, void **ptr);

/* ---- kernels. Each returns BSK_ERR_UNSUPPORTED when the case is not its own (the dispatcher then tries
   the next), BSK_SUCCESS after a successful launch, or an error. Arguments are validated. */

/* Hopper TMA + wgmma SpMM (src/cuda/hopper/). */
bsk_status bsk_hopper_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                           float beta, bsk_dense *C);
/* Portable tensor-core (mma.sync) SpMM, sm_80+ (src/cuda/portable/). */
bsk_status bsk_portable_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                             float beta, bsk_dense *C);
/* Simple CUDA-core kernels for every remaining case (any dtype, block shape, op) (src/cuda/portable/). */
bsk_status bsk_simt_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                         float beta, bsk_dense *C);
bsk_status bsk_hopper_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                            bsk_bsr *out);
bsk_status bsk_portable_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                              bsk_bsr *out);
bsk_status bsk_simt_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                          bsk_bsr *out);

#endif
