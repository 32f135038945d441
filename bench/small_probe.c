/* small_probe.c — device probe for the small-block Hopper SpMM (b = 32 / 16, spmm_small_*): cuBLAS dense vs bsk_spmm
   at M = N = K (default 8192), fp16 in / out, uniform pattern, with the kernel's knobs (variant, diag, max_ctas).
   Timing: CUDA events around one call, 3 warm-ups, median of ITERS, L2 flushed (256 MB memset) before each timed
   call. Each variant's result (diag 0) is checked against cuBLAS on the densified A at full size. With --prof (a
   -DBSK_SMALL_PROF build) one more call prints the kernel's cycle counters summed over the CTAs.
   Sets: --cross (the default vs the portable kernel at low densities, and 2048^3), --ab (variants 3 / 0 / 4 / 1 / 2
   alternated, b 32 and 16, d .1 .25 .5), --diag (consumers idle / no loads), --small2048 (2048^3 b32 variants),
   --rg (rows per wgmma: 1 and the grouped shapes alternated, 8192^3 b 32 / 16 and 2048^3 b32, d .1 .25 .5),
   --rgdiag (rows per wgmma 1 vs grouped with the consumers idle / no loads, and on 66 CTAs), --run2 (session 9 run 2:
   b32 k16-steps-outer experiment (variants 5 / 6) vs RG 1 / 2 / the default; 2048^3 b16 RG 1 / 4 / 16 / default;
   8192^3 b16 default vs portable at low densities), --alias (session 12: the aliased-A-slot timing build, variant 7,
   vs the default at b32 d .05 .1 .25 .5), --compact (session 12: the compact-pair stages — the default below d 0.3 —
   vs the previous default (variant 9) and compact pairs without overflow slots (variant 8)), --zt (session 13: the
   absent-row slots of grouped wgmmas zeroed by TMA vs by stores, b32 and b16), --ts (session 16: the TMA-store
   epilogue vs the fp32-staged one, b32 / b16 at 8192^3 and 2048^3), --prep (session 16: the whole call vs the two
   prep kernels alone vs the call without PDL), --wide (session 19: wide items, knob wide 1 / 2 / 4, alternated),
   --box3d (session 19: b32 NH 4 with one 3-D B box per entry vs eight 2-D boxes, knob b_box3d, alternated), --direct
   (session 27: direct mode vs the prep kernels vs the pattern cache at 2048^3, and wide items with direct mode),
   --balance (session 28, with --prof: the longest CTA against the mean at 2048^3 b32, NH 1 / 4, uniform / skewed).
   Built and run by bench/small_probe.sh on the device machine. Helpers: bench/probe_util.h. */
#include "probe_util.h"

#include "cuda/hopper/spmm_small_tune.h"

static int64_t S_ = 8192;
static int ITERS = 20;
static void *flush_buf;
static const size_t FLUSH = 256u << 20;
static cudaEvent_t ev0, ev1;
static double time_it(probe_fn f, void *arg) { return probe_time(f, arg, ITERS, flush_buf, FLUSH, ev0, ev1, NULL); }


/* SP_* indices of spmm_small_kernel.cuh */
enum { P_TOTAL, P_EMPTY, P_STAGES, P_ENTRIES, P_BLOCKS, C_TOTAL, C_WAIT, C_MMA, C_EPI, C_STAGES, C_WAITED, LAT_WAITED,
       LAT_ALL, C_ITEMS, PRO, FIRST };
