/* balance_model.c — CPU model (session 28): how much of a few-items Hopper SpMM call (one item per CTA: direct mode,
   2048^3) a balanced split of the items could win back, on the library's own random patterns. No GPU.

   Why: at 2048^3 every kernel runs one item per CTA, so the call lasts as long as its longest item. The library's
   uniform patterns give every row the same block count, so their items hardly vary (the counters: longest CTA <= 1.06x
   the mean); skewed ones are decided by their few long rows (b32 NH 4: 2.6 / 1.9x at d 0.1 / 0.25).
   The default mode models K pieces: every CTA reads the whole (small) pattern, computes every item's length L_i and the
   same plan — a target T = ceil(alpha * W / P) work units per CTA (W = sum L_i, P CTAs); CTA i runs the first
   min(L_i, T) units of item i, and the items' excess (L_i - T) is cut into pieces that fill the other CTAs' spare room
   (T - L_j, and whole idle CTAs) in one merged prefix-sum order; a split item's parts each store an fp32 partial (cost
   S units), the last to finish adds the others (C units each) and runs the epilogue. Session 28 built it
   (docs/patches/s28_balance.patch) and measured a loss: S and C below are far too low (measured ~3-5 stages each), and
   the plan's prologue was not free — `--costs` sweeps both; `--parts` models column parts instead.

   Units: one stage of work at the size (b32: one union entry; b128: 64 of K; b64 pair: one union column). F (kernel
   entry to the first stage) and E (epilogue) in the same units, from session 27's cycle counters for b32 NH 1
   (9500 / 2000 cycles against ~800 per entry); S and C as one epilogue's worth (the first guess); the others are
   estimates. The output is the ratio of the longest CTA's work, current / balanced (the launch, ~2 us, is outside it).
   Build: make probes (or the one target build/bin/balance_model). Run: build/bin/balance_model [seeds], or
   build/bin/balance_model --costs [seeds] (session 28's measured costs against what a win needs), --parts [seeds]
   (column parts: long items cut along N, no partials). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bsk.h"

enum { P = 132 };

typedef struct {
    const char *name;
    int b, rows_per_item; /* block rows per item (their column union is the item's list) */
    int cols_per_item;    /* columns of C per item                                      */
    double units_per_col; /* stages per union column (b128: 2, a block is 128 of K)     */
    double F, E, S, C;    /* entry -> first stage, epilogue, partial store, one part's add */
} shape;

/* item lengths of one pattern: the union of rows_per_item rows' columns, per N tile (the same for each tile) */
static int item_lengths(const bsk_bsr *A, const shape *s, int64_t n, double *L)
{
    const int64_t mb = A->rows / A->block_rows, nb = A->cols / A->block_cols;
    const int64_t G = (mb + s->rows_per_item - 1) / s->rows_per_item, nt = (n + s->cols_per_item - 1) / s->cols_per_item;
    unsigned char *seen = calloc((size_t)nb, 1);
    int k = 0;
    for (int64_t g = 0; g < G; g++) {
        memset(seen, 0, (size_t)nb);
        int u = 0;
        for (int64_t r = g * s->rows_per_item; r < (g + 1) * s->rows_per_item && r < mb; r++)
            for (int32_t q = A->row_ptr[r]; q < A->row_ptr[r + 1]; q++)
                if (!seen[A->col_idx[q]]) seen[A->col_idx[q]] = 1, u++;
        for (int64_t t = 0; t < nt; t++) L[k++] = u * s->units_per_col;
    }
    free(seen);
    return k;
}

/* the longest CTA's work now (one item per CTA) and under the balanced plan at alpha; *split: items cut */
static void model(const double *L, int I, const shape *s, double alpha, double *cur, double *bal, int *split)
{
    double W = 0, mx = 0;
    for (int i = 0; i < I; i++) {
        W += L[i];
        if (L[i] > mx) mx = L[i];
    }
    *cur = s->F + mx + s->E;
    const double T = ceil(alpha * W / P);
    double load[P], ex[P], sp[P];
    int parts[P];
    for (int p = 0; p < P; p++) {
        load[p] = p < I ? fmin(L[p], T) : 0;
        ex[p] = p < I ? fmax(L[p] - T, 0) : 0;
        sp[p] = T - load[p];
        parts[p] = 1;
    }
    /* the excess stream (items in order) poured into the spare stream (CTAs in order) */
    int j = 0, cut = 0;
    for (int i = 0; i < I; i++) {
        double e = ex[i];
        if (e <= 0) continue;
        cut++;
        while (e > 1e-9 && j < P) {
            const double take = fmin(e, sp[j]);
            if (take > 1e-9) {
                load[j] += take + s->S; /* the piece's units and its partial store */
                parts[i]++;
                e -= take;
                sp[j] -= take;
            }
            if (sp[j] <= 1e-9) j++;
        }
        if (e > 1e-9) load[i] += e; /* no room left (alpha < 1): the owner keeps it */
    }
    double worst = 0;
    for (int p = 0; p < P; p++) {
        /* the owner of a split item stores its part too; the last part adds all of them (charged to the owner:
           the model does not know who finishes last) */
        const double w = load[p] + (p < I && parts[p] > 1 ? s->S + s->C * (parts[p] - 1) : 0) + (p < I ? s->E : 0);
        if (w > worst) worst = w;
    }
    *bal = s->F + worst;
    *split = cut;
}

