/* sddmm_kernel.cuh — the Hopper BSR SDDMM kernel (TMA + wgmma, warp-specialised, persistent).

   out.values = alpha * (X · Yᵀ) sampled on out's blocks + beta * out.values; X is M x D, Y is K x D (both
   row-major, D contiguous), blocks are B x B with B = 64 or 128.

   Block (i, j) is X[iB .. iB+B) · Y[jB .. jB+B)ᵀ: both operands are K-major (D is the reduction dimension and
   the contiguous one), so a stage is one TMA box of X rows and one box of Y rows per block, each 64 D-columns
   wide, 128-byte swizzled, and wgmma reads both with the same descriptor shape (A K-major, B K-major).

   Work item = up to GB consecutive blocks of one block row (the row's X panel is loaded once per stage for all of
   them): B = 128: GB = 2, tile 128 x 256, consumer warpgroup c takes rows 64c.. (m64n256); B = 64: GB = 4 or 8,
   tile 64 x 256 / 64 x 512, consumer c takes the blocks q with q % 2 == c (m64n128 / m64n256), so a short item
   (fewer than GB blocks) still keeps both consumers busy. A consumer always issues its full-width wgmma (one
   with no block skips it): the columns of blocks past the item's end read whatever the slot holds and are not
   stored (the tensor work of a short item is wasted, not the bytes: nothing is loaded for them).

   The D loop is long (D/64 stages per item) and the items are few (b = 128, d = 0.1 at 8192^2: ~205 items for
   132 SMs), so whole items quantise badly: 1.55 waves run as 2. A prep kernel (one CTA) lists the items (row by
   row, or column group by column group, each row's items balanced: concurrent CTAs share X panels and run in
   D-phase, so each 64-column chunk of a panel is read from DRAM about once per wave) and plans the schedule: when the last, partial wave
   of r items can run as one round of r·S <= G units, its items are split along D into S parts (small problems:
   T < G items spread over the SMs). More rounds are not planned: units of different items at different D
   offsets at once lose the sharing of panels between items (measured slower; the knobs still force it). The
   parts of an item take disjoint D ranges; each stores its fp32 partial tile in its own workspace slot except
   the last to arrive, which adds the slots in part order (deterministic: the result does not depend on the
   arrival order) and writes the block. The last arriver waits only for CTAs that have already finished their
   part's mainloop, so there is no dependence on CTA residency.

   CTA = 3 warpgroups. WG0's warp 0 is the producer (setmaxnreg.dec): per unit it takes a ticket from the queue,
   reads the item and its GB column indices, and per 64-wide D chunk TMA-loads the X box and the Y box of every
   valid block into a STAGES-deep ring completed on mbarriers; a meta record per stage tells the consumers the
   unit, its block count and the last stage. WG1, WG2 are the consumers (setmaxnreg.inc): wgmma from shared
   memory, fp32 accumulators in registers, wait_group 0 after each stage (as the SpMM kernel, measured better),
   then the epilogue straight from registers: alpha·acc + beta·old (old read only when beta != 0), converted to
   the values' dtype; padding entries (rows >= M or columns >= K of a partial block) written as 0.

   Malformed device indices never cause out-of-bounds access: row_ptr is clamped to [0, nnzb] by the prep
   kernel (a row's range [rs, max(re, rs))), the item list is capped at the workspace's capacity, and a block
   whose column index is outside [0, nb) is neither loaded nor written. TMA never reads outside X or Y (rows
   past M / K and columns past D read as zero). */
#ifndef BSK_HOPPER_SDDMM_KERNEL_CUH
#define BSK_HOPPER_SDDMM_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include "ptx.cuh"
#include "../scan.cuh" /* block_excl_scan */