static void print_prof(probe_spmm_arg *sa, char *out, size_t cap)
{
    double t[16], mx[16], span;
    CK(cudaMemset(flush_buf, 1, FLUSH)); /* the counted call after an L2 flush too (session 27) */
    probe_counter_sums(probe_run_spmm, sa, &bsk__hopper_small_tune.prof, t, mx, PRO, C_TOTAL, &span);
    const int ctas = bsk__hopper_small_tune.out_grid > 0 ? bsk__hopper_small_tune.out_grid : 1;
    const double st = t[P_STAGES] > 0 ? t[P_STAGES] : 1, cs = t[C_STAGES] > 0 ? t[C_STAGES] : 1;
    snprintf(out, cap,
             "prof: entries/stage %.2f blocks/entry %.2f | cyc/stage: producer %.0f (empty-wait %.0f) consumer0 %.0f "
             "(full-wait %.0f, mma %.0f) | epi/item %.0f | issue->seen latency %.0f (when waited: %.0f, %.0f%% of stages) | "
             "per CTA: entry->producer %.0f, entry->first stage %.0f, producer %.0f, consumer0 %.0f cyc | "
             "largest of a CTA (session 28): stages %.0f, entry->producer + consumer0 %.0f cyc",
             t[P_ENTRIES] / st, t[P_ENTRIES] > 0 ? t[P_BLOCKS] / t[P_ENTRIES] : 0, t[P_TOTAL] / st, t[P_EMPTY] / st,
             t[C_TOTAL] / cs, t[C_WAIT] / cs, t[C_MMA] / cs, t[C_ITEMS] > 0 ? t[C_EPI] / t[C_ITEMS] : 0, t[LAT_ALL] / cs,
             t[C_WAITED] > 0 ? t[LAT_WAITED] / t[C_WAITED] : 0, 100 * t[C_WAITED] / cs, t[PRO] / ctas, t[FIRST] / ctas,
             t[P_TOTAL] / ctas, t[C_TOTAL] / ctas, mx[C_STAGES], span);
}

typedef struct {
    int b;
    double d;
    int v, diag, maxc;
    int64_t size;
    int rg; /* rows_per_mma (0: the default) */
    int zt; /* zero_tma knob (0: the default) */
    int ed; /* epi_direct knob: 1 the fp32-staged epilogue instead of the TMA-store one (session 16) */
    int po; /* 1: prep_only (the two prep kernels alone), 2: no_pdl (session 16) */
    int nh; /* wide knob (0: the default; session 19) */
    int b2; /* b_box3d knob: 1 the 2-D B boxes (session 19) */
    int dm; /* direct knob (session 27): 0 the default, -1 off (the prep kernels) */
    int pc; /* 1: the pattern cache on (session 27) */
    int sk; /* 1: the skewed pattern */
} cfg;