/* --costs: b32 NH 4 skewed d 0.1 / 0.25 at alpha 1.15, the ratio now / balanced against the cost of a piece (S = C, in
   stages) and the plan's extra prologue (stages) — where session 28's build stood (measured: pieces ~3-5 stages, the
   prologue 5 more with nothing cut and ~16 more with cuts, at ~1500 cycles per NH 4 stage) and what a win needs */
static void costs(int seeds)
{
    static const double pc[5] = {0.5, 1.0, 2.0, 3.0, 4.0}, pro[4] = {0.0, 2.0, 5.0, 16.0};
    double *L = malloc(sizeof(double) * 4096);
    for (int di = 0; di < 2; di++) {
        printf("b32 NH4 skewed d %.2f, alpha 1.15: rows = piece cost S = C (stages), columns = extra prologue 0 / 2 / 5 / 16 "
               "stages\n", di ? 0.25 : 0.10);
        for (int a = 0; a < 5; a++) {
            printf("  S = C = %.1f:", pc[a]);
            for (int b = 0; b < 4; b++) {
                shape s = {"b32 NH4", 32, 2, 512, 1.0, 6.0, 1.25, pc[a], pc[a]};
                double r = 0;
                for (int sd = 0; sd < seeds; sd++) {
                    bsk_bsr A;
                    if (bsk_bsr_random(2048, 2048, 32, 32, di ? 0.25 : 0.10, BSK_PATTERN_SKEWED, 100 + sd, BSK_F16, &A)) exit(1);
                    const int I = item_lengths(&A, &s, 2048, L);
                    double cur, bal;
                    int cut;
                    model(L, I, &s, 1.15, &cur, &bal, &cut);
                    r += cur / (bal + pro[b]) / seeds;
                    bsk_bsr_free(&A);
                }
                printf(" %.2fx", r);
            }
            printf("\n");
        }
    }
    free(L);
}

/* --parts: column parts instead of K pieces (the design session 28 left for the next): a wide item longer than 1.25x
   the mean is cut along N into Q = 2 or 4 parts, each the whole K loop over its own columns at w(Q) of a full stage's
   cost (the per-stage fixed work stays; w = 0.6 / 0.4 for Q = 2 / 4, and 0.7 / 0.5 as a pessimistic case), with its own
   epilogue (E / Q); no partials. Parts and whole items are placed longest first on the least loaded CTA (every CTA builds
   its own lists, so any placement works), and only where that beats the uncut longest CTA. Prints the longest CTA now /
   with parts, and with 5 more prologue stages (a plan that costs more to read than direct mode's list build). */
