/* stub.c — the CUDA backend's entry points for a build without the CUDA toolkit (make CUDA=0):
   no device, every pointer is host memory. */
#include <string.h>
#include "../internal.h"

int bsk_cuda_device_count(void) { return 0; }
bsk_status bsk_cuda_pointer_mem(const void *p, bsk_memory *mem) { (void)p; *mem = BSK_MEM_HOST; return BSK_SUCCESS; }
bsk_status bsk_cuda_malloc(void **p, size_t bytes) { (void)p; (void)bytes; return BSK_ERR_NO_DEVICE; }
void bsk_cuda_free(void *p) { (void)p; }
bsk_status bsk_cuda_memcpy(void *dst, const void *src, size_t bytes, int dd, int sd)
{
    if (dd || sd) return BSK_ERR_NO_DEVICE;
    memcpy(dst, src, bytes);
    return BSK_SUCCESS;
}
bsk_status bsk_cuda_synchronize(bsk_context *ctx) { (void)ctx; return BSK_SUCCESS; }
bsk_status bsk_cuda_stream_switch(bsk_context *ctx, void *next) { (void)ctx; (void)next; return BSK_SUCCESS; }
void bsk_cuda_release(bsk_context *ctx) { (void)ctx; }
void bsk_cuda_forget_patterns(bsk_context *ctx) { (void)ctx; }
const char *bsk_cuda_arch_list(void) { return "none (built without CUDA)"; }
bsk_status bsk_cuda_device_query(bsk_device_info *info)
{
    memset(info, 0, sizeof *info);
    strcpy(info->arch_list, bsk_cuda_arch_list());
    return BSK_ERR_NO_DEVICE;
}
bsk_status bsk_cuda_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                         float beta, bsk_dense *C)
{
    (void)ctx; (void)op; (void)alpha; (void)A; (void)B; (void)beta; (void)C;
    return BSK_ERR_NO_DEVICE;
}
bsk_status bsk_cuda_tune_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                              float beta, bsk_dense *C, int iters, int *best, bsk_tune_result *result)
{
    (void)ctx; (void)op; (void)alpha; (void)A; (void)B; (void)beta; (void)C; (void)iters; (void)best; (void)result;
    return BSK_ERR_NO_DEVICE;
}
bsk_status bsk_cuda_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                          bsk_bsr *out)
{
    (void)ctx; (void)alpha; (void)X; (void)Y; (void)beta; (void)out;
    return BSK_ERR_NO_DEVICE;
}
