/* spmm_kernel.cuh — the Hopper BSR x dense SpMM kernel (TMA + wgmma, warp-specialised, persistent).

   C (M x N) = alpha * A (BSR, square blocks of BM = 64 or 128) * B (K x N row-major) + beta * C.

   Work item = (block row i, N tile of BN columns). A persistent grid (one CTA per SM) takes items from an
   atomic counter in the order a prep kernel fixed (block rows sorted by length, longest first, cut into
   bands of rows whose A blocks fit in L2; inside a band the N tile is the outer index, so the CTAs running
   at one time share B panels). Each CTA has three warpgroups:
     - WG0, the producer (setmaxnreg.dec): one warp walks the item's col_idx (32 indices per coalesced
       load, handed out by shuffle) and, per 64-wide K step, TMA-loads A's block panel (3-D map over the
       values: [nnzb][BM][BM]) and the BN-column panel of B rows j*BM + h*64 .. +63 (2-D map, zero-filled
       past K and N) into a STAGES-deep ring completed on mbarriers. It writes a small meta record per stage
       (block row, N tile, stages in the item, flags) that the consumers read after the full barrier.
     - WG1, WG2, the consumers (setmaxnreg.inc): wgmma m64nWGNk16 from 128-byte-swizzled shared memory,
       fp32 accumulators in registers; for BM = 128 each takes 64 of the tile's rows, for BM = 64 each takes
       half of the tile's columns. After the last stage of an item the epilogue: for 16-bit C with beta = 0
       each consumer stages its 64 x WGN part in shared memory and TMA-stores it (clipped at M and N; the
       store runs on under the next item's mainloop); otherwise alpha/beta straight from the registers to
       global memory (rows >= M and columns >= N masked). Then the next item.
   Malformed device indices cannot cause out-of-bounds access: row_ptr is clamped by the prep kernel to
   [0, nnzb], a col_idx outside [0, nb) becomes a stage with no data (skipped), and TMA never reads outside
   the tensors it describes. */
#ifndef BSK_HOPPER_SPMM_KERNEL_CUH
#define BSK_HOPPER_SPMM_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include "ptx.cuh"

