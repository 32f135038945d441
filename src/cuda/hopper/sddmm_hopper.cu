/* sddmm_hopper.cu — the Hopper (sm_90a) SDDMM launcher: decides whether the TMA + wgmma kernel can take the
   case, builds the tensor maps of X and Y, lists the work and plans the schedule on the device (prep kernel:
   no host synchronisation, so the call can be captured in a CUDA graph) and launches the persistent kernel
   (src/cuda/hopper/sddmm_kernel.cuh). Declines (BSK_ERR_UNSUPPORTED, the portable path then runs) anything it
   cannot do exactly right. */
#include <stdint.h>
#include "tma.cuh"
#include "launch.cuh"
#include "sddmm_kernel.cuh"
#include "sddmm_tune.h"

using namespace bsk_hopper::sddmm;

struct bsk_hopper_sddmm_tune_s bsk__hopper_sddmm_tune = {0};

/* B = 64: blocks per item by default (64 x 512 tile: 72 KB per 4.2 MFLOP stage vs 40 KB per 2.1 for 64 x 256;
   measured 1.4x faster at d = 0.1 and 0.5, docs/hopper-spmm-notes.md, SDDMM run 1). */
static const int B64_BLOCKS_DEFAULT = 8;

typedef Cfg<128, 2, 4> Cfg128;  /* tile 128 x 256, 48 KB stages                         */
typedef Cfg<64, 8, 3> Cfg64w;   /* tile 64 x 512, 72 KB stages                           */
typedef Cfg<64, 4, 5> Cfg64;    /* tile 64 x 256, 40 KB stages                           */

/* Partial-tile slots of the D split: at most SLOTS_PER_CTA per CTA of the grid (split items x parts stay within
   it; the planner's own one-round splits use at most one per CTA, forced ones up to four). */
static const int SLOTS_PER_CTA = 4;

/* The column-group item order (items cut at G groups of block columns, listed group-major: a wave of CTAs reads one
   group's Y panels). It pays only when Y does not fit in L2 (>= 64 MB of panels) and the rows are long:
   - B = 64 (H200, session 18, `sddmm_col_groups_h200_2026-11-27_s18.txt`, uniform): d 0.5 +17 %, d 0.375 +3-6 %,
     d 0.75 +41 %, but d 0.25 -5 to -10 % and d 0.1 -20 to -50 % (a (row, group) then holds fewer blocks than an
     item: short items, the X panel reloaded per item). Skewed rows (H100, session 23,
     `sddmm_skew_groups_h100_2026-11-27_s23.txt`): G = 3 d 0.2 / 0.25 / 0.3 / 0.375 / 0.5 +21 / +39 / +21 / +40 /
     +27 % over the row order (which read 2.5 GB of DRAM at d 0.25 vs 1.1 GB on uniform rows), d 0.15 +5 %, d 0.1
     -12 %; G = 3 is level with G = 4 on uniform rows at d >= 0.375 and ahead on skewed ones. Whether the rows are
     skewed only the device knows: the prep kernel applies the rule (col_groups = -3: G = 3 on skewed rows of >= 2
     items on average, or rows of >= 6 items whatever their spread).
   - B = 128: G = 2 with >= 24 blocks per row on average (12 items of 2; d 0.5 +2.3 %, d 0.25 -6 %, d 0.1 level on
     the H200; skewed rows on the H100: d 0.1 level, d 0.25 -3 %, d 0.5 +5 %). */
static const int B64_AUTO_GROUPS = 3; /* the prep kernel's candidate G at B = 64 (passed as -G) */

static int col_groups_auto(int B, int64_t mb, int64_t nnzb, int64_t K, int64_t D)
{
    if (K * D * 2 < ((int64_t)64 << 20)) return 1;
    if (B == 64) return -B64_AUTO_GROUPS;
    if (B == 128 && nnzb >= 24 * mb) return 2;
    return 1;
}

static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }

