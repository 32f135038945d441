/* spmm_mma_t.cu — the op-T (Aᵀ·B) instances of the portable tensor-core SpMM kernel (spmm_mma.cuh),
   in their own translation unit so they compile beside the op-N ones. */
#include "spmm_mma.cuh"

bsk_status bsk__portable_spmm_launch_t(bsk_context *ctx, const spmm_args &a, int BM, bsk_dtype dt)
{
    return dt == BSK_F16 ? spmm_mma_launch<__half, true>(ctx, a, BM) : spmm_mma_launch<__nv_bfloat16, true>(ctx, a, BM);
}
