/* balance_plan.h — the balanced plan of a few-items call (session 28's design, docs/hopper-spmm-notes.md "Session 28";
   not used by a kernel yet: its host tests run in CI, tests/test_balance_plan.c).

   Why: in direct mode (one item per CTA, 2048^3) a call lasts as long as its longest item; on skewed rows that is 1.9-2.6x
   the mean CTA for b32 wide items (bench/results/small_balance_prof_probe_h200_2026-11-29_s28.txt). The plan keeps one
   item per CTA where items are near the mean and cuts only the long ones: CTA i runs the first T units of item i; the
   rest of each long item (its excess) is cut into pieces that fill the other CTAs' spare room (T - L_j, and whole idle
   CTAs), in one order — the excess of the items laid end to end against the spare of the CTAs laid end to end — so any
   CTA finds its own pieces by two binary searches, with no serial walk and no communication: every CTA computes the same
   plan from the same lengths. A split item's parts each leave an fp32 partial in their own slot; the last part to finish
   adds them in part order (kernel side, to come).

   Rules (bsk_plan_build): T = max(ceil(W / P), ceil(alpha% * W / P), 1) for W units in all; an item is split only if
   L > T + M, M = T / 4 (items a little over T stay whole: at alpha 1.15 no item of the library's uniform patterns is cut,
   bench/balance_model.c). Since T >= W / P the spare room always holds the excess. A CTA gets at most BSK_PLAN_MAX_SEGS
   segments: every piece but the first and last of a spare stretch is a whole excess of more than M units.

   Plain C: the host (tests) and the device (nvcc: __host__ __device__) run the same code. */
#ifndef BSK_HOPPER_BALANCE_PLAN_H
#define BSK_HOPPER_BALANCE_PLAN_H

#ifdef __CUDACC__
#define BSK_PLAN_FN static __host__ __device__ __forceinline__
#else
#define BSK_PLAN_FN static inline
#endif

enum { BSK_PLAN_MAX_SEGS = 8 };

/* One segment of a CTA's work: units [first, end) of item `item`, part `part` of `parts` (parts 1: the whole item, slot
   -1; else slot = the partial's slot, distinct for every (item, part) of the call, below bsk_plan.nslots). */
typedef struct {
    int item, first, end, part, parts, slot;
} bsk_plan_seg;

/* The plan's arrays (the device builds them with scans; bsk_plan_build does it serially). */
typedef struct {
    const int *len;  /* [I] item lengths in units                                                 */
    const int *xpre; /* [I + 1] excess prefix: xpre[i + 1] - xpre[i] = item i's excess (0: whole) */
    const int *cta;  /* [K] the CTAs with spare room, ascending                                    */
    const int *ypre; /* [K + 1] their spare prefix (strictly increasing)                          */
    const int *spre; /* [I + 1] slot prefix: spre[i + 1] - spre[i] = item i's parts if split, else 0 */
    int I, P, K, T, M, nslots;
} bsk_plan;

/* the last k with a[k] <= x, for a[0] <= x, a ascending over [0, n] */
BSK_PLAN_FN int bsk_plan_floor(const int *a, int n, int x)
{
    int lo = 0, hi = n; /* a[lo] <= x; answer in [lo, hi] */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (a[mid] <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* item i's parts (1: not split) and its first piece's spare stretch */
BSK_PLAN_FN int bsk_plan_parts(const bsk_plan *pl, int i, int *kf)
{
    const int x0 = pl->xpre[i], x1 = pl->xpre[i + 1];
    if (x1 == x0) return 1;
    *kf = bsk_plan_floor(pl->ypre, pl->K, x0);
    return 2 + bsk_plan_floor(pl->ypre, pl->K, x1 - 1) - *kf;
}

/* CTA p's segments into out[0 ..]: its own item's head first (p < I), then its pieces in the excess order. Returns
   the count (<= BSK_PLAN_MAX_SEGS; an empty item is one segment of no units: its epilogue still writes C). */
BSK_PLAN_FN int bsk_plan_segments(const bsk_plan *pl, int p, bsk_plan_seg *out)
{
    int n = 0;
    if (p < pl->I) {
        int kf = 0;
        const int parts = bsk_plan_parts(pl, p, &kf);
        bsk_plan_seg s = {p, 0, parts > 1 ? pl->T : pl->len[p], 0, parts, parts > 1 ? pl->spre[p] : -1};
        out[n++] = s;
    }
    if (pl->K == 0 || p < pl->cta[0] || p > pl->cta[pl->K - 1]) return n;
    const int k = bsk_plan_floor(pl->cta, pl->K - 1, p);
    if (pl->cta[k] != p) return n;
    const int y0 = pl->ypre[k], y1 = pl->ypre[k + 1];
    /* the first item whose excess ends past y0: xpre[i + 1] > y0 */
    int i = y0 < pl->xpre[pl->I] ? bsk_plan_floor(pl->xpre, pl->I, y0) : pl->I;
    for (; i < pl->I && pl->xpre[i] < y1 && n < BSK_PLAN_MAX_SEGS; ++i) {
        const int x0 = pl->xpre[i], x1 = pl->xpre[i + 1];
        if (x1 <= y0 || x1 == x0) continue;
        int kf = 0;
        const int parts = bsk_plan_parts(pl, i, &kf), q = 1 + k - kf;
        const int a = x0 > y0 ? x0 : y0, b = x1 < y1 ? x1 : y1;
        bsk_plan_seg s = {i, pl->T + a - x0, pl->T + b - x0, q, parts, pl->spre[i] + q};
        out[n++] = s;
    }
    return n;
}

/* Serial construction (tests, and the reference of the device's scans): len[I] in, the arrays out (xpre and spre of
   I + 1 ints, cta and ypre of P and P + 1), alpha in percent (>= 100). Returns the target T. */
BSK_PLAN_FN int bsk_plan_build(const int *len, int I, int P, int alpha_pct, int *xpre, int *cta, int *ypre, int *spre,
                               bsk_plan *pl)
{
    long long W = 0;
    for (int i = 0; i < I; ++i) W += len[i] > 0 ? len[i] : 0;
    long long T = (W + P - 1) / P;
    const long long Ta = (W * alpha_pct + 100LL * P - 1) / (100LL * P);
    if (Ta > T) T = Ta;
    if (T < 1) T = 1;
    const int M = (int)(T / 4);
    xpre[0] = 0;
    for (int i = 0; i < I; ++i) xpre[i + 1] = xpre[i] + (len[i] > T + M ? len[i] - (int)T : 0);
    int K = 0;
    ypre[0] = 0;
    for (int j = 0; j < P; ++j) {
        const int spare = j >= I ? (int)T : xpre[j + 1] > xpre[j] || len[j] >= T ? 0 : (int)T - (len[j] > 0 ? len[j] : 0);
        if (spare > 0) {
            cta[K] = j;
            ypre[K + 1] = ypre[K] + spare;
            ++K;
        }
    }
    pl->len = len;
    pl->xpre = xpre;
    pl->cta = cta;
    pl->ypre = ypre;
    pl->spre = spre;
    pl->I = I;
    pl->P = P;
    pl->K = K;
    pl->T = (int)T;
    pl->M = M;
    spre[0] = 0;
    for (int i = 0; i < I; ++i) {
        int kf = 0;
        const int parts = bsk_plan_parts(pl, i, &kf);
        spre[i + 1] = spre[i] + (parts > 1 ? parts : 0);
    }
    pl->nslots = spre[I];
    return (int)T;
}

#endif
