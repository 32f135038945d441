/* spmm_small_hopper.cu — the launcher of the small-block Hopper SpMM (spmm_small_kernel.cuh): BS = 32 / 16 square
   blocks, op N, fp16 / bf16 in, fp32 / fp16 / bf16 C. Decides whether the kernel can take the case, builds the
   tensor maps, the union lists and the item order (two prep kernels, no host synchronisation; none in direct mode,
   where each CTA builds its one item's list) and launches the persistent kernel. Declines (BSK_ERR_UNSUPPORTED, the
   portable path then runs) anything it cannot do exactly right. The union lists are rebuilt per call unless the
   pattern cache keeps them (docs/hopper-spmm-notes.md, sessions 4, 16 and 27). */
#include <stdint.h>
#include "tma.cuh"
#include "launch.cuh"
#include "spmm_small_kernel.cuh"
#include "spmm_small_tune.h"

using namespace bsk_small;

struct bsk_hopper_small_tune_s bsk__hopper_small_tune = {0}; /* every knob 0 / NULL: the defaults */

/* Stage shapes (docs/hopper-spmm-notes.md, session 4, run 2; producer warps: session 8). Default (variant 0), Bᵀ
   read from shared memory by wgmma, one stage's wgmmas left in flight while the next stage's are issued, and four
   producer warps taking turns by stage (one warp's serial issue chain was the limit: session 8, run 2):
     BS 32: two block columns per stage (48 KB: 16 KB of B, 2 x 8 block slots), 4 stages, one block row per
            epilogue pass (measured best of the three: E 0.20 vs 0.16 one column x 7 stages at d = 0.25);
     BS 16: two block columns per stage (24 KB: 8 KB of B, 2 x 16 slots), 7 stages.
   Rows per wgmma (session 9): by density (RG2_BELOW_B32 / RG4_BELOW_B16 below), knob rows_per_mma; BS 32 with 2
   rows per wgmma runs the compact-pair stages (Cfg32cp below, session 12: 5 stages of 40 KB).
   Experiments (fp16 input only; bf16 runs the default): variant 1 BS 32: one column per stage (24 KB), 7 stages;
   BS 16: one column per stage (12 KB), 14 stages. Variant 2: the run-1 kernel (Bᵀ through registers by
   ldmatrix.trans, wait_group 0 per stage). Variants 3 / 4: the default with one / two producer warps. */
typedef SmallCfg<32, 2, 4, true, 1, 4> Cfg32;
typedef SmallCfg<32, 1, 7, true, 2, 4> Cfg32n;
typedef SmallCfg<32, 1, 7, false, 2, 4> Cfg32r;
typedef SmallCfg<32, 2, 4, true, 1, 1> Cfg32p1;
typedef SmallCfg<32, 2, 4, true, 1, 2> Cfg32p2;
typedef SmallCfg<16, 2, 7, true, 4, 4> Cfg16;
typedef SmallCfg<16, 1, 14, true, 4, 4> Cfg16n;
typedef SmallCfg<16, 2, 7, false, 4, 4> Cfg16r;
typedef SmallCfg<16, 2, 7, true, 4, 1> Cfg16p1;
typedef SmallCfg<16, 2, 7, true, 4, 2> Cfg16p2;
/* Rows per wgmma (session 9; knob rows_per_mma, both input dtypes): the default stage shape with RG adjacent row
   slots of an entry in one wgmma m64n(RG*BS)k16 (absent rows of a present group zeroed by the producer). */
typedef SmallCfg<32, 2, 4, true, 1, 4, 2> Cfg32g2;
typedef SmallCfg<32, 2, 4, true, 1, 4, 4> Cfg32g4;
typedef SmallCfg<32, 2, 4, true, 1, 4, 8> Cfg32g8;
typedef SmallCfg<16, 2, 7, true, 4, 4, 4> Cfg16g4;
typedef SmallCfg<16, 2, 7, true, 4, 4, 8> Cfg16g8;
typedef SmallCfg<16, 2, 7, true, 4, 4, 16> Cfg16g16;
/* Experiment (fp16 input, variants 5 / 6): b32 2 / 4 rows per wgmma, k16 steps outer (SmallCfg::KO). */
typedef SmallCfg<32, 2, 4, true, 1, 4, 2, true> Cfg32g2k;
typedef SmallCfg<32, 2, 4, true, 1, 4, 4, true> Cfg32g4k;
/* Timing experiment (fp16, variant 7, results wrong): RG 2 with the two entries' A slots aliased (32 KB stages), 6
   stages — does the ring depth bound b32 at low density? (session 12) */
