/* spmm_hopper.cu — the Hopper (sm_90a) SpMM launcher: decides whether the TMA + wgmma kernel can take the
   case, builds the tensor maps, orders the work (prep kernel) and launches the persistent kernel.
   Declines (BSK_ERR_UNSUPPORTED, the portable path then runs) anything it cannot do exactly right. */
#include <stdint.h>
#include "tma.cuh"
#include "launch.cuh"
#include "spmm_kernel.cuh"

using namespace bsk_hopper;

#include "tune.h"

struct bsk_hopper_tune_s bsk__hopper_tune;

/* Defaults decided by measurement (docs/hopper-spmm-notes.md): the 2-CTA cluster variant is correct but slower: 1.5x
   on an H100 (run 4) while its consumers released the peer's slots with a cluster-scope release (MEMBAR.ALL.GPU per
   arrive); with the bare remote arrive (session 21, H200, same run) E 0.692 vs 0.771 at b128 d 0.1, 0.869 vs 0.908 at
   d 0.5. It runs only when bsk__hopper_tune.cluster asks for it. */
static const int CLUSTER_DEFAULT = 0;
/* BM = 64: paired block rows (B panels shared by the two rows of a tile) unless the knob asks for the split
   64 x 256 tile (run 5: pair 0.641 vs split 0.540 at d = 0.5, equal at d = 0.1) or the 64 x 512 rule below
   (B64_WIDE_DEFAULT) applies. L2 prefetch lead in stages
   (0: off). */
static const int B64_PAIR_DEFAULT = 1;
/* BM = 64 with 16-bit C, beta 0, N >= 512: the 64 x 512 tile with the slot-staged TMA store (session 20) before the
   pair (the launcher's rule below) */
static const int B64_WIDE_DEFAULT = 1;
/* ... below this block density only (session 21, H100, hopper_probe --b64pw, same run: pair -> 64 x 512 at 8192^3 d 0.1
   / 0.25 / 0.5 E 0.493 -> 0.535, 0.558 -> 0.572, 0.646 -> 0.595; skewed d 0.5 0.650 -> 0.610; MoE d 0.25 / 0.5 0.574 ->
   0.592, 0.662 -> 0.616. On the H200 (session 20) d 0.5 was level: 0.668 vs 0.665, MoE 0.680 vs 0.691; op T -2 %). */
static const double B64_WIDE_MAX_DENSITY = 0.375;
/* ... and below 0.2 where the pair's rows are fully matched (mode 1: the pattern cache on, PAIR_MATCH_DEFAULT). Session
   24, H100, same run, lists cached: 64 x 512 -> matched pair at 8192^3 d 0.1 0.543 -> 0.531, d 0.25 0.578 -> 0.603,
   skewed d 0.1 0.498 -> 0.442, d 0.25 0.563 -> 0.588, MoE d 0.1 0.530 -> 0.529, d 0.25 0.598 -> 0.635, op T d 0.25
   0.584 -> 0.593 (0.2: between the measured densities) */
static const double B64_WIDE_MAX_DENSITY_MATCHED = 0.2;
/* ... on devices whose DRAM is slower than this only (GB/s; 0 = not reported: the plain rule). The matched pair runs at
   the same speed on both machines while the 64 x 512 tile speeds up with DRAM bandwidth: session 25, H200 (4.8 TB/s),
   same run, lists cached, 64 x 512 vs matched pair: 8192^3 d 0.25 0.664 vs 0.629 (H100, 3.35 TB/s: 0.578 vs 0.603),
   skewed d 0.25 0.650 vs 0.612, MoE d 0.25 0.673 vs 0.659, op T d 0.25 0.676 vs 0.625. The tile's TFLOPS, linear in
   the bandwidth between the two machines (444 -> 492 at d 0.25), meets the pair's (~465) near 4 TB/s. Above, the H200
   keeps 0.375 (--pairmatch4, tile vs matched pair: d 0.3 0.660 vs 0.639, d 0.375 0.665 vs 0.664, d 0.5 0.675 vs 0.700;
   skewed d 0.375 0.661 vs 0.655; MoE d 0.375 / 0.5 0.684 vs 0.696, 0.698 vs 0.730; op T d 0.375 / 0.5 0.669 vs 0.651,
   0.674 vs 0.691). */
static const int B64_MATCHED_PAIR_MAX_DRAM_GBS = 4000;
static const int PF_STAGES_DEFAULT = 0; /* run 5: the prefetches double the L2 requests; 1.7x slower at d = 0.5 */
/* TMA-store epilogue configurations: 4 ring stages with the C tile staged in two rounds (1), or 3 stages with
   the whole tile staged at once (0). Session 4 measures both (tune.ring4). */
static const int RING4_DEFAULT = 1; /* session 4: b128 +4–7.5 %, paired b64 +2–3 % (same run) */
/* Long-row split (BM = 128, no cluster): rows of >= 2L blocks run as parts of L .. 2L - 1 blocks on different
   CTAs, combined through fp32 partial tiles in the workspace (at most SPLIT_MB_DEFAULT MB of them; L grows
   until the parts fit). By default only where the whole rows leave most SMs idle (units x N tiles <= half the
   grid), with parts of >= SPLIT_MIN_LEN blocks (session 6, H100: 256 x 4096 x 16384 E 0.40 -> 0.85, 512 x 512
   x 32768 d .5 0.13 -> 0.41; at 8192^3 every split lost, L 8 up to -30 %: docs/hopper-spmm-notes.md). */
static const int SPLIT_DEFAULT = 1;
static const int SPLIT_MB_DEFAULT = 128;
static const int SPLIT_MIN_LEN = 16;
/* ... and where the grid has few blocks per CTA (session 17): the mean work per CTA is w = nnzb x N tiles / grid
   blocks, and a row much longer than w would alone outlast every other CTA (2048^3 skewed patterns: the longest
   row holds all 16 block columns, w = 2). Then L = max(SPLIT_FEW_MIN, 2w): rows of >= 2L blocks split into parts
   of L .. 2L - 1, only where a row can be that long (2L <= the block columns); at 8192^3 and the MoE shape
   w >= 99, so nothing there changes. */