namespace bsk_hopper {
namespace sddmm {

/* Plain parameters of the main kernel (the tensor maps travel separately as __grid_constant__). */
struct Params {
    const int4 *items;      /* per item {block row, first block, blocks (1..GB), 0}                       */
    const int *plan;        /* {units, unsplit items F, parts S, items, order}; items >= F are split into S
                               parts; order 1: part-major units                                          */
    unsigned *counter;      /* work-queue head, zeroed by the prep kernel                                 */
    int *ctr;               /* per split item: {arrivals, partials stored}, zeroed by the prep kernel     */
    float *slots;           /* per split item and part: one fp32 partial tile (256 threads x NACC floats) */
    const int32_t *col_idx;
    void *V;                /* out's values                                                               */
    int vtype;              /* bsk_dtype of the values: F32 or the input dtype                            */
    float alpha, beta;
    int M, K;               /* out is M x K                                                               */
    int nb;                 /* block columns                                                              */
    int chunks;             /* ceil(D / 64)                                                               */
};

enum { META_LAST = 1, META_END = 2 };

/* Compile-time shape of one configuration. */
template <int B_, int GB_, int STAGES_> struct Cfg {
    static constexpr int B = B_;                      /* block size                                        */
    static constexpr int GB = GB_;                    /* blocks per item                                   */
    static constexpr int STAGES = STAGES_;
    static constexpr bool SPLIT_N = (B_ == 64);       /* B 64: consumers split the blocks; B 128: the rows  */
    static constexpr int BPC = SPLIT_N ? GB_ / 2 : GB_; /* blocks per consumer                             */
    static constexpr int WGN = BPC * B_;              /* wgmma N per consumer                              */
    static_assert(WGN == 128 || WGN == 256, "wgmma N per consumer: 128 or 256");
    static_assert(!SPLIT_N || GB_ % 2 == 0, "B 64: an even number of blocks per item");
    static constexpr int NACC = WGN / 2;              /* fp32 accumulators per consumer thread            */
    static constexpr int YB = B_ * 128;               /* one TMA box: B rows x 64 16-bit elements          */
    static constexpr int X_BYTES = YB;
    static constexpr int Y_BYTES = GB_ * YB;
    static constexpr int X_OFF = 0;
    static constexpr int Y_OFF = STAGES_ * X_BYTES;
    static constexpr int BAR_OFF = Y_OFF + STAGES_ * Y_BYTES;
    static constexpr int META_OFF = BAR_OFF + 2 * STAGES_ * 8;
    static constexpr int ROLE_OFF = META_OFF + STAGES_ * 16;
    static constexpr int SMEM = ROLE_OFF + 16 + 1024; /* + slack to align the base to 1024               */
    static constexpr int THREADS = 384;
    static constexpr int SLOT_FLOATS = 256 * NACC;    /* one partial tile                                  */
    /* Y box of block q in a stage: B 64 puts consumer c's blocks (q % 2 == c) side by side */
    static __host__ __device__ constexpr int yslot(int q) { return SPLIT_N ? (q & 1) * BPC + (q >> 1) : q; }
};

/* ---------------------------------------------------------------- prep: items and schedule */

/* One CTA of 1024 threads. Lists the items: the blocks of row i ([rs, re) after clamping) are cut into
   ceil(len / GB) items of floor or ceil(len / items) blocks each, row-major — balanced, so the items of a wave
   take about the same time (session 17's cut, GB-block items and one short one per row listed after all full
   ones, measured b128 d 0.1 −1.8 %, b64 d 0.5 −1.3 %, level elsewhere: session 18). With col_groups G >= 2
   (sddmm_hopper.cu decides) the rows are first cut at the boundaries of G groups of ceil(nb / G) block columns
   (a group's blocks are contiguous in a sorted row; the row's first and last groups also take any column outside
   [0, nb)) and the (row, group) segments are listed group by group, rows in order inside a group, each cut as a
   row is — so a wave of CTAs reads the Y panels of one group only. The group bounds come from binary searches
   over col_idx; on unsorted (malformed) rows they are still monotone inside the row, so the segments still
   cover the row once and items stay in bounds. At most `cap` items (the workspace's room; only malformed row_ptr can ask for more).
   col_groups = -G (the automatic rule, sddmm_hopper.cu): this kernel decides between G groups and the row order
   from the rows it reads — G when the rows are skewed (the longest >= twice the mean and >= 4 blocks) and average
   >= 2 items, or average >= 6 items whatever their spread; 1 otherwise (session 23, `sddmm_skew_groups_h100_…_s23`:
   b64 skewed d 0.15-0.5 +5 to +40 % with G = 3, d 0.1 -4 to -12 %; uniform rows of 4 items -4.5 %). The G used
   goes to *groups_out when it is not NULL (tests, probes).
   Then plans the schedule (thread 0): with T items on G CTAs, T = k·G + r, the last r items are split into S
   parts when r·S <= G (one round) and the tail's estimated time 1/S + a beats 1 (a = 3/chunks: the per-part cost
   of the pipeline refill and the partial-tile exchange, in items), with S <= 8, S <= chunks and r·S <= slot_cap;
   force_split > 1 splits the last r items (r = 0: the last min(T, G)) into S parts regardless (tests, probes).
   Zeroes the queue head and the split counters.
   Lets the main kernel start at once (programmatic dependent launch); it waits for this kernel's memory
   before reading any of it. */
__global__ void __launch_bounds__(1024, 1)
    sddmm_prep_kernel(const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col_idx, int mb, int nb, int nnzb,
                      int gb, int cap, int grid, int chunks, int slot_cap, int force_split, int order, int col_groups,
                      int4 *__restrict__ items, int *__restrict__ plan, unsigned *__restrict__ counter,
                      int *__restrict__ ctr, int *__restrict__ groups_out)
{
    grid_dep_launch();
    __shared__ long long ws[33];
    __shared__ int s_maxlen;
    const int tid = threadIdx.x;
    auto row_range = [&](int i, int &rs) -> int {
        rs = min(max(row_ptr[i], 0), nnzb);
        const int re = min(max(row_ptr[i + 1], 0), nnzb);
        return max(re - rs, 0);
    };
    long long off_p = 0; /* items listed (before the cap) */
    int G = max(col_groups, 1);
    if (col_groups < 0) { /* the automatic rule: the longest row (clamped ranges, as listed below) */
        if (tid == 0) s_maxlen = 0;
        __syncthreads();
        int mx = 0, rs;
        for (int i = tid; i < mb; i += 1024) mx = max(mx, row_range(i, rs));
        atomicMax(&s_maxlen, mx);
        __syncthreads();
        const long long L = s_maxlen, n = nnzb, rows = max(mb, 1);
        const bool skewed = L >= 4 && L * rows >= 2 * n;
        G = (skewed && n >= 2LL * gb * rows) || n >= 6LL * gb * rows ? -col_groups : 1;
    }
    if (tid == 0 && groups_out) *groups_out = G;
    const int cg = (nb + G - 1) / G;
    auto lbound = [&](int lo, int hi, int key) -> int { /* first position in [lo, hi) with col_idx >= key */
        while (lo < hi) {
            const int m = (lo + hi) >> 1;
            if (__ldg(col_idx + m) < key) lo = m + 1;
            else hi = m;
        }
        return lo;
    };
    const long long pairs = (long long)G * mb; /* (group, row), group-major */
    for (long long base = 0; base < pairs; base += 1024) {
        const long long q = base + tid;
        int i = 0, a = 0, n = 0;
        if (q < pairs) {
            const int g = (int)(q / mb);
            i = (int)(q % mb);
            int rs;
            const int len = row_range(i, rs), e0 = rs + len;
            a = g == 0 ? rs : lbound(rs, e0, g * cg);
            const int e = g == G - 1 ? e0 : lbound(rs, e0, (g + 1) * cg);
            n = max(e - a, 0);
        }
        const long long ni = (n + gb - 1) / gb;
        long long tot; /* the next pass's scan starts with a barrier: ws is free to rewrite */
        const long long ex = block_excl_scan(ni, ws, &tot);
        /* balanced: the segment's ni items take n / ni or n / ni + 1 blocks each (the longer first) */
        const int bq = ni ? n / (int)ni : 0, br = ni ? n % (int)ni : 0;
        for (long long k = 0; k < ni; ++k) {
            const long long pos = off_p + ex + k;
            if (pos >= cap) break;
            const int kk = (int)k;
            items[pos] = make_int4(i, a + kk * bq + min(kk, br), bq + (kk < br), 0);
        }
        off_p += tot;
    }
    if (tid == 0) {
        const long long T = min(off_p, (long long)cap);
        long long F = T, X = 0;
        int S = 1;
        const int smax = min(8, chunks);
        if (T > 0 && force_split > 1 && smax > 1) {
            S = min(force_split, smax);
            X = T % grid ? T % grid : min(T, (long long)grid); /* the partial wave, or the last full one */
            while (S > 1 && X * S > slot_cap) --S;
            if (S > 1) F = T - X;
            else X = 0;
        } else if (T > 0 && force_split == 0 && smax > 1) {
            const long long r = T % grid;
            if (r) {
                /* single-round tails only (r·S <= G): every unit of the tail then runs at once, in S D-phases
                   over the same r items, and reads each panel chunk once as the whole items would. More rounds
                   put units of different items at different D offsets at once, which loses the sharing of
                   panels between items (run 1: b128 d .1, S = 7 over 3.9 rounds, 0.256 vs 0.217 ms). */
                const double a = 3.0 / chunks;
                double best = 1.0; /* S = 1: one more round of whole items */
                for (int s = 2; s <= smax && r * s <= slot_cap && r * s <= grid; ++s) {
                    const double c = 1.0 / s + a;
                    if (c < best - 1e-9) {
                        best = c;
                        S = s;
                    }
                }
                if (S > 1) {
                    X = r;
                    F = T - r;
                }
            }
        }
        plan[0] = (int)(F + X * S);
        plan[1] = (int)F;
        plan[2] = S;
        plan[3] = (int)T;
        plan[4] = order;
        *counter = 0u;
    }
    for (int i = tid; i < 2 * grid; i += 1024) ctr[i] = 0;
}

/* ---------------------------------------------------------------- epilogue */

template <int CT> struct Out;
template <> struct Out<BSK_F32> {
    static __device__ __forceinline__ float2 ld2(const void *q) { return *(const float2 *)q; }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(float2 *)q = v; }
};
template <> struct Out<BSK_F16> {
    static __device__ __forceinline__ float2 ld2(const void *q) { return __half22float2(*(const __half2 *)q); }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(__half2 *)q = __float22half2_rn(v); }
};
template <> struct Out<BSK_BF16> {
    static __device__ __forceinline__ float2 ld2(const void *q)
    {
        return __bfloat1622float2(*(const __nv_bfloat162 *)q);
    }
    static __device__ __forceinline__ void st2(void *q, float2 v) { *(__nv_bfloat162 *)q = __float22bfloat162_rn(v); }
};

