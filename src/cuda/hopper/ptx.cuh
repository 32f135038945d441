/* ptx.cuh — one small inline wrapper per Hopper (sm_90a) PTX instruction the SpMM kernel uses.
   Everything here is a thin, literal mapping onto the PTX ISA (section numbers: PTX ISA 8.x):
   mbarrier (9.7.13.15), cp.async.bulk.tensor (9.7.9.25), wgmma (9.7.15), setmaxnreg (9.7.17.1),
   griddepcontrol (9.7.12.15). No CUTLASS/CuTe: the kernel (spmm_kernel.cuh) composes these. */
#ifndef BSK_HOPPER_PTX_CUH
#define BSK_HOPPER_PTX_CUH

#include <stdint.h>

namespace bsk_hopper {

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* ---------------------------------------------------------------- mbarrier */

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
/* Make the initialised barriers visible to the async proxy (TMA) and to the other threads. */
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* One arrival that also announces `bytes` of asynchronous transactions (TMA) for this phase. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* Plain arrival (release semantics at CTA scope: earlier shared-memory writes become visible to waiters). */
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Spin until the phase with the given parity has completed (acquire semantics). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

/* A per-stage record a producer lane wrote before arriving on the stage's full barrier, read by a consumer
   warp after its wait: lane 0 loads it and shuffles it to the other lanes. Only the lane that later arrives on
   the empty barrier touches the record, so the read is ordered before the producer's next write of the slot by
   that lane's own release (racecheck cannot follow an ordering that goes through __syncwarp to another
   lane's arrival, and reported such reads as hazards). */
__device__ __forceinline__ int4 stage_record_read(const int4 *rec, int lane)
{
    int4 v = make_int4(0, 0, 0, 0);
    if (lane == 0) v = *rec; /* after the barrier wait (a "memory" clobber): not hoisted */
    v.x = __shfl_sync(0xffffffffu, v.x, 0);
    v.y = __shfl_sync(0xffffffffu, v.y, 0);
    v.z = __shfl_sync(0xffffffffu, v.z, 0);
    v.w = __shfl_sync(0xffffffffu, v.w, 0);
    return v;
}
/* The same for one word of such a record (the flags inside an item, a key start, a list entry). */
__device__ __forceinline__ int stage_word_read(const int *p, int lane)
{
    int w = 0;
    if (lane == 0) w = *p;
    return __shfl_sync(0xffffffffu, w, 0);
}

/* ---------------------------------------------------------------- clusters (distributed shared memory) */

/* the SM this thread runs on (%smid; 0 .. %nsmid - 1, not always dense) */
__device__ __forceinline__ uint32_t sm_id()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_ctarank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* The shared::cluster address of the same offset in CTA `rank` of the cluster. */
__device__ __forceinline__ uint32_t mapa(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
/* All threads of all CTAs of the cluster (release / acquire at cluster scope). */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* mbarrier operations on a barrier of another CTA of the cluster (address from mapa). */
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* The same arrival with the default release at CTA scope: what a consumer that has only *read* a slot (its
   wgmmas waited for) needs to tell a peer's producer that the slot may be refilled. The cluster-scope release
   above compiles to MEMBAR.ALL.GPU + ERRBAR before the arrive (hundreds of cycles per stage: session 21 found it
   to be the 2-CTA cluster kernel's whole loss); this one is a bare remote SYNCS arrive, as CUTLASS's
   ClusterBarrier::arrive(cta_id) issues it. Never use it to publish data written to shared or global memory. */
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx_cluster(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
/* Wait on a local barrier whose arrivals may come from other CTAs of the cluster. */
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAITC_%=:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAITC_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void st_cluster_u32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_cluster_v4(uint32_t addr, int4 v)
{
    asm volatile("st.shared::cluster.v4.s32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
}

/* ---------------------------------------------------------------- TMA (bulk tensor copies) */

__device__ __forceinline__ void tma_prefetch_desc(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)tmap) : "memory");
}
/* 2-D box at element coordinates (c0 innermost, c1) into shared memory; completes on `bar`. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1,
                                            int32_t c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* The same loads delivered to every CTA of the cluster in `mask`, at the same shared-memory offset, each
   completing on its own barrier at the same offset. */
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1,
                                               uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
                 : "memory");
}
__device__ __forceinline__ void tma_load_3d_mc(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1,
                                               int32_t c2, uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(mask)
                 : "memory");
}
/* L2 eviction-priority policies for the .L2::cache_hint forms below (the whole access gets the priority). */
__device__ __forceinline__ uint64_t l2_policy_evict_last()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}
__device__ __forceinline__ void tma_load_3d_hint(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1,
                                                 int32_t c2, uint64_t pol)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "l"(pol)
                 : "memory");
}
/* Bring a box into L2 only (no shared memory, no barrier; fire and forget). Used to take the DRAM latency
   of the blocks a few stages ahead off the ring's critical path. Out-of-range parts are ignored. */