namespace bsk_hopper {

/* Plain parameters of the main kernel (the tensor maps travel separately as __grid_constant__). */
struct SpmmParams {
    const int4 *sorted;     /* per rank: {block row, first block, end block, 0}, longest rows first */
    const int2 *bandinfo;   /* per rank: {first rank, rows} of the band holding that rank            */
    unsigned *counter;      /* work-queue head, zeroed by the prep kernel                           */
    const int32_t *col_idx;
    void *C;
    int64_t ldc;
    int ctype;              /* bsk_dtype of C                                                       */
    float alpha, beta;
    int M, N;               /* C is M x N                                                           */
    int mb, nb;             /* block rows / block columns of A                                      */
    int nt;                 /* N tiles, or pairs of N tiles when two CTAs form a cluster            */
    int band_rows;          /* rows per band (see above)                                            */
    unsigned total_items;   /* mb * nt                                                              */
    uint32_t b_lbo, b_sbo;  /* B descriptor strides in bytes (8192 between 64-column panels, 1024
                               between 8-row groups); run-time only so a probe can try the swap    */
};

enum { META_SKIP = 1, META_END = 2 };

/* Compile-time shape of one kernel configuration. EPI: the epilogue stages each consumer's 64 x WGN part of
   the tile in shared memory (16-bit C, 128-byte swizzled 64-column panels) and writes it with TMA stores,
   which run on while the next tile's mainloop starts; otherwise the registers go straight to global memory.
   WAIT1: after issuing a stage's wgmmas, wait only for the previous stage's (wait_group 1) and release that
   one; else wait_group 0 after every stage. Measured: with 3 stages WAIT1 is slower (it holds a stage back
   from the producer), so every shipped configuration uses wait_group 0.
   CLUSTER = 2: two CTAs (a cluster) take the same block row and two adjacent N tiles. CTA 0 takes items from
   the queue and hands each to CTA 1 through a small channel in CTA 1's shared memory; both producers then walk
   the same blocks: each TMA-multicasts its half (64 rows) of A's panel into both CTAs and loads its own B
   panels. A stage slot is free for a producer when the consumers of both CTAs have released it (each
   consumer warp arrives on both CTAs' empty barriers). Per SM and stage: 8 + 32 KB from L2 instead of 48.
   (A first version where CTA 0's producer issued everything was 1.6x slower: one TMA unit carried 80 KB.) */
template <int BM_, int WGN_, int STAGES_, bool EPI_, bool WAIT1_ = false, int CLUSTER_ = 1> struct Cfg {
    static constexpr int BM = BM_;                   /* block size = rows of a tile                  */
    static constexpr int WGN = WGN_;                 /* wgmma N per consumer warpgroup               */
    static constexpr int STAGES = STAGES_;
    static constexpr bool EPI = EPI_;
    static constexpr bool WAIT1 = WAIT1_;            /* keep one stage of wgmma in flight (wait_group 1) */
    static constexpr int CLUSTER = CLUSTER_;         /* CTAs sharing A (1 or 2)                       */
    static constexpr bool SPLIT_N = (BM_ == 64);     /* BM 64: the two consumers split the columns  */
    static constexpr int BN = SPLIT_N ? 2 * WGN_ : WGN_;
    static constexpr int KSUB = BM_ / 64;            /* 64-wide K stages per block                   */
    static constexpr int PANELS = BN / 64;           /* 64-column B panels per stage                 */
    static constexpr int A_BYTES = BM_ * 64 * 2;
    static constexpr int B_BYTES = 64 * BN * 2;
    static constexpr int STAGE_TX = A_BYTES + B_BYTES;
    static constexpr int A_OFF = 0;
    static constexpr int B_OFF = STAGES_ * A_BYTES;
    static constexpr int C_WG_BYTES = 64 * WGN_ * 2; /* one consumer's staged part (16-bit C)        */
    static constexpr int C_OFF = B_OFF + STAGES_ * B_BYTES;
    static constexpr int BAR_OFF = C_OFF + (EPI_ ? 2 * C_WG_BYTES : 0);
    static constexpr int META_OFF = BAR_OFF + 2 * STAGES_ * 8;
    static constexpr int CHAN = 2;                   /* item channel slots (clusters)                */
    static constexpr int CHAN_OFF = META_OFF + STAGES_ * 16; /* full[CHAN], empty[CHAN], t[CHAN]      */
    static constexpr int SMEM = CHAN_OFF + CHAN * 24 + 1024; /* + slack to align the base to 1024    */
    static constexpr int THREADS = 384;
};

/* ---------------------------------------------------------------- prep: order the block rows */

/* One CTA of 1024 threads: a counting sort of the block rows by length, longest first (lengths past 1023
   share the top bin), writing {row, start, end} with row_ptr clamped to [0, nnzb]; zeroes the queue head.
   Bands: the sorted rows are cut at length-class boundaries (class_shift 1: rows whose lengths have the same
   bit length; 2: two bit lengths per class; 0: one class) and every band_rows rows inside a class. The main
   kernel walks bands in order and, inside a band, N tile by N tile: long rows start first (their items are
   not left for the end, where they would make the tail), and rows of a band share B panels in L2.
   It lets the main kernel start at once (programmatic dependent launch); that kernel waits for this one's
   memory before reading it. */
__global__ void __launch_bounds__(1024, 1)
    spmm_prep_kernel(const int32_t *__restrict__ row_ptr, int mb, int nnzb, int band_rows, int class_shift,
                     int4 *__restrict__ sorted, int2 *__restrict__ bandinfo, unsigned *__restrict__ counter)
{
    grid_dep_launch();
    __shared__ int hist[1024];
    __shared__ int excl[1025];
    __shared__ int warp_tot[32];
    const int tid = threadIdx.x;
    hist[tid] = 0;
    if (tid == 0) *counter = 0u;
    __syncthreads();
    for (int i = tid; i < mb; i += 1024) {
        int rs = min(max(row_ptr[i], 0), nnzb), re = min(max(row_ptr[i + 1], 0), nnzb);
        int len = max(re - rs, 0);
        atomicAdd(&hist[1023 - min(len, 1023)], 1);
    }
    __syncthreads();
    /* exclusive scan of hist[0..1023] (bin 0 = longest rows) */
    int v = hist[tid], x = v;
    const int lane = tid & 31, w = tid >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_tot[w] = x;
    __syncthreads();
    if (w == 0) {
        int t = warp_tot[lane], s = t;
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        warp_tot[lane] = s - t;
    }
    __syncthreads();
    const int ex = warp_tot[w] + x - v;
    hist[tid] = ex;
    excl[tid] = ex;
    if (tid == 0) excl[1024] = mb;
    __syncthreads();
    const int R = max(band_rows, 1);
    for (int i = tid; i < mb; i += 1024) {
        int rs = min(max(row_ptr[i], 0), nnzb), re = min(max(row_ptr[i + 1], 0), nnzb);
        const int len = max(re - rs, 0), lm = min(len, 1023);
        int cstart = 0, cend = mb;
        if (class_shift > 0) {
            const int bl = 32 - __clz(lm);                         /* bit length, 0 for 0 */
            const int c = (bl + class_shift - 1) / class_shift;    /* class index         */
            const int lo = c == 0 ? 0 : 1 << ((c - 1) * class_shift);
            const int hi = c == 0 ? 0 : min((1 << min(c * class_shift, 11)) - 1, 1023);
            cstart = excl[1023 - hi];
            cend = excl[1024 - lo];
        }
        const int pos = atomicAdd(&hist[1023 - lm], 1);
        const int bf = cstart + ((pos - cstart) / R) * R;
        sorted[pos] = make_int4(i, rs, max(re, rs), 0);
        bandinfo[pos] = make_int2(bf, min(R, cend - bf));
    }
}

/* ---------------------------------------------------------------- epilogue */

template <int CT> struct OutT;
template <> struct OutT<BSK_F32> {
    static __device__ __forceinline__ float2 ld2(const void *q) { return *(const float2 *)q; }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(float2 *)q = v; }
    static __device__ __forceinline__ float ld1(const void *q) { return *(const float *)q; }
    static __device__ __forceinline__ void st1(void *q, float v) { *(float *)q = v; }
};
template <> struct OutT<BSK_F16> {
    static __device__ __forceinline__ float2 ld2(const void *q) { return __half22float2(*(const __half2 *)q); }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(__half2 *)q = __float22half2_rn(v); }
    static __device__ __forceinline__ float ld1(const void *q) { return __half2float(*(const __half *)q); }
    static __device__ __forceinline__ void st1(void *q, float v) { *(__half *)q = __float2half_rn(v); }
};
template <> struct OutT<BSK_BF16> {
    static __device__ __forceinline__ float2 ld2(const void *q)
    {
        return __bfloat1622float2(*(const __nv_bfloat162 *)q);
    }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(__nv_bfloat162 *)q = __float22bfloat162_rn(v); }
    static __device__ __forceinline__ float ld1(const void *q) { return __bfloat162float(*(const __nv_bfloat16 *)q); }
    static __device__ __forceinline__ void st1(void *q, float v) { *(__nv_bfloat16 *)q = __float2bfloat16_rn(v); }
};

