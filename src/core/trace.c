/* trace.c — the Nsight hooks: every public operation that runs work (SpMM, SDDMM, attention forward and backward,
   the top-k gate, the autotuner) is an NVTX range in the "bsk" domain,
   named after the function, with a mark inside it naming the kernel that ran ("hopper-wgmma-b128"; the status
   string when the call failed), so
   Nsight Systems shows which call launched which kernels and what the dispatcher chose. `make nsys` records one.
   NVTX v3 is header-only (CUDA toolkit): without a tool attached each call is one indirect call to a no-op, and
   nothing is linked beyond libdl. Built without CUDA (no toolkit headers) the hooks are empty. */
#include "../internal.h"

#ifdef BSK_WITH_CUDA
#include <pthread.h>
#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static void domain_create(void) { domain = nvtxDomainCreateA("bsk"); }

static nvtxEventAttributes_t attr_of(const char *msg)
{
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return a;
}

void bsk__trace_begin(bsk_context *ctx, const char *op)
{
    if (ctx) ctx->last_kernel = "none"; /* what a call that runs nothing (an error, empty shapes) reports */
    pthread_once(&domain_once, domain_create);
    nvtxEventAttributes_t a = attr_of(op);
    nvtxDomainRangePushEx(domain, &a);
}

bsk_status bsk__trace_end(const bsk_context *ctx, bsk_status s)
{
    /* the range names the operation; the mark is the kernel's static name (or the status): nothing formatted */
    nvtxEventAttributes_t a = attr_of(ctx && s == BSK_SUCCESS ? bsk_last_kernel(ctx) : bsk_status_string(s));
    nvtxDomainMarkEx(domain, &a);
    nvtxDomainRangePop(domain);
    return s;
}
#else
void bsk__trace_begin(bsk_context *ctx, const char *op)
{
    if (ctx) ctx->last_kernel = "none";
    (void)op;
}
bsk_status bsk__trace_end(const bsk_context *ctx, bsk_status s)
{
    (void)ctx;
    return s;
}
#endif