typedef SmallCfg<32, 2, 6, true, 1, 4, 2, false, 8> Cfg32a;
/* Compact pairs (SmallCfg::CP, session 12): two entries per stage in 8 row slots + 4 overflow slots (40 KB stages, 5
   deep instead of 4 x 48 KB), pairs with more than two common row groups split in two — the b32 default with 2 rows
   per wgmma (H200, 8192^3, same run: d 0.05 level, d 0.1 +3.6 %, d 0.25 +5.6 %; at d 0.5 -12 % against one row per
   wgmma, which stays there). Without overflow slots (6 x 32 KB, variant 8) ~37 % of the pairs split at d 0.1 and it
   lost 10-18 %. Variant 9: the previous default (Cfg32g2, 4 x 48 KB).
   Producer registers (session 14): 88, the consumers 208 (at 72 / 216 the producer spilled 8 bytes since the
   own-stage walk): H200, 8192^3, same run, alternated: +1.3 / +0.8 / +0.5 / +0.6 % at d 0.05 / 0.1 / 0.25 / 0.5
   (bench/results/small_regs_probe_h200_2026-11-25_s14.txt). */
typedef SmallCfg<32, 2, 5, true, 1, 4, 2, false, 12, true, 88> Cfg32cp;
typedef SmallCfg<32, 2, 6, true, 1, 4, 2, false, 8, true> Cfg32cp0;
/* Wide items (session 19; NH 64-column halves per consumer, docs/hopper-spmm-notes.md "Session 19"): an item of
   R = 256 / (BS * NH) block rows x 128 * NH columns. The per-entry costs of both sides (the producer warps' index
   work and TMA issues, the consumers' barrier, record and guards: ~1000 cycles per 2-entry stage, session 14) then
   buy NH times the columns, and the groups' unions shrink less than the entries do. H200, 8192^3 fp16, same run,
   alternated (bench/results/small_wide2_probe_h200_2026-11-27_s19.txt), TFLOPS default / NH 2 / NH 4:
     BS 32 (one row per wgmma, one entry per stage, 5 x 36 KB): d 0.05 153 / 195 / 244, d 0.1 181 / 225 / 272,
       d 0.25 253 / 281 / 309, d 0.4 343 / 336 / 342, d 0.5 392 / 374 / 363; 2048^3 d 0.1 / 0.25 / 0.5 71 / 79 / 86,
       134 / 139 / 158, 240 / 232 / 236. (NH 2 with compact pairs, 2 rows per wgmma or one entry per stage, and NH 4
       with 2 rows per wgmma: all below these, run 1 and 2 of the same file set.)
     BS 16 (4 rows per wgmma; NH 2: 7 x 24 KB, NH 4: two entries per stage, 5 x 36 KB): d 0.05 79 / 105 / 117, d 0.1
       103 / 126 / 131, d 0.25 166 / 187 / 166, d 0.5 278 / 281 / 240. */
typedef SmallCfg<32, 1, 5, true, 1, 4, 1, false, 0, false, 72, 4> Cfg32w4;
typedef SmallCfg<16, 2, 7, true, 4, 4, 4, false, 0, false, 72, 2> Cfg16w2;
typedef SmallCfg<16, 2, 5, true, 4, 4, 4, false, 0, false, 72, 4> Cfg16w4;