/* The wgmma accumulator layout (m64nNk16, f32): register i of thread (warp w, lane l) of the warpgroup
   holds row 16w + l/4 + 8*((i/2)%2), column 8*(i/4) + 2*(l%4) + (i%2). Each thread writes pairs of
   adjacent columns (8 or 4 bytes); the four threads of a quad cover 8 consecutive columns of a row. */
template <int CT, int WGN, bool BETA>
__device__ __forceinline__ void store_full(const float *acc, char *C, int64_t ldc, int64_t r0, int c0, float alpha,
                                           float beta)
{
    constexpr int ES = CT == BSK_F32 ? 4 : 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        char *q = C + ((r0 + 8 * h) * ldc + c0) * ES;
#pragma unroll
        for (int j = 0; j < WGN / 8; ++j) {
            float2 o = make_float2(alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1]);
            if (BETA) {
                const float2 old = OutT<CT>::ld2(q + 8 * j * ES);
                o.x += beta * old.x;
                o.y += beta * old.y;
            }
            OutT<CT>::st2(q + 8 * j * ES, o);
        }
    }
}

/* Edge tiles: rows >= M and columns >= N are not touched. */
template <int CT, int WGN>
__device__ __forceinline__ void store_edge(const float *acc, char *C, int64_t ldc, int64_t r0, int c0, int M, int N,
                                        float alpha, float beta)
{
    constexpr int ES = CT == BSK_F32 ? 4 : 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t r = r0 + 8 * h;
        if (r >= M) continue;
        char *rowp = C + r * ldc * ES;
#pragma unroll
        for (int j = 0; j < WGN / 8; ++j) {
            const int col = c0 + 8 * j;
            char *q = rowp + (int64_t)col * ES;
            float2 o = make_float2(alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1]);
            if (col + 1 < N) {
                if (beta != 0.0f) {
                    const float2 old = OutT<CT>::ld2(q);
                    o.x += beta * old.x;
                    o.y += beta * old.y;
                }
                OutT<CT>::st2(q, o);
            } else if (col < N) {
                if (beta != 0.0f) o.x += beta * OutT<CT>::ld1(q);
                OutT<CT>::st1(q, o.x);
            }
        }
    }
}

