/* spmm_small_kernel.cuh — the Hopper BSR x dense SpMM for small square blocks (BS = 32 or 16), swapped operands.

   C (M x N) = alpha * A (BSR, BS x BS blocks) * B (K x N row-major) + beta * C, computed as Cᵀ = Bᵀ·Aᵀ with wgmma:
   wgmma M = 64 columns of C, wgmma N = BS = the rows of one block row, K = BS per block column. Why swapped: a
   block of 32 or 16 rows cannot fill wgmma's M = 64, and each kept block needs its own BS x N slice of B, so a
   one-row tile moves ~1/BS bytes of B per flop (31 KB per MFLOP at BS 32: capped near E 0.33 by the ~7.7 TB/s
   L2 -> SM ceiling, docs/hopper-spmm-notes.md). Here a CTA owns R = 256/BS consecutive block rows (a row group)
   x 128 columns and walks the UNION of the R rows' column lists: the B panel of a column is loaded once for all
   rows of the group that have it (the point of the design); each present row adds only its BS x BS block.

   Wide items (NH, session 19): each consumer may own NH = 2 or 4 adjacent 64-column halves (its accumulators stay
   at 128 registers: R = 256 / (BS * NH) rows x 128 * NH columns per item). Per entry both sides then do the same
   fixed work (the producer's index bits, barrier and TMA issues; the consumer's barrier, record and guards) for NH
   times the columns, and the union of fewer rows is shorter by less than the entries' count falls: b32 NH 4 (two
   block rows x 512 columns) +50 % at d 0.1 at 8192^3, the default at low density (spmm_small_hopper.cu).

   Work item = (row group, N tile of 128 * NH columns). A persistent grid (one CTA per SM) takes items from an atomic
   counter in the order the prep kernels fixed: groups sorted by union length (longest first), cut into bands
   whose A blocks fit an L2 budget; inside a band the N tile is the outer index, so the CTAs running together
   share B panels and each group's A blocks stay in L2 across N tiles. Direct mode (session 27: the items fit the
   grid, no cached lists): no prep kernels; CTA t runs item t and builds its group's union list itself first.

   CTA = 3 warpgroups:
     - WG0, the producers (setmaxnreg.dec): PW = 4 warps taking turns by stage (stage i of the CTA: warp i % PW;
       one warp's serial issue chain, ~110 dependent SASS instructions per entry, was the limit: session 8; the
       four warps still bound the b32 kernel in session 13, each busy ~90 % of its time). Per
       stage a warp takes KC entries (col, rowmask) of the group's union list (32 entries per coalesced load, the
       next 32 one chunk ahead, shuffled out) and TMA-loads, per entry, the B rows col*BS .. +BS-1 x the item's 128
       columns (two 64-column boxes, 128-byte swizzle) and the block of every present row into that row's fixed
       slot (3-D map over the values [nnzb][BS][BS], 64-byte swizzle at BS 32, 32-byte at BS 16; with RG > 1 it
       also zeroes the slots that the consumers will read as absent rows, below; with CP (compact pairs, the b32
       default at 2 rows per wgmma) a stage's two entries share R row slots plus a few overflow slots for entry 1's
       row groups that entry 0 also has, and a pair with more of them is issued as two stages). Lane r (< R)
       finds its row's block index without walking the entries before: per 32-entry window R ballots give it the
       mask of the window's entries that have row r, and the index is its cursor at the window start + the mask
       bits below the entry, so the mainloop reads no col_idx. It writes a small meta record per stage (group, N
       tile, the KC x R-bit masks of rows whose block was loaded, LAST / END flags). The next item's ticket (warp 0
       takes it and hands it to the others at a named barrier), descriptor, row bounds and first entries are
       loaded during the current item's first stages.
     - WG1, WG2, the consumers (setmaxnreg.inc): consumer c owns columns 64c .. 64c+63 of the tile (NH > 1: the
       halves 64 (c NH + h), h < NH, each its own wgmmas on its own B box, the same A slots). Per stage and
       entry it issues one wgmma m64n(RG*BS)k16 per k16 step for each group of RG adjacent row slots that has a
       present row, accumulating into those rows' sets (R fp32 sets of BS/2 registers each: 128 registers; RG
       consecutive sets are the registers of one wider wgmma, and RG adjacent blocks of an entry's slots are one
       K-major operand with the same descriptor). RG (session 9) by density: b32 2 below d 0.3 else 1, b16 4 below
       d 0.2 else 16 (all rows: 2 wgmmas per entry instead of up to 32 guarded slots per stage). With RG > 1 the
       absent rows of a present group must read zeros: the producer keeps per ring slot the mask of row slots that
       still hold a block and zeroes those of absent rows in present groups — up to 4 rows per wgmma as TMA loads
       of a block past the end of A's map (zero filled, part of the stage's bytes; session 13), above that by
       16-byte stores + proxy fence before arming the stage; such rows then add B·0 (a non-finite B value reaches
       them, as in a dense product). The wgmma A operand is its 64 x BS slice of Bᵀ: the
       B box read M-major (trans-a) from shared memory, the same tile for every row of the stage; the B operand
       is the row's block, K-major, from its slot (64 / 32-byte swizzle descriptor). Absent rows are skipped by a
       guard predicate on each wgmma of a compile-time unrolled loop (a branch around them made ptxas serialise
       every wgmma). Each stage's wgmmas stay in flight while the next stage's are issued (wait_group 1): run 1
       of session 4 waited for each stage's group and took Bᵀ through registers (ldmatrix.trans: variant 2),
       and lost ~700 cycles per stage to that round trip.
       After the item's LAST stage: the epilogue. 16-bit C with beta = 0 (TS, session 16): each block row's
       64 x BS tile, alpha applied, goes by stmatrix.trans into a 128-byte-swizzled 16-bit buffer and out by a
       TMA store clipped at M and N — two buffers per consumer, so the stores run on under the next round and
       the next item. Otherwise the tile is transposed through a padded fp32 buffer (row pitch 68 floats:
       conflict-free writes and 16-byte reads) and C rows are stored with 16-byte vectors, alpha/beta applied
       (beta = 0 never reads C), masked at the M and N tails.
   Malformed device indices cannot cause out-of-bounds access: row_ptr values are clamped to [0, nnzb]; the
   union lists hold only columns in [0, nb) and never more entries than the group's clamped range; a row's block
   is loaded only while its index is below its clamped end; TMA never reads outside its tensors. */
#ifndef BSK_HOPPER_SPMM_SMALL_KERNEL_CUH
#define BSK_HOPPER_SPMM_SMALL_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <limits.h>
#include <type_traits>
#include <utility>
#include "bsk.h" /* bsk_dtype */
#include "ptx.cuh"
#include "../scan.cuh" /* warp_incl_scan, block_excl_scan */

/* -DBSK_SMALL_PROF: cycle counters in the small kernel (probe builds only; SP_* below) */
#ifdef BSK_SMALL_PROF
#define SPROF(...) __VA_ARGS__
#else
#define SPROF(...)
#endif

/* Own namespace: spmm_kernel.cuh has templates of the same names in bsk_hopper (Cfg, OutT); identical mangled
   names with different bodies in two translation units would be merged by the linker. */