static const int SPLIT_FEW_DEFAULT = 1; /* session 17: 2048^3 skewed b128 d 0.25 +10 / +12 % (cache off / on), else level */
/* parts of >= 8 blocks (session 18, same-run A/B against 4 on the H200: 2048³ skewed b128 d 0.1 +4.4 % on the
   full grid's pattern — parts of 4 cost more in partial tiles than they balanced — level on session 17's pattern,
   where the d 0.25 gain, with L = 8 anyway, stays) */
static const int SPLIT_FEW_MIN = 8;
/* ... and, on the b64 64 x 512 tile (op N), rows far longer than the mean (session 22). H100 ncu: b64 8192^3 skewed
   d 0.1 read 921 MB of DRAM against 315 MB uniform and was DRAM-bound (84 % of peak): a 128-block row reads its N
   tile's whole B column over 128 stages, long after the short rows of that tile read the same panels. L = max(
   SPLIT_SKEW_MIN, 2 x the mean row), so only rows of >= 4 means split (uniform rows never), and each partition queue
   walks one N tile at a time (part_tg 1, where the prep finds the rows skewed), so a tile's reads fall in one short
   window. Same-run A/B (skewed 8192^3 d 0.1 / 0.25, MoE d 0.1): H100 0.390 -> 0.500 (+28 %), 0.507 / 0.525 -> 0.555
   (L 32), 0.489 -> 0.513; H200 0.530 -> 0.544, 0.645 -> 0.636 (-1.4 %), 0.532 -> 0.541; uniform level. Not on b128:
   one tile per group there cost 15-25 % on the H200 (its half-tile groups already fit L2). Where neither rule above
   splits. */
static const int B64_SKEW_RULE = 1;
static const int SPLIT_SKEW_MIN = 32;
/* Its partial tiles' budget (MB): the host cannot see the row lengths, so it reserves slots for nnzb / L parts up to
   the budget whatever the rows (uniform ones never split). 128 MB (the rules above) would take ~100 MB of workspace at
   8192^3 b64 d 0.1 for nothing; 32 MB holds the parts of the measured patterns (8192^3 skewed d 0.1: 6 parts x 4 MB,
   d 0.25 (L 64): 8; MoE d 0.1: 6 x 2 MB). Where more parts would be needed the prep kernel doubles L (MoE skewed d 0.25:
   L 64, no row long enough: unsplit, which was the faster there on the H200). */
static const int SPLIT_SKEW_MB = 32;
/* L2-partition row groups for op N on rows that are not skewed (tune.part_mode 4 asks for them). Off by default:
   session 9 measured b128 uniform d 0.1 / 0.25 / 0.5 +2.7 / +0.8 / +0.5 % in one run and +1.6 / -1.2 / -0.6 %
   (bf16 d 0.25 -1.2 %) in the next, on another H100 (docs/hopper-spmm-notes.md): below the adoption rule. */
static const int ROW_GROUPS_DEFAULT = 0;
/* Paired b64 tiles: each block row paired with one that shares its columns (the prep kernel's mutual-best matching,
   spmm_kernel.cuh) where the pattern fits the matcher's limits (match_fits), instead of rows 2u, 2u + 1 — by default
   only for work lists kept in the pattern cache (below). Session 24, H100, same run, lists cached (the main kernel
   alone): 8192^3 uniform d 0.1 / 0.25 / 0.5 E 0.498 -> 0.533, 0.569 -> 0.606, 0.653 -> 0.683; skewed d 0.25 0.549 ->
   0.588; 32768 x 4096 x 4096 d 0.1 / 0.5 0.470 -> 0.535, 0.674 -> 0.723; op T d 0.5 0.647 -> 0.652. Rebuilt on every
   call the matching costs more than it gains (d 0.1 0.496 -> 0.477, MoE d 0.1 0.463 -> 0.298). */
static const int PAIR_MATCH_DEFAULT = 1;
/* ... and for work lists rebuilt on every call (pattern cache off, or inside a capture): 2, the windowed matching
   (candidates within 16 rows; 0 would pair adjacent rows), for products of at least PAIR_WINDOW_MIN_FLOP on kept blocks.
   Session 25, H200, same run (hopper_probe --pairmatch3), uncached, adjacent -> windowed pair: 8192^3 d 0.25 0.583 ->
   0.598, d 0.5 0.672 -> 0.681, skewed d 0.5 0.679 -> 0.682, 32768 x 4096 d 0.25 0.588 -> 0.589, d 0.5 0.682 -> 0.687 (the
   full matching, cached: 0.621 / 0.696 / 0.687 / 0.654 / 0.730). Predicted +3-5 % and +5-10 %: the window keeps less of
   the cut than the CPU model said. Its prep costs ~4 us per call (--pairmatch3 --size 2048: 2048^3 d 0.1 / 0.25 / 0.5
   0.167 -> 0.134, 0.337 -> 0.277, 0.487 -> 0.426, a constant +4.1 us), so it pays only on long products: 2e11 flop is
   ~400 us, where +1 % is 4 us. It replaces adjacent pairs only where the pair runs anyway: the lower density bound
   below is the full matching's. */
static const int PAIR_MATCH_UNCACHED_DEFAULT = 2;
static const double PAIR_WINDOW_MIN_FLOP = 2e11;
/* The matching mode asked for the paired tiles' rows (0 adjacent, 1 full, 2 windowed; tune.pair_match forces one) for a
   work list kept in the pattern cache (cached: the cache on and not inside a capture) or rebuilt on every call, for the
   product of A (op N or T: units x cols blocks) with n columns of B. A cached list past the full matching's work
   limit gets the windowed one (a review, session 25: else turning the cache on paired such shapes worse than off).
   The launcher knows which from the cache's answer, the dispatcher asks the stream; both check the matcher's limits
   (match_fits). */
static int pair_match_asked(int cached, const bsk_bsr *A, int64_t n, int64_t units, int64_t cols)
{
    const int k = bsk__hopper_tune.pair_match;
    if (k) return k > 0 ? k : 0;
    if (cached) return PAIR_MATCH_DEFAULT == 1 && !match_fits(1, units, cols) ? 2 : PAIR_MATCH_DEFAULT;
    const double flop = 2.0 * (double)A->nnzb * A->block_rows * A->block_cols * (double)n;
    const double min_flop = bsk__hopper_tune.window_min_flop > 0 ? bsk__hopper_tune.window_min_flop : PAIR_WINDOW_MIN_FLOP;
    return flop >= min_flop ? PAIR_MATCH_UNCACHED_DEFAULT : 0;
}