__device__ __forceinline__ void tma_prefetch_2d(const void *tmap, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"((uint64_t)tmap), "r"(c0),
                 "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_prefetch_3d(const void *tmap, int32_t c0, int32_t c1, int32_t c2)
{
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"((uint64_t)tmap),
                 "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
/* 2-D box from shared memory to global (elements outside the tensor are not written); bulk-group completion. */
__device__ __forceinline__ void tma_store_2d(const void *tmap, uint32_t src, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"((uint64_t)tmap),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
/* The same, issued only where `on` is non-zero, as a predicated instruction: no branch in the program (a branch
   around the store, with accumulators live, made ptxas serialise a kernel's wgmmas: C7520, session 16). */
__device__ __forceinline__ void tma_store_2d_if(const void *tmap, uint32_t src, int32_t c0, int32_t c1, int on)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 " @p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n}\n" ::"l"((uint64_t)tmap),
                 "r"(src), "r"(c0), "r"(c1), "r"(on)
                 : "memory");
}
__device__ __forceinline__ void tma_store_2d_hint(const void *tmap, uint32_t src, int32_t c0, int32_t c1, uint64_t pol)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3}], [%1], %4;\n" ::"l"(
                     (uint64_t)tmap),
                 "r"(src), "r"(c0), "r"(c1), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* Wait until at most N of the committed bulk stores are still reading shared memory (the buffers of the older
   ones may be reused; N = 0: all of them). */