namespace bsk_small {

using namespace bsk_hopper;

/* Plain parameters of the main kernel (the tensor maps travel separately as __grid_constant__). */
struct SmallParams {
    int2 *ent;              /* union entries {col, rowmask}; group g's at [order.y, order.y + order.z) (direct
                               mode: item t's at [t * nb, ..), written by CTA t itself)                        */
    const int4 *order;      /* per rank: {group, first entry, union length, 0}; longest groups first         */
    const int32_t *row_ptr;
    const int32_t *col_idx; /* read in direct mode only                                                      */
    int direct;             /* 1: no prep kernels ran; CTA t runs item t (the items fit the grid) and builds its
                               union list itself (session 27); order unused, the counter the context's queue   */
    unsigned *counter;      /* work queue {head, CTAs done}: zero at the launch (the order kernel zeroes them; the
                               last CTA to take its last ticket resets them for the next launch, which a pattern-
                               cached call makes without the prep kernels)                                      */
    void *C;
    int64_t ldc;
    float alpha, beta;
    int M, N;               /* C is M x N                                                                    */
    int mb, nb, nnzb;
    int G;                  /* row groups                                                                    */
    int nt;                 /* N tiles of 128 columns                                                        */
    int band;               /* groups per band                                                               */
    unsigned total;         /* G * nt                                                                        */
    int diag;               /* experiments only (results wrong): 1 the records carry no rows (consumers idle,
                               loads unchanged: the load pipeline alone), 2 no A-block loads, 3 no loads at all
                               and consumers idle (the barrier / instruction pipeline alone)                    */
    long long *prof;        /* -DBSK_SMALL_PROF builds: per-CTA cycle counters (SMALL_PROF_N per CTA)         */
    int zero_tma;           /* RG > 1: 1 the row slots to zero are TMA loads of a block past the end of A's map (zero
                               filled, part of the stage's bytes); 0 the producer warp stores zeros (+ proxy fence) */
    int zblk;               /* A's map extent in blocks: block index zblk is entirely out of bounds                 */
    int b3d;                /* KC 1, NH > 1: an entry's 2 NH B boxes as one 3-D box of tmB3 (N % 64 == 0; session 19)  */
};

/* -DBSK_SMALL_PROF: cycle counters, SMALL_PROF_N per CTA (summed by the probe). */
enum {
    SP_P_TOTAL, SP_P_EMPTY, SP_P_STAGES, SP_P_ENTRIES, SP_P_BLOCKS, SP_C_TOTAL, SP_C_WAIT, SP_C_MMA, SP_C_EPI,
    SP_C_STAGES, SP_C_WAITED, SP_LAT_WAITED, SP_LAT_ALL, SP_C_ITEMS,
    SP_PRO,   /* kernel entry -> the producer's start (the direct mode's list build; session 27) */
    SP_FIRST, /* kernel entry -> consumer 0's first stage ready */
    SMALL_PROF_N = 16
};

enum { SM_LAST = 1, SM_END = 2 };

/* Compile-time shape. KC union entries (block columns) per stage; R = 256 / (BS * NH) rows per group. A stage is
   [B box q = 0 (columns 0-63 of the item: KC*BS rows x 128 bytes)] .. [box 2 NH - 1] (consumer c reads boxes c NH ..
   c NH + NH - 1) [A slots: KC x R blocks, or R + overflow slots with CP]. */
template <int BS_, int KC_, int STAGES_, bool SS_ = true, int EPR_ = 64 / BS_, int PW_ = 1, int RG_ = 1, bool KO_ = false,
          int AS_ = 0, bool CP_ = false, int PREG_ = 72, int NH_ = 1>
struct SmallCfg {
    static constexpr int BS = BS_;
    /* SS: Bᵀ read by wgmma from the B box in shared memory (trans-a) and each stage's wgmma group left in flight
       while the next stage's is issued (wait_group 1); otherwise Bᵀ goes through registers (ldmatrix.trans) and
       each stage waits for its own group (wait_group 0). */
    static constexpr bool SS = SS_;
    static constexpr int KC = KC_;
    static constexpr int STAGES = STAGES_;
    static_assert(BS_ == 32 || BS_ == 16, "BS 32 or 16");
    /* PW producer warps: stage gsi of the CTA is issued by warp gsi % PW (each finds its rows' block indices from
       per-window bit masks, no serial cursor from entry to entry). */
    static constexpr int PW = PW_;
    static_assert(PW_ >= 1 && PW_ <= 4 && STAGES_ >= PW_, "PW 1-4, at most STAGES");
    static_assert(KC_ == 1 || KC_ == 2, "KC 1 or 2 (entries of one stage stay inside one 32-entry chunk)");
    /* NH (session 19): 64-column halves per consumer — an item is R = 256 / (BS * NH) block rows x 128 * NH
       columns (the accumulators stay at 128 registers); NH 2 halves the group's rows and doubles each entry's
       columns, so the per-entry costs of both sides (the producer's index work and TMA issues, the consumer's
       barrier, record and guards) buy twice the columns */
    static constexpr int NH = NH_;
    static_assert(NH_ == 1 || ((NH_ == 2 || NH_ == 4) && SS_ && !KO_ && 256 / BS_ / NH_ >= 2),
                  "NH 1, or 2 / 4 with Bᵀ from shared memory, group-outer order, at least 2 rows per group");
    static constexpr int R = 256 / BS_ / NH_;         /* block rows per group                             */
    static constexpr int RMASK = (1 << R) - 1;
    /* RG: consecutive row slots of an entry per wgmma (m64n(RG*BS)k16 over RG adjacent blocks, issued when any of
       them is present; the producer zeroes the slots of absent rows in a present group). 1: one wgmma per row. */
    static constexpr int RG = RG_;
    static_assert(RG_ >= 1 && R % RG_ == 0 && (RG_ == 1 || SS_), "RG divides R; RG > 1 needs Bᵀ from shared memory");
    static constexpr int GMASK = (1 << RG_) - 1;      /* one group's row bits                             */
    /* KO (experiment, session 9): an entry's wgmmas issued k16 step outer, row group inner (else group outer), so
       that the two k16 steps of one accumulator set are not issued back to back */
    static constexpr bool KO = KO_;
    static constexpr int KS = BS_ / 16;               /* k16 steps per block                              */
    static constexpr int BN = 128 * NH_;              /* columns per item                                 */
    static constexpr int SUB_BYTES = KC_ * BS_ * 128; /* one 64-column B box per entry (consumer c, half h: c * NH + h) */
    static constexpr int B_BYTES = 2 * NH_ * SUB_BYTES;
    static constexpr int BLK_BYTES = BS_ * BS_ * 2;
    /* AS (timing experiment, results wrong): A slots per stage; the KC entries' row slots alias modulo AS, so a
       stage is as large as the compact A region of a sparse stage would be (session 12). 0: KC * R, no alias. */
    static constexpr int A_SLOTS = AS_ ? AS_ : KC_ * R;
    /* CP (compact pairs, session 12): a stage holds two entries in R row slots + (A_SLOTS - R) overflow slots: entry 1's
       row groups that entry 0 also has go to the overflow slots in group order (the consumer finds them from the
       overflow mask in the record's flags, bits 8..), and a pair with more such groups than fit is issued as two
       one-entry stages. Every producer warp numbers the stages the same way (one ballot per 32-entry window). */
    static constexpr bool CP = CP_;
    static_assert(!CP_ || (KC_ == 2 && SS_ && !KO_ && AS_ >= R && (AS_ - R) % RG_ == 0),
                  "CP: two entries per stage, Bᵀ from shared memory, R + whole groups of overflow slots");
    static constexpr int XG = CP_ ? (AS_ - R) / RG_ : 0; /* overflow groups per stage                         */
    static_assert(CP_ || (A_SLOTS % R == 0 && A_SLOTS <= KC_ * R), "AS: whole entries' worth of row slots");
    static __device__ __forceinline__ uint32_t aslot(int k) { return (uint32_t)(k % A_SLOTS); }
    /* the A slot of row r of entry j of a stage (CP: ov = entry 1's groups in the overflow slots); producer and
       consumers both use it */
    static __device__ __forceinline__ uint32_t slot(int j, int r, uint32_t ov)
    {
        if constexpr (CP_) {
            const int q = r / RG_;
            if (j == 0 || !((ov >> q) & 1u)) return (uint32_t)r;
            return (uint32_t)(R + RG_ * __popc(ov & ((1u << q) - 1u)) + (r - q * RG_));
        } else {
            return aslot(j * R + r);
        }
    }
    static constexpr int A_BYTES = A_SLOTS * BLK_BYTES;
    static constexpr int STAGE_BYTES = B_BYTES + A_BYTES;
    static_assert(STAGE_BYTES % 1024 == 0, "stages stay 1024-byte aligned (128-byte swizzle of the B boxes)");
    static constexpr int ENTRY_B_BYTES = 2 * NH_ * BS_ * 128; /* the B bytes of one entry (both consumers)  */
    /* A blocks: K-major B operand, rows of BS*2 bytes, swizzle of that width; 8-row groups SBO apart */
    static constexpr uint32_t A_SWZ = BS_ == 32 ? 2u : 3u; /* descriptor mode: 64-byte, 32-byte           */
    static constexpr uint32_t A_SBO = 8u * BS_ * 2u;
    /* epilogue staging per consumer: EPR block rows (EPR * BS C rows) x 64 columns fp32, row pitch 68 floats */
    static constexpr int PITCH = 68;
    static constexpr int EPR = EPR_;
    static_assert(EPR_ >= 1 && R % EPR_ == 0, "EPR divides R");
    static constexpr int STG_ROWS = EPR_ * BS_;
    static constexpr int STG_WG_BYTES = STG_ROWS * PITCH * 4;
    static constexpr int STG_OFF = STAGES_ * STAGE_BYTES;
    /* TS epilogue (16-bit C, beta = 0): the same region seen as two 1024-byte-aligned buffers per consumer of
       TS_ROWS C rows x 64 columns, 16-bit, 128-byte swizzled (BS 32: 2 x 4 KB, 32 rows; BS 16: 2 x 8 KB, 64 rows) */
    static constexpr int TS_BUF = STG_WG_BYTES / 2048 * 1024;
    static constexpr int TS_ROWS = TS_BUF / 128;
    static_assert(TS_ROWS % BS_ == 0 && 256 % TS_ROWS == 0 && TS_BUF % 1024 == 0, "TS rounds: whole block rows");
    static constexpr int BAR_OFF = STG_OFF + 2 * STG_WG_BYTES;
    static constexpr int META_OFF = BAR_OFF + 2 * STAGES_ * 8;
    /* per stage: the record {group, N tile, masks, flags}, then {-, -, clock (-DBSK_SMALL_PROF), -} */
    static constexpr int TICK_OFF = META_OFF + STAGES_ * 32;    /* PW > 1: the next item's ticket, 2 slots    */
    static constexpr int SMEM = TICK_OFF + 16 + 1024;           /* + slack to align the base to 1024        */
    static constexpr int THREADS = 384;
    /* registers per thread after setmaxnreg: the producer warpgroup's PREG, the consumers' what the CTA's 384 x 168
       leaves, rounded down to a multiple of 8 (72: 216; 88: 208) */
    static constexpr int PREG = PREG_;
    static constexpr int CREG = (384 * 168 - 128 * PREG_) / 256 / 8 * 8;
    static_assert(PREG_ % 8 == 0 && PREG_ >= 24 && CREG <= 256, "setmaxnreg counts");
};

/* ---------------------------------------------------------------- prep 1: the union lists */

#define SMALL_UNION_THREADS 256
#define SMALL_UNION_CH 4096 /* columns per pass of the shared mask array (16 KB) */

/* The union list of one row group, computed by the T threads of a CTA (all of them call it, it syncs them): the
   group's rows are scattered into a shared array of R-bit row masks over a window of min(SMALL_UNION_CH, nb - c0)
   columns (integer atomicOr: order-free), which is compacted in column order into out[0 ..], at most `cap` entries
   (the union kernel: out = ent + gs, gs = the group's first block (clamped row_ptr), cap = the group's clamped end -
   gs: the union of the rows' columns is never longer than their blocks together, so groups never overlap for a valid
   row_ptr, and every write stays inside [0, nnzb) for any row_ptr). The scatter walks the group's whole block span
   [min rs, max re) in one pass, each block tested against every row's range (for a valid row_ptr the rows tile the
   span; a malformed one may give overlapping or empty ranges): all its col_idx loads are in flight at once — row by
   row they were R dependent round trips to memory (~8 us of a 2048^3 call, session 16). The next window starts at
   the smallest column past the current one, so empty stretches of a wide matrix cost nothing. Columns outside
   [0, nb) are left out. Returns {gs, length} to every thread; `us` is left for the caller to reuse once the threads
   have passed a barrier after the call. R <= 16. */
struct UnionSmem {
    uint32_t mask[SMALL_UNION_CH];
    int rs[16], re[16], span[2];
    int warp_tot[32];
    int next;
};
template <int T>
__device__ __forceinline__ int2 group_union(const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col_idx,
                                            int mb, int nb, int nnzb, int R, int g, int2 *out, int cap_max,
                                            bool at_gs, UnionSmem &us)
{
    static_assert(T % 32 == 0 && T <= 1024, "whole warps");
    constexpr int PER = (SMALL_UNION_CH + T - 1) / T; /* consecutive columns per thread in the compaction */
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int row0 = g * R, nr = min(R, mb - row0);
    auto clampi = [&](int v) { return min(max(v, 0), nnzb); };
    const int gs = clampi(row_ptr[row0]), ge = clampi(row_ptr[row0 + nr]);
    const int cap = min(max(ge - gs, 0), cap_max);
    if (at_gs) out += gs;
    if (tid < 32) { /* the rows' clamped ranges and the span they cover (nr <= 16 < 32) */
        int a = 0, b = 0;
        if (tid < nr) {
            a = clampi(row_ptr[row0 + tid]);
            b = max(a, clampi(row_ptr[row0 + tid + 1]));
            us.rs[tid] = a;
            us.re[tid] = b;
        }
        int lo = tid < nr ? a : INT_MAX, hi = tid < nr ? b : 0;
        for (int o = 16; o > 0; o >>= 1) {
            lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
            hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
        }
        if (tid == 0) {
            us.span[0] = lo;
            us.span[1] = hi;
        }
    }
    int count = 0, c0 = 0;
    __syncthreads();
    const int k0 = us.span[0], k1 = us.span[1];
    while (c0 < nb) {
        const int W = min(SMALL_UNION_CH, nb - c0); /* the window's columns */
        for (int i = tid; i < W; i += T) us.mask[i] = 0u;
        if (tid == 0) us.next = INT_MAX;
        __syncthreads();
        int nxt = INT_MAX;
        for (int k = k0 + tid; k < k1; k += T) {
            const int c = __ldg(col_idx + k);
            if (c < c0 || c >= nb) continue;
            uint32_t bits = 0u;
            for (int r = 0; r < nr; ++r) bits |= (k >= us.rs[r] && k < us.re[r]) ? 1u << r : 0u;
            if (!bits) continue;
            if (c - c0 < W) atomicOr(&us.mask[c - c0], bits);
            else nxt = min(nxt, c);
        }
        if (nxt != INT_MAX) atomicMin(&us.next, nxt);
        __syncthreads();
        /* compaction: thread tid owns columns tid*PER .. +PER-1 of the window */
        int n = 0;
#pragma unroll
        for (int q = 0; q < PER; ++q) n += tid * PER + q < W && us.mask[tid * PER + q] != 0u;
        /* not block_excl_scan: each thread adds the warps' totals itself (one barrier, not three) */
        const int x = warp_incl_scan(n);
        if (lane == 31) us.warp_tot[w] = x;
        __syncthreads();
        int before = 0, total = 0;
#pragma unroll
        for (int i = 0; i < T / 32; ++i) {
            const int v = us.warp_tot[i];
            before += i < w ? v : 0;
            total += v;
        }
        int pos = count + before + x - n;
#pragma unroll
        for (int q = 0; q < PER; ++q) {
            const uint32_t m = tid * PER + q < W ? us.mask[tid * PER + q] : 0u;
            if (m) {
                if (pos < cap) out[pos] = make_int2(c0 + tid * PER + q, (int)m);
                ++pos;
            }
        }
        count += total;
        const int nx = us.next;
        __syncthreads(); /* mask, warp_tot and next are rewritten by the next window */
        c0 = nx;         /* INT_MAX (>= nb) when no column lies past the window */
    }
    return make_int2(gs, min(count, cap));
}

/* One CTA per row group (grid-stride), each group's union list (group_union above) into ent[gs ..];
   ginfo[g] = {gs, length}. */
__global__ void __launch_bounds__(SMALL_UNION_THREADS)
    small_union_kernel(const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col_idx, int mb, int nb,
                       int nnzb, int R, int G, int2 *__restrict__ ent, int2 *__restrict__ ginfo)
{
    __shared__ UnionSmem us;
    grid_dep_launch(); /* the order kernel may start (it waits for this grid before reading ginfo) */
    for (int g = blockIdx.x; g < G; g += gridDim.x) {
        const int2 gi = group_union<SMALL_UNION_THREADS>(row_ptr, col_idx, mb, nb, nnzb, R, g, ent, INT_MAX, true, us);
        if (threadIdx.x == 0) ginfo[g] = gi;
        __syncthreads(); /* rs / re are rewritten by the next group */
    }
}

/* ---------------------------------------------------------------- prep 2: the item order */

/* One CTA of 1024 threads: a counting sort of the groups by union length, longest first (lengths past 1023 share
   the top bin), writing order[rank] = {group, first entry, length, 0}; zeroes the queue head. Launched as a
   programmatic dependent of the union kernel (its launch and start overlap that kernel; it waits for it before
   touching memory — by then the previous call's main kernel, which the union kernel waited for, is done too), and
   it lets the main kernel start at once in turn; that kernel waits for this one's memory first. */
__global__ void __launch_bounds__(1024, 1)
    small_order_kernel(const int2 *__restrict__ ginfo, int G, int4 *__restrict__ order, unsigned *__restrict__ counter)
{
    grid_dep_launch();
    grid_dep_wait();
    __shared__ int hist[1024];
    __shared__ int warp_tot[33];
    const int tid = threadIdx.x;
    hist[tid] = 0;
    if (tid == 0) counter[0] = counter[1] = 0u;
    __syncthreads();
    for (int g = tid; g < G; g += 1024) atomicAdd(&hist[1023 - min(ginfo[g].y, 1023)], 1);
    __syncthreads();
    int total; /* the sum (G): unused */
    hist[tid] = block_excl_scan(hist[tid], warp_tot, &total);
    __syncthreads();
    for (int g = tid; g < G; g += 1024) {
        const int2 gi = ginfo[g];
        const int pos = atomicAdd(&hist[1023 - min(gi.y, 1023)], 1);
        order[pos] = make_int4(g, gi.x, gi.y, 0);
    }
}

/* ---------------------------------------------------------------- epilogue helpers */

template <int CT> struct SOut;
template <> struct SOut<BSK_F32> { /* 4 elements = 16 bytes */
    static constexpr int V = 4;
    static __device__ __forceinline__ void ld(const char *q, float *o)
    {
        const float4 v = *(const float4 *)q;
        o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
    }
    static __device__ __forceinline__ void st(char *q, const float *o) { *(float4 *)q = make_float4(o[0], o[1], o[2], o[3]); }
    static __device__ __forceinline__ float ld1(const char *q) { return *(const float *)q; }
    static __device__ __forceinline__ void st1(char *q, float v) { *(float *)q = v; }
};
template <> struct SOut<BSK_F16> { /* 8 elements = 16 bytes */
    static constexpr int V = 8;
    static __device__ __forceinline__ void ld(const char *q, float *o)
    {
        const uint4 u = *(const uint4 *)q;
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __half22float2(*(const __half2 *)&w[i]);
            o[2 * i] = f.x;
            o[2 * i + 1] = f.y;
        }
    }
    static __device__ __forceinline__ void st(char *q, const float *o)
    {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const __half2 h = __floats2half2_rn(o[2 * i], o[2 * i + 1]);
            w[i] = *(const uint32_t *)&h;
        }
        *(uint4 *)q = make_uint4(w[0], w[1], w[2], w[3]);
    }
    static __device__ __forceinline__ float ld1(const char *q) { return __half2float(*(const __half *)q); }
    static __device__ __forceinline__ void st1(char *q, float v) { *(__half *)q = __float2half_rn(v); }
};
template <> struct SOut<BSK_BF16> {
    static constexpr int V = 8;
    static __device__ __forceinline__ void ld(const char *q, float *o)
    {
        const uint4 u = *(const uint4 *)q;
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[i]);
            o[2 * i] = f.x;
            o[2 * i + 1] = f.y;
        }
    }
    static __device__ __forceinline__ void st(char *q, const float *o)
    {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const __nv_bfloat162 h = __floats2bfloat162_rn(o[2 * i], o[2 * i + 1]);
            w[i] = *(const uint32_t *)&h;
        }
        *(uint4 *)q = make_uint4(w[0], w[1], w[2], w[3]);
    }
    static __device__ __forceinline__ float ld1(const char *q) { return __bfloat162float(*(const __nv_bfloat16 *)q); }
    static __device__ __forceinline__ void st1(char *q, float v) { *(__nv_bfloat16 *)q = __float2bfloat16_rn(v); }
};

