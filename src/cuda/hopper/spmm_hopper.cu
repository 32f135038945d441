/* spmm_hopper.cu — placeholder until the Hopper kernel lands: declines every case. */
#include "../cuda_internal.h"
bsk_status bsk_hopper_spmm(bsk_context *, bsk_op, float, const bsk_bsr *, const bsk_dense *, float, bsk_dense *)
{ return BSK_ERR_UNSUPPORTED; }
bsk_status bsk_hopper_sddmm(bsk_context *, float, const bsk_dense *, const bsk_dense *, float, bsk_bsr *)
{ return BSK_ERR_UNSUPPORTED; }