int main(int argc, char **argv)
{
    int ab = 0, diag = 0, prof = 0, s2048 = 0, cross = 0, rgs = 0, rgdiag = 0, run2 = 0, alias = 0, compact = 0, zt = 0,
        ts = 0, prep = 0, wide = 0, box3d = 0, direct = 0, balance = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ab")) ab = 1;
        else if (!strcmp(argv[i], "--diag")) diag = 1;
        else if (!strcmp(argv[i], "--prof")) prof = 1;
        else if (!strcmp(argv[i], "--small2048")) s2048 = 1;
        else if (!strcmp(argv[i], "--cross")) cross = 1; /* the default vs the portable kernel (variant -1) */
        else if (!strcmp(argv[i], "--rg")) rgs = 1;
        else if (!strcmp(argv[i], "--rgdiag")) rgdiag = 1;
        else if (!strcmp(argv[i], "--run2")) run2 = 1;
        else if (!strcmp(argv[i], "--alias")) alias = 1;
        else if (!strcmp(argv[i], "--compact")) compact = 1;
        else if (!strcmp(argv[i], "--zt")) zt = 1;
        else if (!strcmp(argv[i], "--ts")) ts = 1;
        else if (!strcmp(argv[i], "--prep")) prep = 1;
        else if (!strcmp(argv[i], "--wide")) wide = 1;
        else if (!strcmp(argv[i], "--box3d")) box3d = 1;
        else if (!strcmp(argv[i], "--direct")) direct = 1;
        else if (!strcmp(argv[i], "--directprof")) direct = 2; /* with --prof, in a -DBSK_SMALL_PROF build */
        else if (!strcmp(argv[i], "--balance")) balance = 1; /* session 28, with --prof in a -DBSK_SMALL_PROF build */
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) ITERS = atoi(argv[++i]);
    }
    if (ITERS < 1 || ITERS > 256) ITERS = 20;
    bsk_device_info info;
    CS(bsk_device_query(&info));
    printf("device: %s, %d SMs; median of %d, L2 flushed\n", info.name, info.multiprocessors, ITERS);
    cublasHandle_t h;
    bsk_context *ctx;
    probe_setup(&flush_buf, FLUSH, &ev0, &ev1, &h, &ctx);
    const size_t nn = (size_t)(S_ * S_);
    uint16_t *hbuf = (uint16_t *)malloc(nn * 2), *hC = (uint16_t *)malloc(nn * 2);
    float *hR = (float *)malloc(nn * 4);
    void *dA, *dB, *dC, *dR;
    CK(cudaMalloc(&dA, nn * 2));
    CK(cudaMalloc(&dB, nn * 2));
    CK(cudaMalloc(&dC, nn * 2));
    CK(cudaMalloc(&dR, nn * 4));
    probe_fill_rand16(hbuf, nn, 0);
    CK(cudaMemcpy(dB, hbuf, nn * 2, cudaMemcpyHostToDevice));
    double dense[2] = {0, 0};
    for (int q = 0; q < 2; q++) {
        S_ = q ? 2048 : 8192;
        probe_fill_rand16(hbuf, (size_t)(S_ * S_), 0);
        CK(cudaMemcpy(dA, hbuf, (size_t)(S_ * S_) * 2, cudaMemcpyHostToDevice));
        probe_gemm_arg g = {h, S_, S_, S_, CUDA_R_16F, CUDA_R_16F, dA, dB, dC};
        double ms = time_it(probe_run_gemm, &g);
        dense[q] = 2.0 * S_ * S_ * S_ / (ms * 1e-3) * 1e-12;
        printf("cuBLAS fp16 %lld^3: %.3f ms %.1f TFLOPS\n", (long long)S_, ms, dense[q]);
    }

    cfg cs[300];
    int nc = 0;