template <int CT, int WGN>
__device__ __forceinline__ void store_tile(const float *acc, char *C, int64_t ldc, int64_t r0, int c0, bool full,
                                           int M, int N, float alpha, float beta)
{
    if (!full)
        store_edge<CT, WGN>(acc, C, ldc, r0, c0, M, N, alpha, beta);
    else if (beta != 0.0f)
        store_full<CT, WGN, true>(acc, C, ldc, r0, c0, alpha, beta);
    else
        store_full<CT, WGN, false>(acc, C, ldc, r0, c0, alpha, beta);
}

/* Stage this thread's accumulators (times alpha, converted) into the warpgroup's C buffer: panel j/8 (64
   columns, 8 KB), row rl (+8), 16-byte chunk (j%8) xor (row%8) — the TMA 128-byte swizzle, which also
   keeps the 32 lanes of each store on 32 different banks. */
template <int CT, int WGN>
__device__ __forceinline__ void stage_tile(const float *acc, uint32_t cbuf, int rl, int lane, float alpha)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = rl + 8 * h;
        const uint32_t rowa = cbuf + (uint32_t)r * 128u + 4u * (uint32_t)(lane & 3);
#pragma unroll
        for (int j = 0; j < WGN / 8; ++j) {
            const float a = alpha * acc[4 * j + 2 * h], b = alpha * acc[4 * j + 2 * h + 1];
            uint32_t v;
            if (CT == BSK_F16) {
                __half2 hv = __floats2half2_rn(a, b);
                v = *(uint32_t *)&hv;
            } else {
                __nv_bfloat162 hv = __floats2bfloat162_rn(a, b);
                v = *(uint32_t *)&hv;
            }
            const uint32_t addr = rowa + (uint32_t)(j >> 3) * 8192u + ((uint32_t)((j & 7) ^ (r & 7)) << 4);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
        }
    }
}

/* ---------------------------------------------------------------- main kernel */