/* Below these block densities (nnzb / (mb * nb)) the portable mma.sync kernel is faster, so this kernel declines
   (bsk__hopper_small_tune.force takes every case; the tests use it). Measured at 8192^3 fp16 on an H100, same run,
   alternated (session 8, run 3, four producer warps; ms this kernel / portable): BS 32 d 0.06 0.620 / 0.605, d 0.08
   0.742 / 0.779; BS 16 d 0.13 2.64 / 2.53, d 0.16 2.80 / 3.10 -> crossovers near d 0.067 and 0.139 (interpolated;
   session 4's kernel: 0.09 and 0.18). BS 16 with 4 rows per wgmma (session 9, run 2): d 0.03 0.575 / 0.659, d 0.04
   0.695 / 0.845, d 0.05 0.807 / 1.033, d 0.07 0.993 / 1.401 -> the crossover is below 0.03 (not measured lower);
   BS 32 (2 rows per wgmma below d 0.3, 8 % faster at d 0.1) kept 0.07 until session 12, whose bsk tune runs (H100
   and H200, 8192^3 and 32768 x 4096 x 4096, fp16) found this kernel ahead at every density measured below it: d 0.02
   / 0.04 / 0.06 1.08 / 1.08 / 1.12x the portable kernel at 8192^3 and 1.26 / 1.20 / 1.21x at the MoE shape (H100),
   1.09-1.14x and 1.21-1.26x (H200; bench/results/tune_small_blocks_*_s12.txt) -> 0.02, the lowest density measured.
   With wide items (session 19, bsk tune, H200, 8192^3 fp16, bench/results/tune_small_blocks_h200_2026-11-27_s19.txt):
   d 0.01 b32 2.06x, b16 2.09x the portable kernel, b16 d 0.02 2.10x (at 2048^3, NH 1 there: level at d 0.01) ->
   0.01 for both, again the lowest density measured. */
static const double MIN_DENSITY_B32 = 0.01, MIN_DENSITY_B16 = 0.01;
/* BS 16 with few items: below this density and with fewer than 2 items per SM the portable kernel is faster (bsk
   tune, session 12, d 0.05: 2048^3 (128 items) 1.22x on the H100, 1.19x on the H200; 4096 x 2048 x 2048 (256 items)
   1.04 / 1.05x; at d 0.1 this kernel is level or ahead). */
static const double MIN_DENSITY_B16_FEW_ITEMS = 0.06;

/* Rows per wgmma by default (session 9, H100, 8192^3 fp16, same run, alternated; ms RG 1 / 2 / 4 / 8 at b32, RG 1 /
   4 / 8 / 16 at b16): b32 d 0.1 0.850 / 0.783 / 0.830 / 0.901, d 0.25 1.349 / 1.336 / 1.423 / 1.462, d 0.5 1.651 /
   1.747 / 1.793 / 1.739 -> 2 rows below d 0.3, else 1; b16 d 0.1 2.390 / 1.209 / 1.243 / 1.288, d 0.25 3.023 / 1.728
   / 1.725 / 1.686, d 0.5 3.411 / 2.142 / 2.052 / 1.989 -> 4 rows below d 0.2, else all 16. */
static const double RG2_BELOW_B32 = 0.3, RG4_BELOW_B16 = 0.2;
/* Wide items by default (session 19, the table above): BS 32 NH 4 below d 0.35 (level at 0.4, -7 % at 0.5); BS 16
   NH 4 below d 0.17, NH 2 below 0.4 (level with the 16-row default at 0.5) — where there are at least 2 items per SM:
   an item of 2 block rows does not average skewed rows out, and with one item per SM the longest decides (2048^3
   skewed b32, 128 items: d 0.1 / 0.25 42.6 / 103 TFLOPS with NH 4 against ~59 / 121 before; uniform +21 / +19 %,
   given up; bench/results/spmm_h200_2026-11-27_s19.txt). Knob `wide`. */
static const double NH4_BELOW_B32 = 0.35, NH4_BELOW_B16 = 0.17, NH2_BELOW_B16 = 0.4;
static const int WIDE_MIN_ITEMS_PER_SM = 2;

/* With RG > 1 the row slots of absent rows in present groups are zeroed: by the producer warp's shared-memory stores
   + a proxy fence (sessions 9-12), or as TMA loads of an out-of-bounds block (session 13) up to ZERO_TMA_MAX_RG rows
   per wgmma: the producer warps bound the b32 compact-pair kernel (cycle counters: each warp busy ~90 % of its
   time), and the loads take the stores, their fence and a warp sync off them. H200, 8192^3 fp16, same run,
   alternated (bench/results/small_zt_probe_h200_2026-11-25_s13.txt): b32 RG 2 d 0.05 / 0.1 / 0.25 +2.6 / +3.7 /
   +4.8 %, b32 RG 4 d 0.1 +5.8 %, b16 RG 4 d 0.05 / 0.1 +1.2 / +2.6 %; but b16 with all 16 rows per wgmma (d >= 0.2)
   -15 / -30 % at d 0.25 / 0.5 (up to 15 zero boxes of 512 bytes per entry: the TMA unit's issue rate), so stores
   there. */