/* ROWS staged rows (pitch PITCH floats) x 64 columns to C rows row0.., columns col0.. of this consumer: each of the
   128 threads takes 16-byte output chunks (consecutive threads along a row: coalesced), alpha/beta applied,
   rows >= M and columns >= N left alone. C's base and row stride are 16-byte aligned (the launcher checks), col0
   is a multiple of 64, so a chunk is one aligned vector unless it crosses N. */
template <int CT, int PITCH, int ROWS>
__device__ __forceinline__ void small_store_rows(const float *stg, char *C, int64_t ldc, int64_t row0, int col0, int M,
                                                 int N, float alpha, float beta, int tw)
{
    constexpr int V = SOut<CT>::V, ES = CT == BSK_F32 ? 4 : 2, CPR = 64 / V; /* chunks per row */
#pragma unroll 1 /* unrolled, it made ptxas serialise the mainloop's wgmmas in one configuration (C7520) */
    for (int q = tw; q < ROWS * CPR; q += 128) {
        const int rr = q / CPR, cc = q % CPR;
        const int64_t gr = row0 + rr;
        const int col = col0 + cc * V;
        if (gr >= M || col >= N) continue;
        const float *sp = stg + rr * PITCH + cc * V;
        float o[V];
#pragma unroll
        for (int e = 0; e < V; e += 4) {
            const float4 f = *(const float4 *)(sp + e);
            o[e] = alpha * f.x;
            o[e + 1] = alpha * f.y;
            o[e + 2] = alpha * f.z;
            o[e + 3] = alpha * f.w;
        }
        char *gp = C + (gr * ldc + col) * ES;
        if (col + V <= N) {
            if (beta != 0.0f) {
                float old[V];
                SOut<CT>::ld(gp, old);
#pragma unroll
                for (int e = 0; e < V; ++e) o[e] += beta * old[e];
            }
            SOut<CT>::st(gp, o);
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                if (col + e < N) {
                    float v = o[e];
                    if (beta != 0.0f) v += beta * SOut<CT>::ld1(gp + e * ES);
                    SOut<CT>::st1(gp + e * ES, v);
                }
        }
    }
}