/* Direct mode (session 26): where every item has a CTA of its own (units x N tiles <= the grid), no row is split (L 0)
   and the rows pair without matching, the order of the work list cannot matter, so a call without a cached list skips
   the prep kernel: CTA i runs item i with its lists read from row_ptr (spmm_kernel.cuh, SpmmParams.direct). At 2048^3
   the prep cost 10-19 % of the call even behind programmatic dependent launch (hopper_probe --prepcost, H200: list
   rebuilt vs cached, b128 d 0.5 0.587 vs 0.645, b64 pair d 0.1 / 0.25 / 0.5 0.168 vs 0.193, 0.337 vs 0.379, 0.489 vs
   0.528): the main kernel starts 3-5 us after the prep does, whatever the prep's own 2.4 us. With the pattern cache on
   the list is built once as before (its later calls run the main kernel alone as well); inside a capture the cache
   keeps no list, so there the calls run direct. Such calls also leave out the few-blocks split (SPLIT_FEW_DEFAULT),
   which needs the prep and paid less than it cost there (below, at the split).
   Measured with the bench grid (407f229 vs session 25, same GPU type): 2048^3 b64 +20 / +16 / +13 %, skewed +8-13 %,
   b128 d 0.5 +14 %; 8192^3 and 32768 x 4096 x 4096 within 1 %. */
static const int DIRECT_DEFAULT = 1;

typedef Cfg<128, 256, 4, false> Cfg128;        /* tile 128 x 256, 48 KB stages, direct epilogue                */
typedef Cfg<128, 256, 3, true> Cfg128t;        /* the same, 3 stages + 64 KB staging for the TMA-store epilogue */
typedef Cfg<128, 256, 4, true, 1, false, false, 2> Cfg128t4; /* 4 stages + 2 x 16 KB staging, two store rounds */
typedef Cfg<128, 256, 3, true, 2> Cfg128tc;    /* Cfg128t in 2-CTA clusters, A multicast                       */
typedef Cfg<128, 256, 4, false, 2> Cfg128c;    /* Cfg128 (4 stages, direct epilogue) in 2-CTA clusters          */
typedef Cfg<64, 128, 5, false> Cfg64;          /* split: tile 64 x 256, 40 KB stages                            */
typedef Cfg<64, 128, 4, true> Cfg64t;          /* the same, 4 stages + 32 KB staging                            */
typedef Cfg<64, 256, 3, false> Cfg64w;         /* split: tile 64 x 512, 72 KB stages, direct epilogue           */
typedef Cfg<64, 256, 3, false, 1, false, false, 0, true> Cfg64ws; /* the same, C staged in the last ring slot  */
typedef Cfg<64, 256, 3, false, 1, false, true, 0, true> Cfg64wsT;  /* op T: the same over the transpose index     */
typedef Cfg<64, 256, 4, false, 1, true> Cfg64p;  /* paired rows: tile 128 x 256, <= 48 KB stages, direct epilogue */
typedef Cfg<64, 256, 3, true, 1, true> Cfg64pt;  /* the same, 3 stages + 64 KB staging                          */
typedef Cfg<64, 256, 4, true, 1, true, false, 2> Cfg64pt4; /* the same, 4 stages + 2 x 16 KB staging          */
/* op T (C = Aᵀ·B) through the transpose index: the b128 and paired-b64 shapes above with A read M-major */
typedef Cfg<128, 256, 4, false, 1, false, true> Cfg128T;
typedef Cfg<128, 256, 3, true, 1, false, true> Cfg128tT;
typedef Cfg<128, 256, 4, true, 1, false, true, 2> Cfg128tT4;
typedef Cfg<64, 256, 4, false, 1, true, true> Cfg64pT;
typedef Cfg<64, 256, 3, true, 1, true, true> Cfg64ptT;
typedef Cfg<64, 256, 4, true, 1, true, true, 2> Cfg64ptT4;

