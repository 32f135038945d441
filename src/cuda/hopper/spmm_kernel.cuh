/* spmm_kernel.cuh — the Hopper BSR x dense SpMM kernel (TMA + wgmma, warp-specialised, persistent).

   C (M x N) = alpha * A (BSR, square blocks of BM = 64 or 128) * B (K x N row-major) + beta * C.

   Work item = (unit, N tile of BN columns); a unit is one block row, or (PAIR, BM = 64) two block rows that
   share one 128-row tile: rows 2u, 2u + 1, or rows that share columns, paired by the prep kernel (pair_match).
   A persistent grid (one CTA per SM) takes items from an atomic counter in the order a prep kernel fixed (units
   sorted by length, longest first, cut into bands whose A blocks fit in L2; inside a band the N tile is the outer
   index, so the CTAs running at one time share B panels). Each CTA has three warpgroups:
     - WG0, the producer (setmaxnreg.dec): one warp walks the item's col_idx (32 indices per coalesced load,
       handed out by shuffle, the next 32 loaded one chunk ahead) and, per 64-wide K step, TMA-loads A's
       block panel (3-D map over the values: [nnzb][BM][BM]) and the BN-column panel of B rows j*BM + h*64 ..
       +63 (2-D map, zero-filled past K and N) into a STAGES-deep ring completed on mbarriers. With PAIR it
       merges the two rows' sorted column lists: a column present in both rows loads its B panel once for
       both (the point of pairing: B is most of the bytes at BM = 64), and each row's block goes to its half
       of the A panel. It writes a small meta record per stage (unit, N tile, flags: which consumer skips,
       last stage of the item) that the consumers read after the full barrier. Latency hiding: the blocks
       `pf` blocks ahead are prefetched into L2 (cp.async.bulk.prefetch.tensor, whole block / 256-column B
       panel per instruction), and the next item's descriptor loads (band, entry, first 32 columns) and its
       first prefetches are spread over the current item's stages instead of stalling at the item boundary.
     - WG1, WG2, the consumers (setmaxnreg.inc): wgmma m64nWGNk16 from 128-byte-swizzled shared memory,
       fp32 accumulators in registers; for BM = 128 each takes 64 of the tile's rows, for PAIR each takes
       its own block row, for split BM = 64 each takes half of the tile's columns. After the last stage of an
       item the epilogue: for 16-bit C with beta = 0 each consumer stages its 64 x WGN part in shared memory
       and TMA-stores it (clipped at M and N; the store runs on under the next item's mainloop); otherwise
       alpha/beta straight from the registers to global memory (rows >= M and columns >= N masked).
   BM = 128 and the 64 x 512 slot-epilogue tile, without clusters (CAN_SPLIT), also have: long-row split — a row cut
   by the prep kernel into parts (units of consecutive blocks) run by different CTAs; parts 0 .. P - 2 store fp32
   partial tiles in the workspace, part P - 1 adds them in part order and runs the epilogue (deterministic) — and
   tile groups (the queue takes tg N tiles through every band before the next ones; tg = nt is the plain band
   order), and with the GPU's L2-partition map a queue per partition: tile groups (half the N tiles each; skewed rows, session 8) or
   row groups (units of one rank parity each, every N tile; a knob, session 9).
   Malformed device indices cannot cause out-of-bounds access: row_ptr is clamped by the prep kernel to
   [0, nnzb], a col_idx outside [0, nb) becomes a stage with no data (skipped), the merge advances at least
   one list per stage (so it ends even on unsorted lists), and TMA never reads outside the tensors. */
#ifndef BSK_HOPPER_SPMM_KERNEL_CUH
#define BSK_HOPPER_SPMM_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <limits.h>
#include <type_traits>
#include "ptx.cuh"
#include "../scan.cuh" /* block_excl_scan */