/* f(integral_constant<int, 0>), ..., f(integral_constant<int, N-1>): a loop whose index is a compile-time constant
   in the body (an accumulator array indexed by it stays in registers). */
template <class F, int... I>
__device__ __forceinline__ void static_for_impl(F &&f, std::integer_sequence<int, I...>)
{
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F> __device__ __forceinline__ void static_for(F &&f)
{
    static_for_impl(f, std::make_integer_sequence<int, N>{});
}

/* ---------------------------------------------------------------- main kernel */

template <int BS, int DT> struct SMma;
/* the f16 and bf16 specialisations of one width N (the wrappers differ only in the type suffix) */
#define BSK_SMALL_SMMA_RS(N)                                                                                      \
    template <> struct SMma<N, BSK_F16> {                                                                         \
        static __device__ __forceinline__ void run(float *d, uint32_t *a, uint64_t b, int on)                    \
        {                                                                                                         \
            wgmma_m64n##N##k16_rs_f16_if<0>(d, a[0], a[1], a[2], a[3], b, 1, on);                                 \
        }                                                                                                         \
    };                                                                                                            \
    template <> struct SMma<N, BSK_BF16> {                                                                        \
        static __device__ __forceinline__ void run(float *d, uint32_t *a, uint64_t b, int on)                    \
        {                                                                                                         \
            wgmma_m64n##N##k16_rs_bf16_if<0>(d, a[0], a[1], a[2], a[3], b, 1, on);                                \
        }                                                                                                         \
    };
BSK_SMALL_SMMA_RS(32)
BSK_SMALL_SMMA_RS(16)
#undef BSK_SMALL_SMMA_RS

/* SMmaSS<N, DT>: wgmma m64nNk16, Bᵀ M-major (trans-a) and the A blocks K-major, both from shared memory, guarded;
   N = BS (one block row) or RG * BS (RG adjacent row slots). */
template <int N, int DT> struct SMmaSS;
#define BSK_SMALL_SMMA_SS(N)                                                                                      \
    template <> struct SMmaSS<N, BSK_F16> {                                                                       \
        static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b, int on)                      \
        {                                                                                                         \
            wgmma_m64n##N##k16_ss_f16_if<1, 0>(d, a, b, 1, on);                                                   \
        }                                                                                                         \
    };                                                                                                            \
    template <> struct SMmaSS<N, BSK_BF16> {                                                                      \
        static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b, int on)                      \
        {                                                                                                         \
            wgmma_m64n##N##k16_ss_bf16_if<1, 0>(d, a, b, 1, on);                                                  \
        }                                                                                                         \
    };
BSK_SMALL_SMMA_SS(16)
BSK_SMALL_SMMA_SS(32)
BSK_SMALL_SMMA_SS(64)
BSK_SMALL_SMMA_SS(128)
BSK_SMALL_SMMA_SS(256)
#undef BSK_SMALL_SMMA_SS
/* SMmaSS2<N, DT>: the two k16 steps of a BS 32 block (N = 64: two rows per wgmma, the b32 default below d 0.3) into
   one accumulator under one guard; ok = false where no such wrapper exists (one guarded wgmma per step then). */
template <int N, int DT> struct SMmaSS2 { static constexpr bool ok = false; };
template <> struct SMmaSS2<64, BSK_F16> {
    static constexpr bool ok = true;
    static __device__ __forceinline__ void run(float *d, uint64_t a0, uint64_t b0, uint64_t a1, uint64_t b1, int on)
    {
        wgmma_m64n64k32_ss_f16_if<1, 0>(d, a0, b0, a1, b1, on);
    }
};
template <> struct SMmaSS2<64, BSK_BF16> {
    static constexpr bool ok = true;
    static __device__ __forceinline__ void run(float *d, uint64_t a0, uint64_t b0, uint64_t a1, uint64_t b1, int on)
    {
        wgmma_m64n64k32_ss_bf16_if<1, 0>(d, a0, b0, a1, b1, on);
    }
};


/* TS: the epilogue of 16-bit C with beta = 0 — stmatrix.trans of each block row's 64 x BS accumulator tile (alpha
   applied) into a 128-byte-swizzled buffer, then a TMA store (tmC: C in TS_ROWS x 64 boxes, clipped at M and N),
   two buffers per consumer in turn, so the stores run on under the next rounds and the next item's mainloop.
   Otherwise (tmC unused) the fp32 staging above and 16-byte stores from the registers' rows, beta applied. */