template <int N> __device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* Wait until the committed bulk stores are complete. */
__device__ __forceinline__ void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/* Ordinary shared-memory stores made visible to the async proxy (TMA store / wgmma reads). */
/* 16 zero bytes to shared memory (16-byte aligned address). */
__device__ __forceinline__ void st_shared_zero16(uint32_t addr)
{
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* One 32-bit word to / from shared memory by its shared-window address, never cached in a register or reordered
   across other memory operations (a word handed between warps at a named barrier). */
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v)
{
    asm volatile("st.volatile.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.volatile.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
/* Named barrier over `count` threads (ids 1..15; 0 is __syncthreads). */
__device__ __forceinline__ void named_bar_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/* The same without .aligned (barrier.sync): a warp's threads may arrive at different times or from different
   code, so a warp that may be diverged (lane-0 / per-lane branches just before) can use it. */
__device__ __forceinline__ void named_bar_sync_div(int id, int count)
{
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* ---------------------------------------------------------------- wgmma */

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keep the compiler from moving accumulator reads/writes across wgmma boundaries. */
__device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Shared-memory matrix descriptor (PTX "matrix descriptor"): start address>>4 in bits 0-13, leading-dimension
   byte offset>>4 in 16-29, stride-dimension byte offset>>4 in 32-45, swizzle mode in 62-63 (1 = 128-byte).
   Tiles are 1024-byte aligned, so the base-offset field (49-51) stays 0. */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes)
{
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}

/* The wgmma.mma_async wrappers: A and B from shared memory, fp32 accumulators in registers (always
   scale_d = 0 computes D = A*B, 1 accumulates D += A*B). Template flags TA / TB are the instruction's
   transpose immediates: TA = 0 A K-major, 1 A M-major (e.g. the blocks of Aᵀ as stored); TB = 1 B N-major
   (a row-major K x N operand), 0 B K-major (the rows of Y in X·Yᵀ). Defaults: the forward SpMM's
   A K-major, B N-major. Generated: one operand per accumulator register. */
/* D(64x256, f32) += A(64x16, smem, K-major) * B(16x256, smem, N-major: trans-b = 1). */
template <int TA = 0, int TB = 1>
__device__ __forceinline__ void wgmma_m64n256k16_f16(float *d, uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* D(64x256, f32) += A(64x16, smem, K-major) * B(16x256, smem, N-major: trans-b = 1). */
template <int TA = 0, int TB = 1>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float *d, uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* D(64x128, f32) += A(64x16, smem, K-major) * B(16x128, smem, N-major: trans-b = 1). */
template <int TA = 0, int TB = 1>
__device__ __forceinline__ void wgmma_m64n128k16_f16(float *d, uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* D(64x128, f32) += A(64x16, smem, K-major) * B(16x128, smem, N-major: trans-b = 1). */
template <int TA = 0, int TB = 1>
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float *d, uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

/* ---------------------------------------------------------------- attention: 4-D TMA, bar.arrive, wgmma with A in registers */

/* 4-D box (c0 innermost) into shared memory, completing on `bar`; and the store direction (bulk-group completion;
   elements outside the tensor are not written). Attention: (dim, seq, head, batch) views of strided tensors. */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void *tmap, uint32_t bar, int32_t c0, int32_t c1,
                                            int32_t c2, int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tma_store_4d(const void *tmap, uint32_t src, int32_t c0, int32_t c1, int32_t c2,
                                             int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                     (uint64_t)tmap),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
/* Announce `bytes` of asynchronous transactions for the current phase without arriving (the arrival comes
   later, e.g. after the data that describes the load has been written). */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* Named-barrier arrival without waiting (producer side of a bar.sync by other threads; ids 1..15). */
__device__ __forceinline__ void named_bar_arrive(int id, int count)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/* As reg_fence, for 32-bit registers that an in-flight wgmma reads (A operands from registers). */
__device__ __forceinline__ void reg_fence_u32(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* D(64x128, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x128, smem;
   TB = 1 N-major, 0 K-major). The A registers are read-write operands so that the compiler keeps them
   (and their registers) alive until the caller's wgmma_wait + reg_fence_u32: the hardware reads them late. */
template <int TB = 1>
__device__ __forceinline__ void wgmma_m64n128k16_rs_f16(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2, uint32_t &a3,
                                                  uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "n"(TB));
}

/* D(64x128, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x128, smem;
   TB = 1 N-major, 0 K-major). The A registers are read-write operands so that the compiler keeps them
   (and their registers) alive until the caller's wgmma_wait + reg_fence_u32: the hardware reads them late. */
template <int TB = 1>
__device__ __forceinline__ void wgmma_m64n128k16_rs_bf16(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2, uint32_t &a3,
                                                  uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "n"(TB));
}

/* D(64x64, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x64, smem;
   TB = 1 N-major, 0 K-major). The A registers are read-write operands so that the compiler keeps them
   (and their registers) alive until the caller's wgmma_wait + reg_fence_u32: the hardware reads them late. */
template <int TB = 1>
__device__ __forceinline__ void wgmma_m64n64k16_rs_f16(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2, uint32_t &a3,
                                                  uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "n"(TB));
}

/* D(64x64, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x64, smem;
   TB = 1 N-major, 0 K-major). The A registers are read-write operands so that the compiler keeps them
   (and their registers) alive until the caller's wgmma_wait + reg_fence_u32: the hardware reads them late. */
template <int TB = 1>
__device__ __forceinline__ void wgmma_m64n64k16_rs_bf16(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2, uint32_t &a3,
                                                  uint64_t db, int scale_d)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "n"(TB));
}


/* ---------------------------------------------------------------- small-block SpMM (spmm_small_kernel.cuh): ldmatrix,
   swizzle-mode descriptors, register-A wgmma with N = 32 / 16 */

/* Four 8x8 16-bit matrices from shared memory, transposed: lanes 8j..8j+7 give the 16-byte row addresses of
   matrix j; register j of lane l receives elements (row 2(l%4), 2(l%4)+1; column l/4) of matrix j. Reading a
   row-major K x M tile this way yields the m16n8k16 A fragment of its transpose (M x K). */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}