template <class CF, int DT>
static bsk_status launch(bsk_context *ctx, const struct bsk_cuda_state *st, float alpha, const bsk_dense *X,
                         const bsk_dense *Y, float beta, bsk_bsr *out, const char *name)
{
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    if ((size_t)CF::SMEM > st->smem_optin) return BSK_ERR_UNSUPPORTED;
    const int64_t M = out->rows, K = out->cols, D = X->cols;
    const int64_t mb = bsk_bsr_mb(out), nb = bsk_bsr_nb(out), nnzb = out->nnzb;
    int grid = st->sms;
    if (bsk__hopper_sddmm_tune.max_ctas > 0 && bsk__hopper_sddmm_tune.max_ctas < grid)
        grid = bsk__hopper_sddmm_tune.max_ctas;
    if (grid < 1) grid = 1;
    /* items: ceil(n / GB) per (row, column group) segment of n blocks, so at most ceil(nnzb / GB) plus one per
       segment (well-formed row_ptr; the prep kernel stops at cap otherwise) */
    const int kg = bsk__hopper_sddmm_tune.col_groups;
    /* G > 0: fixed; G < 0: the prep kernel chooses between -G groups and the row order (kg = -1: that rule
       whatever Y's size, for tests) */
    const int G = kg >= 2 && kg <= 64 ? kg : kg == 0 ? col_groups_auto(CF::B, mb, nnzb, K, D) : kg == -1 ? -B64_AUTO_GROUPS : 1;
    const int64_t cap = (nnzb + CF::GB - 1) / CF::GB + mb * (G < 0 ? -G : G);
    /* TMA coordinates, item and unit counts are 32-bit: leave giant shapes to the portable path. */
    if (M + 2 * CF::B >= INT32_MAX || K + 2 * CF::B >= INT32_MAX || D + 128 >= INT32_MAX ||
        cap + 8 * (int64_t)grid + 64 >= INT32_MAX || nnzb + 64 >= INT32_MAX)
        return BSK_ERR_UNSUPPORTED;
    const int chunks = (int)((D + 63) / 64);
    int64_t slot_cap = SLOTS_PER_CTA * (int64_t)grid;
    if (slot_cap > 8 * cap) slot_cap = 8 * cap; /* never more slots than split parts can exist */

    CUtensorMap tmX, tmY;
    bsk_status s;
    if ((s = bsk_hopper_tmap_2d(&tmX, X->data, X->dtype, (uint64_t)M, (uint64_t)D, (uint64_t)X->ld, CF::B, 64)))
        return s;
    if ((s = bsk_hopper_tmap_2d(&tmY, Y->data, Y->dtype, (uint64_t)K, (uint64_t)D, (uint64_t)Y->ld, CF::B, 64)))
        return s;

    /* workspace: queue head + plan | split counters | items | partial-tile slots */
    const size_t off_ctr = 256, off_items = off_ctr + round256((size_t)grid * 2 * sizeof(int));
    const size_t off_slots = off_items + round256((size_t)cap * sizeof(int4));
    const size_t bytes = off_slots + (size_t)slot_cap * CF::SLOT_FLOATS * sizeof(float);
    void *ws = NULL;
    if ((s = bsk_cuda_workspace(ctx, bytes, &ws))) return s;
    char *w = (char *)ws;

    Params p;
    p.items = (const int4 *)(w + off_items);
    p.plan = (const int *)(w + 64);
    p.counter = (unsigned *)w;
    p.ctr = (int *)(w + off_ctr);
    p.slots = (float *)(w + off_slots);
    p.col_idx = out->col_idx;
    p.V = out->values;
    p.vtype = (int)out->dtype;
    p.alpha = alpha;
    p.beta = beta;
    p.M = (int)M;
    p.K = (int)K;
    p.nb = (int)nb;
    p.chunks = chunks;

    if ((s = bsk_hopper_allow_smem(sddmm_kernel<CF, DT>, CF::SMEM))) return s;
    const int force = bsk__hopper_sddmm_tune.split < 0 ? -1 : bsk__hopper_sddmm_tune.split;
    sddmm_prep_kernel<<<1, 1024, 0, stream>>>(out->row_ptr, out->col_idx, (int)mb, (int)nb, (int)nnzb, CF::GB,
                                              (int)cap, grid, chunks, (int)slot_cap, force,
                                              bsk__hopper_sddmm_tune.split_order ? 1 : 0, G,
                                              (int4 *)(w + off_items), (int *)(w + 64), (unsigned *)w,
                                              (int *)(w + off_ctr), bsk__hopper_sddmm_tune.groups_out);
    if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;

    if ((s = bsk_hopper_launch(sddmm_kernel<CF, DT>, grid, CF::THREADS, CF::SMEM, stream,
                               !bsk__hopper_sddmm_tune.no_pdl, 1, tmX, tmY, p)))
        return s;
    ctx->last_kernel = name;
    return BSK_SUCCESS;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

bsk_status bsk_hopper_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                            bsk_bsr *out)
{
    const struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major != 9 || st->cc_minor != 0) return BSK_ERR_UNSUPPORTED; /* sm_90a code only */
    const int b = out->block_rows;
    if (b != out->block_cols || (b != 64 && b != 128)) return BSK_ERR_UNSUPPORTED;
    if ((X->dtype != BSK_F16 && X->dtype != BSK_BF16) || Y->dtype != X->dtype) return BSK_ERR_UNSUPPORTED;
    if (out->dtype != BSK_F32 && out->dtype != X->dtype) return BSK_ERR_UNSUPPORTED;
    if (X->rows != out->rows || Y->rows != out->cols || Y->cols != X->cols) return BSK_ERR_UNSUPPORTED;
    if (X->cols < 1) return BSK_ERR_UNSUPPORTED; /* D = 0: nothing to load (X may be NULL); portable path */
    /* TMA: row strides multiples of 16 bytes, 16-byte aligned bases; the epilogue's pair stores (8 bytes for
       F32) want an aligned values array. */
    if ((X->ld * 2) % 16 || (Y->ld * 2) % 16 || !aligned16(X->data) || !aligned16(Y->data)) return BSK_ERR_UNSUPPORTED;
    if (out->nnzb == 0) return BSK_SUCCESS;
    if (!aligned16(out->values) || !out->row_ptr || !out->col_idx) return BSK_ERR_UNSUPPORTED;
    const int bf = X->dtype == BSK_BF16;
    if (b == 128)
        return bf ? launch<Cfg128, BSK_BF16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b128")
                  : launch<Cfg128, BSK_F16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b128");
    const int gb = bsk__hopper_sddmm_tune.b64_blocks == 4 || bsk__hopper_sddmm_tune.b64_blocks == 8
                       ? bsk__hopper_sddmm_tune.b64_blocks
                       : B64_BLOCKS_DEFAULT;
    if (gb == 8)
        return bf ? launch<Cfg64w, BSK_BF16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b64w")
                  : launch<Cfg64w, BSK_F16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b64w");
    return bf ? launch<Cfg64, BSK_BF16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b64")
              : launch<Cfg64, BSK_F16>(ctx, st, alpha, X, Y, beta, out, "hopper-sddmm-b64");
}