#define ADD(...) (cs[nc++] = (cfg){__VA_ARGS__})
    const double ds[3] = {0.10, 0.25, 0.50};
    if (diag) {
        for (int bi = 0; bi < 2; bi++) {
            const int b = bi ? 16 : 32;
            for (int dg = 0; dg < 4; dg++) {
                if (dg == 2) continue;
                ADD(.b = b, .d = 0.10, .v = 3, .diag = dg, .size = 8192);
                ADD(.b = b, .d = 0.10, .v = 0, .diag = dg, .size = 8192);
            }
            ADD(.b = b, .d = 0.50, .v = 3, .size = 8192);
            ADD(.b = b, .d = 0.50, .v = 0, .size = 8192);
            ADD(.b = b, .d = 0.50, .v = 0, .diag = 1, .size = 8192);
        }
        ADD(.b = 32, .d = 0.25, .v = 3, .maxc = 66, .size = 8192);
        ADD(.b = 32, .d = 0.25, .v = 0, .maxc = 66, .size = 8192);
    }
    if (cross) { /* where the portable kernel (v -1) overtakes the default, alternated -1 0 0 -1 */
        const double c32[4] = {0.04, 0.06, 0.08, 0.10}, c16[4] = {0.10, 0.13, 0.16, 0.20};
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 4; di++)
                for (int k = 0; k < 4; k++)
                    ADD(.b = bi ? 16 : 32, .d = bi ? c16[di] : c32[di], .v = k == 0 || k == 3 ? -1 : 0, .size = 8192);
        for (int di = 0; di < 3; di++) /* 2048^3 b32: 128 items, the small-shape rule's side */
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = ds[di], .v = k == 0 || k == 3 ? -1 : 0, .size = 2048);
    }
    const int order[10] = {3, 0, 4, 1, 2, 2, 1, 4, 0, 3}; /* alternated: 0 default (4 producer warps), 3 / 4 one / two */
    if (ab) {
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 3; di++)
                for (int k = 0; k < 10; k++) ADD(.b = bi ? 16 : 32, .d = ds[di], .v = order[k], .size = 8192);
    }
    if (rgs) { /* rows per wgmma, alternated 1 a b c c b a 1 (b32: 2 4 8, b16: 4 8 16) */
        const int o32[8] = {1, 2, 4, 8, 8, 4, 2, 1}, o16[8] = {1, 4, 8, 16, 16, 8, 4, 1};
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 3; di++)
                for (int k = 0; k < 8; k++) ADD(.b = bi ? 16 : 32, .d = ds[di], .rg = bi ? o16[k] : o32[k], .size = 8192);
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 8; k++) ADD(.b = 32, .d = ds[di], .rg = o32[k], .size = 2048);
    }
    if (rgdiag) { /* where the time goes with rows grouped: consumers idle (diag 1), no loads (diag 3), 66 CTAs */
        for (int bi = 0; bi < 2; bi++) {
            const int b = bi ? 16 : 32, g = bi ? 8 : 4;
            for (int di = 0; di < 3; di += 2)
                for (int k = 0; k < 2; k++) {
                    ADD(.b = b, .d = ds[di], .rg = k ? g : 1, .size = 8192);
                    ADD(.b = b, .d = ds[di], .rg = k ? g : 1, .diag = 1, .size = 8192);
                }
            ADD(.b = b, .d = 0.10, .rg = g, .diag = 3, .size = 8192);
            ADD(.b = b, .d = 0.25, .rg = 1, .maxc = 66, .size = 8192);
            ADD(.b = b, .d = 0.25, .rg = g, .maxc = 66, .size = 8192);
        }
    }
    if (run2) {
        /* b32 8192^3: {v, rg} = RG 1, RG 2, RG 2 k16 outer (v5), RG 4 k16 outer (v6), the default; alternated */
        const int kv[5] = {0, 0, 5, 6, 0}, kr[5] = {1, 2, 0, 0, 0};
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 10; k++) {
                const int x = k < 5 ? k : 9 - k;
                ADD(.b = 32, .d = ds[di], .v = kv[x], .rg = kr[x], .size = 8192);
            }
        /* b16 2048^3: RG 1 / 4 / 16 / the default, alternated */
        const int g16[8] = {1, 4, 16, 0, 0, 16, 4, 1};
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 8; k++) ADD(.b = 16, .d = ds[di], .rg = g16[k], .size = 2048);
        /* b16 8192^3 at low densities: the portable kernel (v -1) vs the default, alternated -1 0 0 -1 */
        const double c16[4] = {0.03, 0.04, 0.05, 0.07};
        for (int di = 0; di < 4; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 16, .d = c16[di], .v = k == 0 || k == 3 ? -1 : 0, .size = 8192);
    }
    if (alias) { /* session 12: variant 7 (the A slots of a stage's two entries aliased: 32 KB stages, 6 deep; results
                    wrong, timing only) vs the default, alternated 0 7 7 0, b32 8192^3 */
        const double da[4] = {0.05, 0.10, 0.25, 0.50};
        for (int di = 0; di < 4; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = da[di], .v = k == 1 || k == 2 ? 7 : 0, .rg = 2, .size = 8192);
    }
    if (compact) { /* session 12: the compact-pair stages, alternated, b32 8192^3 */
        const double da[4] = {0.05, 0.10, 0.25, 0.50};
        const int vo[6] = {0, 9, 8, 8, 9, 0}; /* 0: compact pairs + 4 overflow slots (the default below d 0.3), 9: the
                                                 previous default, 8: compact pairs without overflow slots */
        for (int di = 0; di < 4; di++)
            for (int k = 0; k < 6; k++) ADD(.b = 32, .d = da[di], .v = vo[k], .size = 8192);
    }
    if (zt) { /* session 13: the absent-row slots zeroed by TMA (zero_tma 2, the default) vs by the producer's stores
                 (1), alternated 1 2 2 1; b32 8192^3 at the compact-pair densities, b16 8192^3 (4 rows per wgmma
                 below d 0.2, all 16 above), b32 with 4 rows per wgmma at the MoE-like low densities */
        const double da[3] = {0.05, 0.10, 0.25}, d16[4] = {0.05, 0.10, 0.25, 0.50};
        const int zz[4] = {1, 2, 2, 1};
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = da[di], .zt = zz[k], .size = 8192);
        for (int di = 0; di < 4; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 16, .d = d16[di], .zt = zz[k], .size = 8192);
        for (int k = 0; k < 4; k++) ADD(.b = 32, .d = 0.10, .rg = 4, .zt = zz[k], .size = 8192);
    }
    if (ts) { /* session 16: the TMA-store epilogue (ed 0, the default for fp16 C, beta 0) vs the fp32-staged one (ed 1),
                 alternated 1 0 0 1; b32 / b16 at 8192^3 and 2048^3 */
        const int ee[4] = {1, 0, 0, 1};
        for (int si = 0; si < 2; si++)
            for (int bi = 0; bi < 2; bi++)
                for (int di = 0; di < 3; di++)
                    for (int k = 0; k < 4; k++) ADD(.b = bi ? 16 : 32, .d = ds[di], .ed = ee[k], .size = si ? 2048 : 8192);
    }
    if (prep) { /* session 16: what the per-call prep costs — the whole call, the two prep kernels alone, the call
                   without PDL; 2048^3 (one item per CTA) and 8192^3, b32 / b16 */
        const int pp[6] = {0, 1, 2, 2, 1, 0};
        for (int si = 0; si < 2; si++)
            for (int bi = 0; bi < 2; bi++)
                for (int di = 0; di < 3; di += si ? 2 : 1)
                    for (int k = 0; k < 6; k++) ADD(.b = bi ? 16 : 32, .d = ds[di], .po = pp[k], .size = si ? 8192 : 2048);
    }
    if (wide) { /* session 19: wide items (knob wide: 1 / 2 / 4 halves per consumer) alternated; b32 8192^3 and 2048^3,
                   b16 8192^3 (the NH 2 compact-pair / 2-rows / one-entry b32 shapes of runs 1-2 were removed) */
        const double da[5] = {0.05, 0.10, 0.25, 0.40, 0.50};
        const int w32[4] = {1, 4, 4, 1}, w16[6] = {1, 2, 4, 4, 2, 1};
        for (int di = 0; di < 5; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = da[di], .nh = w32[k], .size = 8192);
        for (int di = 0; di < 5; di++)
            for (int k = 0; k < 6; k++) ADD(.b = 16, .d = da[di], .nh = w16[k], .size = 8192);
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = ds[di], .nh = w32[k], .size = 2048);
    }
    if (box3d) { /* session 19: b32 NH 4, 2-D boxes (b2 1) vs one 3-D box (b2 0), alternated 1 0 0 1 */
        const double da[4] = {0.05, 0.10, 0.25, 0.30};
        const int bb[4] = {1, 0, 0, 1};
        for (int di = 0; di < 4; di++)
            for (int k = 0; k < 4; k++) ADD(.b = 32, .d = da[di], .nh = 4, .b2 = bb[k], .size = 8192);
    }
    if (direct == 2) { /* session 27: where the direct mode's time goes against the cached lists (its 2 us more at
                          2048^3 b32): the cycle counters, prep / direct / cached, b32 d .1 .25, b16 d .1 */
        const int dd[3] = {-1, 0, 0}, pcs[3] = {0, 0, 1};
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 3; k++) ADD(.b = di == 2 ? 16 : 32, .d = ds[di == 1], .dm = dd[k], .pc = pcs[k], .size = 2048);
    }
    if (direct == 1) { /* session 27: direct mode (no prep kernels; each CTA builds its item's list) vs the prep (dm -1), A B
                     B A, and the pattern cache's lists (pc 1) once, at 2048^3 (one item per CTA): b32 / b16 uniform d .1
                     .25 .5, b32 skewed d .1 .25; then b32 wide items (NH 4) with direct mode, uniform and skewed, against
                     the default NH 1 (both direct). Predicted: direct up to the cached speed (+13-21 % b32, session
                     16); NH 4 +20 % uniform, a loss on skewed rows (session 19) */
        const int dd[4] = {-1, 0, 0, -1};
        for (int sk = 0; sk < 2; sk++)
            for (int bi = 0; bi < 2 - sk; bi++)
                for (int di = 0; di < 3 - sk; di++) {
                    for (int k = 0; k < 4; k++) ADD(.b = bi ? 16 : 32, .d = ds[di], .dm = dd[k], .sk = sk, .size = 2048);
                    ADD(.b = bi ? 16 : 32, .d = ds[di], .pc = 1, .sk = sk, .size = 2048);
                }
        const int ww[4] = {1, 4, 4, 1};
        for (int sk = 0; sk < 2; sk++)
            for (int di = 0; di < 2; di++)
                for (int k = 0; k < 4; k++) ADD(.b = 32, .d = ds[di], .nh = ww[k], .sk = sk, .size = 2048);
        /* 8192^3 (more items than CTAs: the prep as before; the list now read by plain loads): against session 26 */
        for (int di = 0; di < 3; di++) ADD(.b = 32, .d = ds[di], .size = 8192);
        ADD(.b = 16, .d = 0.10, .size = 8192);
    }
    if (balance) { /* session 28: how long the longest CTA runs against the mean, and what an entry costs, at 2048^3 b32
                      (direct mode, one item per CTA) — NH 1 / 4 x uniform / skewed x d .1 .25: the data for
                      bench/balance_model.c (the balanced mode built on it: docs/patches/s28_balance.patch, a loss) */
        for (int sk = 0; sk < 2; sk++)
            for (int di = 0; di < 2; di++)
                for (int k = 0; k < 2; k++) ADD(.b = 32, .d = ds[di], .nh = k ? 4 : 1, .sk = sk, .size = 2048);
    }
    if (s2048) {
        for (int di = 0; di < 3; di++)
            for (int k = 0; k < 10; k++) ADD(.b = 32, .d = ds[di], .v = order[k], .size = 2048);
    }