static const int ZERO_TMA_MAX_RG = 4;

/* Direct mode (session 27, knob `direct`): where every item has a CTA of its own (items <= grid), no pattern-cache
   entry holds the lists (the cache off, or a stream capture) and four producer warps run (the first ticket is then the
   CTA's index), the two prep kernels are left out: CTA t runs item t and builds its group's union list itself
   (spmm_small_kernel.cuh), into its own nb entries of the workspace — at most SMALL_DIRECT_MAX_ENT entries in all. The
   queue is the context's (zero between launches: the kernel's last CTA resets it). Session 26 did the same for the
   b64 / b128 kernel (+13-20 % at 2048^3 b64); here the prep was 7.4 us of a 24-us 2048^3 b32 call (session 16) and
   the cached lists +13-21 % there. Measured (H200, 2048^3, same run): b32 +7-11 %, b16 +7-9 %, skewed b32 +8-10 %;
   ~10 % short of the cached lists, the list build's two dependent DRAM round trips (docs/hopper-spmm-notes.md,
   session 27). */
static const int SMALL_DIRECT_DEFAULT = 1;
static const int64_t SMALL_DIRECT_MAX_ENT = (int64_t)1 << 20;

template <class CF, int DT, int CT, bool TS = false>
static bsk_status launch_small(bsk_context *ctx, const struct bsk_cuda_state *st, const bsk_bsr *A, const bsk_dense *B,
                               float alpha, float beta, bsk_dense *C, const char *name)
{
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    if ((size_t)CF::SMEM > st->smem_optin) return BSK_ERR_UNSUPPORTED;
    const int64_t M = C->rows, N = C->cols, K = B->rows;
    const int64_t mb = bsk_bsr_mb(A), nb = bsk_bsr_nb(A);
    const int64_t G = (mb + CF::R - 1) / CF::R, nt = (N + CF::BN - 1) / CF::BN;
    /* TMA coordinates, block indices, the item counter and the kernel's sizes are 32-bit: leave giant shapes to
       the portable path. */
    if (K + 2 * CF::BS >= INT32_MAX || N + 2 * CF::BN >= INT32_MAX || M + 2 * 256 >= INT32_MAX ||
        G * nt + 4096 >= INT32_MAX || A->nnzb + 64 >= INT32_MAX)
        return BSK_ERR_UNSUPPORTED;

    CUtensorMap tmA, tmB, tmC;
    bsk_status s;
    /* With no blocks nothing is loaded from A; any valid 16-byte-aligned address keeps the map legal. */
    const void *vals = A->nnzb ? A->values : B->data;
    const uint64_t nblk = A->nnzb ? (uint64_t)A->nnzb : 1u;
    if ((s = bsk_hopper_tmap_3d_swz(&tmA, vals, A->dtype, nblk, CF::BS, CF::BS, CF::BS, CF::BS, CF::BS * 2))) return s;
    if ((s = bsk_hopper_tmap_2d(&tmB, B->data, B->dtype, (uint64_t)K, (uint64_t)N, (uint64_t)B->ld, CF::BS, 64)))
        return s;
    if (!TS) tmC = tmB; /* unused */
    else if ((s = bsk_hopper_tmap_2d(&tmC, C->data, C->dtype, (uint64_t)M, (uint64_t)N, (uint64_t)C->ld, CF::TS_ROWS, 64)))
        return s;
    /* KC 1 with NH > 1: an entry's 2 NH B boxes as one 3-D box (B seen as [N / 64][K][64]: chunk stride 128 bytes), only
       where N % 64 == 0 (a partial last chunk would read past N); knob b_box3d 1 keeps the 2-D boxes */
    CUtensorMap tmB3 = tmB;
    int b3d = CF::KC == 1 && CF::NH > 1 && N % 64 == 0 && !bsk__hopper_small_tune.b_box3d;
    if (b3d) { /* a map the driver refuses: the 2-D boxes */
        const cuuint64_t dims[3] = {64, (cuuint64_t)K, (cuuint64_t)(N / 64)};
        const cuuint64_t strides[2] = {(cuuint64_t)B->ld * 2, 128};
        const cuuint32_t box[3] = {64, (cuuint32_t)CF::BS, (cuuint32_t)(2 * CF::NH)};
        if (bsk_hopper_tmap_encode(&tmB3, B->data, B->dtype, 3, dims, strides, box)) b3d = 0;
    }
    bsk__hopper_small_tune.out_b3d = b3d;

    /* workspace: queue {head, CTAs done} | ginfo[G] (int2) | order[G] (int4) | ent[nnzb] (int2). With the pattern
       cache on, a buffer of the pattern's cache entry instead, filled by the prep kernels on first use only: the
       lists depend on the pattern alone, and the main kernel leaves the queue at zero when it ends (its last CTA
       resets it), so a later call launches the main kernel alone (at 2048^3 the prep was ~1/3 of a call). */
    const size_t off_ginfo = 256, off_order = off_ginfo + ((size_t)G * sizeof(int2) + 15) / 16 * 16;
    const size_t off_ent = off_order + (size_t)G * sizeof(int4);
    const size_t ws_bytes = off_ent + (size_t)A->nnzb * sizeof(int2) + 16;
    /* the grid: one CTA per SM (knob max_ctas), at most one per item */
    int grid = st->sms;
    if (bsk__hopper_small_tune.max_ctas > 0 && bsk__hopper_small_tune.max_ctas < grid) grid = bsk__hopper_small_tune.max_ctas;
    const bool direct_fits = G * nt <= (int64_t)grid && G * nt * nb <= SMALL_DIRECT_MAX_ENT;
    if ((int64_t)grid > G * nt) grid = (int)(G * nt);
    if (grid < 1) grid = 1;
    /* direct mode's lists: nb entries per item after the first 256 bytes */
    const size_t direct_bytes = off_ginfo + (direct_fits ? (size_t)(G * nt * nb) * sizeof(int2) : 0) + 16;
    void *ws = NULL;
    int built = 0, uslot = -1;
    const int64_t ukey[BSK_DERIVED_KEY] = {1 /* kind: small-block unions */, CF::R, 0, 0};
    if (ctx->pattern_cache && (s = bsk_cuda_derived_get(ctx, A, ukey, ws_bytes, &ws, &built, &uslot))) return s;
    /* the workspace at this size even when the lists are cached: room for a captured call of the same shape (inside
       a capture the cache is not used), which must not grow it (an allocation inside a capture belongs to the graph) */
    void *wsp = NULL;
    if ((s = bsk_cuda_workspace(ctx, ws_bytes > direct_bytes ? ws_bytes : direct_bytes, &wsp))) {
        bsk_cuda_derived_done(ctx, uslot, 0);
        return s;
    }
    /* direct mode (above): no cache entry (the cache off or capturing), the items fit; dq stays NULL where the
       context's queue cannot be had (a fresh context inside a capture) and the prep kernels run */
    const int dk = bsk__hopper_small_tune.direct;
    unsigned *dq = NULL;
    if (!ws && dk >= 0 && (dk > 0 || SMALL_DIRECT_DEFAULT) && CF::PW > 1 && direct_fits && !bsk__hopper_small_tune.prep_only)
        (void)bsk_cuda_queue(ctx, BSK_QUEUE_SMALL_DIRECT, &dq);
    const bool direct = dq != NULL;
    if (!ws) ws = wsp;
    unsigned *counter = (unsigned *)ws;
    int2 *ginfo = (int2 *)((char *)ws + off_ginfo);
    int4 *order = (int4 *)((char *)ws + off_order);
    int2 *ent = (int2 *)((char *)ws + off_ent);

    /* Groups per band: the A blocks of a band should stay in L2 while the band's N tiles go by. */
    const int64_t band_budget = (int64_t)(bsk__hopper_small_tune.band_mb > 0 ? bsk__hopper_small_tune.band_mb : 16) << 20;
    const int64_t group_bytes = (A->nnzb / (G ? G : 1) + 1) * (int64_t)CF::BLK_BYTES;
    int64_t band = band_budget / group_bytes;
    if (band < 1) band = 1;
    if (band > G) band = G;

    SmallParams p;
    p.ent = direct ? (int2 *)((char *)ws + off_ginfo) : ent;
    p.order = order;
    p.row_ptr = A->row_ptr;
    p.col_idx = A->col_idx;
    p.direct = direct ? 1 : 0;
    p.counter = direct ? dq : counter;
    p.C = C->data;
    p.ldc = C->ld;
    p.alpha = alpha;
    p.beta = beta;
    p.M = (int)M;
    p.N = (int)N;
    p.mb = (int)mb;
    p.nb = (int)nb;
    p.nnzb = (int)A->nnzb;
    p.G = (int)G;
    p.nt = (int)nt;
    p.band = (int)band;
    p.total = (unsigned)(G * nt);
    p.diag = bsk__hopper_small_tune.diag;
    p.zero_tma = bsk__hopper_small_tune.zero_tma == 2 ? 1 : bsk__hopper_small_tune.zero_tma == 1 ? 0 : CF::RG <= ZERO_TMA_MAX_RG;
    p.zblk = (int)nblk;
    p.b3d = b3d;
    p.prof = (long long *)bsk__hopper_small_tune.prof;
    bsk__hopper_small_tune.out_items = (int)(G * nt);

    if ((s = bsk_hopper_allow_smem(small_spmm_kernel<CF, DT, CT, TS>, CF::SMEM))) {
        bsk_cuda_derived_done(ctx, uslot, 0);
        return s;
    }

    /* prep: the union lists (one CTA per group, grid-stride), then the order (one CTA) — unless cached. From here
       on every return records the cache entry's use (a later eviction on any stream waits for these kernels);
       `filled` once both prep kernels are enqueued. */
    int filled = built;
    if (!built && !direct) {
        const int ugrid = (int)(G < 4096 ? G : 4096);
        small_union_kernel<<<ugrid, SMALL_UNION_THREADS, 0, stream>>>(A->row_ptr, A->col_idx, (int)mb, (int)nb,
                                                                      (int)A->nnzb, CF::R, (int)G, ent, ginfo);
        if (!(s = BSK_CUDA_LAUNCH_CHECK()))
            s = bsk_hopper_launch(small_order_kernel, 1, 1024, 0, stream, !bsk__hopper_small_tune.no_pdl, 1,
                                  (const int2 *)ginfo, (int)G, order, counter);
        filled = !s;
    }
    bsk__hopper_small_tune.out_prep = direct ? 2 : !built;
    bsk__hopper_small_tune.out_queue = dq;
    bsk__hopper_small_tune.out_ts = TS;
    if (!s && !bsk__hopper_small_tune.prep_only) {
        bsk__hopper_small_tune.out_grid = grid;
        s = bsk_hopper_launch(small_spmm_kernel<CF, DT, CT, TS>, grid, CF::THREADS, CF::SMEM, stream,
                              !bsk__hopper_small_tune.no_pdl, 1, tmA, tmB, tmC, tmB3, p);
        if (!s) ctx->last_kernel = name;
    }
    bsk_cuda_derived_done(ctx, uslot, filled);
    return s;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Input dtype x C dtype: both template parameters of the kernel (C's dtype at run time inside the epilogue made
   ptxas serialise the mainloop's wgmmas, see spmm_small_kernel.cuh). C of the input's dtype with beta = 0 takes the
   TMA-store epilogue (TS; C's base and row stride are 16-byte aligned here, as TMA needs, and N % 8 == 0: with a
   row end inside a 16-byte unit the store wrote past N into the padding up to ld, H200, session 16 — as the b64 / 128
   kernel found); the other pairs, beta != 0, fp32 C and other N the direct one (built for these only: every TS pair
   is one more kernel per configuration). */
template <class CF>
static bsk_status by_out(bsk_context *ctx, const struct bsk_cuda_state *st, int bf, const bsk_bsr *A, const bsk_dense *B,
                         float alpha, float beta, bsk_dense *C, const char *name)
{
    if (beta == 0.0f && C->dtype == A->dtype && C->cols % 8 == 0 && !bsk__hopper_small_tune.epi_direct) {
        if (bf) return launch_small<CF, BSK_BF16, BSK_BF16, true>(ctx, st, A, B, alpha, beta, C, name);
        return launch_small<CF, BSK_F16, BSK_F16, true>(ctx, st, A, B, alpha, beta, C, name);
    }
    if (bf) {
        if (C->dtype == BSK_F32) return launch_small<CF, BSK_BF16, BSK_F32>(ctx, st, A, B, alpha, beta, C, name);
        if (C->dtype == BSK_F16) return launch_small<CF, BSK_BF16, BSK_F16>(ctx, st, A, B, alpha, beta, C, name);
        return launch_small<CF, BSK_BF16, BSK_BF16>(ctx, st, A, B, alpha, beta, C, name);
    }
    if (C->dtype == BSK_F32) return launch_small<CF, BSK_F16, BSK_F32>(ctx, st, A, B, alpha, beta, C, name);
    if (C->dtype == BSK_F16) return launch_small<CF, BSK_F16, BSK_F16>(ctx, st, A, B, alpha, beta, C, name);
    return launch_small<CF, BSK_F16, BSK_BF16>(ctx, st, A, B, alpha, beta, C, name);
}
/* The experiments are built for fp16 input only (fewer kernels to compile). */
template <class CF>
static bsk_status by_out_f16(bsk_context *ctx, const struct bsk_cuda_state *st, const bsk_bsr *A, const bsk_dense *B,
                             float alpha, float beta, bsk_dense *C, const char *name)
{
    if (C->dtype == BSK_F32) return launch_small<CF, BSK_F16, BSK_F32>(ctx, st, A, B, alpha, beta, C, name);
    if (C->dtype == BSK_F16) return launch_small<CF, BSK_F16, BSK_F16>(ctx, st, A, B, alpha, beta, C, name);
    return launch_small<CF, BSK_F16, BSK_BF16>(ctx, st, A, B, alpha, beta, C, name);
}

bsk_status bsk_hopper_spmm_small(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                 float beta, bsk_dense *C)
{
    const struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major != 9 || st->cc_minor != 0) return BSK_ERR_UNSUPPORTED; /* sm_90a code only */
    if (op != BSK_OP_N) return BSK_ERR_UNSUPPORTED;
    const int b = A->block_rows;
    if (b != A->block_cols || (b != 32 && b != 16)) return BSK_ERR_UNSUPPORTED;
    if ((A->dtype != BSK_F16 && A->dtype != BSK_BF16) || B->dtype != A->dtype) return BSK_ERR_UNSUPPORTED;
    const size_t ces = bsk_dtype_size(C->dtype);
    if (!ces) return BSK_ERR_UNSUPPORTED;
    /* TMA: global strides multiples of 16 bytes, base addresses 16-byte aligned; the epilogue's 16-byte vectors
       need the same of C. */
    if ((B->ld * 2) % 16 || !aligned16(B->data) || (C->ld * (int64_t)ces) % 16 || !aligned16(C->data) ||
        (A->nnzb && !aligned16(A->values)))
        return BSK_ERR_UNSUPPORTED;
    const int v = bsk__hopper_small_tune.variant;
    if (v < 0) return BSK_ERR_UNSUPPORTED;
    /* rows per wgmma: 0 the default (below), 1 one wgmma per row (session 8), b32 2 / 4 / 8, b16 4 / 8 / 16 */
    int rg = bsk__hopper_small_tune.rows_per_mma;
    if (C->rows == 0 || C->cols == 0) return BSK_SUCCESS;
    const double cells = (double)bsk_bsr_mb(A) * (double)bsk_bsr_nb(A);
    const double density = cells > 0 ? (double)A->nnzb / cells : 0.0;
    if (rg == 0) rg = b == 32 ? (density < RG2_BELOW_B32 ? 2 : 1) : (density < RG4_BELOW_B16 ? 4 : 16);
    /* ctx->spmm_forced: the autotuner measured this family fastest for the case */
    const int choose = !bsk__hopper_small_tune.force && !ctx->spmm_forced;
    if (choose && density < (b == 32 ? MIN_DENSITY_B32 : MIN_DENSITY_B16)) return BSK_ERR_UNSUPPORTED;
    /* Items of 256 rows x 128 columns (wide: 256 / NH rows x 128 NH columns, the same count): with fewer than half
       the SMs busy the portable kernel's smaller tiles win (H100, bsk tune, session 7: 1024^3 (32 items) portable
       1.5-2.6x faster at b 16 / 32, d 0.1-0.5; 2048^3 and 8192 x 512 x 8192 (128 items) this kernel wins from d 0.25
       on). */
    const int R = b == 32 ? Cfg32::R : Cfg16::R; /* block rows per item (256 rows) */
    const int64_t items = (bsk_bsr_mb(A) + R - 1) / R * ((C->cols + Cfg32::BN - 1) / Cfg32::BN);
    if (choose && 2 * items < st->sms) return BSK_ERR_UNSUPPORTED;
    if (choose && b == 16 && items < 2 * (int64_t)st->sms && density < MIN_DENSITY_B16_FEW_ITEMS) return BSK_ERR_UNSUPPORTED;
    /* 64-column halves per consumer (wide items): the knob (1, 2 = BS 16 only, 4), else by density where there are at
       least WIDE_MIN_ITEMS_PER_SM items per SM; the variants and an explicit rows_per_mma run the NH 1 shapes */
    int nh = bsk__hopper_small_tune.wide;
    if (v != 0 || bsk__hopper_small_tune.rows_per_mma != 0) nh = 1;
    else if (nh == 0 && items < WIDE_MIN_ITEMS_PER_SM * (int64_t)st->sms) nh = 1;
    else if (nh == 0) nh = b == 32 ? (density < NH4_BELOW_B32 ? 4 : 1) : (density < NH4_BELOW_B16 ? 4 : density < NH2_BELOW_B16 ? 2 : 1);
    if (nh != 1 && nh != 4 && !(nh == 2 && b == 16)) return BSK_ERR_UNSUPPORTED;
    bsk__hopper_small_tune.out_nh = nh;
    const int bf = A->dtype == BSK_BF16;
    const char *name = b == 32 ? "hopper-wgmma-b32s" : "hopper-wgmma-b16s";
    if (b == 32) {
        if (v == 1 && !bf) return by_out_f16<Cfg32n>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 2 && !bf) return by_out_f16<Cfg32r>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 3 && !bf) return by_out_f16<Cfg32p1>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 4 && !bf) return by_out_f16<Cfg32p2>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 5 && !bf) return by_out_f16<Cfg32g2k>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 6 && !bf) return by_out_f16<Cfg32g4k>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 7 && !bf) return by_out_f16<Cfg32a>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 8 && !bf) return by_out_f16<Cfg32cp0>(ctx, st, A, B, alpha, beta, C, name);
        if (v == 9 && !bf) return by_out_f16<Cfg32g2>(ctx, st, A, B, alpha, beta, C, name);
        if (nh == 4) return by_out<Cfg32w4>(ctx, st, bf, A, B, alpha, beta, C, name);
        if (rg == 2) return by_out<Cfg32cp>(ctx, st, bf, A, B, alpha, beta, C, name);
        if (rg == 4) return by_out<Cfg32g4>(ctx, st, bf, A, B, alpha, beta, C, name);
        if (rg == 8) return by_out<Cfg32g8>(ctx, st, bf, A, B, alpha, beta, C, name);
        return by_out<Cfg32>(ctx, st, bf, A, B, alpha, beta, C, name);
    }
    if (v == 1 && !bf) return by_out_f16<Cfg16n>(ctx, st, A, B, alpha, beta, C, name);
    if (v == 2 && !bf) return by_out_f16<Cfg16r>(ctx, st, A, B, alpha, beta, C, name);
    if (v == 3 && !bf) return by_out_f16<Cfg16p1>(ctx, st, A, B, alpha, beta, C, name);
    if (v == 4 && !bf) return by_out_f16<Cfg16p2>(ctx, st, A, B, alpha, beta, C, name);
    if (nh == 4) return by_out<Cfg16w4>(ctx, st, bf, A, B, alpha, beta, C, name);
    if (nh == 2) return by_out<Cfg16w2>(ctx, st, bf, A, B, alpha, beta, C, name);
    if (rg == 4) return by_out<Cfg16g4>(ctx, st, bf, A, B, alpha, beta, C, name);
    if (rg == 8) return by_out<Cfg16g8>(ctx, st, bf, A, B, alpha, beta, C, name);
    if (rg == 16) return by_out<Cfg16g16>(ctx, st, bf, A, B, alpha, beta, C, name);
    return by_out<Cfg16>(ctx, st, bf, A, B, alpha, beta, C, name);
}