template <class CF, int DT, int CT, bool TS = false>
__global__ void __launch_bounds__(384, 1)
    small_spmm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                      const __grid_constant__ CUtensorMap tmC, const __grid_constant__ CUtensorMap tmB3,
                      const SmallParams p)
{
    static_assert(!TS || CT == BSK_F16 || CT == BSK_BF16, "TS: 16-bit C");
    constexpr int R = CF::R, BS = CF::BS, KC = CF::KC;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sbase = smem_u32(smem);
    const uint32_t full0 = sbase + CF::BAR_OFF, empty0 = full0 + 8 * CF::STAGES;
    int4 *meta = (int4 *)(smem + CF::META_OFF); /* two int4 per stage (SmallCfg::SMEM) */
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    SPROF(const long long k_t0 = clock64();)

    if (threadIdx.x == 0) {
        for (int s = 0; s < CF::STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8); /* one arrival per consumer warp */
            meta[2 * s + 1].x = -1;       /* RG > 1: every row slot may hold a block (see the producer) */
        }
        mbar_init_fence();
        tma_prefetch_desc(&tmA);
        tma_prefetch_desc(&tmB);
    }
    __syncthreads();
    grid_dep_wait(); /* the prep kernels' lists, order and counter are visible from here on */
    /* Direct mode (session 27): no prep kernels — their two launches were most of their cost (7.4 us of a 24-us
       2048^3 b32 call, session 16). CTA t runs item t (group t % G, N tile t / G) and first builds that group's union
       list itself, all 384 threads, with the union kernel's code, in the ring's shared memory (no load has been
       issued yet), into its own region of the workspace (p.ent + t * nb: the union of distinct columns is at most nb
       long). Each of the group's N tiles builds the same list: a few hundred col_idx loads, in flight together. */
    /* (Handing the producer warps the rows' ranges and the list's first 64 entries from the scratch instead of their
       loads was level: 2048^3 b32 d 0.1 / 0.25 / 0.5 within 1 %, session 27.) */
    int4 dd = make_int4(0, 0, 0, 0);
    if (p.direct) {
        static_assert(sizeof(UnionSmem) <= (size_t)CF::STG_OFF, "the union scratch fits in the ring");
        UnionSmem &us = *(UnionSmem *)smem;
        const unsigned t = blockIdx.x;
        const int g = (int)(t % (unsigned)p.G);
        const int2 gi = group_union<CF::THREADS>(p.row_ptr, p.col_idx, p.mb, p.nb, p.nnzb, R, g,
                                                 p.ent + (size_t)t * (unsigned)p.nb, p.nb, false, us);
        dd = make_int4(g, (int)(t / (unsigned)p.G), (int)(t * (unsigned)p.nb), gi.y);
        fence_proxy_async_smem(); /* the scratch's generic writes before the TMA loads into the same bytes */
        __syncthreads();          /* and the list's global writes before the producer warps read it */
    }

    if (wg == 0) {
        /* ------------------------------------------------------------ producer */
        setmaxnreg_dec<CF::PREG>();
        if (warp >= CF::PW) return;
        const unsigned total = p.total;
        /* Stage gsi of this CTA (all producer warps count every stage) lives in ring slot gsi % STAGES, phase
           (gsi / STAGES) & 1, and is issued by producer warp gsi % PW. */
        uint32_t gs = 0;
        /* PW > 1: the first ticket is blockIdx.x, the later ones gridDim.x + the counter; warp 0 takes them and passes
           each to the other producer warps through `tick` (two slots, by item parity) at a named barrier */
        const uint32_t tick = sbase + CF::TICK_OFF;
        unsigned items_seen = 0;
        auto fetch = [&]() -> unsigned {
            if (CF::PW == 1) return lane == 0 ? atomicAdd(p.counter, 1u) : 0u;
            return lane == 0 && warp == 0 ? atomicAdd(p.counter, 1u) + gridDim.x : 0u;
        };
        SPROF(long long pr_empty = 0, pr_stages = 0, pr_entries = 0, pr_blocks = 0; const long long pr_t0 = clock64();)
        /* lane 0: wait for the slot (unless `waited`: the RG > 1 path waits first, for its zeroing), publish the meta
           record, arm the full barrier (loads follow) */
        auto open_stage = [&](uint32_t gsi, int4 mv, uint32_t bytes, bool waited = false) {
            const uint32_t slot = gsi % (uint32_t)CF::STAGES, ph = (gsi / (uint32_t)CF::STAGES) & 1u;
            const uint32_t fb = full0 + 8 * slot;
            SPROF(const long long tw0 = clock64();)
            if (!waited) mbar_wait(empty0 + 8 * slot, ph ^ 1);
            SPROF(pr_empty += clock64() - tw0; ++pr_stages; meta[2 * slot + 1].z = (int)clock();)
            meta[2 * slot] = mv;
            if (bytes) mbar_arrive_expect_tx(fb, bytes);
            else mbar_arrive(fb);
        };
        /* item t -> {group, N tile, first entry, union length} (two dependent loads: the order entry) */
        auto desc_of = [&](unsigned t) -> int4 {
            const unsigned per_band = (unsigned)p.band * (unsigned)p.nt;
            const unsigned fr = (t / per_band) * (unsigned)p.band;
            const unsigned bsz = min((unsigned)p.band, (unsigned)p.G - fr);
            const unsigned w = t - fr * (unsigned)p.nt;
            const int4 o = p.order[fr + w % bsz];
            return make_int4(o.x, (int)(w / bsz), o.y, o.z);
        };
        /* lane r < R: the block range of row g*R + r, clamped (empty past mb) */
        auto rows_of = [&](int g, int &k, int &e) {
            const int r = g * R + lane;
            k = e = 0;
            if (lane < R && r < p.mb) {
                k = min(max(__ldg(p.row_ptr + r), 0), p.nnzb);
                e = max(min(max(__ldg(p.row_ptr + r + 1), 0), p.nnzb), k);
            }
        };
        /* lane l holds entry base + l of the item's list, or {-1, 0} past its end */
        auto chunk = [&](int es, int ul, int base) -> int2 {
            /* a plain load, not ld.global.nc: in direct mode this kernel wrote the list */
            return base + lane < ul ? p.ent[es + base + lane] : make_int2(-1, 0);
        };
        /* lane r < R: bit l set if entry l of the window has row r (none for entries past the list or with a
           column outside [0, nb)); row r's block of entry l is then its cursor at the window start + the bits
           below l: no serial cursor from entry to entry, so each producer warp can start anywhere */
        auto window_bits = [&](int2 cw) -> uint32_t {
            const bool ok = (unsigned)cw.x < (unsigned)p.nb;
            uint32_t bm = 0u;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const uint32_t b = __ballot_sync(0xffffffffu, ok && ((cw.y >> r) & 1));
                bm = lane == r ? b : bm;
            }
            return bm;
        };

        unsigned t = CF::PW == 1 ? __shfl_sync(0xffffffffu, fetch(), 0) : blockIdx.x;
        int4 d = make_int4(0, 0, 0, 0);
        int rk = 0, re = 0;
        int2 c0 = make_int2(-1, 0), c1 = make_int2(-1, 0);
        if (t < total) {
            d = p.direct ? dd : desc_of(t);
            rows_of(d.x, rk, re);
            c0 = chunk(d.z, d.w, 0);
            c1 = chunk(d.z, d.w, 32);
        }
        for (;;) {
            if (t >= total) {
                if (lane == 0 && gs % CF::PW == (uint32_t)warp) open_stage(gs, make_int4(0, 0, 0, SM_END), 0);
                /* this CTA has taken its last ticket (warp 0 takes them all): the last CTA to get here resets the
                   queue for the next launch (no CTA takes another ticket in this one) */
                if (warp == 0 && lane == 0) queue_done_reset<1, 1u>(p.counter, gridDim.x);
                break;
            }
            const unsigned pend = fetch(); /* the next item's ticket, taken one item ahead */
            /* look-ahead on the next item: its descriptor after this warp's 2nd stage of the item, its rows and first
               entries after the 3rd (the rest after the item's last stage for shorter items) */
            int la = 0;
            unsigned tn = 0;
            int4 nd = make_int4(0, 0, 0, 0);
            int nrk = 0, nre = 0;
            int2 nc0 = make_int2(-1, 0), nc1 = make_int2(-1, 0);
            auto look = [&]() {
                if (la == 0) {
                    if (CF::PW == 1) {
                        tn = __shfl_sync(0xffffffffu, pend, 0);
                    } else {
                        /* shared-memory loads and stores (a volatile generic pointer compiled to LD.E.STRONG.SYS:
                           3.5 % of the producer's stall samples, session 13) */
                        const uint32_t tk = tick + 4u * (items_seen & 1u);
                        if (warp == 0 && lane == 0) st_shared_u32(tk, pend);
                        /* not bar.sync (.aligned): the stage loop's lane-0 / per-row TMA branches may leave the
                           warp diverged here (synccheck: "divergent threads", even after a __syncwarp; session 9) */
                        named_bar_sync_div(3, 32 * CF::PW);
                        tn = ld_shared_u32(tk);
                        ++items_seen;
                    }
                    if (tn < total) nd = desc_of(tn);
                } else {
                    if (tn < total) {
                        rows_of(nd.x, nrk, nre);
                        nc0 = chunk(nd.z, nd.w, 0);
                        nc1 = chunk(nd.z, nd.w, 32);
                    }
                }
                ++la;
            };
            const int g = d.x, ntile = d.y, es = d.z, ul = d.w;
            const int n0 = ntile * CF::BN;
            uint32_t ns = ul > 0 ? (uint32_t)((ul + KC - 1) / KC) : 1u; /* the item's stages (CP: counted below) */
            int done = 0;
            if (ul <= 0) { /* no blocks in the group: one empty stage, the epilogue writes alpha*0 (+ beta*C) */
                if (gs % CF::PW == (uint32_t)warp) {
                    if (lane == 0) open_stage(gs, make_int4(g, ntile, 0, SM_LAST), 0);
                    ++done;
                }
            } else {
                /* the window c0 holds entries wb .. wb + 31, c1 the next 32; rkw is this lane's row cursor at wb */
                int wb = 0, rkw = rk;
                uint32_t bm = window_bits(c0);
                auto advance = [&](int e) {
                    while (e >= wb + 32) {
                        rkw += __popc(bm);
                        wb += 32;
                        c0 = c1;
                        c1 = chunk(es, ul, wb + 32);
                        bm = window_bits(c0);
                    }
                };
                /* stage i of the item: cnt (<= KC) entries from e (in one window); issued by this warp iff
                   (gs + i) % PW == warp */
                auto stage = [&](uint32_t i, int e, int cnt, uint32_t ov, bool last) {
                    if ((gs + i) % (uint32_t)CF::PW != (uint32_t)warp) return;
                    advance(e);
                    int col[KC], blk[KC];
                    bool val[KC];
                    uint32_t masks = 0, bytes = 0;
#pragma unroll
                    for (int j = 0; j < KC; ++j) {
                        const int x = j < cnt ? e + j - wb : 0; /* (CP: a one-entry stage may end its window) */
                        col[j] = __shfl_sync(0xffffffffu, c0.x, x);
                        blk[j] = rkw + __popc(bm & ((1u << x) - 1u));
                        val[j] = j < cnt && ((bm >> x) & 1u) && blk[j] < re;
                        const uint32_t vm = __ballot_sync(0xffffffffu, val[j]) & (uint32_t)CF::RMASK;
                        masks |= vm << (j * R);
                        bytes += vm ? (uint32_t)CF::ENTRY_B_BYTES + (p.diag == 2 ? 0u : (uint32_t)__popc(vm) * (uint32_t)CF::BLK_BYTES) : 0u;
                        SPROF(pr_entries += e + j < ul ? 1 : 0; pr_blocks += __popc(vm);)
                    }
                    if (p.diag == 3) bytes = 0u;
                    bool waited = false;
                    uint32_t zero = 0u; /* RG > 1: the stage's row slots (physical) to zero before the consumers read */
                    if constexpr (CF::RG > 1) {
                        /* RG > 1: the consumers read every row slot of a group that has a present row, so the absent
                           ones must hold zeros. meta[2 * slot + 1].x is the mask of the slot's row slots that still
                           hold a block (all set at the start: shared memory is not cleared); once the consumers have
                           released the slot, the warp zeroes those of absent rows in present groups and records what
                           the slot will hold: with zero_tma as TMA loads of an out-of-bounds block, issued with the
                           stage's other loads after the arming (their bytes counted in it); else here, by plain 16-byte
                           stores and then the proxy fence (wgmma reads them through the async proxy). Row slots of
                           absent groups keep what they hold: no wgmma reads them. */
                        const uint32_t gsi = gs + i, zslot = gsi % (uint32_t)CF::STAGES;
                        if (lane == 0) {
                            SPROF(const long long tw0 = clock64();)
                            mbar_wait(empty0 + 8 * zslot, ((gsi / (uint32_t)CF::STAGES) & 1u) ^ 1u);
                            SPROF(pr_empty += clock64() - tw0;)
                        }
                        waited = true;
                        __syncwarp(); /* every lane's reads and stores below come after the slot is free */
                        const uint32_t held = (uint32_t)((volatile int *)&meta[2 * zslot + 1])[0];
                        uint32_t nheld = held;
                        if (CF::CP && p.diag != 2 && p.diag != 3) {
                            /* physical slots: present rows pp, rows of present groups pg (entries' groups disjoint
                               there by construction) */
                            uint32_t pp = 0u, pg = 0u;
#pragma unroll
                            for (int j = 0; j < KC; ++j) {
                                const uint32_t vm = (masks >> (j * R)) & (uint32_t)CF::RMASK;
#pragma unroll
                                for (int q = 0; q < R / CF::RG; ++q) {
                                    if (!((vm >> (q * CF::RG)) & (uint32_t)CF::GMASK)) continue;
#pragma unroll
                                    for (int r = q * CF::RG; r < (q + 1) * CF::RG; ++r) {
                                        pg |= 1u << CF::slot(j, r, ov);
                                        if ((vm >> r) & 1u) pp |= 1u << CF::slot(j, r, ov);
                                    }
                                }
                            }
                            zero = held & pg & ~pp;
                            nheld = (held & ~zero) | pp;
                        } else if (p.diag != 2 && p.diag != 3) {
#pragma unroll
                            for (int j = 0; j < KC; ++j) {
                                const uint32_t vm = (masks >> (j * R)) & (uint32_t)CF::RMASK;
                                uint32_t gm = 0u; /* the rows of the groups that have a present row */
#pragma unroll
                                for (int q = 0; q < R / CF::RG; ++q)
                                    gm |= (vm >> (q * CF::RG)) & (uint32_t)CF::GMASK ? (uint32_t)CF::GMASK << (q * CF::RG) : 0u;
                                const uint32_t hj = (held >> (j * R)) & (uint32_t)CF::RMASK, zj = hj & gm & ~vm;
                                zero |= zj << (j * R);
                                nheld = (nheld & ~((uint32_t)CF::RMASK << (j * R))) | (((hj & ~zj) | vm) << (j * R));
                            }
                        }
                        if (p.zero_tma) {
                            bytes += (uint32_t)__popc(zero) * (uint32_t)CF::BLK_BYTES; /* loaded after the arming, below */
                        } else {
                            const uint32_t zst = sbase + zslot * CF::STAGE_BYTES + CF::B_BYTES;
                            for (uint32_t z = zero; z; z &= z - 1u) { /* the same in every lane: no divergence */
                                const uint32_t k = (uint32_t)(__ffs((int)z) - 1);
#pragma unroll
                                for (int o = 0; o < CF::BLK_BYTES; o += 512)
                                    st_shared_zero16(zst + CF::aslot((int)k) * (uint32_t)CF::BLK_BYTES + (uint32_t)o + 16u * (uint32_t)lane);
                            }
                            if (zero) fence_proxy_async_smem();
                            zero = 0u;
                        }
                        __syncwarp(); /* (stores) all lanes' zeros and their fences before lane 0 arms the stage */
                        if (lane == 0) ((volatile int *)&meta[2 * zslot + 1])[0] = (int)nheld;
                    }
                    if (lane == 0)
                        open_stage(gs + i, make_int4(g, ntile, p.diag == 1 || p.diag == 3 ? 0 : (int)masks, (last ? SM_LAST : 0) | (int)(ov << 8)),
                                   bytes, waited);
                    __syncwarp(); /* the barrier is armed before any load can complete on it */
                    const uint32_t slot = (gs + i) % (uint32_t)CF::STAGES;
                    const uint32_t fb = full0 + 8 * slot;
                    const uint32_t st = sbase + slot * CF::STAGE_BYTES;
#pragma unroll
                    for (int j = 0; j < KC; ++j) {
                        const uint32_t vm = (masks >> (j * R)) & (uint32_t)CF::RMASK;
                        if (lane == 0 && vm && p.diag != 3) {
                            if (CF::KC == 1 && CF::NH > 1 && p.b3d) {
                                /* one box for all 2 NH: tmB3 sees B as [N / 64 chunks][K rows][64 columns], so the box
                                   {64, BS, 2 NH} at chunk n0 / 64 lands chunk-major, as the 2 NH boxes below do */
                                tma_load_3d(st, &tmB3, fb, 0, col[j] * BS, n0 / 64);
                            } else {
#pragma unroll
                                for (int q = 0; q < 2 * CF::NH; ++q) /* box q: columns n0 + 64 q (consumer q / NH) */
                                    tma_load_2d(st + q * CF::SUB_BYTES + j * BS * 128, &tmB, fb, n0 + 64 * q, col[j] * BS);
                            }
                        }
                        if (val[j] && p.diag != 2 && p.diag != 3) tma_load_3d(st + CF::B_BYTES + CF::slot(j, lane, ov) * CF::BLK_BYTES, &tmA, fb, 0, 0, blk[j]);
                    }
                    /* zero_tma: the slots to zero (lane k: bit k, its slot aslot(k), as the stores take it) take a block
                       past the end of A's map, which TMA fills with zeros (the map's out-of-bounds fill) */
                    if (lane < CF::KC * CF::R && ((zero >> lane) & 1u))
                        tma_load_3d(st + CF::B_BYTES + CF::aslot(lane) * CF::BLK_BYTES, &tmA, fb, 0, 0, p.zblk);
                    ++done;
                    if (la < 2 && done >= 2 + la) look();
                };
                if constexpr (CF::CP) {
                    /* pairs (e, e + 1) from the item's start; a pair whose common groups exceed XG splits into two
                       stages. Every warp computes each window's split mask (one ballot) and, in lane k, pair k's first
                       stage of the window; then it goes straight to its own stages (stage gs + gi + t is this warp's iff
                       (gs + gi + t) % PW == warp), finding a stage's pair with one ballot: stepping through every pair
                       of every window in every warp took ~23 % of the producer warps' time (ncu source counters,
                       session 13), and the producer warps bind this kernel. */
                    uint32_t gi = 0;
                    for (int wp = 0; wp < ul; wp += 32) {
                        advance(wp);
                        const bool okl = wp + lane < ul && (unsigned)c0.x < (unsigned)p.nb;
                        uint32_t gml = 0u;
#pragma unroll
                        for (int q = 0; q < R / CF::RG; ++q)
                            gml |= okl && ((c0.y >> (q * CF::RG)) & CF::GMASK) ? 1u << q : 0u;
                        const uint32_t gnext = __shfl_down_sync(0xffffffffu, gml, 1);
                        const bool split = !(lane & 1) && wp + lane + 1 < ul && __popc(gml & gnext) > CF::XG;
                        const uint32_t sm = __ballot_sync(0xffffffffu, split);
                        const int np = (min(32, ul - wp) + 1) / 2;
                        /* lane k < np: the first stage of pair k in the window (pairs before it that split take two) */
                        const int sk = lane + __popc(sm & (lane < 16 ? (1u << (2 * lane)) - 1u : 0xffffffffu));
                        const uint32_t nsw = (uint32_t)(np + __popc(sm));
                        for (uint32_t t = ((uint32_t)warp + CF::PW - (gs + gi) % CF::PW) % CF::PW; t < nsw; t += CF::PW) {
                            const int k = __popc(__ballot_sync(0xffffffffu, lane < np && (uint32_t)sk <= t)) - 1;
                            const int e = wp + 2 * k;
                            const uint32_t g0 = __shfl_sync(0xffffffffu, gml, 2 * k), g1 = __shfl_sync(0xffffffffu, gml, 2 * k + 1);
                            const int s0 = __shfl_sync(0xffffffffu, sk, k);
                            const bool sp = (sm >> (2 * k)) & 1u, second = sp && t != (uint32_t)s0, two = !sp && e + 1 < ul;
                            stage(gi + t, e + (second ? 1 : 0), two ? 2 : 1, two ? (g0 & g1) : 0u, e + 2 >= ul && (!sp || second));
                        }
                        gi += nsw;
                    }
                    ns = gi;
                } else {
                    for (uint32_t i = ((uint32_t)warp + CF::PW - gs % CF::PW) % CF::PW; i < ns; i += CF::PW)
                        stage(i, (int)i * KC, KC, 0u, i + 1 == ns); /* KC divides 32: a stage's entries share a window */
                }
            }
            gs += ns;
            while (la < 2) look();
            t = tn;
            d = nd;
            rk = nrk;
            re = nre;
            c0 = nc0;
            c1 = nc1;
        }
        SPROF(if (lane == 0 && warp == 0 && p.prof) {
            long long *q = p.prof + (size_t)blockIdx.x * SMALL_PROF_N;
            q[SP_P_TOTAL] = clock64() - pr_t0; q[SP_P_EMPTY] = pr_empty; q[SP_P_STAGES] = pr_stages; q[SP_PRO] = pr_t0 - k_t0;
            q[SP_P_ENTRIES] = pr_entries; q[SP_P_BLOCKS] = pr_blocks;
        })
    } else {
        /* ------------------------------------------------------------ consumers */
        setmaxnreg_inc<CF::CREG>();
        /* the consumer index through a warp reduction: its result sits in a uniform register, so the compiler keeps
           every descriptor derived from it there too (from threadIdx it built them in per-thread registers and moved
           each over per wgmma: two R2UR per wgmma; session 14) */
        const int c = (int)__reduce_or_sync(0xffffffffu, (unsigned)(wg - 1));
        /* R accumulator sets of BS/2 registers, flat: set r at [r * BS/2]; RG consecutive sets are the registers of
           one m64n(RG*BS) wgmma (register i of m64nN is column 8(i/4) + 2(lane%4) + i%2 of row 16w + lane/4 + 8((i/2)%2),
           so set r of m64nBS is registers r*BS/2 .. of m64n(RG*BS) starting at row slot 0 of the group) */
        constexpr int AW = BS / 2, NH = CF::NH;
        float acc[NH * R * AW]; /* half h's sets at [h * R * AW] */
        uint32_t s = 0, ph = 0;
        /* (register path) ldmatrix.x4.trans addresses: lane l feeds matrix l/8, row l%8: matrices 0/1 (k 0-7) and
           2/3 (k 8-15) of columns 16w + 0-7 / 8-15. In the 128-byte swizzled box, row kr's 16-byte chunk q sits at
           q ^ (kr % 8), and kr % 8 = l % 8 for every k16 step, so each lane's chunk is fixed. */
        const int lrow = (lane & 7) + 8 * ((lane >> 4) & 1);
        const uint32_t lchunk = (uint32_t)((2 * warp + ((lane >> 3) & 1)) ^ (lane & 7));
        const uint32_t lofs = (uint32_t)lrow * 128u + (lchunk << 4) + (uint32_t)c * CF::SUB_BYTES;
        SPROF(long long cw = 0, cm = 0, ce = 0, cst = 0, cwd = 0, lw = 0, lall = 0, cit = 0, cfirst = 0; const long long ct0 = clock64();)
        auto wait_full = [&]() {
            SPROF(const long long w0 = clock64();)
            mbar_wait(full0 + 8 * s, ph);
            SPROF(const long long w1 = clock64(); cw += w1 - w0; ++cst; if (!cfirst) cfirst = w1 - k_t0;
                  const long long lat = (long long)(unsigned)((unsigned)clock() - (unsigned)meta[2 * s + 1].z); lall += lat;
                  if (w1 - w0 > 100) { ++cwd; lw += lat; })
        };
        auto release = [&](uint32_t slot) { /* one arrival per warp (the lane that read the record) */
            __syncwarp();
            if (lane == 0) mbar_arrive(empty0 + 8 * slot);
        };
        /* the record's masks and flags, through lane 0 (stage_record_read's reasoning) */
        auto read_mf = [&](int &masks, int &fl) {
            int mz = 0, mw = 0;
            if (lane == 0) { /* shared-memory loads (through the generic pointer: LD.E, session 14) */
                mz = (int)ld_shared_u32(sbase + CF::META_OFF + 32u * s + 8u);
                mw = (int)ld_shared_u32(sbase + CF::META_OFF + 32u * s + 12u);
            }
            masks = __shfl_sync(0xffffffffu, mz, 0);
            fl = __shfl_sync(0xffffffffu, mw, 0);
        };
        /* SS: the descriptors of stage 0's Bᵀ tile (this consumer, entry 0, k16 step 0) and of its A slot 0, built
           once; a stage, entry, k16 step or slot only moves their start-address field (in 16-byte units: dBt / dAs
           below, the stage's so), one add each instead of the mask-shift-or of a fresh descriptor per wgmma (ncu,
           session 14: the consumers bind, ~190 instructions per stage) */
        const uint64_t dA0 = smem_desc(sbase + (uint32_t)(c * NH) * CF::SUB_BYTES, 8192u, 1024u);
        const uint64_t dB0 = smem_desc_swz(sbase + CF::B_BYTES, 16u, CF::A_SBO, CF::A_SWZ);
        auto dBt = [](int j, int ks) { return (uint32_t)((j * BS + 16 * ks) * 128 / 16); };
        auto dAs = [](uint32_t sl, int ks) { return sl * (uint32_t)(CF::BLK_BYTES / 16) + 2u * (uint32_t)ks; };
        /* One stage's wgmmas for the rows in `masks` (guarded off for the others: see wgmma_*_if), not waited for.
           SS: Bᵀ straight from the B box: its 64 (n) x 16 (k) tile, stored k-row-major, is M-major for wgmma
           (trans-a), 128-byte swizzled, 8-row groups 1024 bytes apart (the op-T layout of spmm_kernel.cuh).
           Otherwise: Bᵀ through registers (ldmatrix.trans into the A fragment), reused for every row. */
        auto issue = [&](int masks, uint32_t ov) {
            const uint32_t st = sbase + s * CF::STAGE_BYTES;
            if constexpr (CF::SS) {
                const uint32_t so = s * (uint32_t)(CF::STAGE_BYTES >> 4);
                wgmma_fence();
#pragma unroll
                for (int j = 0; j < KC; ++j) {
                    const int mj = (masks >> (j * R)) & CF::RMASK;
                    if constexpr (CF::KO) {
#pragma unroll
                        for (int x = 0; x < R / CF::RG * CF::KS; ++x) { /* k16 step outer, row group inner */
                            const int q = x % (R / CF::RG), ks = x / (R / CF::RG), r = q * CF::RG;
                            SMmaSS<BS * CF::RG, DT>::run(&acc[r * AW], desc_advance(dA0, so + dBt(j, ks)),
                                                         desc_advance(dB0, so + dAs(CF::slot(j, r, 0u), ks)), (mj >> r) & CF::GMASK);
                        }
                    } else {
                        /* row group outer, k16 step inner, as two nested loops: the one flat loop of both orders
                           (session 9) cost 4-5 % at b32 d 0.5 (RG 1; session 11 bisect) */
#pragma unroll
                        for (int q = 0; q < R / CF::RG; ++q) { /* the group of row slots q*RG .. q*RG+RG-1 */
                            const int r = q * CF::RG;
                            const uint32_t sl = CF::slot(j, r, ov);
                            const int on = masks & (CF::GMASK << (j * R + r)); /* one test of a constant mask */
#pragma unroll
                            for (int h = 0; h < NH; ++h) { /* this consumer's 64-column halves: box c * NH + h */
                                const uint32_t ho = so + (uint32_t)(h * CF::SUB_BYTES / 16);
                                float *ac = &acc[(h * R + r) * AW];
                                if constexpr (CF::KS == 2 && SMmaSS2<BS * CF::RG, DT>::ok) {
                                    SMmaSS2<BS * CF::RG, DT>::run(ac, desc_advance(dA0, ho + dBt(j, 0)), desc_advance(dB0, so + dAs(sl, 0)),
                                                                  desc_advance(dA0, ho + dBt(j, 1)), desc_advance(dB0, so + dAs(sl, 1)), on);
                                } else {
#pragma unroll
                                    for (int ks = 0; ks < CF::KS; ++ks)
                                        SMmaSS<BS * CF::RG, DT>::run(ac, desc_advance(dA0, ho + dBt(j, ks)),
                                                                     desc_advance(dB0, so + dAs(sl, ks)), on);
                                }
                            }
                        }
                    }
                }
            } else {
                uint32_t a[KC][CF::KS][4];
#pragma unroll
                for (int j = 0; j < KC; ++j)
#pragma unroll
                    for (int ks = 0; ks < CF::KS; ++ks)
                        ldmatrix_x4_trans(st + lofs + (uint32_t)(j * BS + 16 * ks) * 128u, a[j][ks][0], a[j][ks][1],
                                          a[j][ks][2], a[j][ks][3]);
                wgmma_fence();
#pragma unroll
                for (int j = 0; j < KC; ++j) {
                    const int mj = (masks >> (j * R)) & CF::RMASK;
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint32_t ab = st + CF::B_BYTES + CF::slot(j, r, 0u) * (uint32_t)CF::BLK_BYTES;
#pragma unroll
                        for (int ks = 0; ks < CF::KS; ++ks)
                            SMma<BS, DT>::run(&acc[r * AW], a[j][ks], smem_desc_swz(ab + 32u * ks, 16u, CF::A_SBO, CF::A_SWZ),
                                              (mj >> r) & 1);
                    }
                }
            }
        };
        float *stg = (float *)(smem + CF::STG_OFF + c * CF::STG_WG_BYTES);
        const uint32_t stg_u = sbase + CF::STG_OFF + (uint32_t)c * CF::STG_WG_BYTES;
        const int tw = threadIdx.x & 127;
        for (;;) {
            wait_full();
            const int4 m = stage_record_read(&meta[2 * s], lane);
            if (m.w & SM_END) break;
            SPROF(++cit;)
            const int g = m.x, ntile = m.y;
#pragma unroll
            for (int i = 0; i < NH * R * AW; ++i) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < NH * R * AW; ++i) reg_fence(acc[i]);
            int masks = m.z, fl = m.w;
            if constexpr (CF::SS) {
                /* the stage before this one stays in flight while this one is issued: a consumer does not wait
                   for its own wgmmas each stage (a group per stage, empty when no row has the column) */
                uint32_t prev = 0xffffffffu;
                for (;;) {
                    SPROF(const long long m0 = clock64();)
                    if (masks) issue(masks, (uint32_t)fl >> 8);
                    wgmma_commit();
                    wgmma_wait<1>();
                    SPROF(cm += clock64() - m0;)
                    if (prev != 0xffffffffu) release(prev);
                    prev = s;
                    if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                    if (fl & SM_LAST) break;
                    wait_full();
                    read_mf(masks, fl);
                }
                wgmma_wait<0>();
                release(prev);
            } else {
                for (;;) {
                    if (masks) {
                        issue(masks, (uint32_t)fl >> 8);
                        wgmma_commit();
                        wgmma_wait<0>();
                    }
                    release(s);
                    if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                    if (fl & SM_LAST) break;
                    wait_full();
                    read_mf(masks, fl);
                }
            }