#undef ADD
    char table[300][900];
    int nt = 0;
    bsk_bsr hA, A;
    int have = 0, hb = 0, hsk = 0;
    double hd = 0;
    int64_t hs = 0;
    for (int ci = 0; ci < nc; ci++) {
        const cfg c = cs[ci];
        S_ = c.size;
        const size_t n2 = (size_t)(S_ * S_);
        if (!have || hb != c.b || hd != c.d || hs != c.size || hsk != c.sk) { /* one pattern per (b, d, size, skew) */
            if (have) {
                bsk_bsr_free(&A);
                bsk_bsr_free(&hA);
            }
            CS(bsk_bsr_random(S_, S_, c.b, c.b, c.d, c.sk ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                              4242 + (uint64_t)(c.b * 10 + c.d * 100 + c.size), BSK_F16, &hA));
            CS(bsk_bsr_clone(&hA, BSK_MEM_DEVICE, &A));
            have = 1, hb = c.b, hd = c.d, hs = c.size, hsk = c.sk;
            /* the reference: cuBLAS on the densified A, fp32 out */
            bsk_dense hD = {S_, S_, S_, BSK_F16, BSK_MEM_HOST, hbuf};
            CS(bsk_bsr_to_dense(&hA, &hD));
            CK(cudaMemcpy(dA, hbuf, n2 * 2, cudaMemcpyHostToDevice));
            probe_gemm_arg g = {h, S_, S_, S_, CUDA_R_16F, CUDA_R_32F, dA, dB, dR};
            probe_run_gemm(&g);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hR, dR, n2 * 4, cudaMemcpyDeviceToHost));
        }
        bsk__hopper_small_tune.force = 1;
        bsk__hopper_small_tune.variant = c.v;
        bsk__hopper_small_tune.diag = c.diag;
        bsk__hopper_small_tune.max_ctas = c.maxc;
        bsk__hopper_small_tune.rows_per_mma = c.rg;
        bsk__hopper_small_tune.zero_tma = c.zt;
        bsk__hopper_small_tune.epi_direct = c.ed;
        bsk__hopper_small_tune.prep_only = c.po == 1;
        bsk__hopper_small_tune.no_pdl = c.po == 2;
        bsk__hopper_small_tune.wide = c.nh;
        bsk__hopper_small_tune.b_box3d = c.b2;
        bsk__hopper_small_tune.direct = c.dm;
        CS(bsk_set_pattern_cache(ctx, c.pc));
        bsk_dense B = {S_, S_, S_, BSK_F16, BSK_MEM_DEVICE, dB}, C = {S_, S_, S_, BSK_F16, BSK_MEM_DEVICE, dC};
        probe_spmm_arg sa = {ctx, &A, &B, &C};
        double err = -1;
        CK(cudaMemset(dC, 0xff, n2 * 2)); /* NaN poison */
        probe_run_spmm(&sa);
        CS(bsk_synchronize(ctx));
        const char *kern = bsk_last_kernel(ctx);
        if (!c.diag && !c.po) {
            CK(cudaMemcpy(hC, dC, n2 * 2, cudaMemcpyDeviceToHost));
            double num = 0, den = 0;
            for (size_t i = 0; i < n2; i++) {
                const double got = probe_h2f(hC[i]), r = hR[i];
                num += (got - r) * (got - r);
                den += r * r;
            }
            err = den > 0 ? sqrt(num / den) : sqrt(num);
            if (!(err < 5e-3)) printf("WRONG RESULT: b %d d %.2f v %d rel err %.3e\n", c.b, c.d, c.v, err);
        }
        const double ms = time_it(probe_run_spmm, &sa);
        const double tf = 2.0 * (double)A.nnzb * c.b * c.b * (double)S_ / (ms * 1e-3) * 1e-12;
        snprintf(table[nt], 260, "%5lld %3d %5.3f%s v%d rg %2d nh %d zt %d ed %d po %d diag %d ctas %3d prep %d | %8.4f ms %7.1f TFLOPS E %.3f err %9.2e %s",
                 (long long)S_, c.b, c.d, c.sk ? " sk" : "", c.v, c.rg, bsk__hopper_small_tune.out_nh, c.zt, c.ed, c.po, c.diag,
                 c.maxc ? c.maxc : bsk__hopper_small_tune.out_grid, bsk__hopper_small_tune.out_prep, ms, tf,
                 tf / dense[S_ == 2048], err, kern);
        printf("%s\n", table[nt]);
        if (prof) {
            char pl[600];
            print_prof(&sa, pl, sizeof pl);
            printf("      %s\n", pl);
            strncat(table[nt], "\n      ", sizeof table[0] - strlen(table[nt]) - 1);
            strncat(table[nt], pl, sizeof table[0] - strlen(table[nt]) - 1);
        }
        nt++;
        fflush(stdout);
        bsk__hopper_small_tune.diag = 0;
        bsk__hopper_small_tune.max_ctas = 0;
        bsk__hopper_small_tune.variant = 0;
        bsk__hopper_small_tune.rows_per_mma = 0;
        bsk__hopper_small_tune.zero_tma = 0;
        bsk__hopper_small_tune.epi_direct = 0;
        bsk__hopper_small_tune.prep_only = 0;
        bsk__hopper_small_tune.no_pdl = 0;
        bsk__hopper_small_tune.wide = 0;
        bsk__hopper_small_tune.b_box3d = 0;
        bsk__hopper_small_tune.direct = 0;
        CS(bsk_set_pattern_cache(ctx, 0));
    }
    if (have) {
        bsk_bsr_free(&A);
        bsk_bsr_free(&hA);
    }
    printf("\n== summary (cuBLAS fp16 8192^3 %.1f, 2048^3 %.1f TFLOPS; %s)\n", dense[0], dense[1], info.name);
    for (int i = 0; i < nt; i++) printf("%s\n", table[i]);
    bsk_destroy(ctx);
    cublasDestroy(h);
    return 0;
}