/* Four 8 x 8 16-bit matrices to shared memory, each transposed: register q of every thread holds its two
   elements of matrix q in the mma fragment layout (row lane / 4, columns 2 (lane % 4) and + 1, the first in the
   low half); lanes 8q .. 8q + 7 give the addresses of the 16-byte rows of matrix q, and row k there receives
   column k of the matrix. */
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}

/* smem_desc with an explicit swizzle mode (bits 62-63): 0 none, 1 128-byte, 2 64-byte, 3 32-byte. The tile
   must be aligned to its swizzle pattern (8 rows of the swizzle width), so the base-offset field stays 0. */
__device__ __forceinline__ uint64_t smem_desc_swz(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes, uint32_t mode)
{
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32;
    d |= (uint64_t)(mode & 3u) << 62;
    return d;
}

/* A descriptor moved by `units` x 16 bytes: only its 14-bit start-address field (bits 0-13) changes, without a carry
   into the next field as long as the address stays below 256 KB (every shared-memory address does). */
__device__ __forceinline__ uint64_t desc_advance(uint64_t d, uint32_t units)
{
    return (d & 0xFFFFFFFF00000000ull) | (uint64_t)((uint32_t)d + units);
}

/* D(64x32, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x32, smem;
   TB = 0 K-major, 1 N-major), issued only when `on` is non-zero (a guard predicate: the same value in every
   thread of the warpgroup). Skipping through the guard instead of a branch around the call keeps ptxas from
   serialising the warpgroup's wgmmas (measured in the SASS: a C++ branch around each wgmma gave a
   WARPGROUP.DEPBAR after every HGMMA). A registers: read-write operands, as in the other register-A forms. */
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n32k16_rs_f16_if(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2,
                                                        uint32_t &a3, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %21, 0;\nsetp.ne.b32 q, %22, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %23;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "r"(on), "n"(TB));
}

/* D(64x32, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x32, smem;
   TB = 0 K-major, 1 N-major), issued only when `on` is non-zero (a guard predicate: the same value in every
   thread of the warpgroup). Skipping through the guard instead of a branch around the call keeps ptxas from
   serialising the warpgroup's wgmmas (measured in the SASS: a C++ branch around each wgmma gave a
   WARPGROUP.DEPBAR after every HGMMA). A registers: read-write operands, as in the other register-A forms. */
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n32k16_rs_bf16_if(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2,
                                                        uint32_t &a3, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %21, 0;\nsetp.ne.b32 q, %22, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %23;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "r"(on), "n"(TB));
}

/* D(64x16, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x16, smem;
   TB = 0 K-major, 1 N-major), issued only when `on` is non-zero (a guard predicate: the same value in every
   thread of the warpgroup). Skipping through the guard instead of a branch around the call keeps ptxas from
   serialising the warpgroup's wgmmas (measured in the SASS: a C++ branch around each wgmma gave a
   WARPGROUP.DEPBAR after every HGMMA). A registers: read-write operands, as in the other register-A forms. */
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n16k16_rs_f16_if(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2,
                                                        uint32_t &a3, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %13, 0;\nsetp.ne.b32 q, %14, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, %15;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "r"(on), "n"(TB));
}

/* D(64x16, f32) += A(64x16, registers: the m16n8k16 A fragment of each warp's 16 rows) * B(16x16, smem;
   TB = 0 K-major, 1 N-major), issued only when `on` is non-zero (a guard predicate: the same value in every
   thread of the warpgroup). Skipping through the guard instead of a branch around the call keeps ptxas from
   serialising the warpgroup's wgmmas (measured in the SASS: a C++ branch around each wgmma gave a
   WARPGROUP.DEPBAR after every HGMMA). A registers: read-write operands, as in the other register-A forms. */
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n16k16_rs_bf16_if(float *d, uint32_t &a0, uint32_t &a1, uint32_t &a2,
                                                        uint32_t &a3, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %13, 0;\nsetp.ne.b32 q, %14, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, %15;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3)
        : "l"(db), "r"(scale_d), "r"(on), "n"(TB));
}

