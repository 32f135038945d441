/* placeholder.cu — until the portable kernels land: declines every case. */
#include "../cuda_internal.h"
bsk_status bsk_portable_spmm(bsk_context *, bsk_op, float, const bsk_bsr *, const bsk_dense *, float, bsk_dense *)
{ return BSK_ERR_UNSUPPORTED; }
bsk_status bsk_simt_spmm(bsk_context *, bsk_op, float, const bsk_bsr *, const bsk_dense *, float, bsk_dense *)
{ return BSK_ERR_UNSUPPORTED; }
bsk_status bsk_portable_sddmm(bsk_context *, float, const bsk_dense *, const bsk_dense *, float, bsk_bsr *)
{ return BSK_ERR_UNSUPPORTED; }
bsk_status bsk_simt_sddmm(bsk_context *, float, const bsk_dense *, const bsk_dense *, float, bsk_bsr *)
{ return BSK_ERR_UNSUPPORTED; }