namespace bsk_hopper {

/* Plain parameters of the main kernel (the tensor maps travel separately as __grid_constant__). */
struct SpmmParams {
    const int4 *sorted;     /* per rank, longest units first: {unit, first block, end, split code}; PAIR: {unit,
                               first row's first block, its end, second row's first block}, the first row owns
                               blocks [first, max(end, first)), the second [its first, max(pair_end, its first)) */
    const int *pair_end;    /* PAIR: per rank, the second row's end                                   */
    const int2 *pair_rows;  /* PAIR: per unit, its two block rows (the second >= the block rows: none) */
    const int2 *bandinfo;   /* per rank: {first rank, units} of the band holding that rank            */
    const int32_t *units_ptr; /* direct: the units' row pointer (op T: the transpose index's), read in place  */
    int direct;             /* 1: no prep kernel and no work list (session 26; the launcher's rule: every item
                               has a CTA of its own, no split, no matching): CTA i runs item i, in the unsorted
                               order (unit = i % units, N tile = i / units), its lists read from units_ptr;
                               sorted, pair_end, pair_rows and bandinfo are unused (NULL), counter is the
                               context's zeroed queue (its words 1, 4, 5, 7 stay 0: the count is total_items) */
    int mb, nnzb, units;    /* direct: block rows of the units (op T: A's block columns), A's blocks, the units  */
    unsigned *counter;      /* [0] work-queue head, [1] items, [2..3] partition queue heads, [4] skewed,
                               [5] short rows, [6] CTAs done, [7] long units (part_long): see spmm_prep_kernel */
    const int32_t *col_idx;
    const int32_t *blk_idx; /* TRANS (op T): the value block of each list entry (the transpose index's t_blk,
                               col_idx is then its t_row: the block row = K block); NULL for op N, where
                               entry k is value block k                                          */
    void *C;
    int64_t ldc;
    int ctype;              /* bsk_dtype of C                                                       */
    float alpha, beta;
    int M, N;               /* C is M x N                                                           */
    int nb;                 /* block columns of A                                                   */
    int nt;                 /* N tiles, or pairs of N tiles when two CTAs form a cluster            */
    int tg;                 /* N tiles per tile group (1..nt): the queue walks tile groups, inside a group
                               the bands in order, inside a band N tile by N tile (tg = nt: bands outer) */
    unsigned total_items;   /* units * nt before any split (the prep kernel writes the final count to
                               counter[1], which the producer reads)                               */
    int *split_ctr;         /* long-row split: per split (row, N tile) and consumer the partials stored,
                               zeroed by the prep kernel and again by the row's last part          */
    float4 *split_ws;       /* per split part, N tile and consumer: one fp32 partial (SPLIT_F4 float4) */
    int pf;                 /* L2 prefetch lead in blocks per list (0: off; at most 32)             */
    int cl_acq;             /* clusters: consumers' full-barrier waits with cluster-scope acquire   */
    int l2hint;             /* bits: 1 A loads evict_last, 2 C stores evict_first                  */
    int l2hint_auto;        /* CAN_SPLIT configurations: both hints when the prep kernel found the rows
                               short and not skewed (counter[5] == 1, counter[4] == 0)             */
    uint32_t b_lbo, b_sbo;  /* B descriptor strides in bytes (8192 between 64-column panels, 1024
                               between 8-row groups); run-time only so a probe can try the swap    */
    unsigned long long *prof; /* BSK_HOPPER_PROF builds only: per CTA 16 cycle counters (PROF_* below) */
    unsigned long long *prep_prof; /* BSK_HOPPER_PROF builds only: the prep's phase marks (PREP_MARK); CTA 0 adds
                                      its entry [8] and the end of its wait for the prep [9] */
    const unsigned char *part; /* CAN_SPLIT configurations: smid -> L2 partition (0 / 1), or NULL. Used when
                               the prep kernel found the rows skewed (counter[4]) or part_force: then the
                               two tile groups (tg = ceil(nt / 2)) have a queue each (counter[2 + g]); a
                               CTA takes items of its partition's group, then helps with the other's, so
                               each partition's L2 holds the B panels of its own N tiles only           */
    int part_force;         /* 1: the partition queues whatever the rows (experiments, tests)        */
    int part_tg;            /* tile groups inside the partition queues: N tiles per group (0: half the tiles,
                               one group per partition, as sessions 8-21); partition 0 takes the first
                               ceil(groups / 2) groups. Session 21 --tgskew: b64 skewed d 0.25 +10 % with groups
                               of 4 and the partition queues off (untested with them: s22-prep branch)          */
    int part_long;          /* 1: the prep kernel's long units (counter[7], a class boundary of the sorted order)
                               take every N tile of their partition first (phase A, band / tile / unit order),
                               then the other units walk the partition's tile groups (phase B); 0: one phase  */
    int part_rows;          /* row groups instead of tile groups (1 forced, 2 when the prep kernel found the
                               rows not skewed — tune.part_mode 4, session 9; 0 never): group g holds the
                               units of rank parity g (items in the plain band / N tile / unit order), so each
                               partition reads half of A and every N tile. Never with the long-row split (a
                               row's parts must share a queue)                                          */
    int fab;                /* session 9 diagnostics, timing only (wrong results): 1 no C store, 2 A loads
                               of block 0, 4 B loads of N tile 0 (CAN_SPLIT configurations)              */
};

/* Cycle accounting for probe builds (-DBSK_HOPPER_PROF, bench/hopper_probe.c --prof): where each warpgroup's
   time goes. Per CTA, slots 8c + i for consumer c: PROF_WAIT (blocked on a full barrier), PROF_MMA (wgmma
   issue to wait_group 0), PROF_EPI (epilogue), PROF_TOTAL, PROF_ITEMS, PROF_STAGES; slot 6 / 7 (in consumer
   1's range, unused there): the producer's wait on empty slots and its total. Compiled out otherwise. */
enum { PROF_WAIT = 0, PROF_MMA = 1, PROF_EPI = 2, PROF_TOTAL = 3, PROF_ITEMS = 4, PROF_STAGES = 5 };
#ifdef BSK_HOPPER_PROF
#define BSK_PROF_CLOCK() clock64()
#else
#define BSK_PROF_CLOCK() 0LL
#endif
/* The prep kernel's phases in probe builds (-DBSK_HOPPER_PROF, hopper_probe --prepprof; session 25: ncu put the prep at
   4.1 us without matching and 8.7 with it at 32 rows, a quarter of a 2048^3 call): thread 0 writes %globaltimer after
   the barrier that ends phase i. Compiled out otherwise. */
#ifdef BSK_HOPPER_PROF
#define PREP_MARK(i)                                                                                                   \
    do {                                                                                                               \
        if (prof && threadIdx.x == 0) prof[i] = globaltimer_ns();                                                     \
    } while (0)
#else
#define PREP_MARK(i) ((void)prof)
#endif
enum { PREP_T_ENTRY = 0, PREP_T_MASKS = 1, PREP_T_ROUNDS = 2, PREP_T_UNITS = 3, PREP_T_HIST = 4, PREP_T_SCAN = 5,
       PREP_T_WRITE = 6, PREP_T_END = 7, PREP_T_MAIN_ENTRY = 8, PREP_T_MAIN_WAITED = 9 };

/* Meta flags: SKIP0 / SKIP1: consumer 0 / 1 issues no wgmma for this stage (no data for its rows);
   END: no more items; LAST: the last stage of the item (the epilogue follows). */
enum { META_SKIP0 = 1, META_SKIP1 = 2, META_SKIP = 3, META_END = 4, META_LAST = 8 };

/* Compile-time shape of one kernel configuration. EPI: the epilogue stages each consumer's 64 x WGN part of
   the tile in shared memory (16-bit C, 128-byte swizzled 64-column panels) and writes it with TMA stores,
   which run on while the next tile's mainloop starts; otherwise the registers go straight to global memory.
   (A wait_group 1 variant was measured slower with 3 stages: it holds a stage back from the producer; every
   configuration uses wait_group 0.)
   CLUSTER = 2: two CTAs (a cluster) take the same block row and two adjacent N tiles. CTA 0 takes items from
   the queue and hands each to CTA 1 through a small channel in CTA 1's shared memory; both producers then walk
   the same blocks: each TMA-multicasts its half (64 rows) of A's panel into both CTAs and loads its own B
   panels. A stage slot is free for a producer when the consumers of both CTAs have released it (each
   consumer warp arrives on both CTAs' empty barriers). Per SM and stage: 8 + 32 KB from L2 instead of 48.
   PAIR (BM = 64 only): the tile is two block rows x WGN columns, one block row per consumer; a stage holds
   one B panel (64 x WGN) and the A blocks of the rows that have that column (8 KB each).
   TRANS (op T, C = Aᵀ·B): units are A's block columns, walked through the transpose index (t_ptr as the
   row pointer, t_row as the column list, t_blk naming the value block), so no value moves. A block of Aᵀ is
   a stored block read M-major: TMA loads it as 64 x 64 boxes (64 stored rows = 64 K of Aᵀ, 64 stored
   columns = 64 rows of Aᵀ), exactly the layout of a B panel, and wgmma reads it with trans-a = 1 and the
   B-panel descriptor (16 K rows = 2048 bytes per k16 step, 8-row groups 1024 bytes apart). */
template <int BM_, int WGN_, int STAGES_, bool EPI_, int CLUSTER_ = 1, bool PAIR_ = false, bool TRANS_ = false,
          int EPQ_ = 0, bool SLOTEPI_ = false>
struct Cfg {
    static constexpr int BM = BM_;                   /* block size                                    */
    static constexpr int WGN = WGN_;                 /* wgmma N per consumer warpgroup               */
    static constexpr int STAGES = STAGES_;
    static constexpr bool EPI = EPI_;
    static constexpr int CLUSTER = CLUSTER_;         /* CTAs sharing A (1 or 2)                       */
    static constexpr bool PAIR = PAIR_;              /* two block rows per tile                      */
    static_assert(!PAIR_ || (BM_ == 64 && WGN_ == 256 && CLUSTER_ == 1), "PAIR: BM 64, WGN 256, no cluster");
    static constexpr bool TRANS = TRANS_;            /* op T: tiles of Aᵀ (see the TRANS note above)   */
    static_assert(!TRANS_ || CLUSTER_ == 1, "TRANS: no cluster");
    static constexpr int TM = PAIR_ ? 2 * BM_ : BM_; /* rows of a tile                               */
    static constexpr bool SPLIT_N = (BM_ == 64 && !PAIR_); /* split BM 64: the consumers split the columns */
    static constexpr int BN = SPLIT_N ? 2 * WGN_ : WGN_;
    static constexpr int KSUB = BM_ / 64;            /* 64-wide K stages per block                   */
    static constexpr int PANELS = BN / 64;           /* 64-column B panels per stage                 */
    static constexpr int PF_B = BN / 256;            /* 256-column L2 prefetch boxes per B panel      */
    static constexpr int A_BYTES = TM * 64 * 2;
    static constexpr int B_BYTES = 64 * BN * 2;
    static constexpr int STAGE_TX = A_BYTES + B_BYTES;
    static constexpr int A_OFF = 0;
    static constexpr int B_OFF = STAGES_ * A_BYTES;
    /* EPI: 64-column panels staged per round (0: all WGN / 64 at once). Fewer panels per round leave room
       for a 4th ring stage at BM = 128 (4 x 48 KB + 2 x 16 KB staging fits in 227 KB); the rounds after the
       first wait for the previous round's TMA store to have read the buffer. (Session 5 measured the
       alternatives that keep 4 stages: consumer 1 staging in its item's last ring stage, kept from the producer
       until its store had read it, and the consumers' epilogues in turns: both slower, -2 to -7 %, because
       either one holds ring slots back from the producer; docs/hopper-spmm-notes.md.) */
    /* SLOTEPI (split BM 64 only, session 20): the TMA-store epilogue without a staging buffer — each consumer stages
       its 64 x WGN tile (16-bit, 128B-swizzled 64-column panels: WGN / 64 x 8 KB) in its own B boxes of the item's
       last ring slot, whose B panel it no longer needs, and releases that slot once the store has read it (one stage
       into the next item). For the 64 x 512 tile (3 x 72 KB stages: no room for staging), whose direct epilogue cost
       it ~25 % at d 0.1 (bench/smem_ceiling_probe.cu, run 2). */
    static constexpr bool SLOTEPI = SLOTEPI_;
    static_assert(!SLOTEPI_ || (BM_ == 64 && !PAIR_ && !EPI_ && CLUSTER_ == 1), "SLOTEPI: split BM 64");
    static constexpr bool TMA_C = EPI_ || SLOTEPI_;   /* C written by TMA stores (needs the C tensor map)      */
    static constexpr int EPQ = EPQ_ > 0 ? EPQ_ : WGN_ / 64;
    static_assert((WGN_ / 64) % EPQ == 0, "EPQ divides the consumer's panels");
    static constexpr int C_WG_BYTES = 64 * 64 * 2 * EPQ; /* one consumer's staging buffer (16-bit C)  */
    static constexpr int C_OFF = B_OFF + STAGES_ * B_BYTES;
    static constexpr int BAR_OFF = C_OFF + (EPI_ ? 2 * C_WG_BYTES : 0);
    static constexpr int META_OFF = BAR_OFF + 2 * STAGES_ * 8;
    static constexpr int CHAN = 2;                   /* item channel slots (clusters)                */
    static constexpr int CHAN_OFF = META_OFF + STAGES_ * 16; /* full[CHAN], empty[CHAN], t[CHAN]      */
    static constexpr int SMEM = CHAN_OFF + CHAN * 24 + 1024; /* + slack to align the base to 1024    */
    /* Long rows split into parts (K ranges) run by different CTAs, combined through fp32 partial tiles:
       BM = 128 tiles and (session 21) the 64 x 512 slot-epilogue tile (op N and op T), no cluster. One partial
       per consumer: 128 threads x WGN / 2 floats. The same configurations have the L2-partition queues and the
       automatic L2 hints. */
    static constexpr bool CAN_SPLIT = CLUSTER_ == 1 && !PAIR_ && (BM_ == 128 || SLOTEPI_);
    static constexpr int SPLIT_F4 = 128 * (WGN_ / 8);
    static constexpr int THREADS = 384;
};

/* ---------------------------------------------------------------- prep: order the units */

/* One CTA of 1024 threads: a counting sort of the units (block rows, or pairs of block rows) by
   length (blocks, both rows together), longest first (lengths past 1023 share the top bin), writing
   {unit, start, end, split code} (pairs: {unit, first row's start, its end, second row's start}, the second row's
   end in pair_end[] at the same rank and the two rows in pair_rows[unit]) with row_ptr clamped to [0, nnzb];
   zeroes the queue heads (counter[0], and
   counter[2..3] of the partition queues) and the count of CTAs done (counter[6]: the main kernel's last CTA
   zeroes all four again, so a pattern-cached work list is reused without this kernel), writes the number of
   items (units x nt) to counter[1] and to
   counter[4] whether the rows are skewed (longest unit >= twice the mean), to counter[5] whether they are
   short (mean < 12 blocks).
   Split (split_len L > 0, one-row units only): a row of len >= 2L blocks becomes P = min(len / L, 64) parts
   of consecutive blocks (lengths between L and 2L - 1, the longer ones first), each a unit of its own, entry
   {row, first, end, code} with code = (pbase + 1) << 12 | part << 6 | (P - 1): the row's P partial slots
   start at pbase (split_ctr / split_ws of the main kernel). Unsplit one-row units get code 0. If the parts
   would need more than parts_cap slots, L doubles until they fit (so the workspace bound always holds).
   A row's parts get increasing ranks (non-increasing lengths; one thread takes their positions in order), so
   for every N tile the last part is also the last of the row's items in the queue: it is the one that
   combines (it waits only for items taken before it).
   Bands: the sorted units are cut at length-class boundaries (class_shift 1: units whose lengths have the
   same bit length; 2: two bit lengths per class; 0: one class) and every band_rows units inside a class. The
   main kernel walks bands in order and, inside a band, N tile by N tile: long units start first (their items
   are not left for the end, where they would make the tail), and units of a band share B panels in L2.
   It lets the main kernel start at once (programmatic dependent launch); that kernel waits for this one's
   memory before reading it. */
/* Pair matching (PAIR configurations, session 24): a pair's stage loads one B panel per column of the union of its two
   rows' columns, so rows that share columns make fewer stages and fewer B bytes per flop (the b64 kernels are bound by
   the bytes an SM takes in). Adjacent rows of a random pattern share d^2 of the columns; each row's best partner shares
   more (CPU model over uniform patterns: unions 7-10 % smaller at 8192^3, 12-20 % at 32768 x 4096). Rounds of mutual
   best partners (a row's best by shared columns, ties to the nearer row, then the lower one; a pair forms where two
   rows choose each other), at most MATCH_ROUNDS; the rows left over pair in index order. Deterministic: the result
   depends on the pattern only. Two modes (the kernel's match argument): 1 full, every other row a candidate (rows^2 x
   words per round: ~30 us at 8192^3, ~220 us at 32768 x 4096 on the H100, session 24); 2 windowed, only the rows within
   MATCH_WINDOW on either side (rows x 32 x words: a few us, cheap enough for lists rebuilt on every call; CPU model,
   session 25: it keeps 60-80 % of the full matching's union cut). Limits (match_fits): MATCH_MAX_ROWS rows, MATCH_WORDS
   32-bit words of column masks (rows x ceil(cols / 32)), and in full mode MATCH_MAX_WORK word operations per round
   (rows^2 x words); otherwise adjacent rows pair. */
constexpr int MATCH_MAX_ROWS = 1024, MATCH_WORDS = 8192, MATCH_ROUNDS = 4, MATCH_WINDOW = 16;
constexpr long long MATCH_MAX_WORK = 1LL << 21;
/* the candidate key (below): the distance in 10 bits, the shared columns (< 32 x MATCH_WORDS) above bit 11 */
static_assert(MATCH_MAX_ROWS <= 1024, "pair matching: the key's distance field is 10 bits");
static_assert(32LL * MATCH_WORDS < (1LL << 21), "pair matching: the key's shared-column count must fit 21 bits");
static_assert(2 * MATCH_WINDOW == 32, "windowed pair matching: one candidate per lane");
/* whether the matcher takes a pattern of rows x cols in mode (1 full, 2 windowed; 0: no matching): the one rule,
   checked by the launcher, the dispatcher and the prep kernel */
__host__ __device__ inline bool match_fits(int mode, long long rows, long long cols)
{
    const long long w = (cols + 31) / 32;
    return (mode == 1 || mode == 2) && rows >= 2 && rows <= MATCH_MAX_ROWS && cols >= 1 && rows * w <= MATCH_WORDS &&
           (mode == 2 || rows * rows * w <= MATCH_MAX_WORK);
}

/* row_ptr[r] clamped to [0, nnzb]: a malformed row pointer never makes a list reach outside A's blocks */
__device__ __forceinline__ int row_ptr_at(const int32_t *__restrict__ row_ptr, int r, int nnzb)
{
    return min(max(row_ptr[r], 0), nnzb);
}
/* A unit's lists from the row pointer, the one rule of the prep kernel and of the main kernel's direct mode: row r0
   owns blocks [rs, re), row r1 (pairs; r1 >= mb: none) [rs2, re2), each end at least its start. Returns the blocks of
   both. */
__device__ __forceinline__ int unit_lists(const int32_t *__restrict__ row_ptr, int mb, int nnzb, int r0, int r1, int &rs,
                                          int &re, int &rs2, int &re2)
{
    auto rp = [&](int r) -> int { return row_ptr_at(row_ptr, r, nnzb); };
    rs = rp(r0);
    re = max(rp(r0 + 1), rs);
    rs2 = r1 < mb ? rp(r1) : re;
    re2 = r1 < mb ? max(rp(r1 + 1), rs2) : rs2;
    return (re - rs) + (re2 - rs2);
}

__global__ void __launch_bounds__(1024, 1)
    spmm_prep_kernel(const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ lists, int mb, int nb, int nnzb,
                     int pair, int match, int band_rows, int class_shift, int split_len, int parts_cap, int nt,
                     int long_len, int4 *__restrict__ sorted, int2 *__restrict__ bandinfo,
                     unsigned *__restrict__ counter, int *__restrict__ split_ctr, int *__restrict__ pair_end,
                     int2 *__restrict__ pair_rows, unsigned long long *__restrict__ prof)
{
    PREP_MARK(PREP_T_ENTRY);
    grid_dep_launch();
    __shared__ int hist[1024];
    __shared__ int excl[1025];
    __shared__ int warp_tot[33];
    __shared__ int s_sum, s_units, s_pbase, s_maxlen;
    __shared__ unsigned mbits[MATCH_WORDS]; /* pair matching: each row's column mask */
    __shared__ int2 s_pr[MATCH_MAX_ROWS / 2]; /* pair matching: the rows of each unit */
    const int tid = threadIdx.x;
    const int mu = pair ? (mb + 1) >> 1 : mb;
    const bool matched = pair && match_fits(match, mb, nb);
    auto rp = [&](int r) -> int { return row_ptr_at(row_ptr, r, nnzb); };
    if (matched) {
        const int W = (nb + 31) >> 5;
        int *partner = hist;                    /* reused: the sort below rewrites both */
        unsigned *best = (unsigned *)excl;
        for (int i = tid; i < mb * W; i += 1024) mbits[i] = 0u;
        for (int r = tid; r < mb; r += 1024) partner[r] = -1;
        __syncthreads();
        { /* the masks: warp w takes rows w, w + 32, ..., its lanes the row's entries */
            const int lane = tid & 31;
            for (int r = tid >> 5; r < mb; r += 32) {
                const int rs = rp(r), re = max(rp(r + 1), rs);
                for (int k = rs + lane; k < re; k += 32) {
                    const int c = lists[k];
                    if ((unsigned)c < (unsigned)nb) atomicOr(&mbits[r * W + (c >> 5)], 1u << (c & 31));
                }
            }
        }
        __syncthreads(); /* every mask complete before any warp compares them (session 24: without this barrier a warp
                            read rows still being built; racecheck's scheduling showed it, as a pairing unlike the
                            host reference's) */
        PREP_MARK(PREP_T_MASKS);
        /* a candidate's key: shared columns, then nearness (1023 - distance), then the lower row (unique per row) */
        auto key = [&](int r, int c) -> unsigned {
            int sc = 0;
            for (int w = 0; w < W; ++w) sc += __popc(mbits[r * W + w] & mbits[c * W + w]);
            const int dist = c > r ? c - r : r - c;
            return sc ? ((unsigned)sc << 11) | ((unsigned)(1023 - dist) << 1) | (c < r ? 1u : 0u) : 0u;
        };
        const int lane = tid & 31;
        const int wd = lane < MATCH_WINDOW ? lane - MATCH_WINDOW : lane - MATCH_WINDOW + 1; /* windowed: c - r */
        for (int round = 0; round < MATCH_ROUNDS; ++round) {
            /* each row's best candidate: warp w takes rows w, w + 32, ..., its lanes the candidates (full: rows lane,
               lane + 32, ...; windowed: lane l the row at distance 16 - l below or l - 15 above), a warp max (no
               atomics: one shared address per row serialised a warp's 32 updates, session 24's first run) */
            for (int r = tid >> 5; r < mb; r += 32) {
                if (partner[r] >= 0) { /* uniform in the warp */
                    if (lane == 0) best[r] = 0u;
                    continue;
                }
                unsigned k = 0u;
                if (match == 2) {
                    const int c = r + wd;
                    if (c >= 0 && c < mb && partner[c] < 0) k = key(r, c);
                } else
                    for (int c = lane; c < mb; c += 32)
                        if (c != r && partner[c] < 0) k = max(k, key(r, c));
                k = __reduce_max_sync(0xffffffffu, k);
                if (lane == 0) best[r] = k;
            }
            __syncthreads();
            int any = 0;
            for (int r = tid; r < mb; r += 1024) {
                const unsigned k = best[r];
                if (!k) continue;
                const int dist = 1023 - (int)((k >> 1) & 1023u), c = (k & 1u) ? r - dist : r + dist;
                const unsigned k2 = best[c];
                const int d2 = 1023 - (int)((k2 >> 1) & 1023u), c2 = (k2 & 1u) ? c - d2 : c + d2;
                if (k2 && c2 == r) {
                    partner[r] = c; /* read again only after the barrier below */
                    any = 1;
                }
            }
            if (!__syncthreads_or(any)) break;
        }
        PREP_MARK(PREP_T_ROUNDS);
        /* units: the pairs in order of their first row, then the rows left over, two by two in index order */
        const int r = tid;
        const int pr = r < mb ? partner[r] : -2;
        int nlead, nleft;
        const int ul = block_excl_scan(pr > r ? 1 : 0, warp_tot, &nlead);
        const int uo = block_excl_scan(pr == -1 ? 1 : 0, warp_tot, &nleft);
        if (pr > r) s_pr[ul] = make_int2(r, pr);
        if (pr == -1) {
            const int u = nlead + (uo >> 1);
            if (uo & 1) s_pr[u].y = r;
            else {
                s_pr[u].x = r;
                if (uo == nleft - 1) s_pr[u].y = mb; /* an odd row out: no second row */
            }
        }
        __syncthreads();
        PREP_MARK(PREP_T_UNITS);
    }
    /* unit i: clamped {start, end} of its (first) row, pairs also {start, end} of the second row; its length */
    auto unit = [&](int i, int &rs, int &re, int &rs2, int &re2) -> int {
        const int r0 = !pair ? i : matched ? s_pr[i].x : 2 * i, r1 = !pair ? mb : matched ? s_pr[i].y : 2 * i + 1;
        return unit_lists(row_ptr, mb, nnzb, r0, r1, rs, re, rs2, re2);
    };
    /* split: the parts of a row of len blocks (1: not split), and part q's offset in the row */
    int L = pair || parts_cap < 2 ? 0 : max(split_len, 0);
    auto nparts = [&](int len) -> int { return L > 0 && len >= 2 * L ? min(len / L, 64) : 1; };
    auto part_off = [&](int len, int P, int q) -> int { return q * (len / P) + min(q, len % P); };
    if (tid == 0) {
        counter[0] = counter[2] = counter[3] = counter[6] = 0u;
        s_pbase = 0;
    }
    /* the units' length histogram (one entry per part), their count and the longest; with a split also the slots its
       parts need — if more than parts_cap, L doubles and the pass repeats (rare: parts_cap >= nnzb / L >= the parts
       of any valid pattern unless the workspace budget capped it; malformed row_ptr can overlap rows) */
    for (;;) {
        hist[tid] = 0;
        if (tid == 0) {
            s_units = 0;
            s_maxlen = 0;
            s_sum = 0;
        }
        __syncthreads();
        int loc = 0;
        for (int i = tid; i < mu; i += 1024) {
            int rs, re, rs2, re2;
            const int len = unit(i, rs, re, rs2, re2), P = nparts(len);
            for (int q = 0; q < P; ++q) {
                const int pl = P > 1 ? part_off(len, P, q + 1) - part_off(len, P, q) : len;
                atomicAdd(&hist[1023 - min(pl, 1023)], 1);
            }
            atomicAdd(&s_units, P);
            atomicMax(&s_maxlen, len);
            if (P > 1) loc += P;
        }
        if (loc) atomicAdd(&s_sum, loc);
        __syncthreads();
        const bool fit = L == 0 || s_sum <= parts_cap; /* the same for every thread */
        if (fit) break;
        __syncthreads(); /* every thread has read s_sum before the next pass resets it */
        L = L > (1 << 29) ? 0 : 2 * L;
    }
    PREP_MARK(PREP_T_HIST);
    /* skewed rows (the longest >= twice the mean, >= 4 blocks): the main kernel's L2-partition queues pay there;
       short rows (mean < 12 blocks): C tiles come fast, the L2 hints pay there (session 8) */
    if (tid == 0) {
        counter[4] = s_maxlen >= 4 && (long long)s_maxlen * mu >= 2LL * nnzb ? 1u : 0u;
        counter[5] = (long long)nnzb < 12LL * mu ? 1u : 0u;
    }
    const int mu2 = s_units; /* units after the split */
    /* exclusive scan of hist[0..1023] (bin 0 = longest units) */
    int hsum;
    const int ex = block_excl_scan(hist[tid], warp_tot, &hsum);
    hist[tid] = ex;
    excl[tid] = ex;
    if (tid == 0) {
        excl[1024] = mu2;
        counter[1] = (unsigned)mu2 * (unsigned)nt;
    }
    __syncthreads();
    PREP_MARK(PREP_T_SCAN);
    /* long units (part_long): those of >= long_len blocks, a prefix of the sorted order that ends at a class boundary
       when long_len is a power of two and the classes are one bit wide (bands never straddle it). After the barrier:
       excl[k] is thread k's (a review found this read before it, session 23; compile-checked only since). */
    if (tid == 0)
        counter[7] = long_len > 0 && class_shift == 1 ? (unsigned)excl[1024 - min(long_len, 1024)] : 0u;
    const int R = max(band_rows, 1);
    for (int i = tid; i < mu; i += 1024) {
        int rs, re, rs2, re2;
        const int len = unit(i, rs, re, rs2, re2), P = nparts(len);
        if (pair) pair_rows[i] = matched ? s_pr[i] : make_int2(2 * i, 2 * i + 1);
        const int pbase = P > 1 ? atomicAdd(&s_pbase, P) : 0;
        for (int q = 0; q < P; ++q) {
            const int o0 = P > 1 ? part_off(len, P, q) : 0, o1 = P > 1 ? part_off(len, P, q + 1) : len;
            const int pl = o1 - o0, lm = min(pl, 1023);
            int cstart = 0, cend = mu2;
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
            /* one-row units: {row, first, end, split code}; pairs: {pair, first row's start and end, second row's
               start} and the second row's end in pair_end */
            sorted[pos] = pair ? make_int4(i, rs, re, rs2)
                               : make_int4(i, rs + o0, rs + o1, P > 1 ? ((pbase + 1) << 12) | (q << 6) | (P - 1) : 0);
            if (pair) pair_end[pos] = re2;
            bandinfo[pos] = make_int2(bf, min(R, cend - bf));
        }
    }
    /* the split rows' store counters: 2 consumers per (row, N tile) */
    __syncthreads();
    PREP_MARK(PREP_T_WRITE);
    const long long nctr = (long long)s_pbase * nt * 2;
    for (long long k = tid; k < nctr; k += 1024) split_ctr[k] = 0;
    PREP_MARK(PREP_T_END);
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
   keeps the 32 lanes of each store on 32 different banks. Only panels Q0 .. Q0 + NQ - 1, into buffer panels
   0 .. NQ - 1 (a round of the epilogue). */
template <int CT, int WGN, int Q0, int NQ>
__device__ __forceinline__ void stage_tile(const float *acc, uint32_t cbuf, int rl, int lane, float alpha)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = rl + 8 * h;
        const uint32_t rowa = cbuf + (uint32_t)r * 128u + 4u * (uint32_t)(lane & 3);
#pragma unroll
        for (int j = 8 * Q0; j < 8 * (Q0 + NQ); ++j) {
            const float a = alpha * acc[4 * j + 2 * h], b = alpha * acc[4 * j + 2 * h + 1];
            uint32_t v;
            if (CT == BSK_F16) {
                __half2 hv = __floats2half2_rn(a, b);
                v = *(uint32_t *)&hv;
            } else {
                __nv_bfloat162 hv = __floats2bfloat162_rn(a, b);
                v = *(uint32_t *)&hv;
            }
            const uint32_t addr = rowa + (uint32_t)((j >> 3) - Q0) * 8192u + ((uint32_t)((j & 7) ^ (r & 7)) << 4);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
        }
    }
}
/* ---------------------------------------------------------------- main kernel */

