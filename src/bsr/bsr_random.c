/* bsr_random.c — random BSR patterns (uniform and power-law skewed) for tests and benchmarks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bsr_common.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Blocks per row: uniform keeps round(d*nb) in each row; skewed draws Pareto weights (alpha 1.2) and
   scales them to the same total, capped at nb, the overflow spread to rows with room. */
static int row_counts(int64_t mb, int64_t nb, double d, bsk_pattern p, uint64_t *s, int64_t *cnt)
{
    int64_t total = (int64_t)llround(d * (double)mb * (double)nb);
    if (p == BSK_PATTERN_UNIFORM) {
        for (int64_t i = 0; i < mb; i++) cnt[i] = total / mb + (i < total % mb);
        return 1;
    }
    double *w = (double *)malloc(((size_t)mb + 1) * sizeof *w), sum = 0;
    if (!w) return 0;
    for (int64_t i = 0; i < mb; i++) { w[i] = pow(1.0 - unif(s), -1.0 / 1.2); sum += w[i]; }
    int64_t placed = 0;
    for (int64_t i = 0; i < mb; i++) {
        int64_t c = (int64_t)floor(w[i] / sum * (double)total);
        cnt[i] = c > nb ? nb : c;
        placed += cnt[i];
    }
    for (int64_t i = 0; placed < total; i = (i + 1) % mb)
        if (cnt[i] < nb) { cnt[i]++; placed++; }
    free(w);
    return 1;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

bsk_status bsk_bsr_random(int64_t rows, int64_t cols, int32_t br, int32_t bc, double density, bsk_pattern pattern,
                          uint64_t seed, bsk_dtype dtype, bsk_bsr *out)
{
    if (!out) return BSK_ERR_NULL_POINTER;
    if (rows < 0 || cols < 0 || br <= 0 || bc <= 0 || !(density >= 0.0 && density <= 1.0) ||
        (pattern != BSK_PATTERN_UNIFORM && pattern != BSK_PATTERN_SKEWED) || bsk_dtype_size(dtype) == 0)
        return BSK_ERR_INVALID_ARGUMENT;
    if (rows > BSK_LIMIT_DIM || cols > BSK_LIMIT_DIM || br > BSK_LIMIT_BLOCK || bc > BSK_LIMIT_BLOCK)
        return BSK_ERR_OVERFLOW;
    int64_t mb = (rows + br - 1) / br, nb = (cols + bc - 1) / bc, cells, bsz = (int64_t)br * bc, elems;
    if (!bsk__mul_ok(mb, nb, &cells) || cells > INT32_MAX) return BSK_ERR_OVERFLOW;
    int64_t *cnt = (int64_t *)calloc((size_t)mb + 1, sizeof *cnt);
    int32_t *perm = (int32_t *)malloc(((size_t)nb + 1) * sizeof *perm);
    int32_t *rp = (int32_t *)malloc(((size_t)mb + 1) * sizeof *rp);
    if (!cnt || !perm || !rp) { free(cnt); free(perm); free(rp); return BSK_ERR_OUT_OF_MEMORY; }
    uint64_t s = seed ^ 0x5eed5eedull;
    if (!row_counts(mb, nb, density, pattern, &s, cnt)) { free(cnt); free(perm); free(rp); return BSK_ERR_OUT_OF_MEMORY; }
    rp[0] = 0;
    for (int64_t i = 0; i < mb; i++) rp[i + 1] = rp[i] + (int32_t)cnt[i];
    int64_t nnzb = rp[mb];
    size_t esz = bsk_dtype_size(dtype);
    int32_t *ci = (int32_t *)malloc(((size_t)nnzb + 1) * sizeof *ci);
    void *vals = NULL;
    if (bsk__mul_ok(nnzb, bsz, &elems)) vals = malloc((size_t)elems * esz + 1);
    if (!ci || !vals) { free(cnt); free(perm); free(rp); free(ci); free(vals); return BSK_ERR_OUT_OF_MEMORY; }
    /* Each row chooses cnt[i] distinct columns by a partial Fisher-Yates over 0..nb-1 starting from the
       identity; the swaps are undone afterwards (their partners are kept in the row's col_idx slots), so
       the whole pattern costs O(nb + nnzb log) instead of O(mb*nb) resets and quadratic sorts. */
    for (int64_t j = 0; j < nb; j++) perm[j] = (int32_t)j;
    for (int64_t i = 0; i < mb; i++) {
        int32_t *dst = ci + rp[i];
        for (int64_t j = 0; j < cnt[i]; j++) {
            int64_t r = j + (int64_t)(splitmix(&s) % (uint64_t)(nb - j));
            int32_t tmp = perm[j]; perm[j] = perm[r]; perm[r] = tmp;
            dst[j] = (int32_t)r;
        }
        for (int64_t j = cnt[i] - 1; j >= 0; j--) { /* undo, newest swap first; keep the chosen column */
            int64_t r = dst[j];
            int32_t tmp = perm[j]; perm[j] = perm[r]; perm[r] = tmp;
            dst[j] = perm[r];
        }
        qsort(dst, (size_t)cnt[i], sizeof *dst, cmp_i32);
    }
    for (int64_t i = 0; i < mb; i++)
        for (int32_t k = rp[i]; k < rp[i + 1]; k++)
            for (int32_t r = 0; r < br; r++)
                for (int32_t c = 0; c < bc; c++) {
                    int64_t gr = i * br + r, gc = (int64_t)ci[k] * bc + c;
                    float v = 0.0f;
                    int64_t at = (int64_t)k * bsz + (int64_t)r * bc + c;
                    if (gr < rows && gc < cols) { /* redraw values that are zero once stored (fp16 underflow) */
                        do {
                            v = (float)(2.0 * unif(&s) - 1.0);
                            bsk__store(vals, dtype, at, v);
                        } while (bsk__load(vals, dtype, at) == 0.0f);
                    } else {
                        bsk__store(vals, dtype, at, v);
                    }
                }
    free(cnt);
    free(perm);
    bsk__bsr_host_out(out, rows, cols, br, bc, nnzb, rp, ci, vals, dtype);
    return BSK_SUCCESS;
}
