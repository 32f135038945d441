/* test_balance_plan.c — the balanced plan of a few-items call (src/cuda/hopper/balance_plan.h), on the host: every
   item's units covered exactly once by its segments over all CTAs, parts numbered 0 .. parts - 1 once each and agreeing
   on their count, partial slots distinct and in range, no CTA over T + M units or BSK_PLAN_MAX_SEGS segments, unsplit
   items whole on their own CTA — for random lengths (uniform, skewed, a few giants, zeros), every CTA count from the
   item count up, and three targets. */
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "cuda/hopper/balance_plan.h"

static void check_plan(bsk_test_ctx *t, const int *len, int I, int P, int alpha)
{
    int xpre[257], cta[260], ypre[261], spre[257];
    bsk_plan pl;
    const int T = bsk_plan_build(len, I, P, alpha, xpre, cta, ypre, spre, &pl);
    long long W = 0;
    for (int i = 0; i < I; i++) W += len[i];
    CHECK(T >= 1 && (long long)T * P >= W);
    /* per item: units covered, parts seen */
    static unsigned char cover[256][512];
    static int parts_of[256], seen_parts[256][256];
    static int slot_used[1024];
    memset(cover, 0, sizeof cover);
    memset(seen_parts, 0, sizeof seen_parts);
    memset(slot_used, 0, sizeof slot_used);
    for (int i = 0; i < I; i++) parts_of[i] = -1;
    int bad = 0;
    for (int p = 0; p < P; p++) {
        bsk_plan_seg s[BSK_PLAN_MAX_SEGS];
        const int n = bsk_plan_segments(&pl, p, s);
        if (n > BSK_PLAN_MAX_SEGS) bad++;
        int load = 0;
        for (int k = 0; k < n; k++) {
            const bsk_plan_seg g = s[k];
            if (g.item < 0 || g.item >= I || g.first < 0 || g.end < g.first || g.end > len[g.item] || g.part < 0 ||
                g.part >= g.parts || g.parts > 256) {
                bad++;
                continue;
            }
            if (k == 0 && p < I && g.item != p) bad++; /* the own item's head first */
            if (g.parts == 1 && (g.slot != -1 || g.first != 0 || g.end != len[g.item] || p != g.item)) bad++;
            if (g.parts > 1) {
                if (g.slot < 0 || g.slot >= pl.nslots || g.slot >= 1024 || slot_used[g.slot]++) bad++;
                if (g.end == g.first) bad++; /* a piece always has units */
            }
            if (parts_of[g.item] < 0) parts_of[g.item] = g.parts;
            else if (parts_of[g.item] != g.parts) bad++;
            seen_parts[g.item][g.part]++;
            for (int u = g.first; u < g.end; u++) cover[g.item][u]++;
            load += g.end - g.first;
        }
        if (load > T + pl.M) bad++;
    }
    for (int i = 0; i < I; i++) {
        for (int u = 0; u < len[i]; u++) bad += cover[i][u] != 1;
        if (parts_of[i] < 1) {
            bad++;
            continue;
        }
        for (int q = 0; q < parts_of[i]; q++) bad += seen_parts[i][q] != 1;
        if (parts_of[i] == 1 && len[i] > T + pl.M) bad++; /* a long item must be split */
        if (parts_of[i] > 1 && len[i] <= T + pl.M) bad++; /* ... and only a long one */
    }
    for (int s = 0; s < pl.nslots && s < 1024; s++) bad += slot_used[s] != 1;
    if (bad) fprintf(stderr, "  plan I %d P %d alpha %d T %d: %d violations\n", I, P, alpha, T, bad);
    CHECK(bad == 0);
}

BSK_TEST(balance_plan_properties)
{
    bsk_rng *r = bsk_test_rng();
    int len[256];
    static const int alphas[3] = {100, 115, 130};
    for (int rep = 0; rep < 300; rep++) {
        const int I = (int)bsk_rng_int(r, 1, 132), P = I + (int)bsk_rng_int(r, 0, rep % 3 ? 8 : 120);
        const int kind = rep % 4;
        for (int i = 0; i < I; i++) {
            if (kind == 0) len[i] = (int)bsk_rng_int(r, 30, 40); /* near-uniform */
            else if (kind == 1) /* power-law-ish: mostly short, a tail of long */
                len[i] = (int)(4.0 / (0.02 + bsk_rng_uniform(r)));
            else if (kind == 2) len[i] = bsk_rng_uniform(r) < 0.05 ? (int)bsk_rng_int(r, 200, 500) : (int)bsk_rng_int(r, 0, 6);
            else len[i] = (int)bsk_rng_int(r, 0, 3); /* tiny and empty items */
            if (len[i] > 500) len[i] = 500;
        }
        for (int a = 0; a < 3; a++) check_plan(t, len, I, P, alphas[a]);
    }
    /* edges: no units at all; one item on one CTA; one giant among empties; as many CTAs as items */
    memset(len, 0, sizeof len);
    check_plan(t, len, 5, 7, 115);
    len[0] = 77;
    check_plan(t, len, 1, 1, 100);
    check_plan(t, len, 1, 132, 115);
    check_plan(t, len, 100, 132, 115);
    for (int i = 0; i < 132; i++) len[i] = 12 + (i % 3);
    check_plan(t, len, 132, 132, 100);
}

/* what the model promised: the library's uniform-like lengths (every item within T + M) stay whole at alpha 1.15, and a
   skewed set is cut so that no CTA runs more than T + M */
BSK_TEST(balance_plan_uniform_whole)
{
    int len[128], xpre[129], cta[132], ypre[133], spre[129];
    bsk_plan pl;
    for (int i = 0; i < 128; i++) len[i] = 12 + (i * 7) % 3; /* 12..14, as b32 NH 4 uniform d 0.1 at 2048^3 */
    bsk_plan_build(len, 128, 132, 115, xpre, cta, ypre, spre, &pl);
    CHECK(pl.nslots == 0);
    for (int i = 0; i < 128; i++) len[i] = i % 16 == 0 ? 60 : 8; /* eight long items */
    const int T = bsk_plan_build(len, 128, 132, 115, xpre, cta, ypre, spre, &pl);
    CHECK(T < 60 && pl.nslots > 0);
    check_plan(t, len, 128, 132, 115);
}
