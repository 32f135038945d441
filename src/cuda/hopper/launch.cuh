/* launch.cuh — how the Hopper launchers start their main kernels (host side), in one place:
   raise the kernel's dynamic shared-memory limit (a kernel needing more than the device allows is
   UNSUPPORTED, so the caller falls back), and launch with programmatic dependent launch when asked (the
   kernel may start while the prep kernel before it on the stream still runs; it calls griddepcontrol.wait
   before reading the prep's output), optionally as 1-D clusters. A failed call's error is cleared so it does
   not stick to the context's next CUDA call. */
#ifndef BSK_HOPPER_LAUNCH_CUH
#define BSK_HOPPER_LAUNCH_CUH

#include <utility>
#include "../cuda_internal.h"

template <typename... KArgs>
static inline bsk_status bsk_hopper_allow_smem(void (*kernel)(KArgs...), int smem)
{
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return BSK_ERR_UNSUPPORTED;
    }
    return BSK_SUCCESS;
}

/* grid CTAs of `threads` threads with `smem` bytes of dynamic shared memory on `stream`; pdl: allow
   programmatic dependent launch; cluster > 1: clusters of that many CTAs along x. */
template <typename... KArgs, typename... Args>
static inline bsk_status bsk_hopper_launch(void (*kernel)(KArgs...), int grid, int threads, int smem,
                                           cudaStream_t stream, int pdl, int cluster, Args &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    unsigned na = 0;
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = (size_t)smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    if (cluster > 1) {
        attr[na].id = cudaLaunchAttributeClusterDimension;
        attr[na].val.clusterDim.x = (unsigned)cluster;
        attr[na].val.clusterDim.y = 1;
        attr[na].val.clusterDim.z = 1;
        na++;
    }
    if (pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
    }
    cfg.numAttrs = na;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return bsk_cuda_status(e);
    }
    return BSK_SUCCESS;
}

#endif