#pragma unroll
            for (int i = 0; i < NH * R * AW; ++i) reg_fence(acc[i]);
            /* epilogue: EPR block rows (STG_ROWS C rows) per pass through the staging buffer; the passes are unrolled
               at compile time (static_for) so that every accumulator index is a constant (else they go to local
               memory) */
            SPROF(const long long e0 = clock64();)
            const int64_t grow0 = (int64_t)g * R * BS;
            const int col0 = ntile * CF::BN + 64 * NH * c; /* half h: + 64 h */
            const int mrow = 16 * warp + (lane >> 2);
            if constexpr (TS) {
                /* Accumulator i of block row rr is C row 8 (i / 4) + 2 (lane % 4) + (i % 2) of the block, column
                   16 warp + lane / 4 + 8 ((i / 2) % 2) of this consumer's 64: the pair (i, i + 1), i even, is two
                   rows of one column — the mma fragment of the 8 x 8 matrix (h = (i / 2) % 2, n8 = i / 4) whose
                   rows are C columns. stmatrix.trans stores it as 8 C rows of 16 bytes (columns 16 warp + 8 h ..),
                   chunk 2 warp + h of the row, XOR-swizzled by row % 8 (TMA's 128-byte swizzle: conflict-free). */
                constexpr int BPR = CF::TS_ROWS / BS; /* block rows per round; rounds half-major */
                static_assert((NH * R / BPR) % 2 == 0, "an even number of rounds: round 0 of the next item reuses buffer 0");
                const uint32_t tsb = sbase + CF::STG_OFF + (uint32_t)c * (2u * CF::TS_BUF);
                const int q = lane >> 3, k8 = lane & 7;
                static_for<NH * R / BPR>([&](auto Pc) {
                    constexpr int P = decltype(Pc)::value, H = P / (R / BPR), PR = P % (R / BPR);
                    const uint32_t buf = tsb + (uint32_t)(P & 1) * CF::TS_BUF;
                    bulk_wait_read<1>(); /* the store that read this buffer (two rounds ago) is done (only thread 0
                                            has stores; no branch around it: see below) */
                    named_bar_sync(1 + c, 128);
#pragma unroll
                    for (int rr = 0; rr < BPR; ++rr)
#pragma unroll
                        for (int t = 0; t < BS / 16; ++t) { /* matrices n8 = 2t, 2t + 1 x h = 0, 1 */
                            uint32_t v[4];
#pragma unroll
                            for (int mq = 0; mq < 4; ++mq) {
                                const int i0 = 4 * (2 * t + (mq >> 1)) + 2 * (mq & 1);
                                const float a0 = p.alpha * acc[(H * R + PR * BPR + rr) * AW + i0];
                                const float a1 = p.alpha * acc[(H * R + PR * BPR + rr) * AW + i0 + 1];
                                if constexpr (CT == BSK_F16) {
                                    const __half2 h2 = __floats2half2_rn(a0, a1);
                                    v[mq] = *(const uint32_t *)&h2;
                                } else {
                                    const __nv_bfloat162 h2 = __floats2bfloat162_rn(a0, a1);
                                    v[mq] = *(const uint32_t *)&h2;
                                }
                            }
                            const int row = rr * BS + 8 * (2 * t + (q >> 1)) + k8, chunk = 2 * warp + (q & 1);
                            stmatrix_x4_trans(buf + (uint32_t)row * 128u + ((uint32_t)(chunk ^ (row & 7)) << 4), v[0], v[1],
                                              v[2], v[3]);
                        }
                    fence_proxy_async_smem();
                    named_bar_sync(1 + c, 128);
                    /* thread 0 stores (a predicated instruction, not a branch: C7520); every thread commits (an
                       empty group elsewhere) */
                    const int64_t row0 = grow0 + (int64_t)PR * CF::TS_ROWS;
                    const int colh = col0 + 64 * H;
                    tma_store_2d_if(&tmC, buf, colh, (int)row0, tw == 0 && row0 < p.M && colh < p.N);
                    bulk_commit();
                });
            } else
            static_for<NH * R / CF::EPR>([&](auto Pc) {
                constexpr int P = decltype(Pc)::value, H = P / (R / CF::EPR), PR = P % (R / CF::EPR);
                named_bar_sync(1 + c, 128); /* the previous pass (or item) has read the buffer */
#pragma unroll
                for (int rr = 0; rr < CF::EPR; ++rr)
#pragma unroll
                    for (int i = 0; i < BS / 2; ++i) {
                        const int mm = mrow + 8 * ((i >> 1) & 1);
                        const int rp = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
                        /* an inline-asm store (plain C++ stores of the accumulators here went with ptxas
                           serialising the mainloop's guarded wgmmas, C7520, in one version of this code) */
                        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(stg_u + 4u * (uint32_t)((rr * BS + rp) * CF::PITCH + mm)),
                                     "f"(acc[(H * R + PR * CF::EPR + rr) * AW + i])
                                     : "memory");
                    }
                named_bar_sync(1 + c, 128);
                /* no branch around this (rows past M and columns past N are masked inside) and C's dtype a
                   template parameter: either a branch here made ptxas serialise the mainloop's wgmmas (C7520) */
                small_store_rows<CT, CF::PITCH, CF::STG_ROWS>(stg, (char *)p.C, p.ldc, grow0 + (int64_t)PR * CF::STG_ROWS,
                                                              col0 + 64 * H, p.M, p.N, p.alpha, p.beta, tw);
            });
            SPROF(ce += clock64() - e0;)
        }
        if constexpr (TS) bulk_wait_read<0>(); /* the last rounds' buffers are read before shared memory goes away */
        SPROF(if (c == 0 && warp == 0 && lane == 0 && p.prof) {
            long long *q = p.prof + (size_t)blockIdx.x * SMALL_PROF_N;
            q[SP_C_TOTAL] = clock64() - ct0; q[SP_C_WAIT] = cw; q[SP_C_MMA] = cm; q[SP_C_EPI] = ce; q[SP_C_STAGES] = cst;
            q[SP_C_WAITED] = cwd; q[SP_LAT_WAITED] = lw; q[SP_LAT_ALL] = lall; q[SP_C_ITEMS] = cit; q[SP_FIRST] = cfirst;
        })
    }
}

} // namespace bsk_small
#endif