template <class CF, int DT>
static bsk_status launch(bsk_context *ctx, const struct bsk_cuda_state *st, const bsk_bsr *A, const bsk_dense *B,
                         float alpha, float beta, bsk_dense *C, const char *name)
{
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    if ((size_t)CF::SMEM > st->smem_optin) return BSK_ERR_UNSUPPORTED;
    const int64_t M = C->rows, N = C->cols, K = B->rows;
    /* op T: the units are A's block columns and the K blocks its block rows */
    const int64_t mb = CF::TRANS ? bsk_bsr_nb(A) : bsk_bsr_mb(A), nb = CF::TRANS ? bsk_bsr_mb(A) : bsk_bsr_nb(A);
    const int64_t mu = CF::PAIR ? (mb + 1) / 2 : mb;                                  /* units */
    const int64_t nt = ((N + CF::BN - 1) / CF::BN + CF::CLUSTER - 1) / CF::CLUSTER; /* items per unit */
    /* TMA coordinates, block indices and the item counter are 32-bit: leave giant shapes to the portable path. */
    if (K + 2 * CF::BM >= INT32_MAX || N + 2 * CF::BN >= INT32_MAX || M + 2 * CF::TM >= INT32_MAX ||
        mu * nt + 4096 >= INT32_MAX || A->nnzb + 64 >= INT32_MAX)
        return BSK_ERR_UNSUPPORTED;

    CUtensorMap tmA, tmB, tmC, tmPA, tmPB;
    bsk_status s;
    /* With no blocks there is nothing to load; any valid 16-byte-aligned address keeps the map legal. */
    const void *vals = A->nnzb ? A->values : B->data;
    const uint64_t nblk = A->nnzb ? (uint64_t)A->nnzb : 1u;
    /* In a cluster each CTA loads (and multicasts) 64 rows of A's panel; op T loads 64 x 64 boxes. */
    const uint32_t a_box_rows = CF::CLUSTER > 1 || CF::TRANS ? 64u : (uint32_t)CF::BM;
    const int promo = bsk__hopper_tune.l2promo; /* TMA L2 promotion of the A / B loads (0: 256 B) */
    if ((s = bsk_hopper_tmap_3d_promo(&tmA, vals, A->dtype, nblk, CF::BM, CF::BM, a_box_rows, 64, promo))) return s;
    if ((s = bsk_hopper_tmap_2d_promo(&tmB, B->data, B->dtype, (uint64_t)K, (uint64_t)N, (uint64_t)B->ld, 64, 64,
                                      promo)))
        return s;
    if (!CF::TMA_C) tmC = tmB; /* unused */
    else if ((s = bsk_hopper_tmap_2d(&tmC, C->data, C->dtype, (uint64_t)M, (uint64_t)N, (uint64_t)C->ld, 64, 64)))
        return s;
    /* L2 prefetch: whole blocks and 256-column B panels per instruction (unswizzled maps). The lead in
       blocks per list: the stage lead over the stages per block, at most 32 (the producer's index window). */
    const int pf_stages = bsk__hopper_tune.pf < 0 ? 0 : bsk__hopper_tune.pf > 0 ? bsk__hopper_tune.pf : PF_STAGES_DEFAULT;
    int pf = CF::TRANS ? 0 : (pf_stages + CF::KSUB - 1) / CF::KSUB;
    if (pf > 32) pf = 32;
    if (pf > 0) {
        const uint32_t pb_cols = N >= 256 ? 256u : (uint32_t)((N + 7) / 8 * 8);
        if (bsk_hopper_tmap_3d_plain(&tmPA, vals, A->dtype, nblk, CF::BM, CF::BM, CF::BM, CF::BM) ||
            bsk_hopper_tmap_2d_plain(&tmPB, B->data, B->dtype, (uint64_t)K, (uint64_t)N, (uint64_t)B->ld, CF::BM,
                                     pb_cols))
            pf = 0; /* a prefetch is only a hint: run without */
    }
    if (pf == 0) tmPA = tmPB = tmB; /* unused */
    bsk__hopper_tune.out_pf = pf;

    /* (before the cluster occupancy query, which needs the kernel's shared-memory limit raised) */
    if ((s = bsk_hopper_allow_smem(spmm_kernel<CF, DT>, CF::SMEM))) return s;
    int grid = st->sms;
    if (CF::CLUSTER > 1) {
        /* how many clusters fit at once (GPCs with an odd number of free SMs leave one out): asked once */
        static int max_clusters = -1;
        if (max_clusters < 0) {
            int n = 0;
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = CF::CLUSTER;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            cfg.blockDim = dim3(CF::THREADS);
            cfg.dynamicSmemBytes = CF::SMEM;
            cfg.stream = stream;
            cfg.attrs = attr;
            cfg.gridDim = dim3((unsigned)(st->sms / CF::CLUSTER * CF::CLUSTER));
            cfg.numAttrs = 1;
            if (cudaOccupancyMaxActiveClusters(&n, spmm_kernel<CF, DT>, &cfg) != cudaSuccess) {
                (void)cudaGetLastError();
                n = 0;
            }
            max_clusters = n;
        }
        if (max_clusters <= 0) return BSK_ERR_UNSUPPORTED;
        grid = max_clusters * CF::CLUSTER;
    }
    bsk__hopper_tune.out_max_grid = grid;
    if (bsk__hopper_tune.max_ctas > 0 && bsk__hopper_tune.max_ctas < grid) grid = bsk__hopper_tune.max_ctas;

    /* Long-row split: the part length L (rows of >= 2L blocks are split; 0: none). tune.split: 0 default,
       -1 off, -2 the automatic rules of sessions 6-21, -3 those and the long-row rule in any configuration, > 0
       that L. Automatic (the default): when the items of whole rows (units x N tiles) fill at most half the grid,
       L = the average row length over the parts per row that would fill the grid, at least SPLIT_MIN_LEN;
       otherwise the few-blocks-per-CTA rule above; otherwise, on the b64 64 x 512 tile, the long-row rule. The
       slots (one fp32 tile per part and N tile) are bounded on the host by nnzb / L parts and the workspace budget
       (SPLIT_MB_DEFAULT, SPLIT_SKEW_MB for the long-row rule); the prep kernel doubles L if the pattern's parts do
       not fit. A length whose 2L exceeds the block columns is dropped after the rules (below). */
    /* Direct mode (below) may run this call: the knobs allow it (no long units either: tune.part_long, so long_len
       stays 0), every item has a CTA of its own, its queue can be had, and no list will come from the pattern cache
       (the cache off, or the stream capturing: bsk_cuda_derived_get then gives none) — the inputs direct mode itself
       reads, so that the split is not left out for a call that then runs the prep anyway. By default the few-blocks
       rule then stays out (session 26, hopper_probe --smallsplit: 2048^3 b128 direct without the split against the
       prep with L 8, uniform d 0.1 / 0.25 0.167 -> 0.222, 0.366 -> 0.455; skewed 0.140 -> 0.172, 0.218 -> 0.248 with
       a 15-block row of 16: a row's extra parts find few idle CTAs when the items already fill the grid, and the prep
       costs more than they balance). */
    const int pm = bsk__hopper_tune.part_mode;
    const int dk = bsk__hopper_tune.direct;
    const bool direct_ok = dk >= 0 && (dk > 0 || DIRECT_DEFAULT) && CF::CLUSTER == 1 && (pm <= 0 || pm == 3) &&
                           bsk__hopper_tune.part_long <= 0 && !bsk__hopper_tune.prep_prof_buf &&
                           !bsk__hopper_tune.pair_rows_out;
    /* direct mode's queue: the context's, zero between launches (the main kernel's last CTA); asked once, here, where
       the items fit the grid (or tune.direct 2 asks for direct mode at any count), and NULL where direct mode cannot
       run (a fresh context inside a capture cannot create it); the few-blocks rule reads it only for one item per CTA */
    unsigned *dq = NULL;
    if (direct_ok && (dk == 2 || mu * nt <= (int64_t)grid))
        (void)bsk_cuda_queue(ctx, BSK_QUEUE_SPMM_DIRECT, &dq); /* dq stays NULL where it cannot be had */
    bool few_direct = false;
    if (dq && mu * nt <= (int64_t)grid) {
        bool capturing = false;
        if (ctx->pattern_cache) { /* a capture that cannot be told is taken as one (the cache's own rule) */
            cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
            if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) {
                (void)cudaGetLastError(); /* not left for a later launch check */
                cap = cudaStreamCaptureStatusActive;
            }
            capturing = cap != cudaStreamCaptureStatusNone;
        }
        few_direct = !ctx->pattern_cache || capturing;
    }
    int64_t L = 0, parts_cap = 0;
    bool skew_rule = false;
    /* the configuration the long-row rule and one tile per partition group were measured on (op N, slot tile) */
    const bool skew64 = CF::SLOTEPI && !CF::TRANS && B64_SKEW_RULE;
    if (CF::CAN_SPLIT && A->nnzb > 0 && bsk__hopper_tune.split != -1) {
        const int ts = bsk__hopper_tune.split;
        const bool autom = ts == -2 || ts == -3 || (ts == 0 && SPLIT_DEFAULT);
        if (ts > 0) L = ts;
        else if (autom && 2 * mu * nt <= grid) {
            const int64_t avg = (A->nnzb + mu - 1) / mu, want = (grid + mu * nt - 1) / (mu * nt);
            L = (avg + want - 1) / want;
            if (L < SPLIT_MIN_LEN) L = SPLIT_MIN_LEN;
        } else if (autom && SPLIT_FEW_DEFAULT && !(ts == 0 && few_direct)) {
            const int64_t w = (A->nnzb * nt + grid - 1) / grid;
            L = 2 * w > SPLIT_FEW_MIN ? 2 * w : SPLIT_FEW_MIN;
            if (2 * L > nb) L = 0;
        }
        if (L == 0 && (ts == -3 || (ts == 0 && SPLIT_DEFAULT && skew64))) {
            const int64_t mean2 = 2 * ((A->nnzb + mu - 1) / mu);
            L = mean2 > SPLIT_SKEW_MIN ? mean2 : SPLIT_SKEW_MIN;
            if (2 * L > nb) L = 0;
            skew_rule = L > 0;
        }
        if (L > 0) {
            const int64_t mb_ = bsk__hopper_tune.split_mb > 0 ? bsk__hopper_tune.split_mb
                                : skew_rule                   ? SPLIT_SKEW_MB
                                                              : SPLIT_MB_DEFAULT;
            const int64_t per_part = nt * 2 * (int64_t)CF::SPLIT_F4 * 16; /* bytes of one part's tiles */
            parts_cap = A->nnzb / L;
            if (parts_cap > (mb_ << 20) / per_part) parts_cap = (mb_ << 20) / per_part;
            if (parts_cap > (1 << 18)) parts_cap = 1 << 18;
            if (parts_cap < 2) L = parts_cap = 0;
        }
    }
    /* a unit of a valid pattern holds at most nb blocks, so where none can hold 2L nothing splits (a malformed one
       runs unsplit): no split slots sized (also inside a capture) nor a split length reported for nothing (the
       first rule's SPLIT_MIN_LEN or a knob's L on few block columns) */
    if (L > 0 && 2 * L > nb) L = parts_cap = 0;
    bsk__hopper_tune.out_split_len = (int)L;
    /* units after the split: each part beyond a row's first is >= L of its blocks */
    const int64_t units_cap = mu + (L > 0 ? A->nnzb / L : 0);
    if (units_cap * nt + 4096 >= INT32_MAX) return BSK_ERR_UNSUPPORTED;
    /* Units per band: the A blocks of a band should stay in L2 while the band's N tiles go by. */
    const int64_t band_budget = (int64_t)(bsk__hopper_tune.band_mb > 0 ? bsk__hopper_tune.band_mb : 16) << 20;
    const int64_t unit_bytes = (A->nnzb / (mu ? mu : 1) + 1) * (int64_t)CF::BM * CF::BM * 2;
    int64_t band = band_budget / unit_bytes;
    if (band < 1) band = 1;
    if (band > mu) band = mu;
    const int cls = bsk__hopper_tune.classes == 1 ? 0 : bsk__hopper_tune.classes == 2 ? 2 : 1;
    /* long units first in the partition queues (tune.part_long k > 0): units of >= pow2ceil(k x mean) blocks; a
       power of two is a class boundary of the one-bit classes (cls 1), so the long units end at a band boundary */
    int long_len = 0;
    if (CF::CAN_SPLIT && bsk__hopper_tune.part_long > 0 && cls == 1 && mu > 0) {
        const int64_t want = (int64_t)bsk__hopper_tune.part_long * ((A->nnzb + mu - 1) / mu);
        int64_t v = 1;
        while (v < want && v < 1024) v <<= 1;
        long_len = (int)v;
    }
    bsk__hopper_tune.out_long_len = long_len;

    /* op T: the transpose index (built on this stream, or cached), the units' "row pointer" and lists. From here on
       every return goes through bsk_cuda_tindex_done (the index's last use recorded, or an own one freed). */
    bsk_tindex ti = {NULL, NULL, NULL, -1, NULL};
    if (CF::TRANS && (s = bsk_cuda_tindex_get(ctx, A, &ti))) return s;
    const int32_t *units_ptr = CF::TRANS ? ti.t_ptr : A->row_ptr, *units_idx = CF::TRANS ? ti.t_row : A->col_idx;

    /* The work list: counter (256 bytes) | sorted[units_cap] | bandinfo[units_cap] | (PAIR: pair_end[units_cap],
       pair_rows[units]) | split_ctr, then the split's
       fp32 partial tiles (scratch). With the pattern cache on, the list lives in the pattern's cache entry under a
       key of every other input of the prep kernel, filled by it on first use only: the main kernel leaves the
       queues and split counters at zero when it ends, so a later call launches the main kernel alone (the prep
       was 3.5 of 15.5 us at 2048^3 b128 d 0.1, H200); the partials stay in the workspace. */
    const size_t off_pair = 256 + (size_t)units_cap * (sizeof(int4) + sizeof(int2));
    const size_t off_prows = off_pair + (((size_t)units_cap * sizeof(int) + 7) & ~(size_t)7);
    size_t off_ctr = CF::PAIR ? off_prows + (size_t)mu * sizeof(int2) : off_pair;
    off_ctr = (off_ctr + 255) & ~(size_t)255;
    size_t off_slots = off_ctr + (size_t)parts_cap * nt * 2 * sizeof(int);
    off_slots = (off_slots + 255) & ~(size_t)255;
    const size_t slot_bytes = (size_t)parts_cap * nt * 2 * CF::SPLIT_F4 * 16;
    void *ws = NULL, *lists = NULL;
    int built = 0, lslot = -1;
    /* paired tiles: match the rows (the matcher's limits checked here and again in the prep kernel) in the mode the
       knob asks for, or by default full matching where the work list is kept in the pattern cache: the one-CTA full
       matching costs ~30 us at 8192^3 and ~220 us at 32768 x 4096 (H100, session 24), so it pays only when built once
       for many calls. The key holds the mode of a cached list. */
    const int pm_cached = CF::PAIR ? pair_match_asked(1, A, N, mb, nb) : 0;
    const int key_match = match_fits(pm_cached, mb, nb) ? pm_cached : 0;
    const int64_t lkey[BSK_DERIVED_KEY] = {2 /* kind: b64 / b128 units */ | (CF::TRANS ? 16 : 0) | (CF::PAIR ? 32 : 0) |
                                               (cls << 6) | ((int64_t)long_len << 8) | ((int64_t)key_match << 40),
                                           band, L | (int64_t)parts_cap << 32, nt};
    if (ctx->pattern_cache && (s = bsk_cuda_derived_get(ctx, A, lkey, off_slots, &lists, &built, &lslot))) {
        if (CF::TRANS) bsk_cuda_tindex_done(ctx, &ti);
        return s;
    }
    /* the whole layout's size even when the lists are cached: the workspace then has room for a captured call of the
       same shape (inside a capture the cache is not used), which must not grow it (an allocation inside a capture
       belongs to the graph) */
    if ((s = bsk_cuda_workspace(ctx, off_slots + slot_bytes, &ws))) {
        bsk_cuda_derived_done(ctx, lslot, 0);
        if (CF::TRANS) bsk_cuda_tindex_done(ctx, &ti);
        return s;
    }
    /* inside a capture the list is rebuilt by every replay: the uncached default there */
    const int pm_mode = CF::PAIR ? pair_match_asked(lists != NULL, A, N, mb, nb) : 0;
    const int match = match_fits(pm_mode, mb, nb) ? pm_mode : 0;
    bsk__hopper_tune.out_pair_match = match;
    /* direct mode (DIRECT_DEFAULT; tune.direct -1 off, 1 on wherever it applies): one item per CTA with its queue
       (dq: direct_ok and the item count, above), no split (none asked, or none possible: L is 0 where 2L > nb), no
       matching, no list of the pattern cache's, nothing asked of the prep (long units, partition queues or row groups
       asked for by tune.part_mode, probes' marks: direct_ok). Then the main kernel reads no list, no prep flags and no
       partition queues (the fields below stay NULL / 0). */
    const bool direct = dq != NULL && !lists && L == 0 && match == 0;
    char *lb = lists ? (char *)lists : (char *)ws;
    unsigned *counter = (unsigned *)lb;
    int4 *sorted = (int4 *)(lb + 256);
    int2 *bandinfo = (int2 *)(sorted + units_cap);
    int *pair_end = CF::PAIR ? (int *)(lb + off_pair) : NULL;
    int2 *pair_rows = CF::PAIR ? (int2 *)(lb + off_prows) : NULL;

    SpmmParams p;
    p.sorted = direct ? NULL : sorted;
    p.bandinfo = direct ? NULL : bandinfo;
    p.pair_end = direct ? NULL : pair_end;
    p.pair_rows = direct ? NULL : pair_rows;
    p.counter = direct ? dq : counter;
    p.direct = direct ? 1 : 0;
    p.units_ptr = units_ptr;
    p.mb = (int)mb;
    p.nnzb = (int)A->nnzb;
    p.units = (int)mu;
    p.col_idx = units_idx;
    p.blk_idx = CF::TRANS ? ti.t_blk : NULL;
    p.C = C->data;
    p.ldc = C->ld;
    p.ctype = (int)C->dtype;
    p.alpha = alpha;
    p.beta = beta;
    p.M = (int)M;
    p.N = (int)N;
    p.nb = (int)nb;
    p.nt = (int)nt;
    /* tile groups: tg N tiles at a time through all bands (tg = nt: each band through all N tiles, the order of
       sessions 1-5) */
    p.tg = !direct && bsk__hopper_tune.tgroup > 0 && bsk__hopper_tune.tgroup < nt ? bsk__hopper_tune.tgroup : (int)nt;
    p.total_items = (unsigned)(mu * nt);
    p.split_ctr = (int *)(lb + off_ctr);
    p.split_ws = (float4 *)((char *)ws + off_slots);
    p.pf = pf;
    p.cl_acq = bsk__hopper_tune.cl_acq ? 1 : 0;
    /* tune.l2hint: 1 A evict_last + C evict_first (session 6), 2 C evict_first only (session 7: within 1 % of
       none everywhere) */
    p.l2hint = bsk__hopper_tune.l2hint == 1 ? 3 : bsk__hopper_tune.l2hint == 2 ? 2 : 0;
    /* default (session 8): both hints on rows the prep finds short and not skewed (b128 uniform d 0.1 +1.5 %,
       d 0.25 equal, d 0.5 -0.3 %: hopper_s8_hint_probe.log); -1: none. Direct mode has no prep flags: short rows by
       the host's mean take both ("not skewed" is moot with one item per CTA) */
    p.l2hint_auto = bsk__hopper_tune.l2hint == 0 && !direct ? 1 : 0;
    if (direct && bsk__hopper_tune.l2hint == 0 && CF::CAN_SPLIT && A->nnzb < 12 * mu) p.l2hint = 3;
    p.b_lbo = bsk__hopper_tune.bdesc_swap ? 1024u : 8192u;
    p.b_sbo = bsk__hopper_tune.bdesc_swap ? 8192u : 1024u;
    p.prof = (unsigned long long *)bsk__hopper_tune.prof_buf;
    p.prep_prof = (unsigned long long *)bsk__hopper_tune.prep_prof_buf;
    /* L2-partition queues for skewed rows (the kernel decides from the prep's flag): the GPU's own map once
       known (src/cuda/l2_partition.cu), or a probe's table; knob part_mode -1 off, 1 whatever the rows */
    p.part = NULL;
    /* Row groups (session 9): forced by part_mode 2; on the op-N rows the prep finds not skewed (the kernel
       decides; skewed rows keep the tile groups) with part_mode 4, or by default if ROW_GROUPS_DEFAULT; part_mode 3
       is session 8's default (tile groups on skewed rows, nothing else). Never with the long-row split (a row's
       parts must share one queue: the last part in the queue combines, waiting only for parts taken before it). */
    p.part_rows = L > 0 || direct                                             ? 0
                  : pm == 2                                                   ? 1
                  : (pm == 4 || (pm == 0 && ROW_GROUPS_DEFAULT)) && !CF::TRANS ? 2
                                                                               : 0;
    if (CF::CAN_SPLIT && !direct && (nt >= 2 || p.part_rows) && pm >= 0)
        p.part = bsk__hopper_tune.part_tab ? (const unsigned char *)bsk__hopper_tune.part_tab
                                           : bsk_cuda_l2_partitions(ctx);
    p.part_force = pm == 1 || pm == 2 ? 1 : 0;
    p.part_tg = bsk__hopper_tune.part_tg ? bsk__hopper_tune.part_tg : skew64 ? 1 : 0;
    p.part_long = long_len > 0 ? 1 : 0;
    bsk__hopper_tune.out_part = p.part ? (p.part_rows == 1 ? 2 : p.part_rows == 2 ? 3 : 1) : 0;
    p.fab = CF::CAN_SPLIT ? bsk__hopper_tune.fab : 0;

    if (direct && mu * nt < (int64_t)grid) grid = (int)(mu * nt); /* CTA i runs item i (tune.direct 2: tickets after) */

    if ((int64_t)grid > units_cap * nt * CF::CLUSTER) grid = (int)(units_cap * nt * CF::CLUSTER);
    grid = grid / CF::CLUSTER * CF::CLUSTER;
    if (grid < CF::CLUSTER) grid = CF::CLUSTER;

    int filled = built;
    if (!built && !direct) {
        spmm_prep_kernel<<<1, 1024, 0, stream>>>(units_ptr, units_idx, (int)mb, (int)nb, (int)A->nnzb,
                                                 CF::PAIR ? 1 : 0, match, (int)band, cls, (int)L, (int)parts_cap,
                                                 (int)nt, long_len, sorted, bandinfo, counter, p.split_ctr, pair_end,
                                                 pair_rows, p.prep_prof);
        s = BSK_CUDA_LAUNCH_CHECK();
        filled = !s;
    }
    if (!s && CF::PAIR && bsk__hopper_tune.pair_rows_out && cudaMemcpyAsync(bsk__hopper_tune.pair_rows_out, pair_rows,
                                                                            (size_t)mu * sizeof(int2),
                                                                            cudaMemcpyDeviceToDevice, stream))
        s = BSK_ERR_CUDA;
    if (!s)
        s = bsk_hopper_launch(spmm_kernel<CF, DT>, grid, CF::THREADS, CF::SMEM, stream, !bsk__hopper_tune.no_pdl,
                              CF::CLUSTER, tmA, tmB, tmC, tmPA, tmPB, p);
    bsk__hopper_tune.out_prep = direct ? 2 : !built;
    bsk__hopper_tune.out_queue = direct ? dq : NULL;
    bsk_cuda_derived_done(ctx, lslot, filled);
    if (CF::TRANS) bsk_cuda_tindex_done(ctx, &ti);
    if (s) return s;
    ctx->last_kernel = name;
    return BSK_SUCCESS;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