template <int WGN, int DT> struct Mma;
template <> struct Mma<256, BSK_F16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_f16(d, a, b, 1); }
};
template <> struct Mma<256, BSK_BF16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_bf16(d, a, b, 1); }
};
template <> struct Mma<128, BSK_F16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_f16(d, a, b, 1); }
};
template <> struct Mma<128, BSK_BF16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_bf16(d, a, b, 1); }
};

template <class CF, int DT>
__global__ void __launch_bounds__(384, 1)
    spmm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, const SpmmParams p)
{
    constexpr bool CL = CF::CLUSTER > 1;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sbase = smem_u32(smem);
    const uint32_t full0 = sbase + CF::BAR_OFF, empty0 = full0 + 8 * CF::STAGES;
    int4 *meta = (int4 *)(smem + CF::META_OFF);
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const uint32_t rank = CL ? cluster_ctarank() : 0u;

    const uint32_t chf0 = sbase + CF::CHAN_OFF, che0 = chf0 + 8 * CF::CHAN; /* item channel barriers */
    unsigned *chan_t = (unsigned *)(smem + CF::CHAN_OFF + 16 * CF::CHAN);

    if (threadIdx.x == 0) {
        for (int s = 0; s < CF::STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8 * CF::CLUSTER); /* one arrival per consumer warp of the cluster */
        }
        for (int i = 0; i < CF::CHAN; ++i) {
            mbar_init(chf0 + 8 * i, 1);
            mbar_init(che0 + 8 * i, 1);
        }
        mbar_init_fence();
        tma_prefetch_desc(&tmA);
        tma_prefetch_desc(&tmB);
        if (CF::EPI) tma_prefetch_desc(&tmC);
    }
    __syncthreads();
    if (CL) cluster_sync(); /* every CTA's barriers exist before any other CTA touches them */
    grid_dep_wait();        /* the prep kernel's order and counter are visible from here on */

    if (wg == 0) {
        /* ------------------------------------------------------------ producer */
        setmaxnreg_dec<48>();
        if (warp == 0) {
            uint32_t s = 0, ph = 0, ci = 0, cph = 0;
            /* Items: CTA 0's lane 0 takes them from the queue (fetch, one item ahead); in a cluster it hands each
               to CTA 1 through the channel (exchange), whose producer then walks the same blocks. */
            auto fetch = [&]() -> unsigned { return (lane == 0 && rank == 0) ? atomicAdd(p.counter, 1u) : 0u; };
            auto exchange = [&](unsigned v) -> unsigned {
                if (CL) {
                    if (lane == 0) {
                        if (rank == 0) {
                            mbar_wait_cluster(che0 + 8 * ci, cph ^ 1);
                            st_cluster_u32(mapa(smem_u32(&chan_t[ci]), 1), v);
                            mbar_arrive_cluster(mapa(chf0 + 8 * ci, 1));
                        } else {
                            mbar_wait_cluster(chf0 + 8 * ci, cph);
                            v = *(volatile unsigned *)&chan_t[ci];
                            mbar_arrive_cluster(mapa(che0 + 8 * ci, 0));
                        }
                    }
                    if (++ci == CF::CHAN) { ci = 0; cph ^= 1; }
                }
                return __shfl_sync(0xffffffffu, v, 0);
            };
            /* one stage's bookkeeping (lane 0): wait for the slot, publish the meta record, arm the full
               barrier (the TMA loads, if any, follow) */
            auto open_stage = [&](int4 mv, uint32_t bytes) {
                const uint32_t fb = full0 + 8 * s;
                if (CL) mbar_wait_cluster(empty0 + 8 * s, ph ^ 1);
                else mbar_wait(empty0 + 8 * s, ph ^ 1);
                meta[s] = mv;
                if (bytes) mbar_arrive_expect_tx(fb, bytes);
                else mbar_arrive(fb);
            };
            unsigned t = exchange(fetch());
            for (;;) {
                if (t >= p.total_items) {
                    if (lane == 0) open_stage(make_int4(0, 0, 0, META_END), 0);
                    break;
                }
                const unsigned tn = fetch(); /* next item, fetched early: used after this one */
                const unsigned q = t / (unsigned)p.nt;           /* the band holding sorted rank q holds item t */
                const int2 bi = p.bandinfo[q];
                const unsigned local = t - (unsigned)bi.x * (unsigned)p.nt;
                const int ntile = (int)(local / (unsigned)bi.y); /* N tile (pair of N tiles with a cluster) */
                const unsigned rk = (unsigned)bi.x + local % (unsigned)bi.y;
                const int4 e = p.sorted[rk];
                const int row = e.x, rs = e.y, re = e.z;
                const int n0 = (ntile * CF::CLUSTER + (int)rank) * CF::BN;
                if (re <= rs) {
                    if (lane == 0) open_stage(make_int4(row, ntile, 1, META_SKIP), 0);
                    if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                } else {
                    const int nst = (int)((unsigned)(re - rs) * (unsigned)CF::KSUB);
                    for (int64_t k0 = rs; k0 < re; k0 += 32) {
                        const int my = k0 + lane < re ? __ldg(p.col_idx + k0 + lane) : -1;
                        const int cnt = (int)min((int64_t)32, re - k0);
                        for (int u = 0; u < cnt; ++u) {
                            const int j = __shfl_sync(0xffffffffu, my, u);
                            const bool ok = (unsigned)j < (unsigned)p.nb;
#pragma unroll
                            for (int h = 0; h < CF::KSUB; ++h) {
                                if (lane == 0) {
                                    open_stage(make_int4(row, ntile, nst, ok ? 0 : META_SKIP), ok ? CF::STAGE_TX : 0);
                                    if (ok) {
                                        const uint32_t fb = full0 + 8 * s;
                                        const uint32_t adst = sbase + CF::A_OFF + s * CF::A_BYTES;
                                        const uint32_t bdst = sbase + CF::B_OFF + s * CF::B_BYTES;
                                        const int krow = j * CF::BM + h * 64;
                                        if (CL) /* my 64 rows of A's panel, into both CTAs */
                                            tma_load_3d_mc(adst + rank * 64u * 128u, &tmA, fb, h * 64, (int)rank * 64,
                                                           (int)k0 + u, (uint16_t)3);
                                        else
                                            tma_load_3d(adst, &tmA, fb, h * 64, 0, (int)k0 + u);
#pragma unroll
                                        for (int qq = 0; qq < CF::PANELS; ++qq)
                                            tma_load_2d(bdst + qq * 8192, &tmB, fb, n0 + qq * 64, krow);
                                    }
                                }
                                if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                            }
                        }
                    }
                }
                t = exchange(tn);
            }
        }
    } else {
        /* ------------------------------------------------------------ consumers */
        setmaxnreg_inc<224>();
        const int c = wg - 1;
        float acc[CF::WGN / 2];
        uint32_t s = 0, ph = 0;
        const uint32_t a_off = CF::SPLIT_N ? 0u : (uint32_t)c * 64u * 128u;
        const uint32_t b_off = CF::SPLIT_N ? (uint32_t)c * (CF::WGN / 64) * 8192u : 0u;
        auto wait_full = [&]() {
            if (CL) mbar_wait_cluster(full0 + 8 * s, ph);
            else mbar_wait(full0 + 8 * s, ph);
        };
        auto release = [&](int st) { /* one arrival per warp on every CTA's empty barrier of the stage */
            __syncwarp();
            if (lane == 0 && st >= 0) {
                mbar_arrive(empty0 + 8 * st);
                if (CL) mbar_arrive_cluster(mapa(empty0 + 8 * st, rank ^ 1u));
            }
        };
        for (;;) {
            wait_full();
            const int4 m = meta[s];
            if (m.w & META_END) {
                if (CF::EPI && (threadIdx.x & 127) == 0) bulk_wait0(); /* staged tiles read before exit */
                break;
            }
            const int row = m.x, ntile = m.y * CF::CLUSTER + (int)rank;
            const unsigned nst = (unsigned)m.z;
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) reg_fence(acc[i]);
            int prev = -1; /* stage whose wgmma group may still be running (WAIT1) */
            for (unsigned it = 0; it < nst; ++it) {
                int fl = m.w;
                if (it) {
                    wait_full();
                    fl = meta[s].w;
                }
                int rel = (int)s;
                if (!(fl & META_SKIP)) {
                    const uint32_t a_addr = sbase + CF::A_OFF + s * CF::A_BYTES + a_off;
                    const uint32_t b_addr = sbase + CF::B_OFF + s * CF::B_BYTES + b_off;
                    wgmma_fence();
#pragma unroll
                    for (int k = 0; k < 4; ++k)
                        Mma<CF::WGN, DT>::run(acc, smem_desc(a_addr + 32 * k, 16, 1024),
                                              smem_desc(b_addr + 2048 * k, p.b_lbo, p.b_sbo));
                    wgmma_commit();
                    if (CF::WAIT1) {
                        wgmma_wait<1>(); /* the previous stage's group is done: its buffers can go */
                        rel = prev;
                        prev = (int)s;
                    } else {
                        wgmma_wait<0>();
                    }
                }
                release(rel);
                if (++s == CF::STAGES) { s = 0; ph ^= 1; }
            }
            if (CF::WAIT1) {
                wgmma_wait<0>();
                release(prev);
            }
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) reg_fence(acc[i]);
            /* this warpgroup's 64 x WGN part of the tile */
            const int64_t wr0 = (int64_t)row * CF::BM + (CF::SPLIT_N ? 0 : 64 * c);
            const int wc0 = ntile * CF::BN + (CF::SPLIT_N ? c * CF::WGN : 0);
            if constexpr (CF::EPI) {
                /* stage 64 x WGN (16-bit, alpha applied) in 64-column 128B-swizzled panels, then TMA-store it;
                   the store clips rows >= M and columns >= N (N % 8 == 0 here: see the launcher). The buffer is
                   reused only after the previous item's store has read it. */
                const int tw = threadIdx.x & 127;
                const uint32_t cbuf = sbase + CF::C_OFF + (uint32_t)c * CF::C_WG_BYTES;
                if (tw == 0) bulk_wait_read0();
                named_bar_sync(1 + c, 128);
                const int rl = 16 * warp + (lane >> 2);
                if (p.ctype == BSK_F16)
                    stage_tile<BSK_F16, CF::WGN>(acc, cbuf, rl, lane, p.alpha);
                else
                    stage_tile<BSK_BF16, CF::WGN>(acc, cbuf, rl, lane, p.alpha);
                fence_proxy_async_smem();
                named_bar_sync(1 + c, 128);
                if (tw == 0 && wc0 < p.N) {
#pragma unroll
                    for (int q = 0; q < CF::WGN / 64; ++q) tma_store_2d(&tmC, cbuf + q * 8192, wc0 + 64 * q, (int)wr0);
                }
                if (tw == 0) bulk_commit();
            } else {
                const bool full = wr0 + 64 <= p.M && wc0 + CF::WGN <= p.N;
                const int64_t r0 = wr0 + 16 * warp + (lane >> 2);
                const int c0 = wc0 + 2 * (lane & 3);
                char *Cp = (char *)p.C;
                if (wc0 < p.N) {
                    if (p.ctype == BSK_F32)
                        store_tile<BSK_F32, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                    else if (p.ctype == BSK_F16)
                        store_tile<BSK_F16, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                    else
                        store_tile<BSK_BF16, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                }
            }
        }
    }
    if (CL) cluster_sync(); /* no CTA leaves while its peer may still signal its barriers */
}

} // namespace bsk_hopper
#endif