/* D(64x32, f32) += A(64x16, smem) * B(16x32, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n32k16_ss_f16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %18, 0;\nsetp.ne.b32 q, %19, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %20, %21;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x32, f32) += A(64x16, smem) * B(16x32, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n32k16_ss_bf16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %18, 0;\nsetp.ne.b32 q, %19, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %20, %21;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x16, f32) += A(64x16, smem) * B(16x16, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n16k16_ss_f16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %10, 0;\nsetp.ne.b32 q, %11, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %12, %13;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x16, f32) += A(64x16, smem) * B(16x16, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n16k16_ss_bf16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %10, 0;\nsetp.ne.b32 q, %11, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %12, %13;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x64, f32) += A(64x16, smem) * B(16x64, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k16_ss_f16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %34, 0;\nsetp.ne.b32 q, %35, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, %36, %37;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x64, f32) += A(64x16, smem) * B(16x64, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k16_ss_bf16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %34, 0;\nsetp.ne.b32 q, %35, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, %36, %37;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* Two k16 steps into one accumulator under one guard (D(64x64, f32) += A(64x32) * B(32x64) as two wgmmas, both
   operands from shared memory, descriptors per step; always accumulating): one predicate test and one branch for
   both instead of one each (the b32 consumers issue ~190 instructions per stage and bind, session 14). */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k32_ss_f16_if(float *d, uint64_t da0, uint64_t db0, uint64_t da1, uint64_t db1,
                                                        int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, 1, 0;\nsetp.ne.b32 q, %36, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %37, %38;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %34, %35, p, 1, 1, %37, %38;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), 
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), 
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), 
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da0), "l"(db0), "l"(da1), "l"(db1), "r"(on), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k32_ss_bf16_if(float *d, uint64_t da0, uint64_t db0, uint64_t da1, uint64_t db1,
                                                        int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, 1, 0;\nsetp.ne.b32 q, %36, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %37, %38;\n"
        "@q wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %34, %35, p, 1, 1, %37, %38;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), 
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), 
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), 
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da0), "l"(db0), "l"(da1), "l"(db1), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x128, f32) += A(64x16, smem) * B(16x128, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16_ss_f16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %66, 0;\nsetp.ne.b32 q, %67, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %68, %69;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x128, f32) += A(64x16, smem) * B(16x128, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16_ss_bf16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %66, 0;\nsetp.ne.b32 q, %67, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %68, %69;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x256, f32) += A(64x16, smem) * B(16x256, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n256k16_ss_f16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %130, 0;\nsetp.ne.b32 q, %131, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, %132, %133;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* D(64x256, f32) += A(64x16, smem) * B(16x256, smem), issued only when `on` is non-zero (a guard predicate, the same
   value in every thread of the warpgroup; see wgmma_m64n32k16_rs_f16_if). TA / TB as for wgmma_m64n256k16_f16. */
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n256k16_ss_bf16_if(float *d, uint64_t da, uint64_t db, int scale_d, int on)
{
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.b32 p, %130, 0;\nsetp.ne.b32 q, %131, 0;\n"
        "@q wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, %132, %133;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d), "r"(on), "n"(TA), "n"(TB));
}

/* ---------------------------------------------------------------- warp specialisation, PDL */

template <int R> __device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
/* Programmatic dependent launch: wait for the preceding grid's memory / let the next grid start early. */
__device__ __forceinline__ void grid_dep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void grid_dep_launch() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
/* The global nanosecond timer (the same clock on every SM: probe builds time phases across kernels with it). */
__device__ __forceinline__ unsigned long long globaltimer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* ---------------------------------------------------------------- persistent work queues */

/* Called once per CTA by one thread after the CTA has taken its last ticket: counts the CTA done in q[DONE], and
   the last of `ctas` CTAs zeroes q[i] for each bit i of ZERO and q[DONE], so the next launch finds the queue at
   zero without a memset (a memset between kernels would break the PDL chain; a work list cached per pattern skips
   the prep kernel that would otherwise reset it). No CTA takes another ticket in this launch when this runs. */
template <int DONE, unsigned ZERO> __device__ __forceinline__ void queue_done_reset(unsigned *q, unsigned ctas)
{
    __threadfence();
    if (atomicAdd(q + DONE, 1u) == ctas - 1u) {
        __threadfence();
#pragma unroll
        for (int i = 0; i < 32; i++)
            if (ZERO >> i & 1u) atomicExch(q + i, 0u);
        atomicExch(q + DONE, 0u);
    }
}

} // namespace bsk_hopper
#endif
