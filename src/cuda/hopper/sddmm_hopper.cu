/* sddmm_hopper.cu — the Hopper (sm_90a) SDDMM launcher (not written yet: the portable path runs). */
#include "../cuda_internal.h"

bsk_status bsk_hopper_sddmm(bsk_context *, float, const bsk_dense *, const bsk_dense *, float, bsk_bsr *)
{
    return BSK_ERR_UNSUPPORTED;
}
