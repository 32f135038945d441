/* scan.cuh — the prefix sums the prep kernels share: a warp's inclusive scan and a CTA's exclusive scan (one value
   per thread), by warp shuffles. Plain CUDA, any architecture (pattern_cache.cu builds for the portable targets, the
   Hopper prep kernels for sm_90a); templated on the value type only (int, long long, unsigned: anything
   __shfl_up_sync takes and + adds). Users: spmm_prep_kernel (hopper/spmm_kernel.cuh), small_order_kernel and the
   compaction of small_union_kernel (warp scan only; hopper/spmm_small_kernel.cuh), sddmm_prep_kernel (64-bit;
   hopper/sddmm_kernel.cuh), tindex_scan (pattern_cache.cu). */
#ifndef BSK_CUDA_SCAN_CUH
#define BSK_CUDA_SCAN_CUH

/* Inclusive prefix sum over the 32 lanes of the warp (lane order). All 32 lanes call it, converged. */
template <typename T> __device__ __forceinline__ T warp_incl_scan(T x)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

/* Exclusive prefix sum over the CTA (one value per thread, in threadIdx.x order); *total gets the sum of all of
   them, in every thread. The CTA is 1-D, blockDim.x a multiple of 32 and at most 1024. Every thread of the CTA
   calls it (it holds barriers). warp_tot: shared scratch of 33 entries (the warp totals' exclusive prefix, then
   the total in [32]); it stays as the call leaves it until the next call.
   Barriers (__syncthreads), three: on entry, before the scratch is written (a previous call's — or the caller's —
   reads of warp_tot are done, so calls may follow each other with no barrier between them); after the warp
   totals are written; after warp 0 scanned them. So on return every thread's shared-memory writes from before
   the call are visible to the whole CTA. */
template <typename T> __device__ __forceinline__ T block_excl_scan(T v, T *warp_tot, T *total)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const T x = warp_incl_scan(v);
    __syncthreads(); /* warp_tot free from an earlier call */
    if (lane == 31) warp_tot[w] = x;
    __syncthreads();
    if (w == 0) {
        const T t = lane < nw ? warp_tot[lane] : T(0);
        const T s = warp_incl_scan(t);
        warp_tot[lane] = s - t;
        if (lane == 31) warp_tot[32] = s;
    }
    __syncthreads();
    *total = warp_tot[32];
    return warp_tot[w] + x - v;
}

#endif