bsk_status bsk_hopper_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                      float beta, bsk_dense *C)
{
    const struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major != 9 || st->cc_minor != 0) return BSK_ERR_UNSUPPORTED; /* sm_90a code only */
    const int b = A->block_rows;
    if (b != A->block_cols || (b != 64 && b != 128)) return BSK_ERR_UNSUPPORTED;
    if ((A->dtype != BSK_F16 && A->dtype != BSK_BF16) || B->dtype != A->dtype) return BSK_ERR_UNSUPPORTED;
    const size_t ces = bsk_dtype_size(C->dtype);
    if (!ces) return BSK_ERR_UNSUPPORTED;
    /* TMA: global strides multiples of 16 bytes, base addresses 16-byte aligned. */
    if ((B->ld * 2) % 16 || !aligned16(B->data) || (C->ld * (int64_t)ces) % 16 || !aligned16(C->data) ||
        (A->nnzb && !aligned16(A->values)))
        return BSK_ERR_UNSUPPORTED;
    if (C->rows == 0 || C->cols == 0) return BSK_SUCCESS;
    const int bf = A->dtype == BSK_BF16;
    /* The TMA-store epilogue writes 16-bit C without reading it (beta must be 0); it writes whole 16-byte
       chunks at the end of a row (measured: columns past N in the same chunk were overwritten), so N must
       be a multiple of 8 elements. */
    const int tma_epi = bsk__hopper_tune.epi == 0 && C->dtype != BSK_F32 && beta == 0.0f && C->cols % 8 == 0;
    const int ring4 = bsk__hopper_tune.ring4 == 2 || (bsk__hopper_tune.ring4 == 0 && RING4_DEFAULT);
    bsk_status s;
    /* The 64 x 512 tile with C staged in its item's last ring slot: the default wherever its TMA store applies (16-bit
       C, beta 0) and N fills a 512-column tile. Session 20 (hopper_probe --b64slot, H200, same run): 8192^3 uniform
       d 0.1 / 0.25 / 0.5 E 0.607 / 0.646 / 0.665 vs the pair's 0.500 / 0.578 / 0.668, skewed 0.467 / 0.601 / 0.676 vs
       0.475 / 0.579 / 0.675, 2048^3 +3 / +7 / +15 %. The bytes into each SM per MFLOP (17 vs 19 KB at d 0.1) are the
       reason (bench/smem_ceiling_probe.cu); its direct epilogue had cost it the gain. Only with >= 2 items (rows of
       A or Aᵀ x 512-column tiles) per CTA: at 2048^3 (one item per SM) skewed rows lost 11-15 % (--b64slot2; the
       longest item decides, the pair's items are half as long), uniform ones gained 5-13 %. And only below
       B64_WIDE_MAX_DENSITY (the pair is ahead at d 0.5 on the H100). */
    const int64_t units64 = op == BSK_OP_T ? (A->cols + 63) / 64 : (A->rows + 63) / 64;
    const double dens64 = (double)A->nnzb / ((double)bsk_bsr_mb(A) * (double)bsk_bsr_nb(A));
    const int grid64 = bsk__hopper_tune.max_ctas > 0 && bsk__hopper_tune.max_ctas < st->sms ? bsk__hopper_tune.max_ctas
                                                                                            : st->sms;
    /* the lower density bound for the pair: its rows fully matched (the launcher's rule: forced by the knob, or by
       default where the pattern cache is on and not inside a capture; within the matcher's limits) on a device whose
       DRAM is slower than B64_MATCHED_PAIR_MAX_DRAM_GBS (the stream is asked only then) */
    const int dram64 = bsk__hopper_tune.dram_gbs > 0 ? bsk__hopper_tune.dram_gbs : st->dram_gbs;
    const int64_t cols64 = op == BSK_OP_T ? bsk_bsr_mb(A) : bsk_bsr_nb(A);
    int matched64 = b == 64 && dram64 > 0 && dram64 < B64_MATCHED_PAIR_MAX_DRAM_GBS &&
                    pair_match_asked(ctx->pattern_cache, A, C->cols, units64, cols64) == 1 &&
                    match_fits(1, units64, cols64);
    if (matched64 && bsk__hopper_tune.pair_match == 0) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing((cudaStream_t)ctx->stream, &cs) != cudaSuccess) {
            (void)cudaGetLastError(); /* not left for a later launch check */
            matched64 = 0;
        } else if (cs != cudaStreamCaptureStatusNone)
            matched64 = 0;
    }
    const int wide64 = bsk__hopper_tune.b64_wgn == 256 ||
                       (bsk__hopper_tune.b64_wgn == 0 && bsk__hopper_tune.b64_mode == 0 && B64_WIDE_DEFAULT && tma_epi &&
                        bsk__hopper_tune.slot_epi >= 0 && C->cols >= 512 &&
                        dens64 < (matched64 ? B64_WIDE_MAX_DENSITY_MATCHED : B64_WIDE_MAX_DENSITY) &&
                        units64 * ((C->cols + 511) / 512) >= 2 * (int64_t)grid64);
    /* the slot epilogue (also for a forced 64 x 512 tile) only where its TMA store applies */
    const int slot64 = wide64 && tma_epi && bsk__hopper_tune.slot_epi >= 0;
    if (op == BSK_OP_T) {
        /* Aᵀ·B: the b128 and paired-b64 kernels over the transpose index (an empty pattern, which has no
           index, is left to the portable path: it only scales C) */
        if (A->nnzb == 0) return BSK_ERR_UNSUPPORTED;
        if (b == 128 && tma_epi && ring4)
            return bf ? launch<Cfg128tT4, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t")
                      : launch<Cfg128tT4, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t");
        if (b == 64 && slot64) /* session 20: as op N below */
            return bf ? launch<Cfg64wsT, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64t")
                      : launch<Cfg64wsT, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64t");
        if (b == 64 && tma_epi && ring4)
            return bf ? launch<Cfg64ptT4, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt")
                      : launch<Cfg64ptT4, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt");
        if (b == 128)
            return tma_epi ? (bf ? launch<Cfg128tT, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t")
                                 : launch<Cfg128tT, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t"))
                           : (bf ? launch<Cfg128T, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t")
                                 : launch<Cfg128T, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128t"));
        return tma_epi ? (bf ? launch<Cfg64ptT, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt")
                             : launch<Cfg64ptT, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt"))
                       : (bf ? launch<Cfg64pT, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt")
                             : launch<Cfg64pT, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64pt"));
    }
    if (b == 128) {
        const int cl = bsk__hopper_tune.cluster == 1 || (bsk__hopper_tune.cluster == 0 && CLUSTER_DEFAULT);
        if (bsk__hopper_tune.cluster == 3) {
            s = bf ? launch<Cfg128c, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128x2")
                   : launch<Cfg128c, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128x2");
            if (s != BSK_ERR_UNSUPPORTED) return s;
        }
        if (tma_epi && cl) {
            s = bf ? launch<Cfg128tc, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128x2")
                   : launch<Cfg128tc, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128x2");
            if (s != BSK_ERR_UNSUPPORTED) return s; /* else: no cluster fits; run unclustered */
        }
        if (tma_epi && ring4)
            return bf ? launch<Cfg128t4, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128")
                      : launch<Cfg128t4, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128");
        if (tma_epi)
            return bf ? launch<Cfg128t, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128")
                      : launch<Cfg128t, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128");
        return bf ? launch<Cfg128, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128")
                  : launch<Cfg128, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b128");
    }
    if (slot64)
        return bf ? launch<Cfg64ws, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64")
                  : launch<Cfg64ws, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64");
    if (bsk__hopper_tune.b64_wgn == 256)
        return bf ? launch<Cfg64w, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64")
                  : launch<Cfg64w, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64");
    const int pair = bsk__hopper_tune.b64_mode == 2 || (bsk__hopper_tune.b64_mode == 0 && B64_PAIR_DEFAULT);
    if (pair) {
        if (tma_epi && ring4)
            return bf ? launch<Cfg64pt4, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p")
                      : launch<Cfg64pt4, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p");
        if (tma_epi)
            return bf ? launch<Cfg64pt, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p")
                      : launch<Cfg64pt, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p");
        return bf ? launch<Cfg64p, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p")
                  : launch<Cfg64p, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64p");
    }
    if (tma_epi)
        return bf ? launch<Cfg64t, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64")
                  : launch<Cfg64t, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64");
    return bf ? launch<Cfg64, BSK_BF16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64")
              : launch<Cfg64, BSK_F16>(ctx, st, A, B, alpha, beta, C, "hopper-wgmma-b64");
}
