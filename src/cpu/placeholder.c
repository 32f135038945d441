/* placeholder.c — until the CPU kernels land. */
#include "../internal.h"
bsk_status bsk_cpu_spmm(bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta, bsk_dense *C)
{ (void)op; (void)alpha; (void)A; (void)B; (void)beta; (void)C; return BSK_ERR_UNSUPPORTED; }
bsk_status bsk_cpu_sddmm(float alpha, const bsk_dense *X, const bsk_dense *Y, float beta, bsk_bsr *out)
{ (void)alpha; (void)X; (void)Y; (void)beta; (void)out; return BSK_ERR_UNSUPPORTED; }