/* TA = 1: A is read M-major (the blocks of Aᵀ as stored). */
template <int WGN, int DT, int TA> struct Mma;
template <int TA> struct Mma<256, BSK_F16, TA> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_f16<TA, 1>(d, a, b, 1); }
};
template <int TA> struct Mma<256, BSK_BF16, TA> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n256k16_bf16<TA, 1>(d, a, b, 1); }
};
template <int TA> struct Mma<128, BSK_F16, TA> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_f16<TA, 1>(d, a, b, 1); }
};
template <int TA> struct Mma<128, BSK_BF16, TA> {
    static __device__ __forceinline__ void run(float *d, uint64_t a, uint64_t b) { wgmma_m64n128k16_bf16<TA, 1>(d, a, b, 1); }
};

/* Registers per thread after setmaxnreg: 128 x PRODUCER + 256 x CONSUMER must not exceed what the CTA got
   at launch (384 x 168 = 64512). */
constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= 384 * 168, "register budget");
/* Per configuration: the op-T pair producer (two lists, each entry's value block shuffled in) spilled 20-24 bytes at
   56 registers; at 72 it does not, and its consumers do not spill at 216 (the op-T b128 consumers do: they keep 224).
   Same-run A/B on the H200 (session 16): Aᵀ·B b64 +3 to +5 %. */