/* Write this consumer's part of the item's blocks. The wgmma accumulator layout (m64nNk16, f32): register i of
   thread (warp w, lane l) holds row 16w + l/4 + 8·((i/2)%2), column 8·(i/4) + 2·(l%4) + (i%2) of the
   consumer's 64 x WGN tile; column n belongs to the consumer's block n / B (block q = 2·(n/B) + c for B = 64,
   n / B for B = 128) at column n % B. Each thread writes pairs of adjacent entries. `jcol[qq]` is the block
   column of the consumer's block qq, or -1 when that block is not written (past the item's end, or a
   malformed column index). */
template <class CF, int CT>
__device__ __forceinline__ void store_blocks(const float *acc, const Params &p, int row, int p0, const int *jcol, int c,
                                             int warp, int lane)
{
    constexpr int ES = CT == BSK_F32 ? 4 : 2;
    constexpr int BB = CF::B * CF::B;
    const int rbase = (CF::SPLIT_N ? 0 : 64 * c) + 16 * warp + (lane >> 2);
    const bool beta = p.beta != 0.0f;
#pragma unroll
    for (int jj = 0; jj < CF::WGN / 8; ++jj) {
        const int qq = (8 * jj) / CF::B;
        const int jc = jcol[qq];
        if (jc < 0) continue;
        const int q = CF::SPLIT_N ? 2 * qq + c : qq;
        const int cc = (8 * jj) % CF::B + 2 * (lane & 3);
        const int gj = jc * CF::B + cc;
        char *blk = (char *)p.V + (long long)(p0 + q) * BB * ES;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = rbase + 8 * h;
            const bool rin = row * CF::B + r < p.M;
            const bool in0 = rin && gj < p.K, in1 = rin && gj + 1 < p.K;
            char *dst = blk + (long long)(r * CF::B + cc) * ES;
            float2 o = make_float2(0.0f, 0.0f); /* padding entries are written as 0 */
            if (in0 || in1) {
                float2 old = make_float2(0.0f, 0.0f);
                if (beta) old = Out<CT>::ld2(dst);
                if (in0) o.x = p.alpha * acc[4 * jj + 2 * h] + p.beta * old.x;
                if (in1) o.y = p.alpha * acc[4 * jj + 2 * h + 1] + p.beta * old.y;
            }
            Out<CT>::st2(dst, o);
        }
    }
}