static void parts(int seeds)
{
    static const double ds[3] = {0.10, 0.25, 0.50};
    static const double w2s[2] = {0.6, 0.7}, w4s[2] = {0.4, 0.5};
    double *L = malloc(sizeof(double) * 4096), *job = malloc(sizeof(double) * 4096 * 4);
    shape s = {"b32 NH4", 32, 2, 512, 1.0, 6.0, 1.25, 0, 0};
    for (int pat = 0; pat < 2; pat++)
        for (int di = 0; di < 3; di++) {
            double r[2][2] = {{0, 0}, {0, 0}};
            for (int sd = 0; sd < seeds; sd++) {
                bsk_bsr A;
                if (bsk_bsr_random(2048, 2048, 32, 32, ds[di], pat ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, 100 + sd,
                                   BSK_F16, &A))
                    exit(1);
                const int I = item_lengths(&A, &s, 2048, L);
                double mean = 0, mx = 0;
                for (int i = 0; i < I; i++) mean += L[i] / I, mx = fmax(mx, L[i]);
                const double cur = s.F + mx + s.E;
                for (int wc = 0; wc < 2; wc++) {
                    int nj = 0;
                    for (int i = 0; i < I; i++) {
                        const int Q = L[i] <= 1.25 * mean ? 1 : L[i] <= 2.5 * mean ? 2 : 4;
                        const double w = Q == 1 ? 1.0 : Q == 2 ? w2s[wc] : w4s[wc];
                        for (int q = 0; q < Q; q++) job[nj++] = L[i] * w + s.E / Q;
                    }
                    /* longest first onto the least loaded CTA */
                    for (int a = 1; a < nj; a++)
                        for (int b = a; b > 0 && job[b] > job[b - 1]; b--) {
                            const double x = job[b];
                            job[b] = job[b - 1];
                            job[b - 1] = x;
                        }
                    double load[P] = {0};
                    for (int j = 0; j < nj; j++) {
                        int m = 0;
                        for (int p = 1; p < P; p++)
                            if (load[p] < load[m]) m = p;
                        load[m] += job[j];
                    }
                    double worst = 0;
                    for (int p = 0; p < P; p++) worst = fmax(worst, load[p]);
                    /* the plan is taken only where its longest CTA beats the uncut one (every CTA can compute both) */
                    r[wc][0] += cur / fmin(cur, s.F + worst) / seeds;
                    r[wc][1] += cur / (5 + fmin(cur, s.F + worst)) / seeds;
                }
                bsk_bsr_free(&A);
            }
            printf("b32 NH4 %-7s d %.2f: now / column parts %.2fx (w 0.6 / 0.4), %.2fx (w 0.7 / 0.5); with 5 more prologue "
                   "stages %.2fx, %.2fx\n",
                   pat ? "skewed" : "uniform", ds[di], r[0][0], r[1][0], r[0][1], r[1][1]);
        }
    free(L);
    free(job);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--parts")) {
        parts(argc > 2 ? atoi(argv[2]) : 4);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--costs")) {
        costs(argc > 2 ? atoi(argv[2]) : 4);
        return 0;
    }
    const int seeds = argc > 1 ? atoi(argv[1]) : 4;
    const int64_t S_ = 2048;
    static const shape sh[] = {
        {"b32 NH1", 32, 8, 128, 1.0, 12.0, 2.5, 2.5, 2.5},
        {"b32 NH4", 32, 2, 512, 1.0, 6.0, 1.25, 1.25, 1.25},
        {"b16 NH1", 16, 16, 128, 1.0, 12.0, 2.5, 2.5, 2.5},
        {"b64 pair", 64, 2, 256, 1.0, 6.0, 1.5, 1.5, 1.5},
        {"b128", 128, 1, 256, 2.0, 6.0, 1.5, 1.5, 1.5},
    };
    static const double ds[3] = {0.10, 0.25, 0.50}, alphas[3] = {1.0, 1.15, 1.3};
    printf("2048^3, %d CTAs, mean over %d seeds: items, mean / max item (units), longest CTA now vs balanced (alpha "
           "1.0 / 1.15 / 1.3: ratio now / balanced, items split)\n", P, seeds);
    double *L = malloc(sizeof(double) * 4096);
    for (size_t q = 0; q < sizeof sh / sizeof sh[0]; q++)
        for (int pat = 0; pat < 2; pat++)
            for (int di = 0; di < 3; di++) {
                double mean = 0, mx = 0, r[3] = {0, 0, 0}, cuts[3] = {0, 0, 0};
                int I = 0;
                for (int sd = 0; sd < seeds; sd++) {
                    bsk_bsr A;
                    if (bsk_bsr_random(S_, S_, sh[q].b, sh[q].b, ds[di], pat ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM,
                                       100 + sd, BSK_F16, &A)) {
                        fprintf(stderr, "pattern failed\n");
                        return 1;
                    }
                    I = item_lengths(&A, &sh[q], S_, L);
                    double w = 0, m = 0;
                    for (int i = 0; i < I; i++) w += L[i], m = fmax(m, L[i]);
                    mean += w / I / seeds;
                    mx += m / seeds;
                    for (int a = 0; a < 3; a++) {
                        double cur, bal;
                        int cut;
                        model(L, I, &sh[q], alphas[a], &cur, &bal, &cut);
                        r[a] += cur / bal / seeds;
                        cuts[a] += (double)cut / seeds;
                    }
                    bsk_bsr_free(&A);
                }
                printf("%-9s %-7s d %.2f: %4d items, mean %6.1f max %6.1f | %.2fx (%5.1f) %.2fx (%5.1f) %.2fx (%5.1f)\n",
                       sh[q].name, pat ? "skewed" : "uniform", ds[di], I, mean, mx, r[0], cuts[0], r[1], cuts[1], r[2],
                       cuts[2]);
            }
    free(L);
    return 0;
}