template <class CF> struct Regs {
    static constexpr int P = CF::PAIR && CF::TRANS ? 72 : PRODUCER_REGS;
    static constexpr int C = CF::PAIR && CF::TRANS ? 216 : CONSUMER_REGS;
    static_assert(128 * P + 256 * C <= 384 * 168, "register budget");
};

template <class CF, int DT>
__global__ void __launch_bounds__(384, 1)
    spmm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                const __grid_constant__ CUtensorMap tmC, const __grid_constant__ CUtensorMap tmPA,
                const __grid_constant__ CUtensorMap tmPB, const SpmmParams p)
{
    constexpr bool CL = CF::CLUSTER > 1;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sbase = smem_u32(smem);
    const uint32_t full0 = sbase + CF::BAR_OFF, empty0 = full0 + 8 * CF::STAGES;
    int4 *meta = (int4 *)(smem + CF::META_OFF);
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const uint32_t rank = CL ? cluster_ctarank() : 0u;
#ifdef BSK_HOPPER_PROF
    if (p.prep_prof && blockIdx.x == 0 && threadIdx.x == 0) p.prep_prof[PREP_T_MAIN_ENTRY] = globaltimer_ns();
#endif

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
        if (p.pf > 0) {
            tma_prefetch_desc(&tmPA);
            tma_prefetch_desc(&tmPB);
        }
    }
    __syncthreads();
    if (CL) cluster_sync(); /* every CTA's barriers exist before any other CTA touches them */
    grid_dep_wait();        /* the prep kernel's order and counter are visible from here on */