/* ---------------------------------------------------------------- main kernel */

template <int N, int DT> struct Mma;
template <> struct Mma<256, BSK_F16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_f16<0, 0>(d, a, b, 1); }
};
template <> struct Mma<256, BSK_BF16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_bf16<0, 0>(d, a, b, 1); }
};
template <> struct Mma<128, BSK_F16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_f16<0, 0>(d, a, b, 1); }
};
template <> struct Mma<128, BSK_BF16> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_bf16<0, 0>(d, a, b, 1); }
};

/* Registers per thread after setmaxnreg (the SpMM kernel's split: 128 x 56 + 256 x 224 <= 384 x 168). */
constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= 384 * 168, "register budget");

/* unit u -> item t, D chunks [c0, c1), part and parts. X split items follow the F whole ones, item-major
   (the S parts of an item adjacent) or part-major (part 0 of every split item, then part 1, ...). */
__device__ __forceinline__ void decode_unit(int u, int F, int S, int X, int order, int chunks, int &t, int &c0, int &c1,
                                            int &part, int &parts)
{
    if (u < F) {
        t = u;
        part = 0;
        parts = 1;
        c0 = 0;
        c1 = chunks;
    } else {
        const int v = u - F;
        t = order ? F + v % X : F + v / S;
        part = order ? v / X : v % S;
        parts = S;
        c0 = (int)((long long)part * chunks / S);
        c1 = (int)((long long)(part + 1) * chunks / S);
    }
}

template <class CF, int DT>
__global__ void __launch_bounds__(384, 1)
    sddmm_kernel(const __grid_constant__ CUtensorMap tmX, const __grid_constant__ CUtensorMap tmY, const Params p)
{
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sbase = smem_u32(smem);
    const uint32_t full0 = sbase + CF::BAR_OFF, empty0 = full0 + 8 * CF::STAGES;
    int4 *meta = (int4 *)(smem + CF::META_OFF);
    volatile int *role_sh = (volatile int *)(smem + CF::ROLE_OFF);
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;

    if (threadIdx.x == 0) {
        for (int s = 0; s < CF::STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8); /* one arrival per consumer warp */
        }
        mbar_init_fence();
        tma_prefetch_desc(&tmX);
        tma_prefetch_desc(&tmY);
    }
    __syncthreads();
    grid_dep_wait(); /* the prep kernel's items, plan and zeroed counters are visible from here on */
    const int U = p.plan[0], F = p.plan[1], S = p.plan[2], X = S > 1 ? (U - F) / S : 1, order = p.plan[4];

    if (wg == 0) {
        /* ------------------------------------------------------------ producer */
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0) {
            uint32_t s = 0, ph = 0;
            for (;;) {
                unsigned u = 0;
                if (lane == 0) u = atomicAdd(p.counter, 1u);
                u = __shfl_sync(0xffffffffu, u, 0);
                if (u >= (unsigned)U) {
                    if (lane == 0) {
                        mbar_wait(empty0 + 8 * s, ph ^ 1);
                        meta[s] = make_int4(0, 0, 0, META_END);
                        mbar_arrive(full0 + 8 * s);
                    }
                    break;
                }
                int t, c0, c1, part, parts;
                decode_unit((int)u, F, S, X, order, p.chunks, t, c0, c1, part, parts);
                const int4 it = p.items[t];
                const int n = it.z;
                int j = -1;
                if (lane < n) j = __ldg(p.col_idx + it.y + lane);
                const bool ok = lane < n && (unsigned)j < (unsigned)p.nb;
                const unsigned vm = __ballot_sync(0xffffffffu, ok);
                int jq[CF::GB];
#pragma unroll
                for (int q = 0; q < CF::GB; ++q) jq[q] = __shfl_sync(0xffffffffu, j, q);
                const uint32_t bytes = (uint32_t)CF::X_BYTES + (uint32_t)__popc(vm) * (uint32_t)CF::YB;
                const int xrow = it.x * CF::B;
                for (int c = c0; c < c1; ++c) {
                    if (lane == 0) {
                        mbar_wait(empty0 + 8 * s, ph ^ 1);
                        meta[s] = make_int4((int)u, n, 0, c == c1 - 1 ? META_LAST : 0);
                        const uint32_t fb = full0 + 8 * s;
                        mbar_arrive_expect_tx(fb, bytes);
                        tma_load_2d(sbase + CF::X_OFF + s * CF::X_BYTES, &tmX, fb, c * 64, xrow);
                        const uint32_t ydst = sbase + CF::Y_OFF + s * CF::Y_BYTES;
#pragma unroll
                        for (int q = 0; q < CF::GB; ++q)
                            if ((vm >> q) & 1u)
                                tma_load_2d(ydst + CF::yslot(q) * CF::YB, &tmY, fb, c * 64, jq[q] * CF::B);
                    }
                    if (++s == CF::STAGES) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }
        }
    } else {
        /* ------------------------------------------------------------ consumers */
        setmaxnreg_inc<CONSUMER_REGS>();
        /* c through a warp reduction: a uniform register, so the descriptors derived from it stay in uniform
           registers (from threadIdx each wgmma's descriptors were rebuilt in per-thread registers and moved over
           with four R2UR; session 14, as in the small-block SpMM and the attention kernel) */
        const int c = (int)__reduce_or_sync(0xffffffffu, (unsigned)(wg - 1));
        const int ctid = threadIdx.x - 128; /* 0..255 over both consumers */
        float acc[CF::NACC];
        uint32_t s = 0, ph = 0;
        const uint32_t a_off = CF::SPLIT_N ? 0u : (uint32_t)c * 64u * 128u;
        const uint32_t b_off = CF::SPLIT_N ? (uint32_t)c * (uint32_t)CF::WGN * 128u : 0u;
        for (;;) {
            mbar_wait(full0 + 8 * s, ph);
            int4 m = stage_record_read(&meta[s], lane);
            if (m.w & META_END) break;
            const int u = m.x, n = m.y;
            /* this consumer's blocks: B 64: q % 2 == c; B 128: all (it takes half of the rows) */
            const int nc = CF::SPLIT_N ? min(max((n + 1 - c) >> 1, 0), CF::BPC) : min(n, CF::BPC);
#pragma unroll
            for (int i = 0; i < CF::NACC; ++i) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < CF::NACC; ++i) reg_fence(acc[i]);
            for (;;) {
                if (nc > 0) {
                    const uint32_t xa = sbase + CF::X_OFF + s * CF::X_BYTES + a_off;
                    const uint32_t yb = sbase + CF::Y_OFF + s * CF::Y_BYTES + b_off;
                    wgmma_fence();
#pragma unroll
                    for (int k = 0; k < 4; ++k)
                        Mma<CF::WGN, DT>::run(acc, smem_desc(xa + 32 * k, 16, 1024), smem_desc(yb + 32 * k, 16, 1024));
                    wgmma_commit();
                    wgmma_wait<0>();
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(empty0 + 8 * s); /* release the stage */
                if (++s == CF::STAGES) {
                    s = 0;
                    ph ^= 1;
                }
                if (m.w & META_LAST) break;
                mbar_wait(full0 + 8 * s, ph);
                m.w = stage_word_read(&meta[s].w, lane);
            }
#pragma unroll
            for (int i = 0; i < CF::NACC; ++i) reg_fence(acc[i]);

            int t, c0, c1, part, parts;
            decode_unit(u, F, S, X, order, p.chunks, t, c0, c1, part, parts);
            if (parts > 1) {
                /* D-split item: the last part to arrive adds the others' partial tiles (in part order) and
                   writes; the others store theirs in their own slot. One ticket per CTA (both consumers). */
                const int si = t - F;
                int *ctr = p.ctr + 2 * si;
                float4 *slot0 = (float4 *)(p.slots + (size_t)si * parts * CF::SLOT_FLOATS);
                named_bar_sync(1, 256);
                if (ctid == 0) *role_sh = atomicAdd(ctr, 1);
                named_bar_sync(1, 256);
                const int role = *role_sh;
                if (role < parts - 1) {
                    float4 *mine = slot0 + (size_t)part * (CF::SLOT_FLOATS / 4);
#pragma unroll
                    for (int k = 0; k < CF::NACC / 4; ++k)
                        __stcg(mine + k * 256 + ctid, make_float4(acc[4 * k], acc[4 * k + 1], acc[4 * k + 2], acc[4 * k + 3]));
                    __threadfence();
                    named_bar_sync(1, 256);
                    if (ctid == 0) atomicAdd(ctr + 1, 1);
                    continue;
                }
                if (ctid == 0) {
                    /* every other part has taken its ticket, i.e. finished its mainloop: only its stores remain */
                    while (*(volatile int *)(ctr + 1) < parts - 1) __nanosleep(64);
                    __threadfence();
                }
                named_bar_sync(1, 256);
                /* sum in part order, P0 + P1 + ...: the own part goes through its slot unless it is part 0 */
                float4 *mine = slot0 + (size_t)part * (CF::SLOT_FLOATS / 4);
                if (part != 0) {
#pragma unroll
                    for (int k = 0; k < CF::NACC / 4; ++k)
                        __stcg(mine + k * 256 + ctid, make_float4(acc[4 * k], acc[4 * k + 1], acc[4 * k + 2], acc[4 * k + 3]));
#pragma unroll
                    for (int k = 0; k < CF::NACC / 4; ++k) {
                        const float4 v = __ldcg(slot0 + k * 256 + ctid);
                        acc[4 * k] = v.x;
                        acc[4 * k + 1] = v.y;
                        acc[4 * k + 2] = v.z;
                        acc[4 * k + 3] = v.w;
                    }
                }
                for (int q = 1; q < parts; ++q) {
                    const float4 *sq = slot0 + (size_t)q * (CF::SLOT_FLOATS / 4);
#pragma unroll
                    for (int k = 0; k < CF::NACC / 4; ++k) {
                        const float4 v = __ldcg(sq + k * 256 + ctid);
                        acc[4 * k] += v.x;
                        acc[4 * k + 1] += v.y;
                        acc[4 * k + 2] += v.z;
                        acc[4 * k + 3] += v.w;
                    }
                }
            }
            /* the item's blocks: this consumer's block columns (-1: not written) */
            const int4 it = p.items[t];
            int jcol[CF::BPC];
#pragma unroll
            for (int qq = 0; qq < CF::BPC; ++qq) {
                const int q = CF::SPLIT_N ? 2 * qq + c : qq;
                int jc = -1;
                if (q < it.z) {
                    jc = __ldg(p.col_idx + it.y + q);
                    if ((unsigned)jc >= (unsigned)p.nb) jc = -1;
                }
                jcol[qq] = jc;
            }
            if (p.vtype == BSK_F32)
                store_blocks<CF, BSK_F32>(acc, p, it.x, it.y, jcol, c, warp, lane);
            else
                store_blocks<CF, DT>(acc, p, it.x, it.y, jcol, c, warp, lane);
        }
    }
}

} // namespace sddmm
} // namespace bsk_hopper
#endif