#ifdef BSK_HOPPER_PROF
    if (p.prep_prof && blockIdx.x == 0 && threadIdx.x == 0) p.prep_prof[PREP_T_MAIN_WAITED] = globaltimer_ns();
#endif
    const int l2h = p.l2hint | (CF::CAN_SPLIT && p.l2hint_auto && *(volatile unsigned *)(p.counter + 4) == 0u &&
                                        *(volatile unsigned *)(p.counter + 5) != 0u
                                    ? 3
                                    : 0);

    if (wg == 0) {
        /* ------------------------------------------------------------ producer */
        setmaxnreg_dec<Regs<CF>::P>();
        if (warp == 0) {
            uint32_t s = 0, ph = 0, ci = 0, cph = 0;
            /* items: split configurations read the prep's count (parts are units); the others' is the host's */
            const unsigned nt = (unsigned)p.nt,
                           total = CF::CAN_SPLIT && !p.direct ? *(volatile unsigned *)(p.counter + 1) : p.total_items;
            const int D = CF::TRANS ? 0 : p.pf; /* no L2 prefetch for op T (off by default anyway) */
            const uint64_t pol_a = l2_policy_evict_last(); /* used only with l2h & 1 */
            /* Items: CTA 0's lane 0 takes them from the queue (fetch, one item ahead); in a cluster it hands each
               to CTA 1 through the channel (exchange), whose producer then walks the same blocks. */
            /* partition queues (skewed rows, session 8): group 0 = items [0, sz0), group 1 = [sz0, total) */
            /* row groups (session 9; part_rows 2: on rows the prep found not skewed): group 0 = the units of even
               rank, nt * ceil(units / 2) items; tile groups (session 8; by default on skewed rows) otherwise */
            const bool skewed = *(volatile unsigned *)(p.counter + 4) != 0u;
            const bool rows_want = CF::CAN_SPLIT && (p.part_rows == 1 || (p.part_rows == 2 && !skewed));
            const bool use_part =
                CF::CAN_SPLIT && p.part && (nt >= 2 || rows_want) && (p.part_force || skewed || rows_want);
            const unsigned mypart = use_part ? (unsigned)p.part[sm_id()] & 1u : 0u;
            const bool rows = use_part && rows_want;
            const unsigned ptg = p.part_tg > 0 && (unsigned)p.part_tg < nt ? (unsigned)p.part_tg : (nt + 1) / 2;
            const unsigned tg = !CF::CAN_SPLIT ? nt : use_part && !rows ? ptg : rows ? nt : (unsigned)p.tg;
            const unsigned gsz = CF::CAN_SPLIT ? (rows ? nt * ((total / nt + 1) / 2) : total / nt * tg) : total;
            /* partition 0: the first ceil(groups / 2) tile groups (one group of half the tiles by default) */
            const unsigned sz0 =
                use_part && !rows ? min(gsz * (((nt + tg - 1) / tg + 1) / 2), total) : min(gsz, total);
            /* part_long: the first rl ranks (long units) take their partition's N tiles [a, b) first (phase A), the
               others then walk its tile groups (phase B); tiles of partition 0: T0 = sz0 / units */
            const unsigned units = CF::CAN_SPLIT ? total / nt : 0u;
            const unsigned rl = CF::CAN_SPLIT && use_part && !rows && p.part_long
                                    ? min(*(volatile unsigned *)(p.counter + 7), units)
                                    : 0u;
            const unsigned T0 = rl ? sz0 / units : 0u;
            auto fetch = [&]() -> unsigned {
                if (lane != 0 || rank != 0) return 0u;
                if (use_part) {
                    const unsigned u = atomicAdd(p.counter + 2 + mypart, 1u);
                    if (u < (mypart ? total - sz0 : sz0)) return mypart ? sz0 + u : u;
                    const unsigned v = atomicAdd(p.counter + 3 - mypart, 1u); /* help the other partition */
                    if (v < (mypart ? sz0 : total - sz0)) return mypart ? v : sz0 + v;
                    return total;
                }
                return atomicAdd(p.counter, 1u) + gridDim.x / CF::CLUSTER; /* after the CTAs' own first items */
            };
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
                            mbar_arrive_cluster(mapa(che0 + 8 * ci, 0)); /* once per item: keeps the strict
                                                   cluster-scope order of this read before CTA 0's next store */
                        }
                    }
                    if (++ci == CF::CHAN) { ci = 0; cph ^= 1; }
                }
                return __shfl_sync(0xffffffffu, v, 0);
            };
            /* one stage's bookkeeping (lane 0): wait for the slot, publish the meta record, arm the full
               barrier (the TMA loads, if any, follow). The record is a plain store ordered by the barrier's
               release/acquire; each consumer warp reads it through its lane 0 only (stage_record_read), the
               lane that releases the slot. (st.async onto the full barrier faulted outside a real cluster.) */
            long long pr_wait = 0;
            const long long pr_t0 = BSK_PROF_CLOCK();
            (void)pr_t0;
            auto open_stage = [&](int4 mv, uint32_t bytes) {
                const uint32_t fb = full0 + 8 * s;
                const long long w0 = BSK_PROF_CLOCK();
                /* CTA-scope acquire even in a cluster: the peer's arrivals publish no data (the slot was only read),
                   and the cluster-scope acquire adds an L1 invalidation (CCTL.IVALL) per stage (session 21) */
                mbar_wait(empty0 + 8 * s, ph ^ 1);
                pr_wait += BSK_PROF_CLOCK() - w0;
                meta[s] = mv;
                if (bytes) mbar_arrive_expect_tx(fb, bytes);
                else mbar_arrive(fb);
            };
            /* An item's description takes two dependent loads (its band, then its sorted entry) and the first
               32 column indices of each list: three steps, spread over the previous item's stages. */
            /* item t: tile group g (tg N tiles, the last one maybe fewer: tge), position j in the group; the
               group holds every unit for each of its tiles, band by band, so rank j / tge names the band.
               Tile groups only in the split-capable configurations (BM = 128, no cluster); the others keep
               tg = nt (one group), folded at compile time (the op-T pair producer is short of registers). */
            /* With part_long (rl > 0) a partition's items are phase A (ranks [0, rl) x its tiles, one group) then
               phase B (ranks [rl, units) in its tile groups): rb is the phase's first rank, so inside a group the
               band of first rank x starts at (x - rb) * tge. */
            auto group_of = [&](unsigned t, unsigned &g0, unsigned &tge, unsigned &rb) -> unsigned {
                rb = 0;
                if (!CF::CAN_SPLIT) {
                    g0 = 0;
                    tge = nt;
                    return t;
                }
                if (rl) {
                    const bool q1 = t >= sz0;
                    const unsigned a = q1 ? T0 : 0u, b = q1 ? nt : T0, u = t - (q1 ? sz0 : 0u);
                    if (u < rl * (b - a)) {
                        g0 = a;
                        tge = b - a;
                        return u;
                    }
                    const unsigned v = u - rl * (b - a), gs = (units - rl) * tg, g = v / gs;
                    g0 = a + g * tg;
                    tge = min(tg, b - g0);
                    rb = rl;
                    return v - g * gs;
                }
                const unsigned g = t / gsz;
                g0 = g * tg;
                tge = min(tg, nt - g0);
                return t - g * gsz;
            };
            /* Row groups: item t of group g (t >= sz0) is u = t - g * sz0 of that group, which walks the plain
               order restricted to the ranks of parity g. With c_g(x) = (x + 1 - g) / 2 ranks of parity g below x,
               a band [x, x + n) holds nt * (c_g(x + n) - c_g(x)) of the group's items, after nt * c_g(x) others:
               so rank 2 * (u / nt) + g lies in u's band, and inside the band w = u - nt * c_g(x) is N tile
               w / ng, unit rank 2 * (c_g(x) + w % ng) + g (ng = the band's ranks of parity g, >= 1 there). */
            auto rows_split = [&](unsigned t, unsigned &g, unsigned &u) {
                g = t >= sz0 ? 1u : 0u;
                u = t - g * sz0;
            };
            auto rows_pos = [&](unsigned g, unsigned u, int2 bi, unsigned &ng) -> unsigned {
                const unsigned c0 = ((unsigned)bi.x + 1u - g) >> 1;
                ng = ((unsigned)(bi.x + bi.y) + 1u - g) / 2u - c0;
                return u - nt * c0; /* w */
            };
            auto band_of = [&](unsigned t) -> int2 {
                if (p.direct) return make_int2(0, p.units); /* one band: every unit, unsorted */
                if (rows) {
                    unsigned g, u;
                    rows_split(t, g, u);
                    return p.bandinfo[2u * (u / nt) + g];
                }
                unsigned g0, tge, rb;
                const unsigned j = group_of(t, g0, tge, rb);
                return p.bandinfo[rb + j / tge];
            };
            auto rank_of = [&](unsigned t, int2 bi) -> unsigned {
                if (rows) {
                    unsigned g, u, ng;
                    rows_split(t, g, u);
                    const unsigned w = rows_pos(g, u, bi, ng);
                    return 2u * ((((unsigned)bi.x + 1u - g) >> 1) + w % ng) + g;
                }
                unsigned g0, tge, rb;
                const unsigned j = group_of(t, g0, tge, rb);
                return (unsigned)bi.x + (j - ((unsigned)bi.x - rb) * tge) % (unsigned)bi.y;
            };
            /* item t's sorted entry and, PAIR, its second row's end: make_item's list A is [e.y, e.z), list B
               [e.w, e2) */
            struct Entry {
                int4 e;
                int e2; /* PAIR: the second row's end (pair_end) */
            };
            auto entry_of = [&](unsigned t, int2 bi) -> Entry {
                const unsigned k = rank_of(t, bi);
                Entry r;
                if (p.direct) { /* the prep's entry of unit k, from the row pointer (no split: code 0) */
                    int rs, re, rs2, re2;
                    unit_lists(p.units_ptr, p.mb, p.nnzb, CF::PAIR ? 2 * (int)k : (int)k,
                               CF::PAIR ? 2 * (int)k + 1 : p.mb, rs, re, rs2, re2);
                    r.e = make_int4((int)k, rs, re, CF::PAIR ? rs2 : 0);
                    r.e2 = re2;
                    return r;
                }
                r.e = p.sorted[k];
                r.e2 = CF::PAIR ? p.pair_end[k] : 0;
                return r;
            };
            struct Item {
                int unit, ntile, ka, ea, kb, eb; /* list A = [ka, ea), list B = [kb, eb) (empty without PAIR) */
                int sp;                          /* split code of a one-row unit's part (0: whole row)         */
            };
            auto make_item = [&](unsigned t, int2 bi, Entry en) -> Item {
                const int4 e = en.e;
                Item it;
                if (rows) {
                    unsigned g, u, ng;
                    rows_split(t, g, u);
                    it.ntile = (int)(rows_pos(g, u, bi, ng) / ng);
                } else {
                    unsigned g0, tge, rb;
                    const unsigned j = group_of(t, g0, tge, rb);
                    it.ntile = (int)(g0 + (j - ((unsigned)bi.x - rb) * tge) / (unsigned)bi.y);
                }
                it.unit = e.x;
                it.ka = e.y;
                it.ea = max(e.z, e.y);
                it.kb = CF::PAIR ? e.w : 0; /* without PAIR list B is empty: constants, no registers */
                it.eb = CF::PAIR ? max(en.e2, e.w) : 0;
                it.sp = CF::CAN_SPLIT ? e.w : 0;
                return it;
            };
            /* lane l holds col_idx[base + l] (or -1 past end) */
            auto chunk = [&](int base, int end) -> int { return base + lane < end ? __ldg(p.col_idx + base + lane) : -1; };
            auto chunk_b = [&](int base, int end) -> int { return CF::PAIR ? chunk(base, end) : -1; };
            /* TRANS: lane l holds blk_idx[base + l], the value block of that entry (op N: unused, constant) */
            auto vchunk = [&](int base, int end) -> int {
                return CF::TRANS && base + lane < end ? __ldg(p.blk_idx + base + lane) : 0;
            };
            auto vchunk_b = [&](int base, int end) -> int { return CF::PAIR ? vchunk(base, end) : 0; };
            auto tile_n0 = [&](const Item &it) -> int { return (it.ntile * CF::CLUSTER + (int)rank) * CF::BN; };
            /* L2 prefetch of block `blk` (block column j) and its B panel at N offset n0 (lane 0 issues) */
            auto pf_block = [&](int blk, int j, int n0) {
                if (lane == 0 && (unsigned)j < (unsigned)p.nb) {
                    tma_prefetch_3d(&tmPA, 0, 0, blk);
#pragma unroll
                    for (int q = 0; q < CF::PF_B; ++q) tma_prefetch_2d(&tmPB, n0 + 256 * q, j * CF::BM);
                }
            };
            /* the first D blocks of each list of an item (lanes hold its first 32 columns) */
            auto pf_first = [&](const Item &it, int c_a, int c_b) {
                const int n0 = tile_n0(it);
                for (int i = 0; i < D; ++i) {
                    const int ja = __shfl_sync(0xffffffffu, c_a, i), jb = __shfl_sync(0xffffffffu, c_b, i);
                    if (it.ka + i < it.ea) pf_block(it.ka + i, ja, n0);
                    if (it.kb + i < it.eb) pf_block(it.kb + i, jb, n0);
                }
            };
            /* column at offset off (0..63) of a two-chunk window */
            auto col_at = [&](int c0, int c1, int off) -> int {
                const int v0 = __shfl_sync(0xffffffffu, c0, off & 31), v1 = __shfl_sync(0xffffffffu, c1, off & 31);
                return off < 32 ? v0 : v1;
            };

            /* the first item: the CTA's own index in the one-queue order (no ticket round trip on the kernel's
               critical path, where at 2048^3 a CTA runs one or two items: +0.2 to +1.7 % there, session 17), the
               queue's tickets then count from the number of ticket-taking CTAs; with the partition queues a ticket
               as every later item */
            unsigned t = exchange(!use_part ? (lane == 0 && rank == 0 ? blockIdx.x / CF::CLUSTER : 0u) : fetch());
            Item it = {0, 0, 0, 0, 0, 0, 0};
            int ca = -1, cb = -1, va = 0, vb = 0;
            if (t < total) {
                const int2 bi = band_of(t);
                it = make_item(t, bi, entry_of(t, bi));
                ca = chunk(it.ka, it.ea);
                cb = chunk_b(it.kb, it.eb);
                va = vchunk(it.ka, it.ea);
                vb = vchunk_b(it.kb, it.eb);
                if (D > 0) pf_first(it, ca, cb);
            }
            for (;;) {
                if (t >= total) {
                    if (lane == 0) open_stage(make_int4(0, 0, 0, META_END), 0);
#ifdef BSK_HOPPER_PROF
                    if (lane == 0 && p.prof) {
                        p.prof[16 * blockIdx.x + 14] += (unsigned long long)pr_wait;
                        p.prof[16 * blockIdx.x + 15] += (unsigned long long)(BSK_PROF_CLOCK() - pr_t0);
                    }
#endif
                    break;
                }
                const unsigned pend = fetch(); /* the next item, fetched one ahead */
                /* Look-ahead on the next item, one step per block of this one (the rest after its last block). */
                int la = 0;
                unsigned tn = 0;
                int2 nbi = make_int2(0, 1);
                Entry ne = {make_int4(0, 0, 0, 0), 0};
                Item nit = {0, 0, 0, 0, 0, 0, 0};
                int nca = -1, ncb = -1, nva = 0, nvb = 0;
                auto look = [&]() {
                    if (la == 0) {
                        tn = exchange(pend);
                        if (tn < total) nbi = band_of(tn);
                    } else if (la == 1) {
                        if (tn < total) ne = entry_of(tn, nbi);
                    } else if (la == 2) {
                        if (tn < total) {
                            nit = make_item(tn, nbi, ne);
                            nca = chunk(nit.ka, nit.ea);
                            ncb = chunk_b(nit.kb, nit.eb);
                            nva = vchunk(nit.ka, nit.ea);
                            nvb = vchunk_b(nit.kb, nit.eb);
                        }
                    } else if (la == 3) {
                        if (D > 0 && tn < total) pf_first(nit, nca, ncb);
                    }
                    ++la;
                };
                const int n0 = tile_n0(it);
                int ka = it.ka, kb = it.kb, baseA = ka, baseB = kb, done = 0;
                int ca2 = chunk(baseA + 32, it.ea), cb2 = chunk_b(baseB + 32, it.eb);
                int va2 = vchunk(baseA + 32, it.ea), vb2 = vchunk_b(baseB + 32, it.eb);
                if (ka >= it.ea && kb >= it.eb) { /* no blocks: one empty stage, the epilogue writes alpha*0 */
                    if (lane == 0) open_stage(make_int4(it.unit, it.ntile, it.sp, META_SKIP | META_LAST), 0);
                    if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                }
                while (ka < it.ea || kb < it.eb) {
                    if (ka - baseA == 32) {
                        baseA += 32;
                        ca = ca2;
                        ca2 = chunk(baseA + 32, it.ea);
                        va = va2;
                        va2 = vchunk(baseA + 32, it.ea);
                    }
                    if (kb - baseB == 32) {
                        baseB += 32;
                        cb = cb2;
                        cb2 = chunk_b(baseB + 32, it.eb);
                        vb = vb2;
                        vb2 = vchunk_b(baseB + 32, it.eb);
                    }
                    const int xa = __shfl_sync(0xffffffffu, ca, (ka - baseA) & 31);
                    const int xb = __shfl_sync(0xffffffffu, cb, (kb - baseB) & 31);
                    /* the value blocks to load: entry k itself (op N), or the transpose index's t_blk[k] */
                    const int vblkA = CF::TRANS ? __shfl_sync(0xffffffffu, va, (ka - baseA) & 31) : ka;
                    const int vblkB = CF::TRANS ? __shfl_sync(0xffffffffu, vb, (kb - baseB) & 31) : kb;
                    const bool hasA = ka < it.ea, hasB = kb < it.eb;
                    const int ja = hasA ? xa : INT_MAX, jb = hasB ? xb : INT_MAX;
                    const int j = min(ja, jb);               /* merge: the smaller column goes first */
                    const bool inA = hasA && ja == j, inB = hasB && jb == j;
                    const int blkA = ka, blkB = kb;
                    ka += inA ? 1 : 0;
                    kb += inB ? 1 : 0;
                    const bool ok = (unsigned)j < (unsigned)p.nb;
                    int fl = ok ? 0 : META_SKIP;
                    if (CF::PAIR && ok) fl = (inA ? 0 : META_SKIP0) | (inB ? 0 : META_SKIP1);
                    const bool last = ka >= it.ea && kb >= it.eb;
                    const uint32_t bytes = !ok ? 0u
                                           : CF::PAIR ? (uint32_t)CF::B_BYTES + (inA ? 8192u : 0u) + (inB ? 8192u : 0u)
                                                      : (uint32_t)CF::STAGE_TX;
#pragma unroll
                    for (int h = 0; h < CF::KSUB; ++h) {
                        if (lane == 0) {
                            open_stage(make_int4(it.unit, it.ntile, it.sp, fl | (last && h == CF::KSUB - 1 ? META_LAST : 0)),
                                       bytes);
                            if (ok) {
                                const uint32_t fb = full0 + 8 * s;
                                const uint32_t adst = sbase + CF::A_OFF + s * CF::A_BYTES;
                                const uint32_t bdst = sbase + CF::B_OFF + s * CF::B_BYTES;
                                if (CF::PAIR) { /* each row's 64 x 64 block into its consumer's half */
                                    if (l2h & 1) {
                                        if (inA) tma_load_3d_hint(adst, &tmA, fb, 0, 0, vblkA, pol_a);
                                        if (inB) tma_load_3d_hint(adst + 64u * 128u, &tmA, fb, 0, 0, vblkB, pol_a);
                                    } else {
                                        if (inA) tma_load_3d(adst, &tmA, fb, 0, 0, vblkA);
                                        if (inB) tma_load_3d(adst + 64u * 128u, &tmA, fb, 0, 0, vblkB);
                                    }
                                } else if (CF::TRANS) { /* Aᵀ's 64-row panels: stored columns 64q.., rows h*64.. */
#pragma unroll
                                    for (int q = 0; q < CF::BM / 64; ++q)
                                        tma_load_3d(adst + q * 8192u, &tmA, fb, 64 * q, h * 64, vblkA);
                                } else if (CL) /* my 64 rows of A's panel, into both CTAs */
                                    tma_load_3d_mc(adst + rank * 64u * 128u, &tmA, fb, h * 64, (int)rank * 64, blkA,
                                                   (uint16_t)3);
                                else if (l2h & 1)
                                    tma_load_3d_hint(adst, &tmA, fb, h * 64, 0, CF::CAN_SPLIT && (p.fab & 2) ? 0 : blkA,
                                                     pol_a);
                                else
                                    tma_load_3d(adst, &tmA, fb, h * 64, 0, CF::CAN_SPLIT && (p.fab & 2) ? 0 : blkA);
                                const int krow = j * CF::BM + h * 64;
                                const int nb0 = CF::CAN_SPLIT && (p.fab & 4) ? 0 : n0; /* diagnostic: N tile 0 */
#pragma unroll
                                for (int qq = 0; qq < CF::PANELS; ++qq)
                                    tma_load_2d(bdst + qq * 8192, &tmB, fb, nb0 + qq * 64, krow);
                            }
                        }
                        if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                    }
                    if (D > 0) { /* the block D places further down each list that moved */
                        const int pa = col_at(ca, ca2, blkA + D - baseA), pb = col_at(cb, cb2, blkB + D - baseB);
                        if (inA && blkA + D < it.ea) pf_block(blkA + D, pa, n0);
                        if (inB && blkB + D < it.eb) pf_block(blkB + D, pb, n0);
                    }
                    /* look-ahead steps after the 2nd, 3rd and 4th block (the ticket taken at the item's start has
                       had a block's time to come back), the prefetch once fewer than D blocks are left */
                    ++done;
                    if (la < 3 ? done >= 2 : (la == 3 && (it.ea - ka) + (it.eb - kb) < D)) look();
                }
                while (la < 4) look();
                t = tn;
                it = nit;
                ca = nca;
                cb = ncb;
                va = nva;
                vb = nvb;
            }
            /* this CTA has taken its last ticket (only rank 0 takes them): the last CTA to get here leaves the
               queues at zero for the next launch, which skips the prep kernel when the work list is cached per
               pattern (no CTA takes another ticket in this one). After the loop: nothing else is live here. */
            if (lane == 0 && rank == 0) {
                /* the address taken afresh from the parameter (+ the clock's bit 63, 0 for centuries: else ptxas keeps
                   counter + 4 from the kernel's start live through the whole loop, an 8-byte spill in the paired-b64
                   producer) */
                queue_done_reset<6, 0xdu>(p.counter + ((unsigned long long)clock64() >> 63), gridDim.x / CF::CLUSTER);
            }
        }
    } else {
        /* ------------------------------------------------------------ consumers */
        setmaxnreg_inc<Regs<CF>::C>();
        /* c through a warp reduction: a uniform register, so the descriptors derived from it stay in uniform
           registers (from threadIdx each wgmma's descriptors were rebuilt in per-thread registers and moved over
           with four R2UR; session 14, as in the small-block SpMM and the attention kernel) */
        const int c = (int)__reduce_or_sync(0xffffffffu, (unsigned)(wg - 1));
        const int skip_me = c == 0 ? META_SKIP0 : META_SKIP1;
        float acc[CF::WGN / 2];
        uint32_t s = 0, ph = 0;
        const uint32_t a_off = CF::SPLIT_N ? 0u : (uint32_t)c * 64u * 128u;
        const uint32_t b_off = CF::SPLIT_N ? (uint32_t)c * (CF::WGN / 64) * 8192u : 0u;
        /* The full barrier completes through TMA transactions (own loads and the peer's multicast), which
           makes the data visible to the waiting threads; CTA scope is what the copy engine's completion needs.
           cl_acq keeps the cluster-scope acquire of the run-4 kernel for comparison. */
        long long pc[6] = {0, 0, 0, 0, 0, 0}; /* PROF_* counters (probe builds) */
        const long long pc_t0 = BSK_PROF_CLOCK();
        (void)pc_t0;
        auto wait_full = [&]() {
            const long long w0 = BSK_PROF_CLOCK();
            if (CL && p.cl_acq) mbar_wait_cluster(full0 + 8 * s, ph);
            else mbar_wait(full0 + 8 * s, ph);
            pc[PROF_WAIT] += BSK_PROF_CLOCK() - w0;
        };
        auto release_at = [&](uint32_t ss) { /* one arrival per warp on every CTA's empty barrier of the stage */
            __syncwarp();
            if (lane == 0) {
                mbar_arrive(empty0 + 8 * ss);
                if (CL) mbar_arrive_remote(mapa(empty0 + 8 * ss, rank ^ 1u)); /* not the cluster-scope release:
                                                                                 MEMBAR.ALL.GPU per stage (s21) */
            }
        };
        auto release = [&]() { release_at(s); };
        /* SLOTEPI: the slot holding the previous item's staged C tile, released once its TMA store has read it (the
           empty barrier completes only with every warp's arrival, so warp 0's after bulk_wait_read orders it) */
        int pend = -1;
        auto release_pend = [&]() {
            if (CF::SLOTEPI && pend >= 0) {
                if ((threadIdx.x & 127) == 0) bulk_wait_read<0>();
                release_at((uint32_t)pend);
                pend = -1;
            }
        };
        const int tw = threadIdx.x & 127;
        /* sbase through a warp reduction as well (a uniform register: the descriptors below stay uniform) */
        const uint32_t sbu = __reduce_or_sync(0xffffffffu, sbase);
        const uint64_t dA0 = CF::TRANS ? smem_desc(sbu + CF::A_OFF + a_off, 8192, 1024) : smem_desc(sbu + CF::A_OFF + a_off, 16, 1024);
        const uint64_t dB0 = smem_desc(sbu + CF::B_OFF + b_off, p.b_lbo, p.b_sbo);
        for (;;) {
            wait_full();
            const int4 m = stage_record_read(&meta[s], lane);
            if (m.w & META_END) {
                if (CF::TMA_C && (threadIdx.x & 127) == 0) bulk_wait0(); /* staged tiles read before exit */
#ifdef BSK_HOPPER_PROF
                pc[PROF_TOTAL] = BSK_PROF_CLOCK() - pc_t0;
                if ((threadIdx.x & 127) == 0 && p.prof)
                    for (int i = 0; i < 6; ++i) p.prof[16 * blockIdx.x + 8 * c + i] += (unsigned long long)pc[i];
#endif
                break;
            }
            const int unit = m.x, ntile = m.y * CF::CLUSTER + (int)rank, sp = m.z;
            /* PAIR: this consumer's block row (read now, used by the epilogue) */
            const int prow = !CF::PAIR ? 0 : p.direct ? 2 * unit + c : c == 0 ? p.pair_rows[unit].x : p.pair_rows[unit].y;
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) reg_fence(acc[i]);
            int fl = m.w;
            fl = (int)__reduce_or_sync(0xffffffffu, (unsigned)fl);
            for (;;) {
                if (!(fl & skip_me)) {
                    const long long m0 = BSK_PROF_CLOCK();
                    wgmma_fence();
                    /* stage 0's descriptors (built once, below the loop head) moved by the stage's offset and the
                       k16 step's, in 16-byte units: one add each instead of a fresh mask-shift-or per wgmma */
#pragma unroll
                    for (int k = 0; k < 4; ++k)
                        Mma<CF::WGN, DT, CF::TRANS ? 1 : 0>::run(
                            acc, desc_advance(dA0, s * (uint32_t)(CF::A_BYTES / 16) + (uint32_t)(CF::TRANS ? 128 * k : 2 * k)),
                            desc_advance(dB0, s * (uint32_t)(CF::B_BYTES / 16) + (uint32_t)(128 * k)));
                    wgmma_commit();
                    wgmma_wait<0>();
                    pc[PROF_MMA] += BSK_PROF_CLOCK() - m0;
                    pc[PROF_STAGES] += 1;
                }
                const uint32_t s_done = s;
                if (!(CF::SLOTEPI && (fl & META_LAST))) release(); /* SLOTEPI keeps the item's last slot for C */
                release_pend();
                if (++s == CF::STAGES) { s = 0; ph ^= 1; }
                if (fl & META_LAST) {
                    if (CF::SLOTEPI) pend = (int)s_done;
                    break;
                }
                wait_full();
                fl = stage_word_read(&meta[s].w, lane);
                fl = (int)__reduce_or_sync(0xffffffffu, (unsigned)fl); /* uniform: so is the loop, and s with it */
            }
#pragma unroll
            for (int i = 0; i < CF::WGN / 2; ++i) reg_fence(acc[i]);
            const long long e0 = BSK_PROF_CLOCK();
            pc[PROF_ITEMS] += 1;
            if constexpr (CF::CAN_SPLIT) {
                if (sp != 0) {
                    /* A part of a split row. Parts 0 .. P - 2 store their fp32 partial (own slot, L2, coalesced in
                       register order) and count the store; part P - 1, the last of the row's items in the queue,
                       waits for those P - 1 stores (each by an item taken before it: no dependence on which CTAs
                       are resident), adds them to its own accumulators in part order (own + P0 + P1 + ...: the
                       same bits whichever part finishes first) and runs the epilogue (alpha, beta, dtype). */
                    const int P = (sp & 63) + 1, part = (sp >> 6) & 63, pb = (sp >> 12) - 1;
                    int *ctr = p.split_ctr + ((size_t)pb * p.nt + ntile) * 2 + c;
                    auto slot = [&](int q) -> float4 * {
                        return p.split_ws + (((size_t)(pb + q) * p.nt + ntile) * 2 + c) * CF::SPLIT_F4;
                    };
                    if (part < P - 1) {
                        float4 *mine = slot(part);
#pragma unroll
                        for (int k = 0; k < CF::WGN / 8; ++k)
                            __stcg(mine + k * 128 + tw, make_float4(acc[4 * k], acc[4 * k + 1], acc[4 * k + 2], acc[4 * k + 3]));
                        __threadfence();
                        named_bar_sync(1 + c, 128);
                        if (tw == 0) atomicAdd(ctr, 1);
                        release_pend(); /* SLOTEPI: the kept slot stages nothing for a partial (no store to wait for) */
                        pc[PROF_EPI] += BSK_PROF_CLOCK() - e0;
                        continue;
                    }
                    if (tw == 0) {
                        while (*(volatile int *)ctr < P - 1) __nanosleep(32);
                        __threadfence();
                        *(volatile int *)ctr = 0; /* every part has counted: zero again for the next launch */
                    }
                    named_bar_sync(1 + c, 128);
                    for (int q = 0; q < P - 1; ++q) {
                        const float4 *sq = slot(q);
#pragma unroll
                        for (int k = 0; k < CF::WGN / 8; ++k) {
                            const float4 v = __ldcg(sq + k * 128 + tw);
                            acc[4 * k] += v.x;
                            acc[4 * k + 1] += v.y;
                            acc[4 * k + 2] += v.z;
                            acc[4 * k + 3] += v.w;
                        }
                    }
                }
            }
            /* this warpgroup's 64 x WGN part of the tile */
            const int64_t wr0 = CF::PAIR ? (int64_t)prow * 64
                                         : (int64_t)unit * CF::BM + (CF::SPLIT_N ? 0 : 64 * c);
            const int wc0 = ntile * CF::BN + (CF::SPLIT_N ? c * CF::WGN : 0);
            if constexpr (CF::SLOTEPI) {
                /* this consumer's B boxes of the item's last slot (pend): every warp's wgmmas on them are done
                   (wait_group 0 per stage) once all four warps pass the first barrier */
                const uint32_t cbuf = sbase + CF::B_OFF + (uint32_t)pend * CF::B_BYTES + b_off;
                const int rl = 16 * warp + (lane >> 2);
                named_bar_sync(1 + c, 128);
                if (p.ctype == BSK_F16)
                    stage_tile<BSK_F16, CF::WGN, 0, CF::WGN / 64>(acc, cbuf, rl, lane, p.alpha);
                else
                    stage_tile<BSK_BF16, CF::WGN, 0, CF::WGN / 64>(acc, cbuf, rl, lane, p.alpha);
                fence_proxy_async_smem();
                named_bar_sync(1 + c, 128);
                if (tw == 0) {
                    if (wr0 < p.M) {
                        const uint64_t pol_c = l2_policy_evict_first(); /* used only with l2h & 2 */
#pragma unroll
                        for (int q = 0; q < CF::WGN / 64; ++q) {
                            if (wc0 + 64 * q >= p.N) break;
                            if (l2h & 2) tma_store_2d_hint(&tmC, cbuf + q * 8192, wc0 + 64 * q, (int)wr0, pol_c);
                            else tma_store_2d(&tmC, cbuf + q * 8192, wc0 + 64 * q, (int)wr0);
                        }
                    }
                    bulk_commit();
                }
            } else if constexpr (CF::EPI) {
                /* stage 64 x WGN (16-bit, alpha applied) in 64-column 128B-swizzled panels, then TMA-store it;
                   the store clips rows >= M and columns >= N (N % 8 == 0 here: see the launcher). The buffer is
                   reused only after the previous item's store has read it. */
                const uint32_t cbuf = sbase + CF::C_OFF + (uint32_t)c * CF::C_WG_BYTES;
                const int rl = 16 * warp + (lane >> 2);
                /* one round: stage panels Q0 .. Q0 + EPQ - 1, then one thread stores them */
                auto round = [&](auto q0c) {
                    constexpr int Q0 = decltype(q0c)::value;
                    if (tw == 0) bulk_wait_read<0>();
                    named_bar_sync(1 + c, 128);
                    if (p.ctype == BSK_F16)
                        stage_tile<BSK_F16, CF::WGN, Q0, CF::EPQ>(acc, cbuf, rl, lane, p.alpha);
                    else
                        stage_tile<BSK_BF16, CF::WGN, Q0, CF::EPQ>(acc, cbuf, rl, lane, p.alpha);
                    fence_proxy_async_smem();
                    named_bar_sync(1 + c, 128);
                    if (tw == 0 && wc0 + 64 * Q0 < p.N && wr0 < p.M && !(CF::CAN_SPLIT && (p.fab & 1))) {
                        if (l2h & 2) {
                            const uint64_t pol_c = l2_policy_evict_first();
#pragma unroll
                            for (int q = 0; q < CF::EPQ; ++q)
                                tma_store_2d_hint(&tmC, cbuf + q * 8192, wc0 + 64 * (Q0 + q), (int)wr0, pol_c);
                        } else {
#pragma unroll
                            for (int q = 0; q < CF::EPQ; ++q)
                                tma_store_2d(&tmC, cbuf + q * 8192, wc0 + 64 * (Q0 + q), (int)wr0);
                        }
                    }
                    if (tw == 0) bulk_commit();
                };
                round(std::integral_constant<int, 0>());
                if constexpr (CF::EPQ < CF::WGN / 64) round(std::integral_constant<int, CF::EPQ>());
                static_assert(CF::EPQ * 2 >= CF::WGN / 64, "at most two rounds");
            } else {
                const bool full = wr0 + 64 <= p.M && wc0 + CF::WGN <= p.N;
                const int64_t r0 = wr0 + 16 * warp + (lane >> 2);
                const int c0 = wc0 + 2 * (lane & 3);
                char *Cp = (char *)p.C;
                if (wc0 < p.N && wr0 < p.M) {
                    if (p.ctype == BSK_F32)
                        store_tile<BSK_F32, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                    else if (p.ctype == BSK_F16)
                        store_tile<BSK_F16, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                    else
                        store_tile<BSK_BF16, CF::WGN>(acc, Cp, p.ldc, r0, c0, full, p.M, p.N, p.alpha, p.beta);
                }
            }
            pc[PROF_EPI] += BSK_PROF_CLOCK() - e0;
        }
    }
    if (CL) cluster_sync(); /* no CTA leaves while its peer may still signal its barriers */
}

} // namespace bsk_hopper
#endif
